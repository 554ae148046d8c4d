/*
 * bench_advise - advice per second: every catalog type x 1,000 varied
 * workloads (all kinds, sizes from 1B to 405B, loads and targets drawn
 * from a seeded RNG), and the full ranking (cr_perf_advise) per workload.
 */
#include "cr_catalog.h"
#include "cr_perf.h"
#include "cr_price.h"
#include "cr_rng.h"
#include "cr_time.h"

#include <stdio.h>
#include <stdlib.h>

#define WORKLOADS 1000

static void make_workload(cr_rng *r, cr_workload *w)
{
    static const double sizes[] = {1e9, 3e9, 7e9, 13e9, 34e9, 70e9, 175e9, 405e9};
    cr_workload_init(w);
    w->kind = (int)cr_rng_below(r, CR_KIND__COUNT);
    w->params = sizes[cr_rng_below(r, 8)];
    switch (w->kind) {
    case CR_KIND_PRETRAIN:
        w->tokens = w->params * (5 + 20 * cr_rng_uniform(r));
        break;
    case CR_KIND_FINETUNE:
        w->method = (int)cr_rng_below(r, CR_METHOD__COUNT);
        w->tokens = 1e7 + 1e9 * cr_rng_uniform(r);
        break;
    case CR_KIND_INFERENCE:
        w->rate_per_s = 0.1 + 20 * cr_rng_uniform(r);
        w->prompt_tokens = 100 + (int)cr_rng_below(r, 4000);
        w->output_tokens = 50 + (int)cr_rng_below(r, 1000);
        w->ttft_ns = (200 + (int64_t)cr_rng_below(r, 3000)) * CR_NS_PER_MS;
        w->tenants = 1 + (int)cr_rng_below(r, 8);
        w->precision = cr_rng_below(r, 3) == 0 ? CR_PREC_FP8 : CR_PREC_BF16;
        break;
    case CR_KIND_VISUAL:
        w->streams = 1 + (double)cr_rng_below(r, 500);
        w->needs = cr_rng_below(r, 2) ? CR_NEED_NVENC : 0;
        break;
    default:
        w->work_flops = 1e16 + 1e19 * cr_rng_uniform(r);
        w->needs = w->kind == CR_KIND_HPC ? CR_NEED_FP64 | CR_NEED_ECC : 0;
        break;
    }
}

int main(void)
{
    cr_catalog *c = NULL;
    cr_prices *p = NULL;
    char err[256];
    if (cr_catalog_load(NULL, &c, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (cr_prices_load(NULL, c, &p, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    cr_perf_env env = {c, p, NULL};
    cr_workload *ws = calloc(WORKLOADS, sizeof *ws);
    cr_rng rng;
    cr_rng_seed(&rng, 42);
    for (int i = 0; i < WORKLOADS; i++) {
        make_workload(&rng, &ws[i]);
    }
    size_t types = cr_catalog_count(c);
    long fits = 0, n = 0;
    int64_t t0 = cr_mono_ns();
    for (int i = 0; i < WORKLOADS; i++) {
        for (size_t g = 0; g < types; g++) {
            cr_estimate e;
            if (cr_perf_estimate(&env, &ws[i], cr_catalog_at(c, g), 0, &e) == 0) {
                fits += e.fits;
                n++;
            }
        }
    }
    int64_t t1 = cr_mono_ns();
    for (int i = 0; i < WORKLOADS; i++) {
        cr_advice a;
        if (cr_perf_advise(&env, &ws[i], CR_OBJ_COST, 0, &a) == 0) {
            cr_advice_fini(&a);
        }
    }
    int64_t t2 = cr_mono_ns();
    double s1 = (double)(t1 - t0) / 1e9, s2 = (double)(t2 - t1) / 1e9;
    printf("bench_advise: %zu GPU types x %d workloads = %ld estimates in %.3f s: "
           "%.0f estimates/s (%.1f us each), %ld fit\n",
           types, WORKLOADS, n, s1, n / s1, s1 / n * 1e6, fits);
    printf("bench_advise: %d full rankings (corral advise without the printing) in %.3f s: "
           "%.0f advice/s (%.2f ms each)\n",
           WORKLOADS, s2, WORKLOADS / s2, s2 / WORKLOADS * 1e3);
    free(ws);
    cr_prices_free(p);
    cr_catalog_free(c);
    return 0;
}
