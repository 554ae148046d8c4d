/* Fuzz target: the GPU catalog CSV parser (outside input: --catalog FILE). */
#include "cr_catalog.h"
#include "cr_perf.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cr_catalog *c = NULL;
    char err[256];
    if (cr_catalog_parse((const char *)data, size, "fuzz.csv", &c, err, sizeof err) == 0) {
        /* Whatever parses must be usable: look everything up and estimate. */
        cr_perf_env env = {c, NULL, NULL};
        cr_workload w;
        cr_workload_init(&w);
        w.kind = CR_KIND_INFERENCE;
        w.params = 7e9;
        w.rate_per_s = 1;
        for (size_t i = 0; i < cr_catalog_count(c) && i < 8; i++) {
            const cr_gpu_type *g = cr_catalog_at(c, i);
            (void)cr_catalog_find(c, g->name);
            (void)cr_catalog_find(c, g->alias);
            cr_estimate e;
            (void)cr_perf_estimate(&env, &w, g, 0, &e);
        }
        cr_catalog_free(c);
    }
    return 0;
}
