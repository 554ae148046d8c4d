/*
 * test_advise.c - `corral advise` end to end: runs the built binary
 * ($CORRAL_BIN) on the six seed workloads of issue 2 and checks the
 * guidance in its --json document; then bad input (exit 2, the flag named)
 * and a bad catalog file (non-zero, file:line:col).
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

typedef struct run_result {
    int status;   /* exit code */
    char *out;    /* stdout + stderr; free() */
    json_t *json; /* parsed stdout when --json and exit 0 */
} run_result;

/* Run corral with args (a shell-quoted string); capture output. */
static run_result run(const char *args, int want_json)
{
    const char *bin = getenv("CORRAL_BIN");
    assert_non_null(bin);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s%s", bin, args, want_json ? " --json 2>/dev/null" : " 2>&1");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += n;
        if (cap - len < 4096) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    buf[len] = '\0';
    int st = pclose(p);
    run_result r = {WIFEXITED(st) ? WEXITSTATUS(st) : -1, buf, NULL};
    if (want_json && r.status == 0) {
        json_error_t e;
        r.json = json_loads(buf, 0, &e);
        if (!r.json) {
            fprintf(stderr, "bad JSON at %d:%d: %s\n%s\n", e.line, e.column, e.text, buf);
        }
        assert_non_null(r.json);
    }
    return r;
}

static void done(run_result *r)
{
    json_decref(r->json);
    free(r->out);
}

static json_t *ranked(const run_result *r, size_t i)
{
    return json_array_get(json_object_get(r->json, "ranked"), i);
}

static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static double num(const json_t *o, const char *k)
{
    return json_number_value(json_object_get(o, k));
}

static int in_list(const char *s, const char *const *list)
{
    for (; *list; list++) {
        if (!strcmp(s, *list)) {
            return 1;
        }
    }
    return 0;
}

/* The refusal reason for a GPU alias, or NULL when it was not refused. */
static const char *refused(const run_result *r, const char *alias)
{
    json_t *arr = json_object_get(r->json, "refused");
    for (size_t i = 0; i < json_array_size(arr); i++) {
        if (!strcmp(str(json_array_get(arr, i), "alias"), alias)) {
            return str(json_array_get(arr, i), "reason");
        }
    }
    return NULL;
}

static json_t *find_ranked(const run_result *r, const char *alias, size_t *pos)
{
    json_t *arr = json_object_get(r->json, "ranked");
    for (size_t i = 0; i < json_array_size(arr); i++) {
        if (!strcmp(str(json_array_get(arr, i), "alias"), alias)) {
            if (pos) {
                *pos = i;
            }
            return json_array_get(arr, i);
        }
    }
    return NULL;
}

/* Seed 1: pre-training a 70B model -> H100/H200 SXM class, multi-node, TP
 * inside NVLink and DP across nodes. */
static void test_seed_pretrain(void **state)
{
    (void)state;
    /* Full recompute: with selective checkpointing (the default where it
     * fits) B200's 192 GB hold a 70B stage without TP (pp4 x dp128). */
    run_result r = run("advise --kind pretrain --params 70b --tokens 2e12 --checkpointing full", 1);
    assert_int_equal(r.status, 0);
    json_t *top = ranked(&r, 0);
    static const char *const sxm[] = {"h100", "h200", "b200", "gb200", NULL};
    assert_true(in_list(str(top, "alias"), sxm));
    assert_true(num(top, "nodes") > 1);
    assert_true(num(top, "tp") >= 2 && num(top, "tp") <= 8);
    assert_true(num(top, "dp") > 1);
    assert_non_null(strstr(str(top, "reason"), "over NVLink"));
    assert_non_null(strstr(str(top, "reason"), "over network"));
    /* The top three is NVLink hardware: SXM, or NVLink-bridged NVL pairs
     * (tp2 over the bridge fits 70B under the training memory budget). */
    static const char *const nvl[] = {"h100", "h200", "b200", "gb200", "h100nvl", "h200nvl", NULL};
    for (size_t i = 0; i < 3; i++) {
        assert_true(in_list(str(ranked(&r, i), "alias"), nvl));
    }
    /* PCIe inference cards are either refused or far behind. */
    size_t pos = 0;
    if (find_ranked(&r, "l4", &pos)) {
        assert_true(pos >= 5);
    }
    done(&r);
}

/* Seed 2: LoRA of a 7B model -> a PCIe card wins on cost, H100 is flagged
 * as wasteful. */
static void test_seed_lora(void **state)
{
    (void)state;
    run_result r = run("advise --kind finetune --method lora --params 7b --tokens 1e8", 1);
    assert_int_equal(r.status, 0);
    json_t *top = ranked(&r, 0);
    assert_string_equal(str(top, "form"), "PCIe");
    static const char *const cls[] = {"l40s", "a100pcie", "a30", "l40", "a40", NULL};
    assert_true(in_list(str(top, "alias"), cls));
    assert_int_equal((int)num(top, "gpus"), 1);
    size_t pos = 0;
    json_t *h100 = find_ranked(&r, "h100", &pos);
    assert_non_null(h100);
    assert_true(json_is_true(json_object_get(h100, "wasteful")));
    assert_non_null(strstr(str(h100, "reason"), "wasteful"));
    assert_true(num(h100, "cost_usd") > num(top, "cost_usd"));
    assert_true(pos > 0);
    done(&r);
}

/* Seed 3: 70B chat with a 500 ms TTFT target -> HBM cards, with the count
 * the KV cache needs. */
static void test_seed_chat(void **state)
{
    (void)state;
    run_result r = run("advise --kind inference --params 70b --rate 10 --prompt 1000 "
                       "--output 250 --ttft 500ms",
                       1);
    assert_int_equal(r.status, 0);
    for (size_t i = 0; i < 3; i++) {
        json_t *e = ranked(&r, i);
        assert_int_equal(strncmp(str(e, "memory_type"), "HBM", 3), 0);
        assert_true(num(e, "ttft_ms") <= 500);
        assert_true(num(e, "tpot_ms") <= 50);
        assert_non_null(strstr(str(e, "reason"), "KV"));
        /* 140 GB of weights never fit on fewer GPUs than their memory allows */
        assert_true(num(e, "mem_per_gpu_gb") * num(e, "gpus") >= 140);
    }
    const char *t4 = refused(&r, "t4");
    assert_non_null(t4);
    assert_non_null(strstr(t4, "weights need 140 GB"));
    const char *l40s = refused(&r, "l40s");
    size_t pos = 0;
    assert_true(l40s != NULL || (find_ranked(&r, "l40s", &pos) && pos >= 3));
    done(&r);
}

/* Seed 4: multi-stream video analytics -> L40S/L4/A10 class (video engines,
 * RT cores); the HBM compute cards have no NVENC. */
static void test_seed_video(void **state)
{
    (void)state;
    run_result r = run("advise --kind visual --streams 64 --needs nvenc,rt", 1);
    assert_int_equal(r.status, 0);
    static const char *const cls[] = {"l40s", "l4", "a10", "l40", "a40", "t4", "a16", NULL};
    json_t *arr = json_object_get(r.json, "ranked");
    assert_true(json_array_size(arr) >= 3);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        assert_true(in_list(str(json_array_get(arr, i), "alias"), cls));
    }
    static const char *const top[] = {"l40s", "l4", "a10", NULL};
    assert_true(in_list(str(ranked(&r, 0), "alias"), top));
    assert_non_null(strstr(refused(&r, "h100"), "NVENC"));
    assert_non_null(strstr(refused(&r, "a100"), "NVENC"));
    done(&r);
}

static void expect_usage_error(const char *args, const char *flag, const char *values);

/* Encoding: 100 1080p30 HEVC P5 VBR streams; L4 carries 2 NVENC x 411 fps
 * / 30 = 27.4 streams, so 4 GPUs; data-centre GPUs without NVENC are
 * refused with the reason, and AV1 before Ada has no published rate. */
static void test_video_encode(void **state)
{
    (void)state;
    run_result r = run("advise --kind visual --streams 100 --codec hevc --preset p5 --rc vbr "
                       "--resolution 1080p --fps 30",
                       1);
    assert_int_equal(r.status, 0);
    json_t *l4 = find_ranked(&r, "l4", NULL);
    assert_non_null(l4);
    assert_int_equal((int)num(l4, "gpus"), 4);
    assert_non_null(strstr(str(l4, "reason"), "encode-bound"));
    static const char *const none[] = {"a100", "h100", "h200", "a30", "b200"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        const char *why = refused(&r, none[i]);
        assert_non_null(why);
        assert_string_equal(why, "no video encoder (NVENC)");
    }
    done(&r);
    r = run("advise --kind visual --streams 10 --codec av1 --resolution 3840x2160", 1);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(refused(&r, "t4"), "no published NVENC av1 rate"));
    assert_non_null(find_ranked(&r, "l40s", NULL));
    done(&r);
    expect_usage_error("advise --kind visual --codec vp9", "--codec", "h264|hevc|av1");
    expect_usage_error("advise --kind visual --codec hevc --preset p4", "--preset", "p1|p3|p5|p7");
    expect_usage_error("advise --kind visual --rc abr", "--rc", "cbr|vbr");
    expect_usage_error("advise --kind visual --resolution 1080", "--resolution", "WxH");
    expect_usage_error("advise --kind visual --fps 0", "--fps", "[1, 480]");
    expect_usage_error("advise --kind inference --params 7b --rate 1 --codec hevc", "--codec",
                       "only for --kind visual");
}

/* Seed 5: FP64 molecular dynamics with ECC -> A100/H100, with L40S/A10
 * refused for their FP64 rate. */
static void test_seed_hpc(void **state)
{
    (void)state;
    run_result r = run("advise --kind hpc --needs fp64,ecc", 1);
    assert_int_equal(r.status, 0);
    int seen = 0;
    for (size_t i = 0; i < 3; i++) {
        const char *a = str(ranked(&r, i), "alias");
        seen += !strncmp(a, "a100", 4) || !strncmp(a, "h100", 4);
    }
    assert_true(seen >= 2);
    assert_non_null(strstr(refused(&r, "l40s"), "no FP64: 1/64 rate"));
    assert_non_null(strstr(refused(&r, "a10"), "no FP64: 1/32 rate"));
    done(&r);
}

/* Seed 6: many small inference tenants -> MIG slices of A100/H100/A30. */
static void test_seed_tenants(void **state)
{
    (void)state;
    run_result r = run("advise --kind inference --params 1b --rate 0.5 --tenants 7 "
                       "--prompt 500 --output 200",
                       1);
    assert_int_equal(r.status, 0);
    for (size_t i = 0; i < 3; i++) {
        json_t *e = ranked(&r, i);
        const char *a = str(e, "alias");
        assert_true(!strncmp(a, "a100", 4) || !strncmp(a, "h100", 4) || !strcmp(a, "a30"));
        assert_true(json_is_string(json_object_get(e, "mig_profile")));
        assert_int_equal((int)num(e, "mig_slices"), 7);
        assert_true(num(e, "gpu_share") < 2);
    }
    json_t *l4 = find_ranked(&r, "l4", NULL);
    assert_non_null(l4);
    assert_int_equal((int)num(l4, "gpus"), 7); /* one GPU per tenant without MIG */
    done(&r);
}

/* The table output has the ranked list and the refusals. */
static void test_table(void **state)
{
    (void)state;
    run_result r = run("advise --kind hpc --needs fp64,ecc --objective time", 0);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "Ranked by time"));
    assert_non_null(strstr(r.out, "Cannot run it:"));
    assert_non_null(strstr(r.out, "no FP64: 1/64 rate"));
    done(&r);
}

/* --model: the plan says tp x pp x replicas and why; --params alone names
 * the shape it assumed; unknown models and half shapes are usage errors. */
static void test_models(void **state)
{
    (void)state;
    run_result r =
        run("advise --kind inference --model llama-3.1-405b --rate 10 --precision fp8", 0);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "model llama-3.1-405b (126 layers, 8 KV heads)"));
    assert_non_null(strstr(r.out, "x tp8"));
    assert_non_null(strstr(r.out, "replicas for 10 req/s"));
    done(&r);
    r = run("advise --kind inference --params 8b --rate 5", 0);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "shape assumed: llama-3.1-8b"));
    done(&r);
    r = run("advise --kind inference --model deepseek-v3 --rate 1 --precision fp8", 1);
    assert_int_equal(r.status, 0);
    json_t *m = json_object_get(json_object_get(r.json, "workload"), "model");
    assert_non_null(m);
    assert_int_equal(json_integer_value(json_object_get(m, "kv_lora_rank")), 512);
    assert_int_equal(json_integer_value(json_object_get(m, "experts")), 256);
    done(&r);
    r = run("advise --kind inference --model llama-9-9000b --rate 1", 0);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.out, "unknown model"));
    assert_non_null(strstr(r.out, "mixtral-8x7b"));
    done(&r);
    r = run("advise --kind inference --layers 32 --rate 1", 0);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.out, "--layers, --hidden, --heads and --ffn"));
    done(&r);
    r = run("advise --kind inference --layers 32 --hidden 4096 --heads 32 --kv-heads 5 --ffn "
            "14336 --rate 1",
            0);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.out, "kv-heads"));
    done(&r);
    r = run("advise --kind inference --model llama-3.1-8b --params 70b --rate 1", 0);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.out, "disagrees"));
    done(&r);
    /* fp4 (issue 26): Blackwell only; the others refused saying why */
    r = run("advise --kind inference --model llama-3.1-70b --rate 1 --precision fp4", 0);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "Best by cost: B200"));
    assert_non_null(strstr(r.out, "H100 SXM"));
    assert_non_null(strstr(r.out, "no FP4 tensor cores (fp4 runs on Blackwell"));
    done(&r);
    r = run("advise --kind hpc --intensity sparse --needs fp64 --top 1", 0);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "bandwidth-bound"));
    done(&r);
}

/* LoRA memory: the adapter rank and a whole-vocabulary loss (Hugging Face
 * Trainer) both cost memory; Qwen 72B QLoRA at 8192 tokens fits one 80 GB
 * GPU with a chunked loss and not with the full one, and the refusal names
 * the activations, not the weights. */
static void test_lora_memory(void **state)
{
    (void)state;
    const char *base = "advise --kind finetune --method qlora --model qwen-72b --seq 8192 "
                       "--batch 1 --gpus 1";
    char args[256];
    snprintf(args, sizeof args, "%s --lora-rank 64", base);
    run_result r = run(args, 0);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "A100 80GB SXM"));
    assert_null(strstr(r.out, "A100 80GB SXM: does not fit"));
    done(&r);
    snprintf(args, sizeof args, "%s --lora-rank 64 --loss full", base);
    r = run(args, 0);
    assert_non_null(strstr(r.out, "A100 80GB SXM"));
    assert_non_null(strstr(r.out, "at best with activations"));
    done(&r);
    /* rank 4096 adapters on every linear layer: the optimizer states no
     * longer fit */
    snprintf(args, sizeof args, "%s --lora-rank 4096", base);
    r = run(args, 0);
    assert_non_null(strstr(r.out, "weights and optimizer states need"));
    done(&r);
}

static void expect_usage_error(const char *args, const char *flag, const char *values)
{
    run_result r = run(args, 0);
    if (r.status != 2 || !strstr(r.out, flag) || (values && !strstr(r.out, values))) {
        fprintf(stderr, "args: %s\nstatus %d output: %s\n", args, r.status, r.out);
    }
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.out, flag));
    if (values) {
        assert_non_null(strstr(r.out, values));
    }
    done(&r);
}

static void test_bad_input(void **state)
{
    (void)state;
    expect_usage_error("advise --kind training", "--kind",
                       "pretrain|finetune|inference|visual|hpc|batch");
    expect_usage_error("advise", "--kind", "pretrain|finetune");
    expect_usage_error("advise --kind finetune --method lora --lora-rank 0", "--lora-rank",
                       "[1, 4096]");
    expect_usage_error("advise --kind finetune --loss half", "--loss", "chunked or full");
    expect_usage_error("advise --kind finetune --method adapter --params 7b", "--method",
                       "full|lora|qlora");
    expect_usage_error("advise --kind pretrain --params seven", "--params", "7b, 70e9");
    expect_usage_error("advise --kind pretrain", "--params", NULL);
    expect_usage_error("advise --kind inference --params 7b", "--rate", NULL);
    expect_usage_error("advise --kind hpc --needs fp64,gpu", "--needs", "fp64,ecc,nvenc,rt");
    expect_usage_error("advise --kind hpc --needs ''", "--needs", "empty");
    expect_usage_error("advise --kind pretrain --params 1b --throughputs "
                       "\"$CORRAL_SRC/data/traces/gavel/simulation_throughputs.json\" "
                       "--job Nope --steps 100",
                       "--job", "'Nope' is not a job type");
    expect_usage_error("advise --kind hpc --objective fast", "--objective", "time|cost|energy");
    expect_usage_error("advise --kind inference --params 7b --rate 1 --ttft soon", "--ttft",
                       "500ms");
    expect_usage_error("advise --kind hpc --precision fp7", "--precision", "bf16|fp16");
    expect_usage_error("advise --kind pretrain --params 7b --precision fp4", "--precision",
                       "fp4 is for serving");
    expect_usage_error("advise --kind hpc --gpus 0", "--gpus", "auto");
    expect_usage_error("advise --kind hpc --bogus", "--bogus", NULL);
    expect_usage_error("advise --kind pretrain --method lora --params 7b", "--method", NULL);
}

static void test_bad_catalog(void **state)
{
    (void)state;
    char path[] = "/tmp/corral-bad-catalog-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "model,memory_gb,mem_bw_gbs\nX,80,fast\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char args[256];
    snprintf(args, sizeof args, "advise --kind hpc --catalog %s", path);
    run_result r = run(args, 0);
    assert_true(r.status != 0);
    char want[128];
    snprintf(want, sizeof want, "%s:2:6: mem_bw_gbs", path);
    assert_non_null(strstr(r.out, want));
    done(&r);
    unlink(path);
    r = run("advise --kind hpc --catalog /nonexistent.csv", 0);
    assert_true(r.status != 0);
    assert_non_null(strstr(r.out, "/nonexistent.csv"));
    done(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_pretrain), cmocka_unit_test(test_seed_lora),
        cmocka_unit_test(test_seed_chat),     cmocka_unit_test(test_seed_video),
        cmocka_unit_test(test_video_encode),  cmocka_unit_test(test_seed_hpc),
        cmocka_unit_test(test_seed_tenants),  cmocka_unit_test(test_table),
        cmocka_unit_test(test_models),        cmocka_unit_test(test_lora_memory),
        cmocka_unit_test(test_bad_input),     cmocka_unit_test(test_bad_catalog),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
