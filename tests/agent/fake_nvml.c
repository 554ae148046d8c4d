/*
 * fake_nvml.c - a stand-in libnvidia-ml.so.1 for test_iso_caps (loaded by
 * gpu_nvml.c with dlopen through LD_LIBRARY_PATH): two GPUs whose minor
 * numbers are not their indexes (index 0 is /dev/nvidia3, index 1
 * /dev/nvidia1, as on hosts where PCI order and the driver's probe order
 * differ), and MIG on GPU 1 with two instances (GPU instance 2 / compute
 * instance 0, GPU instance 5 / compute instance 1). Only the calls the
 * backend needs; signatures as in nvml.h (gpu_nvml.c declares them).
 */
#include <stdio.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

#define OK          0
#define NOT_FOUND   6
#define INVALID_ARG 2

typedef struct fake_dev {
    const char *name, *uuid;
    unsigned int minor, gi, ci;
    int mig;    /* 1: a MIG device (instance) */
    int parent; /* MIG device: its GPU */
} fake_dev;

static fake_dev devs[] = {
    {"NVIDIA H100 80GB HBM3", "GPU-fake-0", 3, 0, 0, 0, -1},
    {"NVIDIA A100-SXM4-80GB", "GPU-fake-1", 1, 0, 0, 0, -1},
    {"NVIDIA A100-SXM4-80GB MIG 1g.10gb", "MIG-fake-1-a", 0, 2, 0, 1, 1},
    {"NVIDIA A100-SXM4-80GB MIG 1g.10gb", "MIG-fake-1-b", 0, 5, 1, 1, 1},
};

nvmlReturn_t nvmlInit_v2(void)
{
    return OK;
}
nvmlReturn_t nvmlShutdown(void)
{
    return OK;
}
const char *nvmlErrorString(nvmlReturn_t r)
{
    return r == OK ? "Success" : "fake error";
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
    *n = 2;
    return OK;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
    if (i >= 2) {
        return INVALID_ARG;
    }
    *d = &devs[i];
    return OK;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *out, unsigned int len)
{
    snprintf(out, len, "%s", ((fake_dev *)d)->name);
    return OK;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *out, unsigned int len)
{
    snprintf(out, len, "%s", ((fake_dev *)d)->uuid);
    return OK;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    m->total = ((fake_dev *)d)->mig ? 10ULL << 30 : 80ULL << 30;
    m->free = m->total;
    m->used = 0;
    return OK;
}
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int *minor)
{
    if (((fake_dev *)d)->mig) {
        return INVALID_ARG;
    }
    *minor = ((fake_dev *)d)->minor;
    return OK;
}
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *cur, unsigned int *pend)
{
    *cur = *pend = d == &devs[1];
    return OK;
}
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int *n)
{
    *n = d == &devs[1] ? 7 : 0;
    return OK;
}
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int k, nvmlDevice_t *md)
{
    if (d != &devs[1] || k >= 2) {
        return NOT_FOUND;
    }
    *md = &devs[2 + k];
    return OK;
}
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned int *id)
{
    *id = ((fake_dev *)d)->gi;
    return OK;
}
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t d, unsigned int *id)
{
    *id = ((fake_dev *)d)->ci;
    return OK;
}
