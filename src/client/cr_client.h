/*
 * cr_client.h - HTTP client of the Corral REST API (docs/api.md).
 *
 * One cr_client is one connection context: consecutive requests to the same
 * controller reuse the TCP (and TLS) connection. Plain http:// goes over a
 * small built-in HTTP/1.1 transport; https:// goes through libcurl, loaded
 * on first use (client_int.h says why). A cr_client is NOT thread-safe: give
 * each thread its own (the agent uses one for its heartbeat and one for its
 * long-poll). Clients may be created from any thread.
 *
 * A kept-alive connection the server closed while idle is replaced before
 * use; a GET, PUT or DELETE that still fails on a reused connection before
 * any byte of the answer arrived is retried once on a fresh one. A POST is
 * never retried: the server may have acted on it (no double submissions).
 *
 * Several controllers: opts.server may list up to 8 base URLs, separated by
 * commas (a leader and its standbys, docs/operations.md "High
 * availability"). A 307 or 308 answer whose Location is the same path at
 * another base URL of that list (a follower naming the leader) is followed,
 * at most 4 in a row, with the same method and body; the base URL that
 * answered stays in use. A Location at any other base URL, or from https://
 * down to http://, is not followed (CR_EUNAVAIL, message naming the
 * Location): the bearer token goes only to the configured controllers. With several URLs, a call
 * that reached no controller, or got a 503 CR_EUNAVAIL (no leader yet, shutting down), goes on to
 * the next URL, round after round, for up to opts.failover_ns; a POST is tried elsewhere only when
 * nothing of it was sent or it carries an Idempotency-Key (cr_client_request_idem), so a submit is
 * never made twice.
 *
 * Rate limits: a 429 answer with "Retry-After: N" (docs/api.md) makes a
 * call that is safe to repeat (GET, PUT, DELETE, or a POST with an
 * Idempotency-Key) wait N seconds and repeat, as long as the waits of that
 * call stay within opts.rate_wait_ns (30 s); the wait hook, when set, is
 * told first. Otherwise the 429 is the result (CR_EAGAIN) and its message
 * says why it was not repeated.
 *
 * Every request carries "Authorization: Bearer <token>" when a token is set,
 * sends and expects JSON, and is bounded by a timeout: the client's default
 * (opts.timeout_ns) or, for long-polls and streams, the one given to the call.
 *
 * Results. Each call fills a caller-owned cr_client_res (init/fini):
 *   - status 0: the server was not reached or did not answer (transport
 *     failure); the call returns CR_EUNAVAIL (connect failed, DNS, TLS, no
 *     answer), CR_ETIMEDOUT, or CR_ENOTSUP (https:// without libcurl), and
 *     message says what went wrong.
 *   - an answer that broke after its status line (connection closed inside
 *     the body, or one over 256 MiB): status is set, the call returns
 *     CR_EIO or CR_ETOOBIG, message says what happened.
 *   - status 2xx: the call returns 0; body is the parsed JSON answer (NULL
 *     when the answer was empty or not JSON; raw holds the bytes either way).
 *   - status 4xx/5xx: the call returns the code named by the server's
 *     "error" member (CR_EINVAL for "CR_EINVAL"), or one derived from the
 *     status when the name is unknown (401 CR_EAUTH, 403 CR_EPERM, 404
 *     CR_ENOENT, 409 CR_ECONFLICT, 413 CR_ETOOBIG, other 4xx CR_EINVAL, 5xx
 *     CR_EIO); message is the server's "message" member verbatim (or
 *     "HTTP <status>" when the body has none), field its "field" member.
 * The result is reset by every call, so one may be reused across calls.
 *
 * Ownership: strings passed in are borrowed (copied where kept); JSON
 * documents passed in are borrowed (never stolen); body in the result is
 * owned by the result (json_incref it to keep it past cr_client_res_fini).
 */
#ifndef CR_CLIENT_H
#define CR_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The controller's default address (docs/api.md). */
#define CR_CLIENT_DEFAULT_SERVER "http://127.0.0.1:8620"

typedef struct cr_client cr_client;

/* How long one call goes on trying the other controllers of a list. */
#define CR_CLIENT_FAILOVER_NS (20LL * 1000000000LL)
/* How long one call waits in all on the controller's rate limit (429). */
#define CR_CLIENT_RATE_WAIT_NS (30LL * 1000000000LL)

typedef struct cr_client_opts {
    const char *server;         /* base URL "http[s]://host:port", or a comma list of up to 8
                                   (the controllers of an HA trio); NULL: the default */
    const char *token;          /* bearer token; NULL: none */
    int64_t connect_timeout_ns; /* 0: 5 s */
    int64_t timeout_ns;         /* whole-request default; 0: 30 s */
    const char *ca_file;        /* PEM bundle to verify the server; NULL: system */
    const char *cert_file;      /* client certificate (PEM); NULL: none */
    const char *key_file;       /* its private key (PEM); NULL: none */
    bool insecure;              /* skip TLS peer and host verification (tests only) */
    const char *user_agent;     /* NULL: "corral/<version>" */
    int64_t failover_ns;        /* how long one call tries other controllers of the list;
                                   0: CR_CLIENT_FAILOVER_NS with several, none with one;
                                   < 0: never */
    int64_t rate_wait_ns;       /* a call answered 429 with Retry-After waits and repeats
                                   (when repeating is safe) for up to this long in all;
                                   0: CR_CLIENT_RATE_WAIT_NS; < 0: never */
} cr_client_opts;

typedef struct cr_client_res {
    long status;  /* HTTP status; 0 when no answer came (transport failure) */
    json_t *body; /* parsed JSON answer, owned; NULL if empty or not JSON */
    char *raw;    /* the answer's bytes, NUL-terminated, owned; NULL if none */
    size_t raw_len;
    char *error;   /* server's "error" member ("CR_EINVAL"), owned; NULL if none */
    char *message; /* server's "message", or the transport error; owned; NULL on 2xx */
    char *field;   /* server's "field" member, owned; NULL if none */
} cr_client_res;

void cr_client_res_init(cr_client_res *r);
void cr_client_res_fini(cr_client_res *r);
/* Best human text of a failed result: message, else "HTTP <status>", else
 * the error's text. Valid until the result changes. */
const char *cr_client_res_msg(const cr_client_res *r, int err);

/* Returned new in *out (free with cr_client_free); opts borrowed (copied).
 * CR_EINVAL when server is not an http:// or https:// URL. */
int cr_client_new(const cr_client_opts *opts, cr_client **out);
void cr_client_free(cr_client *c);
/* Base URL in use, without a trailing slash. */
const char *cr_client_server(const cr_client *c);
/* Replace the bearer token (the agent switches to its node token). */
void cr_client_set_token(cr_client *c, const char *token);

/*
 * Cancellation, for long-polls that must not hold up a shutdown: while a
 * request waits for its answer, fn(ud) is asked about every 50 ms from the
 * calling thread; when it returns true the request ends, the connection is
 * closed and the call returns CR_EAGAIN with message "cancelled". fn NULL
 * removes the hook. ud is borrowed and must outlive the client's use.
 */
typedef bool (*cr_client_cancel_fn)(void *ud);
void cr_client_set_cancel(cr_client *c, cr_client_cancel_fn fn, void *ud);

/* Told before a wait on a 429 (above): the seconds it will wait and the
 * server's message (borrowed, valid during the call). fn NULL removes it;
 * ud is borrowed. The cancel hook is asked during the wait. */
typedef void (*cr_client_wait_fn)(void *ud, unsigned wait_s, const char *message);
void cr_client_set_wait_hook(cr_client *c, cr_client_wait_fn fn, void *ud);

/* --- Generic requests ---------------------------------------------------- */

/*
 * method: "GET", "POST", "PUT", "DELETE". path: starts with '/', already
 * escaped (see cr_client_escape), may carry a query. body: sent as JSON when
 * not NULL (POST with no body sends "{}"). timeout_ns: 0 for the client's
 * default, else this request's limit (long-polls pass wait + margin).
 */
int cr_client_request(cr_client *c, const char *method, const char *path, const json_t *body,
                      int64_t timeout_ns, cr_client_res *res);

/* The same with "Idempotency-Key: idem_key" (NULL: none): a POST so marked
 * may be repeated at another controller after a lost answer; the controller
 * answers the repeat with the first answer (POST /v1/jobs, docs/api.md).
 * CR_EINVAL when the key holds CR or LF. */
int cr_client_request_idem(cr_client *c, const char *method, const char *path, const json_t *body,
                           const char *idem_key, int64_t timeout_ns, cr_client_res *res);

/*
 * Streaming GET: on a 2xx answer each chunk of the body is handed to fn as it
 * arrives (nothing is buffered, res->raw stays NULL); fn returns 0 to go on
 * or non-zero to stop (the call then returns 0). On 4xx/5xx the body is
 * buffered and parsed as for cr_client_request and fn is never called.
 * timeout_ns: 0 means no overall limit (follow until the server closes or
 * fn stops); the connect timeout still applies. A stream that stalls with no
 * byte for idle_timeout_ns (0: never) fails with CR_ETIMEDOUT.
 */
typedef int (*cr_client_data_fn)(void *ud, const char *data, size_t len);
int cr_client_stream(cr_client *c, const char *path, int64_t timeout_ns, int64_t idle_timeout_ns,
                     cr_client_data_fn fn, void *ud, cr_client_res *res);

/* Returned new (free with free()): s percent-escaped for one path segment
 * or query value. */
char *cr_client_escape(const char *s);

/* --- Typed calls of docs/api.md (all fill res as above) ------------------ */

/* GET /v1/health, GET /v1/version. */
int cr_client_health(cr_client *c, cr_client_res *res);
int cr_client_version(cr_client *c, cr_client_res *res);

/* Jobs. job: the request object of docs/api.md. Answer {"ids":[...]}. */
int cr_client_job_submit(cr_client *c, const json_t *job, cr_client_res *res);
/* state, tenant: NULL for any; limit: 0 for the server's default. */
int cr_client_jobs_list(cr_client *c, const char *state, const char *tenant, int64_t limit,
                        cr_client_res *res);
int cr_client_job_get(cr_client *c, int64_t id, cr_client_res *res);
/* action: "cancel", "hold", "release" or "requeue". */
int cr_client_job_action(cr_client *c, int64_t id, const char *action, cr_client_res *res);
/* The same for a job named "ID" or "ARRAY_INDEX" (one array task);
 * whole_array: on an array's first id, every task of the array. */
int cr_client_job_action_ref(cr_client *c, const char *ref, const char *action, bool whole_array,
                             cr_client_res *res);
/* POST /v1/jobs/{ref}/signal {"signal": SIG}: to the running job's tasks. */
int cr_client_job_signal_ref(cr_client *c, const char *ref, const char *sig, bool whole_array,
                             cr_client_res *res);
/* GET /v1/jobs/{ref}: ref "ID" or "ARRAY_INDEX". */
int cr_client_job_get_ref(cr_client *c, const char *ref, cr_client_res *res);
/* GET /v1/jobs/{id}/logs; stream: "stdout" or "stderr"; follow streams until
 * the job ends or fn stops; without follow the bytes from offset are
 * delivered to fn as well. */
int cr_client_job_logs(cr_client *c, int64_t id, const char *stream, uint64_t offset, bool follow,
                       cr_client_data_fn fn, void *ud, cr_client_res *res);
/* The same for one task of the job (rank >= 0; < 0: the job's first). */
int cr_client_job_logs_rank(cr_client *c, int64_t id, const char *stream, uint64_t offset,
                            int64_t rank, bool follow, cr_client_data_fn fn, void *ud,
                            cr_client_res *res);

/* Nodes. */
int cr_client_nodes_list(cr_client *c, cr_client_res *res);
int cr_client_node_get(cr_client *c, const char *name, cr_client_res *res);
/* drain true: /drain with reason (may be NULL); false: /undrain. */
int cr_client_node_drain(cr_client *c, const char *name, bool drain, const char *reason,
                         cr_client_res *res);
/* by: "tenant,gpu_type,day" or a subset; NULL for the server's default. */
int cr_client_usage(cr_client *c, const char *by, cr_client_res *res);
/* The same with a tree level (0: none; 1..8 rolls tenants up to their
 * ancestor there) and a period ("day", "month", "year", "all"; NULL: day);
 * by, period borrowed, may be NULL. */
int cr_client_usage_q(cr_client *c, const char *by, int level, const char *period,
                      cr_client_res *res);

/* Tenants and tokens (admin). */
int cr_client_tenants_list(cr_client *c, cr_client_res *res);
int cr_client_tenant_create(cr_client *c, const json_t *tenant, cr_client_res *res);
int cr_client_tenant_put(cr_client *c, const char *name, const json_t *tenant, cr_client_res *res);
int cr_client_token_create(cr_client *c, const json_t *req, cr_client_res *res);
int cr_client_tokens_list(cr_client *c, cr_client_res *res);
int cr_client_token_revoke(cr_client *c, const char *id, cr_client_res *res);

/* Agents. register uses the join token as bearer; then cr_client_set_token
 * with the answer's node_token. desired long-polls up to wait_s seconds. */
int cr_client_agent_register(cr_client *c, const json_t *inventory, cr_client_res *res);
int cr_client_agent_status(cr_client *c, const char *node, const json_t *status,
                           cr_client_res *res);
int cr_client_agent_desired(cr_client *c, const char *node, int64_t version, int64_t wait_s,
                            cr_client_res *res);

/* Services. */
int cr_client_service_create(cr_client *c, const json_t *svc, cr_client_res *res);
int cr_client_services_list(cr_client *c, cr_client_res *res);
int cr_client_service_get(cr_client *c, const char *name, cr_client_res *res);
int cr_client_service_scale(cr_client *c, const char *name, int64_t replicas, cr_client_res *res);
/* POST /v1/services/{name}/update: a new spec (as for a create), rolled out
 * replica by replica (docs/api.md, "Rolling updates"). */
int cr_client_service_update(cr_client *c, const char *name, const json_t *svc, cr_client_res *res);
int cr_client_service_delete(cr_client *c, const char *name, cr_client_res *res);
/* Long-polls up to wait_s seconds when version >= 0 and wait_s > 0. */
int cr_client_service_endpoints(cr_client *c, const char *name, int64_t version, int64_t wait_s,
                                cr_client_res *res);
int cr_client_service_metrics(cr_client *c, const char *name, const json_t *metrics,
                              cr_client_res *res);

#endif
