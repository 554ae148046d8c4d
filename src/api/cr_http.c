/*
 * cr_http.c - libmicrohttpd glue: body buffering with a size limit,
 * synchronous and deferred (suspend/resume) answers, latency observation.
 *
 * A request moves NEW -> (handler) -> ANSWERED, or NEW -> DEFERRED ->
 * SUSPENDED -> ANSWERED. r->mu guards the hand-off between the handler's
 * thread and the thread that answers a deferred request: whichever comes
 * second queues the answer (the handler thread directly, or by resuming
 * the connection so that libmicrohttpd calls the access handler again).
 * Lock order: r->mu, then libmicrohttpd's internal locks.
 */
#include "cr_http.h"

#define CR_HTTP_POOL_BYTES (16 * 1024)

#include "cr_alloc.h"
#include "cr_http_strict.h"
#include "cr_buf.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"
#include "http_guard.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum req_state { REQ_NEW = 0, REQ_DEFERRED, REQ_SUSPENDED, REQ_ANSWERED };

/* A streamed answer (cr_http_respond_stream). mu guards buf, off, closed
 * and suspended; the reader (a libmicrohttpd thread, stream_read) suspends
 * the connection when nothing is queued, a write resumes it. Lock order:
 * mu, then libmicrohttpd's locks (as r->mu). refs: the caller's and the
 * response's (dropped by stream_done when libmicrohttpd frees it). */
struct cr_http_stream {
    pthread_mutex_t mu;
    _Atomic int refs;
    cr_buf buf;  /* queued bytes; buf.data + off is the first unsent */
    size_t off;  /* sent of buf */
    size_t max;  /* unsent bytes at most */
    bool closed; /* no more writes; the body ends once buf is sent */
    bool suspended;
    _Atomic bool gone;           /* the response was freed: the client went away */
    struct MHD_Connection *conn; /* valid while the response lives */
    cr_http_server *srv;
    struct cr_http_stream *next, *prev; /* srv->streams, while the response lives */
};

typedef struct hdr {
    char *name;
    char *value;
} hdr;

struct cr_http_req {
    cr_http_server *srv;          /* borrowed */
    struct MHD_Connection *conn;  /* borrowed; valid while not answered */
    pthread_mutex_t mu;           /* guards state and the pending answer */
    enum req_state state;         /* see the file comment */
    bool too_big;                 /* body over the limit: answer 413 */
    bool queued;                  /* answer handed to libmicrohttpd */
    bool was_suspended;           /* resumed, counted in srv->resumed */
    const char *method;           /* borrowed from libmicrohttpd */
    const char *url;              /* borrowed from libmicrohttpd */
    const char *route;            /* static label for metrics */
    cr_buf body;                  /* request body */
    int64_t start_ns;             /* monotonic, first call */
    char peer[64];                /* client address */
    unsigned status;              /* answer status */
    char *resp_body;              /* owned until queued */
    size_t resp_len;              /* bytes in resp_body */
    char *resp_type;              /* owned content type */
    hdr *hdrs;                    /* owned extra response headers */
    size_t nhdrs, caphdrs;        /* counts */
    void *user;                   /* handler's slot, not owned */
    struct cr_http_req *next_def; /* link in srv->deferred while deferred */
    struct cr_http_req *prev_def; /* link in srv->deferred while deferred */
    cr_http_stream *stream;       /* a streamed answer not yet queued (its response's ref) */
};

struct cr_http_server {
    struct MHD_Daemon *d;    /* owned */
    cr_http_config cfg;      /* copy; strings borrowed only during new */
    uint16_t port;           /* bound port */
    pthread_mutex_t def_mu;  /* guards the deferred list and the streams' */
    cr_http_req *deferred;   /* requests deferred and not yet answered */
    cr_http_stream *streams; /* streamed answers whose response lives */
    bool quiesced;           /* no longer accepting */
    int quiesced_fd;         /* the listen socket MHD handed back (-1: none), closed only
                                after MHD_stop_daemon: its threads may still poll it */
    _Atomic int resumed;     /* answered after suspension, not yet queued */
    http_guard *guard;       /* deadlines and per-client caps; owned */
};

static void def_link(cr_http_server *s, cr_http_req *r)
{
    pthread_mutex_lock(&s->def_mu);
    r->prev_def = NULL;
    r->next_def = s->deferred;
    if (s->deferred) {
        s->deferred->prev_def = r;
    }
    s->deferred = r;
    pthread_mutex_unlock(&s->def_mu);
}

static void def_unlink(cr_http_server *s, cr_http_req *r)
{
    pthread_mutex_lock(&s->def_mu);
    if (r->prev_def) {
        r->prev_def->next_def = r->next_def;
    } else if (s->deferred == r) {
        s->deferred = r->next_def;
    }
    if (r->next_def) {
        r->next_def->prev_def = r->prev_def;
    }
    r->next_def = r->prev_def = NULL;
    pthread_mutex_unlock(&s->def_mu);
}

static void stream_unref(cr_http_stream *st)
{
    if (atomic_fetch_sub(&st->refs, 1) == 1) {
        cr_buf_fini(&st->buf);
        pthread_mutex_destroy(&st->mu);
        free(st);
    }
}

/* libmicrohttpd is done with the response: out of the server's list, and
 * its reference dropped (takes no lock of the stream's: the connection is
 * not suspended once it is being freed). */
static void stream_done(void *cls)
{
    cr_http_stream *st = cls;
    cr_http_server *s = st->srv;
    pthread_mutex_lock(&s->def_mu);
    if (st->prev) {
        st->prev->next = st->next;
    } else if (s->streams == st) {
        s->streams = st->next;
    }
    if (st->next) {
        st->next->prev = st->prev;
    }
    st->next = st->prev = NULL;
    pthread_mutex_unlock(&s->def_mu);
    atomic_store(&st->gone, true);
    stream_unref(st);
}

/* The connection's next bytes: what is queued; the end once closed; else
 * none, the connection suspended until a write (libmicrohttpd: returning 0
 * is meant to go with a suspend, from this callback). */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    cr_http_stream *st = cls;
    pthread_mutex_lock(&st->mu);
    size_t have = st->buf.len - st->off;
    if (have) {
        size_t n = have < max ? have : max;
        memcpy(buf, st->buf.data + st->off, n);
        st->off += n;
        if (st->off == st->buf.len) {
            cr_buf_reset(&st->buf);
            st->off = 0;
        }
        pthread_mutex_unlock(&st->mu);
        return (ssize_t)n;
    }
    if (st->closed) {
        pthread_mutex_unlock(&st->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    st->suspended = true;
    MHD_suspend_connection(st->conn);
    pthread_mutex_unlock(&st->mu);
    return 0;
}

/* st->mu held. */
static void stream_wake(cr_http_stream *st)
{
    if (st->suspended) {
        st->suspended = false;
        MHD_resume_connection(st->conn);
    }
}

/* Queue the stored answer on the connection; called on a libmicrohttpd
 * thread inside the access handler. */
static enum MHD_Result queue_answer(cr_http_req *r)
{
    struct MHD_Response *resp;
    if (r->stream) {
        cr_http_stream *st = r->stream;
        r->stream = NULL;
        resp =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_done);
        if (!resp) {
            stream_done(st);
            return MHD_NO;
        }
    } else {
        resp = MHD_create_response_from_buffer(
            r->resp_len, r->resp_body ? r->resp_body : (void *)"",
            r->resp_body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    }
    if (!resp) {
        return MHD_NO;
    }
    r->resp_body = NULL;
    if (r->resp_type) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->resp_type);
    }
    for (size_t i = 0; i < r->nhdrs; i++) {
        MHD_add_response_header(resp, r->hdrs[i].name, r->hdrs[i].value);
    }
    enum MHD_Result ret = MHD_queue_response(r->conn, r->status, resp);
    MHD_destroy_response(resp);
    r->queued = true;
    if (r->srv->cfg.observe) {
        r->srv->cfg.observe(r->srv->cfg.ctx, r->method, r->route ? r->route : "other", r->status,
                            cr_mono_ns() - r->start_ns);
    }
    return ret;
}

static void req_free(cr_http_req *r)
{
    if (!r) {
        return;
    }
    if (r->stream) { /* answered with a stream that was never queued */
        stream_done(r->stream);
    }
    cr_buf_fini(&r->body);
    free(r->resp_body);
    free(r->resp_type);
    for (size_t i = 0; i < r->nhdrs; i++) {
        free(r->hdrs[i].name);
        free(r->hdrs[i].value);
    }
    free(r->hdrs);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static void set_answer(cr_http_req *r, unsigned status, const char *type, char *body, size_t len)
{
    free(r->resp_body);
    free(r->resp_type);
    r->status = status;
    r->resp_body = body;
    r->resp_len = body ? len : 0;
    r->resp_type = type ? cr_strdup(type) : NULL;
}

static char *json_error_body(const char *name, const char *msg, size_t *len)
{
    char *s = cr_asprintf("{\"error\":\"%s\",\"message\":\"%s\"}", name, msg);
    *len = strlen(s);
    return s;
}

static enum MHD_Result access_cb(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
    cr_http_server *s = cls;
    cr_http_req *r = *con_cls;
    if (!r || r == CR_HTTP_BAD_URI) {
        const char *bad = r == CR_HTTP_BAD_URI
                              ? "the request target has a control byte (raw or %-encoded)"
                              : cr_http_strict_head(conn, method, version);
        r = cr_calloc(1, sizeof *r);
        pthread_mutex_init(&r->mu, NULL);
        r->srv = s;
        r->conn = conn;
        r->method = method;
        r->url = url;
        r->start_ns = cr_mono_ns();
        cr_buf_init(&r->body);
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (ci && ci->client_addr) {
            const struct sockaddr *sa = ci->client_addr;
            if (sa->sa_family == AF_INET) {
                inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr,
                          r->peer, sizeof r->peer);
            } else if (sa->sa_family == AF_INET6) {
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
                          r->peer, sizeof r->peer);
            }
        }
        *con_cls = r;
        if (bad) {
            /* Before libmicrohttpd reads any body: the connection ends with
             * the answer, so nothing after this head is read as a request. */
            size_t len = 0;
            char *b = json_error_body("CR_EINVAL", bad, &len);
            set_answer(r, 400, "application/json", b, len);
            cr_http_add_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
            r->state = REQ_ANSWERED;
            r->route = "bad_framing";
            http_guard_phase(s->guard, conn, HG_NONE);
            http_guard_malformed(s->guard, r->peer, bad);
            return queue_answer(r);
        }
        if (s->cfg.on_head && !s->cfg.on_head(s->cfg.ctx, r)) {
            pthread_mutex_lock(&r->mu);
            bool answered = r->state == REQ_ANSWERED;
            pthread_mutex_unlock(&r->mu);
            if (!answered) {
                size_t len = 0;
                char *b = json_error_body("CR_EIO", "no answer", &len);
                set_answer(r, 500, "application/json", b, len);
                r->state = REQ_ANSWERED;
            }
            cr_http_add_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
            http_guard_phase(s->guard, conn, HG_NONE);
            return queue_answer(r);
        }
        http_guard_phase(s->guard, conn, HG_BODY);
        const char *cl =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->cfg.max_body_bytes) {
            size_t len = 0;
            char *b = json_error_body("CR_ETOOBIG", "request body over the size limit", &len);
            set_answer(r, 413, "application/json", b, len);
            r->state = REQ_ANSWERED;
            r->route = "too_big";
            http_guard_phase(s->guard, conn, HG_NONE);
            return queue_answer(r);
        }
        return MHD_YES;
    }
    r->conn = conn;
    if (*upload_data_size > 0) {
        if (!r->too_big && r->body.len + *upload_data_size > s->cfg.max_body_bytes) {
            r->too_big = true;
            cr_buf_fini(&r->body);
            cr_buf_init(&r->body);
        }
        if (!r->too_big) {
            cr_buf_append(&r->body, upload_data, *upload_data_size);
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    pthread_mutex_lock(&r->mu);
    enum req_state st = r->state;
    pthread_mutex_unlock(&r->mu);
    if (st == REQ_ANSWERED && r->queued) {
        return MHD_YES;
    }
    if (st == REQ_SUSPENDED || st == REQ_ANSWERED) {
        /* Resumed after a deferred answer. */
        enum MHD_Result ret = queue_answer(r);
        if (r->was_suspended) {
            r->was_suspended = false;
            atomic_fetch_sub(&s->resumed, 1);
        }
        return ret;
    }
    if (r->too_big) {
        http_guard_phase(s->guard, conn, HG_NONE);
        size_t len = 0;
        char *b = json_error_body("CR_ETOOBIG", "request body over the size limit", &len);
        set_answer(r, 413, "application/json", b, len);
        r->state = REQ_ANSWERED;
        r->route = "too_big";
        return queue_answer(r);
    }
    if (!r->body.data) {
        cr_buf_puts(&r->body, "");
    }
    http_guard_phase(s->guard, conn, HG_NONE);
    s->cfg.handler(s->cfg.ctx, r);
    pthread_mutex_lock(&r->mu);
    if (r->state == REQ_ANSWERED) {
        pthread_mutex_unlock(&r->mu);
        return queue_answer(r);
    }
    if (r->state == REQ_NEW) {
        /* The handler forgot to answer: a bug, but never hang the client. */
        pthread_mutex_unlock(&r->mu);
        size_t len = 0;
        char *b = json_error_body("CR_EIO", "no answer", &len);
        set_answer(r, 500, "application/json", b, len);
        r->state = REQ_ANSWERED;
        return queue_answer(r);
    }
    /* Deferred and not answered yet: suspend until cr_http_respond resumes. */
    r->state = REQ_SUSPENDED;
    MHD_suspend_connection(conn);
    pthread_mutex_unlock(&r->mu);
    return MHD_YES;
}

static void completed_cb(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    cr_http_req *r = *con_cls;
    /* A kept-alive connection waits for its next request head now. */
    http_guard_phase(((cr_http_server *)cls)->guard, conn, HG_HEAD);
    if (r) {
        /* Wait out a cr_http_respond that resumed us and still holds mu. */
        pthread_mutex_lock(&r->mu);
        bool pending = r->state == REQ_DEFERRED || r->state == REQ_SUSPENDED;
        pthread_mutex_unlock(&r->mu);
        if (pending) {
            def_unlink(r->srv, r);
        }
        if (r->was_suspended) {
            atomic_fetch_sub(&r->srv->resumed, 1);
        }
        req_free(r);
        *con_cls = NULL;
    }
}

__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) {
        line[--n] = '\0';
    }
    cr_http_server *s = cls;
    if (!http_guard_log(s->guard, line)) {
        cr_debug("http: %s", line);
    }
}

int cr_http_server_new(const cr_http_config *cfg, cr_http_server **out)
{
    if (!cfg || !cfg->handler) {
        return CR_EINVAL;
    }
    cr_http_server *s = cr_calloc(1, sizeof *s);
    s->cfg = *cfg;
    s->cfg.bind_addr = NULL;
    s->cfg.tls_cert_pem = NULL;
    s->cfg.tls_key_pem = NULL;
    if (!s->cfg.max_body_bytes) {
        s->cfg.max_body_bytes = 1024 * 1024;
    }
    if (!s->cfg.timeout_s) {
        s->cfg.timeout_s = 30;
    }
    if (!s->cfg.threads) {
        s->cfg.threads = 2;
    }
    if (!s->cfg.max_conns) {
        s->cfg.max_conns = 4096;
    }
    if (!s->cfg.header_timeout_s) {
        s->cfg.header_timeout_s = 30;
    }
    if (!s->cfg.body_timeout_s) {
        s->cfg.body_timeout_s = 60;
    }
    if (!s->cfg.max_conns_per_ip) {
        s->cfg.max_conns_per_ip = 256;
    }
    if (!s->cfg.conns_reserved) {
        s->cfg.conns_reserved = 32;
    }
    if (!s->cfg.max_conns_per_token) {
        s->cfg.max_conns_per_token = 64;
    }
    s->guard = http_guard_new(s->cfg.header_timeout_s, s->cfg.body_timeout_s,
                              s->cfg.max_conns_per_ip, s->cfg.conns_reserved);
    if (!s->guard) {
        free(s);
        return CR_EIO;
    }
    pthread_mutex_init(&s->def_mu, NULL);

    const char *addr = cfg->bind_addr ? cfg->bind_addr : "127.0.0.1";
    struct sockaddr_in sin;
    struct sockaddr_in6 sin6;
    struct sockaddr *sa = NULL;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG;
    memset(&sin, 0, sizeof sin);
    memset(&sin6, 0, sizeof sin6);
    if (inet_pton(AF_INET, addr, &sin.sin_addr) == 1) {
        sin.sin_family = AF_INET;
        sin.sin_port = htons(cfg->port);
        sa = (struct sockaddr *)&sin;
    } else if (inet_pton(AF_INET6, addr, &sin6.sin6_addr) == 1) {
        sin6.sin6_family = AF_INET6;
        sin6.sin6_port = htons(cfg->port);
        sa = (struct sockaddr *)&sin6;
        flags |= MHD_USE_IPv6;
    } else {
        cr_error("http: bad listen address '%s'", addr);
        http_guard_free(s->guard);
        pthread_mutex_destroy(&s->def_mu);
        free(s);
        return CR_EINVAL;
    }
    bool tls = cfg->tls_cert_pem && cfg->tls_key_pem;
    if (tls) {
        flags |= MHD_USE_TLS;
    }
    struct MHD_OptionItem opts[] = {
        {MHD_OPTION_SOCK_ADDR, 0, sa},
        {MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)s->cfg.threads, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)s->cfg.timeout_s, NULL},
        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)s->cfg.max_conns, NULL},
        {MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024, NULL},
        /* A connection's memory pool (its head and read buffer; bodies are
         * copied out as they come): 16 KiB, not libmicrohttpd's 32 KiB,
         * which it clears at every request (a third of a submit's memset
         * work). A head above it is answered 431. */
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)CR_HTTP_POOL_BYTES, NULL},
        {MHD_OPTION_STRICT_FOR_CLIENT, 1, NULL},
        {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)cr_http_strict_uri, NULL},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed_cb, s},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)http_guard_notify, s->guard},
        {MHD_OPTION_PER_IP_CONNECTION_LIMIT,
         (intptr_t)(s->cfg.max_conns_per_ip + s->cfg.conns_reserved + HG_PER_IP_SLACK), NULL},
        {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, s},
        {tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, (void *)cfg->tls_cert_pem},
        {tls ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, (void *)cfg->tls_key_pem},
        {MHD_OPTION_END, 0, NULL},
    };
    s->d = MHD_start_daemon(flags, 0, http_guard_accept, s->guard, access_cb, s, MHD_OPTION_ARRAY,
                            opts, MHD_OPTION_END);
    if (!s->d) {
        cr_error("http: cannot listen on %s:%u%s", addr, (unsigned)cfg->port, tls ? " (TLS)" : "");
        http_guard_free(s->guard);
        pthread_mutex_destroy(&s->def_mu);
        free(s);
        return CR_EIO;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : cfg->port;
    *out = s;
    return 0;
}

uint16_t cr_http_server_port(const cr_http_server *s)
{
    return s->port;
}

void cr_http_server_quiesce(cr_http_server *s)
{
    if (s && !s->quiesced) {
        /* libmicrohttpd: with internal threads the socket "must not be
         * closed while it's in use", which only MHD_stop_daemon ensures
         * (closed here, the number was reused while a worker still had it
         * in its epoll set: ThreadSanitizer's report in multi-agent) */
        MHD_socket fd = MHD_quiesce_daemon(s->d);
        s->quiesced_fd = fd != MHD_INVALID_SOCKET ? (int)fd : -1;
        s->quiesced = true;
    }
}

void cr_http_server_free(cr_http_server *s)
{
    if (!s) {
        return;
    }
    for (;;) {
        pthread_mutex_lock(&s->def_mu);
        cr_http_req *r = s->deferred;
        pthread_mutex_unlock(&s->def_mu);
        if (!r) {
            break;
        }
        size_t len = 0;
        char *b = json_error_body("CR_EUNAVAIL", "server shutting down", &len);
        cr_http_respond(r, 503, "application/json", b, len);
    }
    /* Every stream ends (a suspended one resumed to say so). */
    pthread_mutex_lock(&s->def_mu);
    size_t nst = 0;
    for (cr_http_stream *st = s->streams; st; st = st->next) {
        nst++;
    }
    cr_http_stream **sts = cr_calloc(nst + 1, sizeof *sts);
    nst = 0;
    for (cr_http_stream *st = s->streams; st; st = st->next) {
        atomic_fetch_add(&st->refs, 1);
        sts[nst++] = st;
    }
    pthread_mutex_unlock(&s->def_mu);
    for (size_t i = 0; i < nst; i++) {
        cr_http_stream_close(sts[i]);
        stream_unref(sts[i]);
    }
    free(sts);
    /* Let resumed answers go out before the connections close (bounded). */
    int64_t deadline = cr_mono_ns() + 2 * CR_NS_PER_SEC;
    while (atomic_load(&s->resumed) > 0 && cr_mono_ns() < deadline) {
        usleep(1000);
    }
    while (cr_mono_ns() < deadline) {
        const union MHD_DaemonInfo *di =
            MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        if (!di || di->num_connections == 0) {
            break;
        }
        usleep(1000);
    }
    MHD_stop_daemon(s->d);
    if (s->quiesced && s->quiesced_fd >= 0) {
        close(s->quiesced_fd);
    }
    http_guard_free(s->guard);
    pthread_mutex_destroy(&s->def_mu);
    free(s);
}

const char *cr_http_method(const cr_http_req *r)
{
    return r->method;
}

const char *cr_http_path(const cr_http_req *r)
{
    return r->url;
}

const char *cr_http_query(const cr_http_req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

static void put_escaped(cr_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '_' || *p == '.' || *p == '~') {
            cr_buf_putc(b, (char)*p);
        } else {
            cr_buf_putc(b, '%');
            cr_buf_putc(b, hex[*p >> 4]);
            cr_buf_putc(b, hex[*p & 15]);
        }
    }
}

static enum MHD_Result query_put(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    (void)kind;
    cr_buf *b = cls;
    cr_buf_putc(b, b->len == 0 ? '?' : '&');
    put_escaped(b, key);
    if (value) {
        cr_buf_putc(b, '=');
        put_escaped(b, value);
    }
    return MHD_YES;
}

char *cr_http_query_string(const cr_http_req *r)
{
    cr_buf b;
    cr_buf_init(&b);
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, query_put, &b);
    if (b.len == 0) {
        cr_buf_fini(&b);
        return cr_strdup("");
    }
    return cr_buf_take(&b);
}

typedef struct query_scan {
    const char *const *allowed;
    const char *unknown;
} query_scan;

static enum MHD_Result query_key(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    (void)kind;
    (void)value;
    query_scan *q = cls;
    for (size_t i = 0; q->allowed[i]; i++) {
        if (strcmp(key, q->allowed[i]) == 0) {
            return MHD_YES;
        }
    }
    q->unknown = key;
    return MHD_NO;
}

const char *cr_http_query_unknown(const cr_http_req *r, const char *const *allowed)
{
    query_scan q = {.allowed = allowed, .unknown = NULL};
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, query_key, &q);
    return q.unknown;
}

const char *cr_http_header(const cr_http_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *cr_http_body(const cr_http_req *r, size_t *len)
{
    if (len) {
        *len = r->body.len;
    }
    return cr_buf_str(&r->body);
}

const char *cr_http_peer(const cr_http_req *r)
{
    return r->peer;
}

bool cr_http_conn_reserved(const cr_http_req *r)
{
    return http_guard_reserved(r->srv->guard, r->conn);
}

void cr_http_conn_privileged(cr_http_req *r)
{
    http_guard_privileged(r->srv->guard, r->conn);
}

bool cr_http_conn_charge(cr_http_req *r, const void *key, size_t len)
{
    return http_guard_charge(r->srv->guard, r->conn, key, len, r->srv->cfg.max_conns_per_token);
}

void cr_http_set_route(cr_http_req *r, const char *route)
{
    r->route = route;
}

void cr_http_add_header(cr_http_req *r, const char *name, const char *value)
{
    CR_GROW(r->hdrs, r->nhdrs, r->caphdrs);
    r->hdrs[r->nhdrs].name = cr_strdup(name);
    r->hdrs[r->nhdrs].value = cr_strdup(value);
    r->nhdrs++;
}

void cr_http_set_user(cr_http_req *r, void *user)
{
    r->user = user;
}

void *cr_http_user(const cr_http_req *r)
{
    return r->user;
}

void cr_http_defer(cr_http_req *r)
{
    pthread_mutex_lock(&r->mu);
    if (r->state == REQ_NEW) {
        r->state = REQ_DEFERRED;
        def_link(r->srv, r);
    }
    pthread_mutex_unlock(&r->mu);
}

cr_http_stream *cr_http_respond_stream(cr_http_req *r, unsigned status, const char *content_type,
                                       size_t max_unsent)
{
    pthread_mutex_lock(&r->mu);
    if (r->state != REQ_NEW) {
        pthread_mutex_unlock(&r->mu);
        return NULL;
    }
    cr_http_stream *st = cr_calloc(1, sizeof *st);
    pthread_mutex_init(&st->mu, NULL);
    atomic_init(&st->refs, 2);
    atomic_init(&st->gone, false);
    cr_buf_init(&st->buf);
    st->max = max_unsent;
    st->conn = r->conn;
    st->srv = r->srv;
    set_answer(r, status, content_type, NULL, 0);
    r->stream = st;
    r->state = REQ_ANSWERED;
    pthread_mutex_lock(&r->srv->def_mu);
    st->next = r->srv->streams;
    if (st->next) {
        st->next->prev = st;
    }
    r->srv->streams = st;
    pthread_mutex_unlock(&r->srv->def_mu);
    pthread_mutex_unlock(&r->mu);
    return st;
}

bool cr_http_stream_write(cr_http_stream *st, const char *data, size_t len)
{
    pthread_mutex_lock(&st->mu);
    bool ok = !st->closed && !atomic_load(&st->gone);
    if (ok && st->buf.len - st->off + len > st->max) {
        st->closed = true; /* the client does not read: it is dropped */
        ok = false;
    }
    if (ok) {
        cr_buf_append(&st->buf, data, len);
    }
    if (!atomic_load(&st->gone)) {
        stream_wake(st);
    }
    pthread_mutex_unlock(&st->mu);
    return ok;
}

void cr_http_stream_close(cr_http_stream *st)
{
    pthread_mutex_lock(&st->mu);
    st->closed = true;
    if (!atomic_load(&st->gone)) {
        stream_wake(st);
    }
    pthread_mutex_unlock(&st->mu);
}

void cr_http_stream_release(cr_http_stream *st)
{
    if (st) {
        stream_unref(st);
    }
}

void cr_http_respond(cr_http_req *r, unsigned status, const char *content_type, char *body,
                     size_t len)
{
    pthread_mutex_lock(&r->mu);
    if (r->state == REQ_ANSWERED) {
        pthread_mutex_unlock(&r->mu);
        free(body);
        return;
    }
    set_answer(r, status, content_type, body, len);
    enum req_state was = r->state;
    r->state = REQ_ANSWERED;
    if (was == REQ_DEFERRED || was == REQ_SUSPENDED) {
        def_unlink(r->srv, r);
    }
    if (was == REQ_SUSPENDED) {
        r->was_suspended = true;
        atomic_fetch_add(&r->srv->resumed, 1);
        MHD_resume_connection(r->conn);
    }
    pthread_mutex_unlock(&r->mu);
}
