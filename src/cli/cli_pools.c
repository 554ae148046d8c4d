/*
 * cli_pools.c - corral pools: the node pools (issue 31; docs/pools.md),
 * their nodes and state, and (admins) their latest events.
 */
#include "cli_int.h"

#include "cr_error.h"

#include <stdio.h>
#include <string.h>

static const char *jstr(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static const cli_opt pools_opts[] = {
    {"events", CLI_INT, "N", "the newest N events of each pool (default 10; admins)", NULL, 0, 64,
     0},
};

static void pools_print(cli_ctx *ctx, const json_t *items, int64_t nev)
{
    static const char *const ph[] = {"POOL",    "TYPE",   "GPUS/NODE", "NODES",
                                     "MIN-MAX", "COST/H", "STATE",     "LABELS"};
    cli_table t;
    cr__cli_table_init(&t, 8, ph);
    size_t i;
    json_t *p;
    json_array_foreach(items, i, p)
    {
        char gpn[16], nn[16], mm[32], cost[32], st[160], lab[256];
        const json_t *cnt = json_object_get(p, "counts");
        snprintf(gpn, sizeof gpn, "%lld",
                 (long long)json_integer_value(json_object_get(p, "gpus_per_node")));
        snprintf(nn, sizeof nn, "%zu", json_array_size(json_object_get(p, "nodes")));
        snprintf(mm, sizeof mm, "%lld-%lld",
                 (long long)json_integer_value(json_object_get(p, "min_nodes")),
                 (long long)json_integer_value(json_object_get(p, "max_nodes")));
        snprintf(cost, sizeof cost, "%.2f (%.2f so far)",
                 json_number_value(json_object_get(p, "cost_per_hour")),
                 json_number_value(json_object_get(p, "cost")));
        const json_t *pw = json_object_get(p, "power");
        if (!json_is_true(json_object_get(p, "elastic")) && pw) {
            /* power saving (issue 31): how many members sleep */
            size_t off = 0;
            const char *nk;
            json_t *nv;
            json_object_foreach((json_t *)json_object_get(pw, "nodes"), nk, nv)
            {
                const char *sv = json_string_value(nv);
                off += sv && strcmp(sv, "on") != 0;
            }
            snprintf(st, sizeof st, "static, %zu suspended or resuming (after %llds idle)", off,
                     (long long)json_integer_value(json_object_get(pw, "suspend_s")));
        } else if (!json_is_true(json_object_get(p, "elastic"))) {
            snprintf(st, sizeof st, "static");
        } else if (json_object_get(p, "refused")) {
            snprintf(st, sizeof st, "refused: %.120s", jstr(p, "refused"));
        } else if (json_object_get(p, "backoff_s")) {
            snprintf(st, sizeof st, "backoff %llds",
                     (long long)json_integer_value(json_object_get(p, "backoff_s")));
        } else {
            snprintf(st, sizeof st, "%lld booting, %lld draining",
                     (long long)json_integer_value(json_object_get(cnt, "booting")),
                     (long long)json_integer_value(json_object_get(cnt, "draining")));
        }
        if (json_object_get(p, "power_cap_w")) {
            size_t sl = strlen(st);
            snprintf(st + sl, sizeof st - sl, "; GPUs capped at %lld W",
                     (long long)json_integer_value(json_object_get(p, "power_cap_w")));
        }
        size_t o = 0;
        lab[0] = '\0';
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(p, "labels"), k, v)
        {
            if (o < sizeof lab) {
                o += (size_t)snprintf(lab + o, sizeof lab - o, "%s%s=%s", o ? "," : "", k,
                                      json_string_value(v));
            }
        }
        const char *row[] = {jstr(p, "name"), jstr(p, "gpu_type"), gpn, nn, mm, cost, st, lab};
        cr__cli_table_row(&t, row);
    }
    cr__cli_table_print(&t, ctx->out);
    cr__cli_table_fini(&t);

    static const char *const nh[] = {"NODE", "POOL", "STATE", "NODE-STATE", "AGE", "IDLE", "JOBS"};
    cr__cli_table_init(&t, 7, nh);
    size_t rows = 0;
    json_array_foreach(items, i, p)
    {
        size_t k;
        json_t *n;
        json_array_foreach(json_object_get(p, "nodes"), k, n)
        {
            char age[32] = "-", idle[32] = "-", jobs[16] = "-";
            if (json_object_get(n, "age_s")) {
                snprintf(age, sizeof age, "%llds",
                         (long long)json_integer_value(json_object_get(n, "age_s")));
            }
            if (json_object_get(n, "idle_s")) {
                snprintf(idle, sizeof idle, "%llds",
                         (long long)json_integer_value(json_object_get(n, "idle_s")));
            }
            if (json_object_get(n, "jobs")) {
                snprintf(jobs, sizeof jobs, "%lld",
                         (long long)json_integer_value(json_object_get(n, "jobs")));
            }
            /* a static member under power saving: its power state */
            const char *pst = json_string_value(json_object_get(
                json_object_get(json_object_get(p, "power"), "nodes"), jstr(n, "name")));
            const char *row[] = {jstr(n, "name"),
                                 jstr(p, "name"),
                                 pst && strcmp(pst, "on") != 0 ? pst : jstr(n, "state"),
                                 jstr(n, "node_state"),
                                 age,
                                 idle,
                                 jobs};
            cr__cli_table_row(&t, row);
            rows++;
        }
    }
    if (rows) {
        fputc('\n', ctx->out);
        cr__cli_table_print(&t, ctx->out);
    }
    cr__cli_table_fini(&t);

    static const char *const eh[] = {"TIME", "POOL", "NODE", "WHAT", "WHY"};
    cr__cli_table_init(&t, 5, eh);
    rows = 0;
    json_array_foreach(items, i, p)
    {
        const json_t *ev = json_object_get(p, "events");
        size_t n = json_array_size(ev);
        for (size_t k = n > (size_t)nev ? n - (size_t)nev : 0; k < n; k++) {
            const json_t *e = json_array_get(ev, k);
            const char *row[] = {jstr(e, "time"), jstr(p, "name"), jstr(e, "node"), jstr(e, "what"),
                                 jstr(e, "why")};
            cr__cli_table_row(&t, row);
            rows++;
        }
    }
    if (rows) {
        fputs("\nEvents:\n", ctx->out);
        cr__cli_table_print(&t, ctx->out);
    }
    cr__cli_table_fini(&t);
}

int cr__cli_pools(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    cr_client_res res;
    cr_client_res_init(&res);
    if (cr__cli_begin(ctx, &a, "[POOL] [--events N]", pools_opts,
                      sizeof pools_opts / sizeof pools_opts[0], false, argc, argv, &code)) {
        goto out;
    }
    if (a.npos > 1) {
        fprintf(ctx->err, "corral pools: unexpected argument '%s'\n", a.pos[1]);
        code = CLI_EXIT_USAGE;
        goto out;
    }
    char path[160];
    snprintf(path, sizeof path, "/v1/pools%s%.100s", a.npos ? "/" : "", a.npos ? a.pos[0] : "");
    if ((code = cr__cli_connect(ctx, &a)) != 0) {
        goto out;
    }
    int rc = cr_client_request(ctx->client, "GET", path, NULL, 0, &res);
    if (rc < 0) {
        code = cr__cli_fail(ctx, rc, &res);
        goto out;
    }
    if (ctx->json) {
        cr__cli_print_json(ctx, res.body);
    } else if (a.npos) {
        json_t *items = json_pack("[O]", res.body);
        const cli_val *ev = cr__cli_arg(&a, "events");
        pools_print(ctx, items, ev->set ? ev->i : 10);
        json_decref(items);
    } else {
        const cli_val *ev = cr__cli_arg(&a, "events");
        pools_print(ctx, json_object_get(res.body, "items"), ev->set ? ev->i : 10);
    }
out:
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}
