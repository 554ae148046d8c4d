/*
 * cr_rng.h - a small, seeded, reproducible RNG (xoshiro256**, seeded
 * through splitmix64). Caller-owned value type; not thread-safe, give each
 * thread its own. Same seed, same sequence, on every platform.
 */
#ifndef CR_RNG_H
#define CR_RNG_H

#include <stdint.h>

typedef struct cr_rng {
    uint64_t s[4]; /* generator state; never all zero */
} cr_rng;

void cr_rng_seed(cr_rng *r, uint64_t seed);
uint64_t cr_rng_next(cr_rng *r);
/* Uniform double in [0, 1). */
double cr_rng_uniform(cr_rng *r);
/* Uniform integer in [0, n); n > 0. */
uint64_t cr_rng_below(cr_rng *r, uint64_t n);
/* Exponential variate with the given mean. */
double cr_rng_exp(cr_rng *r, double mean);

#endif
