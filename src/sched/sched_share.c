/*
 * sched_share.c - fractional tasks on shared GPUs.
 *
 * A job with gpu_milli (1..999 thousandths of a GPU) or gpu_mem_bytes asks
 * for part of one GPU. It may go only on a GPU marked shareable, healthy,
 * not in MIG mode and not held by a whole-GPU job; the fractions on one GPU
 * sum to at most 1000 and the memory asked to at most the GPU's memory. A
 * shareable GPU with no fractional task on it is an ordinary free whole
 * GPU; the first fractional task takes it out of the whole-GPU counters and
 * the last one to leave gives it back, so whole-GPU jobs and fractional
 * tasks never meet on one GPU.
 *
 * Which shareable GPU (config share_policy):
 *  - best-fit: the least compute left after the task (packs, keeps whole
 *    GPUs whole);
 *  - worst-fit: the most left (spreads, the classic load balancer);
 *  - frag (default): fragmentation-aware, after the idea of FGD (Weng et
 *    al., "Beware of Fragmentation", USENIX ATC'23), in our own terms:
 *
 *    The scheduler remembers the sizes of the last CR_SCHED_MIX_WINDOW
 *    tasks submitted: a distribution p(m) over task sizes m, in thousandths
 *    of a GPU (m < 1000: a fractional task; m = 1000 k: k whole GPUs on a
 *    node). For a node and one GPU type, with f_g the free thousandths of
 *    GPU g (1000 when nothing holds it, 1000 - held for a shared GPU, 0 when
 *    a whole job holds it) and F the number of entirely free GPUs, the part
 *    of the node's free capacity that a task of size m cannot use is
 *
 *      frag(m) = sum over shareable g with f_g < m of f_g       (m < 1000)
 *      frag(m) = sum over g with 0 < f_g < 1000 of f_g
 *                + (F < k ? 1000 F : 0)                          (m = 1000 k)
 *
 *    and the expected fragmentation of the node is E = sum_m p(m) frag(m).
 *    A task of size c placed on GPU g changes f_g to f_g - c (and F by one
 *    when g was entirely free); the policy takes the GPU where E grows
 *    least, then the one with the least left (best fit), then the lowest
 *    node and GPU index. Only the chosen node's E changes, and only through
 *    g, so the growth is computed per candidate in O(1) from two tables
 *    rebuilt when the mix changes: T[f] = f * P(m > f) over fractional
 *    sizes, and W[F] = sum over whole sizes k > F of p(k) * 1000 F.
 *    Memory is a constraint only; the score counts compute.
 *
 * Placing a task costs one pass over the type's shareable GPUs.
 */
#include "cr_sched.h"

#include <stdlib.h>
#include <string.h>

#include "cr_alloc.h"
#include "cr_error.h"
#include "sched_int.h"

static const char *const share_names[CR_SHARE_POLICY_COUNT] = {"frag", "best-fit", "worst-fit"};

int cr_sched_share_policy_parse(const char *name, cr_sched_share_policy *out)
{
    for (int i = 0; name && i < CR_SHARE_POLICY_COUNT; i++) {
        if (strcmp(name, share_names[i]) == 0) {
            *out = (cr_sched_share_policy)i;
            return 0;
        }
    }
    return CR_EINVAL;
}

const char *cr_sched_share_policy_name(cr_sched_share_policy p)
{
    return (unsigned)p < CR_SHARE_POLICY_COUNT ? share_names[p] : "?";
}

uint32_t cr__sched_share_milli(const job *j, const gpu *g)
{
    if (j->spec.gpu_milli > 0) {
        return j->spec.gpu_milli;
    }
    return cr__sched_mem_milli(j->spec.gpu_mem_bytes, g->mem_bytes);
}

bool cr__sched_share_any(const cr_sched *s, int type)
{
    const gtype *t = &s->types[type];
    for (uint32_t i = 0; i < t->nsh; i++) {
        const node *nd = &s->nodes[t->sh_gpus[i] >> 8];
        const gpu *g = &nd->gpus[t->sh_gpus[i] & 0xff];
        if (nd->state == CR_NODE_UP && !g->bad && !g->mig) {
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------------------------------ */
/* The mix of recent task sizes                                             */

/* Size of a task in thousandths (0 = not counted: MIG). */
static uint32_t task_size(const cr_sched *s, const cr_sched_job_spec *sp)
{
    if (sp->mig_profile && sp->mig_profile[0]) {
        return 0;
    }
    if (sp->gpu_milli > 0) {
        return sp->gpu_milli;
    }
    if (sp->gpu_mem_bytes > 0) {
        uint64_t gmem = 0;
        if (sp->gpu_type >= 0) {
            gmem = s->types[sp->gpu_type].mem_bytes;
        } else {
            for (int t = 0; t < s->ntypes; t++) {
                if (s->types[t].mem_bytes && (!gmem || s->types[t].mem_bytes < gmem)) {
                    gmem = s->types[t].mem_bytes;
                }
            }
        }
        uint32_t m = cr__sched_mem_milli(sp->gpu_mem_bytes, gmem);
        return m >= 1000 ? 999 : m;
    }
    uint32_t k = sp->node_count ? sp->gpu_count / sp->node_count : sp->gpu_count;
    return (k > CR_SCHED_MAX_NODE_GPUS ? CR_SCHED_MAX_NODE_GPUS : k) * 1000;
}

/* Record a task shape (size in thousandths, CPU) in the recent mix. */
static void mix_add(mix *x, uint32_t size, uint64_t cpu)
{
    if (x->n == CR_SCHED_MIX_WINDOW) {
        x->count[x->ring[x->pos]]--; /* the oldest leaves */
    } else {
        x->n++;
    }
    /* its class: the same shape, else a new (or emptied) class, else the
     * nearest shape when all MIX_CLASSES are in use (sizes first: a
     * thousandth of a GPU weighs as 100 thousandths of a core) */
    uint32_t c = UINT32_MAX, empty = UINT32_MAX, near = 0;
    uint64_t dist = UINT64_MAX;
    for (uint32_t i = 0; i < x->nclass && c == UINT32_MAX; i++) {
        uint64_t d = (x->size[i] > size ? x->size[i] - size : size - x->size[i]) * 100u;
        d += x->cpu[i] > cpu ? x->cpu[i] - cpu : cpu - x->cpu[i];
        if (d == 0) {
            c = i;
        } else if (x->count[i] == 0 && empty == UINT32_MAX) {
            empty = i;
        } else if (d < dist) {
            dist = d;
            near = i;
        }
    }
    if (c == UINT32_MAX) {
        if (empty != UINT32_MAX) {
            c = empty;
        } else if (x->nclass < MIX_CLASSES) {
            c = x->nclass++;
        } else {
            c = near;
            size = x->size[near];
            cpu = x->cpu[near];
        }
        x->size[c] = size;
        x->cpu[c] = cpu;
    }
    x->count[c]++;
    x->ring[x->pos] = c;
    x->pos = (x->pos + 1) % CR_SCHED_MIX_WINDOW;
}

void cr__sched_mix_note(cr_sched *s, const cr_sched_job_spec *sp)
{
    uint32_t size = task_size(s, sp);
    if (size == 0) {
        return;
    }
    /* CPU is part of the shape only where nodes model it (else every
     * shape has 0 and the classes are those of the sizes alone) */
    mix_add(&s->mix, size, s->host_model ? sp->cpu_milli : 0);
}

/* ------------------------------------------------------------------------ */
/* Placement                                                                */

/* Scoring tables (see the essay above), in units of p * thousandths. */
typedef struct ftab {
    double frac[1001];                        /* T[f] */
    double whole[CR_SCHED_MAX_NODE_GPUS + 1]; /* W[F] */
    double pwhole;                            /* P(m >= 1000) */
} ftab;

static void ftab_build(const mix *x, ftab *t)
{
    double gt[1002];
    memset(gt, 0, sizeof(gt));
    memset(t, 0, sizeof(*t));
    double total = 0;
    for (uint32_t i = 0; i < x->nclass; i++) {
        total += x->count[i];
    }
    if (total <= 0) {
        return;
    }
    for (uint32_t i = 0; i < x->nclass; i++) {
        if (!x->count[i]) {
            continue;
        }
        double p = x->count[i] / total;
        if (x->size[i] < 1000) {
            gt[x->size[i]] += p; /* P(m = size) */
        } else {
            uint32_t k = x->size[i] / 1000;
            t->pwhole += p;
            for (uint32_t f = 0; f < k && f <= CR_SCHED_MAX_NODE_GPUS; f++) {
                t->whole[f] += p * 1000.0 * f;
            }
        }
    }
    /* P(m > f) over fractional sizes, by a suffix sum */
    double acc = 0;
    for (int f = 1000; f >= 0; f--) {
        t->frac[f] = f * acc;
        acc += gt[f];
    }
}

static double partial(uint32_t f)
{
    return f > 0 && f < 1000 ? (double)f : 0.0;
}

/* Growth of the node's expected fragmentation when GPU free f goes to f2,
 * with nfree entirely free GPUs on the node before. */
static double frag_delta(const ftab *t, uint32_t f, uint32_t f2, uint32_t nfree)
{
    double d = t->frac[f2] - t->frac[f];
    d += t->pwhole * (partial(f2) - partial(f));
    if (f == 1000 && nfree > 0) {
        uint32_t a = nfree > CR_SCHED_MAX_NODE_GPUS ? CR_SCHED_MAX_NODE_GPUS : nfree;
        d += t->whole[a - 1] - t->whole[a];
    }
    return d;
}

/* Entirely free GPUs of the type on node n (the whole-GPU counter). */
static uint32_t node_free_whole(const cr_sched *s, uint32_t n, int type)
{
    const node *nd = &s->nodes[n];
    for (uint32_t i = nd->nt_first; i < nd->nt_first + nd->nnt; i++) {
        if (s->nts[i].type == type) {
            return s->nts[i].free;
        }
    }
    return 0;
}

int cr__sched_plan_share(cr_sched *s, const job *j, int type)
{
    const gtype *t = &s->types[type];
    ftab tab;
    cr_sched_share_policy pol = s->cfg.share_policy;
    if (pol == CR_SHARE_FRAG) {
        ftab_build(&s->mix, &tab);
    }
    uint32_t best = UINT32_MAX, best_left = 0, best_milli = 0;
    double best_score = 0;
    for (uint32_t i = 0; i < t->nsh; i++) {
        uint32_t n = t->sh_gpus[i] >> 8, gi = t->sh_gpus[i] & 0xff;
        const node *nd = &s->nodes[n];
        const gpu *g = &nd->gpus[gi];
        if (nd->state != CR_NODE_UP || g->bad || g->mig || g->job ||
            g->mem_bytes < j->spec.mem_bytes || !cr__sched_node_ok(s, j, n)) {
            continue;
        }
        uint32_t c = cr__sched_share_milli(j, g);
        if (g->sh_milli + c > 1000 || g->sh_mem + j->spec.gpu_mem_bytes > g->mem_bytes) {
            continue;
        }
        uint32_t f = 1000u - g->sh_milli, left = f - c;
        double score;
        switch (pol) {
        case CR_SHARE_BEST_FIT:
            score = left;
            break;
        case CR_SHARE_WORST_FIT:
            score = -(double)left;
            break;
        default:
            score = frag_delta(&tab, f, left, g->sh_n ? 0 : node_free_whole(s, n, type));
            break;
        }
        /* ties: the least left, then the first in order */
        if (best == UINT32_MAX || score < best_score - 1e-9 ||
            (score <= best_score + 1e-9 && left < best_left)) {
            best = i;
            best_score = score;
            best_left = left;
            best_milli = c;
        }
    }
    if (best == UINT32_MAX) {
        return CR_ENOSPC;
    }
    s->plan[0] = (cr_sched_slot){.node = t->sh_gpus[best] >> 8,
                                 .gpu = (uint16_t)(t->sh_gpus[best] & 0xff),
                                 .mig_start = -1,
                                 .milli = (uint16_t)best_milli};
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Node-level placement with host resources (FGD's model)                   */

/*
 * When nodes model CPU or host memory (s->host_model), a single-node task
 * (fractional, or k whole GPUs on one node) is placed by a scan of the
 * nodes, as in FGD's simulator, not by the GPU-level pass above: a node
 * qualifies when its GPUs of the type hold the task and its CPU and memory
 * have room (cr__sched_node_ok). The node's view is the free thousandths
 * left_g of each GPU g of the type (1000 when free, 1000 - held when
 * shared, 0 when a whole or MIG job holds it or it is bad) and the CPU
 * left. Score, lowest wins:
 *
 *  - best-fit: 0.5 (cpu_left - cpu) / CPU_max + 0.5 (L - ask) / (1000 G_max),
 *    L = sum of left_g, CPU_max and G_max the largest node's CPU and GPU
 *    count (FGD's BestFit, 50/50 on CPU and GPU);
 *  - worst-fit: minus that;
 *  - frag: the growth of the node's expected fragmentation
 *      F(node) = sum over shapes m of p(m) frag(node, m)
 *    where p is the mix of recent task shapes (size u thousandths per GPU
 *    on k GPUs, CPU c; learned from the arrivals so far) and
 *      frag(node, m) = sum of left_g over GPUs a task of m cannot use
 *                      (left_g < u, or not shareable when u < 1000)
 *                      if the node can host m (k usable GPUs, c CPU left),
 *                    = L otherwise
 *    (FGD's definition, Weng et al. ATC'23, section 4); ties by best-fit.
 *
 * Inside the node a fractional task takes the GPU with the best score
 * (frag: the least growth; then the least left), k whole GPUs come from the
 * best-fit NVLink domain. F of a node state is memoised per placement by
 * the state's signature (CPU left and the sorted left_g), so identical
 * nodes (all the empty ones) cost one evaluation.
 */

#define HV_SHARE 0x800u /* left_g flag: shareable and usable by fractional tasks */
#define MEMO_CAP 4096

typedef struct hview {
    uint32_t g[CR_SCHED_MAX_NODE_GPUS]; /* left_g | HV_SHARE */
    uint32_t idx[CR_SCHED_MAX_NODE_GPUS];
    uint32_t ng;
    uint64_t cpu_left; /* UINT64_MAX: not modelled */
} hview;

typedef struct memo {
    uint64_t key[MEMO_CAP];
    double val[MEMO_CAP];
    bool used[MEMO_CAP];
} memo;

static uint32_t hv_left(uint32_t v)
{
    return v & 0x7ffu;
}

/* frag(node, m) of one shape. */
static double shape_frag(const hview *v, uint32_t size, uint64_t cpu, uint32_t total)
{
    uint32_t u = size < 1000 ? size : 1000, k = size < 1000 ? 1 : size / 1000;
    uint32_t usable = 0, lost = 0;
    for (uint32_t i = 0; i < v->ng; i++) {
        uint32_t l = hv_left(v->g[i]);
        bool ok = size < 1000 ? (v->g[i] & HV_SHARE) && l >= u : l == 1000;
        if (ok) {
            usable++;
        } else {
            lost += l;
        }
    }
    if (usable < k || (v->cpu_left != UINT64_MAX && v->cpu_left < cpu)) {
        return total;
    }
    return lost;
}

static double node_F(const cr_sched *s, const hview *v, memo *mm)
{
    const mix *x = &s->mix;
    if (x->n == 0) {
        return 0;
    }
    /* signature: sorted GPU views and the CPU left */
    uint32_t sorted[CR_SCHED_MAX_NODE_GPUS];
    uint32_t total = 0;
    for (uint32_t i = 0; i < v->ng; i++) {
        uint32_t e = v->g[i], p = i;
        total += hv_left(e);
        while (p > 0 && sorted[p - 1] > e) {
            sorted[p] = sorted[p - 1];
            p--;
        }
        sorted[p] = e;
    }
    uint64_t h = v->cpu_left * UINT64_C(0x9E3779B97F4A7C15) ^ v->ng;
    for (uint32_t i = 0; i < v->ng; i++) {
        h = (h ^ sorted[i]) * UINT64_C(0x100000001B3);
    }
    uint32_t slot = (uint32_t)(h >> 40) % MEMO_CAP;
    if (mm && mm->used[slot] && mm->key[slot] == h) {
        return mm->val[slot];
    }
    double f = 0;
    for (uint32_t c = 0; c < x->nclass; c++) {
        if (x->count[c]) {
            f += (double)x->count[c] * shape_frag(v, x->size[c], x->cpu[c], total);
        }
    }
    f /= (double)x->n;
    if (mm) {
        mm->used[slot] = true;
        mm->key[slot] = h;
        mm->val[slot] = f;
    }
    return f;
}

/* The view of node n for GPUs of type (type < 0: every GPU). */
static void hview_of(const cr_sched *s, uint32_t n, int type, hview *v)
{
    const node *nd = &s->nodes[n];
    v->ng = 0;
    v->cpu_left = nd->cpu_total ? nd->cpu_total - nd->cpu_used : UINT64_MAX;
    for (uint32_t i = 0; i < nd->ngpu; i++) {
        const gpu *g = &nd->gpus[i];
        if (type >= 0 && g->type != type) {
            continue;
        }
        uint32_t l = 0;
        bool sh = false;
        if (!g->bad && !g->mig && !g->job) {
            l = 1000u - g->sh_milli;
            sh = g->share;
        }
        v->idx[v->ng] = i;
        v->g[v->ng++] = l | (sh ? HV_SHARE : 0);
    }
}

static double fit_score(const cr_sched *s, uint64_t cpu_left, uint32_t gpu_left)
{
    double cn = s->host_cpu_max ? (double)s->host_cpu_max : 1.0;
    double gn = s->host_gpu_max ? 1000.0 * (double)s->host_gpu_max : 1000.0;
    double c = cpu_left == UINT64_MAX ? cn : (double)cpu_left;
    return 0.5 * c / cn + 0.5 * gpu_left / gn;
}

/* Score of a node after a task takes ask thousandths and cpu: lower wins.
 * before/after are the node's views; *tie gets the best-fit score. */
static double host_score(const cr_sched *s, cr_sched_share_policy pol, const hview *before,
                         const hview *after, memo *mm, double *tie)
{
    uint32_t left = 0;
    for (uint32_t i = 0; i < after->ng; i++) {
        left += hv_left(after->g[i]);
    }
    *tie = fit_score(s, after->cpu_left, left);
    switch (pol) {
    case CR_SHARE_BEST_FIT:
        return *tie;
    case CR_SHARE_WORST_FIT:
        return -*tie;
    default:
        return node_F(s, after, mm) - node_F(s, before, mm);
    }
}

int cr__sched_plan_host(cr_sched *s, const job *j, int type, uint32_t *n_out)
{
    cr_sched_share_policy pol = s->cfg.share_policy;
    bool frac = cr__sched_frac(j);
    uint32_t k = frac ? 1 : j->spec.gpu_count;
    uint64_t cpu = j->spec.cpu_milli;
    memo *mm = pol == CR_SHARE_FRAG && s->mix.n ? cr_calloc(1, sizeof(memo)) : NULL;
    uint32_t best = UINT32_MAX, best_gpu = 0, best_milli = 0, best_left = 0;
    double best_score = 0, best_tie = 0;
    for (uint32_t n = 0; n < s->nnodes; n++) {
        const node *nd = &s->nodes[n];
        if (nd->state != CR_NODE_UP || !cr__sched_node_ok(s, j, n)) {
            continue;
        }
        uint32_t r = NT_NONE;
        for (uint32_t i = nd->nt_first; i < nd->nt_first + nd->nnt; i++) {
            if (s->nts[i].type == type) {
                r = i;
            }
        }
        if (r == NT_NONE || s->nts[r].mem_bytes < j->spec.mem_bytes ||
            (!frac && s->nts[r].free < k)) {
            continue;
        }
        hview v, a;
        hview_of(s, n, type, &v);
        a = v;
        if (a.cpu_left != UINT64_MAX) {
            a.cpu_left -= cpu;
        }
        if (!frac) {
            /* k entirely free GPUs go (which ones does not change F) */
            uint32_t taken = 0;
            for (uint32_t i = 0; i < a.ng && taken < k; i++) {
                const gpu *g = &nd->gpus[a.idx[i]];
                if (hv_left(a.g[i]) == 1000 && !g->sh_n) {
                    a.g[i] = 0;
                    taken++;
                }
            }
            double tie, sc = host_score(s, pol, &v, &a, mm, &tie);
            if (best == UINT32_MAX || sc < best_score - 1e-9 ||
                (sc <= best_score + 1e-9 && tie < best_tie - 1e-12)) {
                best = n;
                best_score = sc;
                best_tie = tie;
            }
            continue;
        }
        for (uint32_t i = 0; i < v.ng; i++) {
            const gpu *g = &nd->gpus[v.idx[i]];
            if (!(v.g[i] & HV_SHARE) || g->mem_bytes < j->spec.mem_bytes) {
                continue;
            }
            uint32_t c = cr__sched_share_milli(j, g);
            if (g->sh_milli + c > 1000 || g->sh_mem + j->spec.gpu_mem_bytes > g->mem_bytes) {
                continue;
            }
            uint32_t left = hv_left(v.g[i]) - c;
            uint32_t save = a.g[i];
            a.g[i] = left | HV_SHARE;
            double tie, sc = host_score(s, pol, &v, &a, mm, &tie);
            a.g[i] = save;
            /* ties: the best-fit node, then the least left on the GPU, then order */
            if (best == UINT32_MAX || sc < best_score - 1e-9 ||
                (sc <= best_score + 1e-9 &&
                 (tie < best_tie - 1e-12 || (tie <= best_tie + 1e-12 && left < best_left)))) {
                best = n;
                best_gpu = v.idx[i];
                best_score = sc;
                best_tie = tie;
                best_left = left;
                best_milli = c;
            }
        }
    }
    free(mm);
    if (best == UINT32_MAX) {
        return frac || s->types[type].free < k ? CR_ENOSPC : CR_EAGAIN;
    }
    if (frac) {
        s->plan[0] = (cr_sched_slot){.node = best,
                                     .gpu = (uint16_t)best_gpu,
                                     .mig_start = -1,
                                     .milli = (uint16_t)best_milli};
        *n_out = 1;
        return 0;
    }
    uint32_t pos = 0;
    cr__sched_pick_gpus(s, best, type, k, &pos);
    *n_out = k;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Host tasks                                                               */

int cr_sched_host_place(cr_sched *s, uint64_t cpu_milli, uint64_t mem_bytes,
                        const uint8_t *node_mask, uint32_t node_mask_bits, uint32_t *out_node)
{
    if (!cpu_milli && !mem_bytes) {
        return CR_EINVAL;
    }
    cr_sched_share_policy pol = s->cfg.share_policy;
    memo *mm = pol == CR_SHARE_FRAG && s->mix.n ? cr_calloc(1, sizeof(memo)) : NULL;
    uint32_t best = UINT32_MAX;
    double best_score = 0, best_tie = 0;
    for (uint32_t n = 0; n < s->nnodes; n++) {
        node *nd = &s->nodes[n];
        if (nd->state != CR_NODE_UP || (!nd->cpu_total && !nd->mem_total) || nd->excl_job ||
            !cr__sched_host_fits(nd, cpu_milli, mem_bytes) ||
            (node_mask && (n >= node_mask_bits || !(node_mask[n / 8] & (1u << (n % 8)))))) {
            continue;
        }
        hview v, a;
        hview_of(s, n, -1, &v);
        a = v;
        if (a.cpu_left != UINT64_MAX) {
            a.cpu_left -= cpu_milli;
        }
        double tie, sc = host_score(s, pol, &v, &a, mm, &tie);
        if (best == UINT32_MAX || sc < best_score - 1e-9 ||
            (sc <= best_score + 1e-9 && tie < best_tie - 1e-12)) {
            best = n;
            best_score = sc;
            best_tie = tie;
        }
    }
    free(mm);
    if (best == UINT32_MAX) {
        return CR_ENOSPC;
    }
    node *nd = &s->nodes[best];
    nd->cpu_used += cpu_milli;
    nd->cpu_host += cpu_milli;
    nd->mem_used += mem_bytes;
    nd->mem_host += mem_bytes;
    *out_node = best;
    return 0;
}

int cr_sched_host_release(cr_sched *s, uint32_t node_idx, uint64_t cpu_milli, uint64_t mem_bytes)
{
    if (node_idx >= s->nnodes) {
        return CR_ENOENT;
    }
    node *nd = &s->nodes[node_idx];
    if (nd->cpu_host < cpu_milli || nd->mem_host < mem_bytes) {
        return CR_EINVAL;
    }
    nd->cpu_used -= cpu_milli;
    nd->cpu_host -= cpu_milli;
    nd->mem_used -= mem_bytes;
    nd->mem_host -= mem_bytes;
    return 0;
}
