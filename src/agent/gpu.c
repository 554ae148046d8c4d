/*
 * gpu.c - backend selection and the pure helpers shared by the backends:
 * health verdicts, model names, MIG profile names, NVLink domains, UUIDs.
 */
#include "cr_gpu.h"

#include "cr_error.h"
#include "cr_time.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cr_gpu_open(const char *spec, const char *node, const char *faults_path, cr_gpu_backend **out,
                char *err, size_t errlen)
{
    if (!spec || !*spec) {
        snprintf(err, errlen, "--gpus: empty; use sim:SPEC, nvml or auto");
        return CR_EINVAL;
    }
    if (strncmp(spec, "sim:", 4) == 0) {
        return cr_gpu_sim_open(spec + 4, node, faults_path, out, err, errlen);
    }
    if (strcmp(spec, "nvml") == 0 || strcmp(spec, "auto") == 0) {
        int rc = cr_gpu_nvml_open(out, err, errlen);
        if (rc < 0 && strcmp(spec, "auto") == 0) {
            size_t n = strlen(err);
            snprintf(err + n, errlen - n, " (auto: no NVML; use --gpus sim:SPEC to simulate)");
        }
        return rc;
    }
    snprintf(err, errlen, "--gpus: '%s' is not sim:SPEC, nvml or auto", spec);
    return CR_EINVAL;
}

void cr_gpu_close(cr_gpu_backend *b)
{
    if (b) {
        b->ops->destroy(b);
    }
}

/* --- health ---------------------------------------------------------- */

void cr_gpu_health_cfg_default(cr_gpu_health_cfg *cfg)
{
    cfg->hot_c = 90;
    cfg->cool_c = 85;
    cfg->xid_hold_ns = 60 * CR_NS_PER_SEC;
}

const char *cr_gpu_health_name(int state)
{
    switch (state) {
    case CR_GPU_XID:
        return "xid";
    case CR_GPU_ECC:
        return "ecc";
    case CR_GPU_HOT:
        return "hot";
    default:
        return "ok";
    }
}

int cr_gpu_health_update(cr_gpu_health *h, const cr_gpu_sample *s, const cr_gpu_health_cfg *cfg,
                         int64_t now_ns)
{
    int old = h->state;
    char old_reason[sizeof h->reason];
    memcpy(old_reason, h->reason, sizeof old_reason);

    /* Temperature with hysteresis, so a GPU at the limit does not flap. */
    if (s->temp_c >= cfg->hot_c) {
        h->hot = 1;
    } else if (s->temp_c <= cfg->cool_c) {
        h->hot = 0;
    }
    int xid_active =
        s->xid_last != 0 && s->xid_time_ns > 0 && now_ns - s->xid_time_ns <= cfg->xid_hold_ns;
    /* The most serious condition names the reason: ECC, then XID, then heat. */
    if (s->ecc_uncorrected > 0) {
        h->state = CR_GPU_ECC;
        snprintf(h->reason, sizeof h->reason, "%llu uncorrectable ECC error%s",
                 (unsigned long long)s->ecc_uncorrected, s->ecc_uncorrected == 1 ? "" : "s");
    } else if (xid_active) {
        h->state = CR_GPU_XID;
        snprintf(h->reason, sizeof h->reason, "XID %d", s->xid_last);
    } else if (h->hot) {
        h->state = CR_GPU_HOT;
        snprintf(h->reason, sizeof h->reason, "%d C, limit %d C", s->temp_c, cfg->hot_c);
    } else {
        h->state = CR_GPU_OK;
        h->reason[0] = '\0';
    }
    /* A hot GPU's reason carries the current temperature; only the state counts. */
    return h->state != old || (h->state != CR_GPU_HOT && strcmp(old_reason, h->reason) != 0);
}

/* --- names ----------------------------------------------------------- */

static int has(const char *s, const char *needle)
{
    return strstr(s, needle) != NULL;
}

void cr_gpu_model_from_nvml(const char *name, char *out, size_t len)
{
    /* The driver's names (nvidia-smi -L) of the data-centre parts in the
     * catalog, most specific first. */
    static const struct {
        const char *a, *b, *c; /* all must appear */
        const char *model;
    } map[] = {
        {"H200", "NVL", NULL, "H200 NVL"},
        {"H200", NULL, NULL, "H200 SXM"},
        {"H100", "NVL", NULL, "H100 NVL"},
        {"H100", "PCIe", NULL, "H100 PCIe"},
        {"H100", "HBM3", NULL, "H100 SXM"},
        {"H100", "SXM", NULL, "H100 SXM"},
        {"A100", "SXM", "80GB", "A100 80GB SXM"},
        {"A100", "SXM", "40GB", "A100 40GB SXM"},
        {"A100", "80GB", "PCIe", "A100 80GB PCIe"},
        {"A100", "PCIE", "40GB", "A100 40GB PCIe"},
        {"L40S", NULL, NULL, "L40S"},
        {"L40", NULL, NULL, "L40"},
        {"A30", NULL, NULL, "A30"},
        {"A40", NULL, NULL, "A40"},
        {"A10", NULL, NULL, "A10"},
        {"A16", NULL, NULL, "A16"},
        {"L4", NULL, NULL, "L4"},
        {"T4", NULL, NULL, "T4"},
        {"V100", "SXM2", "32GB", "V100 SXM2 32GB"},
        {"V100", "PCIE", "32GB", "V100 PCIe 32GB"},
        {"B200", NULL, NULL, "B200 (HGX B200)"},
    };
    /* Drop a trailing " MIG ..." so a MIG device maps to its parent's model. */
    char base[128];
    snprintf(base, sizeof base, "%s", name ? name : "");
    char *mig = strstr(base, " MIG ");
    if (mig) {
        *mig = '\0';
    }
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        const char *m = strstr(base, map[i].a);
        if (!m) {
            continue;
        }
        /* "L4" must not match "L40S": the family token ends at a boundary. */
        char after = m[strlen(map[i].a)];
        if (isalnum((unsigned char)after)) {
            continue;
        }
        if ((map[i].b && !has(base, map[i].b)) || (map[i].c && !has(base, map[i].c))) {
            continue;
        }
        snprintf(out, len, "%s", map[i].model);
        return;
    }
    const char *s = base;
    if (strncmp(s, "NVIDIA ", 7) == 0) {
        s += 7;
    } else if (strncmp(s, "Tesla ", 6) == 0) {
        s += 6;
    }
    snprintf(out, len, "%s", s);
}

int cr_gpu_mig_profile_from_name(const char *name, char *profile, size_t len, int *slices)
{
    const char *m = name ? strstr(name, " MIG ") : NULL;
    if (!m) {
        return CR_EPARSE;
    }
    m += 5;
    /* NVML names MIG devices "<parent> MIG <N>g.<M>gb" (sometimes with a
     * "+me" or "+gfx" suffix, kept in the profile). */
    char *end;
    long n = strtol(m, &end, 10);
    if (end == m || n < 1 || n > 8 || *end != 'g' || end[1] != '.') {
        return CR_EPARSE;
    }
    size_t l = strcspn(m, " ");
    if (l == 0 || l >= len) {
        return CR_EPARSE;
    }
    memcpy(profile, m, l);
    profile[l] = '\0';
    *slices = (int)n;
    return 0;
}

int cr_gpu_mig_mem_slices(const char *profile, uint64_t gpu_mem_bytes, int max_instances)
{
    /* Hopper/Ampere-100 parts: 8 memory slices for 7 compute slices; A30: 4
     * and 4. The slice size is the GPU memory over the memory slice count. */
    const char *dot = strchr(profile, '.');
    if (!dot) {
        return 1;
    }
    double gb = strtod(dot + 1, NULL);
    int total = max_instances == 4 ? 4 : 8;
    double slice_gb = (double)gpu_mem_bytes / (double)(1ULL << 30) / total;
    if (slice_gb <= 0 || gb <= 0) {
        return 1;
    }
    int n = (int)(gb / slice_gb + 0.5);
    return n < 1 ? 1 : n > total ? total : n;
}

static int uf_find(const int *parent, int x)
{
    while (parent[x] != x) {
        x = parent[x];
    }
    return x;
}

void cr_gpu_nvlink_domains(size_t n, const unsigned char *links, const unsigned char *switched,
                           int *domain)
{
    /* Union-find over the link matrix; a switched GPU joins the first
     * switched GPU. Small n (<= CR_GPU_MAX), so the simple form is fine. */
    int parent[CR_GPU_MAX];
    if (n > CR_GPU_MAX) {
        n = CR_GPU_MAX;
    }
    for (size_t i = 0; i < n; i++) {
        parent[i] = (int)i;
    }
    int first_sw = -1;
    int linked[CR_GPU_MAX] = {0};
    for (size_t i = 0; i < n; i++) {
        if (switched && switched[i]) {
            linked[i] = 1;
            if (first_sw < 0) {
                first_sw = (int)i;
            } else {
                int a = uf_find(parent, (int)i), b = uf_find(parent, first_sw);
                parent[a > b ? a : b] = a < b ? a : b;
            }
        }
        for (size_t j = 0; j < n; j++) {
            if (i != j && links[i * n + j]) {
                linked[i] = linked[j] = 1;
                int a = uf_find(parent, (int)i), b = uf_find(parent, (int)j);
                parent[a > b ? a : b] = a < b ? a : b;
            }
        }
    }
    int next = 0;
    int map[CR_GPU_MAX];
    for (size_t i = 0; i < n; i++) {
        map[i] = -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (!linked[i]) {
            domain[i] = -1;
            continue;
        }
        int r = uf_find(parent, (int)i);
        if (map[r] < 0) {
            map[r] = next++;
        }
        domain[i] = map[r];
    }
}

void cr_gpu_uuid_from_seed(const char *prefix, const char *seed, char *out, size_t len)
{
    /* FNV-1a, then splitmix64 for the second half: stable across runs and
     * machines, distinct for distinct seeds in practice. */
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)seed; *p; p++) {
        h = (h ^ *p) * 1099511628211ULL;
    }
    uint64_t z = h + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    snprintf(out, len, "%s-%08x-%04x-%04x-%04x-%012llx", prefix, (unsigned)(h >> 32),
             (unsigned)(h >> 16) & 0xffff, (unsigned)h & 0xffff, (unsigned)(z >> 48),
             (unsigned long long)(z & 0xffffffffffffULL));
}

int cr_gpu_set_power_cap(cr_gpu_backend *b, size_t gi, int cap_w, int *applied_w, char *err,
                         size_t errlen)
{
    if (gi >= b->count) {
        snprintf(err, errlen, "no GPU %zu here", gi);
        return CR_EINVAL;
    }
    if (!b->ops->set_power_cap) {
        snprintf(err, errlen, "the %s backend cannot cap GPU power", b->ops->name);
        return CR_ENOTSUP;
    }
    return b->ops->set_power_cap(b, gi, cap_w, applied_w, err, errlen);
}
