/*
 * proc.c - the job supervisor: shim, stop, reap, re-adopt. See cr_proc.h.
 */
#include "cr_proc.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_time.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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
    return cr_asprintf("%s/logs/%lld.%s", state_dir, (long long)job, stream);
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

static void write_file_safe(const char *path, const char *a, long long v)
{
    char buf[64];
    size_t n = strlen(a);
    memcpy(buf, a, n);
    n += fmt_int(buf + n, v);
    buf[n++] = '\n';
    /* Written in place: it is read only once the shim that writes it is gone. */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        ssize_t w = write(fd, buf, n);
        (void)w;
        close(fd);
    }
}

static int write_record(const char *state_dir, const cr_proc *p)
{
    json_t *j = json_pack("{s:I,s:i,s:I,s:I,s:o}", "job", (json_int_t)p->job, "pid", (int)p->pid,
                          "start_ticks", (json_int_t)p->start_ticks, "start_ns",
                          (json_int_t)p->start_ns, "spec", cr_job_spec_to_json(&p->spec));
    char *tmp = cr_asprintf("%s/jobs/%lld.tmp", state_dir, (long long)p->job);
    char *fin = cr_asprintf("%s/jobs/%lld.json", state_dir, (long long)p->job);
    int rc = json_dump_file(j, tmp, JSON_COMPACT) == 0 && rename(tmp, fin) == 0 ? 0 : CR_EIO;
    json_decref(j);
    free(tmp);
    free(fin);
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

int cr_proc_spawn(const char *state_dir, const char *node, const cr_job_spec *spec,
                  char *const *base_env, cr_proc *p, char *err, size_t errlen)
{
    int rc = 0, out_fd = -1, err_fd = -1, null_fd = -1;
    char *dir = cr_asprintf("%s/jobs", state_dir);
    char *logdir = cr_asprintf("%s/logs", state_dir);
    char *out_path = cr_proc_log_path(state_dir, spec->job, "out");
    char *err_path = cr_proc_log_path(state_dir, spec->job, "err");
    char *exit_path = cr_asprintf("%s/%lld.exit", dir, (long long)spec->job);
    char *workdir = spec->workdir ? cr_strdup(spec->workdir) : cr_asprintf("%s/work", state_dir);
    char **envp = cr_job_env(spec, base_env, node);
    char *exe = resolve(spec->argv[0], envp);
    char *exec_msg = cr_asprintf("corral: cannot run '%s' in %s (errno ", spec->argv[0], workdir);

    if (cr_mkdir_p(dir, 0755) < 0 || cr_mkdir_p(logdir, 0755) < 0) {
        snprintf(err, errlen, "job %lld: cannot create %s: %s", (long long)spec->job, dir,
                 strerror(errno));
        rc = CR_EIO;
        goto out;
    }
    if (!spec->workdir) {
        cr_mkdir_p(workdir, 0755);
    }
    if (spec->checkpoint_dir) {
        cr_mkdir_p(spec->checkpoint_dir, 0755); /* best effort: it may be remote storage */
    }
    unlink(exit_path);
    out_fd = open(out_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    err_fd = open(err_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (out_fd < 0 || err_fd < 0 || null_fd < 0) {
        snprintf(err, errlen, "job %lld: cannot open log %s: %s", (long long)spec->job, out_path,
                 strerror(errno));
        rc = CR_EIO;
        goto out;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "job %lld: fork: %s", (long long)spec->job, strerror(errno));
        rc = CR_EAGAIN;
        goto out;
    }
    if (pid == 0) {
        /* The shim. Only async-signal-safe calls from here on. */
        setsid();
        struct sigaction ign;
        memset(&ign, 0, sizeof ign);
        ign.sa_handler = SIG_IGN;
        sigaction(SIGTERM, &ign, NULL);
        sigaction(SIGINT, &ign, NULL);
        sigaction(SIGHUP, &ign, NULL);
        pid_t c = fork();
        if (c == 0) {
            struct sigaction dfl;
            memset(&dfl, 0, sizeof dfl);
            dfl.sa_handler = SIG_DFL;
            sigaction(SIGTERM, &dfl, NULL);
            sigaction(SIGINT, &dfl, NULL);
            sigaction(SIGHUP, &dfl, NULL);
            sigaction(SIGPIPE, &dfl, NULL);
            sigset_t none;
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, NULL);
            dup2(null_fd, 0);
            dup2(out_fd, 1);
            dup2(err_fd, 2);
            if (chdir(workdir) == 0) {
                execve(exe, spec->argv, envp);
            }
            int e = errno;
            char num[32];
            size_t nl = fmt_int(num, e);
            ssize_t w = write(2, exec_msg, strlen(exec_msg));
            w = write(2, num, nl);
            w = write(2, ")\n", 2);
            (void)w;
            _exit(e == ENOENT ? 127 : 126);
        }
        if (c < 0) {
            write_file_safe(exit_path, "exit ", 125);
            _exit(1);
        }
        int st = 0;
        while (waitpid(c, &st, 0) < 0 && errno == EINTR) {
        }
        if (WIFSIGNALED(st)) {
            write_file_safe(exit_path, "signal ", WTERMSIG(st));
        } else {
            write_file_safe(exit_path, "exit ", WEXITSTATUS(st));
        }
        _exit(0);
    }
    memset(p, 0, sizeof *p);
    p->job = spec->job;
    p->pid = pid;
    p->start_ticks = cr_proc_start_ticks(pid);
    p->state = CR_PROC_RUNNING;
    p->start_ns = cr_now_ns();
    copy_spec(&p->spec, spec);
    if (write_record(state_dir, p) < 0) {
        /* The job runs; only a restart of the agent would lose track of it. */
        snprintf(err, errlen, "job %lld: cannot write record in %s", (long long)spec->job, dir);
    }
out:
    if (out_fd >= 0) {
        close(out_fd);
    }
    if (err_fd >= 0) {
        close(err_fd);
    }
    if (null_fd >= 0) {
        close(null_fd);
    }
    cr_strv_free(envp);
    free(exe);
    free(exec_msg);
    free(dir);
    free(logdir);
    free(out_path);
    free(err_path);
    free(exit_path);
    free(workdir);
    return rc;
}

void cr_proc_stop(cr_proc *p, int64_t grace_ns, int64_t now_ns)
{
    if (p->state != CR_PROC_RUNNING) {
        return;
    }
    p->state = CR_PROC_STOPPING;
    p->kill_at_ns = now_ns + grace_ns;
    /* The job is in the shim's process group; the shim ignores SIGTERM. */
    kill(-p->pid, grace_ns > 0 ? SIGTERM : SIGKILL);
}

/* Read <dir>/exit: "exit N" or "signal N". 0 when found. */
static int read_exit(const char *state_dir, int64_t job, int *code, int *sig)
{
    char path[4096], buf[64];
    snprintf(path, sizeof path, "%s/jobs/%lld.exit", state_dir, (long long)job);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return CR_ENOENT;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) {
        return CR_EIO;
    }
    buf[n] = '\0';
    int v = 0;
    if (sscanf(buf, "exit %d", &v) == 1) {
        *code = v;
        *sig = 0;
        return 0;
    }
    if (sscanf(buf, "signal %d", &v) == 1) {
        *code = 128 + v;
        *sig = v;
        return 0;
    }
    return CR_EPARSE;
}

void cr_proc_reaped(cr_proc *p, const char *state_dir, int wstatus)
{
    p->state = CR_PROC_EXITED;
    if (read_exit(state_dir, p->job, &p->exit_code, &p->signal) == 0) {
        return;
    }
    /* No status file: the shim itself was killed (SIGKILL to the group). */
    if (WIFSIGNALED(wstatus)) {
        p->signal = WTERMSIG(wstatus);
        p->exit_code = 128 + p->signal;
    } else {
        p->exit_code = WEXITSTATUS(wstatus);
        p->signal = 0;
    }
}

static void refresh_job_pid(cr_proc *p, const char *state_dir)
{
    /* The job is the shim's only child. */
    char path[64], buf[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)p->pid, (int)p->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n > 0) {
        buf[n] = '\0';
        p->job_pid = (pid_t)atoi(buf);
    }
}

int cr_proc_tick(cr_proc *p, const char *state_dir, int64_t now_ns, int64_t mono_ns)
{
    if (p->state == CR_PROC_EXITED) {
        return 0;
    }
    if (p->state == CR_PROC_STOPPING && now_ns >= p->kill_at_ns) {
        kill(-p->pid, SIGKILL);
        p->kill_at_ns = now_ns + CR_NS_PER_SEC; /* repeat until it is gone */
    }
    if (p->adopted && cr_proc_start_ticks(p->pid) != p->start_ticks) {
        /* Not our child: its end shows as the pid vanishing (or being reused). */
        p->state = CR_PROC_EXITED;
        if (read_exit(state_dir, p->job, &p->exit_code, &p->signal) < 0) {
            p->signal = SIGKILL;
            p->exit_code = 128 + SIGKILL;
        }
        return 1;
    }
    if (p->job_pid == 0) {
        refresh_job_pid(p, state_dir);
    }
    if (p->job_pid > 0) {
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

static void remove_record(const char *state_dir, const char *id)
{
    static const char *const ext[] = {"json", "tmp", "exit"};
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        char *path = cr_asprintf("%s/jobs/%s.%s", state_dir, id, ext[i]);
        unlink(path);
        free(path);
    }
}

void cr_proc_forget(const char *state_dir, cr_proc *p)
{
    char id[32];
    snprintf(id, sizeof id, "%lld", (long long)p->job);
    remove_record(state_dir, id);
}

void cr_proc_fini(cr_proc *p)
{
    cr_job_spec_fini(&p->spec);
}

static int load_one(const char *state_dir, const char *name, cr_proc *p)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/jobs/%s.json", state_dir, name);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) {
        return CR_EPARSE;
    }
    int rc = CR_EPARSE;
    json_int_t job = 0, ticks = 0, start_ns = 0;
    int pid = 0;
    json_t *spec = NULL;
    if (json_unpack(j, "{s:I,s:i,s:I,s?I,s:o}", "job", &job, "pid", &pid, "start_ticks", &ticks,
                    "start_ns", &start_ns, "spec", &spec) == 0 &&
        job > 0 && pid > 1) {
        memset(p, 0, sizeof *p);
        char err[256];
        if (cr_job_spec_from_json(spec, "spec", &p->spec, err, sizeof err) == 0) {
            p->job = job;
            p->pid = pid;
            p->start_ticks = (uint64_t)ticks;
            p->start_ns = start_ns;
            p->adopted = 1;
            rc = 0;
        }
    }
    json_decref(j);
    return rc;
}

int cr_proc_load_all(const char *state_dir, cr_proc **out, size_t *count)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/jobs", state_dir);
    cr_proc *v = NULL;
    size_t n = 0, cap = 0;
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            /* Records are <id>.json; their companions <id>.exit. */
            char id[32];
            size_t l = strlen(e->d_name);
            if (e->d_name[0] == '.' || l < 6 || l - 5 >= sizeof id ||
                strcmp(e->d_name + l - 5, ".json") != 0) {
                continue;
            }
            memcpy(id, e->d_name, l - 5);
            id[l - 5] = '\0';
            cr_proc p;
            if (load_one(state_dir, id, &p) < 0) {
                /* A half-written record from a crash mid-spawn: nothing to adopt. */
                remove_record(state_dir, id);
                continue;
            }
            if (cr_proc_start_ticks(p.pid) == p.start_ticks && p.start_ticks != 0) {
                p.state = CR_PROC_RUNNING;
                refresh_job_pid(&p, state_dir);
            } else {
                p.state = CR_PROC_EXITED;
                if (read_exit(state_dir, p.job, &p.exit_code, &p.signal) < 0) {
                    p.signal = SIGKILL;
                    p.exit_code = 128 + SIGKILL;
                }
            }
            CR_GROW(v, n, cap);
            v[n++] = p;
        }
        closedir(d);
    }
    *out = v;
    *count = n;
    return 0;
}
