/*
 * iso_pidns.c - each plain-process job in its own PID namespace, with a
 * private mount namespace and a /proc of its own (cr_iso.h, docs/isolation.md).
 *
 * The shim (proc.c) stays in the node's namespaces: it is what the agent
 * waits for, signals and re-adopts, and the pid the journal names. It
 * clones a small init (cr_iso_pidns_fork) that is pid 1 of a new PID
 * namespace; the init mounts a fresh /proc, starts the job's tasks (pids 2,
 * 3, ...), reaps everything in the namespace and hands the job's wait
 * status back to the shim through a pipe. The job's first process is not
 * pid 1 on purpose: the kernel drops signals that pid 1 has no handler
 * for, so a job that is pid 1 would ignore the SIGTERM of a stop.
 *
 * Everything here that runs in the shim or its child is raw system calls
 * (the shim is a clone of the agent's zygote, proc_int.h: no stdio, no
 * glibc fork handlers).
 */
#include "cr_iso.h"

#include "cr_log.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Field n (1-based, n > 2) of /proc/self/stat as a number; 0 unknown. */
static unsigned long stat_field(const char *buf, int n)
{
    const char *p = buf;
    for (const char *q = buf; *q; q++) {
        p = *q == ')' ? q : p; /* the command name may hold ')': fields follow the last */
    }
    if (*p != ')') {
        return 0;
    }
    for (int f = 2; f < n && *p; p++) {
        f += *p == ' ';
    }
    unsigned long v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (unsigned long)(*p - '0');
    }
    return v;
}

/*
 * The init is a copy of the shim, itself a clone of the agent's zygote:
 * its command line and environment (the zygote's, which names the agent's
 * pid) would show as /proc/1/cmdline and /proc/1/environ in the job's
 * namespace. Overwrite both in the init's
 * own (copied) memory: the command line reads "corral-init". The bounds
 * come from /proc/self/stat (fields 48-51), read once the init's /proc is
 * mounted. Nothing of the init uses argv or environ after this: what it
 * runs was prepared on the heap before the fork.
 */
static void hide_agent_args(void)
{
    static const char name[] = "corral-init";
    char buf[2048];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0) {
        close(fd);
    }
    if (n <= 0) {
        return;
    }
    buf[n] = '\0';
    unsigned long as = stat_field(buf, 48), ae = stat_field(buf, 49);
    unsigned long es = stat_field(buf, 50), ee = stat_field(buf, 51);
    if (as && ae > as) {
        char *a = (char *)as;
        for (unsigned long i = 0; i < ae - as; i++) {
            a[i] = i + 1 < sizeof name && i + 1 < ae - as ? name[i] : '\0';
        }
    }
    if (es && ee > es) {
        char *e = (char *)es;
        for (unsigned long i = 0; i < ee - es; i++) {
            e[i] = '\0';
        }
    }
}

const char *cr_iso_pidns_step_text(int step)
{
    return step == CR_ISO_PIDNS_SLAVE  ? "making / a slave mount in the job's mount namespace"
           : step == CR_ISO_PIDNS_PROC ? "mounting the job's own /proc"
                                       : "ready";
}

pid_t cr_iso_pidns_fork(int *step, int ipc)
{
    *step = 0;
    /* A raw clone, as fork(2) without glibc's handlers: the child returns
     * here on a copy of the stack. */
    unsigned long flags = CLONE_NEWPID | CLONE_NEWNS | SIGCHLD | (ipc ? CLONE_NEWIPC : 0);
    long c = syscall(SYS_clone, flags, NULL, NULL, NULL, NULL);
    if (c != 0) {
        return (pid_t)c; /* the parent: the init's pid, or -1 with errno */
    }
    /* pid 1 of the new namespace. Dies with the shim: a shim killed alone
     * takes the whole job with it, as a stop's SIGKILL to the group does. */
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    prctl(PR_SET_NAME, "corral-init", 0, 0, 0);
    /* Nothing mounted in here reaches the node; the node's later mounts
     * (an NFS home, say) still reach the job. */
    if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0) {
        *step = CR_ISO_PIDNS_SLAVE;
        return 0;
    }
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) {
        *step = CR_ISO_PIDNS_PROC;
        return 0;
    }
    hide_agent_args();
    return 0;
}

/* The probe's child: 0 when it is pid 1 and its /proc shows it as 1; else
 * the step that failed (CR_ISO_PIDNS_*), 3 not pid 1, 4 a /proc of elsewhere. */
static int probe_child(int step)
{
    char self[16] = "";
    if (step) {
        return step;
    }
    if (getpid() != 1) {
        return 3;
    }
    ssize_t n = readlink("/proc/self", self, sizeof self - 1);
    return n == 1 && self[0] == '1' ? 0 : 4;
}

void cr_iso_probe_pidns(cr_iso *iso, int want)
{
    iso->pidns = 0;
    iso->why_pidns[0] = '\0';
    if (!want) {
        snprintf(iso->why_pidns, sizeof iso->why_pidns, "off (--job-pid-namespace off)");
        return;
    }
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        snprintf(iso->why_pidns, sizeof iso->why_pidns, "pipe: %s", strerror(errno));
        return;
    }
    int step = 0;
    pid_t c = cr_iso_pidns_fork(&step, 1);
    if (c == 0) {
        int e = errno, code = probe_child(step);
        ssize_t w = write(pfd[1], &e, sizeof e);
        (void)w;
        _exit(code);
    }
    int e = errno;
    close(pfd[1]);
    if (c < 0) {
        close(pfd[0]);
        snprintf(iso->why_pidns, sizeof iso->why_pidns,
                 "clone(CLONE_NEWPID|CLONE_NEWNS|CLONE_NEWIPC): %s%s", strerror(e),
                 e == EPERM ? " (the agent lacks CAP_SYS_ADMIN)" : "");
        return;
    }
    int st = 0;
    while (waitpid(c, &st, 0) < 0 && errno == EINTR) {
    }
    int child_errno = 0;
    if (read(pfd[0], &child_errno, sizeof child_errno) != (ssize_t)sizeof child_errno) {
        child_errno = 0;
    }
    close(pfd[0]);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    if (code == 0) {
        iso->pidns = 1;
    } else if (code == CR_ISO_PIDNS_SLAVE || code == CR_ISO_PIDNS_PROC) {
        snprintf(iso->why_pidns, sizeof iso->why_pidns, "%s: %s", cr_iso_pidns_step_text(code),
                 strerror(child_errno));
    } else if (code == 3 || code == 4) {
        snprintf(iso->why_pidns, sizeof iso->why_pidns, "%s",
                 code == 3 ? "the first process of a new PID namespace is not pid 1"
                           : "a new /proc does not show the new PID namespace");
    } else {
        snprintf(iso->why_pidns, sizeof iso->why_pidns, "the probe's namespace ended with %d",
                 code);
    }
}
