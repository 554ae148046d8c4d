/*
 * ctl_util.c - answers in the API's error format (and after a commit),
 * time strings, secrets, waking the scheduler. Calls nothing above it.
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *const ctl_job_state_names[JS_COUNT] = {
    "pending", "held", "running", "completing", "completed", "failed", "cancelled", "preempted",
};
const char *const ctl_node_state_names[NS_COUNT] = {"up", "drained", "lost"};

void ctl_reply_json(cr_http_req *req, unsigned status, json_t *v)
{
    char *s = ctl_jw_dumps(v); /* json_dumps(v, JSON_COMPACT), for less */
    json_decref(v);
    if (!s) {
        s = cr_strdup("{}");
    }
    size_t len = strlen(s);
    cr_http_respond(req, status, "application/json", s, len);
}

void ctl_reply_err(cr_http_req *req, unsigned status, int code, const char *field, const char *fmt,
                   ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *v = json_pack("{s:s,s:s}", "error", cr_errname(code), "message", msg);
    if (field && *field) {
        json_object_set_new(v, "field", json_string(field));
    }
    ctl_reply_json(req, status, v);
}

void ctl_reply_jerr(cr_http_req *req, const cr_json_err *err)
{
    ctl_reply_err(req, 400, err->code ? err->code : CR_EINVAL, err->field, "%s", err->message);
}

char *ctl_time_str(int64_t ns, char *buf, size_t len)
{
    if (ns <= 0) {
        buf[0] = '\0';
        return buf;
    }
    return cr_time_fmt(ns, buf, len);
}

int64_t ctl_clock_ns(const ctl *c)
{
    return c->clock_wall0_ns + (cr_mono_ns() - c->clock_mono0_ns);
}

int64_t ctl_mono_from_wall(int64_t wall_ns)
{
    int64_t mono = cr_mono_ns(), wall = cr_now_ns();
    int64_t elapsed = wall - wall_ns;
    return mono - (elapsed > 0 ? elapsed : 0);
}

int ctl_write_secret(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        cr_error("cannot create %s: %s", path, strerror(errno));
        return errno == EEXIST ? CR_EEXIST : CR_EIO;
    }
    size_t len = strlen(text);
    int rc = 0;
    if (write(fd, text, len) != (ssize_t)len || write(fd, "\n", 1) != 1 || fsync(fd) != 0) {
        cr_error("cannot write %s: %s", path, strerror(errno));
        rc = CR_EIO;
    }
    close(fd);
    return rc;
}

void ctl_poll_park(ctl_poll **list, cr_http_req *req, int64_t wait_s)
{
    ctl_poll *q = cr_calloc(1, sizeof *q);
    q->req = req;
    q->deadline_ns = cr_mono_ns() + wait_s * CR_NS_PER_SEC;
    q->next = *list;
    *list = q;
    cr_http_defer(req);
}

void ctl_poll_answer(ctl *c, ctl_poll **list, bool expired_only, int64_t now_mono,
                     ctl_poll_doc_fn *make, void *obj, const char *gone)
{
    ctl_poll **pp = list;
    json_t *doc = NULL;
    bool made = false;
    while (*pp) {
        ctl_poll *q = *pp;
        if (expired_only && q->deadline_ns > now_mono) {
            pp = &q->next;
            continue;
        }
        *pp = q->next;
        if (!made) {
            doc = make(c, obj);
            made = true;
        }
        if (doc) {
            ctl_reply_json(q->req, 200, json_incref(doc));
        } else {
            ctl_reply_err(q->req, 404, CR_ENOENT, NULL, "%s", gone ? gone : "not found");
        }
        free(q);
    }
    json_decref(doc);
}

void ctl_poll_answer_text(ctl *c, ctl_poll **list, bool expired_only, int64_t now_mono,
                          ctl_poll_text_fn *make, void *obj, const char *gone)
{
    ctl_poll **pp = list;
    char *doc = NULL;
    size_t len = 0;
    bool made = false;
    while (*pp) {
        ctl_poll *q = *pp;
        if (expired_only && q->deadline_ns > now_mono) {
            pp = &q->next;
            continue;
        }
        *pp = q->next;
        if (!made) {
            doc = make(c, obj, &len);
            made = true;
        }
        if (doc) {
            char *copy = cr_malloc(len + 1);
            memcpy(copy, doc, len + 1);
            cr_http_respond(q->req, 200, "application/json", copy, len);
        } else {
            ctl_reply_err(q->req, 404, CR_ENOENT, NULL, "%s", gone ? gone : "not found");
        }
        free(q);
    }
    free(doc);
}

void ctl_sched_kick(ctl *c)
{
    if (!c->sched_wake) {
        c->sched_wake = true;
        pthread_cond_signal(&c->cv);
    }
}

bool ctl_text_clean(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f || (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)) {
            return false;
        }
    }
    return true;
}

bool ctl_name_ok(const char *s)
{
    if (!*s || strlen(s) >= CTL_NAME_MAX) {
        return false;
    }
    for (const char *p = s; *p; p++) {
        char ch = *p;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_' || ch == '.')) {
            return false;
        }
    }
    return true;
}

int ctl_name_check(const char *s, const char *field, cr_json_err *err)
{
    if (ctl_name_ok(s)) {
        return 0;
    }
    return cr_json_fail(err, CR_EINVAL, field, "field '%s': use letters, digits, '-', '_' or '.'",
                        field);
}

/* ------------------------------------------------------------------------ */
/* Failed commits.                                                          */

unsigned ctl_commit_status(int rc)
{
    return rc == CR_EDISKFULL ? 507 : rc == CR_ETOOBIG ? 413 : rc == CR_EFENCED ? 503 : 500;
}

void ctl_reply_commit_err(cr_http_req *req, int rc)
{
    if (rc == CR_EDISKFULL) {
        ctl_reply_err(req, 507, rc, NULL,
                      "disk full: the change was not stored (the controller keeps serving reads)");
    } else if (rc == CR_ETOOBIG) {
        ctl_reply_err(req, 413, rc, NULL,
                      "the change is over the store's transaction limit (etcd --max-txn-ops and "
                      "request size; see docs/operations.md): not stored, submit fewer at once");
    } else if (rc == CR_EFENCED) {
        ctl_reply_err(req, 503, rc, NULL,
                      "this controller's store writes are fenced (another controller took over): "
                      "not stored");
    } else {
        ctl_reply_err(req, 500, rc, NULL, "could not commit: %s", cr_strerror(rc));
    }
}

/* ------------------------------------------------------------------------ */
/* Answers after commit.                                                    */

typedef struct reply_ctx {
    cr_http_req *req;
    unsigned status;
    json_t *body; /* owned */
} reply_ctx;

static void reply_committed(void *arg, int status)
{
    reply_ctx *r = arg;
    if (status == 0) {
        ctl_reply_json(r->req, r->status, r->body);
    } else {
        json_decref(r->body);
        ctl_reply_commit_err(r->req, status);
    }
    free(r);
}

void ctl_commit_reply(ctl *c, cr_store_txn *txn, cr_http_req *req, unsigned status, json_t *body)
{
    reply_ctx *r = cr_calloc(1, sizeof *r);
    r->req = req;
    r->status = status;
    r->body = body;
    cr_http_defer(req);
    cr_store_submit(c->store, txn, reply_committed, r);
}

/* A commit queued under mu and waited for without it. */
static void wait_done(void *arg, int status)
{
    ctl_wait *w = arg;
    pthread_mutex_lock(&w->m);
    w->status = status;
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->m);
}

void ctl_wait_submit(ctl *c, ctl_wait *w, cr_store_txn *txn)
{
    w->status = 0;
    w->done = true;
    w->queued = false;
    if (!txn) {
        return;
    }
    if (cr_store_txn_empty(txn)) {
        cr_store_txn_free(txn);
        return;
    }
    pthread_mutex_init(&w->m, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->done = false;
    w->queued = true;
    cr_store_submit(c->store, txn, wait_done, w);
}

int ctl_wait_end(ctl_wait *w)
{
    if (!w->queued) {
        return w->status;
    }
    pthread_mutex_lock(&w->m);
    while (!w->done) {
        pthread_cond_wait(&w->cv, &w->m);
    }
    pthread_mutex_unlock(&w->m);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->m);
    w->queued = false;
    return w->status;
}

static int by_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

json_t *ctl_env_names(const json_t *env)
{
    size_t n = json_object_size(env), i = 0;
    const char **names = cr_calloc(n ? n : 1, sizeof *names);
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)env, k, x)
    {
        names[i++] = k;
    }
    qsort(names, n, sizeof *names, by_str);
    json_t *out = json_array();
    for (i = 0; i < n; i++) {
        json_array_append_new(out, json_string(names[i]));
    }
    free(names);
    return out;
}
