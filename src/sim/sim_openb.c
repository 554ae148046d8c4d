/*
 * sim_openb.c - 'corral sim --inflate': GPU-sharing capacity on the Alibaba
 * openb trace layout.
 *
 * Reads the two CSV files of Alibaba's cluster-trace-gpu-v2023 ("openb"):
 *
 *   nodes: sn,cpu_milli,memory_mib,gpu,model          (one GPU node a row)
 *   pods:  name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,
 *          pod_phase,creation_time,deletion_time,scheduled_time
 *
 * Columns are found by their header names, in any order; unknown columns
 * (a leading index, say) are ignored. Nodes without GPUs and pods without
 * GPUs are skipped (CPU and host memory are not modelled). A pod with
 * num_gpu 1 and gpu_milli 1..999 is a fractional task; any other GPU pod
 * asks for num_gpu whole GPUs on one node. gpu_spec ("V100M16|V100M32",
 * "nan" or empty for any) limits the GPU models it may use.
 *
 * Inflation, as in the FGD paper's experiments: tasks drawn uniformly, with
 * replacement, from the trace's GPU pods arrive one at a time into an empty
 * cluster and never leave; each is placed at once by the scheduler (one
 * cycle) or, failing that, dropped. Arrivals stop once the GPUs they asked
 * for reach --inflate-to times the cluster's GPU capacity. The report gives,
 * at each step of arrived workload, the share of the cluster's GPU capacity
 * left unallocated, for each share policy asked for: the same draws for
 * each, so the columns compare placements only.
 */
#include "sim_int.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"
#include "cr_parse.h"
#include "cr_rng.h"
#include "cr_sched.h"
#include "cr_time.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OB_MAX_COLS     64
#define OB_MAX_LINE     4096
#define OB_MAX_POLICIES CR_SHARE_POLICY_COUNT
#define OB_MAX_STEPS    1000

typedef struct ob_pod {
    uint32_t num_gpu;   /* GPUs (1 for a fractional task), 0 for a CPU-only pod */
    uint64_t cpu_milli; /* CPU, thousandths of a core (0 if the file has none) */
    uint64_t mem_bytes; /* host memory (0 if the file has none) */
    uint32_t milli;     /* thousandths of one GPU if fractional, else 0 */
    uint32_t type_mask; /* GPU types it may use (bit per scheduler type id) */
    int64_t arrive_s;   /* creation_time, -1 unknown (replay only) */
    int64_t run_s;      /* deletion_time - scheduled_time (else creation), -1 unknown */
    char name[CR_SIM_NAME_MAX];
} ob_pod;

typedef struct ob_node {
    char name[CR_SCHED_NAME_MAX];
    int type;
    uint32_t gpus;
    uint64_t cpu_milli; /* 0 if the file has none */
    uint64_t mem_bytes;
} ob_node;

typedef struct ob_input {
    char types[CR_SCHED_MAX_TYPES][CR_SCHED_NAME_MAX];
    int ntypes;
    ob_node *nodes;
    size_t nnodes, cnodes;
    ob_pod *pods;
    size_t npods, cpods;
    size_t skipped_cpu;   /* pods without GPUs, not kept (--gpu-only, or no CPU/memory asked) */
    size_t cpu_pods;      /* pods without GPUs, kept */
    bool gpu_only;        /* --gpu-only: CPU and memory not modelled, CPU-only pods skipped */
    size_t skipped_model; /* pods whose gpu_spec names no model of the cluster */
    uint64_t gpus;        /* GPUs in the cluster */
} ob_input;

static int fail(char *err, size_t errlen, const char *path, size_t line, const char *field,
                const char *why, const char *val)
{
    snprintf(err, errlen, "%s:%zu: field '%s': %s%s%s%s", path, line, field, why, val ? " ('" : "",
             val ? val : "", val ? "')" : "");
    return CR_EPARSE;
}

/* Split a CSV line in place (no quoting in the openb files; surrounding
 * double quotes and spaces are stripped). Returns the field count. */
static int split(char *line, char **f, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        char *c = strchr(p, ',');
        if (c) {
            *c = '\0';
        }
        if (n < max) {
            while (*p == ' ' || *p == '"') {
                p++;
            }
            size_t l = strlen(p);
            while (l > 0 && (p[l - 1] == ' ' || p[l - 1] == '"' || p[l - 1] == '\r')) {
                p[--l] = '\0';
            }
            f[n++] = p;
        }
        if (!c) {
            break;
        }
        p = c + 1;
    }
    return n;
}

static int col_of(char **hdr, int n, const char *name)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(hdr[i], name) == 0) {
            return i;
        }
    }
    return -1;
}

static bool is_none(const char *v)
{
    return !v[0] || strcmp(v, "nan") == 0 || strcmp(v, "NaN") == 0 || strcmp(v, "None") == 0;
}

static int type_id(ob_input *in, const char *model, bool add)
{
    for (int t = 0; t < in->ntypes; t++) {
        if (strcmp(in->types[t], model) == 0) {
            return t;
        }
    }
    if (!add || in->ntypes >= CR_SCHED_MAX_TYPES || strlen(model) >= CR_SCHED_NAME_MAX) {
        return -1;
    }
    snprintf(in->types[in->ntypes], CR_SCHED_NAME_MAX, "%s", model);
    return in->ntypes++;
}

typedef int (*row_fn)(ob_input *in, char **hdr, int nh, char **f, int nf, const char *path,
                      size_t line, char *err, size_t errlen);

/* Parse CSV text (len bytes, borrowed) line by line; cb gets the header
 * and every row. Errors name path, line and field. */
static int parse_csv(const char *path, const char *text, size_t len, ob_input *in, row_fn cb,
                     char *err, size_t errlen)
{
    char hbuf[OB_MAX_LINE], buf[OB_MAX_LINE];
    char *hdr[OB_MAX_COLS], *f[OB_MAX_COLS];
    int nh = 0;
    size_t line = 0, pos = 0;
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t l = nl ? (size_t)(nl - (text + pos)) : len - pos;
        char *b = line ? buf : hbuf;
        line++;
        if (l >= OB_MAX_LINE) {
            return fail(err, errlen, path, line, "(line)", "longer than 4095 bytes", NULL);
        }
        memcpy(b, text + pos, l);
        b[l] = '\0';
        pos += l + (nl ? 1 : 0);
        if (strlen(b) != l) {
            return fail(err, errlen, path, line, "(line)", "holds a NUL byte", NULL);
        }
        b[strcspn(b, "\r")] = '\0';
        if (line == 1) {
            nh = split(hbuf, hdr, OB_MAX_COLS);
            continue;
        }
        if (!b[0]) {
            continue;
        }
        int nf = split(buf, f, OB_MAX_COLS);
        int rc = cb(in, hdr, nh, f, nf, path, line, err, errlen);
        if (rc != 0) {
            return rc;
        }
    }
    if (line == 0) {
        return fail(err, errlen, path, 1, "(header)", "empty file", NULL);
    }
    return 0;
}

/* Read a whole file (at most 1 GiB) and parse it. */
static int read_csv(const char *path, ob_input *in, row_fn cb, char *err, size_t errlen)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        snprintf(err, errlen, "%s: cannot open", path);
        return CR_EIO;
    }
    char *text = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (cap - n < 65536) {
            if (cap > ((size_t)1 << 30)) {
                snprintf(err, errlen, "%s: larger than 1 GiB", path);
                rc = CR_ERANGE;
                goto out;
            }
            cap = cap ? cap * 2 : 65536;
            text = cr_realloc(text, cap);
        }
        size_t k = fread(text + n, 1, cap - n, fp);
        n += k;
        if (k == 0) {
            break;
        }
    }
    rc = parse_csv(path, text, n, in, cb, err, errlen);
out:
    free(text);
    fclose(fp);
    return rc;
}

static const char *field(char **hdr, int nh, char **f, int nf, const char *name)
{
    int c = col_of(hdr, nh, name);
    return c >= 0 && c < nf ? f[c] : NULL;
}

/* The optional cpu_milli and memory_mib columns: host[0] CPU thousandths,
 * host[1] bytes (0 when absent or "nan"). */
static int host_cols(char **hdr, int nh, char **f, int nf, const char *path, size_t line,
                     uint64_t *host, char *err, size_t errlen)
{
    static const char *const col[2] = {"cpu_milli", "memory_mib"};
    for (int k = 0; k < 2; k++) {
        const char *v = field(hdr, nh, f, nf, col[k]);
        int64_t x;
        if (!v || is_none(v)) {
            continue;
        }
        if (cr_parse_i64(v, 0, INT64_C(1) << 40, &x) != 0) {
            return fail(err, errlen, path, line, col[k], "expected an integer 0..2^40", v);
        }
        host[k] = k == 0 ? (uint64_t)x : (uint64_t)x << 20;
    }
    return 0;
}

static int node_row(ob_input *in, char **hdr, int nh, char **f, int nf, const char *path,
                    size_t line, char *err, size_t errlen)
{
    static const char *const need[] = {"sn", "gpu", "model"};
    for (size_t i = 0; i < 3; i++) {
        if (!field(hdr, nh, f, nf, need[i])) {
            return fail(err, errlen, path, line, need[i], "missing", NULL);
        }
    }
    const char *sn = field(hdr, nh, f, nf, "sn"), *gpu = field(hdr, nh, f, nf, "gpu");
    const char *model = field(hdr, nh, f, nf, "model");
    int64_t g;
    if (cr_parse_i64(gpu, 0, CR_SCHED_MAX_NODE_GPUS, &g) != 0) {
        return fail(err, errlen, path, line, "gpu", "expected a GPU count 0..64", gpu);
    }
    if (g == 0 || is_none(model)) {
        return 0; /* a CPU node */
    }
    uint64_t host[2] = {0, 0};
    if (!in->gpu_only && host_cols(hdr, nh, f, nf, path, line, host, err, errlen) != 0) {
        return CR_EPARSE;
    }
    if (!sn[0] || strlen(sn) >= CR_SCHED_NAME_MAX) {
        return fail(err, errlen, path, line, "sn", "empty or longer than 63 bytes", sn);
    }
    int t = type_id(in, model, true);
    if (t < 0) {
        return fail(err, errlen, path, line, "model",
                    "more than 32 GPU models, or a name longer than 63 bytes", model);
    }
    if (in->nnodes >= 1000000) {
        return fail(err, errlen, path, line, "sn", "more than 1000000 nodes", NULL);
    }
    CR_GROW(in->nodes, in->nnodes, in->cnodes);
    ob_node *nd = &in->nodes[in->nnodes++];
    snprintf(nd->name, sizeof nd->name, "%s", sn);
    nd->type = t;
    nd->gpus = (uint32_t)g;
    nd->cpu_milli = host[0];
    nd->mem_bytes = host[1];
    in->gpus += (uint64_t)g;
    return 0;
}

static int pod_row(ob_input *in, char **hdr, int nh, char **f, int nf, const char *path,
                   size_t line, char *err, size_t errlen)
{
    const char *ng = field(hdr, nh, f, nf, "num_gpu"), *gm = field(hdr, nh, f, nf, "gpu_milli");
    const char *spec = field(hdr, nh, f, nf, "gpu_spec");
    if (!ng) {
        return fail(err, errlen, path, line, "num_gpu", "missing", NULL);
    }
    if (!gm) {
        return fail(err, errlen, path, line, "gpu_milli", "missing", NULL);
    }
    int64_t n, m;
    if (cr_parse_i64(ng, 0, CR_SCHED_MAX_NODE_GPUS, &n) != 0) {
        return fail(err, errlen, path, line, "num_gpu", "expected 0..64", ng);
    }
    if (cr_parse_i64(gm, 0, 1000, &m) != 0) {
        return fail(err, errlen, path, line, "gpu_milli", "expected 0..1000", gm);
    }
    uint64_t host[2] = {0, 0};
    if (!in->gpu_only && host_cols(hdr, nh, f, nf, path, line, host, err, errlen) != 0) {
        return CR_EPARSE;
    }
    if (n == 0 && (in->gpu_only || (!host[0] && !host[1]))) {
        in->skipped_cpu++;
        return 0;
    }
    if (n > 1 && m > 0 && m < 1000) {
        return fail(err, errlen, path, line, "gpu_milli", "a part of a GPU needs num_gpu 1", gm);
    }
    uint32_t mask = 0;
    if (n == 0) {
        mask = UINT32_MAX; /* a CPU-only pod: any node */
    } else if (!spec || is_none(spec)) {
        mask = in->ntypes >= 32 ? UINT32_MAX : (1u << in->ntypes) - 1;
    } else {
        char buf[512];
        if (strlen(spec) >= sizeof buf) {
            return fail(err, errlen, path, line, "gpu_spec", "longer than 511 bytes", NULL);
        }
        snprintf(buf, sizeof buf, "%s", spec);
        char *save = NULL;
        for (char *p = strtok_r(buf, "|", &save); p; p = strtok_r(NULL, "|", &save)) {
            int t = type_id(in, p, false);
            if (t >= 0) {
                mask |= 1u << t;
            }
        }
    }
    if (!mask) {
        in->skipped_model++;
        return 0;
    }
    if (in->npods >= 10000000) {
        return fail(err, errlen, path, line, "name", "more than 10000000 pods", NULL);
    }
    /* Times, for the time-based replay: seconds, "nan"/empty unknown. */
    int64_t tv[3] = {-1, -1, -1};
    static const char *const tcol[3] = {"creation_time", "deletion_time", "scheduled_time"};
    for (int k = 0; k < 3; k++) {
        const char *v = field(hdr, nh, f, nf, tcol[k]);
        double d;
        if (v && !is_none(v)) {
            if (cr_parse_f64(v, 0, 1e12, &d) != 0) {
                return fail(err, errlen, path, line, tcol[k], "expected seconds >= 0", v);
            }
            tv[k] = (int64_t)d;
        }
    }
    int64_t began = tv[2] >= 0 ? tv[2] : tv[0];
    CR_GROW(in->pods, in->npods, in->cpods);
    ob_pod *pd = &in->pods[in->npods++];
    in->cpu_pods += n == 0;
    *pd = (ob_pod){.num_gpu = (uint32_t)n,
                   .cpu_milli = host[0],
                   .mem_bytes = host[1],
                   .milli = n == 1 && m > 0 && m < 1000 ? (uint32_t)m : 0,
                   .type_mask = mask,
                   .arrive_s = tv[0],
                   .run_s = tv[1] >= 0 && began >= 0 && tv[1] > began ? tv[1] - began : -1};
    const char *nm = field(hdr, nh, f, nf, "name");
    snprintf(pd->name, sizeof pd->name, "%s", nm && *nm ? nm : "");
    return 0;
}

/* ------------------------------------------------------------------------ */

typedef struct ob_args {
    const char *nodes, *pods;
    double to, step, shared;
    double window; /* > 0: each step is the mean over arrivals within window/2 of it */
    uint64_t seed;
    bool check, gpu_only;
    bool in_order; /* the pods in file order, each once, instead of draws */
    cr_sched_share_policy pol[OB_MAX_POLICIES];
    int npol;
} ob_args;

static void ob_usage(FILE *f)
{
    fprintf(
        f, "usage: corral sim --inflate --openb-nodes NODES.csv --openb-pods PODS.csv [options]\n"
           "\n"
           "Fill an empty cluster with tasks drawn from the pods of an Alibaba openb trace\n"
           "(cluster-trace-gpu-v2023 CSV layout) and report the unallocated GPU share as the\n"
           "arrived workload grows, for each share policy.\n"
           "\n"
           "  --openb-nodes FILE    node list: sn,cpu_milli,memory_mib,gpu,model\n"
           "  --openb-pods FILE     pod list: name,...,num_gpu,gpu_milli,gpu_spec,...\n"
           "  --share-policy LIST   frag,best-fit,worst-fit (default: all three)\n"
           "  --shared-nodes F      share of GPU nodes whose GPUs are shareable (default 1)\n"
           "  --inflate-to F        stop when arrived GPUs reach F x capacity (default 1)\n"
           "  --inflate-step F      report every F x capacity (default 0.05)\n"
           "  --inflate-window W    report each step as the mean over the tasks that arrived\n"
           "                        within W/2 x capacity of it, as FGD's analysis does with\n"
           "                        W = 0.01 (default 0: the share when the step is reached)\n"
           "  --seed N              draws (default 0)\n"
           "  --inflate-in-order    no draws: the pods in file order, each once (to replay a\n"
           "                        sequence another simulator drew); steps not reached: n/a\n"
           "  --gpu-only            model GPUs only: no CPU or host memory, CPU-only pods skipped\n"
           "  --check               check the scheduler's invariants after every task\n");
}

static int ob_bad(const char *flag, const char *val, const char *why)
{
    fprintf(stderr, "corral sim: %s%s%s: %s\n", flag, val ? " " : "", val ? val : "", why);
    return 2;
}

static int ob_parse(int argc, char **argv, ob_args *a)
{
    memset(a, 0, sizeof *a);
    a->to = 1.0;
    a->step = 0.05;
    a->shared = 1.0;
    for (int i = 1; i < argc; i++) {
        const char *fl = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = strcmp(fl, "--inflate") && strcmp(fl, "--check") && strcmp(fl, "--help") &&
                     strcmp(fl, "--gpu-only") && strcmp(fl, "--inflate-in-order");
        if (takes && !v) {
            return ob_bad(fl, NULL, "needs a value");
        }
        int64_t i64;
        if (!strcmp(fl, "--help")) {
            ob_usage(stdout);
            return -1;
        } else if (!strcmp(fl, "--inflate")) {
            continue;
        } else if (!strcmp(fl, "--check")) {
            a->check = true;
            continue;
        } else if (!strcmp(fl, "--gpu-only")) {
            a->gpu_only = true;
            continue;
        } else if (!strcmp(fl, "--inflate-in-order")) {
            a->in_order = true;
            continue;
        } else if (!strcmp(fl, "--openb-nodes")) {
            a->nodes = v;
        } else if (!strcmp(fl, "--openb-pods")) {
            a->pods = v;
        } else if (!strcmp(fl, "--inflate-to")) {
            if (cr_parse_f64(v, 0.01, 100, &a->to) != 0) {
                return ob_bad(fl, v, "expected 0.01..100");
            }
        } else if (!strcmp(fl, "--inflate-step")) {
            if (cr_parse_f64(v, 0.001, 1, &a->step) != 0) {
                return ob_bad(fl, v, "expected 0.001..1");
            }
        } else if (!strcmp(fl, "--inflate-window")) {
            if (cr_parse_f64(v, 0, 1, &a->window) != 0) {
                return ob_bad(fl, v, "expected 0..1");
            }
        } else if (!strcmp(fl, "--shared-nodes")) {
            if (cr_parse_f64(v, 0, 1, &a->shared) != 0) {
                return ob_bad(fl, v, "expected 0..1");
            }
        } else if (!strcmp(fl, "--seed")) {
            if (cr_parse_i64(v, 0, INT64_MAX, &i64) != 0) {
                return ob_bad(fl, v, "expected an integer >= 0");
            }
            a->seed = (uint64_t)i64;
        } else if (!strcmp(fl, "--share-policy")) {
            char buf[128];
            snprintf(buf, sizeof buf, "%s", v);
            char *save = NULL;
            a->npol = 0;
            for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
                if (a->npol == OB_MAX_POLICIES ||
                    cr_sched_share_policy_parse(p, &a->pol[a->npol]) != 0) {
                    return ob_bad(fl, p, "expected up to 3 of frag, best-fit, worst-fit");
                }
                a->npol++;
            }
        } else {
            return ob_bad(fl, NULL, "unknown option with --inflate (see --inflate --help)");
        }
        i++;
    }
    if (!a->nodes || !a->pods) {
        return ob_bad("--inflate", NULL, "needs --openb-nodes and --openb-pods");
    }
    if (a->to / a->step > OB_MAX_STEPS) {
        return ob_bad("--inflate-step", NULL, "more than 1000 report steps");
    }
    if (a->npol == 0) {
        a->pol[0] = CR_SHARE_BEST_FIT;
        a->pol[1] = CR_SHARE_WORST_FIT;
        a->pol[2] = CR_SHARE_FRAG;
        a->npol = 3;
    }
    return 0;
}

/* One inflation run: unalloc[k] gets the unallocated share after step k. */
static int ob_run(const ob_input *in, const ob_args *a, cr_sched_share_policy pol, double *unalloc,
                  size_t nsteps, uint64_t *placed, uint64_t *dropped, char *err, size_t errlen)
{
    cr_sched_config cfg;
    cr_sched_config_default(&cfg, CR_SCHED_FIFO);
    cfg.share_policy = pol;
    cr_sched *s = NULL;
    int rc = cr_sched_new(&cfg, &s);
    if (rc != 0) {
        return rc;
    }
    int tenant = 0;
    cr_sched_tenant(s, "default", &tenant);
    for (int t = 0; t < in->ntypes; t++) {
        int id;
        cr_sched_gpu_type(s, in->types[t], &id);
    }
    double acc = 0;
    for (size_t i = 0; i < in->nnodes && rc == 0; i++) {
        cr_sched_gpu_spec g[CR_SCHED_MAX_NODE_GPUS];
        /* spread the shareable nodes evenly: node i is shared when the
         * running count of shared nodes steps up */
        double before = acc;
        acc += a->shared;
        bool share = (uint64_t)(acc + 1e-9) > (uint64_t)(before + 1e-9);
        for (uint32_t k = 0; k < in->nodes[i].gpus; k++) {
            g[k] = (cr_sched_gpu_spec){.type = in->nodes[i].type, .share = share};
        }
        cr_sched_node_spec ns = {.name = in->nodes[i].name,
                                 .gpu_count = in->nodes[i].gpus,
                                 .gpus = g,
                                 .cpu_milli = in->nodes[i].cpu_milli,
                                 .mem_bytes = in->nodes[i].mem_bytes};
        rc = cr_sched_node_add(s, &ns, NULL);
        if (rc != 0) {
            snprintf(err, errlen, "node %s: %s", in->nodes[i].name, cr_strerror(rc));
        }
    }
    cr_rng r;
    cr_rng_seed(&r, a->seed);
    double cap = (double)in->gpus * 1000.0, arrived = 0, alloc = 0;
    double tput[CR_SCHED_MAX_TYPES];
    uint64_t id = 0;
    size_t k = 0;
    *placed = *dropped = 0;
    /* --inflate-window: sums and counts per step */
    double *wsum = cr_calloc(nsteps + 1, sizeof(double));
    uint64_t *wcnt = cr_calloc(nsteps + 1, sizeof(uint64_t));
    double wend = ((double)nsteps * a->step + a->window / 2) * cap;
    for (size_t i = 0; i < nsteps; i++) {
        unalloc[i] = NAN; /* (not reached) */
    }
    size_t next = 0;
    while (rc == 0 && (k < nsteps || (a->window > 0 && arrived < wend))) {
        if (a->in_order && next == in->npods) {
            break; /* the list is used up */
        }
        const ob_pod *p = &in->pods[a->in_order ? next++ : cr_rng_below(&r, in->npods)];
        if (p->num_gpu == 0) {
            /* a CPU-only pod takes CPU and memory on a GPU node, as in FGD */
            uint32_t where;
            if (cr_sched_host_place(s, p->cpu_milli, p->mem_bytes, NULL, 0, &where) == 0) {
                (*placed)++;
            } else {
                (*dropped)++;
            }
            if (a->check && (rc = cr_sched_check(s, err, errlen)) != 0) {
                break;
            }
            continue;
        }
        for (int t = 0; t < CR_SCHED_MAX_TYPES; t++) {
            tput[t] = t < in->ntypes && (p->type_mask >> t & 1) ? 1.0 : 0.0;
        }
        cr_sched_job_spec j = {.id = ++id,
                               .tenant = tenant,
                               .gpu_count = p->num_gpu,
                               .gpu_type = CR_SCHED_TYPE_ANY,
                               .tput = tput,
                               .tput_count = CR_SCHED_MAX_TYPES,
                               .node_count = 1,
                               .gpu_milli = (uint16_t)p->milli,
                               .cpu_milli = p->cpu_milli,
                               .host_mem_bytes = p->mem_bytes};
        uint32_t ask = p->milli ? p->milli : p->num_gpu * 1000;
        rc = cr_sched_job_add(s, &j, 0);
        if (rc != 0) {
            snprintf(err, errlen, "task %" PRIu64 ": %s", id, cr_strerror(rc));
            break;
        }
        const cr_sched_decision *d;
        int nd = cr_sched_cycle(s, 0, NULL, &d);
        bool started = false;
        for (int i = 0; i < nd; i++) {
            started |= d[i].action == CR_SCHED_START && d[i].job == id;
        }
        if (started) {
            alloc += ask;
            (*placed)++;
        } else {
            cr_sched_job_remove(s, id, 0);
            (*dropped)++;
        }
        if (a->check && (rc = cr_sched_check(s, err, errlen)) != 0) {
            break;
        }
        arrived += ask;
        while (k < nsteps && arrived >= (double)(k + 1) * a->step * cap) {
            unalloc[k++] = 1.0 - alloc / cap;
        }
        if (a->window > 0) {
            double x = arrived / cap;
            long q = lround(x / a->step); /* the nearest step, q x step */
            if (q >= 1 && (size_t)q <= nsteps && fabs(x - (double)q * a->step) < a->window / 2) {
                wsum[q - 1] += 1.0 - alloc / cap;
                wcnt[q - 1]++;
            }
        }
    }
    for (size_t i = 0; rc == 0 && i < nsteps; i++) {
        if (wcnt[i]) {
            unalloc[i] = wsum[i] / (double)wcnt[i]; /* (none in the window: the value reached) */
        }
    }
    free(wsum);
    free(wcnt);
    cr_sched_free(s);
    return rc;
}

/*
 * Time-based replay (corral sim --openb-nodes N --openb-pods P): the nodes
 * become a cluster file, each GPU pod with creation and deletion times a
 * native job: it arrives at creation_time (relative to the first), runs for
 * deletion_time - scheduled_time (creation_time when not scheduled), asks
 * for num_gpu GPUs or gpu_milli of one; a gpu_spec naming one model of the
 * cluster becomes its type (several: any type). The normal engine replays
 * them, so every flag and report applies.
 */
int cr__sim_openb_load(const char *nodes_path, const char *pods_path, double shared,
                       cr__sim_workload *w, char **cluster_text, size_t *untimed, char *err,
                       size_t errlen)
{
    ob_input in;
    memset(&in, 0, sizeof in);
    int rc;
    *cluster_text = NULL;
    *untimed = 0;
    if ((rc = read_csv(nodes_path, &in, node_row, err, errlen)) != 0 ||
        (rc = read_csv(pods_path, &in, pod_row, err, errlen)) != 0) {
        goto out;
    }
    if (in.nnodes == 0) {
        snprintf(err, errlen, "%s: no GPU nodes", nodes_path);
        rc = CR_EPARSE;
        goto out;
    }
    cr_buf b;
    cr_buf_init(&b);
    for (int t = 0; t < in.ntypes; t++) {
        cr_buf_printf(&b, "gpu-type g%d name=\"%s\"\n", t, in.types[t]);
    }
    double acc = 0;
    for (size_t i = 0; i < in.nnodes; i++) {
        double before = acc; /* shareable nodes spread evenly, as --inflate */
        acc += shared;
        bool share = (uint64_t)(acc + 1e-9) > (uint64_t)(before + 1e-9);
        cr_buf_printf(&b, "node %s gpus=%uxg%d%s\n", in.nodes[i].name, in.nodes[i].gpus,
                      in.nodes[i].type, share ? " share=all" : "");
    }
    *cluster_text = cr_buf_take(&b);
    int64_t t0 = INT64_MAX;
    for (size_t i = 0; i < in.npods; i++) {
        if (in.pods[i].arrive_s >= 0 && in.pods[i].run_s > 0 && in.pods[i].arrive_s < t0) {
            t0 = in.pods[i].arrive_s;
        }
    }
    for (size_t i = 0; i < in.npods; i++) {
        const ob_pod *p = &in.pods[i];
        if (p->num_gpu == 0) {
            continue; /* CPU-only: the replay models GPUs only */
        }
        if (p->arrive_s < 0 || p->run_s <= 0) {
            (*untimed)++;
            continue;
        }
        cr__sim_job *j = cr__sim_workload_add(w);
        snprintf(j->name, sizeof j->name, "%s", p->name[0] ? p->name : "pod");
        if (!p->name[0]) {
            snprintf(j->name, sizeof j->name, "%zu", i);
        }
        j->gpu_count = (int)p->num_gpu;
        j->gpu_milli = (uint16_t)p->milli;
        j->submit_ns = (p->arrive_s - t0) * CR_NS_PER_SEC;
        j->work = (double)p->run_s;
        j->ref_rate = 1.0;
        j->preemptible = false; /* pods are not checkpointed */
        if (__builtin_popcount(p->type_mask) == 1) {
            int t = __builtin_ctz(p->type_mask);
            snprintf(j->type_name, sizeof j->type_name, "%.*s", CR_SIM_NAME_MAX - 1, in.types[t]);
        }
    }
    if (w->njobs == 0) {
        snprintf(err, errlen, "%s: no GPU pod has creation and deletion times to replay",
                 pods_path);
        rc = CR_EPARSE;
    }
out:
    free(in.nodes);
    free(in.pods);
    return rc;
}

int cr__sim_openb_parse(const char *nodes, size_t nlen, const char *pods, size_t plen,
                        size_t *ngpus, size_t *npods, char *err, size_t errlen)
{
    ob_input in;
    memset(&in, 0, sizeof in);
    int rc = parse_csv("nodes", nodes, nlen, &in, node_row, err, errlen);
    if (rc == 0) {
        rc = parse_csv("pods", pods, plen, &in, pod_row, err, errlen);
    }
    if (rc == 0) {
        *ngpus = (size_t)in.gpus;
        *npods = in.npods;
    }
    free(in.nodes);
    free(in.pods);
    return rc;
}

int cr__sim_inflate_main(int argc, char **argv)
{
    ob_args a;
    ob_input in;
    memset(&in, 0, sizeof in);
    double *un = NULL;
    char err[512] = "";
    int rc = ob_parse(argc, argv, &a);
    if (rc != 0) {
        return rc < 0 ? 0 : rc;
    }
    rc = 2;
    in.gpu_only = a.gpu_only;
    if (read_csv(a.nodes, &in, node_row, err, sizeof err) != 0 ||
        read_csv(a.pods, &in, pod_row, err, sizeof err) != 0) {
        fprintf(stderr, "corral sim: %s\n", err);
        goto out;
    }
    if (in.gpus == 0) {
        fprintf(stderr, "corral sim: %s: no GPU nodes\n", a.nodes);
        goto out;
    }
    if (in.npods == in.cpu_pods) {
        fprintf(stderr, "corral sim: %s: no GPU pods the cluster can run\n", a.pods);
        goto out;
    }
    size_t nsteps = (size_t)(a.to / a.step + 1e-9);
    un = cr_calloc(nsteps * (size_t)a.npol + 1, sizeof(double));
    uint64_t placed[OB_MAX_POLICIES], dropped[OB_MAX_POLICIES];
    for (int p = 0; p < a.npol; p++) {
        if (ob_run(&in, &a, a.pol[p], un + (size_t)p * nsteps, nsteps, &placed[p], &dropped[p], err,
                   sizeof err) != 0) {
            fprintf(stderr, "corral sim: inflate (%s): %s\n", cr_sched_share_policy_name(a.pol[p]),
                    err);
            rc = 1;
            goto out;
        }
    }
    size_t frac = 0;
    for (size_t i = 0; i < in.npods; i++) {
        frac += in.pods[i].milli > 0;
    }
    size_t ngpu_pods = in.npods - in.cpu_pods;
    printf("# openb inflate: %zu GPU nodes, %" PRIu64 " GPUs (%.0f%% of nodes shareable), %zu GPU "
           "pods (%.0f%% fractional; %zu CPU-only and %zu of unknown models skipped), seed %" PRIu64
           "\n",
           in.nnodes, in.gpus, a.shared * 100, ngpu_pods, 100.0 * (double)frac / (double)ngpu_pods,
           in.skipped_cpu, in.skipped_model, a.seed);
    if (in.cpu_pods || !a.gpu_only) {
        printf("# CPU and host memory %s; %zu CPU-only pods kept\n",
               a.gpu_only ? "not modelled" : "modelled where the files give them", in.cpu_pods);
    }
    printf("# unallocated GPU share (%% of capacity) vs arrived workload (%% of capacity)\n");
    printf("%-8s", "arrived");
    for (int p = 0; p < a.npol; p++) {
        printf(" %10s", cr_sched_share_policy_name(a.pol[p]));
    }
    printf("\n");
    for (size_t k = 0; k < nsteps; k++) {
        printf("%7.1f%%", (double)(k + 1) * a.step * 100);
        for (int p = 0; p < a.npol; p++) {
            double u = un[(size_t)p * nsteps + k];
            if (isnan(u)) {
                printf(" %10s", "n/a");
            } else {
                printf(" %9.2f%%", u * 100);
            }
        }
        printf("\n");
    }
    for (int p = 0; p < a.npol; p++) {
        printf("# %s: %" PRIu64 " tasks placed, %" PRIu64 " dropped\n",
               cr_sched_share_policy_name(a.pol[p]), placed[p], dropped[p]);
    }
    rc = 0;
out:
    free(in.nodes);
    free(in.pods);
    free(un);
    return rc;
}
