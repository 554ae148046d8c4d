/*
 * cr_etcd.h - a small etcd v3 client: the gRPC gateway's JSON API over
 * HTTP/1.1 (libcurl, loaded with dlopen on first use like src/client, so
 * processes that never speak to etcd do not pay for libcurl at exec).
 *
 * Why the JSON gateway and not gRPC: Debian has no gRPC C client worth its
 * weight (grpc++ and protobuf for a handful of calls), while every etcd
 * v3.4 server answers the same calls as JSON on its client port
 * (/v3/kv/range, /v3/kv/txn, /v3/lease/...); keys and values travel as
 * base64, 64-bit numbers as decimal strings. docs/architecture.md.
 *
 * Endpoints: a comma-separated list of http://host:port URLs (at most
 * CR_ETCD_MAX_ENDPOINTS). A call goes to the endpoint that answered last;
 * when it cannot connect, times out or the member says it is unavailable
 * (no leader, stopping), the call is tried once on each other endpoint in
 * turn, then fails with CR_EUNAVAIL. A write that timed out may have been
 * applied: callers write idempotent values (absolute puts) or fence them.
 *
 * Errors: 0 or a negative CR_E* code; the reason, in words, is kept per
 * thread and read with cr_etcd_last_error(). etcd's own refusals map to
 * CR_ENOENT (lease not found), CR_ETOOBIG (too many operations in a txn,
 * request too large), CR_ECONFLICT (revision compacted), CR_EINVAL (other
 * refusals: duplicate key in a txn...), CR_EPARSE (a reply that is not the
 * JSON expected).
 *
 * Threading: a cr_etcd is safe to share between threads; each call takes
 * an HTTP handle from a small pool (connections are kept alive). Results
 * are owned by the caller (cr_etcd_result_fini).
 */
#ifndef CR_ETCD_H
#define CR_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CR_ETCD_MAX_ENDPOINTS 16
/* etcd's defaults: --max-txn-ops 128, --max-request-bytes 1.5 MiB. */
#define CR_ETCD_MAX_TXN_OPS       128
#define CR_ETCD_MAX_REQUEST_BYTES (3u << 19)
/* A reply larger than this is refused (CR_ETOOBIG): callers page ranges. */
#define CR_ETCD_MAX_REPLY_BYTES (64u << 20)

typedef struct cr_etcd cr_etcd;

typedef struct cr_etcd_opts {
    int64_t connect_timeout_ms; /* per endpoint; 0 = 1000 */
    int64_t request_timeout_ms; /* whole request; 0 = 5000 */
} cr_etcd_opts;

/* endpoints: "http://h1:2379,http://h2:2379" (borrowed). 0 and *out (free
 * with cr_etcd_free), CR_EINVAL for a malformed list, CR_EUNAVAIL when
 * libcurl cannot be loaded. Connects to nothing yet. */
int cr_etcd_new(const char *endpoints, const cr_etcd_opts *opts, cr_etcd **out);
void cr_etcd_free(cr_etcd *e);
/* The reason for this thread's last failed call ("" when none). */
const char *cr_etcd_last_error(void);
/* The endpoint the last call went to (borrowed; for messages). */
const char *cr_etcd_endpoint(cr_etcd *e);

typedef struct cr_etcd_kv {
    char *key; /* owned, NUL-terminated (keys may not contain NUL here) */
    char *value;
    size_t value_len;
    int64_t create_revision, mod_revision, version, lease;
} cr_etcd_kv;

/* The answer of a range (also one per range op in a txn). */
typedef struct cr_etcd_range_result {
    cr_etcd_kv *kvs; /* owned, n of them */
    size_t n;
    int64_t count; /* keys in the range (regardless of limit) */
    bool more;     /* the limit cut the answer */
} cr_etcd_range_result;

typedef enum cr_etcd_sort {
    CR_ETCD_SORT_NONE,
    CR_ETCD_SORT_ASCEND,
    CR_ETCD_SORT_DESCEND
} cr_etcd_sort;

typedef struct cr_etcd_range_req {
    const char *key;       /* first key */
    const char *range_end; /* NULL: key alone (or its prefix when prefix) */
    bool prefix;           /* every key starting with key */
    int64_t limit;         /* 0 = no limit */
    int64_t revision;      /* 0 = latest */
    bool keys_only, count_only;
    cr_etcd_sort sort; /* by key; NONE = etcd's order (ascending key) */
} cr_etcd_range_req;

/* *revision (may be NULL) = the store revision the answer is from. */
int cr_etcd_range(cr_etcd *e, const cr_etcd_range_req *q, cr_etcd_range_result *out,
                  int64_t *revision);
void cr_etcd_range_result_fini(cr_etcd_range_result *r);

int cr_etcd_put(cr_etcd *e, const char *key, const char *value, size_t value_len, int64_t lease,
                int64_t *revision);
/* Deletes key (or every key under it when prefix); *deleted may be NULL. */
int cr_etcd_delete(cr_etcd *e, const char *key, bool prefix, int64_t *deleted, int64_t *revision);

typedef enum cr_etcd_target {
    CR_ETCD_CREATE,  /* create_revision (0: the key does not exist) */
    CR_ETCD_MOD,     /* mod_revision */
    CR_ETCD_VERSION, /* version */
    CR_ETCD_VALUE,   /* value */
    CR_ETCD_LEASE,   /* lease id */
} cr_etcd_target;
typedef enum cr_etcd_cmp_result {
    CR_ETCD_EQUAL,
    CR_ETCD_GREATER,
    CR_ETCD_LESS,
    CR_ETCD_NOT_EQUAL
} cr_etcd_cmp_result;

typedef struct cr_etcd_cmp {
    cr_etcd_target target;
    cr_etcd_cmp_result result;
    const char *key;   /* borrowed */
    int64_t number;    /* for CREATE, MOD, VERSION, LEASE */
    const char *value; /* for VALUE (value_len bytes) */
    size_t value_len;
} cr_etcd_cmp;

typedef enum cr_etcd_op_kind { CR_ETCD_OP_PUT, CR_ETCD_OP_DELETE, CR_ETCD_OP_GET } cr_etcd_op_kind;

typedef struct cr_etcd_op {
    cr_etcd_op_kind kind;
    const char *key; /* borrowed */
    const char *value;
    size_t value_len;
    int64_t lease; /* PUT: attach to this lease (0: none) */
    bool prefix;   /* DELETE/GET: every key under key */
} cr_etcd_op;

typedef struct cr_etcd_txn_result {
    bool succeeded;               /* the compares held: success ops ran */
    int64_t revision;             /* store revision after the txn */
    cr_etcd_range_result *ranges; /* owned: one per op of the branch that ran
                                     (filled for GET ops only) */
    size_t nranges;
} cr_etcd_txn_result;

/* If every compare holds, run success ops, else failure ops: atomically.
 * Ops of one branch must name distinct keys (etcd refuses duplicates). A
 * request over CR_ETCD_MAX_TXN_OPS ops or CR_ETCD_MAX_REQUEST_BYTES is
 * refused here (CR_ETOOBIG) without a round trip. */
int cr_etcd_txn(cr_etcd *e, const cr_etcd_cmp *cmp, size_t ncmp, const cr_etcd_op *success,
                size_t nsuccess, const cr_etcd_op *failure, size_t nfailure,
                cr_etcd_txn_result *out);
void cr_etcd_txn_result_fini(cr_etcd_txn_result *r);

/* Leases. grant: *id and *ttl_s granted. keepalive: *ttl_s left after the
 * refresh, CR_ENOENT when the lease is gone. revoke: CR_ENOENT when gone.
 * time_to_live: *ttl_s left (-1 or CR_ENOENT when gone). */
int cr_etcd_lease_grant(cr_etcd *e, int64_t ttl_s, int64_t *id, int64_t *granted_ttl_s);
int cr_etcd_lease_keepalive(cr_etcd *e, int64_t id, int64_t *ttl_s);
int cr_etcd_lease_revoke(cr_etcd *e, int64_t id);
int cr_etcd_lease_ttl(cr_etcd *e, int64_t id, int64_t *ttl_s);

/* The first key after every key starting with prefix (its range_end), into
 * out (out_len bytes, at least strlen(prefix) + 1); "\0" (all keys) when the
 * prefix is all 0xff. Exposed for tests and pagers. */
void cr_etcd_prefix_end(const char *prefix, char *out, size_t out_len);

/* Parsers of the gateway's replies, exposed for the corpus and fuzz tests:
 * 0 or CR_EPARSE with the reason in cr_etcd_last_error(). */
int cr__etcd_parse_range(const char *body, size_t len, cr_etcd_range_result *out,
                         int64_t *revision);
int cr__etcd_parse_txn(const char *body, size_t len, cr_etcd_txn_result *out);
/* An error reply ({"error":..,"code":N}): the CR_E* code it maps to, with the
 * reason in cr_etcd_last_error(); *retry = another member may succeed. */
int cr__etcd_parse_error(const char *body, size_t len, int http_status, bool *retry);

#endif
