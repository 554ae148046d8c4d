/*
 * ctl_jw.c - compact JSON written straight into a cr_buf, byte for byte
 * what jansson's json_dumps(..., JSON_COMPACT) writes for the same values.
 *
 * Why: the desired-state document (ctl_desired.c) was built as a tree of
 * jansson values and dumped at every bump of a node, about 95,000
 * instructions an entry (json_pack, the dump, the frees); written here it
 * is a few thousand, and the agents read the same bytes as before.
 *
 * The rules kept from jansson: a string is refused (the writer writes
 * nothing and says so) where json_string() would refuse it (not UTF-8, or
 * an overlong form, a surrogate or past U+10FFFF); '"', '\\' and bytes
 * below 0x20 are escaped (\b \f \n \r \t, else \u00XX in capitals),
 * nothing else; a real is "%.17g" with ".0" added when it has neither '.'
 * nor 'e' and its exponent without '+' or leading zeros; an object's
 * members in jansson's order (the order they were set). A key is written
 * with a comma before it unless the buffer ends in '{' or '['.
 */
#include "ctl_int.h"

#include "cr_alloc.h"

#include <stdio.h>
#include <string.h>

/* The length of the UTF-8 sequence at s (at most lim bytes), 0 when
 * jansson's utf8_check would refuse it. */
static size_t utf8_seq(const unsigned char *s, size_t lim)
{
    unsigned char u = s[0];
    size_t n;
    uint32_t v;
    if (u < 0x80) {
        return 1;
    }
    if (u >= 0xC2 && u <= 0xDF) {
        n = 2;
        v = u & 0x1Fu;
    } else if (u >= 0xE0 && u <= 0xEF) {
        n = 3;
        v = u & 0x0Fu;
    } else if (u >= 0xF0 && u <= 0xF4) {
        n = 4;
        v = u & 0x07u;
    } else {
        return 0; /* a continuation byte, C0/C1, or past F4 */
    }
    if (n > lim) {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if (s[i] < 0x80 || s[i] > 0xBF) {
            return 0;
        }
        v = (v << 6) + (s[i] & 0x3Fu);
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) || (n == 2 && v < 0x80) ||
        (n == 3 && v < 0x800) || (n == 4 && v < 0x10000)) {
        return 0;
    }
    return n;
}

bool ctl_jw_str_ok(const char *s)
{
    if (!s) {
        return false;
    }
    const unsigned char *p = (const unsigned char *)s;
    size_t len = strlen(s);
    for (size_t i = 0; i < len;) {
        size_t k = utf8_seq(p + i, len - i);
        if (k == 0) {
            return false;
        }
        i += k;
    }
    return true;
}

/* Room for n more bytes (and the NUL) at the end of b: the writer puts
 * its bytes there itself, a call per value rather than per byte. */
static char *room(cr_buf *b, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) {
            cap *= 2;
        }
        b->data = cr_realloc(b->data, cap);
        b->cap = cap;
    }
    return b->data + b->len;
}

/* The n bytes written at room()'s pointer are now b's. */
static void took(cr_buf *b, size_t n)
{
    b->len += n;
    b->data[b->len] = '\0';
}

static void put_raw(cr_buf *b, const char *s, size_t n)
{
    memcpy(room(b, n), s, n);
    took(b, n);
}

/* s (len bytes, known good), quoted and escaped as jansson's dump_string
 * does. */
static void put_strn(cr_buf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    char *o = room(b, len * 6 + 2), *start = o; /* (\u00XX: 6 bytes for one) */
    *o++ = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') {
            *o++ = (char)ch;
            continue;
        }
        *o++ = '\\';
        switch (ch) {
        case '"':
        case '\\':
            *o++ = (char)ch;
            break;
        case '\b':
            *o++ = 'b';
            break;
        case '\f':
            *o++ = 'f';
            break;
        case '\n':
            *o++ = 'n';
            break;
        case '\r':
            *o++ = 'r';
            break;
        case '\t':
            *o++ = 't';
            break;
        default:
            memcpy(o, "u00", 3);
            o[3] = hex[ch >> 4];
            o[4] = hex[ch & 15];
            o += 5;
        }
    }
    *o++ = '"';
    took(b, (size_t)(o - start));
}

static void put_str(cr_buf *b, const char *s)
{
    put_strn(b, s, strlen(s));
}

int ctl_jw_str(cr_buf *b, const char *s)
{
    if (!ctl_jw_str_ok(s)) {
        return -1;
    }
    put_str(b, s);
    return 0;
}

void ctl_jw_key(cr_buf *b, const char *key)
{
    if (b->len > 0 && b->data[b->len - 1] != '{' && b->data[b->len - 1] != '[') {
        put_raw(b, ",", 1);
    }
    put_str(b, key);
    put_raw(b, ":", 1);
}

int ctl_jw_kstr(cr_buf *b, const char *key, const char *s)
{
    if (!ctl_jw_str_ok(s)) {
        return -1;
    }
    ctl_jw_key(b, key);
    put_str(b, s);
    return 0;
}

void ctl_jw_int(cr_buf *b, int64_t v)
{
    char num[24];
    char *p = num + sizeof num;
    /* (unsigned: INT64_MIN has no positive twin) */
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) {
        *--p = '-';
    }
    put_raw(b, p, (size_t)(num + sizeof num - p));
}

void ctl_jw_kint(cr_buf *b, const char *key, int64_t v)
{
    ctl_jw_key(b, key);
    ctl_jw_int(b, v);
}

void ctl_jw_ktrue(cr_buf *b, const char *key)
{
    ctl_jw_key(b, key);
    put_raw(b, "true", 4);
}

static void put_real(cr_buf *b, double v)
{
    char num[48];
    int k = snprintf(num, sizeof num, "%.17g", v);
    if (k < 0 || (size_t)k >= sizeof num - 3) {
        return; /* (cannot happen for a finite double) */
    }
    size_t len = (size_t)k;
    if (!strchr(num, '.') && !strchr(num, 'e')) {
        memcpy(num + len, ".0", 3);
        len += 2;
    }
    char *e = strchr(num, 'e');
    if (e) {
        /* jansson: no '+' and no leading zeros in the exponent */
        char *start = e + 1, *end = e + 2;
        if (*start == '-') {
            start++;
        }
        while (*end == '0') {
            end++;
        }
        if (end != start) {
            memmove(start, end, len - (size_t)(end - num) + 1);
            len -= (size_t)(end - start);
        }
    }
    put_raw(b, num, len);
}

void ctl_jw_kreal(cr_buf *b, const char *key, double v)
{
    ctl_jw_key(b, key);
    put_real(b, v);
}

/* jansson's dump of a value, without its per-call set of parents (a
 * hashtable set up and torn down at every json_dump_callback, most of its
 * cost for the small values written here): the values come from parsed or
 * built JSON, which holds no cycles. */
void ctl_jw_json(cr_buf *b, const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *k;
        json_t *x;
        put_raw(b, "{", 1);
        bool first = true;
        json_object_foreach((json_t *)v, k, x)
        {
            if (!first) {
                put_raw(b, ",", 1);
            }
            first = false;
            put_str(b, k);
            put_raw(b, ":", 1);
            ctl_jw_json(b, x);
        }
        put_raw(b, "}", 1);
        break;
    }
    case JSON_ARRAY:
        put_raw(b, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) {
                put_raw(b, ",", 1);
            }
            ctl_jw_json(b, json_array_get(v, i));
        }
        put_raw(b, "]", 1);
        break;
    case JSON_STRING:
        put_strn(b, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        ctl_jw_int(b, (int64_t)json_integer_value(v));
        break;
    case JSON_REAL:
        put_real(b, json_real_value(v));
        break;
    case JSON_TRUE:
        put_raw(b, "true", 4);
        break;
    case JSON_FALSE:
        put_raw(b, "false", 5);
        break;
    case JSON_NULL:
        put_raw(b, "null", 4);
        break;
    }
}

void ctl_jw_kjson(cr_buf *b, const char *key, const json_t *v)
{
    if (v) {
        ctl_jw_key(b, key);
        ctl_jw_json(b, v);
    }
}

char *ctl_jw_dumps(const json_t *v)
{
    if (!json_is_object(v) && !json_is_array(v)) {
        return NULL; /* as json_dumps without JSON_ENCODE_ANY */
    }
    cr_buf b;
    cr_buf_init(&b);
    room(&b, 255);
    ctl_jw_json(&b, v);
    return cr_buf_take(&b);
}
