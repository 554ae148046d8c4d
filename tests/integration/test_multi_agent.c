/*
 * test_multi_agent.c - the real controller and several real agents on
 * loopback, driven over HTTP as a user would:
 *   - a gang job across two agents gets consistent torchrun variables;
 *   - an agent SIGKILLed mid-job (its node dies with its jobs): the job is
 *     requeued and completes on another node;
 *   - the controller SIGKILLed and restarted mid-run: running jobs are
 *     adopted, none runs twice;
 *   - node loss: a max_retries 0 job survives it (requeued, no retry used);
 *     a lost node stays lost across a controller restart and gets no work
 *     until its agent is back; a node that comes back kills (fences) the job
 *     the controller moved elsewhere, at once, even one that ignores
 *     SIGTERM; GPUs that vanish at re-registration end their jobs with a
 *     reason;
 *   - commit first on a full disk (the controller's state dir is a small
 *     tmpfs): an agent's report of a job's end that cannot be stored leaves
 *     the job running, the agent's retry stores it once there is room, and
 *     it survives a restart; a start the scheduler could not store never
 *     reaches an agent.
 * Every wait polls for its condition with a deadline.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <jansson.h>
#include <setjmp.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "reap.h"

#define MAX_AGENTS 3

typedef struct fixture {
    char dir[256];
    char ctl_state[300];
    char ctl_conf[300]; /* checkpoint_root in dir (not /tmp/corral/ckpt) */
    char server[96];
    char listen[64];
    char token[256];
    pid_t ctl;
    pid_t agents[MAX_AGENTS];
    int tmpfs;              /* ctl_state is a tmpfs of its own (the disk-full tests) */
    const char *lost_after; /* the controller's --lost-after ("3" unless a test says) */
} fixture;

static fixture E;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t collect(char *p, size_t s, size_t n, void *ud)
{
    return fwrite(p, s, n, (FILE *)ud);
}

static json_t *api(const char *method, const char *path, const char *body, long *code)
{
    char url[512], auth[300];
    snprintf(url, sizeof url, "%s%s", E.server, path);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", E.token);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CURL *h = curl_easy_init();
    struct curl_slist *hdr = curl_slist_append(NULL, auth);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    }
    *code = 0;
    if (curl_easy_perform(h) == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, code);
    }
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    fclose(f);
    json_t *j = buf ? json_loads(buf, 0, NULL) : NULL;
    free(buf);
    return j;
}

static pid_t spawn(char *const argv[], const char *log)
{
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen(log, "a", stdout);
        (void)f;
        dup2(1, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

static void start_controller(void)
{
    const char *bin = getenv("CORRAL_BIN");
    char log[400];
    snprintf(log, sizeof log, "%s/controller.log", E.dir);
    char *argv[] = {(char *)bin,
                    "controller",
                    "--listen",
                    E.listen,
                    "--state-dir",
                    E.ctl_state,
                    "--heartbeat",
                    "1",
                    "--lost-after",
                    E.lost_after ? (char *)E.lost_after : "3",
                    "--config",
                    E.ctl_conf,
                    "--allow-legacy-join",
                    NULL};
    E.ctl = spawn(argv, log);
}

static void start_agent_gpus(int i, const char *gpus);

static void start_agent(int i)
{
    start_agent_gpus(i, "sim:2xA100 80GB SXM");
}

static void start_agent_gpus(int i, const char *gpus)
{
    const char *bin = getenv("CORRAL_BIN");
    char node[16], state[400], log[400], jtok[400];
    snprintf(node, sizeof node, "a%d", i);
    snprintf(state, sizeof state, "%s/%s", E.dir, node);
    snprintf(log, sizeof log, "%s/agent-%s.log", E.dir, node);
    snprintf(jtok, sizeof jtok, "%s/join.token", E.ctl_state);
    char *argv[] = {(char *)bin, "agent",       "--server",    E.server, "--join-token",
                    jtok,        "--node",      node,          "--gpus", (char *)gpus,
                    "--listen",  "127.0.0.1:0", "--state-dir", state,    "--wait",
                    "5s",        NULL};
    E.agents[i] = spawn(argv, log);
}

static void kill_wait(pid_t *pid, int sig)
{
    if (*pid > 0) {
        cr_test_stop(*pid, sig, 60);
        *pid = 0;
    }
}

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static int nodes_up(int want)
{
    long code;
    json_t *j = api("GET", "/v1/nodes", NULL, &code);
    int up = 0;
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(j, "items"), i, n)
    {
        up += strcmp(json_string_value(json_object_get(n, "state")), "up") == 0;
    }
    json_decref(j);
    return up >= want;
}

static int wait_nodes_up(int want, double secs)
{
    double end = now_s() + secs;
    while (now_s() < end) {
        if (nodes_up(want)) {
            return 1;
        }
        usleep(50000);
    }
    return 0;
}

static long long submit(const char *body)
{
    long code;
    json_t *j = api("POST", "/v1/jobs", body, &code);
    if (code != 201) {
        fail_msg("submit: HTTP %ld: %s", code, body);
    }
    long long id = (long long)json_integer_value(json_array_get(json_object_get(j, "ids"), 0));
    json_decref(j);
    return id;
}

/* The job's JSON (new reference) once its state is want, or NULL at the deadline. */
static json_t *wait_state(long long id, const char *want, double secs)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/jobs/%lld", id);
    double end = now_s() + secs;
    while (now_s() < end) {
        long code;
        json_t *j = api("GET", path, NULL, &code);
        const char *st = json_string_value(json_object_get(j, "state"));
        if (st && strcmp(st, want) == 0) {
            return j;
        }
        json_decref(j);
        usleep(50000);
    }
    return NULL;
}

/* Fail the test unless job id's state is want within secs. */
static void expect_state(long long id, const char *want, double secs)
{
    json_t *j = wait_state(id, want, secs);
    if (!j) {
        fail_msg("job %lld not %s within %.0f s", id, want, secs);
    }
    json_decref(j);
}

/* Poll /v1/health until it answers 200 or secs pass: whether it did. */
static int wait_healthy(double secs)
{
    long code = 0;
    double end = now_s() + secs;
    while (code != 200 && now_s() < end) {
        json_decref(api("GET", "/v1/health", NULL, &code));
        usleep(20000);
    }
    return code == 200;
}

/* Poll (up to secs) until process pid is gone: whether it is. */
static int wait_pid_gone(pid_t pid, double secs)
{
    double end = now_s() + secs;
    while (kill(pid, 0) == 0 && now_s() < end) {
        usleep(20000);
    }
    return kill(pid, 0) != 0;
}

static void touch(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
}

/* Create the file name in E.dir (a job waiting for it goes on). */
static void release(const char *name)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s", E.dir, name);
    touch(path);
}

static void stop_all(int sig);

/* meson's timeout (SIGTERM to the process group, SIGKILL 0.5 s later) or
 * ^C: the daemons killed, the rest (jobs, cgroups, directory) by reap.sh
 * in a session of its own. */
static void on_signal(int sig)
{
    stop_all(SIGKILL);
    cr_test_reap(E.dir, 1);
    _exit(128 + sig);
}

static int setup(void **state)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (!getenv("CORRAL_BIN")) {
        return -1;
    }
    snprintf(E.dir, sizeof E.dir, "/tmp/corral-multi-XXXXXX");
    if (!mkdtemp(E.dir)) {
        return -1;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    snprintf(E.ctl_state, sizeof E.ctl_state, "%s/ctl", E.dir);
    snprintf(E.ctl_conf, sizeof E.ctl_conf, "%s/ctl.json", E.dir);
    FILE *cf = fopen(E.ctl_conf, "w");
    if (!cf) {
        return -1;
    }
    /* grace_s 1: a lost node's jobs are requeued 3 + 1 + 5 s after it was
     * last heard (the node lease, docs/operations.md). */
    fprintf(cf, "{\"checkpoint_root\": \"%s/ckpt\", \"grace_s\": 1}\n", E.dir);
    fclose(cf);
    /* The controller's state on a small disk of its own, so a test can fill
     * it (root; without, those tests skip). */
    if (mkdir(E.ctl_state, 0700) == 0 &&
        mount("tmpfs", E.ctl_state, "tmpfs", 0, "size=32m,mode=0700") == 0) {
        E.tmpfs = 1;
    } else {
        fprintf(stderr, "no tmpfs for the controller's state (%s): disk-full tests skip\n",
                strerror(errno));
    }
    /* A free port: another test may hold the first one tried. */
    int port = 21000 + (int)(getpid() % 20000);
    for (int attempt = 0;; attempt++) {
        snprintf(E.listen, sizeof E.listen, "127.0.0.1:%d", port);
        snprintf(E.server, sizeof E.server, "http://%s", E.listen);
        start_controller();
        int up = 0, st;
        double until = now_s() + 30;
        while (!up && now_s() < until && waitpid(E.ctl, &st, WNOHANG) == 0) {
            long code;
            json_decref(api("GET", "/v1/health", NULL, &code));
            up = code == 200;
            usleep(20000);
        }
        if (up) {
            break;
        }
        kill_wait(&E.ctl, SIGKILL);
        if (attempt == 4) {
            fprintf(stderr, "controller did not start; see %s/controller.log\n", E.dir);
            return -1;
        }
        port += 1 + (int)(now_s() * 1000) % 97;
    }
    char tok[400];
    snprintf(tok, sizeof tok, "%s/admin.token", E.ctl_state);
    double end = now_s() + 20;
    while (now_s() < end && !file_exists(tok)) {
        usleep(20000);
    }
    FILE *f = fopen(tok, "r");
    if (!f || !fgets(E.token, sizeof E.token, f)) {
        return -1;
    }
    fclose(f);
    E.token[strcspn(E.token, "\r\n")] = '\0';
    for (int i = 0; i < MAX_AGENTS; i++) {
        start_agent(i);
    }
    if (!wait_nodes_up(MAX_AGENTS, 60)) {
        fprintf(stderr, "agents did not register; see %s/agent-a*.log\n", E.dir);
        return -1;
    }
    return 0;
}

/* Kill every job process an agent left behind (the starts in its journal). */
static void kill_jobs_of(int i)
{
    char path[400];
    snprintf(path, sizeof path, "%s/a%d/jobs.journal", E.dir, i);
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    while (f && getline(&line, &cap, f) > 0) {
        if (line[0] != 'R') {
            continue;
        }
        json_t *j = json_loads(line + 2, 0, NULL);
        int pid = (int)json_integer_value(json_object_get(j, "pid"));
        if (pid > 1) {
            kill(-pid, SIGKILL);
        }
        json_decref(j);
    }
    free(line);
    if (f) {
        fclose(f);
    }
}

static void stop_all(int sig)
{
    for (int i = 0; i < MAX_AGENTS; i++) {
        kill_wait(&E.agents[i], sig);
        kill_jobs_of(i);
    }
    kill_wait(&E.ctl, sig);
    if (E.tmpfs) {
        umount2(E.ctl_state, MNT_DETACH);
        E.tmpfs = 0;
    }
}

static int teardown(void **state)
{
    stop_all(SIGTERM);
    /* Stray jobs, the agents' cgroups (corral-NODE-INSTANCE), the directory. */
    cr_test_reap(E.dir, 0);
    curl_global_cleanup();
    return 0;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        return NULL;
    }
    /* A leading newline lets "\nNAME=" find the first line too. */
    char *buf = calloc(1, 16384);
    buf[0] = '\n';
    size_t n = fread(buf + 1, 1, 16382, f);
    buf[n + 1] = '\0';
    fclose(f);
    return buf;
}

static int env_int(const char *text, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "%s=", name);
    const char *p = strstr(text, key);
    return p ? atoi(p + strlen(key)) : -1;
}

static void test_gang_torchrun_env(void **state)
{
    /* Each node writes its environment, then waits for the other (a
     * barrier, as a collective would), so neither is stopped mid-write when
     * the first one's exit completes the job. */
    char body[1024];
    snprintf(body, sizeof body,
             "{\"name\":\"gang\",\"nodes\":2,\"gpus\":4,\"gpu_type\":\"A100 80GB SXM\","
             "\"command\":[\"sh\",\"-c\",\"cd %s && env > gang-$CORRAL_NODE.tmp && "
             "mv gang-$CORRAL_NODE.tmp gang-$CORRAL_NODE.env && "
             "while [ $(ls gang-*.env | wc -l) -lt 2 ]; do sleep 0.05; done\"]}",
             E.dir);
    long long id = submit(body);
    expect_state(id, "completed", 60);
    /* Two of the three nodes ran it; read both files. */
    char *env[2] = {NULL, NULL};
    int found = 0;
    for (int i = 0; i < MAX_AGENTS && found < 2; i++) {
        char path[400];
        snprintf(path, sizeof path, "%s/gang-a%d.env", E.dir, i);
        char *t = slurp(path);
        if (t) {
            env[found++] = t;
        }
    }
    assert_int_equal(found, 2);
    const char *ma0 = strstr(env[0], "\nMASTER_ADDR="), *ma1 = strstr(env[1], "\nMASTER_ADDR=");
    if (!ma0 || !ma1) {
        fail_msg("no MASTER_ADDR in:\n%s\n---\n%s", env[0], env[1]);
    }
    assert_int_equal(strncmp(ma0, ma1, strcspn(ma0 + 1, "\n") + 1), 0);
    assert_int_equal(env_int(env[0], "\nMASTER_PORT"), env_int(env[1], "\nMASTER_PORT"));
    assert_true(env_int(env[0], "\nMASTER_PORT") > 0);
    for (int k = 0; k < 2; k++) {
        /* A batch job (not a launcher, not a training kind) runs one task
         * per node: the task is the rank. */
        assert_int_equal(env_int(env[k], "\nWORLD_SIZE"), 2);
        assert_int_equal(env_int(env[k], "\nLOCAL_WORLD_SIZE"), 1);
        assert_int_equal(env_int(env[k], "\nNNODES"), 2);
        assert_int_equal(env_int(env[k], "\nLOCAL_RANK"), 0);
        assert_int_equal(env_int(env[k], "\nRANK"), env_int(env[k], "\nNODE_RANK"));
        assert_int_equal(env_int(env[k], "\nSLURM_PROCID"), env_int(env[k], "\nNODE_RANK"));
        assert_int_equal(env_int(env[k], "\nSLURM_NTASKS"), 2);
        assert_int_equal(env_int(env[k], "\nPET_NNODES"), 2);
        assert_int_equal(env_int(env[k], "\nPET_MASTER_PORT"), env_int(env[k], "\nMASTER_PORT"));
        assert_non_null(strstr(env[k], "\nCUDA_VISIBLE_DEVICES=GPU-"));
    }
    assert_int_equal(env_int(env[0], "\nNODE_RANK") + env_int(env[1], "\nNODE_RANK"), 1);
    free(env[0]);
    free(env[1]);
}

static void test_agent_sigkill_requeue(void **state)
{
    /* The job records where it starts, then waits for 'release' unless it
     * runs a second time (after the requeue), when it ends at once. */
    char body[1024];
    snprintf(body, sizeof body,
             "{\"name\":\"survivor\",\"gpus\":2,\"gpu_type\":\"A100 80GB SXM\",\"max_retries\":0,"
             "\"command\":[\"sh\",\"-c\",\"if [ -e %s/started ]; then echo again > "
             "%s/second-$CORRAL_NODE; "
             "exit 0; fi; echo $CORRAL_NODE > %s/started; while :; do sleep 0.05; done\"]}",
             E.dir, E.dir, E.dir);
    long long id = submit(body);
    char started[400];
    snprintf(started, sizeof started, "%s/started", E.dir);
    /* Wait for the whole line (the file exists before its text is written). */
    int victim = -1;
    double end = now_s() + 30;
    while (now_s() < end && victim < 0) {
        char *first = slurp(started);
        const char *a = first ? strstr(first, "\na") : NULL;
        if (a && a[2] >= '0' && a[2] <= '9' && a[3] == '\n') {
            victim = a[2] - '0';
        }
        free(first);
        usleep(20000);
    }
    assert_true(victim >= 0 && victim < MAX_AGENTS);
    /* The node dies: the agent and its jobs. */
    kill_wait(&E.agents[victim], SIGKILL);
    kill_jobs_of(victim);
    json_t *j = wait_state(id, "completed", 60);
    assert_non_null(j);
    json_t *ev;
    size_t i;
    int requeued = 0;
    json_array_foreach(json_object_get(j, "events"), i, ev)
    {
        const char *why = json_string_value(json_object_get(ev, "why"));
        requeued |= why && strstr(why, "lost") != NULL;
    }
    /* A node loss is not the job's failure: no retry used (max_retries 0). */
    assert_int_equal(json_integer_value(json_object_get(j, "retries")), 0);
    json_decref(j);
    assert_true(requeued);
    /* It completed on another node. */
    int elsewhere = 0;
    for (int k = 0; k < MAX_AGENTS; k++) {
        char path[400];
        snprintf(path, sizeof path, "%s/second-a%d", E.dir, k);
        if (file_exists(path)) {
            assert_int_not_equal(k, victim);
            elsewhere = 1;
        }
    }
    assert_true(elsewhere);
    /* The node comes back for the next test. */
    start_agent(victim);
    assert_true(wait_nodes_up(MAX_AGENTS, 30));
}

static int count_markers(const char *prefix)
{
    DIR *d = opendir(E.dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL) {
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    }
    if (d) {
        closedir(d);
    }
    return n;
}

static void test_controller_restart_adopts(void **state)
{
    long long ids[2];
    for (int k = 0; k < 2; k++) {
        char body[1024];
        snprintf(body, sizeof body,
                 "{\"name\":\"steady\",\"gpus\":1,\"gpu_type\":\"A100 80GB SXM\","
                 "\"command\":[\"sh\",\"-c\",\"mktemp %s/run-$CORRAL_JOB_ID-XXXXXX; "
                 "while [ ! -e %s/release ]; do sleep 0.05; done\"]}",
                 E.dir, E.dir);
        ids[k] = submit(body);
    }
    for (int k = 0; k < 2; k++) {
        expect_state(ids[k], "running", 30);
    }
    char p0[64], p1[64];
    snprintf(p0, sizeof p0, "run-%lld-", ids[0]);
    snprintf(p1, sizeof p1, "run-%lld-", ids[1]);
    double end = now_s() + 20;
    while (now_s() < end && (count_markers(p0) < 1 || count_markers(p1) < 1)) {
        usleep(20000);
    }
    kill_wait(&E.ctl, SIGKILL);
    start_controller();
    assert_true(wait_nodes_up(MAX_AGENTS, 30));
    for (int k = 0; k < 2; k++) {
        expect_state(ids[k], "running", 30);
    }
    release("release");
    for (int k = 0; k < 2; k++) {
        json_t *j = wait_state(ids[k], "completed", 60);
        assert_non_null(j);
        assert_int_equal(json_integer_value(json_object_get(j, "retries")), 0);
        json_decref(j);
    }
    /* Each job's process started exactly once. */
    assert_int_equal(count_markers(p0), 1);
    assert_int_equal(count_markers(p1), 1);
}

static void test_retries_really_rerun(void **state)
{
    /* A job that fails is retried (max_retries 2): three real runs, even
     * when a retry lands on the node where the last attempt just failed. */
    char body[1024];
    snprintf(body, sizeof body,
             "{\"name\":\"flaky\",\"gpus\":1,\"gpu_type\":\"A100 80GB SXM\",\"max_retries\":2,"
             "\"command\":[\"sh\",\"-c\",\"echo run >> %s/attempts-$CORRAL_JOB_ID; exit 1\"]}",
             E.dir);
    long long id = submit(body);
    json_t *j = wait_state(id, "failed", 60);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "retries")), 2);
    json_decref(j);
    char path[400];
    snprintf(path, sizeof path, "%s/attempts-%lld", E.dir, id);
    char *t = slurp(path);
    assert_non_null(t);
    int runs = 0;
    for (char *p = t; (p = strstr(p, "run")) != NULL; p += 3) {
        runs++;
    }
    free(t);
    assert_int_equal(runs, 3);
}

/* The "state" member of GET path's answer into buf ("" when none). */
static const char *get_state(const char *path, char *buf, size_t len)
{
    long code;
    json_t *j = api("GET", path, NULL, &code);
    const char *st = json_string_value(json_object_get(j, "state"));
    snprintf(buf, len, "%s", st ? st : "");
    json_decref(j);
    return buf;
}

/* GET a node's state into buf ("" when unknown). */
static const char *node_state(const char *name, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/nodes/%s", name);
    return get_state(path, buf, len);
}

static int wait_node_state(const char *name, const char *want, double secs)
{
    char st[32];
    double end = now_s() + secs;
    while (now_s() < end) {
        if (strcmp(node_state(name, st, sizeof st), want) == 0) {
            return 1;
        }
        usleep(50000);
    }
    return 0;
}

/* The first node of a job's placement into buf ("" when not placed). */
static const char *job_node(long long id, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/jobs/%lld", id);
    long code;
    json_t *j = api("GET", path, NULL, &code);
    const char *n = json_string_value(
        json_object_get(json_array_get(json_object_get(j, "placement"), 0), "node"));
    snprintf(buf, len, "%s", n ? n : "");
    json_decref(j);
    return buf;
}

/* Whether the NUL-separated file at path holds the entry want. */
static int has_entry(const char *path, const char *want)
{
    FILE *f = fopen(path, "r");
    char buf[8192];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) {
        fclose(f);
    }
    buf[n] = '\0';
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
        if (strcmp(buf + i, want) == 0) {
            return 1;
        }
    }
    return 0;
}

/* The node's pid of job id's process on agent a<node> whose pid in its own
 * PID namespace is nspid (the agent runs each job in one: what the job
 * writes as $$ is that pid); -1 when none. */
static int host_pid(long long id, int node, int nspid)
{
    char want_job[64], want_node[32], want_ns[32];
    snprintf(want_job, sizeof want_job, "CORRAL_JOB_ID=%lld", id);
    snprintf(want_node, sizeof want_node, "CORRAL_NODE=a%d", node);
    snprintf(want_ns, sizeof want_ns, "\t%d\n", nspid);
    DIR *d = opendir("/proc");
    struct dirent *e;
    int found = -1;
    while (found < 0 && d && (e = readdir(d)) != NULL) {
        char path[300];
        if (e->d_name[0] < '0' || e->d_name[0] > '9') {
            continue;
        }
        snprintf(path, sizeof path, "/proc/%s/environ", e->d_name);
        if (!has_entry(path, want_job) || !has_entry(path, want_node)) {
            continue;
        }
        snprintf(path, sizeof path, "/proc/%s/status", e->d_name);
        char *st = slurp(path);
        const char *ns = st ? strstr(st, "\nNSpid:") : NULL;
        const char *eol = ns ? strchr(ns + 1, '\n') : NULL;
        /* the last field of NSpid is the pid in the job's own namespace */
        if (eol && eol - ns > (ptrdiff_t)strlen(want_ns) &&
            strncmp(eol - strlen(want_ns) + 1, want_ns, strlen(want_ns)) == 0) {
            found = atoi(e->d_name);
        }
        free(st);
    }
    if (d) {
        closedir(d);
    }
    return found;
}

/* Job id's process on the node's side, by the "NODE PID" line it wrote to
 * path; -1 when not yet. */
static int marker_pid(const char *path, long long id, int *node)
{
    char *t = slurp(path);
    int pid = -1;
    if (t && t[1] == 'a' && strchr(t + 1, '\n')) {
        *node = t[2] - '0';
        pid = host_pid(id, *node, atoi(t + 4));
    }
    free(t);
    return pid;
}

/* marker_pid, polled until it is found or secs pass. */
static int wait_marker_pid(const char *path, long long id, int *node, double secs)
{
    int pid = -1;
    double end = now_s() + secs;
    while (pid < 0 && now_s() < end) {
        pid = marker_pid(path, id, node);
        usleep(20000);
    }
    return pid;
}

static void test_lost_node_stays_lost_across_restart(void **state)
{
    /* Node a2 dies and is marked lost; the controller restarts. */
    kill_wait(&E.agents[2], SIGKILL);
    kill_jobs_of(2);
    assert_true(wait_node_state("a2", "lost", 30));
    kill_wait(&E.ctl, SIGKILL);
    start_controller();
    wait_healthy(30);
    char st[32];
    assert_string_equal(node_state("a2", st, sizeof st), "lost");
    assert_true(wait_nodes_up(2, 30));
    /* Three whole-node jobs, two live nodes: one waits, none goes to a2. */
    long long ids[3];
    for (int k = 0; k < 3; k++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"name\":\"fill\",\"gpus\":2,\"gpu_type\":\"A100 80GB SXM\","
                 "\"command\":[\"sh\",\"-c\",\"while [ ! -e %s/release-fill ]; do sleep 0.05; "
                 "done\"]}",
                 E.dir);
        ids[k] = submit(body);
    }
    int running = 0;
    double end = now_s() + 30;
    while (running < 2 && now_s() < end) {
        running = 0;
        for (int k = 0; k < 3; k++) {
            char n[32];
            running += *job_node(ids[k], n, sizeof n) != '\0';
        }
        usleep(50000);
    }
    assert_int_equal(running, 2);
    usleep(1500000); /* scheduler cycles run every few ms: time to misplace one */
    for (int k = 0; k < 3; k++) {
        char n[32];
        assert_string_not_equal(job_node(ids[k], n, sizeof n), "a2");
    }
    assert_string_equal(node_state("a2", st, sizeof st), "lost");
    /* a2 reports again: up, and the waiting job runs there. */
    start_agent(2);
    assert_true(wait_node_state("a2", "up", 30));
    end = now_s() + 30;
    int on_a2 = 0;
    while (!on_a2 && now_s() < end) {
        for (int k = 0; k < 3; k++) {
            char n[32];
            on_a2 |= strcmp(job_node(ids[k], n, sizeof n), "a2") == 0;
        }
        usleep(50000);
    }
    assert_true(on_a2);
    release("release-fill");
    for (int k = 0; k < 3; k++) {
        expect_state(ids[k], "completed", 60);
    }
}

static void test_fencing_on_return(void **state)
{
    /* The first run ignores SIGTERM and records where it runs; a second run
     * (after the requeue) records itself and waits for release. */
    char body[4096];
    snprintf(body, sizeof body,
             "{\"name\":\"fenced\",\"gpus\":2,\"gpu_type\":\"A100 80GB SXM\","
             "\"max_retries\":0,\"command\":[\"sh\",\"-c\",\"if [ -e %s/fence-first ]; then "
             "echo \\\"$CORRAL_NODE $$\\\" > %s/fence-second.tmp && mv %s/fence-second.tmp "
             "%s/fence-second; while [ ! -e %s/release-fence ]; do sleep 0.05; done; exit 0; fi; "
             "trap '' TERM; echo \\\"$CORRAL_NODE $$\\\" > %s/fence-first.tmp && "
             "mv %s/fence-first.tmp %s/fence-first; while :; do sleep 0.05; done\"]}",
             E.dir, E.dir, E.dir, E.dir, E.dir, E.dir, E.dir, E.dir);
    long long id = submit(body);
    char first[400], second[400];
    snprintf(first, sizeof first, "%s/fence-first", E.dir);
    snprintf(second, sizeof second, "%s/fence-second", E.dir);
    int victim = -1, other = -1;
    int pid = wait_marker_pid(first, id, &victim, 30);
    assert_true(pid > 1 && victim >= 0 && victim < MAX_AGENTS);
    /* Only the agent dies (a partition, a crash): its job keeps running. */
    kill_wait(&E.agents[victim], SIGKILL);
    char vname[8];
    snprintf(vname, sizeof vname, "a%d", victim);
    assert_true(wait_node_state(vname, "lost", 30));
    int pid2 = wait_marker_pid(second, id, &other, 30);
    assert_true(pid2 > 1);
    assert_int_not_equal(other, victim);
    assert_int_equal(kill(pid, 0), 0); /* runs twice now: the node is away */
    /* The node comes back: the old run is killed at once (it ignores
     * SIGTERM, so a graceful stop would leave it running for grace_s). */
    start_agent(victim);
    assert_true(wait_pid_gone(pid, 5));
    char path[400];
    snprintf(path, sizeof path, "%s/agent-%s.log", E.dir, vname);
    char *log = slurp(path);
    assert_non_null(log);
    assert_non_null(strstr(log, "fenced"));
    free(log);
    /* The job lives on where it was placed again, and was not failed. */
    char n[32];
    snprintf(vname, sizeof vname, "a%d", other);
    assert_string_equal(job_node(id, n, sizeof n), vname);
    release("release-fence");
    json_t *j = wait_state(id, "completed", 60);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "retries")), 0);
    json_decref(j);
    assert_true(wait_nodes_up(MAX_AGENTS, 30));
}

static void test_gpu_vanishes_at_reregistration(void **state)
{
    char body[2048];
    snprintf(
        body, sizeof body,
        "{\"name\":\"twogpu\",\"gpus\":2,\"gpu_type\":\"A100 80GB SXM\","
        "\"command\":[\"sh\",\"-c\",\"echo \\\"$CORRAL_NODE $$\\\" > %s/vanish-$CORRAL_JOB_ID.tmp "
        "&& mv %s/vanish-$CORRAL_JOB_ID.tmp %s/vanish-$CORRAL_JOB_ID; "
        "while [ ! -e %s/release-vanish ]; do sleep 0.05; done\"]}",
        E.dir, E.dir, E.dir, E.dir);
    long long id = submit(body);
    char marker[400];
    snprintf(marker, sizeof marker, "%s/vanish-%lld", E.dir, id);
    int victim = -1;
    int pid = wait_marker_pid(marker, id, &victim, 30);
    assert_true(pid > 1 && victim >= 0 && victim < MAX_AGENTS);
    /* The agent restarts and finds one GPU of two (index 1 is gone). */
    kill_wait(&E.agents[victim], SIGKILL);
    start_agent_gpus(victim, "sim:1xA100 80GB SXM");
    char path[64];
    snprintf(path, sizeof path, "/v1/jobs/%lld", id);
    int ended = 0;
    double end = now_s() + 30;
    while (!ended && now_s() < end) {
        long code;
        json_t *j = api("GET", path, NULL, &code);
        json_t *ev;
        size_t i;
        json_array_foreach(json_object_get(j, "events"), i, ev)
        {
            const char *why = json_string_value(json_object_get(ev, "why"));
            ended |= why && strstr(why, "GPU 1 vanished") != NULL;
        }
        json_decref(j);
        usleep(50000);
    }
    assert_true(ended);
    /* Not running there any more; the GPU is out of use. */
    char vname[8], n[32], st[32];
    snprintf(vname, sizeof vname, "a%d", victim);
    assert_string_not_equal(job_node(id, n, sizeof n), vname);
    assert_true(wait_pid_gone(pid, 10));
    (void)st;
    release("release-vanish");
    expect_state(id, "completed", 60);
    /* The GPU is back with the next registration. */
    kill_wait(&E.agents[victim], SIGTERM);
    start_agent(victim);
    assert_true(wait_nodes_up(MAX_AGENTS, 30));
}

/* The controller stopped between storing a node's loss and requeueing its
 * jobs (two commits): at the next start the node is lost with a job still
 * "running" on it. The job must be requeued although the node never comes
 * back. The store is put in that state by hand while all are down. */
static void test_lost_at_start_requeues(void **state)
{
    char body[2048];
    snprintf(body, sizeof body,
             "{\"name\":\"lostart\",\"gpus\":2,\"gpu_type\":\"A100 80GB SXM\","
             "\"command\":[\"sh\",\"-c\",\"echo \\\"$CORRAL_NODE $$\\\" > %s/lostart.tmp "
             "&& mv %s/lostart.tmp %s/lostart; "
             "while [ ! -e %s/release-lostart ]; do sleep 0.05; done\"]}",
             E.dir, E.dir, E.dir, E.dir);
    long long id = submit(body);
    char marker[400];
    snprintf(marker, sizeof marker, "%s/lostart", E.dir);
    int victim = -1;
    int pid = wait_marker_pid(marker, id, &victim, 30);
    assert_true(pid > 1 && victim >= 0 && victim < MAX_AGENTS);
    kill_wait(&E.ctl, SIGKILL);
    kill_wait(&E.agents[victim], SIGKILL);
    kill_jobs_of(victim);
    unlink(marker);
    char db_path[400], sql[200];
    snprintf(db_path, sizeof db_path, "%s/corral.db", E.ctl_state);
    snprintf(sql, sizeof sql,
             "UPDATE objects SET doc = json_set(doc, '$.lost', json('true')) "
             "WHERE kind = 'node' AND key = 'a%d'",
             victim);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_changes(db), 1);
    sqlite3_close(db);
    start_controller();
    wait_healthy(30);
    char vname[8], n[32], st[32];
    snprintf(vname, sizeof vname, "a%d", victim);
    assert_string_equal(node_state(vname, st, sizeof st), "lost");
    /* Requeued and run elsewhere (the other nodes have room). */
    int moved = 0;
    double end = now_s() + 30;
    while (!moved && now_s() < end) {
        job_node(id, n, sizeof n);
        moved = *n && strcmp(n, vname) != 0;
        usleep(50000);
    }
    assert_true(moved);
    release("release-lostart");
    expect_state(id, "completed", 60);
    start_agent(victim);
    assert_true(wait_nodes_up(MAX_AGENTS, 30));
}

/* ------------------------------------------------------------------------ */
/* Commit first on a full disk.                                              */

/* Fill the controller's tmpfs; the filler's path into path. */
static void fill_disk(char *path, size_t len)
{
    snprintf(path, len, "%s/filler", E.ctl_state);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    char buf[65536];
    memset(buf, 'x', sizeof buf);
    while (write(fd, buf, sizeof buf) > 0) {
    }
    while (write(fd, buf, 1) > 0) { /* the last partial page too */
    }
    assert_int_equal(errno, ENOSPC);
    close(fd);
}

/* Lines of the file at path that hold needle. */
static int file_count(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    while (f && getline(&line, &cap, f) > 0) {
        n += strstr(line, needle) != NULL;
    }
    free(line);
    if (f) {
        fclose(f);
    }
    return n;
}

/* Lines of the controller's log that hold needle. */
static int log_count(const char *needle)
{
    char path[400];
    snprintf(path, sizeof path, "%s/controller.log", E.dir);
    return file_count(path, needle);
}

/* Answers 507 (disk full) the controller gave to agents' status reports,
 * from its /metrics. */
static long status_507(void)
{
    char url[256];
    snprintf(url, sizeof url, "%s/metrics", E.server);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_cleanup(h);
    fclose(f);
    static const char key[] = "corral_api_request_duration_seconds_count{route=\"/v1/agents/"
                              "{node}/status\",method=\"POST\",code=\"507\"} ";
    const char *p = rc == CURLE_OK && buf ? strstr(buf, key) : NULL;
    long n = p ? atol(p + strlen(key)) : 0;
    free(buf);
    return n;
}

static int wait_log_count(const char *needle, int want, double secs)
{
    double end = now_s() + secs;
    while (now_s() < end) {
        if (log_count(needle) >= want) {
            return 1;
        }
        usleep(50000);
    }
    return log_count(needle) >= want;
}

/* Restart the controller; lost_after: its --lost-after. On a full disk an
 * agent's reports are refused and it backs off up to 5 s between them: the
 * disk-full tests give it longer than the fixture's 3 s, so that no node
 * is taken for lost meanwhile. */
static void restart_controller(int sig, const char *lost_after)
{
    E.lost_after = lost_after;
    kill_wait(&E.ctl, sig);
    start_controller();
    assert_true(wait_healthy(30));
}

static const char *job_state(long long id, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/jobs/%lld", id);
    return get_state(path, buf, len);
}

static int count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    int n = 0, ch;
    while (f && (ch = fgetc(f)) != EOF) {
        n += ch == '\n';
    }
    if (f) {
        fclose(f);
    }
    return n;
}

/* A job's end reported by its agent while the disk is full: refused (507),
 * the job stays running in memory and in the API, the agent reports it
 * again, and once there is room the end is stored and survives a restart.
 * The refusals go on for longer than twice the node lease (3 s): a refusal
 * is an answer, so the agent asks again within the lease (its backoff is at
 * most a third of it) and a second job on the same node, still running,
 * is never stopped by the lease nor run twice. (With a backoff up to 5 s,
 * the agent's lease ran out between two refusals and the other job was
 * stopped and requeued: it ran twice.) */
static void test_report_refused_disk_full(void **state)
{
    if (!E.tmpfs) {
        skip();
    }
    restart_controller(SIGTERM, NULL); /* a fresh WAL: every commit needs new space */
    assert_true(wait_nodes_up(MAX_AGENTS, 30));
    char body[4096], marker[400], rel[400], runs[400], filler[400], st[32];
    char krel[400], kruns[400], kmarker[400];
    snprintf(marker, sizeof marker, "%s/dfend", E.dir);
    snprintf(rel, sizeof rel, "%s/release-dfend", E.dir);
    snprintf(runs, sizeof runs, "%s/dfend-runs", E.dir);
    snprintf(kmarker, sizeof kmarker, "%s/dfkeep", E.dir);
    snprintf(krel, sizeof krel, "%s/release-dfkeep", E.dir);
    snprintf(kruns, sizeof kruns, "%s/dfkeep-runs", E.dir);
    snprintf(body, sizeof body,
             "{\"name\":\"dfend\",\"gpus\":1,\"command\":[\"sh\",\"-c\",\"echo run >> %s; "
             "echo \\\"$CORRAL_NODE $$\\\" > %s.tmp && mv %s.tmp %s; "
             "while [ ! -e %s ]; do sleep 0.05; done; echo done >> %s\"]}",
             runs, marker, marker, marker, rel, runs);
    long long id = submit(body);
    int node = -1;
    int pid = wait_marker_pid(marker, id, &node, 30);
    assert_true(pid > 1);
    expect_state(id, "running", 30);
    /* Its neighbour: the same node, running all through. */
    snprintf(body, sizeof body,
             "{\"name\":\"dfkeep\",\"gpus\":1,\"nodelist\":\"a%d\",\"command\":[\"sh\",\"-c\","
             "\"echo run >> %s; echo \\\"$CORRAL_NODE $$\\\" > %s.tmp && mv %s.tmp %s; "
             "while [ ! -e %s ]; do sleep 0.05; done; echo done >> %s\"]}",
             node, kruns, kmarker, kmarker, kmarker, krel, kruns);
    long long kid = submit(body);
    int knode = -1;
    assert_true(wait_marker_pid(kmarker, kid, &knode, 30) > 1);
    assert_int_equal(knode, node);
    expect_state(kid, "running", 30);

    const char *refused = "job ends was not stored";
    const char *expired = "node lease expired";
    int before = log_count(refused);
    char alog[400];
    snprintf(alog, sizeof alog, "%s/agent-a%d.log", E.dir, node);
    int expired_before = file_count(alog, expired);
    fill_disk(filler, sizeof filler);
    touch(rel); /* the job exits 0 */
    double end = now_s() + 30;
    while (count_lines(runs) < 2 && now_s() < end) {
        usleep(20000);
    }
    assert_int_equal(count_lines(runs), 2); /* it ended */
    /* Its agent reports the end and is refused (507, as the report may
     * have been already): after a refusal the job is still running. */
    long refusals = status_507();
    end = now_s() + 60;
    while (status_507() < refusals + 1 && now_s() < end) {
        usleep(20000);
    }
    assert_string_equal(job_state(id, st, sizeof st), "running");
    assert_true(status_507() >= refusals + 1);
    /* Refused, and reported again by the agent (its retry). */
    assert_true(wait_log_count(refused, before + 2, 60));
    assert_string_equal(job_state(id, st, sizeof st), "running");
    /* The disk stays full for more than twice the lease. */
    end = now_s() + 8;
    while (now_s() < end) {
        usleep(100000);
    }
    assert_true(log_count(refused) >= before + 4); /* still asked again, within the lease */
    assert_int_equal(file_count(alog, expired), expired_before);
    assert_string_equal(job_state(kid, st, sizeof st), "running");

    assert_int_equal(unlink(filler), 0);
    expect_state(id, "completed", 60);
    touch(krel);
    expect_state(kid, "completed", 60);
    assert_int_equal(file_count(alog, expired), expired_before);
    restart_controller(SIGKILL, NULL);
    assert_string_equal(job_state(id, st, sizeof st), "completed");
    assert_string_equal(job_state(kid, st, sizeof st), "completed");
    assert_int_equal(count_lines(runs), 2);  /* one run, one end */
    assert_int_equal(count_lines(kruns), 2); /* the neighbour too: never stopped, never rerun */
    assert_true(wait_nodes_up(MAX_AGENTS, 30));
}

/* A start the scheduler could not store (the disk filled while the job
 * waited for its begin time) reaches no agent: the job stays pending, is
 * tried again, and runs once there is room. */
static void test_start_refused_disk_full(void **state)
{
    if (!E.tmpfs) {
        skip();
    }
    restart_controller(SIGTERM, "60");
    assert_true(wait_nodes_up(MAX_AGENTS, 30));
    char body[4096], rel[400], runs[400], filler[400], st[32];
    snprintf(rel, sizeof rel, "%s/release-dfstart", E.dir);
    snprintf(runs, sizeof runs, "%s/dfstart-runs", E.dir);
    long long begin = (long long)time(NULL) + 4;
    snprintf(body, sizeof body,
             "{\"name\":\"dfstart\",\"gpus\":1,\"begin_unix\":%lld,\"command\":[\"sh\",\"-c\","
             "\"echo run >> %s; while [ ! -e %s ]; do sleep 0.05; done\"]}",
             begin, runs, rel);
    long long id = submit(body);
    fill_disk(filler, sizeof filler);
    /* (the begin time is seconds away: the job is still waiting for it) */
    assert_string_equal(job_state(id, st, sizeof st), "pending");

    /* Its begin time comes; the scheduler places it, cannot store the
     * start, takes it back and tries again a second later. Meanwhile no
     * agent is ever given it. */
    while ((long long)time(NULL) < begin + 3) {
        assert_false(file_exists(runs));
        usleep(50000);
    }
    assert_false(file_exists(runs));
    const char *refused = "starts not stored";
    assert_true(wait_log_count(refused, 2, 60));
    assert_true(wait_log_count(refused, log_count(refused) + 1, 30)); /* and again */
    assert_false(file_exists(runs));                                  /* no agent ever started it */
    assert_string_equal(job_state(id, st, sizeof st), "pending");

    assert_int_equal(unlink(filler), 0);
    expect_state(id, "running", 60);
    double end = now_s() + 30;
    while (!file_exists(runs) && now_s() < end) {
        usleep(20000);
    }
    touch(rel);
    expect_state(id, "completed", 60);
    restart_controller(SIGKILL, NULL);
    assert_string_equal(job_state(id, st, sizeof st), "completed");
    assert_int_equal(count_lines(runs), 1);
    assert_true(wait_nodes_up(MAX_AGENTS, 30));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gang_torchrun_env),
        cmocka_unit_test(test_agent_sigkill_requeue),
        cmocka_unit_test(test_controller_restart_adopts),
        cmocka_unit_test(test_retries_really_rerun),
        cmocka_unit_test(test_lost_node_stays_lost_across_restart),
        cmocka_unit_test(test_fencing_on_return),
        cmocka_unit_test(test_gpu_vanishes_at_reregistration),
        cmocka_unit_test(test_lost_at_start_requeues),
        cmocka_unit_test(test_report_refused_disk_full),
        cmocka_unit_test(test_start_refused_disk_full),
    };
    if (getenv("TEST_FILTER")) {
        cmocka_set_test_filter(getenv("TEST_FILTER")); /* e.g. "test_fencing*" */
    }
    return cmocka_run_group_tests(tests, setup, teardown);
}
