/*
 * ctl_joblist.c - GET /v1/jobs: a page of jobs from SQLite.
 *
 * A page reads up to `limit` rows (newest first, or oldest first after
 * `after`) and the totals from the store's job_counts table, then overlays
 * the live state and pending reason of jobs still in memory (the scheduler
 * refreshes reasons every cycle without a commit).
 *
 * The cost of a page was its JSON: each stored row parsed, an array task's
 * shared spec merged back in, the store's own members dropped and the whole
 * page serialised again (80% of a page's CPU under the soak, issue 10). A
 * finished job's row no longer changes, so its API text is kept in a
 * render cache: a direct-mapped table of CTL_LIST_CACHE slots keyed by the
 * job id and a hash of its stored row (and of the row its shared spec comes
 * from), holding the object's text without "state" and "reason". A page is
 * then the SQLite read plus text joins; state and reason are written in
 * front from memory (or from the stored row). A row that changed hashes
 * differently and is rendered again, so the cache can never answer an old
 * row. Bounded: CTL_LIST_CACHE slots, entries of at most
 * CTL_LIST_CACHE_ENTRY bytes, CTL_LIST_CACHE_BYTES in all (a full cache
 * just stops taking new entries until slots are overwritten).
 *
 * Locks: the cache has its own mutex (held for a lookup or an insert, never
 * across a store read); the global lock only for the overlay (one id lookup
 * per item); serialising happens with neither.
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"
#include "cr_parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIST_DEFAULT         100
#define LIST_MAX             1000
#define LIST_MAX_BYTES       (4 * 1024 * 1024)
#define CTL_LIST_CACHE       4096              /* slots (a power of two) */
#define CTL_LIST_CACHE_ENTRY (64 * 1024)       /* larger API objects are not kept */
#define CTL_LIST_CACHE_BYTES (8 * 1024 * 1024) /* text kept in all */
#define CTL_LIST_CACHE_ROUND 512               /* a slot's buffer grows in these steps */

typedef struct list_ent {
    int64_t id; /* 0 = empty */
    uint64_t key;
    char state[16];  /* as stored */
    char *buf;       /* owned: reason, NUL, rest, NUL; reused in place while it fits */
    size_t cap;      /* bytes at buf (a multiple of CTL_LIST_CACHE_ROUND) */
    char *reason;    /* in buf: as stored */
    char *rest;      /* in buf: the API object without state and reason: "}" or ",...}" */
    size_t rest_len; /* strlen(rest) */
} list_ent;

struct ctl_list_cache {
    pthread_mutex_t mu;
    list_ent e[CTL_LIST_CACHE];
    size_t bytes; /* reason + rest text held */
};

int ctl_joblist_init(ctl *c)
{
    c->list_cache = cr_calloc(1, sizeof *c->list_cache);
    pthread_mutex_init(&c->list_cache->mu, NULL);
    return 0;
}

void ctl_joblist_fini(ctl *c)
{
    struct ctl_list_cache *lc = c->list_cache;
    if (!lc) {
        return;
    }
    for (size_t i = 0; i < CTL_LIST_CACHE; i++) {
        free(lc->e[i].buf);
    }
    pthread_mutex_destroy(&lc->mu);
    free(lc);
    c->list_cache = NULL;
}

/* FNV-1a, 64 bit. */
static uint64_t hash_text(uint64_t h, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        h = (h ^ *p) * 1099511628211ULL;
    }
    return h;
}

#define HASH_SEED 14695981039346656037ULL

/* ------------------------------------------------------------------------ */
/* Rendering one stored row.                                                */

typedef struct list_row {
    int64_t id;
    char *doc; /* owned */
    uint64_t key;
    /* the answer's pieces: from the cache or rendered now */
    char state[16];
    char *reason; /* owned */
    char *rest;   /* owned */
    size_t rest_len;
    bool ok;
} list_row;

typedef struct list_ctx {
    list_row *rows;
    size_t n, cap;
    size_t bytes;
    bool cut; /* rows left out for LIST_MAX_BYTES */
} list_ctx;

static void list_row_cb(void *arg, int64_t id, const char *doc)
{
    list_ctx *l = arg;
    size_t len = strlen(doc);
    if (l->cut || (l->n > 0 && l->bytes + len > LIST_MAX_BYTES)) {
        l->cut = true; /* the page ends here; next_cursor says where to go on */
        return;
    }
    CR_GROW(l->rows, l->n, l->cap);
    memset(&l->rows[l->n], 0, sizeof l->rows[l->n]);
    l->rows[l->n].id = id;
    l->rows[l->n].doc = cr_strdup(doc);
    l->n++;
    l->bytes += len;
}

static void copy_doc(void *arg, int64_t id, const char *doc)
{
    (void)id;
    char **out = arg;
    free(*out);
    *out = cr_strdup(doc);
}

/* The shared spec an array task's row names (spec_ref), read once per page. */
typedef struct ref_cache {
    int64_t id;
    char *doc;    /* owned; NULL = none */
    uint64_t key; /* its hash */
    json_t *spec; /* parsed on first need; the request members only */
} ref_cache;

static void ref_load(ctl *c, ref_cache *rc, int64_t ref)
{
    if (rc->id == ref) {
        return;
    }
    free(rc->doc);
    json_decref(rc->spec);
    rc->doc = NULL;
    rc->spec = NULL;
    rc->id = ref;
    if (cr_store_get_job(c->store, ref, copy_doc, &rc->doc) != 0) {
        free(rc->doc);
        rc->doc = NULL;
    }
    rc->key = rc->doc ? hash_text(HASH_SEED, rc->doc) : 0;
}

static json_t *ref_spec(ref_cache *rc)
{
    if (rc->spec || !rc->doc) {
        return rc->spec;
    }
    rc->spec = json_loads(rc->doc, 0, NULL);
    /* only the request members are shared, not the first task's run */
    static const char *const own[] = {"id",
                                      "tenant",
                                      "state",
                                      "reason",
                                      "exit_code",
                                      "signal",
                                      "retries",
                                      "runs",
                                      "submit_time",
                                      "start_time",
                                      "end_time",
                                      "placement",
                                      "run_gpu_type",
                                      "array_index",
                                      "array_first",
                                      "submit_ns",
                                      "start_ns",
                                      "end_ns",
                                      "acct_ns",
                                      "last_node",
                                      "cancel_requested",
                                      "timed_out",
                                      "requeue_requested",
                                      NULL};
    for (size_t i = 0; rc->spec && own[i]; i++) {
        json_object_del(rc->spec, own[i]);
    }
    return rc->spec;
}

/* The API object of a stored row (the spec of an array task merged back,
 * the store's own members left out), split into state, reason and the rest. */
static bool row_render(list_row *r, ref_cache *rc)
{
    json_t *v = json_loads(r->doc, 0, NULL);
    if (!v) {
        return false;
    }
    if (ctl_doc_spec_ref(r->doc) > 0) {
        json_t *spec = ref_spec(rc);
        if (spec) {
            json_t *merged = json_copy(spec);
            json_object_update(merged, v);
            json_decref(v);
            v = merged;
        }
    }
    static const char *const internal[] = {
        "spec_ref",         "submit_ns", "start_ns",          "end_ns",      "acct_ns", "last_node",
        "cancel_requested", "timed_out", "requeue_requested", "secrets_enc", NULL};
    for (size_t i = 0; internal[i]; i++) {
        json_object_del(v, internal[i]);
    }
    ctl_job_view_env(v);
    size_t i;
    json_t *pl;
    json_array_foreach(json_object_get(v, "placement"), i, pl)
    {
        json_object_del(pl, "mig_starts");
    }
    const char *st = json_string_value(json_object_get(v, "state"));
    const char *why = json_string_value(json_object_get(v, "reason"));
    snprintf(r->state, sizeof r->state, "%s", st ? st : "");
    r->reason = cr_strdup(why ? why : "");
    json_object_del(v, "state");
    json_object_del(v, "reason");
    char *s = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    if (!s || s[0] != '{') {
        free(s);
        return false;
    }
    /* "{...}" -> ",...}" (or "}" for an empty object) */
    size_t n = strlen(s);
    if (n == 2) {
        r->rest = cr_strdup("}");
    } else {
        s[0] = ',';
        r->rest = s;
        s = NULL;
    }
    free(s);
    r->rest_len = strlen(r->rest);
    return true;
}

/* The row's pieces from the cache; false on a miss. */
static bool cache_get(struct ctl_list_cache *lc, list_row *r)
{
    list_ent *e = &lc->e[(uint64_t)r->id & (CTL_LIST_CACHE - 1)];
    bool hit = false;
    pthread_mutex_lock(&lc->mu);
    if (e->id == r->id && e->key == r->key) {
        memcpy(r->state, e->state, sizeof r->state);
        r->reason = cr_strdup(e->reason);
        r->rest = cr_malloc(e->rest_len + 1);
        memcpy(r->rest, e->rest, e->rest_len + 1);
        r->rest_len = e->rest_len;
        hit = true;
    }
    pthread_mutex_unlock(&lc->mu);
    return hit;
}

/* A slot keeps its buffer and writes the next row into it while it fits:
 * the cache's text is made once and rewritten in place, not freed and
 * allocated again for every new row (that churn, on four API threads,
 * fragmented the heap under the soak: issue 10). */
static void cache_put(struct ctl_list_cache *lc, const list_row *r)
{
    size_t rlen = strlen(r->reason);
    size_t need = rlen + 1 + r->rest_len + 1;
    if (need > CTL_LIST_CACHE_ENTRY) {
        return;
    }
    list_ent *e = &lc->e[(uint64_t)r->id & (CTL_LIST_CACHE - 1)];
    pthread_mutex_lock(&lc->mu);
    size_t cap = e->cap >= need ? e->cap
                                : (need + CTL_LIST_CACHE_ROUND - 1) / CTL_LIST_CACHE_ROUND *
                                      CTL_LIST_CACHE_ROUND;
    if (lc->bytes - e->cap + cap <= CTL_LIST_CACHE_BYTES) {
        if (cap != e->cap) {
            free(e->buf);
            e->buf = cr_malloc(cap);
        }
        lc->bytes = lc->bytes - e->cap + cap;
        e->cap = cap;
        e->id = r->id;
        e->key = r->key;
        memcpy(e->state, r->state, sizeof e->state);
        e->reason = e->buf;
        memcpy(e->reason, r->reason, rlen + 1);
        e->rest = e->buf + rlen + 1;
        memcpy(e->rest, r->rest, r->rest_len + 1);
        e->rest_len = r->rest_len;
    }
    pthread_mutex_unlock(&lc->mu);
}

/* Fill r's pieces: cached, else rendered (and kept). */
static void row_fill(ctl *c, list_row *r, ref_cache *rc)
{
    int64_t ref = ctl_doc_spec_ref(r->doc);
    r->key = hash_text(HASH_SEED, r->doc);
    if (ref > 0) {
        ref_load(c, rc, ref);
        r->key = hash_text(r->key ^ rc->key, "ref");
    }
    if (cache_get(c->list_cache, r)) {
        r->ok = true;
        return;
    }
    r->ok = row_render(r, rc);
    if (r->ok) {
        cache_put(c->list_cache, r);
    }
}

/* A JSON string literal (our text, or validated UTF-8). */
/* ------------------------------------------------------------------------ */
/* GET /v1/jobs                                                             */

/* The query: 0, or answered (400). */
static int list_query(cr_http_req *req, const cr_principal *p, cr_store_job_query *q,
                      const char **states, int64_t *limit)
{
    static const char *const params[] = {"state", "tenant", "limit", "cursor", "after", NULL};
    const char *unknown = cr_http_query_unknown(req, params);
    if (unknown) {
        ctl_reply_err(req, 400, CR_EINVAL, unknown,
                      "query '%s': unknown (state, tenant, limit, cursor, after)", unknown);
        return CR_EINVAL;
    }
    const char *qs = cr_http_query(req, "state");
    const char *qt = cr_http_query(req, "tenant");
    const char *ql = cr_http_query(req, "limit");
    const char *qc = cr_http_query(req, "cursor");
    const char *qa = cr_http_query(req, "after");
    int64_t cursor = 0, after = 0;
    bool want[JS_COUNT];
    *limit = LIST_DEFAULT;
    for (int i = 0; i < JS_COUNT; i++) {
        want[i] = qs == NULL || !*qs;
    }
    if (ql && cr_parse_i64(ql, 1, LIST_MAX, limit) != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "limit",
                      "query 'limit': must be an integer 1..%d (page on with 'cursor')", LIST_MAX);
        return CR_EINVAL;
    }
    if (qc && cr_parse_i64(qc, 1, INT64_MAX / 2, &cursor) != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "cursor", "query 'cursor': a job id from next_cursor");
        return CR_EINVAL;
    }
    if (qa && cr_parse_i64(qa, 0, INT64_MAX / 2, &after) != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "after", "query 'after': a job id >= 0");
        return CR_EINVAL;
    }
    if (qc && qa) {
        ctl_reply_err(req, 400, CR_EINVAL, "after", "query 'after': not with 'cursor'");
        return CR_EINVAL;
    }
    if (qs && *qs) {
        /* The whole list, however long (libmicrohttpd's head buffer bounds
         * it): a fixed copy cut it at 255 bytes and served the rest. */
        char *tmp = cr_strdup(qs);
        char *save = NULL;
        for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            bool found = false;
            for (int i = 0; i < JS_COUNT; i++) {
                if (strcmp(t, ctl_job_state_names[i]) == 0) {
                    want[i] = found = true;
                }
            }
            if (strcmp(t, "active") == 0) {
                want[JS_PENDING] = want[JS_HELD] = want[JS_RUNNING] = want[JS_COMPLETING] = true;
                found = true;
            }
            if (!found) {
                ctl_reply_err(req, 400, CR_EINVAL, "state", "query 'state': unknown state '%.64s'",
                              t);
                free(tmp);
                return CR_EINVAL;
            }
        }
        free(tmp);
    }
    size_t nstates = 0;
    bool all = true;
    for (int i = 0; i < JS_COUNT; i++) {
        all = all && want[i];
    }
    for (int i = 0; i < JS_COUNT && !all; i++) {
        if (want[i]) {
            states[nstates++] = ctl_job_state_names[i];
        }
    }
    memset(q, 0, sizeof *q);
    q->tenant = p->role == CR_ROLE_ADMIN ? (qt && *qt ? qt : NULL) : p->tenant;
    q->states = states;
    q->nstates = nstates;
    q->before = cursor;
    q->after = after;
    q->oldest_first = qa != NULL;
    q->limit = (size_t)*limit + 1; /* one more: is there a next page? */
    if (p->role != CR_ROLE_ADMIN && qt && *qt && strcmp(qt, p->tenant) != 0) {
        q->tenant = "\x01"; /* another tenant's jobs: none visible (no tenant has this name) */
    }
    return 0;
}

static void rows_free(list_ctx *l)
{
    for (size_t k = 0; k < l->n; k++) {
        free(l->rows[k].doc);
        free(l->rows[k].reason);
        free(l->rows[k].rest);
    }
    free(l->rows);
}

void ctl_jobs_list(ctl *c, cr_http_req *req, const cr_principal *p)
{
    const char *states[JS_COUNT];
    cr_store_job_query q;
    int64_t limit = 0;
    if (list_query(req, p, &q, states, &limit) != 0) {
        return;
    }
    list_ctx l;
    memset(&l, 0, sizeof l);
    int64_t total = 0;
    int rc = cr_store_query_jobs(c->store, &q, list_row_cb, &l, &total);
    if (rc != 0) {
        rows_free(&l);
        ctl_reply_err(req, 500, rc, NULL, "cannot read jobs: %s", cr_strerror(rc));
        return;
    }
    size_t take = l.n > (size_t)limit ? (size_t)limit : l.n;
    bool more = l.n > (size_t)limit || l.cut;
    /* In query order, within LIST_MAX_BYTES of answer. */
    ref_cache refs = {0};
    size_t out_bytes = 0;
    for (size_t k = 0; k < take; k++) {
        row_fill(c, &l.rows[k], &refs);
        size_t bytes = l.rows[k].ok ? l.rows[k].rest_len + strlen(l.rows[k].reason) : 0;
        if (k > 0 && out_bytes + bytes > LIST_MAX_BYTES) {
            take = k;
            more = true;
            break;
        }
        out_bytes += bytes;
    }
    free(refs.doc);
    json_decref(refs.spec);
    /* A job still in memory has its live state and reason there. */
    pthread_mutex_lock(&c->mu);
    for (size_t k = 0; k < take; k++) {
        list_row *r = &l.rows[k];
        const ctl_job *j = r->ok ? ctl_job_get(c, r->id) : NULL;
        if (j) { /* (a start being stored is pending, as in the job view) */
            snprintf(r->state, sizeof r->state, "%s", ctl_job_state_names[ctl_job_shown_state(j)]);
            free(r->reason);
            r->reason = cr_strdup(j->start_unstored ? CTL_STARTING_REASON
                                  : j->reason       ? j->reason
                                                    : "");
        }
        if (r->ok && p->role != CR_ROLE_ADMIN && r->reason[0]) {
            /* "preempted for job N" of another tenant (ctl_redact.c) */
            char buf[2048];
            ctl_redact_text(c, p, r->reason, buf, sizeof buf);
            free(r->reason);
            r->reason = cr_strdup(buf);
        }
    }
    pthread_mutex_unlock(&c->mu);
    /* Active jobs by state, from the store's counts table (no global lock). */
    static const char *const act[] = {"pending", "held", "running", "completing"};
    int64_t counts[4] = {0};
    cr_store_job_counts(c->store, q.tenant, act, 4, counts);
    /* newest-first pages are answered oldest first, as before */
    cr_buf b;
    cr_buf_init(&b);
    cr_buf_puts(&b, "{\"items\":[");
    size_t count = 0;
    for (size_t k = 0; k < take; k++) {
        const list_row *r = &l.rows[q.oldest_first ? k : take - 1 - k];
        if (!r->ok) {
            continue;
        }
        cr_buf_puts(&b, count++ ? ",{\"state\":" : "{\"state\":");
        cr_buf_put_jstr(&b, r->state);
        cr_buf_puts(&b, ",\"reason\":");
        cr_buf_put_jstr(&b, r->reason);
        cr_buf_append(&b, r->rest, r->rest_len);
    }
    cr_buf_printf(&b, "],\"count\":%zu,\"total\":%lld,\"active\":{", count, (long long)total);
    for (int k = 0; k < 4; k++) {
        cr_buf_printf(&b, "%s\"%s\":%lld", k ? "," : "", act[k], (long long)counts[k]);
    }
    cr_buf_putc(&b, '}');
    int64_t edge = take ? l.rows[take - 1].id : 0;
    if (more && edge > 0) {
        cr_buf_printf(&b, ",\"%s\":\"%lld\"", q.oldest_first ? "next_after" : "next_cursor",
                      (long long)edge);
    }
    cr_buf_putc(&b, '}');
    rows_free(&l);
    size_t len = b.len;
    cr_http_respond(req, 200, "application/json", cr_buf_take(&b), len);
}
