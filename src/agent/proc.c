/*
 * proc.c - the job supervisor: shim, stop, reap, re-adopt. See cr_proc.h.
 */
#include "cr_proc.h"

#include "proc_int.h"
#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_task_env.h"
#include "cr_time.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Bounds the descriptors held at once (one per level); deeper stays. */
#define RM_DEPTH_MAX 128
/* How long a reaped shim's PID namespace may take to empty (see wait_init). */
#define INIT_WAIT_NS (2 * CR_NS_PER_SEC)

static pid_t first_child(pid_t pid);
static void watch_init(cr_proc *p, pid_t init);

/* Empty the directory open as dfd (closed here). Everything goes through
 * descriptors, never a path and never a link: the tree may belong to a job
 * that swaps a directory for a link to /etc while root removes it (a path
 * walk, as nftw does, would then delete /etc's files). Stays on dev. */
static void rm_under(int dfd, dev_t dev, int depth)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            unlinkat(dirfd(d), e->d_name, 0) == 0) {
            continue;
        }
        int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat sb;
        if (sub < 0) {
            continue; /* gone, or not a directory any more: left alone */
        }
        if (depth < RM_DEPTH_MAX && fstat(sub, &sb) == 0 && sb.st_dev == dev) {
            rm_under(sub, dev, depth + 1);
        } else {
            close(sub);
        }
        int r = unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
        (void)r; /* what cannot go stays; the caller checks the top */
    }
    closedir(d);
}

int cr_rm_rf(const char *path)
{
    for (int pass = 0; pass < 2; pass++) {
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat sb;
        if (fd < 0) {
            if (unlink(path) != 0 && errno == ENOENT) {
                return 0;
            }
            break;
        }
        if (fstat(fd, &sb) != 0) {
            close(fd);
            break;
        }
        rm_under(fd, sb.st_dev, 0);
        if (rmdir(path) == 0) {
            return 0;
        }
    }
    return access(path, F_OK) == 0 ? CR_EIO : 0;
}

int cr_mkdir_p(const char *path, int mode)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        return CR_ETOOBIG;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, (mode_t)mode) != 0 && errno != EEXIST) {
                return CR_EIO;
            }
            *p = '/';
        }
    }
    if (mkdir(buf, (mode_t)mode) != 0 && errno != EEXIST) {
        return CR_EIO;
    }
    return 0;
}

char *cr_proc_log_path(const char *state_dir, int64_t job, const char *stream)
{
    return cr_asprintf("%s/logs/%lld/%s", state_dir, (long long)job, stream);
}

uint64_t cr_proc_start_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    buf[n] = '\0';
    /* The command name may hold spaces and ')': fields resume after the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p) {
        return 0;
    }
    /* After ')': state(3) ... starttime is field 22, i.e. the 20th after state. */
    char state = p[2];
    if (state == 'Z' || state == 'X') {
        return 0;
    }
    p += 2;
    for (int f = 3; f < 22 && p; f++) {
        p = strchr(p, ' ');
        if (p) {
            p++;
        }
    }
    return p ? strtoull(p, NULL, 10) : 0;
}

/* utime+stime+cutime+cstime of a pid, in clock ticks; 0 when gone. */
static uint64_t cpu_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p) {
        return 0;
    }
    p += 2;
    uint64_t sum = 0;
    for (int f = 3; f <= 17 && p; f++) {
        if (f >= 14) {
            sum += strtoull(p, NULL, 10);
        }
        p = strchr(p, ' ');
        if (p) {
            p++;
        }
    }
    return sum;
}

/* Resolve argv0 against PATH from envp, before the fork. Returned new. */
static char *resolve(const char *argv0, char *const *envp)
{
    if (strchr(argv0, '/')) {
        return cr_strdup(argv0);
    }
    const char *path = "/usr/local/bin:/usr/bin:/bin";
    for (char *const *e = envp; *e; e++) {
        if (strncmp(*e, "PATH=", 5) == 0) {
            path = *e + 5;
        }
    }
    char *copy = cr_strdup(path), *save = NULL, *found = NULL;
    for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char *cand = cr_asprintf("%s/%s", *d ? d : ".", argv0);
        if (access(cand, X_OK) == 0) {
            struct stat sb;
            if (stat(cand, &sb) == 0 && S_ISREG(sb.st_mode)) {
                found = cand;
                continue;
            }
        }
        free(cand);
    }
    free(copy);
    return found ? found : cr_strdup(argv0);
}

/* Async-signal-safe helpers for the shim. */
static size_t fmt_int(char *buf, long long v)
{
    char tmp[24];
    size_t n = 0, o = 0;
    int neg = v < 0;
    unsigned long long u = neg ? (unsigned long long)(-(v + 1)) + 1 : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (neg) {
        buf[o++] = '-';
    }
    while (n) {
        buf[o++] = tmp[--n];
    }
    return o;
}

/*
 * The journal, <state>/jobs.journal: one line per event, appended with
 * O_APPEND in a single write(2), so the shims and the agent can share it:
 *   R <record JSON>                a job started (pid, start ticks, spec)
 *   X <job> <shim pid> <exit|signal> <n>   how it ended (written by its shim)
 *   F <job>                        the controller has seen the end: forget it
 * A restarted agent replays it to re-adopt; it is rewritten with only the
 * live records at start-up and whenever it outgrows JOURNAL_MAX. One file
 * for all jobs, never a file created and deleted per job: on ext4 that
 * churn (inode allocation skipping recently deleted inodes) was most of
 * what a short job cost the agent.
 */
#define JOURNAL_MAX (8u << 20)

static char *journal_path(const char *state_dir)
{
    return cr_asprintf("%s/jobs.journal", state_dir);
}

static int journal_append(const char *state_dir, const char *line, size_t len)
{
    char *path = journal_path(state_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    free(path);
    if (fd < 0) {
        return CR_EIO;
    }
    ssize_t w = write(fd, line, len);
    close(fd);
    return w == (ssize_t)len ? 0 : CR_EIO;
}

/* The shim's line "X <job> <pid> exit|signal <n>" (async-signal-safe). */
static void shim_report(const char *journal, long long job, const char *how, long long v)
{
    char buf[128];
    size_t n = 0;
    buf[n++] = 'X';
    buf[n++] = ' ';
    n += fmt_int(buf + n, job);
    buf[n++] = ' ';
    n += fmt_int(buf + n, getpid());
    buf[n++] = ' ';
    size_t hl = strlen(how);
    memcpy(buf + n, how, hl);
    n += hl;
    buf[n++] = ' ';
    n += fmt_int(buf + n, v);
    buf[n++] = '\n';
    int fd = open(journal, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
        ssize_t w = write(fd, buf, n);
        (void)w;
        close(fd);
    }
}

/* Whether path is an -o/-e file of an earlier task of this node. */
static int earlier_task_file(const shim_args *a, const char *path)
{
    for (int t = 0; t < a->task; t++) {
        if ((a->user_out[t] && strcmp(a->user_out[t], path) == 0) ||
            (a->user_err[t] && strcmp(a->user_err[t], path) == 0)) {
            return 1;
        }
    }
    return 0;
}

/*
 * A task's own -o/-e file (after the uid change and the chdir) on fd. As
 * sbatch writes them: stderr into the same file as stdout shares its open
 * file (it was opened twice, each at offset 0, and the streams overwrote
 * each other), and a file several tasks write is truncated once, by the
 * first (--open-mode truncate, the default), then appended to by all (each
 * truncated it, and one task's lines survived).
 */
static int open_user(const shim_args *a, const char *path, int fd)
{
    if (!path) {
        return 0;
    }
    const char *out = a->user_out[a->task];
    if (fd == 2 && out && strcmp(path, out) == 0) {
        return dup2(1, 2) < 0 ? -1 : 0;
    }
    int trunc = !a->append && !earlier_task_file(a, path);
    int u = open(path, O_WRONLY | O_CREAT | O_APPEND | (trunc ? O_TRUNC : 0) | O_CLOEXEC, 0644);
    if (u < 0) {
        return -1;
    }
    dup2(u, fd);
    close(u);
    return 0;
}

/* Write msg and a number to fd 2 (async-signal-safe). */
static void say(const char *msg, long long v)
{
    char num[32];
    size_t nl = fmt_int(num, v);
    ssize_t w = write(2, msg, strlen(msg));
    w = write(2, num, nl);
    w = write(2, ")\n", 2);
    (void)w;
}

/* Write "corral: cannot open WHAT [DIR/]PATH (errno E)" to fd 2
 * (async-signal-safe): the agent quotes it as the job's end reason. */
static void say_open(const char *what, const char *dir, const char *path, int e)
{
    ssize_t w = write(2, "corral: cannot open ", 20);
    w = write(2, what, strlen(what));
    w = write(2, " ", 1);
    if (path[0] != '/') {
        w = write(2, dir, strlen(dir));
        w = write(2, strcmp(dir, "/") == 0 ? "" : "/", strcmp(dir, "/") == 0 ? 0 : 1);
    }
    w = write(2, path, strlen(path));
    w = write(2, " (errno ", 8);
    (void)w;
    say("", e);
}

/*
 * Become the job's user: supplementary groups, then gid, then uid, each
 * checked (a failed setuid must never leave the job running as root). Raw
 * system calls: the shim is single-threaded, and glibc's wrappers would
 * try to broadcast to threads the vfork child does not have.
 */
static int become_user(const shim_args *a)
{
    if (a->uid < 0 || a->keep_root) {
        return 0;
    }
    if (syscall(SYS_setgroups, a->ngroups, a->groups) != 0) {
        say("corral: setgroups failed (errno ", errno);
        return -1;
    }
    if (syscall(SYS_setresgid, (gid_t)a->gid, (gid_t)a->gid, (gid_t)a->gid) != 0) {
        say("corral: setgid failed (errno ", errno);
        return -1;
    }
    if (syscall(SYS_setresuid, (uid_t)a->uid, (uid_t)a->uid, (uid_t)a->uid) != 0) {
        say("corral: setuid failed (errno ", errno);
        return -1;
    }
    if (getuid() != (uid_t)a->uid || geteuid() != (uid_t)a->uid || getgid() != (gid_t)a->gid) {
        say("corral: the uid did not change (uid ", (long long)getuid());
        return -1;
    }
    return 0;
}

/* The job's process, between the vfork and the exec. */
static void __attribute__((noreturn, noinline)) exec_job(const shim_args *a)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    static const int job_sigs[] = {SIGTERM, SIGINT,  SIGHUP,  SIGPIPE, SIGUSR1,
                                   SIGUSR2, SIGQUIT, SIGALRM, SIGWINCH};
    for (size_t i = 0; i < sizeof job_sigs / sizeof job_sigs[0]; i++) {
        sigaction(job_sigs[i], &dfl, NULL);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    dup2(a->null_fd, 0);
    dup2(a->out_fd, 1);
    dup2(a->err_fd, 2);
    /* Nothing of the agent's: no descriptor above stderr (sockets, the
     * journal, the state database of a co-located controller...), but the
     * job's own script on fd 3 when it has one. */
    unsigned first = 3U;
    if (a->script_fd >= 0) {
        if (a->script_fd != CR_TASK_SCRIPT_FD) {
            dup2(a->script_fd, CR_TASK_SCRIPT_FD);
        }
        first = CR_TASK_SCRIPT_FD + 1;
    }
    syscall(SYS_close_range, first, ~0U, 0U);
    /* A mapped job shares /tmp, /dev/shm and /var/tmp with other tenants'
     * jobs: what it creates there is its own unless it widens it. */
    umask(a->uid >= 0 ? 077 : 022);
    if (become_user(a) != 0) {
        _exit(126);
    }
    /* Each failure says what failed on the job's stderr log (fd 2 is still
     * that log until the job's own error file is open), for its end reason. */
    if (chdir(a->workdir) != 0) {
        int e = errno;
        say_open("the working directory", "/", a->workdir, e);
        _exit(126);
    }
    if (open_user(a, a->user_out[a->task], 1) != 0) {
        int e = errno;
        say_open("output file", a->workdir, a->user_out[a->task], e);
        _exit(126);
    }
    if (open_user(a, a->user_err[a->task], 2) != 0) {
        int e = errno;
        say_open("error file", a->workdir, a->user_err[a->task], e);
        _exit(126);
    }
    execve(a->exe, a->argv, a->envps[a->task]);
    int e = errno;
    say(a->exec_msg, e);
    _exit(e == ENOENT ? 127 : 126);
}

/* Start the job's tasks and wait for them (in the shim, or in the init of
 * the job's PID namespace). Returns the job's wait status: its first task
 * to fail, else the last to end; 126 or 125 (as an exit) when a task could
 * not be started. Only async-signal-safe calls. */
/* One log stream of a task in piped mode: what the shim copies from the
 * task's pipe into its log file. */
typedef struct log_stream {
    int rd;         /* the pipe's read end; -1 at its end */
    int fd;         /* the log file */
    long long left; /* bytes the file takes before the cap's notice */
    int notice;     /* the notice fits under the cap (not when a previous run filled it) */
    int capped;     /* the cap is reached: the rest is read and dropped */
    int failed;     /* a write failed (ENOSPC...): marked once */
} log_stream;

/* Create an empty marker file for the agent (async-signal-safe). */
static void mark(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        close(fd);
    }
}

static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return -1;
        }
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Read what the pipe of s has and write it to the log, up to the cap.
 * Returns the bytes read (0 at the pipe's end). */
static ssize_t stream_copy(const shim_args *a, log_stream *s)
{
    char buf[32768];
    ssize_t n = read(s->rd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
        return -1;
    }
    if (n <= 0) {
        close(s->rd);
        s->rd = -1;
        return 0;
    }
    if (s->capped) {
        return n;
    }
    size_t take = (long long)n < s->left ? (size_t)n : (size_t)s->left;
    if (take > 0 && write_all(s->fd, buf, take) != 0 && !s->failed &&
        (errno == ENOSPC || errno == EDQUOT)) {
        s->failed = 1;
        mark(a->nospace_mark); /* an empty file: no data block needed */
    }
    s->left -= (long long)take;
    if (take < (size_t)n) {
        s->capped = 1;
        if (s->notice && write_all(s->fd, a->cap_notice, strlen(a->cap_notice)) != 0 &&
            !s->failed && (errno == ENOSPC || errno == EDQUOT)) {
            s->failed = 1;
            mark(a->nospace_mark);
        }
        mark(a->capped_mark);
    }
    return n;
}

/* A task's end (w, ws) into the job's status: its first task to fail,
 * else the last to end; once one fails the others get SIGTERM, as srun
 * does, since a gang with a rank gone would only hang. Returns 1 when w is
 * one of the tasks. */
static int task_ended(const pid_t *pids, int started, pid_t w, int ws, int *st, int *failed)
{
    int mine = 0;
    for (int k = 0; k < started; k++) {
        mine |= pids[k] == w;
    }
    if (!mine) {
        return 0; /* an orphan the namespace's init inherited */
    }
    int bad = WIFSIGNALED(ws) || (WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
    if (bad && !*failed) {
        *failed = 1;
        *st = ws;
        for (int k = 0; k < started; k++) {
            if (pids[k] != w) {
                kill(pids[k], SIGTERM);
            }
        }
    } else if (!*failed) {
        *st = ws;
    }
    return 1;
}

/* Piped mode: copy the streams while the tasks run; once they have all
 * ended, what their pipes still hold (a process they left may keep a pipe
 * open: it is not waited for). */
static int copy_until_done(const shim_args *a, log_stream *ls, int nls, const pid_t *pids,
                           int started)
{
    static struct pollfd pf[2 * CR_MAX_TASKS_PER_NODE];
    static int which[2 * CR_MAX_TASKS_PER_NODE];
    int st = 0, failed = 0, left = started;
    for (;;) {
        int np = 0;
        for (int i = 0; i < nls; i++) {
            if (ls[i].rd >= 0) {
                pf[np].fd = ls[i].rd;
                pf[np].events = POLLIN;
                pf[np].revents = 0;
                which[np++] = i;
            }
        }
        if (np == 0 && left == 0) {
            break;
        }
        int pr = poll(pf, (nfds_t)np, left > 0 ? 100 : 0);
        for (int k = 0; pr > 0 && k < np; k++) {
            if (pf[k].revents) {
                stream_copy(a, &ls[which[k]]);
            }
        }
        if (left == 0 && pr <= 0) {
            break; /* the tasks are gone and nothing more is ready */
        }
        int ws;
        pid_t w = 0;
        while (left > 0 && (w = waitpid(-1, &ws, np == 0 ? 0 : WNOHANG)) > 0) {
            left -= task_ended(pids, started, w, ws, &st, &failed);
            if (np == 0) {
                break;
            }
        }
        if (left > 0 && w < 0 && errno == ECHILD) {
            left = 0;
        }
    }
    for (int i = 0; i < nls; i++) {
        if (ls[i].rd >= 0) {
            close(ls[i].rd);
        }
        close(ls[i].fd);
    }
    return st;
}

/* A stream of log file fd (a retry appends to its run's file): the room
 * it leaves under the cap, before the notice. */
static log_stream log_open(const shim_args *a, int rd, int fd)
{
    struct stat sb;
    long long have = fstat(fd, &sb) == 0 ? (long long)sb.st_size : 0;
    long long room = a->log_max - have - (long long)strlen(a->cap_notice);
    return (log_stream){rd, fd, room > 0 ? room : 0, room >= 0, 0, 0};
}

/* vfork and exec the task (a->task): in a function of its own, so that no
 * local of the caller lives across the vfork (gcc -Wclobbered). */
static pid_t __attribute__((noinline)) vfork_task(shim_args *a)
{
    pid_t c = vfork();
    if (c == 0) {
        exec_job(a);
    }
    return c;
}

static int run_tasks(shim_args *a)
{
    pid_t pids[CR_MAX_TASKS_PER_NODE];
    static log_stream ls[2 * CR_MAX_TASKS_PER_NODE];
    int nls = 0, piped = a->log_max > 0;
    if (piped) {
        /* 4 descriptors a task (2 pipes' read ends, 2 log files) */
        struct rlimit rl;
        rlim_t need = (rlim_t)(4 * a->ntasks + 32);
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
            rl.rlim_cur = need < rl.rlim_max ? need : rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
    }
    int started = 0;
    for (int t = 0; t < a->ntasks; t++) {
        /* The shim opens the logs (creating files is most of what starting
         * a job costs), in parallel with the agent's next start. */
        a->task = t;
        a->out_fd =
            open(a->out_paths[t], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        a->err_fd =
            open(a->err_paths[t], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        int bad = a->out_fd < 0 || a->err_fd < 0 || a->null_fd < 0;
        if (!bad && a->uid >= 0 &&
            (fchown(a->out_fd, (uid_t)a->uid, (gid_t)a->gid) != 0 ||
             fchown(a->err_fd, (uid_t)a->uid, (gid_t)a->gid) != 0)) {
            bad = 1;
        }
        int op[2] = {-1, -1}, ep[2] = {-1, -1};
        if (!bad && piped &&
            (pipe2(op, O_CLOEXEC) != 0 || pipe2(ep, O_CLOEXEC) != 0 || op[0] < 0)) {
            bad = 1;
        }
        if (bad) {
            for (int k = 0; k < started; k++) {
                kill(pids[k], SIGKILL);
            }
            return W_EXITCODE(126, 0);
        }
        int out_file = a->out_fd, err_file = a->err_fd;
        if (piped) {
            ls[nls++] = log_open(a, op[0], out_file);
            ls[nls++] = log_open(a, ep[0], err_file);
            a->out_fd = op[1]; /* the task writes into the pipes */
            a->err_fd = ep[1];
        }
        /* vfork: the shim is single-threaded and the child only sets up
         * and execs, so the page tables (a copy of the agent's) are not
         * copied a second time. */
        pid_t c = vfork_task(a);
        close(a->out_fd);
        close(a->err_fd);
        if (c < 0) {
            for (int k = 0; k < started; k++) {
                kill(pids[k], SIGKILL);
            }
            return W_EXITCODE(125, 0);
        }
        pids[started++] = c;
    }
    if (piped) {
        return copy_until_done(a, ls, nls, pids, started);
    }
    /* The job's status is its first task to fail (exit code or signal),
     * else 0 (task_ended). */
    int st = 0, failed = 0, left = started;
    while (left > 0) {
        int ws = 0;
        pid_t w = waitpid(-1, &ws, 0);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        left -= task_ended(pids, started, w, ws, &st, &failed);
    }
    return st;
}

/* Write "msg<errno>)" to the job's first stderr log (the shim's own fd 2
 * is the agent's). */
static void shim_say(const shim_args *a, const char *msg, int e)
{
    int fd = open(a->err_paths[0], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        return;
    }
    if (a->uid >= 0 && fchown(fd, (uid_t)a->uid, (gid_t)a->gid) != 0) {
        e = e ? e : errno;
    }
    char num[32];
    size_t nl = fmt_int(num, e);
    ssize_t w = write(fd, msg, strlen(msg));
    w = write(fd, num, nl);
    w = write(fd, ")\n", 2);
    (void)w;
    close(fd);
}

/*
 * The job in its own PID namespace (iso_pidns.c): clone its init, which
 * runs the tasks, reaps every orphan there and sends the job's wait status
 * through a pipe before it exits (its exit kills whatever is left in the
 * namespace). An init that ends without a word (a stop's SIGKILL, the OOM
 * killer) is the job's status itself. A namespace that cannot be made
 * fails the job (126): it never runs unfenced on a node that said it is.
 */
static int run_in_pidns(shim_args *a)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        shim_say(a, "corral: cannot make the job's PID namespace: pipe (errno ", errno);
        return W_EXITCODE(126, 0);
    }
    int step = 0;
    pid_t c = cr_iso_pidns_fork(&step, a->ipcns);
    if (c == 0) {
        int st;
        close(pfd[0]);
        if (step) {
            int e = errno;
            shim_say(a,
                     step == CR_ISO_PIDNS_SLAVE
                         ? "corral: cannot make the job's mount namespace private (errno "
                         : "corral: cannot mount the job's /proc (errno ",
                     e);
            st = W_EXITCODE(126, 0);
        } else {
            st = run_tasks(a);
        }
        ssize_t w = write(pfd[1], &st, sizeof st);
        (void)w;
        _exit(0);
    }
    int e = errno;
    close(pfd[1]);
    if (c < 0) {
        close(pfd[0]);
        shim_say(a, "corral: cannot make the job's PID namespace: clone (errno ", e);
        return W_EXITCODE(126, 0);
    }
    int ws = 0, st = 0;
    while (waitpid(c, &ws, 0) < 0) {
        if (errno != EINTR) {
            ws = W_EXITCODE(125, 0);
            break;
        }
    }
    if (!WIFEXITED(ws) || read(pfd[0], &st, sizeof st) != (ssize_t)sizeof st) {
        st = ws;
    }
    close(pfd[0]);
    return st;
}

/* cr_iso_own_dir in the shim (async-signal-safe): make path 0700 for the
 * job's user, or take it when it is a directory of that user's (or
 * root's); -1 with errno otherwise. */
static int shim_own_dir(const shim_args *a, const char *path)
{
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        return -1;
    }
    struct stat sb;
    if (lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        errno = ENOTDIR; /* a link? */
        return -1;
    }
    uid_t want = a->uid >= 0 ? (uid_t)a->uid : geteuid();
    if (sb.st_uid != 0 && sb.st_uid != want && sb.st_uid != geteuid()) {
        errno = EPERM; /* another user's */
        return -1;
    }
    if (a->uid >= 0 && (sb.st_uid != (uid_t)a->uid || sb.st_gid != (gid_t)a->gid) &&
        lchown(path, (uid_t)a->uid, (gid_t)a->gid) != 0) {
        return -1;
    }
    if ((sb.st_mode & 07777) != 0700 && chmod(path, 0700) != 0) {
        return -1;
    }
    return 0;
}

/* The shim, in the zygote's child (proc_int.h). Only async-signal-safe calls. */
static void __attribute__((noreturn, noinline)) run_shim(shim_args *a)
{
    setsid();
    /* Join the job's cgroups before the job exists, so it starts there;
     * one that cannot be joined fails the start (it would run unfenced). */
    for (char *const *cp = a->cgroup_procs; cp && *cp; cp++) {
        int fd = open(*cp, O_WRONLY | O_CLOEXEC);
        char num[32];
        size_t n = fmt_int(num, getpid());
        if (fd < 0 || write(fd, num, n) != (ssize_t)n) {
            shim_say(a, "corral: cannot join the job's cgroup (errno ", errno);
            shim_report(a->journal, a->job, "exit", 126);
            _exit(126);
        }
        close(fd);
    }
    /* The job's directories (job_dirs), charged to the job's cgroups. A
     * directory that cannot be the job's fails the start, said on the
     * agent's stderr (the job's log is in it). */
    for (char *const *d = a->dirs; d && *d; d++) {
        if (shim_own_dir(a, *d) != 0) {
            int e = errno;
            ssize_t w = write(2, "corral: job ", 12);
            char num[32];
            w = write(2, num, fmt_int(num, a->job));
            w = write(2, ": cannot make its directory ", 28);
            w = write(2, *d, strlen(*d));
            (void)w;
            say(" its own (errno ", e);
            shim_report(a->journal, a->job, "exit", 126);
            _exit(126);
        }
    }
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    /* The shim outlives what its process group is sent (stop, --signal);
     * the tasks get the defaults back (exec_job). */
    static const int shim_sigs[] = {SIGTERM, SIGINT,  SIGHUP,  SIGUSR1,
                                    SIGUSR2, SIGQUIT, SIGALRM, SIGWINCH};
    for (size_t i = 0; i < sizeof shim_sigs / sizeof shim_sigs[0]; i++) {
        sigaction(shim_sigs[i], &ign, NULL);
    }
    a->null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    /* not O_CLOEXEC: the interpreter reopens /dev/fd/3 after the exec */
    a->script_fd = a->script ? open(a->script, O_RDONLY | O_NOFOLLOW) : -1;
    if (a->script && a->script_fd < 0) {
        shim_say(a, "corral: cannot open the job's script (errno ", errno);
        shim_report(a->journal, a->job, "exit", 126);
        _exit(126);
    }
    int st = a->pidns ? run_in_pidns(a) : run_tasks(a);
    /* The shim ends as the job did, so its parent's waitpid() tells the
     * whole story; the journal line serves an agent that restarted. */
    if (WIFSIGNALED(st)) {
        int sig = WTERMSIG(st);
        shim_report(a->journal, a->job, "signal", sig);
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(sig, &dfl, NULL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        sigprocmask(SIG_UNBLOCK, &one, NULL);
        kill(getpid(), sig);
        _exit(128 + sig);
    }
    shim_report(a->journal, a->job, "exit", WEXITSTATUS(st));
    _exit(WEXITSTATUS(st));
}

/*
 * The zygote's entry (proc_int.h): a constructor, so that every program
 * that links proc.c (the corral binary, the tests that start jobs) can be
 * its own zygote, and none of the program's start-up runs in it. glibc
 * hands constructors argc, argv and envp.
 */
static void __attribute__((constructor)) zygote_entry(int argc, char **argv, char **envp)
{
    (void)envp;
    if (argc == 4 && strcmp(argv[1], CR__PROC_ZYGOTE_ARG) == 0) {
        cr__proc_zygote_main(CR__PROC_SHIM_FD, (pid_t)atoi(argv[2]), run_shim);
    }
}

static json_t *record_json(const cr_proc *p)
{
    json_t *j = json_pack("{s:I,s:i,s:I,s:I,s:o}", "job", (json_int_t)p->job, "pid", (int)p->pid,
                          "start_ticks", (json_int_t)p->start_ticks, "start_ns",
                          (json_int_t)p->start_ns, "spec", cr_job_spec_to_json(&p->spec));
    if (p->cgroup) {
        json_object_set_new(j, "cgroup", json_string(p->cgroup));
    }
    json_object_set_new(j, "cgroups", cr_iso_job_to_json(&p->iso));
    if (p->pidns) {
        json_object_set_new(j, "pidns", json_true());
    }
    return j;
}

static int write_record(const char *state_dir, const cr_proc *p)
{
    json_t *j = record_json(p);
    char *text = json_dumps(j, JSON_COMPACT); /* compact JSON has no newline */
    char *line = cr_asprintf("R %s\n", text);
    int rc = journal_append(state_dir, line, strlen(line));
    free(line);
    free(text);
    json_decref(j);
    return rc;
}

static void copy_spec(cr_job_spec *dst, const cr_job_spec *src)
{
    /* Round-trip through JSON: one code path, and the copy owns everything. */
    json_t *j = cr_job_spec_to_json(src);
    char err[256];
    if (cr_job_spec_from_json(j, "", dst, err, sizeof err) < 0) {
        /* A spec that parsed once parses again; keep the id at least. */
        memset(dst, 0, sizeof *dst);
        dst->job = src->job;
    }
    json_decref(j);
}

int cr_proc_spawn(const char *state_dir, const char *node, const cr_job_spec *spec, cr_proc *p,
                  char *err, size_t errlen)
{
    return cr_proc_spawn_iso(state_dir, node, spec, NULL, p, err, errlen);
}

/* A checkpoint path the agent may create and hand to a user: absolute, no
 * "." or ".." component, no empty component. */
static int ckpt_path_ok(const char *p)
{
    if (p[0] != '/' || strstr(p, "//") || strstr(p, "/./") || strstr(p, "/../")) {
        return 0;
    }
    size_t n = strlen(p);
    return !(n >= 2 && strcmp(p + n - 2, "/.") == 0) && !(n >= 3 && strcmp(p + n - 3, "/..") == 0);
}

/* The supplementary groups of uid (its passwd name's groups), else just gid. */
static size_t lookup_groups(int64_t uid, int64_t gid, gid_t *out, size_t max)
{
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (getpwuid_r((uid_t)uid, &pw, buf, sizeof buf, &res) == 0 && res) {
        int n = (int)max;
        if (getgrouplist(res->pw_name, (gid_t)gid, out, &n) >= 0 && n > 0) {
            return (size_t)n;
        }
    }
    out[0] = (gid_t)gid;
    return 1;
}

/*
 * The same, remembered for GROUPS_TTL_NS per (uid, gid): a burst of jobs
 * of a few users reads /etc/passwd and /etc/group (or asks NSS) once a
 * second, not once a job; a change of groups shows within that second.
 * Used by the thread that starts jobs only (cr_proc.h).
 */
#define GROUPS_CACHE  16
#define GROUPS_MAX    256
#define GROUPS_TTL_NS CR_NS_PER_SEC

typedef struct groups_entry {
    int64_t uid, gid;
    int64_t at_ns; /* monotonic; 0: empty */
    size_t n;
    gid_t groups[GROUPS_MAX];
} groups_entry;

static size_t user_groups(int64_t uid, int64_t gid, gid_t *out, size_t max)
{
    static groups_entry cache[GROUPS_CACHE];
    int64_t now = cr_mono_ns();
    groups_entry *e = NULL, *oldest = &cache[0];
    for (size_t i = 0; i < GROUPS_CACHE; i++) {
        if (cache[i].at_ns != 0 && cache[i].uid == uid && cache[i].gid == gid) {
            e = &cache[i];
        }
        oldest = cache[i].at_ns < oldest->at_ns ? &cache[i] : oldest;
    }
    if (!e || now - e->at_ns >= GROUPS_TTL_NS) {
        e = e ? e : oldest;
        e->uid = uid;
        e->gid = gid;
        e->n = lookup_groups(uid, gid, e->groups, GROUPS_MAX);
        e->at_ns = now;
    }
    size_t n = e->n < max ? e->n : max;
    memcpy(out, e->groups, n * sizeof *out);
    return n;
}

/*
 * The job's directories, logs/<id> and the checkpoint directory, each
 * 0700 and owned by the job's user: checked here, made by the shim
 * (shim_own_dir), off the agent's loop: on ext4, allocating a directory's
 * inode among recently deleted ones was a third of what a job cost the
 * agent. dirs gets them (returned new, NULL-ended). The parents (logs/,
 * the tenant's checkpoint directory) are made here, once.
 */
static int job_dirs(const char *state_dir, const cr_job_spec *spec, char ***dirs, char *err,
                    size_t errlen)
{
    long long job = (long long)spec->job;
    char *logdir = cr_asprintf("%s/logs", state_dir);
    int rc = 0;
    char why[512];
    *dirs = cr_calloc(3, sizeof **dirs);
    (*dirs)[0] = cr_asprintf("%s/logs/%lld", state_dir, job);
    if ((rc = cr_iso_own_dir(logdir, 0700, -1, -1, why, sizeof why)) < 0) {
        snprintf(err, errlen, "job %lld: %s", job, why);
        goto out;
    }
    if (spec->checkpoint_dir) {
        if (!ckpt_path_ok(spec->checkpoint_dir)) {
            snprintf(err, errlen, "job %lld: checkpoint_dir '%s' is not a clean absolute path", job,
                     spec->checkpoint_dir);
            rc = CR_EPERM;
            goto out;
        }
        /* Parents (<root>/<cluster>/<tenant>) are traversable, not listable. */
        char *parent = cr_strdup(spec->checkpoint_dir);
        char *slash = strrchr(parent, '/');
        if (slash && slash != parent) {
            *slash = '\0';
            if (access(parent, F_OK) != 0) {
                mode_t old = umask(0);
                cr_mkdir_p(parent, 0711);
                umask(old);
            }
        }
        free(parent);
        (*dirs)[1] = cr_strdup(spec->checkpoint_dir);
    }
out:
    free(logdir);
    return rc;
}

int cr_proc_spawn_iso(const char *state_dir, const char *node, const cr_job_spec *spec,
                      const cr_iso *iso, cr_proc *p, char *err, size_t errlen)
{
    int rc = 0;
    cr_iso_job cg;
    memset(&cg, 0, sizeof cg);
    char **procs = NULL, **base = NULL, **envp = NULL, **dirs = NULL;
    char *exe = NULL, *exec_msg = NULL, *workdir = NULL;
    char *err_path = cr_proc_log_path(state_dir, spec->job, "err");
    char *capped_mark = cr_proc_log_path(state_dir, spec->job, "capped");
    char *nospace_mark = cr_proc_log_path(state_dir, spec->job, "nospace");
    char *cap_notice = cr_asprintf("\ncorral: output capped at %lld bytes (the agent's "
                                   "log_max_bytes); the rest was dropped\n",
                                   (long long)spec->log_max_bytes);
    cr_tasks tk;
    memset(&tk, 0, sizeof tk);
    char *journal = journal_path(state_dir);
    long long job = (long long)spec->job;
    gid_t groups[256];
    size_t ngroups = 0;

    if (spec->has_user && spec->uid == 0 && !spec->allow_root) {
        snprintf(err, errlen,
                 "job %lld: refused to run as uid 0 (root is not allowed for its "
                 "tenant)",
                 job);
        rc = CR_EPERM;
        goto out;
    }
    if (spec->has_user && geteuid() != 0 && (uid_t)spec->uid != geteuid()) {
        snprintf(err, errlen, "job %lld: cannot run as uid %lld: the agent is not root", job,
                 (long long)spec->uid);
        rc = CR_EPERM;
        goto out;
    }
    if (spec->has_user) {
        ngroups = user_groups(spec->uid, spec->gid, groups, sizeof groups / sizeof groups[0]);
    }
    if ((rc = job_dirs(state_dir, spec, &dirs, err, errlen)) < 0) {
        goto out;
    }
    if (spec->workdir && !spec->ctr.image) { /* a container's workdir is inside it */
        workdir = cr_strdup(spec->workdir);
    } else if (spec->checkpoint_dir) {
        workdir = cr_strdup(spec->checkpoint_dir);
    } else if (spec->has_user) {
        workdir = cr_strdup("/");
    } else {
        workdir = cr_asprintf("%s/work", state_dir);
        if (access(workdir, F_OK) != 0) {
            cr_mkdir_p(workdir, 0700);
        }
    }
    base = cr_job_env_base(spec, workdir);
    envp = cr_job_env(spec, base, node);
    cr_tasks_prepare(&tk, state_dir, spec, envp, node);
    if (!spec->ctr.image && !spec->ctr.podman) {
        cr_tasks_note_files(&tk, state_dir, spec, workdir); /* for corral logs */
    }
    exe = resolve(tk.argv[0], envp);
    exec_msg = cr_asprintf("corral: cannot run '%s' in %s (errno ", spec->argv[0], workdir);
    if (iso) {
        char warn[1024];
        if (cr_iso_job_setup(iso, spec, &cg, warn, sizeof warn) < 0) {
            snprintf(err, errlen, "job %lld: %s", job, warn);
            rc = CR_EIO;
            goto out;
        }
        if (*warn && cr_iso_own_dir(dirs[0], 0700, spec->has_user ? spec->uid : -1, spec->gid, warn,
                                    sizeof warn) < 0) {
            snprintf(err, errlen, "job %lld: %s", job, warn);
            rc = CR_EPERM;
            goto out;
        }
        if (*warn) {
            /* Said in the job's own log: a limit asked for and not enforced. */
            int fd = open(err_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
            if (fd >= 0) {
                ssize_t w = write(fd, warn, strlen(warn));
                (void)w;
                if (spec->has_user && fchown(fd, (uid_t)spec->uid, (gid_t)spec->gid) != 0) {
                    w = 0;
                }
                close(fd);
            }
        }
        procs = cr_iso_job_procs(&cg);
    }
    /* This run's marks only (a retry's logs go on in the same files). */
    unlink(capped_mark);
    unlink(nospace_mark);
    /* Containers have their own PID namespace (podman's). */
    int pidns = iso && iso->pidns && !spec->ctr.image && !spec->ctr.podman;
    /* An MPS client must share the IPC namespace of the node's MPS daemon. */
    int ipcns = pidns && !spec->mps_pipe;
    pid_t pid = -1;
    {
        shim_args sa = {exe,
                        tk.argv,
                        tk.envps,
                        workdir,
                        exec_msg,
                        journal,
                        job,
                        tk.out_paths,
                        tk.err_paths,
                        tk.user_out,
                        tk.user_err,
                        procs,
                        spec->has_user ? spec->uid : -1,
                        spec->gid,
                        groups,
                        ngroups,
                        tk.script_path,
                        -1,
                        tk.n,
                        0,
                        spec->ctr.podman,
                        -1,
                        -1,
                        -1,
                        pidns,
                        ipcns,
                        dirs,
                        spec->log_max_bytes > 0 ? (long long)spec->log_max_bytes : 0,
                        cap_notice,
                        capped_mark,
                        nospace_mark,
                        spec->open_append};
        int e = cr__proc_shim_spawn(&sa, &pid);
        if (e != 0) {
            snprintf(err, errlen, "job %lld: cannot start the shim: %s", job, strerror(e));
            rc = CR_EAGAIN;
            goto out;
        }
    }
    cr_proc_init(p);
    p->job = spec->job;
    p->pid = pid;
    p->start_ticks = cr_proc_start_ticks(pid);
    p->state = CR_PROC_RUNNING;
    p->start_ns = cr_now_ns();
    p->iso = cg;
    memset(&cg, 0, sizeof cg);
    p->cgroup = p->iso.v2 ? cr_strdup(p->iso.v2) : NULL;
    p->signal_done = spec->signal_at; /* a signal asked before the start is not for it */
    p->pidns = pidns;
    p->init_fd = -1;
    copy_spec(&p->spec, spec);
    if (write_record(state_dir, p) < 0) {
        /* The job runs; only a restart of the agent would lose track of it. */
        snprintf(err, errlen, "job %lld: cannot append to %s", job, journal);
    }
out:
    cr_iso_job_remove(&cg); /* the job never started */
    cr_iso_job_fini(&cg);
    cr_strv_free(procs);
    cr_strv_free(dirs);
    cr_strv_free(base);
    cr_strv_free(envp);
    free(exe);
    free(exec_msg);
    cr_tasks_fini(&tk);
    free(err_path);
    free(capped_mark);
    free(nospace_mark);
    free(cap_notice);
    free(journal);
    free(workdir);
    return rc;
}

void cr_proc_log_marks(const char *state_dir, int64_t job, int *capped, int *nospace)
{
    char *c = cr_proc_log_path(state_dir, job, "capped");
    char *n = cr_proc_log_path(state_dir, job, "nospace");
    *capped = access(c, F_OK) == 0;
    *nospace = access(n, F_OK) == 0;
    free(c);
    free(n);
}

static void cgroup_kill(const cr_proc *p)
{
    cr_iso_job_kill(&p->iso);
}

/* usage_usec from <cgroup>/cpu.stat. */
static int cgroup_cpu_usec(const char *cgroup, uint64_t *out)
{
    char *path = cr_asprintf("%s/cpu.stat", cgroup);
    char buf[512];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    free(path);
    if (fd < 0) {
        return CR_ENOENT;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) {
        return CR_EIO;
    }
    buf[n] = '\0';
    const char *u = strstr(buf, "usage_usec ");
    if (!u) {
        return CR_EPARSE;
    }
    *out = strtoull(u + 11, NULL, 10);
    return 0;
}

void cr_proc_stop(cr_proc *p, int64_t grace_ns, int64_t now_ns)
{
    cr_proc_stop_sig(p, SIGTERM, grace_ns, now_ns);
}

void cr_proc_stop_sig(cr_proc *p, int sig, int64_t grace_ns, int64_t now_ns)
{
    if (p->state != CR_PROC_RUNNING) {
        return;
    }
    p->state = CR_PROC_STOPPING;
    p->kill_at_ns = now_ns + grace_ns;
    p->stop_sig = sig;
    watch_init(p, p->pidns ? first_child(p->pid) : 0);
    /* The job is in the shim's process group; the shim ignores SIGTERM
     * and the signals a job may be sent. */
    kill(-p->pid, grace_ns > 0 ? sig : SIGKILL);
    /* A stop right after the start can reach the group before the shim's
     * setsid(), or while a task still has the shim's SIG_IGN: say it once
     * more a second later (cr_proc_tick). */
    if (grace_ns > CR_NS_PER_SEC && p->start_ns > 0 && cr_now_ns() - p->start_ns < CR_NS_PER_SEC) {
        p->term_again_ns = now_ns + CR_NS_PER_SEC;
    }
    if (grace_ns <= 0) {
        cgroup_kill(p);
    }
}

/* Parse an "X" line's tail "<job> <pid> <how> <n>". */
static int parse_exit(const char *t, long long *job, long long *pid, int *code, int *sig)
{
    char how[16];
    int v;
    if (sscanf(t, "%lld %lld %15s %d", job, pid, how, &v) != 4) {
        return CR_EPARSE;
    }
    if (strcmp(how, "exit") == 0) {
        *code = v;
        *sig = 0;
        return 0;
    }
    if (strcmp(how, "signal") == 0) {
        *code = 128 + v;
        *sig = v;
        return 0;
    }
    return CR_EPARSE;
}

/* The end of job (shim pid) from the journal; CR_ENOENT when not there. */
static int read_exit(const char *state_dir, int64_t job, pid_t pid, int *code, int *sig)
{
    char *path = journal_path(state_dir);
    FILE *f = fopen(path, "r");
    free(path);
    if (!f) {
        return CR_ENOENT;
    }
    char *line = NULL;
    size_t cap = 0;
    int rc = CR_ENOENT;
    while (getline(&line, &cap, f) > 0) {
        long long j, p;
        int c, s;
        if (line[0] == 'X' && parse_exit(line + 2, &j, &p, &c, &s) == 0 && j == job && p == pid) {
            *code = c;
            *sig = s;
            rc = 0;
        }
    }
    free(line);
    fclose(f);
    return rc;
}

/* Did the kernel's OOM killer act inside the job's memory cgroup? */
static void mark_oom(cr_proc *p)
{
    p->oom = cr_iso_oom_kills(&p->iso) > 0 || (p->signal == SIGKILL && cr_iso_mem_hit(&p->iso));
}

/*
 * A job in a PID namespace: keep a pidfd of its init (the shim's only
 * child, so the pid is still the init's while the shim lives). The kernel
 * empties the namespace (SIGKILL to every task, then reaps them) before
 * the init's exit shows on the pidfd.
 */
static void watch_init(cr_proc *p, pid_t init)
{
    if (p->pidns && p->init_fd < 0 && init > 0) {
        long fd = syscall(SYS_pidfd_open, init, 0);
        p->init_fd = fd >= 0 ? (int)fd : -1;
    }
}

/*
 * The shim killed (a stop's SIGKILL reaches it with the rest of the
 * group) ends before its namespace does: the init dies of that SIGKILL or
 * of its parent-death signal, and the kernel kills the namespace's other
 * tasks (a setsid() child, say) after that. Wait, bounded, until they are
 * all gone, so that nothing of the job outlives its reported end.
 */
static void wait_init(cr_proc *p)
{
    if (p->init_fd < 0) {
        return;
    }
    struct pollfd pf = {.fd = p->init_fd, .events = POLLIN};
    for (int64_t end = cr_mono_ns() + INIT_WAIT_NS; cr_mono_ns() < end;) {
        int r = poll(&pf, 1, 100);
        if (r != 0 && !(r < 0 && errno == EINTR)) {
            break;
        }
    }
    close(p->init_fd);
    p->init_fd = -1;
}

/*
 * A job that ended 125..127 (its start failed: a file it could not open,
 * a program not found, podman's own error) gets the message that says why
 * as its end reason, so that `corral show` tells it: the last line of its
 * stderr logs that the shim wrote ("corral: cannot ...") or, for a
 * container, podman's ("Error: ..."), with "(errno N)" in words.
 */
static void exit_reason(const char *state_dir, cr_proc *p)
{
    if (p->signal || p->exit_code < 125 || p->exit_code > 127 || p->reason[0]) {
        return;
    }
    char *dir = cr_asprintf("%s/logs/%lld", state_dir, (long long)p->job);
    DIR *d = opendir(dir);
    char msg[300] = "";
    for (struct dirent *de; d && !msg[0] && (de = readdir(d));) {
        size_t nl = strlen(de->d_name);
        if (strcmp(de->d_name, "err") != 0 && (nl < 4 || strcmp(de->d_name + nl - 4, ".err"))) {
            continue;
        }
        char *path = cr_asprintf("%s/%s", dir, de->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        free(path);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            if (fd >= 0) {
                close(fd);
            }
            continue;
        }
        char buf[4097];
        off_t from = st.st_size > 4096 ? st.st_size - 4096 : 0;
        ssize_t n = pread(fd, buf, sizeof buf - 1, from);
        close(fd);
        buf[n > 0 ? n : 0] = '\0';
        for (char *line = buf, *next; line && *line; line = next) {
            next = strchr(line, '\n');
            if (next) {
                *next++ = '\0';
            }
            if (strncmp(line, "corral: cannot ", 15) == 0 ||
                (p->spec.ctr.image && strncmp(line, "Error: ", 7) == 0)) {
                snprintf(msg, sizeof msg, "%.299s", line);
            }
        }
    }
    if (d) {
        closedir(d);
    }
    free(dir);
    if (!msg[0]) {
        return;
    }
    char *en = strstr(msg, " (errno ");
    int e = en ? atoi(en + 8) : 0;
    if (en && e > 0) {
        snprintf(en, sizeof msg - (size_t)(en - msg), ": %s", strerror(e));
    }
    for (char *q = msg; *q; q++) {
        if ((unsigned char)*q < 0x20 || *q == 0x7f) {
            *q = ' '; /* the controller takes printable text only */
        }
    }
    snprintf(p->reason, sizeof p->reason, "%s (exit code %d)",
             strncmp(msg, "corral: ", 8) == 0 ? msg + 8 : msg, p->exit_code);
}

void cr_proc_reaped(cr_proc *p, const char *state_dir, int wstatus)
{
    /* The shim ends as its job did (see the shim). Nothing of the job
     * outlives it: a process it left behind (setsid, double fork) would keep
     * its GPU's device node open after the GPU goes to the next job. The
     * cgroup kill first (where there is one), so the namespace empties at
     * once and the wait below is short. */
    cgroup_kill(p);
    wait_init(p);
    p->state = CR_PROC_EXITED;
    if (WIFSIGNALED(wstatus)) {
        p->signal = WTERMSIG(wstatus);
        p->exit_code = 128 + p->signal;
    } else {
        p->exit_code = WEXITSTATUS(wstatus);
        p->signal = 0;
    }
    mark_oom(p);
    exit_reason(state_dir, p);
}

/* The first child of pid (0: none, or gone). */
static pid_t first_child(pid_t pid)
{
    char path[64], buf[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    buf[n] = '\0';
    return (pid_t)atoi(buf);
}

static void refresh_job_pid(cr_proc *p)
{
    /* The job is the shim's only child; in a PID namespace of its own, the
     * first child of the namespace's init (the shim's only child). */
    pid_t c = first_child(p->pid);
    p->job_pid = p->pidns && c > 0 ? first_child(c) : c;
    watch_init(p, c);
}

int cr_proc_tick(cr_proc *p, const char *state_dir, int64_t now_ns, int64_t mono_ns)
{
    if (p->state == CR_PROC_EXITED) {
        return 0;
    }
    if (p->state == CR_PROC_STOPPING && p->term_again_ns > 0 && now_ns >= p->term_again_ns &&
        now_ns < p->kill_at_ns) {
        p->term_again_ns = 0;
        kill(-p->pid, p->stop_sig > 0 ? p->stop_sig : SIGTERM);
    }
    if (p->state == CR_PROC_STOPPING && now_ns >= p->kill_at_ns) {
        kill(-p->pid, SIGKILL);
        cgroup_kill(p);
        p->kill_at_ns = now_ns + CR_NS_PER_SEC; /* repeat until it is gone */
    }
    if (p->adopted && cr_proc_start_ticks(p->pid) != p->start_ticks) {
        /* Not our child: its end shows as the pid vanishing (or being reused). */
        p->state = CR_PROC_EXITED;
        cgroup_kill(p); /* what it left behind (see cr_proc_reaped) */
        wait_init(p);
        if (read_exit(state_dir, p->job, p->pid, &p->exit_code, &p->signal) < 0) {
            p->signal = SIGKILL;
            p->exit_code = 128 + SIGKILL;
        }
        mark_oom(p);
        exit_reason(state_dir, p);
        return 1;
    }
    if (p->job_pid == 0) {
        refresh_job_pid(p);
    }
    uint64_t usec;
    if (p->cgroup && cgroup_cpu_usec(p->cgroup, &usec) == 0) {
        /* The whole job, children included, from its cgroup. */
        if (p->cpu_at_ns > 0 && mono_ns > p->cpu_at_ns && usec >= p->cpu_ticks) {
            p->busy = (double)(usec - p->cpu_ticks) * 1e3 / (double)(mono_ns - p->cpu_at_ns);
        }
        p->cpu_ticks = usec;
        p->cpu_at_ns = mono_ns;
    } else if (p->job_pid > 0) {
        uint64_t t = cpu_ticks(p->job_pid);
        if (p->cpu_at_ns > 0 && mono_ns > p->cpu_at_ns && t >= p->cpu_ticks) {
            double secs = (double)(mono_ns - p->cpu_at_ns) / 1e9;
            double hz = (double)sysconf(_SC_CLK_TCK);
            p->busy = (double)(t - p->cpu_ticks) / hz / secs;
        }
        p->cpu_ticks = t;
        p->cpu_at_ns = mono_ns;
    }
    return 0;
}

/* chmod what is there and not yet so: dirs 0700, files 0600, down to
 * depth more levels. Links are never followed. */
static void fix_dir(const char *dir, int depth)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        char *path = cr_asprintf("%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(path, &sb) == 0) {
            if (S_ISDIR(sb.st_mode)) {
                if ((sb.st_mode & 077) != 0) {
                    chmod(path, sb.st_mode & 0700);
                }
                if (depth > 0) {
                    fix_dir(path, depth - 1);
                }
            } else if (S_ISREG(sb.st_mode) && (sb.st_mode & 077) != 0) {
                chmod(path, sb.st_mode & 0600);
            }
        }
        free(path);
    }
    if (d) {
        closedir(d);
    }
}

/* What the agent keeps in its state dir: only these are its own to chmod
 * (a state dir pointed at a directory holding other things must not make
 * them private). */
static const char *const own_entries[] = {"jobs.journal",
                                          "jobs.journal.tmp",
                                          "node.cred",
                                          "images.json",
                                          "logs",
                                          "scripts",
                                          "ctr",
                                          "work",
                                          NULL};

int cr_proc_fix_modes(const char *state_dir)
{
    struct stat sb;
    if (lstat(state_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        return CR_EINVAL;
    }
    /* /tmp and the like: shared by every user, never the agent's own */
    if ((sb.st_mode & (S_ISVTX | S_IWOTH)) != 0 || sb.st_uid != geteuid()) {
        return CR_EPERM;
    }
    chmod(state_dir, 0700);
    for (size_t i = 0; own_entries[i]; i++) {
        char *path = cr_asprintf("%s/%s", state_dir, own_entries[i]);
        if (lstat(path, &sb) == 0) {
            if (S_ISDIR(sb.st_mode)) {
                if ((sb.st_mode & 077) != 0) {
                    chmod(path, sb.st_mode & 0700);
                }
                fix_dir(path, 1); /* logs/<job>/..., scripts/..., ctr/... */
            } else if (S_ISREG(sb.st_mode) && (sb.st_mode & 077) != 0) {
                chmod(path, sb.st_mode & 0600);
            }
        }
        free(path);
    }
    return 0;
}

void cr_proc_forget(const char *state_dir, cr_proc *p)
{
    cr_proc_forget_iso(state_dir, NULL, p);
}

void cr_proc_forget_iso(const char *state_dir, const cr_iso *iso, cr_proc *p)
{
    cgroup_kill(p);
    /* Kept for a later job when empty, else removed (which fails
     * harmlessly while something still runs there). */
    cr_iso_job_release(iso, &p->iso, p->spec.ctr.image || p->spec.ctr.podman);
    char line[64];
    int n = snprintf(line, sizeof line, "F %lld\n", (long long)p->job);
    journal_append(state_dir, line, (size_t)n);
}

void cr_proc_init(cr_proc *p)
{
    memset(p, 0, sizeof *p);
    p->init_fd = -1;
}

void cr_proc_fini(cr_proc *p)
{
    if (p->init_fd >= 0) {
        close(p->init_fd);
        p->init_fd = -1;
    }
    CR_FREE(p->cgroup);
    cr_iso_job_fini(&p->iso);
    cr_job_spec_fini(&p->spec);
}

int cr_proc_journal_compact(const char *state_dir, const cr_proc *procs, size_t count, int force)
{
    char *path = journal_path(state_dir);
    struct stat sb;
    int rc = 0;
    if (!force && (stat(path, &sb) != 0 || (size_t)sb.st_size < JOURNAL_MAX)) {
        goto out;
    }
    char *tmp = cr_asprintf("%s.tmp", path);
    int tfd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    FILE *f = tfd >= 0 ? fdopen(tfd, "w") : NULL;
    if (!f && tfd >= 0) {
        close(tfd);
    }
    if (!f) {
        free(tmp);
        rc = CR_EIO;
        goto out;
    }
    for (size_t i = 0; i < count; i++) {
        json_t *j = record_json(&procs[i]);
        char *text = json_dumps(j, JSON_COMPACT);
        fprintf(f, "R %s\n", text);
        if (procs[i].state == CR_PROC_EXITED) {
            fprintf(f, "X %lld %d %s %d\n", (long long)procs[i].job, (int)procs[i].pid,
                    procs[i].signal ? "signal" : "exit",
                    procs[i].signal ? procs[i].signal : procs[i].exit_code);
        }
        free(text);
        json_decref(j);
    }
    /* A shim that appends between this rewrite and the rename loses its
     * line; only an adopted job needs it, and then reads as killed. */
    rc = fflush(f) == 0 && fsync(fileno(f)) == 0 ? 0 : CR_EIO;
    fclose(f);
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = CR_EIO;
    }
    free(tmp);
out:
    free(path);
    return rc;
}

/* Replay the journal: live records in start order, with their ends. */
int cr_proc_load_all(const char *state_dir, cr_proc **out, size_t *count)
{
    cr_proc *v = NULL;
    size_t n = 0, cap = 0;
    char *path = journal_path(state_dir);
    FILE *f = fopen(path, "r");
    free(path);
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    while (f && (len = getline(&line, &lcap, f)) > 0) {
        if (line[len - 1] != '\n') {
            break; /* a torn last line from a crash mid-write */
        }
        long long job = 0, pid = 0;
        int code = 0, sig = 0;
        if (line[0] == 'R' && line[1] == ' ') {
            json_t *j = json_loads(line + 2, 0, NULL);
            json_int_t jid = 0, ticks = 0, start_ns = 0;
            int jpid = 0;
            json_t *spec = NULL;
            cr_proc p;
            cr_proc_init(&p);
            p.init_fd = -1;
            const char *cg = j ? json_string_value(json_object_get(j, "cgroup")) : NULL;
            char err[256];
            if (j &&
                json_unpack(j, "{s:I,s:i,s:I,s?I,s:o}", "job", &jid, "pid", &jpid, "start_ticks",
                            &ticks, "start_ns", &start_ns, "spec", &spec) == 0 &&
                jid > 0 && jpid > 1 &&
                cr_job_spec_from_json(spec, "spec", &p.spec, err, sizeof err) == 0) {
                p.job = jid;
                p.pid = jpid;
                p.start_ticks = (uint64_t)ticks;
                p.start_ns = start_ns;
                p.adopted = 1;
                p.exit_code = -1; /* no end seen yet */
                p.cgroup = cg ? cr_strdup(cg) : NULL;
                p.pidns = json_is_true(json_object_get(j, "pidns"));
                cr_iso_job_from_json(json_object_get(j, "cgroups"), &p.iso);
                if (!p.iso.v2 && cg) {
                    p.iso.v2 = cr_strdup(cg); /* a record from before the v1 cgroups */
                }
                size_t k;
                for (k = 0; k < n && v[k].job != jid; k++) {
                }
                if (k < n) {
                    cr_proc_fini(&v[k]); /* a newer run of the same job */
                    v[k] = p;
                } else {
                    CR_GROW(v, n, cap);
                    v[n++] = p;
                }
            }
            json_decref(j);
        } else if (line[0] == 'X' && parse_exit(line + 2, &job, &pid, &code, &sig) == 0) {
            for (size_t k = 0; k < n; k++) {
                if (v[k].job == job && v[k].pid == pid) {
                    v[k].state = CR_PROC_EXITED;
                    v[k].exit_code = code;
                    v[k].signal = sig;
                }
            }
        } else if (line[0] == 'F' && sscanf(line + 2, "%lld", &job) == 1) {
            for (size_t k = 0; k < n; k++) {
                if (v[k].job == job) {
                    cr_proc_fini(&v[k]);
                    memmove(&v[k], &v[k + 1], (n - k - 1) * sizeof *v);
                    n--;
                    break;
                }
            }
        }
    }
    free(line);
    if (f) {
        fclose(f);
    }
    for (size_t k = 0; k < n; k++) {
        cr_proc *p = &v[k];
        if (p->state == CR_PROC_EXITED) {
            cgroup_kill(p); /* what it left behind (see cr_proc_reaped) */
            mark_oom(p);
            continue;
        }
        if (cr_proc_start_ticks(p->pid) == p->start_ticks && p->start_ticks != 0) {
            p->state = CR_PROC_RUNNING;
            p->exit_code = 0;
            refresh_job_pid(p);
        } else {
            /* Gone without a word: killed with its shim (SIGKILL to the group). */
            p->state = CR_PROC_EXITED;
            p->signal = SIGKILL;
            p->exit_code = 128 + SIGKILL;
            cgroup_kill(p);
            mark_oom(p);
        }
    }
    *out = v;
    *count = n;
    return cr_proc_journal_compact(state_dir, v, n, 1);
}
