/*
 * sim_int.h - private contract shared by the files of the simulator role.
 *
 * The simulator replays a workload (a list of jobs read from a trace or
 * generated) on a cluster through the scheduler core (src/sched) in virtual
 * time. It is split by responsibility:
 *
 *   sim_heap.c    the event queue: a binary heap ordered by (time, sequence),
 *                 so events at the same instant pop in the order they were
 *                 pushed and a run is reproducible bit for bit;
 *   sim_tput.c    Gavel's simulation_throughputs.json (steps/s per model,
 *                 scale factor and GPU type);
 *   sim_trace.c   trace readers (Gavel .trace, Tiresias CSV, native) and the
 *                 synthetic generator (Poisson arrivals, Philly-like mix);
 *   sim_engine.c  the event loop that drives the scheduler;
 *   sim_report.c  metrics and the table / JSON / CSV / HTML reports;
 *   sim_rounds.c  the 'rounds' policy: time-shared rounds, leases and
 *                 suspend/resume, its own event loop (sched has no resume);
 *   sim_main.c    the command line.
 *
 * Work model: a job carries an amount of work (steps, or seconds on a
 * reference GPU) and a rate per cluster GPU type (work units per second for
 * the whole gang); its runtime on type t is work / rate[t]. A rate of 0 means
 * the job cannot run on that type. Time is int64_t nanoseconds throughout.
 *
 * Nothing here is thread-safe; one simulation owns all of its state. No
 * mutable globals: every function takes its context.
 */
#ifndef CR_SIM_INT_H
#define CR_SIM_INT_H

#include "cr_rng.h"
#include "cr_catalog.h"
#include "cr_sched.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CR_SIM_MAX_TYPES 16 /* distinct GPU types in one simulated cluster */
#define CR_SIM_NAME_MAX  48 /* GPU type, model and tenant names */

/* ---------------------------------------------------------------- events */

enum cr__sim_ev_kind {
    CR_SIM_EV_ARRIVE = 0, /* a = job index */
    CR_SIM_EV_FINISH,     /* a = job index, b = run epoch (stale if it differs) */
    CR_SIM_EV_FAIL,       /* a = node index */
    CR_SIM_EV_REPAIR,     /* a = node index */
    CR_SIM_EV_TICK,       /* periodic scheduling round / sample */
    CR_SIM_EV_BOOT,       /* a = cloud node index: its boot is over */
    CR_SIM_EV_POOL,       /* the cloud pool looks again (a job's pending time, an idle time) */
};

typedef struct cr__sim_ev {
    int64_t t_ns; /* virtual time of the event */
    uint64_t seq; /* push order: breaks ties between equal times, stably */
    int kind;     /* enum cr__sim_ev_kind */
    int64_t a;    /* kind-specific argument */
    int64_t b;    /* kind-specific argument */
} cr__sim_ev;

typedef struct cr__sim_heap {
    cr__sim_ev *ev;    /* heap array, ev[0] is the earliest */
    size_t len;        /* events queued */
    size_t cap;        /* slots allocated */
    uint64_t next_seq; /* sequence number of the next push */
} cr__sim_heap;

void cr__sim_heap_init(cr__sim_heap *h);
void cr__sim_heap_fini(cr__sim_heap *h);
void cr__sim_heap_push(cr__sim_heap *h, int64_t t_ns, int kind, int64_t a, int64_t b);
/* Pop the earliest event into *out; returns false when empty. */
bool cr__sim_heap_pop(cr__sim_heap *h, cr__sim_ev *out);
/* The earliest event without removing it, or NULL. */
const cr__sim_ev *cr__sim_heap_peek(const cr__sim_heap *h);

/* -------------------------------------------------------- throughput table */

/* One row: a (model, scale factor) with its gang throughput per GPU type. */
typedef struct cr__sim_tput_row {
    char model[CR_SIM_NAME_MAX * 2];      /* e.g. "ResNet-50 (batch size 64)" */
    int scale;                            /* GPUs in the gang (Gavel's scale factor) */
    double steps_per_s[CR_SIM_MAX_TYPES]; /* per table type; 0 = cannot run */
} cr__sim_tput_row;

typedef struct cr__sim_tput {
    char types[CR_SIM_MAX_TYPES][CR_SIM_NAME_MAX]; /* upper-case type names ("V100") */
    int ntypes;                                    /* columns in use */
    cr__sim_tput_row *rows;                        /* sorted by (model, scale) */
    size_t nrows;
} cr__sim_tput;

/* Parse Gavel's simulation_throughputs.json text. Returns 0 or CR_EPARSE
 * with a message naming the key in err (borrowed buffer of errlen). */
int cr__sim_tput_parse(const char *text, size_t len, cr__sim_tput *out, char *err, size_t errlen);
int cr__sim_tput_load(const char *path, cr__sim_tput *out, char *err, size_t errlen);
void cr__sim_tput_fini(cr__sim_tput *t);
/* Row for (model, scale) or NULL. */
const cr__sim_tput_row *cr__sim_tput_find(const cr__sim_tput *t, const char *model, int scale);
/* Column of a type name (case-insensitive) or -1. */
int cr__sim_tput_type(const cr__sim_tput *t, const char *type);

/* ---------------------------------------------------------------- workload */

typedef struct cr__sim_job {
    char name[CR_SIM_NAME_MAX];      /* the trace's id for this job */
    char model[CR_SIM_NAME_MAX * 2]; /* workload type for the throughput table, or "" */
    int tenant;                      /* index into the workload's tenants */
    int gpu_count;                   /* GPUs for the whole gang */
    int priority;                    /* higher runs first under 'priority' */
    int type_req;                    /* required cluster type index, or -1 = any */
    char type_name[CR_SIM_NAME_MAX]; /* required type as written ("" = any) */
    bool preemptible;                /* may the scheduler preempt it */
    int64_t submit_ns;               /* arrival time */
    int64_t ckpt_ns;                 /* checkpoint interval (0 = never: failures restart) */
    double work;                     /* steps, or seconds at rate 1 */
    double ref_rate;                 /* rate when no table row applies (work units/s) */
    double rate[CR_SIM_MAX_TYPES];   /* work units/s per cluster type; 0 = cannot run */
    /* Performance-model job (native kind=...): rates come from cr_perf. */
    bool perf;          /* true: resolve rates with the performance model */
    int perf_kind;      /* enum cr_kind */
    int perf_method;    /* enum cr_method */
    int perf_precision; /* enum cr_precision */
    double perf_params; /* model parameters */
    double perf_tokens; /* training tokens */
    double perf_flops;  /* hpc/batch work in FLOPs */
    /* What the advisor believes before it learns (issue 26, --learn): the
     * rates the model (or the table) gives, which `rate` (the truth)
     * departs from under truth= or --truth-spread; the model's tokens/s
     * per type (training perf jobs, else 0) and the workload class
     * (cr_workload_signature; "" = a job the cluster cannot learn from). */
    double model_rate[CR_SIM_MAX_TYPES];
    double model_tok_s[CR_SIM_MAX_TYPES];
    double truth; /* native truth=: measured / model throughput on every type; 0 = none */
    char sig[64];
    /* GPU sharing (native gpu_milli=, mig=): a part of one shareable GPU,
     * or gpu_count MIG instances of a profile; 0 / "" = whole GPUs. */
    uint16_t gpu_milli;
    char mig[16];
} cr__sim_job;

typedef struct cr__sim_workload {
    cr__sim_job *jobs; /* sorted by (submit_ns, input order) */
    size_t njobs;
    size_t cap;
    char (*tenants)[CR_SIM_NAME_MAX]; /* tenant names, in first-seen order */
    size_t ntenants;
    size_t tenants_cap;
} cr__sim_workload;

void cr__sim_workload_init(cr__sim_workload *w);
void cr__sim_workload_fini(cr__sim_workload *w);
/* Index of a tenant name, added when new. */
int cr__sim_workload_tenant(cr__sim_workload *w, const char *name);
/* Append a zeroed job (type_req -1, tenant 0 "default") and return it. */
cr__sim_job *cr__sim_workload_add(cr__sim_workload *w);
/* Stable sort by submit time. */
void cr__sim_workload_sort(cr__sim_workload *w);

/* Readers: each takes the text of one file (borrowed), appends the jobs to
 * w, and on the first error returns CR_EPARSE with err = "FILE:LINE: field
 * 'NAME': why". `tput` (borrowed, may be NULL) supplies Gavel rates. */
int cr__sim_read_gavel(const char *path, const char *text, size_t len, cr__sim_workload *w,
                       char *err, size_t errlen);
int cr__sim_read_tiresias(const char *path, const char *text, size_t len, cr__sim_workload *w,
                          char *err, size_t errlen);
int cr__sim_read_native(const char *path, const char *text, size_t len, cr__sim_workload *w,
                        char *err, size_t errlen);
/* Pick the reader from the file name and content, read the file. */
int cr__sim_read_file(const char *path, const char *format, cr__sim_workload *w, char *err,
                      size_t errlen);

/* The truth of --learn runs (docs/sim.md "Learning"): every training perf
 * job's rate on type t becomes model_rate[t] x its truth= factor, or, with
 * spread > 0, x a factor drawn uniformly in [1 - spread, 1 + spread] per
 * (workload class, GPU type) from seed (one class has one truth on one
 * type, as on a real cluster). spread 0 and no truth=: rates stay the model's. */
void cr__sim_workload_perturb(cr__sim_workload *w, const char (*types)[CR_SIM_NAME_MAX], int ntypes,
                              double spread, uint64_t seed);

/* Synthetic workload like Gavel's generator. */
typedef struct cr__sim_gen {
    size_t njobs;             /* jobs to generate */
    double jobs_per_hour;     /* Poisson arrival rate (0 = all at t=0) */
    uint64_t seed;            /* RNG seed */
    bool multi_gpu;           /* Philly scale factors 1/2/4/8, else all 1 */
    int ntenants;             /* tenants t0..tN-1, assigned uniformly */
    const cr__sim_tput *tput; /* borrowed; models drawn from it when set */
} cr__sim_gen;

int cr__sim_generate(const cr__sim_gen *g, cr__sim_workload *w);

/* Fill rate[] of every job for the cluster types `types` (ntypes names).
 * With tput (borrowed, may be NULL), a job whose (model, gpu_count) has a
 * row gets the row's rates; others get ref_rate on every type. Returns 0, or
 * CR_EINVAL with err naming the job that can run on no type at all.
 * Performance-model jobs get 1/runtime from cr_perf_estimate on the catalog
 * entry of each cluster type (catalog borrowed, may be NULL: then such jobs
 * are an error). */
int cr__sim_workload_resolve(cr__sim_workload *w, const char (*types)[CR_SIM_NAME_MAX], int ntypes,
                             const cr__sim_tput *tput, const cr_catalog *catalog, char *err,
                             size_t errlen);

/* ----------------------------------------------------------------- cluster */

/* How to build the simulated cluster: a cluster file (sched's format) or a
 * shorthand list of GPU types and counts split into nodes and racks. */
typedef struct cr__sim_cluster {
    const char *file_path; /* borrowed; for messages */
    const char *file_text; /* borrowed; NULL = use the shorthand */
    size_t file_len;
    char names[CR_SIM_MAX_TYPES][CR_SIM_NAME_MAX]; /* shorthand: type names */
    int counts[CR_SIM_MAX_TYPES];                  /* shorthand: GPUs per type */
    int ntypes;
    int gpus_per_node;  /* shorthand: GPUs per node (last node may have fewer) */
    int nodes_per_rack; /* shorthand: nodes per leaf switch */
    /* A cloud pool (--cloud, docs/sim.md "Elastic pools"): cloud_nodes
     * nodes of cloud_gpn GPUs of type cloud_name after the static ones,
     * off at the start (booted by the engine's pool), or, with
     * cloud_always, on for the whole run (the static cluster of the same
     * budget). */
    char cloud_name[CR_SIM_NAME_MAX];
    int cloud_nodes, cloud_gpn;
    bool cloud_always;
    int cloud_gpus; /* always on: GPUs in all (the last node may have fewer); 0 nodes x gpn */
} cr__sim_cluster;

/* Parse "v100:36,p100:36,k80:36" into c. Returns 0 or CR_EINVAL with err. */
int cr__sim_cluster_parse_gpus(cr__sim_cluster *c, const char *spec, char *err, size_t errlen);

/* ------------------------------------------------------------------ engine */

typedef struct cr__sim_opts {
    int policy;                       /* cr_sched_policy */
    uint64_t seed;                    /* scheduler tie-break and failure RNG seed */
    bool check;                       /* run cr_sched_check after every event (tests) */
    int backfill;                     /* EASY backfill: 1 on, 0 off, -1 policy default */
    int preemption;                   /* preemption: 1 on, 0 off, -1 policy default */
    int lp;                           /* hetero: 1 GLPK LP, 0 greedy, -1 policy default */
    int wait_faster;                  /* wait-or-start: 1 on, 0 off, -1 policy default */
    int share_policy;                 /* cr_sched_share_policy for fractional tasks */
    uint32_t max_examined;            /* pending jobs examined per cycle at most (0 = all) */
    bool estimates;                   /* give the scheduler exact runtime estimates */
    int64_t mtbf_ns;                  /* per-node mean time between failures (0 = none) */
    int64_t mttr_ns;                  /* time a failed node stays down */
    int64_t interval_ns;              /* minimum time between cycles (0 = at every event) */
    int64_t restart_ns;               /* wall time a (re)started job spends before progress */
    double power_w[CR_SIM_MAX_TYPES]; /* busy power per cluster type, watts */
    double idle_frac;                 /* idle power as a fraction of busy power */
    /* 'rounds' policy (sim_rounds.c); ignored by the others. */
    int64_t round_ns;  /* round length (0 = CR_SIM_ROUND_DEFAULT_NS) */
    int64_t switch_ns; /* suspend/resume cost: wall time a resumed or moved job makes no progress */
    bool no_migrate;   /* rounds: never move a running job to a faster type mid-round */
    bool no_spread;    /* rounds: skip the LP's second stage (leftover capacity) */
    bool no_drain_guard;     /* rounds: no priority for jobs that would set the makespan */
    bool fair_order;         /* rounds: hand out GPUs by owed time share (Gavel's order), not by the
                                estimated time to finish (the default with estimates) */
    int64_t share_window_ns; /* rounds: time accounting window (0 = one round) */
    int64_t mig_reconfig_ns; /* a start that repartitions a dynamic MIG GPU waits
                                this long (--mig-reconfig) */
    /* --learn: each finished training job reports its tokens/s as a
     * corral-metric line; later jobs of its class are scheduled on the
     * model scaled by what was learned (cr_learn_combine), per tenant. */
    bool learn;
    double metric_noise; /* run-to-run spread of the reported tokens/s, +- share */
    /* The cloud pool's scaling (the controller's, docs/pools.md): a job
     * pending cloud_pending_ns that the cloud type can run is demand; nodes
     * boot for the demand the booting and free cloud GPUs do not cover
     * (cloud_boot_ns each); one idle cloud_idle_ns with no demand is
     * turned off. */
    bool cloud;
    int64_t cloud_boot_ns, cloud_idle_ns, cloud_pending_ns;
} cr__sim_opts;

/* Per-job outcome. */
typedef struct cr__sim_jobres {
    int64_t first_start_ns; /* -1 if it never started */
    int64_t finish_ns;      /* -1 if it did not finish */
    int type;               /* type of its last run, -1 if none */
    uint32_t preemptions;   /* preempted by the scheduler */
    uint32_t failures;      /* requeued by node failures */
    double gpu_s;           /* GPU-seconds held */
    double lost_gpu_s;      /* GPU-seconds of work lost to preemption/failure */
    double alone_s;         /* runtime alone on the best type */
    double contention;      /* average demand / capacity over its life, >= 1 */
    double pred_err;        /* learnable jobs: |believed - true| / true rate on the type of
                               its first run, as believed at arrival; -1 otherwise */
} cr__sim_jobres;

/* One point of the time series (taken when something changed). */
typedef struct cr__sim_sample {
    int64_t t_ns;
    uint32_t busy;    /* GPUs held by running jobs */
    uint32_t healthy; /* GPUs on nodes that are up */
    uint32_t queue;   /* pending jobs */
    uint32_t running; /* running jobs */
} cr__sim_sample;

typedef struct cr__sim_result {
    char policy[16];
    int ntypes;
    char types[CR_SIM_MAX_TYPES][CR_SIM_NAME_MAX];
    uint32_t type_gpus[CR_SIM_MAX_TYPES];    /* GPUs of each type at the start */
    double busy_gpu_ns[CR_SIM_MAX_TYPES];    /* integral of busy GPUs */
    double healthy_gpu_ns[CR_SIM_MAX_TYPES]; /* integral of healthy GPUs */
    double energy_j[CR_SIM_MAX_TYPES];
    uint64_t starts[CR_SIM_MAX_TYPES]; /* job starts on the type */
    double stranded_gpu_ns;            /* free healthy GPUs while jobs were pending */
    double free_gpu_ns;                /* free healthy GPUs */
    double partial_free_gpu_ns;        /* free GPUs on partly used nodes */
    double total_gpu_ns;               /* healthy GPUs */
    int64_t t0_ns, t_end_ns;           /* first submit, last event */
    size_t njobs;
    cr__sim_jobres *jobs; /* njobs entries, workload order */
    cr__sim_sample *samples;
    size_t nsamples, samples_cap;
    uint64_t cycles, events, node_failures;
    uint64_t frac_starts;   /* starts of fractional tasks (gpu_milli) */
    uint64_t mig_starts;    /* starts of MIG jobs */
    uint64_t mig_reconfigs; /* starts that repartitioned a dynamic MIG GPU */
    double mig_reconfig_s;  /* virtual seconds those starts waited for it */
    size_t nstuck;          /* jobs that never finished */
    char stuck[3][300];     /* "job NAME: the scheduler's pending reason", first 3 */
    int check_errors;       /* invariant violations seen (check mode) */
    char check_msg[256];    /* the first of them */
    double wall_s;          /* host seconds the run took (not in reports) */
    double cloud_gpu_ns;    /* cloud GPU-time bought: from each boot's start to its node's end */
    uint64_t cloud_boots;   /* cloud nodes booted */
    uint32_t cloud_gpus;    /* GPUs of the cloud nodes (at most on at once) */
} cr__sim_result;

/* Build the cluster into a fresh scheduler s (borrowed). */
int cr__sim_cluster_build(const cr__sim_cluster *c, cr_sched *s, char *err, size_t errlen);
/* The cluster's type names in scheduler id order. */
int cr__sim_cluster_types(const cr__sim_cluster *c, char (*types)[CR_SIM_NAME_MAX], int *ntypes,
                          char *err, size_t errlen);
/* Run one simulation; w must be resolved against the cluster's types.
 * *res is filled (free with cr__sim_result_fini). */
int cr__sim_run(const cr__sim_opts *o, const cr__sim_cluster *c, const cr__sim_workload *w,
                cr__sim_result *res, char *err, size_t errlen);
void cr__sim_result_fini(cr__sim_result *r);

/* 'corral sim --inflate ...' (sim_openb.c): the openb trace reader and the
 * inflation experiment; returns the exit code. argv borrowed. */
int cr__sim_inflate_main(int argc, char **argv);
/* Time-based replay of openb files (sim_openb.c): the cluster as cluster
 * file text (*cluster_text, new, shared = share of nodes shareable) and the
 * GPU pods with times as jobs appended to w; *untimed pods had no usable
 * times. 0 or CR_EPARSE/CR_EIO with "FILE:LINE: field 'F': why". */
int cr__sim_openb_load(const char *nodes_path, const char *pods_path, double shared,
                       cr__sim_workload *w, char **cluster_text, size_t *untimed, char *err,
                       size_t errlen);
/* Parse openb node and pod CSV text (borrowed) without running anything:
 * 0 with the GPU and GPU-pod counts, or CR_EPARSE with "nodes:LINE: field
 * 'F': why" / "pods:LINE: ..." in err. For the fuzz target. */
int cr__sim_openb_parse(const char *nodes, size_t nlen, const char *pods, size_t plen,
                        size_t *ngpus, size_t *npods, char *err, size_t errlen);

/* --------------------------------------------------- the 'rounds' policy */

#define CR_SIM_ROUND_DEFAULT_NS   (360 * INT64_C(1000000000)) /* Gavel's 6-minute round */
#define CR_SIM_SWITCH_DEFAULT_NS  (10 * INT64_C(1000000000))  /* suspend + resume of a job */
#define CR_SIM_ROUNDS_LP_MAX_JOBS CR_SCHED_ROUNDS_LP_MAX_JOBS

/* The max-min fairness time-share LP is the scheduler's (cr_sched_rounds_lp,
 * src/sched/sched_rounds_lp.c), shared with its rounds policy. */
/* Run the workload under the 'rounds' policy (time-shared allocation every
 * round, leases, suspend/resume at a modelled cost). Same contract as
 * cr__sim_run; node failures (mtbf) are refused with CR_ENOTSUP. */
int cr__sim_run_rounds(const cr__sim_opts *o, const cr__sim_cluster *c, const cr__sim_workload *w,
                       cr__sim_result *res, char *err, size_t errlen);

/* Default busy power (watts) of a GPU type by name. */
double cr__sim_default_power_w(const char *type);

/* ------------------------------------------------------------------ report */

typedef struct cr__sim_report_opts {
    size_t window_lo, window_hi; /* JCT window: jobs [lo, hi) in arrival order; hi 0 = all */
} cr__sim_report_opts;

/* Summary numbers of one run (seconds unless named otherwise). */
typedef struct cr__sim_summary {
    size_t jobs, finished, measured;
    double jct_avg, jct_p50, jct_p95, jct_p99;
    double queue_avg, queue_p95;
    double makespan;
    double util;     /* busy / healthy GPU-time */
    double stranded; /* free GPU-time while jobs pended / GPU-time */
    double frag;     /* free GPU-time on partly used nodes / free GPU-time */
    double rho_avg, rho_max, rho_frac_unfair; /* Themis finish-time fairness */
    double energy_kwh;
    double lost_gpu_h;
    uint64_t preemptions, failures;
    /* The advisor's error on learnable jobs (pred_err), arrival order. */
    size_t learnable;
    double err_first, err_last; /* mean over the first / last CR_SIM_ERR_WINDOW of them */
    long learned_at;            /* the 1-based learnable job from which the mean error of
                                   the CR_SIM_ERR_WINDOW jobs ending there, and at every
                                   later one, is <= 10%; 0 never */
} cr__sim_summary;

#define CR_SIM_ERR_WINDOW 20

void cr__sim_summarize(const cr__sim_result *r, const cr__sim_workload *w,
                       const cr__sim_report_opts *ro, cr__sim_summary *out);
void cr__sim_report_text(FILE *f, const cr__sim_result *r, const cr__sim_workload *w,
                         const cr__sim_report_opts *ro);
void cr__sim_report_compare(FILE *f, const cr__sim_result *rs, size_t n, const cr__sim_workload *w,
                            const cr__sim_report_opts *ro);
/* JSON text of one run or of several (returned new, free with free()). */
char *cr__sim_report_json(const cr__sim_result *rs, size_t n, const cr__sim_workload *w,
                          const cr__sim_report_opts *ro);
int cr__sim_report_csv(const char *path, const cr__sim_result *rs, size_t n,
                       const cr__sim_workload *w);
int cr__sim_report_html(const char *path, const cr__sim_result *rs, size_t n,
                        const cr__sim_workload *w, const cr__sim_report_opts *ro);

#endif
