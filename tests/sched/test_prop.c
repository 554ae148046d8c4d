/*
 * test_prop.c - property tests: random clusters and workloads under every
 * policy. After every event the invariants must hold (cr_sched_check), every
 * decision must agree with the jobs' states, and a second run with the same
 * seed must produce the very same decisions (bit-for-bit reproducibility).
 * The queue order the scheduler keeps between cycles (sched_queue.c) is
 * compared at every cycle with a full sort of the pending jobs by key.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_rng.h"
#include "cr_sched.h"
#include "sched_int.h" /* verify_order */

#define SEC 1000000000LL

static int failures;
static uint64_t n_start, n_preempt, n_frac, n_repart, n_reclaim;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
            return 0;                                                                              \
        }                                                                                          \
    } while (0)

static uint64_t hmix(uint64_t h, uint64_t x)
{
    h ^= x + UINT64_C(0x9E3779B97F4A7C15) + (h << 6) + (h >> 2);
    return h;
}

static void build_cluster(cr_sched *s, cr_rng *r)
{
    int ntypes = 1 + (int)cr_rng_below(r, 4);
    static const char *names[] = {"H100", "A100", "L40S", "A30"};
    for (int t = 0; t < ntypes; t++) {
        int id;
        cr_sched_gpu_type(s, names[t], &id);
        cr_sched_gpu_type_set_mem(s, id,
                                  (uint64_t)(24 + 24 * (int)cr_rng_below(r, 3)) * 1000000000);
        if (t == 0 || t == 1) {
            cr_sched_gpu_type_set_mig(s, id, 7, 8);
            /* profiles of known names for fixed (and dynamic) layouts */
            cr_sched_mig_profile_add(s, id, "p1", 1, 1, 0x7f);
            cr_sched_mig_profile_add(s, id, "p4", 3, 4, 0x11);
        } else if (t == 3) {
            cr_sched_gpu_type_set_mig(s, id, 4, 4);
        }
    }
    int nracks = 1 + (int)cr_rng_below(r, 4);
    int nnodes = 2 + (int)cr_rng_below(r, 20);
    for (int n = 0; n < nnodes; n++) {
        char name[32], rack[32];
        snprintf(name, sizeof(name), "n%d", n);
        snprintf(rack, sizeof(rack), "r%d", (int)cr_rng_below(r, (uint64_t)nracks));
        cr_sched_gpu_spec g[16];
        int ng = 1 + (int)cr_rng_below(r, 8);
        int type = (int)cr_rng_below(r, (uint64_t)ntypes);
        int dom = 1 + (int)cr_rng_below(r, 8);
        for (int i = 0; i < ng; i++) {
            int ty = cr_rng_below(r, 10) == 0 ? (int)cr_rng_below(r, (uint64_t)ntypes) : type;
            g[i] = (cr_sched_gpu_spec){.type = ty,
                                       .nvlink = (uint16_t)(i / dom),
                                       .bad = cr_rng_below(r, 20) == 0,
                                       .mig = (ty == 0 || ty == 1 || ty == 3) &&
                                              cr_rng_below(r, 6) == 0};
            g[i].share = !g[i].mig && cr_rng_below(r, 3) == 0;
        }
        cr_sched_node_spec ns = {.name = name, .rack = rack, .gpu_count = (size_t)ng, .gpus = g};
        uint32_t idx;
        if (cr_sched_node_add(s, &ns, &idx) < 0) {
            abort();
        }
        for (int i = 0; i < ng; i++) {
            if (g[i].mig && g[i].type <= 1 && cr_rng_below(r, 2)) {
                static const char *const two[] = {"p4", "p4"}, *const three[] = {"p4", "p1", "p1"};
                bool a = cr_rng_below(r, 2);
                cr_sched_gpu_set_mig_layout(s, idx, (uint32_t)i, a ? two : three, a ? 2 : 3, NULL);
                cr_sched_gpu_set_mig_dynamic(s, idx, (uint32_t)i, cr_rng_below(r, 2));
            }
        }
    }
    int nten = 1 + (int)cr_rng_below(r, 3);
    for (int t = 0; t < nten; t++) {
        char name[16];
        int id;
        snprintf(name, sizeof(name), "t%d", t);
        cr_sched_tenant(s, name, &id);
        if (cr_rng_below(r, 2)) {
            cr_sched_tenant_set_quota(s, id, (int)cr_rng_below(r, (uint64_t)ntypes),
                                      (int64_t)cr_rng_below(r, 16));
        }
        cr_sched_tenant_set_weight(s, id, 1.0 + (double)cr_rng_below(r, 3));
    }
}

static void random_job(cr_sched *s, cr_rng *r, uint64_t id, int64_t now, cr_sched_job_spec *j,
                       double *tput)
{
    static const char *migs[] = {"1g.10gb", "3g.40gb", "1g.6gb", "2g.12gb", "7g.80gb", "p1", "p4"};
    memset(j, 0, sizeof(*j));
    j->id = id;
    j->tenant = (int)cr_rng_below(r, (uint64_t)cr_sched_tenant_count(s));
    j->priority = (int32_t)cr_rng_below(r, 3);
    j->kind = (cr_sched_job_kind)cr_rng_below(r, CR_JOB_KIND_COUNT);
    static const uint32_t sizes[] = {1, 1, 1, 2, 2, 4, 8, 16};
    j->gpu_count = sizes[cr_rng_below(r, 8)];
    j->gpu_type = cr_rng_below(r, 3) == 0
                      ? CR_SCHED_TYPE_ANY
                      : (int)cr_rng_below(r, (uint64_t)cr_sched_gpu_type_count(s));
    if (j->gpu_type == CR_SCHED_TYPE_ANY && cr_rng_below(r, 2)) {
        for (int t = 0; t < CR_SCHED_MAX_TYPES; t++) {
            tput[t] = (double)cr_rng_below(r, 4);
        }
        j->tput = tput;
        j->tput_count = CR_SCHED_MAX_TYPES;
    }
    if (cr_rng_below(r, 8) == 0) {
        j->mig_profile = migs[cr_rng_below(r, 7)];
        j->gpu_count = 1 + (uint32_t)cr_rng_below(r, 2);
    } else if (j->gpu_count >= 2 && cr_rng_below(r, 3) == 0) {
        j->node_count = j->gpu_count >= 8 ? j->gpu_count / 4 : 2;
    }
    j->time_limit_ns = cr_rng_below(r, 4) ? (int64_t)(60 + cr_rng_below(r, 7200)) * SEC : 0;
    j->preemptible = cr_rng_below(r, 2);
    j->checkpoint_interval_ns = cr_rng_below(r, 2) ? (int64_t)(60 + cr_rng_below(r, 600)) * SEC : 0;
    j->submit_ns = now;
    j->mem_bytes = cr_rng_below(r, 5) == 0 ? (uint64_t)cr_rng_below(r, 60) * 1000000000 : 0;
    if (cr_rng_below(r, 3) == 0) { /* a fractional task */
        j->mig_profile = NULL;
        j->gpu_count = 1;
        j->node_count = 0;
        uint64_t w = cr_rng_below(r, 4);
        j->gpu_milli = w == 3 ? 0 : (uint16_t)(1 + cr_rng_below(r, 999));
        j->gpu_mem_bytes = w >= 2 ? (1 + cr_rng_below(r, 40)) * 1000000000ull : 0;
    }
}

/* One run; returns the hash of all decisions (0 on a failure). */
static uint64_t run(uint64_t seed, cr_sched_policy pol, int events)
{
    cr_rng r;
    cr_rng_seed(&r, seed);
    cr_sched_config cfg;
    cr_sched_config_default(&cfg, pol);
    cfg.backfill = cr_rng_below(&r, 4) != 0;
    cfg.preemption = cr_rng_below(&r, 4) != 0;
    cfg.borrowing = cr_rng_below(&r, 3) != 0;
    cfg.hetero_lp = cr_rng_below(&r, 2);
    cfg.las_threshold_gpu_ns[0] = 600 * SEC;
    cfg.share_policy = (cr_sched_share_policy)cr_rng_below(&r, CR_SHARE_POLICY_COUNT);
    cfg.las_starve_ns = seed % 2 ? 1800 * SEC : 0; /* (no draw: same workloads) */
    cfg.mig_reclaim = seed % 3 == 0;
    cr_sched *s = NULL;
    if (cr_sched_new(&cfg, &s) < 0) {
        abort();
    }
    s->verify_order = true;
    build_cluster(s, &r);
    uint64_t h = 1, next_id = 1;
    /* what each job asked for, to judge work conservation under LAS */
    cr_sched_job_spec *specs = calloc((size_t)events + 2, sizeof(*specs));
    int64_t now = 0;
    char err[256];
    for (int e = 0; e < events; e++) {
        now += (int64_t)cr_rng_below(&r, 120) * SEC;
        uint64_t k = cr_rng_below(&r, 100);
        if (k < 40) {
            cr_sched_job_spec j;
            double tput[CR_SCHED_MAX_TYPES];
            random_job(s, &r, next_id++, now, &j, tput);
            int rc = cr_sched_job_add(s, &j, now);
            specs[j.id] = j;
            specs[j.id].tput = NULL;
            h = hmix(h, (uint64_t)(rc + 2000));
        } else if (k < 70) {
            cr_rng cr;
            cr_rng_seed(&cr, seed + (uint64_t)e);
            const cr_sched_decision *d;
            int n = cr_sched_cycle(s, now, &cr, &d);
            EXPECT(n >= 0, "cycle failed");
            for (int i = 0; i < n; i++) {
                cr_sched_job_info info;
                EXPECT(cr_sched_job_info_get(s, d[i].job, &info) == 0, "decision for unknown job");
                h = hmix(h, d[i].job);
                h = hmix(h, (uint64_t)d[i].action);
                n_start += d[i].action == CR_SCHED_START;
                n_preempt += d[i].action == CR_SCHED_PREEMPT;
                if (d[i].action == CR_SCHED_START) {
                    EXPECT(info.state == CR_JOB_RUNNING, "started job %" PRIu64 " not running",
                           d[i].job);
                    EXPECT(d[i].slot_count == info.slot_count, "slot count");
                    for (size_t q = 0; q < d[i].slot_count; q++) {
                        h = hmix(h, (uint64_t)d[i].slots[q].node << 16 | d[i].slots[q].gpu);
                        h = hmix(h, (uint64_t)(d[i].slots[q].mig_start + 1));
                        h = hmix(h, d[i].slots[q].milli);
                    }
                    n_repart += d[i].mig_repartitioned;
                    /* (a whole-GPU start on a GPU taken out of MIG mode) */
                    n_reclaim += d[i].mig_repartitioned && d[i].slots[0].mig_start < 0;
                    if (d[i].slot_count == 1 && d[i].slots[0].milli) {
                        cr_sched_gpu_info gi;
                        EXPECT(cr_sched_gpu_info_get(s, d[i].slots[0].node, d[i].slots[0].gpu,
                                                     &gi) == 0 &&
                                   gi.share && !gi.mig && !gi.job && gi.share_milli <= 1000 &&
                                   gi.share_mem <= gi.mem_bytes,
                               "fractional job %" PRIu64 " on a GPU it may not share", d[i].job);
                        n_frac++;
                    }
                } else {
                    EXPECT(d[i].reason && d[i].reason[0], "preempt without reason");
                }
            }
            /* LAS never blocks: a plain pending job (one type, any spread,
             * no MIG, no memory floor, no quota in the way) that fits the
             * free count of its type must have started */
            int npre = 0;
            for (int i = 0; i < n; i++) {
                npre += d[i].action == CR_SCHED_PREEMPT;
            }
            /* (preemptions free GPUs after earlier jobs were considered) */
            if (pol == CR_SCHED_LAS && cfg.borrowing && npre == 0) {
                for (uint64_t id = 1; id < next_id; id++) {
                    cr_sched_job_info info;
                    const cr_sched_job_spec *sp = &specs[id];
                    if (cr_sched_job_info_get(s, id, &info) < 0 || info.state != CR_JOB_PENDING ||
                        sp->gpu_type < 0 || sp->node_count || sp->mig_profile || sp->mem_bytes ||
                        sp->gpu_milli || sp->gpu_mem_bytes) {
                        continue;
                    }
                    uint32_t fr = 0;
                    cr_sched_capacity(s, sp->gpu_type, NULL, &fr);
                    char buf[CR_SCHED_REASON_MAX];
                    cr_sched_job_reason(s, id, buf, sizeof(buf));
                    /* (a job preempted in this cycle waits for the next) */
                    EXPECT(fr < sp->gpu_count || strncmp(buf, "preempted", 9) == 0,
                           "seed %" PRIu64 ": LAS job %" PRIu64
                           " (%u GPUs) pending with %u free: %s",
                           seed, id, sp->gpu_count, fr, buf);
                }
            }
            /* every pending job has a reason; with a default run time no
             * reservation is for an unknown time (issue 28) */
            for (uint64_t id = 1; id < next_id; id++) {
                char buf[CR_SCHED_REASON_MAX];
                int rc = cr_sched_job_reason(s, id, buf, sizeof(buf));
                EXPECT(rc == CR_ENOENT || rc == CR_EINVAL || (rc > 0 && buf[0]), "no reason");
                EXPECT(rc <= 0 || !strstr(buf, "unknown time"),
                       "seed %" PRIu64 ": job %" PRIu64 " blocked for an unknown time: %s", seed,
                       id, buf);
            }
        } else if (k < 85 && next_id > 1) {
            uint64_t id = 1 + cr_rng_below(&r, next_id - 1);
            h = hmix(h, (uint64_t)(cr_sched_job_remove(s, id, now) + 2000));
        } else if (k < 88 && next_id > 1) {
            uint64_t id = 1 + cr_rng_below(&r, next_id - 1);
            h = hmix(h, (uint64_t)(cr_sched_job_requeue(s, id, now) + 2000));
        } else if (k < 93) {
            uint32_t n = (uint32_t)cr_rng_below(&r, cr_sched_node_count(s));
            uint64_t *ids = NULL;
            size_t nids = 0;
            cr_sched_node_state st = (cr_sched_node_state)cr_rng_below(&r, 3);
            EXPECT(cr_sched_node_set_state(s, n, st, "prop", now, &ids, &nids) == 0, "node state");
            for (size_t i = 0; i < nids; i++) {
                cr_sched_job_info info;
                EXPECT(cr_sched_job_info_get(s, ids[i], &info) == 0 && info.state == CR_JOB_PENDING,
                       "requeued job not pending");
                h = hmix(h, ids[i]);
            }
            free(ids);
        } else if (k < 97) {
            uint32_t n = (uint32_t)cr_rng_below(&r, cr_sched_node_count(s));
            cr_sched_node_info ni;
            cr_sched_node_info_get(s, n, &ni);
            if (ni.gpu_count) {
                uint32_t g = (uint32_t)cr_rng_below(&r, ni.gpu_count);
                cr_sched_gpu_set_health(s, n, g, cr_rng_below(&r, 2), "prop", now, NULL, NULL);
            }
        } else {
            int t = (int)cr_rng_below(&r, (uint64_t)cr_sched_tenant_count(s));
            int ty = (int)cr_rng_below(&r, (uint64_t)cr_sched_gpu_type_count(s));
            cr_sched_tenant_set_quota(s, t, ty, (int64_t)cr_rng_below(&r, 20) - 1);
        }
        if (cr_sched_check(s, err, sizeof(err)) < 0) {
            fprintf(stderr, "seed %" PRIu64 " policy %s event %d: %s\n", seed,
                    cr_sched_policy_name(pol), e, err);
            failures++;
            cr_sched_free(s);
            free(specs);
            return 0;
        }
    }
    cr_sched_free(s);
    free(specs);
    return h;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * Wait-or-start on generated clusters: a fast type F, full of one-GPU jobs
 * with random limits, and a slow type S with room. One "auto" job of k GPUs
 * (runtime estimate L on S, the slowest; x = its speed on S relative to F)
 * must start on S exactly when that finishes no later than waiting for the
 * k-th earliest end on F and running there: now + L <= end_k + L * x.
 * Returns 0 on a failure.
 */
static int wait_or_start(uint64_t seed, cr_sched_policy pol)
{
    cr_rng r;
    cr_rng_seed(&r, seed);
    cr_sched_config cfg;
    cr_sched_config_default(&cfg, pol);
    cr_sched *s = NULL;
    if (cr_sched_new(&cfg, &s) < 0) {
        abort();
    }
    int f, sl, ten;
    cr_sched_tenant(s, "t", &ten);
    cr_sched_gpu_type(s, "fast", &f);
    cr_sched_gpu_type(s, "slow", &sl);
    uint32_t nf = 0, ns = 0;
    int nodes = 1 + (int)cr_rng_below(&r, 4);
    for (int n = 0; n < nodes; n++) {
        cr_sched_gpu_spec g[16];
        size_t cnt = 1 + cr_rng_below(&r, 8);
        int ty = n % 2 ? sl : f;
        for (size_t i = 0; i < cnt; i++) {
            g[i] = (cr_sched_gpu_spec){.type = ty};
        }
        char name[16];
        snprintf(name, sizeof(name), "n%d", n);
        cr_sched_node_spec sp = {.name = name, .gpu_count = cnt, .gpus = g};
        cr_sched_node_add(s, &sp, NULL);
        *(ty == f ? &nf : &ns) += (uint32_t)cnt;
    }
    if (ns == 0) {
        cr_sched_gpu_spec g[8];
        for (size_t i = 0; i < 8; i++) {
            g[i] = (cr_sched_gpu_spec){.type = sl};
        }
        cr_sched_node_spec sp = {.name = "s", .gpu_count = 8, .gpus = g};
        cr_sched_node_add(s, &sp, NULL);
        ns = 8;
    }
    /* fill F with one-GPU jobs ending at random times */
    int64_t *ends = calloc(nf, sizeof(*ends));
    for (uint32_t i = 0; i < nf; i++) {
        int64_t lim = (int64_t)(60 + cr_rng_below(&r, 20000)) * SEC;
        cr_sched_job_spec j = {.id = 1 + i, .gpu_count = 1, .gpu_type = f, .time_limit_ns = lim};
        cr_sched_job_add(s, &j, 0);
        ends[i] = lim;
    }
    const cr_sched_decision *d;
    cr_rng cr;
    cr_rng_seed(&cr, seed);
    int n = cr_sched_cycle(s, 0, &cr, &d);
    EXPECT(n == (int)nf, "seed %" PRIu64 ": %d of %u fillers started", seed, n, nf);
    qsort(ends, nf, sizeof(*ends), cmp_i64);
    int64_t now = (int64_t)cr_rng_below(&r, 60) * SEC;
    uint32_t k = 1 + (uint32_t)cr_rng_below(&r, nf < ns ? nf : ns);
    double x = 0.05 + 0.9 * (double)cr_rng_below(&r, 1000) / 1000.0;
    int64_t lim = (int64_t)(60 + cr_rng_below(&r, 30000)) * SEC;
    double tput[CR_SCHED_MAX_TYPES] = {0};
    tput[f] = 1.0;
    tput[sl] = x;
    uint64_t id = 1000;
    cr_sched_job_spec j = {.id = id,
                           .gpu_count = k,
                           .gpu_type = CR_SCHED_TYPE_ANY,
                           .tput = tput,
                           .tput_count = CR_SCHED_MAX_TYPES,
                           .time_limit_ns = lim,
                           .submit_ns = now};
    EXPECT(cr_sched_job_add(s, &j, now) == 0, "add");
    n = cr_sched_cycle(s, now, &cr, &d);
    double run_f = (double)lim * x, wait_finish = (double)ends[k - 1] + run_f;
    bool want_start = (double)(now + lim) <= wait_finish + 1.0;
    /* (within a nanosecond of a tie either answer is right) */
    bool tie = fabs((double)(now + lim) - wait_finish) < 2.0;
    cr_sched_job_info info;
    EXPECT(cr_sched_job_info_get(s, id, &info) == 0, "info");
    bool started = info.state == CR_JOB_RUNNING;
    char buf[CR_SCHED_REASON_MAX] = "";
    cr_sched_job_reason(s, id, buf, sizeof(buf));
    EXPECT(tie || started == want_start,
           "seed %" PRIu64 " %s: k=%u x=%.3f L=%" PRId64 "s now=%" PRId64 "s F frees at %" PRId64
           "s: %s, want %s (%s)",
           seed, cr_sched_policy_name(pol), k, x, (int64_t)(lim / SEC), (int64_t)(now / SEC),
           (int64_t)(ends[k - 1] / SEC), started ? "started" : "waited",
           want_start ? "start" : "wait", buf);
    EXPECT(started || strstr(buf, "finishes sooner"), "reason: %s", buf);
    free(ends);
    cr_sched_free(s);
    return 1;
}

int main(int argc, char **argv)
{
    int seeds = argc > 1 ? atoi(argv[1]) : 30;
    int events = argc > 2 ? atoi(argv[2]) : 400;
    for (int p = 0; p < CR_SCHED_POLICY_COUNT; p++) {
        for (int sd = 0; sd < seeds && failures < 5; sd++) {
            uint64_t a = run((uint64_t)sd, (cr_sched_policy)p, events);
            uint64_t b = run((uint64_t)sd, (cr_sched_policy)p, events);
            if (a != b) {
                fprintf(stderr, "seed %d policy %s: runs differ\n", sd,
                        cr_sched_policy_name((cr_sched_policy)p));
                failures++;
            }
        }
    }
    int wos = 0;
    static const cr_sched_policy aware[] = {CR_SCHED_PRIORITY, CR_SCHED_LAS, CR_SCHED_HETERO};
    for (int p = 0; p < 3; p++) {
        for (int sd = 0; sd < 200 && failures < 5; sd++) {
            wos += wait_or_start((uint64_t)sd, aware[p]);
        }
    }
    printf("wait-or-start: %d generated clusters agree\n", wos);
    printf("%d policies x %d seeds x %d events: %" PRIu64 " starts (%" PRIu64
           " fractional, %" PRIu64 " MIG repartitions, %" PRIu64
           " of them out of MIG mode), %" PRIu64 " preemptions, %d failures\n",
           CR_SCHED_POLICY_COUNT, seeds, events, n_start, n_frac, n_repart, n_reclaim, n_preempt,
           failures);
    if (n_start == 0 || n_frac == 0 || n_repart == 0) {
        fprintf(stderr, "nothing (fractional) ever started\n");
        failures++;
    }
    return failures ? 1 : 0;
}
