/*
 * client_http.c - plain HTTP/1.1 over TCP for http:// servers.
 *
 * One socket per client, kept alive between requests. Every wait is a poll
 * bounded by the request's deadline (and, for streams, the idle limit), so
 * no call blocks longer than its timeout. An idle socket the server closed
 * is noticed before reuse (it polls readable) and replaced. A request other
 * than POST that still fails on a reused socket before any byte of the
 * answer arrived is retried once on a fresh connection; a POST is not (the
 * server may have acted on it before dying: no double submissions).
 */
#include "client_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_time.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* Status line and headers larger than this are not an HTTP answer we accept. */
#define MAX_HEAD_BYTES (64 * 1024)

/* Reading state of one answer. */
typedef struct rd {
    cr_client *c;
    cr__xfer *x;
    int64_t deadline; /* monotonic ns, 0: none */
    char buf[16384];  /* bytes read and not yet consumed */
    size_t len;       /* bytes in buf */
    size_t off;       /* consumed prefix */
    bool eof;         /* peer closed */
    bool got_any;     /* some byte of the answer arrived */
} rd;

static void close_fd(cr_client *c)
{
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
}

/* Milliseconds poll may wait: until the deadline, at most the idle limit. */
static int wait_ms(int64_t deadline, int64_t idle_ns, bool *is_idle)
{
    int64_t now = cr_mono_ns();
    int64_t left = deadline ? deadline - now : INT64_MAX;
    *is_idle = false;
    if (idle_ns > 0 && idle_ns < left) {
        left = idle_ns;
        *is_idle = true;
    }
    if (left <= 0) {
        return 0;
    }
    if (left == INT64_MAX) {
        return -1;
    }
    int64_t ms = (left + CR_NS_PER_MS - 1) / CR_NS_PER_MS;
    return ms > 3600000 ? 3600000 : (int)ms;
}

static int connect_to(cr_client *c, cr__xfer *x, int64_t deadline)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(c->host, c->port, &hints, &ai);
    if (gai != 0) {
        snprintf(x->err, sizeof x->err, "Could not resolve host: %s (%s)", c->host,
                 gai_strerror(gai));
        return CR_EUNAVAIL;
    }
    int rc = CR_EUNAVAIL;
    int64_t cdl = cr_mono_ns() + c->connect_timeout_ns;
    if (deadline && deadline < cdl) {
        cdl = deadline;
    }
    for (struct addrinfo *p = ai; p; p = p->ai_next) {
        int fd =
            socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, p->ai_protocol);
        if (fd < 0) {
            continue;
        }
        int e = 0;
        if (connect(fd, p->ai_addr, p->ai_addrlen) != 0) {
            e = errno;
            if (e == EINPROGRESS) {
                bool idle;
                struct pollfd pf = {.fd = fd, .events = POLLOUT};
                int n;
                do {
                    n = poll(&pf, 1, wait_ms(cdl, 0, &idle));
                } while (n < 0 && errno == EINTR);
                if (n == 0) {
                    close(fd);
                    snprintf(x->err, sizeof x->err, "Connection to %s port %s timed out", c->host,
                             c->port);
                    rc = CR_ETIMEDOUT;
                    continue;
                }
                socklen_t sl = sizeof e;
                e = 0;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl);
            }
        }
        if (e != 0) {
            close(fd);
            snprintf(x->err, sizeof x->err, "Failed to connect to %s port %s: %s", c->host, c->port,
                     strerror(e));
            rc = CR_EUNAVAIL;
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->fd = fd;
        rc = 0;
        break;
    }
    freeaddrinfo(ai);
    return rc;
}

/* Send the request. *stopped is set when the server stopped reading before
 * the whole request went out: it closed or reset the connection (EPIPE,
 * ECONNRESET), or began to answer (the socket reads as ready), as a server
 * refusing an oversized body does. The caller then still reads the answer
 * the server may have sent. MSG_NOSIGNAL: a closed peer never raises
 * SIGPIPE in the calling process. */
static int send_all(cr_client *c, cr__xfer *x, const char *p, size_t n, int64_t deadline,
                    bool *stopped)
{
    *stopped = false;
    while (n > 0) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            bool idle;
            struct pollfd pf = {.fd = c->fd, .events = POLLOUT | POLLIN};
            int k = poll(&pf, 1, wait_ms(deadline, 0, &idle));
            if (k == 0) {
                snprintf(x->err, sizeof x->err, "Operation timed out while sending");
                return CR_ETIMEDOUT;
            }
            if (k > 0 && (pf.revents & POLLIN)) {
                snprintf(x->err, sizeof x->err, "Send failure: the server stopped reading");
                *stopped = true;
                return CR_EUNAVAIL;
            }
            continue;
        }
        int e = errno;
        snprintf(x->err, sizeof x->err, "Send failure: %s", strerror(e));
        *stopped = e == EPIPE || e == ECONNRESET;
        return CR_EUNAVAIL;
    }
    return 0;
}

/*
 * Wait up to ms (-1: no limit) for the socket to read as ready: 1 ready (or
 * an error the next recv reports), 0 the time ran out, CR_EAGAIN the cancel
 * hook said stop. With a hook the wait goes in slices, asking it between.
 */
static int poll_in(cr_client *c, int ms)
{
    int64_t end = ms < 0 ? 0 : cr_mono_ns() + (int64_t)ms * CR_NS_PER_MS;
    for (;;) {
        if (c->cancel && c->cancel(c->cancel_ud)) {
            return CR_EAGAIN;
        }
        int slice = ms;
        if (ms >= 0) {
            int64_t left = end - cr_mono_ns();
            slice = left <= 0 ? 0 : (int)((left + CR_NS_PER_MS - 1) / CR_NS_PER_MS);
        }
        bool last = !c->cancel || (slice >= 0 && slice <= CR__CLIENT_CANCEL_SLICE_MS);
        if (!last) {
            slice = CR__CLIENT_CANCEL_SLICE_MS;
        }
        struct pollfd pf = {.fd = c->fd, .events = POLLIN};
        int k = poll(&pf, 1, slice);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k != 0 || last) {
            return k < 0 ? 1 : k;
        }
    }
}

/* Read more bytes into r->buf (compacting first). 0, or an error code;
 * sets r->eof when the peer closed. */
static int fill(rd *r)
{
    if (r->off > 0) {
        memmove(r->buf, r->buf + r->off, r->len - r->off);
        r->len -= r->off;
        r->off = 0;
    }
    if (r->len == sizeof r->buf) {
        return 0;
    }
    for (;;) {
        ssize_t n = recv(r->c->fd, r->buf + r->len, sizeof r->buf - r->len, 0);
        if (n > 0) {
            r->len += (size_t)n;
            r->got_any = true;
            return 0;
        }
        if (n == 0) {
            r->eof = true;
            return 0;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            snprintf(r->x->err, sizeof r->x->err, "Recv failure: %s", strerror(errno));
            return r->x->status ? CR_EIO : CR_EUNAVAIL;
        }
        bool idle;
        int ms = wait_ms(r->deadline, r->x->status ? r->x->idle_ns : 0, &idle);
        int k = poll_in(r->c, ms);
        if (k == CR_EAGAIN) {
            snprintf(r->x->err, sizeof r->x->err, "cancelled");
            return CR_EAGAIN;
        }
        if (k == 0) {
            snprintf(r->x->err, sizeof r->x->err,
                     idle ? "stream stalled: no data within the idle timeout"
                          : "Operation timed out");
            return CR_ETIMEDOUT;
        }
    }
}

/* Hand body bytes to the sink or the buffer. */
static int deliver(rd *r, const char *p, size_t n)
{
    cr__xfer *x = r->x;
    if (n == 0) {
        return 0;
    }
    if (x->fn && x->status >= 200 && x->status < 300) {
        if (x->fn(x->ud, p, n) != 0) {
            x->stopped = true;
        }
        return 0;
    }
    if (x->answer.len + n > CR__CLIENT_MAX_ANSWER) {
        snprintf(x->err, sizeof x->err, "answer too large");
        return CR_ETOOBIG;
    }
    cr_buf_append(&x->answer, p, n);
    return 0;
}

/* One CRLF-terminated line from the buffer into line (NUL-terminated). */
static int read_line(rd *r, char *line, size_t cap)
{
    for (;;) {
        char *s = r->buf + r->off;
        size_t avail = r->len - r->off;
        char *nl = memchr(s, '\n', avail);
        if (nl) {
            size_t n = (size_t)(nl - s);
            if (n > 0 && s[n - 1] == '\r') {
                n--;
            }
            if (n >= cap) {
                snprintf(r->x->err, sizeof r->x->err, "malformed answer: line too long");
                return CR_EIO;
            }
            memcpy(line, s, n);
            line[n] = '\0';
            r->off += (size_t)(nl - s) + 1;
            return 0;
        }
        if (r->eof || avail >= cap) {
            snprintf(r->x->err, sizeof r->x->err,
                     r->got_any ? "malformed or truncated answer" : "Empty reply from server");
            return r->got_any && r->x->status ? CR_EIO : CR_EUNAVAIL;
        }
        int rc = fill(r);
        if (rc < 0) {
            return rc;
        }
    }
}

/* Body of n bytes (n == UINT64_MAX: until the peer closes). */
static int read_body(rd *r, uint64_t n)
{
    while (n > 0 && !r->x->stopped) {
        if (r->off == r->len) {
            if (r->eof) {
                if (n == UINT64_MAX) {
                    return 0;
                }
                snprintf(r->x->err, sizeof r->x->err, "connection closed inside the answer");
                return CR_EIO;
            }
            int rc = fill(r);
            if (rc < 0) {
                return rc;
            }
            continue;
        }
        size_t take = r->len - r->off;
        if ((uint64_t)take > n) {
            take = (size_t)n;
        }
        int rc = deliver(r, r->buf + r->off, take);
        if (rc < 0) {
            return rc;
        }
        r->off += take;
        if (n != UINT64_MAX) {
            n -= take;
        }
    }
    return 0;
}

static int read_chunked(rd *r)
{
    char line[1024];
    for (;;) {
        int rc = read_line(r, line, sizeof line);
        if (rc < 0) {
            return rc;
        }
        char *end;
        errno = 0;
        unsigned long long size = strtoull(line, &end, 16);
        if (end == line || errno || (*end && *end != ';' && !isspace((unsigned char)*end))) {
            snprintf(r->x->err, sizeof r->x->err, "malformed chunk size '%.40s'", line);
            return CR_EIO;
        }
        if (size == 0) {
            /* trailers until an empty line */
            do {
                rc = read_line(r, line, sizeof line);
                if (rc < 0) {
                    return rc;
                }
            } while (line[0] != '\0');
            return 0;
        }
        rc = read_body(r, size);
        if (rc < 0 || r->x->stopped) {
            return rc;
        }
        rc = read_line(r, line, sizeof line);
        if (rc < 0) {
            return rc;
        }
    }
}

/* Read one answer; *keep tells whether the socket may be reused. */
static int read_answer(rd *r, bool *keep)
{
    char line[8192];
    cr__xfer *x = r->x;
    size_t head_bytes = 0;
    for (;;) { /* skip 1xx interim answers */
        int rc = read_line(r, line, sizeof line);
        if (rc < 0) {
            return rc;
        }
        int major = 0, minor = 0, status = 0;
        if (sscanf(line, "HTTP/%d.%d %d", &major, &minor, &status) != 3 || status < 100 ||
            status > 999) {
            snprintf(x->err, sizeof x->err, "not an HTTP answer: '%.60s'", line);
            return CR_EUNAVAIL;
        }
        bool close_conn = major == 1 && minor == 0;
        bool chunked = false;
        uint64_t length = UINT64_MAX;
        for (;;) {
            rc = read_line(r, line, sizeof line);
            if (rc < 0) {
                return rc;
            }
            head_bytes += strlen(line) + 2;
            if (head_bytes > MAX_HEAD_BYTES) {
                snprintf(x->err, sizeof x->err, "answer headers too large");
                return CR_EIO;
            }
            if (line[0] == '\0') {
                break;
            }
            char *colon = strchr(line, ':');
            if (!colon) {
                continue;
            }
            *colon = '\0';
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t') {
                v++;
            }
            if (strcasecmp(line, "Content-Length") == 0) {
                char *end;
                errno = 0;
                unsigned long long n = strtoull(v, &end, 10);
                if (end == v || errno) {
                    snprintf(x->err, sizeof x->err, "bad Content-Length '%.40s'", v);
                    return CR_EIO;
                }
                length = n;
            } else if (strcasecmp(line, "Location") == 0) {
                snprintf(x->location, sizeof x->location, "%s", v);
            } else if (strcasecmp(line, "Retry-After") == 0) {
                /* delay-seconds only; an HTTP-date is not waited on */
                char *end;
                errno = 0;
                unsigned long long n = strtoull(v, &end, 10);
                x->retry_s = end != v && !errno && n <= 86400 ? (unsigned)n : 0;
            } else if (strcasecmp(line, "Transfer-Encoding") == 0) {
                chunked = strcasestr(v, "chunked") != NULL;
            } else if (strcasecmp(line, "Connection") == 0) {
                if (strcasestr(v, "close")) {
                    close_conn = true;
                } else if (strcasestr(v, "keep-alive")) {
                    close_conn = false;
                }
            }
        }
        if (status < 200) {
            continue;
        }
        x->status = status;
        bool no_body = status == 204 || status == 304 || strcmp(x->method, "HEAD") == 0;
        if (no_body) {
            rc = 0;
        } else if (chunked) {
            rc = read_chunked(r);
        } else if (length != UINT64_MAX) {
            rc = read_body(r, length);
        } else {
            close_conn = true;
            rc = read_body(r, UINT64_MAX);
        }
        /* leftover bytes would belong to nothing we asked for */
        *keep = rc == 0 && !close_conn && !x->stopped && r->off == r->len && !r->eof;
        return rc;
    }
}

int cr__client_http(cr_client *c, cr__xfer *x)
{
    int64_t deadline = x->timeout_ns > 0 ? cr_mono_ns() + x->timeout_ns : 0;
    cr_buf req;
    cr_buf_init(&req);
    cr_buf_printf(&req, "%s %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\n", x->method, c->prefix,
                  x->path, c->host_header, c->user_agent);
    cr_buf_puts(&req, "Accept: application/json\r\n");
    if (x->idem) {
        cr_buf_printf(&req, "Idempotency-Key: %s\r\n", x->idem);
    }
    if (c->token) {
        cr_buf_printf(&req, "Authorization: Bearer %s\r\n", c->token);
    }
    if (x->body) {
        cr_buf_printf(&req, "Content-Type: application/json\r\nContent-Length: %zu\r\n",
                      x->body_len);
    }
    cr_buf_puts(&req, "\r\n");
    if (x->body) {
        cr_buf_append(&req, x->body, x->body_len);
    }
    int rc = 0;
    /* An idle kept-alive socket that reads as ready was closed by the server
     * (or holds bytes nobody asked for): drop it before sending. */
    if (c->fd >= 0) {
        struct pollfd pf = {.fd = c->fd, .events = POLLIN};
        if (poll(&pf, 1, 0) != 0) {
            close_fd(c);
        }
    }
    /* A retry after a failure with no byte of answer is safe only when the
     * request may be repeated: the server may have acted on a POST and died
     * before answering, and a second submission must not happen. */
    bool idempotent = strcmp(x->method, "POST") != 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        bool reused = c->fd >= 0;
        if (!reused && (rc = connect_to(c, x, deadline)) < 0) {
            break;
        }
        bool stopped = false;
        x->sent = true;
        rc = send_all(c, x, req.data, req.len, deadline, &stopped);
        rd *r = NULL;
        if (rc == 0 || stopped) {
            /* After a send the server cut short, its answer (a 413 for an
             * oversized body, say) may already be waiting: report it. */
            char send_err[sizeof x->err];
            int send_rc = rc;
            snprintf(send_err, sizeof send_err, "%s", x->err);
            r = cr_calloc(1, sizeof *r);
            r->c = c;
            r->x = x;
            r->deadline = deadline;
            bool keep = false;
            rc = read_answer(r, &keep);
            if (stopped && x->status == 0) {
                rc = send_rc; /* no answer came: the send failure stands */
                snprintf(x->err, sizeof x->err, "%s", send_err);
            } else if (stopped && rc == CR_EIO && x->status >= 300) {
                rc = 0; /* an error answer cut by the reset: its status is what counts */
                x->err[0] = '\0';
            }
            if (!keep || stopped) {
                close_fd(c);
            }
        } else {
            close_fd(c);
        }
        bool nothing = !r || !r->got_any;
        free(r);
        if (rc == 0 || !reused || !nothing || rc == CR_ETIMEDOUT || rc == CR_EAGAIN ||
            !idempotent) {
            break;
        }
        /* the kept-alive socket was dead: one fresh try */
        x->err[0] = '\0';
        cr_buf_reset(&x->answer);
    }
    if (rc < 0) {
        close_fd(c);
    }
    cr_buf_fini(&req);
    return rc;
}
