/*
 * test_peer.c - the gateway's default peer choice (power of two choices
 * over least outstanding requests plus the replica's own queue), without
 * sockets: replicas are set up in memory.
 */
#include "gw_int.h"

#include "cr_alloc.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

typedef struct fixture {
    gw_conf conf;
    gw g;
    gw_service svc;
    gw_replica reps[4];
    gw_replica *ptrs[4];
} fixture;

static void setup_fixture(fixture *f, size_t n)
{
    memset(f, 0, sizeof *f);
    f->conf.max_inflight = 8;
    f->g.conf = &f->conf;
    cr_rng_seed(&f->g.rng, 42);
    snprintf(f->svc.name, sizeof f->svc.name, "chat");
    f->svc.max_inflight = 8;
    f->svc.replicas = f->ptrs;
    f->svc.replica_count = n;
    for (size_t i = 0; i < n; i++) {
        f->reps[i].svc = &f->svc;
        f->reps[i].ep.ready = true;
        snprintf(f->reps[i].key, sizeof f->reps[i].key, "r%zu", i);
        f->ptrs[i] = &f->reps[i];
    }
}

static void test_least_loaded_of_two(void **state)
{
    (void)state;
    fixture f;
    setup_fixture(&f, 3);
    f.reps[0].outstanding = 0;
    f.reps[1].outstanding = 3;
    f.reps[2].outstanding = 6;
    int count[3] = {0, 0, 0};
    for (int i = 0; i < 3000; i++) {
        int why = -1;
        gw_replica *r = gw_peer_p2c(&f.g, &f.svc, NULL, &why);
        assert_non_null(r);
        count[r - f.reps]++;
    }
    /* The most loaded never wins a pair; the least loaded wins 2 of 3. */
    assert_int_equal(count[2], 0);
    assert_true(count[0] > 1800 && count[0] < 2200);
    assert_true(count[1] > 800 && count[1] < 1200);
}

static void test_load_signal_counts(void **state)
{
    (void)state;
    fixture f;
    setup_fixture(&f, 2);
    f.reps[0].waiting = 10; /* the replica's own queue */
    f.reps[1].outstanding = 2;
    for (int i = 0; i < 100; i++) {
        int why;
        assert_ptr_equal(gw_peer_p2c(&f.g, &f.svc, NULL, &why), &f.reps[1]);
    }
    /* Ties go to the lower KV-cache usage. */
    f.reps[0].waiting = 0;
    f.reps[1].outstanding = 0;
    f.reps[0].kv_usage = 0.9;
    f.reps[1].kv_usage = 0.1;
    for (int i = 0; i < 100; i++) {
        int why;
        assert_ptr_equal(gw_peer_p2c(&f.g, &f.svc, NULL, &why), &f.reps[1]);
    }
}

static void test_eligibility(void **state)
{
    (void)state;
    fixture f;
    setup_fixture(&f, 3);
    f.reps[0].down = true;
    f.reps[1].removed = true;
    int why = -1;
    for (int i = 0; i < 50; i++) {
        assert_ptr_equal(gw_peer_p2c(&f.g, &f.svc, NULL, &why), &f.reps[2]);
    }
    /* Excluded (the one that just failed): nothing left, none ready. */
    assert_null(gw_peer_p2c(&f.g, &f.svc, &f.reps[2], &why));
    assert_int_equal(why, GW_ERR_NO_REPLICA);
    /* At the in-flight limit: saturated, not "none ready". */
    f.reps[2].outstanding = f.svc.max_inflight;
    assert_null(gw_peer_p2c(&f.g, &f.svc, NULL, &why));
    assert_int_equal(why, GW_ERR_SATURATED);
    /* Not ready per the controller. */
    f.reps[2].outstanding = 0;
    f.reps[2].ep.ready = false;
    assert_null(gw_peer_p2c(&f.g, &f.svc, NULL, &why));
    assert_int_equal(why, GW_ERR_NO_REPLICA);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_least_loaded_of_two),
        cmocka_unit_test(test_load_signal_counts),
        cmocka_unit_test(test_eligibility),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
