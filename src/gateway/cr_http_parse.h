/*
 * cr_http_parse.h - a small, strict HTTP/1.x message-head parser and chunked-body
 * scanner for the gateway's proxy path.
 *
 * The parser works on a byte buffer that holds the start of a message and
 * never copies: names and values point into the caller's buffer and stay
 * valid as long as it does. It is incremental in the simplest way: call it
 * again with more bytes; it answers 0 until the head (ending with an empty
 * line) is complete. Heads are bounded by the caller's buffer size and by
 * CR_HTTP_MAX_HEADERS.
 *
 * Strictness, because a proxy that reads a message differently from the
 * server behind it can be used to smuggle requests: no obsolete line
 * folding, no whitespace before a header's colon, tokens checked, a
 * Content-Length must be digits only and agree with any repeat, and a
 * request carrying both Transfer-Encoding and Content-Length, or a
 * Transfer-Encoding other than "chunked" (or with chunked twice), is
 * rejected. Bare LF line ends are accepted in heads (as nginx does; the
 * gateway rewrites heads with CRLF, so they never reach a replica); bare CR
 * is not.
 *
 * The chunked scanner does not decode: the gateway forwards chunked bodies
 * as they are, and only needs to know where one ends. Because the bytes go
 * through unchanged, it is strict where a lenient reader and a strict one
 * could disagree (RFC 9112 7.1): every chunk line ends in CRLF (a bare LF
 * is refused), the size is 1-16 hex digits with nothing before it and only
 * whitespace before a ';' extension after it, extensions and trailer lines
 * hold no control bytes, and the data ends in exactly CRLF.
 *
 * Pure functions over caller memory; no allocation; thread-safe.
 */
#ifndef CR_HTTP_PARSE_H
#define CR_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CR_HTTP_MAX_HEADERS 64

typedef struct cr_http_header {
    const char *name;  /* points into the buffer; not NUL-terminated */
    size_t name_len;   /* bytes of name */
    const char *value; /* trimmed of surrounding spaces and tabs */
    size_t value_len;  /* bytes of value */
} cr_http_header;

/* The parts of a request or response head, pointing into the buffer. */
typedef struct cr_http_msg {
    const char *method; /* request: method token; response: NULL */
    size_t method_len;  /* bytes of method */
    const char *target; /* request: request-target; response: reason phrase */
    size_t target_len;  /* bytes of target */
    int minor;          /* HTTP/1.<minor>: 0 or 1 */
    int status;         /* response: status code 100..999; request: 0 */
    cr_http_header headers[CR_HTTP_MAX_HEADERS]; /* in order */
    size_t header_count;                         /* headers used */
    size_t head_len;                             /* bytes of the head, including the empty line */
    int64_t content_length;                      /* -1 when absent */
    bool chunked;                                /* Transfer-Encoding ends in chunked */
    bool keep_alive;                             /* per version and Connection tokens */
    bool conn_close;                             /* Connection: close seen */
    bool expect_continue;                        /* request: Expect: 100-continue */
    bool upgrade;                                /* Connection: upgrade seen */
    const char *host;                            /* Host header value, or NULL */
    size_t host_len;                             /* bytes of host */
} cr_http_msg;

/*
 * Parse a request head from buf[0..len). Returns the head length (> 0) when
 * complete and valid, 0 when more bytes are needed, CR_EPARSE for a
 * malformed head, CR_ETOOBIG when there are more than CR_HTTP_MAX_HEADERS
 * headers. *m is filled on success only.
 */
int cr_http_parse_request(const char *buf, size_t len, cr_http_msg *m);
/* The same for a response head. */
int cr_http_parse_response(const char *buf, size_t len, cr_http_msg *m);

/* Case-insensitive compare of a header name (or any token) with a C string. */
bool cr_http_token_eq(const char *s, size_t len, const char *lit);
/* The first header with this name, or NULL. */
const cr_http_header *cr_http_find(const cr_http_msg *m, const char *name);

/* Where a chunked body ends. Zero-initialise before the first call. */
typedef struct cr_http_chunked {
    int state;          /* internal scanner state */
    uint64_t remaining; /* data bytes left in the current chunk */
    uint32_t line_len;  /* bytes of the current size or trailer line, bounded */
} cr_http_chunked;

/*
 * Scan len more bytes of a chunked body. Returns 1 when the body ends within
 * them (*consumed = bytes up to and including the final CRLF), 0 when it
 * continues (*consumed = len), or CR_EPARSE for a malformed body.
 */
int cr_http_chunked_scan(cr_http_chunked *c, const char *buf, size_t len, size_t *consumed);

#endif
