/*
 * ctl_jobobj.c - the job object: lookup by id, insert, free, its API view,
 * its stored row (the document written to SQLite) and the pending reason.
 *
 * Used by every controller file; calls nothing above it (only the store,
 * ctl_util.c and the common layer), so the files that act on jobs (submit
 * and actions in ctl_jobs.c, ctl_state.c, ctl_sched.c, ctl_nodes.c, ...)
 * do not call one another for these.
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_log.h"
#include "cr_time.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool ctl_job_terminal(const ctl_job *j)
{
    return j->state == JS_COMPLETED || j->state == JS_FAILED || j->state == JS_CANCELLED;
}

void ctl_job_free(ctl_job *j)
{
    if (!j) {
        return;
    }
    json_decref(j->spec);
    json_decref(j->secrets);
    free(j->secrets_enc);
    free(j->reason);
    free(j->place);
    free(j->last_nodes);
    free(j);
}

void ctl_job_set_reason(ctl_job *j, const char *reason)
{
    if (reason && j->reason && strcmp(reason, j->reason) == 0) {
        return;
    }
    /* Rewritten in place when it fits: a pending job's reason changes
     * with the cluster, and a new small string each time, made on the
     * scheduler's thread for a job kept for minutes, fragments the heap. */
    size_t len = reason ? strlen(reason) : 0;
    if (reason && j->reason && len < malloc_usable_size(j->reason)) {
        memcpy(j->reason, reason, len + 1);
        return;
    }
    free(j->reason);
    j->reason = reason ? cr_strdup(reason) : NULL;
}

ctl_job_state ctl_job_shown_state(const ctl_job *j)
{
    return j->start_unstored ? JS_PENDING : j->state;
}

void ctl_job_view_env(json_t *v)
{
    json_object_del(v, "env_enc");
    json_t *env = json_object_get(v, "env");
    if (env) {
        /* a row stored before sealing: its names, as a sealed row shows */
        if (json_object_size(env) > 0) {
            json_object_set_new(v, "env_names", ctl_env_names(env));
        }
        json_object_del(v, "env");
    }
}

json_t *ctl_job_json(const ctl_job *j)
{
    char t[64];
    json_t *v = json_copy(j->spec);
    ctl_job_view_env(v);
    json_object_set_new(v, "id", json_integer(j->id));
    json_object_set_new(v, "tenant", json_string(j->tenant));
    if (j->array_first > 0) {
        json_object_set_new(v, "array_index", json_integer(j->array_index));
        json_object_set_new(v, "array_first", json_integer(j->array_first));
    }
    /* A start not yet durable is not shown: pending until it is stored. */
    bool unstored = j->start_unstored;
    json_object_set_new(v, "state", json_string(ctl_job_state_names[ctl_job_shown_state(j)]));
    json_object_set_new(v, "reason",
                        json_string(unstored    ? CTL_STARTING_REASON
                                    : j->reason ? j->reason
                                                : ""));
    json_object_set_new(v, "exit_code", json_integer(j->exit_code));
    json_object_set_new(v, "signal", json_integer(j->signal));
    json_object_set_new(v, "retries", json_integer(j->retries));
    json_object_set_new(v, "runs", json_integer(j->runs));
    json_object_set_new(v, "submit_time", json_string(ctl_time_str(j->submit_ns, t, sizeof t)));
    json_object_set_new(v, "start_time",
                        json_string(ctl_time_str(unstored ? 0 : j->start_ns, t, sizeof t)));
    json_object_set_new(v, "end_time", json_string(ctl_time_str(j->end_ns, t, sizeof t)));
    if (*j->run_type) {
        json_object_set_new(v, "run_gpu_type", json_string(j->run_type));
    }
    if (j->plan.tp > 0) {
        json_object_set_new(v, "plan", ctl_plan_json(&j->plan));
    }
    if (j->last_nodes) {
        /* The last run's tasks (logs --rank, --all). */
        json_object_set_new(v, "run_nodes", json_string(j->last_nodes));
        json_object_set_new(v, "tasks_per_node_run", json_integer(j->last_tpn));
    }
    json_t *pl = json_array();
    for (size_t i = 0; i < (unstored ? 0 : j->nplace); i++) {
        json_t *g = json_array();
        for (size_t k = 0; k < j->place[i].ngpus; k++) {
            json_array_append_new(g, json_integer(j->place[i].gpus[k]));
        }
        json_t *p = json_pack("{s:s,s:o}", "node", j->place[i].node, "gpus", g);
        if (*j->place[i].mig_profile) {
            json_object_set_new(p, "mig_profile", json_string(j->place[i].mig_profile));
        }
        json_array_append_new(pl, p);
    }
    json_object_set_new(v, "placement", pl);
    return v;
}

/* The stored form: the API object plus exact times. */
/* A JSON string literal (input is valid UTF-8: validated or our own text). */
/*
 * The stored form: the API object plus exact times, written directly
 * (submissions are the hot path; building a jansson tree per job costs
 * more than the rest of the request). spec_json is the compact JSON of
 * j->spec, shared by the tasks of an array.
 */
/* ",\"key\":N" (key plain ASCII), without printf: a stored document
 * takes a dozen of these at every submit, start and end. */
static void put_num(cr_buf *b, const char *key, int64_t v)
{
    cr_buf_puts(b, key);
    ctl_jw_int(b, v);
}

static void put_time(cr_buf *b, const char *key, int64_t ns)
{
    char t[64];
    cr_buf_puts(b, key);
    cr_buf_putc(b, '"');
    cr_buf_puts(b, ctl_time_str(ns, t, sizeof t));
    cr_buf_putc(b, '"');
}

char *ctl_job_doc_with(const ctl_job *j, const char *spec_json)
{
    cr_buf b;
    cr_buf_init(&b);
    size_t n = strlen(spec_json);
    if (j->array_first > 0 && j->id != j->array_first) {
        /* Array tasks store their shared spec once, in the first task's row. */
        put_num(&b, "{\"spec_ref\":", j->array_first);
        cr_buf_putc(&b, ',');
    } else if (n >= 2 && spec_json[n - 1] == '}') {
        cr_buf_append(&b, spec_json, n - 1);
        if (n > 2) {
            cr_buf_putc(&b, ',');
        }
    } else {
        cr_buf_putc(&b, '{');
    }
    put_num(&b, "\"id\":", j->id);
    cr_buf_puts(&b, ",\"tenant\":");
    cr_buf_put_jstr(&b, j->tenant);
    if (j->array_first > 0) {
        put_num(&b, ",\"array_index\":", j->array_index);
        put_num(&b, ",\"array_first\":", j->array_first);
    }
    cr_buf_puts(&b, ",\"state\":\"");
    cr_buf_puts(&b, ctl_job_state_names[j->state]);
    cr_buf_puts(&b, "\",\"reason\":");
    cr_buf_put_jstr(&b, j->reason);
    put_num(&b, ",\"exit_code\":", j->exit_code);
    put_num(&b, ",\"signal\":", j->signal);
    put_num(&b, ",\"retries\":", j->retries);
    put_num(&b, ",\"runs\":", j->runs);
    if (j->susp_run > 0) {
        /* suspended, the run checkpointing: held across a restart */
        put_num(&b, ",\"susp_run\":", j->susp_run);
    }
    put_time(&b, ",\"submit_time\":", j->submit_ns);
    put_time(&b, ",\"start_time\":", j->start_ns);
    put_time(&b, ",\"end_time\":", j->end_ns);
    if (*j->run_type) {
        cr_buf_puts(&b, ",\"run_gpu_type\":");
        cr_buf_put_jstr(&b, j->run_type);
    }
    if (j->plan.tp > 0) {
        json_t *pv = ctl_plan_json(&j->plan);
        char *ps = json_dumps(pv, JSON_COMPACT);
        cr_buf_printf(&b, ",\"plan\":%s", ps ? ps : "{}");
        free(ps);
        json_decref(pv);
    }
    if (j->last_nodes) {
        cr_buf_puts(&b, ",\"run_nodes\":");
        cr_buf_put_jstr(&b, j->last_nodes);
        put_num(&b, ",\"tasks_per_node_run\":", j->last_tpn);
    }
    cr_buf_puts(&b, ",\"placement\":[");
    for (size_t i = 0; i < j->nplace; i++) {
        cr_buf_puts(&b, i ? ",{\"node\":" : "{\"node\":");
        cr_buf_put_jstr(&b, j->place[i].node);
        cr_buf_puts(&b, ",\"gpus\":[");
        for (size_t k = 0; k < j->place[i].ngpus; k++) {
            put_num(&b, k ? "," : "", j->place[i].gpus[k]);
        }
        cr_buf_putc(&b, ']');
        if (*j->place[i].mig_profile) {
            cr_buf_puts(&b, ",\"mig_profile\":");
            cr_buf_put_jstr(&b, j->place[i].mig_profile);
            cr_buf_puts(&b, ",\"mig_starts\":[");
            for (size_t k = 0; k < j->place[i].ngpus; k++) {
                put_num(&b, k ? "," : "", j->place[i].mig_start[k]);
            }
            cr_buf_putc(&b, ']');
        }
        cr_buf_putc(&b, '}');
    }
    put_num(&b, "],\"submit_ns\":", j->submit_ns);
    put_num(&b, ",\"start_ns\":", j->start_ns);
    put_num(&b, ",\"end_ns\":", j->end_ns);
    put_num(&b, ",\"acct_ns\":", j->acct_ns);
    cr_buf_puts(&b, ",\"last_node\":");
    cr_buf_put_jstr(&b, j->last_node);
    if (j->secrets_enc) {
        cr_buf_puts(&b, ",\"secrets_enc\":");
        cr_buf_put_jstr(&b, j->secrets_enc);
    }
    cr_buf_puts(&b,
                j->cancel_requested ? ",\"cancel_requested\":true" : ",\"cancel_requested\":false");
    cr_buf_puts(&b, j->timed_out ? ",\"timed_out\":true" : ",\"timed_out\":false");
    cr_buf_puts(&b, j->requeue_requested ? ",\"requeue_requested\":true}"
                                         : ",\"requeue_requested\":false}");
    return cr_buf_take(&b);
}

char *ctl_job_doc(const ctl_job *j)
{
    if (j->array_first > 0 && j->id != j->array_first) {
        return ctl_job_doc_with(j, "{}");
    }
    char *spec = ctl_jw_dumps(j->spec);
    char *doc = ctl_job_doc_with(j, spec ? spec : "{}");
    free(spec);
    return doc;
}

int64_t ctl_doc_spec_ref(const char *doc)
{
    static const char pre[] = "{\"spec_ref\":";
    if (strncmp(doc, pre, sizeof pre - 1) != 0) {
        return 0;
    }
    return strtoll(doc + sizeof pre - 1, NULL, 10);
}

ctl_job *ctl_job_get(ctl *c, int64_t id)
{
    if (id < 1 || (size_t)id > c->njobs_slots) {
        return NULL;
    }
    return ctl_job_at(c, (size_t)id - 1);
}

void ctl_job_insert(ctl *c, ctl_job *j)
{
    size_t i = (size_t)j->id - 1, ci = i / CTL_JOB_CHUNK;
    if (ci >= c->nchunks) {
        size_t n = c->nchunks ? c->nchunks : 16;
        while (n <= ci) {
            n *= 2;
        }
        c->jobchunks = cr_reallocarray(c->jobchunks, n, sizeof *c->jobchunks);
        memset(c->jobchunks + c->nchunks, 0, (n - c->nchunks) * sizeof *c->jobchunks);
        c->nchunks = n;
    }
    if (!c->jobchunks[ci]) {
        c->jobchunks[ci] = cr_calloc(1, sizeof *c->jobchunks[ci]);
    }
    if ((size_t)j->id > c->njobs_slots) {
        c->njobs_slots = (size_t)j->id;
    }
    ctl_job_chunk *k = c->jobchunks[ci];
    ctl_job **slot = &k->slot[i % CTL_JOB_CHUNK];
    if (*slot) {
        ctl_job_free(*slot);
    } else {
        k->used++;
    }
    *slot = j;
    if (!ctl_job_terminal(j) && j->id < c->first_active) {
        c->first_active = j->id; /* a walk from first_active must see it */
    }
    if (j->id >= c->next_id) {
        c->next_id = j->id + 1;
    }
}

void ctl_job_persist_doc(cr_store_txn *txn, ctl_job *j, char *doc, const char *what,
                         const char *why)
{
    cr_store_txn_put_job(txn, j->id, j->tenant, ctl_job_state_names[j->state], doc);
    free(doc);
    if (what) {
        cr_store_txn_event(txn, j->id, cr_now_ns(), what, why ? why : "");
    }
}

void ctl_job_persist(ctl *c, cr_store_txn *txn, ctl_job *j, const char *what, const char *why)
{
    j->ver++; /* a change committed after this one's was prepared is stale (ctl_state.c) */
    char *doc = ctl_job_doc(j);
    cr_store_txn_put_job(txn, j->id, j->tenant, ctl_job_state_names[j->state], doc);
    free(doc);
    if (what) {
        cr_store_txn_event(txn, j->id, cr_now_ns(), what, why ? why : "");
        cr_debug("job=%lld %s: %s", (long long)j->id, what, why ? why : "");
    }
}

void ctl_job_drop(ctl *c, size_t i)
{
    size_t ci = i / CTL_JOB_CHUNK;
    ctl_job_chunk *k = ci < c->nchunks ? c->jobchunks[ci] : NULL;
    if (!k || !k->slot[i % CTL_JOB_CHUNK]) {
        return;
    }
    ctl_job_free(k->slot[i % CTL_JOB_CHUNK]);
    k->slot[i % CTL_JOB_CHUNK] = NULL;
    if (--k->used == 0) {
        free(k);
        c->jobchunks[ci] = NULL;
    }
}

void ctl_jobs_free_all(ctl *c)
{
    for (size_t ci = 0; ci < c->nchunks; ci++) {
        ctl_job_chunk *k = c->jobchunks[ci];
        for (size_t i = 0; k && i < CTL_JOB_CHUNK; i++) {
            ctl_job_free(k->slot[i]);
        }
        free(k);
    }
    free(c->jobchunks);
    c->jobchunks = NULL;
    c->nchunks = c->njobs_slots = 0;
}
