/*
 * test_http.c - the gateway's HTTP/1.x head parser and chunked scanner.
 */
#include "cr_http_parse.h"

#include "cr_error.h"

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static int req(const char *s, cr_http_msg *m)
{
    return cr_http_parse_request(s, strlen(s), m);
}

static void test_request_basic(void **state)
{
    (void)state;
    cr_http_msg m;
    const char *s = "GET /chat/v1/x?y=1 HTTP/1.1\r\nHost: a.b:80\r\nX-A:  v  \r\n\r\nBODY";
    int rc = req(s, &m);
    assert_int_equal(rc, (int)(strlen(s) - 4));
    assert_int_equal(m.method_len, 3);
    assert_memory_equal(m.target, "/chat/v1/x?y=1", m.target_len);
    assert_int_equal(m.minor, 1);
    assert_true(m.keep_alive);
    assert_int_equal(m.content_length, -1);
    assert_int_equal(m.header_count, 2);
    assert_int_equal(m.headers[1].value_len, 1);
    assert_memory_equal(m.host, "a.b:80", m.host_len);
    /* Every prefix is incomplete, never an error. */
    for (size_t i = 0; i < strlen(s) - 4; i++) {
        assert_int_equal(cr_http_parse_request(s, i, &m), 0);
    }
}

static void test_request_framing(void **state)
{
    (void)state;
    cr_http_msg m;
    assert_true(req("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n", &m) > 0);
    assert_int_equal(m.content_length, 12);
    assert_true(req("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", &m) > 0);
    assert_true(m.chunked);
    /* Smuggling shapes are refused. */
    assert_int_equal(
        req("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            &m),
        CR_EPARSE);
    assert_int_equal(
        req("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", &m),
        CR_EPARSE);
    assert_int_equal(req("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +1\r\n\r\n", &m),
                     CR_EPARSE);
    assert_int_equal(req("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", &m),
                     CR_EPARSE);
    assert_int_equal(req("GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", &m), CR_EPARSE);
    assert_int_equal(req("GET / HTTP/1.1\r\nHost : x\r\n\r\n", &m), CR_EPARSE);
    assert_int_equal(req("GET / HTTP/1.1\r\n\r\n", &m), CR_EPARSE); /* no Host */
    assert_int_equal(req("GET / HTTP/2.0\r\nHost: x\r\n\r\n", &m), CR_EPARSE);
    assert_int_equal(req("G\x01T / HTTP/1.1\r\n", &m), CR_EPARSE);
}

static void test_keep_alive(void **state)
{
    (void)state;
    cr_http_msg m;
    assert_true(req("GET / HTTP/1.0\r\n\r\n", &m) > 0);
    assert_false(m.keep_alive);
    assert_true(req("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &m) > 0);
    assert_true(m.keep_alive);
    assert_true(req("GET / HTTP/1.1\r\nHost: x\r\nConnection: foo, close\r\n\r\n", &m) > 0);
    assert_false(m.keep_alive);
    assert_true(req("GET / HTTP/1.1\nHost: x\n\n", &m) > 0); /* bare LF */
}

static void test_response(void **state)
{
    (void)state;
    cr_http_msg m;
    const char *s = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    assert_int_equal(cr_http_parse_response(s, strlen(s), &m), (int)strlen(s) - 5);
    assert_int_equal(m.status, 200);
    assert_int_equal(m.content_length, 5);
    assert_memory_equal(m.target, "OK", 2);
    s = "HTTP/1.1 204\r\n\r\n";
    assert_true(cr_http_parse_response(s, strlen(s), &m) > 0);
    assert_int_equal(m.status, 204);
    s = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n";
    assert_true(cr_http_parse_response(s, strlen(s), &m) > 0);
    assert_true(m.chunked);
    assert_int_equal(m.content_length, -1);
    s = "HTTX/1.1 200 OK\r\n";
    assert_int_equal(cr_http_parse_response(s, strlen(s), &m), CR_EPARSE);
}

static void test_chunked(void **state)
{
    (void)state;
    const char *body = "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\nNEXT";
    size_t len = strlen(body);
    /* Fed byte by byte it ends at the same place as all at once. */
    cr_http_chunked c;
    memset(&c, 0, sizeof c);
    size_t used = 0;
    assert_int_equal(cr_http_chunked_scan(&c, body, len, &used), 1);
    assert_int_equal(used, len - 4);
    memset(&c, 0, sizeof c);
    size_t total = 0;
    for (size_t i = 0; i < len; i++) {
        int rc = cr_http_chunked_scan(&c, body + i, 1, &used);
        total += used;
        if (rc == 1) {
            break;
        }
        assert_int_equal(rc, 0);
    }
    assert_int_equal(total, len - 4);
    memset(&c, 0, sizeof c);
    assert_int_equal(cr_http_chunked_scan(&c, "zz\r\n", 4, &used), CR_EPARSE);
    memset(&c, 0, sizeof c);
    assert_int_equal(cr_http_chunked_scan(&c, "3\r\nabcX", 7, &used), CR_EPARSE);
    memset(&c, 0, sizeof c);
    assert_int_equal(cr_http_chunked_scan(&c, "fffffffffffffffffff\r\n", 21, &used), CR_EPARSE);
}

/* How the gateway frames one whole request: 1 when it would forward it
 * (head valid and the body ends inside the bytes), -1 when it refuses it. */
static int frame_whole(const char *buf, size_t len)
{
    cr_http_msg m;
    int rc = cr_http_parse_request(buf, len, &m);
    if (rc <= 0) {
        return -1;
    }
    if (!m.chunked) {
        return m.content_length < 0 || (size_t)m.content_length <= len - m.head_len ? 1 : -1;
    }
    cr_http_chunked c;
    memset(&c, 0, sizeof c);
    size_t used = 0;
    /* Byte by byte, as a slow client would send it, then all at once. */
    for (size_t i = m.head_len; i < len; i++) {
        int r = cr_http_chunked_scan(&c, buf + i, 1, &used);
        if (r < 0) {
            return -1;
        }
        if (r == 1) {
            break;
        }
    }
    memset(&c, 0, sizeof c);
    return cr_http_chunked_scan(&c, buf + m.head_len, len - m.head_len, &used) == 1 ? 1 : -1;
}

/* fuzz/gateway/corpus_http/smuggle_*: request-smuggling shapes (RFC 9112
 * 6.1, 6.3, 7.1), every one refused; ok_*: near misses that are valid. */
static void test_smuggle_corpus(void **state)
{
    (void)state;
    const char *src = getenv("CORRAL_SRC");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/fuzz/gateway/corpus_http", src ? src : ".");
    DIR *d = opendir(dir);
    assert_non_null(d);
    int refused = 0, accepted = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        bool bad = strncmp(e->d_name, "smuggle_", 8) == 0;
        bool good = strncmp(e->d_name, "ok_", 3) == 0;
        if (!bad && !good) {
            continue;
        }
        char path[4600];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        char buf[8192];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        int rc = frame_whole(buf, n);
        if (rc != (bad ? -1 : 1)) {
            fail_msg("%s: %s", e->d_name, bad ? "accepted a smuggling shape" : "refused");
        }
        bad ? refused++ : accepted++;
    }
    closedir(d);
    assert_true(refused >= 25);
    assert_true(accepted >= 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_basic), cmocka_unit_test(test_request_framing),
        cmocka_unit_test(test_keep_alive),    cmocka_unit_test(test_response),
        cmocka_unit_test(test_chunked),       cmocka_unit_test(test_smuggle_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
