/*
 * cr_http.h - a small, generic HTTP/1.1 server over libmicrohttpd.
 *
 * Used by the controller (REST API) and by the agent (its /metrics). The
 * server owns a pool of event threads (epoll); for each request it buffers
 * the whole body (up to max_body_bytes, else 413 without calling the
 * handler), then calls the handler once with a cr_http_req.
 *
 * The handler answers in one of two ways:
 *   - synchronously: cr_http_respond() before returning;
 *   - deferred: cr_http_defer() before returning, then cr_http_respond()
 *     later from any thread (a group commit finished, a long-poll woke up).
 *     The connection is suspended meanwhile and costs no thread.
 * Every deferred request must be answered exactly once, and before
 * cr_http_server_free(); the server answers 503 to any still pending there.
 *
 * Threading: handlers run on the server's threads, concurrently; the
 * handler context must be thread-safe. cr_http_respond() is thread-safe.
 * The observe hook (optional) is called once per answered request with the
 * route label the handler set (cr_http_set_route), for latency metrics.
 */
#ifndef CR_HTTP_H
#define CR_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cr_http_server cr_http_server;
typedef struct cr_http_req cr_http_req;

typedef void (*cr_http_handler)(void *ctx, cr_http_req *req);
/* Called once the request head is read, before its body: return false
 * after answering with cr_http_respond (the body is not read, the
 * connection closes); true to go on. Only headers, method, path and peer
 * may be read here. */
typedef bool (*cr_http_head_hook)(void *ctx, cr_http_req *req);
/* Called after an answer is queued: route label (never NULL), status, and
 * the time from the request's first byte to the answer. */
typedef void (*cr_http_observer)(void *ctx, const char *method, const char *route, unsigned status,
                                 int64_t dur_ns);

typedef struct cr_http_config {
    const char *bind_addr;        /* IPv4 or IPv6 literal; NULL = 127.0.0.1 */
    uint16_t port;                /* 0 = an ephemeral port (see cr_http_server_port) */
    const char *tls_cert_pem;     /* PEM contents (not a path) or NULL for plain HTTP */
    const char *tls_key_pem;      /* PEM contents or NULL */
    size_t max_body_bytes;        /* 0 = 1 MiB */
    unsigned timeout_s;           /* idle connection timeout; 0 = 30 */
    unsigned header_timeout_s;    /* accept or last answer -> request head complete; 0 = 30 */
    unsigned body_timeout_s;      /* head complete -> body complete; 0 = 60 */
    unsigned max_conns_per_ip;    /* open connections per client address; 0 = 256 */
    unsigned conns_reserved;      /* more per address for agents and admins only; 0 = 32 */
    unsigned max_conns_per_token; /* connections charged to one token; 0 = 64 */
    unsigned threads;             /* event threads; 0 = 2 */
    unsigned max_conns;           /* 0 = 4096 */
    cr_http_handler handler;      /* required */
    cr_http_head_hook on_head;    /* optional */
    cr_http_observer observe;     /* optional */
    void *ctx;                    /* borrowed; passed to handler and observe */
} cr_http_config;

/* Start serving. Returns 0 and *out (free with cr_http_server_free), or
 * CR_EINVAL (bad address), CR_EIO (bind failed, e.g. port in use). */
int cr_http_server_new(const cr_http_config *cfg, cr_http_server **out);
/* The bound port (useful with port 0). */
uint16_t cr_http_server_port(const cr_http_server *s);
/* Stop accepting new connections (existing ones continue). Beware: with
 * libmicrohttpd's epoll worker threads this can race a worker into a
 * libmicrohttpd panic (the controller no longer calls it; see
 * controller_main.c). */
void cr_http_server_quiesce(cr_http_server *s);
/* Stop and free; NULL-safe. */
void cr_http_server_free(cr_http_server *s);

/* Request accessors: strings are borrowed, valid until the answer. */
const char *cr_http_method(const cr_http_req *r);
/* Path without the query string, percent-decoded by libmicrohttpd. */
const char *cr_http_path(const cr_http_req *r);
/* A query argument, or NULL. */
const char *cr_http_query(const cr_http_req *r, const char *key);
/* The name of the first query argument not in allowed (NULL-terminated), or NULL. */
/* The query as received, re-escaped: "?k=v&k2" or "" when there is none.
 * Returned new (free with free()). For redirects. */
char *cr_http_query_string(const cr_http_req *r);
const char *cr_http_query_unknown(const cr_http_req *r, const char *const *allowed);
/* A request header (case-insensitive), or NULL. */
const char *cr_http_header(const cr_http_req *r, const char *name);
/* The body (NUL-terminated for convenience; may contain NULs) and its length. */
const char *cr_http_body(const cr_http_req *r, size_t *len);
/* The peer address as text ("127.0.0.1"). */
const char *cr_http_peer(const cr_http_req *r);

/* Connection limits keyed so that one client cannot lock out another on
 * its address (http_guard.h): a connection over max_conns_per_ip first
 * takes the place of the oldest idle one of that address that never
 * carried a privileged request; without one it is in the reserve
 * (conns_reserved more), where the handler must serve only agents' and
 * admins' requests: cr_http_conn_reserved is true there until
 * cr_http_conn_privileged. cr_http_conn_privileged: this request is an
 * agent's or an admin's (the connection is never evicted, and not charged
 * to a token). cr_http_conn_charge: charge the connection to the caller's
 * token key (borrowed, up to 24 bytes); false when that token holds
 * max_conns_per_token connections already (answer 429 and close). */
bool cr_http_conn_reserved(const cr_http_req *r);
void cr_http_conn_privileged(cr_http_req *r);
bool cr_http_conn_charge(cr_http_req *r, const void *key, size_t len);

/* Route label for metrics ("/v1/jobs/{id}"); borrowed, must be static. */
void cr_http_set_route(cr_http_req *r, const char *route);
/* Add a response header (copied). */
void cr_http_add_header(cr_http_req *r, const char *name, const char *value);
/* Per-request slot for the handler's own use (e.g. the authenticated
 * principal); not freed by the server. */
void cr_http_set_user(cr_http_req *r, void *user);
void *cr_http_user(const cr_http_req *r);

/* Answer: body taken (freed by the server; may be NULL for empty). */
void cr_http_respond(cr_http_req *r, unsigned status, const char *content_type, char *body,
                     size_t len);
/* Mark the request as answered later (from any thread). */
void cr_http_defer(cr_http_req *r);

/* A streamed answer (server-sent events): cr_http_respond_stream answers
 * r from its handler (not deferred; NULL otherwise) with a body of unknown
 * length, sent chunked as cr_http_stream_write queues it, until
 * cr_http_stream_close or the client goes away. The connection costs no
 * thread while nothing is queued (suspended). At most max_unsent bytes
 * wait unsent: a write past it closes the stream (a client that does not
 * read is dropped). The stream comes with one reference for the caller
 * (cr_http_stream_release); the connection holds its own. All of these are
 * thread-safe; the server closes every stream before it stops. */
typedef struct cr_http_stream cr_http_stream;
cr_http_stream *cr_http_respond_stream(cr_http_req *r, unsigned status, const char *content_type,
                                       size_t max_unsent);
/* False (nothing queued) once the stream is closed or its client gone. */
bool cr_http_stream_write(cr_http_stream *st, const char *data, size_t len);
/* What was queued is still sent, then the body ends. */
void cr_http_stream_close(cr_http_stream *st);
void cr_http_stream_release(cr_http_stream *st);

#endif
