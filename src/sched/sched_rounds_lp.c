/*
 * sched_rounds_lp.c - the time-share allocation of the 'rounds' policy: a
 * heterogeneity-aware max-min fairness linear program solved with GLPK.
 *
 * Variables: x[j][t] in [0, 1], the fraction of wall time job j should
 * spend on GPU type t over the coming rounds, and z, the smallest
 * normalised progress rate of any job.
 *
 *   maximise   z
 *   subject to z <= s_j * sum_t rate[j][t] * x[j][t] / P_j     for every job j
 *              sum_t x[j][t] <= 1                              for every job j
 *              sum_j s_j * x[j][t] <= cap[t]                   for every type t
 *              x[j][t] = 0 where the job cannot run on t (rate 0, or s_j > cap[t])
 *
 * s_j is the job's GPU count, rate[j][t] its gang rate on type t, and P_j its
 * rate under an equal split of the cluster: the capacity-weighted mean of
 * its rates, sum_t rate[j][t] * cap[t] / sum_t cap[t]. Dividing by P_j puts
 * fast and slow models on one scale (a job's share is judged against what a
 * fair slice of this cluster would give it); multiplying by s_j charges a
 * gang for the s_j GPUs each unit of its time occupies. This is the
 * objective of Gavel's max_min_fairness_perf (Narayanan et al., OSDI'20),
 * written from the paper's formulation.
 *
 * A max-min optimum is rarely unique: only the jobs that set z are pinned,
 * and the simplex returns any vertex for the rest. With `spread` a second
 * stage keeps z >= z* (to a relative 1e-7) and maximises
 * sum_j s_j * sum_t x[j][t] * rate[j][t] / best_rate_j - the cluster's
 * useful work in best-type GPU equivalents - so capacity the fairness bound
 * leaves free goes where it runs fastest instead of where the vertex
 * happened to put it.
 *
 * Rows may stand for classes of identical jobs (same rates, same GPU
 * count): mult[j] jobs each get x[j][t]. This is exact: the LP is convex
 * and symmetric in identical jobs, so averaging an optimum over their
 * permutations is an optimum in which they are equal. The simulator groups
 * jobs so, which bounds the LP by the distinct (model, GPU count) pairs of
 * the throughput table instead of the active jobs; so does the scheduler's
 * rounds policy (sched_policy_rounds.c).
 */
#include "cr_sched.h"

#include "cr_alloc.h"
#include "cr_error.h"

#include <glpk.h>
#include <string.h>

int cr_sched_rounds_lp(size_t njobs, int ntypes, const double *rate, const int *scale,
                       const double *mult, const double *cap, bool spread, double *x, double *z)
{
    if (ntypes < 1 || ntypes > CR_SCHED_MAX_TYPES || njobs > CR_SCHED_ROUNDS_LP_MAX_JOBS) {
        return CR_EINVAL;
    }
    memset(x, 0, njobs * (size_t)ntypes * sizeof *x);
    *z = 0;
    if (njobs == 0) {
        return 0;
    }
    double total_cap = 0;
    for (int t = 0; t < ntypes; t++) {
        total_cap += cap[t] > 0 ? cap[t] : 0;
    }
    if (total_cap <= 0) {
        return 0;
    }
    int rc = CR_EUNAVAIL; /* the solver did not reach an optimum */
    int nrow = 2 * (int)njobs + ntypes;
    int ncol = (int)njobs * ntypes + 1; /* last column: z */
    size_t maxnz = njobs * (size_t)ntypes * 3 + njobs + 1;
    int *ia = cr_malloc(maxnz * sizeof *ia);
    int *ja = cr_malloc(maxnz * sizeof *ja);
    double *ar = cr_malloc(maxnz * sizeof *ar);
    glp_prob *p = glp_create_prob();
    glp_set_obj_dir(p, GLP_MAX);
    glp_add_rows(p, nrow);
    glp_add_cols(p, ncol);
    int zcol = ncol;
    glp_set_col_bnds(p, zcol, GLP_LO, 0.0, 0.0);
    glp_set_obj_coef(p, zcol, 1.0);
    int nz = 0, nrun = 0;
    for (size_t j = 0; j < njobs; j++) {
        const double *r = &rate[j * (size_t)ntypes];
        double prop = 0;
        for (int t = 0; t < ntypes; t++) {
            prop += r[t] * (cap[t] > 0 ? cap[t] : 0) / total_cap;
        }
        int frow = (int)j + 1;        /* fairness: s*sum(r x)/P - z >= 0 */
        int srow = (int)njobs + frow; /* time: sum x <= 1 */
        glp_set_row_bnds(p, frow, GLP_LO, 0.0, 0.0);
        glp_set_row_bnds(p, srow, GLP_UP, 0.0, 1.0);
        bool any = false;
        for (int t = 0; t < ntypes; t++) {
            int col = (int)j * ntypes + t + 1;
            bool ok = r[t] > 0 && prop > 0 && scale[j] > 0 && (double)scale[j] <= cap[t];
            glp_set_col_bnds(p, col, ok ? GLP_DB : GLP_FX, 0.0, ok ? 1.0 : 0.0);
            if (!ok) {
                continue;
            }
            any = true;
            nz++, ia[nz] = frow, ja[nz] = col, ar[nz] = scale[j] * r[t] / prop;
            nz++, ia[nz] = srow, ja[nz] = col, ar[nz] = 1.0;
            double m = mult ? mult[j] : 1.0;
            nz++, ia[nz] = 2 * (int)njobs + t + 1, ja[nz] = col, ar[nz] = m * scale[j];
        }
        if (any) { /* a job that can run nowhere does not pin z to 0 */
            nz++, ia[nz] = frow, ja[nz] = zcol, ar[nz] = -1.0;
            nrun++;
        }
    }
    for (int t = 0; t < ntypes; t++) {
        glp_set_row_bnds(p, 2 * (int)njobs + t + 1, GLP_UP, 0.0, cap[t] > 0 ? cap[t] : 0);
    }
    if (nrun == 0) { /* z would be unbounded: nothing can run, all zero */
        rc = 0;
        goto out;
    }
    glp_load_matrix(p, nz, ia, ja, ar);
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    if (glp_simplex(p, &parm) != 0 || glp_get_status(p) != GLP_OPT) {
        goto out;
    }
    double zstar = glp_get_obj_val(p);
    if (spread && zstar > 0) {
        glp_set_col_bnds(p, zcol, GLP_LO, zstar * (1 - 1e-7), 0.0);
        glp_set_obj_coef(p, zcol, 0.0);
        for (size_t j = 0; j < njobs; j++) {
            const double *r = &rate[j * (size_t)ntypes];
            double best = 0;
            for (int t = 0; t < ntypes; t++) {
                best = r[t] > best ? r[t] : best;
            }
            for (int t = 0; t < ntypes && best > 0; t++) {
                glp_set_obj_coef(p, (int)j * ntypes + t + 1,
                                 r[t] / best * scale[j] * (mult ? mult[j] : 1.0));
            }
        }
        if (glp_simplex(p, &parm) != 0 || glp_get_status(p) != GLP_OPT) {
            goto out;
        }
    }
    for (size_t j = 0; j < njobs; j++) {
        for (int t = 0; t < ntypes; t++) {
            double v = glp_get_col_prim(p, (int)j * ntypes + t + 1);
            x[j * (size_t)ntypes + t] = v < 0 ? 0 : (v > 1 ? 1 : v);
        }
    }
    *z = zstar;
    rc = 0;
out:
    glp_delete_prob(p);
    free(ia);
    free(ja);
    free(ar);
    return rc;
}
