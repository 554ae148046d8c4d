/*
 * gw_loop.c - the event loop around the proxy path: epoll dispatch,
 * accepting, the inbox from the helper threads, timeouts, SIGHUP reload and
 * the graceful stop. The proxy path itself is gw_proxy.c.
 */
#include "gw_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <errno.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

static void drain_check(gw *g);

/* ---- timeouts ---------------------------------------------------------- */

/* The client stopped sending its request body: free the replica slot now
 * (not at the upstream timeout) and answer 408 when nothing of the response
 * went out yet. */
static void body_stalled(gw *g, gw_client *c)
{
    cr_info("gateway: client %s: request body stalled for %llds: replica slot freed", c->peer_ip,
            (long long)(g->conf->body_timeout_ns / CR_NS_PER_SEC));
    if (c->resp_started) {
        gw_client_close(c);
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
    c->close_after = true;
    gw_local_error(c, 408, -1, "CR_ETIMEDOUT", "the request body stopped arriving");
    gw_client_run(c);
}

static void sweep(gw *g)
{
    int64_t now = g->now_ns;
    gw_client *next = NULL;
    for (gw_client *c = g->clients; c; c = next) {
        next = c->next;
        switch (c->state) {
        case C_READ_HEAD:
            if (now >= c->deadline_ns) {
                if (c->in_len > 0) {
                    cr_debug("gateway: client %s: request head not complete in time: closed",
                             c->peer_ip);
                }
                gw_client_close(c);
            }
            break;
        case C_LOCAL:
            if (now >= c->deadline_ns) {
                gw_client_close(c);
            }
            break;
        case C_BODY:
            if (now >= c->body_deadline_ns) {
                c->close_after = true;
                gw_local_error(c, 408, GW_ERR_BAD_REQUEST, "CR_ETIMEDOUT",
                               "the request body stalled");
                gw_client_run(c);
            }
            break;
        case C_HELD:
            if (now >= c->deadline_ns) {
                gw_held_remove(c->svc, c);
                c->attempts = 1;
                gw_local_error(c, 503, GW_ERR_NO_REPLICA, "CR_EUNAVAIL",
                               "no replica became ready in time");
                gw_client_run(c);
            }
            break;
        case C_PROXY:
            if (!c->body_done && now >= c->body_deadline_ns) {
                body_stalled(g, c);
                break;
            }
            if (c->b && now >= c->b->deadline_ns) {
                if (c->b->state == B_CONNECTING) {
                    gw_backend_failed(c, true, "connect timed out");
                } else if (!c->resp_started) {
                    gw_backend *b = gw_detach(c);
                    gw_replica *r = b->rep;
                    gw_backend_close(g, b);
                    c->close_after = true;
                    gw_local_error(c, 504, GW_ERR_TIMEOUT, "CR_ETIMEDOUT", "the replica timed out");
                    if (r) {
                        gw_replica_release(g, r);
                    }
                } else {
                    if (c->svc) {
                        c->svc->errors[GW_ERR_TIMEOUT]++;
                    }
                    gw_client_close(c);
                    break;
                }
                gw_client_run(c);
            }
            break;
        default:
            break;
        }
    }
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        for (size_t j = 0; j < s->replica_count; j++) {
            gw_replica *r = s->replicas[j];
            for (gw_backend **p = &r->idle; *p;) {
                gw_backend *b = *p;
                if (now >= b->deadline_ns) {
                    *p = b->pool_next;
                    r->idle_count--;
                    b->pool_next = NULL;
                    gw_backend_close(g, b);
                } else {
                    p = &b->pool_next;
                }
            }
        }
    }
}

void gw_free_graveyard(gw *g)
{
    while (g->grave_clients) {
        gw_client *c = g->grave_clients;
        g->grave_clients = c->held_next;
        gw_client_free(c);
    }
    while (g->grave_backends) {
        gw_backend *b = g->grave_backends;
        g->grave_backends = b->gnext;
        free(b->in);
        free(b);
    }
}

/*
 * Admission. Each client may hold two descriptors (its own and one backend
 * connection; pooled backends are bounded by the peak of busy ones), and the
 * process needs a few more (epoll, eventfd, signalfd, listener, the helper
 * threads' sockets). So clients are admitted up to
 * min(max_clients, (RLIMIT_NOFILE - GW_FD_RESERVE) / 2); one more is
 * accepted, answered 503 and closed, so it sees why instead of a reset or a
 * connection left in the backlog, while the admitted ones go on being served.
 * Should accept fail with EMFILE anyway (descriptors used elsewhere), the
 * spare descriptor is given up for one accept-and-refuse, then reopened.
 */
#define GW_FD_RESERVE 64

void gw_admission_init(gw *g)
{
    struct rlimit rl;
    int64_t cap = g->conf->max_clients;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        int64_t by_fd = ((int64_t)rl.rlim_cur - GW_FD_RESERVE) / 2;
        if (by_fd < 1) {
            by_fd = 1;
        }
        if (by_fd < cap) {
            cr_info("gateway: RLIMIT_NOFILE=%llu admits %lld clients (--max-clients %d)",
                    (unsigned long long)rl.rlim_cur, (long long)by_fd, (int)g->conf->max_clients);
            cap = by_fd;
        }
    }
    g->client_cap = (int32_t)cap;
    g->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void note_refused(gw *g, const char *why)
{
    g->refused++;
    /* At most one line per 10 s, with the count since the last one. */
    if (g->refuse_log_ns == 0 || g->now_ns - g->refuse_log_ns >= 10 * CR_NS_PER_SEC) {
        cr_warn("gateway: refusing connections (%s): %llu refused since the last report, "
                "%d clients open, admission bound %d",
                why, (unsigned long long)(g->refused - g->refused_logged), (int)g->client_count,
                (int)g->client_cap);
        g->refused_logged = g->refused;
        g->refuse_log_ns = g->now_ns;
    }
}

/* Best effort: a non-blocking 503 on a fresh socket (its buffer is empty). */
static void refuse(gw *g, int fd, const char *why)
{
    if (g->tls_ctx) {
        /* plain text would be garbage to a TLS client: close only */
        close(fd);
        note_refused(g, why);
        return;
    }
    char msg[256];
    int n =
        snprintf(msg, sizeof msg,
                 "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                 "Retry-After: %d\r\nConnection: close\r\nContent-Length: 68\r\n\r\n"
                 "{\"error\":\"CR_EUNAVAIL\",\"message\":\"gateway at its connection limit\"}\n",
                 (int)g->conf->retry_after_s);
    (void)!send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
    note_refused(g, why);
}

static void accept_all(gw *g)
{
    for (;;) {
        struct sockaddr_storage sa;
        socklen_t len = sizeof sa;
        int fd = accept4(g->listen.fd, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if ((errno == EMFILE || errno == ENFILE) && g->spare_fd >= 0) {
                close(g->spare_fd);
                g->spare_fd = -1;
                fd = accept4(g->listen.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd >= 0) {
                    refuse(g, fd, "out of descriptors");
                }
                g->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (fd >= 0) {
                    continue;
                }
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                cr_warn("gateway: accept: %s", strerror(errno));
            }
            g->listen.can_read = false;
            return;
        }
        if (g->client_count >= g->client_cap) {
            refuse(g, fd, "at the admission bound");
            continue;
        }
        gw_client *c = gw_client_new(g, fd, &sa);
        if (!c) {
            continue;
        }
        c->io.can_read = true; /* data may already be there; the edge came before registration */
        c->io.can_write = true;
        gw_client_run(c);
    }
}

static void drain_inbox(gw *g)
{
    uint64_t v;
    while (read(g->wake.fd, &v, sizeof v) > 0) {
    }
    pthread_mutex_lock(&g->mu);
    gw_msg *list = g->inbox;
    g->inbox = NULL;
    pthread_mutex_unlock(&g->mu);
    /* The inbox is LIFO: reverse it so messages apply in the order sent. */
    gw_msg *rev = NULL;
    while (list) {
        gw_msg *m = list;
        list = m->next;
        m->next = rev;
        rev = m;
    }
    while (rev) {
        gw_msg *m = rev;
        rev = m->next;
        gw_apply_msg(g, m);
        gw_msg_free(m);
    }
}

static void reload(gw *g)
{
    if (!g->conf->config_path) {
        if (!g->tls_ctx) {
            cr_info("gateway: SIGHUP without --config: nothing to reload");
        }
        return;
    }
    gw_conf fresh;
    memset(&fresh, 0, sizeof fresh);
    int rc = gw_conf_load_file(g->conf->config_path, &fresh);
    if (rc != 0) {
        cr_error("gateway: reload of %s failed; keeping the endpoints in use",
                 g->conf->config_path);
        gw_conf_fini(&fresh);
        return;
    }
    for (size_t i = 0; i < fresh.service_count; i++) {
        gw_service_conf *sc = &fresh.services[i];
        gw_service *s = gw_service_find(g, sc->name, strlen(sc->name));
        if (!s) {
            s = gw_service_add(g, sc->name);
        }
        if (sc->ready_path[0]) {
            snprintf(s->ready_path, sizeof s->ready_path, "%s", sc->ready_path);
        }
        if (sc->max_inflight > 0) {
            s->max_inflight = sc->max_inflight;
        }
        s->scrape = sc->scrape;
        gw_service_set_models(g, s, sc->tenant, sc->models, sc->model_count);
        gw_service_set_adapters(g, s, sc->adapters, sc->adapter_count);
        gw_slo_set_targets(s, sc->ttft_target_ms, sc->tpot_target_ms);
        gw_service_set_endpoints(g, s, sc->endpoints, sc->endpoint_count);
    }
    /* A service gone from the file is drained to zero replicas. */
    for (size_t i = 0; i < g->service_count; i++) {
        bool found = false;
        for (size_t j = 0; j < fresh.service_count; j++) {
            found |= strcmp(fresh.services[j].name, g->services[i]->name) == 0;
        }
        if (!found) {
            gw_service_set_endpoints(g, g->services[i], NULL, 0);
        }
    }
    cr_info("gateway: reloaded %s (%zu services)", g->conf->config_path, fresh.service_count);
    gw_conf_fini(&fresh);
}

/*
 * Graceful stop: close the listener, close idle keep-alive clients, let the
 * requests under way (and held ones) finish within the grace period, closing
 * each connection as its response ends; then leave the loop.
 */
static void start_drain(gw *g)
{
    g->draining = true;
    g->drain_deadline_ns = g->now_ns + g->conf->shutdown_grace_ns;
    if (g->listen.fd >= 0) {
        close(g->listen.fd);
        g->listen.fd = -1;
        g->listen.kind = GW_IO_DEAD;
    }
    cr_info("gateway: draining clients=%d grace_s=%lld", (int)g->client_count,
            (long long)(g->conf->shutdown_grace_ns / CR_NS_PER_SEC));
    drain_check(g);
}

static void drain_check(gw *g)
{
    int busy = 0;
    gw_client *next = NULL;
    for (gw_client *c = g->clients; c; c = next) {
        next = c->next;
        if (c->state == C_READ_HEAD && c->in_len == 0) {
            gw_client_close(c);
        } else {
            busy++;
        }
    }
    if (busy == 0 || g->now_ns >= g->drain_deadline_ns) {
        g->stopping = true;
    }
}

static void on_signal(gw *g)
{
    struct signalfd_siginfo si;
    while (read(g->sig.fd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGHUP) {
            gw_tls_reload(g);
            reload(g);
        } else if (g->draining) {
            g->stopping = true; /* a second TERM: stop now */
        } else {
            start_drain(g);
        }
    }
}

int gw_run(gw *g)
{
    struct epoll_event evs[256];
    g->now_ns = cr_mono_ns();
    g->next_sweep_ns = g->now_ns;
    g->next_report_ns = g->now_ns + g->conf->report_interval_ns;
    while (!g->stopping) {
        int n = epoll_wait(g->ep, evs, 256, 50);
        if (n < 0 && errno != EINTR) {
            cr_error("gateway: epoll_wait: %s", strerror(errno));
            return CR_EIO;
        }
        g->now_ns = cr_mono_ns();
        for (int i = 0; i < n; i++) {
            gw_io *io = evs[i].data.ptr;
            uint32_t e = evs[i].events;
            if (io->kind == GW_IO_DEAD) {
                continue;
            }
            if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
                io->can_read = true;
            }
            if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR)) {
                io->can_write = true;
            }
            if (e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
                io->rdhup = true;
            }
            switch (io->kind) {
            case GW_IO_LISTEN:
                accept_all(g);
                break;
            case GW_IO_CLIENT:
                gw_client_run((gw_client *)io);
                break;
            case GW_IO_BACKEND: {
                gw_backend *b = (gw_backend *)io;
                if (b->c) {
                    gw_client_run(b->c);
                } else if (b->state == B_IDLE && b->io.can_read) {
                    gw_idle_event(g, b);
                }
                break;
            }
            case GW_IO_WAKE:
                drain_inbox(g);
                break;
            case GW_IO_SIGNAL:
                on_signal(g);
                break;
            default:
                break;
            }
        }
        if (g->draining) {
            drain_check(g);
        }
        if (g->now_ns >= g->next_sweep_ns) {
            sweep(g);
            g->next_sweep_ns = g->now_ns + 100 * CR_NS_PER_MS;
        }
        if (g->now_ns >= g->next_report_ns) {
            gw_publish_stats(g);
            g->next_report_ns = g->now_ns + g->conf->report_interval_ns;
        }
        if (g->probes_dirty) {
            gw_publish_targets(g);
        }
        gw_free_graveyard(g);
    }
    /* Shut down: close every client (their backends with them). */
    while (g->clients) {
        gw_client_close(g->clients);
    }
    gw_free_graveyard(g);
    return 0;
}
