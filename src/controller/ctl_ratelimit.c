/*
 * ctl_ratelimit.c - request rate limits of the API (issue 10, "limits that
 * hold under abuse").
 *
 * Two tables of token buckets (cr_ratelimit.h), each of at most
 * rate_limit_table buckets with its own lock:
 *   tokens     one bucket per user or join token (rate_limit_rps,
 *              rate_limit_burst), charged after the token is checked and
 *              before anything else is done for the request (audit entry,
 *              store, the global lock);
 *   addresses  one bucket per client address (an IPv6 client by its /64,
 *              which one host is usually given whole) for every request
 *              without a valid token: the open routes (/healthz,
 *              /v1/health, /v1/version, /metrics, /ui, unknown paths) and
 *              failed authentication (rate_limit_anon_rps,
 *              rate_limit_anon_burst), so a flood of bad tokens costs a
 *              bucket lookup and no log line.
 * Admin tokens and the agents' node tokens are not limited: heartbeats and
 * desired-state polls never wait behind a user's flood, and operators keep
 * control of a cluster under attack. The tables are separate so that a
 * client cycling addresses cannot push the tokens' buckets out.
 *
 * Over the limit: 429 with Retry-After (whole seconds until one request is
 * allowed again) and the API's error body naming the config member
 * ("limit"), counted in corral_http_rate_limited_total{kind}. A WARN line
 * at most every 10 s says how many were refused and the latest refused.
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_parse.h"
#include "cr_ratelimit.h"
#include "cr_time.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#define WARN_EVERY_NS (10 * CR_NS_PER_SEC)
#define RATE_MAX      1e6 /* requests a second, either limit */
#define BURST_MAX     1000000

enum { K_TOKEN = 0, K_ADDR, K_COUNT };
static const char *const kind_names[K_COUNT] = {"token", "address"};

typedef struct ctl_rl ctl_rl;

struct ctl_rl {
    cr_rl *tab[K_COUNT];               /* token buckets, address buckets */
    _Atomic uint64_t limited[K_COUNT]; /* requests answered 429 */
    _Atomic int64_t warned_ns;         /* monotonic time of the last WARN line */
    _Atomic uint64_t unwarned;         /* refusals since that line */
};

void ctl_rl_defaults(ctl_config *cfg)
{
    cfg->rate_limit_rps = 100;
    cfg->rate_limit_burst = 500;
    cfg->rate_limit_anon_rps = 50;
    cfg->rate_limit_anon_burst = 200;
    cfg->rate_limit_table = 16384;
}

int ctl_rl_config(const json_t *v, ctl_config *cfg, cr_json_err *err)
{
    int rc;
    if ((rc =
             cr_json_num(v, "", "rate_limit_rps", false, 0, RATE_MAX, &cfg->rate_limit_rps, err)) ||
        (rc = cr_json_int(v, "", "rate_limit_burst", false, 1, BURST_MAX, &cfg->rate_limit_burst,
                          err)) ||
        (rc = cr_json_num(v, "", "rate_limit_anon_rps", false, 0, RATE_MAX,
                          &cfg->rate_limit_anon_rps, err)) ||
        (rc = cr_json_int(v, "", "rate_limit_anon_burst", false, 1, BURST_MAX,
                          &cfg->rate_limit_anon_burst, err)) ||
        (rc = cr_json_int(v, "", "rate_limit_table", false, 16, CR_RL_MAX_ENTRIES,
                          &cfg->rate_limit_table, err))) {
        return rc;
    }
    return 0;
}

int ctl_rl_flag(ctl_config *cfg, const char *name, const char *arg)
{
    bool rate = strcmp(name, "rate-limit-rps") == 0 || strcmp(name, "rate-limit-anon-rps") == 0;
    bool anon = strstr(name, "-anon-") != NULL;
    bool table = strcmp(name, "rate-limit-table") == 0;
    double x = 0;
    int64_t n = 0;
    int rc = rate    ? cr_parse_f64(arg, 0, RATE_MAX, &x)
             : table ? cr_parse_i64(arg, 16, CR_RL_MAX_ENTRIES, &n)
                     : cr_parse_i64(arg, 1, BURST_MAX, &n);
    if (rc != 0) {
        fprintf(stderr, "corral controller: --%s: expected %s, got '%s'\n", name,
                rate    ? "requests a second 0..1000000 (0: no limit)"
                : table ? "buckets 16..10000000"
                        : "requests 1..1000000",
                arg);
        return CR_EINVAL;
    }
    if (table) {
        cfg->rate_limit_table = n;
    } else if (rate) {
        *(anon ? &cfg->rate_limit_anon_rps : &cfg->rate_limit_rps) = x;
    } else {
        *(anon ? &cfg->rate_limit_anon_burst : &cfg->rate_limit_burst) = n;
    }
    return 0;
}

int ctl_rl_start(ctl *c)
{
    ctl_rl *r = cr_calloc(1, sizeof *r);
    int rc = 0;
    for (int k = 0; k < K_COUNT && rc == 0; k++) {
        rc = cr_rl_new((size_t)c->cfg.rate_limit_table, &r->tab[k]);
    }
    if (rc != 0) {
        fprintf(stderr, "corral controller: rate limit tables of %lld buckets: %s\n",
                (long long)c->cfg.rate_limit_table, cr_strerror(rc));
        for (int k = 0; k < K_COUNT; k++) {
            cr_rl_free(r->tab[k]);
        }
        free(r);
        return rc;
    }
    c->rl = r;
    return 0;
}

void ctl_rl_free(ctl *c)
{
    if (!c->rl) {
        return;
    }
    for (int k = 0; k < K_COUNT; k++) {
        cr_rl_free(c->rl->tab[k]);
    }
    free(c->rl);
    c->rl = NULL;
}

/* The bucket key of a client address: IPv4 (also mapped in IPv6) by the
 * address, IPv6 by its /64, anything else by its text. */
static size_t addr_key(const char *peer, uint8_t key[CR_RL_KEY_MAX])
{
    struct in_addr a4;
    struct in6_addr a6;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (inet_pton(AF_INET, peer, &a4) == 1) {
        key[0] = '4';
        memcpy(key + 1, &a4, 4);
        return 5;
    }
    if (inet_pton(AF_INET6, peer, &a6) == 1) {
        if (memcmp(a6.s6_addr, mapped, sizeof mapped) == 0) {
            key[0] = '4';
            memcpy(key + 1, a6.s6_addr + 12, 4);
            return 5;
        }
        key[0] = '6';
        memcpy(key + 1, a6.s6_addr, 8);
        return 9;
    }
    size_t n = strnlen(peer, CR_RL_KEY_MAX - 1);
    key[0] = '?';
    memcpy(key + 1, peer, n);
    return n + 1;
}

/* Answer 429 and count it; who names the caller for the log line. */
static void refuse(ctl *c, cr_http_req *req, int kind, unsigned retry_s, const char *who)
{
    ctl_rl *r = c->rl;
    bool anon = kind == K_ADDR;
    double rps = anon ? c->cfg.rate_limit_anon_rps : c->cfg.rate_limit_rps;
    long long burst = (long long)(anon ? c->cfg.rate_limit_anon_burst : c->cfg.rate_limit_burst);
    atomic_fetch_add(&r->limited[kind], 1);
    uint64_t n = atomic_fetch_add(&r->unwarned, 1) + 1;
    int64_t now = cr_mono_ns(), last = atomic_load(&r->warned_ns);
    if ((last == 0 || now - last >= WARN_EVERY_NS) &&
        atomic_compare_exchange_strong(&r->warned_ns, &last, now)) {
        n = atomic_exchange(&r->unwarned, 0);
        cr_warn("rate limit: %llu request(s) answered 429 in the last 10 s at most; the latest "
                "from %s (peer %s)",
                (unsigned long long)n, who, cr_http_peer(req));
    }
    char ra[16];
    snprintf(ra, sizeof ra, "%u", retry_s);
    cr_http_set_route(req, "rate_limited");
    cr_http_add_header(req, "Retry-After", ra);
    char msg[300];
    snprintf(msg, sizeof msg,
             "rate limit: %s may make %g requests a second (bursts of %lld; config '%s', '%s'); "
             "retry after %u s",
             anon ? "a client address without a valid token" : "this token", rps, burst,
             anon ? "rate_limit_anon_rps" : "rate_limit_rps",
             anon ? "rate_limit_anon_burst" : "rate_limit_burst", retry_s);
    ctl_reply_json(req, 429,
                   json_pack("{s:s,s:s,s:s,s:I}", "error", cr_errname(CR_EAGAIN), "message", msg,
                             "limit", anon ? "rate_limit_anon_rps" : "rate_limit_rps",
                             "retry_after_s", (json_int_t)retry_s));
}

bool ctl_rl_allow_token(ctl *c, cr_http_req *req, const cr_principal *p)
{
    if (!c->rl || c->cfg.rate_limit_rps <= 0 || p->role == CR_ROLE_ADMIN ||
        p->role == CR_ROLE_AGENT) {
        return true;
    }
    uint8_t key[CR_RL_KEY_MAX];
    key[0] = 'T';
    key[1] = (uint8_t)p->role;
    memcpy(key + 2, &p->id, sizeof p->id);
    unsigned retry = 0;
    if (cr_rl_take(c->rl->tab[K_TOKEN], key, 2 + sizeof p->id, c->cfg.rate_limit_rps,
                   (double)c->cfg.rate_limit_burst, cr_mono_ns(), &retry)) {
        return true;
    }
    char who[200];
    snprintf(who, sizeof who, "token id=%lld (%s, tenant '%s', name '%s')", (long long)p->id,
             cr_role_name(p->role), p->tenant, p->name);
    refuse(c, req, K_TOKEN, retry, who);
    return false;
}

bool ctl_rl_allow_anon(ctl *c, cr_http_req *req)
{
    if (!c->rl || c->cfg.rate_limit_anon_rps <= 0) {
        return true;
    }
    uint8_t key[CR_RL_KEY_MAX];
    size_t len = addr_key(cr_http_peer(req), key);
    unsigned retry = 0;
    if (cr_rl_take(c->rl->tab[K_ADDR], key, len, c->cfg.rate_limit_anon_rps,
                   (double)c->cfg.rate_limit_anon_burst, cr_mono_ns(), &retry)) {
        return true;
    }
    refuse(c, req, K_ADDR, retry, "a client without a valid token");
    return false;
}

bool ctl_conn_admit(ctl *c, cr_http_req *req, const cr_principal *p)
{
    (void)c;
    if (p && (p->role == CR_ROLE_ADMIN || p->role == CR_ROLE_AGENT)) {
        cr_http_conn_privileged(req);
        return true;
    }
    if (cr_http_conn_reserved(req)) {
        cr_http_set_route(req, "conn_reserved");
        cr_http_add_header(req, "Connection", "close");
        cr_http_add_header(req, "Retry-After", "1");
        ctl_reply_json(req, 503,
                       json_pack("{s:s,s:s,s:s}", "error", cr_errname(CR_EAGAIN), "message",
                                 "this client address holds max_conns_per_ip connections: the "
                                 "ones over it serve agents and admins only",
                                 "limit", "max_conns_per_ip"));
        return false;
    }
    if (!p) {
        return true;
    }
    uint8_t key[2 + sizeof p->id];
    key[0] = 'C';
    key[1] = (uint8_t)p->role;
    memcpy(key + 2, &p->id, sizeof p->id);
    if (cr_http_conn_charge(req, key, sizeof key)) {
        return true;
    }
    cr_http_set_route(req, "conn_per_token");
    cr_http_add_header(req, "Connection", "close");
    cr_http_add_header(req, "Retry-After", "1");
    ctl_reply_json(req, 429,
                   json_pack("{s:s,s:s,s:s}", "error", cr_errname(CR_EAGAIN), "message",
                             "this token holds max_conns_per_token connections already", "limit",
                             "max_conns_per_token"));
    return false;
}

/* One metric family with a sample per kind. */
static void by_kind(cr_buf *b, const char *name, const char *type, const char *help,
                    const double v[K_COUNT])
{
    cr_prom_family(b, name, type, help);
    for (int k = 0; k < K_COUNT; k++) {
        cr_buf l;
        cr_buf_init(&l);
        cr_prom_label(&l, "kind", kind_names[k]);
        cr_prom_sample(b, name, cr_buf_str(&l), v[k]);
        cr_buf_fini(&l);
    }
}

void ctl_rl_metrics(ctl *c, cr_buf *b)
{
    if (!c->rl) {
        return;
    }
    double limited[K_COUNT], held[K_COUNT], evicted[K_COUNT];
    for (int k = 0; k < K_COUNT; k++) {
        size_t n;
        uint64_t ev;
        cr_rl_stats(c->rl->tab[k], &n, &ev);
        held[k] = (double)n;
        evicted[k] = (double)ev;
        limited[k] = (double)atomic_load(&c->rl->limited[k]);
    }
    by_kind(b, "corral_http_rate_limited_total", "counter",
            "Requests answered 429 by the request rate limits, by kind (token: a user or join "
            "token's bucket; address: a client address without a valid token).",
            limited);
    by_kind(b, "corral_http_rate_limit_buckets", "gauge",
            "Rate limit buckets held, by kind (at most rate_limit_table each).", held);
    by_kind(b, "corral_http_rate_limit_evicted_total", "counter",
            "Least recently used rate limit buckets dropped for new keys (table full).", evicted);
}
