/*
 * test_cases.c - scheduler behaviour as data: runs every
 * tests/sched/cases/NAME.case (or the files named on the command line).
 *
 * A case file is a cluster, a configuration, jobs and expectations, read
 * top to bottom (format in tests/sched/cases/README.md). After every step
 * the driver runs cr_sched_check(). A failed expectation prints
 * "file:line: what" and the case fails; the exit status is the number of
 * failed cases (capped).
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"
#include "cr_parse.h"
#include "cr_sched.h"

#define NS 1000000000LL

typedef struct ctx {
    const char *file;
    int line;
    cr_sched_config cfg;
    cr_sched *s;
    cr_buf cluster;
    bool in_cluster;
    int64_t now;
    const cr_sched_decision *dec;
    int ndec;
    int failures;
    cr_rng rng;
} ctx;

__attribute__((format(printf, 2, 3))) static void fail(ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: ", c->file, c->line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    c->failures++;
}

/* "90", "30s", "5m", "2h", "1d" -> ns */
static int dur(const char *v, int64_t *out)
{
    size_t n = strlen(v);
    int64_t mult = NS;
    char buf[32];
    if (n == 0 || n >= sizeof(buf)) {
        return -1;
    }
    snprintf(buf, sizeof(buf), "%s", v);
    switch (buf[n - 1]) {
    case 's':
        buf[n - 1] = 0;
        break;
    case 'm':
        mult = 60 * NS;
        buf[n - 1] = 0;
        break;
    case 'h':
        mult = 3600 * NS;
        buf[n - 1] = 0;
        break;
    case 'd':
        mult = 86400 * NS;
        buf[n - 1] = 0;
        break;
    default:
        break;
    }
    int64_t x;
    if (cr_parse_i64(buf, 0, INT64_MAX / mult, &x) < 0) {
        return -1;
    }
    *out = x * mult;
    return 0;
}

/* Split "a b key=val "quoted words"" into words (in place). */
static int words(char *line, char **w, int max)
{
    int n = 0;
    char *p = line;
    while (*p && n < max) {
        while (*p == ' ' || *p == '\t') {
            p++;
        }
        if (!*p || *p == '#') {
            break;
        }
        if (*p == '"') {
            w[n++] = ++p;
            while (*p && *p != '"') {
                p++;
            }
        } else {
            w[n++] = p;
            while (*p && *p != ' ' && *p != '\t') {
                p++;
            }
        }
        if (*p) {
            *p++ = 0;
        }
    }
    return n;
}

static const char *kv(char **w, int n, const char *key)
{
    size_t kl = strlen(key);
    for (int i = 0; i < n; i++) {
        if (strncmp(w[i], key, kl) == 0 && w[i][kl] == '=') {
            return w[i] + kl + 1;
        }
    }
    return NULL;
}

static bool ensure_sched(ctx *c)
{
    if (c->s) {
        return true;
    }
    if (cr_sched_new(&c->cfg, &c->s) < 0) {
        fail(c, "bad config");
        return false;
    }
    char err[256];
    int rc = cr_sched_load_cluster(c->s, cr_buf_str(&c->cluster), c->cluster.len, err, sizeof(err));
    if (rc < 0) {
        fail(c, "cluster: %s", err);
        return false;
    }
    return true;
}

static int type_id(ctx *c, const char *name)
{
    int t;
    if (strcmp(name, "auto") == 0) {
        return CR_SCHED_TYPE_ANY;
    }
    if (cr_sched_gpu_type_find(c->s, name, &t) < 0) {
        fail(c, "unknown type %s", name);
        return -2;
    }
    return t;
}

static void do_job(ctx *c, char **w, int n)
{
    cr_sched_job_spec j = {0};
    const char *v;
    double tput[CR_SCHED_MAX_TYPES] = {0};
    int64_t x;
    if (n < 2 || cr_parse_i64(w[1], 1, INT64_MAX, &x) < 0) {
        fail(c, "job needs an id");
        return;
    }
    j.id = (uint64_t)x;
    j.gpu_count = 1;
    j.gpu_type = CR_SCHED_TYPE_ANY;
    j.submit_ns = c->now;
    v = kv(w, n, "tenant");
    if (cr_sched_tenant(c->s, v ? v : "default", &j.tenant) < 0) {
        fail(c, "bad tenant");
        return;
    }
    if ((v = kv(w, n, "prio")) && cr_parse_i64(v, -1000, 1000, &x) == 0) {
        j.priority = (int32_t)x;
    }
    if ((v = kv(w, n, "gpus")) && cr_parse_i64(v, 1, 100000, &x) == 0) {
        j.gpu_count = (uint32_t)x;
    }
    if ((v = kv(w, n, "nodes")) && cr_parse_i64(v, 0, 100000, &x) == 0) {
        j.node_count = (uint32_t)x;
    }
    if ((v = kv(w, n, "type"))) {
        j.gpu_type = type_id(c, v);
    }
    if ((v = kv(w, n, "limit"))) {
        dur(v, &j.time_limit_ns);
    }
    if ((v = kv(w, n, "ckpt"))) {
        dur(v, &j.checkpoint_interval_ns);
    }
    if ((v = kv(w, n, "submit"))) {
        dur(v, &j.submit_ns);
    }
    if ((v = kv(w, n, "attained"))) {
        dur(v, &j.attained_gpu_ns);
    }
    if ((v = kv(w, n, "mem"))) {
        double d;
        cr_parse_count(v, &d);
        j.mem_bytes = (uint64_t)d;
    }
    j.mig_profile = kv(w, n, "mig");
    if ((v = kv(w, n, "frac")) && cr_parse_i64(v, 0, 65535, &x) == 0) {
        j.gpu_milli = (uint16_t)x; /* thousandths of a shared GPU */
    }
    if ((v = kv(w, n, "gmem"))) {
        double d;
        cr_parse_count(v, &d);
        j.gpu_mem_bytes = (uint64_t)d;
    }
    j.preemptible = (v = kv(w, n, "preempt")) && strcmp(v, "yes") == 0;
    if ((v = kv(w, n, "tput"))) {
        /* tput=v100:3,k80:1 */
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", v);
        char *save = NULL;
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            char *colon = strchr(t, ':');
            if (!colon) {
                fail(c, "bad tput");
                return;
            }
            *colon = 0;
            int ty = type_id(c, t);
            if (ty >= 0) {
                tput[ty] = atof(colon + 1);
            }
        }
        j.tput = tput;
        j.tput_count = CR_SCHED_MAX_TYPES;
    }
    int rc = cr_sched_job_add(c->s, &j, c->now);
    const char *want = kv(w, n, "expect-error");
    if (want ? (rc >= 0 || strcmp(cr_errname(rc), want) != 0) : rc < 0) {
        fail(c, "job_add %" PRIu64 ": %s", j.id, rc < 0 ? cr_errname(rc) : "accepted");
    }
}

static const cr_sched_decision *find_dec(ctx *c, cr_sched_action a, uint64_t id)
{
    for (int i = 0; i < c->ndec; i++) {
        if (c->dec[i].action == a && c->dec[i].job == id) {
            return &c->dec[i];
        }
    }
    return NULL;
}

/* nodes=a,b : the set of node names the job's slots touch, exactly */
static bool nodes_match(ctx *c, const cr_sched_slot *sl, size_t n, const char *want)
{
    char got[1024] = "";
    uint32_t seen[256];
    int ns = 0;
    for (size_t i = 0; i < n; i++) {
        bool dup = false;
        for (int k = 0; k < ns; k++) {
            dup |= seen[k] == sl[i].node;
        }
        if (!dup && ns < 256) {
            seen[ns++] = sl[i].node;
        }
    }
    /* sort by index for a stable text */
    for (int i = 1; i < ns; i++) {
        for (int k = i; k > 0 && seen[k - 1] > seen[k]; k--) {
            uint32_t t = seen[k];
            seen[k] = seen[k - 1];
            seen[k - 1] = t;
        }
    }
    for (int i = 0; i < ns; i++) {
        cr_sched_node_info info;
        cr_sched_node_info_get(c->s, seen[i], &info);
        strncat(got, i ? "," : "", sizeof(got) - strlen(got) - 1);
        strncat(got, info.name, sizeof(got) - strlen(got) - 1);
    }
    if (strcmp(got, want) != 0) {
        fail(c, "nodes: got %s, want %s", got, want);
        return false;
    }
    return true;
}

/* gpus=0,1,2 : the GPU indices (on however many nodes), sorted */
static void gpus_match(ctx *c, const cr_sched_slot *sl, size_t n, const char *want)
{
    char got[1024] = "";
    int idx[1024];
    size_t m = n < 1024 ? n : 1024;
    for (size_t i = 0; i < m; i++) {
        idx[i] = sl[i].gpu * 16 + (sl[i].mig_start < 0 ? 0 : sl[i].mig_start + 1);
    }
    for (size_t i = 1; i < m; i++) {
        for (size_t k = i; k > 0 && idx[k - 1] > idx[k]; k--) {
            int t = idx[k];
            idx[k] = idx[k - 1];
            idx[k - 1] = t;
        }
    }
    for (size_t i = 0; i < m; i++) {
        char b[32];
        if (idx[i] % 16) {
            snprintf(b, sizeof(b), "%s%d/%d", i ? "," : "", idx[i] / 16, idx[i] % 16 - 1);
        } else {
            snprintf(b, sizeof(b), "%s%d", i ? "," : "", idx[i] / 16);
        }
        strncat(got, b, sizeof(got) - strlen(got) - 1);
    }
    if (strcmp(got, want) != 0) {
        fail(c, "gpus: got %s, want %s", got, want);
    }
}

static void do_expect(ctx *c, char **w, int n)
{
    if (n < 2) {
        fail(c, "expect what?");
        return;
    }
    int64_t x = 0;
    if (n >= 3) {
        cr_parse_i64(w[2], 0, INT64_MAX, &x);
    }
    uint64_t id = (uint64_t)x;
    const char *v;
    if (strcmp(w[1], "start") == 0) {
        const cr_sched_decision *d = find_dec(c, CR_SCHED_START, id);
        if (!d) {
            char r[256] = "";
            cr_sched_job_reason(c->s, id, r, sizeof(r));
            fail(c, "job %" PRIu64 " did not start (%s)", id, r);
            return;
        }
        if ((v = kv(w, n, "type")) && strcmp(cr_sched_gpu_type_name(c->s, d->gpu_type), v)) {
            fail(c, "job %" PRIu64 " started on %s, want %s", id,
                 cr_sched_gpu_type_name(c->s, d->gpu_type), v);
        }
        if ((v = kv(w, n, "nodes"))) {
            nodes_match(c, d->slots, d->slot_count, v);
        }
        if ((v = kv(w, n, "gpus"))) {
            gpus_match(c, d->slots, d->slot_count, v);
        }
        if ((v = kv(w, n, "backfill")) && d->backfilled != (strcmp(v, "yes") == 0)) {
            fail(c, "job %" PRIu64 " backfilled=%d", id, d->backfilled);
        }
        if ((v = kv(w, n, "borrowed")) && d->borrowed != (strcmp(v, "yes") == 0)) {
            fail(c, "job %" PRIu64 " borrowed=%d", id, d->borrowed);
        }
        if ((v = kv(w, n, "repart")) && d->mig_repartitioned != (strcmp(v, "yes") == 0)) {
            fail(c, "job %" PRIu64 " mig_repartitioned=%d", id, d->mig_repartitioned);
        }
    } else if (strcmp(w[1], "nostart") == 0) {
        if (find_dec(c, CR_SCHED_START, id)) {
            fail(c, "job %" PRIu64 " started", id);
        }
    } else if (strcmp(w[1], "preempt") == 0) {
        const cr_sched_decision *d = find_dec(c, CR_SCHED_PREEMPT, id);
        if (!d) {
            fail(c, "job %" PRIu64 " was not preempted", id);
        } else if ((v = kv(w, n, "for")) && d->preempted_for != strtoull(v, NULL, 10)) {
            fail(c, "job %" PRIu64 " preempted for %" PRIu64, id, d->preempted_for);
        } else if ((v = kv(w, n, "reason")) && !strstr(d->reason, v)) {
            fail(c, "preempt reason '%s' lacks '%s'", d->reason, v);
        }
    } else if (strcmp(w[1], "nopreempt") == 0) {
        for (int i = 0; i < c->ndec; i++) {
            if (c->dec[i].action == CR_SCHED_PREEMPT) {
                fail(c, "job %" PRIu64 " was preempted", c->dec[i].job);
            }
        }
    } else if (strcmp(w[1], "reason") == 0) {
        char r[CR_SCHED_REASON_MAX];
        int rc = cr_sched_job_reason(c->s, id, r, sizeof(r));
        if (rc < 0 && rc != CR_EINVAL) {
            fail(c, "job %" PRIu64 ": %s", id, cr_errname(rc));
        } else if (n < 4 || !strstr(r, w[3])) {
            fail(c, "job %" PRIu64 " reason '%s' lacks '%s'", id, r, n >= 4 ? w[3] : "?");
        }
    } else if (strcmp(w[1], "running") == 0 || strcmp(w[1], "pending") == 0) {
        cr_sched_job_info info;
        bool want_run = w[1][0] == 'r';
        if (cr_sched_job_info_get(c->s, id, &info) < 0) {
            fail(c, "job %" PRIu64 " unknown", id);
        } else if ((info.state == CR_JOB_RUNNING) != want_run) {
            fail(c, "job %" PRIu64 " is %s", id,
                 info.state == CR_JOB_RUNNING ? "running" : "pending");
        } else if (want_run && (v = kv(w, n, "nodes"))) {
            nodes_match(c, info.slots, info.slot_count, v);
        }
    } else if (strcmp(w[1], "started") == 0) {
        int cnt = 0;
        for (int i = 0; i < c->ndec; i++) {
            cnt += c->dec[i].action == CR_SCHED_START;
        }
        if (cnt != (int)x) {
            fail(c, "%d jobs started, want %" PRId64, cnt, x);
        }
    } else if (strcmp(w[1], "free") == 0) {
        /* expect free <type> <n> */
        int t = n >= 4 ? type_id(c, w[2]) : -2;
        uint32_t f = 0;
        int64_t want;
        if (t < 0 || cr_parse_i64(w[3], 0, INT64_MAX, &want) < 0) {
            fail(c, "expect free <type> <n>");
            return;
        }
        cr_sched_capacity(c->s, t, NULL, &f);
        if (f != (uint32_t)want) {
            fail(c, "%u %s free, want %" PRId64, f, w[2], want);
        }
    } else if (strcmp(w[1], "layout") == 0) {
        /* expect layout <node> <gpu> <start>/<mem slices>,... (sorted by start) */
        uint32_t node;
        int64_t gi;
        int st[8], mem[8], cp[8];
        if (n < 5 || cr_sched_node_find(c->s, w[2], &node) < 0 ||
            cr_parse_i64(w[3], 0, 63, &gi) < 0) {
            fail(c, "expect layout <node> <gpu> <start>/<mem>,...");
            return;
        }
        if (strcmp(w[4], "whole") == 0) {
            /* expect layout <node> <gpu> whole: out of MIG mode */
            cr_sched_gpu_info info;
            if (cr_sched_gpu_info_get(c->s, node, (uint32_t)gi, &info) < 0 || info.mig) {
                fail(c, "%s GPU %" PRId64 " is in MIG mode, want a whole GPU", w[2], gi);
            }
            return;
        }
        int k = cr_sched_gpu_mig_layout(c->s, node, (uint32_t)gi, st, mem, cp);
        for (int i = 1; i < k; i++) {
            for (int q = i; q > 0 && st[q - 1] > st[q]; q--) {
                int t = st[q], u = mem[q];
                st[q] = st[q - 1];
                mem[q] = mem[q - 1];
                st[q - 1] = t;
                mem[q - 1] = u;
            }
        }
        char got[128] = "";
        for (int i = 0; i < k; i++) {
            size_t l = strlen(got);
            snprintf(got + l, sizeof got - l, "%s%d/%d", i ? "," : "", st[i], mem[i]);
        }
        if (strcmp(got, w[4]) != 0) {
            fail(c, "%s GPU %" PRId64 " layout %s, want %s", w[2], gi, got, w[4]);
        }
    } else if (strcmp(w[1], "share") == 0) {
        /* expect share <node> <gpu> <thousandths held> <tasks> */
        uint32_t node;
        int64_t gi, milli, tasks;
        cr_sched_gpu_info gi_info;
        if (n < 6 || cr_sched_node_find(c->s, w[2], &node) < 0 ||
            cr_parse_i64(w[3], 0, 63, &gi) < 0 || cr_parse_i64(w[4], 0, 1000, &milli) < 0 ||
            cr_parse_i64(w[5], 0, INT32_MAX, &tasks) < 0 ||
            cr_sched_gpu_info_get(c->s, node, (uint32_t)gi, &gi_info) < 0) {
            fail(c, "expect share <node> <gpu> <thousandths> <tasks>");
            return;
        }
        if (gi_info.share_milli != milli || gi_info.share_jobs != tasks) {
            fail(c, "%s GPU %" PRId64 ": %u thousandths in %u tasks, want %" PRId64 " in %" PRId64,
                 w[2], gi, gi_info.share_milli, gi_info.share_jobs, milli, tasks);
        }
    } else {
        fail(c, "unknown expectation %s", w[1]);
    }
}

static void check(ctx *c)
{
    char err[256];
    if (c->s && cr_sched_check(c->s, err, sizeof(err)) < 0) {
        fail(c, "invariant: %s", err);
    }
}

static int run_case(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", path);
        return 1;
    }
    ctx c = {.file = path};
    cr_sched_config_default(&c.cfg, CR_SCHED_FIFO);
    cr_buf_init(&c.cluster);
    cr_rng_seed(&c.rng, 1);
    char line[1024];
    while (fgets(line, sizeof(line), f)) {
        c.line++;
        line[strcspn(line, "\r\n")] = 0;
        if (strncmp(line, "cluster ", 8) == 0) {
            cr_buf_puts(&c.cluster, line + 8);
            cr_buf_putc(&c.cluster, '\n');
            continue;
        }
        char *w[32];
        int n = words(line, w, 32);
        if (n == 0) {
            continue;
        }
        const char *v;
        if (strcmp(w[0], "config") == 0) {
            if ((v = kv(w, n, "policy")) && cr_sched_policy_parse(v, &c.cfg.policy) < 0) {
                fail(&c, "bad policy");
            }
            if ((v = kv(w, n, "backfill"))) {
                c.cfg.backfill = strcmp(v, "on") == 0;
            }
            if ((v = kv(w, n, "preemption"))) {
                c.cfg.preemption = strcmp(v, "on") == 0;
            }
            if ((v = kv(w, n, "borrowing"))) {
                c.cfg.borrowing = strcmp(v, "on") == 0;
            }
            if ((v = kv(w, n, "hetero_lp"))) {
                c.cfg.hetero_lp = strcmp(v, "on") == 0;
            }
            if ((v = kv(w, n, "wait_for_faster"))) {
                c.cfg.wait_for_faster = strcmp(v, "on") == 0;
            }
            if ((v = kv(w, n, "share_policy")) &&
                cr_sched_share_policy_parse(v, &c.cfg.share_policy) < 0) {
                fail(&c, "bad share_policy");
            }
            if ((v = kv(w, n, "las_starve"))) {
                dur(v, &c.cfg.las_starve_ns);
            }
            if ((v = kv(w, n, "las_threshold"))) {
                dur(v, &c.cfg.las_threshold_gpu_ns[0]);
            }
            if ((v = kv(w, n, "round"))) {
                dur(v, &c.cfg.round_ns);
            }
            if ((v = kv(w, n, "suspend_hold"))) {
                c.cfg.suspend_hold = strcmp(v, "on") == 0;
            }
            if ((v = kv(w, n, "default_time"))) {
                dur(v, &c.cfg.default_time_ns);
            }
            if ((v = kv(w, n, "mig_reclaim"))) {
                c.cfg.mig_reclaim = strcmp(v, "on") == 0;
            }
            continue;
        }
        if (!ensure_sched(&c)) {
            break;
        }
        if (strcmp(w[0], "at") == 0) {
            if (n < 2 || dur(w[1], &c.now) < 0) {
                fail(&c, "at <time>");
            }
        } else if (strcmp(w[0], "job") == 0) {
            do_job(&c, w, n);
        } else if (strcmp(w[0], "cycle") == 0) {
            c.ndec = cr_sched_cycle(c.s, c.now, &c.rng, &c.dec);
        } else if (strcmp(w[0], "resumable") == 0) {
            int64_t id = 0;
            cr_parse_i64(n > 1 ? w[1] : "", 1, INT64_MAX, &id);
            int rc = cr_sched_job_resumable(c.s, (uint64_t)id);
            if (rc < 0) {
                fail(&c, "resumable %" PRId64 ": %s", id, cr_errname(rc));
            }
        } else if (strcmp(w[0], "finish") == 0 || strcmp(w[0], "requeue") == 0) {
            int64_t id = 0;
            cr_parse_i64(n > 1 ? w[1] : "", 1, INT64_MAX, &id);
            int rc = w[0][0] == 'f' ? cr_sched_job_remove(c.s, (uint64_t)id, c.now)
                                    : cr_sched_job_requeue(c.s, (uint64_t)id, c.now);
            if (rc < 0) {
                fail(&c, "%s %" PRId64 ": %s", w[0], id, cr_errname(rc));
            }
            c.ndec = 0;
        } else if (strcmp(w[0], "node") == 0 && n >= 3) {
            uint32_t nd;
            cr_sched_node_state st = strcmp(w[2], "lost") == 0      ? CR_NODE_LOST
                                     : strcmp(w[2], "drained") == 0 ? CR_NODE_DRAINED
                                                                    : CR_NODE_UP;
            if (cr_sched_node_find(c.s, w[1], &nd) < 0 ||
                cr_sched_node_set_state(c.s, nd, st, "test", c.now, NULL, NULL) < 0) {
                fail(&c, "node %s", w[1]);
            }
            c.ndec = 0;
        } else if (strcmp(w[0], "gpu") == 0 && n >= 4) {
            uint32_t nd;
            if (cr_sched_node_find(c.s, w[1], &nd) < 0 ||
                cr_sched_gpu_set_health(c.s, nd, (uint32_t)atoi(w[2]), strcmp(w[3], "ok") == 0,
                                        "test", c.now, NULL, NULL) < 0) {
                fail(&c, "gpu %s", w[1]);
            }
            c.ndec = 0;
        } else if (strcmp(w[0], "expect") == 0) {
            do_expect(&c, w, n);
        } else {
            fail(&c, "unknown step %s", w[0]);
        }
        check(&c);
    }
    fclose(f);
    cr_sched_free(c.s);
    cr_buf_fini(&c.cluster);
    if (c.failures) {
        fprintf(stderr, "FAIL %s (%d)\n", path, c.failures);
    } else {
        printf("ok   %s\n", path);
    }
    return c.failures ? 1 : 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    int failed = 0, ran = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++) {
            failed += run_case(argv[i]);
            ran++;
        }
    } else {
        const char *src = getenv("CORRAL_SRC");
        char dir[4096];
        snprintf(dir, sizeof(dir), "%s/tests/sched/cases", src ? src : ".");
        DIR *d = opendir(dir);
        if (!d) {
            fprintf(stderr, "cannot open %s\n", dir);
            return 1;
        }
        char **names = NULL;
        size_t nn = 0, cap = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t l = strlen(e->d_name);
            if (l > 5 && strcmp(e->d_name + l - 5, ".case") == 0) {
                CR_GROW(names, nn, cap);
                names[nn++] = cr_asprintf("%s/%s", dir, e->d_name);
            }
        }
        closedir(d);
        qsort(names, nn, sizeof(*names), cmp_str);
        for (size_t i = 0; i < nn; i++) {
            failed += run_case(names[i]);
            ran++;
            free(names[i]);
        }
        free(names);
    }
    printf("%d cases, %d failed\n", ran, failed);
    return failed > 100 ? 100 : failed;
}
