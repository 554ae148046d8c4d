/*
 * test_store.c - the SQLite store: migrations, group commit from many
 * threads, per-transaction isolation inside a batch, reload after reopen,
 * refusal of a newer schema, backup while 8 threads commit and restore.
 */
#include "cr_store.h"
#include "cr_store_backup.h"

#include "cr_error.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <pthread.h>
#include <sqlite3.h>

static char dir[256];
static char path[300];

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/corral-test-store-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/corral.db", dir);
    return 0;
}

static int teardown(void **state)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

typedef struct seen {
    int64_t ids[20000];
    size_t n;
} seen;

static void on_job(void *arg, int64_t id, const char *doc)
{
    seen *s = arg;
    if (s->n < 20000) {
        s->ids[s->n++] = id;
    }
}

static void test_open_migrate_reopen(void **state)
{
    cr_store *s = NULL;
    assert_int_equal(cr_store_open(path, NULL, &s), 0);
    assert_int_equal(cr_store_schema_version(s), CR_STORE_SCHEMA_VERSION);
    cr_store_txn *t = cr_store_txn_new();
    cr_store_txn_put_job(t, 7, "ml", "pending", "{\"id\":7}");
    cr_store_txn_event(t, 7, 123, "submitted", "by test");
    cr_store_txn_put(t, "tenant", "ml", "{\"weight\":1}");
    cr_store_txn_usage(t, "ml", "H100", "2026-01-01", 3600, 10, 2.5);
    cr_store_txn_usage(t, "ml", "H100", "2026-01-01", 3600, 10, 2.5);
    assert_int_equal(cr_store_commit(s, t), 0);
    cr_store_close(s);

    s = NULL;
    assert_int_equal(cr_store_open(path, NULL, &s), 0);
    seen *sn = calloc(1, sizeof *sn);
    assert_int_equal(cr_store_load_jobs(s, on_job, sn), 0);
    assert_int_equal(sn->n, 1);
    assert_int_equal(sn->ids[0], 7);
    free(sn);
    cr_store_close(s);
}

static void on_usage(void *arg, const char *tenant, const char *gpu_type, const char *day,
                     double gpu_s, double energy_j, double cost)
{
    double *sum = arg;
    sum[0] += gpu_s;
    sum[1] += cost;
}

static void test_usage_accumulates(void **state)
{
    cr_store *s = NULL;
    assert_int_equal(cr_store_open(path, NULL, &s), 0);
    for (int i = 0; i < 3; i++) {
        cr_store_txn *t = cr_store_txn_new();
        cr_store_txn_usage(t, "ml", "A100", "2026-01-02", 100, 1, 0.5);
        assert_int_equal(cr_store_commit(s, t), 0);
    }
    double sum[2] = {0, 0};
    assert_int_equal(cr_store_load_usage(s, on_usage, sum), 0);
    assert_true(sum[0] == 300.0);
    assert_true(sum[1] == 1.5);
    cr_store_close(s);
}

typedef struct worker {
    cr_store *s;
    int base;
    int n;
    int failures;
} worker;

static void *submit_many(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < w->n; i++) {
        cr_store_txn *t = cr_store_txn_new();
        char doc[64];
        snprintf(doc, sizeof doc, "{\"i\":%d}", i);
        cr_store_txn_put_job(t, w->base + i, "t", "pending", doc);
        cr_store_txn_event(t, w->base + i, i, "submitted", "");
        if (cr_store_commit(w->s, t) != 0) {
            w->failures++;
        }
    }
    return NULL;
}

/* Group commit: 8 threads x 300 waiting commits end up in far fewer SQLite
 * commits, and every row is there. */
static void test_group_commit_concurrent(void **state)
{
    cr_store *s = NULL;
    assert_int_equal(cr_store_open(path, NULL, &s), 0);
    pthread_t th[8];
    worker w[8];
    for (int i = 0; i < 8; i++) {
        w[i] = (worker){.s = s, .base = 1 + i * 1000, .n = 300, .failures = 0};
        pthread_create(&th[i], NULL, submit_many, &w[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].failures, 0);
    }
    uint64_t commits = 0, txns = 0;
    cr_store_stats(s, &commits, &txns);
    assert_int_equal(txns, 2400);
    assert_true(commits <= txns);
    seen *sn = calloc(1, sizeof *sn);
    assert_int_equal(cr_store_load_jobs(s, on_job, sn), 0);
    assert_int_equal(sn->n, 2400);
    for (size_t i = 1; i < sn->n; i++) {
        assert_true(sn->ids[i] > sn->ids[i - 1]);
    }
    free(sn);
    cr_store_close(s);
}

typedef struct result {
    int status;
    int calls;
} result;

static void done(void *arg, int status)
{
    result *r = arg;
    r->status = status;
    r->calls++;
}

/* One bad transaction in a batch fails alone; the others commit. */
static void test_failing_txn_isolated(void **state)
{
    cr_store *s = NULL;
    assert_int_equal(cr_store_open(path, NULL, &s), 0);
    result r[3];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 3; i++) {
        cr_store_txn *t = cr_store_txn_new();
        cr_store_txn_put_job(t, 100 + i, "t", "pending", "{}");
        if (i == 1) {
            cr_store_txn_event(t, 101, 0, NULL, NULL); /* NOT NULL violated */
        }
        cr_store_submit(s, t, done, &r[i]);
    }
    cr_store_txn *t = cr_store_txn_new();
    assert_int_equal(cr_store_commit(s, t), 0); /* a barrier: all before are done */
    assert_int_equal(r[0].calls, 1);
    assert_int_equal(r[0].status, 0);
    assert_int_equal(r[1].calls, 1);
    assert_true(r[1].status < 0);
    assert_int_equal(r[2].status, 0);
    seen *sn = calloc(1, sizeof *sn);
    assert_int_equal(cr_store_load_jobs(s, on_job, sn), 0);
    assert_int_equal(sn->n, 2);
    assert_int_equal(sn->ids[0], 100);
    assert_int_equal(sn->ids[1], 102);
    free(sn);
    cr_store_close(s);
}

static void test_newer_schema_refused(void **state)
{
    cr_store *s = NULL;
    assert_int_equal(cr_store_open(path, NULL, &s), 0);
    cr_store_close(s);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version=99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    s = NULL;
    assert_int_equal(cr_store_open(path, NULL, &s), CR_ENOTSUP);
    assert_null(s);
}

/* A version-1 database (as Corral 0.1 wrote it) is migrated in place. */
static void test_migrate_from_v1(void **state)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    const char *v1 =
        "CREATE TABLE jobs(id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, state TEXT NOT NULL,"
        " doc TEXT NOT NULL);"
        "CREATE INDEX jobs_tenant_state ON jobs(tenant, state);"
        "CREATE TABLE events(seq INTEGER PRIMARY KEY AUTOINCREMENT, job INTEGER NOT NULL,"
        " time_ns INTEGER NOT NULL, what TEXT NOT NULL, why TEXT NOT NULL);"
        "CREATE INDEX events_job ON events(job, seq);"
        "CREATE TABLE objects(kind TEXT NOT NULL, key TEXT NOT NULL, doc TEXT NOT NULL,"
        " PRIMARY KEY(kind, key)) WITHOUT ROWID;"
        "CREATE TABLE usage(tenant TEXT NOT NULL, gpu_type TEXT NOT NULL, day TEXT NOT NULL,"
        " gpu_s REAL NOT NULL, energy_j REAL NOT NULL, cost REAL NOT NULL,"
        " PRIMARY KEY(tenant, gpu_type, day)) WITHOUT ROWID;"
        "INSERT INTO jobs VALUES(5, 't', 'pending', '{}');"
        "PRAGMA user_version=1;";
    assert_int_equal(sqlite3_exec(db, v1, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    cr_store *s = NULL;
    assert_int_equal(cr_store_open(path, NULL, &s), 0);
    assert_int_equal(cr_store_schema_version(s), CR_STORE_SCHEMA_VERSION);
    seen *sn = calloc(1, sizeof *sn);
    assert_int_equal(cr_store_load_jobs(s, on_job, sn), 0);
    assert_int_equal(sn->n, 1);
    assert_int_equal(sn->ids[0], 5);
    free(sn);
    cr_store_close(s);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT count(*) FROM sqlite_master WHERE name = "
                                        "'jobs_tenant_state'",
                                        -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void test_bad_path(void **state)
{
    cr_store *s = NULL;
    assert_int_equal(cr_store_open("/nonexistent-dir/x/corral.db", NULL, &s), CR_EIO);
    assert_null(s);
}

static void on_event(void *arg, int64_t job, int64_t time_ns, const char *what, const char *why)
{
    int *n = arg;
    (*n)++;
}

static void test_objects_and_events(void **state)
{
    cr_store *s = NULL;
    assert_int_equal(cr_store_open(path, NULL, &s), 0);
    cr_store_txn *t = cr_store_txn_new();
    cr_store_txn_put(t, "token", "1", "{\"a\":1}");
    cr_store_txn_put(t, "token", "2", "{\"a\":2}");
    cr_store_txn_del(t, "token", "1");
    for (int i = 0; i < 5; i++) {
        cr_store_txn_event(t, 9, i, "x", "y");
    }
    assert_int_equal(cr_store_commit(s, t), 0);
    int n = 0;
    assert_int_equal(cr_store_job_events(s, 9, 3, on_event, &n), 0);
    assert_int_equal(n, 3);
    n = 0;
    assert_int_equal(cr_store_job_events(s, 9, 0, on_event, &n), 0);
    assert_int_equal(n, 5);
    cr_store_close(s);
}

/* A backup taken while writers commit is one committed state: it holds a
 * prefix of each writer's (ordered) jobs with no gap; it restores into a
 * new directory and opens as a store; bad inputs are refused by name. */
static void test_backup_restore(void **state)
{
    cr_store *s = NULL;
    assert_int_equal(cr_store_open(path, NULL, &s), 0);
    pthread_t th[8];
    worker w[8];
    for (int i = 0; i < 8; i++) {
        w[i] = (worker){.s = s, .base = 1 + i * 1000, .n = 200, .failures = 0};
        pthread_create(&th[i], NULL, submit_many, &w[i]);
    }
    char bk[400], err[1024];
    snprintf(bk, sizeof bk, "%s/backup.db", dir);
    usleep(20000); /* some commits in, most still to come */
    assert_int_equal(cr_store_backup(path, bk, err, sizeof err), 0);
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].failures, 0);
    }
    cr_store_close(s);
    char st[400], dbp[450];
    snprintf(st, sizeof st, "%s/restored", dir);
    assert_int_equal(cr_store_restore(bk, st, false, err, sizeof err), 0);
    snprintf(dbp, sizeof dbp, "%s/corral.db", st);
    assert_int_equal(cr_store_open(dbp, NULL, &s), 0);
    seen *sn = calloc(1, sizeof *sn);
    assert_int_equal(cr_store_load_jobs(s, on_job, sn), 0);
    for (int i = 0; i < 8; i++) {
        int64_t base = 1 + i * 1000, next = base;
        for (size_t k = 0; k < sn->n; k++) {
            if (sn->ids[k] >= base && sn->ids[k] < base + 1000) {
                assert_int_equal(sn->ids[k], next); /* no gap: a consistent state */
                next++;
            }
        }
    }
    free(sn);
    cr_store_close(s);
    /* Restoring over a database is refused; garbage is refused. */
    assert_int_equal(cr_store_restore(bk, st, false, err, sizeof err), CR_EEXIST);
    assert_non_null(strstr(err, "exists"));
    assert_int_equal(cr_store_restore(bk, st, true, err, sizeof err), 0);
    char junk[400];
    snprintf(junk, sizeof junk, "%s/junk.db", dir);
    FILE *f = fopen(junk, "w");
    fputs("not a database at all, but long enough to look like one perhaps", f);
    fclose(f);
    snprintf(st, sizeof st, "%s/restored2", dir);
    assert_int_equal(cr_store_restore(junk, st, false, err, sizeof err), CR_EPARSE);
    assert_non_null(strstr(err, "junk.db"));
    assert_int_equal(cr_store_backup("/nonexistent/corral.db", bk, err, sizeof err), CR_EIO);
    assert_non_null(strstr(err, "/nonexistent/corral.db"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_backup_restore, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_migrate_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_usage_accumulates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_commit_concurrent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failing_txn_isolated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_schema_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_from_v1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_objects_and_events, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
