/*
 * cli_stepd.c - `corral stepd`, a batch job's process on each of its nodes
 * (docs/slurm.md, "Batch jobs and srun").
 *
 * The agent runs it as the job's one process on each node, inside the
 * job's cgroups, as the job's user, with the job's environment. On the
 * first node it also runs the script once (`corral stepd -- SCRIPT ARGS`),
 * the batch step, with PATH beginning with a private directory where srun
 * and scontrol are this binary; it ends as the script ends. On the other
 * nodes it only waits for steps until the job is stopped.
 *
 * Steps: stepd listens on the abstract Unix socket CORRAL_STEPD_SOCK, one
 * JSON request per connection, answered with one JSON document; only the
 * node's agent connects (it relays srun's POST /v1/jobs/ID/step after
 * checking the step credential; the agent checks this side's uid, and
 * stepd serves only root and its own uid: anyone may connect to an
 * abstract socket):
 *   {"op":"start","step":S,"argv":[...],"env":["K=V",...],"cwd":DIR,
 *    "ntasks":K,"rank0":R,"ntasks_all":N,"nodeid":I,"nnodes":M,
 *    "gpus_per_task":G}                  -> {"ok":true}
 *   {"op":"poll","step":S,"off":[out0,err0,out1,err1,...]}
 *                                        -> {"tasks":[{"rank","out","err",
 *                                            "exit"|null,"signal"}...]}
 *   {"op":"kill","step":S,"signal":SIG}  -> {"ok":true}
 * Each task runs in a process group of its own (a kill reaches its
 * children), its stdout and stderr in files of a private directory that
 * poll reads from the offsets given (at most 256 KiB a stream a poll).
 * The node-local variables (CUDA_VISIBLE_DEVICES, the node's name and
 * rank) are stepd's own, not srun's; --gpus-per-task G gives local task i
 * the GPUs i*G.. of the node's.
 *
 * Single-threaded: a poll() loop over the socket with a 100 ms tick that
 * reaps children.
 */
#include "cr_cli.h"

#include "cli_int.h"

#include "cr_alloc.h"
#include "cr_buf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define STEP_REQ_MAX  (4u << 20)
#define STEP_POLL_MAX (256u << 10)
#define STEPD_TASKS   4096

typedef struct step_task {
    int64_t step;
    int rank;
    pid_t pid;  /* its process group too */
    int exited; /* 1 once reaped */
    int code, sig;
} step_task;

typedef struct stepd {
    char dir[4096]; /* private: bin/ and the tasks' output files */
    step_task *tasks;
    size_t ntasks;
    pid_t batch; /* the script, 0 when none */
    int batch_status;
    int batch_done;
} stepd;

static volatile sig_atomic_t got_term;

static void strv_free(char **v)
{
    for (char **p = v; p && *p; p++) {
        free(*p);
    }
    free(v);
}

static void on_term(int sig)
{
    got_term = sig;
}

/* "K=V" of name in the environment of this process, or NULL. */
static const char *own_env(const char *name)
{
    return getenv(name);
}

/* The node-local names srun's environment must not override. */
static int node_local(const char *kv)
{
    static const char *const names[] = {
        "CUDA_VISIBLE_DEVICES", "CORRAL_NODE",        "SLURMD_NODENAME",
        "CORRAL_STEPD_SOCK",    "NODE_RANK",          "GROUP_RANK",
        "PET_NODE_RANK",        "SLURM_GPUS_ON_NODE", NULL};
    size_t kl = strcspn(kv, "=");
    for (size_t i = 0; names[i]; i++) {
        if (strlen(names[i]) == kl && strncmp(kv, names[i], kl) == 0) {
            return 1;
        }
    }
    return strncmp(kv, "CUDA_MPS_", 9) == 0 || strncmp(kv, "CORRAL_GPU_", 11) == 0;
}

static char *task_file(const stepd *d, int64_t step, int rank, const char *stream)
{
    return cr_asprintf("%s/%lld.%d.%s", d->dir, (long long)step, rank, stream);
}

/* The GPUs of local task i of g each: a part of the node's list. */
static char *task_gpus(int i, int g)
{
    const char *all = own_env("CUDA_VISIBLE_DEVICES");
    if (!all || g <= 0) {
        return cr_strdup(all ? all : "");
    }
    char *copy = cr_strdup(all), *save = NULL;
    char *list[256];
    int n = 0;
    for (char *t = strtok_r(copy, ",", &save); t && n < 256; t = strtok_r(NULL, ",", &save)) {
        list[n++] = t;
    }
    cr_buf b;
    cr_buf_init(&b);
    for (int k = 0; k < g && n > 0; k++) {
        cr_buf_printf(&b, "%s%s", k ? "," : "", list[(i * g + k) % n]);
    }
    free(copy);
    return cr_buf_take(&b);
}

static int start_step(stepd *d, json_t *r, char *err, size_t errlen)
{
    json_int_t step = json_integer_value(json_object_get(r, "step"));
    json_int_t ntasks = json_integer_value(json_object_get(r, "ntasks"));
    json_int_t rank0 = json_integer_value(json_object_get(r, "rank0"));
    json_int_t all = json_integer_value(json_object_get(r, "ntasks_all"));
    json_int_t nodeid = json_integer_value(json_object_get(r, "nodeid"));
    json_int_t nnodes = json_integer_value(json_object_get(r, "nnodes"));
    json_int_t gpt = json_integer_value(json_object_get(r, "gpus_per_task"));
    json_t *argv = json_object_get(r, "argv"), *env = json_object_get(r, "env");
    const char *cwd = json_string_value(json_object_get(r, "cwd"));
    if (step < 0 || ntasks < 1 || ntasks > 1024 || rank0 < 0 || all < ntasks ||
        !json_is_array(argv) || json_array_size(argv) == 0 || json_array_size(argv) > 4096 ||
        !json_is_array(env) || d->ntasks + (size_t)ntasks > STEPD_TASKS) {
        snprintf(err, errlen, "a bad step request");
        return -1;
    }
    for (size_t i = 0; i < d->ntasks; i++) {
        if (d->tasks[i].step == step) {
            snprintf(err, errlen, "step %lld exists", (long long)step);
            return -1;
        }
    }
    size_t na = json_array_size(argv), ne = json_array_size(env);
    char **av = cr_calloc(na + 1, sizeof *av);
    for (size_t i = 0; i < na; i++) {
        const char *s = json_string_value(json_array_get(argv, i));
        av[i] = cr_strdup(s ? s : "");
    }
    for (json_int_t t = 0; t < ntasks; t++) {
        int rank = (int)(rank0 + t);
        /* srun's environment, then this node's own, then the task's */
        char **ev = cr_calloc(ne + 64 + 24, sizeof *ev);
        size_t n = 0;
        for (size_t i = 0; i < ne; i++) {
            const char *kv = json_string_value(json_array_get(env, i));
            if (kv && strchr(kv, '=') && !node_local(kv) && n < ne) {
                ev[n++] = cr_strdup(kv);
            }
        }
        extern char **environ;
        for (char **e = environ; *e && n < ne + 64; e++) {
            if (node_local(*e)) {
                ev[n++] = cr_strdup(*e);
            }
        }
        char *gpus = task_gpus((int)t, (int)gpt);
        char *vars[] = {
            cr_asprintf("SLURM_STEP_ID=%lld", (long long)step),
            cr_asprintf("SLURM_STEPID=%lld", (long long)step),
            cr_asprintf("SLURM_PROCID=%d", rank),
            cr_asprintf("SLURM_LOCALID=%lld", (long long)t),
            cr_asprintf("SLURM_NODEID=%lld", (long long)nodeid),
            cr_asprintf("SLURM_NTASKS=%lld", (long long)all),
            cr_asprintf("SLURM_NPROCS=%lld", (long long)all),
            cr_asprintf("SLURM_STEP_NUM_TASKS=%lld", (long long)all),
            cr_asprintf("SLURM_STEP_NUM_NODES=%lld", (long long)nnodes),
            cr_asprintf("SLURM_STEP_TASKS_PER_NODE=%lld", (long long)ntasks),
            cr_asprintf("RANK=%d", rank),
            cr_asprintf("LOCAL_RANK=%lld", (long long)t),
            cr_asprintf("WORLD_SIZE=%lld", (long long)all),
            cr_asprintf("LOCAL_WORLD_SIZE=%lld", (long long)ntasks),
            gpt > 0 ? cr_asprintf("CUDA_VISIBLE_DEVICES=%s", gpus) : NULL,
        };
        free(gpus);
        for (size_t k = 0; k < sizeof vars / sizeof vars[0]; k++) {
            if (!vars[k]) {
                continue;
            }
            size_t kl = strcspn(vars[k], "=") + 1;
            size_t i;
            for (i = 0; i < n && strncmp(ev[i], vars[k], kl) != 0; i++) {
            }
            if (i < n) {
                free(ev[i]);
                ev[i] = vars[k];
            } else {
                ev[n++] = vars[k];
            }
        }
        ev[n] = NULL;
        char *out = task_file(d, step, rank, "out"), *errf = task_file(d, step, rank, "err");
        int ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        int efd = open(errf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        free(out);
        free(errf);
        pid_t pid = ofd >= 0 && efd >= 0 ? fork() : -1;
        if (pid == 0) {
            setpgid(0, 0);
            struct sigaction dfl = {.sa_handler = SIG_DFL};
            sigaction(SIGTERM, &dfl, NULL);
            sigaction(SIGINT, &dfl, NULL);
            int nul = open("/dev/null", O_RDONLY);
            dup2(nul, 0);
            dup2(ofd, 1);
            dup2(efd, 2);
            syscall(SYS_close_range, 3U, ~0U, 0U);
            if (cwd && *cwd && chdir(cwd) != 0) {
                fprintf(stderr, "srun: cannot chdir to %s: %s\n", cwd, strerror(errno));
                _exit(1);
            }
            environ = ev;
            execvp(av[0], av);
            fprintf(stderr, "srun: %s: %s\n", av[0], strerror(errno));
            _exit(errno == ENOENT ? 127 : 126);
        }
        if (ofd >= 0) {
            close(ofd);
        }
        if (efd >= 0) {
            close(efd);
        }
        strv_free(ev);
        if (pid < 0) {
            strv_free(av);
            snprintf(err, errlen, "cannot start task %d: %s", rank, strerror(errno));
            return -1;
        }
        setpgid(pid, pid);
        d->tasks = cr_reallocarray(d->tasks, d->ntasks + 1, sizeof *d->tasks);
        d->tasks[d->ntasks++] = (step_task){step, rank, pid, 0, 0, 0};
    }
    strv_free(av);
    return 0;
}

/* At most max bytes of file from off, cut back to whole UTF-8 characters
 * and with invalid bytes as '?': a JSON string. */
static json_t *read_from(const char *path, int64_t off, size_t max, int64_t *next)
{
    char *buf = cr_malloc(max + 1);
    size_t n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && off >= 0) {
        ssize_t r = pread(fd, buf, max, off);
        n = r > 0 ? (size_t)r : 0;
    }
    if (fd >= 0) {
        close(fd);
    }
    /* an incomplete character at the end waits for the next poll */
    size_t cut = n;
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = (unsigned char)buf[n - back];
        if ((c & 0xC0) == 0x80) {
            continue;
        }
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (need > back) {
            cut = n - back;
        }
        break;
    }
    n = cut;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)buf[i];
        size_t need = c < 0x80 ? 1 : c >= 0xF0 && c < 0xF5 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
        size_t k = 1;
        while (need > 1 && k < need && i + k < n && ((unsigned char)buf[i + k] & 0xC0) == 0x80) {
            k++;
        }
        if (need == 0 || k < need || c == 0) {
            buf[i] = '?';
            i++;
            continue;
        }
        i += need;
    }
    buf[n] = '\0';
    *next = off + (int64_t)n;
    json_t *s = json_stringn(buf, n);
    free(buf);
    return s ? s : json_string("");
}

static json_t *poll_step(stepd *d, json_t *r)
{
    json_int_t step = json_integer_value(json_object_get(r, "step"));
    json_t *off = json_object_get(r, "off");
    json_t *tasks = json_array();
    size_t k = 0;
    for (size_t i = 0; i < d->ntasks; i++) {
        step_task *t = &d->tasks[i];
        if (t->step != step) {
            continue;
        }
        int64_t o = json_integer_value(json_array_get(off, 2 * k));
        int64_t e = json_integer_value(json_array_get(off, 2 * k + 1));
        k++;
        char *op = task_file(d, step, t->rank, "out"), *ep = task_file(d, step, t->rank, "err");
        int exited = t->exited; /* read before the files: all of its output is there */
        int64_t on = o, en = e;
        json_t *js =
            json_pack("{s:i,s:o,s:o}", "rank", t->rank, "out", read_from(op, o, STEP_POLL_MAX, &on),
                      "err", read_from(ep, e, STEP_POLL_MAX, &en));
        free(op);
        free(ep);
        /* done only once its output has been read whole */
        bool more = on - o == (int64_t)STEP_POLL_MAX || en - e == (int64_t)STEP_POLL_MAX;
        json_object_set_new(js, "exit", exited && !more ? json_integer(t->code) : json_null());
        json_object_set_new(js, "signal", json_integer(t->sig));
        json_array_append_new(tasks, js);
    }
    return json_pack("{s:o}", "tasks", tasks);
}

static void kill_step(stepd *d, int64_t step, int sig)
{
    for (size_t i = 0; i < d->ntasks; i++) {
        if ((step < 0 || d->tasks[i].step == step) && !d->tasks[i].exited) {
            kill(-d->tasks[i].pid, sig);
        }
    }
}

static void serve_one(stepd *d, int fd)
{
    cr_buf in;
    cr_buf_init(&in);
    char buf[65536];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0 || in.len + (size_t)n > STEP_REQ_MAX) {
            break;
        }
        cr_buf_append(&in, buf, (size_t)n);
    }
    json_t *r = in.len ? json_loadb(in.data, in.len, 0, NULL) : NULL;
    cr_buf_fini(&in);
    const char *op = json_string_value(json_object_get(r, "op"));
    json_t *ans = NULL;
    char err[300] = "";
    if (op && strcmp(op, "start") == 0) {
        ans = start_step(d, r, err, sizeof err) == 0 ? json_pack("{s:b}", "ok", 1) : NULL;
    } else if (op && strcmp(op, "poll") == 0) {
        ans = poll_step(d, r);
    } else if (op && strcmp(op, "kill") == 0) {
        json_int_t sig = json_integer_value(json_object_get(r, "signal"));
        kill_step(d, json_integer_value(json_object_get(r, "step")),
                  sig > 0 && sig < 65 ? (int)sig : SIGTERM);
        ans = json_pack("{s:b}", "ok", 1);
    } else {
        snprintf(err, sizeof err, "unknown op");
    }
    if (!ans) {
        ans = json_pack("{s:b,s:s}", "ok", 0, "error", err);
    }
    char *text = json_dumps(ans, JSON_COMPACT);
    size_t len = strlen(text), done = 0;
    while (done < len) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            break;
        }
        done += (size_t)w;
    }
    free(text);
    json_decref(ans);
    json_decref(r);
}

static void reap(stepd *d)
{
    for (;;) {
        int ws = 0;
        pid_t w = waitpid(-1, &ws, WNOHANG);
        if (w <= 0) {
            return;
        }
        if (w == d->batch) {
            d->batch_status = ws;
            d->batch_done = 1;
            continue;
        }
        for (size_t i = 0; i < d->ntasks; i++) {
            if (d->tasks[i].pid == w) {
                d->tasks[i].exited = 1;
                d->tasks[i].code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
                d->tasks[i].sig = WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
            }
        }
    }
}

/* bin/srun and bin/scontrol: this binary. */
static int make_bin(const stepd *d)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        return -1;
    }
    self[n] = '\0';
    char *bin = cr_asprintf("%s/bin", d->dir);
    int rc = mkdir(bin, 0700);
    static const char *const names[] = {"srun", "scontrol"};
    for (size_t i = 0; rc == 0 && i < 2; i++) {
        char *l = cr_asprintf("%s/%s", bin, names[i]);
        rc = symlink(self, l);
        free(l);
    }
    free(bin);
    return rc;
}

/* Remove stepd's directory: its files, bin/ and its links (nothing below
 * is a directory the job made: the tasks' files are stepd's own). */
static void remove_dir(const char *dir, int depth)
{
    DIR *dh = opendir(dir);
    struct dirent *e;
    while (dh && (e = readdir(dh))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        char *p = cr_asprintf("%s/%s", dir, e->d_name);
        if (e->d_type == DT_DIR && depth < 2) {
            remove_dir(p, depth + 1);
        } else {
            unlink(p);
        }
        free(p);
    }
    if (dh) {
        closedir(dh);
    }
    rmdir(dir);
}

int cr_stepd_main(int argc, char **argv)
{
    const char *name = getenv("CORRAL_STEPD_SOCK");
    if (!name || !*name || strlen(name) > 100) {
        fprintf(stderr, "corral stepd: run by the agent for a batch job (no CORRAL_STEPD_SOCK)\n");
        return 2;
    }
    int cmd = 1; /* argv[cmd..]: the batch step after "--" */
    if (cmd < argc && strcmp(argv[cmd], "--") == 0) {
        cmd++;
    }
    stepd d;
    memset(&d, 0, sizeof d);
    const char *tmp = getenv("TMPDIR");
    snprintf(d.dir, sizeof d.dir, "%s/corral-step-XXXXXX", tmp && *tmp == '/' ? tmp : "/tmp");
    if (!mkdtemp(d.dir) || make_bin(&d) != 0) {
        fprintf(stderr, "corral stepd: cannot make its directory %s: %s\n", d.dir, strerror(errno));
        return 1;
    }
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t nl = strlen(name);
    memcpy(sa.sun_path + 1, name, nl); /* abstract: sun_path[0] is NUL */
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + nl);
    if (ls < 0 || bind(ls, (struct sockaddr *)&sa, salen) != 0 || listen(ls, 64) != 0) {
        fprintf(stderr, "corral stepd: cannot listen on @%s: %s\n", name, strerror(errno));
        return 1;
    }
    struct sigaction st = {.sa_handler = on_term};
    sigaction(SIGTERM, &st, NULL);
    sigaction(SIGINT, &st, NULL);
    sigaction(SIGHUP, &st, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (cmd < argc) {
        char *path =
            cr_asprintf("%s/bin:%s", d.dir, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
        setenv("PATH", path, 1);
        free(path);
        setenv("CORRAL_STEP_DIR", d.dir, 1);
        d.batch = fork();
        if (d.batch == 0) {
            struct sigaction dfl = {.sa_handler = SIG_DFL};
            sigaction(SIGTERM, &dfl, NULL);
            sigaction(SIGINT, &dfl, NULL);
            sigaction(SIGHUP, &dfl, NULL);
            signal(SIGPIPE, SIG_DFL);
            close(ls);
            execvp(argv[cmd], argv + cmd); /* the script stays on fd 3 */
            fprintf(stderr, "corral: cannot run %s: %s\n", argv[cmd], strerror(errno));
            _exit(errno == ENOENT ? 127 : 126);
        }
        if (d.batch < 0) {
            fprintf(stderr, "corral stepd: fork: %s\n", strerror(errno));
            return 1;
        }
        close(3); /* the script: the batch step's alone */
    }
    int forwarded = 0;
    while (!(d.batch && d.batch_done)) {
        if (got_term && !forwarded) {
            /* the job is being stopped: its steps too (the batch step got
             * the signal with the job's process group) */
            kill_step(&d, -1, SIGTERM);
            forwarded = 1;
            if (!d.batch) {
                break;
            }
        }
        struct pollfd p = {ls, POLLIN, 0};
        int n = poll(&p, 1, 100);
        if (n > 0 && (p.revents & POLLIN)) {
            int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
            /* Anyone on the node can connect to an abstract socket: only
             * root (the agent) and the job's own user are served. */
            struct ucred cred;
            socklen_t cl = sizeof cred;
            if (fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 &&
                (cred.uid == 0 || cred.uid == getuid())) {
                struct timeval tv = {10, 0};
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
                serve_one(&d, fd);
            }
            if (fd >= 0) {
                close(fd);
            }
        }
        reap(&d);
    }
    /* the batch step ended: so does the job, its steps with it */
    kill_step(&d, -1, SIGTERM);
    close(ls);
    reap(&d);
    free(d.tasks);
    remove_dir(d.dir, 0);
    int ws = d.batch_status;
    if (d.batch && WIFSIGNALED(ws)) {
        signal(WTERMSIG(ws), SIG_DFL);
        raise(WTERMSIG(ws));
    }
    return d.batch ? (WIFEXITED(ws) ? WEXITSTATUS(ws) : 1) : 0;
}
