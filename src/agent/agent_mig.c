/*
 * agent_mig.c - dynamic MIG applied by the agent (docs/agent.md, "Dynamic
 * MIG").
 *
 * When the controller's desired state asks a GPU marked --mig-dynamic for a
 * new layout ("mig_layouts"), the agent destroys the idle instances the
 * layout drops and creates the new ones through its backend (NVML, or the
 * sim with a modelled delay), before it starts the jobs of that document;
 * then it registers again so the controller learns the new instances'
 * UUIDs. An instance a running job holds is never destroyed: a layout that
 * would is refused whole (logged once per document) and nothing changes.
 * Layouts for GPUs not marked --mig-dynamic are refused the same way.
 */
#include "agent_int.h"

#include "cr_log.h"
#include "cr_time.h"

#include <stdio.h>
#include <string.h>

/* A job running here holds the MIG instance with this UUID. */
static int inst_busy(const agent *a, const char *uuid)
{
    for (size_t i = 0; i < a->nprocs; i++) {
        const cr_proc *p = &a->procs[i];
        for (size_t k = 0; p->state != CR_PROC_EXITED && k < p->spec.uuid_count; k++) {
            if (strcmp(p->spec.gpu_uuids[k], uuid) == 0) {
                return 1;
            }
        }
    }
    return 0;
}

int cr__agent_mig_apply(agent *a)
{
    int changed = 0, refused_now = 0;
    for (size_t l = 0; l < a->desired.nlayouts; l++) {
        const cr_mig_layout *ml = &a->desired.layouts[l];
        char err[512] = "";
        size_t gi;
        for (gi = 0; gi < a->gpu->count && a->gpu->gpus[gi].index != ml->gpu; gi++) {
        }
        cr_mig_plan plan;
        int rc = 0;
        if (gi == a->gpu->count) {
            snprintf(err, sizeof err, "no GPU %d here", ml->gpu);
            rc = -1;
        } else if (!(a->cfg.mig_dynamic >> ml->gpu & 1)) {
            snprintf(err, sizeof err, "GPU %d is not marked --mig-dynamic", ml->gpu);
            rc = -1;
        } else {
            const cr_gpu_info *g = &a->gpu->gpus[gi];
            int busy[CR_GPU_MAX_MIG] = {0};
            for (size_t k = 0; k < g->mig_count; k++) {
                busy[k] = inst_busy(a, g->mig[k].uuid);
            }
            rc = cr_gpu_mig_plan(g, busy, ml->inst, ml->n, &plan, err, sizeof err);
        }
        if (rc < 0) {
            refused_now = 1;
            if (a->mig_refused_version != a->desired.version) {
                cr_error("agent: MIG layout for GPU %d refused: %s", ml->gpu, err);
            }
            continue;
        }
        if (plan.ndestroy == 0 && plan.ncreate == 0) {
            continue; /* already so */
        }
        int64_t t0 = cr_mono_ns();
        rc = cr_gpu_mig_apply(a->gpu, gi, ml->inst, ml->n, &plan, err, sizeof err);
        long long ms = (long long)((cr_mono_ns() - t0) / CR_NS_PER_MS);
        if (rc < 0) {
            cr_error("agent: GPU %d: MIG layout change failed after %lld ms: %s", ml->gpu, ms, err);
        } else {
            cr_info("agent: GPU %d: MIG layout changed in %lld ms: %zu idle instance(s) "
                    "destroyed, %zu created (%zu now)",
                    ml->gpu, ms, plan.ndestroy, plan.ncreate, a->gpu->gpus[gi].mig_count);
        }
        changed = 1; /* even a partial change is news to the controller */
    }
    if (refused_now) {
        a->mig_refused_version = a->desired.version;
    }
    if (changed && cr__agent_register(a) != 0) {
        cr_warn("agent: could not tell the controller the new MIG layout yet: will register "
                "again");
    }
    return changed;
}
