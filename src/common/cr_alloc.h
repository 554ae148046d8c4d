/*
 * cr_alloc.h - allocation that never returns NULL.
 *
 * Allocation failure is not a recoverable condition in Corral: every
 * allocator here calls the out-of-memory hook (default: log and abort).
 * Sizes that come from outside input must be bounds-checked by the caller
 * before they reach these functions. CR_FREE frees and nulls the pointer.
 */
#ifndef CR_ALLOC_H
#define CR_ALLOC_H

#include <stddef.h>
#include <stdlib.h>

void *cr_malloc(size_t n);
void *cr_calloc(size_t count, size_t size);
void *cr_realloc(void *p, size_t n);
/* Reallocate an array of count elements of size, checking the product. */
void *cr_reallocarray(void *p, size_t count, size_t size);
/* Returned new (free with free()); s borrowed; NULL in, NULL out. */
char *cr_strdup(const char *s);
char *cr_strndup(const char *s, size_t n);
/* Returned new: printf into a fresh string. */
char *cr_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define CR_FREE(p)                                                                                 \
    do {                                                                                           \
        free(p);                                                                                   \
        (p) = NULL;                                                                                \
    } while (0)

/* Grow a dynamic array (ptr, len, cap) so that one more element fits. */
#define CR_GROW(ptr, len, cap)                                                                     \
    do {                                                                                           \
        if ((len) >= (cap)) {                                                                      \
            (cap) = (cap) ? (cap)*2 : 8;                                                           \
            (ptr) = cr_reallocarray((ptr), (cap), sizeof(*(ptr)));                                 \
        }                                                                                          \
    } while (0)

#endif
