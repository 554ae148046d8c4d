/*
 * cr_store.h - the controller's durable state in SQLite (WAL), with group
 * commit.
 *
 * The store is deliberately dumb: the controller keeps its working state in
 * memory and writes through here. Tables:
 *   jobs(id, tenant, state, doc)        one row per job, doc = JSON text
 *   events(seq, job, time_ns, what, why) append-only job history
 *   objects(kind, key, doc)             tokens, tenants, nodes, meta, ...
 *   usage(tenant, gpu_type, day, gpu_s, energy_j, cost)  accumulated
 * The schema version lives in PRAGMA user_version; cr_store_open() applies
 * the missing migrations in order and refuses a database from a newer
 * Corral (CR_ENOTSUP).
 *
 * Group commit: callers build a transaction (cr_store_txn) and submit it to
 * the writer thread. The writer takes every queued transaction, applies each
 * under its own SAVEPOINT (one failing does not sink the others) inside one
 * SQLite transaction, commits once (one fsync with synchronous=FULL), then
 * calls each done callback with 0 or the error. So "done(0)" means
 * "durable", and a batch of N costs about one commit, not N.
 *
 * Threading: cr_store_submit/commit are thread-safe. Callbacks run on the
 * writer thread and must not block on the store. Readers (load, events,
 * pages of jobs) use a small pool of their own connections (4), so reads
 * run side by side; they see committed data only.
 * The load functions are meant for start-up.
 *
 * Backends: a path "etcd:http://h1:2379,http://h2:2379" opens the etcd
 * backend instead (store_etcd.c; keys under /corral/<cluster>/, layout in
 * src/store/README.md). The same calls, the same meaning of done(0)
 * (durable: committed by the etcd cluster), the same group commit: the
 * writer packs queued transactions into etcd txns within etcd's limits
 * (--max-txn-ops, request size), never splitting one transaction across
 * etcd txns unless it was marked splittable (cr_store_txn_splittable); one
 * that alone is over the limits fails with CR_ETOOBIG. Fencing
 * (cr_store_set_fence) makes every etcd write conditional on a key's
 * create_revision, so a deposed leader's writes fail with CR_EFENCED.
 */
#ifndef CR_STORE_H
#define CR_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CR_STORE_SCHEMA_VERSION 3

typedef struct cr_store cr_store;
typedef struct cr_store_txn cr_store_txn;

typedef struct cr_store_opts {
    bool sync_normal; /* synchronous=NORMAL: survives a crash of the process,
                         not of the machine; default FULL */
    size_t max_batch; /* transactions per commit; 0 = 8192 */
    /* etcd only: */
    const char *cluster;     /* keys under /corral/<cluster>/; NULL = "default" */
    size_t etcd_max_txn_ops; /* the cluster's --max-txn-ops; 0 = 128 */
    int64_t etcd_timeout_ms; /* per request; 0 = 5000 */
    /* TLS and authentication (cr_etcd.h; loaded with cr_etcd_sec_load);
     * borrowed, copied; NULL = none. */
    const struct cr_etcd_sec *etcd_sec;
} cr_store_opts;

/* The etcd key layout's version (meta/layout); cr_store_schema_version
 * returns it for an etcd store. */
#define CR_STORE_ETCD_LAYOUT 1

/* Open (create) the database at path; opts may be NULL. Returns 0 and *out
 * (free with cr_store_close) or CR_EIO / CR_ENOTSUP, or CR_ECORRUPT when
 * PRAGMA quick_check fails or the WAL holds committed transactions after a
 * damaged frame (SQLite would drop them silently; see docs/operations.md
 * for recovery). A commit that fails for want of space reports
 * CR_EDISKFULL. */
int cr_store_open(const char *path, const cr_store_opts *opts, cr_store **out);
/* Commit what is queued, stop the writer, close; NULL-safe. */
void cr_store_close(cr_store *s);
int cr_store_schema_version(cr_store *s);

/* "sqlite" or "etcd". */
const char *cr_store_backend(cr_store *s);
/* etcd only: from now on every write carries the compare
 * create_revision(key) == create_revision (key: a whole etcd key, e.g. the
 * leader key of a lease-based election). When it fails, the writes of that
 * batch and every later one fail with CR_EFENCED until the fence is set
 * again; setting it also reloads the writer's caches (job index, counts,
 * usage sums, event sequence) from etcd, since a previous holder may have
 * written. CR_ENOTSUP on SQLite. */
int cr_store_set_fence(cr_store *s, const char *key, int64_t create_revision);
/* A fence compare has failed (and no fence was set since). */
bool cr_store_fenced(cr_store *s);
/* The etcd client and key prefix ("/corral/<cluster>/") of an etcd store
 * (borrowed, valid until close), for leader election on the same cluster;
 * NULL on SQLite. */
struct cr_etcd *cr_store_etcd_client(cr_store *s);
const char *cr_store_etcd_prefix(cr_store *s);

/* Statistics: commits done and transactions committed (for metrics). */
void cr_store_stats(cr_store *s, uint64_t *commits, uint64_t *txns);
/* Bytes SQLite holds now (page caches, statements; the whole process's
 * SQLite), and the most it held since start. */
void cr_store_memory(uint64_t *now, uint64_t *peak);

cr_store_txn *cr_store_txn_new(void);
void cr_store_txn_free(cr_store_txn *t);
bool cr_store_txn_empty(const cr_store_txn *t);
/* The operations of t are independent of each other (a scheduler cycle's
 * allocations, pending reasons): a backend with a size limit (etcd) may
 * commit them in several parts; done gets the first failure, if any. */
void cr_store_txn_splittable(cr_store_txn *t);
/* Operations; strings are copied. */
void cr_store_txn_put_job(cr_store_txn *t, int64_t id, const char *tenant, const char *state,
                          const char *doc);
void cr_store_txn_event(cr_store_txn *t, int64_t job, int64_t time_ns, const char *what,
                        const char *why);
void cr_store_txn_put(cr_store_txn *t, const char *kind, const char *key, const char *doc);
void cr_store_txn_del(cr_store_txn *t, const char *kind, const char *key);
void cr_store_txn_usage(cr_store_txn *t, const char *tenant, const char *gpu_type, const char *day,
                        double gpu_s, double energy_j, double cost);

/* Called on the writer thread once the transaction is durable (0) or has
 * failed (CR_EIO, CR_EEXIST...). */
typedef void (*cr_store_done_fn)(void *arg, int status);
/* Queue t (taken). done may be NULL. */
void cr_store_submit(cr_store *s, cr_store_txn *t, cr_store_done_fn done, void *arg);
/* Queue t (taken) and wait until it is durable; returns its status. */
int cr_store_commit(cr_store *s, cr_store_txn *t);

/* Readers. Each calls fn per row, in key order; strings borrowed for the
 * call. Return 0 or CR_EIO. */
typedef void (*cr_store_job_fn)(void *arg, int64_t id, const char *doc);
typedef void (*cr_store_obj_fn)(void *arg, const char *key, const char *doc);
typedef void (*cr_store_event_fn)(void *arg, int64_t job, int64_t time_ns, const char *what,
                                  const char *why);
typedef void (*cr_store_usage_fn)(void *arg, const char *tenant, const char *gpu_type,
                                  const char *day, double gpu_s, double energy_j, double cost);
int cr_store_load_jobs(cr_store *s, cr_store_job_fn fn, void *arg);
int cr_store_load_objects(cr_store *s, const char *kind, cr_store_obj_fn fn, void *arg);
/* Events of one job, oldest first, at most limit (0 = all). */
int cr_store_job_events(cr_store *s, int64_t job, size_t limit, cr_store_event_fn fn, void *arg);
int cr_store_load_usage(cr_store *s, cr_store_usage_fn fn, void *arg);

/* One object by kind and key: fn once, 0; CR_ENOENT when there is none;
 * CR_EIO. */
int cr_store_get_object(cr_store *s, const char *kind, const char *key, cr_store_obj_fn fn,
                        void *arg);
/* One job row by id: fn once, 0; CR_ENOENT when there is none. */
int cr_store_get_job(cr_store *s, int64_t id, cr_store_job_fn fn, void *arg);
/* The highest job id the store has ever seen (job rows and events). */
int cr_store_max_job_id(cr_store *s, int64_t *out);

/* A page of job rows (GET /v1/jobs). */
typedef struct cr_store_job_query {
    const char *tenant;        /* NULL = any tenant */
    const char *const *states; /* state names, nstates of them; 0 = any state */
    size_t nstates;
    int64_t before;    /* > 0: ids below it (newest first) */
    int64_t after;     /* oldest_first: ids above it */
    bool oldest_first; /* ascending ids from after; else descending from before */
    size_t limit;      /* rows at most (>= 1) */
} cr_store_job_query;
/* Rows matching q in page order; *total (may be NULL) = rows matching the
 * tenant and states regardless of before/after/limit, from the same
 * snapshot. 0 or CR_EIO. */
int cr_store_query_jobs(cr_store *s, const cr_store_job_query *q, cr_store_job_fn fn, void *arg,
                        int64_t *total);
/* Rows in each of n states (of tenant; NULL = all) into out[n]. 0 or CR_EIO. */
int cr_store_job_counts(cr_store *s, const char *tenant, const char *const *states, size_t n,
                        int64_t *out);
/* For migration (corral admin migrate): every job row with its tenant and
 * state, in id order; every event of every job, each job's in order. */
typedef void (*cr_store_job_row_fn)(void *arg, int64_t id, const char *tenant, const char *state,
                                    const char *doc);
int cr_store_load_job_rows(cr_store *s, cr_store_job_row_fn fn, void *arg);
int cr_store_load_events(cr_store *s, cr_store_event_fn fn, void *arg);
/* Each object kind present, once, in order (for migration). 0 or CR_EIO. */
int cr_store_object_kinds(cr_store *s, void (*fn)(void *arg, const char *kind), void *arg);

#endif
