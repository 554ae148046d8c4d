/*
 * cr_catalog.h - the GPU catalog: one record per GPU type, loaded from a CSV
 * file (data/gpus/catalog.csv by default).
 *
 * The file has a header row; columns are found by name, so their order is
 * free and unknown columns are ignored. Required columns: model, memory_gb,
 * mem_bw_gbs. An empty cell means "not known" (kept distinct from 0, which
 * means "absent": FP8 on Ampere, NVLink on L40S). Numbers in the file use
 * the vendor's units (GB, GB/s, TFLOPS, W); the structs below carry SI units
 * with the unit in the field name.
 *
 * A bad file is refused whole: the loader returns CR_EPARSE (or CR_EIO when
 * the file cannot be read) and writes "file:line:col: what" into the
 * caller's err buffer. A loaded catalog is immutable, so several threads may
 * read it at once. Lookups accept the canonical model name ("H100 SXM",
 * "A100 80GB SXM") or a short alias ("h100", "a100", "l40s"); both are
 * case-insensitive and ignore spaces, '-' and '_'.
 */
#ifndef CR_CATALOG_H
#define CR_CATALOG_H

#include <stddef.h>
#include <stdint.h>

/* A fact that may be unknown: yes, no, or not stated by any source read. */
enum cr_tri { CR_TRI_UNKNOWN = -1, CR_TRI_NO = 0, CR_TRI_YES = 1 };

/* Form factors, as the catalog's form_factor column spells them. */
enum cr_form { CR_FORM_OTHER = 0, CR_FORM_SXM, CR_FORM_PCIE, CR_FORM_NVL, CR_FORM_OAM };

/* Marks an unknown number (empty CSV cell). Every double below is either
 * >= 0 or exactly CR_UNKNOWN; test with cr_known(). */
#define CR_UNKNOWN  (-1.0)
#define cr_known(x) ((x) >= 0.0)

#define CR_GPU_NAME_MAX  48
#define CR_GPU_ALIAS_MAX 16

/* One GPU type. A transparent value type: copy freely. */
typedef struct cr_gpu_type {
    char name[CR_GPU_NAME_MAX];   /* canonical model name, e.g. "H100 SXM" */
    char alias[CR_GPU_ALIAS_MAX]; /* short lower-case alias, e.g. "h100"; "" if none */
    char arch[CR_GPU_NAME_MAX];   /* architecture, e.g. "Hopper (GH100)" */
    int form;                     /* enum cr_form */
    int vendor_nvidia;            /* 1 for NVIDIA parts, 0 for AMD / Intel rows */

    uint64_t mem_bytes;        /* device memory (decimal GB * 1e9) */
    double mem_bw_bytes_per_s; /* peak memory bandwidth */
    char mem_type[12];         /* "HBM3", "GDDR6"...; "" if unknown */
    int mem_hbm;               /* 1 when mem_type is an HBM generation */

    /* Peak dense math per GPU, FLOP/s (OP/s for int8); CR_UNKNOWN if not
     * sourced, 0 if the unit is absent. Sparse figures never appear here. */
    double fp64_flops;        /* FP64 vector */
    double fp64_tensor_flops; /* FP64 on tensor cores (Ampere+ datacenter) */
    double fp32_flops;        /* FP32 vector */
    double tf32_flops;        /* TF32 tensor */
    double bf16_flops;        /* BF16 tensor */
    double fp16_flops;        /* FP16 tensor; equals bf16 where both exist */
    double fp8_flops;         /* FP8 tensor */
    double int8_ops;          /* INT8 tensor */
    double fp6_flops;         /* FP6 tensor (Blackwell); 0 / CR_UNKNOWN: none */
    double fp4_flops;         /* FP4 tensor (Blackwell); 0 / CR_UNKNOWN: none */

    double nvlink_bytes_per_s; /* GPU-to-GPU, bidirectional per GPU; 0 = none */
    int nvlink_domain_gpus;    /* GPUs sharing one NVLink domain (8 on HGX, 2 on a
                                  bridged pair, 72 on NVL72, 1 without NVLink) */
    double pcie_bytes_per_s;   /* host link, bidirectional (Gen4 x16 = 64 GB/s) */
    int pcie_gen;              /* 0 if unknown */
    double net_bytes_per_s;    /* scale-out NIC share per GPU (400 Gb/s = 50e9) */
    double tdp_w;              /* board power, W */

    int mig_max_instances; /* 0 = no MIG */
    int rt_cores;          /* enum cr_tri: has RT cores */
    int nvenc;             /* NVENC engines; -1 unknown */
    int nvdec;             /* NVDEC engines; -1 unknown */
    int ecc;               /* enum cr_tri: ECC on device memory */
} cr_gpu_type;

typedef struct cr_catalog cr_catalog; /* opaque, immutable once loaded */

/* The default catalog path, <data dir>/gpus/catalog.csv (cr_datadir.h:
 * $CORRAL_DATA, the build tree's data/, or the install's share/corral),
 * in per-thread storage valid until the next call. cr_catalog_load(NULL,
 * ...) reads it. */
const char *cr_catalog_default_path(void);

/*
 * Load a catalog. path NULL means the default (see above). On success
 * *out is returned new (free with cr_catalog_free). On failure returns
 * CR_EIO or CR_EPARSE, leaves *out untouched and, when err is not NULL,
 * writes "file:line:col: message" into err (err_len bytes, NUL-terminated).
 */
int cr_catalog_load(const char *path, cr_catalog **out, char *err, size_t err_len);

/* Same, from memory; name (borrowed) is used in error messages. */
int cr_catalog_parse(const char *text, size_t len, const char *name, cr_catalog **out, char *err,
                     size_t err_len);

void cr_catalog_free(cr_catalog *c);

size_t cr_catalog_count(const cr_catalog *c);
/* i < count; the pointer is valid until cr_catalog_free. */
const cr_gpu_type *cr_catalog_at(const cr_catalog *c, size_t i);
/* By canonical name or alias (see above); NULL when absent. */
const cr_gpu_type *cr_catalog_find(const cr_catalog *c, const char *name_or_alias);
/* Index of g in c, or -1. */
int cr_catalog_index(const cr_catalog *c, const cr_gpu_type *g);

/* Peak dense FLOP/s of g for a precision (enum cr_precision in cr_perf.h),
 * falling back to the nearest supported wider format (FP8 -> BF16 -> FP16
 * -> TF32 -> FP32) the way frameworks do. FP4 and FP6 have no fallback
 * (the formats need the hardware): their own rate or 0. Returns 0 when
 * nothing is known. */
double cr_gpu_peak_flops(const cr_gpu_type *g, int precision);

/* "SXM", "PCIe", "NVL", "OAM", "other". */
const char *cr_form_name(int form);

#endif
