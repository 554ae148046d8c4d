/*
 * reap.h - for C tests that start real agents in a temporary directory:
 * run tests/integration/reap.sh on it (stray jobs, the agents' cgroups,
 * then the directory), at the end of the tests or from a SIGTERM/SIGINT
 * handler (meson's timeout signals the process group and SIGKILLs it
 * 0.5 s later: reap.sh then runs in a session of its own and the test
 * exits at once). Needs CORRAL_SRC (meson's test environment sets it);
 * without it only the directory is removed. CORRAL_KEEP keeps it.
 */
#ifndef CR_TEST_REAP_H
#define CR_TEST_REAP_H

#include <stdio.h>
#include <stdlib.h>
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

#endif
