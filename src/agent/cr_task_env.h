/*
 * cr_task_env.h - the per-task side of a job launch: how many processes a
 * job runs on this node, and what each one is told about its place in the
 * job (docs/agent.md, "Tasks").
 *
 * A job on a node runs tasks_per_node processes (1 for jobs from an older
 * controller). Task i of node n has global rank rank_offset + i. Each gets
 * the torchrun variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
 * GROUP_RANK, NODE_RANK, MASTER_ADDR, MASTER_PORT), the ones torchrun reads
 * for its own arguments (PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK,
 * PET_MASTER_ADDR, PET_MASTER_PORT), the SLURM_* names existing scripts
 * read (SLURM_JOB_ID, SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS,
 * SLURM_NODELIST, SLURM_ARRAY_TASK_ID...) and CORRAL_ARRAY_TASK_ID. These
 * always win over the same names in the job's environment.
 *
 * Pure functions of the spec, except cr_tasks_prepare, which writes a
 * shipped batch script to the state dir. Everything is computed before the
 * fork (the shim may only make async-signal-safe calls).
 */
#ifndef CR_TASK_ENV_H
#define CR_TASK_ENV_H

#include "cr_desired.h"

/* Tasks the job runs on this node (>= 1). */
int cr_task_count(const cr_job_spec *s);
/* Global rank of local task i. */
int cr_task_rank(const cr_job_spec *s, int local_rank);

/*
 * The environment of local task local_rank: a copy of env (borrowed,
 * NULL-ended) without the names this sets, plus the task's variables.
 * Returned new, NULL-ended; free with cr_strv_free.
 */
char **cr_task_env(char *const *env, const cr_job_spec *s, int local_rank, const char *node);

/*
 * Expand an output pattern as sbatch -o does: %j job id, %A the array's
 * job id, %a array index, %t task rank, %N node, %x job name, %% a '%'.
 * Unknown %-letters stay as written. Returned new (free()); NULL for a
 * result over 4095 bytes.
 */
char *cr_task_path(const char *pattern, const cr_job_spec *s, int rank, const char *node);

/*
 * A task's log under the state dir: <state>/logs/<job>/<stream> when the
 * node runs one task of the job (rank < 0 or ntasks 1), else
 * <state>/logs/<job>/<rank>.<stream>. Returned new (free()).
 */
char *cr_task_log_path(const char *state_dir, int64_t job, int rank, int ntasks,
                       const char *stream);

/* Everything the shim needs per task, built before the fork. */
typedef struct cr_tasks {
    int n;            /* tasks on this node */
    char **argv;      /* the command; a shipped script runs from its file (owned, NULL-ended) */
    char ***envps;    /* n environments (owned) */
    char **out_paths; /* n log paths (owned) */
    char **err_paths;
    char **user_out; /* n -o paths or NULLs (owned) */
    char **user_err;
    char *script_path; /* the written script, NULL when none (owned) */
} cr_tasks;

/* The descriptor a shipped script is open on in each task: the command
 * runs /dev/fd/3 (the script's $0 reads so). */
#define CR_TASK_SCRIPT_FD 3

/*
 * Build t for spec: the per-task environments from env (borrowed), log and
 * -o/-e paths; a shipped script is written to <state>/scripts/<job>.sh
 * (directory 0700: the agent's) and the command becomes /dev/fd/3 (run by
 * /bin/sh when it has no "#!"), the shim opening the script on that fd.
 * Never fails: a script that cannot be written leaves the command as
 * given, and the start then fails as a missing program would.
 */
void cr_tasks_prepare(cr_tasks *t, const char *state_dir, const cr_job_spec *spec, char *const *env,
                      const char *node);
void cr_tasks_fini(cr_tasks *t);

/*
 * The job's own -o/-e files, for `corral logs` (a job whose output went to
 * a file left nothing in its captured log): for each task with one, the
 * note <state>/outfiles/<job>.<rank>.out (and .err for an -e file other
 * than the -o one) holds "UID\nPATH", PATH made absolute with workdir
 * (borrowed). The directory is the agent's (0700), so a job cannot forge a
 * note; the agent serves the file only when it is a regular file of UID
 * (agent_http.c). Not for containers (the path is inside the container).
 */
void cr_tasks_note_files(const cr_tasks *t, const char *state_dir, const cr_job_spec *spec,
                         const char *workdir);
/* The note's path (cr_tasks_note_files); rank < 0 reads as 0. Returned new. */
char *cr_task_file_note(const char *state_dir, int64_t job, int rank, const char *stream);

/* A signal name from the desired state ("USR1", "TERM"...) -> its number;
 * 0 for one a job may not be sent. */
int cr_task_signal(const char *name);

#endif
