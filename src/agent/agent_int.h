/*
 * agent_int.h - private state shared by the files of the agent role.
 *
 * Threads:
 *   main     the reconcile loop (agent_main.c): owns procs, the GPU backend,
 *            samples and health; sends register and status.
 *   poller   long-polls the desired state (agent_net.c) and hands each new
 *            document to main through a->pending and the wake pipe.
 *   http     libmicrohttpd's threads (agent_http.c): /metrics, /v1/health
 *            and the job log route; they read only what a->mu guards.
 * Lock: a->mu (one lock, leaf: nothing else is taken while holding it)
 * guards pending, node_token, registered, need_register, metrics_text,
 * wait_s and the counters marked (mu).
 */
#ifndef CR_AGENT_INT_H
#define CR_AGENT_INT_H

#include "cr_buf.h"
#include "cr_client.h"
#include "cr_ctr.h"
#include "cr_dcache.h"
#include "cr_desired.h"
#include "cr_gpu.h"
#include "cr_proc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct agent_cfg {
    const char *server;        /* controller base URL, no trailing '/' */
    char *join_token;          /* owned: bootstrap token (file, CORRAL_JOIN_TOKEN or inline); NULL
                                  when the state dir holds this node's credential */
    const char *ca_file;       /* --ca-file: PEM CA bundle to verify the controller; NULL system */
    const char *tls_cert;      /* --tls-cert: serve HTTPS with this PEM certificate */
    const char *tls_key;       /* --tls-key: its private key */
    const char *tls_client_ca; /* --tls-client-ca: callers must show a certificate of this CA */
    char *metrics_token;       /* owned: --metrics-token-file's token /metrics asks; NULL open */
    const char *node;          /* node name */
    const char *rack;          /* rack name ("" none) */
    const char *gpus;          /* --gpus spec */
    uint64_t share_mask;       /* --share-gpus: GPU indexes offered to fractional tasks (bit i) */
    char listen_host[256];     /* --listen host */
    int listen_port;           /* --listen port; 0 picks one */
    const char *advertise;     /* address the controller and gang peers use */
    const char *state_dir;     /* jobs, logs, records */
    const char *faults;        /* sim fault file */
    int64_t wait_s;            /* long-poll wait asked of the controller */
    int64_t run_for_ns;        /* exit after this long (0: run until signalled) */
    int kill_on_exit;          /* stop the jobs when the agent exits */
    const char *cgroup;        /* --cgroup: auto, off or a cgroup v2 directory */
    const char *cgroup_v1; /* --cgroup-v1: auto or off (the v1 devices/memory/cpu controllers) */
    int job_pidns;         /* --job-pid-namespace auto (1) or off (0) */
    const char *dev_dir;   /* --dev-dir: GPU device nodes; NULL: /dev, or STATE-DIR.dev for sim */
    /* --task-env K=V (repeatable): the node's settings for every task
     * (NCCL_SOCKET_IFNAME, NCCL_IB_HCA...); a job's own env wins. */
    const char **task_env; /* owned array, strings borrowed from argv */
    size_t ntask_env;
    int rdzv_lo, rdzv_hi; /* --rdzv-ports: where rank 0's rendezvous port is reserved */
    const char **labels;  /* --label K[=V] (repeatable): owned array, strings from argv */
    size_t nlabels;
    const char *ctr_runtime; /* --container-runtime: auto, runc or crun */
    const char *podman;      /* --podman: the podman program */
    int64_t image_cache_max; /* --image-cache-max: bytes of images the jobs used; 0 no cap */
    char **registries;       /* --image-registries: owned array, strings from argv */
    size_t nregistries;
    int64_t log_max_bytes; /* --log-max-bytes: cap of each job log file (default 64 MiB); 0 none */
    /* The node's data cache (agent_data.c, docs/data.md). */
    const char *data_cache;  /* --data-cache DIR; NULL: STATE-DIR/data */
    int64_t data_cache_max;  /* --data-cache-max: its cap in bytes (default 64 GiB); 0: none */
    int64_t data_verify_s;   /* --data-verify: an entry in use hashed again at least this often
                                (seconds; default 86400; 0: at every job's use) */
    const char *s3_endpoint; /* --data-s3-endpoint URL; NULL: https://s3.amazonaws.com */
    const char *s3_region;   /* --data-s3-region; NULL: us-east-1 */
    const char *require_iso; /* --require-isolation: fences that must hold (cr_iso_require); NULL */
    const char *spot_notice; /* --spot-notice-file: its appearance is a reclaim notice; NULL */
    cr_gpu_health_cfg health;
    /* GPU sharing (agent_mps.c) and dynamic MIG (agent_mig.c). */
    const char *mps_control;  /* --mps-control: MPS control program, "none"; NULL: look for it */
    const char *mps_dir;      /* --mps-dir: MPS pipe directories; NULL: the default */
    uint64_t mig_dynamic;     /* --mig-dynamic: MIG GPUs whose layout the controller may change */
    int no_dcgm;              /* --no-dcgm: leave DCGM-named series to the real exporter */
    const char *dcgm_job_map; /* --dcgm-job-map DIR: dcgm-exporter's job mapping files */
} agent_cfg;

/* The agent's argv with its --config file's flags spliced in
 * (agent_conf.c): the file's flags first, then the command line's. */
typedef struct agent_argv {
    int argc;
    char **argv;  /* argc entries and a NULL */
    char **owned; /* per entry: the string to free, or NULL (borrowed) */
} agent_argv;

/* Builds out from argc/argv (borrowed: out points into them); CR_EPARSE
 * after printing the error. Free with cr__agent_argv_free. */
int cr__agent_argv_build(int argc, char **argv, agent_argv *out);
void cr__agent_argv_free(agent_argv *a);

/* agent_mps.c: the MPS control daemon of one GPU. */
typedef struct agent_mps_gpu {
    int state;        /* none, up, left by an earlier agent run, failed to start */
    int64_t uid, gid; /* whose daemon (MPS serves one user at a time) */
    char why[240];    /* failed: why */
} agent_mps_gpu;

typedef struct agent {
    agent_cfg cfg;
    cr_gpu_backend *gpu;
    cr_gpu_sample samples[CR_GPU_MAX];
    cr_gpu_health health[CR_GPU_MAX];
    cr_proc *procs; /* main only */
    size_t nprocs, procs_cap;
    cr_desired desired; /* main only: the document being applied */
    int have_desired;   /* main only */
    int port;           /* the port actually bound */
    cr_iso iso;         /* what fences the jobs here (probed at start) */
    char unfit[256];    /* --require-isolation not met: why; this node takes no jobs ("" it does) */
    int64_t next_sweep_ns; /* main only: next checkpoint retention sweep (monotonic) */
    int64_t reclaim_in_s;  /* main only: a spot reclaim notice to report (s); 0 none */
    int reclaim_told;      /* main only: the controller took the notice (a 200) */
    cr_ctr ctr;            /* podman for jobs with an image (probed at start) */
    int64_t next_ctr_ns;   /* main only: next sweep of containers no job owns (monotonic) */
    int ctr_left;          /* main only: the last sweep found containers of this node */
    int ctr_swept;         /* main only: the first sweep (at start) is done */

    pthread_mutex_t mu;
    cr_desired *pending;    /* (mu) newest document from the poller; taken by main */
    char node_token[256];   /* (mu) bearer after register (this node's credential) */
    char agent_secret[256]; /* (mu) the controller's bearer for calls to this agent */
    int registered;         /* (mu) */
    int need_register;      /* (mu) */
    int64_t heartbeat_ns;   /* heartbeat period from the controller */
    char *metrics_text;     /* (mu) last rendered /metrics body */
    int64_t *live;          /* (mu) ids of the jobs running here, for log follows */
    size_t nlive, live_cap;
    /* (mu) the running batch jobs' step credentials and users, for the
     * step relay (POST /v1/jobs/ID/step, agent_http.c; docs/slurm.md) */
    struct agent_step_cred {
        int64_t job, uid;
        char token[CR_STEP_TOKEN_MAX];
    } * step_creds;
    size_t nstep_creds, step_creds_cap;
    uint64_t n_started, n_exited, n_status, n_status_fail, n_polls, n_poll_fail,
        n_registers; /* (mu) counters */
    /* The node lease (agent_net.c), main only: lease_ns is the controller's
     * "lease_s" (0: none told yet); lease_ok_ns the monotonic time a
     * register or status the controller answered was sent (the controller
     * heard the node no earlier); lease_expired: no answer for lease_ns,
     * the jobs it covers were stopped. Kept in STATE-DIR/lease. */
    int64_t lease_ns;
    int64_t lease_ok_ns;
    int lease_expired;

    atomic_int stop;      /* set to end every thread */
    int wake_rd, wake_wr; /* pipe: poller -> main */
    pthread_t poller;
    int poller_started;
    void *mhd;                 /* struct MHD_Daemon * */
    atomic_int http_followers; /* log requests waiting for bytes now (agent_http.c) */
    char *tls_pem[3];     /* owned: --tls-cert, --tls-key, --tls-client-ca texts while serving */
    cr_client *status_cl; /* controller client, owned; main thread only */
    int jobmap_warned;    /* main only: a job-map write failure was logged */
    /* agent_mps.c, main only */
    char mps_bin[512];             /* the MPS control program, "" none (time-slicing) */
    char mps_dir[512];             /* MPS pipe directories live below */
    int mps_sim;                   /* the sim backend ("time-sliced (simulated)") */
    agent_mps_gpu mps[CR_GPU_MAX]; /* per GPU index */
    int64_t mig_refused_version;   /* agent_mig.c, main only: refusal logged for this document */
    /* main only: the desired power cap applied (-1: none asked yet) and
     * each GPU's limit in force under it (0: no cap set by us) */
    int64_t power_cap_req;
    int power_cap_w[CR_GPU_MAX];
    /* agent_data.c, main only: the data cache (NULL: none) and the jobs
     * whose data is being staged (not started yet), with their progress. */
    cr_dcache *dcache;
    struct agent_staging {
        int64_t job, run;
        char msg[400];
    } * staging;
    size_t nstaging, staging_cap;
    atomic_int data_woke; /* the cache's worker: a job's data became ready or failed */
    int staging_moved;    /* main only: a staging job's progress text changed (report it) */
} agent;

/* The most of each of a finished job's stdout and stderr (its end) shipped
 * to the controller with its exit, so `corral logs` answers after the node
 * is gone (docs/data.md "Logs that outlive the node"). */
#define CR_LOG_SHIP_BYTES 65536

/* agent_net.c */
int cr__agent_register(agent *a);
/* Send a status; on success *acked is the controller's desired-state
 * version after it took the report in (0 when it did not say). */
int cr__agent_post_status(agent *a, int64_t *acked);
int cr__agent_poller_start(agent *a);
void cr__agent_poller_join(agent *a);
void cr__agent_wake(agent *a);
/* The nvlink_domain sent to the controller: a lone GPU gets 1000 + index. */
int cr__agent_wire_domain(const cr_gpu_info *g);
/* Build the register / status bodies (exposed for tests). Returned new. */
json_t *cr__agent_register_body(const agent *a);
json_t *cr__agent_status_body(const agent *a);

/* The node lease: the lease and the time of the last answer from
 * STATE-DIR/lease, when written since this boot (a restarted agent keeps
 * its lease). */
void cr__agent_lease_load(agent *a);
/* Past the lease (no register or status answered for lease_ns): stop,
 * once, every running job not marked keep_running (SIGTERM, its grace
 * counted from the lease's end, SIGKILL). Returns 1 when it began stops;
 * *next_ns (monotonic) lowered to when the lease ends. Main thread. */
int cr__agent_lease_tick(agent *a, int64_t mono_ns, int64_t *next_ns);

/* agent_cred.c: this node's credential in STATE-DIR/node.cred (0600). */
/* Load it when it is this node's; 0 or CR_ENOENT. */
int cr__agent_cred_load(agent *a);
/* Write node_token and agent_secret (mu not held); 0 or CR_EIO. */
int cr__agent_cred_save(agent *a);
/* Forget the stored credential (the controller refused it). */
void cr__agent_cred_forget(agent *a);
/* Is token the controller's secret for this agent? Constant time. */
int cr__agent_token_ok(agent *a, const char *token);
/* Does STATE-DIR/node.cred exist? */
int cr__agent_cred_exists(const char *state_dir);

/* agent_ctr.c: jobs with an image (docs/containers.md). */
/* Image and mounts ready, then *out = the spec to spawn (podman's argv;
 * returned new). On failure why says it for the job's event; *fatal when a
 * retry cannot help (a missing image). */
int cr__agent_ctr_prepare(agent *a, const cr_job_spec *s, cr_job_spec **out, char *how,
                          size_t howlen, int64_t *pull_ms, char *why, size_t whylen, int *fatal);
/* The job of s (podman's spec) ended: remove its container and leftovers. */
void cr__agent_ctr_ended(agent *a, const cr_job_spec *s);
/* A stop began: podman stop -t GRACE too (the signal proxy is the first). */
void cr__agent_ctr_stop(agent *a, const cr_proc *p, int64_t grace_ns);
/* Every 5 s while there are containers: remove the node's containers no
 * running job owns; delete secret env files once podman has read them. */
void cr__agent_ctr_sweep(agent *a, int64_t mono_ns);
/* At exit: corral-<node>-<instance> in the hierarchies podman made it in, when empty. */
void cr__agent_ctr_fini(agent *a);
/* agent_data.c: datasets staged before a job starts (docs/data.md). */
/* Open the node's data cache (with a cap set). 0 or CR_EIO (printed). */
int cr__agent_data_start(agent *a);
void cr__agent_data_stop(agent *a);
/*
 * Job s names data: 1 when it is all here (*env returned new: "CORRAL_DATA_X=path"
 * strings, NULL-ended, cr_strv_free), 0 while it is staged (the progress is
 * in a->staging for the status), < 0 when it cannot be (why names the
 * dataset; the job fails with it, not retried). A job without data: 1, *env NULL.
 */
int cr__agent_data_stage(agent *a, const cr_job_spec *s, char ***env, char *why, size_t whylen);
/* A job with an image: each staged object bind-mounted read-only at its
 * mount point (else /corral/data/NAME), env (from cr__agent_data_stage)
 * changed to name the paths inside the container. Returned new (free with
 * cr_job_spec_fini and free), or NULL when there is nothing to mount. */
cr_job_spec *cr__agent_data_mounts(const cr_job_spec *s, char **env);
/* Pins of jobs neither staging nor running go; staging of jobs the
 * desired state no longer runs here is dropped. */
void cr__agent_data_sweep(agent *a);
/* A requeued or resumed job's newest checkpoint under dir: its "latest"
 * entry (a symbolic link the job keeps, resolved; inside dir only), else
 * the most recently modified entry not starting with '.'. Returned new as
 * "CORRAL_CHECKPOINT_LATEST=PATH", or NULL when there is none. */
char *cr__agent_ckpt_latest(const char *dir);
/* The status body's "data_held": the sha256 of the objects the node's
 * cache holds (at most CR_DATA_HELD_MAX), for the controller's locality;
 * NULL without a cache. Returned new. */
#define CR_DATA_HELD_MAX 1024
json_t *cr__agent_data_held(const agent *a);
/* The status body's "staging" entries of the jobs array. */
void cr__agent_data_status(const agent *a, json_t *jobs);

/* agent_imgcache.c: record that a job used image (with a cap set). */
void cr__agent_img_used(agent *a, const char *image);
/* Remove least recently used images past --image-cache-max (none in use). */
void cr__agent_img_evict(agent *a);

/* agent_mps.c: GPU sharing for fractional tasks (docs/isolation.md). */
/* Find the MPS control program and the pipe directory; CR_EINVAL with err
 * for a bad --mps-control/--mps-dir. */
int cr__agent_mps_init(agent *a, char *err, size_t errlen);
/* A fractional task s is about to start: returns 1 and its pipe directory
 * when an MPS daemon (started if need be) serves it, else 0; how gets the
 * text of its "shared" event either way. */
int cr__agent_mps_job(agent *a, const cr_job_spec *s, char *pipe_dir, size_t plen, char *how,
                      size_t hlen);
/* The event text (pure, for tests): "mps 25% threads, 10 GiB pinned",
 * "time-sliced, memory limit by contract (WHY)", "time-sliced (simulated)". */
void cr__agent_mps_how(int mps, const char *why, int sim, int64_t milli, int64_t mem_bytes,
                       char *how, size_t len);
/* Stop the daemons of GPUs that host no fractional task any more. */
void cr__agent_mps_sweep(agent *a);
/* At exit: stop every daemon (running clients finish first). */
void cr__agent_mps_fini(agent *a);

/* agent_mig.c: apply the desired document's MIG layouts (before its jobs
 * start); registers again after a change. Returns 1 when a layout changed. */
int cr__agent_mig_apply(agent *a);

/* agent_http.c */
int cr__agent_http_start(agent *a, char *err, size_t errlen);
void cr__agent_http_stop(agent *a);
/* Prometheus text of the node's GPUs and the agent (into b). */
void cr__agent_metrics_render(const agent *a, cr_buf *b);
/* agent_metrics.c: allocation and MIG series, the extra DCGM fields. */
void cr__agent_metrics_work(const agent *a, cr_buf *b);
/* Write dcgm-exporter's job mapping files (when --dcgm-job-map); main only. */
void cr__agent_job_map(agent *a);

#endif
