/*
 * test_agent_e2e.c - the real 'corral agent' process against a mock
 * controller: register with the inventory, run jobs from the desired
 * state (environment, logs, exit codes), stop with SIGTERM then SIGKILL,
 * health from injected faults, /metrics (checked by promtool when it is
 * installed), the log route, controller outages and token loss, and
 * re-adoption of running and finished jobs after the agent is SIGKILLed.
 * Every wait polls for its condition with a deadline.
 */
#include "mock_ctl.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../integration/reap.h"

typedef struct env {
    mock_ctl *m;
    char dir[256];   /* scratch directory */
    char state[300]; /* agent state dir */
    pid_t agent;
    int port; /* agent's HTTP port */
    int mps;  /* start the agent with the stand-in MPS control program */
} env;

static env E;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Poll cond(arg) every 20 ms for up to secs seconds. */
static int wait_for(int (*cond)(void *), void *arg, double secs)
{
    double end = now_s() + secs;
    while (now_s() < end) {
        if (cond(arg)) {
            return 1;
        }
        usleep(20000);
    }
    return cond(arg);
}

static pid_t start_agent(int *port)
{
    const char *bin = getenv("CORRAL_BIN");
    assert_non_null(bin);
    char server[64], faults[400];
    snprintf(server, sizeof server, "http://127.0.0.1:%d", E.m->port);
    snprintf(faults, sizeof faults, "%s/faults", E.dir);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        char mps_bin[400], mps_dir[400];
        snprintf(mps_bin, sizeof mps_bin, "%s/mps-control", E.dir);
        snprintf(mps_dir, sizeof mps_dir, "%s/mps", E.dir);
        execl(bin, bin, "agent", "--server", server, "--join-token", "jt-secret", "--node", "n1",
              "--rack", "r1", "--gpus", "sim:2xA30,mig=1g.6gb:4;2xL40S", "--share-gpus", "3",
              "--mig-dynamic", "0", "--listen", "127.0.0.1:0", "--state-dir", E.state, "--faults",
              faults, "--xid-hold", "0s", "--wait", "5s", E.mps ? "--mps-control" : NULL, mps_bin,
              "--mps-dir", mps_dir, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char line[256] = "";
    size_t n = 0;
    double end = now_s() + 20;
    while (now_s() < end && !strchr(line, '\n') && n < sizeof line - 1) {
        struct pollfd pf = {fds[0], POLLIN, 0};
        if (poll(&pf, 1, 100) > 0) {
            ssize_t r = read(fds[0], line + n, sizeof line - 1 - n);
            if (r <= 0) {
                break;
            }
            n += (size_t)r;
            line[n] = '\0';
        }
    }
    close(fds[0]);
    const char *colon = strrchr(line, ':');
    if (!colon) {
        fail_msg("agent did not report its port: '%s'", line);
    }
    *port = atoi(colon + 1);
    return pid;
}

static void stop_agent(int sig)
{
    if (E.agent > 0) {
        cr_test_stop(E.agent, sig, 60);
        E.agent = 0;
    }
}

static size_t collect(char *p, size_t s, size_t n, void *ud)
{
    FILE *f = ud;
    return fwrite(p, s, n, f);
}

/* GET from the agent; returns the HTTP status, body in *out (free it). */
static long http_get(const char *path, const char *token, char **out)
{
    char url[512], auth[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", E.port, path);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CURL *h = curl_easy_init();
    struct curl_slist *hdr = NULL;
    if (token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        hdr = curl_slist_append(hdr, auth);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    long code = 0;
    if (curl_easy_perform(h) == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    }
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    fclose(f);
    *out = buf;
    return code;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        return NULL;
    }
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* --- conditions ------------------------------------------------------ */

static int registered(void *arg)
{
    int want = *(int *)arg;
    pthread_mutex_lock(&E.m->mu);
    int ok = E.m->registers >= want && E.m->last_register != NULL;
    pthread_mutex_unlock(&E.m->mu);
    return ok;
}

static int job_exited(void *arg)
{
    pthread_mutex_lock(&E.m->mu);
    int ok = json_object_get(E.m->exits, (const char *)arg) != NULL;
    pthread_mutex_unlock(&E.m->mu);
    return ok;
}

static json_t *exit_of(const char *job)
{
    pthread_mutex_lock(&E.m->mu);
    json_t *j = json_incref(json_object_get(E.m->exits, job));
    pthread_mutex_unlock(&E.m->mu);
    return j;
}

/* The last status lists the job in the given state ("running", "exited") or,
 * with state NULL, does not list it. */
typedef struct job_state {
    long long job;
    const char *state;
} job_state;

static int status_has(void *arg)
{
    job_state *js = arg;
    pthread_mutex_lock(&E.m->mu);
    int found = 0;
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(E.m->last_status, "jobs"), i, j)
    {
        if (json_integer_value(json_object_get(j, "job")) == js->job) {
            const char *st = json_string_value(json_object_get(j, "state"));
            found = js->state && st && strcmp(st, js->state) == 0 ? 1 : -1;
        }
    }
    int statuses = E.m->statuses;
    pthread_mutex_unlock(&E.m->mu);
    return statuses > 0 && (js->state ? found == 1 : found == 0);
}

typedef struct gpu_health {
    int gpu;
    const char *health, *reason;
} gpu_health;

static int gpu_is(void *arg)
{
    gpu_health *g = arg;
    pthread_mutex_lock(&E.m->mu);
    json_t *gj = json_array_get(json_object_get(E.m->last_status, "gpus"), (size_t)g->gpu);
    const char *h = json_string_value(json_object_get(gj, "health"));
    const char *r = json_string_value(json_object_get(gj, "reason"));
    int ok = h && strcmp(h, g->health) == 0 && (!g->reason || (r && strstr(r, g->reason)));
    pthread_mutex_unlock(&E.m->mu);
    return ok;
}

static int file_exists(void *arg)
{
    struct stat sb;
    return stat((const char *)arg, &sb) == 0;
}

/* The agent's journal holds the given text. */
static int journal_has(void *arg)
{
    char path[400];
    snprintf(path, sizeof path, "%s/jobs.journal", E.state);
    FILE *f = fopen(path, "r");
    if (!f) {
        return 0;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        fwrite(chunk, 1, n, m);
    }
    fclose(f);
    fclose(m);
    int ok = strstr(buf, (const char *)arg) != NULL;
    free(buf);
    return ok;
}

/* The pid the last status gave for a job (the shim), 0 if none. */
static int status_pid(long long job)
{
    pthread_mutex_lock(&E.m->mu);
    int pid = 0;
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(E.m->last_status, "jobs"), i, j)
    {
        if (json_integer_value(json_object_get(j, "job")) == job) {
            pid = (int)json_integer_value(json_object_get(j, "pid"));
        }
    }
    pthread_mutex_unlock(&E.m->mu);
    return pid;
}

static int pid_gone(void *arg)
{
    return kill(*(pid_t *)arg, 0) != 0;
}

/* --- fixture --------------------------------------------------------- */

/* meson's timeout (SIGTERM to the process group, SIGKILL 0.5 s later) or
 * ^C: the agent killed, the rest (jobs, cgroups, directory) by reap.sh in a
 * session of its own. */
static void on_signal(int sig)
{
    stop_agent(SIGKILL);
    cr_test_reap(E.dir, 1);
    _exit(128 + sig);
}

static int setup(void **state)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    snprintf(E.dir, sizeof E.dir, "/tmp/corral-agent-e2e-XXXXXX");
    if (!mkdtemp(E.dir)) {
        return -1;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    snprintf(E.state, sizeof E.state, "%s/state", E.dir);
    E.m = mock_ctl_start();
    if (!E.m) {
        return -1;
    }
    E.agent = start_agent(&E.port);
    return 0;
}

static int teardown(void **state)
{
    stop_agent(SIGTERM);
    mock_ctl_stop(E.m);
    cr_test_reap(E.dir, 0); /* stray jobs, the agent's cgroups, the directory */
    curl_global_cleanup();
    return 0;
}

static json_t *job(long long id, const char *script)
{
    return json_pack("{s:I,s:[sss],s:s,s:{},s:[i],s:f}", "job", (json_int_t)id, "command", "sh",
                     "-c", script, "action", "run", "env", "gpus", 0, "grace_s", 5.0);
}

static int file_has(void *arg);

/* The "sharing" the last status gave for job id ("" none); static buffer. */
static const char *sharing_of(long long id)
{
    static char out[400];
    out[0] = '\0';
    pthread_mutex_lock(&E.m->mu);
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(E.m->last_status, "jobs"), i, j)
    {
        const char *t = json_string_value(json_object_get(j, "sharing"));
        if (json_integer_value(json_object_get(j, "job")) == id && t) {
            snprintf(out, sizeof out, "%s", t);
        }
    }
    pthread_mutex_unlock(&E.m->mu);
    return out;
}

/* --- tests ----------------------------------------------------------- */

static void test_register(void **state)
{
    int one = 1;
    assert_true(wait_for(registered, &one, 20));
    pthread_mutex_lock(&E.m->mu);
    json_t *r = E.m->last_register;
    assert_string_equal(json_string_value(json_object_get(r, "node")), "n1");
    assert_string_equal(json_string_value(json_object_get(r, "rack")), "r1");
    assert_int_equal(json_integer_value(json_object_get(r, "port")), E.port);
    json_t *gpus = json_object_get(r, "gpus");
    assert_int_equal(json_array_size(gpus), 4);
    json_t *g0 = json_array_get(gpus, 0);
    assert_string_equal(json_string_value(json_object_get(g0, "model")), "A30");
    assert_int_equal(json_array_size(json_object_get(g0, "mig")), 4);
    json_t *m0 = json_array_get(json_object_get(g0, "mig"), 0);
    assert_string_equal(json_string_value(json_object_get(m0, "profile")), "1g.6gb");
    json_t *g3 = json_array_get(gpus, 3);
    assert_string_equal(json_string_value(json_object_get(g3, "model")), "L40S");
    /* A GPU without NVLink is a domain of its own on the wire. */
    assert_int_equal(json_integer_value(json_object_get(g3, "nvlink_domain")), 1003);
    /* --share-gpus 3: only GPU 3 is offered to fractional tasks */
    assert_true(json_is_true(json_object_get(g3, "shareable")));
    assert_null(json_object_get(json_array_get(gpus, 2), "shareable"));
    assert_int_equal(json_array_size(json_object_get(r, "running")), 0);
    /* Root here: each job gets a PID namespace, and the node says so. */
    const char *detail =
        json_string_value(json_object_get(json_object_get(r, "isolation"), "detail"));
    if (!detail || !strstr(detail, "processes: own PID namespace and /proc per job")) {
        fail_msg("isolation detail: %s", detail ? detail : "(none)");
    }
    pthread_mutex_unlock(&E.m->mu);
}

static void test_run_job_env_logs_exit(void **state)
{
    char wd[300], script[600];
    snprintf(wd, sizeof wd, "%s/w1", E.dir);
    mkdir(wd, 0755);
    snprintf(script, sizeof script,
             "echo out-$CORRAL_JOB_ID; echo oops >&2; env > env.txt; cat /proc/self/cgroup > "
             "cg.txt; exit 3");
    json_t *j = job(1, script);
    json_object_set_new(j, "workdir", json_string(wd));
    json_object_set_new(j, "env", json_pack("{s:s}", "FOO", "bar"));
    json_object_set_new(j, "gpu_uuids", json_pack("[s]", "MIG-aaaa"));
    json_object_set_new(j, "checkpoint_dir", json_sprintf("%s/ck/1", E.dir));
    json_object_set_new(j, "gang",
                        json_pack("{s:s,s:i,s:i,s:i,s:i,s:i}", "master_addr", "10.1.2.3",
                                  "master_port", 29500, "world_size", 16, "node_rank", 1, "nnodes",
                                  2, "local_world_size", 8));
    mock_ctl_set_jobs(E.m, json_pack("[o]", j));
    assert_true(wait_for(job_exited, "1", 20));
    json_t *x = exit_of("1");
    assert_int_equal(json_integer_value(json_object_get(x, "exit_code")), 3);
    assert_int_equal(json_integer_value(json_object_get(x, "signal")), 0);
    json_decref(x);

    char path[400];
    snprintf(path, sizeof path, "%s/env.txt", wd);
    char *envtxt = slurp(path);
    assert_non_null(envtxt);
    const char *want[] = {"FOO=bar\n",           "CUDA_VISIBLE_DEVICES=MIG-aaaa\n",
                          "CORRAL_JOB_ID=1\n",   "MASTER_ADDR=10.1.2.3\n",
                          "MASTER_PORT=29500\n", "WORLD_SIZE=16\n",
                          "NODE_RANK=1\n",       "RANK=8\n",
                          "LOCAL_RANK=0\n",      "LOCAL_WORLD_SIZE=8\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (!strstr(envtxt, want[i])) {
            fail_msg("job env lacks %s", want[i]);
        }
    }
    assert_non_null(strstr(envtxt, "CORRAL_CHECKPOINT_DIR="));
    free(envtxt);
    /* Where cgroup v2 is writable, the job ran in its own cgroup. */
    char inst[17] = "", base[64];
    snprintf(path, sizeof path, "%s/instance.id", E.state);
    char *id = slurp(path);
    assert_non_null(id); /* the agent's instance id names its cgroups */
    snprintf(inst, sizeof inst, "%s", id);
    free(id);
    assert_int_equal(strlen(inst), 16);
    snprintf(base, sizeof base, "corral-n1-%s", inst);
    char v2a[128], v2b[128];
    snprintf(v2a, sizeof v2a, "/sys/fs/cgroup/%s", base);
    snprintf(v2b, sizeof v2b, "/sys/fs/cgroup/unified/%s", base);
    if (access(v2a, F_OK) == 0 || access(v2b, F_OK) == 0) {
        snprintf(path, sizeof path, "%s/cg.txt", wd);
        char *cg = slurp(path);
        assert_non_null(cg);
        char wantcg[128];
        snprintf(wantcg, sizeof wantcg, "/%s/job-1\n", base);
        if (!strstr(cg, wantcg)) {
            fail_msg("job 1 not in its cgroup: %s", cg);
        }
        free(cg);
    }
    snprintf(path, sizeof path, "%s/ck/1", E.dir);
    assert_true(file_exists(path));

    /* Logs: on disk, and through the agent's route with the agent secret
     * the controller issued (never the node token or the join token). */
    snprintf(path, sizeof path, "%s/logs/1/out", E.state);
    char *out = slurp(path);
    assert_non_null(out);
    assert_string_equal(out, "out-1\n");
    free(out);
    char *body = NULL;
    assert_int_equal(http_get("/v1/jobs/1/logs?stream=stdout", "nt-n1", &body), 401);
    free(body);
    assert_int_equal(http_get("/v1/jobs/1/logs?stream=stdout", "jt-secret", &body), 401);
    free(body);
    assert_int_equal(http_get("/v1/jobs/1/logs?stream=stdout", "as-n1", &body), 200);
    assert_string_equal(body, "out-1\n");
    free(body);
    assert_int_equal(http_get("/v1/jobs/1/logs?stream=stderr&offset=1", "as-n1", &body), 200);
    assert_string_equal(body, "ops\n");
    free(body);
    assert_int_equal(http_get("/v1/jobs/1/logs", NULL, &body), 401);
    free(body);
    assert_int_equal(http_get("/v1/jobs/1/logs?stream=video", "as-n1", &body), 400);
    free(body);
    /* No log (yet) reads as empty: the job may be about to start here. */
    assert_int_equal(http_get("/v1/jobs/999/logs", "as-n1", &body), 200);
    assert_string_equal(body ? body : "", "");
    free(body);
    assert_int_equal(http_get("/v1/jobs/999/oops", "as-n1", &body), 404);
    free(body);

    /* Once the controller stops listing it, the agent forgets the job. */
    mock_ctl_set_jobs(E.m, json_array());
    job_state js = {1, NULL};
    assert_true(wait_for(status_has, &js, 20));
    assert_true(wait_for(journal_has, "\nF 1\n", 20));
}

static int exit_of_run(void *arg)
{
    json_t *x = exit_of("8");
    int ok = x && json_integer_value(json_object_get(x, "run")) == *(const int *)arg;
    json_decref(x);
    return ok;
}

/* The controller numbers each start of a job ("run"); the agent echoes it
 * with the exit, and a new number for a job that ended here is a retry,
 * started anew. */
static void test_retry_by_run(void **state)
{
    (void)state;
    char script[600], path[400];
    snprintf(path, sizeof path, "%s/runs8.txt", E.dir);
    snprintf(script, sizeof script, "echo run >> '%s'; exit 1", path);
    json_t *j = job(8, script);
    json_object_set_new(j, "run", json_integer(1));
    mock_ctl_set_jobs(E.m, json_pack("[O]", j));
    int want = 1;
    assert_true(wait_for(exit_of_run, &want, 20));
    json_object_set_new(j, "run", json_integer(2));
    mock_ctl_set_jobs(E.m, json_pack("[O]", j));
    want = 2;
    assert_true(wait_for(exit_of_run, &want, 20));
    char *runs = slurp(path);
    assert_non_null(runs);
    assert_string_equal(runs, "run\nrun\n");
    free(runs);
    json_decref(j);
    mock_ctl_set_jobs(E.m, json_array());
    job_state js = {8, NULL};
    assert_true(wait_for(status_has, &js, 20));
}

static void test_missing_command(void **state)
{
    mock_ctl_set_jobs(E.m, json_pack("[{s:I,s:[s],s:s}]", "job", (json_int_t)2, "command",
                                     "/no/such/program", "action", "run"));
    assert_true(wait_for(job_exited, "2", 20));
    json_t *x = exit_of("2");
    assert_int_equal(json_integer_value(json_object_get(x, "exit_code")), 127);
    json_decref(x);
    char path[400];
    snprintf(path, sizeof path, "%s/logs/2/err", E.state);
    char *err = slurp(path);
    assert_non_null(err);
    assert_non_null(strstr(err, "cannot run '/no/such/program'"));
    free(err);
    mock_ctl_set_jobs(E.m, json_array());
}

/* A cancel that reaches the agent with the placement (the job listed only
 * as "stop"): it never runs, and the agent says it ended, so the
 * controller does not wait for an exit forever. */
static void test_stop_before_start(void **state)
{
    (void)state;
    json_t *j = job(12, "touch never-runs; sleep 60");
    json_object_set_new(j, "run", json_integer(1));
    json_object_set_new(j, "action", json_string("stop"));
    mock_ctl_set_jobs(E.m, json_pack("[o]", j));
    assert_true(wait_for(job_exited, "12", 20));
    json_t *x = exit_of("12");
    assert_int_equal(json_integer_value(json_object_get(x, "signal")), SIGTERM);
    assert_int_equal(json_integer_value(json_object_get(x, "run")), 1);
    json_decref(x);
    mock_ctl_set_jobs(E.m, json_array());
    job_state js = {12, NULL};
    assert_true(wait_for(status_has, &js, 20));
}

static void test_mig_instances(void **state)
{
    /* Two jobs on GPU 0's 1g.6gb instances, the controller naming the same
     * instance for both: the first gets it, the second another free one. */
    pthread_mutex_lock(&E.m->mu);
    json_t *mig =
        json_object_get(json_array_get(json_object_get(E.m->last_register, "gpus"), 0), "mig");
    char want[96];
    snprintf(want, sizeof want, "%s",
             json_string_value(json_object_get(json_array_get(mig, 1), "uuid")));
    pthread_mutex_unlock(&E.m->mu);
    json_t *jobs = json_array();
    for (int k = 0; k < 2; k++) {
        char script[600];
        snprintf(script, sizeof script,
                 "echo $CUDA_VISIBLE_DEVICES > %s/mig-%d.txt; while [ ! -e %s/mig-go ]; do sleep "
                 "0.05; done",
                 E.dir, k, E.dir);
        json_t *j = job(20 + k, script);
        json_object_set_new(j, "mig_profile", json_string("1g.6gb"));
        json_object_set_new(j, "gpu_uuids", json_pack("[s]", want));
        json_array_append_new(jobs, j);
    }
    mock_ctl_set_jobs(E.m, jobs);
    char p0[400], p1[400], go[400];
    snprintf(p0, sizeof p0, "%s/mig-0.txt", E.dir);
    snprintf(p1, sizeof p1, "%s/mig-1.txt", E.dir);
    snprintf(go, sizeof go, "%s/mig-go", E.dir);
    char *a = NULL, *b = NULL;
    double end = now_s() + 20;
    while (now_s() < end) {
        free(a);
        free(b);
        a = slurp(p0);
        b = slurp(p1);
        if (a && b && strchr(a, '\n') && strchr(b, '\n')) {
            break;
        }
        usleep(20000);
    }
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(strncmp(a, "MIG-", 4), 0);
    assert_int_equal(strncmp(b, "MIG-", 4), 0);
    assert_string_not_equal(a, b);
    assert_int_equal(strncmp(a, want, strlen(want)), 0);
    free(a);
    free(b);
    FILE *f = fopen(go, "w");
    fclose(f);
    assert_true(wait_for(job_exited, "20", 20));
    assert_true(wait_for(job_exited, "21", 20));
    /* A MIG job on a GPU without such an instance (GPU 2 is an L40S) never
     * runs on the whole GPU: the start fails (126) and nothing runs. */
    char p2[400], script[600];
    snprintf(p2, sizeof p2, "%s/mig-2.txt", E.dir);
    snprintf(script, sizeof script, "echo $CUDA_VISIBLE_DEVICES > %s", p2);
    json_t *j = job(22, script);
    json_object_set_new(j, "gpus", json_pack("[i]", 2));
    json_object_set_new(j, "gpu_uuids", json_pack("[s]", "GPU-whole"));
    json_object_set_new(j, "mig_profile", json_string("1g.6gb"));
    mock_ctl_set_jobs(E.m, json_pack("[o]", j));
    assert_true(wait_for(job_exited, "22", 20));
    json_t *x = exit_of("22");
    assert_int_equal(json_integer_value(json_object_get(x, "exit_code")), 126);
    json_decref(x);
    char *c = slurp(p2);
    assert_null(c);
    mock_ctl_set_jobs(E.m, json_array());
}

static void set_layouts(json_t *layouts)
{
    pthread_mutex_lock(&E.m->mu);
    json_decref(E.m->mig_layouts);
    E.m->mig_layouts = layouts;
    pthread_mutex_unlock(&E.m->mu);
}

/* GPU 0's MIG instances as last registered (new reference). */
static json_t *gpu0_mig(int *registers)
{
    pthread_mutex_lock(&E.m->mu);
    json_t *mig = json_incref(
        json_object_get(json_array_get(json_object_get(E.m->last_register, "gpus"), 0), "mig"));
    *registers = E.m->registers;
    pthread_mutex_unlock(&E.m->mu);
    return mig;
}

static int registers_above(void *arg)
{
    pthread_mutex_lock(&E.m->mu);
    int ok = E.m->registers > *(int *)arg;
    pthread_mutex_unlock(&E.m->mu);
    return ok;
}

/* Dynamic MIG (--mig-dynamic 0): a layout that would destroy the instance
 * a running job holds is refused whole; one that keeps it (by UUID) is
 * applied: idle instances destroyed, new ones made, the agent registers
 * again with them; GPU 1 (not dynamic) is never changed. */
static void test_mig_dynamic(void **state)
{
    (void)state;
    int regs0;
    json_t *mig = gpu0_mig(&regs0);
    assert_int_equal(json_array_size(mig), 4);
    char busy[96];
    snprintf(busy, sizeof busy, "%s",
             json_string_value(json_object_get(json_array_get(mig, 0), "uuid")));
    json_decref(mig);
    pthread_mutex_lock(&E.m->mu);
    json_t *g0 = json_array_get(json_object_get(E.m->last_register, "gpus"), 0);
    json_t *g1 = json_array_get(json_object_get(E.m->last_register, "gpus"), 1);
    assert_true(json_is_true(json_object_get(g0, "mig_dynamic")));
    assert_null(json_object_get(g1, "mig_dynamic"));
    pthread_mutex_unlock(&E.m->mu);
    char path[400], script[600];
    snprintf(path, sizeof path, "%s/migdyn.txt", E.dir);
    snprintf(script, sizeof script, "echo $CUDA_VISIBLE_DEVICES > %s; sleep 30", path);
    json_t *j = job(4060, script);
    json_object_set_new(j, "mig_profile", json_string("1g.6gb"));
    json_object_set_new(j, "gpu_uuids", json_pack("[s]", busy));
    mock_ctl_set_jobs(E.m, json_pack("[O]", j));
    const char *w[] = {path, "MIG-"};
    assert_true(wait_for(file_has, w, 20));
    /* two 2g.12gb in place of the four 1g.6gb: the busy one would go */
    set_layouts(json_pack("[{s:i,s:[{s:s,s:i,s:i,s:i},{s:s,s:i,s:i,s:i}]},"
                          "{s:i,s:[{s:s,s:i,s:i,s:i}]}]",
                          "gpu", 0, "instances", "profile", "2g.12gb", "slices", 2, "mem_slices", 2,
                          "start", 0, "profile", "2g.12gb", "slices", 2, "mem_slices", 2, "start",
                          2, "gpu", 1, "instances", "profile", "4g.24gb", "slices", 4, "mem_slices",
                          4, "start", 0));
    mock_ctl_set_jobs(E.m, json_pack("[O]", j));
    job_state r60 = {4060, "running"};
    /* a change would register again (within ~1.2 s of modelled delay):
     * none in 3 s */
    assert_false(wait_for(registers_above, &regs0, 3));
    assert_true(status_has(&r60));
    int regs;
    mig = gpu0_mig(&regs);
    assert_int_equal(regs, regs0); /* refused: nothing changed, nothing to tell */
    assert_int_equal(json_array_size(mig), 4);
    json_decref(mig);
    /* keep the busy instance (slice 0), a 1g.6gb at 1, a 2g.12gb at 2 */
    set_layouts(json_pack("[{s:i,s:[{s:s,s:i,s:i,s:i,s:s},{s:s,s:i,s:i,s:i},"
                          "{s:s,s:i,s:i,s:i}]}]",
                          "gpu", 0, "instances", "profile", "1g.6gb", "slices", 1, "mem_slices", 1,
                          "start", 0, "uuid", busy, "profile", "1g.6gb", "slices", 1, "mem_slices",
                          1, "start", 1, "profile", "2g.12gb", "slices", 2, "mem_slices", 2,
                          "start", 2));
    mock_ctl_set_jobs(E.m, json_pack("[O]", j));
    assert_true(wait_for(registers_above, &regs0, 20));
    mig = gpu0_mig(&regs);
    assert_int_equal(json_array_size(mig), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(mig, 0), "uuid")), busy);
    json_t *made = json_array_get(mig, 2);
    assert_string_equal(json_string_value(json_object_get(made, "profile")), "2g.12gb");
    assert_int_equal(json_integer_value(json_object_get(made, "start")), 2);
    assert_int_equal(strncmp(json_string_value(json_object_get(made, "uuid")), "MIG-", 4), 0);
    json_decref(mig);
    assert_true(status_has(&r60)); /* the job on the kept instance ran on */
    pthread_mutex_lock(&E.m->mu);
    g1 = json_array_get(json_object_get(E.m->last_register, "gpus"), 1);
    assert_int_equal(json_array_size(json_object_get(g1, "mig")), 4);
    pthread_mutex_unlock(&E.m->mu);
    set_layouts(NULL);
    json_object_set_new(j, "action", json_string("stop"));
    mock_ctl_set_jobs(E.m, json_pack("[o]", j));
    assert_true(wait_for(job_exited, "4060", 20));
    mock_ctl_set_jobs(E.m, json_array());
}

static void test_fractional_env(void **state)
{
    /* Two fractional tasks on shared GPU 3: each gets the MPS limits of its
     * share (the job's own env cannot raise them) and says how the GPU is
     * shared here (no MPS daemon in the test: time-slicing). */
    (void)state;
    json_t *jobs = json_array();
    for (int k = 0; k < 2; k++) {
        char script[2000];
        snprintf(script, sizeof script,
                 "env | grep -E '^(CUDA_MPS|CORRAL_GPU|CUDA_VISIBLE)' | sort > %s/frac-%d.tmp && "
                 "mv %s/frac-%d.tmp %s/frac-%d.txt",
                 E.dir, k, E.dir, k, E.dir, k);
        json_t *j = job(30 + k, script);
        json_object_set_new(j, "gpus", json_pack("[i]", 3));
        json_object_set_new(j, "gpu_milli", json_integer(k ? 500 : 250));
        json_object_set_new(j, "gpu_mem_bytes", json_integer(k ? 0 : 10000000000LL));
        json_object_set_new(json_object_get(j, "env"), "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                            json_string("100"));
        json_array_append_new(jobs, j);
    }
    mock_ctl_set_jobs(E.m, jobs);
    assert_true(wait_for(job_exited, "30", 20));
    assert_true(wait_for(job_exited, "31", 20));
    char p0[400], p1[400];
    snprintf(p0, sizeof p0, "%s/frac-0.txt", E.dir);
    snprintf(p1, sizeof p1, "%s/frac-1.txt", E.dir);
    char *a = slurp(p0), *b = slurp(p1);
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(a, "CORRAL_GPU_FRACTION=0.250\n"
                           "CORRAL_GPU_SHARING=time-slicing\n"
                           "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25\n"
                           "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=9537M\n"
                           "CUDA_VISIBLE_DEVICES=3\n");
    assert_string_equal(b, "CORRAL_GPU_FRACTION=0.500\n"
                           "CORRAL_GPU_SHARING=time-slicing\n"
                           "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50\n"
                           "CUDA_VISIBLE_DEVICES=3\n");
    free(a);
    free(b);
    /* the sim backend without an MPS program: said so (the "shared" event) */
    assert_string_equal(sharing_of(30), "time-sliced (simulated), memory limit by contract");
    assert_string_equal(sharing_of(31), "time-sliced (simulated)");
    mock_ctl_set_jobs(E.m, json_array());
}

/* A stand-in for nvidia-cuda-mps-control (the real one needs a GPU): it
 * records every call, with the uid it runs as, in its log directory. */
static const char mps_standin[] =
    "#!/bin/sh\n"
    "rec=\"$CUDA_MPS_LOG_DIRECTORY/calls\"\n"
    "if [ \"$1\" = -d ]; then\n"
    "  echo \"start uid=$(id -u) gpu=$CUDA_VISIBLE_DEVICES pipe=$CUDA_MPS_PIPE_DIRECTORY\" >> "
    "\"$rec\"\n"
    "  : > \"$CUDA_MPS_PIPE_DIRECTORY/control\"\n"
    "  exit 0\n"
    "fi\n"
    "read cmd\n"
    "echo \"$cmd uid=$(id -u)\" >> \"$rec\"\n"
    "rm -f \"$CUDA_MPS_PIPE_DIRECTORY/control\"\n";

static int file_has(void *arg)
{
    const char *const *pw = arg; /* {path, text} */
    char *t = slurp(pw[0]);
    int ok = t && strstr(t, pw[1]);
    free(t);
    return ok;
}

/* Fractional tasks with an MPS control program: one daemon per GPU, run as
 * the job's uid in a pipe directory only that uid can open; a second
 * user's task on the GPU runs time-sliced (never pointed at the other
 * user's pipe); the daemon quits when the GPU hosts no fractional task. */
static void test_fractional_mps(void **state)
{
    (void)state;
    char path[600], rec0[500], rec1[500], mpsdir[300];
    snprintf(path, sizeof path, "%s/mps-control", E.dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(mps_standin, f);
    fclose(f);
    assert_int_equal(chmod(path, 0755), 0);
    assert_int_equal(chmod(E.dir, 0711), 0); /* the stand-in runs as the job's uid */
    stop_agent(SIGTERM);
    E.mps = 1;
    E.agent = start_agent(&E.port);
    snprintf(mpsdir, sizeof mpsdir, "%s/mps", E.dir);
    snprintf(rec0, sizeof rec0, "%s/gpu3.u0/log/calls", mpsdir);
    snprintf(rec1, sizeof rec1, "%s/gpu3.u65534/log/calls", mpsdir);
    /* job 4040 (the agent's uid, 0) takes GPU 3 first; job 41 (uid 65534)
     * comes while it runs; ids clear of other suites' node n1 cgroups) */
    json_t *j40 = job(4040, "env | grep -E '^(CUDA_MPS|CORRAL_GPU)' | sort; sleep 30");
    json_object_set_new(j40, "gpus", json_pack("[i]", 3));
    json_object_set_new(j40, "gpu_milli", json_integer(250));
    json_object_set_new(j40, "gpu_mem_bytes", json_integer(10LL << 30));
    json_t *j41 = job(4041, "env | grep -E '^(CUDA_MPS|CORRAL_GPU)' | sort");
    json_object_set_new(j41, "gpus", json_pack("[i]", 3));
    json_object_set_new(j41, "gpu_milli", json_integer(500));
    json_object_set_new(j41, "uid", json_integer(65534));
    json_object_set_new(j41, "gid", json_integer(65534));
    json_object_set_new(json_object_get(j41, "env"), "CUDA_MPS_PIPE_DIRECTORY",
                        json_string("/tmp/elsewhere"));
    mock_ctl_set_jobs(E.m, json_pack("[O]", j40));
    job_state r40 = {4040, "running"};
    assert_true(wait_for(status_has, &r40, 20));
    mock_ctl_set_jobs(E.m, json_pack("[OO]", j40, j41));
    assert_true(wait_for(job_exited, "4041", 20));
    char out[400];
    snprintf(out, sizeof out, "%s/logs/4040/out", E.state);
    const char *w40[] = {out, "CORRAL_GPU_SHARING=mps"};
    assert_true(wait_for(file_has, w40, 20));
    char *a = slurp(out), want[1200];
    snprintf(want, sizeof want,
             "CORRAL_GPU_FRACTION=0.250\nCORRAL_GPU_SHARING=mps\n"
             "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25\n"
             "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=10240M\n"
             "CUDA_MPS_PIPE_DIRECTORY=%s/gpu3.u0/pipe\n",
             mpsdir);
    assert_string_equal(a, want);
    free(a);
    snprintf(out, sizeof out, "%s/logs/4041/out", E.state);
    a = slurp(out);
    assert_non_null(a);
    assert_string_equal(a, "CORRAL_GPU_FRACTION=0.500\nCORRAL_GPU_SHARING=time-slicing\n"
                           "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50\n");
    free(a);
    assert_string_equal(sharing_of(4040), "mps 25% threads, 10 GiB pinned");
    assert_string_equal(sharing_of(4041), "time-sliced, memory limit by contract (GPU 3's MPS "
                                          "server serves another user: one MPS server per uid)");
    /* the daemon runs as uid 0 for GPU 3's UUID; its directories are 0700 */
    a = slurp(rec0);
    assert_non_null(a);
    assert_non_null(strstr(a, "start uid=0 gpu=GPU-"));
    assert_null(strstr(a, "quit"));
    free(a);
    struct stat sb;
    assert_int_equal(stat(mpsdir, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0711);
    snprintf(path, sizeof path, "%s/gpu3.u0", mpsdir);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0700);
    /* job 40 stops: the GPU hosts no fractional task, the daemon quits */
    json_object_set_new(j40, "action", json_string("stop"));
    mock_ctl_set_jobs(E.m, json_pack("[o]", j40));
    const char *q0[] = {rec0, "quit uid=0"};
    assert_true(wait_for(file_has, q0, 20));
    /* now uid 65534 comes first: its own daemon, run as that uid, in a
     * directory only it can open */
    json_t *j42 = job(4042, "env | grep -E '^CUDA_MPS_PIPE' ; sleep 30");
    json_object_set_new(j42, "gpus", json_pack("[i]", 3));
    json_object_set_new(j42, "gpu_milli", json_integer(300));
    json_object_set_new(j42, "uid", json_integer(65534));
    json_object_set_new(j42, "gid", json_integer(65534));
    mock_ctl_set_jobs(E.m, json_pack("[O]", j42));
    const char *s1[] = {rec1, "start uid=65534"};
    assert_true(wait_for(file_has, s1, 20));
    snprintf(path, sizeof path, "%s/gpu3.u65534/pipe", mpsdir);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_uid, 65534);
    assert_int_equal(sb.st_mode & 07777, 0700);
    /* agent exit: the daemon is told to quit */
    stop_agent(SIGTERM);
    const char *q1[] = {rec1, "quit uid=65534"};
    assert_true(file_has(q1));
    E.mps = 0;
    E.agent = start_agent(&E.port);
    json_object_set_new(j42, "action", json_string("stop"));
    mock_ctl_set_jobs(E.m, json_pack("[o]", j42));
    assert_true(wait_for(job_exited, "4042", 20));
    mock_ctl_set_jobs(E.m, json_array());
    json_decref(j41);
}

static void test_stop_term_then_kill(void **state)
{
    /* Job 3 exits 7 on SIGTERM; job 4 ignores it and needs the SIGKILL. */
    json_t *j3 = job(3, "trap 'echo term; exit 7' TERM; echo up; while :; do sleep 0.05; done");
    json_t *j4 = job(4, "trap '' TERM; echo up; while :; do sleep 0.05; done");
    json_object_set_new(j4, "grace_s", json_real(0.3));
    mock_ctl_set_jobs(E.m, json_pack("[OO]", j3, j4));
    job_state r3 = {3, "running"}, r4 = {4, "running"};
    assert_true(wait_for(status_has, &r3, 20));
    assert_true(wait_for(status_has, &r4, 20));
    /* Wait until both shells have set their traps (they print "up" after). */
    char p3[400], p4[400];
    snprintf(p3, sizeof p3, "%s/logs/3/out", E.state);
    snprintf(p4, sizeof p4, "%s/logs/4/out", E.state);
    double end = now_s() + 20;
    for (;;) {
        char *a = slurp(p3), *b = slurp(p4);
        int ok = a && b && strstr(a, "up") && strstr(b, "up");
        free(a);
        free(b);
        if (ok || now_s() > end) {
            break;
        }
        usleep(20000);
    }
    json_object_set_new(j3, "action", json_string("stop"));
    /* Job 4 is simply no longer listed: the same stop, with its own grace. */
    mock_ctl_set_jobs(E.m, json_pack("[o]", j3));
    json_decref(j4);
    assert_true(wait_for(job_exited, "3", 20));
    assert_true(wait_for(job_exited, "4", 20));
    json_t *x3 = exit_of("3"), *x4 = exit_of("4");
    assert_int_equal(json_integer_value(json_object_get(x3, "exit_code")), 7);
    assert_int_equal(json_integer_value(json_object_get(x4, "signal")), SIGKILL);
    json_decref(x3);
    json_decref(x4);
    char *o3 = slurp(p3);
    assert_non_null(strstr(o3, "term"));
    free(o3);
    mock_ctl_set_jobs(E.m, json_array());
}

static void test_health_faults(void **state)
{
    char path[400];
    snprintf(path, sizeof path, "%s/faults", E.dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "2 xid 79\n3 temp 97\n1 ecc 2\n");
    fclose(f);
    gpu_health x = {2, "xid", "XID 79"}, h = {3, "hot", "97 C"}, e = {1, "ecc", "2 uncorrectable"};
    assert_true(wait_for(gpu_is, &x, 20));
    assert_true(wait_for(gpu_is, &h, 20));
    assert_true(wait_for(gpu_is, &e, 20));
    gpu_health ok0 = {0, "ok", NULL};
    assert_true(gpu_is(&ok0));
    /* The metrics say it too, under the DCGM names. */
    char *body = NULL;
    assert_int_equal(http_get("/metrics", NULL, &body), 200);
    assert_non_null(strstr(body, "DCGM_FI_DEV_XID_ERRORS{gpu=\"2\""));
    assert_non_null(strstr(body, "modelName=\"NVIDIA L40S\",Hostname=\"n1\"} 97\n"));
    free(body);
    /* Faults cleared: every GPU comes back, with nothing restarted. */
    unlink(path);
    gpu_health ok2 = {2, "ok", NULL}, ok3 = {3, "ok", NULL}, ok1 = {1, "ok", NULL};
    assert_true(wait_for(gpu_is, &ok2, 20));
    assert_true(wait_for(gpu_is, &ok1, 20));
    /* Temperature falls with a lag; it must get below the cool-down mark. */
    assert_true(wait_for(gpu_is, &ok3, 60));
}

static void test_metrics_promtool(void **state)
{
    char *body = NULL;
    assert_int_equal(http_get("/metrics", NULL, &body), 200);
    const char *want[] = {"# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
                          "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-",
                          "DCGM_FI_DEV_FB_USED{",
                          "DCGM_FI_DEV_FB_FREE{",
                          "DCGM_FI_DEV_GPU_TEMP{",
                          "DCGM_FI_DEV_POWER_USAGE{",
                          "DCGM_FI_DEV_SM_CLOCK{",
                          "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{",
                          "# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter",
                          "DCGM_FI_DEV_MEM_CLOCK{",
                          "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter",
                          "modelName=\"NVIDIA A30\",Hostname=\"n1\"}",
                          "corral_gpu_utilization_percent{node=\"n1\",gpu=\"3\"",
                          "corral_agent_registered 1\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (!strstr(body, want[i])) {
            fail_msg("/metrics lacks %s", want[i]);
        }
    }
    if (system("command -v promtool >/dev/null 2>&1") == 0) {
        char path[400], cmd[600];
        snprintf(path, sizeof path, "%s/metrics.txt", E.dir);
        FILE *f = fopen(path, "w");
        fputs(body, f);
        fclose(f);
        /* promtool lints label names; the DCGM exporter's own (modelName,
         * UUID, Hostname) are camelCase by design, and NVIDIA's counters
         * (ECC_DBE_VOL_TOTAL, TOTAL_ENERGY_CONSUMPTION...) lack "_total":
         * those complaints are expected. Anything else fails. */
        snprintf(cmd, sizeof cmd, "promtool check metrics < '%s' 2>&1", path);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        char line[512];
        int lines = 0;
        while (fgets(line, sizeof line, p)) {
            lines++;
            if ((!strstr(line, "label names should be written in 'snake_case' not 'camelCase'") &&
                 !strstr(line, "counter metrics should have \"_total\" suffix") &&
                 !strstr(line, "metric name should not include type 'counter'")) ||
                strncmp(line, "DCGM_FI_DEV_", 12) != 0) {
                fail_msg("promtool: %s", line);
            }
        }
        pclose(p);
        assert_true(lines > 0); /* promtool ran and saw the DCGM series */
    } else {
        fprintf(stderr, "promtool not installed: lint skipped\n");
    }
    free(body);
}

static void test_controller_outage_and_token_loss(void **state)
{
    /* A job that ends while the controller is down is reported once it is back. */
    char go[400], script[600];
    snprintf(go, sizeof go, "%s/go5", E.dir);
    snprintf(script, sizeof script, "while [ ! -e '%s' ]; do sleep 0.05; done; exit 5", go);
    mock_ctl_set_jobs(E.m, json_pack("[o]", job(5, script)));
    job_state r5 = {5, "running"};
    assert_true(wait_for(status_has, &r5, 20));
    pthread_mutex_lock(&E.m->mu);
    E.m->down = 1;
    pthread_cond_broadcast(&E.m->cv);
    pthread_mutex_unlock(&E.m->mu);
    FILE *f = fopen(go, "w");
    fclose(f);
    assert_true(wait_for(journal_has, "\nX 5 ", 20));
    assert_false(job_exited("5"));
    pthread_mutex_lock(&E.m->mu);
    E.m->down = 0;
    pthread_mutex_unlock(&E.m->mu);
    assert_true(wait_for(job_exited, "5", 30));

    /* The controller forgets our token: the agent registers again. */
    pthread_mutex_lock(&E.m->mu);
    int before = E.m->registers;
    E.m->forget_tokens = 1;
    pthread_mutex_unlock(&E.m->mu);
    int want = before + 1;
    assert_true(wait_for(registered, &want, 30));
    mock_ctl_set_jobs(E.m, json_array());
}

static void test_readopt_after_sigkill(void **state)
{
    /* Job 6 runs on; job 7 ends while the agent is dead. */
    char go[400], script[600];
    snprintf(go, sizeof go, "%s/go7", E.dir);
    snprintf(script, sizeof script, "while [ ! -e '%s' ]; do sleep 0.05; done; exit 9", go);
    json_t *j6 = job(6, "echo six; while :; do sleep 0.05; done");
    json_t *j7 = job(7, script);
    mock_ctl_set_jobs(E.m, json_pack("[OO]", j6, j7));
    job_state r6 = {6, "running"}, r7 = {7, "running"};
    assert_true(wait_for(status_has, &r6, 20));
    assert_true(wait_for(status_has, &r7, 20));
    /* The job's process: the only child of the shim the status names. */
    int shim = status_pid(6);
    assert_true(shim > 1);
    char children[128];
    snprintf(children, sizeof children, "/proc/%d/task/%d/children", shim, shim);
    pid_t job6 = 0;
    double until = now_s() + 20;
    while (job6 <= 1 && now_s() < until) {
        char *c = slurp(children);
        job6 = c ? (pid_t)atoi(c) : 0;
        free(c);
        usleep(20000);
    }
    assert_true(job6 > 1);
    /* That child is the init of the job's PID namespace; the job's shell is
     * its child, pid 2 there. */
    char path[64], nspid[64];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)job6);
    char *comm = slurp(path);
    assert_non_null(comm);
    assert_string_equal(comm, "corral-init\n");
    free(comm);
    snprintf(children, sizeof children, "/proc/%d/task/%d/children", (int)job6, (int)job6);
    pid_t sh6 = 0;
    for (until = now_s() + 20; sh6 <= 1 && now_s() < until; usleep(20000)) {
        char *c = slurp(children);
        sh6 = c ? (pid_t)atoi(c) : 0;
        free(c);
    }
    assert_true(sh6 > 1);
    snprintf(path, sizeof path, "/proc/%d/status", (int)sh6);
    snprintf(nspid, sizeof nspid, "NSpid:\t%d\t2\n", (int)sh6);
    char *st6 = slurp(path);
    assert_non_null(st6);
    if (!strstr(st6, nspid)) {
        fail_msg("job 6's shell is not pid 2 of its namespace: %s", st6);
    }
    free(st6);

    stop_agent(SIGKILL);
    assert_int_equal(kill(job6, 0), 0); /* the job outlives its agent */
    assert_int_equal(kill(sh6, 0), 0);
    FILE *f = fopen(go, "w");
    fclose(f);
    assert_true(wait_for(journal_has, "\nX 7 ", 20));

    pthread_mutex_lock(&E.m->mu);
    int want = E.m->registers + 1;
    pthread_mutex_unlock(&E.m->mu);
    E.agent = start_agent(&E.port);
    assert_true(wait_for(registered, &want, 20));
    pthread_mutex_lock(&E.m->mu);
    json_t *run = json_object_get(E.m->last_register, "running");
    int listed = 0;
    size_t i;
    json_t *x;
    json_array_foreach(run, i, x)
    {
        listed |= json_integer_value(json_object_get(x, "job")) == 6;
        assert_int_not_equal(json_integer_value(json_object_get(x, "job")), 7);
    }
    pthread_mutex_unlock(&E.m->mu);
    assert_true(listed);
    assert_true(wait_for(job_exited, "7", 20));
    json_t *x7 = exit_of("7");
    assert_int_equal(json_integer_value(json_object_get(x7, "exit_code")), 9);
    json_decref(x7);
    /* Still wanted: job 6 keeps running, not restarted (same process). */
    assert_true(wait_for(status_has, &r6, 20));
    assert_int_equal(kill(job6, 0), 0);
    /* No longer wanted: the adopted job is stopped and its end reported. */
    mock_ctl_set_jobs(E.m, json_array());
    assert_true(wait_for(pid_gone, &job6, 20));
    assert_true(wait_for(pid_gone, &sh6, 20));
    assert_true(wait_for(job_exited, "6", 20));
    json_t *x6 = exit_of("6");
    assert_int_equal(json_integer_value(json_object_get(x6, "signal")), SIGTERM);
    json_decref(x6);
    json_decref(j6);
    json_decref(j7);
}

/* Bad flags: exit code 2 and a message that names the flag. */
static void test_bad_flags(void **state)
{
    const char *bin = getenv("CORRAL_BIN");
    const struct {
        const char *args, *want;
    } cases[] = {
        {"--join-token t", "--server"},
        {"--server http://127.0.0.1:1", "--join-token"},
        {"--server ftp://x --join-token t", "--server"},
        {"--server http://127.0.0.1:1 --join-token t --listen nope", "--listen"},
        {"--server http://127.0.0.1:1 --join-token t --wait 0s", "--wait"},
        {"--server http://127.0.0.1:1 --join-token t --hot-c 5000", "--hot-c"},
        {"--server http://127.0.0.1:1 --join-token t --node 'a b'", "--node"},
        {"--server http://127.0.0.1:1 --join-token t --xid-hold soon", "--xid-hold"},
        {"--server http://127.0.0.1:1 --join-token t --gpus 'sim:3xH100 SXM,nvlink=2' --state-dir "
         "STATE",
         "does not divide"},
        {"--server http://127.0.0.1:1 --join-token t --gpus tpu --state-dir STATE", "--gpus"},
        /* a shared directory is never made the agent's (nor chmod-ed) */
        {"--server http://127.0.0.1:1 --join-token t --state-dir /tmp", "--state-dir"},
        {"--server http://127.0.0.1:1 --join-token t extra", "extra"},
        /* a loopback address advertised to a controller elsewhere */
        {"--server http://10.9.9.9:1 --join-token t", "loopback"},
        {"--server http://10.9.9.9:1 --join-token t --listen 127.0.0.1:0", "--advertise"},
        {"--server http://127.0.0.1:1 --join-token t --task-env NOEQ", "--task-env"},
        {"--server http://127.0.0.1:1 --join-token t --rdzv-ports 9-5", "--rdzv-ports"},
        {"--server http://127.0.0.1:1 --join-token t --mig-dynamic x", "--mig-dynamic"},
        {"--server http://127.0.0.1:1 --join-token t --job-pid-namespace yes",
         "--job-pid-namespace"},
        {"--server http://127.0.0.1:1 --join-token t --mps-dir rel", "--mps-dir"},
        {"--server http://127.0.0.1:1 --join-token t --gpus sim:1xL40S --state-dir STATE "
         "--mps-control bin/none",
         "--mps-control"},
        /* a shared directory is never made the MPS directory (nor chmod-ed) */
        {"--server http://127.0.0.1:1 --join-token t --gpus sim:1xL40S --state-dir STATE "
         "--mps-control /bin/true --mps-dir /tmp",
         "--mps-dir /tmp"},
    };
    char sd[] = "/var/tmp/corral-e2e-flags-XXXXXX";
    assert_non_null(mkdtemp(sd));
    struct stat tmp0;
    assert_int_equal(stat("/tmp", &tmp0), 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[512], cmd[1024];
        const char *ph = strstr(cases[i].args, "STATE");
        if (ph) {
            snprintf(args, sizeof args, "%.*s%s%s", (int)(ph - cases[i].args), cases[i].args, sd,
                     ph + 5);
        } else {
            snprintf(args, sizeof args, "%s", cases[i].args);
        }
        snprintf(cmd, sizeof cmd, "%s agent %s 2>&1", bin, args);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        char out[2048] = "";
        size_t n = fread(out, 1, sizeof out - 1, p);
        out[n] = '\0';
        int st = pclose(p);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 2 || !strstr(out, cases[i].want)) {
            fail_msg("agent %s: exit %d, output '%s' (want 2 and '%s')", cases[i].args,
                     WIFEXITED(st) ? WEXITSTATUS(st) : -1, out, cases[i].want);
        }
    }
    struct stat tmp1;
    assert_int_equal(stat("/tmp", &tmp1), 0);
    assert_int_equal(tmp1.st_mode, tmp0.st_mode); /* /tmp untouched */
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s %s.dev", sd, sd);
    assert_int_equal(system(rm), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_flags),
        cmocka_unit_test(test_register),
        cmocka_unit_test(test_run_job_env_logs_exit),
        cmocka_unit_test(test_retry_by_run),
        cmocka_unit_test(test_missing_command),
        cmocka_unit_test(test_stop_before_start),
        cmocka_unit_test(test_mig_instances),
        cmocka_unit_test(test_mig_dynamic),
        cmocka_unit_test(test_fractional_env),
        cmocka_unit_test(test_fractional_mps),
        cmocka_unit_test(test_stop_term_then_kill),
        cmocka_unit_test(test_health_faults),
        cmocka_unit_test(test_metrics_promtool),
        cmocka_unit_test(test_controller_outage_and_token_loss),
        cmocka_unit_test(test_readopt_after_sigkill),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
