/*
 * ctl_logs.c - GET /v1/jobs/{id}/logs: the bytes come from the agent of the
 * node the job ran on last, fetched off the API threads.
 *
 * A hung node must not hold the threads that serve everyone else (agents'
 * heartbeats included). So the handler only checks the request and defers
 * it; log_fetch_max worker threads do the outbound calls, each bounded by
 * log_timeout_ms (connect and answer). At most LOGS_QUEUE_MAX requests
 * wait for a worker (more: 503 with Retry-After), and one that waited past
 * log_timeout_ms is answered 503 without a fetch: an answer always comes
 * within about twice log_timeout_ms.
 *
 * Fair between nodes: one hung node holds at most LOGS_NODE_MAX of the
 * waiting and running fetches (more for it: 503), and at most half the
 * workers (at least one): a worker takes the oldest fetch whose node is
 * under that share, so fetches from healthy nodes pass the hung one's.
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_client.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_parse.h"
#include "cr_time.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOGS_QUEUE_MAX 64
#define LOGS_MAX_BYTES (16 * 1024 * 1024)
#define LOGS_NODE_MAX  16 /* fetches (waiting + running) for one node */

typedef struct log_fetch {
    cr_http_req *req;
    char server[300];
    char path[240];
    char secret[CR_TOKEN_TEXT_MAX]; /* the node's agent secret (never a controller token) */
    char node[CTL_NAME_MAX];
    int64_t queued_ns; /* monotonic */
    struct log_fetch *next;
} log_fetch;

struct ctl_logs {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    log_fetch *head, *tail;
    size_t n;
    bool stop;
    pthread_t *threads;
    size_t nthreads;
    char (*busy)[CTL_NAME_MAX]; /* the node each worker fetches from now; "" idle */
};

/* Fetches running now for node. q->mu held. */
static size_t node_running(const struct ctl_logs *q, const char *node)
{
    size_t n = 0;
    for (size_t i = 0; i < q->nthreads; i++) {
        n += strcmp(q->busy[i], node) == 0;
    }
    return n;
}

/* The oldest waiting fetch whose node has less than its share of the
 * workers (unlinked), or NULL. q->mu held. */
static log_fetch *take_fair(struct ctl_logs *q)
{
    size_t share = q->nthreads / 2 ? q->nthreads / 2 : 1;
    log_fetch *prev = NULL;
    for (log_fetch *f = q->head; f; prev = f, f = f->next) {
        if (q->stop || node_running(q, f->node) < share) {
            if (prev) {
                prev->next = f->next;
            } else {
                q->head = f->next;
            }
            if (q->tail == f) {
                q->tail = prev;
            }
            q->n--;
            return f;
        }
    }
    return NULL;
}

/* Stream sink: the log bytes of a 2xx answer, up to 16 MiB. */
static int collect(void *ud, const char *data, size_t len)
{
    cr_buf *b = ud;
    if (b->len + len > LOGS_MAX_BYTES) {
        return 1; /* stop: the proxy answers what came so far */
    }
    cr_buf_append(b, data, len);
    return 0;
}

static void fetch(ctl *c, log_fetch *f)
{
    int64_t deadline = c->cfg.log_timeout_ms * 1000 * 1000;
    if (cr_mono_ns() - f->queued_ns > deadline) {
        cr_http_add_header(f->req, "Retry-After", "1");
        ctl_reply_err(f->req, 503, CR_EBUSY, NULL,
                      "log fetches are waiting on slow agents (log_fetch_max); retry");
        return;
    }
    /* To the agent with the secret it got at its registration (never a
     * token that could act on the controller); HTTPS when it serves it. */
    cr_client_opts o = {.server = f->server,
                        .token = f->secret,
                        .connect_timeout_ns = deadline,
                        .timeout_ns = deadline,
                        .ca_file = *c->cfg.agent_ca_file ? c->cfg.agent_ca_file : NULL,
                        .cert_file = *c->cfg.tls_client_cert ? c->cfg.tls_client_cert : NULL,
                        .key_file = *c->cfg.tls_client_key ? c->cfg.tls_client_key : NULL};
    cr_client *cl = NULL;
    cr_buf b;
    cr_buf_init(&b);
    cr_client_res res;
    cr_client_res_init(&res);
    int rc = cr_client_new(&o, &cl);
    if (rc == 0) {
        rc = cr_client_stream(cl, f->path, deadline, 0, collect, &b, &res);
    }
    cr_client_free(cl);
    long status = res.status;
    if (status == 0 && rc == CR_ETIMEDOUT) {
        ctl_reply_err(f->req, 504, CR_ETIMEDOUT, NULL,
                      "the agent holding the logs did not answer within %lld ms (log_timeout_ms)",
                      (long long)c->cfg.log_timeout_ms);
        goto out;
    }
    if (status == 0 || (status >= 200 && status < 300 && rc != 0)) {
        ctl_reply_err(f->req, 502, CR_EUNAVAIL, NULL,
                      "the agent holding the logs is unreachable: %s", cr_client_res_msg(&res, rc));
        goto out;
    }
    if (status < 200 || status >= 300) {
        /* the agent's own error answer, passed on as it came */
        cr_buf_reset(&b);
        if (res.raw) {
            cr_buf_append(&b, res.raw, res.raw_len);
        }
    }
    size_t len = b.len;
    cr_http_respond(f->req, status >= 200 && status < 600 ? (unsigned)status : 502,
                    "application/octet-stream", cr_buf_take(&b), len);
out:
    cr_client_res_fini(&res);
    cr_buf_fini(&b);
}

typedef struct worker_arg {
    ctl *c;
    size_t slot;
} worker_arg;

static void *worker_main(void *argp)
{
    worker_arg *wa = argp;
    ctl *c = wa->c;
    size_t slot = wa->slot;
    free(wa);
    struct ctl_logs *q = c->logs;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        log_fetch *f;
        while (!(f = take_fair(q)) && !q->stop) {
            pthread_cond_wait(&q->cv, &q->mu);
        }
        if (!f) {
            break;
        }
        bool stopping = q->stop;
        snprintf(q->busy[slot], sizeof q->busy[slot], "%s", f->node);
        pthread_mutex_unlock(&q->mu);
        if (stopping) {
            ctl_reply_err(f->req, 503, CR_EUNAVAIL, NULL, "controller shutting down");
        } else {
            atomic_fetch_add(&c->logs_inflight, 1);
            fetch(c, f);
            atomic_fetch_sub(&c->logs_inflight, 1);
        }
        free(f);
        pthread_mutex_lock(&q->mu);
        q->busy[slot][0] = '\0';
        pthread_cond_broadcast(&q->cv); /* a fetch held back for its node may go now */
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int ctl_logs_start(ctl *c)
{
    struct ctl_logs *q = cr_calloc(1, sizeof *q);
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    c->logs = q;
    q->threads = cr_calloc((size_t)c->cfg.log_fetch_max, sizeof *q->threads);
    q->busy = cr_calloc((size_t)c->cfg.log_fetch_max, sizeof *q->busy);
    /* nthreads is what take_fair shares out: the workers to be, set first */
    q->nthreads = (size_t)c->cfg.log_fetch_max;
    for (size_t i = 0; i < q->nthreads; i++) {
        worker_arg *wa = cr_calloc(1, sizeof *wa);
        wa->c = c;
        wa->slot = i;
        if (pthread_create(&q->threads[i], NULL, worker_main, wa) != 0) {
            free(wa);
            q->nthreads = i;
            return CR_EIO;
        }
    }
    return 0;
}

void ctl_logs_stop(ctl *c)
{
    struct ctl_logs *q = c->logs;
    if (!q) {
        return;
    }
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    for (size_t i = 0; i < q->nthreads; i++) {
        pthread_join(q->threads[i], NULL);
    }
    free(q->threads);
    free(q->busy);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q);
    c->logs = NULL;
}

/* ------------------------------------------------------------------------ */
/* Output kept in the store                                                 */

int ctl_joblog_check(const json_t *entry, const char *path, cr_json_err *err)
{
    json_t *logs = json_object_get(entry, "logs");
    if (!logs) {
        return 0;
    }
    static const char *const members[] = {"stdout", "stderr", NULL};
    static const char *const smembers[] = {"data", "bytes", "from", NULL};
    char lp[96];
    snprintf(lp, sizeof lp, "%s.logs", path);
    if (!json_is_object(logs)) {
        return cr_json_fail(err, CR_EINVAL, lp, "field '%s': must be an object", lp);
    }
    int rc = cr_json_only(logs, lp, members, err);
    for (int i = 0; rc == 0 && i < 2; i++) {
        json_t *sv = json_object_get(logs, members[i]);
        char sp[128];
        snprintf(sp, sizeof sp, "%s.%s", lp, members[i]);
        const char *data = NULL;
        int64_t bytes = 0, from = 0;
        if (!sv) {
            continue;
        }
        if (!json_is_object(sv)) {
            return cr_json_fail(err, CR_EINVAL, sp, "field '%s': must be an object", sp);
        }
        /* base64 of at most CTL_JOBLOG_BYTES */
        if ((rc = cr_json_only(sv, sp, smembers, err)) ||
            (rc = cr_json_str(sv, sp, "data", true, (CTL_JOBLOG_BYTES / 3 + 1) * 4, &data, err)) ||
            (rc = cr_json_int(sv, sp, "bytes", true, 0, INT64_MAX, &bytes, err)) ||
            (rc = cr_json_int(sv, sp, "from", true, 0, bytes, &from, err))) {
            return rc;
        }
    }
    return rc;
}

void ctl_joblog_put(cr_store_txn *txn, int64_t job, const char *node, const json_t *logs)
{
    char key[120];
    snprintf(key, sizeof key, "%020lld/%s", (long long)job, node);
    json_t *doc = json_deep_copy(logs);
    json_object_set_new(doc, "node", json_string(node));
    char *s = json_dumps(doc, JSON_COMPACT);
    cr_store_txn_put(txn, "joblog", key, s);
    free(s);
    json_decref(doc);
}

typedef struct joblog_read {
    char *doc; /* owned */
} joblog_read;

static void joblog_row(void *arg, const char *key, const char *doc)
{
    (void)key;
    joblog_read *r = arg;
    free(r->doc);
    r->doc = cr_strdup(doc);
}

/* Answer from the stored output of job on node (its node gone or lost):
 * stream's bytes from offset. true when answered. */
static bool joblog_answer(ctl *c, cr_http_req *req, int64_t id, const char *node,
                          const char *stream, int64_t offset)
{
    char key[120];
    snprintf(key, sizeof key, "%020lld/%s", (long long)id, node);
    joblog_read r = {NULL};
    if (cr_store_get_object(c->store, "joblog", key, joblog_row, &r) != 0 || !r.doc) {
        free(r.doc);
        return false;
    }
    json_t *doc = json_loads(r.doc, 0, NULL);
    free(r.doc);
    json_t *sv = json_object_get(doc, strcmp(stream, "stderr") == 0 ? "stderr" : "stdout");
    const char *b64 = json_string_value(json_object_get(sv, "data"));
    int64_t from = (int64_t)json_integer_value(json_object_get(sv, "from"));
    size_t blen = b64 ? strlen(b64) : 0;
    unsigned char *bin = cr_malloc(blen + 1);
    size_t n = 0;
    if (b64 && sodium_base642bin(bin, blen + 1, b64, blen, NULL, &n, NULL,
                                 sodium_base64_VARIANT_ORIGINAL) != 0) {
        n = 0;
    }
    cr_buf out;
    cr_buf_init(&out);
    if (from > 0 && offset == 0) {
        cr_buf_printf(&out,
                      "[corral: the first %lld bytes of this log were not kept: node %s is gone, "
                      "its last %d bytes were]\n",
                      (long long)from, node, CTL_JOBLOG_BYTES);
    }
    int64_t skip = offset > from ? offset - from : 0;
    if (skip < (int64_t)n) {
        cr_buf_append(&out, bin + skip, n - (size_t)skip);
    }
    cr_http_add_header(req, "X-Corral-Log-Source", "store");
    char *body = cr_malloc(out.len + 1); /* taken by the server */
    memcpy(body, cr_buf_str(&out), out.len + 1);
    cr_http_respond(req, 200, "text/plain; charset=utf-8", body, out.len);
    cr_buf_fini(&out);
    free(bin);
    json_decref(doc);
    return true;
}

void ctl_job_logs(ctl *c, cr_http_req *req, const cr_principal *p, int64_t id)
{
    const char *stream = cr_http_query(req, "stream");
    const char *off = cr_http_query(req, "offset");
    int64_t offset = 0;
    if (stream && strcmp(stream, "stdout") != 0 && strcmp(stream, "stderr") != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "stream", "query 'stream': stdout or stderr");
        return;
    }
    if (off && cr_parse_i64(off, 0, INT64_MAX, &offset) != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "offset", "query 'offset': an integer >= 0");
        return;
    }
    const char *rk = cr_http_query(req, "rank");
    int64_t rank = 0;
    if (rk && cr_parse_i64(rk, 0, 1 << 20, &rank) != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "rank", "query 'rank': a task rank >= 0");
        return;
    }
    log_fetch *f = cr_calloc(1, sizeof *f);
    char node[CTL_NAME_MAX] = "";
    int64_t ntasks = 0;
    bool stored = false;
    pthread_mutex_lock(&c->mu);
    ctl_job *j = ctl_job_fetch(c, id);
    bool vis = j && (p->role == CR_ROLE_ADMIN || strcmp(j->tenant, p->tenant) == 0);
    if (vis && *j->last_node) {
        /* Rank R runs on node R / tasks-per-node of the last placement. */
        int tpn = j->last_tpn > 0 ? j->last_tpn : 1;
        snprintf(node, sizeof node, "%s", j->last_node);
        const char *nl = j->last_nodes;
        int64_t want = rank / tpn, k = 0;
        for (; nl && *nl; k++) {
            size_t len = strcspn(nl, ",");
            if (k == want && len < sizeof node) {
                memcpy(node, nl, len);
                node[len] = '\0';
            }
            nl += len + (nl[len] == ',');
        }
        ntasks = (nl ? k : 1) * tpn;
        ctl_node *n = rank < ntasks ? ctl_node_find(c, node) : NULL;
        /* a finished job whose node is gone or lost: its stored output */
        stored =
            rank < ntasks && ctl_job_terminal(j) && (!n || n->state == NS_LOST || n->port <= 0);
        if (n && n->port > 0 && !stored) {
            snprintf(f->server, sizeof f->server, "%s://%s:%d", n->tls ? "https" : "http", n->addr,
                     n->port);
            snprintf(f->secret, sizeof f->secret, "%s", n->agent_secret);
            snprintf(f->path, sizeof f->path, "/v1/logs/%lld?stream=%s&offset=%lld&rank=%lld",
                     (long long)id, stream ? stream : "stdout", (long long)offset, (long long)rank);
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (!vis) {
        free(f);
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "job %lld not found", (long long)id);
        return;
    }
    if (stored) {
        free(f);
        if (!joblog_answer(c, req, id, node, stream ? stream : "stdout", offset)) {
            ctl_reply_err(req, 404, CR_ENOENT, NULL,
                          "job %lld: node %s is gone and its output was not kept", (long long)id,
                          node);
        }
        return;
    }
    if (*node && rank >= ntasks) {
        free(f);
        ctl_reply_err(req, 400, CR_EINVAL, "rank", "query 'rank': job %lld has ranks 0..%lld",
                      (long long)id, (long long)(ntasks - 1));
        return;
    }
    if (!*f->server) {
        free(f);
        ctl_reply_err(req, 409, CR_ECONFLICT, NULL, "job %lld has not run yet: no logs",
                      (long long)id);
        return;
    }
    struct ctl_logs *q = c->logs;
    f->req = req;
    f->queued_ns = cr_mono_ns();
    snprintf(f->node, sizeof f->node, "%s", node);
    pthread_mutex_lock(&q->mu);
    size_t for_node = node_running(q, node);
    for (log_fetch *w = q->head; w; w = w->next) {
        for_node += strcmp(w->node, node) == 0;
    }
    if (for_node >= LOGS_NODE_MAX && !q->stop) {
        pthread_mutex_unlock(&q->mu);
        free(f);
        cr_http_add_header(req, "Retry-After", "1");
        ctl_reply_err(req, 503, CR_EBUSY, NULL,
                      "%d log fetches already wait on node '%s' (a slow agent); retry",
                      LOGS_NODE_MAX, node);
        return;
    }
    if (q->n >= LOGS_QUEUE_MAX || q->stop) {
        pthread_mutex_unlock(&q->mu);
        free(f);
        cr_http_add_header(req, "Retry-After", "1");
        ctl_reply_err(req, 503, CR_EBUSY, NULL,
                      "%d log fetches are already waiting for agents; retry", LOGS_QUEUE_MAX);
        return;
    }
    cr_http_defer(req);
    if (q->tail) {
        q->tail->next = f;
    } else {
        q->head = f;
    }
    q->tail = f;
    q->n++;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}
