/*
 * cli_top.c - 'corral top': a refreshing terminal view of the cluster.
 *
 * Each frame is built in memory and written with one fwrite after the
 * clear-screen sequence, so the terminal never shows half a frame. --once
 * prints one frame without escape sequences (tests, the demo, pipes).
 */
#include "cli_int.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"
#include "cr_time.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>

#define NOPTS(o) (sizeof(o) / sizeof((o)[0]))

static const cli_opt top_opts[] = {
    {"once", CLI_BOOL, NULL, "print one frame and exit", NULL, 0, 0, 0},
    {"interval", CLI_DUR, "DURATION", "time between frames (default 2s)", NULL, 0, 0, 'i'},
    {"jobs", CLI_INT, "N", "at most N job rows (default 20)", NULL, 0, 100000, 'n'},
    {"frames", CLI_INT, "N", "stop after N frames (default: until Ctrl-C)", NULL, 1, INT64_MAX, 0},
};

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static FILE *mem_stream(char **buf, size_t *len)
{
    return open_memstream(buf, len);
}

/* One GPU per character: '#' allocated, 'm' MIG instances in use (partly
 * allocated), '.' free, 'x' unhealthy, '-' node
 * not up; util_txt gets the mean utilisation the agent reports. */
static void gpu_bar(const json_t *node, cr_buf *b, char *util_txt, size_t util_len)
{
    const char *state = json_string_value(json_object_get(node, "state"));
    bool up = !state || strcmp(state, "up") == 0;
    cr_buf_putc(b, '[');
    size_t i;
    json_t *g;
    double util = 0;
    size_t nutil = 0;
    json_array_foreach(json_object_get(node, "gpus"), i, g)
    {
        char c = '.';
        if (!up) {
            c = '-';
        } else if (!cr__cli_gpu_healthy(g)) {
            c = 'x';
        } else if (cr__cli_gpu_mig_busy(g)) {
            c = 'm';
        } else if (cr__cli_gpu_allocated(g)) {
            c = '#';
        }
        cr_buf_putc(b, c);
        const json_t *u = json_object_get(g, "util_pct");
        if (json_is_number(u)) {
            util += json_number_value(u);
            nutil++;
        }
    }
    cr_buf_putc(b, ']');
    if (nutil && up) {
        snprintf(util_txt, util_len, "%.0f%%", util / (double)nutil);
    } else {
        snprintf(util_txt, util_len, "-");
    }
}

/* Render one frame of nodes and jobs into f; returns 0 or the failed call's
 * code (the frame then shows the error). */
static int frame(cli_ctx *ctx, int64_t max_jobs, FILE *f, cr_client_res *nodes, cr_client_res *jobs)
{
    cr_client_res_fini(jobs);
    int rc = cr_client_nodes_list(ctx->client, nodes);
    if (rc == 0) {
        rc = cr_client_jobs_list(ctx->client, "active", NULL, 1000, jobs);
    }
    char now[64];
    fprintf(f, "corral top - %s - %s\n", ctx->server, cr_time_fmt(cr_now_ns(), now, sizeof now));
    if (rc < 0) {
        const cr_client_res *bad = jobs->message ? jobs : nodes;
        fprintf(f, "error: %s%s\n", bad->status == 0 ? "cannot reach the server: " : "",
                cr_client_res_msg(bad, rc));
        return rc;
    }
    const json_t *nitems = json_object_get(nodes->body, "items");
    const json_t *jitems = json_object_get(jobs->body, "items");
    size_t up = 0, drained = 0, lost = 0, gtotal = 0, galloc = 0, gbad = 0;
    size_t i;
    json_t *n;
    json_array_foreach(nitems, i, n)
    {
        const char *s = jstr(n, "state");
        if (!s || strcmp(s, "up") == 0) {
            up++;
        } else if (strcmp(s, "drained") == 0) {
            drained++;
        } else {
            lost++;
        }
        size_t t, a, b;
        cr__cli_node_counts(n, &t, &a, &b, NULL);
        gtotal += t;
        galloc += a;
        gbad += b;
    }
    size_t running = 0, pending = 0, held = 0;
    json_t *j;
    json_array_foreach(jitems, i, j)
    {
        const char *s = jstr(j, "state");
        if (!s) {
            continue;
        }
        if (strcmp(s, "running") == 0 || strcmp(s, "completing") == 0) {
            running++;
        } else if (strcmp(s, "pending") == 0) {
            pending++;
        } else if (strcmp(s, "held") == 0) {
            held++;
        }
    }
    /* The server's counts of every active job (the list is one page). */
    const json_t *counts = json_object_get(jobs->body, "active");
    if (json_is_object(counts)) {
        running = (size_t)json_integer_value(json_object_get(counts, "running")) +
                  (size_t)json_integer_value(json_object_get(counts, "completing"));
        pending = (size_t)json_integer_value(json_object_get(counts, "pending"));
        held = (size_t)json_integer_value(json_object_get(counts, "held"));
    }
    fprintf(f,
            "Nodes: %zu up, %zu drained, %zu lost   GPUs: %zu/%zu allocated, %zu unhealthy   "
            "Jobs: %zu running, %zu pending, %zu held\n\n",
            up, drained, lost, galloc, gtotal, gbad, running, pending, held);

    static const char *const nhdr[] = {"NODE", "STATE", "TYPE", "GPUS", ">UTIL", "REASON"};
    cli_table t;
    cr__cli_table_init(&t, 6, nhdr);
    json_array_foreach(nitems, i, n)
    {
        cr_buf models, bar, reason;
        cr_buf_init(&models);
        cr_buf_init(&bar);
        cr_buf_init(&reason);
        size_t tt, a, b;
        cr__cli_node_counts(n, &tt, &a, &b, &models);
        char util[16];
        gpu_bar(n, &bar, util, sizeof util);
        cr__cli_node_reason(n, &reason);
        const char *row[] = {
            jstr(n, "name"),    jstr(n, "state"), cr_buf_str(&models), cr_buf_str(&bar), util,
            cr_buf_str(&reason)};
        cr__cli_table_row(&t, row);
        cr_buf_fini(&models);
        cr_buf_fini(&bar);
        cr_buf_fini(&reason);
    }
    cr__cli_table_print(&t, f);
    cr__cli_table_fini(&t);
    fputs("  ('#' allocated, 'm' MIG instances in use, '.' free, 'x' unhealthy, '-' node not "
          "up)\n\n",
          f);

    /* running first, then pending and held, at most max_jobs rows */
    json_t *shown = json_array();
    static const char *const order[] = {"running", "completing", "pending", "held"};
    for (size_t o = 0; o < sizeof order / sizeof order[0]; o++) {
        json_array_foreach(jitems, i, j)
        {
            const char *s = jstr(j, "state");
            if (s && strcmp(s, order[o]) == 0 && (int64_t)json_array_size(shown) < max_jobs) {
                json_array_append(shown, j);
            }
        }
    }
    size_t active = running + pending + held;
    if (json_array_size(shown) > 0) {
        cr__cli_jobs_table(ctx, shown, false, f);
        if (active > json_array_size(shown)) {
            fprintf(f, "  ... %zu more\n", active - json_array_size(shown));
        }
    } else {
        fputs("No active jobs.\n", f);
    }
    json_decref(shown);
    return 0;
}

int cr__cli_top(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    cr_client_res nodes, jobs;
    cr_client_res_init(&nodes);
    cr_client_res_init(&jobs);
    if (cr__cli_begin(ctx, &a, "[--once] [--interval DURATION] [--jobs N]", top_opts,
                      NOPTS(top_opts), false, argc, argv, &code)) {
        goto out;
    }
    if (a.npos) {
        fprintf(ctx->err, "corral top: unexpected argument '%s'\n", a.pos[0]);
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if ((code = cr__cli_connect(ctx, &a)) != 0) {
        goto out;
    }
    bool once = cr__cli_arg(&a, "once")->set;
    const cli_val *iv = cr__cli_arg(&a, "interval");
    int64_t interval = iv->set ? iv->i : 2 * CR_NS_PER_SEC;
    const cli_val *jv = cr__cli_arg(&a, "jobs");
    int64_t max_jobs = jv->set ? jv->i : 20;
    const cli_val *fv = cr__cli_arg(&a, "frames");
    int64_t frames = once ? 1 : (fv->set ? fv->i : INT64_MAX);

    if (ctx->json) {
        /* one snapshot as a document: {"nodes":{...},"jobs":{...}} */
        int rc = cr_client_nodes_list(ctx->client, &nodes);
        if (rc == 0) {
            rc = cr_client_jobs_list(ctx->client, "active", NULL, 1000, &jobs);
        }
        if (rc < 0) {
            code = cr__cli_fail(ctx, rc, jobs.message ? &jobs : &nodes);
            goto out;
        }
        json_t *doc = json_pack("{s:O,s:O}", "nodes", nodes.body ? nodes.body : json_null(), "jobs",
                                jobs.body ? jobs.body : json_null());
        cr__cli_print_json(ctx, doc);
        json_decref(doc);
        goto out;
    }
    for (int64_t k = 0; k < frames; k++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = mem_stream(&buf, &len);
        if (!f) {
            code = CLI_EXIT_USAGE;
            goto out;
        }
        int rc = frame(ctx, max_jobs, f, &nodes, &jobs);
        fclose(f);
        if (!once) {
            fputs("\033[H\033[2J", ctx->out);
        }
        fwrite(buf, 1, len, ctx->out);
        fflush(ctx->out);
        free(buf);
        if (once && rc < 0) {
            code = cr__cli_fail(ctx, rc, jobs.message ? &jobs : &nodes);
            goto out;
        }
        if (k + 1 < frames) {
            struct timespec ts = {.tv_sec = (time_t)(interval / CR_NS_PER_SEC),
                                  .tv_nsec = (long)(interval % CR_NS_PER_SEC)};
            nanosleep(&ts, NULL);
        }
    }
out:
    cr_client_res_fini(&nodes);
    cr_client_res_fini(&jobs);
    cr__cli_args_fini(&a);
    return code;
}
