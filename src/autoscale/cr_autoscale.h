/*
 * cr_autoscale.h - the autoscaling policy for inference services.
 *
 * Target tracking in the manner of Knative's KPA. The caller feeds samples
 * of a service's load (concurrency = requests in flight plus those held by
 * the gateway, request rate, p95 latency) and asks for a decision; the
 * policy answers a desired replica count and the reason in words, which the
 * controller writes to the service's events.
 *
 *   - Stable window (default 60 s): the desired count comes from the mean
 *     load over this window, so short dips do not shed replicas.
 *   - Panic window (default 6 s): when the mean over this short window asks
 *     for at least panic_threshold (default 2x) the current replicas, the
 *     policy panics: it scales on the short window and never scales down
 *     until a whole stable window has passed without a panic signal.
 *   - Bounded steps: one decision moves up to at most ceil(max_up_rate x
 *     current) and down to at least floor(current / max_down_rate).
 *   - min/max replicas; with min_replicas == 0 and scale_to_zero set, a
 *     service idle (no load at all) for max(stable window, to_zero_grace)
 *     goes to zero, and any load seen at zero replicas (the gateway holds
 *     the request and reports it as concurrency, or the caller calls
 *     cr_autoscaler_activate) brings it back to at least one at once.
 *   - Targets: concurrency per replica, or a p95 latency (or TTFT) target
 *     tracked proportionally (desired = ready x observed / target), with a
 *     tolerance band (default 10%) inside which the count holds.
 *
 * Purity: no I/O, no clock, no threads, no globals. Every function takes
 * now_ns from the caller, so tests run in virtual time and the controller in
 * real time with the same code. Samples must come in non-decreasing time
 * order (an older sample is rejected with CR_EINVAL). Not thread-safe: one
 * cr_autoscaler per service, used by one thread.
 */
#ifndef CR_AUTOSCALE_H
#define CR_AUTOSCALE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cr_autoscaler cr_autoscaler;

typedef struct cr_as_config {
    int32_t min_replicas;       /* >= 0 */
    int32_t max_replicas;       /* >= max(1, min_replicas) */
    double target_concurrency;  /* in-flight requests per replica; > 0 unless p95 target */
    double target_p95_ms;       /* p95 latency / TTFT target; used when > 0 */
    int64_t stable_window_ns;   /* default 60 s */
    int64_t panic_window_ns;    /* default 6 s; <= stable window */
    double panic_threshold;     /* panic when short-window desired >= this x current; default 2 */
    double max_scale_up_rate;   /* one step up to ceil(rate x current); default 10 */
    double max_scale_down_rate; /* one step down to floor(current / rate); default 2 */
    double tolerance;           /* hold while |desired/current - 1| <= this; default 0.1 */
    bool scale_to_zero;         /* allow 0 replicas when min_replicas == 0 */
    int64_t to_zero_grace_ns;   /* idle this long (at least a stable window) before 0 */
    char signal[24];            /* what the latency target measures, for the reason ("" "p95") */
} cr_as_config;

/* Fill *cfg with the defaults above (min 1, max 1, concurrency target 1). */
void cr_as_config_default(cr_as_config *cfg);
/* Check a config; returns 0 or CR_EINVAL with a message naming the field in
 * err (err may be NULL). */
int cr_as_config_check(const cr_as_config *cfg, char *err, size_t err_len);

typedef struct cr_as_sample {
    double concurrency; /* requests in flight plus held, summed over the service */
    double rps;         /* requests per second completed */
    double p95_ms;      /* p95 latency over the sample period; < 0 when unknown */
} cr_as_sample;

enum cr_as_action {
    CR_AS_HOLD = 0,   /* keep the current count */
    CR_AS_SCALE_UP,   /* desired > current */
    CR_AS_SCALE_DOWN, /* desired < current, > 0 */
    CR_AS_TO_ZERO,    /* desired == 0 */
    CR_AS_FROM_ZERO,  /* current == 0, desired > 0: activation */
};

typedef struct cr_as_decision {
    int32_t desired;    /* replicas the service should have */
    int action;         /* enum cr_as_action */
    bool panic;         /* in panic mode at this decision */
    double stable_load; /* the stable-window mean the decision used */
    double panic_load;  /* the panic-window mean */
    char reason[320];   /* the decision in words, for the service's events */
} cr_as_decision;

/* Returned new (free with cr_autoscaler_free); cfg is copied. NULL when the
 * config fails cr_as_config_check. */
cr_autoscaler *cr_autoscaler_new(const cr_as_config *cfg);
void cr_autoscaler_free(cr_autoscaler *as);
/* Replace the config (e.g. the user changed min/max); keeps the samples.
 * Returns 0 or CR_EINVAL. */
int cr_autoscaler_configure(cr_autoscaler *as, const cr_as_config *cfg);

/* Record one load sample at now_ns. Returns 0, or CR_EINVAL for a sample
 * older than the last one or with a negative or non-finite field. */
int cr_autoscaler_record(cr_autoscaler *as, int64_t now_ns, const cr_as_sample *s);
/* The activation signal: a request arrived for a service at zero replicas. */
void cr_autoscaler_activate(cr_autoscaler *as, int64_t now_ns);

/*
 * Decide at now_ns for a service with `current` replicas (scheduled, ready
 * or not) of which `ready` serve traffic. Writes *out and returns 0, or
 * CR_EINVAL for negative counts. The decision's desired count is what the
 * controller should set; HOLD means leave it.
 */
int cr_autoscaler_decide(cr_autoscaler *as, int64_t now_ns, int32_t current, int32_t ready,
                         cr_as_decision *out);

/* "hold", "scale_up", ... for logs and events. */
const char *cr_as_action_name(int action);

#endif
