/*
 * cr_dcache.h - the agent's node-local data cache (issue 32, docs/data.md).
 *
 * Datasets and models a job names ("data" in its desired-state entry) are
 * fetched here before its process starts. Entries are content-addressed:
 * DIR/<sha256> is the verified object, read-only (0444) in a directory
 * that can be traversed but not listed (0711), so a job that is given the
 * path reads it and no job can list what else the node holds. A fetch
 * writes DIR/.partial/<sha256>.part and renames it into place only after
 * its size and sha256 matched: nothing half-written is ever visible under
 * its name. A partial file left by an interrupted fetch is resumed (a
 * Range request for http(s)/s3, a seek for file:; a server that answers
 * the whole object again is written from the start).
 *
 * Invariants:
 *   - one fetch per entry however many jobs ask: a job that asks while it
 *     is being fetched waits for that fetch;
 *   - the bytes under DIR (entries, partial files, the fetch in progress
 *     counted at its declared size) never exceed cap_bytes: room is made
 *     by removing the least recently used entries no job holds (pins: a
 *     job holds its entries from its first ask until cr_dcache_release);
 *     an object larger than the cap fails at once, one that would fit once
 *     held entries are released waits;
 *   - every job's use is checked: an entry is hashed again for a job that
 *     asks unless its file is as it was when last hashed (inode, size,
 *     mtime, ctime: a write, a chmod or a replacement changes ctime) and
 *     that hash is younger than verify_s; a corrupted entry is removed and
 *     fetched again;
 *   - a failed fetch (transport, HTTP status, size, checksum) fails the
 *     jobs waiting for it, with the reason naming the dataset; the entry is
 *     forgotten, so a later job tries again (no retry loop).
 *
 * Threads: one worker thread does the fetches and hashes, one at a time;
 * the calls below are for one caller thread (the agent's main) and take
 * the cache's lock (a leaf). notify(arg) is called by the worker, without
 * the lock, when a job's data became ready or failed.
 */
#ifndef CR_DCACHE_H
#define CR_DCACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct cr_dcache cr_dcache;

/* Where s3:// objects are fetched from: path-style ENDPOINT/BUCKET/KEY,
 * signed with AWS SigV4 (libcurl's CURLOPT_AWS_SIGV4). Strings borrowed
 * for cr_dcache_new, copied. */
typedef struct cr_dcache_s3 {
    const char *endpoint;   /* "https://s3.amazonaws.com" when NULL */
    const char *region;     /* "us-east-1" when NULL */
    const char *access_key; /* NULL: unsigned requests */
    const char *secret_key;
} cr_dcache_s3;

/* One object a job asks for (borrowed). */
typedef struct cr_dref {
    const char *name;   /* for messages */
    int64_t version;    /* for messages */
    const char *uri;    /* file:, http://, https://, s3:// */
    int64_t size_bytes; /* declared size, > 0 */
    const char *sha256; /* 64 hex digits */
} cr_dref;

enum { CR_DCACHE_READY = 1, CR_DCACHE_STAGING = 0 };

/* Open the cache at dir (made 0711 if missing; partial files kept, stray
 * names removed) with a cap (bytes, > 0) and verify_s (an entry in use is
 * hashed again at least this often; 0: at every job's use). notify may be
 * NULL. Returns 0
 * and *out (free with cr_dcache_free), or CR_EIO with why. */
int cr_dcache_new(const char *dir, int64_t cap_bytes, int64_t verify_s, const cr_dcache_s3 *s3,
                  void (*notify)(void *arg), void *arg, cr_dcache **out, char *why, size_t whylen);
/* Stop the worker (a fetch under way is abandoned, its partial file kept)
 * and free. NULL-safe. */
void cr_dcache_free(cr_dcache *d);

/*
 * Job job (run run) needs refs[0..n-1]. CR_DCACHE_READY: all are here and
 * checked for this job, paths[i] (returned new, free each) is refs[i]'s
 * file; CR_DCACHE_STAGING: msg says how far ("staging NAME 12/120 MB");
 * < 0 (CR_EIO, CR_ETOOBIG, CR_ECORRUPT...): failed, msg names the dataset
 * and why. A new run of the same job asks afresh.
 */
int cr_dcache_want(cr_dcache *d, int64_t job, int64_t run, const cr_dref *refs, size_t n,
                   char **paths, char *msg, size_t msglen);
/* A running job the agent re-adopted (a restart) holds refs[0..n-1]
 * again: pins on the entries that are here, so they are not evicted under
 * it; no fetch, no check. A job that already holds pins: nothing. */
void cr_dcache_pin(cr_dcache *d, int64_t job, int64_t run, const cr_dref *refs, size_t n);
/* The job no longer needs its entries (it ended, or stopped before it
 * started): its pins go. */
void cr_dcache_release(cr_dcache *d, int64_t job);
/* The jobs the cache holds pins or requests for, at most max into ids;
 * returns how many there are. */
size_t cr_dcache_jobs(cr_dcache *d, int64_t *ids, size_t max);

/* The sha256 of the entries held and checked (ready), at most max into
 * out; returns how many were written. For the controller's locality. */
size_t cr_dcache_held(cr_dcache *d, char (*out)[65], size_t max);

/* Counters (for tests and /metrics). */
typedef struct cr_dcache_stats {
    uint64_t fetches;    /* fetches begun */
    uint64_t fetched_ok; /* of which verified and in place */
    uint64_t resumed;    /* of which resumed a partial file */
    uint64_t evictions;  /* entries removed to make room */
    uint64_t corrupt;    /* entries found corrupted at a job's check */
    int64_t used_bytes;  /* bytes under the cache now (reservations included) */
    int64_t cap_bytes;
} cr_dcache_stats;
void cr_dcache_get_stats(cr_dcache *d, cr_dcache_stats *out);

#endif
