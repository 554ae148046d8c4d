/*
 * fuzz_sim_spec.c - the sim GPU spec parser and the fault-file parser take
 * text from flags and files: any input gives a result or an error, never a
 * crash, and a parsed inventory respects its bounds.
 */
#include "cr_gpu.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    static cr_gpu_info gpus[CR_GPU_MAX];
    size_t n = 0;
    char err[256];
    if (cr_gpu_sim_parse(text, "fuzz", gpus, CR_GPU_MAX, &n, err, sizeof err) == 0) {
        if (n == 0 || n > CR_GPU_MAX) {
            abort();
        }
        for (size_t i = 0; i < n; i++) {
            if (gpus[i].mig_count > CR_GPU_MAX_MIG || gpus[i].index != (int)i) {
                abort();
            }
        }
    }
    cr_gpu_fault faults[8];
    cr_gpu_faults_parse(text, 8, faults, err, sizeof err);
    char prof[32];
    int slices;
    cr_gpu_mig_profile_from_name(text, prof, sizeof prof, &slices);
    char model[64];
    cr_gpu_model_from_nvml(text, model, sizeof model);
    free(text);
    return 0;
}
