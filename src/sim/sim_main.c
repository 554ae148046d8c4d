/*
 * sim_main.c - 'corral sim': the command line of the simulator.
 *
 * Reads a trace (or generates a workload), builds the cluster, runs one
 * policy or several (--compare) through the scheduler core in virtual time
 * and writes the report. Bad flags and bad input files exit with code 2 and
 * a message naming the flag, or the file, line and field; a failure inside
 * the simulation exits 1. The output depends only on the input and the
 * seed: no wall-clock numbers are printed unless --timing is given, and
 * those go to stderr.
 */
#include "cr_sim.h"

#include "cr_config.h"
#include "sim_int.h"

#include "cr_alloc.h"
#include "cr_datadir.h"
#include "cr_error.h"
#include "cr_file.h"
#include "cr_opt.h"
#include "cr_parse.h"
#include "cr_perf.h"
#include "cr_sched.h"
#include "cr_time.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MAX_POLICIES 8

typedef struct args {
    const char *trace, *format, *tput_path, *cluster_path, *gpus, *csv, *html;
    const char *policies[MAX_POLICIES];
    size_t npolicies;
    int64_t generate;
    double rate;
    bool multi_gpu, json, timing, compare;
    int64_t tenants, gpn, npr;
    cr__sim_opts o;
    cr__sim_report_opts ro;
    const char *power;
    const char *openb_nodes, *openb_pods; /* time-based replay of openb files */
    double shared;                        /* --shared-nodes with them */
    int learn;                            /* --learn 1, --no-learn 0 (the default) */
    double spread;                        /* --truth-spread */
    const char *cloud;                    /* --cloud TYPE:NODES, NULL none */
    int64_t cloud_gpn;                    /* --cloud-gpus-per-node (0: --gpus-per-node) */
    double cloud_cost, static_cost;       /* per GPU-hour */
} args;

static int bad_flag(const char *flag, const char *val, const char *why)
{
    fprintf(stderr, "corral sim: %s%s%s: %s\n", flag, val ? " " : "", val ? val : "", why);
    return 2;
}

#define A(m)   offsetof(args, m)
#define DAY_NS (24 * CR_NS_PER_H)

/*
 * Every flag of 'corral sim', in --help order (docs/sim.md lists the same
 * flags: tests/common holds them against each other). CR_OPT_CUSTOM rows
 * are parsed in parse_args; the others set their member of args.
 */
static const cr_opt sim_opts[] = {
    {NULL, NULL, CR_OPT_NOTE, 0, 0, 0, 0, 0, NULL, "Input:", NULL, false},
    {"TRACE", NULL, CR_OPT_NOTE, 0, 0, 0, 0, 0, NULL,
     "Gavel .trace, Tiresias .csv, or native (one job per line)", NULL, false},
    {"--format", NULL, CR_OPT_CUSTOM, 0, 0, 0, 0, 0, "F",
     "gavel | tiresias | native (default: from the file name)", NULL, false},
    {"--generate", NULL, CR_OPT_I64, A(generate), 1, 10000000, 0, 0, "N",
     "generate N jobs instead (Gavel-style Philly mix)", "expected a job count 1..10000000", false},
    {"--rate", NULL, CR_OPT_F64, A(rate), 0, 0, 0, 1e9, "R",
     "Poisson arrivals, jobs per hour (with --generate; 0 = all at t=0)",
     "expected jobs per hour >= 0", false},
    {"--multi-gpu", NULL, CR_OPT_BOOL, A(multi_gpu), 0, 0, 0, 0, NULL,
     "generated jobs use 1/2/4/8 GPUs (Philly), else 1", NULL, false},
    {"--tenants", NULL, CR_OPT_I64, A(tenants), 1, 64, 0, 0, "N",
     "generated jobs spread over N tenants (default 1)", "expected 1..64", false},
    {"--throughputs", NULL, CR_OPT_STR, A(tput_path), 0, 0, 0, 0, "FILE",
     "Gavel simulation_throughputs.json: job rates per GPU type\n"
     "('none': no table; generated jobs get plain durations)",
     NULL, false},
    {NULL, NULL, CR_OPT_NOTE, 0, 0, 0, 0, 0, NULL, "Cluster:", NULL, false},
    {"--cluster", NULL, CR_OPT_STR, A(cluster_path), 0, 0, 0, 0, "FILE",
     "cluster file (docs/scheduler.md)", NULL, false},
    {"--gpus", NULL, CR_OPT_STR, A(gpus), 0, 0, 0, 0, "T:N,...",
     "or GPU types and counts (default v100:36,p100:36,k80:36)", NULL, false},
    {"--gpus-per-node", NULL, CR_OPT_I64, A(gpn), 1, CR_SCHED_MAX_NODE_GPUS, 0, 0, "N",
     "with --gpus (default 4)", "expected 1..64", false},
    {"--nodes-per-rack", NULL, CR_OPT_I64, A(npr), 1, 100000, 0, 0, "N", "with --gpus (default 32)",
     "expected 1..100000", false},
    {"--mtbf", NULL, CR_OPT_DUR, A(o.mtbf_ns), 1, INT64_MAX, 0, 0, "DUR",
     "node failures: mean time between failures per node",
     "expected a duration > 0 (90s, 40m, 2h, 7d)", false},
    {"--mttr", NULL, CR_OPT_DUR, A(o.mttr_ns), 1, INT64_MAX, 0, 0, "DUR",
     "time a failed node stays down (default 1h)", "expected a duration > 0 (90s, 40m, 2h, 7d)",
     false},
    {"--power", NULL, CR_OPT_STR, A(power), 0, 0, 0, 0, "T=W,...",
     "busy power per GPU type in watts (idle: 20%)", NULL, false},
    {"--cloud", NULL, CR_OPT_CUSTOM, 0, 0, 0, 0, 0, "T:N",
     "an elastic cloud pool of up to N nodes of GPU type T beside the cluster:\n"
     "runs the static cluster, it with the pool, and it with always-on cloud\n"
     "GPUs of the pool's spend, side by side (docs/sim.md \"Elastic pools\")",
     NULL, false},
    {"--cloud-gpus-per-node", NULL, CR_OPT_I64, A(cloud_gpn), 1, CR_SCHED_MAX_NODE_GPUS, 0, 0, "N",
     "GPUs per cloud node (default: --gpus-per-node)", "expected 1..64", false},
    {"--cloud-boot", NULL, CR_OPT_DUR, A(o.cloud_boot_ns), 0, 24 * CR_NS_PER_H, 0, 0, "DUR",
     "a cloud node's boot time (default 90s)", "expected a duration 0..24h (90s, 5m)", false},
    {"--cloud-idle", NULL, CR_OPT_DUR, A(o.cloud_idle_ns), 1, 30 * DAY_NS, 0, 0, "DUR",
     "an idle cloud node is given back after this (default 5m)",
     "expected a duration 1s..30d (300s, 1h)", false},
    {"--cloud-pending", NULL, CR_OPT_DUR, A(o.cloud_pending_ns), 0, DAY_NS, 0, 0, "DUR",
     "a job pending this long is the pool's demand (default 10s)",
     "expected a duration 0..24h (10s, 1m)", false},
    {"--cloud-cost", NULL, CR_OPT_F64, A(cloud_cost), 0, 0, 0, 1e6, "X",
     "price of a cloud GPU-hour (default 3.0)", "expected a price 0..1000000", false},
    {"--static-cost", NULL, CR_OPT_F64, A(static_cost), 0, 0, 0, 1e6, "X",
     "cost of a static GPU-hour, owned and amortised (default 1.0)", "expected a price 0..1000000",
     false},
    {NULL, NULL, CR_OPT_NOTE, 0, 0, 0, 0, 0, NULL, "Scheduling:", NULL, false},
    {"--policy", NULL, CR_OPT_CUSTOM, 0, 0, 0, 0, 0, "P",
     "fifo | priority | hetero | las | rounds (default fifo)", NULL, false},
    {"--compare", NULL, CR_OPT_CUSTOM, 0, 0, 0, 0, 0, "P1,P2,...",
     "run several policies on the same input, side by side", NULL, false},
    {"--seed", NULL, CR_OPT_U64, A(o.seed), 0, INT64_MAX, 0, 0, "N",
     "RNG seed for generation, tie-breaks, failures (default 0)", "expected an integer >= 0",
     false},
    {"--no-backfill", NULL, CR_OPT_SET, A(o.backfill), 0, 0, 0, 0, NULL, "no EASY backfill", NULL,
     false},
    {"--no-preemption", NULL, CR_OPT_SET, A(o.preemption), 0, 0, 0, 0, NULL, "no preemption", NULL,
     false},
    {"--hetero-lp", NULL, CR_OPT_SET, A(o.lp), 1, 0, 0, 0, NULL, "hetero: place by the GLPK LP",
     NULL, false},
    {"--hetero-greedy", NULL, CR_OPT_SET, A(o.lp), 0, 0, 0, 0, NULL,
     "hetero: place greedily, no LP", NULL, false},
    {"--no-estimates", NULL, CR_OPT_SETB, A(o.estimates), 0, 0, 0, 0, NULL,
     "do not tell the scheduler job runtimes (no backfill help)", NULL, false},
    {"--learn", NULL, CR_OPT_SET, A(learn), 1, 0, 0, 0, NULL,
     "each finished training job reports its tokens/s; later jobs of its class are\n"
     "scheduled on what was learned. Runs each policy without and with learning, side by\n"
     "side (docs/sim.md)",
     NULL, false},
    {"--no-learn", NULL, CR_OPT_SET, A(learn), 0, 0, 0, 0, NULL, "the model alone (the default)",
     NULL, false},
    {"--truth-spread", NULL, CR_OPT_F64, A(spread), 0, 0, 0, 0.9, "F",
     "true rates = model x U(1-F, 1+F) per class and GPU type, from --seed (native\n"
     "truth=X per job overrides; default 0)",
     "expected a share 0..0.9 (0.4: true rates model x 0.6..1.4)", false},
    {"--metric-noise", NULL, CR_OPT_F64, A(o.metric_noise), 0, 0, 0, 0.5, "F",
     "run-to-run spread of the reported tokens/s (default 0.03)",
     "expected a share 0..0.5 (0.03: +-3% run to run)", false},
    {"--no-wait-for-faster", NULL, CR_OPT_SET, A(o.wait_faster), 0, 0, 0, 0, NULL,
     "start auto jobs on any free type (no wait-or-start)", NULL, false},
    {"--max-examined", NULL, CR_OPT_U32, A(o.max_examined), 0, UINT32_MAX, 0, 0, "N",
     "examine at most N pending jobs per cycle (default 0: all)",
     "expected an integer >= 0 (0 = no cap)", false},
    {"--interval", NULL, CR_OPT_DUR, A(o.interval_ns), 1, INT64_MAX, 0, 0, "DUR",
     "at most one scheduling cycle per DUR (default: every event)",
     "expected a duration > 0 (90s, 40m, 2h, 7d)", false},
    {"--round", NULL, CR_OPT_DUR, A(o.round_ns), 1, 30 * CR_NS_PER_H, 0, 0, "DUR",
     "rounds: round length (default 6m, Gavel's)", "expected a duration in 1s..30h (360s, 6m)",
     false},
    {"--switch", NULL, CR_OPT_DUR, A(o.switch_ns), 0, 30 * CR_NS_PER_H, 0, 0, "DUR",
     "rounds: suspend/resume (and migration) cost (default 10s)",
     "expected a duration in 0s..30h (10s, 0s)", false},
    {"--no-migrate", NULL, CR_OPT_BOOL, A(o.no_migrate), 0, 0, 0, 0, NULL,
     "rounds: no mid-round move of a running job to a faster type", NULL, false},
    {"--no-spread", NULL, CR_OPT_BOOL, A(o.no_spread), 0, 0, 0, 0, NULL,
     "rounds: plain max-min LP (no second stage for spare capacity)", NULL, false},
    {"--no-drain-guard", NULL, CR_OPT_BOOL, A(o.no_drain_guard), 0, 0, 0, 0, NULL,
     "rounds: no precedence for jobs that would set the makespan", NULL, false},
    {"--fair-order", NULL, CR_OPT_BOOL, A(o.fair_order), 0, 0, 0, 0, NULL,
     "rounds: hand out GPUs by owed time share, not by estimated time to finish (the "
     "default without --no-estimates)",
     NULL, false},
    {"--share-window", NULL, CR_OPT_DUR, A(o.share_window_ns), 1, 365 * DAY_NS, 0, 0, "DUR",
     "rounds: window of the time-received accounting (default: a round)",
     "expected a duration in 1s..365d (6m, 1h)", false},
    {"--share-policy", NULL, CR_OPT_CUSTOM, 0, 0, 0, 0, 0, "P",
     "fractional tasks: frag | best-fit | worst-fit (default frag)", NULL, false},
    {"--mig-reconfig", NULL, CR_OPT_DUR, A(o.mig_reconfig_ns), 0, 3600 * CR_NS_PER_SEC, 0, 0, "DUR",
     "a MIG job whose start repartitions a dynamic MIG GPU waits\n"
     "this long first (default 10s; docs/sim.md)",
     "expected a duration 0..1h (0, 10s, 2m)", false},
    {"--check", NULL, CR_OPT_BOOL, A(o.check), 0, 0, 0, 0, NULL,
     "check the scheduler's invariants after every event", NULL, false},
    {"--inflate", NULL, CR_OPT_NOTE, 0, 0, 0, 0, 0, "...",
     "fill a cluster from an Alibaba openb trace (--inflate --help)", NULL, false},
    {"--openb-nodes", NULL, CR_OPT_STR, A(openb_nodes), 0, 0, 0, 0, "FILE",
     "with --openb-pods, replay an Alibaba openb trace in time instead\n"
     "of TRACE: the nodes are the cluster, GPU pods arrive at creation_time\n"
     "and run until deletion_time (fractional pods share GPUs)",
     NULL, false},
    {"--openb-pods", NULL, CR_OPT_STR, A(openb_pods), 0, 0, 0, 0, "FILE", "the pods of that trace",
     NULL, false},
    {"--shared-nodes", NULL, CR_OPT_F64, A(shared), 0, 0, 0, 1, "F",
     "with them: that share of the nodes shareable (default 0)",
     "expected a share of the nodes 0..1", false},
    {NULL, NULL, CR_OPT_NOTE, 0, 0, 0, 0, 0, NULL, "Report:", NULL, false},
    {"--window", NULL, CR_OPT_CUSTOM, 0, 0, 0, 0, 0, "LO:HI",
     "JCT statistics over jobs LO..HI-1 in arrival order", NULL, false},
    {"--json", NULL, CR_OPT_BOOL, A(json), 0, 0, 0, 0, NULL, "JSON on stdout instead of the table",
     NULL, false},
    {"--csv", NULL, CR_OPT_STR, A(csv), 0, 0, 0, 0, "FILE", "one row per job (and policy)", NULL,
     false},
    {"--html", NULL, CR_OPT_STR, A(html), 0, 0, 0, 0, "FILE", "HTML report with SVG plots", NULL,
     false},
    {"--timing", NULL, CR_OPT_BOOL, A(timing), 0, 0, 0, 0, NULL,
     "print host time per run on stderr", NULL, false},
};
#define SIM_NOPTS (sizeof sim_opts / sizeof sim_opts[0])

static void usage(FILE *f)
{
    fputs("usage: corral sim [options] [TRACE]\n"
          "\n"
          "Replay a trace (or a generated workload) through the scheduler in virtual time.\n"
          "\n",
          f);
    cr_opt_help(f, sim_opts, SIM_NOPTS, 23);
}

/* The flags the table leaves to parse_args: --format, --policy and
 * --compare, --share-policy, --window, --cloud. Returns 0 or bad_flag's 2. */
static int flag_custom(args *a, const char *flag, const char *val, char **policy_buf)
{
    if (!strcmp(flag, "--cloud")) {
        const char *colon = strrchr(val, ':');
        int64_t n;
        if (!colon || colon == val || (size_t)(colon - val) >= CR_SIM_NAME_MAX ||
            cr_parse_i64(colon + 1, 1, 100000, &n) != 0) {
            return bad_flag(flag, val, "expected TYPE:NODES (NODES 1..100000), e.g. v100:16");
        }
        a->cloud = val;
    } else if (!strcmp(flag, "--format")) {
        if (strcmp(val, "gavel") && strcmp(val, "tiresias") && strcmp(val, "native")) {
            return bad_flag(flag, val, "expected gavel, tiresias or native");
        }
        a->format = val;
    } else if (!strcmp(flag, "--policy") || !strcmp(flag, "--compare")) {
        free(*policy_buf);
        *policy_buf = cr_strdup(val);
        a->npolicies = 0;
        a->compare = flag[2] == 'c';
        char *save = NULL;
        for (char *p = strtok_r(*policy_buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
            cr_sched_policy pol;
            if (strcmp(p, "rounds") != 0 && cr_sched_policy_parse(p, &pol) != 0) {
                return bad_flag(flag, p, "unknown policy (fifo, priority, hetero, las, rounds)");
            }
            if (a->npolicies == MAX_POLICIES) {
                return bad_flag(flag, val, "at most 8 policies");
            }
            a->policies[a->npolicies++] = p;
        }
        if (a->npolicies == 0 || (!a->compare && a->npolicies != 1)) {
            return bad_flag(flag, val, "expected one policy (use --compare for several)");
        }
    } else if (!strcmp(flag, "--share-policy")) {
        cr_sched_share_policy sp;
        if (cr_sched_share_policy_parse(val, &sp) != 0) {
            return bad_flag(flag, val, "expected frag, best-fit or worst-fit");
        }
        a->o.share_policy = (int)sp;
    } else { /* --window */
        char tmp[64];
        snprintf(tmp, sizeof tmp, "%s", val);
        char *colon = strchr(tmp, ':');
        int64_t lo, hi;
        if (!colon) {
            return bad_flag(flag, val, "expected LO:HI");
        }
        *colon = '\0';
        if (cr_parse_i64(tmp, 0, INT64_MAX, &lo) != 0 ||
            cr_parse_i64(colon + 1, 1, INT64_MAX, &hi) != 0 || hi <= lo) {
            return bad_flag(flag, val, "expected LO:HI with 0 <= LO < HI");
        }
        a->ro.window_lo = (size_t)lo;
        a->ro.window_hi = (size_t)hi;
    }
    return 0;
}

static int parse_args(int argc, char **argv, args *a, char **policy_buf)
{
    memset(a, 0, sizeof *a);
    a->o.backfill = a->o.preemption = a->o.lp = a->o.wait_faster = -1;
    a->o.estimates = true;
    a->o.mttr_ns = CR_NS_PER_H;
    a->o.idle_frac = 0.2;
    a->o.switch_ns = -1;                       /* rounds: CR_SIM_SWITCH_DEFAULT_NS */
    a->o.mig_reconfig_ns = 10 * CR_NS_PER_SEC; /* an assumption: docs/sim.md */
    a->o.metric_noise = 0.03;                  /* an assumption: docs/sim.md "Learning" */
    a->gpn = 4;
    a->npr = 32;
    a->tenants = 1;
    a->rate = -1;
    a->policies[0] = "fifo";
    a->npolicies = 1;
    a->o.cloud_boot_ns = 90 * CR_NS_PER_SEC;    /* the docs' example boot_s */
    a->o.cloud_idle_ns = 300 * CR_NS_PER_SEC;   /* a pool's default idle_s */
    a->o.cloud_pending_ns = 10 * CR_NS_PER_SEC; /* a pool's default pending_s */
    a->cloud_cost = 3.0;                        /* assumptions: docs/sim.md "Elastic pools" */
    a->static_cost = 1.0;
    for (int i = 1; i < argc; i++) {
        char *arg = argv[i];
        char *val = NULL;
        char flag[64];
        if (strncmp(arg, "--", 2) != 0) {
            if (a->trace) {
                return bad_flag(arg, NULL, "only one trace file");
            }
            a->trace = arg;
            continue;
        }
        snprintf(flag, sizeof flag, "%s", arg);
        char *eq = strchr(flag, '=');
        if (eq) {
            *eq = '\0';
            val = arg + (eq - flag) + 1;
        }
        if (!strcmp(flag, "--help") || !strcmp(flag, "--h")) {
            usage(stdout);
            return -1;
        }
        const cr_opt *o = cr_opt_by_flag(sim_opts, SIM_NOPTS, flag);
        if (!o) {
            return bad_flag(flag, NULL, "unknown option (see corral sim --help)");
        }
        bool needs = cr_opt_wants_value(o);
        if (needs && !val) {
            if (i + 1 >= argc) {
                return bad_flag(flag, NULL, "needs a value");
            }
            val = argv[++i];
        } else if (!needs && val) {
            return bad_flag(flag, NULL, "takes no value");
        }
        char why[128];
        int rc = cr_opt_set_flag(o, a, val, why, sizeof why);
        if (rc == CR_ENOTSUP) {
            if ((rc = flag_custom(a, flag, val, policy_buf)) != 0) {
                return rc;
            }
        } else if (rc != 0) {
            return bad_flag(flag, val, why);
        }
    }
    if (!a->openb_nodes != !a->openb_pods) {
        return bad_flag(a->openb_nodes ? "--openb-pods" : "--openb-nodes", NULL,
                        "replaying openb files needs both --openb-nodes and --openb-pods");
    }
    if (a->openb_nodes && (a->trace || a->generate || a->cluster_path || a->gpus)) {
        return bad_flag("--openb-pods", NULL,
                        "the openb files are the workload and the cluster: no TRACE, "
                        "--generate, --cluster or --gpus with them");
    }
    if (!a->openb_nodes && a->shared > 0) {
        return bad_flag("--shared-nodes", NULL, "only with --openb-nodes/--openb-pods");
    }
    if (!a->trace && !a->generate && !a->openb_nodes) {
        return bad_flag("TRACE", NULL, "give a trace file or --generate N");
    }
    if (a->trace && a->generate) {
        return bad_flag("--generate", NULL, "give a trace file or --generate N, not both");
    }
    if (a->rate >= 0 && !a->generate) {
        return bad_flag("--rate", NULL, "only with --generate");
    }
    for (size_t k = 0; k < a->npolicies; k++) {
        if (!strcmp(a->policies[k], "rounds") && a->o.mtbf_ns > 0) {
            return bad_flag("--mtbf", NULL, "not simulated under the rounds policy");
        }
        if (!strcmp(a->policies[k], "rounds") && a->learn) {
            return bad_flag("--learn", NULL, "not simulated under the rounds policy yet");
        }
    }
    if (a->learn && a->npolicies * 2 > MAX_POLICIES) {
        return bad_flag("--learn", NULL, "at most 4 policies with --learn (each runs twice)");
    }
    if (a->cluster_path && a->gpus) {
        return bad_flag("--cluster", NULL, "give --cluster or --gpus, not both");
    }
    if (a->cloud && (a->compare || a->learn || a->json || a->csv || a->html || a->o.mtbf_ns > 0 ||
                     !strcmp(a->policies[0], "rounds"))) {
        return bad_flag("--cloud", NULL,
                        "prints its own comparison of one policy (not rounds): no --compare, "
                        "--learn, --json, --csv, --html or --mtbf with it");
    }
    if (!a->cloud && (a->cloud_gpn || a->cloud_cost != 3.0 || a->static_cost != 1.0)) {
        return bad_flag(a->cloud_gpn           ? "--cloud-gpus-per-node"
                        : a->cloud_cost != 3.0 ? "--cloud-cost"
                                               : "--static-cost",
                        NULL, "only with --cloud");
    }
    if (a->ro.window_hi && a->generate && (size_t)a->ro.window_lo >= (size_t)a->generate) {
        return bad_flag("--window", NULL, "starts after the last generated job");
    }
    return 0;
}

static int apply_power(args *a, const char (*types)[CR_SIM_NAME_MAX], int ntypes,
                       const cr_catalog *catalog)
{
    for (int t = 0; t < ntypes; t++) {
        const cr_gpu_type *g = catalog ? cr_catalog_find(catalog, types[t]) : NULL;
        a->o.power_w[t] = (g && g->tdp_w > 0) ? g->tdp_w : cr__sim_default_power_w(types[t]);
    }
    if (!a->power) {
        return 0;
    }
    char *copy = cr_strdup(a->power);
    int rc = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        double w;
        if (!eq || cr_parse_f64(eq + 1, 0, 100000, &w) != 0) {
            rc = bad_flag("--power", item, "expected TYPE=WATTS");
            goto out;
        }
        *eq = '\0';
        int found = -1;
        for (int t = 0; t < ntypes; t++) {
            if (strcasecmp(types[t], item) == 0) {
                found = t;
            }
        }
        if (found < 0) {
            rc = bad_flag("--power", item, "no such GPU type in the cluster");
            goto out;
        }
        a->o.power_w[found] = w;
    }
out:
    free(copy);
    return rc;
}

/* One run of --cloud's comparison; 0 or the exit code (reported). */
static int cloud_run(args *a, const cr__sim_cluster *cl, const cr__sim_workload *w, bool pool,
                     cr__sim_result *res, char *err, size_t errlen)
{
    cr__sim_opts o = a->o;
    o.cloud = pool;
    int run_rc;
    cr_sched_policy pol;
    cr_sched_policy_parse(a->policies[0], &pol);
    o.policy = pol;
    run_rc = cr__sim_run(&o, cl, w, res, err, errlen);
    if (run_rc != 0) {
        fprintf(stderr, "corral sim: --cloud: %s\n", err);
        return run_rc == CR_EINVAL ? 2 : 1;
    }
    if (a->timing) {
        fprintf(stderr, "corral sim: %s: %zu jobs, %llu events in %.3f s\n", res->policy, w->njobs,
                (unsigned long long)res->events, res->wall_s);
    }
    return 0;
}

/*
 * --cloud: the static cluster alone; with the elastic pool (booted from
 * demand, given back when idle); and with as many always-on cloud GPUs
 * as the pool bought on average over its run (the static cluster of the
 * same budget: the pool's spend on fixed capacity). Cost: the static GPUs
 * for the run's length at --static-cost, the cloud GPU-hours at
 * --cloud-cost.
 */
static int run_cloud(args *a, cr__sim_cluster *cl, const cr__sim_workload *w, char *err,
                     size_t errlen)
{
    cr__sim_result res[3];
    memset(res, 0, sizeof res);
    int nodes = cl->cloud_nodes, rc;
    cl->cloud_nodes = 0;
    rc = cloud_run(a, cl, w, false, &res[0], err, errlen);
    cl->cloud_nodes = nodes;
    if (rc == 0) {
        rc = cloud_run(a, cl, w, true, &res[1], err, errlen);
    }
    uint32_t static_gpus = 0;
    for (int t = 0; t < res[0].ntypes; t++) {
        static_gpus += res[0].type_gpus[t];
    }
    double span1_h = (double)(res[1].t_end_ns - res[1].t0_ns) / 3.6e12;
    double avg_cloud = span1_h > 0 ? res[1].cloud_gpu_ns / 3.6e12 / span1_h : 0;
    int extra = (int)(avg_cloud + 0.5); /* GPUs */
    if (rc == 0) {
        cl->cloud_nodes = (extra + cl->cloud_gpn - 1) / cl->cloud_gpn;
        cl->cloud_gpus = extra;
        cl->cloud_always = true;
        rc = cloud_run(a, cl, w, false, &res[2], err, errlen); /* (extra 0: the static one) */
        cl->cloud_always = false;
        cl->cloud_gpus = 0;
        cl->cloud_nodes = nodes;
    }
    if (rc == 0) {
        cr__sim_report_opts ro = a->ro;
        const char *names[3] = {"static", "static + cloud pool", "static + same budget"};
        char gpus[3][64];
        snprintf(gpus[0], sizeof gpus[0], "%u", static_gpus);
        snprintf(gpus[1], sizeof gpus[1], "%u + 0..%d %s", static_gpus, nodes * cl->cloud_gpn,
                 cl->cloud_name);
        snprintf(gpus[2], sizeof gpus[2], "%u + %d %s", static_gpus, extra, cl->cloud_name);
        printf("cloud pool: up to %d node(s) of %d %s, boot %.0fs, idle %.0fs, pending %.0fs; "
               "cloud %.2f, static %.2f a GPU-hour; policy %s\n\n",
               nodes, cl->cloud_gpn, cl->cloud_name, (double)a->o.cloud_boot_ns / 1e9,
               (double)a->o.cloud_idle_ns / 1e9, (double)a->o.cloud_pending_ns / 1e9, a->cloud_cost,
               a->static_cost, a->policies[0]);
        printf("%-22s %-22s %9s %9s %9s %8s %9s %9s %9s %9s\n", "cluster", "GPUs", "finished",
               "cost", "cloud_GPUh", "boots", "avg_JCT_h", "avg_q_h", "p95_q_h", "span_h");
        for (int k = 0; k < 3; k++) {
            cr__sim_summary s;
            cr__sim_summarize(&res[k], w, &ro, &s);
            double span_h = (double)(res[k].t_end_ns - res[k].t0_ns) / 3.6e12;
            double cloud_h = res[k].cloud_gpu_ns / 3.6e12;
            double cost = static_gpus * span_h * a->static_cost + cloud_h * a->cloud_cost;
            char fin[32];
            snprintf(fin, sizeof fin, "%zu/%zu", s.finished, s.jobs);
            printf("%-22s %-22s %9s %9.1f %10.1f %8llu %9.2f %9.2f %9.2f %9.2f\n", names[k],
                   gpus[k], fin, cost, cloud_h, (unsigned long long)res[k].cloud_boots,
                   s.jct_avg / 3600, s.queue_avg / 3600, s.queue_p95 / 3600, span_h);
        }
    }
    for (int k = 0; k < 3; k++) {
        cr__sim_result_fini(&res[k]);
    }
    return rc;
}

int cr_sim_main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--inflate")) {
            return cr__sim_inflate_main(argc, argv);
        }
    }
    args a;
    char *policy_buf = NULL, *cluster_text = NULL, *json = NULL;
    cr__sim_tput tput = {0};
    cr_catalog *catalog = NULL;
    bool have_tput = false;
    cr__sim_workload w;
    cr__sim_workload_init(&w);
    cr__sim_result res[MAX_POLICIES];
    size_t nres = 0;
    cr__sim_cluster cl;
    memset(&cl, 0, sizeof cl);
    char err[512];
    err[0] = '\0';
    int rc = parse_args(argc, argv, &a, &policy_buf);
    if (rc != 0) {
        rc = rc < 0 ? 0 : rc;
        goto out;
    }
    rc = 2;
    /* Cluster. */
    size_t untimed = 0;
    if (a.openb_nodes) {
        if (cr__sim_openb_load(a.openb_nodes, a.openb_pods, a.shared, &w, &cluster_text, &untimed,
                               err, sizeof err) != 0) {
            fprintf(stderr, "corral sim: %s\n", err);
            goto out;
        }
        cl.file_path = a.openb_nodes;
        cl.file_text = cluster_text;
        cl.file_len = strlen(cluster_text);
        if (untimed) {
            fprintf(stderr, "corral sim: %zu GPU pods without creation/deletion times skipped\n",
                    untimed);
        }
    } else if (a.cluster_path) {
        size_t len = 0;
        if (cr_file_read(a.cluster_path, (size_t)256 << 20, &cluster_text, &len) != 0) {
            fprintf(stderr, "corral sim: --cluster: %s: cannot read\n", a.cluster_path);
            goto out;
        }
        cl.file_path = a.cluster_path;
        cl.file_text = cluster_text;
        cl.file_len = len;
    } else if (cr__sim_cluster_parse_gpus(&cl, a.gpus ? a.gpus : "v100:36,p100:36,k80:36", err,
                                          sizeof err) != 0) {
        fprintf(stderr, "corral sim: %s\n", err);
        goto out;
    }
    cl.gpus_per_node = (int)a.gpn;
    cl.nodes_per_rack = (int)a.npr;
    if (a.cloud) {
        const char *colon = strrchr(a.cloud, ':');
        snprintf(cl.cloud_name, sizeof cl.cloud_name, "%.*s", (int)(colon - a.cloud), a.cloud);
        cl.cloud_nodes = atoi(colon + 1);
        cl.cloud_gpn = (int)(a.cloud_gpn ? a.cloud_gpn : a.gpn);
    }
    char types[CR_SIM_MAX_TYPES][CR_SIM_NAME_MAX];
    int ntypes = 0;
    if (cr__sim_cluster_types(&cl, types, &ntypes, err, sizeof err) != 0) {
        fprintf(stderr, "corral sim: %s%s\n", a.cluster_path ? "--cluster: " : "", err);
        goto out;
    }
    /* Throughputs: explicit ("none": no table), or else the copy under
     * $CORRAL_DATA (default: the source tree's data/) for Gavel input. A
     * generated workload uses that default table only when it knows every
     * GPU type of the cluster; otherwise its jobs get plain durations. */
    bool tput_none = a.tput_path && !strcmp(a.tput_path, "none");
    const char *tput_path = tput_none ? NULL : a.tput_path;
    char default_tput[1024];
    cr_data_path("traces/gavel/simulation_throughputs.json", default_tput, sizeof default_tput);
    bool gavel_input =
        (a.format && !strcmp(a.format, "gavel")) ||
        (a.trace && strlen(a.trace) > 6 && !strcmp(a.trace + strlen(a.trace) - 6, ".trace"));
    bool implicit = false;
    if (!tput_path && !tput_none && (gavel_input || a.generate) &&
        access(default_tput, R_OK) == 0) {
        tput_path = default_tput;
        implicit = true;
    }
    if (tput_path) {
        if (cr__sim_tput_load(tput_path, &tput, err, sizeof err) != 0) {
            fprintf(stderr, "corral sim: --throughputs: %s\n", err);
            goto out;
        }
        have_tput = true;
    }
    if (have_tput && implicit && a.generate) {
        for (int k = 0; k < ntypes && have_tput; k++) {
            if (cr__sim_tput_type(&tput, types[k]) < 0) {
                cr__sim_tput_fini(&tput);
                have_tput = false;
            }
        }
    }
    if (a.generate) {
        cr__sim_gen g = {.njobs = (size_t)a.generate,
                         .jobs_per_hour = a.rate < 0 ? 0 : a.rate,
                         .seed = a.o.seed,
                         .multi_gpu = a.multi_gpu,
                         .ntenants = (int)a.tenants,
                         .tput = have_tput ? &tput : NULL};
        if (cr__sim_generate(&g, &w) != 0) {
            fprintf(stderr, "corral sim: --generate: the throughput table has no model for "
                            "some GPU count\n");
            goto out;
        }
    } else if (a.openb_nodes) {
        /* read with the cluster above */
    } else if (cr__sim_read_file(a.trace, a.format, &w, err, sizeof err) != 0) {
        fprintf(stderr, "corral sim: %s\n", err);
        goto out;
    }
    cr__sim_workload_sort(&w);
    if (a.ro.window_hi && a.ro.window_lo >= w.njobs) {
        fprintf(stderr, "corral sim: --window: starts at job %zu, the workload has %zu jobs\n",
                a.ro.window_lo, w.njobs);
        goto out;
    }
    /* The GPU catalog gives board power and feeds the performance model; a
     * run without it falls back to built-in powers. */
    if (cr_catalog_load(NULL, &catalog, NULL, 0) != 0) {
        catalog = NULL;
    }
    if (cr__sim_workload_resolve(&w, (const char(*)[CR_SIM_NAME_MAX])types, ntypes,
                                 have_tput ? &tput : NULL, catalog, err, sizeof err) != 0) {
        fprintf(stderr, "corral sim: %s%s\n", err,
                have_tput ? "" : " (Gavel traces need --throughputs)");
        goto out;
    }
    cr__sim_workload_perturb(&w, (const char(*)[CR_SIM_NAME_MAX])types, ntypes, a.spread, a.o.seed);
    if ((rc = apply_power(&a, (const char(*)[CR_SIM_NAME_MAX])types, ntypes, catalog)) != 0) {
        goto out;
    }
    rc = 1;
    if (a.cloud) {
        rc = run_cloud(&a, &cl, &w, err, sizeof err);
        goto out;
    }
    /* --learn: each policy without, then with learning, side by side. */
    size_t nruns = a.npolicies * (a.learn ? 2 : 1);
    for (size_t q = 0; q < nruns; q++) {
        size_t k = a.learn ? q / 2 : q;
        a.o.learn = a.learn && q % 2 == 1;
        int run_rc;
        if (!strcmp(a.policies[k], "rounds")) {
            run_rc = cr__sim_run_rounds(&a.o, &cl, &w, &res[nres], err, sizeof err);
        } else {
            cr_sched_policy pol;
            cr_sched_policy_parse(a.policies[k], &pol);
            a.o.policy = pol;
            run_rc = cr__sim_run(&a.o, &cl, &w, &res[nres], err, sizeof err);
        }
        if (run_rc != 0) {
            cr__sim_result_fini(&res[nres]);
            fprintf(stderr, "corral sim: %s: %s\n", a.policies[k], err);
            rc = run_rc == CR_EINVAL ? 2 : 1; /* 2: the input can never run, like a bad trace */
            goto out;
        }
        nres++;
        if (a.timing) {
            fprintf(stderr, "corral sim: %s: %zu jobs, %llu events, %llu cycles in %.3f s\n",
                    a.policies[k], w.njobs, (unsigned long long)res[nres - 1].events,
                    (unsigned long long)res[nres - 1].cycles, res[nres - 1].wall_s);
        }
    }
    if (a.json) {
        json = cr__sim_report_json(res, nres, &w, &a.ro);
        fputs(json, stdout);
    } else if (a.compare || a.learn) {
        cr__sim_report_compare(stdout, res, nres, &w, &a.ro);
    } else {
        cr__sim_report_text(stdout, &res[0], &w, &a.ro);
    }
    if (a.csv && cr__sim_report_csv(a.csv, res, nres, &w) != 0) {
        fprintf(stderr, "corral sim: --csv: %s: cannot write\n", a.csv);
        goto out;
    }
    if (a.html && cr__sim_report_html(a.html, res, nres, &w, &a.ro) != 0) {
        fprintf(stderr, "corral sim: --html: %s: cannot write\n", a.html);
        goto out;
    }
    rc = 0;
    for (size_t k = 0; k < nres; k++) {
        if (res[k].check_errors) {
            fprintf(stderr, "corral sim: %s: %d invariant violations; first: %s\n", res[k].policy,
                    res[k].check_errors, res[k].check_msg);
            rc = 1;
        }
    }
out:
    for (size_t k = 0; k < nres; k++) {
        cr__sim_result_fini(&res[k]);
    }
    free(json);
    cr_catalog_free(catalog);
    free(cluster_text);
    free(policy_buf);
    if (have_tput) {
        cr__sim_tput_fini(&tput);
    }
    cr__sim_workload_fini(&w);
    fflush(stdout);
    return rc;
}
