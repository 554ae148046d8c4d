/*
 * test_agent_pidns.c - plain-process jobs in a PID namespace of their own
 * (iso_pidns.c, cr_proc.h): the job lists only its own processes in
 * /proc and reads "corral-init" as pid 1's command line (not the agent's,
 * nor its environment), its exit code and
 * signal come back as without the namespace, a stop's SIGTERM reaches it
 * (it is not pid 1), a stop's SIGKILL and the job's own end take every
 * process of the namespace with it (a setsid() child too), a restarted
 * agent re-adopts it and finds the job's process, and the probe says why
 * when the kernel refuses (no CAP_SYS_ADMIN). Needs root, which is what
 * the namespaces need: without it the test is skipped (77).
 */
#include "cr_error.h"
#include "cr_iso.h"
#include "cr_proc.h"
#include "cr_time.h"
#include "proc_test.h"

#include <dirent.h>
#include <linux/capability.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[64];
static cr_iso iso;
static char mark[4][32]; /* "sleep" arguments of this run (several runs may overlap) */

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/corral-pidns-XXXXXX");
    if (!mkdtemp(dir)) {
        return -1;
    }
    memset(&iso, 0, sizeof iso);
    cr_iso_probe_pidns(&iso, 1);
    for (int i = 0; i < 4; i++) {
        snprintf(mark[i], sizeof mark[i], "%d%d", 3141 + i, (int)getpid());
    }
    return 0;
}

static int teardown(void **state)
{
    return cr_test_rm_rf(dir);
}

static void spec_sh(cr_job_spec *s, int64_t job, const char *script)
{
    cr_test_spec_sh(s, job, script);
    s->array_index = -1;
}

/* Wait (up to 20 s) for the shim and take in its end. */
static void run_to_end(cr_proc *p)
{
    int st = 0;
    pid_t w = 0;
    for (int64_t end = cr_mono_ns() + 20 * CR_NS_PER_SEC; w == 0 && cr_mono_ns() < end;) {
        w = waitpid(p->pid, &st, WNOHANG);
        if (w == 0) {
            usleep(10000);
        }
    }
    if (w != p->pid) {
        kill(-p->pid, SIGKILL);
        waitpid(p->pid, &st, 0);
        fail_msg("job %lld did not end within 20 s", (long long)p->job);
    }
    cr_proc_reaped(p, dir, st);
}

static const char *log_of(int64_t job, const char *stream)
{
    char *path = cr_proc_log_path(dir, job, stream);
    const char *text = cr_test_slurp(path);
    free(path);
    return text ? text : "";
}

/* Processes of the node whose command line is "sleep <arg>". */
static int sleeping(const char *arg)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;
    char want[64];
    int wl = snprintf(want, sizeof want, "sleep%c%s", '\0', arg);
    while (d && (e = readdir(d)) != NULL) {
        char path[300], buf[128];
        if (e->d_name[0] < '0' || e->d_name[0] > '9') {
            continue;
        }
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) {
            continue;
        }
        size_t r = fread(buf, 1, sizeof buf, f);
        fclose(f);
        n += r >= (size_t)wl + 1 && memcmp(buf, want, (size_t)wl + 1) == 0;
    }
    if (d) {
        closedir(d);
    }
    return n;
}

static void wait_log(int64_t job, const char *text)
{
    for (int64_t end = cr_mono_ns() + 20 * CR_NS_PER_SEC; cr_mono_ns() < end;) {
        if (strstr(log_of(job, "out"), text)) {
            return;
        }
        usleep(10000);
    }
    fail_msg("job %lld never printed '%s' (out: %s, err: %s)", (long long)job, text,
             log_of(job, "out"), log_of(job, "err"));
}

static void test_probe(void **state)
{
    (void)state;
    assert_int_equal(iso.pidns, 1); /* root here: the kernel allows it */
    assert_string_equal(iso.why_pidns, "");
    cr_iso off;
    memset(&off, 0, sizeof off);
    cr_iso_probe_pidns(&off, 0);
    assert_int_equal(off.pidns, 0);
    assert_non_null(strstr(off.why_pidns, "--job-pid-namespace off"));
    /* Without CAP_SYS_ADMIN (as in an unprivileged container) it says so. */
    pid_t c = fork();
    if (c == 0) {
        struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
        struct __user_cap_data_struct d[2];
        memset(d, 0, sizeof d);
        if (syscall(SYS_capget, &h, d) != 0) {
            _exit(10);
        }
        d[CAP_SYS_ADMIN / 32].effective &= ~(1U << (CAP_SYS_ADMIN % 32));
        if (syscall(SYS_capset, &h, d) != 0) {
            _exit(11);
        }
        cr_iso x;
        memset(&x, 0, sizeof x);
        cr_iso_probe_pidns(&x, 1);
        _exit(x.pidns ? 12 : strstr(x.why_pidns, "CAP_SYS_ADMIN") ? 0 : 13);
    }
    int st = 0;
    assert_int_equal(waitpid(c, &st, 0), c);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* The job sees pid 1 (the init) and itself, nothing of the node. */
static void test_own_proc(void **state)
{
    (void)state;
    cr_job_spec s;
    cr_proc p;
    char err[256];
    spec_sh(&s, 30,
            "echo me=$$; for d in /proc/[0-9]*; do echo \"pid ${d#/proc/}\"; done; "
            "echo init=$(tr -d '\\0' < /proc/1/cmdline) env=$(tr -d '\\0' < /proc/1/environ); "
            "exit 4");
    assert_int_equal(cr_proc_spawn_iso(dir, "n", &s, &iso, &p, err, sizeof err), 0);
    assert_int_equal(p.pidns, 1);
    run_to_end(&p);
    assert_int_equal(p.exit_code, 4);
    assert_int_equal(p.signal, 0);
    cr_proc_fini(&p);
    assert_string_equal(log_of(30, "out"), "me=2\npid 1\npid 2\ninit=corral-init env=\n");

    /* Three tasks share the namespace (pids 2, 3, 4, in start order); the
     * first to fail is the job's status, the others are stopped. */
    cr_gang g = {.master_port = 29556,
                 .nnodes = 1,
                 .tasks_per_node = 3,
                 .world_size = 3,
                 .local_world_size = 3};
    snprintf(g.master_addr, sizeof g.master_addr, "127.0.0.1");
    spec_sh(&s, 36, "echo pid $$");
    s.has_gang = 1;
    s.gang = g;
    assert_int_equal(cr_proc_spawn_iso(dir, "n", &s, &iso, &p, err, sizeof err), 0);
    run_to_end(&p);
    assert_int_equal(p.exit_code, 0);
    cr_proc_fini(&p);
    for (int t = 0; t < 3; t++) {
        char path[128], want[32];
        snprintf(path, sizeof path, "%s/logs/36/%d.out", dir, t);
        snprintf(want, sizeof want, "pid %d\n", t + 2);
        const char *got = cr_test_slurp(path);
        assert_non_null(got);
        assert_string_equal(got, want);
    }
    spec_sh(&s, 38, "[ $RANK = 1 ] && exit 5; sleep 30");
    s.has_gang = 1;
    s.gang = g;
    int64_t t0 = cr_mono_ns();
    assert_int_equal(cr_proc_spawn_iso(dir, "n", &s, &iso, &p, err, sizeof err), 0);
    run_to_end(&p);
    assert_int_equal(p.exit_code, 5);
    assert_true(cr_mono_ns() - t0 < 20 * CR_NS_PER_SEC);
    cr_proc_fini(&p);

    /* A signal is reported as the signal. */
    spec_sh(&s, 31, "kill -SEGV $$");
    assert_int_equal(cr_proc_spawn_iso(dir, "n", &s, &iso, &p, err, sizeof err), 0);
    run_to_end(&p);
    assert_int_equal(p.signal, SIGSEGV);
    assert_int_equal(p.exit_code, 128 + SIGSEGV);
    cr_proc_fini(&p);

    /* Its end ends the namespace: a child left behind in a session of its
     * own (out of the job's process group) goes with it. */
    char script[256];
    snprintf(script, sizeof script, "setsid sleep %s & echo up; exit 0", mark[0]);
    spec_sh(&s, 32, script);
    assert_int_equal(cr_proc_spawn_iso(dir, "n", &s, &iso, &p, err, sizeof err), 0);
    run_to_end(&p);
    assert_int_equal(p.exit_code, 0);
    cr_proc_fini(&p);
    assert_string_equal(log_of(32, "out"), "up\n");
    assert_int_equal(sleeping(mark[0]), 0);
}

/* System V IPC: a job's segments are its own. Job A makes a shared memory
 * segment and sees it; job B, at the same time, sees none, and its IPC
 * namespace is not the node's; a job that talks to the node's MPS daemon
 * (mps_pipe set) keeps the node's IPC namespace, which MPS needs. */
static void test_own_ipc(void **state)
{
    (void)state;
    cr_job_spec s;
    cr_proc a, b;
    char err[256], script[512], host_ns[64] = "";
    ssize_t hn = readlink("/proc/self/ns/ipc", host_ns, sizeof host_ns - 1);
    assert_true(hn > 0);
    host_ns[hn] = '\0';
    snprintf(
        script, sizeof script,
        "ipcmk -M 4096 >/dev/null || exit 3; echo seen=$(tail -n +2 /proc/sysvipc/shm | wc -l); "
        "echo up; while [ ! -e %s/ipc-done ]; do sleep 0.05; done",
        dir);
    spec_sh(&s, 40, script);
    assert_int_equal(cr_proc_spawn_iso(dir, "n", &s, &iso, &a, err, sizeof err), 0);
    wait_log(40, "up");
    spec_sh(&s, 41,
            "echo seen=$(tail -n +2 /proc/sysvipc/shm | wc -l) ns=$(readlink /proc/self/ns/ipc)");
    assert_int_equal(cr_proc_spawn_iso(dir, "n", &s, &iso, &b, err, sizeof err), 0);
    run_to_end(&b);
    assert_int_equal(b.exit_code, 0);
    cr_proc_fini(&b);
    char want[128];
    snprintf(want, sizeof want, "%s/ipc-done", dir); /* A ends before any check */
    FILE *f = fopen(want, "w");
    assert_non_null(f);
    fclose(f);
    run_to_end(&a);
    assert_int_equal(a.exit_code, 0);
    cr_proc_fini(&a);
    const char *got = log_of(41, "out");
    assert_non_null(strstr(got, "seen=0 ns=ipc:["));
    assert_null(strstr(got, host_ns));
    assert_string_equal(log_of(40, "out"), "seen=1\nup\n");

    spec_sh(&s, 42, "echo ns=$(readlink /proc/self/ns/ipc)");
    s.mps_pipe = dir; /* only whether it is set matters here */
    assert_int_equal(cr_proc_spawn_iso(dir, "n", &s, &iso, &b, err, sizeof err), 0);
    run_to_end(&b);
    assert_int_equal(b.exit_code, 0);
    cr_proc_fini(&b);
    snprintf(want, sizeof want, "ns=%s\n", host_ns);
    assert_string_equal(log_of(42, "out"), want);
}

static void test_stop(void **state)
{
    (void)state;
    cr_job_spec s;
    cr_proc p;
    char err[256];
    /* SIGTERM reaches the job's shell, which is not pid 1 of the
     * namespace (pid 1 would ignore a signal it has no handler for). */
    char script[256];
    snprintf(script, sizeof script, "sleep %s & echo up; wait", mark[1]);
    spec_sh(&s, 33, script);
    assert_int_equal(cr_proc_spawn_iso(dir, "n", &s, &iso, &p, err, sizeof err), 0);
    wait_log(33, "up");
    cr_proc_stop(&p, 30 * CR_NS_PER_SEC, cr_mono_ns());
    run_to_end(&p); /* well before the 30 s grace: SIGTERM did it */
    assert_int_equal(p.signal, SIGTERM);
    cr_proc_fini(&p);
    assert_int_equal(sleeping(mark[1]), 0);

    /* A signal sent to the job (scancel --signal) reaches its tasks; the
     * init ignores it as the shim does. */
    spec_sh(&s, 37, "trap 'echo usr1; exit 9' USR1; echo up; while :; do sleep 0.05; done");
    assert_int_equal(cr_proc_spawn_iso(dir, "n", &s, &iso, &p, err, sizeof err), 0);
    wait_log(37, "up");
    assert_int_equal(kill(-p.pid, SIGUSR1), 0);
    run_to_end(&p);
    assert_int_equal(p.exit_code, 9);
    assert_int_equal(p.signal, 0);
    cr_proc_fini(&p);
    assert_string_equal(log_of(37, "out"), "up\nusr1\n");

    /* A job that ignores SIGTERM and hides a child in a new session: the
     * SIGKILL after the grace period takes the whole namespace. */
    snprintf(script, sizeof script,
             "trap '' TERM; setsid sleep %s & echo up; while :; do sleep 0.05; done", mark[2]);
    spec_sh(&s, 34, script);
    assert_int_equal(cr_proc_spawn_iso(dir, "n", &s, &iso, &p, err, sizeof err), 0);
    wait_log(34, "up");
    for (int64_t end = cr_mono_ns() + 20 * CR_NS_PER_SEC;
         sleeping(mark[2]) != 1 && cr_mono_ns() < end;) {
        usleep(10000);
    }
    assert_int_equal(sleeping(mark[2]), 1);
    int64_t t = cr_mono_ns();
    cr_proc_stop(&p, 100 * CR_NS_PER_MS, t);
    cr_proc_tick(&p, dir, t + 10 * CR_NS_PER_MS, cr_mono_ns());
    assert_int_equal(p.state, CR_PROC_STOPPING);
    cr_proc_tick(&p, dir, t + 200 * CR_NS_PER_MS, cr_mono_ns());
    run_to_end(&p);
    assert_int_equal(p.signal, SIGKILL);
    cr_proc_fini(&p);
    assert_int_equal(sleeping(mark[2]), 0);
}

/* A restarted agent re-adopts the job: same shim, the namespace recorded,
 * the job's own process found (pid 2 in its namespace). */
static void test_readopt(void **state)
{
    (void)state;
    cr_job_spec s;
    cr_proc p;
    char err[256];
    spec_sh(&s, 35, "echo up; while :; do sleep 0.05; done");
    assert_int_equal(cr_proc_spawn_iso(dir, "n", &s, &iso, &p, err, sizeof err), 0);
    wait_log(35, "up");
    cr_proc *v = NULL;
    size_t n = 0;
    assert_int_equal(cr_proc_load_all(dir, &v, &n), 0);
    cr_proc *a = NULL;
    for (size_t i = 0; i < n; i++) {
        a = v[i].job == 35 ? &v[i] : a;
    }
    assert_non_null(a);
    assert_int_equal(a->state, CR_PROC_RUNNING);
    assert_true(a->adopted && a->pidns);
    assert_int_equal(a->pid, p.pid);
    assert_true(a->job_pid > 1);
    char path[64], want[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)a->job_pid);
    const char *status = cr_test_slurp(path);
    assert_non_null(status);
    snprintf(want, sizeof want, "NSpid:\t%d\t2\n", (int)a->job_pid);
    if (!strstr(status, want)) {
        fail_msg("adopted job_pid %d is not pid 2 of the job's namespace: %s", (int)a->job_pid,
                 status);
    }
    /* Stopped as an adopted job is: the end is read back from the journal. */
    cr_proc_stop(a, 5 * CR_NS_PER_SEC, cr_mono_ns());
    int st = 0;
    assert_int_equal(waitpid(p.pid, &st, 0), p.pid); /* still our child here */
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    int ended = 0;
    for (int64_t end = cr_mono_ns() + 20 * CR_NS_PER_SEC; !ended && cr_mono_ns() < end;) {
        ended = cr_proc_tick(a, dir, cr_mono_ns(), cr_mono_ns());
        usleep(10000);
    }
    assert_true(ended);
    assert_int_equal(a->signal, SIGTERM);
    assert_int_equal(a->exit_code, 128 + SIGTERM);
    for (size_t i = 0; i < n; i++) {
        cr_proc_fini(&v[i]);
    }
    free(v);
    cr_proc_fini(&p);
}

int main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "SKIP: PID namespaces need root\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe),   cmocka_unit_test(test_own_proc),
        cmocka_unit_test(test_own_ipc), cmocka_unit_test(test_stop),
        cmocka_unit_test(test_readopt),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
