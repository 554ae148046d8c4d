#include "cr_autoscale.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_time.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct sample {
    int64_t time_ns; /* when it was recorded */
    cr_as_sample s;  /* the load */
} sample;

struct cr_autoscaler {
    cr_as_config cfg;             /* copied at new/configure */
    sample *samples;              /* oldest first, pruned past the stable window */
    size_t len;                   /* samples in use */
    size_t cap;                   /* samples allocated */
    int64_t last_ns;              /* time of the newest sample; INT64_MIN before any */
    int64_t first_ns;             /* time of the first sample ever; INT64_MIN before any */
    int64_t last_active_ns;       /* newest sample with load, or activation */
    bool activated;               /* activation seen since the last decision */
    bool panic;                   /* in panic mode */
    int64_t last_panic_signal_ns; /* newest decision whose panic window asked for panic */
};

void cr_as_config_default(cr_as_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->min_replicas = 1;
    cfg->max_replicas = 1;
    cfg->target_concurrency = 1.0;
    cfg->target_p95_ms = 0;
    cfg->stable_window_ns = 60 * CR_NS_PER_SEC;
    cfg->panic_window_ns = 6 * CR_NS_PER_SEC;
    cfg->panic_threshold = 2.0;
    cfg->max_scale_up_rate = 10.0;
    cfg->max_scale_down_rate = 2.0;
    cfg->tolerance = 0.1;
    cfg->scale_to_zero = false;
    cfg->to_zero_grace_ns = 30 * CR_NS_PER_SEC;
}

static int fail(char *err, size_t err_len, const char *msg)
{
    if (err && err_len) {
        snprintf(err, err_len, "%s", msg);
    }
    return CR_EINVAL;
}

int cr_as_config_check(const cr_as_config *c, char *err, size_t err_len)
{
    if (c->min_replicas < 0) {
        return fail(err, err_len, "min_replicas: must be >= 0");
    }
    if (c->max_replicas < 1 || c->max_replicas < c->min_replicas) {
        return fail(err, err_len, "max_replicas: must be >= 1 and >= min_replicas");
    }
    if (!(c->target_p95_ms > 0) &&
        !(c->target_concurrency > 0 && isfinite(c->target_concurrency))) {
        return fail(err, err_len, "target: needs concurrency > 0 or p95_ms > 0");
    }
    if (!isfinite(c->target_p95_ms) || c->target_p95_ms < 0) {
        return fail(err, err_len, "target_p95_ms: must be finite and >= 0");
    }
    if (c->stable_window_ns <= 0 || c->panic_window_ns <= 0 ||
        c->panic_window_ns > c->stable_window_ns) {
        return fail(err, err_len, "panic_window: must be > 0 and <= stable_window");
    }
    if (!(c->panic_threshold >= 1.0) || !isfinite(c->panic_threshold)) {
        return fail(err, err_len, "panic_threshold: must be >= 1");
    }
    if (!(c->max_scale_up_rate > 1.0) || !isfinite(c->max_scale_up_rate)) {
        return fail(err, err_len, "max_scale_up_rate: must be > 1");
    }
    if (!(c->max_scale_down_rate > 1.0) || !isfinite(c->max_scale_down_rate)) {
        return fail(err, err_len, "max_scale_down_rate: must be > 1");
    }
    if (!(c->tolerance >= 0 && c->tolerance < 1)) {
        return fail(err, err_len, "tolerance: must be in [0, 1)");
    }
    if (c->to_zero_grace_ns < 0) {
        return fail(err, err_len, "to_zero_grace: must be >= 0");
    }
    return 0;
}

cr_autoscaler *cr_autoscaler_new(const cr_as_config *cfg)
{
    if (cr_as_config_check(cfg, NULL, 0) != 0) {
        return NULL;
    }
    cr_autoscaler *as = cr_calloc(1, sizeof *as);
    as->cfg = *cfg;
    as->last_ns = INT64_MIN;
    as->first_ns = INT64_MIN;
    as->last_active_ns = INT64_MIN;
    as->last_panic_signal_ns = INT64_MIN;
    return as;
}

void cr_autoscaler_free(cr_autoscaler *as)
{
    if (!as) {
        return;
    }
    free(as->samples);
    free(as);
}

int cr_autoscaler_configure(cr_autoscaler *as, const cr_as_config *cfg)
{
    if (cr_as_config_check(cfg, NULL, 0) != 0) {
        return CR_EINVAL;
    }
    as->cfg = *cfg;
    return 0;
}

static bool has_load(const cr_as_sample *s)
{
    return s->concurrency > 0 || s->rps > 0;
}

/* Drop samples that fell out of the stable window ending at now_ns. */
static void prune(cr_autoscaler *as, int64_t now_ns)
{
    int64_t horizon = now_ns - as->cfg.stable_window_ns;
    size_t drop = 0;
    while (drop < as->len && as->samples[drop].time_ns <= horizon) {
        drop++;
    }
    if (drop) {
        memmove(as->samples, as->samples + drop, (as->len - drop) * sizeof *as->samples);
        as->len -= drop;
    }
}

int cr_autoscaler_record(cr_autoscaler *as, int64_t now_ns, const cr_as_sample *s)
{
    if (now_ns < as->last_ns || !isfinite(s->concurrency) || s->concurrency < 0 ||
        !isfinite(s->rps) || s->rps < 0 || !isfinite(s->p95_ms)) {
        return CR_EINVAL;
    }
    prune(as, now_ns);
    CR_GROW(as->samples, as->len, as->cap);
    as->samples[as->len].time_ns = now_ns;
    as->samples[as->len].s = *s;
    as->len++;
    as->last_ns = now_ns;
    if (as->first_ns == INT64_MIN) {
        as->first_ns = now_ns;
    }
    if (has_load(s)) {
        as->last_active_ns = now_ns;
    }
    return 0;
}

void cr_autoscaler_activate(cr_autoscaler *as, int64_t now_ns)
{
    as->activated = true;
    if (now_ns > as->last_active_ns) {
        as->last_active_ns = now_ns;
    }
    if (as->first_ns == INT64_MIN) {
        as->first_ns = now_ns;
    }
}

typedef struct window {
    size_t count;       /* samples in the window */
    double concurrency; /* mean concurrency */
    double p95_ms;      /* mean p95 over samples that carry one with traffic; -1 if none */
} window;

static window window_mean(const cr_autoscaler *as, int64_t now_ns, int64_t span_ns)
{
    window w = {0, 0, -1};
    double csum = 0, psum = 0;
    size_t pcount = 0;
    for (size_t i = as->len; i-- > 0;) {
        const sample *sm = &as->samples[i];
        if (sm->time_ns <= now_ns - span_ns) {
            break;
        }
        if (sm->time_ns > now_ns) {
            continue;
        }
        w.count++;
        csum += sm->s.concurrency;
        if (sm->s.p95_ms >= 0 && has_load(&sm->s)) {
            psum += sm->s.p95_ms;
            pcount++;
        }
    }
    if (w.count) {
        w.concurrency = csum / (double)w.count;
    }
    if (pcount) {
        w.p95_ms = psum / (double)pcount;
    }
    return w;
}

static int32_t clamp_count(double d)
{
    if (!(d > 0)) {
        return 0;
    }
    if (d > 1e6) {
        return 1000000;
    }
    return (int32_t)ceil(d - 1e-9);
}

/* Replicas the window's load asks for, unrounded; base is the count serving now. */
static double desired_for(const cr_autoscaler *as, const window *w, int32_t base, char *why,
                          size_t why_len)
{
    const cr_as_config *c = &as->cfg;
    if (c->target_p95_ms > 0) {
        if (w->concurrency <= 0 && w->p95_ms < 0) {
            snprintf(why, why_len, "no traffic");
            return 0;
        }
        if (w->p95_ms < 0) {
            snprintf(why, why_len, "concurrency %.1f, no latency measured", w->concurrency);
            return base > 0 ? (double)base : 1.0;
        }
        int32_t b = base > 0 ? base : 1;
        snprintf(why, why_len, "%s %.0f ms against a target of %.0f ms on %d replica(s)",
                 c->signal[0] ? c->signal : "p95", w->p95_ms, c->target_p95_ms, (int)b);
        return (double)b * w->p95_ms / c->target_p95_ms;
    }
    snprintf(why, why_len, "concurrency %.1f against a target of %.1f per replica", w->concurrency,
             c->target_concurrency);
    return w->concurrency / c->target_concurrency;
}

const char *cr_as_action_name(int action)
{
    switch (action) {
    case CR_AS_HOLD:
        return "hold";
    case CR_AS_SCALE_UP:
        return "scale_up";
    case CR_AS_SCALE_DOWN:
        return "scale_down";
    case CR_AS_TO_ZERO:
        return "to_zero";
    case CR_AS_FROM_ZERO:
        return "from_zero";
    default:
        return "unknown";
    }
}

static int32_t imax(int32_t a, int32_t b)
{
    return a > b ? a : b;
}

static int32_t imin(int32_t a, int32_t b)
{
    return a < b ? a : b;
}

/*
 * The decision, in order: activation from zero; no data yet (hold); the
 * stable and panic desired counts; entering or leaving panic; tolerance;
 * the bounded step; scale to zero only after the idle period; min/max last,
 * so a changed bound always wins over the step limit.
 */
int cr_autoscaler_decide(cr_autoscaler *as, int64_t now_ns, int32_t current, int32_t ready,
                         cr_as_decision *out)
{
    if (current < 0 || ready < 0) {
        return CR_EINVAL;
    }
    const cr_as_config *c = &as->cfg;
    prune(as, now_ns);
    cr_as_decision d;
    memset(&d, 0, sizeof d);
    char swhy[128], pwhy[128];
    window sw = window_mean(as, now_ns, c->stable_window_ns);
    window pw = window_mean(as, now_ns, c->panic_window_ns);
    d.stable_load = sw.concurrency;
    d.panic_load = pw.concurrency;
    int32_t base = ready > 0 ? ready : current;
    double stable_raw = desired_for(as, &sw, base, swhy, sizeof swhy);
    double panic_raw = desired_for(as, &pw, base, pwhy, sizeof pwhy);
    int32_t stable_d = clamp_count(stable_raw);
    int32_t panic_d = clamp_count(panic_raw);
    int32_t want = current;
    bool activated = as->activated;
    as->activated = false;

    if (current == 0) {
        bool load = activated || pw.concurrency > 0 || sw.concurrency > 0;
        if (load) {
            want = imax(1, imax(panic_d, c->min_replicas));
            d.desired = imin(want, c->max_replicas);
            d.action = CR_AS_FROM_ZERO;
            snprintf(d.reason, sizeof d.reason,
                     "activation: %s at zero replicas; starting %d replica(s)",
                     activated ? "a request is held by the gateway" : pwhy, (int)d.desired);
            *out = d;
            return 0;
        }
        if (c->min_replicas > 0) {
            d.desired = imin(c->min_replicas, c->max_replicas);
            d.action = CR_AS_FROM_ZERO;
            snprintf(d.reason, sizeof d.reason, "below min_replicas %d: starting %d replica(s)",
                     (int)c->min_replicas, (int)d.desired);
            *out = d;
            return 0;
        }
        d.desired = 0;
        d.action = CR_AS_HOLD;
        snprintf(d.reason, sizeof d.reason, "idle at zero replicas");
        *out = d;
        return 0;
    }

    char why[200];
    if (sw.count == 0) {
        want = current;
        snprintf(why, sizeof why, "no load samples in the last %ds",
                 (int)(c->stable_window_ns / CR_NS_PER_SEC));
    } else {
        /* Panic: the short window asks for panic_threshold x what runs now. */
        if ((double)panic_d >= c->panic_threshold * (double)current) {
            as->last_panic_signal_ns = now_ns;
            as->panic = true;
        } else if (as->panic && now_ns - as->last_panic_signal_ns >= c->stable_window_ns) {
            as->panic = false;
        }
        if (as->panic) {
            want = imax(current, imax(panic_d, stable_d));
            snprintf(why, sizeof why, "panic: %ds window %s asks for %d (>= %.1fx of %d)",
                     (int)(c->panic_window_ns / CR_NS_PER_SEC), pwhy, (int)panic_d,
                     c->panic_threshold, (int)current);
        } else {
            want = stable_d;
            snprintf(why, sizeof why, "%ds window %s asks for %d",
                     (int)(c->stable_window_ns / CR_NS_PER_SEC), swhy, (int)stable_d);
            double ratio = stable_raw / (double)current;
            if (want > 0 && fabs(ratio - 1.0) <= c->tolerance) {
                want = current;
            }
        }
    }
    d.panic = as->panic;

    /* Bounded steps. */
    char step[96] = "";
    int32_t up_limit = clamp_count(c->max_scale_up_rate * (double)current);
    int32_t down_limit = (int32_t)floor((double)current / c->max_scale_down_rate);
    if (want > up_limit) {
        want = up_limit;
        snprintf(step, sizeof step, "; step limited to %d (max scale-up rate %.1fx)", (int)want,
                 c->max_scale_up_rate);
    } else if (want < down_limit) {
        want = down_limit;
        snprintf(step, sizeof step, "; step limited to %d (max scale-down rate %.1fx)", (int)want,
                 c->max_scale_down_rate);
    }

    /* Zero only after a whole idle period. */
    char zero[128] = "";
    if (want == 0) {
        int64_t idle_needed =
            c->stable_window_ns > c->to_zero_grace_ns ? c->stable_window_ns : c->to_zero_grace_ns;
        int64_t since = as->last_active_ns != INT64_MIN ? as->last_active_ns : as->first_ns;
        bool idle_long = since != INT64_MIN && now_ns - since >= idle_needed;
        if (!(c->scale_to_zero && c->min_replicas == 0 && idle_long)) {
            want = 1;
            if (c->scale_to_zero && c->min_replicas == 0) {
                snprintf(zero, sizeof zero, "; keeping 1 until idle for %ds",
                         (int)(idle_needed / CR_NS_PER_SEC));
            }
        } else {
            snprintf(zero, sizeof zero, "; idle for %ds", (int)((now_ns - since) / CR_NS_PER_SEC));
        }
    }

    char bound[64] = "";
    if (want < c->min_replicas) {
        want = c->min_replicas;
        snprintf(bound, sizeof bound, "; raised to min_replicas %d", (int)want);
    } else if (want > c->max_replicas) {
        want = c->max_replicas;
        snprintf(bound, sizeof bound, "; capped at max_replicas %d", (int)want);
    }

    d.desired = want;
    if (want == current) {
        d.action = CR_AS_HOLD;
    } else if (want == 0) {
        d.action = CR_AS_TO_ZERO;
    } else {
        d.action = want > current ? CR_AS_SCALE_UP : CR_AS_SCALE_DOWN;
    }
    snprintf(d.reason, sizeof d.reason, "%s %d -> %d: %s%s%s%s", cr_as_action_name(d.action),
             (int)current, (int)want, why, step, zero, bound);
    *out = d;
    return 0;
}
