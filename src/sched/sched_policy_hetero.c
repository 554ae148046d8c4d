/*
 * sched_policy_hetero.c - HETERO: FIFO's queue, "auto" jobs on the type the
 * allocation over the queue's head gives them (sched_hetero.c), or none
 * this cycle (they wait); wait-or-start applies to the rest.
 */
#include "sched_int.h"

static void hetero_ordered(cr_sched *s, cr_rng *rng)
{
    cr__sched_hetero_assign(s, rng);
}

static int hetero_type(const cr_sched *s, const job *j)
{
    return cr__sched_hetero_of(s, j);
}

const cr__sched_policy_ops cr__sched_policy_hetero = {
    .name = "hetero",
    .cycle_ordered = hetero_ordered,
    .by_throughput = true,
    .assigned_type = hetero_type,
    .wait_for_faster = true,
    .head_blocks = true,
    .rank_why = RANK_NONE,
    .wait_text = "the heterogeneity-aware allocation gives the free GPUs to jobs that gain more "
                 "from them",
};
