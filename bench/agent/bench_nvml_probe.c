/*
 * bench_nvml_probe.c - what NVML reports on this machine, through the
 * agent's own NVML backend: inventory (model, UUID, memory, PCI bus id,
 * NVLink domain, MIG instances) and three samples one second apart. On a
 * machine without the driver it says so and exits 0. Run it on a GPU host
 * and record the output in docs/agent.md.
 */
#include "cr_gpu.h"
#include "cr_time.h"

#include <stdio.h>
#include <time.h>

int main(void)
{
    cr_gpu_backend *b = NULL;
    char err[512];
    if (cr_gpu_nvml_open(&b, err, sizeof err) < 0) {
        printf("nvml_probe: %s\n", err);
        return 0;
    }
    printf("nvml_probe: %zu GPU(s)\n", b->count);
    for (size_t i = 0; i < b->count; i++) {
        const cr_gpu_info *g = &b->gpus[i];
        printf("gpu %d: model=\"%s\" nvml_name=\"%s\" uuid=%s mem=%.1f GiB pci=%s nvlink_domain=%d "
               "power_limit=%d W mig=%s\n",
               g->index, g->model, g->raw_name, g->uuid, (double)g->mem_bytes / (1 << 30),
               g->pci_bus_id, g->nvlink_domain, g->tdp_w, g->mig_enabled ? "on" : "off");
        for (size_t k = 0; k < g->mig_count; k++) {
            printf("  mig %zu: %s profile=%s slices=%d mem_slices=%d mem=%.1f GiB\n", k,
                   g->mig[k].uuid, g->mig[k].profile, g->mig[k].slices, g->mig[k].mem_slices,
                   (double)g->mig[k].mem_bytes / (1 << 30));
        }
    }
    cr_gpu_sample s[CR_GPU_MAX];
    for (int round = 0; round < 3; round++) {
        int64_t t0 = cr_mono_ns();
        b->ops->sample(b, NULL, cr_now_ns(), s);
        int64_t dt = cr_mono_ns() - t0;
        for (size_t i = 0; i < b->count; i++) {
            printf("sample %d gpu %zu: util=%d%% mem_used=%.2f GiB temp=%d C power=%.1f W "
                   "sm_clock=%d MHz ecc_uncorrected=%llu xid_last=%d (sample of all GPUs took "
                   "%.2f ms)\n",
                   round, i, s[i].util_pct, (double)s[i].mem_used_bytes / (1 << 30), s[i].temp_c,
                   (double)s[i].power_mw / 1000, s[i].sm_clock_mhz,
                   (unsigned long long)s[i].ecc_uncorrected, s[i].xid_last, (double)dt / 1e6);
        }
        if (round < 2) {
            struct timespec ts = {1, 0};
            nanosleep(&ts, NULL);
        }
    }
    cr_gpu_close(b);
    return 0;
}
