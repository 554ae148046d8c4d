#include "cr_store_backup.h"

#include "cr_error.h"
#include "cr_store.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int errf(char *err, size_t len, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int errf(char *err, size_t len, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return rc;
}

/* Copies src (open) into a new file at dest_tmp with the backup API. */
static int copy_db(sqlite3 *src, const char *dest_tmp, char *err, size_t err_len)
{
    sqlite3 *dst = NULL;
    int rc = 0;
    unlink(dest_tmp);
    int fd = open(dest_tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        return errf(err, err_len, CR_EIO, "%s: %s", dest_tmp, strerror(errno));
    }
    close(fd);
    if (sqlite3_open_v2(dest_tmp, &dst, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        rc = errf(err, err_len, CR_EIO, "%s: %s", dest_tmp,
                  dst ? sqlite3_errmsg(dst) : "out of memory");
        goto out;
    }
    sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
    if (!b) {
        rc = errf(err, err_len, CR_EIO, "backup: %s", sqlite3_errmsg(dst));
        goto out;
    }
    /* One step for every page: one read transaction, one consistent state.
     * The source is opened as a plain reader, so BUSY only means a
     * checkpoint holds a lock for a moment: try again, bounded. */
    int step = SQLITE_OK;
    for (int tries = 0; tries < 200; tries++) {
        step = sqlite3_backup_step(b, -1);
        if (step != SQLITE_BUSY && step != SQLITE_LOCKED) {
            break;
        }
        sqlite3_sleep(50);
    }
    sqlite3_backup_finish(b);
    if (step != SQLITE_DONE) {
        rc = errf(err, err_len, CR_EIO, "backup: %s", sqlite3_errstr(step));
        goto out;
    }
out:
    if (sqlite3_close(dst) != SQLITE_OK) {
        rc = rc ? rc : errf(err, err_len, CR_EIO, "%s: close failed", dest_tmp);
    }
    if (rc != 0) {
        unlink(dest_tmp);
    }
    return rc;
}

/* integrity_check, and a schema this Corral knows with its tables. */
static int check_db(const char *path, char *err, size_t err_len)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int rc = 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        rc = errf(err, err_len, CR_EIO, "%s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
        goto out;
    }
    sqlite3_busy_timeout(db, 10000);
    const char *res = NULL;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW || !(res = (const char *)sqlite3_column_text(st, 0)) ||
        strcmp(res, "ok") != 0) {
        rc = errf(err, err_len, CR_EPARSE, "%s: not a sound SQLite database (%s)", path,
                  res ? res : sqlite3_errmsg(db));
        goto out;
    }
    sqlite3_finalize(st);
    st = NULL;
    int version = -1;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        version = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
    st = NULL;
    if (version < 1 || version > CR_STORE_SCHEMA_VERSION) {
        rc = errf(err, err_len, CR_EPARSE,
                  "%s: schema version %d is not a Corral database this version knows (1..%d)", path,
                  version, CR_STORE_SCHEMA_VERSION);
        goto out;
    }
    int tables = 0;
    if (sqlite3_prepare_v2(db,
                           "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN "
                           "('jobs','events','objects')",
                           -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        tables = sqlite3_column_int(st, 0);
    }
    if (tables != 3) {
        rc = errf(err, err_len, CR_EPARSE, "%s: not a Corral database (no jobs/events/objects)",
                  path);
    }
out:
    sqlite3_finalize(st);
    sqlite3_close(db);
    return rc;
}

static int sync_rename(const char *tmp, const char *dest, char *err, size_t err_len)
{
    int fd = open(tmp, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
        }
        unlink(tmp);
        return errf(err, err_len, CR_EIO, "%s: %s", tmp, strerror(e));
    }
    close(fd);
    if (rename(tmp, dest) != 0) {
        int e = errno;
        unlink(tmp);
        return errf(err, err_len, CR_EIO, "%s: %s", dest, strerror(e));
    }
    return 0;
}

int cr_store_backup(const char *db_path, const char *dest, char *err, size_t err_len)
{
    sqlite3 *src = NULL;
    char tmp[4200];
    int rc = 0;
    if (snprintf(tmp, sizeof tmp, "%s.tmp", dest) >= (int)sizeof tmp) {
        return errf(err, err_len, CR_EINVAL, "%s: path too long", dest);
    }
    if (access(db_path, R_OK) != 0) {
        return errf(err, err_len, CR_EIO, "%s: %s", db_path, strerror(errno));
    }
    if (sqlite3_open_v2(db_path, &src, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        rc = errf(err, err_len, CR_EIO, "%s: %s", db_path,
                  src ? sqlite3_errmsg(src) : "out of memory");
        goto out;
    }
    sqlite3_busy_timeout(src, 10000);
    if ((rc = copy_db(src, tmp, err, err_len)) != 0) {
        goto out;
    }
    if ((rc = check_db(tmp, err, err_len)) != 0) {
        unlink(tmp);
        goto out;
    }
    rc = sync_rename(tmp, dest, err, err_len);
out:
    sqlite3_close(src);
    return rc;
}

int cr_store_restore(const char *src_path, const char *state_dir, bool force, char *err,
                     size_t err_len)
{
    sqlite3 *src = NULL;
    char dest[4200], tmp[4300], side[4300];
    int rc = check_db(src_path, err, err_len);
    if (rc != 0) {
        return rc;
    }
    if (snprintf(dest, sizeof dest, "%s/corral.db", state_dir) >= (int)sizeof dest) {
        return errf(err, err_len, CR_EINVAL, "%s: path too long", state_dir);
    }
    snprintf(tmp, sizeof tmp, "%s.restore", dest);
    if (mkdir(state_dir, 0700) != 0 && errno != EEXIST) {
        return errf(err, err_len, CR_EIO, "%s: %s", state_dir, strerror(errno));
    }
    if (access(dest, F_OK) == 0 && !force) {
        return errf(err, err_len, CR_EEXIST,
                    "%s exists: restore into a new state directory (or --force, with the "
                    "controller stopped)",
                    dest);
    }
    if (sqlite3_open_v2(src_path, &src, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        rc = errf(err, err_len, CR_EIO, "%s: %s", src_path,
                  src ? sqlite3_errmsg(src) : "out of memory");
        goto out;
    }
    if ((rc = copy_db(src, tmp, err, err_len)) != 0) {
        goto out;
    }
    /* An old database's WAL must not be replayed over the restored one. */
    snprintf(side, sizeof side, "%s-wal", dest);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", dest);
    unlink(side);
    rc = sync_rename(tmp, dest, err, err_len);
out:
    sqlite3_close(src);
    return rc;
}
