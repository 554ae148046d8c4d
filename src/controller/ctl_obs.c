/*
 * ctl_obs.c - the controller's series that tie the queue and the cluster to
 * tenants and nodes (appended to /metrics by ctl_metrics.c):
 *
 *   corral_queue_wait_seconds{tenant}            histogram: submit to first start
 *   corral_jobs_pending_by_reason{reason}        gauge: pending jobs by reason class
 *   corral_tenant_gpu_seconds_total{tenant,gpu_type}  counter: GPU time used
 *   corral_tenant_energy_joules_total{tenant,gpu_type} counter
 *   corral_tenant_cost_dollars_total{tenant,gpu_type}  counter (config prices)
 *   corral_node_info{node,rack,state,addr,gpu_type} 1
 *   corral_node_gpus{node,gpu_type}              gauge: GPUs registered
 *   corral_node_last_seen_seconds{node}          gauge: since the last heartbeat
 *
 * Without full (an open scrape, ctl_metrics.c), the tenant label is left
 * out: the queue wait is one histogram, the tenant counters are summed per
 * gpu_type.
 *
 * Reasons are free text with live numbers, so the gauge groups them into a
 * few classes (quota, resources, no_type, held, preempted, dependency,
 * other, none); the job object keeps the full text.
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_time.h"

#include <stdio.h>
#include <string.h>

/* Queue waits: 1 s to 1 day. */
static const double wait_bounds[] = {1,   5,    15,   30,   60,    120,  300,
                                     600, 1800, 3600, 7200, 21600, 86400};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static cr_prom_hist_vec *wait_hist; /* for the process: one controller per process */
static cr_prom_hist wait_all;       /* the same, every tenant together (open /metrics) */

static void init_hist(void)
{
    wait_hist = cr_prom_hist_vec_new(wait_bounds, sizeof wait_bounds / sizeof wait_bounds[0]);
    cr_prom_hist_init(&wait_all, wait_bounds, sizeof wait_bounds / sizeof wait_bounds[0]);
}

void ctl_obs_started(const ctl_job *j, int64_t now_ns)
{
    if (j->runs > 1 || j->submit_ns <= 0 || now_ns < j->submit_ns) {
        return; /* a restart after preemption or a retry is not queue wait */
    }
    pthread_once(&once, init_hist);
    cr_buf l;
    cr_buf_init(&l);
    cr_prom_label(&l, "tenant", j->tenant);
    cr_prom_hist_vec_observe(wait_hist, cr_buf_str(&l), (double)(now_ns - j->submit_ns) / 1e9);
    cr_prom_hist_observe(&wait_all, (double)(now_ns - j->submit_ns) / 1e9);
    cr_buf_fini(&l);
}

const char *ctl_reason_class(const char *r)
{
    if (!r || !*r) {
        return "none";
    }
    if (strstr(r, "quota")) {
        return "quota";
    }
    if (strstr(r, "held")) {
        return "held";
    }
    if (strstr(r, "preempt")) {
        return "preempted";
    }
    if (strstr(r, "depend") || strstr(r, "after")) {
        return "dependency";
    }
    if (strstr(r, "no GPU type") || strstr(r, "cannot be scheduled") || strstr(r, "does not fit")) {
        return "no_type";
    }
    if (strstr(r, "needs") || strstr(r, "free") || strstr(r, "in service") ||
        strstr(r, "waiting")) {
        return "resources";
    }
    return "other";
}

typedef struct kv {
    char a[CTL_NAME_MAX], b[CTL_NAME_MAX];
    double x, y, z;
} kv;

static kv *kv_get(kv **v, size_t *n, size_t *cap, const char *a, const char *b)
{
    for (size_t i = 0; i < *n; i++) {
        if (strcmp((*v)[i].a, a) == 0 && strcmp((*v)[i].b, b) == 0) {
            return &(*v)[i];
        }
    }
    CR_GROW(*v, *n, *cap);
    kv *e = &(*v)[(*n)++];
    memset(e, 0, sizeof *e);
    snprintf(e->a, sizeof e->a, "%s", a);
    snprintf(e->b, sizeof e->b, "%s", b);
    return e;
}

static void sample2(cr_buf *b, const char *name, const char *ka, const char *va, const char *kb,
                    const char *vb, double x)
{
    cr_buf l;
    cr_buf_init(&l);
    cr_prom_label(&l, ka, va);
    if (kb) {
        cr_prom_label(&l, kb, vb);
    }
    cr_prom_sample(b, name, cr_buf_str(&l), x);
    cr_buf_fini(&l);
}

void ctl_metrics_more(ctl *c, cr_buf *b, bool full)
{
    static const char *const classes[] = {"none",      "quota",      "held",
                                          "preempted", "dependency", "no_type",
                                          "resources", "other",      "starting"};
    double pending[sizeof classes / sizeof classes[0]] = {0};
    kv *use = NULL;
    size_t nuse = 0, capuse = 0;
    cr_buf nodes;
    cr_buf_init(&nodes);
    cr_buf gpus;
    cr_buf_init(&gpus);
    cr_buf seen;
    cr_buf_init(&seen);
    int64_t mono = cr_mono_ns();
    pthread_mutex_lock(&c->mu);
    size_t slot = ctl_first_active_slot(c);
    for (const ctl_job *j; (j = ctl_job_next(c, &slot));) {
        if (ctl_job_shown_state(j) != JS_PENDING) {
            continue;
        }
        const char *k = j->start_unstored ? "starting" : ctl_reason_class(j->reason);
        for (size_t q = 0; q < sizeof classes / sizeof classes[0]; q++) {
            pending[q] += strcmp(classes[q], k) == 0;
        }
    }
    for (size_t i = 0; i < c->nusage; i++) {
        if (strstr(c->usage[i].gpu_type, CTL_IDLE_SUFFIX) ||
            strstr(c->usage[i].gpu_type, CTL_CLOUD_SUFFIX)) {
            continue; /* idle GPU-seconds: already in their type's row; cloud
                       * node time: corral_pool_cost_total */
        }
        kv *e = kv_get(&use, &nuse, &capuse, full ? c->usage[i].tenant : "", c->usage[i].gpu_type);
        e->x += c->usage[i].gpu_s;
        e->y += c->usage[i].energy_j;
        e->z += c->usage[i].cost;
    }
    for (size_t i = 0; i < c->nnodes; i++) {
        const ctl_node *n = c->nodes[i];
        const char *type = n->ngpus ? n->gpus[0].model : "";
        cr_buf l;
        cr_buf_init(&l);
        cr_prom_label(&l, "node", n->name);
        cr_prom_label(&l, "rack", n->rack);
        cr_prom_label(&l, "state", ctl_node_state_names[n->state]);
        if (full) {
            cr_prom_label(&l, "addr", n->addr); /* not to whoever reaches an open /metrics */
        }
        cr_prom_label(&l, "gpu_type", type);
        cr_prom_sample(&nodes, "corral_node_info", cr_buf_str(&l), 1);
        cr_buf_fini(&l);
        sample2(&gpus, "corral_node_gpus", "node", n->name, "gpu_type", type, (double)n->ngpus);
        sample2(&seen, "corral_node_last_seen_seconds", "node", n->name, NULL, NULL,
                (double)(mono - n->last_seen_ns) / 1e9);
    }
    pthread_mutex_unlock(&c->mu);

    cr_prom_family(b, "corral_queue_wait_seconds", "histogram",
                   full ? "Time from submit to a job's first start, by tenant."
                        : "Time from submit to a job's first start (tenants: with the metrics "
                          "token).");
    pthread_once(&once, init_hist);
    if (full) {
        cr_prom_hist_vec_write(b, "corral_queue_wait_seconds", wait_hist);
    } else {
        cr_prom_hist_write(b, "corral_queue_wait_seconds", NULL, &wait_all);
    }
    cr_prom_family(b, "corral_jobs_pending_by_reason", "gauge",
                   "Pending jobs by reason class (the job object has the full reason).");
    for (size_t q = 0; q < sizeof classes / sizeof classes[0]; q++) {
        sample2(b, "corral_jobs_pending_by_reason", "reason", classes[q], NULL, NULL, pending[q]);
    }
    static const char *const names[][2] = {
        {"corral_tenant_gpu_seconds_total", "GPU-seconds used, by tenant and GPU type."},
        {"corral_tenant_energy_joules_total", "GPU energy used, by tenant and GPU type."},
        {"corral_tenant_cost_dollars_total", "Cost at the configured prices, by tenant and type."},
    };
    for (size_t f = 0; f < 3; f++) {
        cr_prom_family(b, names[f][0], "counter", names[f][1]);
        for (size_t i = 0; i < nuse; i++) {
            double x = f == 0 ? use[i].x : f == 1 ? use[i].y : use[i].z;
            if (full) {
                sample2(b, names[f][0], "tenant", use[i].a, "gpu_type", use[i].b, x);
            } else {
                sample2(b, names[f][0], "gpu_type", use[i].b, NULL, NULL, x);
            }
        }
    }
    cr_prom_family(b, "corral_node_info", "gauge",
                   full ? "1 per node, with its rack, state and address."
                        : "1 per node, with its rack and state (the address: with the metrics "
                          "token).");
    cr_buf_append(b, nodes.data, nodes.len);
    cr_prom_family(b, "corral_node_gpus", "gauge", "GPUs registered by each node.");
    cr_buf_append(b, gpus.data, gpus.len);
    cr_prom_family(b, "corral_node_last_seen_seconds", "gauge",
                   "Seconds since each node's agent was last heard from.");
    cr_buf_append(b, seen.data, seen.len);
    ctl_hist_metrics(c->hist, b);
    cr_buf_fini(&nodes);
    cr_buf_fini(&gpus);
    cr_buf_fini(&seen);
    free(use);
}
