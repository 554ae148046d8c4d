#include "cr_catalog.h"

#include "cr_alloc.h"
#include "cr_datadir.h"
#include "cr_error.h"
#include "cr_file.h"
#include "cr_parse.h"
#include "cr_perf.h"
#include "model_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Catalog files are small (tens of rows); anything past this is not one. */
#define CATALOG_MAX_BYTES (4u << 20)
#define CATALOG_MAX_ROWS  4096

struct cr_catalog {
    cr_gpu_type *types; /* rows in file order */
    size_t count;
    size_t cap;
};

void cr__model_errf(char *err, size_t err_len, const char *fmt, ...)
{
    if (!err || err_len == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

void cr__model_norm(const char *s, char *out, size_t len)
{
    size_t j = 0;
    for (; s && *s && j + 1 < len; s++) {
        if (*s == ' ' || *s == '-' || *s == '_') {
            continue;
        }
        out[j++] = (char)tolower((unsigned char)*s);
    }
    if (len) {
        out[j] = '\0';
    }
}

const char *cr__model_data_path(const char *rel, char *buf, size_t len)
{
    return cr_data_path(rel, buf, len);
}

int cr__model_read_file(const char *path, size_t max_bytes, char **out, size_t *out_len, char *err,
                        size_t err_len)
{
    int rc = cr_file_read(path, max_bytes, out, out_len);
    if (rc == CR_ETOOBIG) {
        cr__model_errf(err, err_len, "%s: larger than %zu bytes", path, max_bytes);
    } else if (rc != 0) {
        cr__model_errf(err, err_len, "%s: %s", path, strerror(errno));
    }
    return rc;
}

const char *cr_catalog_default_path(void)
{
    static _Thread_local char buf[1024];
    return cr_data_path("gpus/catalog.csv", buf, sizeof buf);
}

/* Columns the loader understands. */
enum col {
    C_MODEL,
    C_ALIAS,
    C_ARCH,
    C_FORM,
    C_MEM_GB,
    C_MEM_TYPE,
    C_BW,
    C_FP64,
    C_FP64T,
    C_FP32,
    C_TF32,
    C_BF16,
    C_FP16,
    C_FP8,
    C_INT8,
    C_FP6,
    C_FP4,
    C_NVLINK,
    C_DOMAIN,
    C_PCIE,
    C_NET,
    C_TDP,
    C_MIG,
    C_RT,
    C_NVENC,
    C_NVDEC,
    C_ECC,
    C_VENDOR,
    C__COUNT
};

static const char *const col_names[C__COUNT] = {
    "model",
    "alias",
    "arch",
    "form_factor",
    "memory_gb",
    "memory_type",
    "mem_bw_gbs",
    "fp64_tflops",
    "fp64_tensor_tflops",
    "fp32_tflops",
    "tf32_tensor_tflops_dense",
    "bf16_tensor_tflops_dense",
    "fp16_tensor_tflops_dense",
    "fp8_tensor_tflops_dense",
    "int8_tensor_tops_dense",
    "fp6_tensor_tflops_dense",
    "fp4_tensor_tflops_dense",
    "nvlink_gbs",
    "nvlink_domain_gpus",
    "pcie_gen",
    "net_gbps_per_gpu",
    "tdp_w",
    "mig_max_instances",
    "rt_cores",
    "nvenc",
    "nvdec",
    "ecc",
    "vendor",
};

typedef struct parse_ctx {
    const char *name; /* file name for messages */
    int line;
    char *err;
    size_t err_len;
} parse_ctx;

static int fail(parse_ctx *p, int col, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(parse_ctx *p, int col, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cr__model_errf(p->err, p->err_len, "%s:%d:%d: %s", p->name, p->line, col, msg);
    return CR_EPARSE;
}

/* A number cell: empty -> CR_UNKNOWN; else a finite value in [0, max]. */
static int num_cell(parse_ctx *p, const cr_csv_rec *r, const int *idx, int c, double max,
                    double scale, double *out)
{
    if (idx[c] < 0 || (size_t)idx[c] >= r->count || r->fields[idx[c]][0] == '\0') {
        *out = CR_UNKNOWN;
        return 0;
    }
    double v;
    if (cr_parse_f64(r->fields[idx[c]], 0, max, &v) != 0) {
        return fail(p, r->col[idx[c]], "%s: expected a number in [0, %g], got \"%s\"", col_names[c],
                    max, r->fields[idx[c]]);
    }
    *out = v * scale;
    return 0;
}

static int int_cell(parse_ctx *p, const cr_csv_rec *r, const int *idx, int c, int max, int unknown,
                    int *out)
{
    double v;
    int rc = num_cell(p, r, idx, c, max, 1, &v);
    if (rc) {
        return rc;
    }
    if (!cr_known(v)) {
        *out = unknown;
        return 0;
    }
    if (v != (double)(int)v) {
        return fail(p, r->col[idx[c]], "%s: expected a whole number, got \"%s\"", col_names[c],
                    r->fields[idx[c]]);
    }
    *out = (int)v;
    return 0;
}

static int tri_cell(parse_ctx *p, const cr_csv_rec *r, const int *idx, int c, int *out)
{
    if (idx[c] < 0 || (size_t)idx[c] >= r->count || r->fields[idx[c]][0] == '\0') {
        *out = CR_TRI_UNKNOWN;
        return 0;
    }
    const char *s = r->fields[idx[c]];
    if (!strcasecmp(s, "yes") || !strcasecmp(s, "true") || !strcmp(s, "1")) {
        *out = CR_TRI_YES;
    } else if (!strcasecmp(s, "no") || !strcasecmp(s, "false") || !strcmp(s, "0")) {
        *out = CR_TRI_NO;
    } else {
        return fail(p, r->col[idx[c]], "%s: expected yes, no or empty, got \"%s\"", col_names[c],
                    s);
    }
    return 0;
}

static const char *str_cell(const cr_csv_rec *r, const int *idx, int c)
{
    if (idx[c] < 0 || (size_t)idx[c] >= r->count) {
        return "";
    }
    return r->fields[idx[c]];
}

static int copy_cell(parse_ctx *p, const cr_csv_rec *r, const int *idx, int c, char *dst,
                     size_t cap)
{
    const char *s = str_cell(r, idx, c);
    if (strlen(s) >= cap) {
        return fail(p, r->col[idx[c]], "%s: longer than %zu characters", col_names[c], cap - 1);
    }
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

static int parse_form(const char *s)
{
    if (!strcasecmp(s, "SXM")) {
        return CR_FORM_SXM;
    }
    if (!strcasecmp(s, "PCIe")) {
        return CR_FORM_PCIE;
    }
    if (!strcasecmp(s, "NVL")) {
        return CR_FORM_NVL;
    }
    if (!strcasecmp(s, "OAM")) {
        return CR_FORM_OAM;
    }
    return CR_FORM_OTHER;
}

const char *cr_form_name(int form)
{
    switch (form) {
    case CR_FORM_SXM:
        return "SXM";
    case CR_FORM_PCIE:
        return "PCIe";
    case CR_FORM_NVL:
        return "NVL";
    case CR_FORM_OAM:
        return "OAM";
    default:
        return "other";
    }
}

static int parse_row(parse_ctx *p, const cr_csv_rec *r, const int *idx, cr_gpu_type *g)
{
    int rc;
    double v;
    memset(g, 0, sizeof *g);
    if ((rc = copy_cell(p, r, idx, C_MODEL, g->name, sizeof g->name))) {
        return rc;
    }
    if (g->name[0] == '\0') {
        return fail(p, r->col[idx[C_MODEL]], "model: empty");
    }
    if ((rc = copy_cell(p, r, idx, C_ALIAS, g->alias, sizeof g->alias)) ||
        (rc = copy_cell(p, r, idx, C_ARCH, g->arch, sizeof g->arch)) ||
        (rc = copy_cell(p, r, idx, C_MEM_TYPE, g->mem_type, sizeof g->mem_type))) {
        return rc;
    }
    for (char *s = g->alias; *s; s++) {
        *s = (char)tolower((unsigned char)*s);
    }
    g->mem_hbm = strncasecmp(g->mem_type, "HBM", 3) == 0;
    g->form = parse_form(str_cell(r, idx, C_FORM));
    const char *vendor = str_cell(r, idx, C_VENDOR);
    if (vendor[0]) {
        g->vendor_nvidia = !strcasecmp(vendor, "nvidia");
    } else { /* files without a vendor column: go by the name */
        g->vendor_nvidia = !strcasestr(g->name, "non-NVIDIA") && strncasecmp(g->name, "AMD", 3) &&
                           strncasecmp(g->name, "Intel", 5);
    }

    if ((rc = num_cell(p, r, idx, C_MEM_GB, 1e5, 1e9, &v))) {
        return rc;
    }
    if (!cr_known(v) || v <= 0) {
        return fail(
            p, idx[C_MEM_GB] >= 0 && (size_t)idx[C_MEM_GB] < r->count ? r->col[idx[C_MEM_GB]] : 1,
            "memory_gb: required, > 0");
    }
    g->mem_bytes = (uint64_t)v;
    if ((rc = num_cell(p, r, idx, C_BW, 1e6, 1e9, &g->mem_bw_bytes_per_s))) {
        return rc;
    }
    if (!(g->mem_bw_bytes_per_s > 0)) {
        return fail(p, idx[C_BW] >= 0 && (size_t)idx[C_BW] < r->count ? r->col[idx[C_BW]] : 1,
                    "mem_bw_gbs: required, > 0");
    }
    const double T = 1e12;
    if ((rc = num_cell(p, r, idx, C_FP64, 1e6, T, &g->fp64_flops)) ||
        (rc = num_cell(p, r, idx, C_FP64T, 1e6, T, &g->fp64_tensor_flops)) ||
        (rc = num_cell(p, r, idx, C_FP32, 1e6, T, &g->fp32_flops)) ||
        (rc = num_cell(p, r, idx, C_TF32, 1e6, T, &g->tf32_flops)) ||
        (rc = num_cell(p, r, idx, C_BF16, 1e6, T, &g->bf16_flops)) ||
        (rc = num_cell(p, r, idx, C_FP16, 1e6, T, &g->fp16_flops)) ||
        (rc = num_cell(p, r, idx, C_FP8, 1e6, T, &g->fp8_flops)) ||
        (rc = num_cell(p, r, idx, C_INT8, 1e6, T, &g->int8_ops)) ||
        (rc = num_cell(p, r, idx, C_FP6, 1e6, T, &g->fp6_flops)) ||
        (rc = num_cell(p, r, idx, C_FP4, 1e6, T, &g->fp4_flops)) ||
        (rc = num_cell(p, r, idx, C_NVLINK, 1e5, 1e9, &g->nvlink_bytes_per_s)) ||
        (rc = num_cell(p, r, idx, C_NET, 1e5, 1e9 / 8, &g->net_bytes_per_s)) ||
        (rc = num_cell(p, r, idx, C_TDP, 1e5, 1, &g->tdp_w))) {
        return rc;
    }
    if (idx[C_FP16] < 0 || !cr_known(g->fp16_flops)) {
        g->fp16_flops = g->bf16_flops; /* older files have no FP16 column */
    }
    if ((rc = int_cell(p, r, idx, C_DOMAIN, 100000, 0, &g->nvlink_domain_gpus)) ||
        (rc = int_cell(p, r, idx, C_PCIE, 10, 0, &g->pcie_gen)) ||
        (rc = int_cell(p, r, idx, C_MIG, 64, 0, &g->mig_max_instances)) ||
        (rc = int_cell(p, r, idx, C_NVENC, 64, -1, &g->nvenc)) ||
        (rc = int_cell(p, r, idx, C_NVDEC, 64, -1, &g->nvdec)) ||
        (rc = tri_cell(p, r, idx, C_RT, &g->rt_cores)) ||
        (rc = tri_cell(p, r, idx, C_ECC, &g->ecc))) {
        return rc;
    }
    /* Defaults for facts a file may omit, documented in docs/model.md. */
    if (!cr_known(g->nvlink_bytes_per_s)) {
        g->nvlink_bytes_per_s = 0;
    }
    if (g->nvlink_domain_gpus <= 0) {
        g->nvlink_domain_gpus = g->nvlink_bytes_per_s > 0 ? (g->form == CR_FORM_SXM ? 8 : 2) : 1;
    }
    if (g->nvlink_bytes_per_s <= 0) {
        g->nvlink_domain_gpus = 1;
    }
    int gen = g->pcie_gen ? g->pcie_gen : 4;
    g->pcie_bytes_per_s = 64e9 * (gen >= 4 ? (double)(1 << (gen - 4)) : 1.0 / (1 << (4 - gen)));
    if (!cr_known(g->net_bytes_per_s)) {
        g->net_bytes_per_s = 25e9 / 8;
    }
    if (!cr_known(g->tdp_w)) {
        g->tdp_w = 300;
    }
    return 0;
}

static int add_row(cr_catalog *c, parse_ctx *p, const cr_gpu_type *g)
{
    char a[CR_GPU_NAME_MAX], b[CR_GPU_NAME_MAX];
    cr__model_norm(g->name, a, sizeof a);
    char ga[CR_GPU_NAME_MAX];
    cr__model_norm(g->alias, ga, sizeof ga);
    for (size_t i = 0; i < c->count; i++) {
        const cr_gpu_type *o = &c->types[i];
        cr__model_norm(o->name, b, sizeof b);
        char oa[CR_GPU_NAME_MAX];
        cr__model_norm(o->alias, oa, sizeof oa);
        if (!strcmp(a, b) || !strcmp(a, oa) || (ga[0] && (!strcmp(ga, b) || !strcmp(ga, oa)))) {
            return fail(p, 1, "model \"%s\": name or alias already used by \"%s\"", g->name,
                        o->name);
        }
    }
    if (c->count >= CATALOG_MAX_ROWS) {
        return fail(p, 1, "more than %d rows", CATALOG_MAX_ROWS);
    }
    CR_GROW(c->types, c->count, c->cap);
    c->types[c->count++] = *g;
    return 0;
}

int cr_catalog_parse(const char *text, size_t len, const char *name, cr_catalog **out, char *err,
                     size_t err_len)
{
    int rc = 0;
    cr_catalog *c = cr_calloc(1, sizeof *c);
    char *copy = cr_strndup(text, len);
    cr_csv_rec rec;
    cr_csv_rec_init(&rec);
    parse_ctx p = {.name = name ? name : "<catalog>", .line = 0, .err = err, .err_len = err_len};
    int idx[C__COUNT];
    int have_header = 0;
    if (memchr(text, '\0', len)) {
        p.line = 1;
        rc = fail(&p, 1, "NUL byte in file");
        goto out;
    }
    char *save = copy;
    while (save) {
        char *line = save;
        char *nl = strchr(line, '\n');
        if (nl) {
            *nl = '\0';
            save = nl + 1;
        } else {
            save = NULL;
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
            rc = fail(&p, ecol, "unterminated quoted field");
            goto out;
        }
        if (!have_header) {
            for (int k = 0; k < C__COUNT; k++) {
                idx[k] = -1;
            }
            for (size_t f = 0; f < rec.count; f++) {
                for (int k = 0; k < C__COUNT; k++) {
                    if (!strcmp(rec.fields[f], col_names[k])) {
                        if (idx[k] >= 0) {
                            rc = fail(&p, rec.col[f], "column \"%s\" appears twice", col_names[k]);
                            goto out;
                        }
                        idx[k] = (int)f;
                    }
                }
            }
            static const int required[] = {C_MODEL, C_MEM_GB, C_BW};
            for (size_t k = 0; k < sizeof required / sizeof required[0]; k++) {
                if (idx[required[k]] < 0) {
                    rc = fail(&p, 1, "header: required column \"%s\" missing",
                              col_names[required[k]]);
                    goto out;
                }
            }
            have_header = 1;
            continue;
        }
        cr_gpu_type g;
        if ((rc = parse_row(&p, &rec, idx, &g)) || (rc = add_row(c, &p, &g))) {
            goto out;
        }
    }
    if (!have_header) {
        p.line = p.line ? p.line : 1;
        rc = fail(&p, 1, "no header row");
        goto out;
    }
    if (c->count == 0) {
        rc = fail(&p, 1, "no GPU rows");
        goto out;
    }
    *out = c;
    c = NULL;
out:
    cr_csv_rec_fini(&rec);
    free(copy);
    cr_catalog_free(c);
    return rc;
}

int cr_catalog_load(const char *path, cr_catalog **out, char *err, size_t err_len)
{
    char buf[1024];
    if (!path) {
        path = cr__model_data_path("gpus/catalog.csv", buf, sizeof buf);
    }
    char *text = NULL;
    size_t len = 0;
    int rc = cr__model_read_file(path, CATALOG_MAX_BYTES, &text, &len, err, err_len);
    if (rc == 0) {
        rc = cr_catalog_parse(text, len, path, out, err, err_len);
    }
    free(text);
    return rc;
}

void cr_catalog_free(cr_catalog *c)
{
    if (!c) {
        return;
    }
    free(c->types);
    free(c);
}

size_t cr_catalog_count(const cr_catalog *c)
{
    return c ? c->count : 0;
}

const cr_gpu_type *cr_catalog_at(const cr_catalog *c, size_t i)
{
    return c && i < c->count ? &c->types[i] : NULL;
}

const cr_gpu_type *cr_catalog_find(const cr_catalog *c, const char *name_or_alias)
{
    if (!c || !name_or_alias) {
        return NULL;
    }
    char want[CR_GPU_NAME_MAX * 2], have[CR_GPU_NAME_MAX];
    cr__model_norm(name_or_alias, want, sizeof want);
    if (!want[0]) {
        return NULL;
    }
    for (size_t i = 0; i < c->count; i++) {
        cr__model_norm(c->types[i].name, have, sizeof have);
        if (!strcmp(want, have)) {
            return &c->types[i];
        }
    }
    for (size_t i = 0; i < c->count; i++) {
        cr__model_norm(c->types[i].alias, have, sizeof have);
        if (have[0] && !strcmp(want, have)) {
            return &c->types[i];
        }
    }
    return NULL;
}

int cr_catalog_index(const cr_catalog *c, const cr_gpu_type *g)
{
    if (!c || !g || g < c->types || g >= c->types + c->count) {
        return -1;
    }
    return (int)(g - c->types);
}

static double pos(double x)
{
    return x > 0 ? x : 0;
}

double cr_gpu_peak_flops(const cr_gpu_type *g, int precision)
{
    double chain[6] = {0};
    size_t n = 0;
    switch (precision) {
    case CR_PREC_FP64:
        return pos(g->fp64_tensor_flops) > pos(g->fp64_flops) ? pos(g->fp64_tensor_flops)
                                                              : pos(g->fp64_flops);
    case CR_PREC_FP4:
        return pos(g->fp4_flops);
    case CR_PREC_FP6:
        return pos(g->fp6_flops);
    case CR_PREC_INT8:
    case CR_PREC_INT4:
        chain[n++] = g->int8_ops;
        chain[n++] = g->fp16_flops;
        chain[n++] = g->bf16_flops;
        break;
    case CR_PREC_FP8:
        chain[n++] = g->fp8_flops;
        chain[n++] = g->bf16_flops;
        chain[n++] = g->fp16_flops;
        break;
    case CR_PREC_FP16:
        chain[n++] = g->fp16_flops;
        chain[n++] = g->bf16_flops;
        break;
    case CR_PREC_TF32:
        chain[n++] = g->tf32_flops;
        break;
    case CR_PREC_FP32:
        break;
    default: /* bf16; Volta/Turing/Pascal run it as fp16 */
        chain[n++] = g->bf16_flops;
        chain[n++] = g->fp16_flops;
        break;
    }
    chain[n++] = g->tf32_flops;
    chain[n++] = g->fp32_flops;
    for (size_t i = 0; i < n; i++) {
        if (chain[i] > 0) {
            return chain[i];
        }
    }
    return 0;
}
