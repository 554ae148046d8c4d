/*
 * test_api.c - the api layer on its own: strict JSON validation with
 * field paths, token minting/lookup/revocation, Prometheus exposition,
 * and the HTTP server (sync and deferred answers, body limit) over
 * loopback with libcurl.
 */
#include "cr_auth.h"
#include "cr_http.h"
#include "cr_json.h"
#include "cr_prom.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <pthread.h>

static void test_json_parse_errors(void **state)
{
    json_t *v = NULL;
    cr_json_err err;
    assert_int_equal(cr_json_parse_object("{\"a\":", 5, &v, &err), CR_EPARSE);
    assert_non_null(strstr(err.message, "line 1"));
    assert_int_equal(cr_json_parse_object("[1]", 3, &v, &err), CR_EPARSE);
    assert_int_equal(cr_json_parse_object("{\"a\":\"\xff\"}", 9, &v, &err), CR_EPARSE);
    assert_int_equal(cr_json_parse_object("{\"a\":1,\"a\":2}", 13, &v, &err), CR_EPARSE);
    assert_int_equal(cr_json_parse_object("", 0, &v, &err), CR_EPARSE);
    assert_int_equal(cr_json_parse_object("{\"a\":1}", 7, &v, &err), 0);
    json_decref(v);
}

static void test_json_fields(void **state)
{
    const char *doc = "{\"gpus\":\"8\",\"model\":{\"params\":-1},\"n\":3,\"ok\":true,\"x\":1.5}";
    json_t *v = NULL;
    cr_json_err err;
    assert_int_equal(cr_json_parse_object(doc, strlen(doc), &v, &err), 0);
    int64_t i = 0;
    assert_int_equal(cr_json_int(v, "", "gpus", true, 0, 10, &i, &err), CR_EINVAL);
    assert_string_equal(err.field, "gpus");
    json_t *m = NULL;
    assert_int_equal(cr_json_obj(v, "", "model", true, &m, &err), 0);
    double d = 0;
    assert_int_equal(cr_json_num(m, "model", "params", true, 0, 1e15, &d, &err), CR_EINVAL);
    assert_string_equal(err.field, "model.params");
    assert_int_equal(cr_json_int(v, "", "n", true, 0, 10, &i, &err), 0);
    assert_int_equal(i, 3);
    assert_int_equal(cr_json_int(v, "", "n", true, 4, 10, &i, &err), CR_EINVAL);
    assert_int_equal(cr_json_int(v, "", "x", true, 0, 10, &i, &err), CR_EINVAL);
    assert_int_equal(cr_json_int(v, "", "missing", true, 0, 10, &i, &err), CR_EINVAL);
    assert_non_null(strstr(err.message, "required"));
    i = 42;
    assert_int_equal(cr_json_int(v, "", "missing", false, 0, 10, &i, &err), 0);
    assert_int_equal(i, 42);
    bool b = false;
    assert_int_equal(cr_json_bool(v, "", "ok", true, &b, &err), 0);
    assert_true(b);
    static const char *const allowed[] = {"gpus", "model", "n", "ok", NULL};
    assert_int_equal(cr_json_only(v, "", allowed, &err), CR_EINVAL);
    assert_string_equal(err.field, "x");
    static const char *const choices[] = {"a", "b", NULL};
    assert_int_equal(cr_json_enum("c", "kind", choices, &err), CR_EINVAL);
    assert_non_null(strstr(err.message, "a|b"));
    json_decref(v);
}

static void test_auth_table(void **state)
{
    assert_int_equal(cr_auth_init(), 0);
    cr_auth_table *t = cr_auth_table_new();
    char tok[100][CR_TOKEN_TEXT_MAX];
    for (int i = 0; i < 100; i++) {
        uint8_t h[CR_TOKEN_HASH_BYTES];
        cr_auth_mint(tok[i], h);
        assert_int_equal(strncmp(tok[i], "crl_", 4), 0);
        assert_int_equal(strlen(tok[i]), 47);
        cr_principal p = {.id = i + 1, .role = i % 2 ? CR_ROLE_USER : CR_ROLE_AGENT};
        snprintf(p.tenant, sizeof p.tenant, "t%d", i);
        snprintf(p.node, sizeof p.node, "n%d", i);
        cr_auth_table_put(t, h, &p);
    }
    cr_principal out;
    for (int i = 0; i < 100; i++) {
        assert_true(cr_auth_table_check(t, tok[i], &out));
        assert_int_equal(out.id, i + 1);
    }
    assert_false(cr_auth_table_check(t, "crl_nope", &out));
    assert_false(cr_auth_table_check(t, "", &out));
    assert_false(cr_auth_table_check(t, NULL, &out));
    assert_int_equal(cr_auth_table_revoke_id(t, 5), 1);
    assert_false(cr_auth_table_check(t, tok[4], &out));
    assert_true(cr_auth_table_check(t, tok[5], &out));
    assert_int_equal(cr_auth_table_revoke_node(t, "n2"), 1);
    assert_false(cr_auth_table_check(t, tok[2], &out));
    assert_true(cr_auth_table_check(t, tok[99], &out));
    cr_auth_table_free(t);
    assert_string_equal(cr_auth_bearer("Bearer abc"), "abc");
    assert_null(cr_auth_bearer("Basic abc"));
    assert_null(cr_auth_bearer(NULL));
    uint8_t h1[CR_TOKEN_HASH_BYTES], h2[CR_TOKEN_HASH_BYTES];
    char hex[2 * CR_TOKEN_HASH_BYTES + 1];
    cr_auth_hash("crl_x", h1);
    cr_auth_hash_hex(h1, hex);
    assert_int_equal(cr_auth_hash_unhex(hex, h2), 0);
    assert_memory_equal(h1, h2, sizeof h1);
    assert_int_equal(cr_auth_hash_unhex("zz", h2), CR_EINVAL);
}

static void test_prom(void **state)
{
    cr_prom_hist h;
    static const double bounds[] = {0.1, 1};
    cr_prom_hist_init(&h, bounds, 2);
    cr_prom_hist_observe(&h, 0.05);
    cr_prom_hist_observe(&h, 0.5);
    cr_prom_hist_observe(&h, 5);
    cr_buf b;
    cr_buf_init(&b);
    cr_prom_family(&b, "x_seconds", "histogram", "help");
    cr_prom_hist_write(&b, "x_seconds", "a=\"1\"", &h);
    const char *s = cr_buf_str(&b);
    assert_non_null(strstr(s, "x_seconds_bucket{a=\"1\",le=\"0.1\"} 1\n"));
    assert_non_null(strstr(s, "x_seconds_bucket{a=\"1\",le=\"1\"} 2\n"));
    assert_non_null(strstr(s, "x_seconds_bucket{a=\"1\",le=\"+Inf\"} 3\n"));
    assert_non_null(strstr(s, "x_seconds_count{a=\"1\"} 3\n"));
    cr_buf_reset(&b);
    cr_prom_label(&b, "route", "a\"b\\c\nd");
    assert_string_equal(cr_buf_str(&b), "route=\"a\\\"b\\\\c\\nd\"");
    cr_buf_fini(&b);
    cr_prom_hist_fini(&h);
    cr_prom_hist_vec *v = cr_prom_hist_vec_new(bounds, 2);
    cr_prom_hist_vec_observe(v, "r=\"a\"", 0.2);
    cr_prom_hist_vec_observe(v, "r=\"b\"", 0.2);
    cr_prom_hist_vec_observe(v, "r=\"a\"", 0.2);
    cr_buf_init(&b);
    cr_prom_hist_vec_write(&b, "y", v);
    assert_non_null(strstr(cr_buf_str(&b), "y_count{r=\"a\"} 2\n"));
    assert_non_null(strstr(cr_buf_str(&b), "y_count{r=\"b\"} 1\n"));
    cr_buf_fini(&b);
    cr_prom_hist_vec_free(v);
}

/* ------------------------------------------------------------------------ */
/* HTTP server                                                              */

typedef struct srv_ctx {
    pthread_mutex_t mu;
    cr_http_req *pending; /* a deferred request to answer from another thread */
    int observed;
    cr_http_stream *stream; /* the last /stream answer (the test's reference) */
} srv_ctx;

static void handler(void *ctx, cr_http_req *req)
{
    srv_ctx *c = ctx;
    const char *path = cr_http_path(req);
    if (strcmp(path, "/echo") == 0) {
        size_t len;
        const char *body = cr_http_body(req, &len);
        char *copy = cr_malloc(len + 1);
        memcpy(copy, body, len);
        cr_http_set_route(req, "/echo");
        cr_http_respond(req, 200, "text/plain", copy, len);
    } else if (strcmp(path, "/later") == 0) {
        cr_http_defer(req);
        pthread_mutex_lock(&c->mu);
        c->pending = req;
        pthread_mutex_unlock(&c->mu);
    } else if (strcmp(path, "/stream") == 0) {
        cr_http_stream *st = cr_http_respond_stream(req, 200, "text/event-stream", 64);
        assert_non_null(st);
        assert_null(cr_http_respond_stream(req, 200, "text/plain", 64)); /* answered already */
        pthread_mutex_lock(&c->mu);
        c->stream = st;
        pthread_mutex_unlock(&c->mu);
    } else if (strcmp(path, "/query") == 0) {
        const char *q = cr_http_query(req, "k");
        cr_http_respond(req, 200, "text/plain", cr_strdup(q ? q : "-"), q ? strlen(q) : 1);
    } else {
        cr_http_respond(req, 404, NULL, NULL, 0);
    }
}

static void observe(void *ctx, const char *method, const char *route, unsigned status,
                    int64_t dur_ns)
{
    srv_ctx *c = ctx;
    pthread_mutex_lock(&c->mu);
    c->observed++;
    pthread_mutex_unlock(&c->mu);
}

static size_t sink(char *p, size_t s, size_t n, void *u)
{
    cr_buf_append(u, p, s * n);
    return s * n;
}

static long http(uint16_t port, const char *path, const char *body, size_t len, cr_buf *out)
{
    CURL *h = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)port, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)len);
    }
    long code = 0;
    if (curl_easy_perform(h) == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    }
    curl_easy_cleanup(h);
    return code;
}

typedef struct later_arg {
    uint16_t port;
    long code;
    cr_buf body;
} later_arg;

static void *call_later(void *arg)
{
    later_arg *a = arg;
    a->code = http(a->port, "/later", NULL, 0, &a->body);
    return NULL;
}

static void test_http_server(void **state)
{
    srv_ctx c;
    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.mu, NULL);
    cr_http_config cfg = {
        .port = 0, .max_body_bytes = 1000, .handler = handler, .observe = observe, .ctx = &c};
    cr_http_server *s = NULL;
    assert_int_equal(cr_http_server_new(&cfg, &s), 0);
    uint16_t port = cr_http_server_port(s);
    assert_true(port > 0);

    cr_buf b;
    cr_buf_init(&b);
    assert_int_equal(http(port, "/echo", "hello", 5, &b), 200);
    assert_string_equal(cr_buf_str(&b), "hello");
    cr_buf_reset(&b);
    char big[2000];
    memset(big, 'x', sizeof big);
    assert_int_equal(http(port, "/echo", big, sizeof big, &b), 413);
    cr_buf_reset(&b);
    assert_int_equal(http(port, "/query?k=v%20w", NULL, 0, &b), 200);
    assert_string_equal(cr_buf_str(&b), "v w");
    cr_buf_reset(&b);
    assert_int_equal(http(port, "/nothing", NULL, 0, &b), 404);

    /* Deferred: answered from this thread once the request is parked. */
    later_arg a = {.port = port, .code = 0};
    cr_buf_init(&a.body);
    pthread_t th;
    pthread_create(&th, NULL, call_later, &a);
    cr_http_req *r = NULL;
    for (int i = 0; i < 2000 && !r; i++) {
        pthread_mutex_lock(&c.mu);
        r = c.pending;
        pthread_mutex_unlock(&c.mu);
        if (!r) {
            usleep(5000);
        }
    }
    assert_non_null(r);
    cr_http_respond(r, 202, "text/plain", cr_strdup("done"), 4);
    pthread_join(th, NULL);
    assert_int_equal(a.code, 202);
    assert_string_equal(cr_buf_str(&a.body), "done");
    cr_buf_fini(&a.body);

    /* A deferred request still open at shutdown gets a 503. */
    c.pending = NULL;
    cr_buf_init(&a.body);
    pthread_create(&th, NULL, call_later, &a);
    r = NULL;
    for (int i = 0; i < 2000 && !r; i++) {
        pthread_mutex_lock(&c.mu);
        r = c.pending;
        pthread_mutex_unlock(&c.mu);
        if (!r) {
            usleep(5000);
        }
    }
    assert_non_null(r);
    cr_http_server_free(s);
    pthread_join(th, NULL);
    assert_int_equal(a.code, 503);
    cr_buf_fini(&a.body);
    assert_true(c.observed >= 5);
    cr_buf_fini(&b);
    pthread_mutex_destroy(&c.mu);
}

/* A streamed answer: read as it comes by a client thread. */
typedef struct stream_client {
    uint16_t port;
    pthread_mutex_t mu;
    cr_buf got;
    bool quit_early; /* hang up after the first bytes */
    bool done;
    CURLcode rc;
} stream_client;

static size_t stream_sink(char *p, size_t s, size_t n, void *u)
{
    stream_client *sc = u;
    pthread_mutex_lock(&sc->mu);
    cr_buf_append(&sc->got, p, s * n);
    pthread_mutex_unlock(&sc->mu);
    return sc->quit_early ? 0 : s * n;
}

static void *stream_read_thread(void *arg)
{
    stream_client *sc = arg;
    CURL *h = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/stream", (unsigned)sc->port);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, stream_sink);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, sc);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_cleanup(h);
    pthread_mutex_lock(&sc->mu);
    sc->rc = rc;
    sc->done = true;
    pthread_mutex_unlock(&sc->mu);
    return NULL;
}

static cr_http_stream *wait_stream(srv_ctx *c)
{
    for (int i = 0; i < 4000; i++) {
        pthread_mutex_lock(&c->mu);
        cr_http_stream *st = c->stream;
        c->stream = NULL;
        pthread_mutex_unlock(&c->mu);
        if (st) {
            return st;
        }
        usleep(5000);
    }
    fail_msg("no stream answered");
    return NULL;
}

/* Waits (bounded) until the client got want, or finished when want is NULL. */
static void wait_client(stream_client *sc, const char *want)
{
    for (int i = 0; i < 4000; i++) {
        pthread_mutex_lock(&sc->mu);
        bool ok = want ? strstr(cr_buf_str(&sc->got), want) != NULL : sc->done;
        pthread_mutex_unlock(&sc->mu);
        if (ok) {
            return;
        }
        usleep(5000);
    }
    fail_msg("the client did not get '%s'", want ? want : "(the end)");
}

static void test_http_stream(void **state)
{
    (void)state;
    srv_ctx c;
    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.mu, NULL);
    cr_http_config cfg = {.port = 0, .handler = handler, .ctx = &c};
    cr_http_server *s = NULL;
    assert_int_equal(cr_http_server_new(&cfg, &s), 0);
    stream_client sc[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        memset(&sc[i], 0, sizeof sc[i]);
        sc[i].port = cr_http_server_port(s);
        pthread_mutex_init(&sc[i].mu, NULL);
        cr_buf_init(&sc[i].got);
    }
    /* 1: written as it comes (the second write wakes a suspended reader),
     * then closed: the body ends with what was queued */
    pthread_create(&th[0], NULL, stream_read_thread, &sc[0]);
    cr_http_stream *st = wait_stream(&c);
    assert_true(cr_http_stream_write(st, "one\n", 4));
    wait_client(&sc[0], "one\n");
    assert_true(cr_http_stream_write(st, "two\n", 4));
    wait_client(&sc[0], "two\n");
    char big[100];
    memset(big, 'x', sizeof big);
    assert_false(cr_http_stream_write(st, big, sizeof big)); /* over 64 unsent: closed */
    assert_false(cr_http_stream_write(st, "three\n", 6));
    wait_client(&sc[0], NULL);
    pthread_join(th[0], NULL);
    assert_int_equal(sc[0].rc, CURLE_OK);
    assert_string_equal(cr_buf_str(&sc[0].got), "one\ntwo\n");
    cr_http_stream_release(st);
    /* 2: the client hangs up: writes fail once the server sees it (bounded) */
    sc[1].quit_early = true;
    pthread_create(&th[1], NULL, stream_read_thread, &sc[1]);
    st = wait_stream(&c);
    assert_true(cr_http_stream_write(st, "a\n", 2));
    wait_client(&sc[1], NULL);
    pthread_join(th[1], NULL);
    bool failed = false;
    for (int i = 0; i < 2000 && !failed; i++) {
        failed = !cr_http_stream_write(st, "b\n", 2);
        usleep(5000);
    }
    assert_true(failed);
    cr_http_stream_release(st);
    /* 3: open at shutdown: the server ends it and stops */
    pthread_create(&th[2], NULL, stream_read_thread, &sc[2]);
    st = wait_stream(&c);
    assert_true(cr_http_stream_write(st, "last\n", 5));
    wait_client(&sc[2], "last\n");
    cr_http_server_free(s);
    wait_client(&sc[2], NULL);
    pthread_join(th[2], NULL);
    assert_false(cr_http_stream_write(st, "after\n", 6));
    cr_http_stream_release(st);
    for (int i = 0; i < 3; i++) {
        cr_buf_fini(&sc[i].got);
        pthread_mutex_destroy(&sc[i].mu);
    }
    pthread_mutex_destroy(&c.mu);
}

static void test_http_bad_address(void **state)
{
    srv_ctx c;
    memset(&c, 0, sizeof c);
    cr_http_config cfg = {.bind_addr = "not-an-ip", .handler = handler, .ctx = &c};
    cr_http_server *s = NULL;
    assert_int_equal(cr_http_server_new(&cfg, &s), CR_EINVAL);
    assert_null(s);
}

/* --metrics-token-file (controller and agent): the file's first line,
 * bounded, and a bearer compared by hash. */
static void test_secret_file(void **state)
{
    char dir[] = "/tmp/corral-secret-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/t", dir);
    char *sec = NULL;
    const char *why = NULL;
    static const struct {
        const char *text;
        int rc;
    } cases[] = {
        {"0123456789abcdef\nignored\n", 0},
        {"0123456789abcdef", 0},
        {"0123456789abcde\n", CR_EINVAL},
        {"\n0123456789abcdef\n", CR_EINVAL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fopen(path, "w");
        fputs(cases[i].text, f);
        fclose(f);
        assert_int_equal(cr_auth_secret_file(path, &sec, &why), cases[i].rc);
        if (cases[i].rc == 0) {
            assert_string_equal(sec, "0123456789abcdef");
        } else {
            assert_null(sec);
            assert_non_null(strstr(why, "at least 16"));
        }
        cr_auth_secret_free(sec);
    }
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 600; i++) {
        fputc('x', f);
    }
    fclose(f);
    assert_int_equal(cr_auth_secret_file(path, &sec, &why), CR_EINVAL);
    assert_non_null(strstr(why, "at most"));
    unlink(path);
    assert_int_equal(cr_auth_secret_file(path, &sec, &why), CR_EIO);
    rmdir(dir);
    assert_true(cr_auth_bearer_is("Bearer 0123456789abcdef", "0123456789abcdef"));
    assert_false(cr_auth_bearer_is("Bearer 0123456789abcdeX", "0123456789abcdef"));
    assert_false(cr_auth_bearer_is("Bearer 0123456789abcdef0", "0123456789abcdef"));
    assert_false(cr_auth_bearer_is("0123456789abcdef", "0123456789abcdef"));
    assert_false(cr_auth_bearer_is(NULL, "0123456789abcdef"));
    assert_false(cr_auth_bearer_is("Bearer x", NULL));
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_parse_errors), cmocka_unit_test(test_json_fields),
        cmocka_unit_test(test_auth_table),        cmocka_unit_test(test_prom),
        cmocka_unit_test(test_secret_file),       cmocka_unit_test(test_http_server),
        cmocka_unit_test(test_http_bad_address),  cmocka_unit_test(test_http_stream),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
