/*
 * cr_ratelimit.h - token buckets keyed by short byte strings, in a table of
 * bounded size (the controller's per-token and per-address request limits).
 *
 * A bucket holds up to `burst` tokens and gains `rate` tokens a second; a
 * request takes one, and is refused when less than one is left. A key seen
 * for the first time starts with a full bucket. rate and burst are given
 * with each call (the caller's configuration), so one table may serve keys
 * of several kinds; the table keeps only the level and the time of the
 * last refill.
 *
 * Bounded memory: at most max_entries buckets, allocated once at _new (the
 * pages are touched only as buckets are used). When the table is full, the
 * least recently used bucket is dropped for the new key. A dropped key that
 * comes back starts full again, so eviction only ever lets a key through
 * earlier than its own bucket would have; a bucket idle for burst/rate
 * seconds is full anyway, and dropping it changes nothing. An attacker
 * cycling keys (source addresses, say) therefore cannot grow the table,
 * only push older keys out of it (counted: cr_rl_stats).
 *
 * Cost: O(1) a call: a keyed hash (SipHash-2-4 with a random key per
 * table, so that keys chosen to collide cannot make chains long), a chain
 * walk of expected length below one, and a move to the front of the LRU
 * list, all under the table's own mutex (a leaf: nothing else is called
 * under it). No allocation after _new.
 *
 * Time is CLOCK_MONOTONIC nanoseconds given by the caller (tests pass
 * their own).
 */
#ifndef CR_RATELIMIT_H
#define CR_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cr_rl cr_rl;

/* Longest key, in bytes. */
#define CR_RL_KEY_MAX 24
/* Table sizes accepted by cr_rl_new. */
#define CR_RL_MIN_ENTRIES 1
#define CR_RL_MAX_ENTRIES 10000000
/* The longest wait a refusal names (a rate of 1e-6 a second would say
 * eleven days). */
#define CR_RL_RETRY_MAX_S 86400

/* A table of at most max_entries buckets. 0 and *out (free with
 * cr_rl_free), or CR_ERANGE when max_entries is outside
 * CR_RL_MIN_ENTRIES..CR_RL_MAX_ENTRIES, CR_EIO when libsodium cannot start. */
int cr_rl_new(size_t max_entries, cr_rl **out);
/* NULL-safe. */
void cr_rl_free(cr_rl *t);

/* Take one token from key's bucket (key borrowed, 1..CR_RL_KEY_MAX bytes;
 * rate > 0 tokens a second, burst >= 1). True when the request may go on;
 * false when the bucket is empty, with *retry_s (may be NULL) the whole
 * seconds until one token is there again (1..CR_RL_RETRY_MAX_S). */
bool cr_rl_take(cr_rl *t, const void *key, size_t len, double rate, double burst, int64_t now_ns,
                unsigned *retry_s);

/* Buckets held now, and how many were dropped for new keys since _new. */
void cr_rl_stats(cr_rl *t, size_t *entries, uint64_t *evicted);

#endif
