/*
 * bench_catalog - catalog load time: read and validate data/gpus/catalog.csv
 * (file read + CSV parse + checks), repeated; plus the price table.
 */
#include "cr_catalog.h"
#include "cr_price.h"
#include "cr_time.h"

#include <stdio.h>

#define ROUNDS 2000

int main(void)
{
    char err[256];
    size_t types = 0;
    int64_t t0 = cr_mono_ns();
    for (int i = 0; i < ROUNDS; i++) {
        cr_catalog *c = NULL;
        if (cr_catalog_load(NULL, &c, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        types = cr_catalog_count(c);
        cr_catalog_free(c);
    }
    int64_t t1 = cr_mono_ns();
    cr_catalog *c = NULL;
    cr_catalog_load(NULL, &c, err, sizeof err);
    int64_t t2 = cr_mono_ns();
    for (int i = 0; i < ROUNDS; i++) {
        cr_prices *p = NULL;
        if (cr_prices_load(NULL, c, &p, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        cr_prices_free(p);
    }
    int64_t t3 = cr_mono_ns();
    cr_catalog_free(c);
    printf("bench_catalog: load + validate %s (%zu types): %.1f us per load (%d rounds)\n",
           cr_catalog_default_path(), types, (double)(t1 - t0) / ROUNDS / 1e3, ROUNDS);
    printf("bench_catalog: price table load: %.1f us per load\n", (double)(t3 - t2) / ROUNDS / 1e3);
    return 0;
}
