/*
 * fuzz_sim_tput.c - fuzz the reader of Gavel's simulation_throughputs.json.
 */
#include "sim_int.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cr__sim_tput t;
    char err[512];
    if (cr__sim_tput_parse((const char *)data, size, &t, err, sizeof err) == 0) {
        cr__sim_tput_find(&t, "ResNet-18 (batch size 16)", 1);
        cr__sim_tput_fini(&t);
    }
    return 0;
}
