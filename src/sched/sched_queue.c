/*
 * sched_queue.c - the pending queue's order, kept between cycles.
 *
 * A cycle walks the pending jobs in policy order (sched_cycle.c). Under
 * load thousands of jobs wait, and a cycle runs at every event, so the
 * order must not cost O(pending) per cycle. It is kept in s->order from
 * cycle to cycle:
 *  - a job leaving the queue (started, removed) only marks its entry stale
 *    (j->in_order cleared; an entry is live iff its job is in_order and
 *    j->opos is its index); stale entries are skipped, and the array is
 *    compacted once they are half of it (amortised O(1) per job);
 *  - a job entering the queue (added, preempted, requeued) is put on
 *    s->fresh; the next cycle sorts the fresh jobs and appends them when
 *    they sort after the last queued job (the usual case: keys grow with
 *    submit time), else merges them in (O(pending), rare);
 *  - keys that never change for a queued job need no refresh: FIFO and
 *    HETERO (submit time, id), LAS without starvation promotion (its queue
 *    follows the service attained before it queued), PRIORITY while every
 *    pair of tenants compares the same way by fair-share key as when the
 *    order was built (the key enters the order only through those
 *    comparisons). Otherwise (LAS with las_starve_ns, PRIORITY after the
 *    tenants changed places) the order is rebuilt and sorted in full.
 * The order is the same total order either way (every key ends on the job
 * id): this is an exact optimisation, and tests/sched/test_prop.c compares
 * it against a full rebuild on random workloads.
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
    return h == 0 ? (int64_t)j->spec.gpu_count
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
    if (j->mig[0]) {
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
    if (j->mig[0]) {
        s->nmig_pending--;
    }
    for (int h = 0; h < 3; h++) {
        if (j->hp[h] != UINT32_MAX) {
            hdel(s, h, j);
        }
    }
    if (j->in_order) {
        j->in_order = false;
        s->nstale++;
    }
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

/* ------------------------------------------------------------------------ */
/* Order                                                                    */

typedef struct okey {
    int64_t a; /* tier / queue */
    double b;  /* fair-share key */
    int64_t c; /* submit time */
    uint64_t id;
    job *j;
} okey;

static inline bool okey_less(const okey *a, const okey *b)
{
    if (a->a != b->a) {
        return a->a < b->a;
    }
    if (a->b != b->b) {
        return a->b < b->b;
    }
    if (a->c != b->c) {
        return a->c < b->c;
    }
    return a->id < b->id;
}

/* Bottom-up merge sort with the comparison inlined (qsort's indirect
 * comparator doubles the cost). Runs already in order cost one comparison
 * per element per pass. */
static void sort_okeys(okey *v, size_t n)
{
    if (n < 2) {
        return;
    }
    okey *tmp = cr_malloc(n * sizeof(*tmp));
    okey *src = v, *dst = tmp;
    /* insertion-sort runs of 16 first */
    for (size_t lo = 0; lo < n; lo += 16) {
        size_t hi = lo + 16 < n ? lo + 16 : n;
        for (size_t i = lo + 1; i < hi; i++) {
            okey x = v[i];
            size_t k = i;
            while (k > lo && okey_less(&x, &v[k - 1])) {
                v[k] = v[k - 1];
                k--;
            }
            v[k] = x;
        }
    }
    for (size_t w = 16; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, k = mid, o = lo;
            if (mid < hi && !okey_less(&src[mid], &src[mid - 1])) {
                memcpy(&dst[lo], &src[lo], (hi - lo) * sizeof(*src)); /* already in order */
                continue;
            }
            while (i < mid && k < hi) {
                dst[o++] = okey_less(&src[k], &src[i]) ? src[k++] : src[i++];
            }
            while (i < mid) {
                dst[o++] = src[i++];
            }
            while (k < hi) {
                dst[o++] = src[k++];
            }
        }
        okey *t = src;
        src = dst;
        dst = t;
    }
    if (src != v) {
        memcpy(v, src, n * sizeof(*v));
    }
    free(tmp);
}

int cr__sched_las_queue_of(const cr_sched *s, int64_t attained)
{
    int q = 0;
    while (q < s->cfg.las_queues - 1 && attained >= s->cfg.las_threshold_gpu_ns[q]) {
        q++;
    }
    return q;
}

static void okey_fill(cr_sched *s, okey *k, job *j, int64_t now_ns)
{
    k->a = 0;
    k->b = 0;
    k->c = j->spec.submit_ns;
    k->id = j->spec.id;
    k->j = j;
    if (s->cfg.policy == CR_SCHED_PRIORITY) {
        k->a = -(int64_t)j->spec.priority;
        k->b = s->tenants[j->spec.tenant].share;
    } else if (s->cfg.policy == CR_SCHED_LAS) {
        int q = cr__sched_las_queue_of(s, j->attained);
        if (s->cfg.las_starve_ns > 0 && now_ns - j->enqueue_ns >= s->cfg.las_starve_ns) {
            q = 0;
        }
        j->las_queue = (uint8_t)q;
        k->a = q;
    }
}

static void job_free_dead(job *j)
{
    free(j->tput);
    free(j->slots);
    free(j);
}

/* Do the queued jobs' keys still compare as when the order was built? */
static bool keys_stable(cr_sched *s)
{
    if (s->cfg.policy == CR_SCHED_LAS) {
        return s->cfg.las_starve_ns <= 0;
    }
    if (s->cfg.policy != CR_SCHED_PRIORITY) {
        return true;
    }
    bool same = s->nshare == s->ntenants;
    for (int a = 0; a < s->ntenants && same; a++) {
        for (int b = a + 1; b < s->ntenants && same; b++) {
            double x = s->tenants[a].share, y = s->tenants[b].share;
            double u = s->share_seen[a], v = s->share_seen[b];
            same = (x < y) == (u < v) && (x > y) == (u > v);
        }
    }
    if (!same) {
        s->share_seen = cr_reallocarray(s->share_seen, (size_t)(s->ntenants ? s->ntenants : 1),
                                        sizeof(double));
        for (int a = 0; a < s->ntenants; a++) {
            s->share_seen[a] = s->tenants[a].share;
        }
        s->nshare = s->ntenants;
    }
    return same;
}

static void order_put(cr_sched *s, uint32_t i, job *j)
{
    s->order[i] = j;
    j->opos = i;
    j->in_order = true;
}

/* Rewrite s->order from sorted keys; frees removed jobs (no entry points at
 * them any more). */
static void order_set(cr_sched *s, const okey *v, uint32_t n)
{
    if (s->corder < n) {
        s->corder = n;
        s->order = cr_reallocarray(s->order, n ? n : 1, sizeof(*s->order));
    }
    for (uint32_t i = 0; i < n; i++) {
        order_put(s, i, v[i].j);
    }
    s->norder = n;
    s->ohead = 0;
    s->nstale = 0;
    for (uint32_t i = 0; i < s->ngrave; i++) {
        job_free_dead(s->grave[i]);
    }
    s->ngrave = 0;
}

void cr__sched_order(cr_sched *s, int64_t now_ns)
{
    /* the fresh jobs, sorted */
    okey *fr = cr_malloc((s->nfresh ? s->nfresh : 1) * sizeof(*fr));
    uint32_t nfr = 0;
    for (uint32_t i = 0; i < s->nfresh; i++) {
        job *j = s->fresh[i];
        if (!j->dead && j->state == CR_JOB_PENDING && !j->in_order) {
            okey_fill(s, &fr[nfr++], j, now_ns);
            j->in_order = true; /* (a job twice on fresh is taken once) */
        }
    }
    s->nfresh = 0;
    sort_okeys(fr, nfr);
    while (s->ohead < s->norder && !cr__sched_order_live(s, s->ohead)) {
        s->ohead++;
    }
    bool stable = keys_stable(s);
    bool append = stable;
    if (stable && nfr > 0) {
        uint32_t last = s->norder;
        while (last > s->ohead && !cr__sched_order_live(s, last - 1)) {
            last--;
        }
        if (last > s->ohead) {
            okey k;
            okey_fill(s, &k, s->order[last - 1], now_ns);
            append = okey_less(&k, &fr[0]);
        }
    }
    if (!append) {
        /* refresh every key and sort (old part first: usually still in
         * order, then only the fresh part is merged in) */
        uint32_t n = 0;
        okey *v = cr_malloc(((size_t)s->norder + nfr + 1) * sizeof(*v));
        for (uint32_t i = s->ohead; i < s->norder; i++) {
            if (cr__sched_order_live(s, i)) {
                okey_fill(s, &v[n++], s->order[i], now_ns);
            }
        }
        memcpy(v + n, fr, nfr * sizeof(*fr));
        sort_okeys(v, n + nfr);
        order_set(s, v, n + nfr);
        free(v);
        free(fr);
        return;
    }
    if ((s->nstale > 64 && s->nstale * 2 > s->norder) ||
        (s->ngrave > 64 && s->ngrave * 2 > s->norder)) {
        /* compact: half the entries are stale (or removed jobs wait to be
         * freed) */
        uint32_t n = 0;
        for (uint32_t i = s->ohead; i < s->norder; i++) {
            if (cr__sched_order_live(s, i)) {
                order_put(s, n++, s->order[i]);
            }
        }
        s->norder = n;
        s->ohead = 0;
        s->nstale = 0;
        for (uint32_t i = 0; i < s->ngrave; i++) {
            job_free_dead(s->grave[i]);
        }
        s->ngrave = 0;
    }
    if (s->corder < s->norder + nfr) {
        s->corder = (s->norder + nfr) * 2;
        s->order = cr_reallocarray(s->order, s->corder, sizeof(*s->order));
    }
    for (uint32_t i = 0; i < nfr; i++) {
        order_put(s, s->norder++, fr[i].j);
    }
    free(fr);
}
