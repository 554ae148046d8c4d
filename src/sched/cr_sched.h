/*
 * cr_sched.h - the Corral scheduler core: a pure library.
 *
 * One cr_sched holds a cluster (GPU types, racks, nodes, GPUs, MIG slices),
 * the tenants with their weights and quotas, and the jobs (pending and
 * running). The caller drives it with events (job added or removed, node
 * or GPU state changed) and asks for a scheduling cycle with
 * cr_sched_cycle(); the cycle *commits* its decisions (a started job holds
 * its GPUs when the call returns) and reports them so the caller can act:
 * the controller delivers them to agents, the simulator schedules the
 * finish events.
 *
 * Rules:
 *  - No I/O, no clock, no threads, no globals: time comes in as now_ns
 *    (int64_t nanoseconds, any epoch, never decreasing between calls) and
 *    randomness from the caller's seeded cr_rng. Iteration is in a stable
 *    order (priority, fair-share key, submit time, job id; nodes and GPUs by
 *    index), so the same calls give the same decisions bit for bit.
 *  - Not thread-safe: one cr_sched belongs to one thread at a time.
 *  - Identifiers: GPU types, tenants and nodes are small integers handed out
 *    in order of registration (0, 1, 2...) and never reused; jobs are the
 *    caller's uint64_t ids (unique among live jobs, 0 is not a valid id).
 *  - Pointers returned by getters (names, placements, decisions) are
 *    borrowed and valid until the next mutating call on the same cr_sched.
 *    Pointers passed in are borrowed: the scheduler copies what it keeps.
 *  - Errors: negative CR_E* codes (cr_error.h); out-parameters untouched on
 *    failure.
 *
 * Invariants (cr_sched_check() verifies them; the simulator calls it after
 * every event): no GPU or MIG slice is allocated twice; fractional tasks
 * sit only on shareable GPUs, never beside a whole-GPU or MIG job, and their
 * fractions (and memory) on one GPU sum to at most 1 (its memory); the CPU
 * and host memory held on a node (running jobs' and host tasks') equal a
 * recount and fit the node where it models them; per-node, per-rack
 * and per-type free counters equal a recount; a running gang holds exactly
 * its GPU count on exactly its node count; a tenant's non-borrowed use of a
 * GPU type never exceeds its quota.
 */
#ifndef CR_SCHED_H
#define CR_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cr_rng.h"

typedef struct cr_sched cr_sched;

/* Limits that keep per-job and per-node arrays small and fixed. */
#define CR_SCHED_MAX_TYPES     32 /* distinct GPU types in one cluster */
#define CR_SCHED_MAX_NODE_GPUS 64 /* GPUs on one node */
#define CR_SCHED_MAX_JOB_GPUS  65536
#define CR_SCHED_NAME_MAX      64   /* longest node/rack/type/tenant name */
#define CR_SCHED_REASON_MAX    256  /* longest pending/preempt reason text */
#define CR_SCHED_TYPE_ANY      (-1) /* job.gpu_type: any type ("auto") */

/* ------------------------------------------------------------------------ */
/* Policies and configuration                                               */

typedef enum cr_sched_policy {
    /* Strict submit order (then id); the head job blocks the queue except
     * for EASY backfill. GPU type "auto" takes the first type (by id) with
     * room: heterogeneity-agnostic. */
    CR_SCHED_FIFO = 0,
    /* Priority tiers (higher first), then fair share by tenant: the
     * tenant's dominant share (DRF across GPU types) of decayed usage,
     * divided by its weight, lowest first; then submit time. Quotas per
     * tenant and GPU type; idle capacity may be borrowed above quota and
     * borrowed work is preemptible by tenants under quota. Higher tiers
     * preempt preemptible lower tiers. */
    CR_SCHED_PRIORITY,
    /* Heterogeneity-aware (Gavel-like): queue in submit order as FIFO, but
     * a job of type "auto" goes to the GPU type an allocation over the
     * active jobs assigns it, maximising the sum of normalised throughput
     * (throughput on the type / best throughput of the job), solved as an
     * LP with GLPK or by the greedy heuristic (config.hetero_lp). */
    CR_SCHED_HETERO,
    /* Tiresias-style discretised least attained service (GPU-time): queue
     * index by attained service thresholds, FIFO inside a queue, starving
     * jobs promoted to queue 0; jobs in a better queue preempt preemptible
     * jobs in a worse one. For jobs of unknown length. */
    CR_SCHED_LAS,
    /* Time-shared, heterogeneity-aware rounds (Gavel's max-min fairness):
     * every round (config.round_ns) the LP of cr_sched_rounds_lp gives each
     * active job a share of time on each type; jobs are leased GPUs for
     * the round in order of their share over the time they received on the
     * type; a running preemptible job not leased its type again is
     * suspended (a PREEMPT decision losing no work: it checkpoints) and
     * resumes when a round leases it GPUs, on whatever type that is.
     * Non-preemptible jobs are never suspended. Between rounds free GPUs
     * go to unleased jobs (work-conserving). */
    CR_SCHED_ROUNDS,
    CR_SCHED_POLICY_COUNT
} cr_sched_policy;

/* A policy's name ("fifo", "priority", "hetero", "las") -> policy.
 * CR_EINVAL if unknown. */
int cr_sched_policy_parse(const char *name, cr_sched_policy *out);
/* Policy -> its name ("fifo"...); "?" if out of range. */
const char *cr_sched_policy_name(cr_sched_policy p);
/* The policies' names joined by '|' ("fifo|priority|...") into buf
 * (borrowed, size bytes, always terminated when size > 0): for help texts
 * and errors. Returns the length it needed, as snprintf. */
size_t cr_sched_policy_list(char *buf, size_t size);

#define CR_SCHED_LAS_MAX_QUEUES 8

/* Where a fractional task (gpu_milli / gpu_mem_bytes) goes among the
 * shareable GPUs that can hold it (docs/scheduler.md, "GPU sharing"). */
typedef enum cr_sched_share_policy {
    /* The GPU where the expected fragmentation of its node, under the mix
     * of recent task sizes, grows least (after FGD, Weng et al. ATC'23). */
    CR_SHARE_FRAG = 0,
    CR_SHARE_BEST_FIT,  /* the GPU with the least room left after it */
    CR_SHARE_WORST_FIT, /* the GPU with the most room left after it */
    CR_SHARE_POLICY_COUNT
} cr_sched_share_policy;

/* "frag", "best-fit", "worst-fit" -> policy. CR_EINVAL if unknown. */
int cr_sched_share_policy_parse(const char *name, cr_sched_share_policy *out);
const char *cr_sched_share_policy_name(cr_sched_share_policy p);

/* Recent task sizes remembered for the fragmentation-aware policy. */
#define CR_SCHED_MIX_WINDOW 1024

typedef struct cr_sched_config {
    cr_sched_policy policy;
    bool backfill;   /* EASY backfill behind the blocked head job (default on) */
    bool preemption; /* allow preempting lower-priority / borrowed / worse-queue work */
    bool borrowing;  /* let tenants borrow idle capacity above their quota (default on) */
    /* Fair-share usage decays with this half-life (default 7 days). */
    int64_t fairshare_halflife_ns;
    /* LAS: number of queues (1..CR_SCHED_LAS_MAX_QUEUES) and the attained
     * service thresholds (GPU-nanoseconds) between queue i and i+1;
     * defaults: 2 queues, threshold 3200 GPU-seconds (Tiresias). */
    int las_queues;
    int64_t las_threshold_gpu_ns[CR_SCHED_LAS_MAX_QUEUES - 1];
    /* LAS: a job pending longer than this goes to queue 0 (0 = never). */
    int64_t las_starve_ns;
    /* HETERO: true = GLPK LP (then a greedy fill of what rounding left);
     * false = the greedy heuristic alone (default: as good on our tests and
     * faster). The allocation covers the first hetero_window "auto" jobs
     * of the queue (default 64) against the free GPUs of each type. */
    bool hetero_lp;
    size_t hetero_window;
    /* Preempt only victims that ran at least this long (default 0). */
    int64_t min_runtime_before_preempt_ns;
    /* Wait-or-start (PRIORITY, LAS; default on): an "auto" job whose
     * fastest type is full starts on a slower type only if it would finish
     * there sooner than by waiting for the faster GPUs to free up (from the
     * running jobs' time limits). Needs runtime estimates (time_limit_ns,
     * taken as the runtime on the slowest type the job may use); jobs
     * without one start wherever there is room, as before. */
    bool wait_for_faster;
    /* Placement of fractional tasks on shareable GPUs (default
     * CR_SHARE_FRAG); applies under every policy. */
    cr_sched_share_policy share_policy;
    /* Examine at most this many pending jobs per cycle (0 = all, the
     * default), as Slurm's bf_max_job_test: under a long queue a cycle then
     * stops after the first max_examined jobs in queue order, and the jobs
     * past them keep their reasons until a cycle reaches them. Inexact:
     * a small job deep in the queue that fits in the GPUs left over waits
     * until it is among the first max_examined (docs/sim.md measures the
     * effect on average JCT). */
    uint32_t max_examined;
    /* ROUNDS: the round length (default 6 minutes, Gavel's). */
    int64_t round_ns;
    /* A job suspended by its policy (rounds) stays pending but is not
     * started again until the caller says its run has ended and its
     * checkpoint is written (cr_sched_job_resumable); off (default): at
     * once, as a simulator whose jobs stop instantly wants. */
    bool suspend_hold;
    /* The run time assumed for a running job without a time limit when a
     * reservation is computed (as Slurm's DefaultTime; default 1 hour,
     * 0 = none: such a job holds its GPUs for an unknown time and the
     * reservation behind it has no time). An assumption only: nothing is
     * stopped when it passes; the pending reason names the job assumed.
     * At most CR_SCHED_DEFAULT_TIME_MAX_NS. */
    int64_t default_time_ns;
    /* Dynamic MIG: a whole-GPU job that finds no whole GPU free may take an
     * idle GPU in MIG mode marked dynamic out of MIG mode (its layout
     * dropped; the start has mig_repartitioned set and the GPU's layout,
     * read with cr_sched_gpu_mig_layout, is empty: the caller switches MIG
     * off before the job starts). Off by default: only a caller that can
     * apply it turns it on. */
    bool mig_reclaim;
} cr_sched_config;

#define CR_SCHED_DEFAULT_TIME_MAX_NS (INT64_C(366) * 86400 * 1000000000)

/*
 * The max-min fairness time-share LP of the rounds policy (Gavel's
 * max_min_fairness_perf; sched_rounds_lp.c, also used by corral sim):
 * njobs x ntypes rates (row-major, gang work units/s, 0 = cannot run), GPUs
 * per job (scale), jobs each row stands for (mult; NULL = 1 each), GPUs per
 * type (cap). Fills x (njobs * ntypes fractions of time, per job of the
 * row) and z (the optimum). spread: a second stage that places leftover
 * capacity where it runs fastest. All borrowed. Returns 0, CR_EINVAL for
 * sizes out of range (njobs > CR_SCHED_ROUNDS_LP_MAX_JOBS, ntypes >
 * CR_SCHED_MAX_TYPES), CR_EUNAVAIL when GLPK finds no optimum.
 */
#define CR_SCHED_ROUNDS_LP_MAX_JOBS 20000
int cr_sched_rounds_lp(size_t njobs, int ntypes, const double *rate, const int *scale,
                       const double *mult, const double *cap, bool spread, double *x, double *z);

/* Fill *cfg with the defaults for a policy. */
void cr_sched_config_default(cr_sched_config *cfg, cr_sched_policy policy);

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                */

/* Returned new (free with cr_sched_free); cfg borrowed (copied). CR_EINVAL
 * for a bad configuration. */
int cr_sched_new(const cr_sched_config *cfg, cr_sched **out);
void cr_sched_free(cr_sched *s); /* NULL-safe; frees jobs and cluster */
const cr_sched_config *cr_sched_get_config(const cr_sched *s);

/* ------------------------------------------------------------------------ */
/* GPU types and MIG geometry                                               */

/*
 * A GPU type is a name ("H100 SXM", "V100") with a default memory size and,
 * for MIG-capable types, a slice geometry: compute slices / memory slices
 * (7/8 for A100, H100, H200, B200; 4/4 for A30). Registering the geometry
 * creates the standard profiles, named "<c>g.<GB>gb" from the memory size
 * (80 GB, 7/8: 1g.10gb 1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb with their
 * valid start positions in memory slices); more can be added.
 */

/* Look up a type by name, registering it if new. name borrowed. CR_EINVAL
 * for an empty or too long name; CR_ENOSPC past CR_SCHED_MAX_TYPES. */
int cr_sched_gpu_type(cr_sched *s, const char *name, int *out_type);
/* Look up only. CR_ENOENT if unknown. */
int cr_sched_gpu_type_find(const cr_sched *s, const char *name, int *out_type);
int cr_sched_gpu_type_count(const cr_sched *s);
const char *cr_sched_gpu_type_name(const cr_sched *s, int type); /* NULL if bad id */
/* Default memory per GPU of the type (used when a node does not say). */
int cr_sched_gpu_type_set_mem(cr_sched *s, int type, uint64_t mem_bytes);
/* MIG geometry: compute_slices/mem_slices, e.g. 7/8 or 4/4; creates the
 * standard profiles, named from the type's memory (set it first with
 * cr_sched_gpu_type_set_mem). mem_slices <= 8. Call before adding nodes
 * with MIG GPUs of this type. */
int cr_sched_gpu_type_set_mig(cr_sched *s, int type, int compute_slices, int mem_slices);
/* (Calling it again with the same geometry and memory keeps the profiles.) */
/* Add a MIG profile: compute and memory slices and a bitmask of valid start
 * positions (bit i = start at memory slice i). name borrowed. */
int cr_sched_mig_profile_add(cr_sched *s, int type, const char *name, int compute, int mem,
                             uint32_t start_mask);
/* Another name for the type's profile of that shape (compute, mem slices),
 * with its valid starts: a device's own name when the memory rounding
 * differs ("2g.12gb" for the "2g.13gb" of a 24 GiB A30). name borrowed.
 * CR_ENOENT if no profile has the shape; 0 if the name exists already. */
int cr_sched_mig_profile_alias(cr_sched *s, int type, const char *name, int compute, int mem);
/* Compute and memory slices of a profile of the type. CR_ENOENT if none. */
int cr_sched_mig_profile_get(const cr_sched *s, int type, const char *name, int *compute, int *mem);
/* The first profile of a type with that shape (a dynamic MIG layout names
 * its instances by it); NULL when none. Borrowed. */
const char *cr_sched_mig_profile_name(const cr_sched *s, int type, int compute, int mem);

/* ------------------------------------------------------------------------ */
/* Tenants                                                                  */

/* Look up a tenant by name, registering it if new (weight 1, no quotas). */
int cr_sched_tenant(cr_sched *s, const char *name, int *out_tenant);
int cr_sched_tenant_find(const cr_sched *s, const char *name, int *out_tenant);
int cr_sched_tenant_count(const cr_sched *s);
const char *cr_sched_tenant_name(const cr_sched *s, int tenant);
/* Fair-share weight (> 0). */
int cr_sched_tenant_set_weight(cr_sched *s, int tenant, double weight);
/* Quota: at most gpus GPUs of the type held without borrowing; -1 removes
 * the quota (unlimited). A MIG slice counts as one GPU, a fractional task
 * as its fraction (quotas and usage are kept in thousandths). gpus <=
 * INT32_MAX, else CR_EINVAL. */
int cr_sched_tenant_set_quota(cr_sched *s, int tenant, int type, int64_t gpus);

/*
 * The tenant tree (org -> department -> team, docs/scheduler.md "Tenant
 * tree"). A tenant's quota is its guarantee; with a parent, a job is within
 * guarantee only when every guarantee up the tree has room, and a limit
 * bounds what the whole subtree holds, borrowed or not. A lending limit
 * bounds how much of a tenant's own unused guarantee (its quota less its
 * children's) other tenants' borrowed work may use. Flat tenants (no
 * parent, no limits) keep the flat rules exactly. The fair share of the
 * PRIORITY policy follows Slurm's fair tree when any tenant has a parent.
 */
#define CR_SCHED_TENANT_DEPTH_MAX 8 /* levels, a root being level 1 */
/* Parent (-1: a root). CR_EINVAL for an unknown tenant, a cycle (parent
 * in tenant's subtree, or itself) or a tree deeper than the maximum;
 * nothing changed then. */
int cr_sched_tenant_set_parent(cr_sched *s, int tenant, int parent);
int cr_sched_tenant_parent(const cr_sched *s, int tenant);
/* Limit: at most gpus GPUs of the type held by the subtree at all (-1:
 * none). Lending limit: at most gpus of the tenant's own unused guarantee
 * lent (-1: all of it). gpus <= INT32_MAX, else CR_EINVAL. */
int cr_sched_tenant_set_limit(cr_sched *s, int tenant, int type, int64_t gpus);
int cr_sched_tenant_set_lending(cr_sched *s, int tenant, int type, int64_t gpus);
/* The fair tree's result of the last PRIORITY cycle: rank (0 goes first)
 * and the level fair share S/U among siblings (INFINITY when unused).
 * Both OUT; CR_EINVAL for an unknown tenant, CR_ENOENT when no tenant
 * has a parent (the flat order applies). */
int cr_sched_tenant_fair(const cr_sched *s, int tenant, int *rank, double *level_fs);

/* ------------------------------------------------------------------------ */
/* Cluster                                                                  */

typedef enum cr_sched_node_state {
    CR_NODE_UP = 0,  /* schedulable */
    CR_NODE_DRAINED, /* running jobs continue; nothing new starts */
    CR_NODE_LOST,    /* gone: its running jobs are requeued, GPUs leave the pool */
} cr_sched_node_state;

const char *cr_sched_node_state_name(cr_sched_node_state st);

typedef struct cr_sched_gpu_spec {
    int type;           /* GPU type id */
    uint64_t mem_bytes; /* 0 = the type's default */
    uint16_t nvlink;    /* NVLink domain inside the node (GPUs sharing it) */
    bool bad;           /* unhealthy: never allocated */
    bool mig;           /* in MIG mode: allocated by slices, never whole */
    bool share;         /* shareable: fractional tasks may pack on it (not with mig) */
} cr_sched_gpu_spec;

typedef struct cr_sched_node_spec {
    const char *name;  /* unique; borrowed */
    const char *rack;  /* leaf switch; created on first use; NULL = "default" */
    const char *spine; /* spine above the rack; NULL = "default" (informational) */
    cr_sched_node_state state;
    size_t gpu_count;              /* 0..CR_SCHED_MAX_NODE_GPUS */
    const cr_sched_gpu_spec *gpus; /* gpu_count entries; borrowed */
    /* Host resources (docs/scheduler.md, "CPU and host memory"): CPU in
     * thousandths of a core and host memory; 0 = not modelled (unlimited),
     * so a job's cpu_milli / host_mem_bytes never keeps it off the node. */
    uint64_t cpu_milli;
    uint64_t mem_bytes;
} cr_sched_node_spec;

/* Add a node; *out_node gets its index. CR_EEXIST for a duplicate name. */
int cr_sched_node_add(cr_sched *s, const cr_sched_node_spec *spec, uint32_t *out_node);
int cr_sched_node_find(const cr_sched *s, const char *name, uint32_t *out_node);
uint32_t cr_sched_node_count(const cr_sched *s);
int cr_sched_rack_count(const cr_sched *s);
const char *cr_sched_rack_name(const cr_sched *s, int rack);

/*
 * Change a node's state. Going LOST requeues the jobs running on it (their
 * work since the last checkpoint is lost); DRAINED lets them run on but
 * starts nothing new there; a lost node that comes back UP has all its
 * GPUs free. *requeued (optional, may be NULL) is returned new (free with
 * free()) with *n_requeued ids of the jobs requeued, in ascending id order.
 * reason borrowed, may be NULL.
 */
int cr_sched_node_set_state(cr_sched *s, uint32_t node, cr_sched_node_state st, const char *reason,
                            int64_t now_ns, uint64_t **requeued, size_t *n_requeued);
/*
 * A node whose GPUs changed (models, count: re-registered after a
 * hardware change): its entry goes LOST for good, requeueing its jobs as
 * above, and is renamed out of the way, so that cr_sched_node_add can add
 * the node again under its name with the GPUs it has now. The retired
 * entry keeps its index (placements name nodes by index) and can never be
 * set UP again (CR_EINVAL).
 */
int cr_sched_node_retire(cr_sched *s, uint32_t node, int64_t now_ns, uint64_t **requeued,
                         size_t *n_requeued);
/* Mark a GPU healthy or bad; a GPU going bad requeues the job(s) on it as
 * above. reason borrowed. */
int cr_sched_gpu_set_health(cr_sched *s, uint32_t node, uint32_t gpu, bool ok, const char *reason,
                            int64_t now_ns, uint64_t **requeued, size_t *n_requeued);
/* Switch MIG mode on an idle GPU of a MIG-capable type. CR_EBUSY if in use
 * (fractional tasks included), CR_ENOTSUP if the type has no MIG geometry,
 * CR_EINVAL to turn it on for a shareable GPU. */
int cr_sched_gpu_set_mig(cr_sched *s, uint32_t node, uint32_t gpu, bool mig);
/*
 * Fix a MIG GPU's instance layout: the instances that exist on the device
 * (a real GPU is partitioned ahead of time; jobs cannot carve new ones).
 * profiles[i] names instance i, a profile of the GPU's type; n <= 8. The
 * scheduler gives each a start slice (largest first, lowest valid free
 * start) and writes it to starts[i] (starts may be NULL); the same list
 * always gets the same starts. The GPU goes into MIG mode and from then on
 * a MIG job is placed only on a free instance of this layout with the
 * profile it asked for. n = 0 goes back to carving on demand. CR_EBUSY if
 * the GPU is in use (fractional tasks included), CR_EINVAL for a shareable
 * GPU, CR_ENOTSUP if the type has no MIG geometry, CR_ENOENT for an unknown
 * profile, CR_ERANGE if the instances do not fit together.
 */
int cr_sched_gpu_set_mig_layout(cr_sched *s, uint32_t node, uint32_t gpu,
                                const char *const *profiles, size_t n, int *starts);
/*
 * Dynamic MIG on a GPU with a fixed layout: when a MIG job fits no free
 * instance anywhere, the scheduler may destroy idle instances of such a GPU
 * and create the job's instance in their place (at a valid start that no
 * busy instance overlaps); a busy instance is never touched. The start
 * decision then has mig_repartitioned set and the GPU's layout (read with
 * cr_sched_gpu_mig_layout) is the new one, for the caller to apply (destroy
 * and create GPU/compute instances) before the job runs. CR_ENOTSUP if the
 * type has no MIG geometry.
 */
int cr_sched_gpu_set_mig_dynamic(cr_sched *s, uint32_t node, uint32_t gpu, bool dynamic);
/* A GPU's fixed MIG layout: up to 8 instances' start slice, memory slices
 * and compute slices; returns the count (0: carved on demand). */
int cr_sched_gpu_mig_layout(const cr_sched *s, uint32_t node, uint32_t gpu, int *start, int *mem,
                            int *compute);

typedef struct cr_sched_node_info {
    const char *name;
    int rack;
    const char *rack_name;
    cr_sched_node_state state;
    const char *reason; /* last state/health reason, "" if none */
    uint32_t gpu_count;
    uint32_t free_gpus; /* whole healthy free non-MIG GPUs (0 unless UP) */
    uint64_t cpu_milli; /* host CPU (thousandths of a core), 0 = not modelled */
    uint64_t cpu_used;  /* held by running jobs and host tasks */
    uint64_t mem_bytes; /* host memory, 0 = not modelled */
    uint64_t mem_used;
} cr_sched_node_info;

typedef struct cr_sched_gpu_info {
    int type;
    uint64_t mem_bytes;
    uint16_t nvlink;
    bool bad;
    const char *reason; /* health reason, "" if none */
    bool mig;
    uint8_t mig_used_mask; /* MIG: memory slices in use */
    uint8_t mig_fixed;     /* MIG: instances in the fixed layout, 0 = carved on demand */
    bool mig_dynamic;      /* MIG: idle instances may be repartitioned */
    uint64_t job;          /* whole-GPU holder, 0 if free or MIG */
    bool share;            /* shareable */
    uint16_t share_milli;  /* shareable: thousandths of the GPU held by fractional tasks */
    uint64_t share_mem;    /* shareable: memory held by fractional tasks */
    uint32_t share_jobs;   /* shareable: fractional tasks on it */
} cr_sched_gpu_info;

int cr_sched_node_info_get(const cr_sched *s, uint32_t node, cr_sched_node_info *out);
int cr_sched_gpu_info_get(const cr_sched *s, uint32_t node, uint32_t gpu, cr_sched_gpu_info *out);

/* Capacity of a type now: healthy GPUs on UP nodes (*total, MIG GPUs
 * included) and whole GPUs free (*free). Either pointer may be NULL. */
int cr_sched_capacity(const cr_sched *s, int type, uint32_t *total, uint32_t *free_gpus);

/*
 * Load a cluster file (format in docs/scheduler.md and data/clusters/):
 * line-based, '#' comments, "keyword arg key=value ..." records:
 *
 *   gpu-type h100 name="H100 SXM" mem=80g mig=7/8
 *   rack r0 spine=s0
 *   node h100-[0-1] rack=r0 gpus=8xh100 nvlink=8 [state=up|drained|lost] [mig=0,1|all]
 *   gpu h100-0 3 health=bad reason="XID 79"
 *   tenant alice weight=2 quota=h100:8,a100:4
 *
 * text borrowed (len bytes, need not be NUL-terminated). On error returns
 * CR_EPARSE (or CR_EEXIST, CR_ERANGE...) and writes "line N: field F: what"
 * into err (errlen bytes, may be 0); what was loaded before the bad line
 * stays loaded.
 */
int cr_sched_load_cluster(cr_sched *s, const char *text, size_t len, char *err, size_t errlen);

/* ------------------------------------------------------------------------ */
/* Jobs                                                                     */

typedef enum cr_sched_job_kind {
    CR_JOB_PRETRAIN = 0,
    CR_JOB_FINETUNE,
    CR_JOB_INFERENCE,
    CR_JOB_BATCH,
    CR_JOB_VISUAL,
    CR_JOB_HPC,
    CR_JOB_OTHER,
    CR_JOB_KIND_COUNT
} cr_sched_job_kind;

int cr_sched_job_kind_parse(const char *name, cr_sched_job_kind *out);
const char *cr_sched_job_kind_name(cr_sched_job_kind k);

typedef struct cr_sched_job_spec {
    uint64_t id;      /* caller's id, unique among live jobs, != 0 */
    int tenant;       /* tenant id (cr_sched_tenant) */
    int32_t priority; /* tier: higher goes first (PRIORITY policy) */
    cr_sched_job_kind kind;
    uint32_t gpu_count; /* GPUs (or MIG instances) in total, >= 1 */
    int gpu_type;       /* type id or CR_SCHED_TYPE_ANY ("auto") */
    /* Relative throughput of this job on each type id (tput_count entries;
     * 0 = cannot run there). NULL = 1.0 on every type. Copied. Used for the
     * type choice of "auto" jobs (best first) and by HETERO. */
    const double *tput;
    size_t tput_count;
    uint64_t mem_bytes; /* minimum memory per GPU (0 = any) */
    /* MIG profile name ("1g.10gb", "3g.40gb"), NULL or "" = whole GPUs.
     * Resolved against each candidate type's profiles; copied. */
    const char *mig_profile;
    /* Gang: exactly node_count nodes with gpu_count/node_count GPUs each
     * (gpu_count must divide). 0 = any spread, packed tightest first. */
    uint32_t node_count;
    int64_t time_limit_ns; /* runtime estimate for backfill; 0 = unknown */
    bool preemptible;
    int64_t checkpoint_interval_ns; /* 0 = no checkpoints: preemption loses all */
    int64_t submit_ns;
    int64_t attained_gpu_ns; /* service already received (e.g. before a restart) */
    /* Fractional GPU: a part of one shareable GPU, never beside a whole-GPU
     * or MIG job. gpu_milli 1..999 = thousandths of its compute; 0 = whole
     * GPUs (unless gpu_mem_bytes is set). gpu_mem_bytes > 0 = memory held
     * on the shared GPU (the sum on a GPU never exceeds its memory); a task
     * giving only memory holds the same fraction of the compute, rounded
     * up. Either one needs gpu_count 1, node_count <= 1, no MIG profile. */
    uint16_t gpu_milli;
    uint64_t gpu_mem_bytes;
    /* Nodes the job may use: bit n of node_mask (node index n) set = may;
     * node_mask NULL = any node; indexes at or past node_mask_bits may not.
     * Copied. (--nodelist, --exclude, --constraint resolve to this.) */
    const uint8_t *node_mask;
    uint32_t node_mask_bits;
    /* Locality (docs/data.md): nodes that already hold the job's data, as
     * a mask like node_mask (NULL = none). A single-node job goes to the
     * best-fit one of these that fits before any other node of its type;
     * gangs and spread jobs ignore it. Copied. */
    const uint8_t *prefer_mask;
    uint32_t prefer_mask_bits;
    /* Whole nodes: it starts only on nodes where nothing runs, and nothing
     * else starts there while it runs (--exclusive). */
    bool exclusive;
    /* Host resources on each node the job holds GPUs on: CPU in
     * thousandths of a core and host memory (0 = none asked). A node that
     * models them (cr_sched_node_spec.cpu_milli / mem_bytes) takes the job
     * only while what running jobs and host tasks hold there leaves room. */
    uint64_t cpu_milli;
    uint64_t host_mem_bytes;
    /* A suspended job whose run may still be writing its checkpoint (a
     * caller's restart during a suspension): it enters the queue held, as
     * a suspension leaves it, until cr_sched_job_resumable (only with
     * config.suspend_hold; else ignored). */
    bool suspend_held;
} cr_sched_job_spec;

typedef enum cr_sched_job_state {
    CR_JOB_PENDING = 0,
    CR_JOB_RUNNING,
} cr_sched_job_state;

/* One allocated unit: a whole GPU (mig_start < 0) or a MIG instance. */
typedef struct cr_sched_slot {
    uint32_t node;
    uint16_t gpu;        /* index inside the node */
    int8_t mig_start;    /* first memory slice, -1 = whole GPU */
    uint8_t mig_mem;     /* memory slices (MIG only) */
    uint8_t mig_compute; /* compute slices (MIG only) */
    uint16_t milli;      /* fractional: thousandths of the shared GPU; 0 = not shared */
} cr_sched_slot;

/* Add a pending job. spec borrowed (copied). CR_EEXIST for a live id,
 * CR_EINVAL for a malformed spec: id 0, unknown tenant or type, gpu_count
 * 0 or not divisible by node_count, a MIG profile with node_count > 1, a
 * negative or non-finite throughput, etc. A job that can never fit the
 * cluster is accepted and stays pending with a reason saying so. */
int cr_sched_job_add(cr_sched *s, const cr_sched_job_spec *spec, int64_t now_ns);
/* Remove a job (finished, failed or cancelled), pending or running: its
 * GPUs are freed and its service charged to the tenant; its id may be
 * reused at once. CR_ENOENT if not live. (Its memory is reclaimed by the
 * next cycle, which may still hold it in the previous queue order.) */
int cr_sched_job_remove(cr_sched *s, uint64_t id, int64_t now_ns);
/* Put a running job back to pending (delivery failed, agent reported it
 * lost...): GPUs freed, progress since the last checkpoint counted lost. */
int cr_sched_job_requeue(cr_sched *s, uint64_t id, int64_t now_ns);
/* Restore a running job with a known placement (controller restart).
 * CR_EBUSY if a slot is taken, CR_EINVAL if a slot does not exist. */
int cr_sched_job_restore(cr_sched *s, const cr_sched_job_spec *spec, int gpu_type,
                         const cr_sched_slot *slots, size_t n_slots, int64_t start_ns,
                         bool borrowed);

typedef struct cr_sched_job_info {
    uint64_t id;
    cr_sched_job_state state;
    int tenant;
    int gpu_type;      /* RUNNING: the type it runs on; PENDING: requested */
    size_t slot_count; /* RUNNING: its slots */
    const cr_sched_slot *slots;
    int64_t submit_ns;
    int64_t start_ns;        /* RUNNING: start of the current run */
    int64_t attained_gpu_ns; /* service so far, up to the last event */
    int64_t lost_work_ns;    /* total wall time lost to preemptions/requeues */
    uint32_t preemptions;    /* times preempted or requeued */
    bool borrowed;           /* RUNNING above its tenant's quota */
    int las_queue;           /* LAS queue index */
} cr_sched_job_info;

int cr_sched_job_info_get(const cr_sched *s, uint64_t id, cr_sched_job_info *out);
size_t cr_sched_job_count(const cr_sched *s, cr_sched_job_state st);

/*
 * Why a pending job is pending, in plain words, e.g.
 *   "needs 16 H100 SXM in 2 nodes: 12 free; reserved for t+40m"
 *   "tenant quota for A100 reached (8 of 8 in use)"
 *   "behind higher-priority jobs"
 * Written into buf (len bytes, NUL-terminated, truncated). Returns the
 * length, CR_ENOENT if no such job, CR_EINVAL if it is running (buf gets
 * "running"). Reasons are those of the last cycle ("not yet considered"
 * before the first).
 */
int cr_sched_job_reason(const cr_sched *s, uint64_t id, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* The cycle                                                                */

typedef enum cr_sched_action {
    CR_SCHED_START = 0, /* job now RUNNING on slots */
    CR_SCHED_PREEMPT,   /* job back to PENDING; slots freed */
} cr_sched_action;

typedef struct cr_sched_decision {
    cr_sched_action action;
    uint64_t job;
    int gpu_type;      /* START: the type chosen */
    size_t slot_count; /* START: the placement */
    const cr_sched_slot *slots;
    bool borrowed;   /* START: above quota, on borrowed capacity */
    bool backfilled; /* START: started ahead of a reservation */
    /* START: its MIG GPU's layout was rewritten for it; for a whole-GPU job
     * (mig_reclaim), GPUs it holds were taken out of MIG mode for it */
    bool mig_repartitioned;
    int64_t lost_work_ns;   /* PREEMPT: wall time since its last checkpoint */
    uint64_t preempted_for; /* PREEMPT: the job that needed its GPUs */
    const char *reason;     /* PREEMPT: plain words; START: "" */
} cr_sched_decision;

/*
 * Run one cycle at now_ns: order the pending queue by policy, place what
 * fits (type choice, then the tightest topology domain, best-fit), reserve
 * for the blocked head job and backfill behind it, preempt where the
 * policy allows, and record a reason for every job left pending. rng
 * borrowed, may be NULL (no policy draws from it today: every tie is broken
 * by job id; it is in the contract so a randomised policy stays
 * reproducible).
 *
 * *out gets the decisions in the order they were taken (preemptions come
 * right before the start they make room for); valid until the next
 * mutating call. Returns the number of decisions (>= 0).
 */
int cr_sched_cycle(cr_sched *s, int64_t now_ns, cr_rng *rng, const cr_sched_decision **out);

/* The run of suspended job id has exited (its checkpoint is written): it
 * may start again (config.suspend_hold). CR_ENOENT unknown; 0 also when it
 * was not held. */
int cr_sched_job_resumable(cr_sched *s, uint64_t id);

/* When the policy next wants a cycle though nothing changed (ROUNDS: the
 * next round boundary), on the clock of now_ns; INT64_MAX if never. A
 * caller that cycles only on events also cycles at this time. */
int64_t cr_sched_next_cycle_ns(const cr_sched *s);

/*
 * Host tasks: work that needs only CPU and host memory on one node (a
 * CPU-only pod). The scheduler chooses the node as it would for a GPU task
 * under the share policy (best-fit: the least CPU and GPU left after it;
 * worst-fit: the most; frag: the least growth of expected fragmentation,
 * which for a task without GPUs is the best-fit node) among UP nodes that
 * model CPU or memory and have room, and charges it; it is not a job (no
 * queue, no reason, no preemption): the caller releases it with
 * cr_sched_host_release. node_mask (node_mask_bits bits) may be NULL.
 * CR_ENOSPC when no node has room, CR_EINVAL for a task asking nothing.
 */
int cr_sched_host_place(cr_sched *s, uint64_t cpu_milli, uint64_t mem_bytes,
                        const uint8_t *node_mask, uint32_t node_mask_bits, uint32_t *out_node);
int cr_sched_host_release(cr_sched *s, uint32_t node, uint64_t cpu_milli, uint64_t mem_bytes);

/* Check every invariant by recount. Returns 0, or CR_ECONFLICT with the
 * first violation described in err (errlen bytes). O(jobs + GPUs). */
int cr_sched_check(const cr_sched *s, char *err, size_t errlen);

/* Counters of the last cycle, for benchmarks and /metrics. */
typedef struct cr_sched_stats {
    uint64_t cycles;
    uint32_t last_considered; /* pending jobs examined */
    uint32_t last_started;
    uint32_t last_preempted;
    uint32_t last_backfilled;
    uint64_t mig_repartitions; /* dynamic MIG layouts rewritten, in all */
} cr_sched_stats;

void cr_sched_stats_get(const cr_sched *s, cr_sched_stats *out);

#endif
