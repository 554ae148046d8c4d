/*
 * cr_desired.h - the documents of the controller <-> agent protocol
 * (docs/api.md, "Agents"): the desired state the agent long-polls, and the
 * register and status bodies it sends.
 *
 * The desired-state document comes from the network, so its parser checks
 * every member it uses and names the offending one in the error
 * ("jobs[2].gpus[0]: must be an integer 0..63"); members it does not know
 * are ignored, so a newer controller can add some. Nothing here does I/O.
 */
#ifndef CR_DESIRED_H
#define CR_DESIRED_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cr_gpu.h"

/* Room for a step credential ("step_token": hex, NUL). */
#define CR_STEP_TOKEN_MAX 72
/* Most tasks (processes) one job runs on one node (--tasks-per-node). */
#define CR_MAX_TASKS_PER_NODE 256
/* Highest GPU power cap the controller may ask (W). */
#define CR_POWER_CAP_MAX_W 10000
/* Largest batch script shipped with a job (bytes; the controller refuses more). */
#define CR_MAX_SCRIPT_BYTES 65536

enum cr_action { CR_ACT_RUN = 0, CR_ACT_STOP };

typedef struct cr_gang {
    char master_addr[256];
    int master_port;
    int world_size;
    int node_rank;
    int nnodes;
    int local_world_size;
    int rank_offset;
    /* Launch mode (docs/agent.md, "Tasks"): tasks_per_node processes on
     * each node, each with its own RANK (rank_offset + local rank). 0: an
     * older controller's one process per node, its variables as given. */
    int tasks_per_node;
    int gpus_per_node; /* GPUs the job holds on each node (PET_NPROC_PER_NODE of a launcher) */
    int launcher;      /* the command is a launcher (torchrun...): one task per node */
} cr_gang;

/* "container": the job runs from an OCI image with podman (container.c,
 * docs/containers.md). */
typedef struct cr_container {
    char *image;   /* owned; NULL: a bare process (no "container") */
    char *archive; /* "archive": image archive on the node to podman load; owned, NULL */
    char **mounts; /* "mounts": "SRC:DST" or "SRC:DST:ro" + NULL; owned */
    size_t mountc;
    char **entrypoint; /* "entrypoint": + NULL; owned, NULL: the image's */
    size_t entryc;
    char *cluster; /* "cluster": the cluster id (container names); owned, NULL */
    int podman;    /* "podman": argv is already podman's (a record of a started job) */
} cr_container;

typedef struct cr_job_spec {
    int64_t job;     /* job id, > 0 */
    int64_t run;     /* the controller's count of this job's starts ("run"); 0: not given */
    int assign_port; /* "assign_port": the agent picks a free port for PORT (env's PORT
                        is only the preferred one: another program may hold it) */
    int64_t port;    /* "port": the PORT the agent gave the job; 0: none yet */
    char **argv;     /* argc strings + NULL; owned */
    size_t argc;
    char **env; /* "K=V" strings + NULL; owned */
    size_t envc;
    /* "secret_env": "K=V" strings + NULL, owned, or NULL. Kept in memory
     * only: cr_job_spec_to_json leaves them out, so no record or journal
     * line in the state dir ever holds them; wiped when freed. */
    char **secret_env;
    size_t secretc;
    /* "plan_env": the advisor's plan (CORRAL_TP, CORRAL_MEGATRON_ARGS, ...;
     * docs/model.md "The plan in the job"): "K=V" strings + NULL, owned, or
     * NULL. Only CORRAL_* names; Corral's own, so set after the job's env. */
    char **plan_env;
    size_t planc;
    char *workdir; /* owned; NULL: the state dir's job dir */
    int *gpus;     /* gpu_count indexes; owned */
    size_t gpu_count;
    char **gpu_uuids; /* uuid_count strings; owned */
    size_t uuid_count;
    char *checkpoint_dir; /* owned; may be NULL */
    char *mig_profile;    /* owned; NULL: whole GPUs; else one instance of it on gpus[0] */
    /* "gpu_milli", "gpu_mem_bytes": a fractional task on a shared GPU
     * (thousandths of its compute, memory held); 0: not shared. The job's
     * env gets the MPS limits and CORRAL_GPU_SHARING (cr_job_env). */
    int64_t gpu_milli;
    int64_t gpu_mem_bytes;
    /* Agent-local, never in JSON: the MPS pipe directory of the daemon that
     * serves this fractional task (agent_mps.c); NULL: time-sliced. Borrowed. */
    const char *mps_pipe;
    /* Agent-local, never in JSON: the controller's URL(s), for a batch job's
     * srun to report its steps to (CORRAL_STEP_SERVER). Borrowed; NULL. */
    const char *step_server;
    /* Agent-local, never in JSON: each log file's cap (--log-max-bytes); 0 none. */
    int64_t log_max_bytes;
    int64_t grace_ns; /* stop: SIGTERM, this long, SIGKILL */
    char tenant[64];  /* "tenant": the job's tenant ("" unknown), for metrics labels */
    int action;       /* cr_action */
    int has_gang;
    cr_gang gang;
    int has_user;      /* "uid" given: run as uid/gid; 0: as the agent's own user */
    int64_t uid, gid;  /* "uid"/"gid": the Unix user the job runs as (with has_user) */
    int allow_root;    /* "allow_root": uid 0 is allowed (an admin said so for the tenant) */
    double cpus;       /* "cpus": CPU limit in cores; 0: none */
    int64_t mem_bytes; /* "mem_bytes": memory limit; 0: none */
    int64_t pids;      /* "pids": tasks limit (pids.max); 0: CR_ISO_PIDS_PER_GPU per GPU */
    /* Batch-job members (all owned, NULL when not given). */
    char *name;        /* job name (SLURM_JOB_NAME) */
    char *nodelist;    /* the job's nodes, comma-separated, rank order */
    char *script;      /* batch script text shipped with the job: written
                          to a file on the node and run as argv[0] */
    char *out_pattern; /* -o: stdout file pattern (%j %A %a %t %N %x %%) */
    char *err_pattern; /* -e: stderr file pattern */
    char *submit_dir;  /* where it was submitted from (SLURM_SUBMIT_DIR) */
    int open_append;   /* "open_mode": "append": -o/-e files are appended to, not truncated */
    /* "batch": Slurm's batch semantics (docs/slurm.md): this node's one
     * process is `corral stepd`, which on rank 0 also runs the script once
     * (the batch step); srun in it asks the agents of "step_agents" (URLs,
     * rank order, comma-separated; owned) for steps with "step_token" (the
     * run's step credential: kept in memory only, like secret_env). */
    int batch;
    char *step_agents;
    char step_token[CR_STEP_TOKEN_MAX];
    int64_t array_index; /* array task index, -1 when not an array task */
    int64_t array_job;   /* the array's first job id, 0 when not an array task */
    int64_t array_count, array_min, array_max, array_step; /* SLURM_ARRAY_TASK_*; 0: unknown */
    double cpus_per_task; /* sbatch -c (SLURM_CPUS_PER_TASK); 0: not given */
    int ntasks_unset;     /* a batch job that asked no tasks: no SLURM_NTASKS, as sbatch */
    /* "signal": {"name": "USR1", "at": N}: deliver that signal to the job's
     * tasks once for each new "at" (scancel --signal, sbatch --signal). */
    char signal_name[12];
    int64_t signal_at;
    /* The suspend contract (docs/agent.md): "checkpoint_signal": a stop
     * because the controller no longer wants the job here (a suspension)
     * sends this signal instead of SIGTERM, then SIGKILL after grace_ns;
     * "resume": this run resumes from its checkpoint (CORRAL_RESUME=1). */
    char ckpt_signal[12];
    int resume;
    /* "keep_running_on_partition": the node lease (docs/operations.md)
     * leaves it running while no controller answers; the controller does
     * not requeue it when the node is lost either. */
    int keep_running;
    cr_container ctr; /* "container"; ctr.image NULL: none */
    /* "data": the datasets staged before the job starts (docs/data.md), an
     * array of {"name", "version", "uri", "size_bytes", "sha256", "env",
     * "mount"?}, checked by the parser; owned reference, NULL: none. */
    json_t *data;
    /* Agent-local, never in JSON: "NAME=PATH" of each staged dataset for
     * the job's environment (CORRAL_DATA_<NAME>), NULL-ended; borrowed. */
    char **data_env;
} cr_job_spec;

/* Dynamic MIG: the layout the controller wants on one GPU ("mig_layouts"). */
typedef struct cr_mig_layout {
    int gpu; /* GPU index */
    cr_mig_want inst[CR_GPU_MAX_MIG];
    size_t n;
} cr_mig_layout;

typedef struct cr_desired {
    int64_t version;
    cr_mig_layout *layouts; /* "mig_layouts": nlayouts entries; owned, may be NULL */
    size_t nlayouts;
    char *checkpoint_base;          /* "checkpoint_base": <root>/<cluster id>; owned, may be NULL */
    int64_t checkpoint_retention_s; /* "checkpoint_retention_s": 0 keep forever */
    /* "power_cap_w": each GPU's power limit (its pool's power budget,
     * docs/pools.md "GPU power caps"); 0: none, the board's default */
    int64_t power_cap_w;
    cr_job_spec *jobs; /* count entries; owned */
    size_t count;
    /* "stop_reasons": why jobs no longer listed stopped (id -> text), for
     * the log; owned reference, NULL when none */
    json_t *stop_reasons;
} cr_desired;

/* Parse a desired-state document. err gets "field: why". d is filled only on success. */
int cr_desired_parse(const char *text, size_t len, cr_desired *d, char *err, size_t errlen);
/* Parse one job entry (also used for the records in the state dir). */
int cr_job_spec_from_json(json_t *j, const char *path, cr_job_spec *s, char *err, size_t errlen);
/* Returned new: the entry as JSON (the inverse of cr_job_spec_from_json),
 * without secret_env. */
json_t *cr_job_spec_to_json(const cr_job_spec *s);
/* Give dst a copy of src's secret_env (replacing dst's). */
void cr_job_spec_copy_secrets(cr_job_spec *dst, const cr_job_spec *src);
void cr_job_spec_fini(cr_job_spec *s);
void cr_desired_fini(cr_desired *d);
const cr_job_spec *cr_desired_find(const cr_desired *d, int64_t job);
/* The controller's reason why a job no longer listed stopped; NULL none.
 * Valid while d is. */
const char *cr_desired_stop_reason(const cr_desired *d, int64_t job);

/*
 * The environment of a job (job_env.c): never the agent's own. base
 * (borrowed, NULL-ended; see cr_job_env_base) minus the variables Corral
 * sets, plus the job's env and secret_env, plus CUDA_VISIBLE_DEVICES,
 * CORRAL_JOB_ID, CORRAL_NODE, CORRAL_CHECKPOINT_DIR and, for a gang, the
 * torchrun variables. Returned new: NULL-ended, free with cr_strv_free.
 */
char **cr_job_env(const cr_job_spec *s, char *const *base, const char *node);
/*
 * The clean defaults a job's environment starts from: PATH, HOME, USER,
 * LOGNAME, SHELL, LANG (from the passwd entry of the job's uid when there
 * is one; HOME falls back to the job's directory). home_fallback borrowed.
 * Returned new, NULL-ended (cr_strv_free).
 */
char **cr_job_env_base(const cr_job_spec *s, const char *home_fallback);
void cr_strv_free(char **v);
/*
 * The abstract Unix socket name (without the leading NUL) a batch job's
 * stepd listens on: "corral-step-" and a hash of its step token, so the
 * agent finds it from the token and its node's name (several agents may
 * share a host, and so a network namespace) and the name (listed in
 * /proc/net/unix) gives the token away to no one. out: at least 64 bytes.
 */
void cr_step_sock_name(const char *token, const char *node, char *out, size_t len);

#endif
