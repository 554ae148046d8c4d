/*
 * perf.c - the roofline performance model behind cr_perf_estimate.
 *
 * Every constant below is a stated assumption, listed with its source or
 * its calibration case in docs/model.md; change them there and here
 * together. The model is deliberately small: a handful of efficiencies,
 * one shape table, one collective model. It aims for the right order and
 * the right ranking (within +-30% of published numbers), not for a
 * simulator's precision.
 */
#include "cr_perf.h"

#include "cr_error.h"
#include "cr_nvenc.h"
#include "cr_time.h"
#include "model_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- assumptions (docs/model.md, "Constants") ---- */

#define USABLE_MEM_FRAC   0.90  /* vLLM's default gpu_memory_utilization */
#define TRAIN_MEM_RESERVE 2.0e9 /* training: CUDA context + NCCL buffers; "80 GB" = 80 GiB */
#define RUNTIME_OVERHEAD  1.0e9 /* CUDA context, allocator slack, buffers */
#define DECODE_BW_EFF     0.80  /* achieved fraction of peak HBM/GDDR bandwidth in decode */
#define DECODE_COMP_EFF   0.50  /* decode GEMMs, share of the prefill efficiency (fit) */
#define KV_BW_EFF         0.60  /* paged-attention KV reads at large batch (fit: TRT-LLM rows) */
/* Serving at FP4: the share of the efficiency at the FP4 peak that the
 * FP8 rows reach (only the GEMMs run in NVFP4; attention, norms and the
 * activations' quantisation do not). Fit: the TensorRT-LLM B200 FP4 rows. */
#define FP4_SERVE_FACTOR  0.65
#define MOE_SERVE_EFF     0.30 /* MoE grouped GEMMs + routing, share of dense efficiency (fit) */
#define PREFILL_EFF       0.50 /* fraction of dense peak in prefill GEMMs */
#define PREFILL_EFF_GA100 0.68 /* A100/A30 FP16 GEMMs run closer to peak (TensorRT-LLM rows) */
#define NVLINK_EFF        0.80 /* achieved fraction of per-direction NVLink bandwidth */
#define PCIE_EFF          0.50 /* PCIe collectives staged through host memory */
#define NET_EFF           0.80 /* achieved fraction of the NIC line rate */
#define NVLINK_LAT_S      2e-6
#define PCIE_LAT_S        8e-6
#define NET_LAT_S         10e-6
#define LAYER_STEP_S      50e-6 /* per layer per decode step: launches, norms, sampling */
#define KV_BLOCK_TOKENS   8     /* half a 16-token paged-KV block wasted per sequence */
#define MAX_SERVE_PP      8     /* pipeline stages tried for serving */
#define MIN_PP_NET_GBPS   100   /* NIC share per GPU for pipeline stages across servers */
#define CHUNK_TOKENS      2048  /* prefill tokens per engine iteration (chunked prefill) */
#define GEMM_TILE         128.0 /* GEMM output tile per thread block (CUTLASS/cuBLAS 128x128) */
#define DP_OVERLAP        0.50  /* share of compute the gradient all-reduce can hide under */
#define NODE_GPUS         8     /* GPUs per server */
#define MAX_GPUS          16384
#define FP8_TRAIN_FACTOR  0.85 /* share of the bf16 efficiency kept at FP8 peak */
#define PP_VIRTUAL        4    /* interleaved pipeline chunks per stage (Megatron) */
#define MOE_TRAIN_FACTOR  0.75 /* share of the dense efficiency kept by MoE layers (assumed) */
#define LORA_RANK         16   /* adapters on every linear layer (attention and MLP) */
#define LOGIT_BYTES       2.0  /* per token and vocab entry: bf16 logits, loss in chunks (fit) */
#define LOGIT_BYTES_FULL  14.0 /* the same, loss over the whole vocabulary at once (fit) */
/* Saturated throughput of a MIG slice against its hardware share (compute
 * and memory slices): MLPerf Inference v1.0 closed, NVIDIA, A30 1g.6gb
 * ("1x1g.3gb" in the submission) against the whole A30, Offline: BERT-99
 * 339.5 / 1649.9 = 0.206 and ResNet-50 4049 / 17484 = 0.232 of the GPU for
 * a quarter of it: 82% and 93% of the share, mean 0.87 (fit). */
#define MIG_SLICE_EFF  0.87
#define QLORA_WEIGHT_B 0.55 /* NF4 weights + quantisation constants, bytes/param */
/* Activation checkpointing (Korthikanti et al. 2022, arXiv:2205.05198):
 * full recompute reruns each layer's forward in the backward pass (one
 * forward of the three passes: +1/3 of the compute); selective recompute
 * of attention costs ~2% there and nothing under flash attention, whose
 * backward recomputes the attention anyway. */
#define RECOMPUTE_FULL    (4.0 / 3.0)
#define ACT_LAYER_BYTES   34.0   /* bytes stored per token per hidden unit per layer (ibid.) */
#define HBM_REPORTED_FRAC 0.9956 /* H100 80GB: 81,559 of 81,920 MiB reported */
#define GDDR_ECC_FRAC     0.9375 /* ECC on GDDR holds back 1/16 of the memory */
#define TRTLLM_RUNTIME_B  1.0e9  /* TensorRT-LLM runtime buffers before its KV share */
#define TRAIN_POWER_FRAC  0.85   /* board power drawn while training, of TDP */
#define SERVE_POWER_FRAC  0.70
#define NVDEC_STREAMS     18.0 /* 1080p30 H.264 streams one NVDEC engine sustains */
#define VISUAL_EFF        0.30 /* fraction of int8/fp16 peak a detector pipeline reaches */
#define HPC_EFF           0.60 /* fraction of FP64 peak an MD/stencil code reaches */
#define HPC_BW_EFF        0.80
#define DEFAULT_DEADLINE  (30 * 24 * CR_NS_PER_H)
#define DEFAULT_WINDOW    CR_NS_PER_H
#define DEFAULT_TTFT      (2 * CR_NS_PER_SEC)
#define DEFAULT_TPOT      (50 * CR_NS_PER_MS)

/* ZeRO-3 / FSDP: each layer's all-gather is prefetched under the layer
 * before it, forward and backward, and its reduce-scatter runs under the
 * backward of the layers below: the traffic can hide under all of the
 * step's compute, not only the backward's tail (torchtitan FSDP2, DeepSpeed
 * ZeRO-3 prefetch). */
#define ZERO3_OVERLAP 1.00

/* The model's shape: the workload's architecture, or the default GQA shape
 * for its parameter count (cr_arch_default, docs/model.md "Model shapes"). */
static void arch_of(const cr_workload *w, cr_arch *a)
{
    if (w->arch.layers > 0) {
        *a = w->arch;
        return;
    }
    cr_arch_default(w->params > 0 ? w->params : 7e9, a);
}

/* The KV cache's format when none is asked: fp8 with fp8, fp6 or fp4
 * weights (NVIDIA's FP4/FP8 checkpoints quantise the KV cache to fp8),
 * else bf16. */
static int default_kv(int precision)
{
    return precision == CR_PREC_FP8 || precision == CR_PREC_FP6 || precision == CR_PREC_FP4
               ? CR_PREC_FP8
               : CR_PREC_BF16;
}

static double prec_bytes(int precision)
{
    switch (precision) {
    case CR_PREC_FP8:
    case CR_PREC_INT8:
        return 1;
    case CR_PREC_INT4:
        return 0.55;
    case CR_PREC_FP4:
        return 0.5625; /* NVFP4: 4 bits + one 8-bit scale per 16 values */
    case CR_PREC_FP6:
        return 0.78125; /* MXFP6: 6 bits + one 8-bit scale per 32 values */
    case CR_PREC_TF32:
    case CR_PREC_FP32:
        return 4;
    case CR_PREC_FP64:
        return 8;
    default:
        return 2;
    }
}

static int arch_has(const cr_gpu_type *g, const char *s)
{
    return strstr(g->arch, s) != NULL;
}

/* Achievable fraction of dense peak for large transformer GEMMs, by
 * generation (calibrated in docs/model.md: Megatron-LM on A100, Llama 3 on
 * H100, MLPerf). Power-capped cards lose more (L4 at 72 W). */
static double arch_eff(const cr_gpu_type *g)
{
    double e;
    if (arch_has(g, "Hopper")) {
        e = 0.52;
    } else if (arch_has(g, "Blackwell")) {
        e = 0.50;
    } else if (arch_has(g, "GA100")) {
        e = 0.52; /* fit: Megatron-LM 1T on 3,072 A100 under full recompute */
    } else if (arch_has(g, "Ampere") || arch_has(g, "Ada")) {
        e = 0.45;
    } else if (arch_has(g, "Volta")) {
        e = 0.45;
    } else if (arch_has(g, "Turing")) {
        e = 0.35;
    } else {
        e = 0.40;
    }
    if (g->tdp_w > 0 && g->tdp_w < 100) {
        e *= 0.70;
    }
    return e;
}

/* Share of the calibrated (Megatron/NeMo, TensorRT-LLM) efficiency a
 * software stack reaches, docs/model.md "Software stacks", with the rows
 * each factor was fitted on. Training factors scale the GEMM efficiency;
 * serving factors scale the prefill and decode GEMMs (a bandwidth-bound
 * decode at low batch is the same on every engine). */
static double stack_eff(int stack)
{
    switch (stack) {
    case CR_STACK_FSDP:
    case CR_STACK_DEEPSPEED:
        return 1.00; /* torchtitan FSDP2 rows (fit: Llama 3.1 8B on 8 H100) */
    case CR_STACK_HF:
        return 0.55; /* fit: ms-swift Qwen-7B LoRA on one A100 (HF Trainer + PEFT) */
    case CR_STACK_VLLM:
        return 0.88; /* Spheron, Mar 2026: 1,850 / 2,100 tok/s of TensorRT-LLM, 70B fp8 H100 */
    case CR_STACK_SGLANG:
        return 0.91; /* same benchmark: 1,920 / 2,100 */
    default:
        return 1.00; /* megatron, trtllm: the calibration rows' stacks */
    }
}

static double pos(double x)
{
    return x > 0 ? x : 0;
}

static double usable_mem(double mem_bytes)
{
    return mem_bytes * USABLE_MEM_FRAC - RUNTIME_OVERHEAD;
}

double cr_gpu_reported_mem_bytes(const cr_gpu_type *g)
{
    double gib = (double)g->mem_bytes / 1e9 * 1073741824.0;
    return gib * (g->mem_hbm ? HBM_REPORTED_FRAC : GDDR_ECC_FRAC);
}

/* Serving memory per GPU for weights and KV, by stack: vLLM and SGLang
 * cap the engine at a share of the reported memory (gpu_memory_utilization
 * 0.90, mem_fraction_static 0.88); TensorRT-LLM loads the weights, then
 * takes 0.90 of what is free for the KV cache (kv_cache_config
 * free_gpu_memory_fraction); Hugging Face transformers has no cap (all but
 * 1 GB). wgpu: weight bytes per GPU. */
typedef struct serve_mem {
    double rep;        /* bytes the card reports */
    double frac;       /* the stack's share */
    int after_weights; /* 1: frac of what the weights leave (TensorRT-LLM) */
} serve_mem;

static serve_mem serve_mem_of(const cr_workload *w, const cr_gpu_type *g)
{
    serve_mem m = {cr_gpu_reported_mem_bytes(g), 0.90, 0};
    switch (cr_stack_resolve(w)) {
    case CR_STACK_TRTLLM:
        m.after_weights = 1;
        break;
    case CR_STACK_SGLANG:
        m.frac = 0.88;
        break;
    case CR_STACK_HF:
        m.frac = 1.0 - RUNTIME_OVERHEAD / m.rep;
        break;
    default:
        break;
    }
    if (w->gpu_mem_util > 0) {
        m.frac = w->gpu_mem_util;
    }
    return m;
}

static double serve_budget(const serve_mem *m, double wgpu)
{
    if (m->after_weights) {
        double free_b = m->rep - wgpu - TRTLLM_RUNTIME_B;
        return free_b > 0 ? wgpu + m->frac * free_b : m->rep - TRTLLM_RUNTIME_B;
    }
    return m->frac * m->rep;
}

double cr_perf_serve_mem_bytes(const cr_workload *w, const cr_gpu_type *g)
{
    serve_mem m = serve_mem_of(w, g);
    return serve_budget(&m, 0);
}

/* A link for a collective: bytes/s in one direction and latency. */
typedef struct link {
    double bw;
    double lat;
    const char *name;
} link;

static link nvlink_or_pcie(const cr_gpu_type *g, int n)
{
    if (g->nvlink_bytes_per_s > 0 && n <= g->nvlink_domain_gpus) {
        return (link){g->nvlink_bytes_per_s / 2 * NVLINK_EFF, NVLINK_LAT_S, "NVLink"};
    }
    return (link){g->pcie_bytes_per_s / 2 * PCIE_EFF, PCIE_LAT_S, "PCIe"};
}

static link net_link(const cr_gpu_type *g)
{
    return (link){pos(g->net_bytes_per_s) * NET_EFF + 1, NET_LAT_S, "network"};
}

/* Ring all-reduce of bytes over n ranks. */
static double allreduce_s(double bytes, int n, link l)
{
    if (n <= 1) {
        return 0;
    }
    return 2.0 * (n - 1) * l.lat + 2.0 * (n - 1) / n * bytes / l.bw;
}

static int node_gpus(const cr_gpu_type *g)
{
    return g->nvlink_domain_gpus > NODE_GPUS ? g->nvlink_domain_gpus : NODE_GPUS;
}

static double hours(int64_t ns)
{
    return (double)ns / (double)CR_NS_PER_H;
}

static int64_t to_ns(double s)
{
    if (!(s > 0)) {
        return 0;
    }
    if (s > 9e9) {
        return INT64_MAX / 2;
    }
    return (int64_t)(s * 1e9);
}

static void fmt_gb(char *buf, size_t len, double bytes)
{
    if (bytes >= 10e9) {
        snprintf(buf, len, "%.0f GB", bytes / 1e9);
    } else {
        snprintf(buf, len, "%.1f GB", bytes / 1e9);
    }
}

/* ------------------------------------------------------------------ */
/* Training: pretrain and finetune                                     */
/* ------------------------------------------------------------------ */

typedef struct train_in {
    const cr_gpu_type *g;
    int fix_tp, fix_pp; /* forced ways, 0 = search */
    int zero3_ok;       /* try ZeRO-3 when nothing else fits (finetune, or a fixed count) */
    int fixed_count;    /* the GPU count is given (not sized by the deadline) */
    const cr_arch *sh;
    double N;         /* parameters (total) */
    double Nexp;      /* routed-expert parameters (MoE), sharded over ep */
    double trainable; /* parameters with gradients and optimizer state */
    double wbytes;    /* bytes per parameter held per model-parallel shard (not sharded by dp) */
    double obytes;    /* optimizer bytes per trainable parameter (sharded over dp) */
    double extra;     /* bytes per GPU outside the parallel split (QLoRA dequant buffer) */
    double logit_b;   /* bytes per token and vocabulary entry held for the loss */
    double flops_tok; /* training FLOPs per token (active parameters) */
    double peak;      /* dense FLOP/s */
    double eff;       /* achievable fraction */
    int seq, batch;   /* tokens per sequence, sequences per step */
    int mb;           /* sequences per micro-batch */
    int ckpt;         /* enum cr_ckpt; AUTO tries selective, then full */
    double tokens;    /* total tokens */
} train_in;

typedef struct train_out {
    int tp, pp, dp, n, ep, cp, zero3;
    int ckpt;   /* enum cr_ckpt used (never AUTO) */
    double mem; /* bytes per GPU */
    double step_s;
    double time_s;
    double mfu;
    double comm_frac; /* share of the step spent in exposed communication */
    int fits;
} train_out;

static double train_mem_cap(const cr_gpu_type *g)
{
    return (double)g->mem_bytes - TRAIN_MEM_RESERVE;
}

/* Expert-parallel ways: the largest power of two dividing dp, up to the
 * expert count (experts are spread over the data-parallel ranks). */
static int ep_ways(const train_in *in, int dp)
{
    int ep = 1;
    while (in->sh->experts > 0 && ep * 2 <= in->sh->experts && dp % (ep * 2) == 0) {
        ep *= 2;
    }
    return ep;
}

/* One plan at the workload's checkpointing (in->ckpt; AUTO: selective
 * where it fits, else full recompute); 0 when it does not fit. */
static int train_eval(const train_in *in, int tp, int cp, int pp, int dp, int zero3, train_out *o)
{
    int ckpt = in->ckpt;
    const cr_gpu_type *g = in->g;
    const cr_arch *sh = in->sh;
    int n = tp * cp * pp * dp;
    if ((int64_t)dp * in->mb > in->batch) {
        return 0;
    }
    int ep = ep_ways(in, dp);
    double L = sh->layers, h = sh->hidden, s = in->seq, sl = s / cp, b = in->mb;
    /* micro-batches of mb sequences per replica */
    int m = (int)((in->batch + (int64_t)dp * in->mb - 1) / ((int64_t)dp * in->mb));
    double layers_stage = ceil(L / pp);
    double inflight = m < pp ? m : pp;
    /* Stored activations with sequence parallelism (split over tp and cp),
     * per micro-batch in flight: full recompute keeps each layer's input
     * and one layer's working set; selective (and none: with flash
     * attention nothing more is kept) every layer's 34 bytes per token per
     * hidden unit. Plus the logits held for the loss. */
    double per_layer = ACT_LAYER_BYTES * sl * h * b / tp;
    double act_full = sl * h * 2 * b * layers_stage * inflight / tp + per_layer;
    double act_sel = per_layer * layers_stage * inflight;
    double wshard = (in->N - in->Nexp + in->Nexp / ep) * in->wbytes / (tp * pp);
    if (zero3) {
        /* ZeRO-3 / FSDP: weights and gradients sharded too; the layer in
         * use and the prefetched next one are gathered whole. */
        wshard = wshard / dp + 2.0 * in->N * in->wbytes / (tp * pp) / sh->layers;
    }
    double base = wshard + in->trainable * in->obytes / (tp * pp * dp) +
                  sl * b * (double)sh->vocab * in->logit_b / tp + in->extra;
    if (ckpt == CR_CKPT_AUTO) {
        /* selective where it fits, else full recompute */
        ckpt = base + act_sel <= train_mem_cap(g) ? CR_CKPT_SELECTIVE : CR_CKPT_FULL;
    }
    double mem = base + (ckpt == CR_CKPT_FULL ? act_full : act_sel);
    if (mem > train_mem_cap(g)) {
        o->mem = mem;
        return 0;
    }
    double f_mb = in->flops_tok * s * b / (tp * cp * pp); /* per GPU per micro-batch */
    double t_mb = f_mb / (in->peak * in->eff) * (ckpt == CR_CKPT_FULL ? RECOMPUTE_FULL : 1.0);
    /* 1F1B with interleaved virtual stages (Megatron): the bubble is
     * (pp - 1) / (v * m) of the micro-batch time, v chunks per stage. */
    int v = pp > 1 && m >= pp ? (int)fmin(PP_VIRTUAL, floor(layers_stage)) : 1;
    double compute = m * t_mb * (1.0 + (double)(pp - 1) / ((double)m * v));
    link tpl = nvlink_or_pcie(g, tp);
    double t_tp = m * layers_stage * 4 * allreduce_s(sl * h * 2 * b, tp, tpl);
    double t_pp = pp > 1 ? m * 2 * v * (sl * h * 2 * b / net_link(g).bw + NET_LAT_S) : 0;
    double t_cp = 0;
    if (cp > 1) {
        /* Ring attention: each rank passes its K and V shard cp-1 times,
         * forward and twice backward; half hides under attention math. */
        link cpl = tp * cp <= node_gpus(g) ? nvlink_or_pcie(g, tp * cp) : net_link(g);
        double kv =
            sl * b * (sh->kv_heads > 0 ? sh->kv_heads : sh->heads) * sh->head_dim * 2 * 2 / tp;
        t_cp = 0.5 * m * layers_stage * 3 * (cp - 1) * (kv / cpl.bw + cpl.lat);
    }
    double t_ep = 0;
    if (ep > 1) {
        /* MoE all-to-all: dispatch and combine, forward and backward, of
         * the tokens routed to experts on other ranks. */
        link epl = tp * ep <= node_gpus(g) ? nvlink_or_pcie(g, tp * ep) : net_link(g);
        double moe_layers = ceil((L - sh->dense_layers) / pp);
        double bytes = sl * b * h * 2 * sh->experts_active / tp * (ep - 1) / ep;
        t_ep = m * moe_layers * 4 * (bytes / epl.bw + epl.lat);
    }
    link dpl = tp * cp * dp <= node_gpus(g) ? nvlink_or_pcie(g, tp * cp * dp) : net_link(g);
    double grad =
        (in->trainable - (in->trainable >= in->N ? in->Nexp * (1 - 1.0 / ep) : 0)) * 2 / (tp * pp);
    double t_dp = allreduce_s(grad, dp * cp, dpl) * (zero3 ? 1.5 : 1.0);
    double exposed = pos(t_dp - (zero3 ? ZERO3_OVERLAP : DP_OVERLAP) * compute);
    double step = compute + t_tp + t_pp + t_cp + t_ep + exposed;
    double steps = ceil(in->tokens / ((double)in->batch * s));
    o->tp = tp;
    o->pp = pp;
    o->dp = dp;
    o->cp = cp;
    o->ep = ep;
    o->zero3 = zero3;
    o->ckpt = ckpt;
    o->n = n;
    o->mem = mem;
    o->step_s = step;
    o->time_s = steps * step;
    o->mfu = in->flops_tok * (double)in->batch * s / (n * in->peak * step);
    o->comm_frac = (t_tp + t_pp + t_cp + t_ep + exposed) / step;
    o->fits = 1;
    return 1;
}

/* Best plan on exactly n GPUs (fastest step); 0 if nothing fits. Tensor
 * parallel stays inside a server (over NVLink where the bridge or switch
 * reaches, else PCIe); context parallel only for sequences of 16k and up. */
static int train_best(const train_in *in, int n, train_out *best, double *min_mem)
{
    int found = 0;
    int max_tp = node_gpus(in->g) < 8 ? node_gpus(in->g) : 8;
    int max_cp = in->seq >= 16384 ? 16 : 1;
    /* ZeRO-1 (Megatron's distributed optimizer) first; ZeRO-3 / FSDP only
     * when no ZeRO-1 plan fits on n GPUs (fine-tuning, or a fixed count:
     * pre-training sized automatically grows n instead). */
    /* With checkpointing AUTO and a fixed count, a ZeRO-1 plan that fits
     * only with full recompute may lose to a ZeRO-3 one at selective: try
     * both (sizing the count, more GPUs are tried instead). */
    for (int z = 0;
         z < (in->zero3_ok ? 2 : 1) && !(found && (best->ckpt != CR_CKPT_FULL || !in->fixed_count));
         z++) {
        for (int tp = 1; tp <= max_tp && tp <= n; tp *= 2) {
            for (int cp = 1; cp <= max_cp && tp * cp <= n; cp *= 2) {
                for (int pp = 1; pp <= 64 && tp * cp * pp <= n && pp <= in->sh->layers; pp *= 2) {
                    if (n % (tp * cp * pp) || (in->fix_tp && tp != in->fix_tp) ||
                        (in->fix_pp && pp != in->fix_pp)) {
                        continue;
                    }
                    train_out o = {0};
                    if (train_eval(in, tp, cp, pp, n / (tp * cp * pp), z, &o)) {
                        if (!found || o.step_s < best->step_s * 0.999) {
                            *best = o;
                            found = 1;
                        }
                    } else if (o.mem > 0 && (*min_mem <= 0 || o.mem < *min_mem)) {
                        *min_mem = o.mem;
                    }
                }
            }
        }
    }
    return found;
}

static void plan_str(char *buf, size_t len, const train_out *o)
{
    size_t u = 0;
    buf[0] = '\0';
    if (o->n == 1) {
        snprintf(buf, len, "1 GPU");
        return;
    }
    const int v[4] = {o->tp, o->cp, o->pp, o->dp};
    const char *nm[4] = {"tp", "cp", "pp", "dp"};
    for (int i = 0; i < 4 && u < len; i++) {
        if (v[i] > 1 || (i == 3 && u == 0)) {
            u += (size_t)snprintf(buf + u, len - u, "%s%s%d", u ? " x " : "", nm[i], v[i]);
        }
    }
    if (o->ep > 1 && u < len) {
        u += (size_t)snprintf(buf + u, len - u, " (ep%d)", o->ep);
    }
    if (o->zero3 && u < len) {
        snprintf(buf + u, len - u, " zero3");
    }
}

/* Parameters of the transformer blocks' linear layers: q, k, v, o and the
 * MLP (every expert's, MoE). */
static double block_linear_params(const cr_arch *a)
{
    double h = a->hidden, q = (double)a->heads * a->head_dim;
    double kv = (double)(a->kv_heads > 0 ? a->kv_heads : a->heads) * a->head_dim;
    double attn = 2 * h * q + 2 * h * kv;
    double mlp = a->experts > 0 ? (double)(a->experts + a->shared_experts) * 3 * h * a->moe_ffn
                                : (a->plain_mlp ? 2.0 : 3.0) * h * a->ffn;
    return a->layers * (attn + mlp);
}

/* LoRA adapter parameters: rank r on every linear layer, r * (in + out)
 * each: q, k, v, o and the MLP's three matrices (every expert's, MoE). */
static double lora_params(const cr_arch *a, int rank)
{
    double h = a->hidden, q = (double)a->heads * a->head_dim;
    double kv = (double)(a->kv_heads > 0 ? a->kv_heads : a->heads) * a->head_dim;
    double attn = (h + q) + 2 * (h + kv) + (q + h);
    double mlp = a->experts > 0 ? (double)(a->experts + a->shared_experts) * 3 * (h + a->moe_ffn)
                                : (a->plain_mlp ? 2.0 : 3.0) * (h + a->ffn);
    return rank * a->layers * (attn + mlp);
}

static void estimate_train(const cr_workload *w, const cr_gpu_type *g, int gpu_count,
                           cr_estimate *e)
{
    train_in in = {0};
    cr_arch arch;
    arch_of(w, &arch);
    in.g = g;
    in.sh = &arch;
    in.fix_tp = w->fix_tp;
    in.fix_pp = w->fix_pp;
    in.zero3_ok = w->kind == CR_KIND_FINETUNE || gpu_count > 0;
    in.fixed_count = gpu_count > 0;
    in.N = arch.params;
    in.Nexp = fmin(cr_arch_expert_params(&arch), 0.98 * in.N);
    double Nact = arch.active;
    int pre = w->kind == CR_KIND_PRETRAIN;
    in.seq = w->seq_len > 0 ? w->seq_len : (pre ? 4096 : 2048);
    in.batch = w->batch > 0 ? w->batch : (pre ? (int)ceil(4194304.0 / in.seq) : 16);
    in.tokens = w->tokens > 0 ? w->tokens : (pre ? 20 * in.N : 1e8);
    in.mb = w->micro_batch > 0 ? w->micro_batch : 1;
    in.ckpt = w->ckpt;
    if (in.mb > in.batch) {
        snprintf(e->reason, sizeof e->reason, "micro-batch %d exceeds the batch of %d sequences",
                 in.mb, in.batch);
        return;
    }
    int method = pre ? CR_METHOD_FULL : w->method;
    double attn = 6.0 * arch.layers * in.seq * (double)arch.heads * arch.head_dim;
    if (method == CR_METHOD_FULL) {
        in.trainable = in.N;
        in.wbytes = 4;  /* bf16 weights + bf16 gradients */
        in.obytes = 12; /* fp32 master copy + Adam m and v, sharded over dp */
        in.flops_tok = 6 * Nact + attn;
    } else {
        in.trainable = lora_params(&arch, w->lora_rank > 0 ? w->lora_rank : LORA_RANK);
        in.wbytes = prec_bytes(w->precision);
        if (method == CR_METHOD_QLORA) {
            /* Only the blocks' linear layers are quantised (bitsandbytes,
             * torchtune, GPTQ): embeddings, the output head and norms stay
             * in 16 bits. wbytes is the mean over all parameters. */
            double lin = fmin(block_linear_params(&arch), in.N);
            in.wbytes = (QLORA_WEIGHT_B * lin + 2.0 * (in.N - lin)) / in.N;
        }
        in.obytes = 16; /* adapter weights, gradients, Adam states */
        in.flops_tok = 4 * Nact + attn;
        if (method == CR_METHOD_QLORA) {
            /* NF4 weights are dequantised to bf16 one matmul at a time:
             * the largest matrix (the MLP's) in 16 bits. */
            in.extra = 2.0 * arch.hidden * (arch.experts > 0 ? arch.moe_ffn : arch.ffn);
        }
    }
    in.logit_b = w->full_loss ? LOGIT_BYTES_FULL : LOGIT_BYTES;
    in.peak = cr_gpu_peak_flops(g, w->precision);
    double size_f = pow(arch.hidden / 8192.0, 0.15);
    double method_f = method == CR_METHOD_LORA ? 0.85 : method == CR_METHOD_QLORA ? 0.60 : 1.0;
    /* FP8 speeds up the GEMMs only; norms, attention softmax and the
     * optimizer stay at 16/32 bits, so less of the FP8 peak is reached. */
    double fp8_f = w->precision == CR_PREC_FP8 && g->fp8_flops > 0 ? FP8_TRAIN_FACTOR : 1.0;
    /* MoE: small expert GEMMs and routing run below dense efficiency. */
    double moe_f = arch.experts > 0 ? MOE_TRAIN_FACTOR : 1.0;
    in.eff = arch_eff(g) * size_f * method_f * fp8_f * moe_f * stack_eff(cr_stack_resolve(w));
    if (in.peak <= 0) {
        snprintf(e->reason, sizeof e->reason, "no usable %s math rate in the catalog",
                 cr_precision_name(w->precision));
        return;
    }
    int64_t deadline = w->duration_ns > 0 ? w->duration_ns : DEFAULT_DEADLINE;

    train_out best = {0};
    double min_mem = 0;
    int found = 0;
    if (gpu_count > 0) {
        found = train_best(&in, gpu_count, &best, &min_mem);
    } else {
        train_out fastest = {0};
        int have_fastest = 0;
        /* Counts whose perfect-scaling time (all FLOPs at the achievable
         * rate, no communication) already misses the deadline cannot meet
         * it: skip their plan search (the largest count is always tried). */
        double work_s = in.flops_tok * in.tokens / (in.peak * in.eff);
        for (int n = 1; n <= MAX_GPUS; n *= 2) {
            train_out o = {0};
            if (n < MAX_GPUS && work_s / n * 1e9 > (double)deadline && n * 2 <= in.batch) {
                continue;
            }
            if (!train_best(&in, n, &o, &min_mem)) {
                if (have_fastest && n > in.batch) {
                    break;
                }
                continue;
            }
            if (!have_fastest || o.time_s < fastest.time_s) {
                fastest = o;
                have_fastest = 1;
            }
            if (o.time_s * 1e9 <= (double)deadline) {
                best = o;
                found = 1;
                break;
            }
        }
        if (!found && have_fastest) {
            /* Even the fastest split misses the deadline: not a way to run it. */
            char t[32];
            snprintf(t, sizeof t, "%.0f days", fastest.time_s / 86400);
            snprintf(e->reason, sizeof e->reason,
                     "too slow: %s at best (%d GPUs, MFU %.0f%%), deadline %.0f days", t, fastest.n,
                     fastest.mfu * 100, (double)deadline / 1e9 / 86400);
            e->mem_per_gpu_bytes = fastest.mem;
            return;
        }
    }
    if (!found) {
        char need[32], have[32];
        double full = in.N * in.wbytes + in.trainable * in.obytes;
        fmt_gb(need, sizeof need, full);
        fmt_gb(have, sizeof have, (double)g->mem_bytes);
        if (gpu_count > 0 && min_mem > 0 && full / gpu_count < train_mem_cap(g)) {
            /* The states would fit; activations (and logits) do not. */
            char least[32];
            fmt_gb(least, sizeof least, min_mem);
            snprintf(e->reason, sizeof e->reason,
                     "does not fit on %d GPUs: %s per GPU at best with activations (weights and "
                     "optimizer states %s in all), %s per GPU",
                     gpu_count, least, need, have);
        } else if (gpu_count > 0) {
            snprintf(e->reason, sizeof e->reason,
                     "does not fit on %d GPUs: weights and optimizer states need %s, %s per GPU",
                     gpu_count, need, have);
        } else {
            snprintf(e->reason, sizeof e->reason,
                     "does not fit: weights and optimizer states need %s, %s per GPU, and no "
                     "split up to %d GPUs fits",
                     need, have, MAX_GPUS);
        }
        e->mem_per_gpu_bytes = min_mem;
        return;
    }
    e->fits = 1;
    e->gpu_count = best.n;
    e->tp = best.tp;
    e->pp = best.pp;
    e->dp = best.dp;
    e->ep = best.ep;
    e->cp = best.cp;
    e->micro_batch = in.mb;
    e->global_batch = in.batch;
    e->ckpt = best.ckpt;
    e->replicas = 1;
    e->gpu_share = best.n;
    e->nodes = (best.n + node_gpus(g) - 1) / node_gpus(g);
    e->step_ns = to_ns(best.step_s);
    e->time_ns = to_ns(best.time_s);
    e->mem_per_gpu_bytes = best.mem;
    e->mfu = best.mfu;
    e->throughput = (double)in.batch * in.seq / best.step_s;
    e->progress_per_s = best.time_s > 0 ? 1.0 / best.time_s : 0;
    e->energy_j = best.n * g->tdp_w * TRAIN_POWER_FRAC * best.time_s;
    plan_str(e->plan, sizeof e->plan, &best);

    char mem[32], cap[32];
    fmt_gb(mem, sizeof mem, best.mem);
    fmt_gb(cap, sizeof cap, (double)g->mem_bytes);
    char late[96];
    snprintf(late, sizeof late, "%s%s", best.ckpt == CR_CKPT_FULL ? "; full recompute" : "",
             best.time_s * 1e9 > (double)deadline ? "; slower than the deadline on these GPUs"
                                                  : "");
    if (best.n == 1) {
        snprintf(e->reason, sizeof e->reason, "fits one GPU (%s of %s); MFU %.0f%%%s", mem, cap,
                 best.mfu * 100, late);
    } else {
        link tpl = nvlink_or_pcie(g, best.tp);
        const char *dpnet = best.tp * best.cp * best.dp <= node_gpus(g)
                                ? nvlink_or_pcie(g, best.tp * best.cp * best.dp).name
                                : "network";
        char parts[192] = "";
        size_t u = 0;
        if (best.tp > 1) {
            u += (size_t)snprintf(parts + u, sizeof parts - u, "tp%d over %s", best.tp, tpl.name);
        }
        if (best.cp > 1) {
            u += (size_t)snprintf(parts + u, sizeof parts - u, "%scp%d for %dk-token sequences",
                                  u ? ", " : "", best.cp, in.seq / 1024);
        }
        if (best.pp > 1) {
            u +=
                (size_t)snprintf(parts + u, sizeof parts - u, "%spp%d%s", u ? ", " : "", best.pp,
                                 best.tp * best.cp * best.pp > node_gpus(g) ? " across nodes" : "");
        }
        if (best.ep > 1) {
            u += (size_t)snprintf(parts + u, sizeof parts - u, "%s%d experts over ep%d",
                                  u ? ", " : "", arch.experts, best.ep);
        }
        if (best.zero3) {
            u += (size_t)snprintf(parts + u, sizeof parts - u, "%sweights sharded (ZeRO-3)",
                                  u ? ", " : "");
        }
        if (best.dp > 1) {
            snprintf(parts + u, sizeof parts - u, "%sdp%d over %s", u ? ", " : "", best.dp, dpnet);
        }
        snprintf(e->reason, sizeof e->reason, "%s; %s/GPU; MFU %.0f%%, comm %.0f%%%s", parts, mem,
                 best.mfu * 100, best.comm_frac * 100, late);
    }
}

/* ------------------------------------------------------------------ */
/* Inference                                                           */
/* ------------------------------------------------------------------ */

/* One serving unit: a whole GPU (times tp) or one MIG slice. */
typedef struct unit {
    double mem;          /* usable bytes per GPU (or slice) */
    double bw;           /* bytes/s per GPU (or slice) */
    double peak;         /* FLOP/s per GPU (or slice) */
    link tpl;            /* tensor-parallel link */
    link ppl;            /* link between pipeline stages */
    double eff;          /* achieved fraction of peak in inference GEMMs */
    double sms;          /* streaming multiprocessors per GPU (or slice); 0 unknown */
    const serve_mem *sm; /* whole GPUs: the stack's memory rule (mem unused); NULL: mem */
} unit;

/* Bytes for weights and KV on one GPU of u holding wgpu weight bytes. */
static double unit_cap(const unit *u, double wgpu)
{
    return u->sm ? serve_budget(u->sm, wgpu) : u->mem;
}

static double infer_eff(const cr_gpu_type *g, int precision)
{
    double f4 = precision == CR_PREC_FP4 ? FP4_SERVE_FACTOR : 1.0;
    return f4 * (arch_has(g, "GA100") ? PREFILL_EFF_GA100 : PREFILL_EFF);
}

typedef struct infer_in {
    cr_arch a;
    double Nact;   /* parameters used per token */
    double wbytes; /* total weight bytes */
    double wdense; /* weight bytes outside the routed experts */
    double wexp;   /* routed-expert weight bytes */
    double kv_tok; /* KV bytes per token (whole model) */
    int kv_split;  /* ways the KV cache divides over tp (KV heads; 1 with MLA) */
    double lam;    /* requests/s offered to this replica */
    double P, O;   /* prompt and output tokens */
    double k;      /* sequences decoded per request (beams or n), sharing the prompt's KV */
    int paged;     /* 1: paged KV (blocks as tokens come); 0: each sequence reserves P + O */
    double seff;   /* the stack's share of the calibrated GEMM efficiency */
    serve_mem sm;  /* the stack's memory rule on whole GPUs */
    double ttft_s, tpot_s;
} infer_in;

typedef struct infer_out {
    double ttft_s, tpot_s, batch, mem, tok_s;
    int ok_mem, ok_lat;
} infer_out;

static double kv_share(const infer_in *in, int tp)
{
    return in->kv_split >= tp ? 1.0 / tp : 1.0 / in->kv_split;
}

/*
 * Time per output token of a replica (tp x pp) carrying B sequences under a
 * chunked-prefill engine (vLLM, SGLang, TensorRT-LLM in-flight batching).
 * A share rho = lambda * t_prefill / pp of the iterations carry a prefill
 * chunk of C tokens (CHUNK_TOKENS, at most the prompt) next to the decode
 * tokens; the others decode only:
 *   t_dec = pp * (max(t_mem, t_comp(B)) + t_comm) + L * t_layer
 *   t_mix = pp * (max(t_mem, t_comp(B + C)) + t_comm) + L * t_layer
 *   TPOT  = 1 / ((1 - rho) / t_dec + rho / t_mix)
 * t_mem reads the weights (the experts B tokens route to, for MoE) and the
 * batch's KV cache once; t_comp = 2 * N_active * tokens / (tp * peak * e).
 * Pipeline stages take B/pp sequences each in turn, so a token passes pp
 * stages per step.
 */
/* The decode-step model's terms that do not depend on the batch, for one
 * replica shape (tp x pp on a unit); decode_step_s below is then a few
 * multiply-adds per call (the fixed-point and replica searches call it
 * thousands of times per estimate). */
typedef struct dstep {
    int pp;
    double w_t;            /* dense weight read per stage, s */
    double wexp_t;         /* all routed experts' read per stage, s (MoE) */
    double k_e;            /* experts per token / experts (MoE) */
    double kv_t;           /* KV read per sequence per stage, s */
    double flop_t;         /* decode GEMMs per token per stage, s */
    double chunk;          /* prefill tokens per mixed iteration */
    double comm_a, comm_b; /* per stage: comm_a + comm_b * sequences */
    double fixed;          /* per-layer overheads per step */
} dstep;

static void dstep_init(const infer_in *in, const unit *u, int tp, int pp, dstep *d)
{
    double L = in->a.layers, h2 = in->a.hidden * 2.0;
    double wb = u->bw * DECODE_BW_EFF * tp * pp;
    d->pp = pp;
    d->k_e = in->a.experts > 0 ? (double)in->a.experts_active / in->a.experts : 0;
    d->w_t = (in->a.experts > 0 ? in->wdense : in->wbytes) / wb;
    d->wexp_t = in->a.experts > 0 ? in->wexp / wb : 0;
    d->kv_t = (in->P + in->O / 2) * in->kv_tok * kv_share(in, tp) / pp / (u->bw * KV_BW_EFF);
    double flop_s =
        tp * pp * u->peak * u->eff * DECODE_COMP_EFF * (in->a.experts > 0 ? MOE_SERVE_EFF : 1.0);
    d->flop_t = 2 * in->Nact / flop_s;
    d->chunk = in->P < CHUNK_TOKENS ? in->P : CHUNK_TOKENS;
    /* two ring all-reduces of Bs * h * 2 bytes per layer of the stage */
    d->comm_a = tp > 1 ? 2.0 * L / pp * 2.0 * (tp - 1) * u->tpl.lat : 0;
    d->comm_b = tp > 1 ? 2.0 * L / pp * 2.0 * (tp - 1) / tp * h2 / u->tpl.bw : 0;
    if (pp > 1) {
        d->comm_a += u->ppl.lat;
        d->comm_b += h2 / u->ppl.bw;
    }
    d->fixed = L * LAYER_STEP_S;
}

static double decode_step_s(const dstep *d, double B, double rho)
{
    double Bs = B / d->pp; /* sequences per stage micro-batch */
    double mem_t = d->w_t + Bs * d->kv_t;
    if (d->wexp_t > 0) {
        mem_t += d->wexp_t * (1 - pow(1 - d->k_e, Bs)); /* experts the batch touches */
    }
    double comp_t = d->flop_t * Bs;
    double mix_t = d->flop_t * (Bs + d->chunk);
    double comm = d->comm_a + d->comm_b * Bs;
    double t_dec = d->pp * (fmax(mem_t, comp_t) + comm) + d->fixed;
    double t_mix = d->pp * (fmax(mem_t, mix_t) + comm) + d->fixed;
    return 1.0 / ((1 - rho) / t_dec + rho / t_mix);
}

/*
 * Share of a GPU (or slice) of sms SMs that the GEMMs of ONE request of M
 * tokens keep busy. Each GEMM is cut into GEMM_TILE x GEMM_TILE output
 * tiles, one thread block (one SM) per tile; with fewer tiles than SMs the
 * rest idle. The layer's four GEMMs (QKV, attention out, up/gate, down;
 * column- or row-split over tp) are weighted by their FLOPs. A batch-1
 * prompt on a big GPU is narrow: this is why a MIG slice keeps more than
 * its share of a GPU's speed for one request at a time (docs/model.md,
 * MIG). MoE layers (tokens spread over experts) are not modelled: 1.
 */
static double gemm_fill(const cr_arch *a, int tp, double M, double sms)
{
    if (sms <= 0 || a->experts > 0) {
        return 1;
    }
    double qkv =
        (double)(a->heads + 2 * (a->kv_heads > 0 ? a->kv_heads : a->heads)) * a->head_dim / tp;
    double attn = (double)a->heads * a->head_dim / tp;
    double up = (a->plain_mlp ? 1.0 : 2.0) * a->ffn / tp, ffn = (double)a->ffn / tp;
    const double n[4] = {qkv, a->hidden, up, a->hidden}; /* output columns */
    const double k[4] = {a->hidden, attn, a->hidden, ffn};
    double rows = ceil(M / GEMM_TILE), f = 0, t = 0;
    for (int i = 0; i < 4; i++) {
        double fl = n[i] * k[i];
        double tiles = rows * ceil(n[i] / GEMM_TILE);
        f += fl;
        t += fl / fmin(1.0, tiles / sms);
    }
    return t > 0 ? f / t : 1;
}

/* Prefill time of one prompt. narrow: the prompt runs alone (its GEMMs
 * fill only part of the GPU: gemm_fill), as the first token of a request
 * on an idle replica does; otherwise prompts share iterations (chunked
 * prefill) and fill it. */
static double prefill_s(const infer_in *in, const unit *u, int tp, int pp, int narrow)
{
    double qk = (double)in->a.heads * in->a.head_dim;
    double f = 2 * in->Nact * in->P + 2.0 * in->a.layers * in->P * in->P * qk;
    double comm = 2.0 * in->a.layers * allreduce_s(in->P * in->a.hidden * 2, tp, u->tpl);
    if (pp > 1) {
        comm += (pp - 1) * (in->P * in->a.hidden * 2 / u->ppl.bw + u->ppl.lat);
    }
    double fill = narrow ? gemm_fill(&in->a, tp, in->P, u->sms) : 1;
    double t = f / (tp * u->peak * u->eff * fill) + comm;
    double weights = in->wbytes / tp / (u->bw * DECODE_BW_EFF);
    return t > weights ? t : weights;
}

/* KV bytes per GPU for B sequences: the paged cache holds each sequence's
 * prompt and, on average, half its output (blocks are allocated as tokens
 * are generated, not reserved for the whole output). */
static double kv_mem(const infer_in *in, int tp, int pp, double B)
{
    double per_req =
        in->paged ? in->P + in->k * (in->O / 2 + KV_BLOCK_TOKENS) : in->k * (in->P + in->O);
    return ceil(B) * per_req * in->kv_tok * kv_share(in, tp) / pp;
}

/* Steady state of one replica under continuous batching (Little's law). */
static void infer_eval(const infer_in *in, const unit *u, int tp, int pp, infer_out *o)
{
    memset(o, 0, sizeof *o);
    double wgpu = in->wbytes / (tp * pp);
    double t_pf = prefill_s(in, u, tp, pp, 0);
    double rho = in->lam * t_pf / pp; /* stages overlap successive prompts */
    if (rho >= 0.9) {
        /* Prefill alone saturates the replica: report it as unstable, but
         * still say whether the weights (and one sequence's KV) fit, so a
         * refusal names the real shortfall. */
        o->ttft_s = o->tpot_s = 1e9;
        o->mem = wgpu + kv_mem(in, tp, pp, 1);
        o->ok_mem = o->mem <= unit_cap(u, wgpu);
        return;
    }
    /* own prefill (alone: narrow) plus the wait behind the prompts queued
     * ahead (M/D/1: rho * t / (2 (1 - rho))) */
    double ttft = prefill_s(in, u, tp, pp, 1) + rho * t_pf / (2 * (1 - rho));
    dstep d;
    dstep_init(in, u, tp, pp, &d);
    double B = 1, tpot = 0;
    for (int i = 0; i < 40; i++) {
        tpot = decode_step_s(&d, B * in->k, rho);
        double nb = in->lam * (ttft + in->O * tpot);
        if (nb < 1) {
            nb = 1;
        }
        if (nb > 1e6) {
            B = nb;
            break;
        }
        if (fabs(nb - B) < 1e-3 * B) {
            B = nb;
            break;
        }
        B = nb;
    }
    /* A replica is unstable when decode cannot keep up: batch keeps growing. */
    double out_rate = B * in->k / decode_step_s(&d, B * in->k, rho);
    o->batch = B;
    o->ttft_s = ttft;
    o->tpot_s = tpot;
    o->tok_s = out_rate;
    o->mem = wgpu + kv_mem(in, tp, pp, B);
    o->ok_mem = o->mem <= unit_cap(u, wgpu);
    o->ok_lat = B < 1e6 && out_rate >= in->lam * in->O * in->k * 0.999 && ttft <= in->ttft_s &&
                tpot <= in->tpot_s;
}

typedef struct infer_plan {
    int tp, pp, replicas;
    infer_out r;
    int ok;
} infer_plan;

/* SMs of a whole GPU: its full MIG profile's count (the only SM counts the
 * model has, from NVIDIA's MIG captures; A100 shows 98 of its 108 there);
 * 0 (no narrow-request limit) for GPUs without a sourced count. */
static double gpu_sms(const cr_gpu_type *g)
{
    size_t np = 0;
    const cr_mig_profile *p = g->mig_max_instances > 0 ? cr_mig_profiles(g->name, &np) : NULL;
    return np > 0 ? p[np - 1].sms : 0;
}

static unit whole_unit(const infer_in *in, const cr_gpu_type *g, int precision, int tp, int pp)
{
    unit u = {serve_budget(&in->sm, 0),
              g->mem_bw_bytes_per_s,
              cr_gpu_peak_flops(g, precision),
              nvlink_or_pcie(g, tp),
              nvlink_or_pcie(g, tp * pp),
              infer_eff(g, precision) * in->seff,
              gpu_sms(g),
              &in->sm};
    if (tp * pp > node_gpus(g)) {
        u.ppl = net_link(g); /* stages on different servers */
    }
    return u;
}

/* Pipeline stages across servers need a scale-out fabric (a NIC share of
 * at least MIN_PP_NET_GBPS per GPU); otherwise stages stay in one server. */
static int serve_max_pp(const cr_gpu_type *g, int tp)
{
    if (g->net_bytes_per_s * 8 >= MIN_PP_NET_GBPS * 1e9) {
        return MAX_SERVE_PP;
    }
    int pp = 1;
    while (pp * 2 <= MAX_SERVE_PP && tp * pp * 2 <= node_gpus(g)) {
        pp *= 2;
    }
    return pp;
}

/* Evaluate r replicas of tp x pp at lam total; 1 when it meets the targets. */
static int try_replicas(const infer_in *base, const unit *u, int tp, int pp, double lam, int r,
                        infer_out *o)
{
    infer_in in = *base;
    in.lam = lam / r;
    infer_eval(&in, u, tp, pp, o);
    return o->ok_mem && o->ok_lat;
}

/* Fewest GPUs tp x pp x replicas on whole GPUs meeting the targets for lam
 * requests/s: for each tp (up to 8, inside a server) and pp (1..8 stages,
 * across servers when tp x pp exceeds one), the exact minimum replica
 * count by doubling then bisection (meeting the targets is monotone in the
 * replica count). gpu_count > 0 fixes the total. */
static int infer_whole(const infer_in *base, const cr_gpu_type *g, int precision, double lam,
                       int gpu_count, int fix_tp, int fix_pp, infer_plan *best, infer_out *closest,
                       int *closest_tp, int *closest_pp)
{
    int max_tp = node_gpus(g) < 8 ? node_gpus(g) : 8;
    int found = 0;
    for (int tp = 1; tp <= max_tp; tp *= 2) {
        for (int pp = 1; pp <= serve_max_pp(g, tp) && pp <= base->a.layers; pp *= 2) {
            int per = tp * pp;
            if ((fix_tp && tp != fix_tp) || (fix_pp && pp != fix_pp)) {
                continue;
            }
            /* Stages only buy memory: with the weights under half of one
             * tp group's memory, pp = 1 leaves room enough for the KV. */
            if (pp > 1 && !fix_pp &&
                base->wbytes / tp <= 0.5 * serve_budget(&base->sm, base->wbytes / tp)) {
                break;
            }
            if (found && per > best->tp * best->pp * best->replicas) {
                break;
            }
            unit u = whole_unit(base, g, precision, tp, pp);
            infer_out o;
            if (base->wbytes / per > unit_cap(&u, base->wbytes / per)) {
                /* weights alone do not fit: more replicas will not help */
                infer_in one = *base;
                one.lam = lam;
                infer_eval(&one, &u, tp, pp, &o);
                if (!closest->mem || (!closest->ok_mem && o.mem < closest->mem)) {
                    *closest = o;
                    *closest_tp = tp;
                    *closest_pp = pp;
                }
                continue;
            }
            int lo = 1, hi, rmax = MAX_GPUS / per;
            if (gpu_count > 0) {
                if (gpu_count % per) {
                    continue;
                }
                lo = hi = gpu_count / per;
                if (!try_replicas(base, &u, tp, pp, lam, hi, &o)) {
                    if (o.ok_mem && (!closest->ok_mem ||
                                     o.tpot_s + o.ttft_s < closest->tpot_s + closest->ttft_s)) {
                        *closest = o;
                        *closest_tp = tp;
                        *closest_pp = pp;
                    } else if (!closest->mem) {
                        *closest = o;
                        *closest_tp = tp;
                        *closest_pp = pp;
                    }
                    continue;
                }
            } else {
                /* Doubling to the first r that works, then bisection. */
                hi = 1;
                while (hi <= rmax && !try_replicas(base, &u, tp, pp, lam, hi, &o)) {
                    if (o.ok_mem && (!closest->ok_mem ||
                                     o.tpot_s + o.ttft_s < closest->tpot_s + closest->ttft_s)) {
                        *closest = o;
                        *closest_tp = tp;
                        *closest_pp = pp;
                    }
                    if (found && hi * per >= best->tp * best->pp * best->replicas) {
                        break;
                    }
                    lo = hi + 1;
                    hi *= 2;
                }
                if (hi > rmax || (found && hi * per >= best->tp * best->pp * best->replicas &&
                                  !try_replicas(base, &u, tp, pp, lam, hi, &o))) {
                    continue;
                }
                while (lo < hi) {
                    int mid = lo + (hi - lo) / 2;
                    if (try_replicas(base, &u, tp, pp, lam, mid, &o)) {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                try_replicas(base, &u, tp, pp, lam, hi, &o);
            }
            int total = per * hi, btotal = best->tp * best->pp * best->replicas;
            /* Fewest GPUs; at equal count fewer stages, then lower TPOT. */
            if (!found || total < btotal ||
                (total == btotal &&
                 (pp < best->pp || (pp == best->pp && o.tpot_s < best->r.tpot_s)))) {
                best->tp = tp;
                best->pp = pp;
                best->replicas = hi;
                best->r = o;
                best->ok = 1;
                found = 1;
            }
        }
    }
    return found;
}

static void estimate_infer(const cr_workload *w, const cr_gpu_type *g, int gpu_count,
                           cr_estimate *e)
{
    if (cr_gpu_peak_flops(g, w->precision) <= 0) {
        snprintf(e->reason, sizeof e->reason, "no usable %s math rate in the catalog",
                 cr_precision_name(w->precision));
        return;
    }
    infer_in in = {0};
    arch_of(w, &in.a);
    in.Nact = in.a.active;
    double pb = prec_bytes(w->precision);
    in.wbytes = in.a.params * pb;
    in.wexp = fmin(cr_arch_expert_params(&in.a), 0.98 * in.a.params) * pb;
    in.wdense = in.wbytes - in.wexp;
    int kvp = w->kv_precision >= 0 ? w->kv_precision : default_kv(w->precision);
    in.kv_tok = cr_arch_kv_bytes(&in.a, prec_bytes(kvp));
    in.kv_split = in.a.kv_lora_rank > 0 ? 1 : in.a.kv_heads;
    in.P = w->prompt_tokens;
    in.O = w->output_tokens > 0 ? w->output_tokens : 1;
    in.k = w->beams > 0 ? w->beams : 1;
    int stack = cr_stack_resolve(w);
    in.paged = stack != CR_STACK_HF;
    in.seff = stack_eff(stack);
    in.sm = serve_mem_of(w, g);
    in.ttft_s = (double)(w->ttft_ns > 0 ? w->ttft_ns : DEFAULT_TTFT) / 1e9;
    in.tpot_s = (double)(w->tpot_ns > 0 ? w->tpot_ns : DEFAULT_TPOT) / 1e9;
    int T = w->tenants > 0 ? w->tenants : 1;
    double lam_t = (w->rate_per_s > 0 ? w->rate_per_s : 1) / T;
    int64_t window = w->duration_ns > 0 ? w->duration_ns : DEFAULT_WINDOW;

    /* Whole GPUs, each tenant on its own replicas (isolation). */
    infer_plan whole = {0};
    infer_out closest = {0};
    int closest_tp = 1, closest_pp = 1;
    int per_tenant_count = gpu_count > 0 ? (gpu_count >= T ? gpu_count / T : 0) : 0;
    int whole_ok = (gpu_count <= 0 || per_tenant_count > 0) &&
                   infer_whole(&in, g, w->precision, lam_t, per_tenant_count, w->fix_tp, w->fix_pp,
                               &whole, &closest, &closest_tp, &closest_pp);

    /* MIG: one slice per tenant, smallest profile that meets the targets. */
    const cr_mig_profile *mig = NULL;
    infer_out mig_o = {0};
    double mig_share = 0;
    int mig_per_gpu = 0;
    size_t np = 0;
    const cr_mig_profile *profs = g->mig_max_instances > 0 ? cr_mig_profiles(g->name, &np) : NULL;
    int cs_tot = 0, ms_tot = 0;
    /* A fixed --gpus count means whole GPUs unless MIG is asked for. */
    int try_mig = gpu_count <= 0 || (w->needs & CR_NEED_MIG);
    if (try_mig && profs && cr_mig_geometry(g->name, &cs_tot, &ms_tot) == 0) {
        for (size_t i = 0; i < np; i++) {
            const cr_mig_profile *p = &profs[i];
            if (p->media_ext || p->compute_slices == cs_tot) {
                continue; /* the full-GPU profile is the whole-GPU plan */
            }
            double share = fmax((double)p->compute_slices / cs_tot, (double)p->mem_slices / ms_tot);
            /* A slice's bandwidth and math are its hardware share, less
             * what a partition loses (MIG_SLICE_EFF, from MLPerf). */
            unit u = {usable_mem((double)p->mem_bytes) + RUNTIME_OVERHEAD * 0.5,
                      g->mem_bw_bytes_per_s * p->mem_slices / ms_tot * MIG_SLICE_EFF,
                      cr_gpu_peak_flops(g, w->precision) * p->compute_slices / cs_tot *
                          MIG_SLICE_EFF,
                      nvlink_or_pcie(g, 1),
                      nvlink_or_pcie(g, 1),
                      infer_eff(g, w->precision) * in.seff,
                      p->sms,
                      NULL};
            infer_in one = in;
            one.lam = lam_t;
            infer_out o;
            infer_eval(&one, &u, 1, 1, &o);
            if (o.ok_mem && o.ok_lat && (!mig || share < mig_share)) {
                mig = p;
                mig_o = o;
                mig_share = share;
                mig_per_gpu = p->max_instances;
            }
        }
    }
    double whole_share = whole_ok ? (double)T * whole.tp * whole.replicas : 1e300;
    int use_mig = mig && T * mig_share < whole_share;
    if (gpu_count > 0 && mig) {
        int gpus_needed = (T + mig_per_gpu - 1) / mig_per_gpu;
        use_mig = use_mig && gpus_needed <= gpu_count;
    }
    if ((w->needs & CR_NEED_MIG) && !mig) {
        snprintf(e->reason, sizeof e->reason, "no MIG profile meets the targets");
        return;
    }
    if (w->needs & CR_NEED_MIG) {
        use_mig = 1;
    }
    char wgb[32], cap[32];
    fmt_gb(wgb, sizeof wgb, in.wbytes);
    fmt_gb(cap, sizeof cap, (double)g->mem_bytes);
    if (!use_mig && !whole_ok) {
        if (closest.mem > 0 && !closest.ok_mem) {
            if (in.wbytes > (double)g->mem_bytes) {
                /* The largest split the request allows (--tp/--pp fix the ways). */
                int tpx = w->fix_tp ? w->fix_tp : (node_gpus(g) < 8 ? node_gpus(g) : 8);
                int ppx = w->fix_pp ? w->fix_pp : serve_max_pp(g, tpx);
                char on[40] = "";
                if (gpu_count > 0) {
                    /* a fixed count: the largest split of the GPUs asked
                     * (issue 26: never a plan the request does not allow) */
                    tpx = w->fix_tp ? w->fix_tp : (tpx < gpu_count ? tpx : gpu_count);
                    ppx = w->fix_pp ? w->fix_pp : (gpu_count / tpx > 0 ? gpu_count / tpx : 1);
                    snprintf(on, sizeof on, " on the %d GPU%s asked", gpu_count,
                             gpu_count == 1 ? "" : "s");
                }
                char split[32];
                if (ppx > 1) {
                    snprintf(split, sizeof split, "tp%d x pp%d", tpx, ppx);
                } else {
                    snprintf(split, sizeof split, "tp%d", tpx);
                }
                snprintf(e->reason, sizeof e->reason,
                         "weights need %s, %s per GPU; %s%s tops out at %.0f GB usable", wgb, cap,
                         split, on,
                         serve_budget(&in.sm, in.wbytes / (tpx * ppx)) * tpx * ppx / 1e9);
            } else {
                snprintf(e->reason, sizeof e->reason, "weights %s + KV cache exceed %s per GPU",
                         wgb, cap);
            }
        } else if (closest.ok_mem) {
            char best[32];
            if (closest_pp > 1) {
                snprintf(best, sizeof best, "tp%d x pp%d", closest_tp, closest_pp);
            } else {
                snprintf(best, sizeof best, "tp%d", closest_tp);
            }
            if (closest.ttft_s > 1e5) {
                /* The queueing model answers "forever" when requests arrive
                 * faster than the replicas can serve them. */
                snprintf(e->reason, sizeof e->reason,
                         "cannot keep up with %.3g req/s: the queue grows without bound (best %s)",
                         lam_t, best);
            } else if (closest.ttft_s > in.ttft_s) {
                snprintf(e->reason, sizeof e->reason, "TTFT %.0f ms > %.0f ms target (best %s)",
                         closest.ttft_s * 1e3, in.ttft_s * 1e3, best);
            } else {
                snprintf(e->reason, sizeof e->reason,
                         "TPOT %.0f ms > %.0f ms target (memory bandwidth %.0f GB/s, best %s)",
                         closest.tpot_s * 1e3, in.tpot_s * 1e3, g->mem_bw_bytes_per_s / 1e9, best);
            }
        } else {
            snprintf(e->reason, sizeof e->reason, "cannot meet the targets on %d GPUs", gpu_count);
        }
        return;
    }
    e->fits = 1;
    double hours_w = hours(window);
    if (use_mig) {
        e->mig = mig;
        e->mig_count = T;
        e->gpu_share = T * mig_share;
        e->gpu_count = (T + mig_per_gpu - 1) / mig_per_gpu;
        e->replicas = T;
        e->tp = 1;
        e->dp = T;
        e->pp = 1;
        e->ttft_ns = to_ns(mig_o.ttft_s);
        e->tpot_ns = to_ns(mig_o.tpot_s);
        e->mem_per_gpu_bytes = mig_o.mem;
        e->throughput = mig_o.tok_s * T;
        snprintf(e->plan, sizeof e->plan, "%d x mig %s", T, mig->name);
        char used[32];
        fmt_gb(used, sizeof used, mig_o.mem);
        snprintf(e->reason, sizeof e->reason,
                 "%d tenant%s on %s slices (%d per GPU, %s used each); TTFT %.0f ms, TPOT %.0f ms",
                 T, T > 1 ? "s" : "", mig->name, mig_per_gpu, used, mig_o.ttft_s * 1e3,
                 mig_o.tpot_s * 1e3);
    } else {
        int per = whole.tp * whole.pp * whole.replicas;
        e->gpu_count = per * T;
        e->gpu_share = e->gpu_count;
        e->tp = whole.tp;
        e->replicas = whole.replicas * T;
        e->dp = e->replicas;
        e->pp = whole.pp;
        e->ep = in.a.experts > 0 && whole.tp > 1 ? whole.tp : 1;
        e->ttft_ns = to_ns(whole.r.ttft_s);
        e->tpot_ns = to_ns(whole.r.tpot_s);
        e->mem_per_gpu_bytes = whole.r.mem;
        e->throughput = whole.r.tok_s * e->replicas;
        char shape[48] = "1 GPU";
        if (whole.tp > 1 && whole.pp > 1) {
            snprintf(shape, sizeof shape, "tp%d x pp%d", whole.tp, whole.pp);
        } else if (whole.pp > 1) {
            snprintf(shape, sizeof shape, "pp%d", whole.pp);
        } else if (whole.tp > 1) {
            snprintf(shape, sizeof shape, "tp%d", whole.tp);
        }
        snprintf(e->plan, sizeof e->plan, "%d x %s%s", e->replicas, shape,
                 e->ep > 1 ? " (ep)" : "");
        char kv[32], wpg[32], why[112] = "";
        double wgpu = in.wbytes / (whole.tp * whole.pp);
        fmt_gb(kv, sizeof kv, whole.r.mem - wgpu);
        fmt_gb(wpg, sizeof wpg, wgpu);
        int node = node_gpus(g) < 8 ? node_gpus(g) : 8;
        int fits_node = in.wbytes / node <= serve_budget(&in.sm, in.wbytes / node);
        if (whole.pp > 1 && whole.tp * whole.pp > node_gpus(g) && !fits_node) {
            snprintf(why, sizeof why, "%s weights exceed one %d-GPU server: pp%d over network, ",
                     wgb, node, whole.pp);
        } else if (whole.pp > 1 && whole.tp * whole.pp > node_gpus(g)) {
            snprintf(why, sizeof why, "pp%d across servers over network, ", whole.pp);
        } else if (whole.pp > 1) {
            snprintf(why, sizeof why, "pp%d inside a server, ", whole.pp);
        }
        if (whole.tp > 1) {
            size_t l = strlen(why);
            snprintf(why + l, sizeof why - l, "tp over %s%s: ", nvlink_or_pcie(g, whole.tp).name,
                     e->ep > 1 ? ", experts over ep" : "");
        } else if (why[0]) {
            size_t l = strlen(why);
            snprintf(why + l - 2, sizeof why - l + 2, ": ");
        }
        snprintf(e->reason, sizeof e->reason,
                 "%s%s weights + %s KV (%.0f seq%s) per GPU; %d replica%s for %.3g req/s; TTFT "
                 "%.0f ms, TPOT %.0f ms%s",
                 why, wpg, kv, ceil(whole.r.batch), ceil(whole.r.batch) > 1 ? "s" : "",
                 whole.replicas, whole.replicas > 1 ? "s" : "", lam_t, whole.r.ttft_s * 1e3,
                 whole.r.tpot_s * 1e3, T > 1 ? "; one set per tenant (no MIG)" : "");
        e->nodes = (e->gpu_count + node_gpus(g) - 1) / node_gpus(g);
    }
    if (!e->nodes) {
        e->nodes = 1;
    }
    e->time_ns = window;
    e->progress_per_s = 1.0 / ((double)window / 1e9);
    e->energy_j = e->gpu_share * g->tdp_w * SERVE_POWER_FRAC * hours_w * 3600;
}

/* ------------------------------------------------------------------ */
/* Visual: decode + detection on video streams                         */
/* ------------------------------------------------------------------ */

static void estimate_visual(const cr_workload *w, const cr_gpu_type *g, int gpu_count,
                            cr_estimate *e)
{
    double S = w->streams > 0 ? w->streams : (w->rate_per_s > 0 ? w->rate_per_s : 16);
    double vw = w->video_w > 0 ? w->video_w : 1920, vh = w->video_h > 0 ? w->video_h : 1080;
    double fps = w->video_fps > 0 ? w->video_fps : 30;
    /* pixel rate of one stream against the 1080p30 the rates are quoted at */
    double px = vw * vh / (1920.0 * 1080.0);
    if (g->nvdec <= 0) {
        snprintf(e->reason, sizeof e->reason, "%s",
                 g->nvdec == 0 ? "no video decoder (NVDEC)" : "video decoders not known");
        return;
    }
    double dec_cap = g->nvdec * NVDEC_STREAMS / (px * fps / 30.0);
    int prec = w->precision == CR_PREC_BF16 ? CR_PREC_INT8 : w->precision;
    double comp_cap = cr_gpu_peak_flops(g, prec) * VISUAL_EFF / (w->frame_flops * fps);
    /* NVENC: engines x the note's per-engine 1080p rate, scaled by pixels */
    double enc_cap = INFINITY, enc_fps = 0;
    if (w->enc_codec != CR_CODEC_NONE) {
        if (g->nvenc <= 0) {
            snprintf(e->reason, sizeof e->reason, "%s",
                     g->nvenc == 0 ? "no video encoder (NVENC)"
                                   : "NVENC not confirmed in the catalog");
            return;
        }
        if (cr_nvenc_fps(g->arch, w->enc_codec, w->enc_preset, w->enc_cbr, &enc_fps) != 0) {
            snprintf(e->reason, sizeof e->reason, "no published NVENC %s rate for %s",
                     cr_codec_name(w->enc_codec), g->arch);
            return;
        }
        enc_cap = g->nvenc * enc_fps / px / fps;
    }
    double cap = fmin(dec_cap, fmin(comp_cap, enc_cap));
    if (cap < 1e-9) {
        snprintf(e->reason, sizeof e->reason, "no math rate for the detector");
        return;
    }
    if (S / cap > MAX_GPUS) {
        snprintf(e->reason, sizeof e->reason, "needs more than %d GPUs (%.2f streams/GPU)",
                 MAX_GPUS, cap);
        return;
    }
    int n = (int)ceil(S / cap - 1e-9);
    if (n < 1) {
        n = 1;
    }
    if (gpu_count > 0) {
        if (gpu_count < n) {
            snprintf(e->reason, sizeof e->reason, "%d GPUs carry %.0f streams, %.0f asked",
                     gpu_count, gpu_count * cap, S);
            return;
        }
        n = gpu_count;
    }
    int64_t window = w->duration_ns > 0 ? w->duration_ns : DEFAULT_WINDOW;
    e->fits = 1;
    e->gpu_count = n;
    e->gpu_share = n;
    e->replicas = n;
    e->dp = n;
    e->tp = e->pp = 1;
    e->nodes = (n + NODE_GPUS - 1) / NODE_GPUS;
    e->time_ns = window;
    e->throughput = n * cap;
    e->progress_per_s = 1.0 / ((double)window / 1e9);
    double load = S / (n * cap);
    e->energy_j = n * g->tdp_w * (0.3 + 0.5 * load) * (double)window / 1e9;
    snprintf(e->plan, sizeof e->plan, "%d x 1 GPU", n);
    const char *bound = cap == enc_cap ? "encode" : cap == dec_cap ? "decode" : "compute";
    char extra[96] = "";
    if (w->enc_codec != CR_CODEC_NONE) {
        snprintf(extra, sizeof extra, "; %d NVENC x %.0f fps %s p%d %s at 1080p", g->nvenc, enc_fps,
                 cr_codec_name(w->enc_codec), w->enc_preset, w->enc_cbr ? "cbr" : "vbr");
    } else if (g->nvenc > 0 || g->rt_cores == CR_TRI_YES) {
        snprintf(extra, sizeof extra, "; %d NVENC%s", g->nvenc > 0 ? g->nvenc : 0,
                 g->rt_cores == CR_TRI_YES ? ", RT cores" : "");
    }
    snprintf(e->reason, sizeof e->reason, "%.1f streams/GPU (%s-bound, %d NVDEC%s)", cap, bound,
             g->nvdec, extra);
}

/* ------------------------------------------------------------------ */
/* HPC (FP64) and generic batch                                        */
/* ------------------------------------------------------------------ */

static void estimate_hpc(const cr_workload *w, const cr_gpu_type *g, int gpu_count, cr_estimate *e)
{
    int hpc = w->kind == CR_KIND_HPC;
    double W = w->work_flops > 0 ? w->work_flops : 1e18;
    double I = w->flops_per_byte > 0 ? w->flops_per_byte : (hpc ? 8 : 50);
    int prec = hpc ? CR_PREC_FP64 : w->precision;
    double peak = cr_gpu_peak_flops(g, prec);
    if (peak <= 0) {
        snprintf(e->reason, sizeof e->reason, "no %s rate in the catalog",
                 hpc ? "FP64" : cr_precision_name(prec));
        return;
    }
    double rate = fmin(peak * HPC_EFF, g->mem_bw_bytes_per_s * HPC_BW_EFF * I);
    int64_t deadline = w->duration_ns > 0 ? w->duration_ns : DEFAULT_DEADLINE;
    int n = gpu_count > 0 ? gpu_count : 1;
    double t = 0;
    for (;;) {
        double scale = pow(0.95, log2((double)n));
        t = W / (rate * n * scale);
        if (gpu_count > 0 || t * 1e9 <= (double)deadline || n >= 1024) {
            break;
        }
        n *= 2;
    }
    e->fits = 1;
    e->gpu_count = n;
    e->gpu_share = n;
    e->dp = n;
    e->tp = e->pp = 1;
    e->replicas = 1;
    e->nodes = (n + NODE_GPUS - 1) / NODE_GPUS;
    e->time_ns = to_ns(t);
    e->throughput = rate * n;
    e->progress_per_s = 1.0 / t;
    e->energy_j = n * g->tdp_w * TRAIN_POWER_FRAC * t;
    snprintf(e->plan, sizeof e->plan, "%d GPU%s", n, n > 1 ? "s" : "");
    int bw_bound = g->mem_bw_bytes_per_s * HPC_BW_EFF * I < peak * HPC_EFF;
    snprintf(e->reason, sizeof e->reason, "%.1f %sTFLOP/s per GPU (%s-bound)%s", rate / 1e12,
             hpc ? "FP64 " : "", bw_bound ? "bandwidth" : "compute",
             hpc && g->ecc == CR_TRI_YES ? ", ECC" : "");
}

static void fill_measured(const cr_gpu_type *g, int n, double tput, double steps, cr_estimate *e)
{
    double t = steps / tput;
    e->fits = 1;
    e->gpu_count = n;
    e->gpu_share = n;
    e->dp = n;
    e->tp = e->pp = 1;
    e->replicas = 1;
    e->nodes = (n + NODE_GPUS - 1) / NODE_GPUS;
    e->time_ns = to_ns(t);
    e->throughput = tput;
    e->progress_per_s = 1.0 / t;
    e->energy_j = n * g->tdp_w * TRAIN_POWER_FRAC * t;
    if (n > 1) {
        snprintf(e->plan, sizeof e->plan, "dp%d", n);
    } else {
        snprintf(e->plan, sizeof e->plan, "1 GPU");
    }
}

/*
 * Measured throughput from a Gavel table: steps/s at a scale factor (the
 * GPU count). A type the table does not name (anything newer than V100)
 * is extrapolated from the V100 measurement by the geometric mean of the
 * FP16 peak and memory bandwidth ratios: Gavel's jobs (ResNets, small
 * Transformers, LSTMs, A3C) sit between compute- and memory-bound. The
 * extrapolation is not calibrated; measured = 0 marks it.
 */
static int estimate_measured(const cr_perf_env *env, const cr_workload *w, const cr_gpu_type *g,
                             int gpu_count, cr_estimate *e)
{
    if (!env->measured || !w->measured_job || w->steps <= 0) {
        return 0;
    }
    int n = gpu_count > 0 ? gpu_count : 1;
    double tput;
    for (size_t i = 0; i < cr_gavel_worker_count(env->measured); i++) {
        const char *wk = cr_gavel_worker(env->measured, i);
        const char *alias = cr_gavel_worker_alias(wk);
        if (!alias || strcmp(alias, g->alias) != 0 || strstr(wk, "unconsolidated")) {
            continue;
        }
        if (cr_gavel_get(env->measured, wk, w->measured_job, n, &tput) != 0 || tput <= 0) {
            continue;
        }
        fill_measured(g, n, tput, w->steps, e);
        e->measured = 1;
        snprintf(e->reason, sizeof e->reason, "measured: %.2f steps/s (Gavel table, worker %s)",
                 tput, wk);
        return 1;
    }
    const cr_gpu_type *ref = cr_catalog_find(env->catalog, "v100");
    if (!ref || cr_gavel_worker_alias(g->alias) ||
        cr_gavel_get(env->measured, "v100", w->measured_job, n, &tput) != 0 || tput <= 0) {
        return 0;
    }
    double fr = cr_gpu_peak_flops(g, CR_PREC_FP16) / cr_gpu_peak_flops(ref, CR_PREC_FP16);
    double br = g->mem_bw_bytes_per_s / ref->mem_bw_bytes_per_s;
    if (!(fr > 0) || !(br > 0)) {
        return 0;
    }
    double k = sqrt(fr * br);
    fill_measured(g, n, tput * k, w->steps, e);
    snprintf(e->reason, sizeof e->reason,
             "extrapolated: %.2f steps/s (Gavel v100 x %.2f, FP16 and bandwidth ratios)", tput * k,
             k);
    return 1;
}

/* Hard needs: 0 if g may run w, else the reason in e. */
static int check_needs(const cr_workload *w, const cr_gpu_type *g, cr_estimate *e)
{
    unsigned n = w->needs;
    if ((w->precision == CR_PREC_FP4 || w->precision == CR_PREC_FP6) && w->kind != CR_KIND_HPC &&
        !(cr_gpu_peak_flops(g, w->precision) > 0)) {
        /* No emulation: the formats need the tensor cores (Blackwell). */
        snprintf(e->reason, sizeof e->reason,
                 "no %s tensor cores (%s runs on Blackwell: B200, GB200)",
                 w->precision == CR_PREC_FP4 ? "FP4" : "FP6", cr_precision_name(w->precision));
        return -1;
    }
    if (w->kind == CR_KIND_HPC) {
        n |= CR_NEED_FP64;
    }
    if (n & CR_NEED_FP64) {
        if (!cr_known(g->fp64_flops) || !cr_known(g->fp32_flops) || g->fp32_flops <= 0) {
            snprintf(e->reason, sizeof e->reason, "FP64 rate not published");
            return -1;
        }
        if (g->fp64_flops * 4 < g->fp32_flops) {
            double ratio = g->fp64_flops > 0 ? g->fp32_flops / g->fp64_flops : 0;
            int p2 = ratio > 0 ? 1 << (int)lround(log2(ratio)) : 0;
            snprintf(e->reason, sizeof e->reason, "no FP64: 1/%d rate (%.2f TFLOP/s)", p2,
                     g->fp64_flops / 1e12);
            return -1;
        }
    }
    if ((n & CR_NEED_ECC) && g->ecc != CR_TRI_YES) {
        snprintf(e->reason, sizeof e->reason, "%s",
                 g->ecc == CR_TRI_NO ? "no ECC memory" : "ECC not confirmed in the catalog");
        return -1;
    }
    if ((n & CR_NEED_NVENC) && g->nvenc <= 0) {
        snprintf(e->reason, sizeof e->reason, "%s",
                 g->nvenc == 0 ? "no video encoder (NVENC)" : "NVENC not confirmed in the catalog");
        return -1;
    }
    if ((n & CR_NEED_RT) && g->rt_cores != CR_TRI_YES) {
        snprintf(e->reason, sizeof e->reason, "no RT cores");
        return -1;
    }
    if ((n & CR_NEED_MIG) && g->mig_max_instances <= 0) {
        snprintf(e->reason, sizeof e->reason, "no MIG");
        return -1;
    }
    if ((n & CR_NEED_NVLINK) && g->nvlink_bytes_per_s <= 0) {
        snprintf(e->reason, sizeof e->reason, "no NVLink");
        return -1;
    }
    if (w->min_mem_bytes > 0 && g->mem_bytes < w->min_mem_bytes) {
        char need[32], have[32];
        fmt_gb(need, sizeof need, (double)w->min_mem_bytes);
        fmt_gb(have, sizeof have, (double)g->mem_bytes);
        snprintf(e->reason, sizeof e->reason, "needs %s per GPU, has %s", need, have);
        return -1;
    }
    return 0;
}

/* Flag plans that leave an expensive GPU mostly idle. */
static void check_waste(const cr_workload *w, const cr_gpu_type *g, cr_estimate *e)
{
    if (!e->fits || w->kind == CR_KIND_PRETRAIN || e->mig || e->mem_per_gpu_bytes <= 0) {
        return;
    }
    int big = (g->form == CR_FORM_SXM || g->form == CR_FORM_NVL) && g->nvlink_bytes_per_s > 0;
    int single = e->gpu_count == 1 || (e->tp <= 1 && e->pp <= 1);
    double used = e->mem_per_gpu_bytes / (double)g->mem_bytes;
    if (big && single && (used < 0.4 || w->kind == CR_KIND_VISUAL)) {
        e->wasteful = 1;
        char add[80];
        snprintf(add, sizeof add, "; wasteful: %.0f%% of memory used, NVLink idle",
                 used * 100 > 100 ? 100 : used * 100);
        size_t l = strlen(e->reason);
        snprintf(e->reason + l, sizeof e->reason - l, "%s", add);
    }
}

int cr_perf_estimate(const cr_perf_env *env, const cr_workload *w, const cr_gpu_type *gpu,
                     int gpu_count, cr_estimate *out)
{
    char err[128];
    if (!env || !w || !gpu || !out || gpu_count < 0 || gpu_count > MAX_GPUS) {
        return CR_EINVAL;
    }
    if (cr_workload_check(w, err, sizeof err) != 0) {
        return CR_EINVAL;
    }
    cr_estimate e;
    memset(&e, 0, sizeof e);
    e.gpu = gpu;
    e.cost_usd = CR_UNKNOWN;
    if (check_needs(w, gpu, &e) == 0) {
        if (!estimate_measured(env, w, gpu, gpu_count, &e)) {
            if (w->measured_job && w->work_flops <= 0 && w->params <= 0) {
                snprintf(e.reason, sizeof e.reason, "no measured throughput for \"%.60s\"",
                         w->measured_job);
            } else {
                switch (w->kind) {
                case CR_KIND_PRETRAIN:
                case CR_KIND_FINETUNE:
                    estimate_train(w, gpu, gpu_count, &e);
                    break;
                case CR_KIND_INFERENCE:
                    estimate_infer(w, gpu, gpu_count, &e);
                    break;
                case CR_KIND_VISUAL:
                    estimate_visual(w, gpu, gpu_count, &e);
                    break;
                default:
                    estimate_hpc(w, gpu, gpu_count, &e);
                    break;
                }
            }
        }
    }
    if (e.fits) {
        e.gpu_hours = e.gpu_share * hours(e.time_ns);
        double price = cr_prices_get(env->prices, gpu);
        e.cost_usd = cr_known(price) ? price * e.gpu_hours : CR_UNKNOWN;
        check_waste(w, gpu, &e);
    }
    *out = e;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Assumptions, for advise --explain                                   */
/* ------------------------------------------------------------------ */

#define EXPLAIN(...)                                                                               \
    do {                                                                                           \
        if (u < len) {                                                                             \
            int n_ = snprintf(buf + u, len - u, __VA_ARGS__);                                      \
            u += n_ > 0 ? (size_t)n_ : 0;                                                          \
        }                                                                                          \
    } while (0)

char *cr_perf_explain(const cr_workload *w, char *buf, size_t len)
{
    size_t u = 0;
    if (len) {
        buf[0] = '\0';
    }
    int train = w->kind == CR_KIND_PRETRAIN || w->kind == CR_KIND_FINETUNE;
    int stack = cr_stack_resolve(w);
    if (train || w->kind == CR_KIND_INFERENCE) {
        EXPLAIN("stack: %s%s, %.2f of the calibrated GEMM efficiency\n", cr_stack_name(stack),
                w->stack == CR_STACK_AUTO ? (train ? " (default for training; --stack)"
                                                   : " (default for serving; --stack)")
                                          : "",
                stack_eff(stack));
    }
    if (w->arch.layers > 0) {
        EXPLAIN("shape: %s (%d layers, hidden %d, %d KV heads)\n", w->arch.name, w->arch.layers,
                w->arch.hidden, w->arch.kv_heads);
    } else if (train || w->kind == CR_KIND_INFERENCE) {
        cr_arch a;
        cr_arch_default(w->params > 0 ? w->params : 7e9, &a);
        EXPLAIN("shape: %s assumed for %.3g parameters (%d layers, %d KV heads; --model)\n", a.name,
                a.params, a.layers, a.kv_heads);
    }
    EXPLAIN("precision: %s%s\n", cr_precision_name(w->precision),
            w->precision == CR_PREC_BF16 ? " (default)" : "");
    if (train) {
        int pre = w->kind == CR_KIND_PRETRAIN;
        int seq = w->seq_len > 0 ? w->seq_len : (pre ? 4096 : 2048);
        EXPLAIN("sequence: %d tokens%s\n", seq, w->seq_len > 0 ? "" : " (default; --seq)");
        if (w->batch > 0) {
            EXPLAIN("global batch: %d sequences\n", w->batch);
        } else {
            EXPLAIN("global batch: %d sequences (default%s; --batch)\n",
                    pre ? (int)ceil(4194304.0 / seq) : 16, pre ? ": ~4M tokens" : "");
        }
        EXPLAIN("micro-batch: %d sequence%s per data-parallel rank%s\n",
                w->micro_batch > 0 ? w->micro_batch : 1, w->micro_batch > 1 ? "s" : "",
                w->micro_batch > 0 ? "" : " (default; --micro-batch)");
        if (w->ckpt == CR_CKPT_AUTO) {
            EXPLAIN("activation checkpointing: selective where it fits, else full recompute "
                    "(+1/3 compute) (default; --checkpointing)\n");
        } else {
            EXPLAIN("activation checkpointing: %s%s\n", cr_ckpt_name(w->ckpt),
                    w->ckpt == CR_CKPT_FULL ? " (+1/3 compute)" : "");
        }
        EXPLAIN("loss: %s\n", w->full_loss
                                  ? "whole vocabulary at once (14 bytes/logit)"
                                  : "in vocabulary chunks (2 bytes/logit) (default; --loss)");
        if (!pre && w->method != CR_METHOD_FULL) {
            EXPLAIN("adapters: rank %d on every linear layer%s\n",
                    w->lora_rank > 0 ? w->lora_rank : LORA_RANK,
                    w->lora_rank > 0 ? "" : " (default; --lora-rank)");
        }
        if (pre || w->method == CR_METHOD_FULL) {
            EXPLAIN("optimizer: Adam, fp32 master weights, sharded over data parallel (ZeRO-1; "
                    "ZeRO-3 only when nothing else fits)\n");
        } else {
            EXPLAIN("optimizer: Adam on the adapters only, 16 bytes per adapter parameter\n");
        }
        if (w->tokens <= 0) {
            EXPLAIN("tokens: %s (default; --tokens)\n", pre ? "20 x parameters" : "1e8");
        }
        if (w->duration_ns <= 0) {
            EXPLAIN("deadline: 30 days (default; --deadline)\n");
        }
    } else if (w->kind == CR_KIND_INFERENCE) {
        EXPLAIN("prompt: %d tokens, output: %d tokens (means; --prompt, --output)\n",
                w->prompt_tokens, w->output_tokens);
        EXPLAIN("sequences per request: %d%s\n", w->beams > 0 ? w->beams : 1,
                w->beams > 0 ? " (beams / n, sharing the prompt's KV)" : " (default; --beams)");
        int kvp = w->kv_precision >= 0 ? w->kv_precision : default_kv(w->precision);
        EXPLAIN("KV cache: %s%s, %s\n", cr_precision_name(kvp),
                w->kv_precision >= 0 ? "" : " (default; --kv-precision)",
                stack == CR_STACK_HF ? "each sequence reserves prompt + output"
                                     : "paged (prompt + half the output held on average)");
        static const char *const rule[CR_STACK__COUNT] = {
            [CR_STACK_VLLM] = "of the memory the card reports for weights + KV "
                              "(vLLM gpu_memory_utilization)",
            [CR_STACK_SGLANG] = "of the memory the card reports for weights + KV (SGLang "
                                "mem_fraction_static)",
            [CR_STACK_TRTLLM] = "of the memory left after the weights and 1 GB for the KV cache "
                                "(TensorRT-LLM free_gpu_memory_fraction)",
            [CR_STACK_HF] = "of the memory the card reports (no engine cap; 1 GB for CUDA)",
        };
        double frac = w->gpu_mem_util > 0        ? w->gpu_mem_util
                      : stack == CR_STACK_SGLANG ? 0.88
                      : stack == CR_STACK_HF     ? 0.99
                                                 : 0.90;
        EXPLAIN("serving memory: %.0f%% %s%s; an H100 80GB reports 79.6 GiB\n", frac * 100,
                rule[stack] ? rule[stack] : "", w->gpu_mem_util > 0 ? "" : " (default)");
        EXPLAIN("targets: TTFT %.0f ms, TPOT %.0f ms%s\n",
                (double)(w->ttft_ns > 0 ? w->ttft_ns : DEFAULT_TTFT) / 1e6,
                (double)(w->tpot_ns > 0 ? w->tpot_ns : DEFAULT_TPOT) / 1e6,
                w->ttft_ns > 0 && w->tpot_ns > 0 ? "" : " (defaults; --ttft, --tpot)");
        EXPLAIN("engine: continuous batching with chunked prefill (%d-token chunks)\n",
                CHUNK_TOKENS);
        if (w->duration_ns <= 0) {
            EXPLAIN("serving window costed: 1 hour (default; --deadline)\n");
        }
    }
    return buf;
}
