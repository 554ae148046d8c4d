/*
 * ctl_events.c - GET /v1/events: the controller's changes as server-sent
 * events (text/event-stream), so the dashboard redraws a view when what it
 * shows changed instead of asking every 2 s.
 *
 *   event: job    data: {"id":12,"state":"held"}     a job changed state,
 *                                                    started or ended
 *   event: jobs   data: {"first":40,"count":100}     a submit (an array)
 *   event: node   data: {"node":"h100-0"}             a node's desired state
 *
 * A user token gets its own tenant's job events only (another tenant's are
 * never written to its stream) and every node's (the cluster map shows all
 * nodes to every token); an admin gets all; other roles are refused. A
 * comment line every CTL_EVENTS_PING_S keeps the connection alive and finds
 * a client that went away. Bounds: CTL_EVENTS_MAX streams at once (503
 * past it), CTL_EVENTS_UNSENT bytes unsent per stream (a client that does
 * not read is dropped), CTL_EVENTS_LIFE_S per stream (then it ends; the
 * page connects again, "retry: 3000"). A stream ends when its token is
 * revoked (at once), expires, or its tenant is deleted (at the next ping).
 *
 * Locks: e->mu after c->mu (the hooks run under c->mu), then the streams'
 * own (cr_http.c).
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_time.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef struct sub {
    cr_http_stream *st;
    bool admin;
    char tenant[CTL_NAME_MAX];
    int64_t token_id;             /* the token's (ctl_events_revoke) */
    int64_t expires_ns;           /* the token's expiry, wall clock; 0 none */
    int64_t opened_ns, pinged_ns; /* monotonic */
} sub;

struct ctl_events {
    pthread_mutex_t mu;
    sub s[CTL_EVENTS_MAX];
    size_t n;
    uint64_t id; /* the last event's id */
};

ctl_events *ctl_events_new(void)
{
    ctl_events *e = cr_calloc(1, sizeof *e);
    pthread_mutex_init(&e->mu, NULL);
    return e;
}

/* Drop stream i (e->mu held): closed, released, the last one moved in. */
static void drop(ctl_events *e, size_t i)
{
    cr_http_stream_close(e->s[i].st);
    cr_http_stream_release(e->s[i].st);
    e->s[i] = e->s[--e->n];
}

void ctl_events_stop(ctl_events *e)
{
    if (!e) {
        return;
    }
    pthread_mutex_lock(&e->mu);
    while (e->n) {
        drop(e, e->n - 1);
    }
    pthread_mutex_unlock(&e->mu);
}

void ctl_events_free(ctl_events *e)
{
    if (!e) {
        return;
    }
    ctl_events_stop(e);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

/* Write an event to the streams that may see it: tenant NULL every
 * stream, else admins' and that tenant's users'. e->mu held. */
static void send_locked(ctl_events *e, const char *tenant, const char *kind, const char *data)
{
    if (!e->n) {
        return;
    }
    char msg[512];
    int len = snprintf(msg, sizeof msg, "id: %llu\nevent: %s\ndata: %s\n\n",
                       (unsigned long long)++e->id, kind, data);
    if (len <= 0 || (size_t)len >= sizeof msg) {
        return;
    }
    for (size_t i = e->n; i-- > 0;) {
        if (tenant && !e->s[i].admin && strcmp(e->s[i].tenant, tenant) != 0) {
            continue;
        }
        if (!cr_http_stream_write(e->s[i].st, msg, (size_t)len)) {
            drop(e, i);
        }
    }
}

void ctl_events_job(ctl *c, ctl_job *j)
{
    ctl_events *e = c->events;
    if (!e) {
        return;
    }
    char data[96];
    snprintf(data, sizeof data, "{\"id\":%lld,\"state\":\"%s\"}", (long long)j->id,
             ctl_job_state_names[ctl_job_shown_state(j)]);
    pthread_mutex_lock(&e->mu);
    send_locked(e, j->tenant, "job", data);
    pthread_mutex_unlock(&e->mu);
}

void ctl_events_jobs(ctl *c, const char *tenant, int64_t first, size_t count)
{
    ctl_events *e = c->events;
    if (!e || !count) {
        return;
    }
    char data[96];
    snprintf(data, sizeof data, "{\"first\":%lld,\"count\":%zu}", (long long)first, count);
    pthread_mutex_lock(&e->mu);
    send_locked(e, tenant, "jobs", data);
    pthread_mutex_unlock(&e->mu);
}

void ctl_events_node(ctl *c, ctl_node *n)
{
    ctl_events *e = c->events;
    if (!e) {
        return;
    }
    json_t *js = json_string(n->name);
    char *q = json_dumps(js, JSON_ENCODE_ANY);
    json_decref(js);
    char data[160];
    snprintf(data, sizeof data, "{\"node\":%s}", q ? q : "\"\"");
    free(q);
    pthread_mutex_lock(&e->mu);
    send_locked(e, NULL, "node", data);
    pthread_mutex_unlock(&e->mu);
}

void ctl_events_revoke(ctl *c, int64_t token_id)
{
    ctl_events *e = c->events;
    if (!e) {
        return;
    }
    pthread_mutex_lock(&e->mu);
    for (size_t i = e->n; i-- > 0;) {
        if (e->s[i].token_id == token_id) {
            drop(e, i);
        }
    }
    pthread_mutex_unlock(&e->mu);
}

void ctl_events_tick(ctl *c, int64_t now_mono)
{
    ctl_events *e = c->events;
    if (!e) {
        return;
    }
    pthread_mutex_lock(&e->mu);
    size_t n = e->n;
    pthread_mutex_unlock(&e->mu);
    if (!n) {
        return;
    }
    int64_t wall = cr_now_ns();
    pthread_mutex_lock(&c->mu); /* the tenants, at a ping */
    pthread_mutex_lock(&e->mu);
    for (size_t i = e->n; i-- > 0;) {
        sub *s = &e->s[i];
        if (now_mono - s->opened_ns >= CTL_EVENTS_LIFE_S * CR_NS_PER_SEC ||
            (s->expires_ns && wall >= s->expires_ns)) {
            drop(e, i); /* the page connects again (or logs in again) */
        } else if (now_mono - s->pinged_ns >= CTL_EVENTS_PING_S * CR_NS_PER_SEC) {
            s->pinged_ns = now_mono;
            if ((!s->admin && !ctl_tenant_find(c, s->tenant)) ||
                !cr_http_stream_write(s->st, ": ping\n\n", 8)) {
                drop(e, i);
            }
        }
    }
    pthread_mutex_unlock(&e->mu);
    pthread_mutex_unlock(&c->mu);
}

size_t ctl_events_count(ctl *c)
{
    ctl_events *e = c->events;
    if (!e) {
        return 0;
    }
    pthread_mutex_lock(&e->mu);
    size_t n = e->n;
    pthread_mutex_unlock(&e->mu);
    return n;
}

void ctl_route_events(ctl *c, cr_http_req *req, const cr_principal *p)
{
    cr_http_set_route(req, "/v1/events");
    if (strcmp(cr_http_method(req), "GET") != 0) {
        ctl_reply_err(req, 405, CR_EINVAL, NULL, "GET only");
        return;
    }
    if (p->role != CR_ROLE_ADMIN && p->role != CR_ROLE_USER) {
        ctl_reply_err(req, 403, CR_EPERM, NULL, "events are for admin and user tokens");
        return;
    }
    static const char *const params[] = {NULL};
    const char *unknown = cr_http_query_unknown(req, params);
    if (unknown) {
        ctl_reply_err(req, 400, CR_EINVAL, unknown, "query '%s': unknown (none taken)", unknown);
        return;
    }
    ctl_events *e = c->events;
    pthread_mutex_lock(&e->mu);
    if (e->n == CTL_EVENTS_MAX) {
        pthread_mutex_unlock(&e->mu);
        ctl_reply_err(req, 503, CR_EUNAVAIL, NULL,
                      "%d event streams are open, the most the controller keeps; poll instead",
                      CTL_EVENTS_MAX);
        return;
    }
    cr_http_add_header(req, "Cache-Control", "no-store");
    cr_http_add_header(req, "X-Accel-Buffering", "no");
    cr_http_stream *st = cr_http_respond_stream(req, 200, "text/event-stream", CTL_EVENTS_UNSENT);
    if (!st) {
        pthread_mutex_unlock(&e->mu);
        return;
    }
    sub *s = &e->s[e->n++];
    memset(s, 0, sizeof *s);
    s->st = st;
    s->admin = p->role == CR_ROLE_ADMIN;
    s->token_id = p->id;
    s->expires_ns = p->expires_ns;
    snprintf(s->tenant, sizeof s->tenant, "%s", p->tenant);
    s->opened_ns = s->pinged_ns = cr_mono_ns();
    static const char hello[] = "retry: 3000\n: corral events\n\n";
    cr_http_stream_write(st, hello, sizeof hello - 1);
    pthread_mutex_unlock(&e->mu);
}
