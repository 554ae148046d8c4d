/*
 * sim_rounds.c - the 'rounds' policy: time-shared, heterogeneity-aware
 * scheduling in rounds, with leases and suspend/resume at a modelled cost.
 *
 * Every round (default 6 minutes, --round) the allocation X[j][t] - the
 * share of time each active job should get on each GPU type - is the
 * solution of the max-min fairness LP in sched_rounds_lp.c, recomputed when
 * the set of active jobs changed since the last solve. Jobs are then given
 * GPUs for the round: by default the (job, type) pairs with X > 0 by the
 * fewest GPU-seconds the job still needs on that type (see rank()); with
 * --fair-order (or without estimates) by priority[j][t] = X[j][t] / the
 * share of its life the job has actually spent on type t: a job that got
 * less than its allocation goes first. Entries with X = 0 still come last,
 * so no GPU stays idle while a job could use it.
 *
 * Leases: a running job given the same type for the next round keeps its
 * GPUs and pays nothing (GPUs of one type are pooled, as in Gavel's
 * one-GPU-per-server setting: a gang is not tied to a node here). A job
 * that loses its GPUs is suspended at the round boundary - it checkpoints
 * on the way out, so no work is lost - and pays the switch cost (--switch,
 * default 10 s) when it resumes: for that long after the resume it holds
 * its GPUs without progress. A first start pays nothing. A job moved to
 * another type pays the same cost. Non-preemptible jobs are never suspended.
 *
 * Between rounds the policy is work-conserving: GPUs freed by a finish, and
 * arrivals, are filled at once from the jobs not running, in the same
 * priority order (only while the round has more than the switch cost left,
 * so the start is worth it). Migration: when GPUs of a faster type are free
 * mid-round and no waiting job takes them, a running job moves up when the
 * work it gains by the end of the round (or its finish) beats the work the
 * switch costs, rate_new * switch - so a move never loses more than its
 * modelled cost (tests/sim: the property test).
 *
 * The drain guard applies at round boundaries; fills between rounds use
 * the waiting jobs' heaps (wq) and so the default order alone.
 *
 * Deterministic: every order is by (key, job index), no RNG is drawn.
 */
#include "sim_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_time.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { R_FUTURE = 0, R_WAIT, R_RUN, R_DONE };

typedef struct rjob {
    uint8_t state;                 /* R_* */
    bool started;                  /* ran before: a resume pays the switch cost */
    int type;                      /* R_RUN: its type */
    int64_t seg_start;             /* R_RUN: start of this run */
    int64_t warm_until;            /* R_RUN: progress starts here (switch cost) */
    int64_t epoch;                 /* bumped at every start and stop */
    double done;                   /* work done before this run */
    double recv[CR_SIM_MAX_TYPES]; /* seconds held on each type */
    double x[CR_SIM_MAX_TYPES];    /* allocation of the last LP */
    double demand0, cap0;          /* demand and capacity integrals at arrival */
    size_t slot;                   /* R_WAIT, R_RUN: its position in active[] */
} rjob;

typedef struct rent { /* one (job, type) candidate of a round */
    double prio;
    double left_gpu_s; /* default order: GPU-seconds it still needs there (0 in fair order) */
    double x;
    double rel; /* rate there / the job's best rate */
    uint32_t job;
    int type;
    bool incumbent;
} rent;

typedef struct mcand { /* a running job that would go faster on another type */
    double gain;       /* rate there / rate on its type */
    int64_t epoch;     /* the job's epoch at its start: stale once it changed */
    uint32_t job;
} mcand;

typedef struct reng {
    const cr__sim_opts *o;
    const cr__sim_workload *w;
    cr__sim_result *res;
    cr__sim_heap heap;
    rjob *jobs;
    size_t *active; /* indices of jobs waiting or running (in no order: swap-removed) */
    size_t nactive;
    size_t gang_count[32]; /* active jobs by floor(log2(GPU count)) */
    int ntypes;
    double cap[CR_SIM_MAX_TYPES];
    uint32_t busy[CR_SIM_MAX_TYPES];
    size_t done, next_arrival, running;
    int64_t now, last, round_ns, switch_ns, next_round;
    double demand_int, cap_int;
    uint64_t demand;
    bool lp_dirty;   /* the active set changed since the last solve */
    bool lp_missing; /* a job arrived whose class the last solve did not have */
    /* the last solve's classes, in cmp_key order, and their allocation
     * (cls_x[c * ntypes + t]): a mid-round arrival of a known class gets
     * its class's allocation without a solve */
    struct rkey *cls_key;
    double *cls_x;
    size_t ncls, cls_cap;
    int64_t reset_at, reset_ns; /* time accounting window: start, length */
    /* scratch for the LP and the round (owned, grown as needed) */
    double *lp_rate, *lp_x, *lp_mult;
    int *lp_scale;
    rent *ent;
    size_t scratch_cap;
    /* Default order only: the waiting jobs' pairs, one heap per type, kept
     * between fills (a waiting job's key does not change until the next
     * solve: its remaining work stands still), rebuilt after every round
     * and solve, pushed to at arrivals; pairs of jobs no longer waiting
     * are dropped when they come up. aside: popped pairs that did not fit. */
    /* Mid-round moves: mh[u][t] holds the running jobs on type u that are
     * faster on t, by gain, pushed at each start (stale ones dropped when
     * they come up), so a fill finds the best move without a scan. */
    mcand *mh[CR_SIM_MAX_TYPES][CR_SIM_MAX_TYPES], *maside;
    size_t nmh[CR_SIM_MAX_TYPES][CR_SIM_MAX_TYPES], mh_cap[CR_SIM_MAX_TYPES][CR_SIM_MAX_TYPES];
    size_t nmaside, maside_cap;
    rent *wq[CR_SIM_MAX_TYPES], *aside;
    size_t nwq[CR_SIM_MAX_TYPES], wq_cap[CR_SIM_MAX_TYPES], naside, aside_cap;
} reng;

static double rate_of(const reng *e, size_t i, int t)
{
    const cr__sim_job *wj = &e->w->jobs[i];
    if (wj->type_req >= 0 && wj->type_req != t) {
        return 0;
    }
    if ((double)wj->gpu_count > e->cap[t]) {
        return 0;
    }
    return wj->rate[t];
}

static int gang_bucket(int gpus)
{
    int b = 0;
    while (b < 31 && (gpus >> (b + 1)) > 0) {
        b++;
    }
    return b;
}

/* A lower bound on the GPU count of every active job. */
static double min_gang(const reng *e)
{
    for (int b = 0; b < 32; b++) {
        if (e->gang_count[b]) {
            return (double)(1u << b);
        }
    }
    return 1e30;
}

static void advance(reng *e)
{
    int64_t dt = e->now - e->last;
    if (dt <= 0) {
        return;
    }
    double d = (double)dt;
    cr__sim_result *r = e->res;
    double busy = 0, healthy = 0;
    for (int t = 0; t < e->ntypes; t++) {
        r->busy_gpu_ns[t] += e->busy[t] * d;
        r->healthy_gpu_ns[t] += e->cap[t] * d;
        double p = e->o->power_w[t];
        double idle = e->cap[t] - e->busy[t];
        r->energy_j[t] += (e->busy[t] * p + idle * p * e->o->idle_frac) * d / 1e9;
        busy += e->busy[t];
        healthy += e->cap[t];
    }
    double free_gpus = healthy - busy;
    r->free_gpu_ns += free_gpus * d;
    r->total_gpu_ns += healthy * d;
    if (e->running < e->nactive) {
        r->stranded_gpu_ns += free_gpus * d;
    }
    e->demand_int += (double)e->demand * d;
    e->cap_int += healthy * d;
    e->last = e->now;
}

static void sample(reng *e)
{
    cr__sim_result *r = e->res;
    cr__sim_sample s = {.t_ns = e->now};
    for (int t = 0; t < e->ntypes; t++) {
        s.busy += e->busy[t];
        s.healthy += (uint32_t)e->cap[t];
    }
    s.running = (uint32_t)e->running; /* every running job is active, the rest wait */
    s.queue = (uint32_t)(e->nactive - e->running);
    if (r->nsamples) {
        cr__sim_sample *p = &r->samples[r->nsamples - 1];
        if (p->busy == s.busy && p->queue == s.queue && p->running == s.running) {
            return;
        }
        if (p->t_ns == s.t_ns) {
            *p = s;
            return;
        }
    }
    CR_GROW(r->samples, r->nsamples, r->samples_cap);
    r->samples[r->nsamples++] = s;
}

/* Work done by job i if its current run stopped now. */
static double done_now(const reng *e, size_t i)
{
    const rjob *j = &e->jobs[i];
    double d = j->done;
    if (j->state == R_RUN && e->now > j->warm_until) {
        d += e->w->jobs[i].rate[j->type] * (double)(e->now - j->warm_until) / 1e9;
    }
    return d;
}

static bool mc_before(const mcand *a, const mcand *b)
{
    return a->gain != b->gain ? a->gain > b->gain : a->job < b->job;
}

static void mh_push(mcand **hp, size_t *n, size_t *cap, mcand m)
{
    CR_GROW(*hp, *n, *cap);
    mcand *h = *hp;
    size_t k = (*n)++;
    h[k] = m;
    while (k > 0 && mc_before(&h[k], &h[(k - 1) / 2])) {
        mcand tmp = h[k];
        h[k] = h[(k - 1) / 2];
        h[(k - 1) / 2] = tmp;
        k = (k - 1) / 2;
    }
}

static mcand mh_pop(mcand *h, size_t *n)
{
    mcand top = h[0];
    h[0] = h[--*n];
    for (size_t k = 0;;) {
        size_t l = 2 * k + 1, m = k;
        if (l < *n && mc_before(&h[l], &h[m])) {
            m = l;
        }
        if (l + 1 < *n && mc_before(&h[l + 1], &h[m])) {
            m = l + 1;
        }
        if (m == k) {
            break;
        }
        mcand tmp = h[k];
        h[k] = h[m];
        h[m] = tmp;
        k = m;
    }
    return top;
}

static double rate_of(const reng *e, size_t i, int t);

static void start(reng *e, size_t i, int t)
{
    rjob *j = &e->jobs[i];
    const cr__sim_job *wj = &e->w->jobs[i];
    cr__sim_jobres *jr = &e->res->jobs[i];
    int64_t cost = j->started ? e->switch_ns : 0;
    j->state = R_RUN;
    j->type = t;
    j->seg_start = e->now;
    j->warm_until = e->now + cost;
    j->epoch++;
    j->started = true;
    e->running++;
    e->busy[t] += (uint32_t)wj->gpu_count;
    e->res->starts[t]++;
    if (jr->first_start_ns < 0) {
        jr->first_start_ns = e->now;
    }
    jr->type = t;
    double left = wj->work - j->done;
    double ns = left > 0 ? ceil(left / wj->rate[t] * 1e9) : 0;
    int64_t dur = cost + (ns > 1e18 ? (int64_t)1e18 : (int64_t)ns);
    cr__sim_heap_push(&e->heap, e->now + (dur < 1 ? 1 : dur), CR_SIM_EV_FINISH, (int64_t)i,
                      j->epoch);
    if (wj->preemptible && !e->o->no_migrate) {
        for (int u = 0; u < e->ntypes; u++) {
            double r = rate_of(e, i, u);
            if (u != t && r > wj->rate[t]) {
                mh_push(&e->mh[t][u], &e->nmh[t][u], &e->mh_cap[t][u],
                        (mcand){.gain = r / wj->rate[t], .epoch = j->epoch, .job = (uint32_t)i});
            }
        }
    }
}

/* Stop job i's run: suspended (checkpointed, nothing lost but the switch
 * time not yet served) or finished. */
static void stop(reng *e, size_t i, bool finished)
{
    rjob *j = &e->jobs[i];
    const cr__sim_job *wj = &e->w->jobs[i];
    cr__sim_jobres *jr = &e->res->jobs[i];
    double held = (double)(e->now - j->seg_start) / 1e9;
    int64_t warm = (e->now < j->warm_until ? e->now : j->warm_until) - j->seg_start;
    jr->gpu_s += held * wj->gpu_count;
    jr->lost_gpu_s += (double)warm / 1e9 * wj->gpu_count;
    int64_t from = j->seg_start > e->reset_at ? j->seg_start : e->reset_at;
    j->recv[j->type] += (double)(e->now - from) / 1e9;
    j->done = finished ? wj->work : done_now(e, i);
    if (j->done > wj->work) {
        j->done = wj->work;
    }
    e->busy[j->type] -= (uint32_t)wj->gpu_count;
    e->running--;
    j->epoch++;
    if (finished) {
        j->state = R_DONE;
        e->done++;
        e->demand -= (uint64_t)wj->gpu_count;
        jr->finish_ns = e->now;
        double dc = e->cap_int - j->cap0, dd = e->demand_int - j->demand0;
        jr->contention = (dc > 0 && dd > dc) ? dd / dc : 1.0;
        e->lp_dirty = true;
        size_t k = j->slot; /* every order over active[] is by job, not by position */
        e->active[k] = e->active[--e->nactive];
        e->jobs[e->active[k]].slot = k;
        e->gang_count[gang_bucket(wj->gpu_count)]--;
    } else {
        j->state = R_WAIT;
        jr->preemptions++;
    }
}

static void ensure_scratch(reng *e, size_t n)
{
    if (n <= e->scratch_cap) {
        return;
    }
    size_t cap = e->scratch_cap ? e->scratch_cap : 64;
    while (cap < n) {
        cap *= 2;
    }
    size_t nt = (size_t)e->ntypes;
    e->lp_rate = cr_realloc(e->lp_rate, cap * nt * sizeof *e->lp_rate);
    e->lp_x = cr_realloc(e->lp_x, cap * nt * sizeof *e->lp_x);
    e->lp_scale = cr_realloc(e->lp_scale, cap * sizeof *e->lp_scale);
    e->lp_mult = cr_realloc(e->lp_mult, cap * sizeof *e->lp_mult);
    e->ent = cr_realloc(e->ent, cap * nt * sizeof *e->ent);
    e->scratch_cap = cap;
}

struct rkey { /* a job's LP class: GPU count and rates */
    int scale;
    double r[CR_SIM_MAX_TYPES];
    size_t k; /* position in active[] */
};
typedef struct rkey rkey;

static int cmp_class(const rkey *a, const rkey *b)
{
    if (a->scale != b->scale) {
        return a->scale < b->scale ? -1 : 1;
    }
    for (int t = 0; t < CR_SIM_MAX_TYPES; t++) {
        if (a->r[t] != b->r[t]) {
            return a->r[t] < b->r[t] ? -1 : 1;
        }
    }
    return 0;
}

static void job_key(const reng *e, size_t i, rkey *key)
{
    memset(key, 0, sizeof *key);
    key->scale = e->w->jobs[i].gpu_count;
    for (int t = 0; t < e->ntypes; t++) {
        key->r[t] = rate_of(e, i, t);
    }
}

static int cmp_key(const void *pa, const void *pb)
{
    const rkey *a = pa, *b = pb;
    if (a->scale != b->scale) {
        return a->scale < b->scale ? -1 : 1;
    }
    for (int t = 0; t < CR_SIM_MAX_TYPES; t++) {
        if (a->r[t] != b->r[t]) {
            return a->r[t] < b->r[t] ? -1 : 1;
        }
    }
    return a->k < b->k ? -1 : (a->k > b->k);
}

/* Solve the LP over classes of identical jobs (same GPU count and rates:
 * exact, see sim_rounds_lp.c), at most the distinct (model, GPU count)
 * pairs of the workload, and give every job its class's allocation. */
static int solve(reng *e)
{
    size_t n = e->nactive;
    ensure_scratch(e, n);
    size_t nt = (size_t)e->ntypes;
    rkey *keys = cr_calloc(n ? n : 1, sizeof *keys);
    size_t *cls = cr_malloc((n ? n : 1) * sizeof *cls); /* class of keys[q] */
    for (size_t k = 0; k < n; k++) {
        size_t i = e->active[k];
        keys[k].scale = e->w->jobs[i].gpu_count;
        keys[k].k = k;
        for (int t = 0; t < e->ntypes; t++) {
            keys[k].r[t] = rate_of(e, i, t);
        }
    }
    qsort(keys, n, sizeof *keys, cmp_key);
    size_t nc = 0;
    for (size_t q = 0; q < n; q++) {
        bool same = q > 0 && keys[q].scale == keys[q - 1].scale &&
                    memcmp(keys[q].r, keys[q - 1].r, sizeof keys[q].r) == 0;
        if (!same) {
            memcpy(&e->lp_rate[nc * nt], keys[q].r, nt * sizeof(double));
            e->lp_scale[nc] = keys[q].scale;
            e->lp_mult[nc] = 0;
            nc++;
        }
        e->lp_mult[nc - 1] += 1;
        cls[q] = nc - 1;
    }
    double z;
    int rc = nc > CR_SIM_ROUNDS_LP_MAX_JOBS
                 ? CR_ERANGE
                 : cr_sched_rounds_lp(nc, e->ntypes, e->lp_rate, e->lp_scale, e->lp_mult, e->cap,
                                      !e->o->no_spread, e->lp_x, &z);
    if (rc == 0) {
        for (size_t q = 0; q < n; q++) {
            memcpy(e->jobs[e->active[keys[q].k]].x, &e->lp_x[cls[q] * nt], nt * sizeof(double));
        }
        if (nc > e->cls_cap) {
            e->cls_cap = nc;
            e->cls_key = cr_realloc(e->cls_key, nc * sizeof *e->cls_key);
            e->cls_x = cr_realloc(e->cls_x, nc * nt * sizeof *e->cls_x);
        }
        for (size_t q = 0; q < n; q++) {
            e->cls_key[cls[q]] = keys[q];
        }
        memcpy(e->cls_x, e->lp_x, nc * nt * sizeof *e->cls_x);
        e->ncls = nc;
        e->lp_dirty = e->lp_missing = false;
    }
    free(keys);
    free(cls);
    return rc;
}

/* A job arriving between solves gets the allocation its class had at the
 * last one; a class that solve did not have sets lp_missing. */
static void assign_class_x(reng *e, size_t i)
{
    rkey key;
    job_key(e, i, &key);
    size_t lo = 0, hi = e->ncls;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = cmp_class(&e->cls_key[mid], &key);
        if (c == 0) {
            memcpy(e->jobs[i].x, &e->cls_x[mid * (size_t)e->ntypes],
                   (size_t)e->ntypes * sizeof(double));
            return;
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    e->lp_missing = true;
}

/* Priority of job i on type t: its allocation over the share of its life
 * it has held type t (a job owed time comes first). */
static double priority(const reng *e, size_t i, int t)
{
    const rjob *j = &e->jobs[i];
    double recv = j->recv[t];
    if (j->state == R_RUN && j->type == t) {
        int64_t from = j->seg_start > e->reset_at ? j->seg_start : e->reset_at;
        recv += (double)(e->now - from) / 1e9;
    }
    int64_t since = e->w->jobs[i].submit_ns > e->reset_at ? e->w->jobs[i].submit_ns : e->reset_at;
    double age = (double)(e->now - since) / 1e9;
    if (age < 1) {
        age = 1;
    }
    double share = recv / age;
    return j->x[t] / (share > 1e-9 ? share : 1e-9);
}

static int cmp_ent(const void *pa, const void *pb)
{
    const rent *a = pa, *b = pb;
    if (a->prio != b->prio) {
        return a->prio > b->prio ? -1 : 1;
    }
    if (a->left_gpu_s != b->left_gpu_s) {
        return a->left_gpu_s < b->left_gpu_s ? -1 : 1;
    }
    if (a->x != b->x) {
        return a->x > b->x ? -1 : 1;
    }
    if (a->incumbent != b->incumbent) {
        return a->incumbent ? -1 : 1;
    }
    if (a->rel != b->rel) {
        return a->rel > b->rel ? -1 : 1;
    }
    if (a->job != b->job) {
        return a->job < b->job ? -1 : 1;
    }
    return a->type - b->type;
}

static double best_rate(const reng *e, size_t i)
{
    double best = 0;
    for (int t = 0; t < e->ntypes; t++) {
        double r = rate_of(e, i, t);
        best = r > best ? r : best;
    }
    return best;
}

/* The drain guard (uses the runtime estimates): a job whose remaining time
 * alone on its best type is at least the time the cluster needs to drain
 * all remaining work (sum of GPUs x remaining best-type time / GPUs) would
 * set the makespan if it waited; it goes before every other entry, on its
 * fastest types first. */
static void drain_guard(reng *e, size_t ne)
{
    double tot = 0, capsum = 0;
    for (int t = 0; t < e->ntypes; t++) {
        capsum += e->cap[t];
    }
    for (size_t k = 0; k < e->nactive; k++) {
        size_t i = e->active[k];
        double best = best_rate(e, i);
        if (best > 0) {
            tot += e->w->jobs[i].gpu_count * (e->w->jobs[i].work - done_now(e, i)) / best;
        }
    }
    double drain = capsum > 0 ? tot / capsum : 0;
    for (size_t q = 0; q < ne; q++) {
        size_t i = e->ent[q].job;
        double best = best_rate(e, i);
        if (best > 0 && (e->w->jobs[i].work - done_now(e, i)) / best >= drain) {
            e->ent[q].prio = 1e30 * rate_of(e, i, e->ent[q].type) / best;
        }
    }
}

/* Does moving running job i from its type to t gain more work by `until`
 * than the switch costs? */
static bool move_pays(const reng *e, size_t i, int t, int64_t until)
{
    const rjob *j = &e->jobs[i];
    const cr__sim_job *wj = &e->w->jobs[i];
    double r_old = wj->rate[j->type], r_new = rate_of(e, i, t);
    if (r_new <= r_old) {
        return false;
    }
    double left = wj->work - done_now(e, i);
    double sw = (double)e->switch_ns / 1e9;
    double span = (double)(until - e->now) / 1e9;
    double fin_new = sw + left / r_new; /* time to finish after moving */
    if (span > fin_new) {
        span = fin_new;
    }
    /* work by `span` after moving vs. staying */
    double w_new = r_new * (span > sw ? span - sw : 0);
    double w_old = r_old * span;
    return w_new > w_old && (w_new - w_old) > 0;
}

/* Fill e->ent with the (job, type) pairs that can run, of every active job
 * or only the waiting ones, in the order GPUs are handed out.
 *
 * Default (with runtime estimates): the pairs the LP gives time (X > 0)
 * before the others, and within each, the fewest GPU-seconds still needed
 * on that type first (gang size x remaining work / rate there, plus the
 * switch if it is a resume or a move): shortest remaining area first, the
 * GPU count included because a gang takes that many GPUs from everyone
 * else for its time. Ordering by X alone (the fair order below with a
 * one-round window, where every share is zero at the boundary) is a static
 * priority by LP class with the leases breaking ties: jobs then run to
 * completion in an order unrelated to their size, which on heavy-tailed
 * work (Gavel's Philly durations) put long jobs ahead of short ones for
 * hours (docs/sim.md, the held-out suite).
 *
 * Fair order (--fair-order, or no estimates): priority X / share of time
 * held, then X. Both then: the lease (the job already holds the type), the
 * job's speed there relative to its best type, job index. */
static void ent_sift(rent *h, size_t n, size_t k)
{
    for (;;) {
        size_t l = 2 * k + 1, m = k;
        if (l < n && cmp_ent(&h[l], &h[m]) < 0) {
            m = l;
        }
        if (l + 1 < n && cmp_ent(&h[l + 1], &h[m]) < 0) {
            m = l + 1;
        }
        if (m == k) {
            return;
        }
        rent tmp = h[k];
        h[k] = h[m];
        h[m] = tmp;
        k = m;
    }
}

/* The next entry in the order of cmp_ent (a total order: the same sequence
 * a full sort gives), from the heap rank() built; false when none is left.
 * A round or a fill stops popping once no GPU is left, so it pays for the
 * entries it hands out, not a sort of all of them. */
static bool ent_pop(rent *h, size_t *ne, rent *out)
{
    if (*ne == 0) {
        return false;
    }
    *out = h[0];
    h[0] = h[--*ne];
    ent_sift(h, *ne, 0);
    return true;
}

static void wq_push(reng *e, const rent *en)
{
    int t = en->type;
    CR_GROW(e->wq[t], e->nwq[t], e->wq_cap[t]);
    rent *h = e->wq[t];
    size_t k = e->nwq[t]++;
    h[k] = *en;
    while (k > 0 && cmp_ent(&h[k], &h[(k - 1) / 2]) < 0) {
        rent tmp = h[k];
        h[k] = h[(k - 1) / 2];
        h[(k - 1) / 2] = tmp;
        k = (k - 1) / 2;
    }
}

static bool srpt_order(const reng *e)
{
    return e->o->estimates && !e->o->fair_order;
}

/* Job i's pairs into out (room ntypes at least), those that fit `room`
 * when given; returns how many. */
static size_t job_entries(const reng *e, size_t i, const double *room, rent *out)
{
    bool srpt = srpt_order(e);
    size_t ne = 0;
    const rjob *j = &e->jobs[i];
    {
        double best = best_rate(e, i);
        double left = e->w->jobs[i].work - done_now(e, i);
        for (int t = 0; t < e->ntypes; t++) {
            double r = rate_of(e, i, t);
            if (r <= 0 || (room && e->w->jobs[i].gpu_count > room[t])) {
                continue; /* (room: no GPU frees up while a fill starts jobs) */
            }
            bool inc = j->state == R_RUN && j->type == t;
            double fin = 0;
            if (srpt) { /* GPU-seconds it would still hold there, a resume's switch included */
                double sw = j->started && !inc ? (double)e->switch_ns / 1e9 : 0;
                fin = e->w->jobs[i].gpu_count * (left / r + sw);
            }
            out[ne++] = (rent){.prio = srpt ? (j->x[t] > 0) : priority(e, i, t),
                               .left_gpu_s = fin,
                               .x = j->x[t],
                               .rel = r / best,
                               .job = (uint32_t)i,
                               .type = t,
                               .incumbent = inc};
        }
    }
    return ne;
}

static void wq_rebuild(reng *e)
{
    memset(e->nwq, 0, sizeof e->nwq);
    if (!srpt_order(e)) {
        return;
    }
    rent tmp[CR_SIM_MAX_TYPES];
    for (size_t k = 0; k < e->nactive; k++) {
        size_t i = e->active[k];
        if (e->jobs[i].state != R_WAIT) {
            continue;
        }
        size_t n = job_entries(e, i, NULL, tmp);
        for (size_t q = 0; q < n; q++) {
            int t = tmp[q].type;
            CR_GROW(e->wq[t], e->nwq[t], e->wq_cap[t]);
            e->wq[t][e->nwq[t]++] = tmp[q];
        }
    }
    for (int t = 0; t < e->ntypes; t++) {
        for (size_t k = e->nwq[t] / 2; k-- > 0;) {
            ent_sift(e->wq[t], e->nwq[t], k);
        }
    }
}

static size_t rank(reng *e, bool waiting_only, const double *room)
{
    ensure_scratch(e, e->nactive);
    size_t ne = 0;
    for (size_t k = 0; k < e->nactive; k++) {
        size_t i = e->active[k];
        if (waiting_only && e->jobs[i].state != R_WAIT) {
            continue;
        }
        ne += job_entries(e, i, room, &e->ent[ne]);
    }
    if (e->o->estimates && !e->o->no_drain_guard) {
        drain_guard(e, ne);
    }
    for (size_t k = ne / 2; k-- > 0;) {
        ent_sift(e->ent, ne, k);
    }
    return ne;
}

/* A round boundary: reallocate, then hand out GPUs by priority. */
static int do_round(reng *e)
{
    if (e->lp_dirty) {
        int rc = solve(e);
        if (rc != 0) {
            return rc;
        }
    }
    if (e->reset_ns > 0 && e->now - e->reset_at >= e->reset_ns) {
        for (size_t k = 0; k < e->nactive; k++) {
            memset(e->jobs[e->active[k]].recv, 0, sizeof e->jobs[0].recv);
        }
        e->reset_at = e->now;
    }
    e->res->cycles++;
    size_t n = e->nactive;
    size_t ne = rank(e, false, NULL);
    /* next[] as the new type per active job, -1 = not this round */
    int *next = cr_malloc((n ? n : 1) * sizeof *next);
    double left[CR_SIM_MAX_TYPES];
    memcpy(left, e->cap, sizeof left);
    for (size_t k = 0; k < n; k++) {
        next[k] = -1;
        size_t i = e->active[k];
        const rjob *j = &e->jobs[i];
        if (j->state == R_RUN && !e->w->jobs[i].preemptible) {
            next[k] = j->type; /* never suspended */
            left[j->type] -= e->w->jobs[i].gpu_count;
        }
    }
    double smallest = min_gang(e);
    rent ent;
    while (ent_pop(e->ent, &ne, &ent)) {
        const rent *en = &ent;
        size_t i = en->job;
        size_t k = e->jobs[i].slot;
        int g = e->w->jobs[i].gpu_count;
        if (next[k] >= 0 || left[en->type] < g) {
            continue;
        }
        const rjob *j = &e->jobs[i];
        if (j->state == R_RUN && j->type != en->type &&
            rate_of(e, i, en->type) > e->w->jobs[i].rate[j->type] &&
            !move_pays(e, i, en->type, e->now + e->round_ns)) {
            continue; /* an upgrade not worth its switch: keep it where it is if it stays */
        }
        next[k] = en->type;
        left[en->type] -= g;
        bool room = false;
        for (int t = 0; t < e->ntypes; t++) {
            room |= left[t] >= smallest;
        }
        if (!room) {
            break; /* every later entry would find no GPU */
        }
    }
    for (size_t k = 0; k < n; k++) {
        size_t i = e->active[k];
        if (e->jobs[i].state == R_RUN && next[k] != e->jobs[i].type) {
            stop(e, i, false);
        }
    }
    for (size_t k = 0; k < n; k++) {
        size_t i = e->active[k];
        if (next[k] >= 0 && e->jobs[i].state == R_WAIT) {
            start(e, i, next[k]);
        }
    }
    free(next);
    wq_rebuild(e);
    return 0;
}

/* Between rounds: fill free GPUs from waiting jobs, then move running jobs
 * up to faster free GPUs where the move pays. */
static int fill(reng *e)
{
    if (e->next_round - e->now <= e->switch_ns) {
        return 0; /* the round is about to end: not worth a start */
    }
    /* Nothing can start or move unless some type has room for the smallest
     * job that could take it. Leaving then is exact: the LP's answer is a
     * function of the active set alone, so a solve put off to its next use
     * gives what solving now and again then would (most fills of a
     * saturated cluster end here: an arrival with every GPU busy). */
    double max_free = 0;
    for (int t = 0; t < e->ntypes; t++) {
        double f = e->cap[t] - e->busy[t];
        max_free = f > max_free ? f : max_free;
    }
    if (max_free < min_gang(e)) {
        return 0;
    }
    /* Mid-round the round's allocation stands, as in Gavel (it solves once
     * a round): an arrival of a class the last solve had takes that class's
     * allocation (assign_class_x); only a new class, which has none, makes
     * the LP run now. Finishes change nothing until the next round. */
    if (e->lp_missing) {
        int rc = solve(e);
        if (rc != 0) {
            return rc;
        }
        wq_rebuild(e);
    }
    bool srpt = srpt_order(e);
    double smallest = min_gang(e);
    bool changed = true;
    for (int guard = 0; changed && guard < 64; guard++) {
        changed = false;
        double room[CR_SIM_MAX_TYPES];
        for (int t = 0; t < e->ntypes; t++) {
            room[t] = e->cap[t] - e->busy[t];
        }
        rent ent;
        if (srpt) { /* the kept heaps, merged over the types with room */
            e->naside = 0;
            for (;;) {
                int tb = -1;
                for (int t = 0; t < e->ntypes; t++) {
                    if (room[t] >= smallest && e->nwq[t] > 0 &&
                        (tb < 0 || cmp_ent(&e->wq[t][0], &e->wq[tb][0]) < 0)) {
                        tb = t;
                    }
                }
                if (tb < 0 || !ent_pop(e->wq[tb], &e->nwq[tb], &ent)) {
                    break;
                }
                if (e->jobs[ent.job].state != R_WAIT) {
                    continue; /* started since, or finished: drop */
                }
                int g = e->w->jobs[ent.job].gpu_count;
                if (g <= room[ent.type]) {
                    start(e, ent.job, ent.type);
                    room[ent.type] -= g;
                    changed = true;
                } else {
                    CR_GROW(e->aside, e->naside, e->aside_cap);
                    e->aside[e->naside++] = ent;
                }
            }
            for (size_t q = 0; q < e->naside; q++) {
                if (e->jobs[e->aside[q].job].state == R_WAIT) {
                    wq_push(e, &e->aside[q]);
                }
            }
        } else {
            size_t ne = rank(e, true, room);
            while (ent_pop(e->ent, &ne, &ent)) {
                const rent *en = &ent;
                if (e->jobs[en->job].state == R_WAIT &&
                    e->w->jobs[en->job].gpu_count <= e->cap[en->type] - e->busy[en->type]) {
                    start(e, en->job, en->type);
                    changed = true;
                }
            }
        }
        if (e->o->no_migrate) {
            break;
        }
        /* migration: the biggest gain first, one per pass */
        for (int t = 0; t < e->ntypes; t++) {
            double free_t = e->cap[t] - e->busy[t];
            if (free_t < 1) {
                continue;
            }
            /* The running jobs faster on t, by gain: the first whose move
             * pays is the scan's pick (the largest gain). A move pays only
             * if span * (g - 1) > switch * g for the time to the round's
             * end, so once a gain fails that, every smaller one does. */
            size_t best = SIZE_MAX;
            double sw = (double)e->switch_ns / 1e9;
            double span = (double)(e->next_round - e->now) / 1e9;
            e->nmaside = 0;
            for (;;) {
                int ub = -1;
                for (int u = 0; u < e->ntypes; u++) {
                    if (u != t && e->nmh[u][t] > 0 &&
                        (ub < 0 || mc_before(&e->mh[u][t][0], &e->mh[ub][t][0]))) {
                        ub = u;
                    }
                }
                if (ub < 0) {
                    break;
                }
                mcand m = mh_pop(e->mh[ub][t], &e->nmh[ub][t]);
                const rjob *j = &e->jobs[m.job];
                if (j->state != R_RUN || j->epoch != m.epoch) {
                    continue; /* stopped since: stale */
                }
                if (span * (m.gain - 1) <= sw * m.gain) {
                    mh_push(&e->mh[ub][t], &e->nmh[ub][t], &e->mh_cap[ub][t], m);
                    break;
                }
                CR_GROW(e->maside, e->nmaside, e->maside_cap);
                e->maside[e->nmaside++] = m;
                if (e->w->jobs[m.job].gpu_count <= free_t &&
                    move_pays(e, m.job, t, e->next_round)) {
                    best = m.job;
                    e->nmaside--; /* consumed: the move pushes it anew */
                    break;
                }
            }
            for (size_t q = 0; q < e->nmaside; q++) {
                int u = e->jobs[e->maside[q].job].type;
                mh_push(&e->mh[u][t], &e->nmh[u][t], &e->mh_cap[u][t], e->maside[q]);
            }
            if (best != SIZE_MAX) {
                stop(e, best, false);
                start(e, best, t);
                changed = true;
            }
        }
    }
    return 0;
}

int cr__sim_run_rounds(const cr__sim_opts *o, const cr__sim_cluster *c, const cr__sim_workload *w,
                       cr__sim_result *res, char *err, size_t errlen)
{
    int64_t wall0 = cr_mono_ns();
    reng e;
    memset(&e, 0, sizeof e);
    memset(res, 0, sizeof *res);
    e.o = o;
    e.w = w;
    e.res = res;
    e.round_ns = o->round_ns > 0 ? o->round_ns : CR_SIM_ROUND_DEFAULT_NS;
    e.switch_ns = o->switch_ns >= 0 ? o->switch_ns : CR_SIM_SWITCH_DEFAULT_NS;
    snprintf(res->policy, sizeof res->policy, "rounds");
    cr__sim_heap_init(&e.heap);
    res->njobs = w->njobs;
    res->jobs = cr_calloc(w->njobs ? w->njobs : 1, sizeof *res->jobs);
    e.jobs = cr_calloc(w->njobs ? w->njobs : 1, sizeof *e.jobs);
    e.active = cr_calloc(w->njobs ? w->njobs : 1, sizeof *e.active);
    cr_sched *s = NULL;
    int rc = CR_ENOTSUP;
    if (o->mtbf_ns > 0) {
        snprintf(err, errlen, "rounds: node failures (--mtbf) are not simulated by this policy");
        goto out;
    }
    for (size_t i = 0; i < w->njobs; i++) {
        res->jobs[i].first_start_ns = -1;
        res->jobs[i].finish_ns = -1;
        res->jobs[i].type = -1;
        res->jobs[i].contention = 1.0;
        res->jobs[i].pred_err = -1;
    }
    cr_sched_config cfg;
    cr_sched_config_default(&cfg, CR_SCHED_FIFO);
    if ((rc = cr_sched_new(&cfg, &s)) != 0) {
        snprintf(err, errlen, "scheduler: %s", cr_strerror(rc));
        goto out;
    }
    if ((rc = cr__sim_cluster_build(c, s, err, errlen)) != 0) {
        goto out;
    }
    e.ntypes = cr_sched_gpu_type_count(s);
    if (e.ntypes > CR_SIM_MAX_TYPES) {
        snprintf(err, errlen, "cluster: more than %d GPU types", CR_SIM_MAX_TYPES);
        rc = CR_ERANGE;
        goto out;
    }
    res->ntypes = e.ntypes;
    for (int t = 0; t < e.ntypes; t++) {
        uint32_t total = 0, free_gpus = 0;
        cr_sched_capacity(s, t, &total, &free_gpus);
        e.cap[t] = total;
        res->type_gpus[t] = total;
        snprintf(res->types[t], CR_SIM_NAME_MAX, "%s", cr_sched_gpu_type_name(s, t));
    }
    rc = 0;
    if (w->njobs == 0) {
        goto out;
    }
    res->t0_ns = w->jobs[0].submit_ns;
    e.now = e.last = res->t0_ns;
    e.next_round = res->t0_ns;
    e.reset_at = res->t0_ns;
    e.reset_ns = o->share_window_ns > 0 ? o->share_window_ns : e.round_ns;
    cr__sim_heap_push(&e.heap, w->jobs[0].submit_ns, CR_SIM_EV_ARRIVE, 0, 0);
    cr__sim_heap_push(&e.heap, e.next_round, CR_SIM_EV_TICK, 0, 0);
    cr__sim_ev ev;
    bool round_due = false, fill_due = false;
    while (e.done < w->njobs && cr__sim_heap_pop(&e.heap, &ev)) {
        e.now = ev.t_ns;
        advance(&e);
        res->events++;
        if (ev.kind == CR_SIM_EV_ARRIVE) {
            size_t i = (size_t)ev.a;
            const cr__sim_job *wj = &w->jobs[i];
            double best = 0;
            for (int t = 0; t < e.ntypes; t++) {
                double r = rate_of(&e, i, t);
                best = r > best ? r : best;
            }
            res->jobs[i].alone_s = best > 0 ? wj->work / best : 0;
            e.jobs[i].state = R_WAIT;
            e.jobs[i].demand0 = e.demand_int;
            e.jobs[i].cap0 = e.cap_int;
            e.jobs[i].slot = e.nactive;
            e.active[e.nactive++] = i;
            e.gang_count[gang_bucket(wj->gpu_count)]++;
            e.demand += (uint64_t)wj->gpu_count;
            e.lp_dirty = true;
            assign_class_x(&e, i);
            if (!e.lp_missing && srpt_order(&e)) {
                rent tmp[CR_SIM_MAX_TYPES];
                size_t n = job_entries(&e, i, NULL, tmp);
                for (size_t q = 0; q < n; q++) {
                    wq_push(&e, &tmp[q]);
                }
            }
            fill_due = true;
            if (i + 1 < w->njobs) {
                cr__sim_heap_push(&e.heap, w->jobs[i + 1].submit_ns, CR_SIM_EV_ARRIVE,
                                  (int64_t)i + 1, 0);
            }
            e.next_arrival = i + 1;
        } else if (ev.kind == CR_SIM_EV_FINISH) {
            size_t i = (size_t)ev.a;
            if (e.jobs[i].state == R_RUN && e.jobs[i].epoch == ev.b) {
                stop(&e, i, true);
                fill_due = true;
            }
        } else if (ev.kind == CR_SIM_EV_TICK) {
            round_due = true;
            e.next_round = e.now + e.round_ns;
            cr__sim_heap_push(&e.heap, e.next_round, CR_SIM_EV_TICK, 0, 0);
        }
        const cr__sim_ev *nx = cr__sim_heap_peek(&e.heap);
        if (nx && nx->t_ns == e.now) {
            continue; /* apply every event of this instant first */
        }
        if (round_due) {
            if ((rc = do_round(&e)) != 0) {
                snprintf(err, errlen, "rounds: the allocation LP failed: %s", cr_strerror(rc));
                goto out;
            }
            round_due = fill_due = false;
        } else if (fill_due) {
            if ((rc = fill(&e)) != 0) {
                snprintf(err, errlen, "rounds: the allocation LP failed: %s", cr_strerror(rc));
                goto out;
            }
            fill_due = false;
        }
        sample(&e);
        if (e.nactive == 0 && e.next_arrival >= w->njobs) {
            break;
        }
        /* Nothing runs and nothing can: the rest is stuck. */
        if (e.running == 0 && e.next_arrival >= w->njobs && e.nactive > 0 && !round_due) {
            bool can = false;
            for (size_t k = 0; k < e.nactive && !can; k++) {
                for (int t = 0; t < e.ntypes; t++) {
                    can |= rate_of(&e, e.active[k], t) > 0;
                }
            }
            if (!can) {
                break;
            }
        }
    }
    res->t_end_ns = e.now;
    for (size_t i = 0; i < w->njobs; i++) {
        if (e.jobs[i].state == R_DONE) {
            continue;
        }
        if (res->nstuck < 3) {
            snprintf(res->stuck[res->nstuck], sizeof res->stuck[0],
                     "job %s: no GPU type in the cluster can run it (%d GPUs)", w->jobs[i].name,
                     w->jobs[i].gpu_count);
        }
        res->nstuck++;
    }
out:
    free(e.jobs);
    free(e.active);
    free(e.lp_rate);
    free(e.lp_x);
    free(e.lp_scale);
    free(e.lp_mult);
    free(e.ent);
    free(e.cls_key);
    for (int t = 0; t < CR_SIM_MAX_TYPES; t++) {
        free(e.wq[t]);
    }
    free(e.aside);
    free(e.maside);
    for (int u = 0; u < CR_SIM_MAX_TYPES; u++) {
        for (int t = 0; t < CR_SIM_MAX_TYPES; t++) {
            free(e.mh[u][t]);
        }
    }
    free(e.cls_x);
    cr__sim_heap_fini(&e.heap);
    cr_sched_free(s);
    res->wall_s = (double)(cr_mono_ns() - wall0) / 1e9;
    return rc;
}
