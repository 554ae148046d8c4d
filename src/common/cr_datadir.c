#include "cr_datadir.h"

#include "cr_config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* True when path is dir itself or below it. */
static int under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return n > 0 && strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

const char *cr_data_dir(char *buf, size_t len)
{
    const char *env = getenv("CORRAL_DATA");
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return buf;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char build[PATH_MAX];
        if (realpath(CR_BUILD_ROOT, build) && under(exe, build)) {
            snprintf(buf, len, "%s/data", CR_SOURCE_DIR);
            return buf;
        }
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char rel[PATH_MAX + 64];
            snprintf(rel, sizeof rel, "%s/%s/gpus/catalog.csv", exe, CR_BINDIR_TO_DATADIR);
            if (access(rel, R_OK) == 0) {
                snprintf(buf, len, "%s/%s", exe, CR_BINDIR_TO_DATADIR);
                return buf;
            }
        }
    }
    snprintf(buf, len, "%s", CR_DATADIR);
    return buf;
}

const char *cr_data_path(const char *rel, char *buf, size_t len)
{
    char dir[PATH_MAX];
    snprintf(buf, len, "%s/%s", cr_data_dir(dir, sizeof dir), rel);
    return buf;
}
