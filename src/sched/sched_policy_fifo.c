/*
 * sched_policy_fifo.c - FIFO: strict submit order, the head job blocks the
 * queue but for EASY backfill, "auto" takes the type with the most free
 * GPUs (heterogeneity-agnostic), no ranked preemption.
 */
#include "sched_int.h"

const cr__sched_policy_ops cr__sched_policy_fifo = {
    .name = "fifo",
    .head_blocks = true,
    .rank_why = RANK_NONE,
};
