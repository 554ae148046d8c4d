/*
 * gpu_sim.c - simulated GPUs: declared by a spec, sampled from the load of
 * the jobs on them, with faults injected through a file.
 *
 * The samples are a simple physical caricature: utilisation follows the CPU
 * share of the job processes on the GPU (a busy loop reads 100 %, a sleep
 * 0 %), memory used grows with utilisation from 15 % of the framebuffer,
 * temperature and power move from idle towards their loaded values with a
 * first-order lag, and the SM clock goes from base to boost. That is enough
 * for dashboards, health checks and the scheduler's view to behave as they
 * would on hardware.
 */
#include "cr_gpu.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_parse.h"
#include "cr_time.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef struct sim_model {
    const char *name;
    const char *nvml_name; /* what the driver would call it */
    int mem_gib;
    int tdp_w;
    int mig_max; /* 0: no MIG */
    int sxm;     /* NVLink by default */
    int base_mhz, boost_mhz;
} sim_model;

static const sim_model models[] = {
    {"H200 SXM", "NVIDIA H200", 141, 700, 7, 1, 1365, 1980},
    {"H200 NVL", "NVIDIA H200 NVL", 141, 600, 7, 0, 1365, 1785},
    {"H100 SXM", "NVIDIA H100 80GB HBM3", 80, 700, 7, 1, 1590, 1980},
    {"H100 PCIe", "NVIDIA H100 PCIe", 80, 350, 7, 0, 1125, 1755},
    {"H100 NVL", "NVIDIA H100 NVL", 94, 400, 7, 0, 1080, 1785},
    {"A100 80GB SXM", "NVIDIA A100-SXM4-80GB", 80, 400, 7, 1, 1275, 1410},
    {"A100 40GB SXM", "NVIDIA A100-SXM4-40GB", 40, 400, 7, 1, 1095, 1410},
    {"A100 80GB PCIe", "NVIDIA A100 80GB PCIe", 80, 300, 7, 0, 1065, 1410},
    {"L40S", "NVIDIA L40S", 48, 350, 0, 0, 1110, 2520},
    {"L40", "NVIDIA L40", 48, 300, 0, 0, 735, 2490},
    {"L4", "NVIDIA L4", 24, 72, 0, 0, 795, 2040},
    {"A10", "NVIDIA A10", 24, 150, 0, 0, 885, 1695},
    {"A30", "NVIDIA A30", 24, 165, 4, 0, 930, 1440},
    {"A40", "NVIDIA A40", 48, 300, 0, 0, 1305, 1740},
    {"T4", "Tesla T4", 16, 70, 0, 0, 585, 1590},
    {"V100 SXM2 32GB", "Tesla V100-SXM2-32GB", 32, 300, 0, 1, 1290, 1530},
    {"B200 (HGX B200)", "NVIDIA B200", 180, 1000, 7, 1, 1665, 1965},
};

static const sim_model *find_model(const char *name)
{
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        if (strcasecmp(models[i].name, name) == 0) {
            return &models[i];
        }
    }
    return NULL;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) {
        s++;
    }
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) {
        s[--n] = '\0';
    }
    return s;
}

/* "1g.6gb:2+2g.12gb:1" into the MIG instances of g. */
static int parse_mig(char *v, cr_gpu_info *g, int mig_max, const char *where, char *err,
                     size_t errlen)
{
    if (mig_max == 0) {
        snprintf(err, errlen, "%s: mig: %s does not support MIG", where, g->model);
        return CR_EINVAL;
    }
    int used_slices = 0;
    char *save = NULL;
    for (char *part = strtok_r(v, "+", &save); part; part = strtok_r(NULL, "+", &save)) {
        part = trim(part);
        int64_t n = 1;
        char *colon = strchr(part, ':');
        if (colon) {
            *colon = '\0';
            if (cr_parse_i64(colon + 1, 1, CR_GPU_MAX_MIG, &n) < 0) {
                snprintf(err, errlen, "%s: mig: count '%s' must be 1..%d", where, colon + 1,
                         CR_GPU_MAX_MIG);
                return CR_EINVAL;
            }
        }
        char name[64];
        snprintf(name, sizeof name, "x MIG %s", part);
        char profile[32];
        int slices = 0;
        if (cr_gpu_mig_profile_from_name(name, profile, sizeof profile, &slices) < 0 ||
            strstr(profile, "gb") == NULL) {
            snprintf(err, errlen, "%s: mig: '%s' is not a profile like 1g.10gb", where, part);
            return CR_EINVAL;
        }
        for (int64_t k = 0; k < n; k++) {
            used_slices += slices;
            if (g->mig_count >= CR_GPU_MAX_MIG || used_slices > mig_max) {
                snprintf(err, errlen, "%s: mig: layout needs more than the %d slices of %s", where,
                         mig_max, g->model);
                return CR_EINVAL;
            }
            cr_mig_inst *m = &g->mig[g->mig_count++];
            m->gi_id = (int)g->mig_count; /* 1-based, in layout order */
            m->start = -1;                /* the controller places them */
            snprintf(m->profile, sizeof m->profile, "%s", profile);
            m->slices = slices;
            m->mem_slices = cr_gpu_mig_mem_slices(profile, g->mem_bytes, mig_max);
            m->mem_bytes = (uint64_t)(strtod(strchr(profile, '.') + 1, NULL) * 1e9);
        }
    }
    if (g->mig_count == 0) {
        snprintf(err, errlen, "%s: mig: empty layout", where);
        return CR_EINVAL;
    }
    g->mig_enabled = 1;
    return 0;
}

/* One group "8xH100 SXM,nvlink=1,mig=..." appended to gpus. */
static int parse_group(char *grp, const char *node, const char *where, cr_gpu_info *gpus,
                       size_t max, size_t *count, int *next_domain, char *err, size_t errlen)
{
    char *opts = strchr(grp, ',');
    if (opts) {
        *opts++ = '\0';
    }
    char *x = strchr(grp, 'x');
    if (!x) {
        snprintf(err, errlen, "%s: '%s' is not COUNTxMODEL (e.g. 8xH100 SXM)", where, grp);
        return CR_EINVAL;
    }
    *x = '\0';
    int64_t n;
    if (cr_parse_i64(trim(grp), 1, CR_GPU_MAX, &n) < 0) {
        snprintf(err, errlen, "%s: GPU count '%s' must be 1..%d", where, grp, CR_GPU_MAX);
        return CR_EINVAL;
    }
    char *model = trim(x + 1);
    if (!*model) {
        snprintf(err, errlen, "%s: model missing after '%sx'", where, grp);
        return CR_EINVAL;
    }
    if (*count + (size_t)n > max) {
        snprintf(err, errlen, "%s: more than %zu GPUs on one node", where, max);
        return CR_ERANGE;
    }
    const sim_model *sm = find_model(model);
    int64_t mem_gib = sm ? sm->mem_gib : 0, tdp = sm ? sm->tdp_w : 300, domains = -1;
    int mig_max = sm ? sm->mig_max : 7;
    char *mig = NULL;
    char *save = NULL;
    for (char *o = opts ? strtok_r(opts, ",", &save) : NULL; o; o = strtok_r(NULL, ",", &save)) {
        o = trim(o);
        char *eq = strchr(o, '=');
        if (!eq) {
            snprintf(err, errlen, "%s: option '%s' is not key=value", where, o);
            return CR_EINVAL;
        }
        *eq = '\0';
        char *v = trim(eq + 1);
        int rc = 0;
        if (strcmp(o, "mem") == 0) {
            rc = cr_parse_i64(v, 1, 4096, &mem_gib);
        } else if (strcmp(o, "tdp") == 0) {
            rc = cr_parse_i64(v, 1, 5000, &tdp);
        } else if (strcmp(o, "nvlink") == 0) {
            rc = cr_parse_i64(v, 0, n, &domains);
        } else if (strcmp(o, "mig") == 0) {
            mig = v;
        } else {
            snprintf(err, errlen, "%s: unknown option '%s' (mem, tdp, nvlink, mig)", where, o);
            return CR_EINVAL;
        }
        if (rc < 0) {
            snprintf(err, errlen, "%s: %s: '%s' out of range", where, o, v);
            return CR_EINVAL;
        }
    }
    if (mem_gib == 0) {
        snprintf(err, errlen, "%s: unknown model '%s': give mem=GiB (and tdp=W)", where, model);
        return CR_EINVAL;
    }
    if (domains < 0) {
        domains = sm && sm->sxm ? 1 : 0;
    }
    if (domains > 0 && n % domains != 0) {
        snprintf(err, errlen, "%s: nvlink=%lld does not divide %lld GPUs", where,
                 (long long)domains, (long long)n);
        return CR_EINVAL;
    }
    int first_domain = *next_domain;
    for (int64_t i = 0; i < n; i++) {
        cr_gpu_info *g = &gpus[*count];
        memset(g, 0, sizeof *g);
        g->index = (int)*count;
        g->minor = g->index;
        snprintf(g->model, sizeof g->model, "%s", sm ? sm->name : model);
        snprintf(g->raw_name, sizeof g->raw_name, "%s", sm ? sm->nvml_name : model);
        g->mem_bytes = (uint64_t)mem_gib << 30;
        g->tdp_w = (int)tdp;
        g->nvlink_domain = domains > 0 ? first_domain + (int)(i / (n / domains)) : -1;
        snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "00000000:%02X:00.0",
                 (unsigned)(0x18 + *count * 0x10) & 0xff);
        char seed[256];
        snprintf(seed, sizeof seed, "%s/%d", node, g->index);
        cr_gpu_uuid_from_seed("GPU", seed, g->uuid, sizeof g->uuid);
        if (mig) {
            char copy[256];
            snprintf(copy, sizeof copy, "%s", mig);
            int rc = parse_mig(copy, g, mig_max, where, err, errlen);
            if (rc < 0) {
                return rc;
            }
            for (size_t k = 0; k < g->mig_count; k++) {
                snprintf(seed, sizeof seed, "%s/%d/mig%zu", node, g->index, k);
                cr_gpu_uuid_from_seed("MIG", seed, g->mig[k].uuid, sizeof g->mig[k].uuid);
            }
        }
        (*count)++;
    }
    if (domains > 0) {
        *next_domain += (int)domains;
    }
    return 0;
}

int cr_gpu_sim_parse(const char *text, const char *node, cr_gpu_info *gpus, size_t max,
                     size_t *count, char *err, size_t errlen)
{
    char *copy = cr_strdup(text ? text : "");
    size_t n = 0;
    int next_domain = 0, rc = 0, line = 1;
    int multiline = strchr(copy, '\n') != NULL;
    char *p = copy;
    while (p && *p) {
        size_t l = strcspn(p, ";\n");
        char sep = p[l];
        p[l] = '\0';
        char *hash = strchr(p, '#');
        if (hash) {
            *hash = '\0';
        }
        char *grp = trim(p);
        if (*grp) {
            char where[64];
            if (multiline) {
                snprintf(where, sizeof where, "line %d", line);
            } else {
                snprintf(where, sizeof where, "sim spec");
            }
            rc = parse_group(grp, node, where, gpus, max, &n, &next_domain, err, errlen);
            if (rc < 0) {
                goto out;
            }
        }
        if (sep == '\n') {
            line++;
        }
        p = sep ? p + l + 1 : NULL;
    }
    if (n == 0) {
        snprintf(err, errlen, "sim spec: no GPUs declared (e.g. sim:8xH100 SXM)");
        rc = CR_EINVAL;
        goto out;
    }
    *count = n;
out:
    free(copy);
    return rc;
}

int cr_gpu_faults_parse(const char *text, size_t gpu_count, cr_gpu_fault *faults, char *err,
                        size_t errlen)
{
    for (size_t i = 0; i < gpu_count; i++) {
        faults[i].xid = 0;
        faults[i].ecc = -1;
        faults[i].temp_c = -1;
    }
    char *copy = cr_strdup(text ? text : "");
    int rc = 0, line = 0;
    for (char *l = copy, *next; l; l = next) {
        next = strchr(l, '\n');
        if (next) {
            *next++ = '\0';
        }
        line++;
        char *hash = strchr(l, '#');
        if (hash) {
            *hash = '\0';
        }
        char gpu[32], what[32], val[32], extra[2];
        int k = sscanf(l, "%31s %31s %31s %1s", gpu, what, val, extra);
        if (k <= 0) {
            continue;
        }
        int64_t gi, v;
        if (k != 3) {
            snprintf(err, errlen, "faults line %d: want 'GPU xid|ecc|temp VALUE'", line);
            rc = CR_EPARSE;
            goto out;
        }
        if (cr_parse_i64(gpu, 0, (int64_t)gpu_count - 1, &gi) < 0) {
            snprintf(err, errlen, "faults line %d: GPU '%s' is not 0..%zu", line, gpu,
                     gpu_count - 1);
            rc = CR_EPARSE;
            goto out;
        }
        if (cr_parse_i64(val, 0, INT32_MAX, &v) < 0) {
            snprintf(err, errlen, "faults line %d: value '%s' is not a count", line, val);
            rc = CR_EPARSE;
            goto out;
        }
        if (strcmp(what, "xid") == 0 && v > 0) {
            faults[gi].xid = (int)v;
        } else if (strcmp(what, "ecc") == 0) {
            faults[gi].ecc = v;
        } else if (strcmp(what, "temp") == 0 && v < 1000) {
            faults[gi].temp_c = (int)v;
        } else {
            snprintf(err, errlen, "faults line %d: '%s %s' (want xid 1.., ecc N, temp C)", line,
                     what, val);
            rc = CR_EPARSE;
            goto out;
        }
    }
out:
    free(copy);
    return rc;
}

/* --- the backend ----------------------------------------------------- */

typedef struct sim_state {
    char *faults_path;       /* owned; NULL: no fault injection */
    int64_t faults_mtime_ns; /* last seen mtime, -1 when absent */
    off_t faults_size;       /* last seen size */
    cr_gpu_fault faults[CR_GPU_MAX];
    double temp[CR_GPU_MAX];        /* lagged temperature, C */
    double power_w[CR_GPU_MAX];     /* lagged power */
    double util[CR_GPU_MAX];        /* smoothed utilisation 0..1 */
    int64_t last_ns;                /* time of the previous sample */
    uint64_t xid_count[CR_GPU_MAX]; /* XIDs seen */
    int64_t xid_time[CR_GPU_MAX];   /* time of the last XID */
    int xid_last[CR_GPU_MAX];       /* last XID code */
    const sim_model *model[CR_GPU_MAX];
    double energy_mj[CR_GPU_MAX];  /* integrated board power */
    double nvlink_kib[CR_GPU_MAX]; /* NVLink traffic while busy (NVLink parts only) */
    unsigned mig_made;             /* MIG instances created (new UUIDs) */
    int cap_w[CR_GPU_MAX];         /* power cap in force, W; 0: none (the TDP) */
} sim_state;

static void reload_faults(cr_gpu_backend *b, sim_state *st)
{
    struct stat sb;
    if (!st->faults_path || stat(st->faults_path, &sb) != 0) {
        if (st->faults_mtime_ns != -1) {
            cr_gpu_faults_parse("", b->count, st->faults, NULL, 0);
            st->faults_mtime_ns = -1;
        }
        return;
    }
    int64_t mt = (int64_t)sb.st_mtim.tv_sec * CR_NS_PER_SEC + sb.st_mtim.tv_nsec;
    if (mt == st->faults_mtime_ns && sb.st_size == st->faults_size) {
        return;
    }
    st->faults_mtime_ns = mt;
    st->faults_size = sb.st_size;
    FILE *f = fopen(st->faults_path, "r");
    if (!f) {
        return;
    }
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char err[256];
    cr_gpu_fault nf[CR_GPU_MAX];
    if (cr_gpu_faults_parse(buf, b->count, nf, err, sizeof err) < 0) {
        fprintf(stderr, "corral agent: %s: %s (faults unchanged)\n", st->faults_path, err);
        return;
    }
    memcpy(st->faults, nf, sizeof nf);
}

static int sim_sample(cr_gpu_backend *b, const cr_gpu_load *load, int64_t now_ns,
                      cr_gpu_sample *out)
{
    sim_state *st = b->priv;
    reload_faults(b, st);
    double dt = st->last_ns ? (double)(now_ns - st->last_ns) / 1e9 : 1e9;
    st->last_ns = now_ns;
    /* First-order lag with a 10 s time constant; the first sample settles. */
    double a = dt >= 1e8 ? 1.0 : dt / (dt + 10.0);
    for (size_t i = 0; i < b->count; i++) {
        const cr_gpu_info *g = &b->gpus[i];
        const sim_model *m = st->model[i];
        double busy = load ? load->busy[i] : -1;
        double target = busy < 0 ? 0 : busy > 1 ? 1 : busy;
        double ua = dt >= 1e8 ? 1.0 : dt / (dt + 2.0);
        st->util[i] += (target - st->util[i]) * ua;
        double u = st->util[i];
        double idle_w = g->tdp_w * 0.12;
        st->temp[i] += (32 + 45 * u - st->temp[i]) * a;
        /* Under a power cap the board holds its power at the cap by
         * lowering its clock: power ~ clock, to first order. */
        double want_w = idle_w + (g->tdp_w * 0.9 - idle_w) * u;
        double cap = st->cap_w[i] > 0 ? (double)st->cap_w[i] : 1e9;
        double clock_f = want_w > cap ? cap / want_w : 1.0;
        st->power_w[i] += ((want_w < cap ? want_w : cap) - st->power_w[i]) * a;
        if (st->power_w[i] > cap) {
            st->power_w[i] = cap; /* the limit is enforced at once, not lagged */
        }
        cr_gpu_sample *s = &out[i];
        memset(s, 0, sizeof *s);
        s->util_pct = (int)(u * 100 + 0.5);
        s->mem_used_bytes = busy < 0 ? 0 : (uint64_t)((double)g->mem_bytes * (0.15 + 0.75 * u));
        s->temp_c = (int)(st->temp[i] + 0.5);
        s->power_mw = (int64_t)(st->power_w[i] * 1000);
        int base = m ? m->base_mhz : 1200, boost = m ? m->boost_mhz : 1700;
        s->sm_clock_mhz = busy < 0 ? 210 : (int)((base + (boost - base) * u) * clock_f);
        const cr_gpu_fault *f = &st->faults[i];
        if (f->temp_c >= 0) {
            s->temp_c = f->temp_c;
        }
        s->ecc_uncorrected = f->ecc > 0 ? (uint64_t)f->ecc : 0;
        if (f->xid > 0) {
            if (st->xid_last[i] != f->xid || st->xid_time[i] == 0) {
                st->xid_count[i]++;
            }
            st->xid_last[i] = f->xid;
            st->xid_time[i] = now_ns; /* the fault persists while its line does */
        }
        s->xid_last = st->xid_last[i];
        s->xid_count = st->xid_count[i];
        s->xid_time_ns = st->xid_time[i];
        /* The rest of dcgm-exporter's default fields, plausibly: HBM parts
         * report a memory temperature, NVLink parts move data while busy. */
        double step = dt >= 1e8 ? 0 : dt;
        st->energy_mj[i] += st->power_w[i] * 1000.0 * step;
        s->have = CR_GPU_HAVE_MEM_CLOCK | CR_GPU_HAVE_MEM_TEMP | CR_GPU_HAVE_ENERGY |
                  CR_GPU_HAVE_PCIE_REPLAY | CR_GPU_HAVE_ENC_DEC | CR_GPU_HAVE_MEM_COPY |
                  CR_GPU_HAVE_REMAP;
        s->mem_clock_mhz = m && m->sxm ? 2619 : 1593;
        s->mem_temp_c = s->temp_c + 4;
        s->energy_mj = (uint64_t)st->energy_mj[i];
        s->mem_copy_util_pct = (int)(u * 60 + 0.5);
        if (g->nvlink_domain >= 0) {
            st->nvlink_kib[i] += u * 50e6 * step; /* ~50 GB/s at full use */
            s->nvlink_kib = (uint64_t)st->nvlink_kib[i];
            s->have |= CR_GPU_HAVE_NVLINK;
        }
    }
    return 0;
}

static void sim_destroy(cr_gpu_backend *b)
{
    sim_state *st = b->priv;
    if (st) {
        free(st->faults_path);
        free(st);
    }
    free(b);
}

/* Dynamic MIG in the sim: the inventory changes after a modelled delay
 * (CR_SIM_MIG_DESTROY_MS, CR_SIM_MIG_CREATE_MS: the NVML calls are
 * synchronous and the agent's loop waits for them the same way). */
static void sim_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static int sim_mig_destroy(cr_gpu_backend *b, size_t gi, const cr_mig_inst *m, char *err,
                           size_t errlen)
{
    (void)b;
    (void)gi;
    (void)m;
    (void)err;
    (void)errlen;
    sim_sleep_ms(CR_SIM_MIG_DESTROY_MS);
    return 0;
}

static int sim_mig_create(cr_gpu_backend *b, size_t gi, const cr_mig_want *w, cr_mig_inst *out,
                          char *err, size_t errlen)
{
    sim_state *st = b->priv;
    const cr_gpu_info *g = &b->gpus[gi];
    char name[64], seed[160];
    snprintf(name, sizeof name, "x MIG %s", w->profile);
    if (cr_gpu_mig_profile_from_name(name, out->profile, sizeof out->profile, &out->slices) < 0 ||
        out->slices != w->slices) {
        snprintf(err, errlen, "GPU %d: '%s' is not a %dg profile", g->index, w->profile, w->slices);
        return CR_EINVAL;
    }
    sim_sleep_ms(CR_SIM_MIG_CREATE_MS);
    out->mem_slices = w->mem_slices;
    out->start = w->start;
    const char *dot = strchr(out->profile, '.');
    out->mem_bytes = dot ? (uint64_t)(strtod(dot + 1, NULL) * 1e9) : 0;
    int gi_max = 0;
    for (size_t k = 0; k < g->mig_count; k++) {
        gi_max = g->mig[k].gi_id > gi_max ? g->mig[k].gi_id : gi_max;
    }
    out->gi_id = gi_max + 1;
    snprintf(seed, sizeof seed, "%d/made%u/%s", g->index, ++st->mig_made, g->uuid);
    cr_gpu_uuid_from_seed("MIG", seed, out->uuid, sizeof out->uuid);
    return 0;
}

/* A board takes limits from about a third of its TDP up to the TDP. */
static int sim_set_power_cap(cr_gpu_backend *b, size_t gi, int cap_w, int *applied_w, char *err,
                             size_t errlen)
{
    sim_state *st = b->priv;
    const cr_gpu_info *g = &b->gpus[gi];
    int lo = g->tdp_w / 3 > 1 ? g->tdp_w / 3 : 1;
    int w = cap_w <= 0 ? 0 : cap_w < lo ? lo : cap_w > g->tdp_w ? g->tdp_w : cap_w;
    st->cap_w[gi] = w;
    *applied_w = w ? w : g->tdp_w;
    (void)err;
    (void)errlen;
    return 0;
}

static const cr_gpu_ops sim_ops = {"sim",           sim_sample,     sim_destroy,
                                   sim_mig_destroy, sim_mig_create, sim_set_power_cap};

static int read_small_file(const char *path, char **out, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "sim spec file %s: %s", path, strerror(errno));
        return CR_EIO;
    }
    char *buf = cr_malloc(65536);
    size_t n = fread(buf, 1, 65535, f);
    int big = !feof(f);
    fclose(f);
    if (big) {
        free(buf);
        snprintf(err, errlen, "sim spec file %s: over 64 KiB", path);
        return CR_ETOOBIG;
    }
    buf[n] = '\0';
    *out = buf;
    return 0;
}

int cr_gpu_sim_open(const char *spec, const char *node, const char *faults_path,
                    cr_gpu_backend **out, char *err, size_t errlen)
{
    char *text = NULL;
    int rc;
    /* A spec with a '/' or ending in .conf names a file. */
    size_t l = strlen(spec);
    if (strchr(spec, '/') || (l > 5 && strcmp(spec + l - 5, ".conf") == 0)) {
        rc = read_small_file(spec, &text, err, errlen);
        if (rc < 0) {
            return rc;
        }
    } else {
        text = cr_strdup(spec);
    }
    cr_gpu_backend *b = cr_calloc(1, sizeof *b);
    sim_state *st = cr_calloc(1, sizeof *st);
    b->ops = &sim_ops;
    b->priv = st;
    rc = cr_gpu_sim_parse(text, node, b->gpus, CR_GPU_MAX, &b->count, err, errlen);
    free(text);
    if (rc < 0) {
        sim_destroy(b);
        return rc;
    }
    st->faults_path = cr_strdup(faults_path);
    st->faults_mtime_ns = -2; /* force the first read */
    cr_gpu_faults_parse("", b->count, st->faults, NULL, 0);
    for (size_t i = 0; i < b->count; i++) {
        st->model[i] = find_model(b->gpus[i].model);
        st->temp[i] = 32;
        st->power_w[i] = b->gpus[i].tdp_w * 0.12;
    }
    *out = b;
    return 0;
}
