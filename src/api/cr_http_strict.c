/*
 * cr_http_strict.c - see cr_http_strict.h.
 */
#include "cr_http_strict.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

#define MAX_FIELDS 256 /* header lines checked; a head with more is refused */

char cr_http_bad_uri_mark;

static bool ctl_byte(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

void *cr_http_strict_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)cls;
    (void)conn;
    for (const char *p = uri; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (ctl_byte(c) || c == ' ') {
            return CR_HTTP_BAD_URI;
        }
        if (c == '%' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0 &&
            ctl_byte((unsigned char)(hexval(p[1]) * 16 + hexval(p[2])))) {
            return CR_HTTP_BAD_URI;
        }
    }
    return NULL;
}

/* RFC 9110 tchar. */
static bool tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

typedef struct field {
    const char *key;   /* borrowed from libmicrohttpd */
    size_t key_len;    /* bytes */
    const char *value; /* borrowed; may be NULL */
    size_t value_len;  /* bytes */
} field;

typedef struct fields {
    field f[MAX_FIELDS]; /* in the order received */
    size_t n;            /* used */
    bool over;           /* more than MAX_FIELDS */
} fields;

static enum MHD_Result collect(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_len,
                               const char *value, size_t value_len)
{
    (void)kind;
    fields *fs = cls;
    if (fs->n == MAX_FIELDS) {
        fs->over = true;
        return MHD_NO;
    }
    fs->f[fs->n++] = (field){key, key_len, value, value_len};
    return MHD_YES;
}

/* libmicrohttpd 0.9.7x parses the head in place: every line ends in two
 * NULs where its CRLF was (one where a bare LF was), the colon becomes a
 * NUL, the value starts after the whitespace that follows it, and a folded
 * line is copied elsewhere. So the fields it hands out must lie one after
 * the other in the buffer, from the end of the request line to the empty
 * line, with only that between them. Reads stop at the first mismatch and
 * never go past the empty line that ended the head. */
static const char *scan_layout(const fields *fs, const char *version)
{
    static const char *const bad = "request head lines must end in CRLF, with no obs-fold "
                                   "continuation and no NUL byte";
    const char *p = version + strlen(version);
    if (p[0] != '\0' || p[1] != '\0') {
        return bad;
    }
    p += 2;
    for (size_t i = 0; i < fs->n; i++) {
        const field *f = &fs->f[i];
        if (f->key != p) {
            return bad;
        }
        p += f->key_len;
        if (*p != '\0') {
            return bad;
        }
        p++;
        while (*p == ' ' || *p == '\t') {
            p++;
        }
        if (f->value_len > 0) {
            if (f->value != p) {
                return bad;
            }
            p += f->value_len;
        }
        while (*p == ' ' || *p == '\t') {
            p++;
        }
        if (p[0] != '\0' || p[1] != '\0') {
            return bad;
        }
        p += 2;
    }
    if (p[0] != '\0' || p[1] != '\0') {
        return bad;
    }
    return NULL;
}

static bool in_place_parser(void)
{
    const char *v = MHD_get_version();
    return v && strncmp(v, "0.9.7", 5) == 0;
}

const char *cr_http_strict_head(struct MHD_Connection *conn, const char *method,
                                const char *version)
{
    (void)method;
    fields all; /* on the stack (8 KiB); only n and over need a value */
    fields *fs = &all;
    fs->n = 0;
    fs->over = false;
    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, collect, fs);
    if (fs->over) {
        return "too many header fields";
    }
    size_t ncl = 0, nhost = 0;
    for (size_t i = 0; i < fs->n; i++) {
        const field *f = &fs->f[i];
        if (f->key_len == 0 || strlen(f->key) != f->key_len) {
            return "a header field name is empty or has a NUL byte";
        }
        for (size_t k = 0; k < f->key_len; k++) {
            if (!tchar((unsigned char)f->key[k])) {
                return "a header field name has a byte that is not a token character";
            }
        }
        const char *v = f->value ? f->value : "";
        if (strlen(v) != f->value_len) {
            return "a header field value has a NUL byte";
        }
        for (size_t k = 0; k < f->value_len; k++) {
            unsigned char c = (unsigned char)v[k];
            if (ctl_byte(c) && c != '\t') {
                return "a header field value has a control byte (CR, LF, NUL or DEL)";
            }
        }
        if (strcasecmp(f->key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
            return "Transfer-Encoding is not accepted here: send the body with Content-Length";
        }
        if (strcasecmp(f->key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
            if (++ncl > 1) {
                return "more than one Content-Length";
            }
            if (f->value_len == 0 || strspn(v, "0123456789") != f->value_len) {
                return "Content-Length must be a decimal number";
            }
        }
        if (strcasecmp(f->key, MHD_HTTP_HEADER_HOST) == 0) {
            nhost++;
        }
    }
    if (strcmp(version, MHD_HTTP_VERSION_1_1) == 0 && nhost != 1) {
        return "an HTTP/1.1 request needs exactly one Host header";
    }
    if (nhost > 1) {
        return "more than one Host header";
    }
    if (in_place_parser()) {
        return scan_layout(fs, version);
    }
    return NULL;
}
