/*
 * ctl_state.c - the one place where a state change meets the store.
 *
 * Rule: memory shows only what is durable. A user's change (cancel, hold,
 * release, requeue) is computed on a copy of the job, written to the store,
 * and applied to the job in memory only once the commit succeeded; a failed
 * commit leaves memory as it was and answers 507 (disk full) or 500. Then
 * the parts that care are told: the scheduler (through its op queue, below),
 * the nodes (ctl_node_bump) and the services (ctl_job_changed): the last two
 * through the hooks that they registered (ctl_hooks.c), so this file names
 * no file above it.
 *
 * Changes the cluster makes itself follow the same rule where a change
 * shown before it is durable could run a job twice or lose an end: an
 * agent's report of an exit (ctl_report.c: ctl_job_end_prepare on a copy,
 * ctl_job_end_apply once stored), the scheduler's starts (ctl_sched.c: in
 * no desired state until stored, taken back when not), a node's loss and a
 * time limit's stop (ctl_nodes.c), an admin's node delete (ctl_lifecycle.c).
 * The others (a job stopped or requeued because its node or GPU went away,
 * a preemption, a gate's verdict) only ever stop work or re-derive after a
 * restart: they change memory under mu and queue their rows in the same
 * order, so the store sees them in memory order (ctl_job_ended;
 * docs/architecture.md, "Commit first"); none of them touches a job whose
 * end is stored or being stored (ctl_job_end_held).
 *
 * Also here: the scheduler's op queue, retention (finished jobs leave
 * memory, stay in SQLite; ctl_job_fetch brings one back) and the expiry of
 * the Idempotency-Key answers of submit (ctl_idem.c). (A
 * plain answer after a commit, ctl_commit_reply, is in ctl_util.c: the
 * files below this one use it too.)
 *
 * Concurrency: a change records the job's version (ver, bumped by every
 * stored change) when it is prepared. If the job moved on before the commit
 * came back (the scheduler started it, say), the stored row is stale: the
 * change is prepared again from the job as it is now and stored again
 * (bounded; 409 after CTL_CHANGE_TRIES). One user change per job at a time
 * (j->committing); a second one meanwhile answers 409.
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <malloc.h>
#include <stdio.h>
#include <string.h>

#define CTL_CHANGE_TRIES 3

/* ------------------------------------------------------------------------ */
/* Other changes: commit, then apply.                                       */

typedef struct apply_ctx {
    ctl *c;
    cr_http_req *req;
    ctl_commit_fn fn;
    void *arg; /* owned */
} apply_ctx;

static void apply_committed(void *argp, int status)
{
    apply_ctx *a = argp;
    ctl *c = a->c;
    unsigned code = 200;
    pthread_mutex_lock(&c->mu);
    json_t *body = a->fn(c, a->arg, status, &code);
    pthread_mutex_unlock(&c->mu);
    if (status != 0) {
        json_decref(body);
        cr_warn("change not stored: %s", cr_strerror(status));
        ctl_reply_commit_err(a->req, status);
    } else if (body) {
        ctl_reply_json(a->req, code, body);
    } else {
        ctl_reply_err(a->req, 409, CR_ECONFLICT, NULL,
                      "what it changed went away while the change was stored; retry");
    }
    free(a->arg);
    free(a);
}

void ctl_state_commit_apply(ctl *c, cr_store_txn *txn, cr_http_req *req, ctl_commit_fn fn,
                            void *arg)
{
    apply_ctx *a = cr_calloc(1, sizeof *a);
    a->c = c;
    a->req = req;
    a->fn = fn;
    a->arg = arg;
    cr_http_defer(req);
    cr_store_submit(c->store, txn, apply_committed, a);
}

/* ------------------------------------------------------------------------ */
/* Scheduler queue (consumed by ctl_sched.c).                               */

static void sched_push(ctl *c, int op, int64_t id)
{
    CR_GROW(c->sched_ops, c->nsched_ops, c->capsched_ops);
    c->sched_ops[c->nsched_ops].op = op;
    c->sched_ops[c->nsched_ops].id = id;
    c->nsched_ops++;
    ctl_sched_kick(c);
}

void ctl_sched_add(ctl *c, int64_t id)
{
    sched_push(c, CTL_SCHED_ADD, id);
}

void ctl_sched_remove(ctl *c, int64_t id)
{
    sched_push(c, CTL_SCHED_REMOVE, id);
}

void ctl_sched_requeue(ctl *c, int64_t id)
{
    sched_push(c, CTL_SCHED_REQUEUE, id);
}

void ctl_sched_resumable(ctl *c, int64_t id)
{
    sched_push(c, CTL_SCHED_RESUMABLE, id);
}

/* ------------------------------------------------------------------------ */
/* Job changes: commit, then apply.                                         */

typedef struct job_change {
    ctl *c;
    cr_http_req *req;
    int64_t id;
    uint64_t ver; /* the job's version the stored row was computed from */
    ctl_job_change_fn fn;
    void *arg; /* owned copy */
    char why[256];
    int tries;
} job_change;

static ctl_job *job_copy(const ctl_job *j)
{
    ctl_job *k = cr_malloc(sizeof *k);
    *k = *j;
    k->spec = json_incref(j->spec);
    k->reason = j->reason ? cr_strdup(j->reason) : NULL;
    k->secrets_enc = j->secrets_enc ? cr_strdup(j->secrets_enc) : NULL; /* owned, like spec */
    k->secrets = json_incref(j->secrets);
    k->last_nodes = j->last_nodes ? cr_strdup(j->last_nodes) : NULL;
    k->place = NULL;
    if (j->nplace > 0) {
        k->place = cr_calloc(j->nplace, sizeof *k->place);
        memcpy(k->place, j->place, j->nplace * sizeof *k->place);
    }
    return k;
}

ctl_job *ctl_job_copy(const ctl_job *j)
{
    return job_copy(j);
}

static void change_free(job_change *ch)
{
    free(ch->arg);
    free(ch);
}

static void change_committed(void *arg, int status);

/* Compute the change on a copy of j and queue its row. mu held. Returns
 * true when queued; false when answered (409) instead. */
static bool change_submit(job_change *ch, ctl_job *j)
{
    ctl_job *k = job_copy(j);
    const char *what = NULL;
    const char *bad = ch->fn(ch->c, k, ch->arg, false, &what);
    if (bad) {
        ctl_reply_err(ch->req, 409, CR_ECONFLICT, NULL, "job %lld %s (state %s)", (long long)j->id,
                      bad, ctl_job_state_names[j->state]);
        ctl_job_free(k);
        return false;
    }
    cr_store_txn *txn = cr_store_txn_new();
    ctl_job_persist(ch->c, txn, k, what, ch->why);
    ctl_job_free(k);
    ch->ver = j->ver;
    j->committing = true;
    cr_store_submit(ch->c->store, txn, change_committed, ch);
    return true;
}

static void change_committed(void *arg, int status)
{
    job_change *ch = arg;
    ctl *c = ch->c;
    pthread_mutex_lock(&c->mu);
    ctl_job *j = ctl_job_get(c, ch->id);
    if (j) {
        j->committing = false;
    }
    if (status != 0 || !j) {
        pthread_mutex_unlock(&c->mu);
        cr_warn("job=%lld: change not stored: %s", (long long)ch->id, cr_strerror(status));
        ctl_reply_commit_err(ch->req, status ? status : CR_EIO);
        change_free(ch);
        return;
    }
    if (j->ver != ch->ver) {
        /* Someone stored a newer state after ours: ours is stale in the
         * store. Prepare again from the job as it is now. */
        if (ch->tries++ < CTL_CHANGE_TRIES) {
            bool queued = change_submit(ch, j);
            pthread_mutex_unlock(&c->mu);
            if (!queued) {
                change_free(ch);
            }
            return;
        }
        pthread_mutex_unlock(&c->mu);
        ctl_reply_err(ch->req, 409, CR_ECONFLICT, NULL,
                      "job %lld kept changing while the change was stored; retry",
                      (long long)ch->id);
        change_free(ch);
        return;
    }
    const char *what = NULL;
    ch->fn(c, j, ch->arg, true, &what);
    j->ver++;
    ctl_events_job(c, j);
    json_t *body = ctl_job_json(j);
    pthread_mutex_unlock(&c->mu);
    ctl_reply_json(ch->req, 200, body);
    change_free(ch);
}

void ctl_state_job_change(ctl *c, cr_http_req *req, ctl_job *j, ctl_job_change_fn fn,
                          const void *arg, size_t arg_len, const char *why)
{
    if (j->committing) {
        ctl_reply_err(req, 409, CR_ECONFLICT, NULL,
                      "job %lld: another change to it is being stored; retry", (long long)j->id);
        return;
    }
    job_change *ch = cr_calloc(1, sizeof *ch);
    ch->c = c;
    ch->req = req;
    ch->id = j->id;
    ch->fn = fn;
    ch->arg = cr_malloc(arg_len ? arg_len : 1);
    memcpy(ch->arg, arg, arg_len);
    snprintf(ch->why, sizeof ch->why, "%s", why ? why : "");
    cr_http_defer(req);
    if (!change_submit(ch, j)) {
        change_free(ch);
    }
}

/* ------------------------------------------------------------------------ */
/* A change of several jobs (a whole array, a signal to its tasks).         */

typedef struct jobs_change {
    ctl *c;
    cr_http_req *req;
    int64_t show;       /* the job the answer shows */
    int64_t array_last; /* > 0: the answer covers the tasks up to this id */
    int64_t *ids;       /* tasks in this commit */
    uint64_t *vers;     /* their versions when prepared */
    size_t n;
    size_t applied; /* tasks changed so far */
    ctl_job_change_fn fn;
    void *arg; /* owned copy */
    char why[256];
    int tries;
} jobs_change;

static void jobs_change_free(jobs_change *ch)
{
    free(ch->ids);
    free(ch->vers);
    free(ch->arg);
    free(ch);
}

static void jobs_committed(void *arg, int status);

/* Prepare ids[0..n) on copies into one commit (tasks the change does not
 * apply to, or that another change holds, are left out). mu held. Returns
 * the tasks queued; *bad: why the first id was left out. */
static size_t jobs_submit(jobs_change *ch, const int64_t *ids, size_t n, const char **bad)
{
    ctl *c = ch->c;
    cr_store_txn *txn = cr_store_txn_new();
    free(ch->ids);
    free(ch->vers);
    ch->ids = cr_calloc(n ? n : 1, sizeof *ch->ids);
    ch->vers = cr_calloc(n ? n : 1, sizeof *ch->vers);
    ch->n = 0;
    for (size_t i = 0; i < n; i++) {
        ctl_job *j = ctl_job_get(c, ids[i]);
        const char *b = !j              ? "went away"
                        : j->committing ? "is being changed by another request"
                                        : NULL;
        const char *what = NULL;
        if (!b) {
            ctl_job *k = job_copy(j);
            b = ch->fn(c, k, ch->arg, false, &what);
            if (!b) {
                ctl_job_persist(c, txn, k, what, ch->why);
            }
            ctl_job_free(k);
        }
        if (b) {
            if (i == 0 && bad) {
                *bad = b;
            }
            continue;
        }
        ch->ids[ch->n] = j->id;
        ch->vers[ch->n] = j->ver;
        ch->n++;
        j->committing = true;
    }
    if (ch->n == 0) {
        cr_store_txn_free(txn);
        return 0;
    }
    cr_store_submit(c->store, txn, jobs_committed, ch);
    return ch->n;
}

static void jobs_answer(jobs_change *ch)
{
    ctl *c = ch->c;
    ctl_job *j = ctl_job_get(c, ch->show);
    json_t *body = j ? ctl_job_json(j) : NULL;
    if (body && ch->array_last > 0) {
        json_object_set_new(body, "array_last", json_integer(ch->array_last));
    }
    pthread_mutex_unlock(&c->mu);
    if (body) {
        ctl_reply_json(ch->req, 200, body);
    } else {
        ctl_reply_err(ch->req, 404, CR_ENOENT, NULL, "job %lld not found", (long long)ch->show);
    }
    jobs_change_free(ch);
}

static void jobs_committed(void *arg, int status)
{
    jobs_change *ch = arg;
    ctl *c = ch->c;
    pthread_mutex_lock(&c->mu);
    int64_t *stale = cr_calloc(ch->n ? ch->n : 1, sizeof *stale);
    size_t nstale = 0;
    for (size_t i = 0; i < ch->n; i++) {
        ctl_job *j = ctl_job_get(c, ch->ids[i]);
        if (!j) {
            continue;
        }
        j->committing = false;
        if (status != 0) {
            continue;
        }
        if (j->ver != ch->vers[i]) {
            stale[nstale++] = j->id; /* stored from an older state: again */
            continue;
        }
        const char *what = NULL;
        ch->fn(c, j, ch->arg, true, &what);
        j->ver++;
        ch->applied++;
        ctl_events_job(c, j);
    }
    if (status != 0) {
        pthread_mutex_unlock(&c->mu);
        free(stale);
        cr_warn("job=%lld: change of %zu jobs not stored: %s", (long long)ch->show, ch->n,
                cr_strerror(status));
        ctl_reply_commit_err(ch->req, status);
        jobs_change_free(ch);
        return;
    }
    if (nstale > 0 && ch->tries++ < CTL_CHANGE_TRIES && jobs_submit(ch, stale, nstale, NULL) > 0) {
        pthread_mutex_unlock(&c->mu);
        free(stale);
        return; /* answered when the rest is stored */
    }
    free(stale);
    if (ch->applied == 0) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_err(ch->req, 409, CR_ECONFLICT, NULL,
                      "job %lld kept changing while the change was stored; retry",
                      (long long)ch->show);
        jobs_change_free(ch);
        return;
    }
    jobs_answer(ch);
}

void ctl_state_jobs_change(ctl *c, cr_http_req *req, const int64_t *ids, size_t n,
                           int64_t array_last, ctl_job_change_fn fn, const void *arg,
                           size_t arg_len, const char *why)
{
    jobs_change *ch = cr_calloc(1, sizeof *ch);
    ch->c = c;
    ch->req = req;
    ch->show = n > 0 ? ids[0] : 0;
    ch->array_last = array_last;
    ch->fn = fn;
    ch->arg = cr_malloc(arg_len ? arg_len : 1);
    memcpy(ch->arg, arg, arg_len);
    snprintf(ch->why, sizeof ch->why, "%s", why ? why : "");
    const char *bad = "is not running";
    cr_http_defer(req);
    if (jobs_submit(ch, ids, n, &bad) == 0) {
        ctl_job *j = ctl_job_get(c, ch->show);
        ctl_reply_err(req, 409, CR_ECONFLICT, NULL, "job %lld %s (state %s)", (long long)ch->show,
                      bad, j ? ctl_job_state_names[j->state] : "gone");
        jobs_change_free(ch);
    }
}

/* ------------------------------------------------------------------------ */
/* A running job's end: reported by its agent, its node lost or deleted,    */
/* its GPUs gone (ctl_nodes.c, ctl_lifecycle.c, ctl_sched.c).               */

/* Release a running job's GPUs on its nodes; returned new: those nodes
 * (*count of them), for unplace_tell once the job's new state and reason
 * are set (its nodes' desired state says why it stopped: stop_reasons). */
static ctl_node **job_unplace(ctl *c, ctl_job *j, size_t *count)
{
    ctl_node **told = cr_calloc(j->nplace ? j->nplace : 1, sizeof *told);
    *count = 0;
    for (size_t i = 0; i < j->nplace; i++) {
        ctl_node *n = ctl_node_find(c, j->place[i].node);
        if (!n) {
            continue;
        }
        ctl_node_del_job(n, j->id);
        for (size_t g = 0; g < n->ngpus; g++) {
            if (n->gpus[g].alloc_job == j->id) {
                n->gpus[g].alloc_job = 0;
            }
        }
        told[(*count)++] = n;
    }
    free(j->place);
    j->place = NULL;
    j->nplace = 0;
    j->port = 0;
    j->start_unstored = false;
    return told;
}

/* Tell the agents of job_unplace's nodes (taken). */
static void unplace_tell(ctl *c, ctl_node **told, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        ctl_node_bump(c, told[i]);
    }
    free(told);
}

/* Charge the time run since the last charge to the tenant (GPU-seconds;
 * energy comes from heartbeats). The interval is monotonic; now_ns (wall)
 * only names the day it is booked on and is persisted as acct_ns. */
void ctl_job_account(ctl *c, cr_store_txn *txn, ctl_job *j, int64_t now_ns)
{
    if ((j->state != JS_RUNNING && j->state != JS_COMPLETING) || j->start_unstored) {
        return; /* a start not yet stored has run nothing */
    }
    int64_t mono = cr_mono_ns();
    if (j->acct_ns <= 0) {
        j->acct_mono_ns = j->start_ns > 0 ? j->start_mono_ns : mono;
    }
    double dt = (double)(mono - j->acct_mono_ns) / 1e9;
    if (dt <= 0) {
        return;
    }
    ctl_usage_add(c, txn, j->tenant, *j->run_type ? j->run_type : j->gpu_type, now_ns, dt * j->gpus,
                  0);
    j->acct_ns = now_ns;
    j->acct_mono_ns = mono;
}

/* How a running job's end comes out (the retry policy), on j's fields
 * only: no node, scheduler or hook is touched. buf gets the event's text,
 * *what its name. Returns the scheduler op (CTL_SCHED_REMOVE: finished,
 * CTL_SCHED_REQUEUE: pending again). */
static int end_decide(ctl_job *j, int exit_code, int sig, const char *why, bool lost, int64_t now,
                      char *buf, size_t len, const char **what)
{
    j->exit_code = exit_code;
    j->signal = sig;
    snprintf(buf, len, "%s", why);
    if (j->timed_out) {
        j->timed_out = false;
        j->state = JS_FAILED;
        j->end_ns = now;
        snprintf(buf, len, "time limit of %llds exceeded; %s", (long long)j->time_limit_s, why);
        ctl_job_set_reason(j, buf);
        *what = "failed";
        return CTL_SCHED_REMOVE;
    }
    if (j->cancel_requested) {
        j->state = JS_CANCELLED;
        j->end_ns = now;
        ctl_job_set_reason(j, "cancelled");
        *what = "cancelled";
        return CTL_SCHED_REMOVE;
    }
    if (j->requeue_requested) {
        j->requeue_requested = false;
        j->state = JS_PENDING;
        j->start_ns = 0;
        ctl_job_set_reason(j, "requeued");
        *what = "requeued";
        return CTL_SCHED_REQUEUE;
    }
    if (!lost && exit_code == 0 && sig == 0) {
        j->state = JS_COMPLETED;
        j->end_ns = now;
        ctl_job_set_reason(j, "");
        *what = "completed";
        return CTL_SCHED_REMOVE;
    }
    if (lost) {
        /* The node (or a GPU) was lost, not the job's doing: requeue it
         * without using a retry (max_retries counts the job's own failures). */
        j->state = JS_PENDING;
        j->start_ns = 0;
        snprintf(buf, len, "%s; requeued (not counted as a retry)", why);
        ctl_job_set_reason(j, buf);
        *what = "requeued";
        return CTL_SCHED_REQUEUE;
    }
    if (j->retries < j->max_retries) {
        j->retries++;
        j->state = JS_PENDING;
        j->start_ns = 0;
        snprintf(buf, len, "%s; retry %d of %d", why, j->retries, j->max_retries);
        ctl_job_set_reason(j, buf);
        *what = "requeued";
        return CTL_SCHED_REQUEUE;
    }
    j->state = JS_FAILED;
    j->end_ns = now;
    snprintf(buf, len, "%s; no retries left (max_retries %d)", why, j->max_retries);
    ctl_job_set_reason(j, buf);
    *what = "failed";
    return CTL_SCHED_REMOVE;
}

/* The parts told of an end: the scheduler, the counters, the job hooks. */
static void end_effects(ctl *c, ctl_job *j, int op)
{
    sched_push(c, op, j->id);
    if (ctl_job_terminal(j)) {
        atomic_fetch_add(&c->jobs_finished[j->state], 1);
    }
    ctl_job_changed(c, j);
}

bool ctl_job_end_held(ctl_job *j)
{
    if (ctl_job_terminal(j)) {
        return true;
    }
    if (j->ending) {
        j->end_deferred = true;
        return true;
    }
    return false;
}

void ctl_job_ended(ctl *c, cr_store_txn *txn, ctl_job *j, int exit_code, int sig, const char *why,
                   bool lost)
{
    if (ctl_job_end_held(j)) {
        return; /* its end is (being) stored: it stands */
    }
    int64_t now = cr_now_ns();
    ctl_job_account(c, txn, j, now);
    size_t ntold = 0;
    ctl_node **told = job_unplace(c, j, &ntold);
    char buf[256];
    const char *what = NULL;
    int op = end_decide(j, exit_code, sig, why, lost, now, buf, sizeof buf, &what);
    unplace_tell(c, told, ntold);
    ctl_job_persist(c, txn, j, what, buf);
    end_effects(c, j, op);
}

static ctl_job *end_prepare(ctl *c, cr_store_txn *txn, const ctl_job *j, int exit_code, int sig,
                            const char *why, bool no_retry, bool lost)
{
    ctl_job *k = job_copy(j);
    free(k->place); /* the copy's placement: the nodes keep theirs until applied */
    k->place = NULL;
    k->nplace = 0;
    k->port = 0;
    if (no_retry && k->retries < k->max_retries) {
        k->max_retries = k->retries;
    }
    char buf[256];
    const char *what = NULL;
    end_decide(k, exit_code, sig, why, lost, cr_now_ns(), buf, sizeof buf, &what);
    ctl_job_persist(c, txn, k, what, buf);
    return k;
}

ctl_job *ctl_job_end_prepare(ctl *c, cr_store_txn *txn, const ctl_job *j, int exit_code, int sig,
                             const char *why, bool no_retry)
{
    return end_prepare(c, txn, j, exit_code, sig, why, no_retry, false);
}

ctl_job *ctl_job_lost_prepare(ctl *c, cr_store_txn *txn, const ctl_job *j, const char *why)
{
    return end_prepare(c, txn, j, 0, 0, why, false, true);
}

void ctl_job_end_apply(ctl *c, ctl_job *j, ctl_job *k)
{
    size_t ntold = 0;
    ctl_node **told = job_unplace(c, j, &ntold);
    j->state = k->state;
    j->exit_code = k->exit_code;
    j->signal = k->signal;
    j->retries = k->retries;
    j->max_retries = k->max_retries;
    j->start_ns = k->start_ns;
    j->end_ns = k->end_ns;
    j->timed_out = k->timed_out;
    j->requeue_requested = k->requeue_requested;
    free(j->reason);
    j->reason = k->reason;
    k->reason = NULL;
    j->ver++; /* the row stored is this state */
    ctl_job_free(k);
    unplace_tell(c, told, ntold);
    end_effects(c, j, ctl_job_terminal(j) ? CTL_SCHED_REMOVE : CTL_SCHED_REQUEUE);
}

/* ------------------------------------------------------------------------ */
/* Jobs that left memory.                                                   */

static void fetch_row(void *arg, int64_t id, const char *doc)
{
    (void)id;
    char **out = arg;
    *out = cr_strdup(doc);
}

ctl_job *ctl_job_fetch(ctl *c, int64_t id)
{
    ctl_job *j = ctl_job_get(c, id);
    if (j || id < 1 || id >= c->next_id) {
        return j;
    }
    char *doc = NULL;
    if (cr_store_get_job(c->store, id, fetch_row, &doc) != 0 || !doc) {
        free(doc);
        return NULL;
    }
    int rc = ctl_job_load_doc(c, id, doc, true, &j);
    free(doc);
    if (rc != 0) {
        cr_error("store: job=%lld has a bad document", (long long)id);
        return NULL;
    }
    j->touch_mono = cr_mono_ns();
    ctl_job_insert(c, j);
    atomic_fetch_add(&c->jobs_fetched, 1);
    return j;
}

/* Finished jobs leave memory: those finished (first seen finished) more
 * than retain_s ago, and the oldest beyond retain_finished. They stay in
 * SQLite: GET /v1/jobs pages through the table, GET /v1/jobs/ID and the
 * actions bring one back (ctl_job_fetch). mu held. */
static void retain(ctl *c, int64_t now)
{
    size_t finished = 0;
    size_t i = 0;
    for (ctl_job *j; (j = ctl_job_next(c, &i));) {
        finished += ctl_job_terminal(j);
    }
    size_t over =
        finished > (size_t)c->cfg.retain_finished ? finished - (size_t)c->cfg.retain_finished : 0;
    size_t kept = 0, evicted = 0;
    i = 0;
    for (ctl_job *j; (j = ctl_job_next(c, &i));) {
        if (!ctl_job_terminal(j)) {
            continue;
        }
        if (j->touch_mono == 0) {
            j->touch_mono = now;
        }
        bool old = now - j->touch_mono > c->cfg.retain_s * CR_NS_PER_SEC;
        bool dep_target = j->dep_mono && now - j->dep_mono < CTL_DEP_PIN_S * CR_NS_PER_SEC;
        if ((over > 0 || old) && !j->in_sched && !j->committing && j->nplace == 0 && !dep_target) {
            ctl_job_drop(c, i - 1); /* frees j */
            evicted++;
            if (over > 0) {
                over--;
            }
            continue;
        }
        kept++;
    }
    c->nfinished_mem = kept;
    c->evicted_untrimmed += evicted;
}

void ctl_state_retain_now(ctl *c)
{
    retain(c, cr_mono_ns());
}

void ctl_state_tick(ctl *c, int64_t now_mono)
{
    static _Thread_local int64_t last;
    if (now_mono - last < CR_NS_PER_SEC) {
        return;
    }
    last = now_mono;
    pthread_mutex_lock(&c->mu);
    retain(c, now_mono);
    cr_store_txn *txn = cr_store_txn_new();
    ctl_idem_expire(c, txn, cr_now_ns());
    /* Freed job memory goes back to the system (all malloc arenas, not
     * only the top of each: the API threads' arenas fragment), after 1024
     * evictions or 10 s after the last trim, with mu released (a trim of
     * a 60 MB heap costs about a millisecond). */
    static _Thread_local int64_t last_trim;
    bool trim = c->evicted_untrimmed >= 1024 ||
                (c->evicted_untrimmed > 0 && now_mono - last_trim >= 10 * CR_NS_PER_SEC);
    if (trim) {
        c->evicted_untrimmed = 0;
        last_trim = now_mono;
    }
    pthread_mutex_unlock(&c->mu);
    if (trim) {
        malloc_trim(0);
    }
    if (cr_store_txn_empty(txn)) {
        cr_store_txn_free(txn);
    } else {
        cr_store_submit(c->store, txn, NULL, NULL);
    }
}
