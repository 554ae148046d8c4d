/*
 * cli_jobs.c - job commands: submit, jobs, show, cancel/hold/release/requeue,
 * logs.
 */
#include "cli_int.h"
#include "cr_parse.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"
#include "cr_time.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#define NOPTS(o) (sizeof(o) / sizeof((o)[0]))

static const char JOB_STATES[] =
    "pending|held|running|completing|completed|failed|cancelled|preempted";
static const char JOB_KINDS[] = "pretrain|finetune|inference|visual|hpc|batch";

/* --- submit ---------------------------------------------------------------- */

/* The server's limit on time_limit_s (docs/api.md). */
#define CLI_MAX_TIME_LIMIT_S (366LL * 86400)
/* The server's model.method and model.precision values: CR_METHOD_VALUES and
 * CR_PRECISION_VALUES of src/model/cr_perf.h (the cli layer does not include
 * model/: keep these copies in step). */
#define CLI_METHODS    "full|lora|qlora"
#define CLI_PRECISIONS "bf16|fp16|fp8|int8|int4|tf32|fp32|fp64"

static const cli_opt submit_opts[] = {
    {"gpus", CLI_INT, "N", "GPUs in total, over all nodes (at least 1; default 1)", NULL, 1, 4096,
     0},
    {"gpu-type", CLI_STR, "TYPE", "GPU model ('H100 SXM'), auto (the advisor picks) or any", NULL,
     0, 0, 0},
    {"mig", CLI_STR, "PROFILE", "a MIG slice instead of whole GPUs (e.g. 1g.10gb)", NULL, 0, 0, 0},
    {"gpu-mem", CLI_INT, "GB", "minimum memory per GPU in GB", NULL, 1, 4096, 0},
    {"nodes", CLI_INT, "N", "nodes to spread the GPUs over, evenly (0: any spread)", NULL, 0, 1024,
     0},
    {"kind", CLI_STR, "KIND", "workload kind, for the advisor", JOB_KINDS, 0, 0, 0},
    {"params", CLI_COUNT, "N", "model parameters (7b, 70e9)", NULL, 0, 0, 0},
    {"method", CLI_STR, "M", "training method hint", CLI_METHODS, 0, 0, 0},
    {"tokens", CLI_COUNT, "N", "tokens to process (1e8, 2t)", NULL, 0, 0, 0},
    {"precision", CLI_STR, "P", "numeric precision hint", CLI_PRECISIONS, 0, 0, 0},
    {"tenant", CLI_STR, "T", "tenant (admins; users submit to their own)", NULL, 0, 0, 0},
    {"priority", CLI_INT, "P", "priority (higher runs first)", NULL, -1000000, 1000000, 0},
    {"time", CLI_DUR, "DURATION", "time limit (90m, 1h30m, 2d)", NULL, 0, 0, 't'},
    {"env", CLI_LIST, "K=V", "environment variable for the job", NULL, 0, 0, 'e'},
    {"secret", CLI_LIST, "K[=V]",
     "secret env variable: stored encrypted, never shown (K alone: the value of $K here)", NULL, 0,
     0, 0},
    {"secret-file", CLI_LIST, "K=PATH", "secret env variable read from a file", NULL, 0, 0, 0},
    {"workdir", CLI_STR, "DIR", "working directory on the node (with --image: in the container)",
     NULL, 0, 0, 0},
    {"image", CLI_STR, "IMAGE", "run the job in a container of this OCI image (podman)", NULL, 0, 0,
     0},
    {"image-archive", CLI_STR, "FILE",
     "with --image: docker/oci archive on the node to load when the image is missing", NULL, 0, 0,
     0},
    {"mount", CLI_LIST, "SRC:DST[:ro]",
     "with --image: bind-mount a host path the admin allows for the tenant", NULL, 0, 0, 0},
    {"entrypoint", CLI_STR, "PROGRAM", "with --image: replace the image's entrypoint", NULL, 0, 0,
     0},
    {"array", CLI_INT, "N", "submit N copies (an array of tasks)", NULL, 1, 10000, 0},
    {"name", CLI_STR, "NAME", "job name", NULL, 0, 0, 'n'},
    {"preemptible", CLI_BOOL, NULL, "may be preempted (it checkpoints)", NULL, 0, 0, 0},
    {"checkpoint-interval", CLI_DUR, "DURATION", "how often the job checkpoints", NULL, 0, 0, 0},
    {"retries", CLI_INT, "N", "retries after a failure", NULL, 0, 100, 0},
    {"cpus", CLI_F64, "N", "CPU limit in cores on each node (default: the per-GPU default)", NULL,
     0, 4096, 0},
    {"mem", CLI_STR, "SIZE", "memory limit on each node: 512M, 16G (bare number: MB)", NULL, 0, 0,
     0},
};

static void put_str(json_t *o, const char *key, const cli_val *v)
{
    if (v->set) {
        json_object_set_new(o, key, json_string(v->str));
    }
}

static void put_int(json_t *o, const char *key, const cli_val *v)
{
    if (v->set) {
        json_object_set_new(o, key, json_integer(v->i));
    }
}

static int add_secrets(cli_ctx *ctx, const cli_args *a, json_t *job);

/* Build the job request from the parsed flags; NULL after printing an
 * error naming the flag. Returned new (json_decref). */
static json_t *job_request(cli_ctx *ctx, const cli_args *a)
{
    json_t *job = json_object();
    if (a->nrest == 0) {
        fprintf(ctx->err, "corral submit: no command given (corral submit [options] -- COMMAND "
                          "[ARGS...])\n");
        goto bad;
    }
    json_t *cmd = json_array();
    for (size_t i = 0; i < a->nrest; i++) {
        json_array_append_new(cmd, json_string(a->rest[i]));
    }
    json_object_set_new(job, "command", cmd);
    put_str(job, "name", cr__cli_arg(a, "name"));
    put_str(job, "tenant", cr__cli_arg(a, "tenant"));
    put_int(job, "gpus", cr__cli_arg(a, "gpus"));
    put_str(job, "gpu_type", cr__cli_arg(a, "gpu-type"));
    put_str(job, "mig_profile", cr__cli_arg(a, "mig"));
    put_int(job, "gpu_mem_gb", cr__cli_arg(a, "gpu-mem"));
    put_int(job, "nodes", cr__cli_arg(a, "nodes"));
    put_str(job, "kind", cr__cli_arg(a, "kind"));
    put_int(job, "priority", cr__cli_arg(a, "priority"));
    put_str(job, "workdir", cr__cli_arg(a, "workdir"));
    put_int(job, "array", cr__cli_arg(a, "array"));
    put_int(job, "max_retries", cr__cli_arg(a, "retries"));
    const cli_val *wd = cr__cli_arg(a, "workdir");
    if (wd->set && wd->str[0] != '/') {
        fprintf(ctx->err, "corral submit: --workdir: '%s' is not an absolute path\n", wd->str);
        goto bad;
    }
    if (a->rest[0][0] == '\0') {
        fprintf(ctx->err, "corral submit: the command name is empty\n");
        goto bad;
    }
    const cli_val *cpus = cr__cli_arg(a, "cpus");
    if (cpus->set) {
        if (cpus->f < 0.01) {
            fprintf(ctx->err, "corral submit: --cpus: want at least 0.01 cores\n");
            goto bad;
        }
        json_object_set_new(job, "cpus", json_real(cpus->f));
    }
    const cli_val *mem = cr__cli_arg(a, "mem");
    if (mem->set) {
        int64_t bytes;
        if (cr_parse_bytes(mem->str, &bytes) != 0 || bytes < (1 << 20)) {
            fprintf(ctx->err,
                    "corral submit: --mem: '%s' is not a size of at least 1M (512M, 16G, 1.5T)\n",
                    mem->str);
            goto bad;
        }
        json_object_set_new(job, "mem_bytes", json_integer(bytes));
    }
    const cli_val *t = cr__cli_arg(a, "time");
    if (t->set && t->i > CLI_MAX_TIME_LIMIT_S * CR_NS_PER_SEC) {
        fprintf(ctx->err, "corral submit: --time: '%s' is over the limit of 366d\n", t->str);
        goto bad;
    }
    if (t->set) {
        json_object_set_new(job, "time_limit_s",
                            json_integer((t->i + CR_NS_PER_SEC - 1) / CR_NS_PER_SEC));
    }
    const cli_val *ck = cr__cli_arg(a, "checkpoint-interval");
    if (ck->set) {
        json_object_set_new(job, "checkpoint_interval_s",
                            json_integer((ck->i + CR_NS_PER_SEC - 1) / CR_NS_PER_SEC));
    }
    if (cr__cli_arg(a, "preemptible")->set) {
        json_object_set_new(job, "preemptible", json_true());
    }
    const cli_val *mig = cr__cli_arg(a, "mig");
    const cli_val *gt = cr__cli_arg(a, "gpu-type");
    if (mig->set && gt->set && (strcmp(gt->str, "auto") == 0)) {
        fprintf(ctx->err, "corral submit: --mig needs a concrete --gpu-type or none, not auto\n");
        goto bad;
    }
    json_t *model = json_object();
    const cli_val *p = cr__cli_arg(a, "params");
    if (p->set) {
        json_object_set_new(model, "params", json_real(p->f));
    }
    put_str(model, "method", cr__cli_arg(a, "method"));
    const cli_val *tok = cr__cli_arg(a, "tokens");
    if (tok->set) {
        json_object_set_new(model, "tokens", json_real(tok->f));
    }
    put_str(model, "precision", cr__cli_arg(a, "precision"));
    if (json_object_size(model) > 0) {
        json_object_set_new(job, "model", model);
    } else {
        json_decref(model);
    }
    const cli_val *env = cr__cli_arg(a, "env");
    if (env->count) {
        json_t *e = json_object();
        json_object_set_new(job, "env", e);
        for (size_t i = 0; i < env->count; i++) {
            const char *eq = strchr(env->list[i], '=');
            if (!eq || eq == env->list[i]) {
                fprintf(ctx->err, "corral submit: --env: '%s' is not KEY=VALUE\n", env->list[i]);
                goto bad;
            }
            char *k = cr_strndup(env->list[i], (size_t)(eq - env->list[i]));
            json_object_set_new(e, k, json_string(eq + 1));
            free(k);
        }
    }
    if (add_secrets(ctx, a, job) != 0) {
        goto bad;
    }
    put_str(job, "image", cr__cli_arg(a, "image"));
    put_str(job, "image_archive", cr__cli_arg(a, "image-archive"));
    const cli_val *ep = cr__cli_arg(a, "entrypoint");
    if (ep->set) {
        json_object_set_new(job, "entrypoint", json_pack("[s]", ep->str));
    }
    const cli_val *mnt = cr__cli_arg(a, "mount");
    if (mnt->count) {
        json_t *m = json_array();
        json_object_set_new(job, "mounts", m);
        for (size_t i = 0; i < mnt->count; i++) {
            json_array_append_new(m, json_string(mnt->list[i]));
        }
    }
    if (!cr__cli_arg(a, "image")->set &&
        (mnt->count || ep->set || cr__cli_arg(a, "image-archive")->set)) {
        fprintf(ctx->err,
                "corral submit: --mount, --entrypoint and --image-archive need --image\n");
        goto bad;
    }
    return job;
bad:
    json_decref(job);
    return NULL;
}

/* The secrets of a submit: --secret K=V, --secret K (from this process's
 * environment, so the value stays out of ps), --secret-file K=PATH (the
 * file's contents, one trailing newline dropped). 0, or -1 after an error
 * naming the flag. */
static int add_secrets(cli_ctx *ctx, const cli_args *a, json_t *job)
{
    const cli_val *sv = cr__cli_arg(a, "secret"), *sf = cr__cli_arg(a, "secret-file");
    if (!sv->count && !sf->count) {
        return 0;
    }
    json_t *sec = json_object();
    json_object_set_new(job, "secrets", sec);
    for (size_t i = 0; i < sv->count + sf->count; i++) {
        bool file = i >= sv->count;
        const char *arg = file ? sf->list[i - sv->count] : sv->list[i];
        const char *flag = file ? "--secret-file" : "--secret";
        const char *eq = strchr(arg, '=');
        size_t kl = eq ? (size_t)(eq - arg) : strlen(arg);
        if (kl == 0 || (file && !eq)) {
            fprintf(ctx->err, "corral submit: %s: '%s' is not %s\n", flag, eq ? "K=..." : arg,
                    file ? "NAME=PATH" : "NAME=VALUE or NAME");
            return -1;
        }
        char *k = cr_strndup(arg, kl);
        char *val = NULL;
        if (file) {
            FILE *f = fopen(eq + 1, "rb");
            cr_buf b;
            cr_buf_init(&b);
            char chunk[4096];
            size_t n;
            while (f && (n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len <= 65536) {
                cr_buf_append(&b, chunk, n);
            }
            if (f) {
                fclose(f);
            }
            if (!f || b.len > 65536 || memchr(cr_buf_str(&b), '\0', b.len)) {
                fprintf(ctx->err, "corral submit: --secret-file: %s: %s\n", eq + 1,
                        !f ? strerror(errno) : "over 64 KiB or holds a NUL byte");
                cr_buf_fini(&b);
                free(k);
                return -1;
            }
            if (b.len > 0 && b.data[b.len - 1] == '\n') {
                b.data[--b.len] = '\0';
            }
            val = cr_strdup(cr_buf_str(&b));
            cr_buf_fini(&b);
        } else if (eq) {
            val = cr_strdup(eq + 1);
        } else {
            const char *e = getenv(k);
            if (!e) {
                fprintf(ctx->err,
                        "corral submit: --secret: '%s' has no value and $%s is not set here\n", k,
                        k);
                free(k);
                return -1;
            }
            val = cr_strdup(e);
        }
        json_object_set_new(sec, k, json_string(val));
        memset(val, 0, strlen(val));
        free(val);
        free(k);
    }
    return 0;
}

/* "42", "42-51" (consecutive) or "42,44,47". */
static void print_ids(cli_ctx *ctx, const json_t *ids)
{
    size_t n = json_array_size(ids);
    if (n == 0) {
        fputs("Submitted (no ids returned)\n", ctx->out);
        return;
    }
    if (n == 1) {
        fprintf(ctx->out, "Submitted job %" JSON_INTEGER_FORMAT "\n",
                json_integer_value(json_array_get(ids, 0)));
        return;
    }
    bool consecutive = true;
    for (size_t i = 1; i < n; i++) {
        if (json_integer_value(json_array_get(ids, i)) !=
            json_integer_value(json_array_get(ids, i - 1)) + 1) {
            consecutive = false;
        }
    }
    if (consecutive) {
        fprintf(ctx->out, "Submitted %zu jobs %" JSON_INTEGER_FORMAT "-%" JSON_INTEGER_FORMAT "\n",
                n, json_integer_value(json_array_get(ids, 0)),
                json_integer_value(json_array_get(ids, n - 1)));
        return;
    }
    fprintf(ctx->out, "Submitted %zu jobs ", n);
    for (size_t i = 0; i < n; i++) {
        fprintf(ctx->out, "%s%" JSON_INTEGER_FORMAT, i ? "," : "",
                json_integer_value(json_array_get(ids, i)));
    }
    fputc('\n', ctx->out);
}

int cr__cli_submit(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    json_t *job = NULL;
    cr_client_res res;
    cr_client_res_init(&res);
    if (cr__cli_begin(ctx, &a, "[options] [--] COMMAND [ARGS...]", submit_opts, NOPTS(submit_opts),
                      true, argc, argv, &code)) {
        goto out;
    }
    job = job_request(ctx, &a);
    if (!job) {
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if ((code = cr__cli_connect(ctx, &a)) != 0) {
        goto out;
    }
    int rc = cr_client_job_submit(ctx->client, job, &res);
    if (rc < 0) {
        code = cr__cli_fail(ctx, rc, &res);
        goto out;
    }
    if (ctx->json) {
        cr__cli_print_json(ctx, res.body);
    } else {
        print_ids(ctx, json_object_get(res.body, "ids"));
    }
out:
    json_decref(job);
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}

/* --- jobs -------------------------------------------------------------------- */

static const cli_opt jobs_opts[] = {
    {"state", CLI_STR, "STATE", "only jobs in this state", JOB_STATES, 0, 0, 's'},
    {"tenant", CLI_STR, "T", "only this tenant's jobs", NULL, 0, 0, 0},
    {"all", CLI_BOOL, NULL, "include finished jobs (default: pending, held, running)", NULL, 0, 0,
     'a'},
    {"limit", CLI_INT, "N", "at most N jobs", NULL, 1, 1000000, 0},
};

static bool active_state(const char *s)
{
    return s && (strcmp(s, "pending") == 0 || strcmp(s, "held") == 0 || strcmp(s, "running") == 0 ||
                 strcmp(s, "completing") == 0);
}

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* Elapsed run time of a job: start to end (or now). */
static char *run_time(const json_t *job, int64_t now_ns, char *buf, size_t len)
{
    int64_t start = 0, end = now_ns;
    if (cr__cli_parse_rfc3339(jstr(job, "start_time"), &start) < 0) {
        snprintf(buf, len, "-");
        return buf;
    }
    const char *e = jstr(job, "end_time");
    if (e && cr__cli_parse_rfc3339(e, &end) < 0) {
        end = now_ns;
    }
    return cr_duration_fmt(end > start ? end - start : 0, buf, len);
}

/* Node names of the placement, or "(reason)" for a job that waits. */
static void where(const json_t *job, cr_buf *b)
{
    const json_t *pl = json_object_get(job, "placement");
    size_t i;
    json_t *p;
    json_array_foreach(pl, i, p)
    {
        const char *node = jstr(p, "node");
        cr_buf_printf(b, "%s%s", i ? "," : "", node ? node : "?");
    }
    if (b->len == 0) {
        const char *r = jstr(job, "reason");
        if (r && *r) {
            cr_buf_printf(b, "(%s)", r);
        }
    }
}

static void gpus_text(const json_t *job, char *buf, size_t len)
{
    const char *mig = jstr(job, "mig_profile");
    char n[24];
    cr__cli_json_text(json_object_get(job, "gpus"), n, sizeof n);
    const json_t *nodes = json_object_get(job, "nodes");
    if (mig && *mig) {
        snprintf(buf, len, "%s", mig);
    } else if (json_integer_value(nodes) > 1 && json_is_integer(json_object_get(job, "gpus"))) {
        /* nodes x GPUs per node: gpus is the total */
        json_int_t k = json_integer_value(nodes);
        json_int_t g = json_integer_value(json_object_get(job, "gpus"));
        if (g % k == 0) {
            snprintf(buf, len, "%" JSON_INTEGER_FORMAT "x%" JSON_INTEGER_FORMAT, k, g / k);
        } else {
            snprintf(buf, len, "%s", n);
        }
    } else {
        snprintf(buf, len, "%s", n);
    }
}

void cr__cli_jobs_table(cli_ctx *ctx, const json_t *items, bool only_active, FILE *f)
{
    static const char *const hdr[] = {">ID",   "NAME", "TENANT", "STATE",
                                      ">GPUS", "TYPE", ">TIME",  "NODES(REASON)"};
    cli_table t;
    cr__cli_table_init(&t, 8, hdr);
    size_t i;
    json_t *job;
    json_array_foreach(items, i, job)
    {
        const char *state = jstr(job, "state");
        if (only_active && !active_state(state)) {
            continue;
        }
        char id[32], gpus[64], tm[32];
        cr__cli_json_text(json_object_get(job, "id"), id, sizeof id);
        gpus_text(job, gpus, sizeof gpus);
        run_time(job, ctx->now_ns, tm, sizeof tm);
        cr_buf w;
        cr_buf_init(&w);
        where(job, &w);
        /* the type it runs on, once placed; else the type asked for */
        const char *type = jstr(job, "run_gpu_type");
        if (!type || !*type) {
            type = jstr(job, "gpu_type");
        }
        const char *row[] = {id, jstr(job, "name"), jstr(job, "tenant"), state, gpus, type,
                             tm, cr_buf_str(&w)};
        cr__cli_table_row(&t, row);
        cr_buf_fini(&w);
    }
    cr__cli_table_print(&t, f);
    cr__cli_table_fini(&t);
}

int cr__cli_jobs(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    cr_client_res res;
    cr_client_res_init(&res);
    if (cr__cli_begin(ctx, &a, "[--state STATE] [--tenant T] [--all] [--limit N]", jobs_opts,
                      NOPTS(jobs_opts), false, argc, argv, &code)) {
        goto out;
    }
    if (a.npos) {
        fprintf(ctx->err, "corral jobs: unexpected argument '%s' (use corral show JOB)\n",
                a.pos[0]);
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if ((code = cr__cli_connect(ctx, &a)) != 0) {
        goto out;
    }
    const cli_val *st = cr__cli_arg(&a, "state");
    const cli_val *lim = cr__cli_arg(&a, "limit");
    int rc = cr_client_jobs_list(ctx->client, st->set ? st->str : NULL,
                                 cr__cli_arg(&a, "tenant")->str, lim->set ? lim->i : 0, &res);
    if (rc < 0) {
        code = cr__cli_fail(ctx, rc, &res);
        goto out;
    }
    if (ctx->json) {
        cr__cli_print_json(ctx, res.body);
    } else {
        bool only_active = !st->set && !cr__cli_arg(&a, "all")->set;
        cr__cli_jobs_table(ctx, json_object_get(res.body, "items"), only_active, ctx->out);
    }
out:
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}

/* --- show -------------------------------------------------------------------- */

static void show_job(cli_ctx *ctx, const json_t *job)
{
    static const struct {
        const char *key;
        const char *label;
    } fields[] = {
        {"name", "Name"},
        {"tenant", "Tenant"},
        {"state", "State"},
        {"reason", "Reason"},
        {"kind", "Kind"},
        {"gpus", "GPUs"},
        {"gpu_type", "GPU type"},
        {"run_gpu_type", "Runs on"},
        {"mig_profile", "MIG profile"},
        {"gpu_mem_gb", "GPU mem (GB)"},
        {"nodes", "Nodes"},
        {"priority", "Priority"},
        {"time_limit_s", "Time limit"},
        {"preemptible", "Preemptible"},
        {"checkpoint_interval_s", "Checkpoint"},
        {"retries", "Retries"},
        {"max_retries", "Max retries"},
        {"exit_code", "Exit code"},
        {"signal", "Signal"},
        {"workdir", "Workdir"},
        {"image", "Image"},
        {"secret_names", "Secrets"},
        {"submit_time", "Submitted"},
        {"start_time", "Started"},
        {"end_time", "Ended"},
    };
    char buf[1024];
    fprintf(ctx->out, "Job %s\n", cr__cli_json_text(json_object_get(job, "id"), buf, sizeof buf));
    const json_t *cmd = json_object_get(job, "command");
    if (json_is_array(cmd)) {
        fprintf(ctx->out, "  %-15s", "Command:");
        size_t i;
        json_t *w;
        json_array_foreach(cmd, i, w)
        {
            const char *s = json_string_value(w);
            bool quote = s && (strpbrk(s, " \t'\"$") || !*s);
            fprintf(ctx->out, quote ? " '%s'" : " %s",
                    s ? cr__cli_escape(s, buf, sizeof buf) : "?");
        }
        fputc('\n', ctx->out);
    }
    const char *state = jstr(job, "state");
    bool ended = state && !active_state(state);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const char *key = fields[i].key;
        const json_t *v = json_object_get(job, key);
        if (!v || json_is_null(v)) {
            continue;
        }
        if (json_is_string(v) && !*json_string_value(v)) {
            continue;
        }
        /* exit status only once the job ended; zero limits mean none */
        if (!ended && (strcmp(key, "exit_code") == 0 || strcmp(key, "signal") == 0)) {
            continue;
        }
        if (ended && strcmp(key, "signal") == 0 && json_integer_value(v) == 0) {
            continue;
        }
        if ((strcmp(key, "time_limit_s") == 0 || strcmp(key, "checkpoint_interval_s") == 0 ||
             strcmp(key, "nodes") == 0) &&
            json_number_value(v) <= 0) {
            continue;
        }
        if (strcmp(key, "time_limit_s") == 0 || strcmp(key, "checkpoint_interval_s") == 0) {
            char d[32];
            fprintf(ctx->out, "  %-15s %s\n",
                    strcmp(key, "time_limit_s") == 0 ? "Time limit:" : "Checkpoint:",
                    cr_duration_fmt((int64_t)(json_number_value(v) * 1e9), d, sizeof d));
            continue;
        }
        char label[32];
        snprintf(label, sizeof label, "%s:", fields[i].label);
        fprintf(ctx->out, "  %-15s %s\n", label, cr__cli_json_text(v, buf, sizeof buf));
    }
    const json_t *model = json_object_get(job, "model");
    if (json_is_object(model) && json_object_size(model)) {
        fprintf(ctx->out, "  %-15s", "Model:");
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)model, k, v)
        {
            fprintf(ctx->out, " %s=%s", k, cr__cli_json_text(v, buf, sizeof buf));
        }
        fputc('\n', ctx->out);
    }
    const json_t *env = json_object_get(job, "env");
    if (json_is_object(env) && json_object_size(env)) {
        fprintf(ctx->out, "  %-15s", "Env:");
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)env, k, v)
        {
            char kb[300];
            fprintf(ctx->out, " %s=%s", cr__cli_escape(k, kb, sizeof kb),
                    cr__cli_json_text(v, buf, sizeof buf));
        }
        fputc('\n', ctx->out);
    }
    const json_t *pl = json_object_get(job, "placement");
    if (json_array_size(pl)) {
        fputs("Placement:\n", ctx->out);
        size_t i;
        json_t *p;
        json_array_foreach(pl, i, p)
        {
            char g[512];
            const json_t *uu = json_object_get(p, "gpu_uuids");
            fprintf(ctx->out, "  %-15s gpus %s", jstr(p, "node") ? jstr(p, "node") : "?",
                    cr__cli_json_text(json_object_get(p, "gpus"), g, sizeof g));
            if (json_array_size(uu)) {
                fprintf(ctx->out, " (%s)", cr__cli_json_text(uu, buf, sizeof buf));
            }
            fputc('\n', ctx->out);
        }
    }
    cr__cli_events_table(json_object_get(job, "events"), ctx->out);
}

int cr__cli_show(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    cr_client_res res;
    cr_client_res_init(&res);
    if (cr__cli_begin(ctx, &a, "JOB", NULL, 0, false, argc, argv, &code)) {
        goto out;
    }
    int64_t id = 0;
    if (a.npos != 1) {
        fprintf(ctx->err, "corral show: expected one job id (corral show JOB)\n");
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if (cr__cli_job_id(ctx, a.pos[0], &id) < 0) {
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if ((code = cr__cli_connect(ctx, &a)) != 0) {
        goto out;
    }
    int rc = cr_client_job_get(ctx->client, id, &res);
    if (rc < 0) {
        code = cr__cli_fail(ctx, rc, &res);
        goto out;
    }
    if (ctx->json) {
        cr__cli_print_json(ctx, res.body);
    } else {
        show_job(ctx, res.body);
    }
out:
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}

/* --- cancel, hold, release, requeue -------------------------------------------- */

int cr__cli_job_action(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    int64_t *ids = NULL;
    json_t *all = json_array();
    cr_client_res res;
    cr_client_res_init(&res);
    if (cr__cli_begin(ctx, &a, "JOB...", NULL, 0, false, argc, argv, &code)) {
        goto out;
    }
    if (a.npos == 0) {
        fprintf(ctx->err, "corral %s: expected at least one job id (corral %s JOB...)\n", ctx->cmd,
                ctx->cmd);
        code = CLI_EXIT_USAGE;
        goto out;
    }
    ids = cr_calloc(a.npos, sizeof *ids);
    for (size_t i = 0; i < a.npos; i++) {
        if (cr__cli_job_id(ctx, a.pos[i], &ids[i]) < 0) {
            code = CLI_EXIT_USAGE;
            goto out;
        }
    }
    if ((code = cr__cli_connect(ctx, &a)) != 0) {
        goto out;
    }
    static const struct {
        const char *cmd, *done;
    } past[] = {{"cancel", "Cancelled"},
                {"hold", "Held"},
                {"release", "Released"},
                {"requeue", "Requeued"}};
    const char *done = "Done";
    for (size_t i = 0; i < sizeof past / sizeof past[0]; i++) {
        if (strcmp(past[i].cmd, ctx->cmd) == 0) {
            done = past[i].done;
        }
    }
    for (size_t i = 0; i < a.npos; i++) {
        int rc = cr_client_job_action(ctx->client, ids[i], ctx->cmd, &res);
        if (rc < 0) {
            int c = cr__cli_fail(ctx, rc, &res);
            if (c > code) {
                code = c;
            }
            if (c == CLI_EXIT_UNREACH) {
                break;
            }
        } else if (!ctx->json) {
            fprintf(ctx->out, "%s job %" PRId64 "\n", done, ids[i]);
        }
        if (ctx->json) {
            json_t *one =
                json_pack("{s:I,s:i}", "id", (json_int_t)ids[i], "status", (int)res.status);
            json_object_set(one, rc < 0 ? "error" : "answer", res.body ? res.body : json_null());
            json_array_append_new(all, one);
        }
    }
    if (ctx->json) {
        cr__cli_print_json(ctx, all);
    }
out:
    json_decref(all);
    free(ids);
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}

/* --- logs ---------------------------------------------------------------------- */

static const cli_opt logs_opts[] = {
    {"follow", CLI_BOOL, NULL, "keep printing new output until the job ends", NULL, 0, 0, 'f'},
    {"stderr", CLI_BOOL, NULL, "the job's stderr instead of its stdout", NULL, 0, 0, 0},
    {"offset", CLI_INT, "BYTES", "start at this byte offset", NULL, 0, INT64_MAX, 0},
};

typedef struct log_sink {
    FILE *f;        /* where the bytes go */
    uint64_t bytes; /* bytes written by the last call */
    bool closed;    /* the output went away (e.g. piped to head) */
} log_sink;

static int write_out(void *ud, const char *data, size_t len)
{
    log_sink *s = ud;
    if (fwrite(data, 1, len, s->f) != len || fflush(s->f) != 0) {
        s->closed = true;
        return 1;
    }
    s->bytes += len;
    return 0;
}

/*
 * Following a log: ask with follow=1 from the offset reached so far. A
 * server that streams keeps the call open until the job ends; one that does
 * not answers with what it has. Either way the client then checks the job:
 * while it is active, it asks again (after a short pause when nothing came),
 * and a refusal of the log itself (not started yet, the agent has no file
 * yet, the agent is unreachable for a moment) is waited out; once the job
 * has ended, one last call with nothing new ends the command, and a refusal
 * then is final.
 */
static int follow_logs(cli_ctx *ctx, int64_t id, const char *stream, uint64_t offset,
                       cr_client_res *res)
{
    log_sink sink = {.f = ctx->out};
    cr_client_res job;
    cr_client_res_init(&job);
    int code = 0;
    for (;;) {
        sink.bytes = 0;
        int rc = cr_client_job_logs(ctx->client, id, stream, offset, true, write_out, &sink, res);
        offset += sink.bytes;
        if (sink.closed) {
            break;
        }
        if (rc < 0 && res->status == 0) {
            code = cr__cli_fail(ctx, rc, res); /* the controller is gone */
            break;
        }
        int jrc = cr_client_job_get(ctx->client, id, &job);
        if (jrc < 0) {
            code = cr__cli_fail(ctx, jrc, &job);
            break;
        }
        const char *state = jstr(job.body, "state");
        if (!active_state(state)) {
            if (rc < 0) {
                code = cr__cli_fail(ctx, rc, res);
                break;
            }
            if (sink.bytes == 0 || !state) {
                break;
            }
            continue; /* drain what came after the last read */
        }
        if (rc < 0 || sink.bytes == 0) {
            struct timespec ts = {.tv_sec = 0, .tv_nsec = 500 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    cr_client_res_fini(&job);
    return code;
}

int cr__cli_logs(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    cr_client_res res;
    cr_client_res_init(&res);
    if (cr__cli_begin(ctx, &a, "JOB [-f|--follow] [--stderr] [--offset BYTES]", logs_opts,
                      NOPTS(logs_opts), false, argc, argv, &code)) {
        goto out;
    }
    int64_t id = 0;
    if (a.npos != 1) {
        fprintf(ctx->err, "corral logs: expected one job id (corral logs JOB [-f])\n");
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if (cr__cli_job_id(ctx, a.pos[0], &id) < 0) {
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if ((code = cr__cli_connect(ctx, &a)) != 0) {
        goto out;
    }
    const cli_val *off = cr__cli_arg(&a, "offset");
    const char *stream = cr__cli_arg(&a, "stderr")->set ? "stderr" : "stdout";
    uint64_t offset = off->set ? (uint64_t)off->i : 0;
    if (cr__cli_arg(&a, "follow")->set) {
        code = follow_logs(ctx, id, stream, offset, &res);
        goto out;
    }
    log_sink sink = {.f = ctx->out};
    int rc = cr_client_job_logs(ctx->client, id, stream, offset, false, write_out, &sink, &res);
    if (rc < 0) {
        code = cr__cli_fail(ctx, rc, &res);
    }
out:
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}
