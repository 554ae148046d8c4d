/*
 * ctl_fixture.h - what the controller's C tests share: start the real
 * `corral controller` on loopback in a state directory and talk to it
 * over HTTP (libcurl), as users and agents would. Header-only, like
 * reap.h, whose tracking table is per translation unit: a test includes
 * it once.
 *
 * A daemon listens on port 0; its bound address is read from
 * <state-dir>/listen.addr, its admin and join tokens from admin.token and
 * join.token. No sleeps as synchronisation: the start polls for the
 * address with a deadline (ctlf_nap between looks).
 *
 * Include it after <cmocka.h>: the ctlf_*_ok helpers assert (a failed one
 * ends the test as cmocka does).
 */
#ifndef CTL_FIXTURE_H
#define CTL_FIXTURE_H

#include "cr_buf.h"
#include "cr_time.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>

#include "../integration/reap.h"

typedef struct ctl_daemon {
    pid_t pid;       /* 0: not running */
    char dir[256];   /* the state directory */
    char url[128];   /* "http://127.0.0.1:PORT" once started */
    char admin[128]; /* the admin token */
    char join[128];  /* the join token */
} ctl_daemon;

/* The binary under test: $CORRAL_BIN, else build/corral. */
static inline const char *ctlf_bin(void)
{
    const char *b = getenv("CORRAL_BIN");
    return b ? b : "build/corral";
}

/* The first line of a file without its end ("" when there is none). */
static inline void ctlf_read_line(const char *path, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    out[0] = '\0';
    if (f) {
        if (!fgets(out, (int)len, f)) {
            out[0] = '\0';
        }
        fclose(f);
    }
    out[strcspn(out, "\r\n")] = '\0';
}

/* The pause between two looks at a condition polled with a deadline. */
static inline void ctlf_nap(void)
{
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static inline size_t ctlf_sink(char *p, size_t s, size_t n, void *u)
{
    cr_buf_append(u, p, s * n);
    return s * n;
}

/*
 * Starts the controller on d->dir (made by the caller) with the tests'
 * flags (--allow-legacy-join: their agents join with join.token; the
 * state directory; 127.0.0.1:0) and extra (space-separated, may be NULL),
 * its output appended to log. Waits up to wait_s seconds for its address,
 * then reads its tokens. Returns true once it listens; false when it
 * exited first (*status its wait status, d->pid 0) or did not listen in
 * time (*status -1, d->pid still set: the caller stops it).
 */
static inline bool ctlf_spawn(ctl_daemon *d, const char *extra, const char *log, int wait_s,
                              int *status)
{
    char addr[300];
    snprintf(addr, sizeof addr, "%s/listen.addr", d->dir);
    unlink(addr);
    d->url[0] = '\0';
    d->pid = fork();
    if (d->pid < 0) {
        d->pid = 0;
        *status = -1;
        return false;
    }
    if (d->pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        char *argv[32];
        int n = 0;
        argv[n++] = (char *)ctlf_bin();
        argv[n++] = "controller";
        argv[n++] = "--allow-legacy-join";
        argv[n++] = "--state-dir";
        argv[n++] = d->dir;
        argv[n++] = "--listen";
        argv[n++] = "127.0.0.1:0";
        char copy[512];
        if (extra) {
            snprintf(copy, sizeof copy, "%s", extra);
            char *save = NULL;
            for (char *t = strtok_r(copy, " ", &save); t && n < 31;
                 t = strtok_r(NULL, " ", &save)) {
                argv[n++] = t;
            }
        }
        argv[n] = NULL;
        execv(argv[0], argv);
        _exit(127);
    }
    int64_t deadline = cr_mono_ns() + wait_s * CR_NS_PER_SEC;
    while (cr_mono_ns() < deadline) {
        ctlf_read_line(addr, d->url, sizeof d->url);
        if (d->url[0]) {
            break;
        }
        int st;
        if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
            d->pid = 0;
            *status = st;
            return false;
        }
        ctlf_nap();
    }
    if (!d->url[0]) {
        *status = -1;
        return false;
    }
    char path[300];
    snprintf(path, sizeof path, "%s/admin.token", d->dir);
    ctlf_read_line(path, d->admin, sizeof d->admin);
    snprintf(path, sizeof path, "%s/join.token", d->dir);
    ctlf_read_line(path, d->join, sizeof d->join);
    return true;
}

/* What a request carries besides its method, path and body; all may be
 * NULL / 0. */
typedef struct ctlf_opts {
    const char *token;   /* sent as "Authorization: Bearer" */
    const char *extra;   /* one more request header */
    const char *ca_file; /* PEM bundle for an https:// daemon */
    cr_buf *hdrs;        /* gets the answer's header lines */
} ctlf_opts;

/* One request (a JSON body of len bytes, or none); returns the status
 * (0: no answer) with the body appended to out. */
static inline long ctlf_req(const ctl_daemon *d, const char *method, const char *path,
                            const char *body, size_t len, const ctlf_opts *o, cr_buf *out)
{
    CURL *h = curl_easy_init();
    char url[512], auth[256];
    snprintf(url, sizeof url, "%s%s", d->url, path);
    struct curl_slist *hl = NULL;
    if (o && o->token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", o->token);
        hl = curl_slist_append(hl, auth);
    }
    hl = curl_slist_append(hl, "Content-Type: application/json");
    if (o && o->extra) {
        hl = curl_slist_append(hl, o->extra);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, ctlf_sink);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    if (o && o->hdrs) {
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, ctlf_sink);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, o->hdrs);
    }
    if (o && o->ca_file && o->ca_file[0]) {
        curl_easy_setopt(h, CURLOPT_CAINFO, o->ca_file);
    }
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)len);
    }
    long code = 0;
    if (curl_easy_perform(h) == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    }
    curl_slist_free_all(hl);
    curl_easy_cleanup(h);
    return code;
}

/* A request with a string body (NULL: none) as token; the status in
 * *code, the answer parsed as JSON (NULL if it is not; json_decref). */
static inline json_t *ctlf_call(const ctl_daemon *d, const char *method, const char *path,
                                const char *token, const char *body, long *code)
{
    cr_buf b;
    cr_buf_init(&b);
    ctlf_opts o = {.token = token};
    *code = ctlf_req(d, method, path, body, body ? strlen(body) : 0, &o, &b);
    json_t *v = b.len ? json_loads(cr_buf_str(&b), 0, NULL) : NULL;
    cr_buf_fini(&b);
    return v;
}

/* A member's string ("" when absent) or integer (0 when absent). */
static inline const char *ctlf_str(const json_t *v, const char *key)
{
    const char *s = json_string_value(json_object_get(v, key));
    return s ? s : "";
}

static inline int64_t ctlf_num(const json_t *v, const char *key)
{
    return (int64_t)json_integer_value(json_object_get(v, key));
}

/* Starts a tracked controller (reap.h: removed even when the test fails)
 * on a fresh directory made from tmpl ("/tmp/corral-test-X-XXXXXX"), or
 * on d->dir again when tmpl is NULL; its log is <dir>/controller.log. */
static inline void ctlf_start_ok(ctl_daemon *d, const char *tmpl, const char *extra)
{
    if (tmpl) {
        snprintf(d->dir, sizeof d->dir, "%s", tmpl);
        assert_non_null(mkdtemp(d->dir));
    }
    cr_test_track(d->dir, 0);
    char log[300];
    snprintf(log, sizeof log, "%s/controller.log", d->dir);
    int st = 0;
    bool ok = ctlf_spawn(d, extra, log, 20, &st);
    cr_test_track(d->dir, d->pid);
    assert_true(ok);
    assert_int_equal(strncmp(d->admin, "crl_", 4), 0);
}

/* Submits a job as token; asserts 201 and returns its (first) id. */
static inline int64_t ctlf_submit_ok(const ctl_daemon *d, const char *token, const char *body)
{
    long code;
    json_t *v = ctlf_call(d, "POST", "/v1/jobs", token, body, &code);
    assert_int_equal(code, 201);
    int64_t id = (int64_t)json_integer_value(json_array_get(json_object_get(v, "ids"), 0));
    json_decref(v);
    assert_true(id > 0);
    return id;
}

/* GET /v1/jobs/ID as the admin; asserts 200. Returned new (json_decref). */
static inline json_t *ctlf_job_ok(const ctl_daemon *d, int64_t id)
{
    char path[64];
    long code;
    snprintf(path, sizeof path, "/v1/jobs/%lld", (long long)id);
    json_t *v = ctlf_call(d, "GET", path, d->admin, NULL, &code);
    assert_int_equal(code, 200);
    return v;
}

/* Fills the file system of dir to the last byte (dir/filler). */
static inline void ctlf_fill_disk_ok(const char *dir)
{
    char path[400];
    snprintf(path, sizeof path, "%s/filler", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    char buf[4096];
    memset(buf, 'x', sizeof buf);
    while (write(fd, buf, sizeof buf) > 0) {
    }
    /* the last partial page too */
    while (write(fd, buf, 1) > 0) {
    }
    assert_true(errno == ENOSPC);
    close(fd);
}

#endif
