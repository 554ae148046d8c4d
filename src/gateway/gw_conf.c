/*
 * gw_conf.c - the gateway's configuration: command-line flags and the JSON
 * config file (jansson, which reports line and column), with errors naming
 * the flag or the member.
 */
#include "cr_gateway.h"
#include "gw_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_opt.h"
#include "cr_parse.h"
#include "cr_time.h"

#include <getopt.h>
#include <jansson.h>
#include <netdb.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The bearer token from the first line of a file (keeps it out of ps). */
static int token_from_file(gw_conf *c, const char *path, const char *what)
{
    FILE *f = fopen(path, "r");
    char line[512] = "";
    if (!f || !fgets(line, sizeof line, f)) {
        fprintf(stderr, "corral gateway: %s: cannot read a token from '%s'\n", what, path);
        if (f) {
            fclose(f);
        }
        return CR_EINVAL;
    }
    fclose(f);
    line[strcspn(line, "\r\n \t")] = '\0';
    free(c->token);
    c->token = cr_strdup(line);
    return 0;
}

static void conf_defaults(gw_conf *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->listen_host, sizeof c->listen_host, "127.0.0.1");
    c->listen_port = 8630;
    c->max_inflight = 256;
    c->max_clients = 16384;
    c->hold_max = 100;
    c->batch_share = 0.75;
    c->hold_timeout_ns = 30 * CR_NS_PER_SEC;
    c->retry_after_s = 1;
    c->connect_timeout_ns = 2 * CR_NS_PER_SEC;
    c->upstream_timeout_ns = 300 * CR_NS_PER_SEC;
    c->client_idle_ns = 60 * CR_NS_PER_SEC;
    c->header_timeout_ns = 10 * CR_NS_PER_SEC;
    c->body_timeout_ns = 30 * CR_NS_PER_SEC;
    c->shutdown_grace_ns = 30 * CR_NS_PER_SEC;
    c->probe_interval_ns = 500 * CR_NS_PER_MS;
    c->report_interval_ns = 2 * CR_NS_PER_SEC;
    c->retries = 2;
    c->seed = 0x636f7272616c; /* "corral" */
    c->require_keys = -1;     /* on when following a controller */
    c->max_body_bytes = 1024 * 1024;
    c->prefix_affinity = true;
}

void gw_service_conf_fini(gw_service_conf *s)
{
    CR_FREE(s->endpoints);
    s->endpoint_count = 0;
    for (size_t i = 0; i < s->model_count; i++) {
        free(s->models[i]);
    }
    CR_FREE(s->models);
    s->model_count = 0;
    for (size_t i = 0; i < s->adapter_count; i++) {
        free(s->adapters[i]);
    }
    CR_FREE(s->adapters);
    s->adapter_count = 0;
}

void gw_conf_fini(gw_conf *c)
{
    for (size_t i = 0; i < c->service_count; i++) {
        gw_service_conf_fini(&c->services[i]);
    }
    CR_FREE(c->services);
    c->service_count = 0;
    CR_FREE(c->controller);
    CR_FREE(c->token);
    CR_FREE(c->ca_file);
    CR_FREE(c->site);
    CR_FREE(c->config_path);
    CR_FREE(c->tls_cert);
    CR_FREE(c->tls_key);
}

static bool valid_service_name(const char *s, size_t len)
{
    if (len == 0 || len >= GW_NAME_MAX) {
        return false;
    }
    /* NAME, or NAME@TENANT: a tenant's service where another tenant has
     * one of the same name (the controller's "ref"). */
    const char *at = memchr(s, '@', len);
    if (at && (at == s || at == s + len - 1 || memchr(at + 1, '@', len - (size_t)(at - s) - 1))) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == '@';
        if (!ok) {
            return false;
        }
    }
    return !((len == 7 && memcmp(s, "metrics", 7) == 0) ||
             (len == 7 && memcmp(s, "healthz", 7) == 0));
}

static int endpoint_parse(const char *s, int64_t min_port, gw_endpoint *ep);

/* "host:port" or "[v6]:port" into *ep (ready). */
int gw_endpoint_parse(const char *s, gw_endpoint *ep)
{
    return endpoint_parse(s, 1, ep);
}

static int endpoint_parse(const char *s, int64_t min_port, gw_endpoint *ep)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s) {
        return CR_EINVAL;
    }
    const char *h = s;
    size_t hl = (size_t)(colon - s);
    if (h[0] == '[') {
        if (hl < 3 || h[hl - 1] != ']') {
            return CR_EINVAL;
        }
        h++;
        hl -= 2;
    }
    if (hl == 0 || hl >= sizeof ep->host) {
        return CR_EINVAL;
    }
    for (size_t i = 0; i < hl; i++) {
        char ch = h[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == ':';
        if (!ok) {
            return CR_EINVAL;
        }
    }
    int64_t port;
    if (cr_parse_i64(colon + 1, min_port, 65535, &port) != 0) {
        return CR_EINVAL;
    }
    memset(ep, 0, sizeof *ep);
    memcpy(ep->host, h, hl);
    ep->port = (uint16_t)port;
    ep->ready = true;
    return 0;
}

int gw_resolve(const char *host, uint16_t port, struct sockaddr_storage *addr, socklen_t *len)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    char ps[8];
    snprintf(ps, sizeof ps, "%u", (unsigned)port);
    if (getaddrinfo(host, ps, &hints, &res) != 0 || !res) {
        return CR_ENOENT;
    }
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    *len = (socklen_t)res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static gw_service_conf *service_conf_get(gw_conf *c, const char *name, size_t len)
{
    for (size_t i = 0; i < c->service_count; i++) {
        if (strlen(c->services[i].name) == len && memcmp(c->services[i].name, name, len) == 0) {
            return &c->services[i];
        }
    }
    c->services = cr_reallocarray(c->services, c->service_count + 1, sizeof *c->services);
    gw_service_conf *s = &c->services[c->service_count++];
    memset(s, 0, sizeof *s);
    memcpy(s->name, name, len);
    return s;
}

static void add_endpoint(gw_service_conf *s, const gw_endpoint *ep)
{
    s->endpoints = cr_reallocarray(s->endpoints, s->endpoint_count + 1, sizeof *s->endpoints);
    s->endpoints[s->endpoint_count++] = *ep;
}

/* --service NAME or NAME=host:port,host:port */
static int parse_service_flag(gw_conf *c, const char *arg)
{
    const char *eq = strchr(arg, '=');
    size_t nl = eq ? (size_t)(eq - arg) : strlen(arg);
    if (!valid_service_name(arg, nl)) {
        fprintf(stderr,
                "corral gateway: --service: bad name in '%s' (letters, digits, '-', '_', '.'; "
                "not 'metrics' or 'healthz')\n",
                arg);
        return CR_EINVAL;
    }
    gw_service_conf *s = service_conf_get(c, arg, nl);
    if (!eq) {
        return 0;
    }
    char *list = cr_strdup(eq + 1);
    char *save = NULL;
    int rc = 0;
    for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        gw_endpoint ep;
        if (gw_endpoint_parse(tok, &ep) != 0) {
            fprintf(stderr, "corral gateway: --service: bad endpoint '%s' (want host:port)\n", tok);
            rc = CR_EINVAL;
            break;
        }
        add_endpoint(s, &ep);
    }
    free(list);
    return rc;
}

static int parse_listen(const char *arg, gw_conf *c, const char *what)
{
    gw_endpoint ep;
    if (endpoint_parse(arg, 0, &ep) != 0) {
        fprintf(stderr, "corral gateway: %s: bad address '%s' (want ADDR:PORT)\n", what, arg);
        return CR_EINVAL;
    }
    snprintf(c->listen_host, sizeof c->listen_host, "%s", ep.host);
    c->listen_port = ep.port;
    return 0;
}

static int json_err(const char *path, const char *field, const char *msg)
{
    fprintf(stderr, "corral gateway: %s: %s: %s\n", path, field, msg);
    return CR_EINVAL;
}

#define GW_S   (365 * 86400 * CR_NS_PER_SEC) /* the longest duration: a year */
#define OFF(m) offsetof(gw_conf, m)

/*
 * Every option of the gateway, flag and config member, in --help order
 * (docs/gateway.md "Running it" lists the same flags: tests/common holds
 * them against each other). Rows of type CR_OPT_CUSTOM, and the flags
 * marked flag_by_role, are parsed below in flag_custom and value_custom.
 */
static const cr_opt gw_opts[] = {
    {"--listen", "listen", CR_OPT_CUSTOM, 0, 0, 0, 0, 0, "ADDR:PORT",
     "where clients connect (default 127.0.0.1:8630)", NULL, false},
    {"--service", NULL, CR_OPT_CUSTOM, 0, 0, 0, 0, 0, "NAME[=H:P,..]",
     "a service and its static endpoints (repeatable); without them, the\n"
     "controller gives its endpoints",
     NULL, false},
    {NULL, "services", CR_OPT_CUSTOM, 0, 0, 0, 0, 0, NULL, NULL, NULL, false},
    {"--config", NULL, CR_OPT_CUSTOM, 0, 0, 0, 0, 0, "FILE",
     "JSON config (see docs/gateway.md); SIGHUP reloads its services", NULL, false},
    {"--controller", "controller", CR_OPT_STRDUP, OFF(controller), 0, 0, 0, 0, "URL[,URL...]",
     "long-poll endpoints from the controller (several: an HA trio)", NULL, true},
    {"--token", "token", CR_OPT_STRDUP, OFF(token), 0, 0, 0, 0, "T",
     "bearer token for the controller (visible in ps: prefer\n"
     "--token-file, CORRAL_TOKEN or CORRAL_TOKEN_FILE)",
     NULL, false},
    {"--token-file", NULL, CR_OPT_CUSTOM, 0, 0, 0, 0, 0, "FILE", "file holding the bearer token",
     NULL, false},
    {"--ca-file", "ca_file", CR_OPT_STRDUP, OFF(ca_file), 0, 0, 0, 0, "FILE",
     "PEM CA bundle to verify an https:// controller", NULL, true},
    {"--tls-cert", "tls_cert", CR_OPT_STRDUP, OFF(tls_cert), 0, 0, 0, 0, "FILE",
     "serve clients HTTPS with this PEM certificate (chain);\n"
     "SIGHUP reloads it and --tls-key",
     NULL, true},
    {"--tls-key", "tls_key", CR_OPT_STRDUP, OFF(tls_key), 0, 0, 0, 0, "FILE",
     "the PEM private key of --tls-cert", NULL, true},
    {"--site", "site", CR_OPT_STRDUP, OFF(site), 0, 0, 0, 0, "NAME",
     "this gateway's site: replicas on nodes labelled site=NAME take its\n"
     "requests first, others only when none of them can (edge sites)",
     NULL, false},
    {"--max-inflight", "max_inflight", CR_OPT_I32, OFF(max_inflight), 1, 1000000, 0, 0, "N",
     "requests per replica before 503 (default 256)", NULL, false},
    {"--batch-share", "batch_share", CR_OPT_F64, OFF(batch_share), 0, 0, 0.05, 1.0, "F",
     "requests marked X-Corral-Priority: batch may fill a replica only\n"
     "to F x its in-flight limit; interactive ones (the default) the whole\n"
     "limit, so under load batch is refused first (default 0.75)",
     NULL, false},
    {"--hold", "hold_max", CR_OPT_I32, OFF(hold_max), 0, 100000, 0, 0, "N",
     "requests held per service at zero ready replicas\n(default 100; 0: answer 503)", NULL, false},
    {"--hold-timeout", "hold_timeout_s", CR_OPT_DUR, OFF(hold_timeout_ns), 0, GW_S, 0, 0, "DUR",
     "how long a held request waits (default 30s)", NULL, false},
    {"--retry-after", "retry_after_s", CR_OPT_I32, OFF(retry_after_s), 0, 3600, 0, 0, "S",
     "Retry-After of a 503 (default 1)", NULL, false},
    {"--retries", "retries", CR_OPT_I32, OFF(retries), 0, 10, 0, 0, "N",
     "retries after connection failures (default 2)", NULL, false},
    {"--connect-timeout", "connect_timeout_s", CR_OPT_DUR, OFF(connect_timeout_ns), 0, GW_S, 0, 0,
     "DUR", "backend connect timeout (default 2s)", NULL, false},
    {"--upstream-timeout", "upstream_timeout_s", CR_OPT_DUR, OFF(upstream_timeout_ns), 0, GW_S, 0,
     0, "DUR", "backend silence mid-response (default 300s)", NULL, false},
    {"--idle-timeout", "idle_timeout_s", CR_OPT_DUR, OFF(client_idle_ns), 0, GW_S, 0, 0, "DUR",
     "idle keep-alive client (default 60s)", NULL, false},
    {"--header-timeout", "header_timeout_s", CR_OPT_DUR, OFF(header_timeout_ns), 0, GW_S, 0, 0,
     "DUR", "first byte to the end of a request head (default 10s)", NULL, false},
    {"--body-timeout", "body_timeout_s", CR_OPT_DUR, OFF(body_timeout_ns), 0, GW_S, 0, 0, "DUR",
     "request body silence before 408 (default 30s)", NULL, false},
    {"--probe-interval", "probe_interval_s", CR_OPT_DUR, OFF(probe_interval_ns), 0, GW_S, 0, 0,
     "DUR", "health checks of down replicas (default 500ms)", NULL, false},
    {"--report-interval", "report_interval_s", CR_OPT_DUR, OFF(report_interval_ns), 0, GW_S, 0, 0,
     "DUR", "load reports to the controller (default 2s)", NULL, false},
    {"--ready-path", NULL, CR_OPT_CUSTOM, 0, 0, 0, 0, 0, "PATH",
     "readiness path of static services (default /health)", NULL, false},
    {"--scrape", NULL, CR_OPT_CUSTOM, 0, 0, 0, 0, 0, NULL,
     "scrape replicas' /metrics for vLLM load signals", NULL, false},
    {"--max-clients", "max_clients", CR_OPT_I32, OFF(max_clients), 1, 1000000, 0, 0, "N",
     "client connections open at once (default 16384, and at\nmost (RLIMIT_NOFILE - 64) / 2)", NULL,
     false},
    {"--shutdown-grace", "shutdown_grace_s", CR_OPT_DUR, OFF(shutdown_grace_ns), 0, GW_S, 0, 0,
     "DUR", "on SIGTERM, time for in-flight requests (default 30s)", NULL, false},
    {"--seed", NULL, CR_OPT_U64, OFF(seed), 0, INT64_MAX, 0, 0, "N", "RNG seed of the peer choice",
     "must be an integer >= 0", false},
    {"--require-keys", "require_keys", CR_OPT_SET, OFF(require_keys), 1, 0, 0, 0, NULL,
     "clients need an API key (Authorization: Bearer crk_...;\n"
     "default: on with --controller, off without)",
     NULL, false},
    {"--no-require-keys", NULL, CR_OPT_SET, OFF(require_keys), 0, 0, 0, 0, NULL,
     "clients need no API key", NULL, false},
    {"--max-body", "max_body_bytes", CR_OPT_I64, OFF(max_body_bytes), 1024, 64 * 1024 * 1024, 0, 0,
     "BYTES", "bodies of model-routed requests, read whole (default 1 MiB)", NULL, true},
    {"--balance", "balance", CR_OPT_CUSTOM, 0, 0, 0, 0, 0, "prefix|p2c",
     "model-routed requests: prompt-prefix affinity with bounded load\n"
     "(default prefix) or least outstanding of two (p2c)",
     NULL, false},
};
#define GW_NOPTS (sizeof gw_opts / sizeof gw_opts[0])

const cr_opt *gw_conf_opts(size_t *n)
{
    *n = GW_NOPTS;
    return gw_opts;
}

/* A JSON value as cr_opt reads config values. */
static cr_opt_value opt_value(const json_t *v)
{
    cr_opt_value o = {.kind = CR_OPT_V_OTHER};
    if (json_is_integer(v)) {
        o.kind = CR_OPT_V_INT;
        o.i = json_integer_value(v);
        o.d = (double)o.i;
    } else if (json_is_real(v)) {
        o.kind = CR_OPT_V_REAL;
        o.d = json_real_value(v);
    } else if (json_is_string(v)) {
        o.kind = CR_OPT_V_STR;
        o.s = json_string_value(v);
    } else if (json_is_boolean(v)) {
        o.kind = CR_OPT_V_BOOL;
        o.b = json_is_true(v);
    }
    return o;
}

static int json_int(json_t *v, const char *path, const char *field, int64_t lo, int64_t hi,
                    int32_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        char msg[96];
        snprintf(msg, sizeof msg, "must be an integer %lld..%lld", (long long)lo, (long long)hi);
        return json_err(path, field, msg);
    }
    *out = (int32_t)json_integer_value(v);
    return 0;
}

static bool valid_model_name(const char *mn)
{
    return mn && mn[0] && strlen(mn) < GW_MODEL_MAX && !strpbrk(mn, " \"\\,\r\n");
}

/* services[idx].adapters: names, at most GW_ADAPTER_MAX, none twice and
 * none one of the service's model names. */
static int load_adapters(json_t *v, size_t idx, const char *path, gw_service_conf *s)
{
    char field[96];
    snprintf(field, sizeof field, "services[%zu].adapters", idx);
    if (!json_is_array(v) || json_array_size(v) > GW_ADAPTER_MAX) {
        return json_err(path, field, "must be an array of at most 64 LoRA adapter names");
    }
    for (size_t i = 0; i < s->adapter_count; i++) {
        free(s->adapters[i]);
    }
    CR_FREE(s->adapters);
    s->adapter_count = 0;
    s->adapters = cr_calloc(json_array_size(v) + 1, sizeof *s->adapters);
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e)
    {
        const char *an = json_string_value(e);
        snprintf(field, sizeof field, "services[%zu].adapters[%zu]", idx, i);
        if (!valid_model_name(an)) {
            return json_err(path, field,
                            "must be an adapter name (1..127 bytes, no spaces, quotes, commas)");
        }
        for (size_t j = 0; j < s->adapter_count; j++) {
            if (strcmp(s->adapters[j], an) == 0) {
                return json_err(path, field, "is listed twice");
            }
        }
        s->adapters[s->adapter_count++] = cr_strdup(an);
    }
    return 0;
}

/* An endpoint object {"address": "host:port", "adapters": [...]}: the
 * adapters (of the service's) this replica holds. */
static int load_endpoint_object(json_t *e, const char *field, const char *path,
                                const gw_service_conf *s, gw_endpoint *ep)
{
    char f[160];
    const char *key;
    json_t *v;
    json_t *addr = json_object_get(e, "address");
    snprintf(f, sizeof f, "%s.address", field);
    if (!json_is_string(addr) || gw_endpoint_parse(json_string_value(addr), ep) != 0) {
        return json_err(path, f, "must be \"host:port\"");
    }
    json_object_foreach(e, key, v)
    {
        snprintf(f, sizeof f, "%s.%s", field, key);
        if (strcmp(key, "address") == 0) {
            continue;
        }
        if (strcmp(key, "adapters") != 0) {
            return json_err(path, f, "unknown member");
        }
        if (!json_is_array(v)) {
            return json_err(path, f, "must be an array of the service's adapter names");
        }
        ep->adapters_set = true;
        size_t i;
        json_t *a;
        json_array_foreach(v, i, a)
        {
            snprintf(f, sizeof f, "%s.adapters[%zu]", field, i);
            const char *an = json_string_value(a);
            size_t j = 0;
            while (an && j < s->adapter_count && strcmp(s->adapters[j], an) != 0) {
                j++;
            }
            if (!an || j == s->adapter_count) {
                return json_err(path, f, "is not one of the service's \"adapters\"");
            }
            ep->adapters |= (uint64_t)1 << j;
        }
    }
    return 0;
}

static int load_service(json_t *sv, size_t idx, const char *path, gw_conf *c)
{
    char field[96];
    if (!json_is_object(sv)) {
        snprintf(field, sizeof field, "services[%zu]", idx);
        return json_err(path, field, "must be an object");
    }
    json_t *name = json_object_get(sv, "name");
    snprintf(field, sizeof field, "services[%zu].name", idx);
    if (!json_is_string(name) ||
        !valid_service_name(json_string_value(name), strlen(json_string_value(name)))) {
        return json_err(path, field,
                        "must be a name of letters, digits, '-', '_', '.' (not metrics/healthz)");
    }
    gw_service_conf *s =
        service_conf_get(c, json_string_value(name), strlen(json_string_value(name)));
    /* The adapters before the endpoints, which name them. */
    json_t *adapters = json_object_get(sv, "adapters");
    if (adapters && load_adapters(adapters, idx, path, s) != 0) {
        return CR_EINVAL;
    }
    const char *key;
    json_t *v;
    json_object_foreach(sv, key, v)
    {
        snprintf(field, sizeof field, "services[%zu].%s", idx, key);
        if (strcmp(key, "name") == 0 || strcmp(key, "adapters") == 0) {
            continue;
        } else if (strcmp(key, "endpoints") == 0) {
            s->static_eps = true;
            if (!json_is_array(v)) {
                return json_err(path, field, "must be an array of \"host:port\"");
            }
            size_t i;
            json_t *e;
            json_array_foreach(v, i, e)
            {
                gw_endpoint ep;
                memset(&ep, 0, sizeof ep);
                snprintf(field, sizeof field, "services[%zu].endpoints[%zu]", idx, i);
                if (json_is_object(e)) {
                    if (load_endpoint_object(e, field, path, s, &ep) != 0) {
                        return CR_EINVAL;
                    }
                } else if (!json_is_string(e) ||
                           gw_endpoint_parse(json_string_value(e), &ep) != 0) {
                    return json_err(path, field,
                                    "must be \"host:port\" or {\"address\": \"host:port\", "
                                    "\"adapters\": [...]}");
                }
                add_endpoint(s, &ep);
            }
        } else if (strcmp(key, "ready_path") == 0) {
            if (!json_is_string(v) || json_string_value(v)[0] != '/' ||
                strlen(json_string_value(v)) >= sizeof s->ready_path ||
                strpbrk(json_string_value(v), " \r\n")) {
                return json_err(path, field, "must be a path starting with '/'");
            }
            snprintf(s->ready_path, sizeof s->ready_path, "%s", json_string_value(v));
        } else if (strcmp(key, "max_inflight") == 0) {
            if (json_int(v, path, field, 1, 1000000, &s->max_inflight) != 0) {
                return CR_EINVAL;
            }
        } else if (strcmp(key, "slo") == 0) {
            const char *sk;
            json_t *sv2;
            if (!json_is_object(v)) {
                return json_err(path, field, "must be {\"ttft_ms\": N, \"tpot_ms\": N}");
            }
            json_object_foreach(v, sk, sv2)
            {
                snprintf(field, sizeof field, "services[%zu].slo.%s", idx, sk);
                bool ttft = strcmp(sk, "ttft_ms") == 0;
                if (!ttft && strcmp(sk, "tpot_ms") != 0) {
                    return json_err(path, field, "unknown member (ttft_ms, tpot_ms)");
                }
                double d = json_number_value(sv2);
                if (!json_is_number(sv2) || !(d >= 0.01 && d <= 1e7)) {
                    return json_err(path, field, "must be a number of ms, 0.01..1e7");
                }
                *(ttft ? &s->ttft_target_ms : &s->tpot_target_ms) = d;
            }
        } else if (strcmp(key, "scrape_metrics") == 0) {
            if (!json_is_boolean(v)) {
                return json_err(path, field, "must be true or false");
            }
            s->scrape = json_is_true(v);
        } else if (strcmp(key, "tenant") == 0) {
            if (!json_is_string(v) || strlen(json_string_value(v)) >= sizeof s->tenant ||
                !valid_service_name(json_string_value(v), strlen(json_string_value(v)))) {
                return json_err(path, field, "must be a tenant name");
            }
            snprintf(s->tenant, sizeof s->tenant, "%s", json_string_value(v));
        } else if (strcmp(key, "models") == 0) {
            if (!json_is_array(v) || json_array_size(v) > 64) {
                return json_err(path, field, "must be an array of at most 64 model names");
            }
            for (size_t i = 0; i < s->model_count; i++) {
                free(s->models[i]);
            }
            CR_FREE(s->models);
            s->model_count = 0;
            s->models = cr_calloc(json_array_size(v) + 1, sizeof *s->models);
            size_t i;
            json_t *e;
            json_array_foreach(v, i, e)
            {
                const char *mn = json_string_value(e);
                if (!valid_model_name(mn)) {
                    snprintf(field, sizeof field, "services[%zu].models[%zu]", idx, i);
                    return json_err(
                        path, field,
                        "must be a model name (1..127 bytes, no spaces, quotes, commas)");
                }
                s->models[s->model_count++] = cr_strdup(mn);
            }
        } else {
            return json_err(path, field, "unknown member");
        }
    }
    snprintf(field, sizeof field, "services[%zu].adapters", idx);
    if (s->adapter_count && !s->model_count) {
        return json_err(path, field, "need the base model in \"models\" (its first name)");
    }
    for (size_t i = 0; i < s->adapter_count; i++) {
        for (size_t j = 0; j < s->model_count; j++) {
            if (strcmp(s->adapters[i], s->models[j]) == 0) {
                snprintf(field, sizeof field, "services[%zu].adapters[%zu]", idx, i);
                return json_err(path, field, "is also one of the service's \"models\"");
            }
        }
    }
    return 0;
}

static int load_root(json_t *root, const char *path, gw_conf *c);

int gw_conf_load_file(const char *path, gw_conf *c)
{
    json_error_t err;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!root) {
        fprintf(stderr, "corral gateway: %s:%d:%d: %s\n", path, err.line, err.column, err.text);
        return CR_EPARSE;
    }
    return load_root(root, path, c);
}

int gw_conf_load_text(const char *text, size_t len, const char *name, gw_conf *c)
{
    json_error_t err;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (!root) {
        fprintf(stderr, "corral gateway: %s:%d:%d: %s\n", name, err.line, err.column, err.text);
        return CR_EPARSE;
    }
    return load_root(root, name, c);
}

/* The config members the table leaves to the gateway: listen, balance,
 * services. */
static int value_custom(gw_conf *c, const char *key, json_t *v, const char *path)
{
    if (strcmp(key, "listen") == 0) {
        if (!json_is_string(v) || parse_listen(json_string_value(v), c, "listen") != 0) {
            return json_err(path, key, "must be \"ADDR:PORT\"");
        }
    } else if (strcmp(key, "balance") == 0) {
        const char *b = json_string_value(v);
        if (!b || (strcmp(b, "prefix") != 0 && strcmp(b, "p2c") != 0)) {
            return json_err(path, key, "must be \"prefix\" or \"p2c\"");
        }
        c->prefix_affinity = strcmp(b, "prefix") == 0;
    } else {
        if (!json_is_array(v)) {
            return json_err(path, key, "must be an array of objects");
        }
        size_t i;
        json_t *sv;
        json_array_foreach(v, i, sv)
        {
            int rc = load_service(sv, i, path, c);
            if (rc != 0) {
                return rc;
            }
        }
    }
    return 0;
}

/* Takes root. */
static int load_root(json_t *root, const char *path, gw_conf *c)
{
    if (c->listen_port == 0) {
        conf_defaults(c);
    }
    int rc = 0;
    if (!json_is_object(root)) {
        rc = json_err(path, "(top)", "must be an object");
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        const cr_opt *o = cr_opt_by_key(gw_opts, GW_NOPTS, key);
        char why[128];
        if (!o) {
            rc = json_err(path, key, "unknown member");
        } else if (o->type != CR_OPT_CUSTOM) {
            cr_opt_value ov = opt_value(v);
            if (cr_opt_set_value(o, c, &ov, why, sizeof why) != 0) {
                rc = json_err(path, key, why);
            }
        } else {
            rc = value_custom(c, key, v, path);
        }
        if (rc != 0) {
            goto out;
        }
    }
out:
    json_decref(root);
    return rc;
}

static void usage(FILE *f)
{
    fputs("usage: corral gateway --listen ADDR:PORT [options]\n\n", f);
    cr_opt_help(f, gw_opts, GW_NOPTS, 28);
}

/* What flags leave for after the loop: they apply to every service. */
typedef struct flag_state {
    const char *ready_path; /* --ready-path, borrowed from argv */
    bool scrape;            /* --scrape */
} flag_state;

/* The flags the table leaves to the gateway (CR_OPT_CUSTOM rows and those
 * with flag_by_role). */
static int flag_custom(gw_conf *c, const char *flag, const char *arg, flag_state *st)
{
    if (strcmp(flag, "--listen") == 0) {
        return parse_listen(arg, c, "--listen");
    } else if (strcmp(flag, "--service") == 0) {
        return parse_service_flag(c, arg);
    } else if (strcmp(flag, "--config") == 0) {
        return 0; /* read before the other flags */
    } else if (strcmp(flag, "--controller") == 0) {
        if (strncmp(arg, "http://", 7) != 0 && strncmp(arg, "https://", 8) != 0) {
            fprintf(stderr, "corral gateway: --controller: want an http(s):// URL, got '%s'\n",
                    arg);
            return CR_EINVAL;
        }
        free(c->controller);
        c->controller = cr_strdup(arg);
    } else if (strcmp(flag, "--token-file") == 0) {
        return token_from_file(c, arg, "--token-file");
    } else if (strcmp(flag, "--ca-file") == 0) {
        if (access(arg, R_OK) != 0) {
            fprintf(stderr, "corral gateway: --ca-file: cannot read '%s'\n", arg);
            return CR_EINVAL;
        }
        free(c->ca_file);
        c->ca_file = cr_strdup(arg);
    } else if (strcmp(flag, "--tls-cert") == 0 || strcmp(flag, "--tls-key") == 0) {
        if (access(arg, R_OK) != 0) {
            fprintf(stderr, "corral gateway: %s: cannot read '%s'\n", flag, arg);
            return CR_EINVAL;
        }
        char **dst = flag[6] == 'c' ? &c->tls_cert : &c->tls_key;
        free(*dst);
        *dst = cr_strdup(arg);
    } else if (strcmp(flag, "--ready-path") == 0) {
        if (arg[0] != '/' || strlen(arg) >= 256 || strpbrk(arg, " \r\n")) {
            fprintf(stderr, "corral gateway: --ready-path: must start with '/', got '%s'\n", arg);
            return CR_EINVAL;
        }
        st->ready_path = arg;
    } else if (strcmp(flag, "--scrape") == 0) {
        st->scrape = true;
    } else if (strcmp(flag, "--balance") == 0) {
        if (strcmp(arg, "prefix") != 0 && strcmp(arg, "p2c") != 0) {
            fprintf(stderr, "corral gateway: --balance: '%s': want prefix or p2c\n", arg);
            return CR_EINVAL;
        }
        c->prefix_affinity = strcmp(arg, "prefix") == 0;
    } else { /* --max-body */
        int64_t b = 0;
        if (cr_parse_bytes(arg, &b) != 0 || b < 1024 || b > 64 * 1024 * 1024) {
            fprintf(stderr, "corral gateway: --max-body: '%s': want 1KiB..64MiB\n", arg);
            return CR_EINVAL;
        }
        c->max_body_bytes = b;
    }
    return 0;
}

int cr_gateway_config_check(const char *path)
{
    gw_conf c;
    conf_defaults(&c);
    int rc = gw_conf_load_file(path, &c);
    gw_conf_fini(&c);
    return rc;
}

/* Returns 0, 1 for --help (exit 0), or CR_EINVAL (exit 2). */
int gw_conf_parse_args(int argc, char **argv, gw_conf *c)
{
    conf_defaults(c);
    /* getopt's table, made from ours: a flag's val is 256 + its row. */
    struct option opts[GW_NOPTS + 2];
    size_t no = 0;
    for (size_t i = 0; i < GW_NOPTS; i++) {
        if (gw_opts[i].flag) {
            opts[no++] = (struct option){gw_opts[i].flag + 2,
                                         gw_opts[i].arg ? required_argument : no_argument, NULL,
                                         256 + (int)i};
        }
    }
    opts[no++] = (struct option){"help", no_argument, NULL, 'h'};
    opts[no] = (struct option){NULL, 0, NULL, 0};
    /* The config file first, so flags override it. */
    for (int i = 1; i < argc - 1; i++) {
        if (strcmp(argv[i], "--config") == 0) {
            c->config_path = cr_strdup(argv[i + 1]);
            if (gw_conf_load_file(c->config_path, c) != 0) {
                return CR_EINVAL;
            }
        }
    }
    flag_state st = {NULL, false};
    optind = 1;
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        int rc = 0;
        if (o >= 256) {
            const cr_opt *row = &gw_opts[o - 256];
            char why[128];
            rc = cr_opt_set_flag(row, c, optarg, why, sizeof why);
            if (rc == CR_ENOTSUP) {
                rc = flag_custom(c, row->flag, optarg, &st);
            } else if (rc != 0) {
                fprintf(stderr, "corral gateway: %s: %s, got '%s'\n", row->flag, why,
                        optarg ? optarg : "");
            }
        } else if (o == 'h') {
            usage(stdout);
            return 1;
        } else if (o == ':') {
            fprintf(stderr, "corral gateway: %s: needs a value\n", argv[optind - 1]);
            rc = CR_EINVAL;
        } else {
            fprintf(stderr, "corral gateway: unknown flag '%s'\n", argv[optind - 1]);
            usage(stderr);
            rc = CR_EINVAL;
        }
        if (rc != 0) {
            return CR_EINVAL;
        }
    }
    const char *ready_path = st.ready_path;
    bool scrape = st.scrape;
    if (optind < argc) {
        fprintf(stderr, "corral gateway: unexpected argument '%s'\n", argv[optind]);
        return CR_EINVAL;
    }
    if (!c->token) {
        const char *t = getenv("CORRAL_TOKEN"), *tf = getenv("CORRAL_TOKEN_FILE");
        if (t && *t) {
            c->token = cr_strdup(t);
        } else if (tf && *tf && token_from_file(c, tf, "CORRAL_TOKEN_FILE") != 0) {
            return CR_EINVAL;
        }
    }
    for (size_t i = 0; i < c->service_count; i++) {
        if (ready_path && !c->services[i].ready_path[0]) {
            snprintf(c->services[i].ready_path, sizeof c->services[i].ready_path, "%s", ready_path);
        }
        c->services[i].scrape |= scrape;
        if (c->services[i].endpoint_count > 0) {
            c->services[i].static_eps = true;
        }
        if (!c->controller && !c->services[i].static_eps) {
            fprintf(stderr,
                    "corral gateway: --service %s: no endpoints and no --controller to ask\n",
                    c->services[i].name);
            return CR_EINVAL;
        }
    }
    if (c->require_keys == 1 && !c->controller) {
        fprintf(stderr, "corral gateway: --require-keys: the keys come from the controller: "
                        "give --controller\n");
        return CR_EINVAL;
    }
    if (!c->tls_cert != !c->tls_key) {
        fprintf(stderr, "corral gateway: %s: needs %s too\n",
                c->tls_cert ? "--tls-cert" : "--tls-key", c->tls_cert ? "--tls-key" : "--tls-cert");
        return CR_EINVAL;
    }
    if (!c->controller && c->service_count == 0) {
        fprintf(stderr,
                "corral gateway: give --service NAME=host:port, --config or --controller\n");
        return CR_EINVAL;
    }
    return 0;
}
