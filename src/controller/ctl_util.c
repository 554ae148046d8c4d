/*
 * ctl_util.c - answers in the API's error format, time strings, secrets.
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
    char *s = json_dumps(v, JSON_COMPACT);
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
