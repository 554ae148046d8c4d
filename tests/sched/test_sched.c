/*
 * test_sched.c - unit tests of the scheduler API (cmocka): names and
 * configuration, GPU types and MIG profiles, the cluster file parser and
 * its errors, node and GPU state changes, job table churn, restore, quotas,
 * and the HETERO LP against the greedy heuristic.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cr_error.h"
#include "cr_rng.h"
#include "cr_sched.h"

#define SEC 1000000000LL

static cr_sched *mk(cr_sched_policy p, const char *cluster)
{
    cr_sched_config cfg;
    cr_sched_config_default(&cfg, p);
    cr_sched *s = NULL;
    assert_int_equal(cr_sched_new(&cfg, &s), 0);
    char err[256];
    int rc = cr_sched_load_cluster(s, cluster, strlen(cluster), err, sizeof(err));
    if (rc != 0) {
        fail_msg("cluster: %s", err);
    }
    return s;
}

static void checked(cr_sched *s)
{
    char err[256];
    if (cr_sched_check(s, err, sizeof(err)) != 0) {
        fail_msg("invariant: %s", err);
    }
}

static void test_names(void **state)
{
    (void)state;
    cr_sched_policy p;
    assert_int_equal(cr_sched_policy_parse("las", &p), 0);
    assert_int_equal(p, CR_SCHED_LAS);
    assert_int_equal(cr_sched_policy_parse("LAS", &p), CR_EINVAL);
    assert_int_equal(cr_sched_policy_parse(NULL, &p), CR_EINVAL);
    assert_string_equal(cr_sched_policy_name(CR_SCHED_HETERO), "hetero");
    assert_string_equal(cr_sched_policy_name((cr_sched_policy)99), "?");
    cr_sched_job_kind k;
    assert_int_equal(cr_sched_job_kind_parse("finetune", &k), 0);
    assert_int_equal(k, CR_JOB_FINETUNE);
    assert_string_equal(cr_sched_node_state_name(CR_NODE_DRAINED), "drained");

    cr_sched_config cfg;
    cr_sched_config_default(&cfg, CR_SCHED_FIFO);
    cfg.las_queues = 0;
    cr_sched *s = NULL;
    assert_int_equal(cr_sched_new(&cfg, &s), CR_EINVAL);
    assert_null(s);
}

/* Sharing: names, the API's guards, and restore checking a fractional
 * slot against the GPU's share (a controller restart must not overfill). */
static void test_share_api(void **state)
{
    (void)state;
    cr_sched_share_policy sp;
    assert_int_equal(cr_sched_share_policy_parse("worst-fit", &sp), 0);
    assert_int_equal(sp, CR_SHARE_WORST_FIT);
    assert_int_equal(cr_sched_share_policy_parse("tightest", &sp), CR_EINVAL);
    assert_string_equal(cr_sched_share_policy_name(CR_SHARE_FRAG), "frag");
    cr_sched *s = mk(CR_SCHED_FIFO, "gpu-type a30 name=A30 mem=24g mig=4/4\n"
                                    "node n0 gpus=2xa30 share=0\n"
                                    "tenant t\n");
    int a30;
    assert_int_equal(cr_sched_gpu_type_find(s, "A30", &a30), 0);
    /* a shareable GPU is never put in MIG mode */
    const char *lay[] = {"1g.6gb"};
    assert_int_equal(cr_sched_gpu_set_mig_layout(s, 0, 0, lay, 1, NULL), CR_EINVAL);
    assert_int_equal(cr_sched_gpu_set_mig(s, 0, 0, true), CR_EINVAL);
    /* restore: 0.6 then 0.5 on GPU 0 does not fit; the slot must carry the
     * task's own share; a non-shareable GPU takes no fraction */
    cr_sched_job_spec j = {.id = 1, .gpu_count = 1, .gpu_type = a30, .gpu_milli = 600};
    cr_sched_slot sl = {.node = 0, .gpu = 0, .mig_start = -1, .milli = 600};
    assert_int_equal(cr_sched_job_restore(s, &j, a30, &sl, 1, 0, false), 0);
    j.id = 2;
    j.gpu_milli = 500;
    sl.milli = 500;
    assert_int_equal(cr_sched_job_restore(s, &j, a30, &sl, 1, 0, false), CR_EBUSY);
    sl.milli = 400;
    assert_int_equal(cr_sched_job_restore(s, &j, a30, &sl, 1, 0, false), CR_EINVAL);
    sl = (cr_sched_slot){.node = 0, .gpu = 1, .mig_start = -1, .milli = 500};
    assert_int_equal(cr_sched_job_restore(s, &j, a30, &sl, 1, 0, false), CR_EINVAL);
    /* a whole job cannot be restored onto the shared GPU either */
    cr_sched_job_spec w = {.id = 3, .gpu_count = 1, .gpu_type = a30};
    sl = (cr_sched_slot){.node = 0, .gpu = 0, .mig_start = -1};
    assert_int_equal(cr_sched_job_restore(s, &w, a30, &sl, 1, 0, false), CR_EBUSY);
    assert_int_equal(cr_sched_gpu_set_mig(s, 0, 0, false), CR_EBUSY);
    cr_sched_gpu_info gi;
    assert_int_equal(cr_sched_gpu_info_get(s, 0, 0, &gi), 0);
    assert_true(gi.share);
    assert_int_equal(gi.share_milli, 600);
    assert_int_equal(gi.share_jobs, 1);
    uint32_t free_gpus = 0;
    cr_sched_capacity(s, a30, NULL, &free_gpus);
    assert_int_equal(free_gpus, 1);
    char err[256];
    assert_int_equal(cr_sched_check(s, err, sizeof err), 0);
    cr_sched_free(s);
}

/* A fixed MIG layout: starts given largest first, bad layouts refused,
 * only its instances restorable, cleared by leaving MIG mode. */
static void test_mig_layout(void **state)
{
    (void)state;
    cr_sched *s = mk(CR_SCHED_FIFO, "gpu-type a30 name=A30 mem=24g mig=4/4\n"
                                    "node n0 gpus=2xa30\n");
    int a30, cs = 0, ms = 0;
    assert_int_equal(cr_sched_gpu_type_find(s, "A30", &a30), 0);
    const char *lay[] = {"1g.6gb", "2g.12gb", "1g.6gb"};
    int starts[3];
    assert_int_equal(cr_sched_gpu_set_mig_layout(s, 0, 0, lay, 3, starts), 0);
    assert_int_equal(starts[0], 2);
    assert_int_equal(starts[1], 0);
    assert_int_equal(starts[2], 3);
    cr_sched_gpu_info gi;
    assert_int_equal(cr_sched_gpu_info_get(s, 0, 0, &gi), 0);
    assert_true(gi.mig);
    assert_int_equal(gi.mig_fixed, 3);
    const char *too_big[] = {"4g.24gb", "1g.6gb"};
    assert_int_equal(cr_sched_gpu_set_mig_layout(s, 0, 1, too_big, 2, NULL), CR_ERANGE);
    const char *unknown[] = {"3g.18gb"};
    assert_int_equal(cr_sched_gpu_set_mig_layout(s, 0, 1, unknown, 1, NULL), CR_ENOENT);
    /* a device's own name for a known shape */
    assert_int_equal(cr_sched_mig_profile_alias(s, a30, "2g.13gb", 2, 2), 0);
    assert_int_equal(cr_sched_mig_profile_get(s, a30, "2g.13gb", &cs, &ms), 0);
    assert_int_equal(cs, 2);
    assert_int_equal(ms, 2);
    assert_int_equal(cr_sched_mig_profile_alias(s, a30, "3g.18gb", 3, 3), CR_ENOENT);
    /* restore: only an instance of the layout */
    cr_sched_job_spec j = {.id = 7, .gpu_count = 1, .gpu_type = a30, .mig_profile = "1g.6gb"};
    assert_int_equal(cr_sched_tenant(s, "t", &j.tenant), 0);
    cr_sched_slot sl = {.node = 0, .gpu = 0, .mig_start = 1, .mig_mem = 1, .mig_compute = 1};
    assert_int_equal(cr_sched_job_restore(s, &j, a30, &sl, 1, 0, false), CR_EINVAL);
    sl.mig_start = 3;
    assert_int_equal(cr_sched_job_restore(s, &j, a30, &sl, 1, 0, false), 0);
    checked(s);
    /* the next 1g.6gb gets the other 1g instance, never slice 1 */
    cr_sched_job_spec k = {.id = 8, .gpu_count = 1, .gpu_type = a30, .mig_profile = "1g.6gb"};
    k.tenant = j.tenant;
    assert_int_equal(cr_sched_job_add(s, &k, 0), 0);
    const cr_sched_decision *d;
    assert_int_equal(cr_sched_cycle(s, 0, NULL, &d), 1);
    assert_int_equal(d[0].slots[0].mig_start, 2);
    checked(s);
    assert_int_equal(cr_sched_gpu_set_mig_layout(s, 0, 0, lay, 3, NULL), CR_EBUSY);
    assert_int_equal(cr_sched_job_remove(s, 7, SEC), 0);
    assert_int_equal(cr_sched_job_remove(s, 8, SEC), 0);
    assert_int_equal(cr_sched_gpu_set_mig_layout(s, 0, 0, NULL, 0, NULL), 0);
    assert_int_equal(cr_sched_gpu_info_get(s, 0, 0, &gi), 0);
    assert_true(gi.mig); /* back to carving on demand */
    assert_int_equal(gi.mig_fixed, 0);
    assert_int_equal(cr_sched_gpu_set_mig_layout(s, 0, 0, lay, 3, NULL), 0);
    assert_int_equal(cr_sched_gpu_set_mig(s, 0, 0, false), 0);
    assert_int_equal(cr_sched_gpu_info_get(s, 0, 0, &gi), 0);
    assert_false(gi.mig);
    assert_int_equal(gi.mig_fixed, 0);
    checked(s);
    cr_sched_free(s);
}

static void test_mig_profiles(void **state)
{
    (void)state;
    cr_sched *s =
        mk(CR_SCHED_FIFO, "gpu-type h100 name=\"H100 SXM\" mem=80g mig=7/8\n"
                          "gpu-type a100 name=A100-40GB mem=40g mig=7/8\n"
                          "gpu-type a30 name=A30 mem=24g mig=4/4\n"
                          "gpu-type h200 name=H200 mem=141g mig=7/8\n"
                          "mig-profile h100 1g.10gb+me compute=1 mem=1 starts=0,1,2,3,4,5,6\n"
                          "node n0 gpus=1xh100+1xa100+1xa30+1xh200 mig=all\n");
    int h100, a30;
    assert_int_equal(cr_sched_gpu_type_find(s, "H100 SXM", &h100), 0);
    assert_int_equal(cr_sched_gpu_type_find(s, "A30", &a30), 0);
    assert_int_equal(cr_sched_gpu_type_find(s, "h100", &h100), CR_ENOENT); /* alias is file-local */
    /* names follow the memory: 80 GB -> 1g.10gb ... 7g.80gb; 40 GB -> 1g.5gb;
     * A30 24 GB -> 1g.6gb; H200 141 GB -> 1g.18gb */
    static const struct {
        const char *prof;
        int64_t expect_start; /* first MIG start used on that GPU */
    } cases[] = {{"7g.80gb", 0}, {"1g.5gb", 6}, {"4g.24gb", 0}, {"1g.18gb", 6}};
    for (int i = 0; i < 4; i++) {
        cr_sched_job_spec j = {.id = (uint64_t)i + 1,
                               .gpu_count = 1,
                               .gpu_type = CR_SCHED_TYPE_ANY,
                               .mig_profile = cases[i].prof};
        assert_int_equal(cr_sched_tenant(s, "t", &j.tenant), 0);
        assert_int_equal(cr_sched_job_add(s, &j, 0), 0);
    }
    const cr_sched_decision *d;
    assert_int_equal(cr_sched_cycle(s, 0, NULL, &d), 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(d[i].action, CR_SCHED_START);
        assert_int_equal(d[i].slot_count, 1);
        assert_int_equal(d[i].slots[0].gpu, i);
        assert_int_equal(d[i].slots[0].mig_start, cases[i].expect_start);
    }
    /* the full H100 refuses more; the added profile exists */
    assert_int_equal(cr_sched_mig_profile_add(s, h100, "1g.10gb+me", 1, 1, 1), CR_EEXIST);
    assert_int_equal(cr_sched_mig_profile_add(s, h100, "bad", 1, 8, 2), CR_EINVAL);
    /* MIG mode cannot change under a running instance */
    assert_int_equal(cr_sched_gpu_set_mig(s, 0, 0, false), CR_EBUSY);
    assert_int_equal(cr_sched_job_remove(s, 1, SEC), 0);
    assert_int_equal(cr_sched_gpu_set_mig(s, 0, 0, false), 0);
    uint32_t total, freeg;
    assert_int_equal(cr_sched_capacity(s, h100, &total, &freeg), 0);
    assert_int_equal(total, 1);
    assert_int_equal(freeg, 1);
    checked(s);
    cr_sched_free(s);
}

static void expect_parse_error(const char *text, const char *want)
{
    cr_sched_config cfg;
    cr_sched_config_default(&cfg, CR_SCHED_FIFO);
    cr_sched *s = NULL;
    assert_int_equal(cr_sched_new(&cfg, &s), 0);
    char err[256];
    int rc = cr_sched_load_cluster(s, text, strlen(text), err, sizeof(err));
    assert_true(rc < 0);
    if (!strstr(err, want)) {
        fail_msg("error '%s' lacks '%s'", err, want);
    }
    checked(s);
    cr_sched_free(s);
}

static void test_parse_errors(void **state)
{
    (void)state;
    expect_parse_error("gpu-type v100\nnode n0 gpus=4xk80\n",
                       "line 2: field gpus: unknown GPU type 'k80'");
    expect_parse_error("\n\nfrobnicate x\n", "line 3: field keyword: unknown keyword 'frobnicate'");
    expect_parse_error("gpu-type v100 mem=lots\n", "line 1: field mem: bad size 'lots'");
    expect_parse_error("gpu-type v100 mig=9/9\n", "line 1: field mig: bad geometry");
    expect_parse_error("gpu-type a30 mem=24g mig=4/4\nnode n0 gpus=1xa30\n"
                       "gpu n0 0 layout=4g.24gb,1g.6gb\n",
                       "line 3: field layout: cannot set MIG layout");
    expect_parse_error("gpu-type v100\nnode n0 gpus=4xv100 mig=0\n",
                       "line 2: field mig: GPU 0: type v100 has no MIG");
    expect_parse_error("gpu-type v100\nnode n0 gpus=4xv100\nnode n0 gpus=1xv100\n",
                       "line 3: field name: cannot add node 'n0': duplicate name");
    expect_parse_error("gpu-type v100\nnode n[5-2] gpus=1xv100\n",
                       "line 2: field name: bad node name or range");
    expect_parse_error("gpu-type v100\nnode n0 gpus=65xv100\n",
                       "line 2: field gpus: bad GPU count");
    expect_parse_error("gpu-type v100 name=\"V 100\nx\n", "line 1: field line: unterminated quote");
    expect_parse_error("gpu-type v100\nnode n0 gpus=2xv100\ngpu n0 2 health=bad\n",
                       "line 3: field index");
    expect_parse_error("gpu-type v100\ntenant a quota=v100:-3\n",
                       "line 2: field quota: bad GPU count");
    expect_parse_error("gpu-type v100\ntenant a parent=b\ntenant b\n",
                       "line 2: field parent: tenant 'b' is not declared on an earlier line");
    expect_parse_error("gpu-type v100\ntenant a parent=a\n",
                       "line 2: field parent: tenant 'a' is not declared");
    expect_parse_error("gpu-type v100\ntenant a lend=k80:1\n",
                       "line 2: field lend: unknown GPU type 'k80'");
    expect_parse_error("gpu-type v100\ntenant t1\ntenant t2 parent=t1\ntenant t3 parent=t2\n"
                       "tenant t4 parent=t3\ntenant t5 parent=t4\ntenant t6 parent=t5\n"
                       "tenant t7 parent=t6\ntenant t8 parent=t7\ntenant t9 parent=t8\n",
                       "line 10: field parent: the tenant tree would be deeper than 8 levels");
    expect_parse_error("gpu-type v100\nnode n0 gpus=2xv100 state=sleeping\n",
                       "line 2: field state");
    expect_parse_error("gpu-type v100\nnode n0 gpus=2xv100 colour=red\n",
                       "line 2: field colour: unknown field");
    expect_parse_error("node n0\n", "line 1: field gpus: missing");
    expect_parse_error("rack\n", "line 1: field name");
    expect_parse_error("gpu-type a\nnode n0 gpus=1xa\n x=1\n", "line 3: field keyword");
    /* inconsistent input is refused, not accepted silently */
    expect_parse_error("gpu-type v100\nnode n0 rack=r9 gpus=4xv100\n",
                       "line 2: field rack: unknown rack 'r9'");
    expect_parse_error("gpu-type v100\ngpu-type v100 mem=16g\n",
                       "line 2: field alias: gpu-type 'v100' is already declared on line 1");
    expect_parse_error("gpu-type v100\ngpu-type volta name=v100\n",
                       "line 2: field name: type 'v100' is already declared on line 1");
    expect_parse_error("rack r0\nrack r1\nrack r0 spine=s1\n",
                       "line 3: field name: rack 'r0' is already declared on line 1");
    expect_parse_error("tenant a\n\ntenant a weight=2\n",
                       "line 3: field name: tenant 'a' is already declared on line 1");
    expect_parse_error("gpu-type v100\nnode n0 gpus=8xv100 nvlink=3\n",
                       "line 2: field nvlink: domain size 3 does not divide the node's 8 GPUs");
    char buf[256];
    const char *x64 = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
    snprintf(buf, sizeof(buf), "rack %s\n", x64);
    expect_parse_error(buf, "line 1: field name: name 'xxxxxxxxxxxxxxxxxxxx...' is longer than 63");
    snprintf(buf, sizeof(buf), "rack r0 spine=%s\n", x64);
    expect_parse_error(buf, "line 1: field spine: name");
    snprintf(buf, sizeof(buf), "tenant %s\n", x64);
    expect_parse_error(buf, "line 1: field name: name");
    snprintf(buf, sizeof(buf), "gpu-type v100 name=%s\n", x64);
    expect_parse_error(buf, "line 1: field name: name");
    snprintf(buf, sizeof(buf), "gpu-type %s\n", x64);
    expect_parse_error(buf, "line 1: field alias: name");
    snprintf(buf, sizeof(buf), "gpu-type v\nnode n0 gpus=1xv rack=%s\n", x64);
    expect_parse_error(buf, "line 2: field rack: name");
}

static void test_parse_ok(void **state)
{
    (void)state;
    cr_sched *s = mk(CR_SCHED_FIFO, "# comment only\r\n"
                                    "gpu-type v100 name=\"Tesla V100\" mem=16g  # trailing\n"
                                    "rack r0 spine=s0\n"
                                    "node gpu[08-11] rack=r0 gpus=4xv100 nvlink=2 state=drained\n"
                                    "node \"odd name\" gpus=0xv100\n"
                                    "gpu gpu09 1 health=bad reason=\"XID 79\"\n"
                                    "tenant a weight=2.5 quota=\"Tesla V100\":4\n");
    assert_int_equal(cr_sched_node_count(s), 5);
    uint32_t n;
    assert_int_equal(cr_sched_node_find(s, "gpu11", &n), 0);
    assert_int_equal(cr_sched_node_find(s, "gpu12", &n), CR_ENOENT);
    assert_int_equal(cr_sched_node_find(s, "odd name", &n), 0);
    assert_int_equal(cr_sched_node_find(s, "gpu09", &n), 0);
    cr_sched_node_info ni;
    assert_int_equal(cr_sched_node_info_get(s, n, &ni), 0);
    assert_int_equal(ni.state, CR_NODE_DRAINED);
    assert_string_equal(ni.rack_name, "r0");
    assert_int_equal(ni.free_gpus, 0);
    cr_sched_gpu_info gi;
    assert_int_equal(cr_sched_gpu_info_get(s, n, 1, &gi), 0);
    assert_true(gi.bad);
    assert_string_equal(gi.reason, "XID 79");
    assert_int_equal(gi.mem_bytes, 16000000000ull);
    assert_int_equal(cr_sched_gpu_info_get(s, n, 2, &gi), 0);
    assert_int_equal(gi.nvlink, 1);
    int v;
    assert_int_equal(cr_sched_gpu_type_find(s, "Tesla V100", &v), 0);
    uint32_t total;
    assert_int_equal(cr_sched_capacity(s, v, &total, NULL), 0);
    assert_int_equal(total, 0); /* all drained */
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(cr_sched_node_set_state(s, i, CR_NODE_UP, NULL, 0, NULL, NULL), 0);
    }
    assert_int_equal(cr_sched_capacity(s, v, &total, NULL), 0);
    assert_int_equal(total, 15);
    checked(s);
    cr_sched_free(s);
}

/* A node whose GPUs changed: its entry retires (jobs requeued), and the
 * node is added again under its name with the new GPUs, which take jobs. */
/* CPU and host memory (issue 28): two nodes of 2 shareable GPUs, 8 and 4
 * cores; a whole job asking 6 cores goes to the 8-core node although the
 * GPU-only best fit ties; a second 6-core job finds no node with room and
 * waits; a fractional task asking 3 cores goes to the 4-core node (the
 * other has 2 left); a host task of 2 cores fills n0; the recount holds
 * throughout, and removing the jobs gives everything back. */
static void test_host_resources(void **state)
{
    (void)state;
    const cr_sched_share_policy pols[3] = {CR_SHARE_BEST_FIT, CR_SHARE_WORST_FIT, CR_SHARE_FRAG};
    for (int p = 0; p < 3; p++) {
        cr_sched_config cfg;
        cr_sched_config_default(&cfg, CR_SCHED_FIFO);
        cfg.share_policy = pols[p];
        cr_sched *s = NULL;
        assert_int_equal(cr_sched_new(&cfg, &s), 0);
        int ty, t;
        assert_int_equal(cr_sched_gpu_type(s, "a", &ty), 0);
        assert_int_equal(cr_sched_tenant(s, "x", &t), 0);
        cr_sched_gpu_spec g[2] = {{.type = ty, .share = true}, {.type = ty, .share = true}};
        cr_sched_node_spec n0 = {
            .name = "n0", .gpu_count = 2, .gpus = g, .cpu_milli = 8000, .mem_bytes = 64ull << 30};
        cr_sched_node_spec n1 = {
            .name = "n1", .gpu_count = 2, .gpus = g, .cpu_milli = 4000, .mem_bytes = 64ull << 30};
        uint32_t i0, i1;
        assert_int_equal(cr_sched_node_add(s, &n1, &i1), 0);
        assert_int_equal(cr_sched_node_add(s, &n0, &i0), 0);
        cr_sched_job_spec a = {.id = 1,
                               .tenant = t,
                               .gpu_count = 1,
                               .gpu_type = ty,
                               .node_count = 1,
                               .cpu_milli = 6000,
                               .host_mem_bytes = 1u << 30};
        cr_sched_job_spec b = a;
        b.id = 2;
        cr_sched_job_spec c = {.id = 3,
                               .tenant = t,
                               .gpu_count = 1,
                               .gpu_type = ty,
                               .gpu_milli = 300,
                               .cpu_milli = 3000};
        assert_int_equal(cr_sched_job_add(s, &a, 0), 0);
        assert_int_equal(cr_sched_job_add(s, &b, 0), 0);
        assert_int_equal(cr_sched_job_add(s, &c, 0), 0);
        const cr_sched_decision *d;
        int nd = cr_sched_cycle(s, 0, NULL, &d);
        cr_sched_job_info ji;
        assert_int_equal(cr_sched_job_info_get(s, 1, &ji), 0);
        assert_int_equal(ji.state, CR_JOB_RUNNING);
        assert_int_equal(ji.slots[0].node, i0);
        assert_int_equal(cr_sched_job_info_get(s, 2, &ji), 0);
        assert_int_equal(ji.state, CR_JOB_PENDING);
        assert_int_equal(cr_sched_job_info_get(s, 3, &ji), 0);
        assert_int_equal(ji.state, CR_JOB_RUNNING);
        assert_int_equal(ji.slots[0].node, i1);
        assert_int_equal(nd, 2);
        uint32_t where;
        assert_int_equal(cr_sched_host_place(s, 2000, 0, NULL, 0, &where), 0);
        assert_int_equal(where, i0);
        assert_int_equal(cr_sched_host_place(s, 2000, 0, NULL, 0, &where), CR_ENOSPC);
        cr_sched_node_info ni;
        assert_int_equal(cr_sched_node_info_get(s, i0, &ni), 0);
        assert_int_equal(ni.cpu_used, 8000);
        assert_int_equal(ni.mem_used, 1u << 30);
        char err[256];
        assert_int_equal(cr_sched_check(s, err, sizeof err), 0);
        assert_int_equal(cr_sched_job_remove(s, 1, SEC), 0);
        assert_int_equal(cr_sched_job_remove(s, 3, SEC), 0);
        assert_int_equal(cr_sched_host_release(s, i0, 2000, 0), 0);
        assert_int_equal(cr_sched_host_release(s, i0, 1, 0), CR_EINVAL);
        assert_int_equal(cr_sched_node_info_get(s, i1, &ni), 0);
        assert_int_equal(ni.cpu_used, 0);
        assert_int_equal(cr_sched_check(s, err, sizeof err), 0);
        nd = cr_sched_cycle(s, 2 * SEC, NULL, &d); /* job 2 now fits n0 */
        assert_int_equal(nd, 1);
        assert_int_equal(d[0].slots[0].node, i0);
        assert_int_equal(cr_sched_check(s, err, sizeof err), 0);
        cr_sched_free(s);
    }
}

static void test_node_retire(void **state)
{
    (void)state;
    cr_sched *s = mk(CR_SCHED_FIFO, "gpu-type a\ngpu-type b\nnode n0 gpus=2xa\n");
    int t;
    assert_int_equal(cr_sched_tenant(s, "x", &t), 0);
    cr_sched_job_spec ja = {.id = 1, .tenant = t, .gpu_count = 1, .gpu_type = 0};
    cr_sched_job_spec jb = {.id = 2, .tenant = t, .gpu_count = 8, .gpu_type = 1};
    assert_int_equal(cr_sched_job_add(s, &ja, 0), 0);
    assert_int_equal(cr_sched_job_add(s, &jb, 0), 0);
    const cr_sched_decision *d;
    assert_int_equal(cr_sched_cycle(s, 0, NULL, &d), 1); /* job 1 only */
    uint32_t old;
    assert_int_equal(cr_sched_node_find(s, "n0", &old), 0);
    uint64_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(cr_sched_node_retire(s, old, SEC, &ids, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 1);
    free(ids);
    assert_int_equal(cr_sched_node_set_state(s, old, CR_NODE_UP, NULL, SEC, NULL, NULL), CR_EINVAL);
    cr_sched_gpu_spec g[8];
    for (size_t i = 0; i < 8; i++) {
        g[i] = (cr_sched_gpu_spec){.type = 1};
    }
    cr_sched_node_spec sp = {.name = "n0", .state = CR_NODE_UP, .gpu_count = 8, .gpus = g};
    uint32_t fresh;
    assert_int_equal(cr_sched_node_add(s, &sp, &fresh), 0);
    assert_true(fresh != old);
    uint32_t found;
    assert_int_equal(cr_sched_node_find(s, "n0", &found), 0);
    assert_int_equal(found, fresh);
    assert_int_equal(cr_sched_cycle(s, 2 * SEC, NULL, &d), 1); /* job 2 on the 8 b */
    cr_sched_job_info info;
    assert_int_equal(cr_sched_job_info_get(s, 2, &info), 0);
    assert_int_equal(info.state, CR_JOB_RUNNING);
    assert_int_equal(info.slots[0].node, fresh);
    assert_int_equal(cr_sched_job_info_get(s, 1, &info), 0);
    assert_int_equal(info.state, CR_JOB_PENDING);
    checked(s);
    cr_sched_free(s);
}

static void test_lost_node_requeues(void **state)
{
    (void)state;
    cr_sched *s = mk(CR_SCHED_FIFO, "gpu-type a\nnode n[0-3] gpus=2xa\n");
    int t;
    assert_int_equal(cr_sched_tenant(s, "x", &t), 0);
    for (uint64_t id = 1; id <= 4; id++) {
        cr_sched_job_spec j = {.id = id,
                               .tenant = t,
                               .gpu_count = 2,
                               .gpu_type = 0,
                               .checkpoint_interval_ns = 60 * SEC};
        assert_int_equal(cr_sched_job_add(s, &j, 0), 0);
    }
    const cr_sched_decision *d;
    assert_int_equal(cr_sched_cycle(s, 0, NULL, &d), 4);
    cr_sched_job_info info;
    assert_int_equal(cr_sched_job_info_get(s, 3, &info), 0);
    uint32_t node = info.slots[0].node;
    uint64_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(
        cr_sched_node_set_state(s, node, CR_NODE_LOST, "heartbeat", 150 * SEC, &ids, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 3);
    free(ids);
    assert_int_equal(cr_sched_job_info_get(s, 3, &info), 0);
    assert_int_equal(info.state, CR_JOB_PENDING);
    assert_int_equal(info.lost_work_ns, 30 * SEC); /* 150 s run, checkpoints every 60 s */
    assert_int_equal(info.preemptions, 1);
    assert_int_equal(info.attained_gpu_ns, 300 * SEC);
    char r[CR_SCHED_REASON_MAX];
    assert_int_equal(cr_sched_cycle(s, 150 * SEC, NULL, &d), 0);
    assert_true(cr_sched_job_reason(s, 3, r, sizeof(r)) > 0);
    /* (no time limits: the reservation assumes the default run time) */
    assert_string_equal(
        r, "needs 2 a: 0 free; reserved for t+57m, assuming the default run time of 1h for job 1");
    assert_int_equal(cr_sched_job_reason(s, 1, r, sizeof(r)), CR_EINVAL);
    assert_string_equal(r, "running");
    assert_int_equal(cr_sched_job_reason(s, 99, r, sizeof(r)), CR_ENOENT);
    checked(s);
    cr_sched_free(s);
}

/* --nodelist/--exclude/--constraint resolve to a node mask; --exclusive
 * takes whole idle nodes and keeps others off them. */
static void test_node_mask_and_exclusive(void **state)
{
    (void)state;
    cr_sched *s = mk(CR_SCHED_FIFO, "gpu-type a\nnode n[0-2] gpus=4xa\n");
    int t;
    assert_int_equal(cr_sched_tenant(s, "x", &t), 0);
    uint8_t only2 = 1u << 2, none = 0;
    cr_sched_job_spec j1 = {.id = 1,
                            .tenant = t,
                            .gpu_count = 1,
                            .gpu_type = 0,
                            .node_mask = &only2,
                            .node_mask_bits = 3};
    cr_sched_job_spec j2 = {.id = 2,
                            .tenant = t,
                            .gpu_count = 1,
                            .gpu_type = 0,
                            .node_mask = &none,
                            .node_mask_bits = 3};
    cr_sched_job_spec j3 = {.id = 3, .tenant = t, .gpu_count = 2, .gpu_type = 0, .exclusive = true};
    assert_int_equal(cr_sched_job_add(s, &j1, 0), 0);
    assert_int_equal(cr_sched_job_add(s, &j2, 0), 0);
    assert_int_equal(cr_sched_job_add(s, &j3, 0), 0);
    const cr_sched_decision *d;
    cr_sched_cycle(s, 0, NULL, &d);
    cr_sched_job_info info;
    assert_int_equal(cr_sched_job_info_get(s, 1, &info), 0);
    assert_int_equal(info.state, CR_JOB_RUNNING);
    assert_int_equal(info.slots[0].node, 2); /* the only node it may use */
    assert_int_equal(cr_sched_job_info_get(s, 2, &info), 0);
    assert_int_equal(info.state, CR_JOB_PENDING); /* no node at all */
    assert_int_equal(cr_sched_job_info_get(s, 3, &info), 0);
    assert_int_equal(info.state, CR_JOB_RUNNING);
    uint32_t xnode = info.slots[0].node;
    assert_true(xnode != 2); /* node 2 is busy: not for an exclusive job */
    /* two more 1-GPU jobs: neither lands on the exclusive job's node */
    for (uint64_t id = 4; id <= 5; id++) {
        cr_sched_job_spec jj = {.id = id, .tenant = t, .gpu_count = 1, .gpu_type = 0};
        assert_int_equal(cr_sched_job_add(s, &jj, 0), 0);
    }
    cr_sched_cycle(s, 1, NULL, &d);
    for (uint64_t id = 4; id <= 5; id++) {
        assert_int_equal(cr_sched_job_info_get(s, id, &info), 0);
        assert_int_equal(info.state, CR_JOB_RUNNING);
        assert_true(info.slots[0].node != xnode);
    }
    checked(s);
    /* once it ends, its node takes other work again */
    assert_int_equal(cr_sched_job_remove(s, 3, 2), 0);
    cr_sched_job_spec j6 = {.id = 6, .tenant = t, .gpu_count = 4, .gpu_type = 0};
    assert_int_equal(cr_sched_job_add(s, &j6, 2), 0);
    cr_sched_cycle(s, 2, NULL, &d);
    assert_int_equal(cr_sched_job_info_get(s, 6, &info), 0);
    assert_int_equal(info.state, CR_JOB_RUNNING);
    assert_int_equal(info.slots[0].node, xnode);
    checked(s);
    cr_sched_free(s);
}

static void test_job_table_churn(void **state)
{
    (void)state;
    cr_sched *s = mk(CR_SCHED_PRIORITY, "gpu-type a\nnode n[0-9] gpus=8xa\n");
    int t;
    assert_int_equal(cr_sched_tenant(s, "x", &t), 0);
    cr_rng r;
    cr_rng_seed(&r, 7);
    /* ids with colliding low bits, added and removed in random order */
    for (int round = 0; round < 20; round++) {
        for (uint64_t i = 0; i < 500; i++) {
            cr_sched_job_spec j = {.id = (i << 20) | ((uint64_t)round + 1),
                                   .tenant = t,
                                   .gpu_count = 1,
                                   .gpu_type = CR_SCHED_TYPE_ANY};
            assert_int_equal(cr_sched_job_add(s, &j, round), 0);
            assert_int_equal(cr_sched_job_add(s, &j, round), CR_EEXIST);
        }
        const cr_sched_decision *d;
        assert_true(cr_sched_cycle(s, round, &r, &d) >= 0);
        for (uint64_t i = 0; i < 500; i++) {
            if (cr_rng_below(&r, 2)) {
                assert_int_equal(cr_sched_job_remove(s, (i << 20) | ((uint64_t)round + 1), round),
                                 0);
            }
        }
        checked(s);
    }
    assert_int_equal(cr_sched_job_remove(s, 12345, 0), CR_ENOENT);
    cr_sched_free(s);
}

static void test_bad_specs(void **state)
{
    (void)state;
    cr_sched *s = mk(CR_SCHED_FIFO, "gpu-type a\nnode n0 gpus=8xa\n");
    int t;
    assert_int_equal(cr_sched_tenant(s, "x", &t), 0);
    cr_sched_job_spec ok = {.id = 1, .tenant = t, .gpu_count = 1, .gpu_type = 0};
    cr_sched_job_spec j = ok;
    j.id = 0;
    assert_int_equal(cr_sched_job_add(s, &j, 0), CR_EINVAL);
    j = ok;
    j.gpu_count = 0;
    assert_int_equal(cr_sched_job_add(s, &j, 0), CR_EINVAL);
    j = ok;
    j.gpu_type = 5;
    assert_int_equal(cr_sched_job_add(s, &j, 0), CR_EINVAL);
    j = ok;
    j.tenant = 9;
    assert_int_equal(cr_sched_job_add(s, &j, 0), CR_EINVAL);
    j = ok;
    j.gpu_count = 6;
    j.node_count = 4;
    assert_int_equal(cr_sched_job_add(s, &j, 0), CR_EINVAL);
    double bad[1] = {-1};
    j = ok;
    j.tput = bad;
    j.tput_count = 1;
    assert_int_equal(cr_sched_job_add(s, &j, 0), CR_EINVAL);
    assert_int_equal(cr_sched_job_add(s, &ok, 0), 0);
    assert_int_equal(cr_sched_job_count(s, CR_JOB_PENDING), 1);
    cr_sched_free(s);
}

static void test_restore_and_quota_lowering(void **state)
{
    (void)state;
    cr_sched *s = mk(CR_SCHED_PRIORITY, "gpu-type a\nnode n[0-1] gpus=4xa\ntenant x quota=a:8\n");
    int t;
    assert_int_equal(cr_sched_tenant_find(s, "x", &t), 0);
    cr_sched_job_spec j = {.id = 7, .tenant = t, .gpu_count = 2, .gpu_type = 0};
    cr_sched_slot sl[2] = {{.node = 1, .gpu = 0, .mig_start = -1},
                           {.node = 1, .gpu = 3, .mig_start = -1}};
    assert_int_equal(cr_sched_job_restore(s, &j, 0, sl, 2, 0, false), 0);
    j.id = 8;
    assert_int_equal(cr_sched_job_restore(s, &j, 0, sl, 2, 0, false), CR_EBUSY);
    sl[1].gpu = 2;
    sl[0].gpu = 2;
    assert_int_equal(cr_sched_job_restore(s, &j, 0, sl, 2, 0, false), CR_EBUSY);
    sl[0].gpu = 1;
    assert_int_equal(cr_sched_job_restore(s, &j, 0, sl, 2, 5, false), 0);
    uint32_t freeg;
    cr_sched_capacity(s, 0, NULL, &freeg);
    assert_int_equal(freeg, 4);
    checked(s);
    /* lowering the quota below use turns the newest job into borrowed work */
    assert_int_equal(cr_sched_tenant_set_quota(s, t, 0, 2), 0);
    checked(s);
    cr_sched_job_info info;
    assert_int_equal(cr_sched_job_info_get(s, 8, &info), 0);
    assert_true(info.borrowed);
    assert_int_equal(cr_sched_job_info_get(s, 7, &info), 0);
    assert_false(info.borrowed);
    cr_sched_free(s);
}

/* HETERO: the LP and the greedy heuristic reach the same total normalised
 * throughput on random small instances, or the LP does better. */
static double hetero_value(bool lp, uint64_t seed)
{
    cr_sched_config cfg;
    cr_sched_config_default(&cfg, CR_SCHED_HETERO);
    cfg.hetero_lp = lp;
    cr_sched *s = NULL;
    assert_int_equal(cr_sched_new(&cfg, &s), 0);
    const char *cl = "gpu-type v100\ngpu-type p100\ngpu-type k80\n"
                     "node v[0-1] gpus=4xv100\nnode p[0-1] gpus=4xp100\nnode k[0-1] gpus=4xk80\n";
    char err[128];
    assert_int_equal(cr_sched_load_cluster(s, cl, strlen(cl), err, sizeof(err)), 0);
    int t;
    cr_sched_tenant(s, "x", &t);
    cr_rng r;
    cr_rng_seed(&r, seed);
    double tput[40][3];
    for (uint64_t id = 1; id <= 40; id++) {
        double *x = tput[id - 1];
        x[2] = 1.0;
        x[1] = 1.0 + 2.0 * cr_rng_uniform(&r);
        x[0] = x[1] + 3.0 * cr_rng_uniform(&r);
        cr_sched_job_spec j = {.id = id,
                               .tenant = t,
                               .gpu_count = 1u << cr_rng_below(&r, 3),
                               .gpu_type = CR_SCHED_TYPE_ANY,
                               .tput = x,
                               .tput_count = 3};
        assert_int_equal(cr_sched_job_add(s, &j, 0), 0);
    }
    const cr_sched_decision *d;
    int n = cr_sched_cycle(s, 0, NULL, &d);
    double v = 0;
    for (int i = 0; i < n; i++) {
        const double *x = tput[d[i].job - 1];
        v += d[i].slot_count * x[d[i].gpu_type] / x[0];
    }
    checked(s);
    cr_sched_free(s);
    return v;
}

static void test_hetero_lp_vs_greedy(void **state)
{
    (void)state;
    double lp = 0, gr = 0;
    for (uint64_t seed = 0; seed < 20; seed++) {
        double a = hetero_value(true, seed), b = hetero_value(false, seed);
        assert_true(a > 0 && b > 0);
        lp += a;
        gr += b;
    }
    print_message("hetero: normalised throughput placed, LP %.2f vs greedy %.2f (20 instances)\n",
                  lp, gr);
    /* the greedy heuristic stays within 10% of the LP */
    assert_true(gr >= 0.9 * lp);
}

/* A removed job's id can be reused before the next cycle, while the old
 * job still sits in the previous queue order. */
static void test_id_reuse_between_cycles(void **state)
{
    (void)state;
    cr_sched *s = mk(CR_SCHED_FIFO, "gpu-type a\nnode n0 gpus=2xa\n");
    int t;
    assert_int_equal(cr_sched_tenant(s, "x", &t), 0);
    cr_sched_job_spec j = {.id = 1, .tenant = t, .gpu_count = 4, .gpu_type = 0};
    const cr_sched_decision *d;
    for (int round = 0; round < 3; round++) {
        assert_int_equal(cr_sched_job_add(s, &j, round), 0);
        assert_int_equal(cr_sched_cycle(s, round, NULL, &d), 0); /* 4 > 2: pending */
        assert_int_equal(cr_sched_job_remove(s, 1, round), 0);
        j.gpu_count = j.gpu_count == 4 ? 3 : 4;
    }
    j.gpu_count = 1;
    assert_int_equal(cr_sched_job_add(s, &j, 5), 0);
    assert_int_equal(cr_sched_cycle(s, 5, NULL, &d), 1);
    assert_int_equal(d[0].job, 1);
    assert_int_equal(cr_sched_job_count(s, CR_JOB_RUNNING), 1);
    assert_int_equal(cr_sched_job_count(s, CR_JOB_PENDING), 0);
    checked(s);
    cr_sched_free(s);
}

/* The shipped example cluster files load and hold what their comments say. */
static void load_file(const char *name, uint32_t want_nodes, const char *type, uint32_t want_gpus)
{
    const char *src = getenv("CORRAL_SRC");
    char path[4096];
    snprintf(path, sizeof(path), "%s/data/clusters/%s", src ? src : ".", name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    cr_sched_config cfg;
    cr_sched_config_default(&cfg, CR_SCHED_PRIORITY);
    cr_sched *s = NULL;
    assert_int_equal(cr_sched_new(&cfg, &s), 0);
    char err[256];
    if (cr_sched_load_cluster(s, buf, n, err, sizeof(err)) != 0) {
        fail_msg("%s: %s", name, err);
    }
    assert_int_equal(cr_sched_node_count(s), want_nodes);
    int t;
    uint32_t total;
    assert_int_equal(cr_sched_gpu_type_find(s, type, &t), 0);
    assert_int_equal(cr_sched_capacity(s, t, &total, NULL), 0);
    assert_int_equal(total, want_gpus);
    checked(s);
    cr_sched_free(s);
}

static void test_data_clusters(void **state)
{
    (void)state;
    load_file("hetero-small.cluster", 10, "H100 SXM", 16);
    load_file("hetero-small.cluster", 10, "A30", 8);
    load_file("gavel-108.cluster", 27, "k80", 36);
    load_file("large-10k.cluster", 10000, "H100 SXM", 80000);
}

/* The tenant tree: cycles and depth refused, Slurm's fair tree ranked as a
 * hand computation says (docs/scheduler.md "Tenant tree"), limits and
 * lending limits hold, and lent guaranteed GPUs come back. */
static int tid(cr_sched *s, const char *name)
{
    int t;
    assert_int_equal(cr_sched_tenant(s, name, &t), 0);
    return t;
}

static void add_job(cr_sched *s, uint64_t id, int tenant, uint32_t gpus, int64_t now)
{
    cr_sched_job_spec j = {
        .id = id, .tenant = tenant, .gpu_count = gpus, .gpu_type = 0, .preemptible = true};
    assert_int_equal(cr_sched_job_add(s, &j, now), 0);
}

static bool started(const cr_sched_decision *d, int n, uint64_t id)
{
    for (int i = 0; i < n; i++) {
        if (d[i].action == CR_SCHED_START && d[i].job == id) {
            return true;
        }
    }
    return false;
}

static void test_tenant_tree(void **state)
{
    (void)state;
    cr_sched *s = mk(CR_SCHED_PRIORITY, "gpu-type a\nnode n[0-1] gpus=8xa\n");
    int org = tid(s, "org"), da = tid(s, "dept-a"), db = tid(s, "dept-b");
    int a1 = tid(s, "team-a1"), a2 = tid(s, "team-a2"), b1 = tid(s, "team-b1"),
        b2 = tid(s, "team-b2");
    assert_int_equal(cr_sched_tenant_set_parent(s, da, org), 0);
    assert_int_equal(cr_sched_tenant_set_parent(s, db, org), 0);
    assert_int_equal(cr_sched_tenant_set_parent(s, a1, da), 0);
    assert_int_equal(cr_sched_tenant_set_parent(s, a2, da), 0);
    assert_int_equal(cr_sched_tenant_set_parent(s, b1, db), 0);
    assert_int_equal(cr_sched_tenant_set_parent(s, b2, db), 0);
    /* a cycle, itself, and a tree deeper than the maximum: refused */
    assert_int_equal(cr_sched_tenant_set_parent(s, org, a1), CR_EINVAL);
    assert_int_equal(cr_sched_tenant_set_parent(s, a1, a1), CR_EINVAL);
    assert_int_equal(cr_sched_tenant_parent(s, org), -1);
    assert_int_equal(cr_sched_tenant_set_weight(s, a2, 3.0), 0);
    /* usage for 100 s: a1 4 GPUs, a2 2, b1 1, b2 none */
    add_job(s, 1, a1, 4, 0);
    add_job(s, 2, a2, 2, 0);
    add_job(s, 3, b1, 1, 0);
    const cr_sched_decision *d;
    int n = cr_sched_cycle(s, 0, NULL, &d);
    assert_int_equal(n, 3);
    for (uint64_t id = 1; id <= 3; id++) {
        assert_int_equal(cr_sched_job_remove(s, id, 100 * SEC), 0);
    }
    /* By hand. Siblings under org: S = 1/2 each, U(dept-a) = 6/7,
     * U(dept-b) = 1/7, so LevelFS 0.583 and 3.5: dept-b first. Under
     * dept-b: b2 unused (infinite), b1 0.5/1. Under dept-a: a1 S 1/4,
     * U 4/6 -> 0.375; a2 S 3/4, U 2/6 -> 2.25. Depth first: org,
     * dept-b, team-b2, team-b1, dept-a, team-a2, team-a1. (Flat DRF
     * over weight would rank b2, a2, b1, a1.) */
    add_job(s, 10, a1, 8, 100 * SEC);
    add_job(s, 11, a2, 8, 100 * SEC);
    add_job(s, 12, b1, 8, 100 * SEC);
    add_job(s, 13, b2, 8, 100 * SEC);
    n = cr_sched_cycle(s, 101 * SEC, NULL, &d);
    int rank;
    double fs;
    const int want[] = {org, db, b2, b1, da, a2, a1};
    for (int i = 0; i < 7; i++) {
        assert_int_equal(cr_sched_tenant_fair(s, want[i], &rank, &fs), 0);
        assert_int_equal(rank, i);
    }
    assert_int_equal(cr_sched_tenant_fair(s, da, &rank, &fs), 0);
    assert_true(fs > 0.583 && fs < 0.584);
    assert_int_equal(cr_sched_tenant_fair(s, a2, &rank, &fs), 0);
    assert_true(fs > 2.249 && fs < 2.251);
    assert_int_equal(cr_sched_tenant_fair(s, b2, &rank, &fs), 0);
    assert_true(isinf(fs));
    assert_int_equal(n, 2);
    assert_true(started(d, n, 13) && started(d, n, 12));
    checked(s);
    int chain = a1;
    for (int lv = 4; lv <= CR_SCHED_TENANT_DEPTH_MAX; lv++) {
        char nm[16];
        snprintf(nm, sizeof nm, "deep%d", lv);
        int t = tid(s, nm);
        assert_int_equal(cr_sched_tenant_set_parent(s, t, chain), 0);
        chain = t;
    }
    assert_int_equal(cr_sched_tenant_set_parent(s, tid(s, "too-deep"), chain), CR_EINVAL);
    cr_sched_free(s);
}

static void test_tenant_lending(void **state)
{
    (void)state;
    /* the cluster file's tree: parent, limit and lend */
    cr_sched *f = mk(CR_SCHED_PRIORITY, "gpu-type a\nnode n0 gpus=8xa\ntenant d quota=a:8\n"
                                        "tenant x parent=d quota=a:4 lend=a:1 limit=a:6\n");
    int fd = tid(f, "d"), fx = tid(f, "x");
    assert_int_equal(cr_sched_tenant_parent(f, fx), fd);
    assert_int_equal(cr_sched_tenant_parent(f, fd), -1);
    cr_sched_free(f);
    cr_sched *s = mk(CR_SCHED_PRIORITY, "gpu-type a\nnode n0 gpus=8xa\n");
    int dept = tid(s, "dept"), x = tid(s, "x"), y = tid(s, "y");
    assert_int_equal(cr_sched_tenant_set_parent(s, x, dept), 0);
    assert_int_equal(cr_sched_tenant_set_parent(s, y, dept), 0);
    assert_int_equal(cr_sched_tenant_set_quota(s, dept, 0, 8), 0);
    assert_int_equal(cr_sched_tenant_set_quota(s, x, 0, 4), 0);
    assert_int_equal(cr_sched_tenant_set_quota(s, y, 0, 4), 0);
    assert_int_equal(cr_sched_tenant_set_lending(s, x, 0, 1), 0);
    assert_int_equal(cr_sched_tenant_set_limit(s, x, 0, -2), CR_EINVAL);
    /* y may hold its own 4 and 1 of x's idle 4: 6 is refused, 5 starts */
    add_job(s, 1, y, 6, 0);
    const cr_sched_decision *d;
    int n = cr_sched_cycle(s, 0, NULL, &d);
    assert_int_equal(n, 0);
    char why[256];
    assert_true(cr_sched_job_reason(s, 1, why, sizeof why) > 0);
    assert_non_null(strstr(why, "lending limits"));
    assert_int_equal(cr_sched_job_remove(s, 1, 1 * SEC), 0);
    assert_int_equal(cr_sched_tenant_set_limit(s, y, 0, 5), 0);
    add_job(s, 2, y, 5, 1 * SEC);
    n = cr_sched_cycle(s, 1 * SEC, NULL, &d);
    assert_true(n == 1 && started(d, n, 2) && d[0].borrowed);
    /* y's limit of 5 holds */
    add_job(s, 3, y, 1, 2 * SEC);
    n = cr_sched_cycle(s, 2 * SEC, NULL, &d);
    assert_int_equal(n, 0);
    assert_true(cr_sched_job_reason(s, 3, why, sizeof why) > 0);
    assert_non_null(strstr(why, "tenant y limit for a reached (5 of 5 in use)"));
    assert_int_equal(cr_sched_job_remove(s, 3, 2 * SEC), 0);
    /* x claims its guarantee: the borrowed job is preempted, x starts */
    add_job(s, 4, x, 4, 3 * SEC);
    n = cr_sched_cycle(s, 3 * SEC, NULL, &d);
    bool preempted = false;
    for (int i = 0; i < n; i++) {
        preempted |= d[i].action == CR_SCHED_PREEMPT && d[i].job == 2;
    }
    assert_true(preempted);
    assert_true(started(d, n, 4));
    checked(s);
    cr_sched_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_node_mask_and_exclusive),
        cmocka_unit_test(test_mig_profiles),
        cmocka_unit_test(test_mig_layout),
        cmocka_unit_test(test_share_api),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_ok),
        cmocka_unit_test(test_lost_node_requeues),
        cmocka_unit_test(test_node_retire),
        cmocka_unit_test(test_host_resources),
        cmocka_unit_test(test_job_table_churn),
        cmocka_unit_test(test_bad_specs),
        cmocka_unit_test(test_restore_and_quota_lowering),
        cmocka_unit_test(test_hetero_lp_vs_greedy),
        cmocka_unit_test(test_data_clusters),
        cmocka_unit_test(test_id_reuse_between_cycles),
        cmocka_unit_test(test_tenant_tree),
        cmocka_unit_test(test_tenant_lending),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
