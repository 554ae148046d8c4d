/*
 * test_agent_units.c - the agent's pure pieces: sim GPU specs, fault
 * files, health verdicts, NVML name parsing (recorded values from real
 * machines), NVLink domains, the desired-state parser and job environments.
 */
#include "cr_desired.h"
#include "cr_task_env.h"
#include "cr_error.h"
#include "cr_gpu.h"
#include "cr_iso.h"
#include "cr_time.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static cr_gpu_info gpus[CR_GPU_MAX];

static void test_sim_spec_basic(void **state)
{
    size_t n = 0;
    char err[256];
    assert_int_equal(
        cr_gpu_sim_parse("8xH100 SXM", "h100-0", gpus, CR_GPU_MAX, &n, err, sizeof err), 0);
    assert_int_equal(n, 8);
    assert_string_equal(gpus[0].model, "H100 SXM");
    assert_string_equal(gpus[0].raw_name, "NVIDIA H100 80GB HBM3");
    assert_int_equal(gpus[7].index, 7);
    assert_true(gpus[0].mem_bytes == 80ULL << 30);
    /* SXM parts default to one NVLink domain. */
    assert_int_equal(gpus[0].nvlink_domain, 0);
    assert_int_equal(gpus[7].nvlink_domain, 0);
    assert_int_equal(strncmp(gpus[0].uuid, "GPU-", 4), 0);
    assert_string_not_equal(gpus[0].uuid, gpus[1].uuid);
    /* UUIDs are stable for a node and differ between nodes. */
    char u0[96];
    snprintf(u0, sizeof u0, "%s", gpus[3].uuid);
    assert_int_equal(
        cr_gpu_sim_parse("8xH100 SXM", "h100-0", gpus, CR_GPU_MAX, &n, err, sizeof err), 0);
    assert_string_equal(u0, gpus[3].uuid);
    assert_int_equal(
        cr_gpu_sim_parse("8xH100 SXM", "h100-1", gpus, CR_GPU_MAX, &n, err, sizeof err), 0);
    assert_string_not_equal(u0, gpus[3].uuid);
}

static void test_sim_spec_groups_and_mig(void **state)
{
    size_t n = 0;
    char err[256];
    assert_int_equal(
        cr_gpu_sim_parse("4xA100 80GB SXM,nvlink=2; 2xL40S; 2xA30,mig=1g.6gb:2+2g.12gb", "mix",
                         gpus, CR_GPU_MAX, &n, err, sizeof err),
        0);
    assert_int_equal(n, 8);
    assert_int_equal(gpus[0].nvlink_domain, 0);
    assert_int_equal(gpus[1].nvlink_domain, 0);
    assert_int_equal(gpus[2].nvlink_domain, 1);
    assert_int_equal(gpus[4].nvlink_domain, -1);
    assert_string_equal(gpus[4].model, "L40S");
    assert_true(gpus[6].mig_enabled);
    assert_int_equal(gpus[6].mig_count, 3);
    assert_string_equal(gpus[6].mig[0].profile, "1g.6gb");
    assert_int_equal(gpus[6].mig[0].slices, 1);
    assert_int_equal(gpus[6].mig[0].mem_slices, 1);
    assert_string_equal(gpus[6].mig[2].profile, "2g.12gb");
    assert_int_equal(gpus[6].mig[2].mem_slices, 2);
    assert_int_equal(strncmp(gpus[6].mig[0].uuid, "MIG-", 4), 0);
    assert_string_not_equal(gpus[6].mig[0].uuid, gpus[7].mig[0].uuid);
    /* A file form: one group a line, comments, line numbers in errors. */
    assert_int_equal(cr_gpu_sim_parse("# node\n2xT4\n\n1xFoo,mem=12\n", "f", gpus, CR_GPU_MAX, &n,
                                      err, sizeof err),
                     0);
    assert_int_equal(n, 3);
    assert_true(gpus[2].mem_bytes == 12ULL << 30);
    assert_int_equal(cr_gpu_sim_parse("2xT4\n1xFoo\n", "f", gpus, CR_GPU_MAX, &n, err, sizeof err),
                     CR_EINVAL);
    assert_non_null(strstr(err, "line 2"));
    assert_non_null(strstr(err, "mem="));
}

static void test_sim_spec_errors(void **state)
{
    size_t n = 0;
    char err[256];
    const struct {
        const char *spec, *want;
    } bad[] = {
        {"", "no GPUs"},
        {"H100", "COUNTxMODEL"},
        {"0xH100 SXM", "count"},
        {"99xH100 SXM", "count"},
        {"4x", "model missing"},
        {"4xL40S,mig=1g.10gb", "does not support MIG"},
        {"4xA30,mig=1g.6gb:5", "slices"},
        {"4xA30,mig=banana", "profile"},
        {"3xH100 SXM,nvlink=2", "does not divide"},
        {"2xH100 SXM,color=red", "unknown option"},
        {"2xH100 SXM,mem", "key=value"},
        {"40xH100 SXM;40xH100 SXM", "more than"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        int rc = cr_gpu_sim_parse(bad[i].spec, "n", gpus, CR_GPU_MAX, &n, err, sizeof err);
        if (rc >= 0 || !strstr(err, bad[i].want)) {
            fail_msg("spec '%s': rc %d err '%s', want '%s'", bad[i].spec, rc, err, bad[i].want);
        }
    }
}

static void test_faults(void **state)
{
    cr_gpu_fault f[4];
    char err[256];
    assert_int_equal(
        cr_gpu_faults_parse("# x\n1 xid 79\n2 ecc 3\n3 temp 95\n", 4, f, err, sizeof err), 0);
    assert_int_equal(f[0].xid, 0);
    assert_int_equal(f[0].ecc, -1);
    assert_int_equal(f[1].xid, 79);
    assert_int_equal(f[2].ecc, 3);
    assert_int_equal(f[3].temp_c, 95);
    assert_int_equal(cr_gpu_faults_parse("9 xid 79\n", 4, f, err, sizeof err), CR_EPARSE);
    assert_non_null(strstr(err, "line 1"));
    assert_int_equal(cr_gpu_faults_parse("\n1 hot 79\n", 4, f, err, sizeof err), CR_EPARSE);
    assert_non_null(strstr(err, "line 2"));
    assert_int_equal(cr_gpu_faults_parse("1 xid\n", 4, f, err, sizeof err), CR_EPARSE);
    assert_int_equal(cr_gpu_faults_parse("1 xid 79 extra\n", 4, f, err, sizeof err), CR_EPARSE);
}

static void test_health(void **state)
{
    cr_gpu_health_cfg cfg;
    cr_gpu_health_cfg_default(&cfg);
    cfg.xid_hold_ns = 10 * CR_NS_PER_SEC;
    cr_gpu_health h = {0};
    cr_gpu_sample s = {0};
    s.temp_c = 60;
    int64_t t = 1000 * CR_NS_PER_SEC;
    assert_int_equal(cr_gpu_health_update(&h, &s, &cfg, t), 0);
    assert_int_equal(h.state, CR_GPU_OK);
    /* XID: out with the code as the reason, back after the hold time. */
    s.xid_last = 79;
    s.xid_time_ns = t;
    assert_int_equal(cr_gpu_health_update(&h, &s, &cfg, t + CR_NS_PER_SEC), 1);
    assert_int_equal(h.state, CR_GPU_XID);
    assert_string_equal(h.reason, "XID 79");
    assert_string_equal(cr_gpu_health_name(h.state), "xid");
    assert_int_equal(cr_gpu_health_update(&h, &s, &cfg, t + 5 * CR_NS_PER_SEC), 0);
    assert_int_equal(cr_gpu_health_update(&h, &s, &cfg, t + 11 * CR_NS_PER_SEC), 1);
    assert_int_equal(h.state, CR_GPU_OK);
    /* Heat with hysteresis: out at 90, still out at 88, back at 85. */
    s.temp_c = 90;
    assert_int_equal(cr_gpu_health_update(&h, &s, &cfg, t + 20 * CR_NS_PER_SEC), 1);
    assert_int_equal(h.state, CR_GPU_HOT);
    s.temp_c = 88;
    assert_int_equal(cr_gpu_health_update(&h, &s, &cfg, t + 21 * CR_NS_PER_SEC), 0);
    assert_int_equal(h.state, CR_GPU_HOT);
    s.temp_c = 85;
    assert_int_equal(cr_gpu_health_update(&h, &s, &cfg, t + 22 * CR_NS_PER_SEC), 1);
    assert_int_equal(h.state, CR_GPU_OK);
    /* ECC outranks everything else. */
    s.ecc_uncorrected = 2;
    s.temp_c = 95;
    s.xid_time_ns = t + 23 * CR_NS_PER_SEC;
    cr_gpu_health_update(&h, &s, &cfg, t + 23 * CR_NS_PER_SEC);
    assert_int_equal(h.state, CR_GPU_ECC);
    assert_string_equal(h.reason, "2 uncorrectable ECC errors");
}

/* Names as NVML reports them (nvidia-smi -L / nvmlDeviceGetName) on real machines. */
static void test_nvml_names(void **state)
{
    const struct {
        const char *nvml, *model;
    } rec[] = {
        {"NVIDIA H100 80GB HBM3", "H100 SXM"},
        {"NVIDIA H100 PCIe", "H100 PCIe"},
        {"NVIDIA H100 NVL", "H100 NVL"},
        {"NVIDIA H200", "H200 SXM"},
        {"NVIDIA H200 NVL", "H200 NVL"},
        {"NVIDIA A100-SXM4-80GB", "A100 80GB SXM"},
        {"NVIDIA A100-SXM4-40GB", "A100 40GB SXM"},
        {"NVIDIA A100 80GB PCIe", "A100 80GB PCIe"},
        {"NVIDIA A100-PCIE-40GB", "A100 40GB PCIe"},
        {"NVIDIA L40S", "L40S"},
        {"NVIDIA L40", "L40"},
        {"NVIDIA L4", "L4"},
        {"NVIDIA A10", "A10"},
        {"NVIDIA A30", "A30"},
        {"Tesla T4", "T4"},
        {"Tesla V100-SXM2-32GB", "V100 SXM2 32GB"},
        {"NVIDIA A100-SXM4-40GB MIG 1g.5gb", "A100 40GB SXM"},
        {"NVIDIA GeForce RTX 4090", "GeForce RTX 4090"},
    };
    for (size_t i = 0; i < sizeof rec / sizeof rec[0]; i++) {
        char out[64];
        cr_gpu_model_from_nvml(rec[i].nvml, out, sizeof out);
        if (strcmp(out, rec[i].model) != 0) {
            fail_msg("'%s' -> '%s', want '%s'", rec[i].nvml, out, rec[i].model);
        }
    }
    char prof[32];
    int slices = 0;
    assert_int_equal(cr_gpu_mig_profile_from_name("NVIDIA A100-SXM4-40GB MIG 1g.5gb", prof,
                                                  sizeof prof, &slices),
                     0);
    assert_string_equal(prof, "1g.5gb");
    assert_int_equal(slices, 1);
    assert_int_equal(cr_gpu_mig_profile_from_name("NVIDIA H100 80GB HBM3 MIG 3g.40gb", prof,
                                                  sizeof prof, &slices),
                     0);
    assert_string_equal(prof, "3g.40gb");
    assert_int_equal(slices, 3);
    assert_int_equal(cr_gpu_mig_profile_from_name("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me", prof,
                                                  sizeof prof, &slices),
                     0);
    assert_string_equal(prof, "1g.10gb+me");
    assert_int_equal(
        cr_gpu_mig_profile_from_name("NVIDIA H100 80GB HBM3", prof, sizeof prof, &slices),
        CR_EPARSE);
    assert_int_equal(
        cr_gpu_mig_profile_from_name("NVIDIA X MIG banana", prof, sizeof prof, &slices), CR_EPARSE);
    /* Memory slices: H100 80 GB has 8 of 10 GB; A100 40 GB 8 of 5 GB; A30 4 of 6 GB. */
    assert_int_equal(cr_gpu_mig_mem_slices("1g.10gb", 85899345920ULL, 7), 1);
    assert_int_equal(cr_gpu_mig_mem_slices("3g.40gb", 85899345920ULL, 7), 4);
    assert_int_equal(cr_gpu_mig_mem_slices("7g.80gb", 85899345920ULL, 7), 8);
    assert_int_equal(cr_gpu_mig_mem_slices("1g.10gb", 42949672960ULL, 7), 2);
    assert_int_equal(cr_gpu_mig_mem_slices("2g.12gb", 25769803776ULL, 4), 2);
}

static void test_nvlink_domains(void **state)
{
    /* Two NVLink pairs (0-1, 2-3) and a loner (4), as PCIe cards with bridges. */
    unsigned char links[25] = {0};
    links[0 * 5 + 1] = links[1 * 5 + 0] = 1;
    links[2 * 5 + 3] = 1;
    int dom[5];
    cr_gpu_nvlink_domains(5, links, NULL, dom);
    assert_int_equal(dom[0], 0);
    assert_int_equal(dom[1], 0);
    assert_int_equal(dom[2], 1);
    assert_int_equal(dom[3], 1);
    assert_int_equal(dom[4], -1);
    /* An HGX board: every GPU links to NVSwitches only. */
    unsigned char none[64] = {0}, sw[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    int d8[8];
    cr_gpu_nvlink_domains(8, none, sw, d8);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(d8[i], 0);
    }
}

static const char *doc =
    "{\"version\": 7, \"jobs\": [{\"job\":42,\"command\":[\"python\",\"train.py\"],"
    "\"env\":{\"LR\":\"0.1\",\"CUDA_VISIBLE_DEVICES\":\"9\",\"NVIDIA_VISIBLE_DEVICES\":\"all\","
    "\"CORRAL_JOB_ID\":\"1\",\"CORRAL_SERVICE\":\"chat\",\"LD_PRELOAD\":\"/w/libx.so\","
    "\"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE\":\"100\"},\"workdir\":\"/tmp\","
    "\"gpus\":[0,1],\"gpu_uuids\":[\"GPU-a\",\"GPU-b\"],\"checkpoint_dir\":\"/ck/42\","
    "\"grace_s\":30,\"action\":\"run\",\"future_member\":1,"
    "\"gang\":{\"master_addr\":\"10.0.0.2\",\"master_port\":29500,\"world_size\":16,"
    "\"node_rank\":1,\"nnodes\":2,\"local_world_size\":8,\"rank_offset\":8}},"
    "{\"job\":43,\"action\":\"stop\",\"grace_s\":0.5}]}";

/* A task's variable value in env, or NULL. */
static const char *env_get(char **env, const char *name)
{
    size_t n = strlen(name);
    for (char **e = env; *e; e++) {
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') {
            return *e + n + 1;
        }
    }
    return NULL;
}

static void test_task_env(void **state)
{
    (void)state;
    const char *d2 =
        "{\"version\":1,\"jobs\":[{\"job\":7,\"command\":[\"python\",\"t.py\"],"
        "\"name\":\"tr\",\"nodelist\":\"a,b\",\"array_index\":5,\"array_job\":3,"
        "\"output\":\"o-%j-%A_%a-%t-%N-%x-%%-%q.txt\",\"script\":\"echo hi\\n\","
        "\"gang\":{\"master_addr\":\"10.0.0.2\",\"master_port\":29501,\"world_size\":8,"
        "\"node_rank\":1,\"nnodes\":2,\"local_world_size\":4,\"rank_offset\":4,"
        "\"tasks_per_node\":4,\"gpus_per_node\":4,\"launcher\":0}}]}";
    cr_desired d;
    char err[256];
    assert_int_equal(cr_desired_parse(d2, strlen(d2), &d, err, sizeof err), 0);
    const cr_job_spec *s = &d.jobs[0];
    assert_int_equal(cr_task_count(s), 4);
    assert_int_equal(cr_task_rank(s, 2), 6);
    /* the job's own RANK and SLURM_PROCID never win over the task's */
    char *base[] = {"PATH=/bin", "RANK=99", "SLURM_PROCID=99", "KEEP=1", NULL};
    char **env = cr_task_env(base, s, 2, "b");
    assert_string_equal(env_get(env, "RANK"), "6");
    assert_string_equal(env_get(env, "LOCAL_RANK"), "2");
    assert_string_equal(env_get(env, "WORLD_SIZE"), "8");
    assert_string_equal(env_get(env, "LOCAL_WORLD_SIZE"), "4");
    assert_string_equal(env_get(env, "GROUP_RANK"), "1");
    assert_string_equal(env_get(env, "SLURM_PROCID"), "6");
    assert_string_equal(env_get(env, "SLURM_LOCALID"), "2");
    assert_string_equal(env_get(env, "SLURM_NTASKS"), "8");
    assert_string_equal(env_get(env, "SLURM_NODELIST"), "a,b");
    assert_string_equal(env_get(env, "SLURM_JOB_ID"), "7");
    assert_string_equal(env_get(env, "SLURM_JOB_NAME"), "tr");
    assert_string_equal(env_get(env, "CORRAL_ARRAY_TASK_ID"), "5");
    assert_string_equal(env_get(env, "SLURM_ARRAY_TASK_ID"), "5");
    assert_string_equal(env_get(env, "PET_NNODES"), "2");
    assert_string_equal(env_get(env, "PET_NPROC_PER_NODE"), "4");
    assert_string_equal(env_get(env, "PET_NODE_RANK"), "1");
    assert_string_equal(env_get(env, "PET_MASTER_ADDR"), "10.0.0.2");
    assert_string_equal(env_get(env, "PET_MASTER_PORT"), "29501");
    assert_string_equal(env_get(env, "KEEP"), "1");
    size_t ranks = 0;
    for (char **e = env; *e; e++) {
        ranks += strncmp(*e, "RANK=", 5) == 0;
    }
    assert_int_equal(ranks, 1);
    cr_strv_free(env);
    char *p = cr_task_path(s->out_pattern, s, 6, "b");
    assert_string_equal(p, "o-7-3_5-6-b-tr-%-%q.txt");
    free(p);
    /* per-task logs when a node runs several tasks, the job's log for one */
    char *lp = cr_task_log_path("/st", 7, 6, 4, "out");
    assert_string_equal(lp, "/st/logs/7/6.out");
    free(lp);
    lp = cr_task_log_path("/st", 7, 1, 1, "err");
    assert_string_equal(lp, "/st/logs/7/err");
    free(lp);
    /* round trip keeps the batch members */
    json_t *j = cr_job_spec_to_json(s);
    cr_job_spec back;
    assert_int_equal(cr_job_spec_from_json(j, "", &back, err, sizeof err), 0);
    assert_int_equal(back.gang.tasks_per_node, 4);
    assert_int_equal(back.array_index, 5);
    assert_string_equal(back.script, "echo hi\n");
    assert_string_equal(back.nodelist, "a,b");
    cr_job_spec_fini(&back);
    json_decref(j);
    cr_desired_fini(&d);

    /* a launcher: one task, PET_NPROC_PER_NODE is the node's GPUs */
    const char *d3 = "{\"version\":1,\"jobs\":[{\"job\":8,\"command\":[\"torchrun\"],"
                     "\"gang\":{\"master_addr\":\"h\",\"master_port\":0,\"world_size\":2,"
                     "\"node_rank\":0,\"nnodes\":2,\"local_world_size\":1,\"rank_offset\":0,"
                     "\"tasks_per_node\":1,\"gpus_per_node\":8,\"launcher\":1}}]}";
    assert_int_equal(cr_desired_parse(d3, strlen(d3), &d, err, sizeof err), 0);
    env = cr_task_env(NULL, &d.jobs[0], 0, "a");
    assert_string_equal(env_get(env, "PET_NPROC_PER_NODE"), "8");
    assert_string_equal(env_get(env, "WORLD_SIZE"), "2");
    assert_null(env_get(env, "SLURM_ARRAY_TASK_ID"));
    cr_strv_free(env);
    cr_desired_fini(&d);
    /* world_size must agree with nnodes x tasks_per_node */
    const char *d4 = "{\"version\":1,\"jobs\":[{\"job\":8,\"command\":[\"x\"],"
                     "\"gang\":{\"master_addr\":\"h\",\"master_port\":0,\"world_size\":3,"
                     "\"node_rank\":0,\"nnodes\":2,\"tasks_per_node\":2}}]}";
    assert_int_equal(cr_desired_parse(d4, strlen(d4), &d, err, sizeof err), CR_EINVAL);
    assert_non_null(strstr(err, "world_size"));
}

static void test_desired_parse(void **state)
{
    cr_desired d;
    char err[256];
    assert_int_equal(cr_desired_parse(doc, strlen(doc), &d, err, sizeof err), 0);
    assert_int_equal(d.version, 7);
    assert_int_equal(d.count, 2);
    const cr_job_spec *s = cr_desired_find(&d, 42);
    assert_non_null(s);
    assert_int_equal(s->argc, 2);
    assert_string_equal(s->argv[1], "train.py");
    assert_null(s->argv[2]);
    assert_int_equal(s->gpu_count, 2);
    assert_int_equal(s->gpus[1], 1);
    assert_int_equal(s->uuid_count, 2);
    assert_true(s->grace_ns == 30 * CR_NS_PER_SEC);
    assert_true(s->has_gang);
    assert_int_equal(s->gang.world_size, 16);
    assert_int_equal(s->gang.rank_offset, 8);
    const cr_job_spec *t = cr_desired_find(&d, 43);
    assert_int_equal(t->action, CR_ACT_STOP);
    assert_true(t->grace_ns == 500 * CR_NS_PER_MS);
    assert_null(cr_desired_find(&d, 44));

    /* The environment of job 42 on node n1. */
    char *base[] = {"PATH=/usr/bin", "CUDA_VISIBLE_DEVICES=7", "RANK=99", "LR=0.5", NULL};
    char **env = cr_job_env(s, base, "n1");
    const char *want[] = {"PATH=/usr/bin",
                          "LR=0.1",
                          "CUDA_VISIBLE_DEVICES=GPU-a,GPU-b",
                          "CORRAL_JOB_ID=42",
                          "CORRAL_NODE=n1",
                          "CORRAL_CHECKPOINT_DIR=/ck/42",
                          "MASTER_ADDR=10.0.0.2",
                          "MASTER_PORT=29500",
                          "WORLD_SIZE=16",
                          "NODE_RANK=1",
                          "NNODES=2",
                          "LOCAL_WORLD_SIZE=8",
                          "RANK=8",
                          "LOCAL_RANK=0"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int found = 0;
        for (char **e = env; *e; e++) {
            found |= strcmp(*e, want[i]) == 0;
        }
        if (!found) {
            fail_msg("env lacks %s", want[i]);
        }
    }
    /* the spec's env cannot set what the node sets (cr_envname.h); the
     * controller's CORRAL_SERVICE and the job's own LD_PRELOAD pass */
    assert_string_equal(env_get(env, "CORRAL_SERVICE"), "chat");
    assert_string_equal(env_get(env, "LD_PRELOAD"), "/w/libx.so");
    assert_null(env_get(env, "NVIDIA_VISIBLE_DEVICES"));
    assert_null(env_get(env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"));
    for (char **e = env; *e; e++) {
        assert_string_not_equal(*e, "CORRAL_JOB_ID=1");
        assert_string_not_equal(*e, "CUDA_VISIBLE_DEVICES=7");
        assert_string_not_equal(*e, "CUDA_VISIBLE_DEVICES=9");
        assert_string_not_equal(*e, "RANK=99");
        assert_string_not_equal(*e, "LR=0.5");
    }
    cr_strv_free(env);

    /* Round trip through the record form. */
    json_t *j = cr_job_spec_to_json(s);
    cr_job_spec back;
    assert_int_equal(cr_job_spec_from_json(j, "", &back, err, sizeof err), 0);
    assert_int_equal(back.job, 42);
    assert_int_equal(back.gang.node_rank, 1);
    assert_string_equal(back.checkpoint_dir, "/ck/42");
    assert_int_equal(back.envc, 7);
    cr_job_spec_fini(&back);
    json_decref(j);
    cr_desired_fini(&d);
}

/* The advisor's plan (issue 26): plan_env reaches the job after its own
 * env (which cannot set CORRAL_*), with torchrun's arguments for the node,
 * and survives the record form. */
static void test_plan_env(void **state)
{
    (void)state;
    const char *t =
        "{\"version\":3,\"jobs\":[{\"job\":9,\"command\":[\"torchrun\"],\"gpus\":[0,1],"
        "\"env\":{\"CORRAL_TP\":\"99\",\"LR\":\"1\"},\"plan_env\":{\"CORRAL_TP\":\"2\","
        "\"CORRAL_PP\":\"2\",\"CORRAL_MEGATRON_ARGS\":\"--tensor-model-parallel-size 2\"},"
        "\"gang\":{\"master_addr\":\"10.0.0.2\",\"master_port\":29511,\"world_size\":2,"
        "\"node_rank\":1,\"nnodes\":2,\"local_world_size\":1,\"gpus_per_node\":2,"
        "\"launcher\":1}}]}";
    cr_desired d;
    char err[256];
    assert_int_equal(cr_desired_parse(t, strlen(t), &d, err, sizeof err), 0);
    const cr_job_spec *s = cr_desired_find(&d, 9);
    assert_non_null(s);
    assert_int_equal(s->planc, 3);
    char *base[] = {"PATH=/usr/bin", NULL};
    char **env = cr_job_env(s, base, "n1");
    assert_string_equal(env_get(env, "CORRAL_TP"), "2");
    assert_string_equal(env_get(env, "CORRAL_PP"), "2");
    assert_string_equal(env_get(env, "LR"), "1");
    assert_string_equal(env_get(env, "CORRAL_MEGATRON_ARGS"), "--tensor-model-parallel-size 2");
    assert_string_equal(env_get(env, "CORRAL_TORCHRUN_ARGS"),
                        "--nnodes=2 --nproc-per-node=2 --node-rank=1 --master-addr=10.0.0.2 "
                        "--master-port=29511");
    int tp_seen = 0;
    for (char **e = env; *e; e++) {
        tp_seen += strncmp(*e, "CORRAL_TP=", 10) == 0;
    }
    assert_int_equal(tp_seen, 1);
    cr_strv_free(env);
    json_t *j = cr_job_spec_to_json(s);
    cr_job_spec back;
    assert_int_equal(cr_job_spec_from_json(j, "", &back, err, sizeof err), 0);
    assert_int_equal(back.planc, 3);
    cr_job_spec_fini(&back);
    json_decref(j);
    cr_desired_fini(&d);
}

/* The job's user and limits on the wire; the device rules of a job. */
static void test_desired_fence(void **state)
{
    cr_desired d;
    char err[256];
    const char *t = "{\"version\":1,\"checkpoint_base\":\"/ck/abc\",\"checkpoint_retention_s\":60,"
                    "\"jobs\":[{\"job\":5,\"command\":[\"x\"],\"gpus\":[2,3],\"uid\":64001,"
                    "\"gid\":64002,\"cpus\":2.5,\"mem_bytes\":1048576},"
                    "{\"job\":6,\"command\":[\"x\"]}]}";
    assert_int_equal(cr_desired_parse(t, strlen(t), &d, err, sizeof err), 0);
    assert_string_equal(d.checkpoint_base, "/ck/abc");
    assert_int_equal(d.checkpoint_retention_s, 60);
    const cr_job_spec *s = cr_desired_find(&d, 5);
    assert_true(s->has_user);
    assert_int_equal(s->uid, 64001);
    assert_int_equal(s->gid, 64002);
    assert_false(s->allow_root);
    assert_true(s->cpus == 2.5);
    assert_int_equal(s->mem_bytes, 1048576);
    /* No uid: the agent's own user (single-user mode); never uid 0 by default. */
    assert_false(cr_desired_find(&d, 6)->has_user);
    int maj[96], min[96];
    size_t n = cr_iso_dev_rules(s, maj, min, 96);
    int g2 = 0, g3 = 0, other = 0, ctl = 0;
    for (size_t i = 0; i < n; i++) {
        if (maj[i] == CR_NVIDIA_MAJOR) {
            g2 += min[i] == 2;
            g3 += min[i] == 3;
            ctl += min[i] == 255;
            other += min[i] >= 0 && min[i] < 64 && min[i] != 2 && min[i] != 3;
            assert_true(min[i] >= 0); /* never all of major 195 */
        }
    }
    assert_true(g2 == 1 && g3 == 1 && ctl == 1 && other == 0);
    /* The clean environment starts from defaults, never from the agent's. */
    setenv("CORRAL_TEST_AGENT_SECRET", "x", 1);
    char **base = cr_job_env_base(s, "/w");
    char **env = cr_job_env(s, base, "n1");
    int path = 0, home = 0;
    for (char **e = env; *e; e++) {
        assert_null(strstr(*e, "CORRAL_TEST_AGENT_SECRET"));
        path += strncmp(*e, "PATH=", 5) == 0;
        home += strncmp(*e, "HOME=", 5) == 0;
    }
    assert_true(path == 1 && home == 1);
    cr_strv_free(env);
    cr_strv_free(base);
    cr_desired_fini(&d);
    const char *bad[] = {
        "{\"version\":1,\"jobs\":[{\"job\":1,\"command\":[\"x\"],\"uid\":5}]}",
        "{\"version\":1,\"jobs\":[{\"job\":1,\"command\":[\"x\"],\"cpus\":-1}]}",
        "{\"version\":1,\"jobs\":[{\"job\":1,\"command\":[\"x\"],\"allow_root\":1}]}",
        "{\"version\":1,\"checkpoint_base\":\"rel\"}",
    };
    const char *want[] = {"jobs[0].gid", "jobs[0].cpus", "jobs[0].allow_root", "checkpoint_base"};
    for (size_t i = 0; i < 4; i++) {
        assert_int_not_equal(cr_desired_parse(bad[i], strlen(bad[i]), &d, err, sizeof err), 0);
        if (!strstr(err, want[i])) {
            fail_msg("%s: %s lacks %s", bad[i], err, want[i]);
        }
    }
}

static void test_desired_errors(void **state)
{
    const struct {
        const char *doc, *want;
    } bad[] = {
        {"{", "line 1"},
        {"[]", "must be an object"},
        {"{\"jobs\":[]}", "version: missing"},
        {"{\"version\":1,\"power_cap_w\":-5}", "power_cap_w"},
        {"{\"version\":1,\"power_cap_w\":10001}", "power_cap_w"},
        {"{\"version\":\"7\"}", "version: must be an integer"},
        {"{\"version\":1,\"jobs\":{}}", "jobs: must be an array"},
        {"{\"version\":1,\"jobs\":[{\"command\":[\"x\"]}]}", "jobs[0].job: missing"},
        {"{\"version\":1,\"jobs\":[{\"job\":1}]}", "jobs[0].command"},
        {"{\"version\":1,\"jobs\":[{\"job\":1,\"command\":[]}]}", "jobs[0].command"},
        {"{\"version\":1,\"jobs\":[{\"job\":1,\"command\":[1]}]}", "jobs[0].command[0]"},
        {"{\"version\":1,\"jobs\":[{\"job\":1,\"command\":[\"x\"],\"gpus\":[-1]}]}",
         "jobs[0].gpus[0]"},
        {"{\"version\":1,\"jobs\":[{\"job\":1,\"command\":[\"x\"],\"env\":{\"A=B\":\"c\"}}]}",
         "jobs[0].env.A=B"},
        {"{\"version\":1,\"jobs\":[{\"job\":1,\"command\":[\"x\"],\"action\":\"go\"}]}",
         "jobs[0].action"},
        {"{\"version\":1,\"jobs\":[{\"job\":1,\"command\":[\"x\"],\"grace_s\":-1}]}",
         "jobs[0].grace_s"},
        {"{\"version\":1,\"jobs\":[{\"job\":1,\"command\":[\"x\"],\"gang\":{\"master_port\":1}}]}",
         "jobs[0].gang.master_addr"},
        {"{\"version\":1,\"jobs\":[{\"job\":1,\"command\":[\"x\"],\"gang\":{\"master_addr\":\"a\","
         "\"master_port\":70000,\"world_size\":2,\"node_rank\":0}}]}",
         "jobs[0].gang.master_port"},
        {"{\"version\":1,\"jobs\":[{\"job\":1,\"command\":[\"x\"],\"gang\":{\"master_addr\":\"a\","
         "\"master_port\":7,\"world_size\":2,\"node_rank\":2,\"nnodes\":2}}]}",
         "jobs[0].gang.node_rank"},
        {"{\"version\":1,\"jobs\":[{\"job\":1,\"command\":[\"x\"]},{\"job\":1,\"command\":[\"y\"]}]"
         "}",
         "jobs[1].job: listed twice"},
        {"{\"version\":1,\"jobs\":[{\"job\":1,\"command\":[\"x\"],\"plan_env\":{\"LD_PRELOAD\":"
         "\"x\"}}]}",
         "jobs[0].plan_env.LD_PRELOAD"},
        {"{\"version\":1,\"jobs\":[{\"job\":1,\"command\":[\"x\"],\"plan_env\":{\"CORRAL_TP\":4}}]"
         "}",
         "jobs[0].plan_env.CORRAL_TP"},
        {"{\"version\":1,\"version\":2}", "duplicate"},
        {"{\"version\":1,\"mig_layouts\":{}}", "mig_layouts: must be an array"},
        {"{\"version\":1,\"mig_layouts\":[{\"gpu\":64,\"instances\":[]}]}", "mig_layouts[0].gpu"},
        {"{\"version\":1,\"mig_layouts\":[{\"gpu\":0}]}", "mig_layouts[0].instances"},
        {"{\"version\":1,\"mig_layouts\":[{\"gpu\":0,\"instances\":[{\"slices\":1}]}]}",
         "mig_layouts[0].instances[0].profile"},
        {"{\"version\":1,\"mig_layouts\":[{\"gpu\":0,\"instances\":[{\"profile\":\"1g.5gb\","
         "\"slices\":1,\"mem_slices\":1,\"start\":9}]}]}",
         "mig_layouts[0].instances[0].start"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_desired d;
        char err[256] = "";
        int rc = cr_desired_parse(bad[i].doc, strlen(bad[i].doc), &d, err, sizeof err);
        if (rc >= 0 || !strstr(err, bad[i].want)) {
            if (rc >= 0) {
                cr_desired_fini(&d);
            }
            fail_msg("doc %s: rc %d err '%s', want '%s'", bad[i].doc, rc, err, bad[i].want);
        }
    }
}

/* Dynamic MIG plans: what is kept, destroyed, created; busy instances
 * never destroyed; overlaps and unknown UUIDs refused. NVML profile ids. */
static void test_mig_plan(void **state)
{
    (void)state;
    cr_gpu_info g[1];
    size_t n = 0;
    char err[256];
    assert_int_equal(cr_gpu_sim_parse("1xA30,mig=1g.6gb:4", "n", g, 1, &n, err, sizeof err), 0);
    cr_mig_want w[3] = {
        {.profile = "1g.6gb", .slices = 1, .mem_slices = 1, .start = 0},
        {.profile = "1g.6gb", .slices = 1, .mem_slices = 1, .start = 1},
        {.profile = "2g.12gb", .slices = 2, .mem_slices = 2, .start = 2},
    };
    snprintf(w[0].uuid, sizeof w[0].uuid, "%s", g[0].mig[0].uuid);
    snprintf(w[1].uuid, sizeof w[1].uuid, "%s", g[0].mig[1].uuid);
    cr_mig_plan p;
    int busy[8] = {1, 1, 0, 0};
    assert_int_equal(cr_gpu_mig_plan(&g[0], busy, w, 3, &p, err, sizeof err), 0);
    assert_int_equal(p.ndestroy, 2);
    assert_int_equal(p.destroy[0], 2);
    assert_int_equal(p.destroy[1], 3);
    assert_int_equal(p.ncreate, 1);
    assert_int_equal(p.create[0], 2);
    /* instance 2 busy: refused, an empty plan */
    busy[2] = 1;
    assert_int_equal(cr_gpu_mig_plan(&g[0], busy, w, 3, &p, err, sizeof err), CR_EBUSY);
    assert_non_null(strstr(err, "which a job holds"));
    assert_int_equal(p.ndestroy + p.ncreate, 0);
    /* the same layout again: nothing to do */
    cr_mig_want same[4];
    for (int i = 0; i < 4; i++) {
        same[i] = (cr_mig_want){.profile = "1g.6gb", .slices = 1, .mem_slices = 1, .start = i};
        snprintf(same[i].uuid, sizeof same[i].uuid, "%s", g[0].mig[i].uuid);
    }
    assert_int_equal(cr_gpu_mig_plan(&g[0], busy, same, 4, &p, err, sizeof err), 0);
    assert_int_equal(p.ndestroy + p.ncreate, 0);
    /* overlap, too many compute slices, a UUID not here, out of range */
    w[2].start = 1;
    busy[2] = 0;
    assert_int_equal(cr_gpu_mig_plan(&g[0], busy, w, 3, &p, err, sizeof err), CR_ERANGE);
    assert_non_null(strstr(err, "overlaps"));
    w[2].start = 3;
    assert_int_equal(cr_gpu_mig_plan(&g[0], busy, w, 3, &p, err, sizeof err), CR_ERANGE);
    w[2].start = 2;
    w[2].slices = 3;
    assert_int_equal(cr_gpu_mig_plan(&g[0], busy, w, 3, &p, err, sizeof err), CR_ERANGE);
    w[2].slices = 2;
    snprintf(w[1].uuid, sizeof w[1].uuid, "MIG-elsewhere");
    assert_int_equal(cr_gpu_mig_plan(&g[0], busy, w, 3, &p, err, sizeof err), CR_ENOENT);
    /* a GPU without MIG */
    assert_int_equal(cr_gpu_sim_parse("1xL40S", "n", g, 1, &n, err, sizeof err), 0);
    assert_int_equal(cr_gpu_mig_plan(&g[0], NULL, w, 0, &p, err, sizeof err), CR_ENOTSUP);
    /* NVML ids: 1g.10gb 0/0, 2g 1/1, 3g 2/2, 4g 3/3, 7g 4/4, +me 7, 1g.20gb 9 */
    unsigned gp, cp;
    assert_int_equal(cr_gpu_mig_nvml_profile("1g.10gb", 1, 1, &gp, &cp), 0);
    assert_true(gp == 0 && cp == 0);
    assert_int_equal(cr_gpu_mig_nvml_profile("3g.40gb", 3, 4, &gp, &cp), 0);
    assert_true(gp == 2 && cp == 2);
    assert_int_equal(cr_gpu_mig_nvml_profile("7g.80gb", 7, 8, &gp, &cp), 0);
    assert_true(gp == 4 && cp == 4);
    assert_int_equal(cr_gpu_mig_nvml_profile("1g.10gb+me", 1, 1, &gp, &cp), 0);
    assert_true(gp == 7 && cp == 0);
    assert_int_equal(cr_gpu_mig_nvml_profile("1g.20gb", 1, 2, &gp, &cp), 0);
    assert_true(gp == 9 && cp == 0);
    assert_int_equal(cr_gpu_mig_nvml_profile("5g.50gb", 5, 5, &gp, &cp), CR_EINVAL);
}

/* /proc's hidepid decides whether a job reads other tenants' command lines. */
static void test_proc_hidden(void **state)
{
    assert_false(cr_iso_proc_hidden(""));
    assert_false(cr_iso_proc_hidden("proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n"));
    assert_true(cr_iso_proc_hidden("sysfs /sys sysfs rw 0 0\n"
                                   "proc /proc proc rw,relatime,hidepid=invisible 0 0\n"));
    assert_true(cr_iso_proc_hidden("proc /proc proc rw,hidepid=2,gid=5 0 0"));
    assert_true(cr_iso_proc_hidden("proc /proc proc rw,hidepid=1 0 0"));
    assert_false(cr_iso_proc_hidden("proc /proc proc rw,hidepid=0 0 0"));
    /* another mount's options, or one stacked over it, do not count */
    assert_false(cr_iso_proc_hidden("proc /mnt/proc proc rw,hidepid=2 0 0\n"));
    assert_false(cr_iso_proc_hidden("proc /proc proc rw,hidepid=2 0 0\n"
                                    "proc /proc proc rw 0 0\n"));
}

/* A power cap (issue 31, a pool's power budget) through the sim backend:
 * clamped to the board's range, the power held under it and the clock
 * lowered, 0 back to the TDP. */
static void test_sim_power_cap(void **state)
{
    (void)state;
    cr_gpu_backend *b = NULL;
    char err[256];
    assert_int_equal(cr_gpu_open("sim:1xL4", "n1", NULL, &b, err, sizeof err), 0);
    int tdp = b->gpus[0].tdp_w, applied = 0;
    assert_true(tdp > 30);
    cr_gpu_load load = {{1.0}};
    cr_gpu_sample s0, s1;
    assert_int_equal(b->ops->sample(b, &load, 1000000000, &s0), 0); /* settles at full load */
    assert_true(s0.power_mw > 30 * 1000);
    assert_int_equal(cr_gpu_set_power_cap(b, 0, 30, &applied, err, sizeof err), 0);
    assert_int_equal(applied, 30);
    for (int64_t t = 2; t < 40; t++) {
        assert_int_equal(b->ops->sample(b, &load, t * 1000000000, &s1), 0);
        assert_true(s1.power_mw <= 30 * 1000);
    }
    assert_true(s1.sm_clock_mhz < s0.sm_clock_mhz);
    /* below the board's range: its floor; 0: the default again */
    assert_int_equal(cr_gpu_set_power_cap(b, 0, 1, &applied, err, sizeof err), 0);
    assert_int_equal(applied, tdp / 3);
    assert_int_equal(cr_gpu_set_power_cap(b, 0, 0, &applied, err, sizeof err), 0);
    assert_int_equal(applied, tdp);
    assert_int_equal(cr_gpu_set_power_cap(b, 5, 30, &applied, err, sizeof err), CR_EINVAL);
    cr_gpu_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sim_spec_basic),  cmocka_unit_test(test_sim_spec_groups_and_mig),
        cmocka_unit_test(test_sim_spec_errors), cmocka_unit_test(test_faults),
        cmocka_unit_test(test_health),          cmocka_unit_test(test_nvml_names),
        cmocka_unit_test(test_nvlink_domains),  cmocka_unit_test(test_desired_parse),
        cmocka_unit_test(test_desired_errors),  cmocka_unit_test(test_plan_env),
        cmocka_unit_test(test_desired_fence),   cmocka_unit_test(test_task_env),
        cmocka_unit_test(test_mig_plan),        cmocka_unit_test(test_proc_hidden),
        cmocka_unit_test(test_sim_power_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
