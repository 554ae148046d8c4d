/*
 * sim_engine.c - the event loop: replays a workload through the scheduler
 * core in virtual time.
 *
 * Events (arrivals, finishes, node failures and repairs, cycle ticks) pop
 * from the heap in (time, push order). All events at one instant are
 * applied, then one scheduling cycle runs (or, with an interval, at most one
 * per interval), and its decisions are applied: a START schedules the job's
 * finish from its remaining work and its rate on the chosen type; a PREEMPT
 * keeps the work done up to the job's last checkpoint (the scheduler says
 * how much wall time is lost). A finish event carries the run's epoch, so a
 * finish scheduled for a run that was preempted is recognised as stale.
 *
 * Node failures (--mtbf) draw exponential times per node from their own
 * RNG stream, so the scheduler's stream is the same with or without them.
 * A failed node's jobs are requeued by the scheduler; we keep their work up
 * to the last completed checkpoint.
 *
 * Metrics are integrals over time of step functions (busy, healthy, free,
 * stranded and partly-used-node GPUs, demand), updated before each change,
 * so they cost O(1) per event.
 */
#include "sim_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_gpufacts.h"
#include "cr_learn.h"
#include "cr_metric.h"
#include "cr_time.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

enum { J_FUTURE = 0, J_PENDING, J_RUNNING, J_DONE };
/* A slot is a whole GPU, a part of a shared GPU, or a MIG instance. A shared
 * GPU with any fractional task counts busy (as the scheduler sees it: not
 * free for whole jobs); GPUs in MIG mode are outside the whole-GPU books. */
enum { SLOT_WHOLE = 0, SLOT_FRAC, SLOT_MIG };

typedef struct jrt {
    uint8_t state;     /* J_* */
    int type;          /* running: its type */
    int64_t seg_start; /* running: start of the current run */
    double done;       /* work done before the current run */
    int64_t epoch;     /* bumped at every start and stop */
    uint32_t nslots;   /* running: slots held */
    uint32_t *nodes;   /* running: node of each slot (owned) */
    uint16_t *gpus;    /* running: GPU of each slot (owned) */
    uint8_t *kinds;    /* running: SLOT_WHOLE, SLOT_FRAC or SLOT_MIG per slot (owned) */
    double share;      /* running: GPUs it holds (fractions and slices in part) */
    double demand0;    /* demand integral at submit */
    double cap0;       /* capacity integral at submit */
    double belief[CR_SIM_MAX_TYPES]; /* rates the scheduler was told at arrival */
} jrt;

typedef struct node_rt {
    uint32_t gpus;                       /* healthy whole GPUs (when up) */
    uint32_t used;                       /* GPUs held by running jobs */
    bool up;                             /* not failed */
    bool cloud;                          /* a node of the cloud pool */
    bool booting;                        /* cloud: booting (bought, not up yet) */
    int64_t on_since;                    /* cloud: bought since (boot start); 0 off */
    int64_t idle_since;                  /* cloud, up: no job since; 0 busy */
    uint16_t per_type[CR_SIM_MAX_TYPES]; /* healthy GPUs by type */
    uint16_t mig[CR_SIM_MAX_TYPES];      /* healthy GPUs in MIG mode, by type (never used) */
} node_rt;

typedef struct engine {
    const cr__sim_opts *o;
    const cr__sim_workload *w;
    cr__sim_result *res;
    cr_sched *s;
    cr_rng rng;      /* scheduler tie-breaks */
    cr_rng fail_rng; /* node failures */
    cr__sim_heap heap;
    jrt *jobs;
    node_rt *nodes;
    uint32_t nnodes;
    int ntypes;
    int *tenant_map; /* workload tenant -> scheduler tenant (owned) */
    uint32_t busy[CR_SIM_MAX_TYPES];
    uint32_t healthy[CR_SIM_MAX_TYPES]; /* whole GPUs on up nodes, MIG mode excluded */
    uint32_t mig[CR_SIM_MAX_TYPES];     /* GPUs in MIG mode on up nodes (slices, apart) */
    uint16_t *frac;                     /* fractional tasks per GPU: node * MAX_NODE_GPUS + gpu */
    uint64_t partial_free;              /* free GPUs on up nodes that are partly used */
    uint64_t demand;                    /* GPUs wanted by pending + running jobs */
    size_t pending, running, done, next_arrival;
    uint32_t nodes_down;
    int64_t now, last;
    double demand_int, cap_int;
    bool cycle_due;   /* something changed since the last cycle */
    bool tick_queued; /* a TICK event is in the heap */
    int64_t last_cycle;
    cr_obs *obs;          /* --learn: what finished jobs reported (owned) */
    uint32_t cloud_first; /* the cloud pool's nodes: cloud_first..nnodes-1 */
    int cloud_type;       /* their GPU type, -1 none */
    size_t first_open;    /* no job before it is pending (the pool's scan starts here) */
    int64_t pool_at;      /* a POOL event is queued for then; 0 none */
    char types[CR_SIM_MAX_TYPES][CR_SIM_NAME_MAX]; /* the cluster's type names (--learn) */
} engine;

double cr__sim_default_power_w(const char *type)
{
    /* Board power of the family (cr_gpufacts.h), else a mid-range GPU's. */
    double w = cr_gpufacts_tdp_w(type);
    return w > 0 ? w : 300;
}

/* ----------------------------------------------------------------- cluster */

int cr__sim_cluster_parse_gpus(cr__sim_cluster *c, const char *spec, char *err, size_t errlen)
{
    char *copy = cr_strdup(spec);
    int rc = CR_EINVAL;
    c->ntypes = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(item, ':');
        if (!colon || colon == item || strlen(item) >= CR_SIM_NAME_MAX + 8) {
            snprintf(err, errlen, "--gpus: '%.40s': expected TYPE:COUNT", item);
            goto out;
        }
        *colon = '\0';
        char *end;
        long n = strtol(colon + 1, &end, 10);
        if (*end || end == colon + 1 || n < 1 || n > 10000000) {
            snprintf(err, errlen, "--gpus: '%s': count must be 1..10000000", item);
            goto out;
        }
        if (c->ntypes == CR_SIM_MAX_TYPES || strlen(item) >= CR_SIM_NAME_MAX) {
            snprintf(err, errlen, "--gpus: too many types or name too long");
            goto out;
        }
        for (int i = 0; i < c->ntypes; i++) {
            if (strcasecmp(c->names[i], item) == 0) {
                snprintf(err, errlen, "--gpus: type '%s' given twice", item);
                goto out;
            }
        }
        snprintf(c->names[c->ntypes], CR_SIM_NAME_MAX, "%s", item);
        c->counts[c->ntypes++] = (int)n;
    }
    if (c->ntypes == 0) {
        snprintf(err, errlen, "--gpus: empty");
        goto out;
    }
    rc = 0;
out:
    free(copy);
    return rc;
}

static int build_static(const cr__sim_cluster *c, cr_sched *s, char *err, size_t errlen)
{
    if (c->file_text) {
        char sub[300];
        sub[0] = '\0';
        int rc = cr_sched_load_cluster(s, c->file_text, c->file_len, sub, sizeof sub);
        if (rc != 0) {
            snprintf(err, errlen, "%s: %s", c->file_path, sub[0] ? sub : cr_strerror(rc));
            return rc;
        }
        if (cr_sched_node_count(s) == 0) {
            snprintf(err, errlen, "%s: no nodes", c->file_path);
            return CR_EINVAL;
        }
        return 0;
    }
    int gpn = c->gpus_per_node > 0 ? c->gpus_per_node : 8;
    int npr = c->nodes_per_rack > 0 ? c->nodes_per_rack : 32;
    cr_sched_gpu_spec gpus[CR_SCHED_MAX_NODE_GPUS];
    for (int t = 0; t < c->ntypes; t++) {
        int type;
        int rc = cr_sched_gpu_type(s, c->names[t], &type);
        if (rc != 0) {
            snprintf(err, errlen, "--gpus: type '%s': %s", c->names[t], cr_strerror(rc));
            return rc;
        }
        int left = c->counts[t];
        for (int n = 0; left > 0; n++) {
            int k = left < gpn ? left : gpn;
            left -= k;
            for (int g = 0; g < k; g++) {
                memset(&gpus[g], 0, sizeof gpus[g]);
                gpus[g].type = type;
            }
            char name[CR_SIM_NAME_MAX + 16], rack[CR_SIM_NAME_MAX + 16];
            snprintf(name, sizeof name, "%s-%d", c->names[t], n);
            snprintf(rack, sizeof rack, "%s-r%d", c->names[t], n / npr);
            cr_sched_node_spec ns = {.name = name,
                                     .rack = rack,
                                     .spine = NULL,
                                     .state = CR_NODE_UP,
                                     .gpu_count = (size_t)k,
                                     .gpus = gpus};
            uint32_t id;
            rc = cr_sched_node_add(s, &ns, &id);
            if (rc != 0) {
                snprintf(err, errlen, "--gpus: node %s: %s", name, cr_strerror(rc));
                return rc;
            }
        }
    }
    return 0;
}

/* The cloud pool's nodes after the static ones: off (lost) until the
 * engine boots them, or on with cloud_always. */
static int build_cloud(const cr__sim_cluster *c, cr_sched *s, char *err, size_t errlen)
{
    int type;
    int rc = cr_sched_gpu_type(s, c->cloud_name, &type);
    if (rc != 0) {
        snprintf(err, errlen, "--cloud: type '%s': %s", c->cloud_name, cr_strerror(rc));
        return rc;
    }
    cr_sched_gpu_spec gpus[CR_SCHED_MAX_NODE_GPUS];
    for (int g = 0; g < c->cloud_gpn; g++) {
        memset(&gpus[g], 0, sizeof gpus[g]);
        gpus[g].type = type;
    }
    int left = c->cloud_always && c->cloud_gpus > 0 ? c->cloud_gpus : c->cloud_nodes * c->cloud_gpn;
    for (int n = 0; n < c->cloud_nodes && left > 0; n++) {
        int k = left < c->cloud_gpn ? left : c->cloud_gpn;
        left -= k;
        char name[32];
        snprintf(name, sizeof name, "cloud-%d", n);
        cr_sched_node_spec ns = {.name = name,
                                 .rack = "cloud",
                                 .spine = NULL,
                                 .state = c->cloud_always ? CR_NODE_UP : CR_NODE_LOST,
                                 .gpu_count = (size_t)k,
                                 .gpus = gpus};
        uint32_t id;
        if ((rc = cr_sched_node_add(s, &ns, &id)) != 0) {
            snprintf(err, errlen, "--cloud: node %s: %s", name, cr_strerror(rc));
            return rc;
        }
    }
    return 0;
}

int cr__sim_cluster_build(const cr__sim_cluster *c, cr_sched *s, char *err, size_t errlen)
{
    int rc = build_static(c, s, err, errlen);
    if (rc == 0 && c->cloud_nodes > 0) {
        rc = build_cloud(c, s, err, errlen);
    }
    return rc;
}

int cr__sim_cluster_types(const cr__sim_cluster *c, char (*types)[CR_SIM_NAME_MAX], int *ntypes,
                          char *err, size_t errlen)
{
    cr_sched_config cfg;
    cr_sched_config_default(&cfg, CR_SCHED_FIFO);
    cr_sched *s = NULL;
    int rc = cr_sched_new(&cfg, &s);
    if (rc != 0) {
        snprintf(err, errlen, "scheduler: %s", cr_strerror(rc));
        return rc;
    }
    rc = cr__sim_cluster_build(c, s, err, errlen);
    if (rc == 0) {
        int n = cr_sched_gpu_type_count(s);
        if (n > CR_SIM_MAX_TYPES) {
            snprintf(err, errlen, "cluster: more than %d GPU types", CR_SIM_MAX_TYPES);
            rc = CR_ERANGE;
        } else {
            for (int t = 0; t < n; t++) {
                snprintf(types[t], CR_SIM_NAME_MAX, "%s", cr_sched_gpu_type_name(s, t));
            }
            *ntypes = n;
        }
    }
    cr_sched_free(s);
    return rc;
}

/* ------------------------------------------------------------------ engine */

static uint32_t node_partial(const node_rt *n)
{
    return (n->up && n->used > 0 && n->used < n->gpus) ? n->gpus - n->used : 0;
}

/* Advance the integrals from e->last to e->now. */
static void advance(engine *e)
{
    int64_t dt = e->now - e->last;
    if (dt <= 0) {
        return;
    }
    double d = (double)dt;
    cr__sim_result *r = e->res;
    uint64_t busy = 0, healthy = 0;
    for (int t = 0; t < e->ntypes; t++) {
        r->busy_gpu_ns[t] += e->busy[t] * d;
        r->healthy_gpu_ns[t] += e->healthy[t] * d;
        double p = e->o->power_w[t];
        uint32_t idle = e->healthy[t] > e->busy[t] ? e->healthy[t] - e->busy[t] : 0;
        r->energy_j[t] += (e->busy[t] * p + idle * p * e->o->idle_frac) * d / 1e9;
        busy += e->busy[t];
        healthy += e->healthy[t];
    }
    uint64_t free_gpus = healthy > busy ? healthy - busy : 0;
    r->free_gpu_ns += (double)free_gpus * d;
    r->total_gpu_ns += (double)healthy * d;
    if (e->pending > 0) {
        r->stranded_gpu_ns += (double)free_gpus * d;
    }
    r->partial_free_gpu_ns += (double)e->partial_free * d;
    e->demand_int += (double)e->demand * d;
    e->cap_int += (double)healthy * d;
    e->last = e->now;
}

static void sample(engine *e)
{
    cr__sim_result *r = e->res;
    cr__sim_sample s = {
        .t_ns = e->now, .queue = (uint32_t)e->pending, .running = (uint32_t)e->running};
    for (int t = 0; t < e->ntypes; t++) {
        s.busy += e->busy[t];
        s.healthy += e->healthy[t];
    }
    if (r->nsamples) {
        cr__sim_sample *p = &r->samples[r->nsamples - 1];
        if (p->busy == s.busy && p->healthy == s.healthy && p->queue == s.queue &&
            p->running == s.running) {
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

static void node_use(engine *e, uint32_t node, int delta)
{
    if (node >= e->nnodes) {
        return;
    }
    node_rt *n = &e->nodes[node];
    e->partial_free -= node_partial(n);
    n->used = (uint32_t)((int64_t)n->used + delta);
    e->partial_free += node_partial(n);
}

/* A finished training job reports what it measured as a real one does: a
 * corral-metric line (cr_metric.h), read back through the same parser;
 * its tokens/s over the model's is one observation of the class's bias on
 * this type. Run-to-run noise: +- metric_noise, from the seed and job. */
static void report_metric(engine *e, size_t i, int type)
{
    const cr__sim_job *wj = &e->w->jobs[i];
    uint64_t x = (e->o->seed ^ ((uint64_t)i * 0x9e3779b97f4a7c15ULL)) + 0x632be59bd9b4e019ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    double u = (double)(x >> 11) / 9007199254740992.0;
    double noise = 1 + e->o->metric_noise * (2 * u - 1);
    double tok_s = wj->model_tok_s[type] * wj->rate[type] / wj->model_rate[type] * noise;
    char line[128], err[96];
    int n = snprintf(line, sizeof line, CR_METRIC_PREFIX " tokens_per_s=%.6g step_time_s=%.6g",
                     tok_s, 1.0);
    cr_metric m = {0};
    if (n <= 0 || cr_metric_parse_line(line, (size_t)n, &m, err, sizeof err) != 0 ||
        !(m.tokens_per_s > 0)) {
        return;
    }
    cr_obs_add(e->obs, e->w->tenants[wj->tenant], wj->sig, e->types[type], wj->gpu_count,
               log(m.tokens_per_s / wj->model_tok_s[type]));
}

/* Release the bookkeeping of a running job (its GPUs are already free in
 * the scheduler or about to be). kept_ns: wall time of this run whose work
 * is kept. */
static void stop_job(engine *e, size_t i, int64_t kept_ns, bool finished)
{
    jrt *j = &e->jobs[i];
    const cr__sim_job *wj = &e->w->jobs[i];
    cr__sim_jobres *jr = &e->res->jobs[i];
    int64_t ran = e->now - j->seg_start;
    double rate = wj->rate[j->type];
    if (!finished) {
        int64_t useful = kept_ns - e->o->restart_ns;
        if (useful > 0) {
            j->done += rate * (double)useful / 1e9;
        }
        if (j->done > wj->work) {
            j->done = wj->work;
        }
        jr->lost_gpu_s += (double)(ran - (kept_ns > 0 ? kept_ns : 0)) / 1e9 * j->share;
    }
    jr->gpu_s += (double)ran / 1e9 * j->share;
    for (uint32_t k = 0; k < j->nslots; k++) {
        if (j->kinds[k] == SLOT_MIG ||
            (j->kinds[k] == SLOT_FRAC &&
             --e->frac[(size_t)j->nodes[k] * CR_SCHED_MAX_NODE_GPUS + j->gpus[k]] > 0)) {
            continue; /* a slice, or a shared GPU still in use */
        }
        e->busy[j->type]--;
        node_use(e, j->nodes[k], -1);
    }
    CR_FREE(j->nodes);
    CR_FREE(j->gpus);
    CR_FREE(j->kinds);
    j->nslots = 0;
    j->epoch++;
    e->running--;
    if (finished && e->obs && wj->sig[0] && wj->model_tok_s[j->type] > 0) {
        report_metric(e, i, j->type);
    }
    if (finished) {
        j->state = J_DONE;
        e->done++;
        e->demand -= (uint64_t)wj->gpu_count;
        jr->finish_ns = e->now;
        double dc = e->cap_int - j->cap0;
        double dd = e->demand_int - j->demand0;
        jr->contention = (dc > 0 && dd > dc) ? dd / dc : 1.0;
    } else {
        j->state = J_PENDING;
        e->pending++;
    }
    e->cycle_due = true;
}

static void start_job(engine *e, const cr_sched_decision *d)
{
    size_t i = (size_t)(d->job - 1);
    if (i >= e->w->njobs || d->gpu_type < 0 || d->gpu_type >= e->ntypes) {
        return;
    }
    jrt *j = &e->jobs[i];
    const cr__sim_job *wj = &e->w->jobs[i];
    cr__sim_jobres *jr = &e->res->jobs[i];
    j->state = J_RUNNING;
    j->type = d->gpu_type;
    j->seg_start = e->now;
    j->epoch++;
    j->nslots = (uint32_t)d->slot_count;
    j->nodes = cr_calloc(d->slot_count ? d->slot_count : 1, sizeof *j->nodes);
    j->gpus = cr_calloc(d->slot_count ? d->slot_count : 1, sizeof *j->gpus);
    j->kinds = cr_calloc(d->slot_count ? d->slot_count : 1, sizeof *j->kinds);
    j->share = 0;
    for (size_t k = 0; k < d->slot_count; k++) {
        const cr_sched_slot *sl = &d->slots[k];
        j->nodes[k] = sl->node;
        j->gpus[k] = sl->gpu;
        j->kinds[k] = sl->milli ? SLOT_FRAC : sl->mig_start >= 0 ? SLOT_MIG : SLOT_WHOLE;
        /* GPU-seconds: a fraction by its thousandths, a slice by its compute
         * slices over 7 (the A100/H100 geometry) */
        j->share += sl->milli ? sl->milli / 1000.0 : sl->mig_start >= 0 ? sl->mig_compute / 7.0 : 1;
        if (j->kinds[k] == SLOT_MIG ||
            (j->kinds[k] == SLOT_FRAC &&
             e->frac[(size_t)sl->node * CR_SCHED_MAX_NODE_GPUS + sl->gpu]++ > 0)) {
            continue;
        }
        e->busy[j->type]++;
        node_use(e, sl->node, +1);
    }
    if (d->slot_count && d->slots[0].milli) {
        e->res->frac_starts++;
    } else if (d->slot_count && d->slots[0].mig_start >= 0) {
        e->res->mig_starts++;
    }
    e->pending--;
    e->running++;
    e->res->starts[j->type]++;
    if (jr->first_start_ns < 0) {
        jr->first_start_ns = e->now;
        if (wj->sig[0] && wj->rate[j->type] > 0) {
            jr->pred_err = fabs(j->belief[j->type] - wj->rate[j->type]) / wj->rate[j->type];
        }
    }
    jr->type = j->type;
    double rate = wj->rate[j->type];
    double left = wj->work - j->done;
    int64_t dur = e->o->restart_ns;
    if (d->mig_repartitioned) {
        /* its GPU's MIG layout is being rewritten first (--mig-reconfig) */
        dur += e->o->mig_reconfig_ns;
        e->res->mig_reconfigs++;
        e->res->mig_reconfig_s += (double)e->o->mig_reconfig_ns / 1e9;
    }
    if (rate > 0) {
        double ns = ceil(left / rate * 1e9);
        dur += ns > 1e18 ? (int64_t)1e18 : (int64_t)ns;
    } else {
        dur = INT64_MAX / 4; /* the scheduler chose a type with no rate */
    }
    if (dur < 1) {
        dur = 1;
    }
    cr__sim_heap_push(&e->heap, e->now + dur, CR_SIM_EV_FINISH, (int64_t)i, j->epoch);
}

static void check(engine *e, const char *where)
{
    if (!e->o->check) {
        return;
    }
    char msg[200];
    msg[0] = '\0';
    int rc = cr_sched_check(e->s, msg, sizeof msg);
    if (rc == 0) {
        /* Cross-check the scheduler's capacity against our own books. */
        for (int t = 0; t < e->ntypes && rc == 0; t++) {
            uint32_t total = 0, free_gpus = 0;
            cr_sched_capacity(e->s, t, &total, &free_gpus);
            if (total != e->healthy[t] + e->mig[t] || total - free_gpus != e->busy[t] + e->mig[t]) {
                snprintf(msg, sizeof msg,
                         "type %d: scheduler has %u healthy/%u busy, simulator %u/%u (+%u MIG)", t,
                         total, total - free_gpus, e->healthy[t], e->busy[t], e->mig[t]);
                rc = CR_ECONFLICT;
            }
        }
    }
    if (rc != 0) {
        if (e->res->check_errors++ == 0) {
            char buf[32];
            snprintf(e->res->check_msg, sizeof e->res->check_msg, "t=%s after %s: %s",
                     cr_duration_fmt(e->now - e->res->t0_ns, buf, sizeof buf), where, msg);
        }
    }
}

static int add_job(engine *e, size_t i)
{
    const cr__sim_job *wj = &e->w->jobs[i];
    jrt *jb = &e->jobs[i];
    /* What the scheduler is told: the model's rates, scaled by what this
     * tenant's finished jobs of the class reported (--learn). The job
     * then runs at its true rate. */
    double best = 0, slow = 0;
    for (int t = 0; t < e->ntypes; t++) {
        double b = wj->sig[0] ? wj->model_rate[t] : wj->rate[t]; /* (only these may differ) */
        if (e->obs && wj->sig[0] && b > 0) {
            double r[CR_OBS_KEEP];
            int n = cr_obs_get(e->obs, e->w->tenants[wj->tenant], wj->sig, e->types[t],
                               wj->gpu_count, r);
            if (n > 0) {
                cr_learned l;
                cr_learn_combine(r, n, &l);
                b *= l.factor;
            }
        }
        if (wj->rate[t] <= 0) {
            b = 0; /* the truth decides where it can run at all */
        }
        jb->belief[t] = b;
        best = b > best ? b : best;
        slow = b > 0 && (slow == 0 || b < slow) ? b : slow;
    }
    double tput[CR_SIM_MAX_TYPES];
    for (int t = 0; t < e->ntypes; t++) {
        tput[t] = best > 0 ? jb->belief[t] / best : 0;
    }
    int64_t limit = 0;
    if (e->o->estimates) {
        if (slow > 0) {
            double ns = ceil(wj->work / slow * 1e9) + (double)e->o->restart_ns;
            limit = ns > 1e18 ? (int64_t)1e18 : (int64_t)ns;
        }
    }
    cr_sched_job_spec spec = {
        .id = (uint64_t)i + 1,
        .tenant = e->tenant_map[wj->tenant],
        .priority = wj->priority,
        .kind = CR_JOB_OTHER,
        .gpu_count = (uint32_t)wj->gpu_count,
        .gpu_type = wj->type_req >= 0 ? wj->type_req : CR_SCHED_TYPE_ANY,
        .tput = tput,
        .tput_count = (size_t)e->ntypes,
        .time_limit_ns = limit,
        .preemptible = wj->preemptible,
        .checkpoint_interval_ns = wj->ckpt_ns,
        .submit_ns = wj->submit_ns,
        .gpu_milli = wj->gpu_milli,
        .mig_profile = wj->mig[0] ? wj->mig : NULL,
    };
    int rc = cr_sched_job_add(e->s, &spec, e->now);
    if (rc != 0) {
        return rc;
    }
    jrt *j = &e->jobs[i];
    j->state = J_PENDING;
    j->demand0 = e->demand_int;
    j->cap0 = e->cap_int;
    e->pending++;
    e->demand += (uint64_t)wj->gpu_count;
    e->res->jobs[i].alone_s = best > 0 ? wj->work / best : 0;
    e->cycle_due = true;
    return 0;
}

static void node_fail(engine *e, uint32_t node)
{
    node_rt *n = &e->nodes[node];
    if (!n->up) {
        return;
    }
    uint64_t *req = NULL;
    size_t nreq = 0;
    int rc =
        cr_sched_node_set_state(e->s, node, CR_NODE_LOST, "simulated failure", e->now, &req, &nreq);
    if (rc != 0) {
        free(req);
        return;
    }
    e->res->node_failures++;
    for (size_t k = 0; k < nreq; k++) {
        size_t i = (size_t)(req[k] - 1);
        if (i >= e->w->njobs || e->jobs[i].state != J_RUNNING) {
            continue;
        }
        int64_t ran = e->now - e->jobs[i].seg_start;
        int64_t ck = e->w->jobs[i].ckpt_ns;
        int64_t kept = ck > 0 ? (ran / ck) * ck : 0;
        e->res->jobs[i].failures++;
        stop_job(e, i, kept, false);
    }
    free(req);
    e->partial_free -= node_partial(n);
    n->up = false;
    for (int t = 0; t < e->ntypes; t++) {
        e->healthy[t] -= n->per_type[t];
        e->mig[t] -= n->mig[t];
    }
    e->nodes_down++;
    e->cycle_due = true;
    cr__sim_heap_push(&e->heap, e->now + e->o->mttr_ns, CR_SIM_EV_REPAIR, node, 0);
}

static void node_repair(engine *e, uint32_t node)
{
    node_rt *n = &e->nodes[node];
    if (n->up) {
        return;
    }
    if (cr_sched_node_set_state(e->s, node, CR_NODE_UP, "repaired", e->now, NULL, NULL) != 0) {
        return;
    }
    n->up = true;
    n->used = 0;
    for (int t = 0; t < e->ntypes; t++) {
        e->healthy[t] += n->per_type[t];
        e->mig[t] += n->mig[t];
    }
    e->nodes_down--;
    e->cycle_due = true;
    if (e->done < e->w->njobs) {
        double mean_s = (double)e->o->mtbf_ns / 1e9;
        int64_t dt = (int64_t)(cr_rng_exp(&e->fail_rng, mean_s) * 1e9) + 1;
        cr__sim_heap_push(&e->heap, e->now + dt, CR_SIM_EV_FAIL, node, 0);
    }
}

/* ------------------------------------------------------------ cloud pool */

/* A cloud node's boot is over: it is up, empty. */
static void cloud_boot_done(engine *e, uint32_t node)
{
    node_rt *n = &e->nodes[node];
    if (!n->booting ||
        cr_sched_node_set_state(e->s, node, CR_NODE_UP, "booted", e->now, NULL, NULL) != 0) {
        return;
    }
    n->booting = false;
    n->up = true;
    n->used = 0;
    n->idle_since = 0;
    for (int t = 0; t < e->ntypes; t++) {
        e->healthy[t] += n->per_type[t];
    }
    e->cycle_due = true;
}

/* An idle cloud node is given back: the time bought is counted. */
static void cloud_off(engine *e, uint32_t node)
{
    node_rt *n = &e->nodes[node];
    uint64_t *req = NULL;
    size_t nreq = 0;
    if (cr_sched_node_set_state(e->s, node, CR_NODE_LOST, "scaled down", e->now, &req, &nreq) !=
        0) {
        free(req);
        return;
    }
    free(req); /* (an idle node: no job to requeue) */
    e->partial_free -= node_partial(n);
    n->up = false;
    for (int t = 0; t < e->ntypes; t++) {
        e->healthy[t] -= n->per_type[t];
    }
    e->res->cloud_gpu_ns += (double)(e->now - n->on_since) * n->gpus;
    n->on_since = n->idle_since = 0;
    e->cycle_due = true;
}

static void pool_wake(engine *e, int64_t t)
{
    if (e->pool_at == 0 || t < e->pool_at || e->pool_at <= e->now) {
        cr__sim_heap_push(&e->heap, t, CR_SIM_EV_POOL, 0, 0);
        e->pool_at = t;
    }
}

/* The controller's scaling, in virtual time (docs/pools.md "Scaling"):
 * the GPUs wanted by the jobs pending cloud_pending_ns that the cloud
 * type can run, less those booting and free on cloud nodes, are booted as
 * whole nodes; a cloud node idle cloud_idle_ns while nothing is wanted is
 * turned off. */
static void pool_step(engine *e)
{
    const cr__sim_opts *o = e->o;
    if (!o->cloud || e->cloud_type < 0) {
        return;
    }
    uint64_t need = 0;
    int64_t due = 0;
    while (e->first_open < e->next_arrival && e->jobs[e->first_open].state == J_DONE) {
        e->first_open++;
    }
    for (size_t i = e->first_open; i < e->next_arrival; i++) {
        const cr__sim_job *wj = &e->w->jobs[i];
        if (e->jobs[i].state != J_PENDING || !(wj->rate[e->cloud_type] > 0)) {
            continue;
        }
        if (e->now - wj->submit_ns < o->cloud_pending_ns) {
            int64_t t = wj->submit_ns + o->cloud_pending_ns;
            due = due == 0 || t < due ? t : due;
            continue;
        }
        need += (uint64_t)wj->gpu_count;
    }
    uint64_t offer = 0;
    for (uint32_t k = e->cloud_first; k < e->nnodes; k++) {
        const node_rt *n = &e->nodes[k];
        offer += n->booting ? n->gpus : n->up ? n->gpus - n->used : 0;
    }
    for (uint32_t k = e->cloud_first; k < e->nnodes && need > offer; k++) {
        node_rt *n = &e->nodes[k];
        if (!n->up && !n->booting) {
            n->booting = true;
            n->on_since = e->now;
            offer += n->gpus;
            e->res->cloud_boots++;
            cr__sim_heap_push(&e->heap, e->now + o->cloud_boot_ns, CR_SIM_EV_BOOT, k, 0);
        }
    }
    for (uint32_t k = e->cloud_first; k < e->nnodes; k++) {
        node_rt *n = &e->nodes[k];
        if (!n->up) {
            continue;
        }
        if (n->used > 0) {
            n->idle_since = 0;
            continue;
        }
        if (n->idle_since == 0 || need > 0) {
            n->idle_since = e->now; /* idle from now (demand: its idle time starts again) */
        }
        if (need == 0 && e->now - n->idle_since >= o->cloud_idle_ns) {
            cloud_off(e, k);
        } else {
            pool_wake(e, n->idle_since + o->cloud_idle_ns);
        }
    }
    if (due > 0) {
        pool_wake(e, due);
    }
}

/* Whether the cloud pool may still bring capacity (a boot under way, or
 * one it would start, or a pending job's pending time not over). */
static bool pool_may_act(engine *e)
{
    if (!e->o->cloud) {
        return false;
    }
    pool_step(e);
    for (uint32_t k = e->cloud_first; k < e->nnodes; k++) {
        if (e->nodes[k].booting) {
            return true;
        }
    }
    return e->pool_at > e->now;
}

static int run_cycle(engine *e)
{
    const cr_sched_decision *d = NULL;
    int n = cr_sched_cycle(e->s, e->now, &e->rng, &d);
    if (n < 0) {
        return n;
    }
    e->res->cycles++;
    e->last_cycle = e->now;
    e->cycle_due = false;
    for (int k = 0; k < n; k++) {
        if (d[k].action == CR_SCHED_START) {
            start_job(e, &d[k]);
        } else if (d[k].action == CR_SCHED_PREEMPT) {
            size_t i = (size_t)(d[k].job - 1);
            if (i < e->w->njobs && e->jobs[i].state == J_RUNNING) {
                int64_t ran = e->now - e->jobs[i].seg_start;
                int64_t kept = ran - d[k].lost_work_ns;
                e->res->jobs[i].preemptions++;
                stop_job(e, i, kept < 0 ? 0 : kept, false);
            }
        }
    }
    check(e, "cycle");
    return 0;
}

static int setup(engine *e, const cr__sim_cluster *c, char *err, size_t errlen)
{
    cr_sched_config cfg;
    cr_sched_config_default(&cfg, (cr_sched_policy)e->o->policy);
    cfg.share_policy = (cr_sched_share_policy)e->o->share_policy;
    if (e->o->backfill >= 0) {
        cfg.backfill = e->o->backfill;
    }
    if (e->o->preemption >= 0) {
        cfg.preemption = e->o->preemption;
    }
    if (e->o->lp >= 0) {
        cfg.hetero_lp = e->o->lp;
    }
    if (e->o->wait_faster >= 0) {
        cfg.wait_for_faster = e->o->wait_faster;
    }
    cfg.max_examined = e->o->max_examined;
    /* Without --estimates the simulated scheduler knows no run time at all
     * (its reservations have none): no default run time is assumed, so
     * the measured rows in docs/sim.md stay as they were. */
    cfg.default_time_ns = 0;
    int rc = cr_sched_new(&cfg, &e->s);
    if (rc != 0) {
        snprintf(err, errlen, "scheduler: %s", cr_strerror(rc));
        return rc;
    }
    rc = cr__sim_cluster_build(c, e->s, err, errlen);
    if (rc != 0) {
        return rc;
    }
    e->ntypes = cr_sched_gpu_type_count(e->s);
    if (e->ntypes > CR_SIM_MAX_TYPES) {
        snprintf(err, errlen, "cluster: more than %d GPU types", CR_SIM_MAX_TYPES);
        return CR_ERANGE;
    }
    cr__sim_result *r = e->res;
    r->ntypes = e->ntypes;
    for (int t = 0; t < e->ntypes; t++) {
        snprintf(r->types[t], CR_SIM_NAME_MAX, "%s", cr_sched_gpu_type_name(e->s, t));
    }
    e->nnodes = cr_sched_node_count(e->s);
    e->nodes = cr_calloc(e->nnodes ? e->nnodes : 1, sizeof *e->nodes);
    e->frac =
        cr_calloc((size_t)(e->nnodes ? e->nnodes : 1) * CR_SCHED_MAX_NODE_GPUS, sizeof *e->frac);
    for (uint32_t n = 0; n < e->nnodes; n++) {
        cr_sched_node_info ni;
        if (cr_sched_node_info_get(e->s, n, &ni) != 0) {
            continue;
        }
        node_rt *nr = &e->nodes[n];
        nr->up = ni.state != CR_NODE_LOST;
        for (uint32_t g = 0; g < ni.gpu_count; g++) {
            cr_sched_gpu_info gi;
            if (cr_sched_gpu_info_get(e->s, n, g, &gi) != 0 || gi.bad || gi.type < 0 ||
                gi.type >= e->ntypes) {
                continue;
            }
            if (gi.mig) {
                nr->mig[gi.type]++; /* sliced: MIG jobs only, outside the whole-GPU books */
                continue;
            }
            nr->per_type[gi.type]++;
            nr->gpus++;
        }
        nr->cloud = c->cloud_nodes > 0 && n >= e->nnodes - (uint32_t)c->cloud_nodes;
        if (nr->cloud) {
            r->cloud_gpus += nr->gpus;
            for (int t = 0; t < e->ntypes; t++) {
                e->cloud_type = nr->per_type[t] ? t : e->cloud_type;
            }
            nr->on_since = nr->up ? INT64_MIN : 0; /* (always on: from the first submit) */
        }
        if (nr->up) {
            for (int t = 0; t < e->ntypes; t++) {
                e->healthy[t] += nr->per_type[t];
                e->mig[t] += nr->mig[t];
                r->type_gpus[t] += nr->per_type[t];
            }
        } else if (!nr->cloud) {
            e->nodes_down++; /* (a cloud node off is not down: it was not bought) */
        }
    }
    e->cloud_first = e->nnodes - (uint32_t)(c->cloud_nodes > 0 ? c->cloud_nodes : 0);
    e->tenant_map = cr_calloc(e->w->ntenants ? e->w->ntenants : 1, sizeof *e->tenant_map);
    for (size_t k = 0; k < e->w->ntenants; k++) {
        rc = cr_sched_tenant(e->s, e->w->tenants[k], &e->tenant_map[k]);
        if (rc != 0) {
            snprintf(err, errlen, "tenant '%s': %s", e->w->tenants[k], cr_strerror(rc));
            return rc;
        }
    }
    return 0;
}

int cr__sim_run(const cr__sim_opts *o, const cr__sim_cluster *c, const cr__sim_workload *w,
                cr__sim_result *res, char *err, size_t errlen)
{
    int64_t wall0 = cr_mono_ns();
    engine e;
    memset(&e, 0, sizeof e);
    memset(res, 0, sizeof *res);
    e.o = o;
    e.w = w;
    e.res = res;
    snprintf(res->policy, sizeof res->policy, "%s", cr_sched_policy_name(o->policy));
    cr_rng_seed(&e.rng, o->seed);
    cr_rng_seed(&e.fail_rng, o->seed ^ UINT64_C(0x9e3779b97f4a7c15));
    e.cloud_type = -1;
    cr__sim_heap_init(&e.heap);
    res->njobs = w->njobs;
    res->jobs = cr_calloc(w->njobs ? w->njobs : 1, sizeof *res->jobs);
    e.jobs = cr_calloc(w->njobs ? w->njobs : 1, sizeof *e.jobs);
    for (size_t i = 0; i < w->njobs; i++) {
        res->jobs[i].first_start_ns = -1;
        res->jobs[i].finish_ns = -1;
        res->jobs[i].type = -1;
        res->jobs[i].contention = 1.0;
        res->jobs[i].pred_err = -1;
    }
    if (o->learn) {
        e.obs = cr_obs_new();
        size_t pl = strlen(res->policy);
        snprintf(res->policy + pl, sizeof res->policy - pl, "+learn");
    }
    int rc = setup(&e, c, err, errlen);
    if (rc != 0) {
        goto out;
    }
    for (int t = 0; t < e.ntypes; t++) {
        const char *tn = cr_sched_gpu_type_name(e.s, t);
        snprintf(e.types[t], sizeof e.types[t], "%s", tn ? tn : "");
    }
    if (w->njobs == 0) {
        goto out;
    }
    res->t0_ns = w->jobs[0].submit_ns;
    e.now = e.last = e.last_cycle = res->t0_ns;
    cr__sim_heap_push(&e.heap, w->jobs[0].submit_ns, CR_SIM_EV_ARRIVE, 0, 0);
    if (o->mtbf_ns > 0) {
        for (uint32_t n = 0; n < e.nnodes; n++) {
            if (e.nodes[n].up) {
                double mean_s = (double)o->mtbf_ns / 1e9;
                int64_t dt = (int64_t)(cr_rng_exp(&e.fail_rng, mean_s) * 1e9) + 1;
                cr__sim_heap_push(&e.heap, res->t0_ns + dt, CR_SIM_EV_FAIL, n, 0);
            }
        }
    }
    cr__sim_ev ev;
    while (e.done < w->njobs && cr__sim_heap_pop(&e.heap, &ev)) {
        e.now = ev.t_ns;
        advance(&e);
        res->events++;
        switch (ev.kind) {
        case CR_SIM_EV_ARRIVE: {
            size_t i = (size_t)ev.a;
            rc = add_job(&e, i);
            if (rc != 0) {
                snprintf(err, errlen, "job %s: scheduler refused it: %s", w->jobs[i].name,
                         cr_strerror(rc));
                goto out;
            }
            if (i + 1 < w->njobs) {
                cr__sim_heap_push(&e.heap, w->jobs[i + 1].submit_ns, CR_SIM_EV_ARRIVE,
                                  (int64_t)i + 1, 0);
            }
            e.next_arrival = i + 1;
            check(&e, "arrival");
            break;
        }
        case CR_SIM_EV_FINISH: {
            size_t i = (size_t)ev.a;
            if (e.jobs[i].state != J_RUNNING || e.jobs[i].epoch != ev.b) {
                break; /* stale: the run it belonged to was stopped */
            }
            rc = cr_sched_job_remove(e.s, (uint64_t)i + 1, e.now);
            if (rc != 0) {
                snprintf(err, errlen, "job %s: remove: %s", w->jobs[i].name, cr_strerror(rc));
                goto out;
            }
            stop_job(&e, i, 0, true);
            check(&e, "finish");
            break;
        }
        case CR_SIM_EV_FAIL:
            node_fail(&e, (uint32_t)ev.a);
            check(&e, "node failure");
            break;
        case CR_SIM_EV_REPAIR:
            node_repair(&e, (uint32_t)ev.a);
            check(&e, "node repair");
            break;
        case CR_SIM_EV_TICK:
            e.tick_queued = false;
            break;
        case CR_SIM_EV_BOOT:
            cloud_boot_done(&e, (uint32_t)ev.a);
            break;
        case CR_SIM_EV_POOL:
            if (e.pool_at == e.now) {
                e.pool_at = 0;
            }
            break;
        default:
            break;
        }
        /* Apply every event of this instant before the cycle. */
        const cr__sim_ev *nx = cr__sim_heap_peek(&e.heap);
        if (nx && nx->t_ns == e.now) {
            continue;
        }
        if (e.cycle_due) {
            if (o->interval_ns > 0 && e.now < e.last_cycle + o->interval_ns) {
                if (!e.tick_queued) {
                    cr__sim_heap_push(&e.heap, e.last_cycle + o->interval_ns, CR_SIM_EV_TICK, 0, 0);
                    e.tick_queued = true;
                }
            } else {
                size_t before = e.running;
                rc = run_cycle(&e);
                if (rc != 0) {
                    snprintf(err, errlen, "scheduler cycle: %s", cr_strerror(rc));
                    goto out;
                }
                /* Nothing can change any more: stuck jobs stay unfinished. */
                if (e.running == 0 && before == 0 && e.next_arrival >= w->njobs &&
                    e.nodes_down == 0 && !pool_may_act(&e)) {
                    sample(&e);
                    break;
                }
            }
        }
        pool_step(&e);
        sample(&e);
    }
    res->t_end_ns = e.now;
    /* the cloud nodes still on are bought to the end: always-on ones to
     * the last event, the pool's until their idle time after it (the last
     * job is over: they are idle from now) */
    for (uint32_t k = e.cloud_first; k < e.nnodes; k++) {
        const node_rt *n = &e.nodes[k];
        if (n->cloud && (n->up || n->booting)) {
            bool always = n->on_since == INT64_MIN;
            int64_t from = always ? res->t0_ns : n->on_since;
            int64_t to = always ? e.now : e.now + o->cloud_idle_ns;
            res->cloud_gpu_ns += (double)(to - from) * n->gpus;
        }
    }
    /* Say why jobs never finished, in the scheduler's words. */
    for (size_t i = 0; i < w->njobs; i++) {
        if (e.jobs[i].state == J_DONE) {
            continue;
        }
        if (res->nstuck < 3) {
            char why[CR_SCHED_REASON_MAX];
            why[0] = '\0';
            if (e.jobs[i].state == J_FUTURE ||
                cr_sched_job_reason(e.s, (uint64_t)i + 1, why, sizeof why) < 0) {
                snprintf(why, sizeof why, "%s",
                         e.jobs[i].state == J_RUNNING ? "still running" : "not arrived");
            }
            snprintf(res->stuck[res->nstuck], sizeof res->stuck[0], "job %s: %s", w->jobs[i].name,
                     why);
        }
        res->nstuck++;
    }
    rc = 0;
out:
    for (size_t i = 0; i < w->njobs; i++) {
        free(e.jobs[i].nodes);
        free(e.jobs[i].gpus);
        free(e.jobs[i].kinds);
    }
    free(e.jobs);
    free(e.nodes);
    free(e.frac);
    free(e.tenant_map);
    cr__sim_heap_fini(&e.heap);
    cr_sched_free(e.s);
    cr_obs_free(e.obs);
    res->wall_s = (double)(cr_mono_ns() - wall0) / 1e9;
    return rc;
}

void cr__sim_result_fini(cr__sim_result *r)
{
    CR_FREE(r->jobs);
    CR_FREE(r->samples);
    r->nsamples = r->samples_cap = 0;
}
