/*
 * cr_store_migrate.h - copies a whole store from one backend to another
 * (`corral admin migrate --from sqlite:DIR --to etcd:URL[,URL]` and back).
 *
 * Specs: "sqlite:DIR" (DIR/corral.db; the source must exist, a target is
 * created) or "etcd:URL[,URL...]" (keys under /corral/<cluster>/). The
 * target must be empty (no job, event, object or usage row): a migration
 * never merges. Job rows keep their ids, tenants and states; events their
 * order within each job; objects (tokens, tenants, nodes, audit, meta and
 * the job-id high-water mark) and usage sums are copied as they are. The
 * copy goes in transactions marked splittable (nothing else writes to an
 * empty target), then both sides are counted again: any difference is an
 * error. The controller must be stopped while it runs (the source is read
 * as it is; writes made meanwhile would be missed). No threads of its own.
 */
#ifndef CR_STORE_MIGRATE_H
#define CR_STORE_MIGRATE_H

#include <stddef.h>
#include <stdint.h>

typedef struct cr_store_counts {
    int64_t jobs, events, objects, usage;
} cr_store_counts;

/* cluster: the etcd prefix's name (NULL = "default"). 0 with *copied,
 * or a CR_E* code with the reason in err: CR_EINVAL (bad spec), CR_EEXIST
 * (target not empty), CR_ENOENT (no source database), CR_ECONFLICT (the
 * counts differ after the copy), or the store's error. */
struct cr_etcd_sec;

/* sec: TLS and authentication for each etcd side (loaded; borrowed; NULL:
 * none). */
int cr_store_migrate(const char *from, const char *to, const char *cluster,
                     const struct cr_etcd_sec *sec, cr_store_counts *copied, char *err,
                     size_t err_len);

#endif
