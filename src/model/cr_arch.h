/*
 * cr_arch.h - model architectures: the shape of a transformer (layers,
 * hidden size, attention heads and KV heads, MLP widths, vocabulary,
 * mixture-of-experts and multi-head latent attention) that the performance
 * model needs for memory (weights, KV cache, activations) and FLOPs.
 *
 * A catalog of published shapes lives in data/models/models.csv (one row
 * per model, each with its config.json URL or paper); cr_arch_load reads
 * it. cr_arch_default picks a modern grouped-query shape for a bare
 * parameter count. Pure data; no globals besides the constant default table.
 */
#ifndef CR_ARCH_H
#define CR_ARCH_H

#include <stddef.h>

#define CR_ARCH_NAME_MAX  40
#define CR_ARCH_MAX_ROWS  1024       /* rows in a models file */
#define CR_ARCH_MAX_BYTES (1u << 20) /* size of a models file */

/* One architecture. layers == 0 means "unset" (the model picks a default
 * shape from the parameter count). */
typedef struct cr_arch {
    char name[CR_ARCH_NAME_MAX];
    double params;      /* total parameters */
    double active;      /* parameters used per token (MoE); = params for dense */
    int layers;         /* decoder layers */
    int hidden;         /* model width */
    int heads;          /* query heads */
    int kv_heads;       /* KV heads (GQA/MQA); 0 with MLA */
    int head_dim;       /* per-head size */
    int ffn;            /* dense MLP width */
    int vocab;          /* vocabulary */
    int experts;        /* routed experts per MoE layer (0 = dense) */
    int experts_active; /* routed experts per token */
    int shared_experts; /* always-on experts per MoE layer */
    int moe_ffn;        /* expert MLP width */
    int dense_layers;   /* leading layers with a dense MLP (DeepSeek: 3) */
    int kv_lora_rank;   /* MLA latent size (0 = standard attention) */
    int qk_rope_dim;    /* MLA decoupled RoPE key size */
    int context;        /* max_position_embeddings */
    int plain_mlp;      /* 1: two-matrix GELU MLP (GPT, Falcon); 0: gated (SwiGLU/GeGLU) */
} cr_arch;

typedef struct cr_arch_catalog cr_arch_catalog;

/* Load a models CSV (NULL = $CORRAL_DATA/models/models.csv, else the source
 * tree's data/models/models.csv). Errors: CR_EIO, CR_ETOOBIG, CR_EPARSE with
 * "file:line:col: message" in err. */
int cr_arch_load(const char *path, cr_arch_catalog **out, char *err, size_t err_len);
int cr_arch_parse(const char *text, size_t len, const char *name, cr_arch_catalog **out, char *err,
                  size_t err_len);
void cr_arch_free(cr_arch_catalog *c);
size_t cr_arch_count(const cr_arch_catalog *c);
const cr_arch *cr_arch_at(const cr_arch_catalog *c, size_t i);
/* Case-, space-, '-' and '_'-insensitive ("Llama-3.1-405B" = "llama 3.1 405b"). */
const cr_arch *cr_arch_find(const cr_arch_catalog *c, const char *name);

/* The default shape for a bare parameter count: the nearest (in log N) of
 * a built-in table of published dense GQA shapes (Llama 3.2 1B/3B, Llama
 * 3.1 8B, Qwen2.5 14B/32B, Llama 3.1 70B, Falcon 180B, Llama 3.1 405B,
 * Megatron 1T), scaled to params. Fills *out (name = the shape assumed). */
void cr_arch_default(double params, cr_arch *out);

/* Validate a shape (explicit flags or a catalog row): 0, or CR_EINVAL with
 * a message naming the field. */
int cr_arch_check(const cr_arch *a, char *err, size_t err_len);

/* Parameter count implied by the shape (embeddings counted twice, i.e.
 * untied); active = per token. Used to fill params for explicit shapes. */
void cr_arch_count_params(const cr_arch *a, double *total, double *active);

/* Expert (routed) parameters: what expert parallelism shards. */
double cr_arch_expert_params(const cr_arch *a);

/* KV-cache bytes per token for the whole model at bytes_per_elem. */
double cr_arch_kv_bytes(const cr_arch *a, double bytes_per_elem);

#endif
