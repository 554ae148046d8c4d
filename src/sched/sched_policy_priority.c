/*
 * sched_policy_priority.c - PRIORITY: tiers (higher first), then the
 * tenant's fair share (DRF over decayed usage / weight), then submit time;
 * higher tiers preempt preemptible lower ones. The lowest preemptible tier
 * running on each type (vprio) bounds the scans for victims.
 */
#include "sched_int.h"

static int64_t prio_key(const cr_sched *s, const job *j, int64_t now_ns)
{
    (void)s;
    (void)now_ns;
    return -(int64_t)j->spec.priority;
}

/* Each tenant's dominant share of its decayed usage across GPU types,
 * divided by its weight: the order of the tenants' classes this cycle. */
static void prio_shares(cr_sched *s, int64_t now_ns)
{
    (void)now_ns;
    if (s->ntree > 0) {
        cr__sched_tree_shares(s); /* Slurm's fair tree (sched_tree.c) */
        return;
    }
    for (int i = 0; i < s->ntenants; i++) {
        tenant_rec *t = &s->tenants[i];
        double dom = 0;
        for (int k = 0; k < s->ntypes; k++) {
            if (s->types[k].total > 0) {
                double sh = t->usage[k] / (double)s->types[k].total;
                if (sh > dom) {
                    dom = sh;
                }
            }
        }
        t->share = dom / t->weight;
    }
}

static int64_t prio_job_rank(const cr_sched *s, const job *j)
{
    (void)s;
    return -(int64_t)j->spec.priority;
}

static int64_t prio_victim_rank(const cr_sched *s, const job *r, int64_t now_ns)
{
    (void)s;
    (void)now_ns;
    return -(int64_t)r->spec.priority;
}

static bool prio_may_outrank(const cr_sched *s, const job *j, int type)
{
    /* no running job of the type is ranked below it */
    return s->vprio_any[type] && j->spec.priority > s->vprio_lb[type];
}

static bool prio_may_outrank_any(const cr_sched *s, const job *j)
{
    (void)j;
    /* ranked preemption needs a queued job above some running preemptible
     * one: vprio_lb bounds those */
    int32_t top = cr__sched_queue_max_priority(s);
    for (int t = 0; t < s->ntypes; t++) {
        if (s->vprio_any[t] && top > s->vprio_lb[t]) {
            return true;
        }
    }
    return false;
}

static void prio_victim_bound(cr_sched *s, int type, bool any, int32_t min_prio)
{
    s->vprio_any[type] = any;
    s->vprio_lb[type] = min_prio;
}

const cr__sched_policy_ops cr__sched_policy_priority = {
    .name = "priority",
    .queue_key = prio_key,
    .tenant_classes = true,
    .cycle_begin = prio_shares,
    .by_throughput = true,
    .wait_for_faster = true,
    .head_blocks = true,
    .rank_why = 0,
    .job_rank = prio_job_rank,
    .victim_rank = prio_victim_rank,
    .may_outrank = prio_may_outrank,
    .may_outrank_any = prio_may_outrank_any,
    .victim_bound = prio_victim_bound,
};
