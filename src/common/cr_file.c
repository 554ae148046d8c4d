/*
 * cr_file.c - a whole file read into memory, bounded (cr_file.h).
 */
#include "cr_file.h"

#include "cr_alloc.h"
#include "cr_error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int cr_file_read(const char *path, size_t max_bytes, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        return CR_EIO;
    }
    int rc = 0;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 4096) {
            cap = cap ? cap * 2 : 65536;
            buf = cr_realloc(buf, cap + 1);
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (n > max_bytes) {
            rc = CR_ETOOBIG;
            goto out;
        }
        if (k == 0) {
            break;
        }
    }
    if (ferror(f)) {
        errno = EIO;
        rc = CR_EIO;
        goto out;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    buf = NULL;
out:
    fclose(f);
    free(buf);
    return rc;
}
