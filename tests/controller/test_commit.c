/*
 * test_commit.c - commit first (issue 10, docs/architecture.md "Commit
 * first"), the leftovers: against the real daemon on loopback, a real
 * SQLite file and agents played over HTTP (register, status):
 *   - an admin's node delete is stored before memory shows it: refused on
 *     a full disk (507), the node is as it was, also after a restart;
 *   - a start whose commit is in flight is pending in /metrics, the node
 *     view and the job list, as in the job view;
 *   - an end an agent reported, being stored, stands: a node delete, a
 *     preemption or a GPU gone at re-registration that comes meanwhile
 *     does not requeue the job; if that end is refused, the stop is done.
 * A commit is held in flight by holding SQLite's write lock from this
 * process (as an admin's sqlite3 shell would; the controller waits up to its
 * 10 s busy timeout); the tests release it as soon as what they look for is
 * seen. Waits poll with generous deadlines: nothing depends on timing to
 * pass.
 */
#include "cr_buf.h"
#include "cr_time.h"
#include "../integration/reap.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctl_fixture.h"
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>

typedef ctl_daemon daemon_t;

/* What the teardown ends and removes when an assertion ended a test early. */
static pid_t live_pid;
static char live_dir[256];
static bool live_mounted;
static sqlite3 *live_lock;

static void nap(void)
{
    ctlf_nap();
}

/* One request: its status (0: no answer) and body text in out. */
static long req(const daemon_t *d, const char *method, const char *path, const char *token,
                const char *body, cr_buf *out)
{
    ctlf_opts o = {.token = token};
    return ctlf_req(d, method, path, body, body ? strlen(body) : 0, &o, out);
}

static json_t *call(const daemon_t *d, const char *method, const char *path, const char *token,
                    const char *body, long *code)
{
    return ctlf_call(d, method, path, token, body, code);
}

static const char *str(const json_t *v, const char *key)
{
    return ctlf_str(v, key);
}

/* The controller on d->dir (made by the caller). */
static void start(daemon_t *d)
{
    char log[300];
    snprintf(log, sizeof log, "%s.log", d->dir);
    int st = 0;
    bool ok = ctlf_spawn(d, NULL, log, 30, &st);
    live_pid = d->pid;
    assert_true(ok);
}

static void stop(daemon_t *d, int sig)
{
    if (d->pid > 0) {
        cr_test_stop(d->pid, sig, 60);
        d->pid = 0;
        live_pid = 0;
    }
}

/* A fresh state dir; on a small tmpfs when tmpfs (the disk-full tests). */
static void fresh(daemon_t *d, bool tmpfs)
{
    memset(d, 0, sizeof *d);
    snprintf(d->dir, sizeof d->dir, "/tmp/corral-test-commit-XXXXXX");
    assert_non_null(mkdtemp(d->dir));
    snprintf(live_dir, sizeof live_dir, "%s", d->dir);
    if (tmpfs) {
        if (mount("tmpfs", d->dir, "tmpfs", 0, "size=8m,mode=0700") != 0) {
            fprintf(stderr, "cannot mount a tmpfs (%s): needs root\n", strerror(errno));
            skip();
        }
        live_mounted = true;
    }
    start(d);
}

static int teardown(void **state)
{
    (void)state;
    if (live_lock) {
        sqlite3_exec(live_lock, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close(live_lock);
        live_lock = NULL;
    }
    if (live_pid > 0) {
        kill(live_pid, SIGKILL);
        waitpid(live_pid, NULL, 0);
        live_pid = 0;
    }
    if (live_mounted) {
        umount2(live_dir, MNT_DETACH);
        live_mounted = false;
    }
    if (*live_dir) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s.log'", live_dir, live_dir);
        if (system(cmd) != 0) {
            fprintf(stderr, "cannot remove %s\n", live_dir);
        }
        *live_dir = '\0';
    }
    return 0;
}

static void fill_disk(const char *dir)
{
    ctlf_fill_disk_ok(dir);
}

static void free_disk(const char *dir)
{
    char path[400];
    snprintf(path, sizeof path, "%s/filler", dir);
    assert_int_equal(unlink(path), 0);
}

/* Registers a node with gpus A100s, as its agent would; its token (free()). */
static char *reg_node(const daemon_t *d, const char *name, int gpus)
{
    cr_buf b;
    cr_buf_init(&b);
    cr_buf_printf(&b, "{\"node\":\"%s\",\"addr\":\"127.0.0.1\",\"port\":1,\"cpus\":8,\"gpus\":[",
                  name);
    for (int i = 0; i < gpus; i++) {
        cr_buf_printf(&b,
                      "%s{\"index\":%d,\"uuid\":\"GPU-%s-%d\",\"model\":\"A100 SXM\","
                      "\"mem_bytes\":85899345920}",
                      i ? "," : "", i, name, i);
    }
    cr_buf_puts(&b, "]}");
    long code;
    json_t *v = call(d, "POST", "/v1/agents/register", d->join, cr_buf_str(&b), &code);
    cr_buf_fini(&b);
    assert_int_equal(code, 200);
    char *t = strdup(str(v, "node_token"));
    json_decref(v);
    return t;
}

static int64_t submit(const daemon_t *d, const char *body)
{
    return ctlf_submit_ok(d, d->admin, body);
}

static json_t *job(const daemon_t *d, int64_t id)
{
    return ctlf_job_ok(d, id);
}

/* Polls until job id's state is state (30 s), then asserts it. */
static void wait_state(const daemon_t *d, int64_t id, const char *state)
{
    int64_t deadline = cr_mono_ns() + 30 * CR_NS_PER_SEC;
    for (;;) {
        json_t *v = job(d, id);
        bool ok = strcmp(str(v, "state"), state) == 0;
        if (ok || cr_mono_ns() > deadline) {
            if (!ok) {
                fprintf(stderr, "job %lld: %s (%s), expected %s\n", (long long)id, str(v, "state"),
                        str(v, "reason"), state);
            }
            json_decref(v);
            assert_true(ok);
            return;
        }
        json_decref(v);
        nap();
    }
}

static long node_get(const daemon_t *d, const char *name, json_t **out)
{
    char path[96];
    long code;
    snprintf(path, sizeof path, "/v1/nodes/%s", name);
    json_t *v = call(d, "GET", path, d->admin, NULL, &code);
    if (out) {
        *out = v;
    } else {
        json_decref(v);
    }
    return code;
}

/* Whether the JSON array arr holds the integer id. */
static bool has_id(const json_t *arr, int64_t id)
{
    for (size_t i = 0; i < json_array_size(arr); i++) {
        if (json_integer_value(json_array_get(arr, i)) == id) {
            return true;
        }
    }
    return false;
}

/* Polls until pending job id has its first reason from the scheduler (30 s):
 * the pass that set it has queued its commit (the reason's event). */
static void wait_reason(const daemon_t *d, int64_t id)
{
    int64_t deadline = cr_mono_ns() + 30 * CR_NS_PER_SEC;
    bool ok = false;
    while (!ok && cr_mono_ns() < deadline) {
        json_t *v = job(d, id);
        ok = *str(v, "reason") != '\0';
        json_decref(v);
        if (!ok) {
            nap();
        }
    }
    assert_true(ok);
}

/* Takes SQLite's write lock on the controller's store: its commits wait.
 * First a change is stored and answered: every commit queued before it
 * (a scheduler pass's, which the scheduler thread waits for) is over, so
 * what the test does next is not held up behind one. */
static void lock_store(const daemon_t *d)
{
    static int seq;
    char body[64];
    long code;
    snprintf(body, sizeof body, "{\"name\":\"settle%d\"}", ++seq);
    json_t *v = call(d, "POST", "/v1/tenants", d->admin, body, &code);
    assert_int_equal(code, 201);
    json_decref(v);
    char p[400];
    snprintf(p, sizeof p, "%s/corral.db", d->dir);
    assert_int_equal(sqlite3_open(p, &live_lock), SQLITE_OK);
    sqlite3_busy_timeout(live_lock, 10000);
    assert_int_equal(sqlite3_exec(live_lock, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
}

static void unlock_store(void)
{
    assert_int_equal(sqlite3_exec(live_lock, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(live_lock);
    live_lock = NULL;
}

/* A request answered only once a commit is over: run on its own thread. */
typedef struct bg_call {
    pthread_t t;
    const daemon_t *d;
    char method[8];
    char path[128];
    char token[128];
    char *body; /* owned */
    long code;
} bg_call;

static void *bg_main(void *arg)
{
    bg_call *b = arg;
    cr_buf out;
    cr_buf_init(&out);
    b->code = req(b->d, b->method, b->path, b->token, b->body, &out);
    if (b->code != 200) {
        fprintf(stderr, "%s %s: %ld %s\n", b->method, b->path, b->code, cr_buf_str(&out));
    }
    cr_buf_fini(&out);
    return NULL;
}

static void bg_start(bg_call *b, const daemon_t *d, const char *method, const char *path,
                     const char *token, const char *body)
{
    memset(b, 0, sizeof *b);
    b->d = d;
    snprintf(b->method, sizeof b->method, "%s", method);
    snprintf(b->path, sizeof b->path, "%s", path);
    snprintf(b->token, sizeof b->token, "%s", token);
    b->body = body ? strdup(body) : NULL;
    assert_int_equal(pthread_create(&b->t, NULL, bg_main, b), 0);
}

static long bg_end(bg_call *b)
{
    pthread_join(b->t, NULL);
    free(b->body);
    b->body = NULL;
    return b->code;
}

/* An agent's report that job id (run 1) exited 0, on its own thread: its
 * answer waits for the commit. Returns once the end is being stored (a
 * user's change to the job answers "being stored"). */
static void report_exit(bg_call *b, const daemon_t *d, const char *node, const char *nt, int64_t id)
{
    char path[96], body[160];
    snprintf(path, sizeof path, "/v1/agents/%s/status", node);
    snprintf(body, sizeof body, "{\"jobs\":[{\"job\":%lld,\"run\":1,\"state\":\"exited\"}]}",
             (long long)id);
    bg_start(b, d, "POST", path, nt, body);
    snprintf(path, sizeof path, "/v1/jobs/%lld/release", (long long)id);
    int64_t deadline = cr_mono_ns() + 30 * CR_NS_PER_SEC;
    bool storing = false;
    while (!storing && cr_mono_ns() < deadline) {
        cr_buf out;
        cr_buf_init(&out);
        long code = req(d, "POST", path, d->admin, NULL, &out);
        /* (not held: refused at once either way, nothing is stored) */
        storing = code == 409 && strstr(cr_buf_str(&out), "being stored") != NULL;
        cr_buf_fini(&out);
        if (!storing) {
            nap();
        }
    }
    assert_true(storing);
}

/* ------------------------------------------------------------------------ */
/* 1. An admin's node delete: stored first.                                 */

static void test_delete_disk_full(void **state)
{
    (void)state;
    daemon_t d;
    fresh(&d, true);
    char *nt = reg_node(&d, "n1", 1);
    int64_t a = submit(&d, "{\"command\":[\"sleep\",\"1000\"],\"gpus\":1}");
    wait_state(&d, a, "running");

    fill_disk(d.dir);
    long code;
    json_t *v = call(&d, "DELETE", "/v1/nodes/n1?force=true", d.admin, NULL, &code);
    assert_int_equal(code, 507);
    assert_string_equal(str(v, "error"), "CR_EDISKFULL");
    json_decref(v);
    /* The node as it was: up, not drained, its job on it and running, its
     * agent's token working. */
    assert_int_equal(node_get(&d, "n1", &v), 200);
    assert_string_equal(str(v, "state"), "up");
    assert_false(json_is_true(json_object_get(v, "drained")));
    assert_true(has_id(json_object_get(v, "jobs"), a));
    json_decref(v);
    wait_state(&d, a, "running");
    v = call(&d, "GET", "/v1/agents/n1/desired", nt, NULL, &code);
    assert_int_equal(code, 200);
    json_decref(v);

    /* After a restart too. */
    free_disk(d.dir);
    stop(&d, SIGKILL);
    start(&d);
    assert_int_equal(node_get(&d, "n1", NULL), 200);
    wait_state(&d, a, "running");
    v = call(&d, "GET", "/v1/agents/n1/desired", nt, NULL, &code);
    assert_int_equal(code, 200);
    json_decref(v);

    /* With room, the delete is done and stays done. */
    v = call(&d, "DELETE", "/v1/nodes/n1?force=true", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    assert_int_equal(json_integer_value(json_object_get(v, "requeued")), 1);
    json_decref(v);
    assert_int_equal(node_get(&d, "n1", NULL), 404);
    wait_state(&d, a, "pending");
    stop(&d, SIGKILL);
    start(&d);
    assert_int_equal(node_get(&d, "n1", NULL), 404);
    wait_state(&d, a, "pending");
    v = call(&d, "GET", "/v1/agents/n1/desired", nt, NULL, &code);
    assert_int_equal(code, 401); /* its token went with it */
    json_decref(v);
    free(nt);
    stop(&d, SIGTERM);
}

/* ------------------------------------------------------------------------ */
/* 2. A start whose commit is in flight is pending everywhere.              */

/* The sum of the samples of family whose labels hold label (the admin's
 * /metrics, with tenants). */
static double metric_sum(const daemon_t *d, const char *family, const char *label)
{
    cr_buf b;
    cr_buf_init(&b);
    assert_int_equal(req(d, "GET", "/metrics", d->admin, NULL, &b), 200);
    double sum = 0;
    size_t flen = strlen(family);
    for (char *line = strtok(b.data, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, family, flen) == 0 && line[flen] == '{' && strstr(line, label)) {
            const char *sp = strrchr(line, ' ');
            sum += sp ? strtod(sp + 1, NULL) : 0;
        }
    }
    cr_buf_fini(&b);
    return sum;
}

static void test_start_in_flight_counts(void **state)
{
    (void)state;
    daemon_t d;
    fresh(&d, false);
    int64_t j = submit(&d, "{\"command\":[\"sleep\",\"1000\"],\"gpus\":1}");
    wait_state(&d, j, "pending"); /* no node yet */
    wait_reason(&d, j);

    /* A node comes (in memory at once; its row waits): the scheduler
     * places j there, and that start's commit waits too. */
    lock_store(&d);
    bg_call reg;
    bg_start(&reg, &d, "POST", "/v1/agents/register", d.join,
             "{\"node\":\"n1\",\"addr\":\"127.0.0.1\",\"port\":1,\"cpus\":8,\"gpus\":[{\"index\":0,"
             "\"uuid\":\"GPU-n1-0\",\"model\":\"A100 SXM\",\"mem_bytes\":85899345920}]}");
    int64_t deadline = cr_mono_ns() + 30 * CR_NS_PER_SEC;
    bool starting = false;
    while (!starting && cr_mono_ns() < deadline) {
        json_t *v = job(&d, j);
        starting = strcmp(str(v, "reason"), "starting: its placement is being stored") == 0;
        assert_string_equal(str(v, "state"), "pending");
        json_decref(v);
        if (!starting) {
            nap();
        }
    }
    assert_true(starting);
    /* /metrics, the node view and the job list say pending too. */
    assert_true(metric_sum(&d, "corral_jobs", "state=\"running\"") == 0);
    assert_true(metric_sum(&d, "corral_jobs", "state=\"pending\"") == 1);
    assert_true(metric_sum(&d, "corral_jobs_pending_by_reason", "reason=\"starting\"") == 1);
    json_t *v = NULL;
    assert_int_equal(node_get(&d, "n1", &v), 200);
    assert_false(has_id(json_object_get(v, "jobs"), j));
    assert_true(has_id(json_object_get(v, "starting_jobs"), j));
    json_decref(v);
    long code;
    v = call(&d, "GET", "/v1/jobs?limit=10", d.admin, NULL, &code);
    assert_int_equal(code, 200);
    json_t *it = json_array_get(json_object_get(v, "items"), 0);
    assert_int_equal(json_integer_value(json_object_get(it, "id")), j);
    assert_string_equal(str(it, "state"), "pending");
    json_decref(v);

    /* Stored: running everywhere. */
    unlock_store();
    assert_int_equal(bg_end(&reg), 200);
    wait_state(&d, j, "running");
    assert_true(metric_sum(&d, "corral_jobs", "state=\"running\"") == 1);
    assert_int_equal(node_get(&d, "n1", &v), 200);
    assert_true(has_id(json_object_get(v, "jobs"), j));
    assert_null(json_object_get(v, "starting_jobs"));
    json_decref(v);
    stop(&d, SIGTERM);
}

/* ------------------------------------------------------------------------ */
/* 3. A reported end being stored stands.                                   */

/* An admin deletes the job's node (force) while the end is stored: the
 * job completed, it is not requeued. */
static void test_end_stands_node_delete(void **state)
{
    (void)state;
    daemon_t d;
    fresh(&d, false);
    char *nt = reg_node(&d, "n1", 1);
    int64_t a = submit(&d, "{\"command\":[\"sleep\",\"1000\"],\"gpus\":1}");
    wait_state(&d, a, "running");

    lock_store(&d);
    bg_call rep, del;
    report_exit(&rep, &d, "n1", nt, a);
    bg_start(&del, &d, "DELETE", "/v1/nodes/n1?force=true", d.admin, NULL);
    /* The delete is under way: drained for it, or gone (memory first). */
    int64_t deadline = cr_mono_ns() + 30 * CR_NS_PER_SEC;
    bool seen = false;
    while (!seen && cr_mono_ns() < deadline) {
        json_t *v = NULL;
        long code = node_get(&d, "n1", &v);
        seen = code == 404 || json_is_true(json_object_get(v, "drained"));
        json_decref(v);
        if (!seen) {
            nap();
        }
    }
    assert_true(seen);
    unlock_store();
    long rep_code = bg_end(&rep), del_code = bg_end(&del);
    wait_state(&d, a, "completed");
    assert_int_equal(rep_code, 200);
    assert_int_equal(del_code, 200);
    assert_int_equal(node_get(&d, "n1", NULL), 404);
    stop(&d, SIGKILL);
    start(&d);
    wait_state(&d, a, "completed");
    assert_int_equal(node_get(&d, "n1", NULL), 404);
    free(nt);
    stop(&d, SIGTERM);
}

/* A preemption decided while the end is stored (a GPU comes back healthy:
 * a higher tier's job now fits if the preemptible one goes) leaves the
 * job completed, and the preemptor runs. */
static void test_end_stands_preemption(void **state)
{
    (void)state;
    daemon_t d;
    fresh(&d, false);
    char *nt = reg_node(&d, "n1", 2);
    long code;
    json_t *v = call(&d, "POST", "/v1/agents/n1/status", nt,
                     "{\"gpus\":[{\"index\":1,\"health\":\"xid\",\"reason\":\"test\"}]}", &code);
    assert_int_equal(code, 200);
    json_decref(v);
    int64_t a = submit(&d, "{\"command\":[\"sleep\",\"1000\"],\"gpus\":1,\"preemptible\":true}");
    wait_state(&d, a, "running");
    int64_t b = submit(&d, "{\"command\":[\"sleep\",\"1000\"],\"gpus\":2,\"priority\":10}");
    wait_state(&d, b, "pending"); /* does not fit: one GPU is unhealthy */
    wait_reason(&d, b);

    lock_store(&d);
    bg_call rep, hb;
    report_exit(&rep, &d, "n1", nt, a);
    bg_start(&hb, &d, "POST", "/v1/agents/n1/status", nt,
             "{\"gpus\":[{\"index\":1,\"health\":\"ok\"}]}");
    /* b now fits if a goes: the scheduler places b (its start waits). */
    int64_t deadline = cr_mono_ns() + 30 * CR_NS_PER_SEC;
    bool placed = false;
    while (!placed && cr_mono_ns() < deadline) {
        v = job(&d, b);
        placed = strcmp(str(v, "reason"), "starting: its placement is being stored") == 0;
        json_decref(v);
        if (!placed) {
            nap();
        }
    }
    assert_true(placed);
    unlock_store();
    assert_int_equal(bg_end(&rep), 200);
    assert_int_equal(bg_end(&hb), 200);
    wait_state(&d, b, "running");
    wait_state(&d, a, "completed");
    stop(&d, SIGKILL);
    start(&d);
    wait_state(&d, a, "completed");
    wait_state(&d, b, "running");
    free(nt);
    stop(&d, SIGTERM);
}

/* Node n1 registers again (its token nt) without GPU 0, in the background
 * (the store may be locked); returns once the node view shows GPU 0 gone. */
static void reregister_without_gpu0(bg_call *reg, daemon_t *d, const char *nt)
{
    bg_start(reg, d, "POST", "/v1/agents/register", nt,
             "{\"node\":\"n1\",\"addr\":\"127.0.0.1\",\"port\":1,\"cpus\":8,\"gpus\":[{\"index\":1,"
             "\"uuid\":\"GPU-n1-1\",\"model\":\"A100 SXM\",\"mem_bytes\":85899345920}]}");
    int64_t deadline = cr_mono_ns() + 30 * CR_NS_PER_SEC;
    bool gone = false;
    while (!gone && cr_mono_ns() < deadline) {
        json_t *v = NULL;
        assert_int_equal(node_get(d, "n1", &v), 200);
        gone = strcmp(str(json_array_get(json_object_get(v, "gpus"), 0), "health"), "gone") == 0;
        json_decref(v);
        if (!gone) {
            nap();
        }
    }
    assert_true(gone);
}

/* The job's GPU vanishes at its agent's re-registration while the end is
 * stored: the job completed, it is not requeued. */
static void test_end_stands_gpu_gone(void **state)
{
    (void)state;
    daemon_t d;
    fresh(&d, false);
    char *nt = reg_node(&d, "n1", 1);
    int64_t a = submit(&d, "{\"command\":[\"sleep\",\"1000\"],\"gpus\":1}");
    wait_state(&d, a, "running");

    lock_store(&d);
    bg_call rep, reg;
    report_exit(&rep, &d, "n1", nt, a);
    reregister_without_gpu0(&reg, &d, nt);
    unlock_store();
    long rep_code = bg_end(&rep), reg_code = bg_end(&reg);
    wait_state(&d, a, "completed");
    assert_int_equal(rep_code, 200);
    assert_int_equal(reg_code, 200);
    stop(&d, SIGKILL);
    start(&d);
    wait_state(&d, a, "completed");
    free(nt);
    stop(&d, SIGTERM);
}

/* The same, but the reported end cannot be stored (disk full): then the
 * stop held back is done, the job is requeued (not left running on a GPU
 * that is gone). */
static void test_end_refused_then_requeued(void **state)
{
    (void)state;
    daemon_t d;
    fresh(&d, true);
    char *nt = reg_node(&d, "n1", 1);
    int64_t a = submit(&d, "{\"command\":[\"sleep\",\"1000\"],\"gpus\":1}");
    wait_state(&d, a, "running");

    lock_store(&d);
    bg_call rep, reg;
    report_exit(&rep, &d, "n1", nt, a);
    reregister_without_gpu0(&reg, &d, nt);
    fill_disk(d.dir);
    unlock_store();
    assert_int_equal(bg_end(&rep), 507);
    bg_end(&reg);
    wait_state(&d, a, "pending");
    json_t *v = job(&d, a);
    assert_int_equal(json_array_size(json_object_get(v, "placement")), 0);
    json_decref(v);
    assert_int_equal(node_get(&d, "n1", &v), 200);
    assert_false(has_id(json_object_get(v, "jobs"), a));
    json_decref(v);
    free_disk(d.dir);
    free(nt);
    stop(&d, SIGTERM);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_delete_disk_full, teardown),
        cmocka_unit_test_teardown(test_start_in_flight_counts, teardown),
        cmocka_unit_test_teardown(test_end_stands_node_delete, teardown),
        cmocka_unit_test_teardown(test_end_stands_preemption, teardown),
        cmocka_unit_test_teardown(test_end_stands_gpu_gone, teardown),
        cmocka_unit_test_teardown(test_end_refused_then_requeued, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
