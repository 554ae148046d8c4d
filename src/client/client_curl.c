/*
 * client_curl.c - https:// through libcurl, loaded with dlopen on first use
 * (see client_int.h for why it is not linked). One easy handle per client,
 * reused across requests so the TLS connection stays open between them.
 */
#include "client_int.h"

#include "cr_alloc.h"
#include "cr_curl.h"
#include "cr_error.h"
#include "cr_time.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* libcurl's entry points (cr_curl.h), set once loaded. */
static const cr_curl_api *api;

struct cr__curl {
    CURL *h; /* the reused easy handle */
};

void cr__client_curl_free(cr__curl *k)
{
    if (k) {
        api->easy_cleanup(k->h);
        free(k);
    }
}

typedef struct sink {
    CURL *h;
    cr__xfer *x;
    bool too_big;
    int64_t last_ns; /* monotonic time of the last byte */
    bool stalled;
    cr_client *c;   /* for its cancel hook */
    bool cancelled; /* the hook said stop */
} sink;

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
    sink *s = ud;
    cr__xfer *x = s->x;
    size_t n = size * nmemb;
    s->last_ns = cr_mono_ns();
    long status = 0;
    api->easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &status);
    if (x->fn && status >= 200 && status < 300) {
        if (n > 0 && x->fn(x->ud, ptr, n) != 0) {
            x->stopped = true;
            return 0; /* makes libcurl abort the transfer */
        }
        return n;
    }
    if (x->answer.len + n > CR__CLIENT_MAX_ANSWER) {
        s->too_big = true;
        return 0;
    }
    cr_buf_append(&x->answer, ptr, n);
    return n;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    sink *s = ud;
    if (s->c->cancel && s->c->cancel(s->c->cancel_ud)) {
        s->cancelled = true;
        return 1;
    }
    if (s->x->idle_ns > 0 && cr_mono_ns() - s->last_ns > s->x->idle_ns) {
        s->stalled = true;
        return 1;
    }
    return 0;
}

int cr__client_curl(cr_client *c, cr__xfer *x)
{
    const char *noload = "";
    if (!(api = cr_curl_get(&noload))) {
        snprintf(x->err, sizeof x->err, "https needs libcurl: %s", noload);
        return CR_ENOTSUP;
    }
    if (!c->curl) {
        CURL *h = api->easy_init();
        if (!h) {
            snprintf(x->err, sizeof x->err, "curl_easy_init failed");
            return CR_ENOMEM;
        }
        c->curl = cr_calloc(1, sizeof *c->curl);
        c->curl->h = h;
    }
    CURL *h = c->curl->h;
    char errbuf[CURL_ERROR_SIZE] = "";
    sink s = {.h = h, .x = x, .last_ns = cr_mono_ns(), .c = c};
    struct curl_slist *hdrs = NULL;
    char *url = cr_asprintf("%s%s", c->server, x->path);
    char *auth = c->token ? cr_asprintf("Authorization: Bearer %s", c->token) : NULL;
    char *idem = x->idem ? cr_asprintf("Idempotency-Key: %s", x->idem) : NULL;

    api->easy_reset(h); /* keeps the connection cache; clears options */
    api->easy_setopt(h, CURLOPT_URL, url);
    api->easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    api->easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    api->easy_setopt(h, CURLOPT_USERAGENT, c->user_agent);
    api->easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
    api->easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    api->easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(c->connect_timeout_ns / CR_NS_PER_MS));
    if (x->timeout_ns > 0) {
        api->easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(x->timeout_ns / CR_NS_PER_MS));
    }
    if (c->ca_file) {
        api->easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    }
    if (c->cert_file) {
        api->easy_setopt(h, CURLOPT_SSLCERT, c->cert_file);
    }
    if (c->key_file) {
        api->easy_setopt(h, CURLOPT_SSLKEY, c->key_file);
    }
    if (c->insecure) {
        api->easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        api->easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    api->easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    api->easy_setopt(h, CURLOPT_WRITEDATA, &s);
    if (x->idle_ns > 0 || c->cancel) {
        api->easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        api->easy_setopt(h, CURLOPT_XFERINFODATA, &s);
        api->easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    }
    hdrs = api->slist_append(hdrs, "Accept: application/json");
    if (auth) {
        hdrs = api->slist_append(hdrs, auth);
    }
    if (idem) {
        hdrs = api->slist_append(hdrs, idem);
    }
    if (strcmp(x->method, "GET") == 0) {
        api->easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(x->method, "POST") != 0) {
        api->easy_setopt(h, CURLOPT_CUSTOMREQUEST, x->method);
    }
    if (x->body) {
        hdrs = api->slist_append(hdrs, "Content-Type: application/json");
        api->easy_setopt(h, CURLOPT_POSTFIELDS, x->body);
        api->easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body_len);
    }
    /* Expect: 100-continue costs a round trip on every POST over 1 KiB */
    hdrs = api->slist_append(hdrs, "Expect:");
    api->easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);

    /* CURLOPT_NOSIGNAL keeps libcurl from ignoring SIGPIPE itself, and TLS
     * writes to a connection the server reset raise it: hold it blocked in
     * this thread while the transfer runs, then drop one it raised (unless
     * one was pending before), so a reset never kills the process. */
    sigset_t pipe_set, old_mask, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
    sigemptyset(&pending);
    sigpending(&pending);
    bool had_pipe = sigismember(&pending, SIGPIPE) == 1;
    CURLcode cc = api->easy_perform(h);
    if (!had_pipe) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) == SIGPIPE) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    long status = 0;
    api->easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    char *redir = NULL;
    if (api->easy_getinfo(h, CURLINFO_REDIRECT_URL, &redir) == CURLE_OK && redir) {
        snprintf(x->location, sizeof x->location, "%s", redir);
    }
    curl_off_t ra = 0; /* Retry-After in seconds (also a date made relative) */
    if (api->easy_getinfo(h, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra > 0 && ra <= 86400) {
        x->retry_s = (unsigned)ra;
    }
    /* Nothing went out when no connection was made. */
    x->sent = cc != CURLE_COULDNT_CONNECT && cc != CURLE_COULDNT_RESOLVE_HOST &&
              cc != CURLE_COULDNT_RESOLVE_PROXY;
    int rc = 0;
    const char *why = *errbuf ? errbuf : api->easy_strerror(cc);
    if (cc == CURLE_OK || (cc == CURLE_WRITE_ERROR && x->stopped)) {
        x->status = status;
    } else if (s.cancelled) {
        snprintf(x->err, sizeof x->err, "cancelled");
        rc = CR_EAGAIN;
    } else if (s.too_big) {
        x->status = status;
        snprintf(x->err, sizeof x->err, "answer too large");
        rc = CR_ETOOBIG;
    } else if (s.stalled) {
        snprintf(x->err, sizeof x->err, "stream stalled: no data within the idle timeout");
        rc = CR_ETIMEDOUT;
    } else if (cc == CURLE_OPERATION_TIMEDOUT) {
        snprintf(x->err, sizeof x->err, "%s", why);
        rc = CR_ETIMEDOUT;
    } else if (status >= 200 && status < 300 && x->fn) {
        x->status = status; /* the stream broke after a good start */
        snprintf(x->err, sizeof x->err, "%s", why);
        rc = CR_EIO;
    } else {
        snprintf(x->err, sizeof x->err, "%s", why);
        rc = CR_EUNAVAIL;
    }
    api->slist_free_all(hdrs);
    free(idem);
    free(auth);
    free(url);
    return rc;
}
