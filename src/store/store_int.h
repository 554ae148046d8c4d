/*
 * store_int.h - what the store's backends share: the operations of a
 * transaction (built by cr_store.c, applied by the SQLite writer in
 * cr_store.c or the etcd writer in store_etcd.c) and the etcd backend's
 * entry points, to which every public cr_store_* call dispatches when the
 * store was opened on etcd (one pointer test: the SQLite path is
 * otherwise unchanged).
 */
#ifndef STORE_INT_H
#define STORE_INT_H

#include "cr_store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum op_kind { OP_PUT_JOB, OP_EVENT, OP_PUT, OP_DEL, OP_USAGE };

typedef struct op {
    enum op_kind kind;
    int64_t i1, i2;     /* job id / time */
    char *s1, *s2, *s3; /* owned texts (meaning per kind) */
    double d1, d2, d3;  /* usage amounts */
    char *s4;           /* owned: usage day */
} op;

struct cr_store_txn {
    op *ops;                   /* owned */
    size_t len, cap;           /* counts */
    bool splittable;           /* ops independent: a backend may split it */
    cr_store_done_fn done;     /* set by submit */
    void *arg;                 /* for done */
    struct cr_store_txn *next; /* queue link */
};

/* The etcd backend (store_etcd.c, store_etcd_read.c). */
typedef struct cr__estore cr__estore;

int cr__estore_open(const char *urls, const cr_store_opts *opts, cr__estore **out);
void cr__estore_close(cr__estore *s);
void cr__estore_stats(cr__estore *s, uint64_t *commits, uint64_t *txns);
void cr__estore_submit(cr__estore *s, cr_store_txn *t);
int cr__estore_set_fence(cr__estore *s, const char *key, int64_t create_revision);
bool cr__estore_fenced(cr__estore *s);
struct cr_etcd *cr__estore_client(cr__estore *s);
const char *cr__estore_prefix(cr__estore *s);
int cr__estore_load_jobs(cr__estore *s, cr_store_job_fn fn, void *arg);
int cr__estore_load_objects(cr__estore *s, const char *kind, cr_store_obj_fn fn, void *arg);
int cr__estore_job_events(cr__estore *s, int64_t job, size_t limit, cr_store_event_fn fn,
                          void *arg);
int cr__estore_load_usage(cr__estore *s, cr_store_usage_fn fn, void *arg);
int cr__estore_get_job(cr__estore *s, int64_t id, cr_store_job_fn fn, void *arg);
int cr__estore_get_object(cr__estore *s, const char *kind, const char *key, cr_store_obj_fn fn,
                          void *arg);
int cr__estore_max_job_id(cr__estore *s, int64_t *out);
int cr__estore_query_jobs(cr__estore *s, const cr_store_job_query *q, cr_store_job_fn fn, void *arg,
                          int64_t *total);
int cr__estore_job_counts(cr__estore *s, const char *tenant, const char *const *states, size_t n,
                          int64_t *out);
int cr__estore_load_job_rows(cr__estore *s, cr_store_job_row_fn fn, void *arg);
int cr__estore_load_events(cr__estore *s, cr_store_event_fn fn, void *arg);
/* Every object kind stored (for migration): fn(arg, kind) per kind. */
int cr__estore_kinds(cr__estore *s, void (*fn)(void *arg, const char *kind), void *arg);

#endif
