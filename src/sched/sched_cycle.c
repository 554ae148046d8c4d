/*
 * sched_cycle.c - one scheduling cycle: order, choose a type, place,
 * reserve and backfill, preempt, and say why the rest waits.
 *
 * Order. FIFO and HETERO: submit time, then id. PRIORITY: tier (higher
 * first), then the tenant's fair-share key, then submit time. LAS: the
 * Tiresias queue (by attained GPU-time; starving jobs promoted to 0), then
 * submit time. Ties always end on the job id, so the order is total.
 *
 * Fair share (PRIORITY). Each tenant's decayed GPU-seconds per type are
 * divided by the type's capacity; the largest of these is the tenant's
 * dominant share (DRF across GPU types), divided by its weight. Tenants
 * that used less of what they use most go first inside a tier.
 *
 * Reservations and EASY backfill. When a job that blocks its queue (FIFO,
 * PRIORITY and HETERO block; LAS and MIG jobs do not) cannot start on its
 * type, it gets a reservation on that type: walking the running jobs of the
 * type by expected end (start + time limit), the time at which enough GPUs
 * will have been freed, and how many GPUs beyond its need will be free then
 * ("extra"). One reservation per type and cycle (EASY reserves only for the
 * head). A later job may still start on that type if its time limit says it
 * ends before the reservation, or if it uses no more than the extra GPUs
 * (which it then consumes). Jobs without a time limit never end before a
 * reservation. The reservation counts GPUs, not shapes: a gang may find the
 * count free but fragmented at its reservation time; it then reserves again.
 *
 * Preemption. A job that cannot start may take GPUs from running jobs that
 * did not start in this cycle and ran at least
 * min_runtime_before_preempt_ns, and that the policy ranks below it:
 * PRIORITY - a lower tier, or borrowed capacity when the job itself is
 * within its quota; LAS - a worse queue; FIFO/HETERO - borrowed capacity
 * only. Ranked victims must be marked preemptible; borrowed work is always
 * reclaimable by another tenant within its quota (the job's flag does not
 * matter: a quota is a guarantee, as with Kueue's reclaim). Victims are taken in order of least
 * work lost since their last checkpoint, until the job can be placed; victims whose GPUs the
 * placement does not use are then given back untouched. At most PREEMPT_TRIES jobs try per cycle,
 * so a cycle stays bounded.
 */
#include "cr_sched.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cr_alloc.h"
#include "cr_error.h"
#include "sched_int.h"

#define PREEMPT_TRIES 16

typedef struct resv {
    bool active;
    int64_t at;     /* INT64_MAX = unknown */
    uint32_t extra; /* GPUs beyond the reserved job's need at `at` */
    uint64_t job;
    uint32_t need;    /* the reserved job's GPUs */
    uint64_t assumed; /* `at` assumes this job's default run time (0 = none) */
    /* The reserved job's nodes (its node_mask, borrowed for the cycle);
     * NULL = any node of the type. */
    const uint8_t *mask;
    uint32_t mask_bits;
} resv;

/* j would start (plan) only on nodes the reservation's job may not use
 * (another partition's, --nodelist...): it cannot delay it. */
static bool beside_reservation(cr_sched *s, const resv *r, const job *j, int type)
{
    uint32_t n = 0;
    if (!r->mask || cr__sched_plan(s, j, type, &n) != 0 || n == 0) {
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t nd = s->plan[i].node;
        if (nd < r->mask_bits && (r->mask[nd / 8] & (1u << (nd % 8)))) {
            return false;
        }
    }
    return true;
}

static cr_sched_decision *dec_push(cr_sched *s)
{
    CR_GROW(s->dec, s->ndec, s->cdec);
    cr_sched_decision *d = &s->dec[s->ndec++];
    memset(d, 0, sizeof(*d));
    d->reason = "";
    return d;
}

/* Reason text for decision i lives in s->reasons; pointers are set at the
 * end of the cycle because the arena may move. */
static char *dec_reason_buf(cr_sched *s, uint32_t i)
{
    if (s->creasons <= i) {
        uint32_t n = s->creasons ? s->creasons : 16;
        while (n <= i) {
            n *= 2;
        }
        s->reasons = cr_reallocarray(s->reasons, n, CR_SCHED_REASON_MAX);
        s->creasons = n;
    }
    return s->reasons + (size_t)i * CR_SCHED_REASON_MAX;
}

static bool type_before(const cr_sched *s, int a, int b)
{
    if (s->types[a].free != s->types[b].free) {
        return s->types[a].free > s->types[b].free;
    }
    return strcmp(s->types[a].name, s->types[b].name) < 0;
}

/* The policy's rank of a pending job (0 without ranking). */
static int64_t job_rank(const cr_sched *s, const job *j)
{
    return s->pol->job_rank ? s->pol->job_rank(s, j) : 0;
}

/* Does the policy hold j back this cycle (HETERO: the allocation gave it
 * nothing)? */
static bool held_back(const cr_sched *s, const job *j)
{
    return s->pol->assigned_type && s->pol->assigned_type(s, j) == HT_WAIT;
}

/* Candidate types for a job, in the order the policy tries them. */
static int candidates(const cr_sched *s, const job *j, int *out)
{
    int n = 0;
    if (j->spec.gpu_type >= 0) {
        if (j->mig[0] && !cr__sched_mig_find(s, j->spec.gpu_type, j->mig)) {
            return 0; /* the type has no such MIG profile */
        }
        out[n++] = j->spec.gpu_type;
        return n;
    }
    for (int t = 0; t < s->ntypes; t++) {
        if (cr__sched_tput(j, t) <= 0 || s->types[t].total == 0) {
            continue;
        }
        if (j->mig[0] ? !cr__sched_mig_find(s, t, j->mig)
                      : (s->types[t].mem_bytes && s->types[t].mem_bytes < j->spec.mem_bytes)) {
            continue;
        }
        out[n++] = t;
    }
    if (s->pol->by_throughput) {
        /* insertion sort by throughput desc, then id: stable */
        for (int i = 1; i < n; i++) {
            int x = out[i], k = i;
            while (k > 0 && cr__sched_tput(j, out[k - 1]) < cr__sched_tput(j, x)) {
                out[k] = out[k - 1];
                k--;
            }
            out[k] = x;
        }
    } else {
        /* agnostic (FIFO): the type with the most free GPUs first, then by
         * name, so the choice never depends on the order types were
         * declared in */
        for (int i = 1; i < n; i++) {
            int x = out[i], k = i;
            while (k > 0 && type_before(s, x, out[k - 1])) {
                out[k] = out[k - 1];
                k--;
            }
            out[k] = x;
        }
    }
    int at = s->pol->assigned_type ? s->pol->assigned_type(s, j) : HT_FREE;
    if (at >= 0) {
        out[0] = at;
        return 1;
    }
    return at == HT_WAIT ? 0 : n;
}

/* Would a fractional task's placement go on a GPU already shared (one
 * that is out of the whole-GPU pool anyway)? */
static bool shares_taken_gpu(cr_sched *s, const job *j, int type)
{
    uint32_t n = 0;
    if (cr__sched_plan(s, j, type, &n) != 0 || n != 1) {
        return false;
    }
    return s->nodes[s->plan[0].node].gpus[s->plan[0].gpu].sh_n > 0;
}

/* ------------------------------------------------------------------------ */
/* MIG without dead ends                                                    */

/* Can any GPU of the type ever hold MIG profile pr: a healthy GPU in MIG
 * mode on an UP node that carves on demand, has such an instance in its
 * layout, or is marked dynamic (repartitioned when its slices are idle)? */
static bool mig_feasible(const cr_sched *s, int type, const job *j)
{
    const gtype *t = &s->types[type];
    const mig_prof *pr = cr__sched_mig_find(s, type, j->mig);
    if (!pr) {
        return false;
    }
    for (uint32_t i = 0; i < t->nmig; i++) {
        uint32_t n = t->mig_gpus[i] >> 8, gi = t->mig_gpus[i] & 0xff;
        const gpu *g = &s->nodes[n].gpus[gi];
        if (s->nodes[n].state != CR_NODE_UP || g->bad || !cr__sched_node_ok(s, j, n)) {
            continue;
        }
        if (!g->mig_nfix || g->mig_dynamic) {
            return true;
        }
        for (int st = 0; st < t->mig_mem; st++) {
            if (cr__sched_mig_fixed_has(g, st, pr->mem, pr->compute)) {
                return true;
            }
        }
    }
    for (uint32_t i = 0; s->cfg.mig_reclaim && i < t->ndw; i++) {
        uint32_t n = t->dw_gpus[i] >> 8, gi = t->dw_gpus[i] & 0xff;
        const gpu *g = &s->nodes[n].gpus[gi];
        if (s->nodes[n].state == CR_NODE_UP && !g->bad && !g->mig && g->mig_dynamic &&
            cr__sched_node_ok(s, j, n)) {
            return true; /* back into MIG mode once idle */
        }
    }
    return false;
}

/* A whole-GPU job's view of the type's GPUs in MIG mode (healthy, on UP
 * nodes it may use): how many, how many marked dynamic, and how many of
 * those are idle (no MIG job on them). */
typedef struct migcount {
    uint32_t up, dyn, idle;
} migcount;

/* The counts in a reason's rother: 20 bits each (capped). */
static uint64_t mig_pack(const migcount *mc)
{
    uint64_t m = 0xfffff;
    return (mc->up < m ? mc->up : m) | (mc->dyn < m ? mc->dyn : m) << 20 |
           (mc->idle < m ? mc->idle : m) << 40;
}

static void mig_count(const cr_sched *s, const job *j, int type, migcount *mc)
{
    const gtype *t = &s->types[type];
    memset(mc, 0, sizeof(*mc));
    for (uint32_t i = 0; i < t->nmig; i++) {
        uint32_t n = t->mig_gpus[i] >> 8, gi = t->mig_gpus[i] & 0xff;
        const gpu *g = &s->nodes[n].gpus[gi];
        if (s->nodes[n].state != CR_NODE_UP || g->bad || !cr__sched_node_ok(s, j, n)) {
            continue;
        }
        mc->up++;
        mc->dyn += g->mig_dynamic;
        mc->idle += g->mig_dynamic && !g->mig_used && !g->sh_n;
    }
}

/* A MIG GPU taken out of MIG mode for a try, and its layout to restore. */
typedef struct recl {
    uint32_t node, gpu;
    uint8_t nfix, start[8], mem[8], compute[8];
} recl;

/*
 * mig_reclaim: a whole-GPU job that found no placement tries again with
 * every idle dynamic MIG GPU of the type (on nodes it may use) out of MIG
 * mode; the GPUs the placement takes stay whole (their layouts dropped),
 * the others get their layouts back. Returns 0 with s->plan filled and
 * *nconv = GPUs switched, else the placement's error with nothing changed.
 */
static int plan_reclaim(cr_sched *s, const job *j, int type, uint32_t *n_out, uint32_t *nconv)
{
    gtype *t = &s->types[type];
    *nconv = 0;
    if (s->recl_cycle[type] == s->stats.cycles && s->recl_ndec[type] == s->ndec) {
        return CR_EAGAIN; /* none idle, nothing started since */
    }
    recl *r = cr_calloc(t->nmig ? t->nmig : 1, sizeof(*r));
    uint32_t nr = 0;
    for (uint32_t i = 0; i < t->nmig; i++) {
        uint32_t n = t->mig_gpus[i] >> 8, gi = t->mig_gpus[i] & 0xff;
        const gpu *g = &s->nodes[n].gpus[gi];
        if (s->nodes[n].state != CR_NODE_UP || g->bad || !g->mig_dynamic || g->mig_used ||
            g->sh_n) {
            continue;
        }
        recl *x = &r[nr++];
        x->node = n;
        x->gpu = gi;
        x->nfix = g->mig_nfix;
        memcpy(x->start, g->mig_fix_start, sizeof(x->start));
        memcpy(x->mem, g->mig_fix_mem, sizeof(x->mem));
        memcpy(x->compute, g->mig_fix_compute, sizeof(x->compute));
    }
    if (nr == 0) {
        s->recl_cycle[type] = s->stats.cycles;
        s->recl_ndec[type] = s->ndec;
        free(r);
        return CR_EAGAIN;
    }
    /* (the list changes as GPUs leave MIG mode: r is a copy) */
    for (uint32_t i = 0; i < nr; i++) {
        (void)cr_sched_gpu_set_mig(s, r[i].node, r[i].gpu, false);
    }
    int rc = cr__sched_plan(s, j, type, n_out);
    for (uint32_t i = 0; i < nr; i++) {
        bool used = false;
        for (uint32_t k = 0; rc == 0 && k < *n_out && !used; k++) {
            used = s->plan[k].node == r[i].node && s->plan[k].gpu == r[i].gpu;
        }
        if (used) {
            (*nconv)++;
            CR_GROW(t->dw_gpus, t->ndw, t->cdw);
            t->dw_gpus[t->ndw++] = r[i].node << 8 | r[i].gpu;
            continue;
        }
        gpu *g = &s->nodes[r[i].node].gpus[r[i].gpu];
        (void)cr_sched_gpu_set_mig(s, r[i].node, r[i].gpu, true);
        g->mig_nfix = r[i].nfix;
        memcpy(g->mig_fix_start, r[i].start, sizeof(r[i].start));
        memcpy(g->mig_fix_mem, r[i].mem, sizeof(r[i].mem));
        memcpy(g->mig_fix_compute, r[i].compute, sizeof(r[i].compute));
    }
    free(r);
    s->stats.mig_repartitions += *nconv;
    return rc;
}

/*
 * mig_reclaim, the other way: a MIG job of one instance that found no
 * placement puts an idle GPU that mig_reclaim took out of MIG mode back
 * into it, with a layout of its one instance. Returns 0 with s->plan
 * filled, else CR_EAGAIN with nothing changed. Stale entries (the GPU in
 * MIG mode again, no longer dynamic) are dropped.
 */
static int plan_unreclaim(cr_sched *s, const job *j, int type, uint32_t *n_out)
{
    gtype *t = &s->types[type];
    for (uint32_t i = 0; i < t->ndw;) {
        uint32_t n = t->dw_gpus[i] >> 8, gi = t->dw_gpus[i] & 0xff;
        gpu *g = &s->nodes[n].gpus[gi];
        if (g->mig || !g->mig_dynamic) {
            t->dw_gpus[i] = t->dw_gpus[--t->ndw];
            continue;
        }
        if (s->nodes[n].state != CR_NODE_UP || g->bad || g->job || g->sh_n ||
            !cr__sched_node_ok(s, j, n)) {
            i++;
            continue;
        }
        const char *name = j->mig;
        if (cr_sched_gpu_set_mig_layout(s, n, gi, &name, 1, NULL) == 0) {
            if (cr__sched_plan(s, j, type, n_out) == 0 && s->plan[0].node == n &&
                s->plan[0].gpu == gi) {
                t->dw_gpus[i] = t->dw_gpus[--t->ndw];
                s->stats.mig_repartitions++;
                return 0;
            }
            (void)cr_sched_gpu_set_mig(s, n, gi, false);
        }
        i++;
    }
    return CR_EAGAIN;
}

static bool blocks_queue(const cr_sched *s, const job *j)
{
    return s->pol->head_blocks && !j->mig[0] && !cr__sched_frac(j);
}

/* One running whole-GPU job's end for free_at_assumed. */
typedef struct endrec {
    int64_t at;
    uint64_t id;
    uint32_t n;
    bool assumed; /* no time limit: at = start + default_time_ns */
} endrec;

static int cmp_endrec(const void *x, const void *y)
{
    const endrec *a = x, *b = y;
    if (a->at != b->at) {
        return a->at < b->at ? -1 : 1;
    }
    return a->id < b->id ? -1 : a->id > b->id;
}

/* A fractional task's end, by its GPU. */
typedef struct shend {
    uint64_t gpu; /* node << 16 | gpu */
    int64_t at;
    uint64_t id;
    bool assumed;
} shend;

static int cmp_shend(const void *x, const void *y)
{
    const shend *a = x, *b = y;
    if (a->gpu != b->gpu) {
        return a->gpu < b->gpu ? -1 : 1;
    }
    if (a->at != b->at) {
        return a->at < b->at ? -1 : 1;
    }
    return a->id < b->id ? -1 : a->id > b->id;
}

/* free_at when the running jobs' time limits do not free enough: every
 * running whole-GPU job of the type by its end, and every shared GPU by its
 * last fractional task's, those without a time limit at the end their
 * default run time gives (cfg.default_time_ns, as Slurm's DefaultTime);
 * *assumed = the last such job counted. */
static int64_t free_at_assumed(cr_sched *s, int type, uint32_t need, uint32_t *extra,
                               uint64_t *assumed)
{
    uint32_t avail = s->types[type].free, n = 0, nsh = 0;
    uint32_t cap = s->ntrun[type] ? s->ntrun[type] : 1;
    endrec *e = cr_calloc(cap, sizeof(*e));
    shend *sh = cr_calloc(cap, sizeof(*sh));
    for (uint32_t i = 0; i < s->ntrun[type]; i++) {
        const job *r = s->trun[type][i];
        if (r->nslots == 0 || r->slots[0].mig_start >= 0) {
            continue; /* MIG instances free no whole GPU */
        }
        int64_t at = cr__sched_job_end(r);
        bool as = at == INT64_MAX;
        if (as) {
            int64_t d = s->cfg.default_time_ns;
            at = r->start_ns > INT64_MAX - d ? INT64_MAX : r->start_ns + d;
        }
        if (r->slots[0].milli) {
            /* a fractional task: its GPU frees when the last one on it ends */
            uint32_t nd = r->slots[0].node;
            if (!s->nodes[nd].gpus[r->slots[0].gpu].bad && s->nodes[nd].state == CR_NODE_UP) {
                sh[nsh++] = (shend){(uint64_t)nd << 16 | r->slots[0].gpu, at, r->spec.id, as};
            }
            continue;
        }
        e[n++] = (endrec){at, r->spec.id, r->nslots, as};
    }
    /* one end per shared GPU: its latest task's */
    qsort(sh, nsh, sizeof(*sh), cmp_shend);
    for (uint32_t i = 0; i < nsh; i++) {
        if (i + 1 == nsh || sh[i + 1].gpu != sh[i].gpu) {
            e[n++] = (endrec){sh[i].at, sh[i].id, 1, sh[i].assumed};
        }
    }
    free(sh);
    qsort(e, n, sizeof(*e), cmp_endrec);
    int64_t at = INT64_MAX;
    uint64_t who = 0;
    for (uint32_t i = 0; i < n; i++) {
        avail += e[i].n;
        who = e[i].assumed ? e[i].id : who;
        if (avail >= need) {
            at = e[i].at;
            *extra = avail - need;
            *assumed = who;
            break;
        }
    }
    free(e);
    return at;
}

/* When `need` GPUs of a type will be free, from the running jobs' ends
 * (INT64_MAX = unknown), and how many more than need are free then;
 * *assumed = a job without a time limit whose default run time the answer
 * assumes (0 = none). */
static int64_t free_at(cr_sched *s, int type, uint32_t need, int64_t now_ns, uint32_t *extra,
                       uint64_t *assumed)
{
    uint32_t avail = s->types[type].free;
    *assumed = 0;
    if (avail >= need) {
        *extra = avail - need;
        return now_ns;
    }
    int64_t at = INT64_MAX;
    *extra = 0;
    /* Walk the type's end-time heap in order without disturbing it: a small
     * frontier heap of positions, starting at the root; popping a position
     * adds its two children. O(k log k) for the k earliest ends needed. */
    job **h = s->eheap[type];
    uint32_t nh = s->neheap[type], nf = 0, cf = 0;
    uint32_t *f = NULL;
    if (nh > 0) {
        CR_GROW(f, nf, cf);
        f[nf++] = 0;
    }
    while (nf > 0) {
        /* pop the frontier's earliest */
        uint32_t top = f[0];
        f[0] = f[--nf];
        for (uint32_t i = 0;;) {
            uint32_t c = 2 * i + 1;
            if (c >= nf) {
                break;
            }
            if (c + 1 < nf && cr__sched_end_less(h[f[c + 1]], h[f[c]])) {
                c++;
            }
            if (!cr__sched_end_less(h[f[c]], h[f[i]])) {
                break;
            }
            uint32_t t = f[i];
            f[i] = f[c];
            f[c] = t;
            i = c;
        }
        avail += h[top]->nslots;
        if (avail >= need) {
            at = cr__sched_job_end(h[top]);
            *extra = avail - need;
            break;
        }
        for (uint32_t c = 2 * top + 1; c <= 2 * top + 2 && c < nh; c++) {
            CR_GROW(f, nf, cf);
            uint32_t i = nf++;
            f[i] = c;
            while (i > 0 && cr__sched_end_less(h[f[i]], h[f[(i - 1) / 2]])) {
                uint32_t t = f[i];
                f[i] = f[(i - 1) / 2];
                f[(i - 1) / 2] = t;
                i = (i - 1) / 2;
            }
        }
    }
    free(f);
    if (at == INT64_MAX && s->cfg.default_time_ns > 0 && s->ntrun[type] > s->neheap[type]) {
        /* (jobs without a time limit are not in the end heap) */
        at = free_at_assumed(s, type, need, extra, assumed);
    }
    return at;
}

static void reserve(cr_sched *s, resv *r, const job *j, int type, int64_t now_ns)
{
    /* (enough free but fragmented: it starts when the shape appears) */
    r->active = true;
    r->job = j->spec.id;
    r->need = j->spec.gpu_count;
    r->at = free_at(s, type, j->spec.gpu_count, now_ns, &r->extra, &r->assumed);
    r->mask = j->spec.node_mask;
    r->mask_bits = j->spec.node_mask_bits;
}

/* Expected runtime of j on type t: its estimate (time_limit_ns) is the
 * runtime on the slowest type it may use (tmin), shorter in proportion to
 * throughput elsewhere. 0 = unknown. */
static int64_t est_runtime(const job *j, int t, double tmin)
{
    double tp = cr__sched_tput(j, t);
    if (j->spec.time_limit_ns <= 0 || !(tp > 0) || !(tmin > 0)) {
        return 0;
    }
    double ns = (double)j->spec.time_limit_ns * tmin / tp;
    return ns >= 9e18 ? INT64_MAX : (int64_t)ns;
}

/*
 * Wait-or-start looks ahead at the next WAIT_LOOKAHEAD ends of running jobs
 * on a type (by time limit), with the GPUs each frees, built once per type
 * and cycle and again only after the cycle started or stopped a job: each
 * question is then a short scan, not a walk of the running jobs. GPUs that
 * free up beyond the lookahead are not waited for.
 */
#define WAIT_LOOKAHEAD 256

struct wcache {
    uint64_t cycle; /* s->stats.cycles when built; 0 = never */
    uint32_t ndec;  /* s->ndec when built (a start or preemption since: rebuild) */
    uint32_t n;
    int64_t end[WAIT_LOOKAHEAD];
    uint32_t cum[WAIT_LOOKAHEAD]; /* GPUs freed by ends 0..i together */
    uint32_t nf;                  /* frontier of heap positions not yet taken */
    uint32_t f[WAIT_LOOKAHEAD + 2];
};

/* The type's lookahead, extended (lazily, in end order) until its ends free
 * `want` GPUs or it holds WAIT_LOOKAHEAD ends or all of them. */
static const struct wcache *lookahead(cr_sched *s, int type, uint64_t want)
{
    if (!s->wcache) {
        s->wcache = cr_calloc(CR_SCHED_MAX_TYPES, sizeof(*s->wcache));
    }
    struct wcache *w = &s->wcache[type];
    job **h = s->eheap[type];
    uint32_t nh = s->neheap[type];
    if (w->cycle != s->stats.cycles || w->ndec != s->ndec) {
        w->cycle = s->stats.cycles;
        w->ndec = s->ndec;
        w->n = 0;
        w->nf = 0;
        if (nh > 0) {
            w->f[w->nf++] = 0;
        }
    }
    uint32_t *f = w->f;
    while (w->nf > 0 && w->n < WAIT_LOOKAHEAD && (w->n == 0 || w->cum[w->n - 1] < want)) {
        /* pop the frontier's earliest; push its two children (the frontier
         * grows by at most one per pop, so it stays under n + 2) */
        uint32_t top = f[0];
        f[0] = f[--w->nf];
        for (uint32_t i = 0;;) {
            uint32_t c = 2 * i + 1;
            if (c >= w->nf) {
                break;
            }
            if (c + 1 < w->nf && cr__sched_end_less(h[f[c + 1]], h[f[c]])) {
                c++;
            }
            if (!cr__sched_end_less(h[f[c]], h[f[i]])) {
                break;
            }
            uint32_t t = f[i];
            f[i] = f[c];
            f[c] = t;
            i = c;
        }
        w->end[w->n] = cr__sched_job_end(h[top]);
        w->cum[w->n] = (w->n ? w->cum[w->n - 1] : 0) + h[top]->nslots;
        w->n++;
        for (uint32_t c = 2 * top + 1; c <= 2 * top + 2 && c < nh; c++) {
            uint32_t i = w->nf++;
            f[i] = c;
            while (i > 0 && cr__sched_end_less(h[f[i]], h[f[(i - 1) / 2]])) {
                uint32_t t = f[i];
                f[i] = f[(i - 1) / 2];
                f[(i - 1) / 2] = t;
                i = (i - 1) / 2;
            }
        }
    }
    return w;
}

/*
 * Wait-or-start: the time j would finish by waiting for faster type f,
 * INT64_MAX when unknown or never. The GPUs f frees must first cover what
 * this cycle has already promised on f: the reservation holder and the jobs
 * that chose to wait for f before j (claim[f]).
 */
static int64_t finish_by_waiting(cr_sched *s, const job *j, int f, double tmin, const resv *res,
                                 const uint32_t *claim, int64_t now_ns)
{
    int64_t run = est_runtime(j, f, tmin);
    if (run <= 0) {
        return INT64_MAX;
    }
    uint64_t need = (uint64_t)j->spec.gpu_count + claim[f];
    if (res[f].active && res[f].job != j->spec.id) {
        need += res[f].need;
    }
    uint32_t avail = s->types[f].free;
    if (need > s->types[f].total || avail >= need) {
        /* (free now but not in the shape asked: no end in sight to wait for) */
        return INT64_MAX;
    }
    const struct wcache *w = lookahead(s, f, need - avail);
    if (w->n == 0 || avail + w->cum[w->n - 1] < need) {
        return INT64_MAX;
    }
    uint32_t lo = 0, hi = w->n - 1; /* the first end that frees enough (cum rises) */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (avail + w->cum[mid] >= need) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    int64_t at = w->end[lo] > now_ns ? w->end[lo] : now_ns; /* (overdue: ends now) */
    return at > INT64_MAX - run ? INT64_MAX : at + run;
}

static bool quota_room(const cr_sched *s, const job *j, int type);

/*
 * Wait-or-start for j on type t: true when some faster type f, full now,
 * would let j finish sooner by waiting for it than starting on t now; then
 * wtype and wat say which type and when its GPUs free up. Faster types that
 * have room now (fragmented) or that the tenant's quota closes are not
 * waited for. The slowest usable type's throughput scales the estimate.
 */
static bool better_to_wait(cr_sched *s, const job *j, int t, const resv *res, const uint32_t *claim,
                           int64_t now_ns, int *wtype, int64_t *wat)
{
    double tt = cr__sched_tput(j, t), tmin = tt;
    for (int f = 0; f < s->ntypes; f++) {
        double tp = cr__sched_tput(j, f);
        if (tp > 0 && tp < tmin && s->types[f].total > 0) {
            tmin = tp;
        }
    }
    int64_t run = est_runtime(j, t, tmin);
    if (run <= 0 || run > INT64_MAX - now_ns) {
        return false;
    }
    int64_t best = now_ns + run;
    bool wait = false;
    for (int f = 0; f < s->ntypes; f++) {
        if (!(cr__sched_tput(j, f) > tt) || s->types[f].total < j->spec.gpu_count ||
            (s->types[f].mem_bytes && s->types[f].mem_bytes < j->spec.mem_bytes) ||
            (!quota_room(s, j, f) && !s->cfg.borrowing)) {
            continue;
        }
        int64_t e = finish_by_waiting(s, j, f, tmin, res, claim, now_ns);
        if (e < best) {
            best = e;
            wait = true;
            *wtype = f;
            *wat = e - est_runtime(j, f, tmin);
        }
    }
    return wait;
}

/* A victim is in the way if it holds anything on a GPU the placement uses:
 * for MIG even disjoint memory slices count, because the plan may also
 * have counted on the victim's compute slices. */
static bool slots_overlap(const cr_sched_slot *a, const cr_sched_slot *b)
{
    return a->node == b->node && a->gpu == b->gpu;
}

typedef struct vic {
    int64_t lost;
    int32_t prio;
    int64_t start;
    uint64_t id;
    job *j;
    uint8_t why; /* 0 priority, 1 borrowed, 2 las */
} vic;

static int cmp_vic(const void *x, const void *y)
{
    const vic *a = x, *b = y;
    if (a->lost != b->lost) {
        return a->lost < b->lost ? -1 : 1;
    }
    if (a->prio != b->prio) {
        return a->prio < b->prio ? -1 : 1;
    }
    if (a->start != b->start) {
        return a->start > b->start ? -1 : 1;
    }
    return a->id < b->id ? -1 : a->id > b->id;
}

static void vic_down(vic *h, uint32_t n, uint32_t i)
{
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n) {
            return;
        }
        if (c + 1 < n && cmp_vic(&h[c + 1], &h[c]) < 0) {
            c++;
        }
        if (cmp_vic(&h[c], &h[i]) >= 0) {
            return;
        }
        vic t = h[i];
        h[i] = h[c];
        h[c] = t;
        i = c;
    }
}

static int64_t lost_if_stopped(const job *v, int64_t now_ns)
{
    int64_t ran = now_ns > v->start_ns ? now_ns - v->start_ns : 0;
    return v->spec.checkpoint_interval_ns > 0 ? ran % v->spec.checkpoint_interval_ns : ran;
}

/* Thousandths of a GPU of the type the job would hold (a fractional task
 * giving only memory: its share of the type's default memory). */
static int64_t need_milli(const cr_sched *s, const job *j, int type)
{
    if (j->spec.gpu_milli > 0) {
        return j->spec.gpu_milli;
    }
    if (j->spec.gpu_mem_bytes > 0) {
        return cr__sched_mem_milli(j->spec.gpu_mem_bytes, s->types[type].mem_bytes);
    }
    return (int64_t)j->spec.gpu_count * 1000;
}

static bool quota_room(const cr_sched *s, const job *j, int type)
{
    return cr__sched_tree_quota_room(s, j->spec.tenant, type, need_milli(s, j, type));
}

static void set_reason(job *j, int code, int type, uint32_t need, uint32_t free_gpus, int64_t at,
                       uint64_t other);

/*
 * Preemption attempts that failed this cycle, per type. Victims only get
 * fewer during a cycle (jobs started in it are never victims), so a job
 * that is no stronger (priority, LAS queue), needs no fewer GPUs and no
 * less memory than one that failed will fail too: skip its scan. Only
 * plain jobs are compared (no gang shape, no MIG), and a job claiming its
 * quota (borrowed work yields to it) is never skipped.
 */
#define PFAIL_MAX 4

typedef struct pfail {
    int n;
    struct {
        int64_t rank; /* the policy's job_rank */
        uint32_t gpus;
        uint64_t mem;
    } f[PFAIL_MAX];
} pfail;

static bool plain(const cr_sched *s, const job *j, int type, bool borrowed)
{
    return !j->mig[0] && !cr__sched_frac(j) && j->spec.node_count <= 1 &&
           (borrowed || !cr__sched_tree_guaranteed(s, j->spec.tenant, type));
}

static bool futile(const pfail *pf, const cr_sched *s, const job *j, int type, bool borrowed)
{
    if (!plain(s, j, type, borrowed)) {
        return false;
    }
    int64_t rank = pf->n > 0 ? job_rank(s, j) : 0;
    for (int i = 0; i < pf->n; i++) {
        bool weaker = rank >= pf->f[i].rank;
        if (weaker && j->spec.gpu_count >= pf->f[i].gpus && j->spec.mem_bytes >= pf->f[i].mem &&
            j->spec.node_count == 0) {
            return true;
        }
    }
    return false;
}

static void pfail_add(pfail *pf, const cr_sched *s, const job *j, int type, bool borrowed)
{
    if (!plain(s, j, type, borrowed) || j->spec.node_count != 0) {
        return;
    }
    int i = pf->n < PFAIL_MAX ? pf->n++ : PFAIL_MAX - 1;
    pf->f[i].rank = job_rank(s, j);
    pf->f[i].gpus = j->spec.gpu_count;
    pf->f[i].mem = j->spec.mem_bytes;
}

/*
 * What a type's running jobs offer as victims this cycle, computed on first
 * need with one scan: the lowest priority and the worst LAS queue among
 * preemptible jobs (borrowed work is found from the tenants' counters
 * without a scan). Victims only
 * get fewer during a cycle, so these stay safe bounds, and a job that
 * cannot beat them skips the scan in try_preempt.
 */
typedef struct vbound {
    bool done;
    bool any;
    int64_t max_rank; /* the weakest victim's victim_rank */
} vbound;

static bool may_preempt(cr_sched *s, vbound *vb, const job *j, int type, int64_t now_ns,
                        bool borrowed)
{
    /* Borrowed work yields to a job claiming its quota (any policy). */
    if (!borrowed && cr__sched_tree_guaranteed(s, j->spec.tenant, type)) {
        for (int i = 0; i < s->ntenants; i++) {
            if (i != j->spec.tenant && s->tenants[i].used_b[type] > 0) {
                return true;
            }
        }
    }
    const cr__sched_policy_ops *pol = s->pol;
    if (pol->rank_why == RANK_NONE) {
        return false; /* no other victims there: skip the scan */
    }
    if (pol->may_outrank && !pol->may_outrank(s, j, type)) {
        return false; /* no running job of the type ranks below it */
    }
    if (!vb->done) {
        vb->done = true;
        vb->max_rank = INT64_MIN;
        int64_t worst = pol->rank_worst ? pol->rank_worst(s) : INT64_MAX;
        bool all_any = false;
        int32_t all_min = INT32_MAX;
        for (uint32_t i = 0; i < s->ntrun[type]; i++) {
            const job *r = s->trun[type][i];
            if (r->spec.preemptible && r->spec.priority <= all_min) {
                all_any = true;
                all_min = r->spec.priority;
            }
            if (!r->spec.preemptible || r->start_cycle == s->stats.cycles ||
                now_ns - r->start_ns < s->cfg.min_runtime_before_preempt_ns) {
                continue;
            }
            vb->any = true;
            int64_t q = pol->victim_rank(s, r, now_ns);
            if (q > vb->max_rank) {
                vb->max_rank = q;
            }
            if (q >= worst) {
                break; /* the worst rank: the bound is reached (victim_bound unused) */
            }
        }
        if (pol->victim_bound) {
            pol->victim_bound(s, type, all_any, all_min);
        }
    }
    return vb->any && job_rank(s, j) < vb->max_rank;
}

int cr_sched_job_resumable(cr_sched *s, uint64_t id)
{
    job *j = cr__sched_job_get(s, id);
    if (!j) {
        return CR_ENOENT;
    }
    if (j->susp_held && j->rcode == R_CHECKPOINTING) {
        j->rcode = R_SUSPENDED;
    }
    j->susp_held = false;
    return 0;
}

int64_t cr_sched_next_cycle_ns(const cr_sched *s)
{
    return s->pol->next_cycle_ns ? s->pol->next_cycle_ns(s) : INT64_MAX;
}

void cr__sched_suspend(cr_sched *s, job *j, int64_t now_ns, const char *reason)
{
    cr_sched_decision *d = dec_push(s);
    d->action = CR_SCHED_PREEMPT;
    d->job = j->spec.id;
    d->gpu_type = j->run_type;
    d->lost_work_ns = 0; /* it checkpoints on the way out */
    snprintf(dec_reason_buf(s, s->ndec - 1), CR_SCHED_REASON_MAX, "%s", reason);
    cr__sched_job_stop(s, j, now_ns, false);
    j->preemptions++;
    j->susp_held = s->cfg.suspend_hold;
    set_reason(j, j->susp_held ? R_CHECKPOINTING : R_SUSPENDED, j->spec.gpu_type, j->spec.gpu_count,
               0, INT64_MAX, 0);
    s->stats.last_preempted++;
}

/* Try to start j on type by preempting; true if it started. */
static bool try_preempt(cr_sched *s, job *j, int type, int64_t now_ns, bool borrowed)
{
    if (!s->cfg.preemption) {
        return false;
    }
    bool under_quota = !borrowed && cr__sched_tree_guaranteed(s, j->spec.tenant, type);
    int jq = j->las_queue;
    int64_t jrank = job_rank(s, j);
    vic *v = NULL;
    uint32_t nv = 0, cv = 0;
    uint64_t gpus = 0;
    /* LAS without reclaim: the victim index gives the same victims in the
     * same order without a scan (sched_victim.c) */
    cr__vix_iter *it = NULL;
    if (s->pol->attained_index && !under_quota && !s->ref_scan &&
        cr__sched_vix_begin(s, type, jq, now_ns, &it, &gpus) != 0) {
        it = NULL;
    }
    for (uint32_t i = 0; !it && i < s->ntrun[type]; i++) {
        job *r = s->trun[type][i];
        if (r->start_cycle == s->stats.cycles ||
            now_ns - r->start_ns < s->cfg.min_runtime_before_preempt_ns) {
            continue;
        }
        uint8_t why;
        if (r->borrowed && under_quota && r->spec.tenant != j->spec.tenant) {
            why = 1; /* reclaim: preemptible or not */
        } else if (!r->spec.preemptible) {
            continue;
        } else if (s->pol->rank_why != RANK_NONE && s->pol->victim_rank(s, r, now_ns) > jrank) {
            why = s->pol->rank_why;
        } else {
            continue;
        }
        CR_GROW(v, nv, cv);
        v[nv++] =
            (vic){lost_if_stopped(r, now_ns), r->spec.priority, r->start_ns, r->spec.id, r, why};
        gpus += r->nslots;
    }
    bool ok = false;
    bool sliced = j->mig[0] || cr__sched_frac(j); /* may fit beside others */
    vic *u = NULL;
    uint32_t used = 0, cu = 0, n = 0;
    if ((!it && nv == 0) || (!sliced && gpus + s->types[type].free < j->spec.gpu_count)) {
        goto out;
    }
    /* victims in cmp_vic order, taken one at a time from a heap (u gets
     * them in order): a placement found after k victims costs
     * O(nv + k log nv), not a sort of them all */
    for (uint32_t i = nv / 2; i-- > 0;) {
        vic_down(v, nv, i);
    }
    for (uint32_t left = nv;;) {
        vic x;
        if (it) {
            cr__vitem e;
            if (!cr__sched_vix_next(s, it, &e)) {
                break;
            }
            x = (vic){e.lost, e.prio, e.start, e.id, e.j, 2};
        } else {
            if (left == 0) {
                break;
            }
            x = v[0];
            v[0] = v[--left];
            vic_down(v, left, 0);
        }
        CR_GROW(u, used, cu);
        u[used++] = x;
        cr__sched_slots_release(s, x.j);
        if (!sliced && s->types[type].free < j->spec.gpu_count) {
            continue;
        }
        if (cr__sched_plan(s, j, type, &n) == 0) {
            ok = true;
            break;
        }
    }
    cr__sched_vix_end(it);
    it = NULL;
    /* give every victim its GPUs back, then stop the ones in the way */
    for (uint32_t i = 0; i < used; i++) {
        cr__sched_slots_take(s, u[i].j, u[i].j->slots, u[i].j->nslots);
    }
    if (!ok) {
        goto out;
    }
    for (uint32_t i = 0; i < used; i++) {
        job *r = u[i].j;
        bool hit = false;
        for (uint32_t a = 0; a < r->nslots && !hit; a++) {
            for (uint32_t b = 0; b < n && !hit; b++) {
                hit = slots_overlap(&r->slots[a], &s->plan[b]);
            }
        }
        if (!hit) {
            continue;
        }
        cr_sched_decision *d = dec_push(s);
        d->action = CR_SCHED_PREEMPT;
        d->job = r->spec.id;
        d->gpu_type = r->run_type;
        d->lost_work_ns = lost_if_stopped(r, now_ns);
        d->preempted_for = j->spec.id;
        char *buf = dec_reason_buf(s, s->ndec - 1);
        if (u[i].why == 0) {
            snprintf(buf, CR_SCHED_REASON_MAX, "preempted for job %" PRIu64 " (priority %d > %d)",
                     j->spec.id, j->spec.priority, r->spec.priority);
        } else if (u[i].why == 1) {
            snprintf(buf, CR_SCHED_REASON_MAX,
                     "borrowed %s capacity reclaimed by tenant %s for job %" PRIu64,
                     s->types[type].name, s->tenants[j->spec.tenant].name, j->spec.id);
        } else {
            snprintf(buf, CR_SCHED_REASON_MAX,
                     "preempted for job %" PRIu64 " (LAS queue %d, this job's queue %d)",
                     j->spec.id, jq, cr__sched_las_queue_of(s, cr__sched_job_attained(r, now_ns)));
        }
        cr__sched_job_stop(s, r, now_ns, true);
        set_reason(r, R_PREEMPTED, r->spec.gpu_type, r->spec.gpu_count, 0, INT64_MAX, j->spec.id);
        s->stats.last_preempted++;
    }
    cr__sched_job_start(s, j, type, s->plan, n, now_ns, borrowed);
    j->start_cycle = s->stats.cycles;
    cr_sched_decision *d = dec_push(s);
    d->action = CR_SCHED_START;
    d->job = j->spec.id;
    d->gpu_type = type;
    d->slot_count = j->nslots;
    d->slots = j->slots;
    d->borrowed = borrowed;
    d->mig_repartitioned = j->repart;
    s->stats.last_started++;
out:
    cr__sched_vix_end(it);
    free(u);
    free(v);
    return ok;
}

static void set_reason(job *j, int code, int type, uint32_t need, uint32_t free_gpus, int64_t at,
                       uint64_t other)
{
    j->rcode = (uint8_t)code;
    j->rtype = (int8_t)type;
    j->rneed = need;
    j->rfree = free_gpus;
    j->rat = at;
    j->rother = other;
    j->rassume = 0;
}

int cr_sched_cycle(cr_sched *s, int64_t now_ns, cr_rng *rng, const cr_sched_decision **out)
{
    cr__sched_accrue(s, now_ns);
    s->stats.cycles++;
    s->stats.last_considered = s->stats.last_started = 0;
    s->stats.last_preempted = s->stats.last_backfilled = 0;
    s->ndec = 0;
    if (s->pol->cycle_begin) {
        s->pol->cycle_begin(s, now_ns);
    }
    /* Order the queue (kept between cycles: sched_queue.c). */
    cr__sched_order(s, now_ns);
    if (s->verify_order && !cr__sched_order_verify(s, now_ns)) {
        s->order_bad = true;
    }
    uint32_t min_k = cr__sched_queue_min_gpus(s);
    int64_t min_lim = cr__sched_queue_min_limit(s); /* shortest time limit in the queue */
    bool mig_pending = s->nmig_pending > 0;
    if (s->pol->cycle_ordered) {
        s->pol->cycle_ordered(s, rng);
    }

    resv res[CR_SCHED_MAX_TYPES];
    memset(res, 0, sizeof(res));
    int tries = 0;
    pfail pf[CR_SCHED_MAX_TYPES];
    memset(pf, 0, sizeof(pf));
    vbound vb[CR_SCHED_MAX_TYPES];
    memset(vb, 0, sizeof(vb));
    uint32_t claim[CR_SCHED_MAX_TYPES];
    memset(claim, 0, sizeof(claim));
    cr__sched_walk_start(s);
    for (job *j; (j = cr__sched_walk_next(s)) != NULL;) {
        if (j->state != CR_JOB_PENDING) {
            continue;
        }
        /* Stop early: nothing free anywhere and nobody can preempt (only
         * tiers and LAS queues preempt, besides reclaiming borrowed work). */
        {
            /* "nothing free" = no type has as many free GPUs as the smallest
             * job in the queue asks for, or those GPUs are held for a
             * reservation that no queued job may backfill (none fits in its
             * extra GPUs, none ends before it), and no MIG job could use a
             * slice */
            bool any = false;
            for (int t = 0; t < s->ntypes && !any; t++) {
                const resv *r = &res[t];
                /* (a reservation for some nodes only holds nothing of the
                 * others: jobs beside it may start) */
                bool held = r->active && !r->mask &&
                            (!s->cfg.backfill ||
                             (r->extra < min_k && (min_lim == INT64_MAX || r->at == INT64_MAX ||
                                                   now_ns > r->at - min_lim)));
                any = (s->types[t].free >= min_k && !held) ||
                      (mig_pending && (s->types[t].nmig > 0 || s->types[t].nsh > 0 ||
                                       (s->cfg.mig_reclaim && s->types[t].ndw > 0))) ||
                      (s->cfg.mig_reclaim && s->types[t].nmig > 0 && !held &&
                       (s->recl_cycle[t] != s->stats.cycles || s->recl_ndec[t] != s->ndec));
            }
            if (!any) {
                bool borrowed_any = false;
                for (int k = 0; k < s->ntenants && !borrowed_any; k++) {
                    for (int t = 0; t < s->ntypes && !borrowed_any; t++) {
                        borrowed_any = s->tenants[k].used_b[t] > 0;
                    }
                }
                bool ranked = s->pol->may_outrank_any && s->pol->may_outrank_any(s, j);
                /* (blocking policies first let the head job reserve, so its
                 * reason can say when it will start) */
                bool reserved = !s->pol->head_blocks;
                for (int t = 0; t < s->ntypes && !reserved; t++) {
                    reserved = res[t].active;
                }
                if (reserved &&
                    (!s->cfg.preemption || tries >= PREEMPT_TRIES || (!ranked && !borrowed_any))) {
                    break;
                }
            }
        }
        if (s->cfg.max_examined && s->stats.last_considered >= s->cfg.max_examined) {
            break; /* the cap: the rest keep their reasons */
        }
        s->stats.last_considered++;
        j->rcycle = s->stats.cycles;
        if (j->susp_held) {
            /* suspended, its run still checkpointing: not before it ended */
            set_reason(j, R_CHECKPOINTING, j->spec.gpu_type, j->spec.gpu_count, 0, INT64_MAX, 0);
            continue;
        }
        int cand[CR_SCHED_MAX_TYPES];
        int nc = candidates(s, j, cand);
        if (nc == 0) {
            set_reason(j, held_back(s, j) ? R_HETERO_WAIT : R_NO_TYPE, -1, j->spec.gpu_count, 0,
                       INT64_MAX, 0);
            continue;
        }
        uint32_t k = j->spec.gpu_count;
        bool started = false, never = true, mig_never = false;
        int why = R_NONE, wtype = cand[0], ptype = -1;
        bool pborrow = false;
        uint64_t limit_who = 0; /* R_LIMIT: the tenant whose limit closes, + 1 */
        /* wait-or-start: skip a slower type when waiting for a faster one
         * finishes sooner (the faster type then holds the reason) */
        bool wfs = s->cfg.wait_for_faster && j->spec.gpu_type < 0 && !j->mig[0] &&
                   !cr__sched_frac(j) && j->spec.time_limit_ns > 0 && s->pol->wait_for_faster;
        int64_t wait_at = INT64_MAX;
        int wait_type = -1;
        for (int c = 0; c < nc && !started; c++) {
            int t = cand[c];
            if (cr__sched_frac(j) ? cr__sched_share_any(s, t)
                : j->mig[0]       ? mig_feasible(s, t, j)
                                  : s->types[t].total >= k) {
                never = false;
            } else {
                mig_never |= j->mig[0] != 0;
                continue;
            }
            if (wfs && better_to_wait(s, j, t, res, claim, now_ns, &wait_type, &wait_at)) {
                continue;
            }
            bool borrowed = false;
            int lblk = cr__sched_tree_limit_block(s, j->spec.tenant, t, need_milli(s, j, t));
            if (lblk > 0) {
                if (why == R_NONE || why == R_QUOTA || why == R_LEND) {
                    why = R_LIMIT;
                    wtype = t;
                    limit_who = (uint64_t)lblk;
                }
                continue;
            }
            if (!quota_room(s, j, t)) {
                if (!s->cfg.borrowing) {
                    if (why == R_NONE) {
                        why = R_QUOTA;
                        wtype = t;
                    }
                    continue;
                }
                if (!cr__sched_tree_lend_room(s, j->spec.tenant, t, need_milli(s, j, t))) {
                    if (why == R_NONE || why == R_QUOTA) {
                        why = R_LEND;
                        wtype = t;
                    }
                    continue;
                }
                borrowed = true;
            }
            if (ptype < 0) {
                ptype = t;
                pborrow = borrowed;
            }
            /* behind a reservation: start only if it ends first, or
             * else fits in the extra GPUs (which it then uses up) */
            bool backfill = false, uses_extra = false;
            if (res[t].active && (j->mig[0] || (cr__sched_frac(j) && shares_taken_gpu(s, j, t)))) {
                /* a MIG instance, or a fractional task beside others on a
                 * shared GPU, takes no whole GPU: it cannot delay the
                 * reservation (which counts whole GPUs) */
            } else if (res[t].active) {
                int64_t lim = j->spec.time_limit_ns;
                bool ends_before = lim > 0 && res[t].at != INT64_MAX && now_ns <= res[t].at - lim;
                if (beside_reservation(s, &res[t], j, t)) {
                    /* (not a backfill: it takes nothing the reservation waits for) */
                } else if (!s->cfg.backfill || (!ends_before && k > res[t].extra)) {
                    if (why == R_NONE || why == R_QUOTA) {
                        why = s->cfg.backfill ? R_BACKFILL : R_BLOCKED;
                        wtype = t;
                    }
                    continue;
                } else {
                    backfill = true;
                    uses_extra = !ends_before;
                }
            }
            uint32_t nslot = 0, nconv = 0;
            int rc = cr__sched_plan(s, j, t, &nslot);
            if (rc != 0 && s->cfg.mig_reclaim && !j->mig[0] && !cr__sched_frac(j) &&
                s->types[t].nmig > 0 && plan_reclaim(s, j, t, &nslot, &nconv) == 0) {
                rc = 0; /* on GPUs taken out of MIG mode for it */
            } else if (rc != 0 && s->cfg.mig_reclaim && j->mig[0] && k == 1 &&
                       s->types[t].ndw > 0 && plan_unreclaim(s, j, t, &nslot) == 0) {
                rc = 0; /* on a GPU put back into MIG mode for it */
                nconv = 1;
            }
            if (rc == 0) {
                if (uses_extra) {
                    res[t].extra -= k;
                }
                cr__sched_job_start(s, j, t, s->plan, nslot, now_ns, borrowed);
                j->repart = j->repart || nconv > 0;
                j->start_cycle = s->stats.cycles;
                cr_sched_decision *d = dec_push(s);
                d->action = CR_SCHED_START;
                d->job = j->spec.id;
                d->gpu_type = t;
                d->slot_count = j->nslots;
                d->slots = j->slots;
                d->borrowed = borrowed;
                d->backfilled = backfill;
                d->mig_repartitioned = j->repart;
                s->stats.last_started++;
                s->stats.last_backfilled += backfill;
                started = true;
            } else if (why == R_NONE || why == R_QUOTA || why == R_BACKFILL || why == R_BLOCKED) {
                if (why == R_NONE || rc != CR_ENOENT) {
                    why = rc == CR_EAGAIN ? R_FRAGMENTED : R_NO_FIT;
                    wtype = t;
                }
            }
        }
        if (started) {
            continue;
        }
        bool waiting = wait_type >= 0 && !never;
        if (waiting) {
            why = R_NO_FIT; /* as on the faster type: preempt or reserve there */
            wtype = wait_type;
        }
        if (never) {
            uint32_t most = 0;
            for (int c = 0; c < nc; c++) {
                if (s->types[cand[c]].total > most) {
                    most = s->types[cand[c]].total;
                }
            }
            set_reason(j, mig_never ? R_MIG_NONE : R_NEVER, cand[0], k, most, INT64_MAX, 0);
            continue;
        }
        if (!waiting && !j->mig[0] && !cr__sched_frac(j) && s->types[wtype].nmig > 0 &&
            (why == R_NO_FIT || why == R_FRAGMENTED)) {
            /* the whole GPUs alone are too few: no time frees enough of
             * them, nothing to reserve or preempt for */
            migcount mc;
            mig_count(s, j, wtype, &mc);
            if (s->types[wtype].total - mc.up < k) {
                set_reason(j, R_MIG_BUSY, wtype, k, s->types[wtype].free, INT64_MAX, mig_pack(&mc));
                continue;
            }
        }
        /* preemption, then a reservation */
        if (ptype >= 0 && tries < PREEMPT_TRIES && (why == R_NO_FIT || why == R_FRAGMENTED) &&
            s->cfg.preemption && !res[ptype].active && !futile(&pf[ptype], s, j, ptype, pborrow) &&
            may_preempt(s, &vb[ptype], j, ptype, now_ns, pborrow)) {
            /* (behind a reservation, taking GPUs by preemption could delay
             * the reserved job, which already tried) */
            tries++;
            if (try_preempt(s, j, ptype, now_ns, pborrow)) {
                continue;
            }
            pfail_add(&pf[ptype], s, j, ptype, pborrow);
        }
        int64_t at = INT64_MAX;
        uint64_t other = 0, assume = 0;
        if ((why == R_NO_FIT || why == R_FRAGMENTED) && blocks_queue(s, j) && !res[wtype].active) {
            reserve(s, &res[wtype], j, wtype, now_ns);
            at = res[wtype].at;
            assume = res[wtype].assumed;
        } else if (waiting) {
            /* the faster type's next free GPUs are promised to it for the
             * rest of the cycle */
            claim[wait_type] += k;
            at = wait_at;
        } else if ((why == R_BACKFILL || why == R_BLOCKED) && res[wtype].active) {
            at = res[wtype].at;
            other = res[wtype].job;
            assume = res[wtype].assumed;
        } else if (why == R_LIMIT) {
            other = limit_who;
        }
        set_reason(j,
                   waiting         ? R_WAIT_FASTER
                   : why == R_NONE ? R_NO_FIT
                                   : why,
                   wtype, k, s->types[wtype].free, at, other);
        j->rassume = assume;
    }
    /* Jobs not examined (nothing free, nobody can preempt) keep their old
     * reason fields; cr_sched_job_reason derives a fresh one from the type
     * checks when asked, so the tail of a long queue costs nothing here. */
    for (uint32_t d = 0; d < s->ndec; d++) {
        if (s->dec[d].action == CR_SCHED_PREEMPT) {
            s->dec[d].reason = s->reasons + (size_t)d * CR_SCHED_REASON_MAX;
        }
    }
    *out = s->dec;
    return (int)s->ndec;
}

/* ------------------------------------------------------------------------ */
/* Reasons                                                                  */

static void fmt_dur(char *b, size_t n, int64_t ns)
{
    int64_t sec = ns / 1000000000;
    if (sec < 60) {
        snprintf(b, n, "%" PRId64 "s", sec);
    } else if (sec < 3600) {
        snprintf(b, n, "%" PRId64 "m", sec / 60);
    } else if (sec < 86400) {
        snprintf(b, n, "%" PRId64 "h%" PRId64 "m", sec / 3600, sec % 3600 / 60);
    } else {
        snprintf(b, n, "%" PRId64 "d%" PRId64 "h", sec / 86400, sec % 86400 / 3600);
    }
}

/* The reason of a job the last cycle did not get to: from the type checks
 * alone (what a cycle would have said with nothing free). */
static void tail_reason(const cr_sched *s, job *j)
{
    int cand[CR_SCHED_MAX_TYPES];
    int nc = candidates(s, j, cand);
    if (nc == 0) {
        set_reason(j, held_back(s, j) ? R_HETERO_WAIT : R_NO_TYPE, -1, j->spec.gpu_count, 0,
                   INT64_MAX, 0);
        return;
    }
    uint32_t most = 0;
    for (int c = 0; c < nc; c++) {
        if (s->types[cand[c]].total > most) {
            most = s->types[cand[c]].total;
        }
    }
    if (j->mig[0]) {
        bool any = false;
        for (int c = 0; c < nc && !any; c++) {
            any = mig_feasible(s, cand[c], j);
        }
        if (!any) {
            set_reason(j, R_MIG_NONE, cand[0], j->spec.gpu_count, 0, INT64_MAX, 0);
            return;
        }
    }
    if (!j->mig[0] && !cr__sched_frac(j) && most < j->spec.gpu_count) {
        set_reason(j, R_NEVER, cand[0], j->spec.gpu_count, most, INT64_MAX, 0);
    } else if (!j->mig[0] && !cr__sched_frac(j) && s->types[cand[0]].nmig > 0 &&
               s->types[cand[0]].free < j->spec.gpu_count) {
        migcount mc;
        mig_count(s, j, cand[0], &mc);
        if (s->types[cand[0]].total - mc.up < j->spec.gpu_count) {
            set_reason(j, R_MIG_BUSY, cand[0], j->spec.gpu_count, s->types[cand[0]].free, INT64_MAX,
                       mig_pack(&mc));
        } else {
            set_reason(j, R_NO_FIT, cand[0], j->spec.gpu_count, s->types[cand[0]].free, INT64_MAX,
                       0);
        }
    } else {
        set_reason(j, R_NO_FIT, cand[0], j->spec.gpu_count, s->types[cand[0]].free, INT64_MAX, 0);
    }
}

/* For a job within its tenant's quota: the borrowed GPUs of its type other
 * tenants hold, which it reclaims (each cycle, once they may be stopped),
 * or which are not enough when other tenants' quotas overlap its own. */
static void reclaim_note(const cr_sched *s, const job *j, char *buf, size_t len)
{
    int type = j->rtype;
    if (type < 0 || type >= s->ntypes || j->mig[0] || !quota_room(s, j, type) ||
        !cr__sched_tree_guaranteed(s, j->spec.tenant, type)) {
        return;
    }
    uint32_t total = 0, most = 0;
    int who = -1;
    for (int i = 0; i < s->ntenants; i++) {
        uint32_t b = s->tenants[i].used_b[type] / 1000; /* whole GPUs */
        if (i == j->spec.tenant || b == 0) {
            continue;
        }
        total += b;
        if (b > most) {
            most = b;
            who = i;
        }
    }
    if (who < 0) {
        return;
    }
    snprintf(buf, len, "; %s %u borrowed %s from tenant %s%s",
             total + j->rfree >= j->rneed ? "reclaiming" : "could reclaim only", total,
             s->types[type].name, s->tenants[who].name, total > most ? " and others" : "");
}

int cr_sched_job_reason(const cr_sched *s, uint64_t id, char *buf, size_t len)
{
    const job *j = cr__sched_job_get(s, id);
    if (!j) {
        return CR_ENOENT;
    }
    job tmp;
    if (j->state == CR_JOB_PENDING && j->rcycle != s->stats.cycles && j->qcycle < s->stats.cycles) {
        /* in the queue during the last cycle, which stopped before it (a job
         * queued, preempted or requeued since keeps what it says) */
        tmp = *j;
        tail_reason(s, &tmp);
        j = &tmp;
    }
    if (!buf || len == 0) {
        return CR_EINVAL;
    }
    if (j->state == CR_JOB_RUNNING) {
        snprintf(buf, len, "running");
        return CR_EINVAL;
    }
    const char *tn = j->rtype >= 0 && j->rtype < s->ntypes ? s->types[j->rtype].name : "GPU";
    char shape[48] = "";
    if (j->mig[0]) {
        snprintf(shape, sizeof(shape), " as MIG %s", j->mig);
    } else if (cr__sched_frac(j)) {
        snprintf(shape, sizeof(shape), " as a %.3g share",
                 (double)need_milli(s, j, j->rtype >= 0 ? j->rtype : 0) / 1000.0);
    } else if (j->spec.node_count > 1) {
        snprintf(shape, sizeof(shape), " in %u nodes", j->spec.node_count);
    } else if (j->spec.node_count == 1) {
        snprintf(shape, sizeof(shape), " on one node");
    }
    char when[48] = "";
    if (j->rat != INT64_MAX) {
        char d[24];
        fmt_dur(d, sizeof(d), j->rat > s->now_ns ? j->rat - s->now_ns : 0);
        snprintf(when, sizeof(when), "t+%s", d);
    }
    char assume[96] = "";
    if (j->rassume && j->rat != INT64_MAX) {
        int64_t sec = s->cfg.default_time_ns / 1000000000;
        char d[24];
        if (sec % 3600 == 0) {
            snprintf(d, sizeof(d), "%" PRId64 "h", sec / 3600);
        } else if (sec % 60 == 0) {
            snprintf(d, sizeof(d), "%" PRId64 "m", sec / 60);
        } else {
            fmt_dur(d, sizeof(d), s->cfg.default_time_ns);
        }
        snprintf(assume, sizeof(assume), ", assuming the default run time of %s for job %" PRIu64,
                 d, j->rassume);
    }
    int n = 0;
    switch (j->rcode) {
    case R_NONE:
    case R_NOT_CONSIDERED:
        n = snprintf(buf, len, "not yet considered by a scheduling cycle");
        break;
    case R_NO_TYPE:
        n = snprintf(buf, len,
                     "no GPU type in the cluster can run it (type, throughput, memory "
                     "or MIG profile)");
        break;
    case R_NEVER:
        if (cr__sched_frac(j)) {
            n = snprintf(buf, len, "needs a shareable %s%s but none is in service", tn, shape);
            break;
        }
        n = snprintf(buf, len, "needs %u %s%s but only %u are in service", j->rneed, tn, shape,
                     j->rfree);
        break;
    case R_NO_FIT:
    case R_FRAGMENTED: {
        char rec[192] = "";
        reclaim_note(s, j, rec, sizeof(rec));
        n = snprintf(buf, len, "needs %u %s%s: %u free%s%s%s%s%s", j->rneed, tn, shape, j->rfree,
                     j->rcode == R_FRAGMENTED ? " but not in that shape" : "", rec,
                     when[0] ? "; reserved for " : "", when, assume);
        break;
    }
    case R_QUOTA: {
        const tenant_rec *t = &s->tenants[j->spec.tenant];
        n = snprintf(buf, len, "tenant quota for %s reached (%g of %" PRId64 " in use)", tn,
                     t->used_nb[j->rtype] / 1000.0, t->quota[j->rtype]);
        break;
    }
    case R_LIMIT: {
        int a = (int)j->rother - 1;
        if (a < 0 || a >= s->ntenants) {
            a = j->spec.tenant;
        }
        const tenant_rec *t = &s->tenants[a];
        n = snprintf(buf, len, "tenant %s limit for %s reached (%g of %" PRId64 " in use)", t->name,
                     tn, (double)cr__sched_tree_used(s, a, j->rtype, true) / 1000.0,
                     t->limit[j->rtype]);
        break;
    }
    case R_LEND:
        n = snprintf(buf, len,
                     "tenant quota for %s reached, and the idle %s guaranteed to others is lent "
                     "up to their lending limits",
                     tn, tn);
        break;
    case R_BLOCKED:
        n = snprintf(buf, len,
                     "waiting behind job %" PRIu64 ", which holds the %s reservation%s%s%s",
                     j->rother, tn, when[0] ? " for " : "", when, assume);
        break;
    case R_BACKFILL:
        n = snprintf(buf, len,
                     "needs %u %s%s: %u free, but starting now would delay job %" PRIu64
                     " reserved for %s%s",
                     j->rneed, tn, shape, j->rfree, j->rother, when[0] ? when : "an unknown time",
                     assume);
        break;
    case R_NO_FREE:
        n = snprintf(buf, len, "no free GPUs in the cluster");
        break;
    case R_MIG_NONE:
        if (j->rtype >= 0 && j->rtype < s->ntypes && s->types[j->rtype].nmig == 0) {
            n = snprintf(buf, len, "needs %u %s%s but no %s is in MIG mode", j->rneed, tn, shape,
                         tn);
            break;
        }
        n = snprintf(buf, len,
                     "needs %u %s%s but no %s in MIG mode has that instance in its layout or is "
                     "marked dynamic (could be repartitioned for it)",
                     j->rneed, tn, shape, tn);
        break;
    case R_MIG_BUSY: {
        uint32_t up = (uint32_t)(j->rother & 0xfffff), dyn = (uint32_t)(j->rother >> 20 & 0xfffff),
                 idle = (uint32_t)(j->rother >> 40 & 0xfffff);
        if (dyn == 0) {
            n = snprintf(buf, len,
                         "needs %u whole %s%s: %u free; %u are in MIG mode (they run MIG jobs "
                         "only) and none is marked dynamic",
                         j->rneed, tn, shape, j->rfree, up);
        } else if (!s->cfg.mig_reclaim) {
            n = snprintf(buf, len,
                         "needs %u whole %s%s: %u free; %u are in MIG mode, %u of them marked "
                         "dynamic, but taking a GPU out of MIG mode is not enabled here "
                         "(mig_reclaim)",
                         j->rneed, tn, shape, j->rfree, up, dyn);
        } else {
            n = snprintf(buf, len,
                         "needs %u whole %s%s: %u free; %u of the %u dynamic MIG GPUs are idle "
                         "(one leaves MIG mode only once its MIG jobs have ended)",
                         j->rneed, tn, shape, j->rfree, idle, dyn);
        }
        break;
    }
    case R_HETERO_WAIT:
        n = snprintf(buf, len, "%s", s->pol->wait_text ? s->pol->wait_text : "pending");
        break;
    case R_CHECKPOINTING:
        n = snprintf(buf, len,
                     "suspended by the time-sharing round: checkpointing (its run has not "
                     "ended yet)");
        break;
    case R_SUSPENDED:
        n = snprintf(buf, len,
                     "suspended by the time-sharing round (checkpointed); resumes when a "
                     "round leases it GPUs");
        break;
    case R_PREEMPTED:
        n = snprintf(buf, len, "preempted for job %" PRIu64 "; back in the queue", j->rother);
        break;
    case R_REQUEUED:
        n = snprintf(buf, len, "requeued after a node or GPU failure; back in the queue");
        break;
    case R_WAIT_FASTER:
        n = snprintf(buf, len,
                     "needs %u %s: %u free; waiting for them (expected %s) finishes sooner "
                     "than starting now on a slower type",
                     j->rneed, tn, j->rfree, when[0] ? when : "soon");
        break;
    default:
        n = snprintf(buf, len, "pending");
        break;
    }
    return n < 0 ? 0 : ((size_t)n >= len ? (int)len - 1 : n);
}
