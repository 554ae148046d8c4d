/* Ranking GPU types for a workload (cr_perf_advise) and the throughput
 * vector the scheduler uses. */
#include "cr_perf.h"

#include "cr_alloc.h"
#include "cr_error.h"

#include <stdlib.h>
#include <string.h>

typedef struct ranked {
    cr_estimate e;
    int objective;
    size_t order; /* catalog position: the final tie-break keeps sorting stable */
} ranked;

/* The objective's key: lower is better. Unknown costs sort after every
 * known cost. For services (inference, visual) the time of a window is the
 * same everywhere, so "time" means latency: TPOT, then TTFT. */
static double key(const cr_estimate *e, int objective)
{
    switch (objective) {
    case CR_OBJ_TIME:
        if (e->tpot_ns > 0) {
            return (double)e->tpot_ns;
        }
        return (double)e->time_ns;
    case CR_OBJ_ENERGY:
        return e->energy_j;
    default:
        return cr_known(e->cost_usd) ? e->cost_usd : 1e300;
    }
}

static int cmp_double(double a, double b)
{
    /* Equal within 0.1%: treat as a tie and fall through to the next key. */
    double m = (a > b ? a : b) * 1e-3;
    if (a < b - m) {
        return -1;
    }
    if (a > b + m) {
        return 1;
    }
    return 0;
}

static int cmp_ranked(const void *pa, const void *pb)
{
    const ranked *a = pa, *b = pb;
    int obj = a->objective;
    int c = cmp_double(key(&a->e, obj), key(&b->e, obj));
    if (!c && a->e.wasteful != b->e.wasteful) {
        c = a->e.wasteful - b->e.wasteful;
    }
    if (!c) {
        c = cmp_double(key(&a->e, CR_OBJ_TIME), key(&b->e, CR_OBJ_TIME));
    }
    if (!c) {
        c = cmp_double(key(&a->e, CR_OBJ_COST), key(&b->e, CR_OBJ_COST));
    }
    if (!c) {
        c = a->order < b->order ? -1 : a->order > b->order;
    }
    return c;
}

int cr_perf_advise(const cr_perf_env *env, const cr_workload *w, int objective, int gpu_count,
                   cr_advice *out)
{
    if (!env || !env->catalog || !w || !out || objective < 0 || objective >= CR_OBJ__COUNT) {
        return CR_EINVAL;
    }
    char err[128];
    if (cr_workload_check(w, err, sizeof err) != 0) {
        return CR_EINVAL;
    }
    size_t n = cr_catalog_count(env->catalog);
    ranked *ok = cr_calloc(n ? n : 1, sizeof *ok);
    cr_estimate *bad = cr_calloc(n ? n : 1, sizeof *bad);
    size_t nok = 0, nbad = 0, skipped = 0;
    for (size_t i = 0; i < n; i++) {
        const cr_gpu_type *g = cr_catalog_at(env->catalog, i);
        if (!g->vendor_nvidia) {
            skipped++;
            continue;
        }
        cr_estimate e;
        int rc = cr_perf_estimate(env, w, g, gpu_count, &e);
        if (rc != 0) {
            free(ok);
            free(bad);
            return rc;
        }
        if (e.fits) {
            ok[nok].e = e;
            ok[nok].objective = objective;
            ok[nok].order = i;
            nok++;
        } else {
            bad[nbad++] = e;
        }
    }
    qsort(ok, nok, sizeof *ok, cmp_ranked);
    memset(out, 0, sizeof *out);
    out->ranked = cr_calloc(nok ? nok : 1, sizeof *out->ranked);
    for (size_t i = 0; i < nok; i++) {
        out->ranked[i] = ok[i].e;
    }
    out->ranked_count = nok;
    out->refused = bad;
    out->refused_count = nbad;
    out->skipped = skipped;
    out->objective = objective;
    free(ok);
    return 0;
}

void cr_advice_fini(cr_advice *a)
{
    if (!a) {
        return;
    }
    CR_FREE(a->ranked);
    CR_FREE(a->refused);
    a->ranked_count = a->refused_count = 0;
}

int cr_perf_throughputs(const cr_perf_env *env, const cr_workload *w, int gpu_count, double *out)
{
    if (!env || !env->catalog || !w || !out) {
        return CR_EINVAL;
    }
    int fits = 0;
    for (size_t i = 0; i < cr_catalog_count(env->catalog); i++) {
        cr_estimate e;
        int rc = cr_perf_estimate(env, w, cr_catalog_at(env->catalog, i), gpu_count, &e);
        if (rc != 0) {
            return rc;
        }
        out[i] = e.fits ? e.progress_per_s : 0;
        fits += e.fits;
    }
    return fits;
}
