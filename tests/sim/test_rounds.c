/*
 * test_rounds.c - the 'rounds' policy: the max-min fairness LP on small
 * instances with optima worked out by hand, the suspend/resume and
 * migration cost bound on generated heterogeneous workloads (property
 * test), and determinism of whole runs.
 */
#include "sim_int.h"

#include "cr_error.h"
#include "cr_rng.h"
#include "cr_time.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define NEAR(a, b) assert_true(fabs((a) - (b)) < 1e-6)

/* One type of 2 GPUs, a 1-GPU and a 2-GPU job with proportional rates.
 * value_j = s_j * x_j (r/P = 1): max min(x0, 2 x1) s.t. x0 + 2 x1 <= 2,
 * x <= 1 gives z = 1 at x0 = 1, x1 = 0.5 (the gang gets half the time). */
static void test_lp_scale_factor(void **state)
{
    (void)state;
    double rate[2] = {5.0, 9.0}, cap[1] = {2}, x[2], z;
    int scale[2] = {1, 2};
    assert_int_equal(cr_sched_rounds_lp(2, 1, rate, scale, NULL, cap, false, x, &z), 0);
    NEAR(z, 1.0);
    NEAR(x[0], 1.0);
    NEAR(x[1], 0.5);
}

/* Three equal 1-GPU jobs on one GPU: each gets a third. */
static void test_lp_equal_split(void **state)
{
    (void)state;
    double rate[3] = {2, 2, 2}, cap[1] = {1}, x[3], z;
    int scale[3] = {1, 1, 1};
    assert_int_equal(cr_sched_rounds_lp(3, 1, rate, scale, NULL, cap, true, x, &z), 0);
    NEAR(z, 1.0 / 3);
    for (int j = 0; j < 3; j++) {
        NEAR(x[j], 1.0 / 3);
    }
}

/* A class row: 3 identical jobs as one row with mult 3 get what three rows
 * would, and a class of two 2-GPU jobs next to a 1-GPU job on 2 GPUs:
 * x0 + 2*2*x1 <= 2 with z = x0 = 2 x1 gives z = 2/3, x1 = 1/3. */
static void test_lp_classes(void **state)
{
    (void)state;
    double rate[2] = {2, 7}, cap[1] = {1}, x[2], z, mult[2] = {3, 2};
    int scale[2] = {1, 2};
    assert_int_equal(cr_sched_rounds_lp(1, 1, rate, scale, mult, cap, true, x, &z), 0);
    NEAR(z, 1.0 / 3);
    NEAR(x[0], 1.0 / 3);
    cap[0] = 2;
    mult[0] = 1;
    assert_int_equal(cr_sched_rounds_lp(2, 1, rate, scale, mult, cap, true, x, &z), 0);
    NEAR(z, 2.0 / 3);
    NEAR(x[0], 2.0 / 3);
    NEAR(x[1], 1.0 / 3);
}

/* Two types A, B of one GPU each. Job 0 runs 2x faster on A (P = 1.5),
 * job 1 the same on both (P = 1). Job 1 needs a full GPU-time to reach 1,
 * so z* = 1, and any time job 1 takes on A it must give back on B. The
 * second stage then puts job 0 on A for all of its time: x0A = 1, x1B = 1.
 * A third job that can run nowhere does not pin z to 0, and a 2-GPU job
 * bigger than every type gets nothing. */
static void test_lp_hetero_spread(void **state)
{
    (void)state;
    double rate[8] = {2, 1, 1, 1, 0, 0, 3, 3}, cap[2] = {1, 1}, x[8], z;
    int scale[4] = {1, 1, 1, 2};
    assert_int_equal(cr_sched_rounds_lp(4, 2, rate, scale, NULL, cap, true, x, &z), 0);
    NEAR(z, 1.0);
    NEAR(x[0], 1.0); /* job 0 on A */
    NEAR(x[1], 0.0);
    NEAR(x[2], 0.0);
    NEAR(x[3], 1.0); /* job 1 on B */
    for (int k = 4; k < 8; k++) {
        NEAR(x[k], 0.0);
    }
    /* Only the job that can run nowhere: all zero, not unbounded. */
    assert_int_equal(cr_sched_rounds_lp(1, 2, rate + 4, scale + 2, NULL, cap, true, x, &z), 0);
    NEAR(z, 0);
    NEAR(x[0], 0);
    NEAR(x[1], 0);
    /* Bad sizes are refused, an empty instance is fine. */
    assert_int_equal(cr_sched_rounds_lp(1, 0, rate, scale, NULL, cap, true, x, &z), CR_EINVAL);
    assert_int_equal(cr_sched_rounds_lp(0, 2, rate, scale, NULL, cap, true, x, &z), 0);
    NEAR(z, 0);
}

/* A generated heterogeneous workload: three types with per-job speed-ups
 * from 1x to 14x, gangs of 1/2/4/8, Poisson arrivals heavy enough to queue. */
static void make_workload(cr__sim_workload *w, uint64_t seed, size_t n)
{
    cr__sim_workload_init(w);
    cr_rng rng;
    cr_rng_seed(&rng, seed);
    int64_t t = 0;
    static const int gangs[] = {1, 1, 1, 2, 4, 8};
    for (size_t i = 0; i < n; i++) {
        cr__sim_job *j = cr__sim_workload_add(w);
        snprintf(j->name, sizeof j->name, "j%zu", i);
        j->gpu_count = gangs[cr_rng_below(&rng, 6)];
        j->preemptible = cr_rng_below(&rng, 10) != 0; /* a few never are */
        t += (int64_t)(cr_rng_exp(&rng, 600.0) * 1e9);
        j->submit_ns = t;
        double slow = 0.2 + cr_rng_uniform(&rng);
        j->rate[0] = slow * (1 + 13 * cr_rng_uniform(&rng)); /* fast */
        j->rate[1] = slow * (1 + 2 * cr_rng_uniform(&rng));  /* mid */
        j->rate[2] = slow;                                   /* slow */
        j->work = j->rate[0] * (600 + cr_rng_exp(&rng, 3 * 3600.0));
        j->type_req = cr_rng_below(&rng, 20) == 0 ? 2 : -1;
    }
}

static void run_opts(const char *gpus, const cr__sim_workload *w, int64_t switch_ns,
                     bool no_migrate, bool no_guard, bool fair, cr__sim_result *res)
{
    cr__sim_cluster c;
    memset(&c, 0, sizeof c);
    char err[256];
    assert_int_equal(cr__sim_cluster_parse_gpus(&c, gpus, err, sizeof err), 0);
    c.gpus_per_node = 1;
    cr__sim_opts o;
    memset(&o, 0, sizeof o);
    o.estimates = true;
    o.switch_ns = switch_ns;
    o.no_migrate = no_migrate;
    o.no_drain_guard = no_guard;
    o.fair_order = fair;
    int rc = cr__sim_run_rounds(&o, &c, w, res, err, sizeof err);
    if (rc != 0) {
        fail_msg("run: %s", err);
    }
}

static void run_on(const char *gpus, const cr__sim_workload *w, int64_t switch_ns, bool no_migrate,
                   bool no_guard, cr__sim_result *res)
{
    run_opts(gpus, w, switch_ns, no_migrate, no_guard, false, res);
}

static void run_rounds(const cr__sim_workload *w, int64_t switch_ns, bool no_migrate,
                       cr__sim_result *res)
{
    run_on("fast:12,mid:12,slow:12", w, switch_ns, no_migrate, false, res);
}

/* Exact times. One fast and one slow GPU; j0 runs only on fast (100 s of
 * work there), j1 is 10x faster on fast (1000 s there, 10000 s on slow).
 * The LP splits fast half-half; ties go by job index, so j0 takes fast and
 * j1 slow at t=0. j0 finishes at 100 s: j1 moves up mid-round (gain over
 * the 260 s left of the round: 250 s x 10 > 260 s x 1), pays the 10 s
 * switch, and finishes at 100 + 10 + 9900/10 = 1100 s. Without mid-round
 * migration it waits for the round at 360 s: 360 + 10 + 9640/10 = 1334 s. */
static void test_migration_exact(void **state)
{
    (void)state;
    cr__sim_workload w;
    cr__sim_workload_init(&w);
    cr__sim_job *j0 = cr__sim_workload_add(&w);
    snprintf(j0->name, sizeof j0->name, "j0");
    j0->gpu_count = 1;
    j0->preemptible = true;
    j0->rate[0] = 10;
    j0->work = 1000;
    cr__sim_job *j1 = cr__sim_workload_add(&w);
    snprintf(j1->name, sizeof j1->name, "j1");
    j1->gpu_count = 1;
    j1->preemptible = true;
    j1->rate[0] = 10;
    j1->rate[1] = 1;
    j1->work = 10000;
    cr__sim_result r;
    run_on("fast:1,slow:1", &w, 10 * CR_NS_PER_SEC, false, true, &r);
    assert_int_equal(r.jobs[0].finish_ns, 100 * CR_NS_PER_SEC);
    assert_int_equal(r.jobs[1].finish_ns, 1100 * CR_NS_PER_SEC);
    assert_int_equal(r.jobs[1].preemptions, 1);
    assert_int_equal(r.jobs[1].type, 0);
    NEAR(r.jobs[1].lost_gpu_s, 10.0);
    cr__sim_result_fini(&r);
    run_on("fast:1,slow:1", &w, 10 * CR_NS_PER_SEC, true, true, &r);
    assert_int_equal(r.jobs[1].finish_ns, 1334 * CR_NS_PER_SEC);
    assert_int_equal(r.jobs[1].preemptions, 1);
    cr__sim_result_fini(&r);
    /* A switch dearer than the gain: j1 stays on slow through the round
     * (250 s x 10 < 260 s x 1 fails only for a switch over ~234 s). */
    run_on("fast:1,slow:1", &w, 250 * CR_NS_PER_SEC, false, true, &r);
    assert_true(r.jobs[1].finish_ns >= 360 * CR_NS_PER_SEC);
    assert_true(r.jobs[1].lost_gpu_s <= 250.0 * r.jobs[1].preemptions + 1e-6);
    cr__sim_result_fini(&r);
    cr__sim_workload_fini(&w);
}

static cr__sim_job *add_job(cr__sim_workload *w, const char *name, int gpus, double seconds,
                            int64_t submit_ns)
{
    cr__sim_job *j = cr__sim_workload_add(w);
    snprintf(j->name, sizeof j->name, "%s", name);
    j->gpu_count = gpus;
    j->preemptible = true;
    j->submit_ns = submit_ns;
    j->rate[0] = 1;
    j->work = seconds;
    return j;
}

/* The default order hands GPUs to the fewest GPU-seconds still needed, the
 * gang size counted. Two GPUs; at t=0 a 2-GPU job of 1 h (7200 GPU-s) and
 * two 1-GPU jobs of 1.5 h (5400 GPU-s each). The two small ones run first
 * and finish at 1.5 h, the gang after them at 2.5 h: average JCT 1.83 h.
 * Ordered by time alone the gang would go first (1 h, then 2.5 h for both:
 * 2 h). Then a short job arriving mid-run takes a GPU from a long one at
 * the next round: one GPU, a 10 h job from t=0 and a 30 min job at 3700 s;
 * the short one starts at the round boundary at 3960 s (no switch: its
 * first start) and ends 30 min later; the long one is suspended once and
 * pays one 10 s switch. */
static void test_order_shortest_area(void **state)
{
    (void)state;
    cr__sim_workload w;
    cr__sim_workload_init(&w);
    add_job(&w, "gang", 2, 3600, 0);
    add_job(&w, "a", 1, 5400, 0);
    add_job(&w, "b", 1, 5400, 0);
    cr__sim_result r;
    run_on("g:2", &w, 10 * CR_NS_PER_SEC, false, false, &r);
    assert_int_equal(r.jobs[1].finish_ns, 5400 * CR_NS_PER_SEC);
    assert_int_equal(r.jobs[2].finish_ns, 5400 * CR_NS_PER_SEC);
    assert_int_equal(r.jobs[0].first_start_ns, 5400 * CR_NS_PER_SEC);
    assert_int_equal(r.jobs[0].finish_ns, 9000 * CR_NS_PER_SEC);
    assert_int_equal(r.jobs[0].preemptions, 0);
    cr__sim_result_fini(&r);
    cr__sim_workload_fini(&w);

    cr__sim_workload_init(&w);
    add_job(&w, "long", 1, 36000, 0);
    add_job(&w, "short", 1, 1800, 3700 * CR_NS_PER_SEC);
    run_on("g:1", &w, 10 * CR_NS_PER_SEC, false, true, &r);
    int64_t boundary = (3600 + 360) * CR_NS_PER_SEC; /* rounds of 6 min from t=0 */
    assert_int_equal(r.jobs[1].first_start_ns, boundary);
    assert_int_equal(r.jobs[1].finish_ns, boundary + 1800 * CR_NS_PER_SEC);
    assert_int_equal(r.jobs[0].preemptions, 1);
    NEAR(r.jobs[0].lost_gpu_s, 10.0);
    assert_int_equal(r.jobs[0].finish_ns, (36000 + 1800 + 10) * CR_NS_PER_SEC);
    cr__sim_result_fini(&r);
    /* The fair order with its one-round window keeps the lease: the long
     * job is never suspended and the short one waits for it. */
    run_opts("g:1", &w, 10 * CR_NS_PER_SEC, false, true, true, &r);
    assert_int_equal(r.jobs[0].preemptions, 0);
    assert_int_equal(r.jobs[0].finish_ns, 36000 * CR_NS_PER_SEC);
    assert_true(r.jobs[1].first_start_ns >= 36000 * CR_NS_PER_SEC);
    cr__sim_result_fini(&r);
    cr__sim_workload_fini(&w);
}

/* Between rounds a freed GPU goes to the waiting job needing the fewest
 * GPU-seconds, from the heap kept since the arrivals (no solve: both are of
 * the running job's class). One GPU; A (1000 s) runs from t=0 and keeps the
 * GPU at the boundaries at 360 and 720 s (its remaining area is the
 * smallest); B (5000 s) arrives at 10 s, C (2000 s) at 20 s. A ends at
 * 1000 s, mid-round: C starts then (a first start: no switch) and ends at
 * 3000 s, also mid-round, and B runs from 3000 to 8000 s. In arrival order
 * B would have taken the GPU at 1000 s. */
static void test_fill_shortest_area(void **state)
{
    (void)state;
    cr__sim_workload w;
    cr__sim_workload_init(&w);
    add_job(&w, "a", 1, 1000, 0);
    add_job(&w, "b", 1, 5000, 10 * CR_NS_PER_SEC);
    add_job(&w, "c", 1, 2000, 20 * CR_NS_PER_SEC);
    cr__sim_result r;
    run_on("g:1", &w, 10 * CR_NS_PER_SEC, false, true, &r);
    assert_int_equal(r.jobs[0].finish_ns, 1000 * CR_NS_PER_SEC);
    assert_int_equal(r.jobs[2].first_start_ns, 1000 * CR_NS_PER_SEC);
    assert_int_equal(r.jobs[2].finish_ns, 3000 * CR_NS_PER_SEC);
    assert_int_equal(r.jobs[1].first_start_ns, 3000 * CR_NS_PER_SEC);
    assert_int_equal(r.jobs[1].finish_ns, 8000 * CR_NS_PER_SEC);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(r.jobs[k].preemptions, 0);
    }
    cr__sim_result_fini(&r);
    cr__sim_workload_fini(&w);
}

/* Property: a job never loses more than its modelled cost - each suspend
 * (preemption or migration) costs at most the switch time on its GPUs, the
 * first start nothing - and the work done is exactly the work asked: held
 * GPU time minus lost time, at the rates of the types it ran on, covers the
 * job (checked through the finish: no job finishes before its best-type
 * runtime plus its paid switches). Over many generated workloads. */
static void test_migration_cost_bound(void **state)
{
    (void)state;
    const int64_t sw = 45 * CR_NS_PER_SEC;
    size_t moved = 0;
    for (uint64_t seed = 1; seed <= 12; seed++) {
        cr__sim_workload w;
        make_workload(&w, seed, 150);
        cr__sim_result res;
        run_rounds(&w, sw, false, &res);
        assert_int_equal(res.nstuck, 0);
        for (size_t i = 0; i < w.njobs; i++) {
            const cr__sim_jobres *jr = &res.jobs[i];
            const cr__sim_job *j = &w.jobs[i];
            double bound = (double)jr->preemptions * (double)sw / 1e9 * j->gpu_count;
            if (jr->lost_gpu_s > bound + 1e-6) {
                fail_msg("seed %llu job %zu: lost %.3f GPU-s > %u switches x %d GPUs x 45 s",
                         (unsigned long long)seed, i, jr->lost_gpu_s, jr->preemptions,
                         j->gpu_count);
            }
            if (!j->preemptible) {
                assert_int_equal(jr->preemptions, 0);
            }
            assert_true(jr->finish_ns >= j->submit_ns);
            double ran_s = (double)(jr->finish_ns - jr->first_start_ns) / 1e9;
            assert_true(ran_s + 1e-3 >= jr->alone_s);
            if (j->type_req == 2) {
                assert_int_equal(jr->type, 2);
            }
            moved += jr->preemptions;
        }
        cr__sim_result_fini(&res);
        cr__sim_workload_fini(&w);
    }
    assert_true(moved > 0); /* the property was exercised */
}

/* The same input gives the same run, bit for bit. */
static void test_deterministic(void **state)
{
    (void)state;
    cr__sim_workload w;
    make_workload(&w, 99, 200);
    cr__sim_result a, b;
    run_rounds(&w, 10 * CR_NS_PER_SEC, false, &a);
    run_rounds(&w, 10 * CR_NS_PER_SEC, false, &b);
    assert_int_equal(a.njobs, b.njobs);
    assert_int_equal(a.t_end_ns, b.t_end_ns);
    assert_int_equal(a.cycles, b.cycles);
    for (size_t i = 0; i < a.njobs; i++) {
        assert_int_equal(a.jobs[i].finish_ns, b.jobs[i].finish_ns);
        assert_int_equal(a.jobs[i].first_start_ns, b.jobs[i].first_start_ns);
        assert_int_equal(a.jobs[i].preemptions, b.jobs[i].preemptions);
        assert_int_equal(a.jobs[i].type, b.jobs[i].type);
        assert_true(a.jobs[i].gpu_s == b.jobs[i].gpu_s);
    }
    assert_int_equal(a.nsamples, b.nsamples);
    assert_memory_equal(a.samples, b.samples, a.nsamples * sizeof *a.samples);
    cr__sim_result_fini(&a);
    cr__sim_result_fini(&b);
    cr__sim_workload_fini(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lp_scale_factor),    cmocka_unit_test(test_lp_equal_split),
        cmocka_unit_test(test_lp_hetero_spread),   cmocka_unit_test(test_lp_classes),
        cmocka_unit_test(test_migration_exact),    cmocka_unit_test(test_migration_cost_bound),
        cmocka_unit_test(test_deterministic),      cmocka_unit_test(test_order_shortest_area),
        cmocka_unit_test(test_fill_shortest_area),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
