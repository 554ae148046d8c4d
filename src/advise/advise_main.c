/*
 * advise_main.c - `corral advise`: parse the flags into a workload, load the
 * catalog, prices and (optionally) a measured throughput table, rank the GPU
 * types and print the table or the JSON document. No policy lives here:
 * the model is in src/model.
 */
#include "cr_advise.h"

#include "advise_int.h"
#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_nvenc.h"
#include "cr_parse.h"
#include "cr_perf.h"
#include "cr_time.h"

#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(
        f, "usage: corral advise --kind KIND [options]\n"
           "\n"
           "Ranks the GPU types of the catalog for one workload: count, parallelism plan,\n"
           "time, cost and energy, with a one-line reason; then the types that cannot run it.\n"
           "\n"
           "Workload:\n"
           "  --kind K         " CR_KIND_VALUES "\n"
           "  --method M       " CR_METHOD_VALUES " (finetune; default full)\n"
           "  --lora-rank N    lora/qlora adapter rank on every linear layer (default 16)\n"
           "  --loss L         training loss over the vocabulary: chunked (torchtune, Megatron;\n"
           "                   default) or full (Hugging Face Trainer: all logits at once)\n"
           "  --model NAME     a model from data/models/models.csv: llama-3.1-405b,\n"
           "                   mixtral-8x7b, qwen3-235b-a22b, deepseek-v3, ... (sets the shape)\n"
           "  --models FILE    model architecture CSV (default data/models/models.csv)\n"
           "  --params N       model parameters: 7b, 70e9, 1.5t (alone: a default GQA shape)\n"
           "  --layers N --hidden N --heads N --kv-heads N --head-dim N --ffn N --vocab N\n"
           "  --experts N --experts-active N --moe-ffn N\n"
           "                   an explicit shape (layers, hidden, heads and ffn required);\n"
           "                   with --model, override that model's values\n"
           "  --tokens N       training tokens: 2e12, 100m (default 20 x params pretrain, 1e8 "
           "finetune)\n"
           "  --precision P    " CR_PRECISION_VALUES " (default bf16)\n"
           "  --kv-precision P inference KV cache: " CR_KV_PRECISION_VALUES
           " (default fp8 with fp8/fp6/fp4 weights, else bf16)\n"
           "  --seq N          sequence length in tokens (default 4096 pretrain, 2048 finetune)\n"
           "  --batch N        global batch in sequences (default ~4M tokens pretrain, 16 "
           "finetune)\n"
           "  --stack S        software stack: " CR_TRAIN_STACK_VALUES " (training; default\n"
           "                   megatron) or " CR_SERVE_STACK_VALUES " (serving; default vllm)\n"
           "  --checkpointing C activation checkpointing: " CR_CKPT_VALUES " (default: selective\n"
           "                   where it fits, else full)\n"
           "  --micro-batch N  sequences per micro-batch per data-parallel rank (default 1)\n"
           "  --rate R         inference requests/s (visual: video streams)\n"
           "  --prompt N       mean prompt tokens (default 1000)\n"
           "  --output N       mean output tokens (default 250)\n"
           "  --beams N        sequences decoded per request: beam width or n (default 1)\n"
           "  --gpu-memory-utilization F  serving: share of the memory the card reports the\n"
           "                   engine may use (default: the stack's, vLLM 0.90)\n"
           "  --ttft D         time-to-first-token target: 500ms, 2s (default 2s)\n"
           "  --tpot D         time-per-output-token target (default 50ms)\n"
           "  --tenants N      isolated inference tenants sharing the rate (default 1)\n"
           "  --streams N      visual: video streams, each decoded and run through a detector\n"
           "  --resolution R   visual: 720p, 1080p, 1440p, 4k or WxH (default 1080p)\n"
           "  --fps N          visual: frames per second per stream (default 30)\n"
           "  --codec C        visual: also encode every stream with NVENC: " CR_CODEC_VALUES "\n"
           "  --preset P       NVENC preset " CR_PRESET_VALUES " (default p5); --rc " CR_RC_VALUES
           " (default vbr)\n"
           "  --work F         hpc/batch: total FLOPs (default 1e18)\n"
           "  --intensity I    hpc/batch: FLOP per byte of memory traffic, or a kernel class:\n"
           "                   dense (64), stencil (0.5), sparse (0.25) (default 8 hpc, 50 batch)\n"
           "  --mem SIZE       minimum memory per GPU: 40gb, 40e9\n"
           "  --needs LIST     hard needs: " CR_NEEDS_VALUES "\n"
           "  --deadline D     training/hpc: finish within D when sizing the GPU count "
           "(default 30d);\n"
           "                   inference/visual: the serving window costed (default 1h)\n"
           "\n");
    fprintf(f, "Measured throughputs (override the estimate where present):\n"
               "  --throughputs F  Gavel simulation_throughputs.json\n"
               "  --job NAME       job type in that table, e.g. \"ResNet-50 (batch size 64)\"\n"
               "  --steps N        the job's total steps\n"
               "\n"
               "Output:\n"
               "  --objective O    " CR_OBJECTIVE_VALUES " (default cost)\n"
               "  --gpus N|auto    GPU count (default auto: the fewest that fit and meet targets)\n"
               "  --catalog FILE   GPU catalog CSV (default data/gpus/catalog.csv)\n"
               "  --prices FILE    price table CSV (default data/prices.csv)\n"
               "  --top N          show only the N best types (default 0: all)\n"
               "  --json           a JSON document instead of the table\n"
               "  --explain        first print every assumption the model makes\n");
}

/* Print "corral advise: --flag: message" and return the exit code 2. */
static int bad_flag(const char *flag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad_flag(const char *flag, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "corral advise: --%s: ", flag);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 2;
}

enum {
    O_KIND = 256,
    O_METHOD,
    O_PARAMS,
    O_TOKENS,
    O_PRECISION,
    O_SEQ,
    O_BATCH,
    O_RATE,
    O_PROMPT,
    O_OUTPUT,
    O_TTFT,
    O_TPOT,
    O_NEEDS,
    O_OBJECTIVE,
    O_JSON,
    O_CATALOG,
    O_PRICES,
    O_GPUS,
    O_TENANTS,
    O_STREAMS,
    O_WORK,
    O_MEM,
    O_DEADLINE,
    O_THROUGHPUTS,
    O_JOB,
    O_STEPS,
    O_TOP,
    O_MODEL,
    O_MODELS,
    O_KVPREC,
    O_INTENSITY,
    O_TP,
    O_PP,
    O_LORA_RANK,
    O_LOSS,
    O_RESOLUTION,
    O_FPS,
    O_CODEC,
    O_PRESET,
    O_RC,
    O_STACK,
    O_CKPT,
    O_MICRO_BATCH,
    O_BEAMS,
    O_GPU_MEM_UTIL,
    O_EXPLAIN,
    O_SHAPE, /* O_SHAPE + index into shape_flags */
    O_HELP = O_SHAPE + 16,
};

static const struct option options[] = {
    {"kind", required_argument, NULL, O_KIND},
    {"method", required_argument, NULL, O_METHOD},
    {"lora-rank", required_argument, NULL, O_LORA_RANK},
    {"loss", required_argument, NULL, O_LOSS},
    {"params", required_argument, NULL, O_PARAMS},
    {"tokens", required_argument, NULL, O_TOKENS},
    {"precision", required_argument, NULL, O_PRECISION},
    {"seq", required_argument, NULL, O_SEQ},
    {"batch", required_argument, NULL, O_BATCH},
    {"rate", required_argument, NULL, O_RATE},
    {"prompt", required_argument, NULL, O_PROMPT},
    {"output", required_argument, NULL, O_OUTPUT},
    {"ttft", required_argument, NULL, O_TTFT},
    {"tpot", required_argument, NULL, O_TPOT},
    {"needs", required_argument, NULL, O_NEEDS},
    {"objective", required_argument, NULL, O_OBJECTIVE},
    {"json", no_argument, NULL, O_JSON},
    {"catalog", required_argument, NULL, O_CATALOG},
    {"prices", required_argument, NULL, O_PRICES},
    {"gpus", required_argument, NULL, O_GPUS},
    {"tenants", required_argument, NULL, O_TENANTS},
    {"streams", required_argument, NULL, O_STREAMS},
    {"resolution", required_argument, NULL, O_RESOLUTION},
    {"fps", required_argument, NULL, O_FPS},
    {"codec", required_argument, NULL, O_CODEC},
    {"preset", required_argument, NULL, O_PRESET},
    {"rc", required_argument, NULL, O_RC},
    {"work", required_argument, NULL, O_WORK},
    {"mem", required_argument, NULL, O_MEM},
    {"deadline", required_argument, NULL, O_DEADLINE},
    {"throughputs", required_argument, NULL, O_THROUGHPUTS},
    {"job", required_argument, NULL, O_JOB},
    {"steps", required_argument, NULL, O_STEPS},
    {"top", required_argument, NULL, O_TOP},
    {"model", required_argument, NULL, O_MODEL},
    {"models", required_argument, NULL, O_MODELS},
    {"kv-precision", required_argument, NULL, O_KVPREC},
    {"intensity", required_argument, NULL, O_INTENSITY},
    {"tp", required_argument, NULL, O_TP},
    {"pp", required_argument, NULL, O_PP},
    {"layers", required_argument, NULL, O_SHAPE + 0},
    {"hidden", required_argument, NULL, O_SHAPE + 1},
    {"heads", required_argument, NULL, O_SHAPE + 2},
    {"kv-heads", required_argument, NULL, O_SHAPE + 3},
    {"head-dim", required_argument, NULL, O_SHAPE + 4},
    {"ffn", required_argument, NULL, O_SHAPE + 5},
    {"vocab", required_argument, NULL, O_SHAPE + 6},
    {"experts", required_argument, NULL, O_SHAPE + 7},
    {"experts-active", required_argument, NULL, O_SHAPE + 8},
    {"moe-ffn", required_argument, NULL, O_SHAPE + 9},
    {"stack", required_argument, NULL, O_STACK},
    {"checkpointing", required_argument, NULL, O_CKPT},
    {"micro-batch", required_argument, NULL, O_MICRO_BATCH},
    {"beams", required_argument, NULL, O_BEAMS},
    {"n", required_argument, NULL, O_BEAMS},
    {"gpu-memory-utilization", required_argument, NULL, O_GPU_MEM_UTIL},
    {"kv-dtype", required_argument, NULL, O_KVPREC},
    {"explain", no_argument, NULL, O_EXPLAIN},
    {"help", no_argument, NULL, O_HELP},
    {NULL, 0, NULL, 0},
};

static int parse_int_flag(const char *flag, const char *arg, int64_t min, int64_t max, int *out)
{
    double v;
    if (cr_parse_count(arg, &v) != 0 || v != (double)(int64_t)v || v < (double)min ||
        v > (double)max) {
        return bad_flag(flag, "expected a whole number in [%lld, %lld], got \"%s\"", (long long)min,
                        (long long)max, arg);
    }
    *out = (int)v;
    return 0;
}

static int parse_count_flag(const char *flag, const char *arg, double max, double *out)
{
    double v;
    if (cr_parse_count(arg, &v) != 0 || v > max) {
        return bad_flag(flag, "expected a count like 7b, 70e9, 2e12, 500m (at most %g), got \"%s\"",
                        max, arg);
    }
    *out = v;
    return 0;
}

static int parse_dur_flag(const char *flag, const char *arg, int64_t *out)
{
    int64_t ns;
    if (cr_duration_parse(arg, &ns) != 0 || ns <= 0) {
        return bad_flag(flag, "expected a duration like 500ms, 2s, 30d, got \"%s\"", arg);
    }
    *out = ns;
    return 0;
}

/* Memory sizes: "40gb", "40GB", "40e9", "80g". */
static int parse_mem_flag(const char *arg, uint64_t *out)
{
    char buf[64];
    size_t n = strlen(arg);
    if (n == 0 || n >= sizeof buf) {
        return bad_flag("mem", "expected a size like 40gb or 40e9, got \"%s\"", arg);
    }
    memcpy(buf, arg, n + 1);
    if (n > 2 && (buf[n - 1] == 'b' || buf[n - 1] == 'B') &&
        (buf[n - 2] == 'g' || buf[n - 2] == 'G')) {
        buf[n - 1] = '\0';
    }
    double v;
    if (cr_parse_count(buf, &v) != 0 || v <= 0 || v > 1e15) {
        return bad_flag("mem", "expected a size like 40gb or 40e9, got \"%s\"", arg);
    }
    *out = (uint64_t)v;
    return 0;
}

#define SHAPE_FLAGS 10
static const char *const shape_flags[SHAPE_FLAGS] = {
    "layers", "hidden", "heads",   "kv-heads",       "head-dim",
    "ffn",    "vocab",  "experts", "experts-active", "moe-ffn"};

/* Kernel classes for --intensity, FLOP per byte (FP64), from the Roofline
 * paper (Williams, Waterman, Patterson, CACM 52(4), 2009: SpMV 0.17-0.25,
 * 7-point stencil 0.33-0.5) and blocked DGEMM/HPL (compute-bound). */
static int parse_intensity(const char *a, double *out)
{
    static const struct {
        const char *name;
        double v;
    } cls[] = {{"dense", 64}, {"stencil", 0.5}, {"sparse", 0.25}};
    for (size_t i = 0; i < sizeof cls / sizeof cls[0]; i++) {
        if (!strcmp(a, cls[i].name)) {
            *out = cls[i].v;
            return 0;
        }
    }
    if (cr_parse_f64(a, 0.01, 1e6, out) != 0) {
        return bad_flag("intensity",
                        "expected FLOP/byte in [0.01, 1e6] or dense|stencil|sparse, got \"%s\"", a);
    }
    return 0;
}

/* --resolution, --fps, --codec, --preset, --rc into w; 0 or an exit code. */
static int parse_video_flag(int opt, const char *a, cr_workload *w)
{
    static const struct {
        const char *name;
        int w, h;
    } res[] = {{"720p", 1280, 720},
               {"1080p", 1920, 1080},
               {"1440p", 2560, 1440},
               {"2160p", 3840, 2160},
               {"4k", 3840, 2160}};
    switch (opt) {
    case O_RESOLUTION:
        for (size_t i = 0; i < sizeof res / sizeof res[0]; i++) {
            if (!strcmp(a, res[i].name)) {
                w->video_w = res[i].w;
                w->video_h = res[i].h;
                return 0;
            }
        }
        char tail;
        if (sscanf(a, "%dx%d%c", &w->video_w, &w->video_h, &tail) != 2 || w->video_w < 16 ||
            w->video_w > 8192 || w->video_h < 16 || w->video_h > 8192) {
            return bad_flag("resolution",
                            "expected 720p|1080p|1440p|2160p|4k or WxH (16..8192), got \"%s\"", a);
        }
        return 0;
    case O_FPS:
        if (cr_parse_f64(a, 1, 480, &w->video_fps) != 0) {
            return bad_flag("fps", "expected frames per second in [1, 480], got \"%s\"", a);
        }
        return 0;
    case O_CODEC:
        if ((w->enc_codec = cr_codec_parse(a)) < 0) {
            return bad_flag("codec", "expected " CR_CODEC_VALUES ", got \"%s\"", a);
        }
        return 0;
    case O_PRESET:
        if ((a[0] != 'p' && a[0] != 'P') || !strchr("1357", a[1]) || a[1] == '\0' || a[2]) {
            return bad_flag("preset",
                            "expected " CR_PRESET_VALUES
                            " (the presets NVIDIA publishes encode rates for), got \"%s\"",
                            a);
        }
        w->enc_preset = a[1] - '0';
        return 0;
    default: /* O_RC */
        if (strcmp(a, "cbr") && strcmp(a, "vbr")) {
            return bad_flag("rc", "expected " CR_RC_VALUES ", got \"%s\"", a);
        }
        w->enc_cbr = !strcmp(a, "cbr");
        return 0;
    }
}

/* Apply --model and the shape flags to w; 0 or an exit code. */
static int resolve_model(cr_workload *w, const char *model, const char *models_path,
                         const int *shape, int have_shape)
{
    char err[512];
    cr_arch a;
    memset(&a, 0, sizeof a);
    if (model) {
        cr_arch_catalog *mc = NULL;
        if (cr_arch_load(models_path, &mc, err, sizeof err) != 0) {
            fprintf(stderr, "corral advise: models: %s\n", err);
            return 1;
        }
        const cr_arch *f = cr_arch_find(mc, model);
        if (!f) {
            fprintf(stderr, "corral advise: --model: unknown model \"%s\"; known:", model);
            for (size_t i = 0; i < cr_arch_count(mc); i++) {
                fprintf(stderr, "%s%s", i ? ", " : " ", cr_arch_at(mc, i)->name);
            }
            fprintf(stderr, " (or give the shape flags)\n");
            cr_arch_free(mc);
            return 2;
        }
        a = *f;
        cr_arch_free(mc);
    } else if (have_shape) {
        if (!shape[0] || !shape[1] || !shape[2] || !shape[5]) {
            return bad_flag("layers",
                            "an explicit shape needs --layers, --hidden, --heads and --ffn");
        }
        snprintf(a.name, sizeof a.name, "custom");
        a.kv_heads = shape[2];
        a.head_dim = shape[1] / shape[2];
        a.vocab = 128256;
    } else {
        return 0;
    }
    int *dst[SHAPE_FLAGS] = {&a.layers, &a.hidden, &a.heads,   &a.kv_heads,       &a.head_dim,
                             &a.ffn,    &a.vocab,  &a.experts, &a.experts_active, &a.moe_ffn};
    for (int i = 0; i < SHAPE_FLAGS; i++) {
        if (shape[i]) {
            *dst[i] = shape[i];
        }
    }
    if (have_shape) {
        if (a.experts > 0 && !a.moe_ffn) {
            a.moe_ffn = a.ffn;
        }
        if (a.experts > 0 && !a.experts_active) {
            a.experts_active = 2;
        }
        cr_arch_count_params(&a, &a.params, &a.active);
        if (model) {
            size_t l = strlen(a.name);
            snprintf(a.name + (l < sizeof a.name - 2 ? l : sizeof a.name - 2),
                     sizeof a.name - (l < sizeof a.name - 2 ? l : sizeof a.name - 2), "*");
        }
    }
    if (w->params > 0 && !model && !have_shape) {
        return 0;
    }
    if (cr_arch_check(&a, err, sizeof err) != 0) {
        fprintf(stderr, "corral advise: %s%s\n", model && !have_shape ? "models: " : "--", err);
        return 2;
    }
    if (w->params > 0 && fabs(w->params / a.params - 1) > 0.25) {
        fprintf(stderr,
                "corral advise: --params %.3g disagrees with the shape (%.3g parameters); "
                "drop --params\n",
                w->params, a.params);
        return 2;
    }
    w->arch = a;
    w->params = a.params;
    return 0;
}

int cr_advise_main(int argc, char **argv)
{
    const char *model = NULL, *models_path = NULL;
    int shape[SHAPE_FLAGS] = {0}, have_shape = 0;
    cr_workload w;
    cr_workload_init(&w);
    int objective = CR_OBJ_COST, json = 0, gpus = 0, have_kind = 0, rc = 0, top = 0, explain = 0;
    const char *catalog_path = NULL, *prices_path = NULL, *tput_path = NULL;
    cr_catalog *cat = NULL;
    cr_prices *prices = NULL;
    cr_gavel *gavel = NULL;
    cr_advice adv = {0};
    char err[512];
    char needs_err[96];

    optind = 1;
    opterr = 0;
    int c;
    const char *video_flag = NULL; /* a visual-only flag given */
    while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        const char *a = optarg;
        switch (c) {
        case O_KIND:
            if (cr_kind_parse(a, &w.kind) != 0) {
                return bad_flag("kind", "must be one of " CR_KIND_VALUES ", got \"%s\"", a);
            }
            have_kind = 1;
            break;
        case O_METHOD:
            if (cr_method_parse(a, &w.method) != 0) {
                return bad_flag("method", "must be one of " CR_METHOD_VALUES ", got \"%s\"", a);
            }
            break;
        case O_PARAMS:
            if ((rc = parse_count_flag("params", a, 1e14, &w.params))) {
                return rc;
            }
            if (w.params < 1e6) {
                return bad_flag("params", "expected at least 1m parameters, got \"%s\"", a);
            }
            break;
        case O_TOKENS:
            if ((rc = parse_count_flag("tokens", a, 1e16, &w.tokens))) {
                return rc;
            }
            break;
        case O_PRECISION:
            if (cr_precision_parse(a, &w.precision) != 0) {
                return bad_flag("precision", "must be one of " CR_PRECISION_VALUES ", got \"%s\"",
                                a);
            }
            break;
        case O_SEQ:
            if ((rc = parse_int_flag("seq", a, 1, 10000000, &w.seq_len))) {
                return rc;
            }
            break;
        case O_BATCH:
            if ((rc = parse_int_flag("batch", a, 1, 100000000, &w.batch))) {
                return rc;
            }
            break;
        case O_RATE:
            if (cr_parse_f64(a, 0, 1e7, &w.rate_per_s) != 0 || w.rate_per_s <= 0) {
                return bad_flag("rate", "expected a number of requests/s in (0, 1e7], got \"%s\"",
                                a);
            }
            break;
        case O_PROMPT:
            if ((rc = parse_int_flag("prompt", a, 0, 10000000, &w.prompt_tokens))) {
                return rc;
            }
            break;
        case O_OUTPUT:
            if ((rc = parse_int_flag("output", a, 1, 10000000, &w.output_tokens))) {
                return rc;
            }
            break;
        case O_TTFT:
            if ((rc = parse_dur_flag("ttft", a, &w.ttft_ns))) {
                return rc;
            }
            break;
        case O_TPOT:
            if ((rc = parse_dur_flag("tpot", a, &w.tpot_ns))) {
                return rc;
            }
            break;
        case O_DEADLINE:
            if ((rc = parse_dur_flag("deadline", a, &w.duration_ns))) {
                return rc;
            }
            break;
        case O_NEEDS:
            if (!a[0]) {
                return bad_flag("needs", "empty; allowed: %s", CR_NEEDS_VALUES);
            }
            if (cr_needs_parse(a, &w.needs, needs_err, sizeof needs_err) != 0) {
                fprintf(stderr, "corral advise: --needs: %s; allowed: %s\n", needs_err,
                        CR_NEEDS_VALUES);
                return 2;
            }
            break;
        case O_OBJECTIVE:
            if (cr_objective_parse(a, &objective) != 0) {
                return bad_flag("objective", "must be one of " CR_OBJECTIVE_VALUES ", got \"%s\"",
                                a);
            }
            break;
        case O_JSON:
            json = 1;
            break;
        case O_CATALOG:
            catalog_path = a;
            break;
        case O_PRICES:
            prices_path = a;
            break;
        case O_GPUS:
            if (strcmp(a, "auto") == 0) {
                gpus = 0;
            } else if (cr_parse_i64(a, 1, 16384, &(int64_t){0}) != 0) {
                return bad_flag("gpus",
                                "expected a whole number in [1, 16384] or \"auto\", got "
                                "\"%s\"",
                                a);
            } else {
                gpus = atoi(a);
            }
            break;
        case O_TENANTS:
            if ((rc = parse_int_flag("tenants", a, 1, 100000, &w.tenants))) {
                return rc;
            }
            break;
        case O_STREAMS:
            if (cr_parse_f64(a, 1, 1e6, &w.streams) != 0) {
                return bad_flag("streams", "expected a number of streams in [1, 1e6], got \"%s\"",
                                a);
            }
            break;
        case O_RESOLUTION:
        case O_FPS:
        case O_CODEC:
        case O_PRESET:
        case O_RC:
            if ((rc = parse_video_flag(c, a, &w))) {
                return rc;
            }
            video_flag = c == O_RESOLUTION ? "resolution"
                         : c == O_FPS      ? "fps"
                         : c == O_CODEC    ? "codec"
                         : c == O_PRESET   ? "preset"
                                           : "rc";
            break;
        case O_WORK: /* may exceed cr_parse_count's 1e18 cap: plain numbers */
            if (cr_parse_f64(a, 1, 1e26, &w.work_flops) != 0) {
                return bad_flag("work", "expected FLOPs like 1e18 (at most 1e26), got \"%s\"", a);
            }
            break;
        case O_MEM:
            if ((rc = parse_mem_flag(a, &w.min_mem_bytes))) {
                return rc;
            }
            break;
        case O_THROUGHPUTS:
            tput_path = a;
            break;
        case O_JOB:
            w.measured_job = a;
            break;
        case O_STEPS:
            if ((rc = parse_count_flag("steps", a, 1e15, &w.steps))) {
                return rc;
            }
            break;
        case O_TOP:
            if ((rc = parse_int_flag("top", a, 0, 100000, &top))) {
                return rc;
            }
            break;
        case O_MODEL:
            model = a;
            break;
        case O_MODELS:
            models_path = a;
            break;
        case O_KVPREC:
            if (cr_precision_parse(a, &w.kv_precision) != 0 ||
                (w.kv_precision != CR_PREC_BF16 && w.kv_precision != CR_PREC_FP16 &&
                 w.kv_precision != CR_PREC_FP8)) {
                return bad_flag("kv-precision",
                                "must be one of " CR_KV_PRECISION_VALUES ", got \"%s\"", a);
            }
            break;
        case O_LORA_RANK:
            if ((rc = parse_int_flag("lora-rank", a, 1, CR_LORA_RANK_MAX, &w.lora_rank))) {
                return rc;
            }
            break;
        case O_LOSS:
            if (strcmp(a, "chunked") != 0 && strcmp(a, "full") != 0) {
                return bad_flag("loss", "must be chunked or full, got \"%s\"", a);
            }
            w.full_loss = strcmp(a, "full") == 0;
            break;
        case O_TP:
        case O_PP: {
            int v = 0;
            const char *nm = c == O_TP ? "tp" : "pp";
            if ((rc = parse_int_flag(nm, a, 1, 64, &v))) {
                return rc;
            }
            if (v & (v - 1)) {
                return bad_flag(nm, "expected a power of two in [1, 64], got \"%s\"", a);
            }
            *(c == O_TP ? &w.fix_tp : &w.fix_pp) = v;
            break;
        }
        case O_STACK:
            if (cr_stack_parse(a, &w.stack) != 0 || w.stack == CR_STACK_AUTO) {
                return bad_flag("stack", "must be one of " CR_STACK_VALUES ", got \"%s\"", a);
            }
            break;
        case O_CKPT:
            if (cr_ckpt_parse(a, &w.ckpt) != 0 || w.ckpt == CR_CKPT_AUTO) {
                return bad_flag("checkpointing", "must be one of " CR_CKPT_VALUES ", got \"%s\"",
                                a);
            }
            break;
        case O_MICRO_BATCH:
            if ((rc = parse_int_flag("micro-batch", a, 1, 100000000, &w.micro_batch))) {
                return rc;
            }
            break;
        case O_BEAMS:
            if ((rc = parse_int_flag("beams", a, 1, CR_BEAMS_MAX, &w.beams))) {
                return rc;
            }
            break;
        case O_GPU_MEM_UTIL:
            if (cr_parse_f64(a, 0.05, 1, &w.gpu_mem_util) != 0) {
                return bad_flag("gpu-memory-utilization",
                                "expected a share of the card's memory in [0.05, 1], got \"%s\"",
                                a);
            }
            break;
        case O_EXPLAIN:
            explain = 1;
            break;
        case O_INTENSITY:
            if ((rc = parse_intensity(a, &w.flops_per_byte))) {
                return rc;
            }
            break;
        case O_HELP:
        case 'h':
            usage(stdout);
            return 0;
        default: {
            if (c >= O_SHAPE && c < O_SHAPE + SHAPE_FLAGS) {
                int i = c - O_SHAPE;
                if ((rc = parse_int_flag(shape_flags[i], a, 1, 1048576, &shape[i]))) {
                    return rc;
                }
                have_shape = 1;
                break;
            }
            const char *bad = argv[optind - 1];
            if (optopt) {
                fprintf(stderr, "corral advise: %s: needs a value (see corral advise --help)\n",
                        bad);
            } else {
                fprintf(stderr, "corral advise: unknown option %s (see corral advise --help)\n",
                        bad);
            }
            return 2;
        }
        }
    }
    if (optind < argc) {
        fprintf(stderr, "corral advise: unexpected argument \"%s\" (see corral advise --help)\n",
                argv[optind]);
        return 2;
    }
    if (!have_kind) {
        return bad_flag("kind", "required; one of " CR_KIND_VALUES);
    }
    if ((rc = resolve_model(&w, model, models_path, shape, have_shape)) != 0) {
        return rc;
    }
    if ((w.kind == CR_KIND_PRETRAIN || w.kind == CR_KIND_FINETUNE) && w.params <= 0 &&
        !w.measured_job) {
        return bad_flag("params", "required for %s (e.g. --params 7b)", cr_kind_name(w.kind));
    }
    if (w.kind == CR_KIND_INFERENCE && w.params <= 0) {
        return bad_flag("params", "required for inference (e.g. --params 70b or --model NAME)");
    }
    if (w.kind == CR_KIND_INFERENCE && w.rate_per_s <= 0) {
        return bad_flag("rate", "required for inference (requests/s, e.g. --rate 10)");
    }
    if (w.kind == CR_KIND_PRETRAIN && w.method != CR_METHOD_FULL) {
        return bad_flag("method", "pretrain trains all weights: only \"full\" (got \"%s\")",
                        cr_method_name(w.method));
    }
    if (video_flag && w.kind != CR_KIND_VISUAL) {
        return bad_flag(video_flag, "only for --kind visual (video streams)");
    }
    if (w.kind == CR_KIND_VISUAL && w.streams <= 0) {
        w.streams = w.rate_per_s > 0 ? w.rate_per_s : 16;
    }
    if (!!w.measured_job != (w.steps > 0) || (w.measured_job && !tput_path)) {
        fprintf(stderr, "corral advise: --job, --steps and --throughputs go together\n");
        return 2;
    }
    if (w.kind != CR_KIND_INFERENCE && (w.beams > 0 || w.gpu_mem_util > 0)) {
        return bad_flag(w.beams > 0 ? "beams" : "gpu-memory-utilization",
                        "only for --kind inference");
    }
    if (w.kind != CR_KIND_PRETRAIN && w.kind != CR_KIND_FINETUNE &&
        (w.micro_batch > 0 || w.ckpt != CR_CKPT_AUTO)) {
        return bad_flag(w.micro_batch > 0 ? "micro-batch" : "checkpointing",
                        "only for --kind pretrain or finetune");
    }
    if (cr_workload_check(&w, err, sizeof err) != 0) {
        fprintf(stderr, "corral advise: --%s\n", err);
        return 2;
    }
    if (explain) {
        char ex[2048];
        cr_perf_explain(&w, ex, sizeof ex);
        /* In JSON mode the assumptions go to stderr, so stdout stays one document. */
        FILE *f = json ? stderr : stdout;
        fprintf(f, "Assumptions:\n");
        for (char *line = ex, *nl; *line; line = nl + 1) {
            nl = strchr(line, '\n');
            fprintf(f, "  %.*s\n", (int)(nl ? nl - line : (ptrdiff_t)strlen(line)), line);
            if (!nl) {
                break;
            }
        }
        fputc('\n', f);
    }

    if ((rc = cr_catalog_load(catalog_path, &cat, err, sizeof err)) != 0) {
        fprintf(stderr, "corral advise: catalog: %s\n", err);
        rc = 1;
        goto out;
    }
    if ((rc = cr_prices_load(prices_path, cat, &prices, err, sizeof err)) != 0) {
        if (prices_path) {
            fprintf(stderr, "corral advise: prices: %s\n", err);
            rc = 1;
            goto out;
        }
        fprintf(stderr, "corral advise: prices: %s; costs unknown (see --prices)\n", err);
        prices = cr_prices_new_empty();
    }
    if (tput_path && (rc = cr_gavel_load(tput_path, &gavel, err, sizeof err)) != 0) {
        fprintf(stderr, "corral advise: throughputs: %s\n", err);
        rc = 1;
        goto out;
    }
    if (gavel && w.measured_job) {
        bool known = false;
        for (size_t i = 0; i < cr_gavel_job_count(gavel) && !known; i++) {
            known = strcmp(cr_gavel_job(gavel, i), w.measured_job) == 0;
        }
        if (!known) {
            rc = bad_flag("job", "'%s' is not a job type in %s (e.g. '%s')", w.measured_job,
                          tput_path, cr_gavel_job_count(gavel) ? cr_gavel_job(gavel, 0) : "none");
            goto out;
        }
    }
    cr_perf_env env = {cat, prices, gavel};
    if ((rc = cr_perf_advise(&env, &w, objective, gpus, &adv)) != 0) {
        fprintf(stderr, "corral advise: %s\n", cr_strerror(rc));
        rc = 1;
        goto out;
    }
    rc = json ? cr__advise_print_json(stdout, &w, &adv, gpus, (size_t)top)
              : cr__advise_print_table(stdout, &w, &adv, gpus, (size_t)top);
out:
    cr_advice_fini(&adv);
    cr_gavel_free(gavel);
    cr_prices_free(prices);
    cr_catalog_free(cat);
    return rc;
}
