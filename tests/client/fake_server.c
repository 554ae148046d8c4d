/*
 * fake_server.c - see fake_server.h.
 */
#include "fake_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct fake_server {
    struct MHD_Daemon *d;   /* the daemon */
    char url[64];           /* base URL */
    pthread_mutex_t mu;     /* guards everything below */
    pthread_cond_t cv;      /* signalled by fake_server_release */
    bool released;          /* /slow may finish */
    unsigned canned_status; /* 0: echo */
    char *canned_body;      /* owned */
    char *redirect;         /* base URL redirected to, or NULL (owned) */
    json_t *last;           /* last request's echo document */
    unsigned limited;       /* the next this many requests get 429 */
    unsigned retry_after_s; /* ... with this Retry-After (0: none) */
    unsigned requests;      /* completed requests */
    unsigned connections;   /* TCP connections opened */
    char *cert;             /* TLS certificate PEM or NULL (owned) */
    char *key;              /* TLS key PEM or NULL (owned) */
};

typedef struct req {
    char *body; /* accumulated upload, owned */
    size_t len;
} req;

static int add_query(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    json_object_set_new(cls, key, json_string(value ? value : ""));
    return MHD_YES;
}

static ssize_t stream_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
    int *n = cls;
    if (*n >= 5) {
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    (*n)++;
    int len = snprintf(buf, max, "line %d\n", *n);
    return len;
}

static void free_counter(void *cls)
{
    free(cls);
}

static enum MHD_Result queue(struct MHD_Connection *conn, unsigned status, const char *body,
                             const char *ctype)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        body ? strlen(body) : 0, (void *)(body ? body : ""), MHD_RESPMEM_MUST_COPY);
    if (ctype) {
        MHD_add_response_header(r, "Content-Type", ctype);
    }
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **con_cls)
{
    fake_server *s = cls;
    req *rq = *con_cls;
    if (!rq) {
        rq = calloc(1, sizeof *rq);
        *con_cls = rq;
        return MHD_YES;
    }
    if (*upload_size) {
        rq->body = realloc(rq->body, rq->len + *upload_size + 1);
        memcpy(rq->body + rq->len, upload, *upload_size);
        rq->len += *upload_size;
        rq->body[rq->len] = '\0';
        *upload_size = 0;
        return MHD_YES;
    }
    json_t *q = json_object();
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, (MHD_KeyValueIterator)add_query, q);
    const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    json_t *body = rq->body ? json_loadb(rq->body, rq->len, 0, NULL) : NULL;
    json_t *echo = json_pack("{s:s,s:s,s:o,s:s*,s:o}", "method", method, "path", url, "query", q,
                             "auth", auth, "body", body ? body : json_null());
    pthread_mutex_lock(&s->mu);
    json_decref(s->last);
    s->last = json_incref(echo);
    s->requests++;
    unsigned status = s->canned_status;
    char *canned = s->canned_body ? strdup(s->canned_body) : NULL;
    char *to = s->redirect ? strdup(s->redirect) : NULL;
    bool limit = s->limited > 0;
    unsigned retry_after_s = s->retry_after_s;
    s->limited -= limit;
    pthread_mutex_unlock(&s->mu);

    enum MHD_Result ret;
    if (strcmp(url, "/slow") == 0) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 10;
        pthread_mutex_lock(&s->mu);
        while (!s->released) {
            if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) != 0) {
                break;
            }
        }
        pthread_mutex_unlock(&s->mu);
        ret = queue(conn, 200, "{\"slow\":true}", "application/json");
    } else if (strcmp(url, "/stream") == 0) {
        int *n = calloc(1, sizeof *n);
        struct MHD_Response *r =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64, stream_cb, n, free_counter);
        MHD_add_response_header(r, "Content-Type", "text/plain");
        ret = MHD_queue_response(conn, 200, r);
        MHD_destroy_response(r);
    } else if (strcmp(url, "/stream-fail") == 0) {
        ret = queue(conn, 404, "{\"error\":\"CR_ENOENT\",\"message\":\"job 9 not found\"}",
                    "application/json");
    } else if (limit) {
        const char *err = "{\"error\":\"CR_EAGAIN\",\"message\":\"rate limit: slow down\","
                          "\"limit\":\"rate_limit_rps\"}";
        struct MHD_Response *r =
            MHD_create_response_from_buffer(strlen(err), (void *)err, MHD_RESPMEM_PERSISTENT);
        char ra[16];
        snprintf(ra, sizeof ra, "%u", retry_after_s);
        if (retry_after_s) {
            MHD_add_response_header(r, "Retry-After", ra);
        }
        MHD_add_response_header(r, "Content-Type", "application/json");
        ret = MHD_queue_response(conn, 429, r);
        MHD_destroy_response(r);
    } else if (status && to) {
        char loc[512];
        snprintf(loc, sizeof loc, "%s%s", to, url);
        struct MHD_Response *r =
            MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Location", loc);
        ret = MHD_queue_response(conn, status, r);
        MHD_destroy_response(r);
    } else if (status) {
        ret = queue(conn, status, canned, "application/json");
    } else {
        char *txt = json_dumps(echo, JSON_COMPACT);
        ret = queue(conn, 200, txt, "application/json");
        free(txt);
    }
    free(canned);
    free(to);
    json_decref(echo);
    return ret;
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    req *rq = *con_cls;
    if (rq) {
        free(rq->body);
        free(rq);
        *con_cls = NULL;
    }
}

static void notify_conn(void *cls, struct MHD_Connection *conn, void **socket_context,
                        enum MHD_ConnectionNotificationCode toe)
{
    fake_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        pthread_mutex_lock(&s->mu);
        s->connections++;
        pthread_mutex_unlock(&s->mu);
    }
}

fake_server *fake_server_start_tls(const char *cert_pem, const char *key_pem)
{
    fake_server *s = calloc(1, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    unsigned flags =
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (cert_pem) {
        s->cert = strdup(cert_pem);
        s->key = strdup(key_pem);
        s->d = MHD_start_daemon(
            flags | MHD_USE_TLS, 0, NULL, NULL, (MHD_AccessHandlerCallback)handler, s,
            MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_NOTIFY_COMPLETED, completed, s,
            MHD_OPTION_NOTIFY_CONNECTION, notify_conn, s, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
            MHD_OPTION_HTTPS_MEM_CERT, s->cert, MHD_OPTION_HTTPS_MEM_KEY, s->key, MHD_OPTION_END);
    } else {
        s->d = MHD_start_daemon(flags, 0, NULL, NULL, (MHD_AccessHandlerCallback)handler, s,
                                MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_NOTIFY_COMPLETED, completed,
                                s, MHD_OPTION_NOTIFY_CONNECTION, notify_conn, s,
                                MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
    }
    if (!s->d) {
        free(s->cert);
        free(s->key);
        free(s);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    snprintf(s->url, sizeof s->url, "%s://127.0.0.1:%u", cert_pem ? "https" : "http",
             (unsigned)info->port);
    return s;
}

fake_server *fake_server_start(void)
{
    return fake_server_start_tls(NULL, NULL);
}

void fake_server_stop(fake_server *s)
{
    if (!s) {
        return;
    }
    fake_server_release(s);
    MHD_stop_daemon(s->d);
    json_decref(s->last);
    free(s->canned_body);
    free(s->redirect);
    free(s->cert);
    free(s->key);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

const char *fake_server_url(const fake_server *s)
{
    return s->url;
}

void fake_server_limit(fake_server *s, unsigned n, unsigned retry_after_s)
{
    pthread_mutex_lock(&s->mu);
    s->limited = n;
    s->retry_after_s = retry_after_s;
    pthread_mutex_unlock(&s->mu);
}

void fake_server_canned(fake_server *s, unsigned status, const char *body)
{
    pthread_mutex_lock(&s->mu);
    free(s->canned_body);
    s->canned_body = body ? strdup(body) : NULL;
    s->canned_status = status;
    free(s->redirect);
    s->redirect = NULL;
    pthread_mutex_unlock(&s->mu);
}

void fake_server_redirect(fake_server *s, unsigned status, const char *base)
{
    pthread_mutex_lock(&s->mu);
    free(s->canned_body);
    s->canned_body = NULL;
    s->canned_status = status;
    free(s->redirect);
    s->redirect = strdup(base);
    pthread_mutex_unlock(&s->mu);
}

void fake_server_echo(fake_server *s)
{
    fake_server_canned(s, 0, NULL);
}

json_t *fake_server_last(fake_server *s)
{
    pthread_mutex_lock(&s->mu);
    json_t *l = s->last ? json_incref(s->last) : NULL;
    pthread_mutex_unlock(&s->mu);
    return l;
}

unsigned fake_server_requests(fake_server *s)
{
    pthread_mutex_lock(&s->mu);
    unsigned n = s->requests;
    pthread_mutex_unlock(&s->mu);
    return n;
}

unsigned fake_server_connections(fake_server *s)
{
    pthread_mutex_lock(&s->mu);
    unsigned n = s->connections;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void fake_server_release(fake_server *s)
{
    pthread_mutex_lock(&s->mu);
    s->released = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}
