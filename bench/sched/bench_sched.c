/*
 * bench_sched.c - one scheduler cycle with 10k pending jobs on a 10k-node,
 * 80k-GPU cluster: p50 and p99 per policy.
 *
 * Cluster: 10,000 nodes x 8 GPUs in racks of 32 nodes, four GPU types
 * (H100 SXM, A100, L40S, V100; 2,500 nodes each). Workload: jobs of
 * 1-64 GPUs (a tenth of them gangs of whole nodes, a third "auto" type with
 * a throughput vector), 4 tenants, 3 priority tiers. The cluster is first
 * filled until the queue holds 10,000 jobs; then each measured step
 * finishes 40 random running jobs, submits 40 new ones (the queue stays at
 * ~10k) and times one cr_sched_cycle(). Memory: peak RSS after the run.
 *
 * POLICY-nolimit (e.g. fifo-nolimit): a quarter of the jobs have no time
 * limit, so reservations assume the default run time for them (issue 28);
 * run beside POLICY for the comparison.
 *
 *   build/bench/sched/bench_sched [cycles] [policy|policy-nolimit...]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cr_alloc.h"
#include "cr_rng.h"
#include "cr_sched.h"

#define SEC 1000000000LL

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * SEC + ts.tv_nsec;
}

static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * SEC + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void build(cr_sched *s)
{
    static const char *types[] = {"H100 SXM", "A100", "L40S", "V100"};
    int id[4];
    for (int t = 0; t < 4; t++) {
        cr_sched_gpu_type(s, types[t], &id[t]);
        cr_sched_gpu_type_set_mem(s, id[t], 80000000000ull);
    }
    for (int n = 0; n < 10000; n++) {
        char name[32], rack[32];
        snprintf(name, sizeof(name), "n%05d", n);
        snprintf(rack, sizeof(rack), "r%03d", n / 32);
        cr_sched_gpu_spec g[8];
        for (int i = 0; i < 8; i++) {
            g[i] =
                (cr_sched_gpu_spec){.type = id[n / 2500], .nvlink = (uint16_t)(n % 3 ? 0 : i / 4)};
        }
        cr_sched_node_spec ns = {.name = name, .rack = rack, .gpu_count = 8, .gpus = g};
        cr_sched_node_add(s, &ns, NULL);
    }
    for (int t = 0; t < 4; t++) {
        char name[16];
        int tid;
        snprintf(name, sizeof(name), "tenant%d", t);
        cr_sched_tenant(s, name, &tid);
    }
}

static bool nolimit; /* a quarter of the jobs without a time limit */

static void submit(cr_sched *s, cr_rng *r, uint64_t id, int64_t now)
{
    static const uint32_t sizes[] = {1, 1, 1, 1, 2, 2, 4, 4, 8, 8, 16, 32, 64};
    double tput[CR_SCHED_MAX_TYPES] = {4.0, 3.0, 1.5, 1.0};
    cr_sched_job_spec j = {0};
    j.id = id;
    j.tenant = (int)cr_rng_below(r, 4);
    j.priority = (int32_t)cr_rng_below(r, 3);
    j.gpu_count = sizes[cr_rng_below(r, sizeof(sizes) / sizeof(sizes[0]))];
    j.gpu_type = cr_rng_below(r, 3) == 0 ? CR_SCHED_TYPE_ANY : (int)cr_rng_below(r, 4);
    if (j.gpu_type == CR_SCHED_TYPE_ANY) {
        tput[2] = 1.0 + cr_rng_uniform(r);
        j.tput = tput;
        j.tput_count = 4;
    }
    if (j.gpu_count >= 16 && cr_rng_below(r, 2)) {
        j.node_count = j.gpu_count / 8;
    }
    j.time_limit_ns = (int64_t)(600 + cr_rng_below(r, 86400)) * SEC;
    if (nolimit && cr_rng_below(r, 4) == 0) {
        j.time_limit_ns = 0;
    }
    j.preemptible = cr_rng_below(r, 2);
    j.checkpoint_interval_ns = 1800 * SEC;
    j.submit_ns = now;
    cr_sched_job_add(s, &j, now);
}

static void bench(cr_sched_policy pol, bool lp, int cycles)
{
    cr_sched_config cfg;
    cr_sched_config_default(&cfg, pol);
    cfg.hetero_lp = lp;
    cr_sched *s = NULL;
    cr_sched_new(&cfg, &s);
    build(s);
    cr_rng r;
    cr_rng_seed(&r, 42);
    uint64_t id = 1;
    int64_t now = 0;
    const cr_sched_decision *d;
    /* fill: submit until 10k are pending after a cycle */
    int64_t t_fill = mono_ns();
    while (cr_sched_job_count(s, CR_JOB_PENDING) < 10000) {
        for (int i = 0; i < 2000; i++) {
            submit(s, &r, id++, now);
        }
        now += SEC;
        cr_sched_cycle(s, now, &r, &d);
    }
    t_fill = mono_ns() - t_fill;
    uint64_t *running = cr_malloc(200000 * sizeof(uint64_t));
    int64_t *lat = cr_malloc((size_t)cycles * sizeof(int64_t));
    int64_t *cpu = cr_malloc((size_t)cycles * sizeof(int64_t));
    uint64_t started = 0;
    for (int c = 0; c < cycles; c++) {
        /* finish 40 random running jobs: sample ids until 40 running found */
        int done = 0;
        for (int tries = 0; done < 40 && tries < 100000; tries++) {
            uint64_t x = 1 + cr_rng_below(&r, id - 1);
            cr_sched_job_info info;
            if (cr_sched_job_info_get(s, x, &info) == 0 && info.state == CR_JOB_RUNNING) {
                cr_sched_job_remove(s, x, now);
                done++;
            }
        }
        for (int i = 0; i < 40; i++) {
            submit(s, &r, id++, now);
        }
        now += 10 * SEC;
        int64_t t0 = mono_ns(), c0 = cpu_ns();
        int n = cr_sched_cycle(s, now, &r, &d);
        lat[c] = mono_ns() - t0;
        cpu[c] = cpu_ns() - c0;
        for (int i = 0; i < n; i++) {
            started += d[i].action == CR_SCHED_START;
        }
    }
    qsort(lat, (size_t)cycles, sizeof(*lat), cmp_i64);
    qsort(cpu, (size_t)cycles, sizeof(*cpu), cmp_i64);
    uint32_t total = 0, freeg = 0;
    for (int t = 0; t < 4; t++) {
        uint32_t a, b;
        cr_sched_capacity(s, t, &a, &b);
        total += a;
        freeg += b;
    }
    printf("%-8s%-9s wall p50 %6.2f p99 %6.2f ms, cpu p50 %6.2f p99 %6.2f ms | pending %zu "
           "running %zu GPUs %u (free %u) | started %.1f/cycle | fill %.2f s\n",
           cr_sched_policy_name(pol),
           pol == CR_SCHED_HETERO ? (lp ? "-lp" : "-gr")
           : nolimit              ? "-nolimit"
                                  : "",
           (double)lat[cycles / 2] / 1e6, (double)lat[(cycles * 99) / 100] / 1e6,
           (double)cpu[cycles / 2] / 1e6, (double)cpu[(cycles * 99) / 100] / 1e6,
           cr_sched_job_count(s, CR_JOB_PENDING), cr_sched_job_count(s, CR_JOB_RUNNING), total,
           freeg, (double)started / cycles, (double)t_fill / 1e9);
    free(lat);
    free(cpu);
    free(running);
    cr_sched_free(s);
}

int main(int argc, char **argv)
{
    int cycles = argc > 1 ? atoi(argv[1]) : 200;
    if (cycles < 1) {
        cycles = 200;
    }
    printf("bench_sched: one cycle, ~10k pending jobs, 10k nodes / 80k GPUs, %d cycles\n", cycles);
    bool any = false;
    for (int i = 2; i < argc; i++) {
        cr_sched_policy p;
        char name[32];
        snprintf(name, sizeof(name), "%s", argv[i]);
        char *dash = strstr(name, "-nolimit");
        nolimit = dash != NULL;
        if (dash) {
            *dash = 0;
        }
        if (strcmp(name, "hetero-greedy") == 0) {
            bench(CR_SCHED_HETERO, false, cycles);
            any = true;
        } else if (cr_sched_policy_parse(name, &p) == 0) {
            bench(p, true, cycles);
            any = true;
        }
    }
    nolimit = false;
    if (!any) {
        bench(CR_SCHED_FIFO, false, cycles);
        bench(CR_SCHED_PRIORITY, false, cycles);
        bench(CR_SCHED_LAS, false, cycles);
        bench(CR_SCHED_HETERO, false, cycles);
        bench(CR_SCHED_HETERO, true, cycles);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("peak RSS %.1f MiB\n", (double)ru.ru_maxrss / 1024.0);
    return 0;
}
