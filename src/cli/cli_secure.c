/*
 * cli_secure.c - security administration: bootstrap tokens for joining
 * nodes (corral admin bootstrap-token ...), node approval (corral nodes
 * approve NODE) and the audit log (corral audit).
 */
#include "cli_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_parse.h"
#include "cr_time.h"

#include <string.h>

#define NOPTS(o) (sizeof(o) / sizeof((o)[0]))

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* One request; prints the failure and returns its exit code, else 0. */
static int call(cli_ctx *ctx, const char *method, const char *path, const json_t *body,
                cr_client_res *res)
{
    int rc = cr_client_request(ctx->client, method, path, body, 0, res);
    return rc < 0 ? cr__cli_fail(ctx, rc, res) : 0;
}

/* --- corral admin bootstrap-token ------------------------------------------------ */

static const cli_opt boot_opts[] = {
    {"ttl", CLI_DUR, "DURATION", "how long it may be used (default 1h; at most 30d)", NULL, 0, 0,
     0},
    {"uses", CLI_INT, "N", "registrations it allows (default 1)", NULL, 1, 1000, 0},
    {"node", CLI_STR, "NODE", "only this node name (may re-key a registered node)", NULL, 0, 0, 0},
    {"name", CLI_STR, "NAME", "a label (shown in lists and the audit log)", NULL, 0, 0, 0},
};

static int boot_revoke(cli_ctx *ctx, const char *id, cr_client_res *res)
{
    char path[96];
    snprintf(path, sizeof path, "/v1/bootstrap-tokens/%s", id);
    return cr_client_request(ctx->client, "DELETE", path, NULL, 0, res);
}

int cr__cli_admin(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    json_t *body = NULL;
    cr_client_res res;
    cr_client_res_init(&res);
    if (cr__cli_begin(ctx, &a,
                      "bootstrap-token create [--ttl 1h] [--uses 1] [--node NODE] [--name N] | "
                      "bootstrap-token list | bootstrap-token revoke ID...",
                      boot_opts, NOPTS(boot_opts), false, argc, argv, &code)) {
        goto out;
    }
    if (a.npos < 2 || strcmp(a.pos[0], "bootstrap-token") != 0) {
        fprintf(ctx->err, "corral admin: expected 'bootstrap-token create|list|revoke'\n");
        code = CLI_EXIT_USAGE;
        goto out;
    }
    const char *verb = a.pos[1];
    if (strcmp(verb, "create") == 0) {
        if (a.npos > 2) {
            fprintf(ctx->err, "corral admin bootstrap-token create: unexpected argument '%s'\n",
                    a.pos[2]);
            code = CLI_EXIT_USAGE;
            goto out;
        }
        const cli_val *ttl = cr__cli_arg(&a, "ttl");
        if (ttl->set && (ttl->i < CR_NS_PER_SEC || ttl->i > 30 * 86400 * CR_NS_PER_SEC)) {
            fprintf(ctx->err, "corral admin bootstrap-token create: --ttl: '%s' must be 1s..30d\n",
                    ttl->str);
            code = CLI_EXIT_USAGE;
            goto out;
        }
        body = json_object();
        if (ttl->set) {
            json_object_set_new(body, "ttl_s", json_integer(ttl->i / CR_NS_PER_SEC));
        }
        if (cr__cli_arg(&a, "uses")->set) {
            json_object_set_new(body, "uses", json_integer(cr__cli_arg(&a, "uses")->i));
        }
        if (cr__cli_arg(&a, "node")->set) {
            json_object_set_new(body, "node", json_string(cr__cli_arg(&a, "node")->str));
        }
        if (cr__cli_arg(&a, "name")->set) {
            json_object_set_new(body, "name", json_string(cr__cli_arg(&a, "name")->str));
        }
        if ((code = cr__cli_connect(ctx, &a)) != 0 ||
            (code = call(ctx, "POST", "/v1/bootstrap-tokens", body, &res)) != 0) {
            goto out;
        }
        if (ctx->json) {
            cr__cli_print_json(ctx, res.body);
        } else {
            char id[64], uses[64];
            cr__cli_json_text(json_object_get(res.body, "id"), id, sizeof id);
            cr__cli_json_text(json_object_get(res.body, "uses_left"), uses, sizeof uses);
            fprintf(ctx->err,
                    "Created bootstrap token %s (%s use(s), expires %s); it is shown only this "
                    "once. Give it to the agent in a file (--join-token FILE) or in "
                    "CORRAL_JOIN_TOKEN:\n",
                    id, uses, jstr(res.body, "expires") ? jstr(res.body, "expires") : "?");
            fprintf(ctx->out, "%s\n", jstr(res.body, "token") ? jstr(res.body, "token") : "?");
        }
    } else if (strcmp(verb, "list") == 0) {
        if ((code = cr__cli_connect(ctx, &a)) != 0) {
            goto out;
        }
        code = cr__cli_print_list(
            ctx, cr_client_request(ctx->client, "GET", "/v1/bootstrap-tokens", NULL, 0, &res), &res,
            NULL);
    } else if (strcmp(verb, "revoke") == 0) {
        if (a.npos < 3) {
            fprintf(ctx->err, "corral admin bootstrap-token revoke: expected token ids\n");
            code = CLI_EXIT_USAGE;
            goto out;
        }
        if ((code = cr__cli_check_ids(ctx, &a, 2, "admin bootstrap-token revoke", "a token id")) !=
                0 ||
            (code = cr__cli_connect(ctx, &a)) != 0) {
            goto out;
        }
        /* (its answer is a line even with --json, as it always was) */
        code = cr__cli_each_id(ctx, &a, 2, boot_revoke, false, "Revoked bootstrap token", &res);
    } else {
        fprintf(ctx->err,
                "corral admin bootstrap-token: unknown action '%s' (allowed: create, list, "
                "revoke)\n",
                verb);
        code = CLI_EXIT_USAGE;
    }
out:
    json_decref(body);
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}

/* --- corral nodes approve NODE ------------------------------------------------------ */

int cr__cli_node_approve(cli_ctx *ctx, const cli_args *a, const char *node)
{
    cr_client_res res;
    cr_client_res_init(&res);
    int code = cr__cli_connect(ctx, a);
    char path[160];
    snprintf(path, sizeof path, "/v1/nodes/%.100s/approve", node);
    if (code == 0 && (code = call(ctx, "POST", path, NULL, &res)) == 0) {
        if (ctx->json) {
            cr__cli_print_json(ctx, res.body);
        } else {
            char buf[128];
            fprintf(ctx->out, "Approved node %s\n", cr__cli_escape(node, buf, sizeof buf));
        }
    }
    cr_client_res_fini(&res);
    return code;
}

/* --- corral audit -------------------------------------------------------------------------- */

static const cli_opt audit_opts[] = {
    {"since", CLI_STR, "WHEN", "entries from this time on: a duration ago (24h) or RFC 3339", NULL,
     0, 0, 0},
    {"limit", CLI_INT, "N", "the newest N entries (default 100)", NULL, 1, 10000, 0},
};

int cr__cli_audit(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    cr_client_res res;
    cr_client_res_init(&res);
    if (cr__cli_begin(ctx, &a, "[--since 24h|RFC3339] [--limit N]", audit_opts, NOPTS(audit_opts),
                      false, argc, argv, &code)) {
        goto out;
    }
    if (a.npos > 0) {
        fprintf(ctx->err, "corral audit: unexpected argument '%s'\n", a.pos[0]);
        code = CLI_EXIT_USAGE;
        goto out;
    }
    int64_t since_s = 0;
    const cli_val *since = cr__cli_arg(&a, "since");
    if (since->set) {
        int64_t ns;
        if (cr_duration_parse(since->str, &ns) == 0) {
            since_s = (ctx->now_ns - ns) / CR_NS_PER_SEC;
        } else if (cr__cli_parse_rfc3339(since->str, &ns) == 0) {
            since_s = ns / CR_NS_PER_SEC;
        } else {
            fprintf(ctx->err,
                    "corral audit: --since: '%s' is neither a duration (24h) nor an RFC 3339 "
                    "time\n",
                    since->str);
            code = CLI_EXIT_USAGE;
            goto out;
        }
        since_s = since_s < 0 ? 0 : since_s;
    }
    char path[128];
    snprintf(path, sizeof path, "/v1/audit?since_s=%lld&limit=%lld", (long long)since_s,
             (long long)(cr__cli_arg(&a, "limit")->set ? cr__cli_arg(&a, "limit")->i : 100));
    if ((code = cr__cli_connect(ctx, &a)) != 0 ||
        (code = call(ctx, "GET", path, NULL, &res)) != 0) {
        goto out;
    }
    if (ctx->json) {
        cr__cli_print_json(ctx, res.body);
        goto out;
    }
    static const char *const hdr[] = {"TIME", "WHO", "ROLE", "TENANT", "FROM", "ACTION"};
    cli_table t;
    cr__cli_table_init(&t, 6, hdr);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(res.body, "items"), i, e)
    {
        const char *row[] = {jstr(e, "time"),   jstr(e, "who"),  jstr(e, "role"),
                             jstr(e, "tenant"), jstr(e, "from"), jstr(e, "action")};
        cr__cli_table_row(&t, row);
    }
    if (t.nrows > 1) {
        cr__cli_table_print(&t, ctx->out);
    } else {
        fputs("(no audit entries)\n", ctx->out);
    }
    cr__cli_table_fini(&t);
out:
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}
