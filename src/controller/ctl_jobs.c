/*
 * ctl_jobs.c - job objects and the /v1/jobs routes.
 *
 * A submit validates the whole body first (400 naming the member, nothing
 * stored), hands out ids, queues the rows to the store and defers the
 * answer; the commit callback puts the jobs into memory, wakes the
 * scheduler and answers 201. Other mutations change memory under mu, queue
 * the row and an event with mu held (so the store sees changes in memory
 * order), and answer from the commit callback.
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_arch.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_parse.h"
#include "cr_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARRAY 10000

/* array x the spec's size, one submit */

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
    NULL,
};
static const char *const model_members[] = {"params",    "method", "tokens",
                                            "precision", "name",   NULL};
static const char *const methods[] = {"full", "lora", "qlora", NULL};
static const char *const precisions[] = {"bf16", "fp16", "fp8",  "int8", "int4",
                                         "tf32", "fp32", "fp64", NULL};
static const char *const kinds[] = {"pretrain", "finetune", "inference", "visual",
                                    "hpc",      "batch",    NULL};

static bool name_ok(const char *s)
{
    if (!*s) {
        return false;
    }
    for (const char *p = s; *p; p++) {
        char ch = *p;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_' || ch == '.')) {
            return false;
        }
    }
    return true;
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
    const char *name = "job", *tenant = "", *gpu_type = "auto", *mig = "", *kind = "batch";
    const char *workdir = "", *script = "", *outp = "", *errp = "", *dep = "";
    int64_t gpus = 1, nodes = 0, prio = 0, tl = 0, ckpt = 0, retries = 0, arr = 1, tpn = 0;
    int64_t begin = 0, mem_bytes = 0, pids = 0;
    int throttle = 0;
    int64_t gmilli = 0, gmem = 0;
    double mem = 0, cpus = 0;
    bool preemptible = false, requeue = false;
    json_t *cmd = NULL, *env = NULL, *model = NULL, *secrets = NULL;
    if ((rc = cr_json_str(body, "", "name", false, 128, &name, err)) ||
        (rc = cr_json_str(body, "", "tenant", false, CTL_NAME_MAX - 1, &tenant, err)) ||
        (rc = cr_json_arr(body, "", "command", true, 4096, &cmd, err)) ||
        (rc = cr_json_int(body, "", "gpus", false, 1, 4096, &gpus, err)) ||
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
    bool exclusive = false;
    const char *sigspec = "";
    if ((rc = cr_json_bool(body, "", "exclusive", false, &exclusive, err)) != 0 ||
        (rc = cr_json_str(body, "", "warn_signal", false, 31, &sigspec, err)) != 0) {
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
    if (*tenant && !name_ok(tenant)) {
        rc = cr_json_fail(err, CR_EINVAL, "tenant",
                          "field 'tenant': use letters, digits, '-', '_' or '.'");
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
    if (model) {
        double params = 0, tokens = 0;
        const char *method = "", *prec = "", *mname = "";
        if ((rc = cr_json_only(model, "model", model_members, err)) ||
            (rc = cr_json_str(model, "model", "name", false, 39, &mname, err)) ||
            (rc = cr_json_num(model, "model", "params", false, 0, 1e14, &params, err)) ||
            (rc = cr_json_num(model, "model", "tokens", false, 0, 1e16, &tokens, err)) ||
            (rc = cr_json_str(model, "model", "method", false, 32, &method, err)) ||
            (rc = cr_json_str(model, "model", "precision", false, 16, &prec, err))) {
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
            (*prec && (rc = cr_json_enum(prec, "model.precision", precisions, err)) != 0)) {
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
    }
    if (*outp) {
        json_object_set_new(j->spec, "output", json_string(outp));
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
    if (*sigspec) {
        json_object_set_new(j->spec, "warn_signal", json_string(sigspec));
    }
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
    static const char *const extra[] = {"service",      "port",           "run_as",
                                        "secret_names", "array_throttle", NULL};
    j->array_first = doc_int(v, "array_first");
    j->array_index = (int32_t)doc_int(v, "array_index");
    for (size_t i = 0; extra[i]; i++) {
        json_t *x = json_object_get(v, extra[i]);
        if (x) {
            json_object_set(j->spec, extra[i], x);
        }
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

/* Release a running job's GPUs on its nodes and tell the agents. */
static void job_unplace(ctl *c, ctl_job *j)
{
    for (size_t i = 0; i < j->nplace; i++) {
        ctl_node *n = ctl_node_find(c, j->place[i].node);
        if (!n) {
            continue;
        }
        ctl_node_del_job(n, j->id);
        for (size_t g = 0; g < n->ngpus; g++) {
            if (n->gpus[g].alloc_job == j->id) {
                n->gpus[g].alloc_job = 0;
            }
        }
        ctl_node_bump(c, n);
    }
    free(j->place);
    j->place = NULL;
    j->nplace = 0;
    j->port = 0;
}

/* Charge the time run since the last charge to the tenant (GPU-seconds;
 * energy comes from heartbeats). The interval is monotonic; now_ns (wall)
 * only names the day it is booked on and is persisted as acct_ns. */
void ctl_job_account(ctl *c, cr_store_txn *txn, ctl_job *j, int64_t now_ns)
{
    if (j->state != JS_RUNNING && j->state != JS_COMPLETING) {
        return;
    }
    int64_t mono = cr_mono_ns();
    if (j->acct_ns <= 0) {
        j->acct_mono_ns = j->start_ns > 0 ? j->start_mono_ns : mono;
    }
    double dt = (double)(mono - j->acct_mono_ns) / 1e9;
    if (dt <= 0) {
        return;
    }
    ctl_usage_add(c, txn, j->tenant, *j->run_type ? j->run_type : j->gpu_type, now_ns, dt * j->gpus,
                  0);
    j->acct_ns = now_ns;
    j->acct_mono_ns = mono;
}

void ctl_job_ended(ctl *c, cr_store_txn *txn, ctl_job *j, int exit_code, int sig, const char *why,
                   bool lost)
{
    int64_t now = cr_now_ns();
    ctl_job_account(c, txn, j, now);
    job_unplace(c, j);
    j->exit_code = exit_code;
    j->signal = sig;
    char buf[256];
    if (j->timed_out) {
        j->timed_out = false;
        j->state = JS_FAILED;
        j->end_ns = now;
        snprintf(buf, sizeof buf, "time limit of %llds exceeded; %s", (long long)j->time_limit_s,
                 why);
        ctl_job_set_reason(j, buf);
        ctl_sched_remove(c, j->id);
        ctl_job_persist(c, txn, j, "failed", buf);
    } else if (j->cancel_requested) {
        j->state = JS_CANCELLED;
        j->end_ns = now;
        ctl_job_set_reason(j, "cancelled");
        ctl_sched_remove(c, j->id);
        ctl_job_persist(c, txn, j, "cancelled", why);
    } else if (j->requeue_requested) {
        j->requeue_requested = false;
        j->state = JS_PENDING;
        j->start_ns = 0;
        ctl_job_set_reason(j, "requeued");
        ctl_sched_requeue(c, j->id);
        ctl_job_persist(c, txn, j, "requeued", why);
    } else if (!lost && exit_code == 0 && sig == 0) {
        j->state = JS_COMPLETED;
        j->end_ns = now;
        ctl_job_set_reason(j, "");
        ctl_sched_remove(c, j->id);
        ctl_job_persist(c, txn, j, "completed", why);
    } else if (lost) {
        /* The node (or a GPU) was lost, not the job's doing: requeue it
         * without using a retry (max_retries counts the job's own failures). */
        j->state = JS_PENDING;
        j->start_ns = 0;
        snprintf(buf, sizeof buf, "%s; requeued (not counted as a retry)", why);
        ctl_job_set_reason(j, buf);
        ctl_sched_requeue(c, j->id);
        ctl_job_persist(c, txn, j, "requeued", buf);
    } else if (j->retries < j->max_retries) {
        j->retries++;
        j->state = JS_PENDING;
        j->start_ns = 0;
        snprintf(buf, sizeof buf, "%s; retry %d of %d", why, j->retries, j->max_retries);
        ctl_job_set_reason(j, buf);
        ctl_sched_requeue(c, j->id);
        ctl_job_persist(c, txn, j, "requeued", buf);
    } else {
        j->state = JS_FAILED;
        j->end_ns = now;
        snprintf(buf, sizeof buf, "%s; no retries left (max_retries %d)", why, j->max_retries);
        ctl_job_set_reason(j, buf);
        ctl_sched_remove(c, j->id);
        ctl_job_persist(c, txn, j, "failed", buf);
    }
    if (ctl_job_terminal(j)) {
        atomic_fetch_add(&c->jobs_finished[j->state], 1);
    }
    ctl_job_changed(c, j);
}

/* ------------------------------------------------------------------------ */
/* Answers after commit.                                                    */

typedef struct submit_ctx {
    ctl *c;
    cr_http_req *req;
    ctl_job **jobs; /* owned until inserted */
    size_t n;
    char *answer;     /* owned: the 201 body */
    int64_t token_id; /* Idempotency-Key: whose */
    char idem[160];   /* Idempotency-Key, "" = none */
} submit_ctx;

static void submit_committed(void *arg, int status)
{
    submit_ctx *s = arg;
    ctl *c = s->c;
    if (status != 0) {
        for (size_t i = 0; i < s->n; i++) {
            ctl_job_free(s->jobs[i]);
        }
        if (*s->idem) {
            pthread_mutex_lock(&c->mu);
            ctl_idem_done(c, s->token_id, s->idem, NULL);
            pthread_mutex_unlock(&c->mu);
        }
        ctl_reply_commit_err(s->req, status);
        goto out;
    }
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < s->n; i++) {
        ctl_job *j = s->jobs[i];
        ctl_job_insert(c, j);
        ctl_batch_admit(c, j);
    }
    if (*s->idem) {
        ctl_idem_done(c, s->token_id, s->idem, s->answer);
    }
    pthread_mutex_unlock(&c->mu);
    atomic_fetch_add(&c->jobs_submitted, s->n);
    size_t alen = strlen(s->answer);
    cr_http_respond(s->req, 201, "application/json", s->answer, alen);
    s->answer = NULL;
out:
    free(s->answer);
    free(s->jobs);
    free(s);
}

static char *ids_answer(int64_t first, size_t n)
{
    cr_buf b;
    cr_buf_init(&b);
    cr_buf_puts(&b, "{\"ids\":[");
    for (size_t i = 0; i < n; i++) {
        cr_buf_printf(&b, "%s%lld", i ? "," : "", (long long)(first + (int64_t)i));
    }
    cr_buf_puts(&b, "]}");
    return cr_buf_take(&b);
}

static void jobs_submit(ctl *c, cr_http_req *req, const cr_principal *p)
{
    size_t len;
    const char *body = cr_http_body(req, &len);
    json_t *v = NULL;
    cr_json_err err;
    ctl_job *proto = NULL;
    char *spec_json = NULL;
    int32_t *indexes = NULL;
    int64_t n = 1;
    const char *idem = cr_http_header(req, "Idempotency-Key");
    if (idem && ctl_idem_key_check(idem) != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "Idempotency-Key",
                      "header 'Idempotency-Key': 1..128 printable ASCII characters");
        goto out;
    }
    if (cr_json_parse_object(body, len, &v, &err) != 0 ||
        job_parse(v, false, &proto, &n, &indexes, &err) != 0) {
        ctl_reply_jerr(req, &err);
        goto out;
    }
    if (n > c->cfg.max_array) {
        ctl_reply_err(req, 400, CR_ERANGE, "array",
                      "field 'array': at most %lld tasks per submit (max_array)",
                      (long long)c->cfg.max_array);
        goto out;
    }
    if (p->role == CR_ROLE_USER) {
        if (*proto->tenant && strcmp(proto->tenant, p->tenant) != 0) {
            ctl_reply_err(req, 403, CR_EPERM, "tenant",
                          "field 'tenant': this token may only submit for tenant '%s'", p->tenant);
            goto out;
        }
        /* The tier comes before fair share and preempts lower tiers of
         * every tenant: only an admin raises it (a user orders its own
         * jobs below 0, as nice lowers). */
        if (proto->priority > 0) {
            ctl_reply_err(req, 403, CR_EPERM, "priority",
                          "field 'priority': only an admin may submit above 0 (it ranks "
                          "before other tenants' fair share); use 0 or below");
            goto out;
        }
        snprintf(proto->tenant, sizeof proto->tenant, "%s", p->tenant);
    } else if (!*proto->tenant) {
        snprintf(proto->tenant, sizeof proto->tenant, "default");
    }
    /* The Unix user the job will run as, fixed now: a job nobody mapped is
     * refused here rather than left to fail (or run as root) on a node. */
    ctl_run_as ra;
    char rwhy[300];
    if (ctl_run_as_lookup(&c->cfg, proto->tenant, p->name, &ra, rwhy, sizeof rwhy) != 0) {
        ctl_reply_err(req, 403, CR_EPERM, "tenant", "%s", rwhy);
        goto out;
    }
    if (ctl_ctr_check_tenant(&c->cfg, proto->tenant, proto->spec, &err) != 0) {
        ctl_reply_err(req, 403, err.code, err.field, "%s", err.message);
        goto out;
    }
    if (ra.mapped) {
        json_object_set_new(proto->spec, "run_as",
                            json_pack("{s:I,s:I,s:b}", "uid", (json_int_t)ra.uid, "gid",
                                      (json_int_t)ra.gid, "allow_root", ra.allow_root));
    }
    spec_json = json_dumps(proto->spec, JSON_COMPACT);
    if (!spec_json || (int64_t)strlen(spec_json) > c->cfg.max_spec_bytes) {
        ctl_reply_err(req, 413, CR_ETOOBIG, NULL,
                      "the job request is %zu bytes stored; at most %lld (max_spec_bytes)",
                      spec_json ? strlen(spec_json) : 0, (long long)c->cfg.max_spec_bytes);
        goto out;
    }
    if (proto->secrets) {
        /* Sealed before anything is stored; the plain copy goes now. */
        char *plain = json_dumps(proto->secrets, JSON_COMPACT);
        proto->secrets_enc = ctl_seal(c, plain);
        ctl_secret_free(plain);
        json_decref(proto->secrets);
        proto->secrets = NULL;
    }
    int64_t now = cr_now_ns();
    pthread_mutex_lock(&c->mu);
    if (!ctl_tenant_find(c, proto->tenant)) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_err(req, 400, CR_ENOENT, "tenant", "field 'tenant': unknown tenant '%s'",
                      proto->tenant);
        goto out;
    }
    const char *dep = json_string_value(json_object_get(proto->spec, "dependency"));
    char dwhy[200] = "";
    if (dep && ctl_batch_dep_refs(c, dep, proto->tenant, p->role == CR_ROLE_ADMIN, dwhy,
                                  sizeof dwhy) != 0) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_err(req, 400, CR_ENOENT, "dependency", "field 'dependency': %s", dwhy);
        goto out;
    }
    if (idem) {
        char *first = NULL;
        ctl_idem_res r = ctl_idem_begin(c, p->id, idem, ctl_idem_hash(body, len), &first);
        if (r != CTL_IDEM_NEW) {
            pthread_mutex_unlock(&c->mu);
            if (r == CTL_IDEM_REPLAY) {
                cr_http_add_header(req, "Idempotent-Replayed", "true");
                size_t flen = strlen(first);
                cr_http_respond(req, 201, "application/json", first, flen);
            } else {
                ctl_reply_err(req, 409, CR_ECONFLICT, "Idempotency-Key",
                              r == CTL_IDEM_BUSY
                                  ? "header 'Idempotency-Key': the first request with this key "
                                    "is still being stored; retry"
                                  : "header 'Idempotency-Key': already used with a different "
                                    "request");
            }
            goto out;
        }
    }
    int64_t first = c->next_id;
    c->next_id += n;
    submit_ctx *s = cr_calloc(1, sizeof *s);
    s->c = c;
    s->req = req;
    s->n = (size_t)n;
    s->jobs = cr_calloc(s->n, sizeof *s->jobs);
    s->answer = ids_answer(first, s->n);
    s->token_id = p->id;
    if (idem) {
        snprintf(s->idem, sizeof s->idem, "%s", idem);
    }
    cr_store_txn *txn = cr_store_txn_new();
    if (idem) {
        ctl_idem_persist(c, txn, p->id, idem, s->answer);
    }
    /* The high-water mark of ids: never handed out twice, even when the
     * newest rows are lost or unreadable. */
    char hwm[32];
    snprintf(hwm, sizeof hwm, "%lld", (long long)(first + n - 1));
    cr_store_txn_put(txn, "meta", "job_id_hwm", hwm);
    pthread_mutex_unlock(&c->mu);
    char why[200];
    snprintf(why, sizeof why, "by token '%s' (%s)", p->name, cr_role_name(p->role));
    for (size_t i = 0; i < s->n; i++) {
        ctl_job *j = cr_calloc(1, sizeof *j);
        *j = *proto;
        j->spec = json_incref(proto->spec);
        j->secrets_enc = proto->secrets_enc ? cr_strdup(proto->secrets_enc) : NULL;
        j->reason = cr_strdup("not yet considered");
        j->place = NULL;
        j->id = first + (int64_t)i;
        j->submit_ns = now;
        if (n > 1 || indexes) {
            /* Array tasks share one spec; only these two differ. */
            j->array_index = indexes ? indexes[i] : (int32_t)i;
            j->array_first = first;
        }
        s->jobs[i] = j;
        ctl_job_persist_doc(txn, j, ctl_job_doc_with(j, spec_json), "submitted", why);
    }
    cr_http_defer(req);
    cr_store_submit(c->store, txn, submit_committed, s);
out:
    free(spec_json);
    free(indexes);
    json_decref(v);
    ctl_job_free(proto);
}

/* ------------------------------------------------------------------------ */
/* Reads.                                                                   */

static bool visible(const ctl_job *j, const cr_principal *p)
{
    return j && (p->role == CR_ROLE_ADMIN || strcmp(j->tenant, p->tenant) == 0);
}

static void add_event(void *arg, int64_t job, int64_t time_ns, const char *what, const char *why)
{
    char t[64];
    json_array_append_new(arg,
                          json_pack("{s:s,s:s,s:s}", "time", ctl_time_str(time_ns, t, sizeof t),
                                    "what", what, "why", why));
}

static void job_show(ctl *c, cr_http_req *req, const cr_principal *p, int64_t id)
{
    pthread_mutex_lock(&c->mu);
    ctl_job *j = ctl_job_fetch(c, id);
    json_t *v = visible(j, p) ? ctl_job_json(j) : NULL;
    if (v) {
        ctl_redact_member(c, p, v, "reason");
    }
    pthread_mutex_unlock(&c->mu);
    if (!v) {
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "job %lld not found", (long long)id);
        return;
    }
    json_t *ev = json_array();
    cr_store_job_events(c->store, id, 1000, add_event, ev);
    if (p->role != CR_ROLE_ADMIN) {
        /* Other tenants' job ids and names out of the texts (a preemption
         * names the job it made room for); after the store's callbacks,
         * which must not take mu. */
        pthread_mutex_lock(&c->mu);
        for (size_t i = 0; i < json_array_size(ev); i++) {
            ctl_redact_member(c, p, json_array_get(ev, i), "why");
        }
        pthread_mutex_unlock(&c->mu);
    }
    json_object_set_new(v, "events", ev);
    ctl_reply_json(req, 200, v);
}

/* ------------------------------------------------------------------------ */
/* Actions.                                                                 */

typedef struct action_arg {
    char action[16]; /* cancel|hold|release|requeue */
    int64_t now;     /* wall clock, the same for the stored row and memory */
} action_arg;

/* Tell the agents of a running job's nodes that its desired state changed. */
static void bump_nodes(ctl *c, const ctl_job *j)
{
    for (size_t i = 0; i < j->nplace; i++) {
        ctl_node *n = ctl_node_find(c, j->place[i].node);
        if (n) {
            ctl_node_bump(c, n);
        }
    }
}

/* The user actions as one state change (see ctl_state.c): on a copy with
 * apply false, on the job once stored with apply true. */
static const char *action_change(ctl *c, ctl_job *j, const void *argp, bool apply,
                                 const char **what)
{
    const action_arg *a = argp;
    ctl_job_state was = j->state;
    int64_t id = j->id;
    if (strcmp(a->action, "cancel") == 0) {
        if (ctl_job_terminal(j)) {
            return "is already finished";
        }
        if (was == JS_RUNNING || was == JS_COMPLETING) {
            j->cancel_requested = true;
            j->state = JS_COMPLETING;
            ctl_job_set_reason(j, "cancel requested: stopping");
            *what = "cancel-requested";
            if (apply) {
                bump_nodes(c, j);
            }
        } else {
            j->state = JS_CANCELLED;
            j->end_ns = a->now;
            ctl_job_set_reason(j, "cancelled");
            *what = "cancelled";
            if (apply) {
                ctl_sched_remove(c, id);
                atomic_fetch_add(&c->jobs_finished[JS_CANCELLED], 1);
            }
        }
    } else if (strcmp(a->action, "hold") == 0) {
        if (was != JS_PENDING) {
            return "is not pending";
        }
        j->state = JS_HELD;
        ctl_job_set_reason(j, "held");
        *what = "held";
        if (apply) {
            ctl_sched_remove(c, id);
        }
    } else if (strcmp(a->action, "release") == 0) {
        if (was != JS_HELD) {
            return "is not held";
        }
        j->state = JS_PENDING;
        ctl_job_set_reason(j, "released");
        *what = "released";
        if (apply) {
            ctl_batch_admit(c, j); /* its dependency, throttle or begin time first */
        }
    } else { /* requeue */
        if (was == JS_RUNNING) {
            j->requeue_requested = true;
            j->state = JS_COMPLETING;
            ctl_job_set_reason(j, "requeue requested: stopping");
            *what = "requeue-requested";
            if (apply) {
                bump_nodes(c, j);
            }
        } else if (ctl_job_terminal(j)) {
            j->state = JS_PENDING;
            j->start_ns = j->end_ns = 0;
            j->exit_code = j->signal = 0;
            j->cancel_requested = false;
            j->touch_mono = 0;
            ctl_job_set_reason(j, "requeued");
            *what = "requeued";
            if (apply) {
                if (c->first_active > id) {
                    c->first_active = id; /* active again (see ctl_metrics.c) */
                }
                ctl_batch_admit(c, j);
            }
        } else {
            return "is not running or finished";
        }
    }
    return NULL;
}

typedef struct signal_arg {
    char name[12];
} signal_arg;

/* A signal to a running job as a state change (stored as an event). */
static const char *signal_change(ctl *c, ctl_job *j, const void *argp, bool apply,
                                 const char **what)
{
    const signal_arg *a = argp;
    if (j->state != JS_RUNNING) {
        return "is not running";
    }
    *what = "signalled";
    if (apply) {
        ctl_batch_signal(c, j, a->name); /* the agents deliver it */
    }
    return NULL;
}

static void job_action(ctl *c, cr_http_req *req, const cr_principal *p, int64_t id,
                       const char *action)
{
    char signame[12] = "";
    size_t len;
    const char *body = cr_http_body(req, &len);
    if (len > 0) {
        json_t *v = NULL;
        cr_json_err err;
        static const char *const none[] = {"reason", "signal", NULL};
        const char *sg = NULL;
        if (cr_json_parse_object(body, len, &v, &err) != 0 || cr_json_only(v, "", none, &err) ||
            cr_json_str(v, "", "signal", false, 31, &sg, &err) != 0) {
            json_decref(v);
            ctl_reply_jerr(req, &err);
            return;
        }
        int64_t secs;
        if (sg && ctl_batch_signal_parse(sg, signame, sizeof signame, &secs) != 0) {
            json_decref(v);
            ctl_reply_err(req, 400, CR_EINVAL, "signal",
                          "field 'signal': one of USR1, USR2, TERM, INT, HUP, QUIT, ALRM, CONT, "
                          "KILL, WINCH");
            return;
        }
        json_decref(v);
    }
    if (strcmp(action, "signal") == 0 && !*signame) {
        ctl_reply_err(req, 400, CR_EINVAL, "signal", "field 'signal': required");
        return;
    }
    char why[200];
    snprintf(why, sizeof why, "%s by token '%s'", action, p->name);
    pthread_mutex_lock(&c->mu);
    ctl_job *j = ctl_job_fetch(c, id);
    if (!visible(j, p)) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "job %lld not found", (long long)id);
        return;
    }
    const char *qa = cr_http_query(req, "array");
    bool whole_array = qa && strcmp(qa, "1") == 0 && j->array_first == id;
    if (strcmp(action, "signal") != 0 && !whole_array) {
        /* One job: stored first, then applied (ctl_state.c). */
        action_arg a;
        memset(&a, 0, sizeof a);
        snprintf(a.action, sizeof a.action, "%s", action);
        a.now = cr_now_ns();
        ctl_state_job_change(c, req, j, action_change, &a, sizeof a, why);
        pthread_mutex_unlock(&c->mu);
        return;
    }
    /* A whole array (array=1 on its first id, as scancel ID does) or a
     * signal (to every task of the job or array, once): stored first, then
     * applied, like one job. */
    int64_t *ids = NULL;
    size_t n = 0, cap = 0;
    int64_t array_last = 0;
    for (int64_t k = id;; k++) {
        ctl_job *t = ctl_job_get(c, k);
        if (!t || (k != id && !(whole_array && t->array_first == id))) {
            break;
        }
        CR_GROW(ids, n, cap);
        ids[n++] = k;
        array_last = whole_array ? k : 0;
    }
    if (strcmp(action, "signal") == 0) {
        signal_arg a;
        memset(&a, 0, sizeof a);
        snprintf(a.name, sizeof a.name, "%s", signame);
        char sw[240];
        snprintf(sw, sizeof sw, "SIG%s %s", signame, why);
        ctl_state_jobs_change(c, req, ids, n, array_last, signal_change, &a, sizeof a, sw);
    } else {
        action_arg a;
        memset(&a, 0, sizeof a);
        snprintf(a.action, sizeof a.action, "%s", action);
        a.now = cr_now_ns();
        ctl_state_jobs_change(c, req, ids, n, array_last, action_change, &a, sizeof a, why);
    }
    pthread_mutex_unlock(&c->mu);
    free(ids);
}

void ctl_route_jobs(ctl *c, cr_http_req *req, const cr_principal *p, char **seg, size_t nseg)
{
    const char *m = cr_http_method(req);
    if (p->role != CR_ROLE_ADMIN && p->role != CR_ROLE_USER) {
        ctl_reply_err(req, 403, CR_EPERM, NULL, "role '%s' may not use /v1/jobs",
                      cr_role_name(p->role));
        return;
    }
    if (nseg == 2) {
        if (strcmp(m, "POST") == 0) {
            cr_http_set_route(req, "/v1/jobs");
            jobs_submit(c, req, p);
        } else if (strcmp(m, "GET") == 0) {
            cr_http_set_route(req, "/v1/jobs");
            ctl_jobs_list(c, req, p);
        } else {
            ctl_reply_err(req, 405, CR_ENOTSUP, NULL, "method %s not allowed on /v1/jobs", m);
        }
        return;
    }
    int64_t id = 0, ix = -1;
    char head[32];
    size_t hl = strcspn(seg[2], "_");
    snprintf(head, sizeof head, "%.*s", (int)(hl < sizeof head ? hl : 0), seg[2]);
    if (cr_parse_i64(head, 1, INT64_MAX / 2, &id) != 0 ||
        (seg[2][hl] == '_' && cr_parse_i64(seg[2] + hl + 1, 0, MAX_ARRAY_INDEX, &ix) != 0)) {
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "job '%s' not found", seg[2]);
        return;
    }
    if (ix >= 0) {
        /* ARRAY_INDEX: one task of an array, as Slurm names it */
        pthread_mutex_lock(&c->mu);
        ctl_job *t = ctl_batch_array_task(c, id, (int32_t)ix);
        id = t ? t->id : 0;
        pthread_mutex_unlock(&c->mu);
        if (!id) {
            ctl_reply_err(req, 404, CR_ENOENT, NULL, "job '%s' not found", seg[2]);
            return;
        }
    }
    if (nseg == 3 && strcmp(m, "GET") == 0) {
        cr_http_set_route(req, "/v1/jobs/{id}");
        job_show(c, req, p, id);
        return;
    }
    if (nseg == 4 && strcmp(m, "POST") == 0 &&
        (strcmp(seg[3], "cancel") == 0 || strcmp(seg[3], "hold") == 0 ||
         strcmp(seg[3], "release") == 0 || strcmp(seg[3], "requeue") == 0 ||
         strcmp(seg[3], "signal") == 0)) {
        cr_http_set_route(req, "/v1/jobs/{id}/action");
        job_action(c, req, p, id, seg[3]);
        return;
    }
    if (nseg == 4 && strcmp(m, "GET") == 0 && strcmp(seg[3], "logs") == 0) {
        cr_http_set_route(req, "/v1/jobs/{id}/logs");
        ctl_job_logs(c, req, p, id);
        return;
    }
    ctl_reply_err(req, 404, CR_ENOENT, NULL, "no route %s %s", m, cr_http_path(req));
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
            if (!json_equal(x, json_object_get(parsed, k))) {
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
