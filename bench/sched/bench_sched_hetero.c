/*
 * bench_sched_hetero.c - a quick check of the HETERO policy against its
 * heterogeneity-agnostic counterpart (FIFO) in a Gavel-like setting: 36
 * V100 + 36 P100 + 36 K80 (data/clusters/gavel-108.cluster's shape),
 * Poisson arrivals, jobs of 1/2/4/8 GPUs whose speed-up over a K80 is
 * drawn per job (V100 1-4x, P100 between K80 and V100), work drawn
 * log-uniformly between 0.2 and 50 K80-hours. Reports average JCT of jobs
 * 400-800 per policy and the ratio. The real evaluation, on Gavel's own
 * throughput table and traces, is `corral sim --compare` (src/sim).
 *
 *   build/bench/sched/bench_sched_hetero [jobs_per_hour...]
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cr_alloc.h"
#include "cr_rng.h"
#include "cr_sched.h"

#define SEC  1000000000LL
#define NJOB 1000

typedef struct sjob {
    double tput[3];
    double work_s; /* K80-seconds */
    int64_t submit, end;
    uint32_t gpus;
    bool done;
} sjob;

static double run(cr_sched_policy pol, bool lp, double rate_per_h, uint64_t seed)
{
    cr_sched_config cfg;
    cr_sched_config_default(&cfg, pol);
    cfg.hetero_lp = lp;
    cr_sched *s = NULL;
    cr_sched_new(&cfg, &s);
    const char *cl = "gpu-type v100\ngpu-type p100\ngpu-type k80\n"
                     "node v[0-8] gpus=4xv100\nnode p[0-8] gpus=4xp100\nnode k[0-8] gpus=4xk80\n";
    char err[128];
    cr_sched_load_cluster(s, cl, strlen(cl), err, sizeof(err));
    int tenant;
    cr_sched_tenant(s, "all", &tenant);
    cr_rng r;
    cr_rng_seed(&r, seed);
    sjob *jobs = cr_calloc(NJOB + 1, sizeof(*jobs));
    int64_t t = 0;
    for (int i = 1; i <= NJOB; i++) {
        t += (int64_t)(cr_rng_exp(&r, 3600.0 / rate_per_h) * SEC);
        sjob *j = &jobs[i];
        j->submit = t;
        static const uint32_t g[] = {1, 1, 1, 1, 1, 2, 2, 4, 8};
        j->gpus = g[cr_rng_below(&r, 9)];
        double v = 1.0 + 3.0 * cr_rng_uniform(&r);
        j->tput[0] = v;
        j->tput[1] = 1.0 + (v - 1.0) * (0.3 + 0.4 * cr_rng_uniform(&r));
        j->tput[2] = 1.0;
        j->work_s = 3600.0 * exp(log(0.2) + (log(50.0) - log(0.2)) * cr_rng_uniform(&r));
        j->end = INT64_MAX;
    }
    int next = 1, done = 0;
    int64_t now = 0;
    while (done < NJOB) {
        /* next event: arrival or earliest end */
        int64_t te = INT64_MAX;
        int which = -1;
        for (int i = 1; i <= NJOB; i++) {
            if (!jobs[i].done && jobs[i].end < te) {
                te = jobs[i].end;
                which = i;
            }
        }
        if (next <= NJOB && jobs[next].submit <= te) {
            now = jobs[next].submit;
            sjob *j = &jobs[next];
            cr_sched_job_spec sp = {.id = (uint64_t)next,
                                    .tenant = tenant,
                                    .gpu_count = j->gpus,
                                    .gpu_type = CR_SCHED_TYPE_ANY,
                                    .tput = j->tput,
                                    .tput_count = 3,
                                    .time_limit_ns = (int64_t)(j->work_s * SEC),
                                    .submit_ns = now};
            cr_sched_job_add(s, &sp, now);
            next++;
        } else if (which > 0) {
            now = te;
            jobs[which].done = true;
            cr_sched_job_remove(s, (uint64_t)which, now);
            done++;
        } else {
            break;
        }
        const cr_sched_decision *d;
        int n = cr_sched_cycle(s, now, &r, &d);
        for (int i = 0; i < n; i++) {
            if (d[i].action == CR_SCHED_START) {
                sjob *j = &jobs[d[i].job];
                j->end = now + (int64_t)(j->work_s / j->tput[d[i].gpu_type] * SEC);
            }
        }
    }
    double sum = 0;
    int cnt = 0;
    for (int i = 400; i <= 800; i++) {
        sum += (double)(jobs[i].end - jobs[i].submit) / 3600e9;
        cnt++;
    }
    free(jobs);
    cr_sched_free(s);
    return sum / cnt;
}

int main(int argc, char **argv)
{
    double rates[8] = {6, 8, 10, 12, 14};
    int nr = 5;
    if (argc > 1) {
        nr = 0;
        for (int i = 1; i < argc && nr < 8; i++) {
            rates[nr++] = atof(argv[i]);
        }
    }
    printf("bench_sched_hetero: 36 V100 + 36 P100 + 36 K80, %d jobs, avg JCT (h) of jobs "
           "400-800, seeds 0-2\n",
           NJOB);
    for (int i = 0; i < nr; i++) {
        double f = 0, h = 0, l = 0;
        for (uint64_t seed = 0; seed < 3; seed++) {
            f += run(CR_SCHED_FIFO, false, rates[i], seed) / 3;
            h += run(CR_SCHED_HETERO, false, rates[i], seed) / 3;
            l += run(CR_SCHED_HETERO, true, rates[i], seed) / 3;
        }
        printf("  %5.1f jobs/h: fifo %7.2f h | hetero greedy %7.2f h (%.2fx) | hetero LP %7.2f h "
               "(%.2fx)\n",
               rates[i], f, h, f / h, l, f / l);
    }
    return 0;
}
