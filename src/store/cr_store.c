/*
 * cr_store.c - the store's front: picks the backend a path names and
 * forwards every cr_store_* call to its table of operations (store_int.h);
 * see cr_store.h for the contract. What is the same for every backend
 * lives here: the wait of cr_store_commit and the answers for operations
 * a backend lacks. Nothing here knows a backend by name.
 */
#include "cr_store.h"
#include "store_int.h"

#include "cr_alloc.h"
#include "cr_error.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct cr_store {
    const cr__store_ops *ops; /* the backend */
    void *be;                 /* owned: its state, from ops->open */
};

/* Path prefixes that name a backend other than the default, SQLite. */
static const struct {
    const char *prefix;
    const cr__store_ops *ops;
} backends[] = {
    {"etcd:", &cr__store_etcd_ops},
};

int cr_store_open(const char *path, const cr_store_opts *opts, cr_store **out)
{
    const cr__store_ops *ops = &cr__store_sqlite_ops;
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        size_t n = strlen(backends[i].prefix);
        if (strncmp(path, backends[i].prefix, n) == 0) {
            ops = backends[i].ops;
            path += n;
            break;
        }
    }
    void *be = NULL;
    int rc = ops->open(path, opts, &be);
    if (rc == 0) {
        *out = cr_calloc(1, sizeof **out);
        (*out)->ops = ops;
        (*out)->be = be;
    }
    return rc;
}

void cr_store_close(cr_store *s)
{
    if (!s) {
        return;
    }
    s->ops->close(s->be);
    free(s);
}

int cr_store_schema_version(cr_store *s)
{
    return s->ops->schema_version(s->be);
}

const char *cr_store_backend(cr_store *s)
{
    return s->ops->name;
}

int cr_store_set_fence(cr_store *s, const char *key, int64_t create_revision)
{
    return s->ops->set_fence ? s->ops->set_fence(s->be, key, create_revision) : CR_ENOTSUP;
}

bool cr_store_fenced(cr_store *s)
{
    return s->ops->fenced && s->ops->fenced(s->be);
}

struct cr_etcd *cr_store_etcd_client(cr_store *s)
{
    return s->ops->etcd_client ? s->ops->etcd_client(s->be) : NULL;
}

const char *cr_store_etcd_prefix(cr_store *s)
{
    return s->ops->etcd_prefix ? s->ops->etcd_prefix(s->be) : NULL;
}

void cr_store_stats(cr_store *s, uint64_t *commits, uint64_t *txns)
{
    s->ops->stats(s->be, commits, txns);
}

void cr_store_submit(cr_store *s, cr_store_txn *t, cr_store_done_fn done, void *arg)
{
    t->done = done;
    t->arg = arg;
    t->next = NULL;
    s->ops->submit(s->be, t);
}

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int status;
} waiter;

static void wake(void *arg, int status)
{
    waiter *w = arg;
    pthread_mutex_lock(&w->mu);
    w->done = true;
    w->status = status;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

int cr_store_commit(cr_store *s, cr_store_txn *t)
{
    waiter w = {.done = false, .status = 0};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    cr_store_submit(s, t, wake, &w);
    pthread_mutex_lock(&w.mu);
    while (!w.done) {
        pthread_cond_wait(&w.cv, &w.mu);
    }
    pthread_mutex_unlock(&w.mu);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    return w.status;
}

int cr_store_load_jobs(cr_store *s, cr_store_job_fn fn, void *arg)
{
    return s->ops->load_jobs(s->be, fn, arg);
}

int cr_store_load_objects(cr_store *s, const char *kind, cr_store_obj_fn fn, void *arg)
{
    return s->ops->load_objects(s->be, kind, fn, arg);
}

int cr_store_job_events(cr_store *s, int64_t job, size_t limit, cr_store_event_fn fn, void *arg)
{
    return s->ops->job_events(s->be, job, limit, fn, arg);
}

int cr_store_load_usage(cr_store *s, cr_store_usage_fn fn, void *arg)
{
    return s->ops->load_usage(s->be, fn, arg);
}

int cr_store_get_object(cr_store *s, const char *kind, const char *key, cr_store_obj_fn fn,
                        void *arg)
{
    return s->ops->get_object(s->be, kind, key, fn, arg);
}

int cr_store_get_job(cr_store *s, int64_t id, cr_store_job_fn fn, void *arg)
{
    return s->ops->get_job(s->be, id, fn, arg);
}

int cr_store_max_job_id(cr_store *s, int64_t *out)
{
    return s->ops->max_job_id(s->be, out);
}

int cr_store_query_jobs(cr_store *s, const cr_store_job_query *q, cr_store_job_fn fn, void *arg,
                        int64_t *total)
{
    return s->ops->query_jobs(s->be, q, fn, arg, total);
}

int cr_store_job_counts(cr_store *s, const char *tenant, const char *const *states, size_t n,
                        int64_t *out)
{
    return s->ops->job_counts(s->be, tenant, states, n, out);
}

int cr_store_object_kinds(cr_store *s, void (*fn)(void *arg, const char *kind), void *arg)
{
    return s->ops->object_kinds(s->be, fn, arg);
}

int cr_store_load_job_rows(cr_store *s, cr_store_job_row_fn fn, void *arg)
{
    return s->ops->load_job_rows(s->be, fn, arg);
}

int cr_store_load_events(cr_store *s, cr_store_event_fn fn, void *arg)
{
    return s->ops->load_events(s->be, fn, arg);
}
