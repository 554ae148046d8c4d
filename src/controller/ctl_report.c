/*
 * ctl_report.c - the job ends an agent reports (POST /v1/agents/{node}/status,
 * ctl_nodes.c), commit first, and the fence list of its answer.
 *
 * Each end is computed on a copy of the job (ctl_job_end_prepare), the
 * report's rows are committed, and only then are the ends applied to
 * memory and the agent answered. A report that could not be stored (507
 * disk full, 500) leaves every job as it was, running: the agent keeps the
 * exits and reports them again until the desired state drops the jobs, so
 * its retry records them. While an end is stored the job is `committing`
 * (a user's change to it answers 409; a second report of it is taken in by
 * a later report) and `ending`: a loss of its node, its node's deletion, a
 * preemption or a GPU gone leaves it alone (ctl_job_end_held), since its
 * end is already decided; such a stop is done only if the end is refused.
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether the agent's process for job id (run: the run it says it runs; 0 =
 * not said) is one the controller still has on node n. An agent must kill
 * (fence) every other one at once: its job was requeued and may already run
 * elsewhere. mu held. */
static bool job_is_own(ctl *c, const ctl_node *n, int64_t id, int64_t run)
{
    ctl_job *j = ctl_job_get(c, id);
    if (!j || (j->state != JS_RUNNING && j->state != JS_COMPLETING) || j->start_unstored) {
        return false; /* (a start not yet stored: no agent was given this run) */
    }
    bool here = false;
    for (size_t k = 0; k < j->nplace; k++) {
        here |= strcmp(j->place[k].node, n->name) == 0;
    }
    return here && (run <= 0 || run == j->runs);
}

/* (ctl_int.h) */
void ctl_job_gone_why(ctl *c, int64_t id, char *why, size_t len)
{
    ctl_job *j = ctl_job_get(c, id);
    if (!j) {
        snprintf(why, len, "the job is no longer known to the controller");
    } else if (ctl_job_terminal(j)) {
        snprintf(why, len, "the job has ended (%s)%s%s", ctl_job_state_names[j->state],
                 j->reason && *j->reason ? ": " : "", j->reason ? j->reason : "");
    } else if (j->susp_run > 0) {
        /* time-sharing: the round took its GPUs (its checkpoint signal is
         * sent; docs/api.md "Suspend and resume") */
        snprintf(why, len, "suspended: %s", j->reason && *j->reason ? j->reason : "by a round");
    } else if (j->state == JS_RUNNING || j->state == JS_COMPLETING) {
        snprintf(why, len, "the controller placed it elsewhere while this node was away");
    } else {
        snprintf(why, len, "the controller requeued it (%s) while this node was away",
                 ctl_job_state_names[j->state]);
    }
}

/* The ids of the reported running jobs (items {"job","run",...} of arr,
 * those whose "state" is absent or "running") that are not n's own: a new
 * JSON array for the answer's "fence", and in *whys a new object, id
 * (text) -> why, for its "fence_reasons". mu held. */
json_t *ctl_fence_list(ctl *c, const ctl_node *n, const json_t *arr, json_t **whys)
{
    json_t *fence = json_array();
    *whys = json_object();
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *r = json_array_get(arr, i);
        const char *st = json_string_value(json_object_get(r, "state"));
        if (st && strcmp(st, "running") != 0) {
            continue;
        }
        int64_t id = (int64_t)json_integer_value(json_object_get(r, "job"));
        int64_t run = (int64_t)json_integer_value(json_object_get(r, "run"));
        const ctl_job *sj = ctl_job_get(c, id);
        if (sj && sj->susp_run > 0 && run == sj->susp_run) {
            continue; /* a suspended run writing its checkpoint: its stop is under way */
        }
        if (!job_is_own(c, n, id, run)) {
            char why[700], key[24];
            ctl_job_gone_why(c, id, why, sizeof why);
            cr_warn("node=%s job=%lld run=%lld is no longer placed there (%s): fencing it", n->name,
                    (long long)id, (long long)run, why);
            json_array_append_new(fence, json_integer(id));
            snprintf(key, sizeof key, "%lld", (long long)id);
            json_object_set_new(*whys, key, json_string(why));
        }
    }
    return fence;
}

/* One reported end, as it was when its row was computed. */
typedef struct report_end {
    int64_t id;    /* the job */
    uint64_t ver;  /* its version when the end was computed */
    int run;       /* its run then */
    ctl_job *end;  /* owned: the ended copy (ctl_job_end_prepare); NULL once applied */
    int code, sig; /* the exit, to end it again from a newer row */
    char why[600]; /* likewise */
} report_end;

struct ctl_report {
    ctl *c;
    cr_http_req *req;
    char node[CTL_NAME_MAX];
    json_t *jobs;     /* the report's jobs (for the fence list of the answer) */
    report_end *ends; /* owned: n used, cap allocated */
    size_t n, cap;
};

static void report_add(ctl_report **rp, ctl *c, cr_store_txn *txn, ctl_job *j, int code, int sig,
                       const char *why, bool fatal, bool lease)
{
    if (!*rp) {
        *rp = cr_calloc(1, sizeof **rp);
    }
    ctl_report *r = *rp;
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 4;
        r->ends = cr_reallocarray(r->ends, r->cap, sizeof *r->ends);
    }
    report_end *e = &r->ends[r->n++];
    e->id = j->id;
    e->ver = j->ver;
    e->run = j->runs;
    e->code = code;
    e->sig = sig;
    snprintf(e->why, sizeof e->why, "%s", why);
    e->end = lease ? ctl_job_lost_prepare(c, txn, j, why)
                   : ctl_job_end_prepare(c, txn, j, code, sig, why, fatal);
    j->committing = true;
    j->ending = true; /* no loss or preemption may requeue it now (ctl_job_end_held) */
    j->end_deferred = false;
}

void ctl_report_end(ctl_report **rp, ctl *c, cr_store_txn *txn, ctl_job *j, int code, int sig,
                    const char *why, bool fatal)
{
    report_add(rp, c, txn, j, code, sig, why, fatal, false);
}

void ctl_report_lease_end(ctl_report **rp, ctl *c, cr_store_txn *txn, ctl_job *j, const char *why)
{
    report_add(rp, c, txn, j, 0, 0, why, false, true);
}

static void report_free(ctl_report *r)
{
    for (size_t i = 0; i < r->n; i++) {
        if (r->ends[i].end) {
            ctl_job_free(r->ends[i].end);
        }
    }
    json_decref(r->jobs);
    free(r->ends);
    free(r);
}

static void report_committed(void *arg, int status)
{
    ctl_report *r = arg;
    ctl *c = r->c;
    cr_store_txn *again = NULL;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < r->n; i++) {
        report_end *e = &r->ends[i];
        ctl_job *j = ctl_job_get(c, e->id);
        if (!j) {
            continue;
        }
        j->committing = false;
        j->ending = false;
        bool deferred = j->end_deferred;
        j->end_deferred = false;
        if (status != 0) {
            if (deferred) {
                /* Its node was lost or deleted, or it was preempted, while
                 * its end was stored: that end is not stored, so the stop
                 * held back is done now (requeued, no retry used). */
                if (!again) {
                    again = cr_store_txn_new();
                }
                ctl_job_ended(c, again, j, 0, 0,
                              "stopped (node lost or deleted, preempted, or a GPU gone) while its "
                              "reported end could not be stored",
                              true);
            }
            continue; /* else memory unchanged: the agent reports it again */
        }
        bool running = (j->state == JS_RUNNING || j->state == JS_COMPLETING) && j->runs == e->run &&
                       j->nplace > 0;
        if (j->ver == e->ver && running) {
            ctl_job_end_apply(c, j, e->end);
            e->end = NULL;
        } else if (running) {
            /* A newer row of the running job (a time limit...) was stored
             * after this end: end it again, from the job as it is now. */
            if (!again) {
                again = cr_store_txn_new();
            }
            ctl_job_ended(c, again, j, e->code, e->sig, e->why, false);
        }
        /* else: it moved on meanwhile: its newer row, stored after this
         * one, stands (a loss, a deletion or a preemption does not move it:
         * ctl_job_end_held). */
    }
    if (again) {
        cr_store_submit(c->store, again, NULL, NULL);
    }
    ctl_node *n = ctl_node_find(c, r->node);
    json_t *body = NULL;
    if (status == 0 && n) {
        json_t *whys = NULL;
        json_t *fence = ctl_fence_list(c, n, r->jobs, &whys);
        body =
            json_pack("{s:b,s:I,s:o,s:o,s:I}", "ok", 1, "version", (json_int_t)n->version, "fence",
                      fence, "fence_reasons", whys, "lease_s", (json_int_t)c->cfg.lost_after_s);
    }
    pthread_mutex_unlock(&c->mu);
    if (status != 0) {
        cr_warn("node=%s: a report of %zu job ends was not stored (%s): the jobs stay running "
                "until the agent reports them again",
                r->node, r->n, cr_strerror(status));
        ctl_reply_commit_err(r->req, status);
    } else if (body) {
        ctl_reply_json(r->req, 200, body);
    } else {
        ctl_reply_err(r->req, 404, CR_ENOENT, NULL, "node '%s' is not registered: register again",
                      r->node);
    }
    report_free(r);
}

void ctl_report_submit(ctl_report *r, ctl *c, cr_store_txn *txn, cr_http_req *req, const char *node,
                       json_t *jobs)
{
    r->c = c;
    r->req = req;
    /* A copy of its own: the report is freed on the store's writer
     * thread, while this request's body (which holds jobs) is freed on
     * the HTTP thread, and jansson's reference counts are not safe to
     * share across threads (ThreadSanitizer in multi-agent). */
    r->jobs = json_deep_copy(jobs);
    snprintf(r->node, sizeof r->node, "%s", node);
    cr_http_defer(req);
    cr_store_submit(c->store, txn, report_committed, r);
}
