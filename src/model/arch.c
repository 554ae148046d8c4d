/* Model architectures: the models CSV loader, the default shapes, checks. */
#include "cr_arch.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_parse.h"
#include "model_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cr_arch_catalog {
    cr_arch *rows;
    size_t count, cap;
};

/* Published dense GQA shapes used for a bare --params (same numbers as the
 * rows of the same name in data/models/models.csv; test_model checks). */
static const cr_arch defaults[] = {
    {"llama-3.2-1b", 1.24e9, 1.24e9, 16, 2048, 32, 8, 64, 8192, 128256, 0, 0, 0, 0, 0, 0, 0, 131072,
     0},
    {"llama-3.2-3b", 3.21e9, 3.21e9, 28, 3072, 24, 8, 128, 8192, 128256, 0, 0, 0, 0, 0, 0, 0,
     131072, 0},
    {"llama-3.1-8b", 8.03e9, 8.03e9, 32, 4096, 32, 8, 128, 14336, 128256, 0, 0, 0, 0, 0, 0, 0,
     131072, 0},
    {"qwen2.5-14b", 14.77e9, 14.77e9, 48, 5120, 40, 8, 128, 13824, 152064, 0, 0, 0, 0, 0, 0, 0,
     32768, 0},
    {"qwen2.5-32b", 32.76e9, 32.76e9, 64, 5120, 40, 8, 128, 27648, 152064, 0, 0, 0, 0, 0, 0, 0,
     32768, 0},
    {"llama-3.1-70b", 70.55e9, 70.55e9, 80, 8192, 64, 8, 128, 28672, 128256, 0, 0, 0, 0, 0, 0, 0,
     131072, 0},
    {"falcon-180b", 179.52e9, 179.52e9, 80, 14848, 232, 8, 64, 59392, 65024, 0, 0, 0, 0, 0, 0, 0,
     2048, 1},
    {"llama-3.1-405b", 405.85e9, 405.85e9, 126, 16384, 128, 8, 128, 53248, 128256, 0, 0, 0, 0, 0, 0,
     0, 131072, 0},
    {"megatron-1t", 1008e9, 1008e9, 128, 25600, 160, 160, 160, 102400, 51200, 0, 0, 0, 0, 0, 0, 0,
     2048, 1},
};

void cr_arch_default(double params, cr_arch *out)
{
    const cr_arch *best = &defaults[0];
    double bd = 1e300;
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
        double d = fabs(log(params / defaults[i].params));
        if (d < bd) {
            bd = d;
            best = &defaults[i];
        }
    }
    *out = *best;
    out->params = params;
    out->active = params;
}

void cr_arch_count_params(const cr_arch *a, double *total, double *active)
{
    double h = a->hidden, L = a->layers, hd = a->head_dim, nh = a->heads;
    double attn;
    if (a->kv_lora_rank > 0) {
        /* MLA (DeepSeek-V2/V3): q down/up (rank 1536), kv down to the
         * latent + rope key, kv up to per-head nope keys and values, out. */
        double qr = 1536, nope = hd, rope = a->qk_rope_dim;
        attn = h * qr + qr * nh * (nope + rope) + h * (a->kv_lora_rank + rope) +
               a->kv_lora_rank * nh * (nope + hd) + nh * hd * h;
    } else {
        attn = 2 * h * nh * hd + 2 * h * a->kv_heads * hd;
    }
    double emb = 2.0 * a->vocab * h;
    if (a->experts > 0) {
        double dl = a->dense_layers, ml = L - dl;
        double dense = dl * 3 * h * a->ffn;
        double per = 3 * h * a->moe_ffn;
        *total = L * attn + dense + ml * (a->experts + a->shared_experts) * per + emb;
        *active = L * attn + dense + ml * (a->experts_active + a->shared_experts) * per + emb;
    } else {
        *total = *active = L * (attn + (a->plain_mlp ? 2 : 3) * h * a->ffn) + emb;
    }
}

double cr_arch_expert_params(const cr_arch *a)
{
    if (a->experts <= 0) {
        return 0;
    }
    return (double)(a->layers - a->dense_layers) * a->experts * 3.0 * a->hidden * a->moe_ffn;
}

double cr_arch_kv_bytes(const cr_arch *a, double bytes_per_elem)
{
    if (a->kv_lora_rank > 0) {
        /* MLA caches the compressed latent and the shared rope key. */
        return (double)a->layers * (a->kv_lora_rank + a->qk_rope_dim) * bytes_per_elem;
    }
    return 2.0 * a->layers * a->kv_heads * a->head_dim * bytes_per_elem;
}

int cr_arch_check(const cr_arch *a, char *err, size_t err_len)
{
#define BAD(...)                                                                                   \
    do {                                                                                           \
        cr__model_errf(err, err_len, __VA_ARGS__);                                                 \
        return CR_EINVAL;                                                                          \
    } while (0)
    if (a->layers < 1 || a->layers > 1000) {
        BAD("layers: must be in [1, 1000]");
    }
    if (a->hidden < 64 || a->hidden > 262144) {
        BAD("hidden: must be in [64, 262144]");
    }
    if (a->heads < 1 || a->heads > 4096) {
        BAD("heads: must be in [1, 4096]");
    }
    if (a->kv_lora_rank == 0 && (a->kv_heads < 1 || a->kv_heads > a->heads)) {
        BAD("kv-heads: must be in [1, heads]");
    }
    if (a->kv_heads > 0 && a->heads % a->kv_heads) {
        BAD("kv-heads: must divide heads (%d)", a->heads);
    }
    if (a->head_dim < 8 || a->head_dim > 1024) {
        BAD("head-dim: must be in [8, 1024]");
    }
    if (a->ffn < 1 || a->ffn > 1048576) {
        BAD("ffn: must be in [1, 1048576]");
    }
    if (a->vocab < 1 || a->vocab > 10000000) {
        BAD("vocab: must be in [1, 1e7]");
    }
    if (a->experts < 0 || a->experts > 4096) {
        BAD("experts: must be in [0, 4096]");
    }
    if (a->experts > 0 && (a->experts_active < 1 || a->experts_active > a->experts)) {
        BAD("experts-active: must be in [1, experts]");
    }
    if (a->experts > 0 && (a->moe_ffn < 1 || a->moe_ffn > 1048576)) {
        BAD("moe-ffn: must be in [1, 1048576] with experts");
    }
    if (a->shared_experts < 0 || a->shared_experts > 64 || a->dense_layers < 0 ||
        a->dense_layers > a->layers) {
        BAD("shared-experts/dense-layers: out of range");
    }
    if (a->kv_lora_rank < 0 || a->kv_lora_rank > 65536 || a->qk_rope_dim < 0 ||
        a->qk_rope_dim > 4096) {
        BAD("kv-lora-rank/qk-rope-dim: out of range");
    }
    if (a->context < 0 || a->context > 100000000) {
        BAD("context: must be in [0, 1e8]");
    }
    if (!(a->params > 0 && a->params <= 1e14) || !(a->active > 0 && a->active <= a->params)) {
        BAD("params: must be in (0, 1e14], active params in (0, params]");
    }
    return 0;
#undef BAD
}

/* ---- the CSV loader ---- */

enum {
    A_NAME,
    A_PARAMS,
    A_ACTIVE,
    A_LAYERS,
    A_HIDDEN,
    A_HEADS,
    A_KV,
    A_HD,
    A_FFN,
    A_VOCAB,
    A_EXP,
    A_EXPACT,
    A_SHARED,
    A_MOEFFN,
    A_DENSE,
    A_KVLORA,
    A_ROPE,
    A_CTX,
    A_MLP,
    A__COUNT
};

static const char *const acols[A__COUNT] = {
    "name",         "params",         "active_params",  "layers",  "hidden",
    "heads",        "kv_heads",       "head_dim",       "ffn",     "vocab",
    "experts",      "experts_active", "shared_experts", "moe_ffn", "dense_layers",
    "kv_lora_rank", "qk_rope_dim",    "context",        "mlp",
};

typedef struct actx {
    const char *name;
    int line;
    char *err;
    size_t err_len;
} actx;

static int afail(actx *p, int col, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int afail(actx *p, int col, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cr__model_errf(p->err, p->err_len, "%s:%d:%d: %s", p->name, p->line, col, msg);
    return CR_EPARSE;
}

/* A number cell in [0, max]; empty -> 0. */
static int acell(actx *p, const cr_csv_rec *r, const int *idx, int c, double max, int whole,
                 double *out)
{
    *out = 0;
    if (idx[c] < 0 || (size_t)idx[c] >= r->count || r->fields[idx[c]][0] == '\0') {
        return 0;
    }
    const char *s = r->fields[idx[c]];
    if (cr_parse_f64(s, 0, max, out) != 0 || (whole && *out != floor(*out))) {
        return afail(p, r->col[idx[c]], "%s: expected a %s in [0, %g], got \"%s\"", acols[c],
                     whole ? "whole number" : "number", max, s);
    }
    return 0;
}

static int arow(actx *p, const cr_csv_rec *r, const int *idx, cr_arch *a)
{
    memset(a, 0, sizeof *a);
    const char *nm = (size_t)idx[A_NAME] < r->count ? r->fields[idx[A_NAME]] : "";
    if (!nm[0] || strlen(nm) >= sizeof a->name) {
        return afail(p, 1, "name: empty or longer than %zu characters", sizeof a->name - 1);
    }
    memcpy(a->name, nm, strlen(nm) + 1);
    double v[A__COUNT];
    for (int c = A_PARAMS; c < A__COUNT; c++) {
        int rc = acell(p, r, idx, c, c <= A_ACTIVE ? 1e14 : 1e8, c > A_ACTIVE, &v[c]);
        if (rc) {
            return rc;
        }
    }
    a->params = v[A_PARAMS];
    a->active = v[A_ACTIVE] > 0 ? v[A_ACTIVE] : v[A_PARAMS];
    a->layers = (int)v[A_LAYERS];
    a->hidden = (int)v[A_HIDDEN];
    a->heads = (int)v[A_HEADS];
    a->kv_heads = (int)v[A_KV];
    a->head_dim = (int)v[A_HD];
    a->ffn = (int)v[A_FFN];
    a->vocab = (int)v[A_VOCAB];
    a->experts = (int)v[A_EXP];
    a->experts_active = (int)v[A_EXPACT];
    a->shared_experts = (int)v[A_SHARED];
    a->moe_ffn = (int)v[A_MOEFFN];
    a->dense_layers = (int)v[A_DENSE];
    a->kv_lora_rank = (int)v[A_KVLORA];
    a->qk_rope_dim = (int)v[A_ROPE];
    a->context = (int)v[A_CTX];
    if (v[A_MLP] != 0 && v[A_MLP] != 2 && v[A_MLP] != 3) {
        return afail(p, r->col[idx[A_MLP]], "mlp: expected 2, 3 or empty, got %g", v[A_MLP]);
    }
    a->plain_mlp = (int)v[A_MLP] == 2;
    char err[128];
    if (cr_arch_check(a, err, sizeof err) != 0) {
        return afail(p, 1, "%s: %s", a->name, err);
    }
    return 0;
}

int cr_arch_parse(const char *text, size_t len, const char *name, cr_arch_catalog **out, char *err,
                  size_t err_len)
{
    int rc = 0;
    cr_arch_catalog *c = cr_calloc(1, sizeof *c);
    char *copy = cr_strndup(text, len);
    cr_csv_rec rec;
    cr_csv_rec_init(&rec);
    actx p = {.name = name ? name : "<models>", .line = 0, .err = err, .err_len = err_len};
    int idx[A__COUNT];
    int have_header = 0;
    if (memchr(text, '\0', len)) {
        p.line = 1;
        rc = afail(&p, 1, "NUL byte in file");
        goto out;
    }
    char *save = copy;
    while (save) {
        char *line = save;
        char *nl = strchr(line, '\n');
        save = nl ? nl + 1 : NULL;
        if (nl) {
            *nl = '\0';
        }
        p.line++;
        size_t l = strlen(line);
        if (l && line[l - 1] == '\r') {
            line[--l] = '\0';
        }
        if (l == 0 || line[0] == '#') {
            continue;
        }
        int ecol = 0;
        if (cr_csv_split(line, ',', &rec, &ecol) != 0) {
            rc = afail(&p, ecol, "unterminated quoted field");
            goto out;
        }
        if (!have_header) {
            for (int k = 0; k < A__COUNT; k++) {
                idx[k] = -1;
            }
            for (size_t f = 0; f < rec.count; f++) {
                for (int k = 0; k < A__COUNT; k++) {
                    if (!strcmp(rec.fields[f], acols[k])) {
                        if (idx[k] >= 0) {
                            rc = afail(&p, rec.col[f], "column \"%s\" appears twice", acols[k]);
                            goto out;
                        }
                        idx[k] = (int)f;
                    }
                }
            }
            static const int required[] = {A_NAME,  A_PARAMS, A_LAYERS, A_HIDDEN,
                                           A_HEADS, A_HD,     A_FFN,    A_VOCAB};
            for (size_t k = 0; k < sizeof required / sizeof required[0]; k++) {
                if (idx[required[k]] < 0) {
                    rc = afail(&p, 1, "header: required column \"%s\" missing", acols[required[k]]);
                    goto out;
                }
            }
            have_header = 1;
            continue;
        }
        cr_arch a;
        if ((rc = arow(&p, &rec, idx, &a)) != 0) {
            goto out;
        }
        if (cr_arch_find(c, a.name)) {
            rc = afail(&p, 1, "name \"%s\" appears twice", a.name);
            goto out;
        }
        if (c->count >= CR_ARCH_MAX_ROWS) {
            rc = afail(&p, 1, "more than %d rows", CR_ARCH_MAX_ROWS);
            goto out;
        }
        CR_GROW(c->rows, c->count, c->cap);
        c->rows[c->count++] = a;
    }
    if (!have_header || c->count == 0) {
        p.line = p.line ? p.line : 1;
        rc = afail(&p, 1, "%s", have_header ? "no model rows" : "no header row");
        goto out;
    }
    *out = c;
    c = NULL;
out:
    cr_csv_rec_fini(&rec);
    free(copy);
    cr_arch_free(c);
    return rc;
}

int cr_arch_load(const char *path, cr_arch_catalog **out, char *err, size_t err_len)
{
    char buf[1024];
    if (!path) {
        path = cr__model_data_path("models/models.csv", buf, sizeof buf);
    }
    char *text = NULL;
    size_t len = 0;
    int rc = cr__model_read_file(path, CR_ARCH_MAX_BYTES, &text, &len, err, err_len);
    if (rc == 0) {
        rc = cr_arch_parse(text, len, path, out, err, err_len);
    }
    free(text);
    return rc;
}

void cr_arch_free(cr_arch_catalog *c)
{
    if (c) {
        free(c->rows);
        free(c);
    }
}

size_t cr_arch_count(const cr_arch_catalog *c)
{
    return c ? c->count : 0;
}

const cr_arch *cr_arch_at(const cr_arch_catalog *c, size_t i)
{
    return c && i < c->count ? &c->rows[i] : NULL;
}

const cr_arch *cr_arch_find(const cr_arch_catalog *c, const char *name)
{
    char want[64], have[64];
    if (!c || !name) {
        return NULL;
    }
    cr__model_norm(name, want, sizeof want);
    for (size_t i = 0; i < c->count; i++) {
        cr__model_norm(c->rows[i].name, have, sizeof have);
        if (!strcmp(want, have)) {
            return &c->rows[i];
        }
    }
    return NULL;
}
