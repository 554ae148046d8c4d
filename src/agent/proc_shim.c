/*
 * proc_shim.c - start the shim without a fork of the agent (proc_int.h).
 *
 * The packed form is a flat run of little records, written and read by the
 * same binary: a number is an int64_t; a string its length (-1: NULL), its
 * bytes and a NUL; a string vector its count (-1: NULL) and the strings.
 */
#include "proc_int.h"

#include "cr_alloc.h"

#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Bounds one job's packed arguments (its environments, paths, argv). */
#define SHIM_PACK_MAX (64 << 20)
/* How long the agent waits for the zygote's answer. */
#define ZYGOTE_REPLY_MS 10000

extern char **environ;

typedef struct pack_buf {
    char *p;
    size_t len, cap;
} pack_buf;

static void put(pack_buf *b, const void *d, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) {
            cap *= 2;
        }
        b->p = cr_realloc(b->p, cap);
        b->cap = cap;
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}

static void put_num(pack_buf *b, int64_t v)
{
    put(b, &v, sizeof v);
}

static void put_str(pack_buf *b, const char *s)
{
    if (!s) {
        put_num(b, -1);
        return;
    }
    size_t n = strlen(s);
    put_num(b, (int64_t)n);
    put(b, s, n + 1);
}

/* n < 0: NULL-ended v (NULL allowed); else exactly n entries, each may be NULL. */
static void put_strv(pack_buf *b, char *const *v, int64_t n)
{
    if (!v) {
        put_num(b, -1);
        return;
    }
    if (n < 0) {
        for (n = 0; v[n]; n++) {
        }
    }
    put_num(b, n);
    for (int64_t i = 0; i < n; i++) {
        put_str(b, v[i]);
    }
}

static void pack(pack_buf *b0, const shim_args *a)
{
    pack_buf b = {NULL, 0, 0};
    put_num(&b, 0); /* the length, set below */
    put_str(&b, a->exe);
    put_strv(&b, a->argv, -1);
    put_num(&b, a->ntasks);
    for (int t = 0; t < a->ntasks; t++) {
        put_strv(&b, a->envps[t], -1);
    }
    put_str(&b, a->workdir);
    put_str(&b, a->exec_msg);
    put_str(&b, a->journal);
    put_num(&b, a->job);
    put_strv(&b, a->out_paths, a->ntasks);
    put_strv(&b, a->err_paths, a->ntasks);
    put_strv(&b, a->user_out, a->ntasks);
    put_strv(&b, a->user_err, a->ntasks);
    put_strv(&b, a->cgroup_procs, -1);
    put_num(&b, a->uid);
    put_num(&b, a->gid);
    put_num(&b, (int64_t)a->ngroups);
    for (size_t i = 0; i < a->ngroups; i++) {
        put_num(&b, a->groups[i]);
    }
    put_str(&b, a->script);
    put_num(&b, a->keep_root);
    put_num(&b, a->pidns);
    put_num(&b, a->ipcns);
    put_strv(&b, a->dirs, -1);
    put_num(&b, a->log_max);
    put_str(&b, a->cap_notice);
    put_str(&b, a->capped_mark);
    put_str(&b, a->nospace_mark);
    put_num(&b, a->append);
    int64_t len = (int64_t)(b.len - sizeof len);
    memcpy(b.p, &len, sizeof len);
    *b0 = b;
}

typedef struct unpack_cur {
    char *p, *end;
    int bad;
} unpack_cur;

static int64_t get_num(unpack_cur *c)
{
    int64_t v = 0;
    if (c->bad || (size_t)(c->end - c->p) < sizeof v) {
        c->bad = 1;
        return 0;
    }
    memcpy(&v, c->p, sizeof v);
    c->p += sizeof v;
    return v;
}

static char *get_str(unpack_cur *c)
{
    int64_t n = get_num(c);
    if (c->bad || n < 0) {
        return NULL;
    }
    if ((uint64_t)n >= (uint64_t)(c->end - c->p) || c->p[n] != '\0') {
        c->bad = 1;
        return NULL;
    }
    char *s = c->p;
    c->p += n + 1;
    return s;
}

/* want >= 0: the count must be want. The vector is NULL-ended either way. */
static char **get_strv(unpack_cur *c, int64_t want)
{
    int64_t n = get_num(c);
    if (c->bad || n < 0) {
        return NULL;
    }
    if ((want >= 0 && n != want) || (uint64_t)n > (uint64_t)(c->end - c->p) / sizeof(int64_t)) {
        c->bad = 1;
        return NULL;
    }
    char **v = cr_calloc((size_t)n + 1, sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        v[i] = get_str(c);
    }
    return v;
}

static int unpack(char *buf, size_t len, shim_args *out)
{
    unpack_cur c = {buf, buf + len, 0};
    shim_args a;
    memset(&a, 0, sizeof a);
    a.exe = get_str(&c);
    a.argv = get_strv(&c, -1);
    int64_t nt = get_num(&c);
    if (c.bad || nt < 1 || nt > 4096) {
        return -1;
    }
    a.ntasks = (int)nt;
    char ***envps = cr_calloc((size_t)nt, sizeof *envps);
    for (int64_t t = 0; t < nt; t++) {
        envps[t] = get_strv(&c, -1);
    }
    a.envps = envps;
    a.workdir = get_str(&c);
    a.exec_msg = get_str(&c);
    a.journal = get_str(&c);
    a.job = get_num(&c);
    a.out_paths = get_strv(&c, nt);
    a.err_paths = get_strv(&c, nt);
    a.user_out = get_strv(&c, nt);
    a.user_err = get_strv(&c, nt);
    a.cgroup_procs = get_strv(&c, -1);
    a.uid = get_num(&c);
    a.gid = get_num(&c);
    int64_t ng = get_num(&c);
    if (c.bad || ng < 0 || ng > 65536) {
        return -1;
    }
    gid_t *groups = cr_calloc((size_t)ng + 1, sizeof *groups);
    for (int64_t i = 0; i < ng; i++) {
        groups[i] = (gid_t)get_num(&c);
    }
    a.groups = groups;
    a.ngroups = (size_t)ng;
    a.script = get_str(&c);
    a.keep_root = (int)get_num(&c);
    a.pidns = (int)get_num(&c);
    a.ipcns = (int)get_num(&c);
    a.dirs = get_strv(&c, -1);
    a.log_max = get_num(&c);
    a.cap_notice = get_str(&c);
    a.capped_mark = get_str(&c);
    a.nospace_mark = get_str(&c);
    a.append = (int)get_num(&c);
    a.script_fd = a.out_fd = a.err_fd = a.null_fd = -1;
    if (c.bad || c.p != c.end || !a.exe || !a.argv || !a.argv[0] || !a.workdir || !a.exec_msg ||
        !a.journal || !a.dirs || !a.out_paths || !a.err_paths || !a.user_out || !a.user_err ||
        !a.cap_notice || !a.capped_mark || !a.nospace_mark) {
        return -1;
    }
    for (int64_t t = 0; t < nt; t++) {
        if (!envps[t] || !a.out_paths[t] || !a.err_paths[t]) {
            return -1;
        }
    }
    *out = a;
    return 0;
}

/* --- the zygote ------------------------------------------------------- */

static int io_full(int fd, void *buf, size_t len, int out)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = out ? send(fd, p, len, MSG_NOSIGNAL) : read(fd, p, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

void cr__proc_zygote_main(int fd, pid_t agent, void (*run)(shim_args *))
{
    /* It ends with the thread that started it (the agent's main loop), or
     * at the end of its socket. */
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != agent) {
        _exit(0);
    }
    prctl(PR_SET_NAME, "corral-zygote", 0, 0, 0);
    for (;;) {
        int64_t len = 0;
        if (io_full(fd, &len, sizeof len, 0) != 0) {
            _exit(0);
        }
        if (len <= 0 || len > SHIM_PACK_MAX) {
            _exit(1);
        }
        char *buf = cr_malloc((size_t)len);
        if (io_full(fd, buf, (size_t)len, 0) != 0) {
            _exit(0);
        }
        /* The shim is the agent's child (CLONE_PARENT): the agent waits
         * for it, signals it and reaps it as it did a fork of its own. */
        long c = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, NULL, NULL, NULL, NULL);
        if (c == 0) {
            shim_args a;
            close(fd);
            if (unpack(buf, (size_t)len, &a) != 0) {
                _exit(126);
            }
            prctl(PR_SET_NAME, "corral-shim", 0, 0, 0);
            run(&a);
            _exit(126);
        }
        int32_t reply = c > 0 ? (int32_t)c : -(int32_t)errno;
        free(buf);
        if (io_full(fd, &reply, sizeof reply, 1) != 0) {
            _exit(0);
        }
    }
}

/*
 * The agent's zygote: its socket and pid; -1 when none runs. One per
 * process, used by the thread that starts jobs (the agent's main loop,
 * cr_proc.h), so no lock.
 */
static int zygote_fd = -1;
static pid_t zygote_pid = -1;

static void zygote_stop(void)
{
    if (zygote_fd >= 0) {
        close(zygote_fd);
        zygote_fd = -1;
    }
    if (zygote_pid > 0) {
        kill(zygote_pid, SIGKILL); /* reaped by the agent's waitpid(-1), or here */
        waitpid(zygote_pid, NULL, WNOHANG);
        zygote_pid = -1;
    }
}

/* The few variables of the agent's environment the zygote's own start may
 * need (a library path, the sanitizers' options); nothing else of it (a
 * join token, say) reaches it or the shims. */
static int zygote_env_var(const char *e)
{
    static const char *const keep[] = {
        "LD_LIBRARY_PATH=", "ASAN_OPTIONS=", "UBSAN_OPTIONS=", "LSAN_OPTIONS=", "TSAN_OPTIONS="};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        if (strncmp(e, keep[i], strlen(keep[i])) == 0) {
            return 1;
        }
    }
    return 0;
}

/* The zygote's last argument names the agent's journal (STATE-DIR/jobs.journal):
 * nothing reads it, but ps and pgrep show whose zygote, and whose shims
 * (clones of it), a process is, as they did when the shim was a fork of
 * the agent (tests/integration/reap.sh finds a killed agent's shims so). */
static int zygote_start(const char *label)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        return errno;
    }
    char *env[8];
    size_t ne = 0;
    for (char **e = environ; e && *e && ne + 1 < sizeof env / sizeof env[0]; e++) {
        if (zygote_env_var(*e)) {
            env[ne++] = *e;
        }
    }
    env[ne] = NULL;
    char self[24];
    snprintf(self, sizeof self, "%d", (int)getpid());
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_adddup2(&fa, sv[1], CR__PROC_SHIM_FD);
    /* Its own session (nothing sent to the agent's group reaches it); what
     * a shim ignores stays blocked until the shim does (proc.c run_shim):
     * the shims inherit the mask. */
    sigset_t mask;
    sigemptyset(&mask);
    static const int sigs[] = {SIGTERM, SIGINT,  SIGHUP,  SIGUSR1,
                               SIGUSR2, SIGQUIT, SIGALRM, SIGWINCH};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        sigaddset(&mask, sigs[i]);
    }
    posix_spawnattr_setsigmask(&at, &mask);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK);
    char *argv[] = {"corral-zygote", CR__PROC_ZYGOTE_ARG, self, (char *)label, NULL};
    pid_t pid = -1;
    int rc = sv[1] == CR__PROC_SHIM_FD ? EBADF /* dup2 onto itself would leave it close-on-exec */
                                       : posix_spawn(&pid, "/proc/self/exe", &fa, &at, argv, env);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    close(sv[1]);
    if (rc != 0) {
        close(sv[0]);
        return rc;
    }
    zygote_fd = sv[0];
    zygote_pid = pid;
    return 0;
}

/* One request: 0 and *pid, or an errno value (the zygote is then gone). */
static int zygote_ask(const pack_buf *b, pid_t *pid)
{
    int32_t reply = 0;
    struct pollfd pf = {zygote_fd, POLLIN, 0};
    if (io_full(zygote_fd, b->p, b->len, 1) != 0) {
        int e = errno ? errno : EPIPE;
        zygote_stop();
        return e;
    }
    /* It answers within microseconds; a stopped or wedged zygote must not
     * hold the agent's loop. */
    if (poll(&pf, 1, ZYGOTE_REPLY_MS) != 1 || io_full(zygote_fd, &reply, sizeof reply, 0) != 0) {
        zygote_stop();
        return ETIMEDOUT;
    }
    if (reply < 0) {
        return -reply;
    }
    *pid = (pid_t)reply;
    return 0;
}

int cr__proc_shim_spawn(const shim_args *a, pid_t *pid)
{
    pack_buf b;
    pack(&b, a);
    int rc = EINVAL;
    if (b.len - sizeof(int64_t) > SHIM_PACK_MAX) {
        rc = E2BIG;
        goto out;
    }
    /* A zygote that died (or was killed) is started again, once a job. */
    for (int tries = 0; tries < 2; tries++) {
        if (zygote_fd < 0 && (rc = zygote_start(a->journal)) != 0) {
            goto out;
        }
        if ((rc = zygote_ask(&b, pid)) == 0 || zygote_fd >= 0) {
            goto out;
        }
    }
out:
    free(b.p);
    return rc;
}
