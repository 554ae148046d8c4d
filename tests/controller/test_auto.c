/*
 * test_auto.c - `gpu_type: "auto"` against the real controller on loopback:
 * fake nodes of several GPU types register through the agent routes, auto
 * jobs of each kind are submitted, and their placements must be the ones
 * the advisor (src/model) implies: FP64 work never on L40S, video never on
 * GPUs without NVENC, LoRA 7B on L40S while one is free (the cheapest by
 * the advisor's cost ranking), 70B inference on 2 GPUs only where the
 * weights fit, and a job no type can run pending with the refusals named.
 *
 * No sleeps as synchronisation: every wait polls with a deadline.
 */
#include "cr_buf.h"
#include "cr_time.h"

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../integration/reap.h"
#include "ctl_fixture.h"
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>

typedef ctl_daemon daemon_t;

static void poll_sleep(void)
{
    ctlf_nap();
}

static json_t *call(const daemon_t *d, const char *method, const char *path, const char *token,
                    const char *body, long *code)
{
    return ctlf_call(d, method, path, token, body, code);
}

static const char *str(json_t *v, const char *key)
{
    return ctlf_str(v, key);
}

/* extra: more flags ("--policy hetero"), NULL for none; fresh: a new
 * state directory (else d->dir's, after a stop). */
static void start_in(daemon_t *d, const char *extra, bool fresh)
{
    ctlf_start_ok(d, fresh ? "/tmp/corral-test-auto-XXXXXX" : NULL, extra);
}

static void start(daemon_t *d, const char *extra)
{
    start_in(d, extra, true);
}

static void halt(daemon_t *d)
{
    int st = cr_test_stop(d->pid, SIGTERM, 60);
    cr_test_track(d->dir, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void stop(daemon_t *d)
{
    halt(d);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot remove %s\n", d->dir);
    }
    cr_test_untrack(d->dir);
}

/* A fake agent's registration: n GPUs of one model. */
static void register_node(const daemon_t *d, const char *name, const char *model, int n,
                          double mem_gb)
{
    cr_buf b;
    cr_buf_init(&b);
    cr_buf_printf(&b, "{\"node\":\"%s\",\"addr\":\"127.0.0.1\",\"port\":1,\"cpus\":8,\"gpus\":[",
                  name);
    for (int i = 0; i < n; i++) {
        cr_buf_printf(&b,
                      "%s{\"index\":%d,\"uuid\":\"GPU-%s-%d\",\"model\":\"%s\",\"mem_bytes\":%.0f}",
                      i ? "," : "", i, name, i, model, mem_gb * 1e9);
    }
    cr_buf_puts(&b, "]}");
    long code;
    json_t *v = call(d, "POST", "/v1/agents/register", d->join, cr_buf_str(&b), &code);
    assert_int_equal(code, 200);
    json_decref(v);
    cr_buf_fini(&b);
}

static int64_t submit(const daemon_t *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int64_t submit(const daemon_t *d, const char *fmt, ...)
{
    char body[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    return ctlf_submit_ok(d, d->admin, body);
}

static json_t *job(const daemon_t *d, int64_t id)
{
    return ctlf_job_ok(d, id);
}

/* Poll until the job leaves "not yet considered": running, or pending
 * with the scheduler's reason. Returned new (json_decref). */
static json_t *settled(const daemon_t *d, int64_t id, const char *state)
{
    int64_t deadline = cr_mono_ns() + 20 * CR_NS_PER_SEC;
    for (;;) {
        json_t *v = job(d, id);
        bool ok = strcmp(str(v, "state"), state) == 0 &&
                  (strcmp(state, "pending") != 0 ||
                   (*str(v, "reason") && !strstr(str(v, "reason"), "not yet considered")));
        if (ok) {
            return v;
        }
        if (cr_mono_ns() > deadline) {
            fprintf(stderr, "job %lld: %s (%s), wanted %s\n", (long long)id, str(v, "state"),
                    str(v, "reason"), state);
        }
        json_decref(v);
        assert_true(cr_mono_ns() < deadline);
        poll_sleep();
    }
}

/* The type the job runs on, once running. */
static char *run_type(const daemon_t *d, int64_t id)
{
    json_t *v = settled(d, id, "running");
    char *t = strdup(str(v, "run_gpu_type"));
    json_decref(v);
    return t;
}

/* The "why" of the job's "started" event (polled: the event row commits
 * after the job shows running). */
static char *started_why(const daemon_t *d, int64_t id)
{
    int64_t deadline = cr_mono_ns() + 20 * CR_NS_PER_SEC;
    char *why = NULL;
    while (!why) {
        json_t *v = job(d, id);
        json_t *ev = json_object_get(v, "events");
        for (size_t i = 0; i < json_array_size(ev); i++) {
            json_t *e = json_array_get(ev, i);
            if (strcmp(str(e, "what"), "started") == 0) {
                free(why);
                why = strdup(str(e, "why"));
            }
        }
        json_decref(v);
        assert_true(why || cr_mono_ns() < deadline);
        if (!why) {
            poll_sleep();
        }
    }
    return why;
}

static const char *const cmd = "\"command\":[\"sleep\",\"60\"]";

static void test_auto_placements(void **state)
{
    (void)state;
    daemon_t d;
    start(&d, NULL);
    register_node(&d, "h100-0", "H100 SXM", 8, 80);
    register_node(&d, "a100-0", "A100 80GB SXM", 8, 80);
    register_node(&d, "h200-0", "H200 SXM", 8, 141);

    /* Video before any GPU with an encoder exists: pending, saying why. */
    int64_t render = submit(&d, "{%s,\"name\":\"render\",\"kind\":\"visual\",\"gpus\":1}", cmd);
    json_t *v = settled(&d, render, "pending");
    const char *reason = str(v, "reason");
    assert_non_null(strstr(reason, "no GPU type in the cluster can run it"));
    /* (types refused for the same reason are listed together) */
    assert_non_null(strstr(reason, "H100 SXM, A100 80GB SXM, H200 SXM: no video encoder (NVENC)"));
    json_decref(v);

    /* An L40S node joins: the waiting video job goes there. */
    register_node(&d, "l40s-0", "L40S", 4, 48);
    char *t = run_type(&d, render);
    assert_string_equal(t, "L40S");
    free(t);

    /* FP64 work: never L40S (1/64 rate), even with L40S free. */
    int64_t cfd = submit(&d, "{%s,\"name\":\"cfd\",\"kind\":\"hpc\",\"gpus\":2}", cmd);
    t = run_type(&d, cfd);
    assert_string_not_equal(t, "L40S");
    free(t);

    /* LoRA 7B: L40S while one is free (cheapest by the advisor). */
    int64_t lora = submit(&d,
                          "{%s,\"name\":\"lora\",\"kind\":\"finetune\",\"gpus\":1,\"model\":"
                          "{\"params\":7e9,\"method\":\"lora\",\"tokens\":1e8}}",
                          cmd);
    t = run_type(&d, lora);
    assert_string_equal(t, "L40S");
    free(t);
    char *why = started_why(&d, lora);
    assert_non_null(strstr(why, "auto: L40S, best by cost (advisor: "));
    free(why);

    /* 78B inference on 2 GPUs: 156 GB of weights; only H200 leaves room
     * for the KV cache (vLLM's 90% of the 79.6 GiB an H100 reports is 77
     * GB a GPU: 70B, 140 GB, now fits two H100, as it runs in public
     * benchmarks; issue 26). */
    int64_t chat = submit(
        &d,
        "{%s,\"name\":\"chat\",\"kind\":\"inference\",\"gpus\":2,\"model\":{\"params\":7.8e10}}",
        cmd);
    t = run_type(&d, chat);
    assert_string_equal(t, "H200 SXM");
    free(t);

    /* Fill the L40S: the next LoRA job takes the next type by cost. */
    int64_t fill = submit(&d, "{%s,\"name\":\"fill\",\"gpu_type\":\"L40S\",\"gpus\":2}", cmd);
    t = run_type(&d, fill);
    free(t);
    int64_t lora2 = submit(&d,
                           "{%s,\"name\":\"lora2\",\"kind\":\"finetune\",\"gpus\":1,\"model\":"
                           "{\"params\":7e9,\"method\":\"lora\"}}",
                           cmd);
    t = run_type(&d, lora2);
    assert_string_not_equal(t, "L40S");
    free(t);
    why = started_why(&d, lora2);
    assert_non_null(strstr(why, "best by cost among types with free GPUs"));
    free(why);

    /* No type can run it: pending, with every refusal named. */
    int64_t huge = submit(
        &d, "{%s,\"name\":\"huge\",\"kind\":\"pretrain\",\"gpus\":1,\"model\":{\"params\":7e10}}",
        cmd);
    v = settled(&d, huge, "pending");
    reason = str(v, "reason");
    assert_non_null(strstr(reason, "no GPU type in the cluster can run it: "));
    assert_non_null(strstr(reason, "H200 SXM"));
    assert_non_null(strstr(reason, "L40S"));
    assert_non_null(strstr(reason, "weights and optimizer states need 1120 GB"));
    json_decref(v);

    /* A model name sets the shape and the parameter count (Llama 3.1 70B:
     * 70.55e9 parameters, 16 bytes each with Adam); a bad name is refused. */
    int64_t named = submit(&d,
                           "{%s,\"name\":\"named\",\"kind\":\"pretrain\",\"gpus\":1,\"model\":"
                           "{\"name\":\"llama-3.1-70b\"}}",
                           cmd);
    v = settled(&d, named, "pending");
    assert_non_null(strstr(str(v, "reason"), "weights and optimizer states need 1129 GB"));
    json_decref(v);
    long bad;
    v = call(&d, "POST", "/v1/jobs", d.admin,
             "{\"command\":[\"true\"],\"model\":{\"name\":\"llama 3; rm\"}}", &bad);
    assert_int_equal(bad, 400);
    assert_string_equal(str(v, "field"), "model.name");
    json_decref(v);
    v = call(&d, "POST", "/v1/jobs", d.admin,
             "{\"command\":[\"true\"],\"model\":{\"name\":\"llama-9-9000b\"}}", &bad);
    assert_int_equal(bad, 400);
    assert_non_null(strstr(str(v, "message"), "unknown model"));
    json_decref(v);

    /* Without hints, auto keeps "any type": it runs. */
    int64_t batch = submit(&d, "{%s,\"name\":\"batch\",\"gpus\":1}", cmd);
    t = run_type(&d, batch);
    free(t);

    /* Hints the model cannot read are refused at the door. */
    long code;
    v = call(&d, "POST", "/v1/jobs", d.admin,
             "{\"command\":[\"true\"],\"model\":{\"params\":7e9,\"method\":\"dora\"}}", &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "field"), "model.method");
    json_decref(v);
    v = call(&d, "POST", "/v1/jobs", d.admin,
             "{\"command\":[\"true\"],\"model\":{\"params\":7e9,\"stack\":\"tensorflow\"}}", &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "field"), "model.stack");
    json_decref(v);
    /* The advisor's knobs are taken (issue 26): an HF LoRA at micro-batch 2. */
    int64_t knobs = submit(&d,
                           "{%s,\"name\":\"knobs\",\"kind\":\"finetune\",\"gpus\":1,\"model\":"
                           "{\"params\":7e9,\"method\":\"lora\",\"stack\":\"hf\","
                           "\"checkpointing\":\"full\",\"micro_batch\":2}}",
                           cmd);
    t = run_type(&d, knobs);
    assert_non_null(t);
    free(t);
    stop(&d);
}

/* The hetero policy gets the same refusals (plain throughput otherwise). */
static void test_auto_hetero(void **state)
{
    (void)state;
    daemon_t d;
    start(&d, "--policy hetero");
    register_node(&d, "l40s-0", "L40S", 4, 48);
    register_node(&d, "a100-0", "A100 80GB SXM", 4, 80);
    int64_t cfd = submit(&d, "{%s,\"name\":\"cfd\",\"kind\":\"hpc\",\"gpus\":2}", cmd);
    char *t = run_type(&d, cfd);
    assert_string_equal(t, "A100 80GB SXM");
    free(t);
    int64_t render = submit(&d, "{%s,\"name\":\"render\",\"kind\":\"visual\",\"gpus\":1}", cmd);
    t = run_type(&d, render);
    assert_string_equal(t, "L40S");
    free(t);
    stop(&d);
}

/* A restart keeps the choices: running auto work is restored where it
 * ran, an unrunnable job still says why, new auto work is chosen again. */
static void test_auto_restart(void **state)
{
    (void)state;
    daemon_t d;
    start(&d, NULL);
    register_node(&d, "l40s-0", "L40S", 4, 48);
    register_node(&d, "a100-0", "A100 80GB SXM", 4, 80);
    int64_t cfd = submit(&d, "{%s,\"name\":\"cfd\",\"kind\":\"hpc\",\"gpus\":2}", cmd);
    char *t = run_type(&d, cfd);
    assert_string_equal(t, "A100 80GB SXM");
    free(t);
    int64_t huge = submit(
        &d, "{%s,\"name\":\"huge\",\"kind\":\"pretrain\",\"gpus\":1,\"model\":{\"params\":7e10}}",
        cmd);
    json_decref(settled(&d, huge, "pending"));
    halt(&d);
    start_in(&d, NULL, false);
    t = run_type(&d, cfd);
    assert_string_equal(t, "A100 80GB SXM");
    free(t);
    json_t *v = settled(&d, huge, "pending");
    assert_non_null(strstr(str(v, "reason"), "no GPU type in the cluster can run it: "));
    assert_non_null(strstr(str(v, "reason"), "A100 80GB SXM"));
    json_decref(v);
    int64_t lora = submit(&d,
                          "{%s,\"name\":\"lora\",\"kind\":\"finetune\",\"gpus\":1,\"model\":"
                          "{\"params\":7e9,\"method\":\"lora\"}}",
                          cmd);
    t = run_type(&d, lora);
    assert_string_equal(t, "L40S");
    free(t);
    stop(&d);
}

/* A fake agent's registration, keeping its node token (returned new). */
static char *register_tok(const daemon_t *d, const char *name, const char *model, double mem_gb)
{
    char body[512];
    snprintf(body, sizeof body,
             "{\"node\":\"%s\",\"addr\":\"127.0.0.1\",\"port\":1,\"cpus\":8,\"gpus\":[{\"index\":0,"
             "\"uuid\":\"GPU-%s-0\",\"model\":\"%s\",\"mem_bytes\":%.0f}]}",
             name, name, model, mem_gb * 1e9);
    long code;
    json_t *v = call(d, "POST", "/v1/agents/register", d->join, body, &code);
    assert_int_equal(code, 200);
    char *t = strdup(str(v, "node_token"));
    json_decref(v);
    return t;
}

static char *user_token(const daemon_t *d, const char *tenant)
{
    char body[200];
    long code;
    snprintf(body, sizeof body, "{\"name\":\"%s\"}", tenant);
    json_decref(call(d, "POST", "/v1/tenants", d->admin, body, &code));
    assert_int_equal(code, 201);
    snprintf(body, sizeof body, "{\"role\":\"user\",\"tenant\":\"%s\",\"name\":\"t-%s\"}", tenant,
             tenant);
    json_t *v = call(d, "POST", "/v1/tokens", d->admin, body, &code);
    assert_int_equal(code, 201);
    char *t = strdup(str(v, "token"));
    json_decref(v);
    return t;
}

/* The L40S row of /v1/advise for an 8B LoRA as tok sees it: its time and
 * reason (returned new). */
static double advise_l40s(const daemon_t *d, const char *tok, char **reason)
{
    long code;
    json_t *v = call(d, "POST", "/v1/advise", tok,
                     "{\"kind\":\"finetune\",\"params\":8e9,\"method\":\"lora\",\"tokens\":1e8,"
                     "\"gpus\":1,\"top\":50}",
                     &code);
    assert_int_equal(code, 200);
    json_t *ranked = json_object_get(v, "ranked");
    double t = 0;
    for (size_t i = 0; i < json_array_size(ranked); i++) {
        json_t *e = json_array_get(ranked, i);
        if (!strcmp(str(e, "gpu"), "L40S")) {
            t = json_number_value(json_object_get(e, "time_s"));
            *reason = strdup(str(e, "reason"));
        }
    }
    json_decref(v);
    assert_true(t > 0);
    return t;
}

/* Issue 26: 5 runs of a workload class that report what they measured
 * (corral-metric, sent by the agent with their end) bring the advisor's
 * error for that class on that type to within 5% for the tenant that ran
 * them, after a restart too; another tenant sees the model alone. */
static void test_learn_cluster(void **state)
{
    (void)state;
    daemon_t d;
    start(&d, NULL);
    char *nt = register_tok(&d, "l40s-0", "L40S", 48);
    char *alpha = user_token(&d, "alpha"), *beta = user_token(&d, "beta");
    char *why = NULL;
    double t_model = advise_l40s(&d, alpha, &why);
    assert_null(strstr(why, "calibrated"));
    free(why);
    /* The class runs 40% faster than the model says, +-3% run to run. */
    double truth = 1.40 * 1e8 / t_model;
    static const double noise[5] = {1.03, 0.97, 1.01, 0.98, 1.02};
    for (int i = 0; i < 5; i++) {
        char body[600], path[80];
        snprintf(body, sizeof body,
                 "{\"command\":[\"true\"],\"name\":\"lora%d\",\"kind\":\"finetune\",\"gpus\":1,"
                 "\"gpu_type\":\"L40S\",\"model\":{\"params\":8e9,\"method\":\"lora\"}}",
                 i);
        long code;
        json_t *v = call(&d, "POST", "/v1/jobs", alpha, body, &code);
        assert_int_equal(code, 201);
        int64_t id = (int64_t)json_integer_value(json_array_get(json_object_get(v, "ids"), 0));
        json_decref(v);
        char *t = run_type(&d, id);
        free(t);
        snprintf(path, sizeof path, "/v1/agents/l40s-0/status");
        snprintf(body, sizeof body,
                 "{\"jobs\":[{\"job\":%lld,\"state\":\"exited\",\"exit_code\":0,\"run\":1,"
                 "\"metrics\":{\"tokens_per_s\":%.3f,\"step_time_s\":2.0%s}}]}",
                 (long long)id, truth * noise[i], i == 0 ? ",\"bad_lines\":2" : "");
        json_decref(call(&d, "POST", path, nt, body, &code));
        assert_int_equal(code, 200);
        json_decref(settled(&d, id, "completed"));
    }
    for (int pass = 0; pass < 2; pass++) {
        double t = advise_l40s(&d, alpha, &why);
        assert_non_null(strstr(why, "calibrated from 5 runs on this cluster"));
        free(why);
        double predicted = 1e8 / t;
        assert_true(fabs(predicted - truth) / truth <= 0.05);
        /* beta sees the model alone: no run, no name of alpha's */
        t = advise_l40s(&d, beta, &why);
        assert_null(strstr(why, "calibrated"));
        assert_null(strstr(why, "alpha"));
        free(why);
        assert_true(fabs(t - t_model) / t_model < 1e-6);
        if (pass == 0) {
            halt(&d); /* observations survive a restart */
            start_in(&d, NULL, false);
        }
    }
    /* A bad metric field in a report is refused with its name. */
    long code;
    json_t *v = call(&d, "POST", "/v1/agents/l40s-0/status", nt,
                     "{\"jobs\":[{\"job\":1,\"state\":\"exited\",\"exit_code\":0,"
                     "\"metrics\":{\"tokens_per_s\":-1}}]}",
                     &code);
    assert_int_equal(code, 400);
    assert_non_null(strstr(str(v, "field"), "tokens_per_s"));
    json_decref(v);
    free(nt);
    free(alpha);
    free(beta);
    stop(&d);
}

/* A fake agent's registration of n GPUs, keeping its node token (returned new). */
static char *register_n(const daemon_t *d, const char *name, const char *model, int n,
                        double mem_gb)
{
    cr_buf b;
    cr_buf_init(&b);
    cr_buf_printf(&b, "{\"node\":\"%s\",\"addr\":\"127.0.0.1\",\"port\":1,\"cpus\":8,\"gpus\":[",
                  name);
    for (int i = 0; i < n; i++) {
        cr_buf_printf(&b,
                      "%s{\"index\":%d,\"uuid\":\"GPU-%s-%d\",\"model\":\"%s\",\"mem_bytes\":%.0f}",
                      i ? "," : "", i, name, i, model, mem_gb * 1e9);
    }
    cr_buf_puts(&b, "]}");
    long code;
    json_t *v = call(d, "POST", "/v1/agents/register", d->join, cr_buf_str(&b), &code);
    assert_int_equal(code, 200);
    char *t = strdup(str(v, "node_token"));
    json_decref(v);
    cr_buf_fini(&b);
    return t;
}

/* The advisor's tokens/s in a started event's why ("..., 2915 tokens/s"). */
static double why_tokens_per_s(const char *why)
{
    const char *u = strstr(why, " tokens/s");
    assert_non_null(u);
    const char *p = u;
    while (p > why && p[-1] != ' ') {
        p--;
    }
    return strtod(p, NULL);
}

/* Issue 26: `gpu_type: auto` placement uses what the tenant's own jobs
 * measured, like /v1/advise: after 5 runs of a class on L40S, a new auto
 * job of the class gets the advisor's estimate within 5% of the measured
 * throughput and its "started" event says "calibrated from 5 runs on
 * this cluster"; another tenant's auto job of the same class gets the
 * model alone and nothing of the first tenant's. */
static void test_learn_auto(void **state)
{
    (void)state;
    daemon_t d;
    start(&d, NULL);
    char *nt = register_n(&d, "l40s-0", "L40S", 2, 48);
    char *alpha = user_token(&d, "alpha"), *beta = user_token(&d, "beta");
    char *why = NULL;
    double model = 1e8 / advise_l40s(&d, alpha, &why); /* the model's tokens/s */
    free(why);
    double truth = 0.70 * model; /* the class runs 30% slower than the model says */
    static const double noise[5] = {1.02, 0.98, 1.01, 0.97, 1.03};
    for (int i = 0; i < 5; i++) {
        char body[600];
        snprintf(body, sizeof body,
                 "{\"command\":[\"true\"],\"name\":\"run%d\",\"kind\":\"finetune\",\"gpus\":1,"
                 "\"gpu_type\":\"L40S\",\"model\":{\"params\":8e9,\"method\":\"lora\"}}",
                 i);
        long code;
        json_t *v = call(&d, "POST", "/v1/jobs", alpha, body, &code);
        assert_int_equal(code, 201);
        int64_t id = (int64_t)json_integer_value(json_array_get(json_object_get(v, "ids"), 0));
        json_decref(v);
        free(run_type(&d, id));
        snprintf(body, sizeof body,
                 "{\"jobs\":[{\"job\":%lld,\"state\":\"exited\",\"exit_code\":0,\"run\":1,"
                 "\"metrics\":{\"tokens_per_s\":%.3f}}]}",
                 (long long)id, truth * noise[i]);
        json_decref(call(&d, "POST", "/v1/agents/l40s-0/status", nt, body, &code));
        assert_int_equal(code, 200);
        json_decref(settled(&d, id, "completed"));
    }
    static const char auto_job[] =
        "{\"command\":[\"sleep\",\"60\"],\"name\":\"auto\",\"kind\":\"finetune\",\"gpus\":1,"
        "\"gpu_type\":\"auto\",\"model\":{\"params\":8e9,\"method\":\"lora\"}}";
    long code;
    json_t *v = call(&d, "POST", "/v1/jobs", alpha, auto_job, &code);
    assert_int_equal(code, 201);
    int64_t a = (int64_t)json_integer_value(json_array_get(json_object_get(v, "ids"), 0));
    json_decref(v);
    why = started_why(&d, a);
    assert_non_null(strstr(why, "auto: L40S"));
    assert_non_null(strstr(why, "calibrated from 5 runs on this cluster"));
    double est = why_tokens_per_s(why);
    assert_true(fabs(est - truth) / truth <= 0.05);
    assert_true(fabs(model - truth) / truth > 0.40); /* the model alone was 43% off */
    free(why);
    /* beta: the model alone, nothing of alpha's */
    v = call(&d, "POST", "/v1/jobs", beta, auto_job, &code);
    assert_int_equal(code, 201);
    int64_t b = (int64_t)json_integer_value(json_array_get(json_object_get(v, "ids"), 0));
    json_decref(v);
    why = started_why(&d, b);
    assert_null(strstr(why, "calibrated"));
    assert_null(strstr(why, "alpha"));
    assert_true(fabs(why_tokens_per_s(why) - model) / model < 0.01);
    free(why);
    free(nt);
    free(alpha);
    free(beta);
    stop(&d);
}

/* The plan_env the node's desired state gives job id (polled: the start
 * is listed once durable). Returned new (json_decref); NULL when the job
 * is listed without one. */
static json_t *plan_env_of(const daemon_t *d, const char *node, const char *nt, int64_t id)
{
    char path[96];
    snprintf(path, sizeof path, "/v1/agents/%s/desired", node);
    int64_t deadline = cr_mono_ns() + 20 * CR_NS_PER_SEC;
    for (;;) {
        long code;
        json_t *v = call(d, "GET", path, nt, NULL, &code);
        assert_int_equal(code, 200);
        json_t *jobs = json_object_get(v, "jobs");
        for (size_t i = 0; i < json_array_size(jobs); i++) {
            json_t *e = json_array_get(jobs, i);
            if (json_integer_value(json_object_get(e, "job")) == id) {
                json_t *pe = json_object_get(e, "plan_env");
                json_incref(pe);
                json_decref(v);
                return pe;
            }
        }
        json_decref(v);
        assert_true(cr_mono_ns() < deadline);
        poll_sleep();
    }
}

static int env_int(const json_t *env, const char *k)
{
    const char *s = json_string_value(json_object_get(env, k));
    assert_non_null(s);
    return atoi(s);
}

/* Issue 26: the plan reaches the job. An auto pre-train gets CORRAL_TP,
 * _PP, _DP ... whose product is its GPU count and Megatron's arguments
 * for them; a serving job vLLM's; the job object shows the same plan,
 * after a restart too; a job without model hints gets none. */
static void test_plan_env(void **state)
{
    (void)state;
    daemon_t d;
    start(&d, NULL);
    char *nt = register_n(&d, "h100-0", "H100 SXM", 8, 80);
    int64_t pre = submit(&d,
                         "{%s,\"name\":\"pre\",\"kind\":\"pretrain\",\"gpus\":4,\"model\":"
                         "{\"params\":8e9,\"tokens\":1e9,\"micro_batch\":1}}",
                         cmd);
    char *t = run_type(&d, pre);
    assert_string_equal(t, "H100 SXM");
    free(t);
    json_t *pe = plan_env_of(&d, "h100-0", nt, pre);
    assert_non_null(pe);
    int tp = env_int(pe, "CORRAL_TP"), pp = env_int(pe, "CORRAL_PP");
    int dp = env_int(pe, "CORRAL_DP"), cp = env_int(pe, "CORRAL_CP");
    assert_int_equal(tp * pp * dp * cp, 4);
    /* the plan the advisor shows for this workload on this type and count */
    long code;
    json_t *adv = call(&d, "POST", "/v1/advise", d.admin,
                       "{\"kind\":\"pretrain\",\"params\":8e9,\"tokens\":1e9,\"gpus\":4,"
                       "\"top\":50}",
                       &code);
    assert_int_equal(code, 200);
    const char *aplan = NULL;
    json_t *ranked = json_object_get(adv, "ranked");
    for (size_t i = 0; i < json_array_size(ranked); i++) {
        json_t *e = json_array_get(ranked, i);
        if (!strcmp(str(e, "gpu"), "H100 SXM")) {
            aplan = str(e, "plan");
        }
    }
    assert_non_null(aplan);
    assert_string_equal(str(pe, "CORRAL_PLAN"), aplan);
    json_decref(adv);
    assert_int_equal(env_int(pe, "CORRAL_MICRO_BATCH"), 1);
    int gb = env_int(pe, "CORRAL_GLOBAL_BATCH");
    assert_int_equal(gb % (dp * 1), 0);
    char want[160];
    snprintf(want, sizeof want,
             "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d "
             "--micro-batch-size 1 --global-batch-size %d",
             tp, pp, gb);
    assert_non_null(strstr(str(pe, "CORRAL_MEGATRON_ARGS"), want));
    snprintf(want, sizeof want, "model.tensor_model_parallel_size=%d", tp);
    assert_non_null(strstr(str(pe, "CORRAL_NEMO_ARGS"), want));
    assert_null(json_object_get(pe, "CORRAL_VLLM_ARGS"));
    json_decref(pe);
    json_t *v = job(&d, pre);
    json_t *plan = json_object_get(v, "plan");
    assert_int_equal(json_integer_value(json_object_get(plan, "tp")), tp);
    assert_int_equal(json_integer_value(json_object_get(plan, "global_batch")), gb);
    json_decref(v);

    /* Serving, on the type the user chose: vLLM's flags. */
    int64_t chat = submit(&d,
                          "{%s,\"name\":\"chat\",\"kind\":\"inference\",\"gpus\":2,"
                          "\"gpu_type\":\"H100 SXM\",\"model\":{\"params\":7e10}}",
                          cmd);
    json_decref(settled(&d, chat, "running"));
    pe = plan_env_of(&d, "h100-0", nt, chat);
    assert_non_null(pe);
    tp = env_int(pe, "CORRAL_TP");
    pp = env_int(pe, "CORRAL_PP");
    dp = env_int(pe, "CORRAL_DP");
    assert_int_equal(tp * pp * dp, 2);
    snprintf(want, sizeof want, "--tensor-parallel-size %d --pipeline-parallel-size %d", tp, pp);
    assert_non_null(strstr(str(pe, "CORRAL_VLLM_ARGS"), want));
    assert_null(json_object_get(pe, "CORRAL_MEGATRON_ARGS"));
    json_decref(pe);

    /* No hints, no plan. */
    int64_t plain = submit(&d, "{%s,\"name\":\"plain\",\"gpus\":1}", cmd);
    json_decref(settled(&d, plain, "running"));
    assert_null(plan_env_of(&d, "h100-0", nt, plain));

    /* The plan is part of the stored job. */
    halt(&d);
    start_in(&d, NULL, false);
    v = job(&d, pre);
    plan = json_object_get(v, "plan");
    assert_int_equal(json_integer_value(json_object_get(plan, "global_batch")), gb);
    json_decref(v);

    /* Impossible knobs are refused naming the field. */
    v = call(&d, "POST", "/v1/jobs", d.admin,
             "{\"command\":[\"true\"],\"model\":{\"params\":7e9,\"micro_batch\":8,"
             "\"global_batch\":4}}",
             &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "field"), "model.micro_batch");
    json_decref(v);
    v = call(&d, "POST", "/v1/jobs", d.admin,
             "{\"command\":[\"true\"],\"model\":{\"params\":7e9,\"seq_len\":0}}", &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "field"), "model.seq_len");
    json_decref(v);
    free(nt);
    stop(&d);
}

/* Issue 26: a chosen type and count that cannot hold the model is refused
 * at submit naming the field and only the count the request asked for,
 * or taken with a warning under "force". */
static void test_fit_check(void **state)
{
    (void)state;
    daemon_t d;
    start(&d, NULL);
    register_node(&d, "l40s-0", "L40S", 4, 48);
    register_node(&d, "h100-0", "H100 SXM", 8, 80);
    static const char *const pre405 =
        "{\"command\":[\"true\"],\"kind\":\"pretrain\",\"gpus\":4,\"gpu_type\":\"L40S\","
        "\"model\":{\"name\":\"llama-3.1-405b\"}%s}";
    char body[512];
    snprintf(body, sizeof body, pre405, "");
    long code;
    json_t *v = call(&d, "POST", "/v1/jobs", d.admin, body, &code);
    assert_int_equal(code, 400);
    const char *msg = str(v, "message");
    assert_string_equal(str(v, "field"), "gpus");
    assert_non_null(strstr(msg, "does not fit on 4 L40S (it asked for 4 GPUs)"));
    assert_non_null(strstr(msg, "llama-3.1-405b"));
    assert_null(strstr(msg, "tp8"));
    json_decref(v);

    /* Serving 405B on 2 H100: the refusal names no split beyond 2 GPUs. */
    v = call(&d, "POST", "/v1/jobs", d.admin,
             "{\"command\":[\"true\"],\"kind\":\"inference\",\"gpus\":2,\"gpu_type\":"
             "\"H100 SXM\",\"model\":{\"params\":4.05e11}}",
             &code);
    assert_int_equal(code, 400);
    msg = str(v, "message");
    assert_string_equal(str(v, "field"), "gpus");
    assert_non_null(strstr(msg, "(it asked for 2 GPUs)"));
    assert_null(strstr(msg, "pp8"));
    assert_null(strstr(msg, "tp8"));
    assert_null(strstr(msg, "pp4"));
    json_decref(v);

    /* Under force: taken, with the warning in the answer and the event. */
    snprintf(body, sizeof body, pre405, ",\"force\":true");
    v = call(&d, "POST", "/v1/jobs", d.admin, body, &code);
    assert_int_equal(code, 201);
    assert_non_null(strstr(str(v, "warning"), "submitted under force: field 'gpus'"));
    int64_t id = (int64_t)json_integer_value(json_array_get(json_object_get(v, "ids"), 0));
    json_decref(v);
    v = job(&d, id);
    json_t *ev = json_array_get(json_object_get(v, "events"), 0);
    assert_string_equal(str(ev, "what"), "submitted");
    assert_non_null(strstr(str(ev, "why"), "submitted under force"));
    assert_null(json_object_get(v, "force")); /* not part of the stored spec */
    json_decref(v);
    snprintf(body, sizeof body, pre405, ",\"force\":\"yes\"");
    v = call(&d, "POST", "/v1/jobs", d.admin, body, &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "field"), "force");
    json_decref(v);

    /* fp4 (issue 26) on a type without FP4 tensor cores: no count helps;
     * fp4 training is refused naming the field. */
    v = call(&d, "POST", "/v1/jobs", d.admin,
             "{\"command\":[\"true\"],\"kind\":\"inference\",\"gpus\":1,\"gpu_type\":"
             "\"H100 SXM\",\"model\":{\"params\":8e9,\"precision\":\"fp4\"}}",
             &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "field"), "gpu_type");
    assert_non_null(strstr(str(v, "message"), "no FP4 tensor cores"));
    json_decref(v);
    v = call(&d, "POST", "/v1/jobs", d.admin,
             "{\"command\":[\"true\"],\"kind\":\"pretrain\",\"gpus\":1,\"model\":"
             "{\"params\":8e9,\"precision\":\"fp4\"}}",
             &code);
    assert_int_equal(code, 400);
    assert_string_equal(str(v, "field"), "model.precision");
    json_decref(v);

    /* What fits, and auto, are taken without a word. */
    v = call(&d, "POST", "/v1/jobs", d.admin,
             "{\"command\":[\"true\"],\"kind\":\"finetune\",\"gpus\":1,\"gpu_type\":\"L40S\","
             "\"model\":{\"params\":8e9,\"method\":\"lora\"}}",
             &code);
    assert_int_equal(code, 201);
    assert_null(json_object_get(v, "warning"));
    json_decref(v);
    snprintf(body, sizeof body,
             "{\"command\":[\"true\"],\"kind\":\"pretrain\",\"gpus\":4,\"model\":{\"name\":"
             "\"llama-3.1-405b\"}}");
    v = call(&d, "POST", "/v1/jobs", d.admin, body, &code);
    assert_int_equal(code, 201);
    json_decref(v);
    stop(&d);
}

/* What a failed test left: its daemons and directories. */
static int reap_live(void **state)
{
    cr_test_reap_live(0);
    return 0;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, cr_test_on_signal);
    signal(SIGINT, cr_test_on_signal);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_placements), cmocka_unit_test(test_auto_hetero),
        cmocka_unit_test(test_auto_restart),    cmocka_unit_test(test_learn_cluster),
        cmocka_unit_test(test_plan_env),        cmocka_unit_test(test_fit_check),
        cmocka_unit_test(test_learn_auto),
    };
    int rc = cmocka_run_group_tests(tests, NULL, reap_live);
    curl_global_cleanup();
    return rc;
}
