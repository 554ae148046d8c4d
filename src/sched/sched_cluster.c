/*
 * sched_cluster.c - the cluster (types, racks, nodes, GPUs, MIG), tenants,
 * the job table, and the allocation counters every other file relies on.
 */
#include "cr_sched.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_gpufacts.h"
#include "sched_int.h"

/* The policies' tables, in cr_sched_policy order (sched_policy_*.c). */
static const cr__sched_policy_ops *const policy_table[CR_SCHED_POLICY_COUNT] = {
    &cr__sched_policy_fifo, &cr__sched_policy_priority, &cr__sched_policy_hetero,
    &cr__sched_policy_las, &cr__sched_policy_rounds};
static const char *const kind_names[CR_JOB_KIND_COUNT] = {
    "pretrain", "finetune", "inference", "batch", "visual", "hpc", "other"};

int cr_sched_policy_parse(const char *name, cr_sched_policy *out)
{
    for (int i = 0; name && i < CR_SCHED_POLICY_COUNT; i++) {
        if (strcmp(name, policy_table[i]->name) == 0) {
            *out = (cr_sched_policy)i;
            return 0;
        }
    }
    return CR_EINVAL;
}

const char *cr_sched_policy_name(cr_sched_policy p)
{
    return (unsigned)p < CR_SCHED_POLICY_COUNT ? policy_table[p]->name : "?";
}

size_t cr_sched_policy_list(char *buf, size_t size)
{
    size_t n = 0;
    for (int i = 0; i < CR_SCHED_POLICY_COUNT; i++) {
        int k = snprintf(buf + (n < size ? n : size), n < size ? size - n : 0, "%s%s", i ? "|" : "",
                         policy_table[i]->name);
        n += (size_t)(k > 0 ? k : 0);
    }
    if (size > 0 && n == 0) {
        buf[0] = '\0';
    }
    return n;
}

const cr__sched_policy_ops *cr__sched_policy_ops_of(cr_sched_policy p)
{
    return (unsigned)p < CR_SCHED_POLICY_COUNT ? policy_table[p] : NULL;
}

int cr_sched_job_kind_parse(const char *name, cr_sched_job_kind *out)
{
    for (int i = 0; name && i < CR_JOB_KIND_COUNT; i++) {
        if (strcmp(name, kind_names[i]) == 0) {
            *out = (cr_sched_job_kind)i;
            return 0;
        }
    }
    return CR_EINVAL;
}

const char *cr_sched_job_kind_name(cr_sched_job_kind k)
{
    return (unsigned)k < CR_JOB_KIND_COUNT ? kind_names[k] : "?";
}

const char *cr_sched_node_state_name(cr_sched_node_state st)
{
    switch (st) {
    case CR_NODE_UP:
        return "up";
    case CR_NODE_DRAINED:
        return "drained";
    case CR_NODE_LOST:
        return "lost";
    }
    return "?";
}

void cr_sched_config_default(cr_sched_config *cfg, cr_sched_policy policy)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->policy = policy;
    cfg->backfill = true;
    cfg->preemption = true;
    cfg->borrowing = true;
    cfg->fairshare_halflife_ns = INT64_C(7) * 24 * 3600 * 1000000000;
    cfg->las_queues = 2;
    cfg->las_threshold_gpu_ns[0] = INT64_C(3200) * 1000000000;
    cfg->las_starve_ns = 0;
    cfg->hetero_lp = false;
    cfg->hetero_window = 64;
    cfg->wait_for_faster = true;
    cfg->share_policy = CR_SHARE_FRAG;
    cfg->round_ns = INT64_C(360) * 1000000000;
    cfg->default_time_ns = INT64_C(3600) * 1000000000;
}

/* ------------------------------------------------------------------------ */

int cr_sched_new(const cr_sched_config *cfg, cr_sched **out)
{
    if (!cfg || (unsigned)cfg->policy >= CR_SCHED_POLICY_COUNT || cfg->las_queues < 1 ||
        cfg->las_queues > CR_SCHED_LAS_MAX_QUEUES || cfg->fairshare_halflife_ns <= 0 ||
        (unsigned)cfg->share_policy >= CR_SHARE_POLICY_COUNT || cfg->round_ns < 0 ||
        cfg->default_time_ns < 0 || cfg->default_time_ns > CR_SCHED_DEFAULT_TIME_MAX_NS) {
        return CR_EINVAL;
    }
    for (int i = 1; i < cfg->las_queues - 1; i++) {
        if (cfg->las_threshold_gpu_ns[i] <= cfg->las_threshold_gpu_ns[i - 1]) {
            return CR_EINVAL;
        }
    }
    cr_sched *s = cr_calloc(1, sizeof(*s));
    s->cfg = *cfg;
    s->pol = cr__sched_policy_ops_of(cfg->policy);
    if (s->cfg.round_ns == 0) {
        s->cfg.round_ns = INT64_C(360) * 1000000000;
    }
    if (s->cfg.hetero_window == 0) {
        s->cfg.hetero_window = 256;
    }
    s->tabcap = 1024;
    s->tab = cr_calloc(s->tabcap, sizeof(*s->tab));
    *out = s;
    return 0;
}

static void job_free(job *j)
{
    if (j) {
        free(j->recv_ns);
        free(j->tput);
        free(j->node_mask);
        free(j->prefer_mask);
        free(j->slots);
        free(j);
    }
}

void cr_sched_free(cr_sched *s)
{
    if (!s) {
        return;
    }
    for (size_t i = 0; i < s->tabcap; i++) {
        job_free(s->tab[i]);
    }
    free(s->tab);
    for (uint32_t i = 0; i < s->ngrave; i++) {
        job_free(s->grave[i]);
    }
    free(s->grave);
    free(s->fresh);
    cr__sched_queue_free(s);
    free(s->mheap[0]);
    free(s->mheap[1]);
    free(s->mheap[2]);
    for (int t = 0; t < s->ntypes; t++) {
        free(s->types[t].profs);
        free(s->types[t].bucket);
        free(s->types[t].mig_gpus);
        free(s->types[t].dw_gpus);
        free(s->types[t].sh_gpus);
    }
    for (uint32_t n = 0; n < s->nnodes; n++) {
        for (uint32_t g = 0; g < s->nodes[n].ngpu; g++) {
            free(s->nodes[n].gpus[g].reason);
        }
        free(s->nodes[n].gpus);
        free(s->nodes[n].name);
        free(s->nodes[n].reason);
    }
    free(s->nodes);
    free(s->ntab);
    free(s->nts);
    for (int r = 0; r < s->nracks; r++) {
        free(s->racks[r].name);
        free(s->racks[r].spine);
        free(s->racks[r].nodes);
    }
    free(s->racks);
    free(s->tenants);
    free(s->pending);
    free(s->running);
    for (int t = 0; t < CR_SCHED_MAX_TYPES; t++) {
        free(s->trun[t]);
        free(s->eheap[t]);
    }
    free(s->dec);
    free(s->reasons);
    free(s->plan);
    free(s->scratch);
    free(s->wcache);
    cr__sched_vix_free(s);
    free(s);
}

const cr_sched_config *cr_sched_get_config(const cr_sched *s)
{
    return &s->cfg;
}

/* ------------------------------------------------------------------------ */
/* GPU types                                                                */

static bool name_ok(const char *name)
{
    return name && name[0] && strlen(name) < CR_SCHED_NAME_MAX;
}

int cr_sched_gpu_type_find(const cr_sched *s, const char *name, int *out_type)
{
    for (int t = 0; name && t < s->ntypes; t++) {
        if (strcmp(s->types[t].name, name) == 0) {
            *out_type = t;
            return 0;
        }
    }
    return CR_ENOENT;
}

int cr_sched_gpu_type(cr_sched *s, const char *name, int *out_type)
{
    if (!name_ok(name)) {
        return CR_EINVAL;
    }
    if (cr_sched_gpu_type_find(s, name, out_type) == 0) {
        return 0;
    }
    if (s->ntypes >= CR_SCHED_MAX_TYPES) {
        return CR_ENOSPC;
    }
    gtype *g = &s->types[s->ntypes];
    memset(g, 0, sizeof(*g));
    snprintf(g->name, sizeof(g->name), "%s", name);
    g->nbucket = 9;
    g->max_node = 8;
    g->bucket = cr_malloc(g->nbucket * sizeof(uint32_t));
    for (uint32_t i = 0; i < g->nbucket; i++) {
        g->bucket[i] = NT_NONE;
    }
    *out_type = s->ntypes++;
    return 0;
}

int cr_sched_gpu_type_count(const cr_sched *s)
{
    return s->ntypes;
}

const char *cr_sched_gpu_type_name(const cr_sched *s, int type)
{
    return type >= 0 && type < s->ntypes ? s->types[type].name : NULL;
}

int cr_sched_gpu_type_set_mem(cr_sched *s, int type, uint64_t mem_bytes)
{
    if (type < 0 || type >= s->ntypes) {
        return CR_EINVAL;
    }
    s->types[type].mem_bytes = mem_bytes;
    return 0;
}

int cr_sched_mig_profile_add(cr_sched *s, int type, const char *name, int compute, int mem,
                             uint32_t start_mask)
{
    if (type < 0 || type >= s->ntypes || !name || !name[0] || strlen(name) >= 16) {
        return CR_EINVAL;
    }
    gtype *g = &s->types[type];
    if (!g->mig_mem || compute < 1 || compute > g->mig_compute || mem < 1 || mem > g->mig_mem ||
        start_mask == 0 || (start_mask >> g->mig_mem) != 0) {
        return CR_EINVAL;
    }
    for (int i = 0; i < 8; i++) {
        if ((start_mask & (1u << i)) && i + mem > g->mig_mem) {
            return CR_EINVAL;
        }
    }
    for (int i = 0; i < g->nprof; i++) {
        if (strcmp(g->profs[i].name, name) == 0) {
            return CR_EEXIST;
        }
    }
    g->profs = cr_reallocarray(g->profs, (size_t)g->nprof + 1, sizeof(*g->profs));
    mig_prof *p = &g->profs[g->nprof++];
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->compute = (uint8_t)compute;
    p->mem = (uint8_t)mem;
    p->start_mask = start_mask;
    return 0;
}

/*
 * The standard profiles: the shapes of the geometry (cr_gpufacts.h: 7/8
 * for A100, H100, H200, B200; 4/4 for A30).
 * Names follow NVIDIA's "<compute>g.<GB>gb" with GB = memory slices times
 * the type's memory / mem_slices, rounded (80 GB: 1g.10gb; 40 GB: 1g.5gb;
 * 24 GB A30: 1g.6gb), which is why profile names are resolved per type.
 */
int cr_sched_gpu_type_set_mig(cr_sched *s, int type, int compute_slices, int mem_slices)
{
    if (type < 0 || type >= s->ntypes || compute_slices < 1 || compute_slices > 8 ||
        mem_slices < 1 || mem_slices > 8) {
        return CR_EINVAL;
    }
    gtype *g = &s->types[type];
    if (g->nprof && g->mig_compute == compute_slices && g->mig_mem == mem_slices &&
        g->prof_mem == g->mem_bytes) {
        return 0; /* unchanged: keep the profiles (and any added since) */
    }
    g->mig_compute = (uint8_t)compute_slices;
    g->mig_mem = (uint8_t)mem_slices;
    g->prof_mem = g->mem_bytes;
    CR_FREE(g->profs);
    g->nprof = 0;
    double slice_gb = (double)g->mem_bytes / 1e9 / mem_slices;
    const cr_mig_geom *geom = cr_gpufacts_mig_geom(compute_slices, mem_slices);
    size_t n = geom ? geom->nshapes : 0;
    for (size_t i = 0; i < n; i++) {
        char name[16];
        const cr_mig_shape *sh = &geom->shapes[i];
        long gb = slice_gb > 0 ? lround(slice_gb * sh->mem_slices) : sh->mem_slices;
        snprintf(name, sizeof(name), "%dg.%ldgb", sh->compute_slices, gb);
        (void)cr_sched_mig_profile_add(s, type, name, sh->compute_slices, sh->mem_slices,
                                       sh->placement_mask);
    }
    return 0;
}

const mig_prof *cr__sched_mig_find(const cr_sched *s, int type, const char *name)
{
    const gtype *g = &s->types[type];
    for (int i = 0; i < g->nprof; i++) {
        if (strcmp(g->profs[i].name, name) == 0) {
            return &g->profs[i];
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Tenants                                                                  */

int cr_sched_tenant_find(const cr_sched *s, const char *name, int *out_tenant)
{
    for (int t = 0; name && t < s->ntenants; t++) {
        if (strcmp(s->tenants[t].name, name) == 0) {
            *out_tenant = t;
            return 0;
        }
    }
    return CR_ENOENT;
}

int cr_sched_tenant(cr_sched *s, const char *name, int *out_tenant)
{
    if (!name_ok(name)) {
        return CR_EINVAL;
    }
    if (cr_sched_tenant_find(s, name, out_tenant) == 0) {
        return 0;
    }
    CR_GROW(s->tenants, s->ntenants, s->ctenants);
    tenant_rec *t = &s->tenants[s->ntenants];
    memset(t, 0, sizeof(*t));
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->weight = 1.0;
    t->parent = -1;
    t->fair_rank = s->ntenants;
    for (int i = 0; i < CR_SCHED_MAX_TYPES; i++) {
        t->quota[i] = -1;
        t->limit[i] = -1;
        t->lend[i] = -1;
    }
    *out_tenant = s->ntenants++;
    return 0;
}

int cr_sched_tenant_count(const cr_sched *s)
{
    return s->ntenants;
}

const char *cr_sched_tenant_name(const cr_sched *s, int tenant)
{
    return tenant >= 0 && tenant < s->ntenants ? s->tenants[tenant].name : NULL;
}

int cr_sched_tenant_set_weight(cr_sched *s, int tenant, double weight)
{
    if (tenant < 0 || tenant >= s->ntenants || !(weight > 0) || !isfinite(weight)) {
        return CR_EINVAL;
    }
    s->tenants[tenant].weight = weight;
    return 0;
}

int cr_sched_tenant_set_quota(cr_sched *s, int tenant, int type, int64_t gpus)
{
    if (tenant < 0 || tenant >= s->ntenants || type < 0 || type >= s->ntypes || gpus < -1 ||
        gpus > INT32_MAX) { /* (kept in thousandths: bounded) */
        return CR_EINVAL;
    }
    tenant_rec *t = &s->tenants[tenant];
    t->quota[type] = gpus;
    /* Lowering a quota below what is held turns the newest work into
     * borrowed work (preemptible by tenants under quota): quotas hold. */
    while (gpus >= 0 && (int64_t)t->used_nb[type] > gpus * 1000) {
        job *newest = NULL;
        for (uint32_t i = 0; i < s->nrunning; i++) {
            job *j = s->running[i];
            if (j->spec.tenant == tenant && j->run_type == type && !j->borrowed &&
                (!newest || j->start_ns > newest->start_ns ||
                 (j->start_ns == newest->start_ns && j->spec.id > newest->spec.id))) {
                newest = j;
            }
        }
        if (!newest) {
            break;
        }
        newest->borrowed = true;
        t->used_nb[type] -= newest->held;
        t->used_b[type] += newest->held;
    }
    return 0;
}

/*
 * Fair-share usage: each tenant's GPU-seconds per type, decayed with the
 * configured half-life. Accrued lazily: before anything changes what runs,
 * the time since the last accrual is charged at the running counts, then
 * everything decays by 2^(-dt/halflife). Charging the whole interval before
 * decaying slightly overweights it (by at most dt/halflife), which keeps
 * the update O(tenants x types) instead of per job.
 */
void cr__sched_accrue(cr_sched *s, int64_t now_ns)
{
    if (now_ns > s->now_ns) {
        s->now_ns = now_ns;
    }
    if (now_ns <= s->usage_ns) {
        return;
    }
    double dt = (double)(now_ns - s->usage_ns);
    double decay = exp2(-dt / (double)s->cfg.fairshare_halflife_ns);
    for (int i = 0; i < s->ntenants; i++) {
        tenant_rec *t = &s->tenants[i];
        for (int k = 0; k < s->ntypes; k++) {
            /* used_* in thousandths of a GPU */
            t->usage[k] = t->usage[k] * decay + (t->used_nb[k] + t->used_b[k]) * dt * 1e-12;
        }
    }
    s->usage_ns = now_ns;
}

/* ------------------------------------------------------------------------ */
/* Nodes, racks, counters                                                   */

static void nt_unlink(cr_sched *s, uint32_t i)
{
    nt *r = &s->nts[i];
    if (!r->linked) {
        return;
    }
    gtype *g = &s->types[r->type];
    if (r->prev != NT_NONE) {
        s->nts[r->prev].next = r->next;
    } else {
        g->bucket[r->free] = r->next;
    }
    if (r->next != NT_NONE) {
        s->nts[r->next].prev = r->prev;
    }
    r->linked = false;
}

static void nt_link(cr_sched *s, uint32_t i)
{
    nt *r = &s->nts[i];
    gtype *g = &s->types[r->type];
    r->prev = NT_NONE;
    r->next = g->bucket[r->free];
    if (r->next != NT_NONE) {
        s->nts[r->next].prev = i;
    }
    g->bucket[r->free] = i;
    r->linked = true;
}

/* Add delta free whole GPUs to an nt record and the counters above it. */
void cr__sched_nt_adjust(cr_sched *s, uint32_t i, int type, int delta)
{
    nt *r = &s->nts[i];
    (void)type;
    bool up = s->nodes[r->node].state == CR_NODE_UP;
    nt_unlink(s, i);
    r->free = (uint8_t)(r->free + delta);
    if (up) {
        s->racks[s->nodes[r->node].rack].free[r->type] += (uint32_t)delta;
        s->types[r->type].free += (uint32_t)delta;
        nt_link(s, i);
    }
}

static uint32_t nt_of(const cr_sched *s, uint32_t n, int type)
{
    const node *nd = &s->nodes[n];
    for (uint32_t i = nd->nt_first; i < nd->nt_first + nd->nnt; i++) {
        if (s->nts[i].type == type) {
            return i;
        }
    }
    return NT_NONE;
}

int cr__sched_rack_get(cr_sched *s, const char *name, const char *spine)
{
    if (!name) {
        name = "default";
    }
    for (int r = 0; r < s->nracks; r++) {
        if (strcmp(s->racks[r].name, name) == 0) {
            return r;
        }
    }
    CR_GROW(s->racks, s->nracks, s->cracks);
    rack_rec *r = &s->racks[s->nracks];
    memset(r, 0, sizeof(*r));
    r->name = cr_strdup(name);
    r->spine = cr_strdup(spine ? spine : "default");
    return s->nracks++;
}

int cr_sched_rack_count(const cr_sched *s)
{
    return s->nracks;
}

const char *cr_sched_rack_name(const cr_sched *s, int rack)
{
    return rack >= 0 && rack < s->nracks ? s->racks[rack].name : NULL;
}

static void type_grow_buckets(gtype *g, uint32_t max_node)
{
    if (max_node <= g->max_node) {
        return;
    }
    /* nt records link by index, so only the heads array grows. */
    g->bucket = cr_reallocarray(g->bucket, max_node + 1, sizeof(uint32_t));
    for (uint32_t i = g->nbucket; i <= max_node; i++) {
        g->bucket[i] = NT_NONE;
    }
    g->nbucket = max_node + 1;
    g->max_node = max_node;
}

static void mig_list_add(gtype *g, uint32_t n, uint32_t gi)
{
    CR_GROW(g->mig_gpus, g->nmig, g->cmig);
    g->mig_gpus[g->nmig++] = n << 8 | gi;
}

static void mig_list_del(gtype *g, uint32_t n, uint32_t gi)
{
    uint32_t key = n << 8 | gi;
    for (uint32_t i = 0; i < g->nmig; i++) {
        if (g->mig_gpus[i] == key) {
            /* keep order stable: shift */
            memmove(&g->mig_gpus[i], &g->mig_gpus[i + 1], (g->nmig - i - 1) * sizeof(uint32_t));
            g->nmig--;
            return;
        }
    }
}

/* Whole-GPU usability: healthy and not in MIG mode. */
static bool gpu_whole(const gpu *g)
{
    return !g->bad && !g->mig;
}

static void ntab_put(cr_sched *s, uint32_t n);

int cr_sched_node_add(cr_sched *s, const cr_sched_node_spec *spec, uint32_t *out_node)
{
    uint32_t dummy;
    if (!spec || !name_ok(spec->name) || (spec->rack && !name_ok(spec->rack)) ||
        (spec->spine && !name_ok(spec->spine)) || spec->gpu_count > CR_SCHED_MAX_NODE_GPUS ||
        (spec->gpu_count && !spec->gpus) || (unsigned)spec->state > CR_NODE_LOST ||
        s->nnodes >= (1u << 24)) {
        return CR_EINVAL;
    }
    if (cr_sched_node_find(s, spec->name, &dummy) == 0) {
        return CR_EEXIST;
    }
    for (size_t i = 0; i < spec->gpu_count; i++) {
        const cr_sched_gpu_spec *g = &spec->gpus[i];
        if (g->type < 0 || g->type >= s->ntypes) {
            return CR_EINVAL;
        }
        if (g->mig && !s->types[g->type].mig_mem) {
            return CR_ENOTSUP;
        }
        if (g->mig && g->share) {
            return CR_EINVAL; /* a GPU is shared by slices or by fractions, not both */
        }
    }
    int r = cr__sched_rack_get(s, spec->rack, spec->spine);
    CR_GROW(s->nodes, s->nnodes, s->cnodes);
    uint32_t n = s->nnodes++;
    node *nd = &s->nodes[n];
    memset(nd, 0, sizeof(*nd));
    nd->name = cr_strdup(spec->name);
    ntab_put(s, n);
    nd->rack = r;
    nd->state = spec->state;
    nd->ngpu = (uint32_t)spec->gpu_count;
    nd->cpu_total = spec->cpu_milli;
    nd->mem_total = spec->mem_bytes;
    if (spec->cpu_milli || spec->mem_bytes) {
        s->host_model = true;
    }
    if (spec->cpu_milli > s->host_cpu_max) {
        s->host_cpu_max = spec->cpu_milli;
    }
    if (spec->gpu_count > s->host_gpu_max) {
        s->host_gpu_max = spec->gpu_count;
    }
    nd->gpus = cr_calloc(spec->gpu_count ? spec->gpu_count : 1, sizeof(gpu));
    nd->nt_first = s->nnt;
    rack_rec *rk = &s->racks[r];
    CR_GROW(rk->nodes, rk->nnodes, rk->cnodes);
    rk->nodes[rk->nnodes++] = n;
    for (uint32_t i = 0; i < nd->ngpu; i++) {
        const cr_sched_gpu_spec *gs = &spec->gpus[i];
        gpu *g = &nd->gpus[i];
        g->type = (int8_t)gs->type;
        g->bad = gs->bad;
        g->mig = gs->mig;
        g->share = gs->share;
        g->nvlink = gs->nvlink;
        g->mem_bytes = gs->mem_bytes ? gs->mem_bytes : s->types[gs->type].mem_bytes;
        uint32_t k = nt_of(s, n, gs->type);
        if (k == NT_NONE) {
            CR_GROW(s->nts, s->nnt, s->cnt);
            k = s->nnt++;
            nd->nnt++;
            nt *rec = &s->nts[k];
            memset(rec, 0, sizeof(*rec));
            rec->node = n;
            rec->type = (int8_t)gs->type;
            rec->mem_bytes = g->mem_bytes;
            rec->prev = rec->next = NT_NONE;
        }
        nt *rec = &s->nts[k];
        rec->total++;
        if (g->mem_bytes < rec->mem_bytes) {
            rec->mem_bytes = g->mem_bytes;
        }
        if (gpu_whole(g)) {
            rec->free++;
        }
        if (g->mig) {
            mig_list_add(&s->types[gs->type], n, i);
        }
        if (g->share) {
            gtype *gt = &s->types[gs->type];
            CR_GROW(gt->sh_gpus, gt->nsh, gt->csh);
            gt->sh_gpus[gt->nsh++] = n << 8 | i;
        }
        if (i > 0 && g->nvlink != nd->gpus[0].nvlink) {
            nd->multi_domain = true;
        }
        if (!g->bad && nd->state == CR_NODE_UP) {
            s->types[gs->type].total++;
        }
    }
    for (uint32_t k = nd->nt_first; k < nd->nt_first + nd->nnt; k++) {
        nt *rec = &s->nts[k];
        gtype *gt = &s->types[rec->type];
        type_grow_buckets(gt, rec->total);
        if (nd->state == CR_NODE_UP) {
            rk->free[rec->type] += rec->free;
            gt->free += rec->free;
            nt_link(s, k);
        }
    }
    if (out_node) {
        *out_node = n;
    }
    return 0;
}

static uint32_t name_hash(const char *name)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h = (h ^ *p) * 16777619u;
    }
    return h;
}

static void ntab_put(cr_sched *s, uint32_t n)
{
    if ((s->nnodes + 1) * 2 > s->ntabcap) {
        free(s->ntab);
        s->ntabcap = s->ntabcap ? s->ntabcap * 2 : 64;
        s->ntab = cr_calloc(s->ntabcap, sizeof(uint32_t));
        for (uint32_t i = 0; i < s->nnodes; i++) {
            if (i != n) {
                uint32_t k = name_hash(s->nodes[i].name) & (s->ntabcap - 1);
                while (s->ntab[k]) {
                    k = (k + 1) & (s->ntabcap - 1);
                }
                s->ntab[k] = i + 1;
            }
        }
    }
    uint32_t k = name_hash(s->nodes[n].name) & (s->ntabcap - 1);
    while (s->ntab[k]) {
        k = (k + 1) & (s->ntabcap - 1);
    }
    s->ntab[k] = n + 1;
}

int cr_sched_node_retire(cr_sched *s, uint32_t n, int64_t now_ns, uint64_t **requeued,
                         size_t *n_requeued)
{
    if (n >= s->nnodes) {
        return CR_EINVAL;
    }
    int rc = cr_sched_node_set_state(s, n, CR_NODE_LOST, "retired: its GPUs changed", now_ns,
                                     requeued, n_requeued);
    if (rc != 0) {
        return rc;
    }
    /* Out of the way ('~' is in no controller node name), so the real
     * name is free for the node's new entry; the table is rebuilt (rare). */
    node *nd = &s->nodes[n];
    char *old = nd->name;
    nd->name = cr_asprintf("%s~retired-%u", old, n);
    free(old);
    nd->retired = true;
    memset(s->ntab, 0, s->ntabcap * sizeof(uint32_t));
    for (uint32_t i = 0; i < s->nnodes; i++) {
        uint32_t k = name_hash(s->nodes[i].name) & (s->ntabcap - 1);
        while (s->ntab[k]) {
            k = (k + 1) & (s->ntabcap - 1);
        }
        s->ntab[k] = i + 1;
    }
    return 0;
}

int cr_sched_node_find(const cr_sched *s, const char *name, uint32_t *out_node)
{
    if (!name || !s->ntabcap) {
        return CR_ENOENT;
    }
    for (uint32_t k = name_hash(name) & (s->ntabcap - 1); s->ntab[k];
         k = (k + 1) & (s->ntabcap - 1)) {
        if (strcmp(s->nodes[s->ntab[k] - 1].name, name) == 0) {
            *out_node = s->ntab[k] - 1;
            return 0;
        }
    }
    return CR_ENOENT;
}

uint32_t cr_sched_node_count(const cr_sched *s)
{
    return s->nnodes;
}

int cr_sched_node_info_get(const cr_sched *s, uint32_t n, cr_sched_node_info *out)
{
    if (n >= s->nnodes) {
        return CR_ENOENT;
    }
    const node *nd = &s->nodes[n];
    out->name = nd->name;
    out->rack = nd->rack;
    out->rack_name = s->racks[nd->rack].name;
    out->state = nd->state;
    out->reason = nd->reason ? nd->reason : "";
    out->gpu_count = nd->ngpu;
    out->cpu_milli = nd->cpu_total;
    out->cpu_used = nd->cpu_used;
    out->mem_bytes = nd->mem_total;
    out->mem_used = nd->mem_used;
    out->free_gpus = 0;
    if (nd->state == CR_NODE_UP) {
        for (uint32_t k = nd->nt_first; k < nd->nt_first + nd->nnt; k++) {
            out->free_gpus += s->nts[k].free;
        }
    }
    return 0;
}

int cr_sched_gpu_info_get(const cr_sched *s, uint32_t n, uint32_t gi, cr_sched_gpu_info *out)
{
    if (n >= s->nnodes || gi >= s->nodes[n].ngpu) {
        return CR_ENOENT;
    }
    const gpu *g = &s->nodes[n].gpus[gi];
    out->type = g->type;
    out->mem_bytes = g->mem_bytes;
    out->nvlink = g->nvlink;
    out->bad = g->bad;
    out->reason = g->reason ? g->reason : "";
    out->mig = g->mig;
    out->mig_used_mask = g->mig_used;
    out->mig_fixed = g->mig_nfix;
    out->mig_dynamic = g->mig_dynamic;
    out->job = g->job;
    out->share = g->share;
    out->share_milli = g->sh_milli;
    out->share_mem = g->sh_mem;
    out->share_jobs = g->sh_n;
    return 0;
}

int cr_sched_capacity(const cr_sched *s, int type, uint32_t *total, uint32_t *free_gpus)
{
    if (type < 0 || type >= s->ntypes) {
        return CR_EINVAL;
    }
    if (total) {
        *total = s->types[type].total;
    }
    if (free_gpus) {
        *free_gpus = s->types[type].free;
    }
    return 0;
}

/* Collect, in ascending order, the ids of running jobs touching node n
 * (gpu_only < 0) or one GPU of it, and requeue them. */
static size_t requeue_on(cr_sched *s, uint32_t n, int gpu_only, int64_t now_ns, uint64_t **ids)
{
    uint64_t *v = NULL;
    size_t len = 0, cap = 0;
    for (uint32_t i = 0; i < s->nrunning; i++) {
        job *j = s->running[i];
        for (uint32_t k = 0; k < j->nslots; k++) {
            if (j->slots[k].node == n && (gpu_only < 0 || j->slots[k].gpu == gpu_only)) {
                CR_GROW(v, len, cap);
                v[len++] = j->spec.id;
                break;
            }
        }
    }
    /* insertion sort: few ids */
    for (size_t i = 1; i < len; i++) {
        uint64_t x = v[i];
        size_t k = i;
        while (k > 0 && v[k - 1] > x) {
            v[k] = v[k - 1];
            k--;
        }
        v[k] = x;
    }
    for (size_t i = 0; i < len; i++) {
        job *j = cr__sched_job_get(s, v[i]);
        cr__sched_job_stop(s, j, now_ns, true);
        j->rcode = R_REQUEUED;
    }
    if (ids) {
        *ids = v;
    } else {
        free(v);
    }
    return len;
}

static void set_reason(char **dst, const char *reason)
{
    free(*dst);
    *dst = reason && reason[0] ? cr_strdup(reason) : NULL;
}

int cr_sched_node_set_state(cr_sched *s, uint32_t n, cr_sched_node_state st, const char *reason,
                            int64_t now_ns, uint64_t **requeued, size_t *n_requeued)
{
    if (n >= s->nnodes || (unsigned)st > CR_NODE_LOST ||
        (s->nodes[n].retired && st != CR_NODE_LOST)) {
        return CR_EINVAL;
    }
    cr__sched_accrue(s, now_ns);
    node *nd = &s->nodes[n];
    size_t nreq = 0;
    uint64_t *ids = NULL;
    if (st == CR_NODE_LOST && nd->state != CR_NODE_LOST) {
        nreq = requeue_on(s, n, -1, now_ns, &ids);
    }
    bool was_up = nd->state == CR_NODE_UP, up = st == CR_NODE_UP;
    if (was_up != up) {
        for (uint32_t k = nd->nt_first; k < nd->nt_first + nd->nnt; k++) {
            nt *rec = &s->nts[k];
            int sign = up ? 1 : -1;
            if (!up) {
                nt_unlink(s, k);
            }
            s->racks[nd->rack].free[rec->type] += (uint32_t)(sign * rec->free);
            s->types[rec->type].free += (uint32_t)(sign * rec->free);
            if (up) {
                nt_link(s, k);
            }
        }
        for (uint32_t g = 0; g < nd->ngpu; g++) {
            if (!nd->gpus[g].bad) {
                s->types[nd->gpus[g].type].total += (uint32_t)(up ? 1 : -1);
            }
        }
    }
    nd->state = st;
    set_reason(&nd->reason, reason);
    if (requeued) {
        *requeued = ids;
    } else {
        free(ids);
    }
    if (n_requeued) {
        *n_requeued = nreq;
    }
    return 0;
}

int cr_sched_gpu_set_health(cr_sched *s, uint32_t n, uint32_t gi, bool ok, const char *reason,
                            int64_t now_ns, uint64_t **requeued, size_t *n_requeued)
{
    if (n >= s->nnodes || gi >= s->nodes[n].ngpu) {
        return CR_EINVAL;
    }
    cr__sched_accrue(s, now_ns);
    node *nd = &s->nodes[n];
    gpu *g = &nd->gpus[gi];
    size_t nreq = 0;
    uint64_t *ids = NULL;
    if (!ok && !g->bad) {
        nreq = requeue_on(s, n, (int)gi, now_ns, &ids);
        g->bad = true;
        if (!g->mig) {
            cr__sched_nt_adjust(s, nt_of(s, n, g->type), g->type, -1);
        }
        if (nd->state == CR_NODE_UP) {
            s->types[g->type].total--;
        }
    } else if (ok && g->bad) {
        g->bad = false;
        if (!g->mig) {
            cr__sched_nt_adjust(s, nt_of(s, n, g->type), g->type, +1);
        }
        if (nd->state == CR_NODE_UP) {
            s->types[g->type].total++;
        }
    }
    set_reason(&g->reason, ok ? NULL : reason);
    if (requeued) {
        *requeued = ids;
    } else {
        free(ids);
    }
    if (n_requeued) {
        *n_requeued = nreq;
    }
    return 0;
}

int cr_sched_gpu_set_mig(cr_sched *s, uint32_t n, uint32_t gi, bool mig)
{
    if (n >= s->nnodes || gi >= s->nodes[n].ngpu) {
        return CR_EINVAL;
    }
    gpu *g = &s->nodes[n].gpus[gi];
    gtype *t = &s->types[g->type];
    if (!t->mig_mem) {
        return CR_ENOTSUP;
    }
    if (g->job || g->mig_used || g->sh_n) {
        return CR_EBUSY;
    }
    if (mig && g->share) {
        return CR_EINVAL;
    }
    if (!mig) {
        g->mig_nfix = 0;
    }
    if (g->mig == mig) {
        return 0;
    }
    g->mig = mig;
    if (mig) {
        mig_list_add(t, n, gi);
    } else {
        mig_list_del(t, n, gi);
    }
    if (!g->bad) {
        cr__sched_nt_adjust(s, nt_of(s, n, g->type), g->type, mig ? -1 : +1);
    }
    return 0;
}

int cr_sched_gpu_set_mig_layout(cr_sched *s, uint32_t n, uint32_t gi, const char *const *profiles,
                                size_t count, int *starts)
{
    if (n >= s->nnodes || gi >= s->nodes[n].ngpu || count > 8 || (count && !profiles)) {
        return CR_EINVAL;
    }
    gpu *g = &s->nodes[n].gpus[gi];
    const gtype *t = &s->types[g->type];
    if (!t->mig_mem) {
        return CR_ENOTSUP;
    }
    if (g->job || g->mig_used || g->sh_n) {
        return CR_EBUSY;
    }
    if (g->share) {
        return CR_EINVAL; /* shared by fractions: not by slices too */
    }
    const mig_prof *pr[8];
    size_t order[8];
    for (size_t i = 0; i < count; i++) {
        pr[i] = profiles[i] ? cr__sched_mig_find(s, g->type, profiles[i]) : NULL;
        if (!pr[i]) {
            return CR_ENOENT;
        }
        /* insertion sort: larger instances first, then list order */
        size_t k = i;
        while (k > 0 && pr[order[k - 1]]->mem < pr[i]->mem) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = i;
    }
    uint32_t used = 0;
    int compute = 0, st[8];
    for (size_t x = 0; x < count; x++) {
        const mig_prof *p = pr[order[x]];
        st[order[x]] = -1;
        for (int b = 0; b < t->mig_mem; b++) {
            uint32_t m = ((1u << p->mem) - 1) << b;
            if ((p->start_mask & (1u << b)) && !(used & m)) {
                st[order[x]] = b;
                used |= m;
                break;
            }
        }
        compute += p->compute;
        if (st[order[x]] < 0 || compute > t->mig_compute) {
            return CR_ERANGE;
        }
    }
    int rc = cr_sched_gpu_set_mig(s, n, gi, true);
    if (rc < 0) {
        return rc;
    }
    g->mig_nfix = (uint8_t)count;
    for (size_t i = 0; i < count; i++) {
        g->mig_fix_start[i] = (uint8_t)st[i];
        g->mig_fix_mem[i] = pr[i]->mem;
        g->mig_fix_compute[i] = pr[i]->compute;
        if (starts) {
            starts[i] = st[i];
        }
    }
    return 0;
}

int cr_sched_mig_profile_alias(cr_sched *s, int type, const char *name, int compute, int mem)
{
    if (type < 0 || type >= s->ntypes || !name) {
        return CR_EINVAL;
    }
    if (cr__sched_mig_find(s, type, name)) {
        return 0;
    }
    const gtype *g = &s->types[type];
    for (int i = 0; i < g->nprof; i++) {
        if (g->profs[i].compute == compute && g->profs[i].mem == mem) {
            return cr_sched_mig_profile_add(s, type, name, compute, mem, g->profs[i].start_mask);
        }
    }
    return CR_ENOENT;
}

const char *cr_sched_mig_profile_name(const cr_sched *s, int type, int compute, int mem)
{
    if (type < 0 || type >= s->ntypes) {
        return NULL;
    }
    const gtype *g = &s->types[type];
    for (int i = 0; i < g->nprof; i++) {
        if (g->profs[i].compute == compute && g->profs[i].mem == mem) {
            return g->profs[i].name;
        }
    }
    return NULL;
}

int cr_sched_mig_profile_get(const cr_sched *s, int type, const char *name, int *compute, int *mem)
{
    const mig_prof *p = name ? cr__sched_mig_find(s, type, name) : NULL;
    if (!p) {
        return CR_ENOENT;
    }
    *compute = p->compute;
    *mem = p->mem;
    return 0;
}

int cr_sched_gpu_set_mig_dynamic(cr_sched *s, uint32_t n, uint32_t gi, bool dynamic)
{
    if (n >= s->nnodes || gi >= s->nodes[n].ngpu) {
        return CR_EINVAL;
    }
    gpu *g = &s->nodes[n].gpus[gi];
    if (!s->types[g->type].mig_mem) {
        return CR_ENOTSUP;
    }
    g->mig_dynamic = dynamic;
    return 0;
}

int cr_sched_gpu_mig_layout(const cr_sched *s, uint32_t n, uint32_t gi, int *start, int *mem,
                            int *compute)
{
    if (n >= s->nnodes || gi >= s->nodes[n].ngpu) {
        return CR_EINVAL;
    }
    const gpu *g = &s->nodes[n].gpus[gi];
    for (int i = 0; i < g->mig_nfix; i++) {
        start[i] = g->mig_fix_start[i];
        mem[i] = g->mig_fix_mem[i];
        compute[i] = g->mig_fix_compute[i];
    }
    return g->mig_nfix;
}

/* Dynamic MIG: the layout with the idle instances overlapping
 * [start, start + mem) destroyed and this one created. The caller checked
 * that no busy slice is in the range and that the compute fits. */
static void mig_repartition(cr_sched *s, gpu *g, int start, int mem, int compute)
{
    uint32_t m = ((1u << mem) - 1) << start;
    uint8_t k = 0;
    for (uint8_t i = 0; i < g->mig_nfix; i++) {
        uint32_t im = ((1u << g->mig_fix_mem[i]) - 1) << g->mig_fix_start[i];
        if (im & m) {
            continue; /* idle (no busy slice is in the range): destroyed */
        }
        g->mig_fix_start[k] = g->mig_fix_start[i];
        g->mig_fix_mem[k] = g->mig_fix_mem[i];
        g->mig_fix_compute[k] = g->mig_fix_compute[i];
        k++;
    }
    if (k < 8) {
        g->mig_fix_start[k] = (uint8_t)start;
        g->mig_fix_mem[k] = (uint8_t)mem;
        g->mig_fix_compute[k] = (uint8_t)compute;
        k++;
    }
    g->mig_nfix = k;
    s->repart_flag = true;
    s->stats.mig_repartitions++;
}

bool cr__sched_mig_fixed_has(const gpu *g, int start, int mem, int compute)
{
    for (int i = 0; i < g->mig_nfix; i++) {
        if (g->mig_fix_start[i] == start && g->mig_fix_mem[i] == mem &&
            g->mig_fix_compute[i] == compute) {
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------------------------------ */
/* Allocation                                                               */

/* Charge (sign +1) or give back (-1) the job's CPU and host memory once on
 * each node its slots name (a stamp per node finds the first slot of each). */
static void host_charge(cr_sched *s, const job *j, const cr_sched_slot *sl, uint32_t n, int sign)
{
    uint64_t cpu = j->spec.cpu_milli, mem = j->spec.host_mem_bytes;
    if (!cpu && !mem) {
        return;
    }
    uint64_t stamp = ++s->mark;
    for (uint32_t i = 0; i < n; i++) {
        node *nd = &s->nodes[sl[i].node];
        if (nd->mark == stamp) {
            continue;
        }
        nd->mark = stamp;
        if (sign > 0) {
            nd->cpu_used += cpu;
            nd->mem_used += mem;
        } else {
            nd->cpu_used -= cpu;
            nd->mem_used -= mem;
        }
    }
}

void cr__sched_slots_take(cr_sched *s, job *j, const cr_sched_slot *sl, uint32_t n)
{
    host_charge(s, j, sl, n, +1);
    for (uint32_t i = 0; i < n; i++) {
        gpu *g = &s->nodes[sl[i].node].gpus[sl[i].gpu];
        if (j->spec.exclusive) {
            s->nodes[sl[i].node].excl_job = j->spec.id;
        }
        if (sl[i].milli > 0) {
            if (g->sh_n++ == 0) {
                cr__sched_nt_adjust(s, nt_of(s, sl[i].node, g->type), g->type, -1);
            }
            g->sh_milli = (uint16_t)(g->sh_milli + sl[i].milli);
            g->sh_mem += j->spec.gpu_mem_bytes;
        } else if (sl[i].mig_start < 0) {
            g->job = j->spec.id;
            cr__sched_nt_adjust(s, nt_of(s, sl[i].node, g->type), g->type, -1);
        } else {
            if (g->mig_nfix && g->mig_dynamic &&
                !cr__sched_mig_fixed_has(g, sl[i].mig_start, sl[i].mig_mem, sl[i].mig_compute)) {
                mig_repartition(s, g, sl[i].mig_start, sl[i].mig_mem, sl[i].mig_compute);
            }
            g->mig_used |= (uint8_t)(((1u << sl[i].mig_mem) - 1) << sl[i].mig_start);
            g->mig_compute_used = (uint8_t)(g->mig_compute_used + sl[i].mig_compute);
        }
    }
}

void cr__sched_slots_release(cr_sched *s, job *j)
{
    host_charge(s, j, j->slots, j->nslots, -1);
    for (uint32_t i = 0; i < j->nslots; i++) {
        const cr_sched_slot *sl = &j->slots[i];
        gpu *g = &s->nodes[sl->node].gpus[sl->gpu];
        if (s->nodes[sl->node].excl_job == j->spec.id) {
            s->nodes[sl->node].excl_job = 0;
        }
        if (sl->milli > 0) {
            g->sh_milli = (uint16_t)(g->sh_milli - sl->milli);
            g->sh_mem -= j->spec.gpu_mem_bytes;
            if (--g->sh_n == 0 && !g->bad) {
                cr__sched_nt_adjust(s, nt_of(s, sl->node, g->type), g->type, +1);
            }
        } else if (sl->mig_start < 0) {
            g->job = 0;
            if (!g->bad) {
                cr__sched_nt_adjust(s, nt_of(s, sl->node, g->type), g->type, +1);
            }
        } else {
            g->mig_used &= (uint8_t) ~(((1u << sl->mig_mem) - 1) << sl->mig_start);
            g->mig_compute_used = (uint8_t)(g->mig_compute_used - sl->mig_compute);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Job table: open addressing, linear probing, backward-shift deletion.     */

static size_t slot_of(uint64_t id, size_t cap)
{
    return (size_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> 17) & (cap - 1);
}

job *cr__sched_job_get(const cr_sched *s, uint64_t id)
{
    for (size_t i = slot_of(id, s->tabcap);; i = (i + 1) & (s->tabcap - 1)) {
        job *j = s->tab[i];
        if (!j) {
            return NULL;
        }
        if (j->spec.id == id) {
            return j;
        }
    }
}

static void tab_put(cr_sched *s, job *j)
{
    if ((s->njobs + 1) * 2 > s->tabcap) {
        size_t oldcap = s->tabcap;
        job **old = s->tab;
        s->tabcap *= 2;
        s->tab = cr_calloc(s->tabcap, sizeof(*s->tab));
        for (size_t i = 0; i < oldcap; i++) {
            if (old[i]) {
                size_t k = slot_of(old[i]->spec.id, s->tabcap);
                while (s->tab[k]) {
                    k = (k + 1) & (s->tabcap - 1);
                }
                s->tab[k] = old[i];
            }
        }
        free(old);
    }
    size_t k = slot_of(j->spec.id, s->tabcap);
    while (s->tab[k]) {
        k = (k + 1) & (s->tabcap - 1);
    }
    s->tab[k] = j;
    s->njobs++;
}

static void tab_del(cr_sched *s, uint64_t id)
{
    size_t mask = s->tabcap - 1, i = slot_of(id, s->tabcap);
    while (s->tab[i] && s->tab[i]->spec.id != id) {
        i = (i + 1) & mask;
    }
    if (!s->tab[i]) {
        return;
    }
    s->tab[i] = NULL;
    s->njobs--;
    for (size_t k = (i + 1) & mask; s->tab[k]; k = (k + 1) & mask) {
        size_t home = slot_of(s->tab[k]->spec.id, s->tabcap);
        /* move back if its home is not in (i, k] cyclically */
        bool between = i <= k ? (home > i && home <= k) : (home > i || home <= k);
        if (!between) {
            s->tab[i] = s->tab[k];
            s->tab[k] = NULL;
            i = k;
        }
    }
}

static void list_add(job ***arr, uint32_t *len, uint32_t *cap, job *j)
{
    CR_GROW(*arr, *len, *cap);
    j->qidx = *len;
    (*arr)[(*len)++] = j;
}

/* Queue j as pending; the next cycle finds it on s->fresh. */
static void pending_add(cr_sched *s, job *j)
{
    list_add(&s->pending, &s->npending, &s->cpending, j);
    cr__sched_queue_enter(s, j);
}

static void list_del(job **arr, uint32_t *len, job *j)
{
    uint32_t i = j->qidx;
    arr[i] = arr[--*len];
    arr[i]->qidx = i;
}

static int spec_check(const cr_sched *s, const cr_sched_job_spec *sp)
{
    if (sp->id == 0 || sp->tenant < 0 || sp->tenant >= s->ntenants || sp->gpu_count < 1 ||
        sp->gpu_count > CR_SCHED_MAX_JOB_GPUS || (unsigned)sp->kind >= CR_JOB_KIND_COUNT ||
        sp->gpu_type < CR_SCHED_TYPE_ANY || sp->gpu_type >= s->ntypes || sp->time_limit_ns < 0 ||
        sp->checkpoint_interval_ns < 0 || sp->attained_gpu_ns < 0 ||
        sp->tput_count > CR_SCHED_MAX_TYPES || (sp->tput_count && !sp->tput)) {
        return CR_EINVAL;
    }
    if (sp->node_count && sp->gpu_count % sp->node_count != 0) {
        return CR_EINVAL;
    }
    if (sp->node_count && sp->gpu_count / sp->node_count > CR_SCHED_MAX_NODE_GPUS) {
        return CR_EINVAL;
    }
    if (sp->mig_profile && sp->mig_profile[0] &&
        (strlen(sp->mig_profile) >= 16 || sp->node_count > 1)) {
        return CR_EINVAL;
    }
    if ((sp->gpu_milli > 0 || sp->gpu_mem_bytes > 0) &&
        (sp->gpu_milli > 999 || sp->gpu_count != 1 || sp->node_count > 1 ||
         (sp->mig_profile && sp->mig_profile[0]))) {
        return CR_EINVAL;
    }
    for (size_t i = 0; i < sp->tput_count; i++) {
        if (!(sp->tput[i] >= 0) || !isfinite(sp->tput[i])) {
            return CR_EINVAL;
        }
    }
    return 0;
}

static job *job_make(const cr_sched_job_spec *sp)
{
    job *j = cr_calloc(1, sizeof(*j));
    j->lease_type = -1;
    j->spec = *sp;
    if (sp->tput) {
        /* float: relative speeds need no more, and a million queued jobs
         * then cost 128 bytes each for it */
        j->tput = cr_calloc(CR_SCHED_MAX_TYPES, sizeof(float));
        for (size_t t = 0; t < sp->tput_count; t++) {
            j->tput[t] = (float)sp->tput[t];
        }
    }
    j->spec.tput = NULL;
    j->spec.tput_count = 0;
    j->spec.node_mask = NULL;
    j->spec.node_mask_bits = 0;
    j->spec.prefer_mask = NULL;
    j->spec.prefer_mask_bits = 0;
    if (sp->prefer_mask) {
        size_t bytes = ((size_t)sp->prefer_mask_bits + 7) / 8;
        j->prefer_mask = cr_calloc(bytes ? bytes : 1, 1);
        memcpy(j->prefer_mask, sp->prefer_mask, bytes);
        j->spec.prefer_mask = j->prefer_mask;
        j->spec.prefer_mask_bits = sp->prefer_mask_bits;
    }
    if (sp->node_mask) {
        size_t bytes = ((size_t)sp->node_mask_bits + 7) / 8;
        j->node_mask = cr_calloc(bytes ? bytes : 1, 1);
        memcpy(j->node_mask, sp->node_mask, bytes);
        j->spec.node_mask = j->node_mask;
        j->spec.node_mask_bits = sp->node_mask_bits;
    }
    if (sp->mig_profile) {
        snprintf(j->mig, sizeof(j->mig), "%s", sp->mig_profile);
    }
    j->spec.mig_profile = j->mig;
    j->attained = sp->attained_gpu_ns;
    j->run_type = sp->gpu_type;
    j->rcode = R_NOT_CONSIDERED;
    j->rat = INT64_MAX;
    j->hetero_type = HT_FREE;
    return j;
}

int cr_sched_job_add(cr_sched *s, const cr_sched_job_spec *spec, int64_t now_ns)
{
    int rc = spec ? spec_check(s, spec) : CR_EINVAL;
    if (rc < 0) {
        return rc;
    }
    if (cr__sched_job_get(s, spec->id)) {
        return CR_EEXIST;
    }
    if (now_ns > s->now_ns) {
        s->now_ns = now_ns;
    }
    job *j = job_make(spec);
    j->enqueue_ns = now_ns;
    j->qcycle = s->stats.cycles;
    if (spec->suspend_held && s->cfg.suspend_hold) {
        j->susp_held = true; /* as cr__sched_suspend leaves it */
        j->rcode = R_CHECKPOINTING;
        j->rat = INT64_MAX;
    }
    tab_put(s, j);
    pending_add(s, j);
    cr__sched_mix_note(s, spec);
    return 0;
}

int64_t cr__sched_job_attained(const job *j, int64_t now_ns)
{
    if (j->state == CR_JOB_RUNNING && now_ns > j->start_ns && j->nslots && j->slots[0].milli) {
        int64_t dt = now_ns - j->start_ns; /* held <= 1000: no overflow */
        return j->attained + dt / 1000 * j->held + dt % 1000 * j->held / 1000;
    }
    if (j->state == CR_JOB_RUNNING && now_ns > j->start_ns) {
        return j->attained + (int64_t)j->nslots * (now_ns - j->start_ns);
    }
    return j->attained;
}

/* ------------------------------------------------------------------------ */
/* End-time heaps (reservations need the earliest ends first)               */

int64_t cr__sched_job_end(const job *j)
{
    if (j->spec.time_limit_ns <= 0 || j->start_ns > INT64_MAX - j->spec.time_limit_ns) {
        return INT64_MAX;
    }
    return j->start_ns + j->spec.time_limit_ns;
}

bool cr__sched_end_less(const job *a, const job *b)
{
    int64_t x = cr__sched_job_end(a), y = cr__sched_job_end(b);
    return x != y ? x < y : a->spec.id < b->spec.id;
}

static void heap_set(job **h, uint32_t i, job *j)
{
    h[i] = j;
    j->hpos = i;
}

static void heap_up(job **h, uint32_t i)
{
    job *j = h[i];
    while (i > 0 && cr__sched_end_less(j, h[(i - 1) / 2])) {
        heap_set(h, i, h[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_set(h, i, j);
}

static void heap_down(job **h, uint32_t n, uint32_t i)
{
    job *j = h[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n) {
            break;
        }
        if (c + 1 < n && cr__sched_end_less(h[c + 1], h[c])) {
            c++;
        }
        if (!cr__sched_end_less(h[c], j)) {
            break;
        }
        heap_set(h, i, h[c]);
        i = c;
    }
    heap_set(h, i, j);
}

static void eheap_add(cr_sched *s, job *j)
{
    int t = j->run_type;
    j->hpos = UINT32_MAX;
    if (j->nslots == 0 || j->slots[0].mig_start >= 0 || j->slots[0].milli ||
        cr__sched_job_end(j) == INT64_MAX) {
        return;
    }
    CR_GROW(s->eheap[t], s->neheap[t], s->ceheap[t]);
    uint32_t i = s->neheap[t]++;
    heap_set(s->eheap[t], i, j);
    heap_up(s->eheap[t], i);
}

static void eheap_del(cr_sched *s, job *j)
{
    int t = j->run_type;
    uint32_t i = j->hpos;
    if (i == UINT32_MAX) {
        return;
    }
    job **h = s->eheap[t];
    uint32_t last = --s->neheap[t];
    j->hpos = UINT32_MAX;
    if (i == last) {
        return;
    }
    job *m = h[last];
    heap_set(h, i, m);
    heap_up(h, i);
    heap_down(h, s->neheap[t], m->hpos);
}

void cr__sched_job_start(cr_sched *s, job *j, int type, const cr_sched_slot *sl, uint32_t n,
                         int64_t now_ns, bool borrowed)
{
    cr__sched_accrue(s, now_ns);
    list_del(s->pending, &s->npending, j);
    cr__sched_queue_leave(s, j);
    j->slots = cr_malloc(n * sizeof(*sl));
    memcpy(j->slots, sl, n * sizeof(*sl));
    j->nslots = n;
    j->run_type = type;
    j->start_ns = now_ns;
    j->borrowed = borrowed;
    j->state = CR_JOB_RUNNING;
    j->rcode = R_NONE;
    s->repart_flag = false;
    cr__sched_slots_take(s, j, sl, n);
    j->repart = s->repart_flag;
    j->held = n == 1 && sl[0].milli ? sl[0].milli : n * 1000u;
    tenant_rec *t = &s->tenants[j->spec.tenant];
    if (borrowed) {
        t->used_b[type] += j->held;
    } else {
        t->used_nb[type] += j->held;
    }
    list_add(&s->running, &s->nrunning, &s->crunning, j);
    CR_GROW(s->trun[type], s->ntrun[type], s->ctrun[type]);
    j->tidx = s->ntrun[type];
    s->trun[type][s->ntrun[type]++] = j;
    eheap_add(s, j);
    cr__sched_vix_add(s, j);
    if (j->spec.preemptible && (!s->vprio_any[type] || j->spec.priority < s->vprio_lb[type])) {
        s->vprio_any[type] = true;
        s->vprio_lb[type] = j->spec.priority;
    }
}

/* Stop a running job: release its slots, charge its service, and put it
 * back in the queue. lose_work: the time since its last checkpoint is lost
 * (preemption, failure); otherwise it is being removed for good. */
void cr__sched_job_stop(cr_sched *s, job *j, int64_t now_ns, bool lose_work)
{
    cr__sched_accrue(s, now_ns);
    if (s->pol->job_stopped) {
        s->pol->job_stopped(s, j, now_ns);
    }
    cr__sched_vix_del(s, j);
    cr__sched_slots_release(s, j);
    tenant_rec *t = &s->tenants[j->spec.tenant];
    if (j->borrowed) {
        t->used_b[j->run_type] -= j->held;
    } else {
        t->used_nb[j->run_type] -= j->held;
    }
    j->attained = cr__sched_job_attained(j, now_ns);
    j->held = 0;
    if (lose_work) {
        int64_t ran = now_ns > j->start_ns ? now_ns - j->start_ns : 0;
        int64_t ck = j->spec.checkpoint_interval_ns;
        j->lost_ns += ck > 0 ? ran % ck : ran;
        j->preemptions++;
    }
    list_del(s->running, &s->nrunning, j);
    eheap_del(s, j);
    {
        job **tr = s->trun[j->run_type];
        uint32_t i = j->tidx, last = --s->ntrun[j->run_type];
        tr[i] = tr[last];
        tr[i]->tidx = i;
    }
    CR_FREE(j->slots);
    j->nslots = 0;
    j->borrowed = false;
    j->state = CR_JOB_PENDING;
    j->run_type = j->spec.gpu_type;
    j->enqueue_ns = now_ns;
    j->qcycle = s->stats.cycles;
    j->rcode = R_NOT_CONSIDERED;
    pending_add(s, j);
}

int cr_sched_job_remove(cr_sched *s, uint64_t id, int64_t now_ns)
{
    job *j = cr__sched_job_get(s, id);
    if (!j) {
        return CR_ENOENT;
    }
    if (j->state == CR_JOB_RUNNING) {
        cr__sched_job_stop(s, j, now_ns, false);
    }
    list_del(s->pending, &s->npending, j);
    cr__sched_queue_leave(s, j);
    tab_del(s, id);
    /* s->fresh may still point at it: freed by the next cycle */
    j->dead = true;
    CR_GROW(s->grave, s->ngrave, s->cgrave);
    s->grave[s->ngrave++] = j;
    return 0;
}

int cr_sched_job_requeue(cr_sched *s, uint64_t id, int64_t now_ns)
{
    job *j = cr__sched_job_get(s, id);
    if (!j) {
        return CR_ENOENT;
    }
    if (j->state != CR_JOB_RUNNING) {
        return CR_ECONFLICT;
    }
    cr__sched_job_stop(s, j, now_ns, true);
    j->rcode = R_REQUEUED;
    return 0;
}

int cr_sched_job_restore(cr_sched *s, const cr_sched_job_spec *spec, int gpu_type,
                         const cr_sched_slot *slots, size_t n_slots, int64_t start_ns,
                         bool borrowed)
{
    int rc = spec ? spec_check(s, spec) : CR_EINVAL;
    if (rc < 0) {
        return rc;
    }
    if (gpu_type < 0 || gpu_type >= s->ntypes || n_slots != spec->gpu_count || !slots) {
        return CR_EINVAL;
    }
    if (cr__sched_job_get(s, spec->id)) {
        return CR_EEXIST;
    }
    /* Validate every slot before touching anything. */
    for (size_t i = 0; i < n_slots; i++) {
        const cr_sched_slot *sl = &slots[i];
        if (sl->node >= s->nnodes || sl->gpu >= s->nodes[sl->node].ngpu) {
            return CR_EINVAL;
        }
        const gpu *g = &s->nodes[sl->node].gpus[sl->gpu];
        if (g->type != gpu_type) {
            return CR_EINVAL;
        }
        bool frac = spec->gpu_milli > 0 || spec->gpu_mem_bytes > 0;
        if (frac || sl->milli) {
            uint32_t want = spec->gpu_milli
                                ? spec->gpu_milli
                                : cr__sched_mem_milli(spec->gpu_mem_bytes, g->mem_bytes);
            if (!frac || sl->milli != want || sl->mig_start >= 0 || !g->share) {
                return CR_EINVAL;
            }
            if (g->mig || g->bad || g->job || g->sh_milli + want > 1000 ||
                g->sh_mem + spec->gpu_mem_bytes > g->mem_bytes) {
                return CR_EBUSY;
            }
        } else if (sl->mig_start < 0) {
            if (g->mig || g->bad || g->job || g->sh_n) {
                return CR_EBUSY;
            }
            for (size_t k = 0; k < i; k++) {
                if (slots[k].node == sl->node && slots[k].gpu == sl->gpu) {
                    return CR_EBUSY;
                }
            }
        } else {
            if (sl->mig_mem == 0 || sl->mig_start + sl->mig_mem > s->types[gpu_type].mig_mem ||
                sl->mig_compute == 0) {
                return CR_EINVAL;
            }
            uint32_t mask = ((1u << sl->mig_mem) - 1) << sl->mig_start;
            uint32_t compute = g->mig_compute_used;
            for (size_t k = 0; k < i; k++) {
                if (slots[k].node == sl->node && slots[k].gpu == sl->gpu) {
                    if (slots[k].mig_start < 0) {
                        return CR_EBUSY;
                    }
                    mask |= (((1u << slots[k].mig_mem) - 1) << slots[k].mig_start) << 8;
                    compute += slots[k].mig_compute;
                    if ((mask >> 8) & (((1u << sl->mig_mem) - 1) << sl->mig_start)) {
                        return CR_EBUSY;
                    }
                }
            }
            if (!g->mig || g->bad || (g->mig_used & mask) ||
                compute + sl->mig_compute > s->types[gpu_type].mig_compute) {
                return CR_EBUSY;
            }
            if (g->mig_nfix &&
                !cr__sched_mig_fixed_has(g, sl->mig_start, sl->mig_mem, sl->mig_compute)) {
                return CR_EINVAL; /* no such instance on the device */
            }
        }
    }
    job *j = job_make(spec);
    tab_put(s, j);
    pending_add(s, j);
    cr__sched_job_start(s, j, gpu_type, slots, (uint32_t)n_slots, start_ns, borrowed);
    return 0;
}

int cr_sched_job_info_get(const cr_sched *s, uint64_t id, cr_sched_job_info *out)
{
    const job *j = cr__sched_job_get(s, id);
    if (!j) {
        return CR_ENOENT;
    }
    memset(out, 0, sizeof(*out));
    out->id = id;
    out->state = j->state;
    out->tenant = j->spec.tenant;
    out->gpu_type = j->run_type;
    out->slot_count = j->nslots;
    out->slots = j->slots;
    out->submit_ns = j->spec.submit_ns;
    out->start_ns = j->state == CR_JOB_RUNNING ? j->start_ns : 0;
    out->attained_gpu_ns = cr__sched_job_attained(j, s->now_ns);
    out->lost_work_ns = j->lost_ns;
    out->preemptions = j->preemptions;
    out->borrowed = j->borrowed;
    out->las_queue = j->las_queue;
    return 0;
}

size_t cr_sched_job_count(const cr_sched *s, cr_sched_job_state st)
{
    return st == CR_JOB_RUNNING ? s->nrunning : s->npending;
}

void cr_sched_stats_get(const cr_sched *s, cr_sched_stats *out)
{
    *out = s->stats;
}
