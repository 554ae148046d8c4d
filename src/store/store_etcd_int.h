/*
 * store_etcd_int.h - private state of the etcd backend, shared by
 * store_etcd.c (open, writer, fencing, the ops table) and
 * store_etcd_read.c (keys and readers; it calls nothing of store_etcd.c).
 *
 * Key layout under the prefix P = /corral/<cluster>/ (free-text parts are
 * %-escaped: anything but [A-Za-z0-9._:@=+,-], so '/' never appears
 * inside a part; ids are 20 zero-padded digits so keys sort by id):
 *   P jobs/<id>                     the job document (as in SQLite's doc)
 *   P jobstate/<state>/<id>         index: value = the job's tenant
 *   P count/<tenant>/<state>        number of jobs (decimal)
 *   P events/<job>/<seq>            {"time_ns","what","why"}; seq global
 *   P objects/<kind>/<key>          tokens, tenants, nodes, meta, idem...
 *   P audit/<key>                   the audit log (kind "audit")
 *   P usage/<day>/<tenant>/<gpu>    {"tenant","gpu_type","day","gpu_s",
 *                                    "energy_j","cost"}: absolute sums
 *   P meta/layout, meta/event_seq, meta/max_job_id
 * jobstate and count are written only by the writer, in the same etcd txn
 * as the job row, so they agree with the rows at every revision.
 */
#ifndef STORE_ETCD_INT_H
#define STORE_ETCD_INT_H

#include "cr_buf.h"
#include "cr_etcd.h"
#include "store_int.h"

#include <pthread.h>
#include <stdatomic.h>

/* Bytes of keys and values in one etcd txn: etcd's 1.5 MiB request limit
 * less room for the encoding of up to 128 ops. */
#define STORE_ETCD_MAX_BYTES ((3u << 19) - (64u << 10))
/* Keys per range request when reading everything under a prefix. */
#define STORE_ETCD_PAGE 512

typedef struct cr__estore cr__estore;

typedef struct estore_names {
    char **names;    /* owned */
    size_t n, ncap;  /* names used / allocated */
    uint32_t *slots; /* hash slots: index into names, UINT32_MAX = free */
    size_t cap;      /* slots (a power of two) */
} estore_names;

typedef struct estore_job {
    int64_t id;      /* 0 = free slot */
    uint32_t tenant; /* index in tenants */
    uint32_t state;  /* index in states; UINT32_MAX = not stored */
} estore_job;

typedef struct estore_counts {
    int64_t *v; /* per state index */
    size_t n, cap;
} estore_counts;

typedef struct estore_usage {
    char *key;     /* owned: the etcd key */
    double sum[3]; /* gpu_s, energy_j, cost */
} estore_usage;

struct cr__estore {
    cr_etcd *e;       /* owned client */
    char prefix[160]; /* "/corral/<cluster>/" */
    size_t max_batch; /* transactions taken per writer round */
    size_t max_ops;   /* etcd ops per txn */

    pthread_mutex_t qmu;       /* guards the queue, stop and the fence */
    pthread_cond_t qcv;        /* signalled on submit and stop */
    cr_store_txn *head, *tail; /* queued transactions */
    bool stop;                 /* writer exits once the queue is empty */
    pthread_t thread;          /* the writer */
    char *fence_key;           /* owned; NULL = no fence */
    int64_t fence_rev;         /* required create_revision of fence_key */
    bool fenced;               /* a fence compare failed */
    bool fence_changed;        /* set_fence was called: reload the caches */
    _Atomic uint64_t commits;  /* etcd txns committed */
    _Atomic uint64_t txns;     /* transactions committed */

    /* The writer thread's own: */
    bool loaded, reload;   /* caches valid / to be reloaded */
    int batch_rc;          /* set: the rest of this batch fails with it */
    estore_names tenants;  /* interned tenant names */
    estore_names states;   /* interned state names */
    estore_job *jobs;      /* open addressing on id */
    size_t jcap, njobs;    /* slots / used */
    estore_counts *counts; /* per tenant index */
    size_t ncounts, counts_cap;
    estore_usage *usage; /* sums read or written (linear: rows are few) */
    size_t nusage, usage_cap;
    int64_t event_seq;  /* last event sequence number used */
    int64_t max_job_id; /* highest job id written */
};

/* The readers (store_etcd_read.c), entries of cr__store_etcd_ops; be is
 * the cr__estore. */
int cr__estore_load_jobs(void *be, cr_store_job_fn fn, void *arg);
int cr__estore_load_objects(void *be, const char *kind, cr_store_obj_fn fn, void *arg);
int cr__estore_job_events(void *be, int64_t job, size_t limit, cr_store_event_fn fn, void *arg);
int cr__estore_load_usage(void *be, cr_store_usage_fn fn, void *arg);
int cr__estore_get_job(void *be, int64_t id, cr_store_job_fn fn, void *arg);
int cr__estore_get_object(void *be, const char *kind, const char *key, cr_store_obj_fn fn,
                          void *arg);
int cr__estore_max_job_id(void *be, int64_t *out);
int cr__estore_query_jobs(void *be, const cr_store_job_query *q, cr_store_job_fn fn, void *arg,
                          int64_t *total);
int cr__estore_job_counts(void *be, const char *tenant, const char *const *states, size_t n,
                          int64_t *out);
int cr__estore_load_job_rows(void *be, cr_store_job_row_fn fn, void *arg);
int cr__estore_load_events(void *be, cr_store_event_fn fn, void *arg);
/* Every object kind stored (for migration): fn(arg, kind) per kind. */
int cr__estore_kinds(void *be, void (*fn)(void *arg, const char *kind), void *arg);

/* Keys (store_etcd_read.c, used by the writer too). Appends s %-escaped. */
void cr__estore_esc(cr_buf *b, const char *s);
/* Unescapes n bytes of s into out (reset first). 0 or CR_EPARSE. */
int cr__estore_unesc(const char *s, size_t n, cr_buf *out);
/* b = prefix + sect. */
void cr__estore_key(cr__estore *s, cr_buf *b, const char *sect);
/* b = the key prefix of an object kind ("objects/<kind>/" or "audit/"). */
void cr__estore_obj_prefix(cr__estore *s, cr_buf *b, const char *kind);

/* Calls fn for every key from key (inclusive) to end (exclusive; NULL =
 * every key under key as a prefix), in pages of STORE_ETCD_PAGE, all read
 * at one revision (*rev in: 0 = latest; out: the one used, may be NULL).
 * Stops after limit keys (0 = all). */
typedef void (*estore_kv_fn)(void *arg, const cr_etcd_kv *kv);
int cr__estore_scan(cr__estore *s, const char *key, const char *end, size_t limit, bool keys_only,
                    estore_kv_fn fn, void *arg, int64_t *rev);

#endif
