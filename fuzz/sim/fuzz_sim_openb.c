/*
 * fuzz_sim_openb.c - fuzz the simulator's Alibaba openb CSV reader: the
 * input up to its first NUL-free "\n%%\n" is the node list, the rest the pod
 * list; any input either parses or yields an error naming file, line and
 * field, never a crash or a leak.
 */
#include "sim_int.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data, *sep = NULL;
    for (size_t i = 0; i + 4 <= size && !sep; i++) {
        if (memcmp(text + i, "\n%%\n", 4) == 0) {
            sep = text + i;
        }
    }
    size_t nlen = sep ? (size_t)(sep - text) + 1 : size;
    const char *pods = sep ? sep + 4 : "";
    size_t plen = sep ? size - nlen - 3 : 0;
    char err[512];
    err[0] = '\0';
    size_t ngpus = 0, npods = 0;
    int rc = cr__sim_openb_parse(text, nlen, pods, plen, &ngpus, &npods, err, sizeof err);
    if (rc != 0 && strncmp(err, "nodes:", 6) != 0 && strncmp(err, "pods:", 5) != 0) {
        __builtin_trap(); /* every error names the file */
    }
    if (rc == 0 && ngpus > (size_t)64 * size) {
        __builtin_trap(); /* at most 64 GPUs a line */
    }
    return 0;
}
