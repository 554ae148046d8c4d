/*
 * ctl_mig.c - dynamic MIG on the controller's side (docs/scheduler.md,
 * "Dynamic MIG"; the agent's side is src/agent/agent_mig.c).
 *
 * A GPU its agent marks "mig_dynamic" may have its layout rewritten by the
 * scheduler for a MIG job that fits no free instance (idle instances
 * destroyed, the job's created; busy ones never touched). The start
 * decision then carries the GPU's new layout; ctl_mig_want_build turns it
 * into the "mig_layouts" entry of the node's desired state: each instance
 * with its profile, slices and start, and the UUID of an instance that
 * stays. The agent applies it before starting the job and registers again;
 * ctl_mig_want_settle then fills in the new UUIDs and, once the registered
 * layout is the wanted one, stops asking.
 *
 * Also here, the other way of sharing a GPU as the node view shows it:
 * which fractional tasks a shareable GPU holds (ctl_share_json).
 */
#include "ctl_int.h"

#include "cr_error.h"
#include "cr_mig.h"

#include <stdio.h>
#include <string.h>

/* Registered instance k of g: its shape and the start the agent reports. */
static int reg_shape(const ctl_gpu *g, size_t k, int *start, int *slices, int *mem)
{
    json_t *m = json_array_get(g->mig, k), *st = json_object_get(m, "start");
    *slices = (int)json_integer_value(json_object_get(m, "slices"));
    *mem = (int)json_integer_value(json_object_get(m, "mem_slices"));
    *start = json_is_integer(st) && json_integer_value(st) >= 0 && json_integer_value(st) < 8
                 ? (int)json_integer_value(st)
                 : -1;
    return *start;
}

void ctl_mig_registered(ctl_gpu *g)
{
    memset(g->mig_start, -1, sizeof g->mig_start);
    for (size_t k = 0; k < json_array_size(g->mig) && k < 8; k++) {
        int st, sl, mem;
        g->mig_start[k] = (int8_t)reg_shape(g, k, &st, &sl, &mem);
    }
}

/* The registered instance at start with that shape, or -1. */
static int reg_find(const ctl_gpu *g, int start, int slices, int mem)
{
    for (size_t k = 0; k < json_array_size(g->mig) && k < 8; k++) {
        int st, sl, me;
        reg_shape(g, k, &st, &sl, &me);
        if (st < 0) {
            st = g->mig_start[k]; /* the scheduler's start for a first layout */
        }
        if (st == start && sl == slices && me == mem) {
            return (int)k;
        }
    }
    return -1;
}

void ctl_mig_want_build(ctl_gpu *g, int n, const int *start, const int *mem, const int *compute,
                        const char *const *fallback)
{
    json_t *want = json_array();
    for (int i = 0; i < n; i++) {
        const char *prof = NULL, *uuid = NULL;
        int k = reg_find(g, start[i], compute[i], mem[i]);
        if (k >= 0) {
            json_t *m = json_array_get(g->mig, (size_t)k);
            prof = json_string_value(json_object_get(m, "profile"));
            uuid = json_string_value(json_object_get(m, "uuid"));
        }
        for (size_t q = 0; !prof && q < json_array_size(g->mig_want); q++) {
            json_t *w = json_array_get(g->mig_want, q);
            if (json_integer_value(json_object_get(w, "start")) == start[i] &&
                json_integer_value(json_object_get(w, "slices")) == compute[i] &&
                json_integer_value(json_object_get(w, "mem_slices")) == mem[i]) {
                prof = json_string_value(json_object_get(w, "profile"));
                uuid = json_string_value(json_object_get(w, "uuid"));
            }
        }
        if (!prof) {
            prof = fallback[i];
        }
        json_t *e = json_pack("{s:s,s:i,s:i,s:i}", "profile", prof ? prof : "", "slices",
                              compute[i], "mem_slices", mem[i], "start", start[i]);
        if (uuid && *uuid) {
            json_object_set_new(e, "uuid", json_string(uuid));
        }
        json_array_append_new(want, e);
    }
    json_decref(g->mig_want);
    g->mig_want = want;
}

void ctl_mig_want_settle(ctl_gpu *g)
{
    if (!g->mig_want) {
        return;
    }
    size_t matched = 0;
    for (size_t q = 0; q < json_array_size(g->mig_want); q++) {
        json_t *w = json_array_get(g->mig_want, q);
        int k = reg_find(g, (int)json_integer_value(json_object_get(w, "start")),
                         (int)json_integer_value(json_object_get(w, "slices")),
                         (int)json_integer_value(json_object_get(w, "mem_slices")));
        if (k >= 0) {
            const char *u =
                json_string_value(json_object_get(json_array_get(g->mig, (size_t)k), "uuid"));
            json_object_set_new(w, "uuid", json_string(u ? u : ""));
            matched++;
        }
    }
    if (matched == json_array_size(g->mig_want) && matched == json_array_size(g->mig)) {
        json_decref(g->mig_want); /* the node has it: nothing more to ask */
        g->mig_want = NULL;
    }
}

json_t *ctl_mig_layouts(const ctl_node *n)
{
    json_t *out = NULL;
    for (size_t i = 0; i < n->ngpus; i++) {
        if (n->gpus[i].mig_want) {
            if (!out) {
                out = json_array();
            }
            json_array_append_new(out, json_pack("{s:i,s:O}", "gpu", n->gpus[i].index, "instances",
                                                 n->gpus[i].mig_want));
        }
    }
    return out;
}

void ctl_share_json(ctl *c, const ctl_node *n, const ctl_gpu *g, json_t *v)
{
    json_t *ids = json_array();
    int64_t milli = 0;
    for (size_t q = 0; g->shareable && q < n->njobs; q++) {
        const ctl_job *j = ctl_job_get(c, n->jobs[q]);
        if (!j || (j->state != JS_RUNNING && j->state != JS_COMPLETING) ||
            !(j->gpu_milli || j->gpu_mem_bytes)) {
            continue;
        }
        for (size_t k = 0; k < j->nplace; k++) {
            if (strcmp(j->place[k].node, n->name) == 0 && j->place[k].ngpus > 0 &&
                j->place[k].gpus[0] == g->index) {
                json_array_append_new(ids, json_integer(j->id));
                milli += j->gpu_milli;
            }
        }
    }
    if (json_array_size(ids)) {
        json_object_set_new(v, "shared_jobs", ids);
        json_object_set_new(v, "shared_milli", json_integer(milli));
    } else {
        json_decref(ids);
    }
}

/* A job's mig_profile must name a profile some GPU can have: one of the
 * MIG tables (src/model/mig.c: every model's) or one a registered node
 * reports (a device's own name for a standard shape). Else the job would
 * pend forever with no node able to take it. */
int ctl_mig_profile_check(const ctl *c, const char *profile, cr_json_err *err)
{
    if (!*profile || cr_mig_known(profile)) {
        return 0;
    }
    for (size_t i = 0; i < c->nnodes; i++) {
        const ctl_node *n = c->nodes[i];
        for (size_t g = 0; g < n->ngpus; g++) {
            for (size_t k = 0; k < json_array_size(n->gpus[g].mig); k++) {
                const char *p = json_string_value(
                    json_object_get(json_array_get(n->gpus[g].mig, k), "profile"));
                if (p && strcmp(p, profile) == 0) {
                    return 0;
                }
            }
        }
    }
    char names[400];
    size_t need = cr_mig_names(names, sizeof names);
    return cr_json_fail(err, CR_EINVAL, "mig_profile",
                        "field 'mig_profile': no GPU model has a MIG profile '%s'; valid: %s%s",
                        profile, names, need >= sizeof names ? "..." : "");
}
