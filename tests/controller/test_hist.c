/*
 * test_hist.c - the history's rings and range reads (ctl_hist.c) without a
 * controller: values come back as written, a ring forgets what is older
 * than its span, gaps have no points, the coarse ring holds the mean of its
 * steps, the series bound holds, a user reads its own tenant's series and
 * the totals only, top=N ranks by the mean.
 *
 * `test_hist bench [SERIES [DAYS]]` is the bench (not a test): SERIES
 * series (default 2048, the bound: 1 cluster series and 2,047 node
 * series) and the GPU pool's 2,048 GPU series filled with DAYS (default
 * 90) of history, then the range reads the dashboard makes, timed, and the
 * memory the rings took against the documented bound.
 */
#include "ctl_int.h"

#include "cr_buf.h"
#include "cr_error.h"
#include "cr_time.h"

#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#define STEP_S 10
#define T0     1789999800LL /* a multiple of 300: coarse slots start on it */

static const cr_principal admin = {.role = CR_ROLE_ADMIN, .name = "admin"};
static const cr_principal alice = {.role = CR_ROLE_USER, .tenant = "ml", .name = "alice"};

static void put(ctl_hist *h, const char *name, int64_t t_s, double v)
{
    assert_int_equal(ctl_hist_put(h, name, t_s * CR_NS_PER_SEC, v), 0);
}

/* GET /v1/history's answer as JSON (returned new), or NULL with *field. */
static json_t *read_q(ctl_hist *h, const cr_principal *p, const char *series, int64_t from,
                      int64_t to, int64_t step, int64_t top, int64_t now_s, const char **field)
{
    ctl_hist_query q = {
        .series = series, .from = from, .to = to, .step = step, .top = top, .now_s = now_s, .p = p};
    cr_buf b;
    cr_buf_init(&b);
    char why[200];
    const char *f = NULL;
    json_t *v = NULL;
    if (ctl_hist_read(h, &q, &b, &f, why, sizeof why) == 0) {
        v = json_loadb(b.data, b.len, 0, NULL);
        assert_non_null(v);
    }
    if (field) {
        *field = f;
    }
    cr_buf_fini(&b);
    return v;
}

static json_t *points(json_t *ans, size_t i)
{
    return json_object_get(json_array_get(json_object_get(ans, "series"), i), "points");
}

static void test_values_and_gaps(void **state)
{
    (void)state;
    ctl_hist *h = ctl_hist_new(STEP_S);
    for (int i = 0; i < 60; i++) {
        if (i < 20 || i >= 30) { /* 20..29: the controller was down */
            put(h, "cluster.gpu_util", T0 + i * STEP_S, i);
        }
    }
    int64_t now = T0 + 59 * STEP_S;
    json_t *a = read_q(h, &admin, "cluster.gpu_util", T0, now, STEP_S, 0, now, NULL);
    assert_int_equal(json_integer_value(json_object_get(a, "resolution")), STEP_S);
    json_t *pts = points(a, 0);
    assert_int_equal(json_array_size(pts), 50);
    for (size_t k = 0; k < json_array_size(pts); k++) {
        json_t *pt = json_array_get(pts, k);
        int64_t t = json_integer_value(json_array_get(pt, 0));
        int i = (int)((t - T0) / STEP_S);
        assert_true(i < 20 || i >= 30);
        assert_true(fabs(json_number_value(json_array_get(pt, 1)) - i) < 1e-9);
    }
    json_decref(a);
    /* step 60: the mean of 6 values; the gap's buckets have the rest only */
    a = read_q(h, &admin, "cluster.gpu_util", T0, now, 60, 0, now, NULL);
    pts = points(a, 0);
    assert_int_equal(json_array_size(pts),
                     9); /* 10 buckets, 20..29 spans two: 18-23, 24-29 empty */
    assert_true(fabs(json_number_value(json_array_get(json_array_get(pts, 0), 1)) - 2.5) < 1e-9);
    json_decref(a);
    ctl_hist_free(h);
}

static void test_wrap_and_coarse(void **state)
{
    (void)state;
    ctl_hist *h = ctl_hist_new(STEP_S);
    /* a day and an hour of steps: the fine ring keeps the last day only */
    int64_t n = CTL_HIST_FINE_PTS + 360;
    for (int64_t i = 0; i < n; i++) {
        put(h, "queue.pending", T0 + i * STEP_S, (double)(i % CTL_HIST_COARSE_MUL));
    }
    int64_t now = T0 + (n - 1) * STEP_S;
    /* the first hour is gone from the fine ring: a read there comes from
     * the coarse one, each 300 s point the mean of 0..29 */
    json_t *a = read_q(h, &admin, "queue.pending", T0, T0 + 3599, 0, 0, now, NULL);
    assert_int_equal(json_integer_value(json_object_get(a, "resolution")),
                     STEP_S * CTL_HIST_COARSE_MUL);
    json_t *pts = points(a, 0);
    assert_int_equal(json_array_size(pts), 12);
    for (size_t k = 0; k < 12; k++) {
        assert_true(fabs(json_number_value(json_array_get(json_array_get(pts, k), 1)) - 14.5) <
                    1e-4);
    }
    json_decref(a);
    /* the last hour at 10 s: every value as written */
    a = read_q(h, &admin, "queue.pending", now - 3590, now, STEP_S, 0, now, NULL);
    pts = points(a, 0);
    assert_int_equal(json_array_size(pts), 360);
    assert_true(fabs(json_number_value(json_array_get(json_array_get(pts, 359), 1)) -
                     (double)((n - 1) % CTL_HIST_COARSE_MUL)) < 1e-9);
    json_decref(a);
    /* 91 days later the coarse ring has let the first slots go too */
    int64_t late = T0 + 91 * 86400;
    put(h, "queue.pending", late, 7);
    a = read_q(h, &admin, "queue.pending", T0, T0 + 86400 - 1, 3600, 0, late, NULL);
    assert_int_equal(json_array_size(points(a, 0)), 0);
    json_decref(a);
    ctl_hist_free(h);
}

/* Values written behind the newest (an import after live samples) average
 * in their coarse slot, and leave the newest slot's mean alone. */
static void test_behind(void **state)
{
    (void)state;
    ctl_hist *h = ctl_hist_new(STEP_S);
    int64_t live = T0 + 86400;
    put(h, "cluster.gpu_util", live, 50);
    put(h, "cluster.gpu_util", live + STEP_S, 70);
    for (int i = 0; i < 60; i++) { /* two coarse slots an hour back: 0..29, then 100..129 */
        put(h, "cluster.gpu_util", live - 3600 + i * STEP_S, i < 30 ? i : 100 + i - 30);
    }
    int64_t cs = STEP_S * CTL_HIST_COARSE_MUL;
    json_t *a = read_q(h, &admin, "cluster.gpu_util", live - 3600, live + STEP_S, cs, 0,
                       live + 91 * 86400 / 100, NULL);
    assert_int_equal(json_integer_value(json_object_get(a, "resolution")), cs);
    json_t *pts = points(a, 0);
    assert_int_equal(json_array_size(pts), 3);
    assert_true(fabs(json_number_value(json_array_get(json_array_get(pts, 0), 1)) - 14.5) < 1e-4);
    assert_true(fabs(json_number_value(json_array_get(json_array_get(pts, 1), 1)) - 114.5) < 1e-4);
    assert_true(fabs(json_number_value(json_array_get(json_array_get(pts, 2), 1)) - 60) < 1e-4);
    json_decref(a);
    ctl_hist_free(h);
}

/* top= ranks by the mean over the range from the coarse ring's block sums:
 * the same order as the values' own means, with gaps (runs longer than a
 * block too), the ring wrapped past 90 days, values rewritten behind the
 * newest (a gap filled, a value replaced), ranges ending inside blocks. */
#define TB_SERIES 12
#define TB_SLOTS  (100 * 288) /* 100 days of 5-min slots: the ring wraps */
static float tb_exp[TB_SERIES][TB_SLOTS];
static uint64_t tb_rng = 88172645463325252ULL;
static uint64_t tb_next(void)
{
    tb_rng ^= tb_rng << 13;
    tb_rng ^= tb_rng >> 7;
    tb_rng ^= tb_rng << 17;
    return tb_rng;
}

static float tb_value(void)
{
    return (float)((double)(tb_next() % 1000003) / 10000.0);
}

static void test_top_blocks(void **state)
{
    (void)state;
    ctl_hist *h = ctl_hist_new(STEP_S);
    const int64_t cs = STEP_S * CTL_HIST_COARSE_MUL, base = T0 / cs;
    char name[64];
    for (int64_t q = 0; q < TB_SLOTS; q++) {
        for (int k = 0; k < TB_SERIES; k++) {
            bool gap = q > 0 && q < TB_SLOTS - 1 &&
                       ((q / 300) % 7 == k % 7 || tb_next() % 10 == 0); /* runs and holes */
            tb_exp[k][q] = NAN;
            if (!gap) {
                tb_exp[k][q] = tb_value();
                snprintf(name, sizeof name, "node.n%02d.gpu_util", k);
                put(h, name, (base + q) * cs, tb_exp[k][q]);
            }
        }
    }
    const int64_t last = TB_SLOTS - 1, oldest = last - CTL_HIST_COARSE_PTS + 1;
    /* rewrites behind the newest: each a slot of its own, so it replaces */
    int64_t prev[TB_SERIES];
    for (int k = 0; k < TB_SERIES; k++) {
        prev[k] = -1;
    }
    for (int i = 0; i < 400; i++) {
        int k = (int)(tb_next() % TB_SERIES);
        int64_t q = oldest + (int64_t)(tb_next() % (uint64_t)(last - oldest - 1));
        if (q == prev[k]) {
            continue;
        }
        prev[k] = q;
        tb_exp[k][q] = tb_value();
        snprintf(name, sizeof name, "node.n%02d.gpu_util", k);
        put(h, name, (base + q) * cs, tb_exp[k][q]);
    }
    const int64_t now = (base + last) * cs;
    for (int r = 0; r < 40; r++) {
        int64_t from = (base + (int64_t)(tb_next() % TB_SLOTS) - 300) * cs;
        int64_t to = from + 3600 + (int64_t)(tb_next() % (uint64_t)(90 * 86400));
        if (r == 0) { /* the whole ring */
            from = now - 90 * 86400;
            to = now;
        }
        to = to > now ? now : to;
        from = from / 3600 * 3600;
        if (from > to) {
            continue;
        }
        int64_t lo = from / cs - base, hi = to / cs - base;
        lo = lo < oldest ? oldest : lo;
        hi = hi > last ? last : hi;
        double mean[TB_SERIES];
        int order[TB_SERIES];
        for (int k = 0; k < TB_SERIES; k++) {
            double sum = 0;
            int64_t n = 0;
            for (int64_t q = lo; q <= hi; q++) {
                if (tb_exp[k][q] == tb_exp[k][q]) {
                    sum += tb_exp[k][q];
                    n++;
                }
            }
            mean[k] = n ? sum / (double)n : -1;
            order[k] = k;
        }
        for (int a = 1; a < TB_SERIES; a++) { /* by mean, highest first; ties by creation */
            for (int b = a;
                 b > 0 && (mean[order[b]] > mean[order[b - 1]] ||
                           (mean[order[b]] == mean[order[b - 1]] && order[b] < order[b - 1]));
                 b--) {
                int t = order[b];
                order[b] = order[b - 1];
                order[b - 1] = t;
            }
        }
        json_t *a = read_q(h, &admin, "node.*", from, to, 3600, TB_SERIES, now, NULL);
        assert_non_null(a);
        json_t *ss = json_object_get(a, "series");
        assert_int_equal(json_array_size(ss), TB_SERIES);
        for (int k = 0; k < TB_SERIES; k++) {
            snprintf(name, sizeof name, "node.n%02d.gpu_util", order[k]);
            const char *got =
                json_string_value(json_object_get(json_array_get(ss, (size_t)k), "name"));
            if (strcmp(got, name) != 0) {
                fail_msg("range %lld..%lld: rank %d is %s, expected %s (mean %.6f)",
                         (long long)from, (long long)to, k, got, name, mean[order[k]]);
            }
        }
        json_decref(a);
    }
    ctl_hist_free(h);
}

static void test_bound(void **state)
{
    (void)state;
    ctl_hist *h = ctl_hist_new(STEP_S);
    char name[64];
    for (int i = 0; i < CTL_HIST_SERIES_MAX; i++) {
        snprintf(name, sizeof name, "gpu.n%d.0.util", i);
        put(h, name, T0, i);
    }
    assert_int_equal(ctl_hist_put(h, "gpu.one-too-many.0.util", T0 * CR_NS_PER_SEC, 1), CR_ENOSPC);
    /* a series already kept still takes values */
    put(h, "gpu.n0.0.util", T0 + STEP_S, 5);
    uint64_t dropped = 0;
    assert_int_equal(ctl_hist_count(h, &dropped), CTL_HIST_SERIES_MAX);
    assert_int_equal(dropped, 1);
    ctl_hist_free(h);
}

/* A service's series name its tenant after '@': a user reads its own
 * tenant's services only, whatever dots the names hold; a name whose tenant
 * cannot be read is an admin's. */
static void test_service_scope(void **state)
{
    (void)state;
    ctl_hist *h = ctl_hist_new(STEP_S);
    const char *names[] = {"service.chat@ml.replicas",     "service.chat@ml.rps",
                           "service.chat@vision.replicas", "service.ml.chat@vision.ready",
                           "service.chat@ml.x.ready",      "service.broken"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        put(h, names[i], T0, (double)i);
    }
    const char *lists[] = {
        NULL, "*", "service.*", "service.chat@*", "service.chat@vision.replicas", "service.ml*"};
    size_t want[] = {2, 2, 2, 2, 0, 0};
    for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++) {
        json_t *a = read_q(h, &alice, lists[l], T0 - 60, T0, 0, 0, T0, NULL);
        json_t *ss = json_object_get(a, "series");
        assert_int_equal(json_array_size(ss), want[l]);
        json_t *x;
        size_t i;
        json_array_foreach(ss, i, x)
        {
            const char *n = json_string_value(json_object_get(x, "name"));
            assert_true(strcmp(n, "service.chat@ml.replicas") == 0 ||
                        strcmp(n, "service.chat@ml.rps") == 0);
        }
        json_decref(a);
    }
    json_t *a = read_q(h, &admin, "service.*", T0 - 60, T0, 0, 0, T0, NULL);
    assert_int_equal(json_array_size(json_object_get(a, "series")), 6);
    json_decref(a);
    ctl_hist_free(h);
}

static void test_scope_and_top(void **state)
{
    (void)state;
    ctl_hist *h = ctl_hist_new(STEP_S);
    const char *names[] = {"cluster.gpu_util",          "tenant.ml.gpus_allocated",
                           "tenant.ml2.gpus_allocated", "tenant.vision.gpus_allocated",
                           "node.n1.gpu_util",          "gpu.n1.0.util"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        put(h, names[i], T0, (double)i);
    }
    const char *lists[] = {
        NULL, "*", "tenant.*", "tenant.ml*", "tenant.vision.gpus_allocated", "node.*,gpu.*"};
    for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++) {
        json_t *a = read_q(h, &alice, lists[l], T0 - 60, T0, 0, 0, T0, NULL);
        json_t *s;
        size_t i;
        json_array_foreach(json_object_get(a, "series"), i, s)
        {
            const char *n = json_string_value(json_object_get(s, "name"));
            assert_true(strcmp(n, "cluster.gpu_util") == 0 ||
                        strcmp(n, "tenant.ml.gpus_allocated") == 0);
        }
        json_decref(a);
    }
    json_t *a = read_q(h, &alice, "*", T0 - 60, T0, 0, 0, T0, NULL);
    assert_int_equal(json_array_size(json_object_get(a, "series")), 2);
    json_decref(a);
    a = read_q(h, &admin, NULL, T0 - 60, T0, 0, 0, T0, NULL);
    assert_int_equal(json_array_size(json_object_get(a, "series")), 6);
    json_decref(a);
    /* top: the highest means first */
    a = read_q(h, &admin, "tenant.*", T0 - 60, T0, 0, 2, T0, NULL);
    json_t *ss = json_object_get(a, "series");
    assert_int_equal(json_array_size(ss), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ss, 0), "name")),
                        "tenant.vision.gpus_allocated");
    assert_string_equal(json_string_value(json_object_get(json_array_get(ss, 1), "name")),
                        "tenant.ml2.gpus_allocated");
    json_decref(a);
    /* a range of centuries with the default step: quick, the ring's span only */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    json_t *far = read_q(h, &admin, "*", 0, INT64_MAX / 8, 0, 0, T0, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_non_null(far);
    json_decref(far);
    assert_true((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 2000);
    /* bad ranges name their parameter */
    const char *field = NULL;
    assert_null(read_q(h, &admin, "*", T0, T0 - 1, 0, 0, T0, &field));
    assert_string_equal(field, "from");
    assert_null(read_q(h, &admin, "*", 0, T0, 10, 0, T0, &field));
    assert_string_equal(field, "step");
    ctl_hist_free(h);
    /* at most CTL_HIST_ANSWER_POINTS_MAX points in one answer */
    h = ctl_hist_new(STEP_S);
    char name[64];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof name, "node.n%d.gpu_util", i);
        put(h, name, T0, i);
    }
    assert_null(read_q(h, &admin, "node.*", T0 - 19999 * 300, T0, 300, 0, T0, &field));
    assert_string_equal(field, "series");
    a = read_q(h, &admin, "node.*", T0 - 19999 * 300, T0, 300, 10, T0, &field);
    assert_int_equal(json_array_size(json_object_get(a, "series")), 10);
    json_decref(a);
    ctl_hist_free(h);
}

/* ------------------------------------------------------------------------ */
/* bench                                                                     */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) {
            res = 0;
        }
        fclose(f);
    }
    return res * 4;
}

static int bench(int nseries, int days)
{
    ctl_hist *h = ctl_hist_new(STEP_S);
    long rss0 = rss_kib();
    /* the other pool: the cluster and nodes; the GPU pool: their GPUs */
    int total = nseries + CTL_HIST_GPU_SERIES_MAX;
    char(*names)[64] = calloc((size_t)total, sizeof *names);
    snprintf(names[0], sizeof names[0], "cluster.gpu_util");
    for (int i = 1; i < nseries; i++) {
        snprintf(names[i], sizeof names[i], "node.node-%04d.gpu_util", i - 1);
    }
    for (int i = 0; i < CTL_HIST_GPU_SERIES_MAX; i++) {
        snprintf(names[nseries + i], sizeof names[0], "gpu.node-%04d.%d.util", i / 8, i % 8);
    }
    nseries = total;
    int64_t end = T0 + (int64_t)days * 86400, fine_from = end - 86400;
    double t0 = now_ms();
    /* the older days one value per coarse slot (what 30 steps leave), the
     * last day every step */
    for (int64_t t = T0; t < end; t += t < fine_from ? STEP_S * CTL_HIST_COARSE_MUL : STEP_S) {
        for (int i = 0; i < nseries; i++) {
            double v = 50 + 40 * sin((double)(t / 600 + i) / 20.0);
            ctl_hist_put(h, names[i], t * CR_NS_PER_SEC, v);
        }
    }
    double fill = now_ms() - t0;
    long rss = rss_kib() - rss0;
    uint64_t dropped = 0;
    size_t kept = ctl_hist_count(h, &dropped);
    printf("history bench: %zu series, %d days, filled in %.0f ms\n", kept, days, fill);
    size_t bound = (kept - CTL_HIST_GPU_SERIES_MAX) * (size_t)CTL_HIST_SERIES_BYTES +
                   CTL_HIST_GPU_SERIES_MAX * (size_t)CTL_HIST_GPU_SERIES_BYTES;
    printf("  memory: %ld KiB resident for the rings, bound %zu x %d + %d x %d = %zu KiB\n", rss,
           kept - CTL_HIST_GPU_SERIES_MAX, (int)CTL_HIST_SERIES_BYTES, CTL_HIST_GPU_SERIES_MAX,
           (int)CTL_HIST_GPU_SERIES_BYTES, bound / 1024);
    struct {
        const char *what, *series;
        int64_t span, step, top;
    } qs[] = {
        {"cluster, 1 h, default step", "cluster.gpu_util", 3600, 0, 0},
        {"cluster, 1 day, 10 s", "cluster.gpu_util", 86400 - 10, 10, 0},
        {"cluster, 90 days, default step", "cluster.gpu_util", 90 * 86400 - 300, 0, 0},
        {"12 busiest of 2,047 nodes, 1 h", "node.*", 3600, 0, 12},
        {"12 busiest of 2,047 nodes, 90 days", "node.*", 90 * 86400 - 300, 0, 12},
        {"a node's 8 GPUs, 1 day", "gpu.node-0000.*", 86400 - 10, 0, 0},
    };
    int rc = 0;
    for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++) {
        double best = 1e9, sum = 0;
        size_t bytes = 0;
        for (int r = 0; r < 5; r++) {
            ctl_hist_query q = {.series = qs[k].series,
                                .from = end - 1 - qs[k].span,
                                .to = end - 1,
                                .step = qs[k].step,
                                .top = qs[k].top,
                                .now_s = end - 1,
                                .p = &admin};
            cr_buf b;
            cr_buf_init(&b);
            const char *field;
            char why[200];
            double a = now_ms();
            if (ctl_hist_read(h, &q, &b, &field, why, sizeof why) != 0) {
                printf("  %s: %s\n", qs[k].what, why);
                rc = 1;
            }
            double ms = now_ms() - a;
            best = ms < best ? ms : best;
            sum += ms;
            bytes = b.len;
            cr_buf_fini(&b);
        }
        printf("  %-34s best %7.2f ms, mean %7.2f ms, %8zu bytes\n", qs[k].what, best, sum / 5,
               bytes);
    }
    free(names);
    ctl_hist_free(h);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "bench") == 0) {
        return bench(argc > 2 ? atoi(argv[2]) : CTL_HIST_SERIES_MAX, argc > 3 ? atoi(argv[3]) : 90);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_and_gaps), cmocka_unit_test(test_wrap_and_coarse),
        cmocka_unit_test(test_behind),          cmocka_unit_test(test_bound),
        cmocka_unit_test(test_scope_and_top),   cmocka_unit_test(test_service_scope),
        cmocka_unit_test(test_top_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
