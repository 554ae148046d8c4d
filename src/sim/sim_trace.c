/*
 * sim_trace.c - workloads: trace readers, the synthetic generator, and the
 * resolution of each job's rate on each cluster GPU type.
 *
 * Every reader stops at the first bad line and reports "FILE:LINE: field
 * 'NAME': why", which the command line turns into exit code 2. Readers
 * never trust a size from the file: counts are range-checked before use.
 *
 * Formats (docs/sim.md has the full reference):
 *   gavel     tab-separated, 10 fields (job_type, command, working_directory,
 *             num_steps_arg, needs_data_dir, total_steps, scale_factor,
 *             priority_weight, SLO, arrival_time) or the older 7 fields
 *             (job_type, command, num_steps_arg, needs_data_dir,
 *             total_steps, arrival_time, scale_factor); work = total_steps,
 *             rates from the throughput table.
 *   tiresias  CSV with a header naming at least job_id, num_gpu,
 *             submit_time and duration (seconds); work = duration.
 *   native    one job per line, KEY=VALUE words; '#' starts a comment.
 */
#include "sim_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_file.h"
#include "cr_learn.h"
#include "cr_parse.h"
#include "cr_perf.h"
#include "cr_time.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_GPUS_PER_JOB 65536
#define MAX_TIME_S       (1e9) /* ~31 years of virtual time */

void cr__sim_workload_init(cr__sim_workload *w)
{
    memset(w, 0, sizeof *w);
}

void cr__sim_workload_fini(cr__sim_workload *w)
{
    CR_FREE(w->jobs);
    CR_FREE(w->tenants);
    memset(w, 0, sizeof *w);
}

int cr__sim_workload_tenant(cr__sim_workload *w, const char *name)
{
    for (size_t i = 0; i < w->ntenants; i++) {
        if (strcmp(w->tenants[i], name) == 0) {
            return (int)i;
        }
    }
    CR_GROW(w->tenants, w->ntenants, w->tenants_cap);
    snprintf(w->tenants[w->ntenants], CR_SIM_NAME_MAX, "%s", name);
    return (int)w->ntenants++;
}

cr__sim_job *cr__sim_workload_add(cr__sim_workload *w)
{
    CR_GROW(w->jobs, w->njobs, w->cap);
    cr__sim_job *j = &w->jobs[w->njobs++];
    memset(j, 0, sizeof *j);
    j->type_req = -1;
    j->preemptible = true;
    j->ckpt_ns = 30 * CR_NS_PER_MIN;
    j->ref_rate = 1.0;
    j->tenant = cr__sim_workload_tenant(w, "default");
    return j;
}

/* Merge sort by submit time: stable, so equal arrivals keep file order. */
static void msort(cr__sim_job *a, cr__sim_job *tmp, size_t n)
{
    if (n < 2) {
        return;
    }
    size_t h = n / 2;
    msort(a, tmp, h);
    msort(a + h, tmp, n - h);
    size_t i = 0, k = h, o = 0;
    while (i < h && k < n) {
        tmp[o++] = (a[k].submit_ns < a[i].submit_ns) ? a[k++] : a[i++];
    }
    while (i < h) {
        tmp[o++] = a[i++];
    }
    while (k < n) {
        tmp[o++] = a[k++];
    }
    memcpy(a, tmp, n * sizeof *a);
}

void cr__sim_workload_sort(cr__sim_workload *w)
{
    if (w->njobs < 2) {
        return;
    }
    cr__sim_job *tmp = cr_calloc(w->njobs, sizeof *tmp);
    msort(w->jobs, tmp, w->njobs);
    free(tmp);
}

/* ------------------------------------------------------------- line reader */

typedef struct lines {
    char *buf;  /* private copy of the text */
    char *p;    /* next unread byte */
    char *end;  /* one past the last byte */
    int lineno; /* 1-based number of the line last returned */
} lines;

static void lines_init(lines *l, const char *text, size_t len)
{
    l->buf = cr_malloc(len + 1);
    memcpy(l->buf, text, len);
    l->buf[len] = '\0';
    l->p = l->buf;
    l->end = l->buf + len;
    l->lineno = 0;
}

/* Next line, NUL-terminated, CR stripped; NULL at the end. */
static char *lines_next(lines *l)
{
    if (l->p >= l->end) {
        return NULL;
    }
    char *s = l->p;
    char *nl = memchr(s, '\n', (size_t)(l->end - s));
    if (nl) {
        *nl = '\0';
        l->p = nl + 1;
    } else {
        l->p = l->end;
    }
    size_t n = strlen(s);
    if (n && s[n - 1] == '\r') {
        s[n - 1] = '\0';
    }
    l->lineno++;
    return s;
}

static bool blank(const char *s)
{
    while (*s == ' ' || *s == '\t') {
        s++;
    }
    return *s == '\0';
}

static int seconds_to_ns(double s, int64_t *out)
{
    if (!(s >= 0) || s > MAX_TIME_S) {
        return CR_ERANGE;
    }
    *out = (int64_t)llround(s * 1e9);
    return 0;
}

/* -------------------------------------------------------------------- gavel */

int cr__sim_read_gavel(const char *path, const char *text, size_t len, cr__sim_workload *w,
                       char *err, size_t errlen)
{
    lines l;
    lines_init(&l, text, len);
    int rc = 0;
    char *line;
    char *f[11];
    while ((line = lines_next(&l)) != NULL) {
        if (blank(line)) {
            continue;
        }
        int nf = 0;
        char *s = line;
        for (;;) {
            if (nf == 11) {
                break;
            }
            f[nf++] = s;
            char *tab = strchr(s, '\t');
            if (!tab) {
                break;
            }
            *tab = '\0';
            s = tab + 1;
        }
        if (nf != 7 && nf != 10) {
            snprintf(err, errlen, "%s:%d: expected 10 (or 7) tab-separated fields, found %s%d",
                     path, l.lineno, nf == 11 ? "more than " : "", nf == 11 ? 10 : nf);
            rc = CR_EPARSE;
            goto out;
        }
        /* Field positions for the two layouts. */
        int i_steps = 5, i_scale = 6, i_prio = 7, i_arrival = 9;
        if (nf == 7) {
            i_steps = 4;
            i_arrival = 5;
            i_scale = 6;
            i_prio = -1;
        }
        const char *field = NULL;
        double steps, arrival, prio = 1;
        int64_t scale;
        if (strlen(f[0]) == 0 || strlen(f[0]) >= CR_SIM_NAME_MAX * 2) {
            field = "job_type";
        } else if (cr_parse_f64(f[i_steps], 1e-9, 1e15, &steps) != 0) {
            field = "total_steps";
        } else if (cr_parse_i64(f[i_scale], 1, MAX_GPUS_PER_JOB, &scale) != 0) {
            field = "scale_factor";
        } else if (i_prio >= 0 && cr_parse_f64(f[i_prio], 0, 1e9, &prio) != 0) {
            field = "priority_weight";
        } else if (cr_parse_f64(f[i_arrival], 0, MAX_TIME_S, &arrival) != 0) {
            field = "arrival_time";
        }
        if (field) {
            snprintf(err, errlen, "%s:%d: field '%s': invalid value", path, l.lineno, field);
            rc = CR_EPARSE;
            goto out;
        }
        cr__sim_job *j = cr__sim_workload_add(w);
        snprintf(j->name, sizeof j->name, "%zu", w->njobs - 1);
        snprintf(j->model, sizeof j->model, "%s", f[0]);
        j->gpu_count = (int)scale;
        j->work = steps;
        j->ref_rate = 0; /* rates come from the throughput table */
        j->priority = (int)lround(prio);
        seconds_to_ns(arrival, &j->submit_ns);
    }
out:
    free(l.buf);
    return rc;
}

/* ----------------------------------------------------------------- tiresias */

int cr__sim_read_tiresias(const char *path, const char *text, size_t len, cr__sim_workload *w,
                          char *err, size_t errlen)
{
    lines l;
    lines_init(&l, text, len);
    cr_csv_rec rec;
    cr_csv_rec_init(&rec);
    int rc = CR_EPARSE;
    int c_id = -1, c_gpu = -1, c_submit = -1, c_dur = -1, c_model = -1, c_tenant = -1;
    size_t ncols = 0;
    char *line;
    int ecol;
    while ((line = lines_next(&l)) != NULL && blank(line)) {
    }
    if (!line) {
        snprintf(err, errlen, "%s: empty file (expected a CSV header)", path);
        goto out;
    }
    if (cr_csv_split(line, ',', &rec, &ecol) != 0) {
        snprintf(err, errlen, "%s:%d: column %d: unterminated quote", path, l.lineno, ecol);
        goto out;
    }
    ncols = rec.count;
    for (size_t i = 0; i < rec.count; i++) {
        const char *h = rec.fields[i];
        if (strcmp(h, "job_id") == 0) {
            c_id = (int)i;
        } else if (strcmp(h, "num_gpu") == 0) {
            c_gpu = (int)i;
        } else if (strcmp(h, "submit_time") == 0) {
            c_submit = (int)i;
        } else if (strcmp(h, "duration") == 0) {
            c_dur = (int)i;
        } else if (strcmp(h, "model_name") == 0) {
            c_model = (int)i;
        } else if (strcmp(h, "user") == 0 || strcmp(h, "tenant") == 0) {
            c_tenant = (int)i;
        }
    }
    const char *missing = c_id < 0       ? "job_id"
                          : c_gpu < 0    ? "num_gpu"
                          : c_submit < 0 ? "submit_time"
                          : c_dur < 0    ? "duration"
                                         : NULL;
    if (missing) {
        snprintf(err, errlen, "%s:%d: header: missing column '%s'", path, l.lineno, missing);
        goto out;
    }
    while ((line = lines_next(&l)) != NULL) {
        if (blank(line)) {
            continue;
        }
        if (cr_csv_split(line, ',', &rec, &ecol) != 0) {
            snprintf(err, errlen, "%s:%d: column %d: unterminated quote", path, l.lineno, ecol);
            goto out;
        }
        if (rec.count != ncols) {
            snprintf(err, errlen, "%s:%d: expected %zu fields, found %zu", path, l.lineno, ncols,
                     rec.count);
            goto out;
        }
        int64_t gpus;
        double submit, dur;
        const char *field = NULL;
        int bad_col = -1;
        const char *id = rec.fields[c_id];
        if (strlen(id) == 0 || strlen(id) >= CR_SIM_NAME_MAX) {
            field = "job_id";
            bad_col = c_id;
        } else if (cr_parse_i64(rec.fields[c_gpu], 1, MAX_GPUS_PER_JOB, &gpus) != 0) {
            field = "num_gpu";
            bad_col = c_gpu;
        } else if (cr_parse_f64(rec.fields[c_submit], 0, MAX_TIME_S, &submit) != 0) {
            field = "submit_time";
            bad_col = c_submit;
        } else if (cr_parse_f64(rec.fields[c_dur], 1e-6, MAX_TIME_S, &dur) != 0) {
            field = "duration";
            bad_col = c_dur;
        } else if (c_tenant >= 0 && (strlen(rec.fields[c_tenant]) == 0 ||
                                     strlen(rec.fields[c_tenant]) >= CR_SIM_NAME_MAX)) {
            field = "user";
            bad_col = c_tenant;
        }
        if (field) {
            snprintf(err, errlen, "%s:%d: field '%s': invalid value '%.40s'", path, l.lineno, field,
                     rec.fields[bad_col]);
            goto out;
        }
        cr__sim_job *j = cr__sim_workload_add(w);
        snprintf(j->name, sizeof j->name, "%s", id);
        if (c_model >= 0) {
            snprintf(j->model, sizeof j->model, "%s", rec.fields[c_model]);
        }
        if (c_tenant >= 0) {
            j->tenant = cr__sim_workload_tenant(w, rec.fields[c_tenant]);
        }
        j->gpu_count = (int)gpus;
        j->work = dur;
        j->ref_rate = 1.0;
        seconds_to_ns(submit, &j->submit_ns);
    }
    rc = 0;
out:
    cr_csv_rec_fini(&rec);
    free(l.buf);
    return rc;
}

/* ------------------------------------------------------------------- native */

static int parse_bool(const char *s, bool *out)
{
    if (!strcmp(s, "yes") || !strcmp(s, "true") || !strcmp(s, "1")) {
        *out = true;
        return 0;
    }
    if (!strcmp(s, "no") || !strcmp(s, "false") || !strcmp(s, "0")) {
        *out = false;
        return 0;
    }
    return CR_EINVAL;
}

/*
 * Native: "submit=0 gpus=4 duration=2h tenant=a type=V100 priority=1
 * preemptible=no checkpoint=30m id=j1 model=M steps=N". Required: submit,
 * gpus, and either duration or steps (with model to find the rates).
 */
int cr__sim_read_native(const char *path, const char *text, size_t len, cr__sim_workload *w,
                        char *err, size_t errlen)
{
    lines l;
    lines_init(&l, text, len);
    int rc = CR_EPARSE;
    char *line;
    while ((line = lines_next(&l)) != NULL) {
        char *hash = strchr(line, '#');
        if (hash) {
            *hash = '\0';
        }
        if (blank(line)) {
            continue;
        }
        cr__sim_job *j = cr__sim_workload_add(w);
        snprintf(j->name, sizeof j->name, "%zu", w->njobs - 1);
        bool have_submit = false, have_gpus = false, have_dur = false, have_steps = false;
        char *save = NULL;
        for (char *word = strtok_r(line, " \t", &save); word; word = strtok_r(NULL, " \t", &save)) {
            char *eq = strchr(word, '=');
            if (!eq || eq == word) {
                snprintf(err, errlen, "%s:%d: '%.40s': expected KEY=VALUE", path, l.lineno, word);
                goto out;
            }
            *eq = '\0';
            const char *k = word, *v = eq + 1;
            int64_t i64;
            double d;
            int bad = 0;
            if (!strcmp(k, "submit")) {
                bad = cr_duration_parse(v, &j->submit_ns);
                have_submit = true;
            } else if (!strcmp(k, "gpus")) {
                bad = cr_parse_i64(v, 1, MAX_GPUS_PER_JOB, &i64);
                j->gpu_count = (int)i64;
                have_gpus = true;
            } else if (!strcmp(k, "duration")) {
                int64_t ns = 0;
                bad = cr_duration_parse(v, &ns);
                if (!bad && ns <= 0) {
                    bad = CR_ERANGE;
                }
                j->work = (double)ns / 1e9;
                j->ref_rate = 1.0;
                have_dur = true;
            } else if (!strcmp(k, "steps")) {
                bad = cr_parse_f64(v, 1e-9, 1e15, &d);
                j->work = d;
                j->ref_rate = 0;
                have_steps = true;
            } else if (!strcmp(k, "model")) {
                bad = (strlen(v) == 0 || strlen(v) >= sizeof j->model) ? CR_EINVAL : 0;
                snprintf(j->model, sizeof j->model, "%s", v);
                /* Gavel model names have spaces: allow '_' for them. */
                for (char *p = j->model; *p; p++) {
                    *p = (*p == '_') ? ' ' : *p;
                }
            } else if (!strcmp(k, "tenant")) {
                bad = (strlen(v) == 0 || strlen(v) >= CR_SIM_NAME_MAX) ? CR_EINVAL : 0;
                if (!bad) {
                    j->tenant = cr__sim_workload_tenant(w, v);
                }
            } else if (!strcmp(k, "type")) {
                bad = (strlen(v) == 0 || strlen(v) >= CR_SIM_NAME_MAX) ? CR_EINVAL : 0;
                if (!bad && strcasecmp(v, "any") != 0) {
                    snprintf(j->type_name, sizeof j->type_name, "%s", v);
                }
            } else if (!strcmp(k, "priority")) {
                bad = cr_parse_i64(v, -1000000, 1000000, &i64);
                j->priority = (int)i64;
            } else if (!strcmp(k, "preemptible")) {
                bad = parse_bool(v, &j->preemptible);
            } else if (!strcmp(k, "checkpoint")) {
                bad = cr_duration_parse(v, &j->ckpt_ns);
            } else if (!strcmp(k, "kind")) {
                bad = cr_kind_parse(v, &j->perf_kind);
                if (!bad && j->perf_kind != CR_KIND_PRETRAIN && j->perf_kind != CR_KIND_FINETUNE &&
                    j->perf_kind != CR_KIND_HPC && j->perf_kind != CR_KIND_BATCH) {
                    bad = CR_EINVAL; /* services have no end: not simulated */
                }
                j->perf = true;
                j->ref_rate = 0;
            } else if (!strcmp(k, "method")) {
                bad = cr_method_parse(v, &j->perf_method);
            } else if (!strcmp(k, "precision")) {
                bad = cr_precision_parse(v, &j->perf_precision);
            } else if (!strcmp(k, "params")) {
                bad = cr_parse_count(v, &j->perf_params);
                if (!bad && !(j->perf_params > 0 && j->perf_params < 1e16)) {
                    bad = CR_ERANGE;
                }
            } else if (!strcmp(k, "tokens")) {
                bad = cr_parse_count(v, &j->perf_tokens);
                if (!bad && !(j->perf_tokens > 0 && j->perf_tokens < 1e18)) {
                    bad = CR_ERANGE;
                }
            } else if (!strcmp(k, "truth")) {
                bad = cr_parse_f64(v, 0.01, 100, &j->truth);
            } else if (!strcmp(k, "flops")) {
                bad = cr_parse_count(v, &j->perf_flops);
                if (!bad && !(j->perf_flops > 0 && j->perf_flops < 1e30)) {
                    bad = CR_ERANGE;
                }
            } else if (!strcmp(k, "id")) {
                bad = (strlen(v) == 0 || strlen(v) >= sizeof j->name) ? CR_EINVAL : 0;
                snprintf(j->name, sizeof j->name, "%s", v);
            } else if (!strcmp(k, "gpu_milli")) {
                bad = cr_parse_i64(v, 1, 999, &i64);
                j->gpu_milli = (uint16_t)i64;
            } else if (!strcmp(k, "mig")) {
                bad = (strlen(v) == 0 || strlen(v) >= sizeof j->mig) ? CR_EINVAL : 0;
                snprintf(j->mig, sizeof j->mig, "%s", v);
            } else {
                snprintf(err, errlen, "%s:%d: field '%.40s': unknown key", path, l.lineno, k);
                goto out;
            }
            if (bad) {
                snprintf(err, errlen, "%s:%d: field '%s': invalid value '%.40s'", path, l.lineno, k,
                         v);
                goto out;
            }
        }
        const char *missing = !have_submit                           ? "submit"
                              : !have_gpus                           ? "gpus"
                              : !have_dur && !have_steps && !j->perf ? "duration"
                                                                     : NULL;
        if (missing) {
            snprintf(err, errlen, "%s:%d: field '%s': missing", path, l.lineno, missing);
            goto out;
        }
        if ((j->gpu_milli && (j->gpu_count != 1 || j->mig[0])) || (j->mig[0] && !have_dur)) {
            snprintf(err, errlen, "%s:%d: field '%s': %s", path, l.lineno,
                     j->gpu_milli ? "gpu_milli" : "mig",
                     j->gpu_milli ? "a fraction is of one GPU (gpus=1), without mig"
                                  : "a MIG job gives its duration on the slice");
            goto out;
        }
        if (have_dur + have_steps + j->perf > 1) {
            snprintf(err, errlen, "%s:%d: field '%s': give one of duration, steps or kind", path,
                     l.lineno, have_steps ? "steps" : "kind");
            goto out;
        }
        if (j->perf) {
            bool train = j->perf_kind == CR_KIND_PRETRAIN || j->perf_kind == CR_KIND_FINETUNE;
            const char *need = train && j->perf_params <= 0   ? "params"
                               : train && j->perf_tokens <= 0 ? "tokens"
                               : !train && j->perf_flops <= 0 ? "flops"
                                                              : NULL;
            if (need) {
                snprintf(err, errlen, "%s:%d: field '%s': missing (kind=%s needs it)", path,
                         l.lineno, need, cr_kind_name(j->perf_kind));
                goto out;
            }
            j->work = 1.0; /* the whole job; rate = 1 / runtime on a type */
        }
        if (have_steps && !j->model[0]) {
            snprintf(err, errlen, "%s:%d: field 'model': steps need a model for the rates", path,
                     l.lineno);
            goto out;
        }
    }
    rc = 0;
out:
    free(l.buf);
    return rc;
}

/* ------------------------------------------------------------------ by file */

int cr__sim_read_file(const char *path, const char *format, cr__sim_workload *w, char *err,
                      size_t errlen)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = cr_file_read(path, (size_t)1 << 30, &buf, &len);
    if (rc != 0) {
        snprintf(err, errlen, rc == CR_ETOOBIG ? "%s: larger than 1 GiB" : "%s: cannot open", path);
        goto out;
    }
    if (memchr(buf, '\0', len)) {
        snprintf(err, errlen, "%s: binary data (NUL byte) in a trace", path);
        rc = CR_EPARSE;
        goto out;
    }
    size_t plen = strlen(path);
    if (!format || !*format) {
        if (plen > 6 && strcmp(path + plen - 6, ".trace") == 0) {
            format = "gavel";
        } else if (plen > 4 && strcmp(path + plen - 4, ".csv") == 0) {
            format = "tiresias";
        } else {
            format = "native";
        }
    }
    if (!strcmp(format, "gavel")) {
        rc = cr__sim_read_gavel(path, buf, len, w, err, errlen);
    } else if (!strcmp(format, "tiresias")) {
        rc = cr__sim_read_tiresias(path, buf, len, w, err, errlen);
    } else if (!strcmp(format, "native")) {
        rc = cr__sim_read_native(path, buf, len, w, err, errlen);
    } else {
        snprintf(err, errlen, "unknown trace format '%s' (gavel, tiresias, native)", format);
        rc = CR_EINVAL;
    }
    if (rc == 0 && w->njobs == 0) {
        snprintf(err, errlen, "%s: no jobs", path);
        rc = CR_EPARSE;
    }
out:
    free(buf);
    return rc;
}

/* ---------------------------------------------------------------- generator */

/*
 * Gavel's generator (scheduler/utils.py): the scale factor and duration
 * follow the Philly trace. Scale: 1 (70%), 2 (10%), 4 (15%), 8 (5%).
 * Duration on the reference GPU (V100): 60 * 10^U(1.5, 3) seconds with
 * probability 0.8, else 60 * 10^U(3, 4). Models are drawn uniformly from
 * those with a row for the chosen scale. Without a throughput table, jobs
 * carry seconds at rate 1 on every type.
 */
static int gen_scale(cr_rng *r)
{
    double u = cr_rng_uniform(r);
    if (u >= 0.95) {
        return 8;
    }
    if (u >= 0.8) {
        return 4;
    }
    if (u >= 0.7) {
        return 2;
    }
    return 1;
}

static double gen_duration_s(cr_rng *r)
{
    double u = cr_rng_uniform(r);
    double e = cr_rng_uniform(r);
    if (u >= 0.8) {
        return 60.0 * pow(10.0, 3.0 + e);
    }
    return 60.0 * pow(10.0, 1.5 + 1.5 * e);
}

int cr__sim_generate(const cr__sim_gen *g, cr__sim_workload *w)
{
    cr_rng rng;
    cr_rng_seed(&rng, g->seed);
    int ref = -1;
    if (g->tput) {
        ref = cr__sim_tput_type(g->tput, "V100");
        if (ref < 0) {
            ref = 0;
        }
    }
    int ntenants = g->ntenants > 0 ? g->ntenants : 1;
    int tenant_ids[64];
    for (int i = 0; i < ntenants && i < 64; i++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", i);
        tenant_ids[i] = cr__sim_workload_tenant(w, name);
    }
    double t_s = 0;
    for (size_t n = 0; n < g->njobs; n++) {
        if (g->jobs_per_hour > 0) {
            t_s += cr_rng_exp(&rng, 3600.0 / g->jobs_per_hour);
        }
        int scale = g->multi_gpu ? gen_scale(&rng) : 1;
        double dur = gen_duration_s(&rng);
        cr__sim_job *j = cr__sim_workload_add(w);
        snprintf(j->name, sizeof j->name, "%zu", n);
        j->tenant = tenant_ids[ntenants > 1 ? cr_rng_below(&rng, (uint64_t)ntenants) % 64 : 0];
        j->gpu_count = scale;
        seconds_to_ns(t_s, &j->submit_ns);
        if (g->tput) {
            /* Uniform over rows of this scale that the reference type runs. */
            size_t cand = 0;
            for (size_t i = 0; i < g->tput->nrows; i++) {
                const cr__sim_tput_row *row = &g->tput->rows[i];
                cand += row->scale == scale && row->steps_per_s[ref] > 0;
            }
            if (cand == 0) {
                return CR_EINVAL;
            }
            size_t pick = (size_t)cr_rng_below(&rng, cand);
            for (size_t i = 0; i < g->tput->nrows; i++) {
                const cr__sim_tput_row *row = &g->tput->rows[i];
                if (row->scale == scale && row->steps_per_s[ref] > 0 && pick-- == 0) {
                    snprintf(j->model, sizeof j->model, "%s", row->model);
                    j->work = dur * row->steps_per_s[ref];
                    j->ref_rate = 0;
                    break;
                }
            }
        } else {
            j->work = dur;
            j->ref_rate = 1.0;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ resolve */

/* The workload of a performance-model job. */
static void perf_workload(const cr__sim_job *j, cr_workload *wl)
{
    cr_workload_init(wl);
    wl->kind = j->perf_kind;
    wl->method = j->perf_method;
    wl->precision = j->perf_precision;
    if (j->perf_params > 0) {
        wl->params = j->perf_params;
    }
    if (j->perf_tokens > 0) {
        wl->tokens = j->perf_tokens;
    }
    if (j->perf_flops > 0) {
        wl->work_flops = j->perf_flops;
    }
}

/* Rate of a performance-model job on one catalog type: 1 / runtime; its
 * throughput (tokens/s for training) into *tput. */
static double perf_rate(const cr__sim_job *j, const cr_catalog *catalog, const char *type,
                        double *tput)
{
    *tput = 0;
    const cr_gpu_type *g = catalog ? cr_catalog_find(catalog, type) : NULL;
    if (!g) {
        return 0;
    }
    cr_workload wl;
    perf_workload(j, &wl);
    cr_perf_env env = {.catalog = catalog, .prices = NULL, .measured = NULL};
    cr_estimate est;
    if (cr_perf_estimate(&env, &wl, g, j->gpu_count, &est) != 0 || !est.fits || est.time_ns <= 0) {
        return 0;
    }
    *tput = est.throughput;
    return 1e9 / (double)est.time_ns;
}

int cr__sim_workload_resolve(cr__sim_workload *w, const char (*types)[CR_SIM_NAME_MAX], int ntypes,
                             const cr__sim_tput *tput, const cr_catalog *catalog, char *err,
                             size_t errlen)
{
    int col[CR_SIM_MAX_TYPES];
    for (int t = 0; t < ntypes; t++) {
        col[t] = cr__sim_tput_type(tput, types[t]);
    }
    for (size_t i = 0; i < w->njobs; i++) {
        cr__sim_job *j = &w->jobs[i];
        if (j->type_name[0]) {
            j->type_req = -1;
            for (int t = 0; t < ntypes; t++) {
                if (strcasecmp(types[t], j->type_name) == 0) {
                    j->type_req = t;
                }
            }
            if (j->type_req < 0) {
                snprintf(err, errlen, "job %s: type '%s' is not in the cluster", j->name,
                         j->type_name);
                return CR_EINVAL;
            }
        }
        const cr__sim_tput_row *row = NULL;
        double factor = 1.0;
        if (j->model[0] && tput) {
            row = cr__sim_tput_find(tput, j->model, j->gpu_count);
            /* Gangs larger than the table's biggest: scale linearly from it. */
            for (int s = j->gpu_count / 2; !row && s >= 1; s /= 2) {
                row = cr__sim_tput_find(tput, j->model, s);
                factor = (double)j->gpu_count / s;
            }
        }
        bool any = false;
        for (int t = 0; t < ntypes; t++) {
            double r = j->ref_rate;
            if (row) {
                r = col[t] >= 0 ? row->steps_per_s[col[t]] * factor : 0;
            } else if (j->perf) {
                r = (j->type_req < 0 || j->type_req == t)
                        ? perf_rate(j, catalog, types[t], &j->model_tok_s[t])
                        : 0;
            }
            if (j->type_req >= 0 && j->type_req != t) {
                r = 0;
            }
            j->rate[t] = r;
            j->model_rate[t] = r;
            any |= r > 0;
        }
        j->sig[0] = '\0';
        if (j->perf && (j->perf_kind == CR_KIND_PRETRAIN || j->perf_kind == CR_KIND_FINETUNE)) {
            cr_workload wl;
            perf_workload(j, &wl);
            cr_workload_signature(&wl, j->sig, sizeof j->sig);
        }
        if (!any) {
            snprintf(err, errlen, "job %s: no rate on any cluster GPU type%s%s%s%s", j->name,
                     j->model[0] ? " (model '" : "", j->model, j->model[0] ? "')" : "",
                     j->perf ? (catalog ? " (the performance model fits it on none)"
                                        : " (no GPU catalog for the performance model)")
                             : "");
            return CR_EINVAL;
        }
    }
    return 0;
}

/* A uniform draw in [0, 1) from (seed, class, type): FNV-1a, then a
 * splitmix64 finaliser (stable across runs and platforms). */
static double class_u(uint64_t seed, const char *sig, const char *type)
{
    uint64_t x = 1469598103934665603ULL ^ seed;
    for (const char *p = sig; *p; p++) {
        x = (x ^ (unsigned char)*p) * 1099511628211ULL;
    }
    x = (x ^ '/') * 1099511628211ULL;
    for (const char *p = type; *p; p++) {
        x = (x ^ (unsigned char)tolower((unsigned char)*p)) * 1099511628211ULL;
    }
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (double)(x >> 11) / 9007199254740992.0;
}

void cr__sim_workload_perturb(cr__sim_workload *w, const char (*types)[CR_SIM_NAME_MAX], int ntypes,
                              double spread, uint64_t seed)
{
    for (size_t i = 0; i < w->njobs; i++) {
        cr__sim_job *j = &w->jobs[i];
        if (!j->sig[0] || (j->truth <= 0 && spread <= 0)) {
            continue;
        }
        for (int t = 0; t < ntypes; t++) {
            double f =
                j->truth > 0 ? j->truth : 1 + spread * (2 * class_u(seed, j->sig, types[t]) - 1);
            j->rate[t] = j->model_rate[t] * f;
        }
    }
}
