/*
 * ctl_lifecycle.c - node lifecycle beyond register/drain (docs/install.md,
 * "Retiring and rejoining a node"):
 *
 *   DELETE /v1/nodes/{name}[?force=true]   forget a node (admin)
 *   POST   /v1/nodes/{name}/labels         {"labels": {"k": "v" | null}} (admin)
 *
 * Delete is refused (409) while jobs are placed on the node, unless forced:
 * then they end as on a lost node (requeued, no retry used). It is stored
 * before it is done (below, "Delete, commit first"). The node's token is
 * revoked and its record and labels are removed from the store, so a
 * retired node no longer shows as lost (nor raises its alert). The
 * scheduler keeps a drained (or lost) entry for the name until the next
 * restart (it has no removal), so a node that joins again under the same
 * name is brought back from that entry. An agent still running rejoins
 * with the join token at its next poll: retire a node by stopping its
 * agent first.
 *
 * Labels are free-form key=value metadata shown with the node; they are
 * kept in the store as objects of kind "nodelabels", one per node.
 * Bounds: keys 1..63 characters [a-zA-Z0-9_.-/], values up to 255
 * characters, at most 32 labels per node.
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LABELS_MAX      32
#define LABEL_KEY_MAX   63
#define LABEL_VALUE_MAX 255

static void load_one(void *arg, const char *key, const char *doc)
{
    ctl *c = arg;
    json_t *v = json_loads(doc, 0, NULL);
    if (json_is_object(v)) {
        json_object_set_new(c->node_labels, key, v);
    } else {
        cr_warn("store: node labels of %s unreadable: ignored", key);
        json_decref(v);
    }
}

int ctl_load_node_labels(ctl *c)
{
    if (!c->node_labels) {
        c->node_labels = json_object();
    }
    return cr_store_load_objects(c->store, "nodelabels", load_one, c);
}

void ctl_node_labels_free(ctl *c)
{
    json_decref(c->node_labels);
    json_decref(c->steps);
    c->node_labels = NULL;
}

static bool key_ok(const char *k)
{
    size_t n = strlen(k);
    if (n == 0 || n > LABEL_KEY_MAX) {
        return false;
    }
    for (; *k; k++) {
        char ch = *k;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '.' || ch == '-' || ch == '/')) {
            return false;
        }
    }
    return true;
}

typedef struct labels_arg {
    char name[CTL_NAME_MAX];
    json_t *next; /* owned: the node's labels after the change */
} labels_arg;

/* A label change is durable (status 0): apply it. mu held. */
static json_t *labels_committed(ctl *c, void *argp, int status, unsigned *code)
{
    labels_arg *a = argp;
    json_t *next = a->next;
    a->next = NULL;
    (void)code;
    if (status != 0 || !ctl_node_find(c, a->name)) {
        json_decref(next);
        return NULL;
    }
    json_object_set(c->node_labels, a->name, next);
    cr_info("node=%s labels set", a->name);
    json_t *body = json_pack("{s:s,s:o}", "name", a->name, "labels", json_deep_copy(next));
    json_decref(next);
    return body;
}

static void route_labels(ctl *c, cr_http_req *req, const char *name)
{
    size_t len;
    const char *body = cr_http_body(req, &len);
    json_t *v = NULL, *labels = NULL;
    cr_json_err err;
    static const char *const members[] = {"labels", NULL};
    if (cr_json_parse_object(body, len, &v, &err) || cr_json_only(v, "", members, &err) ||
        cr_json_obj(v, "", "labels", true, &labels, &err)) {
        json_decref(v);
        ctl_reply_jerr(req, &err);
        return;
    }
    const char *k;
    json_t *x;
    json_object_foreach(labels, k, x)
    {
        if (!key_ok(k)) {
            cr_json_fail(&err, CR_EINVAL, "labels",
                         "label key '%.80s': 1..%d characters of a-z A-Z 0-9 _ . - /", k,
                         LABEL_KEY_MAX);
        } else if (!json_is_null(x) &&
                   (!json_is_string(x) || json_string_length(x) > LABEL_VALUE_MAX)) {
            cr_json_fail(&err, CR_EINVAL, "labels",
                         "label '%s': the value must be a string of at most %d characters, or "
                         "null to remove it",
                         k, LABEL_VALUE_MAX);
        } else {
            continue;
        }
        json_decref(v);
        ctl_reply_jerr(req, &err);
        return;
    }
    pthread_mutex_lock(&c->mu);
    ctl_node *n = ctl_node_find(c, name);
    if (!n || n->deleting) {
        pthread_mutex_unlock(&c->mu);
        json_decref(v);
        if (n) {
            ctl_reply_err(req, 409, CR_ECONFLICT, NULL, "node '%s' is being deleted", name);
        } else {
            ctl_reply_err(req, 404, CR_ENOENT, NULL, "node '%s' not found", name);
        }
        return;
    }
    json_t *cur = json_object_get(c->node_labels, name);
    json_t *next = cur ? json_deep_copy(cur) : json_object();
    json_object_foreach(labels, k, x)
    {
        if (json_is_null(x)) {
            json_object_del(next, k);
        } else {
            json_object_set(next, k, x);
        }
    }
    if (json_object_size(next) > LABELS_MAX) {
        pthread_mutex_unlock(&c->mu);
        json_decref(next);
        json_decref(v);
        ctl_reply_err(req, 400, CR_EINVAL, "labels", "a node has at most %d labels", LABELS_MAX);
        return;
    }
    cr_store_txn *txn = cr_store_txn_new();
    if (json_object_size(next) == 0) {
        cr_store_txn_del(txn, "nodelabels", name);
    } else {
        char *s = json_dumps(next, JSON_COMPACT | JSON_SORT_KEYS);
        cr_store_txn_put(txn, "nodelabels", name, s);
        free(s);
    }
    /* Stored first, applied once durable (labels_committed). */
    labels_arg *a = cr_calloc(1, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    a->next = next; /* taken */
    ctl_state_commit_apply(c, txn, req, labels_committed, a);
    pthread_mutex_unlock(&c->mu);
    json_decref(v);
}

/*
 * Delete, commit first. Under mu the node is marked `deleting` and drained,
 * and the scheduler thread is waited for (mu released, bounded) until it
 * has taken the drain, so nothing new is placed on the node; the jobs on it
 * are requeued on copies (as on a lost node, no retry used) and marked
 * committing, and the rows (the jobs', the node's, its token's and labels'
 * deletion) are committed. Only then (delete_committed, store thread) are
 * the jobs requeued in memory, the token revoked and the node removed. A
 * refused commit (507 disk full, 500) undoes the drain: the node is as it
 * was. While deleting, the node's agent (register, status) and its other
 * changes (drain, approve, labels) answer 409 and it is not judged lost.
 * A job whose end an agent's report is storing is left out: that end
 * stands (ctl_job_end_held; if it is refused, ctl_report.c requeues it).
 */
typedef struct del_job {
    int64_t id;
    uint64_t ver; /* when its row was computed */
    int run;
    ctl_job *end; /* owned: the requeued copy (ctl_job_lost_prepare) */
} del_job;

typedef struct del_arg {
    char name[CTL_NAME_MAX];
    ctl_node_state state; /* the node before: restored if the commit fails */
    bool drained;
    char reason[256];
    del_job *jobs; /* owned */
    size_t njobs;
} del_arg;

static void del_free_jobs(del_arg *a)
{
    for (size_t i = 0; i < a->njobs; i++) {
        if (a->jobs[i].end) {
            ctl_job_free(a->jobs[i].end);
        }
    }
    free(a->jobs);
    a->jobs = NULL;
    a->njobs = 0;
}

/* The delete did not happen: the node as it was, back in placement. mu held. */
static void del_undo(ctl *c, ctl_node *n, const del_arg *a)
{
    n->deleting = false;
    n->state = a->state;
    n->drained = a->drained;
    snprintf(n->reason, sizeof n->reason, "%s", a->reason);
    n->sched_dirty = true;
    ctl_sched_kick(c);
}

/* The delete is durable (status 0): requeue the jobs, revoke the token,
 * forget the node. Else undo. mu held. */
static json_t *delete_committed(ctl *c, void *argp, int status, unsigned *code)
{
    del_arg *a = argp;
    (void)code;
    ctl_node *n = ctl_node_find(c, a->name);
    for (size_t i = 0; i < a->njobs; i++) {
        ctl_job *j = ctl_job_get(c, a->jobs[i].id);
        if (j) {
            j->committing = false;
        }
    }
    if (status != 0) {
        if (n) {
            del_undo(c, n, a);
        }
        del_free_jobs(a);
        return NULL;
    }
    cr_store_txn *more = cr_store_txn_new(); /* usage; a job that moved on meanwhile */
    cr_store_txn_splittable(more);
    size_t requeued = 0;
    int64_t now = cr_now_ns();
    for (size_t i = 0; i < a->njobs; i++) {
        del_job *d = &a->jobs[i];
        ctl_job *j = ctl_job_get(c, d->id);
        if (j && j->ver == d->ver && j->runs == d->run &&
            (j->state == JS_RUNNING || j->state == JS_COMPLETING)) {
            ctl_job_account(c, more, j, now);
            ctl_job_end_apply(c, j, d->end);
            d->end = NULL;
            requeued++;
        }
    }
    char why[200];
    snprintf(why, sizeof why, "node %s deleted by admin", a->name);
    while (n && n->njobs > 0) {
        /* Changed while the delete was stored (its newer row came after
         * ours), or its end is being stored (that end stands: ctl_job_ended
         * holds it, to be requeued only if that end is refused). */
        ctl_job *j = ctl_job_get(c, n->jobs[0]);
        if (j && (j->state == JS_RUNNING || j->state == JS_COMPLETING)) {
            ctl_job_ended(c, more, j, 0, 0, why, true);
        }
        ctl_node_del_job(n, n->jobs[0]);
    }
    del_free_jobs(a);
    cr_auth_table_revoke_node(c->auth, a->name);
    json_object_del(c->node_labels, a->name);
    if (n) {
        ctl_node_bump(c, n);
        ctl_node_remove(c, n);
    }
    if (cr_store_txn_empty(more)) {
        cr_store_txn_free(more);
    } else {
        cr_store_submit(c->store, more, NULL, NULL);
    }
    cr_info("node=%s deleted by admin (%zu job(s) requeued)", a->name, requeued);
    return json_pack("{s:s,s:b,s:I}", "name", a->name, "deleted", 1, "requeued",
                     (json_int_t)requeued);
}

/* Drains n for the scheduler and waits (mu released, bounded) until the
 * scheduler thread has taken it (it clears sched_dirty under mu), so that
 * nothing new is placed on it. Returns n again, or NULL when it went away.
 * mu held on entry and exit. */
static ctl_node *tell_scheduler(ctl *c, ctl_node *n, const char *name)
{
    if (n->state != NS_LOST) {
        n->state = NS_DRAINED;
    }
    n->drained = true;
    snprintf(n->reason, sizeof n->reason, "being deleted by admin");
    n->sched_dirty = true;
    ctl_sched_kick(c);
    int64_t until = cr_mono_ns() + 5 * CR_NS_PER_SEC;
    while (c->sched_started && n->sched_dirty && cr_mono_ns() < until) {
        pthread_mutex_unlock(&c->mu);
        usleep(2000);
        pthread_mutex_lock(&c->mu);
        n = ctl_node_find(c, name);
        if (!n) {
            return NULL;
        }
    }
    return n;
}

static void route_delete(ctl *c, cr_http_req *req, const char *name)
{
    const char *f = cr_http_query(req, "force");
    bool force = f && (strcmp(f, "true") == 0 || strcmp(f, "1") == 0);
    if (f && !force && strcmp(f, "false") != 0 && strcmp(f, "0") != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "force", "force: expected true or false, got '%.40s'",
                      f);
        return;
    }
    pthread_mutex_lock(&c->mu);
    ctl_node *n = ctl_node_find(c, name);
    if (!n) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "node '%s' not found", name);
        return;
    }
    if (n->deleting) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_err(req, 409, CR_ECONFLICT, NULL, "node '%s' is being deleted", name);
        return;
    }
    size_t active = 0;
    for (size_t i = 0; i < n->njobs; i++) {
        const ctl_job *j = ctl_job_get(c, n->jobs[i]);
        active += j && !ctl_job_terminal(j);
    }
    if (active > 0 && !force) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_err(req, 409, CR_ECONFLICT, NULL,
                      "node '%s' has %zu job(s) placed on it: drain it and wait for them, or "
                      "delete with force (they are requeued as on a lost node)",
                      name, active);
        return;
    }
    del_arg *a = cr_calloc(1, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    a->state = n->state;
    a->drained = n->drained;
    snprintf(a->reason, sizeof a->reason, "%s", n->reason);
    n->deleting = true;
    n = tell_scheduler(c, n, name);
    if (!n) {
        pthread_mutex_unlock(&c->mu);
        free(a);
        ctl_reply_err(req, 409, CR_ECONFLICT, NULL, "node '%s' went away meanwhile", name);
        return;
    }
    /* The jobs as they are now (mu was released: a pass that was under
     * way may have placed one): a user's change being stored must land
     * first; a reported end being stored stands. */
    for (size_t i = 0; i < n->njobs; i++) {
        const ctl_job *j = ctl_job_get(c, n->jobs[i]);
        if (!j || ctl_job_terminal(j) || (!force && j->ending)) {
            continue;
        }
        if (!force || (j->committing && !j->ending)) {
            del_undo(c, n, a);
            pthread_mutex_unlock(&c->mu);
            free(a);
            if (!force) {
                ctl_reply_err(req, 409, CR_ECONFLICT, NULL,
                              "node '%s': job %lld was placed on it meanwhile: drain it and wait, "
                              "or delete with force",
                              name, (long long)j->id);
            } else {
                ctl_reply_err(req, 409, CR_ECONFLICT, NULL,
                              "node '%s': a change to its job %lld is being stored; retry", name,
                              (long long)j->id);
            }
            return;
        }
    }
    cr_store_txn *txn = cr_store_txn_new();
    char why[200];
    snprintf(why, sizeof why, "node %s deleted by admin", name);
    a->jobs = cr_calloc(n->njobs ? n->njobs : 1, sizeof *a->jobs);
    for (size_t i = 0; i < n->njobs; i++) {
        ctl_job *j = ctl_job_get(c, n->jobs[i]);
        if (!j || j->ending || (j->state != JS_RUNNING && j->state != JS_COMPLETING)) {
            continue; /* (an end being stored: held once the delete is done, below) */
        }
        del_job *d = &a->jobs[a->njobs++];
        d->id = j->id;
        d->ver = j->ver;
        d->run = j->runs;
        d->end = ctl_job_lost_prepare(c, txn, j, why);
        j->committing = true;
    }
    cr_store_txn_del(txn, "node", name);
    cr_store_txn_del(txn, "nodetoken", name);
    cr_store_txn_del(txn, "nodelabels", name);
    ctl_state_commit_apply(c, txn, req, delete_committed, a);
    pthread_mutex_unlock(&c->mu);
}

bool ctl_route_node_lifecycle(ctl *c, cr_http_req *req, const cr_principal *p, char **seg,
                              size_t nseg)
{
    const char *m = cr_http_method(req);
    bool del = nseg == 3 && strcmp(m, "DELETE") == 0;
    bool lab = nseg == 4 && strcmp(m, "POST") == 0 && strcmp(seg[3], "labels") == 0;
    if (!del && !lab) {
        return false;
    }
    cr_http_set_route(req, del ? "/v1/nodes/{name}" : "/v1/nodes/{name}/labels");
    if (p->role != CR_ROLE_ADMIN) {
        ctl_reply_err(req, 403, CR_EPERM, NULL, "only an admin may %s nodes",
                      del ? "delete" : "label");
        return true;
    }
    if (del) {
        route_delete(c, req, seg[2]);
    } else {
        route_labels(c, req, seg[2]);
    }
    return true;
}
