/*
 * gateway_main.c - 'corral gateway': set up the listener, the services and
 * the helper threads, run the event loop, and tear down on SIGTERM/SIGINT.
 * SIGHUP reloads the services of --config and the TLS certificate.
 */
#include "cr_gateway.h"

#include "gw_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

static int open_listener(gw *g)
{
    struct sockaddr_storage sa;
    socklen_t len;
    if (gw_resolve(g->conf->listen_host, g->conf->listen_port, &sa, &len) != 0) {
        fprintf(stderr, "corral gateway: --listen: cannot resolve '%s'\n", g->conf->listen_host);
        return CR_EINVAL;
    }
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return CR_EIO;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, len) != 0 || listen(fd, 1024) != 0) {
        fprintf(stderr, "corral gateway: --listen %s:%u: %s\n", g->conf->listen_host,
                (unsigned)g->conf->listen_port, strerror(errno));
        close(fd);
        return CR_EIO;
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    getsockname(fd, (struct sockaddr *)&bound, &blen);
    g->bound_port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                      : ((struct sockaddr_in *)&bound)->sin_port);
    g->listen.kind = GW_IO_LISTEN;
    g->listen.fd = fd;
    return 0;
}

static void add_io(gw *g, gw_io *io)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN | EPOLLET;
    ev.data.ptr = io;
    epoll_ctl(g->ep, EPOLL_CTL_ADD, io->fd, &ev);
}

int cr_gateway_main(int argc, char **argv)
{
    gw_conf conf;
    int rc = gw_conf_parse_args(argc, argv, &conf);
    if (rc != 0) {
        gw_conf_fini(&conf);
        return rc == 1 ? 0 : 2;
    }
    int exit_code = 1;
    gw g;
    memset(&g, 0, sizeof g);
    g.conf = &conf;
    /* Keys by default where there is a controller to publish them. */
    g.require_keys = conf.require_keys < 0 ? conf.controller != NULL : conf.require_keys == 1;
    g.ep = g.wake.fd = g.sig.fd = g.listen.fd = g.spare_fd = -1;
    cr_rng_seed(&g.rng, conf.seed);
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cond, NULL);

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread starts */
    signal(SIGPIPE, SIG_IGN);

    if (gw_tls_init(&g) != 0) {
        exit_code = 2;
        goto out;
    }
    g.ep = epoll_create1(EPOLL_CLOEXEC);
    if (g.ep < 0 || open_listener(&g) != 0) {
        goto out;
    }
    g.wake.kind = GW_IO_WAKE;
    g.wake.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    g.sig.kind = GW_IO_SIGNAL;
    g.sig.fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (g.wake.fd < 0 || g.sig.fd < 0) {
        goto out;
    }
    gw_admission_init(&g);
    add_io(&g, &g.listen);
    add_io(&g, &g.wake);
    add_io(&g, &g.sig);
    g.now_ns = cr_mono_ns();
    for (size_t i = 0; i < conf.service_count; i++) {
        gw_service_conf *sc = &conf.services[i];
        gw_service *s = gw_service_add(&g, sc->name);
        if (sc->ready_path[0]) {
            snprintf(s->ready_path, sizeof s->ready_path, "%s", sc->ready_path);
        }
        if (sc->max_inflight > 0) {
            s->max_inflight = sc->max_inflight;
        }
        s->scrape = sc->scrape;
        gw_service_set_models(&g, s, sc->tenant, sc->models, sc->model_count);
        gw_service_set_adapters(&g, s, sc->adapters, sc->adapter_count);
        gw_slo_set_targets(s, sc->ttft_target_ms, sc->tpot_target_ms);
        gw_service_set_endpoints(&g, s, sc->endpoints, sc->endpoint_count);
    }
    gw_publish_targets(&g);
    gw_publish_stats(&g);
    if (gw_prober_start(&g) != 0 || gw_ctl_start(&g) != 0) {
        goto out;
    }
    cr_info("gateway: listening on %s:%u services=%zu api_keys=%s tls=%s", conf.listen_host,
            (unsigned)g.bound_port, g.service_count, g.require_keys ? "required" : "off",
            g.tls_ctx ? "on" : "off");
    exit_code = gw_run(&g) == 0 ? 0 : 1;
    cr_info("gateway: stopping");
out:
    pthread_mutex_lock(&g.mu);
    __atomic_store_n(&g.stop, true, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&g.cond);
    pthread_mutex_unlock(&g.mu);
    if (g.prober_started) {
        pthread_join(g.prober, NULL);
    }
    gw_ctl_stop(&g);
    gw_services_free(&g);
    gw_keys_free(&g);
    gw_tls_fini(&g);
    while (g.inbox) {
        gw_msg *m = g.inbox;
        g.inbox = m->next;
        gw_msg_free(m);
    }
    free(g.targets);
    free(g.stats);
    if (g.listen.fd >= 0) {
        close(g.listen.fd);
    }
    if (g.wake.fd >= 0) {
        close(g.wake.fd);
    }
    if (g.sig.fd >= 0) {
        close(g.sig.fd);
    }
    if (g.ep >= 0) {
        close(g.ep);
    }
    if (g.spare_fd >= 0) {
        close(g.spare_fd);
    }
    pthread_mutex_destroy(&g.mu);
    pthread_cond_destroy(&g.cond);
    gw_conf_fini(&conf);
    return exit_code;
}
