/*
 * ctl_batch.c - batch-job rules the controller applies when it hands a job
 * to its nodes: how many tasks each node runs (the launch mode), and the
 * per-job members of the agent's desired-state entry.
 *
 * Launch mode (docs/cli.md, "Tasks"): the job's tasks_per_node when given;
 * else one task per node when the command is a launcher (torchrun,
 * python -m torch.distributed.run, deepspeed, accelerate, mpirun, mpiexec,
 * srun, horovodrun), which starts its per-GPU workers itself; else one task
 * per GPU for the kinds that train (pretrain, finetune); else one per node.
 *
 * The gate: a pending job with a dependency, an array throttle or a begin
 * time enters the scheduler only once they allow (ctl_batch_admit); until
 * then it waits on c->gated, re-judged by ctl_batch_tick on the scheduler
 * thread's 200 ms timer, its reason naming what it waits for. A dependency
 * that can never hold (afterok on a job that failed) ends the job,
 * cancelled, with that reason. Arrays: a throttle %N lets at most N tasks
 * of the array be known to the scheduler or running at once, so never
 * more than N run.
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_parse.h"
#include "cr_time.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

bool ctl_batch_is_launcher(const json_t *command)
{
    static const char *const launchers[] = {"torchrun", "deepspeed", "accelerate", "mpirun",
                                            "mpiexec",  "srun",      "horovodrun", NULL};
    const char *a0 = json_string_value(json_array_get(command, 0));
    if (!a0) {
        return false;
    }
    const char *b = base_name(a0);
    for (size_t i = 0; launchers[i]; i++) {
        if (strcmp(b, launchers[i]) == 0) {
            return true;
        }
    }
    const char *a1 = json_string_value(json_array_get(command, 1));
    const char *a2 = json_string_value(json_array_get(command, 2));
    return strncmp(b, "python", 6) == 0 && a1 && a2 && strcmp(a1, "-m") == 0 &&
           (strcmp(a2, "torch.distributed.run") == 0 ||
            strcmp(a2, "torch.distributed.launch") == 0);
}

int ctl_batch_tasks_per_node(const ctl_job *j, size_t node_gpus, bool *launcher)
{
    json_t *cmd = json_object_get(j->spec, "command");
    *launcher = !json_object_get(j->spec, "script") && ctl_batch_is_launcher(cmd);
    json_int_t tpn = json_integer_value(json_object_get(j->spec, "tasks_per_node"));
    if (tpn > 0) {
        return (int)tpn;
    }
    if (*launcher || json_object_get(j->spec, "image")) {
        return 1; /* (a container: one per node, its launcher starts the rest) */
    }
    if ((strcmp(j->kind, "pretrain") == 0 || strcmp(j->kind, "finetune") == 0) && node_gpus > 0) {
        return (int)(node_gpus < CTL_MAX_TASKS_PER_NODE ? node_gpus : CTL_MAX_TASKS_PER_NODE);
    }
    return 1;
}

bool ctl_batch_is_batch(const ctl_job *j)
{
    return json_is_true(json_object_get(j->spec, "batch")) &&
           json_is_string(json_object_get(j->spec, "script")) &&
           !json_object_get(j->spec, "image") && !json_object_get(j->spec, "service");
}

void ctl_batch_step_token(const ctl *c, const ctl_job *j, char out[CTL_STEP_TOKEN_LEN + 1])
{
    /* keyed by the controller's secret key, so every controller of the
     * cluster (and a restarted one) gives the same token for a run */
    uint8_t h[32];
    char msg[64];
    int n = snprintf(msg, sizeof msg, "corral-step %lld %d", (long long)j->id, j->runs);
    crypto_generichash(h, sizeof h, (const uint8_t *)msg, (size_t)n, c->secret_key,
                       sizeof c->secret_key);
    sodium_bin2hex(out, CTL_STEP_TOKEN_LEN + 1, h, CTL_STEP_TOKEN_LEN / 2);
    sodium_memzero(h, sizeof h);
}

#define STEPS_PER_JOB 256
#define STEP_JOBS     4096

void ctl_batch_step_report(ctl *c, cr_http_req *req, const char *idtext, const char *token)
{
    int64_t id = 0;
    size_t len = 0;
    const char *body = cr_http_body(req, &len);
    json_t *v = body && len ? json_loadb(body, len, 0, NULL) : NULL;
    if (cr_parse_i64(idtext, 1, INT64_MAX / 2, &id) != 0 || !json_is_object(v)) {
        json_decref(v);
        ctl_reply_err(req, 400, CR_EINVAL, NULL, "a step record: POST /v1/jobs/ID/steps {...}");
        return;
    }
    json_int_t step = json_integer_value(json_object_get(v, "step"));
    const char *name = json_string_value(json_object_get(v, "name"));
    const char *state = json_string_value(json_object_get(v, "state"));
    const char *nodes = json_string_value(json_object_get(v, "nodes"));
    json_int_t ntasks = json_integer_value(json_object_get(v, "ntasks"));
    json_t *code = json_object_get(v, "exit_code");
    static const char *const states[] = {"running", "completed", "failed", "cancelled", NULL};
    bool state_ok = false;
    for (size_t i = 0; state && states[i]; i++) {
        state_ok |= strcmp(state, states[i]) == 0;
    }
    pthread_mutex_lock(&c->mu);
    ctl_job *j = ctl_job_get(c, id);
    char want[CTL_STEP_TOKEN_LEN + 1] = "";
    if (j && j->state == JS_RUNNING && ctl_batch_is_batch(j)) {
        ctl_batch_step_token(c, j, want);
    }
    bool ok = *want && token && strlen(token) == CTL_STEP_TOKEN_LEN &&
              sodium_memcmp(token, want, CTL_STEP_TOKEN_LEN) == 0;
    sodium_memzero(want, sizeof want);
    if (!ok) {
        pthread_mutex_unlock(&c->mu);
        json_decref(v);
        ctl_reply_err(req, 401, CR_EAUTH, NULL,
                      "the step credential of a running batch job is "
                      "required");
        return;
    }
    if (step < 0 || ntasks < 0 || !state_ok || !name || !ctl_text_clean(name) ||
        strlen(name) > 200 || (nodes && (!ctl_text_clean(nodes) || strlen(nodes) > 4000))) {
        pthread_mutex_unlock(&c->mu);
        json_decref(v);
        ctl_reply_err(req, 400, CR_EINVAL, NULL,
                      "a step record: step, name (up to 200 bytes), ntasks, nodes, state "
                      "(running, completed, failed, cancelled), exit_code");
        return;
    }
    if (!c->steps || json_object_size(c->steps) >= STEP_JOBS) {
        json_decref(c->steps); /* (memory only: the oldest go with the rest) */
        c->steps = json_object();
    }
    char key[24];
    snprintf(key, sizeof key, "%lld", (long long)id);
    json_t *list = json_object_get(c->steps, key);
    if (!list) {
        list = json_array();
        json_object_set_new(c->steps, key, list);
    }
    json_t *rec = json_pack("{s:I,s:s,s:I,s:s,s:s}", "step", step, "name", name, "ntasks", ntasks,
                            "nodes", nodes ? nodes : "", "state", state);
    if (json_is_integer(code)) {
        json_object_set(rec, "exit_code", code);
    }
    size_t i;
    for (i = 0; i < json_array_size(list); i++) {
        if (json_integer_value(json_object_get(json_array_get(list, i), "step")) == step) {
            break;
        }
    }
    if (i < json_array_size(list)) {
        json_array_set_new(list, i, rec);
    } else if (json_array_size(list) < STEPS_PER_JOB) {
        json_array_append_new(list, rec);
    } else {
        json_decref(rec);
    }
    pthread_mutex_unlock(&c->mu);
    json_decref(v);
    ctl_reply_json(req, 200, json_pack("{s:b}", "ok", 1));
}

json_t *ctl_batch_steps(ctl *c, int64_t id)
{
    char key[24];
    snprintf(key, sizeof key, "%lld", (long long)id);
    json_t *list = c->steps ? json_object_get(c->steps, key) : NULL;
    return list ? json_deep_copy(list) : NULL;
}

void ctl_batch_entry(const ctl_job *j, cr_buf *b)
{
    static const char *const copy[] = {"script",     "output",    "error", "name",
                                       "submit_dir", "open_mode", NULL};
    for (size_t i = 0; copy[i]; i++) {
        json_t *v = json_object_get(j->spec, copy[i]);
        if (json_is_string(v)) {
            ctl_jw_kjson(b, copy[i], v);
        }
    }
    if (j->array_first > 0) {
        ctl_jw_kint(b, "array_index", j->array_index);
        ctl_jw_kint(b, "array_job", j->array_first);
        /* SLURM_ARRAY_TASK_COUNT, _MIN, _MAX, _STEP (ctl_jobspec.c) */
        json_t *st = json_object_get(j->spec, "array_stats");
        static const char *const keys[][2] = {{"count", "array_count"},
                                              {"min", "array_min"},
                                              {"max", "array_max"},
                                              {"step", "array_step"}};
        for (size_t k = 0; st && k < 4; k++) {
            json_t *v = json_object_get(st, keys[k][0]);
            if (json_is_integer(v)) {
                ctl_jw_kjson(b, keys[k][1], v);
            }
        }
    }
    json_t *cpt = json_object_get(j->spec, "cpus_per_task");
    if (json_is_number(cpt)) {
        ctl_jw_kjson(b, "cpus_per_task", cpt);
    }
    if (ctl_batch_is_batch(j) && !json_object_get(j->spec, "tasks_per_node")) {
        /* sbatch sets SLURM_NTASKS only when the job asked for tasks */
        ctl_jw_ktrue(b, "ntasks_unset");
    }
    if (j->sig_at > 0 && *j->sig_name && ctl_jw_str_ok(j->sig_name)) {
        ctl_jw_key(b, "signal");
        cr_buf_putc(b, '{');
        ctl_jw_kstr(b, "name", j->sig_name);
        ctl_jw_kint(b, "at", j->sig_at);
        cr_buf_putc(b, '}');
    }
    char list[4096] = "";
    size_t off = 0;
    for (size_t k = 0; k < j->nplace && off < sizeof list; k++) {
        off +=
            (size_t)snprintf(list + off, sizeof list - off, "%s%s", k ? "," : "", j->place[k].node);
    }
    if (off < sizeof list) {
        ctl_jw_kstr(b, "nodelist", list);
    }
}

/* ------------------------------------------------------------------------ */
/* Arrays and dependencies (their syntax: ctl_batchspec.c)                  */

ctl_job *ctl_batch_array_task(ctl *c, int64_t first, int32_t index)
{
    for (int64_t id = first;; id++) {
        ctl_job *t = ctl_job_fetch(c, id);
        if (!t || t->array_first != first) {
            return NULL;
        }
        if (t->array_index == index) {
            return t;
        }
    }
}

/* How the targets of one dependency term stand: counts of tasks pending or
 * running, started (ever), completed, failed or cancelled. */
typedef struct dep_count {
    int active, started, ok, notok, total;
    int64_t first_active; /* a job still waited on, for the reason */
} dep_count;

static void dep_add(dep_count *d, ctl_job *t)
{
    /* read every tick while its dependent waits: retention leaves it in
     * memory meanwhile (rather than a store read under mu each tick) */
    t->dep_mono = cr_mono_ns();
    d->total++;
    bool term = ctl_job_terminal(t);
    if (t->state == JS_COMPLETED) {
        d->ok++;
    } else if (term) {
        d->notok++;
    } else {
        d->active++;
        if (!d->first_active) {
            d->first_active = t->id;
        }
    }
    if (t->start_ns > 0 || t->runs > 0 || term) {
        d->started++;
    }
}

/* The jobs an id names: one job, a whole array (its first id), or one
 * task ("ID_INDEX"). Returns false when none exists. */
static bool dep_targets(ctl *c, const char *ref, dep_count *d)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", ref);
    char *us = strchr(buf, '_');
    int64_t id = 0, ix = -1;
    if (us) {
        *us = '\0';
        cr_parse_i64(us + 1, 0, MAX_ARRAY_INDEX, &ix);
    }
    cr_parse_i64(buf, 1, INT64_MAX / 2, &id);
    ctl_job *j = ctl_job_fetch(c, id); /* (a finished job may have left memory) */
    if (!j) {
        return false;
    }
    if (ix >= 0) {
        ctl_job *t = j->array_first == id ? ctl_batch_array_task(c, id, (int32_t)ix) : NULL;
        if (!t) {
            return false;
        }
        dep_add(d, t);
        return true;
    }
    if (j->array_first == id) {
        for (int64_t k = id;; k++) {
            ctl_job *t = ctl_job_fetch(c, k);
            if (!t || t->array_first != id) {
                break;
            }
            dep_add(d, t);
        }
        return true;
    }
    dep_add(d, j);
    return true;
}

int ctl_batch_dep_refs(ctl *c, const char *text, const char *tenant, bool admin, char *why,
                       size_t whylen)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(t, ':');
        if (!colon) {
            continue;
        }
        char *s2 = NULL;
        for (char *id = strtok_r(colon + 1, ":", &s2); id; id = strtok_r(NULL, ":", &s2)) {
            dep_count d = {0};
            int64_t jid = 0;
            char num[64];
            snprintf(num, sizeof num, "%.*s", (int)strcspn(id, "_"), id);
            cr_parse_i64(num, 1, INT64_MAX / 2, &jid);
            ctl_job *j = ctl_job_fetch(c, jid);
            if (!j || (!admin && strcmp(j->tenant, tenant) != 0) || !dep_targets(c, id, &d)) {
                snprintf(why, whylen, "job %s not found", id);
                return CR_ENOENT;
            }
        }
    }
    return 0;
}

/* Whether the dependency of j holds (0), may yet hold (1, why: what it
 * waits on) or never will (-1, why: the reason). mu held. */
static int dep_gate(ctl *c, const ctl_job *j, const char *text, char *why, size_t whylen)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL;
    int res = 0;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (strcmp(t, "singleton") == 0) {
            const char *name = json_string_value(json_object_get(j->spec, "name"));
            size_t slot = ctl_first_active_slot(c);
            for (const ctl_job *o; (o = ctl_job_next(c, &slot)) && o->id < j->id;) {
                const char *on = json_string_value(json_object_get(o->spec, "name"));
                if (!ctl_job_terminal(o) && on && name && strcmp(on, name) == 0 &&
                    strcmp(o->tenant, j->tenant) == 0) {
                    snprintf(why, whylen, "waiting for job %lld (singleton: same name '%s')",
                             (long long)o->id, name);
                    res = 1;
                    break;
                }
            }
            continue;
        }
        char *colon = strchr(t, ':');
        if (!colon) {
            continue;
        }
        *colon = '\0';
        const char *kind = t;
        char *s2 = NULL;
        for (char *id = strtok_r(colon + 1, ":", &s2); id; id = strtok_r(NULL, ":", &s2)) {
            dep_count d = {0};
            if (!dep_targets(c, id, &d)) {
                snprintf(why, whylen, "dependency can never be met: job %s is gone (%s)", id, kind);
                return -1;
            }
            bool never = (strcmp(kind, "afterok") == 0 && d.notok > 0) ||
                         (strcmp(kind, "afternotok") == 0 && d.active == 0 && d.notok == 0);
            if (never) {
                snprintf(why, whylen, "dependency can never be met: job %s %s (%s:%s)", id,
                         strcmp(kind, "afterok") == 0 ? "failed or was cancelled"
                                                      : "completed successfully",
                         kind, id);
                return -1;
            }
            bool met = strcmp(kind, "after") == 0 ? d.started == d.total : d.active == 0;
            if (!met && res == 0) {
                snprintf(why, whylen, "waiting for job %lld (%s:%s)",
                         (long long)(d.first_active ? d.first_active : 0), kind, id);
                res = 1;
            }
        }
    }
    return res;
}

/* Tasks of j's array that hold or may soon hold GPUs (known to the
 * scheduler, running or stopping). mu held. */
static int array_busy(ctl *c, int64_t first)
{
    int n = 0;
    for (int64_t k = first;; k++) {
        ctl_job *t = ctl_job_get(c, k);
        if (!t || t->array_first != first) {
            break;
        }
        n += t->state == JS_RUNNING || t->state == JS_COMPLETING ||
             (t->state == JS_PENDING && !t->gated);
    }
    return n;
}

int ctl_batch_gate(ctl *c, const ctl_job *j, int64_t now_wall, int busy, char *why, size_t whylen)
{
    json_int_t begin = json_integer_value(json_object_get(j->spec, "begin_unix"));
    if (begin > 0 && now_wall < (int64_t)begin * CR_NS_PER_SEC) {
        char t[64];
        snprintf(why, whylen, "begins at %s (--begin)",
                 ctl_time_str((int64_t)begin * CR_NS_PER_SEC, t, sizeof t));
        return 1;
    }
    const char *dep = json_string_value(json_object_get(j->spec, "dependency"));
    if (dep && *dep) {
        int r = dep_gate(c, j, dep, why, whylen);
        if (r != 0) {
            return r;
        }
    }
    json_int_t thr = json_integer_value(json_object_get(j->spec, "array_throttle"));
    if (thr > 0 && j->array_first > 0) {
        if (busy < 0) {
            busy = array_busy(c, j->array_first);
        }
        if (busy >= thr) {
            snprintf(why, whylen, "array throttle: %d of %lld tasks at a time already active", busy,
                     (long long)thr);
            return 1;
        }
    }
    return 0;
}

bool ctl_batch_has_gate(const ctl_job *j)
{
    return json_object_get(j->spec, "dependency") || json_object_get(j->spec, "array_throttle") ||
           json_object_get(j->spec, "begin_unix");
}

void ctl_batch_admit(ctl *c, ctl_job *j)
{
    char why[256];
    if (ctl_batch_has_gate(j) && ctl_batch_gate(c, j, cr_now_ns(), -1, why, sizeof why) != 0) {
        j->gated = true;
        ctl_job_set_reason(j, why);
        CR_GROW(c->gated, c->ngated, c->capgated);
        c->gated[c->ngated++] = j->id;
        return;
    }
    j->gated = false;
    ctl_sched_add(c, j->id);
}

void ctl_batch_tick(ctl *c)
{
    pthread_mutex_lock(&c->mu);
    if (c->ngated == 0) {
        pthread_mutex_unlock(&c->mu);
        return;
    }
    cr_store_txn *txn = NULL;
    int64_t now = cr_now_ns();
    size_t keep = 0;
    /* The gated list is in id order, so an array's tasks are together:
     * count its active tasks once per tick, then as tasks are admitted. */
    int64_t arr = 0;
    int busy = -1;
    for (size_t i = 0; i < c->ngated; i++) {
        ctl_job *j = ctl_job_get(c, c->gated[i]);
        if (!j || !j->gated || j->state != JS_PENDING) {
            if (j) {
                j->gated = false;
            }
            continue; /* cancelled, held or gone: released from the gate */
        }
        char why[256];
        if (j->array_first != arr) {
            arr = j->array_first;
            busy = arr > 0 ? array_busy(c, arr) : -1;
        }
        int r = ctl_batch_gate(c, j, now, busy, why, sizeof why);
        if (r == 0) {
            busy += busy >= 0;
            j->gated = false;
            ctl_job_set_reason(j, "not yet considered");
            ctl_sched_add(c, j->id);
            if (!txn) {
                txn = cr_store_txn_new();
                cr_store_txn_splittable(txn); /* per job: independent */
            }
            ctl_job_persist(c, txn, j, "eligible", "dependency, throttle and begin time met");
            continue;
        }
        if (r < 0) {
            j->gated = false;
            j->state = JS_CANCELLED;
            j->end_ns = now;
            ctl_job_set_reason(j, why);
            atomic_fetch_add(&c->jobs_finished[JS_CANCELLED], 1);
            if (!txn) {
                txn = cr_store_txn_new();
                cr_store_txn_splittable(txn);
            }
            ctl_job_persist(c, txn, j, "cancelled", why);
            continue;
        }
        ctl_job_set_reason(j, why);
        c->gated[keep++] = j->id;
    }
    c->ngated = keep;
    if (txn) {
        cr_store_submit(c->store, txn, NULL, NULL);
    }
    pthread_mutex_unlock(&c->mu);
}

/* ------------------------------------------------------------------------ */
/* Node selection: --nodelist, --exclude, --constraint                      */

/* Whether name is an item of the comma list. */
static bool in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, name, n) == 0) {
            return true;
        }
        p += len + (p[len] == ',');
    }
    return false;
}

bool ctl_batch_has_node_filter(const ctl_job *j)
{
    return json_object_get(j->spec, "nodelist") || json_object_get(j->spec, "exclude") ||
           json_object_get(j->spec, "constraint") || json_object_get(j->spec, "partition");
}

bool ctl_batch_node_allowed(ctl *c, const ctl_job *j, const ctl_node *n)
{
    const char *incl = json_string_value(json_object_get(j->spec, "nodelist"));
    const char *excl = json_string_value(json_object_get(j->spec, "exclude"));
    const char *cons = json_string_value(json_object_get(j->spec, "constraint"));
    if ((incl && !in_list(incl, n->name)) || (excl && in_list(excl, n->name))) {
        return false;
    }
    const char *pname = json_string_value(json_object_get(j->spec, "partition"));
    const json_t *part = pname ? ctl_part_find(&c->cfg, pname) : NULL;
    if (pname && (!part || !ctl_part_holds(c, part, n))) {
        return false; /* (a partition gone from the config holds no node) */
    }
    /* constraint: LABEL or LABEL=VALUE terms, all of which must hold ('&' or ',') */
    for (const char *p = cons; p && *p;) {
        size_t len = strcspn(p, "&,");
        char term[128];
        snprintf(term, sizeof term, "%.*s", (int)(len < sizeof term ? len : 0), p);
        char *eq = strchr(term, '=');
        if (eq) {
            *eq = '\0';
        }
        /* an admin's label (corral nodes label) over the agent's (--label) */
        const char *have = json_string_value(json_object_get(ctl_node_labels(c, n->name), term));
        if (!have) {
            have = json_string_value(json_object_get(n->labels, term));
        }
        if (!have || (eq && strcmp(have, eq + 1) != 0)) {
            return false;
        }
        p += len + (p[len] != '\0');
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Signals: --signal SIG@SECONDS, cancel --signal SIG                       */

void ctl_batch_signal(ctl *c, ctl_job *j, const char *name)
{
    snprintf(j->sig_name, sizeof j->sig_name, "%s", name);
    int64_t now = cr_now_ns();
    j->sig_at = now > j->sig_at ? now : j->sig_at + 1;
    for (size_t k = 0; k < j->nplace; k++) {
        ctl_node *n = ctl_node_find(c, j->place[k].node);
        if (n) {
            ctl_node_bump(c, n);
        }
    }
}

void ctl_batch_signal_due(ctl *c, ctl_job *j, int64_t now, cr_store_txn **txn)
{
    const char *spec = json_string_value(json_object_get(j->spec, "warn_signal"));
    char name[12];
    int64_t secs;
    /* now and start_mono_ns are monotonic, as the time limit's own check */
    if (!spec || j->time_limit_s <= 0 || j->start_ns <= 0 || j->sig_warned_run == j->runs ||
        ctl_batch_signal_parse(spec, name, sizeof name, &secs) != 0 ||
        now - j->start_mono_ns < (j->time_limit_s - secs) * CR_NS_PER_SEC) {
        return;
    }
    j->sig_warned_run = j->runs;
    ctl_batch_signal(c, j, name);
    if (!*txn) {
        *txn = cr_store_txn_new();
    }
    char why[96];
    snprintf(why, sizeof why, "SIG%s, %llds before the time limit", name, (long long)secs);
    ctl_job_persist(c, *txn, j, "signalled", why);
}
