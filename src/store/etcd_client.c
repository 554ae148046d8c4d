/*
 * etcd_client.c - etcd v3 over its gRPC gateway (JSON on HTTP/1.1) through
 * libcurl loaded with dlopen; see cr_etcd.h for the contract.
 *
 * Lock order: e->mu (the handle pool and the current endpoint) is never
 * held across a transfer.
 */
#include "cr_etcd.h"

#include "cr_alloc.h"
#include "cr_curl.h"
#include "cr_buf.h"
#include "cr_error.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* libcurl's entry points (cr_curl.h), set once loaded. */
static const cr_curl_api *api;

/* Handles kept for reuse (their connections stay open). */
#define POOL_MAX 8

struct cr_etcd {
    char *ep[CR_ETCD_MAX_ENDPOINTS]; /* owned base URLs, no trailing '/' */
    size_t nep;
    size_t cur;              /* endpoint that answered last; under mu */
    CURL *pool[POOL_MAX];    /* idle handles; under mu */
    size_t npool;            /* under mu */
    pthread_mutex_t mu;      /* guards cur, the pool and the token */
    long connect_ms, req_ms; /* timeouts */
    bool tls;                /* https endpoints */
    cr_etcd_sec sec;         /* a copy; the password wiped by cr_etcd_free */
    /* Authentication (sec.user set): the token under mu; token_gen counts
     * authentications, so that a thread that saw a stale token knows
     * whether another thread has already replaced it. auth_off: etcd said
     * its authentication is not enabled (calls go without a token). */
    char token[CR_ETCD_TOKEN_MAX];
    uint64_t token_gen;
    bool auth_off;
    pthread_mutex_t auth_mu; /* one authentication at a time; before mu */
};

static _Thread_local char last_err[512];
/* Set by cr__etcd_parse_error when etcd refused the token itself (invalid,
 * expired, older than its auth store, or none sent while auth is on): a
 * new authentication may cure it. */
static _Thread_local bool token_refused;

const char *cr_etcd_last_error(void)
{
    return last_err;
}

__attribute__((format(printf, 2, 3))) static int fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_err, sizeof last_err, fmt, ap);
    va_end(ap);
    return code;
}

int cr_etcd_new(const char *endpoints, const cr_etcd_opts *opts, cr_etcd **out)
{
    last_err[0] = '\0';
    if (!endpoints || !*endpoints) {
        return fail(CR_EINVAL, "etcd: no endpoint given");
    }
    cr_etcd *e = cr_calloc(1, sizeof *e);
    int rc = 0;
    const char *p = endpoints;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        while (n > 0 && p[n - 1] == '/') {
            n--;
        }
        if (n == 0) {
            rc = fail(CR_EINVAL, "etcd: empty endpoint in \"%s\"", endpoints);
            goto out;
        }
        size_t skip = strncmp(p, "https://", 8) == 0 ? 8 : strncmp(p, "http://", 7) == 0 ? 7 : 0;
        if (skip == 0 || n <= skip || n > 255) {
            rc = fail(CR_EINVAL,
                      "etcd: endpoint \"%.*s\" is not http://HOST:PORT or https://HOST:PORT",
                      (int)(n > 255 ? 255 : n), p);
            goto out;
        }
        if (e->nep > 0 && (skip == 8) != e->tls) {
            rc = fail(CR_EINVAL,
                      "etcd: endpoints mix http:// and https:// (\"%s\" and \"%.*s\"): give every "
                      "member with the same scheme",
                      e->ep[0], (int)n, p);
            goto out;
        }
        e->tls = skip == 8;
        for (size_t i = skip; i < n; i++) {
            char c = p[i];
            if (!(c == '.' || c == ':' || c == '-' || c == '[' || c == ']' || c == '_' ||
                  (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
                rc = fail(CR_EINVAL, "etcd: endpoint \"%.*s\" has a bad character", (int)n, p);
                goto out;
            }
        }
        if (e->nep == CR_ETCD_MAX_ENDPOINTS) {
            rc = fail(CR_EINVAL, "etcd: more than %d endpoints", CR_ETCD_MAX_ENDPOINTS);
            goto out;
        }
        e->ep[e->nep++] = cr_strndup(p, n);
        p = comma ? comma + 1 : p + strlen(p);
    }
    const cr_etcd_sec *sec = opts ? opts->sec : NULL;
    if (sec && !e->tls && (*sec->cacert || *sec->cert || *sec->key)) {
        rc = fail(CR_EINVAL,
                  "etcd: --etcd-cacert, --etcd-cert and --etcd-key are for https:// "
                  "endpoints; \"%s\" is http://",
                  e->ep[0]);
        goto out;
    }
    if (sec && *sec->user && !sec->loaded) {
        rc = fail(CR_EINVAL, "etcd: --etcd-user without its password loaded "
                             "(--etcd-password-file)");
        goto out;
    }
    if (sec) {
        e->sec = *sec;
    }
    const char *why = "";
    if (!(api = cr_curl_get(&why))) {
        rc = fail(CR_EUNAVAIL, "etcd needs libcurl: %s", why);
        goto out;
    }
    e->connect_ms = opts && opts->connect_timeout_ms > 0 ? (long)opts->connect_timeout_ms : 1000;
    e->req_ms = opts && opts->request_timeout_ms > 0 ? (long)opts->request_timeout_ms : 5000;
    pthread_mutex_init(&e->mu, NULL);
    pthread_mutex_init(&e->auth_mu, NULL);
out:
    if (rc != 0) {
        for (size_t i = 0; i < e->nep; i++) {
            free(e->ep[i]);
        }
        cr_etcd_sec_wipe(&e->sec);
        free(e);
        return rc;
    }
    *out = e;
    return 0;
}

void cr_etcd_free(cr_etcd *e)
{
    if (!e) {
        return;
    }
    for (size_t i = 0; i < e->npool; i++) {
        api->easy_cleanup(e->pool[i]);
    }
    for (size_t i = 0; i < e->nep; i++) {
        free(e->ep[i]);
    }
    cr_etcd_sec_wipe(&e->sec);
    explicit_bzero(e->token, sizeof e->token);
    pthread_mutex_destroy(&e->mu);
    pthread_mutex_destroy(&e->auth_mu);
    free(e);
}

const char *cr_etcd_endpoint(cr_etcd *e)
{
    pthread_mutex_lock(&e->mu);
    const char *s = e->ep[e->cur];
    pthread_mutex_unlock(&e->mu);
    return s;
}

bool cr_etcd_tls(const cr_etcd *e)
{
    return e->tls;
}

/* ------------------------------------------------------------------------ */
/* base64 (standard alphabet, padded), as the gateway carries bytes         */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const void *data, size_t len)
{
    const unsigned char *d = data;
    char *out = cr_malloc((len + 2) / 3 * 4 + 1);
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16;
        if (i + 1 < len) {
            v |= (uint32_t)d[i + 1] << 8;
        }
        if (i + 2 < len) {
            v |= d[i + 2];
        }
        out[o++] = b64[(v >> 18) & 63];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = i + 1 < len ? b64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? b64[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

static int b64_val(char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decodes s (padded standard base64); *out new (NUL-terminated, free with
 * free()). 0 or CR_EPARSE. */
static int b64_decode(const char *s, char **out, size_t *out_len)
{
    size_t n = strlen(s);
    if (n % 4 != 0) {
        return CR_EPARSE;
    }
    char *d = cr_malloc(n / 4 * 3 + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int k = 0; k < 4; k++) {
            v[k] = b64_val(s[i + k]);
        }
        bool last = i + 4 == n;
        bool pad2 = last && s[i + 2] == '=' && s[i + 3] == '=';
        bool pad1 = last && !pad2 && s[i + 3] == '=';
        if (v[0] < 0 || v[1] < 0 || (v[2] < 0 && !pad2) || (v[3] < 0 && !pad1 && !pad2)) {
            free(d);
            return CR_EPARSE;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12;
        d[o++] = (char)(w >> 16);
        if (!pad2) {
            w |= (uint32_t)v[2] << 6;
            d[o++] = (char)(w >> 8 & 0xff);
            if (!pad1) {
                w |= (uint32_t)v[3];
                d[o++] = (char)(w & 0xff);
            }
        }
    }
    d[o] = '\0';
    *out = d;
    *out_len = o;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Reply parsing                                                            */

/* A 64-bit field: the gateway writes them as decimal strings; a JSON
 * integer is taken too; absent = 0 (proto3 omits zero values). */
static int get_i64(json_t *o, const char *name, int64_t *out)
{
    json_t *v = json_object_get(o, name);
    *out = 0;
    if (!v || json_is_null(v)) {
        return 0;
    }
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return 0;
    }
    if (!json_is_string(v)) {
        return fail(CR_EPARSE, "etcd: field \"%s\" is not a number", name);
    }
    const char *s = json_string_value(v);
    char *end = NULL;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0') {
        return fail(CR_EPARSE, "etcd: field \"%s\" is not a number: \"%.40s\"", name, s);
    }
    *out = (int64_t)x;
    return 0;
}

static int get_b64(json_t *o, const char *name, char **out, size_t *out_len)
{
    json_t *v = json_object_get(o, name);
    if (!v) {
        *out = cr_strdup("");
        *out_len = 0;
        return 0;
    }
    if (!json_is_string(v) || b64_decode(json_string_value(v), out, out_len) != 0) {
        return fail(CR_EPARSE, "etcd: field \"%s\" is not base64", name);
    }
    return 0;
}

void cr_etcd_range_result_fini(cr_etcd_range_result *r)
{
    if (!r) {
        return;
    }
    for (size_t i = 0; i < r->n; i++) {
        free(r->kvs[i].key);
        free(r->kvs[i].value);
    }
    free(r->kvs);
    memset(r, 0, sizeof *r);
}

static int parse_header_rev(json_t *root, int64_t *revision)
{
    json_t *h = json_object_get(root, "header");
    if (!json_is_object(h)) {
        return fail(CR_EPARSE, "etcd: reply has no header");
    }
    int64_t rev = 0;
    int rc = get_i64(h, "revision", &rev);
    if (rc == 0 && revision) {
        *revision = rev;
    }
    return rc;
}

/* A RangeResponse object (top level or inside a txn). */
static int parse_range_obj(json_t *root, cr_etcd_range_result *out)
{
    memset(out, 0, sizeof *out);
    json_t *kvs = json_object_get(root, "kvs");
    int rc = get_i64(root, "count", &out->count);
    if (rc != 0) {
        return rc;
    }
    json_t *more = json_object_get(root, "more");
    out->more = json_is_true(more);
    if (!kvs) {
        return 0;
    }
    if (!json_is_array(kvs)) {
        return fail(CR_EPARSE, "etcd: \"kvs\" is not an array");
    }
    size_t n = json_array_size(kvs);
    out->kvs = cr_calloc(n ? n : 1, sizeof *out->kvs);
    for (size_t i = 0; i < n; i++) {
        json_t *kv = json_array_get(kvs, i);
        cr_etcd_kv *k = &out->kvs[i];
        size_t klen = 0;
        if (!json_is_object(kv)) {
            rc = fail(CR_EPARSE, "etcd: kvs[%zu] is not an object", i);
            goto bad;
        }
        out->n = i + 1;
        if ((rc = get_b64(kv, "key", &k->key, &klen)) != 0 ||
            (rc = get_b64(kv, "value", &k->value, &k->value_len)) != 0 ||
            (rc = get_i64(kv, "create_revision", &k->create_revision)) != 0 ||
            (rc = get_i64(kv, "mod_revision", &k->mod_revision)) != 0 ||
            (rc = get_i64(kv, "version", &k->version)) != 0 ||
            (rc = get_i64(kv, "lease", &k->lease)) != 0) {
            goto bad;
        }
        if (strlen(k->key) != klen) {
            rc = fail(CR_EPARSE, "etcd: kvs[%zu] has a key with a NUL byte", i);
            goto bad;
        }
    }
    return 0;
bad:
    cr_etcd_range_result_fini(out);
    return rc;
}

static json_t *load_json(const char *body, size_t len, int *rc)
{
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_DISABLE_EOF_CHECK, &jerr);
    if (!root || !json_is_object(root)) {
        *rc = fail(CR_EPARSE, "etcd: reply is not a JSON object (%s)",
                   root ? "another JSON value" : jerr.text);
        json_decref(root);
        return NULL;
    }
    *rc = 0;
    return root;
}

int cr__etcd_parse_range(const char *body, size_t len, cr_etcd_range_result *out, int64_t *revision)
{
    int rc;
    json_t *root = load_json(body, len, &rc);
    if (!root) {
        return rc;
    }
    rc = parse_header_rev(root, revision);
    if (rc == 0) {
        rc = parse_range_obj(root, out);
    }
    json_decref(root);
    return rc;
}

void cr_etcd_txn_result_fini(cr_etcd_txn_result *r)
{
    if (!r) {
        return;
    }
    for (size_t i = 0; i < r->nranges; i++) {
        cr_etcd_range_result_fini(&r->ranges[i]);
    }
    free(r->ranges);
    memset(r, 0, sizeof *r);
}

int cr__etcd_parse_txn(const char *body, size_t len, cr_etcd_txn_result *out)
{
    memset(out, 0, sizeof *out);
    int rc;
    json_t *root = load_json(body, len, &rc);
    if (!root) {
        return rc;
    }
    rc = parse_header_rev(root, &out->revision);
    out->succeeded = json_is_true(json_object_get(root, "succeeded"));
    json_t *resp = json_object_get(root, "responses");
    if (rc == 0 && resp) {
        if (!json_is_array(resp)) {
            rc = fail(CR_EPARSE, "etcd: \"responses\" is not an array");
            goto out;
        }
        size_t n = json_array_size(resp);
        out->ranges = cr_calloc(n ? n : 1, sizeof *out->ranges);
        for (size_t i = 0; i < n && rc == 0; i++) {
            json_t *r = json_array_get(resp, i);
            if (!json_is_object(r)) {
                rc = fail(CR_EPARSE, "etcd: responses[%zu] is not an object", i);
                break;
            }
            out->nranges = i + 1;
            json_t *rr = json_object_get(r, "response_range");
            if (rr) {
                if (!json_is_object(rr)) {
                    rc = fail(CR_EPARSE, "etcd: responses[%zu].response_range is not an object", i);
                } else {
                    rc = parse_range_obj(rr, &out->ranges[i]);
                }
            }
        }
    }
out:
    json_decref(root);
    if (rc != 0) {
        cr_etcd_txn_result_fini(out);
    }
    return rc;
}

int cr__etcd_parse_error(const char *body, size_t len, int http_status, bool *retry)
{
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_DISABLE_EOF_CHECK, &jerr);
    *retry = http_status == 502 || http_status == 503 || http_status == 504;
    const char *msg = NULL;
    int64_t code = -1;
    if (json_is_object(root)) {
        json_t *m = json_object_get(root, "error");
        if (!json_is_string(m)) {
            m = json_object_get(root, "message");
        }
        msg = json_is_string(m) ? json_string_value(m) : NULL;
        json_t *c = json_object_get(root, "code");
        code = json_is_integer(c) ? json_integer_value(c) : -1;
    }
    int rc;
    token_refused = false;
    if (!msg && body && len > 0 && memmem(body, len, "CommonName of client", 20)) {
        /* etcd >= 3.4.22 and 3.5.6 refuse JSON-gateway requests made with a
         * client certificate that has a CN (it would not be used for auth) */
        rc = fail(CR_EAUTH,
                  "etcd refuses its JSON gateway to a client certificate with a CommonName "
                  "(\"CommonName of client sending a request against gateway will be "
                  "ignored\"): issue --etcd-cert FILE with no CN in its subject (for example "
                  "/O=corral) and authenticate with --etcd-user");
    } else if (!msg && body && len > 0 && memmem(body, len, "HTTPS server", 12)) {
        /* Go's answer to plain HTTP on a TLS port */
        rc = fail(CR_EINVAL, "etcd: the member serves https, not http: write its endpoints as "
                             "https://HOST:PORT (with --etcd-cacert FILE)");
    } else if (!msg) {
        rc = fail(CR_EPARSE, "etcd: HTTP %d with no error message: %.*s", http_status,
                  (int)(len > 120 ? 120 : len), body ? body : "");
    } else if (strstr(msg, "invalid auth token") || strstr(msg, "auth store is old") ||
               strstr(msg, "user name is empty")) {
        token_refused = true;
        rc = fail(CR_EAUTH, "%s%s", msg,
                  strstr(msg, "user name is empty")
                      ? " (etcd has authentication enabled: give --etcd-user NAME and "
                        "--etcd-password-file FILE)"
                      : "");
    } else if (strstr(msg, "authentication failed")) {
        rc = fail(CR_EAUTH, "%s (check --etcd-user and the password in --etcd-password-file)", msg);
    } else if (strstr(msg, "authentication is not enabled")) {
        rc = fail(CR_ENOTSUP, "%s", msg);
    } else if (strstr(msg, "permission denied")) {
        rc = fail(CR_EPERM,
                  "%s (the etcd user's roles must grant readwrite on the cluster's key "
                  "prefix, /corral/ or /corral/NAME/: docs/operations.md)",
                  msg);
    } else if (strstr(msg, "lease not found")) {
        rc = fail(CR_ENOENT, "%s", msg);
    } else if (strstr(msg, "too many operations") || strstr(msg, "too large")) {
        rc = fail(CR_ETOOBIG, "%s", msg);
    } else if (strstr(msg, "compacted")) {
        rc = fail(CR_ECONFLICT, "%s", msg);
    } else if (code == 14 || strstr(msg, "no leader") || strstr(msg, "leader changed") ||
               strstr(msg, "timed out") || strstr(msg, "stopped") || strstr(msg, "not capable")) {
        /* Unavailable: another member may well answer. */
        *retry = true;
        rc = fail(CR_EUNAVAIL, "%s", msg);
    } else if (code == 4) {
        *retry = true; /* DeadlineExceeded */
        rc = fail(CR_ETIMEDOUT, "%s", msg);
    } else {
        rc = fail(CR_EINVAL, "%s (code %lld)", msg, (long long)code);
    }
    json_decref(root);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Transport                                                                */

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
    cr_buf *b = ud;
    size_t n = size * nmemb;
    if (b->len + n > CR_ETCD_MAX_REPLY_BYTES) {
        return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
    }
    cr_buf_append(b, ptr, n);
    return n;
}

static CURL *handle_get(cr_etcd *e)
{
    CURL *h = NULL;
    pthread_mutex_lock(&e->mu);
    if (e->npool > 0) {
        h = e->pool[--e->npool];
    }
    pthread_mutex_unlock(&e->mu);
    return h ? h : api->easy_init();
}

static void handle_put(cr_etcd *e, CURL *h)
{
    pthread_mutex_lock(&e->mu);
    if (e->npool < POOL_MAX) {
        e->pool[e->npool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&e->mu);
    if (h) {
        api->easy_cleanup(h);
    }
}

/* A TLS failure, in words that name the flag to look at: CR_EAUTH (etcd
 * refused us, or we refused etcd: not worth trying another member, they
 * share the configuration), or 0 when cc is not about TLS. */
static int tls_fail(const cr_etcd *e, CURLcode cc, const char *url, const char *why)
{
    switch (cc) {
    case CURLE_PEER_FAILED_VERIFICATION:
        return fail(CR_EAUTH,
                    "etcd %s: the member's certificate does not verify (%s): it must be signed "
                    "by a CA of --etcd-cacert %s and name the endpoint's host",
                    url, why, *e->sec.cacert ? e->sec.cacert : "(not given: the system's CAs)");
    case CURLE_SSL_CACERT_BADFILE:
        return fail(CR_EAUTH, "etcd %s: --etcd-cacert %s: %s", url, e->sec.cacert, why);
    case CURLE_SSL_CERTPROBLEM:
        return fail(CR_EAUTH, "etcd %s: --etcd-cert %s / --etcd-key %s: %s", url, e->sec.cert,
                    e->sec.key, why);
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_WRITE_ERROR:
        return 0;
    default:
        break;
    }
    if (strstr(why, "wrong version number") || strstr(why, "packet length too long")) {
        return fail(CR_EAUTH, "etcd %s: the member does not speak TLS here (%s): is it http://?",
                    url, why);
    }
    bool refused = strstr(why, "alert") || strstr(why, "certificate required") ||
                   strstr(why, "handshake failure");
    if (refused && !*e->sec.cert) {
        return fail(CR_EAUTH,
                    "etcd %s: the member refused the TLS handshake (%s): it wants a client "
                    "certificate: give --etcd-cert FILE and --etcd-key FILE, signed by a CA of "
                    "its --trusted-ca-file",
                    url, why);
    }
    if (refused || strstr(why, "key values mismatch")) {
        return fail(CR_EAUTH,
                    "etcd %s: the TLS handshake failed (%s): is --etcd-cert %s signed by a CA of "
                    "the member's --trusted-ca-file, and --etcd-key its key?",
                    url, why, e->sec.cert);
    }
    if (cc != CURLE_COULDNT_CONNECT && (strstr(why, "reset by peer") ||
                                        strstr(why, "Broken pipe") || strstr(why, "getpeername"))) {
        /* With TLS 1.3 a member that refuses the client certificate sends
         * its alert after the handshake and closes: the client often finds
         * the connection dropped before it reads the alert. Or the member
         * went down. Unavailable (another member may answer), with the
         * hint. */
        return fail(CR_EUNAVAIL,
                    *e->sec.cert ? "etcd %s: %s (a member that refuses the client certificate "
                                   "drops the connection so: is --etcd-cert %s signed by a CA "
                                   "of its --trusted-ca-file?)"
                                 : "etcd %s: %s (a member that wants a client certificate drops "
                                   "the connection so%s: give --etcd-cert FILE and --etcd-key "
                                   "FILE)",
                    url, why, e->sec.cert);
    }
    return 0;
}

/* One POST of body to path on endpoint ep, with the header auth (NULL:
 * none). 0 with *status and the reply in out; CR_EUNAVAIL (could not
 * connect: try another), CR_ETIMEDOUT, CR_ETOOBIG (reply too large),
 * CR_EAUTH (TLS refused either way), CR_EIO. */
static int post_one(cr_etcd *e, CURL *h, const char *ep, const char *path, const char *body,
                    const char *auth, cr_buf *out, long *status)
{
    char errbuf[CURL_ERROR_SIZE] = "";
    char url[320];
    snprintf(url, sizeof url, "%s%s", ep, path);
    struct curl_slist *hdrs = NULL;
    cr_buf_reset(out);
    api->easy_reset(h);
    api->easy_setopt(h, CURLOPT_URL, url);
    api->easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    api->easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    api->easy_setopt(h, CURLOPT_PROTOCOLS_STR, e->tls ? "https" : "http");
    if (e->tls) {
        /* HTTP/1.1 as over http (libcurl would offer h2): one request per
         * pooled handle, and the same error codes either way */
        api->easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
        api->easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
        api->easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
        api->easy_setopt(h, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
        if (*e->sec.cacert) {
            api->easy_setopt(h, CURLOPT_CAINFO, e->sec.cacert);
        }
        if (*e->sec.cert) {
            api->easy_setopt(h, CURLOPT_SSLCERT, e->sec.cert);
            api->easy_setopt(h, CURLOPT_SSLKEY, e->sec.key);
        }
    }
    api->easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    api->easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, e->connect_ms);
    api->easy_setopt(h, CURLOPT_TIMEOUT_MS, e->req_ms);
    api->easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    api->easy_setopt(h, CURLOPT_WRITEDATA, out);
    api->easy_setopt(h, CURLOPT_POSTFIELDS, body);
    api->easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    hdrs = api->slist_append(hdrs, "Content-Type: application/json");
    hdrs = api->slist_append(hdrs, "Expect:");
    if (auth) {
        hdrs = api->slist_append(hdrs, auth);
    }
    api->easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    /* As in src/client: a write to a reset connection raises SIGPIPE. */
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
    for (struct curl_slist *l = hdrs; l; l = l->next) {
        explicit_bzero(l->data, strlen(l->data)); /* libcurl's copy of the token */
    }
    api->slist_free_all(hdrs);
    const char *why = *errbuf ? errbuf : api->easy_strerror(cc);
    *status = 0;
    api->easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    int trc = e->tls && cc != CURLE_OK ? tls_fail(e, cc, url, why) : 0;
    if (trc != 0) {
        return trc;
    }
    switch (cc) {
    case CURLE_OK:
        return 0;
    case CURLE_WRITE_ERROR:
        return fail(CR_ETOOBIG, "etcd %s: reply over %u bytes", url, CR_ETCD_MAX_REPLY_BYTES);
    case CURLE_OPERATION_TIMEDOUT:
        return fail(CR_ETIMEDOUT, "etcd %s: %s", url, why);
    case CURLE_GOT_NOTHING:
        if (!e->tls) {
            /* what a member with TLS (and client certificates) answers */
            return fail(CR_EUNAVAIL,
                        "etcd %s: %s (does the member serve https? then write its endpoints "
                        "as https://HOST:PORT, with --etcd-cacert FILE)",
                        url, why);
        }
        return fail(CR_EUNAVAIL, "etcd %s: %s", url, why);
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
        return fail(CR_EUNAVAIL, "etcd %s: %s", url, why);
    default:
        return fail(CR_EIO, "etcd %s: %s", url, why);
    }
}

/* POST body (borrowed) to path with the header auth (NULL: none), trying
 * endpoints in turn. On 0, *reply is the 200 reply (cr_buf, caller fini). */
static int call_raw(cr_etcd *e, const char *path, const char *body, const char *auth, cr_buf *reply)
{
    last_err[0] = '\0';
    token_refused = false;
    CURL *h = handle_get(e);
    int rc = 0;
    if (!h) {
        rc = fail(CR_ENOMEM, "etcd: curl_easy_init failed");
        goto out;
    }
    pthread_mutex_lock(&e->mu);
    size_t start = e->cur;
    pthread_mutex_unlock(&e->mu);
    char first_err[sizeof last_err] = "";
    for (size_t k = 0; k < e->nep; k++) {
        size_t i = (start + k) % e->nep;
        long status = 0;
        rc = post_one(e, h, e->ep[i], path, body, auth, reply, &status);
        bool retry = rc == CR_EUNAVAIL || rc == CR_ETIMEDOUT;
        if (rc == 0 && status != 200) {
            rc = cr__etcd_parse_error(reply->data, reply->len, (int)status, &retry);
        }
        if (rc == 0 || !retry) {
            if (rc == 0 && i != start) {
                pthread_mutex_lock(&e->mu);
                e->cur = i;
                pthread_mutex_unlock(&e->mu);
            }
            goto out;
        }
        if (!first_err[0]) {
            snprintf(first_err, sizeof first_err, "%s", last_err);
        }
    }
    if (e->nep > 1) {
        char one[sizeof last_err];
        snprintf(one, sizeof one, "%s", first_err);
        rc = fail(CR_EUNAVAIL, "etcd: none of %zu endpoints answered (first: %s)", e->nep, one);
    }
out:
    if (h) {
        handle_put(e, h);
    }
    return rc;
}

/* Authenticates as e->sec.user, unless the token is newer than the one
 * the caller saw (gen: another thread did it meanwhile). Under auth_mu. */
static int authenticate(cr_etcd *e, uint64_t gen)
{
    pthread_mutex_lock(&e->auth_mu);
    int rc = 0;
    json_t *root = NULL;
    char *body = NULL;
    cr_buf reply;
    cr_buf_init(&reply);
    pthread_mutex_lock(&e->mu);
    bool fresh = e->token_gen != gen;
    pthread_mutex_unlock(&e->mu);
    if (fresh) {
        goto out;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(e->sec.user));
        json_object_set_new(o, "password", json_string(e->sec.password));
        body = json_dumps(o, JSON_COMPACT);
        json_t *pw = json_object_get(o, "password");
        /* jansson's copy of the password goes with the object; its string
         * buffer is overwritten first */
        explicit_bzero((char *)json_string_value(pw), strlen(json_string_value(pw)));
        json_decref(o);
        rc = call_raw(e, "/v3/auth/authenticate", body, NULL, &reply);
        explicit_bzero(body, strlen(body));
        CR_FREE(body);
        if (attempt == 1 || rc != CR_EAUTH || !strstr(last_err, "authentication failed") ||
            !*e->sec.password_file) {
            break;
        }
        /* The password was refused: it may have been rotated (the file
         * updated, then `etcdctl user passwd`). Read the file again and try
         * once more if it changed. e->sec.password is only used here,
         * under auth_mu. */
        cr_etcd_sec now = e->sec;
        char why[300];
        now.loaded = false;
        bool changed = cr_etcd_sec_load(&now, why, sizeof why) == 0 &&
                       strcmp(now.password, e->sec.password) != 0;
        if (changed) {
            memcpy(e->sec.password, now.password, sizeof e->sec.password);
        }
        cr_etcd_sec_wipe(&now);
        if (!changed) {
            break;
        }
    }
    if (rc == CR_ENOTSUP) {
        /* "authentication is not enabled": go without a token, as etcd's
         * own client does; a later "user name is empty" turns it on. */
        pthread_mutex_lock(&e->mu);
        e->auth_off = true;
        e->token[0] = '\0';
        e->token_gen++;
        pthread_mutex_unlock(&e->mu);
        rc = 0;
        goto out;
    }
    if (rc != 0) {
        char why[sizeof last_err];
        snprintf(why, sizeof why, "%s", last_err);
        rc = fail(rc, "etcd: cannot authenticate as user \"%s\": %s", e->sec.user, why);
        goto out;
    }
    root = load_json(reply.data, reply.len, &rc);
    json_t *tok = root ? json_object_get(root, "token") : NULL;
    size_t tlen = json_is_string(tok) ? strlen(json_string_value(tok)) : 0;
    if (!root) {
        goto out;
    }
    if (tlen == 0 || tlen >= sizeof e->token || strpbrk(json_string_value(tok), "\r\n")) {
        rc =
            fail(CR_EPARSE, "etcd: the authentication reply has no usable token (%zu bytes)", tlen);
        goto out;
    }
    pthread_mutex_lock(&e->mu);
    memcpy(e->token, json_string_value(tok), tlen + 1);
    e->auth_off = false;
    e->token_gen++;
    pthread_mutex_unlock(&e->mu);
    explicit_bzero((char *)json_string_value(tok), tlen);
out:
    if (reply.data) {
        explicit_bzero(reply.data, reply.len);
    }
    cr_buf_fini(&reply);
    json_decref(root);
    free(body);
    pthread_mutex_unlock(&e->auth_mu);
    return rc;
}

/* POST body (taken: freed here) to path, authenticated when a user is
 * configured: the first call authenticates; a call whose token etcd
 * refuses authenticates again and is repeated, once. On 0, *reply is the
 * 200 reply (cr_buf, caller fini). */
static int call(cr_etcd *e, const char *path, char *body, cr_buf *reply)
{
    int rc = 0;
    char auth[CR_ETCD_TOKEN_MAX + 32];
    auth[0] = '\0';
    if (!*e->sec.user) {
        rc = call_raw(e, path, body, NULL, reply);
        goto out;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        pthread_mutex_lock(&e->mu);
        uint64_t gen = e->token_gen;
        bool need = !e->auth_off && !e->token[0];
        pthread_mutex_unlock(&e->mu);
        if (need && (rc = authenticate(e, gen)) != 0) {
            goto out;
        }
        pthread_mutex_lock(&e->mu);
        gen = e->token_gen;
        if (e->token[0]) {
            snprintf(auth, sizeof auth, "Authorization: %s", e->token);
        } else {
            auth[0] = '\0';
        }
        pthread_mutex_unlock(&e->mu);
        rc = call_raw(e, path, body, auth[0] ? auth : NULL, reply);
        if (rc != CR_EAUTH || !token_refused || attempt == 1) {
            goto out;
        }
        /* Refused token (expired, password or roles changed, or auth
         * turned on since): drop it if nobody has replaced it yet. */
        pthread_mutex_lock(&e->mu);
        if (e->token_gen == gen) {
            e->token[0] = '\0';
            e->auth_off = false;
        }
        pthread_mutex_unlock(&e->mu);
    }
out:
    explicit_bzero(auth, sizeof auth);
    free(body);
    return rc;
}

static char *dump(json_t *req)
{
    char *s = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    return s;
}

static void set_b64(json_t *o, const char *name, const void *data, size_t len)
{
    char *s = b64_encode(data, len);
    json_object_set_new(o, name, json_string(s));
    free(s);
}

static void set_i64(json_t *o, const char *name, int64_t v)
{
    char s[24];
    snprintf(s, sizeof s, "%" PRId64, v);
    json_object_set_new(o, name, json_string(s));
}

void cr_etcd_prefix_end(const char *prefix, char *out, size_t out_len)
{
    size_t n = strlen(prefix);
    if (out_len < n + 1) {
        if (out_len) {
            out[0] = '\0';
        }
        return;
    }
    memcpy(out, prefix, n + 1);
    while (n > 0) {
        unsigned char c = (unsigned char)out[n - 1];
        if (c < 0xff) {
            out[n - 1] = (char)(c + 1);
            out[n] = '\0';
            return;
        }
        out[--n] = '\0';
    }
    out[0] = '\0'; /* all 0xff: to the end of the keyspace */
}

/* Sets key and range_end for a key, an explicit end, or a prefix. */
static void set_range(json_t *o, const char *key, const char *range_end, bool prefix)
{
    set_b64(o, "key", key, strlen(key));
    if (range_end) {
        set_b64(o, "range_end", range_end, strlen(range_end));
    } else if (prefix) {
        size_t n = strlen(key) + 1;
        char *end = cr_malloc(n);
        cr_etcd_prefix_end(key, end, n);
        if (*end) {
            set_b64(o, "range_end", end, strlen(end));
        } else {
            set_b64(o, "range_end", "", 1); /* "\0": every key from key on */
        }
        free(end);
    }
}

static json_t *range_json(const cr_etcd_range_req *q)
{
    json_t *o = json_object();
    set_range(o, q->key, q->range_end, q->prefix);
    if (q->limit > 0) {
        set_i64(o, "limit", q->limit);
    }
    if (q->revision > 0) {
        set_i64(o, "revision", q->revision);
    }
    if (q->keys_only) {
        json_object_set_new(o, "keys_only", json_true());
    }
    if (q->count_only) {
        json_object_set_new(o, "count_only", json_true());
    }
    if (q->sort != CR_ETCD_SORT_NONE) {
        json_object_set_new(o, "sort_order",
                            json_string(q->sort == CR_ETCD_SORT_ASCEND ? "ASCEND" : "DESCEND"));
        json_object_set_new(o, "sort_target", json_string("KEY"));
    }
    return o;
}

int cr_etcd_range(cr_etcd *e, const cr_etcd_range_req *q, cr_etcd_range_result *out,
                  int64_t *revision)
{
    cr_buf reply;
    cr_buf_init(&reply);
    int rc = call(e, "/v3/kv/range", dump(range_json(q)), &reply);
    if (rc == 0) {
        rc = cr__etcd_parse_range(reply.data, reply.len, out, revision);
    }
    cr_buf_fini(&reply);
    return rc;
}

int cr_etcd_put(cr_etcd *e, const char *key, const char *value, size_t value_len, int64_t lease,
                int64_t *revision)
{
    json_t *o = json_object();
    set_b64(o, "key", key, strlen(key));
    set_b64(o, "value", value, value_len);
    if (lease) {
        set_i64(o, "lease", lease);
    }
    cr_buf reply;
    cr_buf_init(&reply);
    int rc = call(e, "/v3/kv/put", dump(o), &reply);
    if (rc == 0) {
        json_t *root = load_json(reply.data, reply.len, &rc);
        if (root) {
            rc = parse_header_rev(root, revision);
            json_decref(root);
        }
    }
    cr_buf_fini(&reply);
    return rc;
}

int cr_etcd_delete(cr_etcd *e, const char *key, bool prefix, int64_t *deleted, int64_t *revision)
{
    json_t *o = json_object();
    set_range(o, key, NULL, prefix);
    cr_buf reply;
    cr_buf_init(&reply);
    int rc = call(e, "/v3/kv/deleterange", dump(o), &reply);
    if (rc == 0) {
        json_t *root = load_json(reply.data, reply.len, &rc);
        if (root) {
            int64_t n = 0;
            rc = parse_header_rev(root, revision);
            if (rc == 0) {
                rc = get_i64(root, "deleted", &n);
            }
            if (rc == 0 && deleted) {
                *deleted = n;
            }
            json_decref(root);
        }
    }
    cr_buf_fini(&reply);
    return rc;
}

static json_t *ops_json(const cr_etcd_op *ops, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        const cr_etcd_op *op = &ops[i];
        json_t *r = json_object();
        json_t *w = json_object();
        switch (op->kind) {
        case CR_ETCD_OP_PUT:
            set_b64(r, "key", op->key, strlen(op->key));
            set_b64(r, "value", op->value ? op->value : "", op->value_len);
            if (op->lease) {
                set_i64(r, "lease", op->lease);
            }
            json_object_set_new(w, "request_put", r);
            break;
        case CR_ETCD_OP_DELETE:
            set_range(r, op->key, NULL, op->prefix);
            json_object_set_new(w, "request_delete_range", r);
            break;
        case CR_ETCD_OP_GET:
            set_range(r, op->key, NULL, op->prefix);
            json_object_set_new(w, "request_range", r);
            break;
        }
        json_array_append_new(a, w);
    }
    return a;
}

static const char *const target_name[] = {"CREATE", "MOD", "VERSION", "VALUE", "LEASE"};
static const char *const target_field[] = {"create_revision", "mod_revision", "version", "value",
                                           "lease"};
static const char *const result_name[] = {"EQUAL", "GREATER", "LESS", "NOT_EQUAL"};

int cr_etcd_txn(cr_etcd *e, const cr_etcd_cmp *cmp, size_t ncmp, const cr_etcd_op *success,
                size_t nsuccess, const cr_etcd_op *failure, size_t nfailure,
                cr_etcd_txn_result *out)
{
    memset(out, 0, sizeof *out);
    last_err[0] = '\0';
    if (nsuccess > CR_ETCD_MAX_TXN_OPS || nfailure > CR_ETCD_MAX_TXN_OPS ||
        ncmp > CR_ETCD_MAX_TXN_OPS) {
        return fail(CR_ETOOBIG,
                    "etcd: a txn of %zu/%zu ops and %zu compares is over etcd's "
                    "%d",
                    nsuccess, nfailure, ncmp, CR_ETCD_MAX_TXN_OPS);
    }
    json_t *o = json_object();
    json_t *ca = json_array();
    for (size_t i = 0; i < ncmp; i++) {
        const cr_etcd_cmp *c = &cmp[i];
        if ((unsigned)c->target > CR_ETCD_LEASE || (unsigned)c->result > CR_ETCD_NOT_EQUAL) {
            json_decref(ca);
            json_decref(o);
            return fail(CR_EINVAL, "etcd: compare %zu has a bad target or result", i);
        }
        json_t *j = json_object();
        set_b64(j, "key", c->key, strlen(c->key));
        json_object_set_new(j, "target", json_string(target_name[c->target]));
        json_object_set_new(j, "result", json_string(result_name[c->result]));
        if (c->target == CR_ETCD_VALUE) {
            set_b64(j, "value", c->value ? c->value : "", c->value_len);
        } else {
            set_i64(j, target_field[c->target], c->number);
        }
        json_array_append_new(ca, j);
    }
    json_object_set_new(o, "compare", ca);
    json_object_set_new(o, "success", ops_json(success, nsuccess));
    json_object_set_new(o, "failure", ops_json(failure, nfailure));
    char *body = dump(o);
    size_t blen = strlen(body);
    /* The gateway's base64 JSON is about 4/3 of the protobuf etcd limits;
     * refuse what etcd would surely refuse, let etcd judge the rest. */
    if (blen > CR_ETCD_MAX_REQUEST_BYTES / 3 * 4 + 4096) {
        free(body);
        return fail(CR_ETOOBIG, "etcd: a txn of %zu bytes is over etcd's request limit (%u)", blen,
                    CR_ETCD_MAX_REQUEST_BYTES);
    }
    cr_buf reply;
    cr_buf_init(&reply);
    int rc = call(e, "/v3/kv/txn", body, &reply);
    if (rc == 0) {
        rc = cr__etcd_parse_txn(reply.data, reply.len, out);
    }
    cr_buf_fini(&reply);
    return rc;
}

/* Leases: the reply object (the keepalive stream wraps it in "result"). */
static int lease_call(cr_etcd *e, const char *path, int64_t id, int64_t ttl_s, json_t **root)
{
    json_t *o = json_object();
    if (ttl_s > 0) {
        set_i64(o, "TTL", ttl_s);
    }
    if (id) {
        set_i64(o, "ID", id);
    }
    cr_buf reply;
    cr_buf_init(&reply);
    int rc = call(e, path, dump(o), &reply);
    if (rc == 0) {
        *root = load_json(reply.data, reply.len, &rc);
    }
    cr_buf_fini(&reply);
    return rc;
}

int cr_etcd_lease_grant(cr_etcd *e, int64_t ttl_s, int64_t *id, int64_t *granted_ttl_s)
{
    if (ttl_s <= 0) {
        return fail(CR_EINVAL, "etcd: a lease TTL must be positive");
    }
    json_t *root = NULL;
    int rc = lease_call(e, "/v3/lease/grant", 0, ttl_s, &root);
    int64_t gid = 0, ttl = 0;
    if (rc == 0 && (rc = get_i64(root, "ID", &gid)) == 0 &&
        (rc = get_i64(root, "TTL", &ttl)) == 0) {
        json_t *err = json_object_get(root, "error");
        if (json_is_string(err) && *json_string_value(err)) {
            rc = fail(CR_EINVAL, "etcd: lease grant: %s", json_string_value(err));
        } else if (gid == 0) {
            rc = fail(CR_EPARSE, "etcd: lease grant reply has no ID");
        } else {
            *id = gid;
            if (granted_ttl_s) {
                *granted_ttl_s = ttl;
            }
        }
    }
    json_decref(root);
    return rc;
}

int cr_etcd_lease_keepalive(cr_etcd *e, int64_t id, int64_t *ttl_s)
{
    json_t *root = NULL;
    int rc = lease_call(e, "/v3/lease/keepalive", id, 0, &root);
    if (rc == 0) {
        json_t *res = json_object_get(root, "result");
        if (!json_is_object(res)) {
            json_t *err = json_object_get(root, "error");
            rc = json_is_object(err) ? fail(CR_EUNAVAIL, "etcd: keepalive: %s",
                                            json_string_value(json_object_get(err, "message"))
                                                ? json_string_value(json_object_get(err, "message"))
                                                : "error")
                                     : fail(CR_EPARSE, "etcd: keepalive reply has no result");
        } else {
            int64_t ttl = 0;
            rc = get_i64(res, "TTL", &ttl);
            if (rc == 0 && ttl <= 0) {
                rc = fail(CR_ENOENT, "etcd: lease %" PRId64 " not found (expired or revoked)", id);
            } else if (rc == 0 && ttl_s) {
                *ttl_s = ttl;
            }
        }
    }
    json_decref(root);
    return rc;
}

int cr_etcd_lease_revoke(cr_etcd *e, int64_t id)
{
    json_t *root = NULL;
    int rc = lease_call(e, "/v3/lease/revoke", id, 0, &root);
    json_decref(root);
    return rc;
}

int cr_etcd_lease_ttl(cr_etcd *e, int64_t id, int64_t *ttl_s)
{
    json_t *root = NULL;
    int rc = lease_call(e, "/v3/lease/timetolive", id, 0, &root);
    int64_t ttl = 0;
    if (rc == 0 && (rc = get_i64(root, "TTL", &ttl)) == 0) {
        if (ttl < 0) {
            rc = fail(CR_ENOENT, "etcd: lease %" PRId64 " not found (expired or revoked)", id);
        } else if (ttl_s) {
            *ttl_s = ttl;
        }
    }
    json_decref(root);
    return rc;
}

int cr_etcd_probe(cr_etcd *e, const char *prefix)
{
    cr_etcd_range_req q = {.key = prefix, .prefix = true, .count_only = true};
    cr_etcd_range_result r;
    memset(&r, 0, sizeof r);
    int rc = cr_etcd_range(e, &q, &r, NULL);
    cr_etcd_range_result_fini(&r);
    return rc;
}

/* Here, not in etcd_sec.c, so that the options file needs nothing of the
 * client (the client reads the options, never the reverse). */
int cr_etcd_check(const char *endpoints, const cr_etcd_sec *sec, const char *prefix,
                  bool *unreachable, char *err, size_t err_len)
{
    cr_etcd *e = NULL;
    cr_etcd_opts o = {.sec = sec};
    *unreachable = false;
    int rc = cr_etcd_new(endpoints, &o, &e);
    /* A member that refuses a client certificate may close the connection
     * before the client reads its alert (then it looks like a dropped
     * connection): ask again a few times before calling it unreachable. */
    for (int i = 0; rc == 0 || rc == CR_EUNAVAIL || rc == CR_ETIMEDOUT; i++) {
        if (i > 0) {
            usleep(100000);
        }
        rc = cr_etcd_probe(e, prefix);
        if (i == 2 || (rc != CR_EUNAVAIL && rc != CR_ETIMEDOUT)) {
            break;
        }
    }
    if (rc == CR_EUNAVAIL || rc == CR_ETIMEDOUT) {
        *unreachable = true;
    }
    if (rc != 0) {
        snprintf(err, err_len, "%s", cr_etcd_last_error());
    }
    cr_etcd_free(e);
    return rc;
}
