/*
 * fuzz_imgref.c - the image reference parser (cr_imgref.h), used at submit
 * and on the node: any input is refused with a reason, or its fully
 * qualified form parses again to the same form (the agent gives podman
 * only that form).
 */
#include "cr_imgref.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char in[CR_IMGREF_MAX + 2], why[300] = "", full[CR_IMGREF_MAX + 64], again[sizeof full];
    size_t n = size < sizeof in - 1 ? size : sizeof in - 1;
    memcpy(in, data, n);
    in[n] = '\0';
    cr_imgref r, r2;
    if (cr_imgref_parse(in, &r, why, sizeof why) != 0) {
        if (!why[0]) {
            abort(); /* every refusal says why */
        }
        return 0;
    }
    if (cr_imgref_full(&r, full, sizeof full) != 0) {
        return 0;
    }
    if (cr_imgref_parse(full, &r2, why, sizeof why) != 0 ||
        cr_imgref_full(&r2, again, sizeof again) != 0 || strcmp(full, again) != 0 ||
        strchr(full, ' ') || full[0] == '-') {
        abort();
    }
    return 0;
}
