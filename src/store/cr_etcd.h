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
 * Endpoints: a comma-separated list of http://host:port or https://host:port
 * URLs, all of one scheme (at most CR_ETCD_MAX_ENDPOINTS). A call goes to the endpoint that
 * answered last; when it cannot connect, times out or the member says it is unavailable (no leader,
 * stopping), the call is tried once on each other endpoint in turn, then fails with CR_EUNAVAIL. A
 * write that timed out may have been applied: callers write idempotent values (absolute puts) or
 * fence them.
 *
 * Errors: 0 or a negative CR_E* code; the reason, in words, is kept per
 * thread and read with cr_etcd_last_error(). etcd's own refusals map to
 * CR_ENOENT (lease not found), CR_ETOOBIG (too many operations in a txn,
 * request too large), CR_ECONFLICT (revision compacted), CR_EINVAL (other
 * refusals: duplicate key in a txn...), CR_EPARSE (a reply that is not the
 * JSON expected).
 *
 * TLS and authentication (cr_etcd_sec, docs/operations.md "The store"):
 * https endpoints are verified against --etcd-cacert (else the system's
 * CAs), host names included, TLS 1.2 at least; --etcd-cert/--etcd-key are
 * shown to a member that asks for a client certificate. With --etcd-user,
 * the client authenticates (/v3/auth/authenticate, the password read from
 * --etcd-password-file by cr_etcd_sec_load) before its first call and
 * sends the token on every call; when etcd answers that the token is
 * invalid or older than its auth store (expired, password changed, roles
 * changed), it authenticates again once and repeats the call; when etcd
 * refuses the password itself, the password file is read again (rotation:
 * the file is updated before the password in etcd). A cluster
 * with authentication off is used without a token, as etcd's own client
 * does. Neither the password nor the token is ever put in a message.
 * Refusals map to CR_EAUTH (bad credentials, a server certificate that does
 * not verify, a client certificate etcd refuses) and CR_EPERM (the user's
 * roles do not cover the key), with the flag to look at in the message.
 *
 * Threading: a cr_etcd is safe to share between threads; each call takes
 * an HTTP handle from a small pool (connections are kept alive). Results
 * are owned by the caller (cr_etcd_result_fini). Lock order: auth_mu (one
 * authentication at a time) before mu; neither is held across a call
 * other than the authentication itself.
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

/* Bounds of the security options (documented in docs/operations.md). */
#define CR_ETCD_PATH_MAX     1024
#define CR_ETCD_USER_MAX     128
#define CR_ETCD_PASSWORD_MAX 256
#define CR_ETCD_TOKEN_MAX    4096
/* A PEM file (CA bundle, certificate, key) larger than this is refused. */
#define CR_ETCD_PEM_MAX (1u << 20)

/* TLS and authentication options, copied by value. "" = not given. */
typedef struct cr_etcd_sec {
    char cacert[CR_ETCD_PATH_MAX];        /* --etcd-cacert: CAs to verify etcd */
    char cert[CR_ETCD_PATH_MAX];          /* --etcd-cert: client certificate */
    char key[CR_ETCD_PATH_MAX];           /* --etcd-key: its private key */
    char user[CR_ETCD_USER_MAX];          /* --etcd-user */
    char password_file[CR_ETCD_PATH_MAX]; /* --etcd-password-file */
    /* Filled by cr_etcd_sec_load from password_file; wiped by
     * cr_etcd_sec_wipe. Never printed. */
    char password[CR_ETCD_PASSWORD_MAX + 1];
    bool loaded;
} cr_etcd_sec;

/* The flags, for usage texts of the commands that take them. */
#define CR_ETCD_SEC_USAGE                                                                          \
    "  --etcd-cacert FILE   verify https etcd members against these CAs (PEM)\n"                   \
    "  --etcd-cert FILE     client certificate for etcd (PEM; with --etcd-key)\n"                  \
    "  --etcd-key FILE      its private key\n"                                                     \
    "  --etcd-user NAME     authenticate to etcd as NAME (etcd auth enabled)\n"                    \
    "  --etcd-password-file FILE  NAME's password (first line; the file must not be\n"             \
    "                       readable by every user)\n"

/* Sets option name ("etcd-cacert", "etcd-cert", "etcd-key", "etcd-user",
 * "etcd-password-file") to value (borrowed). 0; CR_ENOENT when name is not
 * one of them; CR_EINVAL (empty, too long, a bad user name) with the
 * reason in err. */
int cr_etcd_sec_set(cr_etcd_sec *s, const char *name, const char *value, char *err, size_t err_len);
/* Whether any option is given. */
bool cr_etcd_sec_any(const cr_etcd_sec *s);
/* Checks the options together (--etcd-cert with --etcd-key, --etcd-user
 * with --etcd-password-file), that each file is a readable PEM file of the
 * right kind, and reads the password: the password file must be a regular
 * file not readable or writable by every user, its first line 1..
 * CR_ETCD_PASSWORD_MAX bytes. 0, or CR_EINVAL / CR_EPERM / CR_EIO with the
 * reason (naming the flag and the file) in err. Idempotent. */
int cr_etcd_sec_load(cr_etcd_sec *s, char *err, size_t err_len);
/* Overwrites the password in memory. */
void cr_etcd_sec_wipe(cr_etcd_sec *s);

typedef struct cr_etcd_opts {
    int64_t connect_timeout_ms; /* per endpoint; 0 = 1000 */
    int64_t request_timeout_ms; /* whole request; 0 = 5000 */
    const cr_etcd_sec *sec;     /* borrowed, copied; NULL = no TLS options, no
                                   authentication. Must be loaded when it
                                   names a user. */
} cr_etcd_opts;

/* endpoints: "http://h1:2379,http://h2:2379" or all https:// (borrowed).
 * 0 and *out (free with cr_etcd_free), CR_EINVAL for a malformed list, a
 * mix of http and https, TLS options with http endpoints, or a user whose
 * password was not loaded; CR_EUNAVAIL when libcurl cannot be loaded.
 * Connects to nothing yet. */
int cr_etcd_new(const char *endpoints, const cr_etcd_opts *opts, cr_etcd **out);
void cr_etcd_free(cr_etcd *e);
/* The reason for this thread's last failed call ("" when none). */
const char *cr_etcd_last_error(void);
/* The endpoint the last call went to (borrowed; for messages). */
const char *cr_etcd_endpoint(cr_etcd *e);
/* Whether the endpoints are https. */
bool cr_etcd_tls(const cr_etcd *e);
/* One cheap authenticated read (a count of the keys under prefix), to
 * find bad credentials or certificates at start-up rather than at the
 * first write. 0 or the call's error (cr_etcd_last_error()). */
int cr_etcd_probe(cr_etcd *e, const char *prefix);
/* A command's start-up check of its etcd options: a client for endpoints
 * with sec (loaded; NULL: none) and one cr_etcd_probe of prefix. 0, or the
 * error with the reason in err; *unreachable = no member answered (etcd
 * down: the caller may carry on and retry later), as opposed to a refusal
 * (credentials, certificates, roles) that retrying cannot cure. */
int cr_etcd_check(const char *endpoints, const cr_etcd_sec *sec, const char *prefix,
                  bool *unreachable, char *err, size_t err_len);

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
