/*
 * sim_report.c - metrics of a finished simulation and their reports: a
 * terminal table, a side-by-side comparison, JSON, a per-job CSV and an
 * HTML page with inline SVG plots.
 *
 * Definitions (docs/sim.md):
 *   JCT         finish - submit of a job; average, median and the 95th and
 *               99th percentiles (nearest rank) over the measured jobs
 *               (a --window of job indices in arrival order, else all).
 *   queueing    first start - submit.
 *   makespan    last finish - first submit.
 *   utilisation busy GPU-time / healthy GPU-time.
 *   stranded    free GPU-time while some job was pending / GPU-time: capacity
 *               left idle by fragmentation, reservations or type limits.
 *   fragmentation  free GPU-time on partly used nodes / free GPU-time.
 *   rho         Themis' finish-time fairness: JCT / (T_alone * N), with
 *               T_alone the job's runtime alone on its best GPU type and N
 *               the cluster's average contention over the job's life
 *               (GPUs demanded / GPUs healthy, at least 1). rho <= 1 means
 *               the job did no worse than with its fair 1/N share.
 *   energy      busy GPUs at their board power, idle ones at a fraction.
 *
 * Every number printed depends only on the simulation, never on the host,
 * so the same input and seed give the same bytes.
 */
#include "sim_int.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(const double *sorted, size_t n, double p)
{
    if (n == 0) {
        return 0;
    }
    size_t k = (size_t)ceil(p * (double)n);
    if (k < 1) {
        k = 1;
    }
    if (k > n) {
        k = n;
    }
    return sorted[k - 1];
}

static bool in_window(const cr__sim_report_opts *ro, size_t i)
{
    if (!ro || ro->window_hi == 0) {
        return true;
    }
    return i >= ro->window_lo && i < ro->window_hi;
}

static double job_rho(const cr__sim_result *r, const cr__sim_workload *w, size_t i)
{
    const cr__sim_jobres *jr = &r->jobs[i];
    if (jr->finish_ns < 0 || jr->alone_s <= 0) {
        return 0;
    }
    double jct = (double)(jr->finish_ns - w->jobs[i].submit_ns) / 1e9;
    return jct / (jr->alone_s * (jr->contention > 1 ? jr->contention : 1));
}

/* Summary over the jobs i with keep(i) (window and optional tenant). */
/* The advisor's error on the learnable jobs (pred_err >= 0) in arrival
 * order: the first and last windows' means, and the first learnable job at
 * which the mean of the window ending there, and of every later one, is
 * within 10% (issue 26, docs/sim.md). */
static void learn_error(const cr__sim_result *r, cr__sim_summary *s)
{
    double *e = cr_calloc(r->njobs + 1, sizeof *e);
    size_t n = 0;
    for (size_t i = 0; i < r->njobs; i++) {
        if (r->jobs[i].pred_err >= 0) {
            e[n++] = r->jobs[i].pred_err;
        }
    }
    s->learnable = n;
    size_t win = n < CR_SIM_ERR_WINDOW ? n : CR_SIM_ERR_WINDOW;
    if (win > 0) {
        double a = 0, b = 0;
        for (size_t k = 0; k < win; k++) {
            a += e[k];
            b += e[n - win + k];
        }
        s->err_first = a / (double)win;
        s->err_last = b / (double)win;
        /* windows ending at k = win-1 .. n-1; the last one above 10% */
        long bad_end = -1;
        double sum = 0;
        for (size_t k = 0; k < n; k++) {
            sum += e[k] - (k >= win ? e[k - win] : 0);
            if (k + 1 >= win && sum / (double)win > 0.10) {
                bad_end = (long)k;
            }
        }
        /* the first window end from which no window is above 10% (1-based) */
        s->learned_at = bad_end < 0 ? (long)win : bad_end + 1 < (long)n ? bad_end + 2 : 0;
    }
    free(e);
}

static void summarize_where(const cr__sim_result *r, const cr__sim_workload *w,
                            const cr__sim_report_opts *ro, int tenant, cr__sim_summary *s)
{
    memset(s, 0, sizeof *s);
    double *jct = cr_calloc(w->njobs + 1, sizeof *jct);
    double *q = cr_calloc(w->njobs + 1, sizeof *q);
    size_t nj = 0, nq = 0;
    double rho_sum = 0;
    size_t rho_n = 0, unfair = 0;
    int64_t last = r->t0_ns;
    for (size_t i = 0; i < w->njobs; i++) {
        const cr__sim_jobres *jr = &r->jobs[i];
        if (tenant >= 0 && w->jobs[i].tenant != tenant) {
            continue;
        }
        s->jobs++;
        if (jr->finish_ns >= 0) {
            s->finished++;
            last = jr->finish_ns > last ? jr->finish_ns : last;
        }
        s->preemptions += jr->preemptions;
        s->failures += jr->failures;
        s->lost_gpu_h += jr->lost_gpu_s / 3600.0;
        if (!in_window(ro, i)) {
            continue;
        }
        if (jr->first_start_ns >= 0) {
            q[nq++] = (double)(jr->first_start_ns - w->jobs[i].submit_ns) / 1e9;
        }
        if (jr->finish_ns >= 0) {
            jct[nj++] = (double)(jr->finish_ns - w->jobs[i].submit_ns) / 1e9;
            double rho = job_rho(r, w, i);
            rho_sum += rho;
            rho_n++;
            unfair += rho > 1.0 + 1e-9;
            s->rho_max = rho > s->rho_max ? rho : s->rho_max;
        }
    }
    s->measured = nj;
    double sum = 0;
    for (size_t k = 0; k < nj; k++) {
        sum += jct[k];
    }
    qsort(jct, nj, sizeof *jct, dbl_cmp);
    s->jct_avg = nj ? sum / (double)nj : 0;
    s->jct_p50 = pct(jct, nj, 0.50);
    s->jct_p95 = pct(jct, nj, 0.95);
    s->jct_p99 = pct(jct, nj, 0.99);
    sum = 0;
    for (size_t k = 0; k < nq; k++) {
        sum += q[k];
    }
    qsort(q, nq, sizeof *q, dbl_cmp);
    s->queue_avg = nq ? sum / (double)nq : 0;
    s->queue_p95 = pct(q, nq, 0.95);
    s->makespan = (double)(last - r->t0_ns) / 1e9;
    s->rho_avg = rho_n ? rho_sum / (double)rho_n : 0;
    s->rho_frac_unfair = rho_n ? (double)unfair / (double)rho_n : 0;
    if (tenant < 0) {
        double busy = 0, healthy = 0, e = 0;
        for (int t = 0; t < r->ntypes; t++) {
            busy += r->busy_gpu_ns[t];
            healthy += r->healthy_gpu_ns[t];
            e += r->energy_j[t];
        }
        s->util = healthy > 0 ? busy / healthy : 0;
        s->stranded = r->total_gpu_ns > 0 ? r->stranded_gpu_ns / r->total_gpu_ns : 0;
        s->frag = r->free_gpu_ns > 0 ? r->partial_free_gpu_ns / r->free_gpu_ns : 0;
        s->energy_kwh = e / 3.6e6;
    }
    if (tenant < 0) {
        learn_error(r, s);
    }
    free(jct);
    free(q);
}

void cr__sim_summarize(const cr__sim_result *r, const cr__sim_workload *w,
                       const cr__sim_report_opts *ro, cr__sim_summary *out)
{
    summarize_where(r, w, ro, -1, out);
}

/* Human duration from seconds: "42s", "12.5m", "3.42h", "2.10d". */
static const char *hdur(double s, char *buf, size_t len)
{
    if (s < 120) {
        snprintf(buf, len, "%.0fs", s);
    } else if (s < 7200) {
        snprintf(buf, len, "%.1fm", s / 60);
    } else if (s < 3 * 86400) {
        snprintf(buf, len, "%.2fh", s / 3600);
    } else {
        snprintf(buf, len, "%.2fd", s / 86400);
    }
    return buf;
}

static uint32_t total_gpus(const cr__sim_result *r)
{
    uint32_t n = 0;
    for (int t = 0; t < r->ntypes; t++) {
        n += r->type_gpus[t];
    }
    return n;
}

void cr__sim_report_text(FILE *f, const cr__sim_result *r, const cr__sim_workload *w,
                         const cr__sim_report_opts *ro)
{
    cr__sim_summary s;
    summarize_where(r, w, ro, -1, &s);
    char a[32], b[32], c[32], d[32];
    fprintf(f, "policy %s: %zu jobs, %zu finished, %u GPUs of %d types\n", r->policy, s.jobs,
            s.finished, total_gpus(r), r->ntypes);
    if (ro && ro->window_hi) {
        fprintf(f, "measured: jobs %zu..%zu in arrival order (%zu finished)\n", ro->window_lo,
                ro->window_hi - 1, s.measured);
    }
    fprintf(f, "  JCT          avg %-9s p50 %-9s p95 %-9s p99 %s\n", hdur(s.jct_avg, a, sizeof a),
            hdur(s.jct_p50, b, sizeof b), hdur(s.jct_p95, c, sizeof c),
            hdur(s.jct_p99, d, sizeof d));
    fprintf(f, "  queueing     avg %-9s p95 %s\n", hdur(s.queue_avg, a, sizeof a),
            hdur(s.queue_p95, b, sizeof b));
    fprintf(f, "  makespan     %s\n", hdur(s.makespan, a, sizeof a));
    fprintf(f, "  utilisation  %.1f%%   stranded %.1f%%   fragmentation %.1f%%\n", 100 * s.util,
            100 * s.stranded, 100 * s.frag);
    fprintf(f, "  fairness     rho avg %.2f  max %.2f  jobs with rho > 1: %.1f%%\n", s.rho_avg,
            s.rho_max, 100 * s.rho_frac_unfair);
    fprintf(f, "  energy       %.1f kWh\n", s.energy_kwh);
    fprintf(f, "  preemptions  %llu   failures %llu (node failures %llu)   lost %.1f GPU-h\n",
            (unsigned long long)s.preemptions, (unsigned long long)s.failures,
            (unsigned long long)r->node_failures, s.lost_gpu_h);
    if (s.learnable) {
        char fr[32];
        snprintf(fr, sizeof fr, "job %ld", s.learned_at);
        fprintf(f,
                "  advisor      error on %zu learnable jobs: first %d %.1f%%, last %d %.1f%%; "
                "%d-job mean <= 10%% from %s\n",
                s.learnable, CR_SIM_ERR_WINDOW, 100 * s.err_first, CR_SIM_ERR_WINDOW,
                100 * s.err_last, CR_SIM_ERR_WINDOW, s.learned_at > 0 ? fr : "never");
    }
    if (r->frac_starts || r->mig_starts) {
        fprintf(f,
                "  sharing      %llu fractional starts   %llu MIG starts (%llu repartitioned, "
                "%.0f s waited for reconfiguration)\n",
                (unsigned long long)r->frac_starts, (unsigned long long)r->mig_starts,
                (unsigned long long)r->mig_reconfigs, r->mig_reconfig_s);
    }
    if (r->nstuck) {
        fprintf(f, "  never finished %zu job%s, e.g.\n", r->nstuck, r->nstuck == 1 ? "" : "s");
        for (size_t k = 0; k < r->nstuck && k < 3; k++) {
            fprintf(f, "    %s\n", r->stuck[k]);
        }
    }
    if (r->check_errors) {
        fprintf(f, "  INVARIANT VIOLATIONS %d, first: %s\n", r->check_errors, r->check_msg);
    }
    fprintf(f, "\n  %-16s %6s %9s %9s %9s %9s %6s\n", "tenant", "jobs", "avg JCT", "p95 JCT",
            "avg queue", "GPU-h", "rho");
    for (size_t t = 0; t < w->ntenants; t++) {
        cr__sim_summary ts;
        summarize_where(r, w, ro, (int)t, &ts);
        if (ts.jobs == 0) {
            continue;
        }
        double gh = 0;
        for (size_t i = 0; i < w->njobs; i++) {
            if (w->jobs[i].tenant == (int)t) {
                gh += r->jobs[i].gpu_s / 3600.0;
            }
        }
        fprintf(f, "  %-16s %6zu %9s %9s %9s %9.1f %6.2f\n", w->tenants[t], ts.jobs,
                hdur(ts.jct_avg, a, sizeof a), hdur(ts.jct_p95, b, sizeof b),
                hdur(ts.queue_avg, c, sizeof c), gh, ts.rho_avg);
    }
    fprintf(f, "\n  %-16s %6s %6s %10s %8s %10s\n", "GPU type", "GPUs", "util", "busy GPU-h",
            "starts", "energy kWh");
    for (int t = 0; t < r->ntypes; t++) {
        double u = r->healthy_gpu_ns[t] > 0 ? r->busy_gpu_ns[t] / r->healthy_gpu_ns[t] : 0;
        fprintf(f, "  %-16s %6u %5.1f%% %10.1f %8llu %10.1f\n", r->types[t], r->type_gpus[t],
                100 * u, r->busy_gpu_ns[t] / 3.6e12, (unsigned long long)r->starts[t],
                r->energy_j[t] / 3.6e6);
    }
}

void cr__sim_report_compare(FILE *f, const cr__sim_result *rs, size_t n, const cr__sim_workload *w,
                            const cr__sim_report_opts *ro)
{
    cr__sim_summary *s = cr_calloc(n, sizeof *s);
    for (size_t k = 0; k < n; k++) {
        summarize_where(&rs[k], w, ro, -1, &s[k]);
    }
    char a[32];
    fprintf(f, "%zu jobs, %u GPUs of %d types", w->njobs, total_gpus(&rs[0]), rs[0].ntypes);
    if (ro && ro->window_hi) {
        fprintf(f, "; JCT over jobs %zu..%zu", ro->window_lo, ro->window_hi - 1);
    }
    fprintf(f, "\n\n%-20s", "metric");
    for (size_t k = 0; k < n; k++) {
        fprintf(f, " %12s", rs[k].policy);
    }
    fprintf(f, "\n");
#define ROW_DUR(label, field)                                                                      \
    do {                                                                                           \
        fprintf(f, "%-20s", label);                                                                \
        for (size_t k = 0; k < n; k++) {                                                           \
            fprintf(f, " %12s", hdur(s[k].field, a, sizeof a));                                    \
        }                                                                                          \
        fprintf(f, "\n");                                                                          \
    } while (0)
#define ROW_NUM(label, fmt, expr)                                                                  \
    do {                                                                                           \
        fprintf(f, "%-20s", label);                                                                \
        for (size_t k = 0; k < n; k++) {                                                           \
            snprintf(a, sizeof a, fmt, expr);                                                      \
            fprintf(f, " %12s", a);                                                                \
        }                                                                                          \
        fprintf(f, "\n");                                                                          \
    } while (0)
    ROW_NUM("finished", "%zu", s[k].finished);
    ROW_DUR("JCT avg", jct_avg);
    ROW_NUM("JCT avg vs first", "%.2fx", s[0].jct_avg > 0 ? s[k].jct_avg / s[0].jct_avg : 0.0);
    ROW_DUR("JCT p50", jct_p50);
    ROW_DUR("JCT p95", jct_p95);
    ROW_DUR("JCT p99", jct_p99);
    ROW_DUR("queueing avg", queue_avg);
    ROW_DUR("makespan", makespan);
    ROW_NUM("utilisation", "%.1f%%", 100 * s[k].util);
    ROW_NUM("stranded", "%.1f%%", 100 * s[k].stranded);
    ROW_NUM("fragmentation", "%.1f%%", 100 * s[k].frag);
    ROW_NUM("rho avg", "%.2f", s[k].rho_avg);
    ROW_NUM("rho max", "%.2f", s[k].rho_max);
    ROW_NUM("energy kWh", "%.1f", s[k].energy_kwh);
    ROW_NUM("preemptions", "%llu", (unsigned long long)s[k].preemptions);
    ROW_NUM("lost GPU-h", "%.1f", s[k].lost_gpu_h);
    bool learnable = false;
    for (size_t k = 0; k < n; k++) {
        learnable |= s[k].learnable > 0;
    }
    if (learnable) {
        ROW_NUM("advisor err first", "%.1f%%", 100 * s[k].err_first);
        ROW_NUM("advisor err last", "%.1f%%", 100 * s[k].err_last);
        fprintf(f, "%-20s", "err <= 10% from");
        for (size_t k = 0; k < n; k++) {
            if (s[k].learned_at > 0) {
                snprintf(a, sizeof a, "job %ld", s[k].learned_at);
            } else {
                snprintf(a, sizeof a, "%s", s[k].learnable ? "never" : "-");
            }
            fprintf(f, " %12s", a);
        }
        fprintf(f, "\n");
    }
#undef ROW_DUR
#undef ROW_NUM
    for (size_t k = 0; k < n; k++) {
        if (rs[k].check_errors) {
            fprintf(f, "%s: INVARIANT VIOLATIONS %d, first: %s\n", rs[k].policy, rs[k].check_errors,
                    rs[k].check_msg);
        }
    }
    free(s);
}

/* ------------------------------------------------------------------ series */

/* Downsample the step functions into nb buckets of equal time: average
 * utilisation (0..1) and queue length. t_mid in seconds from t0. */
static size_t series(const cr__sim_result *r, size_t nb, double *t_mid, double *util, double *queue)
{
    int64_t t0 = r->t0_ns, t1 = r->t_end_ns;
    if (r->nsamples == 0 || t1 <= t0 || nb == 0) {
        return 0;
    }
    double span = (double)(t1 - t0) / (double)nb;
    size_t si = 0;
    for (size_t b = 0; b < nb; b++) {
        double lo = (double)t0 + span * (double)b, hi = lo + span;
        double busy = 0, healthy = 0, q = 0;
        /* Move si to the sample in force at lo. */
        while (si + 1 < r->nsamples && (double)r->samples[si + 1].t_ns <= lo) {
            si++;
        }
        for (size_t k = si; k < r->nsamples; k++) {
            double a = (double)r->samples[k].t_ns, z;
            if (a >= hi) {
                break;
            }
            z = (k + 1 < r->nsamples) ? (double)r->samples[k + 1].t_ns : (double)t1;
            if (a < lo) {
                a = lo;
            }
            if (z > hi) {
                z = hi;
            }
            if (z <= a) {
                continue;
            }
            busy += r->samples[k].busy * (z - a);
            healthy += r->samples[k].healthy * (z - a);
            q += r->samples[k].queue * (z - a);
        }
        t_mid[b] = (lo + span / 2 - (double)t0) / 1e9;
        util[b] = healthy > 0 ? busy / healthy : 0;
        queue[b] = q / span;
    }
    return nb;
}

/* ------------------------------------------------------------------- JSON */

static json_t *summary_json(const cr__sim_summary *s)
{
    return json_pack("{s:I,s:I,s:I,s:{s:f,s:f,s:f,s:f},s:{s:f,s:f},s:f,s:f,s:f,s:f,s:{s:f,s:f,"
                     "s:f},s:f,s:f,s:I,s:I}",
                     "jobs", (json_int_t)s->jobs, "finished", (json_int_t)s->finished, "measured",
                     (json_int_t)s->measured, "jct_s", "avg", s->jct_avg, "p50", s->jct_p50, "p95",
                     s->jct_p95, "p99", s->jct_p99, "queue_s", "avg", s->queue_avg, "p95",
                     s->queue_p95, "makespan_s", s->makespan, "utilisation", s->util, "stranded",
                     s->stranded, "fragmentation", s->frag, "fairness", "rho_avg", s->rho_avg,
                     "rho_max", s->rho_max, "unfair_frac", s->rho_frac_unfair, "energy_kwh",
                     s->energy_kwh, "lost_gpu_h", s->lost_gpu_h, "preemptions",
                     (json_int_t)s->preemptions, "failures", (json_int_t)s->failures);
}

static json_t *run_json(const cr__sim_result *r, const cr__sim_workload *w,
                        const cr__sim_report_opts *ro)
{
    cr__sim_summary s;
    summarize_where(r, w, ro, -1, &s);
    json_t *o = summary_json(&s);
    json_object_set_new(o, "policy", json_string(r->policy));
    if (s.learnable) {
        json_object_set_new(o, "advisor",
                            json_pack("{s:I,s:f,s:f,s:I,s:I}", "learnable", (json_int_t)s.learnable,
                                      "err_first", s.err_first, "err_last", s.err_last, "window",
                                      (json_int_t)CR_SIM_ERR_WINDOW, "learned_at",
                                      (json_int_t)s.learned_at));
    }
    json_object_set_new(o, "node_failures", json_integer((json_int_t)r->node_failures));
    json_object_set_new(o, "frac_starts", json_integer((json_int_t)r->frac_starts));
    json_object_set_new(o, "mig_starts", json_integer((json_int_t)r->mig_starts));
    json_object_set_new(o, "mig_reconfigs", json_integer((json_int_t)r->mig_reconfigs));
    json_object_set_new(o, "mig_reconfig_s", json_real(r->mig_reconfig_s));
    json_object_set_new(o, "cycles", json_integer((json_int_t)r->cycles));
    json_object_set_new(o, "events", json_integer((json_int_t)r->events));
    json_object_set_new(o, "invariant_violations", json_integer(r->check_errors));
    json_t *stuck = json_array();
    for (size_t k = 0; k < r->nstuck && k < 3; k++) {
        json_array_append_new(stuck, json_string(r->stuck[k]));
    }
    json_object_set_new(o, "unfinished", json_integer((json_int_t)r->nstuck));
    json_object_set_new(o, "unfinished_examples", stuck);
    if (ro && ro->window_hi) {
        json_object_set_new(
            o, "window", json_pack("[I,I]", (json_int_t)ro->window_lo, (json_int_t)ro->window_hi));
    }
    json_t *tenants = json_array();
    for (size_t t = 0; t < w->ntenants; t++) {
        cr__sim_summary ts;
        summarize_where(r, w, ro, (int)t, &ts);
        if (ts.jobs == 0) {
            continue;
        }
        json_t *to = summary_json(&ts);
        json_object_del(to, "utilisation");
        json_object_del(to, "stranded");
        json_object_del(to, "fragmentation");
        json_object_del(to, "energy_kwh");
        json_object_set_new(to, "tenant", json_string(w->tenants[t]));
        json_array_append_new(tenants, to);
    }
    json_object_set_new(o, "tenants", tenants);
    json_t *types = json_array();
    for (int t = 0; t < r->ntypes; t++) {
        double u = r->healthy_gpu_ns[t] > 0 ? r->busy_gpu_ns[t] / r->healthy_gpu_ns[t] : 0;
        json_array_append_new(types, json_pack("{s:s,s:I,s:f,s:f,s:I,s:f}", "type", r->types[t],
                                               "gpus", (json_int_t)r->type_gpus[t], "utilisation",
                                               u, "busy_gpu_h", r->busy_gpu_ns[t] / 3.6e12,
                                               "starts", (json_int_t)r->starts[t], "energy_kwh",
                                               r->energy_j[t] / 3.6e6));
    }
    json_object_set_new(o, "types", types);
    enum { NB = 100 };
    double tm[NB], ut[NB], qu[NB];
    size_t nb = series(r, NB, tm, ut, qu);
    json_t *ser = json_array();
    for (size_t b = 0; b < nb; b++) {
        json_array_append_new(ser, json_pack("[f,f,f]", tm[b], ut[b], qu[b]));
    }
    json_object_set_new(o, "series_t_util_queue", ser);
    return o;
}

char *cr__sim_report_json(const cr__sim_result *rs, size_t n, const cr__sim_workload *w,
                          const cr__sim_report_opts *ro)
{
    json_t *root;
    if (n == 1) {
        root = run_json(&rs[0], w, ro);
    } else {
        json_t *runs = json_array();
        for (size_t k = 0; k < n; k++) {
            json_array_append_new(runs, run_json(&rs[k], w, ro));
        }
        root = json_pack("{s:o}", "runs", runs);
    }
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(root);
    char *out = cr_asprintf("%s\n", text ? text : "{}");
    free(text);
    return out;
}

/* -------------------------------------------------------------------- CSV */

static void csv_str(FILE *f, const char *s)
{
    if (strpbrk(s, ",\"\n\r")) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"') {
                fputc('"', f);
            }
            fputc(*s, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
}

static void csv_rows(FILE *f, const cr__sim_result *r, const cr__sim_workload *w);

int cr__sim_report_csv(const char *path, const cr__sim_result *rs, size_t n,
                       const cr__sim_workload *w)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        return CR_EIO;
    }
    fprintf(f, "policy,index,job,tenant,model,gpus,submit_s,start_s,finish_s,jct_s,queue_s,type,"
               "preemptions,failures,gpu_h,lost_gpu_h,alone_s,rho\n");
    for (size_t k = 0; k < n; k++) {
        csv_rows(f, &rs[k], w);
    }
    int rc = ferror(f) ? CR_EIO : 0;
    if (fclose(f) != 0) {
        rc = CR_EIO;
    }
    return rc;
}

static void csv_rows(FILE *f, const cr__sim_result *r, const cr__sim_workload *w)
{
    for (size_t i = 0; i < w->njobs; i++) {
        const cr__sim_job *j = &w->jobs[i];
        const cr__sim_jobres *jr = &r->jobs[i];
        fprintf(f, "%s,%zu,", r->policy, i);
        csv_str(f, j->name);
        fputc(',', f);
        csv_str(f, w->tenants[j->tenant]);
        fputc(',', f);
        csv_str(f, j->model);
        fprintf(f, ",%d,%.3f,", j->gpu_count, (double)j->submit_ns / 1e9);
        if (jr->first_start_ns >= 0) {
            fprintf(f, "%.3f", (double)jr->first_start_ns / 1e9);
        }
        fputc(',', f);
        if (jr->finish_ns >= 0) {
            fprintf(f, "%.3f,%.3f", (double)jr->finish_ns / 1e9,
                    (double)(jr->finish_ns - j->submit_ns) / 1e9);
        } else {
            fputc(',', f);
        }
        fputc(',', f);
        if (jr->first_start_ns >= 0) {
            fprintf(f, "%.3f", (double)(jr->first_start_ns - j->submit_ns) / 1e9);
        }
        fputc(',', f);
        if (jr->type >= 0) {
            csv_str(f, r->types[jr->type]);
        }
        fprintf(f, ",%u,%u,%.4f,%.4f,%.3f,%.4f\n", jr->preemptions, jr->failures,
                jr->gpu_s / 3600.0, jr->lost_gpu_s / 3600.0, jr->alone_s, job_rho(r, w, i));
    }
}

/* ------------------------------------------------------------------- HTML */

static const char *const colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                      "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

static void html_esc(cr_buf *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<':
            cr_buf_puts(b, "&lt;");
            break;
        case '>':
            cr_buf_puts(b, "&gt;");
            break;
        case '&':
            cr_buf_puts(b, "&amp;");
            break;
        case '"':
            cr_buf_puts(b, "&quot;");
            break;
        default:
            cr_buf_putc(b, *s);
        }
    }
}

enum { PW = 720, PH = 280, ML = 60, MR = 40, MT = 40, MB = 40 };

/* A round tick step (1, 2 or 5 times a power of ten) giving at most about
 * five ticks up to max. */
static double nice_step(double max)
{
    double raw = max / 5;
    double p = pow(10, floor(log10(raw)));
    double f = raw / p;
    return p * (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10);
}

/* One line chart: n series of m points (xs[k], ys[k]), axis labels; y_cap
 * > 0 fixes the top of the y axis. */
static void svg_chart(cr_buf *b, const char *title, const char *xlabel, const char *ylabel,
                      const cr__sim_result *rs, size_t n, double *const *xs, double *const *ys,
                      const size_t *m, double y_cap)
{
    double xmax = 0, ymax = 0;
    for (size_t k = 0; k < n; k++) {
        for (size_t i = 0; i < m[k]; i++) {
            xmax = xs[k][i] > xmax ? xs[k][i] : xmax;
            ymax = ys[k][i] > ymax ? ys[k][i] : ymax;
        }
    }
    xmax = xmax > 0 ? xmax : 1;
    ymax = ymax > 0 ? ymax : 1;
    double xs_step = nice_step(xmax), ys_step = nice_step(ymax);
    xmax = ceil(xmax / xs_step - 1e-9) * xs_step;
    ymax = y_cap > 0 ? y_cap : ceil(ymax / ys_step - 1e-9) * ys_step;
    if (y_cap > 0) {
        ys_step = nice_step(y_cap);
    }
    double w = PW - ML - MR, h = PH - MT - MB;
    cr_buf_printf(b,
                  "<h2>%s</h2>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                  "height=\"%d\" font-family=\"sans-serif\" font-size=\"11\">\n",
                  title, PW, PH);
    cr_buf_printf(b,
                  "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
                  "stroke=\"#999\"/>\n",
                  ML, MT, w, h);
    for (double yv = 0; yv <= ymax + 1e-9; yv += ys_step) {
        double y = MT + h - h * yv / ymax;
        cr_buf_printf(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", ML - 4, y + 4,
                      yv);
        cr_buf_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#eee\"/>\n",
                      ML, y, ML + w, y);
    }
    for (double xv = 0; xv <= xmax + 1e-9; xv += xs_step) {
        cr_buf_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n",
                      ML + w * xv / xmax, MT + (int)h + 14, xv);
    }
    cr_buf_printf(b, "<text x=\"%.0f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", ML + w / 2,
                  PH - 6, xlabel);
    cr_buf_printf(b,
                  "<text x=\"12\" y=\"%.0f\" text-anchor=\"middle\" transform=\"rotate(-90 12 "
                  "%.0f)\">%s</text>\n",
                  MT + h / 2, MT + h / 2, ylabel);
    for (size_t k = 0; k < n; k++) {
        const char *col = colours[k % (sizeof colours / sizeof colours[0])];
        cr_buf_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                      col);
        for (size_t i = 0; i < m[k]; i++) {
            cr_buf_printf(b, "%.1f,%.1f ", ML + w * xs[k][i] / xmax, MT + h - h * ys[k][i] / ymax);
        }
        cr_buf_puts(b, "\"/>\n");
        cr_buf_printf(b,
                      "<rect x=\"%.0f\" y=\"%d\" width=\"12\" height=\"3\" fill=\"%s\"/><text "
                      "x=\"%.0f\" y=\"%d\" fill=\"%s\">",
                      ML + 100.0 * (double)k, MT - 18, col, ML + 16 + 100.0 * (double)k, MT - 13,
                      col);
        html_esc(b, rs[k].policy);
        cr_buf_puts(b, "</text>\n");
    }
    cr_buf_puts(b, "</svg>\n");
}

int cr__sim_report_html(const char *path, const cr__sim_result *rs, size_t n,
                        const cr__sim_workload *w, const cr__sim_report_opts *ro)
{
    enum { NB = 300, NC = 200 };
    cr_buf b;
    cr_buf_init(&b);
    cr_buf_puts(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>corral sim "
                    "report</title>\n<style>body{font-family:sans-serif;margin:2em}"
                    "pre{background:#f6f6f6;padding:1em}</style></head><body>\n"
                    "<h1>corral sim report</h1>\n<pre>");
    char *text = NULL;
    size_t tlen = 0;
    FILE *mf = open_memstream(&text, &tlen);
    if (mf) {
        if (n == 1) {
            cr__sim_report_text(mf, &rs[0], w, ro);
        } else {
            cr__sim_report_compare(mf, rs, n, w, ro);
        }
        fclose(mf);
        html_esc(&b, text ? text : "");
    }
    free(text);
    cr_buf_puts(&b, "</pre>\n");
    double **xs = cr_calloc(n, sizeof *xs), **ys = cr_calloc(n, sizeof *ys);
    double **qs = cr_calloc(n, sizeof *qs);
    size_t *m = cr_calloc(n, sizeof *m);
    for (size_t k = 0; k < n; k++) {
        xs[k] = cr_calloc(NB, sizeof(double));
        ys[k] = cr_calloc(NB, sizeof(double));
        qs[k] = cr_calloc(NB, sizeof(double));
        m[k] = series(&rs[k], NB, xs[k], ys[k], qs[k]);
        for (size_t i = 0; i < m[k]; i++) {
            xs[k][i] /= 3600.0;
            ys[k][i] *= 100.0;
        }
    }
    svg_chart(&b, "GPU utilisation over time", "hours", "% of healthy GPUs busy", rs, n, xs, ys, m,
              100);
    svg_chart(&b, "Queue length over time", "hours", "pending jobs", rs, n, xs, qs, m, 0);
    /* JCT CDF over the measured jobs, NC points per run. */
    for (size_t k = 0; k < n; k++) {
        double *j = cr_calloc(w->njobs + 1, sizeof *j);
        size_t nj = 0;
        for (size_t i = 0; i < w->njobs; i++) {
            if (in_window(ro, i) && rs[k].jobs[i].finish_ns >= 0) {
                j[nj++] = (double)(rs[k].jobs[i].finish_ns - w->jobs[i].submit_ns) / 3.6e12;
            }
        }
        qsort(j, nj, sizeof *j, dbl_cmp);
        free(xs[k]);
        free(ys[k]);
        xs[k] = cr_calloc(NC + 1, sizeof(double));
        ys[k] = cr_calloc(NC + 1, sizeof(double));
        m[k] = 0;
        for (size_t p = 1; nj && p <= NC; p++) {
            xs[k][m[k]] = pct(j, nj, (double)p / NC);
            ys[k][m[k]++] = (double)p / NC;
        }
        free(j);
    }
    svg_chart(&b, "JCT CDF", "JCT (hours)", "fraction of jobs", rs, n, xs, ys, m, 1);
    for (size_t k = 0; k < n; k++) {
        free(xs[k]);
        free(ys[k]);
        free(qs[k]);
    }
    free(xs);
    free(ys);
    free(qs);
    free(m);
    cr_buf_puts(&b, "</body></html>\n");
    int rc = 0;
    FILE *f = fopen(path, "w");
    if (!f || fwrite(b.data, 1, b.len, f) != b.len) {
        rc = CR_EIO;
    }
    if (f && fclose(f) != 0) {
        rc = CR_EIO;
    }
    cr_buf_fini(&b);
    return rc;
}
