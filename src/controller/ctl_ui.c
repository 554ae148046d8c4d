/*
 * ctl_ui.c - the web dashboard and the routes only it (and Prometheus)
 * needs:
 *
 *   GET  /ui, /ui/, /ui/FILE     the dashboard's static files (ui/, embedded
 *                                at build time); no token: they hold no data.
 *                                Every answer carries a strict CSP.
 *   GET  /v1/prometheus/targets  Prometheus http_sd: agents, gateways and
 *                                service replicas with labels (admin).
 *   POST /v1/advise              `corral advise` over the API (admin, user).
 *   GET  /v1/cluster             the cluster map in one compact answer: nodes,
 *                                GPUs with state, job, utilisation and MIG use
 *                                (admin, user; a user sees which job holds a
 *                                GPU, and its tenant only for its own jobs).
 *
 * The dashboard's data comes from the ordinary API with the user's own
 * token (sent by fetch as an Authorization header), so tenant scoping is
 * the API's.
 */
#include "ctl_int.h"
#include "ctl_ui_files.h"

#include "cr_alloc.h"
#include "cr_catalog.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_perf.h"
#include "cr_price.h"
#include "cr_time.h"

#include <stdio.h>
#include <string.h>

/* The dashboard runs its own script and style only, talks to this origin
 * only, and may not be framed. */
#define UI_CSP                                                                                     \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "              \
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

#define ADVISE_TOP_MAX 50                    /* ranked rows an advise answer may carry */
#define GATEWAYS_MAX   64                    /* gateways remembered for discovery */
#define GATEWAY_TTL_NS (300 * CR_NS_PER_SEC) /* a gateway silent this long is dropped */

void ctl_ui_headers(cr_http_req *req, bool api)
{
    cr_http_add_header(req, "X-Content-Type-Options", "nosniff");
    cr_http_add_header(req, "Referrer-Policy", "no-referrer");
    if (api) {
        cr_http_add_header(req, "Cache-Control", "no-store");
    } else {
        cr_http_add_header(req, "Content-Security-Policy", UI_CSP);
        cr_http_add_header(req, "X-Frame-Options", "DENY");
        cr_http_add_header(req, "Cache-Control", "no-cache");
    }
}

void ctl_route_ui(ctl *c, cr_http_req *req, char **seg, size_t nseg)
{
    (void)c;
    cr_http_set_route(req, "/ui");
    ctl_ui_headers(req, false);
    if (strcmp(cr_http_method(req), "GET") != 0 && strcmp(cr_http_method(req), "HEAD") != 0) {
        ctl_reply_err(req, 405, CR_EINVAL, NULL, "the dashboard is read with GET");
        return;
    }
    const char *want = nseg == 1 ? "index.html" : nseg == 2 ? seg[1] : NULL;
    for (size_t i = 0; want && ctl_ui_files[i].name; i++) {
        const ctl_ui_file *f = &ctl_ui_files[i];
        if (strcmp(f->name, want) == 0) {
            char *body = cr_malloc(f->len + 1);
            memcpy(body, f->data, f->len);
            body[f->len] = '\0';
            cr_http_respond(req, 200, f->type, body, f->len);
            return;
        }
    }
    ctl_reply_err(req, 404, CR_ENOENT, NULL, "no such dashboard file");
}

/* ------------------------------------------------------------------------ */
/* Cluster map                                                               */

/* MIG instances of g in use by running jobs (mu held). */
static json_int_t mig_busy(ctl *c, const ctl_node *n, const ctl_gpu *g)
{
    json_int_t busy = 0;
    for (size_t q = 0; g->mig && q < n->njobs; q++) {
        const ctl_job *j = ctl_job_get(c, n->jobs[q]);
        if (!j || (j->state != JS_RUNNING && j->state != JS_COMPLETING)) {
            continue;
        }
        for (size_t k = 0; k < j->nplace; k++) {
            if (*j->place[k].mig_profile && strcmp(j->place[k].node, n->name) == 0) {
                for (size_t e = 0; e < j->place[k].ngpus; e++) {
                    busy += j->place[k].gpus[e] == g->index;
                }
            }
        }
    }
    return busy;
}

static const char *gpu_state(const ctl_node *n, const ctl_gpu *g, json_int_t busy)
{
    if (strcmp(g->health, "ok") != 0) {
        return "unhealthy";
    }
    if (g->alloc_job) {
        return "allocated";
    }
    if (n->state != NS_UP) {
        return "unavailable";
    }
    return busy ? "mig" : "free";
}

/* A JSON string (quoted, escaped) onto b. */
static void jstr(cr_buf *b, const char *s)
{
    cr_buf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            cr_buf_putc(b, '\\');
            cr_buf_putc(b, (char)*p);
        } else if (*p < 0x20) {
            cr_buf_printf(b, "\\u%04x", *p);
        } else {
            cr_buf_putc(b, (char)*p);
        }
    }
    cr_buf_putc(b, '"');
}

/* The answer is written as text under mu (no JSON tree): a thousand nodes
 * of eight GPUs are some 8,000 objects, built in a few milliseconds. */
void ctl_route_cluster(ctl *c, cr_http_req *req, const cr_principal *p)
{
    cr_http_set_route(req, "/v1/cluster");
    if (p->role != CR_ROLE_ADMIN && p->role != CR_ROLE_USER) {
        ctl_reply_err(req, 403, CR_EPERM, NULL, "the cluster map takes an admin or user token");
        return;
    }
    cr_buf b;
    cr_buf_init(&b);
    cr_buf_puts(&b, "{\"nodes\":[");
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->nnodes; i++) {
        const ctl_node *n = c->nodes[i];
        cr_buf_puts(&b, i ? ",{\"name\":" : "{\"name\":");
        jstr(&b, n->name);
        cr_buf_printf(&b, ",\"state\":\"%s\",\"reason\":", ctl_node_state_names[n->state]);
        jstr(&b, n->reason);
        cr_buf_puts(&b, ",\"rack\":");
        jstr(&b, n->rack);
        cr_buf_puts(&b, ",\"gpus\":[");
        for (size_t k = 0; k < n->ngpus; k++) {
            const ctl_gpu *g = &n->gpus[k];
            json_int_t busy = mig_busy(c, n, g);
            /* Another tenant's job: "busy", with no id, tenant or name. */
            bool seen = !g->alloc_job || ctl_job_visible_to(c, g->alloc_job, p);
            const char *st = gpu_state(n, g, busy);
            cr_buf_printf(&b, "%s{\"index\":%d,\"model\":", k ? "," : "", g->index);
            jstr(&b, g->model);
            cr_buf_printf(&b, ",\"nvlink_domain\":%d,\"state\":\"%s\",\"health\":", g->nvlink,
                          !seen && strcmp(st, "allocated") == 0 ? "busy" : st);
            jstr(&b, g->health);
            cr_buf_puts(&b, ",\"reason\":");
            jstr(&b, g->reason);
            cr_buf_printf(&b, ",\"job\":%lld,\"util_pct\":%.0f,\"temp_c\":%.0f,\"power_w\":%.0f",
                          (long long)(seen ? g->alloc_job : 0), g->util_pct, g->temp_c, g->power_w);
            const ctl_job *j = g->alloc_job && seen ? ctl_job_get(c, g->alloc_job) : NULL;
            if (j) {
                cr_buf_puts(&b, ",\"tenant\":");
                jstr(&b, j->tenant);
            }
            if (g->mig && json_array_size(g->mig)) {
                const char *prof =
                    json_string_value(json_object_get(json_array_get(g->mig, 0), "profile"));
                cr_buf_printf(&b, ",\"mig_total\":%zu,\"mig_busy\":%lld,\"mig_profile\":",
                              json_array_size(g->mig), (long long)busy);
                jstr(&b, prof ? prof : "");
            }
            cr_buf_putc(&b, '}');
        }
        cr_buf_puts(&b, "]}");
    }
    pthread_mutex_unlock(&c->mu);
    cr_buf_puts(&b, "]}");
    size_t len = b.len;
    cr_http_respond(req, 200, "application/json", cr_buf_take(&b), len);
}

/* ------------------------------------------------------------------------ */
/* Prometheus http_sd                                                        */

typedef struct gw_seen {
    char addr[64];
    int port;
    int64_t seen_ns; /* wall clock */
} gw_seen;

static pthread_mutex_t gw_mu = PTHREAD_MUTEX_INITIALIZER;
static gw_seen gw_list[GATEWAYS_MAX];
static size_t gw_count;

void ctl_ui_gateway_seen(const char *addr, int port)
{
    if (!addr || strlen(addr) >= sizeof gw_list[0].addr || port < 1 || port > 65535) {
        return;
    }
    pthread_mutex_lock(&gw_mu);
    size_t slot = gw_count, oldest = 0;
    for (size_t i = 0; i < gw_count; i++) {
        if (strcmp(gw_list[i].addr, addr) == 0 && gw_list[i].port == port) {
            slot = i;
        }
        if (gw_list[i].seen_ns < gw_list[oldest].seen_ns) {
            oldest = i;
        }
    }
    if (slot == gw_count && gw_count == GATEWAYS_MAX) {
        slot = oldest; /* bounded: the longest silent one makes room */
    } else if (slot == gw_count) {
        gw_count++;
    }
    snprintf(gw_list[slot].addr, sizeof gw_list[slot].addr, "%s", addr);
    gw_list[slot].port = port;
    gw_list[slot].seen_ns = cr_now_ns();
    pthread_mutex_unlock(&gw_mu);
}

static json_t *target(const char *addr, int port, json_t *labels /* taken */)
{
    char t[128];
    if (strchr(addr, ':')) {
        snprintf(t, sizeof t, "[%s]:%d", addr, port);
    } else {
        snprintf(t, sizeof t, "%s:%d", addr, port);
    }
    return json_pack("{s:[s],s:o}", "targets", t, "labels", labels);
}

void ctl_route_targets(ctl *c, cr_http_req *req, const cr_principal *p)
{
    cr_http_set_route(req, "/v1/prometheus/targets");
    if (p->role != CR_ROLE_ADMIN) {
        ctl_reply_err(req, 403, CR_EPERM, NULL, "only an admin token may list scrape targets");
        return;
    }
    json_t *out = json_array();
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->nnodes; i++) {
        const ctl_node *n = c->nodes[i];
        if (!n->port || !*n->addr) {
            continue;
        }
        json_array_append_new(
            out, target(n->addr, n->port,
                        json_pack("{s:s,s:s,s:s,s:s}", "corral_role", "agent", "node", n->name,
                                  "rack", n->rack, "node_state", ctl_node_state_names[n->state])));
    }
    size_t slot = ctl_first_active_slot(c);
    for (const ctl_job *j; (j = ctl_job_next(c, &slot));) {
        if (j->state != JS_RUNNING || !j->port || !j->nplace) {
            continue;
        }
        const char *svc = json_string_value(json_object_get(j->spec, "service"));
        const ctl_node *n = svc ? ctl_node_find(c, j->place[0].node) : NULL;
        if (!n || !*n->addr) {
            continue;
        }
        char id[32];
        snprintf(id, sizeof id, "%lld", (long long)j->id);
        json_array_append_new(
            out, target(n->addr, j->port,
                        json_pack("{s:s,s:s,s:s,s:s,s:s}", "corral_role", "replica", "service", svc,
                                  "job", id, "tenant", j->tenant, "node", n->name)));
    }
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_lock(&gw_mu);
    int64_t now = cr_now_ns();
    for (size_t i = 0; i < gw_count; i++) {
        if (now - gw_list[i].seen_ns > GATEWAY_TTL_NS) {
            continue;
        }
        json_array_append_new(out, target(gw_list[i].addr, gw_list[i].port,
                                          json_pack("{s:s}", "corral_role", "gateway")));
    }
    pthread_mutex_unlock(&gw_mu);
    ctl_reply_json(req, 200, out);
}

/* ------------------------------------------------------------------------ */
/* Advise                                                                    */

static pthread_mutex_t adv_mu = PTHREAD_MUTEX_INITIALIZER;
static cr_catalog *adv_cat; /* loaded on first use, kept for the process */
static cr_prices *adv_prices;

static int adv_load(const json_t *cfg_prices, char *err, size_t len)
{
    if (adv_cat) {
        return 0;
    }
    if (cr_catalog_load(NULL, &adv_cat, err, len) != 0) {
        adv_cat = NULL;
        return CR_EUNAVAIL;
    }
    if (cr_prices_load(NULL, adv_cat, &adv_prices, err, len) != 0) {
        adv_prices = cr_prices_new_empty();
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)cfg_prices, k, v)
    {
        const cr_gpu_type *g = cr_catalog_find(adv_cat, k);
        if (g && json_is_number(v) && json_number_value(v) >= 0) {
            cr_prices_set(adv_prices, g, json_number_value(v));
        }
    }
    return 0;
}

static json_t *num(double v)
{
    return cr_known(v) && v == v ? json_real(v) : json_null();
}

static int adv_parse(const json_t *v, cr_workload *w, int *objective, int64_t *gpus, int64_t *top,
                     cr_json_err *err)
{
    static const char *const members[] = {"kind",    "params",    "method", "tokens", "precision",
                                          "needs",   "objective", "gpus",   "top",    "rate_rps",
                                          "streams", "stack",     NULL};
    const char *kind = NULL, *method = NULL, *precision = NULL, *needs = NULL, *obj = NULL,
               *stack = NULL;
    double params = 0, tokens = 0, rate = 0, streams = 0;
    int rc = cr_json_only(v, "", members, err) ||
             cr_json_str(v, "", "kind", true, 32, &kind, err) ||
             cr_json_str(v, "", "method", false, 32, &method, err) ||
             cr_json_str(v, "", "precision", false, 32, &precision, err) ||
             cr_json_str(v, "", "needs", false, 128, &needs, err) ||
             cr_json_str(v, "", "objective", false, 32, &obj, err) ||
             cr_json_str(v, "", "stack", false, 32, &stack, err) ||
             cr_json_num(v, "", "params", false, 0, 1e14, &params, err) ||
             cr_json_num(v, "", "tokens", false, 0, 1e16, &tokens, err) ||
             cr_json_num(v, "", "rate_rps", false, 0, 1e9, &rate, err) ||
             cr_json_num(v, "", "streams", false, 0, 1e6, &streams, err) ||
             cr_json_int(v, "", "gpus", false, 0, 4096, gpus, err) ||
             cr_json_int(v, "", "top", false, 1, ADVISE_TOP_MAX, top, err);
    if (rc) {
        return CR_EINVAL;
    }
    cr_workload_init(w);
    if (cr_kind_parse(kind, &w->kind) != 0) {
        return cr_json_fail(err, CR_EINVAL, "kind",
                            "field 'kind': must be pretrain|finetune|inference|visual|hpc|batch");
    }
    if (method && cr_method_parse(method, &w->method) != 0) {
        return cr_json_fail(err, CR_EINVAL, "method", "field 'method': must be full|lora|qlora");
    }
    if (precision && cr_precision_parse(precision, &w->precision) != 0) {
        return cr_json_fail(err, CR_EINVAL, "precision", "field 'precision': unknown precision");
    }
    if (stack && (cr_stack_parse(stack, &w->stack) != 0 || w->stack == CR_STACK_AUTO)) {
        return cr_json_fail(err, CR_EINVAL, "stack",
                            "field 'stack': must be one of " CR_STACK_VALUES);
    }
    if (obj && cr_objective_parse(obj, objective) != 0) {
        return cr_json_fail(err, CR_EINVAL, "objective", "field 'objective': unknown objective");
    }
    char msg[200];
    if (needs && cr_needs_parse(needs, &w->needs, msg, sizeof msg) != 0) {
        return cr_json_fail(err, CR_EINVAL, "needs", "field 'needs': %s", msg);
    }
    w->params = params;
    w->tokens = tokens;
    if (rate > 0) {
        w->rate_per_s = rate;
    }
    if (streams > 0) {
        w->streams = streams;
    }
    if (cr_workload_check(w, msg, sizeof msg) != 0) {
        return cr_json_fail(err, CR_EINVAL, NULL, "%s", msg);
    }
    return 0;
}

void ctl_route_advise(ctl *c, cr_http_req *req, const cr_principal *p)
{
    cr_http_set_route(req, "/v1/advise");
    if (p->role != CR_ROLE_ADMIN && p->role != CR_ROLE_USER) {
        ctl_reply_err(req, 403, CR_EPERM, NULL, "advise takes an admin or user token");
        return;
    }
    size_t len;
    const char *body = cr_http_body(req, &len);
    json_t *v = NULL;
    cr_json_err err;
    cr_workload w;
    int objective = 0;
    int64_t gpus = 0, top = 10;
    cr_objective_parse("cost", &objective);
    if (cr_json_parse_object(body, len, &v, &err) != 0 ||
        adv_parse(v, &w, &objective, &gpus, &top, &err) != 0) {
        json_decref(v);
        ctl_reply_jerr(req, &err);
        return;
    }
    json_decref(v);
    char msg[512];
    pthread_mutex_lock(&adv_mu);
    if (adv_load(c->cfg.prices, msg, sizeof msg) != 0) {
        pthread_mutex_unlock(&adv_mu);
        ctl_reply_err(req, 503, CR_EUNAVAIL, NULL, "no GPU catalog: %s", msg);
        return;
    }
    cr_perf_env env = {adv_cat, adv_prices, NULL};
    cr_advice a;
    memset(&a, 0, sizeof a);
    int rc = cr_perf_advise(&env, &w, objective, (int)gpus, &a);
    pthread_mutex_unlock(&adv_mu);
    if (rc == 0) {
        /* What the caller's own jobs measured (ctl_learn.c): its tenant only. */
        ctl_learn_advise(c, p->tenant, &w, &a);
    }
    if (rc != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, NULL, "the model refused this workload");
        return;
    }
    json_t *ranked = json_array(), *refused = json_array();
    for (size_t i = 0; i < a.ranked_count && i < (size_t)top; i++) {
        const cr_estimate *e = &a.ranked[i];
        json_array_append_new(ranked, json_pack("{s:I,s:s,s:i,s:i,s:s,s:o,s:o,s:o,s:o,s:s}", "rank",
                                                (json_int_t)(i + 1), "gpu", e->gpu->name, "gpus",
                                                e->gpu_count, "nodes", e->nodes, "plan", e->plan,
                                                "time_s", num((double)e->time_ns / 1e9),
                                                "gpu_hours", num(e->gpu_hours), "cost_usd",
                                                num(e->cost_usd), "energy_kwh",
                                                num(e->energy_j / 3.6e6), "reason", e->reason));
    }
    for (size_t i = 0; i < a.refused_count; i++) {
        json_array_append_new(refused, json_pack("{s:s,s:s}", "gpu", a.refused[i].gpu->name,
                                                 "reason", a.refused[i].reason));
    }
    json_t *out = json_pack("{s:s,s:o,s:o}", "objective", cr_objective_name(a.objective), "ranked",
                            ranked, "refused", refused);
    cr_advice_fini(&a);
    ctl_reply_json(req, 200, out);
}
