/*
 * store_etcd.c - the store's etcd backend: open, the group-committing
 * writer and fencing. Readers are in store_etcd_read.c; the key layout is
 * in store_etcd_int.h.
 *
 * The writer thread takes every queued transaction (up to max_batch), and
 * packs them, in order, into etcd txns of at most max_ops operations and
 * STORE_ETCD_MAX_BYTES bytes: a transaction goes whole into one etcd txn
 * (atomic) unless it was marked splittable; one that alone does not fit
 * fails with CR_ETOOBIG. A key written twice in one etcd txn (etcd refuses
 * duplicates) keeps its last value: inside one atomic txn that is the same
 * outcome. done(0) is called only after etcd answered that the txn
 * committed.
 *
 * Derived keys (the job state index and per tenant/state counts) and the
 * sums of usage rows are computed by the writer from caches it loads from
 * etcd at start and whenever a fence is set (a previous writer may have
 * written). Every cache change is logged so that a txn that fails is
 * undone in memory; a failure whose outcome is unknown (timeout, lost
 * connection) makes the writer reload its caches before the next batch.
 *
 * Lock order: s->qmu guards the queue, stop, the fence and the reload
 * flag; it is never held during a request. Cache state belongs to the
 * writer thread.
 */
#include "store_etcd_int.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"
#include "cr_log.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Caches: interned names, the job index, counts, usage sums                 */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    }
    return h;
}

static uint64_t hash_i64(int64_t v)
{
    uint64_t x = (uint64_t)v;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

/* Interned names (tenants, states): index in names[], found by hash. */
static uint32_t intern(estore_names *t, const char *name)
{
    if (t->cap == 0 || (t->n + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        uint32_t *slots = cr_malloc(cap * sizeof *slots);
        memset(slots, 0xff, cap * sizeof *slots);
        for (size_t i = 0; i < t->n; i++) {
            size_t k = hash_str(t->names[i]) & (cap - 1);
            while (slots[k] != UINT32_MAX) {
                k = (k + 1) & (cap - 1);
            }
            slots[k] = (uint32_t)i;
        }
        free(t->slots);
        t->slots = slots;
        t->cap = cap;
    }
    size_t k = hash_str(name) & (t->cap - 1);
    while (t->slots[k] != UINT32_MAX) {
        if (strcmp(t->names[t->slots[k]], name) == 0) {
            return t->slots[k];
        }
        k = (k + 1) & (t->cap - 1);
    }
    CR_GROW(t->names, t->n, t->ncap);
    t->names[t->n] = cr_strdup(name);
    t->slots[k] = (uint32_t)t->n;
    return (uint32_t)t->n++;
}

static void names_fini(estore_names *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->names[i]);
    }
    free(t->names);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

/* The job index: id -> (tenant, state); state NO_STATE = absent. */
#define NO_STATE UINT32_MAX

static estore_job *job_slot(cr__estore *s, int64_t id, bool add)
{
    if (add && (s->njobs + 1) * 2 > s->jcap) {
        size_t cap = s->jcap ? s->jcap * 2 : 1024;
        estore_job *t = cr_calloc(cap, sizeof *t);
        for (size_t i = 0; i < s->jcap; i++) {
            if (s->jobs[i].id != 0) {
                size_t k = hash_i64(s->jobs[i].id) & (cap - 1);
                while (t[k].id != 0) {
                    k = (k + 1) & (cap - 1);
                }
                t[k] = s->jobs[i];
            }
        }
        free(s->jobs);
        s->jobs = t;
        s->jcap = cap;
    }
    if (s->jcap == 0) {
        return NULL;
    }
    size_t k = hash_i64(id) & (s->jcap - 1);
    while (s->jobs[k].id != 0) {
        if (s->jobs[k].id == id) {
            return &s->jobs[k];
        }
        k = (k + 1) & (s->jcap - 1);
    }
    if (!add) {
        return NULL;
    }
    s->jobs[k].id = id;
    s->jobs[k].state = NO_STATE;
    s->njobs++;
    return &s->jobs[k];
}

static int64_t *count_ref(cr__estore *s, uint32_t tenant, uint32_t state)
{
    while (s->ncounts <= tenant) {
        CR_GROW(s->counts, s->ncounts, s->counts_cap);
        memset(&s->counts[s->ncounts], 0, sizeof s->counts[0]);
        s->ncounts++;
    }
    estore_counts *c = &s->counts[tenant];
    while (c->n <= state) {
        CR_GROW(c->v, c->n, c->cap);
        c->v[c->n++] = 0;
    }
    return &c->v[state];
}

static estore_usage *usage_find(cr__estore *s, const char *key)
{
    for (size_t i = 0; i < s->nusage; i++) {
        if (strcmp(s->usage[i].key, key) == 0) {
            return &s->usage[i];
        }
    }
    return NULL;
}

static void caches_clear(cr__estore *s)
{
    free(s->jobs);
    s->jobs = NULL;
    s->jcap = s->njobs = 0;
    for (size_t i = 0; i < s->ncounts; i++) {
        free(s->counts[i].v);
    }
    free(s->counts);
    s->counts = NULL;
    s->ncounts = s->counts_cap = 0;
    for (size_t i = 0; i < s->nusage; i++) {
        free(s->usage[i].key);
    }
    free(s->usage);
    s->usage = NULL;
    s->nusage = s->usage_cap = 0;
    names_fini(&s->tenants);
    names_fini(&s->states);
    s->loaded = false;
}

typedef struct load_ctx {
    cr__estore *s;
    size_t plen; /* length of ".../jobstate/" */
    cr_buf tmp;
    int rc;
} load_ctx;

static void load_index_row(void *arg, const cr_etcd_kv *kv)
{
    load_ctx *l = arg;
    const char *rest = kv->key + l->plen;
    const char *slash = strrchr(rest, '/');
    char *end = NULL;
    long long id = slash ? strtoll(slash + 1, &end, 10) : 0;
    if (!slash || id <= 0 || *end != '\0' ||
        cr__estore_unesc(rest, (size_t)(slash - rest), &l->tmp) != 0) {
        cr_warn("store: etcd: ignoring a malformed index key %s", kv->key);
        return;
    }
    uint32_t st = intern(&l->s->states, cr_buf_str(&l->tmp));
    uint32_t tn = intern(&l->s->tenants, kv->value);
    estore_job *j = job_slot(l->s, id, true);
    j->tenant = tn;
    j->state = st;
    (*count_ref(l->s, tn, st))++;
}

static int get_int_key(cr__estore *s, const char *sect, int64_t *out)
{
    cr_buf k;
    cr_buf_init(&k);
    cr__estore_key(s, &k, sect);
    cr_etcd_range_req q = {.key = cr_buf_str(&k)};
    cr_etcd_range_result r;
    int rc = cr_etcd_range(s->e, &q, &r, NULL);
    *out = 0;
    if (rc == 0 && r.n == 1) {
        *out = strtoll(r.kvs[0].value, NULL, 10);
    }
    cr_etcd_range_result_fini(&r);
    cr_buf_fini(&k);
    return rc;
}

/* (Re)loads the writer's caches from etcd. */
static int caches_load(cr__estore *s)
{
    caches_clear(s);
    load_ctx l = {.s = s, .rc = 0};
    cr_buf_init(&l.tmp);
    cr_buf k;
    cr_buf_init(&k);
    cr__estore_key(s, &k, "jobstate/");
    l.plen = k.len;
    int rc = cr__estore_scan(s, cr_buf_str(&k), NULL, 0, false, load_index_row, &l, NULL);
    if (rc == 0) {
        rc = get_int_key(s, "meta/event_seq", &s->event_seq);
    }
    if (rc == 0) {
        rc = get_int_key(s, "meta/max_job_id", &s->max_job_id);
    }
    cr_buf_fini(&k);
    cr_buf_fini(&l.tmp);
    if (rc != 0) {
        cr_error("store: etcd: cannot load the writer's index: %s", cr_etcd_last_error());
        caches_clear(s);
        return rc;
    }
    s->loaded = true;
    cr_info("store: etcd: %zu jobs indexed, event seq %" PRId64, s->njobs, s->event_seq);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Groups: the etcd txn being built                                          */

typedef enum undo_kind { U_JOB, U_COUNT, U_USAGE, U_SEQ, U_MAXID } undo_kind;

typedef struct undo {
    undo_kind kind;
    int64_t id;     /* U_JOB */
    uint32_t a, b;  /* U_JOB: old tenant/state; U_COUNT: tenant/state */
    int64_t n;      /* U_COUNT: old count; U_SEQ, U_MAXID: old value */
    size_t idx;     /* U_USAGE: entry */
    double old[3];  /* U_USAGE: old sums */
    bool usage_new; /* U_USAGE: the entry was added (drop it) */
} undo;

typedef struct gop {
    char *key; /* owned */
    char *val; /* owned; NULL for a delete */
    size_t vlen;
} gop;

typedef struct group {
    gop *ops; /* the etcd ops, distinct keys */
    size_t n, cap;
    size_t bytes; /* keys and values */
    undo *log;    /* cache changes, in order */
    size_t nlog, logcap;
    size_t *members; /* indexes of the batch's transactions in this group */
    size_t nmem, memcap;
    bool events, jobs; /* meta keys to write */
} group;

/* A transaction (or an op of a splittable one) converted to etcd ops. */
typedef struct unit {
    gop *ops;
    size_t n, cap;
    size_t bytes;
} unit;

static void unit_add(unit *u, char *key, char *val, size_t vlen)
{
    for (size_t i = 0; i < u->n; i++) {
        if (strcmp(u->ops[i].key, key) == 0) {
            u->bytes -= strlen(u->ops[i].key) + u->ops[i].vlen;
            free(u->ops[i].key);
            free(u->ops[i].val);
            u->ops[i] = (gop){key, val, vlen};
            u->bytes += strlen(key) + vlen;
            return;
        }
    }
    CR_GROW(u->ops, u->n, u->cap);
    u->ops[u->n++] = (gop){key, val, vlen};
    u->bytes += strlen(key) + vlen;
}

static void unit_clear(unit *u)
{
    for (size_t i = 0; i < u->n; i++) {
        free(u->ops[i].key);
        free(u->ops[i].val);
    }
    u->n = 0;
    u->bytes = 0;
}

static void log_push(group *g, undo u)
{
    CR_GROW(g->log, g->nlog, g->logcap);
    g->log[g->nlog++] = u;
}

/* Undo cache changes back to log length mark. */
static void undo_to(cr__estore *s, group *g, size_t mark)
{
    while (g->nlog > mark) {
        undo *u = &g->log[--g->nlog];
        switch (u->kind) {
        case U_JOB: {
            estore_job *j = job_slot(s, u->id, false);
            if (j) {
                j->tenant = u->a;
                j->state = u->b;
            }
            break;
        }
        case U_COUNT:
            *count_ref(s, u->a, u->b) = u->n;
            break;
        case U_USAGE:
            if (u->usage_new) {
                free(s->usage[u->idx].key);
                s->nusage--; /* entries are added at the end, undone in reverse */
            } else {
                memcpy(s->usage[u->idx].sum, u->old, sizeof u->old);
            }
            break;
        case U_SEQ:
            s->event_seq = u->n;
            break;
        case U_MAXID:
            s->max_job_id = u->n;
            break;
        }
    }
}

static char *count_text(int64_t n)
{
    return cr_asprintf("%" PRId64, n);
}

static void put_count(cr__estore *s, group *g, unit *u, uint32_t tenant, uint32_t state,
                      int64_t delta)
{
    int64_t *c = count_ref(s, tenant, state);
    log_push(g, (undo){.kind = U_COUNT, .a = tenant, .b = state, .n = *c});
    *c += delta;
    cr_buf k;
    cr_buf_init(&k);
    cr__estore_key(s, &k, "count/");
    cr__estore_esc(&k, s->tenants.names[tenant]);
    cr_buf_putc(&k, '/');
    cr__estore_esc(&k, s->states.names[state]);
    char *v = count_text(*c);
    unit_add(u, cr_buf_take(&k), v, strlen(v));
}

static void index_key(cr__estore *s, cr_buf *k, const char *state, int64_t id)
{
    cr__estore_key(s, k, "jobstate/");
    cr__estore_esc(k, state);
    cr_buf_printf(k, "/%020" PRId64, id);
}

static void bump_max(cr__estore *s, group *g, int64_t id)
{
    if (id > s->max_job_id) {
        log_push(g, (undo){.kind = U_MAXID, .n = s->max_job_id});
        s->max_job_id = id;
    }
    g->jobs = true;
}

/* Reads a usage row's sums from etcd into a new cache entry. */
static int usage_fetch(cr__estore *s, const char *key, size_t *idx)
{
    cr_etcd_range_req q = {.key = key};
    cr_etcd_range_result r;
    int rc = cr_etcd_range(s->e, &q, &r, NULL);
    if (rc != 0) {
        return rc;
    }
    double sum[3] = {0, 0, 0};
    if (r.n == 1) {
        json_t *v = json_loads(r.kvs[0].value, 0, NULL);
        sum[0] = json_number_value(json_object_get(v, "gpu_s"));
        sum[1] = json_number_value(json_object_get(v, "energy_j"));
        sum[2] = json_number_value(json_object_get(v, "cost"));
        json_decref(v);
    }
    cr_etcd_range_result_fini(&r);
    CR_GROW(s->usage, s->nusage, s->usage_cap);
    estore_usage *e = &s->usage[s->nusage];
    e->key = cr_strdup(key);
    memcpy(e->sum, sum, sizeof sum);
    *idx = s->nusage++;
    return 0;
}

/* Converts one op into u, changing the caches (logged in g). */
static int convert_op(cr__estore *s, group *g, unit *u, const op *o)
{
    cr_buf k;
    cr_buf_init(&k);
    int rc = 0;
    switch (o->kind) {
    case OP_PUT_JOB: {
        cr_buf_printf(&k, "%sjobs/%020" PRId64, s->prefix, o->i1);
        unit_add(u, cr_buf_take(&k), cr_strdup(o->s3), strlen(o->s3));
        uint32_t tn = intern(&s->tenants, o->s1);
        uint32_t st = intern(&s->states, o->s2);
        estore_job *j = job_slot(s, o->i1, true);
        if (j->state == st && j->tenant == tn) {
            bump_max(s, g, o->i1);
            break; /* index and counts unchanged */
        }
        log_push(g, (undo){.kind = U_JOB, .id = o->i1, .a = j->tenant, .b = j->state});
        uint32_t old_t = j->tenant, old_s = j->state;
        j->tenant = tn;
        j->state = st;
        if (old_s != NO_STATE) {
            index_key(s, &k, s->states.names[old_s], o->i1);
            unit_add(u, cr_buf_take(&k), NULL, 0);
            put_count(s, g, u, old_t, old_s, -1);
        }
        index_key(s, &k, o->s2, o->i1);
        unit_add(u, cr_buf_take(&k), cr_strdup(o->s1), strlen(o->s1));
        put_count(s, g, u, tn, st, +1);
        bump_max(s, g, o->i1);
        break;
    }
    case OP_EVENT: {
        log_push(g, (undo){.kind = U_SEQ, .n = s->event_seq});
        s->event_seq++;
        cr_buf_printf(&k, "%sevents/%020" PRId64 "/%020" PRId64, s->prefix, o->i1, s->event_seq);
        json_t *v =
            json_pack("{sIssss}", "time_ns", (json_int_t)o->i2, "what", o->s1, "why", o->s2);
        char *text = json_dumps(v, JSON_COMPACT);
        json_decref(v);
        if (!text) {
            rc = CR_EINVAL;
            cr_error("store: etcd: event of job %" PRId64 " is not valid UTF-8", o->i1);
            break;
        }
        unit_add(u, cr_buf_take(&k), text, strlen(text));
        g->events = true;
        bump_max(s, g, o->i1);
        break;
    }
    case OP_PUT:
    case OP_DEL:
        if (strchr(o->s1, '/') || !*o->s1) {
            rc = CR_EINVAL;
            cr_error("store: etcd: bad object kind \"%s\"", o->s1);
            break;
        }
        cr__estore_obj_prefix(s, &k, o->s1);
        cr__estore_esc(&k, o->s2);
        if (o->kind == OP_PUT) {
            unit_add(u, cr_buf_take(&k), cr_strdup(o->s3), strlen(o->s3));
        } else {
            unit_add(u, cr_buf_take(&k), NULL, 0);
        }
        break;
    case OP_USAGE: {
        cr__estore_key(s, &k, "usage/");
        cr__estore_esc(&k, o->s4);
        cr_buf_putc(&k, '/');
        cr__estore_esc(&k, o->s1);
        cr_buf_putc(&k, '/');
        cr__estore_esc(&k, o->s2);
        estore_usage *e = usage_find(s, cr_buf_str(&k));
        size_t idx;
        undo ud = {.kind = U_USAGE};
        if (e) {
            idx = (size_t)(e - s->usage);
            memcpy(ud.old, e->sum, sizeof ud.old);
        } else {
            if ((rc = usage_fetch(s, cr_buf_str(&k), &idx)) != 0) {
                break;
            }
            ud.usage_new = true;
        }
        ud.idx = idx;
        log_push(g, ud);
        e = &s->usage[idx];
        e->sum[0] += o->d1;
        e->sum[1] += o->d2;
        e->sum[2] += o->d3;
        json_t *v = json_pack("{sssssss f s f s f}", "tenant", o->s1, "gpu_type", o->s2, "day",
                              o->s4, "gpu_s", e->sum[0], "energy_j", e->sum[1], "cost", e->sum[2]);
        char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
        json_decref(v);
        if (!text) {
            rc = CR_EINVAL;
            break;
        }
        unit_add(u, cr_buf_take(&k), text, strlen(text));
        break;
    }
    }
    cr_buf_fini(&k);
    return rc;
}

/* New keys u would add to g. */
static size_t new_keys(const group *g, const unit *u)
{
    size_t n = 0;
    for (size_t i = 0; i < u->n; i++) {
        bool found = false;
        for (size_t j = 0; j < g->n && !found; j++) {
            found = strcmp(g->ops[j].key, u->ops[i].key) == 0;
        }
        n += !found;
    }
    return n;
}

/* Moves u's ops into g (a key already there takes the new value). */
static void merge(group *g, unit *u)
{
    for (size_t i = 0; i < u->n; i++) {
        gop *o = &u->ops[i];
        size_t j = 0;
        while (j < g->n && strcmp(g->ops[j].key, o->key) != 0) {
            j++;
        }
        if (j < g->n) {
            g->bytes -= strlen(g->ops[j].key) + g->ops[j].vlen;
            free(g->ops[j].key);
            free(g->ops[j].val);
        } else {
            CR_GROW(g->ops, g->n, g->cap);
            j = g->n++;
        }
        g->ops[j] = *o;
        g->bytes += strlen(o->key) + o->vlen;
    }
    u->n = 0;
    u->bytes = 0;
}

/* Room the meta keys take in every etcd txn. */
#define META_OPS 2

static bool fits(const cr__estore *s, const group *g, const unit *u)
{
    size_t ops = g->n + new_keys(g, u) + META_OPS;
    size_t bytes = g->bytes + u->bytes + (g->n + u->n + META_OPS) * 64;
    return ops <= s->max_ops && bytes <= STORE_ETCD_MAX_BYTES;
}

/* ------------------------------------------------------------------------ */
/* The writer                                                               */

typedef struct batch {
    cr_store_txn **t; /* the transactions taken */
    int *status;      /* first failure of each */
    size_t n;
} batch;

static void set_status(batch *b, size_t i, int rc)
{
    if (b->status[i] == 0) {
        b->status[i] = rc;
    }
}

static void add_member(group *g, size_t i)
{
    if (g->nmem > 0 && g->members[g->nmem - 1] == i) {
        return;
    }
    CR_GROW(g->members, g->nmem, g->memcap);
    g->members[g->nmem++] = i;
}

static void group_reset(group *g)
{
    for (size_t i = 0; i < g->n; i++) {
        free(g->ops[i].key);
        free(g->ops[i].val);
    }
    g->n = 0;
    g->bytes = 0;
    g->nlog = 0;
    g->nmem = 0;
    g->events = g->jobs = false;
}

/* Commits g as one etcd txn; every member's status gets the outcome. */
static void flush(cr__estore *s, group *g, batch *b)
{
    if (g->nmem == 0 && g->n == 0) {
        return;
    }
    int rc = 0;
    pthread_mutex_lock(&s->qmu);
    bool fenced = s->fenced;
    char *fkey = s->fence_key ? cr_strdup(s->fence_key) : NULL;
    int64_t frev = s->fence_rev;
    pthread_mutex_unlock(&s->qmu);
    if (fenced) {
        rc = CR_EFENCED;
        goto done;
    }
    if (g->n > 0) {
        cr_buf k1, k2;
        cr_buf_init(&k1);
        cr_buf_init(&k2);
        char seq[24], maxid[24];
        size_t n = g->n;
        cr_etcd_op *ops = cr_calloc(n + META_OPS, sizeof *ops);
        for (size_t i = 0; i < g->n; i++) {
            ops[i] = (cr_etcd_op){.kind = g->ops[i].val ? CR_ETCD_OP_PUT : CR_ETCD_OP_DELETE,
                                  .key = g->ops[i].key,
                                  .value = g->ops[i].val,
                                  .value_len = g->ops[i].vlen};
        }
        if (g->events) {
            cr__estore_key(s, &k1, "meta/event_seq");
            snprintf(seq, sizeof seq, "%" PRId64, s->event_seq);
            ops[n++] = (cr_etcd_op){.kind = CR_ETCD_OP_PUT,
                                    .key = cr_buf_str(&k1),
                                    .value = seq,
                                    .value_len = strlen(seq)};
        }
        if (g->jobs) {
            cr__estore_key(s, &k2, "meta/max_job_id");
            snprintf(maxid, sizeof maxid, "%" PRId64, s->max_job_id);
            ops[n++] = (cr_etcd_op){.kind = CR_ETCD_OP_PUT,
                                    .key = cr_buf_str(&k2),
                                    .value = maxid,
                                    .value_len = strlen(maxid)};
        }
        cr_etcd_cmp cmp = {.target = CR_ETCD_CREATE, .key = fkey, .number = frev};
        cr_etcd_txn_result r;
        rc = cr_etcd_txn(s->e, &cmp, fkey ? 1 : 0, ops, n, NULL, 0, &r);
        if (rc == 0) {
            if (!r.succeeded) {
                rc = CR_EFENCED;
                pthread_mutex_lock(&s->qmu);
                s->fenced = true;
                pthread_mutex_unlock(&s->qmu);
                cr_error("store: etcd: fenced: %s no longer has create_revision %" PRId64
                         " (another holder took over); writes refused",
                         fkey, frev);
            } else {
                atomic_fetch_add(&s->commits, 1);
            }
            cr_etcd_txn_result_fini(&r);
        } else {
            cr_error("store: etcd: a txn of %zu ops failed: %s", n, cr_etcd_last_error());
            if (rc == CR_ETIMEDOUT || rc == CR_EUNAVAIL || rc == CR_EIO) {
                s->reload = true; /* it may have been applied after all */
                s->batch_rc = rc;
            }
        }
        free(ops);
        cr_buf_fini(&k1);
        cr_buf_fini(&k2);
    }
done:
    free(fkey);
    if (rc != 0) {
        undo_to(s, g, 0);
        if (rc == CR_EFENCED) {
            s->reload = true; /* a new holder writes; our caches are stale */
        }
    }
    for (size_t i = 0; i < g->nmem; i++) {
        set_status(b, g->members[i], rc);
    }
    group_reset(g);
}

/* Converts unit source i (a whole txn, or op k of a splittable one) and
 * places it in g, flushing g first when it does not fit. */
static void place(cr__estore *s, group *g, unit *u, batch *b, size_t i, const op *ops, size_t n)
{
    if (s->batch_rc != 0) {
        set_status(b, i, s->batch_rc); /* after an unknown outcome: nothing more this batch */
        return;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        size_t mark = g->nlog;
        bool g_events = g->events, g_jobs = g->jobs;
        int rc = 0;
        for (size_t k = 0; k < n && rc == 0; k++) {
            rc = convert_op(s, g, u, &ops[k]);
        }
        if (rc != 0) {
            undo_to(s, g, mark);
            g->events = g_events;
            g->jobs = g_jobs;
            unit_clear(u);
            set_status(b, i, rc);
            return;
        }
        if (fits(s, g, u)) {
            merge(g, u);
            add_member(g, i);
            return;
        }
        undo_to(s, g, mark);
        g->events = g_events;
        g->jobs = g_jobs;
        unit_clear(u);
        if (g->n == 0 || attempt == 1) {
            cr_error("store: etcd: a transaction of %zu operations is over etcd's limits "
                     "(%zu ops per txn, %u bytes per request) and cannot be split: refused",
                     n, s->max_ops, STORE_ETCD_MAX_BYTES);
            set_status(b, i, CR_ETOOBIG);
            return;
        }
        flush(s, g, b);
    }
}

static void run_batch(cr__estore *s, batch *b)
{
    if (!s->loaded || s->reload) {
        s->reload = false;
        int rc = caches_load(s);
        if (rc != 0) {
            s->reload = true;
            for (size_t i = 0; i < b->n; i++) {
                set_status(b, i, rc);
            }
            return;
        }
    }
    s->batch_rc = 0;
    group g = {0};
    unit u = {0};
    for (size_t i = 0; i < b->n; i++) {
        cr_store_txn *t = b->t[i];
        if (t->len == 0) {
            continue;
        }
        if (t->splittable) {
            for (size_t k = 0; k < t->len; k++) {
                place(s, &g, &u, b, i, &t->ops[k], 1);
            }
        } else {
            place(s, &g, &u, b, i, t->ops, t->len);
        }
    }
    flush(s, &g, b);
    unit_clear(&u);
    free(u.ops);
    free(g.ops);
    free(g.log);
    free(g.members);
}

static void *writer_main(void *arg)
{
    cr__estore *s = arg;
    batch b = {0};
    size_t cap = 0;
    for (;;) {
        pthread_mutex_lock(&s->qmu);
        while (!s->head && !s->stop) {
            pthread_cond_wait(&s->qcv, &s->qmu);
        }
        if (!s->head && s->stop) {
            pthread_mutex_unlock(&s->qmu);
            break;
        }
        if (s->fence_changed) {
            s->fence_changed = false;
            s->reload = true;
        }
        size_t n = 0;
        for (cr_store_txn *t = s->head; t && n < s->max_batch; t = t->next) {
            n++;
        }
        if (n > cap) {
            cap = n;
            b.t = cr_reallocarray(b.t, cap, sizeof *b.t);
            b.status = cr_reallocarray(b.status, cap, sizeof *b.status);
        }
        for (size_t i = 0; i < n; i++) {
            b.t[i] = s->head;
            b.status[i] = 0;
            s->head = s->head->next;
        }
        if (!s->head) {
            s->tail = NULL;
        }
        b.n = n;
        pthread_mutex_unlock(&s->qmu);

        run_batch(s, &b);
        size_t ok = 0;
        for (size_t i = 0; i < n; i++) {
            ok += b.status[i] == 0;
        }
        atomic_fetch_add(&s->txns, ok);
        for (size_t i = 0; i < n; i++) {
            cr_store_txn *t = b.t[i];
            if (t->done) {
                t->done(t->arg, b.status[i]);
            }
            cr_store_txn_free(t);
        }
    }
    free(b.t);
    free(b.status);
    return NULL;
}

static void estore_submit(void *be, cr_store_txn *t)
{
    cr__estore *s = be;
    pthread_mutex_lock(&s->qmu);
    cr__store_txn_append(&s->head, &s->tail, t);
    pthread_cond_signal(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
}

static int estore_set_fence(void *be, const char *key, int64_t create_revision)
{
    cr__estore *s = be;
    if (!key || !*key || create_revision <= 0) {
        return CR_EINVAL;
    }
    pthread_mutex_lock(&s->qmu);
    free(s->fence_key);
    s->fence_key = cr_strdup(key);
    s->fence_rev = create_revision;
    s->fenced = false;
    s->fence_changed = true;
    pthread_mutex_unlock(&s->qmu);
    return 0;
}

static bool estore_fenced(void *be)
{
    cr__estore *s = be;
    pthread_mutex_lock(&s->qmu);
    bool f = s->fenced;
    pthread_mutex_unlock(&s->qmu);
    return f;
}

static cr_etcd *estore_client(void *be)
{
    cr__estore *s = be;
    return s->e;
}

static const char *estore_prefix(void *be)
{
    cr__estore *s = be;
    return s->prefix;
}

static int estore_layout(void *be)
{
    (void)be;
    return CR_STORE_ETCD_LAYOUT;
}

static void estore_stats(void *be, uint64_t *commits, uint64_t *txns)
{
    cr__estore *s = be;
    *commits = atomic_load(&s->commits);
    *txns = atomic_load(&s->txns);
}

/* The layout version: written by the first store on an empty prefix,
 * refused when newer than this Corral knows. */
static int check_layout(cr__estore *s)
{
    cr_buf k;
    cr_buf_init(&k);
    cr__estore_key(s, &k, "meta/layout");
    cr_etcd_range_req q = {.key = cr_buf_str(&k)};
    cr_etcd_range_result r;
    int rc = cr_etcd_range(s->e, &q, &r, NULL);
    if (rc != 0) {
        cr_error("store: etcd %s: %s", cr_etcd_endpoint(s->e), cr_etcd_last_error());
        goto out;
    }
    if (r.n == 0) {
        /* Create it only if still absent: two starting controllers agree. */
        cr_etcd_cmp c = {.target = CR_ETCD_CREATE, .key = cr_buf_str(&k), .number = 0};
        char v[16];
        snprintf(v, sizeof v, "%d", CR_STORE_ETCD_LAYOUT);
        cr_etcd_op put = {
            .kind = CR_ETCD_OP_PUT, .key = cr_buf_str(&k), .value = v, .value_len = strlen(v)};
        cr_etcd_txn_result t;
        rc = cr_etcd_txn(s->e, &c, 1, &put, 1, NULL, 0, &t);
        if (rc == 0) {
            cr_etcd_txn_result_fini(&t);
        } else {
            cr_error("store: etcd: cannot write %s: %s", cr_buf_str(&k), cr_etcd_last_error());
        }
    } else if (strtol(r.kvs[0].value, NULL, 10) > CR_STORE_ETCD_LAYOUT) {
        cr_error("store: etcd %s has key layout %s, this corral knows up to %d", s->prefix,
                 r.kvs[0].value, CR_STORE_ETCD_LAYOUT);
        rc = CR_ENOTSUP;
    }
    cr_etcd_range_result_fini(&r);
out:
    cr_buf_fini(&k);
    return rc;
}

static int estore_open(const char *urls, const cr_store_opts *opts, void **out)
{
    const char *cluster = opts && opts->cluster && *opts->cluster ? opts->cluster : "default";
    if (strlen(cluster) > 64 || strchr(cluster, '/')) {
        cr_error("store: etcd: cluster name \"%.64s\" is too long or has a '/'", cluster);
        return CR_EINVAL;
    }
    cr_etcd_opts eo = {.request_timeout_ms = opts ? opts->etcd_timeout_ms : 0,
                       .sec = opts ? opts->etcd_sec : NULL};
    cr_etcd *e = NULL;
    int rc = cr_etcd_new(urls, &eo, &e);
    if (rc != 0) {
        cr_error("store: %s", cr_etcd_last_error());
        return rc;
    }
    cr__estore *s = cr_calloc(1, sizeof *s);
    s->e = e;
    cr_buf p;
    cr_buf_init(&p);
    cr_buf_puts(&p, "/corral/");
    cr__estore_esc(&p, cluster);
    cr_buf_putc(&p, '/');
    snprintf(s->prefix, sizeof s->prefix, "%s", cr_buf_str(&p));
    cr_buf_fini(&p);
    s->max_batch = opts && opts->max_batch ? opts->max_batch : 8192;
    s->max_ops = opts && opts->etcd_max_txn_ops ? opts->etcd_max_txn_ops : CR_ETCD_MAX_TXN_OPS;
    if (s->max_ops < 8) {
        s->max_ops = 8;
    }
    pthread_mutex_init(&s->qmu, NULL);
    pthread_cond_init(&s->qcv, NULL);
    rc = check_layout(s);
    if (rc == 0 && pthread_create(&s->thread, NULL, writer_main, s) != 0) {
        rc = CR_EIO;
    }
    if (rc != 0) {
        pthread_mutex_destroy(&s->qmu);
        pthread_cond_destroy(&s->qcv);
        cr_etcd_free(s->e);
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

static void estore_close(void *be)
{
    cr__estore *s = be;
    if (!s) {
        return;
    }
    pthread_mutex_lock(&s->qmu);
    s->stop = true;
    pthread_cond_signal(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    pthread_join(s->thread, NULL);
    caches_clear(s);
    free(s->fence_key);
    cr_etcd_free(s->e);
    pthread_mutex_destroy(&s->qmu);
    pthread_cond_destroy(&s->qcv);
    free(s);
}

const cr__store_ops cr__store_etcd_ops = {
    .name = "etcd",
    .open = estore_open,
    .close = estore_close,
    .schema_version = estore_layout,
    .stats = estore_stats,
    .submit = estore_submit,
    .set_fence = estore_set_fence,
    .fenced = estore_fenced,
    .etcd_client = estore_client,
    .etcd_prefix = estore_prefix,
    .load_jobs = cr__estore_load_jobs,
    .load_objects = cr__estore_load_objects,
    .job_events = cr__estore_job_events,
    .load_usage = cr__estore_load_usage,
    .get_job = cr__estore_get_job,
    .get_object = cr__estore_get_object,
    .max_job_id = cr__estore_max_job_id,
    .query_jobs = cr__estore_query_jobs,
    .job_counts = cr__estore_job_counts,
    .object_kinds = cr__estore_kinds,
    .load_job_rows = cr__estore_load_job_rows,
    .load_events = cr__estore_load_events,
};
