/*
 * http_guard.c - see http_guard.h.
 */
#include "http_guard.h"

#include "cr_alloc.h"
#include "cr_log.h"
#include "cr_time.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define HG_TICK_NS      (200 * CR_NS_PER_MS)
#define HG_LOG_EVERY_NS (10 * CR_NS_PER_SEC)
#define HG_IP_LEN       64

/* One open connection. */
typedef struct hg_conn {
    int fd;                  /* libmicrohttpd's socket; never closed here */
    char ip[HG_IP_LEN];      /* peer address as text */
    int64_t deadline_ns;     /* monotonic; 0 = none in this phase */
    bool reaped;             /* shut down once already (deadline or evicted) */
    bool counted;            /* in its address's count (not evicted) */
    bool idle;               /* waiting for a request head (HEAD phase) */
    bool privileged;         /* carried an agent's or an admin's request */
    bool reserve;            /* admitted over the per-client cap */
    uint8_t key[HG_KEY_MAX]; /* the token it was charged to (per-token cap) */
    size_t key_len;          /* 0 = none */
    struct hg_conn *prev;    /* list of all */
    struct hg_conn *next;    /* list of all */
} hg_conn;

/* Open connections of one peer address. */
typedef struct hg_ip {
    char ip[HG_IP_LEN]; /* peer address as text */
    unsigned count;     /* connections open and not evicted */
} hg_ip;

/* Connections charged to one token. */
typedef struct hg_key {
    uint8_t key[HG_KEY_MAX]; /* the caller's token key */
    size_t len;              /* bytes */
    unsigned count;          /* connections */
} hg_key;

/* A rate-limited warning. */
typedef struct hg_note {
    uint64_t total;  /* events */
    uint64_t logged; /* total at the last line */
    int64_t last_ns; /* when the last line was written; 0 = never */
} hg_note;

enum { NOTE_PER_IP = 0, NOTE_REAPED, NOTE_MHD, NOTE_EVICTED, NOTE_FRAMING, NOTE_COUNT };

struct http_guard {
    pthread_mutex_t mu;        /* guards everything below */
    pthread_cond_t cv;         /* wakes the reaper to stop */
    pthread_t reaper;          /* the reaper thread */
    bool stop;                 /* reaper: exit */
    int64_t head_ns;           /* HEAD deadline; 0 = none */
    int64_t body_ns;           /* BODY deadline; 0 = none */
    unsigned per_ip;           /* cap; 0 = none */
    unsigned reserve;          /* admitted over per_ip for privileged requests */
    hg_conn *conns;            /* open connections */
    hg_ip *ips;                /* peers with connections open; owned */
    size_t nips, capips;       /* entries used, allocated */
    hg_key *keys;              /* tokens with connections charged; owned */
    size_t nkeys, capkeys;     /* entries used, allocated */
    hg_note notes[NOTE_COUNT]; /* rate-limited warnings */
};

static void addr_text(const struct sockaddr *sa, char *out, size_t len)
{
    out[0] = '\0';
    if (!sa) {
        return;
    }
    if (sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out,
                  (socklen_t)len);
    } else if (sa->sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out,
                  (socklen_t)len);
    }
}

static hg_ip *ip_find(http_guard *g, const char *ip)
{
    for (size_t i = 0; i < g->nips; i++) {
        if (strcmp(g->ips[i].ip, ip) == 0) {
            return &g->ips[i];
        }
    }
    return NULL;
}

/* Count one event; true when a line is due now (mu held). */
static bool note_due(http_guard *g, int kind, uint64_t *since)
{
    hg_note *n = &g->notes[kind];
    n->total++;
    int64_t now = cr_mono_ns();
    if (n->last_ns != 0 && now - n->last_ns < HG_LOG_EVERY_NS) {
        return false;
    }
    *since = n->total - n->logged;
    n->logged = n->total;
    n->last_ns = now;
    return true;
}

static void *reaper_main(void *arg)
{
    http_guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        int64_t now = cr_mono_ns();
        char last[HG_IP_LEN] = "";
        uint64_t since = 0;
        bool due = false;
        for (hg_conn *c = g->conns; c; c = c->next) {
            if (c->deadline_ns == 0 || c->reaped || now < c->deadline_ns) {
                continue;
            }
            /* Shut down, not close: the descriptor stays libmicrohttpd's,
             * which sees the end of the stream and closes the connection. */
            (void)shutdown(c->fd, SHUT_RDWR);
            c->reaped = true;
            snprintf(last, sizeof last, "%s", c->ip);
            due |= note_due(g, NOTE_REAPED, &since);
        }
        if (due) {
            cr_warn("http: closed %llu connections that did not send their request head or body "
                    "in time (head %llds, body %llds; last from %s)",
                    (unsigned long long)since, (long long)(g->head_ns / CR_NS_PER_SEC),
                    (long long)(g->body_ns / CR_NS_PER_SEC), last);
        }
        cr_cond_wait_mono(&g->cv, &g->mu, now + HG_TICK_NS);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

http_guard *http_guard_new(unsigned header_timeout_s, unsigned body_timeout_s, unsigned per_ip,
                           unsigned reserve)
{
    http_guard *g = cr_calloc(1, sizeof *g);
    g->head_ns = (int64_t)header_timeout_s * CR_NS_PER_SEC;
    g->body_ns = (int64_t)body_timeout_s * CR_NS_PER_SEC;
    g->per_ip = per_ip;
    g->reserve = reserve;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    if (pthread_create(&g->reaper, NULL, reaper_main, g) != 0) {
        pthread_cond_destroy(&g->cv);
        pthread_mutex_destroy(&g->mu);
        free(g);
        return NULL;
    }
    return g;
}

void http_guard_free(http_guard *g)
{
    if (!g) {
        return;
    }
    pthread_mutex_lock(&g->mu);
    g->stop = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->reaper, NULL);
    while (g->conns) {
        hg_conn *c = g->conns;
        g->conns = c->next;
        free(c);
    }
    free(g->ips);
    free(g->keys);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

/* The oldest connection of ip waiting for a request head that carried no
 * privileged request, or NULL (mu held). */
static hg_conn *evictable(http_guard *g, const char *ip)
{
    hg_conn *pick = NULL;
    for (hg_conn *c = g->conns; c; c = c->next) {
        if (c->counted && c->idle && !c->privileged && !c->reaped && strcmp(c->ip, ip) == 0) {
            pick = c; /* the list is newest first: the last match is the oldest */
        }
    }
    return pick;
}

static hg_key *key_find(http_guard *g, const uint8_t *key, size_t len)
{
    for (size_t i = 0; i < g->nkeys; i++) {
        if (g->keys[i].len == len && memcmp(g->keys[i].key, key, len) == 0) {
            return &g->keys[i];
        }
    }
    return NULL;
}

/* Take c off its token's count (mu held). */
static void key_drop(http_guard *g, hg_conn *c)
{
    hg_key *k = c->key_len ? key_find(g, c->key, c->key_len) : NULL;
    if (k && --k->count == 0) {
        *k = g->keys[--g->nkeys];
    }
    c->key_len = 0;
}

/* Take c off its address's count (mu held). */
static void ip_drop(http_guard *g, hg_conn *c)
{
    hg_ip *e = c->counted ? ip_find(g, c->ip) : NULL;
    if (e && --e->count == 0) {
        *e = g->ips[--g->nips]; /* order does not matter */
    }
    c->counted = false;
}

enum MHD_Result http_guard_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    (void)addrlen;
    http_guard *g = cls;
    if (g->per_ip == 0) {
        return MHD_YES;
    }
    char ip[HG_IP_LEN];
    addr_text(addr, ip, sizeof ip);
    pthread_mutex_lock(&g->mu);
    hg_ip *e = ip_find(g, ip);
    /* Up to per_ip + reserve: over per_ip a connection either takes the
     * place of an idle one of the same address (http_guard_notify) or may
     * carry only an agent's or an admin's request (http_guard_reserved). */
    bool over = e && e->count >= g->per_ip + g->reserve && !evictable(g, ip);
    uint64_t since = 0;
    bool due = over && note_due(g, NOTE_PER_IP, &since);
    pthread_mutex_unlock(&g->mu);
    if (due) {
        cr_warn("http: refused %llu connections over the per-client cap of %u (last from %s)",
                (unsigned long long)since, g->per_ip, ip);
    }
    return over ? MHD_NO : MHD_YES;
}

void http_guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                       enum MHD_ConnectionNotificationCode toe)
{
    http_guard *g = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        hg_conn *c = cr_calloc(1, sizeof *c);
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        c->fd = ci ? ci->connect_fd : -1;
        ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        addr_text(ci ? ci->client_addr : NULL, c->ip, sizeof c->ip);
        c->idle = true;
        pthread_mutex_lock(&g->mu);
        c->deadline_ns = g->head_ns ? cr_mono_ns() + g->head_ns : 0;
        hg_ip *full = g->per_ip ? ip_find(g, c->ip) : NULL;
        uint64_t since = 0;
        bool due = false;
        if (full && full->count >= g->per_ip) {
            /* Over the per-client cap: an idle connection of the same
             * address that never carried an agent's or admin's request
             * makes room (shut down, as the reaper does); without one this
             * connection is in the reserve. So connections a tenant holds
             * open cannot lock out the agent or an admin on its address. */
            hg_conn *old = evictable(g, c->ip);
            if (old) {
                (void)shutdown(old->fd, SHUT_RDWR);
                old->reaped = true;
                ip_drop(g, old);
                due = note_due(g, NOTE_EVICTED, &since);
            } else {
                c->reserve = true;
            }
        }
        c->next = g->conns;
        if (g->conns) {
            g->conns->prev = c;
        }
        g->conns = c;
        hg_ip *e = ip_find(g, c->ip);
        if (!e) {
            CR_GROW(g->ips, g->nips, g->capips);
            e = &g->ips[g->nips++];
            snprintf(e->ip, sizeof e->ip, "%s", c->ip);
            e->count = 0;
        }
        e->count++;
        c->counted = true;
        pthread_mutex_unlock(&g->mu);
        if (due) {
            cr_warn("http: closed %llu idle connections of clients at the per-client cap of %u "
                    "to admit new ones (last from %s)",
                    (unsigned long long)since, g->per_ip, c->ip);
        }
        *socket_context = c;
        return;
    }
    hg_conn *c = *socket_context;
    if (!c) {
        return;
    }
    pthread_mutex_lock(&g->mu);
    if (c->prev) {
        c->prev->next = c->next;
    } else {
        g->conns = c->next;
    }
    if (c->next) {
        c->next->prev = c->prev;
    }
    ip_drop(g, c);
    key_drop(g, c);
    pthread_mutex_unlock(&g->mu);
    free(c);
    *socket_context = NULL;
}

void http_guard_phase(http_guard *g, struct MHD_Connection *conn, enum http_guard_phase phase)
{
    if (!g) {
        return;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    hg_conn *c = ci ? ci->socket_context : NULL;
    if (!c) {
        return;
    }
    int64_t span = phase == HG_HEAD ? g->head_ns : phase == HG_BODY ? g->body_ns : 0;
    pthread_mutex_lock(&g->mu);
    c->deadline_ns = span ? cr_mono_ns() + span : 0;
    c->idle = phase == HG_HEAD;
    pthread_mutex_unlock(&g->mu);
}

static hg_conn *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

bool http_guard_reserved(http_guard *g, struct MHD_Connection *conn)
{
    hg_conn *c = g ? conn_of(conn) : NULL;
    if (!c) {
        return false;
    }
    pthread_mutex_lock(&g->mu);
    bool r = c->reserve && !c->privileged;
    pthread_mutex_unlock(&g->mu);
    return r;
}

void http_guard_privileged(http_guard *g, struct MHD_Connection *conn)
{
    hg_conn *c = g ? conn_of(conn) : NULL;
    if (!c) {
        return;
    }
    pthread_mutex_lock(&g->mu);
    c->privileged = true;
    key_drop(g, c);
    pthread_mutex_unlock(&g->mu);
}

bool http_guard_charge(http_guard *g, struct MHD_Connection *conn, const void *key, size_t len,
                       unsigned cap)
{
    hg_conn *c = g ? conn_of(conn) : NULL;
    if (!c || len == 0 || cap == 0) {
        return true;
    }
    if (len > HG_KEY_MAX) {
        len = HG_KEY_MAX;
    }
    pthread_mutex_lock(&g->mu);
    bool ok = true;
    if (c->key_len != len || memcmp(c->key, key, len) != 0) {
        key_drop(g, c);
        hg_key *k = key_find(g, key, len);
        if (k && k->count >= cap) {
            ok = false;
        } else {
            if (!k) {
                CR_GROW(g->keys, g->nkeys, g->capkeys);
                k = &g->keys[g->nkeys++];
                memcpy(k->key, key, len);
                k->len = len;
                k->count = 0;
            }
            k->count++;
            memcpy(c->key, key, len);
            c->key_len = len;
        }
    }
    pthread_mutex_unlock(&g->mu);
    return ok;
}

void http_guard_malformed(http_guard *g, const char *peer, const char *why)
{
    if (!g) {
        return;
    }
    pthread_mutex_lock(&g->mu);
    uint64_t since = 0;
    bool due = note_due(g, NOTE_FRAMING, &since);
    pthread_mutex_unlock(&g->mu);
    if (due) {
        cr_warn("http: answered %llu malformed request(s) 400 and closed them (last from %s: %s)",
                (unsigned long long)since, peer, why);
    }
}

int http_guard_log(http_guard *g, const char *line)
{
    static const char *const resource[] = {
        "Error accepting connection",      "Hit process or system resource limit",
        "Server reached connection limit", "Failed to create a new thread",
        "Not enough system resources",
    };
    bool match = false;
    for (size_t i = 0; i < sizeof resource / sizeof resource[0]; i++) {
        match |= strncmp(line, resource[i], strlen(resource[i])) == 0;
    }
    if (!g || !match) {
        return 0;
    }
    pthread_mutex_lock(&g->mu);
    uint64_t since = 0;
    bool due = note_due(g, NOTE_MHD, &since);
    pthread_mutex_unlock(&g->mu);
    if (due) {
        cr_warn("http: %s (%llu connection-resource messages since the last report; raise "
                "RLIMIT_NOFILE or lower max_conns)",
                line, (unsigned long long)since);
    }
    return 1;
}
