/*
 * gpu_mig.c - dynamic MIG: a GPU's instance layout changed to the one the
 * controller asks for (docs/agent.md, "Dynamic MIG").
 *
 * cr_gpu_mig_plan is pure: the GPU's instances, which of them a job holds,
 * and the wanted layout in; what to destroy and what to create out, or a
 * refusal. A wanted instance that names a UUID keeps that instance; every
 * instance not named is destroyed, and one a job holds is never destroyed:
 * the whole layout is refused instead (nothing is touched). The backend
 * does the rest (gpu_nvml.c: the NVML GPU/compute instance calls; gpu_sim.c:
 * the inventory, with a modelled delay per instance).
 */
#include "cr_gpu.h"

#include "cr_error.h"
#include "cr_gpufacts.h"

#include <stdio.h>
#include <string.h>

int cr_gpu_mig_geometry(const char *model, int *compute, int *mem)
{
    const cr_mig_geom *g = cr_gpufacts_mig(model);
    *compute = g ? g->compute_slices : 0;
    *mem = g ? g->mem_slices : 0;
    return g != NULL;
}

int cr_gpu_mig_plan(const cr_gpu_info *g, const int *busy, const cr_mig_want *want, size_t n,
                    cr_mig_plan *plan, char *err, size_t errlen)
{
    memset(plan, 0, sizeof *plan);
    int tc, tm;
    if (!g->mig_enabled || !cr_gpu_mig_geometry(g->model, &tc, &tm)) {
        snprintf(err, errlen, "GPU %d (%s) is not a MIG GPU", g->index, g->model);
        return CR_ENOTSUP;
    }
    if (n > CR_GPU_MAX_MIG) {
        snprintf(err, errlen, "GPU %d: %zu instances wanted, at most %d", g->index, n,
                 CR_GPU_MAX_MIG);
        return CR_ERANGE;
    }
    int kept[CR_GPU_MAX_MIG] = {0};
    unsigned used = 0;
    int compute = 0;
    for (size_t i = 0; i < n; i++) {
        const cr_mig_want *w = &want[i];
        if (w->slices < 1 || w->mem_slices < 1 || w->start < 0 || w->start + w->mem_slices > tm) {
            snprintf(err, errlen,
                     "GPU %d: instance %zu (%s at slice %d, %d memory slices) does "
                     "not fit its %d memory slices",
                     g->index, i, w->profile, w->start, w->mem_slices, tm);
            return CR_ERANGE;
        }
        unsigned m = ((1u << w->mem_slices) - 1) << w->start;
        if (used & m) {
            snprintf(err, errlen, "GPU %d: instance %zu (%s at slice %d) overlaps another",
                     g->index, i, w->profile, w->start);
            return CR_ERANGE;
        }
        used |= m;
        compute += w->slices;
        if (compute > tc) {
            snprintf(err, errlen, "GPU %d: the layout needs more than its %d compute slices",
                     g->index, tc);
            return CR_ERANGE;
        }
        if (!w->uuid[0]) {
            plan->create[plan->ncreate++] = i;
            continue;
        }
        size_t k;
        for (k = 0; k < g->mig_count; k++) {
            if (strcmp(g->mig[k].uuid, w->uuid) == 0) {
                break;
            }
        }
        if (k == g->mig_count || strcmp(g->mig[k].profile, w->profile) != 0 || kept[k]) {
            snprintf(err, errlen, "GPU %d: instance %zu names %s, which is no %s instance here",
                     g->index, i, w->uuid, w->profile);
            return CR_ENOENT;
        }
        kept[k] = 1;
    }
    for (size_t k = 0; k < g->mig_count; k++) {
        if (kept[k]) {
            continue;
        }
        if (busy && busy[k]) {
            snprintf(err, errlen,
                     "GPU %d: the layout would destroy instance %s (%s), which a job holds: "
                     "refused, nothing changed",
                     g->index, g->mig[k].uuid, g->mig[k].profile);
            plan->ncreate = plan->ndestroy = 0;
            return CR_EBUSY;
        }
        plan->destroy[plan->ndestroy++] = k;
    }
    return 0;
}

int cr_gpu_mig_apply(cr_gpu_backend *b, size_t gi, const cr_mig_want *want, size_t n,
                     const cr_mig_plan *plan, char *err, size_t errlen)
{
    cr_gpu_info *g = &b->gpus[gi];
    if (!b->ops->mig_destroy || !b->ops->mig_create) {
        snprintf(err, errlen, "the %s backend cannot change MIG layouts", b->ops->name);
        return CR_ENOTSUP;
    }
    /* Destroy (highest index first: the list shrinks), then create. */
    for (size_t x = plan->ndestroy; x-- > 0;) {
        size_t k = plan->destroy[x];
        int rc = b->ops->mig_destroy(b, gi, &g->mig[k], err, errlen);
        if (rc < 0) {
            return rc;
        }
        memmove(&g->mig[k], &g->mig[k + 1], (g->mig_count - k - 1) * sizeof g->mig[0]);
        g->mig_count--;
    }
    /* Kept instances take the controller's start (the sim's own is a guess). */
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; want[i].uuid[0] && k < g->mig_count; k++) {
            if (strcmp(g->mig[k].uuid, want[i].uuid) == 0 && g->mig[k].start < 0) {
                g->mig[k].start = want[i].start;
            }
        }
    }
    for (size_t x = 0; x < plan->ncreate; x++) {
        const cr_mig_want *w = &want[plan->create[x]];
        if (g->mig_count >= CR_GPU_MAX_MIG) {
            snprintf(err, errlen, "GPU %d: no room for another instance", g->index);
            return CR_ERANGE;
        }
        cr_mig_inst m;
        memset(&m, 0, sizeof m);
        int rc = b->ops->mig_create(b, gi, w, &m, err, errlen);
        if (rc < 0) {
            return rc;
        }
        g->mig[g->mig_count++] = m;
    }
    return 0;
}

/*
 * NVML's profile numbers (nvml.h): NVML_GPU_INSTANCE_PROFILE_{1,2,3,4,7,8,6}_SLICE
 * are 0..6, 1_SLICE_REV1 (the "+me" media-extension profile) 7, 2_SLICE_REV1
 * 8, 1_SLICE_REV2 (one compute slice with two memory slices: 1g.20gb on an
 * 80 GB A100) 9. Compute instance profiles use 0..6 the same way.
 */
int cr_gpu_mig_nvml_profile(const char *profile, int slices, int mem_slices, unsigned *gi_profile,
                            unsigned *ci_profile)
{
    static const int by_slices[9] = {-1, 0, 1, 2, 3, -1, 6, 4, 5};
    if (slices < 1 || slices > 8 || by_slices[slices] < 0) {
        return CR_EINVAL;
    }
    int me = profile && strstr(profile, "+me") != NULL;
    *ci_profile = (unsigned)by_slices[slices];
    if (me && slices == 1) {
        *gi_profile = 7;
    } else if (me && slices == 2) {
        *gi_profile = 8;
    } else if (me) {
        return CR_EINVAL;
    } else if (slices == 1 && mem_slices == 2) {
        *gi_profile = 9;
    } else {
        *gi_profile = (unsigned)by_slices[slices];
    }
    return 0;
}
