/*
 * gpufacts.c - the table of GPU families (cr_gpufacts.h).
 */
#include "cr_gpufacts.h"

#include <string.h>
#include <strings.h>

/* Geometry 7/8: 1g on one memory slice at 0..6, 1g on two slices at
 * 0,2,4,6, 2g at 0,2,4, 3g at 0,4, 4g at 0, 7g at 0. Geometry 4/4: 1g at
 * 0..3, 2g at 0,2, 4g at 0. */
static const cr_mig_shape shapes_7_8[] = {{1, 1, 0x7f}, {1, 2, 0x55}, {2, 2, 0x15},
                                          {3, 4, 0x11}, {4, 4, 0x01}, {7, 8, 0x01}};
static const cr_mig_shape shapes_4_4[] = {{1, 1, 0x0f}, {2, 2, 0x05}, {4, 4, 0x01}};

const cr_mig_geom cr_mig_geom_7_8 = {7, 8, shapes_7_8, sizeof shapes_7_8 / sizeof shapes_7_8[0]};
const cr_mig_geom cr_mig_geom_4_4 = {4, 4, shapes_4_4, sizeof shapes_4_4 / sizeof shapes_4_4[0]};

/* Searched in order, first match wins, for both lookups: a name that
 * another one begins with comes after it ("L40" after "L40S", "A10" after
 * "A100"; before, an A100 took the A10's 150 W as its default power in the
 * sim). K80's power is per GK210 GPU, half the board. */
static const cr_gpu_fact facts[] = {
    {"K80", NULL, 150},
    {"P100", NULL, 250},
    {"V100", NULL, 300},
    {"T4", NULL, 70},
    {"A100", &cr_mig_geom_7_8, 400},
    {"A10", NULL, 150},
    {"A30", &cr_mig_geom_4_4, 165},
    {"A40", NULL, 300},
    {"L40S", NULL, 350},
    {"L40", NULL, 300},
    {"L4", NULL, 72},
    {"H100", &cr_mig_geom_7_8, 700},
    {"H200", &cr_mig_geom_7_8, 700},
    {"B200", &cr_mig_geom_7_8, 1000},
    {"GH200", &cr_mig_geom_7_8, 0},
};

const cr_mig_geom *cr_gpufacts_mig(const char *model)
{
    for (size_t i = 0; model && i < sizeof facts / sizeof facts[0]; i++) {
        if (facts[i].mig && strstr(model, facts[i].name)) {
            return facts[i].mig;
        }
    }
    return NULL;
}

const cr_mig_geom *cr_gpufacts_mig_geom(int compute_slices, int mem_slices)
{
    static const cr_mig_geom *const all[] = {&cr_mig_geom_7_8, &cr_mig_geom_4_4};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (all[i]->compute_slices == compute_slices && all[i]->mem_slices == mem_slices) {
            return all[i];
        }
    }
    return NULL;
}

double cr_gpufacts_tdp_w(const char *type)
{
    for (size_t i = 0; type && i < sizeof facts / sizeof facts[0]; i++) {
        if (facts[i].tdp_w > 0 && strncasecmp(type, facts[i].name, strlen(facts[i].name)) == 0) {
            return facts[i].tdp_w;
        }
    }
    return 0;
}
