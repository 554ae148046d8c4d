/*
 * fuzz_sim_tiresias.c - fuzz the simulator's tiresias trace reader: any input either
 * parses or yields an error naming a line, never a crash or a leak.
 */
#include "sim_int.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cr__sim_workload w;
    cr__sim_workload_init(&w);
    char err[512];
    err[0] = '\0';
    int rc = cr__sim_read_tiresias("fuzz", (const char *)data, size, &w, err, sizeof err);
    if (rc != 0 && strncmp(err, "fuzz", 4) != 0) {
        __builtin_trap(); /* every error names the file */
    }
    if (rc == 0) {
        char types[2][CR_SIM_NAME_MAX] = {"V100", "K80"};
        cr__sim_workload_sort(&w);
        cr__sim_workload_resolve(&w, (const char(*)[CR_SIM_NAME_MAX])types, 2, NULL, NULL, err,
                                 sizeof err);
    }
    cr__sim_workload_fini(&w);
    return 0;
}
