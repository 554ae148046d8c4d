/*
 * ctl_pools_power.c - power saving of static pools (issue 31;
 * docs/pools.md "Power saving"): idle members suspended and resumed for
 * demand through the pool's power provider, the exec protocol of the
 * elastic pools (version 1) with the ops "suspend" and "resume".
 *
 * A member goes ON -> DRAINING (idle suspend_s with no demand it could
 * take: drained, so the scheduler places nothing more) -> SUSPENDING (the
 * scheduler took the drain: the provider's suspend runs) -> SUSPENDED (its
 * agent stops; the node is lost and kept drained) -> RESUMING (a pending
 * job that no node in service can take fits it: the provider's resume
 * runs) -> ON (its agent was heard after the resume: undrained). A job
 * placed on it, or demand, while it drains keeps it ON. A failed suspend
 * leaves it ON and idle from now; a failed resume, or one whose agent is
 * not heard within resume_timeout_s, leaves it SUSPENDED, and power calls
 * back off (the pool's backoff_s, doubling, at most BACKOFF_MAX_S). While a member is
 * suspended the elastic pools count it as capacity (ctl_pools.c
 * node_can_take): a job it fits resumes it rather than booting a cloud
 * node.
 *
 * An admin's drain is left alone: a drained member is never suspended.
 */
#include "ctl_pools.h"

#include "ctl_int.h"
#include "ctl_pools_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define POWER_BUDGET_MAX_W 100000000 /* 100 MW */

static const char *const sn_names[] = {"on", "draining", "suspending", "suspended", "resuming"};

int ctl__pools_power_parse(const json_t *o, const char *path, pool *p, cr_json_err *err)
{
    const char *prog = "";
    int rc;
    p->resume_timeout_s = 600;
    if ((rc = cr_json_str(o, path, "power_provider", false, 1000, &prog, err)) ||
        (rc = cr_json_int(o, path, "suspend_s", false, 0, 86400 * 30, &p->suspend_s, err)) ||
        (rc = cr_json_int(o, path, "resume_timeout_s", false, 1, 86400, &p->resume_timeout_s,
                          err)) ||
        (rc = cr_json_int(o, path, "power_budget_w", false, 1, POWER_BUDGET_MAX_W,
                          &p->power_budget_w, err))) {
        return rc;
    }
    char f[300];
    const char *prov = json_string_value(json_object_get(o, "provider"));
    if (*prog && prov && *prov) {
        snprintf(f, sizeof f, "%s.power_provider", path);
        return cr_json_fail(err, CR_EINVAL, f,
                            "field '%s': power saving is for static pools (no provider); an "
                            "elastic pool deletes its idle nodes",
                            f);
    }
    if (p->suspend_s > 0 && !*prog) {
        snprintf(f, sizeof f, "%s.power_provider", path);
        return cr_json_fail(err, CR_EINVAL, f,
                            "field '%s': suspend_s needs a power provider to suspend through", f);
    }
    if (*prog && p->suspend_s == 0) {
        snprintf(f, sizeof f, "%s.suspend_s", path);
        return cr_json_fail(err, CR_EINVAL, f,
                            "field '%s': a power provider needs the idle time before a suspend "
                            "(1..2592000)",
                            f);
    }
    snprintf(p->power, sizeof p->power, "%s", prog);
    return 0;
}

static snode *sn_find(pool *p, const char *name)
{
    for (size_t i = 0; i < p->nsn; i++) {
        if (strcmp(p->sn[i].name, name) == 0) {
            return &p->sn[i];
        }
    }
    return NULL;
}

/* The node's GPUs of the job's type, whatever their state (a suspended
 * node's inventory is its last one). */
static size_t gpus_of(const ctl_node *n, const char *type)
{
    size_t k = 0;
    for (size_t i = 0; i < n->ngpus; i++) {
        k += !*type || strcasecmp(n->gpus[i].model, type) == 0;
    }
    return k;
}

/* Could n take one piece of j, were it on and free? */
static bool fits(ctl *c, const ctl_job *j, const ctl_node *n)
{
    return gpus_of(n, j->gpu_type) >= (size_t)ctl__pools_job_per_node(j) &&
           ctl_batch_node_allowed(c, j, n);
}

bool ctl__pools_power_could_take(ctl *c, const ctl_job *j)
{
    const struct ctl_pools *ps = c->pools;
    int have = 0;
    for (size_t i = 0; ps && i < ps->n; i++) {
        const pool *p = &ps->p[i];
        for (size_t k = 0; k < p->nsn; k++) {
            const snode *x = &p->sn[k];
            const ctl_node *n = x->state != SN_ON ? ctl_node_find(c, x->name) : NULL;
            have += n && !n->deleting && fits(c, j, n);
        }
    }
    return have >= ctl__pools_job_pieces(j);
}

static int64_t backoff_s(int64_t base, int n)
{
    int64_t s = base;
    for (int i = 1; i < n && s < BACKOFF_MAX_S; i++) {
        s *= 2;
    }
    return s < BACKOFF_MAX_S ? s : BACKOFF_MAX_S;
}

static void power_failed(pool *p, int64_t now, const char *fmt, const char *node, const char *msg)
{
    p->power_failures++;
    p->power_backoff_until_mono =
        now + backoff_s(p->backoff_base_s, p->power_failures) * CR_NS_PER_SEC;
    snprintf(p->power_error, sizeof p->power_error, "%s: %.200s", node, msg);
    ctl__pools_event(p, node, fmt, "%s; %d failed in a row, next power call in %llds", msg,
                     p->power_failures, (long long)backoff_s(p->backoff_base_s, p->power_failures));
}

/* Whether a pending job could go to n (it is demand for it). */
static bool wanted(ctl *c, const pool *p, const ctl_node *n, int64_t now_wall)
{
    size_t slot = ctl_first_active_slot(c);
    for (ctl_job *j; (j = ctl_job_next(c, &slot));) {
        if (ctl__pools_job_pending(p, j, now_wall) && fits(c, j, n)) {
            return true;
        }
    }
    return false;
}

#define PW_MAX 16           /* suspends or resumes a pass */
#define SN_MAX (PW_MAX * 4) /* members of a pool under power saving */

typedef struct pwork_power {
    size_t nsus, nres;
    char sus[PW_MAX][CTL_NAME_MAX];
    char res[PW_MAX][CTL_NAME_MAX];
    pcall rsus, rres;
} pwork_power;

/* Resumes for the demand that no node in service can take. mu held. */
static void plan_resumes(ctl *c, pool *p, pwork_power *w, int64_t now, int64_t now_wall)
{
    /* the GPUs each resuming or suspended member offers this pass */
    int64_t room[SN_MAX];
    size_t nroom = p->nsn < SN_MAX ? p->nsn : SN_MAX;
    for (size_t k = 0; k < nroom; k++) {
        room[k] = -1; /* not counted yet */
    }
    size_t slot = ctl_first_active_slot(c);
    for (ctl_job *j; (j = ctl_job_next(c, &slot));) {
        if (!ctl__pools_job_pending(p, j, now_wall)) {
            continue;
        }
        /* can the nodes in service take it? the scheduler will */
        int up = 0, pieces = ctl__pools_job_pieces(j), per = ctl__pools_job_per_node(j);
        for (size_t i = 0; i < c->nnodes && up < pieces; i++) {
            const ctl_node *n = c->nodes[i];
            size_t free_n = 0;
            for (size_t g = 0; g < n->ngpus; g++) {
                free_n += n->gpus[g].alloc_job == 0 && strcmp(n->gpus[g].health, "ok") == 0 &&
                          strcasecmp(n->gpus[g].model, j->gpu_type) == 0;
            }
            up += n->state == NS_UP && !n->drained && !n->deleting && free_n >= (size_t)per &&
                  ctl_batch_node_allowed(c, j, n);
        }
        if (up >= pieces) {
            continue;
        }
        /* first fit: resuming members' room, then suspended ones woken */
        size_t used[PW_MAX], nused = 0;
        const char *via = NULL;
        for (int pass = 0; pass < 2 && nused < (size_t)pieces; pass++) {
            for (size_t k = 0; k < nroom && nused < (size_t)pieces; k++) {
                snode *x = &p->sn[k];
                ctl_node *n = ctl_node_find(c, x->name);
                bool taken = false;
                for (size_t u = 0; u < nused; u++) {
                    taken = taken || used[u] == k;
                }
                if (taken || !n || !fits(c, j, n)) {
                    continue;
                }
                if (pass == 0 && x->state == SN_RESUMING) {
                    if (room[k] < 0) {
                        room[k] = (int64_t)gpus_of(n, j->gpu_type);
                    }
                    if (room[k] >= per) {
                        used[nused++] = k;
                        via = x->name;
                    }
                } else if (pass == 1 && x->state == SN_SUSPENDED && !x->inflight &&
                           w->nres < PW_MAX && now >= p->power_backoff_until_mono) {
                    x->state = SN_RESUMING;
                    x->since_mono = now;
                    x->inflight = true;
                    room[k] = (int64_t)gpus_of(n, j->gpu_type);
                    snprintf(w->res[w->nres++], CTL_NAME_MAX, "%s", x->name);
                    ctl__pools_event(p, x->name, "resume",
                                     "job %lld (%d x %s) pending and no node in service can "
                                     "take it",
                                     (long long)j->id, j->gpus, j->gpu_type);
                    used[nused++] = k;
                    via = x->name;
                }
            }
        }
        if (nused < (size_t)pieces) {
            if (nused == 0 && now < p->power_backoff_until_mono) {
                char note[300];
                snprintf(note, sizeof note, "%s: resumes back off (%.150s); retry in %llds",
                         p->name, p->power_error,
                         (long long)((p->power_backoff_until_mono - now) / CR_NS_PER_SEC + 1));
                ctl__pools_reason_note(j, note);
            }
            continue; /* (rooms taken for a part of it are used by the next job) */
        }
        for (size_t u = 0; u < nused; u++) {
            room[used[u]] -= per;
        }
        char note[200];
        snprintf(note, sizeof note, "%s: resuming node %s (suspended to save power)", p->name,
                 via ? via : "?");
        ctl__pools_reason_note(j, note);
    }
}

/* Step 1. mu held. */
static void power_plan(ctl *c, pool *p, pwork_power *w)
{
    int64_t now = cr_mono_ns(), now_wall = cr_now_ns();
    for (size_t i = 0; i < c->nnodes; i++) {
        ctl_node *n = c->nodes[i];
        if (p->nsn < SN_MAX && !n->deleting && !sn_find(p, n->name) &&
            ctl__pools_static_member(c, p, n)) {
            CR_GROW(p->sn, p->nsn, p->capsn);
            snode *x = &p->sn[p->nsn++];
            memset(x, 0, sizeof *x);
            snprintf(x->name, sizeof x->name, "%s", n->name);
        }
    }
    for (size_t i = 0; i < p->nsn; i++) {
        snode *x = &p->sn[i];
        if (x->inflight) {
            continue;
        }
        ctl_node *n = ctl_node_find(c, x->name);
        if (!n || !ctl__pools_static_member(c, p, n)) {
            p->sn[i--] = p->sn[--p->nsn]; /* gone, or out of the pool */
            continue;
        }
        char why[200];
        switch (x->state) {
        case SN_ON:
            if (n->state != NS_UP || n->drained || ctl__pools_active_jobs(c, n) > 0) {
                x->since_mono = 0;
                break;
            }
            if (x->since_mono == 0) {
                x->since_mono = now;
            }
            if (now - x->since_mono >= p->suspend_s * CR_NS_PER_SEC &&
                now >= p->power_backoff_until_mono && !wanted(c, p, n, now_wall)) {
                snprintf(why, sizeof why, "pool %s: idle %llds, suspending to save power", p->name,
                         (long long)((now - x->since_mono) / CR_NS_PER_SEC));
                ctl__pools_drain(c, n, true, why);
                ctl__pools_event(p, x->name, "drain", "idle %llds (suspend_s %llds): suspending",
                                 (long long)((now - x->since_mono) / CR_NS_PER_SEC),
                                 (long long)p->suspend_s);
                x->state = SN_DRAINING;
                x->since_mono = now;
            }
            break;
        case SN_DRAINING:
            if (ctl__pools_active_jobs(c, n) > 0 || wanted(c, p, n, now_wall)) {
                ctl__pools_drain(c, n, false, "");
                ctl__pools_event(p, x->name, "kept", "%s while it drained: kept on",
                                 ctl__pools_active_jobs(c, n) ? "a job was placed on it"
                                                              : "demand came");
                x->state = SN_ON;
                x->since_mono = 0;
            } else if (!n->sched_dirty && w->nsus < PW_MAX) {
                x->state = SN_SUSPENDING;
                x->inflight = true;
                snprintf(w->sus[w->nsus++], CTL_NAME_MAX, "%s", x->name);
            }
            break;
        case SN_SUSPENDED:
            if (n->state == NS_LOST) {
                snprintf(n->reason, sizeof n->reason,
                         "pool %s: suspended to save power; resumes for demand", p->name);
            }
            break;
        case SN_RESUMING:
            if (n->state != NS_LOST && n->last_seen_ns > x->since_mono) {
                ctl__pools_drain(c, n, false, "");
                ctl__pools_event(p, x->name, "resumed",
                                 "its agent was heard %llds after the "
                                 "resume",
                                 (long long)((now - x->since_mono) / CR_NS_PER_SEC));
                x->state = SN_ON;
                x->since_mono = 0;
                p->power_failures = 0;
                p->resumes++;
            } else if (now - x->since_mono > p->resume_timeout_s * CR_NS_PER_SEC) {
                x->state = SN_SUSPENDED;
                x->since_mono = now;
                char msg[120];
                snprintf(msg, sizeof msg, "not heard within resume_timeout_s (%llds)",
                         (long long)p->resume_timeout_s);
                power_failed(p, now, "resume-failed", x->name, msg);
            }
            break;
        case SN_SUSPENDING:
            break;
        }
    }
    plan_resumes(c, p, w, now, now_wall);
}

static json_t *power_req(const pool *p, const char *op, char names[][CTL_NAME_MAX], size_t n)
{
    json_t *nodes = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(nodes, json_pack("{s:s}", "name", names[i]));
    }
    json_t *req =
        json_pack("{s:i,s:s,s:s,s:o}", "version", 1, "op", op, "pool", p->name, "nodes", nodes);
    if (p->pconfig) {
        json_object_set(req, "config", p->pconfig);
    }
    return req;
}

/* Step 3. mu held. */
static void power_apply(ctl *c, pool *p, pwork_power *w)
{
    int64_t now = cr_mono_ns();
    for (size_t k = 0; k < w->nsus; k++) {
        snode *x = sn_find(p, w->sus[k]);
        if (!x) {
            continue;
        }
        x->inflight = false;
        ctl_node *n = ctl_node_find(c, x->name);
        if (w->rsus.rc != 0) {
            x->state = SN_ON;
            x->since_mono = now;
            if (n) {
                ctl__pools_drain(c, n, false, "");
            }
            power_failed(p, now, "suspend-failed", x->name, w->rsus.msg);
            continue;
        }
        x->state = SN_SUSPENDED;
        x->since_mono = now;
        p->suspends++;
        ctl__pools_event(p, x->name, "suspended", "suspended through the power provider");
        if (n) {
            snprintf(n->reason, sizeof n->reason,
                     "pool %s: suspended to save power; resumes for demand", p->name);
        }
    }
    for (size_t k = 0; k < w->nres; k++) {
        snode *x = sn_find(p, w->res[k]);
        if (!x) {
            continue;
        }
        x->inflight = false;
        if (w->rres.rc != 0) {
            x->state = SN_SUSPENDED;
            x->since_mono = now;
            power_failed(p, now, "resume-failed", x->name, w->rres.msg);
            continue;
        }
        x->since_mono = now; /* its agent must be heard after this */
    }
}

void ctl__pools_power_pass(ctl *c, pool *p)
{
    if (!p->power[0]) {
        return;
    }
    pwork_power *w = cr_calloc(1, sizeof *w);
    pthread_mutex_lock(&c->mu);
    power_plan(c, p, w);
    pthread_mutex_unlock(&c->mu);
    if (w->nsus) {
        json_t *req = power_req(p, "suspend", w->sus, w->nsus);
        ctl__pools_run(p, p->power, req, &w->rsus);
        json_decref(req);
    }
    if (w->nres) {
        json_t *req = power_req(p, "resume", w->res, w->nres);
        ctl__pools_run(p, p->power, req, &w->rres);
        json_decref(req);
    }
    pthread_mutex_lock(&c->mu);
    power_apply(c, p, w);
    pthread_mutex_unlock(&c->mu);
    json_decref(w->rsus.nodes);
    json_decref(w->rres.nodes);
    free(w);
}

/* ------------------------------------------------------------------------ */
/* GPU power caps                                                           */

/* A node in service: up or drained, heard from, not being deleted. */
static bool in_service(const ctl_node *n)
{
    return n->state != NS_LOST && !n->deleting;
}

pool *ctl__pools_of(ctl *c, const ctl_node *n)
{
    struct ctl_pools *ps = c->pools;
    for (size_t i = 0; ps && i < ps->n; i++) {
        pool *p = &ps->p[i];
        for (size_t k = 0; k < p->npn; k++) {
            if (strcmp(p->pn[k].name, n->name) == 0) {
                return p;
            }
        }
    }
    for (size_t i = 0; ps && i < ps->n; i++) {
        if (ctl__pools_static_member(c, &ps->p[i], n)) {
            return &ps->p[i];
        }
    }
    return NULL;
}

void ctl__pools_caps_update(ctl *c, pool *p)
{
    if (p->power_budget_w <= 0) {
        return;
    }
    size_t gpus = 0;
    for (size_t i = 0; i < c->nnodes; i++) {
        const ctl_node *n = c->nodes[i];
        if (in_service(n) && ctl__pools_of(c, n) == p) {
            gpus += n->ngpus;
        }
    }
    /* the budget shared evenly: each GPU may draw its share, whatever
     * its load (a board under the cap runs at its own power) */
    int64_t cap = gpus ? p->power_budget_w / (int64_t)gpus : 0;
    cap = cap > CTL_POWER_CAP_MAX_W ? CTL_POWER_CAP_MAX_W : cap < 1 && gpus ? 1 : cap;
    if (cap == p->cap_w) {
        return;
    }
    ctl__pools_event(p, NULL, "power-cap",
                     "power_budget_w %lld over %zu GPU(s) in service: %lld W each",
                     (long long)p->power_budget_w, gpus, (long long)cap);
    p->cap_w = cap;
    for (size_t i = 0; i < c->nnodes; i++) {
        ctl_node *n = c->nodes[i];
        if (ctl__pools_of(c, n) == p) {
            ctl_node_bump(c, n); /* its desired state says the new cap */
        }
    }
}

int64_t ctl_pools_power_cap_w(ctl *c, const ctl_node *n)
{
    const pool *p = c->pools ? ctl__pools_of(c, n) : NULL;
    return p && p->power_budget_w > 0 ? p->cap_w : 0;
}

void ctl__pools_power_json(ctl *c, const pool *p, json_t *o)
{
    if (p->power_budget_w > 0) {
        json_object_set_new(o, "power_budget_w", json_integer(p->power_budget_w));
        json_object_set_new(o, "power_cap_w", json_integer(p->cap_w));
    }
    if (!p->power[0]) {
        return;
    }
    json_t *nodes = json_object();
    for (size_t i = 0; i < p->nsn; i++) {
        json_object_set_new(nodes, p->sn[i].name, json_string(sn_names[p->sn[i].state]));
    }
    json_t *pw = json_pack("{s:I,s:I,s:I,s:I,s:i,s:o}", "suspend_s", (json_int_t)p->suspend_s,
                           "resume_timeout_s", (json_int_t)p->resume_timeout_s, "suspends",
                           (json_int_t)p->suspends, "resumes", (json_int_t)p->resumes, "failures",
                           p->power_failures, "nodes", nodes);
    int64_t now = cr_mono_ns();
    if (now < p->power_backoff_until_mono) {
        json_object_set_new(pw, "backoff_s",
                            json_integer((p->power_backoff_until_mono - now) / CR_NS_PER_SEC + 1));
        json_object_set_new(pw, "last_error", json_string(p->power_error));
    }
    json_object_set_new(o, "power", pw);
}
