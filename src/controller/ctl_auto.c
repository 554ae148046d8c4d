/*
 * ctl_auto.c - the type choice of `gpu_type: "auto"` jobs from the
 * performance model (see ctl_auto.h for the rules).
 */
#include "ctl_auto.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_perf.h"
#include "cr_time.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* At most this many cached distinct workloads; past it the cache starts
 * over (outside input decides how many there are). */
#define CACHE_SLOTS 8192
#define CACHE_MAX   4096

typedef struct entry {
    bool used;
    ctl_auto_hints key;
    int ntypes;                        /* scheduler types estimated */
    bool fits[CR_SCHED_MAX_TYPES];     /* the model runs it there */
    bool known[CR_SCHED_MAX_TYPES];    /* the type is in the catalog */
    double prog[CR_SCHED_MAX_TYPES];   /* progress per second (0 = refused) */
    double score[CR_SCHED_MAX_TYPES];  /* cost score, best = 1 (0 = refused) */
    double raw[CR_SCHED_MAX_TYPES];    /* progress/s per US$/h, 0 without a price */
    double tput[CR_SCHED_MAX_TYPES];   /* the estimate's throughput (tokens/s, ...) */
    double tscore[CR_SCHED_MAX_TYPES]; /* throughput score, best = 1 */
    double hours[CR_SCHED_MAX_TYPES];  /* the estimate's time */
    double cost[CR_SCHED_MAX_TYPES];   /* US$, CR_UNKNOWN without a price */
    char *refusals;                    /* owned: "L40S: no FP64...; A30: ...", NULL if none */
    bool service;                      /* inference/visual: costs are per hour served */
    bool learnable;                    /* a training class the cluster learns (sig set) */
    char sig[128];                     /* cr_workload_signature of the hints */
} entry;

struct ctl_auto {
    cr_catalog *cat;         /* owned; NULL = auto means any */
    cr_arch_catalog *models; /* owned; NULL = model names unknown (params only) */
    cr_prices *prices;
    const cr_gpu_type *gpu[CR_SCHED_MAX_TYPES]; /* scheduler type -> catalog row (or NULL) */
    int nmapped;                                /* scheduler types looked up so far */
    entry *slots;                               /* CACHE_SLOTS, open addressing */
    size_t nused;
    ctl_auto_learn_fn learn; /* tenants' observations; NULL = the model alone */
    void *learn_ctx;
};

void ctl_auto_set_learn(ctl_auto *a, ctl_auto_learn_fn fn, void *ctx)
{
    if (a) {
        a->learn = fn;
        a->learn_ctx = ctx;
    }
}

void ctl_auto_hints_of(const char *gpu_type, const char *mig, const char *kind, const json_t *model,
                       int gpus, ctl_auto_hints *out)
{
    if (!gpu_type || strcmp(gpu_type, "auto") != 0) {
        memset(out, 0, sizeof *out);
        out->kind = -1;
        return;
    }
    ctl_auto_plan_hints_of(mig, kind, model, gpus, out);
}

void ctl_auto_plan_hints_of(const char *mig, const char *kind, const json_t *model, int gpus,
                            ctl_auto_hints *out)
{
    memset(out, 0, sizeof *out);
    out->kind = -1;
    if ((mig && *mig) || gpus < 1) {
        return;
    }
    if (!kind || cr_kind_parse(kind, &out->kind) != 0) {
        out->kind = -1;
        return;
    }
    out->gpus = gpus;
    const json_t *v;
    if (model && (v = json_object_get(model, "params")) && json_is_number(v)) {
        out->params = json_number_value(v);
    }
    if (model && (v = json_object_get(model, "tokens")) && json_is_number(v)) {
        out->tokens = json_number_value(v);
    }
    const char *an = model ? json_string_value(json_object_get(model, "name")) : NULL;
    if (an && strlen(an) < sizeof out->arch) {
        memcpy(out->arch, an, strlen(an) + 1);
    }
    const char *m = model ? json_string_value(json_object_get(model, "method")) : NULL;
    const char *p = model ? json_string_value(json_object_get(model, "precision")) : NULL;
    const char *st = model ? json_string_value(json_object_get(model, "stack")) : NULL;
    const char *ck = model ? json_string_value(json_object_get(model, "checkpointing")) : NULL;
    if (model && (v = json_object_get(model, "micro_batch")) && json_is_number(v)) {
        out->micro_batch = (int)json_number_value(v);
    }
    if (model && (v = json_object_get(model, "global_batch")) && json_is_number(v)) {
        out->global_batch = (int)json_number_value(v);
    }
    if (model && (v = json_object_get(model, "seq_len")) && json_is_number(v)) {
        out->seq_len = (int)json_number_value(v);
    }
    if ((m && cr_method_parse(m, &out->method) != 0) ||
        (p && cr_precision_parse(p, &out->precision) != 0) ||
        (st && cr_stack_parse(st, &out->stack) != 0) ||
        (ck && cr_ckpt_parse(ck, &out->ckpt) != 0)) {
        return; /* refused at submit; an old stored job keeps "any" */
    }
    if (out->kind == CR_KIND_PRETRAIN) {
        out->method = CR_METHOD_FULL;
    }
    switch (out->kind) {
    case CR_KIND_VISUAL:
    case CR_KIND_HPC:
        out->active = true; /* implied needs, the model's defaults for the rest */
        break;
    case CR_KIND_BATCH:
        out->active = model != NULL && json_object_size(model) > 0;
        break;
    default:
        out->active = out->params > 0 || out->arch[0]; /* a name brings its parameters */
        break;
    }
}

ctl_auto *ctl_auto_new(const json_t *prices)
{
    ctl_auto *a = cr_calloc(1, sizeof *a);
    char err[512];
    if (cr_catalog_load(NULL, &a->cat, err, sizeof err) != 0) {
        cr_warn("auto: no GPU catalog (%s): gpu_type auto means any type", err);
        a->cat = NULL;
        return a;
    }
    if (cr_arch_load(NULL, &a->models, err, sizeof err) != 0) {
        cr_warn("auto: no model architectures (%s): model names ignored", err);
        a->models = NULL;
    }
    if (cr_prices_load(NULL, a->cat, &a->prices, err, sizeof err) != 0) {
        cr_warn("auto: no price table (%s): types ranked by throughput", err);
        a->prices = cr_prices_new_empty();
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)prices, k, v)
    {
        const cr_gpu_type *g = cr_catalog_find(a->cat, k);
        if (g && json_is_number(v) && json_number_value(v) >= 0) {
            cr_prices_set(a->prices, g, json_number_value(v));
        }
    }
    a->slots = cr_calloc(CACHE_SLOTS, sizeof *a->slots);
    return a;
}

static void cache_clear(ctl_auto *a)
{
    for (size_t i = 0; i < CACHE_SLOTS; i++) {
        free(a->slots[i].refusals);
        memset(&a->slots[i], 0, sizeof a->slots[i]);
    }
    a->nused = 0;
}

void ctl_auto_free(ctl_auto *a)
{
    if (!a) {
        return;
    }
    if (a->slots) {
        cache_clear(a);
        free(a->slots);
    }
    cr_prices_free(a->prices);
    cr_catalog_free(a->cat);
    cr_arch_free(a->models);
    free(a);
}

/* A node's model name as the catalog knows it ("H100 SXM", or NVML's
 * "NVIDIA H100 SXM"). */
static const cr_gpu_type *find_type(const cr_catalog *cat, const char *name)
{
    const cr_gpu_type *g = name ? cr_catalog_find(cat, name) : NULL;
    if (!g && name && strncmp(name, "NVIDIA ", 7) == 0) {
        g = cr_catalog_find(cat, name + 7);
    }
    return g && g->vendor_nvidia ? g : NULL;
}

static const cr_gpu_type *catalog_type(const ctl_auto *a, const char *name)
{
    return find_type(a->cat, name);
}

static void map_types(ctl_auto *a, const cr_sched *s)
{
    int n = cr_sched_gpu_type_count(s);
    for (; a->nmapped < n && a->nmapped < CR_SCHED_MAX_TYPES; a->nmapped++) {
        a->gpu[a->nmapped] = catalog_type(a, cr_sched_gpu_type_name(s, a->nmapped));
    }
}

static uint64_t hash_key(const ctl_auto_hints *h)
{
    const unsigned char *p = (const unsigned char *)h;
    uint64_t x = 1469598103934665603ULL;
    for (size_t i = 0; i < sizeof *h; i++) {
        x = (x ^ p[i]) * 1099511628211ULL;
    }
    return x;
}

static void workload_of(const cr_arch_catalog *models, const ctl_auto_hints *h, cr_workload *w)
{
    cr_workload_init(w);
    w->kind = h->kind;
    w->method = h->method;
    w->precision = h->precision;
    w->params = h->params;
    w->tokens = h->tokens;
    w->stack = h->stack;
    w->ckpt = h->ckpt;
    w->micro_batch = h->micro_batch;
    w->batch = h->global_batch;
    w->seq_len = h->seq_len;
    const cr_arch *m = h->arch[0] && models ? cr_arch_find(models, h->arch) : NULL;
    if (m) {
        w->arch = *m;
        w->params = m->params;
    }
    if (h->kind == CR_KIND_VISUAL) {
        /* The stream count is not in the request: one per GPU, so that the
         * count asked never refuses a type; the type's encoders decide. */
        w->streams = h->gpus;
        w->needs |= CR_NEED_NVENC;
    } else if (h->kind == CR_KIND_HPC) {
        w->needs |= CR_NEED_FP64 | CR_NEED_ECC;
    }
}

/* Estimate on every scheduler type and derive the scores. */
static void fill(ctl_auto *a, int ntypes, entry *e)
{
    cr_workload w;
    workload_of(a->models, &e->key, &w);
    cr_perf_env env = {a->cat, a->prices, NULL};
    char err[128];
    bool valid = cr_workload_check(&w, err, sizeof err) == 0;
    double best_cost = 0, best_prog = 0;
    cr_buf rb;
    cr_buf_init(&rb);
    struct {
        int type; /* -1 once listed */
        char text[CR_REASON_MAX];
    } why[CR_SCHED_MAX_TYPES];
    int nwhy = 0;
    e->ntypes = ntypes;
    e->service = e->key.kind == CR_KIND_INFERENCE || e->key.kind == CR_KIND_VISUAL;
    e->learnable = valid && (w.kind == CR_KIND_PRETRAIN || w.kind == CR_KIND_FINETUNE);
    cr_workload_signature(&w, e->sig, sizeof e->sig);
    for (int t = 0; t < ntypes; t++) {
        const cr_gpu_type *g = a->gpu[t];
        e->fits[t] = false;
        e->known[t] = g != NULL;
        e->prog[t] = e->score[t] = e->tscore[t] = e->raw[t] = e->tput[t] = 0;
        e->hours[t] = 0;
        e->cost[t] = CR_UNKNOWN;
        if (!g) {
            /* Not in the catalog: the model cannot vouch for hard needs;
             * otherwise it may run there, after every known type. */
            e->fits[t] = w.needs == 0;
            continue;
        }
        cr_estimate est;
        if (!valid || cr_perf_estimate(&env, &w, g, e->key.gpus, &est) != 0) {
            continue;
        }
        if (!est.fits) {
            snprintf(why[nwhy].text, sizeof why[nwhy].text, "%s", est.reason);
            why[nwhy++].type = t;
            continue;
        }
        e->fits[t] = true;
        e->prog[t] = est.progress_per_s;
        e->hours[t] = (double)est.time_ns / (double)CR_NS_PER_H;
        e->cost[t] = est.cost_usd;
        e->tput[t] = est.throughput;
        double price = cr_prices_get(a->prices, g);
        if (cr_known(price) && price > 0) {
            e->score[t] = e->raw[t] = est.progress_per_s / (price * e->key.gpus);
            best_cost = fmax(best_cost, e->score[t]);
        }
        best_prog = fmax(best_prog, est.progress_per_s);
    }
    for (int t = 0; t < ntypes; t++) {
        if (!e->fits[t]) {
            continue;
        }
        if (!e->known[t] || e->prog[t] <= 0) {
            e->score[t] = e->tscore[t] = 1e-6;
            continue;
        }
        e->tscore[t] = best_prog > 0 ? e->prog[t] / best_prog : 1;
        /* Unknown prices rank after every priced type, as in the advisor. */
        e->score[t] = e->score[t] > 0 ? e->score[t] / best_cost : 1e-3 * e->tscore[t];
    }
    /* "A, B: reason; C: reason": types refused for the same reason together. */
    for (int i = 0; i < nwhy; i++) {
        if (why[i].type < 0) {
            continue;
        }
        cr_buf_puts(&rb, rb.len ? "; " : "");
        for (int k = i, first = 1; k < nwhy; k++) {
            if (why[k].type >= 0 && strcmp(why[k].text, why[i].text) == 0) {
                cr_buf_printf(&rb, "%s%s", first ? "" : ", ", a->gpu[why[k].type]->name);
                first = 0;
                if (k > i) {
                    why[k].type = -1;
                }
            }
        }
        cr_buf_printf(&rb, ": %s", why[i].text);
    }
    free(e->refusals);
    e->refusals = rb.len ? cr_buf_take(&rb) : NULL;
    cr_buf_fini(&rb);
}

static entry *lookup(ctl_auto *a, const cr_sched *s, const ctl_auto_hints *h)
{
    if (!a->cat || !h->active) {
        return NULL;
    }
    map_types(a, s);
    size_t i = hash_key(h) & (CACHE_SLOTS - 1);
    while (a->slots[i].used && memcmp(&a->slots[i].key, h, sizeof *h) != 0) {
        i = (i + 1) & (CACHE_SLOTS - 1);
    }
    entry *e = &a->slots[i];
    if (!e->used) {
        if (a->nused >= CACHE_MAX) {
            cache_clear(a);
            return lookup(a, s, h);
        }
        e->used = true;
        memcpy(&e->key, h, sizeof *h); /* padding too: keys compare bytewise */
        e->ntypes = -1;
        a->nused++;
    }
    if (e->ntypes != a->nmapped) {
        fill(a, a->nmapped, e);
    }
    return e;
}

/* The tenant's learned factor for the entry's class on each type
 * (1 where it has no runs); returns whether any differs from 1. */
static bool learned_factors(const ctl_auto *a, const entry *e, const char *tenant, double *f,
                            cr_learned *l)
{
    bool any = false;
    for (int t = 0; t < e->ntypes; t++) {
        f[t] = 1;
        memset(&l[t], 0, sizeof l[t]);
        if (!a->learn || !e->learnable || !tenant || !*tenant || !e->fits[t] || !e->known[t] ||
            e->prog[t] <= 0) {
            continue;
        }
        if (a->learn(a->learn_ctx, tenant, e->sig, a->gpu[t]->name, e->key.gpus, &l[t]) > 0 &&
            l[t].factor > 0 && isfinite(l[t].factor)) {
            f[t] = l[t].factor;
            any = true;
        }
    }
    return any;
}

bool ctl_auto_tput(ctl_auto *a, const cr_sched *s, const ctl_auto_hints *h, const char *tenant,
                   bool hetero, double *tput, size_t *count)
{
    const entry *e = lookup(a, s, h);
    if (!e) {
        return false;
    }
    double f[CR_SCHED_MAX_TYPES];
    cr_learned l[CR_SCHED_MAX_TYPES];
    if (!learned_factors(a, e, tenant, f, l)) {
        for (int t = 0; t < e->ntypes; t++) {
            tput[t] = hetero ? e->tscore[t] : e->score[t];
        }
        *count = (size_t)e->ntypes;
        return true;
    }
    /* The scores again with the measured progress: best = 1, unknown
     * prices after every priced type, types outside the catalog last. */
    double best_prog = 0, best_cost = 0;
    for (int t = 0; t < e->ntypes; t++) {
        if (e->fits[t] && e->known[t] && e->prog[t] > 0) {
            best_prog = fmax(best_prog, e->prog[t] * f[t]);
            best_cost = fmax(best_cost, e->raw[t] * f[t]);
        }
    }
    for (int t = 0; t < e->ntypes; t++) {
        if (!e->fits[t]) {
            tput[t] = 0;
        } else if (!e->known[t] || e->prog[t] <= 0) {
            tput[t] = 1e-6;
        } else {
            double ts = best_prog > 0 ? e->prog[t] * f[t] / best_prog : 1;
            tput[t] = hetero                           ? ts
                      : e->raw[t] > 0 && best_cost > 0 ? e->raw[t] * f[t] / best_cost
                                                       : 1e-3 * ts;
        }
    }
    *count = (size_t)e->ntypes;
    return true;
}

bool ctl_auto_refusal(ctl_auto *a, const cr_sched *s, const ctl_auto_hints *h, char *buf,
                      size_t len)
{
    const entry *e = lookup(a, s, h);
    if (!e || !e->refusals) {
        return false;
    }
    bool some_fit = false;
    for (int t = 0; t < e->ntypes; t++) {
        some_fit = some_fit || e->fits[t];
    }
    snprintf(buf, len, "no GPU type in the cluster can run it: %s%s", e->refusals,
             some_fit ? "; the others lack the memory or MIG profile asked" : "");
    return true;
}

static void fmt_hours(char *b, size_t n, double h)
{
    if (h < 1) {
        snprintf(b, n, "%.0f min", h * 60);
    } else if (h < 48) {
        snprintf(b, n, "%.1f h", h);
    } else {
        snprintf(b, n, "%.0f d", h / 24);
    }
}

void ctl_auto_why(ctl_auto *a, const cr_sched *s, const ctl_auto_hints *h, const char *tenant,
                  int type, char *buf, size_t len)
{
    const entry *e = lookup(a, s, h);
    if (len) {
        buf[0] = '\0';
    }
    const char *name = cr_sched_gpu_type_name(s, type);
    if (!e || type < 0 || type >= e->ntypes || !name) {
        return;
    }
    cr_sched_policy pol = cr_sched_get_config(s)->policy;
    double sc[CR_SCHED_MAX_TYPES], f[CR_SCHED_MAX_TYPES];
    cr_learned l[CR_SCHED_MAX_TYPES];
    size_t nsc = 0;
    ctl_auto_tput(a, s, h, tenant, pol == CR_SCHED_HETERO, sc, &nsc);
    learned_factors(a, e, tenant, f, l);
    int better = 0; /* types in service the order puts first */
    for (int t = 0; t < e->ntypes; t++) {
        uint32_t total = 0;
        cr_sched_capacity(s, t, &total, NULL);
        better += t != type && total > 0 && sc[t] > sc[type];
    }
    const char *how = pol == CR_SCHED_FIFO     ? "first type with room the advisor allows"
                      : pol == CR_SCHED_HETERO ? "by the heterogeneity-aware allocation"
                      : better == 0            ? "best by cost"
                                               : "best by cost among types with free GPUs";
    char adv[96], cal[96] = "";
    double ft = f[type];
    if (l[type].runs > 0) {
        snprintf(cal, sizeof cal,
                 "; calibrated from %d run%s on this cluster (x%.2f, 95%% %.2f-%.2f)", l[type].runs,
                 l[type].runs > 1 ? "s" : "", ft, l[type].lo, l[type].hi);
    }
    if (!e->known[type]) {
        snprintf(adv, sizeof adv, "not in the GPU catalog");
    } else if (e->service) {
        if (cr_known(e->cost[type])) {
            snprintf(adv, sizeof adv, "advisor: $%.2f per hour served", e->cost[type]);
        } else {
            snprintf(adv, sizeof adv, "advisor: meets the targets, price unknown");
        }
    } else {
        char t[32], rate[40] = "";
        fmt_hours(t, sizeof t, e->hours[type] / ft);
        if (e->learnable && e->tput[type] > 0) {
            snprintf(rate, sizeof rate, ", %.0f tokens/s", e->tput[type] * ft);
        }
        if (cr_known(e->cost[type])) {
            snprintf(adv, sizeof adv, "advisor: %s, $%.2f%s", t, e->cost[type] / ft, rate);
        } else {
            snprintf(adv, sizeof adv, "advisor: %s, price unknown%s", t, rate);
        }
    }
    snprintf(buf, len, "auto: %s, %s (%s%s)", name, how, adv, cal);
}

bool ctl_auto_plan(const ctl_auto *a, const ctl_auto_hints *h, const char *type, ctl_plan *out)
{
    memset(out, 0, sizeof *out);
    if (!a || !a->cat || !h->active ||
        (h->kind != CR_KIND_PRETRAIN && h->kind != CR_KIND_FINETUNE &&
         h->kind != CR_KIND_INFERENCE)) {
        return false;
    }
    const cr_gpu_type *g = catalog_type(a, type);
    if (!g) {
        return false;
    }
    cr_workload w;
    workload_of(a->models, h, &w);
    char err[128];
    cr_perf_env env = {a->cat, a->prices, NULL};
    cr_estimate est;
    if (cr_workload_check(&w, err, sizeof err) != 0 ||
        cr_perf_estimate(&env, &w, g, h->gpus, &est) != 0 || !est.fits || est.mig || est.tp < 1) {
        return false;
    }
    out->tp = est.tp;
    out->pp = est.pp > 0 ? est.pp : 1;
    out->ep = est.ep > 0 ? est.ep : 1;
    out->cp = est.cp > 0 ? est.cp : 1;
    out->serving = h->kind == CR_KIND_INFERENCE;
    out->dp = out->serving ? (est.replicas > 0 ? est.replicas : 1) : (est.dp > 0 ? est.dp : 1);
    if (!out->serving) {
        out->micro_batch = est.micro_batch > 0 ? est.micro_batch : 1;
        /* The batch a step really takes: whole micro-batches on every
         * data-parallel rank (Megatron and DeepSpeed refuse any other). */
        int64_t per = (int64_t)out->dp * out->micro_batch;
        int64_t m = (est.global_batch + per - 1) / per;
        out->global_batch = (int)(m * per);
        out->ckpt = est.ckpt;
    }
    snprintf(out->text, sizeof out->text, "%s", est.plan);
    return true;
}

static void set_int(json_t *env, const char *k, int v)
{
    char b[16];
    snprintf(b, sizeof b, "%d", v);
    json_object_set_new(env, k, json_string(b));
}

void ctl_plan_env(const ctl_plan *p, json_t *env)
{
    if (p->tp < 1) {
        return;
    }
    set_int(env, "CORRAL_TP", p->tp);
    set_int(env, "CORRAL_PP", p->pp);
    set_int(env, "CORRAL_DP", p->dp);
    set_int(env, "CORRAL_EP", p->ep);
    set_int(env, "CORRAL_CP", p->cp);
    json_object_set_new(env, "CORRAL_PLAN", json_string(p->text));
    char b[512];
    if (p->serving) {
        /* vLLM: a replica per data-parallel rank (--data-parallel-size,
         * vLLM 0.8+), experts spread over the tensor-parallel GPUs. */
        int n = snprintf(b, sizeof b, "--tensor-parallel-size %d --pipeline-parallel-size %d",
                         p->tp, p->pp);
        if (p->dp > 1) {
            n += snprintf(b + n, sizeof b - (size_t)n, " --data-parallel-size %d", p->dp);
        }
        if (p->ep > 1) {
            snprintf(b + n, sizeof b - (size_t)n, " --enable-expert-parallel");
        }
        json_object_set_new(env, "CORRAL_VLLM_ARGS", json_string(b));
        n = snprintf(b, sizeof b, "--tp-size %d --pp-size %d --dp-size %d", p->tp, p->pp, p->dp);
        if (p->ep > 1) {
            snprintf(b + n, sizeof b - (size_t)n, " --ep-size %d", p->ep);
        }
        json_object_set_new(env, "CORRAL_SGLANG_ARGS", json_string(b));
        n = snprintf(b, sizeof b, "--tp_size %d --pp_size %d", p->tp, p->pp);
        if (p->ep > 1) {
            snprintf(b + n, sizeof b - (size_t)n, " --ep_size %d", p->ep);
        }
        json_object_set_new(env, "CORRAL_TRTLLM_ARGS", json_string(b));
        return;
    }
    set_int(env, "CORRAL_MICRO_BATCH", p->micro_batch);
    set_int(env, "CORRAL_GLOBAL_BATCH", p->global_batch);
    int n = snprintf(b, sizeof b,
                     "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d "
                     "--micro-batch-size %d --global-batch-size %d",
                     p->tp, p->pp, p->micro_batch, p->global_batch);
    if (p->cp > 1) {
        n += snprintf(b + n, sizeof b - (size_t)n, " --context-parallel-size %d", p->cp);
    }
    if (p->ep > 1) {
        n += snprintf(b + n, sizeof b - (size_t)n, " --expert-model-parallel-size %d", p->ep);
    }
    if (p->ckpt == CR_CKPT_FULL) {
        snprintf(b + n, sizeof b - (size_t)n,
                 " --recompute-granularity full --recompute-method uniform "
                 "--recompute-num-layers 1");
    } else if (p->ckpt == CR_CKPT_SELECTIVE) {
        snprintf(b + n, sizeof b - (size_t)n, " --recompute-granularity selective");
    }
    json_object_set_new(env, "CORRAL_MEGATRON_ARGS", json_string(b));
    snprintf(b, sizeof b,
             "model.tensor_model_parallel_size=%d model.pipeline_model_parallel_size=%d "
             "model.context_parallel_size=%d model.expert_model_parallel_size=%d "
             "model.micro_batch_size=%d model.global_batch_size=%d",
             p->tp, p->pp, p->cp, p->ep, p->micro_batch, p->global_batch);
    json_object_set_new(env, "CORRAL_NEMO_ARGS", json_string(b));
    /* DeepSpeed derives the accumulation steps from these two. */
    snprintf(b, sizeof b, "{\"train_micro_batch_size_per_gpu\":%d,\"train_batch_size\":%d}",
             p->micro_batch, p->global_batch);
    json_object_set_new(env, "CORRAL_DEEPSPEED_CONFIG", json_string(b));
}

json_t *ctl_plan_json(const ctl_plan *p)
{
    json_t *v =
        json_pack("{s:i,s:i,s:i,s:i,s:i,s:s,s:s}", "tp", p->tp, "pp", p->pp, "dp", p->dp, "ep",
                  p->ep, "cp", p->cp, "text", p->text, "kind", p->serving ? "serving" : "training");
    if (!p->serving) {
        json_object_set_new(v, "micro_batch", json_integer(p->micro_batch));
        json_object_set_new(v, "global_batch", json_integer(p->global_batch));
        json_object_set_new(v, "checkpointing", json_string(cr_ckpt_name(p->ckpt)));
    }
    return v;
}

static int get_way(const json_t *v, const char *k, int lo, int hi)
{
    const json_t *x = json_object_get(v, k);
    json_int_t n = json_is_integer(x) ? json_integer_value(x) : 0;
    return n >= lo && n <= hi ? (int)n : 0;
}

bool ctl_plan_from_json(const json_t *v, ctl_plan *p)
{
    memset(p, 0, sizeof *p);
    if (!json_is_object(v)) {
        return false;
    }
    p->tp = get_way(v, "tp", 1, 1 << 20);
    p->pp = get_way(v, "pp", 1, 1 << 20);
    p->dp = get_way(v, "dp", 1, 1 << 20);
    p->ep = get_way(v, "ep", 1, 1 << 20);
    p->cp = get_way(v, "cp", 1, 1 << 20);
    p->micro_batch = get_way(v, "micro_batch", 1, 1 << 30);
    p->global_batch = get_way(v, "global_batch", 1, 1 << 30);
    const char *k = json_string_value(json_object_get(v, "kind"));
    p->serving = k && strcmp(k, "serving") == 0;
    const char *ck = json_string_value(json_object_get(v, "checkpointing"));
    if (!ck || cr_ckpt_parse(ck, &p->ckpt) != 0) {
        p->ckpt = 0;
    }
    const char *t = json_string_value(json_object_get(v, "text"));
    snprintf(p->text, sizeof p->text, "%s", t ? t : "");
    if (!p->tp || !p->pp || !p->dp || !p->ep || !p->cp ||
        (!p->serving && (!p->micro_batch || !p->global_batch))) {
        memset(p, 0, sizeof *p);
        return false;
    }
    return true;
}

int ctl_auto_fit_check(const cr_catalog *cat, const cr_arch_catalog *models, const char *gpu_type,
                       const ctl_auto_hints *h, const char **field, char *msg, size_t len)
{
    if (!cat || !h->active || !gpu_type || strcmp(gpu_type, "auto") == 0 ||
        strcmp(gpu_type, "any") == 0 ||
        (h->kind != CR_KIND_PRETRAIN && h->kind != CR_KIND_FINETUNE &&
         h->kind != CR_KIND_INFERENCE)) {
        return 0;
    }
    const cr_gpu_type *g = find_type(cat, gpu_type);
    if (!g) {
        return 0; /* the model cannot vouch for a type it does not know */
    }
    cr_workload w;
    workload_of(models, h, &w);
    /* Whether it holds the model, not whether it meets latency targets
     * nobody stated: a serving job is checked against the memory alone. */
    if (w.kind == CR_KIND_INFERENCE) {
        w.ttft_ns = w.tpot_ns = INT64_C(1) << 60;
    }
    char err[128];
    cr_perf_env env = {cat, NULL, NULL};
    cr_estimate est;
    if (cr_workload_check(&w, err, sizeof err) != 0 ||
        cr_perf_estimate(&env, &w, g, h->gpus, &est) != 0 || est.fits) {
        return 0;
    }
    char what[96];
    double p = w.arch.layers > 0 ? w.arch.params : w.params;
    if (h->arch[0]) {
        snprintf(what, sizeof what, "%s %s", cr_kind_name(h->kind), h->arch);
    } else {
        snprintf(what, sizeof what, "%s of %.3gB parameters", cr_kind_name(h->kind), p / 1e9);
    }
    /* The smallest count that holds it, however long it would take. */
    cr_estimate any;
    w.duration_ns = INT64_C(100) * 365 * 86400 * CR_NS_PER_SEC;
    bool more = cr_perf_estimate(&env, &w, g, 0, &any) == 0 && any.fits && any.gpu_count > h->gpus;
    if (more) {
        *field = "gpus";
        snprintf(msg, len,
                 "field 'gpus': a %s does not fit on %d %s (it asked for %d GPU%s): %s; the "
                 "advisor's smallest count of %s for it is %d (or gpu_type auto); \"force\": "
                 "true (corral submit --force) submits it anyway",
                 what, h->gpus, g->name, h->gpus, h->gpus == 1 ? "" : "s", est.reason, g->name,
                 any.gpu_count);
    } else {
        *field = "gpu_type";
        snprintf(msg, len,
                 "field 'gpu_type': a %s does not fit on %s at the %d GPU%s it asked for, nor "
                 "at any count the advisor tries: %s; \"force\": true (corral submit --force) "
                 "submits it anyway",
                 what, g->name, h->gpus, h->gpus == 1 ? "" : "s", est.reason);
    }
    return CR_EINVAL;
}
