/*
 * controller_main.c - `corral controller`: flags and config, start-up
 * (store, state, tokens, scheduler thread, HTTP), the router with
 * authentication, and an orderly shutdown on SIGINT/SIGTERM.
 */
#include "cr_controller.h"

#include "ctl_int.h"

#include "ctl_ha.h"
#include "ctl_data.h"
#include "ctl_pools.h"

#include "cr_alloc.h"
#include "cr_catalog.h"
#include "cr_config.h"
#include "cr_etcd.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_parse.h"
#include "cr_sched.h"
#include "cr_time.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: corral controller [options]\n"
               "  --config FILE        JSON config file (see docs/operations.md)\n"
               "  --listen HOST:PORT   bind address (default 127.0.0.1:8620)\n"
               "  --state-dir DIR      database, admin.token, join.token (default ./corral-state)\n"
               "  --tls-cert FILE      PEM certificate: serve HTTPS (with --tls-key)\n"
               "  --tls-key FILE       PEM private key\n"
               "  --tls-client-cert FILE  PEM client certificate shown to agents that ask\n"
               "                       for one (agent --tls-client-ca: mutual TLS)\n"
               "  --tls-client-key FILE   its private key\n"
               "  --metrics-token-file FILE  /metrics needs this bearer token (or an admin\n"
               "                       token) and then shows tenants; without, it is open and\n"
               "                       aggregate only (docs/security.md)\n");
    fprintf(f, "  --allow-legacy-join  accept the long-lived STATE-DIR/join.token (demos; a\n"
               "                       shared cluster uses bootstrap tokens, docs/security.md)\n");
    char names[128];
    cr_sched_policy_list(names, sizeof names);
    fprintf(f, "  --policy NAME        %s (default priority)\n", names);
    fprintf(f, "  --round S            policy rounds: the round length in seconds (default 360)\n");
    fprintf(
        f,
        "  --heartbeat S        agent heartbeat interval in seconds (default 5)\n"
        "  --history-step S     the history's resolution in seconds (default 10; 0: none)\n"
        "  --lost-after S       node lost after S seconds of silence (default 30)\n"
        "  --sync full|normal   SQLite durability (default full: fsync per commit)\n"
        "  --store SPEC         sqlite (default: STATE_DIR/corral.db) or\n"
        "                       etcd:http://h1:2379,http://h2:2379 (docs/operations.md)\n"
        "  --store-cluster NAME etcd keys under /corral/NAME/ (default 'default')\n"
        "  --etcd-max-txn-ops N the etcd cluster's --max-txn-ops (default 128)\n" CR_ETCD_SEC_USAGE
        "  --threads N          HTTP event threads (default 4)\n"
        "  --advertise-url URL  high availability: this controller's URL for clients;\n"
        "                       stand for election (docs/operations.md)\n"
        "  --election etcd:URL[,URL...]  etcd members of the election (default: those\n"
        "                       of --store etcd:...; keys under /corral/<store-cluster>/)\n"
        "  --election-ttl S     leader lease in seconds, 2..600 (default 5)\n"
        "  --rate-limit-rps R, --rate-limit-burst N  requests a second and burst per user\n"
        "                       or join token (default 100, 500; 0 rps: no limit)\n"
        "  --rate-limit-anon-rps R, --rate-limit-anon-burst N  the same per client address\n"
        "                       without a valid token (default 50, 200)\n"
        "  --rate-limit-table N buckets kept per table (default 16384)\n");
}

/* ------------------------------------------------------------------------ */
/* Router                                                                   */

#define MAX_SEG 8

/* A token's scope (cr_auth.h): read is GET and HEAD only; submit adds
 * the job routes (submit, cancel, their actions); tenant-admin adds the
 * tenant routes, for the tenants below its own (ctl_route_tenants). */
static bool scope_allows(const cr_principal *p, const char *m, char **seg, size_t nseg)
{
    if (p->scope == CR_SCOPE_ALL || strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0) {
        return true;
    }
    if (p->scope == CR_SCOPE_TENANT_ADMIN && nseg >= 2 && strcmp(seg[1], "tenants") == 0) {
        return true; /* ctl_route_tenants checks the subtree */
    }
    return (p->scope == CR_SCOPE_SUBMIT || p->scope == CR_SCOPE_TENANT_ADMIN) && nseg >= 2 &&
           strcmp(seg[1], "jobs") == 0;
}

static void route(void *ctx, cr_http_req *req)
{
    ctl *c = ctx;
    atomic_fetch_add(&c->inflight, 1);
    if (atomic_load(&c->draining)) {
        ctl_reply_err(req, 503, CR_EUNAVAIL, NULL, "controller shutting down");
        goto out;
    }
    if (c->ha && ctl_ha_route(c->ha, req)) {
        goto out; /* a follower's redirect, or a leader still loading */
    }
    const char *path = cr_http_path(req);
    const char *m = cr_http_method(req);
    char buf[512];
    char *seg[MAX_SEG];
    size_t nseg = 0;
    if (strlen(path) >= sizeof buf) {
        ctl_reply_err(req, 414, CR_ETOOBIG, NULL, "path too long");
        goto out;
    }
    snprintf(buf, sizeof buf, "%s", path);
    char *save = NULL;
    for (char *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (nseg == MAX_SEG) {
            ctl_reply_err(req, 404, CR_ENOENT, NULL, "no route %s %s", m, path);
            goto out;
        }
        seg[nseg++] = t;
    }
    /* Requests that need no token are limited by client address, as are
     * failed authentications below and /metrics without its token
     * (ctl_ratelimit.c). */
    bool open_route =
        nseg < 2 || strcmp(seg[0], "v1") != 0 ||
        (nseg == 2 && (strcmp(seg[1], "health") == 0 || strcmp(seg[1], "version") == 0));
    if (nseg == 1 && strcmp(seg[0], "metrics") == 0 && strcmp(m, "GET") == 0) {
        open_route = false; /* checked there, after its token */
    }
    if (open_route && !ctl_rl_allow_anon(c, req)) {
        goto out;
    }
    if (nseg >= 1 && nseg <= 2 && strcmp(seg[0], "ui") == 0) {
        ctl_route_ui(c, req, seg, nseg);
        goto out;
    }
    ctl_ui_headers(req, true);
    if (nseg == 1 && strcmp(seg[0], "healthz") == 0) {
        /* with HA, ctl_ha_route answered; a single controller leads */
        cr_http_set_route(req, "/healthz");
        ctl_reply_json(req, 200, json_pack("{s:b,s:s}", "ok", 1, "role", "leader"));
        goto out;
    }
    if (nseg == 1 && strcmp(seg[0], "metrics") == 0 && strcmp(m, "GET") == 0) {
        cr_http_set_route(req, "/metrics");
        ctl_route_metrics(c, req);
        goto out;
    }
    if (nseg < 2 || strcmp(seg[0], "v1") != 0) {
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "no route %s %s", m, path);
        goto out;
    }
    if (nseg == 2 && strcmp(seg[1], "health") == 0) {
        cr_http_set_route(req, "/v1/health");
        ctl_reply_json(req, 200, json_pack("{s:b}", "ok", 1));
        goto out;
    }
    if (nseg == 2 && strcmp(seg[1], "version") == 0) {
        cr_http_set_route(req, "/v1/version");
        ctl_reply_json(req, 200, json_pack("{s:s}", "version", CR_VERSION));
        goto out;
    }
    const char *token = cr_auth_bearer(cr_http_header(req, "Authorization"));
    if (nseg == 4 && strcmp(seg[1], "jobs") == 0 && strcmp(seg[3], "steps") == 0 &&
        strcmp(m, "POST") == 0) {
        /* srun inside a batch job: its step credential, not a token */
        cr_http_set_route(req, "/v1/jobs/{id}/steps");
        ctl_batch_step_report(c, req, seg[2], token);
        goto out;
    }
    cr_principal p;
    if (token && c->jwt && cr_jwt_looks_like(token)) {
        char sub[64], why[400];
        int jrc = cr_jwt_verify(c->jwt, token, cr_now_ns() / CR_NS_PER_SEC, &p, sub, sizeof sub,
                                why, sizeof why);
        if (jrc != 0) {
            atomic_fetch_add(&c->auth_failures, 1);
            if (!ctl_rl_allow_anon(c, req)) {
                goto out;
            }
            /* audited with the subject the token claims (not verified) */
            cr_principal who;
            memset(&who, 0, sizeof who);
            snprintf(who.name, sizeof who.name, "oidc:%.58s", *sub ? sub : "?");
            char what[1100];
            snprintf(what, sizeof what, "DENIED %s %s: oidc %s", m, path, why);
            ctl_audit(c, req, &who, what);
            cr_warn("auth failed: peer=%s %s %s: oidc sub '%s': %s", cr_http_peer(req), m, path,
                    sub, why);
            cr_http_set_route(req, "unauthenticated");
            if (jrc == CR_EPERM) {
                ctl_reply_err(req, 403, CR_EPERM, NULL, "%s", why);
            } else {
                cr_http_add_header(req, "WWW-Authenticate", "Bearer error=\"invalid_token\"");
                ctl_reply_err(req, 401, CR_EAUTH, NULL, "invalid token: %s", why);
            }
            goto out;
        }
        if (p.role == CR_ROLE_USER && !ctl_tenant_known(c, p.tenant)) {
            cr_http_set_route(req, "unauthenticated");
            ctl_reply_err(req, 403, CR_EPERM, NULL, "oidc: tenant '%s' of subject '%s' is gone",
                          p.tenant, p.name);
            goto out;
        }
    } else if (!token || !cr_auth_table_check(c->auth, token, &p)) {
        atomic_fetch_add(&c->auth_failures, 1);
        if (!ctl_rl_allow_anon(c, req)) {
            goto out;
        }
        cr_warn("auth failed: peer=%s %s %s: %s", cr_http_peer(req), m, path,
                token ? "invalid token" : "no bearer token");
        cr_http_set_route(req, "unauthenticated");
        cr_http_add_header(req, "WWW-Authenticate", "Bearer");
        ctl_reply_err(req, 401, CR_EAUTH, NULL,
                      token ? "invalid or revoked token" : "a bearer token is required");
        goto out;
    }
    if (!ctl_rl_allow_token(c, req, &p)) {
        goto out;
    }
    if (!scope_allows(&p, m, seg, nseg)) {
        char what[600];
        snprintf(what, sizeof what, "DENIED %s %s: scope %s", m, path, cr_scope_name(p.scope));
        ctl_audit(c, req, &p, what);
        cr_http_set_route(req, "scope");
        ctl_reply_err(req, 403, CR_EPERM, NULL,
                      "token scope '%s' does not allow %s %s (read: GET only; submit: GET and "
                      "jobs)",
                      cr_scope_name(p.scope), m, path);
        goto out;
    }
    const char *r = seg[1];
    /* Every mutating request goes to the audit log (who, what, from where),
     * except the agents' heartbeats and the gateways' load reports (both
     * periodic telemetry); reads do not. */
    bool heartbeat = (p.role == CR_ROLE_AGENT && strcmp(r, "agents") == 0 && nseg == 4) ||
                     (strcmp(r, "services") == 0 && nseg == 4 && strcmp(seg[3], "metrics") == 0) ||
                     (strcmp(r, "keys") == 0 && nseg == 3 && strcmp(seg[2], "usage") == 0);
    /* A job submit stores its audit row in its own transaction. */
    bool submit = strcmp(r, "jobs") == 0 && nseg == 2 && strcmp(m, "POST") == 0;
    if (!heartbeat && strcmp(m, "GET") != 0 && strcmp(m, "HEAD") != 0) {
        char what[600];
        snprintf(what, sizeof what, "%s %s", m, path);
        if (submit) {
            ctl_audit_defer(c, req, &p, what);
        } else {
            ctl_audit(c, req, &p, what);
        }
    }
    if (strcmp(r, "jobs") == 0) {
        ctl_route_jobs(c, req, &p, seg, nseg);
        ctl_audit_flush(c);
    } else if (strcmp(r, "agents") == 0) {
        ctl_route_agents(c, req, &p, seg, nseg);
    } else if (strcmp(r, "nodes") == 0) {
        if (!ctl_route_node_lifecycle(c, req, &p, seg, nseg)) {
            ctl_route_nodes(c, req, &p, seg, nseg);
        }
    } else if (strcmp(r, "tokens") == 0 && nseg <= 3) {
        ctl_route_tokens(c, req, &p, seg, nseg);
    } else if (strcmp(r, "tenants") == 0 && nseg <= 3) {
        ctl_route_tenants(c, req, &p, seg, nseg);
    } else if (strcmp(r, "services") == 0 && nseg <= 4) {
        ctl_route_services(c, req, &p, seg, nseg);
    } else if (strcmp(r, "keys") == 0 && nseg <= 3) {
        ctl_route_keys(c, req, &p, seg, nseg);
    } else if (strcmp(r, "pools") == 0 && nseg <= 3) {
        ctl_route_pools(c, req, &p, seg, nseg);
    } else if (strcmp(r, "data") == 0 && nseg <= 4) {
        ctl_route_data(c, req, &p, seg, nseg);
    } else if (strcmp(r, "bootstrap-tokens") == 0 && nseg <= 3) {
        ctl_route_bootstrap(c, req, &p, seg, nseg);
    } else if (strcmp(r, "audit") == 0 && nseg == 2 && strcmp(m, "GET") == 0) {
        ctl_route_audit(c, req, &p);
    } else if (strcmp(r, "prometheus") == 0 && nseg == 3 && strcmp(seg[2], "targets") == 0 &&
               strcmp(m, "GET") == 0) {
        ctl_route_targets(c, req, &p);
    } else if (strcmp(r, "advise") == 0 && nseg == 2 && strcmp(m, "POST") == 0) {
        ctl_route_advise(c, req, &p);
    } else if (strcmp(r, "cluster") == 0 && nseg == 2 && strcmp(m, "GET") == 0) {
        ctl_route_cluster(c, req, &p);
    } else if (strcmp(r, "history") == 0 && nseg == 2 &&
               (strcmp(m, "GET") == 0 || strcmp(m, "POST") == 0)) {
        ctl_route_history(c, req, &p);
    } else if (strcmp(r, "events") == 0 && nseg == 2) {
        ctl_route_events(c, req, &p);
    } else if (strcmp(r, "usage") == 0 && nseg == 2 && strcmp(m, "GET") == 0) {
        ctl_route_usage(c, req, &p);
    } else if (strcmp(r, "whoami") == 0 && nseg == 2) {
        cr_http_set_route(req, "/v1/whoami");
        ctl_reply_json(req, 200,
                       json_pack("{s:I,s:s,s:s,s:s,s:s}", "id", (json_int_t)p.id, "role",
                                 cr_role_name(p.role), "tenant", p.tenant, "name", p.name, "node",
                                 p.node));
    } else {
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "no route %s %s", m, path);
    }
out:
    atomic_fetch_sub(&c->inflight, 1);
}

/* ------------------------------------------------------------------------ */
/* Configuration                                                            */

/* "oidc": {"issuer", "audience", "jwks", "leeway_s", "map": [{"claim",
 * "value", "tenant", "role"}]} into cfg (whether the tenants exist is
 * checked once the state is loaded: oidc_tenants_check). */
static int oidc_config(const json_t *v, ctl_config *cfg, cr_json_err *err)
{
    static const char *const members[] = {"issuer", "audience", "jwks", "leeway_s", "map", NULL};
    static const char *const rule_members[] = {"claim", "value", "tenant", "role", NULL};
    json_t *o = NULL, *map = NULL;
    const char *iss = NULL, *aud = NULL, *jwks = NULL;
    int64_t leeway = 60;
    int rc;
    if ((rc = cr_json_obj(v, "", "oidc", false, &o, err)) || !o) {
        return rc;
    }
    if ((rc = cr_json_only(o, "oidc", members, err)) ||
        (rc = cr_json_str(o, "oidc", "issuer", true, 255, &iss, err)) ||
        (rc = cr_json_str(o, "oidc", "audience", true, 255, &aud, err)) ||
        (rc = cr_json_str(o, "oidc", "jwks", true, 1000, &jwks, err)) ||
        (rc = cr_json_int(o, "oidc", "leeway_s", false, 0, 300, &leeway, err)) ||
        (rc = cr_json_arr(o, "oidc", "map", true, CTL_OIDC_RULES_MAX, &map, err))) {
        return rc;
    }
    memset(&cfg->oidc, 0, sizeof cfg->oidc);
    snprintf(cfg->oidc.issuer, sizeof cfg->oidc.issuer, "%s", iss);
    snprintf(cfg->oidc.audience, sizeof cfg->oidc.audience, "%s", aud);
    snprintf(cfg->oidc.jwks, sizeof cfg->oidc.jwks, "%s", jwks);
    cfg->oidc.leeway_s = leeway;
    size_t i;
    json_t *r;
    json_array_foreach(map, i, r)
    {
        char at[64];
        snprintf(at, sizeof at, "oidc.map[%zu]", i);
        const char *claim = NULL, *value = NULL, *tenant = NULL, *role = NULL;
        if (!json_is_object(r)) {
            return cr_json_fail(err, CR_EINVAL, at, "field '%s': must be an object", at);
        }
        if ((rc = cr_json_only(r, at, rule_members, err)) ||
            (rc = cr_json_str(r, at, "claim", true, 63, &claim, err)) ||
            (rc = cr_json_str(r, at, "value", true, 127, &value, err)) ||
            (rc = cr_json_str(r, at, "tenant", false, CTL_NAME_MAX - 1, &tenant, err)) ||
            (rc = cr_json_str(r, at, "role", true, 15, &role, err))) {
            return rc;
        }
        cr_jwt_rule *x = &cfg->oidc_rules[i];
        memset(x, 0, sizeof *x);
        snprintf(x->claim, sizeof x->claim, "%s", claim);
        snprintf(x->value, sizeof x->value, "%s", value);
        snprintf(x->tenant, sizeof x->tenant, "%s", tenant ? tenant : "");
        x->role = cr_role_parse(role);
        char f[80];
        snprintf(f, sizeof f, "%s.role", at);
        if (x->role != CR_ROLE_ADMIN && x->role != CR_ROLE_USER) {
            return cr_json_fail(err, CR_EINVAL, f, "field '%s': must be 'user' or 'admin'", f);
        }
        snprintf(f, sizeof f, "%s.tenant", at);
        if (x->role == CR_ROLE_USER && !*x->tenant) {
            return cr_json_fail(err, CR_EINVAL, f, "field '%s': a user rule names its tenant", f);
        }
    }
    cfg->oidc.map = cfg->oidc_rules;
    cfg->oidc.nmap = json_array_size(map);
    cfg->oidc_on = true;
    return 0;
}

static void config_defaults(ctl_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->listen_addr, sizeof cfg->listen_addr, "127.0.0.1");
    cfg->port = 8620;
    snprintf(cfg->state_dir, sizeof cfg->state_dir, "corral-state");
    snprintf(cfg->policy, sizeof cfg->policy, "priority");
    snprintf(cfg->checkpoint_root, sizeof cfg->checkpoint_root, "/tmp/corral/ckpt");
    cfg->heartbeat_s = 5;
    cfg->history_step_s = 10;
    cfg->lost_after_s = 30;
    cfg->sched_interval_ms = 5;
    cfg->round_s = 360;
    cfg->default_time_s = 3600;
    cfg->threads = 4;
    cfg->max_body_bytes = 1024 * 1024;
    cfg->request_timeout_s = 30;
    cfg->header_timeout_s = 30;
    cfg->body_timeout_s = 60;
    cfg->max_conns = 4096;
    cfg->max_conns_per_ip = 256;
    cfg->conns_reserved = 32;
    cfg->max_conns_per_token = 64;
    cfg->grace_s = 30;
    cfg->checkpoint_retention_s = 7 * 86400;
    cfg->prices = json_object();
    cfg->legacy_join = false; /* bootstrap tokens; --allow-legacy-join for demos */
    cfg->pids_per_gpu = 4096;
    cfg->audit_retention_s = 90LL * 86400;
    cfg->log_timeout_ms = 3000;
    cfg->log_fetch_max = 2;
    cfg->max_spec_bytes = 256 * 1024;
    cfg->max_array = 10000;
    cfg->default_gpus = 1;
    cfg->retain_finished = 10000;
    cfg->retain_s = 3600;
    cfg->idem_max = 1000;
    cfg->idem_tokens = 1000;
    cfg->idem_ttl_s = 86400;
    cfg->election_ttl_s = CTL_HA_TTL_DEFAULT_S;
    ctl_rl_defaults(cfg);
}

static int parse_listen(const char *s, ctl_config *cfg)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s) {
        return CR_EINVAL;
    }
    int64_t port;
    if (cr_parse_i64(colon + 1, 0, 65535, &port) != 0) {
        return CR_EINVAL;
    }
    size_t hl = (size_t)(colon - s);
    if (s[0] == '[' && hl >= 2 && s[hl - 1] == ']') {
        s++;
        hl -= 2;
    }
    if (hl == 0 || hl >= sizeof cfg->listen_addr) {
        return CR_EINVAL;
    }
    memcpy(cfg->listen_addr, s, hl);
    cfg->listen_addr[hl] = '\0';
    cfg->port = (uint16_t)port;
    return 0;
}

/* --store SPEC: "sqlite" or "etcd:" and a list of http:// endpoints. file
 * (NULL for a flag) and what name the input in messages. */
static int store_spec_check(const char *spec, const char *file, const char *what)
{
    if (strcmp(spec, "sqlite") == 0) {
        return 0;
    }
    if (strncmp(spec, "etcd:", 5) != 0) {
        fprintf(stderr,
                "corral controller: %s%s%s: expected sqlite or etcd:URL[,URL...], got '%s'\n",
                file ? file : "", file ? ": " : "", what, spec);
        return CR_EINVAL;
    }
    cr_etcd *e = NULL;
    int rc = cr_etcd_new(spec + 5, NULL, &e);
    if (rc != 0) {
        fprintf(stderr, "corral controller: %s%s%s: %s\n", file ? file : "", file ? ": " : "", what,
                cr_etcd_last_error());
        return rc;
    }
    cr_etcd_free(e);
    return 0;
}

static int store_cluster_check(const char *name, const char *file)
{
    size_t n = strlen(name);
    bool ok = n >= 1 && n <= 64;
    for (size_t i = 0; ok && i < n; i++) {
        char ch = name[i];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
             ch == '-' || ch == '_' || ch == '.';
    }
    if (!ok) {
        fprintf(stderr, "corral controller: %s%s: expected 1..64 of [A-Za-z0-9._-], got '%s'\n",
                file ? file : "--store-cluster", file ? ": field 'store_cluster'" : "", name);
        return CR_EINVAL;
    }
    return 0;
}

static int load_config(const char *path, ctl_config *cfg)
{
    json_error_t je;
    json_t *v = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!v) {
        fprintf(stderr, "corral controller: %s:%d:%d: %s\n", path, je.line, je.column, je.text);
        return CR_EPARSE;
    }
    static const char *const members[] = {"listen",
                                          "state_dir",
                                          "tls_cert",
                                          "tls_key",
                                          "join_token_file",
                                          "policy",
                                          "heartbeat_s",
                                          "lost_after_s",
                                          "sched_interval_ms",
                                          "round_s",
                                          "default_time_s",
                                          "threads",
                                          "max_body_bytes",
                                          "request_timeout_s",
                                          "header_timeout_s",
                                          "body_timeout_s",
                                          "max_conns",
                                          "max_conns_per_ip",
                                          "conns_reserved",
                                          "max_conns_per_token",
                                          "sync",
                                          "prices",
                                          "grace_s",
                                          "history_step_s",
                                          "checkpoint_root",
                                          "checkpoint_retention_s",
                                          "run_as",
                                          "mounts_allowed",
                                          "image_registries",
                                          "partitions",
                                          "pools",
                                          "cpus_per_gpu",
                                          "mem_per_gpu",
                                          "pids_per_gpu",
                                          "default_gpus",
                                          "shared_submit_dir",
                                          "node_approval",
                                          "join_token",
                                          "agent_addr_link_local",
                                          "audit_retention_s",
                                          "agent_ca_file",
                                          "tls_client_cert",
                                          "tls_client_key",
                                          "metrics_token_file",
                                          "log_timeout_ms",
                                          "log_fetch_max",
                                          "max_spec_bytes",
                                          "max_array",
                                          "retain_finished",
                                          "retain_s",
                                          "idempotency_max",
                                          "idempotency_tokens",
                                          "idempotency_ttl_s",
                                          "store",
                                          "store_cluster",
                                          "etcd_max_txn_ops",
                                          "etcd_cacert",
                                          "etcd_cert",
                                          "etcd_key",
                                          "etcd_user",
                                          "etcd_password_file",
                                          "advertise_url",
                                          "election",
                                          "election_ttl_s",
                                          "oidc",
                                          CTL_RL_CONFIG_MEMBERS,
                                          NULL};
    const char *adv = NULL, *elect = NULL;
    static const char *const sec_fields[] = {"etcd_cacert", "etcd_cert", "etcd_key", "etcd_user",
                                             "etcd_password_file"};
    const char *sec_vals[5] = {NULL};
    cr_json_err err;
    const char *store = NULL, *store_cluster = NULL;
    const char *listen = NULL, *sd = NULL, *cert = NULL, *key = NULL, *join = NULL, *pol = NULL,
               *sync = NULL, *ck = NULL, *mpg = NULL, *appr = NULL, *aca = NULL, *ccert = NULL,
               *ckey = NULL, *mtok = NULL;
    bool legacy_join = cfg->legacy_join, link_local = cfg->agent_addr_link_local;
    int64_t aret = cfg->audit_retention_s;
    int64_t hb = cfg->heartbeat_s, lost = cfg->lost_after_s, si = cfg->sched_interval_ms,
            rs = cfg->round_s, dt = cfg->default_time_s, th = cfg->threads,
            mb = (int64_t)cfg->max_body_bytes, rt = cfg->request_timeout_s, gr = cfg->grace_s,
            hist = cfg->history_step_s, keep = cfg->checkpoint_retention_s,
            ht = cfg->header_timeout_s, bt = cfg->body_timeout_s, mc = cfg->max_conns,
            mci = cfg->max_conns_per_ip, crs = cfg->conns_reserved, mct = cfg->max_conns_per_token;
    double cpg = cfg->cpus_per_gpu;
    json_t *prices = NULL, *run_as = NULL, *mounts_allowed = NULL, *registries = NULL,
           *parts = NULL, *pools = NULL;
    int rc = 0;
    if ((rc = cr_json_only(v, "", members, &err)) ||
        (rc = cr_json_str(v, "", "listen", false, 100, &listen, &err)) ||
        (rc = cr_json_str(v, "", "state_dir", false, 1000, &sd, &err)) ||
        (rc = cr_json_str(v, "", "tls_cert", false, 1000, &cert, &err)) ||
        (rc = cr_json_str(v, "", "tls_key", false, 1000, &key, &err)) ||
        (rc = cr_json_str(v, "", "join_token_file", false, 1000, &join, &err)) ||
        (rc = cr_json_str(v, "", "policy", false, 15, &pol, &err)) ||
        (rc = cr_json_str(v, "", "sync", false, 15, &sync, &err)) ||
        (rc = cr_json_str(v, "", "checkpoint_root", false, 1000, &ck, &err)) ||
        (rc = cr_json_int(v, "", "heartbeat_s", false, 1, 3600, &hb, &err)) ||
        (rc = cr_json_int(v, "", "lost_after_s", false, 1, 86400, &lost, &err)) ||
        (rc = cr_json_int(v, "", "sched_interval_ms", false, 0, 60000, &si, &err)) ||
        (rc = cr_json_int(v, "", "round_s", false, 1, 86400, &rs, &err)) ||
        (rc = cr_json_int(v, "", "default_time_s", false, 0, 366LL * 86400, &dt, &err)) ||
        (rc = cr_json_int(v, "", "threads", false, 1, 256, &th, &err)) ||
        (rc = cr_json_int(v, "", "max_body_bytes", false, 1024, 1 << 30, &mb, &err)) ||
        (rc = cr_json_int(v, "", "request_timeout_s", false, 1, 3600, &rt, &err)) ||
        (rc = cr_json_int(v, "", "grace_s", false, 0, 3600, &gr, &err)) ||
        (rc = cr_json_int(v, "", "history_step_s", false, 0, 60, &hist, &err)) ||
        (rc = cr_json_int(v, "", "header_timeout_s", false, 1, 3600, &ht, &err)) ||
        (rc = cr_json_int(v, "", "body_timeout_s", false, 1, 3600, &bt, &err)) ||
        (rc = cr_json_int(v, "", "max_conns", false, 16, 1000000, &mc, &err)) ||
        (rc = cr_json_int(v, "", "max_conns_per_ip", false, 1, 1000000, &mci, &err)) ||
        (rc = cr_json_int(v, "", "conns_reserved", false, 1, 100000, &crs, &err)) ||
        (rc = cr_json_int(v, "", "max_conns_per_token", false, 1, 1000000, &mct, &err)) ||
        (rc = cr_json_obj(v, "", "prices", false, &prices, &err)) ||
        (rc = cr_json_int(v, "", "checkpoint_retention_s", false, 0, 100LL * 366 * 86400, &keep,
                          &err)) ||
        (rc = cr_json_num(v, "", "cpus_per_gpu", false, 0, 4096, &cpg, &err)) ||
        (rc = cr_json_str(v, "", "mem_per_gpu", false, 32, &mpg, &err)) ||
        (rc = cr_json_int(v, "", "pids_per_gpu", false, 16, 4194304, &cfg->pids_per_gpu, &err)) ||
        (rc = cr_json_int(v, "", "default_gpus", false, 0, 1, &cfg->default_gpus, &err)) ||
        (rc = cr_json_bool(v, "", "shared_submit_dir", false, &cfg->shared_submit_dir, &err)) ||
        (rc = cr_json_obj(v, "", "run_as", false, &run_as, &err)) ||
        (run_as && (rc = ctl_run_as_check(run_as, &err))) ||
        (rc = cr_json_obj(v, "", "mounts_allowed", false, &mounts_allowed, &err)) ||
        (mounts_allowed && (rc = ctl_mounts_allowed_check(mounts_allowed, &err))) ||
        (rc = cr_json_arr(v, "", "image_registries", false, 256, &registries, &err)) ||
        (registries && (rc = ctl_image_registries_check(registries, &err))) ||
        (rc = cr_json_arr(v, "", "partitions", false, 256, &parts, &err)) ||
        (parts && (rc = ctl_partitions_check(parts, &err))) ||
        (rc = cr_json_arr(v, "", "pools", false, 64, &pools, &err)) ||
        (pools && (rc = ctl_pools_check(pools, &err))) ||
        (rc = cr_json_str(v, "", "node_approval", false, 15, &appr, &err)) ||
        (rc = cr_json_bool(v, "", "join_token", false, &legacy_join, &err)) ||
        (rc = cr_json_bool(v, "", "agent_addr_link_local", false, &link_local, &err)) ||
        (rc =
             cr_json_int(v, "", "audit_retention_s", false, 0, 100LL * 366 * 86400, &aret, &err)) ||
        (rc = cr_json_str(v, "", "agent_ca_file", false, 1000, &aca, &err)) ||
        (rc = cr_json_str(v, "", "tls_client_cert", false, 1000, &ccert, &err)) ||
        (rc = cr_json_str(v, "", "tls_client_key", false, 1000, &ckey, &err)) ||
        (rc = cr_json_str(v, "", "metrics_token_file", false, 1000, &mtok, &err)) ||
        (rc = cr_json_int(v, "", "log_timeout_ms", false, 100, 600000, &cfg->log_timeout_ms,
                          &err)) ||
        (rc = cr_json_int(v, "", "log_fetch_max", false, 1, 1024, &cfg->log_fetch_max, &err)) ||
        (rc = cr_json_int(v, "", "max_spec_bytes", false, 1024, 16 << 20, &cfg->max_spec_bytes,
                          &err)) ||
        (rc = cr_json_int(v, "", "max_array", false, 1, 10000, &cfg->max_array, &err)) ||
        (rc = cr_json_int(v, "", "retain_finished", false, 0, 100000000, &cfg->retain_finished,
                          &err)) ||
        (rc = cr_json_int(v, "", "retain_s", false, 0, 366LL * 86400, &cfg->retain_s, &err)) ||
        (rc = cr_json_int(v, "", "idempotency_max", false, 1, 10000000, &cfg->idem_max, &err)) ||
        (rc = cr_json_int(v, "", "idempotency_tokens", false, 1, 1000000, &cfg->idem_tokens,
                          &err)) ||
        (rc = cr_json_int(v, "", "idempotency_ttl_s", false, 1, 366LL * 86400, &cfg->idem_ttl_s,
                          &err)) ||
        (rc = cr_json_str(v, "", "store", false, 1000, &store, &err)) ||
        (rc = cr_json_str(v, "", "store_cluster", false, 64, &store_cluster, &err)) ||
        (rc = cr_json_int(v, "", "etcd_max_txn_ops", false, 8, 1000000, &cfg->etcd_max_txn_ops,
                          &err)) ||
        (rc = cr_json_str(v, "", "advertise_url", false, CTL_HA_URL_MAX, &adv, &err)) ||
        (rc = cr_json_str(v, "", "election", false, 1000, &elect, &err)) ||
        (rc = cr_json_int(v, "", "election_ttl_s", false, CTL_HA_TTL_MIN_S, CTL_HA_TTL_MAX_S,
                          &cfg->election_ttl_s, &err)) ||
        (rc = ctl_rl_config(v, cfg, &err)) || (rc = oidc_config(v, cfg, &err))) {
        fprintf(stderr, "corral controller: %s: %s\n", path, err.message);
        goto out;
    }
    for (size_t i = 0; i < 5; i++) {
        char flag[32], why[300];
        if ((rc = cr_json_str(v, "", sec_fields[i], false, CR_ETCD_PATH_MAX - 1, &sec_vals[i],
                              &err)) != 0) {
            fprintf(stderr, "corral controller: %s: %s\n", path, err.message);
            goto out;
        }
        snprintf(flag, sizeof flag, "%s", sec_fields[i]);
        for (char *q = flag; *q; q++) {
            *q = *q == '_' ? '-' : *q;
        }
        if (sec_vals[i] &&
            (rc = cr_etcd_sec_set(&cfg->etcd_sec, flag, sec_vals[i], why, sizeof why)) != 0) {
            fprintf(stderr, "corral controller: %s: field '%s': %s\n", path, sec_fields[i], why);
            goto out;
        }
    }
    int64_t mem_pg = 0;
    if (mpg && *mpg && strcmp(mpg, "0") != 0 && cr_parse_bytes(mpg, &mem_pg) != 0) {
        fprintf(stderr,
                "corral controller: %s: field 'mem_per_gpu': want a size such as 64G or 512M\n",
                path);
        rc = CR_EINVAL;
        goto out;
    }
    if (ck && ck[0] != '/') {
        fprintf(stderr,
                "corral controller: %s: field 'checkpoint_root': must be an absolute path\n", path);
        rc = CR_EINVAL;
        goto out;
    }
    static const char *const approvals[] = {"auto", "manual", NULL};
    if (appr && (rc = cr_json_enum(appr, "node_approval", approvals, &err)) != 0) {
        fprintf(stderr, "corral controller: %s: %s\n", path, err.message);
        goto out;
    }
    cfg->manual_approval = appr && strcmp(appr, "manual") == 0;
    cfg->legacy_join = legacy_join;
    cfg->agent_addr_link_local = link_local;
    cfg->audit_retention_s = aret;
    if (aca) {
        snprintf(cfg->agent_ca_file, sizeof cfg->agent_ca_file, "%s", aca);
    }
    static const char *const syncs[] = {"full", "normal", NULL};
    if (sync && (rc = cr_json_enum(sync, "sync", syncs, &err)) != 0) {
        fprintf(stderr, "corral controller: %s: %s\n", path, err.message);
        goto out;
    }
    if (listen && parse_listen(listen, cfg) != 0) {
        fprintf(stderr, "corral controller: %s: field 'listen': expected HOST:PORT\n", path);
        rc = CR_EINVAL;
        goto out;
    }
    const char *k;
    json_t *x;
    json_object_foreach(prices, k, x)
    {
        if (!json_is_number(x) || json_number_value(x) < 0) {
            fprintf(stderr, "corral controller: %s: field 'prices.%s': must be a number >= 0\n",
                    path, k);
            rc = CR_EINVAL;
            goto out;
        }
    }
    if (sd) {
        snprintf(cfg->state_dir, sizeof cfg->state_dir, "%s", sd);
    }
    if ((store && store_spec_check(store, path, "field 'store'") != 0) ||
        (store_cluster && store_cluster_check(store_cluster, path) != 0)) {
        rc = CR_EINVAL;
        goto out;
    }
    if (store) {
        snprintf(cfg->store, sizeof cfg->store, "%s", store);
    }
    if (store_cluster) {
        snprintf(cfg->store_cluster, sizeof cfg->store_cluster, "%s", store_cluster);
    }
    if (adv && !ctl_ha_url_ok(adv)) {
        fprintf(stderr,
                "corral controller: %s: field 'advertise_url': expected http(s)://HOST:PORT (no "
                "path), got '%s'\n",
                path, adv);
        rc = CR_EINVAL;
        goto out;
    }
    if (elect && (strncmp(elect, "etcd:", 5) != 0 || !elect[5])) {
        fprintf(stderr,
                "corral controller: %s: field 'election': expected etcd:http://HOST:PORT[,...], "
                "got '%s'\n",
                path, elect);
        rc = CR_EINVAL;
        goto out;
    }
    if (adv) {
        snprintf(cfg->advertise_url, sizeof cfg->advertise_url, "%s", adv);
    }
    if (elect) {
        snprintf(cfg->election, sizeof cfg->election, "%s", elect + 5);
    }
    if (cert) {
        snprintf(cfg->tls_cert, sizeof cfg->tls_cert, "%s", cert);
    }
    if (key) {
        snprintf(cfg->tls_key, sizeof cfg->tls_key, "%s", key);
    }
    if (ccert) {
        snprintf(cfg->tls_client_cert, sizeof cfg->tls_client_cert, "%s", ccert);
    }
    if (ckey) {
        snprintf(cfg->tls_client_key, sizeof cfg->tls_client_key, "%s", ckey);
    }
    if (mtok) {
        snprintf(cfg->metrics_token_file, sizeof cfg->metrics_token_file, "%s", mtok);
    }
    if (join) {
        snprintf(cfg->join_token_file, sizeof cfg->join_token_file, "%s", join);
    }
    if (pol) {
        snprintf(cfg->policy, sizeof cfg->policy, "%s", pol);
    }
    if (ck) {
        snprintf(cfg->checkpoint_root, sizeof cfg->checkpoint_root, "%s", ck);
    }
    cfg->sync_normal = sync && strcmp(sync, "normal") == 0;
    cfg->heartbeat_s = hb;
    cfg->lost_after_s = lost;
    cfg->sched_interval_ms = si;
    cfg->round_s = rs;
    cfg->default_time_s = dt;
    cfg->threads = (unsigned)th;
    cfg->max_body_bytes = (size_t)mb;
    cfg->request_timeout_s = (unsigned)rt;
    cfg->header_timeout_s = (unsigned)ht;
    cfg->body_timeout_s = (unsigned)bt;
    cfg->max_conns = (unsigned)mc;
    cfg->max_conns_per_ip = (unsigned)mci;
    cfg->conns_reserved = (unsigned)crs;
    cfg->max_conns_per_token = (unsigned)mct;
    cfg->grace_s = gr;
    cfg->history_step_s = hist;
    cfg->checkpoint_retention_s = keep;
    cfg->cpus_per_gpu = cpg;
    cfg->mem_per_gpu_bytes = mem_pg;
    if (run_as) {
        json_decref(cfg->run_as);
        cfg->run_as = json_deep_copy(run_as);
    }
    if (mounts_allowed) {
        json_decref(cfg->mounts_allowed);
        cfg->mounts_allowed = json_deep_copy(mounts_allowed);
    }
    if (registries) {
        json_decref(cfg->image_registries);
        cfg->image_registries = json_deep_copy(registries);
    }
    if (prices) {
        json_decref(cfg->prices);
        cfg->prices = json_deep_copy(prices);
    }
    if (parts) {
        json_decref(cfg->partitions);
        cfg->partitions = json_array_size(parts) ? json_deep_copy(parts) : NULL;
    }
    if (pools) {
        json_decref(cfg->pools);
        cfg->pools = json_array_size(pools) ? json_deep_copy(pools) : NULL;
    }
out:
    json_decref(v);
    return rc;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    cr_buf b;
    cr_buf_init(&b);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        cr_buf_append(&b, chunk, n);
    }
    fclose(f);
    return cr_buf_take(&b);
}

/* ------------------------------------------------------------------------ */
/* Start-up and shutdown                                                    */

static void load_job(void *arg, int64_t id, const char *doc)
{
    ctl *c = arg;
    ctl_job *j = NULL;
    if (id >= c->next_id) {
        c->next_id = id + 1; /* even a row that cannot be read keeps its id */
    }
    if (ctl_job_load_doc(c, id, doc, false, &j) != 0) {
        cr_error("store: job=%lld has a bad document; skipped (its id is not reused)",
                 (long long)id);
        return;
    }
    j->in_sched = false;
    ctl_job_insert(c, j);
}

static void load_meta(void *arg, const char *key, const char *doc)
{
    ctl *c = arg;
    int64_t v;
    if (strcmp(key, "job_id_hwm") == 0 && cr_parse_i64(doc, 0, INT64_MAX / 2, &v) == 0 &&
        v >= c->next_id) {
        c->next_id = v + 1;
    }
}

/* Job ids are never handed out twice: past every row, every event and the
 * stored high-water mark, whatever could be read. */
static int load_id_floor(ctl *c)
{
    int64_t max = 0;
    int rc = cr_store_max_job_id(c->store, &max);
    if (rc == 0 && max >= c->next_id) {
        c->next_id = max + 1;
    }
    if (rc == 0) {
        rc = cr_store_load_objects(c->store, "meta", load_meta, c);
    }
    return rc;
}

static void ctl_free_state(ctl *c)
{
    ctl_jobs_free_all(c);
    ctl_nodes_free(c);
    ctl_node_labels_free(c);
    ctl_services_free(c);
    ctl_keys_free(c);
    ctl_hist_free(c->hist);
    ctl_events_free(c->events);
    c->hist = NULL;
    for (size_t i = 0; i < c->ntenants; i++) {
        json_decref(c->tenants[i]->quotas);
        json_decref(c->tenants[i]->limits);
        json_decref(c->tenants[i]->lending);
        free(c->tenants[i]);
    }
    free(c->tenants);
    free(c->usage);
    free(c->sched_ops);
    free(c->gated);
    free(c->boots);
    memset(c->secret_key, 0, sizeof c->secret_key);
    ctl_idem_free(c);
    ctl_rl_free(c);
    ctl_joblist_fini(c);
    pthread_mutex_destroy(&c->admin_mu);
    ctl_data_fini(c);
    cr_auth_table_free(c->auth);
    cr_jwt_free(c->jwt);
    cr_auth_secret_free(c->metrics_token);
    cr_prom_hist_vec_free(c->api_hist);
    cr_prom_hist_fini(&c->cycle_hist);
    json_decref(c->cfg.prices);
    json_decref(c->cfg.run_as);
    json_decref(c->cfg.mounts_allowed);
    json_decref(c->cfg.image_registries);
    json_decref(c->cfg.partitions);
    json_decref(c->cfg.pools);
    ctl_learn_free(c);
    cr_catalog_free(c->catalog);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

/* A request head is read (cr_http_head_hook): the connection limits by
 * caller (ctl_conn_admit), before the body is read, so a connection
 * holding a body back is charged to its token too. */
static bool on_head(void *ctx, cr_http_req *req)
{
    ctl *c = ctx;
    const char *token = cr_auth_bearer(cr_http_header(req, "Authorization"));
    cr_principal p;
    bool valid = token && cr_auth_table_check(c->auth, token, &p);
    return ctl_conn_admit(c, req, valid ? &p : NULL);
}

/* Listen (cert and key: PEM text or NULL for plain HTTP; borrowed). */
static int http_start(ctl *c, const char *cert, const char *key)
{
    char path[1200];
    cr_http_config hc = {
        .bind_addr = c->cfg.listen_addr,
        .port = c->cfg.port,
        .tls_cert_pem = cert,
        .tls_key_pem = key,
        .max_body_bytes = c->cfg.max_body_bytes,
        .timeout_s = c->cfg.request_timeout_s,
        .threads = c->cfg.threads,
        .header_timeout_s = c->cfg.header_timeout_s,
        .body_timeout_s = c->cfg.body_timeout_s,
        .max_conns = c->cfg.max_conns,
        .max_conns_per_ip = c->cfg.max_conns_per_ip,
        .conns_reserved = c->cfg.conns_reserved,
        .max_conns_per_token = c->cfg.max_conns_per_token,
        .handler = route,
        .on_head = on_head,
        .observe = ctl_observe,
        .ctx = c,
    };
    int rc = cr_http_server_new(&hc, &c->http);
    if (rc != 0) {
        fprintf(stderr, "corral controller: cannot listen on %s:%u\n", c->cfg.listen_addr,
                (unsigned)c->cfg.port);
        return rc;
    }
    /* The bound address for tools and tests (useful with port 0): a URL, so
     * an IPv6 address goes in brackets. */
    bool v6 = strchr(c->cfg.listen_addr, ':') != NULL;
    const char *lb = v6 ? "[" : "", *rb = v6 ? "]" : "";
    snprintf(path, sizeof path, "%s/listen.addr", c->cfg.state_dir);
    char tmp[1300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *af = fopen(tmp, "w");
    if (af) {
        fprintf(af, "%s://%s%s%s:%u\n", cert ? "https" : "http", lb, c->cfg.listen_addr, rb,
                (unsigned)cr_http_server_port(c->http));
        fclose(af);
        rename(tmp, path);
    }
    cr_info("controller listening on %s://%s%s%s:%u (state %s, policy %s)", cert ? "https" : "http",
            lb, c->cfg.listen_addr, rb, (unsigned)cr_http_server_port(c->http), c->cfg.state_dir,
            c->cfg.policy);
    if (!c->metrics_token) {
        cr_warn("/metrics is open to whoever reaches the controller: it shows counts only, no "
                "tenant names (an admin token, or --metrics-token-file's token, reads them)");
    }
    return 0;
}

/*
 * High availability: listen at once (a follower answers /healthz and
 * redirects /v1 to the leader), stand for election, and return once
 * elected (0): the caller then starts as after a restart. CR_EAGAIN when a
 * signal ended the wait (*sig), another code on failure (reported).
 */
static int ha_begin(ctl *c, const char *store_endpoints, const char *prefix, const char *cert,
                    const char *key, const sigset_t *sigs, int *sig)
{
    ctl_ha_opts o = {.endpoints = store_endpoints,
                     .prefix = prefix,
                     .advertise = c->cfg.advertise_url,
                     .ttl_s = c->cfg.election_ttl_s,
                     .sec = cr_etcd_sec_any(&c->cfg.etcd_sec) ? &c->cfg.etcd_sec : NULL};
    int rc = ctl_ha_new(&o, &c->ha);
    if (rc != 0) {
        fprintf(stderr, "corral controller: high availability: cannot use etcd at %s: %s (%s)\n",
                store_endpoints, cr_strerror(rc), cr_etcd_last_error());
        return rc;
    }
    if ((rc = http_start(c, cert, key)) != 0) {
        return rc;
    }
    if ((rc = ctl_ha_start(c->ha)) != 0) {
        fprintf(stderr, "corral controller: cannot start the election thread\n");
        return rc;
    }
    return ctl_ha_wait_elected(c->ha, sigs, sig);
}

static int run(ctl *c)
{
    int rc = 0;
    char *cert = NULL, *key = NULL;
    char path[1200];
    sigset_t sigs;
    /* Before any thread exists (the store's writer is the first), so that
     * every thread inherits the mask and SIGINT/SIGTERM reach sigwait. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (mkdir(c->cfg.state_dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "corral controller: --state-dir %s: %s\n", c->cfg.state_dir,
                strerror(errno));
        return 1;
    }
    if (cr_auth_init() != 0) {
        fprintf(stderr, "corral controller: libsodium failed to initialise\n");
        return 1;
    }
    if (ctl_secure_start(c) != 0) {
        fprintf(stderr, "corral controller: --state-dir %s: cannot secure it (see the log)\n",
                c->cfg.state_dir);
        return 1;
    }
    if (ctl_cluster_id_load(c->cfg.state_dir, c->cluster_id, sizeof c->cluster_id) != 0) {
        fprintf(stderr, "corral controller: cannot read or make %s/cluster.id\n", c->cfg.state_dir);
        return 1;
    }
    if (!c->cfg.run_as) {
        cr_warn("no \"run_as\" in the config: single-user mode, every job runs as the agents' "
                "own user (see docs/isolation.md)");
    }
    if (*c->cfg.tls_cert || *c->cfg.tls_key) {
        cert = read_file(c->cfg.tls_cert);
        key = read_file(c->cfg.tls_key);
        if (!cert || !key) {
            fprintf(stderr, "corral controller: cannot read %s\n",
                    !cert ? "--tls-cert" : "--tls-key");
            rc = CR_EIO;
            goto out;
        }
    }
    if (*c->cfg.advertise_url) {
        /* High availability: a follower until elected (ctl_ha.h). */
        char prefix[128];
        snprintf(prefix, sizeof prefix, "/corral/%s/",
                 *c->cfg.store_cluster ? c->cfg.store_cluster : "default");
        int sig = 0;
        rc = ha_begin(c, c->cfg.election, prefix, cert, key, &sigs, &sig);
        if (rc == CR_EAGAIN) {
            cr_info("signal %d: shutting down (a follower)", sig);
            rc = 0;
            goto out;
        }
        if (rc != 0) {
            goto out;
        }
    }
    if (strncmp(c->cfg.store, "etcd:", 5) == 0) {
        snprintf(path, sizeof path, "%s", c->cfg.store);
    } else {
        snprintf(path, sizeof path, "%s/corral.db", c->cfg.state_dir);
    }
    cr_store_opts so = {.sync_normal = c->cfg.sync_normal,
                        .max_batch = 0,
                        .cluster = c->cfg.store_cluster,
                        .etcd_max_txn_ops = (size_t)c->cfg.etcd_max_txn_ops,
                        .etcd_sec = cr_etcd_sec_any(&c->cfg.etcd_sec) ? &c->cfg.etcd_sec : NULL};
    rc = cr_store_open(path, &so, &c->store);
    if (rc == CR_ECORRUPT) {
        fprintf(stderr,
                "corral controller: the store %s is damaged (PRAGMA quick_check, or committed "
                "transactions after a damaged WAL frame); refusing to start so that nothing is "
                "dropped silently. Recovery: docs/operations.md, \"Damaged store\"\n",
                path);
        goto out;
    }
    if (rc != 0) {
        fprintf(stderr, "corral controller: cannot open the store %s: %s\n", path, cr_strerror(rc));
        goto out;
    }
    if (c->ha) {
        /* Every write from now on is conditional on the leader key we
         * created: once another controller holds it, ours fail. */
        rc = cr_store_set_fence(c->store, ctl_ha_key(c->ha), ctl_ha_fence(c->ha));
        if (rc == CR_ENOTSUP) {
            cr_warn("ha: the store is SQLite: writes are not fenced (only the lease watchdog "
                    "stops a deposed leader); use --store etcd:... across hosts");
            rc = 0;
        } else if (rc != 0) {
            fprintf(stderr, "corral controller: cannot fence the store: %s\n", cr_strerror(rc));
            goto out;
        }
        ctl_ha_set_store(c->ha, c->store);
    }
    c->next_id = 1;
    rc = cr_store_load_jobs(c->store, load_job, c);
    if (rc == 0) {
        rc = load_id_floor(c);
    }
    if (rc == 0) {
        rc = ctl_load_admin(c);
    }
    if (rc == 0) {
        rc = ctl_load_idem(c);
    }
    if (rc == 0) {
        rc = ctl_load_nodes(c);
    }
    if (rc == 0) {
        rc = ctl_load_node_secrets(c);
    }
    if (rc == 0) {
        rc = ctl_load_bootstrap(c);
    }
    if (rc == 0) {
        rc = ctl_load_node_labels(c);
    }
    if (rc == 0) {
        rc = ctl_load_services(c);
    }
    if (rc == 0) {
        rc = ctl_load_learn(c);
    }
    if (rc == 0) {
        rc = ctl_load_keys(c);
    }
    if (rc == 0) {
        rc = ctl_load_data(c);
    }
    if (rc == 0) {
        rc = ctl_bootstrap(c);
    }
    if (rc != 0) {
        fprintf(stderr, "corral controller: cannot load state from %s: %s\n", path,
                cr_strerror(rc));
        goto out;
    }
    ctl_state_retain_now(c); /* finished jobs beyond retain_finished stay in SQLite only */
    c->first_active = c->next_id;
    size_t slot = 0;
    for (const ctl_job *j; (j = ctl_job_next(c, &slot));) {
        if (!ctl_job_terminal(j)) {
            c->first_active = j->id;
            break;
        }
    }
    cr_info("state loaded: %lld job ids, %zu nodes, %zu tenants (schema v%d)",
            (long long)(c->next_id - 1), c->nnodes, c->ntenants, cr_store_schema_version(c->store));
    if (c->cfg.history_step_s > 0 && !c->hist) {
        c->hist = ctl_hist_new(c->cfg.history_step_s);
    }
    if (c->cfg.oidc_on && !c->jwt) {
        /* a rule that maps to no tenant would match and then refuse
         * everyone it names: refused here, before anything serves */
        for (size_t i = 0; i < c->cfg.oidc.nmap; i++) {
            const cr_jwt_rule *r = &c->cfg.oidc_rules[i];
            if (r->role == CR_ROLE_USER && !ctl_tenant_find(c, r->tenant)) {
                fprintf(stderr,
                        "corral controller: config field 'oidc.map[%zu].tenant': tenant '%s' "
                        "does not exist (create it first)\n",
                        i, r->tenant);
                rc = CR_EINVAL;
                goto out;
            }
        }
        char why[512];
        c->cfg.oidc.map = c->cfg.oidc_rules;
        if ((rc = cr_jwt_new(&c->cfg.oidc, &c->jwt, why, sizeof why)) != 0) {
            fprintf(stderr, "corral controller: config field 'oidc.jwks': %s\n", why);
            goto out;
        }
        cr_info("oidc: issuer %s, audience %s, keys from %s, %zu rules", c->cfg.oidc.issuer,
                c->cfg.oidc.audience, c->cfg.oidc.jwks, c->cfg.oidc.nmap);
    }
    rc = ctl_sched_start(c);
    if (rc == 0) {
        rc = ctl_logs_start(c);
    }
    if (rc != 0) {
        goto out;
    }
    if (!c->http && (rc = http_start(c, cert, key)) != 0) {
        goto out;
    }
    if ((rc = ctl_pools_start(c)) != 0) {
        goto out;
    }
    if (c->ha) {
        ctl_ha_set_ready(c->ha);
    }
    int sig = 0;
    sigwait(&sigs, &sig);
    cr_info("signal %d: shutting down", sig);
out:
    /* No MHD_quiesce_daemon: with its epoll worker threads it races a
     * worker that drops the listen socket from its own epoll set once it
     * sees the daemon quiesced, and the loser's EPOLL_CTL_DEL is a
     * libmicrohttpd panic ("Failed to remove listen FD from epoll set",
     * an abort seen on SIGTERM under load). Connections made while
     * draining are answered 503 CR_EUNAVAIL "controller shutting down",
     * which the clients take as "try another controller", as they took
     * a refused connection. */
    atomic_store(&c->draining, true);
    while (atomic_load(&c->inflight) > 0) {
        usleep(1000);
    }
    ctl_pools_stop(c);
    ctl_sched_stop(c);
    ctl_logs_stop(c);
    ctl_nodes_release_polls(c);
    ctl_services_release_polls(c);
    ctl_keys_release_polls(c);
    ctl_events_stop(c->events);
    if (c->ha) {
        ctl_ha_set_store(c->ha, NULL);
    }
    cr_store_close(c->store); /* commits what is queued and answers those requests */
    c->store = NULL;
    ctl_ha_free(c->ha); /* after the last write: a leader's lease goes last */
    c->ha = NULL;
    cr_http_server_free(c->http);
    free(cert);
    free(key);
    return rc == 0 ? 0 : 1;
}

int cr_controller_config_check(const char *path)
{
    ctl_config cfg;
    config_defaults(&cfg);
    int rc = load_config(path, &cfg);
    cr_sched_policy pol;
    if (rc == 0 && cr_sched_policy_parse(cfg.policy, &pol) != 0) {
        char names[128];
        cr_sched_policy_list(names, sizeof names);
        fprintf(stderr, "corral controller: %s: field 'policy': expected %s, got '%s'\n", path,
                names, cfg.policy);
        rc = CR_EINVAL;
    }
    json_decref(cfg.prices);
    return rc;
}

/* The --etcd-* options: loaded (the password read) and tried once on each
 * etcd in use, so that a wrong certificate, password or role stops the
 * start with its reason instead of failing every write (or, for a
 * standby, every campaign) later. etcd down is not an error here. */
static int etcd_check(ctl_config *cfg)
{
    const char *store = strncmp(cfg->store, "etcd:", 5) == 0 ? cfg->store + 5 : NULL;
    const char *elect = *cfg->election ? cfg->election : NULL;
    char why[1100] = "", prefix[128];
    if (!store && !elect) {
        if (cr_etcd_sec_any(&cfg->etcd_sec)) {
            fprintf(stderr, "corral controller: --etcd-* options given, but no etcd is in use "
                            "(--store etcd:URL or --election etcd:URL)\n");
            return CR_EINVAL;
        }
        return 0;
    }
    int rc = cr_etcd_sec_load(&cfg->etcd_sec, why, sizeof why);
    if (rc != 0) {
        fprintf(stderr, "corral controller: %s\n", why);
        return rc;
    }
    snprintf(prefix, sizeof prefix, "/corral/%s/",
             *cfg->store_cluster ? cfg->store_cluster : "default");
    for (int i = 0; i < 2; i++) {
        const char *eps = i == 0 ? store : elect;
        if (!eps || (i == 1 && store && strcmp(store, elect) == 0)) {
            continue;
        }
        const char *what = i == 0 ? "--store" : "--election";
        bool down = false;
        rc = cr_etcd_check(eps, cr_etcd_sec_any(&cfg->etcd_sec) ? &cfg->etcd_sec : NULL, prefix,
                           &down, why, sizeof why);
        if (rc != 0 && !down) {
            fprintf(stderr, "corral controller: %s etcd:%s: %s\n", what, eps, why);
            return rc;
        }
        if (down) {
            cr_warn("%s etcd:%s: no member answers yet (%s)", what, eps, why);
        }
        if (*cfg->etcd_sec.user && strncmp(eps, "https://", 8) != 0) {
            cr_warn("%s etcd:%s: --etcd-user over http://: the password and the token cross the "
                    "network in clear (use https:// endpoints)",
                    what, eps);
        }
    }
    return 0;
}

int cr_controller_main(int argc, char **argv)
{
    ctl *c = cr_calloc(1, sizeof *c);
    config_defaults(&c->cfg);
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->admin_mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    ctl_data_init(c);
    /* Who is told of a change (ctl_hooks.c): the agents waiting on a node's
     * desired state, and the services that follow their replica jobs. */
    ctl_on_node_change(c, ctl_desired_changed);
    ctl_on_job_change(c, ctl_services_job_changed);
    ctl_on_node_change(c, ctl_events_node);
    ctl_on_job_change(c, ctl_events_job);
    c->events = ctl_events_new();
    ctl_joblist_init(c);
    c->clock_wall0_ns = cr_now_ns();
    c->clock_mono0_ns = cr_mono_ns();
    c->auth = cr_auth_table_new();
    c->api_hist = cr_prom_hist_vec_new(cr_prom_latency_bounds, cr_prom_latency_nbounds);
    cr_prom_hist_init(&c->cycle_hist, cr_prom_latency_bounds, cr_prom_latency_nbounds);
    int ret = 2;
    enum {
        O_CONFIG = 256,
        O_LISTEN,
        O_STATE,
        O_CERT,
        O_KEY,
        O_POLICY,
        O_ROUND,
        O_HB,
        O_LOST,
        O_SYNC,
        O_THREADS,
        O_CCERT,
        O_CKEY,
        O_LEGACY,
        O_ADVERTISE,
        O_ELECTION,
        O_ELECTION_TTL,
        O_STORE,
        O_STORE_CLUSTER,
        O_ETCD_OPS,
        O_METRICS_TOKEN,
        O_ETCD_SEC,
        O_RATE,
        O_HIST
    };
    static const struct option opts[] = {
        {"config", required_argument, NULL, O_CONFIG},
        {"listen", required_argument, NULL, O_LISTEN},
        {"state-dir", required_argument, NULL, O_STATE},
        {"tls-cert", required_argument, NULL, O_CERT},
        {"tls-key", required_argument, NULL, O_KEY},
        {"policy", required_argument, NULL, O_POLICY},
        {"round", required_argument, NULL, O_ROUND},
        {"heartbeat", required_argument, NULL, O_HB},
        {"history-step", required_argument, NULL, O_HIST},
        {"lost-after", required_argument, NULL, O_LOST},
        {"sync", required_argument, NULL, O_SYNC},
        {"threads", required_argument, NULL, O_THREADS},
        {"tls-client-cert", required_argument, NULL, O_CCERT},
        {"tls-client-key", required_argument, NULL, O_CKEY},
        {"allow-legacy-join", no_argument, NULL, O_LEGACY},
        {"advertise-url", required_argument, NULL, O_ADVERTISE},
        {"election", required_argument, NULL, O_ELECTION},
        {"election-ttl", required_argument, NULL, O_ELECTION_TTL},
        {"store", required_argument, NULL, O_STORE},
        {"store-cluster", required_argument, NULL, O_STORE_CLUSTER},
        {"etcd-max-txn-ops", required_argument, NULL, O_ETCD_OPS},
        {"metrics-token-file", required_argument, NULL, O_METRICS_TOKEN},
        {"etcd-cacert", required_argument, NULL, O_ETCD_SEC},
        {"etcd-cert", required_argument, NULL, O_ETCD_SEC},
        {"etcd-key", required_argument, NULL, O_ETCD_SEC},
        {"etcd-user", required_argument, NULL, O_ETCD_SEC},
        {"etcd-password-file", required_argument, NULL, O_ETCD_SEC},
        {"rate-limit-rps", required_argument, NULL, O_RATE},
        {"rate-limit-burst", required_argument, NULL, O_RATE},
        {"rate-limit-anon-rps", required_argument, NULL, O_RATE},
        {"rate-limit-anon-burst", required_argument, NULL, O_RATE},
        {"rate-limit-table", required_argument, NULL, O_RATE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    /* The config file first, so that flags override it. */
    for (int i = 1; i < argc; i++) {
        const char *cf = NULL;
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            cf = argv[i + 1];
        } else if (strncmp(argv[i], "--config=", 9) == 0) {
            cf = argv[i] + 9;
        }
        if (cf && load_config(cf, &c->cfg) != 0) {
            goto out;
        }
    }
    opterr = 0;
    optind = 1;
    int o, oi = 0;
    char why[1100];
    while ((o = getopt_long(argc, argv, "h", opts, &oi)) != -1) {
        int64_t x;
        switch (o) {
        case O_CONFIG:
            break;
        case O_LISTEN:
            if (parse_listen(optarg, &c->cfg) != 0) {
                fprintf(stderr, "corral controller: --listen: expected HOST:PORT, got '%s'\n",
                        optarg);
                goto out;
            }
            break;
        case O_STATE:
            snprintf(c->cfg.state_dir, sizeof c->cfg.state_dir, "%s", optarg);
            break;
        case O_CERT:
            snprintf(c->cfg.tls_cert, sizeof c->cfg.tls_cert, "%s", optarg);
            break;
        case O_KEY:
            snprintf(c->cfg.tls_key, sizeof c->cfg.tls_key, "%s", optarg);
            break;
        case O_CCERT:
            snprintf(c->cfg.tls_client_cert, sizeof c->cfg.tls_client_cert, "%s", optarg);
            break;
        case O_CKEY:
            snprintf(c->cfg.tls_client_key, sizeof c->cfg.tls_client_key, "%s", optarg);
            break;
        case O_METRICS_TOKEN:
            snprintf(c->cfg.metrics_token_file, sizeof c->cfg.metrics_token_file, "%s", optarg);
            break;
        case O_LEGACY:
            c->cfg.legacy_join = true;
            break;
        case O_POLICY:
            if (cr_sched_policy_parse(optarg, &(cr_sched_policy){0}) != 0) {
                char names[128];
                cr_sched_policy_list(names, sizeof names);
                fprintf(stderr, "corral controller: --policy: expected %s, got '%s'\n", names,
                        optarg);
                goto out;
            }
            snprintf(c->cfg.policy, sizeof c->cfg.policy, "%s", optarg);
            break;
        case O_ROUND:
            if (cr_parse_i64(optarg, 1, 86400, &x) != 0) {
                fprintf(stderr, "corral controller: --round: expected seconds 1..86400, got '%s'\n",
                        optarg);
                goto out;
            }
            c->cfg.round_s = x;
            break;
        case O_HB:
        case O_LOST:
            if (cr_parse_i64(optarg, 1, 86400, &x) != 0) {
                fprintf(stderr, "corral controller: --%s: expected seconds 1..86400, got '%s'\n",
                        o == O_HB ? "heartbeat" : "lost-after", optarg);
                goto out;
            }
            if (o == O_HB) {
                c->cfg.heartbeat_s = x;
            } else {
                c->cfg.lost_after_s = x;
            }
            break;
        case O_HIST:
            if (cr_parse_i64(optarg, 0, 60, &x) != 0) {
                fprintf(stderr,
                        "corral controller: --history-step: expected seconds 0..60, got '%s'\n",
                        optarg);
                goto out;
            }
            c->cfg.history_step_s = x;
            break;
        case O_SYNC:
            if (strcmp(optarg, "full") && strcmp(optarg, "normal")) {
                fprintf(stderr, "corral controller: --sync: expected full|normal, got '%s'\n",
                        optarg);
                goto out;
            }
            c->cfg.sync_normal = strcmp(optarg, "normal") == 0;
            break;
        case O_THREADS:
            if (cr_parse_i64(optarg, 1, 256, &x) != 0) {
                fprintf(stderr, "corral controller: --threads: expected 1..256, got '%s'\n",
                        optarg);
                goto out;
            }
            c->cfg.threads = (unsigned)x;
            break;
        case O_ADVERTISE:
            if (!ctl_ha_url_ok(optarg)) {
                fprintf(stderr,
                        "corral controller: --advertise-url: expected http(s)://HOST:PORT (no "
                        "path, at most %d bytes), got '%s'\n",
                        CTL_HA_URL_MAX, optarg);
                goto out;
            }
            snprintf(c->cfg.advertise_url, sizeof c->cfg.advertise_url, "%s", optarg);
            break;
        case O_ELECTION:
            if (strncmp(optarg, "etcd:", 5) != 0 || strlen(optarg + 5) == 0 ||
                strlen(optarg + 5) >= sizeof c->cfg.election) {
                fprintf(stderr,
                        "corral controller: --election: expected etcd:http://HOST:PORT[,...], "
                        "got '%s'\n",
                        optarg);
                goto out;
            }
            snprintf(c->cfg.election, sizeof c->cfg.election, "%s", optarg + 5);
            break;
        case O_ELECTION_TTL:
            if (cr_parse_i64(optarg, CTL_HA_TTL_MIN_S, CTL_HA_TTL_MAX_S, &x) != 0) {
                fprintf(stderr,
                        "corral controller: --election-ttl: expected seconds %d..%d, got "
                        "'%s'\n",
                        CTL_HA_TTL_MIN_S, CTL_HA_TTL_MAX_S, optarg);
                goto out;
            }
            c->cfg.election_ttl_s = x;
            break;
        case O_STORE:
            if (store_spec_check(optarg, NULL, "--store") != 0) {
                goto out;
            }
            snprintf(c->cfg.store, sizeof c->cfg.store, "%s", optarg);
            break;
        case O_STORE_CLUSTER:
            if (store_cluster_check(optarg, NULL) != 0) {
                goto out;
            }
            snprintf(c->cfg.store_cluster, sizeof c->cfg.store_cluster, "%s", optarg);
            break;
        case O_ETCD_OPS:
            if (cr_parse_i64(optarg, 8, 1000000, &x) != 0) {
                fprintf(stderr,
                        "corral controller: --etcd-max-txn-ops: expected 8..1000000, got '%s'\n",
                        optarg);
                goto out;
            }
            c->cfg.etcd_max_txn_ops = x;
            break;
        case O_ETCD_SEC:
            if (cr_etcd_sec_set(&c->cfg.etcd_sec, opts[oi].name, optarg, why, sizeof why) != 0) {
                fprintf(stderr, "corral controller: %s\n", why);
                goto out;
            }
            break;
        case O_RATE:
            if (ctl_rl_flag(&c->cfg, opts[oi].name, optarg) != 0) {
                goto out;
            }
            break;
        case 'h':
            usage(stdout);
            ret = 0;
            goto out;
        default:
            fprintf(stderr, "corral controller: unknown or incomplete option '%s'\n",
                    argv[optind - 1]);
            usage(stderr);
            goto out;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "corral controller: unexpected argument '%s'\n", argv[optind]);
        goto out;
    }
    if (*c->cfg.advertise_url && !*c->cfg.election && strncmp(c->cfg.store, "etcd:", 5) == 0) {
        snprintf(c->cfg.election, sizeof c->cfg.election, "%s", c->cfg.store + 5);
    }
    if (*c->cfg.advertise_url && !*c->cfg.election) {
        fprintf(stderr, "corral controller: --advertise-url needs the etcd members of the "
                        "election: --election etcd:URL[,URL...]\n");
        goto out;
    }
    if (!*c->cfg.advertise_url && *c->cfg.election) {
        fprintf(stderr, "corral controller: --election needs --advertise-url (the URL the "
                        "leader is reached at)\n");
        goto out;
    }
    if ((*c->cfg.tls_cert != '\0') != (*c->cfg.tls_key != '\0')) {
        fprintf(stderr, "corral controller: --tls-cert and --tls-key go together\n");
        goto out;
    }
    if ((*c->cfg.tls_client_cert != '\0') != (*c->cfg.tls_client_key != '\0')) {
        fprintf(stderr, "corral controller: --tls-client-cert and --tls-client-key go together\n");
        goto out;
    }
    for (int i = 0; i < 2; i++) {
        const char *f = i ? c->cfg.tls_client_key : c->cfg.tls_client_cert;
        if (*f && access(f, R_OK) != 0) {
            fprintf(stderr, "corral controller: --tls-client-%s %s: %s\n", i ? "key" : "cert", f,
                    strerror(errno));
            goto out;
        }
    }
    if (*c->cfg.metrics_token_file) {
        const char *mwhy = NULL;
        if (cr_auth_secret_file(c->cfg.metrics_token_file, &c->metrics_token, &mwhy) < 0) {
            fprintf(stderr, "corral controller: --metrics-token-file %s: %s\n",
                    c->cfg.metrics_token_file, mwhy);
            goto out;
        }
    }
    if (etcd_check(&c->cfg) != 0) {
        goto out;
    }
    /* gpu_type auto needs the GPU catalog: without it, stop here rather
     * than let auto silently mean "any type" (docs/install.md). */
    cr_catalog *cat = NULL;
    char cerr[600];
    if (cr_catalog_load(NULL, &cat, cerr, sizeof cerr) != 0) {
        fprintf(stderr,
                "corral controller: GPU catalog: %s (install the data, or set CORRAL_DATA or "
                "--data-dir)\n",
                cerr);
        goto out;
    }
    c->catalog = cat; /* the submit checks GPU types against it */
    if (ctl_rl_start(c) != 0) {
        goto out;
    }
    ret = run(c);
out:
    cr_etcd_sec_wipe(&c->cfg.etcd_sec);
    ctl_free_state(c);
    free(c);
    return ret;
}
