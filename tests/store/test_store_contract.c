/*
 * test_store_contract.c - the cr_store contract, the same cases run on
 * both backends: SQLite in a temporary directory and etcd (a real etcd,
 * one cluster prefix per case). Jobs, objects (audit too), events with a
 * limit, usage sums, the highest id, pages of jobs in both orders with
 * tenant and state filters and totals, counts following state changes,
 * reopen, group commit from 8 threads. Then the etcd-only parts: fencing,
 * a transaction over etcd's limits refused, a splittable one split, and
 * the same key written many times in one batch.
 */
#include "cr_store.h"
#include "cr_store_migrate.h"
#include "etcd_harness.h"

#include "cr_buf.h"
#include "cr_error.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <pthread.h>

static etcd_proc etcd;
static bool have_etcd;
static int case_no;

typedef struct backend {
    bool etcd;
    char spec[300]; /* the path given to cr_store_open */
    char dir[128];
    char cluster[32];
} backend;

static int setup_sqlite(void **state)
{
    backend *b = calloc(1, sizeof *b);
    snprintf(b->dir, sizeof b->dir, "/tmp/corral-test-contract-XXXXXX");
    assert_non_null(mkdtemp(b->dir));
    snprintf(b->spec, sizeof b->spec, "%s/corral.db", b->dir);
    *state = b;
    return 0;
}

static int setup_etcd(void **state)
{
    if (!have_etcd) {
        have_etcd = etcd_start(&etcd) == 0;
        assert_true(have_etcd);
    }
    backend *b = calloc(1, sizeof *b);
    b->etcd = true;
    snprintf(b->spec, sizeof b->spec, "etcd:%s", etcd.url);
    snprintf(b->cluster, sizeof b->cluster, "case%d", ++case_no);
    *state = b;
    return 0;
}

static int teardown(void **state)
{
    backend *b = *state;
    if (b->dir[0]) {
        char cmd[200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", b->dir);
        assert_int_equal(system(cmd), 0);
    }
    free(b);
    return 0;
}

static cr_store *open_store(const backend *b)
{
    cr_store *s = NULL;
    cr_store_opts o = {.cluster = b->etcd ? b->cluster : NULL};
    assert_int_equal(cr_store_open(b->spec, &o, &s), 0);
    assert_string_equal(cr_store_backend(s), b->etcd ? "etcd" : "sqlite");
    return s;
}

/* ------------------------------------------------------------------------ */

typedef struct rows {
    int64_t ids[4096];
    char docs[4096][48];
    size_t n;
} rows;

static void on_job(void *arg, int64_t id, const char *doc)
{
    rows *r = arg;
    if (r->n < 4096) {
        r->ids[r->n] = id;
        snprintf(r->docs[r->n], sizeof r->docs[0], "%s", doc);
        r->n++;
    }
}

typedef struct objs {
    char keys[64][48];
    char docs[64][48];
    size_t n;
} objs;

static void on_obj(void *arg, const char *key, const char *doc)
{
    objs *o = arg;
    if (o->n < 64) {
        snprintf(o->keys[o->n], sizeof o->keys[0], "%s", key);
        snprintf(o->docs[o->n], sizeof o->docs[0], "%s", doc);
        o->n++;
    }
}

typedef struct evs {
    char what[64][32];
    int64_t t[64];
    size_t n;
} evs;

static void on_event(void *arg, int64_t job, int64_t time_ns, const char *what, const char *why)
{
    evs *e = arg;
    if (e->n < 64) {
        snprintf(e->what[e->n], sizeof e->what[0], "%s", what);
        e->t[e->n++] = time_ns;
    }
}

typedef struct usage {
    double gpu_s, cost;
    size_t n;
} usage;

static void on_usage(void *arg, const char *tenant, const char *gpu_type, const char *day,
                     double gpu_s, double energy_j, double cost)
{
    usage *u = arg;
    if (strcmp(tenant, "ml/x") == 0 && strcmp(gpu_type, "H100 80GB") == 0) {
        u->gpu_s += gpu_s;
        u->cost += cost;
    }
    u->n++;
}

static void test_jobs_objects_events(void **state)
{
    backend *b = *state;
    cr_store *s = open_store(b);
    if (!b->etcd) {
        assert_int_equal(cr_store_set_fence(s, "/k", 1), CR_ENOTSUP);
        assert_null(cr_store_etcd_client(s));
    }
    cr_store_txn *t = cr_store_txn_new();
    cr_store_txn_put_job(t, 7, "ml", "pending", "{\"id\":7}");
    cr_store_txn_put_job(t, 8, "ml", "pending", "{\"id\":8}");
    cr_store_txn_put_job(t, 7, "ml", "running", "{\"id\":7,\"v\":2}"); /* same row twice */
    cr_store_txn_event(t, 7, 100, "submitted", "by test");
    cr_store_txn_event(t, 7, 200, "started", NULL);
    cr_store_txn_event(t, 7, 300, "running", "");
    cr_store_txn_event(t, 42, 50, "orphan", "an event of a job without a row");
    cr_store_txn_put(t, "tokens", "a/b c", "{\"t\":1}");
    cr_store_txn_put(t, "tokens", "plain", "{\"t\":2}");
    cr_store_txn_put(t, "audit", "00000000000000000001-000001", "{\"a\":1}");
    cr_store_txn_put(t, "nodes", "n1", "{}");
    cr_store_txn_del(t, "nodes", "n1");
    cr_store_txn_del(t, "nodes", "never-there");
    assert_int_equal(cr_store_commit(s, t), 0);

    rows r = {0};
    assert_int_equal(cr_store_load_jobs(s, on_job, &r), 0);
    assert_int_equal(r.n, 2);
    assert_int_equal(r.ids[0], 7);
    assert_string_equal(r.docs[0], "{\"id\":7,\"v\":2}");
    assert_int_equal(r.ids[1], 8);
    memset(&r, 0, sizeof r);
    assert_int_equal(cr_store_get_job(s, 8, on_job, &r), 0);
    assert_string_equal(r.docs[0], "{\"id\":8}");
    assert_int_equal(cr_store_get_job(s, 9, on_job, &r), CR_ENOENT);

    objs o = {0};
    assert_int_equal(cr_store_load_objects(s, "tokens", on_obj, &o), 0);
    assert_int_equal(o.n, 2);
    assert_string_equal(o.keys[0], "a/b c");
    assert_string_equal(o.docs[0], "{\"t\":1}");
    assert_string_equal(o.keys[1], "plain");
    memset(&o, 0, sizeof o);
    assert_int_equal(cr_store_load_objects(s, "nodes", on_obj, &o), 0);
    assert_int_equal(o.n, 0);
    assert_int_equal(cr_store_load_objects(s, "audit", on_obj, &o), 0);
    assert_int_equal(o.n, 1);
    /* one object by kind and key (the stored job logs, ctl_logs.c) */
    memset(&o, 0, sizeof o);
    assert_int_equal(cr_store_get_object(s, "tokens", "a/b c", on_obj, &o), 0);
    assert_int_equal(o.n, 1);
    assert_string_equal(o.keys[0], "a/b c");
    assert_string_equal(o.docs[0], "{\"t\":1}");
    assert_int_equal(cr_store_get_object(s, "tokens", "a/b", on_obj, &o), CR_ENOENT);
    assert_int_equal(cr_store_get_object(s, "nodes", "n1", on_obj, &o), CR_ENOENT);
    assert_int_equal(o.n, 1);

    evs e = {0};
    assert_int_equal(cr_store_job_events(s, 7, 0, on_event, &e), 0);
    assert_int_equal(e.n, 3);
    assert_string_equal(e.what[0], "submitted");
    assert_string_equal(e.what[2], "running");
    assert_int_equal(e.t[1], 200);
    memset(&e, 0, sizeof e);
    assert_int_equal(cr_store_job_events(s, 7, 2, on_event, &e), 0);
    assert_int_equal(e.n, 2);
    assert_string_equal(e.what[1], "started");

    int64_t max = 0;
    assert_int_equal(cr_store_max_job_id(s, &max), 0);
    assert_int_equal(max, 42); /* events count: ids are never reused */

    /* reopen: all of it is durable */
    cr_store_close(s);
    s = open_store(b);
    memset(&r, 0, sizeof r);
    assert_int_equal(cr_store_load_jobs(s, on_job, &r), 0);
    assert_int_equal(r.n, 2);
    memset(&e, 0, sizeof e);
    assert_int_equal(cr_store_job_events(s, 7, 0, on_event, &e), 0);
    assert_int_equal(e.n, 3);
    /* events after a reopen come after the old ones */
    t = cr_store_txn_new();
    cr_store_txn_event(t, 7, 400, "completed", "");
    assert_int_equal(cr_store_commit(s, t), 0);
    memset(&e, 0, sizeof e);
    assert_int_equal(cr_store_job_events(s, 7, 0, on_event, &e), 0);
    assert_int_equal(e.n, 4);
    assert_string_equal(e.what[3], "completed");
    max = 0;
    assert_int_equal(cr_store_max_job_id(s, &max), 0);
    assert_int_equal(max, 42);
    cr_store_close(s);
}

static void test_usage(void **state)
{
    backend *b = *state;
    cr_store *s = open_store(b);
    for (int i = 0; i < 3; i++) {
        cr_store_txn *t = cr_store_txn_new();
        cr_store_txn_usage(t, "ml/x", "H100 80GB", "2026-12-01", 10, 1, 0.5);
        cr_store_txn_usage(t, "ml/x", "H100 80GB", "2026-12-01", 5, 1, 0.25);
        cr_store_txn_usage(t, "cv", "A100", "2026-12-02", 1, 1, 1);
        assert_int_equal(cr_store_commit(s, t), 0);
    }
    cr_store_close(s);
    s = open_store(b);
    cr_store_txn *t = cr_store_txn_new();
    cr_store_txn_usage(t, "ml/x", "H100 80GB", "2026-12-01", 1, 0, 0.25);
    assert_int_equal(cr_store_commit(s, t), 0);
    usage u = {0};
    assert_int_equal(cr_store_load_usage(s, on_usage, &u), 0);
    assert_int_equal(u.n, 2);
    assert_true(u.gpu_s > 45.99 && u.gpu_s < 46.01);
    assert_true(u.cost > 2.49 && u.cost < 2.51);
    cr_store_close(s);
}

static const char *const all_states[] = {"pending", "running", "completed", "failed"};

static void test_pages_and_counts(void **state)
{
    backend *b = *state;
    cr_store *s = open_store(b);
    /* 300 jobs: tenant a for even ids, b for odd; state by id % 4 */
    cr_store_txn *t = NULL;
    for (int64_t id = 1; id <= 300; id++) {
        if (!t) {
            t = cr_store_txn_new();
        }
        char doc[32];
        snprintf(doc, sizeof doc, "{\"id\":%lld}", (long long)id);
        cr_store_txn_put_job(t, id, id % 2 ? "b" : "a", all_states[id % 4], doc);
        if (id % 10 == 0) {
            assert_int_equal(cr_store_commit(s, t), 0);
            t = NULL;
        }
    }
    int64_t n[4];
    assert_int_equal(cr_store_job_counts(s, NULL, all_states, 4, n), 0);
    assert_int_equal(n[0], 75);
    assert_int_equal(n[1], 75);
    assert_int_equal(cr_store_job_counts(s, "a", all_states, 4, n), 0);
    assert_int_equal(n[0], 75); /* ids % 4 == 0 are all even */
    assert_int_equal(n[1], 0);
    assert_int_equal(n[2], 75);

    /* newest first, all: 300, 299, ... in pages of 50 */
    rows r = {0};
    int64_t total = 0;
    cr_store_job_query q = {.limit = 50};
    assert_int_equal(cr_store_query_jobs(s, &q, on_job, &r, &total), 0);
    assert_int_equal(total, 300);
    assert_int_equal(r.n, 50);
    assert_int_equal(r.ids[0], 300);
    assert_int_equal(r.ids[49], 251);
    assert_string_equal(r.docs[0], "{\"id\":300}");
    memset(&r, 0, sizeof r);
    q.before = 251;
    assert_int_equal(cr_store_query_jobs(s, &q, on_job, &r, &total), 0);
    assert_int_equal(r.n, 50);
    assert_int_equal(r.ids[0], 250);
    /* oldest first after 290: 291..300 */
    memset(&r, 0, sizeof r);
    cr_store_job_query qa = {.oldest_first = true, .after = 290, .limit = 50};
    assert_int_equal(cr_store_query_jobs(s, &qa, on_job, &r, NULL), 0);
    assert_int_equal(r.n, 10);
    assert_int_equal(r.ids[0], 291);
    assert_int_equal(r.ids[9], 300);
    /* tenant b, states running+failed (ids 1,3 mod 4: all odd) newest first */
    const char *const rf[] = {"running", "failed"};
    cr_store_job_query qt = {.tenant = "b", .states = rf, .nstates = 2, .limit = 7};
    memset(&r, 0, sizeof r);
    assert_int_equal(cr_store_query_jobs(s, &qt, on_job, &r, &total), 0);
    assert_int_equal(total, 150);
    assert_int_equal(r.n, 7);
    for (size_t i = 0; i < r.n; i++) {
        assert_int_equal(r.ids[i], 299 - 2 * (int64_t)i);
    }
    /* tenant a, state running: none */
    cr_store_job_query qn = {.tenant = "a", .states = rf, .nstates = 1, .limit = 5};
    memset(&r, 0, sizeof r);
    assert_int_equal(cr_store_query_jobs(s, &qn, on_job, &r, &total), 0);
    assert_int_equal(total, 0);
    assert_int_equal(r.n, 0);
    /* the whole list, page by page, oldest first: every id once */
    int64_t after = 0, seen = 0;
    for (;;) {
        memset(&r, 0, sizeof r);
        cr_store_job_query qp = {.oldest_first = true, .after = after, .limit = 64};
        assert_int_equal(cr_store_query_jobs(s, &qp, on_job, &r, NULL), 0);
        for (size_t i = 0; i < r.n; i++) {
            assert_int_equal(r.ids[i], after + 1 + (int64_t)i);
        }
        seen += (int64_t)r.n;
        if (r.n < 64) {
            break;
        }
        after = r.ids[r.n - 1];
    }
    assert_int_equal(seen, 300);

    /* state changes move counts (in 3 transactions: each fits one etcd txn) */
    for (int64_t part = 0; part < 3; part++) {
        t = cr_store_txn_new();
        for (int64_t id = 1 + part * 100; id <= 100 + part * 100; id += 4) {
            cr_store_txn_put_job(t, id, "b", "completed", "{}"); /* the 'running' ones */
        }
        assert_int_equal(cr_store_commit(s, t), 0);
    }
    cr_store_close(s);
    s = open_store(b);
    assert_int_equal(cr_store_job_counts(s, NULL, all_states, 4, n), 0);
    assert_int_equal(n[1], 0);
    assert_int_equal(n[2], 150);
    assert_int_equal(cr_store_job_counts(s, "b", all_states, 4, n), 0);
    assert_int_equal(n[2], 75);
    cr_store_close(s);
}

typedef struct worker {
    cr_store *s;
    int base;
    int fails;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < 25; i++) {
        cr_store_txn *t = cr_store_txn_new();
        int64_t id = w->base + i;
        cr_store_txn_put_job(t, id, "t", "pending", "{}");
        cr_store_txn_event(t, id, 1, "submitted", "");
        cr_store_txn_put(t, "meta", "last", "x"); /* every thread, same key */
        if (cr_store_commit(w->s, t) != 0) {
            w->fails++;
        }
    }
    return NULL;
}

static void test_group_commit(void **state)
{
    backend *b = *state;
    cr_store *s = open_store(b);
    pthread_t th[8];
    worker w[8];
    for (int i = 0; i < 8; i++) {
        w[i] = (worker){.s = s, .base = 1000 * (i + 1)};
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].fails, 0);
    }
    uint64_t commits = 0, txns = 0;
    cr_store_stats(s, &commits, &txns);
    assert_int_equal(txns, 200);
    assert_true(commits >= 1 && commits <= 200);
    int64_t n = 0;
    const char *p = "pending";
    assert_int_equal(cr_store_job_counts(s, "t", &p, 1, &n), 0);
    assert_int_equal(n, 200);
    int64_t max = 0;
    assert_int_equal(cr_store_max_job_id(s, &max), 0);
    assert_int_equal(max, 8024);
    cr_store_close(s);
}

/* ------------------------------------------------------------------------ */
/* etcd only                                                                */

static void test_fence(void **state)
{
    backend *b = *state;
    cr_store *s = open_store(b);
    cr_etcd *e = cr_store_etcd_client(s);
    assert_non_null(e);
    char lock[200];
    snprintf(lock, sizeof lock, "%sleader", cr_store_etcd_prefix(s));
    int64_t rev = 0;
    assert_int_equal(cr_etcd_put(e, lock, "me", 2, 0, &rev), 0);
    assert_int_equal(cr_store_set_fence(s, lock, rev), 0);
    cr_store_txn *t = cr_store_txn_new();
    cr_store_txn_put_job(t, 1, "a", "pending", "{}");
    assert_int_equal(cr_store_commit(s, t), 0);
    assert_false(cr_store_fenced(s));

    /* another holder: the key is deleted and created again */
    assert_int_equal(cr_etcd_delete(e, lock, false, NULL, NULL), 0);
    int64_t rev2 = 0;
    assert_int_equal(cr_etcd_put(e, lock, "other", 5, 0, &rev2), 0);
    t = cr_store_txn_new();
    cr_store_txn_put_job(t, 2, "a", "pending", "{}");
    assert_int_equal(cr_store_commit(s, t), CR_EFENCED);
    assert_true(cr_store_fenced(s));
    /* later writes fail too, without being tried */
    t = cr_store_txn_new();
    cr_store_txn_put(t, "meta", "x", "y");
    assert_int_equal(cr_store_commit(s, t), CR_EFENCED);
    rows r = {0};
    assert_int_equal(cr_store_get_job(s, 2, on_job, &r), CR_ENOENT);

    /* a second store (the new holder) fenced on the new revision writes */
    cr_store *s2 = open_store(b);
    assert_int_equal(cr_store_set_fence(s2, lock, rev2), 0);
    t = cr_store_txn_new();
    cr_store_txn_put_job(t, 3, "a", "running", "{}");
    assert_int_equal(cr_store_commit(s2, t), 0);
    /* and its counts include what the first holder wrote */
    int64_t n[2];
    const char *const st[] = {"pending", "running"};
    assert_int_equal(cr_store_job_counts(s2, "a", st, 2, n), 0);
    assert_int_equal(n[0], 1);
    assert_int_equal(n[1], 1);
    /* the first store, fenced again on the new revision, works again */
    assert_int_equal(cr_store_set_fence(s, lock, rev2), 0);
    t = cr_store_txn_new();
    cr_store_txn_put_job(t, 1, "a", "completed", "{}");
    assert_int_equal(cr_store_commit(s, t), 0);
    assert_int_equal(cr_store_job_counts(s2, "a", st, 2, n), 0);
    assert_int_equal(n[0], 0);
    /* the lock vanishes (lease expired): fenced */
    assert_int_equal(cr_etcd_delete(e, lock, false, NULL, NULL), 0);
    t = cr_store_txn_new();
    cr_store_txn_put_job(t, 4, "a", "pending", "{}");
    assert_int_equal(cr_store_commit(s2, t), CR_EFENCED);
    cr_store_close(s2);
    cr_store_close(s);
    /* SQLite has no fence */
}

static void test_limits(void **state)
{
    backend *b = *state;
    cr_store *s = open_store(b);
    /* 200 jobs in one transaction: over 128 ops, refused whole */
    cr_store_txn *t = cr_store_txn_new();
    for (int64_t id = 1; id <= 200; id++) {
        cr_store_txn_put_job(t, id, "a", "pending", "{}");
    }
    assert_int_equal(cr_store_commit(s, t), CR_ETOOBIG);
    rows r = {0};
    assert_int_equal(cr_store_load_jobs(s, on_job, &r), 0);
    assert_int_equal(r.n, 0);
    /* a 2 MiB document alone is over etcd's request size */
    size_t big = 2u << 20;
    char *doc = malloc(big + 1);
    memset(doc, 'x', big);
    doc[big] = '\0';
    t = cr_store_txn_new();
    cr_store_txn_put(t, "blobs", "big", doc);
    assert_int_equal(cr_store_commit(s, t), CR_ETOOBIG);
    free(doc);
    /* marked splittable: committed in parts */
    t = cr_store_txn_new();
    for (int64_t id = 1; id <= 500; id++) {
        cr_store_txn_put_job(t, id, "a", "pending", "{}");
        cr_store_txn_event(t, id, 1, "allocated", "");
    }
    cr_store_txn_splittable(t);
    assert_int_equal(cr_store_commit(s, t), 0);
    memset(&r, 0, sizeof r);
    assert_int_equal(cr_store_load_jobs(s, on_job, &r), 0);
    assert_int_equal(r.n, 500);
    uint64_t commits = 0, txns = 0;
    cr_store_stats(s, &commits, &txns);
    assert_true(commits >= 8); /* 1000+ ops in txns of at most 128 */
    cr_store_close(s);
}

/* sqlite -> etcd -> sqlite: every row back, usage sums and event order
 * kept; a non-empty target refused; the same store as source and target
 * refused. */
typedef struct dump {
    cr_buf b;
} dump;

static void d_job(void *arg, int64_t id, const char *tenant, const char *state, const char *doc)
{
    cr_buf_printf(&((dump *)arg)->b, "J%lld %s %s %s\n", (long long)id, tenant, state, doc);
}

static void d_event(void *arg, int64_t job, int64_t time_ns, const char *what, const char *why)
{
    cr_buf_printf(&((dump *)arg)->b, "E%lld %lld %s %s\n", (long long)job, (long long)time_ns, what,
                  why);
}

static void d_obj(void *arg, const char *key, const char *doc)
{
    cr_buf_printf(&((dump *)arg)->b, "O%s %s\n", key, doc);
}

static void d_usage(void *arg, const char *tenant, const char *gpu_type, const char *day,
                    double gpu_s, double energy_j, double cost)
{
    cr_buf_printf(&((dump *)arg)->b, "U%s %s %s %.3f %.3f %.3f\n", tenant, gpu_type, day, gpu_s,
                  energy_j, cost);
}

static void d_kind(void *arg, const char *kind)
{
    cr_buf_printf(&((dump *)arg)->b, "K%s\n", kind);
}

static char *dump_store(const char *spec, const char *cluster)
{
    cr_store *s = NULL;
    cr_store_opts o = {.cluster = cluster};
    assert_int_equal(cr_store_open(spec, &o, &s), 0);
    dump d;
    cr_buf_init(&d.b);
    assert_int_equal(cr_store_load_job_rows(s, d_job, &d), 0);
    assert_int_equal(cr_store_load_events(s, d_event, &d), 0);
    assert_int_equal(cr_store_object_kinds(s, d_kind, &d), 0);
    static const char *const kinds[] = {"audit", "meta", "tokens"};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(cr_store_load_objects(s, kinds[i], d_obj, &d), 0);
    }
    assert_int_equal(cr_store_load_usage(s, d_usage, &d), 0);
    cr_store_close(s);
    return cr_buf_take(&d.b);
}

static void test_migrate_round_trip(void **state)
{
    backend *b = *state;
    char dir[200], spec[300], back[300], etcd_spec[200], err[1024] = "";
    snprintf(dir, sizeof dir, "%s/src", b->dir);
    snprintf(back, sizeof back, "sqlite:%s/back", b->dir);
    snprintf(spec, sizeof spec, "%s/src/corral.db", b->dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    cr_store *s = NULL;
    assert_int_equal(cr_store_open(spec, NULL, &s), 0);
    for (int64_t id = 1; id <= 120; id++) {
        cr_store_txn *t = cr_store_txn_new();
        char doc[48];
        snprintf(doc, sizeof doc, "{\"id\":%lld}", (long long)id);
        cr_store_txn_put_job(t, id, id % 3 ? "ml" : "cv team", all_states[id % 4], doc);
        cr_store_txn_event(t, id, id * 10, "submitted", "by test");
        cr_store_txn_event(t, id, id * 10 + 1, "started", "");
        assert_int_equal(cr_store_commit(s, t), 0);
    }
    cr_store_txn *t = cr_store_txn_new();
    cr_store_txn_event(t, 500, 1, "orphan", "no row");
    cr_store_txn_put(t, "tokens", "t/1", "{\"hash\":\"x\"}");
    cr_store_txn_put(t, "audit", "0001", "{\"a\":1}");
    cr_store_txn_put(t, "meta", "job_id_hwm", "600");
    cr_store_txn_usage(t, "ml", "H100", "2026-12-01", 3.5, 1, 0.125);
    cr_store_txn_usage(t, "cv team", "A100", "2026-11-30", 7, 2, 0.5);
    assert_int_equal(cr_store_commit(s, t), 0);
    cr_store_close(s);

    char from[320];
    snprintf(from, sizeof from, "sqlite:%s", dir);
    snprintf(etcd_spec, sizeof etcd_spec, "etcd:%s", etcd.url);
    cr_store_counts n = {0};
    assert_int_equal(cr_store_migrate(from, etcd_spec, b->cluster, NULL, &n, err, sizeof err), 0);
    assert_int_equal(n.jobs, 120);
    assert_int_equal(n.events, 241);
    assert_int_equal(n.objects, 3);
    assert_int_equal(n.usage, 2);
    /* again into the same (now full) target: refused */
    assert_int_equal(cr_store_migrate(from, etcd_spec, b->cluster, NULL, &n, err, sizeof err),
                     CR_EEXIST);
    assert_non_null(strstr(err, "not empty"));
    assert_int_equal(cr_store_migrate(from, from, NULL, NULL, &n, err, sizeof err), CR_EINVAL);
    assert_int_equal(
        cr_store_migrate("sqlite:/nonexistent", etcd_spec, "x", NULL, &n, err, sizeof err),
        CR_ENOENT);
    assert_int_equal(cr_store_migrate("mysql:x", etcd_spec, "x", NULL, &n, err, sizeof err),
                     CR_EINVAL);
    /* and back */
    assert_int_equal(cr_store_migrate(etcd_spec, back, b->cluster, NULL, &n, err, sizeof err), 0);
    char *a = dump_store(spec, NULL);
    char *e = dump_store(etcd_spec, b->cluster);
    char bpath[300];
    snprintf(bpath, sizeof bpath, "%s/back/corral.db", b->dir);
    char *c = dump_store(bpath, NULL);
    assert_string_equal(a, c);
    assert_string_equal(a, e);
    assert_non_null(strstr(a, "J3 cv team"));
    /* the etcd copy knows the highest id, and its counts */
    cr_store *es = NULL;
    cr_store_opts o = {.cluster = b->cluster};
    assert_int_equal(cr_store_open(etcd_spec, &o, &es), 0);
    int64_t max = 0, cnt[4];
    assert_int_equal(cr_store_max_job_id(es, &max), 0);
    assert_int_equal(max, 500);
    assert_int_equal(cr_store_job_counts(es, "cv team", all_states, 4, cnt), 0);
    assert_int_equal(cnt[0] + cnt[1] + cnt[2] + cnt[3], 40);
    cr_store_close(es);
    free(a);
    free(c);
    free(e);
}

static int setup_both(void **state)
{
    setup_etcd(state);
    backend *b = *state;
    snprintf(b->dir, sizeof b->dir, "/tmp/corral-test-contract-XXXXXX");
    assert_non_null(mkdtemp(b->dir));
    return 0;
}

static void test_bad_endpoint(void **state)
{
    cr_store *s = NULL;
    int port = free_port();
    char spec[100];
    snprintf(spec, sizeof spec, "etcd:http://127.0.0.1:%d", port);
    cr_store_opts o = {.etcd_timeout_ms = 500};
    assert_int_equal(cr_store_open(spec, &o, &s), CR_EUNAVAIL);
    assert_int_equal(cr_store_open("etcd:ftp://x", &o, &s), CR_EINVAL);
    cr_store_opts bad = {.cluster = "a/b"};
    snprintf(spec, sizeof spec, "etcd:%s", etcd.url);
    assert_int_equal(cr_store_open(spec, &bad, &s), CR_EINVAL);
}

int main(void)
{
#define BOTH(fn)                                                                                   \
    cmocka_unit_test_setup_teardown(fn, setup_sqlite, teardown),                                   \
        cmocka_unit_test_setup_teardown(fn, setup_etcd, teardown)
    const struct CMUnitTest tests[] = {
        BOTH(test_jobs_objects_events),
        BOTH(test_usage),
        BOTH(test_pages_and_counts),
        BOTH(test_group_commit),
        cmocka_unit_test_setup_teardown(test_fence, setup_etcd, teardown),
        cmocka_unit_test_setup_teardown(test_limits, setup_etcd, teardown),
        cmocka_unit_test_setup_teardown(test_bad_endpoint, setup_etcd, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_round_trip, setup_both, teardown),
    };
    if (!etcd_binary()) {
        fprintf(stderr, "no etcd binary (apt-get install etcd-server): skipped\n");
        return 77;
    }
    int rc = cmocka_run_group_tests_name("store-contract", tests, NULL, NULL);
    if (have_etcd) {
        etcd_stop(&etcd);
    }
    return rc;
}
