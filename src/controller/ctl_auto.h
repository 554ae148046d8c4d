/*
 * ctl_auto.h - `gpu_type: "auto"`: the performance model picks the type.
 *
 * For an auto job the controller hands the scheduler a per-type vector
 * (cr_sched_job_spec.tput) built from src/model's estimate of the job on
 * each GPU type of the cluster at the job's GPU count: 0 where the advisor
 * refuses the type (does not fit, lacks FP64/ECC/NVENC, misses the latency
 * targets), else a score. The policies that rank types (priority, las)
 * try the highest score first, so the score follows the advisor's default
 * objective, cost: progress per second over the price of the GPUs used
 * (the advisor's ranking). The hetero policy gets plain throughput
 * (progress per second) instead, which its allocation normalises.
 *
 * The kind implies hard needs the job need not state: visual needs NVENC,
 * hpc needs full-rate FP64 and ECC. A job without hints the model can use
 * (kind batch without `model`, training or inference without
 * `model.params`, or any MIG job) keeps "any type".
 *
 * Learning (issue 26): a training job's estimate on each type is scaled
 * by what its own tenant's jobs of the same class measured there at the
 * same count (ctl_auto_set_learn; docs/model.md "Learning from the
 * cluster"), so the type order, the hetero throughputs and the "started"
 * event's advisor figures follow the cluster's measurements; another
 * tenant's observations are never read. The factor is applied when the
 * job's vector is made (the job enters the queue or is re-specified), not
 * cached: the cache holds the model alone.
 *
 * Estimates are cached per distinct (kind, hints, GPU count): a queue of
 * thousands of alike jobs costs one estimate per type. A type registered
 * later (a node of a new model joins) makes every entry recompute on its
 * next use. Everything here belongs to the scheduler thread: no locks.
 */
#ifndef CTL_AUTO_H
#define CTL_AUTO_H

#include "cr_arch.h"
#include "cr_catalog.h"
#include "cr_learn.h"
#include "cr_sched.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct ctl_auto ctl_auto;

/* What the model needs from a job. A plain value: memset to 0 before
 * filling (it is compared and hashed bytewise). */
typedef struct ctl_auto_hints {
    bool active; /* gpu_type auto and the model can say something */
    int kind;    /* enum cr_kind */
    int method;  /* enum cr_method */
    int precision;
    double params, tokens; /* 0 = the model's defaults */
    int gpus;
    char arch[CR_ARCH_NAME_MAX];  /* model.name (data/models/models.csv), "" = from params */
    int stack, ckpt, micro_batch; /* model.stack, .checkpointing, .micro_batch; 0 = default */
    int global_batch, seq_len;    /* model.global_batch, .seq_len; 0 = default */
} ctl_auto_hints;

/*
 * The plan a job runs with (docs/model.md "The plan in the job"): the
 * advisor's parallelism for the job's kind, count and the type it got.
 * It reaches the job as CORRAL_TP, CORRAL_PP, ... and as ready arguments
 * for the launchers Corral knows (ctl_plan_env). A plain value; tp == 0
 * means no plan (a job without model hints, or one the model cannot plan).
 */
typedef struct ctl_plan {
    int tp, pp, dp, ep, cp;        /* parallel ways; dp = serving replicas */
    int micro_batch, global_batch; /* training: sequences; 0 for serving */
    int ckpt;                      /* training: enum cr_ckpt used, else 0 */
    int serving;                   /* 1: inference (serving flags), 0: training */
    char text[48];                 /* the advisor's plan: "tp4 x pp2 x dp1", "2 x tp4" */
} ctl_plan;

/* Hints of a job: gpu_type, mig profile, kind and the `model` object of
 * its spec (may be NULL); all borrowed. Unknown names leave hints inactive. */
void ctl_auto_hints_of(const char *gpu_type, const char *mig, const char *kind, const json_t *model,
                       int gpus, ctl_auto_hints *out);

/* The same hints for any gpu_type (the plan of a job of a chosen type):
 * active when the model can say something about the job. */
void ctl_auto_plan_hints_of(const char *mig, const char *kind, const json_t *model, int gpus,
                            ctl_auto_hints *out);

/* Loads the catalog (CORRAL_DATA or the source tree's data/) and the
 * default prices with the config's prices (borrowed: {"type": $/GPU-h})
 * over them. Without a catalog, auto means "any type" (logged once).
 * Returned new (free with ctl_auto_free). */
ctl_auto *ctl_auto_new(const json_t *prices);
void ctl_auto_free(ctl_auto *a); /* NULL-safe */

/*
 * The per-type vector of an auto job on the scheduler's current types:
 * writes tput[0 .. *count - 1] (room for CR_SCHED_MAX_TYPES) and returns
 * true; false when the job keeps "any type" (hints inactive, no catalog).
 * hetero: plain throughput instead of the cost score.
 */
bool ctl_auto_tput(ctl_auto *a, const cr_sched *s, const ctl_auto_hints *h, const char *tenant,
                   bool hetero, double *tput, size_t *count);

/* What a tenant's own jobs measured for a workload class (sig, from
 * cr_workload_signature) on the GPU type named gpu at count GPUs: fills
 * *out (cr_learn_combine) and returns its runs, 0 when there are none.
 * Called on the scheduler thread; it must not call back into ctl_auto. */
typedef int (*ctl_auto_learn_fn)(void *ctx, const char *tenant, const char *sig, const char *gpu,
                                 int count, cr_learned *out);
/* Use fn (ctx passed through) for tenants' observations; NULL: the model alone. */
void ctl_auto_set_learn(ctl_auto *a, ctl_auto_learn_fn fn, void *ctx);

/* For a job the scheduler finds no type for: "no GPU type in the cluster
 * can run it: L40S: no FP64: 1/64 rate; ..." into buf. Returns false (buf
 * untouched) when the model refused nothing. */
bool ctl_auto_refusal(ctl_auto *a, const cr_sched *s, const ctl_auto_hints *h, char *buf,
                      size_t len);

/* Why the job got `type`, for its "started" event: "auto: L40S, best by
 * cost (advisor: 6.6 h, $5.21, 2915 tokens/s)", with "; calibrated from 5
 * runs on this cluster (x1.40, 95% 1.36-1.44)" when tenant's own
 * observations scaled it. Empty when h is inactive. */
void ctl_auto_why(ctl_auto *a, const cr_sched *s, const ctl_auto_hints *h, const char *tenant,
                  int type, char *buf, size_t len);

/*
 * Fit check at submit (issue 26): does a job of an explicitly chosen GPU
 * type and count hold its model there? Training and serving kinds with
 * model hints only (plan hints, ctl_auto_plan_hints_of); a serving job is
 * checked on memory alone. Returns 0 when it fits or the model cannot tell
 * (auto/any, a type outside the catalog); else CR_EINVAL with *field
 * "gpus" (the type holds it at a count the advisor names) or "gpu_type"
 * (at no count), and the reason in msg, naming only the count asked.
 * cat, models (may be NULL) borrowed, immutable: any thread.
 */
int ctl_auto_fit_check(const cr_catalog *cat, const cr_arch_catalog *models, const char *gpu_type,
                       const ctl_auto_hints *h, const char **field, char *msg, size_t len);

/* The plan of a job with hints h on the GPU type named `type` (the name
 * its nodes report) at h->gpus GPUs. Returns false (out zeroed) when there
 * is none: hints inactive, a kind without parallelism (visual, hpc,
 * batch), a type outside the catalog, or a request that does not fit. */
bool ctl_auto_plan(const ctl_auto *a, const ctl_auto_hints *h, const char *type, ctl_plan *out);

/* The plan's environment, into env (borrowed object; members set):
 * CORRAL_TP, CORRAL_PP, CORRAL_DP, CORRAL_EP, CORRAL_CP, CORRAL_PLAN and,
 * for training, CORRAL_MICRO_BATCH, CORRAL_GLOBAL_BATCH, CORRAL_MEGATRON_ARGS,
 * CORRAL_NEMO_ARGS, CORRAL_DEEPSPEED_CONFIG; for serving CORRAL_VLLM_ARGS,
 * CORRAL_SGLANG_ARGS, CORRAL_TRTLLM_ARGS. Nothing for a plan with tp 0. */
void ctl_plan_env(const ctl_plan *p, json_t *env);

/* The plan as the job object's "plan" member, and back (from a stored job;
 * false and *p zeroed when v is not a plan). New reference / borrowed. */
json_t *ctl_plan_json(const ctl_plan *p);
bool ctl_plan_from_json(const json_t *v, ctl_plan *p);

#endif
