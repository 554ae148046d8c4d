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
 * Estimates are cached per distinct (kind, hints, GPU count): a queue of
 * thousands of alike jobs costs one estimate per type. A type registered
 * later (a node of a new model joins) makes every entry recompute on its
 * next use. Everything here belongs to the scheduler thread: no locks.
 */
#ifndef CTL_AUTO_H
#define CTL_AUTO_H

#include "cr_arch.h"
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
} ctl_auto_hints;

/* Hints of a job: gpu_type, mig profile, kind and the `model` object of
 * its spec (may be NULL); all borrowed. Unknown names leave hints inactive. */
void ctl_auto_hints_of(const char *gpu_type, const char *mig, const char *kind, const json_t *model,
                       int gpus, ctl_auto_hints *out);

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
bool ctl_auto_tput(ctl_auto *a, const cr_sched *s, const ctl_auto_hints *h, bool hetero,
                   double *tput, size_t *count);

/* For a job the scheduler finds no type for: "no GPU type in the cluster
 * can run it: L40S: no FP64: 1/64 rate; ..." into buf. Returns false (buf
 * untouched) when the model refused nothing. */
bool ctl_auto_refusal(ctl_auto *a, const cr_sched *s, const ctl_auto_hints *h, char *buf,
                      size_t len);

/* Why the job got `type`, for its "started" event: "auto: L40S, best by
 * cost (advisor: 6.6 h, $5.21)". Empty when h is inactive. */
void ctl_auto_why(ctl_auto *a, const cr_sched *s, const ctl_auto_hints *h, int type, char *buf,
                  size_t len);

#endif
