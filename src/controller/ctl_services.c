/*
 * ctl_services.c - inference services: a service is a spec for replicas
 * (long-running jobs, always restarted) plus a replica count that an admin
 * sets (scale) or the autoscaler moves (src/autoscale, fed by the gateways'
 * load reports). Its endpoints (running replicas: node address and the
 * port given to the replica in PORT) are long-polled by the gateways with a
 * version, like the agents' desired state.
 *
 * Scale-down drains before it stops: a replica chosen to go leaves the
 * endpoints first, and is cancelled (SIGTERM, grace, SIGKILL) only after
 * drain_s, once the gateways have stopped sending it requests.
 *
 * Reconciliation runs on the scheduler thread's timer (ctl_services_tick)
 * and after every change; all state is under ctl->mu.
 *
 * Names are unique per tenant: two tenants may each have a service "llm",
 * and a create answers 409 only for the creator's own tenant (another
 * tenant's service is neither revealed nor squatted). A route names one as
 * NAME, within the token's tenant, or NAME@TENANT. An admin's plain NAME
 * (a gateway with an admin token) is the oldest service of that name, so
 * a later tenant's service of the same name never takes an existing
 * route; the others are NAME@TENANT ("ref" in the list says which).
 */
#include "ctl_int.h"
#include "ctl_data.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_parse.h"
#include "cr_time.h"

#ifdef CTL_HAVE_AUTOSCALE
#include "cr_autoscale.h"
#endif

#include <math.h>
#include <stdio.h>
#include <string.h>

#define DRAIN_NS   (5 * CR_NS_PER_SEC)
#define DECIDE_NS  (2 * CR_NS_PER_SEC)
#define MAX_EVENTS 100
#define PORT_BASE  30000
#define PORT_SPAN  30000
#define SPREAD_NS  (10 * CR_NS_PER_SEC) /* a spread replica not placed by then goes anywhere */
/* Rolling update: a replica of the new spec stands for an old one once it
 * has been serving (running, its port reported) this long, time for the
 * gateways to see and probe it; one replica above the wanted count at a
 * time (the surge). */
#define ROLL_READY_NS (2 * CR_NS_PER_SEC)
#define ROLL_SURGE    1

typedef struct replica {
    int64_t job;      /* replica job id */
    int64_t drain_ns; /* monotonic time it left the endpoints; 0 = serving */
    int64_t ready_ns; /* monotonic time it was first seen serving; 0 = not yet */
    int32_t gen;      /* the service generation (spec) it was made from */
} replica;

struct ctl_service {
    char name[CTL_NAME_MAX];
    char tenant[CTL_NAME_MAX];
    char store_key[2 * CTL_NAME_MAX]; /* its row: "tenant/name" (a plain name: from before) */
    int64_t created_ns;               /* wall time of the create; 0 from before it was kept */
    json_t *spec;                     /* owned: the request as validated (normalised) */
    json_t *job_req;                  /* owned: the job request each replica is made from */
    int32_t desired;                  /* replicas wanted now */
    int32_t min, max;
    double target_concurrency, target_p95_ms;
    double target_ttft_ms, target_tpot_ms; /* serving SLOs: p95 TTFT and TPOT (0: none) */
    char ready_path[128];
    replica *reps; /* owned: live replica jobs */
    size_t nreps, capreps;
    uint64_t ep_version;             /* endpoints version */
    uint64_t ep_hash;                /* hash of the endpoint list behind ep_version */
    ctl_poll *polls;                 /* gateways waiting for a new version */
    json_t *events;                  /* owned: the last MAX_EVENTS {time, what, why} */
    double in_flight, rps, p95_ms;   /* last load report (summed per tick) */
    double ttft_p95_ms, tpot_p95_ms; /* its SLO signals (-1: none) */
    int64_t report_ns;               /* wall time of the last report */
    int64_t last_decide_mono;
    int64_t spread_off_mono; /* spreading gave up until then (a replica found no other node) */
    int32_t gen;             /* generation of the spec: +1 at each update (rolling) */
    bool rolling;            /* replicas of an older generation still serve */
    bool deleted;            /* DELETE: draining to zero, then gone */
    bool creating;           /* POST: its row is being stored; not served or reconciled yet */
    void *as;                /* cr_autoscaler, or NULL */
};

static void svc_event(ctl_service *s, const char *what, const char *why)
{
    char t[64];
    json_array_append_new(s->events,
                          json_pack("{s:s,s:s,s:s}", "time", ctl_time_str(cr_now_ns(), t, sizeof t),
                                    "what", what, "why", why));
    while (json_array_size(s->events) > MAX_EVENTS) {
        json_array_remove(s->events, 0);
    }
    cr_info("service=%s %s: %s", s->name, what, why);
}

size_t ctl_services_hist(ctl *c, ctl_svc_hist **out)
{
    int64_t now = cr_now_ns(); /* report_ns's clock */
    ctl_svc_hist *a = cr_calloc(c->nservices + 1, sizeof *a);
    size_t n = 0;
    for (size_t i = 0; i < c->nservices; i++) {
        const ctl_service *s = c->services[i];
        if (s->creating || s->deleted) {
            continue;
        }
        ctl_svc_hist *h = &a[n++];
        memcpy(h->name, s->name, sizeof h->name);
        memcpy(h->tenant, s->tenant, sizeof h->tenant);
        h->desired = s->desired;
        for (size_t k = 0; k < s->nreps; k++) {
            const ctl_job *j = ctl_job_get(c, s->reps[k].job);
            h->ready += j && j->state == JS_RUNNING && !s->reps[k].drain_ns && j->port;
        }
        h->has_load = s->report_ns > 0 && now - s->report_ns < CR_NS_PER_MIN;
        h->in_flight = s->in_flight;
        h->rps = s->rps;
    }
    *out = a;
    return n;
}

static ctl_service *svc_find(ctl *c, const char *tenant, const char *name)
{
    for (size_t i = 0; i < c->nservices; i++) {
        if (strcmp(c->services[i]->name, name) == 0 &&
            strcmp(c->services[i]->tenant, tenant) == 0) {
            return c->services[i];
        }
    }
    return NULL;
}

/* True when a was created before b (ties: by tenant name). */
static bool svc_older(const ctl_service *a, const ctl_service *b)
{
    return a->created_ns != b->created_ns ? a->created_ns < b->created_ns
                                          : strcmp(a->tenant, b->tenant) < 0;
}

/* The service a route's NAME or NAME@TENANT means for p (see the top);
 * NULL when none. Visibility is the caller's check. */
static ctl_service *svc_resolve(ctl *c, const cr_principal *p, const char *ref)
{
    const char *at = strchr(ref, '@');
    char name[CTL_NAME_MAX];
    if (at) {
        if ((size_t)(at - ref) >= sizeof name) {
            return NULL;
        }
        snprintf(name, sizeof name, "%.*s", (int)(at - ref), ref);
        return svc_find(c, at + 1, name);
    }
    if (p->role != CR_ROLE_ADMIN) {
        return svc_find(c, p->tenant, ref);
    }
    ctl_service *best = NULL;
    for (int pass = 0; pass < 2 && !best; pass++) {
        for (size_t i = 0; i < c->nservices; i++) {
            ctl_service *s = c->services[i];
            bool live = !s->deleted && !s->creating;
            if (strcmp(s->name, ref) == 0 && (live || pass == 1) && (!best || svc_older(s, best))) {
                best = s;
            }
        }
    }
    return best;
}

/* How p names s on a route: NAME when that resolves to s, else NAME@TENANT. */
static void svc_ref(ctl *c, const cr_principal *p, ctl_service *s, char *out, size_t len)
{
    if (svc_resolve(c, p, s->name) == s) {
        snprintf(out, len, "%s", s->name);
    } else {
        snprintf(out, len, "%s@%s", s->name, s->tenant);
    }
}

static void svc_free(ctl_service *s)
{
    if (!s) {
        return;
    }
    json_decref(s->spec);
    json_decref(s->job_req);
    json_decref(s->events);
    free(s->reps);
#ifdef CTL_HAVE_AUTOSCALE
    cr_autoscaler_free(s->as);
#endif
    free(s);
}

void ctl_services_free(ctl *c)
{
    for (size_t i = 0; i < c->nservices; i++) {
        svc_free(c->services[i]);
    }
    free(c->services);
    c->services = NULL;
    c->nservices = 0;
}

static int port_of(int64_t job)
{
    return PORT_BASE + (int)(job % PORT_SPAN);
}

/* Only a service with a target is autoscaled; without one, `scale` sets
 * the count by hand. */
#ifdef CTL_HAVE_AUTOSCALE
/* The latency the autoscaler tracks for s: the report's p95, or with
 * serving SLOs the p95 TTFT, and the p95 TPOT scaled to the same target
 * (tpot x ttft_target / tpot_target) where that is worse; -1 unknown. */
static double slo_signal(const ctl_service *s, double p95)
{
    if (!(s->target_ttft_ms > 0 || s->target_tpot_ms > 0)) {
        return p95;
    }
    double base = s->target_ttft_ms > 0 ? s->target_ttft_ms : s->target_tpot_ms;
    double v = -1;
    if (s->target_ttft_ms > 0 && s->ttft_p95_ms >= 0) {
        v = s->ttft_p95_ms;
    }
    if (s->target_tpot_ms > 0 && s->tpot_p95_ms >= 0) {
        double t = s->tpot_p95_ms * base / s->target_tpot_ms;
        v = t > v ? t : v;
    }
    return v;
}
#endif

static void autoscaler_setup(ctl_service *s)
{
#ifdef CTL_HAVE_AUTOSCALE
    if (!json_object_get(s->spec, "target")) {
        return;
    }
    cr_as_config cfg;
    cr_as_config_default(&cfg);
    cfg.min_replicas = s->min;
    cfg.max_replicas = s->max;
    if (s->target_ttft_ms > 0 || s->target_tpot_ms > 0) {
        /* Serving SLOs: the p95 TTFT tracked against its target; with a
         * TPOT target too, the worse of the two (TPOT scaled to the TTFT
         * target: slo_signal). */
        cfg.target_p95_ms = s->target_ttft_ms > 0 ? s->target_ttft_ms : s->target_tpot_ms;
        snprintf(cfg.signal, sizeof cfg.signal, "%s",
                 s->target_ttft_ms > 0 ? (s->target_tpot_ms > 0 ? "TTFT/TPOT p95" : "TTFT p95")
                                       : "TPOT p95");
    } else if (s->target_p95_ms > 0) {
        cfg.target_p95_ms = s->target_p95_ms;
    } else {
        cfg.target_concurrency = s->target_concurrency > 0 ? s->target_concurrency : 1;
    }
    cfg.scale_to_zero = s->min == 0;
    if (s->as) {
        cr_autoscaler_configure(s->as, &cfg);
    } else {
        s->as = cr_autoscaler_new(&cfg);
    }
#endif
}

/* ------------------------------------------------------------------------ */
/* Validation                                                               */

#define SVC_BYTES_MAX (64 << 20) /* max_replicas x the replica spec's size */

static const char *const svc_members[] = {
    "name",
    "tenant",
    "command",
    "gpus",
    "gpu_type",
    "mig_profile",
    "gpu_mem_gb",
    "env",
    "workdir",
    "model",
    "priority",
    "min_replicas",
    "max_replicas",
    "replicas",
    "target",
    "ready_path",
    "gpu_milli",
    "gpu_mem_bytes",
    "image",
    "image_archive",
    "mounts",
    "entrypoint",
    "models",
    "adapters",
    "pack",
    "model_weights",
    /* stored only: model_weights resolved at create (ctl_data.c); refused in a request */
    "model_weights_resolved",
    NULL,
};

/* Validate a create body into a new service (not yet registered). */
static int svc_parse(const json_t *v, ctl_service **out, cr_json_err *err)
{
    int rc;
    const char *name = "", *tenant = "", *ready = "/health";
    int64_t min = 1, max = 1, replicas = -1;
    json_t *target = NULL;
    double conc = 0, p95 = 0, ttft = 0, tpot = 0;
    static const char *const target_members[] = {"concurrency", "p95_ms", "ttft_ms", "tpot_ms",
                                                 NULL};
    if ((rc = cr_json_only(v, "", svc_members, err)) ||
        (rc = cr_json_str(v, "", "name", true, CTL_NAME_MAX - 1, &name, err)) ||
        (rc = cr_json_str(v, "", "tenant", false, CTL_NAME_MAX - 1, &tenant, err)) ||
        (rc = cr_json_int(v, "", "min_replicas", false, 0, 1000, &min, err)) ||
        (rc = cr_json_int(v, "", "max_replicas", false, 1, 1000, &max, err)) ||
        (rc = cr_json_int(v, "", "replicas", false, 0, 1000, &replicas, err)) ||
        (rc = cr_json_obj(v, "", "target", false, &target, err)) ||
        (rc = cr_json_str(v, "", "ready_path", false, 127, &ready, err))) {
        return rc;
    }
    if ((rc = ctl_name_check(name, "name", err)) != 0) {
        return rc;
    }
    bool pack = false;
    if ((rc = cr_json_bool(v, "", "pack", false, &pack, err)) != 0) {
        return rc;
    }
    /* The model names the gateway routes to it (OpenAI "model"), aliases
     * included: names of 1..127 printable bytes without spaces or quotes. */
    json_t *models = json_object_get(v, "models");
    if (models && (!json_is_array(models) || json_array_size(models) > 64)) {
        return cr_json_fail(err, CR_EINVAL, "models",
                            "field 'models': an array of at most 64 model names");
    }
    for (size_t i = 0; models && i < json_array_size(models); i++) {
        const char *mn = json_string_value(json_array_get(models, i));
        size_t ml = mn ? strlen(mn) : 0;
        bool ok = ml > 0 && ml < 128;
        for (size_t j = 0; ok && j < ml; j++) {
            ok = mn[j] > ' ' && mn[j] != 0x7f && mn[j] != '"' && mn[j] != '\\' && mn[j] != ',';
        }
        if (!ok) {
            return cr_json_fail(err, CR_EINVAL, "models",
                                "field 'models[%zu]': a model name of 1..127 printable characters "
                                "without spaces, quotes or commas",
                                i);
        }
    }
    /* LoRA adapters of the base model (models[0]) its replicas hold: the
     * gateway routes a request naming one to them (docs/gateway.md). */
    json_t *adapters = json_object_get(v, "adapters");
    if (adapters && (!json_is_array(adapters) || json_array_size(adapters) > 64)) {
        return cr_json_fail(err, CR_EINVAL, "adapters",
                            "field 'adapters': an array of at most 64 LoRA adapter names");
    }
    if (adapters && json_array_size(adapters) && json_array_size(models) == 0) {
        return cr_json_fail(err, CR_EINVAL, "adapters",
                            "field 'adapters': needs the base model in 'models' (its first name)");
    }
    for (size_t i = 0; adapters && i < json_array_size(adapters); i++) {
        const char *an = json_string_value(json_array_get(adapters, i));
        size_t al = an ? strlen(an) : 0;
        bool ok = al > 0 && al < 128;
        for (size_t j = 0; ok && j < al; j++) {
            ok = an[j] > ' ' && an[j] != 0x7f && an[j] != '"' && an[j] != '\\' && an[j] != ',';
        }
        for (size_t j = 0; ok && j < json_array_size(models); j++) {
            ok = strcmp(an, json_string_value(json_array_get(models, j))) != 0;
        }
        for (size_t j = 0; ok && j < i; j++) {
            ok = strcmp(an, json_string_value(json_array_get(adapters, j))) != 0;
        }
        if (!ok) {
            return cr_json_fail(err, CR_EINVAL, "adapters",
                                "field 'adapters[%zu]': an adapter name of 1..127 printable "
                                "characters without spaces, quotes or commas, not one of 'models' "
                                "and not listed twice",
                                i);
        }
    }
    if (max < min) {
        return cr_json_fail(err, CR_EINVAL, "max_replicas",
                            "field 'max_replicas': must be >= min_replicas (%lld)", (long long)min);
    }
    if (ready[0] != '/') {
        return cr_json_fail(err, CR_EINVAL, "ready_path", "field 'ready_path': must start with /");
    }
    /* It goes into a request line: printable, no space, CR, LF or control. */
    for (const char *q = ready; *q; q++) {
        if (*q <= ' ' || *q == 0x7f) {
            return cr_json_fail(err, CR_EINVAL, "ready_path",
                                "field 'ready_path': a path of printable characters without "
                                "spaces (byte %d at offset %d)",
                                (int)(unsigned char)*q, (int)(q - ready));
        }
    }
    if (target) {
        if ((rc = cr_json_only(target, "target", target_members, err)) ||
            (rc = cr_json_num(target, "target", "concurrency", false, 0.01, 1e6, &conc, err)) ||
            (rc = cr_json_num(target, "target", "p95_ms", false, 0.01, 1e7, &p95, err)) ||
            (rc = cr_json_num(target, "target", "ttft_ms", false, 0.01, 1e7, &ttft, err)) ||
            (rc = cr_json_num(target, "target", "tpot_ms", false, 0.01, 1e7, &tpot, err))) {
            return rc;
        }
        if ((conc > 0) + (p95 > 0) + (ttft > 0 || tpot > 0) != 1) {
            return cr_json_fail(err, CR_EINVAL, "target",
                                "field 'target': give one of concurrency, p95_ms, or the serving "
                                "SLOs ttft_ms and/or tpot_ms");
        }
    }
    if (replicas >= 0 && (replicas < min || replicas > max)) {
        return cr_json_fail(err, CR_EINVAL, "replicas",
                            "field 'replicas': must be within min_replicas..max_replicas");
    }
    /* The replica job: validated by the job rules, so errors name the same fields. */
    json_t *jr = json_object();
    static const char *const pass[] = {"command",       "gpus",      "gpu_type",      "mig_profile",
                                       "gpu_mem_gb",    "env",       "workdir",       "model",
                                       "priority",      "gpu_milli", "gpu_mem_bytes", "image",
                                       "image_archive", "mounts",    "entrypoint",    NULL};
    for (size_t i = 0; pass[i]; i++) {
        json_t *x = json_object_get(v, pass[i]);
        if (x) {
            json_object_set(jr, pass[i], x);
        }
    }
    json_t *mwr = json_object_get(v, "model_weights_resolved");
    if (json_is_object(mwr)) {
        /* staged on the node before each replica starts (docs/data.md) */
        json_object_set_new(jr, "data", json_pack("[O]", mwr));
    }
    const char *mw = NULL;
    if ((rc = cr_json_str(v, "", "model_weights", false, 200, &mw, err)) != 0) {
        json_decref(jr);
        return rc;
    }
    json_object_set_new(jr, "kind", json_string("inference"));
    json_object_set_new(jr, "max_retries", json_integer(100));
    json_object_set_new(jr, "name", json_string(name));
    ctl_job *probe = NULL;
    rc = ctl_job_from_request(jr, &probe, err);
    ctl_job_free(probe);
    if (rc != 0) {
        json_decref(jr);
        return rc;
    }
    /* Each replica is a job stored with the whole spec: bounded as an
     * array submit is (a 1 MiB spec x 1000 replicas would be 1 GB). */
    char *sj = json_dumps(jr, JSON_COMPACT);
    size_t spec_len = sj ? strlen(sj) : 0;
    free(sj);
    if ((uint64_t)spec_len * (uint64_t)max > SVC_BYTES_MAX) {
        json_decref(jr);
        return cr_json_fail(err, CR_ETOOBIG, "max_replicas",
                            "field 'max_replicas': %lld replicas of a %zu-byte job spec are over "
                            "%d MiB in all: fewer replicas or a smaller spec (env)",
                            (long long)max, spec_len, SVC_BYTES_MAX >> 20);
    }
    ctl_service *s = cr_calloc(1, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    snprintf(s->tenant, sizeof s->tenant, "%s", tenant);
    snprintf(s->ready_path, sizeof s->ready_path, "%s", ready);
    s->min = (int32_t)min;
    s->max = (int32_t)max;
    s->desired = replicas >= 0 ? (int32_t)replicas : (int32_t)(min > 0 ? min : 0);
    s->target_concurrency = target ? conc : 1;
    s->target_p95_ms = p95;
    s->target_ttft_ms = ttft;
    s->target_tpot_ms = tpot;
    s->ttft_p95_ms = s->tpot_p95_ms = -1;
    s->job_req = jr;
    s->spec = json_deep_copy(v);
    s->events = json_array();
    s->ep_version = 1;
    *out = s;
    return 0;
}

int ctl_service_validate(const char *body, size_t len, cr_json_err *err)
{
    json_t *v = NULL;
    ctl_service *s = NULL;
    int rc = cr_json_parse_object(body, len, &v, err);
    if (rc == 0) {
        rc = svc_parse(v, &s, err);
    }
    svc_free(s);
    json_decref(v);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* JSON and persistence                                                     */

static json_t *endpoints_json(ctl *c, ctl_service *s)
{
    json_t *eps = json_array();
    for (size_t i = 0; i < s->nreps; i++) {
        ctl_job *j = ctl_job_get(c, s->reps[i].job);
        if (!j || j->state != JS_RUNNING || s->reps[i].drain_ns || j->nplace == 0 || !j->port) {
            continue; /* not (yet) serving; port: once its agent reports the one it gave */
        }
        ctl_node *n = ctl_node_find(c, j->place[0].node);
        if (!n || n->state == NS_LOST) {
            continue;
        }
        json_t *ep = json_pack("{s:s,s:i,s:b,s:I,s:s}", "addr", n->addr, "port", j->port, "ready",
                               1, "job", (json_int_t)j->id, "node", n->name);
        /* its node's site (an admin's label over the agent's): a gateway
         * with --site prefers its own (docs/gateway.md "Edge sites") */
        const char *site = json_string_value(json_object_get(ctl_node_labels(c, n->name), "site"));
        if (!site) {
            site = json_string_value(json_object_get(n->labels, "site"));
        }
        if (site) {
            json_object_set_new(ep, "site", json_string(site));
        }
        json_array_append_new(eps, ep);
    }
    return eps;
}

static json_t *svc_json(ctl *c, ctl_service *s, bool detail)
{
    json_t *v = json_deep_copy(s->spec);
    json_object_set_new(v, "tenant", json_string(s->tenant));
    json_object_set_new(v, "min_replicas", json_integer(s->min));
    json_object_set_new(v, "max_replicas", json_integer(s->max));
    json_object_set_new(v, "ready_path", json_string(s->ready_path));
    json_object_set_new(v, "desired_replicas", json_integer(s->desired));
    json_object_set_new(v, "generation", json_integer(s->gen));
    json_object_set_new(v, "rolling", json_boolean(s->rolling));
    json_object_del(v, "replicas");
    json_t *reps = json_array();
    int ready = 0;
    for (size_t i = 0; i < s->nreps; i++) {
        ctl_job *j = ctl_job_get(c, s->reps[i].job);
        if (!j) {
            continue;
        }
        bool serving = j->state == JS_RUNNING && !s->reps[i].drain_ns && j->port;
        ready += serving;
        ctl_job_state shown = ctl_job_shown_state(j);
        json_array_append_new(
            reps, json_pack("{s:I,s:s,s:s,s:i,s:b,s:b,s:i}", "job", (json_int_t)j->id, "state",
                            ctl_job_state_names[shown], "node",
                            j->nplace && !j->start_unstored ? j->place[0].node : "", "port",
                            j->port ? j->port : port_of(j->id), "ready", serving, "draining",
                            s->reps[i].drain_ns != 0, "generation", (int)s->reps[i].gen));
    }
    json_object_set_new(v, "replicas", reps);
    json_object_set_new(v, "ready_replicas", json_integer(ready));
    json_object_set_new(v, "load",
                        json_pack("{s:f,s:f,s:f,s:f,s:f}", "in_flight", s->in_flight, "rps", s->rps,
                                  "p95_ms", s->p95_ms, "ttft_p95_ms", s->ttft_p95_ms, "tpot_p95_ms",
                                  s->tpot_p95_ms));
    if (detail) {
        json_object_set(v, "events", s->events);
    }
    return v;
}

static void svc_persist(cr_store_txn *txn, ctl_service *s)
{
    json_t *doc = json_pack("{s:O,s:s,s:i,s:O}", "spec", s->spec, "tenant", s->tenant, "desired",
                            s->desired, "events", s->events);
    if (s->deleted) {
        json_object_set_new(doc, "deleted", json_true()); /* drains on after a restart */
    }
    if (s->created_ns) {
        json_object_set_new(doc, "created_ns", json_integer(s->created_ns));
    }
    if (s->gen) {
        json_object_set_new(doc, "generation", json_integer(s->gen));
    }
    char *d = json_dumps(doc, JSON_COMPACT);
    cr_store_txn_put(txn, "service", s->store_key, d);
    free(d);
    json_decref(doc);
}

static void load_service(void *arg, const char *key, const char *doc)
{
    ctl *c = arg;
    json_t *v = json_loads(doc, 0, NULL);
    cr_json_err err;
    ctl_service *s = NULL;
    if (!v || svc_parse(json_object_get(v, "spec"), &s, &err) != 0) {
        cr_error("store: bad service '%s' ignored", key);
        json_decref(v);
        return;
    }
    const char *tenant = json_string_value(json_object_get(v, "tenant"));
    snprintf(s->tenant, sizeof s->tenant, "%s", tenant ? tenant : "default");
    snprintf(s->store_key, sizeof s->store_key, "%s", key);
    s->created_ns = (int64_t)json_integer_value(json_object_get(v, "created_ns"));
    s->desired = (int32_t)json_integer_value(json_object_get(v, "desired"));
    s->deleted = json_is_true(json_object_get(v, "deleted"));
    s->gen = (int32_t)json_integer_value(json_object_get(v, "generation"));
    json_t *ev = json_object_get(v, "events");
    if (json_is_array(ev)) {
        json_decref(s->events);
        s->events = json_deep_copy(ev);
    }
    autoscaler_setup(s);
    CR_GROW(c->services, c->nservices, c->capservices);
    c->services[c->nservices++] = s;
    json_decref(v);
}

int ctl_load_services(ctl *c)
{
    int rc = cr_store_load_objects(c->store, "service", load_service, c);
    if (rc != 0) {
        return rc;
    }
    /* Replicas: the live jobs that name their service. */
    size_t slot = 0;
    for (ctl_job *j; (j = ctl_job_next(c, &slot));) {
        const char *svc = json_string_value(json_object_get(j->spec, "service"));
        if (!svc || ctl_job_terminal(j)) {
            continue;
        }
        ctl_service *s = svc_find(c, j->tenant, svc);
        if (s) {
            CR_GROW(s->reps, s->nreps, s->capreps);
            s->reps[s->nreps++] = (replica){
                .job = j->id,
                .drain_ns = 0,
                .gen = (int32_t)json_integer_value(json_object_get(j->spec, "service_gen"))};
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Reconciliation                                                           */

static uint64_t hash_json(json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = s; p && *p; p++) {
        h = (h ^ (uint8_t)*p) * 1099511628211ULL;
    }
    free(s);
    return h;
}

/* A gateway's long-poll answer: the endpoints and their version; NULL
 * once the service is deleted. */
static json_t *endpoints_doc(ctl *c, void *obj)
{
    ctl_service *s = obj;
    if (s->deleted) {
        return NULL;
    }
    return json_pack("{s:I,s:o}", "version", (json_int_t)s->ep_version, "endpoints",
                     endpoints_json(c, s));
}

static void answer_polls(ctl *c, ctl_service *s, bool expired_only, int64_t now_mono)
{
    char gone[CTL_NAME_MAX + 32];
    snprintf(gone, sizeof gone, "service '%s' not found", s->name);
    ctl_poll_answer(c, &s->polls, expired_only, now_mono, endpoints_doc, s, gone);
}

/* Bump the endpoints version when the list changed. mu held. */
static void refresh_endpoints(ctl *c, ctl_service *s)
{
    json_t *eps = endpoints_json(c, s);
    uint64_t h = hash_json(eps);
    json_decref(eps);
    if (h != s->ep_hash) {
        s->ep_hash = h;
        s->ep_version++;
        answer_polls(c, s, false, 0);
    }
}

/* Create one replica job (memory now, row queued in txn); exclude: the
 * nodes it must not go to ("n1,n2", "" none). mu held. */
static void add_replica(ctl *c, cr_store_txn *txn, ctl_service *s, int64_t now, const char *exclude)
{
    cr_json_err err;
    ctl_job *j = NULL;
    int64_t id = c->next_id;
    json_t *req = json_deep_copy(s->job_req);
    json_t *env = json_object_get(req, "env");
    if (!json_is_object(env)) {
        env = json_object();
        json_object_set_new(req, "env", env);
    }
    char port[16];
    snprintf(port, sizeof port, "%d", port_of(id));
    json_object_set_new(env, "PORT", json_string(port));
    if (exclude && *exclude) {
        json_object_set_new(req, "exclude", json_string(exclude));
    }
    if (ctl_job_from_request(req, &j, &err) != 0) {
        cr_error("service=%s: replica request invalid: %s", s->name, err.message);
        json_decref(req);
        return;
    }
    json_decref(req);
    /* after the request's checks, which refuse CORRAL_* from users */
    json_object_set_new(json_object_get(j->spec, "env"), "CORRAL_SERVICE", json_string(s->name));
    ctl_job_env_seal(c, j->spec);
    c->next_id++;
    j->id = id;
    snprintf(j->tenant, sizeof j->tenant, "%s", s->tenant);
    j->submit_ns = now;
    j->reason = cr_strdup("not yet considered");
    json_object_set_new(j->spec, "service", json_string(s->name));
    json_object_set_new(j->spec, "service_gen", json_integer(s->gen));
    json_object_set_new(j->spec, "port", json_integer(port_of(id)));
    char why[160];
    snprintf(why, sizeof why, "replica of service %s (PORT %d)", s->name, port_of(id));
    ctl_job_persist(c, txn, j, "submitted", why);
    ctl_job_insert(c, j);
    ctl_sched_add(c, id);
    CR_GROW(s->reps, s->nreps, s->capreps);
    s->reps[s->nreps++] = (replica){.job = id, .drain_ns = 0, .gen = s->gen};
}

/* Stop a replica job (cancel). mu held. */
static void stop_replica(ctl *c, cr_store_txn *txn, ctl_service *s, ctl_job *j, const char *why)
{
    if (ctl_job_terminal(j)) {
        return;
    }
    if (j->state == JS_RUNNING || j->state == JS_COMPLETING) {
        j->cancel_requested = true;
        j->state = JS_COMPLETING;
        ctl_job_set_reason(j, "replica stopping");
        for (size_t k = 0; k < j->nplace; k++) {
            ctl_node *n = ctl_node_find(c, j->place[k].node);
            if (n) {
                ctl_node_bump(c, n);
            }
        }
        ctl_job_persist(c, txn, j, "cancel-requested", why);
    } else {
        j->state = JS_CANCELLED;
        j->end_ns = cr_now_ns();
        ctl_job_set_reason(j, "cancelled");
        ctl_sched_remove(c, j->id);
        ctl_job_persist(c, txn, j, "cancelled", why);
    }
}

/*
 * Placement for availability. Replicas of a service go to different nodes
 * by default (the service's "pack": true opts out), so one node's loss
 * does not take the whole service down; the scheduler alone packs them
 * best-fit onto one node. The spread is soft and kept here, not in the
 * scheduler: a new replica excludes the nodes its siblings run on when
 * some other up node has as many free GPUs as it asks for; replicas are
 * added one at a time while one is still unplaced (so each one knows where
 * the last went); and a spread replica not placed within SPREAD_NS makes
 * spreading rest for a minute, so a full cluster still gets its replicas.
 */
enum spread { SPREAD_NO = 0, SPREAD_ONE, SPREAD_WAIT };

/* Whether name is in the comma-separated list. */
static bool in_list(const char *list, const char *name)
{
    size_t nl = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p++) {
        if ((p == list || p[-1] == ',') && (p[nl] == ',' || p[nl] == '\0')) {
            return true;
        }
    }
    return false;
}

/* SPREAD_ONE with the exclude list in out, SPREAD_WAIT (add none now) or
 * SPREAD_NO (add as many as wanted, anywhere). mu held. */
static int spread_exclude(ctl *c, cr_store_txn *txn, ctl_service *s, int64_t now_mono, char *out,
                          size_t len, bool this_gen)
{
    if (json_is_true(json_object_get(s->spec, "pack")) || now_mono < s->spread_off_mono) {
        return SPREAD_NO;
    }
    json_t *gv = json_object_get(s->job_req, "gpus");
    json_int_t gpus = gv ? json_integer_value(gv) : 1;
    out[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < s->nreps; i++) {
        ctl_job *j = ctl_job_get(c, s->reps[i].job);
        if (!j || ctl_job_terminal(j) || s->reps[i].drain_ns ||
            (this_gen && s->reps[i].gen != s->gen)) {
            continue; /* (a rolling update spreads the new replicas among themselves) */
        }
        if (j->nplace == 0) {
            /* It waits for a node: no other is added until it has one. */
            if (json_object_get(j->spec, "exclude") && cr_now_ns() - j->submit_ns > SPREAD_NS) {
                svc_event(s, "spread-fallback",
                          "a replica found no free node apart from its siblings' in 10 s: "
                          "replaced, and replicas go anywhere for a minute");
                s->spread_off_mono = now_mono + 60 * CR_NS_PER_SEC;
                stop_replica(c, txn, s, j, "not placed apart from its siblings in time");
                s->reps[i] = s->reps[--s->nreps];
                return SPREAD_NO;
            }
            return SPREAD_WAIT;
        }
        const char *node = j->place[0].node;
        if (in_list(out, node)) {
            continue;
        }
        int n = snprintf(out + used, len - used, "%s%s", used ? "," : "", node);
        if (n < 0 || (size_t)n >= len - used) {
            return SPREAD_NO; /* too many nodes to name: anywhere */
        }
        used += (size_t)n;
    }
    if (!used) {
        return SPREAD_ONE; /* the first: anywhere, and the next once it is placed */
    }
    /* Another up node with room for a replica? */
    for (size_t i = 0; i < c->nnodes; i++) {
        ctl_node *n = c->nodes[i];
        if (n->state != NS_UP || n->drained || in_list(out, n->name)) {
            continue;
        }
        json_int_t free_gpus = 0;
        for (size_t g = 0; g < n->ngpus; g++) {
            free_gpus += n->gpus[g].alloc_job == 0 &&
                         (!n->gpus[g].health[0] || strcmp(n->gpus[g].health, "ok") == 0);
        }
        if (free_gpus >= gpus) {
            return SPREAD_ONE;
        }
    }
    return SPREAD_NO;
}

/*
 * A rolling update (POST /v1/services/{name}/update: a new spec, one
 * generation up): while replicas of an older generation serve, replicas of
 * the new one are added, at most ROLL_SURGE above the wanted count, spread
 * among themselves; each one that has served ROLL_READY_NS drains an old
 * one (the oldest first: it leaves the endpoints, its requests in flight
 * finish, DRAIN_NS later it is stopped), so the ready count never drops
 * below what is wanted. Returns false when no old replica serves (then
 * the usual reconcile runs). mu held.
 */
static bool roll(ctl *c, cr_store_txn *txn, ctl_service *s, int32_t want, int64_t now_mono)
{
    int32_t olds = 0, news = 0, ready = 0;
    for (size_t i = 0; i < s->nreps; i++) {
        if (s->reps[i].drain_ns) {
            continue;
        }
        if (s->reps[i].gen != s->gen) {
            olds++;
        } else {
            news++;
            ready += s->reps[i].ready_ns && now_mono - s->reps[i].ready_ns >= ROLL_READY_NS;
        }
    }
    if (olds == 0) {
        if (s->rolling) {
            s->rolling = false;
            char why[120];
            snprintf(why, sizeof why, "every replica runs generation %d", (int)s->gen);
            svc_event(s, "rolled-out", why);
        }
        return false;
    }
    s->rolling = true;
    if (news < want && news + olds < want + ROLL_SURGE) {
        char exclude[1024] = "";
        int spread = spread_exclude(c, txn, s, now_mono, exclude, sizeof exclude, true);
        if (spread != SPREAD_WAIT) {
            add_replica(c, txn, s, cr_now_ns(), spread == SPREAD_ONE ? exclude : NULL);
        }
    }
    int32_t keep = want - ready;
    keep = keep < 0 ? 0 : keep;
    while (olds > keep) {
        size_t pick = s->nreps;
        for (size_t i = 0; i < s->nreps; i++) {
            if (!s->reps[i].drain_ns && s->reps[i].gen != s->gen &&
                (pick == s->nreps || s->reps[i].job < s->reps[pick].job)) {
                pick = i;
            }
        }
        if (pick == s->nreps) {
            break;
        }
        ctl_job *j = ctl_job_get(c, s->reps[pick].job);
        if (j && ctl_job_shown_state(j) != JS_RUNNING) {
            stop_replica(c, txn, s, j, "rolling update: an old replica not serving yet");
            s->reps[pick] = s->reps[--s->nreps];
        } else {
            s->reps[pick].drain_ns = now_mono;
        }
        olds--;
    }
    return true;
}

static void reconcile(ctl *c, cr_store_txn *txn, ctl_service *s, int64_t now_mono)
{
    int64_t now = cr_now_ns();
    /* Forget replicas that ended; an ended replica that is still wanted is
     * replaced below ("always restarted"). */
    for (size_t i = 0; i < s->nreps;) {
        ctl_job *j = ctl_job_get(c, s->reps[i].job);
        if (!j || ctl_job_terminal(j)) {
            if (j && !s->reps[i].drain_ns && !s->deleted) {
                char why[200];
                snprintf(why, sizeof why, "replica job %lld ended (%s); replacing it",
                         (long long)j->id, ctl_job_state_names[j->state]);
                svc_event(s, "replica-ended", why);
            }
            s->reps[i] = s->reps[--s->nreps];
            continue;
        }
        i++;
    }
    int32_t want = s->deleted ? 0 : s->desired;
    int32_t serving = 0;
    for (size_t i = 0; i < s->nreps; i++) {
        serving += s->reps[i].drain_ns == 0;
        ctl_job *j = ctl_job_get(c, s->reps[i].job);
        if (!s->reps[i].ready_ns && !s->reps[i].drain_ns && j && j->state == JS_RUNNING &&
            j->port && j->nplace > 0 && !j->start_unstored) {
            s->reps[i].ready_ns = now_mono;
        }
    }
    if (!s->deleted && roll(c, txn, s, want, now_mono)) {
        goto drained;
    }
    char exclude[1024] = "";
    int spread = SPREAD_NO;
    if (serving < want) {
        spread = spread_exclude(c, txn, s, now_mono, exclude, sizeof exclude, false);
        serving = 0; /* it may have replaced one */
        for (size_t i = 0; i < s->nreps; i++) {
            serving += s->reps[i].drain_ns == 0;
        }
    }
    while (serving < want && spread != SPREAD_WAIT) {
        add_replica(c, txn, s, now, spread == SPREAD_ONE ? exclude : NULL);
        serving++;
        if (spread == SPREAD_ONE) {
            break; /* one at a time: the next one avoids its node too */
        }
    }
    /* Too many: drain the newest (pending ones first, they serve nothing). */
    while (serving > want) {
        size_t pick = s->nreps;
        for (size_t i = 0; i < s->nreps; i++) {
            if (s->reps[i].drain_ns) {
                continue;
            }
            ctl_job *j = ctl_job_get(c, s->reps[i].job);
            bool pending = j && ctl_job_shown_state(j) != JS_RUNNING; /* (a start being stored) */
            if (pick == s->nreps) {
                pick = i;
                continue;
            }
            ctl_job *pj = ctl_job_get(c, s->reps[pick].job);
            bool ppending = pj && ctl_job_shown_state(pj) != JS_RUNNING;
            if ((pending && !ppending) ||
                (pending == ppending && s->reps[i].job > s->reps[pick].job)) {
                pick = i;
            }
        }
        if (pick == s->nreps) {
            break;
        }
        ctl_job *j = ctl_job_get(c, s->reps[pick].job);
        if (j && ctl_job_shown_state(j) != JS_RUNNING) {
            stop_replica(c, txn, s, j, "scale down (not serving yet)");
            s->reps[pick] = s->reps[--s->nreps];
        } else {
            s->reps[pick].drain_ns = now_mono;
        }
        serving--;
    }
drained:
    /* Drained long enough: stop. */
    for (size_t i = 0; i < s->nreps; i++) {
        if (s->reps[i].drain_ns && now_mono - s->reps[i].drain_ns >= DRAIN_NS) {
            ctl_job *j = ctl_job_get(c, s->reps[i].job);
            if (j && !ctl_job_terminal(j) && !j->cancel_requested) {
                stop_replica(c, txn, s, j, "scale down after draining from the gateways");
            }
        }
    }
    refresh_endpoints(c, s);
}

static void autoscale(ctl *c, cr_store_txn *txn, ctl_service *s, int64_t now_mono)
{
#ifdef CTL_HAVE_AUTOSCALE
    if (!s->as || s->deleted || now_mono - s->last_decide_mono < DECIDE_NS) {
        return;
    }
    s->last_decide_mono = now_mono;
    int32_t scheduled = 0, ready = 0;
    for (size_t i = 0; i < s->nreps; i++) {
        if (s->reps[i].drain_ns) {
            continue;
        }
        scheduled++;
        ctl_job *j = ctl_job_get(c, s->reps[i].job);
        ready += j && ctl_job_shown_state(j) == JS_RUNNING; /* not a start being stored */
    }
    cr_as_decision d;
    if (cr_autoscaler_decide(s->as, cr_mono_ns(), scheduled, ready, &d) != 0) {
        return;
    }
    if (d.action != CR_AS_HOLD && d.desired != s->desired) {
        s->desired = d.desired;
        svc_event(s, cr_as_action_name(d.action), d.reason);
        svc_persist(txn, s);
    }
#endif
}

void ctl_services_tick(ctl *c, int64_t now_mono)
{
    pthread_mutex_lock(&c->mu);
    ctl_keys_tick(c, now_mono);
    if (c->nservices == 0) {
        pthread_mutex_unlock(&c->mu);
        return;
    }
    cr_store_txn *txn = cr_store_txn_new();
    for (size_t i = 0; i < c->nservices;) {
        ctl_service *s = c->services[i];
        if (s->creating) {
            i++;
            continue;
        }
        answer_polls(c, s, true, now_mono);
        autoscale(c, txn, s, now_mono);
        reconcile(c, txn, s, now_mono);
        if (s->deleted && s->nreps == 0) {
            answer_polls(c, s, false, 0);
            cr_store_txn_del(txn, "service", s->store_key);
            c->services[i] = c->services[--c->nservices];
            svc_free(s);
            continue;
        }
        i++;
    }
    if (!cr_store_txn_empty(txn)) {
        cr_store_submit(c->store, txn, NULL, NULL);
    } else {
        cr_store_txn_free(txn);
    }
    pthread_mutex_unlock(&c->mu);
}

void ctl_services_job_changed(ctl *c, ctl_job *j)
{
    const char *svc = json_string_value(json_object_get(j->spec, "service"));
    ctl_service *s = svc ? svc_find(c, j->tenant, svc) : NULL;
    if (s) {
        refresh_endpoints(c, s);
    }
}

void ctl_services_release_polls(ctl *c)
{
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->nservices; i++) {
        answer_polls(c, c->services[i], false, 0);
    }
    pthread_mutex_unlock(&c->mu);
}

/* ------------------------------------------------------------------------ */
/* Routes                                                                   */

static bool may_see(const cr_principal *p, const ctl_service *s)
{
    return p->role == CR_ROLE_ADMIN || strcmp(p->tenant, s->tenant) == 0;
}

/* Lock mu and find service name as p may see it (not deleted, not being
 * created); NULL, unlocked and answered 404, when there is none. */
static ctl_service *svc_lock_visible(ctl *c, cr_http_req *req, const cr_principal *p,
                                     const char *name)
{
    pthread_mutex_lock(&c->mu);
    ctl_service *s = svc_resolve(c, p, name);
    if (!s || !may_see(p, s) || s->deleted || s->creating) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "service '%s' not found", name);
        return NULL;
    }
    return s;
}

/* A user change of a service, stored before it is applied (ctl_state.c). */
enum { SVC_CREATE, SVC_SCALE, SVC_DELETE, SVC_UPDATE };
typedef struct svc_change {
    char name[CTL_NAME_MAX];
    char tenant[CTL_NAME_MAX];
    int op; /* SVC_* */
    int32_t replicas;
    int32_t gen;      /* SVC_UPDATE: the generation it makes */
    ctl_service *upd; /* SVC_UPDATE: the new spec, parsed (owned) */
    char why[200];
} svc_change;

/* SVC_UPDATE: the new spec and what comes of it into s, one generation up;
 * the replicas roll over (roll). mu held. */
static void svc_take_update(ctl_service *s, svc_change *a)
{
    ctl_service *n = a->upd;
    json_t *t = s->spec;
    s->spec = n->spec;
    n->spec = t;
    t = s->job_req;
    s->job_req = n->job_req;
    n->job_req = t;
    s->min = n->min;
    s->max = n->max;
    s->target_concurrency = n->target_concurrency;
    s->target_p95_ms = n->target_p95_ms;
    s->target_ttft_ms = n->target_ttft_ms;
    s->target_tpot_ms = n->target_tpot_ms;
    snprintf(s->ready_path, sizeof s->ready_path, "%s", n->ready_path);
    s->desired = s->desired < s->min ? s->min : s->desired > s->max ? s->max : s->desired;
    s->gen = a->gen;
    autoscaler_setup(s);
    svc_event(s, "updated", a->why);
}

/* The change on s (memory, or a copy to store: its events an array of its
 * own): desired/deleted and its event. */
static void svc_apply(ctl_service *s, const svc_change *a, bool log)
{
    if (a->op == SVC_SCALE) {
        s->desired = a->replicas;
    } else if (a->op == SVC_DELETE) {
        s->deleted = true;
    }
    const char *what = a->op == SVC_SCALE ? "scaled" : "deleted";
    if (log) {
        svc_event(s, what, a->why);
        return;
    }
    char t[64];
    json_array_append_new(s->events,
                          json_pack("{s:s,s:s,s:s}", "time", ctl_time_str(cr_now_ns(), t, sizeof t),
                                    "what", what, "why", a->why));
}

/* mu held; see ctl_commit_fn. */
static json_t *svc_committed(ctl *c, void *argp, int status, unsigned *code)
{
    svc_change *a = argp;
    ctl_service *s = svc_find(c, a->tenant, a->name);
    if (a->op == SVC_CREATE) {
        if (!s || !s->creating) {
            return NULL;
        }
        if (status != 0) { /* not stored: as if never asked */
            for (size_t i = 0; i < c->nservices; i++) {
                if (c->services[i] == s) {
                    c->services[i] = c->services[--c->nservices];
                    break;
                }
            }
            svc_free(s);
            return NULL;
        }
        s->creating = false;
        *code = 201;
    } else if (a->op == SVC_UPDATE) {
        if (status != 0 || !s || s->deleted || s->creating || s->gen + 1 != a->gen) {
            svc_free(a->upd); /* not stored, or another update came first */
            a->upd = NULL;
            return NULL;
        }
        svc_take_update(s, a);
        svc_free(a->upd); /* (now holding the old spec) */
        a->upd = NULL;
    } else {
        if (status != 0 || !s || s->deleted || s->creating) {
            return NULL;
        }
        svc_apply(s, a, true);
    }
    cr_store_txn *txn = cr_store_txn_new();
    reconcile(c, txn, s, cr_mono_ns());
    svc_persist(txn, s);
    cr_store_submit(c->store, txn, NULL, NULL);
    return svc_json(c, s, a->op == SVC_CREATE);
}

static void svc_create(ctl *c, cr_http_req *req, const cr_principal *p)
{
    size_t len;
    const char *body = cr_http_body(req, &len);
    json_t *v = NULL;
    cr_json_err err;
    ctl_service *s = NULL;
    if (cr_json_parse_object(body, len, &v, &err) == 0 &&
        json_object_get(v, "model_weights_resolved")) {
        cr_json_fail(&err, CR_EINVAL, "model_weights_resolved",
                     "field 'model_weights_resolved': unknown field (give model_weights)");
        json_decref(v);
        ctl_reply_jerr(req, &err);
        return;
    }
    if (!v || svc_parse(v, &s, &err) != 0) {
        json_decref(v);
        ctl_reply_jerr(req, &err);
        return;
    }
    json_decref(v);
    if (p->role == CR_ROLE_USER) {
        if (*s->tenant && strcmp(s->tenant, p->tenant) != 0) {
            svc_free(s);
            ctl_reply_err(req, 403, CR_EPERM, "tenant",
                          "field 'tenant': this token may only create services for '%s'",
                          p->tenant);
            return;
        }
        if (json_integer_value(json_object_get(s->job_req, "priority")) > 0) {
            svc_free(s); /* as for jobs (ctl_jobs.c): only an admin raises the tier */
            ctl_reply_err(req, 403, CR_EPERM, "priority",
                          "field 'priority': only an admin may create services above 0");
            return;
        }
        snprintf(s->tenant, sizeof s->tenant, "%s", p->tenant);
    } else if (!*s->tenant) {
        snprintf(s->tenant, sizeof s->tenant, "default");
    }
    ctl_run_as ra;
    char rwhy[300];
    if (ctl_run_as_lookup(&c->cfg, s->tenant, NULL, &ra, rwhy, sizeof rwhy) != 0) {
        ctl_reply_err(req, 403, CR_EPERM, "tenant", "%s", rwhy);
        svc_free(s);
        return;
    }
    cr_json_err cerr;
    if (ctl_ctr_check_tenant(&c->cfg, s->tenant, s->job_req, &cerr) != 0) {
        ctl_reply_err(req, 403, cerr.code, cerr.field, "%s", cerr.message);
        svc_free(s);
        return;
    }
    const char *mw = json_string_value(json_object_get(s->spec, "model_weights"));
    if (mw) {
        /* resolved once, for every replica: they all start from the same
         * version (and, on a node that holds it, from its cache) */
        json_t *names = json_pack("[s]", mw), *tmp = json_object();
        int mrc = ctl_data_resolve(c, s->tenant, names, tmp, &cerr);
        json_decref(names);
        if (mrc != 0) {
            json_decref(tmp);
            ctl_reply_err(req, 400, cerr.code, "model_weights", "field 'model_weights': %s",
                          strstr(cerr.message, ": ") ? strstr(cerr.message, ": ") + 2
                                                     : cerr.message);
            svc_free(s);
            return;
        }
        json_t *e = json_array_get(json_object_get(tmp, "data"), 0);
        json_object_set_new(e, "env", json_string("CORRAL_MODEL_WEIGHTS"));
        json_object_set(s->spec, "model_weights_resolved", e);
        json_object_set_new(s->job_req, "data", json_pack("[O]", e));
        json_decref(tmp);
    }
    pthread_mutex_lock(&c->mu);
    if (!ctl_tenant_find(c, s->tenant)) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_err(req, 400, CR_ENOENT, "tenant", "field 'tenant': unknown tenant '%s'",
                      s->tenant);
        svc_free(s);
        return;
    }
    /* Unique within the tenant only: another tenant's service of this name
     * is neither told nor in the way. */
    ctl_service *old = svc_find(c, s->tenant, s->name);
    if (old) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_err(req, 409, CR_EEXIST, "name", "service '%s' already exists%s", s->name,
                      old->deleted    ? " (being deleted)"
                      : old->creating ? " (being created)"
                                      : "");
        svc_free(s);
        return;
    }
    autoscaler_setup(s);
    char why[160];
    snprintf(why, sizeof why, "by token '%s': %d replicas (min %d, max %d)", p->name, s->desired,
             s->min, s->max);
    svc_event(s, "created", why);
    /* Stored first: the name is taken meanwhile (409 to a second create),
     * nothing is served or started until the row is durable. */
    s->creating = true;
    s->created_ns = cr_now_ns();
    snprintf(s->store_key, sizeof s->store_key, "%s/%s", s->tenant, s->name);
    CR_GROW(c->services, c->nservices, c->capservices);
    c->services[c->nservices++] = s;
    cr_store_txn *txn = cr_store_txn_new();
    svc_persist(txn, s);
    svc_change *a = cr_calloc(1, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", s->name);
    snprintf(a->tenant, sizeof a->tenant, "%s", s->tenant);
    a->op = SVC_CREATE;
    ctl_state_commit_apply(c, txn, req, svc_committed, a);
    pthread_mutex_unlock(&c->mu);
}

/* POST /v1/services/{name}/update: the body as for a create (its name, if
 * given, the same); stored one generation up, then the replicas roll. */
static void svc_update(ctl *c, cr_http_req *req, const cr_principal *p, const char *name)
{
    size_t len;
    const char *body = cr_http_body(req, &len);
    json_t *v = NULL;
    cr_json_err err;
    ctl_service *n = NULL;
    if (cr_json_parse_object(body, len, &v, &err) != 0) {
        ctl_reply_jerr(req, &err);
        return;
    }
    const char *bn = json_string_value(json_object_get(v, "name"));
    if (json_object_get(v, "name") && (!bn || strcmp(bn, name) != 0)) {
        json_decref(v);
        ctl_reply_err(req, 400, CR_EINVAL, "name",
                      "field 'name': an update keeps the service's name ('%s')", name);
        return;
    }
    if (!bn) {
        json_object_set_new(v, "name", json_string(name));
    }
    if (json_object_get(v, "tenant")) {
        json_decref(v);
        ctl_reply_err(req, 400, CR_EINVAL, "tenant", "field 'tenant': an update keeps the tenant");
        return;
    }
    if (svc_parse(v, &n, &err) != 0) {
        json_decref(v);
        ctl_reply_jerr(req, &err);
        return;
    }
    json_decref(v);
    if (p->role == CR_ROLE_USER &&
        json_integer_value(json_object_get(n->job_req, "priority")) > 0) {
        svc_free(n);
        ctl_reply_err(req, 403, CR_EPERM, "priority",
                      "field 'priority': only an admin may run services above 0");
        return;
    }
    ctl_service *s = svc_lock_visible(c, req, p, name);
    if (!s) {
        svc_free(n);
        return;
    }
    cr_json_err cerr;
    if (ctl_ctr_check_tenant(&c->cfg, s->tenant, n->job_req, &cerr) != 0) {
        pthread_mutex_unlock(&c->mu);
        svc_free(n);
        ctl_reply_err(req, 403, cerr.code, cerr.field, "%s", cerr.message);
        return;
    }
    if (s->deleted || s->creating) {
        pthread_mutex_unlock(&c->mu);
        svc_free(n);
        ctl_reply_err(req, 409, CR_ECONFLICT, NULL, "service '%s' is being %s", name,
                      s->deleted ? "deleted" : "created");
        return;
    }
    svc_change *a = cr_calloc(1, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", s->name);
    snprintf(a->tenant, sizeof a->tenant, "%s", s->tenant);
    a->op = SVC_UPDATE;
    a->gen = s->gen + 1;
    a->upd = n;
    snprintf(a->why, sizeof a->why, "by token '%s': generation %d, rolling %zu replicas", p->name,
             (int)a->gen, s->nreps);
    /* Stored first (the row of the new spec, one generation up). */
    ctl_service tmp = *s;
    tmp.spec = n->spec;
    tmp.gen = a->gen;
    tmp.events = json_copy(s->events);
    char t[64];
    json_array_append_new(tmp.events,
                          json_pack("{s:s,s:s,s:s}", "time", ctl_time_str(cr_now_ns(), t, sizeof t),
                                    "what", "updated", "why", a->why));
    cr_store_txn *txn = cr_store_txn_new();
    svc_persist(txn, &tmp);
    json_decref(tmp.events);
    ctl_state_commit_apply(c, txn, req, svc_committed, a);
    pthread_mutex_unlock(&c->mu);
}

static void svc_endpoints(ctl *c, cr_http_req *req, const cr_principal *p, const char *name)
{
    const char *qv = cr_http_query(req, "version");
    const char *qw = cr_http_query(req, "wait");
    int64_t version = -1, wait = 0;
    if (qv && cr_parse_i64(qv, -1, INT64_MAX, &version) != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "version", "query 'version': an integer >= -1");
        return;
    }
    if (qw && cr_parse_i64(qw, 0, 300, &wait) != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "wait", "query 'wait': an integer 0..300");
        return;
    }
    ctl_service *s = svc_lock_visible(c, req, p, name);
    if (!s) {
        return;
    }
    if (version != (int64_t)s->ep_version || wait == 0 || c->stopping) {
        json_t *doc = endpoints_doc(c, s);
        pthread_mutex_unlock(&c->mu);
        ctl_reply_json(req, 200, doc);
        return;
    }
    ctl_poll_park(&s->polls, req, wait);
    pthread_mutex_unlock(&c->mu);
}

void ctl_route_services(ctl *c, cr_http_req *req, const cr_principal *p, char **seg, size_t nseg)
{
    const char *m = cr_http_method(req);
    if (p->role != CR_ROLE_ADMIN && p->role != CR_ROLE_USER) {
        ctl_reply_err(req, 403, CR_EPERM, NULL, "role '%s' may not use /v1/services",
                      cr_role_name(p->role));
        return;
    }
    if (nseg == 2) {
        cr_http_set_route(req, "/v1/services");
        if (strcmp(m, "POST") == 0) {
            svc_create(c, req, p);
            return;
        }
        if (strcmp(m, "GET") != 0) {
            ctl_reply_err(req, 405, CR_ENOTSUP, NULL, "method %s not allowed here", m);
            return;
        }
        json_t *items = json_array();
        pthread_mutex_lock(&c->mu);
        for (size_t i = 0; i < c->nservices; i++) {
            ctl_service *s = c->services[i];
            if (may_see(p, s) && !s->deleted && !s->creating) {
                json_t *it = svc_json(c, s, false);
                char ref[2 * CTL_NAME_MAX];
                svc_ref(c, p, s, ref, sizeof ref);
                json_object_set_new(it, "ref", json_string(ref)); /* the name on routes */
                json_array_append_new(items, it);
            }
        }
        pthread_mutex_unlock(&c->mu);
        size_t n = json_array_size(items);
        ctl_reply_json(req, 200, json_pack("{s:o,s:I}", "items", items, "count", (json_int_t)n));
        return;
    }
    const char *name = seg[2];
    if (nseg == 4 && strcmp(seg[3], "endpoints") == 0 && strcmp(m, "GET") == 0) {
        cr_http_set_route(req, "/v1/services/{name}/endpoints");
        svc_endpoints(c, req, p, name);
        return;
    }
    if (nseg == 4 && strcmp(seg[3], "update") == 0 && strcmp(m, "POST") == 0) {
        cr_http_set_route(req, "/v1/services/{name}/update");
        svc_update(c, req, p, name);
        return;
    }
    bool show = nseg == 3 && strcmp(m, "GET") == 0;
    bool del = nseg == 3 && strcmp(m, "DELETE") == 0;
    bool scale = nseg == 4 && strcmp(seg[3], "scale") == 0 && strcmp(m, "POST") == 0;
    bool metrics = nseg == 4 && strcmp(seg[3], "metrics") == 0 && strcmp(m, "POST") == 0;
    if (!show && !del && !scale && !metrics) {
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "no route %s %s", m, cr_http_path(req));
        return;
    }
    cr_http_set_route(req, show || del ? "/v1/services/{name}"
                           : scale     ? "/v1/services/{name}/scale"
                                       : "/v1/services/{name}/metrics");
    int64_t replicas = 0;
    double in_flight = 0, rps = 0, p95 = -1, ttft = -1, tpot = -1;
    int64_t metrics_port = 0; /* the gateway's /metrics port, for discovery */
    if (scale || metrics) {
        size_t len;
        const char *body = cr_http_body(req, &len);
        json_t *v = NULL;
        cr_json_err err;
        static const char *const scale_m[] = {"replicas", NULL};
        static const char *const metric_m[] = {
            "in_flight", "rps", "p95_ms", "ttft_p95_ms", "tpot_p95_ms", "metrics_port", NULL};
        int rc = cr_json_parse_object(body, len, &v, &err);
        if (rc == 0 && scale) {
            rc = cr_json_only(v, "", scale_m, &err) ||
                 cr_json_int(v, "", "replicas", true, 0, 1000, &replicas, &err);
        } else if (rc == 0) {
            rc = cr_json_only(v, "", metric_m, &err) ||
                 cr_json_num(v, "", "in_flight", true, 0, 1e9, &in_flight, &err) ||
                 cr_json_num(v, "", "rps", false, 0, 1e12, &rps, &err) ||
                 cr_json_num(v, "", "p95_ms", false, -1, 1e9, &p95, &err) ||
                 cr_json_num(v, "", "ttft_p95_ms", false, -1, 1e9, &ttft, &err) ||
                 cr_json_num(v, "", "tpot_p95_ms", false, -1, 1e9, &tpot, &err) ||
                 cr_json_int(v, "", "metrics_port", false, 1, 65535, &metrics_port, &err);
        }
        json_decref(v);
        if (rc != 0) {
            ctl_reply_jerr(req, &err);
            return;
        }
    }
    ctl_service *s = svc_lock_visible(c, req, p, name);
    if (!s) {
        return;
    }
    if (show) {
        json_t *v = svc_json(c, s, true);
        char ref[2 * CTL_NAME_MAX];
        svc_ref(c, p, s, ref, sizeof ref);
        json_object_set_new(v, "ref", json_string(ref));
        pthread_mutex_unlock(&c->mu);
        ctl_reply_json(req, 200, v);
        return;
    }
    if (metrics) {
        if (metrics_port && p->role == CR_ROLE_ADMIN) {
            /* only a gateway with an admin token is listed for scraping:
             * a user token cannot point Prometheus at a port of its choice */
            ctl_ui_gateway_seen(cr_http_peer(req), (int)metrics_port);
        }
        s->in_flight = in_flight;
        s->rps = rps;
        s->p95_ms = p95;
        s->ttft_p95_ms = ttft;
        s->tpot_p95_ms = tpot;
        s->report_ns = cr_now_ns();
#ifdef CTL_HAVE_AUTOSCALE
        if (s->as) {
            cr_as_sample smp = {.concurrency = in_flight, .rps = rps, .p95_ms = slo_signal(s, p95)};
            cr_autoscaler_record(s->as, cr_mono_ns(), &smp);
            if (s->desired == 0 && in_flight > 0) {
                cr_autoscaler_activate(s->as, cr_mono_ns());
                s->last_decide_mono = 0; /* decide at the next tick */
                ctl_sched_kick(c);
            }
        }
#endif
        pthread_mutex_unlock(&c->mu);
        ctl_reply_json(req, 200, json_pack("{s:b}", "ok", 1));
        return;
    }
    svc_change *a = cr_calloc(1, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", s->name);
    snprintf(a->tenant, sizeof a->tenant, "%s", s->tenant);
    if (scale) {
        if (replicas < s->min || replicas > s->max) {
            pthread_mutex_unlock(&c->mu);
            free(a);
            ctl_reply_err(req, 400, CR_EINVAL, "replicas",
                          "field 'replicas': must be within min_replicas..max_replicas (%d..%d)",
                          s->min, s->max);
            return;
        }
        a->op = SVC_SCALE;
        a->replicas = (int32_t)replicas;
        snprintf(a->why, sizeof a->why, "by token '%s': %d -> %lld", p->name, s->desired,
                 (long long)replicas);
    } else {
        a->op = SVC_DELETE;
        snprintf(a->why, sizeof a->why, "by token '%s': draining %zu replicas", p->name, s->nreps);
    }
    /* Stored first (the row computed on a copy), applied once durable. */
    ctl_service tmp = *s;
    tmp.events = json_copy(s->events);
    svc_apply(&tmp, a, false);
    cr_store_txn *txn = cr_store_txn_new();
    svc_persist(txn, &tmp);
    json_decref(tmp.events);
    ctl_state_commit_apply(c, txn, req, svc_committed, a);
    pthread_mutex_unlock(&c->mu);
}
