/*
 * ctl_jobspec.c - a job from a request or from a stored row.
 *
 * A request (POST /v1/jobs, a service's replica template) is validated
 * member by member into a fresh job with its defaults filled in: 400 names
 * the member, nothing is kept. A stored row is read back through the same
 * parser (what the API accepted is what the store gives back), with the
 * read-only members the controller adds; an array task's row names the
 * array's shared spec by the first task's id (spec_ref).
 *
 * Calls nothing that changes state: used by the submit route (ctl_jobs.c),
 * the services (ctl_services.c), start-up and ctl_job_fetch (ctl_state.c).
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_envname.h"
#include "cr_arch.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const job_members[] = {
    "name",
    "tenant",
    "command",
    "gpus",
    "gpu_type",
    "mig_profile",
    "gpu_mem_gb",
    "nodes",
    "kind",
    "model",
    "priority",
    "time_limit_s",
    "preemptible",
    "checkpoint_interval_s",
    "max_retries",
    "env",
    "workdir",
    "array",
    "tasks_per_node",
    "script",
    "output",
    "error",
    "requeue",
    "dependency",
    "begin_unix",
    "nodelist",
    "exclude",
    "constraint",
    "exclusive",
    "warn_signal",
    "checkpointable",
    "checkpoint_signal",
    "cpus",
    "mem_bytes",
    "secrets",
    "gpu_milli",
    "gpu_mem_bytes",
    "image",
    "image_archive",
    "mounts",
    "entrypoint",
    "pids",
    /* the node lease leaves it running (docs/operations.md, "Node lease") */
    "keep_running_on_partition",
    "interactive", /* corral alloc: idle reclaim cancels it (ctl_nodes.c) */
    "partition",   /* ctl_part.c */
    /* sbatch: the directory it was submitted from (SLURM_SUBMIT_DIR; the
     * working directory where the cluster says shared_submit_dir), and
     * --open-mode for -o/-e (docs/cli.md, "The submit directory") */
    "submit_dir",
    "open_mode",
    "cpus_per_task", /* sbatch -c: SLURM_CPUS_PER_TASK (the limit is "cpus") */
    "batch",         /* with script: batch semantics (ctl_batch_is_batch, docs/slurm.md) */
    "data",          /* datasets staged to the node (ctl_data.c, docs/data.md) */
    "force",         /* submit even when the chosen type cannot hold the model (not stored) */
    NULL,
};
static const char *const model_members[] = {
    "params",        "method",      "tokens",       "precision", "name", "stack",
    "checkpointing", "micro_batch", "global_batch", "seq_len",   NULL};
/* The advisor's knobs (docs/model.md "Software stacks"). */
static const char *const stacks[] = {"megatron", "fsdp",   "deepspeed", "hf",
                                     "vllm",     "trtllm", "sglang",    NULL};
static const char *const ckpts[] = {"none", "selective", "full", NULL};
static const char *const methods[] = {"full", "lora", "qlora", NULL};
static const char *const precisions[] = {"bf16", "fp16", "fp8", "int8", "int4", "tf32",
                                         "fp32", "fp64", "fp4", "fp6",  NULL};
static const char *const kinds[] = {"pretrain", "finetune", "inference", "visual",
                                    "hpc",      "batch",    NULL};

/* A ".." component in path ("/a/../b", "/a/..", "../x"). */
static bool has_dotdot(const char *path)
{
    size_t n = strlen(path);
    return strncmp(path, "../", 3) == 0 || strstr(path, "/../") || strcmp(path, "..") == 0 ||
           (n >= 3 && strcmp(path + n - 3, "/..") == 0);
}

/*
 * Validate a job request (or the request part of a stored doc, with
 * from_doc) into a fresh job with defaults filled in; spec gets the
 * normalised request members. Returns 0 or the error in err.
 */
static int job_parse(const json_t *body, bool from_doc, ctl_job **out, int64_t *array,
                     int32_t **indexes, cr_json_err *err)
{
    int rc = 0;
    int32_t *idx = NULL;
    ctl_job *j = cr_calloc(1, sizeof *j);
    if (!from_doc && (rc = cr_json_only(body, "", job_members, err)) != 0) {
        goto out;
    }
    /* A request's null is not taken for "the default" (cr_json's reading):
     * "gpus": null is a mistake, not one GPU. Stored docs never hold one. */
    const char *nk;
    json_t *nv;
    json_object_foreach((json_t *)body, nk, nv)
    {
        if (!from_doc && json_is_null(nv)) {
            rc = cr_json_fail(err, CR_EINVAL, nk,
                              "field '%s': must not be null (leave it out for the default)", nk);
            goto out;
        }
    }
    const char *name = "job", *tenant = "", *gpu_type = "auto", *mig = "", *kind = "batch";
    const char *workdir = "", *script = "", *outp = "", *errp = "", *dep = "";
    const char *subdir = "", *omode = "";
    int64_t gpus = 1, nodes = 0, prio = 0, tl = 0, ckpt = 0, retries = 0, arr = 1, tpn = 0;
    int64_t begin = 0, mem_bytes = 0, pids = 0;
    int throttle = 0;
    int64_t gmilli = 0, gmem = 0;
    double mem = 0, cpus = 0, cpt = 0;
    bool preemptible = false, requeue = false, batch = false, force = false;
    json_t *cmd = NULL, *env = NULL, *model = NULL, *secrets = NULL;
    if ((rc = cr_json_str(body, "", "name", false, 128, &name, err)) ||
        (rc = cr_json_str(body, "", "tenant", false, CTL_NAME_MAX - 1, &tenant, err)) ||
        (rc = cr_json_arr(body, "", "command", true, 4096, &cmd, err)) ||
        (rc = cr_json_int(body, "", "gpus", false, 0, 4096, &gpus, err)) ||
        (rc = cr_json_str(body, "", "gpu_type", false, CTL_NAME_MAX - 1, &gpu_type, err)) ||
        (rc = cr_json_str(body, "", "mig_profile", false, 31, &mig, err)) ||
        (rc = cr_json_num(body, "", "gpu_mem_gb", false, 0, 1e6, &mem, err)) ||
        (rc = cr_json_int(body, "", "nodes", false, 0, 1024, &nodes, err)) ||
        (rc = cr_json_str(body, "", "kind", false, 16, &kind, err)) ||
        (rc = cr_json_obj(body, "", "model", false, &model, err)) ||
        (rc = cr_json_int(body, "", "priority", false, -1000000, 1000000, &prio, err)) ||
        (rc = cr_json_int(body, "", "time_limit_s", false, 0, 366LL * 86400, &tl, err)) ||
        (rc = cr_json_bool(body, "", "preemptible", false, &preemptible, err)) ||
        (rc =
             cr_json_int(body, "", "checkpoint_interval_s", false, 0, 366LL * 86400, &ckpt, err)) ||
        (rc = cr_json_int(body, "", "max_retries", false, 0, 100, &retries, err)) ||
        (rc = cr_json_obj(body, "", "env", false, &env, err)) ||
        (rc = cr_json_str(body, "", "workdir", false, 4096, &workdir, err)) ||
        (rc = cr_json_str(body, "", "submit_dir", false, 4096, &subdir, err)) ||
        (rc = cr_json_str(body, "", "open_mode", false, 16, &omode, err)) ||
        (rc = cr_json_num(body, "", "cpus_per_task", false, 0, 4096, &cpt, err)) ||
        (!json_is_string(json_object_get(body, "array")) &&
         (rc = cr_json_int(body, "", "array", false, 1, MAX_ARRAY_TASKS, &arr, err))) ||
        (rc = cr_json_str(body, "", "dependency", false, 1023, &dep, err)) ||
        (rc = cr_json_int(body, "", "begin_unix", false, 0, INT64_C(1) << 40, &begin, err)) ||
        (rc = cr_json_int(body, "", "tasks_per_node", false, 0, CTL_MAX_TASKS_PER_NODE, &tpn,
                          err)) ||
        (rc = cr_json_str(body, "", "script", false, CTL_MAX_SCRIPT_BYTES, &script, err)) ||
        (rc = cr_json_str(body, "", "output", false, 1024, &outp, err)) ||
        (rc = cr_json_str(body, "", "error", false, 1024, &errp, err)) ||
        (rc = cr_json_bool(body, "", "requeue", false, &requeue, err)) ||
        (rc = cr_json_bool(body, "", "batch", false, &batch, err)) ||
        (rc = cr_json_bool(body, "", "force", false, &force, err)) ||

        (rc = cr_json_num(body, "", "cpus", false, 0, 4096, &cpus, err)) ||
        (rc = cr_json_int(body, "", "mem_bytes", false, 0, INT64_C(1) << 62, &mem_bytes, err)) ||
        (rc = cr_json_int(body, "", "pids", false, 16, 4194304, &pids, err)) ||
        (rc = cr_json_int(body, "", "gpu_milli", false, 0, 999, &gmilli, err)) ||
        (rc = cr_json_int(body, "", "gpu_mem_bytes", false, 0, INT64_C(1) << 50, &gmem, err)) ||
        (!from_doc && (rc = cr_json_obj(body, "", "secrets", false, &secrets, err)))) {
        goto out;
    }
    if (json_object_get(body, "cpus") && cpus < 0.01) {
        rc = cr_json_fail(err, CR_EINVAL, "cpus", "field 'cpus': at least 0.01 (a CPU limit)");
        goto out;
    }
    if (json_object_get(body, "mem_bytes") && mem_bytes < (1 << 20)) {
        rc = cr_json_fail(err, CR_EINVAL, "mem_bytes", "field 'mem_bytes': at least 1 MiB");
        goto out;
    }
    /* A fractional task: part of one shareable GPU (docs/scheduler.md). */
    if ((gmilli || gmem) && (gpus != 1 || nodes > 1 || *mig)) {
        rc = cr_json_fail(err, CR_EINVAL, gmilli ? "gpu_milli" : "gpu_mem_bytes",
                          "field '%s': a part of a GPU needs gpus 1, nodes 0 or 1 and no "
                          "mig_profile",
                          gmilli ? "gpu_milli" : "gpu_mem_bytes");
        goto out;
    }
    if (gpus == 0 && (nodes > 1 || *mig || mem > 0 || strcmp(gpu_type, "auto") != 0)) {
        rc = ctl_cpu_job_fail(err);
        goto out;
    }
    /* Names are printed in tables and logs: no control characters (a job
     * name must not move the cursor or forge a line of someone's output). */
    if (!ctl_text_clean(name)) {
        rc = cr_json_fail(err, CR_EINVAL, "name",
                          "field 'name': control characters are not allowed");
        goto out;
    }
    if (secrets && (rc = ctl_secrets_check(secrets, err)) != 0) {
        goto out;
    }
    const char *arrs = json_string_value(json_object_get(body, "array"));
    if (arrs) {
        /* Slurm's form: indexes, ranges, steps and a throttle */
        char why[160];
        size_t n = 0;
        idx = cr_calloc(MAX_ARRAY_TASKS, sizeof *idx);
        if (ctl_batch_array_parse(arrs, idx, MAX_ARRAY_TASKS, &n, &throttle, why, sizeof why) !=
            0) {
            rc = cr_json_fail(err, CR_EINVAL, "array", "field 'array': %s", why);
            goto out;
        }
        arr = (int64_t)n;
    }
    /* SLURM_ARRAY_TASK_COUNT, _MIN, _MAX, _STEP (1 when not evenly spaced) */
    int64_t amin = 0, amax = arr - 1, astep = 1;
    if (arrs && arr > 0) {
        amin = amax = idx[0];
        for (int64_t k = 1; k < arr; k++) {
            amin = idx[k] < amin ? idx[k] : amin;
            amax = idx[k] > amax ? idx[k] : amax;
        }
        astep = arr > 1 ? (amax - amin) / (arr - 1) : 1;
        if (arr > 1 && (astep <= 0 || astep * (arr - 1) != amax - amin)) {
            astep = 1;
        }
    }
    static const char *const node_fields[] = {"nodelist", "exclude", "constraint", NULL};
    for (size_t i = 0; node_fields[i]; i++) {
        const char *txt = "";
        char why[200];
        if ((rc = cr_json_str(body, "", node_fields[i], false, 4096, &txt, err)) != 0) {
            goto out;
        }
        if (*txt && ctl_batch_nodes_check(node_fields[i], txt, why, sizeof why) != 0) {
            rc =
                cr_json_fail(err, CR_EINVAL, node_fields[i], "field '%s': %s", node_fields[i], why);
            goto out;
        }
    }
    bool exclusive = false, keep_running = false, ckptable = false, interactive = false;
    const char *sigspec = "", *cksig = "USR1";
    if ((rc = cr_json_bool(body, "", "exclusive", false, &exclusive, err)) != 0 ||
        (rc = cr_json_bool(body, "", "keep_running_on_partition", false, &keep_running, err)) !=
            0 ||
        (rc = cr_json_str(body, "", "warn_signal", false, 31, &sigspec, err)) != 0 ||
        (rc = cr_json_bool(body, "", "checkpointable", false, &ckptable, err)) != 0 ||
        (rc = cr_json_bool(body, "", "interactive", false, &interactive, err)) != 0 ||
        (rc = cr_json_str(body, "", "checkpoint_signal", false, 11, &cksig, err)) != 0) {
        goto out;
    }
    char cksigname[12];
    int64_t cksecs;
    if (ctl_batch_signal_parse(cksig, cksigname, sizeof cksigname, &cksecs) != 0 ||
        strchr(cksig, '@') || strcmp(cksigname, "KILL") == 0) {
        rc = cr_json_fail(err, CR_EINVAL, "checkpoint_signal",
                          "field 'checkpoint_signal': one of USR1, USR2, TERM, INT, HUP, QUIT, "
                          "ALRM, CONT, WINCH (default USR1)");
        goto out;
    }
    char signame[12];
    int64_t sigsecs;
    if (*sigspec && ctl_batch_signal_parse(sigspec, signame, sizeof signame, &sigsecs) != 0) {
        rc = cr_json_fail(
            err, CR_EINVAL, "warn_signal",
            "field 'warn_signal': want SIG[@SECONDS] with SIG one of USR1, USR2, TERM, "
            "INT, HUP, QUIT, ALRM, CONT, KILL, WINCH and SECONDS 0..65535");
        goto out;
    }
    if (*dep) {
        char why[200];
        if (ctl_batch_dep_check(dep, why, sizeof why) != 0) {
            rc = cr_json_fail(err, CR_EINVAL, "dependency", "field 'dependency': %s", why);
            goto out;
        }
    }
    if (json_array_size(cmd) == 0) {
        rc = cr_json_fail(err, CR_EINVAL, "command", "field 'command': must not be empty");
        goto out;
    }
    for (size_t i = 0; i < json_array_size(cmd); i++) {
        json_t *a = json_array_get(cmd, i);
        char f[32];
        snprintf(f, sizeof f, "command[%zu]", i);
        if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a)) {
            rc = cr_json_fail(err, CR_EINVAL, f, "field '%s': must be a string without NUL", f);
            goto out;
        }
        if (i == 0 && json_string_length(a) == 0) {
            rc = cr_json_fail(err, CR_EINVAL, f, "field '%s': the program name must not be empty",
                              f);
            goto out;
        }
    }
    /* (tenant is at most CTL_NAME_MAX - 1 bytes: cr_json_str above) */
    if (*tenant && (rc = ctl_name_check(tenant, "tenant", err)) != 0) {
        goto out;
    }
    if (!*gpu_type) {
        rc = cr_json_fail(err, CR_EINVAL, "gpu_type", "field 'gpu_type': must not be empty");
        goto out;
    }
    if ((rc = cr_json_enum(kind, "kind", kinds, err)) != 0) {
        goto out;
    }
    if (nodes > 0 && gpus % nodes != 0) {
        rc = cr_json_fail(err, CR_EINVAL, "nodes",
                          "field 'nodes': gpus (%lld) must be a multiple of nodes (%lld)",
                          (long long)gpus, (long long)nodes);
        goto out;
    }
    if (*workdir && workdir[0] != '/') {
        rc = cr_json_fail(err, CR_EINVAL, "workdir", "field 'workdir': must be an absolute path");
        goto out;
    }
    /* "/a/../b" is "/b" only if "a" is no symlink: the path a job asks for
     * is the one it gets, so ".." is refused rather than guessed at. */
    if (!from_doc && has_dotdot(workdir)) {
        rc = cr_json_fail(err, CR_EINVAL, "workdir",
                          "field 'workdir': must not have '..' components");
        goto out;
    }
    if (*subdir && (subdir[0] != '/' || (!from_doc && has_dotdot(subdir)))) {
        rc = cr_json_fail(err, CR_EINVAL, "submit_dir",
                          "field 'submit_dir': must be an absolute path without '..'");
        goto out;
    }
    static const char *const open_modes[] = {"append", "truncate", NULL};
    if (*omode && (rc = cr_json_enum(omode, "open_mode", open_modes, err)) != 0) {
        goto out;
    }
    if (model) {
        double params = 0, tokens = 0, mb = 0, gb = 0, seq = 0;
        const char *method = "", *prec = "", *mname = "", *stack = "", *ackpt = "";
        if ((rc = cr_json_only(model, "model", model_members, err)) ||
            (rc = cr_json_str(model, "model", "name", false, 39, &mname, err)) ||
            (rc = cr_json_num(model, "model", "params", false, 0, 1e14, &params, err)) ||
            (rc = cr_json_num(model, "model", "tokens", false, 0, 1e16, &tokens, err)) ||
            (rc = cr_json_str(model, "model", "method", false, 32, &method, err)) ||
            (rc = cr_json_str(model, "model", "precision", false, 16, &prec, err)) ||
            (rc = cr_json_str(model, "model", "stack", false, 16, &stack, err)) ||
            (rc = cr_json_str(model, "model", "checkpointing", false, 16, &ackpt, err)) ||
            (rc = cr_json_num(model, "model", "micro_batch", false, 1, 1e8, &mb, err)) ||
            (rc = cr_json_num(model, "model", "global_batch", false, 1, 1e8, &gb, err)) ||
            (rc = cr_json_num(model, "model", "seq_len", false, 1, 1e7, &seq, err))) {
            goto out;
        }
        const char *frac = mb != (double)(int64_t)mb     ? "micro_batch"
                           : gb != (double)(int64_t)gb   ? "global_batch"
                           : seq != (double)(int64_t)seq ? "seq_len"
                                                         : NULL;
        if (frac) {
            rc = cr_json_fail(err, CR_EINVAL,
                              frac[0] == 'm'   ? "model.micro_batch"
                              : frac[0] == 'g' ? "model.global_batch"
                                               : "model.seq_len",
                              "field 'model.%s': must be a whole number", frac);
            goto out;
        }
        if (mb > 0 && gb > 0 && mb > gb) {
            rc = cr_json_fail(err, CR_EINVAL, "model.micro_batch",
                              "field 'model.micro_batch': %.0f sequences exceed the global batch "
                              "(model.global_batch %.0f)",
                              mb, gb);
            goto out;
        }
        /* A model architecture name (data/models/models.csv, read by the
         * advisor for gpu_type auto): a plain token. */
        if (strspn(mname, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") !=
            strlen(mname)) {
            rc = cr_json_fail(err, CR_EINVAL, "model.name",
                              "field 'model.name': letters, digits, '.', '-' and '_' only");
            goto out;
        }
        if (*mname) {
            /* Known to the advisor? (a small file; when it cannot be read,
             * the name is kept and the advisor falls back to params) */
            cr_arch_catalog *mc = NULL;
            char merr[256];
            if (cr_arch_load(NULL, &mc, merr, sizeof merr) == 0 && !cr_arch_find(mc, mname)) {
                rc = cr_json_fail(err, CR_EINVAL, "model.name",
                                  "field 'model.name': unknown model \"%s\" (see "
                                  "data/models/models.csv)",
                                  mname);
            }
            cr_arch_free(mc);
            if (rc) {
                goto out;
            }
        }
        /* The performance model reads these for gpu_type auto. */
        if ((*method && (rc = cr_json_enum(method, "model.method", methods, err)) != 0) ||
            (*prec && (rc = cr_json_enum(prec, "model.precision", precisions, err)) != 0) ||
            (*stack && (rc = cr_json_enum(stack, "model.stack", stacks, err)) != 0) ||
            (*ackpt && (rc = cr_json_enum(ackpt, "model.checkpointing", ckpts, err)) != 0)) {
            goto out;
        }
        if ((!strcmp(prec, "fp4") || !strcmp(prec, "fp6")) &&
            (!strcmp(kind, "pretrain") || !strcmp(kind, "finetune"))) {
            rc =
                cr_json_fail(err, CR_EINVAL, "model.precision",
                             "field 'model.precision': %s is for serving and batch work (Blackwell "
                             "tensor cores); training takes bf16|fp16|fp8|tf32|fp32",
                             prec);
            goto out;
        }
    }
    if (env) {
        if (json_object_size(env) > 1024) {
            rc = cr_json_fail(err, CR_EINVAL, "env", "field 'env': at most 1024 variables");
            goto out;
        }
        const char *k;
        json_t *v;
        json_object_foreach(env, k, v)
        {
            char f[300];
            cr_json_path(f, sizeof f, "env", k);
            if (!*k || strchr(k, '=')) {
                rc = cr_json_fail(err, CR_EINVAL, f, "field '%s': bad variable name", f);
                goto out;
            }
            if (!from_doc && cr_env_reserved(k, strlen(k))) {
                rc = cr_json_fail(err, CR_EINVAL, f,
                                  "field '%s': %s is set by the node (GPU selection, ranks, "
                                  "Corral's own: CUDA_VISIBLE_DEVICES, NVIDIA_*, CUDA_MPS_*, "
                                  "CORRAL_*, MASTER_*, RANK...), not by a job",
                                  f, k);
                goto out;
            }
            if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
                rc = cr_json_fail(err, CR_EINVAL, f, "field '%s': must be a string without NUL", f);
                goto out;
            }
        }
    }
    j->spec = json_pack(
        "{s:s,s:O,s:I,s:s,s:I,s:s,s:I,s:I,s:b,s:I,s:I}", "name", name, "command", cmd, "gpus",
        (json_int_t)gpus, "gpu_type", gpu_type, "nodes", (json_int_t)nodes, "kind", kind,
        "priority", (json_int_t)prio, "time_limit_s", (json_int_t)tl, "preemptible", preemptible,
        "checkpoint_interval_s", (json_int_t)ckpt, "max_retries", (json_int_t)retries);
    if (*mig) {
        json_object_set_new(j->spec, "mig_profile", json_string(mig));
    }
    const char *part = "";
    if ((rc = cr_json_str(body, "", "partition", false, CTL_NAME_MAX - 1, &part, err)) != 0 ||
        (*part && (rc = ctl_name_check(part, "partition", err)) != 0)) {
        goto out;
    }
    if (*part) {
        json_object_set_new(j->spec, "partition", json_string(part));
    }
    if (mem > 0) {
        json_object_set_new(j->spec, "gpu_mem_gb", json_real(mem));
    }
    if (model) {
        json_object_set(j->spec, "model", model);
    }
    json_object_set_new(j->spec, "env", env ? json_deep_copy(env) : json_object());
    if (*workdir) {
        json_object_set_new(j->spec, "workdir", json_string(workdir));
    }
    if (tpn > 0) {
        json_object_set_new(j->spec, "tasks_per_node", json_integer(tpn));
    }
    if (*script) {
        json_object_set_new(j->spec, "script", json_string(script));
        if (batch) {
            json_object_set_new(j->spec, "batch", json_true());
        }
    }
    if (*outp) {
        json_object_set_new(j->spec, "output", json_string(outp));
    }
    if (*subdir) {
        json_object_set_new(j->spec, "submit_dir", json_string(subdir));
    }
    if (*omode) {
        json_object_set_new(j->spec, "open_mode", json_string(omode));
    }
    if (cpt > 0) {
        json_object_set_new(j->spec, "cpus_per_task", json_real(cpt));
    }
    if (!from_doc && (arrs || arr > 1)) {
        json_object_set_new(j->spec, "array_stats",
                            json_pack("{s:I,s:I,s:I,s:I}", "count", (json_int_t)arr, "min",
                                      (json_int_t)amin, "max", (json_int_t)amax, "step",
                                      (json_int_t)astep));
    } else if (from_doc && json_is_object(json_object_get(body, "array_stats"))) {
        json_object_set(j->spec, "array_stats", json_object_get(body, "array_stats"));
    }
    if (*errp) {
        json_object_set_new(j->spec, "error", json_string(errp));
    }
    if (requeue) {
        json_object_set_new(j->spec, "requeue", json_true());
    }
    if (*dep) {
        json_object_set_new(j->spec, "dependency", json_string(dep));
    }
    if (begin > 0) {
        json_object_set_new(j->spec, "begin_unix", json_integer(begin));
    }
    if (throttle > 0) {
        json_object_set_new(j->spec, "array_throttle", json_integer(throttle));
    }
    for (size_t i = 0; node_fields[i]; i++) {
        const char *txt = json_string_value(json_object_get(body, node_fields[i]));
        if (txt && *txt) {
            json_object_set_new(j->spec, node_fields[i], json_string(txt));
        }
    }
    if (exclusive) {
        json_object_set_new(j->spec, "exclusive", json_true());
    }
    if (keep_running) {
        json_object_set_new(j->spec, "keep_running_on_partition", json_true());
    }
    if (interactive) {
        json_object_set_new(j->spec, "interactive", json_true());
    }
    if (*sigspec) {
        json_object_set_new(j->spec, "warn_signal", json_string(sigspec));
    }
    if (ckptable) {
        json_object_set_new(j->spec, "checkpointable", json_true());
        json_object_set_new(j->spec, "checkpoint_signal", json_string(cksigname));
    }
    j->checkpointable = ckptable;
    snprintf(j->ckpt_signal, sizeof j->ckpt_signal, "%s", cksigname);
    if (cpus > 0) {
        json_object_set_new(j->spec, "cpus", json_real(cpus));
    }
    if (mem_bytes > 0) {
        json_object_set_new(j->spec, "mem_bytes", json_integer(mem_bytes));
    }
    if (pids > 0) {
        json_object_set_new(j->spec, "pids", json_integer(pids));
    }
    if (gmilli > 0) {
        json_object_set_new(j->spec, "gpu_milli", json_integer(gmilli));
    }
    if (gmem > 0) {
        json_object_set_new(j->spec, "gpu_mem_bytes", json_integer(gmem));
    }
    if ((rc = ctl_ctr_parse(body, j->spec, err)) != 0) {
        goto out;
    }
    /* A request's names are resolved at submit (ctl_data_resolve); a
     * stored doc holds them resolved. */
    json_t *data = json_object_get(body, "data");
    if (data && !json_is_array(data)) {
        rc = cr_json_fail(err, CR_EINVAL, "data",
                          "field 'data': an array of \"NAME[@VERSION][:/mount/point]\"");
        goto out;
    }
    if (data && json_array_size(data) > 0) {
        json_object_set(j->spec, "data", data);
    }
    if (json_object_size(secrets) > 0) {
        /* The API shows which secrets a job has, never their values. */
        json_t *names = json_array();
        const char *k;
        json_t *x;
        json_object_foreach(secrets, k, x)
        {
            json_array_append_new(names, json_string(k));
        }
        json_object_set_new(j->spec, "secret_names", names);
        j->secrets = json_deep_copy(secrets);
    }
    snprintf(j->tenant, sizeof j->tenant, "%s", tenant);
    j->gpus = (int)gpus;
    j->nodes = (int)nodes;
    j->priority = (int)prio;
    j->max_retries = (int)retries;
    snprintf(j->gpu_type, sizeof j->gpu_type, "%s", gpu_type);
    snprintf(j->mig_profile, sizeof j->mig_profile, "%s", mig);
    snprintf(j->kind, sizeof j->kind, "%s", kind);
    j->gpu_mem_gb = mem;
    j->gpu_milli = (int)gmilli;
    j->gpu_mem_bytes = gmem;
    j->preemptible = preemptible;
    j->time_limit_s = tl;
    j->checkpoint_interval_s = ckpt;
    if (array) {
        *array = arr;
    }
    if (indexes) {
        *indexes = idx;
        idx = NULL;
    }
    *out = j;
    j = NULL;
out:
    free(idx);
    ctl_job_free(j);
    return rc;
}

static int64_t doc_int(const json_t *v, const char *key)
{
    json_t *x = json_object_get(v, key);
    return json_is_integer(x) ? (int64_t)json_integer_value(x) : 0;
}

/* A job from a stored doc; ref_spec: the shared spec of an array task's
 * row that names it by spec_ref (NULL otherwise). */
static int job_from_doc_ref(const char *doc, json_t *ref_spec, ctl_job **out)
{
    json_error_t je;
    json_t *v = json_loads(doc, 0, &je);
    if (!v) {
        return CR_EPARSE;
    }
    if (json_object_get(v, "spec_ref")) {
        if (!ref_spec) {
            json_decref(v);
            return CR_ENOENT;
        }
        json_t *merged = json_copy(ref_spec);
        json_object_update(merged, v);
        json_object_del(merged, "spec_ref");
        json_decref(v);
        v = merged;
    }
    cr_json_err err;
    ctl_job *j = NULL;
    int rc = job_parse(v, true, &j, NULL, NULL, &err);
    if (rc != 0) {
        cr_error("store: bad job doc: %s", err.message);
        json_decref(v);
        return rc;
    }
    j->id = doc_int(v, "id");
    /* Read-only request members the API adds (arrays, service replicas). */
    static const char *const extra[] = {"service",        "port",    "run_as",    "secret_names",
                                        "array_throttle", "env_enc", "env_names", NULL};
    j->array_first = doc_int(v, "array_first");
    j->array_index = (int32_t)doc_int(v, "array_index");
    for (size_t i = 0; extra[i]; i++) {
        json_t *x = json_object_get(v, extra[i]);
        if (x) {
            json_object_set(j->spec, extra[i], x);
        }
    }
    if (json_object_get(j->spec, "env_enc")) {
        json_object_del(j->spec, "env"); /* sealed: no plain copy */
    }
    const char *st = json_string_value(json_object_get(v, "state"));
    for (int i = 0; st && i < JS_COUNT; i++) {
        if (strcmp(st, ctl_job_state_names[i]) == 0) {
            j->state = (ctl_job_state)i;
        }
    }
    const char *reason = json_string_value(json_object_get(v, "reason"));
    if (reason && *reason) {
        j->reason = cr_strdup(reason);
    }
    j->exit_code = (int)doc_int(v, "exit_code");
    j->signal = (int)doc_int(v, "signal");
    j->retries = (int)doc_int(v, "retries");
    j->runs = (int)doc_int(v, "runs");
    j->susp_run = j->state == JS_PENDING ? (int)doc_int(v, "susp_run") : 0;
    j->submit_ns = doc_int(v, "submit_ns");
    j->start_ns = doc_int(v, "start_ns");
    j->end_ns = doc_int(v, "end_ns");
    j->acct_ns = doc_int(v, "acct_ns");
    /* Restart: the monotonic marks from the persisted wall times. */
    j->start_mono_ns = j->start_ns > 0 ? ctl_mono_from_wall(j->start_ns) : 0;
    j->acct_mono_ns = j->acct_ns > 0 ? ctl_mono_from_wall(j->acct_ns) : j->start_mono_ns;
    j->cancel_requested = json_is_true(json_object_get(v, "cancel_requested"));
    j->timed_out = json_is_true(json_object_get(v, "timed_out"));
    j->requeue_requested = json_is_true(json_object_get(v, "requeue_requested"));
    const char *se = json_string_value(json_object_get(v, "secrets_enc"));
    if (se) {
        j->secrets_enc = cr_strdup(se);
    }
    const char *ln = json_string_value(json_object_get(v, "last_node"));
    if (ln) {
        snprintf(j->last_node, sizeof j->last_node, "%s", ln);
    }
    const char *nl = json_string_value(json_object_get(v, "run_nodes"));
    if (nl && *nl) {
        j->last_nodes = cr_strdup(nl);
        j->last_tpn = (int)doc_int(v, "tasks_per_node_run");
    }
    const char *rt = json_string_value(json_object_get(v, "run_gpu_type"));
    if (rt) {
        snprintf(j->run_type, sizeof j->run_type, "%s", rt);
    }
    ctl_plan_from_json(json_object_get(v, "plan"), &j->plan);
    json_t *pl = json_object_get(v, "placement");
    if (json_array_size(pl) > 0) {
        j->nplace = json_array_size(pl);
        j->place = cr_calloc(j->nplace, sizeof *j->place);
        for (size_t i = 0; i < j->nplace; i++) {
            json_t *p = json_array_get(pl, i);
            const char *node = json_string_value(json_object_get(p, "node"));
            const char *mp = json_string_value(json_object_get(p, "mig_profile"));
            snprintf(j->place[i].node, sizeof j->place[i].node, "%s", node ? node : "");
            snprintf(j->place[i].mig_profile, sizeof j->place[i].mig_profile, "%s", mp ? mp : "");
            json_t *g = json_object_get(p, "gpus");
            json_t *ms = json_object_get(p, "mig_starts");
            for (size_t k = 0; k < json_array_size(g) && k < 64; k++) {
                json_t *msv = json_array_get(ms, k);
                json_int_t sv = json_is_integer(msv) ? json_integer_value(msv) : -1;
                j->place[i].mig_start[j->place[i].ngpus] = (int8_t)(sv >= 0 && sv < 8 ? sv : -1);
                j->place[i].gpus[j->place[i].ngpus++] =
                    (int)json_integer_value(json_array_get(g, k));
            }
        }
    }
    const char *tenant = json_string_value(json_object_get(v, "tenant"));
    snprintf(j->tenant, sizeof j->tenant, "%s", tenant ? tenant : "default");
    json_decref(v);
    /* Strip the read-only members that job_json adds back. */
    static const char *const ro[] = {"id",
                                     "tenant",
                                     "state",
                                     "reason",
                                     "exit_code",
                                     "signal",
                                     "retries",
                                     "submit_time",
                                     "start_time",
                                     "end_time",
                                     "placement",
                                     "run_gpu_type",
                                     "submit_ns",
                                     "start_ns",
                                     "end_ns",
                                     "acct_ns",
                                     "cancel_requested",
                                     "timed_out",
                                     "last_node",
                                     "requeue_requested",
                                     "run_nodes",
                                     "tasks_per_node_run",
                                     "secrets_enc",
                                     NULL};
    for (size_t i = 0; ro[i]; i++) {
        json_object_del(j->spec, ro[i]);
    }
    if (ref_spec && json_equal(j->spec, ref_spec)) {
        json_decref(j->spec); /* share the array's one spec */
        j->spec = json_incref(ref_spec);
    }
    *out = j;
    return 0;
}

int ctl_job_from_doc(const char *doc, ctl_job **out)
{
    return job_from_doc_ref(doc, NULL, out);
}

static void copy_doc(void *arg, int64_t id, const char *doc)
{
    (void)id;
    char **out = arg;
    free(*out);
    *out = cr_strdup(doc);
}

int ctl_job_load_doc(ctl *c, int64_t id, const char *doc, bool ask_store, ctl_job **out)
{
    int64_t ref = ctl_doc_spec_ref(doc);
    json_t *ref_spec = NULL;
    ctl_job *rj = NULL;
    if (ref > 0) {
        ctl_job *m = ctl_job_get(c, ref);
        if (m) {
            ref_spec = m->spec;
        } else if (ask_store) {
            char *rdoc = NULL;
            if (cr_store_get_job(c->store, ref, copy_doc, &rdoc) == 0 &&
                ctl_doc_spec_ref(rdoc) == 0 && ctl_job_from_doc(rdoc, &rj) == 0) {
                ref_spec = rj->spec;
            }
            free(rdoc);
        }
    }
    int rc = job_from_doc_ref(doc, ref_spec, out);
    if (rc == 0) {
        (*out)->id = id;
    }
    ctl_job_free(rj);
    return rc;
}

int ctl_job_parse(const json_t *body, ctl_job **out, int64_t *array, int32_t **indexes,
                  cr_json_err *err)
{
    return job_parse(body, false, out, array, indexes, err);
}

int ctl_job_validate(const char *body, size_t len, cr_json_err *err)
{
    json_t *v = NULL;
    ctl_job *j = NULL, *back = NULL;
    int64_t n = 1;
    int rc = cr_json_parse_object(body, len, &v, err);
    if (rc == 0) {
        rc = job_parse(v, false, &j, &n, NULL, err);
    }
    if (rc == 0) {
        /* What is accepted must survive the store: doc out, doc back in. */
        j->id = 1;
        snprintf(j->tenant, sizeof j->tenant, "%s", *j->tenant ? j->tenant : "default");
        char *doc = ctl_job_doc(j);
        /* The direct writer agrees with the API object member by member. */
        json_t *api = ctl_job_json(j), *parsed = doc ? json_loads(doc, 0, NULL) : NULL;
        const char *k;
        json_t *x;
        if (!parsed) {
            abort();
        }
        json_object_foreach(api, k, x)
        {
            /* env_names: the view's names of a plain env (only sealed
             * rows, which this path does not make, store them) */
            if (strcmp(k, "env_names") != 0 && !json_equal(x, json_object_get(parsed, k))) {
                abort();
            }
        }
        json_decref(api);
        json_decref(parsed);
        if (!doc || ctl_job_from_doc(doc, &back) != 0 || back->gpus != j->gpus ||
            strcmp(back->tenant, j->tenant) != 0 || !json_equal(back->spec, j->spec)) {
            abort();
        }
        free(doc);
    }
    ctl_job_free(back);
    ctl_job_free(j);
    json_decref(v);
    return rc;
}

int ctl_job_from_request(const json_t *body, ctl_job **out, cr_json_err *err)
{
    int64_t n = 1;
    return job_parse(body, false, out, &n, NULL, err);
}
