/*
 * gw_ctl.c - the gateway as a client of the controller (docs/api.md,
 * "Services"): one thread per service long-polls
 * GET /v1/services/{name}/endpoints?version=V&wait=30 and posts each new
 * endpoint set to the loop; a discovery thread lists GET /v1/services when
 * no service was named (every 3 s); a reporter posts
 * POST /v1/services/{name}/metrics {"in_flight","rps","p95_ms"} every
 * report interval, and at once when a request is held at zero replicas (the
 * autoscaler's activation signal).
 *
 * src/client (plain HTTP, or https:// through libcurl loaded on demand)
 * and jansson, blocking, off the proxy path. Each thread has its own
 * client; its cancel hook ends a long-poll when the gateway stops.
 */
#include "gw_int.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_client.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define WATCH_WAIT_S 30

typedef struct watch {
    gw *g;                  /* the gateway */
    char name[GW_NAME_MAX]; /* service watched */
    pthread_t th;           /* its thread */
} watch;

typedef struct ctl {
    watch **watches;    /* one per service; owned */
    size_t count;       /* entries */
    size_t cap;         /* allocated */
    pthread_t discover; /* discovery thread (no named services) */
    bool discovering;   /* started */
    pthread_t reporter; /* reporter thread */
    pthread_t keys;     /* API keys long-poll */
    bool keys_started;  /* started */
} ctl;

static bool stopped(gw *g)
{
    return __atomic_load_n(&g->stop, __ATOMIC_ACQUIRE);
}

/* The clients' cancel hook. */
static bool cancel_hook(void *ud)
{
    return stopped(ud);
}

/* This thread's client of the controller (NULL when the URL is not http://
 * or https://: every call then fails as unreachable). */
static cr_client *new_client(gw *g)
{
    cr_client_opts o = {.server = g->conf->controller,
                        .token = g->conf->token,
                        .ca_file = g->conf->ca_file,
                        .connect_timeout_ns = 5 * CR_NS_PER_SEC};
    cr_client *cl = NULL;
    if (cr_client_new(&o, &cl) < 0) {
        cr_warn("gateway: --controller %s: not an http:// or https:// URL", g->conf->controller);
        return NULL;
    }
    cr_client_set_cancel(cl, cancel_hook, g);
    return cl;
}

/* One request (json: the body or NULL); *status and body on success,
 * CR_EIO when no whole answer came (or one over 4 MiB). */
static int call(cr_client *cl, const char *method, const char *path, const json_t *json,
                long timeout_s, long *status, cr_buf *body)
{
    cr_buf_reset(body);
    if (!cl) {
        return CR_EIO;
    }
    cr_client_res res;
    cr_client_res_init(&res);
    int rc = cr_client_request(cl, method, path, json, (int64_t)timeout_s * CR_NS_PER_SEC, &res);
    if (res.status == 0 || rc == CR_EIO || rc == CR_ETOOBIG || res.raw_len > 4 * 1024 * 1024) {
        rc = CR_EIO;
    } else {
        *status = res.status;
        if (res.raw) {
            cr_buf_append(body, res.raw, res.raw_len);
        }
        rc = 0;
    }
    cr_client_res_fini(&res);
    return rc;
}

/* Sleep up to ns, waking early when the gateway stops. */
static void nap(gw *g, int64_t ns)
{
    pthread_mutex_lock(&g->mu);
    if (!g->stop) {
        cr_cond_wait_mono(&g->cond, &g->mu, cr_mono_ns() + ns);
    }
    pthread_mutex_unlock(&g->mu);
}

/* A host name or address: 1..63 of [A-Za-z0-9.:-]. */
static bool valid_host(const char *h)
{
    size_t n = strlen(h);
    if (n == 0 || n >= GW_NAME_MAX) {
        return false;
    }
    return strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.:-") == n;
}

/* {"version":N,"endpoints":[{"addr","port","ready"}]} into a message. */
int gw_ctl_parse_endpoints(const char *name, const char *text, int64_t *version, gw_msg **out)
{
    json_error_t err;
    json_t *root = json_loads(text, 0, &err);
    if (!root) {
        cr_warn("gateway: endpoints of %s: %d:%d: %s", name, err.line, err.column, err.text);
        return CR_EPARSE;
    }
    int rc = CR_EPARSE;
    json_t *v = json_object_get(root, "version");
    json_t *eps = json_object_get(root, "endpoints");
    if (!json_is_integer(v) || !json_is_array(eps)) {
        cr_warn("gateway: endpoints of %s: want {\"version\":N,\"endpoints\":[...]}", name);
        goto out;
    }
    gw_msg *m = cr_calloc(1, sizeof *m);
    m->kind = GW_MSG_ENDPOINTS;
    snprintf(m->service, sizeof m->service, "%s", name);
    m->endpoints = cr_calloc(json_array_size(eps) + 1, sizeof *m->endpoints);
    size_t i;
    json_t *e;
    json_array_foreach(eps, i, e)
    {
        json_t *addr = json_object_get(e, "addr");
        json_t *port = json_object_get(e, "port");
        json_t *ready = json_object_get(e, "ready");
        if (!json_is_string(addr) || !valid_host(json_string_value(addr)) ||
            !json_is_integer(port) || json_integer_value(port) < 1 ||
            json_integer_value(port) > 65535) {
            cr_warn("gateway: endpoints of %s: endpoints[%zu]: want addr and port", name, i);
            continue;
        }
        gw_endpoint *ep = &m->endpoints[m->endpoint_count++];
        snprintf(ep->host, sizeof ep->host, "%s", json_string_value(addr));
        ep->port = (uint16_t)json_integer_value(port);
        ep->ready = ready ? json_is_true(ready) : true;
        const char *site = json_string_value(json_object_get(e, "site"));
        if (site && strlen(site) < sizeof ep->site && valid_host(site)) {
            snprintf(ep->site, sizeof ep->site, "%s", site); /* (else: unknown, no preference) */
        }
    }
    *version = json_integer_value(v);
    *out = m;
    rc = 0;
out:
    json_decref(root);
    return rc;
}

/* What the watcher learnt of its service: the readiness path, owner and
 * model names (GET /v1/services/{name}). */
typedef struct described {
    char ready_path[256]; /* "" when the controller does not say */
    char tenant[GW_NAME_MAX];
    char **models; /* owned */
    size_t model_count;
    char **adapters; /* owned */
    size_t adapter_count;
    double slo_ms[2]; /* target.ttft_ms, target.tpot_ms (0 none) */
} described;

/* The strings of a JSON array that are names (1..GW_MODEL_MAX-1 bytes), at
 * most max of them, into a new vector (free with gw_strv_free). */
static char **names_of(const json_t *arr, size_t max, size_t *n)
{
    size_t cap = json_array_size(arr) < max ? json_array_size(arr) : max;
    char **v = cr_calloc(cap + 1, sizeof *v);
    *n = 0;
    for (size_t i = 0; i < json_array_size(arr) && *n < cap; i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        if (s && s[0] && strlen(s) < GW_MODEL_MAX) {
            v[(*n)++] = cr_strdup(s);
        }
    }
    return v;
}

static void copy_described(const described *d, gw_msg *m)
{
    snprintf(m->ready_path, sizeof m->ready_path, "%s", d->ready_path);
    snprintf(m->tenant, sizeof m->tenant, "%s", d->tenant);
    m->models = cr_calloc(d->model_count + 1, sizeof *m->models);
    for (size_t i = 0; i < d->model_count; i++) {
        m->models[i] = cr_strdup(d->models[i]);
    }
    m->model_count = d->model_count;
    m->adapters = cr_calloc(d->adapter_count + 1, sizeof *m->adapters);
    for (size_t i = 0; i < d->adapter_count; i++) {
        m->adapters[i] = cr_strdup(d->adapters[i]);
    }
    m->adapter_count = d->adapter_count;
    m->slo_ms[0] = d->slo_ms[0];
    m->slo_ms[1] = d->slo_ms[1];
    m->described = true;
}

static bool fetch_ready_path(cr_client *cl, const char *name, described *d, cr_buf *body)
{
    char *out = d->ready_path;
    size_t len = sizeof d->ready_path;
    char path[256];
    snprintf(path, sizeof path, "/v1/services/%s", name);
    long status = 0;
    if (call(cl, "GET", path, NULL, 10, &status, body) != 0 || status != 200) {
        return false;
    }
    json_t *root = json_loads(cr_buf_str(body), 0, NULL);
    json_t *rp = json_object_get(root, "ready_path");
    if (json_is_string(rp) && json_string_value(rp)[0] == '/' &&
        strlen(json_string_value(rp)) < len && !strpbrk(json_string_value(rp), " \r\n")) {
        snprintf(out, len, "%s", json_string_value(rp));
    }
    const char *tn = json_string_value(json_object_get(root, "tenant"));
    snprintf(d->tenant, sizeof d->tenant, "%s", tn && strlen(tn) < sizeof d->tenant ? tn : "");
    json_t *models = json_object_get(root, "models");
    gw_strv_free(d->models, d->model_count);
    d->models = cr_calloc(json_array_size(models) + 1, sizeof *d->models);
    d->model_count = 0;
    size_t i;
    json_t *mv;
    json_array_foreach(models, i, mv)
    {
        const char *s = json_string_value(mv);
        if (s && s[0] && strlen(s) < GW_MODEL_MAX) {
            d->models[d->model_count++] = cr_strdup(s);
        }
    }
    gw_strv_free(d->adapters, d->adapter_count);
    d->adapters = names_of(json_object_get(root, "adapters"), GW_ADAPTER_MAX, &d->adapter_count);
    json_t *target = json_object_get(root, "target");
    for (int k = 0; k < 2; k++) {
        double ms = json_number_value(json_object_get(target, k == 0 ? "ttft_ms" : "tpot_ms"));
        d->slo_ms[k] = ms > 0 && ms <= 1e7 ? ms : 0;
    }
    json_decref(root);
    return true;
}

static void *watch_main(void *arg)
{
    watch *w = arg;
    gw *g = w->g;
    cr_client *cl = new_client(g);
    cr_buf body;
    cr_buf_init(&body);
    int64_t version = -1;
    int64_t backoff = 200 * CR_NS_PER_MS;
    bool warned = false;
    described desc;
    memset(&desc, 0, sizeof desc);
    bool known = false;
    while (!stopped(g)) {
        if (!known) {
            known = fetch_ready_path(cl, w->name, &desc, &body);
        }
        char path[256];
        snprintf(path, sizeof path, "/v1/services/%s/endpoints?version=%lld&wait=%d", w->name,
                 (long long)version, WATCH_WAIT_S);
        long status = 0;
        int rc = call(cl, "GET", path, NULL, WATCH_WAIT_S + 15, &status, &body);
        if (stopped(g)) {
            break;
        }
        if (rc == 0 && status == 200) {
            gw_msg *m = NULL;
            int64_t nv = version;
            if (gw_ctl_parse_endpoints(w->name, cr_buf_str(&body), &nv, &m) == 0) {
                if (known) {
                    copy_described(&desc, m);
                }
                if (nv != version) {
                    gw_post(g, m);
                } else {
                    gw_msg_free(m);
                }
                version = nv;
                backoff = 200 * CR_NS_PER_MS;
                warned = false;
                continue;
            }
        } else if (rc == 0 && status == 404) {
            /* The service is gone: drain its replicas. */
            gw_msg *m = cr_calloc(1, sizeof *m);
            m->kind = GW_MSG_ENDPOINTS;
            snprintf(m->service, sizeof m->service, "%s", w->name);
            if (version != -2) {
                gw_post(g, m);
            } else {
                free(m);
            }
            version = -2;
        }
        if (!warned) {
            cr_warn("gateway: endpoints of %s from %s: %s (status %ld); retrying", w->name,
                    g->conf->controller, rc == 0 ? "unexpected answer" : "unreachable", status);
            warned = true;
        }
        int64_t due = cr_mono_ns() + backoff;
        for (int64_t now = cr_mono_ns(); now < due && !stopped(g); now = cr_mono_ns()) {
            nap(g, due - now);
        }
        backoff = backoff * 2 > 5 * CR_NS_PER_SEC ? 5 * CR_NS_PER_SEC : backoff * 2;
    }
    gw_strv_free(desc.models, desc.model_count);
    gw_strv_free(desc.adapters, desc.adapter_count);
    cr_buf_fini(&body);
    cr_client_free(cl);
    return NULL;
}

/* The API keys: long-polls GET /v1/keys/published and posts each new list. */
static void *keys_main(void *arg)
{
    gw *g = arg;
    cr_client *cl = new_client(g);
    cr_buf body;
    cr_buf_init(&body);
    int64_t version = -1;
    int64_t backoff = 200 * CR_NS_PER_MS;
    bool warned = false;
    while (!stopped(g)) {
        char path[128];
        snprintf(path, sizeof path, "/v1/keys/published?version=%lld&wait=%d", (long long)version,
                 WATCH_WAIT_S);
        long status = 0;
        int rc = call(cl, "GET", path, NULL, WATCH_WAIT_S + 15, &status, &body);
        if (stopped(g)) {
            break;
        }
        gw_msg *m = NULL;
        int64_t nv = version;
        if (rc == 0 && status == 200 && gw_ctl_parse_keys(cr_buf_str(&body), &nv, &m) == 0) {
            if (nv != version) {
                gw_post(g, m);
            } else {
                gw_msg_free(m);
            }
            version = nv;
            backoff = 200 * CR_NS_PER_MS;
            warned = false;
            continue;
        }
        if (!warned) {
            cr_warn("gateway: API keys from %s: %s (status %ld); retrying", g->conf->controller,
                    rc == 0 ? "unexpected answer" : "unreachable", status);
            warned = true;
        }
        int64_t due = cr_mono_ns() + backoff;
        for (int64_t now = cr_mono_ns(); now < due && !stopped(g); now = cr_mono_ns()) {
            nap(g, due - now);
        }
        backoff = backoff * 2 > 5 * CR_NS_PER_SEC ? 5 * CR_NS_PER_SEC : backoff * 2;
    }
    cr_buf_fini(&body);
    cr_client_free(cl);
    return NULL;
}

/* Post the key usage the loop handed over (deltas); kept for the next try
 * when the controller does not take it. */
static void report_usage(gw *g, cr_client *cl, cr_buf *body)
{
    pthread_mutex_lock(&g->mu);
    gw_key_usage *u = g->usage;
    size_t n = g->usage_count;
    g->usage = NULL;
    g->usage_count = 0;
    pthread_mutex_unlock(&g->mu);
    if (!n) {
        return;
    }
    json_t *items = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(items,
                              json_pack("{s:I,s:I,s:I,s:I}", "id", (json_int_t)u[i].id, "requests",
                                        (json_int_t)u[i].requests, "prompt_tokens",
                                        (json_int_t)u[i].prompt_tokens, "completion_tokens",
                                        (json_int_t)u[i].completion_tokens));
    }
    json_t *json = json_pack("{s:o}", "items", items);
    long status = 0;
    int rc = call(cl, "POST", "/v1/keys/usage", json, 5, &status, body);
    json_decref(json);
    if (rc == 0 && status / 100 == 2) {
        free(u);
        return;
    }
    cr_debug("gateway: key usage report: status %ld", status);
    pthread_mutex_lock(&g->mu);
    for (size_t i = 0; i < g->usage_count; i++) {
        for (size_t j = 0; j < n; j++) {
            if (u[j].id == g->usage[i].id) {
                g->usage[i].requests += u[j].requests;
                g->usage[i].prompt_tokens += u[j].prompt_tokens;
                g->usage[i].completion_tokens += u[j].completion_tokens;
                u[j].id = 0;
            }
        }
    }
    for (size_t j = 0; j < n; j++) {
        if (u[j].id) {
            g->usage = cr_reallocarray(g->usage, g->usage_count + 1, sizeof *g->usage);
            g->usage[g->usage_count++] = u[j];
        }
    }
    pthread_mutex_unlock(&g->mu);
    free(u);
}

static void watch_start(gw *g, ctl *c, const char *name)
{
    for (size_t i = 0; i < c->count; i++) {
        if (strcmp(c->watches[i]->name, name) == 0) {
            return;
        }
    }
    watch *w = cr_calloc(1, sizeof *w);
    w->g = g;
    snprintf(w->name, sizeof w->name, "%s", name);
    if (pthread_create(&w->th, NULL, watch_main, w) != 0) {
        cr_error("gateway: cannot start the watcher of %s", name);
        free(w);
        return;
    }
    pthread_mutex_lock(&g->mu);
    CR_GROW(c->watches, c->count, c->cap);
    c->watches[c->count++] = w;
    pthread_mutex_unlock(&g->mu);
}

static void *discover_main(void *arg)
{
    gw *g = arg;
    ctl *c = g->ctl;
    cr_client *cl = new_client(g);
    cr_buf body;
    cr_buf_init(&body);
    while (!stopped(g)) {
        long status = 0;
        if (call(cl, "GET", "/v1/services", NULL, 10, &status, &body) == 0 && status == 200) {
            json_t *root = json_loads(cr_buf_str(&body), 0, NULL);
            json_t *items = json_object_get(root, "items");
            size_t i;
            json_t *it;
            json_array_foreach(items, i, it)
            {
                /* "ref": how this token names it on routes (NAME@TENANT
                 * where another tenant's service has the name) */
                json_t *name = json_object_get(it, "ref");
                if (!json_is_string(name)) {
                    name = json_object_get(it, "name"); /* an older controller */
                }
                if (json_is_string(name) && strlen(json_string_value(name)) < GW_NAME_MAX) {
                    watch_start(g, c, json_string_value(name));
                }
            }
            json_decref(root);
        }
        /* nap() also wakes on the loop's broadcasts: sleep out the period. */
        int64_t due = cr_mono_ns() + 3 * CR_NS_PER_SEC;
        for (int64_t now = cr_mono_ns(); now < due && !stopped(g); now = cr_mono_ns()) {
            nap(g, due - now);
        }
    }
    cr_buf_fini(&body);
    cr_client_free(cl);
    return NULL;
}

static bool watched(gw *g, const char *name)
{
    ctl *c = g->ctl;
    pthread_mutex_lock(&g->mu);
    bool found = false;
    for (size_t i = 0; i < c->count && !found; i++) {
        found = strcmp(c->watches[i]->name, name) == 0;
    }
    pthread_mutex_unlock(&g->mu);
    return found;
}

static void *report_main(void *arg)
{
    gw *g = arg;
    cr_client *cl = new_client(g);
    cr_buf body;
    cr_buf_init(&body);
    int64_t last = 0;
    while (!stopped(g)) {
        pthread_mutex_lock(&g->mu);
        size_t n = g->stat_count;
        gw_stat *st = n ? cr_reallocarray(NULL, n, sizeof *st) : NULL;
        bool activation = false;
        for (size_t i = 0; i < n; i++) {
            st[i] = g->stats[i];
            activation |= st[i].activation;
            g->stats[i].activation = false;
        }
        pthread_mutex_unlock(&g->mu);
        int64_t now = cr_mono_ns();
        if (activation || now - last >= g->conf->report_interval_ns) {
            last = now;
            for (size_t i = 0; i < n; i++) {
                if (!watched(g, st[i].name)) {
                    continue; /* a static service: not the controller's */
                }
                char path[128];
                snprintf(path, sizeof path, "/v1/services/%s/metrics", st[i].name);
                /* rounded to the microsecond, as the text form had it */
                json_t *json = json_pack(
                    "{s:i,s:f,s:f,s:i}", "in_flight",
                    (int)(st[i].in_flight > 0 ? st[i].in_flight : (st[i].activation ? 1 : 0)),
                    "rps", round(st[i].rps * 1000) / 1000, "p95_ms",
                    st[i].p95_ms >= 0 ? round(st[i].p95_ms * 1000) / 1000 : -1.0, "metrics_port",
                    (int)g->bound_port); /* for Prometheus discovery */
                /* the SLO signals only when streamed completions gave some */
                if (st[i].ttft_p95_ms >= 0) {
                    json_object_set_new(json, "ttft_p95_ms",
                                        json_real(round(st[i].ttft_p95_ms * 1000) / 1000));
                }
                if (st[i].tpot_p95_ms >= 0) {
                    json_object_set_new(json, "tpot_p95_ms",
                                        json_real(round(st[i].tpot_p95_ms * 1000) / 1000));
                }
                long status = 0;
                int rc = call(cl, "POST", path, json, 5, &status, &body);
                json_decref(json);
                if (rc != 0 || status / 100 != 2) {
                    cr_debug("gateway: metrics report of %s: status %ld", st[i].name, status);
                }
            }
            report_usage(g, cl, &body);
        }
        free(st);
        nap(g, g->conf->report_interval_ns);
    }
    cr_buf_fini(&body);
    cr_client_free(cl);
    return NULL;
}

int gw_ctl_start(gw *g)
{
    if (!g->conf->controller) {
        return 0;
    }
    ctl *c = cr_calloc(1, sizeof *c);
    g->ctl = c;
    for (size_t i = 0; i < g->conf->service_count; i++) {
        if (!g->conf->services[i].static_eps) {
            watch_start(g, c, g->conf->services[i].name);
        }
    }
    if (g->conf->service_count == 0) {
        if (pthread_create(&c->discover, NULL, discover_main, g) == 0) {
            c->discovering = true;
        }
    }
    if (pthread_create(&c->reporter, NULL, report_main, g) != 0) {
        return CR_EIO;
    }
    if (g->require_keys && pthread_create(&c->keys, NULL, keys_main, g) == 0) {
        c->keys_started = true;
    }
    cr_info("gateway: following %s", g->conf->controller);
    return 0;
}

void gw_ctl_stop(gw *g)
{
    ctl *c = g->ctl;
    if (!c) {
        return;
    }
    pthread_join(c->reporter, NULL);
    if (c->keys_started) {
        pthread_join(c->keys, NULL);
    }
    if (c->discovering) {
        pthread_join(c->discover, NULL);
    }
    /* Watchers started by discovery are only added by it, which has ended. */
    for (size_t i = 0; i < c->count; i++) {
        pthread_join(c->watches[i]->th, NULL);
        free(c->watches[i]);
    }
    free(c->watches);
    free(c);
    g->ctl = NULL;
}
