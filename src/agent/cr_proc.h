/*
 * cr_proc.h - jobs as supervised processes.
 *
 * Each job runs under a small shim: the agent forks the shim, the shim
 * calls setsid() (so the job has its own session and process group, which
 * stop signals address as a whole) and forks the job itself with its
 * environment, working directory and log files, waits for it, and writes
 * how it ended to the journal <state>/jobs.journal, then ends the same way
 * itself (exit code, or the same signal), so the agent's waitpid() on the
 * shim tells it directly. Because the end also lands in the journal, a
 * restarted agent can re-adopt a job that kept running while it was down
 * and still learn how it ended; the journal's record of each start (spec,
 * shim pid and its start time from /proc, so a recycled pid is never
 * mistaken for the job) makes that possible.
 * Logs: <state>/logs/<id>.out and .err. Default working directory:
 * <state>/work.
 *
 * Stop = SIGTERM to the process group, then SIGKILL once the grace period
 * has passed (cr_proc_tick does the second step).
 *
 * Threading: one thread (the agent's main loop). The code between fork and
 * exec calls only async-signal-safe functions; everything it needs is
 * prepared before the fork.
 */
#ifndef CR_PROC_H
#define CR_PROC_H

#include "cr_desired.h"

#include <stdint.h>
#include <sys/types.h>

enum cr_proc_state { CR_PROC_RUNNING = 0, CR_PROC_STOPPING, CR_PROC_EXITED };

typedef struct cr_proc {
    int64_t job;           /* job id */
    pid_t pid;             /* the shim: session and process-group leader */
    uint64_t start_ticks;  /* start time of pid (clock ticks since boot) */
    pid_t job_pid;         /* the job's own process; 0 until the shim says */
    int state;             /* cr_proc_state */
    int exit_code;         /* valid when EXITED */
    int signal;            /* valid when EXITED: the signal that ended it, 0 none */
    int adopted;           /* started by an earlier agent: polled, not waited for */
    int64_t kill_at_ns;    /* STOPPING: when SIGKILL follows */
    int64_t start_ns;      /* when it started (wall clock), 0 unknown */
    uint64_t cpu_ticks;    /* CPU ticks at cpu_at_ns */
    int64_t cpu_at_ns;     /* when cpu_ticks was read (monotonic) */
    double busy;           /* CPU share over the last interval, 0..N */
    int64_t exit_acked;    /* desired-state version the controller was at once it took in
                              this exit (0: not yet); a later version listing the job
                              again is a new attempt */
    char *cgroup;          /* owned: the job's cgroup v2 directory, NULL when none */
    int64_t signal_done;   /* the desired "signal.at" last delivered (see cr_task_signal) */
    int64_t term_again_ns; /* STOPPING soon after the start: SIGTERM once more then (0: no) */
    cr_job_spec spec;      /* owned copy of what the controller asked for */
} cr_proc;

/*
 * Start a job. state_dir and node borrowed; base_env borrowed (NULL-ended).
 * On success *p owns a copy of spec. A job whose command cannot be found
 * still starts: the shim reports exit code 127, as a shell would, and the
 * reason is in the job's stderr log.
 */
int cr_proc_spawn(const char *state_dir, const char *node, const cr_job_spec *spec,
                  char *const *base_env, cr_proc *p, char *err, size_t errlen);
/*
 * The same, and where cgroup_base (borrowed, may be NULL) is a writable
 * cgroup v2 directory, the job runs in its own cgroup <base>/job-<id>: its
 * CPU use is read from there (children included) and a stop's SIGKILL also
 * goes through cgroup.kill, so processes that left the job's process group
 * go too. Best effort: a cgroup that cannot be made or joined is skipped.
 */
int cr_proc_spawn_cg(const char *state_dir, const char *node, const cr_job_spec *spec,
                     char *const *base_env, const char *cgroup_base, cr_proc *p, char *err,
                     size_t errlen);
/*
 * A cgroup v2 directory for this agent's jobs: arg "auto" tries
 * /sys/fs/cgroup and /sys/fs/cgroup/unified (hybrid hosts), "off" none,
 * anything else is that directory. Creates <root>/corral-<node>. Returned
 * new (free()), or NULL with the reason in why.
 */
char *cr_proc_cgroup_base(const char *arg, const char *node, char *why, size_t whylen);
/* Begin a stop: SIGTERM to the group, SIGKILL at now + grace. */
void cr_proc_stop(cr_proc *p, int64_t grace_ns, int64_t now_ns);
/* Call when waitpid() returned wstatus for p->pid; p becomes EXITED. */
void cr_proc_reaped(cr_proc *p, const char *state_dir, int wstatus);
/*
 * Periodic work: SIGKILL past the grace period; for adopted jobs, notice the
 * end (p becomes EXITED); refresh the CPU share. Returns 1 when p exited.
 */
int cr_proc_tick(cr_proc *p, const char *state_dir, int64_t now_ns, int64_t mono_ns);
/* Forget a finished job: journal it (its logs stay). */
void cr_proc_forget(const char *state_dir, cr_proc *p);
void cr_proc_fini(cr_proc *p);
/*
 * Re-adopt: load every record under state_dir. Jobs still running come back
 * RUNNING (adopted), finished ones EXITED with their status, vanished ones
 * EXITED with signal 9. *out returned new (cr_proc_fini each, then free).
 */
int cr_proc_load_all(const char *state_dir, cr_proc **out, size_t *count);
/* Rewrite the journal with the live records only (when it has grown past
 * 8 MiB, or always with force). */
int cr_proc_journal_compact(const char *state_dir, const cr_proc *procs, size_t count, int force);
/* Start time of a pid from /proc (0 when it is gone). */
uint64_t cr_proc_start_ticks(pid_t pid);
/* Path of a job's log, "out" or "err" stream; returned new. */
char *cr_proc_log_path(const char *state_dir, int64_t job, const char *stream);
/* mkdir -p; 0 or CR_EIO. */
int cr_mkdir_p(const char *path, int mode);

#endif
