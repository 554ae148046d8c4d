#include "cr_rng.h"

#include <math.h>

__extension__ typedef unsigned __int128 u128;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

void cr_rng_seed(cr_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) {
        r->s[i] = splitmix64(&x);
    }
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t cr_rng_next(cr_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double cr_rng_uniform(cr_rng *r)
{
    return (double)(cr_rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t cr_rng_below(cr_rng *r, uint64_t n)
{
    /* Lemire's multiply-shift with rejection keeps the result unbiased. */
    uint64_t x = cr_rng_next(r);
    u128 m = (u128)x * n;
    uint64_t l = (uint64_t)m;
    if (l < n) {
        uint64_t t = -n % n;
        while (l < t) {
            x = cr_rng_next(r);
            m = (u128)x * n;
            l = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

double cr_rng_exp(cr_rng *r, double mean)
{
    double u = cr_rng_uniform(r);
    return -mean * log1p(-u);
}
