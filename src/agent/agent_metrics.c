/*
 * agent_metrics.c - the series that tie GPUs to work, and the rest of
 * dcgm-exporter's default fields:
 *
 *   corral_gpu_allocation{node,gpu,UUID,job,tenant,service} 1
 *       one per (GPU, job) running here, when /metrics needs a token
 *       (--metrics-token-file or --tls-client-ca); open, the series has
 *       no job, tenant or service label and counts the jobs on each GPU
 *       (another tenant's job on the node must not learn who runs beside
 *       it); MIG jobs add GPU_I_ID and
 *       GPU_I_PROFILE. UUID is the GPU's (as in DCGM series), so
 *       `DCGM_FI_DEV_GPU_UTIL * on(UUID) group_left(job, tenant)
 *       corral_gpu_allocation` labels any DCGM series with its job.
 *   corral_gpu_mig_instance_memory_bytes{node,gpu,UUID,GPU_I_ID,GPU_I_PROFILE,mig_uuid}
 *       one per MIG instance.
 *   DCGM_FI_DEV_{MEM_CLOCK,MEMORY_TEMP,TOTAL_ENERGY_CONSUMPTION,
 *       PCIE_REPLAY_COUNTER,ENC_UTIL,DEC_UTIL,MEM_COPY_UTIL,
 *       CORRECTABLE_REMAPPED_ROWS,UNCORRECTABLE_REMAPPED_ROWS,
 *       ROW_REMAP_FAILURE,NVLINK_BANDWIDTH_TOTAL} with NVIDIA's types,
 *       for each GPU whose backend supplies the field (off with --no-dcgm).
 *
 * And dcgm-exporter's HPC job mapping (--dcgm-job-map DIR, the directory
 * its --hpc-job-mapping-dir reads): one file per GPU index holding the ids
 * of the jobs on that GPU, one a line; no file for an idle GPU.
 *
 * Main thread only (reads procs and samples without a lock).
 */
#include "agent_int.h"

#include "cr_alloc.h"
#include "cr_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define JOBMAP_MAX 4096 /* bytes of one mapping file (job ids, one a line) */

static void lv(cr_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"') {
            cr_buf_putc(b, '\\');
            cr_buf_putc(b, *s);
        } else if (*s == '\n') {
            cr_buf_puts(b, "\\n");
        } else {
            cr_buf_putc(b, *s);
        }
    }
}

static const char *env_of(const cr_job_spec *s, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; s->env && i < s->envc; i++) {
        if (strncmp(s->env[i], key, kl) == 0 && s->env[i][kl] == '=') {
            return s->env[i] + kl + 1;
        }
    }
    return "";
}

static bool live(const cr_proc *p)
{
    return p->state != CR_PROC_EXITED; /* a stopping job still holds its GPUs */
}

/* One label set of corral_gpu_allocation and how many jobs have it. */
typedef struct alloc_row {
    char *labels; /* owned */
    unsigned n;
} alloc_row;

/*
 * With --metrics-token-file or --tls-client-ca, one series per (GPU, job)
 * with the job's id, tenant and service. Without, /metrics is open to every
 * job on this node: the series carries no job, tenant or service label and
 * counts the jobs on each GPU (or MIG instance) instead.
 */
static void allocation(const agent *a, cr_buf *b)
{
    bool full = a->cfg.metrics_token || a->cfg.tls_client_ca;
    alloc_row *rows = NULL;
    size_t nrows = 0, cap = 0;
    cr_buf_puts(b, full ? "# HELP corral_gpu_allocation 1 for each GPU and the job running on it "
                          "(join DCGM series on UUID).\n# TYPE corral_gpu_allocation gauge\n"
                        : "# HELP corral_gpu_allocation Jobs running on each GPU (job labels "
                          "need the agent's metrics token).\n# TYPE corral_gpu_allocation gauge\n");
    for (size_t i = 0; i < a->nprocs; i++) {
        const cr_proc *p = &a->procs[i];
        if (!live(p)) {
            continue;
        }
        for (size_t k = 0; k < p->spec.gpu_count; k++) {
            int gi = p->spec.gpus[k];
            if (gi < 0 || (size_t)gi >= a->gpu->count) {
                continue;
            }
            const cr_gpu_info *g = &a->gpu->gpus[gi];
            cr_buf l;
            cr_buf_init(&l);
            cr_buf_puts(&l, "{node=\"");
            lv(&l, a->cfg.node);
            cr_buf_printf(&l, "\",gpu=\"%d\",UUID=\"%s\"", g->index, g->uuid);
            if (full) {
                cr_buf_printf(&l, ",job=\"%lld\",tenant=\"", (long long)p->job);
                lv(&l, p->spec.tenant);
                cr_buf_puts(&l, "\",service=\"");
                lv(&l, env_of(&p->spec, "CORRAL_SERVICE"));
                cr_buf_putc(&l, '"');
            }
            const char *uuid = k < p->spec.uuid_count ? p->spec.gpu_uuids[k] : "";
            for (size_t m = 0; p->spec.mig_profile && m < g->mig_count; m++) {
                if (strcmp(g->mig[m].uuid, uuid) == 0) {
                    cr_buf_printf(&l, ",GPU_I_ID=\"%d\",GPU_I_PROFILE=\"", g->mig[m].gi_id);
                    lv(&l, g->mig[m].profile);
                    cr_buf_putc(&l, '"');
                }
            }
            cr_buf_putc(&l, '}');
            size_t r = 0;
            while (r < nrows && strcmp(rows[r].labels, cr_buf_str(&l)) != 0) {
                r++;
            }
            if (r == nrows) {
                CR_GROW(rows, nrows, cap);
                rows[nrows++] = (alloc_row){.labels = cr_buf_take(&l), .n = 0};
            }
            rows[r].n++;
            cr_buf_fini(&l);
        }
    }
    for (size_t r = 0; r < nrows; r++) {
        cr_buf_printf(b, "corral_gpu_allocation%s %u\n", rows[r].labels, rows[r].n);
        free(rows[r].labels);
    }
    free(rows);
}

static void mig_instances(const agent *a, cr_buf *b)
{
    cr_buf_puts(b, "# HELP corral_gpu_mig_instance_memory_bytes Memory of each MIG instance.\n"
                   "# TYPE corral_gpu_mig_instance_memory_bytes gauge\n");
    for (size_t i = 0; i < a->gpu->count; i++) {
        const cr_gpu_info *g = &a->gpu->gpus[i];
        for (size_t m = 0; m < g->mig_count; m++) {
            cr_buf_puts(b, "corral_gpu_mig_instance_memory_bytes{node=\"");
            lv(b, a->cfg.node);
            cr_buf_printf(b, "\",gpu=\"%d\",UUID=\"%s\",GPU_I_ID=\"%d\",GPU_I_PROFILE=\"", g->index,
                          g->uuid, g->mig[m].gi_id);
            lv(b, g->mig[m].profile);
            cr_buf_printf(b, "\",mig_uuid=\"%s\"} %llu\n", g->mig[m].uuid,
                          (unsigned long long)g->mig[m].mem_bytes);
        }
    }
}

typedef enum {
    F_MEM_CLOCK,
    F_MEM_TEMP,
    F_ENERGY,
    F_PCIE_REPLAY,
    F_ENC,
    F_DEC,
    F_MEM_COPY,
    F_REMAP_CORR,
    F_REMAP_UNC,
    F_REMAP_FAIL,
    F_NVLINK
} field;

static unsigned long long field_value(const cr_gpu_sample *s, field f)
{
    switch (f) {
    case F_MEM_CLOCK:
        return (unsigned long long)s->mem_clock_mhz;
    case F_MEM_TEMP:
        return (unsigned long long)s->mem_temp_c;
    case F_ENERGY:
        return s->energy_mj;
    case F_PCIE_REPLAY:
        return s->pcie_replay;
    case F_ENC:
        return (unsigned long long)s->enc_util_pct;
    case F_DEC:
        return (unsigned long long)s->dec_util_pct;
    case F_MEM_COPY:
        return (unsigned long long)s->mem_copy_util_pct;
    case F_REMAP_CORR:
        return s->remap_corr;
    case F_REMAP_UNC:
        return s->remap_unc;
    case F_REMAP_FAIL:
        return (unsigned long long)s->remap_failure;
    case F_NVLINK:
        return s->nvlink_kib;
    }
    return 0;
}

static void dcgm_fields(const agent *a, cr_buf *b)
{
    /* Names, types and help as dcgm-exporter's default-counters.csv has them. */
    static const struct {
        const char *name, *type, *help;
        field f;
        unsigned have;
    } fields[] = {
        {"DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", F_MEM_CLOCK,
         CR_GPU_HAVE_MEM_CLOCK},
        {"DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", F_MEM_TEMP,
         CR_GPU_HAVE_MEM_TEMP},
        {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
         "Total energy consumption since boot (in mJ).", F_ENERGY, CR_GPU_HAVE_ENERGY},
        {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.",
         F_PCIE_REPLAY, CR_GPU_HAVE_PCIE_REPLAY},
        {"DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", F_MEM_COPY,
         CR_GPU_HAVE_MEM_COPY},
        {"DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", F_ENC,
         CR_GPU_HAVE_ENC_DEC},
        {"DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", F_DEC,
         CR_GPU_HAVE_ENC_DEC},
        {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter",
         "Number of remapped rows for correctable errors", F_REMAP_CORR, CR_GPU_HAVE_REMAP},
        {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
         "Number of remapped rows for uncorrectable errors", F_REMAP_UNC, CR_GPU_HAVE_REMAP},
        {"DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed",
         F_REMAP_FAIL, CR_GPU_HAVE_REMAP},
        {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter",
         "Total number of NVLink bandwidth counters for all lanes (KiB sent and received).",
         F_NVLINK, CR_GPU_HAVE_NVLINK},
    };
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        bool any = false;
        for (size_t i = 0; i < a->gpu->count; i++) {
            any |= (a->samples[i].have & fields[f].have) != 0;
        }
        if (!any) {
            continue;
        }
        cr_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", fields[f].name, fields[f].help,
                      fields[f].name, fields[f].type);
        for (size_t i = 0; i < a->gpu->count; i++) {
            const cr_gpu_info *g = &a->gpu->gpus[i];
            if (!(a->samples[i].have & fields[f].have)) {
                continue;
            }
            cr_buf_printf(b,
                          "%s{gpu=\"%d\",UUID=\"%s\",device=\"nvidia%d\",pci_bus_id=\"%s\","
                          "modelName=\"",
                          fields[f].name, g->index, g->uuid, g->index, g->pci_bus_id);
            lv(b, g->raw_name);
            cr_buf_puts(b, "\",Hostname=\"");
            lv(b, a->cfg.node);
            cr_buf_printf(b, "\"} %llu\n", field_value(&a->samples[i], fields[f].f));
        }
    }
}

void cr__agent_metrics_work(const agent *a, cr_buf *b)
{
    allocation(a, b);
    mig_instances(a, b);
    if (!a->cfg.no_dcgm) {
        dcgm_fields(a, b);
    }
}

/* Write path atomically when its content differs; "" removes it. */
static int sync_file(const char *dir, const char *name, const char *text)
{
    char path[1200], tmp[1300], cur[JOBMAP_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!*text) {
        return unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, cur, sizeof cur - 1);
        close(fd);
        if (n >= 0 && (size_t)n == strlen(text) && memcmp(cur, text, (size_t)n) == 0) {
            return 0;
        }
    }
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    /* 0600 in a 0700 directory: which jobs run on which GPU is no other
     * tenant's business (jobs on this node could read a 0644 file). */
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        return -errno;
    }
    fchmod(fd, 0600);
    size_t len = strlen(text);
    int rc = write(fd, text, len) == (ssize_t)len ? 0 : -EIO;
    close(fd);
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = -errno;
    }
    if (rc != 0) {
        unlink(tmp);
    }
    return rc;
}

void cr__agent_job_map(agent *a)
{
    if (!a->cfg.dcgm_job_map) {
        return;
    }
    for (size_t gi = 0; gi < a->gpu->count; gi++) {
        char text[JOBMAP_MAX] = "";
        size_t len = 0;
        for (size_t i = 0; i < a->nprocs; i++) {
            const cr_proc *p = &a->procs[i];
            for (size_t k = 0; live(p) && k < p->spec.gpu_count; k++) {
                if (p->spec.gpus[k] == (int)gi && len + 24 < sizeof text) {
                    len += (size_t)snprintf(text + len, sizeof text - len, "%lld\n",
                                            (long long)p->job);
                    break;
                }
            }
        }
        char name[24];
        snprintf(name, sizeof name, "%zu", gi);
        int rc = sync_file(a->cfg.dcgm_job_map, name, text);
        if (rc != 0 && !a->jobmap_warned) {
            cr_warn("agent: --dcgm-job-map %s/%s: %s", a->cfg.dcgm_job_map, name, strerror(-rc));
            a->jobmap_warned = 1;
        }
    }
}
