/*
 * test_model.c - unit tests of the model layer: catalog loading and
 * validation, lookups, MIG profiles, prices, the Gavel reader, workload
 * helpers and the performance model's fit/refuse decisions.
 */
#include "cr_arch.h"
#include "cr_catalog.h"
#include "cr_error.h"
#include "cr_gavel.h"
#include "cr_gpufacts.h"
#include "cr_mig.h"
#include "cr_nvenc.h"
#include "cr_learn.h"
#include "cr_perf.h"
#include "cr_price.h"
#include "cr_time.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const char *src_path(const char *rel, char *buf, size_t len)
{
    const char *src = getenv("CORRAL_SRC");
    snprintf(buf, len, "%s/%s", src ? src : ".", rel);
    return buf;
}

static cr_catalog *load_default(void)
{
    char path[1024], err[256];
    cr_catalog *c = NULL;
    int rc =
        cr_catalog_load(src_path("data/gpus/catalog.csv", path, sizeof path), &c, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "%s\n", err);
    }
    assert_int_equal(rc, 0);
    return c;
}

static void test_catalog_lookup(void **state)
{
    (void)state;
    cr_catalog *c = load_default();
    assert_true(cr_catalog_count(c) >= 20);
    const cr_gpu_type *h = cr_catalog_find(c, "H100 SXM");
    assert_non_null(h);
    assert_ptr_equal(cr_catalog_find(c, "h100"), h);
    assert_ptr_equal(cr_catalog_find(c, "h100-sxm"), h);
    assert_int_equal(h->mem_bytes, UINT64_C(80000000000));
    assert_true(fabs(h->bf16_flops - 989.5e12) < 1e9);
    assert_true(fabs(h->mem_bw_bytes_per_s - 3350e9) < 1e6);
    assert_true(fabs(h->nvlink_bytes_per_s - 900e9) < 1e6);
    assert_int_equal(h->nvlink_domain_gpus, 8);
    assert_int_equal(h->mig_max_instances, 7);
    assert_int_equal(h->ecc, CR_TRI_YES);
    assert_int_equal(h->nvenc, 0);
    assert_int_equal(h->form, CR_FORM_SXM);
    assert_true(h->mem_hbm);
    assert_true(h->vendor_nvidia);

    const cr_gpu_type *a = cr_catalog_find(c, "a100");
    assert_non_null(a);
    assert_string_equal(a->name, "A100 80GB SXM");
    assert_ptr_equal(cr_catalog_find(c, "A100 80GB SXM"), a);

    const cr_gpu_type *l = cr_catalog_find(c, "L40S");
    assert_non_null(l);
    assert_int_equal(l->rt_cores, CR_TRI_YES);
    assert_int_equal(l->nvenc, 3);
    assert_true(fabs(l->fp64_flops - 1.431e12) < 1e9);
    assert_int_equal(l->nvlink_domain_gpus, 1);
    assert_int_equal(l->form, CR_FORM_PCIE);
    assert_false(l->mem_hbm);

    const cr_gpu_type *a30 = cr_catalog_find(c, "a30");
    assert_non_null(a30);
    assert_true(fabs(a30->fp64_flops - 5.2e12) < 1e9); /* filled gap */
    const cr_gpu_type *l4 = cr_catalog_find(c, "l4");
    assert_int_equal(l4->ecc, CR_TRI_UNKNOWN);
    const cr_gpu_type *v100 = cr_catalog_find(c, "v100");
    assert_true(fabs(v100->fp16_flops - 125e12) < 1e9);
    assert_true(fabs(cr_gpu_peak_flops(v100, CR_PREC_BF16) - 125e12) < 1e9); /* fp16 fallback */
    assert_true(fabs(cr_gpu_peak_flops(a, CR_PREC_FP8) - 312e12) < 1e9);     /* no FP8 on A100 */
    assert_true(fabs(cr_gpu_peak_flops(h, CR_PREC_FP64) - 67e12) < 1e9);

    assert_null(cr_catalog_find(c, "rtx9090"));
    assert_null(cr_catalog_find(c, ""));
    assert_false(cr_catalog_find(c, "mi300x")->vendor_nvidia);
    assert_int_equal(cr_catalog_index(c, h), (int)(h - cr_catalog_at(c, 0)));
    cr_catalog_free(c);
}

/* Parse text; expect CR_EPARSE and an error starting with want. */
static void expect_bad(const char *text, const char *want)
{
    cr_catalog *c = NULL;
    char err[256] = "";
    int rc = cr_catalog_parse(text, strlen(text), "bad.csv", &c, err, sizeof err);
    if (rc != CR_EPARSE || strncmp(err, want, strlen(want)) != 0) {
        fprintf(stderr, "want \"%s...\", got rc %d \"%s\"\n", want, rc, err);
    }
    assert_int_equal(rc, CR_EPARSE);
    assert_null(c);
    assert_int_equal(strncmp(err, want, strlen(want)), 0);
}

static void test_catalog_errors(void **state)
{
    (void)state;
    const char *hdr = "model,memory_gb,mem_bw_gbs,tdp_w\n";
    char buf[512];
    snprintf(buf, sizeof buf, "%sA,80,2000,400\nB,eighty,2000,400\n", hdr);
    expect_bad(buf, "bad.csv:3:3: memory_gb");
    snprintf(buf, sizeof buf, "%sA,80,2000,-5\n", hdr);
    expect_bad(buf, "bad.csv:2:11: tdp_w");
    snprintf(buf, sizeof buf, "%sA,80,,400\n", hdr);
    expect_bad(buf, "bad.csv:2:");
    snprintf(buf, sizeof buf, "%s\"A,80,2000,400\n", hdr);
    expect_bad(buf, "bad.csv:2:1: unterminated");
    snprintf(buf, sizeof buf, "%sA,80,2000,400\na,40,1000,300\n", hdr);
    expect_bad(buf, "bad.csv:3:1: model \"a\"");
    expect_bad("model,mem_bw_gbs\nA,1000\n", "bad.csv:1:1: header: required column \"memory_gb\"");
    expect_bad("", "bad.csv:1:1: no header");
    expect_bad(hdr, "bad.csv:");
    expect_bad("model,memory_gb,mem_bw_gbs,ecc\nA,80,2000,maybe\n", "bad.csv:2:11: ecc");

    /* Column order is free, comments and CRLF are accepted. */
    const char *ok = "# comment\r\nmem_bw_gbs,model,memory_gb,alias\r\n900,Tiny GPU,16,tiny\r\n";
    cr_catalog *c = NULL;
    char err[256];
    assert_int_equal(cr_catalog_parse(ok, strlen(ok), "ok.csv", &c, err, sizeof err), 0);
    assert_int_equal(cr_catalog_count(c), 1);
    const cr_gpu_type *g = cr_catalog_find(c, "TINY");
    assert_non_null(g);
    assert_false(cr_known(g->fp64_flops));
    assert_int_equal(g->nvlink_domain_gpus, 1);
    cr_catalog_free(c);

    /* Without a vendor column, non-NVIDIA rows are recognised by name. */
    const char *nv =
        "model,memory_gb,mem_bw_gbs\nH100 SXM,80,3350\n"
        "AMD Instinct MI300X (non-NVIDIA),192,5300\nIntel Gaudi 3 (non-NVIDIA),128,3700\n";
    assert_int_equal(cr_catalog_parse(nv, strlen(nv), "nv.csv", &c, err, sizeof err), 0);
    assert_true(cr_catalog_at(c, 0)->vendor_nvidia);
    assert_false(cr_catalog_at(c, 1)->vendor_nvidia);
    assert_false(cr_catalog_at(c, 2)->vendor_nvidia);
    /* The default price table skips types this small catalog lacks. */
    cr_prices *p = NULL;
    assert_int_equal(cr_prices_load(NULL, c, &p, err, sizeof err), 0);
    assert_true(cr_known(cr_prices_get(p, cr_catalog_at(c, 0))));
    cr_prices_free(p);
    cr_catalog_free(c);

    assert_int_equal(cr_catalog_load("/nonexistent/catalog.csv", &c, err, sizeof err), CR_EIO);
    assert_non_null(strstr(err, "/nonexistent/catalog.csv"));
}

/* The facts table: MIG geometry from the names NVML reports, and the
 * standard shapes of each geometry agree with the per-model profile
 * tables of cr_mig.h (same slices, same placements). */
static void test_gpufacts(void **state)
{
    (void)state;
    assert_ptr_equal(cr_gpufacts_mig("NVIDIA A100-SXM4-80GB"), &cr_mig_geom_7_8);
    assert_ptr_equal(cr_gpufacts_mig("NVIDIA H200"), &cr_mig_geom_7_8);
    assert_ptr_equal(cr_gpufacts_mig("NVIDIA A30"), &cr_mig_geom_4_4);
    assert_null(cr_gpufacts_mig("NVIDIA A10"));
    assert_null(cr_gpufacts_mig("Tesla T4"));
    assert_null(cr_gpufacts_mig(NULL));
    assert_ptr_equal(cr_gpufacts_mig_geom(4, 4), &cr_mig_geom_4_4);
    assert_null(cr_gpufacts_mig_geom(3, 4));
    assert_true(cr_gpufacts_tdp_w("h100-sxm") == 700);
    assert_true(cr_gpufacts_tdp_w("L40S") == 350);
    assert_true(cr_gpufacts_tdp_w("L40") == 300);
    assert_true(cr_gpufacts_tdp_w("a100-80gb") == 400); /* not the A10's 150 */
    assert_true(cr_gpufacts_tdp_w("A10") == 150);
    assert_true(cr_gpufacts_tdp_w("MI300X") == 0);
    static const char *const models[] = {"a100", "a100-40gb", "h100", "h200", "b200", "a30"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        int cs = 0, ms = 0;
        assert_int_equal(cr_mig_geometry(models[i], &cs, &ms), 0);
        const cr_mig_geom *g = cr_gpufacts_mig_geom(cs, ms);
        assert_non_null(g);
        for (size_t k = 0; k < g->nshapes; k++) {
            const cr_mig_profile *p =
                cr_mig_lookup(models[i], g->shapes[k].compute_slices, g->shapes[k].mem_slices);
            assert_non_null(p);
            assert_int_equal(p->placement_mask, g->shapes[k].placement_mask);
        }
    }
}

static void test_mig(void **state)
{
    (void)state;
    const cr_mig_profile *p = cr_mig_lookup("a100", 1, 1);
    assert_non_null(p);
    assert_string_equal(p->name, "1g.10gb");
    /* Same name, different slices on the 40GB part: key on slices, not names. */
    p = cr_mig_lookup("A100 40GB SXM", 1, 2);
    assert_string_equal(p->name, "1g.10gb");
    assert_string_equal(cr_mig_lookup("a100-40gb", 1, 1)->name, "1g.5gb");
    assert_string_equal(cr_mig_lookup("H200 SXM", 7, 8)->name, "7g.141gb");
    assert_string_equal(cr_mig_lookup("a30", 2, 2)->name, "2g.12gb");
    assert_null(cr_mig_lookup("a30", 3, 4));
    int cs = 0, ms = 0;
    assert_int_equal(cr_mig_geometry("a30", &cs, &ms), 0);
    assert_int_equal(cs, 4);
    assert_int_equal(ms, 4);
    assert_int_equal(cr_mig_geometry("L40S", &cs, &ms), CR_ENOENT);
    size_t n = 0;
    assert_null(cr_mig_profiles("l40s", &n));
    assert_int_equal(n, 0);
    const cr_mig_profile *all = cr_mig_profiles("h100", &n);
    assert_int_equal(n, 7);
    assert_string_equal(all[1].name, "1g.10gb+me");
    p = cr_mig_find("h100", "3g.40gb");
    assert_non_null(p);
    assert_true(cr_mig_placement_ok(p, 0));
    assert_true(cr_mig_placement_ok(p, 4));
    assert_false(cr_mig_placement_ok(p, 2));
    assert_false(cr_mig_placement_ok(p, -1));
    assert_false(cr_mig_placement_ok(cr_mig_find("h100", "2g.20gb"), 6));
    /* Any model's names, each once (mig_profile at submit). */
    assert_true(cr_mig_known("1g.6gb") && cr_mig_known("7g.141gb") && cr_mig_known("1g.5gb"));
    assert_false(cr_mig_known("9g.999gb") || cr_mig_known(""));
    char names[1024];
    size_t need = cr_mig_names(names, sizeof names);
    assert_int_equal(need, strlen(names));
    assert_non_null(strstr(names, "1g.10gb, 1g.10gb+me, 1g.20gb"));
    assert_null(strstr(strstr(names, "1g.10gb,") + 1, " 1g.10gb,")); /* A100 40 has it too */
    char small[12];
    assert_int_equal(cr_mig_names(small, sizeof small), need);
    assert_string_equal(small, "1g.10gb");
    assert_true(cr_mig_placement_ok(cr_mig_find("h100", "1g.20gb"), 6));
    assert_string_equal(cr_mig_smallest_fit("h100", UINT64_C(30000000000), 1)->name, "3g.40gb");
    assert_string_equal(cr_mig_smallest_fit("h100", UINT64_C(5000000000), 2)->name, "2g.20gb");
    assert_null(cr_mig_smallest_fit("a30", UINT64_C(30000000000), 1));
}

static void test_prices(void **state)
{
    (void)state;
    cr_catalog *c = load_default();
    char path[1024], err[256];
    cr_prices *p = NULL;
    assert_int_equal(
        cr_prices_load(src_path("data/prices.csv", path, sizeof path), c, &p, err, sizeof err), 0);
    assert_true(fabs(cr_prices_get(p, cr_catalog_find(c, "h100")) - 2.69) < 1e-9);
    assert_true(cr_known(cr_prices_get(p, cr_catalog_find(c, "l40s"))));
    assert_false(cr_known(cr_prices_get(p, cr_catalog_find(c, "k80"))));
    assert_false(cr_known(cr_prices_get(NULL, cr_catalog_find(c, "h100"))));
    cr_prices_set(p, cr_catalog_find(c, "k80"), 0.1);
    assert_true(fabs(cr_prices_get(p, cr_catalog_find(c, "K80")) - 0.1) < 1e-12);
    cr_prices_free(p);

    const char *bad = "model,usd_per_gpu_hour\nh100,2.5\nl40s,cheap\n";
    p = NULL;
    assert_int_equal(cr_prices_parse(bad, strlen(bad), "p.csv", c, &p, err, sizeof err), CR_EPARSE);
    assert_null(p);
    assert_int_equal(strncmp(err, "p.csv:3:6: usd_per_gpu_hour", 27), 0);
    const char *unknown = "model,usd_per_gpu_hour\nrtx9090,2.5\n";
    assert_int_equal(cr_prices_parse(unknown, strlen(unknown), "p.csv", c, &p, err, sizeof err),
                     CR_EPARSE);
    assert_non_null(strstr(err, "p.csv:2:1: model \"rtx9090\""));
    cr_catalog_free(c);
}

static void test_gavel(void **state)
{
    (void)state;
    char path[1024], err[256];
    cr_gavel *g = NULL;
    assert_int_equal(cr_gavel_load(src_path("tests/model/data/gavel_small.json", path, sizeof path),
                                   &g, err, sizeof err),
                     0);
    assert_int_equal(cr_gavel_worker_count(g), 4);
    assert_string_equal(cr_gavel_worker(g, 0), "k80");
    assert_int_equal(cr_gavel_job_count(g), 3);
    double t = 0, pair[2] = {0, 0};
    assert_int_equal(cr_gavel_get(g, "v100", "ResNet-50 (batch size 64)", 1, &t), 0);
    assert_true(fabs(t - 4.394774823323071) < 1e-12);
    assert_int_equal(cr_gavel_get(g, "v100", "ResNet-50 (batch size 64)", 8, &t), CR_ENOENT);
    assert_int_equal(cr_gavel_get(g, "h100", "A3C", 1, &t), CR_ENOENT);
    assert_int_equal(cr_gavel_get_pair(g, "k80", "A3C", 1, "ResNet-50 (batch size 64)", 1, pair),
                     0);
    assert_true(fabs(pair[0] - 1.8687176360231106) < 1e-12);
    assert_true(fabs(pair[1] - 0.30924078600857285) < 1e-12);
    assert_int_equal(cr_gavel_get_pair(g, "k80", "A3C", 1, "A3C", 2, pair), CR_ENOENT);
    assert_string_equal(cr_gavel_worker_alias("v100_unconsolidated"), "v100");
    assert_null(cr_gavel_worker_alias("tpu"));
    cr_gavel_free(g);

    const char *bad_json = "{\"v100\": {\n  \"('A3C', 1)\": {\"null\": 1.0,}\n}}";
    g = NULL;
    assert_int_equal(cr_gavel_parse(bad_json, strlen(bad_json), "t.json", &g, err, sizeof err),
                     CR_EPARSE);
    assert_int_equal(strncmp(err, "t.json:2:", 9), 0);
    const char *bad_key = "{\"v100\": {\"A3C\": {\"null\": 1.0}}}";
    assert_int_equal(cr_gavel_parse(bad_key, strlen(bad_key), "t.json", &g, err, sizeof err),
                     CR_EPARSE);
    assert_non_null(strstr(err, "key \"A3C\""));
    const char *neg = "{\"v100\": {\"('A3C', 1)\": {\"null\": -1}}}";
    assert_int_equal(cr_gavel_parse(neg, strlen(neg), "t.json", &g, err, sizeof err), CR_EPARSE);
    assert_null(g);
}

static void test_workload_names(void **state)
{
    (void)state;
    int v = -1;
    assert_int_equal(cr_kind_parse("inference", &v), 0);
    assert_int_equal(v, CR_KIND_INFERENCE);
    assert_int_equal(cr_kind_parse("training", &v), CR_EINVAL);
    assert_int_equal(cr_method_parse("QLoRA", &v), 0);
    assert_int_equal(v, CR_METHOD_QLORA);
    assert_int_equal(cr_precision_parse("fp8", &v), 0);
    assert_string_equal(cr_precision_name(v), "fp8");
    assert_int_equal(cr_objective_parse("energy", &v), 0);
    assert_string_equal(cr_objective_name(v), "energy");
    unsigned needs = 0;
    char err[64], buf[64];
    assert_int_equal(cr_needs_parse("fp64,ecc,nvenc,rt", &needs, err, sizeof err), 0);
    assert_int_equal(needs, CR_NEED_FP64 | CR_NEED_ECC | CR_NEED_NVENC | CR_NEED_RT);
    assert_string_equal(cr_needs_fmt(needs, buf, sizeof buf), "fp64,ecc,nvenc,rt");
    assert_int_equal(cr_needs_parse("fp64,gpu", &needs, err, sizeof err), CR_EINVAL);
    assert_non_null(strstr(err, "\"gpu\""));
    assert_int_equal(cr_needs_parse("fp64,", &needs, err, sizeof err), CR_EINVAL);

    cr_workload w;
    cr_workload_init(&w);
    assert_int_equal(cr_workload_check(&w, err, sizeof err), 0);
    w.method = CR_METHOD_LORA;
    assert_int_equal(cr_workload_check(&w, err, sizeof err), CR_EINVAL);
    assert_non_null(strstr(err, "method"));
    cr_workload_init(&w);
    w.tenants = 0;
    assert_int_equal(cr_workload_check(&w, err, sizeof err), CR_EINVAL);
}

static void test_estimates(void **state)
{
    (void)state;
    cr_catalog *c = load_default();
    cr_perf_env env = {c, NULL, NULL};
    cr_workload w;
    cr_estimate e;

    /* LoRA of a 7B model fits one 48 GB card. */
    cr_workload_init(&w);
    w.kind = CR_KIND_FINETUNE;
    w.method = CR_METHOD_LORA;
    w.params = 7e9;
    w.tokens = 1e8;
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "l40s"), 0, &e), 0);
    assert_true(e.fits);
    assert_int_equal(e.gpu_count, 1);
    assert_true(e.time_ns > 0 && e.energy_j > 0 && e.mfu > 0.1 && e.mfu < 0.7);
    assert_false(cr_known(e.cost_usd)); /* no price table */
    /* Full fine-tuning of 70B needs many GPUs. */
    w.method = CR_METHOD_FULL;
    w.params = 70e9;
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "h100"), 0, &e), 0);
    assert_true(e.fits);
    assert_true(e.gpu_count >= 16);
    /* A fixed count that cannot hold it is refused with the memory reason. */
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "h100"), 1, &e), 0);
    assert_false(e.fits);
    assert_non_null(strstr(e.reason, "does not fit on 1 GPUs"));

    /* 70B bf16 inference cannot fit on T4s. */
    cr_workload_init(&w);
    w.kind = CR_KIND_INFERENCE;
    w.params = 70e9;
    w.rate_per_s = 1;
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "t4"), 0, &e), 0);
    assert_false(e.fits);
    assert_non_null(strstr(e.reason, "weights need 140 GB"));
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "h200"), 0, &e), 0);
    assert_true(e.fits);
    assert_true(e.tp >= 1 && e.gpu_count >= 1 && e.tpot_ns > 0 && e.ttft_ns > 0);
    assert_true(e.tpot_ns <= 50 * INT64_C(1000000));

    /* FP64 HPC refuses 1/64-rate cards. */
    cr_workload_init(&w);
    w.kind = CR_KIND_HPC;
    w.needs = CR_NEED_FP64 | CR_NEED_ECC;
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "l40s"), 0, &e), 0);
    assert_false(e.fits);
    assert_string_equal(e.reason, "no FP64: 1/64 rate (1.43 TFLOP/s)");
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "a100"), 0, &e), 0);
    assert_true(e.fits);

    /* Bad input is refused, not estimated. */
    w.tenants = -1;
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "a100"), 0, &e), CR_EINVAL);
    cr_catalog_free(c);
}

static void test_measured_override(void **state)
{
    (void)state;
    cr_catalog *c = load_default();
    char path[1024], err[256];
    cr_gavel *g = NULL;
    assert_int_equal(cr_gavel_load(src_path("tests/model/data/gavel_small.json", path, sizeof path),
                                   &g, err, sizeof err),
                     0);
    cr_perf_env env = {c, NULL, g};
    cr_workload w;
    cr_workload_init(&w);
    w.kind = CR_KIND_BATCH;
    w.measured_job = "ResNet-50 (batch size 64)";
    w.steps = 10000;
    cr_estimate e;
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "v100"), 0, &e), 0);
    assert_true(e.fits);
    assert_true(e.measured);
    assert_true(fabs((double)e.time_ns / 1e9 - 10000 / 4.394774823323071) < 1e-3);
    /* Newer types are extrapolated from the V100 measurement. */
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "h100"), 0, &e), 0);
    assert_true(e.fits);
    assert_false(e.measured);
    assert_non_null(strstr(e.reason, "extrapolated"));
    assert_true(e.throughput > 4.394774823323071 * 2);
    /* No measurement at that scale factor and no FLOPs: refused with the reason. */
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "h100"), 8, &e), 0);
    assert_false(e.fits);
    assert_non_null(strstr(e.reason, "no measured throughput"));

    double *tput = calloc(cr_catalog_count(c), sizeof *tput);
    int n = cr_perf_throughputs(&env, &w, 1, tput);
    assert_true(n >= 20); /* k80, p100, v100 measured; the rest extrapolated */
    int v = cr_catalog_index(c, cr_catalog_find(c, "v100"));
    int k = cr_catalog_index(c, cr_catalog_find(c, "k80"));
    assert_true(tput[v] > tput[k] && tput[k] > 0);
    assert_true(tput[cr_catalog_index(c, cr_catalog_find(c, "h100"))] > tput[v]);
    free(tput);
    cr_gavel_free(g);
    cr_catalog_free(c);
}

static void test_advise_ranking(void **state)
{
    (void)state;
    cr_catalog *c = load_default();
    char path[1024], err[256];
    cr_prices *p = NULL;
    assert_int_equal(
        cr_prices_load(src_path("data/prices.csv", path, sizeof path), c, &p, err, sizeof err), 0);
    cr_perf_env env = {c, p, NULL};
    cr_workload w;
    cr_workload_init(&w);
    w.kind = CR_KIND_FINETUNE;
    w.method = CR_METHOD_LORA;
    w.params = 7e9;
    w.tokens = 1e8;
    for (int obj = 0; obj < CR_OBJ__COUNT; obj++) {
        cr_advice a;
        assert_int_equal(cr_perf_advise(&env, &w, obj, 0, &a), 0);
        assert_true(a.ranked_count > 5);
        assert_int_equal(a.ranked_count + a.refused_count + a.skipped, cr_catalog_count(c));
        assert_int_equal(a.skipped, 3);
        for (size_t i = 1; i < a.ranked_count; i++) {
            const cr_estimate *x = &a.ranked[i - 1], *y = &a.ranked[i];
            if (obj == CR_OBJ_TIME) {
                assert_true(x->time_ns <= y->time_ns * 1.001);
            } else if (obj == CR_OBJ_ENERGY) {
                assert_true(x->energy_j <= y->energy_j * 1.001);
            } else if (cr_known(y->cost_usd)) {
                assert_true(cr_known(x->cost_usd) && x->cost_usd <= y->cost_usd * 1.001);
            }
        }
        cr_advice_fini(&a);
        assert_null(a.ranked);
    }
    assert_int_equal(cr_perf_advise(&env, &w, 7, 0, &(cr_advice){0}), CR_EINVAL);
    cr_prices_free(p);
    cr_catalog_free(c);
}

/* The models catalog: loads, every row's published parameter count agrees
 * with its shape (embeddings tied or untied), the default shapes are the
 * catalog's rows, and bad files are refused with file:line:col. */
static void test_arch_catalog(void **state)
{
    (void)state;
    char path[1024], err[256];
    cr_arch_catalog *mc = NULL;
    assert_int_equal(
        cr_arch_load(src_path("data/models/models.csv", path, sizeof path), &mc, err, sizeof err),
        0);
    assert_true(cr_arch_count(mc) >= 40);
    for (size_t i = 0; i < cr_arch_count(mc); i++) {
        const cr_arch *a = cr_arch_at(mc, i);
        double tot, act;
        cr_arch_count_params(a, &tot, &act);
        double tied = tot - (double)a->vocab * a->hidden;
        if (!(a->params >= tied * 0.93 && a->params <= tot * 1.03)) {
            fprintf(stderr, "%s: published %.4g, shape gives %.4g..%.4g\n", a->name, a->params,
                    tied, tot);
        }
        assert_true(a->params >= tied * 0.93 && a->params <= tot * 1.03);
        assert_true(fabs(act / a->active - 1) < 0.05 || a->experts == 0);
    }
    const cr_arch *l = cr_arch_find(mc, "Llama 3.1 405B");
    assert_non_null(l);
    assert_int_equal(l->layers, 126);
    assert_int_equal(l->kv_heads, 8);
    assert_true(fabs(cr_arch_kv_bytes(l, 2) - 2.0 * 126 * 8 * 128 * 2) < 1);
    const cr_arch *d = cr_arch_find(mc, "deepseek-v3");
    assert_int_equal(d->kv_lora_rank, 512);
    assert_true(fabs(cr_arch_kv_bytes(d, 2) - 61.0 * 576 * 2) < 1); /* MLA latent + rope key */
    assert_true(cr_arch_expert_params(d) > 0.9 * d->params);
    static const double sizes[] = {1e9, 3e9, 8e9, 14e9, 32e9, 70e9, 180e9, 405e9, 1e12};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        cr_arch def;
        cr_arch_default(sizes[i], &def);
        const cr_arch *row = cr_arch_find(mc, def.name);
        assert_non_null(row);
        assert_int_equal(def.layers, row->layers);
        assert_int_equal(def.hidden, row->hidden);
        assert_int_equal(def.kv_heads, row->kv_heads);
        assert_int_equal(def.head_dim, row->head_dim);
        assert_int_equal(def.ffn, row->ffn);
        assert_int_equal(def.vocab, row->vocab);
    }
    cr_arch def;
    cr_arch_default(8e9, &def);
    assert_string_equal(def.name, "llama-3.1-8b"); /* GQA, not Llama 2 7B's 32 KV heads */
    cr_arch_default(175e9, &def);
    assert_int_equal(def.kv_heads, 8); /* not GPT-3's 96 */
    cr_arch_free(mc);

    static const char *const bad[][2] = {
        {"name,params,layers,hidden,heads,head_dim,ffn\n", "m.csv:1:1: header: required column"},
        {"name,params,layers,hidden,heads,kv_heads,head_dim,ffn,vocab\nx,7e9,32,4096,32,5,128,1,"
         "32000\n",
         "m.csv:2:1: x: kv-heads: must divide heads"},
        {"name,params,layers,hidden,heads,kv_heads,head_dim,ffn,vocab\nx,7e9,3.5,4096,32,8,128,1,"
         "32000\n",
         "m.csv:2:"},
        {"name,params,layers,hidden,heads,kv_heads,head_dim,ffn,vocab\n",
         "m.csv:2:1: no model rows"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mc = NULL;
        assert_int_equal(cr_arch_parse(bad[i][0], strlen(bad[i][0]), "m.csv", &mc, err, sizeof err),
                         CR_EPARSE);
        assert_null(mc);
        if (strncmp(err, bad[i][1], strlen(bad[i][1])) != 0) {
            fprintf(stderr, "got: %s\n", err);
        }
        assert_int_equal(strncmp(err, bad[i][1], strlen(bad[i][1])), 0);
    }
}

/* Serving plans: 405B bf16 on H100 runs as tp8 x pp2 across two servers;
 * fp8 needs fewer GPUs; MoE decode is charged for active parameters; MLA
 * keeps DeepSeek's KV cache small; a bridged PCIe pair can use tp4. */
static void test_serving_plans(void **state)
{
    (void)state;
    char path[1024], err[256];
    cr_catalog *c = load_default();
    cr_arch_catalog *mc = NULL;
    assert_int_equal(
        cr_arch_load(src_path("data/models/models.csv", path, sizeof path), &mc, err, sizeof err),
        0);
    cr_perf_env env = {c, NULL, NULL};
    cr_workload w;
    cr_workload_init(&w);
    w.kind = CR_KIND_INFERENCE;
    w.arch = *cr_arch_find(mc, "llama-3.1-405b");
    w.params = w.arch.params;
    w.rate_per_s = 1;
    w.tpot_ns = 200 * INT64_C(1000000);
    cr_estimate e, e8;
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "h100"), 0, &e), 0);
    assert_true(e.fits);
    assert_int_equal(e.tp, 8);
    assert_int_equal(e.pp, 2);
    assert_true(e.nodes >= 2);
    assert_non_null(strstr(e.plan, "tp8 x pp2"));
    assert_non_null(strstr(e.reason, "pp2 over network"));
    w.precision = CR_PREC_FP8;
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "h100"), 0, &e8), 0);
    assert_true(e8.fits && e8.gpu_count < e.gpu_count);
    /* Exact search: the count is the minimum; one replica fewer fails. */
    w.precision = CR_PREC_BF16;
    w.rate_per_s = 10;
    w.tpot_ns = 0;
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "h200"), 0, &e), 0);
    assert_true(e.fits && e.replicas > 2);
    int per = e.tp * e.pp;
    assert_int_equal(e.gpu_count % per, 0);
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "h200"), e.gpu_count - per, &e8),
                     0);
    assert_false(e8.fits);

    /* MoE: Mixtral 8x7B decodes faster than a dense model of its total size. */
    cr_workload_init(&w);
    w.kind = CR_KIND_INFERENCE;
    w.rate_per_s = 0.01;
    w.arch = *cr_arch_find(mc, "mixtral-8x7b");
    w.params = w.arch.params;
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "h100"), 2, &e), 0);
    cr_workload dense = w;
    memset(&dense.arch, 0, sizeof dense.arch);
    assert_int_equal(cr_perf_estimate(&env, &dense, cr_catalog_find(c, "h100"), 2, &e8), 0);
    assert_true(e.fits && e8.fits);
    assert_true(e.tpot_ns < e8.tpot_ns);
    assert_true(e.ttft_ns < e8.ttft_ns); /* prefill FLOPs on 12.9B active, not 46.7B */

    /* FP8 KV halves the cache: more sequences fit next to the weights. */
    cr_workload_init(&w);
    w.kind = CR_KIND_INFERENCE;
    w.arch = *cr_arch_find(mc, "llama-3.1-8b");
    w.params = w.arch.params;
    w.rate_per_s = 2;
    w.prompt_tokens = 8000;
    w.tpot_ns = 100 * INT64_C(1000000); /* vLLM's default stack: 59 ms at the 50 ms default */
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "h100"), 1, &e), 0);
    w.kv_precision = CR_PREC_FP8;
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "h100"), 1, &e8), 0);
    assert_true(e.fits && e8.fits);
    assert_true(e8.mem_per_gpu_bytes < e.mem_per_gpu_bytes);
    w.kv_precision = 7; /* not a KV precision */
    assert_int_equal(cr_workload_check(&w, err, sizeof err), CR_EINVAL);
    assert_non_null(strstr(err, "kv-precision"));

    /* A bridged PCIe card (NVLink pairs) may still use tp4 over PCIe. */
    cr_workload_init(&w);
    w.kind = CR_KIND_INFERENCE;
    w.arch = *cr_arch_find(mc, "llama-3.3-70b");
    w.params = w.arch.params;
    w.rate_per_s = 0.5;
    w.tpot_ns = 200 * INT64_C(1000000);
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "a40"), 4, &e), 0);
    assert_true(e.fits);
    assert_int_equal(e.tp * e.pp * e.replicas, 4);
    cr_arch_free(mc);
    cr_catalog_free(c);
}

/* NVENC capacity: streams per GPU = engines x the note's per-engine rate at
 * (codec, preset, rc) x 1080p pixels / (stream pixels x stream fps); N
 * streams take ceil(N / that) GPUs; GPUs without NVENC are refused. And
 * the compiled table is the cited data file, row for row. */
static void test_nvenc_capacity(void **state)
{
    (void)state;
    cr_catalog *c = load_default();
    cr_perf_env env = {c, NULL, NULL};
    cr_workload w;
    cr_estimate e;
    cr_workload_init(&w);
    w.kind = CR_KIND_VISUAL;
    w.streams = 100;
    w.enc_codec = CR_CODEC_HEVC;
    w.enc_preset = 5;
    w.enc_cbr = 0;
    /* L4: 2 NVENC x 411 fps (Ada, HEVC P5 VBR) / 30 = 27.4 streams/GPU */
    const cr_gpu_type *l4 = cr_catalog_find(c, "l4");
    assert_non_null(l4);
    assert_int_equal(l4->nvenc, 2);
    assert_int_equal(cr_perf_estimate(&env, &w, l4, 0, &e), 0);
    assert_true(e.fits);
    double cap = 2 * 411.0 / 30;
    assert_int_equal(e.gpu_count, (int)ceil(100 / cap));
    assert_int_equal(e.gpu_count, 4);
    assert_non_null(strstr(e.reason, "encode-bound"));
    /* exactly the capacity of 3 GPUs needs 3; one stream more needs 4 */
    w.streams = floor(3 * cap);
    assert_int_equal(cr_perf_estimate(&env, &w, l4, 0, &e), 0);
    assert_int_equal(e.gpu_count, 3);
    w.streams = floor(3 * cap) + 1;
    assert_int_equal(cr_perf_estimate(&env, &w, l4, 0, &e), 0);
    assert_int_equal(e.gpu_count, 4);
    /* 4k60 has 8x the pixel rate of 1080p30 */
    w.streams = 10;
    w.video_w = 3840;
    w.video_h = 2160;
    w.video_fps = 60;
    assert_int_equal(cr_perf_estimate(&env, &w, l4, 0, &e), 0);
    assert_int_equal(e.gpu_count, (int)ceil(10 / (cap / 8)));
    /* a fixed count too small is refused with the capacity */
    assert_int_equal(cr_perf_estimate(&env, &w, l4, 1, &e), 0);
    assert_false(e.fits);
    assert_non_null(strstr(e.reason, "GPUs carry"));
    w.video_w = 1920;
    w.video_h = 1080;
    w.video_fps = 30;
    /* GPUs without NVENC: A100, H100, A30 (catalog nvenc 0) */
    const char *none[] = {"a100", "h100", "a30", "h200"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        const cr_gpu_type *g = cr_catalog_find(c, none[i]);
        assert_non_null(g);
        assert_int_equal(cr_perf_estimate(&env, &w, g, 0, &e), 0);
        assert_false(e.fits);
        assert_string_equal(e.reason, "no video encoder (NVENC)");
    }
    /* the same GPUs still decode when nothing is encoded */
    w.enc_codec = CR_CODEC_NONE;
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "h100"), 0, &e), 0);
    assert_true(e.fits);
    /* AV1: no published rate before Ada */
    w.enc_codec = CR_CODEC_AV1;
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "t4"), 0, &e), 0);
    assert_false(e.fits);
    assert_non_null(strstr(e.reason, "no published NVENC av1 rate"));
    assert_int_equal(cr_perf_estimate(&env, &w, cr_catalog_find(c, "l40s"), 0, &e), 0);
    assert_true(e.fits);
    /* a preset NVIDIA publishes no rate for is refused by the check */
    char err[256];
    w.enc_preset = 4;
    assert_int_equal(cr_workload_check(&w, err, sizeof err), CR_EINVAL);
    assert_non_null(strstr(err, "preset"));

    /* data/gpus/nvenc.csv == the compiled table */
    char path[1024], line[1024];
    FILE *f = fopen(src_path("data/gpus/nvenc.csv", path, sizeof path), "r");
    assert_non_null(f);
    int n = 0, count = 0;
    const cr_nvenc_rate *t = cr_nvenc_table(&count);
    assert_non_null(fgets(line, sizeof line, f)); /* header */
    while (fgets(line, sizeof line, f)) {
        char arch[32], codec[8], rc[8], tun[8];
        int preset, fps;
        assert_int_equal(sscanf(line, "%31[^,],%7[^,],p%d,%7[^,],%7[^,],%d,", arch, codec, &preset,
                                rc, tun, &fps),
                         6);
        assert_true(strstr(line, ",https://docs.nvidia.com/") != NULL);
        assert_true(n < count);
        assert_string_equal(arch, t[n].arch);
        assert_int_equal(cr_codec_parse(codec), t[n].codec);
        assert_int_equal(preset, t[n].preset);
        assert_int_equal(strcmp(rc, "cbr") == 0, t[n].cbr);
        assert_int_equal(fps, t[n].fps);
        n++;
    }
    fclose(f);
    assert_int_equal(n, count);
    cr_catalog_free(c);
}

/* MIG at batch 1 (docs/model.md, MIG): one request alone fills only part
 * of a big GPU, so the smallest slice keeps more than its share of the
 * whole GPU's first-token speed. BERT-large shape, int8, 384 tokens
 * against MLPerf Inference v1.0 SingleStream mean latencies (NVIDIA,
 * closed): A100 80GB 1g.10gb 4.777 ms vs whole 1.593 ms (fit), A30 1g
 * 6.041 ms vs whole 2.212 ms (check); within 15%. A saturated slice
 * still gets its share times MIG_SLICE_EFF, and decode (bandwidth-bound)
 * stays near the slice's bandwidth share. */
/* Issue 26: the knobs published results depend on. */
static void test_knobs(void **state)
{
    (void)state;
    char path[1024], err[256];
    cr_catalog *c = load_default();
    cr_arch_catalog *mc = NULL;
    assert_int_equal(
        cr_arch_load(src_path("data/models/models.csv", path, sizeof path), &mc, err, sizeof err),
        0);
    cr_perf_env env = {c, NULL, NULL};
    const cr_gpu_type *h100 = cr_catalog_find(c, "h100"), *a100 = cr_catalog_find(c, "a100");
    cr_workload w;
    cr_estimate e1, e2;

    /* Micro-batch 2 holds twice the activations of 1; no checkpointing
     * holds every layer's, full recompute only each layer's input. */
    cr_workload_init(&w);
    w.kind = CR_KIND_FINETUNE;
    w.method = CR_METHOD_LORA;
    w.arch = *cr_arch_find(mc, "llama-3.1-8b");
    w.params = w.arch.params;
    w.seq_len = 2048;
    w.batch = 2;
    w.ckpt = CR_CKPT_FULL;
    assert_int_equal(cr_perf_estimate(&env, &w, a100, 1, &e1), 0);
    w.micro_batch = 2;
    assert_int_equal(cr_perf_estimate(&env, &w, a100, 1, &e2), 0);
    assert_true(e1.fits && e2.fits);
    assert_true(e2.mem_per_gpu_bytes > e1.mem_per_gpu_bytes + 1e9);
    w.ckpt = CR_CKPT_NONE;
    assert_int_equal(cr_perf_estimate(&env, &w, a100, 1, &e1), 0);
    assert_true(e1.fits && e1.mem_per_gpu_bytes > e2.mem_per_gpu_bytes * 1.5);
    /* ... and full recompute pays one more forward pass. */
    assert_true(e2.step_ns > e1.step_ns * 1.2);

    /* A Hugging Face Trainer stack runs below Megatron's efficiency. */
    w.ckpt = CR_CKPT_AUTO;
    w.micro_batch = 0;
    w.stack = CR_STACK_MEGATRON;
    assert_int_equal(cr_perf_estimate(&env, &w, a100, 1, &e1), 0);
    w.stack = CR_STACK_HF;
    assert_int_equal(cr_perf_estimate(&env, &w, a100, 1, &e2), 0);
    assert_true(e2.throughput < e1.throughput * 0.6);

    /* Bad input names the field. */
    w.stack = CR_STACK_VLLM;
    assert_int_equal(cr_workload_check(&w, err, sizeof err), CR_EINVAL);
    assert_non_null(strstr(err, "stack"));
    w.stack = 99;
    assert_int_equal(cr_workload_check(&w, err, sizeof err), CR_EINVAL);
    assert_non_null(strstr(err, "stack"));
    int v = 0;
    assert_int_equal(cr_stack_parse("tensorflow", &v), CR_EINVAL);
    assert_int_equal(cr_stack_parse("fsdp", &v), 0);
    assert_int_equal(v, CR_STACK_FSDP);
    w.stack = CR_STACK_AUTO;
    w.micro_batch = 4;
    assert_int_equal(cr_workload_check(&w, err, sizeof err), CR_EINVAL);
    assert_non_null(strstr(err, "micro-batch"));

    /* Serving memory: vLLM takes 90% of the 79.6 GiB an H100 reports. */
    cr_workload_init(&w);
    w.kind = CR_KIND_INFERENCE;
    assert_true(fabs(cr_gpu_reported_mem_bytes(h100) / 1073741824.0 - 79.65) < 0.1);
    assert_true(fabs(cr_perf_serve_mem_bytes(&w, h100) - 0.9 * cr_gpu_reported_mem_bytes(h100)) <
                1);
    w.gpu_mem_util = 0.5;
    assert_true(cr_perf_serve_mem_bytes(&w, h100) < 0.51 * cr_gpu_reported_mem_bytes(h100));
    w.gpu_mem_util = 1.5;
    assert_int_equal(cr_workload_check(&w, err, sizeof err), CR_EINVAL);
    assert_non_null(strstr(err, "gpu-memory-utilization"));

    /* Beam search: four sequences per request hold more KV and decode a
     * bigger batch than one. */
    cr_workload_init(&w);
    w.kind = CR_KIND_INFERENCE;
    w.arch = *cr_arch_find(mc, "llama-3.1-8b");
    w.params = w.arch.params;
    w.rate_per_s = 2;
    w.tpot_ns = INT64_C(1000000000);
    assert_int_equal(cr_perf_estimate(&env, &w, h100, 1, &e1), 0);
    w.beams = 4;
    assert_int_equal(cr_perf_estimate(&env, &w, h100, 1, &e2), 0);
    assert_true(e1.fits && e2.fits);
    assert_true(e2.mem_per_gpu_bytes > e1.mem_per_gpu_bytes);
    assert_true(e2.tpot_ns > e1.tpot_ns);
    /* A prompt past the model's context is refused, naming the field. */
    w.beams = 0;
    w.prompt_tokens = 200000;
    assert_int_equal(cr_workload_check(&w, err, sizeof err), CR_EINVAL);
    assert_non_null(strstr(err, "prompt"));
    char ex[2048];
    w.prompt_tokens = 1000;
    cr_perf_explain(&w, ex, sizeof ex);
    assert_non_null(strstr(ex, "stack: vllm"));
    assert_non_null(strstr(ex, "serving memory: 90%"));
    cr_arch_free(mc);
    cr_catalog_free(c);
}

/* Issue 26: FP4/FP6 where the hardware has them. The catalog's Blackwell
 * rows carry the rates (FP4 twice FP8, FP6 at FP8's); fp4 serving on a
 * B200 holds a 70B model in less memory and decodes faster than fp8; on
 * a GPU without the tensor cores it is refused saying so; training at fp4
 * is refused naming the field. */
static void test_fp4(void **state)
{
    (void)state;
    char path[1024], err[256];
    cr_catalog *c = load_default();
    cr_arch_catalog *mc = NULL;
    assert_int_equal(
        cr_arch_load(src_path("data/models/models.csv", path, sizeof path), &mc, err, sizeof err),
        0);
    cr_perf_env env = {c, NULL, NULL};
    const cr_gpu_type *b200 = cr_catalog_find(c, "B200"), *gb200 = cr_catalog_find(c, "GB200");
    const cr_gpu_type *h100 = cr_catalog_find(c, "h100");
    assert_non_null(b200);
    assert_non_null(gb200);
    assert_true(fabs(cr_gpu_peak_flops(b200, CR_PREC_FP4) - 9000e12) < 1e9);
    assert_true(fabs(cr_gpu_peak_flops(b200, CR_PREC_FP6) - cr_gpu_peak_flops(b200, CR_PREC_FP8)) <
                1e9);
    assert_true(fabs(cr_gpu_peak_flops(gb200, CR_PREC_FP4) - 10000e12) < 1e9);
    assert_true(cr_gpu_peak_flops(h100, CR_PREC_FP4) == 0); /* no fallback */
    int v = 0;
    assert_int_equal(cr_precision_parse("fp4", &v), 0);
    assert_int_equal(v, CR_PREC_FP4);
    assert_int_equal(cr_precision_parse("fp6", &v), 0);
    assert_int_equal(cr_precision_parse("fp5", &v), CR_EINVAL);

    cr_workload w;
    cr_estimate e8, e4;
    cr_workload_init(&w);
    w.kind = CR_KIND_INFERENCE;
    w.arch = *cr_arch_find(mc, "llama-3.1-70b");
    w.params = w.arch.params;
    w.rate_per_s = 1;
    w.precision = CR_PREC_FP8;
    assert_int_equal(cr_perf_estimate(&env, &w, b200, 1, &e8), 0);
    w.precision = CR_PREC_FP4;
    assert_int_equal(cr_perf_estimate(&env, &w, b200, 1, &e4), 0);
    assert_true(e8.fits && e4.fits);
    assert_true(e4.mem_per_gpu_bytes < e8.mem_per_gpu_bytes);
    assert_true(e4.tpot_ns < e8.tpot_ns);
    assert_int_equal(cr_perf_estimate(&env, &w, h100, 1, &e4), 0);
    assert_false(e4.fits);
    assert_non_null(strstr(e4.reason, "no FP4 tensor cores"));
    /* the advisor ranks only the types that have them */
    cr_advice a;
    assert_int_equal(cr_perf_advise(&env, &w, CR_OBJ_TIME, 0, &a), 0);
    assert_true(a.ranked_count >= 1);
    for (size_t i = 0; i < a.ranked_count; i++) {
        assert_true(cr_gpu_peak_flops(a.ranked[i].gpu, CR_PREC_FP4) > 0);
    }
    cr_advice_fini(&a);
    w.kind = CR_KIND_PRETRAIN;
    assert_int_equal(cr_workload_check(&w, err, sizeof err), CR_EINVAL);
    assert_non_null(strstr(err, "precision: fp4 is for serving"));
    cr_arch_free(mc);
    cr_catalog_free(c);
}

/* Issue 26: the metric contract, the estimator and tenant isolation. */
static void test_learn(void **state)
{
    (void)state;
    char err[128];
    cr_metric m;
    memset(&m, 0, sizeof m);
    const char *ok = "corral-metric tokens_per_s=12345.5 step_time_s=0.82";
    assert_int_equal(cr_metric_parse_line(ok, strlen(ok), &m, err, sizeof err), 0);
    assert_true(fabs(m.tokens_per_s - 12345.5) < 1e-9 && fabs(m.step_time_s - 0.82) < 1e-9);
    const char *other = "epoch 3 loss 1.2";
    assert_int_equal(cr_metric_parse_line(other, strlen(other), &m, err, sizeof err), 1);
    const char *prefixed = "corral-metrics tokens_per_s=1";
    assert_int_equal(cr_metric_parse_line(prefixed, strlen(prefixed), &m, err, sizeof err), 1);
    static const struct {
        const char *line, *field;
    } bad[] = {
        {"corral-metric tokens_per_s=fast", "tokens_per_s"},
        {"corral-metric tokens_per_s=-3", "tokens_per_s"},
        {"corral-metric tokens_per_s=nan", "tokens_per_s"},
        {"corral-metric tokens_per_s=", "tokens_per_s"},
        {"corral-metric mfu=0.4", "mfu"},
        {"corral-metric tokens_per_s", "tokens_per_s"},
        {"corral-metric step_time_s=1 step_time_s=2", "step_time_s"},
        {"corral-metric", "no field"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_metric keep = m;
        assert_int_equal(
            cr_metric_parse_line(bad[i].line, strlen(bad[i].line), &m, err, sizeof err), CR_EINVAL);
        assert_non_null(strstr(err, bad[i].field));
        assert_memory_equal(&keep, &m, sizeof m);
    }
    const char out_log[] =
        "start\ncorral-metric tokens_per_s=100\ncorral-metric tokens_per_s=oops\n"
        "corral-metric step_time_s=2.5\ncorral-metric tokens_per_s=200\n"
        "corral-metric bogus=1\nend";
    cr_metric_scan(out_log, sizeof out_log - 1, &m);
    assert_int_equal(m.good, 3);
    assert_int_equal(m.bad, 2);
    assert_true(fabs(m.tokens_per_s - 200) < 1e-9 && fabs(m.step_time_s - 2.5) < 1e-9);

    /* 5 observed runs of a workload class on a GPU type bring the error
     * for a new job of that class to <= 5% of its measured value. The
     * class runs 40% faster than the model says (a stack the model does
     * not know), with +-3% run-to-run noise. */
    cr_catalog *c = load_default();
    cr_perf_env env = {c, NULL, NULL};
    const cr_gpu_type *g = cr_catalog_find(c, "l40s");
    cr_obs *o = cr_obs_new();
    static const double noise[5] = {1.03, 0.97, 1.01, 0.98, 1.02};
    char sig[96], sig2[96];
    for (int i = 0; i < 5; i++) {
        cr_workload w;
        cr_workload_init(&w);
        w.kind = CR_KIND_FINETUNE;
        w.method = CR_METHOD_LORA;
        w.params = 8e9;
        w.seq_len = 1024 * (i + 1);
        w.tokens = 1e8 * (i + 1);
        cr_estimate e;
        assert_int_equal(cr_perf_estimate(&env, &w, g, 1, &e), 0);
        assert_true(e.fits);
        double measured = e.throughput * 1.40 * noise[i];
        cr_workload_signature(&w, sig, sizeof sig);
        assert_int_equal(cr_obs_add(o, "alpha", sig, g->name, 1, log(measured / e.throughput)), 0);
    }
    assert_string_equal(sig, "finetune/p8b/lora/megatron/bf16");
    cr_workload w;
    cr_workload_init(&w);
    w.kind = CR_KIND_FINETUNE;
    w.method = CR_METHOD_LORA;
    w.params = 7e9; /* a new job of the class: another size in the bucket, another length */
    w.seq_len = 3000;
    w.tokens = 5e8;
    cr_workload_signature(&w, sig2, sizeof sig2);
    assert_string_equal(sig, sig2);
    cr_estimate e;
    assert_int_equal(cr_perf_estimate(&env, &w, g, 1, &e), 0);
    double truth = e.throughput * 1.40;
    assert_true(fabs(e.throughput - truth) / truth > 0.25); /* the model alone: 29% off */
    double r[CR_OBS_KEEP];
    int n = cr_obs_get(o, "alpha", sig2, g->name, 1, r);
    assert_int_equal(n, 5);
    cr_learned l;
    cr_learn_combine(r, n, &l);
    cr_learn_apply(&l, &e);
    assert_true(fabs(e.throughput - truth) / truth <= 0.05);
    assert_true(l.lo < 1.40 && l.hi > 1.40);
    assert_non_null(strstr(e.reason, "calibrated from 5 runs on this cluster"));
    /* One run moves the estimate less (shrinkage toward the model). */
    cr_learned one;
    cr_learn_combine(r, 1, &one);
    assert_true(one.weight < l.weight && one.hi - one.lo > l.hi - l.lo);
    cr_learn_combine(NULL, 0, &one);
    assert_true(one.factor == 1 && one.runs == 0);

    /* Another tenant sees none of alpha's observations. */
    assert_int_equal(cr_obs_get(o, "beta", sig2, g->name, 1, r), 0);
    assert_int_equal(cr_obs_add(o, "beta", sig2, g->name, 1, 0.1), 0);
    assert_int_equal(cr_obs_get(o, "beta", sig2, g->name, 1, r), 1);
    assert_int_equal(cr_obs_get(o, "alpha", sig2, g->name, 1, r), 5);
    assert_int_equal(cr_obs_add(o, "alpha", sig2, g->name, 1, NAN), CR_EINVAL);
    /* The newest CR_OBS_KEEP are kept. */
    for (int i = 0; i < CR_OBS_KEEP + 10; i++) {
        cr_obs_add(o, "alpha", sig2, g->name, 1, 0.5);
    }
    assert_int_equal(cr_obs_get(o, "alpha", sig2, g->name, 1, r), CR_OBS_KEEP);
    assert_true(r[0] == 0.5);
    /* The number of classes is bounded; the classes held keep learning. */
    size_t held = cr_obs_count(o);
    for (int i = 0; (size_t)i + held < CR_OBS_MAX_CLASSES; i++) {
        assert_int_equal(cr_obs_add(o, "gamma", sig2, g->name, i + 1, 0.1), 0);
    }
    assert_int_equal(cr_obs_count(o), CR_OBS_MAX_CLASSES);
    assert_int_equal(cr_obs_add(o, "gamma", sig2, g->name, 1 << 20, 0.1), CR_ENOSPC);
    assert_int_equal(cr_obs_add(o, "beta", sig2, g->name, 1, 0.2), 0);
    assert_int_equal(cr_obs_get(o, "beta", sig2, g->name, 1, r), 2);
    cr_obs_free(o);
    cr_catalog_free(c);
}

static void test_mig_latency(void **state)
{
    (void)state;
    cr_catalog *c = load_default();
    cr_perf_env env = {c, NULL, NULL};
    cr_arch bert;
    memset(&bert, 0, sizeof bert);
    bert.layers = 24;
    bert.hidden = 1024;
    bert.heads = bert.kv_heads = 16;
    bert.head_dim = 64;
    bert.ffn = 4096;
    bert.vocab = 30522;
    bert.context = 512;
    bert.plain_mlp = 1;
    cr_arch_count_params(&bert, &bert.params, &bert.active);
    static const struct {
        const char *gpu;
        double published, share;
    } rows[] = {{"a100", 1.593010 / 4.777292, 1.0 / 7}, {"a30", 2.211811 / 6.041106, 1.0 / 4}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const cr_gpu_type *g = cr_catalog_find(c, rows[i].gpu);
        cr_workload w;
        cr_estimate ew, em;
        cr_workload_init(&w);
        w.kind = CR_KIND_INFERENCE;
        w.arch = bert;
        w.params = bert.params;
        w.precision = CR_PREC_INT8;
        w.prompt_tokens = 384;
        w.output_tokens = 1;
        w.rate_per_s = 1e-3;
        assert_int_equal(cr_perf_estimate(&env, &w, g, 1, &ew), 0);
        assert_true(ew.fits);
        w.needs = CR_NEED_MIG;
        assert_int_equal(cr_perf_estimate(&env, &w, g, 0, &em), 0);
        assert_true(em.fits && em.mig && em.mig->compute_slices == 1);
        double ratio = (double)ew.ttft_ns / (double)em.ttft_ns;
        assert_true(fabs(ratio - rows[i].published) / rows[i].published < 0.15);
        assert_true(ratio > rows[i].share * 1.2); /* more than the share */
    }
    /* decode of an 8B model at one request: the slice reads the weights
     * at its eighth of the bandwidth: TPOT ratio well under a quarter */
    const cr_gpu_type *h100 = cr_catalog_find(c, "h100");
    cr_workload w;
    cr_estimate ew, em;
    cr_workload_init(&w);
    w.kind = CR_KIND_INFERENCE;
    w.params = 8e9;
    w.precision = CR_PREC_FP8;
    w.rate_per_s = 1e-3;
    w.tpot_ns = 100 * CR_NS_PER_SEC;
    w.ttft_ns = 100 * CR_NS_PER_SEC;
    assert_int_equal(cr_perf_estimate(&env, &w, h100, 1, &ew), 0);
    w.needs = CR_NEED_MIG;
    assert_int_equal(cr_perf_estimate(&env, &w, h100, 0, &em), 0);
    assert_true(ew.fits && em.fits && em.mig);
    double r = (double)ew.tpot_ns / (double)em.tpot_ns;
    assert_true(r > 0.08 && r < 0.25);
    cr_catalog_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_catalog_lookup),
        cmocka_unit_test(test_catalog_errors),
        cmocka_unit_test(test_mig),
        cmocka_unit_test(test_prices),
        cmocka_unit_test(test_gavel),
        cmocka_unit_test(test_workload_names),
        cmocka_unit_test(test_estimates),
        cmocka_unit_test(test_measured_override),
        cmocka_unit_test(test_advise_ranking),
        cmocka_unit_test(test_arch_catalog),
        cmocka_unit_test(test_serving_plans),
        cmocka_unit_test(test_nvenc_capacity),
        cmocka_unit_test(test_gpufacts),
        cmocka_unit_test(test_mig_latency),
        cmocka_unit_test(test_knobs),
        cmocka_unit_test(test_fp4),
        cmocka_unit_test(test_learn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
