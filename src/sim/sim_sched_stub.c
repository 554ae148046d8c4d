/*
 * sim_sched_stub.c - TEMPORARY stand-in for the scheduler core, compiled
 * only while src/sched has no library yet (see meson.build). It implements
 * just enough of cr_sched.h for the simulator's own tests: whole-GPU jobs,
 * strict FIFO without backfill, first fit over nodes; 'hetero' takes the
 * fastest type with room. Delete once the sched branch lands.
 */
#include "cr_sched.h"

#include "cr_alloc.h"
#include "cr_error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sjob {
    cr_sched_job_spec spec;
    double tput[CR_SCHED_MAX_TYPES];
    bool live, running;
    int type;
    cr_sched_slot *slots;
    size_t nslots;
    int64_t start;
} sjob;

typedef struct snode {
    char name[CR_SCHED_NAME_MAX];
    cr_sched_node_state st;
    size_t ngpus;
    int type[CR_SCHED_MAX_NODE_GPUS];
    bool bad[CR_SCHED_MAX_NODE_GPUS];
    uint64_t holder[CR_SCHED_MAX_NODE_GPUS];
} snode;

struct cr_sched {
    cr_sched_config cfg;
    char types[CR_SCHED_MAX_TYPES][CR_SCHED_NAME_MAX];
    int ntypes;
    char (*tenants)[CR_SCHED_NAME_MAX];
    size_t ntenants, tcap;
    snode *nodes;
    size_t nnodes, ncap;
    sjob *jobs; /* indexed by id */
    size_t jcap;
    uint64_t *queue; /* pending ids in submit order */
    size_t qlen, qcap;
    cr_sched_decision *dec;
    size_t ndec, deccap;
    uint64_t cycles;
};

static const char *pnames[] = {"fifo", "priority", "hetero", "las"};

int cr_sched_policy_parse(const char *name, cr_sched_policy *out)
{
    for (int i = 0; i < CR_SCHED_POLICY_COUNT; i++) {
        if (strcmp(name, pnames[i]) == 0) {
            *out = (cr_sched_policy)i;
            return 0;
        }
    }
    return CR_EINVAL;
}

const char *cr_sched_policy_name(cr_sched_policy p)
{
    return (p >= 0 && p < CR_SCHED_POLICY_COUNT) ? pnames[p] : "?";
}

void cr_sched_config_default(cr_sched_config *cfg, cr_sched_policy policy)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->policy = policy;
}

int cr_sched_new(const cr_sched_config *cfg, cr_sched **out)
{
    cr_sched *s = cr_calloc(1, sizeof *s);
    s->cfg = *cfg;
    *out = s;
    return 0;
}

void cr_sched_free(cr_sched *s)
{
    if (!s) {
        return;
    }
    for (size_t i = 0; i < s->jcap; i++) {
        free(s->jobs[i].slots);
    }
    free(s->jobs);
    free(s->nodes);
    free(s->tenants);
    free(s->queue);
    free(s->dec);
    free(s);
}

int cr_sched_gpu_type(cr_sched *s, const char *name, int *out_type)
{
    for (int i = 0; i < s->ntypes; i++) {
        if (strcmp(s->types[i], name) == 0) {
            *out_type = i;
            return 0;
        }
    }
    if (s->ntypes == CR_SCHED_MAX_TYPES) {
        return CR_ENOSPC;
    }
    snprintf(s->types[s->ntypes], CR_SCHED_NAME_MAX, "%s", name);
    *out_type = s->ntypes++;
    return 0;
}

int cr_sched_gpu_type_count(const cr_sched *s)
{
    return s->ntypes;
}

const char *cr_sched_gpu_type_name(const cr_sched *s, int type)
{
    return (type >= 0 && type < s->ntypes) ? s->types[type] : NULL;
}

int cr_sched_tenant(cr_sched *s, const char *name, int *out_tenant)
{
    for (size_t i = 0; i < s->ntenants; i++) {
        if (strcmp(s->tenants[i], name) == 0) {
            *out_tenant = (int)i;
            return 0;
        }
    }
    CR_GROW(s->tenants, s->ntenants, s->tcap);
    snprintf(s->tenants[s->ntenants], CR_SCHED_NAME_MAX, "%s", name);
    *out_tenant = (int)s->ntenants++;
    return 0;
}

int cr_sched_node_add(cr_sched *s, const cr_sched_node_spec *spec, uint32_t *out_node)
{
    if (spec->gpu_count > CR_SCHED_MAX_NODE_GPUS) {
        return CR_EINVAL;
    }
    CR_GROW(s->nodes, s->nnodes, s->ncap);
    snode *n = &s->nodes[s->nnodes];
    memset(n, 0, sizeof *n);
    snprintf(n->name, sizeof n->name, "%s", spec->name);
    n->st = spec->state;
    n->ngpus = spec->gpu_count;
    for (size_t g = 0; g < spec->gpu_count; g++) {
        n->type[g] = spec->gpus[g].type;
        n->bad[g] = spec->gpus[g].bad;
    }
    *out_node = (uint32_t)s->nnodes++;
    return 0;
}

uint32_t cr_sched_node_count(const cr_sched *s)
{
    return (uint32_t)s->nnodes;
}

int cr_sched_node_info_get(const cr_sched *s, uint32_t node, cr_sched_node_info *out)
{
    if (node >= s->nnodes) {
        return CR_ENOENT;
    }
    memset(out, 0, sizeof *out);
    out->name = s->nodes[node].name;
    out->state = s->nodes[node].st;
    out->gpu_count = (uint32_t)s->nodes[node].ngpus;
    return 0;
}

int cr_sched_gpu_info_get(const cr_sched *s, uint32_t node, uint32_t gpu, cr_sched_gpu_info *out)
{
    if (node >= s->nnodes || gpu >= s->nodes[node].ngpus) {
        return CR_ENOENT;
    }
    memset(out, 0, sizeof *out);
    out->type = s->nodes[node].type[gpu];
    out->bad = s->nodes[node].bad[gpu];
    out->job = s->nodes[node].holder[gpu];
    return 0;
}

int cr_sched_capacity(const cr_sched *s, int type, uint32_t *total, uint32_t *free_gpus)
{
    uint32_t t = 0, f = 0;
    for (size_t n = 0; n < s->nnodes; n++) {
        if (s->nodes[n].st != CR_NODE_UP) {
            continue;
        }
        for (size_t g = 0; g < s->nodes[n].ngpus; g++) {
            if (s->nodes[n].type[g] == type && !s->nodes[n].bad[g]) {
                t++;
                f += s->nodes[n].holder[g] == 0;
            }
        }
    }
    if (total) {
        *total = t;
    }
    if (free_gpus) {
        *free_gpus = f;
    }
    return 0;
}

int cr_sched_load_cluster(cr_sched *s, const char *text, size_t len, char *err, size_t errlen)
{
    snprintf(err, errlen, "cluster files need the real scheduler");
    return CR_ENOTSUP;
}

static sjob *job_get(cr_sched *s, uint64_t id)
{
    return (id < s->jcap && s->jobs[id].live) ? &s->jobs[id] : NULL;
}

static void release(cr_sched *s, sjob *j)
{
    for (size_t k = 0; k < j->nslots; k++) {
        s->nodes[j->slots[k].node].holder[j->slots[k].gpu] = 0;
    }
    CR_FREE(j->slots);
    j->nslots = 0;
    j->running = false;
}

static void enqueue(cr_sched *s, uint64_t id)
{
    /* Keep the queue in (submit, id) order. */
    CR_GROW(s->queue, s->qlen, s->qcap);
    size_t i = s->qlen++;
    const sjob *j = &s->jobs[id];
    while (i > 0) {
        const sjob *p = &s->jobs[s->queue[i - 1]];
        if (p->spec.submit_ns < j->spec.submit_ns ||
            (p->spec.submit_ns == j->spec.submit_ns && s->queue[i - 1] < id)) {
            break;
        }
        s->queue[i] = s->queue[i - 1];
        i--;
    }
    s->queue[i] = id;
}

int cr_sched_job_add(cr_sched *s, const cr_sched_job_spec *spec, int64_t now_ns)
{
    if (spec->id == 0 || spec->gpu_count == 0) {
        return CR_EINVAL;
    }
    while (spec->id >= s->jcap) {
        size_t old = s->jcap;
        s->jcap = s->jcap ? s->jcap * 2 : 64;
        s->jobs = cr_reallocarray(s->jobs, s->jcap, sizeof *s->jobs);
        memset(s->jobs + old, 0, (s->jcap - old) * sizeof *s->jobs);
    }
    sjob *j = &s->jobs[spec->id];
    if (j->live) {
        return CR_EEXIST;
    }
    memset(j, 0, sizeof *j);
    j->spec = *spec;
    for (int t = 0; t < CR_SCHED_MAX_TYPES; t++) {
        j->tput[t] = spec->tput ? ((size_t)t < spec->tput_count ? spec->tput[t] : 0) : 1.0;
    }
    j->spec.tput = NULL;
    j->live = true;
    enqueue(s, spec->id);
    return 0;
}

int cr_sched_job_remove(cr_sched *s, uint64_t id, int64_t now_ns)
{
    sjob *j = job_get(s, id);
    if (!j) {
        return CR_ENOENT;
    }
    if (j->running) {
        release(s, j);
    } else {
        for (size_t i = 0; i < s->qlen; i++) {
            if (s->queue[i] == id) {
                memmove(s->queue + i, s->queue + i + 1, (s->qlen - i - 1) * sizeof *s->queue);
                s->qlen--;
                break;
            }
        }
    }
    j->live = false;
    return 0;
}

int cr_sched_node_set_state(cr_sched *s, uint32_t node, cr_sched_node_state st, const char *reason,
                            int64_t now_ns, uint64_t **requeued, size_t *n_requeued)
{
    if (node >= s->nnodes) {
        return CR_ENOENT;
    }
    snode *n = &s->nodes[node];
    uint64_t *ids = NULL;
    size_t nids = 0, cap = 0;
    if (st == CR_NODE_LOST) {
        for (size_t id = 1; id < s->jcap; id++) {
            sjob *j = &s->jobs[id];
            if (!j->live || !j->running) {
                continue;
            }
            bool hit = false;
            for (size_t k = 0; k < j->nslots; k++) {
                hit |= j->slots[k].node == node;
            }
            if (hit) {
                release(s, j);
                enqueue(s, id);
                CR_GROW(ids, nids, cap);
                ids[nids++] = id;
            }
        }
    }
    n->st = st;
    if (requeued) {
        *requeued = ids;
        *n_requeued = nids;
    } else {
        free(ids);
    }
    return 0;
}

/* First fit of j on type t; fills s->dec's slots on success. */
static bool try_place(cr_sched *s, sjob *j, int t)
{
    uint32_t need = j->spec.gpu_count, got = 0;
    for (size_t n = 0; n < s->nnodes; n++) {
        if (s->nodes[n].st != CR_NODE_UP) {
            continue;
        }
        for (size_t g = 0; g < s->nodes[n].ngpus; g++) {
            got += s->nodes[n].type[g] == t && !s->nodes[n].bad[g] && !s->nodes[n].holder[g];
        }
    }
    if (got < need) {
        return false;
    }
    j->slots = cr_calloc(need, sizeof *j->slots);
    for (size_t n = 0; n < s->nnodes && j->nslots < need; n++) {
        if (s->nodes[n].st != CR_NODE_UP) {
            continue;
        }
        for (size_t g = 0; g < s->nodes[n].ngpus && j->nslots < need; g++) {
            if (s->nodes[n].type[g] == t && !s->nodes[n].bad[g] && !s->nodes[n].holder[g]) {
                s->nodes[n].holder[g] = j->spec.id;
                j->slots[j->nslots++] =
                    (cr_sched_slot){.node = (uint32_t)n, .gpu = (uint16_t)g, .mig_start = -1};
            }
        }
    }
    j->running = true;
    j->type = t;
    return true;
}

int cr_sched_cycle(cr_sched *s, int64_t now_ns, cr_rng *rng, const cr_sched_decision **out)
{
    s->ndec = 0;
    s->cycles++;
    size_t keep = 0;
    bool blocked = false;
    for (size_t i = 0; i < s->qlen; i++) {
        uint64_t id = s->queue[i];
        sjob *j = &s->jobs[id];
        bool placed = false;
        if (!blocked) {
            int order[CR_SCHED_MAX_TYPES];
            int n = 0;
            for (int t = 0; t < s->ntypes; t++) {
                if (j->tput[t] > 0 && (j->spec.gpu_type < 0 || j->spec.gpu_type == t)) {
                    order[n++] = t;
                }
            }
            if (s->cfg.policy == CR_SCHED_HETERO) {
                for (int a = 1; a < n; a++) {
                    for (int b = a; b > 0 && j->tput[order[b]] > j->tput[order[b - 1]]; b--) {
                        int x = order[b];
                        order[b] = order[b - 1];
                        order[b - 1] = x;
                    }
                }
            }
            for (int k = 0; k < n && !placed; k++) {
                placed = try_place(s, j, order[k]);
            }
        }
        if (placed) {
            j->start = now_ns;
            CR_GROW(s->dec, s->ndec, s->deccap);
            s->dec[s->ndec++] = (cr_sched_decision){.action = CR_SCHED_START,
                                                    .job = id,
                                                    .gpu_type = j->type,
                                                    .slot_count = j->nslots,
                                                    .slots = j->slots,
                                                    .reason = ""};
        } else {
            blocked = true;
            s->queue[keep++] = id;
        }
    }
    s->qlen = keep;
    *out = s->dec;
    return (int)s->ndec;
}

int cr_sched_check(const cr_sched *s, char *err, size_t errlen)
{
    for (size_t id = 1; id < s->jcap; id++) {
        const sjob *j = &s->jobs[id];
        if (!j->live || !j->running) {
            continue;
        }
        if (j->nslots != j->spec.gpu_count) {
            snprintf(err, errlen, "job %zu holds %zu of %u GPUs", id, j->nslots, j->spec.gpu_count);
            return CR_ECONFLICT;
        }
        for (size_t k = 0; k < j->nslots; k++) {
            if (s->nodes[j->slots[k].node].holder[j->slots[k].gpu] != id) {
                snprintf(err, errlen, "job %zu: slot not held", id);
                return CR_ECONFLICT;
            }
        }
    }
    return 0;
}
