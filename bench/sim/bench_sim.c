/*
 * bench_sim.c - how fast the simulator replays a large workload, and how its
 * memory grows.
 *
 * Default: 100,000 generated jobs (Gavel's Philly mix, 1-8 GPUs, Poisson
 * arrivals) on 10,000 nodes of 8 GPUs (80,000 GPUs: 20k V100, 30k P100, 30k
 * K80 in racks of 32 nodes): a cycle at every event instant, fifo at 2,000
 * and 4,000 jobs/h and hetero at 4,000 jobs/h; then fifo and hetero at 4,000
 * jobs/h, and both at 20,000 jobs/h (a queue of thousands for hours), with
 * cycles batched every 30 s. Prints host seconds, events per second, cycles and the
 * peak resident memory; then peak memory at 25k, 50k and 100k jobs, each in its own process, to
 * show memory growing linearly with jobs.
 *
 * Then the saturated replay of issue 18, every policy: 100,000 jobs at
 * 20,000 jobs/h with a cycle at every event, each policy in its own process
 * so its peak RSS is its own (target: under 10 s each); `bench_sim
 * saturated` runs only that.
 *
 * `sim-rounds` as a policy runs corral sim's own rounds engine
 * (sim_rounds.c, what `corral sim --policy rounds` runs) instead of the
 * cr_sched policy `rounds`.
 *
 * usage: bench_sim [jobs] [policy,...] [jobs_per_hour] [cycle_interval_s] [max_examined]
 *        bench_sim saturated
 */
#include "sim_int.h"

#include "cr_error.h"
#include "cr_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

/* CPU seconds of this process: the wall clock is shared with other work. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint32_t max_examined; /* argv[5]: cr_sched_config.max_examined (0 = all) */

static int one(size_t njobs, double rate, int64_t interval_ns, const char *policy, bool quiet)
{
    char err[512];
    cr__sim_workload w;
    cr__sim_workload_init(&w);
    cr__sim_gen g = {
        .njobs = njobs, .jobs_per_hour = rate, .seed = 1, .multi_gpu = true, .ntenants = 8};
    if (cr__sim_generate(&g, &w) != 0) {
        return 1;
    }
    cr__sim_cluster c;
    memset(&c, 0, sizeof c);
    cr__sim_cluster_parse_gpus(&c, "v100:20000,p100:30000,k80:30000", err, sizeof err);
    c.gpus_per_node = 8;
    c.nodes_per_rack = 32;
    char types[CR_SIM_MAX_TYPES][CR_SIM_NAME_MAX];
    int nt = 0;
    if (cr__sim_cluster_types(&c, types, &nt, err, sizeof err) != 0 ||
        cr__sim_workload_resolve(&w, (const char(*)[CR_SIM_NAME_MAX])types, nt, NULL, NULL, err,
                                 sizeof err) != 0) {
        fprintf(stderr, "bench_sim: %s\n", err);
        return 1;
    }
    /* Gavel-like speed-ups: V100 3x, P100 2x, K80 1x (seconds on K80). */
    for (size_t i = 0; i < w.njobs; i++) {
        w.jobs[i].rate[0] = 3.0;
        w.jobs[i].rate[1] = 2.0;
        w.jobs[i].rate[2] = 1.0;
        w.jobs[i].work *= 3.0;
    }
    cr__sim_opts o;
    memset(&o, 0, sizeof o);
    cr_sched_policy pol;
    bool sim_rounds = strcmp(policy, "sim-rounds") == 0; /* corral sim's own rounds engine */
    if (sim_rounds) {
        pol = CR_SCHED_ROUNDS;
    } else if (cr_sched_policy_parse(policy, &pol) != 0) {
        fprintf(stderr, "bench_sim: unknown policy %s\n", policy);
        return 1;
    }
    o.policy = pol;
    o.backfill = o.preemption = o.lp = -1;
    o.estimates = true;
    o.interval_ns = interval_ns;
    o.max_examined = max_examined;
    o.mttr_ns = CR_NS_PER_H;
    o.idle_frac = 0.2;
    for (int t = 0; t < nt; t++) {
        o.power_w[t] = cr__sim_default_power_w(types[t]);
    }
    cr__sim_result r;
    int64_t t0 = cr_mono_ns();
    double cpu0 = cpu_s();
    int rc = sim_rounds ? cr__sim_run_rounds(&o, &c, &w, &r, err, sizeof err)
                        : cr__sim_run(&o, &c, &w, &r, err, sizeof err);
    double secs = (double)(cr_mono_ns() - t0) / 1e9;
    double cpu = cpu_s() - cpu0;
    if (rc != 0) {
        fprintf(stderr, "bench_sim: %s\n", err);
        return 1;
    }
    cr__sim_summary s;
    cr__sim_summarize(&r, &w, NULL, &s);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    if (!quiet) {
        printf("sim %-8s %7zu jobs at %.0f/h, cycle interval %llds, on 10000 nodes / 80000 GPUs: "
               "%.2f s wall (%.2f s CPU), %llu "
               "events (%.0f/s), %llu cycles, %zu finished, util %.1f%%, avg JCT %.2f h, "
               "avg queue %.2f h, peak RSS %ld MiB%s\n",
               policy, njobs, rate, (long long)(interval_ns / CR_NS_PER_SEC), secs, cpu,
               (unsigned long long)r.events, (double)r.events / secs, (unsigned long long)r.cycles,
               s.finished, 100 * s.util, s.jct_avg / 3600, s.queue_avg / 3600, ru.ru_maxrss / 1024,
               max_examined ? " (max_examined set)" : "");
    }
    cr__sim_result_fini(&r);
    cr__sim_workload_fini(&w);
    return 0;
}

/* Every policy on the saturated replay, each in a child process. */
static int saturated(void)
{
    for (int p = 0; p < CR_SCHED_POLICY_COUNT; p++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            int rc = one(100000, 20000, 0, cr_sched_policy_name((cr_sched_policy)p), false);
            fflush(stdout); /* (_exit does not) */
            _exit(rc);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "saturated") == 0) {
        return saturated();
    }
    if (argc > 1) {
        size_t njobs = (size_t)strtoull(argv[1], NULL, 10);
        char policies[256];
        snprintf(policies, sizeof policies, "%s", argc > 2 ? argv[2] : "fifo,hetero");
        double rate = argc > 3 ? strtod(argv[3], NULL) : 4000;
        int64_t interval_ns = (argc > 4 ? strtoll(argv[4], NULL, 10) : 0) * CR_NS_PER_SEC;
        max_examined = argc > 5 ? (uint32_t)strtoul(argv[5], NULL, 10) : 0;
        char *save = NULL;
        for (char *p = strtok_r(policies, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
            if (one(njobs, rate, interval_ns, p, false) != 0) {
                return 1;
            }
        }
        return 0;
    }
    /* Memory growth first (before this process has a big heap for the
     * children to inherit): each size in a child process, its peak RSS. */
    size_t sizes[] = {25000, 50000, 100000};
    for (size_t k = 0; k < 3; k++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            _exit(one(sizes[k], 2000, 0, "fifo", true));
        }
        int st = 0;
        struct rusage ru;
        if (pid < 0 || wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            return 1;
        }
        printf("memory: %6zu jobs, 80000 GPUs: peak RSS %ld MiB\n", sizes[k], ru.ru_maxrss / 1024);
    }
    if (saturated() != 0) {
        return 1;
    }
    /* A cycle at every event instant (light load), then a loaded cluster
     * with cycles batched every 30 s as a controller would run them. */
    if (one(100000, 2000, 0, "fifo", false) != 0 || one(100000, 4000, 0, "fifo", false) != 0 ||
        one(100000, 4000, 0, "hetero", false) != 0 ||
        one(100000, 4000, 30 * CR_NS_PER_SEC, "fifo", false) != 0 ||
        one(100000, 20000, 30 * CR_NS_PER_SEC, "fifo", false) != 0 ||
        one(100000, 20000, 30 * CR_NS_PER_SEC, "hetero", false) != 0 ||
        one(100000, 4000, 30 * CR_NS_PER_SEC, "hetero", false) != 0) {
        return 1;
    }
    return 0;
}
