/*
 * proc_int.h - what proc.c and proc_shim.c share: the shim's arguments and
 * how they travel to it.
 *
 * The agent does not fork the shim: a fork copies the agent's page tables,
 * and the agent then pays a copy-on-write fault for each page it touches
 * (with the shim's later clone of the PID-namespace init, a fifth of what
 * a job cost the agent). Nor does it exec a fresh program per job (the
 * dynamic loader's work for each start costs as much again). It starts,
 * once, a zygote: its own executable again (posix_spawn of /proc/self/exe:
 * clone(CLONE_VM | CLONE_VFORK) and an exec, nothing of the agent copied)
 * with the arguments CR__PROC_ZYGOTE_ARG, the agent's pid and its journal's path (for ps), and a
 * socket on descriptor CR__PROC_SHIM_FD. A constructor in proc.c recognises that command line in
 * any program that links proc.c (the corral binary, the tests that start jobs) and runs the zygote
 * before main(): nothing of the program's start-up runs in it, and its address space stays small.
 *
 * For each job the agent sends the shim's arguments, packed, down the
 * socket; the zygote clones (CLONE_PARENT: the shim is the agent's own
 * child, waited for, signalled and reaped as before), the child unpacks
 * and runs the shim, and the zygote answers the shim's pid. The zygote
 * dies with the agent's main thread (PR_SET_PDEATHSIG) or at the end of
 * its socket; one that is gone is started again at the next job.
 */
#ifndef CR_PROC_INT_H
#define CR_PROC_INT_H

#include <stddef.h>
#include <sys/types.h>

#define CR__PROC_ZYGOTE_ARG "__corral_zygote"
#define CR__PROC_SHIM_FD    3

/* Everything the shim needs. Per task i (of ntasks, see cr_task_env.h):
 * envps[i], the logs out_paths[i] and err_paths[i], and the job's own
 * -o/-e files user_out[i] / user_err[i] (NULL: none), opened by the task
 * itself, as the job's user, in its working directory. */
typedef struct shim_args {
    const char *exe;
    char *const *argv;
    char **const *envps;
    const char *workdir;
    const char *exec_msg;
    const char *journal;
    long long job;
    char *const *out_paths, *const *err_paths; /* the job's logs, opened by the shim */
    char *const *user_out, *const *user_err;
    char *const *cgroup_procs; /* cgroup.procs files to join, NULL-ended, or NULL */
    long long uid, gid;        /* the job's user; -1: stay the agent's */
    const gid_t *groups;       /* supplementary groups of uid */
    size_t ngroups;
    const char *script; /* a shipped script to open on fd 3 for each task, or NULL */
    int script_fd;
    int ntasks;                  /* tasks (processes) on this node, >= 1 */
    int task;                    /* the task being started */
    int keep_root;               /* podman runs the job (container.c): it switches to uid itself */
    int out_fd, err_fd, null_fd; /* set by the shim */
    int pidns;                   /* the tasks run in a PID namespace of their own (iso_pidns.c) */
    int ipcns;                   /* ... and an IPC namespace of their own */
    char *const *dirs;           /* made by the shim, 0700 and the job's user's: logs/<job>, the
                                    checkpoint directory (NULL-ended) */
    /* The log cap (cr_job_spec.log_max_bytes): > 0, the tasks' stdout and
     * stderr are pipes the shim copies into the log files, each file up to
     * log_max bytes (the notice at its end included). */
    long long log_max;
    const char *cap_notice;                 /* the line written where a log is capped */
    const char *capped_mark, *nospace_mark; /* marker files for the agent (cr_proc_log_marks) */
    int append; /* --open-mode append: -o/-e files are appended to, not truncated */
} shim_args;

/* The zygote's loop, on socket fd, for the agent of pid agent; run is the
 * shim (proc.c run_shim), called in each child. Never returns. */
void cr__proc_zygote_main(int fd, pid_t agent, void (*run)(shim_args *)) __attribute__((noreturn));
/* Start the shim for a (borrowed) through the zygote (started when none
 * runs): *pid set, 0; else an errno value. */
int cr__proc_shim_spawn(const shim_args *a, pid_t *pid);

#endif
