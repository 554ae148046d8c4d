#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_opt.h"
#include "cr_parse.h"
#include "cr_rng.h"
#include "cr_time.h"

#include <jansson.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static void test_errors(void **state)
{
    (void)state;
    assert_string_equal(cr_errname(CR_ENOENT), "CR_ENOENT");
    assert_string_equal(cr_strerror(CR_ENOENT), "not found");
    assert_string_equal(cr_errname(12345), "CR_EUNKNOWN");
    assert_true(CR_ENOMEM < 0 && CR_EUNAVAIL < 0);
}

/* cr_buf_put_jstr: a JSON string jansson reads back as the same text. */
static void test_buf_jstr(void **state)
{
    (void)state;
    const char *cases[] = {"",           "plain", "q\"uote", "back\\slash", "nl\nand\ttab\x01",
                           "caf\xc3\xa9"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_buf b;
        cr_buf_init(&b);
        cr_buf_puts(&b, "{\"k\":");
        cr_buf_put_jstr(&b, cases[i]);
        cr_buf_putc(&b, '}');
        json_error_t e;
        json_t *v = json_loads(cr_buf_str(&b), 0, &e);
        assert_non_null(v);
        assert_string_equal(json_string_value(json_object_get(v, "k")), cases[i]);
        json_decref(v);
        cr_buf_fini(&b);
    }
    cr_buf b;
    cr_buf_init(&b);
    cr_buf_put_jstr(&b, NULL);
    assert_string_equal(cr_buf_str(&b), "\"\"");
    /* the exact text: runs copied whole, each escape where it was */
    cr_buf_reset(&b);
    cr_buf_put_jstr(&b, "a\"b\\c\nd\x01"
                        "e\x1f");
    assert_string_equal(cr_buf_str(&b), "\"a\\\"b\\\\c\\u000ad\\u0001e\\u001f\"");
    cr_buf_fini(&b);
}

static void test_buf(void **state)
{
    (void)state;
    cr_buf b;
    cr_buf_init(&b);
    assert_string_equal(cr_buf_str(&b), "");
    for (int i = 0; i < 1000; i++) {
        cr_buf_printf(&b, "%d,", i);
    }
    assert_int_equal(strncmp(cr_buf_str(&b), "0,1,2,", 6), 0);
    char *s = cr_buf_take(&b);
    assert_int_equal(b.len, 0);
    assert_true(strlen(s) > 3000);
    free(s);
    cr_buf_fini(&b);
}

static void test_duration(void **state)
{
    (void)state;
    int64_t ns = 0;
    assert_int_equal(cr_duration_parse("1h30m", &ns), 0);
    assert_true(ns == 90 * CR_NS_PER_MIN);
    assert_int_equal(cr_duration_parse("250ms", &ns), 0);
    assert_true(ns == 250 * CR_NS_PER_MS);
    assert_int_equal(cr_duration_parse("45", &ns), 0);
    assert_true(ns == 45 * CR_NS_PER_SEC);
    int64_t keep = ns;
    assert_int_equal(cr_duration_parse("1h30", &ns), CR_EINVAL);
    assert_int_equal(cr_duration_parse("abc", &ns), CR_EINVAL);
    assert_int_equal(cr_duration_parse("", &ns), CR_EINVAL);
    assert_int_equal(cr_duration_parse("-5s", &ns), CR_EINVAL);
    assert_true(ns == keep);
    char buf[32];
    assert_string_equal(cr_duration_fmt(40 * CR_NS_PER_MIN, buf, sizeof buf), "40m");
    assert_string_equal(cr_duration_fmt(90 * CR_NS_PER_MIN, buf, sizeof buf), "1h30m");
}

static void test_time_limit(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int64_t secs;
    } ok[] = {
        {"90", 5400},           {"0", 0},         {"10:30", 630},     {"1:00:00", 3600},
        {"2-00:00:00", 172800}, {"1-12", 129600}, {"1-02:30", 95400}, {"90s", 90},
        {"2h", 7200},           {"1h30m", 5400},  {"3d", 259200},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int64_t ns = -1;
        assert_int_equal(cr_time_limit_parse(ok[i].in, &ns), 0);
        assert_true(ns == ok[i].secs * CR_NS_PER_SEC);
    }
    static const char *const bad[] = {"",   "1:60", "1:2:3:4", "1-24", "1-2:60",  "x",   "-5",
                                      "1-", ":5",   "5:",      "1h30", "1:00:0x", "1--2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ns = 7;
        assert_int_not_equal(cr_time_limit_parse(bad[i], &ns), 0);
        assert_true(ns == 7);
    }
    int64_t ns = 7;
    assert_int_equal(cr_time_limit_parse("999999999", &ns), CR_ERANGE);
}

static void test_count(void **state)
{
    (void)state;
    double v = 0;
    assert_int_equal(cr_parse_count("7b", &v), 0);
    assert_true(v == 7e9);
    assert_int_equal(cr_parse_count("70e9", &v), 0);
    assert_true(v == 70e9);
    assert_int_equal(cr_parse_count("1.5T", &v), 0);
    assert_true(v == 1.5e12);
    assert_int_equal(cr_parse_count("7x", &v), CR_EINVAL);
    assert_int_equal(cr_parse_count("7bb", &v), CR_EINVAL);
    assert_int_equal(cr_parse_count("nan", &v), CR_EINVAL);
    int64_t i = 0;
    assert_int_equal(cr_parse_i64("12", 0, 100, &i), 0);
    assert_true(i == 12);
    assert_int_equal(cr_parse_i64("101", 0, 100, &i), CR_ERANGE);
    assert_int_equal(cr_parse_i64("1 ", 0, 100, &i), CR_EINVAL);
    /* Memory sizes, Slurm-style: powers of 1024, a bare number is MB. */
    assert_int_equal(cr_parse_bytes("512M", &i), 0);
    assert_true(i == 512LL << 20);
    assert_int_equal(cr_parse_bytes("16g", &i), 0);
    assert_true(i == 16LL << 30);
    assert_int_equal(cr_parse_bytes("1.5GB", &i), 0);
    assert_true(i == 3LL << 29);
    assert_int_equal(cr_parse_bytes("100", &i), 0);
    assert_true(i == 100LL << 20);
    assert_int_equal(cr_parse_bytes("64K", &i), 0);
    assert_true(i == 64LL << 10);
    assert_int_equal(cr_parse_bytes("0", &i), CR_EINVAL);
    assert_int_equal(cr_parse_bytes("-1G", &i), CR_EINVAL);
    assert_int_equal(cr_parse_bytes("1Q", &i), CR_EINVAL);
    assert_int_equal(cr_parse_bytes("1BB", &i), CR_EINVAL);
    assert_int_equal(cr_parse_bytes("9999999T", &i), CR_ERANGE);
}

static void test_csv(void **state)
{
    (void)state;
    char line[] = "a,\"b,c\",\"say \"\"hi\"\"\",,d\r\n";
    cr_csv_rec r;
    cr_csv_rec_init(&r);
    int col = 0;
    assert_int_equal(cr_csv_split(line, ',', &r, &col), 0);
    assert_int_equal(r.count, 5);
    assert_string_equal(r.fields[1], "b,c");
    assert_string_equal(r.fields[2], "say \"hi\"");
    assert_string_equal(r.fields[3], "");
    assert_string_equal(r.fields[4], "d");
    assert_int_equal(r.col[1], 3);
    char bad[] = "x,\"unterminated";
    assert_int_equal(cr_csv_split(bad, ',', &r, &col), CR_EPARSE);
    assert_int_equal(col, 3);
    cr_csv_rec_fini(&r);
}

static void test_rng(void **state)
{
    (void)state;
    cr_rng a, b;
    cr_rng_seed(&a, 42);
    cr_rng_seed(&b, 42);
    for (int i = 0; i < 100; i++) {
        assert_true(cr_rng_next(&a) == cr_rng_next(&b));
    }
    double sum = 0;
    for (int i = 0; i < 10000; i++) {
        uint64_t x = cr_rng_below(&a, 10);
        assert_true(x < 10);
        sum += cr_rng_exp(&a, 2.0);
    }
    assert_true(sum / 10000 > 1.8 && sum / 10000 < 2.2);
}

/* Logs one line with stderr sent to a file; returns the line (static). */
static const char *log_line(int level, const char *msg)
{
    static char line[4096];
    char path[] = "/tmp/corral-test-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    cr_log(level, "%s", msg);
    dup2(saved, STDERR_FILENO);
    close(saved);
    FILE *f = fdopen(fd, "r");
    rewind(f);
    line[0] = '\0';
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    unlink(path);
    return line;
}

static void test_log(void **state)
{
    cr_log_set_level(CR_LOG_DEBUG);
    cr_log_set_format(CR_LOG_JSON);
    const char *l = log_line(CR_LOG_WARN, "node=h1 lost: \"quoted\"\tand\\ job=7 x= y");
    assert_non_null(strstr(l, "\"level\":\"warn\""));
    assert_non_null(strstr(l, "\"msg\":\"node=h1 lost: \\\"quoted\\\"\\u0009and\\\\ job=7 x= y\""));
    assert_non_null(strstr(l, ",\"node\":\"h1\""));
    assert_non_null(strstr(l, ",\"job\":\"7\""));
    assert_non_null(strstr(l, "}\n"));
    assert_int_equal(l[0], '{');
    /* text (journald priorities: tests/install/test_install.sh) */
    assert_int_equal(cr_log_set_format_name("text"), 0);
    assert_int_equal(cr_log_set_format_name("yaml"), CR_EINVAL);
    l = log_line(CR_LOG_INFO, "hello");
    assert_non_null(strstr(l, "Z INFO  hello\n"));
    setenv("CORRAL_LOG", "verbose", 1);
    assert_int_equal(cr_log_init(), CR_EINVAL);
    setenv("CORRAL_LOG", "error", 1);
    assert_int_equal(cr_log_init(), CR_LOG_ERROR);
    unsetenv("CORRAL_LOG");
    cr_log_set_level(CR_LOG_INFO);
}

/* Options from a table: flags and config values set the same members,
 * bounds hold on both, a bad value says why, --help has every flag. */
typedef struct opt_conf {
    int32_t n;
    int64_t wait_ns;
    bool on;
    int sw;
    char *name;
    const char *path;
} opt_conf;

static const cr_opt opt_rows[] = {
    {NULL, NULL, CR_OPT_NOTE, 0, 0, 0, 0, 0, NULL, "Section:", NULL, false},
    {"--n", "n", CR_OPT_I32, offsetof(opt_conf, n), 1, 10, 0, 0, "N", "a count", NULL, false},
    {"--wait", "wait_s", CR_OPT_DUR, offsetof(opt_conf, wait_ns), 0, 60 * CR_NS_PER_SEC, 0, 0,
     "DUR", "a wait\nof two lines", NULL, false},
    {"--on", "on", CR_OPT_BOOL, offsetof(opt_conf, on), 0, 0, 0, 0, NULL, "a switch", NULL, false},
    {"--no-sw", NULL, CR_OPT_SET, offsetof(opt_conf, sw), 0, 0, 0, 0, NULL, "off", NULL, false},
    {"--name", "name", CR_OPT_STRDUP, offsetof(opt_conf, name), 0, 0, 0, 0, "S", "owned", NULL,
     false},
    {"--path", NULL, CR_OPT_STR, offsetof(opt_conf, path), 0, 0, 0, 0, "P", "borrowed",
     "expected a path", false},
    {"--odd", NULL, CR_OPT_CUSTOM, 0, 0, 0, 0, 0, "X", "the caller's", NULL, false},
};

static void test_opt(void **state)
{
    (void)state;
    size_t n = sizeof opt_rows / sizeof opt_rows[0];
    opt_conf c = {.sw = -1};
    char why[128];
    assert_null(cr_opt_by_flag(opt_rows, n, "Section:"));
    assert_null(cr_opt_by_flag(opt_rows, n, "--nope"));
    const cr_opt *o = cr_opt_by_flag(opt_rows, n, "--n");
    assert_true(cr_opt_wants_value(o));
    assert_int_equal(cr_opt_set_flag(o, &c, "7", why, sizeof why), 0);
    assert_int_equal(c.n, 7);
    assert_int_equal(cr_opt_set_flag(o, &c, "11", why, sizeof why), CR_EINVAL);
    assert_string_equal(why, "must be an integer 1..10");
    cr_opt_value v = {.kind = CR_OPT_V_INT, .i = 3, .d = 3};
    assert_int_equal(cr_opt_set_value(cr_opt_by_key(opt_rows, n, "n"), &c, &v, why, sizeof why), 0);
    assert_int_equal(c.n, 3);
    v = (cr_opt_value){.kind = CR_OPT_V_REAL, .d = 2.5};
    o = cr_opt_by_key(opt_rows, n, "wait_s");
    assert_int_equal(cr_opt_set_value(o, &c, &v, why, sizeof why), 0);
    assert_int_equal(c.wait_ns, 2500 * CR_NS_PER_MS);
    v.d = 61;
    assert_int_equal(cr_opt_set_value(o, &c, &v, why, sizeof why), CR_EINVAL);
    assert_string_equal(why, "must be a number of seconds >= 0");
    assert_int_equal(cr_opt_set_flag(o, &c, "500ms", why, sizeof why), 0);
    assert_int_equal(c.wait_ns, 500 * CR_NS_PER_MS);
    assert_int_equal(cr_opt_set_flag(o, &c, "2m", why, sizeof why), CR_EINVAL);
    assert_int_equal(
        cr_opt_set_flag(cr_opt_by_flag(opt_rows, n, "--on"), &c, NULL, why, sizeof why), 0);
    assert_true(c.on);
    v = (cr_opt_value){.kind = CR_OPT_V_STR, .s = "x"};
    assert_int_equal(cr_opt_set_value(cr_opt_by_key(opt_rows, n, "on"), &c, &v, why, sizeof why),
                     CR_EINVAL);
    assert_string_equal(why, "must be true or false");
    assert_int_equal(
        cr_opt_set_flag(cr_opt_by_flag(opt_rows, n, "--no-sw"), &c, NULL, why, sizeof why), 0);
    assert_int_equal(c.sw, 0);
    o = cr_opt_by_flag(opt_rows, n, "--name");
    assert_int_equal(cr_opt_set_flag(o, &c, "a", why, sizeof why), 0);
    assert_int_equal(cr_opt_set_flag(o, &c, "bc", why, sizeof why), 0);
    assert_string_equal(c.name, "bc");
    free(c.name);
    assert_int_equal(
        cr_opt_set_flag(cr_opt_by_flag(opt_rows, n, "--path"), &c, NULL, why, sizeof why),
        CR_EINVAL);
    assert_string_equal(why, "expected a path");
    assert_int_equal(
        cr_opt_set_flag(cr_opt_by_flag(opt_rows, n, "--odd"), &c, "x", why, sizeof why),
        CR_ENOTSUP);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_opt_help(f, opt_rows, n, 10);
    fclose(f);
    assert_string_equal(text, "Section:\n"
                              "  --n N     a count\n"
                              "  --wait DUR\n"
                              "            a wait\n"
                              "            of two lines\n"
                              "  --on      a switch\n"
                              "  --no-sw   off\n"
                              "  --name S  owned\n"
                              "  --path P  borrowed\n"
                              "  --odd X   the caller's\n");
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log),      cmocka_unit_test(test_errors),
        cmocka_unit_test(test_buf),      cmocka_unit_test(test_buf_jstr),
        cmocka_unit_test(test_duration), cmocka_unit_test(test_time_limit),
        cmocka_unit_test(test_count),    cmocka_unit_test(test_csv),
        cmocka_unit_test(test_rng),      cmocka_unit_test(test_opt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
