/*
 * agent_data.c - a job's datasets staged into the node's data cache
 * (cr_dcache.h) before its process starts (docs/data.md): the progress the
 * status carries to the job's reason, the environment that names each
 * staged file (CORRAL_DATA_<NAME>), the pins released when the job is done.
 * Main thread only, but for the cache's wake-up.
 */
#include "agent_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void woke(void *arg)
{
    agent *a = arg;
    atomic_store(&a->data_woke, 1);
    cr__agent_wake(a);
}

int cr__agent_data_start(agent *a)
{
    if (a->cfg.data_cache_max <= 0) {
        cr_info("data: no data cache (--data-cache-max 0): jobs that name data fail here");
        return 0;
    }
    char dir[1100];
    if (a->cfg.data_cache) {
        snprintf(dir, sizeof dir, "%s", a->cfg.data_cache);
    } else {
        snprintf(dir, sizeof dir, "%s/data", a->cfg.state_dir);
    }
    cr_dcache_s3 s3 = {.endpoint = a->cfg.s3_endpoint,
                       .region = a->cfg.s3_region,
                       .access_key = getenv("AWS_ACCESS_KEY_ID"),
                       .secret_key = getenv("AWS_SECRET_ACCESS_KEY")};
    char why[300];
    int rc = cr_dcache_new(dir, a->cfg.data_cache_max, a->cfg.data_verify_s, &s3, woke, a,
                           &a->dcache, why, sizeof why);
    if (rc != 0) {
        fprintf(stderr, "corral agent: data cache: %s\n", why);
    }
    return rc;
}

void cr__agent_data_stop(agent *a)
{
    cr_dcache_free(a->dcache);
    a->dcache = NULL;
    free(a->staging);
    a->staging = NULL;
    a->nstaging = a->staging_cap = 0;
}

static struct agent_staging *staging_find(agent *a, int64_t job)
{
    for (size_t i = 0; i < a->nstaging; i++) {
        if (a->staging[i].job == job) {
            return &a->staging[i];
        }
    }
    return NULL;
}

static void staging_drop(agent *a, int64_t job)
{
    struct agent_staging *st = staging_find(a, job);
    if (st) {
        *st = a->staging[--a->nstaging];
    }
}

int cr__agent_data_stage(agent *a, const cr_job_spec *s, char ***env, char *why, size_t whylen)
{
    *env = NULL;
    size_t n = json_array_size(s->data);
    if (n == 0) {
        return 1;
    }
    const char *first = json_string_value(json_object_get(json_array_get(s->data, 0), "name"));
    if (!a->dcache) {
        snprintf(why, whylen, "data %s: this node has no data cache (--data-cache-max 0)", first);
        return CR_ENOTSUP;
    }
    cr_dref refs[16];
    char *paths[16] = {NULL};
    for (size_t i = 0; i < n && i < 16; i++) {
        json_t *o = json_array_get(s->data, i);
        refs[i] =
            (cr_dref){.name = json_string_value(json_object_get(o, "name")),
                      .version = (int64_t)json_integer_value(json_object_get(o, "version")),
                      .uri = json_string_value(json_object_get(o, "uri")),
                      .size_bytes = (int64_t)json_integer_value(json_object_get(o, "size_bytes")),
                      .sha256 = json_string_value(json_object_get(o, "sha256"))};
    }
    char msg[400];
    int rc =
        cr_dcache_want(a->dcache, s->job, s->run, refs, n > 16 ? 16 : n, paths, msg, sizeof msg);
    if (rc == CR_DCACHE_STAGING) {
        struct agent_staging *st = staging_find(a, s->job);
        if (!st) {
            CR_GROW(a->staging, a->nstaging, a->staging_cap);
            st = &a->staging[a->nstaging++];
            st->msg[0] = '\0';
            cr_info("agent: job=%lld waits for its data: %s", (long long)s->job, msg);
        }
        st->job = s->job;
        st->run = s->run;
        if (strcmp(st->msg, msg) != 0) {
            a->staging_moved = 1;
            snprintf(st->msg, sizeof st->msg, "%s", msg);
        }
        return 0;
    }
    staging_drop(a, s->job);
    if (rc < 0) {
        snprintf(why, whylen, "%s", msg);
        cr_dcache_release(a->dcache, s->job);
        return rc;
    }
    char **v = cr_calloc(n + 1, sizeof *v);
    for (size_t i = 0; i < n; i++) {
        const char *e = json_string_value(json_object_get(json_array_get(s->data, i), "env"));
        v[i] = cr_asprintf("%s=%s", e, paths[i]);
        free(paths[i]);
    }
    *env = v;
    return 1;
}

void cr__agent_data_sweep(agent *a)
{
    if (!a->dcache) {
        return;
    }
    /* staging of jobs no longer run here */
    for (size_t i = 0; i < a->nstaging;) {
        const cr_job_spec *s = cr_desired_find(&a->desired, a->staging[i].job);
        if (!s || s->action != CR_ACT_RUN || s->run != a->staging[i].run) {
            cr_info("agent: job=%lld no longer wanted here while its data was staged",
                    (long long)a->staging[i].job);
            cr_dcache_release(a->dcache, a->staging[i].job);
            a->staging[i] = a->staging[--a->nstaging];
            continue;
        }
        i++;
    }
    /* jobs re-adopted after a restart hold their data again */
    for (size_t k = 0; k < a->nprocs; k++) {
        const cr_proc *p = &a->procs[k];
        size_t nd = json_array_size(p->spec.data);
        if (p->state == CR_PROC_EXITED || nd == 0 || nd > 16) {
            continue;
        }
        cr_dref refs[16];
        for (size_t i = 0; i < nd; i++) {
            json_t *o = json_array_get(p->spec.data, i);
            refs[i] = (cr_dref){.name = json_string_value(json_object_get(o, "name")),
                                .sha256 = json_string_value(json_object_get(o, "sha256"))};
        }
        cr_dcache_pin(a->dcache, p->job, p->spec.run, refs, nd);
    }
    int64_t ids[256];
    size_t n = cr_dcache_jobs(a->dcache, ids, 256);
    for (size_t i = 0; i < n && i < 256; i++) {
        int held = staging_find(a, ids[i]) != NULL;
        for (size_t k = 0; k < a->nprocs && !held; k++) {
            held = a->procs[k].job == ids[i] && a->procs[k].state != CR_PROC_EXITED;
        }
        if (!held) {
            cr_dcache_release(a->dcache, ids[i]);
        }
    }
}

void cr__agent_data_status(const agent *a, json_t *jobs)
{
    for (size_t i = 0; i < a->nstaging; i++) {
        json_t *j = json_pack("{s:I,s:s,s:i,s:s}", "job", (json_int_t)a->staging[i].job, "state",
                              "running", "pid", 0, "staging", a->staging[i].msg);
        if (a->staging[i].run > 0) {
            json_object_set_new(j, "run", json_integer(a->staging[i].run));
        }
        json_array_append_new(jobs, j);
    }
}

char *cr__agent_ckpt_latest(const char *dir)
{
    char p[PATH_MAX], real[PATH_MAX], rdir[PATH_MAX];
    if (!dir || !realpath(dir, rdir)) {
        return NULL;
    }
    snprintf(p, sizeof p, "%s/latest", dir);
    if (realpath(p, real)) {
        /* the job's own pointer, kept inside its directory */
        size_t n = strlen(rdir);
        if (strncmp(real, rdir, n) == 0 && real[n] == '/') {
            return cr_asprintf("CORRAL_CHECKPOINT_LATEST=%s", real);
        }
        return NULL;
    }
    DIR *d = opendir(dir);
    struct dirent *de;
    char best[512] = "";
    struct timespec bt = {0, 0};
    while (d && (de = readdir(d))) {
        struct stat sb;
        if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof best) {
            continue;
        }
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (lstat(p, &sb) != 0 || S_ISLNK(sb.st_mode)) {
            continue;
        }
        if (!best[0] || sb.st_mtim.tv_sec > bt.tv_sec ||
            (sb.st_mtim.tv_sec == bt.tv_sec && sb.st_mtim.tv_nsec > bt.tv_nsec) ||
            (sb.st_mtim.tv_sec == bt.tv_sec && sb.st_mtim.tv_nsec == bt.tv_nsec &&
             strcmp(de->d_name, best) > 0)) {
            snprintf(best, sizeof best, "%s", de->d_name);
            bt = sb.st_mtim;
        }
    }
    if (d) {
        closedir(d);
    }
    return best[0] ? cr_asprintf("CORRAL_CHECKPOINT_LATEST=%s/%s", rdir, best) : NULL;
}

json_t *cr__agent_data_held(const agent *a)
{
    if (!a->dcache) {
        return NULL;
    }
    char(*held)[65] = cr_calloc(CR_DATA_HELD_MAX, sizeof *held);
    size_t n = cr_dcache_held(a->dcache, held, CR_DATA_HELD_MAX);
    json_t *v = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(v, json_string(held[i]));
    }
    free(held);
    return v;
}

cr_job_spec *cr__agent_data_mounts(const cr_job_spec *s, char **env)
{
    size_t n = json_array_size(s->data);
    if (!s->ctr.image || n == 0 || !env) {
        return NULL;
    }
    json_t *j = cr_job_spec_to_json(s);
    json_t *ctr = json_object_get(j, "container");
    json_t *mounts = json_object_get(ctr, "mounts");
    if (!json_is_array(mounts)) {
        mounts = json_array();
        json_object_set_new(ctr, "mounts", mounts);
    }
    for (size_t i = 0; i < n && env[i]; i++) {
        json_t *o = json_array_get(s->data, i);
        const char *name = json_string_value(json_object_get(o, "name"));
        const char *mount = json_string_value(json_object_get(o, "mount"));
        const char *eq = strchr(env[i], '=');
        char real[PATH_MAX], dst[512];
        if (!eq || !realpath(eq + 1, real)) {
            continue;
        }
        /* the mount point asked, else /corral/data/NAME; the variable
         * names the path inside the container */
        snprintf(dst, sizeof dst, "%s%s", mount ? mount : "/corral/data/", mount ? "" : name);
        char *m = cr_asprintf("%s:%s:ro", real, dst);
        json_array_append_new(mounts, json_string(m));
        free(m);
        char *e = cr_asprintf("%.*s=%s", (int)(eq - env[i]), env[i], dst);
        free(env[i]);
        env[i] = e;
    }
    cr_job_spec *out = cr_calloc(1, sizeof *out);
    char err[256];
    if (cr_job_spec_from_json(j, "", out, err, sizeof err) < 0) {
        cr_error("agent: job=%lld: its data mounts: %s", (long long)s->job, err);
        CR_FREE(out);
    } else {
        cr_job_spec_copy_secrets(out, s); /* to_json leaves them out */
    }
    json_decref(j);
    return out;
}
