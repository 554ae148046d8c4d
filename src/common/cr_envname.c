/*
 * cr_envname.c - see cr_envname.h.
 */
#include "cr_envname.h"

#include <string.h>

bool cr_env_reserved(const char *name, size_t len)
{
    static const char *const prefixes[] = {"CORRAL_", "NVIDIA_", "CUDA_MPS_"};
    static const char *const names[] = {
        "CUDA_VISIBLE_DEVICES", "MASTER_ADDR",      "MASTER_PORT", "WORLD_SIZE", "RANK",
        "LOCAL_RANK",           "LOCAL_WORLD_SIZE", "NODE_RANK",   "GROUP_RANK", "NNODES",
    };
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        size_t pl = strlen(prefixes[i]);
        if (len >= pl && strncmp(name, prefixes[i], pl) == 0) {
            return true;
        }
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strlen(names[i]) == len && strncmp(name, names[i], len) == 0) {
            return true;
        }
    }
    return false;
}
