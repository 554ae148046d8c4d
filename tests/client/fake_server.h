/*
 * fake_server.h - a tiny real HTTP server (libmicrohttpd, loopback, one
 * thread per connection) for the client and CLI tests.
 *
 * It records every request (method, path, query, Authorization, body) and
 * answers either with a canned response set by the test or, by default,
 * with an echo of the request as JSON:
 *   {"method":"POST","path":"/v1/jobs","query":{"state":"running"},
 *    "auth":"Bearer x","body":<parsed JSON or null>}
 * A redirect mode answers every request with a 307 to another base URL.
 * Special paths: /slow blocks until fake_server_release (or 10 s);
 * /stream answers 200 with the chunks "line 1\n".."line 5\n" in separate
 * writes; /stream-fail answers 404 with an error body.
 */
#ifndef FAKE_SERVER_H
#define FAKE_SERVER_H

#include <jansson.h>
#include <stdint.h>

typedef struct fake_server fake_server;

/* Start on 127.0.0.1 with an ephemeral port; NULL on failure. */
fake_server *fake_server_start(void);
/* The same over HTTPS with a PEM certificate and key (texts, copied). */
fake_server *fake_server_start_tls(const char *cert_pem, const char *key_pem);
void fake_server_stop(fake_server *s);
/* "http[s]://127.0.0.1:PORT" (owned by the server). */
const char *fake_server_url(const fake_server *s);
/* Answer the next requests with status and body (text, copied) until reset;
 * body NULL: empty. */
void fake_server_canned(fake_server *s, unsigned status, const char *body);
/* Answer the next requests with status (a 307) and "Location: base" followed
 * by the request's path, until reset by fake_server_echo. */
void fake_server_redirect(fake_server *s, unsigned status, const char *base);
/* Answer the next n requests 429 (a rate limit's CR_EAGAIN body) with
 * "Retry-After: retry_after_s" (0: without), then as before. */
void fake_server_limit(fake_server *s, unsigned n, unsigned retry_after_s);
/* Back to echo answers. */
void fake_server_echo(fake_server *s);
/* Last request as the echo document (new reference), NULL if none. */
json_t *fake_server_last(fake_server *s);
/* Requests and TCP connections seen so far. */
unsigned fake_server_requests(fake_server *s);
unsigned fake_server_connections(fake_server *s);
/* Let /slow requests finish. */
void fake_server_release(fake_server *s);

#endif
