/*
 * client_int.h - private contract between the files of src/client.
 *
 * cr_client.c owns the public API: options, results, error mapping. A
 * request is carried out by one of two transports behind cr__client_xfer:
 *
 *   client_http.c  plain http:// over a kept-alive TCP socket, written here
 *                  (HTTP/1.1: Content-Length and chunked bodies, 1xx skipped,
 *                  keep-alive unless the server says close);
 *   client_curl.c  https:// through libcurl, loaded with dlopen on first use.
 *
 * Why two: linking libcurl costs every 'corral' process its ~30 dependent
 * libraries at exec (measured about 6 ms of CPU per start on this machine,
 * ten times a bare process), which capped 'corral submit' rates; plain HTTP
 * on loopback needs none of it, and TLS keeps libcurl's maturity.
 */
#ifndef CLIENT_INT_H
#define CLIENT_INT_H

#include "cr_buf.h"
#include "cr_client.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Answers over this size are cut off with CR_ETOOBIG: the API's lists are
 * bounded, and a runaway server must not exhaust the client's memory. */
#define CR__CLIENT_MAX_ANSWER (256u << 20)

typedef struct cr__curl cr__curl; /* libcurl state of one client (client_curl.c) */

/* Controllers one client may name (a comma list in opts.server). */
#define CR__CLIENT_MAX_SERVERS 8
/* Redirects (307/308 from a follower controller) followed per call. */
#define CR__CLIENT_MAX_REDIRECTS 4

struct cr_client {
    char *server;                          /* base URL in use, without trailing '/' */
    char *servers[CR__CLIENT_MAX_SERVERS]; /* the configured list, each without '/' */
    size_t nservers;                       /* entries in servers (>= 1) */
    size_t cur;                            /* servers[cur] is the last one tried from the list */
    int64_t failover_ns;                   /* how long one call goes on trying the others */
    bool tls;                              /* https:// */
    char *host;                            /* host for http:// (no brackets) */
    char *port;                            /* port for http:// ("8620") */
    char *host_header;                     /* "Host:" value */
    char *prefix;                          /* path prefix of the base URL ("" or "/api") */
    char *token;                           /* bearer token or NULL */
    char *ca_file;                         /* PEM bundle or NULL */
    char *cert_file;                       /* client certificate or NULL */
    char *key_file;                        /* client key or NULL */
    char *user_agent;                      /* User-Agent value */
    bool insecure;                         /* skip TLS verification */
    int64_t connect_timeout_ns;            /* connect phase limit */
    int64_t timeout_ns;                    /* default whole-request limit */
    int fd;                                /* http: kept-alive socket, -1 none */
    cr__curl *curl;                        /* https: libcurl handle, NULL until used */
    cr_client_cancel_fn cancel;            /* asked while waiting for an answer; NULL: none */
    void *cancel_ud;                       /* its argument (borrowed) */
    int64_t rate_wait_ns;                  /* longest wait on 429s in one call, 0: none */
    cr_client_wait_fn wait_fn;             /* told before such a wait; NULL: none */
    void *wait_ud;                         /* its argument (borrowed) */
};

/* One request and what came back. */
typedef struct cr__xfer {
    const char *method;   /* "GET", "POST", ... */
    const char *path;     /* escaped path and query, from '/' */
    const char *body;     /* JSON payload or NULL */
    const char *idem;     /* Idempotency-Key value or NULL */
    size_t body_len;      /* its length */
    int64_t timeout_ns;   /* whole request, 0: none */
    int64_t idle_ns;      /* streams: longest silence, 0: none */
    cr_client_data_fn fn; /* 2xx body sink (streaming) or NULL */
    void *ud;             /* fn's argument */
    long status;          /* out: HTTP status, 0 if none */
    cr_buf answer;        /* out: buffered body (non-2xx, or no fn) */
    bool stopped;         /* out: fn asked to stop */
    bool sent;            /* out: some byte of the request may have reached a server */
    char location[1024];  /* out: the answer's Location header ("" none) */
    unsigned retry_s;     /* out: the answer's Retry-After in seconds (0: none or a date) */
    char err[256];        /* out: transport error text */
} cr__xfer;

/* How often a wait asks the client's cancel hook. */
#define CR__CLIENT_CANCEL_SLICE_MS 50

/* Each returns 0 when a complete answer (any status) came, or CR_EAGAIN
 * (the cancel hook said stop), CR_EUNAVAIL (no connection / no answer),
 * CR_ETIMEDOUT, CR_EIO (broken
 * after the status), CR_ETOOBIG, CR_ENOTSUP (https without libcurl), with
 * x->err set. A stream stopped by fn returns 0 with x->stopped. */
int cr__client_http(cr_client *c, cr__xfer *x);
int cr__client_curl(cr_client *c, cr__xfer *x);
void cr__client_curl_free(cr__curl *k);

#endif
