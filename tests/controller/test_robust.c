/*
 * test_robust.c - the controller on a bad day (issue 10), each test against
 * the real daemon on loopback with a real SQLite file:
 *   - disk full: every refused change is refused in memory too and after a
 *     restart; every acknowledged one survives; reads keep working;
 *   - a hung agent: log fetches are capped and bounded, other callers are
 *     answered;
 *   - limits: spec size, array tasks sharing one stored spec, bounded pages;
 *   - retention and paging: finished jobs leave memory, stay queryable;
 *   - store integrity: damaged WAL refused, no admin token minted over an
 *     existing cluster, job ids never reused;
 *   - Idempotency-Key on submit.
 * Waits poll a condition with a generous deadline; nothing depends on timing
 * to pass.
 */
#include "cr_buf.h"
#include "cr_time.h"
#include "../integration/reap.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctl_fixture.h"
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>

typedef ctl_daemon daemon_t;

static void poll_sleep(void)
{
    ctlf_nap();
}

/* One request; the status (0 = no answer), the body in out, headers in hdrs
 * (may be NULL); extra: one more request header or NULL. */
static long req_h(const daemon_t *d, const char *method, const char *path, const char *token,
                  const char *body, const char *extra, cr_buf *out, cr_buf *hdrs)
{
    ctlf_opts o = {.token = token, .extra = extra, .hdrs = hdrs};
    return ctlf_req(d, method, path, body, body ? strlen(body) : 0, &o, out);
}

static json_t *call(const daemon_t *d, const char *method, const char *path, const char *token,
                    const char *body, long *code)
{
    return ctlf_call(d, method, path, token, body, code);
}

static const char *str(json_t *v, const char *key)
{
    return ctlf_str(v, key);
}

static int64_t num(json_t *v, const char *key)
{
    return ctlf_num(v, key);
}

static void fresh_dir(daemon_t *d)
{
    memset(d, 0, sizeof *d);
    snprintf(d->dir, sizeof d->dir, "/tmp/corral-test-robust-XXXXXX");
    assert_non_null(mkdtemp(d->dir));
}

/* Daemons started and not stopped yet, and the test's state directory:
 * the teardown ends and removes them even when an assertion ended the
 * test early. */
static pid_t live[8];
static char test_dir[256];

static void live_add(pid_t pid)
{
    for (size_t i = 0; i < 8; i++) {
        if (live[i] == 0) {
            live[i] = pid;
            return;
        }
    }
}

static void live_del(pid_t pid)
{
    for (size_t i = 0; i < 8; i++) {
        if (live[i] == pid) {
            live[i] = 0;
        }
    }
}

/* Start the controller on d->dir; returns false (and its exit status in
 * *status) when it exits instead of listening. */
static bool try_start(daemon_t *d, const char *extra, int *status)
{
    char log[300];
    snprintf(log, sizeof log, "%s.log", d->dir);
    snprintf(test_dir, sizeof test_dir, "%s", d->dir);
    bool ok = ctlf_spawn(d, extra, log, 30, status);
    if (d->pid > 0) {
        live_add(d->pid);
    }
    assert_true(ok || d->pid == 0); /* exited, or it did not listen in time */
    return ok;
}

static void start(daemon_t *d, const char *extra)
{
    int st = 0;
    bool ok = try_start(d, extra, &st);
    if (!ok) {
        fprintf(stderr, "controller exited (status %d); log %s.log\n", st, d->dir);
    }
    assert_true(ok);
    assert_int_equal(strncmp(d->admin, "crl_", 4), 0);
}

static void stop(daemon_t *d, int sig)
{
    if (d->pid > 0) {
        cr_test_stop(d->pid, sig, 60);
        live_del(d->pid);
        d->pid = 0;
    }
}

static void cleanup(daemon_t *d)
{
    char cmd[1000];
    snprintf(cmd, sizeof cmd, "umount '%s' 2>/dev/null; rm -rf '%s' '%s.log'", d->dir, d->dir,
             d->dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot remove %s\n", d->dir);
    }
}

static bool log_has(const daemon_t *d, const char *needle)
{
    char path[300];
    snprintf(path, sizeof path, "%s.log", d->dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        return false;
    }
    char line[2048];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        found = strstr(line, needle) != NULL;
    }
    fclose(f);
    return found;
}

static int64_t submit(const daemon_t *d, const char *token, const char *body)
{
    return ctlf_submit_ok(d, token, body);
}

static json_t *job(const daemon_t *d, int64_t id, long *code)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/jobs/%lld", (long long)id);
    return call(d, "GET", path, d->admin, NULL, code);
}

static void expect_state(const daemon_t *d, int64_t id, const char *state)
{
    long code;
    json_t *v = job(d, id, &code);
    assert_int_equal(code, 200);
    if (strcmp(str(v, "state"), state) != 0) {
        fprintf(stderr, "job %lld: state %s, expected %s\n", (long long)id, str(v, "state"), state);
    }
    assert_string_equal(str(v, "state"), state);
    json_decref(v);
}

static long action(const daemon_t *d, int64_t id, const char *what, json_t **out)
{
    char path[96];
    long code;
    snprintf(path, sizeof path, "/v1/jobs/%lld/%s", (long long)id, what);
    json_t *v = call(d, "POST", path, d->admin, NULL, &code);
    if (out) {
        *out = v;
    } else {
        json_decref(v);
    }
    return code;
}

static char *mint_token(const daemon_t *d, int64_t *id)
{
    long code;
    json_t *v =
        call(d, "POST", "/v1/tokens", d->admin, "{\"role\":\"admin\",\"name\":\"second\"}", &code);
    assert_int_equal(code, 201);
    char *t = strdup(str(v, "token"));
    *id = num(v, "id");
    json_decref(v);
    return t;
}

static long whoami(const daemon_t *d, const char *token)
{
    long code;
    json_t *v = call(d, "GET", "/v1/whoami", token, NULL, &code);
    json_decref(v);
    return code;
}

/* ------------------------------------------------------------------------ */
/* 1. Disk full: nothing refused is kept, nothing acknowledged is lost.      */

static void fill_disk(const char *dir)
{
    ctlf_fill_disk_ok(dir);
}

/* The tmpfs of test_disk_full, unmounted by its teardown even when an
 * assertion ends the test early. */
static char mounted[256];

static int teardown(void **state)
{
    for (size_t i = 0; i < 8; i++) {
        if (live[i] > 0) {
            kill(live[i], SIGKILL);
            waitpid(live[i], NULL, 0);
            live[i] = 0;
        }
    }
    if (*mounted) {
        umount2(mounted, MNT_DETACH);
        *mounted = '\0';
    }
    if (*test_dir) {
        char cmd[1000];
        snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s.log' '%s.json'", test_dir, test_dir, test_dir);
        if (system(cmd) != 0) {
            fprintf(stderr, "cannot remove %s\n", test_dir);
        }
        *test_dir = '\0';
    }
    return 0;
}

static void test_disk_full(void **state)
{
    daemon_t d;
    fresh_dir(&d);
    if (mount("tmpfs", d.dir, "tmpfs", 0, "size=8m,mode=0700") == 0) {
        snprintf(mounted, sizeof mounted, "%s", d.dir);
    } else {
        fprintf(stderr, "cannot mount a tmpfs (%s): needs root\n", strerror(errno));
        cleanup(&d);
        skip();
    }
    if (!*mounted) {
        return;
    }
    start(&d, NULL);
    long code;
    json_t *v = call(&d, "POST", "/v1/tenants", d.admin, "{\"name\":\"kept\"}", &code);
    assert_int_equal(code, 201);
    json_decref(v);
    int64_t tok_id;
    char *tok = mint_token(&d, &tok_id);
    int64_t a = submit(&d, d.admin, "{\"command\":[\"true\"]}");
    int64_t b = submit(&d, d.admin, "{\"command\":[\"true\"]}");
    assert_int_equal(action(&d, b, "hold", NULL), 200);

    fill_disk(d.dir);
    /* Every change is refused as "disk full" (507), and memory keeps the
     * state before it. */
    json_t *e = NULL;
    assert_int_equal(action(&d, a, "cancel", &e), 507);
    assert_string_equal(str(e, "error"), "CR_EDISKFULL");
    assert_non_null(strstr(str(e, "message"), "disk full"));
    json_decref(e);
    expect_state(&d, a, "pending");
    assert_int_equal(action(&d, a, "hold", NULL), 507);
    expect_state(&d, a, "pending");
    assert_int_equal(action(&d, b, "release", NULL), 507);
    expect_state(&d, b, "held");
    v = call(&d, "POST", "/v1/jobs", d.admin, "{\"command\":[\"true\"]}", &code);
    assert_int_equal(code, 507);
    json_decref(v);
    v = call(&d, "POST", "/v1/tenants", d.admin, "{\"name\":\"refused\"}", &code);
    assert_int_equal(code, 507);
    json_decref(v);
    v = call(&d, "GET", "/v1/tenants/refused", d.admin, NULL, &code);
    assert_int_equal(code, 404);
    json_decref(v);
    v = call(&d, "PUT", "/v1/tenants/kept", d.admin, "{\"weight\":5,\"quotas\":{\"A100\":3}}",
             &code);
    assert_int_equal(code, 507);
    json_decref(v);
    v = call(&d, "GET", "/v1/tenants/kept", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_true(json_number_value(json_object_get(v, "weight")) == 1.0);
    json_decref(v);
    char path[64];
    snprintf(path, sizeof path, "/v1/tokens/%lld", (long long)tok_id);
    v = call(&d, "DELETE", path, d.admin, NULL, &code);
    assert_int_equal(code, 507);
    json_decref(v);
    assert_int_equal(whoami(&d, tok), 200); /* the refused revoke left it working */
    v = call(&d, "POST", "/v1/tokens", d.admin, "{\"role\":\"admin\",\"name\":\"refused\"}", &code);
    assert_int_equal(code, 507);
    json_decref(v);
    /* Reads keep working. */
    v = call(&d, "GET", "/v1/jobs?limit=10", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_int_equal(num(v, "total"), 2);
    json_decref(v);

    /* Space again: changes work again, and what was refused stays refused
     * after a restart while what was acknowledged stays. */
    char filler[400];
    snprintf(filler, sizeof filler, "%s/filler", d.dir);
    assert_int_equal(unlink(filler), 0);
    assert_int_equal(action(&d, a, "hold", NULL), 200);
    stop(&d, SIGKILL);
    start(&d, NULL);
    expect_state(&d, a, "held");
    expect_state(&d, b, "held");
    assert_int_equal(whoami(&d, tok), 200);
    v = call(&d, "GET", "/v1/tenants/refused", d.admin, NULL, &code);
    assert_int_equal(code, 404);
    json_decref(v);
    v = call(&d, "GET", "/v1/tenants/kept", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_true(json_number_value(json_object_get(v, "weight")) == 1.0);
    json_decref(v);
    v = call(&d, "GET", "/v1/jobs?limit=10", d.admin, NULL, &code);
    assert_int_equal(num(v, "total"), 2);
    json_decref(v);
    free(tok);
    stop(&d, SIGTERM);
    cleanup(&d);
}

/* The other changes on a full disk: service create/scale/delete, node
 * drain/undrain, node labels, a whole-array action and a signal are refused (507) and
 * leave memory as it was, and none of them is there after a restart. */
static const char *const robust_reg =
    "{\"node\":\"%s\",\"addr\":\"127.0.0.1\",\"port\":1,\"rack\":\"r1\",\"cpus\":8,"
    "\"gpus\":[{\"index\":0,\"uuid\":\"GPU-%s-0\",\"model\":\"A100 SXM\","
    "\"mem_bytes\":85899345920}]}";

static char *reg_node(const daemon_t *d, const char *name)
{
    char body[512];
    snprintf(body, sizeof body, robust_reg, name, name);
    long code;
    json_t *v = call(d, "POST", "/v1/agents/register", d->join, body, &code);
    assert_int_equal(code, 200);
    char *t = strdup(str(v, "node_token"));
    json_decref(v);
    return t;
}

static void expect_get(const daemon_t *d, const char *path, long want, const char *key,
                       const char *value)
{
    long code;
    json_t *v = call(d, "GET", path, d->admin, NULL, &code);
    if (code != want) {
        fprintf(stderr, "GET %s: %ld, expected %ld\n", path, code, want);
    }
    assert_int_equal(code, want);
    if (key) {
        json_t *x = json_object_get(v, key);
        char got[64];
        if (json_is_string(x)) {
            snprintf(got, sizeof got, "%s", json_string_value(x));
        } else if (json_is_boolean(x)) {
            snprintf(got, sizeof got, "%s", json_is_true(x) ? "true" : "false");
        } else {
            snprintf(got, sizeof got, "%lld", (long long)json_integer_value(x));
        }
        if (strcmp(got, value) != 0) {
            fprintf(stderr, "GET %s: %s = %s, expected %s\n", path, key, got, value);
        }
        assert_string_equal(got, value);
    }
    json_decref(v);
}

/* Whether node n1's desired state (as its agent reads it) asks for a signal. */
static bool desired_has_signal(const daemon_t *d, const char *nt)
{
    long code;
    json_t *v = call(d, "GET", "/v1/agents/n1/desired", nt, NULL, &code);
    assert_int_equal(code, 200);
    char *s = json_dumps(v, JSON_COMPACT);
    bool has = s && strstr(s, "\"signal\":{") != NULL;
    free(s);
    json_decref(v);
    return has;
}

static void wait_state(const daemon_t *d, int64_t id, const char *state)
{
    int64_t deadline = cr_mono_ns() + 30 * CR_NS_PER_SEC;
    for (;;) {
        long code;
        json_t *v = job(d, id, &code);
        bool ok = code == 200 && strcmp(str(v, "state"), state) == 0;
        json_decref(v);
        if (ok || cr_mono_ns() > deadline) {
            break;
        }
        poll_sleep();
    }
    expect_state(d, id, state);
}

static void test_disk_full_others(void **state)
{
    daemon_t d;
    fresh_dir(&d);
    if (mount("tmpfs", d.dir, "tmpfs", 0, "size=8m,mode=0700") == 0) {
        snprintf(mounted, sizeof mounted, "%s", d.dir);
    } else {
        fprintf(stderr, "cannot mount a tmpfs (%s): needs root\n", strerror(errno));
        cleanup(&d);
        skip();
    }
    if (!*mounted) {
        return;
    }
    start(&d, NULL);
    char *nt = reg_node(&d, "n1");
    char *nt2 = reg_node(&d, "n2");
    long code;
    json_t *v = call(&d, "POST", "/v1/nodes/n2/drain", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    json_decref(v);
    /* one job running on n1's GPU; an array that cannot run (8 GPUs) */
    int64_t run = submit(&d, d.admin, "{\"command\":[\"sleep\",\"1000\"],\"gpus\":1}");
    wait_state(&d, run, "running");
    int64_t arr = submit(&d, d.admin, "{\"command\":[\"true\"],\"gpus\":8,\"array\":3}");
    v = call(&d, "POST", "/v1/services", d.admin,
             "{\"name\":\"kept\",\"command\":[\"srv\"],\"gpus\":1,\"min_replicas\":0,"
             "\"max_replicas\":4,\"replicas\":0}",
             &code);
    assert_int_equal(code, 201);
    json_decref(v);
    assert_false(desired_has_signal(&d, nt));

    fill_disk(d.dir);
    v = call(&d, "POST", "/v1/services", d.admin,
             "{\"name\":\"refused\",\"command\":[\"srv\"],\"gpus\":1}", &code);
    assert_int_equal(code, 507);
    json_decref(v);
    expect_get(&d, "/v1/services/refused", 404, NULL, NULL);
    v = call(&d, "POST", "/v1/services/kept/scale", d.admin, "{\"replicas\":2}", &code);
    assert_int_equal(code, 507);
    json_decref(v);
    expect_get(&d, "/v1/services/kept", 200, "desired_replicas", "0");
    v = call(&d, "DELETE", "/v1/services/kept", d.admin, NULL, &code);
    assert_int_equal(code, 507);
    json_decref(v);
    expect_get(&d, "/v1/services/kept", 200, "desired_replicas", "0");
    v = call(&d, "POST", "/v1/nodes/n1/drain", d.admin, NULL, &code);
    assert_int_equal(code, 507);
    json_decref(v);
    expect_get(&d, "/v1/nodes/n1", 200, "drained", "false");
    v = call(&d, "POST", "/v1/nodes/n2/undrain", d.admin, NULL, &code);
    assert_int_equal(code, 507);
    json_decref(v);
    expect_get(&d, "/v1/nodes/n2", 200, "drained", "true");
    v = call(&d, "POST", "/v1/nodes/n1/labels", d.admin, "{\"labels\":{\"zone\":\"b\"}}", &code);
    assert_int_equal(code, 507);
    json_decref(v);
    v = call(&d, "GET", "/v1/nodes/n1", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_null(json_object_get(json_object_get(v, "labels"), "zone")); /* not applied */
    json_decref(v);
    char path[96];
    snprintf(path, sizeof path, "/v1/jobs/%lld/cancel?array=1", (long long)arr);
    v = call(&d, "POST", path, d.admin, NULL, &code);
    assert_int_equal(code, 507);
    json_decref(v);
    for (int64_t k = arr; k < arr + 3; k++) {
        expect_state(&d, k, "pending");
    }
    snprintf(path, sizeof path, "/v1/jobs/%lld/signal", (long long)run);
    v = call(&d, "POST", path, d.admin, "{\"signal\":\"USR1\"}", &code);
    assert_int_equal(code, 507);
    json_decref(v);
    assert_false(desired_has_signal(&d, nt)); /* the agent was not told */

    /* Nothing refused is there after a restart. */
    char filler[400];
    snprintf(filler, sizeof filler, "%s/filler", d.dir);
    assert_int_equal(unlink(filler), 0);
    stop(&d, SIGKILL);
    start(&d, NULL);
    expect_get(&d, "/v1/services/refused", 404, NULL, NULL);
    expect_get(&d, "/v1/services/kept", 200, "desired_replicas", "0");
    expect_get(&d, "/v1/nodes/n1", 200, "drained", "false");
    expect_get(&d, "/v1/nodes/n2", 200, "drained", "true");
    v = call(&d, "GET", "/v1/nodes/n1", d.admin, NULL, &code);
    assert_null(json_object_get(json_object_get(v, "labels"), "zone"));
    json_decref(v);
    for (int64_t k = arr; k < arr + 3; k++) {
        expect_state(&d, k, "pending");
    }
    /* and with space again each of them works */
    v = call(&d, "POST", "/v1/nodes/n1/labels", d.admin, "{\"labels\":{\"zone\":\"b\"}}", &code);
    assert_int_equal(code, 200);
    json_decref(v);
    v = call(&d, "GET", "/v1/nodes/n1", d.admin, NULL, &code);
    assert_string_equal(json_string_value(json_object_get(json_object_get(v, "labels"), "zone")),
                        "b");
    json_decref(v);
    v = call(&d, "POST", "/v1/services/kept/scale", d.admin, "{\"replicas\":2}", &code);
    assert_int_equal(code, 200);
    json_decref(v);
    expect_get(&d, "/v1/services/kept", 200, "desired_replicas", "2");
    snprintf(path, sizeof path, "/v1/jobs/%lld/cancel?array=1", (long long)arr);
    v = call(&d, "POST", path, d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_int_equal(num(v, "array_last"), arr + 2);
    json_decref(v);
    expect_state(&d, arr + 2, "cancelled");
    v = call(&d, "POST", "/v1/nodes/n2/undrain", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    json_decref(v);
    expect_get(&d, "/v1/nodes/n2", 200, "drained", "false");
    v = call(&d, "DELETE", "/v1/services/kept", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    json_decref(v);
    stop(&d, SIGKILL);
    start(&d, NULL);
    expect_get(&d, "/v1/nodes/n2", 200, "drained", "false");
    expect_get(&d, "/v1/services/kept", 404, NULL, NULL); /* a delete survives a restart */
    free(nt);
    free(nt2);
    stop(&d, SIGTERM);
    cleanup(&d);
}

/* ------------------------------------------------------------------------ */
/* 2. A hung agent does not starve the API threads.                          */

typedef struct hung_agent {
    int lfd;
    _Atomic int accepted;
    int fds[64];
    atomic_bool stop;
} hung_agent;

static void *hung_main(void *arg)
{
    hung_agent *h = arg;
    while (!atomic_load(&h->stop)) {
        int fd = accept(h->lfd, NULL, NULL);
        if (fd < 0) {
            break;
        }
        int n = atomic_fetch_add(&h->accepted, 1);
        if (n < 64) {
            h->fds[n] = fd; /* held open, never answered */
        } else {
            close(fd);
        }
    }
    return NULL;
}

/* An agent that answers every request at once with a short log. */
static void *quick_main(void *arg)
{
    hung_agent *h = arg;
    while (!atomic_load(&h->stop)) {
        int fd = accept(h->lfd, NULL, NULL);
        if (fd < 0) {
            break;
        }
        char buf[4096];
        size_t got = 0;
        while (got < sizeof buf - 1) {
            ssize_t r = read(fd, buf + got, sizeof buf - 1 - got);
            if (r <= 0) {
                break;
            }
            got += (size_t)r;
            buf[got] = '\0';
            if (strstr(buf, "\r\n\r\n")) {
                break;
            }
        }
        static const char ans[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n"
                                  "\r\nok\n";
        if (write(fd, ans, sizeof ans - 1) < 0) {
            fprintf(stderr, "quick agent: write failed\n");
        }
        close(fd);
        atomic_fetch_add(&h->accepted, 1);
    }
    return NULL;
}

static int listen_any(struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)sa, sizeof *sa), 0);
    assert_int_equal(listen(fd, 64), 0);
    socklen_t sl = sizeof *sa;
    getsockname(fd, (struct sockaddr *)sa, &sl);
    return fd;
}

static _Atomic int logs_done;

typedef struct log_call {
    const daemon_t *d;
    char path[96];
    long code;
} log_call;

static void *log_main(void *arg)
{
    log_call *l = arg;
    cr_buf b;
    cr_buf_init(&b);
    l->code = req_h(l->d, "GET", l->path, l->d->admin, NULL, NULL, &b, NULL);
    cr_buf_fini(&b);
    atomic_fetch_add(&logs_done, 1);
    return NULL;
}

static void test_hung_agent_logs(void **state)
{
    daemon_t d;
    fresh_dir(&d);
    start(&d, NULL);
    hung_agent h;
    memset(&h, 0, sizeof h);
    h.lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(h.lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(h.lfd, 64), 0);
    socklen_t sl = sizeof sa;
    getsockname(h.lfd, (struct sockaddr *)&sa, &sl);
    pthread_t ht;
    pthread_create(&ht, NULL, hung_main, &h);
    char body[512];
    snprintf(body, sizeof body,
             "{\"node\":\"hung\",\"addr\":\"127.0.0.1\",\"port\":%u,\"gpus\":[{\"index\":0,"
             "\"model\":\"L4\"}]}",
             (unsigned)ntohs(sa.sin_port));
    long code;
    json_t *v = call(&d, "POST", "/v1/agents/register", d.join, body, &code);
    assert_int_equal(code, 200);
    char node_tok[200];
    snprintf(node_tok, sizeof node_tok, "%s", str(v, "node_token"));
    json_decref(v);
    int64_t id = submit(&d, d.admin, "{\"command\":[\"sleep\",\"1000\"]}");
    int64_t deadline = cr_mono_ns() + 30 * CR_NS_PER_SEC;
    for (;;) { /* placed on the hung node */
        v = job(&d, id, &code);
        bool running = strcmp(str(v, "state"), "running") == 0;
        json_decref(v);
        if (running) {
            break;
        }
        assert_true(cr_mono_ns() < deadline);
        poll_sleep();
    }
    /* A second node whose agent answers: its job's logs must not wait
     * behind the hung node's (per-node fairness of the log workers). */
    hung_agent quick;
    memset(&quick, 0, sizeof quick);
    struct sockaddr_in qa;
    quick.lfd = listen_any(&qa);
    pthread_t qt;
    pthread_create(&qt, NULL, quick_main, &quick);
    snprintf(body, sizeof body,
             "{\"node\":\"quick\",\"addr\":\"127.0.0.1\",\"port\":%u,\"gpus\":[{\"index\":0,"
             "\"model\":\"L4\"}]}",
             (unsigned)ntohs(qa.sin_port));
    v = call(&d, "POST", "/v1/agents/register", d.join, body, &code);
    assert_int_equal(code, 200);
    json_decref(v);
    int64_t id2 = submit(&d, d.admin, "{\"command\":[\"sleep\",\"1000\"]}");
    deadline = cr_mono_ns() + 30 * CR_NS_PER_SEC;
    for (;;) { /* placed on the quick node (the hung one's GPU is taken) */
        v = job(&d, id2, &code);
        bool running = strcmp(str(v, "state"), "running") == 0;
        json_decref(v);
        if (running) {
            break;
        }
        assert_true(cr_mono_ns() < deadline);
        poll_sleep();
    }
    enum { NLOG = 20 };
    atomic_store(&logs_done, 0);
    log_call calls[NLOG];
    pthread_t th[NLOG];
    for (int i = 0; i < NLOG; i++) {
        calls[i].d = &d;
        snprintf(calls[i].path, sizeof calls[i].path, "/v1/jobs/%lld/logs", (long long)id);
        calls[i].code = -1;
        pthread_create(&th[i], NULL, log_main, &calls[i]);
    }
    /* The fetches reached the hung agent (one at a time: it has half the
     * workers). */
    deadline = cr_mono_ns() + 30 * CR_NS_PER_SEC;
    while (atomic_load(&h.accepted) < 1) {
        assert_true(cr_mono_ns() < deadline);
        poll_sleep();
    }
    /* A controller that lets every thread hang has 4 there at once: give
     * it a moment to (not a condition of passing). */
    int64_t settle = cr_mono_ns() + CR_NS_PER_SEC;
    while (atomic_load(&h.accepted) < 4 && cr_mono_ns() < settle) {
        poll_sleep();
    }
    /* Other callers are answered meanwhile: an agent's heartbeat and a
     * user's read, each within a deadline generous for a loopback call
     * (and shorter than the 10 s a blocked thread used to take). */
    for (int k = 0; k < 4; k++) {
        int64_t t0 = cr_mono_ns();
        v = call(&d, "POST", "/v1/agents/hung/status", node_tok, "{}", &code);
        json_decref(v);
        assert_true(code > 0);
        v = job(&d, id, &code);
        json_decref(v);
        assert_int_equal(code, 200);
        int64_t took = cr_mono_ns() - t0;
        if (took >= 8 * CR_NS_PER_SEC) {
            fprintf(stderr, "a read waited %.1f s behind log fetches\n", (double)took / 1e9);
        }
        assert_true(took < 8 * CR_NS_PER_SEC);
    }
    /* The hung node holds at most half the log workers: the quick node's
     * logs come back (a worker free for it), not 503 after waiting. */
    char qpath[96];
    snprintf(qpath, sizeof qpath, "/v1/jobs/%lld/logs", (long long)id2);
    cr_buf qb;
    cr_buf_init(&qb);
    code = req_h(&d, "GET", qpath, d.admin, NULL, NULL, &qb, NULL);
    if (code != 200) {
        fprintf(stderr, "quick node's logs: %ld %s\n", code, cr_buf_str(&qb));
    }
    assert_int_equal(code, 200);
    assert_string_equal(cr_buf_str(&qb), "ok\n");
    cr_buf_fini(&qb);
    for (int i = 0; i < NLOG; i++) {
        pthread_join(th[i], NULL);
        /* busy (503) or the agent's deadline (504), never a hang */
        if (calls[i].code != 503 && calls[i].code != 504) {
            fprintf(stderr, "log fetch %d answered %ld\n", i, calls[i].code);
        }
        assert_true(calls[i].code == 503 || calls[i].code == 504);
    }
    atomic_store(&h.stop, true);
    shutdown(h.lfd, SHUT_RDWR);
    close(h.lfd);
    pthread_join(ht, NULL);
    for (int i = 0; i < atomic_load(&h.accepted) && i < 64; i++) {
        close(h.fds[i]);
    }
    atomic_store(&quick.stop, true);
    shutdown(quick.lfd, SHUT_RDWR);
    close(quick.lfd);
    pthread_join(qt, NULL);
    stop(&d, SIGTERM);
    cleanup(&d);
}

/* ------------------------------------------------------------------------ */
/* 3. Limits: spec size, one stored spec per array, bounded pages.           */

/* A submit body of about value_bytes: eight long arguments (the env no
 * longer serves: it is sealed, and shown by name only). */
static char *big_body(size_t value_bytes, int array)
{
    cr_buf b;
    cr_buf_init(&b);
    cr_buf_puts(&b, "{\"command\":[\"true\"");
    for (int i = 0; i < 8; i++) {
        cr_buf_puts(&b, ",\"");
        for (size_t k = 0; k < value_bytes / 8; k++) {
            cr_buf_putc(&b, 'a' + (char)(k % 26));
        }
        cr_buf_putc(&b, '"');
    }
    cr_buf_puts(&b, "]");
    if (array > 1) {
        cr_buf_printf(&b, ",\"array\":%d", array);
    }
    cr_buf_puts(&b, "}");
    return cr_buf_take(&b);
}

static off_t store_bytes(const daemon_t *d)
{
    off_t total = 0;
    const char *const sfx[] = {"", "-wal"};
    for (int i = 0; i < 2; i++) {
        char p[400];
        struct stat st;
        snprintf(p, sizeof p, "%s/corral.db%s", d->dir, sfx[i]);
        if (stat(p, &st) == 0) {
            total += st.st_size;
        }
    }
    return total;
}

static void test_limits(void **state)
{
    daemon_t d;
    fresh_dir(&d);
    start(&d, NULL);
    long code;
    /* Over max_spec_bytes (256 KiB by default) but under the 1 MiB body cap. */
    char *big = big_body(400 * 1024, 1);
    json_t *v = call(&d, "POST", "/v1/jobs", d.admin, big, &code);
    assert_int_equal(code, 413);
    assert_non_null(strstr(str(v, "message"), "max_spec_bytes"));
    json_decref(v);
    free(big);
    v = call(&d, "POST", "/v1/jobs", d.admin, "{\"command\":[\"true\"],\"array\":10001}", &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "field"), "array");
    json_decref(v);
    /* 60 tasks of a 200 KiB spec: the store holds the spec once, not 60
     * times (12 MB). */
    off_t before = store_bytes(&d);
    char *arr = big_body(200 * 1024, 60);
    v = call(&d, "POST", "/v1/jobs", d.admin, arr, &code);
    assert_int_equal(code, 201);
    assert_int_equal(json_array_size(json_object_get(v, "ids")), 60);
    int64_t first = (int64_t)json_integer_value(json_array_get(json_object_get(v, "ids"), 0));
    json_decref(v);
    free(arr);
    off_t grew = store_bytes(&d) - before;
    fprintf(stderr, "limits: 60 array tasks of a 200 KiB spec grew the store by %lld bytes\n",
            (long long)grew);
    assert_true(grew < 2 * 1024 * 1024);
    /* A page is bounded in bytes too: 60 x 200 KiB does not come back in
     * one answer; next_cursor says where to go on, and paging gets all. */
    cr_buf b;
    cr_buf_init(&b);
    assert_int_equal(req_h(&d, "GET", "/v1/jobs?limit=1000", d.admin, NULL, NULL, &b, NULL), 200);
    assert_true(b.len <= 5 * 1024 * 1024);
    v = json_loads(cr_buf_str(&b), 0, NULL);
    assert_non_null(v);
    assert_int_equal(num(v, "total"), 60);
    assert_true(num(v, "count") < 60);
    json_t *last = json_array_get(json_object_get(v, "items"), (size_t)num(v, "count") - 1);
    assert_int_equal(num(last, "id"), first + 59); /* newest, with the shared spec merged back */
    assert_int_equal(strlen(json_string_value(json_array_get(json_object_get(last, "command"), 8))),
                     200 * 1024 / 8);
    assert_string_equal(str(last, "state"), "pending");
    assert_null(json_object_get(last, "spec_ref"));
    assert_true(*str(v, "next_cursor") != '\0');
    size_t seen = (size_t)num(v, "count");
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs?limit=1000&cursor=%s", str(v, "next_cursor"));
    json_decref(v);
    while (seen < 60) {
        cr_buf_reset(&b);
        assert_int_equal(req_h(&d, "GET", path, d.admin, NULL, NULL, &b, NULL), 200);
        assert_true(b.len <= 5 * 1024 * 1024);
        v = json_loads(cr_buf_str(&b), 0, NULL);
        assert_true(num(v, "count") > 0);
        seen += (size_t)num(v, "count");
        snprintf(path, sizeof path, "/v1/jobs?limit=1000&cursor=%s", str(v, "next_cursor"));
        json_decref(v);
    }
    assert_int_equal(seen, 60);
    cr_buf_fini(&b);
    /* After a restart each task still has the whole spec. */
    stop(&d, SIGTERM);
    start(&d, NULL);
    v = job(&d, first + 59, &code);
    assert_int_equal(code, 200);
    assert_int_equal(strlen(json_string_value(json_array_get(json_object_get(v, "command"), 8))),
                     200 * 1024 / 8);
    assert_int_equal(num(v, "array_index"), 59);
    json_decref(v);
    stop(&d, SIGTERM);
    cleanup(&d);
}

/* ------------------------------------------------------------------------ */
/* 8. Retention and paging.                                                  */

static double metric(const daemon_t *d, const char *name)
{
    cr_buf b;
    cr_buf_init(&b);
    long code = req_h(d, "GET", "/metrics", NULL, NULL, NULL, &b, NULL);
    assert_int_equal(code, 200);
    double val = -1;
    const char *p = cr_buf_str(&b);
    size_t n = strlen(name);
    while ((p = strstr(p, name)) != NULL) {
        if ((p == cr_buf_str(&b) || p[-1] == '\n') && p[n] == ' ') {
            val = strtod(p + n + 1, NULL);
            break;
        }
        p += n;
    }
    cr_buf_fini(&b);
    return val;
}

static void test_retention_paging(void **state)
{
    daemon_t d;
    fresh_dir(&d);
    char cfg[400];
    snprintf(cfg, sizeof cfg, "%s.json", d.dir);
    FILE *f = fopen(cfg, "w");
    assert_non_null(f);
    fprintf(f, "{\"retain_finished\":5,\"retain_s\":3600}\n");
    fclose(f);
    char extra[500];
    snprintf(extra, sizeof extra, "--config %s", cfg);
    start(&d, extra);
    enum { N = 30 };
    int64_t ids[N];
    for (int i = 0; i < N; i++) {
        ids[i] = submit(&d, d.admin, "{\"command\":[\"true\"]}");
        if (i < 25) {
            assert_int_equal(action(&d, ids[i], "cancel", NULL), 200);
        }
    }
    /* Finished jobs leave memory down to retain_finished. */
    int64_t deadline = cr_mono_ns() + 30 * CR_NS_PER_SEC;
    while (metric(&d, "corral_jobs_finished_in_memory") > 5) {
        assert_true(cr_mono_ns() < deadline);
        poll_sleep();
    }
    /* They stay queryable: one by one, and by page. */
    expect_state(&d, ids[0], "cancelled");
    long code;
    json_t *v = call(&d, "GET", "/v1/jobs?limit=10&state=cancelled", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_int_equal(num(v, "total"), 25);
    assert_int_equal(num(v, "count"), 10);
    json_decref(v);
    json_t *seen = json_object();
    char path[128] = "/v1/jobs?limit=7";
    int pages = 0;
    for (;;) {
        v = call(&d, "GET", path, d.admin, NULL, &code);
        assert_int_equal(code, 200);
        assert_int_equal(num(v, "total"), N);
        size_t i;
        json_t *it;
        int64_t prev = 0;
        json_array_foreach(json_object_get(v, "items"), i, it)
        {
            char k[32];
            snprintf(k, sizeof k, "%lld", (long long)num(it, "id"));
            assert_null(json_object_get(seen, k));
            json_object_set_new(seen, k, json_true());
            assert_true(num(it, "id") > prev); /* each page in id order */
            prev = num(it, "id");
        }
        pages++;
        const char *next = str(v, "next_cursor");
        bool more = *next != '\0';
        snprintf(path, sizeof path, "/v1/jobs?limit=7&cursor=%s", next);
        json_decref(v);
        if (!more) {
            break;
        }
    }
    assert_int_equal(json_object_size(seen), N);
    assert_int_equal(pages, 5);
    json_decref(seen);
    /* The server's counts of active jobs (corral top). */
    v = call(&d, "GET", "/v1/jobs?limit=1&state=active", d.admin, NULL, &code);
    assert_int_equal(num(v, "total"), 5);
    assert_int_equal(num(json_object_get(v, "active"), "pending"), 5);
    json_decref(v);
    /* Unknown query parameters and bad limits are refused. */
    v = call(&d, "GET", "/v1/jobs?limt=5", d.admin, NULL, &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "field"), "limt");
    json_decref(v);
    v = call(&d, "GET", "/v1/jobs?limit=0", d.admin, NULL, &code);
    assert_int_equal(code, 400);
    json_decref(v);
    /* A gated job's dependency target that had left memory is read back
     * once and then kept while the gate waits on it (not read from the
     * store under the global lock at every 200 ms gate tick, evicted again
     * by the next retention pass, read again...). */
    assert_int_equal(action(&d, ids[29], "hold", NULL), 200);
    char dep[160];
    snprintf(dep, sizeof dep, "{\"command\":[\"true\"],\"dependency\":\"afterany:%lld:%lld\"}",
             (long long)ids[2], (long long)ids[29]);
    int64_t gated = submit(&d, d.admin, dep);
    double fetched = metric(&d, "corral_jobs_fetched_total");
    int64_t until = cr_mono_ns() + 2500 * 1000 * 1000LL; /* two retention passes and more */
    while (cr_mono_ns() < until) {
        poll_sleep();
    }
    assert_true(metric(&d, "corral_jobs_fetched_total") == fetched);
    expect_state(&d, gated, "pending");
    /* An evicted job comes back for an action, and counts as active again
     * (the metrics walk starts past the finished jobs, evicted or not). */
    double pending = metric(&d, "corral_jobs{state=\"pending\"}");
    assert_true(pending >= 1);
    assert_int_equal(action(&d, ids[1], "requeue", NULL), 200);
    expect_state(&d, ids[1], "pending");
    assert_true(metric(&d, "corral_jobs{state=\"pending\"}") == pending + 1);
    /* A restart does not bring every finished job back into memory. */
    stop(&d, SIGTERM);
    start(&d, extra);
    assert_true(metric(&d, "corral_jobs_finished_in_memory") <= 5);
    v = call(&d, "GET", "/v1/jobs?limit=1", d.admin, NULL, &code);
    assert_int_equal(num(v, "total"), N + 1); /* and the gated one */
    json_decref(v);
    stop(&d, SIGTERM);
    unlink(cfg);
    cleanup(&d);
}

/* Every job's row, walking GET /v1/jobs by cursor: {"id": item}. */
static json_t *list_all(const daemon_t *d)
{
    json_t *all = json_object();
    char path[160] = "/v1/jobs?limit=1000";
    for (int pages = 0; pages < 100; pages++) {
        long code;
        json_t *v = call(d, "GET", path, d->admin, NULL, &code);
        assert_int_equal(code, 200);
        size_t i;
        json_t *it;
        json_array_foreach(json_object_get(v, "items"), i, it)
        {
            char k[32];
            snprintf(k, sizeof k, "%lld", (long long)num(it, "id"));
            json_object_set(all, k, it);
        }
        const char *next = str(v, "next_cursor");
        bool more = *next != '\0';
        snprintf(path, sizeof path, "/v1/jobs?limit=1000&cursor=%s", next);
        json_decref(v);
        if (!more) {
            break;
        }
    }
    return all;
}

/* The list's render cache (one buffer per slot, rewritten in place while a
 * row fits, grown when it does not): rows that change, rows longer and
 * shorter than the slot's last, and slots shared by ids 4096 apart are
 * listed as GET /v1/jobs/ID shows them. */
static void test_list_cache_rows(void **state)
{
    (void)state;
    daemon_t d;
    fresh_dir(&d);
    start(&d, "");
    long code;
    json_t *v = call(&d, "POST", "/v1/jobs", d.admin,
                     "{\"name\":\"a\",\"command\":[\"true\"],\"array\":4100}", &code);
    assert_int_equal(code, 201);
    json_decref(v);
    json_t *first = list_all(&d); /* fills every slot; ids 4097-4100 take slots 0-3 */
    assert_int_equal(json_object_size(first), 4100);
    json_decref(first);
    /* Longer rows in slots that hold short ones (ids 4101-4110: slots 4-13). */
    char body[1024], val[400];
    for (int i = 0; i < 10; i++) {
        memset(val, 'n', sizeof val - 1);
        val[100 + 30 * i] = '\0';
        snprintf(
            body, sizeof body,
            "{\"name\":\"b%d\",\"command\":[\"sh\",\"-c\",\"echo %d\"],\"env\":{\"K\":\"%s\"}}", i,
            i, val);
        submit(&d, d.admin, body);
    }
    /* Rows that change after they were cached. */
    for (int64_t id = 1; id <= 30; id++) {
        assert_int_equal(action(&d, id, "cancel", NULL), 200);
    }
    for (int64_t id = 4101; id <= 4105; id++) {
        assert_int_equal(action(&d, id, "hold", NULL), 200);
    }
    json_t *second = list_all(&d);
    assert_int_equal(json_object_size(second), 4110);
    const char *k;
    json_t *it;
    json_object_foreach(second, k, it)
    {
        int64_t id = num(it, "id");
        if (!(id <= 40 || id >= 4090 || id % 97 == 0)) {
            continue;
        }
        json_t *one = job(&d, id, &code);
        assert_int_equal(code, 200);
        /* A pending job's reason is the scheduler's, rewritten any time
         * (without a commit): compared only for jobs that wait on nothing. */
        bool pending = strcmp(str(it, "state"), "pending") == 0;
        const char *keys[] = {"state", "name", "command", "env_names", "reason"};
        for (size_t q = 0; q < sizeof keys / sizeof keys[0] - (pending ? 1 : 0); q++) {
            json_t *a = json_object_get(it, keys[q]), *b = json_object_get(one, keys[q]);
            if (!json_equal(a, b)) {
                char *ta = a ? json_dumps(a, JSON_ENCODE_ANY) : NULL;
                char *tb = b ? json_dumps(b, JSON_ENCODE_ANY) : NULL;
                fprintf(stderr, "job %lld %s: listed %s, shown %s\n", (long long)id, keys[q],
                        ta ? ta : "(none)", tb ? tb : "(none)");
                free(ta);
                free(tb);
            }
            assert_true(json_equal(a, b) || (!a && !b));
        }
        json_decref(one);
    }
    /* Listed again (cache hits now): the same rows (pending reasons aside). */
    json_t *third = list_all(&d);
    json_object_foreach(second, k, it)
    {
        json_t *o = json_object_get(third, k);
        if (o && strcmp(str(it, "state"), "pending") == 0 &&
            strcmp(str(o, "state"), "pending") == 0) {
            json_object_del(it, "reason");
            json_object_del(o, "reason");
        }
    }
    assert_true(json_equal(second, third));
    json_decref(second);
    json_decref(third);
    stop(&d, SIGTERM);
    cleanup(&d);
}

/* ------------------------------------------------------------------------ */
/* 9. Store integrity.                                                       */

static void sql(const daemon_t *d, const char *stmt)
{
    char p[400];
    snprintf(p, sizeof p, "%s/corral.db", d->dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(db, stmt, NULL, NULL, &msg) != SQLITE_OK) {
        fprintf(stderr, "sql: %s\n", msg ? msg : "?");
    }
    sqlite3_free(msg);
    sqlite3_close(db);
}

static void test_ids_never_reused(void **state)
{
    daemon_t d;
    fresh_dir(&d);
    start(&d, NULL);
    for (int i = 1; i <= 4; i++) {
        assert_int_equal(submit(&d, d.admin, "{\"command\":[\"true\"]}"), i);
    }
    stop(&d, SIGTERM);
    /* The newest row is unreadable, the one before it gone entirely. */
    sql(&d, "UPDATE jobs SET doc = '{not json' WHERE id = 4; DELETE FROM jobs WHERE id = 3;");
    start(&d, NULL);
    assert_true(log_has(&d, "job=4 has a bad document"));
    assert_int_equal(submit(&d, d.admin, "{\"command\":[\"true\"]}"), 5);
    stop(&d, SIGTERM);
    /* Even with every job row and event gone, the high-water mark holds. */
    sql(&d, "DELETE FROM jobs; DELETE FROM events;");
    start(&d, NULL);
    assert_int_equal(submit(&d, d.admin, "{\"command\":[\"true\"]}"), 6);
    stop(&d, SIGTERM);
    cleanup(&d);
}

static void test_no_new_admin_over_cluster(void **state)
{
    daemon_t d;
    fresh_dir(&d);
    start(&d, NULL);
    submit(&d, d.admin, "{\"command\":[\"true\"]}");
    stop(&d, SIGTERM);
    char old_admin[128];
    snprintf(old_admin, sizeof old_admin, "%s", d.admin);
    /* The tokens are gone from a database that still has jobs. */
    sql(&d, "DELETE FROM objects WHERE kind = 'token'");
    int st = 0;
    assert_false(try_start(&d, NULL, &st));
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    assert_true(log_has(&d, "refusing to mint a new admin token"));
    /* The database is gone (empty file) but admin.token is there. */
    char p[400];
    const char *const sfx[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/corral.db%s", d.dir, sfx[i]);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/corral.db", d.dir);
    close(open(p, O_WRONLY | O_CREAT, 0600));
    assert_false(try_start(&d, NULL, &st));
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    char tok[128];
    snprintf(p, sizeof p, "%s/admin.token", d.dir);
    ctlf_read_line(p, tok, sizeof tok);
    assert_string_equal(tok, old_admin); /* not replaced */
    /* The documented way to really start over: an empty state directory. */
    unlink(p);
    start(&d, NULL);
    assert_string_not_equal(d.admin, old_admin);
    stop(&d, SIGTERM);
    cleanup(&d);
}

static void test_damaged_wal(void **state)
{
    daemon_t d;
    fresh_dir(&d);
    start(&d, NULL);
    enum { N = 24 };
    for (int i = 0; i < N; i++) {
        submit(&d, d.admin, "{\"command\":[\"true\"]}"); /* one commit each */
    }
    stop(&d, SIGKILL); /* the WAL stays, not checkpointed */
    char wal[400];
    snprintf(wal, sizeof wal, "%s/corral.db-wal", d.dir);
    struct stat stw;
    assert_int_equal(stat(wal, &stw), 0);
    unsigned char hdr[32];
    int fd = open(wal, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, hdr, sizeof hdr, 0), (ssize_t)sizeof hdr);
    uint32_t page =
        (uint32_t)hdr[8] << 24 | (uint32_t)hdr[9] << 16 | (uint32_t)hdr[10] << 8 | hdr[11];
    off_t frame = 24 + (off_t)page;
    off_t frames = (stw.st_size - 32) / frame;
    assert_true(frames >= N);
    /* 64 bytes of noise in the page data of a frame early in the log. */
    unsigned char junk[64];
    for (int i = 0; i < 64; i++) {
        junk[i] = (unsigned char)(i * 37 + 11);
    }
    off_t bad = frames / 2;
    assert_int_equal(pwrite(fd, junk, sizeof junk, 32 + bad * frame + 24 + 100),
                     (ssize_t)sizeof junk);
    close(fd);
    int st = 0;
    assert_false(try_start(&d, NULL, &st));
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    assert_true(log_has(&d, "is damaged"));
    /* The documented recovery when no backup is better: cut the WAL at the
     * damaged frame (as the log says), keeping every transaction before it. */
    char cut[64];
    snprintf(cut, sizeof cut, "truncate -s %lld", (long long)(32 + bad * frame));
    assert_true(log_has(&d, cut));
    assert_int_equal(truncate(wal, 32 + bad * frame), 0);
    start(&d, NULL);
    long code;
    json_t *v = call(&d, "GET", "/v1/jobs?limit=1", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_true(num(v, "total") > 0 && num(v, "total") < N);
    json_decref(v);
    stop(&d, SIGTERM);
    cleanup(&d);
}

/* ------------------------------------------------------------------------ */
/* 10. Idempotency-Key.                                                      */

static long submit_key(const daemon_t *d, const char *token, const char *key, const char *body,
                       int64_t *id, bool *replayed)
{
    cr_buf b, h;
    cr_buf_init(&b);
    cr_buf_init(&h);
    char hdr[200];
    snprintf(hdr, sizeof hdr, "Idempotency-Key: %s", key);
    long code = req_h(d, "POST", "/v1/jobs", token, body, hdr, &b, &h);
    json_t *v = json_loads(cr_buf_str(&b), 0, NULL);
    *id = (int64_t)json_integer_value(json_array_get(json_object_get(v, "ids"), 0));
    *replayed = strstr(cr_buf_str(&h), "Idempotent-Replayed: true") != NULL;
    json_decref(v);
    cr_buf_fini(&b);
    cr_buf_fini(&h);
    return code;
}

static void test_idempotency(void **state)
{
    daemon_t d;
    fresh_dir(&d);
    start(&d, NULL);
    const char *body = "{\"command\":[\"true\"],\"name\":\"once\"}";
    int64_t id1, id2;
    bool rep;
    assert_int_equal(submit_key(&d, d.admin, "k-1", body, &id1, &rep), 201);
    assert_false(rep);
    assert_int_equal(submit_key(&d, d.admin, "k-1", body, &id2, &rep), 201);
    assert_true(rep);
    assert_int_equal(id1, id2);
    /* Same key, another body: refused, not a second job. */
    assert_int_equal(submit_key(&d, d.admin, "k-1", "{\"command\":[\"false\"]}", &id2, &rep), 409);
    /* Another token's key space is its own. */
    int64_t tid;
    char *tok = mint_token(&d, &tid);
    assert_int_equal(submit_key(&d, tok, "k-1", body, &id2, &rep), 201);
    assert_false(rep);
    assert_true(id2 != id1);
    /* A bad key is refused by name. */
    assert_int_equal(submit_key(&d, d.admin, "has space", body, &id2, &rep), 400);
    /* The answer survives a crash. */
    stop(&d, SIGKILL);
    start(&d, NULL);
    assert_int_equal(submit_key(&d, d.admin, "k-1", body, &id2, &rep), 201);
    assert_true(rep);
    assert_int_equal(id2, id1);
    long code;
    json_t *v = call(&d, "GET", "/v1/jobs?limit=1", d.admin, NULL, &code);
    assert_int_equal(num(v, "total"), 2);
    json_decref(v);
    free(tok);
    stop(&d, SIGTERM);
    cleanup(&d);
}

static char *mint_user(const daemon_t *d, const char *tenant)
{
    long code;
    char body[200];
    snprintf(body, sizeof body, "{\"name\":\"%s\"}", tenant);
    json_t *v = call(d, "POST", "/v1/tenants", d->admin, body, &code);
    json_decref(v);
    assert_true(code == 201 || code == 409);
    snprintf(body, sizeof body, "{\"role\":\"user\",\"tenant\":\"%s\",\"name\":\"%s-user\"}",
             tenant, tenant);
    v = call(d, "POST", "/v1/tokens", d->admin, body, &code);
    assert_int_equal(code, 201);
    char *t = strdup(str(v, "token"));
    json_decref(v);
    return t;
}

/* Issue 24: the answers are kept per token. Another tenant's keyed submits,
 * more than the bound, evict only that tenant's own oldest answers: the
 * owner's retry still gets its first job back, and no duplicate is made;
 * the same key under another token is a job of that token, never the
 * owner's. */
static void test_idempotency_per_token(void **state)
{
    daemon_t d;
    fresh_dir(&d);
    char cfg[400];
    snprintf(cfg, sizeof cfg, "%s.json", d.dir);
    FILE *f = fopen(cfg, "w");
    assert_non_null(f);
    fprintf(f, "{\"idempotency_max\":100}\n");
    fclose(f);
    char extra[500];
    snprintf(extra, sizeof extra, "--config %s", cfg);
    start(&d, extra);
    char *ta = mint_user(&d, "ta");
    char *tb = mint_user(&d, "tb");
    const char *body = "{\"command\":[\"true\"],\"name\":\"a-once\"}";
    int64_t id_a, id;
    bool rep;
    assert_int_equal(submit_key(&d, ta, "a-1", body, &id_a, &rep), 201);
    assert_false(rep);
    enum { NB = 130 };
    int64_t first_b = 0;
    for (int i = 0; i < NB; i++) {
        char key[32];
        snprintf(key, sizeof key, "b-%d", i);
        assert_int_equal(submit_key(&d, tb, key, "{\"command\":[\"true\"]}", &id, &rep), 201);
        assert_false(rep);
        if (i == 0) {
            first_b = id;
        }
    }
    /* The owner's retry: the same job, replayed. */
    assert_int_equal(submit_key(&d, ta, "a-1", body, &id, &rep), 201);
    assert_true(rep);
    assert_int_equal(id, id_a);
    /* The owner's key under the other tenant's token: a job of its own. */
    assert_int_equal(submit_key(&d, tb, "a-1", body, &id, &rep), 201);
    assert_false(rep);
    assert_true(id != id_a);
    /* The bound still holds, within tenant B's own answers: its oldest key
     * went (a new job), its newest is kept. */
    assert_int_equal(submit_key(&d, tb, "b-0", "{\"command\":[\"true\"]}", &id, &rep), 201);
    assert_false(rep);
    assert_true(id != first_b);
    char last[32];
    snprintf(last, sizeof last, "b-%d", NB - 1);
    assert_int_equal(submit_key(&d, tb, last, "{\"command\":[\"true\"]}", &id, &rep), 201);
    assert_true(rep);
    long code;
    json_t *v = call(&d, "GET", "/v1/jobs?limit=1", d.admin, NULL, &code);
    assert_int_equal(num(v, "total"), 1 + NB + 2);
    json_decref(v);
    /* After a crash: the owner's answer is still there, and so is B's
     * newest (the load keeps each token's own order). */
    stop(&d, SIGKILL);
    start(&d, extra);
    assert_int_equal(submit_key(&d, ta, "a-1", body, &id, &rep), 201);
    assert_true(rep);
    assert_int_equal(id, id_a);
    assert_int_equal(submit_key(&d, tb, last, "{\"command\":[\"true\"]}", &id, &rep), 201);
    assert_true(rep);
    v = call(&d, "GET", "/v1/jobs?limit=1", d.admin, NULL, &code);
    assert_int_equal(num(v, "total"), 1 + NB + 2);
    json_decref(v);
    free(ta);
    free(tb);
    stop(&d, SIGTERM);
    cleanup(&d);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_disk_full, teardown),
        cmocka_unit_test_teardown(test_disk_full_others, teardown),
        cmocka_unit_test_teardown(test_hung_agent_logs, teardown),
        cmocka_unit_test_teardown(test_limits, teardown),
        cmocka_unit_test_teardown(test_retention_paging, teardown),
        cmocka_unit_test_teardown(test_list_cache_rows, teardown),
        cmocka_unit_test_teardown(test_ids_never_reused, teardown),
        cmocka_unit_test_teardown(test_no_new_admin_over_cluster, teardown),
        cmocka_unit_test_teardown(test_damaged_wal, teardown),
        cmocka_unit_test_teardown(test_idempotency, teardown),
        cmocka_unit_test_teardown(test_idempotency_per_token, teardown),
    };
    if (getenv("TEST_FILTER")) {
        cmocka_set_test_filter(getenv("TEST_FILTER")); /* e.g. "test_idem*" */
    }
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
