/*
 * cr_buf.h - a growable byte/string buffer (caller-owned, cr_buf_init/fini).
 *
 * The contents are always NUL-terminated so data can be used as a C string.
 * Appends never fail (allocation failure aborts, see cr_alloc.h).
 */
#ifndef CR_BUF_H
#define CR_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct cr_buf {
    char *data; /* NUL-terminated contents; NULL until the first append */
    size_t len; /* bytes used, not counting the NUL */
    size_t cap; /* bytes allocated */
} cr_buf;

void cr_buf_init(cr_buf *b);
void cr_buf_fini(cr_buf *b);
void cr_buf_reset(cr_buf *b);
void cr_buf_append(cr_buf *b, const void *data, size_t len);
void cr_buf_puts(cr_buf *b, const char *s);
void cr_buf_putc(cr_buf *b, char c);
/* s (NULL: "") as a JSON string: quoted, '"' and '\\' escaped, control
 * bytes as \u00XX; other bytes as they are (the caller's text is UTF-8). */
void cr_buf_put_jstr(cr_buf *b, const char *s);
void cr_buf_printf(cr_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cr_buf_vprintf(cr_buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Contents as a C string ("" when empty); valid until the next mutation. */
const char *cr_buf_str(const cr_buf *b);
/* Hand the contents to the caller (free with free()); the buffer is reset. */
char *cr_buf_take(cr_buf *b);

#endif
