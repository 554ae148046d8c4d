/*
 * desired.c - parse the desired-state document (the job environment is in
 * job_env.c). See cr_desired.h.
 */
#include "cr_desired.h"

#include "cr_alloc.h"
#include "cr_error.h"

#include <sodium.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_JOBS     4096
#define MAX_ARGS     4096
#define MAX_ENV      4096
#define MAX_PLAN_ENV 32
#define MAX_GPUS     64
#define MAX_STRLEN   65536

void cr_strv_free(char **v)
{
    if (v) {
        for (char **p = v; *p; p++) {
            free(*p);
        }
        free(v);
    }
}

static void strv_wipe(char **v)
{
    if (v) {
        for (char **p = v; *p; p++) {
            sodium_memzero(*p, strlen(*p));
        }
    }
    cr_strv_free(v);
}

void cr_job_spec_copy_secrets(cr_job_spec *dst, const cr_job_spec *src)
{
    strv_wipe(dst->secret_env);
    dst->secret_env = NULL;
    dst->secretc = 0;
    memcpy(dst->step_token, src->step_token, sizeof dst->step_token);
    if (!src->secret_env) {
        return;
    }
    dst->secret_env = cr_calloc(src->secretc + 1, sizeof *dst->secret_env);
    for (size_t i = 0; i < src->secretc; i++) {
        dst->secret_env[i] = cr_strdup(src->secret_env[i]);
    }
    dst->secretc = src->secretc;
}

void cr_job_spec_fini(cr_job_spec *s)
{
    cr_strv_free(s->argv);
    cr_strv_free(s->env);
    strv_wipe(s->secret_env);
    cr_strv_free(s->plan_env);
    free(s->workdir);
    free(s->gpus);
    if (s->gpu_uuids) {
        for (size_t i = 0; i < s->uuid_count; i++) {
            free(s->gpu_uuids[i]);
        }
        free(s->gpu_uuids);
    }
    free(s->checkpoint_dir);
    free(s->mig_profile);
    free(s->name);
    free(s->nodelist);
    free(s->script);
    free(s->out_pattern);
    free(s->err_pattern);
    free(s->submit_dir);
    free(s->step_agents);
    sodium_memzero(s->step_token, sizeof s->step_token);
    free(s->ctr.image);
    free(s->ctr.archive);
    cr_strv_free(s->ctr.mounts);
    cr_strv_free(s->ctr.entrypoint);
    free(s->ctr.cluster);
    json_decref(s->data);
    memset(s, 0, sizeof *s);
}

void cr_desired_fini(cr_desired *d)
{
    for (size_t i = 0; i < d->count; i++) {
        cr_job_spec_fini(&d->jobs[i]);
    }
    free(d->jobs);
    free(d->checkpoint_base);
    free(d->layouts);
    json_decref(d->stop_reasons);
    memset(d, 0, sizeof *d);
}

const char *cr_desired_stop_reason(const cr_desired *d, int64_t job)
{
    char key[24];
    snprintf(key, sizeof key, "%lld", (long long)job);
    const char *why = json_string_value(json_object_get(d->stop_reasons, key));
    return why && *why ? why : NULL;
}

const cr_job_spec *cr_desired_find(const cr_desired *d, int64_t job)
{
    for (size_t i = 0; i < d->count; i++) {
        if (d->jobs[i].job == job) {
            return &d->jobs[i];
        }
    }
    return NULL;
}

static int bad(char *err, size_t errlen, const char *path, const char *member, const char *why)
{
    snprintf(err, errlen, "%s%s%s: %s", path, *path && member ? "." : "", member ? member : "",
             why);
    return CR_EINVAL;
}

static int get_int(json_t *o, const char *path, const char *k, int64_t min, int64_t max,
                   int required, int64_t *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) {
        if (required) {
            return bad(err, errlen, path, k, "missing");
        }
        return 0;
    }
    int64_t x;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_real(v) && json_real_value(v) == (double)(int64_t)json_real_value(v)) {
        x = (int64_t)json_real_value(v);
    } else {
        return bad(err, errlen, path, k, "must be an integer");
    }
    if (x < min || x > max) {
        char why[96];
        snprintf(why, sizeof why, "must be an integer %lld..%lld", (long long)min, (long long)max);
        return bad(err, errlen, path, k, why);
    }
    *out = x;
    return 0;
}

static int get_str(json_t *o, const char *path, const char *k, char **out, char *err, size_t errlen)
{
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) {
        return 0;
    }
    if (!json_is_string(v) || json_string_length(v) > MAX_STRLEN ||
        strlen(json_string_value(v)) != json_string_length(v)) {
        return bad(err, errlen, path, k, "must be a string without NUL, up to 64 KiB");
    }
    free(*out);
    *out = cr_strdup(json_string_value(v));
    return 0;
}

static int str_array(json_t *a, const char *path, const char *k, size_t max, char ***out, size_t *n,
                     char *err, size_t errlen)
{
    if (!json_is_array(a) || json_array_size(a) > max) {
        char why[64];
        snprintf(why, sizeof why, "must be an array of up to %zu strings", max);
        return bad(err, errlen, path, k, why);
    }
    size_t cnt = json_array_size(a);
    char **v = cr_calloc(cnt + 1, sizeof *v);
    for (size_t i = 0; i < cnt; i++) {
        json_t *e = json_array_get(a, i);
        if (!json_is_string(e) || json_string_length(e) > MAX_STRLEN ||
            strlen(json_string_value(e)) != json_string_length(e)) {
            char m[64];
            snprintf(m, sizeof m, "%s[%zu]", k, i);
            cr_strv_free(v);
            return bad(err, errlen, path, m, "must be a string without NUL");
        }
        v[i] = cr_strdup(json_string_value(e));
    }
    *out = v;
    *n = cnt;
    return 0;
}

#define MAX_MOUNTS 64

/* "container": {"image", "archive", "mounts", "entrypoint", "cluster", "podman"}. */
static int parse_container(json_t *c, const char *path, cr_container *out, char *err, size_t errlen)
{
    char cp[256];
    snprintf(cp, sizeof cp, "%s%scontainer", path, *path ? "." : "");
    if (!json_is_object(c)) {
        return bad(err, errlen, path, "container", "must be an object");
    }
    int rc;
    if ((rc = get_str(c, cp, "image", &out->image, err, errlen)) < 0 ||
        (rc = get_str(c, cp, "archive", &out->archive, err, errlen)) < 0 ||
        (rc = get_str(c, cp, "cluster", &out->cluster, err, errlen)) < 0) {
        return rc;
    }
    if (!out->image || !*out->image || strlen(out->image) > 512 || out->image[0] == '-') {
        return bad(err, errlen, cp, "image",
                   "must be an image name of 1..512 characters, not starting with '-'");
    }
    if (out->archive && !*out->archive) {
        CR_FREE(out->archive);
    }
    if (out->archive && out->archive[0] != '/') {
        return bad(err, errlen, cp, "archive", "must be an absolute path");
    }
    if (out->cluster && strspn(out->cluster, "0123456789abcdef") != strlen(out->cluster)) {
        return bad(err, errlen, cp, "cluster", "must be hex digits");
    }
    json_t *m = json_object_get(c, "mounts");
    if (m && !json_is_null(m) &&
        (rc = str_array(m, cp, "mounts", MAX_MOUNTS, &out->mounts, &out->mountc, err, errlen)) <
            0) {
        return rc;
    }
    json_t *e = json_object_get(c, "entrypoint");
    if (e && !json_is_null(e) &&
        (rc = str_array(e, cp, "entrypoint", MAX_ARGS, &out->entrypoint, &out->entryc, err,
                        errlen)) < 0) {
        return rc;
    }
    json_t *pm = json_object_get(c, "podman");
    if (pm && !json_is_boolean(pm)) {
        return bad(err, errlen, cp, "podman", "must be true or false");
    }
    out->podman = json_is_true(pm);
    return 0;
}

static json_t *container_json(const cr_container *c)
{
    json_t *j = json_pack("{s:s}", "image", c->image);
    if (c->archive) {
        json_object_set_new(j, "archive", json_string(c->archive));
    }
    if (c->cluster) {
        json_object_set_new(j, "cluster", json_string(c->cluster));
    }
    json_t *m = json_array();
    for (size_t i = 0; i < c->mountc; i++) {
        json_array_append_new(m, json_string(c->mounts[i]));
    }
    json_object_set_new(j, "mounts", m);
    if (c->entrypoint) {
        json_t *e = json_array();
        for (size_t i = 0; i < c->entryc; i++) {
            json_array_append_new(e, json_string(c->entrypoint[i]));
        }
        json_object_set_new(j, "entrypoint", e);
    }
    if (c->podman) {
        json_object_set_new(j, "podman", json_true());
    }
    return j;
}

/* "data": [{"name", "version", "uri", "size_bytes", "sha256", "env",
 * "mount"?}...] (docs/data.md): at most 16, every member checked. */
static int parse_data(json_t *a, const char *path, char *err, size_t errlen)
{
    if (!json_is_array(a) || json_array_size(a) > 16) {
        return bad(err, errlen, path, "data", "must be an array of at most 16 objects");
    }
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *o = json_array_get(a, i);
        char m[64];
        snprintf(m, sizeof m, "data[%zu]", i);
        const char *sha = json_string_value(json_object_get(o, "sha256"));
        const char *env = json_string_value(json_object_get(o, "env"));
        json_t *size = json_object_get(o, "size_bytes"), *ver = json_object_get(o, "version");
        json_t *mount = json_object_get(o, "mount");
        int ok =
            json_is_object(o) && json_is_string(json_object_get(o, "name")) &&
            json_is_string(json_object_get(o, "uri")) && sha && strlen(sha) == 64 && env &&
            (strncmp(env, "CORRAL_DATA_", 12) == 0 || strcmp(env, "CORRAL_MODEL_WEIGHTS") == 0) &&
            !strchr(env, '=') && json_is_integer(size) && json_integer_value(size) > 0 &&
            json_is_integer(ver) && (!mount || json_is_string(mount));
        for (size_t k = 0; ok && k < 64; k++) {
            ok = (sha[k] >= '0' && sha[k] <= '9') || (sha[k] >= 'a' && sha[k] <= 'f');
        }
        if (!ok) {
            return bad(err, errlen, path, m,
                       "must be {name, version, uri, size_bytes > 0, sha256 (64 lowercase hex), "
                       "env CORRAL_DATA_* or CORRAL_MODEL_WEIGHTS, mount?}");
        }
    }
    return 0;
}

int cr_job_spec_from_json(json_t *j, const char *path, cr_job_spec *out, char *err, size_t errlen)
{
    cr_job_spec s;
    memset(&s, 0, sizeof s);
    int rc = 0;
    int64_t v = 0, uid = -1, gid = -1;
    if (!json_is_object(j)) {
        rc = bad(err, errlen, path, NULL, "must be an object");
        goto fail;
    }
    if ((rc = get_int(j, path, "job", 1, INT64_MAX, 1, &s.job, err, errlen)) < 0 ||
        (rc = get_int(j, path, "run", 0, INT32_MAX, 0, &s.run, err, errlen)) < 0 ||
        (rc = get_int(j, path, "port", 0, 65535, 0, &s.port, err, errlen)) < 0 ||
        (rc = get_int(j, path, "uid", -1, UINT32_MAX - 1, 0, &uid, err, errlen)) < 0 ||
        (rc = get_int(j, path, "gid", -1, UINT32_MAX - 1, 0, &gid, err, errlen)) < 0 ||
        (rc = get_int(j, path, "mem_bytes", 0, INT64_MAX, 0, &s.mem_bytes, err, errlen)) < 0 ||
        (rc = get_int(j, path, "pids", 0, 4194304, 0, &s.pids, err, errlen)) < 0 ||
        (rc = get_int(j, path, "gpu_milli", 0, 999, 0, &s.gpu_milli, err, errlen)) < 0 ||
        (rc = get_int(j, path, "gpu_mem_bytes", 0, INT64_C(1) << 50, 0, &s.gpu_mem_bytes, err,
                      errlen)) < 0) {
        goto fail;
    }
    if ((uid >= 0) != (gid >= 0)) {
        rc = bad(err, errlen, path, "gid", "uid and gid come together");
        goto fail;
    }
    s.has_user = uid >= 0;
    s.uid = s.has_user ? uid : 0;
    s.gid = s.has_user ? gid : 0;
    json_t *ar = json_object_get(j, "allow_root");
    if (ar && !json_is_boolean(ar)) {
        rc = bad(err, errlen, path, "allow_root", "must be true or false");
        goto fail;
    }
    s.allow_root = json_is_true(ar);
    json_t *cpus = json_object_get(j, "cpus");
    if (cpus && !json_is_null(cpus)) {
        if (!json_is_number(cpus) || json_number_value(cpus) < 0 ||
            json_number_value(cpus) > 65536) {
            rc = bad(err, errlen, path, "cpus", "must be a number of cores 0..65536");
            goto fail;
        }
        s.cpus = json_number_value(cpus);
    }
    json_t *ap = json_object_get(j, "assign_port");
    if (ap && !json_is_boolean(ap)) {
        rc = bad(err, errlen, path, "assign_port", "must be true or false");
        goto fail;
    }
    s.assign_port = json_is_true(ap);
    json_t *kr = json_object_get(j, "keep_running_on_partition");
    if (kr && !json_is_boolean(kr)) {
        rc = bad(err, errlen, path, "keep_running_on_partition", "must be true or false");
        goto fail;
    }
    s.keep_running = json_is_true(kr);
    s.batch = json_is_true(json_object_get(j, "batch"));
    json_t *cpt = json_object_get(j, "cpus_per_task");
    if (cpt &&
        (!json_is_number(cpt) || json_number_value(cpt) < 0 || json_number_value(cpt) > 4096)) {
        rc = bad(err, errlen, path, "cpus_per_task", "must be a number 0..4096");
        goto fail;
    }
    s.cpus_per_task = cpt ? json_number_value(cpt) : 0;
    s.ntasks_unset = json_is_true(json_object_get(j, "ntasks_unset"));
    const char *stok = json_string_value(json_object_get(j, "step_token"));
    if (stok) {
        if (strlen(stok) >= sizeof s.step_token ||
            strspn(stok, "0123456789abcdef") != strlen(stok)) {
            rc = bad(err, errlen, path, "step_token", "must be hex, up to 70 characters");
            goto fail;
        }
        snprintf(s.step_token, sizeof s.step_token, "%s", stok);
    }
    json_t *act = json_object_get(j, "action");
    if (act && !json_is_null(act)) {
        const char *a = json_string_value(act);
        if (a && strcmp(a, "run") == 0) {
            s.action = CR_ACT_RUN;
        } else if (a && strcmp(a, "stop") == 0) {
            s.action = CR_ACT_STOP;
        } else {
            rc = bad(err, errlen, path, "action", "must be \"run\" or \"stop\"");
            goto fail;
        }
    }
    json_t *cmd = json_object_get(j, "command");
    if (cmd) {
        if ((rc = str_array(cmd, path, "command", MAX_ARGS, &s.argv, &s.argc, err, errlen)) < 0) {
            goto fail;
        }
    }
    if (s.action == CR_ACT_RUN && s.argc == 0) {
        rc = bad(err, errlen, path, "command", "must be a non-empty array of strings");
        goto fail;
    }
    if (!s.argv) {
        s.argv = cr_calloc(1, sizeof *s.argv);
    }
    json_t *env = json_object_get(j, "env");
    s.env = cr_calloc(1, sizeof *s.env);
    if (env && !json_is_null(env)) {
        if (!json_is_object(env) || json_object_size(env) > MAX_ENV) {
            rc = bad(err, errlen, path, "env", "must be an object of strings");
            goto fail;
        }
        size_t n = json_object_size(env), i = 0;
        cr_strv_free(s.env);
        s.env = cr_calloc(n + 1, sizeof *s.env);
        const char *k;
        json_t *ev;
        json_object_foreach(env, k, ev)
        {
            char m[300];
            snprintf(m, sizeof m, "env.%.256s", k);
            if (!*k || strchr(k, '=') || !json_is_string(ev) ||
                strlen(json_string_value(ev)) != json_string_length(ev)) {
                rc = bad(err, errlen, path, m, "must be a string, and names non-empty without '='");
                goto fail;
            }
            s.env[i++] = cr_asprintf("%s=%s", k, json_string_value(ev));
        }
        s.envc = i;
    }
    json_t *senv = json_object_get(j, "secret_env");
    if (senv && !json_is_null(senv)) {
        if (!json_is_object(senv) || json_object_size(senv) > MAX_ENV) {
            rc = bad(err, errlen, path, "secret_env", "must be an object of strings");
            goto fail;
        }
        s.secret_env = cr_calloc(json_object_size(senv) + 1, sizeof *s.secret_env);
        const char *k;
        json_t *ev;
        json_object_foreach(senv, k, ev)
        {
            char m[300];
            snprintf(m, sizeof m, "secret_env.%.256s", k);
            if (!*k || strchr(k, '=') || !json_is_string(ev) ||
                strlen(json_string_value(ev)) != json_string_length(ev)) {
                rc = bad(err, errlen, path, m, "must be a string, and names non-empty without '='");
                goto fail;
            }
            s.secret_env[s.secretc++] = cr_asprintf("%s=%s", k, json_string_value(ev));
        }
    }
    json_t *penv = json_object_get(j, "plan_env");
    if (penv && !json_is_null(penv)) {
        if (!json_is_object(penv) || json_object_size(penv) > MAX_PLAN_ENV) {
            rc = bad(err, errlen, path, "plan_env", "must be an object of strings");
            goto fail;
        }
        s.plan_env = cr_calloc(json_object_size(penv) + 1, sizeof *s.plan_env);
        const char *k;
        json_t *ev;
        json_object_foreach(penv, k, ev)
        {
            char m[300];
            snprintf(m, sizeof m, "plan_env.%.256s", k);
            if (strncmp(k, "CORRAL_", 7) != 0 || strchr(k, '=') || !json_is_string(ev) ||
                strlen(json_string_value(ev)) != json_string_length(ev)) {
                rc = bad(err, errlen, path, m, "must be a string, and names CORRAL_* without '='");
                goto fail;
            }
            s.plan_env[s.planc++] = cr_asprintf("%s=%s", k, json_string_value(ev));
        }
    }
    s.array_index = -1;
    if ((rc = get_str(j, path, "workdir", &s.workdir, err, errlen)) < 0 ||
        (rc = get_str(j, path, "checkpoint_dir", &s.checkpoint_dir, err, errlen)) < 0 ||
        (rc = get_str(j, path, "mig_profile", &s.mig_profile, err, errlen)) < 0 ||
        (rc = get_str(j, path, "name", &s.name, err, errlen)) < 0 ||
        (rc = get_str(j, path, "nodelist", &s.nodelist, err, errlen)) < 0 ||
        (rc = get_str(j, path, "script", &s.script, err, errlen)) < 0 ||
        (rc = get_str(j, path, "output", &s.out_pattern, err, errlen)) < 0 ||
        (rc = get_str(j, path, "error", &s.err_pattern, err, errlen)) < 0 ||
        (rc = get_str(j, path, "submit_dir", &s.submit_dir, err, errlen)) < 0 ||
        (rc = get_str(j, path, "step_agents", &s.step_agents, err, errlen)) < 0 ||
        (rc = get_int(j, path, "array_index", -1, INT32_MAX, 0, &s.array_index, err, errlen)) < 0 ||
        (rc = get_int(j, path, "array_job", 0, INT64_MAX, 0, &s.array_job, err, errlen)) < 0 ||
        (rc = get_int(j, path, "array_count", 0, INT32_MAX, 0, &s.array_count, err, errlen)) < 0 ||
        (rc = get_int(j, path, "array_min", 0, INT32_MAX, 0, &s.array_min, err, errlen)) < 0 ||
        (rc = get_int(j, path, "array_max", 0, INT32_MAX, 0, &s.array_max, err, errlen)) < 0 ||
        (rc = get_int(j, path, "array_step", 0, INT32_MAX, 0, &s.array_step, err, errlen)) < 0) {
        goto fail;
    }
    json_t *tn = json_object_get(j, "tenant");
    if (tn && !json_is_null(tn)) {
        if (!json_is_string(tn) || json_string_length(tn) >= sizeof s.tenant ||
            strlen(json_string_value(tn)) != json_string_length(tn)) {
            rc = bad(err, errlen, path, "tenant", "must be a string of up to 63 bytes");
            goto fail;
        }
        snprintf(s.tenant, sizeof s.tenant, "%s", json_string_value(tn));
    }
    /* "" means "not set" (the controller sends empty strings for defaults). */
    char **opt[] = {&s.workdir, &s.checkpoint_dir, &s.mig_profile, &s.name,      &s.nodelist,
                    &s.script,  &s.out_pattern,    &s.err_pattern, &s.submit_dir};
    const char *om = json_string_value(json_object_get(j, "open_mode"));
    s.open_append = om && strcmp(om, "append") == 0;
    for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++) {
        if (*opt[i] && !**opt[i]) {
            CR_FREE(*opt[i]);
        }
    }
    json_t *gpus = json_object_get(j, "gpus");
    if (gpus && !json_is_null(gpus)) {
        if (!json_is_array(gpus) || json_array_size(gpus) > MAX_GPUS) {
            rc = bad(err, errlen, path, "gpus", "must be an array of up to 64 GPU indexes");
            goto fail;
        }
        s.gpu_count = json_array_size(gpus);
        s.gpus = cr_calloc(s.gpu_count + 1, sizeof *s.gpus);
        for (size_t i = 0; i < s.gpu_count; i++) {
            json_t *e = json_array_get(gpus, i);
            if (!json_is_integer(e) || json_integer_value(e) < 0 ||
                json_integer_value(e) >= MAX_GPUS) {
                char m[32];
                snprintf(m, sizeof m, "gpus[%zu]", i);
                rc = bad(err, errlen, path, m, "must be an integer 0..63");
                goto fail;
            }
            s.gpus[i] = (int)json_integer_value(e);
        }
    }
    json_t *uu = json_object_get(j, "gpu_uuids");
    if (uu && !json_is_null(uu)) {
        char **tmp = NULL;
        if ((rc = str_array(uu, path, "gpu_uuids", MAX_GPUS * 8, &tmp, &s.uuid_count, err,
                            errlen)) < 0) {
            goto fail;
        }
        s.gpu_uuids = tmp;
    }
    s.grace_ns = 30 * INT64_C(1000000000);
    json_t *g = json_object_get(j, "grace_s");
    if (g && !json_is_null(g)) {
        if (!json_is_number(g) || json_number_value(g) < 0 || json_number_value(g) > 86400) {
            rc = bad(err, errlen, path, "grace_s", "must be a number of seconds 0..86400");
            goto fail;
        }
        s.grace_ns = (int64_t)(json_number_value(g) * 1e9);
    }
    json_t *sig = json_object_get(j, "signal");
    if (sig && !json_is_null(sig)) {
        const char *sn = json_string_value(json_object_get(sig, "name"));
        json_t *at = json_object_get(sig, "at");
        if (!json_is_object(sig) || !sn || strlen(sn) >= sizeof s.signal_name ||
            !json_is_integer(at) || json_integer_value(at) < 0) {
            rc = bad(err, errlen, path, "signal", "must be {\"name\": SIG, \"at\": N >= 0}");
            goto fail;
        }
        snprintf(s.signal_name, sizeof s.signal_name, "%s", sn);
        s.signal_at = (int64_t)json_integer_value(at);
    }
    json_t *cks = json_object_get(j, "checkpoint_signal");
    if (cks && !json_is_null(cks)) {
        const char *cn = json_string_value(cks);
        if (!cn || strlen(cn) >= sizeof s.ckpt_signal) {
            rc = bad(err, errlen, path, "checkpoint_signal", "must be a signal name");
            goto fail;
        }
        snprintf(s.ckpt_signal, sizeof s.ckpt_signal, "%s", cn);
    }
    s.resume = json_is_true(json_object_get(j, "resume"));
    json_t *gang = json_object_get(j, "gang");
    if (gang && !json_is_null(gang)) {
        char gp[256];
        snprintf(gp, sizeof gp, "%s%sgang", path, *path ? "." : "");
        if (!json_is_object(gang)) {
            rc = bad(err, errlen, path, "gang", "must be an object");
            goto fail;
        }
        char *addr = NULL;
        if ((rc = get_str(gang, gp, "master_addr", &addr, err, errlen)) < 0) {
            goto fail;
        }
        if (!addr || !*addr || strlen(addr) >= sizeof s.gang.master_addr) {
            free(addr);
            rc = bad(err, errlen, gp, "master_addr", "must be a host name or address");
            goto fail;
        }
        snprintf(s.gang.master_addr, sizeof s.gang.master_addr, "%s", addr);
        free(addr);
        struct {
            const char *k;
            int *dst;
            int64_t min, max, def;
            int req;
        } f[] = {
            /* 0: rank 0's agent reserves one (and reports it); the other
             * nodes wait for it */
            {"master_port", &s.gang.master_port, 0, 65535, 0, 1},
            {"world_size", &s.gang.world_size, 1, 1 << 20, 0, 1},
            {"node_rank", &s.gang.node_rank, 0, 1 << 20, 0, 1},
            {"nnodes", &s.gang.nnodes, 1, 1 << 20, 1, 0},
            {"local_world_size", &s.gang.local_world_size, 1, 4096, 1, 0},
            {"rank_offset", &s.gang.rank_offset, 0, 1 << 20, -1, 0},
            {"tasks_per_node", &s.gang.tasks_per_node, 0, CR_MAX_TASKS_PER_NODE, 0, 0},
            {"gpus_per_node", &s.gang.gpus_per_node, 0, MAX_GPUS, 0, 0},
            {"launcher", &s.gang.launcher, 0, 1, 0, 0},
        };
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
            v = f[i].def;
            if ((rc = get_int(gang, gp, f[i].k, f[i].min, f[i].max, f[i].req, &v, err, errlen)) <
                0) {
                goto fail;
            }
            *f[i].dst = (int)v;
        }
        if (s.gang.rank_offset < 0) {
            s.gang.rank_offset = s.gang.node_rank * s.gang.local_world_size;
        }
        if (s.gang.node_rank >= s.gang.nnodes) {
            rc = bad(err, errlen, gp, "node_rank", "must be below nnodes");
            goto fail;
        }
        if (s.gang.tasks_per_node > 0 &&
            (int64_t)s.gang.nnodes * s.gang.tasks_per_node != s.gang.world_size) {
            rc = bad(err, errlen, gp, "world_size", "must be nnodes * tasks_per_node");
            goto fail;
        }
        s.has_gang = 1;
    }
    json_t *ctr = json_object_get(j, "container");
    if (ctr && !json_is_null(ctr) && (rc = parse_container(ctr, path, &s.ctr, err, errlen)) < 0) {
        goto fail;
    }
    json_t *data = json_object_get(j, "data");
    if (data && !json_is_null(data)) {
        if ((rc = parse_data(data, path, err, errlen)) < 0) {
            goto fail;
        }
        s.data = json_incref(data);
    }
    *out = s;
    return 0;
fail:
    cr_job_spec_fini(&s);
    return rc;
}

json_t *cr_job_spec_to_json(const cr_job_spec *s)
{
    json_t *j = json_object();
    json_object_set_new(j, "job", json_integer(s->job));
    if (s->run > 0) {
        json_object_set_new(j, "run", json_integer(s->run));
    }
    if (s->keep_running) {
        json_object_set_new(j, "keep_running_on_partition", json_true());
    }
    if (s->batch) {
        json_object_set_new(j, "batch", json_true()); /* (step_token: in memory only) */
    }
    if (s->assign_port) {
        json_object_set_new(j, "assign_port", json_true());
    }
    if (s->port > 0) {
        json_object_set_new(j, "port", json_integer(s->port));
    }
    json_object_set_new(j, "action", json_string(s->action == CR_ACT_STOP ? "stop" : "run"));
    json_t *a = json_array();
    for (size_t i = 0; i < s->argc; i++) {
        json_array_append_new(a, json_string(s->argv[i]));
    }
    json_object_set_new(j, "command", a);
    json_t *e = json_object();
    for (size_t i = 0; i < s->envc; i++) {
        const char *eq = strchr(s->env[i], '=');
        char *k = cr_strndup(s->env[i], (size_t)(eq - s->env[i]));
        json_object_set_new(e, k, json_string(eq + 1));
        free(k);
    }
    json_object_set_new(j, "env", e);
    if (s->plan_env) {
        json_t *pe = json_object();
        for (size_t i = 0; i < s->planc; i++) {
            const char *eq = strchr(s->plan_env[i], '=');
            char *k = cr_strndup(s->plan_env[i], (size_t)(eq - s->plan_env[i]));
            json_object_set_new(pe, k, json_string(eq + 1));
            free(k);
        }
        json_object_set_new(j, "plan_env", pe);
    }
    if (s->workdir) {
        json_object_set_new(j, "workdir", json_string(s->workdir));
    }
    if (s->checkpoint_dir) {
        json_object_set_new(j, "checkpoint_dir", json_string(s->checkpoint_dir));
    }
    if (s->mig_profile) {
        json_object_set_new(j, "mig_profile", json_string(s->mig_profile));
    }
    if (*s->tenant) {
        json_object_set_new(j, "tenant", json_string(s->tenant));
    }
    if (s->gpu_milli || s->gpu_mem_bytes) {
        json_object_set_new(j, "gpu_milli", json_integer(s->gpu_milli));
        json_object_set_new(j, "gpu_mem_bytes", json_integer(s->gpu_mem_bytes));
    }
    json_t *g = json_array();
    for (size_t i = 0; i < s->gpu_count; i++) {
        json_array_append_new(g, json_integer(s->gpus[i]));
    }
    json_object_set_new(j, "gpus", g);
    json_t *u = json_array();
    for (size_t i = 0; i < s->uuid_count; i++) {
        json_array_append_new(u, json_string(s->gpu_uuids[i]));
    }
    json_object_set_new(j, "gpu_uuids", u);
    json_object_set_new(j, "grace_s", json_real((double)s->grace_ns / 1e9));
    if (s->has_user) {
        json_object_set_new(j, "uid", json_integer(s->uid));
        json_object_set_new(j, "gid", json_integer(s->gid));
    }
    if (s->allow_root) {
        json_object_set_new(j, "allow_root", json_true());
    }
    if (s->cpus > 0) {
        json_object_set_new(j, "cpus", json_real(s->cpus));
    }
    if (s->mem_bytes > 0) {
        json_object_set_new(j, "mem_bytes", json_integer(s->mem_bytes));
    }
    if (s->pids > 0) {
        json_object_set_new(j, "pids", json_integer(s->pids));
    }
    if (s->has_gang) {
        json_t *gg =
            json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:i}", "master_addr", s->gang.master_addr,
                      "master_port", s->gang.master_port, "world_size", s->gang.world_size,
                      "node_rank", s->gang.node_rank, "nnodes", s->gang.nnodes, "local_world_size",
                      s->gang.local_world_size, "rank_offset", s->gang.rank_offset);
        if (s->gang.tasks_per_node > 0) {
            json_object_set_new(gg, "tasks_per_node", json_integer(s->gang.tasks_per_node));
            json_object_set_new(gg, "gpus_per_node", json_integer(s->gang.gpus_per_node));
            json_object_set_new(gg, "launcher", json_integer(s->gang.launcher));
        }
        json_object_set_new(j, "gang", gg);
    }
    const struct {
        const char *k;
        const char *v;
    } strs[] = {{"name", s->name},
                {"nodelist", s->nodelist},
                {"script", s->script},
                {"output", s->out_pattern},
                {"error", s->err_pattern},
                {"submit_dir", s->submit_dir},
                {"step_agents", s->step_agents},
                {"open_mode", s->open_append ? "append" : NULL}};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        if (strs[i].v) {
            json_object_set_new(j, strs[i].k, json_string(strs[i].v));
        }
    }
    if (s->ckpt_signal[0]) {
        json_object_set_new(j, "checkpoint_signal", json_string(s->ckpt_signal));
    }
    if (s->resume) {
        json_object_set_new(j, "resume", json_true());
    }
    if (s->signal_at > 0) {
        json_object_set_new(
            j, "signal",
            json_pack("{s:s,s:I}", "name", s->signal_name, "at", (json_int_t)s->signal_at));
    }
    if (s->cpus_per_task > 0) {
        json_object_set_new(j, "cpus_per_task", json_real(s->cpus_per_task));
    }
    if (s->ntasks_unset) {
        json_object_set_new(j, "ntasks_unset", json_true());
    }
    if (s->array_count > 0) {
        json_object_set_new(j, "array_count", json_integer(s->array_count));
        json_object_set_new(j, "array_min", json_integer(s->array_min));
        json_object_set_new(j, "array_max", json_integer(s->array_max));
        json_object_set_new(j, "array_step", json_integer(s->array_step));
    }
    if (s->array_index >= 0) {
        json_object_set_new(j, "array_index", json_integer(s->array_index));
        json_object_set_new(j, "array_job", json_integer(s->array_job));
    }
    if (s->ctr.image) {
        json_object_set_new(j, "container", container_json(&s->ctr));
    }
    if (s->data) {
        json_object_set(j, "data", s->data);
    }
    return j;
}

/* "mig_layouts": [{"gpu": I, "instances": [{"profile", "slices",
 * "mem_slices", "start", "uuid"?}...]}...] (dynamic MIG, docs/api.md). */
static int parse_layouts(json_t *arr, cr_desired *d, char *err, size_t errlen)
{
    if (!json_is_array(arr) || json_array_size(arr) > CR_GPU_MAX) {
        return bad(err, errlen, "", "mig_layouts", "must be an array of up to 64 layouts");
    }
    d->layouts = cr_calloc(json_array_size(arr) + 1, sizeof *d->layouts);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *l = json_array_get(arr, i), *insts = json_object_get(l, "instances");
        char path[48];
        snprintf(path, sizeof path, "mig_layouts[%zu]", i);
        cr_mig_layout *ml = &d->layouts[d->nlayouts++];
        int64_t v;
        int rc;
        if (!json_is_object(l)) {
            return bad(err, errlen, path, NULL, "must be an object");
        }
        if ((rc = get_int(l, path, "gpu", 0, CR_GPU_MAX - 1, 1, &v, err, errlen)) < 0) {
            return rc;
        }
        ml->gpu = (int)v;
        if (!json_is_array(insts) || json_array_size(insts) > CR_GPU_MAX_MIG) {
            return bad(err, errlen, path, "instances", "must be an array of up to 8 instances");
        }
        for (size_t k = 0; k < json_array_size(insts); k++) {
            json_t *m = json_array_get(insts, k);
            char ip[80];
            snprintf(ip, sizeof ip, "%s.instances[%zu]", path, k);
            cr_mig_want *w = &ml->inst[ml->n++];
            const char *prof = json_string_value(json_object_get(m, "profile"));
            const char *uuid = json_string_value(json_object_get(m, "uuid"));
            if (!json_is_object(m)) {
                return bad(err, errlen, ip, NULL, "must be an object");
            }
            if (!prof || !*prof || strlen(prof) >= sizeof w->profile) {
                return bad(err, errlen, ip, "profile", "must be a profile name like 2g.12gb");
            }
            if (json_object_get(m, "uuid") && (!uuid || strlen(uuid) >= sizeof w->uuid)) {
                return bad(err, errlen, ip, "uuid", "must be a string of up to 95 bytes");
            }
            snprintf(w->profile, sizeof w->profile, "%s", prof);
            snprintf(w->uuid, sizeof w->uuid, "%s", uuid ? uuid : "");
            if ((rc = get_int(m, ip, "slices", 1, 8, 1, &v, err, errlen)) < 0) {
                return rc;
            }
            w->slices = (int)v;
            if ((rc = get_int(m, ip, "mem_slices", 1, 8, 1, &v, err, errlen)) < 0) {
                return rc;
            }
            w->mem_slices = (int)v;
            if ((rc = get_int(m, ip, "start", 0, 7, 1, &v, err, errlen)) < 0) {
                return rc;
            }
            w->start = (int)v;
        }
    }
    return 0;
}

int cr_desired_parse(const char *text, size_t len, cr_desired *out, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    int rc = 0;
    cr_desired d;
    memset(&d, 0, sizeof d);
    if (!root) {
        snprintf(err, errlen, "desired state: line %d column %d: %s", je.line, je.column, je.text);
        return CR_EPARSE;
    }
    if (!json_is_object(root)) {
        rc = bad(err, errlen, "", "desired state", "must be an object");
        goto out;
    }
    if ((rc = get_int(root, "", "version", 0, INT64_MAX, 1, &d.version, err, errlen)) < 0 ||
        (rc = get_int(root, "", "checkpoint_retention_s", 0, INT64_MAX / 1000000000, 0,
                      &d.checkpoint_retention_s, err, errlen)) < 0 ||
        (rc = get_str(root, "", "checkpoint_base", &d.checkpoint_base, err, errlen)) < 0 ||
        (rc = get_int(root, "", "power_cap_w", 0, CR_POWER_CAP_MAX_W, 0, &d.power_cap_w, err,
                      errlen)) < 0) {
        goto out;
    }
    if (d.checkpoint_base && d.checkpoint_base[0] != '/') {
        rc = bad(err, errlen, "", "checkpoint_base", "must be an absolute path");
        goto out;
    }
    json_t *layouts = json_object_get(root, "mig_layouts");
    if (layouts && !json_is_null(layouts) && (rc = parse_layouts(layouts, &d, err, errlen)) < 0) {
        goto out;
    }
    json_t *sr = json_object_get(root, "stop_reasons");
    if (json_is_object(sr) && json_object_size(sr) <= 64) {
        d.stop_reasons = json_incref(sr);
    }
    json_t *jobs = json_object_get(root, "jobs");
    if (jobs && !json_is_null(jobs)) {
        if (!json_is_array(jobs) || json_array_size(jobs) > MAX_JOBS) {
            rc = bad(err, errlen, "", "jobs", "must be an array of up to 4096 jobs");
            goto out;
        }
        d.jobs = cr_calloc(json_array_size(jobs) + 1, sizeof *d.jobs);
        for (size_t i = 0; i < json_array_size(jobs); i++) {
            char path[32];
            snprintf(path, sizeof path, "jobs[%zu]", i);
            rc =
                cr_job_spec_from_json(json_array_get(jobs, i), path, &d.jobs[d.count], err, errlen);
            if (rc < 0) {
                goto out;
            }
            d.count++;
            for (size_t k = 0; k + 1 < d.count; k++) {
                if (d.jobs[k].job == d.jobs[d.count - 1].job) {
                    rc = bad(err, errlen, path, "job", "listed twice");
                    goto out;
                }
            }
        }
    }
    *out = d;
    memset(&d, 0, sizeof d);
out:
    cr_desired_fini(&d);
    json_decref(root);
    return rc;
}
