/*
 * cr_client.c - the HTTP client: one libcurl easy handle per cr_client,
 * reused across requests so the connection stays open between them.
 */
#include "cr_client.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_config.h"
#include "cr_error.h"
#include "cr_time.h"

#include <curl/curl.h>
#include <pthread.h>
#include <string.h>

/* Answers over this size are cut off with CR_ETOOBIG: the API's lists are
 * bounded, and a runaway server must not exhaust the client's memory. */
#define MAX_ANSWER_BYTES (256u << 20)

struct cr_client {
    CURL *curl;                 /* reused easy handle (keeps the connection) */
    char *server;               /* base URL without trailing '/' */
    char *token;                /* bearer token or NULL */
    char *auth_header;          /* "Authorization: Bearer ..." or NULL */
    char *ca_file;              /* PEM bundle or NULL */
    char *cert_file;            /* client certificate or NULL */
    char *key_file;             /* client key or NULL */
    char *user_agent;           /* User-Agent value */
    bool insecure;              /* skip TLS verification */
    int64_t connect_timeout_ns; /* connect phase limit */
    int64_t timeout_ns;         /* default whole-request limit */
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;

static void global_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

void cr_client_res_init(cr_client_res *r)
{
    memset(r, 0, sizeof *r);
}

void cr_client_res_fini(cr_client_res *r)
{
    if (r->body) {
        json_decref(r->body);
    }
    free(r->raw);
    free(r->error);
    free(r->message);
    free(r->field);
    cr_client_res_init(r);
}

const char *cr_client_res_msg(const cr_client_res *r, int err)
{
    if (r->message && *r->message) {
        return r->message;
    }
    if (r->status) {
        return "server answered with an error and no message";
    }
    return cr_strerror(err);
}

static char *dup_or_null(const char *s)
{
    return s && *s ? cr_strdup(s) : NULL;
}

int cr_client_new(const cr_client_opts *opts, cr_client **out)
{
    const char *server =
        opts && opts->server && *opts->server ? opts->server : CR_CLIENT_DEFAULT_SERVER;
    if (strncmp(server, "http://", 7) != 0 && strncmp(server, "https://", 8) != 0) {
        return CR_EINVAL;
    }
    pthread_once(&global_once, global_init);
    CURL *curl = curl_easy_init();
    if (!curl) {
        return CR_ENOMEM;
    }
    cr_client *c = cr_calloc(1, sizeof *c);
    c->curl = curl;
    c->server = cr_strdup(server);
    size_t n = strlen(c->server);
    while (n > 0 && c->server[n - 1] == '/') {
        c->server[--n] = '\0';
    }
    if (opts) {
        c->ca_file = dup_or_null(opts->ca_file);
        c->cert_file = dup_or_null(opts->cert_file);
        c->key_file = dup_or_null(opts->key_file);
        c->insecure = opts->insecure;
        c->connect_timeout_ns = opts->connect_timeout_ns;
        c->timeout_ns = opts->timeout_ns;
        c->user_agent = dup_or_null(opts->user_agent);
    }
    if (c->connect_timeout_ns <= 0) {
        c->connect_timeout_ns = 5 * CR_NS_PER_SEC;
    }
    if (c->timeout_ns <= 0) {
        c->timeout_ns = 30 * CR_NS_PER_SEC;
    }
    if (!c->user_agent) {
        c->user_agent = cr_strdup("corral/" CR_VERSION);
    }
    cr_client_set_token(c, opts ? opts->token : NULL);
    *out = c;
    return 0;
}

void cr_client_free(cr_client *c)
{
    if (!c) {
        return;
    }
    curl_easy_cleanup(c->curl);
    free(c->server);
    free(c->token);
    free(c->auth_header);
    free(c->ca_file);
    free(c->cert_file);
    free(c->key_file);
    free(c->user_agent);
    free(c);
}

const char *cr_client_server(const cr_client *c)
{
    return c->server;
}

void cr_client_set_token(cr_client *c, const char *token)
{
    CR_FREE(c->token);
    CR_FREE(c->auth_header);
    if (token && *token) {
        c->token = cr_strdup(token);
        c->auth_header = cr_asprintf("Authorization: Bearer %s", token);
    }
}

char *cr_client_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    cr_buf b;
    cr_buf_init(&b);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '_' || *p == '.' || *p == '~') {
            cr_buf_putc(&b, (char)*p);
        } else {
            cr_buf_putc(&b, '%');
            cr_buf_putc(&b, hex[*p >> 4]);
            cr_buf_putc(&b, hex[*p & 15]);
        }
    }
    return cr_buf_take(&b);
}

/* --- One transfer ---------------------------------------------------------- */

typedef struct xfer {
    cr_client *c;         /* borrowed */
    cr_buf body;          /* buffered answer (errors, or non-streaming) */
    cr_client_data_fn fn; /* streaming sink or NULL */
    void *ud;             /* fn's argument */
    bool stopped;         /* fn asked to stop */
    bool too_big;         /* answer exceeded MAX_ANSWER_BYTES */
    int64_t idle_ns;      /* stall limit for streams, 0: none */
    int64_t last_data_ns; /* monotonic time of the last byte */
    bool stalled;         /* idle limit hit */
} xfer;

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
    xfer *x = ud;
    size_t n = size * nmemb;
    x->last_data_ns = cr_mono_ns();
    long status = 0;
    curl_easy_getinfo(x->c->curl, CURLINFO_RESPONSE_CODE, &status);
    if (x->fn && status >= 200 && status < 300) {
        if (n > 0 && x->fn(x->ud, ptr, n) != 0) {
            x->stopped = true;
            return 0; /* makes libcurl abort the transfer */
        }
        return n;
    }
    if (x->body.len + n > MAX_ANSWER_BYTES) {
        x->too_big = true;
        return 0;
    }
    cr_buf_append(&x->body, ptr, n);
    return n;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    xfer *x = ud;
    if (x->idle_ns > 0 && cr_mono_ns() - x->last_data_ns > x->idle_ns) {
        x->stalled = true;
        return 1;
    }
    return 0;
}

static const struct {
    const char *name;
    int code;
} err_names[] = {
#define CR__ERR_NAME(name, msg) {"CR_E" #name, CR_E##name},
    CR_ERRNO_MAP(CR__ERR_NAME)
#undef CR__ERR_NAME
};

static int code_of_answer(long status, const char *name)
{
    if (name) {
        for (size_t i = 0; i < sizeof err_names / sizeof err_names[0]; i++) {
            if (strcmp(err_names[i].name, name) == 0) {
                return err_names[i].code;
            }
        }
    }
    switch (status) {
    case 401:
        return CR_EAUTH;
    case 403:
        return CR_EPERM;
    case 404:
        return CR_ENOENT;
    case 409:
        return CR_ECONFLICT;
    case 413:
        return CR_ETOOBIG;
    case 429:
    case 503:
        return CR_EUNAVAIL;
    default:
        return status >= 500 ? CR_EIO : CR_EINVAL;
    }
}

static char *member_str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? cr_strdup(s) : NULL;
}

/* Parse the buffered answer into res and compute the call's result. */
static int finish_answer(xfer *x, long status, cr_client_res *res)
{
    res->status = status;
    if (x->body.len > 0) {
        res->raw_len = x->body.len;
        res->raw = cr_buf_take(&x->body);
        res->body = json_loadb(res->raw, res->raw_len, JSON_DECODE_ANY, NULL);
    }
    if (status >= 200 && status < 300) {
        return 0;
    }
    if (json_is_object(res->body)) {
        res->error = member_str(res->body, "error");
        res->message = member_str(res->body, "message");
        res->field = member_str(res->body, "field");
    }
    if (!res->message) {
        res->message = cr_asprintf("HTTP %ld", status);
    }
    return code_of_answer(status, res->error);
}

static int perform(cr_client *c, const char *method, const char *path, const json_t *body,
                   int64_t timeout_ns, int64_t idle_ns, cr_client_data_fn fn, void *ud,
                   cr_client_res *res)
{
    int rc = 0;
    char *url = NULL;
    char *payload = NULL;
    struct curl_slist *hdrs = NULL;
    char errbuf[CURL_ERROR_SIZE] = "";
    xfer x = {.c = c, .fn = fn, .ud = ud, .idle_ns = idle_ns, .last_data_ns = cr_mono_ns()};
    cr_buf_init(&x.body);
    cr_client_res_fini(res);

    CURL *h = c->curl;
    curl_easy_reset(h); /* keeps the connection cache; clears options */
    url = cr_asprintf("%s%s", c->server, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_USERAGENT, c->user_agent);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(c->connect_timeout_ns / CR_NS_PER_MS));
    if (timeout_ns == 0) {
        timeout_ns = fn ? 0 : c->timeout_ns;
    }
    if (timeout_ns > 0) {
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(timeout_ns / CR_NS_PER_MS));
    }
    if (c->ca_file) {
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    }
    if (c->cert_file) {
        curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert_file);
    }
    if (c->key_file) {
        curl_easy_setopt(h, CURLOPT_SSLKEY, c->key_file);
    }
    if (c->insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
    if (idle_ns > 0) {
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, &x);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    }
    hdrs = curl_slist_append(hdrs, "Accept: application/json");
    if (c->auth_header) {
        hdrs = curl_slist_append(hdrs, c->auth_header);
    }
    if (strcmp(method, "GET") == 0) {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else {
        if (strcmp(method, "POST") != 0) {
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        }
        if (body || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
            payload = body ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY) : cr_strdup("{}");
            if (!payload) {
                rc = CR_EINVAL;
                goto out;
            }
            hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, payload);
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(payload));
        }
    }
    /* Expect: 100-continue costs a round trip on every POST over 1 KiB. */
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);

    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (cc == CURLE_WRITE_ERROR && x.stopped) {
        res->status = status;
        rc = 0;
        goto out;
    }
    if (cc != CURLE_OK) {
        if (x.too_big) {
            res->status = status;
            res->message = cr_strdup("answer too large");
            rc = CR_ETOOBIG;
        } else if (x.stalled) {
            res->message = cr_strdup("stream stalled: no data within the idle timeout");
            rc = CR_ETIMEDOUT;
        } else if (cc == CURLE_OPERATION_TIMEDOUT) {
            res->message = cr_strdup(*errbuf ? errbuf : curl_easy_strerror(cc));
            rc = CR_ETIMEDOUT;
        } else if (status >= 200 && status < 300 && fn) {
            /* the stream broke after a good start (server went away) */
            res->status = status;
            res->message = cr_strdup(*errbuf ? errbuf : curl_easy_strerror(cc));
            rc = CR_EIO;
        } else {
            res->message = cr_strdup(*errbuf ? errbuf : curl_easy_strerror(cc));
            rc = CR_EUNAVAIL;
        }
        goto out;
    }
    rc = finish_answer(&x, status, res);
out:
    curl_slist_free_all(hdrs);
    free(payload);
    free(url);
    cr_buf_fini(&x.body);
    return rc;
}

int cr_client_request(cr_client *c, const char *method, const char *path, const json_t *body,
                      int64_t timeout_ns, cr_client_res *res)
{
    return perform(c, method, path, body, timeout_ns, 0, NULL, NULL, res);
}

int cr_client_stream(cr_client *c, const char *path, int64_t timeout_ns, int64_t idle_timeout_ns,
                     cr_client_data_fn fn, void *ud, cr_client_res *res)
{
    return perform(c, "GET", path, NULL, timeout_ns, idle_timeout_ns, fn, ud, res);
}
