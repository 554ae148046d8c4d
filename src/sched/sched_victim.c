/*
 * sched_victim.c - LAS preemption victims, indexed so that a preemption
 * try does not scan every running job of the type.
 *
 * A LAS job in queue jq may preempt running, preemptible jobs of the type
 * whose queue (by the service attained up to now) is worse than jq, taking
 * them in order of least work lost (cmp in sched_cycle.c: lost, priority,
 * later start, id). Under saturation a type runs 10,000+ jobs and a cycle
 * at every event makes up to PREEMPT_TRIES tries: a scan of them all per
 * try was the whole cost of LAS (210 s on bench_sim's 100k replay). The
 * index gives the same victims in the same order, lazily:
 *
 *  - Queues. Each indexed job sits in the set of its current LAS queue.
 *    Service only grows while a job runs, so a job leaves its queue for
 *    the next at a time known from its start: a per-type min-heap holds
 *    that time, computed no later than the exact crossing, and the sets
 *    are brought up to date (popping the heap, checking the exact queue)
 *    before a try. Victims for jq are then the sets of queues > jq.
 *  - Work lost. With checkpoint interval C, lost = (now - start) mod C: in
 *    ascending order that is the start's phase (start mod C) in descending
 *    order, beginning at now's phase and wrapping around. Each set keeps
 *    one ring per distinct C (VIX_GROUPS per type), of VIX_BUCKETS buckets
 *    by phase; a try walks the buckets in that rotation, sorting one
 *    bucket at a time (equal phases, hence equal losses, share a bucket),
 *    and merges the rings by the full victim order. It stops as soon as
 *    the job fits, so a try costs the buckets it visits, not the type.
 *  - The rest (no checkpoint interval, not preemptible, a C beyond
 *    VIX_GROUPS) are "others": a try scans them as before and merges them
 *    in, so any mix is exact, and only the indexed jobs are fast.
 * Only a policy with attained_index (LAS) keeps the index (the policy is
 * fixed for a scheduler's life).
 * Borrowed-capacity reclaim (a job within its quota) uses the full scan in
 * sched_cycle.c. tests/sched/test_victim.c checks the index's order
 * against the full scan on generated clusters.
 */
#include "cr_sched.h"

#include <stdlib.h>
#include <string.h>

#include "cr_alloc.h"
#include "cr_error.h"
#include "sched_int.h"

#define VIX_GROUPS  4   /* distinct checkpoint intervals indexed per type */
#define VIX_BUCKETS 256 /* phase buckets per ring */

typedef struct vbucket {
    job **v;
    uint32_t n, cap;
} vbucket;

typedef struct vring {
    vbucket *b;    /* VIX_BUCKETS, allocated on first use */
    uint32_t n;    /* jobs in the ring */
    uint64_t gpus; /* their GPUs (slots) */
} vring;

struct vix {
    int64_t ck[VIX_GROUPS]; /* the groups' checkpoint intervals */
    int ngroups;
    vring ring[CR_SCHED_LAS_MAX_QUEUES][VIX_GROUPS];
    job **other; /* running jobs of the type in no ring */
    uint32_t nother, cother;
    job **ph; /* promotion heap: indexed jobs below the last queue, by vpromo */
    uint32_t nph, cph;
    int64_t now; /* sets are exact up to this time (INT64_MIN: never advanced) */
};

static int64_t phase_of(int64_t start_ns, int64_t ck)
{
    int64_t p = start_ns % ck;
    return p < 0 ? p + ck : p;
}

static uint32_t bucket_of(int64_t phase, int64_t ck)
{
    return (uint32_t)(phase / (ck / VIX_BUCKETS + 1));
}

static struct vix *vix_get(cr_sched *s, int type)
{
    if (!s->vix[type]) {
        s->vix[type] = cr_calloc(1, sizeof(struct vix));
        s->vix[type]->now = INT64_MIN;
    }
    return s->vix[type];
}

/* ------------------------------------------------------------------------ */
/* Promotion heap                                                           */

static void ph_set(job **h, uint32_t i, job *j)
{
    h[i] = j;
    j->vhp = i;
}

static void ph_up(job **h, uint32_t i)
{
    job *j = h[i];
    while (i > 0 && j->vpromo < h[(i - 1) / 2]->vpromo) {
        ph_set(h, i, h[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    ph_set(h, i, j);
}

static void ph_down(job **h, uint32_t n, uint32_t i)
{
    job *j = h[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n) {
            break;
        }
        if (c + 1 < n && h[c + 1]->vpromo < h[c]->vpromo) {
            c++;
        }
        if (h[c]->vpromo >= j->vpromo) {
            break;
        }
        ph_set(h, i, h[c]);
        i = c;
    }
    ph_set(h, i, j);
}

static void ph_push(struct vix *x, job *j)
{
    CR_GROW(x->ph, x->nph, x->cph);
    ph_set(x->ph, x->nph, j);
    ph_up(x->ph, x->nph++);
}

static void ph_del(struct vix *x, job *j)
{
    uint32_t i = j->vhp, last = --x->nph;
    j->vhp = UINT32_MAX;
    if (i == last) {
        return;
    }
    job *m = x->ph[last];
    ph_set(x->ph, i, m);
    ph_up(x->ph, i);
    ph_down(x->ph, x->nph, m->vhp);
}

/* No later than the first time the running job's attained service reaches
 * thr (cr__sched_job_attained), INT64_MAX if beyond the clock. */
static int64_t crossing_ns(const job *j, int64_t thr)
{
    int64_t need = thr - j->attained;
    if (need <= 0) {
        return j->start_ns;
    }
    int64_t dt;
    if (j->nslots && j->slots[0].milli) {
        /* attained grows by at most held/1000 per ns (held <= 1000) */
        int64_t q = need / (j->held ? j->held : 1);
        dt = q > INT64_MAX / 1000 ? INT64_MAX : q * 1000;
    } else {
        dt = need / (j->nslots ? j->nslots : 1);
    }
    return dt > INT64_MAX - j->start_ns ? INT64_MAX : j->start_ns + dt;
}

/* ------------------------------------------------------------------------ */
/* Sets                                                                     */

static void ring_put(vring *r, int64_t ck, job *j)
{
    if (!r->b) {
        r->b = cr_calloc(VIX_BUCKETS, sizeof(*r->b));
    }
    vbucket *b = &r->b[bucket_of(phase_of(j->start_ns, ck), ck)];
    CR_GROW(b->v, b->n, b->cap);
    j->vpos = b->n;
    b->v[b->n++] = j;
    r->n++;
    r->gpus += j->nslots;
}

static void ring_del(vring *r, int64_t ck, job *j)
{
    vbucket *b = &r->b[bucket_of(phase_of(j->start_ns, ck), ck)];
    uint32_t i = j->vpos, last = --b->n;
    b->v[i] = b->v[last];
    b->v[i]->vpos = i;
    r->n--;
    r->gpus -= j->nslots;
}

/* Put j (running, its queue at now known) in its set and, below the last
 * queue, in the promotion heap. */
static void set_enter(cr_sched *s, struct vix *x, job *j, int q)
{
    j->vq = (int8_t)q;
    ring_put(&x->ring[q][j->vg], x->ck[j->vg], j);
    if (q < s->cfg.las_queues - 1) {
        j->vpromo = crossing_ns(j, s->cfg.las_threshold_gpu_ns[q]);
        ph_push(x, j);
    }
}

void cr__sched_vix_add(cr_sched *s, job *j)
{
    j->vq = -1;
    j->vhp = UINT32_MAX;
    if (!s->pol->attained_index) {
        return;
    }
    struct vix *x = vix_get(s, j->run_type);
    int64_t ck = j->spec.checkpoint_interval_ns;
    int g = -1;
    if (j->spec.preemptible && ck > 0) {
        for (int i = 0; i < x->ngroups && g < 0; i++) {
            g = x->ck[i] == ck ? i : -1;
        }
        if (g < 0 && x->ngroups < VIX_GROUPS) {
            g = x->ngroups++;
            x->ck[g] = ck;
        }
    }
    if (g < 0) {
        CR_GROW(x->other, x->nother, x->cother);
        j->vpos = x->nother;
        x->other[x->nother++] = j;
        return;
    }
    j->vg = (uint8_t)g;
    /* at its start its service is what it had before */
    set_enter(s, x, j, cr__sched_las_queue_of(s, j->attained));
}

void cr__sched_vix_del(cr_sched *s, job *j)
{
    if (!s->pol->attained_index) {
        return;
    }
    struct vix *x = s->vix[j->run_type];
    if (j->vq < 0) {
        uint32_t i = j->vpos, last = --x->nother;
        x->other[i] = x->other[last];
        x->other[i]->vpos = i;
        return;
    }
    ring_del(&x->ring[j->vq][j->vg], x->ck[j->vg], j);
    if (j->vhp != UINT32_MAX) {
        ph_del(x, j);
    }
    j->vq = -1;
}

/* Move the jobs whose service crossed a threshold by now to their queue. */
static void advance(cr_sched *s, struct vix *x, int64_t now_ns)
{
    while (x->nph && x->ph[0]->vpromo <= now_ns) {
        job *j = x->ph[0];
        ph_del(x, j);
        int q = cr__sched_las_queue_of(s, cr__sched_job_attained(j, now_ns));
        if (q == j->vq) {
            /* not there yet (the estimate is early): look again later */
            j->vpromo = now_ns + 1;
            ph_push(x, j);
            continue;
        }
        ring_del(&x->ring[j->vq][j->vg], x->ck[j->vg], j);
        set_enter(s, x, j, q);
    }
    x->now = now_ns;
}

void cr__sched_vix_free(cr_sched *s)
{
    for (int t = 0; t < CR_SCHED_MAX_TYPES; t++) {
        struct vix *x = s->vix[t];
        if (!x) {
            continue;
        }
        for (int q = 0; q < CR_SCHED_LAS_MAX_QUEUES; q++) {
            for (int g = 0; g < VIX_GROUPS; g++) {
                for (uint32_t b = 0; x->ring[q][g].b && b < VIX_BUCKETS; b++) {
                    free(x->ring[q][g].b[b].v);
                }
                free(x->ring[q][g].b);
            }
        }
        free(x->other);
        free(x->ph);
        free(x);
        s->vix[t] = NULL;
    }
}

/* ------------------------------------------------------------------------ */
/* Victims in order                                                         */

static bool eligible(const cr_sched *s, const job *r, int64_t now_ns)
{
    return r->start_cycle != s->stats.cycles &&
           now_ns - r->start_ns >= s->cfg.min_runtime_before_preempt_ns;
}

static cr__vitem item_of(const job *r, int64_t now_ns)
{
    int64_t ran = now_ns > r->start_ns ? now_ns - r->start_ns : 0;
    int64_t ck = r->spec.checkpoint_interval_ns;
    return (cr__vitem){ck > 0 ? ran % ck : ran, r->spec.priority, r->start_ns, r->spec.id,
                       (job *)r};
}

int cr__sched_vitem_cmp(const cr__vitem *a, const cr__vitem *b)
{
    if (a->lost != b->lost) {
        return a->lost < b->lost ? -1 : 1;
    }
    if (a->prio != b->prio) {
        return a->prio < b->prio ? -1 : 1;
    }
    if (a->start != b->start) {
        return a->start > b->start ? -1 : 1;
    }
    return a->id < b->id ? -1 : a->id > b->id;
}

static int cmp_item(const void *x, const void *y)
{
    return cr__sched_vitem_cmp(x, y);
}

static void item_down(cr__vitem *h, uint32_t n, uint32_t i)
{
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n) {
            return;
        }
        if (c + 1 < n && cr__sched_vitem_cmp(&h[c + 1], &h[c]) < 0) {
            c++;
        }
        if (cr__sched_vitem_cmp(&h[c], &h[i]) >= 0) {
            return;
        }
        cr__vitem t = h[i];
        h[i] = h[c];
        h[c] = t;
        i = c;
    }
}

/* One ring's victims: its buckets in rotation, one sorted at a time. */
typedef struct vstream {
    const vring *r;
    int64_t ck, p; /* now's phase */
    uint32_t bp;   /* its bucket */
    uint32_t step; /* 0: bp, phases <= p; 1..B-1: other buckets; B: bp, phases > p */
    cr__vitem *buf;
    uint32_t n, i, cap;
} vstream;

struct cr__vix_iter {
    vstream st[CR_SCHED_LAS_MAX_QUEUES * VIX_GROUPS];
    int nst;
    cr__vitem *oh; /* the others' victims, a heap */
    uint32_t noh;
    int64_t now;
};

/* Fill the stream's buffer with its next non-empty bucket; false when done. */
static bool stream_fill(const cr_sched *s, vstream *v, int64_t now_ns)
{
    while (v->i >= v->n) {
        if (v->step > VIX_BUCKETS) {
            return false;
        }
        uint32_t st = v->step++;
        uint32_t b = st == VIX_BUCKETS ? v->bp : (v->bp + VIX_BUCKETS - st) % VIX_BUCKETS;
        const vbucket *bk = &v->r->b[b];
        v->n = v->i = 0;
        for (uint32_t k = 0; k < bk->n; k++) {
            const job *r = bk->v[k];
            if (!eligible(s, r, now_ns)) {
                continue;
            }
            if (b == v->bp) {
                bool low = phase_of(r->start_ns, v->ck) <= v->p;
                if (low != (st == 0)) {
                    continue;
                }
            }
            CR_GROW(v->buf, v->n, v->cap);
            v->buf[v->n++] = item_of(r, now_ns);
        }
        if (v->n > 1) {
            qsort(v->buf, v->n, sizeof(*v->buf), cmp_item);
        }
    }
    return true;
}

int cr__sched_vix_begin(cr_sched *s, int type, int jq, int64_t now_ns, cr__vix_iter **out,
                        uint64_t *gpus_out)
{
    struct vix *x = s->vix[type];
    if (!s->pol->attained_index || !x || now_ns < x->now) {
        return CR_EINVAL; /* (a clock going back: the caller scans) */
    }
    advance(s, x, now_ns);
    cr__vix_iter *it = cr_calloc(1, sizeof(*it));
    it->now = now_ns;
    uint64_t gpus = 0;
    for (int q = jq + 1; q < s->cfg.las_queues; q++) {
        for (int g = 0; g < x->ngroups; g++) {
            const vring *r = &x->ring[q][g];
            if (r->n == 0) {
                continue;
            }
            vstream *v = &it->st[it->nst++];
            v->r = r;
            v->ck = x->ck[g];
            v->p = phase_of(now_ns, v->ck);
            v->bp = bucket_of(v->p, v->ck);
            gpus += r->gpus;
        }
    }
    uint32_t cap = 0;
    for (uint32_t i = 0; i < x->nother; i++) {
        const job *r = x->other[i];
        if (!r->spec.preemptible || !eligible(s, r, now_ns) ||
            cr__sched_las_queue_of(s, cr__sched_job_attained(r, now_ns)) <= jq) {
            continue;
        }
        CR_GROW(it->oh, it->noh, cap);
        it->oh[it->noh++] = item_of(r, now_ns);
        gpus += r->nslots;
    }
    for (uint32_t i = it->noh / 2; i-- > 0;) {
        item_down(it->oh, it->noh, i);
    }
    *out = it;
    *gpus_out = gpus;
    return 0;
}

bool cr__sched_vix_next(const cr_sched *s, cr__vix_iter *it, cr__vitem *out)
{
    const cr__vitem *best = it->noh ? &it->oh[0] : NULL;
    vstream *bs = NULL;
    for (int k = 0; k < it->nst; k++) {
        vstream *v = &it->st[k];
        if (stream_fill(s, v, it->now) && (!best || cr__sched_vitem_cmp(&v->buf[v->i], best) < 0)) {
            best = &v->buf[v->i];
            bs = v;
        }
    }
    if (!best) {
        return false;
    }
    *out = *best;
    if (bs) {
        bs->i++;
    } else {
        it->oh[0] = it->oh[--it->noh];
        item_down(it->oh, it->noh, 0);
    }
    return true;
}

void cr__sched_vix_end(cr__vix_iter *it)
{
    if (!it) {
        return;
    }
    for (int k = 0; k < it->nst; k++) {
        free(it->st[k].buf);
    }
    free(it->oh);
    free(it);
}
