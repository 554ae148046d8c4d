/*
 * test_victim.c - the LAS victim index (sched_victim.c) against brute
 * force, on generated clusters and workloads.
 *
 * 1. Before every cycle, for every type and every queue that may preempt,
 *    the victims the index gives, in its order, must be exactly those of a
 *    scan of every running job of the type (preemptible, not started in
 *    the last cycle, past min_runtime_before_preempt_ns, of a worse queue
 *    by the service attained up to now), sorted by cr__sched_vitem_cmp.
 * 2. The same workload replayed by the reference scheduler (s->ref_scan:
 *    victims from the full scan, the whole queue walked) must give the very
 *    same decisions (job, action, GPUs) at every cycle.
 * Workloads mix checkpoint intervals (few distinct ones, so most jobs are
 * in the index, plus random ones that overflow into the scanned rest),
 * jobs without one, fractional tasks, several LAS queues, quotas, removals,
 * requeues and node failures.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_rng.h"
#include "cr_sched.h"
#include "sched_int.h"

#define SEC 1000000000LL

static int failures;
static uint64_t n_preempt, n_checked, n_victims;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

static uint64_t hmix(uint64_t h, uint64_t x)
{
    return h ^ (x + UINT64_C(0x9E3779B97F4A7C15) + (h << 6) + (h >> 2));
}

static void build(cr_sched *s, cr_rng *r)
{
    static const char *names[] = {"V100", "P100", "K80"};
    int ntypes = 1 + (int)cr_rng_below(r, 3);
    for (int t = 0; t < ntypes; t++) {
        int id;
        cr_sched_gpu_type(s, names[t], &id);
        cr_sched_gpu_type_set_mem(s, id, 32000000000ull);
    }
    int nnodes = 4 + (int)cr_rng_below(r, 12);
    for (int n = 0; n < nnodes; n++) {
        char name[32];
        snprintf(name, sizeof(name), "n%d", n);
        cr_sched_gpu_spec g[8];
        int ng = 1 + (int)cr_rng_below(r, 8);
        int type = (int)cr_rng_below(r, (uint64_t)ntypes);
        for (int i = 0; i < ng; i++) {
            g[i] = (cr_sched_gpu_spec){.type = type, .share = cr_rng_below(r, 5) == 0};
        }
        cr_sched_node_spec ns = {.name = name, .rack = "r0", .gpu_count = (size_t)ng, .gpus = g};
        uint32_t idx;
        if (cr_sched_node_add(s, &ns, &idx) < 0) {
            abort();
        }
    }
    int nten = 1 + (int)cr_rng_below(r, 2);
    for (int t = 0; t < nten; t++) {
        char name[16];
        int id;
        snprintf(name, sizeof(name), "t%d", t);
        cr_sched_tenant(s, name, &id);
    }
}

static void random_job(cr_sched *s, cr_rng *r, uint64_t id, int64_t now, cr_sched_job_spec *j)
{
    static const int64_t cks[] = {0, 300 * SEC, 900 * SEC, 1800 * SEC};
    memset(j, 0, sizeof(*j));
    j->id = id;
    j->tenant = (int)cr_rng_below(r, (uint64_t)cr_sched_tenant_count(s));
    static const uint32_t sizes[] = {1, 1, 1, 2, 2, 4, 8};
    j->gpu_count = sizes[cr_rng_below(r, 7)];
    j->gpu_type = cr_rng_below(r, 2) ? CR_SCHED_TYPE_ANY
                                     : (int)cr_rng_below(r, (uint64_t)cr_sched_gpu_type_count(s));
    j->preemptible = cr_rng_below(r, 6) != 0;
    j->checkpoint_interval_ns = cr_rng_below(r, 8) == 0 ? (int64_t)(1 + cr_rng_below(r, 900)) * SEC
                                                        : cks[cr_rng_below(r, 4)];
    j->time_limit_ns = cr_rng_below(r, 2) ? (int64_t)(60 + cr_rng_below(r, 7200)) * SEC : 0;
    if (cr_rng_below(r, 4) == 0) {
        j->attained_gpu_ns = (int64_t)cr_rng_below(r, 4000) * SEC; /* resubmitted */
    }
    if (cr_rng_below(r, 8) == 0) {
        j->gpu_count = 1;
        j->gpu_milli = (uint16_t)(100 + cr_rng_below(r, 800));
    }
    j->submit_ns = now;
}

/* Property 1 for one type and queue; 1 if it holds. */
static int same_victims(cr_sched *s, int type, int jq, int64_t now)
{
    cr__vix_iter *it = NULL;
    cr__vitem *want = NULL;
    uint32_t nw = 0, cw = 0;
    int ok = 0;
    uint64_t gpus = 0, gpus_want = 0;
    for (uint32_t i = 0; i < s->ntrun[type]; i++) {
        job *r = s->trun[type][i];
        if (!r->spec.preemptible || r->start_cycle == s->stats.cycles ||
            now - r->start_ns < s->cfg.min_runtime_before_preempt_ns ||
            cr__sched_las_queue_of(s, cr__sched_job_attained(r, now)) <= jq) {
            continue;
        }
        int64_t ran = now - r->start_ns, ck = r->spec.checkpoint_interval_ns;
        CR_GROW(want, nw, cw);
        want[nw++] =
            (cr__vitem){ck > 0 ? ran % ck : ran, r->spec.priority, r->start_ns, r->spec.id, r};
        gpus_want += r->nslots;
    }
    /* a plain sort: the reference order */
    for (uint32_t a = 1; a < nw; a++) {
        for (uint32_t b = a; b > 0 && cr__sched_vitem_cmp(&want[b], &want[b - 1]) < 0; b--) {
            cr__vitem t = want[b];
            want[b] = want[b - 1];
            want[b - 1] = t;
        }
    }
    if (cr__sched_vix_begin(s, type, jq, now, &it, &gpus) != 0) {
        EXPECT(s->ntrun[type] == 0 && nw == 0, "no index for type %d with %u running", type,
               s->ntrun[type]);
        ok = 1;
        goto out;
    }
    EXPECT(gpus >= gpus_want, "GPU bound %" PRIu64 " below the victims' %" PRIu64, gpus, gpus_want);
    cr__vitem got;
    for (uint32_t k = 0; k < nw; k++) {
        EXPECT(cr__sched_vix_next(s, it, &got), "type %d queue %d: %u victims, want %u", type, jq,
               k, nw);
        EXPECT(got.j == want[k].j,
               "type %d queue %d victim %u: job %" PRIu64 " (lost %" PRId64 "), want %" PRIu64
               " (lost %" PRId64 ")",
               type, jq, k, got.id, got.lost, want[k].id, want[k].lost);
    }
    EXPECT(!cr__sched_vix_next(s, it, &got), "type %d queue %d: more than %u victims", type, jq,
           nw);
    n_checked++;
    n_victims += nw;
    ok = 1;
out:
    cr__sched_vix_end(it);
    free(want);
    return ok;
}

/* One run; the hash of every decision, 0 on a failure. */
static uint64_t run(uint64_t seed, bool ref, int events)
{
    cr_rng r;
    cr_rng_seed(&r, seed);
    cr_sched_config cfg;
    cr_sched_config_default(&cfg, CR_SCHED_LAS);
    cfg.las_queues = 2 + (int)cr_rng_below(&r, 3);
    for (int q = 0; q < cfg.las_queues - 1; q++) {
        cfg.las_threshold_gpu_ns[q] = (q ? cfg.las_threshold_gpu_ns[q - 1] : 0) +
                                      (int64_t)(300 + cr_rng_below(&r, 900)) * SEC;
    }
    cfg.min_runtime_before_preempt_ns =
        cr_rng_below(&r, 2) ? (int64_t)cr_rng_below(&r, 600) * SEC : 0;
    cfg.las_starve_ns = cr_rng_below(&r, 3) == 0 ? 3600 * SEC : 0;
    cr_sched *s = NULL;
    if (cr_sched_new(&cfg, &s) < 0) {
        abort();
    }
    s->ref_scan = ref;
    build(s, &r);
    uint64_t h = 1, next_id = 1;
    int64_t now = 0;
    for (int e = 0; e < events; e++) {
        now += (int64_t)cr_rng_below(&r, 300) * SEC;
        uint64_t k = cr_rng_below(&r, 100);
        if (k < 45) {
            cr_sched_job_spec j;
            random_job(s, &r, next_id++, now, &j);
            h = hmix(h, (uint64_t)(cr_sched_job_add(s, &j, now) + 2000));
        } else if (k < 85) {
            for (int t = 0; !ref && t < s->ntypes; t++) {
                for (int q = 0; q < cfg.las_queues - 1; q++) {
                    if (!same_victims(s, t, q, now)) {
                        fprintf(stderr, "seed %" PRIu64 " event %d\n", seed, e);
                        h = 0;
                        goto out;
                    }
                }
            }
            cr_rng cr;
            cr_rng_seed(&cr, seed + (uint64_t)e);
            const cr_sched_decision *d;
            int n = cr_sched_cycle(s, now, &cr, &d);
            for (int i = 0; i < n; i++) {
                h = hmix(h, d[i].job);
                h = hmix(h, (uint64_t)d[i].action);
                n_preempt += !ref && d[i].action == CR_SCHED_PREEMPT;
                for (size_t q = 0; q < d[i].slot_count; q++) {
                    h = hmix(h, (uint64_t)d[i].slots[q].node << 16 | d[i].slots[q].gpu);
                }
            }
        } else if (k < 93 && next_id > 1) {
            uint64_t id = 1 + cr_rng_below(&r, next_id - 1);
            h = hmix(h, (uint64_t)(cr_sched_job_remove(s, id, now) + 2000));
        } else if (k < 96 && next_id > 1) {
            uint64_t id = 1 + cr_rng_below(&r, next_id - 1);
            h = hmix(h, (uint64_t)(cr_sched_job_requeue(s, id, now) + 2000));
        } else if (k < 98) {
            uint32_t n = (uint32_t)cr_rng_below(&r, cr_sched_node_count(s));
            uint64_t *ids = NULL;
            size_t nids = 0;
            cr_sched_node_set_state(s, n, (cr_sched_node_state)cr_rng_below(&r, 2), "test", now,
                                    &ids, &nids);
            for (size_t i = 0; i < nids; i++) {
                h = hmix(h, ids[i]);
            }
            free(ids);
        } else {
            int t = (int)cr_rng_below(&r, (uint64_t)cr_sched_tenant_count(s));
            int ty = (int)cr_rng_below(&r, (uint64_t)cr_sched_gpu_type_count(s));
            cr_sched_tenant_set_quota(s, t, ty, (int64_t)cr_rng_below(&r, 20) - 1);
        }
        char err[256];
        if (cr_sched_check(s, err, sizeof(err)) < 0) {
            fprintf(stderr, "seed %" PRIu64 " event %d: %s\n", seed, e, err);
            failures++;
            h = 0;
            goto out;
        }
    }
out:
    cr_sched_free(s);
    return h;
}

int main(int argc, char **argv)
{
    int seeds = argc > 1 ? atoi(argv[1]) : 150;
    int events = argc > 2 ? atoi(argv[2]) : 500;
    for (int sd = 0; sd < seeds && failures < 5; sd++) {
        uint64_t a = run((uint64_t)sd, false, events);
        uint64_t b = run((uint64_t)sd, true, events);
        if (a == 0 || a != b) {
            fprintf(stderr, "seed %d: decisions differ from the reference scan\n", sd);
            failures++;
        }
    }
    printf("%d seeds x %d events: %" PRIu64 " preemptions, %" PRIu64 " victim lists (%" PRIu64
           " victims) equal to the full scan, %d failures\n",
           seeds, events, n_preempt, n_checked, n_victims, failures);
    if (n_preempt < 100 || n_victims < 1000) {
        fprintf(stderr, "too few preemptions or victims to judge\n");
        failures++;
    }
    return failures ? 1 : 0;
}
