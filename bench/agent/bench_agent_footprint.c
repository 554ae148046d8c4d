/*
 * bench_agent_footprint.c - the agent's own cost: CPU share and RSS of a
 * 'corral agent' with 8 simulated GPUs, idle and with 8 jobs running, and
 * how long the 8 jobs take from the desired state to all reported running.
 * The controller is the test suite's mock (tests/agent/mock_ctl.c), so the
 * figures are the agent's alone. Needs CORRAL_BIN or ./build/corral.
 */
#include "mock_ctl.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* utime+stime of pid in seconds, and VmRSS in KiB. */
static void usage_of(pid_t pid, double *cpu_s, long *rss_kb)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    *cpu_s = 0;
    if (f && fgets(buf, sizeof buf, f)) {
        char *p = strrchr(buf, ')');
        unsigned long long ut = 0, st = 0;
        if (p &&
            sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2) {
            *cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
        }
    }
    if (f) {
        fclose(f);
    }
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    *rss_kb = 0;
    while (f && fgets(buf, sizeof buf, f)) {
        if (strncmp(buf, "VmRSS:", 6) == 0) {
            *rss_kb = atol(buf + 6);
        }
    }
    if (f) {
        fclose(f);
    }
}

/* Jobs started so far: the "R" lines of the agent's journal. */
static int started_count(const char *state)
{
    char path[256], line[8192];
    snprintf(path, sizeof path, "%s/jobs.journal", state);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && fgets(line, sizeof line, f)) {
        n += line[0] == 'R';
    }
    if (f) {
        fclose(f);
    }
    return n;
}

static void measure(pid_t pid, const char *what, double secs)
{
    double c0, c1;
    long r0, r1;
    usage_of(pid, &c0, &r0);
    double t0 = now_s();
    struct timespec ts = {(time_t)secs, 0};
    nanosleep(&ts, NULL);
    usage_of(pid, &c1, &r1);
    double t1 = now_s();
    printf("agent %-16s cpu=%.2f%% of one core  rss=%ld KiB  (over %.1f s)\n", what,
           100.0 * (c1 - c0) / (t1 - t0), r1, t1 - t0);
}

int main(void)
{
    const char *bin = getenv("CORRAL_BIN");
    if (!bin) {
        bin = "./build/corral";
    }
    char dir[] = "/tmp/corral-bench-agent-XXXXXX";
    if (!mkdtemp(dir)) {
        return 1;
    }
    char state[128], server[64];
    snprintf(state, sizeof state, "%s/state", dir);
    mock_ctl *m = mock_ctl_start();
    snprintf(server, sizeof server, "http://127.0.0.1:%d", m->port);
    int fds[2];
    if (pipe(fds) != 0) {
        return 1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        execl(bin, bin, "agent", "--server", server, "--join-token", "jt-secret", "--node", "bench",
              "--gpus", "sim:8xH100 SXM", "--listen", "127.0.0.1:0", "--state-dir", state,
              "--kill-on-exit", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char line[256] = "";
    struct pollfd pf = {fds[0], POLLIN, 0};
    if (poll(&pf, 1, 20000) <= 0 || read(fds[0], line, sizeof line - 1) <= 0) {
        fprintf(stderr, "bench: agent did not start (%s)\n", bin);
        return 1;
    }
    double end = now_s() + 20;
    while (now_s() < end) {
        pthread_mutex_lock(&m->mu);
        int st = m->statuses;
        pthread_mutex_unlock(&m->mu);
        if (st > 0) {
            break;
        }
        usleep(10000);
    }
    measure(pid, "idle", 5);
    json_t *jobs = json_array();
    for (int i = 0; i < 8; i++) {
        json_array_append_new(jobs, json_pack("{s:i,s:[ss],s:[i],s:s}", "job", i + 1, "command",
                                              "sleep", "600", "gpus", i, "action", "run"));
    }
    double t0 = now_s();
    mock_ctl_set_jobs(m, jobs);
    while (started_count(state) < 8 && now_s() < t0 + 30) {
        usleep(500);
    }
    printf("agent 8 jobs: desired state -> all 8 started in %.1f ms\n", (now_s() - t0) * 1000);
    measure(pid, "with 8 jobs", 5);
    mock_ctl_set_jobs(m, json_array());
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    mock_ctl_stop(m);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 1;
}
