/*
 * ctl_learn.c - the cluster calibrates its own advisor (issue 26;
 * docs/model.md "Learning from the cluster").
 *
 * A job that ends well with a measured throughput (its corral-metric line,
 * read by the agent from its output log and sent with its end) is one
 * observation of the model's bias for its class: log(measured / modelled)
 * at the job's own GPU type and count. Observations are kept per tenant x
 * workload signature (cr_workload_signature) x GPU type x count, stored as
 * objects of kind "observation" keyed "tenant|signature|type|count" (so
 * they survive restarts), and /v1/advise scales its estimates for the
 * caller's tenant with cr_learn_combine: "calibrated from N runs on this
 * cluster". A tenant reads only its own rows: no other tenant's names,
 * signatures or counts reach it.
 *
 * Training kinds only: a serving job's tokens/s depends on the load it was
 * offered, which the job does not report.
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_arch.h"
#include "cr_catalog.h"
#include "cr_error.h"
#include "cr_learn.h"
#include "cr_log.h"
#include "cr_perf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ctl_learn {
    pthread_mutex_t mu; /* guards obs; inside c->mu when both are held */
    cr_obs *obs;
    cr_arch_catalog *models; /* model shapes by name; NULL: shapes from params */
};

static void load_row(void *arg, const char *key, const char *doc)
{
    struct ctl_learn *l = arg;
    (void)key;
    json_error_t je;
    json_t *v = json_loads(doc, 0, &je);
    const char *tenant = json_string_value(json_object_get(v, "tenant"));
    const char *sig = json_string_value(json_object_get(v, "sig"));
    const char *gpu = json_string_value(json_object_get(v, "gpu"));
    json_t *count = json_object_get(v, "count"), *r = json_object_get(v, "r");
    if (tenant && sig && gpu && json_is_integer(count) && json_is_array(r)) {
        for (size_t i = 0; i < json_array_size(r); i++) {
            cr_obs_add(l->obs, tenant, sig, gpu, (int)json_integer_value(count),
                       json_number_value(json_array_get(r, i)));
        }
    } else {
        cr_warn("controller: observation %s: not a row this controller reads; left out", key);
    }
    json_decref(v);
}

int ctl_load_learn(ctl *c)
{
    struct ctl_learn *l = cr_calloc(1, sizeof *l);
    pthread_mutex_init(&l->mu, NULL);
    l->obs = cr_obs_new();
    char err[256];
    if (cr_arch_load(NULL, &l->models, err, sizeof err) != 0) {
        l->models = NULL; /* shapes from params alone */
    }
    c->learn = l;
    return cr_store_load_objects(c->store, "observation", load_row, l);
}

const cr_arch_catalog *ctl_learn_models(const ctl *c)
{
    return c->learn ? c->learn->models : NULL;
}

void ctl_learn_free(ctl *c)
{
    struct ctl_learn *l = c->learn;
    if (!l) {
        return;
    }
    cr_obs_free(l->obs);
    cr_arch_free(l->models);
    pthread_mutex_destroy(&l->mu);
    free(l);
    c->learn = NULL;
}

/* The job's workload as its spec states it (kind and the model object);
 * 0, or -1 when the job says too little to be a class. */
static int job_workload(const struct ctl_learn *l, const ctl_job *j, cr_workload *w)
{
    cr_workload_init(w);
    if (cr_kind_parse(j->kind, &w->kind) != 0 ||
        (w->kind != CR_KIND_PRETRAIN && w->kind != CR_KIND_FINETUNE)) {
        return -1;
    }
    const json_t *m = json_object_get(j->spec, "model");
    const char *name = json_string_value(json_object_get(m, "name"));
    const cr_arch *a = name && l->models ? cr_arch_find(l->models, name) : NULL;
    if (a) {
        w->arch = *a;
        w->params = a->params;
    } else {
        w->params = json_number_value(json_object_get(m, "params"));
    }
    const char *s;
    if ((s = json_string_value(json_object_get(m, "method"))) && cr_method_parse(s, &w->method)) {
        return -1;
    }
    if ((s = json_string_value(json_object_get(m, "precision"))) &&
        cr_precision_parse(s, &w->precision)) {
        return -1;
    }
    if ((s = json_string_value(json_object_get(m, "stack"))) && cr_stack_parse(s, &w->stack)) {
        return -1;
    }
    if ((s = json_string_value(json_object_get(m, "checkpointing"))) &&
        cr_ckpt_parse(s, &w->ckpt)) {
        return -1;
    }
    json_t *mb = json_object_get(m, "micro_batch");
    w->micro_batch = json_is_number(mb) ? (int)json_number_value(mb) : 0;
    /* The shape of a step the job ran (the plan's knobs): its throughput
     * is compared with the model's for the same batch and length. */
    json_t *gb = json_object_get(m, "global_batch"), *sl = json_object_get(m, "seq_len");
    w->batch = json_is_number(gb) ? (int)json_number_value(gb) : 0;
    w->seq_len = json_is_number(sl) ? (int)json_number_value(sl) : 0;
    if (w->kind == CR_KIND_PRETRAIN) {
        w->method = CR_METHOD_FULL;
    }
    char err[160];
    return w->params > 0 && cr_workload_check(w, err, sizeof err) == 0 ? 0 : -1;
}

void ctl_learn_record(ctl *c, cr_store_txn *txn, const ctl_job *j, const json_t *metrics)
{
    struct ctl_learn *l = c->learn;
    double tok = json_number_value(json_object_get(metrics, "tokens_per_s"));
    if (!l || !c->catalog || !(tok > 0) || !*j->run_type) {
        return;
    }
    cr_workload w;
    if (job_workload(l, j, &w) != 0) {
        return;
    }
    const cr_gpu_type *g = cr_catalog_find(c->catalog, j->run_type);
    int count = 0;
    for (size_t k = 0; k < j->nplace; k++) {
        count += (int)j->place[k].ngpus;
    }
    if (!g || count < 1) {
        return;
    }
    cr_perf_env env = {c->catalog, NULL, NULL};
    cr_estimate e;
    if (cr_perf_estimate(&env, &w, g, count, &e) != 0 || !e.fits || !(e.throughput > 0)) {
        return;
    }
    char sig[128];
    cr_workload_signature(&w, sig, sizeof sig);
    double r[CR_OBS_KEEP];
    pthread_mutex_lock(&l->mu);
    int n = 0;
    int arc = cr_obs_add(l->obs, j->tenant, sig, g->name, count, log(tok / e.throughput));
    if (arc == 0) {
        n = cr_obs_get(l->obs, j->tenant, sig, g->name, count, r);
    }
    pthread_mutex_unlock(&l->mu);
    if (arc == CR_ENOSPC) {
        cr_warn("controller: job=%lld: %d workload classes are learned already (the bound); "
                "its measurement is not kept",
                (long long)j->id, CR_OBS_MAX_CLASSES);
    }
    if (n <= 0) {
        return;
    }
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        json_array_append_new(arr, json_real(r[i]));
    }
    json_t *doc = json_pack("{s:s,s:s,s:s,s:i,s:o}", "tenant", j->tenant, "sig", sig, "gpu",
                            g->name, "count", count, "r", arr);
    char *text = json_dumps(doc, JSON_COMPACT);
    char key[400];
    snprintf(key, sizeof key, "%s|%s|%s|%d", j->tenant, sig, g->name, count);
    cr_store_txn_put(txn, "observation", key, text);
    free(text);
    json_decref(doc);
    cr_info("controller: job=%lld measured %.0f tokens/s on %d x %s, the model %.0f: class %s "
            "has %d run%s",
            (long long)j->id, tok, count, g->name, e.throughput, sig, n, n > 1 ? "s" : "");
}

int ctl_learn_lookup(void *ctx, const char *tenant, const char *sig, const char *gpu, int count,
                     struct cr_learned *out)
{
    ctl *c = ctx;
    struct ctl_learn *l = c ? c->learn : NULL;
    memset(out, 0, sizeof *out);
    if (!l || !tenant || !*tenant || !sig || !gpu) {
        return 0;
    }
    double r[CR_OBS_KEEP];
    pthread_mutex_lock(&l->mu);
    int n = cr_obs_get(l->obs, tenant, sig, gpu, count, r);
    pthread_mutex_unlock(&l->mu);
    if (n <= 0) {
        return 0;
    }
    cr_learn_combine(r, n, out);
    return out->runs;
}

void ctl_learn_advise(ctl *c, const char *tenant, const struct cr_workload *w, struct cr_advice *a)
{
    struct ctl_learn *l = c->learn;
    if (!l || !tenant || !*tenant || (w->kind != CR_KIND_PRETRAIN && w->kind != CR_KIND_FINETUNE)) {
        return;
    }
    char sig[128];
    cr_workload_signature(w, sig, sizeof sig);
    double r[CR_OBS_KEEP];
    pthread_mutex_lock(&l->mu);
    for (size_t i = 0; i < a->ranked_count; i++) {
        cr_estimate *e = &a->ranked[i];
        int n = cr_obs_get(l->obs, tenant, sig, e->gpu->name, e->gpu_count, r);
        if (n > 0) {
            cr_learned le;
            cr_learn_combine(r, n, &le);
            cr_learn_apply(&le, e);
        }
    }
    pthread_mutex_unlock(&l->mu);
}
