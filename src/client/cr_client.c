/*
 * cr_client.c - the public side of the HTTP client: options, results and
 * the mapping of answers to error codes. The bytes move in client_http.c
 * (http://) or client_curl.c (https://); see client_int.h.
 */
#include "cr_client.h"

#include "client_int.h"
#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_config.h"
#include "cr_error.h"
#include "cr_time.h"

#include <stdio.h>
#include <strings.h>
#include <string.h>
#include <unistd.h>

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

/* Split "http://host[:port][/prefix]" for the plain transport. */
static int parse_http_url(cr_client *c, const char *url)
{
    const char *h = url + 7;
    const char *slash = strchr(h, '/');
    size_t hostport_len = slash ? (size_t)(slash - h) : strlen(h);
    char *hp = cr_strndup(h, hostport_len);
    int rc = 0;
    char *host = hp, *port = NULL;
    if (*hp == '[') { /* [v6]:port */
        char *close = strchr(hp, ']');
        if (!close) {
            rc = CR_EINVAL;
            goto out;
        }
        *close = '\0';
        host = hp + 1;
        if (close[1] == ':') {
            port = close + 2;
        } else if (close[1]) {
            rc = CR_EINVAL;
            goto out;
        }
    } else {
        char *colon = strrchr(hp, ':');
        if (colon) {
            *colon = '\0';
            port = colon + 1;
        }
    }
    if (!*host || (port && !*port) || strchr(host, '@')) {
        rc = CR_EINVAL;
        goto out;
    }
    if (port) {
        for (const char *p = port; *p; p++) {
            if (*p < '0' || *p > '9') {
                rc = CR_EINVAL;
                goto out;
            }
        }
    }
    c->host = cr_strdup(host);
    c->port = cr_strdup(port ? port : "80");
    c->host_header = cr_strndup(h, hostport_len);
    c->prefix = cr_strdup(slash ? slash : "");
out:
    free(hp);
    return rc;
}

/* Make url (a base URL without trailing '/') the one requests go to; the
 * kept-alive connection to the previous one is closed. CR_EINVAL when url
 * is not an http:// or https:// URL we can use. */
static int use_server(cr_client *c, const char *url)
{
    bool tls = strncmp(url, "https://", 8) == 0;
    if (strncmp(url, "http://", 7) != 0 && !tls) {
        return CR_EINVAL;
    }
    if (c->server && strcmp(c->server, url) == 0) {
        return 0;
    }
    char *host = c->host, *port = c->port, *hh = c->host_header, *prefix = c->prefix;
    c->host = c->port = c->host_header = c->prefix = NULL;
    if (!tls && parse_http_url(c, url) < 0) {
        c->host = host;
        c->port = port;
        c->host_header = hh;
        c->prefix = prefix;
        return CR_EINVAL;
    }
    free(host);
    free(port);
    free(hh);
    free(prefix);
    if (tls) {
        c->prefix = cr_strdup("");
    }
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    c->tls = tls;
    free(c->server);
    c->server = cr_strdup(url);
    return 0;
}

/* "URL1,URL2,...": each trimmed of blanks and trailing '/'. */
static int parse_servers(cr_client *c, const char *list)
{
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        while (n > 0 && (*p == ' ' || *p == '\t')) {
            p++;
            n--;
        }
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '/')) {
            n--;
        }
        if (n == 0 || c->nservers == CR__CLIENT_MAX_SERVERS) {
            return CR_EINVAL;
        }
        c->servers[c->nservers++] = cr_strndup(p, n);
        if (!e) {
            break;
        }
        p = e + 1;
        if (!*p) {
            return CR_EINVAL; /* a trailing comma */
        }
    }
    for (size_t i = 0; i < c->nservers; i++) {
        int rc = use_server(c, c->servers[i]);
        if (rc < 0) {
            return rc;
        }
    }
    return c->nservers ? use_server(c, c->servers[0]) : CR_EINVAL;
}

int cr_client_new(const cr_client_opts *opts, cr_client **out)
{
    const char *server =
        opts && opts->server && *opts->server ? opts->server : CR_CLIENT_DEFAULT_SERVER;
    cr_client *c = cr_calloc(1, sizeof *c);
    c->fd = -1;
    if (parse_servers(c, server) < 0) {
        cr_client_free(c);
        return CR_EINVAL;
    }
    if (opts) {
        c->ca_file = dup_or_null(opts->ca_file);
        c->cert_file = dup_or_null(opts->cert_file);
        c->key_file = dup_or_null(opts->key_file);
        c->insecure = opts->insecure;
        c->connect_timeout_ns = opts->connect_timeout_ns;
        c->timeout_ns = opts->timeout_ns;
        c->user_agent = dup_or_null(opts->user_agent);
        c->failover_ns = opts->failover_ns;
        c->rate_wait_ns = opts->rate_wait_ns;
    }
    if (c->rate_wait_ns == 0) {
        c->rate_wait_ns = CR_CLIENT_RATE_WAIT_NS;
    }
    if (c->rate_wait_ns < 0) {
        c->rate_wait_ns = 0;
    }
    if (c->connect_timeout_ns <= 0) {
        c->connect_timeout_ns = 5 * CR_NS_PER_SEC;
    }
    if (c->timeout_ns <= 0) {
        c->timeout_ns = 30 * CR_NS_PER_SEC;
    }
    if (c->failover_ns == 0 && c->nservers > 1) {
        c->failover_ns = CR_CLIENT_FAILOVER_NS;
    }
    if (c->failover_ns < 0) {
        c->failover_ns = 0;
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
    if (c->fd >= 0) {
        close(c->fd);
    }
    cr__client_curl_free(c->curl);
    free(c->server);
    for (size_t i = 0; i < c->nservers; i++) {
        free(c->servers[i]);
    }
    free(c->host);
    free(c->port);
    free(c->host_header);
    free(c->prefix);
    free(c->token);
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
    if (token && *token) {
        /* a token with CR or LF would split the header: refuse it */
        if (strpbrk(token, "\r\n")) {
            return;
        }
        c->token = cr_strdup(token);
    }
}

void cr_client_set_cancel(cr_client *c, cr_client_cancel_fn fn, void *ud)
{
    c->cancel = fn;
    c->cancel_ud = fn ? ud : NULL;
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
static int finish_answer(cr__xfer *x, cr_client_res *res)
{
    long status = x->status;
    res->status = status;
    if (x->answer.len > 0) {
        res->raw_len = x->answer.len;
        res->raw = cr_buf_take(&x->answer);
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

/*
 * The base URL a Location names: the Location less the path that was
 * asked for (queries aside). NULL when its path is not that path (a
 * redirect somewhere else is not followed). Returned new.
 */
static char *base_of_location(const cr_client *c, const char *loc, const char *path)
{
    /* Compare paths without their queries: the server may escape a query
     * differently (a ',' as %2C) and the request is re-sent as it was. */
    size_t ll = strcspn(loc, "?#");
    size_t pl = strcspn(path, "?");
    size_t fl = strlen(c->prefix);
    if (ll <= fl + pl || (strncmp(loc, "http://", 7) != 0 && strncmp(loc, "https://", 8) != 0)) {
        return NULL;
    }
    const char *tail = loc + ll - pl - fl;
    if (strncmp(tail, c->prefix, fl) != 0 || strncmp(tail + fl, path, pl) != 0) {
        return NULL;
    }
    /* the prefix belongs to the base URL */
    return cr_strndup(loc, ll - pl);
}

/*
 * The index in c->servers of base (scheme and host:port compared without
 * regard to case, the path prefix exactly), -1 when it is none of them: a
 * redirect is followed only to a controller the user configured, so that a
 * controller (or whoever answers at its address) cannot send the bearer
 * token to another host.
 */
static long listed_server(const cr_client *c, const char *base)
{
    const char *bs = strstr(base, "://");
    size_t ba = bs ? (size_t)(bs + 3 - base) + strcspn(bs + 3, "/") : 0;
    for (size_t i = 0; bs && i < c->nservers; i++) {
        const char *s = c->servers[i];
        const char *ss = strstr(s, "://");
        size_t sa = ss ? (size_t)(ss + 3 - s) + strcspn(ss + 3, "/") : 0;
        if (ss && sa == ba && strncasecmp(s, base, sa) == 0 && strcmp(s + sa, base + ba) == 0) {
            return (long)i;
        }
    }
    return -1;
}

/* A copy of an outside string fit for a message: at most 200 bytes,
 * control characters as '?'. */
static char *printable(const char *s)
{
    char *p = cr_strndup(s, 200);
    for (char *q = p; *q; q++) {
        if ((unsigned char)*q < 0x20 || *q == 0x7f) {
            *q = '?';
        }
    }
    return p;
}

/*
 * Whether a failed attempt may be made again at another controller: no
 * answer came (or a 503 CR_EUNAVAIL: a follower that knows no leader yet, a
 * controller shutting down), and repeating the request cannot do a thing
 * twice: nothing was sent, or the request is a read or an update by name,
 * or it carries an Idempotency-Key (the controller answers a repeat with the
 * first answer).
 */
static bool may_try_elsewhere(const cr__xfer *x, int rc, const cr_client_res *res)
{
    bool repeatable = !x->sent || strcmp(x->method, "POST") != 0 || x->idem != NULL;
    if (rc == CR_EUNAVAIL && res->status == 0) {
        return repeatable;
    }
    if (rc == CR_ETIMEDOUT && res->status == 0 && !x->fn) {
        return repeatable;
    }
    return rc == CR_EUNAVAIL && res->status == 503 && res->error &&
           strcmp(res->error, "CR_EUNAVAIL") == 0;
}

void cr_client_set_wait_hook(cr_client *c, cr_client_wait_fn fn, void *ud)
{
    c->wait_fn = fn;
    c->wait_ud = fn ? ud : NULL;
}

/*
 * A 429 (the controller's rate limit, docs/api.md): wait its Retry-After
 * and say to repeat (true) when the request is safe to repeat and the
 * call's waits stay within rate_wait_ns (*waited_ns counts them);
 * otherwise false, with the reason added to the message.
 */
static bool rate_wait(cr_client *c, const cr__xfer *x, cr_client_res *res, int64_t *waited_ns)
{
    if (res->status != 429) {
        return false;
    }
    bool repeatable = strcmp(x->method, "POST") != 0 || x->idem != NULL;
    int64_t wait_ns = (int64_t)x->retry_s * CR_NS_PER_SEC;
    const char *why = NULL;
    if (x->retry_s == 0) {
        why = "no Retry-After";
    } else if (!repeatable) {
        why = "not repeated: a POST without an Idempotency-Key";
    } else if (*waited_ns + wait_ns > c->rate_wait_ns) {
        why = *waited_ns > 0 ? "waited as long as allowed" : "longer than the client waits";
    }
    if (why) {
        char *m = cr_asprintf("%s (%s)", res->message ? res->message : "HTTP 429", why);
        free(res->message);
        res->message = m;
        return false;
    }
    if (c->wait_fn) {
        c->wait_fn(c->wait_ud, x->retry_s, res->message ? res->message : "HTTP 429");
    }
    for (int64_t slept = 0; slept < wait_ns; slept += CR__CLIENT_CANCEL_SLICE_MS * CR_NS_PER_MS) {
        if (c->cancel && c->cancel(c->cancel_ud)) {
            return false; /* stopping: the 429 stands */
        }
        usleep(CR__CLIENT_CANCEL_SLICE_MS * 1000);
    }
    *waited_ns += wait_ns;
    return true;
}

/* One request at the current server into res. */
static int attempt(cr_client *c, cr__xfer *x, cr_client_res *res)
{
    cr_client_res_fini(res);
    cr_buf_reset(&x->answer);
    x->status = 0;
    x->stopped = false;
    x->sent = false;
    x->err[0] = '\0';
    x->location[0] = '\0';
    x->retry_s = 0;
    int rc = c->tls ? cr__client_curl(c, x) : cr__client_http(c, x);
    if (rc == 0 && x->stopped) {
        res->status = x->status;
        return 0;
    }
    if (rc < 0) {
        if (rc == CR_ETOOBIG || rc == CR_EIO) {
            res->status = x->status;
        }
        res->message = cr_strdup(x->err[0] ? x->err : cr_strerror(rc));
        return rc;
    }
    return finish_answer(x, res);
}

/*
 * Several controllers (docs/operations.md, "High availability"): a 307/308
 * from a follower names the leader, which is then used (at most
 * CR__CLIENT_MAX_REDIRECTS in a row); a controller that cannot be reached,
 * or answers that it has no leader, makes the call go on to the next one in
 * the list, round after round (a pause of 200 ms between rounds) for up to
 * failover_ns. The server that answered stays in use for the next calls.
 */
static int perform(cr_client *c, const char *method, const char *path, const json_t *body,
                   const char *idem, int64_t timeout_ns, int64_t idle_ns, cr_client_data_fn fn,
                   void *ud, cr_client_res *res)
{
    int rc = 0;
    char *payload = NULL;
    cr__xfer x = {
        .method = method, .path = path, .idle_ns = idle_ns, .fn = fn, .ud = ud, .idem = idem};
    cr_buf_init(&x.answer);
    cr_client_res_fini(res);
    if (body || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
        payload = body ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY) : cr_strdup("{}");
        if (!payload) {
            res->message = cr_strdup("request body is not serialisable JSON");
            rc = CR_EINVAL;
            goto out;
        }
        x.body = payload;
        x.body_len = strlen(payload);
    }
    x.timeout_ns = timeout_ns ? timeout_ns : (fn ? 0 : c->timeout_ns);
    int64_t until = cr_mono_ns() + c->failover_ns;
    int hops = 0;
    size_t tried = 0;        /* list entries tried in this round */
    int64_t rate_waited = 0; /* waits on 429s so far */
    for (;;) {
        rc = attempt(c, &x, res);
        if (rate_wait(c, &x, res, &rate_waited)) {
            continue;
        }
        if ((res->status == 307 || res->status == 308) && x.location[0]) {
            char *base = base_of_location(c, x.location, path);
            const char *why = "not a controller URL";
            long idx = base ? listed_server(c, base) : -1;
            if (base && idx < 0) {
                why = "not one of the configured controllers (--server, CORRAL_SERVER, config "
                      "'server')";
            } else if (base && c->server && strncmp(c->server, "https://", 8) == 0 &&
                       strncmp(base, "https://", 8) != 0) {
                why = "from https to http: the token would go in clear";
                idx = -1;
            } else if (hops >= CR__CLIENT_MAX_REDIRECTS) {
                why = "too many redirects";
                idx = -1;
            }
            int urc = idx >= 0 ? use_server(c, c->servers[idx]) : CR_EINVAL;
            free(base);
            if (urc == 0) {
                c->cur = (size_t)idx;
                hops++;
                continue;
            }
            char *loc = printable(x.location);
            free(res->message);
            res->message = cr_asprintf("redirected to %s: not followed (%s)", loc, why);
            free(loc);
            res->status = 0; /* no controller that answers for itself was reached */
            rc = CR_EUNAVAIL;
            goto out;
        }
        if (rc == 0 || c->failover_ns == 0 || !may_try_elsewhere(&x, rc, res) ||
            cr_mono_ns() >= until) {
            goto out;
        }
        hops = 0;
        if (++tried >= c->nservers) {
            tried = 0;
            for (int k = 0; k < 200 / CR__CLIENT_CANCEL_SLICE_MS; k++) {
                if (c->cancel && c->cancel(c->cancel_ud)) {
                    goto out; /* stopping: the last attempt's error stands */
                }
                usleep(CR__CLIENT_CANCEL_SLICE_MS * 1000);
            }
            if (cr_mono_ns() >= until) {
                goto out;
            }
        }
        c->cur = (c->cur + 1) % c->nservers;
        use_server(c, c->servers[c->cur]);
    }
out:
    free(payload);
    cr_buf_fini(&x.answer);
    return rc;
}

int cr_client_request(cr_client *c, const char *method, const char *path, const json_t *body,
                      int64_t timeout_ns, cr_client_res *res)
{
    return perform(c, method, path, body, NULL, timeout_ns, 0, NULL, NULL, res);
}

int cr_client_stream(cr_client *c, const char *path, int64_t timeout_ns, int64_t idle_timeout_ns,
                     cr_client_data_fn fn, void *ud, cr_client_res *res)
{
    return perform(c, "GET", path, NULL, NULL, timeout_ns, idle_timeout_ns, fn, ud, res);
}

int cr_client_request_idem(cr_client *c, const char *method, const char *path, const json_t *body,
                           const char *idem_key, int64_t timeout_ns, cr_client_res *res)
{
    if (idem_key && strpbrk(idem_key, "\r\n")) {
        cr_client_res_fini(res);
        res->message = cr_strdup("Idempotency-Key: no CR or LF");
        return CR_EINVAL;
    }
    return perform(c, method, path, body, idem_key, timeout_ns, 0, NULL, NULL, res);
}
