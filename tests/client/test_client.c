/*
 * test_client.c - the HTTP client library against a real HTTP server on
 * loopback (fake_server.c): requests, bearer token, error bodies, transport
 * failures, timeouts, streaming and connection reuse.
 */
#include "cr_client.h"

#include "cr_error.h"
#include "cr_time.h"
#include "fake_server.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

typedef struct fx {
    fake_server *srv;
    cr_client *c;
    cr_client_res res;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    f->srv = fake_server_start();
    if (!f->srv) {
        free(f);
        return -1;
    }
    cr_client_opts o = {.server = fake_server_url(f->srv), .token = "crl_secret"};
    if (cr_client_new(&o, &f->c) < 0) {
        return -1;
    }
    cr_client_res_init(&f->res);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    cr_client_res_fini(&f->res);
    cr_client_free(f->c);
    fake_server_stop(f->srv);
    free(f);
    return 0;
}

static const char *path_of(const json_t *echo)
{
    return json_string_value(json_object_get(echo, "path"));
}

static void test_bad_server_url(void **state)
{
    cr_client *c = NULL;
    cr_client_opts o = {.server = "127.0.0.1:8620"};
    assert_int_equal(cr_client_new(&o, &c), CR_EINVAL);
    assert_null(c);
    o.server = "ftp://x";
    assert_int_equal(cr_client_new(&o, &c), CR_EINVAL);
    o.server = "http://127.0.0.1:8620///";
    assert_int_equal(cr_client_new(&o, &c), 0);
    assert_string_equal(cr_client_server(c), "http://127.0.0.1:8620");
    cr_client_free(c);
}

/* A list of controllers: each URL checked, the first in use; malformed
 * lists (empty member, trailing comma, more than 8, one bad URL) refused. */
static void test_server_list(void **state)
{
    cr_client *c = NULL;
    cr_client_opts o = {.server = "http://a:1/, https://b:2 ,http://[::1]:3"};
    assert_int_equal(cr_client_new(&o, &c), 0);
    assert_string_equal(cr_client_server(c), "http://a:1");
    cr_client_free(c);
    c = NULL;
    static const char *const bad[] = {
        "http://a:1,",
        ",http://a:1",
        "http://a:1,,http://b:2",
        "http://a:1,ftp://b",
        "http://a:1,http://b:x",
        ("http://1:1,http://2:1,http://3:1,http://4:1,http://5:1,http://6:1,http://7:1,"
         "http://8:1,http://9:1"),
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.server = bad[i];
        assert_int_equal(cr_client_new(&o, &c), CR_EINVAL);
        assert_null(c);
    }
}

static void test_get_with_token(void **state)
{
    fx *f = *state;
    assert_int_equal(cr_client_health(f->c, &f->res), 0);
    assert_int_equal(f->res.status, 200);
    assert_non_null(f->res.body);
    assert_string_equal(json_string_value(json_object_get(f->res.body, "method")), "GET");
    assert_string_equal(path_of(f->res.body), "/v1/health");
    assert_string_equal(json_string_value(json_object_get(f->res.body, "auth")),
                        "Bearer crl_secret");
    assert_null(f->res.message);

    cr_client_set_token(f->c, NULL);
    assert_int_equal(cr_client_version(f->c, &f->res), 0);
    assert_null(json_object_get(f->res.body, "auth"));
    cr_client_set_token(f->c, "crl_node");
    assert_int_equal(cr_client_version(f->c, &f->res), 0);
    assert_string_equal(json_string_value(json_object_get(f->res.body, "auth")), "Bearer crl_node");
}

static void test_post_body_and_query(void **state)
{
    fx *f = *state;
    json_t *job = json_pack("{s:[s,s],s:i,s:s}", "command", "python", "train.py", "gpus", 8,
                            "gpu_type", "H100 SXM");
    assert_int_equal(cr_client_job_submit(f->c, job, &f->res), 0);
    const json_t *e = f->res.body;
    assert_string_equal(json_string_value(json_object_get(e, "method")), "POST");
    assert_string_equal(path_of(e), "/v1/jobs");
    assert_true(json_equal(json_object_get(e, "body"), job));
    json_decref(job);

    assert_int_equal(cr_client_jobs_list(f->c, "running", "ml team", 50, &f->res), 0);
    const json_t *q = json_object_get(f->res.body, "query");
    assert_string_equal(json_string_value(json_object_get(q, "state")), "running");
    assert_string_equal(json_string_value(json_object_get(q, "tenant")), "ml team");
    assert_string_equal(json_string_value(json_object_get(q, "limit")), "50");

    assert_int_equal(cr_client_jobs_list(f->c, NULL, NULL, 0, &f->res), 0);
    assert_int_equal(json_object_size(json_object_get(f->res.body, "query")), 0);

    assert_int_equal(cr_client_job_action(f->c, 42, "cancel", &f->res), 0);
    assert_string_equal(path_of(f->res.body), "/v1/jobs/42/cancel");
    assert_string_equal(json_string_value(json_object_get(f->res.body, "method")), "POST");
    /* a POST without a body still sends a JSON object */
    assert_true(json_is_object(json_object_get(f->res.body, "body")));
}

static void test_methods_and_escaping(void **state)
{
    fx *f = *state;
    json_t *t = json_pack("{s:f}", "weight", 2.0);
    assert_int_equal(cr_client_tenant_put(f->c, "ml", t, &f->res), 0);
    json_decref(t);
    assert_string_equal(json_string_value(json_object_get(f->res.body, "method")), "PUT");
    assert_string_equal(path_of(f->res.body), "/v1/tenants/ml");

    assert_int_equal(cr_client_service_delete(f->c, "chat", &f->res), 0);
    assert_string_equal(json_string_value(json_object_get(f->res.body, "method")), "DELETE");
    assert_string_equal(path_of(f->res.body), "/v1/services/chat");

    /* names are escaped into one path segment; the server sees them decoded */
    char *e = cr_client_escape("a b/c?d");
    assert_string_equal(e, "a%20b%2Fc%3Fd");
    free(e);
    assert_int_equal(cr_client_node_drain(f->c, "h100 0", true, "bad fan", &f->res), 0);
    assert_string_equal(path_of(f->res.body), "/v1/nodes/h100 0/drain");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(f->res.body, "body"), "reason")),
        "bad fan");

    assert_int_equal(cr_client_service_scale(f->c, "chat", 3, &f->res), 0);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(f->res.body, "body"), "replicas")), 3);

    assert_int_equal(cr_client_agent_desired(f->c, "h100-0", 7, 1, &f->res), 0);
    const json_t *q = json_object_get(f->res.body, "query");
    assert_string_equal(json_string_value(json_object_get(q, "version")), "7");
    assert_string_equal(json_string_value(json_object_get(q, "wait")), "1");
    assert_string_equal(path_of(f->res.body), "/v1/agents/h100-0/desired");

    assert_int_equal(cr_client_usage(f->c, "tenant,day", &f->res), 0);
    q = json_object_get(f->res.body, "query");
    assert_string_equal(json_string_value(json_object_get(q, "by")), "tenant,day");
}

static void test_server_error_body(void **state)
{
    fx *f = *state;
    fake_server_canned(f->srv, 400,
                       "{\"error\":\"CR_EINVAL\",\"message\":\"field 'gpus': must be an integer "
                       "0..4096\",\"field\":\"gpus\"}");
    json_t *job = json_pack("{s:s}", "gpus", "many");
    assert_int_equal(cr_client_job_submit(f->c, job, &f->res), CR_EINVAL);
    json_decref(job);
    assert_int_equal(f->res.status, 400);
    assert_string_equal(f->res.error, "CR_EINVAL");
    assert_string_equal(f->res.message, "field 'gpus': must be an integer 0..4096");
    assert_string_equal(f->res.field, "gpus");
    assert_string_equal(cr_client_res_msg(&f->res, CR_EINVAL), f->res.message);

    fake_server_canned(f->srv, 404, "{\"error\":\"CR_ENOENT\",\"message\":\"job 9 not found\"}");
    assert_int_equal(cr_client_job_get(f->c, 9, &f->res), CR_ENOENT);
    assert_null(f->res.field);

    /* unknown error names and non-JSON bodies fall back to the status */
    fake_server_canned(f->srv, 403, "{\"error\":\"CR_EWHATEVER\",\"message\":\"no\"}");
    assert_int_equal(cr_client_tokens_list(f->c, &f->res), CR_EPERM);
    fake_server_canned(f->srv, 401, NULL);
    assert_int_equal(cr_client_tokens_list(f->c, &f->res), CR_EAUTH);
    assert_string_equal(f->res.message, "HTTP 401");
    fake_server_canned(f->srv, 500, "internal trouble");
    assert_int_equal(cr_client_nodes_list(f->c, &f->res), CR_EIO);
    assert_null(f->res.body);
    assert_string_equal(f->res.raw, "internal trouble");

    /* a result is reset by the next call */
    fake_server_echo(f->srv);
    assert_int_equal(cr_client_nodes_list(f->c, &f->res), 0);
    assert_null(f->res.message);
    assert_null(f->res.error);
}

static void test_unreachable(void **state)
{
    /* a port nobody listens on: bind one, learn it, close it */
    fake_server *tmp = fake_server_start();
    char url[64];
    snprintf(url, sizeof url, "%s", fake_server_url(tmp));
    fake_server_stop(tmp);
    cr_client *c = NULL;
    cr_client_opts o = {.server = url};
    assert_int_equal(cr_client_new(&o, &c), 0);
    cr_client_res res;
    cr_client_res_init(&res);
    assert_int_equal(cr_client_health(c, &res), CR_EUNAVAIL);
    assert_int_equal(res.status, 0);
    assert_non_null(res.message);
    cr_client_res_fini(&res);
    cr_client_free(c);
}

static void test_timeout(void **state)
{
    fx *f = *state;
    assert_int_equal(cr_client_request(f->c, "GET", "/slow", NULL, 200 * CR_NS_PER_MS, &f->res),
                     CR_ETIMEDOUT);
    assert_int_equal(f->res.status, 0);
    fake_server_release(f->srv);
    /* the client recovers: next request works */
    assert_int_equal(cr_client_request(f->c, "GET", "/slow", NULL, 0, &f->res), 0);
    assert_true(json_is_true(json_object_get(f->res.body, "slow")));
}

typedef struct sink {
    char data[256];
    size_t len;
    int calls;
    int stop_after;
} sink;

static int on_data(void *ud, const char *data, size_t len)
{
    sink *s = ud;
    if (s->len + len < sizeof s->data) {
        memcpy(s->data + s->len, data, len);
        s->len += len;
        s->data[s->len] = '\0';
    }
    s->calls++;
    return s->stop_after && s->calls >= s->stop_after;
}

static void test_stream(void **state)
{
    fx *f = *state;
    sink s = {0};
    assert_int_equal(cr_client_stream(f->c, "/stream", 0, 5 * CR_NS_PER_SEC, on_data, &s, &f->res),
                     0);
    assert_int_equal(f->res.status, 200);
    assert_string_equal(s.data, "line 1\nline 2\nline 3\nline 4\nline 5\n");
    assert_null(f->res.raw);

    /* the sink may stop the stream early */
    sink s2 = {.stop_after = 1};
    assert_int_equal(cr_client_stream(f->c, "/stream", 0, 0, on_data, &s2, &f->res), 0);
    assert_int_equal(s2.calls, 1);

    /* an error answer is parsed, never streamed */
    sink s3 = {0};
    assert_int_equal(cr_client_stream(f->c, "/stream-fail", 0, 0, on_data, &s3, &f->res),
                     CR_ENOENT);
    assert_int_equal(s3.calls, 0);
    assert_string_equal(f->res.message, "job 9 not found");

    /* job logs go through the same path, with the query */
    sink s4 = {0};
    assert_int_equal(cr_client_job_logs(f->c, 5, "stderr", 100, true, on_data, &s4, &f->res), 0);
    json_t *last = fake_server_last(f->srv);
    const json_t *q = json_object_get(last, "query");
    assert_string_equal(json_string_value(json_object_get(q, "stream")), "stderr");
    assert_string_equal(json_string_value(json_object_get(q, "offset")), "100");
    assert_string_equal(json_string_value(json_object_get(q, "follow")), "1");
    assert_string_equal(path_of(last), "/v1/jobs/5/logs");
    json_decref(last);
}

static void test_connection_reuse(void **state)
{
    fx *f = *state;
    unsigned before = fake_server_connections(f->srv);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(cr_client_health(f->c, &f->res), 0);
        json_t *j = json_pack("{s:[s]}", "command", "true");
        assert_int_equal(cr_client_job_submit(f->c, j, &f->res), 0);
        json_decref(j);
    }
    assert_int_equal(fake_server_connections(f->srv) - before, 1);
    assert_int_equal(fake_server_requests(f->srv), 40);
}

static char *slurp(const char *name)
{
    const char *src = getenv("CORRAL_SRC");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/client/%s", src ? src : ".", name);
    FILE *f = fopen(path, "r");
    if (!f) {
        return NULL;
    }
    char *buf = calloc(1, 16384);
    size_t n = fread(buf, 1, 16383, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* https:// goes through libcurl: verification against the given CA, a
 * refusal without it, --insecure, and the connection kept between calls. */
static void test_tls(void **state)
{
    char *cert = slurp("test_cert.pem");
    char *key = slurp("test_key.pem");
    assert_non_null(cert);
    assert_non_null(key);
    fake_server *srv = fake_server_start_tls(cert, key);
    assert_non_null(srv);
    char ca[1024];
    snprintf(ca, sizeof ca, "%s/tests/client/test_cert.pem",
             getenv("CORRAL_SRC") ? getenv("CORRAL_SRC") : ".");

    cr_client_res res;
    cr_client_res_init(&res);
    cr_client *c = NULL;
    cr_client_opts o = {.server = fake_server_url(srv), .token = "crl_tls", .ca_file = ca};
    assert_int_equal(cr_client_new(&o, &c), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(cr_client_health(c, &res), 0);
        assert_string_equal(json_string_value(json_object_get(res.body, "auth")), "Bearer crl_tls");
    }
    json_t *job = json_pack("{s:[s]}", "command", "true");
    assert_int_equal(cr_client_job_submit(c, job, &res), 0);
    assert_true(json_equal(json_object_get(res.body, "body"), job));
    json_decref(job);
    assert_int_equal(fake_server_connections(srv), 1);
    fake_server_canned(srv, 404, "{\"error\":\"CR_ENOENT\",\"message\":\"job 3 not found\"}");
    assert_int_equal(cr_client_job_get(c, 3, &res), CR_ENOENT);
    assert_string_equal(res.message, "job 3 not found");
    fake_server_echo(srv);
    sink sk = {0};
    assert_int_equal(cr_client_stream(c, "/stream", 0, 0, on_data, &sk, &res), 0);
    assert_string_equal(sk.data, "line 1\nline 2\nline 3\nline 4\nline 5\n");
    cr_client_free(c);

    /* the system CAs do not know this certificate */
    cr_client_opts o2 = {.server = fake_server_url(srv)};
    assert_int_equal(cr_client_new(&o2, &c), 0);
    assert_int_equal(cr_client_health(c, &res), CR_EUNAVAIL);
    assert_int_equal(res.status, 0);
    assert_non_null(res.message);
    cr_client_free(c);

    o2.insecure = true;
    assert_int_equal(cr_client_new(&o2, &c), 0);
    assert_int_equal(cr_client_health(c, &res), 0);
    cr_client_free(c);

    cr_client_res_fini(&res);
    fake_server_stop(srv);
    free(cert);
    free(key);
}

/* A 307 is followed only to a configured controller: one at another
 * address (a listener that records the Authorization header) is refused
 * with a message naming it, and the token never reaches it; the same
 * redirect is followed when that address is in the list; never from https
 * down to http. */
static void test_redirect_trust(void **state)
{
    fake_server *a = fake_server_start();
    fake_server *b = fake_server_start();
    assert_non_null(a);
    assert_non_null(b);
    fake_server_redirect(a, 307, fake_server_url(b));
    cr_client_res res;
    cr_client_res_init(&res);
    cr_client *c = NULL;
    cr_client_opts o = {.server = fake_server_url(a), .token = "crl_secret"};
    assert_int_equal(cr_client_new(&o, &c), 0);
    assert_int_equal(cr_client_job_get(c, 7, &res), CR_EUNAVAIL);
    assert_int_equal(fake_server_requests(a), 1);
    assert_int_equal(fake_server_requests(b), 0);
    assert_non_null(strstr(res.message, fake_server_url(b)));
    assert_non_null(strstr(res.message, "not one of the configured controllers"));
    assert_string_equal(cr_client_server(c), fake_server_url(a));
    cr_client_free(c);

    /* listed second (an HA pair): followed, token and path kept */
    char list[160];
    snprintf(list, sizeof list, "%s,%s", fake_server_url(a), fake_server_url(b));
    o.server = list;
    assert_int_equal(cr_client_new(&o, &c), 0);
    assert_int_equal(cr_client_job_get(c, 7, &res), 0);
    json_t *last = fake_server_last(b);
    assert_non_null(last);
    assert_string_equal(path_of(last), "/v1/jobs/7");
    assert_string_equal(json_string_value(json_object_get(last, "auth")), "Bearer crl_secret");
    json_decref(last);
    assert_string_equal(cr_client_server(c), fake_server_url(b));
    cr_client_free(c);

    /* https -> http is refused even when the http URL is listed */
    char *cert = slurp("test_cert.pem");
    char *key = slurp("test_key.pem");
    assert_non_null(cert);
    fake_server *t = fake_server_start_tls(cert, key);
    assert_non_null(t);
    fake_server_redirect(t, 307, fake_server_url(b));
    unsigned before = fake_server_requests(b);
    snprintf(list, sizeof list, "%s,%s", fake_server_url(t), fake_server_url(b));
    o.server = list;
    o.insecure = true;
    assert_int_equal(cr_client_new(&o, &c), 0);
    assert_int_equal(cr_client_job_get(c, 7, &res), CR_EUNAVAIL);
    assert_non_null(strstr(res.message, "from https to http"));
    assert_int_equal(fake_server_requests(b), before);
    cr_client_free(c);
    fake_server_stop(t);
    free(cert);
    free(key);

    cr_client_res_fini(&res);
    fake_server_stop(a);
    fake_server_stop(b);
}

/* The plain transport against answers a framework would not produce. */
static void test_url_forms(void **state)
{
    cr_client *c = NULL;
    cr_client_opts o = {.server = "http://[::1]:8620/api/"};
    assert_int_equal(cr_client_new(&o, &c), 0);
    assert_string_equal(cr_client_server(c), "http://[::1]:8620/api");
    cr_client_free(c);
    static const char *const bad[] = {"http://", "http://:80", "http://h:x", "http://[::1",
                                      "http://u@h:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.server = bad[i];
        c = NULL;
        assert_int_equal(cr_client_new(&o, &c), CR_EINVAL);
        assert_null(c);
    }
}

static void count_wait(void *ud, unsigned wait_s, const char *message)
{
    unsigned *n = ud;
    assert_int_equal(wait_s, 1);
    assert_non_null(strstr(message, "rate limit"));
    (*n)++;
}

/* A 429 with Retry-After: repeated after the wait when the request is safe
 * to repeat (counted by the server's requests and the wait hook), refused
 * with a reason otherwise. */
static void test_rate_limit_retry(void **state)
{
    fx *f = *state;
    unsigned waits = 0, before;
    cr_client_set_wait_hook(f->c, count_wait, &waits);
    fake_server_limit(f->srv, 1, 1);
    before = fake_server_requests(f->srv);
    assert_int_equal(cr_client_request(f->c, "GET", "/v1/jobs", NULL, 0, &f->res), 0);
    assert_int_equal(f->res.status, 200);
    assert_int_equal(fake_server_requests(f->srv) - before, 2);
    assert_int_equal(waits, 1);

    /* a POST with an Idempotency-Key is repeated too */
    json_t *job = json_pack("{s:[s]}", "command", "true");
    fake_server_limit(f->srv, 1, 1);
    before = fake_server_requests(f->srv);
    assert_int_equal(cr_client_request_idem(f->c, "POST", "/v1/jobs", job, "k-1", 0, &f->res), 0);
    assert_int_equal(fake_server_requests(f->srv) - before, 2);
    assert_int_equal(waits, 2);

    /* ... one without is not: the 429 is the answer, and says why */
    fake_server_limit(f->srv, 1, 1);
    before = fake_server_requests(f->srv);
    assert_int_equal(cr_client_request(f->c, "POST", "/v1/jobs", job, 0, &f->res), CR_EAGAIN);
    assert_int_equal(f->res.status, 429);
    assert_string_equal(f->res.error, "CR_EAGAIN");
    assert_non_null(strstr(f->res.message, "rate limit: slow down"));
    assert_non_null(strstr(f->res.message, "without an Idempotency-Key"));
    assert_int_equal(fake_server_requests(f->srv) - before, 1);

    /* no Retry-After, or one longer than the client waits: not repeated */
    fake_server_limit(f->srv, 1, 0);
    assert_int_equal(cr_client_request(f->c, "GET", "/v1/jobs", NULL, 0, &f->res), CR_EAGAIN);
    assert_non_null(strstr(f->res.message, "no Retry-After"));
    fake_server_limit(f->srv, 1, 100);
    before = fake_server_requests(f->srv);
    assert_int_equal(cr_client_request(f->c, "GET", "/v1/jobs", NULL, 0, &f->res), CR_EAGAIN);
    assert_non_null(strstr(f->res.message, "longer than the client waits"));
    assert_int_equal(fake_server_requests(f->srv) - before, 1);
    assert_int_equal(waits, 2);
    fake_server_limit(f->srv, 0, 0);

    /* rate_wait_ns < 0: never waits */
    cr_client *c2 = NULL;
    cr_client_opts o = {.server = fake_server_url(f->srv), .rate_wait_ns = -1};
    assert_int_equal(cr_client_new(&o, &c2), 0);
    fake_server_limit(f->srv, 1, 1);
    assert_int_equal(cr_client_request(c2, "GET", "/v1/jobs", NULL, 0, &f->res), CR_EAGAIN);
    assert_int_equal(f->res.status, 429);
    fake_server_limit(f->srv, 0, 0);
    cr_client_free(c2);
    json_decref(job);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_server_url),
        cmocka_unit_test(test_server_list),
        cmocka_unit_test_setup_teardown(test_get_with_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_post_body_and_query, setup, teardown),
        cmocka_unit_test_setup_teardown(test_methods_and_escaping, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_error_body, setup, teardown),
        cmocka_unit_test(test_unreachable),
        cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_reuse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rate_limit_retry, setup, teardown),
        cmocka_unit_test(test_tls),
        cmocka_unit_test(test_redirect_trust),
        cmocka_unit_test(test_url_forms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
