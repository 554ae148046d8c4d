/*
 * cr_gpufacts.h - the facts about GPU families that more than one layer
 * needs, in one table: MIG slice geometry (and the standard instance
 * shapes of each geometry) and board power. The controller (what the
 * scheduler models of a MIG GPU), the agent (the dynamic MIG plan), the
 * scheduler (a MIG GPU type's standard profiles), the MIG profile tables
 * (cr_mig.h) and the simulator (power when no catalog file is there) all
 * read them here, so a new GPU family is one row.
 *
 * Sources: the NVIDIA MIG user guide (data/gpus/NOTES.md section 1) and
 * vendor datasheets (data/gpus/catalog.csv, whose TDP column the
 * simulator prefers when the file is there). The table is constant; every
 * function is pure and thread-safe.
 */
#ifndef CR_GPUFACTS_H
#define CR_GPUFACTS_H

#include <stddef.h>
#include <stdint.h>

/* One standard instance shape: compute and memory slices, and where it
 * may start (bit i set: at memory slice i). */
typedef struct cr_mig_shape {
    int compute_slices;
    int mem_slices;
    uint32_t placement_mask;
} cr_mig_shape;

/* A MIG slice geometry and its standard shapes, smallest first. */
typedef struct cr_mig_geom {
    int compute_slices;         /* compute slices of the whole GPU */
    int mem_slices;             /* memory slices of the whole GPU */
    const cr_mig_shape *shapes; /* static */
    size_t nshapes;             /* entries in shapes */
} cr_mig_geom;

/* The geometries there are: 7 compute / 8 memory slices (A100, H100,
 * H200, B200, GB200) and 4 / 4 (A30). */
extern const cr_mig_geom cr_mig_geom_7_8;
extern const cr_mig_geom cr_mig_geom_4_4;

/* One GPU family. */
typedef struct cr_gpu_fact {
    const char *name;       /* as it stands in model names ("A100", "H200") */
    const cr_mig_geom *mig; /* NULL: no MIG */
    double tdp_w;           /* board power in watts; 0: not given */
} cr_gpu_fact;

/* The MIG geometry of a model name as the hardware reports it
 * ("NVIDIA A100-SXM4-80GB", "H100 SXM"): the first family with MIG whose
 * name is a substring of model (case-sensitive), or NULL. */
const cr_mig_geom *cr_gpufacts_mig(const char *model);

/* The geometry of these totals, or NULL. */
const cr_mig_geom *cr_gpufacts_mig_geom(int compute_slices, int mem_slices);

/* Board power of a GPU type name: the first family with a power whose
 * name is a prefix of type, ignoring case ("a100-80gb"); 0 when none is. */
double cr_gpufacts_tdp_w(const char *type);

#endif
