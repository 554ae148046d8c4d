/*
 * cr_proc.h - jobs as supervised processes.
 *
 * Each job runs under a small shim: the agent's zygote clones the shim as
 * the agent's own child (proc_int.h: no fork of the agent), the shim
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
 * Logs: <state>/logs/<id>/out and err (the directory 0700 and the files
 * 0600, owned by the job's uid). With spec.log_max_bytes > 0 the tasks'
 * stdout and stderr are pipes the shim copies into those files, each file
 * kept to log_max_bytes (its head, then a notice; the rest is read and
 * dropped, so the job is never blocked); the shim marks a capped log with
 * the empty file <state>/logs/<id>/capped and a failed write (ENOSPC) with
 * .../nospace, for the agent (cr_proc_log_marks). Default working directory: the job's
 * checkpoint directory when it has one, else <state>/work for a job run as
 * the agent's user, else "/".
 *
 * Identity: a spec with a uid runs as that uid (the shim stays root; the
 * job's process calls setgroups, setresgid, setresuid, each checked, before
 * it execs); uid 0 is refused unless the spec says allow_root. The job
 * inherits no descriptor above stderr and none of the agent's environment.
 *
 * PID namespace: where the node allows it (cr_iso.pidns), a plain-process
 * job's tasks run in a PID and mount namespace of their own, under a
 * small init (pid 1 there, the shim's only child) with its own /proc, so
 * the job lists and reads only its own processes. The shim stays in the
 * node's namespace: the agent's pid, signals, waitpid, journal and
 * re-adoption are the same. The init ignores what the group is sent (as
 * the shim does), reaps orphans and hands the job's wait status to the
 * shim; when it exits, or dies with the shim, the kernel kills everything
 * left in the namespace (iso_pidns.c).
 *
 * Stop = SIGTERM to the process group, then SIGKILL once the grace period
 * has passed (cr_proc_tick does the second step).
 *
 * Threading: one thread (the agent's main loop), which also owns the
 * zygote. The shim calls only async-signal-safe functions; everything it
 * needs is prepared by the agent and sent to the zygote.
 */
#ifndef CR_PROC_H
#define CR_PROC_H

#include "cr_desired.h"
#include "cr_iso.h"

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
    char *cgroup;          /* owned: the job's cgroup v2 directory (== iso.v2), NULL when none */
    cr_iso_job iso;        /* owned: the job's cgroups (v1 devices/memory/cpu, v2) */
    int oom;               /* EXITED: the kernel's OOM killer killed something in the job */
    int pidns;             /* the job runs in a PID namespace of its own under an init (the
                              shim's only child); job_pid is the init's first child */
    int init_fd;           /* pidns: a pidfd of that init once seen (-1 none); readable only
                              when the namespace is empty (see cr_proc_reaped) */
    int64_t signal_done;   /* the desired "signal.at" last delivered (see cr_task_signal) */
    int64_t term_again_ns; /* STOPPING soon after the start: SIGTERM once more then (0: no) */
    int stop_sig;       /* STOPPING: the signal it was sent (SIGTERM, or its checkpoint signal) */
    cr_job_spec spec;   /* owned copy of what the controller asked for */
    char reason[400];   /* EXITED without running: why (a container image missing...); "" */
    int fatal;          /* with reason: retrying cannot help (not retried) */
    int lease_stop;     /* stopped because the node lease ran out: its exit is reported
                           as such ("lease"), the controller requeues the job */
    char pull[300];     /* container jobs: how the image was made present ("" none) */
    int64_t pull_ms;    /* ... and how long that took */
    char sharing[300];  /* fractional tasks: how the GPU is shared ("shared" event); "" */
    int64_t out_capped; /* its logs reached this cap (cr_proc_log_marks; event); 0 not */
    int out_nospace;    /* a write to its logs failed, the disk full (event) */
    /* What the job reported on stdout (cr_metric.h), read from its output
     * log when it ends; 0 = none. Sent with its end ("metrics"). */
    double metric_tokens_per_s, metric_step_time_s;
    int metric_bad; /* corral-metric lines that did not parse (ignored) */
} cr_proc;

/*
 * Start a job. state_dir and node borrowed. On success *p owns a copy of
 * spec. A job whose command cannot be found still starts: the shim reports
 * exit code 127, as a shell would, and the reason is in the job's stderr
 * log. A job that may not start here (uid 0 not allowed, a uid the agent
 * cannot switch to, a checkpoint directory that is not the job's) fails
 * with CR_EPERM and the reason in err.
 */
int cr_proc_spawn(const char *state_dir, const char *node, const cr_job_spec *spec, cr_proc *p,
                  char *err, size_t errlen);
/*
 * The same, fenced as iso (borrowed, may be NULL) allows: the job runs in
 * its own cgroups job-<id> (device filter, memory and CPU limits; see
 * cr_iso.h), its CPU use is read from the v2 one (children included) and a
 * stop's SIGKILL also reaches every process left in them. A device filter
 * that cannot be set fails the start (CR_EIO); a limit that cannot be set
 * is said in the job's stderr log.
 */
int cr_proc_spawn_iso(const char *state_dir, const char *node, const cr_job_spec *spec,
                      const cr_iso *iso, cr_proc *p, char *err, size_t errlen);
/* Modes of what an earlier version left in state_dir: dirs 0700, files 0600. */
/* Make the agent's own entries of its state dir private (dirs 0700, files
 * 0600) and the dir 0700. CR_EPERM (nothing changed) for a directory that
 * is world-writable, sticky (/tmp) or not the agent's: not a state dir. */
int cr_proc_fix_modes(const char *state_dir);
/* Begin a stop: SIGTERM to the group, SIGKILL at now + grace (now_ns and
 * cr_proc_tick's now_ns are CLOCK_MONOTONIC, so a wall-clock step changes
 * no grace period). */
void cr_proc_stop(cr_proc *p, int64_t grace_ns, int64_t now_ns);
/* The same with sig instead of SIGTERM (a job's checkpoint signal). */
void cr_proc_stop_sig(cr_proc *p, int sig, int64_t grace_ns, int64_t now_ns);
/* Call when waitpid() returned wstatus for p->pid; p becomes EXITED. */
void cr_proc_reaped(cr_proc *p, const char *state_dir, int wstatus);
/*
 * Periodic work: SIGKILL past the grace period; for adopted jobs, notice the
 * end (p becomes EXITED); refresh the CPU share. Returns 1 when p exited.
 */
int cr_proc_tick(cr_proc *p, const char *state_dir, int64_t now_ns, int64_t mono_ns);
/* Forget a finished job: journal it (its logs stay). */
void cr_proc_forget(const char *state_dir, cr_proc *p);
/* An empty entry (a start that failed, a stop before the start): all zero
 * but its descriptors, which are -1, so cr_proc_fini closes nothing. A
 * memset alone left init_fd 0, and each such entry's fini closed the
 * agent's descriptor 0, by then whatever the agent had opened next (a
 * client's socket: libmicrohttpd aborted with "Close socket failed"; a
 * device filter program), issue 24. */
void cr_proc_init(cr_proc *p);
/* The same, its cgroups kept for a later job of iso (borrowed; NULL: removed),
 * see cr_iso_job_release. */
void cr_proc_forget_iso(const char *state_dir, const cr_iso *iso, cr_proc *p);
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
/* Whether the job's shim marked a log capped or a write failed (this run). */
void cr_proc_log_marks(const char *state_dir, int64_t job, int *capped, int *nospace);
/* Path of a job's log, "out" or "err" stream (<state>/logs/<id>/<stream>); returned new. */
char *cr_proc_log_path(const char *state_dir, int64_t job, const char *stream);
/* rm -r without following links or crossing mounts; 0 or CR_EIO. */
int cr_rm_rf(const char *path);
/* mkdir -p; 0 or CR_EIO. */
int cr_mkdir_p(const char *path, int mode);

#endif
