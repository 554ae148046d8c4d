/* The two outputs of `corral advise`: a table for people, JSON for tools. */
#include "advise_int.h"

#include "cr_catalog.h"
#include "cr_nvenc.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

char *cr__advise_fmt_time(double s, char *buf, size_t len)
{
    if (s < 1) {
        snprintf(buf, len, "%.0f ms", s * 1e3);
    } else if (s < 120) {
        snprintf(buf, len, "%.0f s", s);
    } else if (s < 7200) {
        snprintf(buf, len, "%.0f min", s / 60);
    } else if (s < 3 * 86400) {
        snprintf(buf, len, "%.1f h", s / 3600);
    } else if (s < 1000 * 86400) {
        snprintf(buf, len, "%.1f d", s / 86400);
    } else {
        snprintf(buf, len, "%.1f y", s / (365.25 * 86400));
    }
    return buf;
}

char *cr__advise_fmt_money(double usd, char *buf, size_t len)
{
    if (!cr_known(usd)) {
        snprintf(buf, len, "-");
    } else if (usd < 100) {
        snprintf(buf, len, "$%.2f", usd);
    } else if (usd < 1e4) {
        snprintf(buf, len, "$%.0f", usd);
    } else if (usd < 1e6) {
        snprintf(buf, len, "$%.1fk", usd / 1e3);
    } else {
        snprintf(buf, len, "$%.2fM", usd / 1e6);
    }
    return buf;
}

char *cr__advise_fmt_energy(double j, char *buf, size_t len)
{
    double kwh = j / 3.6e6;
    if (kwh < 10) {
        snprintf(buf, len, "%.2f kWh", kwh);
    } else if (kwh < 1e4) {
        snprintf(buf, len, "%.0f kWh", kwh);
    } else {
        snprintf(buf, len, "%.0f MWh", kwh / 1e3);
    }
    return buf;
}

char *cr__advise_fmt_count(double v, char *buf, size_t len)
{
    if (v >= 1e15) {
        int ex = (int)floor(log10(v));
        snprintf(buf, len, "%.3ge%d", v / pow(10, ex), ex);
    } else if (v >= 1e12) {
        snprintf(buf, len, "%.3gT", v / 1e12);
    } else if (v >= 1e9) {
        snprintf(buf, len, "%.3gB", v / 1e9);
    } else if (v >= 1e6) {
        snprintf(buf, len, "%.3gM", v / 1e6);
    } else if (v >= 1e3) {
        snprintf(buf, len, "%.3gk", v / 1e3);
    } else {
        snprintf(buf, len, "%.3g", v);
    }
    return buf;
}

static int is_service(const cr_workload *w)
{
    return w->kind == CR_KIND_INFERENCE || w->kind == CR_KIND_VISUAL;
}

/* Kinds whose estimate uses a transformer shape. */
static int uses_shape(const cr_workload *w)
{
    return !w->measured_job && (w->kind == CR_KIND_PRETRAIN || w->kind == CR_KIND_FINETUNE ||
                                w->kind == CR_KIND_INFERENCE);
}

/* The shape the model uses; 1 when it is the default assumed for params. */
static int shape_of(const cr_workload *w, cr_arch *out)
{
    if (w->arch.layers > 0) {
        *out = w->arch;
        return 0;
    }
    cr_arch_default(w->params > 0 ? w->params : 7e9, out);
    return 1;
}

static void describe(FILE *f, const cr_workload *w, const cr_advice *a, int gpus)
{
    char b1[32], b2[32], b3[32];
    fprintf(f, "Workload: %s", cr_kind_name(w->kind));
    if (w->kind == CR_KIND_FINETUNE) {
        fprintf(f, " (%s)", cr_method_name(w->method));
    }
    if (w->params > 0) {
        fprintf(f, ", %s params", cr__advise_fmt_count(w->params, b1, sizeof b1));
    }
    if (uses_shape(w)) {
        cr_arch sh;
        int assumed = shape_of(w, &sh);
        fprintf(f, ", %s %s (%d layers, %d KV heads%s", assumed ? "shape assumed:" : "model",
                sh.name[0] ? sh.name : "custom", sh.layers, sh.kv_heads,
                sh.kv_lora_rank ? " (MLA)" : "");
        if (sh.experts > 0) {
            fprintf(f, ", %d/%d experts, %s active", sh.experts_active, sh.experts,
                    cr__advise_fmt_count(sh.active, b1, sizeof b1));
        }
        fprintf(f, ")%s", assumed ? " -- set --model NAME or the shape flags for another" : "");
    }
    if (w->tokens > 0) {
        fprintf(f, ", %s tokens", cr__advise_fmt_count(w->tokens, b1, sizeof b1));
    }
    if (w->kind == CR_KIND_INFERENCE) {
        fprintf(f, ", %g req/s, prompt %d, output %d", w->rate_per_s, w->prompt_tokens,
                w->output_tokens);
        fprintf(
            f, ", TTFT <= %s, TPOT <= %s",
            cr__advise_fmt_time(w->ttft_ns > 0 ? (double)w->ttft_ns / 1e9 : 2, b2, sizeof b2),
            cr__advise_fmt_time(w->tpot_ns > 0 ? (double)w->tpot_ns / 1e9 : 0.05, b3, sizeof b3));
        if (w->tenants > 1) {
            fprintf(f, ", %d tenants", w->tenants);
        }
    }
    if (w->kind == CR_KIND_VISUAL) {
        fprintf(f, ", %g video streams (%dx%d at %g fps", w->streams,
                w->video_w > 0 ? w->video_w : 1920, w->video_h > 0 ? w->video_h : 1080,
                w->video_fps > 0 ? w->video_fps : 30);
        if (w->enc_codec != CR_CODEC_NONE) {
            fprintf(f, ", NVENC %s p%d %s", cr_codec_name(w->enc_codec), w->enc_preset,
                    w->enc_cbr ? "cbr" : "vbr");
        }
        fputc(')', f);
    }
    if (w->measured_job) {
        fprintf(f, ", job \"%s\" x %s steps (measured throughputs)", w->measured_job,
                cr__advise_fmt_count(w->steps, b1, sizeof b1));
    } else if (w->kind == CR_KIND_HPC || w->kind == CR_KIND_BATCH) {
        fprintf(f, ", %s FLOPs",
                cr__advise_fmt_count(w->work_flops > 0 ? w->work_flops : 1e18, b1, sizeof b1));
    }
    fprintf(f, ", %s", cr_precision_name(w->kind == CR_KIND_HPC ? CR_PREC_FP64 : w->precision));
    if (w->needs) {
        char nb[64];
        fprintf(f, ", needs %s", cr_needs_fmt(w->needs, nb, sizeof nb));
    }
    fprintf(f, "\nRanked by %s%s", cr_objective_name(a->objective),
            a->objective == CR_OBJ_TIME && w->kind == CR_KIND_INFERENCE ? " (TPOT)" : "");
    if (is_service(w)) {
        double win = w->duration_ns > 0 ? (double)w->duration_ns / 1e9 : 3600;
        fprintf(f, "; time, cost and energy are per %s of serving",
                cr__advise_fmt_time(win, b1, sizeof b1));
    }
    if (gpus > 0) {
        fprintf(f, "; %d GPUs", gpus);
    }
    fprintf(f, "\n\n");
}

/* One line naming the winner, so the answer comes before the details. */
static void recommend(FILE *f, const cr_workload *w, const cr_advice *a)
{
    if (a->ranked_count == 0) {
        return;
    }
    const cr_estimate *e = &a->ranked[0];
    char t[32], c[32], en[32], cnt[96];
    if (e->mig) {
        snprintf(cnt, sizeof cnt, "%d x %s slice%s", e->mig_count, e->mig->name,
                 e->mig_count > 1 ? "s" : "");
    } else if (strstr(e->plan, "GPU")) {
        snprintf(cnt, sizeof cnt, "%s", e->plan);
    } else {
        snprintf(cnt, sizeof cnt, "%d GPUs: %s", e->gpu_count, e->plan);
    }
    fprintf(f, "Best by %s: %s (%s): %s, %s, %s\n\n", cr_objective_name(a->objective), e->gpu->name,
            cnt,
            is_service(w) ? (e->tpot_ns > 0 ? "meets the latency targets" : "meets the load")
                          : cr__advise_fmt_time((double)e->time_ns / 1e9, t, sizeof t),
            cr__advise_fmt_money(e->cost_usd, c, sizeof c),
            cr__advise_fmt_energy(e->energy_j, en, sizeof en));
}

/* Refusals grouped by identical reason, names first, in catalog order. */
static void print_refused(FILE *f, const cr_advice *a)
{
    if (!a->refused_count) {
        return;
    }
    fprintf(f, "\nCannot run it:\n");
    for (size_t i = 0; i < a->refused_count; i++) {
        const char *why = a->refused[i].reason;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++) {
            seen = !strcmp(a->refused[j].reason, why);
        }
        if (seen) {
            continue;
        }
        fprintf(f, "    %s", a->refused[i].gpu->name);
        for (size_t j = i + 1; j < a->refused_count; j++) {
            if (!strcmp(a->refused[j].reason, why)) {
                fprintf(f, ", %s", a->refused[j].gpu->name);
            }
        }
        fprintf(f, ": %s\n", why);
    }
}

int cr__advise_print_table(FILE *f, const cr_workload *w, const cr_advice *a, int gpus, size_t top)
{
    describe(f, w, a, gpus);
    recommend(f, w, a);
    size_t shown = top && top < a->ranked_count ? top : a->ranked_count;
    if (a->ranked_count == 0) {
        fprintf(f, "No GPU type in the catalog can run it.\n");
    } else {
        fprintf(f, "%-3s %-15s %5s %-18s %9s %9s %9s %9s  %s\n", "#", "GPU type", "GPUs", "plan",
                "time", "GPU-h", "cost", "energy", "why");
    }
    for (size_t i = 0; i < shown; i++) {
        const cr_estimate *e = &a->ranked[i];
        char t[32], gh[32], c[32], en[32], cnt[16];
        if (e->mig) {
            snprintf(cnt, sizeof cnt, "%.2g", e->gpu_share);
        } else {
            snprintf(cnt, sizeof cnt, "%d", e->gpu_count);
        }
        fprintf(f, "%-3zu %-15.15s %5s %-18.18s %9s %9s %9s %9s  %s\n", i + 1, e->gpu->name, cnt,
                e->plan, cr__advise_fmt_time((double)e->time_ns / 1e9, t, sizeof t),
                cr__advise_fmt_count(e->gpu_hours, gh, sizeof gh),
                cr__advise_fmt_money(e->cost_usd, c, sizeof c),
                cr__advise_fmt_energy(e->energy_j, en, sizeof en), e->reason);
    }
    if (shown < a->ranked_count) {
        fprintf(f, "    ... %zu more that can run it (--top 0 shows all)\n",
                a->ranked_count - shown);
    }
    print_refused(f, a);
    int unpriced = 0;
    for (size_t i = 0; i < shown; i++) {
        unpriced += !cr_known(a->ranked[i].cost_usd);
    }
    if (unpriced || a->skipped) {
        fprintf(f, "\n");
    }
    if (unpriced) {
        fprintf(f, "%d type%s without a price (cost \"-\"): give one with --prices FILE.\n",
                unpriced, unpriced > 1 ? "s" : "");
    }
    if (a->skipped) {
        fprintf(f, "%zu non-NVIDIA catalog rows left out (Corral drives GPUs through NVML).\n",
                a->skipped);
    }
    return 0;
}

static json_t *num_or_null(double v)
{
    return cr_known(v) && isfinite(v) ? json_real(v) : json_null();
}

static json_t *estimate_json(const cr_estimate *e, size_t rank)
{
    json_t *o = json_object();
    if (rank) {
        json_object_set_new(o, "rank", json_integer((json_int_t)rank));
    }
    json_object_set_new(o, "gpu", json_string(e->gpu->name));
    json_object_set_new(o, "alias", json_string(e->gpu->alias));
    json_object_set_new(o, "form", json_string(cr_form_name(e->gpu->form)));
    json_object_set_new(o, "memory_type", json_string(e->gpu->mem_type));
    if (rank) {
        json_object_set_new(o, "gpus", json_integer(e->gpu_count));
        json_object_set_new(o, "gpu_share", json_real(e->gpu_share));
        json_object_set_new(o, "nodes", json_integer(e->nodes));
        json_object_set_new(o, "plan", json_string(e->plan));
        json_object_set_new(o, "tp", json_integer(e->tp));
        json_object_set_new(o, "pp", json_integer(e->pp));
        json_object_set_new(o, "dp", json_integer(e->dp));
        json_object_set_new(o, "replicas", json_integer(e->replicas));
        json_object_set_new(o, "mig_profile", e->mig ? json_string(e->mig->name) : json_null());
        json_object_set_new(o, "mig_slices", json_integer(e->mig_count));
        json_object_set_new(o, "time_s", json_real((double)e->time_ns / 1e9));
        json_object_set_new(o, "step_s", json_real((double)e->step_ns / 1e9));
        json_object_set_new(o, "gpu_hours", json_real(e->gpu_hours));
        json_object_set_new(o, "cost_usd", num_or_null(e->cost_usd));
        json_object_set_new(o, "energy_kwh", json_real(e->energy_j / 3.6e6));
        json_object_set_new(o, "mem_per_gpu_gb", json_real(e->mem_per_gpu_bytes / 1e9));
        json_object_set_new(o, "mfu", e->mfu > 0 ? json_real(e->mfu) : json_null());
        json_object_set_new(o, "ttft_ms",
                            e->ttft_ns > 0 ? json_real((double)e->ttft_ns / 1e6) : json_null());
        json_object_set_new(o, "tpot_ms",
                            e->tpot_ns > 0 ? json_real((double)e->tpot_ns / 1e6) : json_null());
        json_object_set_new(o, "throughput", json_real(e->throughput));
        json_object_set_new(o, "wasteful", json_boolean(e->wasteful));
        json_object_set_new(o, "measured", json_boolean(e->measured));
    }
    json_object_set_new(o, "reason", json_string(e->reason));
    return o;
}

int cr__advise_print_json(FILE *f, const cr_workload *w, const cr_advice *a, int gpus, size_t top)
{
    size_t shown = top && top < a->ranked_count ? top : a->ranked_count;
    json_t *doc = json_object();
    json_t *wl = json_object();
    char nb[64];
    json_object_set_new(wl, "kind", json_string(cr_kind_name(w->kind)));
    json_object_set_new(wl, "method", json_string(cr_method_name(w->method)));
    json_object_set_new(wl, "precision", json_string(cr_precision_name(w->precision)));
    json_object_set_new(wl, "params", json_real(w->params));
    if (uses_shape(w)) {
        cr_arch sh;
        int assumed = shape_of(w, &sh);
        json_t *m = json_object();
        json_object_set_new(m, "name", json_string(sh.name[0] ? sh.name : "custom"));
        json_object_set_new(m, "assumed", json_boolean(assumed));
        json_object_set_new(m, "params", json_real(sh.params));
        json_object_set_new(m, "active_params", json_real(sh.active));
        json_object_set_new(m, "layers", json_integer(sh.layers));
        json_object_set_new(m, "hidden", json_integer(sh.hidden));
        json_object_set_new(m, "heads", json_integer(sh.heads));
        json_object_set_new(m, "kv_heads", json_integer(sh.kv_heads));
        json_object_set_new(m, "head_dim", json_integer(sh.head_dim));
        json_object_set_new(m, "experts", json_integer(sh.experts));
        json_object_set_new(m, "experts_active", json_integer(sh.experts_active));
        json_object_set_new(m, "kv_lora_rank", json_integer(sh.kv_lora_rank));
        json_object_set_new(wl, "model", m);
    }
    json_object_set_new(wl, "tokens", json_real(w->tokens));
    json_object_set_new(wl, "rate_per_s", json_real(w->rate_per_s));
    json_object_set_new(wl, "prompt_tokens", json_integer(w->prompt_tokens));
    json_object_set_new(wl, "output_tokens", json_integer(w->output_tokens));
    json_object_set_new(wl, "tenants", json_integer(w->tenants));
    json_object_set_new(wl, "needs", json_string(cr_needs_fmt(w->needs, nb, sizeof nb)));
    json_object_set_new(doc, "workload", wl);
    json_object_set_new(doc, "objective", json_string(cr_objective_name(a->objective)));
    json_object_set_new(doc, "gpus", gpus > 0 ? json_integer(gpus) : json_string("auto"));
    json_t *ranked = json_array();
    for (size_t i = 0; i < shown; i++) {
        json_array_append_new(ranked, estimate_json(&a->ranked[i], i + 1));
    }
    json_object_set_new(doc, "ranked", ranked);
    json_t *refused = json_array();
    for (size_t i = 0; i < a->refused_count; i++) {
        json_array_append_new(refused, estimate_json(&a->refused[i], 0));
    }
    json_object_set_new(doc, "refused", refused);
    json_object_set_new(doc, "skipped_non_nvidia", json_integer((json_int_t)a->skipped));
    int rc = json_dumpf(doc, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    fputc('\n', f);
    json_decref(doc);
    return rc == 0 ? 0 : 1;
}
