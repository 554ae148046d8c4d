/*
 * store_migrate.c - copies one store into an empty one; see
 * cr_store_migrate.h.
 */
#include "cr_store_migrate.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_etcd.h"
#include "cr_store.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Ops per copying transaction: splittable, so the etcd writer packs them
 * to its limits; a bound keeps memory flat on big stores. */
#define COPY_OPS 2000

typedef struct copier {
    cr_store *dst;
    cr_store_txn *t;
    size_t ops;
    int rc;            /* first failure */
    cr_store_counts n; /* rows copied */
    const char *kind;  /* objects being copied */
} copier;

static void flush(copier *c)
{
    if (c->ops == 0) {
        return;
    }
    cr_store_txn_splittable(c->t);
    int rc = cr_store_commit(c->dst, c->t);
    if (rc != 0 && c->rc == 0) {
        c->rc = rc;
    }
    c->t = cr_store_txn_new();
    c->ops = 0;
}

static void counted(copier *c)
{
    if (++c->ops >= COPY_OPS) {
        flush(c);
    }
}

static void copy_job(void *arg, int64_t id, const char *tenant, const char *state, const char *doc)
{
    copier *c = arg;
    cr_store_txn_put_job(c->t, id, tenant, state, doc);
    c->n.jobs++;
    counted(c);
}

static void copy_event(void *arg, int64_t job, int64_t time_ns, const char *what, const char *why)
{
    copier *c = arg;
    cr_store_txn_event(c->t, job, time_ns, what, why);
    c->n.events++;
    counted(c);
}

static void copy_obj(void *arg, const char *key, const char *doc)
{
    copier *c = arg;
    cr_store_txn_put(c->t, c->kind, key, doc);
    c->n.objects++;
    counted(c);
}

static void copy_usage(void *arg, const char *tenant, const char *gpu_type, const char *day,
                       double gpu_s, double energy_j, double cost)
{
    copier *c = arg;
    cr_store_txn_usage(c->t, tenant, gpu_type, day, gpu_s, energy_j, cost);
    c->n.usage++;
    counted(c);
}

/* Counting (the same loaders, nothing kept). */
static void n_job(void *arg, int64_t id, const char *tenant, const char *state, const char *doc)
{
    ((cr_store_counts *)arg)->jobs++;
}

static void n_event(void *arg, int64_t job, int64_t time_ns, const char *what, const char *why)
{
    ((cr_store_counts *)arg)->events++;
}

static void n_obj(void *arg, const char *key, const char *doc)
{
    ((cr_store_counts *)arg)->objects++;
}

static void n_usage(void *arg, const char *tenant, const char *gpu_type, const char *day,
                    double gpu_s, double energy_j, double cost)
{
    ((cr_store_counts *)arg)->usage++;
}

typedef struct kinds {
    char **k;
    size_t n, cap;
} kinds;

static void add_kind(void *arg, const char *kind)
{
    kinds *ks = arg;
    CR_GROW(ks->k, ks->n, ks->cap);
    ks->k[ks->n++] = cr_strdup(kind);
}

static void kinds_fini(kinds *ks)
{
    for (size_t i = 0; i < ks->n; i++) {
        free(ks->k[i]);
    }
    free(ks->k);
    memset(ks, 0, sizeof *ks);
}

static int count_all(cr_store *s, cr_store_counts *n)
{
    memset(n, 0, sizeof *n);
    kinds ks = {0};
    int rc = cr_store_load_job_rows(s, n_job, n);
    if (rc == 0) {
        rc = cr_store_load_events(s, n_event, n);
    }
    if (rc == 0) {
        rc = cr_store_object_kinds(s, add_kind, &ks);
    }
    for (size_t i = 0; rc == 0 && i < ks.n; i++) {
        rc = cr_store_load_objects(s, ks.k[i], n_obj, n);
    }
    if (rc == 0) {
        rc = cr_store_load_usage(s, n_usage, n);
    }
    kinds_fini(&ks);
    return rc;
}

/* "sqlite:DIR" or "etcd:URLS" into a cr_store_open path (new, free()). */
static int spec_path(const char *spec, bool source, char **path, char *err, size_t err_len)
{
    if (strncmp(spec, "sqlite:", 7) == 0 && spec[7]) {
        *path = cr_asprintf("%s/corral.db", spec + 7);
        if (!source && mkdir(spec + 7, 0700) != 0 && errno != EEXIST) {
            snprintf(err, err_len, "cannot make %s: %s", spec + 7, strerror(errno));
            CR_FREE(*path);
            return CR_EIO;
        }
        if (source && access(*path, R_OK) != 0) {
            snprintf(err, err_len, "%s: no database there", *path);
            CR_FREE(*path);
            return CR_ENOENT;
        }
        return 0;
    }
    if (strncmp(spec, "etcd:", 5) == 0 && spec[5]) {
        *path = cr_strdup(spec);
        return 0;
    }
    snprintf(err, err_len, "'%s': expected sqlite:DIR or etcd:URL[,URL...]", spec);
    return CR_EINVAL;
}

/* The etcd client's reason for the failure just seen on spec, or NULL. */
static const char *etcd_why(const char *spec)
{
    return strncmp(spec, "etcd:", 5) == 0 && *cr_etcd_last_error() ? cr_etcd_last_error() : NULL;
}

int cr_store_migrate(const char *from, const char *to, const char *cluster,
                     const struct cr_etcd_sec *sec, cr_store_counts *copied, char *err,
                     size_t err_len)
{
    char *fp = NULL, *tp = NULL;
    cr_store *src = NULL, *dst = NULL;
    kinds ks = {0};
    copier c = {0};
    cr_store_opts o = {.cluster = cluster, .etcd_sec = sec};
    int rc = spec_path(from, true, &fp, err, err_len);
    if (rc == 0) {
        rc = spec_path(to, false, &tp, err, err_len);
    }
    if (rc != 0) {
        goto out;
    }
    if (strcmp(fp, tp) == 0) {
        snprintf(err, err_len, "the source and the target are the same store");
        rc = CR_EINVAL;
        goto out;
    }
    if ((rc = cr_store_open(fp, &o, &src)) != 0) {
        snprintf(err, err_len, "cannot open the source %s: %s%s%s", from, cr_strerror(rc),
                 etcd_why(from) ? ": " : "", etcd_why(from) ? etcd_why(from) : "");
        goto out;
    }
    if ((rc = cr_store_open(tp, &o, &dst)) != 0) {
        snprintf(err, err_len, "cannot open the target %s: %s%s%s", to, cr_strerror(rc),
                 etcd_why(to) ? ": " : "", etcd_why(to) ? etcd_why(to) : "");
        goto out;
    }
    cr_store_counts have;
    if ((rc = count_all(dst, &have)) != 0) {
        snprintf(err, err_len, "cannot read the target %s: %s", to, cr_strerror(rc));
        goto out;
    }
    if (have.jobs || have.events || have.objects || have.usage) {
        snprintf(err, err_len,
                 "the target %s is not empty (%lld jobs, %lld events, %lld objects, %lld usage "
                 "rows): a migration never merges",
                 to, (long long)have.jobs, (long long)have.events, (long long)have.objects,
                 (long long)have.usage);
        rc = CR_EEXIST;
        goto out;
    }
    c.dst = dst;
    c.t = cr_store_txn_new();
    rc = cr_store_load_job_rows(src, copy_job, &c);
    if (rc == 0) {
        rc = cr_store_load_events(src, copy_event, &c);
    }
    if (rc == 0) {
        rc = cr_store_object_kinds(src, add_kind, &ks);
    }
    for (size_t i = 0; rc == 0 && i < ks.n; i++) {
        c.kind = ks.k[i];
        rc = cr_store_load_objects(src, ks.k[i], copy_obj, &c);
        flush(&c);
    }
    if (rc == 0) {
        rc = cr_store_load_usage(src, copy_usage, &c);
    }
    if (rc != 0) {
        snprintf(err, err_len, "cannot read the source %s: %s", from, cr_strerror(rc));
        goto out;
    }
    flush(&c);
    if (c.rc != 0) {
        rc = c.rc;
        snprintf(err, err_len,
                 "writing the target %s failed: %s (it now holds part of the copy: clear it "
                 "before trying again)",
                 to, cr_strerror(rc));
        goto out;
    }
    cr_store_counts a, b;
    if ((rc = count_all(src, &a)) != 0 || (rc = count_all(dst, &b)) != 0) {
        snprintf(err, err_len, "cannot count after the copy: %s", cr_strerror(rc));
        goto out;
    }
    if (a.jobs != b.jobs || a.events != b.events || a.objects != b.objects || a.usage != b.usage) {
        snprintf(err, err_len,
                 "counts differ after the copy: source %lld/%lld/%lld/%lld, target "
                 "%lld/%lld/%lld/%lld (jobs/events/objects/usage)",
                 (long long)a.jobs, (long long)a.events, (long long)a.objects, (long long)a.usage,
                 (long long)b.jobs, (long long)b.events, (long long)b.objects, (long long)b.usage);
        rc = CR_ECONFLICT;
        goto out;
    }
    int64_t ma = 0, mb = 0;
    if (cr_store_max_job_id(src, &ma) == 0 && cr_store_max_job_id(dst, &mb) == 0 && mb < ma) {
        snprintf(err, err_len, "the target's highest job id %lld is below the source's %lld",
                 (long long)mb, (long long)ma);
        rc = CR_ECONFLICT;
        goto out;
    }
    if (copied) {
        *copied = b;
    }
out:
    cr_store_txn_free(c.t);
    kinds_fini(&ks);
    cr_store_close(src);
    cr_store_close(dst);
    free(fp);
    free(tp);
    return rc;
}
