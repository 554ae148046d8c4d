/*
 * ctl_ha.h - standby controllers: leader election on an etcd lease.
 *
 * Several controllers share one etcd store (`--store etcd:URL,...`); each
 * names the URL its clients reach it at (`--advertise-url`). One of them is
 * the leader: it holds the key <prefix>leader, created with a
 * put-if-absent (compare create_revision == 0) attached to a lease of
 * `--election-ttl` seconds that it renews every TTL/3. The value is the
 * leader's advertised URL. A follower loads no state: it answers /healthz,
 * /metrics, /v1/health and /v1/version itself and every other request with
 * 307 and Location: <leader URL><same path and query> (503 CR_EUNAVAIL
 * while no leader is known). Followers read the key every min(1 s, TTL/4)
 * and campaign when it is gone (the leader died: its lease expired; or it
 * stopped: it revoked the lease).
 *
 * Winning is a controller start: the caller (controller_main.c) then opens
 * the store, loads the state and starts scheduling exactly as after a
 * restart, so agents report their running jobs and are adopted; while it
 * loads, /v1 answers 503 CR_EUNAVAIL ("starting").
 *
 * Safety. A leader must stop before its lease can have expired at etcd. It
 * measures, on the monotonic clock, from the moment it SENT the last
 * keepalive that etcd accepted (the lease cannot have been renewed earlier
 * than that); when TTL - margin (margin = max(TTL/5, 0.5 s)) has passed
 * without a newer one, a watchdog thread ends the process at once
 * (exit status CTL_HA_EXIT_DEPOSED, logged; the service manager restarts it
 * as a follower: docs/operations.md). It does the same when etcd says the
 * lease is gone or the key is no longer the one it created. Even a leader
 * whose clock misbehaves cannot write after that: every write of the etcd
 * store compares the leader key's create_revision with the one this
 * controller created (ctl_ha_fence), so once another controller holds the
 * key, the deposed one's writes fail.
 *
 * Threading: one election thread and one watchdog thread; everything read
 * by the HTTP threads is atomic or under the module's own mutex (a leaf:
 * nothing else is taken while it is held).
 */
#ifndef CTL_HA_H
#define CTL_HA_H

#include "cr_buf.h"
#include "cr_http.h"
#include "cr_store.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

/* Exit status of a controller that lost its leadership. */
#define CTL_HA_EXIT_DEPOSED 75
/* Bounds of --election-ttl (seconds). */
#define CTL_HA_TTL_MIN_S     2
#define CTL_HA_TTL_MAX_S     600
#define CTL_HA_TTL_DEFAULT_S 5
/* Longest --advertise-url. */
#define CTL_HA_URL_MAX 512

typedef struct ctl_ha ctl_ha;

typedef enum ctl_ha_role {
    CTL_HA_FOLLOWER = 0, /* another controller leads, or none yet */
    CTL_HA_STARTING = 1, /* elected; loading the state */
    CTL_HA_LEADER = 2,   /* elected and serving */
} ctl_ha_role;

typedef struct ctl_ha_opts {
    const char *endpoints;         /* etcd client URLs, comma-separated (borrowed) */
    const char *prefix;            /* key prefix of the cluster, ending in '/' (borrowed) */
    const char *advertise;         /* this controller's URL for clients (borrowed) */
    int64_t ttl_s;                 /* lease TTL, CTL_HA_TTL_MIN_S..CTL_HA_TTL_MAX_S */
    const struct cr_etcd_sec *sec; /* etcd TLS and authentication (borrowed); NULL none */
} ctl_ha_opts;

/* Whether url can be advertised: http(s)://host[:port], no path, no comma,
 * at most CTL_HA_URL_MAX bytes. */
bool ctl_ha_url_ok(const char *url);

/* Returned new in *out (free with ctl_ha_free); connects to nothing yet.
 * CR_EINVAL for bad options, CR_EUNAVAIL when the etcd client cannot be
 * made (libcurl missing). */
int ctl_ha_new(const ctl_ha_opts *o, ctl_ha **out);
/* Start the election and watchdog threads. 0 or CR_EIO. */
int ctl_ha_start(ctl_ha *h);
/* Block until this controller is elected (0), or one of sigs arrives
 * (CR_EAGAIN, *sig set): the caller then shuts down as a follower. */
int ctl_ha_wait_elected(ctl_ha *h, const sigset_t *sigs, int *sig);
/* The store this leader writes (borrowed; until ctl_ha_free): a failed
 * fence compare (cr_store_fenced) deposes it like a lost lease. */
void ctl_ha_set_store(ctl_ha *h, cr_store *store);
/* The state is loaded: /v1 is served here from now on. */
void ctl_ha_set_ready(ctl_ha *h);
ctl_ha_role ctl_ha_get_role(const ctl_ha *h);
/* The leader key and the create_revision this controller gave it (0
 * before it was elected): what every store write is fenced by. */
const char *ctl_ha_key(const ctl_ha *h);
int64_t ctl_ha_fence(const ctl_ha *h);
/* Requests a controller that is not (yet) serving answers itself: true
 * when req was answered. The leader answers /healthz here too. */
bool ctl_ha_route(ctl_ha *h, cr_http_req *req);
/* Prometheus lines: corral_controller_leader 0/1 and the lease's age. */
void ctl_ha_metrics(ctl_ha *h, cr_buf *b);
/* Stop the threads; a leader revokes its lease so a standby takes over at
 * once. NULL-safe. */
void ctl_ha_free(ctl_ha *h);

#endif
