/*
 * gw_proxy.c - the event loop and the proxy path.
 *
 * One thread, epoll in edge-triggered mode: every socket is registered once
 * for reading and writing, and the io header keeps the readiness until a
 * call answers EAGAIN, so the loop never re-arms interest (no epoll_ctl on
 * the hot path). A client connection reads a request head, routes it, and
 * is paired with one backend connection (from the replica's keep-alive pool
 * or a new one) until the response ends; then it goes back to reading, and
 * the backend goes back to the pool.
 *
 * Bytes are never buffered beyond one GW_BUF_SIZE buffer per direction: the
 * request body streams from the client's buffer to the backend, the
 * response streams from the backend's buffer to the client, and a buffer is
 * refilled only when it has been written out, so a slow reader slows its
 * writer (back-pressure) and server-sent events go out chunk by chunk as
 * they arrive. Heads are rewritten (hop-by-hop headers dropped), bodies are
 * forwarded as they are, chunked or not; the chunked scanner only finds
 * where a body ends so connections can be reused.
 */
#include "gw_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/uio.h>
#include <unistd.h>

static const char *reason_phrase(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 408:
        return "Request Timeout";
    case 413:
        return "Content Too Large";
    case 431:
        return "Request Header Fields Too Large";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return "Error";
    }
}

static void io_add(gw *g, gw_io *io)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.ptr = io;
    if (epoll_ctl(g->ep, EPOLL_CTL_ADD, io->fd, &ev) != 0) {
        cr_error("gateway: epoll_ctl add fd=%d: %s", io->fd, strerror(errno));
    }
}

static void set_nodelay(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* ---- backends ---------------------------------------------------------- */

static gw_backend *backend_connect(gw *g, gw_replica *r)
{
    int fd = socket(r->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int e = errno;
        if (e == EMFILE || e == ENFILE) {
            cr_debug("gateway: socket: %s", strerror(e)); /* answered 503, counted */
        } else {
            cr_warn("gateway: socket: %s", strerror(e));
        }
        errno = e;
        return NULL;
    }
    set_nodelay(fd);
    int state = B_ACTIVE;
    if (connect(fd, (struct sockaddr *)&r->addr, r->addr_len) != 0) {
        if (errno != EINPROGRESS) {
            cr_debug("gateway: connect %s: %s", r->key, strerror(errno));
            close(fd);
            return NULL;
        }
        state = B_CONNECTING;
    }
    gw_backend *b = cr_calloc(1, sizeof *b);
    b->io.kind = GW_IO_BACKEND;
    b->io.fd = fd;
    b->rep = r;
    b->state = state;
    b->in = cr_malloc(GW_BUF_SIZE);
    r->conns++;
    io_add(g, &b->io);
    return b;
}

void gw_backend_close(gw *g, gw_backend *b)
{
    if (b->io.fd >= 0) {
        close(b->io.fd);
        b->io.fd = -1;
    }
    b->io.kind = GW_IO_DEAD;
    gw_replica *r = b->rep;
    b->rep = NULL;
    b->gnext = g->grave_backends;
    g->grave_backends = b;
    if (r) {
        r->conns--; /* the caller calls gw_replica_release once done with r */
    }
}

static gw_backend *pool_pop(gw_replica *r)
{
    gw_backend *b = r->idle;
    if (b) {
        r->idle = b->pool_next;
        r->idle_count--;
        b->pool_next = NULL;
    }
    return b;
}

/* Remove one idle backend from its replica's pool (it closed on us). */
static void pool_remove(gw_replica *r, gw_backend *b)
{
    for (gw_backend **p = &r->idle; *p; p = &(*p)->pool_next) {
        if (*p == b) {
            *p = b->pool_next;
            r->idle_count--;
            b->pool_next = NULL;
            return;
        }
    }
}

/* An idle pooled connection became readable: EOF, error or stray bytes all
 * mean it cannot be reused. */
void gw_idle_event(gw *g, gw_backend *b)
{
    char tmp[64];
    ssize_t n = read(b->io.fd, tmp, sizeof tmp);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        b->io.can_read = false;
        return;
    }
    gw_replica *r = b->rep;
    if (r) {
        pool_remove(r, b);
    }
    gw_backend_close(g, b);
    if (r) {
        gw_replica_release(g, r);
    }
}

/* ---- clients ----------------------------------------------------------- */

gw_client *gw_client_new(gw *g, int fd, const struct sockaddr_storage *sa)
{
    set_nodelay(fd);
    gw_client *c = cr_calloc(1, sizeof *c);
    c->io.kind = GW_IO_CLIENT;
    c->io.fd = fd;
    c->g = g;
    c->in = cr_malloc(GW_BUF_SIZE);
    c->in_cap = GW_BUF_SIZE;
    cr_buf_init(&c->fwd);
    cr_buf_init(&c->out);
    if (sa->ss_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, c->peer_ip,
                  sizeof c->peer_ip);
    } else if (sa->ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, c->peer_ip,
                  sizeof c->peer_ip);
    }
    c->deadline_ns = g->now_ns + g->conf->client_idle_ns;
    c->adapter = -1;
    c->next = g->clients;
    if (g->clients) {
        g->clients->prev = c;
    }
    g->clients = c;
    g->client_count++;
    io_add(g, &c->io);
    if (gw_tls_accept(c) != 0) {
        cr_warn("gateway: client %s: no TLS session (out of memory): closed", c->peer_ip);
        gw_client_close(c);
        return NULL;
    }
    return c;
}

void gw_held_remove(gw_service *s, gw_client *c)
{
    gw_client *prev = NULL;
    for (gw_client *p = s->held_head; p; prev = p, p = p->held_next) {
        if (p == c) {
            if (prev) {
                prev->held_next = p->held_next;
            } else {
                s->held_head = p->held_next;
            }
            if (s->held_tail == c) {
                s->held_tail = prev;
            }
            s->held--;
            c->held_next = NULL;
            return;
        }
    }
}

/* Detach the backend from the client; the caller closes or pools it. */
gw_backend *gw_detach(gw_client *c)
{
    gw_backend *b = c->b;
    if (!b) {
        return NULL;
    }
    c->b = NULL;
    b->c = NULL;
    if (b->rep) {
        b->rep->outstanding--;
    }
    return b;
}

/* End the service's accounting of the current request. */
static void end_request(gw_client *c, int status)
{
    gw_service *s = c->svc;
    if (!s) {
        return;
    }
    c->svc = NULL;
    gw_inflight_add(s, c->g->now_ns, -1);
    gw_record(s, status, c->g->now_ns - c->start_ns);
}

void gw_client_close(gw_client *c)
{
    gw *g = c->g;
    if (c->io.kind == GW_IO_DEAD) {
        return;
    }
    gw_backend *b = gw_detach(c);
    if (b) {
        gw_replica *r = b->rep;
        gw_backend_close(g, b);
        if (r) {
            gw_replica_release(g, r);
        }
    }
    if (c->state == C_HELD && c->svc) {
        gw_held_remove(c->svc, c);
    }
    gw_key_release(c);
    if (c->svc) {
        /* The client went away mid-request: 499 in the nginx manner. */
        end_request(c, 499);
    }
    gw_tls_close(c);
    close(c->io.fd);
    c->io.fd = -1;
    c->io.kind = GW_IO_DEAD;
    if (c->prev) {
        c->prev->next = c->next;
    } else {
        g->clients = c->next;
    }
    if (c->next) {
        c->next->prev = c->prev;
    }
    g->client_count--;
    c->held_next = g->grave_clients;
    g->grave_clients = c;
}

void gw_client_free(gw_client *c)
{
    free(c->in);
    free(c->win);
    cr_buf_fini(&c->fwd);
    cr_buf_fini(&c->out);
    free(c);
}

void gw_client_local(gw_client *c, int status, const char *extra_headers, const char *body)
{
    cr_buf_reset(&c->out);
    c->out_off = 0;
    if (!c->body_done) {
        c->close_after = true; /* the rest of the body cannot be told from the next request */
    }
    size_t blen = strlen(body);
    cr_buf_printf(&c->out,
                  "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n%s%s"
                  "\r\n",
                  status, reason_phrase(status), blen, extra_headers ? extra_headers : "",
                  (c->close_after || !c->keep_alive) ? "Connection: close\r\n" : "");
    if (!c->is_head) {
        cr_buf_append(&c->out, body, blen);
    }
    c->status = status;
    c->state = C_LOCAL;
    c->deadline_ns = c->g->now_ns + c->g->conf->client_idle_ns;
    end_request(c, status);
}

void gw_local_error(gw_client *c, int status, int err, const char *code, const char *msg)
{
    gw *g = c->g;
    if (c->openai) {
        gw_openai_error(c, status, err, NULL, code, msg);
        return;
    }
    if (c->svc && err >= 0) {
        c->svc->errors[err]++;
    }
    char extra[64] = "";
    if (status == 503) {
        snprintf(extra, sizeof extra, "Retry-After: %d\r\n", (int)g->conf->retry_after_s);
    }
    char body[512];
    snprintf(body, sizeof body, "{\"error\":\"%s\",\"message\":\"%s\"}\n", code, msg);
    gw_client_local(c, status, extra, body);
}

/* Frame the request body bytes that arrived in [body_end, in_len). */
static int frame_request(gw_client *c)
{
    if (c->body_done) {
        return 0;
    }
    size_t avail = c->in_len - c->body_end;
    if (c->body_mode == BODY_LENGTH) {
        size_t take = avail;
        if ((int64_t)take > c->body_left) {
            take = (size_t)c->body_left;
        }
        c->body_end += take;
        c->body_left -= (int64_t)take;
        if (c->body_left == 0) {
            c->body_done = true;
        }
        return 0;
    }
    if (c->body_mode == BODY_CHUNKED) {
        size_t used = 0;
        int rc = cr_http_chunked_scan(&c->chunk, c->in + c->body_end, avail, &used);
        if (rc < 0) {
            return rc;
        }
        c->body_end += used;
        if (rc == 1) {
            c->body_done = true;
        }
        return 0;
    }
    c->body_done = true;
    return 0;
}

/* Drop the finished request's bytes and wait for the next one. */
static void client_next_request(gw_client *c)
{
    size_t used = c->body_end;
    if (used > c->in_len) {
        used = c->in_len;
    }
    memmove(c->in, c->in + used, c->in_len - used);
    c->in_len -= used;
    if (c->in_cap > GW_BUF_SIZE && c->in_len <= GW_BUF_SIZE) {
        /* back to the usual buffer after a body read whole */
        c->in = cr_realloc(c->in, GW_BUF_SIZE);
        c->in_cap = GW_BUF_SIZE;
    }
    gw_key_release(c);
    c->openai = false;
    c->api = API_NONE;
    c->prefix = 0;
    c->slo = false;
    c->head_len = c->send_pos = c->body_end = 0;
    c->body_mode = BODY_NONE;
    c->body_left = 0;
    memset(&c->chunk, 0, sizeof c->chunk);
    c->body_done = false;
    c->retriable = false;
    c->svc = NULL;
    c->attempts = 0;
    c->resp_started = false;
    c->status = 0;
    c->is_head = false;
    cr_buf_reset(&c->out);
    c->out_off = 0;
    cr_buf_reset(&c->fwd);
    c->state = C_READ_HEAD;
    c->deadline_ns =
        c->g->now_ns + (c->in_len > 0 ? c->g->conf->header_timeout_ns : c->g->conf->client_idle_ns);
}

static bool hop_by_hop(const cr_http_header *h)
{
    return cr_http_token_eq(h->name, h->name_len, "connection") ||
           cr_http_token_eq(h->name, h->name_len, "keep-alive") ||
           cr_http_token_eq(h->name, h->name_len, "proxy-connection") ||
           cr_http_token_eq(h->name, h->name_len, "te") ||
           cr_http_token_eq(h->name, h->name_len, "upgrade");
}

static void build_forward_head(gw_client *c, const cr_http_msg *m, const char *path,
                               size_t path_len, const char *prefix, size_t prefix_len)
{
    cr_buf *f = &c->fwd;
    cr_buf_reset(f);
    cr_buf_append(f, m->method, m->method_len);
    cr_buf_putc(f, ' ');
    cr_buf_append(f, path, path_len);
    /* An HTTP/1.0 client cannot read a chunked answer: ask the replica in
     * HTTP/1.0 too, so it frames the body by length or by closing. */
    cr_buf_puts(f, m->minor == 0 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n");
    bool xff = false;
    for (size_t i = 0; i < m->header_count; i++) {
        const cr_http_header *h = &m->headers[i];
        if (hop_by_hop(h)) {
            continue;
        }
        if (c->key && cr_http_token_eq(h->name, h->name_len, "authorization")) {
            continue; /* the client's API key stays here */
        }
        if (cr_http_token_eq(h->name, h->name_len, "x-forwarded-for")) {
            xff = true; /* merged into ours below */
            continue;
        }
        if (prefix_len && cr_http_token_eq(h->name, h->name_len, "x-forwarded-prefix")) {
            continue; /* ours replaces it */
        }
        if (cr_http_token_eq(h->name, h->name_len, "x-forwarded-proto")) {
            continue; /* ours replaces it: a client cannot claim https */
        }
        cr_buf_append(f, h->name, h->name_len);
        cr_buf_append(f, ": ", 2);
        cr_buf_append(f, h->value, h->value_len);
        cr_buf_append(f, "\r\n", 2);
    }
    if (!m->host) {
        cr_buf_puts(f, "Host: corral-gateway\r\n");
    }
    if (prefix_len) {
        cr_buf_puts(f, "X-Forwarded-Prefix: /");
        cr_buf_append(f, prefix, prefix_len);
        cr_buf_append(f, "\r\n", 2);
    }
    cr_buf_puts(f, c->tls ? "X-Forwarded-Proto: https\r\n" : "X-Forwarded-Proto: http\r\n");
    if (c->peer_ip[0] || xff) {
        /* One X-Forwarded-For: the client's list, then the client itself. */
        cr_buf_puts(f, "X-Forwarded-For: ");
        const char *sep = "";
        for (size_t i = 0; xff && i < m->header_count; i++) {
            const cr_http_header *h = &m->headers[i];
            if (cr_http_token_eq(h->name, h->name_len, "x-forwarded-for") && h->value_len) {
                cr_buf_puts(f, sep);
                cr_buf_append(f, h->value, h->value_len);
                sep = ", ";
            }
        }
        if (c->peer_ip[0]) {
            cr_buf_puts(f, sep);
            cr_buf_puts(f, c->peer_ip);
        }
        cr_buf_append(f, "\r\n", 2);
    }
    cr_buf_append(f, "\r\n", 2);
}

static bool method_is(const cr_http_msg *m, const char *lit)
{
    size_t n = strlen(lit);
    return m->method_len == n && memcmp(m->method, lit, n) == 0;
}

static void local_metrics(gw_client *c)
{
    gw *g = c->g;
    cr_buf body;
    cr_buf_init(&body);
    gw_metrics_render(g, &body);
    cr_buf_reset(&c->out);
    c->out_off = 0;
    cr_buf_printf(&c->out,
                  "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                  "Content-Length: %zu\r\n%s\r\n",
                  body.len, c->keep_alive ? "" : "Connection: close\r\n");
    if (!c->is_head) {
        cr_buf_append(&c->out, body.data ? body.data : "", body.len);
    }
    cr_buf_fini(&body);
    c->status = 200;
    c->state = C_LOCAL;
    if (!c->body_done) {
        c->close_after = true;
    }
}

/* The OpenAI route of a path (q: its length without the query). */
static int api_of(const char *t, size_t q)
{
    static const struct {
        const char *path;
        int api;
    } routes[] = {{"/v1/chat/completions", API_CHAT},
                  {"/v1/completions", API_COMPLETIONS},
                  {"/v1/embeddings", API_EMBEDDINGS},
                  {"/v1/models", API_MODELS}};
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        size_t n = strlen(routes[i].path);
        if (q == n && memcmp(t, routes[i].path, n) == 0) {
            return routes[i].api;
        }
    }
    return API_NONE;
}

/*
 * OpenAI routes. /v1/models is answered here; the others are POSTs whose
 * JSON body names the model: the body is read whole (Content-Length, at
 * most max_body_bytes) before any replica is chosen, so a request with no
 * or an unknown model, or one the key may not use, never reaches one.
 */
static void model_route(gw_client *c, const cr_http_msg *m, int api)
{
    gw *g = c->g;
    c->openai = true;
    c->api = api;
    if (api == API_MODELS) {
        if (!method_is(m, "GET") && !c->is_head) {
            gw_openai_error(c, 405, -1, NULL, "method_not_allowed", "use GET /v1/models");
            return;
        }
        gw_models_answer(c);
        return;
    }
    if (!method_is(m, "POST")) {
        gw_openai_error(c, 405, -1, NULL, "method_not_allowed", "use POST with a JSON body");
        return;
    }
    if (m->chunked) {
        gw_openai_error(c, 411, -1, NULL, "length_required",
                        "a Content-Length is required (chunked bodies are not read here)");
        return;
    }
    if (m->content_length > g->conf->max_body_bytes) {
        char msg[160];
        snprintf(msg, sizeof msg, "the request body is %lld bytes, over the limit of %lld",
                 (long long)m->content_length, (long long)g->conf->max_body_bytes);
        gw_openai_error(c, 413, -1, NULL, "request_too_large", msg);
        return;
    }
    if (m->content_length <= 0) {
        gw_openai_error(c, 400, -1, NULL, "model_required",
                        "a JSON body naming the \"model\" is required");
        return;
    }
    build_forward_head(c, m, m->target, m->target_len, NULL, 0);
    /* m points into c->in: not used after it may move */
    size_t need = c->head_len + (size_t)m->content_length;
    if (need > c->in_cap) {
        c->in = cr_realloc(c->in, need);
        c->in_cap = need;
    }
    c->state = C_BODY;
    c->body_deadline_ns = g->now_ns + g->conf->body_timeout_ns;
}

/* The whole body is here: route it by its model. */
static void model_dispatch(gw_client *c)
{
    gw *g = c->g;
    char model[GW_MODEL_MAX];
    bool stream = false;
    int rc = gw_body_model_stream(c->in + c->head_len, c->body_end - c->head_len, model,
                                  sizeof model, &c->prefix, &stream);
    if (rc < 0) {
        gw_openai_error(c, 400, -1, NULL, "invalid_json", "the request body is not a JSON object");
        return;
    }
    if (rc == 0) {
        gw_openai_error(c, 400, -1, NULL, "model_required",
                        "the request body names no \"model\" (a string)");
        return;
    }
    int adapter = -1;
    gw_service *s = gw_model_service(g, model, &adapter);
    bool other = s && c->key && s->tenant[0] && strcmp(s->tenant, c->key->tenant) != 0;
    if (!s || other) {
        json_t *q = json_string(model);
        char *qm = json_dumps(q, JSON_ENCODE_ANY);
        json_decref(q);
        char msg[GW_MODEL_MAX + 96];
        snprintf(msg, sizeof msg, "the model %s does not exist or is not served here",
                 qm ? qm : "?");
        free(qm);
        gw_openai_error(c, 404, GW_ERR_NO_SERVICE, NULL, "model_not_found", msg);
        return;
    }
    if (!gw_key_may(c, s, model)) {
        gw_openai_error(c, 403, GW_ERR_AUTH, NULL, "model_not_permitted",
                        "the API key may not use this model");
        return;
    }
    bool any_ready = false;
    if (adapter >= 0 && !gw_adapter_available(s, adapter, &any_ready) && any_ready) {
        /* Replicas are up but none holds it: no use holding the request
         * (at zero replicas it is held as any other, below). */
        char msg[GW_MODEL_MAX + 96];
        snprintf(msg, sizeof msg, "no ready replica has the adapter %s loaded", model);
        gw_openai_error(c, 503, GW_ERR_NO_REPLICA, "server_error", "adapter_not_loaded", msg);
        return;
    }
    c->adapter = adapter;
    if (adapter >= 0) {
        s->adapter_requests[adapter]++;
    }
    c->svc = s;
    c->scan = c->key != NULL;
    gw_slo_begin(c, stream);
    gw_inflight_add(s, g->now_ns, 1);
    c->attempts = 0;
    gw_client_dispatch(c, NULL);
}

/* C_BODY: read the body of a model-routed request whole. */
static bool body_step(gw_client *c)
{
    if (c->body_done) {
        model_dispatch(c);
        return true;
    }
    if (!c->io.can_read) {
        return false;
    }
    ssize_t n = gw_client_read(c, c->in + c->in_len, c->in_cap - c->in_len);
    if (n > 0) {
        c->in_len += (size_t)n;
        c->body_deadline_ns = c->g->now_ns + c->g->conf->body_timeout_ns;
        frame_request(c);
        return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        c->io.can_read = false;
        return false;
    }
    gw_client_close(c);
    return true;
}

/*
 * Routing. A request for /<service>/rest goes to <service> with the prefix
 * stripped (the backend sees /rest, and X-Forwarded-Prefix: /<service>);
 * otherwise the Host header (without port) names the service, exactly or
 * by its first DNS label, and the path goes unchanged. /metrics and
 * /healthz are the gateway's own.
 */
static void start_request(gw_client *c, const cr_http_msg *m)
{
    gw *g = c->g;
    c->head_len = m->head_len;
    c->start_ns = g->now_ns;
    c->keep_alive = m->keep_alive;
    c->close_after = false;
    c->is_head = method_is(m, "HEAD");
    c->hold_deadline_ns = 0;
    c->adapter = -1;
    c->batch = false;
    c->http10 = m->minor == 0;
    c->idempotent = c->is_head || method_is(m, "GET") || method_is(m, "PUT") ||
                    method_is(m, "DELETE") || method_is(m, "OPTIONS") || method_is(m, "TRACE");
    c->body_done = false;
    memset(&c->chunk, 0, sizeof c->chunk);
    if (m->chunked) {
        c->body_mode = BODY_CHUNKED;
    } else if (m->content_length > 0) {
        c->body_mode = BODY_LENGTH;
        c->body_left = m->content_length;
    } else {
        c->body_mode = BODY_NONE;
        c->body_done = true;
    }
    c->send_pos = c->body_end = c->head_len;
    c->body_deadline_ns = g->now_ns + g->conf->body_timeout_ns;
    c->retriable = true;
    if (frame_request(c) != 0) {
        gw_local_error(c, 400, -1, "CR_EPARSE", "malformed chunked request body");
        return;
    }
    /* Criticality (docs/gateway.md, "Priorities"): a batch request is shed
     * before an interactive one when replicas fill (--batch-share). */
    for (size_t i = 0; i < m->header_count; i++) {
        const cr_http_header *h = &m->headers[i];
        if (cr_http_token_eq(h->name, h->name_len, "x-corral-priority")) {
            if (cr_http_token_eq(h->value, h->value_len, "batch")) {
                c->batch = true;
            } else if (!cr_http_token_eq(h->value, h->value_len, "interactive")) {
                gw_local_error(c, 400, -1, "CR_EINVAL",
                               "X-Corral-Priority: interactive (the default) or batch");
                return;
            }
        }
    }

    const char *t = m->target;
    size_t tl = m->target_len;
    gw_service *s = NULL;
    const char *path = t;
    size_t path_len = tl;
    const char *prefix = NULL;
    size_t prefix_len = 0;
    if (tl > 0 && t[0] == '/') {
        size_t e = 1;
        while (e < tl && t[e] != '/' && t[e] != '?') {
            e++;
        }
        s = gw_service_find(g, t + 1, e - 1);
        if (s) {
            prefix = t + 1;
            prefix_len = e - 1;
            path = t + e;
            path_len = tl - e;
        }
    } else if (!(tl == 1 && t[0] == '*')) {
        gw_local_error(c, 400, -1, "CR_EINVAL", "only origin-form request targets are proxied");
        return;
    }
    int api = API_NONE;
    if (!s) {
        size_t q = 0;
        while (q < tl && t[q] != '?') {
            q++;
        }
        if ((q == 8 && memcmp(t, "/metrics", 8) == 0)) {
            local_metrics(c);
            return;
        }
        if (q == 8 && memcmp(t, "/healthz", 8) == 0) {
            gw_client_local(c, 200, NULL, "{\"ok\":true}\n");
            return;
        }
        api = api_of(t, q);
        if (api != API_NONE && !g->require_keys && !g->models_known) {
            api = API_NONE; /* no service declares a model: Host routing as before */
        }
    }
    if (g->require_keys && !gw_key_admit(c, m)) {
        return;
    }
    if (api != API_NONE) {
        model_route(c, m, api);
        return;
    }
    if (!s && m->host) {
        size_t hl = 0;
        while (hl < m->host_len && m->host[hl] != ':') {
            hl++;
        }
        s = gw_service_find(g, m->host, hl);
        if (!s) {
            size_t dot = 0;
            while (dot < hl && m->host[dot] != '.') {
                dot++;
            }
            if (dot < hl) {
                s = gw_service_find(g, m->host, dot);
            }
        }
    }
    if (s && c->key && !gw_key_may(c, s, NULL)) {
        if (s->tenant[0] && strcmp(s->tenant, c->key->tenant) != 0) {
            s = NULL; /* another tenant's: not told apart from none */
        } else {
            gw_openai_error(c, 403, GW_ERR_AUTH, NULL, "service_not_permitted",
                            "the API key may not use this service");
            return;
        }
    }
    if (!s) {
        gw_local_error(c, 404, -1, "CR_ENOENT", "no service matches the path or the Host header");
        return;
    }
    c->scan = c->key != NULL;
    char fixed[2] = "/";
    if (path_len == 0 || path[0] == '?') {
        /* "/chat" or "/chat?x" becomes "/" or "/?x" */
        cr_buf tmp;
        cr_buf_init(&tmp);
        cr_buf_append(&tmp, fixed, 1);
        cr_buf_append(&tmp, path, path_len);
        build_forward_head(c, m, tmp.data, tmp.len, prefix, prefix_len);
        cr_buf_fini(&tmp);
    } else {
        build_forward_head(c, m, path, path_len, prefix, prefix_len);
    }
    c->svc = s;
    gw_inflight_add(s, g->now_ns, 1);
    c->attempts = 0;
    gw_client_dispatch(c, NULL);
}

void gw_client_dispatch(gw_client *c, const gw_replica *exclude)
{
    gw *g = c->g;
    gw_service *s = c->svc;
    for (;;) {
        int why = GW_ERR_NO_REPLICA;
        s->want_adapter = c->adapter;
        s->want_batch = c->batch;
        gw_replica *r = NULL;
        /* An adapter: first where it is active already (scraped), so it
         * is not loaded (and another evicted) on one more replica; then
         * on any replica that holds it. */
        for (int pass = c->adapter >= 0 && s->scrape ? 0 : 1; pass < 2 && !r; pass++) {
            s->want_active = pass == 0;
            r = c->prefix && g->conf->prefix_affinity
                    ? gw_peer_prefix(g, s, exclude, c->prefix, &why)
                    : s->peer_get(g, s, exclude, &why);
        }
        s->want_active = false;
        s->want_adapter = -1;
        s->want_batch = false;
        if (!r) {
            /* Nothing ready: hold the request until a replica is, also after
             * a connection failure left none (a replica announced before it
             * listens); the hold deadline counts from the first hold. */
            if (why == GW_ERR_NO_REPLICA && g->conf->hold_max > 0 && s->held < g->conf->hold_max &&
                c->retriable && !c->resp_started) {
                if (c->hold_deadline_ns == 0) {
                    c->hold_deadline_ns = g->now_ns + g->conf->hold_timeout_ns;
                }
                c->state = C_HELD;
                c->deadline_ns = c->hold_deadline_ns;
                c->held_next = NULL;
                if (s->held_tail) {
                    s->held_tail->held_next = c;
                } else {
                    s->held_head = c;
                }
                s->held_tail = c;
                s->held++;
                if (c->io.rdhup) {
                    gw_client_close(c); /* gone before it was held */
                    return;
                }
                s->activation = true;
                gw_note_activation(g, s);
                return;
            }
            gw_local_error(c, 503, why, "CR_EUNAVAIL",
                           why == GW_ERR_SATURATED ? "every replica is at its in-flight limit"
                                                   : "no replica is ready");
            return;
        }
        if (c->attempts > g->conf->retries) {
            gw_local_error(c, 502, GW_ERR_CONNECT, "CR_EUNAVAIL", "could not connect to a replica");
            return;
        }
        gw_backend *b = NULL;
        bool reused = false;
        while ((b = pool_pop(r)) != NULL) {
            if (b->io.fd >= 0) {
                reused = true;
                break;
            }
        }
        int conn_errno = 0;
        if (!b) {
            errno = 0;
            b = backend_connect(g, r);
            conn_errno = errno;
        }
        c->attempts++;
        if (!b && (conn_errno == EMFILE || conn_errno == ENFILE)) {
            /* Our limit, not the replica's fault: do not mark it down. */
            gw_local_error(c, 503, GW_ERR_SATURATED, "CR_EUNAVAIL",
                           "the gateway is out of file descriptors");
            return;
        }
        if (!b) {
            r->failures++;
            gw_replica_mark_down(g, r, "connect failed");
            s->retries++;
            exclude = r;
            continue;
        }
        b->c = c;
        b->reused = reused;
        b->got_bytes = b->head_done = b->resp_done = false;
        b->reusable = false;
        b->fwd_off = 0;
        b->in_len = b->in_off = b->fwd_end = 0;
        b->body_mode = BODY_NONE;
        b->body_left = 0;
        memset(&b->chunk, 0, sizeof b->chunk);
        if (b->state == B_IDLE) {
            b->state = B_ACTIVE;
        }
        b->deadline_ns = g->now_ns + (b->state == B_CONNECTING ? g->conf->connect_timeout_ns
                                                               : g->conf->upstream_timeout_ns);
        c->b = b;
        c->send_pos = c->head_len;
        c->body_deadline_ns = g->now_ns + g->conf->body_timeout_ns;
        c->state = C_PROXY;
        c->resp_started = false;
        r->outstanding++;
        r->requests++;
        return;
    }
}

/* The backend failed before any response byte: retry or answer 502. */
void gw_backend_failed(gw_client *c, bool connect_failure, const char *why)
{
    gw *g = c->g;
    gw_backend *b = gw_detach(c);
    gw_replica *r = b->rep;
    bool reused = b->reused;
    gw_backend_close(g, b);
    if (!reused && r) {
        r->failures++;
        gw_replica_mark_down(g, r, why);
    }
    /* A connect failure sent nothing, so any request may go elsewhere; once
     * sent, only idempotent ones may be repeated. */
    bool may = c->retriable && !c->resp_started && (connect_failure || c->idempotent);
    if (may && c->svc) {
        c->svc->retries++;
        cr_buf_reset(&c->out);
        c->out_off = 0;
        gw_client_dispatch(c, reused ? NULL : r);
    } else if (!c->resp_started) {
        gw_local_error(c, 502, GW_ERR_CONNECT, "CR_EUNAVAIL", why);
    } else {
        if (c->svc) {
            c->svc->errors[GW_ERR_UPSTREAM]++;
        }
        gw_client_close(c);
    }
    if (r) {
        gw_replica_release(g, r);
    }
}

/* The backend broke a response already under way. */
static void backend_broke(gw_client *c, const char *why)
{
    gw *g = c->g;
    gw_backend *b = c->b;
    gw_replica *r = b->rep;
    if (!b->got_bytes) {
        gw_backend_failed(c, false, why);
        return;
    }
    gw_detach(c);
    gw_backend_close(g, b);
    if (r) {
        r->failures++;
        gw_replica_mark_down(g, r, why);
    }
    if (c->svc) {
        c->svc->errors[GW_ERR_UPSTREAM]++;
    }
    if (!c->resp_started) {
        c->close_after = true;
        gw_local_error(c, 502, -1, "CR_EUNAVAIL", why);
    } else {
        gw_client_close(c);
    }
    if (r) {
        gw_replica_release(g, r);
    }
}

static void build_client_head(gw_client *c, const cr_http_msg *m, bool will_close)
{
    cr_buf *o = &c->out;
    char line[32];
    int n = snprintf(line, sizeof line, "HTTP/1.1 %d ", m->status);
    cr_buf_append(o, line, (size_t)n);
    cr_buf_append(o, m->target, m->target_len);
    cr_buf_append(o, "\r\n", 2);
    for (size_t i = 0; i < m->header_count; i++) {
        const cr_http_header *h = &m->headers[i];
        if (hop_by_hop(h)) {
            continue;
        }
        cr_buf_append(o, h->name, h->name_len);
        cr_buf_append(o, ": ", 2);
        cr_buf_append(o, h->value, h->value_len);
        cr_buf_append(o, "\r\n", 2);
    }
    if (will_close) {
        cr_buf_puts(o, "Connection: close\r\n");
    }
    cr_buf_append(o, "\r\n", 2);
}

/* Frame response body bytes in [fwd_end, in_len). Returns 0 or CR_EPARSE. */
static int frame_response(gw_backend *b)
{
    size_t avail = b->in_len - b->fwd_end;
    if (b->resp_done) {
        if (avail) {
            b->reusable = false; /* bytes after the response: not a clean connection */
            b->in_len = b->fwd_end;
        }
        return 0;
    }
    switch (b->body_mode) {
    case BODY_LENGTH: {
        size_t take = avail;
        if ((int64_t)take > b->body_left) {
            take = (size_t)b->body_left;
        }
        b->fwd_end += take;
        b->body_left -= (int64_t)take;
        if (b->body_left == 0) {
            b->resp_done = true;
        }
        break;
    }
    case BODY_CHUNKED: {
        size_t used = 0;
        int rc = cr_http_chunked_scan(&b->chunk, b->in + b->fwd_end, avail, &used);
        if (rc < 0) {
            return rc;
        }
        b->fwd_end += used;
        if (rc == 1) {
            b->resp_done = true;
        }
        break;
    }
    case BODY_EOF:
        b->fwd_end = b->in_len;
        break;
    default:
        b->resp_done = true;
        break;
    }
    if (b->resp_done && b->in_len > b->fwd_end) {
        b->reusable = false;
        b->in_len = b->fwd_end;
    }
    return 0;
}

/* New response bytes: parse heads until the final one, then frame. */
static int on_response_bytes(gw_client *c, gw_backend *b)
{
    while (!b->head_done) {
        cr_http_msg m;
        int rc = cr_http_parse_response(b->in + b->in_off, b->in_len - b->in_off, &m);
        if (rc == 0) {
            if (b->in_len == GW_BUF_SIZE) {
                return CR_ETOOBIG;
            }
            return 0;
        }
        if (rc < 0) {
            return rc;
        }
        if (m.status < 200 && m.status != 101) {
            /* Interim answers (100 Continue) pass through as they are. */
            cr_buf_append(&c->out, b->in + b->in_off, (size_t)rc);
            b->in_off += (size_t)rc;
            b->fwd_end = b->in_off;
            continue;
        }
        if (m.status == 101) {
            return CR_ENOTSUP;
        }
        c->status = m.status;
        if (c->is_head || m.status == 204 || m.status == 304) {
            b->body_mode = BODY_NONE;
        } else if (m.chunked) {
            b->body_mode = BODY_CHUNKED;
        } else if (m.content_length >= 0) {
            b->body_mode = BODY_LENGTH;
            b->body_left = m.content_length;
        } else {
            b->body_mode = BODY_EOF;
        }
        b->reusable = m.keep_alive && b->body_mode != BODY_EOF && !c->http10;
        bool will_close =
            !c->keep_alive || b->body_mode == BODY_EOF || !c->body_done || c->g->draining;
        if (will_close) {
            c->close_after = true;
        }
        build_client_head(c, &m, will_close);
        b->in_off += (size_t)rc;
        b->fwd_end = b->in_off;
        b->head_done = true;
        if (b->body_mode == BODY_NONE || (b->body_mode == BODY_LENGTH && b->body_left == 0)) {
            b->resp_done = true;
        }
    }
    return frame_response(b);
}

static void finish_exchange(gw_client *c)
{
    gw *g = c->g;
    gw_backend *b = gw_detach(c);
    gw_replica *r = b->rep;
    if (c->status == 200) {
        gw_slo_end(c); /* before the usage window is spent */
        gw_usage_end(c);
    }
    c->slo = false;
    end_request(c, c->status);
    if (b->io.rdhup) {
        /* The edge that brought the response also said the replica closed
         * its side: no new edge will come, so this connection is done. */
        b->reusable = false;
    }
    if (b->reusable && b->resp_done && c->body_done && r && !r->removed && !r->down &&
        b->in_len == b->fwd_end) {
        b->state = B_IDLE;
        b->deadline_ns = g->now_ns + g->conf->client_idle_ns;
        b->pool_next = r->idle;
        r->idle = b;
        r->idle_count++;
    } else {
        gw_backend_close(g, b);
    }
    if (r) {
        gw_replica_release(g, r);
    }
    if (c->close_after || !c->keep_alive || g->draining) {
        gw_client_close(c);
    } else {
        client_next_request(c);
    }
}

/* One pass over a proxied exchange; returns true when something moved. */
static bool proxy_step(gw_client *c)
{
    gw *g = c->g;
    gw_backend *b = c->b;
    bool progress = false;
    if (b->state == B_CONNECTING) {
        if (!b->io.can_write) {
            return false;
        }
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(b->io.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
            err = errno;
        }
        if (err != 0) {
            gw_backend_failed(c, true, "connect failed");
            return true;
        }
        b->state = B_ACTIVE;
        b->deadline_ns = g->now_ns + g->conf->upstream_timeout_ns;
        progress = true;
    }

    /* Request body still arriving from the client. */
    if (!c->body_done && c->io.can_read) {
        if (c->in_len == c->in_cap && c->send_pos == c->body_end && c->send_pos > 0 &&
            b->fwd_off == c->fwd.len) {
            /* All sent: make room; the request can no longer be retried. */
            memmove(c->in, c->in + c->send_pos, c->in_len - c->send_pos);
            c->in_len -= c->send_pos;
            c->body_end -= c->send_pos;
            c->head_len = 0;
            c->send_pos = 0;
            c->retriable = false;
        }
        if (c->in_len < c->in_cap) {
            ssize_t n = gw_client_read(c, c->in + c->in_len, c->in_cap - c->in_len);
            if (n > 0) {
                c->in_len += (size_t)n;
                c->body_deadline_ns = g->now_ns + g->conf->body_timeout_ns;
                if (frame_request(c) != 0) {
                    gw_client_close(c);
                    return true;
                }
                progress = true;
            } else if (n == 0) {
                gw_client_close(c);
                return true;
            } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
                c->io.can_read = false;
            } else {
                gw_client_close(c);
                return true;
            }
        }
    }

    /* Request to the backend: the rewritten head, then body bytes. */
    size_t head_left = c->fwd.len - b->fwd_off;
    size_t body_avail = c->body_end - c->send_pos;
    if ((head_left || body_avail) && b->io.can_write && b->state == B_ACTIVE) {
        struct iovec iov[2];
        int cnt = 0;
        if (head_left) {
            iov[cnt].iov_base = c->fwd.data + b->fwd_off;
            iov[cnt].iov_len = head_left;
            cnt++;
        }
        if (body_avail) {
            iov[cnt].iov_base = c->in + c->send_pos;
            iov[cnt].iov_len = body_avail;
            cnt++;
        }
        ssize_t n = writev(b->io.fd, iov, cnt);
        if (n > 0) {
            size_t w = (size_t)n;
            size_t h = w < head_left ? w : head_left;
            b->fwd_off += h;
            c->send_pos += w - h;
            if (w > h) {
                c->body_deadline_ns = g->now_ns + g->conf->body_timeout_ns;
            }
            progress = true;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            b->io.can_write = false;
        } else {
            backend_broke(c, "connection lost while sending");
            return true;
        }
    }

    /* Response bytes from the backend, once the last ones are written out. */
    if (b->io.can_read && b->in_off == b->fwd_end && c->out_off == c->out.len && !b->resp_done) {
        if (b->in_off == b->in_len) {
            b->in_len = b->in_off = b->fwd_end = 0;
        } else if (b->in_off > 0) {
            memmove(b->in, b->in + b->in_off, b->in_len - b->in_off);
            b->in_len -= b->in_off;
            b->in_off = b->fwd_end = 0;
        }
        if (c->out_off == c->out.len) {
            cr_buf_reset(&c->out);
            c->out_off = 0;
        }
        bool had_head = b->head_done;
        size_t from = b->fwd_end;
        ssize_t n = read(b->io.fd, b->in + b->in_len, GW_BUF_SIZE - b->in_len);
        if (n > 0) {
            b->in_len += (size_t)n;
            b->got_bytes = true;
            b->deadline_ns = g->now_ns + g->conf->upstream_timeout_ns;
            int rc = on_response_bytes(c, b);
            if (rc != 0) {
                backend_broke(c, "malformed response");
                return true;
            }
            if (c->scan && b->head_done) {
                /* after a head parsed now, nothing is written yet: in_off
                 * is where its body starts */
                size_t start = had_head ? from : b->in_off;
                if (c->status == 200 && b->fwd_end > start) {
                    gw_usage_feed(c, b->in + start, b->fwd_end - start);
                    if (c->slo) {
                        gw_slo_feed(c, b->in + start, b->fwd_end - start);
                    }
                }
            }
            progress = true;
        } else if (n == 0) {
            if (!b->got_bytes) {
                gw_backend_failed(c, false, "connection closed before the response");
                return true;
            }
            if (b->head_done && b->body_mode == BODY_EOF) {
                b->resp_done = true;
                b->reusable = false;
                progress = true;
            } else {
                backend_broke(c, "response cut short");
                return true;
            }
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            b->io.can_read = false;
        } else {
            if (!b->got_bytes) {
                gw_backend_failed(c, false, "connection reset");
            } else {
                backend_broke(c, "connection reset");
            }
            return true;
        }
    }

    /* Response to the client. */
    size_t out_left = c->out.len - c->out_off;
    size_t body_left = b->fwd_end - b->in_off;
    if ((out_left || body_left) && c->io.can_write) {
        struct iovec iov[2];
        int cnt = 0;
        if (out_left) {
            iov[cnt].iov_base = c->out.data + c->out_off;
            iov[cnt].iov_len = out_left;
            cnt++;
        }
        if (body_left) {
            iov[cnt].iov_base = b->in + b->in_off;
            iov[cnt].iov_len = body_left;
            cnt++;
        }
        ssize_t n = gw_client_writev(c, iov, cnt);
        if (n > 0) {
            size_t w = (size_t)n;
            size_t h = w < out_left ? w : out_left;
            c->out_off += h;
            b->in_off += w - h;
            c->resp_started = true;
            progress = true;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->io.can_write = false;
        } else {
            gw_client_close(c);
            return true;
        }
    }

    if (b->resp_done && b->in_off == b->fwd_end && c->out_off == c->out.len) {
        finish_exchange(c);
        return true;
    }
    return progress;
}

static bool local_step(gw_client *c)
{
    if (c->out_off < c->out.len) {
        if (!c->io.can_write) {
            return false;
        }
        struct iovec iov = {c->out.data + c->out_off, c->out.len - c->out_off};
        ssize_t n = gw_client_writev(c, &iov, 1);
        if (n > 0) {
            c->out_off += (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->io.can_write = false;
            return false;
        } else {
            gw_client_close(c);
            return true;
        }
        if (c->out_off < c->out.len) {
            return true;
        }
    }
    if (c->close_after || !c->keep_alive || c->g->draining) {
        gw_client_close(c);
    } else {
        client_next_request(c);
    }
    return true;
}

static bool read_head_step(gw_client *c)
{
    if (c->in_len > 0) {
        cr_http_msg m;
        int rc = cr_http_parse_request(c->in, c->in_len, &m);
        if (rc > 0) {
            start_request(c, &m);
            return true;
        }
        if (rc < 0) {
            c->keep_alive = false;
            c->body_done = true;
            gw_local_error(c, rc == CR_ETOOBIG ? 431 : 400, -1, "CR_EPARSE",
                           rc == CR_ETOOBIG ? "too many header fields" : "malformed request");
            return true;
        }
        if (c->in_len == c->in_cap) {
            c->keep_alive = false;
            c->body_done = true;
            gw_local_error(c, 431, -1, "CR_ETOOBIG", "request head too large");
            return true;
        }
    }
    if (!c->io.can_read) {
        return false;
    }
    ssize_t n = gw_client_read(c, c->in + c->in_len, c->in_cap - c->in_len);
    if (n > 0) {
        if (c->in_len == 0) {
            /* The head must be complete this long after its first byte,
             * however slowly the bytes come (slowloris). */
            c->deadline_ns = c->g->now_ns + c->g->conf->header_timeout_ns;
        }
        c->in_len += (size_t)n;
        return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        c->io.can_read = false;
        return false;
    }
    gw_client_close(c);
    return true;
}

void gw_client_run(gw_client *c)
{
    /* TLS: a read that waited for writability, or a write for readability. */
    if (c->tls_rd_on_wr && c->io.can_write) {
        c->tls_rd_on_wr = false;
        c->io.can_read = true;
    }
    if (c->tls_wr_on_rd && c->io.can_read) {
        c->tls_wr_on_rd = false;
        c->io.can_write = true;
    }
    for (int guard = 0; guard < 1000 && c->io.kind == GW_IO_CLIENT; guard++) {
        bool progress = false;
        switch (c->state) {
        case C_READ_HEAD:
            progress = read_head_step(c);
            break;
        case C_PROXY:
            progress = proxy_step(c);
            break;
        case C_LOCAL:
            progress = local_step(c);
            break;
        case C_BODY:
            progress = body_step(c);
            break;
        case C_HELD:
            /* The client hung up while waiting for a replica: give the hold
             * slot back now rather than at the hold timeout (499). */
            if (c->io.rdhup) {
                gw_client_close(c);
            }
            progress = false;
            break;
        default:
            progress = false;
            break;
        }
        if (!progress) {
            return;
        }
    }
}

/* Wake every held request of a service that a replica can now take. */
void gw_service_kick(gw *g, gw_service *s)
{
    /* Each held request once, in order: one waiting for a LoRA adapter no
     * replica holds yet stays held (at the tail) and does not block the
     * others behind it. */
    for (int32_t n = s->held; n > 0 && s->held_head; n--) {
        int why;
        gw_client *c = s->held_head;
        s->want_adapter = c->adapter;
        s->want_batch = c->batch;
        bool can = s->peer_get(g, s, NULL, &why) != NULL;
        s->want_adapter = -1;
        s->want_batch = false;
        if (!can && why == GW_ERR_SATURATED) {
            return;
        }
        s->held_head = c->held_next;
        if (!s->held_head) {
            s->held_tail = NULL;
        }
        c->held_next = NULL;
        if (!can) {
            if (s->held_tail) {
                s->held_tail->held_next = c;
            } else {
                s->held_head = c;
            }
            s->held_tail = c;
            continue;
        }
        s->held--;
        c->state = C_READ_HEAD; /* not held any more; dispatch sets the next state */
        gw_client_dispatch(c, NULL);
        gw_client_run(c);
    }
}
