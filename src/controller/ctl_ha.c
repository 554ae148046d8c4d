/*
 * ctl_ha.c - leader election on an etcd lease, and what a controller that
 * is not serving answers (ctl_ha.h has the design and the safety argument).
 */
#include "ctl_ha.h"

#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"
#include "cr_etcd.h"
#include "cr_log.h"
#include "cr_store.h"
#include "cr_time.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The watchdog looks this often at the time since the last renewal. */
#define WATCHDOG_MS 50
/* A leader retries a failed keepalive after this long (the watchdog bounds
 * how long it may go on failing). */
#define RETRY_MS 200

struct ctl_ha {
    cr_etcd *etcd;
    char *key;                       /* <prefix>leader */
    char *advertise;                 /* our URL */
    int64_t ttl_ns;                  /* lease TTL */
    int64_t margin_ns;               /* stop this long before the lease could expire */
    int64_t poll_ns;                 /* followers read the key this often */
    pthread_t thr, wd;               /* election and watchdog threads */
    bool started;                    /* both threads run */
    atomic_bool stop;                /* ask the threads to end */
    atomic_int role;                 /* ctl_ha_role */
    atomic_llong renewed;            /* monotonic ns: send time of the last accepted renewal */
    int64_t lease;                   /* our lease while elected (election thread; then read-only) */
    atomic_llong create_rev;         /* the leader key's create_revision we made; 0 none */
    cr_store *store;                 /* the fenced store this leader writes; NULL (under mu) */
    pthread_mutex_t mu;              /* leaf: guards leader, and the cv */
    pthread_cond_t cv;               /* signalled on election and stop */
    char leader[CTL_HA_URL_MAX + 1]; /* the leader's URL as last read; "" unknown */
};

bool ctl_ha_url_ok(const char *url)
{
    size_t n = strlen(url);
    const char *h = NULL;
    if (strncmp(url, "http://", 7) == 0) {
        h = url + 7;
    } else if (strncmp(url, "https://", 8) == 0) {
        h = url + 8;
    }
    if (!h || !*h || n > CTL_HA_URL_MAX || strpbrk(url, ", \t\r\n\"@?#")) {
        return false;
    }
    const char *slash = strchr(h, '/');
    return !slash || slash[1] == '\0';
}

int ctl_ha_new(const ctl_ha_opts *o, ctl_ha **out)
{
    if (!o->endpoints || !o->prefix || !o->advertise || !ctl_ha_url_ok(o->advertise) ||
        o->ttl_s < CTL_HA_TTL_MIN_S || o->ttl_s > CTL_HA_TTL_MAX_S) {
        return CR_EINVAL;
    }
    /* A request must end well within a renewal period, or one slow etcd
     * member could hold the leader past its margin; the watchdog still
     * bounds it. */
    int64_t third_ms = o->ttl_s * 1000 / 3;
    cr_etcd_opts eo = {.connect_timeout_ms = third_ms < 1000 ? third_ms / 2 : 500,
                       .request_timeout_ms = third_ms,
                       .sec = o->sec};
    cr_etcd *e = NULL;
    int rc = cr_etcd_new(o->endpoints, &eo, &e);
    if (rc != 0) {
        return rc;
    }
    ctl_ha *h = cr_calloc(1, sizeof *h);
    h->etcd = e;
    h->key = cr_asprintf("%sleader", o->prefix);
    h->advertise = cr_strdup(o->advertise);
    size_t n = strlen(h->advertise);
    if (n > 0 && h->advertise[n - 1] == '/') {
        h->advertise[n - 1] = '\0';
    }
    h->ttl_ns = o->ttl_s * CR_NS_PER_SEC;
    h->margin_ns = h->ttl_ns / 5 > CR_NS_PER_SEC / 2 ? h->ttl_ns / 5 : CR_NS_PER_SEC / 2;
    h->poll_ns = h->ttl_ns / 4 < CR_NS_PER_SEC ? h->ttl_ns / 4 : CR_NS_PER_SEC;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    *out = h;
    return 0;
}

static _Noreturn void depose(ctl_ha *h, const char *why)
{
    cr_error("ha: giving up the leadership (%s): exiting with status %d so that no write or "
             "scheduling decision of this process can follow another controller's; the service "
             "manager restarts it as a follower",
             why, CTL_HA_EXIT_DEPOSED);
    (void)h;
    _exit(CTL_HA_EXIT_DEPOSED);
}

static void set_leader(ctl_ha *h, const char *url, size_t len)
{
    pthread_mutex_lock(&h->mu);
    if (len > CTL_HA_URL_MAX) {
        len = 0; /* not a URL we wrote: treat as unknown */
    }
    memcpy(h->leader, url, len);
    h->leader[len] = '\0';
    if (!ctl_ha_url_ok(h->leader)) {
        h->leader[0] = '\0'; /* not a URL a controller advertised */
    }
    pthread_mutex_unlock(&h->mu);
}

/* Sleep up to ns, ending early when asked to stop. */
static void nap(ctl_ha *h, int64_t ns)
{
    int64_t end = cr_mono_ns() + ns;
    while (!atomic_load(&h->stop)) {
        int64_t left = end - cr_mono_ns();
        if (left <= 0) {
            return;
        }
        usleep((useconds_t)(left > 50 * CR_NS_PER_MS ? 50000 : left / 1000 + 1));
    }
}

/* Put-if-absent of our URL on a fresh lease. */
static void campaign(ctl_ha *h)
{
    int64_t lease = 0, granted = 0;
    int64_t sent = cr_mono_ns();
    int rc = cr_etcd_lease_grant(h->etcd, h->ttl_ns / CR_NS_PER_SEC, &lease, &granted);
    if (rc != 0) {
        cr_warn("ha: cannot get a lease from etcd (%s): %s", cr_etcd_endpoint(h->etcd),
                cr_etcd_last_error());
        return;
    }
    cr_etcd_cmp cmp = {.target = CR_ETCD_CREATE, .result = CR_ETCD_EQUAL, .key = h->key};
    cr_etcd_op put = {.kind = CR_ETCD_OP_PUT,
                      .key = h->key,
                      .value = h->advertise,
                      .value_len = strlen(h->advertise),
                      .lease = lease};
    cr_etcd_op get = {.kind = CR_ETCD_OP_GET, .key = h->key};
    cr_etcd_txn_result tr;
    memset(&tr, 0, sizeof tr);
    rc = cr_etcd_txn(h->etcd, &cmp, 1, &put, 1, &get, 1, &tr);
    if (rc == 0 && tr.succeeded) {
        h->lease = lease;
        atomic_store(&h->renewed, sent);
        atomic_store(&h->create_rev, tr.revision);
        set_leader(h, h->advertise, strlen(h->advertise));
        pthread_mutex_lock(&h->mu);
        atomic_store(&h->role, CTL_HA_STARTING);
        pthread_cond_broadcast(&h->cv);
        pthread_mutex_unlock(&h->mu);
        cr_info("ha: elected leader (key %s, create revision %lld, lease %llx, TTL %llds)", h->key,
                (long long)tr.revision, (unsigned long long)lease,
                (long long)(h->ttl_ns / CR_NS_PER_SEC));
    } else {
        if (rc == 0 && tr.nranges == 1 && tr.ranges[0].n == 1) {
            set_leader(h, tr.ranges[0].kvs[0].value, tr.ranges[0].kvs[0].value_len);
        } else if (rc != 0) {
            cr_warn("ha: campaign failed (%s): %s", cr_etcd_endpoint(h->etcd),
                    cr_etcd_last_error());
        }
        cr_etcd_lease_revoke(h->etcd, lease); /* best effort: it would expire anyway */
    }
    cr_etcd_txn_result_fini(&tr);
}

/* Follower: read the key; campaign when it is gone. A key naming our own
 * URL is a previous run of this controller (we hold its address now, so it
 * is dead): remove it rather than wait for its lease to expire. */
static void follow(ctl_ha *h)
{
    cr_etcd_range_req q = {.key = h->key};
    cr_etcd_range_result r;
    memset(&r, 0, sizeof r);
    int rc = cr_etcd_range(h->etcd, &q, &r, NULL);
    if (rc != 0) {
        cr_warn("ha: cannot read %s from etcd (%s): %s", h->key, cr_etcd_endpoint(h->etcd),
                cr_etcd_last_error());
    } else if (r.n == 0) {
        campaign(h);
    } else if (r.kvs[0].value_len == strlen(h->advertise) &&
               memcmp(r.kvs[0].value, h->advertise, r.kvs[0].value_len) == 0) {
        cr_etcd_cmp cmp = {.target = CR_ETCD_CREATE,
                           .result = CR_ETCD_EQUAL,
                           .key = h->key,
                           .number = r.kvs[0].create_revision};
        cr_etcd_op del = {.kind = CR_ETCD_OP_DELETE, .key = h->key};
        cr_etcd_txn_result tr;
        memset(&tr, 0, sizeof tr);
        if (cr_etcd_txn(h->etcd, &cmp, 1, &del, 1, NULL, 0, &tr) == 0 && tr.succeeded) {
            cr_info("ha: removed the leader key of a previous run at this URL (%s)", h->advertise);
            campaign(h);
        }
        cr_etcd_txn_result_fini(&tr);
    } else {
        set_leader(h, r.kvs[0].value, r.kvs[0].value_len);
    }
    cr_etcd_range_result_fini(&r);
}

/* Leader: renew the lease; check the key is still the one we created. */
static void renew(ctl_ha *h)
{
    int64_t sent = cr_mono_ns();
    int64_t left = 0;
    int rc = cr_etcd_lease_keepalive(h->etcd, h->lease, &left);
    if (rc == CR_ENOENT || (rc == 0 && left <= 0)) {
        depose(h, "etcd says the lease expired");
    }
    if (rc != 0) {
        cr_warn("ha: lease renewal failed (%s): %s", cr_etcd_endpoint(h->etcd),
                cr_etcd_last_error());
        return;
    }
    cr_etcd_range_req q = {.key = h->key};
    cr_etcd_range_result r;
    memset(&r, 0, sizeof r);
    rc = cr_etcd_range(h->etcd, &q, &r, NULL);
    if (rc == 0 && (r.n == 0 || r.kvs[0].create_revision != atomic_load(&h->create_rev))) {
        depose(h, "the leader key is no longer ours");
    }
    cr_etcd_range_result_fini(&r);
    if (rc == 0) {
        atomic_store(&h->renewed, sent);
    }
}

static void *election_main(void *arg)
{
    ctl_ha *h = arg;
    int64_t period = h->ttl_ns / 3;
    while (!atomic_load(&h->stop)) {
        if (atomic_load(&h->role) == CTL_HA_FOLLOWER) {
            follow(h);
            if (atomic_load(&h->role) == CTL_HA_FOLLOWER) {
                nap(h, h->poll_ns);
            }
            continue;
        }
        int64_t next = atomic_load(&h->renewed) + period;
        int64_t now = cr_mono_ns();
        if (next > now) {
            nap(h, next - now);
            continue;
        }
        int64_t before = atomic_load(&h->renewed);
        renew(h);
        if (atomic_load(&h->renewed) == before) {
            nap(h, RETRY_MS * CR_NS_PER_MS);
        }
    }
    return NULL;
}

static void *watchdog_main(void *arg)
{
    ctl_ha *h = arg;
    while (!atomic_load(&h->stop)) {
        pthread_mutex_lock(&h->mu);
        bool fenced = h->store && cr_store_fenced(h->store);
        pthread_mutex_unlock(&h->mu);
        if (fenced) {
            depose(h, "a store write failed its fence: another controller holds the leader key");
        }
        if (atomic_load(&h->role) != CTL_HA_FOLLOWER &&
            cr_mono_ns() - atomic_load(&h->renewed) > h->ttl_ns - h->margin_ns) {
            depose(h, "no lease renewal within the TTL less the safety margin");
        }
        usleep(WATCHDOG_MS * 1000);
    }
    return NULL;
}

int ctl_ha_start(ctl_ha *h)
{
    if (pthread_create(&h->thr, NULL, election_main, h) != 0) {
        return CR_EIO;
    }
    if (pthread_create(&h->wd, NULL, watchdog_main, h) != 0) {
        atomic_store(&h->stop, true);
        pthread_join(h->thr, NULL);
        return CR_EIO;
    }
    h->started = true;
    cr_info("ha: standing for election as %s (key %s, TTL %llds)", h->advertise, h->key,
            (long long)(h->ttl_ns / CR_NS_PER_SEC));
    return 0;
}

int ctl_ha_wait_elected(ctl_ha *h, const sigset_t *sigs, int *sig)
{
    for (;;) {
        if (atomic_load(&h->role) != CTL_HA_FOLLOWER) {
            return 0;
        }
        struct timespec ts = {0, 100 * 1000 * 1000};
        int s = sigtimedwait(sigs, NULL, &ts);
        if (s > 0) {
            *sig = s;
            return CR_EAGAIN;
        }
    }
}

void ctl_ha_set_store(ctl_ha *h, cr_store *store)
{
    pthread_mutex_lock(&h->mu);
    h->store = store;
    pthread_mutex_unlock(&h->mu);
}

void ctl_ha_set_ready(ctl_ha *h)
{
    atomic_store(&h->role, CTL_HA_LEADER);
    cr_info("ha: leader %s serving", h->advertise);
}

ctl_ha_role ctl_ha_get_role(const ctl_ha *h)
{
    return (ctl_ha_role)atomic_load(&((ctl_ha *)h)->role);
}

const char *ctl_ha_key(const ctl_ha *h)
{
    return h->key;
}

int64_t ctl_ha_fence(const ctl_ha *h)
{
    return atomic_load(&((ctl_ha *)h)->create_rev);
}

/* The request path, decoded by the server, escaped again for a Location:
 * '/', letters, digits and "-._~" stay, every other byte is %XX (no CR or
 * LF can reach the header). Returned new. */
static char *escape_path(const char *path)
{
    static const char hex[] = "0123456789ABCDEF";
    cr_buf b;
    cr_buf_init(&b);
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '/' || *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            cr_buf_putc(&b, (char)*p);
        } else {
            cr_buf_putc(&b, '%');
            cr_buf_putc(&b, hex[*p >> 4]);
            cr_buf_putc(&b, hex[*p & 15]);
        }
    }
    return cr_buf_take(&b);
}

static const char *role_name(int role)
{
    return role == CTL_HA_LEADER ? "leader" : role == CTL_HA_STARTING ? "starting" : "follower";
}

bool ctl_ha_route(ctl_ha *h, cr_http_req *req)
{
    const char *path = cr_http_path(req);
    const char *m = cr_http_method(req);
    int role = atomic_load(&h->role);
    char leader[CTL_HA_URL_MAX + 1];
    pthread_mutex_lock(&h->mu);
    memcpy(leader, h->leader, sizeof leader);
    pthread_mutex_unlock(&h->mu);
    if (strcmp(path, "/healthz") == 0) {
        cr_http_set_route(req, "/healthz");
        json_t *v = json_pack("{s:b,s:s,s:s,s:s}", "ok", 1, "role", role_name(role), "self",
                              h->advertise, "leader", leader);
        ctl_reply_json(req, 200, v);
        return true;
    }
    if (role == CTL_HA_LEADER) {
        /* A leader that was stalled (stopped, swapped out) past its margin
         * must not answer before the watchdog notices. */
        if (cr_mono_ns() - atomic_load(&h->renewed) > h->ttl_ns - h->margin_ns) {
            depose(h, "no lease renewal within the TTL less the safety margin");
        }
        return false;
    }
    if (strcmp(path, "/metrics") == 0 && strcmp(m, "GET") == 0) {
        cr_http_set_route(req, "/metrics");
        cr_buf b;
        cr_buf_init(&b);
        ctl_ha_metrics(h, &b);
        size_t len = b.len;
        cr_http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", cr_buf_take(&b), len);
        return true;
    }
    if (strcmp(path, "/v1/health") == 0 || strcmp(path, "/v1/version") == 0) {
        return false; /* answered without state */
    }
    cr_http_set_route(req, "redirect");
    if (role == CTL_HA_FOLLOWER && *leader && strcmp(leader, h->advertise) != 0) {
        char *q = cr_http_query_string(req);
        char *ep = escape_path(path);
        char *loc = cr_asprintf("%s%s%s", leader, ep, q);
        free(ep);
        cr_http_add_header(req, "Location", loc);
        ctl_reply_err(req, 307, CR_EUNAVAIL, NULL, "not the leader: the leader is %s", leader);
        free(loc);
        free(q);
        return true;
    }
    cr_http_add_header(req, "Retry-After", "1");
    ctl_reply_err(req, 503, CR_EUNAVAIL, NULL,
                  role == CTL_HA_STARTING ? "elected leader, loading the state: retry shortly"
                                          : "no leader elected yet: retry shortly");
    return true;
}

void ctl_ha_metrics(ctl_ha *h, cr_buf *b)
{
    int role = atomic_load(&h->role);
    cr_buf_printf(b,
                  "# HELP corral_controller_leader 1 on the controller that leads (schedules and "
                  "answers writes), 0 on a standby.\n"
                  "# TYPE corral_controller_leader gauge\n"
                  "corral_controller_leader %d\n",
                  role == CTL_HA_LEADER ? 1 : 0);
    if (role != CTL_HA_FOLLOWER) {
        double age = (double)(cr_mono_ns() - atomic_load(&h->renewed)) / 1e9;
        cr_buf_printf(b,
                      "# HELP corral_controller_lease_age_seconds Time since the last lease "
                      "renewal this leader sent and etcd accepted.\n"
                      "# TYPE corral_controller_lease_age_seconds gauge\n"
                      "corral_controller_lease_age_seconds %.3f\n",
                      age);
    }
}

void ctl_ha_free(ctl_ha *h)
{
    if (!h) {
        return;
    }
    if (h->started) {
        atomic_store(&h->stop, true);
        pthread_join(h->thr, NULL);
        pthread_join(h->wd, NULL);
    }
    if (atomic_load(&h->role) != CTL_HA_FOLLOWER && h->lease) {
        if (cr_etcd_lease_revoke(h->etcd, h->lease) == 0) {
            cr_info("ha: lease revoked: a standby takes over now");
        }
    }
    cr_etcd_free(h->etcd);
    free(h->key);
    free(h->advertise);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h);
}
