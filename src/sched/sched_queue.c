/*
 * sched_queue.c - the pending queue's order, kept between cycles.
 *
 * A cycle walks the pending jobs in policy order (sched_cycle.c): the
 * key (a, b, submit time, id), where a is the tier (PRIORITY, negated) or
 * the LAS queue and b the tenant's fair-share key (PRIORITY). Under load
 * thousands of jobs wait and a cycle runs at every event, so the order
 * must not cost O(pending) per cycle. It is kept from cycle to cycle in
 * classes: one per (a, tenant) for PRIORITY, per LAS queue for LAS, a
 * single one for FIFO and HETERO. Inside a class jobs are in (submit time,
 * id) order, which never changes; only the order of the classes does (b
 * moves as tenants use GPUs), and it is recomputed each cycle over the
 * classes alone. Classes whose (a, b) tie are walked as one, merged by
 * (submit time, id).
 *  - a job leaving the queue (started, removed) clears its entry (class
 *    j->qc, index j->opos); a class is compacted once half its entries are
 *    empty (amortised O(1) per job);
 *  - a job entering the queue (added, preempted, requeued) is put on
 *    s->fresh; the next cycle appends it to its class (new jobs sort at
 *    the end of it), or, if it sorts earlier (a requeued job with an old
 *    submit time), to the class's overflow class, which ties with it and
 *    is merged by the walk, and is folded back into it in bulk.
 * A LAS job's queue follows the service attained before it queued, so it
 * stays in its class; with las_starve_ns set, every queued job's queue is
 * checked each cycle (O(pending)) and a starving job moves to queue 0.
 * The walk visits the same total order as sorting every pending job by its
 * key each cycle: tests/sched/test_prop.c checks it against that sort on
 * random workloads.
 *
 * The early stop of a cycle needs the smallest GPU count, the shortest
 * time limit and the highest priority among all pending jobs: binary heaps
 * indexed by j->hp[], updated as jobs enter and leave the queue, give them
 * in O(1).
 */
#include "cr_sched.h"

#include <stdlib.h>
#include <string.h>

#include "cr_alloc.h"
#include "sched_int.h"

/* ------------------------------------------------------------------------ */
/* Pending-set minima                                                       */

static int64_t hkey(const job *j, int h)
{
    return h == 0   ? (int64_t)j->spec.gpu_count
           : h == 1 ? j->spec.time_limit_ns
                    : -(int64_t)j->spec.priority;
}

static void hset(job **a, uint32_t i, job *j, int h)
{
    a[i] = j;
    j->hp[h] = i;
}

static void hup(job **a, uint32_t i, int h)
{
    job *j = a[i];
    while (i > 0 && hkey(j, h) < hkey(a[(i - 1) / 2], h)) {
        hset(a, i, a[(i - 1) / 2], h);
        i = (i - 1) / 2;
    }
    hset(a, i, j, h);
}

static void hdown(job **a, uint32_t n, uint32_t i, int h)
{
    job *j = a[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n) {
            break;
        }
        if (c + 1 < n && hkey(a[c + 1], h) < hkey(a[c], h)) {
            c++;
        }
        if (hkey(a[c], h) >= hkey(j, h)) {
            break;
        }
        hset(a, i, a[c], h);
        i = c;
    }
    hset(a, i, j, h);
}

static void hpush(cr_sched *s, int h, job *j)
{
    CR_GROW(s->mheap[h], s->nmheap[h], s->cmheap[h]);
    uint32_t i = s->nmheap[h]++;
    hset(s->mheap[h], i, j, h);
    hup(s->mheap[h], i, h);
}

static void hdel(cr_sched *s, int h, job *j)
{
    job **a = s->mheap[h];
    uint32_t i = j->hp[h], last = --s->nmheap[h];
    j->hp[h] = UINT32_MAX;
    if (i == last) {
        return;
    }
    job *m = a[last];
    hset(a, i, m, h);
    hup(a, i, h);
    hdown(a, last, m->hp[h], h);
}

void cr__sched_queue_enter(cr_sched *s, job *j)
{
    j->hp[0] = j->hp[1] = UINT32_MAX;
    hpush(s, 2, j);
    if (j->mig[0] || cr__sched_frac(j)) { /* (fractional: not counted in the smallest GPU count) */
        s->nmig_pending++;
    } else {
        hpush(s, 0, j);
    }
    if (j->spec.time_limit_ns > 0) {
        hpush(s, 1, j);
    }
    if (!j->in_order) {
        CR_GROW(s->fresh, s->nfresh, s->cfresh);
        s->fresh[s->nfresh++] = j;
    }
}

void cr__sched_queue_leave(cr_sched *s, job *j)
{
    if (j->mig[0] || cr__sched_frac(j)) {
        s->nmig_pending--;
    }
    for (int h = 0; h < 3; h++) {
        if (j->hp[h] != UINT32_MAX) {
            hdel(s, h, j);
        }
    }
    cr__sched_queue_drop(s, j);
}

uint32_t cr__sched_queue_min_gpus(const cr_sched *s)
{
    return s->nmheap[0] ? s->mheap[0][0]->spec.gpu_count : UINT32_MAX;
}

int32_t cr__sched_queue_max_priority(const cr_sched *s)
{
    return s->nmheap[2] ? s->mheap[2][0]->spec.priority : INT32_MIN;
}

int64_t cr__sched_queue_min_limit(const cr_sched *s)
{
    return s->nmheap[1] ? s->mheap[1][0]->spec.time_limit_ns : INT64_MAX;
}

static void job_free_dead(job *j)
{
    free(j->recv_ns);
    free(j->tput);
    free(j->node_mask);
    free(j->prefer_mask);
    free(j->slots);
    free(j);
}

/* ------------------------------------------------------------------------ */
/* Order                                                                    */

/* An overflow class is folded back into its class past this many jobs (and
 * an eighth of the class). */
#ifndef OVF_MIN
#define OVF_MIN 32
#endif

struct qclass {
    int64_t a;  /* tier (negated) or LAS queue */
    int tenant; /* PRIORITY: the tenant; else 0 */
    double b;   /* this cycle's fair-share key */
    job **v;    /* (submit time, id) order; NULL = left the queue */
    uint32_t n, cap, head, nempty;
    uint32_t n0;   /* n before this cycle's appends */
    uint32_t cur;  /* walk cursor */
    bool unsorted; /* an append broke the order */
    bool is_ovf;   /* the overflow of another class */
    uint32_t ovf;  /* its overflow class + 1 (0 = none) */
};

static bool job_before(const job *x, const job *y)
{
    if (x->spec.submit_ns != y->spec.submit_ns) {
        return x->spec.submit_ns < y->spec.submit_ns;
    }
    return x->spec.id < y->spec.id;
}

int cr__sched_las_queue_of(const cr_sched *s, int64_t attained)
{
    int q = 0;
    while (q < s->cfg.las_queues - 1 && attained >= s->cfg.las_threshold_gpu_ns[q]) {
        q++;
    }
    return q;
}

/* The class of a job (created on first use: classes are few, one per tier
 * and tenant at most, so a linear search). */
static uint32_t class_of(cr_sched *s, job *j, int64_t now_ns)
{
    const cr__sched_policy_ops *pol = s->pol;
    int64_t a = pol->queue_key ? pol->queue_key(s, j, now_ns) : 0;
    int tenant = pol->tenant_classes ? j->spec.tenant : 0;
    if (pol->note_key) {
        pol->note_key(j, a);
    }
    for (uint32_t c = 0; c < s->nqcls; c++) {
        if (s->qcls[c].a == a && s->qcls[c].tenant == tenant && !s->qcls[c].is_ovf) {
            return c;
        }
    }
    CR_GROW(s->qcls, s->nqcls, s->cqcls);
    struct qclass *q = &s->qcls[s->nqcls];
    memset(q, 0, sizeof(*q));
    q->a = a;
    q->tenant = tenant;
    return s->nqcls++;
}

static void class_put(struct qclass *q, uint32_t c, uint32_t i, job *j)
{
    q->v[i] = j;
    j->qc = c;
    j->opos = i;
    j->in_order = true;
}

void cr__sched_queue_drop(cr_sched *s, job *j)
{
    if (j->in_order) {
        struct qclass *q = &s->qcls[j->qc];
        q->v[j->opos] = NULL;
        q->nempty++;
        j->in_order = false;
    }
}

static bool sorts_last(const struct qclass *q, const job *j)
{
    uint32_t last = q->n;
    while (last > q->head && !q->v[last - 1]) {
        last--;
    }
    return last == q->head || job_before(q->v[last - 1], j);
}

/* Append j to class c, or to c's overflow class if j sorts before c's last
 * job (a requeued job with an old submit time): the walk merges the two
 * (they tie on (a, b)), and the overflow is folded back once it holds an
 * eighth of the class, so a requeue costs no O(class) rewrite each time. */
static void class_append(cr_sched *s, uint32_t c, job *j)
{
    if (!sorts_last(&s->qcls[c], j)) {
        if (!s->qcls[c].ovf) {
            CR_GROW(s->qcls, s->nqcls, s->cqcls);
            struct qclass *o = &s->qcls[s->nqcls];
            memset(o, 0, sizeof(*o));
            o->a = s->qcls[c].a;
            o->tenant = s->qcls[c].tenant;
            o->is_ovf = true;
            s->qcls[c].ovf = ++s->nqcls;
        }
        c = s->qcls[c].ovf - 1;
        if (!sorts_last(&s->qcls[c], j)) {
            s->qcls[c].unsorted = true;
        }
    }
    struct qclass *q = &s->qcls[c];
    CR_GROW(q->v, q->n, q->cap);
    class_put(q, c, q->n++, j);
}

static int cmp_job_ptr(const void *x, const void *y)
{
    const job *a = *(job *const *)x, *b = *(job *const *)y;
    return job_before(a, b) ? -1 : job_before(b, a);
}

/* Drop the empty entries; if an append broke the order, sort what this
 * cycle appended (from n0 on) and merge it into the rest, still in order. */
static void class_compact(struct qclass *q, uint32_t c)
{
    uint32_t n = 0, m = 0;
    for (uint32_t i = q->head; i < q->n; i++) {
        if (i == q->n0) {
            m = n;
        }
        if (q->v[i]) {
            q->v[n++] = q->v[i];
        }
    }
    if (q->n0 >= q->n) {
        m = n;
    }
    if (q->unsorted) {
        qsort(q->v + m, n - m, sizeof(*q->v), cmp_job_ptr);
        job **t = cr_malloc((n ? n : 1) * sizeof(*t));
        uint32_t i = 0, k = m, o = 0;
        while (i < m && k < n) {
            t[o++] = job_before(q->v[k], q->v[i]) ? q->v[k++] : q->v[i++];
        }
        while (i < m) {
            t[o++] = q->v[i++];
        }
        while (k < n) {
            t[o++] = q->v[k++];
        }
        memcpy(q->v, t, n * sizeof(*t));
        free(t);
        q->unsorted = false;
    }
    for (uint32_t i = 0; i < n; i++) {
        class_put(q, c, i, q->v[i]);
    }
    q->n = n;
    q->head = 0;
    q->nempty = 0;
}

static uint32_t class_live(const struct qclass *q)
{
    return q->n - q->head - q->nempty;
}

/* Fold overflow class o back into class c, in order. */
static void class_absorb(cr_sched *s, uint32_t c, uint32_t o)
{
    struct qclass *q = &s->qcls[c], *x = &s->qcls[o];
    class_compact(q, c);
    class_compact(x, o);
    job **t = cr_malloc(((size_t)q->n + x->n + 1) * sizeof(*t));
    uint32_t i = 0, k = 0, n = 0;
    while (i < q->n && k < x->n) {
        t[n++] = job_before(x->v[k], q->v[i]) ? x->v[k++] : q->v[i++];
    }
    while (i < q->n) {
        t[n++] = q->v[i++];
    }
    while (k < x->n) {
        t[n++] = x->v[k++];
    }
    free(q->v);
    q->v = t;
    q->cap = n + 1;
    for (uint32_t m = 0; m < n; m++) {
        class_put(q, c, m, t[m]);
    }
    q->n = n;
    x->n = 0;
}

static bool class_less(const struct qclass *x, const struct qclass *y)
{
    if (x->a != y->a) {
        return x->a < y->a;
    }
    return x->b < y->b;
}

void cr__sched_queue_rekey(cr_sched *s, int64_t now_ns, bool all)
{
    for (uint32_t c = 0; c < s->nqcls; c++) {
        struct qclass *q = &s->qcls[c];
        for (uint32_t i = q->head; i < q->n && (all || q->a != 0); i++) {
            job *j = q->v[i];
            if (j && s->pol->queue_key(s, j, now_ns) != q->a) {
                cr__sched_queue_drop(s, j);
                CR_GROW(s->fresh, s->nfresh, s->cfresh);
                s->fresh[s->nfresh++] = j;
            }
        }
    }
}

void cr__sched_order(cr_sched *s, int64_t now_ns)
{
    for (uint32_t c = 0; c < s->nqcls; c++) {
        s->qcls[c].n0 = s->qcls[c].n;
    }
    if (s->pol->order_begin) {
        s->pol->order_begin(s, now_ns);
    }
    for (uint32_t i = 0; i < s->nfresh; i++) {
        job *j = s->fresh[i];
        if (!j->dead && j->state == CR_JOB_PENDING && !j->in_order) {
            class_append(s, class_of(s, j, now_ns), j);
        }
    }
    s->nfresh = 0;
    /* every entry that points at a removed job is cleared by now */
    for (uint32_t i = 0; i < s->ngrave; i++) {
        job_free_dead(s->grave[i]);
    }
    s->ngrave = 0;
    /* the classes' order this cycle */
    if (s->cqord < s->nqcls) {
        s->cqord = s->cqcls;
        s->qord = cr_reallocarray(s->qord, s->cqord, sizeof(*s->qord));
    }
    for (uint32_t c = 0; c < s->nqcls; c++) {
        uint32_t o = s->qcls[c].ovf;
        if (o && class_live(&s->qcls[o - 1]) > OVF_MIN &&
            class_live(&s->qcls[o - 1]) * 8 > class_live(&s->qcls[c])) {
            class_absorb(s, c, o - 1);
        }
    }
    uint32_t n = 0;
    for (uint32_t c = 0; c < s->nqcls; c++) {
        struct qclass *q = &s->qcls[c];
        if (q->unsorted || (q->nempty + q->head > 32 && (q->nempty + q->head) * 2 > q->n)) {
            class_compact(q, c);
        }
        while (q->head < q->n && !q->v[q->head]) {
            q->head++;
            q->nempty--;
        }
        if (q->head == q->n) {
            continue;
        }
        q->b = s->pol->tenant_classes ? s->tenants[q->tenant].share : 0;
        /* insertion sort: few classes */
        uint32_t k = n++;
        while (k > 0 && class_less(q, &s->qcls[s->qord[k - 1]])) {
            s->qord[k] = s->qord[k - 1];
            k--;
        }
        s->qord[k] = c;
    }
    s->nqord = n;
}

void cr__sched_walk_start(cr_sched *s)
{
    s->qwalk = 0;
    s->qgroup_end = 0;
}

job *cr__sched_walk_next(cr_sched *s)
{
    for (;;) {
        if (s->qwalk >= s->qgroup_end) {
            /* next group of classes tied on (a, b) */
            if (s->qgroup_end >= s->nqord) {
                return NULL;
            }
            s->qwalk = s->qgroup_end;
            uint32_t e = s->qwalk + 1;
            while (e < s->nqord && !class_less(&s->qcls[s->qord[s->qwalk]], &s->qcls[s->qord[e]])) {
                e++;
            }
            s->qgroup_end = e;
            for (uint32_t g = s->qwalk; g < e; g++) {
                s->qcls[s->qord[g]].cur = s->qcls[s->qord[g]].head;
            }
        }
        /* the earliest job among the group's cursors */
        job *best = NULL;
        struct qclass *bq = NULL;
        for (uint32_t g = s->qwalk; g < s->qgroup_end; g++) {
            struct qclass *q = &s->qcls[s->qord[g]];
            while (q->cur < q->n && !q->v[q->cur]) {
                q->cur++;
            }
            if (q->cur < q->n && (!best || job_before(q->v[q->cur], best))) {
                best = q->v[q->cur];
                bq = q;
            }
        }
        if (best) {
            bq->cur++;
            return best;
        }
        s->qwalk = s->qgroup_end; /* group done */
    }
}

void cr__sched_queue_free(cr_sched *s)
{
    for (uint32_t c = 0; c < s->nqcls; c++) {
        free(s->qcls[c].v);
    }
    free(s->qcls);
    free(s->qord);
}

/* ------------------------------------------------------------------------ */
/* Verification (tests): the walk against a full sort                      */

typedef struct vkey {
    int64_t a;
    double b;
    const job *j;
} vkey;

static int cmp_vkey(const void *x, const void *y)
{
    const vkey *p = x, *q = y;
    if (p->a != q->a) {
        return p->a < q->a ? -1 : 1;
    }
    if (p->b != q->b) {
        return p->b < q->b ? -1 : 1;
    }
    return job_before(p->j, q->j) ? -1 : job_before(q->j, p->j);
}

bool cr__sched_order_verify(cr_sched *s, int64_t now_ns)
{
    vkey *v = cr_malloc((s->npending ? s->npending : 1) * sizeof(*v));
    for (uint32_t i = 0; i < s->npending; i++) {
        const job *j = s->pending[i];
        v[i].a = s->pol->queue_key ? s->pol->queue_key(s, j, now_ns) : 0;
        v[i].b = s->pol->tenant_classes ? s->tenants[j->spec.tenant].share : 0;
        v[i].j = j;
    }
    qsort(v, s->npending, sizeof(*v), cmp_vkey);
    bool ok = true;
    uint32_t n = 0;
    cr__sched_walk_start(s);
    for (job *j; ok && (j = cr__sched_walk_next(s)) != NULL; n++) {
        ok = n < s->npending && v[n].j == j;
    }
    free(v);
    return ok && n == s->npending;
}
