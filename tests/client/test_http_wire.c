/*
 * test_http_wire.c - the built-in HTTP/1.1 transport against answers written
 * byte for byte by a scripted server on loopback: chunked bodies with
 * extensions and trailers, close-delimited bodies, interim 1xx answers, a
 * kept-alive connection the server closed (retried once), truncated and
 * malformed answers, stalls.
 */
#include "cr_client.h"

#include "cr_error.h"
#include "cr_time.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

/* A server that answers each request with the next scripted reply; a reply
 * ending in "\n<close>" is sent without that marker and the connection is
 * closed after it. */
typedef struct script {
    int lfd;                 /* listening socket */
    int port;                /* its port */
    const char *const *reps; /* replies, NULL-terminated */
    _Atomic int accepted;    /* connections accepted */
    _Atomic int requests;    /* requests read */
    char last_req[4096];     /* last request head and body */
    pthread_t th;
} script;

/* Read one request (head and Content-Length body); 0 at EOF. */
static int read_request(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    for (;;) {
        ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
        if (n <= 0) {
            return 0;
        }
        len += (size_t)n;
        buf[len] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        if (end) {
            size_t want = 0;
            char *cl = strstr(buf, "Content-Length: ");
            if (cl && cl < end) {
                want = (size_t)atoi(cl + 16);
            }
            if (len >= (size_t)(end - buf) + 4 + want) {
                return 1;
            }
        }
        if (len + 1 >= cap) {
            return 1;
        }
    }
}

static void *serve(void *arg)
{
    script *s = arg;
    size_t next = 0;
    while (s->reps[next]) {
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0) {
            break;
        }
        s->accepted++;
        while (s->reps[next]) {
            if (!read_request(fd, s->last_req, sizeof s->last_req)) {
                break;
            }
            s->requests++;
            const char *rep = s->reps[next++];
            const char *mark = strstr(rep, "\n<close>");
            size_t n = mark ? (size_t)(mark - rep) : strlen(rep);
            send(fd, rep, n, MSG_NOSIGNAL);
            if (mark) {
                break;
            }
        }
        close(fd);
    }
    return NULL;
}

static void script_start(script *s, const char *const *reps)
{
    memset(s, 0, sizeof *s);
    s->reps = reps;
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(s->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(s->lfd, 8), 0);
    socklen_t sl = sizeof sa;
    getsockname(s->lfd, (struct sockaddr *)&sa, &sl);
    s->port = ntohs(sa.sin_port);
    pthread_create(&s->th, NULL, serve, s);
}

static void script_stop(script *s)
{
    shutdown(s->lfd, SHUT_RDWR);
    close(s->lfd);
    pthread_join(s->th, NULL);
}

static cr_client *client_for(const script *s, int64_t timeout_ns)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s->port);
    cr_client_opts o = {.server = url, .token = "t", .timeout_ns = timeout_ns};
    cr_client *c = NULL;
    assert_int_equal(cr_client_new(&o, &c), 0);
    return c;
}

typedef struct acc {
    char data[512];
    size_t len;
} acc;

static int collect(void *ud, const char *d, size_t n)
{
    acc *a = ud;
    if (a->len + n < sizeof a->data) {
        memcpy(a->data + a->len, d, n);
        a->len += n;
        a->data[a->len] = '\0';
    }
    return 0;
}

static void test_keepalive_and_framing(void **state)
{
    static const char *const reps[] = {
        /* Content-Length */
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
        "{\"a\":true}\n",
        /* chunked, with an extension, odd sizes and a trailer */
        "HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n"
        "4;ext=1\r\n{\"b\"\r\n"
        "a\r\n:[1,2,3]}\n\r\n"
        "0\r\nX-Trailer: yes\r\n\r\n",
        /* an interim answer, then 201 */
        "HTTP/1.1 100 Continue\r\n\r\n"
        "HTTP/1.1 201 Created\r\nContent-Length: 10\r\n\r\n{\"ids\":[]}",
        /* 204 without a body */
        "HTTP/1.1 204 No Content\r\n\r\n",
        NULL,
    };
    script s;
    script_start(&s, reps);
    cr_client *c = client_for(&s, 0);
    cr_client_res r;
    cr_client_res_init(&r);
    assert_int_equal(cr_client_health(c, &r), 0);
    assert_true(json_is_true(json_object_get(r.body, "a")));
    assert_int_equal(cr_client_nodes_list(c, &r), 0);
    assert_int_equal(json_array_size(json_object_get(r.body, "b")), 3);
    json_t *job = json_pack("{s:[s]}", "command", "true");
    assert_int_equal(cr_client_job_submit(c, job, &r), 0);
    json_decref(job);
    assert_int_equal(r.status, 201);
    assert_non_null(strstr(s.last_req, "POST /v1/jobs HTTP/1.1\r\n"));
    assert_non_null(strstr(s.last_req, "Authorization: Bearer t\r\n"));
    assert_non_null(strstr(s.last_req, "Content-Length: 20\r\n"));
    assert_non_null(strstr(s.last_req, "\r\n\r\n{\"command\":[\"true\"]}"));
    assert_int_equal(cr_client_service_delete(c, "x", &r), 0);
    assert_int_equal(r.status, 204);
    assert_null(r.raw);
    assert_int_equal(s.accepted, 1); /* one connection for all four */
    cr_client_res_fini(&r);
    cr_client_free(c);
    script_stop(&s);
}

static void test_close_and_retry(void **state)
{
    static const char *const reps[] = {
        /* HTTP/1.0 and no length: the body runs to the close */
        "HTTP/1.0 200 OK\r\n\r\n{\"one\":1}\n<close>",
        /* keep-alive answer, then the server closes the idle connection */
        "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{\"two\":2}\n<close>",
        "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"three\":3}",
        NULL,
    };
    script s;
    script_start(&s, reps);
    cr_client *c = client_for(&s, 0);
    cr_client_res r;
    cr_client_res_init(&r);
    assert_int_equal(cr_client_health(c, &r), 0);
    assert_int_equal(json_integer_value(json_object_get(r.body, "one")), 1);
    assert_int_equal(cr_client_health(c, &r), 0);
    assert_int_equal(json_integer_value(json_object_get(r.body, "two")), 2);
    /* the client still holds the second connection, which the server closed:
     * the request fails on it without an answer and is retried once */
    assert_int_equal(cr_client_health(c, &r), 0);
    assert_int_equal(json_integer_value(json_object_get(r.body, "three")), 3);
    assert_int_equal(s.accepted, 3);
    cr_client_res_fini(&r);
    cr_client_free(c);
    script_stop(&s);
}

/* The server takes the request and closes without a word: a GET is retried
 * on a fresh connection, a POST is not (it may have been acted on). */
static void test_retry_only_idempotent(void **state)
{
    static const char *const reps[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{\"one\":1}",    "\n<close>",
        "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{\"two\":2}",    "\n<close>",
        "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"three\":3}", NULL,
    };
    script s;
    script_start(&s, reps);
    cr_client *c = client_for(&s, 0);
    cr_client_res r;
    cr_client_res_init(&r);
    assert_int_equal(cr_client_health(c, &r), 0);
    assert_int_equal(cr_client_health(c, &r), 0); /* retried */
    assert_int_equal(json_integer_value(json_object_get(r.body, "two")), 2);
    assert_int_equal(s.accepted, 2);
    json_t *job = json_pack("{s:[s]}", "command", "true");
    assert_int_equal(cr_client_job_submit(c, job, &r), CR_EUNAVAIL); /* not retried */
    json_decref(job);
    assert_int_equal(r.status, 0);
    assert_int_equal(s.requests, 4);
    assert_int_equal(cr_client_health(c, &r), 0);
    assert_int_equal(json_integer_value(json_object_get(r.body, "three")), 3);
    assert_int_equal(s.accepted, 3);
    cr_client_res_fini(&r);
    cr_client_free(c);
    script_stop(&s);
}

static void test_broken_answers(void **state)
{
    static const char *const reps[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{\"short\":\n<close>",
        "SMTP ready\r\n\r\n<close>",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\n<close>",
        "\n<close>",
        "HTTP/1.1 404 Not Found\r\nContent-Length: 51\r\n\r\n"
        "{\"error\":\"CR_ENOENT\",\"message\":\"no such thing\"}    ",
        NULL,
    };
    script s;
    script_start(&s, reps);
    cr_client *c = client_for(&s, 0);
    cr_client_res r;
    cr_client_res_init(&r);
    /* truncated after the status: the server answered, then broke */
    assert_int_equal(cr_client_health(c, &r), CR_EIO);
    assert_int_equal(r.status, 200);
    /* not HTTP: no answer */
    assert_int_equal(cr_client_health(c, &r), CR_EUNAVAIL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.message, "not an HTTP answer"));
    assert_int_equal(cr_client_health(c, &r), CR_EIO);
    if (!strstr(r.message, "chunk size")) {
        fail_msg("%s", r.message);
    }
    /* closed without a byte */
    assert_int_equal(cr_client_health(c, &r), CR_EUNAVAIL);
    assert_int_equal(r.status, 0);
    assert_int_equal(cr_client_health(c, &r), CR_ENOENT);
    assert_string_equal(r.message, "no such thing");
    cr_client_res_fini(&r);
    cr_client_free(c);
    script_stop(&s);
}

static void test_stall(void **state)
{
    /* the head of a chunked stream, then silence */
    static const char *const reps[] = {
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nhello\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{",
        "never sent: keeps the server waiting on the connection",
        NULL,
    };
    script s;
    script_start(&s, reps);
    cr_client *c = client_for(&s, 0);
    cr_client_res r;
    cr_client_res_init(&r);
    acc a = {0};
    int rc = cr_client_stream(c, "/s", 0, 200 * CR_NS_PER_MS, collect, &a, &r);
    if (rc != CR_ETIMEDOUT) {
        fail_msg("rc %d: %s", rc, r.message);
    }
    assert_string_equal(a.data, "hello\n");
    assert_non_null(strstr(r.message, "stalled"));
    /* a whole-request timeout on an answer that never completes */
    assert_int_equal(cr_client_request(c, "GET", "/x", NULL, 200 * CR_NS_PER_MS, &r), CR_ETIMEDOUT);
    cr_client_res_fini(&r);
    cr_client_free(c);
    script_stop(&s);
}

/* A server that reads only the head of one request, answers 413 and closes
 * with the body unread (the kernel resets the connection). */
static void *refuse_big(void *arg)
{
    script *s = arg;
    int fd = accept(s->lfd, NULL, NULL);
    if (fd < 0) {
        return NULL;
    }
    s->accepted++;
    char buf[4096];
    size_t len = 0;
    while (len + 1 < sizeof buf) {
        ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (n <= 0) {
            break;
        }
        len += (size_t)n;
        buf[len] = '\0';
        if (strstr(buf, "\r\n\r\n")) {
            break;
        }
    }
    static const char rep[] =
        "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 58\r\nConnection: close\r\n\r\n"
        "{\"error\":\"CR_ETOOBIG\",\"message\":\"request body over 1 MiB\"}";
    send(fd, rep, sizeof rep - 1, MSG_NOSIGNAL);
    close(fd);
    return NULL;
}

static void test_answer_before_body_sent(void **state)
{
    script s;
    static const char *const reps[] = {NULL};
    memset(&s, 0, sizeof s);
    s.reps = reps;
    s.lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(s.lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(s.lfd, 8), 0);
    socklen_t sl = sizeof sa;
    getsockname(s.lfd, (struct sockaddr *)&sa, &sl);
    s.port = ntohs(sa.sin_port);
    pthread_create(&s.th, NULL, refuse_big, &s);
    /* 8 MiB: far more than the socket buffers hold, so the send is still
     * running when the server answers and resets */
    size_t n = 8u << 20;
    char *big = malloc(n + 1);
    memset(big, 'a', n);
    big[n] = '\0';
    json_t *body = json_pack("{s:s}", "pad", big);
    free(big);
    cr_client *c = client_for(&s, 10000 * CR_NS_PER_MS);
    cr_client_res r;
    cr_client_res_init(&r);
    int rc = cr_client_request(c, "POST", "/v1/jobs", body, 0, &r);
    if (rc != CR_ETOOBIG || r.status != 413) {
        fail_msg("rc %d status %ld: %s", rc, (long)r.status, r.message ? r.message : "");
    }
    json_decref(body);
    cr_client_res_fini(&r);
    cr_client_free(c);
    script_stop(&s);
}

/* A cancel hook that says stop on its fourth question (about 150 ms in). */
static bool stop_after_three(void *ud)
{
    int *asked = ud;
    return ++*asked > 3;
}

static void test_cancel(void **state)
{
    /* a long-poll whose answer never completes: the hook ends it early */
    static const char *const reps[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{",
        "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{",
        "never sent: keeps the server waiting on the connection",
        NULL,
    };
    script s;
    script_start(&s, reps);
    cr_client *c = client_for(&s, 0);
    int asked = 0;
    cr_client_set_cancel(c, stop_after_three, &asked);
    cr_client_res r;
    cr_client_res_init(&r);
    int64_t t0 = cr_mono_ns();
    int rc = cr_client_request(c, "GET", "/poll", NULL, 60 * CR_NS_PER_SEC, &r);
    int64_t took = cr_mono_ns() - t0;
    if (rc != CR_EAGAIN) {
        fail_msg("rc %d: %s", rc, r.message);
    }
    assert_string_equal(r.message, "cancelled");
    assert_true(asked >= 4);
    assert_true(took < 30 * CR_NS_PER_SEC);
    /* no retry of a cancelled request, and the hook removed lets the next
     * request run to its own end */
    assert_int_equal(s.requests, 1);
    cr_client_set_cancel(c, NULL, NULL);
    assert_int_equal(cr_client_request(c, "GET", "/x", NULL, 200 * CR_NS_PER_MS, &r), CR_ETIMEDOUT);
    cr_client_res_fini(&r);
    cr_client_free(c);
    script_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keepalive_and_framing),
        cmocka_unit_test(test_close_and_retry),
        cmocka_unit_test(test_retry_only_idempotent),
        cmocka_unit_test(test_broken_answers),
        cmocka_unit_test(test_stall),
        cmocka_unit_test(test_answer_before_body_sent),
        cmocka_unit_test(test_cancel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
