/*
 * sched_hetero.c - the heterogeneity-aware type choice (HETERO policy).
 *
 * Gavel's observation: jobs gain very different amounts from a faster GPU
 * type (a language model may run 3x faster on a V100 than on a K80, a small
 * recommendation model barely 1.2x), so which job gets which type matters
 * as much as the order. Each cycle, the "auto" jobs at the head of the
 * queue (at most config.hetero_window of them) are allocated to the free
 * GPUs of each type by a linear program, Gavel's max-sum-throughput policy
 * with normalised throughputs:
 *
 *   maximise   sum_j sum_t gpus_j (w_jt + eps_j) x_jt     w_jt = tput_jt / max_t tput_jt
 *   subject to sum_t x_jt <= 1                       (each job at most once)
 *              sum_j gpus_j x_jt <= free_t           (free GPUs of each type)
 *              0 <= x_jt, x_jt = 0 where tput_jt = 0
 *
 * eps_j is a tiny bonus decreasing with queue position, so that among
 * equal choices earlier jobs win (FIFO inside the allocation). A job goes
 * to the type with its largest x_jt when that is at least 1/2; otherwise
 * the allocation gives it nothing this cycle and it waits (HT_WAIT). Gavel
 * time-slices fractional allocations over rounds; a cycle here places jobs
 * to run to completion, so the fractional part is rounded away.
 *
 * The LP is solved with GLPK's simplex (config.hetero_lp), or replaced by a
 * greedy heuristic: (job, type) pairs by w_jt, ties broken by the job's
 * "regret" (how much it loses if denied its best type: w_best - w_second)
 * and then by queue order, each pair taken while the job is unassigned and
 * the type has room. The unit tests compare the two.
 *
 * The objective weighs each job by its GPU count, so it is the cluster's
 * normalised throughput per GPU: the allocation is neutral to job size
 * (maximising the per-job sum instead would favour small jobs and starve
 * large ones inside the window).
 */
#include "cr_sched.h"

#include <glpk.h>
#include <stdlib.h>
#include <string.h>

#include "cr_alloc.h"
#include "sched_int.h"

typedef struct hjob {
    job *j;
    double w[CR_SCHED_MAX_TYPES];
    double regret;
    uint32_t rank;
} hjob;

typedef struct hpair {
    double w;
    double regret;
    uint32_t rank;
    int type;
    hjob *h;
} hpair;

static int cmp_pair(const void *x, const void *y)
{
    const hpair *a = x, *b = y;
    if (a->w != b->w) {
        return a->w > b->w ? -1 : 1;
    }
    if (a->regret != b->regret) {
        return a->regret > b->regret ? -1 : 1;
    }
    if (a->rank != b->rank) {
        return a->rank < b->rank ? -1 : 1;
    }
    return a->type - b->type;
}

/* Greedy: (job, type) pairs by normalised throughput, then by the job's
 * regret, then queue order; a pair is taken if the job is still
 * unassigned (HT_WAIT) and the type has room. Also fills what the LP's
 * rounding left free. */
static void greedy(cr_sched *s, hjob *h, uint32_t n, const double *cap_in)
{
    double cap[CR_SCHED_MAX_TYPES];
    memcpy(cap, cap_in, sizeof(cap));
    hpair *p = cr_malloc(((size_t)n * (size_t)s->ntypes + 1) * sizeof(*p));
    size_t np = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (h[i].j->hetero_type != HT_WAIT) {
            continue; /* assigned by the LP */
        }
        for (int t = 0; t < s->ntypes; t++) {
            if (h[i].w[t] > 0) {
                p[np++] = (hpair){h[i].w[t], h[i].regret, h[i].rank, t, &h[i]};
            }
        }
    }
    qsort(p, np, sizeof(*p), cmp_pair);
    for (size_t i = 0; i < np; i++) {
        job *j = p[i].h->j;
        double g = j->spec.gpu_count;
        if (j->hetero_type == HT_WAIT && cap[p[i].type] >= g) {
            j->hetero_type = p[i].type;
            cap[p[i].type] -= g;
        }
    }
    free(p);
}

static int lp(cr_sched *s, hjob *h, uint32_t n, const double *cap)
{
    int rc = -1;
    int ntypes = s->ntypes;
    glp_prob *p = glp_create_prob();
    glp_set_obj_dir(p, GLP_MAX);
    glp_add_rows(p, (int)n + ntypes);
    for (uint32_t i = 0; i < n; i++) {
        glp_set_row_bnds(p, (int)i + 1, GLP_UP, 0.0, 1.0);
    }
    for (int t = 0; t < ntypes; t++) {
        glp_set_row_bnds(p, (int)n + t + 1, GLP_UP, 0.0, cap[t]);
    }
    /* columns: one per (job, type) with w > 0 */
    size_t ncol = 0;
    for (uint32_t i = 0; i < n; i++) {
        for (int t = 0; t < ntypes; t++) {
            ncol += h[i].w[t] > 0;
        }
    }
    if (ncol == 0) {
        glp_delete_prob(p);
        return 0;
    }
    int *ia = cr_malloc((2 * ncol + 1) * sizeof(int));
    int *ja = cr_malloc((2 * ncol + 1) * sizeof(int));
    double *ar = cr_malloc((2 * ncol + 1) * sizeof(double));
    int *cj = cr_malloc((ncol + 1) * sizeof(int));
    int *ct = cr_malloc((ncol + 1) * sizeof(int));
    glp_add_cols(p, (int)ncol);
    int col = 0, nz = 0;
    for (uint32_t i = 0; i < n; i++) {
        double eps = 1e-4 * (double)(n - i) / (double)n;
        for (int t = 0; t < ntypes; t++) {
            if (!(h[i].w[t] > 0)) {
                continue;
            }
            col++;
            cj[col] = (int)i;
            ct[col] = t;
            glp_set_col_bnds(p, col, GLP_DB, 0.0, 1.0);
            glp_set_obj_coef(p, col, (h[i].w[t] + eps) * h[i].j->spec.gpu_count);
            nz++;
            ia[nz] = (int)i + 1;
            ja[nz] = col;
            ar[nz] = 1.0;
            nz++;
            ia[nz] = (int)n + t + 1;
            ja[nz] = col;
            ar[nz] = h[i].j->spec.gpu_count;
        }
    }
    glp_load_matrix(p, nz, ia, ja, ar);
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    if (glp_simplex(p, &parm) == 0 && glp_get_status(p) == GLP_OPT) {
        double bestx[4096];
        uint32_t lim = n < 4096 ? n : 4096;
        for (uint32_t i = 0; i < lim; i++) {
            bestx[i] = 0;
            h[i].j->hetero_type = HT_WAIT;
        }
        for (int c = 1; c <= col; c++) {
            double x = glp_get_col_prim(p, c);
            uint32_t i = (uint32_t)cj[c];
            if (i < lim && x >= 0.5 && x > bestx[i]) {
                bestx[i] = x;
                h[i].j->hetero_type = ct[c];
            }
        }
        /* rounding can leave capacity: the greedy pass fills it */
        double left[CR_SCHED_MAX_TYPES];
        memcpy(left, cap, sizeof(left));
        for (uint32_t i = 0; i < lim; i++) {
            if (h[i].j->hetero_type >= 0) {
                left[h[i].j->hetero_type] -= h[i].j->spec.gpu_count;
            }
        }
        greedy(s, h, lim, left);
        rc = 0;
    }
    free(ia);
    free(ja);
    free(ar);
    free(cj);
    free(ct);
    glp_delete_prob(p);
    return rc;
}

void cr__sched_hetero_assign(cr_sched *s, cr_rng *rng)
{
    (void)rng;
    size_t win = s->cfg.hetero_window < 4096 ? s->cfg.hetero_window : 4096;
    hjob *h = cr_calloc(win ? win : 1, sizeof(*h));
    uint32_t nh = 0;
    /* (the jobs past the window are HT_FREE without being touched:
     * cr__sched_hetero_of) */
    cr__sched_walk_start(s);
    for (job *j; nh < win && (j = cr__sched_walk_next(s)) != NULL;) {
        if (j->state != CR_JOB_PENDING || j->spec.gpu_type >= 0 || j->mig[0]) {
            continue;
        }
        hjob *x = &h[nh];
        x->j = j;
        x->rank = nh;
        double best = 0, second = 0;
        for (int t = 0; t < s->ntypes; t++) {
            double v = s->types[t].total >= j->spec.gpu_count ? cr__sched_tput(j, t) : 0;
            if (v > best) {
                second = best;
                best = v;
            } else if (v > second) {
                second = v;
            }
        }
        if (best <= 0) {
            continue;
        }
        for (int t = 0; t < s->ntypes; t++) {
            x->w[t] = s->types[t].total >= j->spec.gpu_count ? cr__sched_tput(j, t) / best : 0;
        }
        x->regret = (best - second) / best;
        nh++;
    }
    double cap[CR_SCHED_MAX_TYPES] = {0};
    for (int t = 0; t < s->ntypes; t++) {
        cap[t] = s->types[t].free;
    }
    for (uint32_t i = 0; i < nh; i++) {
        h[i].j->hetero_type = HT_WAIT;
        h[i].j->hcycle = s->stats.cycles;
    }
    if (nh > 0 && (!s->cfg.hetero_lp || lp(s, h, nh, cap) != 0)) {
        for (uint32_t i = 0; i < nh; i++) {
            h[i].j->hetero_type = HT_WAIT;
        }
        greedy(s, h, nh, cap);
    }
    free(h);
}
