/*
 * cr_perf.h - workloads and the performance model: for a workload and a
 * GPU type, does it fit, on how many GPUs, with which parallelism plan, how
 * long does it take, and what does it cost in GPU-hours, energy and money.
 *
 * The model is a roofline (docs/model.md has the equations and the
 * calibration table): training time is FLOPs (6·N·tokens, 4·N·tokens for
 * LoRA/QLoRA, plus attention) over peak dense math at a stated utilisation,
 * plus the exposed time of collectives over NVLink, PCIe or the network;
 * inference decode is memory-bandwidth bound (weights plus KV cache read per
 * token), prefill is compute bound (2·N·prompt). Memory fit counts weights,
 * gradients, optimizer states and activations, or weights plus KV cache.
 * Measured throughputs (Gavel's tables, cr_gavel.h) override the estimate
 * when the workload names a measured job type and the GPU has a Gavel name.
 *
 * Pure functions: no I/O, no clock, no globals; the scheduler and the
 * simulator call them from their own threads. Results are deterministic for
 * equal inputs. Times are int64_t nanoseconds, energy joules, cost US$.
 */
#ifndef CR_PERF_H
#define CR_PERF_H

#include "cr_arch.h"
#include "cr_catalog.h"
#include "cr_gavel.h"
#include "cr_mig.h"
#include "cr_price.h"

#include <stddef.h>
#include <stdint.h>

enum cr_kind {
    CR_KIND_PRETRAIN = 0,
    CR_KIND_FINETUNE,
    CR_KIND_INFERENCE,
    CR_KIND_VISUAL,
    CR_KIND_HPC,
    CR_KIND_BATCH,
    CR_KIND__COUNT
};

enum cr_method { CR_METHOD_FULL = 0, CR_METHOD_LORA, CR_METHOD_QLORA, CR_METHOD__COUNT };

enum cr_precision {
    CR_PREC_BF16 = 0, /* default: bf16 weights/activations, fp32 master + Adam for training */
    CR_PREC_FP16,
    CR_PREC_FP8,
    CR_PREC_INT8,
    CR_PREC_INT4,
    CR_PREC_TF32,
    CR_PREC_FP32,
    CR_PREC_FP64,
    CR_PREC_FP4, /* NVFP4 (E2M1, an FP8 scale per 16 values): Blackwell tensor cores only */
    CR_PREC_FP6, /* MXFP6 (E3M2/E2M3, an 8-bit scale per 32 values): Blackwell only */
    CR_PREC__COUNT
};

enum cr_objective { CR_OBJ_COST = 0, CR_OBJ_TIME, CR_OBJ_ENERGY, CR_OBJ__COUNT };

/* Software stack class (docs/model.md "Software stacks"): each scales the
 * achievable GEMM efficiency and sets the serving memory rule. AUTO is what
 * a user most likely runs: megatron for training, vllm for serving. */
enum cr_stack {
    CR_STACK_AUTO = 0,
    CR_STACK_MEGATRON, /* Megatron-LM / NeMo: the calibration rows' stack */
    CR_STACK_FSDP,     /* PyTorch FSDP (torchtitan, torchtune) */
    CR_STACK_DEEPSPEED,
    CR_STACK_HF, /* Hugging Face Trainer/PEFT (training), transformers generate (serving) */
    CR_STACK_VLLM,
    CR_STACK_TRTLLM,
    CR_STACK_SGLANG,
    CR_STACK__COUNT
};

/* Activation checkpointing (training). AUTO: selective where it fits, else
 * full (what Megatron and torchtitan users switch to when memory runs out). */
enum cr_ckpt { CR_CKPT_AUTO = 0, CR_CKPT_NONE, CR_CKPT_SELECTIVE, CR_CKPT_FULL, CR_CKPT__COUNT };

#define CR_BEAMS_MAX 64 /* largest --beams / n */

#define CR_LORA_RANK_MAX 4096 /* largest --lora-rank */

/* Hard needs (bit set). */
#define CR_NEED_FP64   (1u << 0) /* full-rate FP64 (at least 1/4 of FP32) */
#define CR_NEED_ECC    (1u << 1) /* ECC on device memory */
#define CR_NEED_NVENC  (1u << 2) /* hardware video encoder */
#define CR_NEED_RT     (1u << 3) /* ray-tracing cores */
#define CR_NEED_MIG    (1u << 4) /* MIG partitioning */
#define CR_NEED_NVLINK (1u << 5) /* NVLink between GPUs */

/* A workload. A transparent value type; cr_workload_init sets the defaults
 * below, then callers set what they know. Zero/negative targets mean "none". */
typedef struct cr_workload {
    int kind;      /* enum cr_kind */
    int method;    /* enum cr_method (finetune; pretrain is always full) */
    int lora_rank; /* LoRA/QLoRA adapter rank on every linear layer; 0 = 16 */
    int full_loss; /* training: 1 = logits and loss over the whole vocabulary at once
                      (Hugging Face Trainer); 0 = in chunks (torchtune, Megatron) */
    int precision; /* enum cr_precision */

    double params; /* model parameters, count (7e9); 0 = kind default */
    /* Model shape (cr_arch.h); arch.layers == 0: a default GQA shape for
     * params (cr_arch_default). When set, arch.params/active win. */
    cr_arch arch;
    int fix_tp, fix_pp; /* force tensor / pipeline parallel ways; 0 = search */
    int kv_precision;   /* KV cache: bf16, fp16 or fp8; -1 = fp8 with fp8/fp6/fp4 weights, else bf16
                         */
    double tokens;      /* training tokens (pretrain/finetune) */
    int seq_len;        /* sequence length, tokens (default 4096 pretrain, 2048 finetune) */
    int batch;          /* global batch, sequences (default: ~4M tokens pretrain, 16 finetune) */
    int micro_batch;    /* sequences per micro-batch per data-parallel rank; 0 = 1 */
    int ckpt;           /* enum cr_ckpt (training) */
    int stack;          /* enum cr_stack */

    /* Inference load (kind inference). */
    double rate_per_s;   /* requests per second (total over tenants); 0 means 1 */
    int prompt_tokens;   /* mean prompt length (default 1000) */
    int output_tokens;   /* mean output length (default 250) */
    int64_t ttft_ns;     /* time-to-first-token target, 0 = default 2 s */
    int64_t tpot_ns;     /* time-per-output-token target, 0 = default 50 ms */
    int tenants;         /* independent isolated services sharing the load (default 1) */
    int beams;           /* sequences decoded per request: beam width or n samples; 0 = 1 */
    double gpu_mem_util; /* serving: share of the memory the card reports that the engine may
                            use (vLLM gpu_memory_utilization); 0 = the stack's default */

    /* Visual (kind visual): concurrent 1080p30 video streams, each decoded
     * and run through a detector of frame_flops FLOPs per frame. */
    double streams;
    double frame_flops; /* default 10e9 */
    /* Stream format (default 1920x1080 at 30 fps) and, when enc_codec is
     * set (enum cr_codec, cr_nvenc.h), an NVENC encode of every stream at
     * enc_preset (1, 3, 5, 7) with CBR (enc_cbr 1) or VBR rate control. */
    int video_w, video_h;
    double video_fps;
    int enc_codec, enc_preset, enc_cbr;

    /* HPC / batch: total work in FLOPs (FP64 for hpc), and arithmetic
     * intensity (FLOP per byte of memory traffic) for the roofline. */
    double work_flops;
    double flops_per_byte; /* default 8 (hpc), 50 (batch); --intensity or a kernel class */

    int64_t duration_ns;    /* serving window for inference/visual cost (default 1 h);
                               deadline used to size "auto" GPU counts for
                               training (default 30 days) */
    unsigned needs;         /* CR_NEED_* */
    uint64_t min_mem_bytes; /* minimum memory per GPU (or slice), 0 = none */

    /* Measured override: a Gavel job type ("ResNet-50 (batch size 64)")
     * and the job's total steps; NULL/0 = estimate only. Borrowed. */
    const char *measured_job;
    double steps;
} cr_workload;

/* Borrowed context for estimates; prices and measured may be NULL. */
typedef struct cr_perf_env {
    const cr_catalog *catalog;
    const cr_prices *prices;
    const cr_gavel *measured;
} cr_perf_env;

#define CR_REASON_MAX 240
#define CR_PLAN_MAX   48

/* The estimate for one (workload, GPU type). */
typedef struct cr_estimate {
    const cr_gpu_type *gpu;     /* borrowed from the catalog */
    int fits;                   /* 1 runnable; 0 refused (reason says why) */
    int wasteful;               /* 1 when it runs but leaves most of the GPU idle */
    char reason[CR_REASON_MAX]; /* one line: why it ranks here, or why refused */
    char plan[CR_PLAN_MAX];     /* "tp8 x pp2 x dp64", "4 x tp2", "7 x mig 1g.10gb" */

    int gpu_count; /* whole GPUs occupied */
    int nodes;     /* 8-GPU nodes (or NVLink domains) spanned */
    int dp, tp, pp;
    int ep;                    /* expert-parallel ways (MoE), 1 otherwise */
    int cp;                    /* context-parallel ways (training, long sequences), 1 otherwise */
    int micro_batch;           /* training: sequences per micro-batch per data-parallel rank */
    int global_batch;          /* training: sequences per optimizer step; 0 otherwise */
    int ckpt;                  /* training: enum cr_ckpt the plan uses (never AUTO) */
    int replicas;              /* inference/visual: serving replicas */
    const cr_mig_profile *mig; /* non-NULL when the plan uses MIG slices */
    int mig_count;             /* slices used */
    double gpu_share;          /* GPUs billed: gpu_count, or slices x slice share */

    int64_t time_ns;          /* training/hpc/batch: run time; inference/visual: window */
    int64_t step_ns;          /* training: one optimizer step */
    int64_t ttft_ns;          /* inference: predicted time to first token */
    int64_t tpot_ns;          /* inference: predicted time per output token */
    double gpu_hours;         /* gpu_share x hours */
    double energy_j;          /* GPU board energy */
    double cost_usd;          /* CR_UNKNOWN when the type has no price */
    double mem_per_gpu_bytes; /* memory needed per GPU (or slice) */
    double mfu;               /* training: model FLOPs utilisation */
    double throughput;        /* work per second: tokens/s (training), output tokens/s
                                 capacity (inference), streams (visual), FLOP/s (hpc,
                                 batch), steps/s (measured) */
    double progress_per_s;    /* fraction of the job done per second (1/time);
                                 services (inference, visual): 1/window, equal on
                                 every type that meets the targets */
    int measured;             /* 1 when time came from a measured table */
} cr_estimate;

/* The ranked answer for a workload over a whole catalog. */
typedef struct cr_advice {
    cr_estimate *ranked; /* runnable types, best first */
    size_t ranked_count;
    cr_estimate *refused; /* types that cannot run it, catalog order */
    size_t refused_count;
    size_t skipped; /* non-NVIDIA rows left out (Corral drives NVML only) */
    int objective;  /* enum cr_objective used */
} cr_advice;

/* Defaults: kind pretrain, method full, bf16, tenants 1, ... (see above). */
void cr_workload_init(cr_workload *w);

/* Check a workload for consistency (kind needs params, inference needs a
 * rate, ...). Returns 0 or CR_EINVAL with a message naming the field. */
int cr_workload_check(const cr_workload *w, char *err, size_t err_len);

/*
 * Estimate w on gpu. gpu_count 0 means "auto" (the minimum that fits and
 * meets the targets / deadline); otherwise the count is fixed and the plan
 * adapts. Always fills *out (fits = 0 with a reason when refused); returns
 * 0, or CR_EINVAL for a bad workload.
 */
int cr_perf_estimate(const cr_perf_env *env, const cr_workload *w, const cr_gpu_type *gpu,
                     int gpu_count, cr_estimate *out);

/* Estimate on every catalog type and rank the runnable ones by objective
 * (ties: time, then cost, then catalog order). Skips non-NVIDIA rows.
 * out is caller-owned (free its arrays with cr_advice_fini). */
int cr_perf_advise(const cr_perf_env *env, const cr_workload *w, int objective, int gpu_count,
                   cr_advice *out);
void cr_advice_fini(cr_advice *a);

/*
 * For the scheduler's heterogeneity-aware policy: throughput of w on every
 * catalog type at a fixed gpu_count (0 = auto), as progress per second
 * (0 where it does not fit), written to out[0 .. catalog count - 1].
 * Returns the number of types where it fits.
 */
int cr_perf_throughputs(const cr_perf_env *env, const cr_workload *w, int gpu_count, double *out);

/* Names <-> enums ("pretrain", "lora", "bf16", "cost"); parse returns 0 or
 * CR_EINVAL. The *_values strings list the allowed values for messages. */
int cr_kind_parse(const char *s, int *out);
const char *cr_kind_name(int kind);
int cr_method_parse(const char *s, int *out);
const char *cr_method_name(int method);
int cr_precision_parse(const char *s, int *out);
const char *cr_precision_name(int precision);
int cr_objective_parse(const char *s, int *out);
const char *cr_objective_name(int objective);
int cr_stack_parse(const char *s, int *out);
const char *cr_stack_name(int stack);
int cr_ckpt_parse(const char *s, int *out);
const char *cr_ckpt_name(int ckpt);
/* The stack a workload runs on once AUTO is resolved for its kind. */
int cr_stack_resolve(const cr_workload *w);
/* The serving memory budget per GPU the model uses for w on g, bytes:
 * the stack's share of the memory the card reports (docs/model.md). */
double cr_perf_serve_mem_bytes(const cr_workload *w, const cr_gpu_type *g);
/* Bytes the card reports to CUDA (nvidia-smi "Total"): memory_gb GiB,
 * less ECC's 1/16 on GDDR, less 0.44% on HBM (H100 80GB: 79.6 GiB). */
double cr_gpu_reported_mem_bytes(const cr_gpu_type *g);
/* One line per assumption the model makes for w (defaults it filled in,
 * stack, checkpointing, memory rule), written to buf; returns buf. */
char *cr_perf_explain(const cr_workload *w, char *buf, size_t len);
/* "fp64,ecc,nvenc,rt,mig,nvlink" into CR_NEED_* bits; CR_EINVAL names the
 * first bad item in err. */
int cr_needs_parse(const char *s, unsigned *out, char *err, size_t err_len);
/* Comma-separated names of the bits set, into buf. */
char *cr_needs_fmt(unsigned needs, char *buf, size_t len);

#define CR_KIND_VALUES         "pretrain|finetune|inference|visual|hpc|batch"
#define CR_METHOD_VALUES       "full|lora|qlora"
#define CR_PRECISION_VALUES    "bf16|fp16|fp8|int8|int4|tf32|fp32|fp64|fp4|fp6"
#define CR_KV_PRECISION_VALUES "bf16|fp16|fp8"
#define CR_OBJECTIVE_VALUES    "time|cost|energy"
#define CR_NEEDS_VALUES        "fp64,ecc,nvenc,rt,mig,nvlink"
#define CR_STACK_VALUES        "megatron|fsdp|deepspeed|hf|vllm|trtllm|sglang"
#define CR_TRAIN_STACK_VALUES  "megatron|fsdp|deepspeed|hf"
#define CR_SERVE_STACK_VALUES  "vllm|trtllm|sglang|hf"
#define CR_CKPT_VALUES         "none|selective|full"

#endif
