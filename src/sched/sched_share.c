/*
 * sched_share.c - fractional tasks on shared GPUs.
 *
 * A job with gpu_milli (1..999 thousandths of a GPU) or gpu_mem_bytes asks
 * for part of one GPU. It may go only on a GPU marked shareable, healthy,
 * not in MIG mode and not held by a whole-GPU job; the fractions on one GPU
 * sum to at most 1000 and the memory asked to at most the GPU's memory. A
 * shareable GPU with no fractional task on it is an ordinary free whole
 * GPU; the first fractional task takes it out of the whole-GPU counters and
 * the last one to leave gives it back, so whole-GPU jobs and fractional
 * tasks never meet on one GPU.
 *
 * Which shareable GPU (config share_policy):
 *  - best-fit: the least compute left after the task (packs, keeps whole
 *    GPUs whole);
 *  - worst-fit: the most left (spreads, the classic load balancer);
 *  - frag (default): fragmentation-aware, after the idea of FGD (Weng et
 *    al., "Beware of Fragmentation", USENIX ATC'23), in our own terms:
 *
 *    The scheduler remembers the sizes of the last CR_SCHED_MIX_WINDOW
 *    tasks submitted: a distribution p(m) over task sizes m, in thousandths
 *    of a GPU (m < 1000: a fractional task; m = 1000 k: k whole GPUs on a
 *    node). For a node and one GPU type, with f_g the free thousandths of
 *    GPU g (1000 when nothing holds it, 1000 - held for a shared GPU, 0 when
 *    a whole job holds it) and F the number of entirely free GPUs, the part
 *    of the node's free capacity that a task of size m cannot use is
 *
 *      frag(m) = sum over shareable g with f_g < m of f_g       (m < 1000)
 *      frag(m) = sum over g with 0 < f_g < 1000 of f_g
 *                + (F < k ? 1000 F : 0)                          (m = 1000 k)
 *
 *    and the expected fragmentation of the node is E = sum_m p(m) frag(m).
 *    A task of size c placed on GPU g changes f_g to f_g - c (and F by one
 *    when g was entirely free); the policy takes the GPU where E grows
 *    least, then the one with the least left (best fit), then the lowest
 *    node and GPU index. Only the chosen node's E changes, and only through
 *    g, so the growth is computed per candidate in O(1) from two tables
 *    rebuilt when the mix changes: T[f] = f * P(m > f) over fractional
 *    sizes, and W[F] = sum over whole sizes k > F of p(k) * 1000 F.
 *    Memory is a constraint only; the score counts compute.
 *
 * Placing a task costs one pass over the type's shareable GPUs.
 */
#include "cr_sched.h"

#include <string.h>

#include "cr_error.h"
#include "sched_int.h"

static const char *const share_names[CR_SHARE_POLICY_COUNT] = {"frag", "best-fit", "worst-fit"};

int cr_sched_share_policy_parse(const char *name, cr_sched_share_policy *out)
{
    for (int i = 0; name && i < CR_SHARE_POLICY_COUNT; i++) {
        if (strcmp(name, share_names[i]) == 0) {
            *out = (cr_sched_share_policy)i;
            return 0;
        }
    }
    return CR_EINVAL;
}

const char *cr_sched_share_policy_name(cr_sched_share_policy p)
{
    return (unsigned)p < CR_SHARE_POLICY_COUNT ? share_names[p] : "?";
}

uint32_t cr__sched_share_milli(const job *j, const gpu *g)
{
    if (j->spec.gpu_milli > 0) {
        return j->spec.gpu_milli;
    }
    return cr__sched_mem_milli(j->spec.gpu_mem_bytes, g->mem_bytes);
}

bool cr__sched_share_any(const cr_sched *s, int type)
{
    const gtype *t = &s->types[type];
    for (uint32_t i = 0; i < t->nsh; i++) {
        const node *nd = &s->nodes[t->sh_gpus[i] >> 8];
        const gpu *g = &nd->gpus[t->sh_gpus[i] & 0xff];
        if (nd->state == CR_NODE_UP && !g->bad && !g->mig) {
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------------------------------ */
/* The mix of recent task sizes                                             */

/* Size of a task in thousandths (0 = not counted: MIG). */
static uint32_t task_size(const cr_sched *s, const cr_sched_job_spec *sp)
{
    if (sp->mig_profile && sp->mig_profile[0]) {
        return 0;
    }
    if (sp->gpu_milli > 0) {
        return sp->gpu_milli;
    }
    if (sp->gpu_mem_bytes > 0) {
        uint64_t gmem = 0;
        if (sp->gpu_type >= 0) {
            gmem = s->types[sp->gpu_type].mem_bytes;
        } else {
            for (int t = 0; t < s->ntypes; t++) {
                if (s->types[t].mem_bytes && (!gmem || s->types[t].mem_bytes < gmem)) {
                    gmem = s->types[t].mem_bytes;
                }
            }
        }
        uint32_t m = cr__sched_mem_milli(sp->gpu_mem_bytes, gmem);
        return m >= 1000 ? 999 : m;
    }
    uint32_t k = sp->node_count ? sp->gpu_count / sp->node_count : sp->gpu_count;
    return (k > CR_SCHED_MAX_NODE_GPUS ? CR_SCHED_MAX_NODE_GPUS : k) * 1000;
}

void cr__sched_mix_note(cr_sched *s, const cr_sched_job_spec *sp)
{
    mix *x = &s->mix;
    uint32_t size = task_size(s, sp);
    if (size == 0) {
        return;
    }
    if (x->n == CR_SCHED_MIX_WINDOW) {
        x->count[x->ring[x->pos]]--; /* the oldest leaves */
    } else {
        x->n++;
    }
    /* its class: the same size, else a new (or emptied) class, else the
     * nearest size when all MIX_CLASSES are in use */
    uint32_t c = UINT32_MAX, empty = UINT32_MAX, near = 0, dist = UINT32_MAX;
    for (uint32_t i = 0; i < x->nclass && c == UINT32_MAX; i++) {
        uint32_t d = x->size[i] > size ? x->size[i] - size : size - x->size[i];
        if (d == 0) {
            c = i;
        } else if (x->count[i] == 0 && empty == UINT32_MAX) {
            empty = i;
        } else if (d < dist) {
            dist = d;
            near = i;
        }
    }
    if (c == UINT32_MAX) {
        if (empty != UINT32_MAX) {
            c = empty;
        } else if (x->nclass < MIX_CLASSES) {
            c = x->nclass++;
        } else {
            c = near;
            size = x->size[near];
        }
        x->size[c] = size;
    }
    x->count[c]++;
    x->ring[x->pos] = c;
    x->pos = (x->pos + 1) % CR_SCHED_MIX_WINDOW;
}

/* ------------------------------------------------------------------------ */
/* Placement                                                                */

/* Scoring tables (see the essay above), in units of p * thousandths. */
typedef struct ftab {
    double frac[1001];                        /* T[f] */
    double whole[CR_SCHED_MAX_NODE_GPUS + 1]; /* W[F] */
    double pwhole;                            /* P(m >= 1000) */
} ftab;

static void ftab_build(const mix *x, ftab *t)
{
    double gt[1002];
    memset(gt, 0, sizeof(gt));
    memset(t, 0, sizeof(*t));
    double total = 0;
    for (uint32_t i = 0; i < x->nclass; i++) {
        total += x->count[i];
    }
    if (total <= 0) {
        return;
    }
    for (uint32_t i = 0; i < x->nclass; i++) {
        if (!x->count[i]) {
            continue;
        }
        double p = x->count[i] / total;
        if (x->size[i] < 1000) {
            gt[x->size[i]] += p; /* P(m = size) */
        } else {
            uint32_t k = x->size[i] / 1000;
            t->pwhole += p;
            for (uint32_t f = 0; f < k && f <= CR_SCHED_MAX_NODE_GPUS; f++) {
                t->whole[f] += p * 1000.0 * f;
            }
        }
    }
    /* P(m > f) over fractional sizes, by a suffix sum */
    double acc = 0;
    for (int f = 1000; f >= 0; f--) {
        t->frac[f] = f * acc;
        acc += gt[f];
    }
}

static double partial(uint32_t f)
{
    return f > 0 && f < 1000 ? (double)f : 0.0;
}

/* Growth of the node's expected fragmentation when GPU free f goes to f2,
 * with nfree entirely free GPUs on the node before. */
static double frag_delta(const ftab *t, uint32_t f, uint32_t f2, uint32_t nfree)
{
    double d = t->frac[f2] - t->frac[f];
    d += t->pwhole * (partial(f2) - partial(f));
    if (f == 1000 && nfree > 0) {
        uint32_t a = nfree > CR_SCHED_MAX_NODE_GPUS ? CR_SCHED_MAX_NODE_GPUS : nfree;
        d += t->whole[a - 1] - t->whole[a];
    }
    return d;
}

/* Entirely free GPUs of the type on node n (the whole-GPU counter). */
static uint32_t node_free_whole(const cr_sched *s, uint32_t n, int type)
{
    const node *nd = &s->nodes[n];
    for (uint32_t i = nd->nt_first; i < nd->nt_first + nd->nnt; i++) {
        if (s->nts[i].type == type) {
            return s->nts[i].free;
        }
    }
    return 0;
}

int cr__sched_plan_share(cr_sched *s, const job *j, int type)
{
    const gtype *t = &s->types[type];
    ftab tab;
    cr_sched_share_policy pol = s->cfg.share_policy;
    if (pol == CR_SHARE_FRAG) {
        ftab_build(&s->mix, &tab);
    }
    uint32_t best = UINT32_MAX, best_left = 0, best_milli = 0;
    double best_score = 0;
    for (uint32_t i = 0; i < t->nsh; i++) {
        uint32_t n = t->sh_gpus[i] >> 8, gi = t->sh_gpus[i] & 0xff;
        const node *nd = &s->nodes[n];
        const gpu *g = &nd->gpus[gi];
        if (nd->state != CR_NODE_UP || g->bad || g->mig || g->job ||
            g->mem_bytes < j->spec.mem_bytes || !cr__sched_node_ok(s, j, n)) {
            continue;
        }
        uint32_t c = cr__sched_share_milli(j, g);
        if (g->sh_milli + c > 1000 || g->sh_mem + j->spec.gpu_mem_bytes > g->mem_bytes) {
            continue;
        }
        uint32_t f = 1000u - g->sh_milli, left = f - c;
        double score;
        switch (pol) {
        case CR_SHARE_BEST_FIT:
            score = left;
            break;
        case CR_SHARE_WORST_FIT:
            score = -(double)left;
            break;
        default:
            score = frag_delta(&tab, f, left, g->sh_n ? 0 : node_free_whole(s, n, type));
            break;
        }
        /* ties: the least left, then the first in order */
        if (best == UINT32_MAX || score < best_score - 1e-9 ||
            (score <= best_score + 1e-9 && left < best_left)) {
            best = i;
            best_score = score;
            best_left = left;
            best_milli = c;
        }
    }
    if (best == UINT32_MAX) {
        return CR_ENOSPC;
    }
    s->plan[0] = (cr_sched_slot){.node = t->sh_gpus[best] >> 8,
                                 .gpu = (uint16_t)(t->sh_gpus[best] & 0xff),
                                 .mig_start = -1,
                                 .milli = (uint16_t)best_milli};
    return 0;
}
