#include "cr_buf.h"

#include "cr_alloc.h"

#include <stdio.h>
#include <string.h>

void cr_buf_init(cr_buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void cr_buf_fini(cr_buf *b)
{
    CR_FREE(b->data);
    b->len = 0;
    b->cap = 0;
}

void cr_buf_reset(cr_buf *b)
{
    b->len = 0;
    if (b->data) {
        b->data[0] = '\0';
    }
}

static void reserve(cr_buf *b, size_t extra)
{
    size_t need = b->len + extra + 1;
    if (need <= b->cap) {
        return;
    }
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        cap *= 2;
    }
    b->data = cr_realloc(b->data, cap);
    b->cap = cap;
}

void cr_buf_append(cr_buf *b, const void *data, size_t len)
{
    reserve(b, len);
    if (len) {
        memcpy(b->data + b->len, data, len);
    }
    b->len += len;
    b->data[b->len] = '\0';
}

void cr_buf_puts(cr_buf *b, const char *s)
{
    cr_buf_append(b, s, strlen(s));
}

void cr_buf_putc(cr_buf *b, char c)
{
    if (b->len + 2 <= b->cap) { /* room for it and the NUL: the common case */
        b->data[b->len++] = c;
        b->data[b->len] = '\0';
        return;
    }
    cr_buf_append(b, &c, 1);
}

void cr_buf_vprintf(cr_buf *b, const char *fmt, va_list ap)
{
    /* Formatted once into the spare room (at least 64 bytes of it), and
     * only a longer text a second time, into room made for it: one
     * vsnprintf per call instead of a measuring one first (a job's stored
     * document makes a dozen of these per submit). */
    reserve(b, 64);
    va_list ap2;
    va_copy(ap2, ap);
    size_t room = b->cap - b->len;
    int n = vsnprintf(b->data + b->len, room, fmt, ap2);
    va_end(ap2);
    if (n <= 0) {
        b->data[b->len] = '\0';
        return;
    }
    if ((size_t)n >= room) {
        reserve(b, (size_t)n);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    }
    b->len += (size_t)n;
}

void cr_buf_printf(cr_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cr_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

const char *cr_buf_str(const cr_buf *b)
{
    return b->data ? b->data : "";
}

char *cr_buf_take(cr_buf *b)
{
    char *s = b->data ? b->data : cr_strdup("");
    cr_buf_init(b);
    return s;
}

void cr_buf_put_jstr(cr_buf *b, const char *s)
{
    cr_buf_putc(b, '"');
    /* runs that need no escape are copied whole */
    const char *run = s ? s : "";
    const unsigned char *p = (const unsigned char *)run;
    for (; *p; p++) {
        if (*p != '"' && *p != '\\' && *p >= 0x20) {
            continue;
        }
        cr_buf_append(b, run, (size_t)((const char *)p - run));
        run = (const char *)p + 1;
        if (*p == '"' || *p == '\\') {
            cr_buf_putc(b, '\\');
            cr_buf_putc(b, (char)*p);
        } else {
            cr_buf_printf(b, "\\u%04x", *p);
        }
    }
    cr_buf_append(b, run, (size_t)((const char *)p - run));
    cr_buf_putc(b, '"');
}
