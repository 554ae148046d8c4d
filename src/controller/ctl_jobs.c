/*
 * ctl_jobs.c - the /v1/jobs routes: submit, show, events, actions (the
 * request's validation is ctl_jobspec.c; the changes go through
 * ctl_state.c).
 *
 * A submit validates the whole body first (400 naming the member, nothing
 * stored), hands out ids, queues the rows to the store and defers the
 * answer; the commit callback puts the jobs into memory, wakes the
 * scheduler and answers 201. Other mutations change memory under mu, queue
 * the row and an event with mu held (so the store sees changes in memory
 * order), and answer from the commit callback.
 */
#include "ctl_int.h"
#include "ctl_data.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_parse.h"
#include "cr_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARRAY 10000

/* array x the spec's size, one submit */

/* ------------------------------------------------------------------------ */
/* Answers after commit.                                                    */

typedef struct submit_ctx {
    ctl *c;
    cr_http_req *req;
    ctl_job **jobs; /* owned until inserted */
    size_t n;
    char *answer;     /* owned: the 201 body */
    int64_t token_id; /* Idempotency-Key: whose */
    char idem[160];   /* Idempotency-Key, "" = none */
} submit_ctx;

static void submit_committed(void *arg, int status)
{
    submit_ctx *s = arg;
    ctl *c = s->c;
    if (status != 0) {
        for (size_t i = 0; i < s->n; i++) {
            ctl_job_free(s->jobs[i]);
        }
        if (*s->idem) {
            pthread_mutex_lock(&c->mu);
            ctl_idem_done(c, s->token_id, s->idem, NULL);
            pthread_mutex_unlock(&c->mu);
        }
        ctl_reply_commit_err(s->req, status);
        goto out;
    }
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < s->n; i++) {
        ctl_job *j = s->jobs[i];
        ctl_job_insert(c, j);
        ctl_batch_admit(c, j);
    }
    if (s->n) {
        ctl_events_jobs(c, s->jobs[0]->tenant, s->jobs[0]->id, s->n);
    }
    if (*s->idem) {
        ctl_idem_done(c, s->token_id, s->idem, s->answer);
    }
    pthread_mutex_unlock(&c->mu);
    atomic_fetch_add(&c->jobs_submitted, s->n);
    size_t alen = strlen(s->answer);
    cr_http_respond(s->req, 201, "application/json", s->answer, alen);
    s->answer = NULL;
out:
    free(s->answer);
    free(s->jobs);
    free(s);
}

/* note: "" or a word for the submitter (how the request was read). */
static char *ids_answer(int64_t first, size_t n, const char *note, const char *warning)
{
    cr_buf b;
    cr_buf_init(&b);
    cr_buf_puts(&b, "{\"ids\":[");
    for (size_t i = 0; i < n; i++) {
        cr_buf_printf(&b, "%s%lld", i ? "," : "", (long long)(first + (int64_t)i));
    }
    cr_buf_puts(&b, "]");
    if (*note) {
        json_t *js = json_string(note);
        char *q = json_dumps(js, JSON_ENCODE_ANY);
        cr_buf_printf(&b, ",\"note\":%s", q ? q : "\"\"");
        free(q);
        json_decref(js);
    }
    if (*warning) {
        json_t *js = json_string(warning);
        char *q = json_dumps(js, JSON_ENCODE_ANY);
        cr_buf_printf(&b, ",\"warning\":%s", q ? q : "\"\"");
        free(q);
        json_decref(js);
    }
    cr_buf_puts(&b, "}");
    return cr_buf_take(&b);
}

static void jobs_submit(ctl *c, cr_http_req *req, const cr_principal *p)
{
    size_t len;
    const char *body = cr_http_body(req, &len);
    json_t *v = NULL;
    cr_json_err err;
    ctl_job *proto = NULL;
    char *spec_json = NULL;
    int32_t *indexes = NULL;
    int64_t n = 1;
    const char *idem = cr_http_header(req, "Idempotency-Key");
    if (idem && ctl_idem_key_check(idem) != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "Idempotency-Key",
                      "header 'Idempotency-Key': 1..128 printable ASCII characters");
        goto out;
    }
    if (cr_json_parse_object(body, len, &v, &err) != 0 ||
        ctl_job_parse(v, &proto, &n, &indexes, &err) != 0) {
        ctl_reply_jerr(req, &err);
        goto out;
    }
    if (n > c->cfg.max_array) {
        ctl_reply_err(req, 400, CR_ERANGE, "array",
                      "field 'array': at most %lld tasks per submit (max_array)",
                      (long long)c->cfg.max_array);
        goto out;
    }
    if (p->role == CR_ROLE_USER) {
        if (*proto->tenant && strcmp(proto->tenant, p->tenant) != 0) {
            ctl_reply_err(req, 403, CR_EPERM, "tenant",
                          "field 'tenant': this token may only submit for tenant '%s'", p->tenant);
            goto out;
        }
        /* The tier comes before fair share and preempts lower tiers of
         * every tenant: only an admin raises it (a user orders its own
         * jobs below 0, as nice lowers). */
        if (proto->priority > 0) {
            ctl_reply_err(req, 403, CR_EPERM, "priority",
                          "field 'priority': only an admin may submit above 0 (it ranks "
                          "before other tenants' fair share); use 0 or below");
            goto out;
        }
        snprintf(proto->tenant, sizeof proto->tenant, "%s", p->tenant);
    } else if (!*proto->tenant) {
        snprintf(proto->tenant, sizeof proto->tenant, "default");
    }
    /* The Unix user the job will run as, fixed now: a job nobody mapped is
     * refused here rather than left to fail (or run as root) on a node. */
    ctl_run_as ra;
    char rwhy[300];
    if (ctl_run_as_lookup(&c->cfg, proto->tenant, p->name, &ra, rwhy, sizeof rwhy) != 0) {
        ctl_reply_err(req, 403, CR_EPERM, "tenant", "%s", rwhy);
        goto out;
    }
    if (ctl_ctr_check_tenant(&c->cfg, proto->tenant, proto->spec, &err) != 0) {
        ctl_reply_err(req, 403, err.code, err.field, "%s", err.message);
        goto out;
    }
    if (ctl_data_resolve(c, proto->tenant, json_object_get(v, "data"), proto->spec, &err) != 0) {
        ctl_reply_jerr(req, &err);
        goto out;
    }
    if (ra.mapped) {
        json_object_set_new(proto->spec, "run_as",
                            json_pack("{s:I,s:I,s:b}", "uid", (json_int_t)ra.uid, "gid",
                                      (json_int_t)ra.gid, "allow_root", ra.allow_root));
    }
    /* sbatch's default output file, slurm-%j.out (an array task's
     * slurm-%A_%a.out) in the submit directory, where the cluster says it
     * is shared (docs/slurm.md). */
    if (c->cfg.shared_submit_dir && json_is_true(json_object_get(proto->spec, "batch")) &&
        !json_object_get(proto->spec, "output") && json_object_get(proto->spec, "submit_dir") &&
        !json_object_get(proto->spec, "image")) {
        json_object_set_new(proto->spec, "output",
                            json_string(n > 1 || indexes ? "slurm-%A_%a.out" : "slurm-%j.out"));
    }
    spec_json = ctl_jw_dumps(proto->spec);
    if (!spec_json || (int64_t)strlen(spec_json) > c->cfg.max_spec_bytes) {
        ctl_reply_err(req, 413, CR_ETOOBIG, NULL,
                      "the job request is %zu bytes stored; at most %lld (max_spec_bytes)",
                      spec_json ? strlen(spec_json) : 0, (long long)c->cfg.max_spec_bytes);
        goto out;
    }
    /* The env sealed before anything is stored (the row holds its names
     * only in clear); measured above as sent, so the limit means what it
     * did (sealed, it stores about 4/3 of its size). */
    bool redump = false; /* the spec changed after the dump above: dumped once more below */
    if (json_object_get(proto->spec, "env")) {
        ctl_job_env_seal(c, proto->spec);
        redump = true;
    }
    if (proto->secrets) {
        /* Sealed before anything is stored; the plain copy goes now. */
        char *plain = json_dumps(proto->secrets, JSON_COMPACT);
        proto->secrets_enc = ctl_seal(c, plain);
        ctl_secret_free(plain);
        json_decref(proto->secrets);
        proto->secrets = NULL;
    }
    int64_t now = cr_now_ns();
    pthread_mutex_lock(&c->mu);
    if (!ctl_tenant_find(c, proto->tenant)) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_err(req, 400, CR_ENOENT, "tenant", "field 'tenant': unknown tenant '%s'",
                      proto->tenant);
        goto out;
    }
    if (ctl_mig_profile_check(c, proto->mig_profile, &err) != 0) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_jerr(req, &err);
        goto out;
    }
    /* The tenant's hybrid constraint (site=onprem): added, or a locked one
     * enforced (docs/pools.md "Hybrid policy"). */
    bool cchanged = false;
    if (ctl_tenant_constraint_apply(c, proto->tenant, proto->spec, &cchanged, &err) != 0) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_err(req, 403, err.code, err.field, "%s", err.message);
        goto out;
    }
    redump = redump || cchanged;
    /* Partition and GPU type against the cluster's (its config, its nodes). */
    char note[200];
    if (ctl_part_submit(c, v, proto, note, sizeof note, &redump, &err) != 0) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_jerr(req, &err);
        goto out;
    }
    if (redump) {
        free(spec_json);
        spec_json = ctl_jw_dumps(proto->spec);
    }
    /* An explicit type and count that cannot hold the model (issue 26):
     * refused, or taken with a warning when the request says "force". */
    char warning[640] = "";
    {
        ctl_auto_hints fh;
        ctl_auto_plan_hints_of(proto->mig_profile, proto->kind,
                               json_object_get(proto->spec, "model"), proto->gpus, &fh);
        const char *ffield = NULL;
        char fmsg[600];
        if (ctl_auto_fit_check(c->catalog, ctl_learn_models(c), proto->gpu_type, &fh, &ffield, fmsg,
                               sizeof fmsg) != 0) {
            if (!json_is_true(json_object_get(v, "force"))) {
                pthread_mutex_unlock(&c->mu);
                ctl_reply_err(req, 400, CR_EINVAL, ffield, "%s", fmsg);
                goto out;
            }
            snprintf(warning, sizeof warning, "submitted under force: %s", fmsg);
        }
    }
    const char *dep = json_string_value(json_object_get(proto->spec, "dependency"));
    char dwhy[200] = "";
    if (dep && ctl_batch_dep_refs(c, dep, proto->tenant, p->role == CR_ROLE_ADMIN, dwhy,
                                  sizeof dwhy) != 0) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_err(req, 400, CR_ENOENT, "dependency", "field 'dependency': %s", dwhy);
        goto out;
    }
    if (idem) {
        char *first = NULL;
        ctl_idem_res r = ctl_idem_begin(c, p->id, idem, ctl_idem_hash(body, len), &first);
        if (r != CTL_IDEM_NEW) {
            pthread_mutex_unlock(&c->mu);
            if (r == CTL_IDEM_REPLAY) {
                cr_http_add_header(req, "Idempotent-Replayed", "true");
                size_t flen = strlen(first);
                cr_http_respond(req, 201, "application/json", first, flen);
            } else {
                ctl_reply_err(req, 409, CR_ECONFLICT, "Idempotency-Key",
                              r == CTL_IDEM_BUSY
                                  ? "header 'Idempotency-Key': the first request with this key "
                                    "is still being stored; retry"
                                  : "header 'Idempotency-Key': already used with a different "
                                    "request");
            }
            goto out;
        }
    }
    int64_t first = c->next_id;
    c->next_id += n;
    submit_ctx *s = cr_calloc(1, sizeof *s);
    s->c = c;
    s->req = req;
    s->n = (size_t)n;
    s->jobs = cr_calloc(s->n, sizeof *s->jobs);
    s->answer = ids_answer(first, s->n, note, warning);
    s->token_id = p->id;
    if (idem) {
        snprintf(s->idem, sizeof s->idem, "%s", idem);
    }
    cr_store_txn *txn = cr_store_txn_new();
    if (idem) {
        ctl_idem_persist(c, txn, p->id, idem, s->answer);
    }
    /* The high-water mark of ids: never handed out twice, even when the
     * newest rows are lost or unreadable. */
    char hwm[32];
    snprintf(hwm, sizeof hwm, "%lld", (long long)(first + n - 1));
    cr_store_txn_put(txn, "meta", "job_id_hwm", hwm);
    pthread_mutex_unlock(&c->mu);
    char why[900];
    snprintf(why, sizeof why, "by token '%s' (%s)%s%s", p->name, cr_role_name(p->role),
             *warning ? "; " : "", warning);
    for (size_t i = 0; i < s->n; i++) {
        ctl_job *j = cr_calloc(1, sizeof *j);
        *j = *proto;
        j->spec = json_incref(proto->spec);
        j->secrets_enc = proto->secrets_enc ? cr_strdup(proto->secrets_enc) : NULL;
        j->reason = cr_strdup("not yet considered");
        j->place = NULL;
        j->id = first + (int64_t)i;
        j->submit_ns = now;
        if (n > 1 || indexes) {
            /* Array tasks share one spec; only these two differ. */
            j->array_index = indexes ? indexes[i] : (int32_t)i;
            j->array_first = first;
        }
        s->jobs[i] = j;
        ctl_job_persist_doc(txn, j, ctl_job_doc_with(j, spec_json), "submitted", why);
    }
    ctl_audit_take(txn); /* the request's audit row, in the same commit */
    cr_http_defer(req);
    cr_store_submit(c->store, txn, submit_committed, s);
out:
    free(spec_json);
    free(indexes);
    json_decref(v);
    ctl_job_free(proto);
}

/* ------------------------------------------------------------------------ */
/* Reads.                                                                   */

static bool visible(const ctl_job *j, const cr_principal *p)
{
    return j && (p->role == CR_ROLE_ADMIN || strcmp(j->tenant, p->tenant) == 0);
}

static void add_event(void *arg, int64_t job, int64_t time_ns, const char *what, const char *why)
{
    char t[64];
    json_array_append_new(arg,
                          json_pack("{s:s,s:s,s:s}", "time", ctl_time_str(time_ns, t, sizeof t),
                                    "what", what, "why", why));
}

static void job_show(ctl *c, cr_http_req *req, const cr_principal *p, int64_t id)
{
    pthread_mutex_lock(&c->mu);
    ctl_job *j = ctl_job_fetch(c, id);
    json_t *v = visible(j, p) ? ctl_job_json(j) : NULL;
    if (v) {
        ctl_redact_member(c, p, v, "reason");
        json_t *steps = ctl_batch_steps(c, id);
        if (steps) {
            json_object_set_new(v, "steps", steps); /* srun's (docs/slurm.md) */
        }
        /* the UUIDs the agents run it on (the job page's column, docs/api.md) */
        json_t *pls = json_object_get(v, "placement");
        for (size_t i = 0; i < json_array_size(pls) && i < j->nplace; i++) {
            const ctl_place *pl = &j->place[i];
            const ctl_node *n = ctl_node_find(c, pl->node);
            json_t *u = json_array();
            for (size_t q = 0; n && q < pl->ngpus; q++) {
                json_array_append_new(u, json_string(ctl_place_uuid(c, n, j, pl, q)));
            }
            json_object_set_new(json_array_get(pls, i), "gpu_uuids", u);
        }
    }
    /* ?env=1: the values too (names only by default), credential-looking
     * ones redacted even here. */
    const char *qe = cr_http_query(req, "env");
    if (v && qe && (strcmp(qe, "1") == 0 || strcmp(qe, "true") == 0)) {
        json_t *env = ctl_job_env_open(c, j->id, j->spec);
        if (env) {
            ctl_redact_env(env);
            json_object_set_new(v, "env", env);
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (!v) {
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "job %lld not found", (long long)id);
        return;
    }
    json_t *ev = json_array();
    cr_store_job_events(c->store, id, 1000, add_event, ev);
    if (p->role != CR_ROLE_ADMIN) {
        /* Other tenants' job ids and names out of the texts (a preemption
         * names the job it made room for); after the store's callbacks,
         * which must not take mu. */
        pthread_mutex_lock(&c->mu);
        for (size_t i = 0; i < json_array_size(ev); i++) {
            ctl_redact_member(c, p, json_array_get(ev, i), "why");
        }
        pthread_mutex_unlock(&c->mu);
    }
    json_object_set_new(v, "events", ev);
    ctl_reply_json(req, 200, v);
}

/* ------------------------------------------------------------------------ */
/* Actions.                                                                 */

typedef struct action_arg {
    char action[16]; /* cancel|hold|release|requeue */
    int64_t now;     /* wall clock, the same for the stored row and memory */
} action_arg;

/* Tell the agents of a running job's nodes that its desired state changed. */
static void bump_nodes(ctl *c, const ctl_job *j)
{
    for (size_t i = 0; i < j->nplace; i++) {
        ctl_node *n = ctl_node_find(c, j->place[i].node);
        if (n) {
            ctl_node_bump(c, n);
        }
    }
}

/* The user actions as one state change (see ctl_state.c): on a copy with
 * apply false, on the job once stored with apply true. */
static const char *action_change(ctl *c, ctl_job *j, const void *argp, bool apply,
                                 const char **what)
{
    const action_arg *a = argp;
    ctl_job_state was = j->state;
    int64_t id = j->id;
    if (strcmp(a->action, "cancel") == 0) {
        if (ctl_job_terminal(j)) {
            return "is already finished";
        }
        if (was == JS_RUNNING || was == JS_COMPLETING) {
            j->cancel_requested = true;
            j->state = JS_COMPLETING;
            ctl_job_set_reason(j, "cancel requested: stopping");
            *what = "cancel-requested";
            if (apply) {
                bump_nodes(c, j);
            }
        } else {
            j->state = JS_CANCELLED;
            j->end_ns = a->now;
            ctl_job_set_reason(j, "cancelled");
            *what = "cancelled";
            if (apply) {
                ctl_sched_remove(c, id);
                atomic_fetch_add(&c->jobs_finished[JS_CANCELLED], 1);
            }
        }
    } else if (strcmp(a->action, "hold") == 0) {
        if (was != JS_PENDING) {
            return "is not pending";
        }
        j->state = JS_HELD;
        ctl_job_set_reason(j, "held");
        *what = "held";
        if (apply) {
            ctl_sched_remove(c, id);
        }
    } else if (strcmp(a->action, "release") == 0) {
        if (was != JS_HELD) {
            return "is not held";
        }
        j->state = JS_PENDING;
        ctl_job_set_reason(j, "released");
        *what = "released";
        if (apply) {
            ctl_batch_admit(c, j); /* its dependency, throttle or begin time first */
        }
    } else { /* requeue */
        if (was == JS_RUNNING) {
            j->requeue_requested = true;
            j->state = JS_COMPLETING;
            ctl_job_set_reason(j, "requeue requested: stopping");
            *what = "requeue-requested";
            if (apply) {
                bump_nodes(c, j);
            }
        } else if (ctl_job_terminal(j)) {
            j->state = JS_PENDING;
            j->start_ns = j->end_ns = 0;
            j->exit_code = j->signal = 0;
            j->cancel_requested = false;
            j->touch_mono = 0;
            ctl_job_set_reason(j, "requeued");
            *what = "requeued";
            if (apply) {
                if (c->first_active > id) {
                    c->first_active = id; /* active again (see ctl_metrics.c) */
                }
                ctl_batch_admit(c, j);
            }
        } else {
            return "is not running or finished";
        }
    }
    return NULL;
}

typedef struct signal_arg {
    char name[12];
} signal_arg;

/* A signal to a running job as a state change (stored as an event). */
static const char *signal_change(ctl *c, ctl_job *j, const void *argp, bool apply,
                                 const char **what)
{
    const signal_arg *a = argp;
    if (j->state != JS_RUNNING) {
        return "is not running";
    }
    *what = "signalled";
    if (apply) {
        ctl_batch_signal(c, j, a->name); /* the agents deliver it */
    }
    return NULL;
}

static void job_action(ctl *c, cr_http_req *req, const cr_principal *p, int64_t id,
                       const char *action)
{
    char signame[12] = "";
    size_t len;
    const char *body = cr_http_body(req, &len);
    if (len > 0) {
        json_t *v = NULL;
        cr_json_err err;
        static const char *const none[] = {"reason", "signal", NULL};
        const char *sg = NULL;
        if (cr_json_parse_object(body, len, &v, &err) != 0 || cr_json_only(v, "", none, &err) ||
            cr_json_str(v, "", "signal", false, 31, &sg, &err) != 0) {
            json_decref(v);
            ctl_reply_jerr(req, &err);
            return;
        }
        int64_t secs;
        if (sg && ctl_batch_signal_parse(sg, signame, sizeof signame, &secs) != 0) {
            json_decref(v);
            ctl_reply_err(req, 400, CR_EINVAL, "signal",
                          "field 'signal': one of USR1, USR2, TERM, INT, HUP, QUIT, ALRM, CONT, "
                          "KILL, WINCH");
            return;
        }
        json_decref(v);
    }
    if (strcmp(action, "signal") == 0 && !*signame) {
        ctl_reply_err(req, 400, CR_EINVAL, "signal", "field 'signal': required");
        return;
    }
    char why[200];
    snprintf(why, sizeof why, "%s by token '%s'", action, p->name);
    pthread_mutex_lock(&c->mu);
    ctl_job *j = ctl_job_fetch(c, id);
    if (!visible(j, p)) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "job %lld not found", (long long)id);
        return;
    }
    const char *qa = cr_http_query(req, "array");
    bool whole_array = qa && strcmp(qa, "1") == 0 && j->array_first == id;
    if (strcmp(action, "signal") != 0 && !whole_array) {
        /* One job: stored first, then applied (ctl_state.c). */
        action_arg a;
        memset(&a, 0, sizeof a);
        snprintf(a.action, sizeof a.action, "%s", action);
        a.now = cr_now_ns();
        ctl_state_job_change(c, req, j, action_change, &a, sizeof a, why);
        pthread_mutex_unlock(&c->mu);
        return;
    }
    /* A whole array (array=1 on its first id, as scancel ID does) or a
     * signal (to every task of the job or array, once): stored first, then
     * applied, like one job. */
    int64_t *ids = NULL;
    size_t n = 0, cap = 0;
    int64_t array_last = 0;
    for (int64_t k = id;; k++) {
        ctl_job *t = ctl_job_get(c, k);
        if (!t || (k != id && !(whole_array && t->array_first == id))) {
            break;
        }
        CR_GROW(ids, n, cap);
        ids[n++] = k;
        array_last = whole_array ? k : 0;
    }
    if (strcmp(action, "signal") == 0) {
        signal_arg a;
        memset(&a, 0, sizeof a);
        snprintf(a.name, sizeof a.name, "%s", signame);
        char sw[240];
        snprintf(sw, sizeof sw, "SIG%s %s", signame, why);
        ctl_state_jobs_change(c, req, ids, n, array_last, signal_change, &a, sizeof a, sw);
    } else {
        action_arg a;
        memset(&a, 0, sizeof a);
        snprintf(a.action, sizeof a.action, "%s", action);
        a.now = cr_now_ns();
        ctl_state_jobs_change(c, req, ids, n, array_last, action_change, &a, sizeof a, why);
    }
    pthread_mutex_unlock(&c->mu);
    free(ids);
}

void ctl_route_jobs(ctl *c, cr_http_req *req, const cr_principal *p, char **seg, size_t nseg)
{
    const char *m = cr_http_method(req);
    if (p->role != CR_ROLE_ADMIN && p->role != CR_ROLE_USER) {
        ctl_reply_err(req, 403, CR_EPERM, NULL, "role '%s' may not use /v1/jobs",
                      cr_role_name(p->role));
        return;
    }
    if (nseg == 2) {
        if (strcmp(m, "POST") == 0) {
            cr_http_set_route(req, "/v1/jobs");
            jobs_submit(c, req, p);
        } else if (strcmp(m, "GET") == 0) {
            cr_http_set_route(req, "/v1/jobs");
            ctl_jobs_list(c, req, p);
        } else {
            ctl_reply_err(req, 405, CR_ENOTSUP, NULL, "method %s not allowed on /v1/jobs", m);
        }
        return;
    }
    int64_t id = 0, ix = -1;
    char head[32];
    size_t hl = strcspn(seg[2], "_");
    snprintf(head, sizeof head, "%.*s", (int)(hl < sizeof head ? hl : 0), seg[2]);
    if (cr_parse_i64(head, 1, INT64_MAX / 2, &id) != 0 ||
        (seg[2][hl] == '_' && cr_parse_i64(seg[2] + hl + 1, 0, MAX_ARRAY_INDEX, &ix) != 0)) {
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "job '%s' not found", seg[2]);
        return;
    }
    if (ix >= 0) {
        /* ARRAY_INDEX: one task of an array, as Slurm names it */
        pthread_mutex_lock(&c->mu);
        ctl_job *t = ctl_batch_array_task(c, id, (int32_t)ix);
        id = t ? t->id : 0;
        pthread_mutex_unlock(&c->mu);
        if (!id) {
            ctl_reply_err(req, 404, CR_ENOENT, NULL, "job '%s' not found", seg[2]);
            return;
        }
    }
    if (nseg == 3 && strcmp(m, "GET") == 0) {
        cr_http_set_route(req, "/v1/jobs/{id}");
        job_show(c, req, p, id);
        return;
    }
    if (nseg == 4 && strcmp(m, "POST") == 0 &&
        (strcmp(seg[3], "cancel") == 0 || strcmp(seg[3], "hold") == 0 ||
         strcmp(seg[3], "release") == 0 || strcmp(seg[3], "requeue") == 0 ||
         strcmp(seg[3], "signal") == 0)) {
        cr_http_set_route(req, "/v1/jobs/{id}/action");
        job_action(c, req, p, id, seg[3]);
        return;
    }
    if (nseg == 4 && strcmp(m, "GET") == 0 && strcmp(seg[3], "logs") == 0) {
        cr_http_set_route(req, "/v1/jobs/{id}/logs");
        ctl_job_logs(c, req, p, id);
        return;
    }
    ctl_reply_err(req, 404, CR_ENOENT, NULL, "no route %s %s", m, cr_http_path(req));
}
