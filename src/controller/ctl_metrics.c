/*
 * ctl_metrics.c - /metrics in the Prometheus text format.
 *
 * Gauges are computed at scrape time from memory (one pass over jobs and
 * nodes under mu); counters and histograms are kept as they happen.
 *
 * Tenant names are another tenant's business: without --metrics-token-file
 * anyone who reaches the port may scrape, and the tenant series are served
 * aggregated (corral_jobs{state}, corral_queue_wait_seconds without labels,
 * corral_tenant_*_total{gpu_type}); with the metrics token, or an admin
 * token, the full series (docs/security.md). With the file set, a scrape
 * without either is refused (401).
 */
#include "ctl_int.h"
#include "ctl_pools.h"

#include "ctl_ha.h"

#include "cr_alloc.h"
#include "cr_error.h"

#include <malloc.h>
#include <stdio.h>
#include <string.h>

void ctl_observe(void *ctx, const char *method, const char *route, unsigned status, int64_t dur_ns)
{
    ctl *c = ctx;
    /* Routes and methods are static labels from the router: no escaping. */
    static const char *const known[] = {"GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", NULL};
    const char *m = "OTHER";
    for (size_t i = 0; known[i]; i++) {
        if (strcmp(method, known[i]) == 0) {
            m = known[i];
        }
    }
    method = m;
    char labels[160];
    snprintf(labels, sizeof labels, "route=\"%s\",method=\"%s\",code=\"%u\"", route, method,
             status);
    cr_prom_hist_vec_observe(c->api_hist, labels, (double)dur_ns / 1e9);
}

typedef struct count {
    char a[CTL_NAME_MAX];
    char b[CTL_NAME_MAX];
    double n;
} count;

/* The controller's memory by owner: the C heap (malloc's own view: bytes
 * in use, free inside its arenas, and in large mmap'd blocks) and SQLite's
 * share of it, so a rising RSS can be told apart (issue 10). */
static void memory_metrics(cr_buf *b)
{
    struct mallinfo2 mi = mallinfo2();
    cr_prom_family(b, "corral_heap_bytes", "gauge",
                   "C heap (malloc): in_use (allocated, arenas and mmap), free (held by malloc "
                   "inside its arenas), mmap (large blocks mapped on their own).");
    const char *kinds[] = {"in_use", "free", "mmap"};
    double vals[] = {(double)(mi.uordblks + mi.hblkhd), (double)mi.fordblks, (double)mi.hblkhd};
    for (size_t i = 0; i < 3; i++) {
        cr_buf l;
        cr_buf_init(&l);
        cr_prom_label(&l, "kind", kinds[i]);
        cr_prom_sample(b, "corral_heap_bytes", cr_buf_str(&l), vals[i]);
        cr_buf_fini(&l);
    }
    uint64_t now, peak;
    cr_store_memory(&now, &peak);
    cr_prom_family(b, "corral_store_memory_bytes", "gauge",
                   "Heap bytes SQLite holds (page caches of the writer and the readers, "
                   "statements); part of corral_heap_bytes in_use.");
    cr_prom_sample(b, "corral_store_memory_bytes", NULL, (double)now);
}

static void bump(count **v, size_t *len, size_t *cap, const char *a, const char *b, double n)
{
    for (size_t i = 0; i < *len; i++) {
        if (strcmp((*v)[i].a, a) == 0 && strcmp((*v)[i].b, b) == 0) {
            (*v)[i].n += n;
            return;
        }
    }
    CR_GROW(*v, *len, *cap);
    count *x = &(*v)[(*len)++];
    snprintf(x->a, sizeof x->a, "%s", a);
    snprintf(x->b, sizeof x->b, "%s", b);
    x->n = n;
}

/* ka NULL: without the first label (counted under "" by the caller). */
static void write_counts(cr_buf *b, const char *name, const char *ka, const char *kb,
                         const count *v, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        cr_buf l;
        cr_buf_init(&l);
        if (ka) {
            cr_prom_label(&l, ka, v[i].a);
        }
        cr_prom_label(&l, kb, v[i].b);
        cr_prom_sample(b, name, cr_buf_str(&l), v[i].n);
        cr_buf_fini(&l);
    }
}

/*
 * Who may read the tenant series: the holder of --metrics-token-file's
 * token, or an admin. Without that file anyone may scrape, and reads the
 * series without tenant labels (true into *full only for those two).
 * False when the file is set and the caller shows neither (answered 401),
 * or when a caller without either is over its address's rate limit (429).
 */
static bool metrics_caller(ctl *c, cr_http_req *req, bool *full)
{
    const char *h = cr_http_header(req, "Authorization");
    const char *tok = cr_auth_bearer(h);
    cr_principal p;
    *full = (c->metrics_token && cr_auth_bearer_is(h, c->metrics_token)) ||
            (tok && cr_auth_table_check(c->auth, tok, &p) && p.role == CR_ROLE_ADMIN);
    if (*full) {
        return true;
    }
    /* Without the metrics or an admin token, the scrape counts against
     * the client address's limit (a scrape walks the jobs under mu). */
    if (!ctl_rl_allow_anon(c, req)) {
        return false;
    }
    if (!c->metrics_token) {
        return true;
    }
    atomic_fetch_add(&c->auth_failures, 1);
    cr_http_add_header(req, "WWW-Authenticate", "Bearer");
    ctl_reply_err(req, 401, CR_EAUTH, NULL,
                  "/metrics needs the controller's metrics token (--metrics-token-file) or an "
                  "admin token");
    return false;
}

void ctl_route_metrics(ctl *c, cr_http_req *req)
{
    bool full = false;
    if (!metrics_caller(c, req, &full)) {
        return;
    }
    cr_buf b;
    cr_buf_init(&b);
    count *q = NULL, *g = NULL;
    size_t nq = 0, capq = 0, ng = 0, capg = 0;
    size_t nodes_by_state[NS_COUNT] = {0};
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->ntenants; i++) {
        for (int s = 0; s < JS_COUNT; s++) {
            if (s == JS_PENDING || s == JS_HELD || s == JS_RUNNING || s == JS_COMPLETING) {
                bump(&q, &nq, &capq, full ? c->tenants[i]->name : "", ctl_job_state_names[s], 0);
            }
        }
    }
    /* Jobs below first_active are all finished or out of memory; move it
     * past the finished prefix (a job that arrives later below it, or
     * becomes active again, moves it back: ctl_job_insert, requeue). */
    bool prefix = true;
    size_t slot = ctl_first_active_slot(c);
    for (ctl_job *j; (j = ctl_job_next(c, &slot));) {
        if (!ctl_job_terminal(j)) {
            /* a start being stored is pending, as the job view shows it */
            bump(&q, &nq, &capq, full ? j->tenant : "", ctl_job_state_names[ctl_job_shown_state(j)],
                 1);
            prefix = false;
        } else if (prefix) {
            c->first_active = j->id + 1;
        }
    }
    for (size_t i = 0; i < c->nnodes; i++) {
        ctl_node *n = c->nodes[i];
        nodes_by_state[n->state]++;
        for (size_t k = 0; k < n->ngpus; k++) {
            const ctl_gpu *x = &n->gpus[k];
            const char *st = x->alloc_job                   ? "allocated"
                             : strcmp(x->health, "ok") != 0 ? "unhealthy"
                             : n->state != NS_UP            ? "unavailable"
                                                            : "free";
            bump(&g, &ng, &capg, x->model, st, 1);
        }
    }
    size_t finished_mem = c->nfinished_mem;
    pthread_mutex_unlock(&c->mu);

    cr_prom_family(&b, "corral_jobs", "gauge",
                   full ? "Jobs not finished, by tenant and state."
                        : "Jobs not finished, by state (tenants: with the metrics token).");
    write_counts(&b, "corral_jobs", full ? "tenant" : NULL, "state", q, nq);
    cr_prom_family(&b, "corral_gpus", "gauge",
                   "GPUs by type and state (allocated, free, unhealthy, unavailable).");
    write_counts(&b, "corral_gpus", "gpu_type", "state", g, ng);
    cr_prom_family(&b, "corral_nodes", "gauge", "Nodes by state.");
    for (int s = 0; s < NS_COUNT; s++) {
        cr_buf l;
        cr_buf_init(&l);
        cr_prom_label(&l, "state", ctl_node_state_names[s]);
        cr_prom_sample(&b, "corral_nodes", cr_buf_str(&l), (double)nodes_by_state[s]);
        cr_buf_fini(&l);
    }
    cr_prom_family(&b, "corral_jobs_submitted_total", "counter", "Jobs accepted (committed).");
    cr_prom_sample(&b, "corral_jobs_submitted_total", NULL,
                   (double)atomic_load(&c->jobs_submitted));
    cr_prom_family(&b, "corral_jobs_fetched_total", "counter",
                   "Finished jobs read back into memory from the store (retention).");
    cr_prom_sample(&b, "corral_jobs_fetched_total", NULL, (double)atomic_load(&c->jobs_fetched));
    cr_prom_family(&b, "corral_jobs_idle_warned_total", "counter",
                   "Runs warned for holding idle GPUs past their tenant's idle limit.");
    cr_prom_sample(&b, "corral_jobs_idle_warned_total", NULL, (double)atomic_load(&c->idle_warned));
    cr_prom_family(&b, "corral_jobs_idle_reclaimed_total", "counter",
                   "Runs requeued for holding idle GPUs (the tenant's idle policy).");
    cr_prom_sample(&b, "corral_jobs_idle_reclaimed_total", NULL,
                   (double)atomic_load(&c->idle_reclaimed));
    cr_prom_family(&b, "corral_jobs_started_total", "counter", "Job starts (placements).");
    cr_prom_sample(&b, "corral_jobs_started_total", NULL, (double)atomic_load(&c->jobs_started));
    cr_prom_family(&b, "corral_jobs_finished_total", "counter", "Jobs finished, by end state.");
    for (int s = JS_COMPLETED; s <= JS_CANCELLED; s++) {
        cr_buf l;
        cr_buf_init(&l);
        cr_prom_label(&l, "state", ctl_job_state_names[s]);
        cr_prom_sample(&b, "corral_jobs_finished_total", cr_buf_str(&l),
                       (double)atomic_load(&c->jobs_finished[s]));
        cr_buf_fini(&l);
    }
    cr_prom_family(&b, "corral_sched_cycle_seconds", "histogram",
                   "Time of one scheduler pass (apply changes, cycle, commit).");
    cr_prom_hist_write(&b, "corral_sched_cycle_seconds", NULL, &c->cycle_hist);
    cr_prom_family(&b, "corral_api_request_duration_seconds", "histogram",
                   "API latency from the first byte to the answer, by route, method and code.");
    cr_prom_hist_vec_write(&b, "corral_api_request_duration_seconds", c->api_hist);
    cr_prom_family(&b, "corral_auth_failures_total", "counter",
                   "Requests refused for a missing or invalid token.");
    cr_prom_sample(&b, "corral_auth_failures_total", NULL, (double)atomic_load(&c->auth_failures));
    ctl_rl_metrics(c, &b);
    uint64_t commits, txns;
    cr_store_stats(c->store, &commits, &txns);
    cr_prom_family(&b, "corral_store_commits_total", "counter", "SQLite commits (group commits).");
    cr_prom_sample(&b, "corral_store_commits_total", NULL, (double)commits);
    cr_prom_family(&b, "corral_store_transactions_total", "counter",
                   "Transactions made durable (many per commit under load).");
    cr_prom_sample(&b, "corral_store_transactions_total", NULL, (double)txns);
    cr_prom_family(&b, "corral_jobs_finished_in_memory", "gauge",
                   "Finished jobs still held in memory (retention: retain_finished, retain_s).");
    cr_prom_sample(&b, "corral_jobs_finished_in_memory", NULL, (double)finished_mem);
    memory_metrics(&b);
    ctl_metrics_more(c, &b, full);
    ctl_pools_metrics(c, &b);
    if (c->ha) {
        ctl_ha_metrics(c->ha, &b);
    } else {
        cr_prom_family(&b, "corral_controller_leader", "gauge",
                       "1 on the controller that leads (schedules and answers writes), 0 on a "
                       "standby.");
        cr_prom_sample(&b, "corral_controller_leader", NULL, 1);
    }
    free(q);
    free(g);
    size_t len = b.len;
    cr_http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", cr_buf_take(&b), len);
}
