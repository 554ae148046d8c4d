/*
 * sched_policy_las.c - LAS (Tiresias): the queue by discretised attained
 * service (GPU-time), FIFO inside a queue, starving jobs promoted to queue
 * 0; a job in a better queue preempts preemptible jobs of a worse one; no
 * head-of-line blocking; the victim index by attained service
 * (sched_victim.c).
 */
#include "sched_int.h"

int cr__sched_las_queue_now(const cr_sched *s, const job *j, int64_t now_ns)
{
    int q = cr__sched_las_queue_of(s, j->attained);
    if (s->cfg.las_starve_ns > 0 && now_ns - j->enqueue_ns >= s->cfg.las_starve_ns) {
        q = 0;
    }
    return q;
}

static int64_t las_key(const cr_sched *s, const job *j, int64_t now_ns)
{
    return cr__sched_las_queue_now(s, j, now_ns);
}

static void las_note(job *j, int64_t key)
{
    j->las_queue = (uint8_t)key;
}

static void las_order_begin(cr_sched *s, int64_t now_ns)
{
    if (s->cfg.las_starve_ns > 0) {
        cr__sched_queue_rekey(s, now_ns, false); /* starving jobs move to queue 0 */
    }
}

static int64_t las_job_rank(const cr_sched *s, const job *j)
{
    (void)s;
    return j->las_queue;
}

static int64_t las_victim_rank(const cr_sched *s, const job *r, int64_t now_ns)
{
    return cr__sched_las_queue_of(s, cr__sched_job_attained(r, now_ns));
}

static int64_t las_worst(const cr_sched *s)
{
    return s->cfg.las_queues - 1;
}

static bool las_may_outrank(const cr_sched *s, const job *j, int type)
{
    (void)type;
    return j->las_queue < s->cfg.las_queues - 1; /* else no worse queue */
}

static bool las_may_outrank_any(const cr_sched *s, const job *j)
{
    /* the walk goes by queue, and a job of the last queue has no worse
     * queue to preempt: nor has any after it */
    return s->ref_scan || j->las_queue < s->cfg.las_queues - 1;
}

const cr__sched_policy_ops cr__sched_policy_las = {
    .name = "las",
    .queue_key = las_key,
    .note_key = las_note,
    .order_begin = las_order_begin,
    .by_throughput = true,
    .wait_for_faster = true,
    .head_blocks = false,
    .rank_why = 2,
    .job_rank = las_job_rank,
    .victim_rank = las_victim_rank,
    .rank_worst = las_worst,
    .may_outrank = las_may_outrank,
    .may_outrank_any = las_may_outrank_any,
    .attained_index = true,
};
