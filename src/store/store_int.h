/*
 * store_int.h - what the store's files share: the operations of a
 * transaction (built by store_txn.c, applied by the SQLite writer in
 * store_sqlite.c or the etcd writer in store_etcd.c) and the table of
 * operations each backend fills (cr__store_ops), through which cr_store.c
 * forwards every public call.
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

/* Appends t to the queue head..tail (the caller holds the queue's lock):
 * the writers' queues are alike (store_txn.c). */
void cr__store_txn_append(cr_store_txn **head, cr_store_txn **tail, cr_store_txn *t);

/*
 * A backend: one table of operations, one per backend (cr__store_sqlite_ops
 * in store_sqlite.c, cr__store_etcd_ops in store_etcd.c). cr_store.c opens
 * the one the path names and forwards every public call to it with the
 * backend's own state (be, from open); the meaning of each entry is that
 * of the cr_store_* call of the same name in cr_store.h. A NULL entry is
 * an operation the backend does not have (cr_store.c answers for it: see
 * there). The backends never call cr_store.c: what they share is the
 * transaction above (store_txn.c).
 */
typedef struct cr__store_ops {
    const char *name; /* what cr_store_backend() says */
    /* path without the backend's prefix; *out returned new (free with close) */
    int (*open)(const char *path, const cr_store_opts *opts, void **out);
    void (*close)(void *be); /* drains the queue, joins the writer, frees */
    int (*schema_version)(void *be);
    void (*stats)(void *be, uint64_t *commits, uint64_t *txns);
    /* t is taken; its done, arg and next are already set */
    void (*submit)(void *be, cr_store_txn *t);
    /* NULL: no fencing (CR_ENOTSUP, never fenced) */
    int (*set_fence)(void *be, const char *key, int64_t create_revision);
    bool (*fenced)(void *be);
    /* NULL: not on etcd */
    struct cr_etcd *(*etcd_client)(void *be);
    const char *(*etcd_prefix)(void *be);
    int (*load_jobs)(void *be, cr_store_job_fn fn, void *arg);
    int (*load_objects)(void *be, const char *kind, cr_store_obj_fn fn, void *arg);
    int (*job_events)(void *be, int64_t job, size_t limit, cr_store_event_fn fn, void *arg);
    int (*load_usage)(void *be, cr_store_usage_fn fn, void *arg);
    int (*get_job)(void *be, int64_t id, cr_store_job_fn fn, void *arg);
    int (*get_object)(void *be, const char *kind, const char *key, cr_store_obj_fn fn, void *arg);
    int (*max_job_id)(void *be, int64_t *out);
    int (*query_jobs)(void *be, const cr_store_job_query *q, cr_store_job_fn fn, void *arg,
                      int64_t *total);
    int (*job_counts)(void *be, const char *tenant, const char *const *states, size_t n,
                      int64_t *out);
    int (*object_kinds)(void *be, void (*fn)(void *arg, const char *kind), void *arg);
    int (*load_job_rows)(void *be, cr_store_job_row_fn fn, void *arg);
    int (*load_events)(void *be, cr_store_event_fn fn, void *arg);
} cr__store_ops;

extern const cr__store_ops cr__store_sqlite_ops;
extern const cr__store_ops cr__store_etcd_ops;

#endif
