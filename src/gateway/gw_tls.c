/*
 * gw_tls.c - TLS on the client side of the gateway: OpenSSL's libssl (the
 * OpenSSL 3 that libcurl and the JWT verifier use too), loaded with dlopen
 * on the first certificate (gw_ssl_load.c).
 *
 * With --tls-cert and --tls-key the listener speaks only TLS (1.2 and 1.3).
 * The handshake runs inside the first reads of a connection, in the same
 * non-blocking, edge-triggered loop as everything else: gw_client_read and
 * gw_client_writev stand in for read(2) and writev(2) and report "would
 * block" as EAGAIN, so the proxy path is the same with and without TLS.
 *
 * Two things differ from a plain socket. OpenSSL may need to write while
 * the caller reads (a handshake message) or read while it writes; the
 * client then remembers which readiness it waits for (tls_rd_on_wr,
 * tls_wr_on_rd) and gw_client_run retries the other direction once the
 * socket is ready. And a write that would block must be retried with the
 * same bytes: the caller's buffers do not change while bytes of them are
 * pending (the proxy reads more of a response only once all is written),
 * and each call writes at most GW_TLS_RECORD bytes from the same offsets.
 *
 * Reload. SIGHUP builds a fresh SSL_CTX from the same two files; only when
 * the certificate, the key and their match all check out does it replace
 * the one in use, so a half-written or wrong pair keeps the old certificate
 * serving. New connections take the new context; connections open keep the
 * one they shook hands with (OpenSSL counts its references). The listener
 * is never closed.
 *
 * A plain HTTP request on the TLS port (OpenSSL: "http request") gets a
 * plain-text 400 in OpenAI's error shape saying to use https://, as nginx
 * does, and the connection is closed.
 */
#include "gw_int.h"

#include "cr_error.h"
#include "cr_log.h"

#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define GW_TLS_RECORD 16384 /* bytes one write sends at most: one TLS record */

/* ALPN: HTTP/1.1 when the client offers it; otherwise no protocol chosen
 * (a client offering only h2 fails the handshake, as it should). */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    static const unsigned char h11[] = "\x08http/1.1";
    unsigned char *sel = NULL;
    if (SSL_select_next_proto(&sel, outlen, h11, sizeof h11 - 1, in, inlen) ==
        OPENSSL_NPN_NEGOTIATED) {
        *out = sel;
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

/* The last OpenSSL error as text (or what), and the queue cleared. */
static void ssl_reason(char *buf, size_t len, const char *what)
{
    unsigned long e = ERR_peek_last_error();
    if (e) {
        const char *r = ERR_reason_error_string(e);
        snprintf(buf, len, "%s", r ? r : what);
    } else {
        snprintf(buf, len, "%s", what);
    }
    ERR_clear_error();
}

/* A server context from the two PEM files: the context, or NULL with err
 * naming the flag and the reason. serial (hex) and not_after (Unix s)
 * describe the certificate. */
static SSL_CTX *ctx_load(const char *cert, const char *key, char *err, size_t errlen, char *serial,
                         size_t serial_len, int64_t *not_after)
{
    char why[200];
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        ssl_reason(why, sizeof why, "cannot make a TLS context");
        snprintf(err, errlen, "--tls-cert: %s", why);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
    static const unsigned char sid[] = "corral-gateway";
    SSL_CTX_set_session_id_context(ctx, sid, sizeof sid - 1);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        ssl_reason(why, sizeof why, "not a PEM certificate");
        snprintf(err, errlen, "--tls-cert %s: %s", cert, why);
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        ssl_reason(why, sizeof why, "not a PEM private key");
        if (strstr(why, "mismatch")) {
            snprintf(err, errlen, "--tls-key %s: does not match the certificate in --tls-cert %s",
                     key, cert);
        } else {
            snprintf(err, errlen, "--tls-key %s: %s", key, why);
        }
        goto fail;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        snprintf(err, errlen, "--tls-key %s: does not match the certificate in --tls-cert %s", key,
                 cert);
        goto fail;
    }
    X509 *x = SSL_CTX_get0_certificate(ctx);
    serial[0] = '\0';
    *not_after = 0;
    if (x) {
        /* The serial's bytes in hex, as `openssl x509 -serial` prints it. */
        const ASN1_INTEGER *sn = X509_get0_serialNumber(x);
        const unsigned char *d = ASN1_STRING_get0_data(sn);
        int n = ASN1_STRING_length(sn);
        size_t at = 0;
        for (int i = 0; d && i < n && at + 3 <= serial_len; i++) {
            at += (size_t)snprintf(serial + at, serial_len - at, "%02X", d[i]);
        }
        struct tm tm;
        if (ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) == 1) {
            *not_after = (int64_t)timegm(&tm);
        }
    }
    ERR_clear_error();
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

int gw_tls_init(gw *g)
{
    const gw_conf *conf = g->conf;
    if (!conf->tls_cert) {
        return 0;
    }
    const char *why = NULL;
    if (!gw_ssl_load(&why)) {
        fprintf(stderr, "corral gateway: --tls-cert: %s\n", why);
        return CR_EINVAL;
    }
    char err[512];
    SSL_CTX *ctx = ctx_load(conf->tls_cert, conf->tls_key, err, sizeof err, g->tls_serial,
                            sizeof g->tls_serial, &g->tls_not_after);
    if (!ctx) {
        fprintf(stderr, "corral gateway: %s\n", err);
        return CR_EINVAL;
    }
    g->tls_ctx = ctx;
    return 0;
}

void gw_tls_reload(gw *g)
{
    const gw_conf *conf = g->conf;
    if (!g->tls_ctx) {
        return;
    }
    char err[512], serial[sizeof g->tls_serial];
    int64_t not_after = 0;
    SSL_CTX *ctx =
        ctx_load(conf->tls_cert, conf->tls_key, err, sizeof err, serial, sizeof serial, &not_after);
    if (!ctx) {
        g->tls_reloads[1]++;
        cr_error("gateway: TLS reload failed, the certificate in use (serial %s) stays: %s",
                 g->tls_serial, err);
        return;
    }
    SSL_CTX_free(g->tls_ctx); /* connections open hold their own reference */
    g->tls_ctx = ctx;
    g->tls_reloads[0]++;
    snprintf(g->tls_serial, sizeof g->tls_serial, "%s", serial);
    g->tls_not_after = not_after;
    cr_info("gateway: TLS certificate reloaded: serial %s, not after %lld", serial,
            (long long)not_after);
}

void gw_tls_fini(gw *g)
{
    SSL_CTX_free(g->tls_ctx);
    g->tls_ctx = NULL;
}

int gw_tls_accept(gw_client *c)
{
    gw *g = c->g;
    if (!g->tls_ctx) {
        return 0;
    }
    SSL *ssl = SSL_new(g->tls_ctx);
    if (!ssl || SSL_set_fd(ssl, c->io.fd) != 1) {
        SSL_free(ssl);
        ERR_clear_error();
        return CR_ENOMEM;
    }
    SSL_set_accept_state(ssl);
    c->tls = ssl;
    /* The handshake counts as part of the first request head. */
    c->deadline_ns = g->now_ns + g->conf->header_timeout_ns;
    return 0;
}

/* A plain HTTP request reached the TLS port: say so in plain text. The
 * rest of the request is read first (it is on the socket already, sent in
 * one go), so closing does not reset the connection under the answer. */
static void plain_http_answer(gw_client *c)
{
    static const char body[] = "{\"error\":{\"message\":\"this port speaks TLS: use https://\","
                               "\"type\":\"invalid_request_error\",\"param\":null,"
                               "\"code\":\"tls_required\"}}\n";
    char msg[512];
    int n = snprintf(msg, sizeof msg,
                     "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                     "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
                     sizeof body - 1, body);
    char sink[4096];
    for (int i = 0; i < 16 && recv(c->io.fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++) {
    }
    (void)!send(c->io.fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(c->io.fd, SHUT_WR);
}

/* An SSL_read/SSL_write result n <= 0 as read(2)/write(2) would give it. */
static ssize_t tls_fail(gw_client *c, int n, bool reading)
{
    int e = SSL_get_error(c->tls, n);
    switch (e) {
    case SSL_ERROR_WANT_READ:
        if (!reading) {
            c->tls_wr_on_rd = true;
            c->io.can_read = false;
        }
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        if (reading) {
            c->tls_rd_on_wr = true;
            c->io.can_write = false;
        }
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN: /* close_notify */
        ERR_clear_error();
        return 0;
    case SSL_ERROR_SYSCALL:
        c->tls_broken = true;
        ERR_clear_error();
        if (reading && errno == 0) {
            return 0; /* EOF without close_notify: as a plain EOF */
        }
        if (errno == 0) {
            errno = EPIPE;
        }
        return -1;
    default: {
        c->tls_broken = true;
        unsigned long err = ERR_peek_error();
        bool plain = ERR_GET_LIB(err) == ERR_LIB_SSL && ERR_GET_REASON(err) == SSL_R_HTTP_REQUEST;
        if (!SSL_is_init_finished(c->tls)) {
            c->g->tls_errors[plain ? 1 : 0]++;
            if (plain) {
                plain_http_answer(c);
            }
            char why[200];
            ssl_reason(why, sizeof why, "handshake failed");
            cr_debug("gateway: client %s: TLS handshake: %s", c->peer_ip, why);
        } else {
            ERR_clear_error();
        }
        errno = EPROTO;
        return -1;
    }
    }
}

ssize_t gw_client_read(gw_client *c, void *buf, size_t len)
{
    if (!c->tls) {
        return read(c->io.fd, buf, len);
    }
    ERR_clear_error();
    int n = SSL_read(c->tls, buf, len > INT_MAX ? INT_MAX : (int)len);
    return n > 0 ? n : tls_fail(c, n, true);
}

ssize_t gw_client_writev(gw_client *c, const struct iovec *iov, int cnt)
{
    if (!c->tls) {
        return writev(c->io.fd, iov, cnt);
    }
    /* Up to one record: a small response (head and body) goes as one. */
    char rec[GW_TLS_RECORD];
    const void *p = NULL;
    size_t len = 0;
    int first = 0;
    while (first < cnt && iov[first].iov_len == 0) {
        first++;
    }
    if (first == cnt) {
        return 0;
    }
    if (iov[first].iov_len >= GW_TLS_RECORD || first == cnt - 1) {
        p = iov[first].iov_base;
        len = iov[first].iov_len < GW_TLS_RECORD ? iov[first].iov_len : GW_TLS_RECORD;
    } else {
        for (int i = first; i < cnt && len < GW_TLS_RECORD; i++) {
            size_t take =
                iov[i].iov_len < GW_TLS_RECORD - len ? iov[i].iov_len : GW_TLS_RECORD - len;
            memcpy(rec + len, iov[i].iov_base, take);
            len += take;
        }
        p = rec;
    }
    ERR_clear_error();
    int n = SSL_write(c->tls, p, (int)len);
    return n > 0 ? n : tls_fail(c, n, false);
}

void gw_tls_close(gw_client *c)
{
    if (!c->tls) {
        return;
    }
    if (!c->tls_broken && SSL_is_init_finished(c->tls)) {
        ERR_clear_error();
        (void)SSL_shutdown(c->tls); /* one try at close_notify; never waits */
    }
    ERR_clear_error();
    SSL_free(c->tls);
    c->tls = NULL;
}

void gw_tls_metrics(gw *g, cr_buf *o)
{
    if (!g->tls_ctx) {
        return;
    }
    cr_buf_puts(o, "# HELP corral_gateway_tls_cert_not_after_seconds Expiry of the certificate "
                   "served (Unix time).\n"
                   "# TYPE corral_gateway_tls_cert_not_after_seconds gauge\n");
    cr_buf_printf(o, "corral_gateway_tls_cert_not_after_seconds %lld\n",
                  (long long)g->tls_not_after);
    cr_buf_puts(o, "# HELP corral_gateway_tls_reloads_total Certificate reloads on SIGHUP, by "
                   "result.\n"
                   "# TYPE corral_gateway_tls_reloads_total counter\n");
    cr_buf_printf(o, "corral_gateway_tls_reloads_total{result=\"ok\"} %llu\n",
                  (unsigned long long)g->tls_reloads[0]);
    cr_buf_printf(o, "corral_gateway_tls_reloads_total{result=\"failed\"} %llu\n",
                  (unsigned long long)g->tls_reloads[1]);
    cr_buf_puts(o, "# HELP corral_gateway_tls_handshake_errors_total Failed TLS handshakes, by "
                   "reason (plain_http: an HTTP request on the TLS port).\n"
                   "# TYPE corral_gateway_tls_handshake_errors_total counter\n");
    cr_buf_printf(o, "corral_gateway_tls_handshake_errors_total{reason=\"handshake\"} %llu\n",
                  (unsigned long long)g->tls_errors[0]);
    cr_buf_printf(o, "corral_gateway_tls_handshake_errors_total{reason=\"plain_http\"} %llu\n",
                  (unsigned long long)g->tls_errors[1]);
}
