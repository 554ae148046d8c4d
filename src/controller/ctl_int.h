/*
 * ctl_int.h - private state of the controller, shared by its files.
 *
 * Threads:
 *   - HTTP threads (libmicrohttpd pool) run the route handlers;
 *   - the store's writer thread commits and calls back (ctl_*_committed);
 *   - the scheduler thread (ctl_sched.c) owns the cr_sched and also runs
 *     the timers: lost nodes, long-poll deadlines.
 * All in-memory state below `mu` is guarded by ctl->mu. Lock order:
 * ctl->mu, then the store's queue lock (cr_store_submit is called with mu
 * held so that store order equals memory order), then the HTTP request
 * lock (cr_http_respond). Never wait for a commit while holding mu: commit
 * callbacks take mu.
 *
 * Visibility: a submitted job enters memory only once its row is durable,
 * so a job that anyone can see is a job that survives kill -9. Likewise a
 * user's change, an agent's report of a job's end, a scheduler's start
 * (start_unstored until then), a node's loss, an admin's node delete and a
 * time limit's stop are stored before memory (or an agent) shows them
 * (docs/architecture.md, "Commit first").
 */
#ifndef CTL_INT_H
#define CTL_INT_H

#include "ctl_auto.h"

#include "cr_auth.h"
#include "cr_jwt.h"
#include "cr_buf.h"
#include "cr_etcd.h"
#include "cr_http.h"
#include "cr_json.h"
#include "cr_prom.h"
#include "cr_store.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define CTL_NAME_MAX 64
/* Batch jobs (docs/api.md): tasks on one node, a shipped script's size. */
#define CTL_MAX_TASKS_PER_NODE 256
#define CTL_MAX_SCRIPT_BYTES   65536
#define MAX_ARRAY_TASKS        10000   /* tasks in one array */
#define MAX_ARRAY_INDEX        1000000 /* largest array index */
#define MAX_DEP_TERMS          16      /* terms in one dependency */

typedef enum ctl_job_state {
    JS_PENDING = 0,
    JS_HELD,
    JS_RUNNING,
    JS_COMPLETING, /* stop requested, waiting for the agent to report the exit */
    JS_COMPLETED,
    JS_FAILED,
    JS_CANCELLED,
    JS_PREEMPTED, /* not stored as a resting state: preempted work is pending again */
    JS_COUNT
} ctl_job_state;

extern const char *const ctl_job_state_names[JS_COUNT];

typedef enum ctl_node_state { NS_UP = 0, NS_DRAINED, NS_LOST, NS_COUNT } ctl_node_state;
extern const char *const ctl_node_state_names[NS_COUNT];

typedef struct ctl_place {
    char node[CTL_NAME_MAX]; /* node name */
    int gpus[64];            /* GPU indices on that node */
    size_t ngpus;            /* entries in gpus */
    char mig_profile[32];    /* MIG profile when the job runs on slices */
    bool exited_ok;          /* gang jobs: this node's rank exited 0 in the current run */
    int8_t mig_start[64];    /* MIG: the instance's first slice per gpus entry, -1 unknown */
} ctl_place;

typedef struct ctl_job {
    int64_t id;
    char tenant[CTL_NAME_MAX];
    json_t *spec;        /* owned reference: the validated request members (array tasks share it) */
    int64_t array_first; /* array tasks: the first id of the array, else 0 */
    int32_t array_index; /* array tasks: the index in the array */
    ctl_job_state state;
    char *reason; /* owned: pending reason or end reason; may be NULL */
    int exit_code, signal, retries, max_retries;
    int runs;                /* starts so far; the current run's number in desired state */
    int susp_run;            /* suspended: the run whose exit (its checkpoint written) we await */
    int port;                /* service replica: the PORT its agent gave this run; 0 unknown */
    int pull_event_run;      /* container jobs: the run whose "image pull" event is recorded */
    int share_event_run;     /* fractional tasks: the run whose "shared" event is recorded */
    int cap_event_run;       /* the run whose "output capped" event is recorded */
    int lost_event_run;      /* the run whose "output lost" event is recorded */
    int64_t reason_event_ns; /* last 'pending' event (wall clock; 0 = none yet) */
    int64_t submit_ns, start_ns, end_ns; /* wall clock; 0 = not yet */
    /* Scheduling request, extracted from spec. */
    int gpus, nodes, priority;
    char gpu_type[CTL_NAME_MAX];  /* "auto", "any" or a type name */
    char run_type[CTL_NAME_MAX];  /* running: the type it got */
    ctl_plan plan;                /* the advisor's plan on run_type (tp 0: none; ctl_auto.h) */
    char last_node[CTL_NAME_MAX]; /* first node of the last placement (logs) */
    char *last_nodes;             /* owned: the last placement's nodes, comma-separated in
                                     rank order (logs --rank), NULL before the first run */
    int last_tpn;                 /* tasks per node of the last run (0 before the first) */
    char mig_profile[32];
    double gpu_mem_gb;
    int gpu_milli;         /* fractional: thousandths of one shareable GPU (0: whole GPUs) */
    int64_t gpu_mem_bytes; /* fractional: memory held on the shared GPU (0: none asked) */
    char kind[16];
    bool preemptible;
    /* The suspend contract (docs/api.md "Suspend and resume"): the job
     * checkpoints into CORRAL_CHECKPOINT_DIR on ckpt_signal and exits
     * CTL_EXIT_SUSPENDED; only such a job is ever suspended. */
    bool checkpointable;
    char ckpt_signal[12]; /* "USR1" by default */
    int64_t time_limit_s, checkpoint_interval_s;
    /* Runtime. */
    ctl_place *place; /* owned: placement while running */
    size_t nplace;
    bool in_sched;          /* known to the cr_sched */
    bool cancel_requested;  /* stop requested by a user cancel */
    bool timed_out;         /* stop requested: ran past time_limit_s */
    bool requeue_requested; /* stop requested by requeue/preemption */
    /* Idle-GPU reclaim (ctl_nodes.c): since when (monotonic) every GPU of
     * run idle_run has reported at most CTL_IDLE_UTIL_PCT, 0 when busy;
     * the run whose idle warning is recorded. In memory only. */
    int64_t idle_since_mono;
    int idle_run;
    int idle_warned_run;
    int64_t stop_grace_s; /* >0: the stop's grace instead of grace_s (a spot reclaim's
                           * notice: ctl_node_reclaim); in memory only */
    char sig_name[12];    /* the last signal asked for the running job ("USR1"), "" none */
    int64_t sig_at;       /* when it was asked (wall clock ns): the agents deliver each once */
    int sig_warned_run;   /* the run that got its --signal SIG@SECONDS warning */
    bool gated;           /* pending, held out of the scheduler by its dependency,
                             array throttle or begin time (ctl_batch.c) */
    int64_t acct_ns;      /* accounted up to (wall clock; persisted) */
    /* Monotonic twins of start_ns and acct_ns (in memory only): time limits
     * and GPU-time accounting measure on these, so a wall-clock step neither
     * kills a job early nor bills hours it did not run. Valid while
     * start_ns / acct_ns are > 0; after a restart they are derived from the
     * persisted wall times (ctl_mono_from_wall). */
    int64_t start_mono_ns;
    int64_t acct_mono_ns;
    /* Secrets (--secret): sealed with the state dir's key (ctl_secure.c),
     * never in the API view; plain only while a submit is validated. */
    char *secrets_enc;   /* owned: base64 nonce+ciphertext of {"NAME":"VALUE"}, or NULL */
    json_t *secrets;     /* owned: the request's plain secrets until sealed, or NULL */
    uint64_t ver;        /* bumped by every stored change (ctl_state.c) */
    bool committing;     /* a user action or an agent's report of its end is being
                          * committed (ctl_state.c, ctl_nodes.c) */
    bool start_unstored; /* placed by the scheduler, the start not yet durable: in no
                          * desired state, shown pending (ctl_sched.c) */
    bool ending;         /* an agent's report of its end is being stored (ctl_report.c):
                          * no loss, deletion or preemption may end it meanwhile */
    bool end_deferred;   /* one came meanwhile: requeue it if that end is refused */
    bool staging;        /* running, its data being staged on a node: reason says how far
                          * (docs/data.md; memory only) */
    int64_t touch_mono;  /* finished: when it entered memory or ended (retention) */
    int64_t dep_mono;    /* last read as a gated job's dependency target (ctl_batch.c):
                          * retention keeps it in memory CTL_DEP_PIN_S after that */
} ctl_job;

#define CTL_DEP_PIN_S 10

#define CTL_POWER_CAP_MAX_W 10000 /* = the agent's CR_POWER_CAP_MAX_W */
typedef struct ctl_gpu {
    int index;
    char uuid[96];
    char model[CTL_NAME_MAX];
    uint64_t mem_bytes;
    int nvlink;
    char health[16]; /* ok|xid|ecc|hot */
    char reason[128];
    json_t *mig; /* owned: MIG instances as registered, or NULL */
    /* The start slice the scheduler gave each registered MIG instance
     * (same order as mig; -1 = not schedulable). */
    int8_t mig_start[8];
    bool mig_unusable; /* MIG layout the scheduler cannot model: kept out of use */
    double util_pct, temp_c, power_w;
    int power_cap_w; /* the limit its agent put in force for its pool's power budget; 0 none */
    uint64_t mem_used_bytes;
    int64_t alloc_job; /* whole-GPU holder (0 = free) */
    bool shareable;    /* the agent offers it to fractional tasks (--share-gpus) */
    /* Dynamic MIG (the agent's --mig-dynamic): the scheduler may change its
     * layout; mig_want (owned, NULL none) is the layout the agent is asked
     * for ("mig_layouts" in its desired state) until it registers it. */
    bool mig_dynamic;
    json_t *mig_want;
} ctl_gpu;

typedef struct ctl_poll {
    cr_http_req *req;    /* deferred long-poll */
    int64_t deadline_ns; /* monotonic */
    struct ctl_poll *next;
} ctl_poll;

typedef struct ctl_node {
    char name[CTL_NAME_MAX];
    char addr[64];
    int port;
    char rack[CTL_NAME_MAX];
    ctl_gpu *gpus;
    size_t ngpus;
    int cpus;
    uint64_t mem_bytes;
    json_t *labels;    /* owned: {"k": "v"} from the agent's --label, or NULL */
    json_t *data_held; /* owned: sha256 of the objects its data cache holds (status), or NULL */
    ctl_node_state state;
    bool drained; /* admin drain (survives lost/up) */
    char reason[256];
    int64_t last_seen_ns;  /* monotonic */
    int64_t registered_ns; /* wall clock */
    uint64_t version;      /* desired-state version */
    int64_t *jobs;         /* ids of jobs placed here */
    size_t njobs, capjobs;
    int64_t gone[8]; /* the last jobs taken off this node (ctl_node_del_job), a ring: their
                        desired state says why they stopped ("stop_reasons") */
    unsigned ngone;  /* entries written to gone so far */
    ctl_poll *polls; /* waiting long-polls */
    /* What the agent can enforce: uid, devices, memory, cpu = "enforced" or
     * "unavailable" ("" not said: an older agent), and its reasons. */
    char iso[5][16];
    char iso_detail[512];
    /* The agent takes no jobs: why (its require_isolation names a fence it
     * cannot enforce); "" it does. The node is drained with reason
     * CTL_UNFIT_PREFIX + why until the agent registers fit. */
    char unfit[256];
    bool sched_dirty;     /* inventory/health changed: tell the scheduler */
    bool lost_at_start;   /* loaded lost: its jobs are requeued once (ctl_nodes_tick) */
    bool loss_pending;    /* its loss is being stored (ctl_nodes_tick): not yet lost */
    bool deleting;        /* an admin's delete is being stored (ctl_lifecycle.c): out of
                           * placement, its agent and other node changes answered 409 */
    int64_t loss_seen_ns; /* last_seen_ns when the loss was decided */
    /* NS_LOST: when its jobs' copies on the node are stopped by the node
     * lease (ctl_lease_end_ns) and they may be requeued (monotonic); 0
     * once they were. */
    int64_t requeue_at_ns;
    uint32_t sched_idx; /* index in cr_sched */
    bool in_sched;
    bool pending_approval;                /* node_approval manual: kept drained until approved */
    bool tls;                             /* the agent serves HTTPS */
    int64_t reclaim_req_s;                /* its agent's spot notice, to do (ctl_nodes_reclaims) */
    bool reclaimed;                       /* a reclaim was done for it (once) */
    char agent_secret[CR_TOKEN_TEXT_MAX]; /* the controller's bearer for this agent ("" unknown) */
} ctl_node;

/* The node lease (docs/operations.md "Node lease"): an agent that no
 * controller has answered for lease_s (= lost_after_s, told at register
 * and in each status answer) stops its jobs, with grace_s before SIGKILL.
 * A lost node's jobs are requeued only once lease_s + grace_s + this margin
 * (the agent's loop turn and a call in flight) have passed since it was
 * last heard, so a job's old copy is gone before its new one starts. */
#define CTL_LEASE_MARGIN_S 5
#define CTL_UNFIT_PREFIX   "agent takes no jobs: "

/* A tenant, a node of the tenant tree (docs/scheduler.md "Tenant tree"):
 * quotas are its guarantee, limits bound its subtree's whole use, lending
 * limits bound how much of its idle guarantee others borrow. parent ""
 * for a root (every flat tenant). fair_rank and level_fs are the
 * scheduler's last fair-tree result (-1 and NAN before one). */
#define CTL_TENANT_DEPTH_MAX      8 /* = CR_SCHED_TENANT_DEPTH_MAX */
#define CTL_HYBRID_CONSTRAINT_MAX 256
#define CTL_BURST_BUDGET_MAX      1e9 /* currency a month */
typedef struct ctl_tenant {
    char name[CTL_NAME_MAX];
    char parent[CTL_NAME_MAX];
    double weight;
    json_t *quotas;  /* owned: {"type": gpus} */
    json_t *limits;  /* owned: {"type": gpus} */
    json_t *lending; /* owned: {"type": gpus} */
    int fair_rank;
    double level_fs;
    /* Idle-GPU policy, inherited down the tree ("idle" in the API): after
     * idle_after_s (0: none set here) a warning, and with idle_requeue the
     * job is requeued idle_grace_s later. */
    int64_t idle_after_s, idle_grace_s;
    bool idle_requeue;
    /* Hybrid policy ("hybrid" in the API, docs/pools.md), each part
     * inherited from the nearest ancestor-or-self that sets it: a default
     * node constraint for its jobs (locked: a job may not name another
     * value for its labels), and a burst budget, the currency its subtree's
     * jobs may spend on elastic (provider) pools' nodes per calendar month
     * (UTC); < 0 none set here. */
    char hy_constraint[CTL_HYBRID_CONSTRAINT_MAX];
    bool hy_locked;
    double hy_burst_budget;
} ctl_tenant;

#define CTL_IDLE_UTIL_PCT 5       /* a GPU at most this busy is idle */
#define CTL_IDLE_SUFFIX   "#idle" /* usage rows of idle GPU-seconds: "<type>#idle" */
/* usage rows of elastic pools' nodes: "<type>#cloud", gpu_s the GPU-seconds
 * bought (booting and idle included), cost their price (ctl_pools.c) */
#define CTL_CLOUD_SUFFIX "#cloud"
#define CTL_IDLE_MAX_S   (30LL * 86400)

typedef struct ctl_usage {
    char tenant[CTL_NAME_MAX];
    char gpu_type[CTL_NAME_MAX];
    char day[16];
    double gpu_s, energy_j, cost;
} ctl_usage;

#define CTL_OIDC_RULES_MAX     64                   /* oidc.map rules */
#define CTL_TOKEN_EXPIRY_MAX_S (10LL * 366 * 86400) /* POST /v1/tokens expires_in_s */
typedef struct ctl_config {
    char listen_addr[64];
    uint16_t port;
    char state_dir[1024];
    char tls_cert[1024], tls_key[1024]; /* paths, "" = plain HTTP */
    /* Shown to agents that ask for a client certificate (mutual TLS); "" none. */
    char tls_client_cert[1024], tls_client_key[1024];
    char join_token_file[1024]; /* "" = <state_dir>/join.token */
    /* --metrics-token-file: /metrics needs this bearer (or an admin token) and
     * then shows tenants; "" = open, tenant-free series (ctl_metrics.c). */
    char metrics_token_file[1024];
    char policy[16];
    int64_t heartbeat_s, lost_after_s;
    int64_t history_step_s;    /* the history's resolution (ctl_hist.c); 0: none kept */
    int64_t sched_interval_ms; /* minimum time between cycles */
    int64_t round_s;           /* policy rounds: the round length */
    int64_t default_time_s;    /* run time assumed for a job without a limit (0 = none) */
    unsigned threads;
    size_t max_body_bytes;
    unsigned request_timeout_s;
    unsigned header_timeout_s;    /* accept/last answer -> request head complete (slowloris) */
    unsigned body_timeout_s;      /* head -> body complete */
    unsigned max_conns;           /* HTTP connections open at once */
    unsigned max_conns_per_ip;    /* of which from one client address */
    unsigned conns_reserved;      /* more per address, for agents' and admins' requests only */
    unsigned max_conns_per_token; /* connections one user or join token holds */
    bool sync_normal;
    char store[1024];         /* "" = SQLite in state_dir; "etcd:URL,URL..." */
    char store_cluster[72];   /* etcd key prefix /corral/<this>/; "" = "default" */
    int64_t etcd_max_txn_ops; /* the etcd cluster's --max-txn-ops; 0 = 128 */
    cr_etcd_sec etcd_sec;     /* TLS and authentication to etcd (store, election) */
    json_t *prices;           /* owned: {"H100 SXM": dollars per GPU-hour} */
    int64_t grace_s;
    char checkpoint_root[1024];     /* per-job checkpoint dirs under it */
    int64_t checkpoint_retention_s; /* agents remove checkpoints untouched this long; 0 never */
    json_t *run_as;                 /* owned: the validated "run_as" section; NULL single-user */
    json_t *mounts_allowed;         /* owned: {"tenant": ["/host/path"...]}; NULL: no mounts */
    json_t *image_registries;       /* owned: ["host[:port]"...] jobs' images may come from
                                       (besides localhost); NULL: none */
    json_t *partitions;             /* owned: the validated "partitions" array; NULL: none */
    json_t *pools;                  /* owned: the validated "pools" array; NULL: none */
    double cpus_per_gpu;            /* default CPU limit per GPU of a job; 0 none */
    int64_t mem_per_gpu_bytes;      /* default memory limit per GPU of a job; 0 none */
    int64_t pids_per_gpu;           /* default tasks (pids.max) per GPU of a job (4096) */
    int64_t default_gpus;           /* GPUs of a job that asks for none (1; 0: CPU jobs) */
    bool shared_submit_dir;         /* the submit directory is the same path on the nodes: a
                                       job without a workdir runs there (sbatch's default) */
    bool manual_approval;           /* node_approval: "manual" holds new nodes until approved */
    bool legacy_join;               /* join_token: the long-lived join.token file is accepted */
    bool agent_addr_link_local;     /* agents may register a link-local addr */
    int64_t audit_retention_s;      /* audit entries older than this are pruned; 0 = forever */
    char agent_ca_file[1024];       /* CA to verify agents that serve HTTPS; "" = system */
    /* Limits (docs/operations.md). */
    int64_t log_timeout_ms;  /* deadline of one log fetch from an agent */
    int64_t log_fetch_max;   /* log fetches at once; more answer 503 */
    int64_t max_spec_bytes;  /* a job's stored request, compact JSON */
    int64_t max_array;       /* tasks per array submit */
    int64_t retain_finished; /* finished jobs kept in memory at most */
    int64_t retain_s;        /* finished jobs leave memory after this age */
    int64_t idem_max;        /* Idempotency-Key answers kept at most per token */
    int64_t idem_tokens;     /* tokens whose Idempotency-Key answers are kept */
    int64_t idem_ttl_s;      /* an Idempotency-Key answer expires after this */
    /* Request rates (ctl_ratelimit.c; docs/operations.md): rps 0 = no limit. */
    double rate_limit_rps;         /* per user or join token, requests a second */
    int64_t rate_limit_burst;      /* ... its bucket's size */
    double rate_limit_anon_rps;    /* per client address, requests without a valid token */
    int64_t rate_limit_anon_burst; /* ... its bucket's size */
    int64_t rate_limit_table;      /* buckets kept, per table (tokens, addresses) */
    /* High availability (ctl_ha.h): "" = a single controller. */
    char advertise_url[520]; /* this controller's URL for clients and followers' redirects */
    int64_t election_ttl_s;  /* the leader's lease */
    char election[1024];     /* etcd client URLs of the election, comma-separated */
    /* OIDC/JWT bearer tokens (docs/security.md "Company identity"):
     * oidc_on when the config has "oidc"; its rules in oidc_rules. */
    bool oidc_on;
    cr_jwt_config oidc;
    cr_jwt_rule oidc_rules[CTL_OIDC_RULES_MAX];
} ctl_config;

/* lost_after_s + grace_s + CTL_LEASE_MARGIN_S in nanoseconds. */
int64_t ctl_lease_requeue_ns(const ctl_config *cfg);

/* A job's Unix user on the nodes (ctl_runas.c). */
typedef struct ctl_run_as {
    bool mapped; /* false: the agent's own user (single-user mode or unmapped: agent) */
    int64_t uid, gid;
    bool allow_root;
} ctl_run_as;
/* Validate a "run_as" config section. */
int ctl_run_as_check(const json_t *v, cr_json_err *err);
/* The user of tenant's jobs submitted by token user (may be NULL). 0, or
 * CR_EPERM with why (the job must be refused). */
int ctl_run_as_lookup(const ctl_config *cfg, const char *tenant, const char *user, ctl_run_as *out,
                      char *why, size_t whylen);
/* ctl_ctr.c: jobs in containers (docs/containers.md). */
/* Validate a "mounts_allowed" config section. */
int ctl_mounts_allowed_check(const json_t *v, cr_json_err *err);
/* Validate an "image_registries" config member. */
int ctl_image_registries_check(const json_t *v, cr_json_err *err);
/* Is path one of the tenant's mounts_allowed paths or below one? */
bool ctl_mount_allowed(const ctl_config *cfg, const char *tenant, const char *path);
/* Parse the container members of a job request into spec. 0 or err. */
int ctl_ctr_parse(const json_t *body, json_t *spec, cr_json_err *err);
/* The job's mounts and archive are under the tenant's allowed paths: 0 or
 * CR_EPERM naming the field. */
int ctl_ctr_check_tenant(const ctl_config *cfg, const char *tenant, const json_t *spec,
                         cr_json_err *err);
/* The cluster id in <state_dir>/cluster.id (made once, 16 hex digits, 0600). */
int ctl_cluster_id_load(const char *state_dir, char *out, size_t len);

/* A bootstrap token (ctl_secure.c): short-lived, few uses, stored hashed. */
typedef struct ctl_boot {
    int64_t id;              /* token id (shared counter with API tokens) */
    int64_t expires_ns;      /* wall clock; 0 = never (the legacy join token only) */
    int64_t uses_left;       /* registrations left; -1 = unlimited */
    char node[CTL_NAME_MAX]; /* "" any new node, else only this node (may re-key it) */
    char name[CTL_NAME_MAX]; /* human label */
    char hash_hex[2 * CR_TOKEN_HASH_BYTES + 1]; /* the token's hash, as stored */
} ctl_boot;

typedef struct ctl ctl;
typedef struct ctl_service ctl_service;

/* ctl_hooks.c: who is told when a job or a node changes (the parts above
 * the job and node objects register; the files below call). */
#define CTL_HOOKS_MAX 4 /* hooks of each kind */
typedef void (*ctl_job_hook)(ctl *c, ctl_job *j);
typedef void (*ctl_node_hook)(ctl *c, ctl_node *n);
typedef struct ctl_hooks {
    ctl_job_hook job[CTL_HOOKS_MAX]; /* told of a job's new state, placement or port */
    size_t njob;
    ctl_node_hook node[CTL_HOOKS_MAX]; /* told of a node's new desired state */
    size_t nnode;
} ctl_hooks;

enum { CTL_SCHED_ADD = 0, CTL_SCHED_REMOVE, CTL_SCHED_REQUEUE, CTL_SCHED_RESUMABLE };
typedef struct ctl_sched_op {
    int op;     /* CTL_SCHED_* */
    int64_t id; /* job */
} ctl_sched_op;

struct ctl {
    ctl_config cfg;
    cr_store *store;
    cr_http_server *http;
    cr_auth_table *auth;
    cr_jwt *jwt;                /* OIDC verifier, NULL without cfg.oidc_on */
    char *metrics_token;        /* read from cfg.metrics_token_file; NULL: /metrics open */
    struct ctl_ha *ha;          /* leader election (ctl_ha.h); NULL: a single controller */
    ctl_hooks hooks;            /* set at start-up, before any thread; read-only after */
    struct cr_catalog *catalog; /* the GPU catalog, immutable; NULL: not loaded */
    struct ctl_learn *learn;    /* measured throughputs per tenant and class (ctl_learn.c) */

    pthread_mutex_t mu; /* guards everything down to `sched_wake` */
    /* Jobs in memory by id - 1, in chunks of CTL_JOB_CHUNK slots; a chunk
     * whose jobs have all left memory (retention) is freed, so memory
     * follows the jobs kept, not every id ever issued. ctl_job_at(). */
    struct ctl_job_chunk **jobchunks;
    size_t njobs_slots, nchunks; /* slots: the highest id seen */
    int64_t next_id;             /* next id to hand out */
    int64_t first_active;        /* every job below this id is finished (metrics scan from it) */
    ctl_node **nodes;
    size_t nnodes, capnodes;
    uint32_t *node_slots; /* name index into nodes (see ctl_nodes.c) */
    size_t node_slots_cap;
    json_t *node_labels; /* owned: {"node": {"k": "v"}} (ctl_lifecycle.c) */
    json_t *steps;       /* owned, NULL: {"<job id>": [step, ...]}, the batch jobs' steps srun
                            reported (ctl_batch.c; memory only) */
    ctl_tenant **tenants;
    size_t ntenants, captenants;
    ctl_service **services;
    size_t nservices, capservices;
    ctl_usage *usage;
    size_t nusage, capusage;
    int64_t next_token_id;
    ctl_sched_op *sched_ops; /* job changes for the scheduler thread */
    size_t nsched_ops, capsched_ops;
    bool sched_wake;     /* something changed */
    bool sched_restored; /* the scheduler took in the stored nodes and running jobs */
    char cluster_id[24]; /* checkpoint_root/<cluster id>/<tenant>/<job> */
    bool tenants_dirty;  /* weights/quotas changed: tell the scheduler */
    int64_t *gated;      /* ids of gated jobs, ascending (ctl_batch.c) */
    size_t ngated, capgated;
    bool stopping;
    ctl_boot *boots; /* bootstrap tokens */
    size_t nboots, capboots;
    uint8_t secret_key[32];   /* seals job secrets and agent secrets (state dir key file) */
    int64_t audit_prune_mono; /* last audit retention pass */
    pthread_cond_t cv;        /* wakes the scheduler thread (CLOCK_MONOTONIC timed waits) */
    int64_t clock_wall0_ns;   /* ctl_clock_ns anchor: wall time at start */
    int64_t clock_mono0_ns;   /* ... and monotonic time at the same moment */
    pthread_t sched_thread;
    bool sched_started;

    pthread_mutex_t admin_mu;          /* serialises token and tenant changes (ctl_admin.c) */
    _Atomic int64_t logs_inflight;     /* log fetches from agents now (ctl_logs.c) */
    struct ctl_logs *logs;             /* the log fetch workers (ctl_logs.c) */
    size_t nfinished_mem;              /* finished jobs in memory (retention, ctl_state.c) */
    size_t evicted_untrimmed;          /* evicted since the last malloc_trim (ctl_state.c) */
    struct ctl_idem *idem;             /* Idempotency-Key answers (ctl_state.c), under mu */
    struct ctl_list_cache *list_cache; /* rendered list items (ctl_joblist.c), own lock */
    struct ctl_rl *rl;                 /* request rate limits (ctl_ratelimit.c), own locks */
    struct ctl_keys *keys;             /* the gateways' API keys (ctl_keys.c), under mu */
    struct ctl_hist *hist;             /* time series (ctl_hist.c), own lock; NULL: none */
    struct ctl_events *events;         /* GET /v1/events streams (ctl_events.c), own lock */
    struct ctl_pools *pools;           /* node pools (ctl_pools.c), under mu */
    struct ctl_data *data;             /* datasets and models (ctl_data.c), its own lock */

    /* Shutdown: handlers running now, and the flag that refuses new ones. */
    _Atomic int inflight;
    atomic_bool draining;

    /* Metrics (atomics: no lock). */
    _Atomic uint64_t auth_failures, jobs_submitted, jobs_started, jobs_finished[JS_COUNT];
    _Atomic uint64_t idle_warned, idle_reclaimed; /* idle-GPU reclaim (ctl_nodes.c) */
    _Atomic uint64_t sched_cycles;
    _Atomic uint64_t jobs_fetched; /* jobs read back into memory from the store */
    _Atomic uint64_t audit_seq;    /* orders audit entries written in the same nanosecond */
    cr_prom_hist cycle_hist;
    cr_prom_hist_vec *api_hist;
};

/* ctl_logs.c: a finished job's output kept in the store ("joblog" objects,
 * key "<job>/<node>"), so GET /v1/jobs/{id}/logs answers after its node is
 * gone. An agent ships at most CTL_JOBLOG_BYTES of each stream (its end). */
#define CTL_JOBLOG_BYTES 65536
/* The "logs" member of a status report's job entry (may be absent): 0 or
 * CR_EINVAL with err naming it. */
int ctl_joblog_check(const json_t *entry, const char *path, cr_json_err *err);
/* Queue the job's output from node into txn. */
void ctl_joblog_put(cr_store_txn *txn, int64_t job, const char *node, const json_t *logs);

/* ctl_util.c: answers and helpers. */
void ctl_reply_json(cr_http_req *req, unsigned status, json_t *v /* taken */);
void ctl_reply_err(cr_http_req *req, unsigned status, int code, const char *field, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));
void ctl_reply_jerr(cr_http_req *req, const cr_json_err *err);
/* Defer req as a long-poll on *list, answered when its object changes or
 * after wait_s seconds. Called with c->mu held; req is borrowed until answered. */
void ctl_poll_park(ctl_poll **list, cr_http_req *req, int64_t wait_s);
/* The document the long-polls on obj are answered with (returned new), or
 * NULL when obj is gone. */
typedef json_t *ctl_poll_doc_fn(ctl *c, void *obj);
/* The same as text (returned new, free with free(); length in *len). */
typedef char *ctl_poll_text_fn(ctl *c, void *obj, size_t *len);
/* Answer the long-polls on *list, each unlinked and freed: all, or with
 * expired_only those whose deadline has passed by now_mono, in list order.
 * One document, made by make(c, obj) for the first of them, goes to each;
 * when make gives NULL each gets 404 with gone (borrowed) as its message.
 * mu held. */
void ctl_poll_answer(ctl *c, ctl_poll **list, bool expired_only, int64_t now_mono,
                     ctl_poll_doc_fn *make, void *obj, const char *gone);
/* ctl_poll_answer with a document made as text: each poll gets a copy. */
void ctl_poll_answer_text(ctl *c, ctl_poll **list, bool expired_only, int64_t now_mono,
                          ctl_poll_text_fn *make, void *obj, const char *gone);
char *ctl_time_str(int64_t ns, char *buf, size_t len); /* "" for 0 */
/* The scheduler's clock: monotonic, anchored to the wall clock at start, so
 * it reads like wall time (and like the persisted start times) but never
 * steps. */
int64_t ctl_clock_ns(const ctl *c);
/* A persisted wall time (e.g. a running job's start) as the monotonic time
 * it corresponds to now: mono_now - (wall_now - wall_ns), the elapsed part
 * clamped at 0 when the wall clock is now before it (stepped back while the
 * controller was down). */
int64_t ctl_mono_from_wall(int64_t wall_ns);
int ctl_write_secret(const char *path, const char *text);
/* Wake the scheduler thread (ctl_sched.c). mu held. */
void ctl_sched_kick(ctl *c);
/* Control characters (C0, DEL, C1) in a name: true when s has none. */
bool ctl_text_clean(const char *s);
/* A name (tenant, node, service, label): 1 to CTL_NAME_MAX - 1 letters,
 * digits, '-', '_' or '.'. */
bool ctl_name_ok(const char *s);
/* 0 when s is such a name, else CR_EINVAL with err naming field ("field
 * 'F': use letters, digits, '-', '_' or '.'"). */
int ctl_name_check(const char *s, const char *field, cr_json_err *err);
/* HTTP status for a failed commit (507 disk full, else 500), and the answer. */
unsigned ctl_commit_status(int rc);
void ctl_reply_commit_err(cr_http_req *req, int rc);
/* Defer req; answer status + body (taken) once txn (taken) is durable. mu held. */
void ctl_commit_reply(ctl *c, cr_store_txn *txn, cr_http_req *req, unsigned status, json_t *body);

/* ctl_ratelimit.c: request rate limits (token buckets, per token and per
 * client address; docs/operations.md "Request rate limits"). Admin and
 * agent tokens are not limited. Never takes mu. */
#define CTL_RL_CONFIG_MEMBERS                                                                      \
    "rate_limit_rps", "rate_limit_burst", "rate_limit_anon_rps", "rate_limit_anon_burst",          \
        "rate_limit_table"
void ctl_rl_defaults(ctl_config *cfg);
/* The config members above from a config file (into cfg): 0 or err. */
int ctl_rl_config(const json_t *v, ctl_config *cfg, cr_json_err *err);
/* A --rate-limit-* flag (name without "--"): 0, or CR_EINVAL after a
 * message naming the flag on stderr. */
int ctl_rl_flag(ctl_config *cfg, const char *name, const char *arg);
/* The tables, sized by cfg.rate_limit_table: 0 or a code (reported). */
int ctl_rl_start(ctl *c);
void ctl_rl_free(ctl *c); /* NULL-safe */
/* Whether req (of principal p) may go on: false when it was answered 429
 * with Retry-After. */
bool ctl_rl_allow_token(ctl *c, cr_http_req *req, const cr_principal *p);
/* The same for a request without a valid token, by its client address. */
bool ctl_rl_allow_anon(ctl *c, cr_http_req *req);
/* Connection limits by caller (issue 24; cr_http.h): p the request's valid
 * principal or NULL. An agent's or admin's request marks its connection
 * privileged; on a connection admitted over max_conns_per_ip (the reserve)
 * anything else is answered 503; a user or join token holding
 * max_conns_per_token connections already is answered 429. Both close the
 * connection. False when answered. */
bool ctl_conn_admit(ctl *c, cr_http_req *req, const cr_principal *p);
/* The corral_http_rate_limit* families (no tenant labels). */
void ctl_rl_metrics(ctl *c, cr_buf *b);
/* A commit queued under mu (so the store sees it before any later change)
 * and waited for without mu (the store's callbacks take it): the scheduler
 * thread's starts, node losses and time limits. */
typedef struct ctl_wait {
    pthread_mutex_t m;
    pthread_cond_t cv;
    bool done, queued;
    int status;
} ctl_wait;
/* Queue txn (taken; NULL or empty: nothing, status 0). mu held. */
void ctl_wait_submit(ctl *c, ctl_wait *w, cr_store_txn *txn);
/* Wait for it; its status (0: durable). mu not held. */
int ctl_wait_end(ctl_wait *w);
/* A copy of j (its spec shared, its strings and placement its own). */
ctl_job *ctl_job_copy(const ctl_job *j);

/* ctl_hooks.c: register a hook at start-up, before any thread runs; 0, or
 * CR_ERANGE past CTL_HOOKS_MAX. Hooks run in the order registered, mu held. */
int ctl_on_job_change(ctl *c, ctl_job_hook fn);
int ctl_on_node_change(ctl *c, ctl_node_hook fn);
/* j's state, placement or port changed (in memory, its row queued or
 * stored): tell the job hooks. mu held. */
void ctl_job_changed(ctl *c, ctl_job *j);
/* n's desired state changed: its version moves, the node hooks are told.
 * mu held. */
void ctl_node_bump(ctl *c, ctl_node *n);

/* ctl_jobobj.c: the job object (calls nothing above it). */
ctl_job *ctl_job_get(ctl *c, int64_t id); /* mu held */
/* The job in slot i (id i + 1), i < njobs_slots, or NULL. mu held. */
#define CTL_JOB_CHUNK 512 /* 4 KiB of slots: a lone long job keeps little */
typedef struct ctl_job_chunk {
    ctl_job *slot[CTL_JOB_CHUNK];
    size_t used; /* non-NULL slots */
} ctl_job_chunk;
static inline ctl_job *ctl_job_at(const ctl *c, size_t i)
{
    const ctl_job_chunk *k = c->jobchunks[i / CTL_JOB_CHUNK];
    return k ? k->slot[i % CTL_JOB_CHUNK] : NULL;
}
/* The next job in memory at slot *i or after, *i moved past it (its slot
 * is *i - 1), or NULL at the end; skips freed chunks whole, so a walk costs
 * the chunks kept, not every id ever issued. mu held. */
static inline ctl_job *ctl_job_next(const ctl *c, size_t *i)
{
    while (*i < c->njobs_slots) {
        const ctl_job_chunk *k = c->jobchunks[*i / CTL_JOB_CHUNK];
        if (!k || k->used == 0) {
            *i = (*i / CTL_JOB_CHUNK + 1) * CTL_JOB_CHUNK;
            continue;
        }
        ctl_job *j = k->slot[*i % CTL_JOB_CHUNK];
        (*i)++;
        if (j) {
            return j;
        }
    }
    return NULL;
}
/* The slot a walk over the jobs not finished starts at. mu held. */
static inline size_t ctl_first_active_slot(const ctl *c)
{
    return c->first_active > 0 ? (size_t)c->first_active - 1 : 0;
}
/* Slot i's job leaves memory (freed); an emptied chunk is freed. mu held. */
void ctl_job_drop(ctl *c, size_t i);
/* Every job and chunk freed (shutdown). */
void ctl_jobs_free_all(ctl *c);
/* ctl_redact.c: May p see job id (its id, tenant, name)? Admins see every
 * job, users their own tenant's; another tenant's job shows only as
 * "busy". mu held. */
bool ctl_job_visible_to(ctl *c, int64_t id, const cr_principal *p);
/* in with other tenants' job ids and tenant names replaced, for p
 * (admins get it whole). mu held. */
void ctl_redact_text(ctl *c, const cr_principal *p, const char *in, char *out, size_t outlen);
/* The same on v's string member key, in place (users only). mu held. */
void ctl_redact_member(ctl *c, const cr_principal *p, json_t *v, const char *key);
void ctl_job_insert(ctl *c, ctl_job *j); /* mu held; takes j */
json_t *ctl_job_json(const ctl_job *j);
/* In an API view v of a job (or of its stored row): no "env_enc", and a
 * plain "env" (a row stored before sealing) shown as its "env_names". */
void ctl_job_view_env(json_t *v);
/* ctl_redact.c: env's credential-looking variables (cr_secretshape.h, by
 * name or value) with "(redacted)" as their value, in place. */
void ctl_redact_env(json_t *env);
/* The state the API shows: pending while its start is being stored (the
 * job and list views, /metrics, the node view's "starting_jobs", the
 * services' replica counts), with this reason. */
ctl_job_state ctl_job_shown_state(const ctl_job *j);
#define CTL_STARTING_REASON "starting: its placement is being stored"
void ctl_job_free(ctl_job *j);
/* Record a state change: memory already updated; queues the row and an
 * event into txn. mu held. */
void ctl_job_persist(ctl *c, cr_store_txn *txn, ctl_job *j, const char *what, const char *why);
void ctl_job_set_reason(ctl_job *j, const char *reason);
bool ctl_job_terminal(const ctl_job *j);
/* The stored row of j (malloc'd); _with: spec_json is the compact JSON of
 * j->spec, shared by the tasks of an array. */
char *ctl_job_doc(const ctl_job *j);
char *ctl_job_doc_with(const ctl_job *j, const char *spec_json);
/* Queue j's row doc (taken) and an event (what NULL: none) into txn. */
void ctl_job_persist_doc(cr_store_txn *txn, ctl_job *j, char *doc, const char *what,
                         const char *why);
/* The first task's id a stored array task's row takes its spec from; 0 = none. */
int64_t ctl_doc_spec_ref(const char *doc);

/* ctl_nodeobj.c: nodes by name and the jobs placed on each (calls
 * nothing above it). mu held. */
ctl_node *ctl_node_find(ctl *c, const char *name);
void ctl_node_index_put(ctl *c, size_t idx); /* c->nodes[idx] into the index */
void ctl_node_add_job(ctl_node *n, int64_t id);
void ctl_node_del_job(ctl_node *n, int64_t id);
/* Labels an admin gave a node ({"k": "v"}, borrowed; NULL: none). mu held. */
json_t *ctl_node_labels(ctl *c, const char *name);

/* ctl_batchspec.c: the syntax of the batch members (text only). */
/* Parse an array spec ("0-99", "1,3,5", "0-99:2", "0-15%4") into at most
 * max indexes (idx) and the throttle (0: none). CR_EINVAL with why. */
int ctl_batch_array_parse(const char *text, int32_t *idx, size_t max, size_t *n, int *throttle,
                          char *why, size_t whylen);
/* Check a dependency's syntax ("afterok:12:13,afterany:14_2", "singleton"). */
int ctl_batch_dep_check(const char *text, char *why, size_t whylen);
/* Syntax of a node list (field "nodelist"/"exclude") or a constraint. */
int ctl_batch_nodes_check(const char *field, const char *text, char *why, size_t whylen);
/* Signals: "USR1", "USR1@120" (default 60 s) -> name and seconds; CR_EINVAL. */
int ctl_batch_signal_parse(const char *text, char *name, size_t namelen, int64_t *secs);

/* The exit code of a job that checkpointed on its checkpoint signal
 * (EX_TEMPFAIL): not a failure when the controller suspended it. */
#define CTL_EXIT_SUSPENDED 75

/* ctl_jobspec.c: a job from a request or a stored row (changes nothing). */
/* A submit body's object validated into a fresh job (*out, free with
 * ctl_job_free); *array: its task count, *indexes (may be NULL): the array
 * indexes (free()). 0 or CR_E* with err naming the member. */
int ctl_job_parse(const json_t *body, ctl_job **out, int64_t *array, int32_t **indexes,
                  cr_json_err *err);
/* A job from a request object (validated as POST /v1/jobs does). */
int ctl_job_from_request(const json_t *body, ctl_job **out, cr_json_err *err);
/* Validate a submit body as the API would (for fuzzing); 0 or CR_E* with err. */
int ctl_job_validate(const char *body, size_t len, cr_json_err *err);
int ctl_job_from_doc(const char *doc, ctl_job **out);
/* A job from a stored row; array tasks' rows name their spec by the first
 * task's id (spec_ref), resolved from memory or (ask_store: not while a
 * store read is running) the store. mu held. */
int ctl_job_load_doc(ctl *c, int64_t id, const char *doc, bool ask_store, ctl_job **out);

/* ctl_jobs.c: the /v1/jobs routes (submit, show, actions). */
void ctl_route_jobs(ctl *c, cr_http_req *req, const cr_principal *p, char **seg, size_t nseg);
/* ctl_joblist.c: GET /v1/jobs (a page from the store, a render cache). */
int ctl_joblist_init(ctl *c);
void ctl_joblist_fini(ctl *c);
void ctl_jobs_list(ctl *c, cr_http_req *req, const cr_principal *p);
/* ctl_logs.c: GET /v1/jobs/{id}/logs, fetched from the agent off the API
 * threads by log_fetch_max workers. */
void ctl_job_logs(ctl *c, cr_http_req *req, const cr_principal *p, int64_t id);
int ctl_logs_start(ctl *c);
void ctl_logs_stop(ctl *c); /* answers what still waits */
/* Queue a job change for the scheduler thread and wake it. mu held. */
void ctl_sched_add(ctl *c, int64_t id);
void ctl_sched_remove(ctl *c, int64_t id);
void ctl_sched_requeue(ctl *c, int64_t id);
/* The suspended run of job id has exited: it may be resumed. mu held. */
void ctl_sched_resumable(ctl *c, int64_t id);

/* ctl_state.c: every user change goes through here: stored first, then
 * applied to memory, then the scheduler/nodes/services are told. */
/* A change of one job: fn runs on a copy (apply false: no side effects)
 * to make the stored row, then on the job once durable (apply true: tell
 * the scheduler, nodes, services). Returns NULL or why not (409); *what is
 * the event name. */
typedef const char *(*ctl_job_change_fn)(ctl *c, ctl_job *j, const void *arg, bool apply,
                                         const char **what);
/* Defer req, store the change, apply it, answer 200 with the job (or
 * 409/507/500). arg (arg_len bytes) is copied. mu held. */
void ctl_state_job_change(ctl *c, cr_http_req *req, ctl_job *j, ctl_job_change_fn fn,
                          const void *arg, size_t arg_len, const char *why);
/* The same change of several jobs (ids[0] first: the answer shows it, with
 * array_last when > 0), in one commit; tasks it does not apply to are left
 * out, 409 when none is left. mu held. */
void ctl_state_jobs_change(ctl *c, cr_http_req *req, const int64_t *ids, size_t n,
                           int64_t array_last, ctl_job_change_fn fn, const void *arg,
                           size_t arg_len, const char *why);
/* Any other change (nodes, services): txn (taken) holds its
 * rows, computed without touching memory; fn runs under mu once the commit
 * is over: status 0, apply the change and return the answer (*code
 * defaults to 200; NULL: 409, it went away meanwhile); status != 0, undo
 * anything provisional and return NULL (the answer is 507/500). arg is
 * owned (free()d after fn). mu held. */
typedef json_t *(*ctl_commit_fn)(ctl *c, void *arg, int status, unsigned *code);
void ctl_state_commit_apply(ctl *c, cr_store_txn *txn, cr_http_req *req, ctl_commit_fn fn,
                            void *arg);
/* A running job ended (exit reported, node lost...): applies the retry
 * policy, releases its GPUs, queues its row into txn and tells the
 * scheduler, the nodes and the job hooks. A job whose end is stored
 * (finished) or being stored (ctl_job_end_held) is left alone. mu held. */
void ctl_job_ended(ctl *c, cr_store_txn *txn, ctl_job *j, int exit_code, int sig, const char *why,
                   bool lost);
/* Whether j's end is stored (it finished) or being stored (an agent's
 * report, j->ending): then the cluster must not end it another way (a
 * loss, a deletion, a preemption, a GPU gone), its reported end stands;
 * one that comes while it is being stored is remembered (end_deferred) and
 * applied only if that commit is refused. mu held. */
bool ctl_job_end_held(ctl_job *j);
/* The same end, commit first (an agent's report): computed on a copy of
 * j whose row goes into txn; memory is unchanged. no_retry: the agent says
 * retrying cannot help. Returns the copy, for ctl_job_end_apply once the
 * row is durable (or ctl_job_free). mu held. */
ctl_job *ctl_job_end_prepare(ctl *c, cr_store_txn *txn, const ctl_job *j, int exit_code, int sig,
                             const char *why, bool no_retry);
/* The same for a job whose node is lost or deleted (requeued without using
 * a retry), on a copy: its row into txn, memory unchanged. mu held. */
ctl_job *ctl_job_lost_prepare(ctl *c, cr_store_txn *txn, const ctl_job *j, const char *why);
/* The stored end k (taken) applied to j: GPUs released, the scheduler, the
 * nodes and the job hooks told. mu held. */
void ctl_job_end_apply(ctl *c, ctl_job *j, ctl_job *k);
/* Charge j's GPU time since the last charge to its tenant (into txn). mu held. */
void ctl_job_account(ctl *c, cr_store_txn *txn, ctl_job *j, int64_t now_ns);
/* The job from memory, else from the store (it goes back into memory). mu held. */
ctl_job *ctl_job_fetch(ctl *c, int64_t id);
/* Retention and expiry timers (scheduler thread); takes mu. */
void ctl_state_tick(ctl *c, int64_t now_mono);
void ctl_state_retain_now(ctl *c); /* mu held (start-up) */

/* ctl_idem.c: Idempotency-Key answers of submit. mu held. */
typedef enum { CTL_IDEM_NEW, CTL_IDEM_REPLAY, CTL_IDEM_BUSY, CTL_IDEM_MISMATCH } ctl_idem_res;
uint64_t ctl_idem_hash(const char *data, size_t len);
int ctl_idem_key_check(const char *key); /* 0 or CR_EINVAL */
/* Look the key up; NEW records it as in flight; REPLAY gives the first answer (taken). */
ctl_idem_res ctl_idem_begin(ctl *c, int64_t token_id, const char *key, uint64_t hash,
                            char **answer);
void ctl_idem_persist(ctl *c, cr_store_txn *txn, int64_t token_id, const char *key,
                      const char *answer);
/* The first request was stored (answer) or not (NULL: the key is free again). */
void ctl_idem_done(ctl *c, int64_t token_id, const char *key, const char *answer);
void ctl_idem_expire(ctl *c, cr_store_txn *txn, int64_t now_wall);
int ctl_load_idem(ctl *c);
void ctl_idem_free(ctl *c);

/* ctl_admin.c: tokens, tenants, usage. */
void ctl_route_tokens(ctl *c, cr_http_req *req, const cr_principal *p, char **seg, size_t nseg);
void ctl_route_tenants(ctl *c, cr_http_req *req, const cr_principal *p, char **seg, size_t nseg);
void ctl_route_usage(ctl *c, cr_http_req *req, const cr_principal *p);
ctl_tenant *ctl_tenant_find(ctl *c, const char *name); /* mu held */
bool ctl_tenant_known(ctl *c, const char *name);       /* takes mu */
/* The idle policy for a job of tenant: the nearest ancestor-or-self that
 * sets one. false when none does. mu held. */
bool ctl_tenant_idle_policy(ctl *c, const char *tenant, int64_t *after_s, int64_t *grace_s,
                            bool *requeue);
ctl_tenant *ctl_tenant_ensure(ctl *c, cr_store_txn *txn, const char *name); /* mu held */
int ctl_load_admin(ctl *c);
int ctl_bootstrap(ctl *c);
/* Mint node's credential (agent token, out) and the controller's bearer for
 * its agent (secret_out); both CR_TOKEN_TEXT_MAX bytes. mu held. */
void ctl_node_token(ctl *c, cr_store_txn *txn, const char *node, char *out, char *secret_out);
void ctl_usage_add(ctl *c, cr_store_txn *txn, const char *tenant, const char *gpu_type,
                   int64_t at_ns, double gpu_s, double energy_j);
/* Elastic pool node time bought for tenant: a "<type>#cloud" usage row of
 * gpu_s and cost (into txn and memory). mu held. */
void ctl_usage_add_cloud(ctl *c, cr_store_txn *txn, const char *tenant, const char *gpu_type,
                         int64_t at_ns, double gpu_s, double cost);
/* The burst budget that binds tenant's jobs: false when none in its chain
 * sets one (unbounded). Else *budget, *owner (the tenant that sets it,
 * CTL_NAME_MAX bytes) and *spent (this calendar month's cloud cost of
 * owner's subtree, UTC). mu held. */
bool ctl_tenant_burst(ctl *c, const char *tenant, double *budget, double *spent, char *owner);
/* The tenant's hybrid constraint applied to a job's spec at submit: its
 * terms for labels the job does not name are added to "constraint"; a
 * locked one refuses (CR_EPERM, err naming "constraint") a job that names
 * another value. *changed when the spec changed. mu held. */
int ctl_tenant_constraint_apply(ctl *c, const char *tenant, json_t *spec, bool *changed,
                                cr_json_err *err);

/* ctl_nodes.c: agent and node routes, lost-node timer, long-polls. */
void ctl_route_agents(ctl *c, cr_http_req *req, const cr_principal *p, char **seg, size_t nseg);
void ctl_route_nodes(ctl *c, cr_http_req *req, const cr_principal *p, char **seg, size_t nseg);
/* Takes n out of the node table and frees it (its long-polls answered);
 * the caller has requeued its jobs and told the scheduler. mu held. */
void ctl_node_remove(ctl *c, ctl_node *n);

/* ctl_report.c: the job ends of an agent's status report, commit first. */
typedef struct ctl_report ctl_report;
/* Add j's end (computed on a copy, its row into txn; j is `committing`
 * until the commit is over) to *r (created). mu held. */
void ctl_report_end(ctl_report **r, ctl *c, cr_store_txn *txn, ctl_job *j, int code, int sig,
                    const char *why, bool no_retry);
/* The same for a run the agent stopped because its node lease ran out:
 * requeued without using a retry, as a node loss would. mu held. */
void ctl_report_lease_end(ctl_report **r, ctl *c, cr_store_txn *txn, ctl_job *j, const char *why);
/* Defer req and commit txn (taken); then apply the ends (r taken) and
 * answer node's agent: 200 with the node's version and the fence list of
 * jobs (the report's), or 507/500 with memory unchanged. mu held. */
void ctl_report_submit(ctl_report *r, ctl *c, cr_store_txn *txn, cr_http_req *req, const char *node,
                       json_t *jobs);
/* The ids of the running jobs an agent lists (items {"job","run",...} of
 * arr, "state" absent or "running") that are not n's own any more: a new
 * JSON array for its answer's "fence", and in *whys (returned new) an
 * object id -> the true reason (the job ended, requeued, placed elsewhere)
 * for its "fence_reasons". mu held. */
json_t *ctl_fence_list(ctl *c, const ctl_node *n, const json_t *arr, json_t **whys);
/* Why job id is not (or no longer) a node's: it has ended (its state and
 * end reason: "exited with code 3 on node n2" for a gang rank's failure),
 * was requeued, or runs elsewhere. The agent logs it as it stops the job
 * (fence_reasons, stop_reasons), not "placed elsewhere" for each. mu held. */
void ctl_job_gone_why(ctl *c, int64_t id, char *why, size_t len);

/* ctl_jw.c: compact JSON into a cr_buf, the bytes json_dumps(JSON_COMPACT)
 * writes for the same values. A key gets a comma before it unless the
 * buffer ends in '{' or '['. Strings jansson would refuse (not UTF-8)
 * are not written: the call returns -1 (nothing written). */
bool ctl_jw_str_ok(const char *s);
int ctl_jw_str(cr_buf *b, const char *s);
void ctl_jw_key(cr_buf *b, const char *key);
int ctl_jw_kstr(cr_buf *b, const char *key, const char *s);
void ctl_jw_int(cr_buf *b, int64_t v);
void ctl_jw_kint(cr_buf *b, const char *key, int64_t v);
void ctl_jw_ktrue(cr_buf *b, const char *key);
void ctl_jw_kreal(cr_buf *b, const char *key, double v);
/* v (borrowed, any type, no cycles) as jansson dumps it; kjson writes
 * nothing for NULL. */
void ctl_jw_json(cr_buf *b, const json_t *v);
void ctl_jw_kjson(cr_buf *b, const char *key, const json_t *v);
/* json_dumps(v, JSON_COMPACT), the same text (returned new, free with
 * free()) or NULL where it gives NULL (v NULL, or not an object or array). */
char *ctl_jw_dumps(const json_t *v);

/* ctl_desired.c: a node's desired state and the long-polls waiting on it
 * (mu held for all). The document as compact JSON text (returned new, free
 * with free(); its length in *len), or NULL when it cannot be written. */
char *ctl_desired_text(ctl *c, const ctl_node *n, size_t *len);
/* The UUID the agent runs entry q of placement pl (of job j on node n) on:
 * the GPU's, or the MIG instance's; "" unknown. Borrowed; mu held. */
const char *ctl_place_uuid(ctl *c, const ctl_node *n, const ctl_job *j, const ctl_place *pl,
                           size_t q);
/* Answer n's long-polls with the document: all, or (expired_only) those
 * whose wait ran out by now_mono. */
void ctl_desired_answer(ctl *c, ctl_node *n, bool expired_only, int64_t now_mono);
/* Node hook (ctl_hooks.c): n's desired state changed, answer its polls. */
void ctl_desired_changed(ctl *c, ctl_node *n);

/* ctl_lifecycle.c: DELETE /v1/nodes/{name} and POST /v1/nodes/{name}/labels.
 * Returns true when it answered req. */
bool ctl_route_node_lifecycle(ctl *c, cr_http_req *req, const cr_principal *p, char **seg,
                              size_t nseg);
int ctl_load_node_labels(ctl *c); /* at start-up */
void ctl_node_labels_free(ctl *c);
void ctl_nodes_tick(ctl *c, int64_t now_mono);

/* A node its provider takes back in in_s seconds (a spot reclaim notice:
 * POST /v1/nodes/{name}/reclaim, or its agent's --spot-notice-file): the
 * node is drained, and each job running there is requeued as `corral
 * requeue` does (stopped with its checkpoint signal or SIGTERM, a grace of
 * at most in_s, pending again without using a retry), stored before it is
 * applied. mu NOT held. Returns 0, CR_ENOENT, CR_ECONFLICT (being
 * deleted), or the store's error; *njobs: the jobs requeued. */
int ctl_node_reclaim(ctl *c, const char *node, int64_t in_s, const char *by, size_t *njobs);
/* The reclaims agents asked for (their status "reclaim_in_s"); mu NOT held. */
void ctl_nodes_reclaims(ctl *c); /* timers; takes mu */
void ctl_nodes_release_polls(ctl *c);
void ctl_nodes_free(ctl *c);
/* Validate a register body as the API would (for fuzzing). */
int ctl_node_validate(const char *body, size_t len, cr_json_err *err); /* at shutdown; takes mu */
int ctl_load_nodes(ctl *c);

/* ctl_batch.c: launch modes and the batch members of a desired entry. */
bool ctl_batch_is_launcher(const json_t *command);
/* Tasks j runs on a node where it holds node_gpus GPUs; *launcher: the
 * command starts its own workers (one task per node). */
int ctl_batch_tasks_per_node(const ctl_job *j, size_t node_gpus, bool *launcher);
/* Add script, output, error, name, array index and nodelist to entry. mu held. */
/* Batch semantics (docs/slurm.md): a job with a shipped script and
 * "batch": true (corral submit job.sh; no image, not a service) runs its
 * script once, on its first node, and srun inside it starts job steps
 * through the agents of its nodes. */
bool ctl_batch_is_batch(const ctl_job *j);
/* The run's step credential (hex): srun's bearer token at the agents of
 * the job's nodes, given to them in the desired state. */
#define CTL_STEP_TOKEN_LEN 48
void ctl_batch_step_token(const ctl *c, const ctl_job *j, char out[CTL_STEP_TOKEN_LEN + 1]);
/* POST /v1/jobs/{id}/steps (seg[2] the id), authenticated by the step
 * credential rather than a token: srun's record of a step (docs/slurm.md),
 * kept in memory and shown by GET /v1/jobs/{id} as "steps". Takes mu. */
void ctl_batch_step_report(ctl *c, cr_http_req *req, const char *idtext, const char *token);
/* A new copy of job id's steps, or NULL. mu held. */
json_t *ctl_batch_steps(ctl *c, int64_t id);
void ctl_batch_entry(const ctl_job *j, cr_buf *b);
/* Check that every job a dependency names exists and is the tenant's
 * (admins: anyone's). CR_ENOENT with why. mu held. */
int ctl_batch_dep_refs(ctl *c, const char *text, const char *tenant, bool admin, char *why,
                       size_t whylen);
/* The task of array first with that index, or NULL. mu held. */
ctl_job *ctl_batch_array_task(ctl *c, int64_t first, int32_t index);
/* 0: j may be scheduled; 1: it waits (why); -1: it never will (why).
 * busy: the array's active tasks when known, else -1. mu held. */
int ctl_batch_gate(ctl *c, const ctl_job *j, int64_t now_wall, int busy, char *why, size_t whylen);
bool ctl_batch_has_gate(const ctl_job *j);
/* Node selection (--nodelist, --exclude, --constraint on node labels,
 * --partition). */
bool ctl_batch_has_node_filter(const ctl_job *j);
bool ctl_batch_node_allowed(ctl *c, const ctl_job *j, const ctl_node *n);
/* A job without GPUs asks for more than that: CR_EINVAL in err. */
int ctl_cpu_job_fail(cr_json_err *err);
/* ctl_part.c: partitions (docs/partitions.md). Validate a "partitions"
 * config section. */
int ctl_partitions_check(const json_t *v, cr_json_err *err);
/* The partition of that name in cfg (borrowed), or NULL. */
const json_t *ctl_part_find(const ctl_config *cfg, const char *name);
/* Node n is in partition part. mu held. */
bool ctl_part_holds(const ctl *c, const json_t *part, const ctl_node *n);
/* At submit, on the parsed job j of request body: resolve its partition
 * (given, or the default one; with no partitions configured, a partition
 * that names a GPU type becomes the type, and note says so), apply the
 * partition's default GPU type and max_time, and check the GPU type is
 * known. *changed is set when it changed j->spec (left alone otherwise).
 * 0, or 400's error in err. mu held. */
int ctl_part_submit(ctl *c, const json_t *body, ctl_job *j, char *note, size_t notelen,
                    bool *changed, cr_json_err *err);
/* Ask the agents of running job j to signal its tasks (sets sig_name and
 * sig_at, bumps its nodes). mu held. */
void ctl_batch_signal(ctl *c, ctl_job *j, const char *name);
/* --signal SIG@SECONDS: signal j once per run, SECONDS before its time
 * limit. *txn created when an event is recorded. mu held. */
void ctl_batch_signal_due(ctl *c, ctl_job *j, int64_t now, cr_store_txn **txn);
/* A pending job enters the scheduler, or the gate. mu held. */
void ctl_batch_admit(ctl *c, ctl_job *j);
/* Re-judge the gated jobs (scheduler thread timer); takes mu. */
void ctl_batch_tick(ctl *c);

/* ctl_sched.c */
int ctl_sched_start(ctl *c);
void ctl_sched_stop(ctl *c);

/* ctl_services.c: inference services, their replicas (jobs), endpoints,
 * gateway load reports and the autoscaler. */
void ctl_route_services(ctl *c, cr_http_req *req, const cr_principal *p, char **seg, size_t nseg);
int ctl_load_services(ctl *c);
/* Timers and reconciliation (scheduler thread); takes mu. */
void ctl_services_tick(ctl *c, int64_t now_mono);
/* Job hook (ctl_hooks.c): a replica job changed state (started, ended,
 * got its port). mu held. */
void ctl_services_job_changed(ctl *c, ctl_job *j);
void ctl_services_release_polls(ctl *c); /* takes mu */
void ctl_services_free(ctl *c);
/* A service's numbers for the history (ctl_hist.c): replicas wanted and
 * serving, and the gateways' last load report (has_load false when none
 * came in the last minute). */
typedef struct ctl_svc_hist {
    char name[CTL_NAME_MAX];
    char tenant[CTL_NAME_MAX];
    double desired, ready, in_flight, rps;
    bool has_load;
} ctl_svc_hist;
/* The services not being created or deleted, copied into *out (owned, free()
 * it); returns how many. c->mu held. */
size_t ctl_services_hist(ctl *c, ctl_svc_hist **out);
/* Validate a service body as the API would (for fuzzing). */
int ctl_service_validate(const char *body, size_t len, cr_json_err *err);

/* ctl_keys.c: the gateways' API keys, their published hash list
 * (long-polled) and their token usage. */
void ctl_route_keys(ctl *c, cr_http_req *req, const cr_principal *p, char **seg, size_t nseg);
int ctl_load_keys(ctl *c);
void ctl_keys_tick(ctl *c, int64_t now_mono); /* mu held: expired long-polls */
void ctl_keys_release_polls(ctl *c);          /* takes mu */
void ctl_keys_free(ctl *c);

/* ctl_secure.c: the state dir's key and modes, sealed secrets, bootstrap
 * tokens and node admission, the audit log. */
/* Fix the state dir's modes (0700 dirs, 0600 files) and load or create the
 * key file; before the store opens. 0 or CR_EIO. */
int ctl_secure_start(ctl *c);
/* Seal text with the key: returned new (base64), free with free(). */
char *ctl_seal(const ctl *c, const char *text);
/* Open a sealed text: 0 and *out (free with ctl_secret_free) or CR_EINVAL. */
int ctl_unseal(const ctl *c, const char *sealed, char **out);
void ctl_secret_free(char *s);
/* ctl_util.c: the sorted names of an env object, returned new. */
json_t *ctl_env_names(const json_t *env);
/* A job's environment is sealed at rest like its secrets (issue 24): spec's
 * "env" object becomes "env_enc" (sealed compact JSON) and "env_names" (its
 * names, sorted), and "env" goes; an empty env leaves neither. spec is
 * borrowed and changed in place. */
void ctl_job_env_seal(const ctl *c, json_t *spec);
/* The job's environment opened: returned new (an object; a spec stored
 * before sealing: its plain "env"; none: {}), or NULL (logged) when the
 * sealed text does not open with this controller's key. */
json_t *ctl_job_env_open(const ctl *c, int64_t job_id, const json_t *spec);
/* Validate a submit's "secrets" object ({"NAME": "VALUE"}); CR_EINVAL with err. */
int ctl_secrets_check(const json_t *secrets, cr_json_err *err);
void ctl_route_bootstrap(ctl *c, cr_http_req *req, const cr_principal *p, char **seg, size_t nseg);
/* A bootstrap token for one registration of node (ctl_pools.c): text into
 * text_out (CR_TOKEN_TEXT_MAX bytes), its row into txn. 0 or CR_EQUOTA. mu
 * held. */
int ctl_boot_mint(ctl *c, cr_store_txn *txn, const char *node, int64_t ttl_s, char *text_out);
/* Revoke the tokens ctl_boot_mint made for node (never used). mu held. */
void ctl_boot_forget(ctl *c, cr_store_txn *txn, const char *node);
int ctl_load_bootstrap(ctl *c);
/* May principal p (role join or agent) register node `node` (exists: it is
 * registered already)? 0, or an HTTP status with the reason in why. Uses up
 * one use of a bootstrap token (queued in txn). mu held. */
unsigned ctl_join_admit(ctl *c, cr_store_txn *txn, const cr_principal *p, const char *node,
                        bool exists, char *why, size_t whylen);
/* Load the agent secrets of the loaded nodes (after ctl_load_nodes). */
int ctl_load_node_secrets(ctl *c);
/* Record an admin or mutating request in the audit log (queued, not awaited). */
void ctl_audit(ctl *c, cr_http_req *req, const cr_principal *p, const char *action);
/* The same row, held for the request this thread is routing: the handler
 * that stores the request's change puts it into that transaction
 * (ctl_audit_take: one commit for both, issue 25: a job submit was two
 * transactions), and ctl_audit_flush, after the handler, queues it alone
 * when none did (a refused request). */
void ctl_audit_defer(ctl *c, cr_http_req *req, const cr_principal *p, const char *action);
void ctl_audit_take(cr_store_txn *txn);
void ctl_audit_flush(ctl *c);
void ctl_route_audit(ctl *c, cr_http_req *req, const cr_principal *p);
void ctl_audit_tick(ctl *c, int64_t now_mono); /* retention; takes no lock */

/* ctl_metrics.c */
void ctl_route_metrics(ctl *c, cr_http_req *req);
void ctl_observe(void *ctx, const char *method, const char *route, unsigned status, int64_t dur_ns);

/* ctl_obs.c: queue wait, pending by reason, tenant usage, node info. */
void ctl_obs_started(const ctl_job *j, int64_t now_ns); /* a job started (wall clock) */
const char *ctl_reason_class(const char *reason);       /* "quota", "resources", ... */
void ctl_metrics_more(ctl *c, cr_buf *b, bool full);    /* takes mu; full: tenant labels */

/* ctl_ui.c: the dashboard's files, Prometheus discovery, advise. */
/* Security headers: api = JSON answers (no-store), else the dashboard (CSP). */
void ctl_ui_headers(cr_http_req *req, bool api);
void ctl_route_ui(ctl *c, cr_http_req *req, char **seg, size_t nseg);
void ctl_route_targets(ctl *c, cr_http_req *req, const cr_principal *p);
void ctl_route_advise(ctl *c, cr_http_req *req, const cr_principal *p);
void ctl_route_cluster(ctl *c, cr_http_req *req, const cr_principal *p);
/* A gateway reported load with its /metrics port (member metrics_port of
 * POST /v1/services/{name}/metrics): list it for discovery. Own lock. */
void ctl_ui_gateway_seen(const char *addr, int port);
/* ctl_hist.c: the history (time series in memory; see the file's head). */
#define CTL_HIST_FINE_PTS          8640    /* a day at the default 10 s step */
#define CTL_HIST_COARSE_MUL        30      /* coarse slot = 30 steps (5 min at 10 s) */
#define CTL_HIST_COARSE_PTS        25920   /* 90 days at 5 min */
#define CTL_HIST_SERIES_MAX        2048    /* series kept at most, gpu.* apart */
#define CTL_HIST_GPU_SERIES_MAX    2048    /* gpu.* series kept at most */
#define CTL_HIST_GPU_COARSE_PTS    2016    /* gpu.*: 7 days at 5 min */
#define CTL_HIST_POINTS_MAX        20000   /* points per series in one answer */
#define CTL_HIST_ANSWER_POINTS_MAX 1000000 /* points in one answer, all series */
/* The coarse ring's sum and count per block of this many slots (a mean
 * over 90 days reads 102 blocks, not 25,920 values): 12 bytes a block. */
#define CTL_HIST_BLOCK     256
#define CTL_HIST_BLOCKS(n) (((n) + CTL_HIST_BLOCK - 1) / CTL_HIST_BLOCK)
/* Memory per series: its two rings of floats, the coarse ring's block sums
 * and its header. */
#define CTL_HIST_SERIES_BYTES                                                                      \
    ((CTL_HIST_FINE_PTS + CTL_HIST_COARSE_PTS) * 4 + CTL_HIST_BLOCKS(CTL_HIST_COARSE_PTS) * 12 +   \
     256)
#define CTL_HIST_GPU_SERIES_BYTES                                                                  \
    ((CTL_HIST_FINE_PTS + CTL_HIST_GPU_COARSE_PTS) * 4 +                                           \
     CTL_HIST_BLOCKS(CTL_HIST_GPU_COARSE_PTS) * 12 + 256)
typedef struct ctl_hist ctl_hist;

/* ctl_events.c: GET /v1/events, the changes as server-sent events. */
#define CTL_EVENTS_MAX    256         /* streams open at once */
#define CTL_EVENTS_UNSENT (64 * 1024) /* bytes unsent per stream before it is dropped */
#define CTL_EVENTS_PING_S 15          /* a comment line this often */
#define CTL_EVENTS_LIFE_S 600         /* a stream ends after this; the page reconnects */
typedef struct ctl_events ctl_events;
ctl_events *ctl_events_new(void);
void ctl_events_stop(ctl_events *e); /* every stream closed */
void ctl_events_free(ctl_events *e);
void ctl_route_events(ctl *c, cr_http_req *req, const cr_principal *p);
/* The changes (c->mu held): a job's, a submit's ids, a node's. */
void ctl_events_job(ctl *c, ctl_job *j);
void ctl_events_jobs(ctl *c, const char *tenant, int64_t first, size_t count);
void ctl_events_node(ctl *c, ctl_node *n);
void ctl_events_tick(ctl *c, int64_t now_mono);   /* pings, lifetimes; takes mu */
void ctl_events_revoke(ctl *c, int64_t token_id); /* its streams end */
size_t ctl_events_count(ctl *c);
ctl_hist *ctl_hist_new(int64_t step_s); /* free with ctl_hist_free */
void ctl_hist_free(ctl_hist *h);
/* One value of series name at wall_ns; CR_ENOSPC past its pool's bound. Own lock. */
int ctl_hist_put(ctl_hist *h, const char *name, int64_t wall_ns, double value);
size_t ctl_hist_count(ctl_hist *h, uint64_t *dropped); /* series kept, and values refused */
/* corral_history_series{kind}, _bytes, _values_refused_total onto b (h may be NULL). */
void ctl_hist_metrics(ctl_hist *h, cr_buf *b);
/* Sample the cluster once per step (the scheduler thread; takes mu). */
void ctl_hist_tick(ctl *c, int64_t now_mono);
/* A range query (GET /v1/history's parameters; step and top 0: default). */
typedef struct ctl_hist_query {
    const char *series;                 /* "a,b,prefix*"; NULL: the names only */
    int64_t from, to, step, top, now_s; /* unix seconds */
    const cr_principal *p;              /* whose: what it may read */
} ctl_hist_query;
/* The answer's JSON onto b (borrowed); CR_EINVAL with *field and why. Own lock. */
int ctl_hist_read(ctl_hist *h, const ctl_hist_query *q, cr_buf *b, const char **field, char *why,
                  size_t whylen);
void ctl_route_history(ctl *c, cr_http_req *req, const cr_principal *p);
/* ctl_ctr.c: the desired state's "container" of a job; NULL when it has
 * no image. Returned new. */
json_t *ctl_ctr_desired(const ctl *c, const json_t *spec);
/* ctl_mig.c: dynamic MIG (mu held for all). */
/* A registered layout that changed: the instances' starts as the agent
 * reports them. */
void ctl_mig_registered(ctl_gpu *g);
/* Ask the node for this layout (n instances: start, memory and compute
 * slices; fallback[i] names a profile when no registered instance does). */
void ctl_mig_want_build(ctl_gpu *g, int n, const int *start, const int *mem, const int *compute,
                        const char *const *fallback);
/* After a registration: UUIDs of the instances made; stop asking once the
 * node has the layout. */
void ctl_mig_want_settle(ctl_gpu *g);
/* A submitted mig_profile that no GPU model (nor registered node) has:
 * CR_EINVAL with the valid names in err. */
int ctl_mig_profile_check(const ctl *c, const char *profile, cr_json_err *err);
/* The desired state's "mig_layouts" for the node; NULL when none. New. */
json_t *ctl_mig_layouts(const ctl_node *n);
/* A shareable GPU's fractional tasks into its node view v: "shared_jobs"
 * (ids) and "shared_milli" (their thousandths), when it has any. */
void ctl_share_json(ctl *c, const ctl_node *n, const ctl_gpu *g, json_t *v);

/* ---- ctl_learn.c: the cluster calibrates its own advisor (issue 26) ----
 * Observations of jobs' measured throughput (the agent's "metrics" with a
 * job's end) per tenant x workload class x GPU type x count, stored as
 * objects of kind "observation" (they survive restarts) and used by
 * /v1/advise for the caller's own tenant only. Lock order: c->mu, then the
 * learn table's own mutex (never the other way). */
int ctl_load_learn(ctl *c);
void ctl_learn_free(ctl *c);
/* The model shapes by name (data/models), loaded once: immutable, any
 * thread; NULL when they could not be read. */
const cr_arch_catalog *ctl_learn_models(const ctl *c);
/* A job ended well on its placement with what it measured (borrowed; may
 * be NULL): one observation, written into txn. Under c->mu. */
void ctl_learn_record(ctl *c, cr_store_txn *txn, const ctl_job *j, const json_t *metrics);
/* What tenant's own jobs measured for class sig on gpu at count
 * (ctl_auto_learn_fn; ctx is the ctl): the runs, 0 when none. Takes the
 * learn table's mutex only: any thread, c->mu held or not. */
struct cr_learned;
int ctl_learn_lookup(void *ctx, const char *tenant, const char *sig, const char *gpu, int count,
                     struct cr_learned *out);
/* Scale the ranked estimates of a by what tenant's jobs measured. */
struct cr_workload;
struct cr_advice;
void ctl_learn_advise(ctl *c, const char *tenant, const struct cr_workload *w, struct cr_advice *a);

#endif
