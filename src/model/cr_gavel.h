/*
 * cr_gavel.h - reader for Gavel's measured throughput tables
 * (simulation_throughputs.json / physical_cluster_throughputs.json from
 * github.com/stanford-futuredata/gavel).
 *
 * The format: { worker_type: { "('<job type>', <scale factor>)": {
 *     "null": <isolated steps/s>,
 *     "('<other job type>', <sf>)": [<steps/s of this job>, <of the other>],
 *     ... } } }
 * Worker types are Gavel's names ("k80", "p100", "v100", and the
 * "_unconsolidated" variants). Throughputs are training steps (iterations)
 * per second of the whole job at that scale factor (GPU count); 0 means
 * the pair cannot be co-located. Measured numbers override the performance
 * model's estimates where present (see cr_perf.h).
 *
 * Errors: CR_EIO (unreadable), CR_EPARSE with "file:line:col: message" in
 * err (jansson's position, or the path of the offending key). The table is
 * immutable once loaded; thread-safe to read.
 */
#ifndef CR_GAVEL_H
#define CR_GAVEL_H

#include <stddef.h>

typedef struct cr_gavel cr_gavel; /* opaque */

/* *out returned new (free with cr_gavel_free). */
int cr_gavel_load(const char *path, cr_gavel **out, char *err, size_t err_len);
/* From memory; name (borrowed) is used in error messages. */
int cr_gavel_parse(const char *text, size_t len, const char *name, cr_gavel **out, char *err,
                   size_t err_len);
void cr_gavel_free(cr_gavel *g);

/* Worker types in file order; the strings live as long as g. */
size_t cr_gavel_worker_count(const cr_gavel *g);
const char *cr_gavel_worker(const cr_gavel *g, size_t i);
/* Distinct job types (without scale factor) in first-seen order. */
size_t cr_gavel_job_count(const cr_gavel *g);
const char *cr_gavel_job(const cr_gavel *g, size_t i);

/* Isolated throughput (steps/s) of job_type at scale_factor on worker:
 * 0 and *out set, or CR_ENOENT. */
int cr_gavel_get(const cr_gavel *g, const char *worker, const char *job_type, int scale_factor,
                 double *out);

/* Co-located pair: out[0] for job a, out[1] for job b; 0 or CR_ENOENT. */
int cr_gavel_get_pair(const cr_gavel *g, const char *worker, const char *job_a, int sf_a,
                      const char *job_b, int sf_b, double out[2]);

/* Map a Gavel worker type to a catalog alias ("v100" -> "v100", "k80" ->
 * "k80", "v100_unconsolidated" -> "v100"); static string or NULL. */
const char *cr_gavel_worker_alias(const char *worker);

#endif
