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
#include "cr_parse.h"
#include "cr_time.h"

#include <getopt.h>
#include <jansson.h>
#include <netdb.h>
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
    CR_FREE(c->config_path);
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

static int json_dur(json_t *v, const char *path, const char *field, int64_t *out)
{
    if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 86400.0 * 365) {
        return json_err(path, field, "must be a number of seconds >= 0");
    }
    *out = (int64_t)(json_number_value(v) * 1e9);
    return 0;
}

static int json_int64(json_t *v, const char *path, const char *field, int64_t lo, int64_t hi,
                      int64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        char msg[96];
        snprintf(msg, sizeof msg, "must be an integer %lld..%lld", (long long)lo, (long long)hi);
        return json_err(path, field, msg);
    }
    *out = json_integer_value(v);
    return 0;
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
    const char *key;
    json_t *v;
    json_object_foreach(sv, key, v)
    {
        snprintf(field, sizeof field, "services[%zu].%s", idx, key);
        if (strcmp(key, "name") == 0) {
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
                if (!json_is_string(e) || gw_endpoint_parse(json_string_value(e), &ep) != 0) {
                    snprintf(field, sizeof field, "services[%zu].endpoints[%zu]", idx, i);
                    return json_err(path, field, "must be \"host:port\"");
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
                if (!mn || !mn[0] || strlen(mn) >= GW_MODEL_MAX || strpbrk(mn, " \"\\,\r\n")) {
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
        if (strcmp(key, "listen") == 0) {
            if (!json_is_string(v) || parse_listen(json_string_value(v), c, "listen") != 0) {
                rc = json_err(path, key, "must be \"ADDR:PORT\"");
                goto out;
            }
        } else if (strcmp(key, "controller") == 0 || strcmp(key, "token") == 0 ||
                   strcmp(key, "ca_file") == 0) {
            if (!json_is_string(v)) {
                rc = json_err(path, key, "must be a string");
                goto out;
            }
            char **dst = strcmp(key, "controller") == 0 ? &c->controller
                         : strcmp(key, "token") == 0    ? &c->token
                                                        : &c->ca_file;
            free(*dst);
            *dst = cr_strdup(json_string_value(v));
        } else if (strcmp(key, "max_inflight") == 0) {
            rc = json_int(v, path, key, 1, 1000000, &c->max_inflight);
        } else if (strcmp(key, "require_keys") == 0) {
            if (!json_is_boolean(v)) {
                rc = json_err(path, key, "must be true or false");
                goto out;
            }
            c->require_keys = json_is_true(v);
        } else if (strcmp(key, "balance") == 0) {
            const char *b = json_string_value(v);
            if (!b || (strcmp(b, "prefix") != 0 && strcmp(b, "p2c") != 0)) {
                rc = json_err(path, key, "must be \"prefix\" or \"p2c\"");
                goto out;
            }
            c->prefix_affinity = strcmp(b, "prefix") == 0;
        } else if (strcmp(key, "max_body_bytes") == 0) {
            rc = json_int64(v, path, key, 1024, 64 * 1024 * 1024, &c->max_body_bytes);
        } else if (strcmp(key, "max_clients") == 0) {
            rc = json_int(v, path, key, 1, 1000000, &c->max_clients);
        } else if (strcmp(key, "hold_max") == 0) {
            rc = json_int(v, path, key, 0, 100000, &c->hold_max);
        } else if (strcmp(key, "retry_after_s") == 0) {
            rc = json_int(v, path, key, 0, 3600, &c->retry_after_s);
        } else if (strcmp(key, "retries") == 0) {
            rc = json_int(v, path, key, 0, 10, &c->retries);
        } else if (strcmp(key, "hold_timeout_s") == 0) {
            rc = json_dur(v, path, key, &c->hold_timeout_ns);
        } else if (strcmp(key, "connect_timeout_s") == 0) {
            rc = json_dur(v, path, key, &c->connect_timeout_ns);
        } else if (strcmp(key, "upstream_timeout_s") == 0) {
            rc = json_dur(v, path, key, &c->upstream_timeout_ns);
        } else if (strcmp(key, "idle_timeout_s") == 0) {
            rc = json_dur(v, path, key, &c->client_idle_ns);
        } else if (strcmp(key, "header_timeout_s") == 0) {
            rc = json_dur(v, path, key, &c->header_timeout_ns);
        } else if (strcmp(key, "body_timeout_s") == 0) {
            rc = json_dur(v, path, key, &c->body_timeout_ns);
        } else if (strcmp(key, "probe_interval_s") == 0) {
            rc = json_dur(v, path, key, &c->probe_interval_ns);
        } else if (strcmp(key, "shutdown_grace_s") == 0) {
            rc = json_dur(v, path, key, &c->shutdown_grace_ns);
        } else if (strcmp(key, "report_interval_s") == 0) {
            rc = json_dur(v, path, key, &c->report_interval_ns);
        } else if (strcmp(key, "services") == 0) {
            if (!json_is_array(v)) {
                rc = json_err(path, key, "must be an array of objects");
                goto out;
            }
            size_t i;
            json_t *sv;
            json_array_foreach(v, i, sv)
            {
                rc = load_service(sv, i, path, c);
                if (rc != 0) {
                    goto out;
                }
            }
        } else {
            rc = json_err(path, key, "unknown member");
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
    fprintf(
        f, "usage: corral gateway --listen ADDR:PORT [options]\n"
           "\n"
           "  --listen ADDR:PORT          where clients connect (default 127.0.0.1:8630)\n"
           "  --service NAME=H:P[,H:P..]  a service and its static endpoints (repeatable)\n"
           "  --service NAME              a service whose endpoints come from the controller\n"
           "  --config FILE               JSON config (see docs/gateway.md); SIGHUP reloads "
           "its services\n"
           "  --controller URL[,URL...]   long-poll endpoints from the controller (several: an HA "
           "trio)\n"
           "  --token T                   bearer token for the controller (visible in ps: prefer\n"
           "                              --token-file, CORRAL_TOKEN or CORRAL_TOKEN_FILE)\n"
           "  --token-file FILE           file holding the bearer token\n"
           "  --ca-file FILE              PEM CA bundle to verify an https:// controller\n"
           "  --max-inflight N            requests per replica before 503 (default 256)\n"
           "  --hold N                    requests held per service at zero ready replicas "
           "(default 100; 0: answer 503)\n"
           "  --hold-timeout DUR          how long a held request waits (default 30s)\n"
           "  --retry-after S             Retry-After of a 503 (default 1)\n"
           "  --retries N                 retries after connection failures (default 2)\n"
           "  --connect-timeout DUR       backend connect timeout (default 2s)\n"
           "  --upstream-timeout DUR      backend silence mid-response (default 300s)\n"
           "  --idle-timeout DUR          idle keep-alive client (default 60s)\n"
           "  --header-timeout DUR        first byte to the end of a request head (default 10s)\n"
           "  --body-timeout DUR          request body silence before 408 (default 30s)\n"
           "  --probe-interval DUR        health checks of down replicas (default 500ms)\n"
           "  --report-interval DUR       load reports to the controller (default 2s)\n"
           "  --ready-path PATH           readiness path of static services (default /health)\n"
           "  --scrape                    scrape replicas' /metrics for vLLM load signals\n"
           "  --max-clients N             client connections open at once (default 16384, "
           "and at most (RLIMIT_NOFILE - 64) / 2)\n"
           "  --shutdown-grace DUR        on SIGTERM, time for in-flight requests (default 30s)\n"
           "  --seed N                    RNG seed of the peer choice\n"
           "  --require-keys, --no-require-keys\n"
           "                              clients need an API key (Authorization: Bearer crk_...;\n"
           "                              default: on with --controller, off without)\n"
           "  --max-body BYTES            bodies of model-routed requests, read whole (default "
           "1 MiB)\n"
           "  --balance prefix|p2c        model-routed requests: prompt-prefix affinity with "
           "bounded load\n"
           "                              (default prefix) or least outstanding of two (p2c)\n");
}

static int dur_flag(const char *flag, const char *arg, int64_t *out)
{
    if (cr_duration_parse(arg, out) != 0 || *out < 0) {
        /* Also accept "250ms". */
        size_t n = strlen(arg);
        int64_t ms;
        if (n > 2 && strcmp(arg + n - 2, "ms") == 0) {
            char tmp[32];
            if (n - 2 < sizeof tmp) {
                memcpy(tmp, arg, n - 2);
                tmp[n - 2] = '\0';
                if (cr_parse_i64(tmp, 0, INT64_C(86400000), &ms) == 0) {
                    *out = ms * CR_NS_PER_MS;
                    return 0;
                }
            }
        }
        fprintf(stderr, "corral gateway: %s: bad duration '%s' (e.g. 30s, 500ms, 2m)\n", flag, arg);
        return CR_EINVAL;
    }
    return 0;
}

static int int_flag(const char *flag, const char *arg, int64_t lo, int64_t hi, int32_t *out)
{
    int64_t v;
    if (cr_parse_i64(arg, lo, hi, &v) != 0) {
        fprintf(stderr, "corral gateway: %s: must be an integer %lld..%lld, got '%s'\n", flag,
                (long long)lo, (long long)hi, arg);
        return CR_EINVAL;
    }
    *out = (int32_t)v;
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
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"service", required_argument, NULL, 's'},
        {"config", required_argument, NULL, 'c'},
        {"controller", required_argument, NULL, 'C'},
        {"token", required_argument, NULL, 't'},
        {"max-inflight", required_argument, NULL, 'm'},
        {"hold", required_argument, NULL, 'H'},
        {"hold-timeout", required_argument, NULL, 'T'},
        {"retry-after", required_argument, NULL, 'r'},
        {"retries", required_argument, NULL, 'R'},
        {"connect-timeout", required_argument, NULL, 1},
        {"upstream-timeout", required_argument, NULL, 2},
        {"idle-timeout", required_argument, NULL, 3},
        {"probe-interval", required_argument, NULL, 4},
        {"report-interval", required_argument, NULL, 5},
        {"ready-path", required_argument, NULL, 6},
        {"scrape", no_argument, NULL, 7},
        {"seed", required_argument, NULL, 8},
        {"shutdown-grace", required_argument, NULL, 9},
        {"max-clients", required_argument, NULL, 10},
        {"token-file", required_argument, NULL, 11},
        {"ca-file", required_argument, NULL, 12},
        {"header-timeout", required_argument, NULL, 13},
        {"body-timeout", required_argument, NULL, 14},
        {"require-keys", no_argument, NULL, 15},
        {"no-require-keys", no_argument, NULL, 16},
        {"max-body", required_argument, NULL, 17},
        {"balance", required_argument, NULL, 18},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    /* The config file first, so flags override it. */
    for (int i = 1; i < argc - 1; i++) {
        if (strcmp(argv[i], "--config") == 0) {
            c->config_path = cr_strdup(argv[i + 1]);
            if (gw_conf_load_file(c->config_path, c) != 0) {
                return CR_EINVAL;
            }
        }
    }
    const char *ready_path = NULL;
    bool scrape = false;
    optind = 1;
    opterr = 0;
    int o;
    int64_t seed;
    while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        int rc = 0;
        switch (o) {
        case 'l':
            rc = parse_listen(optarg, c, "--listen");
            break;
        case 's':
            rc = parse_service_flag(c, optarg);
            break;
        case 'c':
            break;
        case 'C':
            if (strncmp(optarg, "http://", 7) != 0 && strncmp(optarg, "https://", 8) != 0) {
                fprintf(stderr, "corral gateway: --controller: want an http(s):// URL, got '%s'\n",
                        optarg);
                rc = CR_EINVAL;
            } else {
                free(c->controller);
                c->controller = cr_strdup(optarg);
            }
            break;
        case 't':
            free(c->token);
            c->token = cr_strdup(optarg);
            break;
        case 11:
            rc = token_from_file(c, optarg, "--token-file");
            break;
        case 12:
            if (access(optarg, R_OK) != 0) {
                fprintf(stderr, "corral gateway: --ca-file: cannot read '%s'\n", optarg);
                rc = CR_EINVAL;
            } else {
                free(c->ca_file);
                c->ca_file = cr_strdup(optarg);
            }
            break;
        case 'm':
            rc = int_flag("--max-inflight", optarg, 1, 1000000, &c->max_inflight);
            break;
        case 'H':
            rc = int_flag("--hold", optarg, 0, 100000, &c->hold_max);
            break;
        case 'T':
            rc = dur_flag("--hold-timeout", optarg, &c->hold_timeout_ns);
            break;
        case 'r':
            rc = int_flag("--retry-after", optarg, 0, 3600, &c->retry_after_s);
            break;
        case 'R':
            rc = int_flag("--retries", optarg, 0, 10, &c->retries);
            break;
        case 1:
            rc = dur_flag("--connect-timeout", optarg, &c->connect_timeout_ns);
            break;
        case 2:
            rc = dur_flag("--upstream-timeout", optarg, &c->upstream_timeout_ns);
            break;
        case 3:
            rc = dur_flag("--idle-timeout", optarg, &c->client_idle_ns);
            break;
        case 4:
            rc = dur_flag("--probe-interval", optarg, &c->probe_interval_ns);
            break;
        case 5:
            rc = dur_flag("--report-interval", optarg, &c->report_interval_ns);
            break;
        case 6:
            if (optarg[0] != '/' || strlen(optarg) >= 256 || strpbrk(optarg, " \r\n")) {
                fprintf(stderr, "corral gateway: --ready-path: must start with '/', got '%s'\n",
                        optarg);
                rc = CR_EINVAL;
            }
            ready_path = optarg;
            break;
        case 7:
            scrape = true;
            break;
        case 8:
            if (cr_parse_i64(optarg, 0, INT64_MAX, &seed) != 0) {
                fprintf(stderr, "corral gateway: --seed: must be an integer >= 0\n");
                rc = CR_EINVAL;
            } else {
                c->seed = (uint64_t)seed;
            }
            break;
        case 9:
            rc = dur_flag("--shutdown-grace", optarg, &c->shutdown_grace_ns);
            break;
        case 10:
            rc = int_flag("--max-clients", optarg, 1, 1000000, &c->max_clients);
            break;
        case 13:
            rc = dur_flag("--header-timeout", optarg, &c->header_timeout_ns);
            break;
        case 14:
            rc = dur_flag("--body-timeout", optarg, &c->body_timeout_ns);
            break;
        case 15:
        case 16:
            c->require_keys = o == 15;
            break;
        case 18:
            if (strcmp(optarg, "prefix") != 0 && strcmp(optarg, "p2c") != 0) {
                fprintf(stderr, "corral gateway: --balance: '%s': want prefix or p2c\n", optarg);
                rc = CR_EINVAL;
            }
            c->prefix_affinity = strcmp(optarg, "prefix") == 0;
            break;
        case 17: {
            int64_t b = 0;
            if (cr_parse_bytes(optarg, &b) != 0 || b < 1024 || b > 64 * 1024 * 1024) {
                fprintf(stderr, "corral gateway: --max-body: '%s': want 1KiB..64MiB\n", optarg);
                rc = CR_EINVAL;
            } else {
                c->max_body_bytes = b;
            }
            break;
        }
        case 'h':
            usage(stdout);
            return 1;
        case ':':
            fprintf(stderr, "corral gateway: %s: needs a value\n", argv[optind - 1]);
            rc = CR_EINVAL;
            break;
        default:
            fprintf(stderr, "corral gateway: unknown flag '%s'\n", argv[optind - 1]);
            usage(stderr);
            rc = CR_EINVAL;
            break;
        }
        if (rc != 0) {
            return CR_EINVAL;
        }
    }
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
    if (!c->controller && c->service_count == 0) {
        fprintf(stderr,
                "corral gateway: give --service NAME=host:port, --config or --controller\n");
        return CR_EINVAL;
    }
    return 0;
}
