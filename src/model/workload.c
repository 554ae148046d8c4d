/* Workload defaults, validation and the names of the enums. */
#include "cr_perf.h"

#include "cr_error.h"
#include "cr_nvenc.h"
#include "cr_time.h"
#include "model_int.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const kind_names[CR_KIND__COUNT] = {"pretrain", "finetune", "inference",
                                                       "visual",   "hpc",      "batch"};
static const char *const method_names[CR_METHOD__COUNT] = {"full", "lora", "qlora"};
static const char *const prec_names[CR_PREC__COUNT] = {"bf16", "fp16", "fp8",  "int8", "int4",
                                                       "tf32", "fp32", "fp64", "fp4",  "fp6"};
static const char *const obj_names[CR_OBJ__COUNT] = {"cost", "time", "energy"};
static const char *const stack_names[CR_STACK__COUNT] = {"auto", "megatron", "fsdp",   "deepspeed",
                                                         "hf",   "vllm",     "trtllm", "sglang"};
static const char *const ckpt_names[CR_CKPT__COUNT] = {"auto", "none", "selective", "full"};
static const char *const need_names[] = {"fp64", "ecc", "nvenc", "rt", "mig", "nvlink"};

static int lookup(const char *s, const char *const *names, int n, int *out)
{
    for (int i = 0; s && i < n; i++) {
        if (!strcasecmp(s, names[i])) {
            *out = i;
            return 0;
        }
    }
    return CR_EINVAL;
}

int cr_kind_parse(const char *s, int *out)
{
    return lookup(s, kind_names, CR_KIND__COUNT, out);
}

const char *cr_kind_name(int kind)
{
    return kind >= 0 && kind < CR_KIND__COUNT ? kind_names[kind] : "?";
}

int cr_method_parse(const char *s, int *out)
{
    return lookup(s, method_names, CR_METHOD__COUNT, out);
}

const char *cr_method_name(int method)
{
    return method >= 0 && method < CR_METHOD__COUNT ? method_names[method] : "?";
}

int cr_precision_parse(const char *s, int *out)
{
    return lookup(s, prec_names, CR_PREC__COUNT, out);
}

const char *cr_precision_name(int precision)
{
    return precision >= 0 && precision < CR_PREC__COUNT ? prec_names[precision] : "?";
}

int cr_objective_parse(const char *s, int *out)
{
    return lookup(s, obj_names, CR_OBJ__COUNT, out);
}

const char *cr_objective_name(int objective)
{
    return objective >= 0 && objective < CR_OBJ__COUNT ? obj_names[objective] : "?";
}

int cr_stack_parse(const char *s, int *out)
{
    return lookup(s, stack_names, CR_STACK__COUNT, out);
}

const char *cr_stack_name(int stack)
{
    return stack >= 0 && stack < CR_STACK__COUNT ? stack_names[stack] : "?";
}

int cr_ckpt_parse(const char *s, int *out)
{
    return lookup(s, ckpt_names, CR_CKPT__COUNT, out);
}

const char *cr_ckpt_name(int ckpt)
{
    return ckpt >= 0 && ckpt < CR_CKPT__COUNT ? ckpt_names[ckpt] : "?";
}

static int is_training(int kind)
{
    return kind == CR_KIND_PRETRAIN || kind == CR_KIND_FINETUNE;
}

int cr_stack_resolve(const cr_workload *w)
{
    if (w->stack != CR_STACK_AUTO) {
        return w->stack;
    }
    return is_training(w->kind) ? CR_STACK_MEGATRON : CR_STACK_VLLM;
}

int cr_needs_parse(const char *s, unsigned *out, char *err, size_t err_len)
{
    unsigned needs = 0;
    const char *p = s ? s : "";
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        int found = -1;
        for (size_t i = 0; i < sizeof need_names / sizeof need_names[0]; i++) {
            if (strlen(need_names[i]) == n && !strncasecmp(p, need_names[i], n)) {
                found = (int)i;
            }
        }
        if (found < 0) {
            cr__model_errf(err, err_len, "unknown need \"%.*s\"", (int)(n > 40 ? 40 : n), p);
            return CR_EINVAL;
        }
        needs |= 1u << found;
        p += n;
        if (*p == ',') {
            p++;
            if (!*p) {
                cr__model_errf(err, err_len, "empty item after ','");
                return CR_EINVAL;
            }
        }
    }
    *out = needs;
    return 0;
}

char *cr_needs_fmt(unsigned needs, char *buf, size_t len)
{
    size_t used = 0;
    if (len) {
        buf[0] = '\0';
    }
    for (size_t i = 0; i < sizeof need_names / sizeof need_names[0]; i++) {
        if (needs & (1u << i)) {
            int n = snprintf(buf + used, len > used ? len - used : 0, "%s%s", used ? "," : "",
                             need_names[i]);
            if (n > 0) {
                used += (size_t)n;
            }
        }
    }
    return buf;
}

void cr_workload_init(cr_workload *w)
{
    memset(w, 0, sizeof *w);
    w->kind = CR_KIND_PRETRAIN;
    w->method = CR_METHOD_FULL;
    w->precision = CR_PREC_BF16;
    w->prompt_tokens = 1000;
    w->output_tokens = 250;
    w->tenants = 1;
    w->frame_flops = 10e9;
    w->video_w = 1920;
    w->video_h = 1080;
    w->video_fps = 30;
    w->enc_preset = 5;
    w->kv_precision = -1;
}

int cr_workload_check(const cr_workload *w, char *err, size_t err_len)
{
    if (w->kind < 0 || w->kind >= CR_KIND__COUNT) {
        cr__model_errf(err, err_len, "kind: must be one of %s", CR_KIND_VALUES);
        return CR_EINVAL;
    }
    if (w->method < 0 || w->method >= CR_METHOD__COUNT) {
        cr__model_errf(err, err_len, "method: must be one of %s", CR_METHOD_VALUES);
        return CR_EINVAL;
    }
    if (w->precision < 0 || w->precision >= CR_PREC__COUNT) {
        cr__model_errf(err, err_len, "precision: must be one of %s", CR_PRECISION_VALUES);
        return CR_EINVAL;
    }
    if ((w->precision == CR_PREC_FP4 || w->precision == CR_PREC_FP6) &&
        (w->kind == CR_KIND_PRETRAIN || w->kind == CR_KIND_FINETUNE)) {
        /* No calibrated training recipe at 4/6 bits: the model would guess. */
        cr__model_errf(err, err_len,
                       "precision: %s is for serving and batch work here (weights in %s); "
                       "training takes bf16|fp16|fp8|tf32|fp32",
                       cr_precision_name(w->precision), cr_precision_name(w->precision));
        return CR_EINVAL;
    }
    if (w->kind == CR_KIND_PRETRAIN && w->method != CR_METHOD_FULL) {
        cr__model_errf(err, err_len, "method: pretrain trains all weights (method full)");
        return CR_EINVAL;
    }
    if (w->lora_rank < 0 || w->lora_rank > CR_LORA_RANK_MAX) {
        cr__model_errf(err, err_len, "lora-rank: must be in [1, %d]", CR_LORA_RANK_MAX);
        return CR_EINVAL;
    }
    if (!(w->params >= 0 && w->params <= 1e14)) {
        cr__model_errf(err, err_len, "params: must be in [0, 1e14]");
        return CR_EINVAL;
    }
    if (!(w->tokens >= 0 && w->tokens <= 1e16)) {
        cr__model_errf(err, err_len, "tokens: must be in [0, 1e16]");
        return CR_EINVAL;
    }
    if (w->seq_len < 0 || w->seq_len > 10000000 || w->batch < 0 || w->batch > 100000000) {
        cr__model_errf(err, err_len, "seq/batch: out of range");
        return CR_EINVAL;
    }
    if (!(w->rate_per_s >= 0 && w->rate_per_s <= 1e7)) {
        cr__model_errf(err, err_len, "rate: must be in [0, 1e7] requests/s");
        return CR_EINVAL;
    }
    if (w->prompt_tokens < 0 || w->prompt_tokens > 10000000 || w->output_tokens < 0 ||
        w->output_tokens > 10000000) {
        cr__model_errf(err, err_len, "prompt/output: must be in [0, 1e7] tokens");
        return CR_EINVAL;
    }
    if (w->kind == CR_KIND_INFERENCE && w->output_tokens < 1) {
        cr__model_errf(err, err_len, "output: inference needs at least 1 output token");
        return CR_EINVAL;
    }
    if (w->stack < 0 || w->stack >= CR_STACK__COUNT) {
        cr__model_errf(err, err_len, "stack: must be one of %s", CR_STACK_VALUES);
        return CR_EINVAL;
    }
    if (is_training(w->kind) && w->stack >= CR_STACK_VLLM) {
        cr__model_errf(err, err_len, "stack: %s is a serving stack; training takes one of %s",
                       cr_stack_name(w->stack), CR_TRAIN_STACK_VALUES);
        return CR_EINVAL;
    }
    if (w->kind == CR_KIND_INFERENCE && w->stack != CR_STACK_AUTO && w->stack != CR_STACK_HF &&
        w->stack < CR_STACK_VLLM) {
        cr__model_errf(err, err_len, "stack: %s is a training stack; serving takes one of %s",
                       cr_stack_name(w->stack), CR_SERVE_STACK_VALUES);
        return CR_EINVAL;
    }
    if (w->ckpt < 0 || w->ckpt >= CR_CKPT__COUNT) {
        cr__model_errf(err, err_len, "checkpointing: must be one of %s", CR_CKPT_VALUES);
        return CR_EINVAL;
    }
    if (w->micro_batch < 0 || w->micro_batch > 100000000) {
        cr__model_errf(err, err_len, "micro-batch: must be in [1, 1e8] sequences");
        return CR_EINVAL;
    }
    if (w->micro_batch > 0 && w->batch > 0 && w->micro_batch > w->batch) {
        cr__model_errf(err, err_len, "micro-batch: %d sequences exceed the global batch of %d",
                       w->micro_batch, w->batch);
        return CR_EINVAL;
    }
    if (w->micro_batch > 0 && w->batch > 0 && w->batch % w->micro_batch) {
        cr__model_errf(err, err_len,
                       "batch: %d sequences is not a whole number of micro-batches of %d", w->batch,
                       w->micro_batch);
        return CR_EINVAL;
    }
    if (w->beams < 0 || w->beams > CR_BEAMS_MAX) {
        cr__model_errf(err, err_len, "beams: must be in [1, %d]", CR_BEAMS_MAX);
        return CR_EINVAL;
    }
    if (!(w->gpu_mem_util == 0 || (w->gpu_mem_util >= 0.05 && w->gpu_mem_util <= 1))) {
        cr__model_errf(err, err_len, "gpu-memory-utilization: must be in [0.05, 1]");
        return CR_EINVAL;
    }
    if (w->arch.layers > 0 && w->arch.context > 0 && w->kind == CR_KIND_INFERENCE &&
        (int64_t)w->prompt_tokens + w->output_tokens > w->arch.context) {
        cr__model_errf(err, err_len,
                       "prompt/output: %d + %d tokens exceed %s's context of %d tokens",
                       w->prompt_tokens, w->output_tokens, w->arch.name, w->arch.context);
        return CR_EINVAL;
    }
    if (w->ttft_ns < 0 || w->tpot_ns < 0 || w->duration_ns < 0) {
        cr__model_errf(err, err_len, "ttft/tpot/duration: must not be negative");
        return CR_EINVAL;
    }
    if (w->tenants < 1 || w->tenants > 100000) {
        cr__model_errf(err, err_len, "tenants: must be in [1, 100000]");
        return CR_EINVAL;
    }
    if (!(w->streams >= 0 && w->streams <= 1e6) ||
        !(w->frame_flops >= 0 && w->frame_flops < 1e16)) {
        cr__model_errf(err, err_len, "streams: must be in [0, 1e6]");
        return CR_EINVAL;
    }
    if (w->video_w < 0 || w->video_w > 8192 || w->video_h < 0 || w->video_h > 8192 ||
        !(w->video_fps >= 0 && w->video_fps <= 480)) {
        cr__model_errf(err, err_len, "resolution/fps: must be at most 8192x8192 at 480 fps");
        return CR_EINVAL;
    }
    if (w->enc_codec < CR_CODEC_NONE || w->enc_codec > CR_CODEC_AV1 ||
        (w->enc_codec != CR_CODEC_NONE && w->enc_preset != 1 && w->enc_preset != 3 &&
         w->enc_preset != 5 && w->enc_preset != 7)) {
        cr__model_errf(err, err_len, "codec/preset: codec must be one of %s, preset one of %s",
                       CR_CODEC_VALUES, CR_PRESET_VALUES);
        return CR_EINVAL;
    }
    if (!(w->work_flops >= 0 && w->work_flops <= 1e26) ||
        !(w->flops_per_byte >= 0 && w->flops_per_byte <= 1e6)) {
        cr__model_errf(err, err_len, "work: must be in [0, 1e26] FLOPs");
        return CR_EINVAL;
    }
    if (w->kv_precision != -1 && w->kv_precision != CR_PREC_BF16 &&
        w->kv_precision != CR_PREC_FP16 && w->kv_precision != CR_PREC_FP8) {
        cr__model_errf(err, err_len, "kv-precision: must be one of %s", CR_KV_PRECISION_VALUES);
        return CR_EINVAL;
    }
    if (w->fix_tp < 0 || w->fix_tp > 64 || (w->fix_tp & (w->fix_tp - 1)) || w->fix_pp < 0 ||
        w->fix_pp > 64 || (w->fix_pp & (w->fix_pp - 1))) {
        cr__model_errf(err, err_len, "tp/pp: must be a power of two in [1, 64]");
        return CR_EINVAL;
    }
    if (w->arch.layers != 0 && cr_arch_check(&w->arch, err, err_len) != 0) {
        return CR_EINVAL;
    }
    if (w->needs >> 6) {
        cr__model_errf(err, err_len, "needs: unknown bits; allowed %s", CR_NEEDS_VALUES);
        return CR_EINVAL;
    }
    if (!(w->steps >= 0 && w->steps <= 1e15)) {
        cr__model_errf(err, err_len, "steps: must be in [0, 1e15]");
        return CR_EINVAL;
    }
    return 0;
}
