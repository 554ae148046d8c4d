/*
 * cli_jobs.c - job commands: submit, jobs, show, cancel/hold/release/requeue,
 * logs.
 */
#include "cli_int.h"
#include "cr_parse.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"
#include "cr_parse.h"
#include "cr_time.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

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
#define CLI_PRECISIONS "bf16|fp16|fp8|int8|int4|tf32|fp32|fp64|fp4|fp6"
#define CLI_STACKS     "megatron|fsdp|deepspeed|hf|vllm|trtllm|sglang"

static const cli_opt submit_opts[] = {
    {"gpus", CLI_INT, "N",
     "GPUs in total, over all nodes (0: none, a CPU job; default 1, or the cluster's "
     "default_gpus)",
     NULL, 0, 4096, 0},
    {"gpu-type", CLI_STR, "TYPE", "GPU model ('H100 SXM'), auto (the advisor picks) or any", NULL,
     0, 0, 0},
    {"partition", CLI_STR, "NAME",
     "partition: a named set of nodes with defaults and limits (docs/partitions.md)", NULL, 0, 0,
     'p'},
    {"mig", CLI_STR, "PROFILE", "a MIG slice instead of whole GPUs (e.g. 1g.10gb)", NULL, 0, 0, 0},
    {"gpu-mem", CLI_INT, "GB", "minimum memory per GPU in GB", NULL, 1, 4096, 0},
    {"gpu-fraction", CLI_F64, "F", "part of one shareable GPU (0.25: a quarter of its compute)",
     NULL, 0, 1, 0},
    {"gpu-share-mem", CLI_STR, "SIZE", "memory held on a shareable GPU (10G): a fractional task",
     NULL, 0, 0, 0},
    {"nodes", CLI_INT, "N", "nodes to spread the GPUs over, evenly (0: any spread)", NULL, 0, 1024,
     0},
    {"kind", CLI_STR, "KIND", "workload kind, for the advisor", JOB_KINDS, 0, 0, 0},
    {"params", CLI_COUNT, "N", "model parameters (7b, 70e9)", NULL, 0, 0, 0},
    {"model", CLI_STR, "NAME", "model architecture for the advisor (llama-3.1-8b; data/models)",
     NULL, 0, 0, 0},
    {"method", CLI_STR, "M", "training method hint", CLI_METHODS, 0, 0, 0},
    {"tokens", CLI_COUNT, "N", "tokens to process (1e8, 2t)", NULL, 0, 0, 0},
    {"precision", CLI_STR, "P", "numeric precision hint", CLI_PRECISIONS, 0, 0, 0},
    {"stack", CLI_STR, "S", "software stack hint for the advisor's plan", CLI_STACKS, 0, 0, 0},
    {"checkpointing", CLI_STR, "C", "activation checkpointing hint", "none|selective|full", 0, 0,
     0},
    {"micro-batch", CLI_INT, "N", "sequences per micro-batch per data-parallel rank (the plan's)",
     NULL, 1, 100000000, 0},
    {"global-batch", CLI_INT, "N", "sequences per optimizer step (the plan's)", NULL, 1, 100000000,
     0},
    {"seq-len", CLI_INT, "N", "training sequence length, tokens", NULL, 1, 10000000, 0},
    {"tenant", CLI_STR, "T", "tenant (admins; users submit to their own)", NULL, 0, 0, 0},
    {"priority", CLI_INT, "P", "priority (higher runs first)", NULL, -1000000, 1000000, 0},
    {"time", CLI_TLIM, "TIME", "time limit: minutes (90), MM:SS, HH:MM:SS, D-HH:MM:SS, or 90s, 2h",
     NULL, 0, 0, 't'},
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
    {"data", CLI_LIST, "NAME[@VER][:/MOUNT]",
     "stage a dataset or model to the node before the job starts (corral data; docs/data.md)", NULL,
     0, 0, 0},
    {"mount", CLI_LIST, "SRC:DST[:ro]",
     "with --image: bind-mount a host path the admin allows for the tenant", NULL, 0, 0, 0},
    {"entrypoint", CLI_STR, "PROGRAM", "with --image: replace the image's entrypoint", NULL, 0, 0,
     0},
    {"array", CLI_STR, "N|SPEC",
     "N copies, or Slurm's indexes: 0-99, 1,3,5, 0-99:2, with %N at most N at once", NULL, 0, 0,
     'a'},
    {"dependency", CLI_STR, "DEP",
     "afterok|afternotok|afterany|after:ID[:ID...][,...] or singleton", NULL, 0, 0, 'd'},
    {"begin", CLI_STR, "TIME", "not before: now+DURATION, HH:MM[:SS] or RFC 3339", NULL, 0, 0, 0},
    {"name", CLI_STR, "NAME", "job name", NULL, 0, 0, 'n'},
    {"preemptible", CLI_BOOL, NULL, "may be preempted (it checkpoints)", NULL, 0, 0, 0},
    {"checkpoint-interval", CLI_DUR, "DURATION", "how often the job checkpoints", NULL, 0, 0, 0},
    {"checkpointable", CLI_BOOL, NULL,
     "it keeps the suspend contract (docs/api.md): may be suspended by --policy rounds", NULL, 0, 0,
     0},
    {"checkpoint-signal", CLI_STR, "SIG",
     "with --checkpointable: the signal to checkpoint and exit on (default USR1)", NULL, 0, 0, 0},
    {"retries", CLI_INT, "N", "retries after a failure (default 0)", NULL, 0, 100, 0},
    {"requeue", CLI_BOOL, NULL, "requeue after a lost node (not counted as a retry)", NULL, 0, 0,
     0},
    {"tasks-per-node", CLI_INT, "N",
     "processes per node, each its own RANK (default: docs/cli.md, Tasks)", NULL, 1, 256, 0},
    {"ntasks", CLI_INT, "N", "tasks in all (sbatch -n): N / nodes on each node", NULL, 1, 1 << 20,
     0},
    {"gpus-per-node", CLI_INT, "N", "GPUs on each node: --gpus is N x --nodes", NULL, 0, 64, 0},
    {"output", CLI_STR, "PATTERN",
     "stdout to this file on the node (%j job, %a array index, %t rank, %N node, %x name)", NULL, 0,
     0, 'o'},
    {"error", CLI_STR, "PATTERN", "stderr to this file on the node (default: with -o, the same)",
     NULL, 0, 0, 0},
    {"export", CLI_STR, "ALL|NONE|K,K=V",
     "environment sent with the job (default: LANG, LANGUAGE, LC_*, TZ, TERM only; ALL: yours "
     "minus credentials; docs/cli.md)",
     NULL, 0, 0, 0},
    {"chdir", CLI_STR, "DIR", "working directory on the node (relative: to this directory)", NULL,
     0, 0, 'D'},
    {"open-mode", CLI_STR, "MODE", "-o/-e files: truncate (default) or append", "truncate|append",
     0, 0, 0},
    {"wait", CLI_BOOL, NULL, "wait for the job to end and exit with its exit code", NULL, 0, 0,
     'W'},
    {"force", CLI_BOOL, NULL,
     "submit even when the advisor says the chosen --gpu-type and --gpus cannot hold the model "
     "(a warning instead of a refusal)",
     NULL, 0, 0, 0},
    {"parsable", CLI_BOOL, NULL, "print only the job id (an array's first), as sbatch --parsable",
     NULL, 0, 0, 0},
    {"idempotency-key", CLI_STR, "KEY",
     "a repeat with the same KEY (and token) gets the first submit's ids, not new jobs (default: "
     "a random key, so a retry at another controller is not a second submit)",
     NULL, 0, 0, 0},
    {"nodelist", CLI_STR, "NODE,...", "only these nodes", NULL, 0, 0, 'w'},
    {"exclude", CLI_STR, "NODE,...", "never these nodes", NULL, 0, 0, 'x'},
    {"constraint", CLI_STR, "LABEL[=V]&...", "only nodes with these labels (agent --label)", NULL,
     0, 0, 'C'},
    {"exclusive", CLI_BOOL, NULL, "whole nodes: nothing else runs beside it", NULL, 0, 0, 0},
    {"keep-running-on-partition", CLI_BOOL, NULL,
     "keep running when its node loses the controller (not stopped by the node lease, not "
     "requeued when the node is lost)",
     NULL, 0, 0, 0},
    {"signal", CLI_STR, "SIG[@SECONDS]",
     "send SIG (USR1, TERM...) SECONDS (default 60) before the time limit", NULL, 0, 0, 0},
    {"cpus", CLI_F64, "N", "CPU limit in cores on each node (default: the per-GPU default)", NULL,
     0, 4096, 0},
    {"mem", CLI_STR, "SIZE", "memory limit on each node: 512M, 16G (bare number: MB)", NULL, 0, 0,
     0},
    {"cpus-per-task", CLI_F64, "N", "sbatch -c: --cpus is N x tasks per node", NULL, 0, 4096, 0},
    {"pids", CLI_INT, "N", "most processes and threads on each node (default 4096 per GPU)", NULL,
     16, 4194304, 0},
};

/* The value of a flag: the command line's, else a script directive's. */
static const cli_val *pick(const cli_args *a, const cli_args *d, const char *name)
{
    const cli_val *v = cr__cli_arg(a, name);
    if (!v->set && d) {
        const cli_val *dv = cr__cli_arg(d, name);
        if (dv->set) {
            return dv;
        }
    }
    return v;
}

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
static json_t *job_request(cli_ctx *ctx, const cli_args *a, const cli_args *d, const char *script)
{
    json_t *job = json_object();
    if (a->nrest == 0) {
        fprintf(ctx->err, "corral submit: no command given (corral submit [options] -- COMMAND "
                          "[ARGS...])\n");
        goto bad;
    }
    json_t *cmd = json_array();
    for (size_t i = 0; i < a->nrest; i++) {
        const char *w = a->rest[i];
        if (i == 0 && script) {
            /* the node runs its own copy; the name is for ps and logs */
            const char *slash = strrchr(w, '/');
            w = slash ? slash + 1 : w;
        }
        json_array_append_new(cmd, json_string(w));
    }
    json_object_set_new(job, "command", cmd);
    if (script) {
        json_object_set_new(job, "script", json_string(script));
    }
    put_int(job, "tasks_per_node", pick(a, d, "tasks-per-node"));
    put_str(job, "output", pick(a, d, "output"));
    put_str(job, "error", pick(a, d, "error"));
    if (pick(a, d, "requeue")->set) {
        json_object_set_new(job, "requeue", json_true());
    }
    const cli_val *gpn = pick(a, d, "gpus-per-node");
    const cli_val *nodes = pick(a, d, "nodes");
    int64_t nn = nodes->set && nodes->i > 0 ? nodes->i : 1;
    if (gpn->set && !pick(a, d, "gpus")->set) {
        json_object_set_new(job, "gpus", json_integer(gpn->i * nn));
        json_object_set_new(job, "nodes", json_integer(nn));
    }
    const cli_val *nt = pick(a, d, "ntasks");
    if (nt->set && !pick(a, d, "tasks-per-node")->set) {
        if (nt->i % nn != 0) {
            fprintf(ctx->err,
                    "corral submit: --ntasks %" PRId64 " does not divide over %" PRId64 " nodes\n",
                    nt->i, nn);
            goto bad;
        }
        json_object_set_new(job, "tasks_per_node", json_integer(nt->i / nn));
    }
    put_str(job, "open_mode", pick(a, d, "open-mode"));
    char here[4096];
    if (getcwd(here, sizeof here) && here[0] == '/' && !strstr(here, "/../")) {
        /* SLURM_SUBMIT_DIR; the working directory where the cluster says
         * this path is shared with its nodes (shared_submit_dir) */
        json_object_set_new(job, "submit_dir", json_string(here));
    }
    const cli_val *cd = pick(a, d, "chdir");
    if (cd->set) {
        if (cd->str[0] == '/') {
            json_object_set_new(job, "workdir", json_string(cd->str));
        } else {
            if (!getcwd(here, sizeof here)) {
                fprintf(ctx->err, "corral submit: --chdir: cannot read the current directory\n");
                goto bad;
            }
            char *abs = cr_asprintf("%s/%s", here, cd->str);
            json_object_set_new(job, "workdir", json_string(abs));
            free(abs);
        }
    }
    put_str(job, "name", pick(a, d, "name"));
    put_str(job, "tenant", pick(a, d, "tenant"));
    put_int(job, "gpus", pick(a, d, "gpus"));
    put_str(job, "gpu_type", pick(a, d, "gpu-type"));
    put_str(job, "partition", pick(a, d, "partition"));
    put_str(job, "mig_profile", pick(a, d, "mig"));
    put_int(job, "gpu_mem_gb", pick(a, d, "gpu-mem"));
    put_int(job, "nodes", pick(a, d, "nodes"));
    put_str(job, "kind", pick(a, d, "kind"));
    put_int(job, "priority", pick(a, d, "priority"));
    put_str(job, "workdir", pick(a, d, "workdir"));
    const cli_val *arr = pick(a, d, "array");
    if (arr->set) {
        int64_t copies;
        if (cr_parse_i64(arr->str, 1, 10000, &copies) == 0) {
            json_object_set_new(job, "array", json_integer(copies));
        } else if (strspn(arr->str, "0123456789") == strlen(arr->str)) {
            fprintf(ctx->err, "corral submit: --array: '%s' copies: at most 10000\n", arr->str);
            goto bad;
        } else {
            json_object_set_new(job, "array", json_string(arr->str));
        }
    }
    put_str(job, "dependency", pick(a, d, "dependency"));
    put_str(job, "nodelist", pick(a, d, "nodelist"));
    put_str(job, "exclude", pick(a, d, "exclude"));
    put_str(job, "constraint", pick(a, d, "constraint"));
    put_str(job, "warn_signal", pick(a, d, "signal"));
    if (pick(a, d, "exclusive")->set) {
        json_object_set_new(job, "exclusive", json_true());
    }
    if (pick(a, d, "keep-running-on-partition")->set) {
        json_object_set_new(job, "keep_running_on_partition", json_true());
    }
    const cli_val *beg = pick(a, d, "begin");
    if (beg->set) {
        int64_t at;
        if (cr__cli_parse_begin(beg->str, ctx->now_ns, &at) < 0) {
            fprintf(ctx->err,
                    "corral submit: --begin: '%s' is not a time (now+DURATION, HH:MM[:SS], "
                    "RFC 3339)\n",
                    beg->str);
            goto bad;
        }
        json_object_set_new(job, "begin_unix", json_integer(at / CR_NS_PER_SEC));
    }
    put_int(job, "max_retries", pick(a, d, "retries"));
    const cli_val *wd = pick(a, d, "workdir");
    if (wd->set && wd->str[0] != '/') {
        fprintf(ctx->err, "corral submit: --workdir: '%s' is not an absolute path\n", wd->str);
        goto bad;
    }
    if (a->rest[0][0] == '\0') {
        fprintf(ctx->err, "corral submit: the command name is empty\n");
        goto bad;
    }
    const cli_val *cpus = pick(a, d, "cpus");
    if (cpus->set) {
        if (cpus->f < 0.01) {
            fprintf(ctx->err, "corral submit: --cpus: want at least 0.01 cores\n");
            goto bad;
        }
        json_object_set_new(job, "cpus", json_real(cpus->f));
    }
    if (pick(a, d, "cpus-per-task")->set) {
        /* SLURM_CPUS_PER_TASK on the node */
        json_object_set_new(job, "cpus_per_task", json_real(pick(a, d, "cpus-per-task")->f));
    }
    if (!cpus->set && pick(a, d, "cpus-per-task")->set) {
        /* sbatch -c is per task; Corral's limit is per node */
        const cli_val *tpn = pick(a, d, "tasks-per-node");
        double n = tpn->set ? (double)tpn->i : 1;
        json_object_set_new(job, "cpus", json_real(pick(a, d, "cpus-per-task")->f * n));
    }
    const cli_val *mem = pick(a, d, "mem");
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
    if (cr__cli_arg(a, "pids")->set) {
        json_object_set_new(job, "pids", json_integer(cr__cli_arg(a, "pids")->i));
    }
    const cli_val *fr = cr__cli_arg(a, "gpu-fraction");
    if (fr->set) {
        long milli = (long)(fr->f * 1000 + 0.5);
        if (milli < 1 || milli > 999) {
            fprintf(ctx->err, "corral submit: --gpu-fraction: want more than 0 and less than 1 "
                              "(0.001..0.999); a whole GPU is --gpus 1\n");
            goto bad;
        }
        json_object_set_new(job, "gpu_milli", json_integer(milli));
    }
    const cli_val *sm = cr__cli_arg(a, "gpu-share-mem");
    if (sm->set) {
        int64_t bytes;
        if (cr_parse_bytes(sm->str, &bytes) != 0 || bytes < (1 << 20)) {
            fprintf(ctx->err,
                    "corral submit: --gpu-share-mem: '%s' is not a size of at least 1M (10G)\n",
                    sm->str);
            goto bad;
        }
        json_object_set_new(job, "gpu_mem_bytes", json_integer(bytes));
    }
    const cli_val *t = pick(a, d, "time");
    if (t->set && t->i > CLI_MAX_TIME_LIMIT_S * CR_NS_PER_SEC) {
        fprintf(ctx->err, "corral submit: --time: '%s' is over the limit of 366d\n", t->str);
        goto bad;
    }
    if (t->set) {
        json_object_set_new(job, "time_limit_s",
                            json_integer((t->i + CR_NS_PER_SEC - 1) / CR_NS_PER_SEC));
    }
    const cli_val *ck = pick(a, d, "checkpoint-interval");
    if (ck->set) {
        json_object_set_new(job, "checkpoint_interval_s",
                            json_integer((ck->i + CR_NS_PER_SEC - 1) / CR_NS_PER_SEC));
    }
    if (pick(a, d, "preemptible")->set) {
        json_object_set_new(job, "preemptible", json_true());
    }
    if (pick(a, d, "checkpointable")->set) {
        json_object_set_new(job, "checkpointable", json_true());
    }
    if (pick(a, d, "force")->set) {
        json_object_set_new(job, "force", json_true());
    }
    put_str(job, "checkpoint_signal", pick(a, d, "checkpoint-signal"));
    const cli_val *mig = pick(a, d, "mig");
    const cli_val *gt = pick(a, d, "gpu-type");
    if (mig->set && gt->set && (strcmp(gt->str, "auto") == 0)) {
        fprintf(ctx->err, "corral submit: --mig needs a concrete --gpu-type or none, not auto\n");
        goto bad;
    }
    json_t *ng = json_object_get(job, "gpus");
    if (json_is_integer(ng) && json_integer_value(ng) == 0 &&
        (json_integer_value(json_object_get(job, "nodes")) > 1 || mig->set ||
         (gt->set && strcmp(gt->str, "auto") != 0) || pick(a, d, "gpu-mem")->set)) {
        fprintf(ctx->err, "corral submit: --gpus 0 (a job without GPUs) goes with one node and no "
                          "--gpu-type, --mig or --gpu-mem\n");
        goto bad;
    }
    json_t *model = json_object();
    const cli_val *p = pick(a, d, "params");
    if (p->set) {
        json_object_set_new(model, "params", json_real(p->f));
    }
    put_str(model, "name", cr__cli_arg(a, "model"));
    put_str(model, "method", pick(a, d, "method"));
    const cli_val *tok = pick(a, d, "tokens");
    if (tok->set) {
        json_object_set_new(model, "tokens", json_real(tok->f));
    }
    put_str(model, "precision", pick(a, d, "precision"));
    put_str(model, "stack", pick(a, d, "stack"));
    put_str(model, "checkpointing", pick(a, d, "checkpointing"));
    put_int(model, "micro_batch", pick(a, d, "micro-batch"));
    put_int(model, "global_batch", pick(a, d, "global-batch"));
    put_int(model, "seq_len", pick(a, d, "seq-len"));
    if (json_object_size(model) > 0) {
        json_object_set_new(job, "model", model);
    } else {
        json_decref(model);
    }
    const cli_val *ex = pick(a, d, "export");
    json_t *e = json_object();
    json_object_set_new(job, "env", e);
    if (cr__cli_export_env(ctx, ex->set ? ex->str : NULL, e) < 0) {
        goto bad;
    }
    /* -e K=V: the directives' first, then the command line's (they win) */
    const cli_val *envs[2] = {d ? cr__cli_arg(d, "env") : NULL, cr__cli_arg(a, "env")};
    for (size_t q = 0; q < 2; q++) {
        const cli_val *env = envs[q];
        for (size_t i = 0; env && i < env->count; i++) {
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
    const cli_val *dat = cr__cli_arg(a, "data");
    if (dat->count) {
        json_t *dl = json_array();
        json_object_set_new(job, "data", dl);
        for (size_t i = 0; i < dat->count; i++) {
            json_array_append_new(dl, json_string(dat->list[i]));
        }
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
    /* a secret never travels as a plain variable too (--export ALL would
     * send --secret NAME's value from this environment) */
    const char *sk;
    json_t *sv;
    json_object_foreach(json_object_get(job, "secrets"), sk, sv)
    {
        json_object_del(e, sk);
    }
    if (json_object_size(e) == 0) {
        json_object_del(job, "env");
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
    cli_script script;
    memset(&script, 0, sizeof script);
    int code = 0;
    json_t *job = NULL;
    cr_client_res res;
    cr_client_res_init(&res);
    const char *syn = strcmp(ctx->cmd, "alloc") == 0 ? "[options] [-- COMMAND [ARGS...]]"
                                                     : "[options] [--] COMMAND [ARGS...]";
    bool run = strcmp(ctx->cmd, "run") == 0, alloc = strcmp(ctx->cmd, "alloc") == 0;
    /* sbatch's own options on the command line, as in #SBATCH lines */
    cli_sbatch_argv sb;
    memset(&sb, 0, sizeof sb);
    memset(&a, 0, sizeof a);
    if (!run && !alloc) {
        if (cr__cli_sbatch_argv(ctx, submit_opts, NOPTS(submit_opts), argc, argv, &sb) < 0) {
            code = CLI_EXIT_USAGE;
            goto out;
        }
        argc = (int)sb.argc_words;
        argv = sb.argv;
    }
    if (cr__cli_begin(ctx, &a, syn, submit_opts, NOPTS(submit_opts), true, argc, argv, &code)) {
        goto out;
    }
    char **local = NULL;
    size_t nlocal = 0;
    static char *hold_cmd[] = {"sleep", "infinity", NULL};
    if (alloc) {
        /* the job only holds the allocation; the command runs here */
        local = a.rest;
        nlocal = a.nrest;
        a.rest = hold_cmd;
        a.nrest = 2;
    }
    if ((run || alloc) && cr__cli_arg(&a, "array")->set) {
        fprintf(ctx->err, "corral %s: --array goes with submit only\n", ctx->cmd);
        code = CLI_EXIT_USAGE;
        goto out;
    }
    static char *wrap_cmd[] = {"wrap", NULL}, *stdin_cmd[] = {"sbatch", NULL};
    if (a.nrest == 0 && !run && !alloc && (sb.wrap || !isatty(STDIN_FILENO))) {
        /* sbatch --wrap=CMD, or the script on stdin (sbatch <<EOF): the
         * job's name, as sbatch's, "wrap" or "sbatch" */
        char *text = sb.wrap ? cr_asprintf("#!/bin/sh\n%s\n", sb.wrap) : cr__cli_script_stdin(ctx);
        if (text) {
            int sr = cr__cli_script_text(ctx, sb.wrap ? "--wrap" : "stdin", text, submit_opts,
                                         NOPTS(submit_opts), &script);
            if (sr < 0) {
                code = CLI_EXIT_USAGE;
                goto out;
            }
            a.rest = sb.wrap ? wrap_cmd : stdin_cmd;
            a.nrest = 1;
        }
    } else if (sb.wrap) {
        fprintf(ctx->err, "corral submit: --wrap and a command: give one\n");
        code = CLI_EXIT_USAGE;
        goto out;
    } else if (a.nrest > 0 && !alloc) {
        int sr = cr__cli_script_load(ctx, a.rest[0], submit_opts, NOPTS(submit_opts), &script);
        if (sr < 0) {
            code = CLI_EXIT_USAGE;
            goto out;
        }
    }
    job = job_request(ctx, &a, script.parsed ? &script.args : NULL, script.text);
    if (!job) {
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if (script.text && !run && !a.dashdash) {
        /* sbatch's form, `corral submit job.sh`: the body once, srun for
         * steps (docs/slurm.md); after "--" a script is a command, run as
         * every task as before */
        json_object_set_new(job, "batch", json_true());
    }
    if (alloc) {
        /* an allocation held for a shell: an idle-GPU policy ends it
         * rather than requeueing it (docs/scheduler.md) */
        json_object_set_new(job, "interactive", json_true());
    }
    if ((code = cr__cli_connect(ctx, &a)) != 0) {
        goto out;
    }
    /* Exactly once across a failover: the client may repeat the POST at
     * another controller after a lost answer, and the key makes the repeat
     * return the first answer (docs/operations.md, "High availability"). */
    char idem[129];
    const cli_val *ik = pick(&a, script.parsed ? &script.args : NULL, "idempotency-key");
    if (ik->set) {
        snprintf(idem, sizeof idem, "%s", ik->str);
        if (strlen(ik->str) >= sizeof idem || strlen(ik->str) == 0 || strpbrk(idem, "\r\n")) {
            fprintf(ctx->err, "corral %s: --idempotency-key: 1..128 printable characters\n",
                    ctx->cmd);
            code = CLI_EXIT_USAGE;
            goto out;
        }
    } else {
        uint8_t rnd[16];
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
            fprintf(ctx->err, "corral %s: no random bytes for an idempotency key\n", ctx->cmd);
            code = CLI_EXIT_USAGE;
            goto out;
        }
        strcpy(idem, "cli-");
        for (size_t i = 0; i < sizeof rnd; i++) {
            snprintf(idem + 4 + 2 * i, 3, "%02x", rnd[i]);
        }
    }
    int rc = cr_client_request_idem(ctx->client, "POST", "/v1/jobs", job, idem, 0, &res);
    if (rc < 0) {
        code = cr__cli_fail(ctx, rc, &res);
        goto out;
    }
    if (run || alloc) {
        int64_t id =
            (int64_t)json_integer_value(json_array_get(json_object_get(res.body, "ids"), 0));
        fflush(ctx->out);
        code = run ? cr__cli_run_follow(ctx, id) : cr__cli_alloc_session(ctx, id, local, nlocal);
        goto out;
    }
    const char *note = json_string_value(json_object_get(res.body, "note"));
    if (note && !ctx->json) {
        fprintf(ctx->err, "corral %s: note: %s\n", ctx->cmd, note);
    }
    const char *warn = json_string_value(json_object_get(res.body, "warning"));
    if (warn && !ctx->json) {
        fprintf(ctx->err, "corral %s: warning: %s\n", ctx->cmd, warn);
    }
    if (ctx->json) {
        cr__cli_print_json(ctx, res.body);
    } else if (pick(&a, script.parsed ? &script.args : NULL, "parsable")->set) {
        fprintf(ctx->out, "%" JSON_INTEGER_FORMAT "\n",
                json_integer_value(json_array_get(json_object_get(res.body, "ids"), 0)));
    } else {
        print_ids(ctx, json_object_get(res.body, "ids"));
    }
    if (pick(&a, script.parsed ? &script.args : NULL, "wait")->set) {
        fflush(ctx->out);
        code = cr__cli_wait_jobs(ctx, json_object_get(res.body, "ids"));
    }
out:
    cr__cli_script_fini(&script);
    json_decref(job);
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    cr__cli_sbatch_argv_fini(&sb); /* after a: its words point into sb */
    return code;
}

/* --- jobs -------------------------------------------------------------------- */

static const cli_opt jobs_opts[] = {
    {"state", CLI_STR, "STATE", "only jobs in this state", JOB_STATES, 0, 0, 's'},
    {"tenant", CLI_STR, "T", "only this tenant's jobs", NULL, 0, 0, 0},
    {"all", CLI_BOOL, NULL, "include finished jobs (default: pending, held, running)", NULL, 0, 0,
     'a'},
    {"limit", CLI_INT, "N", "at most N jobs, newest (default 100, at most 1000)", NULL, 1, 1000, 0},
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
    bool only_active = !st->set && !cr__cli_arg(&a, "all")->set;
    int rc = cr_client_jobs_list(ctx->client,
                                 st->set       ? st->str
                                 : only_active ? "active"
                                               : NULL,
                                 cr__cli_arg(&a, "tenant")->str, lim->set ? lim->i : 0, &res);
    if (rc < 0) {
        code = cr__cli_fail(ctx, rc, &res);
        goto out;
    }
    if (ctx->json) {
        cr__cli_print_json(ctx, res.body);
    } else {
        cr__cli_jobs_table(ctx, json_object_get(res.body, "items"), only_active, ctx->out);
        /* Never a silently short list: say how many there are. */
        json_int_t total = json_integer_value(json_object_get(res.body, "total"));
        size_t shown = json_array_size(json_object_get(res.body, "items"));
        if (total > (json_int_t)shown) {
            fprintf(ctx->err, "(the newest %zu of %lld jobs; --limit N shows up to 1000)\n", shown,
                    (long long)total);
        }
    }
out:
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}

/* --- show -------------------------------------------------------------------- */

static void show_job(cli_ctx *ctx, const json_t *job, bool with_env)
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
    /* The advisor's plan, as the job's environment has it (CORRAL_TP, ...). */
    const json_t *plan = json_object_get(job, "plan");
    if (json_is_object(plan)) {
        fprintf(ctx->out, "  %-15s %s (tp %lld, pp %lld, dp %lld, ep %lld",
                "Plan:", jstr(plan, "text") ? jstr(plan, "text") : "",
                (long long)json_integer_value(json_object_get(plan, "tp")),
                (long long)json_integer_value(json_object_get(plan, "pp")),
                (long long)json_integer_value(json_object_get(plan, "dp")),
                (long long)json_integer_value(json_object_get(plan, "ep")));
        if (json_object_get(plan, "micro_batch")) {
            fprintf(ctx->out, ", micro-batch %lld, global batch %lld",
                    (long long)json_integer_value(json_object_get(plan, "micro_batch")),
                    (long long)json_integer_value(json_object_get(plan, "global_batch")));
        }
        fputs(")\n", ctx->out);
    }
    /* The environment's names only (issue 24: values are asked for with
     * --env, and come with credential-looking ones redacted); one
     * NAME=value a line then. An older controller sends "env" whole: its
     * names only too. */
    const json_t *names = json_object_get(job, "env_names");
    const json_t *env = json_object_get(job, "env");
    if (with_env && json_is_object(env)) {
        if (json_object_size(env)) {
            fputs("  Env:\n", ctx->out);
        } else {
            fprintf(ctx->out, "  %-15s (none)\n", "Env:");
        }
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)env, k, v)
        {
            char kb[300];
            fprintf(ctx->out, "    %s=%s\n", cr__cli_escape(k, kb, sizeof kb),
                    cr__cli_json_text(v, buf, sizeof buf));
        }
    } else if (json_array_size(names) || json_object_size(env)) {
        /* names wrapped at 100 columns */
        json_t *list = json_array();
        if (json_is_array(names)) {
            json_array_extend(list, (json_t *)names);
        } else {
            const char *k;
            json_t *v;
            json_object_foreach((json_t *)env, k, v)
            {
                json_array_append_new(list, json_string(k));
            }
        }
        fprintf(ctx->out, "  %-15s", "Env:");
        size_t col = 17, i;
        json_t *nv;
        json_array_foreach(list, i, nv)
        {
            char kb[300];
            const char *n =
                cr__cli_escape(json_is_string(nv) ? json_string_value(nv) : "?", kb, sizeof kb);
            if (col > 17 && col + 1 + strlen(n) > 100) {
                fprintf(ctx->out, "\n  %-15s", "");
                col = 17;
            }
            fprintf(ctx->out, " %s", n);
            col += 1 + strlen(n);
        }
        json_decref(list);
        fputc('\n', ctx->out);
        if (!with_env) {
            fprintf(ctx->out, "  %-15s %s\n", "", "(names only; values: corral show --env)");
        }
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

static const cli_opt show_opts[] = {
    {"env", CLI_BOOL, NULL,
     "the job's environment with its values (credential-looking ones redacted); default: names "
     "only",
     NULL, 0, 0, 0},
};

/* Keeps the last TAIL_KEEP bytes a log read delivers. */
#define TAIL_KEEP 8192
typedef struct tail_buf {
    cr_buf b;
    uint64_t got; /* bytes the last call delivered */
} tail_buf;

static int keep_tail(void *ud, const char *data, size_t len)
{
    tail_buf *t = ud;
    t->got += len;
    if (len >= TAIL_KEEP) {
        cr_buf_reset(&t->b);
        cr_buf_append(&t->b, data + len - TAIL_KEEP, TAIL_KEEP);
        return 0;
    }
    cr_buf_append(&t->b, data, len);
    if (t->b.len > 2 * TAIL_KEEP) {
        memmove(t->b.data, t->b.data + t->b.len - TAIL_KEEP, TAIL_KEEP);
        t->b.len = TAIL_KEEP;
        t->b.data[t->b.len] = '\0';
    }
    return 0;
}

/* The end of one task's stderr (the agent answers up to 1 MiB a call, so
 * the reads go on from each answer's end, at most 64 of them). */
static void stderr_end(cli_ctx *ctx, int64_t id, int64_t rank, tail_buf *t)
{
    uint64_t off = 0;
    for (int i = 0; i < 64; i++) {
        cr_client_res res;
        cr_client_res_init(&res);
        t->got = 0;
        int rc = cr_client_job_logs_rank(ctx->client, id, "stderr", off, rank, false, keep_tail, t,
                                         &res);
        cr_client_res_fini(&res);
        if (rc < 0 || t->got == 0) {
            break;
        }
        off += t->got;
    }
}

/*
 * A failed job's stderr, last lines (show): of the first task with any on
 * the node its end reason names ("... on node N"), else of rank 0. Prints
 * nothing when there is none or the logs cannot be read.
 */
static void show_stderr_tail(cli_ctx *ctx, const json_t *job, int64_t id)
{
    const char *nl = jstr(job, "run_nodes"), *why = jstr(job, "reason");
    int64_t tpn = json_integer_value(json_object_get(job, "tasks_per_node_run"));
    tpn = tpn > 0 ? tpn : 1;
    int64_t first = 0;
    const char *on = why ? strstr(why, " on node ") : NULL;
    if (on && nl) {
        on += strlen(" on node ");
        size_t onl = strcspn(on, " (:,");
        int64_t k = 0;
        for (const char *p = nl; *p; k++) {
            size_t l = strcspn(p, ",");
            if (l == onl && strncmp(p, on, l) == 0) {
                first = k * tpn;
                break;
            }
            p += l + (p[l] == ',');
        }
    }
    tail_buf t;
    cr_buf_init(&t.b);
    int64_t rank = first;
    for (; rank < first + (tpn < 16 ? tpn : 16); rank++) {
        cr_buf_reset(&t.b);
        stderr_end(ctx, id, rank, &t);
        if (t.b.len > 0) {
            break;
        }
    }
    if (t.b.len > 0) {
        /* the last 10 lines */
        const char *s = t.b.data, *p = s + t.b.len;
        if (p > s && p[-1] == '\n') {
            p--;
        }
        const char *end = p;
        int lines = 0;
        while (p > s && lines < 10) {
            p--;
            if (*p == '\n' && ++lines == 10) {
                p++;
                break;
            }
        }
        fprintf(ctx->out,
                "Stderr (rank %" PRId64 ", last lines; corral logs --stderr --rank %" PRId64
                " %" PRId64 "):\n",
                rank, rank, id);
        while (p < end) {
            size_t l = strcspn(p, "\n");
            if (p + l > end) {
                l = (size_t)(end - p);
            }
            fprintf(ctx->out, "  %.*s\n", (int)l, p);
            p += l + 1;
        }
    }
    cr_buf_fini(&t.b);
}

int cr__cli_show(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    cr_client_res res;
    cr_client_res_init(&res);
    if (cr__cli_begin(ctx, &a, "[--env] JOB", show_opts, NOPTS(show_opts), false, argc, argv,
                      &code)) {
        goto out;
    }
    bool with_env = cr__cli_arg(&a, "env")->set;
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
    char path[80];
    snprintf(path, sizeof path, "/v1/jobs/%lld%s", (long long)id, with_env ? "?env=1" : "");
    int rc = cr_client_request(ctx->client, "GET", path, NULL, 0, &res);
    if (rc < 0) {
        code = cr__cli_fail(ctx, rc, &res);
        goto out;
    }
    if (ctx->json) {
        cr__cli_print_json(ctx, res.body);
    } else {
        show_job(ctx, res.body, with_env);
        json_t *steps = json_object_get(res.body, "steps");
        if (json_array_size(steps) > 0) {
            /* a batch job's srun steps (docs/slurm.md) */
            fprintf(ctx->out, "Steps:\n  %-10s %-10s %5s  %-20s %4s  %s\n", "STEP", "STATE",
                    "TASKS", "NODES", "EXIT", "COMMAND");
            for (size_t i = 0; i < json_array_size(steps); i++) {
                json_t *s = json_array_get(steps, i);
                char sid[48], ex[16] = "-";
                snprintf(sid, sizeof sid, "%lld.%lld", (long long)id,
                         (long long)json_integer_value(json_object_get(s, "step")));
                if (json_is_integer(json_object_get(s, "exit_code"))) {
                    snprintf(ex, sizeof ex, "%lld",
                             (long long)json_integer_value(json_object_get(s, "exit_code")));
                }
                const char *sst = jstr(s, "state"), *nd = jstr(s, "nodes"), *nm = jstr(s, "name");
                fprintf(ctx->out, "  %-10s %-10s %5lld  %-20s %4s  %s\n", sid, sst ? sst : "-",
                        (long long)json_integer_value(json_object_get(s, "ntasks")), nd ? nd : "",
                        ex, nm ? nm : "");
            }
        }
        const char *st = jstr(res.body, "state");
        if (st && strcmp(st, "failed") == 0) {
            show_stderr_tail(ctx, res.body, id);
        }
    }
out:
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}

/* --- cancel, hold, release, requeue -------------------------------------------- */

static const cli_opt action_opts[] = {
    {"tenant", CLI_STR, "T", "every active job of this tenant (scancel -A)", NULL, 0, 0, 0},
    {"name", CLI_STR, "NAME", "every active job with this name (scancel -n)", NULL, 0, 0, 'n'},
    {"state", CLI_STR, "STATE", "every job in this state (scancel -t)",
     "pending|held|running|completing", 0, 0, 's'},
    {"signal", CLI_STR, "SIG", "cancel: send SIG (USR1, TERM...) to the tasks instead",
     "USR1|USR2|TERM|INT|HUP|QUIT|ALRM|CONT|KILL|WINCH", 0, 0, 0},
};

/* "12" or "12_3" (one task of array 12). */
static bool job_ref_ok(const char *s)
{
    size_t n = strspn(s, "0123456789");
    if (n == 0 || n > 18 || s[0] == '0') {
        return false;
    }
    if (s[n] == '\0') {
        return true;
    }
    size_t m = strspn(s + n + 1, "0123456789");
    return s[n] == '_' && m > 0 && m <= 7 && s[n + 1 + m] == '\0';
}

/* The ids of the active jobs matching the filters (appended to refs). */
static int filter_refs(cli_ctx *ctx, const cli_args *a, char ***refs, size_t *n)
{
    const cli_val *ten = cr__cli_arg(a, "tenant"), *nm = cr__cli_arg(a, "name");
    const cli_val *st = cr__cli_arg(a, "state");
    cr_client_res res;
    cr_client_res_init(&res);
    int rc = cr_client_jobs_list(ctx->client, st->set ? st->str : "active",
                                 ten->set ? ten->str : NULL, 0, &res);
    if (rc < 0) {
        int code = cr__cli_fail(ctx, rc, &res);
        cr_client_res_fini(&res);
        return code;
    }
    size_t i;
    json_t *job;
    json_array_foreach(json_object_get(res.body, "items"), i, job)
    {
        const char *name = jstr(job, "name");
        if (nm->set && (!name || strcmp(name, nm->str) != 0)) {
            continue;
        }
        *refs = cr_reallocarray(*refs, *n + 1, sizeof **refs);
        (*refs)[(*n)++] =
            cr_asprintf("%" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(job, "id")));
    }
    cr_client_res_fini(&res);
    return 0;
}

int cr__cli_job_action(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    char **refs = NULL;
    size_t nrefs = 0;
    json_t *all = json_array();
    cr_client_res res;
    cr_client_res_init(&res);
    if (cr__cli_begin(ctx, &a, "JOB... | --name N | --tenant T | --state S", action_opts,
                      NOPTS(action_opts), false, argc, argv, &code)) {
        goto out;
    }
    bool filtered = cr__cli_arg(&a, "tenant")->set || cr__cli_arg(&a, "name")->set ||
                    cr__cli_arg(&a, "state")->set;
    const cli_val *sig = cr__cli_arg(&a, "signal");
    if (sig->set && strcmp(ctx->cmd, "cancel") != 0) {
        fprintf(ctx->err, "corral %s: --signal goes with cancel only\n", ctx->cmd);
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if (a.npos == 0 && !filtered) {
        fprintf(ctx->err,
                "corral %s: expected at least one job id, or --name, --tenant or --state "
                "(corral %s JOB...)\n",
                ctx->cmd, ctx->cmd);
        code = CLI_EXIT_USAGE;
        goto out;
    }
    for (size_t i = 0; i < a.npos; i++) {
        if (!job_ref_ok(a.pos[i])) {
            fprintf(ctx->err,
                    "corral %s: '%s' is not a job id (a positive integer, or ARRAY_INDEX for "
                    "one task of an array)\n",
                    ctx->cmd, a.pos[i]);
            code = CLI_EXIT_USAGE;
            goto out;
        }
        refs = cr_reallocarray(refs, nrefs + 1, sizeof *refs);
        refs[nrefs++] = cr_strdup(a.pos[i]);
    }
    if ((code = cr__cli_connect(ctx, &a)) != 0) {
        goto out;
    }
    if (filtered && a.npos == 0 && (code = filter_refs(ctx, &a, &refs, &nrefs)) != 0) {
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
    if (sig->set) {
        done = "Signalled";
    }
    int64_t cov_lo = 0, cov_hi = 0; /* ids an array action already covered */
    for (size_t i = 0; i < nrefs; i++) {
        /* A plain id that is an array's first: the whole array, as scancel
         * does; ID_INDEX: one task. (Filters list every task already.) */
        bool whole = !filtered && !strchr(refs[i], '_');
        int64_t num = 0;
        if (whole && cr_parse_i64(refs[i], 1, INT64_MAX, &num) == 0 && num > cov_lo &&
            num <= cov_hi) {
            if (!ctx->json) {
                fprintf(ctx->out, "%s job %s\n", done, refs[i]); /* with its array */
            }
            continue;
        }
        int rc = sig->set ? cr_client_job_signal_ref(ctx->client, refs[i], sig->str, whole, &res)
                          : cr_client_job_action_ref(ctx->client, refs[i], ctx->cmd, whole, &res);
        json_int_t last = rc < 0 ? 0 : json_integer_value(json_object_get(res.body, "array_last"));
        if (last > 0) {
            cov_lo = num;
            cov_hi = (int64_t)last;
        }
        if (rc < 0) {
            int c = cr__cli_fail(ctx, rc, &res);
            if (c > code) {
                code = c;
            }
            if (c == CLI_EXIT_UNREACH) {
                break;
            }
        } else if (!ctx->json) {
            fprintf(ctx->out, "%s job %s\n", done, refs[i]);
        }
        if (ctx->json) {
            json_t *one = json_pack("{s:s,s:i}", "id", refs[i], "status", (int)res.status);
            json_object_set(one, rc < 0 ? "error" : "answer", res.body ? res.body : json_null());
            json_array_append_new(all, one);
        }
    }
    if (ctx->json) {
        cr__cli_print_json(ctx, all);
    }
out:
    json_decref(all);
    for (size_t i = 0; i < nrefs; i++) {
        free(refs[i]);
    }
    free(refs);
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}

/* --- logs ---------------------------------------------------------------------- */

static const cli_opt logs_opts[] = {
    {"follow", CLI_BOOL, NULL, "keep printing new output until the job ends", NULL, 0, 0, 'f'},
    {"stderr", CLI_BOOL, NULL, "the job's stderr instead of its stdout", NULL, 0, 0, 0},
    {"offset", CLI_INT, "BYTES", "start at this byte offset", NULL, 0, INT64_MAX, 0},
    {"rank", CLI_INT, "R", "the output of task R (default 0: the first)", NULL, 0, 1 << 20, 0},
    {"all", CLI_BOOL, NULL, "every task's output, each line prefixed 'R: '", NULL, 0, 0, 0},
};

/* Collects one task's log for --all. */
static int collect_log(void *ud, const char *data, size_t len)
{
    cr_buf_append(ud, data, len);
    return 0;
}

/* --all: every rank of the job's last run, lines prefixed "R: " (srun -l). */
static int all_logs(cli_ctx *ctx, int64_t id, const char *stream, cr_client_res *res)
{
    int rc = cr_client_job_get(ctx->client, id, res);
    if (rc < 0) {
        return cr__cli_fail(ctx, rc, res);
    }
    const char *nl = jstr(res->body, "run_nodes");
    int64_t tpn = json_integer_value(json_object_get(res->body, "tasks_per_node_run"));
    int64_t nodes = nl && *nl ? 1 : 0;
    for (const char *p = nl ? nl : ""; *p; p++) {
        nodes += *p == ',';
    }
    int64_t ntasks = nodes * (tpn > 0 ? tpn : 1);
    if (ntasks == 0) {
        fprintf(ctx->err, "corral logs: job %" PRId64 " has not run yet: no logs\n", id);
        return CLI_EXIT_SERVER;
    }
    int code = 0;
    for (int64_t r = 0; r < ntasks; r++) {
        cr_buf b;
        cr_buf_init(&b);
        rc = cr_client_job_logs_rank(ctx->client, id, stream, 0, r, false, collect_log, &b, res);
        if (rc < 0) {
            code = cr__cli_fail(ctx, rc, res);
            cr_buf_fini(&b);
            if (code == CLI_EXIT_UNREACH) {
                break;
            }
            continue;
        }
        const char *p = b.data, *end = b.data + b.len;
        while (p && p < end) {
            const char *eol = memchr(p, '\n', (size_t)(end - p));
            size_t len = eol ? (size_t)(eol - p) : (size_t)(end - p);
            fprintf(ctx->out, "%" PRId64 ": %.*s\n", r, (int)len, p);
            p += len + 1;
        }
        cr_buf_fini(&b);
    }
    return code;
}

typedef struct log_sink {
    FILE *f;        /* where the bytes go */
    uint64_t bytes; /* bytes written by the last call */
    bool closed;    /* the output went away (e.g. piped to head) */
    cr_buf *copy;   /* NULL, or a copy of what was written */
} log_sink;

static int write_out(void *ud, const char *data, size_t len)
{
    log_sink *s = ud;
    if (fwrite(data, 1, len, s->f) != len || fflush(s->f) != 0) {
        s->closed = true;
        return 1;
    }
    s->bytes += len;
    if (s->copy) {
        cr_buf_append(s->copy, data, len);
    }
    return 0;
}

/*
 * After a failed job's stdout: its stderr on stderr, under a line saying
 * so (sbatch's default puts both in one file; a failed rank's traceback
 * was only under --stderr). Not when the stderr is the stdout just printed
 * (no -e: one file holds both).
 */
static void failed_stderr(cli_ctx *ctx, int64_t id, int64_t rank, const cr_buf *out)
{
    cr_client_res job;
    cr_client_res_init(&job);
    if (cr_client_job_get(ctx->client, id, &job) < 0 || !jstr(job.body, "state") ||
        strcmp(jstr(job.body, "state"), "failed") != 0) {
        cr_client_res_fini(&job);
        return;
    }
    cr_client_res_fini(&job);
    cr_buf err;
    cr_buf_init(&err);
    cr_client_res res;
    cr_client_res_init(&res);
    int rc =
        cr_client_job_logs_rank(ctx->client, id, "stderr", 0, rank, false, collect_log, &err, &res);
    cr_client_res_fini(&res);
    bool same = err.len == out->len && (err.len == 0 || memcmp(err.data, out->data, err.len) == 0);
    if (rc == 0 && err.len > 0 && !same) {
        fflush(ctx->out);
        fprintf(ctx->err, "corral logs: job %" PRId64 " failed; its stderr:\n", id);
        fwrite(err.data, 1, err.len, ctx->err);
        if (err.data[err.len - 1] != '\n') {
            fputc('\n', ctx->err);
        }
    }
    cr_buf_fini(&err);
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
static int follow_logs(cli_ctx *ctx, int64_t id, const char *stream, uint64_t offset, int64_t rank,
                       cr_client_res *res)
{
    log_sink sink = {.f = ctx->out};
    cr_client_res job;
    cr_client_res_init(&job);
    int code = 0;
    for (;;) {
        sink.bytes = 0;
        int rc = cr_client_job_logs_rank(ctx->client, id, stream, offset, rank, true, write_out,
                                         &sink, res);
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
    if (cr__cli_begin(ctx, &a, "JOB [-f|--follow] [--stderr] [--offset BYTES] [--rank R|--all]",
                      logs_opts, NOPTS(logs_opts), false, argc, argv, &code)) {
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
    const cli_val *rank = cr__cli_arg(&a, "rank");
    if (cr__cli_arg(&a, "all")->set) {
        if (rank->set || off->set || cr__cli_arg(&a, "follow")->set) {
            fprintf(ctx->err, "corral logs: --all goes with neither --rank, --offset nor -f\n");
            code = CLI_EXIT_USAGE;
            goto out;
        }
        code = all_logs(ctx, id, stream, &res);
        goto out;
    }
    if (cr__cli_arg(&a, "follow")->set) {
        code = follow_logs(ctx, id, stream, offset, rank->set ? rank->i : -1, &res);
        goto out;
    }
    cr_buf copy;
    cr_buf_init(&copy);
    bool merge = !cr__cli_arg(&a, "stderr")->set && !off->set;
    log_sink sink = {.f = ctx->out, .copy = merge ? &copy : NULL};
    int rc = cr_client_job_logs_rank(ctx->client, id, stream, offset, rank->set ? rank->i : -1,
                                     false, write_out, &sink, &res);
    if (rc < 0) {
        code = cr__cli_fail(ctx, rc, &res);
    } else if (merge && !sink.closed) {
        failed_stderr(ctx, id, rank->set ? rank->i : -1, &copy);
    }
    cr_buf_fini(&copy);
out:
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}
