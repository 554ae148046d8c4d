/*
 * sched_tree.c - the tenant tree: guarantees, limits and lending limits up
 * the tree, and Slurm's fair tree for the PRIORITY policy's tenant order.
 *
 * A tenant's quota is its guarantee. With a parent, a job is within
 * guarantee (not borrowed) only when the tenant and every ancestor that has
 * a guarantee on the type has room for it: the subtree's non-borrowed use
 * plus the job fits. A limit bounds the subtree's whole use, borrowed or
 * not; it is never exceeded (the job waits, nothing is preempted for it).
 *
 * Lending. A tenant N with a guarantee G(N) holds as its *own* part
 * own(N) = G(N) less the guarantees of the nearest guaranteed tenants
 * below it; a non-borrowed job counts against the own part of its nearest
 * guaranteed ancestor-or-self (its holder). Borrowed work may use
 *
 *     lendable = max(0, total - R - U_free) + sum over N of
 *                min(lend(N), max(0, own(N) - own_used(N)))
 *
 * GPUs of the type, where total is the type's GPUs in service, R the sum
 * of the guarantees of the top-most guaranteed tenants (capacity nobody is
 * guaranteed is total - R), U_free the non-borrowed use of tenants with no
 * guarantee anywhere up their tree, and lend(N) the lending limit (all of
 * it when unset). A borrowed start needs sum of borrowed use + the job <=
 * lendable. With no lending limit set this never refuses a start that
 * placement allows (lendable less borrowed use is at least the free GPUs),
 * so only a set lending limit binds.
 *
 * Everything walks the tenant array (small: tens to hundreds of tenants);
 * flat tenants (ntree == 0, nlimits == 0) take none of these paths.
 */
#include "sched_int.h"

#include "cr_alloc.h"
#include "cr_error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool in_subtree(const cr_sched *s, int t, int root)
{
    for (int a = t, n = 0; a >= 0 && n <= CR_SCHED_TENANT_DEPTH_MAX;
         a = s->tenants[a].parent, n++) {
        if (a == root) {
            return true;
        }
    }
    return false;
}

static int depth_of(const cr_sched *s, int t)
{
    int d = 0;
    for (int a = t; a >= 0 && d <= CR_SCHED_TENANT_DEPTH_MAX; a = s->tenants[a].parent) {
        d++;
    }
    return d;
}

/* Levels below t, t counted: 1 for a leaf. */
static int height_of(const cr_sched *s, int t)
{
    int h = 1;
    for (int i = 0; i < s->ntenants; i++) {
        if (i != t && in_subtree(s, i, t)) {
            int d = depth_of(s, i) - depth_of(s, t) + 1;
            h = d > h ? d : h;
        }
    }
    return h;
}

int cr_sched_tenant_set_parent(cr_sched *s, int tenant, int parent)
{
    if (tenant < 0 || tenant >= s->ntenants || parent < -1 || parent >= s->ntenants ||
        parent == tenant) {
        return CR_EINVAL;
    }
    tenant_rec *t = &s->tenants[tenant];
    if (parent == t->parent) {
        return 0;
    }
    if (parent >= 0 && (in_subtree(s, parent, tenant) ||
                        depth_of(s, parent) + height_of(s, tenant) > CR_SCHED_TENANT_DEPTH_MAX)) {
        return CR_EINVAL;
    }
    s->ntree += (parent >= 0) - (t->parent >= 0);
    t->parent = parent;
    return 0;
}

int cr_sched_tenant_parent(const cr_sched *s, int tenant)
{
    return tenant >= 0 && tenant < s->ntenants ? s->tenants[tenant].parent : -1;
}

static int set_bound(cr_sched *s, int tenant, int type, int64_t gpus, bool lend)
{
    if (tenant < 0 || tenant >= s->ntenants || type < 0 || type >= s->ntypes || gpus < -1 ||
        gpus > INT32_MAX) {
        return CR_EINVAL;
    }
    int64_t *v = lend ? &s->tenants[tenant].lend[type] : &s->tenants[tenant].limit[type];
    s->nlimits += (gpus >= 0) - (*v >= 0);
    *v = gpus;
    return 0;
}

int cr_sched_tenant_set_limit(cr_sched *s, int tenant, int type, int64_t gpus)
{
    return set_bound(s, tenant, type, gpus, false);
}

int cr_sched_tenant_set_lending(cr_sched *s, int tenant, int type, int64_t gpus)
{
    return set_bound(s, tenant, type, gpus, true);
}

int cr_sched_tenant_fair(const cr_sched *s, int tenant, int *rank, double *level_fs)
{
    if (tenant < 0 || tenant >= s->ntenants) {
        return CR_EINVAL;
    }
    if (s->ntree == 0) {
        return CR_ENOENT;
    }
    *rank = s->tenants[tenant].fair_rank;
    *level_fs = s->tenants[tenant].level_fs;
    return 0;
}

int64_t cr__sched_tree_used(const cr_sched *s, int tenant, int type, bool with_borrowed)
{
    int64_t u = 0;
    for (int i = 0; i < s->ntenants; i++) {
        if (i == tenant || (s->ntree > 0 && in_subtree(s, i, tenant))) {
            u += s->tenants[i].used_nb[type] + (with_borrowed ? s->tenants[i].used_b[type] : 0);
        }
    }
    return u;
}

bool cr__sched_tree_guaranteed(const cr_sched *s, int tenant, int type)
{
    for (int a = tenant; a >= 0; a = s->tenants[a].parent) {
        if (s->tenants[a].quota[type] >= 0) {
            return true;
        }
    }
    return false;
}

bool cr__sched_tree_quota_room(const cr_sched *s, int tenant, int type, int64_t need)
{
    if (s->ntree == 0) {
        const tenant_rec *t = &s->tenants[tenant];
        return t->quota[type] < 0 || (int64_t)t->used_nb[type] + need <= t->quota[type] * 1000;
    }
    for (int a = tenant; a >= 0; a = s->tenants[a].parent) {
        int64_t q = s->tenants[a].quota[type];
        if (q >= 0 && cr__sched_tree_used(s, a, type, false) + need > q * 1000) {
            return false;
        }
    }
    return true;
}

int cr__sched_tree_limit_block(const cr_sched *s, int tenant, int type, int64_t need)
{
    if (s->nlimits == 0) {
        return 0;
    }
    for (int a = tenant; a >= 0; a = s->tenants[a].parent) {
        int64_t l = s->tenants[a].limit[type];
        if (l >= 0 && cr__sched_tree_used(s, a, type, true) + need > l * 1000) {
            return a + 1;
        }
    }
    return 0;
}

/* The nearest ancestor-or-self with a guarantee on the type, or -1. */
static int holder_of(const cr_sched *s, int t, int type)
{
    for (int a = t; a >= 0; a = s->tenants[a].parent) {
        if (s->tenants[a].quota[type] >= 0) {
            return a;
        }
    }
    return -1;
}

bool cr__sched_tree_lend_room(const cr_sched *s, int tenant, int type, int64_t need)
{
    (void)tenant;
    if (s->nlimits == 0) {
        return true;
    }
    int n = s->ntenants;
    int64_t *own = cr_calloc((size_t)n, sizeof *own);   /* own part, thousandths */
    int64_t *used = cr_calloc((size_t)n, sizeof *used); /* own part used */
    int64_t reserved = 0, ufree = 0, borrowed = 0;
    for (int i = 0; i < n; i++) {
        const tenant_rec *t = &s->tenants[i];
        borrowed += t->used_b[type];
        int h = holder_of(s, i, type);
        if (h < 0) {
            ufree += t->used_nb[type];
        } else {
            used[h] += t->used_nb[type];
        }
        if (t->quota[type] >= 0) {
            int up = t->parent >= 0 ? holder_of(s, t->parent, type) : -1;
            own[i] += t->quota[type] * 1000;
            if (up >= 0) {
                own[up] -= t->quota[type] * 1000;
            } else {
                reserved += t->quota[type] * 1000;
            }
        }
    }
    int64_t lendable = (int64_t)s->types[type].total * 1000 - reserved - ufree;
    lendable = lendable > 0 ? lendable : 0;
    for (int i = 0; i < n; i++) {
        if (s->tenants[i].quota[type] < 0) {
            continue;
        }
        int64_t idle = own[i] - used[i];
        idle = idle > 0 ? idle : 0;
        int64_t l = s->tenants[i].lend[type];
        lendable += l >= 0 && l * 1000 < idle ? l * 1000 : idle;
    }
    free(own);
    free(used);
    return borrowed + need <= lendable;
}

/*
 * Slurm's fair tree. For each tenant N its subtree's decayed usage per
 * type, summed; U(N) = the largest share of a type's capacity it makes
 * (DRF, as the flat rule). Among siblings (the children of one parent;
 * the roots are siblings too): S = weight / sum of the siblings' weights,
 * U' = U / sum of the siblings' U (0 when all are 0), and the level fair
 * share LevelFS = S / U' (infinite when U' is 0). The tree is walked depth
 * first, children by LevelFS descending (ties by name); each tenant is
 * ranked when reached, before its children, so every tenant of a
 * subtree that is behind on its share goes before every tenant of one that
 * is ahead. The rank is the tenant's share for the queue (lower first).
 */
typedef struct fnode {
    double u;  /* dominant share of the subtree's usage */
    double fs; /* level fair share */
} fnode;

static bool fs_before(const cr_sched *s, const fnode *f, int x, int y)
{
    if (f[x].fs != f[y].fs) {
        return f[x].fs > f[y].fs;
    }
    return strcmp(s->tenants[x].name, s->tenants[y].name) < 0;
}

static void visit(cr_sched *s, fnode *f, int *kids, int parent, int *rank, int depth)
{
    int nk = 0;
    double sw = 0, su = 0;
    for (int i = 0; i < s->ntenants; i++) {
        if (s->tenants[i].parent == parent) {
            kids[nk++] = i;
            sw += s->tenants[i].weight;
            su += f[i].u;
        }
    }
    if (nk == 0) {
        return;
    }
    for (int k = 0; k < nk; k++) {
        int i = kids[k];
        double S = s->tenants[i].weight / sw;
        double U = su > 0 ? f[i].u / su : 0;
        f[i].fs = U > 0 ? S / U : INFINITY;
        s->tenants[i].level_fs = f[i].fs;
    }
    int *mine = cr_malloc((size_t)nk * sizeof *mine);
    for (int k = 0; k < nk; k++) { /* insertion sort: siblings are few */
        int v = kids[k], p = k;
        while (p > 0 && fs_before(s, f, v, mine[p - 1])) {
            mine[p] = mine[p - 1];
            p--;
        }
        mine[p] = v;
    }
    for (int k = 0; k < nk; k++) {
        s->tenants[mine[k]].fair_rank = (*rank)++;
        s->tenants[mine[k]].share = s->tenants[mine[k]].fair_rank;
        if (depth < CR_SCHED_TENANT_DEPTH_MAX) {
            visit(s, f, kids, mine[k], rank, depth + 1);
        }
    }
    free(mine);
}

void cr__sched_tree_shares(cr_sched *s)
{
    int n = s->ntenants;
    if (n == 0) {
        return;
    }
    fnode *f = cr_calloc((size_t)n, sizeof *f);
    double *sum = cr_calloc((size_t)n * CR_SCHED_MAX_TYPES, sizeof *sum);
    int *kids = cr_malloc((size_t)n * sizeof *kids);
    for (int i = 0; i < n; i++) {
        for (int a = i, d = 0; a >= 0 && d < CR_SCHED_TENANT_DEPTH_MAX;
             a = s->tenants[a].parent, d++) {
            for (int k = 0; k < s->ntypes; k++) {
                sum[(size_t)a * CR_SCHED_MAX_TYPES + (size_t)k] += s->tenants[i].usage[k];
            }
        }
    }
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < s->ntypes; k++) {
            if (s->types[k].total > 0) {
                double sh =
                    sum[(size_t)i * CR_SCHED_MAX_TYPES + (size_t)k] / (double)s->types[k].total;
                f[i].u = sh > f[i].u ? sh : f[i].u;
            }
        }
    }
    int rank = 0;
    visit(s, f, kids, -1, &rank, 1);
    free(f);
    free(sum);
    free(kids);
}
