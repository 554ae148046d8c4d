/*
 * sched_place.c - where a job's GPUs go.
 *
 * Topology first, then fragmentation. A collective is fastest inside one
 * NVLink domain, then inside one node, then under one leaf switch (rack),
 * and slowest across the spine, so a placement takes the smallest of these
 * domains that can hold the whole job. Among domains of that level it takes
 * the best fit (the one with the fewest free GPUs that still suffice), which
 * keeps large holes whole for large jobs.
 *
 *  - one node (k GPUs fit on a node, or the job asks for one node): the
 *    type's bucket lists give the node with the fewest free GPUs >= k in
 *    O(max GPUs per node), without scanning nodes; among those, a node
 *    whose NVLink domain holds all k beats one that would split them;
 *  - a gang of N nodes x g GPUs: the best-fit rack with N nodes having g
 *    free, best-fit nodes inside it; failing that, nodes from the racks with
 *    the most eligible nodes first;
 *  - any spread of k GPUs: the best-fit rack with k free, filling the
 *    fullest-free nodes first so the job spans as few nodes as possible and
 *    finishing on the best-fit node; failing that, racks by free GPUs.
 * Inside a node, GPUs come from the best-fit NVLink domain.
 *
 * MIG: an instance of a profile (c compute, m memory slices, valid starts;
 * on a GPU with a fixed layout only the existing instances of the profile)
 * goes on the MIG GPU with the most slices already in use that has a free
 * valid start, and at the start that leaves the most valid placements of
 * all the type's profiles afterwards. Small profiles therefore drift to the
 * high slices and leave slice 0 open for 4g/7g instances, which is how
 * NVIDIA's own placement table is meant to be packed.
 *
 * Fractional tasks go to sched_share.c.
 *
 * Planning does not commit: the result is left in s->plan.
 */
#include "cr_sched.h"

#include <stdlib.h>
#include <string.h>

#include "cr_alloc.h"
#include "cr_error.h"
#include "sched_int.h"

typedef struct cand {
    uint32_t node;
    uint32_t free;
    uint32_t key; /* sort key (rack weight) */
    int rack;
} cand;

static void plan_reserve(cr_sched *s, uint32_t n)
{
    if (s->cplan < n) {
        s->cplan = n < 64 ? 64 : n;
        s->plan = cr_reallocarray(s->plan, s->cplan, sizeof(*s->plan));
    }
}

static cand *scratch_cands(cr_sched *s, size_t n)
{
    size_t need = (n ? n : 1) * sizeof(cand);
    if (s->cscratch < need) {
        s->cscratch = need * 2;
        s->scratch = cr_realloc(s->scratch, s->cscratch);
    }
    return s->scratch;
}

static uint32_t nt_find(const cr_sched *s, uint32_t n, int type)
{
    const node *nd = &s->nodes[n];
    for (uint32_t i = nd->nt_first; i < nd->nt_first + nd->nnt; i++) {
        if (s->nts[i].type == type) {
            return i;
        }
    }
    return NT_NONE;
}

bool cr__sched_node_ok(const cr_sched *s, const job *j, uint32_t n)
{
    const node *nd = &s->nodes[n];
    if (nd->excl_job && nd->excl_job != j->spec.id) {
        return false; /* held whole by an exclusive job */
    }
    if (!cr__sched_host_fits(nd, j->spec.cpu_milli, j->spec.host_mem_bytes)) {
        return false; /* no room for its CPU or host memory */
    }
    if (j->spec.node_mask &&
        (n >= j->spec.node_mask_bits || !(j->spec.node_mask[n / 8] & (1u << (n % 8))))) {
        return false;
    }
    if (j->spec.exclusive) {
        for (uint32_t g = 0; g < nd->ngpu; g++) {
            if (nd->gpus[g].job || nd->gpus[g].mig_used) {
                return false; /* something runs there */
            }
        }
    }
    return true;
}

/* Free GPUs of the type on node n usable by job j (0 if memory too small
 * or the node is not one j may use). */
static uint32_t node_free(const cr_sched *s, const job *j, uint32_t n, int type, uint64_t mem)
{
    uint32_t k = nt_find(s, n, type);
    if (k == NT_NONE || s->nodes[n].state != CR_NODE_UP || s->nts[k].mem_bytes < mem ||
        !cr__sched_node_ok(s, j, n)) {
        return 0;
    }
    return s->nts[k].free;
}

/* Append cnt GPUs of the type from node n to s->plan at *pos: best-fit
 * NVLink domain first, else domains with the most free first. */
void cr__sched_pick_gpus(cr_sched *s, uint32_t n, int type, uint32_t cnt, uint32_t *pos)
{
    const node *nd = &s->nodes[n];
    uint16_t dom[CR_SCHED_MAX_NODE_GPUS];
    uint32_t dfree[CR_SCHED_MAX_NODE_GPUS];
    bool used[CR_SCHED_MAX_NODE_GPUS];
    uint32_t ndom = 0;
    for (uint32_t g = 0; g < nd->ngpu; g++) {
        const gpu *gp = &nd->gpus[g];
        if (gp->type != type || gp->bad || gp->mig || gp->job || gp->sh_n) {
            continue;
        }
        uint32_t d = 0;
        while (d < ndom && dom[d] != gp->nvlink) {
            d++;
        }
        if (d == ndom) {
            dom[ndom] = gp->nvlink;
            dfree[ndom++] = 0;
        }
        dfree[d]++;
    }
    memset(used, 0, sizeof(used));
    while (cnt > 0) {
        /* best-fit domain holding the rest, else the largest */
        uint32_t best = UINT32_MAX, largest = UINT32_MAX;
        for (uint32_t d = 0; d < ndom; d++) {
            if (used[d] || dfree[d] == 0) {
                continue;
            }
            if (dfree[d] >= cnt && (best == UINT32_MAX || dfree[d] < dfree[best])) {
                best = d;
            }
            if (largest == UINT32_MAX || dfree[d] > dfree[largest]) {
                largest = d;
            }
        }
        uint32_t d = best != UINT32_MAX ? best : largest;
        if (d == UINT32_MAX) {
            return; /* cannot happen: counters say enough are free */
        }
        used[d] = true;
        /* shareable GPUs last: they are the only room fractional tasks have */
        for (int pass = 0; pass < 2; pass++) {
            for (uint32_t g = 0; g < nd->ngpu && cnt > 0; g++) {
                const gpu *gp = &nd->gpus[g];
                if (gp->type == type && !gp->bad && !gp->mig && !gp->job && !gp->sh_n &&
                    gp->nvlink == dom[d] && gp->share == (pass == 1)) {
                    s->plan[*pos] = (cr_sched_slot){.node = n, .gpu = (uint16_t)g, .mig_start = -1};
                    (*pos)++;
                    cnt--;
                }
            }
        }
    }
}

/* Does one NVLink domain of node n hold k free GPUs of the type? */
static bool domain_fits(const cr_sched *s, uint32_t n, int type, uint32_t k)
{
    const node *nd = &s->nodes[n];
    if (!nd->multi_domain) {
        return true;
    }
    uint16_t dom[CR_SCHED_MAX_NODE_GPUS];
    uint32_t cnt[CR_SCHED_MAX_NODE_GPUS], nd_ = 0;
    for (uint32_t g = 0; g < nd->ngpu; g++) {
        const gpu *gp = &nd->gpus[g];
        if (gp->type != type || gp->bad || gp->mig || gp->job || gp->sh_n) {
            continue;
        }
        uint32_t d = 0;
        while (d < nd_ && dom[d] != gp->nvlink) {
            d++;
        }
        if (d == nd_) {
            dom[nd_] = gp->nvlink;
            cnt[nd_++] = 0;
        }
        if (++cnt[d] >= k) {
            return true;
        }
    }
    return false;
}

/* Best-fit single node with >= k free of the type, UINT32_MAX if none.
 * Among the fullest nodes that suffice, one whose NVLink domain holds the
 * whole job wins over one that would split it (up to DOMAIN_PROBES
 * candidates are looked at; nodes with one domain always fit). */
#define DOMAIN_PROBES 16

/* Free shareable GPUs of the type on node n. */
static uint32_t shared_free(const cr_sched *s, uint32_t n, int type)
{
    const node *nd = &s->nodes[n];
    uint32_t c = 0;
    for (uint32_t g = 0; g < nd->ngpu; g++) {
        const gpu *gp = &nd->gpus[g];
        c += gp->share && gp->type == type && !gp->bad && !gp->mig && !gp->job && !gp->sh_n;
    }
    return c;
}

/* Among the fitting nodes of one bucket from record i (which fits), the
 * one with the fewest free shareable GPUs: whole jobs leave those to
 * fractional tasks, which can go nowhere else. */
static uint32_t fewest_shared(const cr_sched *s, const job *j, uint32_t i, int type, uint32_t k,
                              uint64_t mem)
{
    uint32_t best = s->nts[i].node, bsh = shared_free(s, best, type);
    int probes = 0;
    for (i = s->nts[i].next; i != NT_NONE && bsh > 0 && ++probes < DOMAIN_PROBES;
         i = s->nts[i].next) {
        uint32_t n = s->nts[i].node;
        if (s->nts[i].mem_bytes < mem || !cr__sched_node_ok(s, j, n) ||
            (k > 1 && !domain_fits(s, n, type, k))) {
            continue;
        }
        uint32_t sh = shared_free(s, n, type);
        if (sh < bsh) {
            best = n;
            bsh = sh;
        }
    }
    return best;
}

static bool preferred(const job *j, uint32_t n)
{
    return j->spec.prefer_mask && n < j->spec.prefer_mask_bits &&
           (j->spec.prefer_mask[n / 8] & (1u << (n % 8)));
}

static uint32_t best_node(const cr_sched *s, const job *j, int type, uint32_t k, uint64_t mem)
{
    const gtype *g = &s->types[type];
    if (j->spec.prefer_mask && !g->nsh) {
        /* Locality first (docs/data.md): the best-fit node that already
         * holds the job's data, when one fits; a full scan of the type's
         * fitting nodes, for jobs with data only. */
        for (uint32_t c = k; c <= g->max_node; c++) {
            for (uint32_t i = g->bucket[c]; i != NT_NONE; i = s->nts[i].next) {
                uint32_t n = s->nts[i].node;
                if (preferred(j, n) && s->nts[i].mem_bytes >= mem && cr__sched_node_ok(s, j, n) &&
                    (k <= 1 || domain_fits(s, n, type, k))) {
                    return n;
                }
            }
        }
    }
    uint32_t first = UINT32_MAX;
    int probes = 0;
    for (uint32_t c = k; c <= g->max_node; c++) {
        for (uint32_t i = g->bucket[c]; i != NT_NONE; i = s->nts[i].next) {
            if (s->nts[i].mem_bytes < mem || !cr__sched_node_ok(s, j, s->nts[i].node)) {
                continue;
            }
            uint32_t n = s->nts[i].node;
            if (k <= 1 || domain_fits(s, n, type, k)) {
                return g->nsh ? fewest_shared(s, j, i, type, k, mem) : n;
            }
            if (first == UINT32_MAX) {
                first = n;
            }
            if (++probes >= DOMAIN_PROBES) {
                return first;
            }
        }
    }
    return first;
}

static int cmp_free_asc(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->free != y->free) {
        return x->free < y->free ? -1 : 1;
    }
    return x->node < y->node ? -1 : x->node > y->node;
}

static int cmp_free_desc(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->free != y->free) {
        return x->free > y->free ? -1 : 1;
    }
    return x->node < y->node ? -1 : x->node > y->node;
}

static int cmp_gang_spine(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->key != y->key) {
        return x->key > y->key ? -1 : 1;
    }
    if (x->rack != y->rack) {
        return x->rack < y->rack ? -1 : 1;
    }
    return cmp_free_asc(a, b);
}

static int plan_gang(cr_sched *s, const job *j, int type, uint32_t nn, uint32_t g)
{
    uint64_t mem = j->spec.mem_bytes;
    uint32_t k = nn * g;
    /* best-fit rack with nn eligible nodes */
    int best = -1;
    for (int r = 0; r < s->nracks; r++) {
        const rack_rec *rk = &s->racks[r];
        if (rk->free[type] < k || (best >= 0 && rk->free[type] >= s->racks[best].free[type])) {
            continue;
        }
        uint32_t elig = 0;
        for (uint32_t i = 0; i < rk->nnodes && elig < nn; i++) {
            elig += node_free(s, j, rk->nodes[i], type, mem) >= g;
        }
        if (elig >= nn) {
            best = r;
        }
    }
    uint32_t nc = 0;
    cand *c;
    if (best >= 0) {
        const rack_rec *rk = &s->racks[best];
        c = scratch_cands(s, rk->nnodes);
        for (uint32_t i = 0; i < rk->nnodes; i++) {
            uint32_t f = node_free(s, j, rk->nodes[i], type, mem);
            if (f >= g) {
                c[nc++] = (cand){.node = rk->nodes[i], .free = f, .rack = best};
            }
        }
        qsort(c, nc, sizeof(*c), cmp_free_asc);
    } else {
        /* across the spine: every eligible node, racks with most first */
        const gtype *gt = &s->types[type];
        size_t cap = 0;
        for (uint32_t f = g; f <= gt->max_node; f++) {
            for (uint32_t i = gt->bucket[f]; i != NT_NONE; i = s->nts[i].next) {
                cap++;
            }
        }
        if (cap < nn) {
            return CR_EAGAIN;
        }
        c = scratch_cands(s, cap + (size_t)s->nracks);
        uint32_t *per_rack = (uint32_t *)(void *)(c + cap);
        memset(per_rack, 0, (size_t)s->nracks * sizeof(uint32_t));
        for (uint32_t f = g; f <= gt->max_node; f++) {
            for (uint32_t i = gt->bucket[f]; i != NT_NONE; i = s->nts[i].next) {
                if (s->nts[i].mem_bytes < mem || !cr__sched_node_ok(s, j, s->nts[i].node)) {
                    continue;
                }
                uint32_t n = s->nts[i].node;
                c[nc++] = (cand){.node = n, .free = f, .rack = s->nodes[n].rack};
                per_rack[s->nodes[n].rack]++;
            }
        }
        if (nc < nn) {
            return CR_EAGAIN;
        }
        for (uint32_t i = 0; i < nc; i++) {
            c[i].key = per_rack[c[i].rack];
        }
        qsort(c, nc, sizeof(*c), cmp_gang_spine);
    }
    if (nc < nn) {
        return CR_EAGAIN;
    }
    uint32_t pos = 0;
    for (uint32_t i = 0; i < nn; i++) {
        cr__sched_pick_gpus(s, c[i].node, type, g, &pos);
    }
    return 0;
}

/* Fill k GPUs from candidates sorted by free desc: whole nodes first, the
 * remainder on the best-fit node. */
static void fill_desc(cr_sched *s, cand *c, uint32_t nc, int type, uint32_t k, uint32_t *pos)
{
    uint32_t i = 0;
    while (k > 0 && i < nc) {
        if (c[i].free >= k) {
            uint32_t b = i;
            while (b + 1 < nc && c[b + 1].free >= k) {
                b++;
            }
            cr__sched_pick_gpus(s, c[b].node, type, k, pos);
            return;
        }
        cr__sched_pick_gpus(s, c[i].node, type, c[i].free, pos);
        k -= c[i].free;
        i++;
    }
}

static int plan_spread(cr_sched *s, const job *j, int type, uint32_t k)
{
    uint64_t mem = j->spec.mem_bytes;
    int best = -1;
    for (int r = 0; r < s->nracks; r++) {
        uint32_t f = s->racks[r].free[type];
        if (f >= k && (best < 0 || f < s->racks[best].free[type])) {
            best = r;
        }
    }
    uint32_t pos = 0;
    if (best >= 0) {
        const rack_rec *rk = &s->racks[best];
        cand *c = scratch_cands(s, rk->nnodes);
        uint32_t nc = 0, sum = 0;
        for (uint32_t i = 0; i < rk->nnodes; i++) {
            uint32_t f = node_free(s, j, rk->nodes[i], type, mem);
            if (f) {
                c[nc++] = (cand){.node = rk->nodes[i], .free = f};
                sum += f;
            }
        }
        if (sum >= k) {
            qsort(c, nc, sizeof(*c), cmp_free_desc);
            fill_desc(s, c, nc, type, k, &pos);
            return 0;
        }
        /* memory excluded some nodes: fall through to the spine */
    }
    /* across the spine: all nodes, grouped by rack, racks by free desc */
    const gtype *gt = &s->types[type];
    size_t cap = 0;
    for (uint32_t f = 1; f <= gt->max_node; f++) {
        for (uint32_t i = gt->bucket[f]; i != NT_NONE; i = s->nts[i].next) {
            cap++;
        }
    }
    cand *c = scratch_cands(s, cap);
    uint32_t nc = 0, sum = 0;
    for (uint32_t f = 1; f <= gt->max_node; f++) {
        for (uint32_t i = gt->bucket[f]; i != NT_NONE; i = s->nts[i].next) {
            if (s->nts[i].mem_bytes >= mem && cr__sched_node_ok(s, j, s->nts[i].node)) {
                uint32_t n = s->nts[i].node;
                int r = s->nodes[n].rack;
                c[nc++] = (cand){.node = n, .free = f, .rack = r, .key = s->racks[r].free[type]};
                sum += f;
            }
        }
    }
    if (sum < k) {
        return CR_EAGAIN;
    }
    /* racks with the most free first, whole nodes first inside each */
    qsort(c, nc, sizeof(*c), cmp_gang_spine);
    /* within this order, take nodes until k: simple fill (the greedy
     * best-fit remainder only pays off inside one rack) */
    for (uint32_t i = 0; i < nc && k > 0; i++) {
        uint32_t take = c[i].free < k ? c[i].free : k;
        cr__sched_pick_gpus(s, c[i].node, type, take, &pos);
        k -= take;
    }
    return 0;
}

static int popcount8(uint32_t x)
{
    return __builtin_popcount(x & 0xffu);
}

/* Valid placements of all the type's profiles left on a GPU with used mask
 * and compute slices in use (with a fixed layout: its free instances). */
static int mig_room(const gtype *t, const gpu *g, uint32_t used, int cused)
{
    int n = 0;
    if (g->mig_nfix) {
        for (int i = 0; i < g->mig_nfix; i++) {
            n += !(used & (((1u << g->mig_fix_mem[i]) - 1) << g->mig_fix_start[i]));
        }
        return n;
    }
    for (int p = 0; p < t->nprof; p++) {
        const mig_prof *pr = &t->profs[p];
        if (cused + pr->compute > t->mig_compute) {
            continue;
        }
        for (int st = 0; st < t->mig_mem; st++) {
            uint32_t m = ((1u << pr->mem) - 1) << st;
            if ((pr->start_mask & (1u << st)) && !(used & m)) {
                n++;
            }
        }
    }
    return n;
}

bool cr__sched_mig_dyn_ok(const gtype *t, const gpu *g, int start, const mig_prof *pr)
{
    uint32_t m = ((1u << pr->mem) - 1) << start;
    if (!g->mig_dynamic || !g->mig_nfix || (g->mig_used & m) || start + pr->mem > t->mig_mem) {
        return false;
    }
    int compute = pr->compute;
    for (int i = 0; i < g->mig_nfix; i++) {
        uint32_t im = ((1u << g->mig_fix_mem[i]) - 1) << g->mig_fix_start[i];
        if (!(im & m)) {
            compute += g->mig_fix_compute[i]; /* stays */
        }
    }
    return compute <= t->mig_compute;
}

static int plan_mig(cr_sched *s, const job *j, int type, const mig_prof *pr)
{
    gtype *t = &s->types[type];
    uint32_t k = j->spec.gpu_count, pos = 0;
    int rc = 0;
    while (pos < k) {
        uint32_t bestg = UINT32_MAX;
        int bestused = -1, beststart = -1, bestroom = -1;
        /* existing instances first; repartition a dynamic GPU only when
         * none fits anywhere */
        for (int pass = 0; pass < 2 && bestg == UINT32_MAX; pass++) {
            for (uint32_t i = 0; i < t->nmig; i++) {
                uint32_t n = t->mig_gpus[i] >> 8, gi = t->mig_gpus[i] & 0xff;
                const gpu *g = &s->nodes[n].gpus[gi];
                if (s->nodes[n].state != CR_NODE_UP || g->bad ||
                    g->mig_compute_used + pr->compute > t->mig_compute ||
                    !cr__sched_node_ok(s, j, n)) {
                    continue;
                }
                int used = popcount8(g->mig_used);
                if (used < bestused) {
                    continue;
                }
                for (int st = 0; st < t->mig_mem; st++) {
                    uint32_t m = ((1u << pr->mem) - 1) << st;
                    if (!(pr->start_mask & (1u << st)) || (g->mig_used & m) ||
                        (g->mig_nfix && !cr__sched_mig_fixed_has(g, st, pr->mem, pr->compute) &&
                         (pass == 0 || k > 1 || !cr__sched_mig_dyn_ok(t, g, st, pr)))) {
                        continue;
                    }
                    int room = mig_room(t, g, g->mig_used | m, g->mig_compute_used + pr->compute);
                    if (used > bestused || room > bestroom) {
                        bestg = i;
                        bestused = used;
                        beststart = st;
                        bestroom = room;
                    }
                }
            }
        }
        if (bestg == UINT32_MAX) {
            rc = CR_EAGAIN;
            break;
        }
        uint32_t n = t->mig_gpus[bestg] >> 8, gi = t->mig_gpus[bestg] & 0xff;
        gpu *g = &s->nodes[n].gpus[gi];
        /* take it for now so the next instance sees it; undone below */
        g->mig_used |= (uint8_t)(((1u << pr->mem) - 1) << beststart);
        g->mig_compute_used = (uint8_t)(g->mig_compute_used + pr->compute);
        s->plan[pos++] = (cr_sched_slot){.node = n,
                                         .gpu = (uint16_t)gi,
                                         .mig_start = (int8_t)beststart,
                                         .mig_mem = pr->mem,
                                         .mig_compute = pr->compute};
    }
    for (uint32_t i = 0; i < pos; i++) {
        gpu *g = &s->nodes[s->plan[i].node].gpus[s->plan[i].gpu];
        g->mig_used &= (uint8_t) ~(((1u << s->plan[i].mig_mem) - 1) << s->plan[i].mig_start);
        g->mig_compute_used = (uint8_t)(g->mig_compute_used - s->plan[i].mig_compute);
    }
    return rc;
}

int cr__sched_plan(cr_sched *s, const job *j, int type, uint32_t *n_out)
{
    uint32_t k = j->spec.gpu_count, nn = j->spec.node_count;
    plan_reserve(s, k);
    int rc;
    if (s->host_model && !j->mig[0] &&
        (cr__sched_frac(j) || nn == 1 || (nn == 0 && k <= s->types[type].max_node))) {
        rc = cr__sched_plan_host(s, j, type, n_out);
        if (rc == 0 || cr__sched_frac(j) || nn == 1) {
            return rc;
        }
        /* no node holds it whole: spread as below */
    }
    if (cr__sched_frac(j)) {
        rc = cr__sched_plan_share(s, j, type);
        if (rc == 0) {
            *n_out = 1;
        }
        return rc;
    }
    if (j->mig[0]) {
        const mig_prof *pr = cr__sched_mig_find(s, type, j->mig);
        if (!pr) {
            return CR_ENOENT;
        }
        rc = plan_mig(s, j, type, pr);
    } else if (s->types[type].free < k) {
        return CR_ENOSPC;
    } else if (nn > 1) {
        rc = plan_gang(s, j, type, nn, k / nn);
    } else {
        uint32_t n =
            k <= s->types[type].max_node ? best_node(s, j, type, k, j->spec.mem_bytes) : UINT32_MAX;
        if (n != UINT32_MAX) {
            uint32_t pos = 0;
            cr__sched_pick_gpus(s, n, type, k, &pos);
            rc = 0;
        } else if (nn == 1) {
            rc = CR_EAGAIN;
        } else {
            rc = plan_spread(s, j, type, k);
        }
    }
    if (rc == 0) {
        *n_out = k;
    }
    return rc;
}
