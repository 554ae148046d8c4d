/*
 * cr_http_strict.h - strict HTTP/1.1 request framing on libmicrohttpd
 * (issue 24): the checks the controller's and the agent's servers make on
 * a request head before libmicrohttpd reads its body or the handler sees
 * it, so that no head a proxy in front could frame differently is served.
 *
 * Refused (400, Connection: close):
 *   - any Transfer-Encoding (the API takes Content-Length bodies only, so
 *     chunked framing, CL+TE and TE lists never reach libmicrohttpd's
 *     lenient chunk parser);
 *   - more than one Content-Length (same or differing), or one that is
 *     not plain digits;
 *   - an HTTP/1.1 request without exactly one Host;
 *   - a header name that is not a token, a value with a control byte
 *     (NUL, CR, LF, DEL; HTAB is allowed);
 *   - a line ended by a bare LF or CR, an obs-fold continuation line, a
 *     NUL inside a line (libmicrohttpd 0.9.7x accepts these and
 *     normalises them away, so they are found in its read buffer: it
 *     parses the head in place, each CRLF becoming two NULs, and the
 *     header pointers it returns must lie one after the other with
 *     exactly that between them; anything else is refused);
 *   - a request target with a control byte, raw or percent-encoded
 *     (%00-%1F, %7F), in the path or the query (cr_http_strict_uri,
 *     given as MHD_OPTION_URI_LOG_CALLBACK).
 * libmicrohttpd itself (MHD_OPTION_STRICT_FOR_CLIENT 1) refuses a missing
 * Host, whitespace before a colon or at the start of the first header,
 * and heads over its buffer (431).
 *
 * Threading: pure functions of the connection, called on libmicrohttpd's
 * threads.
 */
#ifndef CR_HTTP_STRICT_H
#define CR_HTTP_STRICT_H

#include <microhttpd.h>

/* MHD_OPTION_URI_LOG_CALLBACK: returns CR_HTTP_BAD_URI (the initial
 * *con_cls of the access handler) when the raw request target has a
 * control byte, else NULL. cls unused. */
void *cr_http_strict_uri(void *cls, const char *uri, struct MHD_Connection *conn);
extern char cr_http_bad_uri_mark;
#define CR_HTTP_BAD_URI ((void *)&cr_http_bad_uri_mark)

/* NULL when the request head is well framed, else why not (a static
 * string for the 400's message). method and version as libmicrohttpd gave
 * them to the access handler (borrowed). */
const char *cr_http_strict_head(struct MHD_Connection *conn, const char *method,
                                const char *version);

#endif
