/*
 * test_controller.c - the real `corral controller` on loopback, driven over
 * HTTP as users and agents would: round trips, the auth matrix, bad input
 * that stores nothing, the agent protocol with a lost node, /metrics
 * through promtool, restart, and crash safety under kill -9.
 *
 * Each test starts its own daemon (port 0; the bound address is read from
 * <state-dir>/listen.addr) in a fresh state directory. No sleeps as
 * synchronisation: every wait polls a condition with a deadline.
 */
#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_http.h"
#include "cr_time.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../integration/reap.h"
#include "ctl_fixture.h"
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>

typedef ctl_daemon daemon_t;

static const char *bin(void)
{
    return ctlf_bin();
}

static void poll_sleep(void)
{
    ctlf_nap();
}

static char ca_file[300]; /* set while a TLS test runs */

/* One request; returns the status (0 = no answer) and the body in out. */
static long req(const daemon_t *d, const char *method, const char *path, const char *token,
                const char *body, size_t len, cr_buf *out)
{
    ctlf_opts o = {.token = token, .ca_file = ca_file};
    return ctlf_req(d, method, path, body, len, &o, out);
}

/* Request with a string body; the answer parsed as JSON (NULL if not). */
static json_t *call(const daemon_t *d, const char *method, const char *path, const char *token,
                    const char *body, long *code)
{
    cr_buf b;
    cr_buf_init(&b);
    *code = req(d, method, path, token, body, body ? strlen(body) : 0, &b);
    json_t *v = b.len ? json_loads(cr_buf_str(&b), 0, NULL) : NULL;
    cr_buf_fini(&b);
    return v;
}

static void start(daemon_t *d, bool fresh, const char *extra)
{
    ctlf_start_ok(d, fresh ? "/tmp/corral-test-ctl-XXXXXX" : NULL, extra);
}

static void stop(daemon_t *d, int sig)
{
    if (d->pid > 0) {
        kill(d->pid, sig);
        int st = 0;
        pid_t w;
        while ((w = waitpid(d->pid, &st, 0)) < 0 && errno == EINTR) {
        }
        cr_test_track(d->dir, 0);
        if (sig == SIGTERM && (w != d->pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
            /* what the next reader of a failure needs: how it ended, and its log */
            fprintf(stderr, "controller %d: waitpid %d (%s), %s %d; the end of its log:\n",
                    (int)d->pid, (int)w, w < 0 ? strerror(errno) : "ok",
                    WIFSIGNALED(st) ? "signal" : "exit status",
                    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            char cmd[400];
            snprintf(cmd, sizeof cmd, "tail -n 20 '%s/controller.log' >&2", d->dir);
            if (system(cmd) != 0) {
                fprintf(stderr, "(no log)\n");
            }
        }
        if (sig == SIGTERM) {
            assert_int_equal(w, d->pid);
            assert_true(WIFEXITED(st));
            assert_int_equal(WEXITSTATUS(st), 0);
        }
        d->pid = 0;
    }
}

static void cleanup(daemon_t *d)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot remove %s\n", d->dir);
    }
    cr_test_untrack(d->dir);
}

static const char *str(json_t *v, const char *key)
{
    return ctlf_str(v, key);
}

static int64_t num(json_t *v, const char *key)
{
    return ctlf_num(v, key);
}

static char *mint(const daemon_t *d, const char *role, const char *tenant)
{
    char body[200];
    long code;
    json_t *v;
    if (strcmp(role, "user") == 0) { /* a user token needs an existing tenant */
        snprintf(body, sizeof body, "{\"role\":\"user\",\"tenant\":\"%s\"}", tenant);
        v = call(d, "POST", "/v1/tokens", d->admin, body, &code);
        assert_int_equal(code, 404);
        assert_string_equal(str(v, "field"), "tenant");
        json_decref(v);
        snprintf(body, sizeof body, "{\"name\":\"%s\"}", tenant);
        v = call(d, "POST", "/v1/tenants", d->admin, body, &code);
        assert_true(code == 201 || code == 409);
        json_decref(v);
    }
    snprintf(body, sizeof body, "{\"role\":\"%s\",\"tenant\":\"%s\",\"name\":\"t-%s\"}", role,
             tenant, tenant);
    v = call(d, "POST", "/v1/tokens", d->admin, body, &code);
    assert_int_equal(code, 201);
    char *t = strdup(str(v, "token"));
    json_decref(v);
    return t;
}

static int64_t submit(const daemon_t *d, const char *token, const char *body)
{
    return ctlf_submit_ok(d, token, body);
}

static int64_t count_jobs(const daemon_t *d)
{
    long code;
    json_t *v = call(d, "GET", "/v1/jobs?limit=1", d->admin, NULL, &code);
    assert_int_equal(code, 200);
    int64_t n = num(v, "total");
    json_decref(v);
    return n;
}

/* ------------------------------------------------------------------------ */

static void test_flags(void **state)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "%s controller --bogus >/dev/null 2>&1", bin());
    int st = system(cmd);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 2);
    snprintf(cmd, sizeof cmd, "%s controller --listen nope 2>&1 | grep -q -- --listen", bin());
    assert_int_equal(system(cmd), 0);
    char cfg[64]; /* this run's own: runs at the same time do not share it */
    snprintf(cfg, sizeof cfg, "/tmp/corral-bad-cfg-%d.json", (int)getpid());
    snprintf(cmd, sizeof cmd,
             "echo '{\"listen\": 5}' > %s; %s controller --config %s 2>&1 | grep -q \"field "
             "'listen'\"",
             cfg, bin(), cfg);
    int rc = system(cmd);
    unlink(cfg);
    assert_int_equal(rc, 0);
}

static void test_health_and_auth(void **state)
{
    daemon_t d;
    start(&d, true, NULL);
    long code;
    json_t *v = call(&d, "GET", "/v1/health", NULL, NULL, &code);
    assert_int_equal(code, 200);
    assert_true(json_is_true(json_object_get(v, "ok")));
    json_decref(v);
    v = call(&d, "GET", "/v1/version", NULL, NULL, &code);
    assert_int_equal(code, 200);
    json_decref(v);
    v = call(&d, "GET", "/v1/jobs", NULL, NULL, &code);
    assert_int_equal(code, 401);
    assert_string_equal(str(v, "error"), "CR_EAUTH");
    json_decref(v);
    v = call(&d, "GET", "/v1/jobs", "crl_forged", NULL, &code);
    assert_int_equal(code, 401);
    json_decref(v);
    v = call(&d, "POST", "/v1/jobs", NULL, "{\"command\":[\"true\"]}", &code);
    assert_int_equal(code, 401);
    json_decref(v);
    /* The admin token file is private. */
    char path[300];
    struct stat sb;
    snprintf(path, sizeof path, "%s/admin.token", d.dir);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    /* Failed authentications are counted. */
    cr_buf b;
    cr_buf_init(&b);
    assert_int_equal(req(&d, "GET", "/metrics", NULL, NULL, 0, &b), 200);
    assert_non_null(strstr(cr_buf_str(&b), "corral_auth_failures_total 3"));
    cr_buf_fini(&b);
    stop(&d, SIGTERM);
    cleanup(&d);
}

static void test_roundtrip(void **state)
{
    daemon_t d;
    start(&d, true, NULL);
    int64_t id = submit(&d, d.admin,
                        "{\"name\":\"train\",\"command\":[\"python\",\"train.py\"],\"gpus\":8,"
                        "\"gpu_type\":\"H100 SXM\",\"kind\":\"pretrain\",\"priority\":5,"
                        "\"env\":{\"A\":\"1\"},\"model\":{\"params\":7e9,\"method\":\"full\"}}");
    long code;
    char path[64];
    snprintf(path, sizeof path, "/v1/jobs/%lld", (long long)id);
    json_t *v = call(&d, "GET", path, d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_string_equal(str(v, "name"), "train");
    assert_string_equal(str(v, "state"), "pending");
    assert_int_equal(num(v, "gpus"), 8);
    /* names only by default (issue 24); the values on request */
    assert_null(json_object_get(v, "env"));
    assert_string_equal(json_string_value(json_array_get(json_object_get(v, "env_names"), 0)), "A");
    json_decref(v);
    snprintf(path, sizeof path, "/v1/jobs/%lld?env=1", (long long)id);
    v = call(&d, "GET", path, d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_string_equal(str(json_object_get(v, "env"), "A"), "1");
    json_t *ev = json_object_get(v, "events");
    assert_true(json_array_size(ev) >= 1);
    assert_string_equal(str(json_array_get(ev, 0), "what"), "submitted");
    json_decref(v);

    v = call(&d, "GET", "/v1/jobs?state=pending", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_int_equal(num(v, "count"), 1);
    json_decref(v);
    v = call(&d, "GET", "/v1/jobs?state=bogus", d.admin, NULL, &code);
    assert_int_equal(code, 400);
    json_decref(v);

    int64_t arr = submit(&d, d.admin, "{\"command\":[\"true\"],\"array\":5}");
    assert_int_equal(count_jobs(&d), 6);

    snprintf(path, sizeof path, "/v1/jobs/%lld/hold", (long long)arr);
    v = call(&d, "POST", path, d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_string_equal(str(v, "state"), "held");
    json_decref(v);
    snprintf(path, sizeof path, "/v1/jobs/%lld/release", (long long)arr);
    v = call(&d, "POST", path, d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_string_equal(str(v, "state"), "pending");
    json_decref(v);

    snprintf(path, sizeof path, "/v1/jobs/%lld/cancel", (long long)id);
    v = call(&d, "POST", path, d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_string_equal(str(v, "state"), "cancelled");
    json_decref(v);
    v = call(&d, "POST", path, d.admin, NULL, &code);
    assert_int_equal(code, 409);
    assert_string_equal(str(v, "error"), "CR_ECONFLICT");
    json_decref(v);
    v = call(&d, "GET", "/v1/jobs/99999", d.admin, NULL, &code);
    assert_int_equal(code, 404);
    json_decref(v);

    /* Restart: everything is still there, and the admin token still works. */
    stop(&d, SIGTERM);
    char before[128];
    snprintf(before, sizeof before, "%s", d.admin);
    start(&d, false, NULL);
    assert_string_equal(before, d.admin);
    assert_int_equal(count_jobs(&d), 6);
    snprintf(path, sizeof path, "/v1/jobs/%lld", (long long)id);
    v = call(&d, "GET", path, d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_string_equal(str(v, "state"), "cancelled");
    json_decref(v);
    int64_t next = submit(&d, d.admin, "{\"command\":[\"true\"]}");
    assert_true(next > arr + 4);
    stop(&d, SIGTERM);
    cleanup(&d);
}

static void test_auth_matrix(void **state)
{
    daemon_t d;
    start(&d, true, NULL);
    char *ua = mint(&d, "user", "alpha");
    char *ub = mint(&d, "user", "beta");
    int64_t id = submit(&d, ua, "{\"command\":[\"true\"]}");
    long code;
    char path[64], missing[64];
    snprintf(path, sizeof path, "/v1/jobs/%lld", (long long)id);
    json_t *v = call(&d, "GET", path, ua, NULL, &code);
    assert_int_equal(code, 200);
    assert_string_equal(str(v, "tenant"), "alpha");
    json_decref(v);

    /* Another tenant's job looks exactly like a missing one. */
    cr_buf other, none;
    cr_buf_init(&other);
    cr_buf_init(&none);
    assert_int_equal(req(&d, "GET", path, ub, NULL, 0, &other), 404);
    snprintf(missing, sizeof missing, "/v1/jobs/%lld", (long long)id + 1000);
    assert_int_equal(req(&d, "GET", missing, ub, NULL, 0, &none), 404);
    char expect[256];
    snprintf(expect, sizeof expect, "{\"error\":\"CR_ENOENT\",\"message\":\"job %lld not found\"}",
             (long long)id);
    assert_string_equal(cr_buf_str(&other), expect);
    snprintf(expect, sizeof expect, "{\"error\":\"CR_ENOENT\",\"message\":\"job %lld not found\"}",
             (long long)id + 1000);
    assert_string_equal(cr_buf_str(&none), expect);
    cr_buf_fini(&other);
    cr_buf_fini(&none);
    snprintf(path, sizeof path, "/v1/jobs/%lld/cancel", (long long)id);
    v = call(&d, "POST", path, ub, NULL, &code);
    assert_int_equal(code, 404);
    json_decref(v);
    v = call(&d, "GET", "/v1/jobs", ub, NULL, &code);
    assert_int_equal(code, 200);
    assert_int_equal(num(v, "count"), 0);
    json_decref(v);
    /* A user may not submit for another tenant, nor manage tokens or tenants. */
    v = call(&d, "POST", "/v1/jobs", ub, "{\"command\":[\"true\"],\"tenant\":\"alpha\"}", &code);
    assert_int_equal(code, 403);
    assert_string_equal(str(v, "field"), "tenant");
    json_decref(v);
    v = call(&d, "POST", "/v1/tokens", ua, "{\"role\":\"admin\"}", &code);
    assert_int_equal(code, 403);
    json_decref(v);
    v = call(&d, "GET", "/v1/tokens", ua, NULL, &code);
    assert_int_equal(code, 403);
    json_decref(v);
    v = call(&d, "POST", "/v1/tenants", ua, "{\"name\":\"x\"}", &code);
    assert_int_equal(code, 403);
    json_decref(v);
    v = call(&d, "GET", "/v1/tenants", ua, NULL, &code);
    assert_int_equal(code, 200);
    assert_int_equal(num(v, "count"), 1);
    json_decref(v);
    /* The join token may register a node and nothing else. */
    v = call(&d, "GET", "/v1/jobs", d.join, NULL, &code);
    assert_int_equal(code, 403);
    json_decref(v);
    v = call(&d, "POST", "/v1/agents/register", ua,
             "{\"node\":\"n1\",\"addr\":\"127.0.0.1\",\"gpus\":[]}", &code);
    assert_int_equal(code, 403);
    json_decref(v);
    /* Revoked tokens stop working. */
    v = call(&d, "GET", "/v1/tokens", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    int64_t tid = 0;
    for (size_t i = 0; i < json_array_size(json_object_get(v, "items")); i++) {
        json_t *t = json_array_get(json_object_get(v, "items"), i);
        assert_null(json_object_get(t, "hash"));
        if (strcmp(str(t, "tenant"), "beta") == 0) {
            tid = num(t, "id");
        }
    }
    json_decref(v);
    assert_true(tid > 0);
    snprintf(path, sizeof path, "/v1/tokens/%lld", (long long)tid);
    v = call(&d, "DELETE", path, d.admin, NULL, &code);
    assert_int_equal(code, 200);
    json_decref(v);
    v = call(&d, "GET", "/v1/jobs", ub, NULL, &code);
    assert_int_equal(code, 401);
    json_decref(v);
    free(ua);
    free(ub);
    stop(&d, SIGTERM);
    cleanup(&d);
}

static void test_bad_input_stores_nothing(void **state)
{
    daemon_t d;
    char cfg[128], extra[200];
    snprintf(cfg, sizeof cfg, "/tmp/corral-test-cfg-%d.json", (int)getpid());
    FILE *cf = fopen(cfg, "w");
    assert_non_null(cf);
    fputs("{\"agent_addr_link_local\": true}\n", cf); /* the nodes registered at the end */
    fclose(cf);
    snprintf(extra, sizeof extra, "--config %s", cfg);
    start(&d, true, extra);
    unlink(cfg);
    static const struct {
        const char *body;
        long code;
        const char *field;
    } cases[] = {
        {"{\"command\":[\"true\"", 400, NULL},
        {"[1,2]", 400, NULL},
        {"", 400, NULL},
        {"{\"command\":\"true\"}", 400, "command"},
        {"{\"command\":[\"true\"],\"gpus\":\"8\"}", 400, "gpus"},
        {"{\"command\":[\"true\"],\"gpus\":-1}", 400, "gpus"},
        {"{\"command\":[\"true\"],\"gpus\":2.5}", 400, "gpus"},
        {"{\"command\":[\"true\"],\"colour\":\"red\"}", 400, "colour"},
        {"{\"command\":[\"true\"],\"model\":{\"params\":1,\"size\":2}}", 400, "model.size"},
        {"{\"command\":[\"true\"],\"env\":{\"A\":1}}", 400, "env.A"},
        {"{\"command\":[1]}", 400, "command[0]"},
        {"{\"command\":[]}", 400, "command"},
        {"{\"command\":[\"true\"],\"kind\":\"party\"}", 400, "kind"},
        {"{\"command\":[\"true\"],\"gpus\":3,\"nodes\":2}", 400, "nodes"},
        {"{\"command\":[\"true\"],\"tenant\":\"nobody\"}", 400, "tenant"},
        {"{\"command\":[\"true\"],\"tenant\":\"no body\"}", 400, "tenant"},
        {"{\"command\":[\"true\"],\"workdir\":\"rel\"}", 400, "workdir"},
        {"{\"command\":[\"true\"],\"array\":0}", 400, "array"},
        {"{\"command\":[\"true\"],\"array\":10001}", 400, "array"},
        {"{\"command\":[\"true\"],\"max_retries\":101}", 400, "max_retries"},
        {"{\"command\":[\"true\"],\"model\":{\"method\":\"sgd\"}}", 400, "model.method"},
        {"{\"command\":[\"true\"],\"model\":{\"precision\":\"fp5\"}}", 400, "model.precision"},
        {"{\"command\":[\"true\"],\"kind\":\"pretrain\",\"model\":{\"precision\":\"fp4\"}}", 400,
         "model.precision"},
        {"{\"command\":[\"\"]}", 400, "command[0]"},
        {"{\"command\":[\"true\"],\"name\":\"a\",\"name\":\"b\"}", 400, NULL},
        {"{\"command\":[\"true\"],\"gpus\":null}", 400, "gpus"},
        {"{\"command\":[\"true\"],\"workdir\":\"/a/../b\"}", 400, "workdir"},
        {"{\"command\":[\"true\"],\"workdir\":\"/a/..\"}", 400, "workdir"},
        {"{\"command\":[\"true\"],\"image\":\"\"}", 400, "image"},
        {"{\"command\":[\"true\"],\"mig_profile\":\"9g.999gb\"}", 400, "mig_profile"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        long code;
        json_t *v = call(&d, "POST", "/v1/jobs", d.admin, cases[i].body, &code);
        if (code != cases[i].code) {
            fprintf(stderr, "case %zu: %s -> %ld\n", i, cases[i].body, code);
        }
        assert_int_equal(code, cases[i].code);
        assert_non_null(v);
        assert_true(strlen(str(v, "message")) > 0);
        if (cases[i].field) {
            assert_string_equal(str(v, "field"), cases[i].field);
            assert_non_null(strstr(str(v, "message"), cases[i].field));
        }
        json_decref(v);
    }
    /* Invalid UTF-8 (with the byte position) and a body over 1 MiB. */
    cr_buf b;
    cr_buf_init(&b);
    const char bad[] = "{\"command\":[\"\xc3\x28\"]}";
    assert_int_equal(req(&d, "POST", "/v1/jobs", d.admin, bad, sizeof bad - 1, &b), 400);
    assert_non_null(strstr(cr_buf_str(&b), "column"));
    cr_buf_reset(&b);
    size_t big = 2 * 1024 * 1024;
    char *huge = malloc(big);
    memset(huge, ' ', big);
    huge[0] = '{';
    huge[big - 1] = '}';
    assert_int_equal(req(&d, "POST", "/v1/jobs", d.admin, huge, big, &b), 413);
    free(huge);
    cr_buf_fini(&b);
    assert_int_equal(count_jobs(&d), 0);
    /* The unknown MIG profile's answer lists the valid ones; a known one
     * (and a "..." that is part of a name) is taken. */
    {
        long mc;
        json_t *mv = call(&d, "POST", "/v1/jobs", d.admin,
                          "{\"command\":[\"true\"],\"mig_profile\":\"9g.999gb\"}", &mc);
        assert_non_null(strstr(str(mv, "message"), "1g.10gb"));
        assert_non_null(strstr(str(mv, "message"), "1g.6gb"));
        json_decref(mv);
        mv = call(&d, "POST", "/v1/jobs", d.admin,
                  "{\"command\":[\"true\"],\"gpu_type\":\"A30\",\"mig_profile\":\"1g.6gb\","
                  "\"workdir\":\"/a/..b/c\"}",
                  &mc);
        assert_int_equal(mc, 201);
        json_decref(mv);
    }
    /* Tenants and tokens validate too. */
    long code;
    json_t *v = call(&d, "POST", "/v1/tenants", d.admin,
                     "{\"name\":\"ml\",\"quotas\":{\"H100 SXM\":-1}}", &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "field"), "quotas.H100 SXM");
    json_decref(v);
    v = call(&d, "POST", "/v1/tenants", d.admin, "{\"name\":\"no/body\"}", &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "message"), "field 'name': use letters, digits, '-', '_' or '.'");
    json_decref(v);
    v = call(&d, "POST", "/v1/tokens", d.admin, "{\"role\":\"root\"}", &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "field"), "role");
    json_decref(v);
    v = call(&d, "GET", "/v1/tenants", d.admin, NULL, &code);
    assert_int_equal(num(v, "count"), 1); /* only "default" */
    json_decref(v);
    /* A bootstrap token's node with a '/': refused, naming the field and
     * the rule (the check read the parsed body after freeing it: an ASan
     * abort when a name was given too). */
    static const char *const boot_bad[] = {"{\"node\":\"a/b\",\"name\":\"gpu-rack-1\"}",
                                           "{\"node\":\"a/b\"}"};
    for (size_t i = 0; i < 2; i++) {
        v = call(&d, "POST", "/v1/bootstrap-tokens", d.admin, boot_bad[i], &code);
        assert_int_equal(code, 400);
        assert_string_equal(str(v, "field"), "node");
        assert_string_equal(str(v, "message"), "field 'node': '/' is not allowed");
        json_decref(v);
    }
    v = call(&d, "GET", "/v1/bootstrap-tokens", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_int_equal(num(v, "count"), 0);
    json_decref(v);
    /* Good agent addresses (a name, IPv6, and link-local where the config
     * allows it: test_agent_protocol has the refusals). */
    static const char *const good_addr[] = {"gpu-7.rack_a.example", "fd00::2", "10.0.0.2",
                                            "169.254.10.1", "fe80::1"};
    for (size_t i = 0; i < sizeof good_addr / sizeof good_addr[0]; i++) {
        char rb[256];
        snprintf(rb, sizeof rb, "{\"node\":\"ok%zu\",\"addr\":\"%s\",\"port\":8621,\"gpus\":[]}", i,
                 good_addr[i]);
        v = call(&d, "POST", "/v1/agents/register", d.join, rb, &code);
        if (code != 200) {
            fprintf(stderr, "addr '%s' -> %ld\n", good_addr[i], code);
        }
        assert_int_equal(code, 200);
        json_decref(v);
    }
    stop(&d, SIGTERM);
    cleanup(&d);
}

static json_t *job(const daemon_t *d, int64_t id)
{
    return ctlf_job_ok(d, id);
}

/* Poll until job id is in state (deadline 20 s). */
static void wait_state(const daemon_t *d, int64_t id, const char *state)
{
    int64_t deadline = cr_mono_ns() + 20 * CR_NS_PER_SEC;
    for (;;) {
        json_t *v = job(d, id);
        bool ok = strcmp(str(v, "state"), state) == 0;
        if (!ok && cr_mono_ns() > deadline) {
            fprintf(stderr, "job %lld: state %s (%s), wanted %s\n", (long long)id, str(v, "state"),
                    str(v, "reason"), state);
        }
        json_decref(v);
        if (ok) {
            return;
        }
        assert_true(cr_mono_ns() < deadline);
        poll_sleep();
    }
}

static const char *const reg_body =
    "{\"node\":\"%s\",\"addr\":\"127.0.0.1\",\"port\":1,\"rack\":\"r1\",\"cpus\":8,"
    "\"gpus\":[{\"index\":0,\"uuid\":\"GPU-%s-0\",\"model\":\"A100 "
    "SXM\",\"mem_bytes\":85899345920},"
    "{\"index\":1,\"uuid\":\"GPU-%s-1\",\"model\":\"A100 SXM\",\"mem_bytes\":85899345920}]}";

/* Register (or re-register) a node with tok: a bootstrap token for a new
 * node, the node's own token for one that comes back. */
static char *register_node_with(const daemon_t *d, const char *name, const char *tok)
{
    char body[1024];
    snprintf(body, sizeof body, reg_body, name, name, name);
    long code;
    json_t *v = call(d, "POST", "/v1/agents/register", tok, body, &code);
    assert_int_equal(code, 200);
    char *t = strdup(str(v, "node_token"));
    json_decref(v);
    return t;
}

static char *register_node(const daemon_t *d, const char *name)
{
    return register_node_with(d, name, d->join);
}

static void test_agent_protocol(void **state)
{
    daemon_t d;
    char cfg[128], extra[200];
    snprintf(cfg, sizeof cfg, "/tmp/corral-test-cfg-%d.json", (int)getpid());
    FILE *cf = fopen(cfg, "w");
    assert_non_null(cf);
    fputs("{\"prices\": {\"A100 SXM\": 2.0}, \"heartbeat_s\": 1, \"lost_after_s\": 2,\n"
          " \"grace_s\": 1}\n",
          cf);
    fclose(cf);
    snprintf(extra, sizeof extra, "--config %s", cfg);
    start(&d, true, extra);
    unlink(cfg);
    char *t1 = register_node(&d, "n1");
    long code;
    /* A bad inventory is refused with its field. */
    json_t *v = call(&d, "POST", "/v1/agents/register", d.join,
                     "{\"node\":\"n9\",\"addr\":\"x\",\"gpus\":[{\"index\":0}]}", &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "field"), "gpus[0].model");
    json_decref(v);
    v = call(&d, "POST", "/v1/agents/register", d.join,
             "{\"node\":\"n 9\",\"addr\":\"x\",\"gpus\":[]}", &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "message"), "field 'node': use letters, digits, '-', '_' or '.'");
    json_decref(v);
    /* Each GPU once: by index and by UUID. */
    v = call(&d, "POST", "/v1/agents/register", d.join,
             "{\"node\":\"n9\",\"addr\":\"x\",\"gpus\":[{\"index\":0,\"model\":\"L4\"},"
             "{\"index\":0,\"model\":\"L4\"}]}",
             &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "field"), "gpus[1].index");
    assert_non_null(strstr(str(v, "message"), "duplicate"));
    json_decref(v);
    v = call(&d, "POST", "/v1/agents/register", d.join,
             "{\"node\":\"n9\",\"addr\":\"x\",\"gpus\":[{\"index\":0,\"uuid\":\"GPU-a\","
             "\"model\":\"L4\"},{\"index\":1,\"uuid\":\"GPU-a\",\"model\":\"L4\"}]}",
             &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "field"), "gpus[1].uuid");
    json_decref(v);
    /* The address is one host, not a link-local one (instance metadata). */
    static const char *const bad_addr[] = {
        "evil host", "169.254.169.254", "169.254.169.254:80", "10.0.0.2:80",
        "",          "fe80::1",         "::ffff:169.254.1.1", "a\\tb",
        "-x",        "1.2.3",           "http://10.0.0.2",    "a..b"};
    for (size_t i = 0; i < sizeof bad_addr / sizeof bad_addr[0]; i++) {
        char rb[256];
        snprintf(rb, sizeof rb, "{\"node\":\"n9\",\"addr\":\"%s\",\"port\":80,\"gpus\":[]}",
                 bad_addr[i]);
        v = call(&d, "POST", "/v1/agents/register", d.join, rb, &code);
        if (code != 400) {
            fprintf(stderr, "addr '%s' -> %ld\n", bad_addr[i], code);
        }
        assert_int_equal(code, 400);
        assert_string_equal(str(v, "field"), "addr");
        json_decref(v);
    }
    v = call(&d, "POST", "/v1/agents/register", d.join,
             "{\"node\":\"n9\",\"addr\":\"169.254.169.254\",\"port\":80,\"gpus\":[]}", &code);
    assert_non_null(strstr(str(v, "message"), "link-local"));
    assert_non_null(strstr(str(v, "message"), "agent_addr_link_local"));
    json_decref(v);
    v = call(&d, "GET", "/v1/nodes/n9", d.admin, NULL, &code);
    assert_int_equal(code, 404);
    json_decref(v);
    /* The node token works for its node only. */
    v = call(&d, "GET", "/v1/agents/n2/desired", t1, NULL, &code);
    assert_int_equal(code, 403);
    json_decref(v);
    v = call(&d, "GET", "/v1/agents/n1/desired", t1, NULL, &code);
    assert_int_equal(code, 200);
    int64_t version = num(v, "version");
    json_decref(v);
    /* A long-poll at the current version answers after its wait. */
    char path[128];
    snprintf(path, sizeof path, "/v1/agents/n1/desired?version=%lld&wait=1", (long long)version);
    v = call(&d, "GET", path, t1, NULL, &code);
    assert_int_equal(code, 200);
    assert_int_equal(num(v, "version"), version);
    json_decref(v);

    int64_t id =
        submit(&d, d.admin, "{\"command\":[\"sleep\",\"1\"],\"gpus\":2,\"max_retries\":1}");
    /* The long-poll wakes with the job. */
    json_t *entry = NULL;
    int64_t deadline = cr_mono_ns() + 20 * CR_NS_PER_SEC;
    while (!entry && cr_mono_ns() < deadline) {
        snprintf(path, sizeof path, "/v1/agents/n1/desired?version=%lld&wait=5",
                 (long long)version);
        v = call(&d, "GET", path, t1, NULL, &code);
        assert_int_equal(code, 200);
        version = num(v, "version");
        if (json_array_size(json_object_get(v, "jobs")) > 0) {
            entry = json_incref(json_array_get(json_object_get(v, "jobs"), 0));
        }
        json_decref(v);
    }
    assert_non_null(entry);
    assert_int_equal(num(entry, "job"), id);
    assert_string_equal(str(entry, "action"), "run");
    assert_int_equal(num(entry, "run"), 1);
    assert_int_equal(json_array_size(json_object_get(entry, "gpu_uuids")), 2);
    /* A batch job runs one task per node (docs/cli.md, "Tasks"); its
     * rendezvous port is the one rank 0's agent reserves (0 until then). */
    json_t *gg = json_object_get(entry, "gang");
    assert_int_equal(num(gg, "world_size"), 1);
    assert_int_equal(num(gg, "tasks_per_node"), 1);
    assert_int_equal(num(gg, "gpus_per_node"), 2);
    assert_int_equal(num(gg, "master_port"), 0);
    assert_string_equal(str(entry, "nodelist"), "n1");
    json_decref(entry);
    wait_state(&d, id, "running");

    /* The node goes silent: lost (out of placement) after lost_after_s,
     * but its job is requeued only once the node lease has stopped it
     * there (lost_after_s + grace_s + CTL_LEASE_MARGIN_S = 8 s after the
     * node was last heard): it is still running when the node is lost. */
    deadline = cr_mono_ns() + 20 * CR_NS_PER_SEC;
    for (;;) {
        v = call(&d, "GET", "/v1/nodes/n1", d.admin, NULL, &code);
        bool lost = strcmp(str(v, "state"), "lost") == 0;
        json_decref(v);
        if (lost) {
            break;
        }
        assert_true(cr_mono_ns() < deadline);
        poll_sleep();
    }
    v = job(&d, id);
    assert_string_equal(str(v, "state"), "running");
    json_decref(v);
    /* Then it is requeued; a node loss is not the job's failure, so it
     * uses no retry. */
    deadline = cr_mono_ns() + 30 * CR_NS_PER_SEC;
    for (;;) {
        v = job(&d, id);
        bool requeued = strcmp(str(v, "state"), "pending") == 0;
        if (requeued) {
            assert_int_equal(num(v, "retries"), 0);
        }
        json_decref(v);
        if (requeued) {
            break;
        }
        assert_true(cr_mono_ns() < deadline);
        poll_sleep();
    }
    v = call(&d, "GET", "/v1/nodes/n1", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_string_equal(str(v, "state"), "lost");
    json_decref(v);

    /* It comes back and reports the exit of the rerun: completed. */
    char *t1b = register_node_with(&d, "n1", t1);
    wait_state(&d, id, "running");
    char body[256];
    /* A late exit of the first run (before the node was lost) is not this run's. */
    snprintf(body, sizeof body,
             "{\"jobs\":[{\"job\":%lld,\"state\":\"exited\",\"exit_code\":1,\"run\":1}]}",
             (long long)id);
    v = call(&d, "POST", "/v1/agents/n1/status", t1b, body, &code);
    assert_int_equal(code, 200);
    json_decref(v);
    v = job(&d, id);
    assert_string_equal(str(v, "state"), "running");
    assert_int_equal(num(v, "runs"), 2);
    json_decref(v);
    snprintf(body, sizeof body,
             "{\"gpus\":[{\"index\":0,\"health\":\"ok\",\"power_mw\":250000},{\"index\":1,"
             "\"power_mw\":250000}],\"jobs\":[{\"job\":%lld,\"state\":\"exited\","
             "\"exit_code\":0}]}",
             (long long)id);
    v = call(&d, "POST", "/v1/agents/n1/status", t1b, body, &code);
    assert_int_equal(code, 200);
    json_decref(v);
    wait_state(&d, id, "completed");
    /* The old node token was replaced at re-registration. */
    v = call(&d, "POST", "/v1/agents/n1/status", t1, "{}", &code);
    assert_int_equal(code, 401);
    json_decref(v);
    v = call(&d, "GET", "/v1/usage?by=tenant,gpu_type", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    json_t *row = json_array_get(json_object_get(v, "items"), 0);
    assert_non_null(row);
    assert_string_equal(str(row, "gpu_type"), "A100 SXM");
    assert_true(json_number_value(json_object_get(row, "gpu_hours")) > 0);
    assert_true(json_number_value(json_object_get(row, "cost")) > 0);
    assert_true(json_number_value(json_object_get(row, "energy_kwh")) >= 0);
    json_decref(v);
    /* Drain: admin only. */
    v = call(&d, "POST", "/v1/nodes/n1/drain", d.admin, "{\"reason\":\"maintenance\"}", &code);
    assert_int_equal(code, 200);
    assert_string_equal(str(v, "state"), "drained");
    json_decref(v);
    free(t1);
    free(t1b);
    stop(&d, SIGTERM);
    cleanup(&d);
}

static int64_t endpoints_count(const daemon_t *d, int64_t *version, int want)
{
    int64_t deadline = cr_mono_ns() + 20 * CR_NS_PER_SEC;
    int64_t n = -1;
    while (cr_mono_ns() < deadline) {
        char path[128];
        long code;
        snprintf(path, sizeof path, "/v1/services/chat/endpoints?version=%lld&wait=2",
                 (long long)*version);
        json_t *v = call(d, "GET", path, d->admin, NULL, &code);
        assert_int_equal(code, 200);
        *version = num(v, "version");
        n = (int64_t)json_array_size(json_object_get(v, "endpoints"));
        json_decref(v);
        if (n == want) {
            break;
        }
    }
    return n;
}

static void wait_replicas_running(const daemon_t *d, size_t want)
{
    int64_t deadline = cr_mono_ns() + 20 * CR_NS_PER_SEC;
    for (;;) {
        long code;
        json_t *v = call(d, "GET", "/v1/services/chat", d->admin, NULL, &code), *r;
        size_t i, running = 0;
        json_array_foreach(json_object_get(v, "replicas"), i, r)
        {
            running += strcmp(str(r, "state"), "running") == 0;
        }
        json_decref(v);
        if (running >= want) {
            return;
        }
        assert_true(cr_mono_ns() < deadline);
        poll_sleep();
    }
}

/* As the agent does: run what the desired state lists, giving each replica
 * that asks for a port one (here 40000 + job) and reporting it. */
static void report_ports(daemon_t *d, const char *nt)
{
    long code;
    json_t *v = call(d, "GET", "/v1/agents/n1/desired", nt, NULL, &code);
    assert_int_equal(code, 200);
    json_t *jobs = json_array(), *e;
    size_t i;
    json_array_foreach(json_object_get(v, "jobs"), i, e)
    {
        assert_true(json_is_true(json_object_get(e, "assign_port")));
        json_array_append_new(jobs, json_pack("{s:I,s:s,s:I,s:I}", "job", num(e, "job"), "state",
                                              "running", "run", num(e, "run"), "port",
                                              40000 + num(e, "job")));
    }
    json_decref(v);
    json_t *body = json_pack("{s:o}", "jobs", jobs);
    char *text = json_dumps(body, JSON_COMPACT);
    v = call(d, "POST", "/v1/agents/n1/status", nt, text, &code);
    assert_int_equal(code, 200);
    json_decref(v);
    free(text);
    json_decref(body);
}

/* A job's env and secrets cannot set what the node sets (cr_envname.h):
 * refused at submit naming the field; the job's own LD_PRELOAD passes. */
static void test_env_reserved(void **state)
{
    daemon_t d;
    start(&d, true, NULL);
    static const char *const bad[][2] = {
        {"env", "CUDA_VISIBLE_DEVICES"}, {"env", "NVIDIA_VISIBLE_DEVICES"},
        {"env", "CORRAL_JOB_ID"},        {"env", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"},
        {"env", "MASTER_ADDR"},          {"secrets", "NVIDIA_VISIBLE_DEVICES"},
        {"secrets", "CORRAL_TOKEN"},     {"secrets", "CUDA_VISIBLE_DEVICES"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[256], field[128];
        long code;
        snprintf(body, sizeof body, "{\"command\":[\"true\"],\"%s\":{\"%s\":\"all\"}}", bad[i][0],
                 bad[i][1]);
        json_t *v = call(&d, "POST", "/v1/jobs", d.admin, body, &code);
        if (code != 400) {
            fail_msg("%s: %ld", body, code);
        }
        snprintf(field, sizeof field, "%s.%s", bad[i][0], bad[i][1]);
        assert_string_equal(str(v, "field"), field);
        assert_non_null(strstr(str(v, "message"), "set by the node"));
        json_decref(v);
    }
    submit(&d, d.admin,
           "{\"command\":[\"true\"],\"env\":{\"LD_PRELOAD\":\"/w/l.so\",\"LD_LIBRARY_PATH\":\"/w\","
           "\"CUDA_HOME\":\"/usr/local/cuda\"}}");
    stop(&d, SIGTERM);
    cleanup(&d);
}

static void test_services(void **state)
{
    daemon_t d;
    start(&d, true, NULL);
    char *nt = register_node(&d, "n1");
    long code;
    json_t *v = call(&d, "POST", "/v1/services", d.admin,
                     "{\"name\":\"chat\",\"command\":[\"srv\"],\"gpus\":1,\"min_replicas\":1,"
                     "\"max_replicas\":2,\"ready_path\":\"/health\"}",
                     &code);
    assert_int_equal(code, 201);
    assert_int_equal(num(v, "desired_replicas"), 1);
    json_decref(v);
    v = call(&d, "POST", "/v1/services", d.admin,
             "{\"name\":\"bad\",\"command\":[\"srv\"],\"min_replicas\":3,\"max_replicas\":2}",
             &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "field"), "max_replicas");
    json_decref(v);
    v = call(&d, "POST", "/v1/services", d.admin, "{\"name\":\"a/b\",\"command\":[\"srv\"]}",
             &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "message"), "field 'name': use letters, digits, '-', '_' or '.'");
    json_decref(v);
    static const char *const bad_paths[] = {"/a\\r\\nX-Evil: 1", "/a b", "/a\\u0001", "/a\\n",
                                            "health"};
    for (size_t i = 0; i < sizeof bad_paths / sizeof *bad_paths; i++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"name\":\"bad\",\"command\":[\"srv\"],\"ready_path\":\"%s\"}", bad_paths[i]);
        v = call(&d, "POST", "/v1/services", d.admin, body, &code);
        if (code != 400) {
            fail_msg("ready_path '%s': %ld", bad_paths[i], code);
        }
        assert_string_equal(str(v, "field"), "ready_path");
        json_decref(v);
    }
    int64_t version = -1;
    /* Running, but no endpoint until the agent reports the port it gave. */
    wait_replicas_running(&d, 1);
    assert_int_equal(endpoints_count(&d, &version, 0), 0);
    report_ports(&d, nt);
    assert_int_equal(endpoints_count(&d, &version, 1), 1);
    v = call(&d, "GET", "/v1/services/chat/endpoints", d.admin, NULL, &code);
    int64_t job1 = num(json_array_get(json_object_get(v, "endpoints"), 0), "job");
    assert_int_equal(num(json_array_get(json_object_get(v, "endpoints"), 0), "port"), 40000 + job1);
    json_decref(v);
    v = call(&d, "POST", "/v1/services/chat/scale", d.admin, "{\"replicas\":2}", &code);
    assert_int_equal(code, 200);
    json_decref(v);
    wait_replicas_running(&d, 2);
    report_ports(&d, nt);
    assert_int_equal(endpoints_count(&d, &version, 2), 2);
    /* The agent runs each replica with its PORT. */
    v = call(&d, "GET", "/v1/agents/n1/desired", nt, NULL, &code);
    json_t *jobs = json_object_get(v, "jobs");
    assert_int_equal(json_array_size(jobs), 2);
    assert_non_null(json_object_get(json_object_get(json_array_get(jobs, 0), "env"), "PORT"));
    assert_string_equal(str(json_object_get(json_array_get(jobs, 0), "env"), "CORRAL_SERVICE"),
                        "chat");
    json_decref(v);
    /* a service's env cannot set what the node sets either */
    v = call(&d, "POST", "/v1/services", d.admin,
             "{\"name\":\"spoof\",\"command\":[\"srv\"],\"env\":{\"CORRAL_SERVICE\":\"chat\"}}",
             &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "field"), "env.CORRAL_SERVICE");
    json_decref(v);
    v = call(&d, "POST", "/v1/services/chat/scale", d.admin, "{\"replicas\":9}", &code);
    assert_int_equal(code, 400);
    json_decref(v);
    v = call(&d, "POST", "/v1/services/chat/metrics", d.admin,
             "{\"in_flight\":3,\"rps\":12.5,\"p95_ms\":80}", &code);
    assert_int_equal(code, 200);
    json_decref(v);
    /* Scale down: the replica leaves the endpoints before it is stopped. */
    v = call(&d, "POST", "/v1/services/chat/scale", d.admin, "{\"replicas\":1}", &code);
    assert_int_equal(code, 200);
    json_decref(v);
    assert_int_equal(endpoints_count(&d, &version, 1), 1);
    /* Another tenant does not see it. */
    char *ub = mint(&d, "user", "beta");
    v = call(&d, "GET", "/v1/services/chat", ub, NULL, &code);
    assert_int_equal(code, 404);
    json_decref(v);
    /* Names are per tenant: beta may have its own "chat" (it got 409
     * naming the other tenant's before), not twice; it sees only its own. */
    static const char *const beta_chat =
        "{\"name\":\"chat\",\"command\":[\"srv\"],\"min_replicas\":0,\"max_replicas\":1}";
    v = call(&d, "POST", "/v1/services", ub, beta_chat, &code);
    assert_int_equal(code, 201);
    assert_string_equal(str(v, "tenant"), "beta");
    json_decref(v);
    v = call(&d, "POST", "/v1/services", ub, beta_chat, &code);
    assert_int_equal(code, 409);
    json_decref(v);
    v = call(&d, "GET", "/v1/services/chat", ub, NULL, &code);
    assert_int_equal(code, 200);
    assert_string_equal(str(v, "tenant"), "beta");
    assert_string_equal(str(v, "ref"), "chat");
    json_decref(v);
    v = call(&d, "GET", "/v1/services/chat@default", ub, NULL, &code);
    assert_int_equal(code, 404);
    json_decref(v);
    /* An admin's plain name is the oldest (routes that existed stay); the
     * other is chat@beta, as the list's "ref" says. */
    for (int round = 0; round < 2; round++) {
        v = call(&d, "GET", "/v1/services/chat", d.admin, NULL, &code);
        assert_int_equal(code, 200);
        assert_string_equal(str(v, "tenant"), "default");
        json_decref(v);
        v = call(&d, "GET", "/v1/services/chat@beta", d.admin, NULL, &code);
        assert_int_equal(code, 200);
        assert_string_equal(str(v, "tenant"), "beta");
        assert_string_equal(str(v, "ref"), "chat@beta");
        json_decref(v);
        v = call(&d, "GET", "/v1/services", d.admin, NULL, &code);
        assert_int_equal(num(v, "count"), 2);
        json_t *items = json_object_get(v, "items");
        for (size_t i = 0; i < 2; i++) {
            json_t *it = json_array_get(items, i);
            assert_string_equal(str(it, "ref"),
                                strcmp(str(it, "tenant"), "beta") == 0 ? "chat@beta" : "chat");
        }
        json_decref(v);
        if (round == 0) { /* both rows survive a restart */
            stop(&d, SIGTERM);
            start(&d, false, NULL);
        }
    }
    v = call(&d, "DELETE", "/v1/services/chat@beta", ub, NULL, &code);
    assert_int_equal(code, 200);
    json_decref(v);
    v = call(&d, "DELETE", "/v1/services/chat", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    json_decref(v);
    v = call(&d, "GET", "/v1/services/chat/endpoints", d.admin, NULL, &code);
    assert_int_equal(code, 404);
    json_decref(v);
    free(ub);
    free(nt);
    stop(&d, SIGTERM);
    cleanup(&d);
}

static void test_tls(void **state)
{
    if (system("command -v openssl >/dev/null 2>&1") != 0) {
        fprintf(stderr, "openssl not installed: TLS test skipped\n");
        skip();
    }
    char dir[] = "/tmp/corral-test-tls-XXXXXX";
    assert_non_null(mkdtemp(dir));
    cr_test_track(dir, 0);
    char cmd[1200], extra[700];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey rsa:2048 -nodes -keyout %s/k.pem -out %s/c.pem -days 1 "
             "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
             dir, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(extra, sizeof extra, "--tls-cert %s/c.pem --tls-key %s/k.pem", dir, dir);
    snprintf(ca_file, sizeof ca_file, "%s/c.pem", dir);
    daemon_t d;
    start(&d, true, extra);
    assert_int_equal(strncmp(d.url, "https://", 8), 0);
    long code;
    json_t *v = call(&d, "GET", "/v1/whoami", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_string_equal(str(v, "role"), "admin");
    json_decref(v);
    stop(&d, SIGTERM);
    cleanup(&d);
    ca_file[0] = '\0';
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    cr_test_untrack(dir);
}

/* This node's desired action for a job ("" when not listed). */
static void desired_action(const daemon_t *d, const char *node, const char *tok, int64_t id,
                           char *out, size_t cap)
{
    char path[128];
    long code;
    snprintf(path, sizeof path, "/v1/agents/%s/desired", node);
    json_t *v = call(d, "GET", path, tok, NULL, &code);
    assert_int_equal(code, 200);
    out[0] = '\0';
    json_t *jobs = json_object_get(v, "jobs");
    for (size_t i = 0; i < json_array_size(jobs); i++) {
        json_t *e = json_array_get(jobs, i);
        if (num(e, "job") == id) {
            snprintf(out, cap, "%s", str(e, "action"));
        }
    }
    json_decref(v);
}

static void post_exit(const daemon_t *d, const char *node, const char *tok, int64_t id, int code)
{
    char path[128], body[200];
    long hc;
    snprintf(path, sizeof path, "/v1/agents/%s/status", node);
    snprintf(body, sizeof body, "{\"jobs\":[{\"job\":%lld,\"state\":\"exited\",\"exit_code\":%d}]}",
             (long long)id, code);
    json_t *v = call(d, "POST", path, tok, body, &hc);
    assert_int_equal(hc, 200);
    json_decref(v);
}

/* A gang job (two nodes) completes when both ranks exited 0; the first
 * rank that fails ends the run (then retries apply). */
static void test_gang_exits(void **state)
{
    daemon_t d;
    start(&d, true, NULL);
    char *t1 = register_node(&d, "n1");
    char *t2 = register_node(&d, "n2");
    int64_t id = submit(&d, d.admin, "{\"command\":[\"train\"],\"gpus\":4,\"nodes\":2}");
    wait_state(&d, id, "running");
    char act[16];
    desired_action(&d, "n1", t1, id, act, sizeof act);
    assert_string_equal(act, "run");
    desired_action(&d, "n2", t2, id, act, sizeof act);
    assert_string_equal(act, "run");
    /* rank 0 done: the job runs on; n1 is told not to start it again */
    post_exit(&d, "n1", t1, id, 0);
    json_t *v = job(&d, id);
    assert_string_equal(str(v, "state"), "running");
    json_decref(v);
    desired_action(&d, "n1", t1, id, act, sizeof act);
    assert_string_equal(act, "stop");
    desired_action(&d, "n2", t2, id, act, sizeof act);
    assert_string_equal(act, "run");
    post_exit(&d, "n1", t1, id, 0); /* reported again: still waits for n2 */
    v = job(&d, id);
    assert_string_equal(str(v, "state"), "running");
    json_decref(v);
    post_exit(&d, "n2", t2, id, 0);
    wait_state(&d, id, "completed");

    /* A rank failing ends the run at once: retried, then failed. */
    id = submit(&d, d.admin, "{\"command\":[\"train\"],\"gpus\":4,\"nodes\":2,\"max_retries\":1}");
    wait_state(&d, id, "running");
    post_exit(&d, "n2", t2, id, 0);
    post_exit(&d, "n1", t1, id, 1);
    v = job(&d, id);
    assert_int_equal(num(v, "retries"), 1);
    json_decref(v);
    int64_t deadline = cr_mono_ns() + 20 * CR_NS_PER_SEC;
    for (;;) {
        v = job(&d, id);
        bool rerun = num(v, "runs") == 2 && strcmp(str(v, "state"), "running") == 0;
        json_decref(v);
        if (rerun) {
            break;
        }
        assert_true(cr_mono_ns() < deadline);
        poll_sleep();
    }
    /* the rerun starts afresh: n2's earlier exit does not count */
    desired_action(&d, "n2", t2, id, act, sizeof act);
    assert_string_equal(act, "run");
    post_exit(&d, "n1", t1, id, 0);
    v = job(&d, id);
    assert_string_equal(str(v, "state"), "running");
    json_decref(v);
    post_exit(&d, "n2", t2, id, 7);
    wait_state(&d, id, "failed");
    v = job(&d, id);
    assert_non_null(strstr(str(v, "reason"), "code 7 on node n2"));
    json_decref(v);
    free(t1);
    free(t2);
    stop(&d, SIGTERM);
    cleanup(&d);
}

/* A GPU reported unhealthy leaves the pool with its reason, its job is
 * requeued; reported healthy again, it comes back and the job runs. */
static void test_gpu_health(void **state)
{
    daemon_t d;
    start(&d, true, NULL);
    char *nt = register_node(&d, "n1");
    int64_t id = submit(&d, d.admin, "{\"command\":[\"sleep\",\"60\"],\"gpus\":2}");
    wait_state(&d, id, "running");
    long code;
    json_t *v = call(&d, "POST", "/v1/agents/n1/status", nt,
                     "{\"gpus\":[{\"index\":0,\"health\":\"xid\",\"reason\":\"XID 79\"},"
                     "{\"index\":1,\"health\":\"ok\"}]}",
                     &code);
    assert_int_equal(code, 200);
    json_decref(v);
    wait_state(&d, id, "pending");
    v = call(&d, "GET", "/v1/nodes/n1", d.admin, NULL, &code);
    json_t *g0 = json_array_get(json_object_get(v, "gpus"), 0);
    assert_string_equal(str(g0, "health"), "xid");
    assert_string_equal(str(g0, "reason"), "XID 79");
    json_decref(v);
    v = job(&d, id);
    assert_int_equal(num(v, "retries"), 0); /* not the job's fault */
    json_decref(v);
    v = call(&d, "POST", "/v1/agents/n1/status", nt,
             "{\"gpus\":[{\"index\":0,\"health\":\"ok\"},{\"index\":1,\"health\":\"ok\"}]}", &code);
    assert_int_equal(code, 200);
    json_decref(v);
    wait_state(&d, id, "running");
    free(nt);
    stop(&d, SIGTERM);
    cleanup(&d);
}

/* A stand-in agent that serves a job's log, checking the controller's token. */
typedef struct fake_agent {
    char secret[128]; /* the agent secret the controller issued at registration */
    char seen_path[256];
} fake_agent;

static void fake_agent_handler(void *ctx, cr_http_req *req)
{
    fake_agent *a = ctx;
    const char *auth = cr_http_header(req, "Authorization");
    char want[200];
    snprintf(want, sizeof want, "Bearer %s", a->secret);
    if (!auth || strcmp(auth, want) != 0) {
        cr_http_respond(req, 401, "text/plain", cr_strdup("no"), 2);
        return;
    }
    const char *stream = cr_http_query(req, "stream");
    const char *offset = cr_http_query(req, "offset");
    snprintf(a->seen_path, sizeof a->seen_path, "%s %s %s", cr_http_path(req),
             stream ? stream : "-", offset ? offset : "-");
    cr_http_respond(req, 200, "application/octet-stream", cr_strdup("hello log\n"), 10);
}

static void test_logs_proxy(void **state)
{
    daemon_t d;
    start(&d, true, NULL);
    fake_agent fa;
    memset(&fa, 0, sizeof fa);
    cr_http_config hc = {.port = 0, .handler = fake_agent_handler, .ctx = &fa};
    cr_http_server *srv = NULL;
    assert_int_equal(cr_http_server_new(&hc, &srv), 0);
    char body[1024];
    snprintf(body, sizeof body,
             "{\"node\":\"n1\",\"addr\":\"127.0.0.1\",\"port\":%u,\"gpus\":[{\"index\":0,"
             "\"model\":\"L4\"}]}",
             (unsigned)cr_http_server_port(srv));
    long code;
    json_t *v = call(&d, "POST", "/v1/agents/register", d.join, body, &code);
    assert_int_equal(code, 200);
    /* The controller calls the agent with a secret of that node's own,
     * never the join token. */
    snprintf(fa.secret, sizeof fa.secret, "%s", str(v, "agent_secret"));
    assert_true(strncmp(fa.secret, "crl_", 4) == 0);
    assert_string_not_equal(fa.secret, d.join);
    json_decref(v);
    int64_t id = submit(&d, d.admin, "{\"command\":[\"echo\",\"hello\"]}");
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%lld/logs", (long long)id);
    v = call(&d, "GET", path, d.admin, NULL, &code);
    if (code == 409) { /* not started yet: wait for it */
        json_decref(v);
        v = NULL;
        wait_state(&d, id, "running");
    } else {
        json_decref(v);
    }
    snprintf(path, sizeof path, "/v1/jobs/%lld/logs?stream=stderr&offset=3", (long long)id);
    cr_buf b;
    cr_buf_init(&b);
    assert_int_equal(req(&d, "GET", path, d.admin, NULL, 0, &b), 200);
    assert_string_equal(cr_buf_str(&b), "hello log\n");
    char want[128];
    snprintf(want, sizeof want, "/v1/logs/%lld stderr 3", (long long)id);
    assert_string_equal(fa.seen_path, want);
    cr_buf_reset(&b);
    snprintf(path, sizeof path, "/v1/jobs/%lld/logs?stream=nope", (long long)id);
    assert_int_equal(req(&d, "GET", path, d.admin, NULL, 0, &b), 400);
    cr_buf_fini(&b);
    stop(&d, SIGTERM);
    cr_http_server_free(srv);
    cleanup(&d);
}

/* A job past its time limit is stopped through the desired state and ends failed. */
static void test_time_limit(void **state)
{
    daemon_t d;
    start(&d, true, NULL);
    char *nt = register_node(&d, "n1");
    int64_t id = submit(&d, d.admin, "{\"command\":[\"sleep\",\"60\"],\"time_limit_s\":1}");
    wait_state(&d, id, "running");
    int64_t deadline = cr_mono_ns() + 20 * CR_NS_PER_SEC;
    bool stopping = false;
    long code;
    while (!stopping && cr_mono_ns() < deadline) {
        json_t *v = call(&d, "GET", "/v1/agents/n1/desired", nt, NULL, &code);
        json_t *e = json_array_get(json_object_get(v, "jobs"), 0);
        stopping = e && strcmp(str(e, "action"), "stop") == 0;
        json_decref(v);
        if (!stopping) {
            poll_sleep();
        }
    }
    assert_true(stopping);
    char body[200];
    snprintf(body, sizeof body, "{\"jobs\":[{\"job\":%lld,\"state\":\"exited\",\"signal\":15}]}",
             (long long)id);
    json_t *v = call(&d, "POST", "/v1/agents/n1/status", nt, body, &code);
    assert_int_equal(code, 200);
    json_decref(v);
    wait_state(&d, id, "failed");
    v = job(&d, id);
    assert_non_null(strstr(str(v, "reason"), "time limit"));
    json_decref(v);
    free(nt);
    stop(&d, SIGTERM);
    cleanup(&d);
}

/* The desired-state entry of job id on node (polls until listed; 20 s). */
static json_t *desired_entry(const daemon_t *d, const char *node, const char *token, int64_t id)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/agents/%s/desired", node);
    int64_t deadline = cr_mono_ns() + 20 * CR_NS_PER_SEC;
    for (;;) {
        long code;
        json_t *v = call(d, "GET", path, token, NULL, &code);
        assert_int_equal(code, 200);
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(v, "jobs"), i, e)
        {
            if (num(e, "job") == id) {
                json_incref(e);
                json_decref(v);
                return e;
            }
        }
        json_decref(v);
        assert_true(cr_mono_ns() < deadline);
        poll_sleep();
    }
}

/* A MIG job goes to a GPU that has an instance of its profile, with that
 * instance's UUID; it survives a controller restart; the node shows it. */
static void test_mig_layout(void **state)
{
    daemon_t d;
    start(&d, true, NULL);
    /* GPU 0: 2 x 2g.12gb (the device's name; 24 GiB names it 2g.13gb),
     * GPU 1: 4 x 1g.6gb, GPU 2: not in MIG mode. */
    const char *body =
        "{\"node\":\"a0\",\"addr\":\"127.0.0.1\",\"port\":1,\"cpus\":8,\"gpus\":["
        "{\"index\":0,\"uuid\":\"GPU-0\",\"model\":\"A30\",\"mem_bytes\":25769803776,\"mig\":["
        "{\"uuid\":\"MIG-0a\",\"profile\":\"2g.12gb\",\"slices\":2,\"mem_slices\":2},"
        "{\"uuid\":\"MIG-0b\",\"profile\":\"2g.12gb\",\"slices\":2,\"mem_slices\":2}]},"
        "{\"index\":1,\"uuid\":\"GPU-1\",\"model\":\"A30\",\"mem_bytes\":25769803776,\"mig\":["
        "{\"uuid\":\"MIG-1a\",\"profile\":\"1g.6gb\",\"slices\":1,\"mem_slices\":1},"
        "{\"uuid\":\"MIG-1b\",\"profile\":\"1g.6gb\",\"slices\":1,\"mem_slices\":1},"
        "{\"uuid\":\"MIG-1c\",\"profile\":\"1g.6gb\",\"slices\":1,\"mem_slices\":1},"
        "{\"uuid\":\"MIG-1d\",\"profile\":\"1g.6gb\",\"slices\":1,\"mem_slices\":1}]},"
        "{\"index\":2,\"uuid\":\"GPU-2\",\"model\":\"A30\",\"mem_bytes\":25769803776}]}";
    long code;
    json_t *v = call(&d, "POST", "/v1/agents/register", d.join, body, &code);
    assert_int_equal(code, 200);
    char *nt = strdup(str(v, "node_token"));
    json_decref(v);
    int64_t ids[5];
    char seen[5][16];
    for (int i = 0; i < 5; i++) {
        ids[i] = submit(&d, d.admin,
                        "{\"command\":[\"sleep\",\"100\"],\"gpu_type\":\"A30\","
                        "\"mig_profile\":\"1g.6gb\"}");
    }
    /* Four instances exist: four run, each on its own 1g.6gb of GPU 1. */
    for (int i = 0; i < 4; i++) {
        wait_state(&d, ids[i], "running");
        json_t *e = desired_entry(&d, "a0", nt, ids[i]);
        assert_int_equal(json_integer_value(json_array_get(json_object_get(e, "gpus"), 0)), 1);
        const char *u = json_string_value(json_array_get(json_object_get(e, "gpu_uuids"), 0));
        assert_non_null(u);
        assert_int_equal(strncmp(u, "MIG-1", 5), 0);
        snprintf(seen[i], sizeof seen[i], "%s", u);
        for (int k = 0; k < i; k++) {
            assert_string_not_equal(seen[k], u);
        }
        json_decref(e);
    }
    v = job(&d, ids[4]);
    assert_string_equal(str(v, "state"), "pending");
    json_decref(v);
    int64_t big = submit(&d, d.admin,
                         "{\"command\":[\"sleep\",\"100\"],\"gpu_type\":\"A30\","
                         "\"mig_profile\":\"2g.12gb\"}");
    wait_state(&d, big, "running");
    json_t *e = desired_entry(&d, "a0", nt, big);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(e, "gpus"), 0)), 0);
    const char *bu = json_string_value(json_array_get(json_object_get(e, "gpu_uuids"), 0));
    assert_true(strcmp(bu, "MIG-0a") == 0 || strcmp(bu, "MIG-0b") == 0);
    char big_uuid[16];
    snprintf(big_uuid, sizeof big_uuid, "%s", bu);
    json_decref(e);
    /* The node view counts MIG-busy GPUs. */
    v = call(&d, "GET", "/v1/nodes/a0", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    json_t *gpus = json_object_get(v, "gpus");
    assert_int_equal(num(json_array_get(gpus, 0), "mig_busy"), 1);
    assert_int_equal(num(json_array_get(gpus, 1), "mig_busy"), 4);
    assert_int_equal(num(json_array_get(gpus, 2), "mig_busy"), 0);
    json_decref(v);

    /* Restart: the MIG jobs keep running on the same instances. */
    stop(&d, SIGTERM);
    start(&d, false, NULL);
    v = job(&d, big);
    assert_string_equal(str(v, "state"), "running");
    assert_int_equal(num(v, "runs"), 1);
    json_decref(v);
    e = desired_entry(&d, "a0", nt, big);
    assert_string_equal(json_string_value(json_array_get(json_object_get(e, "gpu_uuids"), 0)),
                        big_uuid);
    json_decref(e);
    for (int i = 0; i < 4; i++) {
        v = job(&d, ids[i]);
        assert_string_equal(str(v, "state"), "running");
        assert_int_equal(num(v, "runs"), 1);
        json_decref(v);
        e = desired_entry(&d, "a0", nt, ids[i]);
        assert_string_equal(json_string_value(json_array_get(json_object_get(e, "gpu_uuids"), 0)),
                            seen[i]);
        json_decref(e);
    }
    /* One ends: the pending one takes its instance (and no other). */
    char st[200];
    snprintf(st, sizeof st, "{\"jobs\":[{\"job\":%lld,\"state\":\"exited\",\"exit_code\":0}]}",
             (long long)ids[0]);
    v = call(&d, "POST", "/v1/agents/a0/status", nt, st, &code);
    assert_int_equal(code, 200);
    json_decref(v);
    wait_state(&d, ids[0], "completed");
    wait_state(&d, ids[4], "running");
    e = desired_entry(&d, "a0", nt, ids[4]);
    assert_string_equal(json_string_value(json_array_get(json_object_get(e, "gpu_uuids"), 0)),
                        seen[0]);
    json_decref(e);
    free(nt);
    stop(&d, SIGTERM);
    cleanup(&d);
}

/* Fractional GPUs: three 0.3 tasks share the one shareable L40S, a whole
 * job takes the other GPU and never the shared one; a restart keeps them
 * where they are; the started event says how the GPU is shared. */
static void test_fractional(void **state)
{
    daemon_t d;
    start(&d, true, NULL);
    const char *body =
        "{\"node\":\"s0\",\"addr\":\"127.0.0.1\",\"port\":1,\"cpus\":8,\"gpus\":["
        "{\"index\":0,\"uuid\":\"GPU-0\",\"model\":\"L40S\",\"mem_bytes\":48000000000,"
        "\"shareable\":true},"
        "{\"index\":1,\"uuid\":\"GPU-1\",\"model\":\"L40S\",\"mem_bytes\":48000000000}]}";
    long code;
    json_t *v = call(&d, "POST", "/v1/agents/register", d.join, body, &code);
    assert_int_equal(code, 200);
    char *nt = strdup(str(v, "node_token"));
    json_decref(v);
    /* a part of a GPU is one GPU on one node */
    v = call(&d, "POST", "/v1/jobs", d.admin,
             "{\"command\":[\"true\"],\"gpus\":2,\"gpu_milli\":300}", &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "field"), "gpu_milli");
    json_decref(v);
    int64_t f[4];
    for (int i = 0; i < 3; i++) {
        f[i] = submit(&d, d.admin,
                      "{\"command\":[\"sleep\",\"100\"],\"gpu_type\":\"L40S\","
                      "\"gpu_milli\":300,\"gpu_mem_bytes\":12000000000}");
    }
    for (int i = 0; i < 3; i++) {
        wait_state(&d, f[i], "running");
        json_t *e = desired_entry(&d, "s0", nt, f[i]);
        assert_int_equal(json_integer_value(json_array_get(json_object_get(e, "gpus"), 0)), 0);
        assert_int_equal(json_integer_value(json_object_get(e, "gpu_milli")), 300);
        assert_int_equal(json_integer_value(json_object_get(e, "gpu_mem_bytes")), 12000000000LL);
        json_decref(e);
    }
    int64_t whole = submit(&d, d.admin, "{\"command\":[\"sleep\",\"100\"],\"gpu_type\":\"L40S\"}");
    wait_state(&d, whole, "running");
    json_t *e = desired_entry(&d, "s0", nt, whole);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(e, "gpus"), 0)), 1);
    assert_null(json_object_get(e, "gpu_milli"));
    json_decref(e);
    /* neither a further whole job nor a 0.2 task fits (0.9 of GPU 0 is held) */
    int64_t whole2 = submit(&d, d.admin, "{\"command\":[\"true\"],\"gpu_type\":\"L40S\"}");
    f[3] = submit(&d, d.admin, "{\"command\":[\"true\"],\"gpu_type\":\"L40S\",\"gpu_milli\":200}");
    char path[64];
    snprintf(path, sizeof path, "/v1/jobs/%lld", (long long)f[0]);
    v = call(&d, "GET", path, d.admin, NULL, &code);
    assert_int_equal(code, 200);
    bool said = false;
    json_t *ev = json_object_get(v, "events");
    for (size_t i = 0; i < json_array_size(ev); i++) {
        const char *t = json_string_value(json_object_get(json_array_get(ev, i), "why"));
        said |=
            t && strstr(t, "a 0.3 share of the GPU with 12 GB") && strstr(t, "\"shared\" event");
    }
    assert_true(said);
    json_decref(v);
    /* the agent says how it shares the GPU: a "shared" event, once per run */
    char sh[300];
    snprintf(sh, sizeof sh,
             "{\"jobs\":[{\"job\":%lld,\"state\":\"running\",\"run\":1,"
             "\"sharing\":\"mps 30%% threads, 11.2 GiB pinned\"}]}",
             (long long)f[1]);
    for (int k = 0; k < 2; k++) {
        v = call(&d, "POST", "/v1/agents/s0/status", nt, sh, &code);
        assert_int_equal(code, 200);
        json_decref(v);
    }
    snprintf(path, sizeof path, "/v1/jobs/%lld", (long long)f[1]);
    v = call(&d, "GET", path, d.admin, NULL, &code);
    int shared = 0;
    ev = json_object_get(v, "events");
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *e1 = json_array_get(ev, i);
        const char *w = json_string_value(json_object_get(e1, "what"));
        const char *t = json_string_value(json_object_get(e1, "why"));
        shared += w && strcmp(w, "shared") == 0 && t &&
                  strcmp(t, "mps 30% threads, 11.2 GiB pinned (node s0)") == 0;
    }
    assert_int_equal(shared, 1);
    json_decref(v);
    /* restart: the fractional tasks stay on their shared GPU */
    stop(&d, SIGTERM);
    start(&d, false, NULL);
    for (int i = 0; i < 3; i++) {
        v = job(&d, f[i]);
        assert_string_equal(str(v, "state"), "running");
        assert_int_equal(num(v, "runs"), 1);
        json_decref(v);
    }
    v = job(&d, whole2);
    assert_string_equal(str(v, "state"), "pending");
    json_decref(v);
    v = job(&d, f[3]);
    assert_string_equal(str(v, "state"), "pending");
    json_decref(v);
    /* one 0.3 task ends: the 0.2 task takes its place on GPU 0 */
    char st[200];
    snprintf(st, sizeof st, "{\"jobs\":[{\"job\":%lld,\"state\":\"exited\",\"exit_code\":0}]}",
             (long long)f[0]);
    v = call(&d, "POST", "/v1/agents/s0/status", nt, st, &code);
    assert_int_equal(code, 200);
    json_decref(v);
    wait_state(&d, f[3], "running");
    e = desired_entry(&d, "s0", nt, f[3]);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(e, "gpus"), 0)), 0);
    json_decref(e);
    v = job(&d, whole2);
    assert_string_equal(str(v, "state"), "pending");
    json_decref(v);
    free(nt);
    stop(&d, SIGTERM);
    cleanup(&d);
}

/* The demo's shape: three fractional inference replicas of one service
 * share the one L40S. */
static void test_fractional_service(void **state)
{
    daemon_t d;
    start(&d, true, NULL);
    const char *body =
        "{\"node\":\"s0\",\"addr\":\"127.0.0.1\",\"port\":1,\"cpus\":8,\"gpus\":["
        "{\"index\":0,\"uuid\":\"GPU-0\",\"model\":\"L40S\",\"mem_bytes\":48000000000,"
        "\"shareable\":true}]}";
    long code;
    json_t *v = call(&d, "POST", "/v1/agents/register", d.join, body, &code);
    assert_int_equal(code, 200);
    json_decref(v);
    v = call(&d, "POST", "/v1/services", d.admin,
             "{\"name\":\"llm\",\"command\":[\"srv\"],\"gpu_type\":\"L40S\","
             "\"gpu_milli\":300,\"min_replicas\":3,\"max_replicas\":3}",
             &code);
    assert_int_equal(code, 201);
    json_decref(v);
    int64_t deadline = cr_mono_ns() + 20 * CR_NS_PER_SEC;
    size_t running = 0;
    while (cr_mono_ns() < deadline) {
        v = call(&d, "GET", "/v1/jobs?state=running", d.admin, NULL, &code);
        running = (size_t)num(v, "count");
        json_decref(v);
        if (running == 3) {
            break;
        }
        usleep(50000);
    }
    assert_int_equal(running, 3);
    v = call(&d, "GET", "/v1/jobs?state=running", d.admin, NULL, &code);
    json_t *jobs = json_object_get(v, "jobs");
    for (size_t i = 0; i < json_array_size(jobs); i++) {
        json_t *p = json_array_get(json_object_get(json_array_get(jobs, i), "placement"), 0);
        assert_string_equal(str(p, "node"), "s0");
        assert_int_equal(json_integer_value(json_array_get(json_object_get(p, "gpus"), 0)), 0);
        assert_int_equal(num(json_array_get(jobs, i), "gpu_milli"), 300);
    }
    json_decref(v);
    /* the node view: GPU 0 holds the three, 0.9 of it, and is not free */
    v = call(&d, "GET", "/v1/nodes/s0", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    json_t *g0 = json_array_get(json_object_get(v, "gpus"), 0);
    assert_int_equal(json_array_size(json_object_get(g0, "shared_jobs")), 3);
    assert_int_equal(num(g0, "shared_milli"), 900);
    assert_int_equal(num(v, "free_gpus"), 0);
    json_decref(v);
    stop(&d, SIGTERM);
    cleanup(&d);
}

/* The examples of docs/api.md, run in order. */
static void test_api_examples(void **state)
{
    const char *src = getenv("CORRAL_SRC");
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/api.md", src ? src : ".");
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    daemon_t d;
    start(&d, true, NULL);
    char line[4096];
    bool in = false;
    cr_buf req_line, body;
    cr_buf_init(&req_line);
    cr_buf_init(&body);
    int64_t last_id = 0;
    int ran = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!in) {
            in = strcmp(line, "```example") == 0;
            cr_buf_reset(&req_line);
            cr_buf_reset(&body);
            continue;
        }
        if (strcmp(line, "```") == 0) {
            in = false;
            continue;
        }
        if (req_line.len == 0) {
            cr_buf_puts(&req_line, line);
            continue;
        }
        if (strncmp(line, "=> ", 3) != 0) {
            cr_buf_puts(&body, line);
            cr_buf_putc(&body, '\n');
            continue;
        }
        /* Run it. */
        char method[16], target[1024], url[1100];
        assert_int_equal(sscanf(cr_buf_str(&req_line), "%15s %1023s", method, target), 2);
        char *dollar = strstr(target, "$ID");
        if (dollar) {
            *dollar = '\0';
            snprintf(url, sizeof url, "%s%lld%s", target, (long long)last_id, dollar + 3);
        } else {
            snprintf(url, sizeof url, "%s", target);
        }
        long want = strtol(line + 3, NULL, 10);
        const char *expect = strchr(line + 3, '{');
        long code;
        json_t *v = call(&d, method, url, d.admin, body.len ? cr_buf_str(&body) : NULL, &code);
        if (code != want) {
            fprintf(stderr, "docs/api.md example %s %s: status %ld, expected %ld\n", method, url,
                    code, want);
        }
        assert_int_equal(code, want);
        if (expect) {
            json_t *e = json_loads(expect, 0, NULL);
            assert_non_null(e);
            const char *k;
            json_t *x;
            json_object_foreach(e, k, x)
            {
                if (!json_equal(json_object_get(v, k), x)) {
                    fprintf(stderr, "docs/api.md example %s %s: member '%s' differs\n", method, url,
                            k);
                }
                assert_true(json_equal(json_object_get(v, k), x));
            }
            json_decref(e);
        }
        json_t *ids = json_object_get(v, "ids");
        if (json_array_size(ids) > 0) {
            last_id = (int64_t)json_integer_value(json_array_get(ids, 0));
        }
        json_decref(v);
        ran++;
        cr_buf_reset(&req_line);
        cr_buf_reset(&body);
    }
    fclose(f);
    assert_true(ran >= 10);
    cr_buf_fini(&req_line);
    cr_buf_fini(&body);
    stop(&d, SIGTERM);
    cleanup(&d);
}

static void test_metrics_promtool(void **state)
{
    daemon_t d;
    start(&d, true, NULL);
    /* more GPUs than the node has: the job stays pending whatever the
     * scheduler does meanwhile */
    submit(&d, d.admin, "{\"command\":[\"true\"],\"gpus\":64}");
    free(register_node(&d, "mnode"));
    cr_buf b;
    cr_buf_init(&b);
    /* open (no --metrics-token-file): counts without tenant names, nodes
     * without their addresses */
    assert_int_equal(req(&d, "GET", "/metrics", NULL, NULL, 0, &b), 200);
    assert_non_null(strstr(cr_buf_str(&b), "corral_jobs{state=\"pending\"} 1"));
    assert_null(strstr(cr_buf_str(&b), "tenant="));
    assert_non_null(strstr(cr_buf_str(&b), "corral_node_info{node=\"mnode\","));
    assert_null(strstr(cr_buf_str(&b), "addr="));
    cr_buf_reset(&b);
    /* an admin reads the tenant series and the nodes' addresses */
    assert_int_equal(req(&d, "GET", "/metrics", d.admin, NULL, 0, &b), 200);
    const char *m = cr_buf_str(&b);
    assert_non_null(strstr(m, "corral_jobs{tenant=\"default\",state=\"pending\"} 1"));
    assert_non_null(strstr(m, "corral_node_info{node=\"mnode\","));
    assert_non_null(strstr(m, "addr=\""));
    assert_non_null(strstr(m, "corral_api_request_duration_seconds_bucket{route=\"/v1/jobs\""));
    assert_non_null(strstr(m, "corral_sched_cycle_seconds_count"));
    char path[300];
    snprintf(path, sizeof path, "%s/metrics.txt", d.dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(m, f);
    fclose(f);
    if (system("command -v promtool >/dev/null 2>&1") == 0) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "promtool check metrics < '%s'", path);
        assert_int_equal(system(cmd), 0);
    } else {
        fprintf(stderr, "promtool not installed (Debian package prometheus): check skipped\n");
    }
    cr_buf_fini(&b);
    stop(&d, SIGTERM);
    cleanup(&d);
}

/* ------------------------------------------------------------------------ */
/* Crash safety                                                             */

#define CRASH_THREADS 8
#define CRASH_MAX     4000

typedef struct acked {
    char name[32];
    int64_t id;
} acked;

typedef struct crash_ctx {
    daemon_t *d;
    pthread_mutex_t mu;
    acked *acks;
    size_t nacks;
    _Atomic bool stop;
} crash_ctx;

typedef struct crash_worker {
    crash_ctx *c;
    int index;
} crash_worker;

static void *crash_submit(void *arg)
{
    crash_worker *w = arg;
    crash_ctx *c = w->c;
    for (int seq = 0; seq < CRASH_MAX / CRASH_THREADS && !atomic_load(&c->stop); seq++) {
        char name[32], body[128];
        snprintf(name, sizeof name, "c%d-%d", w->index, seq);
        snprintf(body, sizeof body, "{\"command\":[\"true\"],\"name\":\"%s\"}", name);
        long code;
        json_t *v = call(c->d, "POST", "/v1/jobs", c->d->admin, body, &code);
        if (code == 201) {
            pthread_mutex_lock(&c->mu);
            snprintf(c->acks[c->nacks].name, sizeof c->acks[c->nacks].name, "%s", name);
            c->acks[c->nacks].id =
                (int64_t)json_integer_value(json_array_get(json_object_get(v, "ids"), 0));
            c->nacks++;
            pthread_mutex_unlock(&c->mu);
        } else if (code == 0) {
            json_decref(v);
            break; /* the controller is gone */
        }
        json_decref(v);
    }
    return NULL;
}

static void test_crash_safety(void **state)
{
    daemon_t d;
    start(&d, true, NULL);
    crash_ctx c = {.d = &d, .nacks = 0};
    pthread_mutex_init(&c.mu, NULL);
    c.acks = calloc(CRASH_MAX, sizeof *c.acks);
    pthread_t th[CRASH_THREADS];
    crash_worker w[CRASH_THREADS];
    for (int i = 0; i < CRASH_THREADS; i++) {
        w[i] = (crash_worker){.c = &c, .index = i};
        pthread_create(&th[i], NULL, crash_submit, &w[i]);
    }
    /* Kill -9 in the middle of the load. */
    int64_t deadline = cr_mono_ns() + 60 * CR_NS_PER_SEC;
    for (;;) {
        pthread_mutex_lock(&c.mu);
        size_t n = c.nacks;
        pthread_mutex_unlock(&c.mu);
        if (n >= 300 || cr_mono_ns() > deadline) {
            break;
        }
        poll_sleep();
    }
    stop(&d, SIGKILL);
    atomic_store(&c.stop, true);
    for (int i = 0; i < CRASH_THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    size_t nacks = c.nacks;
    assert_true(nacks >= 300);
    start(&d, false, NULL);
    /* Every job, page by page (oldest first). */
    json_t *items = json_array();
    char path[128] = "/v1/jobs?limit=1000&after=0";
    for (;;) {
        long code;
        json_t *page = call(&d, "GET", path, d.admin, NULL, &code);
        assert_int_equal(code, 200);
        json_array_extend(items, json_object_get(page, "items"));
        const char *next = str(page, "next_after");
        bool more = *next != '\0';
        snprintf(path, sizeof path, "/v1/jobs?limit=1000&after=%s", next);
        json_decref(page);
        if (!more) {
            break;
        }
    }
    json_t *v = items;
    json_t *by_name = json_object();
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *j = json_array_get(items, i);
        const char *name = str(j, "name");
        assert_null(json_object_get(by_name, name)); /* none twice */
        json_object_set_new(by_name, name, json_integer(num(j, "id")));
    }
    for (size_t i = 0; i < nacks; i++) {
        json_t *id = json_object_get(by_name, c.acks[i].name);
        if (!id) {
            fprintf(stderr, "acked job %s (id %lld) lost\n", c.acks[i].name,
                    (long long)c.acks[i].id);
        }
        assert_non_null(id);
        assert_int_equal(json_integer_value(id), c.acks[i].id);
    }
    fprintf(stderr, "crash safety: %zu acknowledged, %zu present after kill -9\n", nacks,
            json_array_size(items));
    json_decref(by_name);
    json_decref(v);
    free(c.acks);
    pthread_mutex_destroy(&c.mu);
    stop(&d, SIGTERM);
    cleanup(&d);
}

/* What a failed test left: its daemons and directories. */
static int reap_live(void **state)
{
    cr_test_reap_live(0);
    return 0;
}

/* Whether any file in dir holds needle (the SQLite file, its WAL...). */
static bool dir_has_bytes(const char *dir, const char *needle)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "grep -rqaF -- '%s' '%s'", needle, dir);
    return system(cmd) == 0;
}

/* Issue 24: a job's environment is sealed at rest like its secrets (no
 * value in the SQLite file or its WAL), the API shows its names only, the
 * values with ?env=1 and credential-looking ones redacted even then; the
 * node's desired state carries them whole, also after a restart. */
static void test_env_sealed(void **state)
{
    daemon_t d;
    start(&d, true, NULL);
    char *t1 = register_node(&d, "n1");
    static const char plain_val[] = "/data/hf-7f3a9c21";
    static const char pat_val[] = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
    char body[600];
    snprintf(body, sizeof body,
             "{\"name\":\"envy\",\"command\":[\"true\"],\"gpus\":1,\"env\":{\"HF_HOME\":\"%s\","
             "\"GH_PAT\":\"%s\",\"DB\":\"postgres://db/app?password=hunter2x9\"}}",
             plain_val, pat_val);
    int64_t id = submit(&d, d.admin, body);
    char path[96];
    long code;
    snprintf(path, sizeof path, "/v1/jobs/%lld", (long long)id);
    json_t *v = call(&d, "GET", path, d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_null(json_object_get(v, "env"));
    assert_null(json_object_get(v, "env_enc"));
    json_t *names = json_object_get(v, "env_names");
    assert_int_equal(json_array_size(names), 3);
    assert_string_equal(json_string_value(json_array_get(names, 0)), "DB");
    assert_string_equal(json_string_value(json_array_get(names, 1)), "GH_PAT");
    assert_string_equal(json_string_value(json_array_get(names, 2)), "HF_HOME");
    json_decref(v);
    /* the list's rows: names only too */
    v = call(&d, "GET", "/v1/jobs", d.admin, NULL, &code);
    json_t *it = json_array_get(json_object_get(v, "items"), 0);
    assert_null(json_object_get(it, "env"));
    assert_null(json_object_get(it, "env_enc"));
    assert_int_equal(json_array_size(json_object_get(it, "env_names")), 3);
    json_decref(v);
    /* the values on request, credentials redacted */
    snprintf(path, sizeof path, "/v1/jobs/%lld?env=1", (long long)id);
    v = call(&d, "GET", path, d.admin, NULL, &code);
    assert_int_equal(code, 200);
    json_t *env = json_object_get(v, "env");
    assert_string_equal(str(env, "HF_HOME"), plain_val);
    assert_string_equal(str(env, "GH_PAT"), "(redacted)");
    assert_string_equal(str(env, "DB"), "(redacted)");
    json_decref(v);
    /* the node gets them whole */
    int64_t deadline = cr_mono_ns() + 30 * CR_NS_PER_SEC;
    json_t *e = NULL;
    while (!e && cr_mono_ns() < deadline) {
        v = call(&d, "GET", "/v1/agents/n1/desired", t1, NULL, &code);
        json_t *jobs = json_object_get(v, "jobs");
        for (size_t i = 0; i < json_array_size(jobs); i++) {
            if (num(json_array_get(jobs, i), "job") == id) {
                e = json_incref(json_array_get(jobs, i));
            }
        }
        json_decref(v);
        if (!e) {
            poll_sleep();
        }
    }
    assert_non_null(e);
    assert_string_equal(str(json_object_get(e, "env"), "HF_HOME"), plain_val);
    assert_string_equal(str(json_object_get(e, "env"), "GH_PAT"), pat_val);
    json_decref(e);
    /* at rest: names, never values (the WAL while running, the file after) */
    assert_true(dir_has_bytes(d.dir, "HF_HOME"));
    assert_false(dir_has_bytes(d.dir, plain_val));
    assert_false(dir_has_bytes(d.dir, pat_val));
    assert_false(dir_has_bytes(d.dir, "hunter2x9"));
    stop(&d, SIGTERM);
    assert_false(dir_has_bytes(d.dir, plain_val));
    assert_false(dir_has_bytes(d.dir, pat_val));
    start(&d, false, NULL);
    v = call(&d, "GET", path, d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_string_equal(str(json_object_get(v, "env"), "HF_HOME"), plain_val);
    json_decref(v);
    free(t1);
    stop(&d, SIGTERM);
    cleanup(&d);
}

/* A submit's error: its status, field and whether message holds want. */
static void submit_refused(const daemon_t *d, const char *body, const char *field, const char *want)
{
    long code;
    json_t *v = call(d, "POST", "/v1/jobs", d->admin, body, &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "field"), field);
    if (!strstr(str(v, "message"), want)) {
        fprintf(stderr, "message '%s' lacks '%s'\n", str(v, "message"), want);
        fail();
    }
    json_decref(v);
}

/* Wait until the scheduler has looked at pending job id (its reason is
 * no longer the submit's). */
static void wait_considered(const daemon_t *d, int64_t id)
{
    int64_t deadline = cr_mono_ns() + 20 * CR_NS_PER_SEC;
    for (;;) {
        json_t *v = job(d, id);
        bool seen = strcmp(str(v, "reason"), "not yet considered") != 0;
        json_decref(v);
        if (seen) {
            return;
        }
        assert_true(cr_mono_ns() < deadline);
        poll_sleep();
    }
}

static void assert_runs_on(const daemon_t *d, int64_t id, const char *node)
{
    wait_state(d, id, "running");
    json_t *v = job(d, id);
    assert_string_equal(str(v, "run_nodes"), node);
    json_decref(v);
}

/* Issue 29: a GPU type no one knows, or a partition the cluster does not
 * define, is refused at submit (it would pend for ever); with no
 * partitions, a partition naming a GPU type is that type, with a note. */
static void test_gpu_type_known(void **state)
{
    daemon_t d;
    long code;
    start(&d, true, NULL);
    submit_refused(&d, "{\"command\":[\"x\"],\"gpu_type\":\"gpu\"}", "gpu_type",
                   "unknown GPU type 'gpu' (this cluster has: none registered yet");
    char *t1 = register_node(&d, "n1");
    submit_refused(&d, "{\"command\":[\"x\"],\"gpu_type\":\"gpu\"}", "gpu_type",
                   "(this cluster has: A100 SXM;");
    submit_refused(&d, "{\"command\":[\"x\"],\"partition\":\"gpu\"}", "partition",
                   "invalid partition name specified: 'gpu' (this cluster has no partitions)");
    json_t *v = call(&d, "POST", "/v1/agents/register", d.join,
                     "{\"node\":\"h1\",\"addr\":\"127.0.0.1\",\"port\":1,\"cpus\":8,"
                     "\"gpus\":[{\"index\":0,\"uuid\":\"GPU-h1-0\",\"model\":\"H100 SXM\"}]}",
                     &code);
    assert_int_equal(code, 200);
    char *t2 = strdup(str(v, "node_token"));
    json_decref(v);
    v = call(&d, "POST", "/v1/jobs", d.admin, "{\"command\":[\"x\"],\"partition\":\"h100\"}",
             &code);
    assert_int_equal(code, 201);
    assert_non_null(strstr(str(v, "note"), "partition 'h100' taken as the GPU type"));
    int64_t id = (int64_t)json_integer_value(json_array_get(json_object_get(v, "ids"), 0));
    json_decref(v);
    assert_runs_on(&d, id, "h1"); /* "h100" is the node's "H100 SXM" */
    v = job(&d, id);
    assert_string_equal(str(v, "gpu_type"), "H100 SXM");
    assert_null(json_object_get(v, "partition"));
    json_decref(v);
    /* a type of the catalog no node has yet: accepted (a node may come) */
    submit(&d, d.admin, "{\"command\":[\"x\"],\"gpu_type\":\"L4\"}");
    assert_int_equal(count_jobs(&d), 2);
    free(t1);
    free(t2);
    stop(&d, SIGTERM);
    cleanup(&d);
}

/* Partitions: a partition's jobs go to its nodes only (also nodes that
 * join after the job), take its default GPU type and max_time; the
 * default partition takes jobs that name none. */
static void test_partitions(void **state)
{
    daemon_t d;
    char cfg[128], extra[200];
    snprintf(cfg, sizeof cfg, "/tmp/corral-test-part-%d.json", (int)getpid());
    FILE *cf = fopen(cfg, "w");
    assert_non_null(cf);
    fputs("{\"partitions\": [\n"
          " {\"name\": \"big\", \"nodes\": [\"n1\"], \"max_time\": \"1:00:00\"},\n"
          " {\"name\": \"small\", \"nodes\": [\"s*\"], \"default\": true,\n"
          "  \"default_gpu_type\": \"A100 SXM\"},\n"
          " {\"name\": \"late\", \"gpu_types\": [\"H100 SXM\"], \"nodes\": [\"l3\"]}]}\n",
          cf);
    fclose(cf);
    snprintf(extra, sizeof extra, "--config %s", cfg);
    start(&d, true, extra);
    unlink(cfg);
    char *t1 = register_node(&d, "n1");
    char *t2 = register_node(&d, "s2");
    submit_refused(&d, "{\"command\":[\"x\"],\"partition\":\"gpu\"}", "partition",
                   "invalid partition name specified: 'gpu' (this cluster has partitions big, "
                   "small, late)");
    submit_refused(&d, "{\"command\":[\"x\"],\"partition\":\"big\",\"time_limit_s\":7200}",
                   "time_limit_s", "past partition 'big' max_time (3600 s)");
    assert_int_equal(count_jobs(&d), 0);
    int64_t big1 = submit(&d, d.admin, "{\"command\":[\"x\"],\"gpus\":2,\"partition\":\"big\"}");
    assert_runs_on(&d, big1, "n1");
    json_t *v = job(&d, big1);
    assert_int_equal(num(v, "time_limit_s"), 3600);
    assert_string_equal(str(v, "partition"), "big");
    json_decref(v);
    /* n1 is full: big's next job waits though s2 is free */
    int64_t big2 = submit(&d, d.admin, "{\"command\":[\"x\"],\"gpus\":2,\"partition\":\"big\"}");
    wait_considered(&d, big2);
    int64_t small = submit(&d, d.admin, "{\"command\":[\"x\"],\"gpus\":2}");
    assert_runs_on(&d, small, "s2");
    v = job(&d, small);
    assert_string_equal(str(v, "partition"), "small");
    assert_string_equal(str(v, "gpu_type"), "A100 SXM");
    json_decref(v);
    v = job(&d, big2);
    assert_string_equal(str(v, "state"), "pending");
    json_decref(v);
    /* A partition's node that joins after its job was queued takes it. */
    int64_t late = submit(&d, d.admin, "{\"command\":[\"x\"],\"partition\":\"late\"}");
    wait_considered(&d, late);
    v = job(&d, late);
    assert_string_equal(str(v, "state"), "pending");
    json_decref(v);
    char *t3 = register_node(&d, "l3");
    assert_runs_on(&d, late, "l3");
    free(t1);
    free(t2);
    free(t3);
    stop(&d, SIGTERM);
    cleanup(&d);

    /* A bad partitions section stops the controller with the field. */
    char cmd[600];
    snprintf(cmd, sizeof cmd,
             "echo '{\"partitions\": [{\"name\": \"a\", \"default\": true}, {\"name\": \"b\", "
             "\"default\": true}]}' > %s; %s controller --config %s 2>&1 | grep -q "
             "\"field 'partitions\\[1\\].default': only one partition may be the default\"",
             cfg, bin(), cfg);
    assert_int_equal(system(cmd), 0);
    unlink(cfg);
}

/* Issue 29: jobs without GPUs. gpus 0 runs on a node whose GPUs are all
 * taken, with its CPU limit in the desired state and no GPU; the node's
 * CPUs bound how many such jobs it takes. default_gpus 0: a job that asks
 * for no GPU gets none. */
static void test_cpu_jobs(void **state)
{
    daemon_t d;
    start(&d, true, NULL);
    char *t1 = register_node(&d, "n1"); /* 8 CPUs, 2 GPUs */
    submit_refused(&d, "{\"command\":[\"x\"],\"gpus\":0,\"nodes\":2}", "gpus",
                   "0 (a job without GPUs) goes with nodes 0 or 1");
    submit_refused(&d, "{\"command\":[\"x\"],\"gpus\":0,\"gpu_type\":\"L4\"}", "gpus",
                   "no gpu_type");
    int64_t a = submit(&d, d.admin, "{\"command\":[\"train\"],\"gpus\":2}");
    assert_runs_on(&d, a, "n1");
    int64_t b = submit(&d, d.admin, "{\"command\":[\"prep\"],\"gpus\":0,\"cpus\":4}");
    assert_runs_on(&d, b, "n1"); /* no GPU free there: it needs none */
    json_t *e = desired_entry(&d, "n1", t1, b);
    assert_int_equal(json_array_size(json_object_get(e, "gpus")), 0);
    assert_true(json_number_value(json_object_get(e, "cpus")) == 4.0);
    json_decref(e);
    json_t *v = job(&d, b);
    assert_int_equal(num(v, "gpus"), 0);
    assert_string_equal(str(v, "run_gpu_type"), "none");
    json_decref(v);
    /* 8 CPUs: a (1) + b (4) leave 3, c wants 4 */
    int64_t c = submit(&d, d.admin, "{\"command\":[\"prep\"],\"gpus\":0,\"cpus\":4}");
    wait_considered(&d, c);
    v = job(&d, c);
    assert_string_equal(str(v, "state"), "pending");
    assert_non_null(strstr(str(v, "reason"), "no node it may use has 4 CPUs free"));
    json_decref(v);
    post_exit(&d, "n1", t1, b, 0);
    wait_state(&d, b, "completed");
    assert_runs_on(&d, c, "n1");
    /* the cluster's default stays one GPU */
    int64_t g = submit(&d, d.admin, "{\"command\":[\"x\"]}");
    v = job(&d, g);
    assert_int_equal(num(v, "gpus"), 1);
    json_decref(v);
    free(t1);
    stop(&d, SIGTERM);
    cleanup(&d);

    char cfg[128], extra[200];
    snprintf(cfg, sizeof cfg, "/tmp/corral-test-cpu-%d.json", (int)getpid());
    FILE *cf = fopen(cfg, "w");
    assert_non_null(cf);
    fputs("{\"default_gpus\": 0}\n", cf);
    fclose(cf);
    snprintf(extra, sizeof extra, "--config %s", cfg);
    start(&d, true, extra);
    unlink(cfg);
    t1 = register_node(&d, "n1");
    int64_t p = submit(&d, d.admin, "{\"command\":[\"prep\"]}");
    assert_runs_on(&d, p, "n1");
    v = job(&d, p);
    assert_int_equal(num(v, "gpus"), 0);
    json_decref(v);
    int64_t q = submit(&d, d.admin, "{\"command\":[\"x\"],\"gpu_type\":\"A100 SXM\"}");
    v = job(&d, q);
    assert_int_equal(num(v, "gpus"), 1); /* asking for a type asks for a GPU */
    json_decref(v);
    free(t1);
    stop(&d, SIGTERM);
    cleanup(&d);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, cr_test_on_signal);
    signal(SIGINT, cr_test_on_signal);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_health_and_auth),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_auth_matrix),
        cmocka_unit_test(test_bad_input_stores_nothing),
        cmocka_unit_test(test_agent_protocol),
        cmocka_unit_test(test_services),
        cmocka_unit_test(test_tls),
        cmocka_unit_test(test_time_limit),
        cmocka_unit_test(test_gpu_health),
        cmocka_unit_test(test_gang_exits),
        cmocka_unit_test(test_mig_layout),
        cmocka_unit_test(test_fractional),
        cmocka_unit_test(test_fractional_service),
        cmocka_unit_test(test_logs_proxy),
        cmocka_unit_test(test_api_examples),
        cmocka_unit_test(test_metrics_promtool),
        cmocka_unit_test(test_env_reserved),
        cmocka_unit_test(test_env_sealed),
        cmocka_unit_test(test_gpu_type_known),
        cmocka_unit_test(test_partitions),
        cmocka_unit_test(test_cpu_jobs),
        cmocka_unit_test(test_crash_safety),
    };
    if (getenv("TEST_FILTER")) {
        cmocka_set_test_filter(getenv("TEST_FILTER")); /* e.g. "test_env*" */
    }
    int rc = cmocka_run_group_tests(tests, NULL, reap_live);
    curl_global_cleanup();
    return rc;
}
