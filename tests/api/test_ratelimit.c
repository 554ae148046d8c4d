/*
 * test_ratelimit.c - the token bucket table (cr_ratelimit.h) on its own,
 * with the clock given by the test: a burst then refusals with the wait
 * named, refill at the rate, keys independent, the size bound with
 * least-recently-used eviction, and many threads on one table.
 */
#include "cr_ratelimit.h"

#include "cr_error.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#define SEC 1000000000LL

static void test_burst_then_refuse(void **state)
{
    (void)state;
    cr_rl *t = NULL;
    assert_int_equal(cr_rl_new(8, &t), 0);
    int64_t now = 5 * SEC;
    unsigned retry = 0;
    for (int i = 0; i < 3; i++) {
        assert_true(cr_rl_take(t, "alice", 5, 1.0, 3, now, &retry));
    }
    assert_false(cr_rl_take(t, "alice", 5, 1.0, 3, now, &retry));
    assert_int_equal(retry, 1);
    /* another key has its own bucket */
    assert_true(cr_rl_take(t, "bob", 3, 1.0, 3, now, &retry));
    /* half a second: still nothing; then one token, one request */
    assert_false(cr_rl_take(t, "alice", 5, 1.0, 3, now + SEC / 2, &retry));
    assert_int_equal(retry, 1);
    assert_true(cr_rl_take(t, "alice", 5, 1.0, 3, now + SEC, &retry));
    assert_false(cr_rl_take(t, "alice", 5, 1.0, 3, now + SEC, &retry));
    /* a long idle refills to the burst, not beyond */
    int ok = 0;
    for (int i = 0; i < 10; i++) {
        ok += cr_rl_take(t, "alice", 5, 1.0, 3, now + 1000 * SEC, NULL);
    }
    assert_int_equal(ok, 3);
    /* a slow rate names a long wait, capped */
    assert_true(cr_rl_take(t, "slow", 4, 0.01, 1, now, &retry));
    assert_false(cr_rl_take(t, "slow", 4, 0.01, 1, now, &retry));
    assert_int_equal(retry, 100);
    assert_true(cr_rl_take(t, "slower", 6, 1e-9, 1, now, &retry));
    assert_false(cr_rl_take(t, "slower", 6, 1e-9, 1, now, &retry));
    assert_int_equal(retry, CR_RL_RETRY_MAX_S);
    /* a clock that goes back (another thread's earlier reading) adds nothing */
    assert_false(cr_rl_take(t, "alice", 5, 1.0, 3, now, &retry));
    cr_rl_free(t);
}

static void test_bound_and_lru(void **state)
{
    (void)state;
    cr_rl *t = NULL;
    assert_int_equal(cr_rl_new(0, &t), CR_ERANGE);
    assert_int_equal(cr_rl_new(16, &t), 0);
    int64_t now = SEC;
    /* "keep" is emptied, then 10,000 other keys pass through while keep is
     * used now and then: it stays in the table (recently used), so its
     * bucket is still empty at the end. */
    for (int i = 0; i < 2; i++) {
        assert_true(cr_rl_take(t, "keep", 4, 1e-6, 2, now, NULL));
    }
    assert_false(cr_rl_take(t, "keep", 4, 1e-6, 2, now, NULL));
    for (int i = 0; i < 10000; i++) {
        char k[16];
        int n = snprintf(k, sizeof k, "k%d", i);
        assert_true(cr_rl_take(t, k, (size_t)n, 1e-6, 2, now, NULL));
        if (i % 8 == 0) {
            assert_false(cr_rl_take(t, "keep", 4, 1e-6, 2, now, NULL));
        }
    }
    size_t held = 0;
    uint64_t evicted = 0;
    cr_rl_stats(t, &held, &evicted);
    assert_int_equal(held, 16);
    assert_int_equal(evicted, 10000 + 1 - 16);
    /* a key pushed out comes back full (the documented cost of the bound) */
    assert_true(cr_rl_take(t, "k0", 2, 1e-6, 2, now, NULL));
    assert_true(cr_rl_take(t, "k0", 2, 1e-6, 2, now, NULL));
    assert_false(cr_rl_take(t, "k0", 2, 1e-6, 2, now, NULL));
    /* a key of the maximum length, and one too long (cut, still bounded) */
    char big[CR_RL_KEY_MAX + 8];
    memset(big, 'x', sizeof big);
    assert_true(cr_rl_take(t, big, CR_RL_KEY_MAX, 1e-6, 1, now, NULL));
    assert_false(cr_rl_take(t, big, sizeof big, 1e-6, 1, now, NULL));
    cr_rl_free(t);
    cr_rl_free(NULL);
}

typedef struct worker {
    cr_rl *t;
    int id;
    int ok;
} worker;

static void *hammer(void *arg)
{
    worker *w = arg;
    char k[16];
    int n = snprintf(k, sizeof k, "w%d", w->id % 4);
    for (int i = 0; i < 20000; i++) {
        w->ok += cr_rl_take(w->t, k, (size_t)n, 1e-6, 100, SEC, NULL);
        char other[16];
        int m = snprintf(other, sizeof other, "o%d.%d", w->id, i);
        cr_rl_take(w->t, other, (size_t)m, 1e-6, 100, SEC, NULL);
    }
    return NULL;
}

/* Eight threads, two on each of four keys, with churn: each key lets
 * exactly its burst through in all (the lock makes take atomic) unless it
 * was evicted; with a table larger than the churn, it never is. */
static void test_threads(void **state)
{
    (void)state;
    cr_rl *t = NULL;
    assert_int_equal(cr_rl_new(200000, &t), 0);
    pthread_t th[8];
    worker w[8];
    for (int i = 0; i < 8; i++) {
        w[i] = (worker){.t = t, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, hammer, &w[i]), 0);
    }
    int ok = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        ok += w[i].ok;
    }
    assert_int_equal(ok, 4 * 100);
    size_t held = 0;
    uint64_t evicted = 0;
    cr_rl_stats(t, &held, &evicted);
    assert_int_equal(held, 4 + 8 * 20000);
    assert_int_equal(evicted, 0);
    cr_rl_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_then_refuse),
        cmocka_unit_test(test_bound_and_lru),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
