/*
 * test_sim.c - unit tests of the simulator's parts: the event heap, the
 * trace readers and their errors, the throughput table, the generator, and
 * whole runs checked for invariants and determinism.
 */
#include "sim_int.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"
#include "cr_time.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void test_heap_order_and_ties(void **state)
{
    (void)state;
    cr__sim_heap h;
    cr__sim_heap_init(&h);
    /* Many events at few distinct times: pops must be by time, then push order. */
    for (int i = 0; i < 1000; i++) {
        cr__sim_heap_push(&h, (i * 7919) % 13, CR_SIM_EV_ARRIVE, i, 0);
    }
    cr__sim_ev prev = {.t_ns = -1}, e;
    int n = 0;
    while (cr__sim_heap_pop(&h, &e)) {
        assert_true(e.t_ns >= prev.t_ns);
        if (e.t_ns == prev.t_ns) {
            assert_true(e.a > prev.a); /* pushed in increasing a */
        }
        prev = e;
        n++;
    }
    assert_int_equal(n, 1000);
    assert_null(cr__sim_heap_peek(&h));
    cr__sim_heap_fini(&h);
}

static const char tput_json[] =
    "{\"v100\": {\"('A', 1)\": {\"null\": 10.0}, \"('A', 2)\": {\"null\": 18.0},"
    "            \"('B', 1)\": {\"null\": 4.0, \"('A', 1)\": [1, 2]}},"
    " \"k80\":  {\"('A', 1)\": {\"null\": 2.0}, \"('B', 1)\": {\"null\": 0.0}}}";

static void test_tput(void **state)
{
    (void)state;
    cr__sim_tput t;
    char err[256];
    assert_int_equal(cr__sim_tput_parse(tput_json, strlen(tput_json), &t, err, sizeof err), 0);
    assert_int_equal(t.ntypes, 2);
    int v = cr__sim_tput_type(&t, "V100"), k = cr__sim_tput_type(&t, "k80");
    assert_true(v >= 0 && k >= 0 && v != k);
    const cr__sim_tput_row *r = cr__sim_tput_find(&t, "A", 2);
    assert_non_null(r);
    assert_true(r->steps_per_s[v] == 18.0 && r->steps_per_s[k] == 0.0);
    assert_null(cr__sim_tput_find(&t, "C", 1));
    cr__sim_tput_fini(&t);

    const char *bad[] = {"[1]", "{\"v100\": {\"A\": {\"null\": 1}}}",
                         "{\"v100\": {\"('A', 1)\": {\"x\": 1}}}",
                         "{\"v100\": {\"('A', 1)\":", "{\"v100\": {\"('A', 0)\": {\"null\": 1}}}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(cr__sim_tput_parse(bad[i], strlen(bad[i]), &t, err, sizeof err),
                         CR_EPARSE);
        assert_true(strlen(err) > 0);
    }
}

static void test_native_reader(void **state)
{
    (void)state;
    cr__sim_workload w;
    cr__sim_workload_init(&w);
    char err[256];
    const char *ok = "# comment\n"
                     "submit=0 gpus=4 duration=2h tenant=alice type=V100 priority=2 id=j1\n"
                     "\n"
                     "submit=90s gpus=1 model=A steps=100 preemptible=no checkpoint=10m\n";
    assert_int_equal(cr__sim_read_native("x", ok, strlen(ok), &w, err, sizeof err), 0);
    assert_int_equal(w.njobs, 2);
    assert_string_equal(w.jobs[0].name, "j1");
    assert_int_equal(w.jobs[0].gpu_count, 4);
    assert_true(w.jobs[0].work == 7200.0);
    assert_string_equal(w.tenants[w.jobs[0].tenant], "alice");
    assert_int_equal(w.jobs[1].submit_ns, 90 * CR_NS_PER_SEC);
    assert_false(w.jobs[1].preemptible);
    assert_int_equal(w.jobs[1].ckpt_ns, 10 * CR_NS_PER_MIN);
    cr__sim_workload_fini(&w);

    static const struct {
        const char *text, *expect;
    } cases[] = {
        {"submit=0 gpus=1 duration=1h\nsubmit=0 gpus=0 duration=1h\n", "f.txt:2: field 'gpus'"},
        {"submit=0 gpus=1\n", "f.txt:1: field 'duration': missing"},
        {"gpus=1 duration=1h\n", "f.txt:1: field 'submit': missing"},
        {"submit=0 gpus=1 duration=1h color=red\n", "f.txt:1: field 'color': unknown key"},
        {"submit=0 gpus=1 duration=1h\n\nsubmit=zz gpus=1 duration=1h\n",
         "f.txt:3: field 'submit'"},
        {"submit=0 gpus=1 steps=5\n", "f.txt:1: field 'model'"},
        {"submit=0 gpus=1 duration=1h oops\n", "f.txt:1: 'oops': expected KEY=VALUE"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr__sim_workload_init(&w);
        err[0] = '\0';
        assert_int_equal(
            cr__sim_read_native("f.txt", cases[i].text, strlen(cases[i].text), &w, err, sizeof err),
            CR_EPARSE);
        if (strstr(err, cases[i].expect) == NULL) {
            fail_msg("case %zu: got '%s', want '%s'", i, err, cases[i].expect);
        }
        cr__sim_workload_fini(&w);
    }
}

static void test_gavel_reader(void **state)
{
    (void)state;
    cr__sim_workload w;
    cr__sim_workload_init(&w);
    char err[256];
    const char *ten = "A\tcmd\tdir\t-n\t1\t500\t2\t1\t-1\t30.5\n"
                      "B\tcmd\tdir\t-n\t1\t100\t1\t1\t-1\t0\n";
    const char *seven = "A\tcmd\t-n\t1\t700\t12.0\t1\n";
    assert_int_equal(cr__sim_read_gavel("g", ten, strlen(ten), &w, err, sizeof err), 0);
    assert_int_equal(cr__sim_read_gavel("g", seven, strlen(seven), &w, err, sizeof err), 0);
    assert_int_equal(w.njobs, 3);
    assert_int_equal(w.jobs[0].gpu_count, 2);
    assert_true(w.jobs[0].work == 500);
    assert_int_equal(w.jobs[0].submit_ns, 30500000000LL);
    assert_true(w.jobs[2].work == 700);
    assert_int_equal(w.jobs[2].submit_ns, 12 * CR_NS_PER_SEC);
    cr__sim_workload_sort(&w);
    assert_string_equal(w.jobs[0].model, "B"); /* t=0 first; stable after that */
    assert_string_equal(w.jobs[1].model, "A");
    assert_int_equal(w.jobs[1].submit_ns, 12 * CR_NS_PER_SEC);

    /* Rates from the table; a model the table lacks is an error naming it. */
    cr__sim_tput t;
    assert_int_equal(cr__sim_tput_parse(tput_json, strlen(tput_json), &t, err, sizeof err), 0);
    char types[2][CR_SIM_NAME_MAX] = {"v100", "k80"};
    assert_int_equal(cr__sim_workload_resolve(&w, (const char(*)[CR_SIM_NAME_MAX])types, 2, &t,
                                              NULL, err, sizeof err),
                     0);
    assert_true(w.jobs[1].rate[0] == 10.0 && w.jobs[1].rate[1] == 2.0); /* A x1 */
    assert_true(w.jobs[0].rate[0] == 4.0 && w.jobs[0].rate[1] == 0.0);  /* B: not on k80 */
    assert_true(w.jobs[2].rate[0] == 18.0);                             /* A x2 */
    cr__sim_workload_fini(&w);

    const char *unknown = "C\tcmd\t-n\t1\t700\t12.0\t1\n";
    cr__sim_workload_init(&w);
    assert_int_equal(cr__sim_read_gavel("g", unknown, strlen(unknown), &w, err, sizeof err), 0);
    assert_int_equal(cr__sim_workload_resolve(&w, (const char(*)[CR_SIM_NAME_MAX])types, 2, &t,
                                              NULL, err, sizeof err),
                     CR_EINVAL);
    assert_non_null(strstr(err, "model 'C'"));
    cr__sim_workload_fini(&w);
    cr__sim_tput_fini(&t);

    const char *bad = "A\tcmd\tdir\t-n\t1\t500\t2\t1\t-1\t30.5\nA\tcmd\tdir\t-n\t1\t500\tx\t1\t-"
                      "1\t0\n";
    cr__sim_workload_init(&w);
    assert_int_equal(cr__sim_read_gavel("g.trace", bad, strlen(bad), &w, err, sizeof err),
                     CR_EPARSE);
    assert_non_null(strstr(err, "g.trace:2: field 'scale_factor'"));
    cr__sim_workload_fini(&w);
    const char *short_line = "A\tcmd\t1\n";
    cr__sim_workload_init(&w);
    assert_int_equal(
        cr__sim_read_gavel("g.trace", short_line, strlen(short_line), &w, err, sizeof err),
        CR_EPARSE);
    assert_non_null(strstr(err, "g.trace:1: expected 10 (or 7)"));
    cr__sim_workload_fini(&w);
}

static void test_tiresias_reader(void **state)
{
    (void)state;
    cr__sim_workload w;
    cr__sim_workload_init(&w);
    char err[256];
    const char *ok = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                     "0,1,0,606,vgg19,164,30\n1,8,30,133,vgg11,147,23\n";
    assert_int_equal(cr__sim_read_tiresias("t.csv", ok, strlen(ok), &w, err, sizeof err), 0);
    assert_int_equal(w.njobs, 2);
    assert_int_equal(w.jobs[1].gpu_count, 8);
    assert_true(w.jobs[1].work == 147);
    assert_int_equal(w.jobs[1].submit_ns, 30 * CR_NS_PER_SEC);
    cr__sim_workload_fini(&w);

    static const struct {
        const char *text, *expect;
    } cases[] = {
        {"job_id,num_gpu,submit_time\n", "t.csv:1: header: missing column 'duration'"},
        {"job_id,num_gpu,submit_time,duration\n1,2,3\n", "t.csv:2: expected 4 fields, found 3"},
        {"job_id,num_gpu,submit_time,duration\n1,2,3,4\n2,2,x,4\n", "t.csv:3: field 'submit_time'"},
        {"job_id,num_gpu,submit_time,duration\n1,0,3,4\n", "t.csv:2: field 'num_gpu'"},
        {"", "t.csv: empty file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr__sim_workload_init(&w);
        err[0] = '\0';
        assert_int_equal(cr__sim_read_tiresias("t.csv", cases[i].text, strlen(cases[i].text), &w,
                                               err, sizeof err),
                         CR_EPARSE);
        if (strstr(err, cases[i].expect) == NULL) {
            fail_msg("case %zu: got '%s', want '%s'", i, err, cases[i].expect);
        }
        cr__sim_workload_fini(&w);
    }
}

static void test_generator(void **state)
{
    (void)state;
    cr__sim_workload a, b;
    cr__sim_workload_init(&a);
    cr__sim_workload_init(&b);
    cr__sim_gen g = {
        .njobs = 2000, .jobs_per_hour = 10, .seed = 7, .multi_gpu = true, .ntenants = 3};
    assert_int_equal(cr__sim_generate(&g, &a), 0);
    assert_int_equal(cr__sim_generate(&g, &b), 0);
    assert_int_equal(a.njobs, 2000);
    assert_memory_equal(a.jobs, b.jobs, a.njobs * sizeof *a.jobs);
    /* Poisson at 10/h: the last of 2000 arrives near 200 h. */
    double last_h = (double)a.jobs[a.njobs - 1].submit_ns / 3.6e12;
    assert_true(last_h > 170 && last_h < 230);
    size_t single = 0, eight = 0;
    for (size_t i = 0; i < a.njobs; i++) {
        single += a.jobs[i].gpu_count == 1;
        eight += a.jobs[i].gpu_count == 8;
        assert_true(a.jobs[i].work >= 60 * 31.6 && a.jobs[i].work <= 60 * 10000.0);
        if (i) {
            assert_true(a.jobs[i].submit_ns >= a.jobs[i - 1].submit_ns);
        }
    }
    assert_true(single > 1250 && single < 1550); /* 70% */
    assert_true(eight > 50 && eight < 160);      /* 5% */
    assert_int_equal(a.ntenants, 4);             /* "default" plus t0..t2 */
    cr__sim_workload_fini(&a);
    cr__sim_workload_fini(&b);
}

/* A whole run on a small heterogeneous cluster, with the invariant check on
 * after every event: every job finishes, none is lost, reruns are identical. */
static void run_once(int policy, uint64_t seed, int64_t mtbf_ns, cr__sim_result *res,
                     cr__sim_workload *w)
{
    char err[256];
    cr__sim_workload_init(w);
    cr__sim_gen g = {
        .njobs = 150, .jobs_per_hour = 8, .seed = seed, .multi_gpu = true, .ntenants = 2};
    assert_int_equal(cr__sim_generate(&g, w), 0);
    cr__sim_cluster c;
    memset(&c, 0, sizeof c);
    assert_int_equal(cr__sim_cluster_parse_gpus(&c, "fast:8,slow:8", err, sizeof err), 0);
    c.gpus_per_node = 4;
    char types[CR_SIM_MAX_TYPES][CR_SIM_NAME_MAX];
    int nt = 0;
    assert_int_equal(cr__sim_cluster_types(&c, types, &nt, err, sizeof err), 0);
    assert_int_equal(nt, 2);
    assert_int_equal(cr__sim_workload_resolve(w, (const char(*)[CR_SIM_NAME_MAX])types, nt, NULL,
                                              NULL, err, sizeof err),
                     0);
    /* Make 'slow' three times slower for every job. */
    for (size_t i = 0; i < w->njobs; i++) {
        w->jobs[i].rate[1] = w->jobs[i].rate[0] / 3;
    }
    cr__sim_opts o;
    memset(&o, 0, sizeof o);
    o.policy = policy;
    o.seed = seed;
    o.check = true;
    o.backfill = o.preemption = o.lp = -1;
    o.estimates = true;
    o.mtbf_ns = mtbf_ns;
    o.mttr_ns = CR_NS_PER_H;
    o.idle_frac = 0.2;
    o.power_w[0] = o.power_w[1] = 300;
    assert_int_equal(cr__sim_run(&o, &c, w, res, err, sizeof err), 0);
}

static void test_runs_all_policies(void **state)
{
    (void)state;
    for (int p = 0; p < CR_SCHED_POLICY_COUNT; p++) {
        for (int f = 0; f < 2; f++) {
            cr__sim_result r1, r2;
            cr__sim_workload w1, w2;
            int64_t mtbf = f ? 100 * CR_NS_PER_H : 0;
            run_once(p, 3, mtbf, &r1, &w1);
            run_once(p, 3, mtbf, &r2, &w2);
            if (r1.check_errors) {
                fail_msg("policy %s: %s", r1.policy, r1.check_msg);
            }
            size_t finished = 0;
            for (size_t i = 0; i < r1.njobs; i++) {
                finished += r1.jobs[i].finish_ns >= 0;
                assert_true(r1.jobs[i].finish_ns < 0 ||
                            r1.jobs[i].finish_ns >= r1.jobs[i].first_start_ns);
            }
            assert_int_equal(finished, w1.njobs);
            /* Books balance: GPU-time held by jobs is the busy GPU-time; work
             * lost per preemption or failure is at most one checkpoint
             * interval's worth on each of the job's GPUs. */
            double held = 0, busy = 0;
            for (size_t i = 0; i < r1.njobs; i++) {
                const cr__sim_jobres *jr = &r1.jobs[i];
                held += jr->gpu_s * 1e9;
                double bound = (double)(jr->preemptions + jr->failures) *
                               ((double)w1.jobs[i].ckpt_ns / 1e9) * w1.jobs[i].gpu_count;
                assert_true(jr->lost_gpu_s <= bound + 1e-6);
            }
            for (int t = 0; t < r1.ntypes; t++) {
                busy += r1.busy_gpu_ns[t];
            }
            assert_true(held > 0 && busy / held > 1 - 1e-9 && busy / held < 1 + 1e-9);
            if (f) {
                assert_true(r1.node_failures > 0);
            }
            /* Determinism: same inputs, same outcome for every job. */
            assert_memory_equal(r1.jobs, r2.jobs, r1.njobs * sizeof *r1.jobs);
            assert_int_equal(r1.nsamples, r2.nsamples);
            char *j1 = cr__sim_report_json(&r1, 1, &w1, NULL);
            char *j2 = cr__sim_report_json(&r2, 1, &w2, NULL);
            assert_string_equal(j1, j2);
            free(j1);
            free(j2);
            cr__sim_result_fini(&r1);
            cr__sim_result_fini(&r2);
            cr__sim_workload_fini(&w1);
            cr__sim_workload_fini(&w2);
        }
    }
}

/* Issue 31, corral sim --cloud: a cloud pool in virtual time. One static
 * node of 4 v100 and two jobs of 4 GPUs for 1 h at t=0: static alone, the
 * second waits 1 h; with a pool of one 4-GPU node (pending 10 s, boot 90
 * s, idle 300 s) it boots at 10 s, starts at 100 s, and the node is given
 * back at 3700 + 300 s: 4 x 3990 GPU-seconds bought, one boot. */
static void cloud_run(bool pool, cr__sim_result *res, cr__sim_workload *w)
{
    char err[256];
    const char *trace = "submit=0 gpus=4 duration=1h\nsubmit=0 gpus=4 duration=1h\n";
    cr__sim_workload_init(w);
    assert_int_equal(cr__sim_read_native("t", trace, strlen(trace), w, err, sizeof err), 0);
    cr__sim_workload_sort(w);
    cr__sim_cluster c;
    memset(&c, 0, sizeof c);
    assert_int_equal(cr__sim_cluster_parse_gpus(&c, "v100:4", err, sizeof err), 0);
    c.gpus_per_node = 4;
    if (pool) {
        snprintf(c.cloud_name, sizeof c.cloud_name, "v100");
        c.cloud_nodes = 1;
        c.cloud_gpn = 4;
    }
    char types[CR_SIM_MAX_TYPES][CR_SIM_NAME_MAX];
    int nt = 0;
    assert_int_equal(cr__sim_cluster_types(&c, types, &nt, err, sizeof err), 0);
    assert_int_equal(nt, 1);
    assert_int_equal(cr__sim_workload_resolve(w, (const char(*)[CR_SIM_NAME_MAX])types, nt, NULL,
                                              NULL, err, sizeof err),
                     0);
    cr__sim_opts o;
    memset(&o, 0, sizeof o);
    o.policy = CR_SCHED_FIFO;
    o.check = true;
    o.backfill = o.preemption = o.lp = o.wait_faster = -1;
    o.estimates = true;
    o.idle_frac = 0.2;
    o.power_w[0] = 300;
    o.cloud = pool;
    o.cloud_boot_ns = 90 * CR_NS_PER_SEC;
    o.cloud_idle_ns = 300 * CR_NS_PER_SEC;
    o.cloud_pending_ns = 10 * CR_NS_PER_SEC;
    assert_int_equal(cr__sim_run(&o, &c, w, res, err, sizeof err), 0);
    assert_int_equal(res->check_errors, 0);
}

static void test_cloud_pool(void **state)
{
    (void)state;
    cr__sim_result r0, r1;
    cr__sim_workload w0, w1;
    cloud_run(false, &r0, &w0);
    cloud_run(true, &r1, &w1);
    assert_int_equal(r0.jobs[1].first_start_ns, CR_NS_PER_H);
    assert_int_equal(r0.cloud_boots, 0);
    assert_true(r0.cloud_gpu_ns == 0);
    assert_int_equal(r1.jobs[1].first_start_ns, 100 * CR_NS_PER_SEC);
    assert_int_equal(r1.jobs[1].finish_ns, 3700 * CR_NS_PER_SEC);
    assert_int_equal(r1.cloud_boots, 1);
    assert_true(fabs(r1.cloud_gpu_ns - 4.0 * 3990 * 1e9) < 1e6);
    assert_int_equal(r1.type_gpus[0], 4); /* the pool's GPUs are not the cluster's */
    cr__sim_result_fini(&r0);
    cr__sim_result_fini(&r1);
    cr__sim_workload_fini(&w0);
    cr__sim_workload_fini(&w1);
}

/* Issue 26, corral sim --learn: training jobs whose true rates differ from
 * the model by up to 40% per class and GPU type report their tokens/s;
 * with learning the advisor's error falls to within 10% and stays there,
 * without it never does; one truth per (class, type); truth= per job. */
static void learn_run(const char *trace, bool learn, cr__sim_result *res, cr__sim_workload *w)
{
    char err[256];
    cr__sim_workload_init(w);
    assert_int_equal(cr__sim_read_native("t", trace, strlen(trace), w, err, sizeof err), 0);
    cr__sim_workload_sort(w);
    cr__sim_cluster c;
    memset(&c, 0, sizeof c);
    assert_int_equal(cr__sim_cluster_parse_gpus(&c, "h100:16,l40s:16", err, sizeof err), 0);
    c.gpus_per_node = 8;
    char types[CR_SIM_MAX_TYPES][CR_SIM_NAME_MAX];
    int nt = 0;
    assert_int_equal(cr__sim_cluster_types(&c, types, &nt, err, sizeof err), 0);
    cr_catalog *cat = NULL;
    assert_int_equal(cr_catalog_load(NULL, &cat, err, sizeof err), 0);
    assert_int_equal(cr__sim_workload_resolve(w, (const char(*)[CR_SIM_NAME_MAX])types, nt, NULL,
                                              cat, err, sizeof err),
                     0);
    cr_catalog_free(cat);
    cr__sim_workload_perturb(w, (const char(*)[CR_SIM_NAME_MAX])types, nt, 0.4, 7);
    cr__sim_opts o;
    memset(&o, 0, sizeof o);
    o.policy = CR_SCHED_HETERO;
    o.seed = 7;
    o.check = true;
    o.backfill = o.preemption = o.lp = o.wait_faster = -1;
    o.estimates = true;
    o.idle_frac = 0.2;
    o.power_w[0] = o.power_w[1] = 300;
    o.learn = learn;
    o.metric_noise = 0.03;
    assert_int_equal(cr__sim_run(&o, &c, w, res, err, sizeof err), 0);
    assert_int_equal(res->check_errors, 0);
}

static void test_learn(void **state)
{
    (void)state;
    cr_buf b;
    cr_buf_init(&b);
    static const char *const cls[] = {
        "gpus=1 kind=finetune params=8b tokens=20m method=lora",
        "gpus=2 kind=finetune params=13b tokens=20m method=lora",
        "gpus=8 kind=pretrain params=1b tokens=500m",
    };
    for (int i = 0; i < 120; i++) {
        cr_buf_printf(&b, "submit=%dm %s\n", i * 40, cls[i % 3]);
    }
    cr__sim_result r0, r1;
    cr__sim_workload w0, w1;
    learn_run(cr_buf_str(&b), false, &r0, &w0);
    learn_run(cr_buf_str(&b), true, &r1, &w1);
    /* The truth: model x [0.6, 1.4], one factor per class and type. */
    for (size_t i = 0; i < w0.njobs; i++) {
        const cr__sim_job *j = &w0.jobs[i], *k = &w0.jobs[i % 3];
        assert_true(j->sig[0] != '\0');
        for (int t = 0; t < 2; t++) {
            if (j->model_rate[t] > 0) {
                double f = j->rate[t] / j->model_rate[t];
                assert_true(f >= 0.6 - 1e-9 && f <= 1.4 + 1e-9);
                assert_true(fabs(f - k->rate[t] / k->model_rate[t]) < 1e-12);
            }
        }
    }
    assert_string_equal(r1.policy, "hetero+learn");
    cr__sim_summary s0, s1;
    cr__sim_summarize(&r0, &w0, NULL, &s0);
    cr__sim_summarize(&r1, &w1, NULL, &s1);
    assert_int_equal(s0.learnable, 120);
    assert_int_equal(s1.learnable, 120);
    assert_true(s0.err_first > 0.10); /* the perturbation shows */
    assert_true(s1.err_last <= 0.10);
    assert_true(s1.learned_at > 0 && s1.learned_at <= 60);
    assert_true(s0.learned_at == 0 || s0.err_last > s1.err_last);
    /* no observations yet: the first job is believed as without learning */
    assert_true(fabs(r0.jobs[0].pred_err - r1.jobs[0].pred_err) < 1e-12);
    char *json = cr__sim_report_json(&r1, 1, &w1, NULL);
    assert_non_null(strstr(json, "\"advisor\""));
    free(json);
    cr__sim_result_fini(&r0);
    cr__sim_result_fini(&r1);
    cr__sim_workload_fini(&w0);
    cr__sim_workload_fini(&w1);

    /* truth= per job: that factor on every type; a bad value names the field. */
    cr__sim_workload w;
    cr__sim_workload_init(&w);
    char err[256];
    const char *t1 = "submit=0 gpus=1 kind=finetune params=8b tokens=20m method=lora truth=1.5\n";
    assert_int_equal(cr__sim_read_native("t", t1, strlen(t1), &w, err, sizeof err), 0);
    assert_true(fabs(w.jobs[0].truth - 1.5) < 1e-12);
    cr__sim_workload_fini(&w);
    cr__sim_workload_init(&w);
    const char *t2 = "submit=0 gpus=1 kind=finetune params=8b tokens=20m truth=0\n";
    assert_int_not_equal(cr__sim_read_native("t", t2, strlen(t2), &w, err, sizeof err), 0);
    assert_non_null(strstr(err, "field 'truth'"));
    cr__sim_workload_fini(&w);
    cr_buf_fini(&b);
}

static void test_summary_math(void **state)
{
    (void)state;
    /* Three jobs with known times: JCTs 10, 20, 60 s. */
    cr__sim_workload w;
    cr__sim_workload_init(&w);
    for (int i = 0; i < 3; i++) {
        cr__sim_job *j = cr__sim_workload_add(&w);
        j->gpu_count = 1;
        j->work = 10;
        j->submit_ns = i * CR_NS_PER_SEC;
    }
    cr__sim_result r;
    memset(&r, 0, sizeof r);
    r.njobs = 3;
    r.jobs = cr_calloc(3, sizeof *r.jobs);
    int64_t fin[3] = {10, 21, 62}, st[3] = {0, 11, 52};
    for (int i = 0; i < 3; i++) {
        r.jobs[i].first_start_ns = st[i] * CR_NS_PER_SEC;
        r.jobs[i].finish_ns = fin[i] * CR_NS_PER_SEC;
        r.jobs[i].alone_s = 10;
        r.jobs[i].contention = 1;
    }
    cr__sim_summary s;
    cr__sim_summarize(&r, &w, NULL, &s);
    assert_int_equal(s.finished, 3);
    assert_true(s.jct_avg == 30.0);
    assert_true(s.jct_p50 == 20.0);
    assert_true(s.jct_p99 == 60.0);
    assert_true(s.makespan == 62.0);
    assert_true(s.queue_avg == (0.0 + 10 + 50) / 3);
    assert_true(s.rho_max == 6.0);
    cr__sim_report_opts ro = {.window_lo = 1, .window_hi = 2};
    cr__sim_summarize(&r, &w, &ro, &s);
    assert_int_equal(s.measured, 1);
    assert_true(s.jct_avg == 20.0);
    free(r.jobs);
    cr__sim_workload_fini(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heap_order_and_ties),
        cmocka_unit_test(test_tput),
        cmocka_unit_test(test_native_reader),
        cmocka_unit_test(test_gavel_reader),
        cmocka_unit_test(test_tiresias_reader),
        cmocka_unit_test(test_generator),
        cmocka_unit_test(test_runs_all_policies),
        cmocka_unit_test(test_summary_math),
        cmocka_unit_test(test_learn),
        cmocka_unit_test(test_cloud_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
