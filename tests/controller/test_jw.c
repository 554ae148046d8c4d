/*
 * test_jw.c - the controller's JSON writer (ctl_jw.c) writes, byte for
 * byte, what jansson's json_dumps(JSON_COMPACT) writes for the same values
 * (the desired-state document the agents read is written with it): strings
 * with every escape, non-ASCII text, reals in every shape, integers at
 * their limits, keys and commas in nested objects and arrays, whole
 * documents (ctl_jw_dumps, which the controller's JSON answers use); and
 * refuses (writes nothing) each string json_string() refuses.
 */
#include "ctl_int.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* jansson's text for one value: an object {"k": v} (v taken). */
static char *jansson_kv(json_t *v)
{
    json_t *o = json_object();
    json_object_set_new(o, "k", v);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

static void check_str(const char *text)
{
    json_t *js = json_string(text);
    cr_buf b;
    cr_buf_init(&b);
    cr_buf_putc(&b, '{');
    int rc = ctl_jw_kstr(&b, "k", text);
    cr_buf_putc(&b, '}');
    if (!js) {
        assert_int_equal(rc, -1);
        assert_string_equal(cr_buf_str(&b), "{}");
        assert_false(ctl_jw_str_ok(text));
    } else {
        assert_int_equal(rc, 0);
        char *want = jansson_kv(js);
        assert_string_equal(cr_buf_str(&b), want);
        free(want);
    }
    cr_buf_fini(&b);
}

static void test_strings(void **state)
{
    (void)state;
    static const char *const ok[] = {
        "",
        "plain",
        "quote \" backslash \\ slash /",
        "\b\f\n\r\t",
        "\x01\x02\x1f\x7f",
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", /* é € 😀 */
        "\xef\xbf\xbf",                              /* U+FFFF */
        "\xf4\x8f\xbf\xbf",                          /* U+10FFFF */
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        check_str(ok[i]);
        assert_true(ctl_jw_str_ok(ok[i]));
    }
    static const char *const bad[] = {
        "\x80",             /* a lone continuation byte */
        "\xc0\xaf",         /* overlong '/' */
        "\xc3",             /* cut short */
        "ab\xe2\x82",       /* cut short at the end */
        "\xed\xa0\x80",     /* a surrogate */
        "\xf4\x90\x80\x80", /* past U+10FFFF */
        "\xf5\x80\x80\x80",
        "\xe0\x80\xaf", /* overlong, three bytes */
        "\xff",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        check_str(bad[i]);
        assert_false(ctl_jw_str_ok(bad[i]));
    }
    assert_false(ctl_jw_str_ok(NULL));
    assert_null(ctl_jw_dumps(NULL));
}

static void test_numbers(void **state)
{
    (void)state;
    static const double reals[] = {0.0,    -0.0,     0.5,  1.0,     2.0 / 3.0, 8.0,
                                   1e-7,   1.5e-300, 1e21, 1e22,    1e100,     -2.5e-5,
                                   123.25, 4e15,     1e17, 3.1e-10, 6.02e23,   0.1 * 3};
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
        cr_buf b;
        cr_buf_init(&b);
        cr_buf_putc(&b, '{');
        ctl_jw_kreal(&b, "k", reals[i]);
        cr_buf_putc(&b, '}');
        char *want = jansson_kv(json_real(reals[i]));
        assert_string_equal(cr_buf_str(&b), want);
        free(want);
        cr_buf_fini(&b);
    }
    static const int64_t ints[] = {0, -1, 1, 4194304, INT64_MAX, INT64_MIN};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        cr_buf b;
        cr_buf_init(&b);
        cr_buf_putc(&b, '{');
        ctl_jw_kint(&b, "k", ints[i]);
        cr_buf_putc(&b, '}');
        char *want = jansson_kv(json_integer(ints[i]));
        assert_string_equal(cr_buf_str(&b), want);
        free(want);
        cr_buf_fini(&b);
    }
}

/* A document shaped like a desired state: nested objects and arrays,
 * values of jansson's own (a spec's command) dumped inside. */
static void test_nested(void **state)
{
    (void)state;
    json_t *cmd = json_pack("[s,s,{s:f,s:n,s:b}]", "sh", "-c \"x\"", "r", 0.25, "z", "t", 1);
    json_t *want_doc = json_pack(
        "{s:I,s:[{s:I,s:O,s:{},s:[i,i],s:[],s:{s:s,s:i},s:b}],s:{s:s}}", "version", (json_int_t)42,
        "jobs", "job", (json_int_t)7, "command", cmd, "env", "gpus", 0, 3, "gpu_uuids", "gang",
        "master_addr", "10.0.0.1", "launcher", 0, "batch", 1, "stop_reasons", "5", "cancelled\n");
    char *want = json_dumps(want_doc, JSON_COMPACT);
    cr_buf b;
    cr_buf_init(&b);
    cr_buf_putc(&b, '{');
    ctl_jw_kint(&b, "version", 42);
    ctl_jw_key(&b, "jobs");
    cr_buf_puts(&b, "[{");
    ctl_jw_kint(&b, "job", 7);
    ctl_jw_kjson(&b, "command", cmd);
    ctl_jw_kjson(&b, "absent", NULL); /* writes nothing */
    ctl_jw_key(&b, "env");
    cr_buf_puts(&b, "{}");
    ctl_jw_key(&b, "gpus");
    cr_buf_putc(&b, '[');
    ctl_jw_int(&b, 0);
    cr_buf_putc(&b, ',');
    ctl_jw_int(&b, 3);
    cr_buf_putc(&b, ']');
    ctl_jw_key(&b, "gpu_uuids");
    cr_buf_puts(&b, "[]");
    ctl_jw_key(&b, "gang");
    cr_buf_putc(&b, '{');
    ctl_jw_kstr(&b, "master_addr", "10.0.0.1");
    ctl_jw_kint(&b, "launcher", 0);
    cr_buf_putc(&b, '}');
    ctl_jw_ktrue(&b, "batch");
    cr_buf_puts(&b, "}]");
    ctl_jw_key(&b, "stop_reasons");
    cr_buf_putc(&b, '{');
    ctl_jw_kstr(&b, "5", "cancelled\n");
    cr_buf_puts(&b, "}}");
    assert_string_equal(cr_buf_str(&b), want);
    cr_buf_fini(&b);
    free(want);
    json_decref(want_doc);
    json_decref(cmd);
}

/* Values of every type, nested, through ctl_jw_json and json_dumps. */
static void test_values(void **state)
{
    (void)state;
    static const char *const docs[] = {
        "{}",
        "[]",
        "\"caf\\u00e9\\n\"",
        "[1,-2,3.5,1e-7,1e300,0.1,true,false,null,\"\\u0001\"]",
        "{\"b\":1,\"a\":{\"z\":[[],{}],\"y\":\"\\\"q\\\"\"},\"\\u00fc\":-0.0}",
        "{\"command\":[\"sh\",\"-c\",\"echo $X\\t> /tmp/o\"],\"data\":[{\"n\":9007199254740993}]}",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        json_error_t e;
        json_t *v = json_loads(docs[i], JSON_DECODE_ANY, &e);
        assert_non_null(v);
        char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        cr_buf b;
        cr_buf_init(&b);
        ctl_jw_json(&b, v);
        assert_string_equal(cr_buf_str(&b), want);
        cr_buf_fini(&b);
        free(want);
        /* the whole-document form: NULL where json_dumps gives NULL */
        char *got = ctl_jw_dumps(v);
        want = json_dumps(v, JSON_COMPACT);
        if (want) {
            assert_non_null(got);
            assert_string_equal(got, want);
        } else {
            assert_null(got);
        }
        free(got);
        free(want);
        json_decref(v);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_nested),
        cmocka_unit_test(test_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
