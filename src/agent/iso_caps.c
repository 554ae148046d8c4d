/*
 * iso_caps.c - the device numbers a job's GPUs stand for: /dev/nvidia<minor>
 * by NVML's minor number (not the index), and the MIG capability nodes
 * /dev/nvidia-caps/nvidia-cap<N> of the job's own GPU instance and compute
 * instance (docs/isolation.md).
 *
 * The driver lists its capabilities in /proc/driver/nvidia-caps/mig-minors,
 * one "NAME MINOR" a line (NVIDIA's MIG user guide, "Device Nodes and
 * Capabilities"):
 *
 *   config 1                 create/destroy instances (never for a job)
 *   monitor 2                every instance's use (never for a job)
 *   gpu0/gi2/access 21       GPU instance 2 of the GPU of minor 0
 *   gpu0/gi2/ci0/access 22   compute instance 0 of it
 *
 * The nodes are character devices of the "nvidia-caps" major in
 * /proc/devices. A MIG job may open the gi and ci access nodes of its own
 * instance(s) and nothing else of that major; whole-GPU jobs none.
 */
#include "cr_iso.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAPS_FILE_MAX (4u << 20) /* bytes of mig-minors read (about 5,000 lines in practice) */

static int fail_line(char *err, size_t errlen, size_t line, const char *why)
{
    snprintf(err, errlen, "mig-minors line %zu: %s", line, why);
    return CR_EPARSE;
}

int cr_iso_mig_minors_parse(const char *text, size_t len, cr_iso_cap **out, size_t *n, char *err,
                            size_t errlen)
{
    cr_iso_cap *v = NULL;
    size_t nv = 0, cap = 0, line = 0;
    int rc = 0;
    *out = NULL;
    *n = 0;
    for (size_t pos = 0; pos < len;) {
        const char *eol = memchr(text + pos, '\n', len - pos);
        size_t l = eol ? (size_t)(eol - (text + pos)) : len - pos;
        char buf[160];
        line++;
        if (l >= sizeof buf) {
            rc = fail_line(err, errlen, line, "longer than 159 bytes");
            goto out;
        }
        memcpy(buf, text + pos, l);
        buf[l] = '\0';
        pos += l + (eol ? 1 : 0);
        if (buf[0] == '\0') {
            continue;
        }
        if (nv == CR_ISO_CAPS_MAX) {
            rc = fail_line(err, errlen, line, "more than CR_ISO_CAPS_MAX entries");
            goto out;
        }
        char name[128], extra[8];
        unsigned int minor;
        if (sscanf(buf, "%127s %u %7s", name, &minor, extra) != 2 || minor > 1048575) {
            rc = fail_line(err, errlen, line, "want 'NAME MINOR' (MINOR a device minor number)");
            goto out;
        }
        cr_iso_cap c = {.kind = -1, .gpu = -1, .gi = -1, .ci = -1, .minor = (int)minor};
        unsigned int g, gi, ci;
        char tail[16];
        int used = 0;
        if (strcmp(name, "config") == 0) {
            c.kind = CR_ISO_CAP_CONFIG;
        } else if (strcmp(name, "monitor") == 0) {
            c.kind = CR_ISO_CAP_MONITOR;
        } else if (sscanf(name, "gpu%u/gi%u/ci%u/%15[a-z]%n", &g, &gi, &ci, tail, &used) == 4 &&
                   name[used] == '\0' && strcmp(tail, "access") == 0) {
            c.kind = CR_ISO_CAP_CI;
            c.gpu = (int)g;
            c.gi = (int)gi;
            c.ci = (int)ci;
        } else if (sscanf(name, "gpu%u/gi%u/%15[a-z]%n", &g, &gi, tail, &used) == 3 &&
                   name[used] == '\0' && strcmp(tail, "access") == 0) {
            c.kind = CR_ISO_CAP_GI;
            c.gpu = (int)g;
            c.gi = (int)gi;
        } else {
            continue; /* a capability of a newer driver: never granted */
        }
        if (c.gpu > 255 || c.gi > 255 || c.ci > 255) {
            rc = fail_line(err, errlen, line, "gpu, gi or ci number over 255");
            goto out;
        }
        CR_GROW(v, nv, cap);
        v[nv++] = c;
    }
out:
    if (rc != 0) {
        free(v);
        return rc;
    }
    *out = v;
    *n = nv;
    return 0;
}

int cr_iso_mig_minors_load(const char *path, cr_iso_cap **out, size_t *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return errno == ENOENT ? CR_ENOENT : CR_EIO;
    }
    char *buf = cr_malloc(CAPS_FILE_MAX + 1);
    size_t len = fread(buf, 1, CAPS_FILE_MAX, f);
    int more = fgetc(f) != EOF;
    fclose(f);
    int rc = 0;
    if (more) {
        snprintf(err, errlen, "%s: over %u bytes", path, CAPS_FILE_MAX);
        rc = CR_ETOOBIG;
    } else {
        char e[200];
        rc = cr_iso_mig_minors_parse(buf, len, out, n, e, sizeof e);
        if (rc != 0) {
            snprintf(err, errlen, "%s: %s", path, e);
        }
    }
    free(buf);
    return rc;
}

int cr_iso_cap_minor(const cr_iso_cap *caps, size_t n, int kind, int gpu, int gi, int ci)
{
    for (size_t i = 0; i < n; i++) {
        if (caps[i].kind == kind && caps[i].gpu == gpu && caps[i].gi == gi &&
            (kind != CR_ISO_CAP_CI || caps[i].ci == ci)) {
            return caps[i].minor;
        }
    }
    return -1;
}

/* The major a /proc/devices-style file gives name; -1 when absent. */
static int major_of(const char *path, const char *name)
{
    FILE *f = fopen(path, "r");
    char line[128];
    int found = -1;
    while (f && fgets(line, sizeof line, f)) {
        int maj;
        char nm[64];
        if (sscanf(line, "%d %63s", &maj, nm) == 2 && strcmp(nm, name) == 0) {
            found = maj;
        }
    }
    if (f) {
        fclose(f);
    }
    return found;
}

void cr_iso_set_gpus(cr_iso *iso, const cr_gpu_info *gpus, size_t n, const char *mig_minors,
                     const char *proc_devices)
{
    free(iso->caps);
    free(iso->migs);
    iso->caps = NULL;
    iso->migs = NULL;
    iso->ncaps = iso->nmigs = 0;
    iso->caps_major = -1;
    iso->ngpu_minor = n > CR_GPU_MAX ? CR_GPU_MAX : n;
    size_t nmig = 0;
    for (size_t i = 0; i < iso->ngpu_minor; i++) {
        iso->gpu_minor[i] = gpus[i].minor;
        nmig += gpus[i].mig_count;
    }
    if (!nmig) {
        return; /* no MIG here: no capability node is ever allowed */
    }
    iso->migs = cr_calloc(nmig, sizeof *iso->migs);
    for (size_t i = 0; i < iso->ngpu_minor; i++) {
        for (size_t k = 0; k < gpus[i].mig_count && k < CR_GPU_MAX_MIG; k++) {
            cr_iso_mig *m = &iso->migs[iso->nmigs++];
            snprintf(m->uuid, sizeof m->uuid, "%s", gpus[i].mig[k].uuid);
            m->gpu_minor = gpus[i].minor;
            m->gi = gpus[i].mig[k].gi_id;
            m->ci = gpus[i].mig[k].ci_id;
        }
    }
    char err[300];
    iso->caps_major = major_of(proc_devices ? proc_devices : "/proc/devices", "nvidia-caps");
    const char *path = mig_minors ? mig_minors : "/proc/driver/nvidia-caps/mig-minors";
    if (cr_iso_mig_minors_load(path, &iso->caps, &iso->ncaps, err, sizeof err) != 0) {
        cr_warn("agent: MIG capability nodes: %s: MIG jobs get no /dev/nvidia-caps access", err);
    } else if (iso->caps_major < 0) {
        cr_warn("agent: MIG capability nodes: no nvidia-caps major in /proc/devices: MIG jobs "
                "get no /dev/nvidia-caps access");
    } else {
        cr_info("agent: MIG capability nodes: %zu entries, major %d: each MIG job gets its own "
                "instance's",
                iso->ncaps, iso->caps_major);
    }
}

size_t cr_iso_gpu_rules(const cr_iso *iso, const cr_job_spec *s, int *major, int *minor, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < s->gpu_count && n < max; i++) {
        int g = s->gpus[i];
        major[n] = CR_NVIDIA_MAJOR;
        minor[n++] = iso && g >= 0 && (size_t)g < iso->ngpu_minor ? iso->gpu_minor[g] : g;
    }
    if (!iso || !s->mig_profile || iso->caps_major < 0) {
        return n;
    }
    for (size_t u = 0; u < s->uuid_count; u++) {
        for (size_t k = 0; k < iso->nmigs; k++) {
            const cr_iso_mig *m = &iso->migs[k];
            if (strcmp(m->uuid, s->gpu_uuids[u]) != 0) {
                continue;
            }
            int gi =
                cr_iso_cap_minor(iso->caps, iso->ncaps, CR_ISO_CAP_GI, m->gpu_minor, m->gi, -1);
            int ci =
                cr_iso_cap_minor(iso->caps, iso->ncaps, CR_ISO_CAP_CI, m->gpu_minor, m->gi, m->ci);
            if (gi >= 0 && n < max) {
                major[n] = iso->caps_major;
                minor[n++] = gi;
            }
            if (ci >= 0 && n < max) {
                major[n] = iso->caps_major;
                minor[n++] = ci;
            }
        }
    }
    return n;
}
