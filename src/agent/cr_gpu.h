/*
 * cr_gpu.h - the agent's GPUs, behind one interface.
 *
 * A backend knows the node's GPUs (inventory: model, UUID, memory, NVLink
 * domain, MIG layout, PCI bus id) and samples them (utilisation, memory
 * used, temperature, power, SM clock, uncorrected ECC count, XID events).
 * Three backends:
 *   sim:SPEC   GPUs declared by a spec or a spec file (see cr_gpu_sim_parse);
 *              samples follow the load the agent passes in (the jobs running
 *              on each GPU), and faults are injected through a file.
 *   nvml       libnvidia-ml.so.1 loaded with dlopen (never linked), so the
 *              binary builds and runs anywhere; "not available" is a clean
 *              CR_EUNAVAIL with a message, never a crash.
 *   auto       nvml when it loads, else the error.
 *
 * Health (cr_gpu_health_update) is pure: a sample, the previous verdict and
 * the time in, the new verdict out. A GPU with a recent XID, uncorrected ECC
 * errors, or a temperature over the limit leaves the pool with a reason,
 * and comes back by itself when the condition clears.
 *
 * Threading: a backend is used from one thread. Time: callers pass now_ns.
 */
#ifndef CR_GPU_H
#define CR_GPU_H

#include <stddef.h>
#include <stdint.h>

#define CR_GPU_MAX     64 /* GPUs per node */
#define CR_GPU_MAX_MIG 8  /* MIG instances per GPU */

typedef struct cr_mig_inst {
    char uuid[96];      /* "MIG-..." */
    char profile[32];   /* "1g.10gb" */
    int slices;         /* compute slices (the N of Ng) */
    int mem_slices;     /* memory slices */
    uint64_t mem_bytes; /* instance memory */
    int gi_id;          /* the driver's GPU instance id (DCGM's GPU_I_ID) */
    int start;          /* placement: first memory slice, -1 unknown */
    int ci_id;          /* the compute instance id within it (0: the first) */
} cr_mig_inst;

/* One instance of a wanted MIG layout (the controller's "mig_layouts"). */
typedef struct cr_mig_want {
    char profile[32]; /* "2g.12gb" */
    int slices;       /* compute slices */
    int mem_slices;   /* memory slices */
    int start;        /* first memory slice */
    char uuid[96];    /* an existing instance kept as it is; "" a new one */
} cr_mig_want;

/* What changes: indexes into the GPU's mig[] to destroy, into the wanted
 * list to create. */
typedef struct cr_mig_plan {
    size_t destroy[CR_GPU_MAX_MIG], ndestroy;
    size_t create[CR_GPU_MAX_MIG], ncreate;
} cr_mig_plan;

typedef struct cr_gpu_info {
    int index;           /* 0-based, the driver's order */
    int minor;           /* /dev/nvidia<minor> (NVML's minor number; sim: the index) */
    char uuid[96];       /* "GPU-..." */
    char model[64];      /* catalog name: "H100 SXM" */
    char raw_name[96];   /* the driver's name: "NVIDIA H100 80GB HBM3" (modelName label) */
    char pci_bus_id[32]; /* "00000000:1B:00.0", "" when unknown */
    uint64_t mem_bytes;  /* framebuffer size */
    int nvlink_domain;   /* GPUs with the same domain talk over NVLink; -1: none */
    int tdp_w;           /* board power limit, for sim power figures */
    int mig_enabled;     /* MIG mode on */
    size_t mig_count;    /* entries used in mig[] */
    cr_mig_inst mig[CR_GPU_MAX_MIG];
} cr_gpu_info;

typedef struct cr_gpu_sample {
    int util_pct;             /* 0..100 */
    uint64_t mem_used_bytes;  /* framebuffer used */
    int temp_c;               /* die temperature */
    int64_t power_mw;         /* board power */
    int sm_clock_mhz;         /* current SM clock */
    uint64_t ecc_uncorrected; /* volatile uncorrected ECC count */
    int xid_last;             /* last XID seen, 0 none */
    uint64_t xid_count;       /* XIDs seen since start */
    int64_t xid_time_ns;      /* when the last XID was seen (0 none) */
    /* dcgm-exporter's default fields that NVML supplies; each is valid only
     * when its CR_GPU_HAVE_* bit is set in `have` (a board or driver that
     * lacks one leaves it out of /metrics rather than reporting 0). */
    unsigned have;
    int mem_clock_mhz;     /* memory clock */
    int mem_temp_c;        /* memory (HBM) temperature */
    uint64_t energy_mj;    /* total energy since the driver loaded, mJ */
    uint64_t pcie_replay;  /* PCIe replay counter */
    int enc_util_pct;      /* video encoder utilisation */
    int dec_util_pct;      /* video decoder utilisation */
    int mem_copy_util_pct; /* memory interface utilisation */
    uint64_t remap_corr;   /* rows remapped for correctable errors */
    uint64_t remap_unc;    /* rows remapped for uncorrectable errors */
    int remap_failure;     /* 1: a row remapping failed */
    uint64_t nvlink_kib;   /* NVLink data sent + received, KiB (counter) */
} cr_gpu_sample;

enum {
    CR_GPU_HAVE_MEM_CLOCK = 1u << 0,
    CR_GPU_HAVE_MEM_TEMP = 1u << 1,
    CR_GPU_HAVE_ENERGY = 1u << 2,
    CR_GPU_HAVE_PCIE_REPLAY = 1u << 3,
    CR_GPU_HAVE_ENC_DEC = 1u << 4,
    CR_GPU_HAVE_MEM_COPY = 1u << 5,
    CR_GPU_HAVE_REMAP = 1u << 6,
    CR_GPU_HAVE_NVLINK = 1u << 7,
};

/* What the agent knows about the work on each GPU, for the sim backend. */
typedef struct cr_gpu_load {
    double busy[CR_GPU_MAX]; /* 0..1: CPU share of the jobs on the GPU; <0: no job */
} cr_gpu_load;

typedef struct cr_gpu_backend cr_gpu_backend;

typedef struct cr_gpu_ops {
    const char *name;
    /* Fill out[0..count) for now_ns; load may be NULL. */
    int (*sample)(cr_gpu_backend *b, const cr_gpu_load *load, int64_t now_ns, cr_gpu_sample *out);
    void (*destroy)(cr_gpu_backend *b);
    /* Dynamic MIG (NULL: this backend cannot): destroy instance m of GPU
     * gpus[gi] (its compute instances first); create an instance as w says
     * with one compute instance over all of it, filling *out. */
    int (*mig_destroy)(cr_gpu_backend *b, size_t gi, const cr_mig_inst *m, char *err,
                       size_t errlen);
    int (*mig_create)(cr_gpu_backend *b, size_t gi, const cr_mig_want *w, cr_mig_inst *out,
                      char *err, size_t errlen);
    /* Power cap (NULL: this backend cannot): GPU gpus[gi]'s board power
     * limit to cap_w watts, clamped to what the board allows (0: back to
     * its default); *applied_w the limit in force after. sim models it
     * (power and SM clock held under the cap); nvml calls
     * nvmlDeviceSetPowerManagementLimit (root). */
    int (*set_power_cap)(cr_gpu_backend *b, size_t gi, int cap_w, int *applied_w, char *err,
                         size_t errlen);
} cr_gpu_ops;

struct cr_gpu_backend {
    const cr_gpu_ops *ops;
    size_t count;                 /* GPUs in gpus[] */
    cr_gpu_info gpus[CR_GPU_MAX]; /* inventory, fixed after open */
    void *priv;                   /* backend state */
};

/*
 * Open a backend from the --gpus flag: "sim:SPEC", "sim:FILE", "nvml" or
 * "auto". node names the host (seeds sim UUIDs). faults_path (borrowed, may
 * be NULL) is the sim fault file. On failure returns CR_E* with a message
 * in err. *out returned new (free with cr_gpu_close).
 */
/* The power cap through the backend's op: 0, CR_ENOTSUP without one, or
 * the backend's error (err says). */
int cr_gpu_set_power_cap(cr_gpu_backend *b, size_t gi, int cap_w, int *applied_w, char *err,
                         size_t errlen);
int cr_gpu_open(const char *spec, const char *node, const char *faults_path, cr_gpu_backend **out,
                char *err, size_t errlen);
void cr_gpu_close(cr_gpu_backend *b);

/* --- sim ------------------------------------------------------------- */

/*
 * Sim spec: groups separated by ';' or newlines (a file: one group a line,
 * '#' comments, errors name the line). A group is COUNTxMODEL followed by
 * comma-separated options:
 *   8xH100 SXM,nvlink=1           8 GPUs in one NVLink domain
 *   8xA100 80GB SXM,nvlink=2      two domains of 4
 *   4xL40S                        no NVLink (nvlink=0, the default for PCIe)
 *   4xA30,mig=1g.6gb:2+2g.12gb:1  MIG layout on every GPU of the group
 *   2xFoo,mem=24,tdp=300          model unknown to the built-in table
 * Known models default to their memory and TDP, and SXM parts to nvlink=1.
 */
int cr_gpu_sim_parse(const char *text, const char *node, cr_gpu_info *gpus, size_t max,
                     size_t *count, char *err, size_t errlen);
int cr_gpu_sim_open(const char *spec_or_file, const char *node, const char *faults_path,
                    cr_gpu_backend **out, char *err, size_t errlen);

/*
 * Fault file lines (re-read when it changes): "GPU xid CODE", "GPU ecc N",
 * "GPU temp C"; '#' comments. A fault lasts while its line is there.
 * Parses into per-GPU overrides; errors name the line.
 */
typedef struct cr_gpu_fault {
    int xid;     /* 0 none */
    int64_t ecc; /* -1 none */
    int temp_c;  /* -1 none */
} cr_gpu_fault;
int cr_gpu_faults_parse(const char *text, size_t gpu_count, cr_gpu_fault *faults, char *err,
                        size_t errlen);

/* --- nvml ------------------------------------------------------------ */

int cr_gpu_nvml_open(cr_gpu_backend **out, char *err, size_t errlen);
/* Pure helpers of the NVML backend, unit-tested with recorded values. */
/* "NVIDIA H100 80GB HBM3" -> "H100 SXM"; writes the catalog name into out. */
void cr_gpu_model_from_nvml(const char *nvml_name, char *out, size_t len);
/* "NVIDIA A100-SXM4-40GB MIG 1g.5gb" -> profile "1g.5gb", slices 1. 0 or CR_EPARSE. */
int cr_gpu_mig_profile_from_name(const char *nvml_name, char *profile, size_t len, int *slices);
/* Memory slices of a profile on a GPU with mem_bytes and the model's slice count. */
int cr_gpu_mig_mem_slices(const char *profile, uint64_t gpu_mem_bytes, int max_instances);
/*
 * NVLink domains from peer links: links[i*n + j] != 0 when GPU i has an
 * active link to GPU j; switched[i] != 0 when GPU i links to an NVSwitch
 * (all such GPUs share a domain). domain[i] = -1 for a GPU without links,
 * else the smallest index in its connected group, renumbered 0.. in order.
 */
void cr_gpu_nvlink_domains(size_t n, const unsigned char *links, const unsigned char *switched,
                           int *domain);

/* --- dynamic MIG (gpu_mig.c) ----------------------------------------- */

/* The sim backend's modelled time to destroy / create one MIG instance. */
#define CR_SIM_MIG_DESTROY_MS 100
#define CR_SIM_MIG_CREATE_MS  400

/* Compute and memory slices of a MIG model ("A30": 4/4, A100/H100/H200/
 * B200: 7/8); 1, or 0 for a model without MIG. */
int cr_gpu_mig_geometry(const char *model, int *compute, int *mem);
/*
 * Plan the change of GPU g to the wanted layout (n instances): instances
 * naming a UUID keep it, the others are created; every instance of g not
 * named is destroyed. busy[k] != 0 (may be NULL) when a job holds
 * g->mig[k]: such an instance is never destroyed, CR_EBUSY instead. Also
 * CR_ERANGE (overlap, too many slices), CR_ENOENT (a UUID not here),
 * CR_ENOTSUP (not a MIG GPU), each with err. An empty plan: no change.
 */
int cr_gpu_mig_plan(const cr_gpu_info *g, const int *busy, const cr_mig_want *want, size_t n,
                    cr_mig_plan *plan, char *err, size_t errlen);
/* Carry out a plan on b->gpus[gi] through the backend, updating its
 * inventory as it goes (on an error, what was done so far stays done). */
int cr_gpu_mig_apply(cr_gpu_backend *b, size_t gi, const cr_mig_want *want, size_t n,
                     const cr_mig_plan *plan, char *err, size_t errlen);
/* NVML's GPU and compute instance profile numbers for a profile; 0 or
 * CR_EINVAL. */
int cr_gpu_mig_nvml_profile(const char *profile, int slices, int mem_slices, unsigned *gi_profile,
                            unsigned *ci_profile);

/* --- health ---------------------------------------------------------- */

enum cr_gpu_health_state { CR_GPU_OK = 0, CR_GPU_XID, CR_GPU_ECC, CR_GPU_HOT };

typedef struct cr_gpu_health_cfg {
    int hot_c;           /* leaves the pool at or above this temperature */
    int cool_c;          /* and comes back at or below this one */
    int64_t xid_hold_ns; /* an XID keeps the GPU out this long */
} cr_gpu_health_cfg;

typedef struct cr_gpu_health {
    int state;       /* cr_gpu_health_state */
    char reason[96]; /* "XID 79", "2 uncorrectable ECC errors", "92 C over 90 C" */
    int hot;         /* hysteresis memory */
} cr_gpu_health;

void cr_gpu_health_cfg_default(cr_gpu_health_cfg *cfg);
/* Returns 1 when the state changed. */
int cr_gpu_health_update(cr_gpu_health *h, const cr_gpu_sample *s, const cr_gpu_health_cfg *cfg,
                         int64_t now_ns);
const char *cr_gpu_health_name(int state);

/* Deterministic UUID text ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx") from a seed string. */
void cr_gpu_uuid_from_seed(const char *prefix, const char *seed, char *out, size_t len);

#endif
