/*
 * cli_admin.c - cluster and administration commands: nodes, drain/undrain,
 * usage, tenants, tokens.
 */
#include "cli_int.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"
#include "cr_parse.h"

#include <ctype.h>
#include <inttypes.h>
#include <string.h>

#define NOPTS(o) (sizeof(o) / sizeof((o)[0]))

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* --- nodes --------------------------------------------------------------------- */

/* Does this GPU run MIG work (any instance in use)? */
bool cr__cli_gpu_mig_busy(const json_t *g)
{
    const json_t *v = json_object_get(g, "mig_busy");
    return json_is_integer(v) && json_integer_value(v) > 0;
}

/* Is this GPU given to some work (whole, or some of its MIG instances)? */
bool cr__cli_gpu_allocated(const json_t *g)
{
    static const char *const keys[] = {"job",    "jobs",     "allocation", "allocated",
                                       "job_id", "mig_busy", "shared_jobs"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const json_t *v = json_object_get(g, keys[i]);
        if (!v || json_is_null(v) || json_is_false(v)) {
            continue;
        }
        if (json_is_array(v) && json_array_size(v) == 0) {
            continue;
        }
        if (json_is_integer(v) && json_integer_value(v) == 0) {
            continue;
        }
        if (json_is_string(v) && !*json_string_value(v)) {
            continue;
        }
        if (json_is_object(v) && json_object_size(v) == 0) {
            continue;
        }
        return true;
    }
    return false;
}

bool cr__cli_gpu_healthy(const json_t *g)
{
    const char *h = jstr(g, "health");
    return !h || strcmp(h, "ok") == 0;
}

const char *cr__cli_gpu_model(const json_t *g)
{
    const char *m = jstr(g, "model");
    if (!m) {
        m = jstr(g, "type");
    }
    if (!m) {
        m = jstr(g, "gpu_type");
    }
    return m ? m : "?";
}

void cr__cli_node_counts(const json_t *node, size_t *total, size_t *alloc, size_t *bad,
                         cr_buf *models)
{
    const json_t *gpus = json_object_get(node, "gpus");
    *total = json_array_size(gpus);
    *alloc = 0;
    *bad = 0;
    size_t i;
    json_t *g;
    json_array_foreach(gpus, i, g)
    {
        if (cr__cli_gpu_allocated(g)) {
            (*alloc)++;
        }
        if (!cr__cli_gpu_healthy(g)) {
            (*bad)++;
        }
        const char *m = cr__cli_gpu_model(g);
        if (models && !strstr(cr_buf_str(models), m)) {
            cr_buf_printf(models, "%s%s", models->len ? "," : "", m);
        }
    }
}

void cr__cli_node_reason(const json_t *node, cr_buf *b)
{
    const char *r = jstr(node, "reason");
    if (r && *r) {
        cr_buf_puts(b, r);
    }
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(node, "gpus"), i, g)
    {
        if (cr__cli_gpu_healthy(g)) {
            continue;
        }
        const char *gr = jstr(g, "reason");
        cr_buf_printf(b, "%sgpu%" JSON_INTEGER_FORMAT ": %s%s%s", b->len ? "; " : "",
                      json_integer_value(json_object_get(g, "index")), jstr(g, "health"),
                      gr && *gr ? " " : "", gr && *gr ? gr : "");
    }
}

void cr__cli_nodes_table(const json_t *items, FILE *f)
{
    static const char *const hdr[] = {"NAME",  "STATE",  "RACK",  "TYPE",
                                      ">GPUS", ">ALLOC", ">FREE", "REASON"};
    cli_table t;
    cr__cli_table_init(&t, 8, hdr);
    size_t i;
    json_t *n;
    json_array_foreach(items, i, n)
    {
        size_t total, alloc, bad;
        cr_buf models, reason;
        cr_buf_init(&models);
        cr_buf_init(&reason);
        cr__cli_node_counts(n, &total, &alloc, &bad, &models);
        cr__cli_node_reason(n, &reason);
        const char *state = jstr(n, "state");
        size_t free_n = total - alloc > bad ? total - alloc - bad : 0;
        if (state && strcmp(state, "up") != 0) {
            free_n = 0;
        }
        char tot[16], al[16], fr[16];
        snprintf(tot, sizeof tot, "%zu", total);
        snprintf(al, sizeof al, "%zu", alloc);
        snprintf(fr, sizeof fr, "%zu", free_n);
        const char *row[] = {
            jstr(n, "name"),    state, jstr(n, "rack"), cr_buf_str(&models), tot, al, fr,
            cr_buf_str(&reason)};
        cr__cli_table_row(&t, row);
        cr_buf_fini(&models);
        cr_buf_fini(&reason);
    }
    cr__cli_table_print(&t, f);
    cr__cli_table_fini(&t);
}

static void node_detail(cli_ctx *ctx, const json_t *node)
{
    char buf[256];
    fprintf(ctx->out, "Node %s\n", jstr(node, "name") ? jstr(node, "name") : "?");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)node, k, v)
    {
        if (strcmp(k, "gpus") == 0 || strcmp(k, "name") == 0 || json_is_object(v) ||
            (json_is_array(v) && strcmp(k, "jobs") != 0) ||
            (json_is_string(v) && !*json_string_value(v))) {
            continue;
        }
        char label[64];
        snprintf(label, sizeof label, "%s:", k);
        fprintf(ctx->out, "  %-15s %s\n", label, cr__cli_json_text(v, buf, sizeof buf));
    }
    const json_t *iso = json_object_get(node, "isolation");
    if (json_is_object(iso)) {
        /* What the node's agent can enforce (docs/isolation.md); never silent. */
        static const char *const keys[] = {"uid", "devices", "memory", "cpu", "pids"};
        fprintf(ctx->out, "  %-15s", "isolation:");
        for (size_t i = 0; i < 5; i++) {
            const char *x = json_string_value(json_object_get(iso, keys[i]));
            fprintf(ctx->out, "%s %s=%s", i ? "," : "", keys[i], x ? x : "unknown");
        }
        fputc('\n', ctx->out);
        const char *d = json_string_value(json_object_get(iso, "detail"));
        if (d && *d) {
            fprintf(ctx->out, "  %-15s %s\n", "isolation how:",
                    cr__cli_json_text(json_object_get(iso, "detail"), buf, sizeof buf));
        }
    }
    const json_t *gpus = json_object_get(node, "gpus");
    if (json_array_size(gpus)) {
        fputs("GPUs:\n", ctx->out);
        static const char *const hdr[] = {">  INDEX", "MODEL", "HEALTH", "JOB", "UUID", "REASON"};
        cli_table t;
        cr__cli_table_init(&t, 6, hdr);
        size_t i;
        json_t *g;
        json_array_foreach(gpus, i, g)
        {
            char idx[32], job[64];
            cr__cli_json_text(json_object_get(g, "index"), idx, sizeof idx);
            const json_t *j = json_object_get(g, "job");
            if (!j) {
                j = json_object_get(g, "jobs");
            }
            const json_t *sh = json_object_get(g, "shared_jobs");
            if (json_array_size(sh)) {
                /* fractional tasks share it: "12,13,14 (0.99 shared)" */
                size_t off = 0, q;
                json_t *x;
                json_array_foreach(sh, q, x)
                {
                    off += (size_t)snprintf(job + off, off < sizeof job ? sizeof job - off : 0,
                                            "%s%" JSON_INTEGER_FORMAT, q ? "," : "",
                                            json_integer_value(x));
                }
                if (off < sizeof job) {
                    snprintf(job + off, sizeof job - off, " (%.2f shared)",
                             (double)json_integer_value(json_object_get(g, "shared_milli")) /
                                 1000.0);
                }
            } else if (cr__cli_gpu_allocated(g)) {
                cr__cli_json_text(j, job, sizeof job);
            } else {
                snprintf(job, sizeof job, "-");
            }
            const char *row[] = {idx, cr__cli_gpu_model(g), jstr(g, "health"),
                                 job, jstr(g, "uuid"),      jstr(g, "reason")};
            cr__cli_table_row(&t, row);
        }
        cr__cli_table_print(&t, ctx->out);
        cr__cli_table_fini(&t);
    }
}

int cr__cli_nodes(cli_ctx *ctx, int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "delete") == 0 || strcmp(argv[1], "label") == 0)) {
        return cr__cli_nodes_lifecycle(ctx, argc, argv);
    }
    cli_args a;
    int code = 0;
    cr_client_res res;
    cr_client_res_init(&res);
    if (cr__cli_begin(ctx, &a, "[NODE] | approve NODE", NULL, 0, false, argc, argv, &code)) {
        goto out;
    }
    if (a.npos == 2 && strcmp(a.pos[0], "approve") == 0) {
        code = cr__cli_node_approve(ctx, &a, a.pos[1]);
        goto out;
    }
    if (a.npos > 1) {
        fprintf(ctx->err, "corral nodes: expected at most one node name\n");
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if ((code = cr__cli_connect(ctx, &a)) != 0) {
        goto out;
    }
    int rc = a.npos ? cr_client_node_get(ctx->client, a.pos[0], &res)
                    : cr_client_nodes_list(ctx->client, &res);
    if (rc < 0) {
        code = cr__cli_fail(ctx, rc, &res);
        goto out;
    }
    if (ctx->json) {
        cr__cli_print_json(ctx, res.body);
    } else if (a.npos) {
        node_detail(ctx, res.body);
    } else {
        cr__cli_nodes_table(json_object_get(res.body, "items"), ctx->out);
    }
out:
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}

/* --- drain / undrain --------------------------------------------------------------- */

static const cli_opt drain_opts[] = {
    {"reason", CLI_STR, "TEXT", "why (shown by corral nodes)", NULL, 0, 0, 'r'},
};

int cr__cli_drain(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    cr_client_res res;
    cr_client_res_init(&res);
    bool drain = strcmp(ctx->cmd, "drain") == 0;
    if (cr__cli_begin(ctx, &a, drain ? "NODE... [--reason TEXT]" : "NODE...", drain_opts,
                      drain ? NOPTS(drain_opts) : 0, false, argc, argv, &code)) {
        goto out;
    }
    if (a.npos == 0) {
        fprintf(ctx->err, "corral %s: expected at least one node name\n", ctx->cmd);
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if ((code = cr__cli_connect(ctx, &a)) != 0) {
        goto out;
    }
    const char *reason = drain ? cr__cli_arg(&a, "reason")->str : NULL;
    for (size_t i = 0; i < a.npos; i++) {
        int rc = cr_client_node_drain(ctx->client, a.pos[i], drain, reason, &res);
        if (rc < 0) {
            int c = cr__cli_fail(ctx, rc, &res);
            code = c > code ? c : code;
            if (c == CLI_EXIT_UNREACH) {
                break;
            }
            continue;
        }
        if (ctx->json) {
            cr__cli_print_json(ctx, res.body);
        } else {
            fprintf(ctx->out, "%s %s\n", drain ? "Drained" : "Undrained", a.pos[i]);
        }
    }
out:
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}

/* --- usage --------------------------------------------------------------------------- */

static const cli_opt usage_opts[] = {
    {"by", CLI_STR, "KEYS", "group by a comma list of tenant, gpu_type, day", NULL, 0, 0, 0},
    {"level", CLI_INT, "N", "roll tenants up to their ancestor at tree level N (1: the roots)",
     NULL, 1, 8, 0},
    {"period", CLI_STR, "P", "the day column's period", "day|month|year|all", 0, 0, 0},
    {"csv", CLI_BOOL, NULL, "print CSV (a header line, then a row per group)", NULL, 0, 0, 0},
};

/* A CSV field: quoted when it holds a comma, a quote or a line end. */
static void csv_field(FILE *f, const char *v, bool last)
{
    v = v ? v : "";
    if (strpbrk(v, ",\"\r\n")) {
        fputc('"', f);
        for (const char *p = v; *p; p++) {
            if (*p == '"') {
                fputc('"', f);
            }
            fputc(*p, f);
        }
        fputc('"', f);
    } else {
        fputs(v, f);
    }
    fputc(last ? '\n' : ',', f);
}

static void usage_csv(const json_t *items, FILE *f)
{
    static const char *const keys[] = {"tenant", "gpu_type", "day"};
    static const char *const nums[] = {"gpu_hours", "idle_gpu_hours",  "idle_share", "energy_kwh",
                                       "cost",      "cloud_gpu_hours", "cloud_cost"};
    const size_t nn = sizeof nums / sizeof nums[0];
    for (size_t k = 0; k < 3; k++) {
        csv_field(f, keys[k], false);
    }
    for (size_t k = 0; k < nn; k++) {
        csv_field(f, nums[k], k == nn - 1);
    }
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        for (size_t k = 0; k < 3; k++) {
            csv_field(f, jstr(it, keys[k]), false);
        }
        for (size_t k = 0; k < nn; k++) {
            char v[40];
            snprintf(v, sizeof v, "%.6f", json_number_value(json_object_get(it, nums[k])));
            csv_field(f, v, k == nn - 1);
        }
    }
}

/* Group columns the server did not group by come back as "*" in every row:
 * leave them out. */
static void usage_table(const json_t *items, FILE *f)
{
    static const char *const keys[] = {"tenant", "gpu_type", "day"};
    static const char *const names[] = {"TENANT", "GPU_TYPE", "DAY"};
    const char *hdr[10];
    const char *used[3];
    size_t ncols = 0;
    for (size_t k = 0; k < 3; k++) {
        size_t i;
        json_t *it;
        bool grouped = false;
        json_array_foreach(items, i, it)
        {
            const char *v = jstr(it, keys[k]);
            if (v && strcmp(v, "*") != 0) {
                grouped = true;
            }
        }
        if (grouped) {
            used[ncols] = keys[k];
            hdr[ncols++] = names[k];
        }
    }
    size_t ngroup = ncols;
    /* IDLE_SHARE where the server measures it (a controller before issue
     * 33 sends none) */
    bool idle = json_object_get(json_array_get(items, 0), "idle_share") != NULL;
    hdr[ncols++] = ">GPU_HOURS";
    if (idle) {
        hdr[ncols++] = ">IDLE_SHARE";
    }
    hdr[ncols++] = ">ENERGY_KWH";
    hdr[ncols++] = ">COST";
    /* elastic pools' node time (issue 31) where any was bought */
    bool cloud = false;
    {
        size_t i;
        json_t *it;
        json_array_foreach(items, i, it)
        {
            cloud = cloud || json_number_value(json_object_get(it, "cloud_cost")) > 0 ||
                    json_number_value(json_object_get(it, "cloud_gpu_hours")) > 0;
        }
    }
    if (cloud) {
        hdr[ncols++] = ">CLOUD_GPU_HOURS";
        hdr[ncols++] = ">CLOUD_COST";
    }
    cli_table t;
    cr__cli_table_init(&t, ncols, hdr);
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        const char *row[10];
        char h[32], e[32], c[32], is[32], ch[32], cc[32];
        for (size_t k = 0; k < ngroup; k++) {
            row[k] = jstr(it, used[k]);
        }
        snprintf(h, sizeof h, "%.2f", json_number_value(json_object_get(it, "gpu_hours")));
        snprintf(e, sizeof e, "%.2f", json_number_value(json_object_get(it, "energy_kwh")));
        snprintf(c, sizeof c, "%.2f", json_number_value(json_object_get(it, "cost")));
        snprintf(is, sizeof is, "%.1f%%",
                 100 * json_number_value(json_object_get(it, "idle_share")));
        size_t k = ngroup;
        row[k++] = h;
        if (idle) {
            row[k++] = is;
        }
        row[k++] = e;
        row[k++] = c;
        snprintf(ch, sizeof ch, "%.2f", json_number_value(json_object_get(it, "cloud_gpu_hours")));
        snprintf(cc, sizeof cc, "%.2f", json_number_value(json_object_get(it, "cloud_cost")));
        if (cloud) {
            row[k++] = ch;
            row[k] = cc;
        }
        cr__cli_table_row(&t, row);
    }
    cr__cli_table_print(&t, f);
    cr__cli_table_fini(&t);
}

int cr__cli_usage_cmd(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    cr_client_res res;
    cr_client_res_init(&res);
    if (cr__cli_begin(ctx, &a,
                      "[--by tenant,gpu_type,day] [--level N] [--period day|month|year|all] "
                      "[--csv]",
                      usage_opts, NOPTS(usage_opts), false, argc, argv, &code)) {
        goto out;
    }
    const cli_val *by = cr__cli_arg(&a, "by");
    if (by->set) {
        char *copy = cr_strdup(by->str);
        char *save = NULL;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (strcmp(tok, "tenant") != 0 && strcmp(tok, "gpu_type") != 0 &&
                strcmp(tok, "day") != 0) {
                fprintf(ctx->err,
                        "corral usage: --by: '%s' is not allowed (allowed: tenant, gpu_type, "
                        "day, comma-separated)\n",
                        tok);
                code = CLI_EXIT_USAGE;
            }
        }
        free(copy);
        if (code) {
            goto out;
        }
    }
    if (a.npos) {
        fprintf(ctx->err, "corral usage: unexpected argument '%s'\n", a.pos[0]);
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if ((code = cr__cli_connect(ctx, &a)) != 0) {
        goto out;
    }
    const cli_val *lv = cr__cli_arg(&a, "level"), *per = cr__cli_arg(&a, "period");
    int rc = cr_client_usage_q(ctx->client, by->str, lv->set ? (int)lv->i : 0,
                               per->set ? per->str : NULL, &res);
    if (rc < 0) {
        code = cr__cli_fail(ctx, rc, &res);
        goto out;
    }
    if (ctx->json) {
        /* with the token usage of the API keys beside GPU-hours */
        json_t *tok = NULL;
        if (cr__cli_usage_tokens(ctx, &tok) == 0) {
            json_object_set_new(res.body, "tokens", tok);
        }
        cr__cli_print_json(ctx, res.body);
    } else if (cr__cli_arg(&a, "csv")->set) {
        usage_csv(json_object_get(res.body, "items"), ctx->out);
    } else {
        usage_table(json_object_get(res.body, "items"), ctx->out);
        cr__cli_usage_tokens(ctx, NULL);
    }
out:
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}

/* --- tenants --------------------------------------------------------------------------- */

static const cli_opt tenants_opts[] = {
    {"weight", CLI_F64, "W", "fair-share weight", NULL, 0, 1000000, 0},
    {"quota", CLI_LIST, "TYPE=N", "GPUs of TYPE guaranteed to the tenant (its quota)", NULL, 0, 0,
     'q'},
    {"parent", CLI_STR, "T", "parent in the tenant tree (\"\" for a root)", NULL, 0, 0, 0},
    {"limit", CLI_LIST, "TYPE=N", "GPUs of TYPE the tenant's subtree may hold at all", NULL, 0, 0,
     0},
    {"lend", CLI_LIST, "TYPE=N", "GPUs of TYPE of its idle guarantee others may borrow", NULL, 0, 0,
     0},
    {"constraint", CLI_STR, "L=V,...", "node constraint its jobs get by default (site=onprem)",
     NULL, 0, 0, 0},
    {"constraint-locked", CLI_BOOL, NULL, "its jobs may not name another value", NULL, 0, 0, 0},
    {"burst-budget", CLI_F64, "AMOUNT", "cloud (elastic pool) spend a month; 0: no burst", NULL, 0,
     1e9, 0},
};

/* "TYPE=N, ..." of a {"type": n} object into b. */
static void gpu_map_text(const json_t *m, cr_buf *b)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)m, k, v)
    {
        char n[32];
        cr_buf_printf(b, "%s%s=%s", b->len ? ", " : "", k, cr__cli_json_text(v, n, sizeof n));
    }
}

/* One tenant and, indented below it, its children (depth bounded). */
static void tree_rows(const json_t *items, const char *parent, int depth, cli_table *t)
{
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        const char *p = jstr(it, "parent");
        if (strcmp(p ? p : "", parent) != 0 || depth > 8) {
            continue;
        }
        const char *name = jstr(it, "name");
        char nm[128], w[32], fr[32], fs[32];
        snprintf(nm, sizeof nm, "%*s%s", 2 * depth, "", name);
        cr__cli_json_text(json_object_get(it, "weight"), w, sizeof w);
        const json_t *rank = json_object_get(it, "fair_rank");
        const json_t *lfs = json_object_get(it, "level_fs");
        snprintf(fr, sizeof fr, "%s", json_is_integer(rank) ? "" : "-");
        if (json_is_integer(rank)) {
            snprintf(fr, sizeof fr, "%lld", (long long)json_integer_value(rank));
        }
        if (json_is_number(lfs)) {
            snprintf(fs, sizeof fs, "%.3f", json_number_value(lfs));
        } else {
            snprintf(fs, sizeof fs, "%s", json_is_integer(rank) ? "inf" : "-");
        }
        cr_buf g, l, le, u;
        cr_buf_init(&g);
        cr_buf_init(&l);
        cr_buf_init(&le);
        cr_buf_init(&u);
        gpu_map_text(json_object_get(it, "quotas"), &g);
        gpu_map_text(json_object_get(it, "limits"), &l);
        gpu_map_text(json_object_get(it, "lending_limits"), &le);
        gpu_map_text(json_object_get(json_object_get(it, "usage"), "subtree_in_use"), &u);
        const char *row[] = {nm, w, cr_buf_str(&u), cr_buf_str(&g), cr_buf_str(&l), cr_buf_str(&le),
                             fr, fs};
        cr__cli_table_row(t, row);
        cr_buf_fini(&g);
        cr_buf_fini(&l);
        cr_buf_fini(&le);
        cr_buf_fini(&u);
        if (name) {
            tree_rows(items, name, depth + 1, t);
        }
    }
}

static void tenants_tree(const json_t *items, FILE *f)
{
    static const char *const hdr[] = {"TENANT", ">WEIGHT", "IN_USE",     "GUARANTEE",
                                      "LIMIT",  "LENDING", ">FAIR_RANK", ">LEVEL_FS"};
    cli_table t;
    cr__cli_table_init(&t, 8, hdr);
    tree_rows(items, "", 0, &t);
    cr__cli_table_print(&t, f);
    cr__cli_table_fini(&t);
}

static void tenants_table(const json_t *items, FILE *f)
{
    static const char *const hdr[] = {"NAME", ">WEIGHT", "QUOTAS", "IN_USE", ">GPU_HOURS", ">COST"};
    cli_table t;
    cr__cli_table_init(&t, 6, hdr);
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        char w[32], h[32], c[32];
        cr__cli_json_text(json_object_get(it, "weight"), w, sizeof w);
        const json_t *usage = json_object_get(it, "usage");
        snprintf(h, sizeof h, "%.2f", json_number_value(json_object_get(usage, "gpu_hours")));
        snprintf(c, sizeof c, "%.2f", json_number_value(json_object_get(usage, "cost")));
        cr_buf q, u;
        cr_buf_init(&q);
        cr_buf_init(&u);
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(it, "quotas"), k, v)
        {
            char n[32];
            cr_buf_printf(&q, "%s%s=%s", q.len ? ", " : "", k, cr__cli_json_text(v, n, sizeof n));
        }
        json_object_foreach(json_object_get(usage, "gpus_in_use"), k, v)
        {
            char n[32];
            cr_buf_printf(&u, "%s%s=%s", u.len ? ", " : "", k, cr__cli_json_text(v, n, sizeof n));
        }
        const char *row[] = {jstr(it, "name"), w, cr_buf_str(&q), cr_buf_str(&u), usage ? h : NULL,
                             usage ? c : NULL};
        cr__cli_table_row(&t, row);
        cr_buf_fini(&q);
        cr_buf_fini(&u);
    }
    cr__cli_table_print(&t, f);
    cr__cli_table_fini(&t);
}

/* {"name":..,"weight":..,"quotas":{..}} from the flags; NULL after an error. */
static json_t *tenant_body(cli_ctx *ctx, const cli_args *a, const char *name)
{
    json_t *body = json_object();
    if (name) {
        json_object_set_new(body, "name", json_string(name));
    }
    const cli_val *w = cr__cli_arg(a, "weight");
    if (w->set) {
        json_object_set_new(body, "weight", json_real(w->f));
    }
    const cli_val *par = cr__cli_arg(a, "parent");
    if (par->set) {
        json_object_set_new(body, "parent", json_string(par->str));
    }
    const cli_val *hc = cr__cli_arg(a, "constraint");
    const cli_val *hl = cr__cli_arg(a, "constraint-locked");
    const cli_val *hb = cr__cli_arg(a, "burst-budget");
    if (hc->set || hl->set || hb->set) {
        json_t *hy = json_object();
        if (hc->set) {
            json_object_set_new(hy, "constraint", json_string(hc->str));
        }
        if (hl->set) {
            json_object_set_new(hy, "locked", json_true());
        }
        if (hb->set) {
            json_object_set_new(hy, "burst_budget", json_real(hb->f));
        }
        json_object_set_new(body, "hybrid", hy);
    }
    static const char *const flags[][2] = {
        {"quota", "quotas"}, {"limit", "limits"}, {"lend", "lending_limits"}};
    for (size_t f = 0; f < 3; f++) {
        const cli_val *q = cr__cli_arg(a, flags[f][0]);
        if (!q->count) {
            continue;
        }
        json_t *m = json_object();
        json_object_set_new(body, flags[f][1], m);
        for (size_t i = 0; i < q->count; i++) {
            const char *eq = strrchr(q->list[i], '=');
            int64_t n = 0;
            if (!eq || eq == q->list[i] || cr_parse_i64(eq + 1, 0, 1000000, &n) < 0) {
                fprintf(ctx->err,
                        "corral tenants: --%s: '%s' is not TYPE=N (e.g. 'H100 SXM=16', N in "
                        "0..1000000)\n",
                        flags[f][0], q->list[i]);
                json_decref(body);
                return NULL;
            }
            char *type = cr_strndup(q->list[i], (size_t)(eq - q->list[i]));
            json_object_set_new(m, type, json_integer(n));
            free(type);
        }
    }
    return body;
}

int cr__cli_tenants(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    json_t *body = NULL;
    cr_client_res res;
    cr_client_res_init(&res);
    if (cr__cli_begin(ctx, &a,
                      "[list] | tree | create NAME [--parent T] [--weight W] [--quota TYPE=N]... "
                      "[--limit TYPE=N]... [--lend TYPE=N]... [--constraint L=V,...] "
                      "[--constraint-locked] [--burst-budget AMOUNT] | set NAME [same flags]",
                      tenants_opts, NOPTS(tenants_opts), false, argc, argv, &code)) {
        goto out;
    }
    const char *verb = a.npos ? a.pos[0] : "list";
    bool tree = strcmp(verb, "tree") == 0;
    bool list = strcmp(verb, "list") == 0 || tree;
    bool create = strcmp(verb, "create") == 0;
    bool set = strcmp(verb, "set") == 0;
    if (!list && !create && !set) {
        fprintf(ctx->err,
                "corral tenants: unknown action '%s' (allowed: list, tree, create, set)\n", verb);
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if ((list && a.npos > 1) || (!list && a.npos != 2)) {
        fprintf(ctx->err,
                list ? "corral tenants list|tree: takes no argument\n"
                     : "corral tenants %s: expected one tenant name\n",
                verb);
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if (list &&
        (cr__cli_arg(&a, "weight")->set || cr__cli_arg(&a, "quota")->set ||
         cr__cli_arg(&a, "parent")->set || cr__cli_arg(&a, "limit")->set ||
         cr__cli_arg(&a, "lend")->set || cr__cli_arg(&a, "constraint")->set ||
         cr__cli_arg(&a, "constraint-locked")->set || cr__cli_arg(&a, "burst-budget")->set)) {
        fprintf(ctx->err, "corral tenants: --weight, --quota, --parent, --limit, --lend, "
                          "--constraint, --constraint-locked and --burst-budget go with create or "
                          "set\n");
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if (create) {
        /* the server's rule for tenant names */
        const char *nm = a.pos[1];
        bool ok = *nm && strlen(nm) < 64;
        for (const char *q = nm; ok && *q; q++) {
            ok = isalnum((unsigned char)*q) || *q == '-' || *q == '_' || *q == '.';
        }
        if (!ok) {
            fprintf(ctx->err,
                    "corral tenants create: name '%s': use 1-63 letters, digits, '-', '_' or "
                    "'.'\n",
                    nm);
            code = CLI_EXIT_USAGE;
            goto out;
        }
    }
    if (!list && !(body = tenant_body(ctx, &a, create ? a.pos[1] : NULL))) {
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if ((code = cr__cli_connect(ctx, &a)) != 0) {
        goto out;
    }
    int rc = list     ? cr_client_tenants_list(ctx->client, &res)
             : create ? cr_client_tenant_create(ctx->client, body, &res)
                      : cr_client_tenant_put(ctx->client, a.pos[1], body, &res);
    if (rc < 0) {
        code = cr__cli_fail(ctx, rc, &res);
        goto out;
    }
    if (ctx->json) {
        cr__cli_print_json(ctx, res.body);
    } else if (tree) {
        tenants_tree(json_object_get(res.body, "items"), ctx->out);
    } else if (list) {
        tenants_table(json_object_get(res.body, "items"), ctx->out);
    } else {
        fprintf(ctx->out, "%s tenant %s\n", create ? "Created" : "Updated", a.pos[1]);
    }
out:
    json_decref(body);
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}

/* --- tokens ------------------------------------------------------------------------------ */

static const cli_opt tokens_opts[] = {
    {"role", CLI_STR, "ROLE", "role of the new token", "admin|user", 0, 0, 0},
    {"tenant", CLI_STR, "T", "tenant of a user token", NULL, 0, 0, 0},
    {"name", CLI_STR, "NAME", "who holds it (shown in lists)", NULL, 0, 0, 0},
    {"scope", CLI_STR, "SCOPE", "what it may do within its role", "all|read|submit|tenant-admin", 0,
     0, 0},
    {"expires", CLI_DUR, "DUR", "lifetime (90d, 12h; default: never expires)", NULL, 0, 0, 0},
};

static int token_revoke(cli_ctx *ctx, const char *id, cr_client_res *res)
{
    return cr_client_token_revoke(ctx->client, id, res);
}

int cr__cli_tokens(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    json_t *body = NULL;
    cr_client_res res;
    cr_client_res_init(&res);
    if (cr__cli_begin(ctx, &a,
                      "[list] | create --role admin|user [--tenant T] [--name NAME] "
                      "[--scope all|read|submit|tenant-admin] [--expires DUR] | revoke ID...",
                      tokens_opts, NOPTS(tokens_opts), false, argc, argv, &code)) {
        goto out;
    }
    const char *verb = a.npos ? a.pos[0] : "list";
    if (strcmp(verb, "list") == 0) {
        if (a.npos > 1) {
            fprintf(ctx->err, "corral tokens list: takes no argument\n");
            code = CLI_EXIT_USAGE;
            goto out;
        }
        if ((code = cr__cli_connect(ctx, &a)) != 0) {
            goto out;
        }
        code = cr__cli_print_list(ctx, cr_client_tokens_list(ctx->client, &res), &res, NULL);
    } else if (strcmp(verb, "create") == 0) {
        const cli_val *role = cr__cli_arg(&a, "role");
        if (!role->set) {
            fprintf(ctx->err, "corral tokens create: --role is required (allowed: admin, user)\n");
            code = CLI_EXIT_USAGE;
            goto out;
        }
        if (strcmp(role->str, "user") == 0 && !cr__cli_arg(&a, "tenant")->set) {
            fprintf(ctx->err, "corral tokens create: --tenant is required for --role user\n");
            code = CLI_EXIT_USAGE;
            goto out;
        }
        if (a.npos > 1) {
            fprintf(ctx->err, "corral tokens create: unexpected argument '%s'\n", a.pos[1]);
            code = CLI_EXIT_USAGE;
            goto out;
        }
        body = json_pack("{s:s}", "role", role->str);
        if (cr__cli_arg(&a, "tenant")->set) {
            json_object_set_new(body, "tenant", json_string(cr__cli_arg(&a, "tenant")->str));
        }
        if (cr__cli_arg(&a, "name")->set) {
            json_object_set_new(body, "name", json_string(cr__cli_arg(&a, "name")->str));
        }
        if (cr__cli_arg(&a, "scope")->set) {
            json_object_set_new(body, "scope", json_string(cr__cli_arg(&a, "scope")->str));
        }
        const cli_val *ex = cr__cli_arg(&a, "expires");
        if (ex->set) {
            if (ex->i < 1000000000LL) {
                fprintf(ctx->err, "corral tokens create: --expires: at least 1s\n");
                code = CLI_EXIT_USAGE;
                goto out;
            }
            json_object_set_new(body, "expires_in_s", json_integer(ex->i / 1000000000LL));
        }
        if ((code = cr__cli_connect(ctx, &a)) != 0) {
            goto out;
        }
        int rc = cr_client_token_create(ctx->client, body, &res);
        if (rc < 0) {
            code = cr__cli_fail(ctx, rc, &res);
        } else if (ctx->json) {
            cr__cli_print_json(ctx, res.body);
        } else {
            char id[64];
            cr__cli_json_text(json_object_get(res.body, "id"), id, sizeof id);
            fprintf(ctx->err, "Created token %s (role %s); it is shown only this once:\n", id,
                    role->str);
            fprintf(ctx->out, "%s\n", jstr(res.body, "token") ? jstr(res.body, "token") : "?");
        }
    } else if (strcmp(verb, "revoke") == 0) {
        if (a.npos < 2) {
            fprintf(ctx->err, "corral tokens revoke: expected at least one token id\n");
            code = CLI_EXIT_USAGE;
            goto out;
        }
        if ((code = cr__cli_check_ids(ctx, &a, 1, "tokens revoke",
                                      "a token id (a number from 'corral tokens')")) != 0 ||
            (code = cr__cli_connect(ctx, &a)) != 0) {
            goto out;
        }
        code = cr__cli_each_id(ctx, &a, 1, token_revoke, true, "Revoked token", &res);
    } else {
        fprintf(ctx->err, "corral tokens: unknown action '%s' (allowed: list, create, revoke)\n",
                verb);
        code = CLI_EXIT_USAGE;
    }
out:
    json_decref(body);
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}
