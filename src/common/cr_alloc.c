#include "cr_alloc.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void oom(size_t n)
{
    fprintf(stderr, "corral: out of memory allocating %zu bytes\n", n);
    abort();
}

void *cr_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        oom(n);
    }
    return p;
}

void *cr_calloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) {
        oom(count * size);
    }
    return p;
}

void *cr_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        oom(n);
    }
    return q;
}

void *cr_reallocarray(void *p, size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size) {
        oom(SIZE_MAX);
    }
    return cr_realloc(p, count * size);
}

char *cr_strdup(const char *s)
{
    if (!s) {
        return NULL;
    }
    size_t n = strlen(s);
    char *d = cr_malloc(n + 1);
    memcpy(d, s, n + 1);
    return d;
}

char *cr_strndup(const char *s, size_t n)
{
    if (!s) {
        return NULL;
    }
    size_t len = strnlen(s, n);
    char *d = cr_malloc(len + 1);
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

char *cr_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char probe[1];
    int n = vsnprintf(probe, sizeof probe, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return cr_strdup("");
    }
    char *s = cr_malloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}
