/*
 * cr_store_backup.h - copies of the controller's database that are
 * consistent while the controller serves (`corral admin backup|restore`).
 *
 * Backup opens the live database read-only as one more reader (the store
 * runs in WAL mode, so readers never block the writer) and copies it with
 * SQLite's online backup API in a single step: one read transaction, so
 * the copy is one committed state. It is written to FILE.tmp, checked
 * (PRAGMA integrity_check), synced and renamed, mode 0600: it holds the
 * hashes of every token. Restore checks a backup the same way (and that
 * its schema is one this Corral knows) and puts it in a state directory
 * as corral.db, refusing to overwrite one unless forced. The secret files
 * of a state directory (admin.token, join.token) are not in the database:
 * docs/install.md says how to carry them. No threads, no shared state.
 */
#ifndef CR_STORE_BACKUP_H
#define CR_STORE_BACKUP_H

#include <stdbool.h>
#include <stddef.h>

/* Copies the database db_path into dest. 0, or CR_EIO / CR_EPARSE with a
 * message in err (err_len bytes). */
int cr_store_backup(const char *db_path, const char *dest, char *err, size_t err_len);

/* Puts the backup file src into state_dir/corral.db (state_dir created
 * mode 0700). Refuses (CR_EEXIST) when a database is there unless force.
 * 0, or a CR_E* code with a message in err. */
int cr_store_restore(const char *src, const char *state_dir, bool force, char *err, size_t err_len);

#endif
