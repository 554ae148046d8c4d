#include "cr_http_parse.h"

#include "cr_error.h"

#include <string.h>

/* tchar from RFC 9110: the bytes allowed in methods and header names. */
static bool is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
        return true;
    }
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Field values: visible bytes, spaces, tabs and obs-text; no controls. */
static bool is_vchar(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
}

bool cr_http_token_eq(const char *s, size_t len, const char *lit)
{
    size_t n = strlen(lit);
    if (n != len) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (lower(s[i]) != lower(lit[i])) {
            return false;
        }
    }
    return true;
}

const cr_http_header *cr_http_find(const cr_http_msg *m, const char *name)
{
    for (size_t i = 0; i < m->header_count; i++) {
        if (cr_http_token_eq(m->headers[i].name, m->headers[i].name_len, name)) {
            return &m->headers[i];
        }
    }
    return NULL;
}

/* End of the head: index just past the empty line, or 0 when not there yet. */
static size_t head_end(const char *buf, size_t len)
{
    const char *p = buf;
    const char *end = buf + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) {
            return 0;
        }
        const char *q = nl + 1;
        if (q < end && *q == '\n') {
            return (size_t)(q + 1 - buf);
        }
        if (q + 1 < end && q[0] == '\r' && q[1] == '\n') {
            return (size_t)(q + 2 - buf);
        }
        if (q + 1 >= end) {
            return 0;
        }
        p = q;
    }
    return 0;
}

/* One line [p, eol) without its line end; returns the start of the next. */
static const char *next_line(const char *p, const char *end, const char **eol)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) {
        *eol = end;
        return end;
    }
    *eol = (nl > p && nl[-1] == '\r') ? nl - 1 : nl;
    return nl + 1;
}

static int parse_version(const char *p, size_t len, int *minor)
{
    if (len != 8 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1')) {
        return CR_EPARSE;
    }
    *minor = p[7] - '0';
    return 0;
}

/* Walk a comma-separated token list (Connection, Transfer-Encoding). */
typedef void (*token_fn)(const char *tok, size_t len, void *ud);

static void each_token(const char *v, size_t len, token_fn fn, void *ud)
{
    size_t i = 0;
    while (i < len) {
        while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) {
            i++;
        }
        size_t s = i;
        while (i < len && v[i] != ',') {
            i++;
        }
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t')) {
            e--;
        }
        if (e > s) {
            fn(v + s, e - s, ud);
        }
    }
}

static void conn_token(const char *tok, size_t len, void *ud)
{
    cr_http_msg *m = ud;
    if (cr_http_token_eq(tok, len, "close")) {
        m->conn_close = true;
    } else if (cr_http_token_eq(tok, len, "keep-alive")) {
        m->keep_alive = true;
    } else if (cr_http_token_eq(tok, len, "upgrade")) {
        m->upgrade = true;
    }
}

typedef struct te_state {
    int count;         /* codings seen */
    int chunked;       /* of which "chunked" */
    bool last_chunked; /* the last coding was chunked */
} te_state;

static void te_token(const char *tok, size_t len, void *ud)
{
    te_state *t = ud;
    t->count++;
    t->last_chunked = cr_http_token_eq(tok, len, "chunked");
    t->chunked += t->last_chunked;
}

static int parse_length(const char *v, size_t len, int64_t *out)
{
    if (len == 0 || len > 18) {
        return CR_EPARSE;
    }
    int64_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9') {
            return CR_EPARSE;
        }
        n = n * 10 + (v[i] - '0');
    }
    *out = n;
    return 0;
}

/* Headers from p to the end of the head; fills m's header list and the
 * framing fields derived from them. */
static int parse_headers(const char *p, const char *end, cr_http_msg *m, bool is_request)
{
    bool keep_alive_token = false;
    te_state te = {0, 0, false};
    bool saw_te = false;
    m->content_length = -1;
    m->header_count = 0;
    m->keep_alive = false;
    while (p < end) {
        const char *eol;
        const char *next = next_line(p, end, &eol);
        if (eol == p) {
            break; /* the empty line */
        }
        if (*p == ' ' || *p == '\t') {
            return CR_EPARSE; /* obsolete line folding */
        }
        const char *colon = memchr(p, ':', (size_t)(eol - p));
        if (!colon || colon == p) {
            return CR_EPARSE;
        }
        for (const char *q = p; q < colon; q++) {
            if (!is_tchar((unsigned char)*q)) {
                return CR_EPARSE;
            }
        }
        const char *v = colon + 1;
        const char *ve = eol;
        while (v < ve && (*v == ' ' || *v == '\t')) {
            v++;
        }
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) {
            ve--;
        }
        for (const char *q = v; q < ve; q++) {
            if (!is_vchar((unsigned char)*q)) {
                return CR_EPARSE;
            }
        }
        if (m->header_count == CR_HTTP_MAX_HEADERS) {
            return CR_ETOOBIG;
        }
        cr_http_header *h = &m->headers[m->header_count++];
        h->name = p;
        h->name_len = (size_t)(colon - p);
        h->value = v;
        h->value_len = (size_t)(ve - v);
        if (cr_http_token_eq(h->name, h->name_len, "content-length")) {
            int64_t n;
            if (parse_length(h->value, h->value_len, &n) != 0) {
                return CR_EPARSE;
            }
            if (m->content_length >= 0 && m->content_length != n) {
                return CR_EPARSE;
            }
            m->content_length = n;
        } else if (cr_http_token_eq(h->name, h->name_len, "transfer-encoding")) {
            saw_te = true;
            each_token(h->value, h->value_len, te_token, &te);
        } else if (cr_http_token_eq(h->name, h->name_len, "connection")) {
            bool before = m->keep_alive;
            m->keep_alive = false;
            each_token(h->value, h->value_len, conn_token, m);
            keep_alive_token |= m->keep_alive;
            m->keep_alive = before;
        } else if (cr_http_token_eq(h->name, h->name_len, "host")) {
            if (m->host) {
                if (is_request) {
                    return CR_EPARSE; /* two Host headers */
                }
            } else {
                m->host = h->value;
                m->host_len = h->value_len;
            }
        } else if (is_request && cr_http_token_eq(h->name, h->name_len, "expect")) {
            m->expect_continue = cr_http_token_eq(h->value, h->value_len, "100-continue");
        }
        p = next;
    }
    if (saw_te) {
        if (te.count == 0 || !te.last_chunked) {
            /* A request we cannot frame; a response without chunked is read to EOF. */
            if (is_request) {
                return CR_EPARSE;
            }
        }
        if (is_request && (m->content_length >= 0 || te.chunked != 1)) {
            /* Both framings, or chunked twice (RFC 9112 6.1, 6.3): refuse. */
            return CR_EPARSE;
        }
        m->chunked = te.last_chunked;
        if (m->chunked) {
            m->content_length = -1; /* chunked wins for responses (RFC 9112 6.3) */
        }
    }
    if (m->minor >= 1) {
        m->keep_alive = !m->conn_close;
    } else {
        m->keep_alive = keep_alive_token && !m->conn_close;
    }
    return 0;
}

static bool saw_transfer_encoding(const cr_http_msg *m)
{
    return cr_http_find(m, "transfer-encoding") != NULL;
}

int cr_http_parse_request(const char *buf, size_t len, cr_http_msg *out)
{
    size_t hl = head_end(buf, len);
    if (hl == 0) {
        /* Reject obvious garbage early instead of waiting for a full head. */
        for (size_t i = 0; i < len && i < 32; i++) {
            unsigned char c = (unsigned char)buf[i];
            if (c == ' ' || c == '\r' || c == '\n') {
                break;
            }
            if (!is_tchar(c)) {
                return CR_EPARSE;
            }
        }
        return 0;
    }
    cr_http_msg m;
    memset(&m, 0, sizeof m);
    const char *p = buf;
    const char *eol;
    /* Tolerate one empty line before a request (RFC 9112 2.2). */
    if (len >= 2 && p[0] == '\r' && p[1] == '\n') {
        p += 2;
    } else if (p[0] == '\n') {
        p += 1;
    }
    hl = head_end(p, len - (size_t)(p - buf));
    if (hl == 0) {
        return 0;
    }
    const char *end = p + hl;
    const char *next = next_line(p, end, &eol);
    const char *sp1 = memchr(p, ' ', (size_t)(eol - p));
    if (!sp1 || sp1 == p) {
        return CR_EPARSE;
    }
    for (const char *q = p; q < sp1; q++) {
        if (!is_tchar((unsigned char)*q)) {
            return CR_EPARSE;
        }
    }
    const char *t = sp1 + 1;
    const char *sp2 = memchr(t, ' ', (size_t)(eol - t));
    if (!sp2 || sp2 == t) {
        return CR_EPARSE;
    }
    for (const char *q = t; q < sp2; q++) {
        unsigned char c = (unsigned char)*q;
        if (c <= 0x20 || c == 0x7f) {
            return CR_EPARSE;
        }
    }
    if (parse_version(sp2 + 1, (size_t)(eol - sp2 - 1), &m.minor) != 0) {
        return CR_EPARSE;
    }
    m.method = p;
    m.method_len = (size_t)(sp1 - p);
    m.target = t;
    m.target_len = (size_t)(sp2 - t);
    int rc = parse_headers(next, end, &m, true);
    if (rc != 0) {
        return rc;
    }
    if (m.minor == 1 && !m.host) {
        return CR_EPARSE; /* RFC 9112 3.2: HTTP/1.1 requires Host */
    }
    if (m.minor == 0 && saw_transfer_encoding(&m)) {
        return CR_EPARSE; /* RFC 9112 6.1: faulty framing from an HTTP/1.0 client */
    }
    m.head_len = (size_t)(end - buf);
    *out = m;
    return (int)m.head_len;
}

int cr_http_parse_response(const char *buf, size_t len, cr_http_msg *out)
{
    size_t hl = head_end(buf, len);
    if (hl == 0) {
        if (len >= 5 && memcmp(buf, "HTTP/", 5) != 0) {
            return CR_EPARSE;
        }
        return 0;
    }
    cr_http_msg m;
    memset(&m, 0, sizeof m);
    const char *end = buf + hl;
    const char *eol;
    const char *next = next_line(buf, end, &eol);
    if (eol - buf < 12 || parse_version(buf, 8, &m.minor) != 0 || buf[8] != ' ') {
        return CR_EPARSE;
    }
    int status = 0;
    for (int i = 9; i < 12; i++) {
        if (buf[i] < '0' || buf[i] > '9') {
            return CR_EPARSE;
        }
        status = status * 10 + (buf[i] - '0');
    }
    if (status < 100 || (eol - buf > 12 && buf[12] != ' ')) {
        return CR_EPARSE;
    }
    m.status = status;
    m.target = eol - buf > 12 ? buf + 13 : eol;
    m.target_len = (size_t)(eol - m.target);
    int rc = parse_headers(next, end, &m, false);
    if (rc != 0) {
        return rc;
    }
    m.head_len = hl;
    *out = m;
    return (int)hl;
}

enum {
    CH_SIZE = 0,     /* hex digits of a chunk size */
    CH_EXT,          /* chunk extension up to the line end */
    CH_SIZE_BWS,     /* whitespace after the size, before ';' */
    CH_SIZE_LF,      /* after CR of the size line */
    CH_DATA,         /* chunk data */
    CH_DATA_CR,      /* CR after data */
    CH_DATA_LF,      /* LF after data */
    CH_TRAILER,      /* start of a trailer line (or the final empty line) */
    CH_TRAILER_LINE, /* inside a trailer field line */
    CH_TRAILER_LF,   /* after CR of a trailer line */
    CH_END_LF,       /* after CR of the final empty line */
    CH_DONE,
};

#define CH_MAX_LINE 4096

/* Bytes allowed inside a chunk extension or trailer line: no controls but
 * tab, so no bare CR or LF (RFC 9112 7.1: every chunk line ends in CRLF). */
static bool line_byte_ok(char ch)
{
    return is_vchar((unsigned char)ch);
}

int cr_http_chunked_scan(cr_http_chunked *c, const char *buf, size_t len, size_t *consumed)
{
    size_t i = 0;
    while (i < len) {
        char ch = buf[i];
        switch (c->state) {
        case CH_SIZE: {
            int d = -1;
            if (ch >= '0' && ch <= '9') {
                d = ch - '0';
            } else if (ch >= 'a' && ch <= 'f') {
                d = ch - 'a' + 10;
            } else if (ch >= 'A' && ch <= 'F') {
                d = ch - 'A' + 10;
            }
            if (d >= 0) {
                if (c->remaining > (UINT64_MAX >> 4) || ++c->line_len > 16) {
                    return CR_EPARSE; /* overflow, or more digits than any sane size */
                }
                c->remaining = c->remaining * 16 + (uint64_t)d;
                i++;
                break;
            }
            if (c->line_len == 0) {
                return CR_EPARSE; /* no digits: leading junk or an empty size line */
            }
            if (ch == ';') {
                c->state = CH_EXT;
            } else if (ch == ' ' || ch == '\t') {
                c->state = CH_SIZE_BWS;
            } else if (ch == '\r') {
                c->state = CH_SIZE_LF;
            } else {
                return CR_EPARSE; /* bare LF, or junk after the size */
            }
            i++;
            break;
        }
        case CH_SIZE_BWS:
            /* Only whitespace before an extension's ';' (BWS in RFC 9112 7.1.1). */
            if (ch == ';') {
                c->state = CH_EXT;
            } else if (ch != ' ' && ch != '\t') {
                return CR_EPARSE;
            } else if (++c->line_len > CH_MAX_LINE) {
                return CR_EPARSE;
            }
            i++;
            break;
        case CH_EXT:
            if (ch == '\r') {
                c->state = CH_SIZE_LF;
            } else if (!line_byte_ok(ch) || ++c->line_len > CH_MAX_LINE) {
                return CR_EPARSE;
            }
            i++;
            break;
        case CH_SIZE_LF:
            if (ch != '\n') {
                return CR_EPARSE;
            }
            c->line_len = 0;
            c->state = c->remaining ? CH_DATA : CH_TRAILER;
            i++;
            break;
        case CH_DATA: {
            size_t take = len - i;
            if ((uint64_t)take > c->remaining) {
                take = (size_t)c->remaining;
            }
            c->remaining -= take;
            i += take;
            if (c->remaining == 0) {
                c->state = CH_DATA_CR;
            }
            break;
        }
        case CH_DATA_CR:
            if (ch != '\r') {
                return CR_EPARSE; /* data must end in CRLF; a bare LF is refused */
            }
            c->state = CH_DATA_LF;
            i++;
            break;
        case CH_DATA_LF:
            if (ch != '\n') {
                return CR_EPARSE;
            }
            c->state = CH_SIZE;
            c->line_len = 0;
            i++;
            break;
        case CH_TRAILER:
            if (ch == '\r') {
                c->state = CH_END_LF;
            } else if (!is_tchar((unsigned char)ch)) {
                return CR_EPARSE; /* a bare LF, or a trailer line not starting with a name */
            } else {
                c->state = CH_TRAILER_LINE;
                c->line_len = 1;
            }
            i++;
            break;
        case CH_TRAILER_LINE:
            if (ch == '\r') {
                c->state = CH_TRAILER_LF;
            } else if (!line_byte_ok(ch) || ++c->line_len > CH_MAX_LINE) {
                return CR_EPARSE;
            }
            i++;
            break;
        case CH_TRAILER_LF:
            if (ch != '\n') {
                return CR_EPARSE;
            }
            c->state = CH_TRAILER;
            i++;
            break;
        case CH_END_LF:
            if (ch != '\n') {
                return CR_EPARSE;
            }
            c->state = CH_DONE;
            *consumed = i + 1;
            return 1;
        default:
            *consumed = 0;
            return 1;
        }
    }
    *consumed = len;
    return 0;
}
