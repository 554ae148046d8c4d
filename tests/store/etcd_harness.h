/*
 * etcd_harness.h - starts a real single-member etcd on free loopback ports
 * for a test, waits until it answers, stops it and removes its data.
 * Header-only (static functions) so each test binary includes it once.
 * A test exits 77 (skip) only when no etcd binary exists.
 */
#ifndef ETCD_HARNESS_H
#define ETCD_HARNESS_H

#include "cr_etcd.h"
#include "cr_time.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct etcd_proc {
    pid_t pid;
    char dir[128]; /* data and log */
    char url[64];  /* http://127.0.0.1:PORT */
    int client_port, peer_port;
} etcd_proc;

static const char *etcd_binary(void)
{
    const char *env = getenv("ETCD_BIN");
    if (env && access(env, X_OK) == 0) {
        return env;
    }
    static const char *const paths[] = {"/usr/bin/etcd", "/usr/local/bin/etcd", "/usr/sbin/etcd"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        if (access(paths[i], X_OK) == 0) {
            return paths[i];
        }
    }
    return NULL;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* Starts etcd; exits 77 when there is no etcd binary, fails the test
 * (returns -1) when it does not answer within 60 s. */
static int etcd_start(etcd_proc *p)
{
    const char *bin = etcd_binary();
    if (!bin) {
        fprintf(stderr, "no etcd binary (apt-get install etcd-server): skipped\n");
        exit(77);
    }
    memset(p, 0, sizeof *p);
    snprintf(p->dir, sizeof p->dir, "/tmp/corral-etcd-XXXXXX");
    if (!mkdtemp(p->dir)) {
        return -1;
    }
    p->client_port = free_port();
    p->peer_port = free_port();
    if (p->client_port <= 0 || p->peer_port <= 0 || p->client_port == p->peer_port) {
        return -1;
    }
    snprintf(p->url, sizeof p->url, "http://127.0.0.1:%d", p->client_port);
    char data[200], peer[64], cluster[120], log[200];
    snprintf(data, sizeof data, "%s/data", p->dir);
    snprintf(peer, sizeof peer, "http://127.0.0.1:%d", p->peer_port);
    snprintf(cluster, sizeof cluster, "default=%s", peer);
    snprintf(log, sizeof log, "%s/etcd.log", p->dir);
    p->pid = fork();
    if (p->pid == 0) {
        FILE *f = freopen(log, "w", stdout);
        if (f) {
            dup2(fileno(stdout), 2);
        }
        execl(bin, "etcd", "--data-dir", data, "--listen-client-urls", p->url,
              "--advertise-client-urls", p->url, "--listen-peer-urls", peer,
              "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster, "--log-level",
              "warn", (char *)NULL);
        _exit(127);
    }
    if (p->pid < 0) {
        return -1;
    }
    cr_etcd *e = NULL;
    if (cr_etcd_new(p->url, NULL, &e) != 0) {
        return -1;
    }
    int64_t deadline = cr_mono_ns() + 60 * CR_NS_PER_SEC;
    int rc = -1;
    while (cr_mono_ns() < deadline) {
        cr_etcd_range_result r;
        cr_etcd_range_req q = {.key = "/probe"};
        if (cr_etcd_range(e, &q, &r, NULL) == 0) {
            cr_etcd_range_result_fini(&r);
            rc = 0;
            break;
        }
        int st;
        if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
            fprintf(stderr, "etcd exited early; see %s\n", log);
            p->pid = 0;
            break;
        }
        usleep(50 * 1000);
    }
    cr_etcd_free(e);
    return rc;
}

static void etcd_stop(etcd_proc *p)
{
    if (p->pid > 0) {
        kill(p->pid, SIGTERM);
        int st;
        waitpid(p->pid, &st, 0);
        p->pid = 0;
    }
    if (p->dir[0]) {
        char cmd[200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", p->dir);
        if (system(cmd) != 0) {
            fprintf(stderr, "could not remove %s\n", p->dir);
        }
        p->dir[0] = '\0';
    }
}

#endif
