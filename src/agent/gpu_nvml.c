/*
 * gpu_nvml.c - the NVML backend, with libnvidia-ml.so.1 loaded by dlopen.
 *
 * We never include nvml.h or link the library: the few functions used are
 * declared here by their versioned export names (nvmlInit_v2, ...), with
 * the structure layouts of the NVML API they belong to, so the binary
 * builds on a machine without the driver and reports "NVML not available"
 * cleanly there. The parsing of what NVML returns (model names, MIG
 * profiles, NVLink domains) lives in gpu.c as pure functions, unit-tested
 * with values recorded from real machines.
 *
 * XIDs arrive as events: an event set registered for critical XID errors
 * is drained without waiting at every sample.
 *
 * dcgm-exporter's default fields that NVML supplies are read each sample
 * when the driver has the call (memory clock, encoder/decoder utilisation,
 * total energy, PCIe replays, remapped rows) or through
 * nvmlDeviceGetFieldValues (memory temperature, NVLink data throughput);
 * a field the board refuses is left out (cr_gpu_sample.have).
 */
#include "cr_gpu.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;     /* NVML_SUCCESS = 0 */
typedef void *nvmlDevice_t;   /* opaque handle */
typedef void *nvmlEventSet_t; /* opaque handle */

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

/* nvmlFieldValue_t (nvml.h): value is a union of 8 bytes, read by valueType. */
typedef struct {
    unsigned int fieldId;
    unsigned int scopeId; /* NVLink fields: the link, UINT_MAX = all links summed */
    long long timestamp;
    long long latencyUsec;
    int valueType; /* NVML_VALUE_TYPE_* */
    nvmlReturn_t nvmlReturn;
    union {
        double dVal;
        unsigned int uiVal;
        unsigned long ulVal;
        unsigned long long ullVal;
        long long sllVal;
        int siVal;
        unsigned short usVal;
    } value;
} nvmlFieldValue_t;

#define NVML_VALUE_TYPE_DOUBLE                0
#define NVML_VALUE_TYPE_UNSIGNED_INT          1
#define NVML_VALUE_TYPE_UNSIGNED_LONG         2
#define NVML_VALUE_TYPE_UNSIGNED_LONG_LONG    3
#define NVML_VALUE_TYPE_SIGNED_LONG_LONG      4
#define NVML_VALUE_TYPE_SIGNED_INT            5
#define NVML_VALUE_TYPE_UNSIGNED_SHORT        6
#define NVML_FI_DEV_MEMORY_TEMP               82
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138 /* KiB */
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX 139 /* KiB */
#define NVML_CLOCK_MEM                        2

#define NVML_SUCCESS             0
#define NVML_ERROR_TIMEOUT       10
#define NVML_TEMPERATURE_GPU     0
#define NVML_CLOCK_SM            1
#define NVML_MEMORY_ERROR_UNCORR 1
#define NVML_VOLATILE_ECC        0
#define NVML_EVENT_XID           0x0000000000000008ULL
#define NVML_NVLINK_MAX_LINKS    18
#define NVML_FEATURE_ENABLED     1

/* MIG management (nvml.h layouts). */
typedef void *nvmlGpuInstance_t;
typedef void *nvmlComputeInstance_t;
typedef struct {
    unsigned int start, size; /* memory slices */
} nvmlGpuInstancePlacement_t;
typedef struct {
    unsigned int id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount,
        copyEngineCount, decoderCount, encoderCount, jpegCount, ofaCount;
    unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;
typedef struct {
    unsigned int id, sliceCount, instanceCount, multiprocessorCount, sharedCopyEngineCount,
        sharedDecoderCount, sharedEncoderCount, sharedJpegCount, sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;
typedef struct {
    nvmlDevice_t device;
    unsigned int id, profileId;
    nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;
#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED 0
#define NVML_COMPUTE_INSTANCE_PROFILE_COUNT         8

typedef struct nvml_api {
    void *lib;
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    const char *(*error_string)(nvmlReturn_t);
    nvmlReturn_t (*count)(unsigned int *);
    nvmlReturn_t (*by_index)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t *);
    nvmlReturn_t (*util)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*temp)(nvmlDevice_t, int, unsigned int *);
    nvmlReturn_t (*power)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned int *);
    /* power caps (optional) */
    nvmlReturn_t (*set_power_limit)(nvmlDevice_t, unsigned int);
    nvmlReturn_t (*power_limit_range)(nvmlDevice_t, unsigned int *, unsigned int *);
    nvmlReturn_t (*power_limit_default)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int *);
    nvmlReturn_t (*ecc)(nvmlDevice_t, int, int, unsigned long long *);
    nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned int *, unsigned int *);
    nvmlReturn_t (*mig_max)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*mig_by_index)(nvmlDevice_t, unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*nvlink_state)(nvmlDevice_t, unsigned int, unsigned int *);
    nvmlReturn_t (*nvlink_remote_pci)(nvmlDevice_t, unsigned int, nvmlPciInfo_t *);
    nvmlReturn_t (*event_set_create)(nvmlEventSet_t *);
    nvmlReturn_t (*register_events)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
    nvmlReturn_t (*event_wait)(nvmlEventSet_t, nvmlEventData_t *, unsigned int);
    nvmlReturn_t (*event_set_free)(nvmlEventSet_t);
    nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long *);
    nvmlReturn_t (*pcie_replay)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*enc_util)(nvmlDevice_t, unsigned int *, unsigned int *);
    nvmlReturn_t (*dec_util)(nvmlDevice_t, unsigned int *, unsigned int *);
    nvmlReturn_t (*remapped_rows)(nvmlDevice_t, unsigned int *, unsigned int *, unsigned int *,
                                  unsigned int *);
    nvmlReturn_t (*field_values)(nvmlDevice_t, int, nvmlFieldValue_t *);
    nvmlReturn_t (*gpu_instance_id)(nvmlDevice_t, unsigned int *);
    /* dynamic MIG (all optional: without them the layout is fixed) */
    nvmlReturn_t (*gi_profile_info)(nvmlDevice_t, unsigned int, nvmlGpuInstanceProfileInfo_t *);
    nvmlReturn_t (*gi_create_at)(nvmlDevice_t, unsigned int, const nvmlGpuInstancePlacement_t *,
                                 nvmlGpuInstance_t *);
    nvmlReturn_t (*gi_by_id)(nvmlDevice_t, unsigned int, nvmlGpuInstance_t *);
    nvmlReturn_t (*gi_info)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t *);
    nvmlReturn_t (*gi_destroy)(nvmlGpuInstance_t);
    nvmlReturn_t (*ci_profile_info)(nvmlGpuInstance_t, unsigned int, unsigned int,
                                    nvmlComputeInstanceProfileInfo_t *);
    nvmlReturn_t (*ci_create)(nvmlGpuInstance_t, unsigned int, nvmlComputeInstance_t *);
    nvmlReturn_t (*ci_list)(nvmlGpuInstance_t, unsigned int, nvmlComputeInstance_t *,
                            unsigned int *);
    nvmlReturn_t (*ci_destroy)(nvmlComputeInstance_t);
    nvmlReturn_t (*compute_instance_id)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*minor)(nvmlDevice_t, unsigned int *);
} nvml_api;

typedef struct nvml_state {
    nvml_api api;
    nvmlDevice_t dev[CR_GPU_MAX];
    nvmlEventSet_t events; /* NULL when the driver refused */
    int xid_last[CR_GPU_MAX];
    uint64_t xid_count[CR_GPU_MAX];
    int64_t xid_time[CR_GPU_MAX];
} nvml_state;

static int load_api(nvml_api *a, char *err, size_t errlen)
{
    a->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) {
        const char *e = dlerror();
        snprintf(err, errlen, "NVML not available: %s", e ? e : "libnvidia-ml.so.1 not found");
        return CR_EUNAVAIL;
    }
    /* Required symbols fail the open; optional ones stay NULL. */
#define REQ(field, sym)                                                                            \
    do {                                                                                           \
        *(void **)(&a->field) = dlsym(a->lib, sym);                                                \
        if (!a->field) {                                                                           \
            snprintf(err, errlen, "NVML: libnvidia-ml.so.1 lacks %s (driver too old)", sym);       \
            return CR_EUNAVAIL;                                                                    \
        }                                                                                          \
    } while (0)
#define OPT(field, sym) (*(void **)(&a->field) = dlsym(a->lib, sym))
    REQ(init, "nvmlInit_v2");
    REQ(shutdown, "nvmlShutdown");
    REQ(error_string, "nvmlErrorString");
    REQ(count, "nvmlDeviceGetCount_v2");
    REQ(by_index, "nvmlDeviceGetHandleByIndex_v2");
    REQ(name, "nvmlDeviceGetName");
    REQ(uuid, "nvmlDeviceGetUUID");
    REQ(memory, "nvmlDeviceGetMemoryInfo");
    OPT(pci, "nvmlDeviceGetPciInfo_v3");
    OPT(util, "nvmlDeviceGetUtilizationRates");
    OPT(temp, "nvmlDeviceGetTemperature");
    OPT(power, "nvmlDeviceGetPowerUsage");
    OPT(power_limit, "nvmlDeviceGetEnforcedPowerLimit");
    OPT(set_power_limit, "nvmlDeviceSetPowerManagementLimit");
    OPT(power_limit_range, "nvmlDeviceGetPowerManagementLimitConstraints");
    OPT(power_limit_default, "nvmlDeviceGetPowerManagementDefaultLimit");
    OPT(clock, "nvmlDeviceGetClockInfo");
    OPT(ecc, "nvmlDeviceGetTotalEccErrors");
    OPT(mig_mode, "nvmlDeviceGetMigMode");
    OPT(mig_max, "nvmlDeviceGetMaxMigDeviceCount");
    OPT(mig_by_index, "nvmlDeviceGetMigDeviceHandleByIndex");
    OPT(nvlink_state, "nvmlDeviceGetNvLinkState");
    OPT(nvlink_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    OPT(event_set_create, "nvmlEventSetCreate");
    OPT(register_events, "nvmlDeviceRegisterEvents");
    OPT(event_wait, "nvmlEventSetWait_v2");
    OPT(event_set_free, "nvmlEventSetFree");
    OPT(energy, "nvmlDeviceGetTotalEnergyConsumption");
    OPT(pcie_replay, "nvmlDeviceGetPcieReplayCounter");
    OPT(enc_util, "nvmlDeviceGetEncoderUtilization");
    OPT(dec_util, "nvmlDeviceGetDecoderUtilization");
    OPT(remapped_rows, "nvmlDeviceGetRemappedRows");
    OPT(field_values, "nvmlDeviceGetFieldValues");
    OPT(gpu_instance_id, "nvmlDeviceGetGpuInstanceId");
    OPT(gi_profile_info, "nvmlDeviceGetGpuInstanceProfileInfo");
    OPT(gi_create_at, "nvmlDeviceCreateGpuInstanceWithPlacement");
    OPT(gi_by_id, "nvmlDeviceGetGpuInstanceById");
    OPT(gi_info, "nvmlGpuInstanceGetInfo");
    OPT(gi_destroy, "nvmlGpuInstanceDestroy");
    OPT(ci_profile_info, "nvmlGpuInstanceGetComputeInstanceProfileInfo");
    OPT(ci_create, "nvmlGpuInstanceCreateComputeInstance");
    OPT(ci_list, "nvmlGpuInstanceGetComputeInstances");
    OPT(ci_destroy, "nvmlComputeInstanceDestroy");
    OPT(compute_instance_id, "nvmlDeviceGetComputeInstanceId");
    OPT(minor, "nvmlDeviceGetMinorNumber");
#undef REQ
#undef OPT
    return 0;
}

static void drain_xids(cr_gpu_backend *b, nvml_state *st, int64_t now_ns)
{
    if (!st->events || !st->api.event_wait) {
        return;
    }
    for (int k = 0; k < 64; k++) {
        nvmlEventData_t ev;
        memset(&ev, 0, sizeof ev);
        if (st->api.event_wait(st->events, &ev, 0) != NVML_SUCCESS) {
            return;
        }
        if (!(ev.eventType & NVML_EVENT_XID)) {
            continue;
        }
        for (size_t i = 0; i < b->count; i++) {
            if (st->dev[i] == ev.device) {
                st->xid_last[i] = (int)ev.eventData;
                st->xid_count[i]++;
                st->xid_time[i] = now_ns;
            }
        }
    }
}

/* A field value as an unsigned integer; false when NVML refused it. */
static bool field_u64(const nvmlFieldValue_t *f, uint64_t *out)
{
    if (f->nvmlReturn != NVML_SUCCESS) {
        return false;
    }
    switch (f->valueType) {
    case NVML_VALUE_TYPE_DOUBLE:
        *out = f->value.dVal > 0 ? (uint64_t)f->value.dVal : 0;
        return true;
    case NVML_VALUE_TYPE_UNSIGNED_INT:
        *out = f->value.uiVal;
        return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
        *out = f->value.ulVal;
        return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        *out = f->value.ullVal;
        return true;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
        *out = f->value.sllVal > 0 ? (uint64_t)f->value.sllVal : 0;
        return true;
    case NVML_VALUE_TYPE_SIGNED_INT:
        *out = f->value.siVal > 0 ? (uint64_t)f->value.siVal : 0;
        return true;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT:
        *out = f->value.usVal;
        return true;
    default:
        return false;
    }
}

/* The dcgm-exporter default fields beyond the basic sample. */
static void sample_extra(const nvml_api *a, nvmlDevice_t d, const nvmlUtilization_t *u, bool have_u,
                         cr_gpu_sample *s)
{
    unsigned int v, w, x, y;
    unsigned long long e;
    if (have_u) {
        s->mem_copy_util_pct = (int)(u->memory > 100 ? 100 : u->memory);
        s->have |= CR_GPU_HAVE_MEM_COPY;
    }
    if (a->clock && a->clock(d, NVML_CLOCK_MEM, &v) == NVML_SUCCESS) {
        s->mem_clock_mhz = (int)v;
        s->have |= CR_GPU_HAVE_MEM_CLOCK;
    }
    if (a->energy && a->energy(d, &e) == NVML_SUCCESS) {
        s->energy_mj = e;
        s->have |= CR_GPU_HAVE_ENERGY;
    }
    if (a->pcie_replay && a->pcie_replay(d, &v) == NVML_SUCCESS) {
        s->pcie_replay = v;
        s->have |= CR_GPU_HAVE_PCIE_REPLAY;
    }
    if (a->enc_util && a->dec_util && a->enc_util(d, &v, &w) == NVML_SUCCESS &&
        a->dec_util(d, &x, &w) == NVML_SUCCESS) {
        s->enc_util_pct = (int)(v > 100 ? 100 : v);
        s->dec_util_pct = (int)(x > 100 ? 100 : x);
        s->have |= CR_GPU_HAVE_ENC_DEC;
    }
    if (a->remapped_rows && a->remapped_rows(d, &v, &w, &x, &y) == NVML_SUCCESS) {
        s->remap_corr = v;
        s->remap_unc = w;
        s->remap_failure = y ? 1 : 0;
        s->have |= CR_GPU_HAVE_REMAP;
    }
    if (a->field_values) {
        nvmlFieldValue_t f[3];
        memset(f, 0, sizeof f);
        f[0].fieldId = NVML_FI_DEV_MEMORY_TEMP;
        f[1].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
        f[1].scopeId = UINT_MAX;
        f[2].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
        f[2].scopeId = UINT_MAX;
        uint64_t t, tx, rx;
        if (a->field_values(d, 3, f) == NVML_SUCCESS) {
            if (field_u64(&f[0], &t) && t > 0) {
                s->mem_temp_c = (int)t;
                s->have |= CR_GPU_HAVE_MEM_TEMP;
            }
            if (field_u64(&f[1], &tx) && field_u64(&f[2], &rx)) {
                s->nvlink_kib = tx + rx;
                s->have |= CR_GPU_HAVE_NVLINK;
            }
        }
    }
}

static int nvml_sample(cr_gpu_backend *b, const cr_gpu_load *load, int64_t now_ns,
                       cr_gpu_sample *out)
{
    nvml_state *st = b->priv;
    const nvml_api *a = &st->api;
    drain_xids(b, st, now_ns);
    for (size_t i = 0; i < b->count; i++) {
        cr_gpu_sample *s = &out[i];
        memset(s, 0, sizeof *s);
        nvmlDevice_t d = st->dev[i];
        nvmlUtilization_t u = {0, 0};
        bool have_u = a->util && a->util(d, &u) == NVML_SUCCESS;
        if (have_u) {
            s->util_pct = (int)(u.gpu > 100 ? 100 : u.gpu);
        }
        nvmlMemory_t m;
        if (a->memory(d, &m) == NVML_SUCCESS) {
            s->mem_used_bytes = m.used;
        }
        unsigned int v;
        if (a->temp && a->temp(d, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS) {
            s->temp_c = (int)v;
        }
        if (a->power && a->power(d, &v) == NVML_SUCCESS) {
            s->power_mw = v;
        }
        if (a->clock && a->clock(d, NVML_CLOCK_SM, &v) == NVML_SUCCESS) {
            s->sm_clock_mhz = (int)v;
        }
        unsigned long long e;
        if (a->ecc && a->ecc(d, NVML_MEMORY_ERROR_UNCORR, NVML_VOLATILE_ECC, &e) == NVML_SUCCESS) {
            s->ecc_uncorrected = e;
        }
        s->xid_last = st->xid_last[i];
        s->xid_count = st->xid_count[i];
        s->xid_time_ns = st->xid_time[i];
        sample_extra(a, d, &u, have_u, s);
    }
    return 0;
}

static void nvml_destroy(cr_gpu_backend *b)
{
    nvml_state *st = b->priv;
    if (st) {
        if (st->events && st->api.event_set_free) {
            st->api.event_set_free(st->events);
        }
        if (st->api.shutdown) {
            st->api.shutdown();
        }
        if (st->api.lib) {
            dlclose(st->api.lib);
        }
        free(st);
    }
    free(b);
}

/* --- dynamic MIG ------------------------------------------------------ */

static int nvml_fail(const nvml_api *a, nvmlReturn_t r, const char *what, int gpu, char *err,
                     size_t errlen)
{
    snprintf(err, errlen, "GPU %d: %s: %s", gpu, what, a->error_string(r));
    return CR_EIO;
}

/* Compute instances first (every profile), then the GPU instance. */
static int nvml_mig_destroy(cr_gpu_backend *b, size_t gi, const cr_mig_inst *m, char *err,
                            size_t errlen)
{
    nvml_state *st = b->priv;
    const nvml_api *a = &st->api;
    int idx = b->gpus[gi].index;
    if (!a->gi_by_id || !a->gi_destroy || !a->ci_list || !a->ci_destroy) {
        snprintf(err, errlen, "GPU %d: this driver's NVML cannot destroy MIG instances", idx);
        return CR_ENOTSUP;
    }
    nvmlGpuInstance_t g;
    nvmlReturn_t r = a->gi_by_id(st->dev[gi], (unsigned)m->gi_id, &g);
    if (r != NVML_SUCCESS) {
        return nvml_fail(a, r, "nvmlDeviceGetGpuInstanceById", idx, err, errlen);
    }
    for (unsigned p = 0; p < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; p++) {
        nvmlComputeInstance_t cis[8];
        unsigned n = 8;
        if (a->ci_list(g, p, cis, &n) != NVML_SUCCESS) {
            continue; /* a profile this instance cannot have */
        }
        for (unsigned k = 0; k < n && k < 8; k++) {
            if ((r = a->ci_destroy(cis[k])) != NVML_SUCCESS) {
                return nvml_fail(a, r, "nvmlComputeInstanceDestroy", idx, err, errlen);
            }
        }
    }
    if ((r = a->gi_destroy(g)) != NVML_SUCCESS) {
        return nvml_fail(a, r, "nvmlGpuInstanceDestroy", idx, err, errlen);
    }
    return 0;
}

/* A GPU instance at the placement asked for, one compute instance over
 * all of it; the new MIG device's UUID and memory read back. */
static int nvml_mig_create(cr_gpu_backend *b, size_t gi, const cr_mig_want *w, cr_mig_inst *out,
                           char *err, size_t errlen)
{
    nvml_state *st = b->priv;
    const nvml_api *a = &st->api;
    nvmlDevice_t d = st->dev[gi];
    int idx = b->gpus[gi].index;
    unsigned gp, cp;
    if (!a->gi_profile_info || !a->gi_create_at || !a->ci_profile_info || !a->ci_create ||
        !a->mig_by_index || !a->mig_max || !a->gpu_instance_id) {
        snprintf(err, errlen, "GPU %d: this driver's NVML cannot create MIG instances", idx);
        return CR_ENOTSUP;
    }
    if (cr_gpu_mig_nvml_profile(w->profile, w->slices, w->mem_slices, &gp, &cp) < 0) {
        snprintf(err, errlen, "GPU %d: no NVML profile for %s", idx, w->profile);
        return CR_EINVAL;
    }
    nvmlGpuInstanceProfileInfo_t pi;
    nvmlReturn_t r = a->gi_profile_info(d, gp, &pi);
    if (r != NVML_SUCCESS) {
        return nvml_fail(a, r, "nvmlDeviceGetGpuInstanceProfileInfo", idx, err, errlen);
    }
    nvmlGpuInstancePlacement_t place = {(unsigned)w->start, (unsigned)w->mem_slices};
    nvmlGpuInstance_t g;
    if ((r = a->gi_create_at(d, pi.id, &place, &g)) != NVML_SUCCESS) {
        return nvml_fail(a, r, "nvmlDeviceCreateGpuInstanceWithPlacement", idx, err, errlen);
    }
    nvmlComputeInstanceProfileInfo_t ci;
    nvmlComputeInstance_t c;
    if ((r = a->ci_profile_info(g, cp, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &ci)) !=
            NVML_SUCCESS ||
        (r = a->ci_create(g, ci.id, &c)) != NVML_SUCCESS) {
        if (a->gi_destroy) {
            a->gi_destroy(g); /* no half-made instance left behind */
        }
        return nvml_fail(a, r, "compute instance", idx, err, errlen);
    }
    nvmlGpuInstanceInfo_t info;
    unsigned gid = 0, maxmig = 0;
    if (a->gi_info && a->gi_info(g, &info) == NVML_SUCCESS) {
        gid = info.id;
    }
    snprintf(out->profile, sizeof out->profile, "%s", w->profile);
    out->slices = w->slices;
    out->mem_slices = w->mem_slices;
    out->start = w->start;
    out->gi_id = (int)gid;
    a->mig_max(d, &maxmig);
    for (unsigned k = 0; k < maxmig; k++) {
        nvmlDevice_t md;
        unsigned mg = 0;
        nvmlMemory_t m;
        if (a->mig_by_index(d, k, &md) == NVML_SUCCESS &&
            a->gpu_instance_id(md, &mg) == NVML_SUCCESS && mg == gid) {
            a->uuid(md, out->uuid, sizeof out->uuid);
            if (a->memory(md, &m) == NVML_SUCCESS) {
                out->mem_bytes = m.total;
            }
            return 0;
        }
    }
    snprintf(err, errlen, "GPU %d: the new %s instance (GPU instance %u) has no MIG device", idx,
             w->profile, gid);
    return CR_EIO;
}

/* The board's power limit (mW in NVML) clamped to its constraints; 0 its
 * default limit. Needs root (NVML_ERROR_NO_PERMISSION otherwise). */
static int nvml_set_power_cap(cr_gpu_backend *b, size_t gi, int cap_w, int *applied_w, char *err,
                              size_t errlen)
{
    nvml_state *st = b->priv;
    const nvml_api *a = &st->api;
    nvmlDevice_t d = st->dev[gi];
    if (!a->set_power_limit) {
        snprintf(err, errlen, "NVML: libnvidia-ml.so.1 lacks nvmlDeviceSetPowerManagementLimit");
        return CR_ENOTSUP;
    }
    unsigned int mw = (unsigned int)(cap_w > 0 ? cap_w : 0) * 1000u, lo = 0, hi = 0, def = 0;
    if (cap_w <= 0) {
        if (!a->power_limit_default || a->power_limit_default(d, &def) != NVML_SUCCESS) {
            snprintf(err, errlen, "NVML: GPU %d: its default power limit is unknown",
                     b->gpus[gi].index);
            return CR_EIO;
        }
        mw = def;
    } else if (a->power_limit_range && a->power_limit_range(d, &lo, &hi) == NVML_SUCCESS) {
        mw = mw < lo ? lo : mw > hi ? hi : mw;
    }
    nvmlReturn_t r = a->set_power_limit(d, mw);
    if (r != NVML_SUCCESS) {
        snprintf(err, errlen, "NVML: GPU %d: nvmlDeviceSetPowerManagementLimit(%u mW): %s",
                 b->gpus[gi].index, mw, a->error_string(r));
        return CR_EIO;
    }
    unsigned int now = mw;
    if (a->power_limit) {
        a->power_limit(d, &now);
    }
    *applied_w = (int)(now / 1000u);
    return 0;
}

static const cr_gpu_ops nvml_ops = {"nvml",           nvml_sample,     nvml_destroy,
                                    nvml_mig_destroy, nvml_mig_create, nvml_set_power_cap};

static void read_inventory(cr_gpu_backend *b, nvml_state *st)
{
    const nvml_api *a = &st->api;
    unsigned char links[CR_GPU_MAX * CR_GPU_MAX] = {0};
    unsigned char switched[CR_GPU_MAX] = {0};
    for (size_t i = 0; i < b->count; i++) {
        cr_gpu_info *g = &b->gpus[i];
        nvmlDevice_t d = st->dev[i];
        g->index = (int)i;
        /* /dev/nvidia<minor>: NVML's index follows PCI order (or
         * CUDA_DEVICE_ORDER), the minor number the driver's probe order; they
         * differ on many hosts, and the cgroup device rules need the minor. */
        unsigned int mn = 0;
        if (a->minor && a->minor(d, &mn) == NVML_SUCCESS && mn < 255) {
            g->minor = (int)mn;
        } else {
            g->minor = (int)i;
            cr_warn("gpu: nvmlDeviceGetMinorNumber failed for GPU %zu: assuming /dev/nvidia%zu", i,
                    i);
        }
        if (a->name(d, g->raw_name, sizeof g->raw_name) != NVML_SUCCESS) {
            snprintf(g->raw_name, sizeof g->raw_name, "unknown");
        }
        cr_gpu_model_from_nvml(g->raw_name, g->model, sizeof g->model);
        a->uuid(d, g->uuid, sizeof g->uuid);
        nvmlMemory_t m;
        if (a->memory(d, &m) == NVML_SUCCESS) {
            g->mem_bytes = m.total;
        }
        nvmlPciInfo_t p;
        if (a->pci && a->pci(d, &p) == NVML_SUCCESS) {
            snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "%s", p.busId);
        }
        unsigned int lim;
        if (a->power_limit && a->power_limit(d, &lim) == NVML_SUCCESS) {
            g->tdp_w = (int)(lim / 1000);
        }
        unsigned int cur = 0, pend = 0, maxmig = 0;
        if (a->mig_mode && a->mig_mode(d, &cur, &pend) == NVML_SUCCESS &&
            cur == NVML_FEATURE_ENABLED && a->mig_max && a->mig_by_index &&
            a->mig_max(d, &maxmig) == NVML_SUCCESS) {
            g->mig_enabled = 1;
            for (unsigned int k = 0; k < maxmig && g->mig_count < CR_GPU_MAX_MIG; k++) {
                nvmlDevice_t md;
                if (a->mig_by_index(d, k, &md) != NVML_SUCCESS) {
                    continue; /* slot without an instance */
                }
                cr_mig_inst *mi = &g->mig[g->mig_count];
                char mname[96] = "";
                a->name(md, mname, sizeof mname);
                if (cr_gpu_mig_profile_from_name(mname, mi->profile, sizeof mi->profile,
                                                 &mi->slices) < 0) {
                    continue;
                }
                a->uuid(md, mi->uuid, sizeof mi->uuid);
                unsigned int gi = 0;
                mi->gi_id = a->gpu_instance_id && a->gpu_instance_id(md, &gi) == NVML_SUCCESS
                                ? (int)gi
                                : (int)k;
                unsigned int ci = 0;
                mi->ci_id =
                    a->compute_instance_id && a->compute_instance_id(md, &ci) == NVML_SUCCESS
                        ? (int)ci
                        : 0;
                if (a->memory(md, &m) == NVML_SUCCESS) {
                    mi->mem_bytes = m.total;
                }
                mi->mem_slices = cr_gpu_mig_mem_slices(mi->profile, g->mem_bytes, maxmig);
                mi->start = -1;
                nvmlGpuInstance_t gh;
                nvmlGpuInstanceInfo_t gii;
                if (a->gpu_instance_id && a->gi_by_id && a->gi_info &&
                    a->gi_by_id(d, (unsigned)mi->gi_id, &gh) == NVML_SUCCESS &&
                    a->gi_info(gh, &gii) == NVML_SUCCESS) {
                    mi->start = (int)gii.placement.start; /* the real placement */
                }
                g->mig_count++;
            }
        }
    }
    /* NVLink peers: a link whose remote PCI bus id is one of our GPUs joins
     * the two; a remote that is not a GPU of ours is an NVSwitch. */
    for (size_t i = 0; i < b->count && a->nvlink_state && a->nvlink_remote_pci; i++) {
        for (unsigned int l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
            unsigned int active = 0;
            nvmlPciInfo_t rp;
            if (a->nvlink_state(st->dev[i], l, &active) != NVML_SUCCESS || !active ||
                a->nvlink_remote_pci(st->dev[i], l, &rp) != NVML_SUCCESS) {
                continue;
            }
            int peer = -1;
            for (size_t j = 0; j < b->count; j++) {
                if (strcasecmp(b->gpus[j].pci_bus_id, rp.busId) == 0) {
                    peer = (int)j;
                }
            }
            if (peer >= 0) {
                links[i * b->count + (size_t)peer] = 1;
            } else {
                switched[i] = 1;
            }
        }
    }
    int dom[CR_GPU_MAX];
    cr_gpu_nvlink_domains(b->count, links, switched, dom);
    for (size_t i = 0; i < b->count; i++) {
        b->gpus[i].nvlink_domain = dom[i];
    }
}

int cr_gpu_nvml_open(cr_gpu_backend **out, char *err, size_t errlen)
{
    cr_gpu_backend *b = cr_calloc(1, sizeof *b);
    nvml_state *st = cr_calloc(1, sizeof *st);
    b->ops = &nvml_ops;
    b->priv = st;
    int rc = load_api(&st->api, err, errlen);
    if (rc < 0) {
        goto fail;
    }
    nvmlReturn_t r = st->api.init();
    if (r != NVML_SUCCESS) {
        snprintf(err, errlen, "NVML: nvmlInit_v2: %s", st->api.error_string(r));
        st->api.shutdown = NULL; /* nothing to shut down */
        rc = CR_EUNAVAIL;
        goto fail;
    }
    unsigned int n = 0;
    r = st->api.count(&n);
    if (r != NVML_SUCCESS || n == 0) {
        snprintf(err, errlen, "NVML: no GPUs (%s)",
                 r == NVML_SUCCESS ? "count 0" : st->api.error_string(r));
        rc = CR_EUNAVAIL;
        goto fail;
    }
    b->count = n > CR_GPU_MAX ? CR_GPU_MAX : n;
    for (size_t i = 0; i < b->count; i++) {
        r = st->api.by_index((unsigned)i, &st->dev[i]);
        if (r != NVML_SUCCESS) {
            snprintf(err, errlen, "NVML: GPU %zu: %s", i, st->api.error_string(r));
            rc = CR_EIO;
            goto fail;
        }
    }
    read_inventory(b, st);
    if (st->api.event_set_create && st->api.register_events &&
        st->api.event_set_create(&st->events) == NVML_SUCCESS) {
        for (size_t i = 0; i < b->count; i++) {
            /* Some boards refuse XID events (no permission, vGPU): health
             * then rests on ECC and temperature alone. */
            st->api.register_events(st->dev[i], NVML_EVENT_XID, st->events);
        }
    }
    *out = b;
    return 0;
fail:
    nvml_destroy(b);
    return rc;
}
