/*
 * store_etcd_read.c - the etcd backend's readers: whole-prefix loads in
 * bounded pages at one revision, one job's events, and the pages of
 * GET /v1/jobs from the state index (store_etcd_int.h has the layout).
 * Any thread; no writer state is touched.
 */
#include "store_etcd_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_failed(cr__estore *s, const char *what, int rc)
{
    cr_error("store: etcd: reading %s: %s", what, cr_etcd_last_error());
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Keys                                                                     */

void cr__estore_esc(cr_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '.' || c == '_' || c == '-' || c == ':' || c == '@' || c == '=' || c == '+' ||
            c == ',') {
            cr_buf_putc(b, (char)c);
        } else {
            cr_buf_putc(b, '%');
            cr_buf_putc(b, hex[c >> 4]);
            cr_buf_putc(b, hex[c & 15]);
        }
    }
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
}

int cr__estore_unesc(const char *s, size_t n, cr_buf *out)
{
    cr_buf_reset(out);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            if (i + 2 >= n) {
                return CR_EPARSE;
            }
            int a = hexval(s[i + 1]), b = hexval(s[i + 2]);
            if (a < 0 || b < 0 || (a == 0 && b == 0)) {
                return CR_EPARSE;
            }
            cr_buf_putc(out, (char)(a << 4 | b));
            i += 2;
        } else {
            cr_buf_putc(out, s[i]);
        }
    }
    cr_buf_putc(out, '\0');
    out->len--; /* a C string even when empty */
    return 0;
}

void cr__estore_key(cr__estore *s, cr_buf *b, const char *sect)
{
    cr_buf_reset(b);
    cr_buf_puts(b, s->prefix);
    cr_buf_puts(b, sect);
}

void cr__estore_obj_prefix(cr__estore *s, cr_buf *b, const char *kind)
{
    if (strcmp(kind, "audit") == 0) {
        cr__estore_key(s, b, "audit/");
        return;
    }
    cr__estore_key(s, b, "objects/");
    cr__estore_esc(b, kind);
    cr_buf_putc(b, '/');
}

int cr__estore_scan(cr__estore *s, const char *key, const char *end, size_t limit, bool keys_only,
                    estore_kv_fn fn, void *arg, int64_t *rev)
{
    char *from = cr_strdup(key);
    char *stop = NULL;
    if (end) {
        stop = cr_strdup(end);
    } else {
        size_t n = strlen(key) + 1;
        stop = cr_malloc(n);
        cr_etcd_prefix_end(key, stop, n);
    }
    int64_t at = rev ? *rev : 0;
    size_t seen = 0;
    bool skip_first = false; /* a next page starts at the last key seen */
    int rc = 0;
    for (;;) {
        size_t want = STORE_ETCD_PAGE;
        if (limit > 0 && limit - seen + (skip_first ? 1 : 0) < want) {
            want = limit - seen + (skip_first ? 1 : 0);
        }
        cr_etcd_range_req q = {.key = from,
                               .range_end = stop,
                               .limit = (int64_t)want,
                               .revision = at,
                               .keys_only = keys_only};
        cr_etcd_range_result r;
        int64_t got_rev = 0;
        rc = cr_etcd_range(s->e, &q, &r, &got_rev);
        if (rc != 0) {
            break;
        }
        if (at == 0) {
            at = got_rev;
        }
        for (size_t i = 0; i < r.n; i++) {
            if (i == 0 && skip_first && strcmp(r.kvs[0].key, from) == 0) {
                continue;
            }
            if (limit > 0 && seen == limit) {
                break;
            }
            fn(arg, &r.kvs[i]);
            seen++;
        }
        bool more = r.more && r.n > 0 && (limit == 0 || seen < limit);
        if (more) {
            free(from);
            from = cr_strdup(r.kvs[r.n - 1].key);
            skip_first = true;
        }
        cr_etcd_range_result_fini(&r);
        if (!more) {
            break;
        }
    }
    if (rc == 0 && rev) {
        *rev = at;
    }
    free(from);
    free(stop);
    return rc;
}

/* The id at the end of a key ".../<20 digits>"; 0 when malformed. */
static int64_t key_id(const char *key)
{
    const char *slash = strrchr(key, '/');
    if (!slash || strlen(slash + 1) != 20) {
        return 0;
    }
    char *end = NULL;
    long long v = strtoll(slash + 1, &end, 10);
    return *end == '\0' && v > 0 ? (int64_t)v : 0;
}

typedef struct job_ctx {
    cr_store_job_fn fn;
    void *arg;
    size_t hits;
} job_ctx;

static void job_row(void *arg, const cr_etcd_kv *kv)
{
    job_ctx *c = arg;
    int64_t id = key_id(kv->key);
    if (id <= 0) {
        cr_warn("store: etcd: ignoring a malformed job key %s", kv->key);
        return;
    }
    c->hits++;
    c->fn(c->arg, id, kv->value);
}

int cr__estore_load_jobs(void *be, cr_store_job_fn fn, void *arg)
{
    cr__estore *s = be;
    cr_buf k;
    cr_buf_init(&k);
    cr__estore_key(s, &k, "jobs/");
    job_ctx c = {.fn = fn, .arg = arg};
    int rc = cr__estore_scan(s, cr_buf_str(&k), NULL, 0, false, job_row, &c, NULL);
    cr_buf_fini(&k);
    return rc ? read_failed(s, "jobs", rc) : 0;
}

int cr__estore_get_job(void *be, int64_t id, cr_store_job_fn fn, void *arg)
{
    cr__estore *s = be;
    char key[220];
    snprintf(key, sizeof key, "%sjobs/%020" PRId64, s->prefix, id);
    cr_etcd_range_req q = {.key = key};
    cr_etcd_range_result r;
    int rc = cr_etcd_range(s->e, &q, &r, NULL);
    if (rc != 0) {
        return read_failed(s, "a job", rc);
    }
    if (r.n == 1) {
        fn(arg, id, r.kvs[0].value);
    }
    rc = r.n == 1 ? 0 : CR_ENOENT;
    cr_etcd_range_result_fini(&r);
    return rc;
}

int cr__estore_get_object(void *be, const char *kind, const char *key, cr_store_obj_fn fn,
                          void *arg)
{
    cr__estore *s = be;
    if (!*kind || strchr(kind, '/')) {
        return CR_EINVAL;
    }
    cr_buf k;
    cr_buf_init(&k);
    cr__estore_obj_prefix(s, &k, kind);
    cr__estore_esc(&k, key);
    cr_etcd_range_req q = {.key = cr_buf_str(&k)};
    cr_etcd_range_result r;
    int rc = cr_etcd_range(s->e, &q, &r, NULL);
    cr_buf_fini(&k);
    if (rc != 0) {
        return read_failed(s, "an object", rc);
    }
    if (r.n == 1) {
        fn(arg, key, r.kvs[0].value);
    }
    rc = r.n == 1 ? 0 : CR_ENOENT;
    cr_etcd_range_result_fini(&r);
    return rc;
}

typedef struct obj_ctx {
    cr_store_obj_fn fn;
    void *arg;
    size_t plen;
    cr_buf key;
} obj_ctx;

static void obj_row(void *arg, const cr_etcd_kv *kv)
{
    obj_ctx *c = arg;
    const char *rest = kv->key + c->plen;
    if (cr__estore_unesc(rest, strlen(rest), &c->key) != 0) {
        cr_warn("store: etcd: ignoring a malformed object key %s", kv->key);
        return;
    }
    c->fn(c->arg, cr_buf_str(&c->key), kv->value);
}

int cr__estore_load_objects(void *be, const char *kind, cr_store_obj_fn fn, void *arg)
{
    cr__estore *s = be;
    if (!*kind || strchr(kind, '/')) {
        return CR_EINVAL;
    }
    cr_buf k;
    cr_buf_init(&k);
    cr__estore_obj_prefix(s, &k, kind);
    obj_ctx c = {.fn = fn, .arg = arg, .plen = k.len};
    cr_buf_init(&c.key);
    int rc = cr__estore_scan(s, cr_buf_str(&k), NULL, 0, false, obj_row, &c, NULL);
    cr_buf_fini(&c.key);
    cr_buf_fini(&k);
    return rc ? read_failed(s, "objects", rc) : 0;
}

int cr__estore_kinds(void *be, void (*fn)(void *arg, const char *kind), void *arg)
{
    cr__estore *s = be;
    cr_buf k, name, end;
    cr_buf_init(&k);
    cr_buf_init(&name);
    cr_buf_init(&end);
    cr__estore_key(s, &k, "objects/");
    size_t plen = k.len;
    char *from = cr_strdup(cr_buf_str(&k));
    size_t n = k.len + 1;
    char *stop = cr_malloc(n);
    cr_etcd_prefix_end(cr_buf_str(&k), stop, n);
    int rc = 0;
    bool audit_done = false;
    for (;;) {
        /* One key per kind: jump past each kind's keys. */
        cr_etcd_range_req q = {.key = from, .range_end = stop, .limit = 1, .keys_only = true};
        cr_etcd_range_result r;
        if ((rc = cr_etcd_range(s->e, &q, &r, NULL)) != 0) {
            break;
        }
        if (r.n == 0) {
            cr_etcd_range_result_fini(&r);
            break;
        }
        const char *rest = r.kvs[0].key + plen;
        const char *slash = strchr(rest, '/');
        if (!slash || cr__estore_unesc(rest, (size_t)(slash - rest), &name) != 0) {
            cr_warn("store: etcd: ignoring a malformed object key %s", r.kvs[0].key);
            free(from);
            from = cr_asprintf("%s%c", r.kvs[0].key, '\x01');
        } else {
            if (!audit_done && strcmp(cr_buf_str(&name), "audit") > 0) {
                audit_done = true; /* kind "audit" lives under audit/: in order */
                cr_buf a;
                cr_buf_init(&a);
                cr__estore_key(s, &a, "audit/");
                cr_etcd_range_req qa = {.key = cr_buf_str(&a), .prefix = true, .count_only = true};
                cr_etcd_range_result ra;
                if (cr_etcd_range(s->e, &qa, &ra, NULL) == 0 && ra.count > 0) {
                    fn(arg, "audit");
                }
                cr_etcd_range_result_fini(&ra);
                cr_buf_fini(&a);
            }
            fn(arg, cr_buf_str(&name));
            cr_buf_reset(&end);
            cr_buf_append(&end, r.kvs[0].key, (size_t)(slash - r.kvs[0].key) + 1);
            free(from);
            from = cr_malloc(end.len + 1);
            cr_etcd_prefix_end(cr_buf_str(&end), from, end.len + 1);
        }
        cr_etcd_range_result_fini(&r);
    }
    if (rc == 0 && !audit_done) {
        cr_buf a;
        cr_buf_init(&a);
        cr__estore_key(s, &a, "audit/");
        cr_etcd_range_req qa = {.key = cr_buf_str(&a), .prefix = true, .count_only = true};
        cr_etcd_range_result ra;
        rc = cr_etcd_range(s->e, &qa, &ra, NULL);
        if (rc == 0 && ra.count > 0) {
            fn(arg, "audit");
        }
        cr_etcd_range_result_fini(&ra);
        cr_buf_fini(&a);
    }
    free(from);
    free(stop);
    cr_buf_fini(&k);
    cr_buf_fini(&name);
    cr_buf_fini(&end);
    return rc ? read_failed(s, "object kinds", rc) : 0;
}

typedef struct event_ctx {
    cr_store_event_fn fn;
    void *arg;
    int64_t job;
} event_ctx;

static void event_row(void *arg, const cr_etcd_kv *kv)
{
    event_ctx *c = arg;
    json_t *v = json_loads(kv->value, 0, NULL);
    const char *what = json_string_value(json_object_get(v, "what"));
    const char *why = json_string_value(json_object_get(v, "why"));
    json_t *t = json_object_get(v, "time_ns");
    if (!what || !json_is_integer(t)) {
        cr_warn("store: etcd: ignoring a malformed event %s", kv->key);
    } else {
        c->fn(c->arg, c->job, json_integer_value(t), what, why ? why : "");
    }
    json_decref(v);
}

int cr__estore_job_events(void *be, int64_t job, size_t limit, cr_store_event_fn fn, void *arg)
{
    cr__estore *s = be;
    char key[220];
    snprintf(key, sizeof key, "%sevents/%020" PRId64 "/", s->prefix, job);
    event_ctx c = {.fn = fn, .arg = arg, .job = job};
    int rc = cr__estore_scan(s, key, NULL, limit, false, event_row, &c, NULL);
    return rc ? read_failed(s, "events", rc) : 0;
}

/* All events: events/<job>/<seq>, so in job order, each job's in order. */
static void any_event_row(void *arg, const cr_etcd_kv *kv)
{
    event_ctx *c = arg;
    const char *p = strrchr(kv->key, '/');
    c->job = p && p - kv->key > 21 ? strtoll(p - 20, NULL, 10) : 0;
    event_row(arg, kv);
}

int cr__estore_load_events(void *be, cr_store_event_fn fn, void *arg)
{
    cr__estore *s = be;
    cr_buf k;
    cr_buf_init(&k);
    cr__estore_key(s, &k, "events/");
    event_ctx c = {.fn = fn, .arg = arg};
    int rc = cr__estore_scan(s, cr_buf_str(&k), NULL, 0, false, any_event_row, &c, NULL);
    cr_buf_fini(&k);
    return rc ? read_failed(s, "events", rc) : 0;
}

/* Job rows with tenant and state: the state index (at one revision) gives
 * those, then the documents at the same revision. */
typedef struct full_ctx {
    int64_t *ids;
    char **tenant, **state;
    size_t n, cap;
    size_t plen;
    cr_buf tmp;
    cr_store_job_row_fn fn;
    void *arg;
    size_t next; /* jobs are visited in id order: a cursor into the sorted ids */
} full_ctx;

static void full_index_row(void *arg, const cr_etcd_kv *kv)
{
    full_ctx *f = arg;
    const char *rest = kv->key + f->plen;
    const char *slash = strrchr(rest, '/');
    int64_t id = key_id(kv->key);
    if (!slash || id <= 0 || cr__estore_unesc(rest, (size_t)(slash - rest), &f->tmp) != 0) {
        return;
    }
    if (f->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 256;
        f->ids = cr_reallocarray(f->ids, f->cap, sizeof *f->ids);
        f->tenant = cr_reallocarray(f->tenant, f->cap, sizeof *f->tenant);
        f->state = cr_reallocarray(f->state, f->cap, sizeof *f->state);
    }
    f->ids[f->n] = id;
    f->tenant[f->n] = cr_strdup(kv->value);
    f->state[f->n] = cr_strdup(cr_buf_str(&f->tmp));
    f->n++;
}

static int cmp_idx(const void *a, const void *b, void *ctx)
{
    const int64_t *ids = ctx;
    int64_t x = ids[*(const size_t *)a], y = ids[*(const size_t *)b];
    return x < y ? -1 : x > y;
}

typedef struct full_doc {
    full_ctx *f;
    size_t *order;
} full_doc;

static void full_doc_row(void *arg, const cr_etcd_kv *kv)
{
    full_doc *d = arg;
    full_ctx *f = d->f;
    int64_t id = key_id(kv->key);
    while (f->next < f->n && f->ids[d->order[f->next]] < id) {
        f->next++;
    }
    if (f->next < f->n && f->ids[d->order[f->next]] == id) {
        size_t i = d->order[f->next];
        f->fn(f->arg, id, f->tenant[i], f->state[i], kv->value);
    } else {
        cr_warn("store: etcd: job %" PRId64 " has no state index entry: skipped", id);
    }
}

int cr__estore_load_job_rows(void *be, cr_store_job_row_fn fn, void *arg)
{
    cr__estore *s = be;
    full_ctx f = {.fn = fn, .arg = arg};
    cr_buf_init(&f.tmp);
    cr_buf k;
    cr_buf_init(&k);
    cr__estore_key(s, &k, "jobstate/");
    f.plen = k.len;
    int64_t rev = 0;
    size_t *order = NULL;
    int rc = cr__estore_scan(s, cr_buf_str(&k), NULL, 0, false, full_index_row, &f, &rev);
    if (rc == 0) {
        order = cr_calloc(f.n ? f.n : 1, sizeof *order);
        for (size_t i = 0; i < f.n; i++) {
            order[i] = i;
        }
        qsort_r(order, f.n, sizeof *order, cmp_idx, f.ids);
        full_doc d = {.f = &f, .order = order};
        cr__estore_key(s, &k, "jobs/");
        rc = cr__estore_scan(s, cr_buf_str(&k), NULL, 0, false, full_doc_row, &d, &rev);
    }
    for (size_t i = 0; i < f.n; i++) {
        free(f.tenant[i]);
        free(f.state[i]);
    }
    free(order);
    free(f.ids);
    free(f.tenant);
    free(f.state);
    cr_buf_fini(&f.tmp);
    cr_buf_fini(&k);
    return rc ? read_failed(s, "job rows", rc) : 0;
}

typedef struct usage_ctx {
    cr_store_usage_fn fn;
    void *arg;
} usage_ctx;

static void usage_row(void *arg, const cr_etcd_kv *kv)
{
    usage_ctx *c = arg;
    json_t *v = json_loads(kv->value, 0, NULL);
    const char *tenant = json_string_value(json_object_get(v, "tenant"));
    const char *gpu = json_string_value(json_object_get(v, "gpu_type"));
    const char *day = json_string_value(json_object_get(v, "day"));
    if (!tenant || !gpu || !day) {
        cr_warn("store: etcd: ignoring a malformed usage row %s", kv->key);
    } else {
        c->fn(c->arg, tenant, gpu, day, json_number_value(json_object_get(v, "gpu_s")),
              json_number_value(json_object_get(v, "energy_j")),
              json_number_value(json_object_get(v, "cost")));
    }
    json_decref(v);
}

int cr__estore_load_usage(void *be, cr_store_usage_fn fn, void *arg)
{
    cr__estore *s = be;
    cr_buf k;
    cr_buf_init(&k);
    cr__estore_key(s, &k, "usage/");
    usage_ctx c = {.fn = fn, .arg = arg};
    int rc = cr__estore_scan(s, cr_buf_str(&k), NULL, 0, false, usage_row, &c, NULL);
    cr_buf_fini(&k);
    return rc ? read_failed(s, "usage", rc) : 0;
}

/* The last key under a prefix (descending, limit 1): its id, or 0. */
static int last_id(cr__estore *s, const char *sect, int64_t *out)
{
    cr_buf k;
    cr_buf_init(&k);
    cr__estore_key(s, &k, sect);
    cr_etcd_range_req q = {.key = cr_buf_str(&k),
                           .prefix = true,
                           .limit = 1,
                           .keys_only = true,
                           .sort = CR_ETCD_SORT_DESCEND};
    cr_etcd_range_result r;
    int rc = cr_etcd_range(s->e, &q, &r, NULL);
    *out = 0;
    if (rc == 0 && r.n == 1) {
        /* jobs/<id> or events/<job>/<seq>: the id follows the section */
        const char *p = r.kvs[0].key + k.len;
        *out = strtoll(p, NULL, 10);
    }
    cr_etcd_range_result_fini(&r);
    cr_buf_fini(&k);
    return rc;
}

int cr__estore_max_job_id(void *be, int64_t *out)
{
    cr__estore *s = be;
    int64_t a = 0, b = 0, c = 0;
    char key[220];
    snprintf(key, sizeof key, "%smeta/max_job_id", s->prefix);
    cr_etcd_range_req q = {.key = key};
    cr_etcd_range_result r;
    int rc = cr_etcd_range(s->e, &q, &r, NULL);
    if (rc == 0) {
        if (r.n == 1) {
            a = strtoll(r.kvs[0].value, NULL, 10);
        }
        cr_etcd_range_result_fini(&r);
        rc = last_id(s, "jobs/", &b);
    }
    if (rc == 0) {
        rc = last_id(s, "events/", &c);
    }
    if (rc != 0) {
        return read_failed(s, "the highest job id", rc);
    }
    *out = a > b ? (a > c ? a : c) : (b > c ? b : c);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Counts and pages of jobs                                                 */

typedef struct count_row {
    char *tenant, *state; /* owned, unescaped */
    int64_t n;
} count_row;

typedef struct counts_ctx {
    count_row *rows;
    size_t n, cap;
    size_t plen;
    cr_buf tmp;
} counts_ctx;

static void count_kv(void *arg, const cr_etcd_kv *kv)
{
    counts_ctx *c = arg;
    const char *rest = kv->key + c->plen;
    const char *slash = strchr(rest, '/');
    if (!slash || cr__estore_unesc(rest, (size_t)(slash - rest), &c->tmp) != 0) {
        return;
    }
    char *tenant = cr_strdup(cr_buf_str(&c->tmp));
    if (cr__estore_unesc(slash + 1, strlen(slash + 1), &c->tmp) != 0) {
        free(tenant);
        return;
    }
    CR_GROW(c->rows, c->n, c->cap);
    c->rows[c->n++] =
        (count_row){tenant, cr_strdup(cr_buf_str(&c->tmp)), strtoll(kv->value, NULL, 10)};
}

static int read_counts(cr__estore *s, counts_ctx *c, int64_t *rev)
{
    cr_buf k;
    cr_buf_init(&k);
    cr__estore_key(s, &k, "count/");
    c->plen = k.len;
    cr_buf_init(&c->tmp);
    int rc = cr__estore_scan(s, cr_buf_str(&k), NULL, 0, false, count_kv, c, rev);
    cr_buf_fini(&c->tmp);
    cr_buf_fini(&k);
    return rc;
}

static void counts_fini(counts_ctx *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->rows[i].tenant);
        free(c->rows[i].state);
    }
    free(c->rows);
}

static bool in_states(const cr_store_job_query *q, const char *state)
{
    if (q->nstates == 0) {
        return true;
    }
    for (size_t i = 0; i < q->nstates; i++) {
        if (strcmp(q->states[i], state) == 0) {
            return true;
        }
    }
    return false;
}

int cr__estore_job_counts(void *be, const char *tenant, const char *const *states, size_t n,
                          int64_t *out)
{
    cr__estore *s = be;
    counts_ctx c = {0};
    int rc = read_counts(s, &c, NULL);
    for (size_t i = 0; i < n; i++) {
        out[i] = 0;
        for (size_t k = 0; rc == 0 && k < c.n; k++) {
            if (strcmp(c.rows[k].state, states[i]) == 0 &&
                (!tenant || strcmp(c.rows[k].tenant, tenant) == 0)) {
                out[i] += c.rows[k].n;
            }
        }
    }
    counts_fini(&c);
    return rc ? read_failed(s, "job counts", rc) : 0;
}

/*
 * A page of jobs is a merge of the state index's ranges (one per state
 * wanted): each cursor reads its range in id order (descending for newest
 * first) in pages, skipping other tenants' entries; the merge takes the
 * best head until the page is full. Every read is at the revision of the
 * counts read first, so the page and its total are one snapshot. Then the
 * documents are read, at the same revision: one range over the page's ids
 * when they are dense, else one read per id.
 */
typedef struct cursor {
    const char *state; /* borrowed from the counts */
    char *from, *to;   /* owned: the remaining range [from, to) */
    int64_t *ids;      /* the current page's matching ids, in order */
    size_t n, pos;
    bool done; /* the range is exhausted */
} cursor;

typedef struct page_ctx {
    cursor *c;
    const char *tenant;
    size_t got; /* raw keys seen */
    char *last; /* owned: last key seen */
} page_ctx;

static void cursor_kv(void *arg, const cr_etcd_kv *kv)
{
    page_ctx *p = arg;
    p->got++;
    free(p->last);
    p->last = cr_strdup(kv->key);
    if (p->tenant && strcmp(kv->value, p->tenant) != 0) {
        return;
    }
    int64_t id = key_id(kv->key);
    if (id > 0) {
        p->c->ids[p->c->n++] = id;
    }
}

static int cursor_fill(cr__estore *s, cursor *c, const cr_store_job_query *q, int64_t rev)
{
    while (c->pos == c->n && !c->done) {
        c->n = c->pos = 0;
        cr_etcd_range_req r = {.key = c->from,
                               .range_end = c->to,
                               .limit = STORE_ETCD_PAGE,
                               .revision = rev,
                               .sort =
                                   q->oldest_first ? CR_ETCD_SORT_ASCEND : CR_ETCD_SORT_DESCEND};
        cr_etcd_range_result res;
        int rc = cr_etcd_range(s->e, &r, &res, NULL);
        if (rc != 0) {
            return rc;
        }
        page_ctx p = {.c = c, .tenant = q->tenant};
        if (!c->ids) {
            c->ids = cr_calloc(STORE_ETCD_PAGE, sizeof *c->ids);
        }
        for (size_t i = 0; i < res.n; i++) {
            cursor_kv(&p, &res.kvs[i]);
        }
        if (!res.more || res.n == 0) {
            c->done = true;
        } else if (q->oldest_first) {
            /* next: after the last key (it plus a byte sorts right after) */
            free(c->from);
            c->from = cr_asprintf("%s%c", p.last, '\x01');
        } else {
            free(c->to);
            c->to = cr_strdup(p.last); /* range_end is exclusive */
        }
        free(p.last);
        cr_etcd_range_result_fini(&res);
    }
    return 0;
}

typedef struct doc_ctx {
    const int64_t *ids;
    size_t n;
    char **docs; /* owned, per id */
} doc_ctx;

static void doc_kv(void *arg, const cr_etcd_kv *kv)
{
    doc_ctx *d = arg;
    int64_t id = key_id(kv->key);
    for (size_t i = 0; i < d->n; i++) {
        if (d->ids[i] == id && !d->docs[i]) {
            d->docs[i] = cr_strdup(kv->value);
            return;
        }
    }
}

static int read_docs(cr__estore *s, doc_ctx *d, int64_t rev)
{
    int64_t lo = INT64_MAX, hi = 0;
    for (size_t i = 0; i < d->n; i++) {
        lo = d->ids[i] < lo ? d->ids[i] : lo;
        hi = d->ids[i] > hi ? d->ids[i] : hi;
    }
    char from[220], to[220];
    if (d->n > 0 && (uint64_t)(hi - lo) < 4 * (uint64_t)d->n + 16) {
        snprintf(from, sizeof from, "%sjobs/%020" PRId64, s->prefix, lo);
        snprintf(to, sizeof to, "%sjobs/%020" PRId64, s->prefix, hi + 1);
        int64_t r = rev;
        return cr__estore_scan(s, from, to, 0, false, doc_kv, d, &r);
    }
    for (size_t i = 0; i < d->n; i++) {
        snprintf(from, sizeof from, "%sjobs/%020" PRId64, s->prefix, d->ids[i]);
        cr_etcd_range_req q = {.key = from, .revision = rev};
        cr_etcd_range_result r;
        int rc = cr_etcd_range(s->e, &q, &r, NULL);
        if (rc != 0) {
            return rc;
        }
        for (size_t k = 0; k < r.n; k++) {
            doc_kv(d, &r.kvs[k]);
        }
        cr_etcd_range_result_fini(&r);
    }
    return 0;
}

int cr__estore_query_jobs(void *be, const cr_store_job_query *q, cr_store_job_fn fn, void *arg,
                          int64_t *total)
{
    cr__estore *s = be;
    counts_ctx cnt = {0};
    int64_t rev = 0;
    size_t limit = q->limit > 0 ? q->limit : 1;
    cursor *cur = NULL;
    size_t ncur = 0;
    int64_t *ids = cr_calloc(limit, sizeof *ids);
    size_t nids = 0;
    doc_ctx d = {0};
    int rc = read_counts(s, &cnt, &rev);
    if (rc != 0) {
        goto out;
    }
    int64_t sum = 0;
    /* one cursor per state that has matching jobs */
    cur = cr_calloc(cnt.n ? cnt.n : 1, sizeof *cur);
    for (size_t i = 0; i < cnt.n; i++) {
        count_row *row = &cnt.rows[i];
        if (!in_states(q, row->state) || (q->tenant && strcmp(row->tenant, q->tenant) != 0) ||
            row->n <= 0) {
            continue;
        }
        sum += row->n;
        bool have = false; /* one cursor per state, whatever the tenants */
        for (size_t k = 0; k < ncur && !have; k++) {
            have = strcmp(cur[k].state, row->state) == 0;
        }
        if (have) {
            continue;
        }
        cr_buf k;
        cr_buf_init(&k);
        cr__estore_key(s, &k, "jobstate/");
        cr__estore_esc(&k, row->state);
        cr_buf_putc(&k, '/');
        char *pre = cr_buf_take(&k);
        size_t plen = strlen(pre);
        char *pend = cr_malloc(plen + 1);
        cr_etcd_prefix_end(pre, pend, plen + 1);
        cursor *c = &cur[ncur++];
        c->state = row->state;
        if (q->oldest_first) {
            /* strictly after 'after': its key plus a byte sorts next */
            c->from = cr_asprintf("%s%020" PRId64 "%c", pre, q->after > 0 ? q->after : 0, 1);
            c->to = pend;
        } else if (q->before > 0) {
            c->from = cr_strdup(pre);
            c->to = cr_asprintf("%s%020" PRId64, pre, q->before); /* exclusive */
            free(pend);
        } else {
            c->from = cr_strdup(pre);
            c->to = pend;
        }
        free(pre);
    }
    if (total) {
        *total = sum;
    }
    while (nids < limit) {
        cursor *best = NULL;
        for (size_t i = 0; i < ncur; i++) {
            if ((rc = cursor_fill(s, &cur[i], q, rev)) != 0) {
                goto out;
            }
            cursor *c = &cur[i];
            if (c->pos < c->n &&
                (!best || (q->oldest_first ? c->ids[c->pos] < best->ids[best->pos]
                                           : c->ids[c->pos] > best->ids[best->pos]))) {
                best = c;
            }
        }
        if (!best) {
            break;
        }
        ids[nids++] = best->ids[best->pos++];
    }
    d.ids = ids;
    d.n = nids;
    d.docs = cr_calloc(nids ? nids : 1, sizeof *d.docs);
    if ((rc = read_docs(s, &d, rev)) != 0) {
        goto out;
    }
    for (size_t i = 0; i < nids; i++) {
        if (d.docs[i]) {
            fn(arg, ids[i], d.docs[i]);
        }
    }
out:
    if (rc != 0) {
        read_failed(s, "a page of jobs", rc);
    }
    for (size_t i = 0; i < ncur; i++) {
        free(cur[i].from);
        free(cur[i].to);
        free(cur[i].ids);
    }
    free(cur);
    for (size_t i = 0; i < d.n; i++) {
        free(d.docs[i]);
    }
    free(d.docs);
    free(ids);
    counts_fini(&cnt);
    return rc;
}
