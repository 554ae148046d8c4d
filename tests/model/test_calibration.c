/*
 * test_calibration.c - the performance model against published measurements.
 *
 * Each case is a workload, a GPU type and count, the published number and
 * its source, in a fit set (the constants were tuned on it) or a check set
 * (never used for tuning). The test fails when a fit case is off by more
 * than 30% or a check set's mean error grows past its recorded bound.
 * Run with --table to print the Markdown table of docs/model.md.
 */
#include "cr_arch.h"
#include "cr_catalog.h"
#include "cr_perf.h"
#include "cr_price.h"
#include "cr_time.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum metric {
    M_MFU,
    M_TPOT_MS,
    M_TTFT_MS,
    M_LATENCY_MS,
    M_TOK_S_GPU,
    M_MAX_TOK_S,
    M_MEM_GIB,
    M_TFLOPS_GPU
};

/* FIT: the constants of src/model/perf.c were tuned on these. CHECK: never
 * used for tuning; they measure the model. UNSCORED: printed, not counted
 * (a published figure the rows' own arithmetic cannot reconcile with the
 * hardware; the reason is in its name). */
enum cal_set { FIT = 0, CHECK = 1, UNSCORED = 2 };

/* Regression guards on the check set's mean |error| (docs/model.md states
 * the current values; the goal is 10% mean, 30% worst). */
#define CHECK_TRAIN_MAX 18
#define CHECK_SERVE_MAX 11
#define CHECK_MEM_MAX   11
#define CHECK_HPC_MAX   21

typedef struct cal_case {
    int set;
    const char *model; /* data/models/models.csv row; NULL = shape from params */
    const char *name;
    const char *gpu;
    int gpus;
    int kind;
    double params;
    int precision;
    int seq, batch;     /* training */
    int prompt, output; /* inference */
    double rate;        /* requests/s; 0 = one request at a time */
    int tp, pp;         /* the published plan when the metric depends on it; 0 = the model's */
    int metric;
    double published;
    const char *source;
    /* KNOBS(): the LoRA/QLoRA adapter rank (0 = the model's default, 16)
     * and the knobs the source states (0: by source, knobs_of): the stack
     * (enum cr_stack), activation checkpointing (enum cr_ckpt; else the
     * model's AUTO) and the micro-batch per rank (0 = 1). A plain number
     * is a rank alone. */
    int knobs;
} cal_case;

#define KNOBS(rank, stack, ckpt, mb) ((rank) | (stack) << 13 | (ckpt) << 17 | (mb) << 20)
#define KNOB_RANK(k)                 ((k)&0x1fff)
#define KNOB_STACK(k)                (((k) >> 13) & 0xf)
#define KNOB_CKPT(k)                 (((k) >> 17) & 0x7)
#define KNOB_MB(k)                   ((k) >> 20)

/* kind < 0: finetune with method -kind. */
#define NEMO_PERF "NVIDIA NeMo Framework 24.12 performance summary (H100, FP8): tokens/s/GPU"

#define MEGATRON_T1                                                                                \
    "Narayanan et al. SC'21 (arXiv:2104.04473) Table 1: TFLOP/s/GPU incl. recompute on A100; "     \
    "x3/4 = MFU"

#define TRTLLM_TPUT                                                                                \
    "TensorRT-LLM perf-overview.md (v1.0, NVIDIA/TensorRT-LLM@00f37686): total output tokens/s, "  \
    "infinite request rate"

#define TORCHTUNE_MEM                                                                              \
    "torchtune README (pytorch/torchtune@0031bfb0, Sept 2024), Memory and training speed: batch "  \
    "2, packed to 2048 tokens, torch.compile; peak memory per GPU"

#define QWEN_MEM                                                                                   \
    "Qwen (1) README (QwenLM/Qwen), Profiling of Memory and Speed: 1 x A100-SXM4-80G, batch 1, "   \
    "flash attention 2, gradient checkpointing; LoRA r=64 on c_attn, c_proj, w1, w2 "              \
    "(finetune.py); "                                                                              \
    "Q-LoRA on the GPTQ Int4 chat model; memory in G, read as GiB"

#define TORCHTITAN_H100                                                                            \
    "torchtitan docs/performance.md (pytorch/torchtitan), Table 1: FSDP2, Llama 3.1 8B, 8 H100 "   \
    "(96 GB, 500 W), local batch 2, seq 8192, selective AC; memory per GPU"

#define TORCHTITAN_A100                                                                            \
    "torchtitan docs/performance.md (pytorch/torchtitan@04133643): FSDP2 on 64 A100 80GB; WPS "    \
    "per GPU"

#define TRTLLM_LAT                                                                                 \
    "TensorRT-LLM docs/source/performance.md (v0.5 low-latency table): batch 1, 1st token "        \
    "latency"

#define LITGPT_MEM                                                                                 \
    "LitGPT tutorials/resource-tables.md (Lightning-AI/litgpt@4839345a, Oct 2023), Finetuning "    \
    "with LoRA on 1 GPU: 1 x A100-SXM4-40GB, finetune/lora.py, LoRA r=8 on query and value, "      \
    "bf16-true, Alpaca (longest sample 1304 Llama 2 tokens), no activation checkpointing; Max "    \
    "GPU RAM in GB (1e9 bytes), converted to GiB"

#define LLAMAFACTORY                                                                               \
    "LLaMA-Factory wiki, Performance comparison (hiyouga/LLaMA-Factory, Apr 2024): 1 x A100 "      \
    "40GB, LLaMA2-7B, 4-bit QLoRA, LoRA r=8 on all modules, batch 1, gradient accumulation 4, "    \
    "FlashAttention2 under Hugging Face, gradient checkpointing (LLaMA-Factory's default); VRAM "  \
    "in GB (read as GiB), TGS = tokens/GPU/s"

/* FP64 per GPU (M_TFLOPS_GPU); params holds the kernel's FLOP per byte
 * (64 dense HPL, 0.25 sparse HPCG, the model's kernel classes). Top500
 * and HPCG results are weak-scaled (the problem grows with the machine),
 * so they are compared per GPU on one GPU: the model's 95% per doubling
 * is for a job of fixed work. */
#define KLOCKWOOD_HPL                                                                              \
    "glennklockwood.com/garden/hpl: single-accelerator HPL TFLOPS from the June 2024 Top500 list " \
    "(A100 11-15, Perlmutter; H100 36-43, Eagle and Eos); the middle of the range"

#define HPCG_2021                                                                                  \
    "top500.org/lists/hpcg/2021/06: Summit 2.93 HPCG-PFlop/s (4,608 nodes x 6 V100 = 27,648 "      \
    "GPUs), Perlmutter 1.91 (phase 1: 1,536 nodes x 4 A100 40GB = 6,144 GPUs); per GPU"

static const cal_case cases[] = {
    {FIT, "llama-3.1-405b", "Llama 3 405B pre-training, 8,192 GPUs, seq 8192, 16M-token batch",
     "h100", 8192, CR_KIND_PRETRAIN, 405e9, CR_PREC_BF16, 8192, 2048, 0, 0, 0, 8, 16, M_MFU, 0.43,
     "Llama 3 paper (Meta 2024), Table 4: 430 TFLOP/s/GPU BF16 at 8K GPUs; 38-43% MFU", 0},
    {FIT, "gpt-3-175b", "GPT-3 175B pre-training, 512 GPUs, seq 2048", "h100", 512,
     CR_KIND_PRETRAIN, 175e9, CR_PREC_BF16, 2048, 2048, 0, 0, 0, 4, 8, M_MFU, 0.47,
     "Megatron-Core benchmarks (NVIDIA Megatron-LM README): 47% MFU, 390 TFLOP/s/GPU, TP4 PP8", 0},
    {FIT, "megatron-1t", "1T-parameter GPT pre-training, 3,072 GPUs, seq 2048", "a100", 3072,
     CR_KIND_PRETRAIN, 1e12, CR_PREC_BF16, 2048, 3072, 0, 0, 0, 8, 64, M_MFU, 0.39,
     "Narayanan et al. SC'21 (Megatron-LM): 163 TFLOP/s/GPU = 52% of peak incl. recompute; "
     "x3/4 = 39% MFU",
     0},
    {FIT, "llama-2-7b", "Llama 2 7B pre-training fp8, seq 4096, batch 128", "h100", 8,
     CR_KIND_PRETRAIN, 6.7e9, CR_PREC_FP8, 4096, 128, 0, 0, 0, 0, 0, M_TOK_S_GPU, 16934, NEMO_PERF,
     0},
    {FIT, "llama-2-70b", "Llama 2 70B pre-training fp8, seq 4096, batch 128", "h100", 64,
     CR_KIND_PRETRAIN, 70e9, CR_PREC_FP8, 4096, 128, 0, 0, 0, 0, 0, M_TOK_S_GPU, 1728, NEMO_PERF,
     0},
    {FIT, "llama-2-7b", "Llama 2 7B LoRA fine-tuning fp8, seq 4096, batch 32", "h100", 8,
     -CR_METHOD_LORA, 6.7e9, CR_PREC_FP8, 4096, 32, 0, 0, 0, 0, 0, M_TOK_S_GPU, 24824, NEMO_PERF,
     0},
    {FIT, "llama-2-70b", "Llama 2 70B LoRA fine-tuning fp8, seq 4096, batch 32", "h100", 8,
     -CR_METHOD_LORA, 70e9, CR_PREC_FP8, 4096, 32, 0, 0, 0, 0, 0, M_TOK_S_GPU, 2621, NEMO_PERF, 0},
    {FIT, "llama-2-7b", "LLaMA 7B fp16 first-token latency, 2048-token prompt", "a100", 1,
     CR_KIND_INFERENCE, 6.7e9, CR_PREC_FP16, 0, 0, 2048, 1, 0, 0, 0, M_TTFT_MS, 133, TRTLLM_LAT, 0},
    {FIT, "llama-2-70b", "LLaMA 70B fp16 TP4 first-token latency, 2048-token prompt", "a100", 4,
     CR_KIND_INFERENCE, 70e9, CR_PREC_FP16, 0, 0, 2048, 1, 0, 4, 1, M_TTFT_MS, 377, TRTLLM_LAT, 0},
    {FIT, "llama-2-7b", "LLaMA 7B fp8 first-token latency, 2048-token prompt", "h100", 1,
     CR_KIND_INFERENCE, 6.7e9, CR_PREC_FP8, 0, 0, 2048, 1, 0, 0, 0, M_TTFT_MS, 36, TRTLLM_LAT, 0},
    {FIT, "llama-2-70b", "LLaMA 70B fp8 TP4 first-token latency, 2048-token prompt", "h100", 4,
     CR_KIND_INFERENCE, 70e9, CR_PREC_FP8, 0, 0, 2048, 1, 0, 4, 1, M_TTFT_MS, 109, TRTLLM_LAT, 0},
    {FIT, "llama-2-7b", "LLaMA 7B fp8 first-token latency, 2048-token prompt", "l40s", 1,
     CR_KIND_INFERENCE, 6.7e9, CR_PREC_FP8, 0, 0, 2048, 1, 0, 0, 0, M_TTFT_MS, 73, TRTLLM_LAT, 0},
    {FIT, "llama-2-7b", "Llama 2 7B, batch 1, 128 in / 20 out, end-to-end", "a100", 1,
     CR_KIND_INFERENCE, 6.7e9, CR_PREC_BF16, 0, 0, 128, 20, 0, 0, 0, M_LATENCY_MS, 234.0,
     "NVIDIA NeMo Framework docs, Llama 2 inference performance (TensorRT-LLM), TP1", 0},
    {FIT, "llama-2-7b", "Llama 2 7B, batch 1, 128 in / 20 out, end-to-end", "h100", 1,
     CR_KIND_INFERENCE, 6.7e9, CR_PREC_BF16, 0, 0, 128, 20, 0, 0, 0, M_LATENCY_MS, 153.8,
     "NVIDIA NeMo Framework docs, Llama 2 inference performance (TensorRT-LLM), TP1", 0},
    {FIT, "llama-3.1-8b", "Llama 3.1 8B bf16 decode, 1 request, 1024 in / 128 out", "a100-40gb", 1,
     CR_KIND_INFERENCE, 8e9, CR_PREC_BF16, 0, 0, 1024, 128, 0, 0, 0, M_TPOT_MS, 1000.0 / 75,
     "johnmusgrave.com vLLM sweep on A100 40GB: ~75 tokens/s at concurrency 1", 0},
    {FIT, "llama-3.3-70b", "Llama 3.3 70B fp8 TP2 decode, 1 request, 5000 in / 500 out", "h100", 2,
     CR_KIND_INFERENCE, 70e9, CR_PREC_FP8, 0, 0, 5000, 500, 0, 2, 1, M_TPOT_MS, 18.58,
     "NVIDIA NIM LLM benchmarking docs 1.0.0: 2x H100 fp8 TP2, ITL 18.58 ms at concurrency 1", 0},
    {FIT, "llama-3.3-70b", "Llama 3.3 70B fp8 TP2 time to first token, 5000-token prompt", "h100",
     2, CR_KIND_INFERENCE, 70e9, CR_PREC_FP8, 0, 0, 5000, 500, 0, 2, 1, M_TTFT_MS, 406.77,
     "NVIDIA NIM LLM benchmarking docs 1.0.0: TTFT 406.77 ms at concurrency 1", 0},
    {FIT, "llama-3.3-70b", "Llama 3.3 70B fp8 TP2 decode at concurrency 25 (1.25 req/s)", "h100", 2,
     CR_KIND_INFERENCE, 70e9, CR_PREC_FP8, 0, 0, 5000, 500, 1.25, 2, 1, M_TPOT_MS, 38.75,
     "NVIDIA NIM LLM benchmarking docs 1.0.0: ITL 38.75 ms at concurrency 25 (rate = 25 / "
     "(TTFT + 499 ITL))",
     0},
    {FIT, "llama-3.3-70b", "Llama 3.3 70B fp8 TP2 time to first token at concurrency 25", "h100", 2,
     CR_KIND_INFERENCE, 70e9, CR_PREC_FP8, 0, 0, 5000, 500, 1.25, 2, 1, M_TTFT_MS, 688.69,
     "NVIDIA NIM LLM benchmarking docs 1.0.0: TTFT 688.69 ms at concurrency 25", 0},

    {FIT, "qwen-1.8b", "Qwen 1.8B LoRA r64, 1 GPU, 1 x 2048 tokens", "a100", 1, -CR_METHOD_LORA, 0,
     CR_PREC_BF16, 2048, 1, 0, 0, 0, 1, 1, M_MEM_GIB, 11.0, QWEN_MEM, 64},
    {FIT, "qwen-1.8b", "Qwen 1.8B LoRA r64, 1 GPU, 1 x 8192 tokens", "a100", 1, -CR_METHOD_LORA, 0,
     CR_PREC_BF16, 8192, 1, 0, 0, 0, 1, 1, M_MEM_GIB, 21.8, QWEN_MEM, 64},
    {FIT, "qwen-1.8b", "Qwen 1.8B QLoRA (GPTQ int4) r64, 1 GPU, 1 x 2048 tokens", "a100", 1,
     -CR_METHOD_QLORA, 0, CR_PREC_BF16, 2048, 1, 0, 0, 0, 1, 1, M_MEM_GIB, 7.8, QWEN_MEM, 64},
    {FIT, "qwen-1.8b", "Qwen 1.8B QLoRA (GPTQ int4) r64, 1 GPU, 1 x 8192 tokens", "a100", 1,
     -CR_METHOD_QLORA, 0, CR_PREC_BF16, 8192, 1, 0, 0, 0, 1, 1, M_MEM_GIB, 15.8, QWEN_MEM, 64},
    {FIT, "qwen-14b", "Qwen 14B LoRA r64, 1 GPU, 1 x 2048 tokens", "a100", 1, -CR_METHOD_LORA, 0,
     CR_PREC_BF16, 2048, 1, 0, 0, 0, 1, 1, M_MEM_GIB, 37.4, QWEN_MEM, 64},
    {FIT, "qwen-14b", "Qwen 14B LoRA r64, 1 GPU, 1 x 8192 tokens", "a100", 1, -CR_METHOD_LORA, 0,
     CR_PREC_BF16, 8192, 1, 0, 0, 0, 1, 1, M_MEM_GIB, 55.2, QWEN_MEM, 64},
    {FIT, "qwen-14b", "Qwen 14B QLoRA (GPTQ int4) r64, 1 GPU, 1 x 2048 tokens", "a100", 1,
     -CR_METHOD_QLORA, 0, CR_PREC_BF16, 2048, 1, 0, 0, 0, 1, 1, M_MEM_GIB, 19.9, QWEN_MEM, 64},
    {FIT, "qwen-14b", "Qwen 14B QLoRA (GPTQ int4) r64, 1 GPU, 1 x 8192 tokens", "a100", 1,
     -CR_METHOD_QLORA, 0, CR_PREC_BF16, 8192, 1, 0, 0, 0, 1, 1, M_MEM_GIB, 27.9, QWEN_MEM, 64},
    {FIT, "llama-3.1-8b", "Llama 3.1 8B LoRA, 1 GPU, 2 x 2048 tokens", "l40s", 1, -CR_METHOD_LORA,
     0, CR_PREC_BF16, 4096, 1, 0, 0, 0, 1, 1, M_MEM_GIB, 16.2, TORCHTUNE_MEM, 0},
    {FIT, "llama-3.1-8b", "Llama 3.1 8B QLoRA, 1 GPU, 2 x 2048 tokens", "l40s", 1, -CR_METHOD_QLORA,
     0, CR_PREC_BF16, 4096, 1, 0, 0, 0, 1, 1, M_MEM_GIB, 7.4, TORCHTUNE_MEM, 0},
    {FIT, "llama-3-8b", "Llama 3 8B pre-training FSDP2, 64 GPUs, seq 8192, selective AC", "a100",
     64, CR_KIND_PRETRAIN, 0, CR_PREC_BF16, 8192, 64, 0, 0, 0, 1, 1, M_TOK_S_GPU, 2904,
     TORCHTITAN_A100, KNOBS(0, CR_STACK_FSDP, CR_CKPT_SELECTIVE, 1)},
    /* ---- check set: never used to tune the model ---- */
    {CHECK, "megatron-18b", "GPT 18.4B pre-training, 256 GPUs, seq 2048, batch 1024", "a100", 256,
     CR_KIND_PRETRAIN, 0, CR_PREC_BF16, 2048, 1024, 0, 0, 0, 8, 1, M_MFU, 135.0 / 312 * 0.75,
     MEGATRON_T1, 0},
    {CHECK, "megatron-39b", "GPT 39.1B pre-training, 512 GPUs, seq 2048, batch 1536", "a100", 512,
     CR_KIND_PRETRAIN, 0, CR_PREC_BF16, 2048, 1536, 0, 0, 0, 8, 2, M_MFU, 138.0 / 312 * 0.75,
     MEGATRON_T1, 0},
    {CHECK, "megatron-146b", "GPT 145.6B pre-training, 1536 GPUs, seq 2048, batch 2304", "a100",
     1536, CR_KIND_PRETRAIN, 0, CR_PREC_BF16, 2048, 2304, 0, 0, 0, 8, 8, M_MFU, 148.0 / 312 * 0.75,
     MEGATRON_T1, 0},
    {CHECK, "llama-3.1-405b", "Llama 3 405B pre-training, 16,384 GPUs, seq 8192, 16M-token batch",
     "h100", 16384, CR_KIND_PRETRAIN, 0, CR_PREC_BF16, 8192, 2048, 0, 0, 0, 8, 16, M_MFU, 0.41,
     "Llama 3 paper (Meta 2024, arXiv:2407.21783) Table 4: 16,384 GPUs, 400 TFLOP/s/GPU, 41% MFU",
     0},
    {CHECK, "llama-3.1-405b", "Llama 3 405B long-context pre-training, 16,384 GPUs, seq 131072",
     "h100", 16384, CR_KIND_PRETRAIN, 0, CR_PREC_BF16, 131072, 128, 0, 0, 0, 8, 16, M_MFU, 0.38,
     "Llama 3 paper (Meta 2024, arXiv:2407.21783) Table 4: CP16, 380 TFLOP/s/GPU, 38% MFU", 0},
    {FIT, "llama-3.1-8b", "Llama 3.1 8B fp8 max throughput, 1000 in / 1000 out", "h100", 1,
     CR_KIND_INFERENCE, 0, CR_PREC_FP8, 0, 0, 1000, 1000, 0, 1, 1, M_MAX_TOK_S, 15220, TRTLLM_TPUT,
     0},
    {CHECK, "llama-3.1-8b", "Llama 3.1 8B fp8 max throughput, 128 in / 2048 out", "h100", 1,
     CR_KIND_INFERENCE, 0, CR_PREC_FP8, 0, 0, 128, 2048, 0, 1, 1, M_MAX_TOK_S, 22714, TRTLLM_TPUT,
     0},
    {CHECK, "llama-3.1-8b", "Llama 3.1 8B fp8 max throughput, 2048 in / 128 out", "h100", 1,
     CR_KIND_INFERENCE, 0, CR_PREC_FP8, 0, 0, 2048, 128, 0, 1, 1, M_MAX_TOK_S, 3450, TRTLLM_TPUT,
     0},
    {CHECK, "llama-3.1-8b", "Llama 3.1 8B fp8 max throughput, 5000 in / 500 out", "h100", 1,
     CR_KIND_INFERENCE, 0, CR_PREC_FP8, 0, 0, 5000, 500, 0, 1, 1, M_MAX_TOK_S, 3459, TRTLLM_TPUT,
     0},
    {CHECK, "llama-3.1-8b", "Llama 3.1 8B fp8 max throughput, 1000 in / 1000 out", "h200", 1,
     CR_KIND_INFERENCE, 0, CR_PREC_FP8, 0, 0, 1000, 1000, 0, 1, 1, M_MAX_TOK_S, 17744, TRTLLM_TPUT,
     0},
    {FIT, "llama-3.3-70b", "Llama 3.3 70B fp8 TP2 max throughput, 1000 in / 1000 out", "h100", 2,
     CR_KIND_INFERENCE, 0, CR_PREC_FP8, 0, 0, 1000, 1000, 0, 2, 1, M_MAX_TOK_S, 4205, TRTLLM_TPUT,
     0},
    {CHECK, "llama-3.3-70b", "Llama 3.3 70B fp8 TP2 max throughput, 2048 in / 128 out", "h100", 2,
     CR_KIND_INFERENCE, 0, CR_PREC_FP8, 0, 0, 2048, 128, 0, 2, 1, M_MAX_TOK_S, 762, TRTLLM_TPUT, 0},
    {CHECK, "llama-3.3-70b", "Llama 3.3 70B fp8 TP2 max throughput, 5000 in / 500 out", "h100", 2,
     CR_KIND_INFERENCE, 0, CR_PREC_FP8, 0, 0, 5000, 500, 0, 2, 1, M_MAX_TOK_S, 898, TRTLLM_TPUT, 0},
    {CHECK, "llama-3.3-70b", "Llama 3.3 70B fp8 max throughput, 1000 in / 1000 out", "h200", 1,
     CR_KIND_INFERENCE, 0, CR_PREC_FP8, 0, 0, 1000, 1000, 0, 1, 1, M_MAX_TOK_S, 2909, TRTLLM_TPUT,
     0},
    {CHECK, "llama-3.1-405b", "Llama 3.1 405B fp8 TP8 max throughput, 1000 in / 1000 out", "h200",
     8, CR_KIND_INFERENCE, 0, CR_PREC_FP8, 0, 0, 1000, 1000, 0, 8, 1, M_MAX_TOK_S, 3330,
     TRTLLM_TPUT, 0},
    {CHECK, "llama-3.1-405b", "Llama 3.1 405B fp8 TP8 max throughput, 5000 in / 500 out", "h200", 8,
     CR_KIND_INFERENCE, 0, CR_PREC_FP8, 0, 0, 5000, 500, 0, 8, 1, M_MAX_TOK_S, 650, TRTLLM_TPUT, 0},
    {CHECK, "llama-3.1-405b", "Llama 3.1 405B fp8 TP8 max throughput, 1000 in / 1000 out", "h100",
     8, CR_KIND_INFERENCE, 0, CR_PREC_FP8, 0, 0, 1000, 1000, 0, 8, 1, M_MAX_TOK_S, 2919,
     TRTLLM_TPUT, 0},
    {FIT, "qwen3-235b-a22b", "Qwen3 235B-A22B (MoE) fp8 TP8 max throughput, 1000 in / 1000 out",
     "h200", 8, CR_KIND_INFERENCE, 0, CR_PREC_FP8, 0, 0, 1000, 1000, 0, 8, 1, M_MAX_TOK_S, 23789,
     TRTLLM_TPUT, 0},
    {CHECK, "qwen3-235b-a22b", "Qwen3 235B-A22B (MoE) fp8 TP8 max throughput, 1000 in / 1000 out",
     "h100", 8, CR_KIND_INFERENCE, 0, CR_PREC_FP8, 0, 0, 1000, 1000, 0, 8, 1, M_MAX_TOK_S, 14898,
     TRTLLM_TPUT, 0},
    {CHECK, "qwen-7b", "Qwen 7B LoRA r64, 1 GPU, 1 x 2048 tokens", "a100", 1, -CR_METHOD_LORA, 0,
     CR_PREC_BF16, 2048, 1, 0, 0, 0, 1, 1, M_MEM_GIB, 23.8, QWEN_MEM, 64},
    {CHECK, "qwen-7b", "Qwen 7B LoRA r64, 1 GPU, 1 x 8192 tokens", "a100", 1, -CR_METHOD_LORA, 0,
     CR_PREC_BF16, 8192, 1, 0, 0, 0, 1, 1, M_MEM_GIB, 36.6, QWEN_MEM, 64},
    {CHECK, "qwen-7b", "Qwen 7B QLoRA (GPTQ int4) r64, 1 GPU, 1 x 2048 tokens", "a100", 1,
     -CR_METHOD_QLORA, 0, CR_PREC_BF16, 2048, 1, 0, 0, 0, 1, 1, M_MEM_GIB, 13.9, QWEN_MEM, 64},
    {CHECK, "qwen-7b", "Qwen 7B QLoRA (GPTQ int4) r64, 1 GPU, 1 x 8192 tokens", "a100", 1,
     -CR_METHOD_QLORA, 0, CR_PREC_BF16, 8192, 1, 0, 0, 0, 1, 1, M_MEM_GIB, 23.5, QWEN_MEM, 64},
    {CHECK, "qwen-72b", "Qwen 72B QLoRA (GPTQ int4) r64, 1 GPU, 1 x 2048 tokens", "a100", 1,
     -CR_METHOD_QLORA, 0, CR_PREC_BF16, 2048, 1, 0, 0, 0, 1, 1, M_MEM_GIB, 64.1, QWEN_MEM, 64},
    {CHECK, "qwen-72b", "Qwen 72B QLoRA (GPTQ int4) r64, 1 GPU, 1 x 8192 tokens", "a100", 1,
     -CR_METHOD_QLORA, 0, CR_PREC_BF16, 8192, 1, 0, 0, 0, 1, 1, M_MEM_GIB, 75.6, QWEN_MEM, 64},
    {CHECK, "llama-3.1-70b", "Llama 3.1 70B LoRA, 8 GPUs (FSDP), 2 x 2048 tokens", "a100", 8,
     -CR_METHOD_LORA, 0, CR_PREC_BF16, 4096, 8, 0, 0, 0, 1, 1, M_MEM_GIB, 27.6, TORCHTUNE_MEM, 0},
    {CHECK, "llama-3.1-405b", "Llama 3.1 405B QLoRA, 8 GPUs (FSDP), 2 x 2048 tokens", "a100", 8,
     -CR_METHOD_QLORA, 0, CR_PREC_BF16, 4096, 8, 0, 0, 0, 1, 1, M_MEM_GIB, 44.8e9 / 1073741824.0,
     TORCHTUNE_MEM, 0},
    {CHECK, "llama-3.1-8b", "Llama 3.1 8B FSDP2 peak memory, 8 GPUs, seq 8192, local batch 2",
     "h100", 8, CR_KIND_PRETRAIN, 0, CR_PREC_BF16, 8192, 16, 0, 0, 0, 1, 1, M_MEM_GIB, 82.4,
     TORCHTITAN_H100, KNOBS(0, CR_STACK_FSDP, CR_CKPT_SELECTIVE, 2)},
    {CHECK, "llama-3-70b", "Llama 3 70B pre-training FSDP2, 64 GPUs, seq 8192, full AC", "a100", 64,
     CR_KIND_PRETRAIN, 0, CR_PREC_BF16, 8192, 64, 0, 0, 0, 1, 1, M_TOK_S_GPU, 331, TORCHTITAN_A100,
     KNOBS(0, CR_STACK_FSDP, CR_CKPT_FULL, 1)},
    {CHECK, "llama-2-13b", "Llama 2 13B pre-training FSDP2, 64 GPUs, seq 4096, batch 2, no AC",
     "a100", 64, CR_KIND_PRETRAIN, 0, CR_PREC_BF16, 4096, 128, 0, 0, 0, 1, 1, M_TOK_S_GPU, 2162,
     TORCHTITAN_A100, KNOBS(0, CR_STACK_FSDP, CR_CKPT_NONE, 2)},
    {CHECK, "llama-2-70b", "Llama 2 70B pre-training FSDP2, 64 GPUs, seq 4096, batch 2, full AC",
     "a100", 64, CR_KIND_PRETRAIN, 0, CR_PREC_BF16, 4096, 128, 0, 0, 0, 1, 1, M_TOK_S_GPU, 353,
     TORCHTITAN_A100, KNOBS(0, CR_STACK_FSDP, CR_CKPT_FULL, 2)},
    /* ---- grown for issue 26 (advisor3): set membership fixed before any
     * error was computed; the check rows were never used to fit ---- */
    {FIT, "llama-2-7b", "Llama 2 7B LoRA (LitGPT), 1 GPU, 1 x 1304 tokens, no AC", "a100-40gb", 1,
     -CR_METHOD_LORA, 0, CR_PREC_BF16, 1304, 1, 0, 0, 0, 1, 1, M_MEM_GIB, 21.30e9 / 1073741824.0,
     LITGPT_MEM, KNOBS(8, CR_STACK_HF, CR_CKPT_NONE, 1)},
    {FIT, "llama-2-7b", "Llama 2 7B QLoRA nf4 (LitGPT), 1 GPU, 1 x 1304 tokens, no AC", "a100-40gb",
     1, -CR_METHOD_QLORA, 0, CR_PREC_BF16, 1304, 1, 0, 0, 0, 1, 1, M_MEM_GIB,
     14.14e9 / 1073741824.0, LITGPT_MEM, KNOBS(8, CR_STACK_HF, CR_CKPT_NONE, 1)},
    {CHECK, "llama-2-7b", "Llama 2 7B LoRA (LitGPT), 1 GPU, 2 x 1304 tokens, no AC", "a100-40gb", 1,
     -CR_METHOD_LORA, 0, CR_PREC_BF16, 1304, 2, 0, 0, 0, 1, 1, M_MEM_GIB, 29.07e9 / 1073741824.0,
     LITGPT_MEM, KNOBS(8, CR_STACK_HF, CR_CKPT_NONE, 2)},
    {CHECK, "llama-2-13b", "Llama 2 13B LoRA (LitGPT), 1 GPU, 1 x 1304 tokens, no AC", "a100-40gb",
     1, -CR_METHOD_LORA, 0, CR_PREC_BF16, 1304, 1, 0, 0, 0, 1, 1, M_MEM_GIB, 38.12e9 / 1073741824.0,
     LITGPT_MEM, KNOBS(8, CR_STACK_HF, CR_CKPT_NONE, 1)},
    {CHECK, "llama-2-13b", "Llama 2 13B QLoRA nf4 (LitGPT), 1 GPU, 1 x 1304 tokens, no AC",
     "a100-40gb", 1, -CR_METHOD_QLORA, 0, CR_PREC_BF16, 1304, 1, 0, 0, 0, 1, 1, M_MEM_GIB,
     23.14e9 / 1073741824.0, LITGPT_MEM, KNOBS(8, CR_STACK_HF, CR_CKPT_NONE, 1)},
#define LF_MEM(set, seq, gib)                                                                      \
    {                                                                                              \
        set, "llama-2-7b", "Llama 2 7B QLoRA (LLaMA-Factory), 1 GPU, 1 x " #seq " tokens",         \
            "a100-40gb", 1, -CR_METHOD_QLORA, 0, CR_PREC_BF16, seq, 4, 0, 0, 0, 1, 1, M_MEM_GIB,   \
            gib, LLAMAFACTORY, KNOBS(8, CR_STACK_HF, CR_CKPT_FULL, 1)                              \
    }
/* Not scored: 6N + attention FLOPs per token at the published TGS are 20%
 * of the A100's bf16 peak at 1024 tokens and 45% at 16384 before the
 * recompute of gradient checkpointing (about 60% with it), under Hugging
 * Face + bitsandbytes; the wiki does not say how TGS counts tokens. */
#define LF_TGS(set, seq, tgs)                                                                      \
    {                                                                                              \
        UNSCORED, "llama-2-7b",                                                                    \
            "Llama 2 7B QLoRA (LLaMA-Factory) speed, 1 x " #seq                                    \
            " tokens (not scored: TGS implausible)",                                               \
            "a100-40gb", 1, -CR_METHOD_QLORA, 0, CR_PREC_BF16, seq, 4, 0, 0, 0, 1, 1, M_TOK_S_GPU, \
            tgs, LLAMAFACTORY, KNOBS(8, CR_STACK_HF, CR_CKPT_FULL, 1)                              \
    }
    LF_MEM(FIT, 1024, 6),
    LF_MEM(CHECK, 2048, 7),
    LF_MEM(FIT, 4096, 9),
    LF_MEM(CHECK, 8192, 12),
    LF_MEM(FIT, 16384, 19),
    LF_MEM(CHECK, 32768, 32),
    LF_TGS(FIT, 1024, 2295),
    LF_TGS(CHECK, 2048, 2741),
    LF_TGS(FIT, 4096, 2926),
    LF_TGS(CHECK, 8192, 3128),
    LF_TGS(FIT, 16384, 3542),
    LF_TGS(CHECK, 32768, 2216),
    {CHECK, NULL, "HPL, one A100 of Perlmutter (Top500 June 2024)", "a100-40gb", 1, CR_KIND_HPC, 64,
     CR_PREC_FP64, 0, 0, 0, 0, 0, 0, 0, M_TFLOPS_GPU, 13.0, KLOCKWOOD_HPL, 0},
    {CHECK, NULL, "HPL, one H100 of Eagle/Eos (Top500 June 2024)", "h100", 1, CR_KIND_HPC, 64,
     CR_PREC_FP64, 0, 0, 0, 0, 0, 0, 0, M_TFLOPS_GPU, 39.5, KLOCKWOOD_HPL, 0},
    {CHECK, NULL, "HPCG, Summit per V100 (HPCG June 2021)", "v100", 1, CR_KIND_HPC, 0.25,
     CR_PREC_FP64, 0, 0, 0, 0, 0, 0, 0, M_TFLOPS_GPU, 2.93e3 / 27648, HPCG_2021, 0},
    {CHECK, NULL, "HPCG, Perlmutter per A100 40GB (HPCG June 2021)", "a100-40gb", 1, CR_KIND_HPC,
     0.25, CR_PREC_FP64, 0, 0, 0, 0, 0, 0, 0, M_TFLOPS_GPU, 1.91e3 / 6144, HPCG_2021, 0},
/* TensorRT-LLM perf-overview v1.0, the lengths and GPUs the rows above
 * leave out (B200 FP4 among them). Set by a rule fixed before any
 * error was computed: ISL/OSL 128/128 and 2048/2048 are fit rows, all
 * other lengths check rows. */
#define TRT(set, model, gpu, n, tp, prec, isl, osl, pub)                                           \
    {                                                                                              \
        set, model, model " " #prec " TP" #tp " max throughput, " #isl " in / " #osl " out", gpu,  \
            n, CR_KIND_INFERENCE, 0, CR_PREC_##prec, 0, 0, isl, osl, 0, tp, 1, M_MAX_TOK_S, pub,   \
            TRTLLM_TPUT, 0                                                                         \
    }
    TRT(FIT, "llama-3.1-8b", "h100", 1, 1, FP8, 128, 128, 28312),
    TRT(FIT, "llama-3.1-8b", "h100", 1, 1, FP8, 2048, 2048, 9305),
    TRT(CHECK, "llama-3.1-8b", "h100", 1, 1, FP8, 128, 4096, 14325),
    TRT(CHECK, "llama-3.1-8b", "h100", 1, 1, FP8, 500, 2000, 17660),
    TRT(CHECK, "llama-3.1-8b", "h100", 1, 1, FP8, 1000, 2000, 13899),
    TRT(CHECK, "llama-3.1-8b", "h100", 1, 1, FP8, 20000, 2000, 1351),
    TRT(FIT, "llama-3.1-8b", "h200", 1, 1, FP8, 2048, 2048, 12194),
    TRT(CHECK, "llama-3.1-8b", "h200", 1, 1, FP8, 128, 2048, 26221),
    TRT(CHECK, "llama-3.1-8b", "h200", 1, 1, FP8, 5000, 500, 3902),
    TRT(FIT, "llama-3.3-70b", "h100", 2, 2, FP8, 128, 128, 6378),
    TRT(CHECK, "llama-3.3-70b", "h100", 2, 2, FP8, 128, 4096, 4199),
    TRT(CHECK, "llama-3.3-70b", "h100", 2, 2, FP8, 20000, 2000, 437),
    TRT(FIT, "llama-3.3-70b", "h200", 1, 1, FP8, 2048, 2048, 2003),
    TRT(CHECK, "llama-3.3-70b", "h200", 1, 1, FP8, 128, 2048, 4336),
    TRT(FIT, "llama-3.3-70b", "b200", 1, 1, FP4, 128, 128, 11147),
    TRT(FIT, "llama-3.3-70b", "b200", 1, 1, FP4, 2048, 2048, 4783),
    TRT(CHECK, "llama-3.3-70b", "b200", 1, 1, FP4, 1000, 1000, 7007),
    TRT(CHECK, "llama-3.3-70b", "b200", 1, 1, FP4, 128, 2048, 9922),
    TRT(CHECK, "llama-3.3-70b", "b200", 1, 1, FP4, 5000, 500, 1459),
    TRT(FIT, "llama-3.1-405b", "b200", 4, 4, FP4, 2048, 2048, 4212),
    TRT(CHECK, "llama-3.1-405b", "b200", 4, 4, FP4, 1000, 1000, 5209),
    TRT(CHECK, "llama-3.1-405b", "h100", 8, 8, FP8, 2048, 2048, 2296),
    TRT(CHECK, "qwen3-235b-a22b", "b200", 8, 8, FP4, 1000, 1000, 42391),
};

static const char *metric_name(int m)
{
    switch (m) {
    case M_MFU:
        return "MFU";
    case M_TPOT_MS:
        return "TPOT ms";
    case M_TTFT_MS:
        return "TTFT ms";
    case M_TOK_S_GPU:
        return "tokens/s/GPU";
    case M_MAX_TOK_S:
        return "output tok/s";
    case M_MEM_GIB:
        return "GiB/GPU";
    case M_TFLOPS_GPU:
        return "FP64 TFLOP/s/GPU";
    default:
        return "latency ms";
    }
}

static const cr_arch_catalog *models;

/* The knobs each source states, where the row does not set them: the
 * stack it ran and its activation checkpointing. Sources that state no
 * checkpointing keep the model's AUTO (selective where it fits, else full). */
static void knobs_of(const cal_case *c, cr_workload *w)
{
    const char *src = c->source;
    w->stack = KNOB_STACK(c->knobs);
    w->ckpt = KNOB_CKPT(c->knobs);
    w->micro_batch = KNOB_MB(c->knobs);
    if (!w->stack) {
        if (strstr(src, "TensorRT-LLM") || strstr(src, "NIM") ||
            strstr(src, "NeMo Framework docs")) {
            w->stack = CR_STACK_TRTLLM;
        } else if (strstr(src, "vLLM")) {
            w->stack = CR_STACK_VLLM;
        } else if (!strcmp(src, QWEN_MEM)) {
            w->stack = CR_STACK_HF;
        } else if (!strcmp(src, TORCHTUNE_MEM)) {
            w->stack = CR_STACK_FSDP;
        } else if (c->kind != CR_KIND_INFERENCE) {
            w->stack = CR_STACK_MEGATRON; /* Megatron-LM, NeMo, Meta's Llama 3 stack */
        }
    }
    if (!w->ckpt) {
        /* Qwen: gradient checkpointing; torchtune: activation checkpointing;
         * Narayanan et al. SC'21: activation recomputation on every run. */
        if (!strcmp(src, QWEN_MEM) || !strcmp(src, TORCHTUNE_MEM) || strstr(src, "Narayanan")) {
            w->ckpt = CR_CKPT_FULL;
        }
    }
}

/* Highest request rate the fixed GPUs sustain with no latency targets (the
 * offline "infinite rate" benchmark): bisection on the rate. */
static double max_tok_s(const cr_perf_env *env, cr_workload *w, const cr_gpu_type *g, int gpus,
                        cr_estimate *e)
{
    double lo = 1e-3, hi = 1e4;
    w->ttft_ns = INT64_C(100000) * CR_NS_PER_SEC;
    w->tpot_ns = 100 * CR_NS_PER_SEC;
    for (int i = 0; i < 50; i++) {
        double mid = sqrt(lo * hi);
        w->rate_per_s = mid;
        if (cr_perf_estimate(env, w, g, gpus, e) == 0 && e->fits) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    w->rate_per_s = lo;
    cr_perf_estimate(env, w, g, gpus, e);
    return lo * w->output_tokens;
}

static int predict(const cr_perf_env *env, const cal_case *c, double *out, char *plan,
                   size_t plan_len)
{
    const cr_gpu_type *g = cr_catalog_find(env->catalog, c->gpu);
    if (!g) {
        fprintf(stderr, "no GPU %s\n", c->gpu);
        return -1;
    }
    cr_workload w;
    cr_workload_init(&w);
    w.kind = c->kind;
    if (c->kind < 0) {
        w.kind = CR_KIND_FINETUNE;
        w.method = -c->kind;
    }
    w.params = c->params;
    w.fix_tp = c->tp;
    w.fix_pp = c->pp;
    w.lora_rank = KNOB_RANK(c->knobs);
    /* Hugging Face Trainer: loss over the whole vocabulary */
    w.full_loss = strcmp(c->source, QWEN_MEM) == 0 || strcmp(c->source, LLAMAFACTORY) == 0;
    if (c->model) {
        const cr_arch *a = cr_arch_find(models, c->model);
        if (!a) {
            fprintf(stderr, "no model %s in data/models/models.csv\n", c->model);
            return -1;
        }
        w.arch = *a;
        w.params = a->params;
    }
    w.precision = c->precision;
    if (w.kind == CR_KIND_PRETRAIN || w.kind == CR_KIND_FINETUNE || w.kind == CR_KIND_INFERENCE) {
        knobs_of(c, &w);
    }
    if (w.kind == CR_KIND_HPC) {
        w.flops_per_byte = c->params; /* the kernel's intensity (see M_TFLOPS_GPU rows) */
        w.params = 0;
        w.needs = CR_NEED_FP64;
    } else if (w.kind == CR_KIND_PRETRAIN || w.kind == CR_KIND_FINETUNE) {
        w.seq_len = c->seq;
        w.batch = c->batch;
        w.tokens = 1e12;
        w.duration_ns = INT64_C(3650) * 24 * CR_NS_PER_H;
    } else {
        w.rate_per_s = c->rate > 0 ? c->rate : 1e-3;
        w.prompt_tokens = c->prompt;
        w.output_tokens = c->output;
        w.ttft_ns = 60 * CR_NS_PER_SEC;
        w.tpot_ns = 10 * CR_NS_PER_SEC;
    }
    cr_estimate e;
    if (c->metric == M_MAX_TOK_S) {
        *out = max_tok_s(env, &w, g, c->gpus, &e);
        snprintf(plan, plan_len, "%s", e.plan);
        return 0;
    }
    if (cr_perf_estimate(env, &w, g, c->gpus, &e) == 0 && !e.fits && c->metric == M_MEM_GIB &&
        e.mem_per_gpu_bytes > 0) {
        /* Refused for memory: the memory model's figure is still its
         * prediction (the published run fitted, so this is a miss). */
        *out = e.mem_per_gpu_bytes / 1073741824.0;
        snprintf(plan, plan_len, "refused (no fit)");
        return 0;
    }
    if (cr_perf_estimate(env, &w, g, c->gpus, &e) != 0 || !e.fits) {
        fprintf(stderr, "%s on %s: no fit: %s\n", c->name, c->gpu, e.reason);
        return -1;
    }
    snprintf(plan, plan_len, "%s", e.plan);
    switch (c->metric) {
    case M_MFU:
        *out = e.mfu;
        break;
    case M_TPOT_MS:
        *out = (double)e.tpot_ns / 1e6;
        break;
    case M_TOK_S_GPU:
        *out = e.throughput / e.gpu_count;
        break;
    case M_MEM_GIB:
        *out = e.mem_per_gpu_bytes / 1073741824.0;
        break;
    case M_TFLOPS_GPU:
        *out = e.throughput / e.gpu_count / 1e12;
        break;
    case M_TTFT_MS:
        *out = (double)e.ttft_ns / 1e6;
        break;
    default:
        *out = ((double)e.ttft_ns + (c->output - 1) * (double)e.tpot_ns) / 1e6;
        break;
    }
    return 0;
}

/* Highest output rate one 1-compute-slice MIG instance of g sustains
 * (needs mig, one tenant), or the whole GPU (mig = 0). */
static double max_rate_slice(const cr_perf_env *env, cr_workload *w, const cr_gpu_type *g, int mig)
{
    double lo = 1e-3, hi = 1e5;
    w->needs = mig ? CR_NEED_MIG : 0;
    w->ttft_ns = INT64_C(100000) * CR_NS_PER_SEC;
    w->tpot_ns = 100 * CR_NS_PER_SEC;
    for (int i = 0; i < 60; i++) {
        double mid = sqrt(lo * hi);
        w->rate_per_s = mid;
        cr_estimate e;
        int ok = cr_perf_estimate(env, w, g, mig ? 0 : 1, &e) == 0 && e.fits &&
                 (mig ? e.mig && e.mig->compute_slices == 1 : !e.mig);
        *(ok ? &lo : &hi) = mid;
    }
    return lo;
}

/* Batch-1 speed of the smallest slice against the whole GPU (whole-GPU
 * first-token time over the slice's) for one request at a time. */
static double batch1_ratio(const cr_perf_env *env, cr_workload *w, const cr_gpu_type *g)
{
    cr_estimate ew, em;
    w->rate_per_s = 1e-3;
    w->ttft_ns = INT64_C(100000) * CR_NS_PER_SEC;
    w->tpot_ns = 100 * CR_NS_PER_SEC;
    w->needs = 0;
    if (cr_perf_estimate(env, w, g, 1, &ew) != 0 || !ew.fits) {
        return 0;
    }
    w->needs = CR_NEED_MIG;
    if (cr_perf_estimate(env, w, g, 0, &em) != 0 || !em.fits || !em.mig ||
        em.mig->compute_slices != 1) {
        return 0;
    }
    return (double)ew.ttft_ns / (double)em.ttft_ns;
}

/* MIG, all from MLPerf Inference v1.0 closed, NVIDIA
 * (mlcommons/inference_results_v1.0@cd4f7a9b, closed/NVIDIA/results,
 * performance/run_1/mlperf_log_summary.txt): the smallest slice against the
 * whole GPU.
 *  - Offline throughput (saturated): the two ratios MIG_SLICE_EFF was
 *    fitted on, with a compute-bound Llama 3.2 1B stand-in (384-token
 *    prompt, one output token).
 *  - SingleStream mean latency (batch 1): BERT-99 with BERT-large's
 *    published shape (24 layers, hidden 1024, 16 heads, 4096 plain MLP,
 *    30522 vocabulary), int8 (NVIDIA's bert-99 engines), 384 tokens (the
 *    benchmark's max_seq_length). The A100 row chose that setting and
 *    GEMM_TILE (fit); the A30 row is the check. ResNet-50 (a CNN) has no
 *    transformer stand-in: printed, not scored.
 * Returns the number of fit cases off by > 30%. */
static int mig_cases(const cr_perf_env *env, const cr_catalog *cat, int table)
{
    enum { TPUT, BERT1, CNN };
    static const struct {
        int set, how;
        const char *gpu, *name;
        double published;
    } rows[] = {
        {FIT, TPUT, "a30", "BERT-99 Offline, A30 1x1g.3gb vs A30x1 (samples/s 339.5 / 1649.9)",
         339.516 / 1649.92},
        {FIT, TPUT, "a30", "ResNet-50 Offline, A30 1x1g.3gb vs A30x1 (samples/s 4049 / 17484)",
         4049.07 / 17483.6},
        {FIT, BERT1, "a100",
         "BERT-99 SingleStream, DGX-A100 1x1g.10gb vs A100-SXM-80GBx1 (ms 1.593 / 4.777)",
         1.593010 / 4.777292},
        {CHECK, BERT1, "a30", "BERT-99 SingleStream, A30 1x1g.3gb vs A30x1 (ms 2.212 / 6.041)",
         2.211811 / 6.041106},
        {CHECK, CNN, "a100",
         "ResNet-50 SingleStream, DGX-A100 1x1g.10gb vs A100-SXM-80GBx1 (ms 0.493 / 0.674)",
         0.492577 / 0.674227},
        {CHECK, CNN, "a30", "ResNet-50 SingleStream, A30 1x1g.3gb vs A30x1 (ms 0.523 / 0.798)",
         0.522722 / 0.797997},
    };
    const cr_arch *llama = cr_arch_find(models, "llama-3.2-1b");
    if (!llama || !cr_catalog_find(cat, "a30") || !cr_catalog_find(cat, "a100")) {
        fprintf(stderr, "MIG cases: no A30, A100 or llama-3.2-1b\n");
        return 1;
    }
    cr_arch bert;
    memset(&bert, 0, sizeof bert);
    snprintf(bert.name, sizeof bert.name, "bert-large");
    bert.layers = 24;
    bert.hidden = 1024;
    bert.heads = bert.kv_heads = 16;
    bert.head_dim = 64;
    bert.ffn = 4096;
    bert.vocab = 30522;
    bert.context = 512;
    bert.plain_mlp = 1;
    cr_arch_count_params(&bert, &bert.params, &bert.active);
    int bad = 0;
    printf(table ? "\n| set | MIG case (smallest slice / whole GPU), MLPerf Inference v1.0 | "
                   "predicted | published | error |\n|---|---|---|---|---|\n"
                 : "\n");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const cr_gpu_type *g = cr_catalog_find(cat, rows[i].gpu);
        cr_workload w;
        cr_workload_init(&w);
        w.kind = CR_KIND_INFERENCE;
        w.prompt_tokens = 384;
        w.output_tokens = 1;
        double ratio = 0;
        if (rows[i].how == TPUT) {
            w.arch = *llama;
            w.params = llama->params;
            ratio = max_rate_slice(env, &w, g, 1) / max_rate_slice(env, &w, g, 0);
        } else if (rows[i].how == BERT1) {
            w.arch = bert;
            w.params = bert.params;
            w.precision = CR_PREC_INT8;
            ratio = batch1_ratio(env, &w, g);
        }
        double errp = (ratio - rows[i].published) / rows[i].published * 100;
        bad += rows[i].set == FIT && !(fabs(errp) <= 30);
        char pred[32], err[32];
        snprintf(pred, sizeof pred, rows[i].how == CNN ? "-" : "%.3f", ratio);
        snprintf(err, sizeof err, rows[i].how == CNN ? "not scored (CNN)" : "%+.0f%%", errp);
        if (table) {
            printf("| %s | %s | %s | %.3f | %s |\n", rows[i].set == FIT ? "fit" : "check",
                   rows[i].name, pred, rows[i].published, err);
        } else {
            printf("%s %-80.80s predicted %s published %.3f error %s\n",
                   rows[i].set == CHECK  ? "chk "
                   : !(fabs(errp) <= 30) ? "FAIL"
                                         : "fit ",
                   rows[i].name, pred, rows[i].published, err);
        }
    }
    return bad;
}

int main(int argc, char **argv)
{
    int table = argc > 1 && strcmp(argv[1], "--table") == 0;
    char path[1024], err[256];
    const char *src = getenv("CORRAL_SRC");
    snprintf(path, sizeof path, "%s/data/gpus/catalog.csv", src ? src : ".");
    cr_catalog *cat = NULL;
    if (cr_catalog_load(path, &cat, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    snprintf(path, sizeof path, "%s/data/models/models.csv", src ? src : ".");
    cr_arch_catalog *mc = NULL;
    if (cr_arch_load(path, &mc, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        cr_catalog_free(cat);
        return 1;
    }
    models = mc;
    cr_perf_env env = {cat, NULL, NULL};
    /* [set][area]: area 0 training, 1 serving, 2 training memory, 3 FP64 */
    double sum[2][4] = {{0}}, worst[2][4] = {{0}};
    int cnt[2][4] = {{0}};
    int failed = 0;
    if (table) {
        printf("| set | case | GPUs | plan | metric | predicted | published | error | source |\n");
        printf("|---|---|---|---|---|---|---|---|---|\n");
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const cal_case *c = &cases[i];
        double p = 0;
        char plan[64] = "";
        if (predict(&env, c, &p, plan, sizeof plan) != 0) {
            failed++;
            continue;
        }
        double errp = (p - c->published) / c->published * 100;
        const cr_gpu_type *g = cr_catalog_find(cat, c->gpu);
        /* Fit cases must stay within 30%; check cases are measured, and
         * guarded below against regressions of the set's mean. */
        int bad = c->set == FIT && fabs(errp) > 30;
        failed += bad;
        if (c->set == UNSCORED) {
            if (table) {
                printf("| not scored | %s | %d x %s | %s | %s | %.1f | %.1f | %+.0f%% | %s |\n",
                       c->name, c->gpus, g->name, plan, metric_name(c->metric), p, c->published,
                       errp, c->source);
            } else {
                printf("n/s  %-60.60s %-14s predicted %8.3f published %8.3f error %+4.0f%%\n",
                       c->name, g->name, p, c->published, errp);
            }
            continue;
        }
        int area = c->metric == M_MEM_GIB         ? 2
                   : c->kind == CR_KIND_HPC       ? 3
                   : c->kind == CR_KIND_INFERENCE ? 1
                                                  : 0;
        sum[c->set][area] += fabs(errp);
        cnt[c->set][area]++;
        worst[c->set][area] = fmax(worst[c->set][area], fabs(errp));
        if (table) {
            int mfu = c->metric == M_MFU          ? 2
                      : c->metric == M_TFLOPS_GPU ? 3
                      : c->metric == M_TOK_S_GPU  ? 0
                                                  : 1;
            printf("| %s | %s | %d x %s | %s | %s | %.*f | %.*f | %+.0f%% | %s |\n",
                   c->set == FIT ? "fit" : "check", c->name, c->gpus, g->name, plan,
                   metric_name(c->metric), mfu ? mfu : 1, p, mfu ? mfu : 1, c->published, errp,
                   c->source);
        } else {
            printf("%s %-60.60s %-14s %-14s %-10s predicted %8.3f published %8.3f error "
                   "%+4.0f%%\n",
                   bad               ? "FAIL"
                   : c->set == FIT   ? "fit "
                   : fabs(errp) > 30 ? "chk!"
                                     : "chk ",
                   c->name, g->name, plan, metric_name(c->metric), p, c->published, errp);
        }
    }
    static const char *const area_name[4] = {"training throughput", "serving throughput/latency",
                                             "training memory", "FP64 HPC per GPU"};
    printf("%s", table
                     ? "\n| set | area | cases | mean abs error | worst |\n|---|---|---|---|---|\n"
                     : "\n");
    for (int st = 0; st < 2; st++) {
        for (int ar = 0; ar < 4; ar++) {
            if (!cnt[st][ar]) {
                continue;
            }
            printf(table ? "| %s | %s | %d | %.1f%% | %.0f%% |\n"
                         : "%s %-28s %2d cases: mean |error| %.1f%%, worst %.0f%%\n",
                   st == FIT ? "fit" : "check", area_name[ar], cnt[st][ar],
                   sum[st][ar] / cnt[st][ar], worst[st][ar]);
        }
    }
    failed += mig_cases(&env, cat, table);
    /* Regression guard on the check set (docs/model.md states the current
     * values; the goal is 10% mean, 30% worst). */
    static const double check_mean_max[4] = {CHECK_TRAIN_MAX, CHECK_SERVE_MAX, CHECK_MEM_MAX,
                                             CHECK_HPC_MAX};
    for (int ar = 0; ar < 4; ar++) {
        if (cnt[CHECK][ar] && sum[CHECK][ar] / cnt[CHECK][ar] > check_mean_max[ar]) {
            fprintf(stderr, "check set %s: mean |error| %.1f%% > %.0f%%\n", area_name[ar],
                    sum[CHECK][ar] / cnt[CHECK][ar], check_mean_max[ar]);
            failed++;
        }
    }
    cr_arch_free(mc);
    cr_catalog_free(cat);
    if (failed) {
        fprintf(stderr, "%d calibration case(s) outside +-30%%\n", failed);
    }
    return failed ? 1 : 0;
}
