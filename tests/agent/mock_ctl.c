/*
 * mock_ctl.c - see mock_ctl.h.
 */
#include "mock_ctl.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct upload {
    char *data;
    size_t len;
} upload;

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *body)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply_json(struct MHD_Connection *c, unsigned code, json_t *j)
{
    char *t = json_dumps(j, JSON_COMPACT);
    enum MHD_Result r = reply(c, code, t);
    free(t);
    json_decref(j);
    return r;
}

static const char *bearer(struct MHD_Connection *c)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    return h && strncmp(h, "Bearer ", 7) == 0 ? h + 7 : "";
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    upload *u = *con_cls;
    if (u) {
        free(u->data);
        free(u);
        *con_cls = NULL;
    }
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *data,
                               size_t *size, void **con_cls)
{
    mock_ctl *m = cls;
    if (!*con_cls) {
        *con_cls = calloc(1, sizeof(upload));
        return MHD_YES;
    }
    upload *u = *con_cls;
    if (*size) {
        u->data = realloc(u->data, u->len + *size + 1);
        memcpy(u->data + u->len, data, *size);
        u->len += *size;
        u->data[u->len] = '\0';
        *size = 0;
        return MHD_YES;
    }
    pthread_mutex_lock(&m->mu);
    int down = m->down;
    pthread_mutex_unlock(&m->mu);
    if (down) {
        return reply(c, 503, "{\"error\":\"CR_EUNAVAIL\",\"message\":\"down\"}");
    }
    if (strcmp(method, "POST") == 0 && strcmp(url, "/v1/agents/register") == 0) {
        if (strcmp(bearer(c), "jt-secret") != 0) {
            return reply(c, 401, "{\"error\":\"CR_EAUTH\",\"message\":\"bad join token\"}");
        }
        json_t *b = json_loads(u->data ? u->data : "", 0, NULL);
        const char *node = b ? json_string_value(json_object_get(b, "node")) : NULL;
        if (!node) {
            json_decref(b);
            return reply(c, 400, "{\"error\":\"CR_EINVAL\",\"message\":\"node\"}");
        }
        char tok[128];
        snprintf(tok, sizeof tok, "nt-%s", node);
        pthread_mutex_lock(&m->mu);
        json_decref(m->last_register);
        m->last_register = b;
        m->registers++;
        m->forget_tokens = 0;
        pthread_mutex_unlock(&m->mu);
        char sec[128];
        snprintf(sec, sizeof sec, "as-%s", node);
        return reply_json(c, 200,
                          json_pack("{s:s,s:s,s:f,s:i}", "node_token", tok, "agent_secret", sec,
                                    "heartbeat_s", 0.5, "lost_after_s", 30));
    }
    char node[64], what[32];
    if (sscanf(url, "/v1/agents/%63[^/]/%31s", node, what) != 2) {
        return reply(c, 404, "{\"error\":\"CR_ENOENT\",\"message\":\"route\"}");
    }
    char tok[128];
    snprintf(tok, sizeof tok, "nt-%s", node);
    pthread_mutex_lock(&m->mu);
    int forget = m->forget_tokens;
    pthread_mutex_unlock(&m->mu);
    if (forget || strcmp(bearer(c), tok) != 0) {
        return reply(c, 401, "{\"error\":\"CR_EAUTH\",\"message\":\"bad node token\"}");
    }
    if (strcmp(method, "POST") == 0 && strcmp(what, "status") == 0) {
        json_t *b = json_loads(u->data ? u->data : "", 0, NULL);
        if (!b) {
            return reply(c, 400, "{\"error\":\"CR_EINVAL\",\"message\":\"json\"}");
        }
        pthread_mutex_lock(&m->mu);
        size_t i;
        json_t *j;
        json_array_foreach(json_object_get(b, "jobs"), i, j)
        {
            const char *st = json_string_value(json_object_get(j, "state"));
            if (st && strcmp(st, "exited") == 0) {
                char id[32];
                snprintf(id, sizeof id, "%lld",
                         (long long)json_integer_value(json_object_get(j, "job")));
                json_object_set(m->exits, id, j);
            }
        }
        json_decref(m->last_status);
        m->last_status = b;
        m->statuses++;
        pthread_mutex_unlock(&m->mu);
        return reply(c, 200, "{}");
    }
    if (strcmp(method, "GET") == 0 && strcmp(what, "desired") == 0) {
        const char *vs = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "version");
        const char *ws = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "wait");
        long long have = vs ? atoll(vs) : -1;
        int wait = ws ? atoi(ws) : 0;
        wait = wait > 5 ? 5 : wait;
        struct timespec end;
        clock_gettime(CLOCK_REALTIME, &end);
        end.tv_sec += wait;
        pthread_mutex_lock(&m->mu);
        while (m->version == have && !m->down) {
            if (pthread_cond_timedwait(&m->cv, &m->mu, &end) != 0) {
                break;
            }
        }
        json_t *doc = json_pack("{s:I,s:O}", "version", (json_int_t)m->version, "jobs", m->jobs);
        if (m->mig_layouts) {
            json_object_set(doc, "mig_layouts", m->mig_layouts);
        }
        pthread_mutex_unlock(&m->mu);
        return reply_json(c, 200, doc);
    }
    return reply(c, 404, "{\"error\":\"CR_ENOENT\",\"message\":\"route\"}");
}

mock_ctl *mock_ctl_start(void)
{
    mock_ctl *m = calloc(1, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    m->jobs = json_array();
    m->exits = json_object();
    m->version = 1;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL, 0, NULL,
        NULL, handler, m, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED,
        completed, NULL, MHD_OPTION_END);
    if (!d) {
        free(m);
        return NULL;
    }
    m->daemon = d;
    m->port = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port;
    return m;
}

void mock_ctl_set_jobs(mock_ctl *m, json_t *jobs)
{
    pthread_mutex_lock(&m->mu);
    json_decref(m->jobs);
    m->jobs = jobs;
    m->version++;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

void mock_ctl_stop(mock_ctl *m)
{
    pthread_mutex_lock(&m->mu);
    m->down = 1;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    MHD_stop_daemon(m->daemon);
    json_decref(m->jobs);
    json_decref(m->mig_layouts);
    json_decref(m->last_register);
    json_decref(m->last_status);
    json_decref(m->exits);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
}
