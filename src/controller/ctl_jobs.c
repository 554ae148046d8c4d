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
#include "cr_client.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_parse.h"
#include "cr_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARRAY 10000

static const char *const job_members[] = {
    "name",          "tenant",
    "command",       "gpus",
    "gpu_type",      "mig_profile",
    "gpu_mem_gb",    "nodes",
    "kind",          "model",
    "priority",      "time_limit_s",
    "preemptible",   "checkpoint_interval_s",
    "max_retries",   "env",
    "workdir",       "array",
    "cpus",          "mem_bytes",
    "secrets",       "image",
    "image_archive", "mounts",
    "entrypoint",    NULL,
};
static const char *const model_members[] = {"params", "method", "tokens", "precision", NULL};
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

bool ctl_job_terminal(const ctl_job *j)
{
    return j->state == JS_COMPLETED || j->state == JS_FAILED || j->state == JS_CANCELLED;
}

void ctl_job_free(ctl_job *j)
{
    if (!j) {
        return;
    }
    json_decref(j->spec);
    json_decref(j->secrets);
    free(j->secrets_enc);
    free(j->reason);
    free(j->place);
    free(j);
}

void ctl_job_set_reason(ctl_job *j, const char *reason)
{
    if (reason && j->reason && strcmp(reason, j->reason) == 0) {
        return;
    }
    free(j->reason);
    j->reason = reason ? cr_strdup(reason) : NULL;
}

/*
 * Validate a job request (or the request part of a stored doc, with
 * from_doc) into a fresh job with defaults filled in; spec gets the
 * normalised request members. Returns 0 or the error in err.
 */
static int job_parse(const json_t *body, bool from_doc, ctl_job **out, int64_t *array,
                     cr_json_err *err)
{
    int rc = 0;
    ctl_job *j = cr_calloc(1, sizeof *j);
    if (!from_doc && (rc = cr_json_only(body, "", job_members, err)) != 0) {
        goto out;
    }
    const char *name = "job", *tenant = "", *gpu_type = "auto", *mig = "", *kind = "batch";
    const char *workdir = "";
    int64_t gpus = 1, nodes = 0, prio = 0, tl = 0, ckpt = 0, retries = 3, arr = 1, mem_bytes = 0;
    double mem = 0, cpus = 0;
    bool preemptible = false;
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
        (rc = cr_json_int(body, "", "array", false, 1, MAX_ARRAY, &arr, err)) ||
        (rc = cr_json_num(body, "", "cpus", false, 0, 4096, &cpus, err)) ||
        (rc = cr_json_int(body, "", "mem_bytes", false, 0, INT64_C(1) << 62, &mem_bytes, err)) ||
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
        const char *method = "", *prec = "";
        if ((rc = cr_json_only(model, "model", model_members, err)) ||
            (rc = cr_json_num(model, "model", "params", false, 0, 1e14, &params, err)) ||
            (rc = cr_json_num(model, "model", "tokens", false, 0, 1e16, &tokens, err)) ||
            (rc = cr_json_str(model, "model", "method", false, 32, &method, err)) ||
            (rc = cr_json_str(model, "model", "precision", false, 16, &prec, err))) {
            goto out;
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
    if (cpus > 0) {
        json_object_set_new(j->spec, "cpus", json_real(cpus));
    }
    if (mem_bytes > 0) {
        json_object_set_new(j->spec, "mem_bytes", json_integer(mem_bytes));
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
    j->preemptible = preemptible;
    j->time_limit_s = tl;
    j->checkpoint_interval_s = ckpt;
    if (array) {
        *array = arr;
    }
    *out = j;
    j = NULL;
out:
    ctl_job_free(j);
    return rc;
}

json_t *ctl_job_json(const ctl_job *j)
{
    char t[64];
    json_t *v = json_copy(j->spec);
    json_object_set_new(v, "id", json_integer(j->id));
    json_object_set_new(v, "tenant", json_string(j->tenant));
    if (j->array_first > 0) {
        json_object_set_new(v, "array_index", json_integer(j->array_index));
        json_object_set_new(v, "array_first", json_integer(j->array_first));
    }
    json_object_set_new(v, "state", json_string(ctl_job_state_names[j->state]));
    json_object_set_new(v, "reason", json_string(j->reason ? j->reason : ""));
    json_object_set_new(v, "exit_code", json_integer(j->exit_code));
    json_object_set_new(v, "signal", json_integer(j->signal));
    json_object_set_new(v, "retries", json_integer(j->retries));
    json_object_set_new(v, "runs", json_integer(j->runs));
    json_object_set_new(v, "submit_time", json_string(ctl_time_str(j->submit_ns, t, sizeof t)));
    json_object_set_new(v, "start_time", json_string(ctl_time_str(j->start_ns, t, sizeof t)));
    json_object_set_new(v, "end_time", json_string(ctl_time_str(j->end_ns, t, sizeof t)));
    if (*j->run_type) {
        json_object_set_new(v, "run_gpu_type", json_string(j->run_type));
    }
    json_t *pl = json_array();
    for (size_t i = 0; i < j->nplace; i++) {
        json_t *g = json_array();
        for (size_t k = 0; k < j->place[i].ngpus; k++) {
            json_array_append_new(g, json_integer(j->place[i].gpus[k]));
        }
        json_t *p = json_pack("{s:s,s:o}", "node", j->place[i].node, "gpus", g);
        if (*j->place[i].mig_profile) {
            json_object_set_new(p, "mig_profile", json_string(j->place[i].mig_profile));
        }
        json_array_append_new(pl, p);
    }
    json_object_set_new(v, "placement", pl);
    return v;
}

/* The stored form: the API object plus exact times. */
/* A JSON string literal (input is valid UTF-8: validated or our own text). */
static void put_jstr(cr_buf *b, const char *s)
{
    cr_buf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') {
            cr_buf_putc(b, '\\');
            cr_buf_putc(b, (char)*p);
        } else if (*p < 0x20) {
            cr_buf_printf(b, "\\u%04x", *p);
        } else {
            cr_buf_putc(b, (char)*p);
        }
    }
    cr_buf_putc(b, '"');
}

/*
 * The stored form: the API object plus exact times, written directly
 * (submissions are the hot path; building a jansson tree per job costs
 * more than the rest of the request). spec_json is the compact JSON of
 * j->spec, shared by the tasks of an array.
 */
static char *job_doc_with(const ctl_job *j, const char *spec_json)
{
    cr_buf b;
    cr_buf_init(&b);
    size_t n = strlen(spec_json);
    if (n >= 2 && spec_json[n - 1] == '}') {
        cr_buf_append(&b, spec_json, n - 1);
        if (n > 2) {
            cr_buf_putc(&b, ',');
        }
    } else {
        cr_buf_putc(&b, '{');
    }
    char t[64];
    cr_buf_printf(&b, "\"id\":%lld,\"tenant\":", (long long)j->id);
    put_jstr(&b, j->tenant);
    if (j->array_first > 0) {
        cr_buf_printf(&b, ",\"array_index\":%d,\"array_first\":%lld", (int)j->array_index,
                      (long long)j->array_first);
    }
    cr_buf_printf(&b, ",\"state\":\"%s\",\"reason\":", ctl_job_state_names[j->state]);
    put_jstr(&b, j->reason);
    cr_buf_printf(&b, ",\"exit_code\":%d,\"signal\":%d,\"retries\":%d,\"runs\":%d", j->exit_code,
                  j->signal, j->retries, j->runs);
    cr_buf_printf(&b, ",\"submit_time\":\"%s\"", ctl_time_str(j->submit_ns, t, sizeof t));
    cr_buf_printf(&b, ",\"start_time\":\"%s\"", ctl_time_str(j->start_ns, t, sizeof t));
    cr_buf_printf(&b, ",\"end_time\":\"%s\"", ctl_time_str(j->end_ns, t, sizeof t));
    if (*j->run_type) {
        cr_buf_puts(&b, ",\"run_gpu_type\":");
        put_jstr(&b, j->run_type);
    }
    cr_buf_puts(&b, ",\"placement\":[");
    for (size_t i = 0; i < j->nplace; i++) {
        cr_buf_puts(&b, i ? ",{\"node\":" : "{\"node\":");
        put_jstr(&b, j->place[i].node);
        cr_buf_puts(&b, ",\"gpus\":[");
        for (size_t k = 0; k < j->place[i].ngpus; k++) {
            cr_buf_printf(&b, "%s%d", k ? "," : "", j->place[i].gpus[k]);
        }
        cr_buf_putc(&b, ']');
        if (*j->place[i].mig_profile) {
            cr_buf_puts(&b, ",\"mig_profile\":");
            put_jstr(&b, j->place[i].mig_profile);
            cr_buf_puts(&b, ",\"mig_starts\":[");
            for (size_t k = 0; k < j->place[i].ngpus; k++) {
                cr_buf_printf(&b, "%s%d", k ? "," : "", j->place[i].mig_start[k]);
            }
            cr_buf_putc(&b, ']');
        }
        cr_buf_putc(&b, '}');
    }
    cr_buf_printf(&b,
                  "],\"submit_ns\":%lld,\"start_ns\":%lld,\"end_ns\":%lld,\"acct_ns\":%lld,"
                  "\"last_node\":",
                  (long long)j->submit_ns, (long long)j->start_ns, (long long)j->end_ns,
                  (long long)j->acct_ns);
    put_jstr(&b, j->last_node);
    if (j->secrets_enc) {
        cr_buf_puts(&b, ",\"secrets_enc\":");
        put_jstr(&b, j->secrets_enc);
    }
    cr_buf_printf(&b, ",\"cancel_requested\":%s,\"timed_out\":%s,\"requeue_requested\":%s}",
                  j->cancel_requested ? "true" : "false", j->timed_out ? "true" : "false",
                  j->requeue_requested ? "true" : "false");
    return cr_buf_take(&b);
}

static char *job_doc(const ctl_job *j)
{
    char *spec = json_dumps(j->spec, JSON_COMPACT);
    char *doc = job_doc_with(j, spec ? spec : "{}");
    free(spec);
    return doc;
}

static int64_t doc_int(const json_t *v, const char *key)
{
    json_t *x = json_object_get(v, key);
    return json_is_integer(x) ? (int64_t)json_integer_value(x) : 0;
}

int ctl_job_from_doc(const char *doc, ctl_job **out)
{
    json_error_t je;
    json_t *v = json_loads(doc, 0, &je);
    if (!v) {
        return CR_EPARSE;
    }
    cr_json_err err;
    ctl_job *j = NULL;
    int rc = job_parse(v, true, &j, NULL, &err);
    if (rc != 0) {
        cr_error("store: bad job doc: %s", err.message);
        json_decref(v);
        return rc;
    }
    j->id = doc_int(v, "id");
    /* Read-only request members the API adds (arrays, service replicas). */
    static const char *const extra[] = {"service", "port", "run_as", "secret_names", NULL};
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
                                     "secrets_enc",
                                     NULL};
    for (size_t i = 0; ro[i]; i++) {
        json_object_del(j->spec, ro[i]);
    }
    *out = j;
    return 0;
}

ctl_job *ctl_job_get(ctl *c, int64_t id)
{
    if (id < 1 || (size_t)id > c->njobs_slots) {
        return NULL;
    }
    return c->jobs[id - 1];
}

void ctl_job_insert(ctl *c, ctl_job *j)
{
    size_t need = (size_t)j->id;
    if (need > c->capjobs) {
        size_t cap = c->capjobs ? c->capjobs : 1024;
        while (cap < need) {
            cap *= 2;
        }
        c->jobs = cr_reallocarray(c->jobs, cap, sizeof *c->jobs);
        memset(c->jobs + c->capjobs, 0, (cap - c->capjobs) * sizeof *c->jobs);
        c->capjobs = cap;
    }
    if (need > c->njobs_slots) {
        c->njobs_slots = need;
    }
    ctl_job_free(c->jobs[j->id - 1]);
    c->jobs[j->id - 1] = j;
    if (j->id >= c->next_id) {
        c->next_id = j->id + 1;
    }
}

static void persist_doc(cr_store_txn *txn, ctl_job *j, char *doc, const char *what, const char *why)
{
    cr_store_txn_put_job(txn, j->id, j->tenant, ctl_job_state_names[j->state], doc);
    free(doc);
    if (what) {
        cr_store_txn_event(txn, j->id, cr_now_ns(), what, why ? why : "");
    }
}

void ctl_job_persist(ctl *c, cr_store_txn *txn, ctl_job *j, const char *what, const char *why)
{
    char *doc = job_doc(j);
    cr_store_txn_put_job(txn, j->id, j->tenant, ctl_job_state_names[j->state], doc);
    free(doc);
    if (what) {
        cr_store_txn_event(txn, j->id, cr_now_ns(), what, why ? why : "");
        cr_debug("job=%lld %s: %s", (long long)j->id, what, why ? why : "");
    }
}

/* ------------------------------------------------------------------------ */
/* Scheduler queue (consumed by ctl_sched.c).                               */

static void sched_push(ctl *c, int op, int64_t id)
{
    CR_GROW(c->sched_ops, c->nsched_ops, c->capsched_ops);
    c->sched_ops[c->nsched_ops].op = op;
    c->sched_ops[c->nsched_ops].id = id;
    c->nsched_ops++;
    ctl_sched_kick(c);
}

void ctl_sched_add(ctl *c, int64_t id)
{
    sched_push(c, CTL_SCHED_ADD, id);
}

void ctl_sched_remove(ctl *c, int64_t id)
{
    sched_push(c, CTL_SCHED_REMOVE, id);
}

void ctl_sched_requeue(ctl *c, int64_t id)
{
    sched_push(c, CTL_SCHED_REQUEUE, id);
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

/* Charge wall time since acct_ns to the tenant (GPU-seconds; energy comes
 * from heartbeats). */
void ctl_job_account(ctl *c, cr_store_txn *txn, ctl_job *j, int64_t now_ns)
{
    if (j->state != JS_RUNNING && j->state != JS_COMPLETING) {
        return;
    }
    if (j->acct_ns <= 0) {
        j->acct_ns = j->start_ns > 0 ? j->start_ns : now_ns;
    }
    double dt = (double)(now_ns - j->acct_ns) / 1e9;
    if (dt <= 0) {
        return;
    }
    ctl_usage_add(c, txn, j->tenant, *j->run_type ? j->run_type : j->gpu_type, now_ns, dt * j->gpus,
                  0);
    j->acct_ns = now_ns;
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
    ctl_services_job_changed(c, j);
}

/* ------------------------------------------------------------------------ */
/* Answers after commit.                                                    */

typedef struct reply_ctx {
    cr_http_req *req;
    unsigned status;
    json_t *body; /* owned */
} reply_ctx;

static void reply_committed(void *arg, int status)
{
    reply_ctx *r = arg;
    if (status == 0) {
        ctl_reply_json(r->req, r->status, r->body);
    } else {
        json_decref(r->body);
        ctl_reply_err(r->req, 500, status, NULL, "could not commit: %s", cr_strerror(status));
    }
    free(r);
}

/* Defer req and answer it with body once txn is durable. mu held. */
void ctl_commit_reply(ctl *c, cr_store_txn *txn, cr_http_req *req, unsigned status, json_t *body)
{
    reply_ctx *r = cr_calloc(1, sizeof *r);
    r->req = req;
    r->status = status;
    r->body = body;
    cr_http_defer(req);
    cr_store_submit(c->store, txn, reply_committed, r);
}

typedef struct submit_ctx {
    ctl *c;
    cr_http_req *req;
    ctl_job **jobs; /* owned until inserted */
    size_t n;
} submit_ctx;

static void submit_committed(void *arg, int status)
{
    submit_ctx *s = arg;
    ctl *c = s->c;
    if (status != 0) {
        for (size_t i = 0; i < s->n; i++) {
            ctl_job_free(s->jobs[i]);
        }
        ctl_reply_err(s->req, 500, status, NULL, "could not commit the job: %s",
                      cr_strerror(status));
        goto out;
    }
    json_t *ids = json_array();
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < s->n; i++) {
        json_array_append_new(ids, json_integer(s->jobs[i]->id));
        ctl_sched_add(c, s->jobs[i]->id);
        ctl_job_insert(c, s->jobs[i]);
    }
    pthread_mutex_unlock(&c->mu);
    atomic_fetch_add(&c->jobs_submitted, s->n);
    ctl_reply_json(s->req, 201, json_pack("{s:o}", "ids", ids));
out:
    free(s->jobs);
    free(s);
}

static void jobs_submit(ctl *c, cr_http_req *req, const cr_principal *p)
{
    size_t len;
    const char *body = cr_http_body(req, &len);
    json_t *v = NULL;
    cr_json_err err;
    ctl_job *proto = NULL;
    int64_t n = 1;
    if (cr_json_parse_object(body, len, &v, &err) != 0 ||
        job_parse(v, false, &proto, &n, &err) != 0) {
        ctl_reply_jerr(req, &err);
        goto out;
    }
    if (p->role == CR_ROLE_USER) {
        if (*proto->tenant && strcmp(proto->tenant, p->tenant) != 0) {
            ctl_reply_err(req, 403, CR_EPERM, "tenant",
                          "field 'tenant': this token may only submit for tenant '%s'", p->tenant);
            goto out;
        }
        snprintf(proto->tenant, sizeof proto->tenant, "%s", p->tenant);
    } else if (!*proto->tenant) {
        snprintf(proto->tenant, sizeof proto->tenant, "default");
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
    bool known = ctl_tenant_find(c, proto->tenant) != NULL;
    int64_t first = c->next_id;
    if (known) {
        c->next_id += n;
    }
    pthread_mutex_unlock(&c->mu);
    if (!known) {
        ctl_reply_err(req, 400, CR_ENOENT, "tenant", "field 'tenant': unknown tenant '%s'",
                      proto->tenant);
        goto out;
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
    submit_ctx *s = cr_calloc(1, sizeof *s);
    s->c = c;
    s->req = req;
    s->n = (size_t)n;
    s->jobs = cr_calloc(s->n, sizeof *s->jobs);
    cr_store_txn *txn = cr_store_txn_new();
    char why[200];
    snprintf(why, sizeof why, "by token '%s' (%s)", p->name, cr_role_name(p->role));
    char *spec_json = json_dumps(proto->spec, JSON_COMPACT);
    for (size_t i = 0; i < s->n; i++) {
        ctl_job *j = cr_calloc(1, sizeof *j);
        *j = *proto;
        j->spec = json_incref(proto->spec);
        j->secrets_enc = proto->secrets_enc ? cr_strdup(proto->secrets_enc) : NULL;
        j->reason = cr_strdup("not yet considered");
        j->place = NULL;
        j->id = first + (int64_t)i;
        j->submit_ns = now;
        if (n > 1) {
            /* Array tasks share one spec; only these two differ. */
            j->array_index = (int32_t)i;
            j->array_first = first;
        }
        s->jobs[i] = j;
        persist_doc(txn, j, job_doc_with(j, spec_json ? spec_json : "{}"), "submitted", why);
    }
    free(spec_json);
    cr_http_defer(req);
    cr_store_submit(c->store, txn, submit_committed, s);
out:
    json_decref(v);
    ctl_job_free(proto);
}

/* ------------------------------------------------------------------------ */
/* Reads.                                                                   */

static bool visible(const ctl_job *j, const cr_principal *p)
{
    return j && (p->role == CR_ROLE_ADMIN || strcmp(j->tenant, p->tenant) == 0);
}

static void jobs_list(ctl *c, cr_http_req *req, const cr_principal *p)
{
    const char *qs = cr_http_query(req, "state");
    const char *qt = cr_http_query(req, "tenant");
    const char *ql = cr_http_query(req, "limit");
    int64_t limit = 1000;
    bool want[JS_COUNT];
    for (int i = 0; i < JS_COUNT; i++) {
        want[i] = qs == NULL || !*qs;
    }
    if (ql && cr_parse_i64(ql, 1, 1000000, &limit) != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "limit", "query 'limit': must be an integer 1..1000000");
        return;
    }
    if (qs && *qs) {
        char tmp[256];
        snprintf(tmp, sizeof tmp, "%s", qs);
        char *save = NULL;
        for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            bool found = false;
            for (int i = 0; i < JS_COUNT; i++) {
                if (strcmp(t, ctl_job_state_names[i]) == 0) {
                    want[i] = found = true;
                }
            }
            if (strcmp(t, "active") == 0) {
                want[JS_PENDING] = want[JS_HELD] = want[JS_RUNNING] = want[JS_COMPLETING] = true;
                found = true;
            }
            if (!found) {
                ctl_reply_err(req, 400, CR_EINVAL, "state", "query 'state': unknown state '%s'", t);
                return;
            }
        }
    }
    json_t *items = json_array();
    pthread_mutex_lock(&c->mu);
    size_t count = 0;
    for (size_t i = c->njobs_slots; i > 0 && (int64_t)count < limit; i--) {
        ctl_job *j = c->jobs[i - 1];
        if (!j || !visible(j, p) || !want[j->state] || (qt && *qt && strcmp(qt, j->tenant))) {
            continue;
        }
        json_array_insert_new(items, 0, ctl_job_json(j));
        count++;
    }
    pthread_mutex_unlock(&c->mu);
    ctl_reply_json(req, 200, json_pack("{s:o,s:I}", "items", items, "count", (json_int_t)count));
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
    ctl_job *j = ctl_job_get(c, id);
    json_t *v = visible(j, p) ? ctl_job_json(j) : NULL;
    pthread_mutex_unlock(&c->mu);
    if (!v) {
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "job %lld not found", (long long)id);
        return;
    }
    json_t *ev = json_array();
    cr_store_job_events(c->store, id, 1000, add_event, ev);
    json_object_set_new(v, "events", ev);
    ctl_reply_json(req, 200, v);
}

/* ------------------------------------------------------------------------ */
/* Actions.                                                                 */

static void job_action(ctl *c, cr_http_req *req, const cr_principal *p, int64_t id,
                       const char *action)
{
    size_t len;
    const char *body = cr_http_body(req, &len);
    if (len > 0) {
        json_t *v = NULL;
        cr_json_err err;
        static const char *const none[] = {"reason", NULL};
        if (cr_json_parse_object(body, len, &v, &err) != 0 || cr_json_only(v, "", none, &err)) {
            json_decref(v);
            ctl_reply_jerr(req, &err);
            return;
        }
        json_decref(v);
    }
    char why[200];
    snprintf(why, sizeof why, "%s by token '%s'", action, p->name);
    pthread_mutex_lock(&c->mu);
    ctl_job *j = ctl_job_get(c, id);
    if (!visible(j, p)) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "job %lld not found", (long long)id);
        return;
    }
    ctl_job_state was = j->state;
    cr_store_txn *txn = cr_store_txn_new();
    const char *bad = NULL;
    if (strcmp(action, "cancel") == 0) {
        if (ctl_job_terminal(j)) {
            bad = "is already finished";
        } else if (was == JS_RUNNING || was == JS_COMPLETING) {
            j->cancel_requested = true;
            j->state = JS_COMPLETING;
            ctl_job_set_reason(j, "cancel requested: stopping");
            for (size_t i = 0; i < j->nplace; i++) {
                ctl_node *n = ctl_node_find(c, j->place[i].node);
                if (n) {
                    ctl_node_bump(c, n);
                }
            }
            ctl_job_persist(c, txn, j, "cancel-requested", why);
        } else {
            j->state = JS_CANCELLED;
            j->end_ns = cr_now_ns();
            ctl_job_set_reason(j, "cancelled");
            ctl_sched_remove(c, id);
            atomic_fetch_add(&c->jobs_finished[JS_CANCELLED], 1);
            ctl_job_persist(c, txn, j, "cancelled", why);
        }
    } else if (strcmp(action, "hold") == 0) {
        if (was != JS_PENDING) {
            bad = "is not pending";
        } else {
            j->state = JS_HELD;
            ctl_job_set_reason(j, "held");
            ctl_sched_remove(c, id);
            ctl_job_persist(c, txn, j, "held", why);
        }
    } else if (strcmp(action, "release") == 0) {
        if (was != JS_HELD) {
            bad = "is not held";
        } else {
            j->state = JS_PENDING;
            ctl_job_set_reason(j, "released");
            ctl_sched_add(c, id);
            ctl_job_persist(c, txn, j, "released", why);
        }
    } else { /* requeue */
        if (was == JS_RUNNING) {
            j->requeue_requested = true;
            j->state = JS_COMPLETING;
            ctl_job_set_reason(j, "requeue requested: stopping");
            for (size_t i = 0; i < j->nplace; i++) {
                ctl_node *n = ctl_node_find(c, j->place[i].node);
                if (n) {
                    ctl_node_bump(c, n);
                }
            }
            ctl_job_persist(c, txn, j, "requeue-requested", why);
        } else if (ctl_job_terminal(j)) {
            if (c->first_active > id) {
                c->first_active = id; /* active again (see ctl_metrics.c) */
            }
            j->state = JS_PENDING;
            j->start_ns = j->end_ns = 0;
            j->exit_code = j->signal = 0;
            j->cancel_requested = false;
            ctl_job_set_reason(j, "requeued");
            ctl_sched_add(c, id);
            ctl_job_persist(c, txn, j, "requeued", why);
        } else {
            bad = "is not running or finished";
        }
    }
    if (bad) {
        pthread_mutex_unlock(&c->mu);
        cr_store_txn_free(txn);
        ctl_reply_err(req, 409, CR_ECONFLICT, NULL, "job %lld %s (state %s)", (long long)id, bad,
                      ctl_job_state_names[was]);
        return;
    }
    ctl_commit_reply(c, txn, req, 200, ctl_job_json(j));
    pthread_mutex_unlock(&c->mu);
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
            jobs_list(c, req, p);
        } else {
            ctl_reply_err(req, 405, CR_ENOTSUP, NULL, "method %s not allowed on /v1/jobs", m);
        }
        return;
    }
    int64_t id;
    if (cr_parse_i64(seg[2], 1, INT64_MAX / 2, &id) != 0) {
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "job '%s' not found", seg[2]);
        return;
    }
    if (nseg == 3 && strcmp(m, "GET") == 0) {
        cr_http_set_route(req, "/v1/jobs/{id}");
        job_show(c, req, p, id);
        return;
    }
    if (nseg == 4 && strcmp(m, "POST") == 0 &&
        (strcmp(seg[3], "cancel") == 0 || strcmp(seg[3], "hold") == 0 ||
         strcmp(seg[3], "release") == 0 || strcmp(seg[3], "requeue") == 0)) {
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

/* ------------------------------------------------------------------------ */
/* Logs: proxied from the agent of the node the job ran on last.            */

/* Stream sink: the log bytes of a 2xx answer, up to 16 MiB. */
static int collect(void *ud, const char *data, size_t len)
{
    cr_buf *b = ud;
    if (b->len + len > 16 * 1024 * 1024) {
        return 1; /* stop: the proxy answers what came so far */
    }
    cr_buf_append(b, data, len);
    return 0;
}

void ctl_job_logs(ctl *c, cr_http_req *req, const cr_principal *p, int64_t id)
{
    const char *stream = cr_http_query(req, "stream");
    const char *off = cr_http_query(req, "offset");
    int64_t offset = 0;
    if (stream && strcmp(stream, "stdout") != 0 && strcmp(stream, "stderr") != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "stream", "query 'stream': stdout or stderr");
        return;
    }
    if (off && cr_parse_i64(off, 0, INT64_MAX, &offset) != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "offset", "query 'offset': an integer >= 0");
        return;
    }
    char server[300] = "", path[200] = "", secret[CR_TOKEN_TEXT_MAX] = "";
    pthread_mutex_lock(&c->mu);
    ctl_job *j = ctl_job_get(c, id);
    bool vis = visible(j, p);
    if (vis && *j->last_node) {
        ctl_node *n = ctl_node_find(c, j->last_node);
        if (n && n->port > 0) {
            snprintf(server, sizeof server, "%s://%s:%d", n->tls ? "https" : "http", n->addr,
                     n->port);
            snprintf(secret, sizeof secret, "%s", n->agent_secret);
            snprintf(path, sizeof path, "/v1/logs/%lld?stream=%s&offset=%lld", (long long)id,
                     stream ? stream : "stdout", (long long)offset);
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (!vis) {
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "job %lld not found", (long long)id);
        return;
    }
    if (!*server) {
        ctl_reply_err(req, 409, CR_ECONFLICT, NULL, "job %lld has not run yet: no logs",
                      (long long)id);
        return;
    }
    /* To the agent with the secret it got at its registration (never a
     * token that could act on the controller); HTTPS when it serves it. */
    cr_client_opts o = {.server = server,
                        .token = secret,
                        .timeout_ns = 10 * CR_NS_PER_SEC,
                        .ca_file = *c->cfg.agent_ca_file ? c->cfg.agent_ca_file : NULL};
    cr_client *cl = NULL;
    cr_buf b;
    cr_buf_init(&b);
    cr_client_res res;
    cr_client_res_init(&res);
    int rc = cr_client_new(&o, &cl);
    if (rc == 0) {
        rc = cr_client_stream(cl, path, 10 * CR_NS_PER_SEC, 0, collect, &b, &res);
    }
    cr_client_free(cl);
    long status = res.status;
    if (status == 0 || (status >= 200 && status < 300 && rc != 0)) {
        ctl_reply_err(req, 502, CR_EUNAVAIL, NULL, "the agent holding the logs is unreachable: %s",
                      cr_client_res_msg(&res, rc));
        goto out;
    }
    if (status < 200 || status >= 300) {
        /* the agent's own error answer, passed on as it came */
        cr_buf_reset(&b);
        if (res.raw) {
            cr_buf_append(&b, res.raw, res.raw_len);
        }
    }
    size_t len = b.len;
    cr_http_respond(req, status >= 200 && status < 600 ? (unsigned)status : 502,
                    "application/octet-stream", cr_buf_take(&b), len);
out:
    cr_client_res_fini(&res);
    cr_buf_fini(&b);
}

int ctl_job_validate(const char *body, size_t len, cr_json_err *err)
{
    json_t *v = NULL;
    ctl_job *j = NULL, *back = NULL;
    int64_t n = 1;
    int rc = cr_json_parse_object(body, len, &v, err);
    if (rc == 0) {
        rc = job_parse(v, false, &j, &n, err);
    }
    if (rc == 0) {
        /* What is accepted must survive the store: doc out, doc back in. */
        j->id = 1;
        snprintf(j->tenant, sizeof j->tenant, "%s", *j->tenant ? j->tenant : "default");
        char *doc = job_doc(j);
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
    return job_parse(body, false, out, &n, err);
}
