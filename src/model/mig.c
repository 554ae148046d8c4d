#include "cr_mig.h"

#include "cr_error.h"
#include "cr_gpufacts.h"
#include "model_int.h"

#include <stdbool.h>
#include <string.h>

/*
 * The tables below transcribe data/gpus/NOTES.md section 1. Memory is the
 * usable size nvidia-smi (or NVIDIA's go-nvml mock) reports; sizes marked
 * "derived" there are two half-GPU profiles added up. GI profile ids are
 * -1 where no source gave them (A30). Placements use the real H100 / A100
 * geometry: start indices count memory slices.
 */
#define MiB(x) ((uint64_t)((x)*1048576.0))
#define GiB(x) ((uint64_t)((x)*1073741824.0))

/* Start masks over memory slices. */
#define P_ALL7  0x7Fu /* {0..6} */
#define P_EVEN4 0x55u /* {0,2,4,6} */
#define P_EVEN3 0x15u /* {0,2,4} */
#define P_HALF  0x11u /* {0,4} */
#define P_ZERO  0x01u /* {0} */

/* The standard 7/8 family: names, ids, slices, counts, placements; memory
 * and SMs vary by model. */
#define FAMILY_7_8(n1, n1b, n2, n3, n4, n7, m1, m2, m3, m7, s1, s1b, s2, s3, s4, s7)               \
    {n1, 19, 1, 1, 0, 7, m1, s1, P_ALL7}, {n1 "+me", 20, 1, 1, 1, 1, m1, s1, P_ALL7},              \
        {n1b, 15, 1, 2, 0, 4, m2, s1b, P_EVEN4}, {n2, 14, 2, 2, 0, 3, m2, s2, P_EVEN3},            \
        {n3, 9, 3, 4, 0, 2, m3, s3, P_HALF}, {n4, 5, 4, 4, 0, 1, m3, s4, P_ZERO},                  \
    {                                                                                              \
        n7, 0, 7, 8, 0, 1, m7, s7, P_ZERO                                                          \
    }

static const cr_mig_profile a100_80[] = {
    FAMILY_7_8("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", MiB(9856),
               MiB(19968), MiB(40192), MiB(80384), 14, 14, 28, 42, 56, 98)};

/* A100 40GB: the 1/1 profile is 1g.5gb; 1g.10gb is the 1/2 profile. */
static const cr_mig_profile a100_40[] = {
    FAMILY_7_8("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb", MiB(4864),
               MiB(9856), MiB(19968), MiB(40192), 14, 14, 28, 42, 56, 98)};

/* SM counts from the H100 PCIe capture (114 SMs); H100 SXM has 132. */
static const cr_mig_profile h100_80[] = {
    FAMILY_7_8("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", GiB(9.62),
               GiB(19.50), GiB(39.25), GiB(79.00), 14, 14, 30, 46, 62, 114)};

static const cr_mig_profile h100_94[] = {FAMILY_7_8("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb",
                                                    "4g.47gb", "7g.94gb", GiB(10.75), GiB(21.62),
                                                    GiB(46.38), GiB(92.75), 16, 26, 32, 0, 0, 0)};

static const cr_mig_profile h200[] = {FAMILY_7_8("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb",
                                                 "4g.71gb", "7g.141gb", GiB(16.00), GiB(32.25),
                                                 GiB(69.50), GiB(139.75), 16, 26, 32, 60, 64, 132)};

static const cr_mig_profile b200[] = {FAMILY_7_8("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb",
                                                 "4g.90gb", "7g.180gb", GiB(20.50), GiB(44.25),
                                                 GiB(88.50), GiB(177.00), 18, 30, 36, 0, 0, 0)};

static const cr_mig_profile gb200[] = {FAMILY_7_8("1g.23gb", "1g.47gb", "2g.47gb", "3g.93gb",
                                                  "4g.93gb", "7g.186gb", GiB(20.50), GiB(45.50),
                                                  GiB(91.00), GiB(182.00), 0, 32, 38, 0, 0, 0)};

/* A30: 4 compute / 4 memory slices (MIG guide table; go-nvml placements). */
static const cr_mig_profile a30[] = {
    {"1g.6gb", -1, 1, 1, 0, 4, MiB(5836), 14, 0x0Fu},
    {"1g.6gb+me", -1, 1, 1, 1, 1, MiB(5836), 14, 0x0Fu},
    {"2g.12gb", -1, 2, 2, 0, 2, MiB(11672), 28, 0x05u},
    {"2g.12gb+me", -1, 2, 2, 1, 1, MiB(11672), 28, 0x05u},
    {"4g.24gb", -1, 4, 4, 0, 1, MiB(23344), 56, P_ZERO},
};

typedef struct family {
    const char *const *names; /* normalised model names and aliases */
    const cr_mig_profile *profiles;
    size_t count;
    const cr_mig_geom *geom; /* slice totals (cr_gpufacts.h) */
} family;

static const char *const n_a100_80[] = {"a10080gbsxm", "a100", "a10080gbpcie", "a100pcie", NULL};
static const char *const n_a100_40[] = {"a10040gbsxm", "a10040gb", "a10040gbpcie", NULL};
static const char *const n_h100_80[] = {"h100sxm", "h100", "h100pcie", NULL};
static const char *const n_h100_94[] = {"h100nvl", NULL};
static const char *const n_h200[] = {"h200sxm", "h200", "h200nvl", NULL};
static const char *const n_b200[] = {"b200", NULL};
static const char *const n_gb200[] = {"gb200nvl72", "gb200", NULL};
static const char *const n_a30[] = {"a30", NULL};

#define FAM(n, t, g)                                                                               \
    {                                                                                              \
        n, t, sizeof(t) / sizeof((t)[0]), &(g)                                                     \
    }
static const family families[] = {
    FAM(n_a100_80, a100_80, cr_mig_geom_7_8), FAM(n_a100_40, a100_40, cr_mig_geom_7_8),
    FAM(n_h100_80, h100_80, cr_mig_geom_7_8), FAM(n_h100_94, h100_94, cr_mig_geom_7_8),
    FAM(n_h200, h200, cr_mig_geom_7_8),       FAM(n_b200, b200, cr_mig_geom_7_8),
    FAM(n_gb200, gb200, cr_mig_geom_7_8),     FAM(n_a30, a30, cr_mig_geom_4_4),
};

static const family *find_family(const char *model)
{
    char key[96];
    if (!model) {
        return NULL;
    }
    cr__model_norm(model, key, sizeof key);
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        for (const char *const *n = families[f].names; *n; n++) {
            if (!strcmp(*n, key)) {
                return &families[f];
            }
        }
    }
    return NULL;
}

int cr_mig_geometry(const char *model, int *compute_slices, int *mem_slices)
{
    const family *f = find_family(model);
    if (!f) {
        return CR_ENOENT;
    }
    *compute_slices = f->geom->compute_slices;
    *mem_slices = f->geom->mem_slices;
    return 0;
}

const cr_mig_profile *cr_mig_profiles(const char *model, size_t *count)
{
    const family *f = find_family(model);
    *count = f ? f->count : 0;
    return f ? f->profiles : NULL;
}

const cr_mig_profile *cr_mig_lookup(const char *model, int compute_slices, int mem_slices)
{
    const family *f = find_family(model);
    for (size_t i = 0; f && i < f->count; i++) {
        const cr_mig_profile *p = &f->profiles[i];
        if (!p->media_ext && p->compute_slices == compute_slices && p->mem_slices == mem_slices) {
            return p;
        }
    }
    return NULL;
}

const cr_mig_profile *cr_mig_find(const char *model, const char *name)
{
    const family *f = find_family(model);
    for (size_t i = 0; f && name && i < f->count; i++) {
        if (!strcmp(f->profiles[i].name, name)) {
            return &f->profiles[i];
        }
    }
    return NULL;
}

int cr_mig_known(const char *name)
{
    for (size_t f = 0; name && f < sizeof families / sizeof families[0]; f++) {
        for (size_t i = 0; i < families[f].count; i++) {
            if (!strcmp(families[f].profiles[i].name, name)) {
                return 1;
            }
        }
    }
    return 0;
}

/* 1 if the name appears in a family before (f, i): listed there. */
static int listed_before(size_t f, size_t i)
{
    const char *name = families[f].profiles[i].name;
    for (size_t g = 0; g <= f; g++) {
        for (size_t k = 0; k < (g == f ? i : families[g].count); k++) {
            if (!strcmp(families[g].profiles[k].name, name)) {
                return 1;
            }
        }
    }
    return 0;
}

size_t cr_mig_names(char *buf, size_t len)
{
    size_t need = 0;
    bool full = len == 0;
    if (len) {
        buf[0] = '\0';
    }
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        for (size_t i = 0; i < families[f].count; i++) {
            if (listed_before(f, i)) {
                continue;
            }
            const char *name = families[f].profiles[i].name;
            size_t add = strlen(name) + (need ? 2 : 0);
            full = full || need + add >= len;
            if (!full) {
                if (need) {
                    memcpy(buf + need, ", ", 2);
                }
                memcpy(buf + need + (need ? 2 : 0), name, strlen(name) + 1);
            }
            need += add;
        }
    }
    return need;
}

const cr_mig_profile *cr_mig_smallest_fit(const char *model, uint64_t mem_bytes, int compute_slices)
{
    const family *f = find_family(model);
    const cr_mig_profile *best = NULL;
    for (size_t i = 0; f && i < f->count; i++) {
        const cr_mig_profile *p = &f->profiles[i];
        if (p->media_ext || p->mem_bytes < mem_bytes || p->compute_slices < compute_slices) {
            continue;
        }
        if (!best || p->mem_slices < best->mem_slices ||
            (p->mem_slices == best->mem_slices && p->compute_slices < best->compute_slices)) {
            best = p;
        }
    }
    return best;
}

int cr_mig_placement_ok(const cr_mig_profile *p, int start)
{
    return p && start >= 0 && start < 32 && ((p->placement_mask >> start) & 1u);
}
