/*
 * reap.h - for C tests that start real agents in a temporary directory:
 * run tests/integration/reap.sh on it (stray jobs, the agents' cgroups,
 * then the directory), at the end of the tests or from a SIGTERM/SIGINT
 * handler (meson's timeout signals the process group and SIGKILLs it
 * 0.5 s later: reap.sh then runs in a session of its own and the test
 * exits at once). Needs CORRAL_SRC (meson's test environment sets it);
 * without it only the directory is removed. CORRAL_KEEP keeps it. Used by
 * test_multi_agent.c, test_agent_e2e.c and the controller's tests.
 */
#ifndef CR_TEST_REAP_H
#define CR_TEST_REAP_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* reap.sh --rm DIR; detached: in a new session, not waited for. */
static inline void cr_test_reap(const char *dir, int detached)
{
    const char *src = getenv("CORRAL_SRC");
    char script[600];
    snprintf(script, sizeof script, "%s/tests/integration/reap.sh", src ? src : ".");
    pid_t p = fork();
    if (p == 0) {
        if (detached) {
            setsid();
        }
        if (src) {
            execl(script, script, "--rm", dir, (char *)NULL);
        } else if (!getenv("CORRAL_KEEP")) {
            execl("/bin/rm", "rm", "-rf", dir, (char *)NULL);
        }
        _exit(127);
    }
    if (p > 0 && !detached) {
        int st;
        waitpid(p, &st, 0);
    }
}

/*
 * sig to pid, then wait for it at most grace_s seconds; one still there is
 * named on stderr and killed (SIGKILL). Returns its wait status (a killed
 * one's: WIFSIGNALED, SIGKILL). A daemon hung in its exit (a sanitizer's
 * leak check) never holds a test to meson's timeout.
 */
static inline int cr_test_stop(pid_t pid, int sig, int grace_s)
{
    int st = 0;
    kill(pid, sig);
    if (sig != SIGKILL && sig != SIGCONT) {
        kill(pid, SIGCONT); /* a SIGSTOPped one */
    }
    for (int i = 0; i < grace_s * 20; i++) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid || w < 0) {
            return st;
        }
        usleep(50 * 1000);
    }
    fprintf(stderr, "cleanup: pid %d still there %d s after signal %d: SIGKILL\n", (int)pid,
            grace_s, sig);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return st;
}

/*
 * Tests that start and stop daemons test by test (a failed assertion ends
 * a test before its own cleanup): each directory is tracked with its
 * daemon's pid (0: stopped) while it exists; cr_test_reap_live() kills and
 * removes what is left (a group teardown, the signal handler below).
 */
#define CR_TEST_LIVE_MAX 16

typedef struct cr_test_live {
    char dir[256];
    pid_t pid;
} cr_test_live;

static inline cr_test_live *cr_test_live_tab(void)
{
    static cr_test_live tab[CR_TEST_LIVE_MAX];
    return tab;
}

/* dir's daemon is now pid (0: none); dir is tracked from the first call. */
static inline void cr_test_track(const char *dir, pid_t pid)
{
    cr_test_live *t = cr_test_live_tab(), *empty = NULL;
    for (int i = 0; i < CR_TEST_LIVE_MAX; i++) {
        if (strcmp(t[i].dir, dir) == 0) {
            t[i].pid = pid;
            return;
        }
        if (!t[i].dir[0] && !empty) {
            empty = &t[i];
        }
    }
    if (empty) {
        snprintf(empty->dir, sizeof empty->dir, "%s", dir);
        empty->pid = pid;
    }
}

/* dir was removed by the test itself. */
static inline void cr_test_untrack(const char *dir)
{
    cr_test_live *t = cr_test_live_tab();
    for (int i = 0; i < CR_TEST_LIVE_MAX; i++) {
        if (t[i].dir[0] && strcmp(t[i].dir, dir) == 0) {
            t[i].dir[0] = '\0';
        }
    }
}

/* Every tracked daemon killed, every tracked directory reaped. */
static inline void cr_test_reap_live(int detached)
{
    cr_test_live *t = cr_test_live_tab();
    for (int i = 0; i < CR_TEST_LIVE_MAX; i++) {
        if (t[i].pid > 0) {
            kill(t[i].pid, SIGKILL);
            waitpid(t[i].pid, NULL, 0);
            t[i].pid = 0;
        }
        if (t[i].dir[0]) {
            cr_test_reap(t[i].dir, detached);
            t[i].dir[0] = '\0';
        }
    }
}

/* For signal(SIGTERM, ...) and SIGINT: meson's timeout, ^C. */
static inline void cr_test_on_signal(int sig)
{
    cr_test_reap_live(1);
    _exit(128 + sig);
}

#endif
