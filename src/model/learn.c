/* The metric contract, workload signatures, observations and the
 * shrinkage estimator (cr_learn.h; docs/model.md "Learning from the
 * cluster"). */
#include "cr_learn.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "model_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 128

char *cr_workload_signature(const cr_workload *w, char *buf, size_t len)
{
    double p = w->arch.layers > 0 ? w->arch.params : w->params;
    /* Half-octave buckets named by their centre: 7e9 and 8e9 share one
     * ("p8b"), 70e9 is "p64b", 405e9 "p362b". */
    char bucket[24] = "p?";
    if (p > 0) {
        double b = round(2 * log2(p / 1e9)) / 2;
        double c = pow(2, b);
        if (c >= 1) {
            snprintf(bucket, sizeof bucket, "p%.0fb", c);
        } else {
            snprintf(bucket, sizeof bucket, "p%.0fm", c * 1000);
        }
    }
    int train = w->kind == CR_KIND_PRETRAIN || w->kind == CR_KIND_FINETUNE;
    snprintf(buf, len, "%s/%s/%s/%s/%s", cr_kind_name(w->kind), bucket,
             train ? cr_method_name(w->kind == CR_KIND_PRETRAIN ? CR_METHOD_FULL : w->method) : "-",
             cr_stack_name(cr_stack_resolve(w)), cr_precision_name(w->precision));
    return buf;
}

void cr_learn_combine(const double *r, int n, cr_learned *out)
{
    double tau2 = CR_LEARN_PRIOR_SD * CR_LEARN_PRIOR_SD;
    memset(out, 0, sizeof *out);
    out->runs = n > 0 ? n : 0;
    if (n <= 0) {
        out->factor = 1;
        out->lo = exp(-1.96 * CR_LEARN_PRIOR_SD);
        out->hi = exp(1.96 * CR_LEARN_PRIOR_SD);
        return;
    }
    double mean = 0, ss = 0;
    for (int i = 0; i < n; i++) {
        mean += r[i];
    }
    mean /= n;
    for (int i = 0; i < n; i++) {
        ss += (r[i] - mean) * (r[i] - mean);
    }
    double sd = n > 1 ? sqrt(ss / (n - 1)) : 0;
    if (sd < CR_LEARN_NOISE_MIN) {
        sd = CR_LEARN_NOISE_MIN;
    }
    double data_prec = n / (sd * sd), prec = data_prec + 1 / tau2;
    double post = data_prec * mean / prec, post_sd = 1 / sqrt(prec);
    out->factor = exp(post);
    out->lo = exp(post - 1.96 * post_sd);
    out->hi = exp(post + 1.96 * post_sd);
    out->weight = data_prec / prec;
}

void cr_learn_apply(const cr_learned *l, cr_estimate *e)
{
    if (l->runs <= 0 || !e->fits || !(l->factor > 0)) {
        return;
    }
    double f = l->factor;
    e->throughput *= f;
    if (e->time_ns > 0 && e->progress_per_s > 0 && e->step_ns > 0) {
        /* a job of fixed work: faster by f */
        e->time_ns = (int64_t)((double)e->time_ns / f);
        e->step_ns = (int64_t)((double)e->step_ns / f);
        e->progress_per_s *= f;
        e->gpu_hours /= f;
        e->energy_j /= f;
        if (e->cost_usd > 0) {
            e->cost_usd /= f;
        }
        e->mfu *= f;
    }
    size_t u = strlen(e->reason);
    snprintf(e->reason + u, sizeof e->reason - u,
             "; calibrated from %d run%s on this cluster (x%.2f, 95%% %.2f-%.2f)", l->runs,
             l->runs > 1 ? "s" : "", f, l->lo, l->hi);
}

/* ---- observations ---- */

typedef struct obs_class {
    char *tenant, *sig, *gpu;
    int count;
    int n, head; /* ring of the newest CR_OBS_KEEP */
    double r[CR_OBS_KEEP];
} obs_class;

struct cr_obs {
    obs_class *v;
    size_t n, cap;
};

cr_obs *cr_obs_new(void)
{
    return cr_calloc(1, sizeof(cr_obs));
}

void cr_obs_free(cr_obs *o)
{
    if (!o) {
        return;
    }
    for (size_t i = 0; i < o->n; i++) {
        free(o->v[i].tenant);
        free(o->v[i].sig);
        free(o->v[i].gpu);
    }
    free(o->v);
    free(o);
}

static obs_class *find(const cr_obs *o, const char *tenant, const char *sig, const char *gpu,
                       int count)
{
    for (size_t i = 0; i < o->n; i++) {
        obs_class *c = &o->v[i];
        if (c->count == count && !strcmp(c->tenant, tenant) && !strcmp(c->sig, sig) &&
            !strcmp(c->gpu, gpu)) {
            return c;
        }
    }
    return NULL;
}

int cr_obs_add(cr_obs *o, const char *tenant, const char *sig, const char *gpu, int count,
               double log_ratio)
{
    if (!tenant || !sig || !gpu || strlen(tenant) > NAME_MAX_LEN || strlen(sig) > NAME_MAX_LEN ||
        strlen(gpu) > NAME_MAX_LEN || count < 1 || !isfinite(log_ratio) || fabs(log_ratio) > 10) {
        return CR_EINVAL;
    }
    obs_class *c = find(o, tenant, sig, gpu, count);
    if (!c) {
        if (o->n >= CR_OBS_MAX_CLASSES) {
            return CR_ENOSPC;
        }
        if (o->n == o->cap) {
            o->cap = o->cap ? o->cap * 2 : 16;
            o->v = cr_realloc(o->v, o->cap * sizeof *o->v);
        }
        c = &o->v[o->n++];
        memset(c, 0, sizeof *c);
        c->tenant = cr_strdup(tenant);
        c->sig = cr_strdup(sig);
        c->gpu = cr_strdup(gpu);
        c->count = count;
    }
    c->r[c->head] = log_ratio;
    c->head = (c->head + 1) % CR_OBS_KEEP;
    if (c->n < CR_OBS_KEEP) {
        c->n++;
    }
    return 0;
}

static int copy_out(const obs_class *c, double *r)
{
    /* oldest first */
    int start = c->n < CR_OBS_KEEP ? 0 : c->head;
    for (int i = 0; i < c->n; i++) {
        r[i] = c->r[(start + i) % CR_OBS_KEEP];
    }
    return c->n;
}

int cr_obs_get(const cr_obs *o, const char *tenant, const char *sig, const char *gpu, int count,
               double *r)
{
    const obs_class *c = tenant && sig && gpu ? find(o, tenant, sig, gpu, count) : NULL;
    return c ? copy_out(c, r) : 0;
}

size_t cr_obs_count(const cr_obs *o)
{
    return o->n;
}

int cr_obs_at(const cr_obs *o, size_t i, const char **tenant, const char **sig, const char **gpu,
              int *count, double *r)
{
    if (i >= o->n) {
        return 0;
    }
    const obs_class *c = &o->v[i];
    *tenant = c->tenant;
    *sig = c->sig;
    *gpu = c->gpu;
    *count = c->count;
    return copy_out(c, r);
}
