/*
 * cr_mig.h - MIG (Multi-Instance GPU) profiles, compiled in from
 * data/gpus/NOTES.md section 1 (NVIDIA MIG user guide, mig-parted,
 * real nvidia-smi captures).
 *
 * A profile is keyed on (GPU model, compute slices, memory slices), never on
 * its name: "1g.10gb" is the 1/1 profile on an A100 80GB but the 1/2 profile
 * on an A100 40GB. A GPU has a fixed slice geometry (7 compute / 8 memory on
 * A100, H100, H200, B200, GB200; 4 / 4 on A30). Placements count memory
 * slices: a profile of size s may start at slice i when bit i of
 * placement_mask is set, and then occupies slices i .. i+s-1. Tables are
 * constant; every function is thread-safe. The "+me" (media extension)
 * variants are listed with media_ext = 1.
 */
#ifndef CR_MIG_H
#define CR_MIG_H

#include <stddef.h>
#include <stdint.h>

typedef struct cr_mig_profile {
    const char *name;        /* profile name on this model, e.g. "3g.40gb" */
    int gi_profile_id;       /* nvidia-smi GPU instance profile id (19, 15, 14, 9, 5, 0...) */
    int compute_slices;      /* the "Ng" part */
    int mem_slices;          /* memory slices (of mem_slices_total) */
    int media_ext;           /* 1 for the "+me" variant (NVDEC/JPEG/OFA attached) */
    int max_instances;       /* most instances of this profile on one GPU */
    uint64_t mem_bytes;      /* usable memory, bytes (as nvidia-smi reports) */
    int sms;                 /* streaming multiprocessors; 0 if not sourced */
    uint32_t placement_mask; /* bit i set: may start at memory slice i */
} cr_mig_profile;

/* Slice geometry of a model: returns 0 and sets compute/memory slice
 * totals, or CR_ENOENT when the model has no MIG support. model is a
 * catalog canonical name or alias ("A100 80GB SXM", "a100", "h100"). */
int cr_mig_geometry(const char *model, int *compute_slices, int *mem_slices);

/* All profiles of a model, smallest first; *count set; NULL (count 0) if none.
 * The array is static. */
const cr_mig_profile *cr_mig_profiles(const char *model, size_t *count);

/* The profile with exactly these slices (media_ext = 0 variant), or NULL. */
const cr_mig_profile *cr_mig_lookup(const char *model, int compute_slices, int mem_slices);

/* By name on this model ("1g.10gb", "1g.10gb+me"), or NULL. */
const cr_mig_profile *cr_mig_find(const char *model, const char *name);

/* The smallest profile (fewest memory slices, then fewest compute slices,
 * no "+me") with at least mem_bytes usable and compute_slices compute
 * slices; NULL if none. */
const cr_mig_profile *cr_mig_smallest_fit(const char *model, uint64_t mem_bytes,
                                          int compute_slices);

/* 1 if some model of the tables has a profile of this name, else 0. */
int cr_mig_known(const char *name);

/* Every profile name of the tables, each once, ", "-separated into buf
 * (cut at len - 1 bytes, always terminated). Returns the length the whole
 * list needs. */
size_t cr_mig_names(char *buf, size_t len);

/* 1 if p may be placed starting at memory slice start on its model. */
int cr_mig_placement_ok(const cr_mig_profile *p, int start);

#endif
