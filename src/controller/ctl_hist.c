/*
 * ctl_hist.c - the controller's own history: downsampled time series kept
 * in memory, and GET /v1/history.
 *
 * Every step (--history-step, default 10 s) the scheduler thread samples
 * the cluster under mu (GPU utilisation, allocation, the queue, each
 * tenant's share, each node's and GPU's telemetry from the agents' last
 * reports) and writes one value per series. A series holds two fixed-size
 * rings of floats:
 *
 *   fine    one value per step, CTL_HIST_FINE_PTS of them (a day at 10 s)
 *   coarse  the mean of CTL_HIST_COARSE_MUL steps (5 min at 10 s),
 *           CTL_HIST_COARSE_PTS of them (90 days at 5 min)
 *
 * so a series is CTL_HIST_SERIES_BYTES (139,720 bytes: its values, the
 * coarse ring's sum and count per CTL_HIST_BLOCK slots, which a ranking
 * (top=) reads instead of the values, and its header) whatever the
 * cluster does, allocated when its name is first
 * written. GPU series (gpu.*) keep 7 days in their coarse ring
 * (CTL_HIST_GPU_COARSE_PTS; CTL_HIST_GPU_SERIES_BYTES, 42,976 bytes) and
 * have a pool of their own, so however many GPUs come first the cluster,
 * queue, tenant and node series always find room: at most
 * CTL_HIST_SERIES_MAX (2,048) other series and CTL_HIST_GPU_SERIES_MAX
 * (2,048: 512 GPUs' four) GPU series are kept, the later ones counted in
 * hist_dropped and logged once. Worst case 2,048 x 139,720 + 2,048 x
 * 42,976 bytes = 374 MB. A slot holds NaN where nothing was written (the
 * controller was down, or the series did not exist yet); history is not
 * persisted across restarts.
 *
 * Series names and who may read them:
 *   cluster.gpu_util, cluster.gpus_allocated, cluster.gpus_total,
 *   queue.pending, queue.running, queue.wait_s, queue.wait_p50_s,
 *   queue.wait_p90_s, queue.wait_max_s, queue.started,
 *   queue.start_wait_s                                                any token
 *   tenant.NAME.gpus_allocated, tenant.NAME.gpu_util, tenant.NAME.pending,
 *   tenant.NAME.wait_s, tenant.NAME.start_wait_s       admin, or NAME's users
 *   service.NAME@TENANT.{replicas,ready,rps,in_flight}  admin, or TENANT's users
 *   node.NODE.gpu_util, gpu.NODE.IDX.{util,mem_bytes,power_w,temp_c}  admin
 *
 * POST /v1/history (admin) imports points ({"series": [{"name", "points"}]},
 * times rising, past): a day from Prometheus after a restart, a demo's
 * synthetic week; they land in the rings as sampled values would.
 *
 * Locks: the history's own mutex (hist->mu) is taken after c->mu is
 * released, never under it.
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_parse.h"
#include "cr_prom.h"
#include "cr_time.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 160

typedef struct ring {
    float *v;     /* cap values; NaN: none */
    size_t cap;   /* slots */
    int64_t last; /* slot of the newest value; -1: none yet */
    /* The coarse ring's: per CTL_HIST_BLOCK slots of v (by position), the
     * sum and count of the values that are not NaN, kept as v changes; NULL
     * for the fine ring (a range of it is at most a day). */
    double *bsum;
    uint32_t *bcnt;
} ring;

typedef struct series {
    char name[NAME_MAX_LEN];
    char tenant[CTL_NAME_MAX]; /* tenant.* series: the tenant; else "" */
    bool admin_only;           /* node.* and gpu.* */
    ring fine, coarse;
    int64_t cslot; /* the coarse slot csum/cn belong to (the newest) */
    double csum;
    int cn;
    int64_t islot; /* an older coarse slot being imported into (POST), and its sum */
    double isum;
    int icn;
} series;

typedef struct sample {
    char name[NAME_MAX_LEN];
    double v;
} sample;

typedef struct samples {
    sample *a;
    size_t n, cap;
} samples;

struct ctl_hist {
    pthread_mutex_t mu;
    int64_t step_ns;
    int64_t last_slot; /* the last fine slot sampled */
    series **s;        /* in creation order */
    size_t n, ngpu;    /* series, and how many of them are gpu.* */
    uint32_t *slots;   /* open addressing: index + 1 into s, 0 empty */
    size_t nslots;     /* power of two, > 2 x both bounds */
    uint64_t dropped;
    samples pending;      /* a step not yet written: a read held the rings (scheduler thread) */
    int64_t pending_wall; /* its time */
    int64_t last_wall;    /* the last step sampled (wall clock; scheduler thread) */
};

static uint32_t hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) {
        h = (h ^ (unsigned char)*s) * 16777619u;
    }
    return h;
}

static void ring_init(ring *r, size_t cap, bool blocks)
{
    r->v = cr_malloc(cap * sizeof *r->v);
    for (size_t i = 0; i < cap; i++) {
        r->v[i] = NAN;
    }
    r->cap = cap;
    r->last = -1;
    r->bsum = blocks ? cr_calloc(CTL_HIST_BLOCKS(cap), sizeof *r->bsum) : NULL;
    r->bcnt = blocks ? cr_calloc(CTL_HIST_BLOCKS(cap), sizeof *r->bcnt) : NULL;
}

static void ring_fini(ring *r)
{
    free(r->v);
    free(r->bsum);
    free(r->bcnt);
}

/* Position p of r holds v now (its block's sum and count follow; a block
 * left empty starts again from 0, so rounding does not pile up). */
static void ring_set(ring *r, size_t p, float v)
{
    if (r->bsum) {
        size_t b = p / CTL_HIST_BLOCK;
        float old = r->v[p];
        if (old == old) { /* not NaN */
            if (--r->bcnt[b] == 0) {
                r->bsum[b] = 0;
            } else {
                r->bsum[b] -= old;
            }
        }
        if (v == v) {
            r->bsum[b] += v;
            r->bcnt[b]++;
        }
    }
    r->v[p] = v;
}

static void ring_put(ring *r, int64_t slot, float v)
{
    if (slot < 0 || (r->last >= 0 && slot <= r->last - (int64_t)r->cap)) {
        return;
    }
    if (r->last >= 0 && slot > r->last) {
        /* the slots skipped hold nothing: at most one lap to clear */
        int64_t from = slot - r->last > (int64_t)r->cap ? slot - (int64_t)r->cap : r->last;
        for (int64_t s = from + 1; s < slot; s++) {
            ring_set(r, (size_t)(s % (int64_t)r->cap), NAN);
        }
    }
    ring_set(r, (size_t)(slot % (int64_t)r->cap), v);
    if (slot > r->last) {
        r->last = slot;
    }
}

static float ring_get(const ring *r, int64_t slot)
{
    if (r->last < 0 || slot > r->last || slot <= r->last - (int64_t)r->cap || slot < 0) {
        return NAN;
    }
    return r->v[slot % (int64_t)r->cap];
}

ctl_hist *ctl_hist_new(int64_t step_s)
{
    ctl_hist *h = cr_calloc(1, sizeof *h);
    pthread_mutex_init(&h->mu, NULL);
    h->step_ns = step_s * CR_NS_PER_SEC;
    h->last_slot = -1;
    h->nslots = 8192;
    while (h->nslots < 2 * (CTL_HIST_SERIES_MAX + CTL_HIST_GPU_SERIES_MAX)) {
        h->nslots *= 2;
    }
    h->slots = cr_calloc(h->nslots, sizeof *h->slots);
    h->s = cr_calloc(CTL_HIST_SERIES_MAX + CTL_HIST_GPU_SERIES_MAX, sizeof *h->s);
    return h;
}

void ctl_hist_free(ctl_hist *h)
{
    if (!h) {
        return;
    }
    for (size_t i = 0; i < h->n; i++) {
        ring_fini(&h->s[i]->fine);
        ring_fini(&h->s[i]->coarse);
        free(h->s[i]);
    }
    free(h->s);
    free(h->slots);
    free(h->pending.a);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

/* The series named name, NULL when none (create: made, NULL past the bound). h->mu held. */
static series *find(ctl_hist *h, const char *name, bool create)
{
    size_t mask = h->nslots - 1;
    for (size_t i = hash(name) & mask;; i = (i + 1) & mask) {
        uint32_t k = h->slots[i];
        if (k == 0) {
            if (!create) {
                return NULL;
            }
            bool gpu = strncmp(name, "gpu.", 4) == 0;
            if (gpu ? h->ngpu == CTL_HIST_GPU_SERIES_MAX : h->n - h->ngpu == CTL_HIST_SERIES_MAX) {
                if (h->dropped++ == 0) {
                    cr_warn("history: %d %s series kept, '%s' and later ones are not",
                            gpu ? CTL_HIST_GPU_SERIES_MAX : CTL_HIST_SERIES_MAX,
                            gpu ? "GPU" : "other", name);
                }
                return NULL;
            }
            h->ngpu += gpu;
            series *s = cr_calloc(1, sizeof *s);
            snprintf(s->name, sizeof s->name, "%s", name);
            s->admin_only = strncmp(name, "node.", 5) == 0 || strncmp(name, "gpu.", 4) == 0;
            bool svc = strncmp(name, "service.", 8) == 0;
            const char *at = svc ? strchr(name, '@') : NULL;
            const char *sdot = at ? strrchr(at, '.') : NULL;
            if (at && sdot && sdot > at + 1 && (size_t)(sdot - at - 1) < sizeof s->tenant) {
                /* service.NAME@TENANT.what: NAME's tenant (names hold no '@') */
                memcpy(s->tenant, at + 1, (size_t)(sdot - at - 1));
                s->tenant[sdot - at - 1] = '\0';
            } else if (svc) {
                s->admin_only = true; /* no tenant to read it as: admins only */
            } else if (strncmp(name, "tenant.", 7) == 0) {
                const char *dot = strrchr(name + 7, '.');
                size_t len = dot ? (size_t)(dot - (name + 7)) : strlen(name + 7);
                if (len < sizeof s->tenant) {
                    memcpy(s->tenant, name + 7, len);
                    s->tenant[len] = '\0';
                }
            }
            ring_init(&s->fine, CTL_HIST_FINE_PTS, false);
            ring_init(&s->coarse, gpu ? CTL_HIST_GPU_COARSE_PTS : CTL_HIST_COARSE_PTS, true);
            s->cslot = -1;
            s->islot = -1;
            h->s[h->n++] = s;
            h->slots[i] = (uint32_t)h->n;
            return s;
        }
        if (strcmp(h->s[k - 1]->name, name) == 0) {
            return h->s[k - 1];
        }
    }
}

/* A value at slot: the fine ring's slot, and the coarse slot's mean. A
 * coarse slot older than the newest (an import behind live values) has an
 * accumulator of its own, so values imported in time order average too.
 * h->mu held. */
static void put_locked(series *s, int64_t slot, double value)
{
    ring_put(&s->fine, slot, (float)value);
    int64_t cs = slot / CTL_HIST_COARSE_MUL;
    if (cs > s->cslot) {
        s->cslot = cs;
        s->csum = 0;
        s->cn = 0;
    }
    if (cs == s->cslot) {
        s->csum += value;
        s->cn++;
        ring_put(&s->coarse, cs, (float)(s->csum / s->cn));
        return;
    }
    if (cs != s->islot) {
        s->islot = cs;
        s->isum = 0;
        s->icn = 0;
    }
    s->isum += value;
    s->icn++;
    ring_put(&s->coarse, cs, (float)(s->isum / s->icn));
}

int ctl_hist_put(ctl_hist *h, const char *name, int64_t wall_ns, double value)
{
    if (strlen(name) >= NAME_MAX_LEN || wall_ns < 0) {
        return CR_EINVAL;
    }
    int64_t slot = wall_ns / h->step_ns;
    pthread_mutex_lock(&h->mu);
    series *s = find(h, name, true);
    if (s) {
        put_locked(s, slot, value);
    }
    pthread_mutex_unlock(&h->mu);
    return s ? 0 : CR_ENOSPC;
}

size_t ctl_hist_count(ctl_hist *h, uint64_t *dropped)
{
    pthread_mutex_lock(&h->mu);
    size_t n = h->n;
    if (dropped) {
        *dropped = h->dropped;
    }
    pthread_mutex_unlock(&h->mu);
    return n;
}

void ctl_hist_metrics(ctl_hist *h, cr_buf *b)
{
    if (!h) {
        return;
    }
    pthread_mutex_lock(&h->mu);
    size_t gpu = h->ngpu, other = h->n - h->ngpu;
    uint64_t dropped = h->dropped;
    pthread_mutex_unlock(&h->mu);
    cr_prom_family(b, "corral_history_series", "gauge",
                   "Series the history keeps, by pool (gpu: gpu.*; other: the rest).");
    cr_prom_sample(b, "corral_history_series", "kind=\"gpu\"", (double)gpu);
    cr_prom_sample(b, "corral_history_series", "kind=\"other\"", (double)other);
    cr_prom_family(b, "corral_history_bytes", "gauge",
                   "Memory the history's rings take (fixed per series).");
    cr_prom_sample(b, "corral_history_bytes", NULL,
                   (double)(gpu * CTL_HIST_GPU_SERIES_BYTES + other * CTL_HIST_SERIES_BYTES));
    cr_prom_family(b, "corral_history_values_refused_total", "counter",
                   "Values not kept: their series was new and its pool full.");
    cr_prom_sample(b, "corral_history_values_refused_total", NULL, (double)dropped);
}

/* ------------------------------------------------------------------------ */
/* Sampling                                                                  */

static void add(samples *ss, double v, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(samples *ss, double v, const char *fmt, ...)
{
    if (ss->n == ss->cap) {
        ss->cap = ss->cap ? 2 * ss->cap : 256;
        ss->a = cr_realloc(ss->a, ss->cap * sizeof *ss->a);
    }
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(ss->a[ss->n].name, NAME_MAX_LEN, fmt, ap);
    va_end(ap);
    if (len > 0 && len < NAME_MAX_LEN) {
        ss->a[ss->n++].v = v;
    }
}

typedef struct tacc {
    double gpus, util, pending, wait, started, start_wait;
} tacc;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of the n sorted values v (nearest rank); 0 for none. */
static double quantile(const double *v, size_t n, double q)
{
    if (!n) {
        return 0;
    }
    size_t k = (size_t)ceil(q * (double)n);
    return v[k ? k - 1 : 0];
}

typedef struct graw {
    size_t node; /* into the names copied */
    int index;
    double util, mem, power, temp;
} graw;

/* Write a step's samples (h->mu held). */
static void write_locked(ctl_hist *h, const samples *ss, int64_t wall)
{
    int64_t slot = wall / h->step_ns;
    for (size_t i = 0; i < ss->n; i++) {
        series *s = find(h, ss->a[i].name, true);
        if (s) {
            put_locked(s, slot, ss->a[i].v);
        }
    }
}

/* The step's samples into the rings: without waiting while a long read
 * holds them (the scheduler thread samples), kept for the next call
 * instead; a step later it waits. Scheduler thread only. */
static void flush(ctl_hist *h, bool wait)
{
    if (!h->pending.n) {
        return;
    }
    if (wait) {
        pthread_mutex_lock(&h->mu);
    } else if (pthread_mutex_trylock(&h->mu) != 0) {
        return;
    }
    write_locked(h, &h->pending, h->pending_wall);
    pthread_mutex_unlock(&h->mu);
    h->pending.n = 0;
}

void ctl_hist_tick(ctl *c, int64_t now_mono)
{
    (void)now_mono;
    if (!c->hist) {
        return;
    }
    ctl_hist *h = c->hist;
    int64_t wall = ctl_clock_ns(c);
    int64_t slot = wall / h->step_ns;
    if (slot == h->last_slot) {
        flush(h, false);
        return; /* only the scheduler thread samples: no lock for last_slot, pending */
    }
    flush(h, true);
    h->last_slot = slot;
    samples *ss = &h->pending;
    /* Under mu only numbers are copied: the names are made after. */
    pthread_mutex_lock(&c->mu);
    size_t nt = c->ntenants, nn = c->nnodes, ng = 0;
    tacc *ta = cr_calloc(nt + 1, sizeof *ta);
    char(*names)[CTL_NAME_MAX] = cr_calloc(nn + 1, sizeof *names);
    double *nutil = cr_calloc(nn + 1, sizeof *nutil);
    size_t cap = 0;
    for (size_t i = 0; i < nn; i++) {
        cap += c->nodes[i]->ngpus;
    }
    graw *gr = cr_calloc(cap + 1, sizeof *gr);
    double total = 0, alloc = 0, util = 0, pending = 0, running = 0, wsum = 0, wmax = 0;
    for (size_t i = 0; i < nn; i++) {
        const ctl_node *n = c->nodes[i];
        memcpy(names[i], n->name, sizeof names[i]);
        for (size_t k = 0; k < n->ngpus; k++) {
            const ctl_gpu *g = &n->gpus[k];
            total++;
            util += g->util_pct;
            nutil[i] += g->util_pct / (double)n->ngpus;
            gr[ng++] = (graw){.node = i,
                              .index = g->index,
                              .util = g->util_pct,
                              .mem = (double)g->mem_used_bytes,
                              .power = g->power_w,
                              .temp = g->temp_c};
            if (!g->alloc_job) {
                continue;
            }
            alloc++;
            const ctl_job *j = ctl_job_get(c, g->alloc_job);
            for (size_t t = 0; j && t < nt; t++) {
                if (strcmp(c->tenants[t]->name, j->tenant) == 0) {
                    ta[t].gpus++;
                    ta[t].util += g->util_pct;
                    break;
                }
            }
        }
        if (!n->ngpus) {
            nutil[i] = NAN;
        }
    }
    /* Waits: of the jobs pending now (so far), and of those that started
     * since the last step (submit to start; one that started and ended
     * within a step is missed). */
    double started = 0, swsum = 0;
    int64_t since = h->last_wall ? h->last_wall : wall - h->step_ns;
    size_t nw = 0, capw = 0;
    double *waits = NULL;
    size_t jslot = ctl_first_active_slot(c);
    for (ctl_job *j; (j = ctl_job_next(c, &jslot));) {
        ctl_job_state st = ctl_job_shown_state(j);
        tacc *tj = NULL;
        for (size_t t = 0; t < nt; t++) {
            if (strcmp(c->tenants[t]->name, j->tenant) == 0) {
                tj = &ta[t];
                break;
            }
        }
        if (st == JS_RUNNING) {
            running++;
            if (j->start_ns > since && j->start_ns <= wall && j->submit_ns > 0 &&
                j->start_ns >= j->submit_ns) {
                double sw = (double)(j->start_ns - j->submit_ns) / 1e9;
                started++;
                swsum += sw;
                if (tj) {
                    tj->started++;
                    tj->start_wait += sw;
                }
            }
        }
        if (st != JS_PENDING) {
            continue;
        }
        double w =
            j->submit_ns > 0 && wall > j->submit_ns ? (double)(wall - j->submit_ns) / 1e9 : 0;
        pending++;
        wsum += w;
        wmax = w > wmax ? w : wmax;
        if (nw == capw) {
            capw = capw ? 2 * capw : 256;
            waits = cr_realloc(waits, capw * sizeof *waits);
        }
        waits[nw++] = w;
        if (tj) {
            tj->pending++;
            tj->wait += w;
        }
    }
    add(ss, total ? util / total : 0, "cluster.gpu_util");
    add(ss, alloc, "cluster.gpus_allocated");
    add(ss, total, "cluster.gpus_total");
    add(ss, pending, "queue.pending");
    add(ss, running, "queue.running");
    add(ss, pending ? wsum / pending : 0, "queue.wait_s");
    add(ss, wmax, "queue.wait_max_s");
    add(ss, started, "queue.started");
    if (started) { /* none started: no value (a gap, not a wait of 0) */
        add(ss, swsum / started, "queue.start_wait_s");
    }
    for (size_t t = 0; t < nt; t++) {
        const char *tn = c->tenants[t]->name;
        add(ss, ta[t].gpus, "tenant.%s.gpus_allocated", tn);
        add(ss, ta[t].gpus ? ta[t].util / ta[t].gpus : 0, "tenant.%s.gpu_util", tn);
        add(ss, ta[t].pending, "tenant.%s.pending", tn);
        add(ss, ta[t].pending ? ta[t].wait / ta[t].pending : 0, "tenant.%s.wait_s", tn);
        if (ta[t].started) {
            add(ss, ta[t].start_wait / ta[t].started, "tenant.%s.start_wait_s", tn);
        }
    }
    ctl_svc_hist *sv = NULL;
    size_t nsv = ctl_services_hist(c, &sv);
    pthread_mutex_unlock(&c->mu);
    free(ta);
    for (size_t i = 0; i < nsv; i++) {
        const char *sn = sv[i].name, *st = sv[i].tenant;
        add(ss, sv[i].desired, "service.%s@%s.replicas", sn, st);
        add(ss, sv[i].ready, "service.%s@%s.ready", sn, st);
        if (sv[i].has_load) { /* no report in the last minute: a gap, not a load of 0 */
            add(ss, sv[i].rps, "service.%s@%s.rps", sn, st);
            add(ss, sv[i].in_flight, "service.%s@%s.in_flight", sn, st);
        }
    }
    free(sv);
    if (nw > 1) {
        qsort(waits, nw, sizeof *waits, cmp_double); /* out of mu; waits is NULL when none */
    }
    add(ss, quantile(waits, nw, 0.5), "queue.wait_p50_s");
    add(ss, quantile(waits, nw, 0.9), "queue.wait_p90_s");
    free(waits);
    for (size_t i = 0; i < nn; i++) {
        if (!isnan(nutil[i])) {
            add(ss, nutil[i], "node.%s.gpu_util", names[i]);
        }
    }
    for (size_t k = 0; k < ng; k++) {
        const char *nm = names[gr[k].node];
        add(ss, gr[k].util, "gpu.%s.%d.util", nm, gr[k].index);
        add(ss, gr[k].mem, "gpu.%s.%d.mem_bytes", nm, gr[k].index);
        add(ss, gr[k].power, "gpu.%s.%d.power_w", nm, gr[k].index);
        add(ss, gr[k].temp, "gpu.%s.%d.temp_c", nm, gr[k].index);
    }
    free(gr);
    free(nutil);
    free(names);
    h->pending_wall = wall;
    h->last_wall = wall;
    flush(h, false);
}

/* ------------------------------------------------------------------------ */
/* GET /v1/history                                                           */

static bool may_read(const series *s, const cr_principal *p)
{
    if (p->role == CR_ROLE_ADMIN) {
        return true;
    }
    if (s->admin_only) {
        return false;
    }
    return !*s->tenant || strcmp(s->tenant, p->tenant) == 0;
}

static int64_t query_i64(cr_http_req *req, const char *key, int64_t lo, int64_t hi, int64_t dflt,
                         bool *bad)
{
    const char *q = cr_http_query(req, key);
    int64_t v = dflt;
    if (q && cr_parse_i64(q, lo, hi, &v) != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, key,
                      "query '%s': expected an integer %lld..%lld, got '%s'", key, (long long)lo,
                      (long long)hi, q);
        *bad = true;
    }
    return v;
}

/* Matches "a,b,tenant.*": the list's names, each a name or a prefix ending in '*'. */
static bool wanted(const char *list, const char *name)
{
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len && p[len - 1] == '*' ? strncmp(name, p, len - 1) == 0
                                     : strlen(name) == len && strncmp(name, p, len) == 0) {
            return true;
        }
        p += len + (e ? 1 : 0);
    }
    return false;
}

typedef struct ranked {
    size_t i;    /* into h->s */
    double mean; /* over the range asked (top=) */
} ranked;

static int by_mean(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    return x->mean < y->mean ? 1 : x->mean > y->mean ? -1 : (x->i > y->i) - (x->i < y->i);
}

/* The mean of r's values from from to to (unix seconds, res a slot); -1: none.
 * Whole blocks of the coarse ring by their sums, the ends value by value
 * (top= ranks a thousand series of 25,920 slots: 102 blocks each). */
static double range_mean(const ring *r, int64_t from, int64_t to, int64_t res)
{
    if (r->last < 0) {
        return -1;
    }
    int64_t lo = from / res, hi = to / res, oldest = r->last - (int64_t)r->cap + 1;
    lo = lo < oldest ? oldest : lo < 0 ? 0 : lo;
    hi = hi > r->last ? r->last : hi;
    double sum = 0;
    int64_t cnt = 0;
    for (int64_t q = lo; q <= hi;) {
        size_t i = (size_t)(q % (int64_t)r->cap);
        if (r->bsum && i % CTL_HIST_BLOCK == 0) {
            size_t len = r->cap - i < CTL_HIST_BLOCK ? r->cap - i : CTL_HIST_BLOCK;
            if (q + (int64_t)len - 1 <= hi) { /* the whole block is in the range */
                sum += r->bsum[i / CTL_HIST_BLOCK];
                cnt += r->bcnt[i / CTL_HIST_BLOCK];
                q += (int64_t)len;
                continue;
            }
        }
        float v = r->v[i];
        if (v == v) { /* not NaN */
            sum += v;
            cnt++;
        }
        q++;
    }
    return cnt ? sum / (double)cnt : -1;
}

int ctl_hist_read(ctl_hist *h, const ctl_hist_query *q, cr_buf *b, const char **field, char *why,
                  size_t whylen)
{
    int64_t from = q->from, to = q->to, step = q->step, top = q->top, now_s = q->now_s;
    const char *list = q->series;
    int64_t fine_s = h->step_ns / CR_NS_PER_SEC, coarse_s = fine_s * CTL_HIST_COARSE_MUL;
    if (from > to) {
        *field = "from";
        snprintf(why, whylen, "from (%lld) is after to (%lld)", (long long)from, (long long)to);
        return CR_EINVAL;
    }
    if (step == 0) { /* about 240 points */
        step = (to - from) / 240;
    }
    /* the fine ring while it reaches back to from and the step is finer
     * than the coarse one; else the coarse */
    bool fine = step < coarse_s && from > now_s - fine_s * CTL_HIST_FINE_PTS;
    int64_t res = fine ? fine_s : coarse_s;
    step = step < res ? res : (step + res - 1) / res * res;
    int64_t npts = (to - from) / step + 1;
    if (npts > CTL_HIST_POINTS_MAX) {
        *field = "step";
        snprintf(why, whylen,
                 "%lld points per series (from %lld to %lld in steps of %lld s); at most %d",
                 (long long)npts, (long long)from, (long long)to, (long long)step,
                 CTL_HIST_POINTS_MAX);
        return CR_EINVAL;
    }
    from = from / step * step;
    cr_buf_printf(b, "{\"from\":%lld,\"to\":%lld,\"step\":%lld,\"resolution\":%lld,\"series\":[",
                  (long long)from, (long long)to, (long long)step, (long long)res);
    size_t shown = 0;
    pthread_mutex_lock(&h->mu);
    ranked *sel = cr_malloc((h->n + 1) * sizeof *sel);
    size_t nsel = 0;
    for (size_t i = 0; i < h->n; i++) {
        const series *s = h->s[i];
        if (may_read(s, q->p) && (!list || wanted(list, s->name))) {
            sel[nsel].i = i;
            sel[nsel++].mean =
                top && list ? range_mean(fine ? &s->fine : &s->coarse, from, to, res) : 0;
        }
    }
    if (top && list) { /* the top series by their mean over the range, highest first */
        qsort(sel, nsel, sizeof *sel, by_mean);
        nsel = nsel > (size_t)top ? (size_t)top : nsel;
    }
    if (list && (uint64_t)nsel * (uint64_t)npts > CTL_HIST_ANSWER_POINTS_MAX) {
        free(sel);
        pthread_mutex_unlock(&h->mu);
        *field = "series";
        snprintf(why, whylen,
                 "%zu series of %lld points each: at most %d points in all (fewer series, "
                 "top=N, or a longer step)",
                 nsel, (long long)npts, CTL_HIST_ANSWER_POINTS_MAX);
        return CR_EINVAL;
    }
    for (size_t k = 0; k < nsel; k++) {
        const series *s = h->s[sel[k].i];
        cr_buf_puts(b, shown++ ? ",{\"name\":" : "{\"name\":");
        cr_buf_put_jstr(b, s->name);
        if (!list) { /* the names only */
            cr_buf_putc(b, '}');
            continue;
        }
        cr_buf_puts(b, ",\"points\":[");
        const ring *r = fine ? &s->fine : &s->coarse;
        size_t np = 0;
        for (int64_t t = from; t <= to; t += step) {
            /* the mean of the ring's values in [t, t + step), cut at to */
            double sum = 0;
            int cnt = 0;
            int64_t end = t + step > to + 1 ? to + 1 : t + step;
            /* only the slots the ring holds: a range of years costs what
             * the ring's span does */
            int64_t lo = t / res, hi = (end + res - 1) / res; /* [lo, hi) */
            int64_t oldest = r->last - (int64_t)r->cap + 1;
            lo = lo < oldest ? oldest : lo;
            hi = hi > r->last + 1 ? r->last + 1 : hi;
            for (int64_t k2 = lo; r->last >= 0 && k2 < hi; k2++) {
                float v = ring_get(r, k2);
                if (!isnan(v)) {
                    sum += v;
                    cnt++;
                }
            }
            if (cnt) {
                cr_buf_printf(b, "%s[%lld,%.6g]", np++ ? "," : "", (long long)t, sum / cnt);
            }
        }
        cr_buf_puts(b, "]}");
    }
    free(sel);
    pthread_mutex_unlock(&h->mu);
    cr_buf_puts(b, "]}");
    return 0;
}

/* A series name the history could have made: a known prefix, then
 * [A-Za-z0-9._-] (node and tenant names are). */
static bool name_ok(const char *n)
{
    static const char *const prefixes[] = {"cluster.", "queue.", "tenant.",
                                           "node.",    "gpu.",   "service."};
    bool pre = false;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        pre = pre || strncmp(n, prefixes[i], strlen(prefixes[i])) == 0;
    }
    size_t len = strlen(n);
    if (!pre || len >= NAME_MAX_LEN || n[len - 1] == '.') {
        return false;
    }
    /* service.NAME@TENANT.what: one '@', a name before it, a tenant and
     * what after it */
    const char *at = strchr(n, '@');
    if (strncmp(n, "service.", 8) == 0) {
        const char *dot = at ? strrchr(at, '.') : NULL;
        if (!at || at == n + 8 || strchr(at + 1, '@') || !dot || dot == at + 1) {
            return false;
        }
    } else if (at) {
        return false;
    }
    for (const char *p = n; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '_' || *p == '-' || *p == '@')) {
            return false;
        }
    }
    return true;
}

/* POST /v1/history (admin): points from elsewhere (a Prometheus export, a
 * demo's synthetic day), checked whole before any is written. */
static void history_import(ctl *c, cr_http_req *req, const cr_principal *p)
{
    if (p->role != CR_ROLE_ADMIN) {
        ctl_reply_err(req, 403, CR_EPERM, NULL, "only an admin token may import history");
        return;
    }
    size_t len;
    const char *body = cr_http_body(req, &len);
    json_t *v = NULL;
    cr_json_err err;
    if (cr_json_parse_object(body, len, &v, &err) != 0) {
        ctl_reply_jerr(req, &err);
        return;
    }
    json_t *list = json_object_get(v, "series");
    int64_t now_s = ctl_clock_ns(c) / CR_NS_PER_SEC;
    char field[64];
    const char *why = NULL;
    if (json_object_size(v) != 1 || !json_is_array(list)) {
        snprintf(field, sizeof field, "series");
        why = "expected {\"series\": [{\"name\", \"points\": [[unix_s, value], ...]}]}";
    }
    for (size_t i = 0; !why && i < json_array_size(list); i++) {
        json_t *e = json_array_get(list, i);
        const char *name = json_string_value(json_object_get(e, "name"));
        json_t *pts = json_object_get(e, "points");
        snprintf(field, sizeof field, "series[%zu].name", i);
        if (!name || !name_ok(name)) {
            why = "expected cluster.*, queue.*, tenant.*, node.*, gpu.* of [A-Za-z0-9._-] or "
                  "service.NAME@TENANT.*";
            break;
        }
        snprintf(field, sizeof field, "series[%zu].points", i);
        if (!json_is_array(pts) || json_object_size(e) != 2) {
            why = "expected name and points, points an array of [unix_s, value]";
            break;
        }
        int64_t prev = -1;
        for (size_t k = 0; k < json_array_size(pts); k++) {
            json_t *pt = json_array_get(pts, k);
            json_t *t = json_array_get(pt, 0), *x = json_array_get(pt, 1);
            snprintf(field, sizeof field, "series[%zu].points[%zu]", i, k);
            if (json_array_size(pt) != 2 || !json_is_integer(t) || !json_is_number(x) ||
                !isfinite(json_number_value(x))) {
                why = "expected [unix_s, value]: an integer and a finite number";
                break;
            }
            int64_t ts = json_integer_value(t);
            if (ts <= prev || ts < 1 || ts > now_s) {
                why = "times must rise, and be past (unix seconds)";
                break;
            }
            prev = ts;
        }
    }
    if (why) {
        json_decref(v);
        ctl_reply_err(req, 400, CR_EINVAL, field, "%s", why);
        return;
    }
    size_t imported = 0, refused = 0;
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *e = json_array_get(list, i);
        const char *name = json_string_value(json_object_get(e, "name"));
        json_t *pts = json_object_get(e, "points");
        for (size_t k = 0; k < json_array_size(pts); k++) {
            json_t *pt = json_array_get(pts, k);
            int64_t ts = json_integer_value(json_array_get(pt, 0));
            if (ctl_hist_put(c->hist, name, ts * CR_NS_PER_SEC,
                             json_number_value(json_array_get(pt, 1))) == 0) {
                imported++;
            } else {
                refused++;
            }
        }
    }
    json_decref(v);
    ctl_reply_json(
        req, 200,
        json_pack("{s:I,s:I}", "imported", (json_int_t)imported, "refused", (json_int_t)refused));
}

void ctl_route_history(ctl *c, cr_http_req *req, const cr_principal *p)
{
    cr_http_set_route(req, "/v1/history");
    if (p->role != CR_ROLE_ADMIN && p->role != CR_ROLE_USER) {
        ctl_reply_err(req, 403, CR_EPERM, NULL, "history takes an admin or user token");
        return;
    }
    if (strcmp(cr_http_method(req), "POST") == 0) {
        if (!c->hist) {
            ctl_reply_err(req, 503, CR_EAGAIN, NULL, "history is not being kept");
            return;
        }
        history_import(c, req, p);
        return;
    }
    static const char *const params[] = {"series", "from", "to", "step", "top", NULL};
    const char *unknown = cr_http_query_unknown(req, params);
    if (unknown) {
        ctl_reply_err(req, 400, CR_EINVAL, unknown,
                      "query '%s': unknown (series, from, to, step, top)", unknown);
        return;
    }
    ctl_hist *h = c->hist;
    if (!h) {
        ctl_reply_err(req, 503, CR_EAGAIN, NULL, "history is not being kept");
        return;
    }
    const char *list = cr_http_query(req, "series");
    int64_t now_s = ctl_clock_ns(c) / CR_NS_PER_SEC;
    bool bad = false;
    int64_t to = query_i64(req, "to", 0, INT64_MAX / 4, now_s, &bad);
    int64_t from = bad ? 0 : query_i64(req, "from", 0, INT64_MAX / 4, to - 3600, &bad);
    int64_t step = bad ? 0 : query_i64(req, "step", 1, 86400 * 90, 0, &bad);
    int64_t top = bad ? 0 : query_i64(req, "top", 1, CTL_HIST_SERIES_MAX, 0, &bad);
    if (bad) {
        return;
    }
    ctl_hist_query q = {
        .series = list, .from = from, .to = to, .step = step, .top = top, .now_s = now_s, .p = p};
    cr_buf b;
    cr_buf_init(&b);
    const char *field = NULL;
    char why[200];
    if (ctl_hist_read(h, &q, &b, &field, why, sizeof why) != 0) {
        cr_buf_fini(&b);
        ctl_reply_err(req, 400, CR_EINVAL, field, "%s", why);
        return;
    }
    size_t len = b.len;
    cr_http_respond(req, 200, "application/json", cr_buf_take(&b), len);
}
