/*
 * ctl_sched.c - the scheduler thread: drives src/sched on events, batched,
 * never blocking the API; also runs the timers (lost nodes, long-polls).
 *
 * The thread owns the cr_sched. API threads never touch it: they queue
 * job changes (ctl_sched_add/remove/requeue) and mark nodes and tenants
 * dirty under ctl->mu, then kick. A pass takes the queued changes under mu,
 * applies them and runs one cycle without mu, then applies the decisions
 * to memory under mu, commits them (waiting, without mu), and only then
 * publishes new desired state to the agents. Passes are at least
 * sched_interval_ms apart, so a burst of submissions is one cycle.
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_gpufacts.h"
#include "cr_log.h"
#include "cr_mig.h"
#include "cr_time.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#ifdef CTL_HAVE_SCHED
#include "cr_sched.h"
#include "ctl_auto.h"

/* After a pass whose starts could not be stored, the next pass waits this
 * long (a full disk is not retried at the scheduler's pace). */
#define CTL_START_RETRY_MS 1000

typedef struct placer {
    cr_sched *s;
    cr_rng rng;
    int64_t *ids;    /* jobs known to the cr_sched (lazily pruned) */
    uint64_t *rhash; /* hash of the last reason reported for ids[i], 0 = none */
    size_t nids, capids;
    int64_t last_reason_ns; /* last full sweep of pending reasons */
    ctl_auto *au;           /* owned: the type choice of auto jobs */
    bool hetero;            /* policy hetero: auto vectors carry plain throughput */
    bool rounds;            /* policy rounds: only checkpointable jobs are suspended */
    /* Suspended jobs whose run has not reported its exit, and when they
     * may resume anyway (grace_s + lost_after_s after the suspension: the
     * node may be gone), on ctl_clock_ns. */
    struct held_rec {
        int64_t id, until_ns;
    } * held;
    size_t nheld, capheld;
    int ntypes;        /* GPU types the pending auto jobs were specified against */
    bool masks_stale;  /* a node got a new index (reshape_node): node masks are redone */
    uint64_t node_gen; /* the scheduler's nodes the pending masks were made against */
    int64_t *cpu_ids;  /* jobs without GPUs (place_cpu_jobs), live or lazily pruned */
    size_t ncpu, capcpu;
} placer;

/*
 * A MIG GPU holds the instances the agent registered, no others: give the
 * scheduler that fixed layout so it places jobs only on free instances of
 * the profile asked for, and keep the start slice of each instance so a
 * placement maps back to its UUID. A layout the scheduler cannot model
 * takes the GPU out of use rather than letting jobs lose their isolation.
 */
static void set_mig_layout(placer *pl, ctl_node *n, size_t i, int type, int64_t now)
{
    ctl_gpu *g = &n->gpus[i];
    const char *prof[8];
    size_t np = 0, idx[8];
    memset(g->mig_start, -1, sizeof g->mig_start);
    g->mig_unusable = false;
    for (size_t k = 0; k < json_array_size(g->mig) && k < 8; k++) {
        json_t *m = json_array_get(g->mig, k);
        const char *p = json_string_value(json_object_get(m, "profile"));
        const char *u = json_string_value(json_object_get(m, "uuid"));
        int cs, ms;
        json_int_t sl = json_integer_value(json_object_get(m, "slices"));
        json_int_t msl = json_integer_value(json_object_get(m, "mem_slices"));
        if (p && cr_sched_mig_profile_get(pl->s, type, p, &cs, &ms) != 0 && sl > 0 && msl > 0 &&
            sl <= 8 && msl <= 8) {
            /* the device's own name for a standard shape */
            cr_sched_mig_profile_alias(pl->s, type, p, (int)sl, (int)msl);
        }
        if (!p || !u || cr_sched_mig_profile_get(pl->s, type, p, &cs, &ms) != 0) {
            cr_warn("sched: node=%s gpu=%d: MIG instance %zu profile '%s' unknown for %s; "
                    "not used",
                    n->name, g->index, k, p ? p : "", g->model);
            continue;
        }
        idx[np] = k;
        prof[np++] = p;
    }
    int starts[8];
    int rc = cr_sched_gpu_set_mig_layout(pl->s, n->sched_idx, (uint32_t)i, prof, np, starts);
    if (rc == 0 && np == 0) {
        rc = CR_ENOENT; /* no usable instance: never carve the GPU on demand */
    }
    if (rc != 0) {
        cr_warn("sched: node=%s gpu=%d: MIG layout not usable (%s); GPU taken out of use", n->name,
                g->index, cr_strerror(rc));
        g->mig_unusable = true;
        cr_sched_gpu_set_health(pl->s, n->sched_idx, (uint32_t)i, false, "MIG layout not usable",
                                now, NULL, NULL);
        return;
    }
    for (size_t k = 0; k < np; k++) {
        g->mig_start[idx[k]] = (int8_t)starts[k];
    }
}

/*
 * The model's own names for its MIG shapes (src/model/mig.c: "4g.24gb" on
 * an A30 that reports 24 GiB, where the scheduler's names from the memory
 * size would say "4g.26gb"), so that a job may ask for any profile the
 * model has, not only for those some layout already holds: a dynamic GPU
 * is repartitioned into it (issue 28). The media-extension ("+me")
 * variants are left out: the scheduler does not model their one-per-GPU
 * engines, so they are only taken where a layout has them.
 */
static void mig_names(placer *pl, int type, const char *model)
{
    size_t np = 0;
    const cr_mig_profile *p = cr_mig_profiles(model, &np);
    for (size_t k = 0; p && k < np; k++) {
        if (!p[k].media_ext) {
            cr_sched_mig_profile_alias(pl->s, type, p[k].name, p[k].compute_slices,
                                       p[k].mem_slices);
        }
    }
}

static cr_sched_node_state sched_state(ctl_node_state st)
{
    return st == NS_UP ? CR_NODE_UP : st == NS_DRAINED ? CR_NODE_DRAINED : CR_NODE_LOST;
}

/* "2x L40S, 1x L4": a GPU list by model, for the log and the reason. */
static void gpus_text(const char *const *models, size_t n, char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && o < len; i++) {
        bool seen = false;
        size_t count = 0;
        for (size_t k = 0; k < n; k++) {
            seen |= k < i && strcmp(models[k], models[i]) == 0;
            count += strcmp(models[k], models[i]) == 0;
        }
        if (!seen) {
            int w = snprintf(out + o, len - o, "%s%zux %s", o ? ", " : "", count, models[i]);
            o += w > 0 ? (size_t)w : 0;
        }
    }
    if (!n) {
        snprintf(out, len, "no GPUs");
    }
}

/*
 * A node that re-registered with other GPUs (models or count: a hardware
 * change, a reboot into another machine) than the scheduler holds for it:
 * the scheduler's entry is retired (lost for good) and the node added anew
 * with what it has now, else jobs would be placed on GPUs it no longer has
 * and never on the ones it gained. The jobs running there are requeued
 * with the reason (no retry used): their GPUs may be gone or other ones.
 * (A GPU that only vanished keeps its place as "gone": gpus_merge in
 * ctl_nodes.c, and no reshape.) mu held. Returns true when it did.
 */
static bool reshape_node(placer *pl, ctl *c, ctl_node *n, const cr_sched_node_info *info, size_t ng,
                         int64_t now)
{
    const char *was[CR_SCHED_MAX_NODE_GPUS], *is[CR_SCHED_MAX_NODE_GPUS];
    bool changed = info->gpu_count != ng;
    for (size_t i = 0; i < info->gpu_count && i < CR_SCHED_MAX_NODE_GPUS; i++) {
        cr_sched_gpu_info gi;
        int type = -1;
        was[i] = "?";
        if (cr_sched_gpu_info_get(pl->s, n->sched_idx, (uint32_t)i, &gi) == 0) {
            const char *tn = cr_sched_gpu_type_name(pl->s, gi.type);
            was[i] = tn ? tn : "?";
            if (i < ng &&
                (cr_sched_gpu_type_find(pl->s, n->gpus[i].model, &type) != 0 || type != gi.type)) {
                changed = true;
            }
        }
    }
    if (!changed) {
        return false;
    }
    for (size_t i = 0; i < ng; i++) {
        is[i] = n->gpus[i].model;
    }
    char before[200], after[200], why[CTL_NAME_MAX + 460];
    gpus_text(was, info->gpu_count < CR_SCHED_MAX_NODE_GPUS ? info->gpu_count : 0, before,
              sizeof before);
    gpus_text(is, ng, after, sizeof after);
    snprintf(why, sizeof why, "node %s re-registered with other GPUs (%s, was %s)", n->name, after,
             before);
    cr_warn("sched: %s: its jobs are requeued and the scheduler takes the new GPUs", why);
    uint64_t *req = NULL;
    size_t nreq = 0;
    if (cr_sched_node_retire(pl->s, n->sched_idx, now, &req, &nreq) != 0) {
        return false;
    }
    cr_store_txn *txn = NULL;
    for (size_t k = 0; k < nreq; k++) {
        ctl_job *j = ctl_job_get(c, (int64_t)req[k]);
        if (j && (j->state == JS_RUNNING || j->state == JS_COMPLETING) && !ctl_job_end_held(j)) {
            if (!txn) {
                txn = cr_store_txn_new();
                cr_store_txn_splittable(txn);
            }
            j->requeue_requested = true;
            ctl_job_ended(c, txn, j, 0, 0, why, true);
        }
    }
    if (txn) {
        cr_store_submit(c->store, txn, NULL, NULL);
    }
    free(req);
    n->in_sched = false;
    pl->masks_stale = true; /* the new entry's index is in no job's node mask yet */
    return true;
}

/* Node inventory or state changed: bring the cr_sched up to date. mu held. */
static void sync_node(placer *pl, ctl *c, ctl_node *n, int64_t now)
{
    cr_sched_gpu_spec gspec[CR_SCHED_MAX_NODE_GPUS];
    size_t ng = n->ngpus < CR_SCHED_MAX_NODE_GPUS ? n->ngpus : CR_SCHED_MAX_NODE_GPUS;
    if (!n->in_sched) {
        for (size_t i = 0; i < ng; i++) {
            int type = 0;
            cr_sched_gpu_type(pl->s, n->gpus[i].model, &type);
            if (n->gpus[i].mem_bytes) {
                cr_sched_gpu_type_set_mem(pl->s, type, n->gpus[i].mem_bytes);
            }
            bool mig = n->gpus[i].mig != NULL;
            const cr_mig_geom *geom = mig ? cr_gpufacts_mig(n->gpus[i].model) : NULL;
            if (geom) {
                cr_sched_gpu_type_set_mig(pl->s, type, geom->compute_slices, geom->mem_slices);
                mig_names(pl, type, n->gpus[i].model);
            } else {
                mig = false;
            }
            gspec[i] = (cr_sched_gpu_spec){.type = type,
                                           .mem_bytes = n->gpus[i].mem_bytes,
                                           .nvlink = (uint16_t)n->gpus[i].nvlink,
                                           .bad = strcmp(n->gpus[i].health, "ok") != 0,
                                           .mig = mig,
                                           .share = n->gpus[i].shareable && !mig};
        }
        cr_sched_node_spec spec = {.name = n->name,
                                   .rack = n->rack,
                                   .spine = NULL,
                                   .state = sched_state(n->state),
                                   .gpu_count = ng,
                                   .gpus = gspec};
        int rc = cr_sched_node_add(pl->s, &spec, &n->sched_idx);
        /* A node deleted (ctl_lifecycle.c) and joining again: the scheduler
         * kept its entry, lost; bring that one back below. */
        bool rejoined = rc == CR_EEXIST && cr_sched_node_find(pl->s, n->name, &n->sched_idx) == 0;
        if (rc != 0 && !rejoined) {
            cr_error("sched: cannot add node=%s: %s", n->name, cr_strerror(rc));
            return;
        }
        n->in_sched = true;
        for (size_t i = 0; i < ng && !rejoined; i++) {
            if (gspec[i].mig) {
                set_mig_layout(pl, n, i, gspec[i].type, now);
                if (n->gpus[i].mig_dynamic && !n->gpus[i].mig_unusable) {
                    cr_sched_gpu_set_mig_dynamic(pl->s, n->sched_idx, (uint32_t)i, true);
                }
            }
        }
        if (!rejoined) {
            return;
        }
    }
    cr_sched_node_info info;
    if (cr_sched_node_info_get(pl->s, n->sched_idx, &info) != 0) {
        return;
    }
    if (reshape_node(pl, c, n, &info, ng, now)) {
        sync_node(pl, c, n, now); /* added anew (n->in_sched is false) */
        return;
    }
    cr_sched_node_state want = sched_state(n->state);
    if (info.state != want) {
        uint64_t *req = NULL;
        size_t nreq = 0;
        cr_sched_node_set_state(pl->s, n->sched_idx, want, n->reason, now, &req, &nreq);
        free(req); /* the controller requeued them itself (ctl_nodes_tick) */
    }
    for (size_t i = 0; i < ng && i < info.gpu_count; i++) {
        cr_sched_gpu_info gi;
        bool ok = strcmp(n->gpus[i].health, "ok") == 0 && !n->gpus[i].mig_unusable;
        if (cr_sched_gpu_info_get(pl->s, n->sched_idx, (uint32_t)i, &gi) == 0 && gi.bad == ok) {
            uint64_t *req = NULL;
            size_t nreq = 0;
            cr_sched_gpu_set_health(pl->s, n->sched_idx, (uint32_t)i, ok, n->gpus[i].reason, now,
                                    &req, &nreq);
            /* Jobs on a GPU that went bad: the scheduler requeued them. */
            cr_store_txn *txn = NULL;
            for (size_t k = 0; k < nreq; k++) {
                ctl_job *j = ctl_job_get(c, (int64_t)req[k]);
                if (j && (j->state == JS_RUNNING || j->state == JS_COMPLETING) &&
                    !ctl_job_end_held(j)) {
                    if (!txn) {
                        txn = cr_store_txn_new();
                        cr_store_txn_splittable(txn);
                    }
                    char why[300];
                    snprintf(why, sizeof why, "GPU %d on node %s unhealthy: %s", n->gpus[i].index,
                             n->name, n->gpus[i].reason);
                    j->requeue_requested = true;
                    ctl_job_ended(c, txn, j, 0, 0, why, true);
                }
            }
            if (txn) {
                cr_store_submit(c->store, txn, NULL, NULL);
            }
            free(req);
        }
    }
}

/* A job's scheduling request, copied out of the ctl_job under mu so that
 * the scheduler thread can use it without (the one form both the queue
 * and a restart go through). */
typedef struct job_req {
    int64_t id;
    char tenant[CTL_NAME_MAX];
    char gpu_type[CTL_NAME_MAX];
    char mig[32];
    char kind[16];
    int priority, gpus, nodes;
    double gpu_mem_gb;
    int gpu_milli;
    int64_t gpu_mem_bytes;
    bool preemptible, checkpointable;
    int64_t time_limit_s, checkpoint_interval_s, submit_ns;
    ctl_auto_hints hints; /* auto: what the performance model needs */
    bool exclusive;       /* whole nodes (--exclusive) */
    uint8_t *mask;        /* owned: nodes it may use (mask_of), NULL = any */
    uint8_t *prefer;      /* owned: nodes that hold its data (mask_of), NULL = none */
    uint32_t prefer_bits;
    uint32_t mask_bits;
} job_req;

/* mu held. */
static void req_of(const ctl_job *j, job_req *r)
{
    memset(r, 0, sizeof *r);
    r->id = j->id;
    snprintf(r->tenant, sizeof r->tenant, "%s", j->tenant);
    snprintf(r->gpu_type, sizeof r->gpu_type, "%s", j->gpu_type);
    snprintf(r->mig, sizeof r->mig, "%s", j->mig_profile);
    snprintf(r->kind, sizeof r->kind, "%s", j->kind);
    r->priority = j->priority;
    r->gpus = j->gpus;
    r->nodes = j->nodes;
    r->gpu_mem_gb = j->gpu_mem_gb;
    r->gpu_milli = j->gpu_milli;
    r->gpu_mem_bytes = j->gpu_mem_bytes;
    r->preemptible = j->preemptible;
    r->checkpointable = j->checkpointable;
    r->time_limit_s = j->time_limit_s;
    r->checkpoint_interval_s = j->checkpoint_interval_s;
    r->submit_ns = j->submit_ns;
    ctl_auto_hints_of(j->gpu_type, j->mig_profile, j->kind, json_object_get(j->spec, "model"),
                      j->gpus, &r->hints);
    r->exclusive = json_is_true(json_object_get(j->spec, "exclusive"));
}

/* The nodes a job with --nodelist/--exclude/--constraint may use, as a
 * mask over the scheduler's node indexes (nodes that join later are not
 * in it: the mask is made when the job enters the queue). mu held. */
/* Whether node n's data cache holds every object of data (its last status). */
static bool holds_all(const ctl_node *n, const json_t *data)
{
    size_t nd = json_array_size(data), held = json_array_size(n->data_held);
    for (size_t i = 0; i < nd; i++) {
        const char *want = json_string_value(json_object_get(json_array_get(data, i), "sha256"));
        bool found = false;
        for (size_t k = 0; k < held && !found && want; k++) {
            found = strcmp(json_string_value(json_array_get(n->data_held, k)), want) == 0;
        }
        if (!found) {
            return false;
        }
    }
    return nd > 0;
}

/* Locality (docs/data.md): the nodes whose data cache holds all of the
 * job's data (a service's model weights too) when it enters the queue,
 * as a mask over the scheduler's node indexes; none: no preference. mu held. */
static void prefer_of(ctl *c, const ctl_job *j, job_req *r)
{
    const json_t *data = json_object_get(j->spec, "data");
    if (json_array_size(data) == 0) {
        return;
    }
    uint32_t bits = 0;
    bool any = false;
    for (size_t i = 0; i < c->nnodes; i++) {
        const ctl_node *n = c->nodes[i];
        if (n->in_sched && holds_all(n, data)) {
            any = true;
            bits = n->sched_idx + 1 > bits ? n->sched_idx + 1 : bits;
        }
    }
    if (!any) {
        return;
    }
    r->prefer = cr_calloc(bits / 8 + 1, 1);
    r->prefer_bits = bits;
    for (size_t i = 0; i < c->nnodes; i++) {
        const ctl_node *n = c->nodes[i];
        if (n->in_sched && holds_all(n, data)) {
            r->prefer[n->sched_idx / 8] |= (uint8_t)(1u << (n->sched_idx % 8));
        }
    }
}

static void mask_of(ctl *c, const ctl_job *j, job_req *r)
{
    prefer_of(c, j, r);
    if (!ctl_batch_has_node_filter(j)) {
        return;
    }
    uint32_t bits = 0;
    for (size_t i = 0; i < c->nnodes; i++) {
        if (c->nodes[i]->in_sched && c->nodes[i]->sched_idx + 1 > bits) {
            bits = c->nodes[i]->sched_idx + 1;
        }
    }
    r->mask = cr_calloc(bits / 8 + 1, 1);
    r->mask_bits = bits;
    for (size_t i = 0; i < c->nnodes; i++) {
        const ctl_node *n = c->nodes[i];
        if (n->in_sched && ctl_batch_node_allowed(c, j, n)) {
            r->mask[n->sched_idx / 8] |= (uint8_t)(1u << (n->sched_idx % 8));
        }
    }
}

/* The scheduler's job spec; tput (CR_SCHED_MAX_TYPES entries, caller's)
 * holds the auto vector the spec points to. */
static void spec_of(placer *pl, const job_req *r, cr_sched_job_spec *sp, double *tput)
{
    memset(sp, 0, sizeof *sp);
    sp->id = (uint64_t)r->id;
    cr_sched_tenant(pl->s, r->tenant, &sp->tenant);
    sp->priority = r->priority;
    if (cr_sched_job_kind_parse(r->kind, &sp->kind) != 0) {
        sp->kind = CR_JOB_OTHER;
    }
    sp->gpu_count = (uint32_t)r->gpus;
    if (strcmp(r->gpu_type, "auto") == 0 || strcmp(r->gpu_type, "any") == 0) {
        sp->gpu_type = CR_SCHED_TYPE_ANY;
        size_t n = 0;
        if (ctl_auto_tput(pl->au, pl->s, &r->hints, r->tenant, pl->hetero, tput, &n)) {
            sp->tput = tput;
            sp->tput_count = n;
        }
    } else {
        cr_sched_gpu_type(pl->s, r->gpu_type, &sp->gpu_type);
    }
    sp->mem_bytes = (uint64_t)(r->gpu_mem_gb * 1e9);
    sp->mig_profile = r->mig;
    sp->gpu_milli = (uint16_t)r->gpu_milli;
    sp->gpu_mem_bytes = (uint64_t)r->gpu_mem_bytes;
    sp->node_count = (uint32_t)r->nodes;
    sp->time_limit_ns = r->time_limit_s * CR_NS_PER_SEC;
    /* rounds suspends (a job that checkpoints on its signal loses nothing):
     * only the jobs that declared they can */
    sp->preemptible = pl->rounds ? r->checkpointable : r->preemptible;
    sp->checkpoint_interval_ns = r->checkpoint_interval_s * CR_NS_PER_SEC;
    sp->submit_ns = r->submit_ns;
    sp->exclusive = r->exclusive;
    sp->node_mask = r->mask;
    sp->node_mask_bits = r->mask_bits;
    sp->prefer_mask = r->prefer;
    sp->prefer_mask_bits = r->prefer_bits;
}

static void sync_tenants(placer *pl, ctl *c)
{
    for (size_t i = 0; i < c->ntenants; i++) {
        ctl_tenant *t = c->tenants[i];
        int id;
        if (cr_sched_tenant(pl->s, t->name, &id) != 0) {
            continue;
        }
        cr_sched_tenant_set_weight(pl->s, id, t->weight);
        const char *k;
        json_t *v;
        json_object_foreach(t->quotas, k, v)
        {
            int type;
            if (cr_sched_gpu_type(pl->s, k, &type) == 0) {
                cr_sched_tenant_set_quota(pl->s, id, type, (int64_t)json_integer_value(v));
            }
        }
        /* the tree's bounds are replaced whole: unset ones are none */
        for (int type = 0; type < cr_sched_gpu_type_count(pl->s); type++) {
            cr_sched_tenant_set_limit(pl->s, id, type, -1);
            cr_sched_tenant_set_lending(pl->s, id, type, -1);
        }
        json_object_foreach(t->limits, k, v)
        {
            int type;
            if (cr_sched_gpu_type(pl->s, k, &type) == 0) {
                cr_sched_tenant_set_limit(pl->s, id, type, (int64_t)json_integer_value(v));
            }
        }
        json_object_foreach(t->lending, k, v)
        {
            int type;
            if (cr_sched_gpu_type(pl->s, k, &type) == 0) {
                cr_sched_tenant_set_lending(pl->s, id, type, (int64_t)json_integer_value(v));
            }
        }
        cr_sched_tenant_set_parent(pl->s, id, -1);
    }
    /* parents once every tenant is known and a root: each step is then a
     * part of the final tree (validated by the API), never a cycle */
    for (size_t i = 0; i < c->ntenants; i++) {
        ctl_tenant *t = c->tenants[i];
        int id, parent;
        if (*t->parent && cr_sched_tenant_find(pl->s, t->name, &id) == 0 &&
            cr_sched_tenant_find(pl->s, t->parent, &parent) == 0 &&
            cr_sched_tenant_set_parent(pl->s, id, parent) != 0) {
            cr_warn("sched: tenant %s: parent %s refused (a cycle or too deep)", t->name,
                    t->parent);
        }
    }
}

/* The fair tree's last ranks onto the tenants (for GET /v1/tenants). mu held. */
static void publish_fair(placer *pl, ctl *c)
{
    for (size_t i = 0; i < c->ntenants; i++) {
        ctl_tenant *t = c->tenants[i];
        int id, rank;
        double fs;
        if (cr_sched_tenant_find(pl->s, t->name, &id) == 0 &&
            cr_sched_tenant_fair(pl->s, id, &rank, &fs) == 0) {
            t->fair_rank = rank;
            t->level_fs = fs;
        } else {
            t->fair_rank = -1;
            t->level_fs = NAN;
        }
    }
}

static void *placer_new(ctl *c)
{
    placer *pl = cr_calloc(1, sizeof *pl);
    cr_sched_config cfg;
    cr_sched_policy pol = CR_SCHED_PRIORITY;
    if (cr_sched_policy_parse(c->cfg.policy, &pol) != 0) {
        cr_warn("sched: unknown policy '%s', using priority", c->cfg.policy);
    }
    cr_sched_config_default(&cfg, pol);
    cfg.round_ns = c->cfg.round_s * CR_NS_PER_SEC;
    cfg.suspend_hold = true; /* a suspended job resumes once its run exited */
    cfg.default_time_ns = c->cfg.default_time_s * CR_NS_PER_SEC;
    /* (mig_reclaim stays off: the agents cannot switch a GPU's MIG mode) */
    if (cr_sched_new(&cfg, &pl->s) != 0) {
        free(pl);
        return NULL;
    }
    cr_rng_seed(&pl->rng, 42);
    pl->au = ctl_auto_new(c->cfg.prices);
    ctl_auto_set_learn(pl->au, ctl_learn_lookup, c); /* a tenant's own measurements */
    pl->hetero = pol == CR_SCHED_HETERO;
    pl->rounds = pol == CR_SCHED_ROUNDS;
    return pl;
}

static void placer_free(void *p)
{
    placer *pl = p;
    if (pl) {
        free(pl->held);
        cr_sched_free(pl->s);
        ctl_auto_free(pl->au);
        free(pl->cpu_ids);
        free(pl->ids);
        free(pl->rhash);
        free(pl);
    }
}

/* At start-up: running jobs back into the scheduler where they were. */
static void restore_running(placer *pl, ctl *c, cr_store_txn *txn, int64_t now)
{
    size_t slot = 0;
    for (ctl_job *j; (j = ctl_job_next(c, &slot));) {
        if (ctl_job_terminal(j) || j->in_sched) {
            continue;
        }
        cr_sched_job_spec sp;
        job_req r;
        double tput[CR_SCHED_MAX_TYPES];
        req_of(j, &r);
        if (j->state == JS_PENDING && ctl_batch_has_gate(j)) {
            ctl_batch_admit(c, j); /* the gate first (dependencies, throttle, begin) */
            continue;
        }
        if (j->gpus == 0 && j->state != JS_HELD) {
            /* No GPU: nothing of the GPU scheduler's to restore. */
            bool here = j->state == JS_PENDING || j->nplace == 1;
            for (size_t k = 0; k < j->nplace; k++) {
                ctl_node *n = ctl_node_find(c, j->place[k].node);
                here = here && n && n->in_sched;
            }
            if (!here) {
                j->requeue_requested = true;
                ctl_job_ended(c, txn, j, 0, 0, "placement could not be restored after restart",
                              true);
                continue;
            }
            j->in_sched = true;
            CR_GROW(pl->cpu_ids, pl->ncpu, pl->capcpu);
            pl->cpu_ids[pl->ncpu++] = j->id;
            continue;
        }
        if (j->state == JS_PENDING) {
            mask_of(c, j, &r);
            spec_of(pl, &r, &sp, tput);
            /* Suspended before the restart, its run perhaps still writing its
             * checkpoint: held until that run's exit is reported (or its
             * deadline passes), as before the restart. */
            sp.suspend_held = j->susp_run > 0;
            if (cr_sched_job_add(pl->s, &sp, now) == 0) {
                j->in_sched = true;
                if (sp.suspend_held) {
                    CR_GROW(pl->held, pl->nheld, pl->capheld);
                    pl->held[pl->nheld++] = (struct held_rec){
                        j->id, now + (c->cfg.grace_s + c->cfg.lost_after_s) * CR_NS_PER_SEC};
                }
            }
            free(r.mask);
            free(r.prefer);
            continue;
        }
        spec_of(pl, &r, &sp, tput);
        if (j->state == JS_HELD) {
            continue;
        }
        cr_sched_slot slots[256];
        size_t ns = 0;
        bool ok = j->nplace > 0;
        for (size_t k = 0; ok && k < j->nplace; k++) {
            ctl_node *n = ctl_node_find(c, j->place[k].node);
            if (!n || !n->in_sched) {
                ok = false;
                break;
            }
            for (size_t q = 0; q < j->place[k].ngpus && ns < 256; q++) {
                for (size_t g = 0; g < n->ngpus; g++) {
                    if (n->gpus[g].index == j->place[k].gpus[q]) {
                        /* a fractional task holds its share of the GPU */
                        uint64_t gm = n->gpus[g].mem_bytes;
                        int milli = sp.gpu_milli        ? sp.gpu_milli
                                    : !sp.gpu_mem_bytes ? 0
                                    : !gm || sp.gpu_mem_bytes >= gm
                                        ? 1000
                                        : (int)((sp.gpu_mem_bytes * 1000 + gm - 1) / gm);
                        slots[ns++] = (cr_sched_slot){.node = n->sched_idx,
                                                      .gpu = (uint16_t)g,
                                                      .mig_start = -1,
                                                      .milli = (uint16_t)milli};
                    }
                }
            }
        }
        int type = sp.gpu_type;
        if (*j->run_type) {
            cr_sched_gpu_type(pl->s, j->run_type, &type);
        }
        /* MIG: the instance each slot held (its start slice was stored). */
        size_t si = 0;
        for (size_t k = 0; ok && k < j->nplace; k++) {
            const ctl_place *pp = &j->place[k];
            int cs = 0, ms = 0;
            if (*pp->mig_profile &&
                (type < 0 || cr_sched_mig_profile_get(pl->s, type, pp->mig_profile, &cs, &ms))) {
                ok = false;
            }
            for (size_t q = 0; ok && q < pp->ngpus && si < ns; q++, si++) {
                if (*pp->mig_profile) {
                    ok = pp->mig_start[q] >= 0;
                    slots[si].mig_start = pp->mig_start[q];
                    slots[si].mig_mem = (uint8_t)ms;
                    slots[si].mig_compute = (uint8_t)cs;
                }
            }
        }
        if (ok && type >= 0 &&
            cr_sched_job_restore(pl->s, &sp, type, slots, ns, j->start_ns, false) == 0) {
            j->in_sched = true;
            continue;
        }
        /* Cannot restore where it was: run it again. */
        j->requeue_requested = true;
        ctl_job_ended(c, txn, j, 0, 0, "placement could not be restored after restart", true);
    }
}

/* A queued job change copied out under mu, applied without it. */
enum { OP_RESPEC = 100 }; /* internal: re-add a pending auto job (new GPU types) */
typedef struct op_copy {
    int op;
    job_req r; /* CTL_SCHED_ADD, OP_RESPEC */
} op_copy;

/* Suspended job id may resume: tell the scheduler, forget its deadline. */
static void held_drop(placer *pl, int64_t id)
{
    cr_sched_job_resumable(pl->s, (uint64_t)id);
    for (size_t i = 0; i < pl->nheld; i++) {
        if (pl->held[i].id == id) {
            pl->held[i] = pl->held[--pl->nheld];
            break;
        }
    }
}

/* A decision copied out of the cycle (its pointers die at the next call). */
typedef struct dec_copy {
    cr_sched_action action;
    uint64_t job;
    int gpu_type;
    bool backfilled, borrowed;
    size_t nslots;
    cr_sched_slot *slots;             /* owned */
    char node_names[8][CTL_NAME_MAX]; /* names of the first nodes used (slot order) */
    uint64_t preempted_for;
    char reason[CR_SCHED_REASON_MAX];
    /* Dynamic MIG: the start rewrote its GPU's layout (slot 0's GPU) to these
     * instances; nmig = -1 when it did not. */
    int nmig, mig_start[8], mig_mem[8], mig_compute[8];
    const char *mig_name[8]; /* profile names of the scheduler's (borrowed) */
} dec_copy;

/* How cr_sched_job_reason starts when no type can run a job. */
#define NO_TYPE "no GPU type in the cluster can run it"

typedef struct reason_copy {
    int64_t id;
    char text[CR_SCHED_REASON_MAX];
} reason_copy;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    }
    return h ? h : 1;
}

static void track(placer *pl, int64_t id)
{
    CR_GROW(pl->ids, pl->nids, pl->capids);
    pl->rhash = cr_reallocarray(pl->rhash, pl->capids, sizeof *pl->rhash);
    pl->ids[pl->nids] = id;
    pl->rhash[pl->nids] = 0;
    pl->nids++;
}

/* Apply a start to memory. mu held. */
static void apply_start(ctl *c, placer *pl, cr_store_txn *txn, const dec_copy *d, ctl_job *j,
                        int64_t now, ctl_node ***bump, size_t *nbump, size_t *capbump)
{
    free(j->place);
    j->place = NULL;
    j->nplace = 0;
    if (d->nslots == 0 && d->node_names[0][0]) {
        /* a job without GPUs (place_cpu_jobs): its node only */
        j->place = cr_calloc(1, sizeof *j->place);
        j->nplace = 1;
        snprintf(j->place[0].node, sizeof j->place[0].node, "%s", d->node_names[0]);
    }
    for (size_t s = 0; s < d->nslots; s++) {
        const cr_sched_slot *sl = &d->slots[s];
        const char *name = s < 8 ? d->node_names[s] : NULL;
        cr_sched_node_info ni;
        if (!name || !*name) {
            if (cr_sched_node_info_get(pl->s, sl->node, &ni) != 0) {
                continue;
            }
            name = ni.name;
        }
        ctl_place *pp = NULL;
        for (size_t k = 0; k < j->nplace; k++) {
            if (strcmp(j->place[k].node, name) == 0) {
                pp = &j->place[k];
            }
        }
        if (!pp) {
            j->place = cr_reallocarray(j->place, j->nplace + 1, sizeof *j->place);
            pp = &j->place[j->nplace++];
            memset(pp, 0, sizeof *pp);
            snprintf(pp->node, sizeof pp->node, "%s", name);
            if (sl->mig_start >= 0) {
                snprintf(pp->mig_profile, sizeof pp->mig_profile, "%s", j->mig_profile);
            }
        }
        ctl_node *n = ctl_node_find(c, name);
        int gidx = n && sl->gpu < n->ngpus ? n->gpus[sl->gpu].index : sl->gpu;
        if (pp->ngpus < 64) {
            pp->mig_start[pp->ngpus] = sl->mig_start;
            pp->gpus[pp->ngpus++] = gidx;
        }
        if (n && sl->mig_start < 0 && !sl->milli && sl->gpu < n->ngpus) {
            n->gpus[sl->gpu].alloc_job = j->id; /* (shared GPUs have no one holder) */
        }
    }
    if (d->nmig >= 0 && d->nslots > 0) {
        /* Dynamic MIG: the node is asked for the new layout with the job. */
        ctl_node *n = ctl_node_find(c, d->node_names[0]);
        if (n && d->slots[0].gpu < n->ngpus) {
            const char *names[8];
            for (int k = 0; k < d->nmig && k < 8; k++) {
                bool mine = d->mig_start[k] == d->slots[0].mig_start;
                names[k] = mine ? j->mig_profile : d->mig_name[k];
            }
            ctl_mig_want_build(&n->gpus[d->slots[0].gpu], d->nmig, d->mig_start, d->mig_mem,
                               d->mig_compute, names);
            cr_info("sched: node=%s gpu=%d: MIG layout rewritten for job=%lld (idle instances "
                    "destroyed, a %s made)",
                    n->name, n->gpus[d->slots[0].gpu].index, (long long)j->id, j->mig_profile);
        }
    }
    if (j->nplace) {
        snprintf(j->last_node, sizeof j->last_node, "%s", j->place[0].node);
        cr_buf nl;
        cr_buf_init(&nl);
        for (size_t k = 0; k < j->nplace; k++) {
            cr_buf_printf(&nl, "%s%s", k ? "," : "", j->place[k].node);
        }
        free(j->last_nodes);
        j->last_nodes = cr_buf_take(&nl);
        bool launcher;
        j->last_tpn = ctl_batch_tasks_per_node(j, j->place[0].ngpus, &launcher);
    }
    const char *tname = cr_sched_gpu_type_name(pl->s, d->gpu_type);
    snprintf(j->run_type, sizeof j->run_type, "%s",
             j->gpus == 0 ? "none"
             : tname      ? tname
                          : j->gpu_type);
    j->state = JS_RUNNING;
    j->start_unstored = true; /* in no desired state until its row is durable */
    j->runs++;
    j->susp_run = 0;                        /* a new run: no suspended one is awaited any more */
    j->start_ns = j->acct_ns = cr_now_ns(); /* shown and persisted */
    j->start_mono_ns = j->acct_mono_ns = cr_mono_ns(); /* measured */
    j->end_ns = 0;
    j->cancel_requested = j->requeue_requested = false;
    j->sig_name[0] = '\0'; /* a signal asked of an earlier run is not this run's */
    j->sig_at = 0;
    ctl_job_set_reason(j, "");
    cr_buf b;
    cr_buf_init(&b);
    if (j->gpus) {
        cr_buf_printf(&b, "%d x %s on", j->gpus, j->run_type);
    } else {
        cr_buf_puts(&b, "no GPU on");
    }
    for (size_t k = 0; k < j->nplace; k++) {
        cr_buf_printf(&b, "%s %s[", k ? "," : "", j->place[k].node);
        for (size_t g = 0; g < j->place[k].ngpus; g++) {
            cr_buf_printf(&b, "%s%d", g ? "," : "", j->place[k].gpus[g]);
        }
        cr_buf_puts(&b, "]");
        ctl_node *n = ctl_node_find(c, j->place[k].node);
        if (n) {
            ctl_node_add_job(n, j->id);
            CR_GROW(*bump, *nbump, *capbump);
            (*bump)[(*nbump)++] = n;
        }
    }
    if (d->backfilled) {
        cr_buf_puts(&b, "; backfilled ahead of a reservation");
    }
    if (d->borrowed) {
        cr_buf_puts(&b, "; on borrowed capacity above the tenant quota");
    }
    if (d->nmig >= 0) {
        cr_buf_printf(&b,
                      "; MIG repartition: idle instances of the GPU destroyed and a %s made "
                      "for it (busy ones untouched)",
                      j->mig_profile);
    }
    if (d->nslots == 1 && d->slots[0].milli) {
        cr_buf_printf(&b, "; a %.3g share of the GPU", d->slots[0].milli / 1000.0);
        if (j->gpu_mem_bytes) {
            cr_buf_printf(&b, " with %.3g GB of its memory", (double)j->gpu_mem_bytes / 1e9);
        }
        cr_buf_puts(&b, ", shared with other fractional tasks (the agent's \"shared\" event "
                        "says how: MPS limits or time-sliced)");
    }
    job_req r;
    req_of(j, &r);
    char why[320] = "";
    if (j->gpus > 0) {
        ctl_auto_why(pl->au, pl->s, &r.hints, r.tenant, d->gpu_type, why, sizeof why);
    }
    if (*why) {
        cr_buf_printf(&b, "; %s", why);
    }
    /* The plan reaches the job (CORRAL_TP, ...): for an auto job and for
     * any job whose model hints the advisor can plan on the type it got. */
    ctl_auto_hints ph;
    ctl_auto_plan_hints_of(j->mig_profile, j->kind, json_object_get(j->spec, "model"), j->gpus,
                           &ph);
    if (ctl_auto_plan(pl->au, &ph, j->run_type, &j->plan)) {
        cr_buf_printf(&b, "; plan %s", j->plan.text);
    }
    atomic_fetch_add(&c->jobs_started, 1);
    ctl_obs_started(j, now);
    ctl_job_persist(c, txn, j, "started", cr_buf_str(&b));
    cr_buf_fini(&b);
    ctl_job_changed(c, j);
}

/* Apply a preemption to memory: the job is pending again and its nodes
 * stop it (SIGTERM, grace, SIGKILL). mu held. */
static void apply_preempt(ctl *c, cr_store_txn *txn, const dec_copy *d, ctl_job *j, int64_t now,
                          ctl_node ***bump, size_t *nbump, size_t *capbump)
{
    (void)now;
    ctl_job_account(c, txn, j, cr_now_ns());
    for (size_t k = 0; k < j->nplace; k++) {
        ctl_node *n = ctl_node_find(c, j->place[k].node);
        if (!n) {
            continue;
        }
        ctl_node_del_job(n, j->id);
        for (size_t g = 0; g < n->ngpus; g++) {
            if (n->gpus[g].alloc_job == j->id) {
                n->gpus[g].alloc_job = 0;
            }
        }
        CR_GROW(*bump, *nbump, *capbump);
        (*bump)[(*nbump)++] = n;
    }
    free(j->place);
    j->place = NULL;
    j->nplace = 0;
    j->state = JS_PENDING;
    j->start_ns = 0;
    char why[CR_SCHED_REASON_MAX + 64];
    if (d->preempted_for == 0) {
        /* the policy's own choice (rounds): the agent sends the job its
         * checkpoint signal; the next run resumes (CORRAL_RESUME=1) */
        snprintf(why, sizeof why, "%s; SIG%s sent, %llds to checkpoint", d->reason, j->ckpt_signal,
                 (long long)c->cfg.grace_s);
        ctl_job_set_reason(j, "suspended (checkpointed); resumes when a round leases it GPUs");
        ctl_job_persist(c, txn, j, "suspended", why);
        ctl_job_changed(c, j);
        return;
    }
    snprintf(why, sizeof why, "%s (for job %llu)", d->reason, (unsigned long long)d->preempted_for);
    ctl_job_set_reason(j, "preempted");
    ctl_job_persist(c, txn, j, "preempted", why);
    ctl_job_changed(c, j);
}

/* A start of this pass: the job and the run it was given. */
typedef struct start_rec {
    int64_t id;
    int run;
} start_rec;

/* The CPUs job j holds on a node where it has node_gpus GPUs: its "cpus",
 * else cpus_per_gpu per GPU (one GPU's worth without GPUs), else 1. */
static double job_cpus(const ctl *c, const ctl_job *j, size_t node_gpus)
{
    json_t *x = json_object_get(j->spec, "cpus");
    if (json_is_number(x)) {
        return json_number_value(x);
    }
    if (c->cfg.cpus_per_gpu > 0) {
        return c->cfg.cpus_per_gpu * (node_gpus ? (double)node_gpus : 1.0);
    }
    return 1.0;
}

/* Node n's CPUs not held by its running jobs (negative: over), and whether
 * one of them has it whole (--exclusive). mu held. */
static double node_cpus_free(ctl *c, const ctl_node *n, bool *exclusive)
{
    double used = 0;
    *exclusive = false;
    for (size_t k = 0; k < n->njobs; k++) {
        const ctl_job *o = ctl_job_get(c, n->jobs[k]);
        if (!o || ctl_job_terminal(o)) {
            continue;
        }
        for (size_t q = 0; q < o->nplace; q++) {
            if (strcmp(o->place[q].node, n->name) == 0) {
                used += job_cpus(c, o, o->place[q].ngpus);
            }
        }
        *exclusive = *exclusive || json_is_true(json_object_get(o->spec, "exclusive"));
    }
    return (double)n->cpus - used;
}

/*
 * Jobs without GPUs (gpus 0; docs/scheduler.md, "Jobs without GPUs"). The
 * GPU scheduler counts GPUs, so these are placed here, in the order they
 * were queued: on an up node the job may use (node filter, partition)
 * whose CPUs not held by its running jobs cover the job's (a node that
 * registered no CPU count is taken to have room); among those, the node
 * with the fewest free GPUs (GPU nodes stay free for GPU work), then the
 * fewest free CPUs (packed), then the first registered. A job that has no
 * such node is given the reason. Starts are appended to st. mu held.
 */
static void place_cpu_jobs(ctl *c, placer *pl, cr_store_txn *txn, int64_t now, ctl_node ***bump,
                           size_t *nbump, size_t *capbump, start_rec **st, size_t *nst,
                           size_t *capst)
{
    size_t w = 0;
    for (size_t i = 0; i < pl->ncpu; i++) {
        ctl_job *j = ctl_job_get(c, pl->cpu_ids[i]);
        if (!j || ctl_job_terminal(j) || !j->in_sched || j->gpus != 0) {
            continue; /* gone from the queue (a later add tracks it again) */
        }
        pl->cpu_ids[w++] = pl->cpu_ids[i];
        if (j->state != JS_PENDING) {
            continue;
        }
        double want = job_cpus(c, j, 0);
        bool whole = json_is_true(json_object_get(j->spec, "exclusive"));
        ctl_node *best = NULL;
        size_t best_gpus = 0;
        double best_cpus = 0;
        for (size_t k = 0; k < c->nnodes; k++) {
            ctl_node *n = c->nodes[k];
            if (!n->in_sched || n->state != NS_UP || n->drained || n->deleting ||
                n->pending_approval || n->loss_pending ||
                (ctl_batch_has_node_filter(j) && !ctl_batch_node_allowed(c, j, n))) {
                continue;
            }
            bool excl;
            double cfree = node_cpus_free(c, n, &excl);
            if (excl || (whole && n->njobs > 0) || (n->cpus > 0 && cfree < want)) {
                continue;
            }
            size_t gfree = 0;
            for (size_t g = 0; g < n->ngpus; g++) {
                gfree += n->gpus[g].alloc_job == 0 && strcmp(n->gpus[g].health, "ok") == 0;
            }
            if (!best || gfree < best_gpus || (gfree == best_gpus && cfree < best_cpus)) {
                best = n;
                best_gpus = gfree;
                best_cpus = cfree;
            }
        }
        if (!best) {
            char why[160];
            snprintf(why, sizeof why,
                     "no GPU requested: no node it may use has %.3g CPUs free (or is up)", want);
            if (!j->reason || strcmp(j->reason, why) != 0) {
                ctl_job_set_reason(j, why);
            }
            continue;
        }
        dec_copy d;
        memset(&d, 0, sizeof d);
        d.action = CR_SCHED_START;
        d.job = (uint64_t)j->id;
        d.gpu_type = -1;
        d.nmig = -1;
        snprintf(d.node_names[0], sizeof d.node_names[0], "%s", best->name);
        apply_start(c, pl, txn, &d, j, now, bump, nbump, capbump);
        CR_GROW(*st, *nst, *capst);
        (*st)[*nst].id = j->id;
        (*st)[*nst].run = j->runs;
        (*nst)++;
    }
    pl->ncpu = w;
}

/* After a pass's commit (rc): its starts become visible to the agents
 * (their nodes are bumped next), or, not stored, are taken back: the job
 * is pending again without using a retry (a cancel that came meanwhile
 * ends it), and the scheduler tries again. A start already ended
 * meanwhile (its node lost...) is left alone. mu held. */
static void starts_settle(ctl *c, const start_rec *st, size_t n, int rc)
{
    cr_store_txn *txn = NULL;
    char why[160];
    snprintf(why, sizeof why, "its start could not be stored (%s)", cr_strerror(rc));
    for (size_t i = 0; i < n; i++) {
        ctl_job *j = ctl_job_get(c, st[i].id);
        if (!j || !j->start_unstored || j->runs != st[i].run) {
            continue;
        }
        if (rc == 0) {
            j->start_unstored = false;
            continue;
        }
        if (!txn) {
            txn = cr_store_txn_new();
            cr_store_txn_splittable(txn);
        }
        ctl_job_ended(c, txn, j, 0, 0, why, true); /* clears start_unstored */
    }
    if (rc != 0 && n > 0) {
        cr_warn("sched: %zu starts not stored (%s): taken back, the next pass tries again in "
                "%d ms",
                n, cr_strerror(rc), CTL_START_RETRY_MS);
    }
    if (txn) {
        cr_store_submit(c->store, txn, NULL, NULL);
    }
}

static int placer_cycle(void *p, ctl *c, bool *restored, int64_t *compute_ns)
{
    placer *pl = p;
    int64_t t_start = cr_mono_ns();
    int64_t now = ctl_clock_ns(c); /* never steps (cr_time.h) */
    cr_store_txn *txn = cr_store_txn_new();
    cr_store_txn_splittable(txn); /* per-job allocations and reasons: independent */
    ctl_node **bump = NULL;
    size_t nbump = 0, capbump = 0;
    op_copy *ops = NULL;
    size_t nops = 0;
    int64_t *invalid = NULL;
    size_t ninvalid = 0, capinvalid = 0;
    dec_copy *dec = NULL;
    reason_copy *rs = NULL;
    size_t nrs = 0, caprs = 0;
    start_rec *started = NULL;
    size_t nstarted = 0, capstarted = 0;

    /* 1. Under mu: node and tenant changes (rare) and a copy of the queue. */
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->nnodes; i++) {
        if (c->nodes[i]->sched_dirty) {
            c->nodes[i]->sched_dirty = false;
            sync_node(pl, c, c->nodes[i], now);
        }
    }
    if (c->tenants_dirty) {
        c->tenants_dirty = false;
        sync_tenants(pl, c);
    }
    if (!*restored) {
        restore_running(pl, c, txn, now);
        pl->ntypes = cr_sched_gpu_type_count(pl->s); /* restored against these */
        size_t slot = 0;
        for (const ctl_job *j; (j = ctl_job_next(c, &slot));) {
            if (j->in_sched) {
                track(pl, j->id);
            }
        }
        *restored = true;
        c->sched_restored = true;
        pthread_cond_broadcast(&c->cv); /* ctl_sched_start waits for it */
    }
    size_t capops = c->nsched_ops;
    ops = cr_calloc(capops ? capops : 1, sizeof *ops);
    capops = capops ? capops : 1;
    /* A GPU type the cluster did not have: the pending auto jobs were
     * specified without it. Re-add them (before the queued changes, so
     * that a queued removal still wins). */
    int ntypes = cr_sched_gpu_type_count(pl->s);
    /* Likewise a node that joined: the pending jobs with a node filter (a
     * partition above all) had masks made without it. */
    uint64_t gen = 0, nin = 0;
    for (size_t i = 0; i < c->nnodes; i++) {
        if (c->nodes[i]->in_sched) {
            nin++;
            gen = c->nodes[i]->sched_idx + 1 > gen ? c->nodes[i]->sched_idx + 1 : gen;
        }
    }
    gen = gen << 32 | nin;
    bool new_nodes = gen != pl->node_gen;
    pl->node_gen = gen;
    if (ntypes != pl->ntypes || new_nodes) {
        bool new_types = ntypes != pl->ntypes;
        pl->ntypes = ntypes;
        size_t slot = ctl_first_active_slot(c);
        for (ctl_job *j; (j = ctl_job_next(c, &slot));) {
            bool filtered = new_nodes && ctl_batch_has_node_filter(j);
            if (j->in_sched && j->state == JS_PENDING &&
                ((new_types && strcmp(j->gpu_type, "auto") == 0) || filtered)) {
                CR_GROW(ops, nops, capops);
                ops[nops].op = OP_RESPEC;
                req_of(j, &ops[nops].r);
                mask_of(c, j, &ops[nops].r);
                if (ops[nops].r.hints.active || filtered) {
                    nops++;
                } else {
                    CR_FREE(ops[nops].r.mask);
                    CR_FREE(ops[nops].r.prefer);
                }
            }
        }
    }
    /* A node re-added under a new index: the pending jobs with a node
     * filter (--nodelist, --exclude, --constraint) get their mask again
     * (unless the new-node pass above just did it). */
    bool stale = pl->masks_stale && !new_nodes;
    pl->masks_stale = false;
    if (stale) {
        size_t slot = ctl_first_active_slot(c);
        for (ctl_job *j; (j = ctl_job_next(c, &slot));) {
            if (j->in_sched && j->state == JS_PENDING && ctl_batch_has_node_filter(j)) {
                CR_GROW(ops, nops, capops);
                memset(&ops[nops], 0, sizeof ops[nops]);
                ops[nops].op = OP_RESPEC;
                req_of(j, &ops[nops].r);
                mask_of(c, j, &ops[nops].r);
                nops++;
            }
        }
    }
    for (size_t i = 0; i < c->nsched_ops; i++) {
        ctl_sched_op op = c->sched_ops[i];
        ctl_job *j = ctl_job_get(c, op.id);
        CR_GROW(ops, nops, capops);
        op_copy *o = &ops[nops];
        memset(o, 0, sizeof *o);
        o->op = op.op;
        o->r.id = op.id;
        if (op.op == CTL_SCHED_REMOVE || !j) {
            o->op = CTL_SCHED_REMOVE;
            if (j) {
                j->in_sched = false;
            }
            nops++;
            continue;
        }
        if (op.op == CTL_SCHED_RESUMABLE) {
            nops++;
            continue;
        }
        if (op.op == CTL_SCHED_REQUEUE) {
            if (j->in_sched) {
                nops++;
            } else if (j->state == JS_PENDING) {
                o->op = CTL_SCHED_ADD; /* not known (e.g. restore failed): add it */
            } else {
                continue;
            }
        }
        if (o->op == CTL_SCHED_ADD) {
            if (j->state != JS_PENDING || j->in_sched) {
                continue;
            }
            j->in_sched = true;
            if (j->gpus == 0) {
                /* no GPU: placed by place_cpu_jobs, not the GPU scheduler */
                CR_GROW(pl->cpu_ids, pl->ncpu, pl->capcpu);
                pl->cpu_ids[pl->ncpu++] = j->id;
                continue;
            }
            req_of(j, &o->r);
            mask_of(c, j, &o->r);
            nops++;
        }
    }
    c->nsched_ops = 0;
    pthread_mutex_unlock(&c->mu);

    /* 2. Without mu: apply, cycle, reasons. The API keeps running. */
    size_t tracked_before = pl->nids;
    for (size_t i = 0; i < nops; i++) {
        const op_copy *o = &ops[i];
        uint64_t id = (uint64_t)o->r.id;
        cr_sched_job_info info;
        cr_sched_job_spec sp;
        double tput[CR_SCHED_MAX_TYPES];
        if (o->op == CTL_SCHED_RESUMABLE) {
            held_drop(pl, o->r.id);
        } else if (o->op == CTL_SCHED_REMOVE) {
            cr_sched_job_remove(pl->s, id, now);
        } else if (o->op == CTL_SCHED_REQUEUE) {
            if (cr_sched_job_info_get(pl->s, id, &info) == 0 && info.state == CR_JOB_RUNNING) {
                cr_sched_job_requeue(pl->s, id, now);
            }
        } else if (o->op == OP_RESPEC) {
            if (cr_sched_job_info_get(pl->s, id, &info) == 0 && info.state == CR_JOB_PENDING) {
                spec_of(pl, &o->r, &sp, tput);
                sp.attained_gpu_ns = info.attained_gpu_ns;
                cr_sched_job_remove(pl->s, id, now);
                if (cr_sched_job_add(pl->s, &sp, now) != 0) {
                    CR_GROW(invalid, ninvalid, capinvalid);
                    invalid[ninvalid++] = o->r.id;
                }
            }
        } else {
            spec_of(pl, &o->r, &sp, tput);
            if (cr_sched_job_add(pl->s, &sp, now) == 0) {
                track(pl, o->r.id);
            } else {
                CR_GROW(invalid, ninvalid, capinvalid);
                invalid[ninvalid++] = o->r.id;
            }
        }
    }
    for (size_t i = 0; i < pl->nheld;) {
        if (now >= pl->held[i].until_ns) {
            cr_warn("job=%lld: its suspended run did not report its exit in time: resumable",
                    (long long)pl->held[i].id);
            held_drop(pl, pl->held[i].id);
        } else {
            i++;
        }
    }
    const cr_sched_decision *d = NULL;
    int nd = cr_sched_cycle(pl->s, now, &pl->rng, &d);
    dec = cr_calloc(nd > 0 ? (size_t)nd : 1, sizeof *dec);
    for (int i = 0; i < nd; i++) {
        dec[i].action = d[i].action;
        dec[i].job = d[i].job;
        dec[i].gpu_type = d[i].gpu_type;
        dec[i].backfilled = d[i].backfilled;
        dec[i].borrowed = d[i].borrowed;
        dec[i].preempted_for = d[i].preempted_for;
        dec[i].nmig = -1;
        if (d[i].mig_repartitioned && d[i].slot_count > 0) {
            const cr_sched_slot *s0 = &d[i].slots[0];
            cr_sched_gpu_info gi;
            dec[i].nmig = cr_sched_gpu_mig_layout(pl->s, s0->node, s0->gpu, dec[i].mig_start,
                                                  dec[i].mig_mem, dec[i].mig_compute);
            for (int k = 0; k < dec[i].nmig && k < 8; k++) {
                dec[i].mig_name[k] =
                    cr_sched_gpu_info_get(pl->s, s0->node, s0->gpu, &gi) == 0
                        ? cr_sched_mig_profile_name(pl->s, gi.type, dec[i].mig_compute[k],
                                                    dec[i].mig_mem[k])
                        : NULL;
            }
        }
        snprintf(dec[i].reason, sizeof dec[i].reason, "%s", d[i].reason ? d[i].reason : "");
        dec[i].nslots = d[i].slot_count;
        dec[i].slots = cr_calloc(d[i].slot_count ? d[i].slot_count : 1, sizeof *dec[i].slots);
        if (d[i].slot_count) { /* a preemption has none (slots NULL: UB in memcpy) */
            memcpy(dec[i].slots, d[i].slots, d[i].slot_count * sizeof *dec[i].slots);
        }
        for (size_t s = 0; s < d[i].slot_count && s < 8; s++) {
            cr_sched_node_info ni;
            if (cr_sched_node_info_get(pl->s, d[i].slots[s].node, &ni) == 0) {
                snprintf(dec[i].node_names[s], sizeof dec[i].node_names[s], "%s", ni.name);
            }
        }
    }
    /* Pending reasons: the new jobs now, all of them at most once a second. */
    bool sweep = now - pl->last_reason_ns >= CR_NS_PER_SEC || nd > 0;
    size_t from = sweep ? 0 : tracked_before;
    if (sweep) {
        pl->last_reason_ns = now;
    }
    for (size_t i = from; i < pl->nids;) {
        char reason[CR_SCHED_REASON_MAX];
        int rc = cr_sched_job_reason(pl->s, (uint64_t)pl->ids[i], reason, sizeof reason);
        if (rc == CR_ENOENT) {
            pl->ids[i] = pl->ids[pl->nids - 1];
            pl->rhash[i] = pl->rhash[pl->nids - 1];
            pl->nids--;
            continue;
        }
        if (rc >= 0) {
            uint64_t h = hash_str(reason);
            if (h != pl->rhash[i]) {
                pl->rhash[i] = h;
                CR_GROW(rs, nrs, caprs);
                rs[nrs].id = pl->ids[i];
                snprintf(rs[nrs].text, sizeof rs[nrs].text, "%s", reason);
                nrs++;
            }
        } else {
            pl->rhash[i] = 0; /* running: a later reason is news again */
        }
        i++;
    }

    /* 3. Under mu: the decisions and reasons into memory and the store. */
    pthread_mutex_lock(&c->mu);
    publish_fair(pl, c);
    for (size_t i = 0; i < ninvalid; i++) {
        ctl_job *j = ctl_job_get(c, invalid[i]);
        if (j) {
            j->in_sched = false;
            ctl_job_set_reason(j, "cannot be scheduled: the request does not fit this cluster");
        }
    }
    for (int i = 0; i < nd; i++) {
        ctl_job *j = ctl_job_get(c, (int64_t)dec[i].job);
        if (!j) {
            continue;
        }
        if (dec[i].action == CR_SCHED_PREEMPT) {
            /* (a job whose reported end is being stored has exited: its
             * GPUs are free, its end stands) */
            if ((j->state == JS_RUNNING || j->state == JS_COMPLETING) && !ctl_job_end_held(j)) {
                if (dec[i].preempted_for == 0) {
                    /* a suspension: resumable once this run exits */
                    j->susp_run = j->runs;
                    CR_GROW(pl->held, pl->nheld, pl->capheld);
                    pl->held[pl->nheld++] = (struct held_rec){
                        j->id, now + (c->cfg.grace_s + c->cfg.lost_after_s) * CR_NS_PER_SEC};
                }
                apply_preempt(c, txn, &dec[i], j, now, &bump, &nbump, &capbump);
            } else if (dec[i].preempted_for == 0) {
                cr_sched_job_resumable(pl->s, dec[i].job); /* it ended meanwhile */
            }
        } else if (j->state == JS_PENDING) {
            apply_start(c, pl, txn, &dec[i], j, now, &bump, &nbump, &capbump);
        }
        /* else: cancelled or held meanwhile; its removal is queued. */
    }
    for (int i = 0; i < nd; i++) {
        ctl_job *j = ctl_job_get(c, (int64_t)dec[i].job);
        if (j && j->start_unstored) {
            CR_GROW(started, nstarted, capstarted);
            started[nstarted].id = j->id;
            started[nstarted].run = j->runs;
            nstarted++;
        }
    }
    place_cpu_jobs(c, pl, txn, now, &bump, &nbump, &capbump, &started, &nstarted, &capstarted);
    size_t events = 0;
    for (size_t i = 0; i < nrs; i++) {
        ctl_job *j = ctl_job_get(c, rs[i].id);
        if (!j || j->state != JS_PENDING) {
            continue;
        }
        const char *text = rs[i].text;
        char refusal[1024];
        if (strncmp(text, NO_TYPE, strlen(NO_TYPE)) == 0 && strcmp(j->gpu_type, "auto") == 0) {
            /* The scheduler knows only that every type has throughput 0;
             * the advisor knows why. */
            job_req r;
            req_of(j, &r);
            if (ctl_auto_refusal(pl->au, pl->s, &r.hints, refusal, sizeof refusal)) {
                text = refusal;
            }
        }
        if (!j->reason || strcmp(text, j->reason) != 0) {
            ctl_job_set_reason(j, text);
            /* Reasons carry live numbers ("12 free") and change often: the
             * first one is an event, later ones at most every 5 minutes per
             * job (the current reason is always in the job object). */
            if (events < 10000 &&
                (j->reason_event_ns == 0 || now - j->reason_event_ns >= 300 * CR_NS_PER_SEC)) {
                cr_store_txn_event(txn, j->id, cr_now_ns(), "pending", text);
                j->reason_event_ns = now;
                events++;
            }
        }
    }
    /* 4. Allocations are durable before any agent hears of them: queued
     * under mu (the store sees them before any later change of the same
     * jobs), waited for without it. The wait for the disk is not the
     * scheduler's cost: it does not widen the gap. */
    *compute_ns = cr_mono_ns() - t_start;
    /* The nodes to tell, by name: one may be deleted while mu is free. */
    char(*names)[CTL_NAME_MAX] = cr_calloc(nbump ? nbump : 1, sizeof *names);
    size_t nnames = 0;
    for (size_t i = 0; i < nbump; i++) {
        bool seen = false;
        for (size_t k = 0; k < i; k++) {
            seen = seen || bump[k] == bump[i];
        }
        if (!seen) {
            snprintf(names[nnames++], sizeof *names, "%s", bump[i]->name);
        }
    }
    ctl_wait w;
    ctl_wait_submit(c, &w, txn);
    pthread_mutex_unlock(&c->mu);
    int rc = ctl_wait_end(&w);
    if (nnames || nstarted) {
        pthread_mutex_lock(&c->mu);
        starts_settle(c, started, nstarted, rc);
        for (size_t i = 0; i < nnames; i++) {
            ctl_node *n = ctl_node_find(c, names[i]);
            if (n) {
                ctl_node_bump(c, n);
            }
        }
        pthread_mutex_unlock(&c->mu);
    }
    free(names);
    if (rc != 0 && nstarted > 0 && *compute_ns < CTL_START_RETRY_MS * CR_NS_PER_MS / 4) {
        *compute_ns = CTL_START_RETRY_MS * CR_NS_PER_MS / 4; /* the next pass in a second */
    }
    for (int i = 0; i < nd; i++) {
        free(dec[i].slots);
    }
    free(dec);
    free(rs);
    free(invalid);
    for (size_t i = 0; i < nops; i++) {
        free(ops[i].r.mask);
        free(ops[i].r.prefer);
    }
    free(ops);
    free(bump);
    free(started);
    return nd;
}

/* When the policy wants a cycle though nothing changed (rounds: the next
 * round), on ctl_clock_ns; INT64_MAX if never. */
static int64_t placer_wake_ns(void *p)
{
    placer *pl = p;
    int64_t t = cr_sched_next_cycle_ns(pl->s);
    for (size_t i = 0; i < pl->nheld; i++) {
        t = pl->held[i].until_ns < t ? pl->held[i].until_ns : t;
    }
    return t;
}

#else /* !CTL_HAVE_SCHED */

static void *placer_new(ctl *c)
{
    return c;
}

static void placer_free(void *p)
{
}

static int placer_cycle(void *p, ctl *c, bool *restored, int64_t *compute_ns)
{
    int64_t t0 = cr_mono_ns();
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->nsched_ops; i++) {
        ctl_job *j = ctl_job_get(c, c->sched_ops[i].id);
        if (j && j->state == JS_PENDING) {
            ctl_job_set_reason(j, "no scheduler in this build");
        }
    }
    c->nsched_ops = 0;
    pthread_mutex_unlock(&c->mu);
    *compute_ns = cr_mono_ns() - t0;
    return 0;
}

static int64_t placer_wake_ns(void *p)
{
    return INT64_MAX;
}

#endif

/*
 * The loop. A pass runs when something changed, but no sooner than
 * max(sched_interval_ms, 4 x the last pass's computing time, not counting
 * its wait for the disk) after the previous one: under a
 * burst of submissions the scheduler takes at most about a quarter of a
 * core and every pass sees a large batch. Timers run every 200 ms.
 */
static void *sched_main(void *arg)
{
    ctl *c = arg;
    void *pl = placer_new(c);
    bool restored = false;
    int64_t last_cycle = 0, last_cost = 0;
    if (!pl) {
        cr_error("sched: cannot create the scheduler");
    }
    pthread_mutex_lock(&c->mu);
    c->sched_wake = true;
    while (!c->stopping) {
        int64_t now = cr_mono_ns();
        int64_t gap = c->cfg.sched_interval_ms * CR_NS_PER_MS;
        if (4 * last_cost > gap) {
            gap = 4 * last_cost;
        }
        int64_t next_cycle = last_cycle + gap;
        if (!c->sched_wake || now < next_cycle) {
            int64_t until = c->sched_wake ? next_cycle : now + 200 * CR_NS_PER_MS;
            if (until > now + 200 * CR_NS_PER_MS) {
                until = now + 200 * CR_NS_PER_MS;
            }
            /* On CLOCK_MONOTONIC: a wall-clock step back must not stall
             * the timers (dead-node detection runs here). */
            cr_cond_wait_mono(&c->cv, &c->mu, until);
        }
        if (c->stopping) {
            break;
        }
        now = cr_mono_ns();
        if (pl && !c->sched_wake && ctl_clock_ns(c) >= placer_wake_ns(pl)) {
            c->sched_wake = true; /* the policy's own time (a round) */
        }
        bool run = c->sched_wake && now >= next_cycle;
        if (run) {
            c->sched_wake = false;
        }
        pthread_mutex_unlock(&c->mu);
        ctl_nodes_tick(c, now);
        ctl_nodes_reclaims(c);
        ctl_services_tick(c, now);
        ctl_audit_tick(c, now);
        ctl_state_tick(c, now);
        ctl_batch_tick(c);
        ctl_hist_tick(c, now);
        ctl_events_tick(c, now);
        if (run && pl) {
            int64_t t0 = cr_mono_ns();
            placer_cycle(pl, c, &restored, &last_cost);
            int64_t t1 = cr_mono_ns();
            cr_prom_hist_observe(&c->cycle_hist, (double)(t1 - t0) / 1e9);
            atomic_fetch_add(&c->sched_cycles, 1);
            last_cycle = t1;
        }
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    placer_free(pl);
    return NULL;
}

int ctl_sched_start(ctl *c)
{
    if (pthread_create(&c->sched_thread, NULL, sched_main, c) != 0) {
        return CR_EIO;
    }
    c->sched_started = true;
    /* Serve only once the stored nodes and running jobs are back in the
     * scheduler: a desired state asked for earlier would lack the MIG
     * instances' start slices (and so their UUIDs). Bounded, in case the
     * scheduler could not be created. */
    pthread_mutex_lock(&c->mu);
    int64_t until = cr_mono_ns() + 10 * CR_NS_PER_SEC;
    while (!c->sched_restored && cr_mono_ns() < until) {
        cr_cond_wait_mono(&c->cv, &c->mu, until);
    }
    pthread_mutex_unlock(&c->mu);
    return 0;
}

void ctl_sched_stop(ctl *c)
{
    if (!c->sched_started) {
        return;
    }
    pthread_mutex_lock(&c->mu);
    c->stopping = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->sched_thread, NULL);
    c->sched_started = false;
}
