/*
 * cr_datadir.h - where the read-only data (GPU catalog, prices, cluster
 * files, Gavel throughputs) lives, found at run time.
 *
 * Order: $CORRAL_DATA when set (also set by `corral --data-dir DIR`);
 * else, for a binary inside the build tree it was compiled in (tests,
 * demo), the source tree's data/; else the install layout relative to
 * the binary (<exe>/../share/corral for prefix/bin/corral, so a
 * relocated prefix still works); else the compiled-in datadir
 * (<prefix>/share/corral). Nothing is cached: callers look it up when
 * they load a file (start-up only). Thread-safe (no shared state).
 */
#ifndef CR_DATADIR_H
#define CR_DATADIR_H

#include <stddef.h>

/* Writes the data directory into buf (size len) and returns buf. */
const char *cr_data_dir(char *buf, size_t len);

/* <data dir>/<rel> into buf; returns buf. */
const char *cr_data_path(const char *rel, char *buf, size_t len);

#endif
