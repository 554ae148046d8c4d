/*
 * sched_int.h - private state shared by the files of src/sched.
 *
 * Free capacity is kept in counters updated on every allocation and
 * release, so a cycle never scans all GPUs:
 *  - per (node, type) record ("nt"): free whole GPUs of that type on the
 *    node; each record sits in its type's bucket list for its free count,
 *    so a best-fit node for k GPUs is the head of the first non-empty
 *    bucket >= k;
 *  - per (rack, type): free whole GPUs;
 *  - per type: free whole GPUs, total healthy GPUs, MIG GPUs list.
 * Only UP nodes and healthy, non-MIG GPUs count as free. cr_sched_check()
 * recounts everything from the GPUs and the jobs.
 */
#ifndef CR_SCHED_INT_H
#define CR_SCHED_INT_H

#include "cr_sched.h"

#define NT_NONE   UINT32_MAX
#define HT_WAIT   (-1) /* HETERO: the allocation gives this job nothing now */
#define HT_FREE   (-2) /* HETERO: not in the allocation window; any type */
#define RANK_NONE 0xff /* cr__sched_policy_ops.rank_why: no ranked preemption */

typedef struct mig_prof {
    char name[16];
    uint8_t compute;     /* compute slices */
    uint8_t mem;         /* memory slices */
    uint32_t start_mask; /* valid starts, bit i = memory slice i */
} mig_prof;

typedef struct gtype {
    char name[CR_SCHED_NAME_MAX];
    uint64_t mem_bytes;  /* default memory per GPU */
    uint8_t mig_compute; /* MIG geometry, 0 = no MIG */
    uint8_t mig_mem;
    mig_prof *profs;   /* owned */
    uint64_t prof_mem; /* memory the standard profiles were named from */
    int nprof;
    uint32_t total;    /* healthy GPUs on UP nodes (MIG ones too) */
    uint32_t free;     /* free whole GPUs on UP nodes */
    uint32_t max_node; /* most GPUs of this type on one node (bucket count - 1) */
    uint32_t *bucket;  /* bucket[c] = first nt with free == c, NT_NONE if none; owned */
    uint32_t nbucket;
    uint32_t *mig_gpus; /* owned: (node << 8 | gpu) of GPUs in MIG mode */
    uint32_t nmig, cmig;
    uint32_t *sh_gpus; /* owned: (node << 8 | gpu) of shareable GPUs, in order */
    uint32_t nsh, csh;
    /* owned: (node << 8 | gpu) of dynamic GPUs mig_reclaim took out of MIG
     * mode, which a MIG job may put back (entries checked when used) */
    uint32_t *dw_gpus;
    uint32_t ndw, cdw;
} gtype;

typedef struct gpu {
    int8_t type;
    bool bad;
    bool mig;
    uint8_t mig_used;         /* memory slices in use (bitmask) */
    uint8_t mig_compute_used; /* compute slices in use */
    /* Fixed MIG layout (the instances that exist on the device), mig_nfix
     * entries; 0 = carved on demand from the type's profiles. */
    uint8_t mig_nfix;
    uint8_t mig_fix_start[8], mig_fix_mem[8], mig_fix_compute[8];
    /* Dynamic MIG: a MIG job that fits no free instance may have idle
     * instances destroyed and its own created in their place (never a
     * busy one); the layout is then rewritten (cr__sched_slots_take). */
    bool mig_dynamic;
    uint16_t nvlink;
    uint64_t mem_bytes;
    uint64_t job; /* whole-GPU holder (0 = free) */
    char *reason; /* owned, health reason or NULL */
    /* Sharing: fractional tasks on a shareable GPU. While sh_n > 0 the GPU
     * is out of the whole-GPU free counters, as if a whole job held it. */
    bool share;
    uint16_t sh_milli; /* thousandths held */
    uint32_t sh_n;     /* fractional tasks on it */
    uint64_t sh_mem;   /* memory held */
} gpu;

/* One (node, type) pair. */
typedef struct nt {
    uint32_t node;
    int8_t type;
    uint8_t free;        /* free whole GPUs of this type (only if node UP) */
    uint8_t total;       /* GPUs of this type on the node */
    bool linked;         /* in its type's bucket list */
    uint64_t mem_bytes;  /* smallest memory among these GPUs */
    uint32_t prev, next; /* bucket list links */
} nt;

typedef struct node {
    char *name; /* owned */
    int rack;
    cr_sched_node_state state;
    char *reason; /* owned or NULL */
    uint32_t ngpu;
    gpu *gpus;         /* owned, ngpu entries */
    uint32_t nt_first; /* its nt records: nt_first .. nt_first + nnt - 1 */
    uint8_t nnt;
    bool multi_domain; /* GPUs in more than one NVLink domain */
    uint64_t excl_job; /* an exclusive job holds the whole node (0 = none) */
    bool retired;      /* replaced by a new entry (cr_sched_node_retire): lost for good */
    /* host resources: capacity (0 = not modelled), held by running jobs
     * (once per node a job holds GPUs on) and by host tasks */
    uint64_t cpu_total, cpu_used, cpu_host;
    uint64_t mem_total, mem_used, mem_host;
    uint64_t mark; /* scratch: charging stamp (sched_cluster.c) */
} node;

typedef struct rack_rec {
    char *name;      /* owned */
    char *spine;     /* owned */
    uint32_t *nodes; /* owned, node indices */
    uint32_t nnodes, cnodes;
    uint32_t free[CR_SCHED_MAX_TYPES];
} rack_rec;

typedef struct tenant_rec {
    char name[CR_SCHED_NAME_MAX];
    double weight;
    int64_t quota[CR_SCHED_MAX_TYPES];    /* -1 = unlimited */
    uint32_t used_nb[CR_SCHED_MAX_TYPES]; /* GPUs held, not borrowed */
    uint32_t used_b[CR_SCHED_MAX_TYPES];  /* GPUs held on borrowed capacity */
    double usage[CR_SCHED_MAX_TYPES];     /* decayed GPU-seconds */
    double share;                         /* dominant share / weight, per cycle */
    /* the tenant tree (sched_tree.c): parent index or -1 for a root */
    int parent;
    int64_t limit[CR_SCHED_MAX_TYPES]; /* GPUs the subtree may hold at all; -1 none */
    int64_t lend[CR_SCHED_MAX_TYPES];  /* of its own guarantee, lendable; -1 all */
    double level_fs;                   /* fair tree: S/U among siblings, per cycle */
    int fair_rank;                     /* fair tree: 0 first, per cycle */
} tenant_rec;

/* Pending-reason codes, formatted on demand. */
enum {
    R_NONE = 0,
    R_NOT_CONSIDERED,
    R_NO_TYPE,    /* no type can ever run it */
    R_NEVER,      /* bigger than the cluster */
    R_NO_FIT,     /* not enough free now */
    R_FRAGMENTED, /* enough free, not in the shape asked */
    R_QUOTA,
    R_BLOCKED,       /* FIFO/priority: behind the blocked head job of the type */
    R_BACKFILL,      /* would delay the reservation */
    R_NO_FREE,       /* nothing free anywhere: not examined */
    R_HETERO_WAIT,   /* allocation gave the free GPUs to others */
    R_PREEMPTED,     /* preempted for rother, not yet reconsidered */
    R_REQUEUED,      /* its node or GPU failed, or the caller requeued it */
    R_WAIT_FASTER,   /* waiting for a faster type finishes sooner than starting slower */
    R_SUSPENDED,     /* suspended by its policy (rounds: lease not renewed) */
    R_CHECKPOINTING, /* suspended; its run has not yet ended (suspend_hold) */
    R_LIMIT,         /* a tenant limit up the tree closes (rother: tenant + 1) */
    R_LEND,          /* above quota, and the lenders' lending limits are reached */
    R_MIG_BUSY,      /* whole GPU: the free ones are in MIG mode, none idle and dynamic */
    R_MIG_NONE,      /* MIG: no GPU of the type has the profile or can be repartitioned */
};

typedef struct job {
    cr_sched_job_spec spec; /* tput (owned) and mig_profile point into this struct */
    float *tput;            /* owned, CR_SCHED_MAX_TYPES entries; NULL = 1 everywhere */
    uint8_t *node_mask;     /* owned copy of spec.node_mask (spec points at it), or NULL */
    uint8_t *prefer_mask;   /* owned copy of spec.prefer_mask (spec points at it), or NULL */
    char mig[16];
    cr_sched_job_state state;
    uint32_t qidx; /* index in pending or running array */
    uint32_t tidx; /* RUNNING: index in s->trun[run_type] */
    uint32_t hpos; /* RUNNING: index in s->eheap[run_type], UINT32_MAX if not there */
    int run_type;
    cr_sched_slot *slots; /* owned while RUNNING */
    uint32_t nslots;
    int64_t start_ns;
    int64_t enqueue_ns; /* when it last became pending */
    int64_t attained;   /* GPU-ns up to start_ns / last stop */
    int64_t lost_ns;
    uint32_t preemptions;
    bool borrowed;
    uint64_t start_cycle; /* stats.cycles when last started (no preempting it then) */
    uint8_t las_queue;
    /* last pending reason */
    uint8_t rcode;
    int8_t rtype;
    uint32_t rneed, rfree;
    int64_t rat; /* reservation time, INT64_MAX = none */
    uint64_t rother;
    uint64_t rassume; /* the reservation assumed this job's default run time (0 = none) */
    uint64_t rcycle;  /* cycle that last examined it */
    bool in_order;    /* queued in class qc at index opos (sched_queue.c) */
    uint32_t qc, opos;
    uint32_t hp[3];  /* PENDING: index in s->mheap[0] (GPUs), [1] (time limit), [2] */
    uint64_t hcycle; /* HETERO: cycle that set hetero_type (else HT_FREE) */
    bool dead;       /* removed; freed at the next cycle (s->grave) */
    uint64_t qcycle; /* cycles completed when it last became pending */
    int hetero_type; /* per-cycle HETERO target: type, HT_WAIT or HT_FREE */
    uint32_t held;   /* RUNNING: thousandths of GPUs held (quotas, usage) */
    bool repart;     /* RUNNING: its start repartitioned a dynamic MIG GPU */
    /* RUNNING under LAS: its place in the victim index (sched_victim.c) */
    int8_t vq;      /* its queue's set, -1 = among the type's others */
    uint8_t vg;     /* its checkpoint-interval group */
    uint32_t vpos;  /* index in its bucket (or in others) */
    uint32_t vhp;   /* index in the promotion heap, UINT32_MAX if not there */
    int64_t vpromo; /* no later than when it reaches the next queue */
    /* ROUNDS (sched_policy_rounds.c): the type this round leases it (-1 =
     * none: it only fills GPUs no leased job takes), the round that last
     * suspended it, and the wall time it held each type (owned, lazily
     * CR_SCHED_MAX_TYPES entries, NULL = none yet). */
    int8_t lease_type;
    uint64_t susp_round;
    bool susp_held; /* suspended, its run not yet ended (config.suspend_hold) */
    int64_t *recv_ns;
} job;

/* Mix of recent task sizes (sched_share.c): a ring of the last
 * CR_SCHED_MIX_WINDOW sizes, in thousandths of a GPU (1000 * k for k
 * whole GPUs), and the distinct sizes with their counts. */
#define MIX_CLASSES 128
typedef struct mix {
    uint32_t ring[CR_SCHED_MIX_WINDOW];
    uint32_t n, pos;
    uint32_t size[MIX_CLASSES];
    uint64_t cpu[MIX_CLASSES]; /* CPU asked (thousandths of a core), per node */
    uint32_t count[MIX_CLASSES];
    uint32_t nclass;
} mix;

/*
 * The policy seam. Every place a cycle, the queue order or the victim index
 * differs by policy asks the scheduler's ops table (s->pol, fixed at
 * cr_sched_new from cfg.policy), one table per policy in
 * sched_policy_<name>.c. A NULL hook means "none": the generic behaviour
 * written beside each field. A new policy is a new table and a line in
 * cr__sched_policy_table (sched_cluster.c); no cycle code names a policy.
 *
 * Ranks: a policy that preempts by rank (rank_why set) gives a pending job
 * its rank (job_rank) and a running job its rank as a victim (victim_rank),
 * both "higher = weaker": j may preempt r when victim_rank(r) > job_rank(j).
 * A policy without ranking leaves both NULL (every job ranks 0: none is
 * weaker than another, so only borrowed work is ever taken back).
 */
typedef struct cr__sched_policy_ops {
    const char *name; /* as cr_sched_policy_parse reads it */
    /* Queue order. The class key of a pending job (lower first; NULL: 0,
     * one class in submit order); note_key records it on the job when it
     * enters its class (LAS: its queue). tenant_classes: classes are also
     * per tenant, ordered by the tenant's fair share (tenant_rec.share). */
    int64_t (*queue_key)(const cr_sched *s, const job *j, int64_t now_ns);
    void (*note_key)(job *j, int64_t key);
    bool tenant_classes;
    /* Before the queue is brought up to date (fair shares), and at its
     * start from inside it (keys that drift with time: LAS starvation). */
    void (*cycle_begin)(cr_sched *s, int64_t now_ns);
    void (*order_begin)(cr_sched *s, int64_t now_ns);
    /* After the order, before the walk (HETERO's allocation). */
    void (*cycle_ordered)(cr_sched *s, cr_rng *rng);
    /* Type choice: candidate types by the job's throughput (else the most
     * free first: heterogeneity-agnostic); assigned_type: the type this
     * cycle gives an "auto" job (>= 0), HT_WAIT (none now: it waits) or
     * HT_FREE (any candidate; also when NULL). wait_for_faster: the
     * wait-or-start rule (config.wait_for_faster) applies. */
    bool by_throughput;
    int (*assigned_type)(const cr_sched *s, const job *j);
    bool wait_for_faster;
    /* Reservations: the head job blocks the queue behind it (EASY
     * backfill around its reservation); false: jobs pass one another. */
    bool head_blocks;
    /* Preemption by rank (see above). rank_why: the victim's reason code
     * in try_preempt (0 tier, 2 LAS queue), 0xff = no ranked preemption.
     * rank_worst: no victim ranks above it (a scan may stop there);
     * NULL: INT64_MAX. may_outrank: may j outrank a running job of type at
     * all (a cheap bound before the scan; NULL: true). may_outrank_any:
     * may any queued job from j on outrank a running one (the early stop
     * of a cycle with nothing free; NULL: false). victim_bound: told the
     * cheap bound's inputs after a full scan of type's running jobs (all
     * preemptible ones: any, lowest tier). */
    uint8_t rank_why;
    int64_t (*job_rank)(const cr_sched *s, const job *j);
    int64_t (*victim_rank)(const cr_sched *s, const job *r, int64_t now_ns);
    int64_t (*rank_worst)(const cr_sched *s);
    bool (*may_outrank)(const cr_sched *s, const job *j, int type);
    bool (*may_outrank_any)(const cr_sched *s, const job *j);
    void (*victim_bound)(cr_sched *s, int type, bool any, int32_t min_prio);
    /* Attained service: keep the victim index of running jobs by attained
     * service queue (sched_victim.c). */
    bool attained_index;
    /* Told when a running job stops (finish, preemption, suspension,
     * failure), before its run_type and start_ns are cleared. */
    void (*job_stopped)(cr_sched *s, job *j, int64_t now_ns);
    /* The pending reason of a job assigned_type holds back (HT_WAIT). */
    const char *wait_text;
    /* cr_sched_next_cycle_ns (NULL: INT64_MAX). */
    int64_t (*next_cycle_ns)(const cr_sched *s);
} cr__sched_policy_ops;

/* The table of a policy; NULL if out of range. */
const cr__sched_policy_ops *cr__sched_policy_ops_of(cr_sched_policy p);
extern const cr__sched_policy_ops cr__sched_policy_fifo;
extern const cr__sched_policy_ops cr__sched_policy_priority;
extern const cr__sched_policy_ops cr__sched_policy_hetero;
extern const cr__sched_policy_ops cr__sched_policy_las;
extern const cr__sched_policy_ops cr__sched_policy_rounds;

/* sched_cycle.c: stop running job j at now_ns as its policy's own choice
 * (not for another job): a PREEMPT decision with reason (borrowed, copied)
 * and no work lost (the job checkpoints on the way out), pending reason
 * R_SUSPENDED. Only from cycle_begin. */
void cr__sched_suspend(cr_sched *s, job *j, int64_t now_ns, const char *reason);

struct cr_sched {
    cr_sched_config cfg;
    const cr__sched_policy_ops *pol; /* cfg.policy's table */
    gtype types[CR_SCHED_MAX_TYPES];
    int ntypes;
    node *nodes;
    uint32_t nnodes, cnodes;
    uint32_t *ntab; /* node name hash: node index + 1, 0 = empty */
    uint32_t ntabcap;
    nt *nts;
    uint32_t nnt, cnt;
    rack_rec *racks;
    int nracks, cracks;
    tenant_rec *tenants;
    int ntenants, ctenants;
    int ntree;   /* tenants with a parent: 0 keeps the flat rules exactly */
    int nlimits; /* limit or lending-limit entries set: 0 skips their checks */
    /* job table: open addressing on id */
    job **tab;
    size_t tabcap, njobs;
    /* the queue order, kept between cycles in classes (sched_queue.c), the
     * classes' order this cycle (qord) and the walk's place in it; removed
     * jobs wait in grave for the next cycle (s->fresh may point at them) */
    struct qclass *qcls;
    uint32_t nqcls, cqcls;
    uint32_t *qord;
    uint32_t nqord, cqord, qwalk, qgroup_end;
    /* pending jobs by GPUs (MIG jobs not), by time limit (> 0), by priority
     * (highest first) */
    job **mheap[3];
    uint32_t nmheap[3], cmheap[3];
    uint32_t nmig_pending;
    /* mig_reclaim: the type had no idle dynamic MIG GPU at this cycle and
     * decision count (no need to look again until something started) */
    uint64_t recl_cycle[CR_SCHED_MAX_TYPES];
    uint32_t recl_ndec[CR_SCHED_MAX_TYPES];
    job **grave;
    uint32_t ngrave, cgrave;
    job **fresh; /* jobs that became pending since the last cycle */
    uint32_t nfresh, cfresh;
    job **pending;
    uint32_t npending, cpending;
    job **running;
    uint32_t nrunning, crunning;
    job **trun[CR_SCHED_MAX_TYPES]; /* running jobs per type (owned arrays) */
    uint32_t ntrun[CR_SCHED_MAX_TYPES], ctrun[CR_SCHED_MAX_TYPES];
    /* per type: min-heap of running whole-GPU jobs with a time limit, by
     * expected end (start + limit) then id, for reservations */
    job **eheap[CR_SCHED_MAX_TYPES];
    uint32_t neheap[CR_SCHED_MAX_TYPES], ceheap[CR_SCHED_MAX_TYPES];
    /* per type: a lower bound of the priority of running preemptible jobs
     * (lowered at each start, made exact by a scan in may_preempt), so a
     * job no higher skips that scan; vprio_any false = none run */
    int32_t vprio_lb[CR_SCHED_MAX_TYPES];
    bool vprio_any[CR_SCHED_MAX_TYPES];
    int64_t usage_ns; /* time fair-share usage was last accrued to */
    int64_t now_ns;   /* last time seen */
    /* per-cycle output */
    cr_sched_decision *dec;
    uint32_t ndec, cdec;
    char *reasons; /* CR_SCHED_REASON_MAX per decision */
    uint32_t creasons;
    /* scratch */
    cr_sched_slot *plan;
    uint32_t cplan;
    void *scratch;
    struct wcache *wcache; /* wait-or-start lookahead per type (sched_cycle.c) */
    /* LAS victim index per type (sched_victim.c) */
    struct vix *vix[CR_SCHED_MAX_TYPES];
    size_t cscratch;
    cr_sched_stats stats;
    mix mix;         /* recent task sizes (fragmentation-aware sharing) */
    bool host_model; /* some node models CPU or host memory: node-level placement */
    uint64_t host_cpu_max, host_gpu_max; /* largest node CPU and GPU count (scores) */
    uint64_t mark;                       /* charging stamps handed out */
    bool repart_flag; /* set by cr__sched_slots_take when it rewrote a MIG layout */
    /* tests: verify the kept order against a full sort at every cycle;
     * order_bad set on a mismatch (reported by cr_sched_check) */
    bool verify_order, order_bad;
    /* tests: the reference LAS takes its victims from a scan of every
     * running job and walks the whole queue (no victim index, no stop at
     * the last queue): the fast paths must decide exactly as it does */
    /* ROUNDS: when the next round is due (0 = at the next cycle), rounds
     * done, and whether the queue must be rekeyed (leases changed). */
    int64_t round_next_ns;
    uint64_t nrounds;
    bool round_rekey;
    bool ref_scan;
};

/* Is the job a fractional task (part of one shared GPU)? */
static inline bool cr__sched_frac(const job *j)
{
    return j->spec.gpu_milli > 0 || j->spec.gpu_mem_bytes > 0;
}

/* Thousandths of a GPU of mem bytes on a GPU of gmem bytes, rounded up. */
static inline uint32_t cr__sched_mem_milli(uint64_t mem, uint64_t gmem)
{
    if (!gmem || mem >= gmem) {
        return 1000;
    }
    if (gmem > UINT64_MAX / 2000) {                 /* beyond 9 PB: no exact need */
        return (uint32_t)(mem / (gmem / 1000)) + 1; /* mem < gmem: <= 1000 */
    }
    return (uint32_t)((mem * 1000 + gmem - 1) / gmem);
}

/* Relative throughput of a job on a type (1 when the job gave none). */
static inline double cr__sched_tput(const job *j, int t)
{
    return j->tput ? j->tput[t] : 1.0;
}

/* sched_cluster.c */
int cr__sched_rack_get(cr_sched *s, const char *name, const char *spine);
job *cr__sched_job_get(const cr_sched *s, uint64_t id);
void cr__sched_nt_adjust(cr_sched *s, uint32_t n, int type, int delta);
/* The tenant tree (sched_tree.c). need in thousandths of a GPU. */
bool cr__sched_tree_guaranteed(const cr_sched *s, int tenant, int type);
bool cr__sched_tree_quota_room(const cr_sched *s, int tenant, int type, int64_t need);
/* 0 when within every limit up the tree, else the tenant whose limit
 * closes, + 1 (for the reason). */
int cr__sched_tree_limit_block(const cr_sched *s, int tenant, int type, int64_t need);
bool cr__sched_tree_lend_room(const cr_sched *s, int tenant, int type, int64_t need);
void cr__sched_tree_shares(cr_sched *s);
int64_t cr__sched_tree_used(const cr_sched *s, int tenant, int type, bool with_borrowed);
void cr__sched_slots_take(cr_sched *s, job *j, const cr_sched_slot *sl, uint32_t n);
void cr__sched_slots_release(cr_sched *s, job *j);
const mig_prof *cr__sched_mig_find(const cr_sched *s, int type, const char *name);
/* Dynamic MIG: may an instance of pr go at start on g by destroying idle
 * instances (no busy slice in its range; the compute of what remains and
 * of it fits)? (sched_place.c) */
bool cr__sched_mig_dyn_ok(const gtype *t, const gpu *g, int start, const mig_prof *pr);
/* Does the GPU's fixed MIG layout hold an instance at start of that size? */
bool cr__sched_mig_fixed_has(const gpu *g, int start, int mem, int compute);
void cr__sched_accrue(cr_sched *s, int64_t now_ns);
int64_t cr__sched_job_attained(const job *j, int64_t now_ns);
void cr__sched_job_stop(cr_sched *s, job *j, int64_t now_ns, bool lose_work);
/* Expected end of a running job (start + time limit); INT64_MAX if none. */
int64_t cr__sched_job_end(const job *j);
/* Does heap entry a end before b? */
bool cr__sched_end_less(const job *a, const job *b);
void cr__sched_job_start(cr_sched *s, job *j, int type, const cr_sched_slot *sl, uint32_t n,
                         int64_t now_ns, bool borrowed);

/* sched_place.c: find a placement for n_gpus of type (not committed); 0,
 * or CR_ENOSPC when there is not enough free capacity, CR_EAGAIN when it
 * is free but not in the shape asked. Result in s->plan. */
int cr__sched_plan(cr_sched *s, const job *j, int type, uint32_t *n_out);
/* Whether job j may use node n at all (its node mask, exclusivity, room
 * for its CPU and host memory). */
bool cr__sched_node_ok(const cr_sched *s, const job *j, uint32_t n);
/* Append cnt free whole GPUs of the type from node n to s->plan at *pos:
 * best-fit NVLink domain first. */
void cr__sched_pick_gpus(cr_sched *s, uint32_t n, int type, uint32_t cnt, uint32_t *pos);

/* sched_share.c: place a fractional task (result in s->plan[0]); 0,
 * CR_ENOSPC when no shareable GPU has room. */
int cr__sched_plan_share(cr_sched *s, const job *j, int type);
/* Thousandths a fractional task holds on a GPU (compute or memory share). */
uint32_t cr__sched_share_milli(const job *j, const gpu *g);
/* Note a task's size in the recent mix. */
void cr__sched_mix_note(cr_sched *s, const cr_sched_job_spec *sp);
/* Does any shareable GPU of the type exist (healthy, UP node)? */
bool cr__sched_share_any(const cr_sched *s, int type);

/* sched_share.c: node-level placement of a single-node task when the
 * cluster models host resources (s->host_model): 0 with s->plan filled
 * (*n_out slots), CR_ENOSPC when no node has room. */
int cr__sched_plan_host(cr_sched *s, const job *j, int type, uint32_t *n_out);
/* Does node n have room for cpu and mem besides what it holds? */
static inline bool cr__sched_host_fits(const node *nd, uint64_t cpu, uint64_t mem)
{
    return (!nd->cpu_total || nd->cpu_used + cpu <= nd->cpu_total) &&
           (!nd->mem_total || nd->mem_used + mem <= nd->mem_total);
}

/* sched_hetero.c: set hetero_type (and hcycle) for the window of "auto"
 * jobs at the head of the queue; every other job is HT_FREE this cycle. */
void cr__sched_hetero_assign(cr_sched *s, cr_rng *rng);

/* HETERO target of a job in this cycle. */
static inline int cr__sched_hetero_of(const cr_sched *s, const job *j)
{
    return j->hcycle == s->stats.cycles ? j->hetero_type : HT_FREE;
}

/* sched_queue.c: the queue order kept between cycles. */
void cr__sched_queue_enter(cr_sched *s, job *j);         /* j became pending */
void cr__sched_queue_leave(cr_sched *s, job *j);         /* j stopped being pending */
uint32_t cr__sched_queue_min_gpus(const cr_sched *s);    /* non-MIG; UINT32_MAX if none */
int64_t cr__sched_queue_min_limit(const cr_sched *s);    /* > 0; INT64_MAX if none */
int32_t cr__sched_queue_max_priority(const cr_sched *s); /* INT32_MIN if none */
void cr__sched_queue_drop(cr_sched *s, job *j);          /* clear its entry in the order */
void cr__sched_queue_free(cr_sched *s);
/* Bring the order up to date for a cycle at now_ns. */
void cr__sched_order(cr_sched *s, int64_t now_ns);
int cr__sched_las_queue_of(const cr_sched *s, int64_t attained);
/* LAS: a pending job's queue now (starving jobs in queue 0). */
int cr__sched_las_queue_now(const cr_sched *s, const job *j, int64_t now_ns);
/* Jobs whose class key changed since they entered it move (LAS
 * starvation; rounds' leases): the first class (key 0) stays unless all. */
void cr__sched_queue_rekey(cr_sched *s, int64_t now_ns, bool all);
/* Walk the queue in order: start, then next until NULL (one walk at a
 * time; the jobs it returns may have started since it was set up). */
void cr__sched_walk_start(cr_sched *s);
job *cr__sched_walk_next(cr_sched *s);
/* Does the walk visit the pending jobs as a full sort by key would? */
bool cr__sched_order_verify(cr_sched *s, int64_t now_ns);

/* sched_victim.c: LAS preemption victims by queue and work lost. A victim
 * candidate as preemption ranks it (cr__sched_vitem_cmp: least work lost,
 * then lower priority, later start, lower id). */
typedef struct cr__vitem {
    int64_t lost;
    int32_t prio;
    int64_t start;
    uint64_t id;
    job *j;
} cr__vitem;
typedef struct cr__vix_iter cr__vix_iter;
int cr__sched_vitem_cmp(const cr__vitem *a, const cr__vitem *b);
void cr__sched_vix_add(cr_sched *s, job *j); /* j started (after its slots are set) */
void cr__sched_vix_del(cr_sched *s, job *j); /* j is stopping (before its slots go) */
void cr__sched_vix_free(cr_sched *s);
/* Begin a walk of the victims of type for a LAS job in queue jq at now_ns:
 * the preemptible running jobs of a worse queue that did not start this
 * cycle and ran min_runtime_before_preempt_ns, in cr__sched_vitem_cmp
 * order. OUT *out: free with cr__sched_vix_end; OUT *gpus_out: at least
 * their GPUs. CR_EINVAL when the index cannot answer (not LAS, nothing of
 * the type ran, the clock went back): scan instead. */
int cr__sched_vix_begin(cr_sched *s, int type, int jq, int64_t now_ns, cr__vix_iter **out,
                        uint64_t *gpus_out);
bool cr__sched_vix_next(const cr_sched *s, cr__vix_iter *it, cr__vitem *out);
void cr__sched_vix_end(cr__vix_iter *it);

#endif
