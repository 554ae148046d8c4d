/*
 * agent_mps.c - how fractional tasks share a GPU here (docs/isolation.md,
 * "Sharing a GPU").
 *
 * Where an MPS control program is known (--mps-control PATH, or NVIDIA's
 * nvidia-cuda-mps-control in the usual places with the NVML backend), the
 * agent runs one MPS control daemon per shared GPU while that GPU hosts
 * fractional tasks, and the tasks are MPS clients of it: they get
 * CUDA_MPS_PIPE_DIRECTORY and the limits CUDA_MPS_ACTIVE_THREAD_PERCENTAGE /
 * CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, which the MPS server enforces.
 *
 * One user per daemon. MPS serves the clients of one Unix user at a time
 * (a second user's clients wait until the first user's server exits), and
 * its pipe directory is the door to the server: whoever can open it can
 * connect and send control commands. So each daemon is started as the job's
 * uid, in a pipe directory of its own (MPS-DIR/gpu<I>.u<UID>, 0700, owned
 * by that uid, under a root-owned 0711 MPS-DIR) that no other tenant's job
 * can open. A fractional task of another uid on a GPU whose daemon serves
 * somebody else runs time-sliced beside it, with its limits as an
 * environment contract only, and its "shared" event says so: it is never
 * pointed at the other user's pipe. Jobs of one tenant share a uid
 * (docs/security.md) and so share the daemon.
 *
 * Otherwise the GPU is time-sliced and the limits are the job's to keep;
 * the sim backend says "time-sliced (simulated)".
 *
 * A daemon stops ("quit" on its control pipe; MPS lets running clients
 * finish) once its GPU hosts no fractional task, and at agent exit. The
 * pipe directories of an earlier agent run are found at start: such a
 * daemon is draining, so new tasks on that GPU run time-sliced until its
 * tasks are gone and it is told to quit again.
 *
 * Limits: the control program gets MPS_CMD_TIMEOUT_MS to start (it
 * daemonizes) or to take "quit"; the main loop waits that long at most.
 */
#include "agent_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_iso.h"
#include "cr_log.h"
#include "cr_time.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MPS_CMD_TIMEOUT_MS 5000

enum { MPS_NONE = 0, MPS_UP, MPS_LEFT, MPS_FAILED };

static const char *const mps_default_paths[] = {
    "/usr/bin/nvidia-cuda-mps-control",
    "/usr/local/bin/nvidia-cuda-mps-control",
    "/usr/local/nvidia/bin/nvidia-cuda-mps-control",
    "/usr/local/cuda/bin/nvidia-cuda-mps-control",
    NULL,
};

static void gpu_dir(const agent *a, int gpu, int64_t uid, char *out, size_t len)
{
    snprintf(out, len, "%s/gpu%d.u%lld", a->mps_dir, gpu, (long long)uid);
}

/* Run the control program for gpu as uid:gid with input on its stdin
 * (NULL: "-d", start the daemon). 0, or CR_EIO with why. */
static int mps_ctl(const agent *a, int gpu, int64_t uid, int64_t gid, const char *input, char *why,
                   size_t whylen)
{
    char dir[600], pipe_dir[700], log_dir[700];
    gpu_dir(a, gpu, uid, dir, sizeof dir);
    snprintf(pipe_dir, sizeof pipe_dir, "%s/pipe", dir);
    snprintf(log_dir, sizeof log_dir, "%s/log", dir);
    const cr_gpu_info *g = NULL;
    for (size_t i = 0; i < a->gpu->count; i++) {
        if (a->gpu->gpus[i].index == gpu) {
            g = &a->gpu->gpus[i];
        }
    }
    char *envp[] = {
        cr_strdup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
        g && g->uuid[0] ? cr_asprintf("CUDA_VISIBLE_DEVICES=%s", g->uuid)
                        : cr_asprintf("CUDA_VISIBLE_DEVICES=%d", gpu),
        cr_asprintf("CUDA_MPS_PIPE_DIRECTORY=%s", pipe_dir),
        cr_asprintf("CUDA_MPS_LOG_DIRECTORY=%s", log_dir),
        cr_asprintf("HOME=%s", dir),
        NULL,
    };
    char *argv[] = {(char *)a->mps_bin, input ? NULL : "-d", NULL};
    int in[2] = {-1, -1}, rc = 0;
    if (input && pipe2(in, O_CLOEXEC) != 0) {
        snprintf(why, whylen, "pipe: %s", strerror(errno));
        rc = CR_EIO;
        goto out;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, whylen, "fork: %s", strerror(errno));
        rc = CR_EIO;
        goto out;
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        int nul = open("/dev/null", O_RDWR);
        dup2(input ? in[0] : nul, 0);
        dup2(nul, 1);
        dup2(nul, 2);
        syscall(SYS_close_range, 3U, ~0U, 0U);
        if ((uid_t)uid != geteuid() &&
            (setgroups(0, NULL) != 0 || setresgid((gid_t)gid, (gid_t)gid, (gid_t)gid) != 0 ||
             setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) != 0)) {
            _exit(126);
        }
        /* The pipe and log directories are made here, as the uid: root
         * never works on paths inside a directory a job's user owns. */
        if ((mkdir(pipe_dir, 0700) != 0 && errno != EEXIST) ||
            (mkdir(log_dir, 0700) != 0 && errno != EEXIST) || chdir(dir) != 0) {
            _exit(126);
        }
        execve(argv[0], argv, envp);
        _exit(127);
    }
    if (input) {
        close(in[0]);
        in[0] = -1;
        ssize_t w = write(in[1], input, strlen(input));
        (void)w;
        close(in[1]);
        in[1] = -1;
    }
    int64_t end = cr_mono_ns() + (int64_t)MPS_CMD_TIMEOUT_MS * CR_NS_PER_MS;
    int st = 0;
    pid_t w;
    while ((w = waitpid(pid, &st, WNOHANG)) == 0 && cr_mono_ns() < end) {
        usleep(5000);
    }
    if (w == 0) {
        kill(pid, SIGKILL);
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        snprintf(why, whylen, "%.200s %s: no answer within %d s", a->mps_bin, input ? "quit" : "-d",
                 MPS_CMD_TIMEOUT_MS / 1000);
        rc = CR_EIO;
    } else if (w < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        snprintf(why, whylen, "%.200s %s failed (%s %d)", a->mps_bin, input ? "quit" : "-d",
                 w > 0 && WIFSIGNALED(st) ? "signal" : "exit code",
                 w > 0 && WIFSIGNALED(st) ? WTERMSIG(st)
                 : w > 0                  ? WEXITSTATUS(st)
                                          : -1);
        rc = CR_EIO;
    }
out:
    for (size_t i = 0; envp[i]; i++) {
        free(envp[i]);
    }
    if (in[0] >= 0) {
        close(in[0]);
    }
    if (in[1] >= 0) {
        close(in[1]);
    }
    return rc;
}

static int mps_start(agent *a, int gpu, int64_t uid, int64_t gid, char *why, size_t whylen)
{
    char dir[600];
    gpu_dir(a, gpu, uid, dir, sizeof dir);
    /* Its parent is root's (0711): the uid cannot swap it for a link. */
    int rc = cr_iso_own_dir(dir, 0700, uid, gid, why, whylen);
    if (rc == 0) {
        rc = mps_ctl(a, gpu, uid, gid, NULL, why, whylen);
    }
    if (rc == 0) {
        cr_info("agent: GPU %d: MPS control daemon started for uid %lld (pipe %s/pipe)", gpu,
                (long long)uid, dir);
    }
    return rc;
}

static void mps_stop(agent *a, int gpu)
{
    agent_mps_gpu *m = &a->mps[gpu];
    char why[300];
    if (mps_ctl(a, gpu, m->uid, m->gid, "quit\n", why, sizeof why) < 0) {
        cr_warn("agent: GPU %d: MPS control daemon (uid %lld): %s", gpu, (long long)m->uid, why);
    } else {
        cr_info("agent: GPU %d: MPS control daemon for uid %lld told to quit", gpu,
                (long long)m->uid);
    }
    m->state = MPS_NONE;
}

int cr__agent_mps_init(agent *a, char *err, size_t errlen)
{
    const char *bin = a->cfg.mps_control;
    int is_sim = strcmp(a->gpu->ops->name, "sim") == 0;
    a->mps_sim = is_sim;
    a->mps_bin[0] = '\0';
    if (bin && strcmp(bin, "none") == 0) {
        return 0;
    }
    if (bin) {
        if (bin[0] != '/' || access(bin, X_OK) != 0) {
            snprintf(err, errlen, "--mps-control %s: not an executable absolute path", bin);
            return CR_EINVAL;
        }
    } else if (!is_sim) {
        for (size_t i = 0; mps_default_paths[i] && !bin; i++) {
            if (access(mps_default_paths[i], X_OK) == 0) {
                bin = mps_default_paths[i];
            }
        }
    }
    if (!bin) {
        return 0;
    }
    snprintf(a->mps_bin, sizeof a->mps_bin, "%s", bin);
    if (a->cfg.mps_dir) {
        snprintf(a->mps_dir, sizeof a->mps_dir, "%s", a->cfg.mps_dir);
    } else if (geteuid() == 0) {
        snprintf(a->mps_dir, sizeof a->mps_dir, "/run/corral-mps/%s", a->cfg.node);
    } else {
        snprintf(a->mps_dir, sizeof a->mps_dir, "%s.mps", a->cfg.state_dir);
    }
    /* Traversable, not listable, and nobody else's: jobs reach their own
     * gpu<I>.u<UID> below it and nothing more. A shared directory (/tmp:
     * world-writable or sticky) is refused, never chmod-ed. */
    mode_t old = umask(022);
    cr_mkdir_p(a->mps_dir, 0711);
    umask(old);
    struct stat sb;
    if (lstat(a->mps_dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid() ||
        (sb.st_mode & (S_ISVTX | S_IWOTH)) != 0 || chmod(a->mps_dir, 0711) != 0) {
        snprintf(err, errlen,
                 "--mps-dir %s: not a directory this user owns alone (a shared directory "
                 "such as /tmp is refused)",
                 a->mps_dir);
        a->mps_bin[0] = '\0';
        return CR_EINVAL;
    }
    /* An earlier agent run's daemons: draining (told to quit at its exit). */
    DIR *d = opendir(a->mps_dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        int gpu;
        long long uid;
        char path[1200];
        if (sscanf(e->d_name, "gpu%d.u%lld", &gpu, &uid) != 2 || gpu < 0 || gpu >= CR_GPU_MAX ||
            uid < 0) {
            continue;
        }
        snprintf(path, sizeof path, "%s/%s", a->mps_dir, e->d_name);
        if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode) && sb.st_uid == (uid_t)uid &&
            a->mps[gpu].state == MPS_NONE) {
            a->mps[gpu] = (agent_mps_gpu){.state = MPS_LEFT, .uid = uid, .gid = (int64_t)sb.st_gid};
        }
    }
    if (d) {
        closedir(d);
    }
    cr_info("agent: fractional tasks share GPUs through MPS (%s, pipes under %s)", a->mps_bin,
            a->mps_dir);
    return 0;
}

/* "10 GiB" */
static void fmt_bytes(int64_t b, char *out, size_t len)
{
    if (b >= ((int64_t)1 << 30)) {
        snprintf(out, len, "%.3g GiB", (double)b / (double)((int64_t)1 << 30));
    } else {
        snprintf(out, len, "%lld MiB", (long long)((b + (1 << 20) - 1) >> 20));
    }
}

void cr__agent_mps_how(int mps, const char *why, int sim, int64_t milli, int64_t mem_bytes,
                       char *how, size_t len)
{
    char mem[32];
    fmt_bytes(mem_bytes, mem, sizeof mem);
    if (mps) {
        int pct = milli ? (int)((milli + 9) / 10) : 100;
        snprintf(how, len, "mps %d%% threads%s%s%s", pct < 1 ? 1 : pct, mem_bytes ? ", " : "",
                 mem_bytes ? mem : "", mem_bytes ? " pinned" : "");
    } else if (sim) {
        snprintf(how, len, "time-sliced (simulated)%s",
                 mem_bytes ? ", memory limit by contract" : "");
    } else {
        snprintf(how, len, "time-sliced, memory limit by contract%s%s%s", why && *why ? " (" : "",
                 why && *why ? why : "", why && *why ? ")" : "");
    }
}

int cr__agent_mps_job(agent *a, const cr_job_spec *s, char *pipe_dir, size_t plen, char *how,
                      size_t hlen)
{
    pipe_dir[0] = '\0';
    int gpu = s->gpu_count ? s->gpus[0] : -1;
    char why[400] = "";
    int mps = 0;
    if (!a->mps_bin[0] || gpu < 0 || gpu >= CR_GPU_MAX) {
        snprintf(why, sizeof why, "no MPS control daemon on this node");
    } else {
        agent_mps_gpu *m = &a->mps[gpu];
        int64_t uid = s->has_user ? s->uid : (int64_t)geteuid();
        int64_t gid = s->has_user ? s->gid : (int64_t)getegid();
        if (m->state == MPS_NONE) {
            if (mps_start(a, gpu, uid, gid, why, sizeof why) == 0) {
                *m = (agent_mps_gpu){.state = MPS_UP, .uid = uid, .gid = gid};
            } else {
                cr_warn("agent: GPU %d: MPS not started: %s", gpu, why);
                *m = (agent_mps_gpu){.state = MPS_FAILED, .uid = uid, .gid = gid};
                snprintf(m->why, sizeof m->why, "MPS daemon failed: %.200s", why);
            }
        }
        if (m->state == MPS_UP && m->uid == uid) {
            mps = 1;
            char dir[600];
            gpu_dir(a, gpu, uid, dir, sizeof dir);
            snprintf(pipe_dir, plen, "%s/pipe", dir);
        } else if (m->state == MPS_UP) {
            snprintf(why, sizeof why,
                     "GPU %d's MPS server serves another user: one MPS server per uid", gpu);
        } else if (m->state == MPS_LEFT) {
            snprintf(why, sizeof why, "GPU %d's MPS daemon of an earlier agent run is draining",
                     gpu);
        } else {
            snprintf(why, sizeof why, "%s", m->why);
        }
    }
    cr__agent_mps_how(mps, why, a->mps_sim && !a->mps_bin[0], s->gpu_milli, s->gpu_mem_bytes, how,
                      hlen);
    return mps;
}

static int hosts_fractional(const agent *a, int gpu)
{
    for (size_t i = 0; i < a->nprocs; i++) {
        const cr_proc *p = &a->procs[i];
        if (p->state != CR_PROC_EXITED && (p->spec.gpu_milli || p->spec.gpu_mem_bytes) &&
            p->spec.gpu_count && p->spec.gpus[0] == gpu) {
            return 1;
        }
    }
    return 0;
}

void cr__agent_mps_sweep(agent *a)
{
    for (int g = 0; g < CR_GPU_MAX; g++) {
        if (a->mps[g].state != MPS_NONE && !hosts_fractional(a, g)) {
            if (a->mps[g].state == MPS_UP || a->mps[g].state == MPS_LEFT) {
                mps_stop(a, g);
            }
            a->mps[g].state = MPS_NONE;
        }
    }
}

void cr__agent_mps_fini(agent *a)
{
    for (int g = 0; g < CR_GPU_MAX && a->mps_bin[0]; g++) {
        if (a->mps[g].state == MPS_UP) {
            mps_stop(a, g);
        }
    }
}
