/* Fuzz target: the Gavel throughput JSON reader (--throughputs FILE, sim traces). */
#include "cr_gavel.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cr_gavel *g = NULL;
    char err[256];
    if (cr_gavel_parse((const char *)data, size, "fuzz.json", &g, err, sizeof err) == 0) {
        double t, pair[2];
        for (size_t w = 0; w < cr_gavel_worker_count(g); w++) {
            for (size_t j = 0; j < cr_gavel_job_count(g); j++) {
                const char *job = cr_gavel_job(g, j);
                (void)cr_gavel_get(g, cr_gavel_worker(g, w), job, 1, &t);
                (void)cr_gavel_get_pair(g, cr_gavel_worker(g, w), job, 1, cr_gavel_job(g, 0), 1,
                                        pair);
            }
            (void)cr_gavel_worker_alias(cr_gavel_worker(g, w));
        }
        cr_gavel_free(g);
    }
    return 0;
}
