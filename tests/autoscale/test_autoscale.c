/*
 * test_autoscale.c - the autoscaling policy in virtual time: samples every
 * 2 s of a simulated clock, decisions applied at once (the replicas are
 * assumed ready as soon as they are asked for).
 */
#include "cr_autoscale.h"

#include "cr_error.h"
#include "cr_time.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define TICK (2 * CR_NS_PER_SEC)

typedef struct sim {
    cr_autoscaler *as;
    int64_t now;
    int32_t replicas;
    cr_as_decision last;
} sim;

static cr_as_config base_config(void)
{
    cr_as_config c;
    cr_as_config_default(&c);
    c.min_replicas = 1;
    c.max_replicas = 20;
    c.target_concurrency = 4;
    return c;
}

static void sim_init(sim *s, const cr_as_config *c, int32_t replicas)
{
    s->as = cr_autoscaler_new(c);
    assert_non_null(s->as);
    s->now = 1000 * CR_NS_PER_SEC;
    s->replicas = replicas;
}

/* One tick: record the load, decide, apply. */
static void step(sim *s, double concurrency)
{
    s->now += TICK;
    cr_as_sample smp = {concurrency, concurrency > 0 ? concurrency * 10 : 0, -1};
    assert_int_equal(cr_autoscaler_record(s->as, s->now, &smp), 0);
    assert_int_equal(cr_autoscaler_decide(s->as, s->now, s->replicas, s->replicas, &s->last), 0);
    assert_true(strlen(s->last.reason) > 0);
    s->replicas = s->last.desired;
}

static void test_config_check(void **state)
{
    (void)state;
    cr_as_config c = base_config();
    char err[128];
    assert_int_equal(cr_as_config_check(&c, err, sizeof err), 0);
    c.max_replicas = 0;
    assert_int_equal(cr_as_config_check(&c, err, sizeof err), CR_EINVAL);
    assert_non_null(strstr(err, "max_replicas"));
    c = base_config();
    c.panic_window_ns = c.stable_window_ns * 2;
    assert_int_equal(cr_as_config_check(&c, err, sizeof err), CR_EINVAL);
    assert_non_null(strstr(err, "panic_window"));
    c = base_config();
    c.target_concurrency = 0;
    assert_int_equal(cr_as_config_check(&c, err, sizeof err), CR_EINVAL);
    assert_null(cr_autoscaler_new(&c));
}

static void test_steady_holds(void **state)
{
    (void)state;
    sim s;
    cr_as_config c = base_config();
    sim_init(&s, &c, 2);
    for (int i = 0; i < 100; i++) {
        step(&s, 8.0); /* exactly 2 replicas' worth */
        assert_int_equal(s.replicas, 2);
        assert_int_equal(s.last.action, CR_AS_HOLD);
        assert_false(s.last.panic);
    }
    cr_autoscaler_free(s.as);
}

static void test_burst_panics_within_window(void **state)
{
    (void)state;
    sim s;
    cr_as_config c = base_config();
    sim_init(&s, &c, 2);
    for (int i = 0; i < 40; i++) { /* 80 s of steady load fills the stable window */
        step(&s, 8.0);
    }
    assert_int_equal(s.replicas, 2);
    int64_t burst = s.now;
    /* A burst to 10x: 80 concurrent = 20 replicas' worth. */
    int64_t reached = -1;
    bool panicked = false;
    for (int i = 0; i < 10; i++) {
        step(&s, 80.0);
        panicked |= s.last.panic;
        if (s.replicas >= 20 && reached < 0) {
            reached = s.now;
        }
    }
    assert_true(panicked);
    assert_true(reached > 0);
    /* Within the 6 s panic window, not the 60 s stable one. */
    assert_true(reached - burst <= c.panic_window_ns);
    assert_non_null(strstr(s.last.reason, "panic"));
    cr_autoscaler_free(s.as);
}

static void test_no_scale_down_in_panic(void **state)
{
    (void)state;
    sim s;
    cr_as_config c = base_config();
    sim_init(&s, &c, 2);
    for (int i = 0; i < 40; i++) {
        step(&s, 8.0);
    }
    for (int i = 0; i < 4; i++) {
        step(&s, 80.0);
    }
    int32_t top = s.replicas;
    assert_true(top > 2);
    /* The burst stops: while panic lasts (a stable window after the last
     * panic signal) the count holds; then it comes down. */
    int64_t stop = s.now;
    bool left_panic = false;
    for (int i = 0; i < 100; i++) {
        int32_t before = s.replicas;
        step(&s, 0.0);
        if (s.last.panic) {
            assert_int_equal(s.replicas, before);
            assert_false(left_panic);
        } else if (!left_panic) {
            left_panic = true;
            assert_true(s.now - stop >= c.stable_window_ns / 2);
        }
    }
    assert_true(left_panic);
    assert_int_equal(s.replicas, 1);
    cr_autoscaler_free(s.as);
}

static void test_idle_scales_down_after_stable_window(void **state)
{
    (void)state;
    sim s;
    cr_as_config c = base_config();
    c.max_replicas = 10;
    sim_init(&s, &c, 8);
    for (int i = 0; i < 40; i++) {
        step(&s, 32.0); /* 8 replicas' worth */
    }
    assert_int_equal(s.replicas, 8);
    int64_t idle = s.now;
    int64_t at_min = -1;
    for (int i = 0; i < 100 && at_min < 0; i++) {
        step(&s, 0.0);
        if (s.replicas == 1) {
            at_min = s.now;
        }
    }
    assert_true(at_min > 0);
    /* Not before the stable window has emptied (the mean decays over it)... */
    assert_true(at_min - idle >= c.stable_window_ns - 3 * TICK);
    /* ...and soon after it. */
    assert_true(at_min - idle <= c.stable_window_ns + 4 * TICK);
    assert_int_equal(s.last.desired, 1); /* min_replicas holds, no scale to zero */
    cr_autoscaler_free(s.as);
}

static void test_bounded_steps(void **state)
{
    (void)state;
    sim s;
    cr_as_config c = base_config();
    c.max_replicas = 100;
    c.max_scale_up_rate = 2.0;
    c.max_scale_down_rate = 2.0;
    sim_init(&s, &c, 2);
    for (int i = 0; i < 40; i++) {
        step(&s, 8.0);
    }
    int32_t prev = s.replicas;
    for (int i = 0; i < 10; i++) {
        step(&s, 400.0); /* 100 replicas' worth */
        assert_true(s.replicas <= 2 * prev);
        if (s.replicas == 2 * prev) {
            assert_non_null(strstr(s.last.reason, "scale-up rate") ? s.last.reason : NULL);
        }
        prev = s.replicas;
    }
    assert_int_equal(s.replicas, 100);
    /* Down: never below half per decision. */
    for (int i = 0; i < 200; i++) {
        step(&s, 0.0);
        assert_true(s.replicas >= prev / 2);
        prev = s.replicas;
    }
    assert_int_equal(s.replicas, 1);
    cr_autoscaler_free(s.as);
}

static void test_scale_to_zero_and_back(void **state)
{
    (void)state;
    sim s;
    cr_as_config c = base_config();
    c.min_replicas = 0;
    c.scale_to_zero = true;
    c.to_zero_grace_ns = 90 * CR_NS_PER_SEC;
    sim_init(&s, &c, 1);
    for (int i = 0; i < 10; i++) {
        step(&s, 2.0);
    }
    assert_int_equal(s.replicas, 1);
    int64_t idle = s.now;
    int64_t zero_at = -1;
    for (int i = 0; i < 200 && zero_at < 0; i++) {
        step(&s, 0.0);
        if (s.replicas == 0) {
            zero_at = s.now;
            assert_int_equal(s.last.action, CR_AS_TO_ZERO);
        } else {
            assert_int_equal(s.replicas, 1);
        }
    }
    assert_true(zero_at > 0);
    assert_true(zero_at - idle >= c.to_zero_grace_ns);
    assert_true(zero_at - idle <= c.to_zero_grace_ns + 2 * TICK);
    /* Stays at zero while idle. */
    for (int i = 0; i < 5; i++) {
        step(&s, 0.0);
        assert_int_equal(s.replicas, 0);
        assert_int_equal(s.last.action, CR_AS_HOLD);
    }
    /* Activation: the gateway holds a request; one decision brings one back. */
    s.now += TICK;
    cr_autoscaler_activate(s.as, s.now);
    assert_int_equal(cr_autoscaler_decide(s.as, s.now, 0, 0, &s.last), 0);
    assert_int_equal(s.last.action, CR_AS_FROM_ZERO);
    assert_int_equal(s.last.desired, 1);
    assert_non_null(strstr(s.last.reason, "activation"));
    s.replicas = 1;
    /* A sampled load at zero replicas also activates, sized by the load. */
    cr_autoscaler *as2 = cr_autoscaler_new(&c);
    cr_as_sample smp = {12.0, 0, -1};
    assert_int_equal(cr_autoscaler_record(as2, s.now, &smp), 0);
    cr_as_decision d;
    assert_int_equal(cr_autoscaler_decide(as2, s.now, 0, 0, &d), 0);
    assert_int_equal(d.action, CR_AS_FROM_ZERO);
    assert_int_equal(d.desired, 3);
    cr_autoscaler_free(as2);
    cr_autoscaler_free(s.as);
}

static void test_min_zero_without_scale_to_zero_keeps_one(void **state)
{
    (void)state;
    sim s;
    cr_as_config c = base_config();
    c.min_replicas = 0;
    c.scale_to_zero = false;
    sim_init(&s, &c, 1);
    for (int i = 0; i < 200; i++) {
        step(&s, 0.0);
        assert_int_equal(s.replicas, 1);
    }
    cr_autoscaler_free(s.as);
}

static void test_p95_target(void **state)
{
    (void)state;
    cr_as_config c = base_config();
    c.target_p95_ms = 200;
    cr_autoscaler *as = cr_autoscaler_new(&c);
    int64_t now = 0;
    cr_as_decision d;
    for (int i = 0; i < 40; i++) {
        now += TICK;
        cr_as_sample smp = {10, 50, 400}; /* 2x over target */
        assert_int_equal(cr_autoscaler_record(as, now, &smp), 0);
    }
    assert_int_equal(cr_autoscaler_decide(as, now, 3, 3, &d), 0);
    assert_int_equal(d.desired, 6);
    assert_non_null(strstr(d.reason, "p95 400 ms"));
    /* Within tolerance: hold. */
    cr_autoscaler *as2 = cr_autoscaler_new(&c);
    for (int i = 0; i < 40; i++) {
        now += TICK;
        cr_as_sample smp = {10, 50, 210};
        assert_int_equal(cr_autoscaler_record(as2, now, &smp), 0);
    }
    assert_int_equal(cr_autoscaler_decide(as2, now, 6, 6, &d), 0);
    assert_int_equal(d.action, CR_AS_HOLD);
    assert_int_equal(d.desired, 6);
    cr_autoscaler_free(as2);
    cr_autoscaler_free(as);
}

static void test_bad_input(void **state)
{
    (void)state;
    cr_as_config c = base_config();
    cr_autoscaler *as = cr_autoscaler_new(&c);
    cr_as_sample smp = {1, 1, -1};
    assert_int_equal(cr_autoscaler_record(as, 100, &smp), 0);
    assert_int_equal(cr_autoscaler_record(as, 50, &smp), CR_EINVAL);
    smp.concurrency = -1;
    assert_int_equal(cr_autoscaler_record(as, 200, &smp), CR_EINVAL);
    cr_as_decision d;
    assert_int_equal(cr_autoscaler_decide(as, 200, -1, 0, &d), CR_EINVAL);
    /* Bounds win: a service above max comes down to max. */
    assert_int_equal(cr_autoscaler_decide(as, 200, 50, 50, &d), 0);
    assert_true(d.desired <= c.max_replicas);
    cr_autoscaler_free(as);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_check),
        cmocka_unit_test(test_steady_holds),
        cmocka_unit_test(test_burst_panics_within_window),
        cmocka_unit_test(test_no_scale_down_in_panic),
        cmocka_unit_test(test_idle_scales_down_after_stable_window),
        cmocka_unit_test(test_bounded_steps),
        cmocka_unit_test(test_scale_to_zero_and_back),
        cmocka_unit_test(test_min_zero_without_scale_to_zero_keeps_one),
        cmocka_unit_test(test_p95_target),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
