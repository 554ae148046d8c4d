/*
 * http_guard.h - connection deadlines and per-client caps for cr_http
 * (private to src/api).
 *
 * libmicrohttpd's own timeout is an idle timeout: every byte received
 * restarts it, so a client that drips one byte every few seconds keeps a
 * connection (and its memory pool) forever. The guard tracks every
 * connection (MHD_OPTION_NOTIFY_CONNECTION) with a deadline for the phase it
 * is in, and a reaper thread shuts down (shutdown(2), never close: the
 * descriptor stays libmicrohttpd's) the socket of any connection past it;
 * libmicrohttpd then sees the end of the stream and closes it itself.
 *
 *   HEAD: from the accept, or from the end of the previous request on a
 *         kept-alive connection, until the request head is complete:
 *         header_timeout_s (idle wait and head together);
 *   BODY: from the complete head until the whole body has arrived:
 *         body_timeout_s;
 *   NONE: the handler has the request (deferred answers, long-polls) or the
 *         answer is being written: no guard deadline.
 *
 * The per-client cap counts open connections per peer address. A new
 * connection over it takes the place of the oldest idle connection of the
 * same address (waiting for a request head) that never carried an agent's
 * or an admin's request: that one is shut down. Without such a one, up to
 * `reserve` more are admitted, and the server serves only agents' and
 * admins' requests on them; past that the accept policy refuses. Once a
 * request's token is known, the server may charge the connection to it
 * (a per-token cap), so one token cannot hold every connection of an
 * address with requests in progress. Refusals, reaped connections and
 * libmicrohttpd's own complaints (out of descriptors, global limit) are
 * logged as warnings at most once per 10 s each, with the count since.
 *
 * Threading: callbacks run on libmicrohttpd's threads; one mutex guards the
 * table; lock order: the guard's mutex is a leaf (nothing is called under it
 * but shutdown(2)).
 */
#ifndef HTTP_GUARD_H
#define HTTP_GUARD_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct http_guard http_guard;

enum http_guard_phase { HG_NONE = 0, HG_HEAD, HG_BODY };

/* libmicrohttpd's own per-IP cap is set this far above the guard's, as a
 * backstop: its refusals are silent, the guard's are logged. */
#define HG_PER_IP_SLACK 8
/* Longest per-token key (http_guard_charge). */
#define HG_KEY_MAX 24

/* Start the guard (and its reaper thread). header/body in seconds, 0 = no
 * deadline; per_ip 0 = no cap; reserve: connections one address may open
 * over per_ip, for agents' and admins' requests only. Returns a new guard
 * (free with http_guard_free) or NULL when the thread cannot start. */
http_guard *http_guard_new(unsigned header_timeout_s, unsigned body_timeout_s, unsigned per_ip,
                           unsigned reserve);
/* Stop the reaper and free; NULL-safe. Call after MHD_stop_daemon. */
void http_guard_free(http_guard *g);

/* libmicrohttpd callbacks; cls is the guard. */
enum MHD_Result http_guard_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);
void http_guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                       enum MHD_ConnectionNotificationCode toe);
/* The connection's request moved to phase (see above). */
void http_guard_phase(http_guard *g, struct MHD_Connection *conn, enum http_guard_phase phase);
/* The connection was admitted over the per-client cap (in the reserve)
 * and has carried no privileged request: only an agent's or an admin's
 * request may be served on it. */
bool http_guard_reserved(http_guard *g, struct MHD_Connection *conn);
/* The connection carried an agent's or an admin's request: never evicted
 * for a newcomer, and not charged to a token any more. */
void http_guard_privileged(http_guard *g, struct MHD_Connection *conn);
/* Charge the connection to key (borrowed, at most HG_KEY_MAX bytes used):
 * false when key has cap connections already (the connection is then not
 * charged); a connection moves from its previous key. cap 0 = no cap. */
bool http_guard_charge(http_guard *g, struct MHD_Connection *conn, const void *key, size_t len,
                       unsigned cap);
/* A request head refused as malformed (cr_http_strict.h): a warning at
 * most every 10 s with the count; peer and why borrowed (why is static
 * text, never the request's bytes). */
void http_guard_malformed(http_guard *g, const char *peer, const char *why);
/* A libmicrohttpd log line: resource complaints become rate-limited
 * warnings; returns 1 when it handled the line, 0 otherwise. */
int http_guard_log(http_guard *g, const char *line);

#endif
