/*
 * cli_keys.c - corral keys: the inference gateway's API keys (docs/api.md,
 * "API keys"), and the token usage rows of corral usage.
 */
#include "cli_int.h"

#include "cr_alloc.h"
#include "cr_client.h"
#include "cr_error.h"
#include "cr_parse.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define NOPTS(o) (sizeof(o) / sizeof((o)[0]))

static const cli_opt keys_opts[] = {
    {"tenant", CLI_STR, "T", "tenant of the key (admins; a user's token: its own)", NULL, 0, 0, 0},
    {"name", CLI_STR, "NAME", "who holds it (shown in lists)", NULL, 0, 0, 0},
    {"service", CLI_LIST, "NAME", "scope: a service it may use (repeatable; default all)", NULL, 0,
     0, 0},
    {"model", CLI_LIST, "NAME", "scope: a model it may use (repeatable; default all)", NULL, 0, 0,
     0},
    {"rps", CLI_F64, "N", "requests per second on each gateway (default no limit)", NULL, 0,
     1000000, 0},
    {"concurrency", CLI_INT, "N", "requests at once on each gateway (default no limit)", NULL, 0,
     1000000, 0},
    {"tpm", CLI_INT, "N", "tokens per minute on each gateway (default no limit)", NULL, 0,
     1000000000, 0},
    {"token-budget", CLI_INT, "N",
     "tokens in all, every gateway together; spent: 429 insufficient_quota (default none)", NULL, 0,
     1000000000000000LL, 0},
    {"expires", CLI_DUR, "DUR", "lifetime (90d, 12h; default: never expires)", NULL, 0, 0, 0},
};

static const char *jstr(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static json_t *list_of(const cli_val *v)
{
    json_t *a = json_array();
    for (size_t i = 0; i < v->count; i++) {
        /* also NAME,NAME */
        char *copy = cr_strdup(v->list[i]), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            json_array_append_new(a, json_string(t));
        }
        free(copy);
    }
    return a;
}

static void join(const json_t *a, char *out, size_t len)
{
    out[0] = '\0';
    size_t i;
    json_t *x;
    json_array_foreach(a, i, x)
    {
        size_t n = strlen(out);
        snprintf(out + n, len - n, "%s%s", i ? "," : "", json_string_value(x));
    }
    if (!out[0]) {
        snprintf(out, len, "*");
    }
}

static void keys_table(const json_t *items, FILE *f)
{
    static const char *const hdr[] = {">ID",     "TENANT",  "NAME",         "SERVICES",
                                      "MODELS",  ">RPS",    ">CONCURRENCY", ">TPM",
                                      ">BUDGET", "EXPIRES", "STATE"};
    cli_table t;
    cr__cli_table_init(&t, 11, hdr);
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        char id[32], sv[256], md[256], rps[32], cc[32], tpm[32], bud[32];
        cr__cli_json_text(json_object_get(it, "id"), id, sizeof id);
        join(json_object_get(it, "services"), sv, sizeof sv);
        join(json_object_get(it, "models"), md, sizeof md);
        double r = json_number_value(json_object_get(it, "rps"));
        json_int_t c = json_integer_value(json_object_get(it, "concurrency"));
        snprintf(rps, sizeof rps, r > 0 ? "%g" : "-", r);
        snprintf(cc, sizeof cc, c > 0 ? "%lld" : "-", (long long)c);
        json_int_t tp = json_integer_value(json_object_get(it, "tpm"));
        json_int_t bu = json_integer_value(json_object_get(it, "token_budget"));
        snprintf(tpm, sizeof tpm, tp > 0 ? "%lld" : "-", (long long)tp);
        snprintf(bud, sizeof bud, bu > 0 ? "%lld" : "-", (long long)bu);
        const char *state = jstr(it, "revoked")[0]                         ? "revoked"
                            : json_is_true(json_object_get(it, "expired")) ? "expired"
                                                                           : "active";
        const char *row[] = {id,
                             jstr(it, "tenant"),
                             jstr(it, "name"),
                             sv,
                             md,
                             rps,
                             cc,
                             tpm,
                             bud,
                             jstr(it, "expires")[0] ? jstr(it, "expires") : "never",
                             state};
        cr__cli_table_row(&t, row);
    }
    cr__cli_table_print(&t, f);
    cr__cli_table_fini(&t);
}

static int key_revoke(cli_ctx *ctx, const char *id, cr_client_res *res)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/keys/%s", id);
    return cr_client_request(ctx->client, "DELETE", path, NULL, 0, res);
}

int cr__cli_keys(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    json_t *body = NULL;
    cr_client_res res;
    cr_client_res_init(&res);
    if (cr__cli_begin(
            ctx, &a,
            "[list] | create [--tenant T] [--name NAME] [--service S]... [--model M]... "
            "[--rps N] [--concurrency N] [--tpm N] [--token-budget N] [--expires DUR] | revoke "
            "ID...",
            keys_opts, NOPTS(keys_opts), false, argc, argv, &code)) {
        goto out;
    }
    const char *verb = a.npos ? a.pos[0] : "list";
    if (strcmp(verb, "list") == 0) {
        if (a.npos > 1) {
            fprintf(ctx->err, "corral keys list: takes no argument\n");
            code = CLI_EXIT_USAGE;
            goto out;
        }
        if ((code = cr__cli_connect(ctx, &a)) != 0) {
            goto out;
        }
        code = cr__cli_print_list(ctx,
                                  cr_client_request(ctx->client, "GET", "/v1/keys", NULL, 0, &res),
                                  &res, keys_table);
    } else if (strcmp(verb, "create") == 0) {
        if (a.npos > 1) {
            fprintf(ctx->err, "corral keys create: unexpected argument '%s'\n", a.pos[1]);
            code = CLI_EXIT_USAGE;
            goto out;
        }
        body = json_object();
        const cli_val *v;
        if ((v = cr__cli_arg(&a, "tenant"))->set) {
            json_object_set_new(body, "tenant", json_string(v->str));
        }
        if ((v = cr__cli_arg(&a, "name"))->set) {
            json_object_set_new(body, "name", json_string(v->str));
        }
        json_object_set_new(body, "services", list_of(cr__cli_arg(&a, "service")));
        json_object_set_new(body, "models", list_of(cr__cli_arg(&a, "model")));
        if ((v = cr__cli_arg(&a, "rps"))->set) {
            json_object_set_new(body, "rps", json_real(v->f));
        }
        if ((v = cr__cli_arg(&a, "concurrency"))->set) {
            json_object_set_new(body, "concurrency", json_integer(v->i));
        }
        if ((v = cr__cli_arg(&a, "tpm"))->set) {
            json_object_set_new(body, "tpm", json_integer(v->i));
        }
        if ((v = cr__cli_arg(&a, "token-budget"))->set) {
            json_object_set_new(body, "token_budget", json_integer(v->i));
        }
        if ((v = cr__cli_arg(&a, "expires"))->set) {
            int64_t s = v->i / 1000000000LL;
            if (s < 1) {
                fprintf(ctx->err, "corral keys create: --expires: at least 1s\n");
                code = CLI_EXIT_USAGE;
                goto out;
            }
            json_object_set_new(body, "expires_in_s", json_integer(s));
        }
        if ((code = cr__cli_connect(ctx, &a)) != 0) {
            goto out;
        }
        int rc = cr_client_request(ctx->client, "POST", "/v1/keys", body, 0, &res);
        if (rc < 0) {
            code = cr__cli_fail(ctx, rc, &res);
        } else if (ctx->json) {
            cr__cli_print_json(ctx, res.body);
        } else {
            char id[32];
            cr__cli_json_text(json_object_get(res.body, "id"), id, sizeof id);
            fprintf(ctx->err, "Created key %s (tenant %s); it is shown only this once:\n", id,
                    jstr(res.body, "tenant"));
            fprintf(ctx->out, "%s\n", jstr(res.body, "key"));
        }
    } else if (strcmp(verb, "revoke") == 0) {
        if (a.npos < 2) {
            fprintf(ctx->err, "corral keys revoke: expected at least one key id\n");
            code = CLI_EXIT_USAGE;
            goto out;
        }
        if ((code = cr__cli_check_ids(ctx, &a, 1, "keys revoke",
                                      "a key id (a number from 'corral keys')")) != 0 ||
            (code = cr__cli_connect(ctx, &a)) != 0) {
            goto out;
        }
        code = cr__cli_each_id(ctx, &a, 1, key_revoke, true, "Revoked key", &res);
    } else {
        fprintf(ctx->err, "corral keys: unknown action '%s' (allowed: list, create, revoke)\n",
                verb);
        code = CLI_EXIT_USAGE;
    }
out:
    json_decref(body);
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}

static void tokens_table(const json_t *rows, bool per_key, FILE *f)
{
    static const char *const hk[] = {">KEY",         "TENANT",         "NAME",
                                     ">REQUESTS",    ">PROMPT_TOKENS", ">COMPLETION_TOKENS",
                                     ">TOTAL_TOKENS"};
    static const char *const ht[] = {"TENANT", ">REQUESTS", ">PROMPT_TOKENS", ">COMPLETION_TOKENS",
                                     ">TOTAL_TOKENS"};
    cli_table t;
    cr__cli_table_init(&t, per_key ? 7 : 5, per_key ? hk : ht);
    size_t i;
    json_t *it;
    json_array_foreach(rows, i, it)
    {
        char id[32], rq[32], pt[32], ct[32], tt[32];
        cr__cli_json_text(json_object_get(it, "id"), id, sizeof id);
        cr__cli_json_text(json_object_get(it, "requests"), rq, sizeof rq);
        cr__cli_json_text(json_object_get(it, "prompt_tokens"), pt, sizeof pt);
        cr__cli_json_text(json_object_get(it, "completion_tokens"), ct, sizeof ct);
        cr__cli_json_text(json_object_get(it, "total_tokens"), tt, sizeof tt);
        if (per_key) {
            const char *row[] = {id, jstr(it, "tenant"), jstr(it, "name"), rq, pt, ct, tt};
            cr__cli_table_row(&t, row);
        } else {
            const char *row[] = {jstr(it, "tenant"), rq, pt, ct, tt};
            cr__cli_table_row(&t, row);
        }
    }
    cr__cli_table_print(&t, f);
    cr__cli_table_fini(&t);
}

int cr__cli_usage_tokens(cli_ctx *ctx, json_t **out)
{
    cr_client_res res;
    cr_client_res_init(&res);
    int rc = cr_client_request(ctx->client, "GET", "/v1/keys/usage", NULL, 0, &res);
    if (rc < 0 || !json_is_array(json_object_get(res.body, "keys"))) {
        cr_client_res_fini(&res); /* an older controller: no token usage */
        return rc < 0 ? rc : CR_ENOENT;
    }
    if (out) {
        *out = json_incref(res.body);
    } else if (json_array_size(json_object_get(res.body, "keys")) > 0) {
        fprintf(ctx->out, "\nInference tokens per tenant (API keys, counted by the gateways):\n");
        tokens_table(json_object_get(res.body, "tenants"), false, ctx->out);
        fprintf(ctx->out, "\nPer API key:\n");
        tokens_table(json_object_get(res.body, "keys"), true, ctx->out);
    }
    cr_client_res_fini(&res);
    return 0;
}
