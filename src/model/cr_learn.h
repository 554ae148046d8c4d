/*
 * cr_learn.h - the cluster calibrates its own advisor (issue 26).
 *
 * Three pieces, all pure (no I/O, no clock, no globals):
 *
 *  - The metric contract (cr_metric.h, in common: the agent reads it).
 *
 *  - The workload signature: kind, a parameter bucket (half-octaves of
 *    log2 parameters), method, stack and precision, e.g.
 *    "finetune/p8b/lora/megatron/bf16". Observations are kept per
 *    signature x GPU type x GPU count, per tenant (cr_obs).
 *
 *  - The estimator: the log of each run's measured / modelled throughput
 *    is one observation of the model's bias for that class; the estimate
 *    for a new job is the model's figure times exp(r), r the posterior
 *    mean of the bias under a normal prior N(0, PRIOR_SD^2) (the model's
 *    documented ~30% error) and run-to-run noise of the sample's spread
 *    (at least NOISE_SD_MIN). Few runs shrink toward the model; many runs
 *    follow the measurements. Error bars: exp(r +- 1.96 sd).
 *
 * Threading: cr_obs is not locked; its owner (the controller) serialises.
 */
#ifndef CR_LEARN_H
#define CR_LEARN_H

#include "cr_metric.h"
#include "cr_perf.h"

#include <stddef.h>
#include <stdint.h>

#define CR_OBS_KEEP        64    /* observations kept per class (the newest) */
#define CR_OBS_MAX_CLASSES 16384 /* classes held, all tenants (outside input decides how many) */
#define CR_LEARN_PRIOR_SD  0.30  /* prior sd of log(measured / model) */
#define CR_LEARN_NOISE_MIN 0.05  /* floor on the run-to-run sd of the log ratio */

/* The workload class of w ("finetune/p8b/lora/megatron/bf16") into buf;
 * returns buf. */
char *cr_workload_signature(const cr_workload *w, char *buf, size_t len);

/* The estimator's answer for one class. */
typedef struct cr_learned {
    int runs;      /* observations used */
    double factor; /* multiply the model's throughput by this */
    double lo, hi; /* 95% interval of the factor */
    double weight; /* share of the measurements in the estimate, 0..1 */
} cr_learned;

/* Combine log ratios r[0..n-1] (log(measured / model)); n = 0 gives
 * factor 1 and the prior's interval. */
void cr_learn_combine(const double *r, int n, cr_learned *out);

/* Scale an estimate by what was learned (l->runs > 0): training and
 * hpc/batch throughput, time, GPU-hours, energy and cost; serving
 * capacity. The reason gains "calibrated from N runs on this cluster
 * (x1.40, 95% 1.35-1.45)". */
void cr_learn_apply(const cr_learned *l, cr_estimate *e);

/* Observations per (tenant, signature, GPU type, GPU count). */
typedef struct cr_obs cr_obs;

cr_obs *cr_obs_new(void);    /* free with cr_obs_free */
void cr_obs_free(cr_obs *o); /* NULL-safe */
/* Add one log ratio; the oldest beyond CR_OBS_KEEP is dropped. tenant,
 * sig, gpu borrowed (copied). Returns 0, CR_EINVAL (a name too long, a
 * ratio not finite) or CR_ENOSPC (a new class past CR_OBS_MAX_CLASSES;
 * the classes held keep learning). */
int cr_obs_add(cr_obs *o, const char *tenant, const char *sig, const char *gpu, int count,
               double log_ratio);
/* The ratios of one class as the tenant sees it: only its own. Writes up
 * to CR_OBS_KEEP into r and returns how many (0: none). */
int cr_obs_get(const cr_obs *o, const char *tenant, const char *sig, const char *gpu, int count,
               double *r);
/* Number of classes held (all tenants). */
size_t cr_obs_count(const cr_obs *o);
/* Class i: its key parts (borrowed, valid until the next add) and ratios. */
int cr_obs_at(const cr_obs *o, size_t i, const char **tenant, const char **sig, const char **gpu,
              int *count, double *r);

#endif
