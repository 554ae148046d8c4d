/*
 * test_peer.c - the gateway's default peer choice (power of two choices
 * over least outstanding requests plus the replica's own queue) and the
 * prefix-affinity choice, without sockets: replicas are set up in memory;
 * and the parsers of the OpenAI side (request model and prompt prefix,
 * the response's usage object, the controller's published keys).
 */
#include "gw_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

typedef struct fixture {
    gw_conf conf;
    gw g;
    gw_service svc;
    gw_replica reps[4];
    gw_replica *ptrs[4];
} fixture;

static void setup_fixture(fixture *f, size_t n)
{
    memset(f, 0, sizeof *f);
    f->conf.max_inflight = 8;
    f->g.conf = &f->conf;
    cr_rng_seed(&f->g.rng, 42);
    snprintf(f->svc.name, sizeof f->svc.name, "chat");
    f->svc.max_inflight = 8;
    f->svc.want_adapter = -1;
    f->svc.replicas = f->ptrs;
    f->svc.replica_count = n;
    for (size_t i = 0; i < n; i++) {
        f->reps[i].svc = &f->svc;
        f->reps[i].ep.ready = true;
        snprintf(f->reps[i].key, sizeof f->reps[i].key, "r%zu", i);
        f->ptrs[i] = &f->reps[i];
    }
}

static void test_least_loaded_of_two(void **state)
{
    (void)state;
    fixture f;
    setup_fixture(&f, 3);
    f.reps[0].outstanding = 0;
    f.reps[1].outstanding = 3;
    f.reps[2].outstanding = 6;
    int count[3] = {0, 0, 0};
    for (int i = 0; i < 3000; i++) {
        int why = -1;
        gw_replica *r = gw_peer_p2c(&f.g, &f.svc, NULL, &why);
        assert_non_null(r);
        count[r - f.reps]++;
    }
    /* The most loaded never wins a pair; the least loaded wins 2 of 3. */
    assert_int_equal(count[2], 0);
    assert_true(count[0] > 1800 && count[0] < 2200);
    assert_true(count[1] > 800 && count[1] < 1200);
}

static void test_load_signal_counts(void **state)
{
    (void)state;
    fixture f;
    setup_fixture(&f, 2);
    f.reps[0].waiting = 10; /* the replica's own queue */
    f.reps[1].outstanding = 2;
    for (int i = 0; i < 100; i++) {
        int why;
        assert_ptr_equal(gw_peer_p2c(&f.g, &f.svc, NULL, &why), &f.reps[1]);
    }
    /* Ties go to the lower KV-cache usage. */
    f.reps[0].waiting = 0;
    f.reps[1].outstanding = 0;
    f.reps[0].kv_usage = 0.9;
    f.reps[1].kv_usage = 0.1;
    for (int i = 0; i < 100; i++) {
        int why;
        assert_ptr_equal(gw_peer_p2c(&f.g, &f.svc, NULL, &why), &f.reps[1]);
    }
}

/* Edge sites (--site, issue 31): replicas of the gateway's own site take
 * its requests while one of them can; saturated, the others do; the
 * controller's endpoints say each replica's site. */
static void test_same_site(void **state)
{
    (void)state;
    fixture f;
    setup_fixture(&f, 3);
    char site[] = "edge";
    f.conf.site = site;
    snprintf(f.reps[0].ep.site, sizeof f.reps[0].ep.site, "edge");
    snprintf(f.reps[1].ep.site, sizeof f.reps[1].ep.site, "edge");
    snprintf(f.reps[2].ep.site, sizeof f.reps[2].ep.site, "core");
    f.reps[0].outstanding = 5; /* busier than the remote one: still preferred */
    f.reps[1].outstanding = 5;
    int why = -1, count[3] = {0, 0, 0};
    for (int i = 0; i < 1000; i++) {
        gw_replica *r = gw_peer_p2c(&f.g, &f.svc, NULL, &why);
        assert_non_null(r);
        count[r - f.reps]++;
        r = gw_peer_prefix(&f.g, &f.svc, NULL, (uint64_t)i + 1, &why);
        assert_non_null(r);
        count[r - f.reps]++;
    }
    assert_int_equal(count[2], 0);
    assert_true(count[0] > 0 && count[1] > 0);
    /* the site's replicas at their limit: the request goes to the other site */
    f.reps[0].outstanding = f.reps[1].outstanding = f.svc.max_inflight;
    assert_ptr_equal(gw_peer_p2c(&f.g, &f.svc, NULL, &why), &f.reps[2]);
    assert_ptr_equal(gw_peer_prefix(&f.g, &f.svc, NULL, 7, &why), &f.reps[2]);
    /* down: the same */
    f.reps[0].outstanding = f.reps[1].outstanding = 0;
    f.reps[0].down = f.reps[1].down = true;
    assert_ptr_equal(gw_peer_p2c(&f.g, &f.svc, NULL, &why), &f.reps[2]);
    /* without --site: every replica */
    f.reps[0].down = f.reps[1].down = false;
    f.conf.site = NULL;
    f.reps[2].outstanding = 0;
    f.reps[0].outstanding = f.reps[1].outstanding = 5;
    bool remote = false;
    for (int i = 0; i < 200 && !remote; i++) {
        remote = gw_peer_p2c(&f.g, &f.svc, NULL, &why) == &f.reps[2];
    }
    assert_true(remote);
    /* the controller's endpoints carry the site; a bad one is no site */
    int64_t v = 0;
    gw_msg *m = NULL;
    assert_int_equal(gw_ctl_parse_endpoints("chat",
                                            "{\"version\":3,\"endpoints\":["
                                            "{\"addr\":\"10.0.0.1\",\"port\":80,\"site\":\"edge\"},"
                                            "{\"addr\":\"10.0.0.2\",\"port\":80,\"site\":\"a b\"},"
                                            "{\"addr\":\"10.0.0.3\",\"port\":80}]}",
                                            &v, &m),
                     0);
    assert_int_equal(m->endpoint_count, 3);
    assert_string_equal(m->endpoints[0].site, "edge");
    assert_string_equal(m->endpoints[1].site, "");
    assert_string_equal(m->endpoints[2].site, "");
    gw_msg_free(m);
}

static void test_eligibility(void **state)
{
    (void)state;
    fixture f;
    setup_fixture(&f, 3);
    f.reps[0].down = true;
    f.reps[1].removed = true;
    int why = -1;
    for (int i = 0; i < 50; i++) {
        assert_ptr_equal(gw_peer_p2c(&f.g, &f.svc, NULL, &why), &f.reps[2]);
    }
    /* Excluded (the one that just failed): nothing left, none ready. */
    assert_null(gw_peer_p2c(&f.g, &f.svc, &f.reps[2], &why));
    assert_int_equal(why, GW_ERR_NO_REPLICA);
    /* At the in-flight limit: saturated, not "none ready". */
    f.reps[2].outstanding = f.svc.max_inflight;
    assert_null(gw_peer_p2c(&f.g, &f.svc, NULL, &why));
    assert_int_equal(why, GW_ERR_SATURATED);
    /* Not ready per the controller. */
    f.reps[2].outstanding = 0;
    f.reps[2].ep.ready = false;
    assert_null(gw_peer_p2c(&f.g, &f.svc, NULL, &why));
    assert_int_equal(why, GW_ERR_NO_REPLICA);
}

/* Priorities: a batch request fills a replica only to batch_share of its
 * in-flight limit; an interactive one takes the rest. */
static void test_batch_share(void **state)
{
    (void)state;
    fixture f;
    setup_fixture(&f, 2);
    f.conf.batch_share = 0.5; /* 4 of 8 for batch */
    f.reps[0].outstanding = 4;
    f.reps[1].outstanding = 4;
    int why = -1;
    f.svc.want_batch = true;
    assert_null(gw_peer_p2c(&f.g, &f.svc, NULL, &why));
    assert_int_equal(why, GW_ERR_SATURATED);
    assert_null(gw_peer_prefix(&f.g, &f.svc, NULL, 0x77, &why));
    f.reps[1].outstanding = 3; /* room for one batch request there */
    assert_ptr_equal(gw_peer_p2c(&f.g, &f.svc, NULL, &why), &f.reps[1]);
    f.reps[1].outstanding = 4;
    f.svc.want_batch = false; /* interactive: up to 8 */
    assert_non_null(gw_peer_p2c(&f.g, &f.svc, NULL, &why));
    f.reps[0].outstanding = f.reps[1].outstanding = 8;
    assert_null(gw_peer_p2c(&f.g, &f.svc, NULL, &why));
    /* a share that rounds to 0 still lets one batch request in */
    f.conf.batch_share = 0.05;
    f.svc.want_batch = true;
    f.reps[0].outstanding = 0;
    assert_ptr_equal(gw_peer_p2c(&f.g, &f.svc, NULL, &why), &f.reps[0]);
    f.reps[0].outstanding = 1;
    assert_null(gw_peer_p2c(&f.g, &f.svc, NULL, &why));
}

static void test_prefix_affinity(void **state)
{
    (void)state;
    fixture f;
    setup_fixture(&f, 4);
    /* A new prefix goes to the least loaded; then it sticks there. */
    f.reps[0].outstanding = 2;
    f.reps[1].outstanding = 0;
    f.reps[2].outstanding = 2;
    f.reps[3].outstanding = 2;
    int why = -1;
    gw_replica *first = gw_peer_prefix(&f.g, &f.svc, NULL, 0xabc, &why);
    assert_ptr_equal(first, &f.reps[1]);
    f.reps[1].outstanding = 1;
    for (int i = 0; i < 20; i++) {
        assert_ptr_equal(gw_peer_prefix(&f.g, &f.svc, NULL, 0xabc, &why), &f.reps[1]);
    }
    assert_int_equal(f.svc.affinity[0], 20);
    assert_int_equal(f.svc.affinity[1], 1);
    /* Over the bound (ceil(1.5 x mean, this one counted)): the least loaded
     * other takes it, and remembers it too. */
    f.reps[1].outstanding = 6;
    gw_replica *spill = gw_peer_prefix(&f.g, &f.svc, NULL, 0xabc, &why);
    assert_ptr_not_equal(spill, &f.reps[1]);
    assert_int_equal(spill->outstanding, 2);
    /* Back under the bound: the replica sent it last wins. */
    f.reps[1].outstanding = 0;
    assert_ptr_equal(gw_peer_prefix(&f.g, &f.svc, NULL, 0xabc, &why), spill);
    /* Saturated and not ready as for p2c. */
    for (int i = 0; i < 4; i++) {
        f.reps[i].outstanding = 8;
    }
    assert_null(gw_peer_prefix(&f.g, &f.svc, NULL, 0xabc, &why));
    assert_int_equal(why, GW_ERR_SATURATED);
}

/* LoRA adapters: r0 holds none, r1 adapter 0 only, r2 names none (so holds
 * every adapter of its service); a choice for an adapter never lands where
 * it is not, with either policy. */
static void test_adapters(void **state)
{
    (void)state;
    fixture f;
    setup_fixture(&f, 3);
    f.reps[0].ep.adapters_set = true;
    f.reps[1].ep.adapters_set = true;
    f.reps[1].ep.adapters = 1;
    int count[3] = {0, 0, 0};
    int why = 0;
    f.svc.want_adapter = 0;
    for (int i = 0; i < 1000; i++) {
        gw_replica *r = gw_peer_p2c(&f.g, &f.svc, NULL, &why);
        assert_non_null(r);
        count[r - f.reps]++;
        r = gw_peer_prefix(&f.g, &f.svc, NULL, 0x1234 + (uint64_t)i, &why);
        assert_non_null(r);
        count[r - f.reps]++;
    }
    assert_int_equal(count[0], 0);
    assert_true(count[1] > 0 && count[2] > 0);
    f.svc.want_adapter = 1;
    for (int i = 0; i < 100; i++) {
        assert_ptr_equal(gw_peer_p2c(&f.g, &f.svc, NULL, &why), &f.reps[2]);
    }
    assert_null(gw_peer_p2c(&f.g, &f.svc, &f.reps[2], &why));
    assert_int_equal(why, GW_ERR_NO_REPLICA);
    bool any = false;
    assert_true(gw_adapter_available(&f.svc, 1, &any) && any);
    f.reps[2].down = true;
    assert_false(gw_adapter_available(&f.svc, 1, &any));
    assert_true(any); /* r0 and r1 are up: answer at once, do not hold */
    f.svc.want_adapter = -1;
    assert_non_null(gw_peer_p2c(&f.g, &f.svc, NULL, &why)); /* the base model: any */
}

/* The SLO event scanner: "data:" at line starts only, split across reads,
 * behind chunk-size lines; the first event's time is the first token's. */
static void test_slo_events(void **state)
{
    (void)state;
    fixture f;
    setup_fixture(&f, 1);
    gw_client c;
    memset(&c, 0, sizeof c);
    c.g = &f.g;
    c.api = API_CHAT;
    gw_slo_begin(&c, true);
    assert_true(c.slo);
    f.g.now_ns = 100;
    const char *a = "3a\r\ndata: {\"x\":\"data: no\"}\n\nda";
    gw_slo_feed(&c, a, strlen(a));
    assert_int_equal(c.sse_events, 1);
    assert_int_equal(c.first_token_ns, 100);
    f.g.now_ns = 200;
    const char *b = "ta: {}\n\nxdata: mid-line\r\n1c\r\ndata: [DONE]\n\n";
    gw_slo_feed(&c, b, strlen(b));
    assert_int_equal(c.sse_events, 3);
    assert_int_equal(c.first_token_ns, 100);
    gw_client e;
    memset(&e, 0, sizeof e);
    e.g = &f.g;
    e.api = API_EMBEDDINGS;
    gw_slo_begin(&e, true);
    assert_false(e.slo); /* embeddings have no tokens to time */
    uint64_t d[GW_HIST_BUCKETS] = {0};
    assert_true(gw_hist_p95(d, gw_ttft_le, 1000) < 0);
    d[4] = 100; /* all in (0.075, 0.1] s */
    double p = gw_hist_p95(d, gw_ttft_le, 1000);
    assert_true(p > 75 && p <= 100);
}

static void test_body_model_and_prefix(void **state)
{
    (void)state;
    char model[GW_MODEL_MAX];
    uint64_t p1 = 0, p2 = 0, p3 = 0;
    const char *sys = "You are a careful assistant who answers questions about the cluster.";
    char a[512], b[512], c[512];
    snprintf(a, sizeof a,
             "{\"model\":\"llama\",\"messages\":[{\"role\":\"system\","
             "\"content\":\"%s\"},{\"role\":\"user\",\"content\":\"one\"}]}",
             sys);
    snprintf(b, sizeof b,
             "{\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"text\","
             "\"text\":\"%s\"}]},{\"role\":\"user\",\"content\":\"one\"}],"
             "\"model\":\"llama\"}",
             sys);
    snprintf(c, sizeof c, "{\"model\":\"llama\",\"prompt\":\"%s and more\"}", sys);
    assert_int_equal(gw_body_model(a, strlen(a), model, sizeof model, &p1), 1);
    assert_string_equal(model, "llama");
    assert_int_equal(gw_body_model(b, strlen(b), model, sizeof model, &p2), 1);
    assert_int_equal(gw_body_model(c, strlen(c), model, sizeof model, &p3), 1);
    assert_true(p1 != 0 && p1 == p2); /* parts and plain contents alike */
    assert_true(p3 != 0 && p3 != p1);
    const char *shortp = "{\"model\":\"m\",\"prompt\":\"hi\"}";
    assert_int_equal(gw_body_model(shortp, strlen(shortp), model, sizeof model, &p1), 1);
    assert_int_equal(p1, 0); /* too short to matter */
    assert_int_equal(gw_body_model("{\"model\":7}", 11, model, sizeof model, &p1), 0);
    assert_int_equal(gw_body_model("[1]", 3, model, sizeof model, &p1), -1);
    assert_int_equal(gw_body_model("{\"model\":", 9, model, sizeof model, &p1), -1);
}

static void test_usage_parse(void **state)
{
    (void)state;
    uint64_t p = 0, q = 0;
    const char *plain = "{\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":5,"
                        "\"total_tokens\":17,\"prompt_tokens_details\":{\"cached_tokens\":0}}}";
    assert_int_equal(gw_usage_parse(plain, strlen(plain), &p, &q), 0);
    assert_int_equal(p, 12);
    assert_int_equal(q, 5);
    /* a stream: the last whole usage object wins; a cut one is skipped */
    const char *sse = "data: {\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n"
                      "data: {\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4}}\n\n"
                      "data: {\"usage\":{\"prompt_tok";
    assert_int_equal(gw_usage_parse(sse, strlen(sse), &p, &q), 0);
    assert_int_equal(p, 9);
    assert_int_equal(q, 4);
    const char *none = "{\"usage\":null,\"x\":\"\\\"usage\\\": {\"}";
    assert_int_equal(gw_usage_parse(none, strlen(none), &p, &q), -1);
}

static void test_parse_keys(void **state)
{
    (void)state;
    char text[1024], hash[65];
    memset(hash, 'a', 64);
    hash[64] = '\0';
    snprintf(text, sizeof text,
             "{\"version\":7,\"keys\":[{\"id\":3,\"tenant\":\"ml\",\"hash\":\"%s\","
             "\"services\":[\"chat\"],\"models\":[],\"rps\":2.5,\"concurrency\":4,"
             "\"expires_at_ms\":99},{\"id\":4,\"tenant\":\"ml\",\"hash\":\"xyz\"}]}",
             hash);
    int64_t v = 0;
    gw_msg *m = NULL;
    assert_int_equal(gw_ctl_parse_keys(text, &v, &m), 0);
    assert_int_equal(v, 7);
    assert_int_equal(m->key_count, 1); /* the bad hash is skipped */
    assert_int_equal(m->keys[0]->id, 3);
    assert_int_equal(m->keys[0]->service_count, 1);
    assert_string_equal(m->keys[0]->services[0], "chat");
    assert_int_equal(m->keys[0]->concurrency, 4);
    assert_int_equal(m->keys[0]->expires_ms, 99);
    assert_true(m->keys[0]->rps == 2.5);
    gw_msg_free(m);
    assert_int_equal(gw_ctl_parse_keys("{\"version\":1}", &v, &m), CR_EPARSE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slo_events),
        cmocka_unit_test(test_adapters),
        cmocka_unit_test(test_least_loaded_of_two),
        cmocka_unit_test(test_load_signal_counts),
        cmocka_unit_test(test_eligibility),
        cmocka_unit_test(test_same_site),
        cmocka_unit_test(test_batch_share),
        cmocka_unit_test(test_prefix_affinity),
        cmocka_unit_test(test_body_model_and_prefix),
        cmocka_unit_test(test_usage_parse),
        cmocka_unit_test(test_parse_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
