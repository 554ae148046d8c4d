/*
 * store_sqlite.c - the SQLite backend of the store (cr__store_sqlite_ops):
 * WAL, schema migrations and a group-committing writer thread; see
 * cr_store.h for the contract and store_int.h for the ops table.
 *
 * Lock order: s->qmu (queue) is never held while SQLite runs; s->rmu[i]
 * guards reader connection i only (a reader holds one at a time). The writer connection belongs to
 * the writer thread after cr_store_open returns.
 */
#include "store_int.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"
#include "cr_log.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* The writer's statements, prepared once: the row writes, and the
 * transaction control it runs around every group and every transaction
 * (parsed by sqlite3_exec each time, these cost more than the rows). */
enum {
    ST_PUT_JOB,
    ST_EVENT,
    ST_PUT,
    ST_DEL,
    ST_USAGE,
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_SAVEPOINT,
    ST_RELEASE,
    ST_ROLLBACK_TO,
    ST_COUNT
};

/* Reader connections: reads (GET /v1/jobs pages, events) run side by side. */
#define STORE_READERS 4

typedef struct sq_store {
    sqlite3 *w;                         /* writer connection (writer thread) */
    sqlite3 *r[STORE_READERS];          /* reader connections, each under its rmu */
    sqlite3_stmt *st[ST_COUNT];         /* prepared writer statements */
    pthread_mutex_t rmu[STORE_READERS]; /* guards r[i] */
    _Atomic unsigned rnext;             /* round robin when all readers are busy */
    pthread_mutex_t qmu;                /* guards the queue and stop */
    pthread_cond_t qcv;                 /* signalled on submit and stop */
    cr_store_txn *head, *tail;          /* queued transactions */
    bool stop;                          /* writer should exit when the queue is empty */
    pthread_t thread;                   /* the writer */
    size_t max_batch;                   /* transactions per commit */
    int version;                        /* schema version after migration */
    _Atomic uint64_t commits;           /* SQLite commits done */
    _Atomic uint64_t txns;              /* transactions committed */
} sq_store;

/* Migrations: index i brings the schema from version i to i + 1. */
static const char *const migrations[] = {
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
    " PRIMARY KEY(tenant, gpu_type, day)) WITHOUT ROWID;",
    /* 2: the controller keeps jobs in memory and never queries rows by
     * tenant and state; the index only slowed every write. */
    "DROP INDEX IF EXISTS jobs_tenant_state;",
    /* 3: finished jobs leave memory (retention) and GET /v1/jobs pages
     * through the table: newest first by state and by tenant. */
    "CREATE INDEX IF NOT EXISTS jobs_state_id ON jobs(state, id);"
    "CREATE INDEX IF NOT EXISTS jobs_tenant_id ON jobs(tenant, id);"
    /* ...and tells its total without counting rows: job_counts is kept by
     * triggers, so a page costs the same with 100 or 1,000,000 jobs. */
    "CREATE TABLE job_counts(tenant TEXT NOT NULL, state TEXT NOT NULL, n INTEGER NOT NULL,"
    " PRIMARY KEY(tenant, state)) WITHOUT ROWID;"
    "INSERT INTO job_counts SELECT tenant, state, count(*) FROM jobs GROUP BY tenant, state;"
    "CREATE TRIGGER jobs_count_ins AFTER INSERT ON jobs BEGIN"
    " INSERT INTO job_counts VALUES(new.tenant, new.state, 1)"
    " ON CONFLICT(tenant, state) DO UPDATE SET n = n + 1; END;"
    "CREATE TRIGGER jobs_count_del AFTER DELETE ON jobs BEGIN"
    " UPDATE job_counts SET n = n - 1 WHERE tenant = old.tenant AND state = old.state; END;"
    "CREATE TRIGGER jobs_count_upd AFTER UPDATE OF tenant, state ON jobs"
    " WHEN old.tenant IS NOT new.tenant OR old.state IS NOT new.state BEGIN"
    " UPDATE job_counts SET n = n - 1 WHERE tenant = old.tenant AND state = old.state;"
    " INSERT INTO job_counts VALUES(new.tenant, new.state, 1)"
    " ON CONFLICT(tenant, state) DO UPDATE SET n = n + 1; END;",
};

static const char *const stmt_sql[ST_COUNT] = {
    "INSERT INTO jobs(id, tenant, state, doc) VALUES(?1, ?2, ?3, ?4) ON CONFLICT(id) DO UPDATE"
    " SET tenant = excluded.tenant, state = excluded.state, doc = excluded.doc",
    "INSERT INTO events(job, time_ns, what, why) VALUES(?1, ?2, ?3, ?4)",
    "INSERT OR REPLACE INTO objects(kind, key, doc) VALUES(?1, ?2, ?3)",
    "DELETE FROM objects WHERE kind = ?1 AND key = ?2",
    "INSERT INTO usage(tenant, gpu_type, day, gpu_s, energy_j, cost) VALUES(?1, ?2, ?3, ?4, ?5, "
    "?6) ON CONFLICT(tenant, gpu_type, day) DO UPDATE SET gpu_s = gpu_s + excluded.gpu_s,"
    " energy_j = energy_j + excluded.energy_j, cost = cost + excluded.cost",
    "BEGIN IMMEDIATE",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT t",
    "RELEASE t",
    "ROLLBACK TO t",
};

/* The code for a failed SQLite call: a full disk (SQLITE_FULL, or an
 * I/O error whose system errno is ENOSPC/EDQUOT/EFBIG) is CR_EDISKFULL so
 * that the API can say so; anything else is CR_EIO. */
static int db_err(sqlite3 *db, int rc)
{
    int sys = sqlite3_system_errno(db);
    if ((rc & 0xff) == SQLITE_FULL || sys == ENOSPC || sys == EDQUOT || sys == EFBIG) {
        return CR_EDISKFULL;
    }
    if ((rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB) {
        return CR_ECORRUPT;
    }
    return CR_EIO;
}

static int exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        cr_error("store: %s (sql: %.80s)", msg ? msg : sqlite3_errmsg(db), sql);
        sqlite3_free(msg);
        return db_err(db, sqlite3_extended_errcode(db));
    }
    return 0;
}

/* One of the writer's prepared control statements (BEGIN, COMMIT, ...),
 * as exec() would run it. */
static int step_ctl(sq_store *s, int which)
{
    sqlite3_stmt *st = s->st[which];
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) {
        cr_error("store: %s (sql: %s)", sqlite3_errmsg(s->w), stmt_sql[which]);
        return db_err(s->w, sqlite3_extended_errcode(s->w));
    }
    return 0;
}

static int open_conn(const char *path, bool sync_normal, sqlite3 **out)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(
        path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        cr_error("store: cannot open %s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return CR_EIO;
    }
    sqlite3_busy_timeout(db, 10000);
    if ((rc = exec(db, "PRAGMA journal_mode=WAL")) != 0 ||
        (rc = exec(db, sync_normal ? "PRAGMA synchronous=NORMAL" : "PRAGMA synchronous=FULL")) !=
            0 ||
        (rc = exec(db, "PRAGMA foreign_keys=ON")) != 0) {
        sqlite3_close(db);
        return rc;
    }
    *out = db;
    return 0;
}

static int migrate(sq_store *s, const char *path)
{
    sqlite3_stmt *st = NULL;
    int version = -1;
    if (sqlite3_prepare_v2(s->w, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        version = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
    int known = (int)(sizeof migrations / sizeof migrations[0]);
    if (version < 0) {
        return CR_EIO;
    }
    if (version > known) {
        cr_error("store: %s has schema version %d, this corral knows up to %d", path, version,
                 known);
        return CR_ENOTSUP;
    }
    for (int v = version; v < known; v++) {
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version=%d", v + 1);
        if (exec(s->w, "BEGIN IMMEDIATE") != 0) {
            return CR_EIO;
        }
        if (exec(s->w, migrations[v]) != 0 || exec(s->w, sql) != 0) {
            exec(s->w, "ROLLBACK");
            return CR_EIO;
        }
        if (exec(s->w, "COMMIT") != 0) {
            return CR_EIO;
        }
        cr_info("store: migrated %s to schema version %d", path, v + 1);
    }
    s->version = known;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Integrity at start                                                       */

static uint32_t get32(const unsigned char *p, bool big)
{
    return big ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
               : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* SQLite's WAL checksum (see the "WAL file format" in the SQLite docs). */
static void wal_sum(const unsigned char *d, size_t n, bool big, uint32_t *s0, uint32_t *s1)
{
    for (size_t i = 0; i + 8 <= n; i += 8) {
        *s0 += get32(d + i, big) + *s1;
        *s1 += get32(d + i + 4, big) + *s0;
    }
}

/*
 * SQLite replays a WAL up to the first frame whose checksum fails and
 * silently drops the rest: after a damaged frame, committed transactions
 * vanish without a word. Walk the frames before SQLite does and refuse
 * (CR_ECORRUPT) when a commit frame of the current WAL generation (same
 * salts) follows a damaged one. A WAL whose header is damaged while frames
 * follow is refused too. No WAL, or a clean one: 0.
 */
static int wal_check(const char *path)
{
    char wpath[4200];
    snprintf(wpath, sizeof wpath, "%s-wal", path);
    FILE *f = fopen(wpath, "rb");
    if (!f) {
        return 0;
    }
    unsigned char hdr[32];
    unsigned char *frame = NULL;
    int rc = 0;
    if (fread(hdr, 1, sizeof hdr, f) != sizeof hdr) {
        goto out; /* empty or shorter than a header: nothing SQLite would replay */
    }
    uint32_t magic = get32(hdr, true);
    uint32_t page = get32(hdr + 8, true);
    bool big = (magic & 1) != 0;
    uint32_t s0 = 0, s1 = 0;
    wal_sum(hdr, 24, big, &s0, &s1);
    bool hdr_ok = (magic & ~1u) == 0x377f0682u && page >= 512 && page <= 65536 &&
                  (page & (page - 1)) == 0 && s0 == get32(hdr + 24, true) &&
                  s1 == get32(hdr + 28, true);
    if (!hdr_ok) {
        unsigned char one;
        if (fread(&one, 1, 1, f) == 1) {
            cr_error("store: %s: the WAL header is damaged and frames follow it", wpath);
            rc = CR_ECORRUPT;
        }
        goto out;
    }
    size_t fsz = 24 + (size_t)page;
    frame = cr_malloc(fsz);
    size_t idx = 0, bad_at = 0, lost_commits = 0;
    bool broken = false;
    while (fread(frame, 1, fsz, f) == fsz) {
        idx++;
        bool same_gen = memcmp(frame + 8, hdr + 16, 8) == 0;
        if (!broken) {
            if (!same_gen) {
                break; /* stale frames of an older generation: the log ends here */
            }
            uint32_t t0 = s0, t1 = s1;
            wal_sum(frame, 8, big, &t0, &t1);
            wal_sum(frame + 24, page, big, &t0, &t1);
            if (t0 != get32(frame + 16, true) || t1 != get32(frame + 20, true)) {
                broken = true;
                bad_at = idx;
                continue;
            }
            s0 = t0;
            s1 = t1;
        } else if (same_gen && get32(frame + 4, true) != 0) {
            lost_commits++;
        }
    }
    if (broken && lost_commits > 0) {
        cr_error("store: %s: WAL frame %zu is damaged and %zu committed transaction(s) follow it; "
                 "SQLite would drop them silently. To accept that loss and keep what precedes "
                 "the damage: truncate -s %zu '%s' (docs/operations.md)",
                 wpath, bad_at, lost_commits, 32 + (bad_at - 1) * fsz, wpath);
        rc = CR_ECORRUPT;
    }
out:
    free(frame);
    fclose(f);
    return rc;
}

/* PRAGMA quick_check on the writer connection: 0, or CR_ECORRUPT. */
static int quick_check(sqlite3 *db, const char *path)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, "PRAGMA quick_check(5)", -1, &st, NULL);
    if (rc != SQLITE_OK) {
        cr_error("store: %s: quick_check: %s", path, sqlite3_errmsg(db));
        return db_err(db, rc) == CR_EIO ? CR_ECORRUPT : db_err(db, rc);
    }
    int res = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        if (!t || strcmp(t, "ok") != 0) {
            cr_error("store: %s: quick_check: %s", path, t ? t : "?");
            res = CR_ECORRUPT;
        }
    }
    if (rc != SQLITE_DONE) {
        cr_error("store: %s: quick_check: %s", path, sqlite3_errmsg(db));
        res = CR_ECORRUPT;
    }
    sqlite3_finalize(st);
    return res;
}

static int apply_op(sq_store *s, const op *o)
{
    sqlite3_stmt *st = NULL;
    switch (o->kind) {
    case OP_PUT_JOB:
        st = s->st[ST_PUT_JOB];
        sqlite3_bind_int64(st, 1, o->i1);
        sqlite3_bind_text(st, 2, o->s1, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, o->s2, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, o->s3, -1, SQLITE_STATIC);
        break;
    case OP_EVENT:
        st = s->st[ST_EVENT];
        sqlite3_bind_int64(st, 1, o->i1);
        sqlite3_bind_int64(st, 2, o->i2);
        sqlite3_bind_text(st, 3, o->s1, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, o->s2, -1, SQLITE_STATIC);
        break;
    case OP_PUT:
        st = s->st[ST_PUT];
        sqlite3_bind_text(st, 1, o->s1, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, o->s2, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, o->s3, -1, SQLITE_STATIC);
        break;
    case OP_DEL:
        st = s->st[ST_DEL];
        sqlite3_bind_text(st, 1, o->s1, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, o->s2, -1, SQLITE_STATIC);
        break;
    case OP_USAGE:
        st = s->st[ST_USAGE];
        sqlite3_bind_text(st, 1, o->s1, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, o->s2, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, o->s4, -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 4, o->d1);
        sqlite3_bind_double(st, 5, o->d2);
        sqlite3_bind_double(st, 6, o->d3);
        break;
    }
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc != SQLITE_DONE) {
        cr_error("store: write failed: %s", sqlite3_errmsg(s->w));
        return rc == SQLITE_CONSTRAINT ? CR_EEXIST : db_err(s->w, rc);
    }
    return 0;
}

/* Apply one transaction under a savepoint; roll it back alone on failure. */
static int apply_txn(sq_store *s, const cr_store_txn *t)
{
    if (step_ctl(s, ST_SAVEPOINT) != 0) {
        return CR_EIO;
    }
    for (size_t i = 0; i < t->len; i++) {
        int rc = apply_op(s, &t->ops[i]);
        if (rc != 0) {
            step_ctl(s, ST_ROLLBACK_TO);
            step_ctl(s, ST_RELEASE);
            return rc;
        }
    }
    return step_ctl(s, ST_RELEASE);
}

static void *writer_main(void *arg)
{
    sq_store *s = arg;
    int *status = NULL;
    size_t status_cap = 0;
    for (;;) {
        pthread_mutex_lock(&s->qmu);
        while (!s->head && !s->stop) {
            pthread_cond_wait(&s->qcv, &s->qmu);
        }
        if (!s->head && s->stop) {
            pthread_mutex_unlock(&s->qmu);
            break;
        }
        cr_store_txn *batch = s->head, *last = s->head;
        size_t n = 1;
        while (last->next && n < s->max_batch) {
            last = last->next;
            n++;
        }
        s->head = last->next;
        if (!s->head) {
            s->tail = NULL;
        }
        last->next = NULL;
        pthread_mutex_unlock(&s->qmu);

        if (n > status_cap) {
            status_cap = n;
            status = cr_reallocarray(status, status_cap, sizeof *status);
        }
        int rc = step_ctl(s, ST_BEGIN);
        size_t i = 0;
        for (cr_store_txn *t = batch; t; t = t->next, i++) {
            status[i] = rc == 0 ? apply_txn(s, t) : rc;
        }
        if (rc == 0) {
            rc = step_ctl(s, ST_COMMIT);
            if (rc != 0) {
                step_ctl(s, ST_ROLLBACK);
                for (i = 0; i < n; i++) {
                    status[i] = rc;
                }
            } else {
                atomic_fetch_add(&s->commits, 1);
                atomic_fetch_add(&s->txns, n);
            }
        }
        i = 0;
        for (cr_store_txn *t = batch, *next; t; t = next, i++) {
            next = t->next;
            if (t->done) {
                t->done(t->arg, status[i]);
            }
            cr_store_txn_free(t);
        }
    }
    free(status);
    return NULL;
}

/* Frees what sq_open made (NULL-safe SQLite calls: a partial open too);
 * the writer thread is not running. */
static void sq_free(sq_store *s)
{
    for (int i = 0; i < ST_COUNT; i++) {
        sqlite3_finalize(s->st[i]);
    }
    sqlite3_close(s->w);
    for (int i = 0; i < STORE_READERS; i++) {
        sqlite3_close(s->r[i]);
        pthread_mutex_destroy(&s->rmu[i]);
    }
    pthread_mutex_destroy(&s->qmu);
    pthread_cond_destroy(&s->qcv);
    free(s);
}

static int sq_open(const char *path, const cr_store_opts *opts, void **out)
{
    sq_store *s = cr_calloc(1, sizeof *s);
    bool sync_normal = opts && opts->sync_normal;
    s->max_batch = opts && opts->max_batch ? opts->max_batch : 8192;
    for (int i = 0; i < STORE_READERS; i++) {
        pthread_mutex_init(&s->rmu[i], NULL);
    }
    pthread_mutex_init(&s->qmu, NULL);
    pthread_cond_init(&s->qcv, NULL);
    int rc = wal_check(path);
    if (rc == 0) {
        rc = open_conn(path, sync_normal, &s->w);
    }
    if (rc == 0) {
        rc = quick_check(s->w, path);
    }
    if (rc == 0) {
        rc = migrate(s, path);
    }
    if (rc == 0) {
        for (int i = 0; i < STORE_READERS && rc == 0; i++) {
            rc = open_conn(path, sync_normal, &s->r[i]);
        }
    }
    for (int i = 0; rc == 0 && i < ST_COUNT; i++) {
        if (sqlite3_prepare_v3(s->w, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->st[i], NULL) !=
            SQLITE_OK) {
            cr_error("store: prepare: %s", sqlite3_errmsg(s->w));
            rc = CR_EIO;
        }
    }
    if (rc == 0 && pthread_create(&s->thread, NULL, writer_main, s) != 0) {
        rc = CR_EIO;
    }
    if (rc != 0) {
        sq_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

static void sq_close(void *be)
{
    sq_store *s = be;
    pthread_mutex_lock(&s->qmu);
    s->stop = true;
    pthread_cond_signal(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    pthread_join(s->thread, NULL);
    sq_free(s);
}

static int sq_schema_version(void *be)
{
    const sq_store *s = be;
    return s->version;
}

static void sq_stats(void *be, uint64_t *commits, uint64_t *txns)
{
    sq_store *s = be;
    *commits = atomic_load(&s->commits);
    *txns = atomic_load(&s->txns);
}

void cr_store_memory(uint64_t *now, uint64_t *peak)
{
    sqlite3_int64 cur = 0, hi = 0;
    sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &cur, &hi, 0);
    *now = cur > 0 ? (uint64_t)cur : 0;
    *peak = hi > 0 ? (uint64_t)hi : 0;
}

static void sq_submit(void *be, cr_store_txn *t)
{
    sq_store *s = be;
    pthread_mutex_lock(&s->qmu);
    cr__store_txn_append(&s->head, &s->tail, t);
    pthread_cond_signal(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
}

/* A reader connection for this thread: a free one, else wait for one. */
static sqlite3 *reader_get(sq_store *s, int *slot)
{
    for (int i = 0; i < STORE_READERS; i++) {
        if (pthread_mutex_trylock(&s->rmu[i]) == 0) {
            *slot = i;
            return s->r[i];
        }
    }
    *slot = (int)(atomic_fetch_add(&s->rnext, 1) % STORE_READERS);
    pthread_mutex_lock(&s->rmu[*slot]);
    return s->r[*slot];
}

static void reader_put(sq_store *s, int slot)
{
    pthread_mutex_unlock(&s->rmu[slot]);
}

/* Run a read query on a reader connection; row_fn gets each row. */
typedef void (*row_fn)(sqlite3_stmt *st, void *ctx);

static int read_query(sq_store *s, const char *sql, const char *text1, int64_t int1, int64_t limit,
                      row_fn fn, void *ctx)
{
    int slot;
    sqlite3 *r = reader_get(s, &slot);
    sqlite3_stmt *st = NULL;
    int rc = 0;
    if (sqlite3_prepare_v2(r, sql, -1, &st, NULL) != SQLITE_OK) {
        cr_error("store: prepare: %s", sqlite3_errmsg(r));
        rc = CR_EIO;
        goto out;
    }
    if (text1) {
        sqlite3_bind_text(st, 1, text1, -1, SQLITE_STATIC);
    } else if (sqlite3_bind_parameter_count(st) >= 1) {
        sqlite3_bind_int64(st, 1, int1);
    }
    if (sqlite3_bind_parameter_count(st) >= 2) {
        sqlite3_bind_int64(st, 2, limit > 0 ? limit : -1);
    }
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        fn(st, ctx);
    }
    if (step != SQLITE_DONE) {
        cr_error("store: read: %s", sqlite3_errmsg(r));
        rc = CR_EIO;
    }
out:
    sqlite3_finalize(st);
    reader_put(s, slot);
    return rc;
}

static const char *col_text(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? (const char *)t : "";
}

typedef struct cb_ctx {
    cr_store_job_fn job;
    cr_store_obj_fn obj;
    cr_store_event_fn event;
    cr_store_usage_fn usage;
    void (*kind)(void *arg, const char *kind);
    cr_store_job_row_fn job_row;
    void *arg;
    size_t hits; /* rows seen */
} cb_ctx;

static void job_row(sqlite3_stmt *st, void *ctx)
{
    cb_ctx *c = ctx;
    c->hits++;
    c->job(c->arg, sqlite3_column_int64(st, 0), col_text(st, 1));
}

static void obj_row(sqlite3_stmt *st, void *ctx)
{
    cb_ctx *c = ctx;
    c->obj(c->arg, col_text(st, 0), col_text(st, 1));
}

static void event_row(sqlite3_stmt *st, void *ctx)
{
    cb_ctx *c = ctx;
    c->event(c->arg, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), col_text(st, 2),
             col_text(st, 3));
}

static void usage_row(sqlite3_stmt *st, void *ctx)
{
    cb_ctx *c = ctx;
    c->usage(c->arg, col_text(st, 0), col_text(st, 1), col_text(st, 2),
             sqlite3_column_double(st, 3), sqlite3_column_double(st, 4),
             sqlite3_column_double(st, 5));
}

static int sq_load_jobs(void *be, cr_store_job_fn fn, void *arg)
{
    sq_store *s = be;
    cb_ctx c = {.job = fn, .arg = arg};
    return read_query(s, "SELECT id, doc FROM jobs ORDER BY id", NULL, 0, 0, job_row, &c);
}

static int sq_load_objects(void *be, const char *kind, cr_store_obj_fn fn, void *arg)
{
    sq_store *s = be;
    cb_ctx c = {.obj = fn, .arg = arg};
    return read_query(s, "SELECT key, doc FROM objects WHERE kind = ?1 ORDER BY key", kind, 0, 0,
                      obj_row, &c);
}

static int sq_job_events(void *be, int64_t job, size_t limit, cr_store_event_fn fn, void *arg)
{
    sq_store *s = be;
    cb_ctx c = {.event = fn, .arg = arg};
    return read_query(s,
                      "SELECT job, time_ns, what, why FROM events WHERE job = ?1 ORDER BY seq "
                      "LIMIT ?2",
                      NULL, job, (int64_t)limit, event_row, &c);
}

static int sq_load_usage(void *be, cr_store_usage_fn fn, void *arg)
{
    sq_store *s = be;
    cb_ctx c = {.usage = fn, .arg = arg};
    return read_query(s,
                      "SELECT tenant, gpu_type, day, gpu_s, energy_j, cost FROM usage ORDER BY "
                      "day, tenant, gpu_type",
                      NULL, 0, 0, usage_row, &c);
}

static int sq_get_job(void *be, int64_t id, cr_store_job_fn fn, void *arg)
{
    sq_store *s = be;
    cb_ctx c = {.job = fn, .arg = arg, .hits = 0};
    int rc = read_query(s, "SELECT id, doc FROM jobs WHERE id = ?1", NULL, id, 0, job_row, &c);
    return rc != 0 ? rc : c.hits > 0 ? 0 : CR_ENOENT;
}

static int sq_get_object(void *be, const char *kind, const char *key, cr_store_obj_fn fn, void *arg)
{
    sq_store *s = be;
    int slot;
    sqlite3 *r = reader_get(s, &slot);
    sqlite3_stmt *st = NULL;
    int rc = CR_ENOENT;
    if (sqlite3_prepare_v2(r, "SELECT key, doc FROM objects WHERE kind = ?1 AND key = ?2", -1, &st,
                           NULL) != SQLITE_OK) {
        cr_error("store: prepare: %s", sqlite3_errmsg(r));
        rc = CR_EIO;
        goto out;
    }
    sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        fn(arg, col_text(st, 0), col_text(st, 1));
        rc = 0;
    } else if (step != SQLITE_DONE) {
        cr_error("store: read: %s", sqlite3_errmsg(r));
        rc = CR_EIO;
    }
out:
    sqlite3_finalize(st);
    reader_put(s, slot);
    return rc;
}

static void max_row(sqlite3_stmt *st, void *ctx)
{
    int64_t *m = ctx;
    int64_t v = sqlite3_column_int64(st, 0);
    if (v > *m) {
        *m = v;
    }
}

static int sq_max_job_id(void *be, int64_t *out)
{
    sq_store *s = be;
    *out = 0;
    int rc = read_query(s, "SELECT max(id) FROM jobs", NULL, 0, 0, max_row, out);
    if (rc == 0) {
        rc = read_query(s, "SELECT max(job) FROM events", NULL, 0, 0, max_row, out);
    }
    return rc;
}

/* The WHERE clause of a query (without before/after); binds from index 1. */
static void query_where(const cr_store_job_query *q, cr_buf *b)
{
    cr_buf_puts(b, " WHERE 1");
    if (q->tenant) {
        cr_buf_puts(b, " AND tenant = ?");
    }
    if (q->nstates > 0) {
        cr_buf_puts(b, " AND state IN (");
        for (size_t i = 0; i < q->nstates; i++) {
            cr_buf_puts(b, i ? ",?" : "?");
        }
        cr_buf_putc(b, ')');
    }
}

static int query_bind(sqlite3_stmt *st, const cr_store_job_query *q)
{
    int k = 1;
    if (q->tenant) {
        sqlite3_bind_text(st, k++, q->tenant, -1, SQLITE_STATIC);
    }
    for (size_t i = 0; i < q->nstates; i++) {
        sqlite3_bind_text(st, k++, q->states[i], -1, SQLITE_STATIC);
    }
    return k;
}

static int sq_query_jobs(void *be, const cr_store_job_query *q, cr_store_job_fn fn, void *arg,
                         int64_t *total)
{
    sq_store *s = be;
    cr_buf b, cb;
    cr_buf_init(&b);
    cr_buf_init(&cb);
    cr_buf_puts(&b, "SELECT id, doc FROM jobs");
    query_where(q, &b);
    if (q->oldest_first) {
        cr_buf_printf(&b, " AND id > %lld ORDER BY id ASC", (long long)q->after);
    } else if (q->before > 0) {
        cr_buf_printf(&b, " AND id < %lld ORDER BY id DESC", (long long)q->before);
    } else {
        cr_buf_puts(&b, " ORDER BY id DESC");
    }
    cr_buf_printf(&b, " LIMIT %lld", (long long)(q->limit > 0 ? q->limit : 1));
    cr_buf_puts(&cb, "SELECT coalesce(sum(n), 0) FROM job_counts");
    query_where(q, &cb);
    int rc = 0, step;
    sqlite3_stmt *st = NULL;
    int slot;
    sqlite3 *r = reader_get(s, &slot);
    /* One read transaction: the page and the total see the same snapshot. */
    sqlite3_exec(r, "BEGIN", NULL, NULL, NULL);
    if (total) {
        *total = 0;
        if (sqlite3_prepare_v2(r, cr_buf_str(&cb), -1, &st, NULL) != SQLITE_OK) {
            rc = CR_EIO;
            goto out;
        }
        query_bind(st, q);
        if (sqlite3_step(st) == SQLITE_ROW) {
            *total = sqlite3_column_int64(st, 0);
        }
        sqlite3_finalize(st);
        st = NULL;
    }
    if (sqlite3_prepare_v2(r, cr_buf_str(&b), -1, &st, NULL) != SQLITE_OK) {
        rc = CR_EIO;
        goto out;
    }
    query_bind(st, q);
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        fn(arg, sqlite3_column_int64(st, 0), col_text(st, 1));
    }
    if (step != SQLITE_DONE) {
        rc = CR_EIO;
    }
out:
    if (rc != 0) {
        cr_error("store: query: %s", sqlite3_errmsg(r));
    }
    sqlite3_finalize(st);
    sqlite3_exec(r, "COMMIT", NULL, NULL, NULL);
    reader_put(s, slot);
    cr_buf_fini(&b);
    cr_buf_fini(&cb);
    return rc;
}

static int sq_job_counts(void *be, const char *tenant, const char *const *states, size_t n,
                         int64_t *out)
{
    sq_store *s = be;
    int rc = 0;
    int slot;
    sqlite3 *r = reader_get(s, &slot);
    for (size_t i = 0; i < n && rc == 0; i++) {
        sqlite3_stmt *st = NULL;
        const char *sql = tenant ? "SELECT coalesce(sum(n), 0) FROM job_counts WHERE state = ?1"
                                   " AND tenant = ?2"
                                 : "SELECT coalesce(sum(n), 0) FROM job_counts WHERE state = ?1";
        out[i] = 0;
        if (sqlite3_prepare_v2(r, sql, -1, &st, NULL) != SQLITE_OK) {
            rc = CR_EIO;
        } else {
            sqlite3_bind_text(st, 1, states[i], -1, SQLITE_STATIC);
            if (tenant) {
                sqlite3_bind_text(st, 2, tenant, -1, SQLITE_STATIC);
            }
            if (sqlite3_step(st) == SQLITE_ROW) {
                out[i] = sqlite3_column_int64(st, 0);
            } else {
                rc = CR_EIO;
            }
        }
        sqlite3_finalize(st);
    }
    reader_put(s, slot);
    return rc;
}

static void kind_row(sqlite3_stmt *st, void *ctx)
{
    cb_ctx *c = ctx;
    c->kind(c->arg, col_text(st, 0));
}

static int sq_object_kinds(void *be, void (*fn)(void *arg, const char *kind), void *arg)
{
    sq_store *s = be;
    cb_ctx c = {.kind = fn, .arg = arg};
    return read_query(s, "SELECT DISTINCT kind FROM objects ORDER BY kind", NULL, 0, 0, kind_row,
                      &c);
}

static void job_full_row(sqlite3_stmt *st, void *ctx)
{
    cb_ctx *c = ctx;
    c->job_row(c->arg, sqlite3_column_int64(st, 0), col_text(st, 1), col_text(st, 2),
               col_text(st, 3));
}

static int sq_load_job_rows(void *be, cr_store_job_row_fn fn, void *arg)
{
    sq_store *s = be;
    cb_ctx c = {.job_row = fn, .arg = arg};
    return read_query(s, "SELECT id, tenant, state, doc FROM jobs ORDER BY id", NULL, 0, 0,
                      job_full_row, &c);
}

static int sq_load_events(void *be, cr_store_event_fn fn, void *arg)
{
    sq_store *s = be;
    cb_ctx c = {.event = fn, .arg = arg};
    return read_query(s, "SELECT job, time_ns, what, why FROM events ORDER BY job, seq", NULL, 0, 0,
                      event_row, &c);
}

const cr__store_ops cr__store_sqlite_ops = {
    .name = "sqlite",
    .open = sq_open,
    .close = sq_close,
    .schema_version = sq_schema_version,
    .stats = sq_stats,
    .submit = sq_submit,
    .load_jobs = sq_load_jobs,
    .load_objects = sq_load_objects,
    .job_events = sq_job_events,
    .load_usage = sq_load_usage,
    .get_job = sq_get_job,
    .get_object = sq_get_object,
    .max_job_id = sq_max_job_id,
    .query_jobs = sq_query_jobs,
    .job_counts = sq_job_counts,
    .object_kinds = sq_object_kinds,
    .load_job_rows = sq_load_job_rows,
    .load_events = sq_load_events,
};
