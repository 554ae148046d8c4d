/*
 * sched_policy_rounds.c - ROUNDS: time-shared, heterogeneity-aware
 * scheduling in rounds (Gavel's max_min_fairness_perf), the policy corral
 * sim's --policy rounds models, as a cr_sched policy the controller runs.
 *
 * At the first cycle at or after a round boundary (config.round_ns) the
 * round is decided:
 *  - The active jobs (pending and running, whole GPUs: MIG and fractional
 *    tasks stay out and only fill) are grouped into classes of equal GPU
 *    count and equal rates per type (exact: sched_rounds_lp.c) and the
 *    max-min LP gives each the share of time X[j][t] it should get on each
 *    type; a job's rate on t is its throughput there, 0 where it may not
 *    run or the type has fewer GPUs than it asks.
 *  - Running jobs that cannot be suspended keep their GPUs (not
 *    preemptible; preemption off; MIG or fractional; younger than
 *    min_runtime_before_preempt_ns).
 *  - The rest are leased GPUs per type, pooled (placement comes later, by
 *    the cycle), in order of priority[j][t] = X[j][t] / the share of its
 *    life the job held type t (a job owed time goes first), then X, then
 *    the job already running there (no switch), then submit order;
 *    entries with X = 0 come last, so no GPU stays idle while a job could
 *    use it.
 *  - A running job not leased its own type again is suspended
 *    (cr__sched_suspend: a PREEMPT decision that loses no work, the job
 *    checkpoints on the way out) and waits, or moves to the type it was
 *    leased.
 * Then the cycle places leased jobs first (queue class 0, on their leased
 * type only) and the unleased ones after (class 1, any type, by
 * throughput): between rounds, GPUs freed by a finish go to whoever can
 * use them. A job a round suspended without a lease does not restart in
 * that round. No head-of-line blocking, no ranked preemption. With
 * config.suspend_hold (the controller) a suspended job starts again only
 * once the caller said its run ended (cr_sched_job_resumable): its
 * checkpoint is written; until then it is out of the rounds.
 *
 * What the simulator's own engine (src/sim/sim_rounds.c) adds and this does
 * not yet: its default order (the pairs with X > 0 by the fewest GPU-seconds
 * still needed, from runtime estimates; this policy's order is that
 * engine's --fair-order), the drain guard, mid-round migration to a faster
 * free type, the switch cost in the priority, the time-accounting window.
 * Nor does the fill keep the GPUs of a leased job that is still held for
 * its checkpoint (suspend_hold): a pending job never suspended may take
 * them, and the leased job then waits for the next round.
 */
#include "sched_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cr_alloc.h"

static bool whole(const job *j)
{
    return !j->mig[0] && !cr__sched_frac(j);
}

static double rate_on(const cr_sched *s, const job *j, int t)
{
    if (j->spec.gpu_type >= 0 && j->spec.gpu_type != t) {
        return 0;
    }
    if (s->types[t].total < j->spec.gpu_count || s->types[t].total == 0) {
        return 0;
    }
    if (s->types[t].mem_bytes && s->types[t].mem_bytes < j->spec.mem_bytes) {
        return 0;
    }
    return cr__sched_tput(j, t);
}

static bool suspendable(const cr_sched *s, const job *j, int64_t now_ns)
{
    return s->cfg.preemption && j->spec.preemptible && whole(j) &&
           now_ns - j->start_ns >= s->cfg.min_runtime_before_preempt_ns;
}

static bool job_before(const job *a, const job *b)
{
    if (a->spec.submit_ns != b->spec.submit_ns) {
        return a->spec.submit_ns < b->spec.submit_ns;
    }
    return a->spec.id < b->spec.id;
}

static int cmp_job(const void *pa, const void *pb)
{
    const job *a = *(job *const *)pa, *b = *(job *const *)pb;
    return job_before(a, b) ? -1 : job_before(b, a);
}

/* A class key: GPU count and rates, compared as in sim_rounds.c. */
typedef struct rkey {
    uint32_t scale;
    uint32_t k; /* index into the active jobs */
    const double *r;
} rkey;

static int cmp_key_n(const rkey *a, const rkey *b, int ntypes)
{
    if (a->scale != b->scale) {
        return a->scale < b->scale ? -1 : 1;
    }
    for (int t = 0; t < ntypes; t++) {
        if (a->r[t] != b->r[t]) {
            return a->r[t] < b->r[t] ? -1 : 1;
        }
    }
    return a->k < b->k ? -1 : (a->k > b->k);
}

/* Merge sort of the keys (stable; qsort has no context for ntypes). */
static void sort_keys(rkey *v, rkey *tmp, size_t n, int ntypes)
{
    if (n < 2) {
        return;
    }
    size_t h = n / 2;
    sort_keys(v, tmp, h, ntypes);
    sort_keys(v + h, tmp, n - h, ntypes);
    size_t i = 0, j = h, o = 0;
    while (i < h && j < n) {
        tmp[o++] = cmp_key_n(&v[j], &v[i], ntypes) < 0 ? v[j++] : v[i++];
    }
    while (i < h) {
        tmp[o++] = v[i++];
    }
    while (j < n) {
        tmp[o++] = v[j++];
    }
    memcpy(v, tmp, n * sizeof *v);
}

typedef struct rent {
    double prio, x;
    uint32_t k; /* active job */
    int type;
    bool incumbent;
} rent;

static int cmp_ent(const void *pa, const void *pb)
{
    const rent *a = pa, *b = pb;
    if (a->prio != b->prio) {
        return a->prio > b->prio ? -1 : 1;
    }
    if (a->x != b->x) {
        return a->x > b->x ? -1 : 1;
    }
    if (a->incumbent != b->incumbent) {
        return a->incumbent ? -1 : 1;
    }
    if (a->k != b->k) {
        return a->k < b->k ? -1 : 1;
    }
    return a->type - b->type;
}

/* Wall time j held type t, its current run included. */
static int64_t held_ns(const job *j, int t, int64_t now_ns)
{
    int64_t h = j->recv_ns ? j->recv_ns[t] : 0;
    if (j->state == CR_JOB_RUNNING && j->run_type == t && now_ns > j->start_ns) {
        h += now_ns - j->start_ns;
    }
    return h;
}

static void round_decide(cr_sched *s, int64_t now_ns)
{
    int ntypes = s->ntypes;
    size_t n = 0, cap_n = (size_t)s->npending + s->nrunning;
    job **act = cr_malloc((cap_n ? cap_n : 1) * sizeof *act);
    int64_t left[CR_SCHED_MAX_TYPES];
    for (int t = 0; t < ntypes; t++) {
        left[t] = s->types[t].total;
    }
    for (uint32_t i = 0; i < s->nrunning; i++) {
        job *j = s->running[i];
        j->lease_type = -1;
        if (!suspendable(s, j, now_ns)) {
            /* keeps its GPUs: counted out of the round's pool */
            j->lease_type = (int8_t)j->run_type;
            left[j->run_type] -= whole(j) ? j->spec.gpu_count : 0;
            continue;
        }
        act[n++] = j;
    }
    for (uint32_t i = 0; i < s->npending; i++) {
        job *j = s->pending[i];
        j->lease_type = -1;
        if (whole(j) && !j->susp_held && n < CR_SCHED_ROUNDS_LP_MAX_JOBS) {
            act[n++] = j;
        }
    }
    if (n > 1) {
        qsort(act, n, sizeof *act, cmp_job);
    }
    double *rate = cr_malloc((n ? n : 1) * (size_t)ntypes * sizeof *rate);
    double *lp_rate = cr_malloc((n ? n : 1) * (size_t)ntypes * sizeof *lp_rate);
    double *mult = cr_malloc((n ? n : 1) * sizeof *mult);
    int *scale = cr_malloc((n ? n : 1) * sizeof *scale);
    size_t *cls = cr_malloc((n ? n : 1) * sizeof *cls);
    rkey *keys = cr_malloc((n ? n : 1) * sizeof *keys);
    rkey *tmp = cr_malloc((n ? n : 1) * sizeof *tmp);
    for (size_t k = 0; k < n; k++) {
        for (int t = 0; t < ntypes; t++) {
            rate[k * (size_t)ntypes + (size_t)t] = rate_on(s, act[k], t);
        }
        keys[k] = (rkey){act[k]->spec.gpu_count, (uint32_t)k, &rate[k * (size_t)ntypes]};
    }
    sort_keys(keys, tmp, n, ntypes);
    size_t nc = 0;
    for (size_t q = 0; q < n; q++) {
        bool same = q > 0 && keys[q].scale == keys[q - 1].scale &&
                    memcmp(keys[q].r, keys[q - 1].r, (size_t)ntypes * sizeof(double)) == 0;
        if (!same) {
            memcpy(&lp_rate[nc * (size_t)ntypes], keys[q].r, (size_t)ntypes * sizeof(double));
            scale[nc] = (int)keys[q].scale;
            mult[nc] = 0;
            nc++;
        }
        mult[nc - 1] += 1;
        cls[keys[q].k] = nc - 1;
    }
    double capd[CR_SCHED_MAX_TYPES];
    for (int t = 0; t < ntypes; t++) {
        capd[t] = left[t] > 0 ? (double)left[t] : 0;
    }
    double *cx = cr_calloc(nc ? nc * (size_t)ntypes : 1, sizeof *cx);
    double z;
    if (nc > 0 && cr_sched_rounds_lp(nc, ntypes, lp_rate, scale, mult, capd, true, cx, &z) != 0) {
        memset(cx, 0, nc * (size_t)ntypes * sizeof *cx); /* no optimum: by submit order */
    }
    rent *ent = cr_malloc((n ? n : 1) * (size_t)ntypes * sizeof *ent);
    size_t ne = 0;
    for (size_t k = 0; k < n; k++) {
        const job *j = act[k];
        double age = (double)(now_ns - j->spec.submit_ns) / 1e9;
        age = age < 1 ? 1 : age;
        for (int t = 0; t < ntypes; t++) {
            if (rate[k * (size_t)ntypes + (size_t)t] <= 0) {
                continue;
            }
            double xv = cx[cls[k] * (size_t)ntypes + (size_t)t];
            double share = (double)held_ns(j, t, now_ns) / 1e9 / age;
            ent[ne++] = (rent){xv / (share > 1e-9 ? share : 1e-9), xv, (uint32_t)k, t,
                               j->state == CR_JOB_RUNNING && j->run_type == t};
        }
    }
    if (ne > 1) {
        qsort(ent, ne, sizeof *ent, cmp_ent); /* (ent may be NULL with no GPU type) */
    }
    for (size_t e = 0; e < ne; e++) {
        job *j = act[ent[e].k];
        int t = ent[e].type;
        if (j->lease_type < 0 && left[t] >= j->spec.gpu_count) {
            j->lease_type = (int8_t)t;
            left[t] -= j->spec.gpu_count;
        }
    }
    s->nrounds++;
    for (size_t k = 0; k < n; k++) {
        job *j = act[k];
        if (j->state != CR_JOB_RUNNING || j->lease_type == j->run_type) {
            continue;
        }
        char why[CR_SCHED_REASON_MAX];
        if (j->lease_type < 0) {
            snprintf(why, sizeof why,
                     "suspended by round %" PRIu64 ": its %s lease is not renewed (jobs owed more "
                     "time on the cluster go first)",
                     s->nrounds, s->types[j->run_type].name);
        } else {
            snprintf(why, sizeof why,
                     "suspended by round %" PRIu64 ": moves from %s to %s (the round's allocation)",
                     s->nrounds, s->types[j->run_type].name, s->types[j->lease_type].name);
        }
        cr__sched_suspend(s, j, now_ns, why);
        j->susp_round = s->nrounds;
    }
    s->round_rekey = true;
    free(act);
    free(rate);
    free(lp_rate);
    free(mult);
    free(scale);
    free(cls);
    free(keys);
    free(tmp);
    free(cx);
    free(ent);
}

static void rounds_begin(cr_sched *s, int64_t now_ns)
{
    if (s->round_next_ns != 0 && now_ns < s->round_next_ns) {
        return;
    }
    s->round_next_ns = now_ns + s->cfg.round_ns;
    round_decide(s, now_ns);
}

static int64_t rounds_next(const cr_sched *s)
{
    return s->round_next_ns ? s->round_next_ns : INT64_MAX;
}

static int64_t rounds_key(const cr_sched *s, const job *j, int64_t now_ns)
{
    (void)s;
    (void)now_ns;
    return j->lease_type >= 0 ? 0 : 1;
}

static void rounds_order_begin(cr_sched *s, int64_t now_ns)
{
    if (s->round_rekey) {
        s->round_rekey = false;
        cr__sched_queue_rekey(s, now_ns, true);
    }
}

static int rounds_type(const cr_sched *s, const job *j)
{
    if (j->lease_type >= 0) {
        return j->lease_type;
    }
    /* a job this round suspended and did not lease waits for the next:
     * else it would take back the GPUs of a leased job still held for its
     * checkpoint (config.suspend_hold), a switch for nothing */
    return j->susp_round == s->nrounds && j->preemptions > 0 ? HT_WAIT : HT_FREE;
}

static void rounds_stopped(cr_sched *s, job *j, int64_t now_ns)
{
    (void)s;
    if (!j->recv_ns) {
        j->recv_ns = cr_calloc(CR_SCHED_MAX_TYPES, sizeof *j->recv_ns);
    }
    if (now_ns > j->start_ns) {
        j->recv_ns[j->run_type] += now_ns - j->start_ns;
    }
}

const cr__sched_policy_ops cr__sched_policy_rounds = {
    .name = "rounds",
    .queue_key = rounds_key,
    .cycle_begin = rounds_begin,
    .order_begin = rounds_order_begin,
    .by_throughput = true,
    .assigned_type = rounds_type,
    .head_blocks = false,
    .rank_why = RANK_NONE,
    .job_stopped = rounds_stopped,
    .next_cycle_ns = rounds_next,
    .wait_text = "the time-sharing round leases the GPUs to jobs owed more time; the next round "
                 "decides again",
};
