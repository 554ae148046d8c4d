/*
 * test_cli.c - the client commands: flag parsing, the config file, table
 * formatting, and whole commands run in-process against a real loopback
 * HTTP server (tests/client/fake_server.c) that records what was sent.
 */
#include "cli_int.h"

#include "cr_error.h"
#include "cr_secretshape.h"
#include "cr_time.h"
#include "fake_server.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Captured output of one command. */
typedef struct run {
    int code;
    char *out;
    size_t out_len;
    char *err;
    size_t err_len;
} run;

static void run_free(run *r)
{
    free(r->out);
    free(r->err);
}

/* Run "corral ARGS..." in-process; args end with NULL. */
static run cli(const char *first, ...)
{
    char *argv[64];
    int argc = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 63; a = va_arg(ap, const char *)) {
        argv[argc++] = (char *)a;
    }
    va_end(ap);
    argv[argc] = NULL;
    run r = {0};
    FILE *out = open_memstream(&r.out, &r.out_len);
    FILE *err = open_memstream(&r.err, &r.err_len);
    r.code = cr__cli_run(argc, argv, out, err);
    fclose(out);
    fclose(err);
    return r;
}

/* --- flags ------------------------------------------------------------------ */

static const cli_opt opts[] = {
    {"gpus", CLI_INT, "N", "gpus", NULL, 0, 64, 0},
    {"kind", CLI_STR, "K", "kind", "a|bb|c", 0, 0, 0},
    {"time", CLI_DUR, "D", "time", NULL, 0, 0, 't'},
    {"env", CLI_LIST, "K=V", "env", NULL, 0, 0, 'e'},
    {"params", CLI_COUNT, "N", "params", NULL, 0, 0, 0},
    {"weight", CLI_F64, "W", "weight", NULL, 0, 10, 0},
    {"follow", CLI_BOOL, NULL, "follow", NULL, 0, 0, 'f'},
};

static int parse(cli_args *a, bool stop, char **argv, int argc, char **errtext)
{
    size_t len = 0;
    FILE *err = open_memstream(errtext, &len);
    int rc = cr__cli_args_parse(a, "t", opts, N(opts), stop, argc, argv, err);
    fclose(err);
    return rc;
}

static void test_args_ok(void **state)
{
    char *argv[] = {"t",   "--gpus", "8",      "--kind=bb", "-t",       "1h30m", "--env",
                    "A=1", "-e",     "B=x=y",  "pos",       "--params", "7b",    "--weight",
                    "2.5", "-f",     "--json", "--",        "python",   "--lr",  "3"};
    cli_args a;
    char *err = NULL;
    assert_int_equal(parse(&a, false, argv, (int)N(argv), &err), 0);
    assert_string_equal(err, "");
    assert_int_equal(cr__cli_arg(&a, "gpus")->i, 8);
    assert_string_equal(cr__cli_arg(&a, "kind")->str, "bb");
    assert_int_equal(cr__cli_arg(&a, "time")->i, 90 * CR_NS_PER_MIN);
    const cli_val *env = cr__cli_arg(&a, "env");
    assert_int_equal(env->count, 2);
    assert_string_equal(env->list[0], "A=1");
    assert_string_equal(env->list[1], "B=x=y");
    assert_true(cr__cli_arg(&a, "params")->f == 7e9);
    assert_true(cr__cli_arg(&a, "weight")->f == 2.5);
    assert_true(cr__cli_arg(&a, "follow")->set);
    assert_true(cr__cli_arg(&a, "json")->set);
    assert_false(cr__cli_arg(&a, "server")->set);
    assert_int_equal(a.npos, 1);
    assert_string_equal(a.pos[0], "pos");
    assert_true(a.dashdash);
    assert_int_equal(a.nrest, 3);
    assert_string_equal(a.rest[1], "--lr");
    cr__cli_args_fini(&a);
    free(err);
}

static void test_args_stop_at_positional(void **state)
{
    char *argv[] = {"t", "--gpus", "1", "python", "train.py", "--gpus", "9"};
    cli_args a;
    char *err = NULL;
    assert_int_equal(parse(&a, true, argv, (int)N(argv), &err), 0);
    assert_int_equal(cr__cli_arg(&a, "gpus")->i, 1);
    assert_int_equal(a.npos, 0);
    assert_int_equal(a.nrest, 4);
    assert_string_equal(a.rest[0], "python");
    assert_string_equal(a.rest[3], "9");
    cr__cli_args_fini(&a);
    free(err);
}

/* Each bad command line fails with a message naming the flag and what it
 * accepts. */
static void test_args_errors(void **state)
{
    static const struct {
        char *argv[4];
        int argc;
        const char *want;
    } cases[] = {
        {{"t", "--gpus", "65"}, 3, "--gpus: '65' is not an integer in 0..64"},
        {{"t", "--gpus", "x"}, 3, "--gpus: 'x' is not an integer"},
        {{"t", "--gpus"}, 2, "--gpus needs a value (N)"},
        {{"t", "--kind", "d"}, 3, "--kind: 'd' is not allowed (allowed: a, bb, c)"},
        {{"t", "--kind"}, 2, "(allowed: a, bb, c)"},
        {{"t", "--time", "soon"}, 3, "--time: 'soon' is not a positive duration"},
        {{"t", "--time", "0"}, 3, "--time: '0' is not a positive duration"},
        {{"t", "--params", "7q"}, 3, "--params: '7q' is not a count"},
        {{"t", "--weight", "nan"}, 3, "--weight: 'nan' is not a number in 0..10"},
        {{"t", "--bogus"}, 2, "unknown option '--bogus'"},
        {{"t", "-x"}, 2, "unknown option '-x'"},
        {{"t", "--follow=1"}, 2, "--follow takes no value"},
        {{"t", "--gpus="}, 2, "--gpus: '' is not an integer"},
    };
    for (size_t i = 0; i < N(cases); i++) {
        cli_args a;
        char *err = NULL;
        assert_int_equal(parse(&a, false, (char **)cases[i].argv, cases[i].argc, &err), CR_EINVAL);
        if (!strstr(err, cases[i].want)) {
            fail_msg("case %zu: '%s' lacks '%s'", i, err, cases[i].want);
        }
        assert_non_null(strstr(err, "corral t: "));
        cr__cli_args_fini(&a);
        free(err);
    }
}

/* --- config ------------------------------------------------------------------ */

static int cfg_parse(const char *text, cli_config *cfg, char **errtext)
{
    size_t len = 0;
    FILE *err = open_memstream(errtext, &len);
    cr__cli_config_init(cfg);
    int rc = cr__cli_config_parse(cfg, "cfg", text, err);
    fclose(err);
    return rc;
}

static void test_config(void **state)
{
    cli_config cfg;
    char *err = NULL;
    assert_int_equal(cfg_parse("# corral\n\nserver = https://ctl:8620\n  token=\"crl_abc\"  \n"
                               "insecure = true\ntimeout = 2m\nca_file = /etc/ca.pem\n",
                               &cfg, &err),
                     0);
    assert_string_equal(cfg.server, "https://ctl:8620");
    assert_string_equal(cfg.token, "crl_abc");
    assert_true(cfg.insecure);
    assert_int_equal(cfg.timeout_ns, 2 * CR_NS_PER_MIN);
    assert_string_equal(cfg.ca_file, "/etc/ca.pem");
    cr__cli_config_fini(&cfg);
    free(err);

    static const struct {
        const char *text, *want;
    } bad[] = {
        {"server = http://x\nsever = y\n", "cfg:2: unknown key 'sever' (allowed: server, token,"},
        {"\n\nnonsense\n", "cfg:3: expected 'key = value'"},
        {"server = ctl:8620\n", "cfg:1: server: 'ctl:8620' is not an http:// or https:// URL"},
        {"insecure = yes\n", "cfg:1: insecure: 'yes' is not allowed (allowed: true, false)"},
        {"timeout = never\n", "cfg:1: timeout: 'never' is not a positive duration"},
        {"token =\n", "cfg:1: token: empty value"},
        {"token = \"abc\n", "cfg:1: unterminated quote"},
        {"= x\n", "cfg:1: missing key"},
        {"token_file = /nonexistent/token\n", "cfg:1: token_file: cannot read a token"},
    };
    for (size_t i = 0; i < N(bad); i++) {
        assert_int_equal(cfg_parse(bad[i].text, &cfg, &err), CR_EPARSE);
        if (!strstr(err, bad[i].want)) {
            fail_msg("case %zu: '%s' lacks '%s'", i, err, bad[i].want);
        }
        cr__cli_config_fini(&cfg);
        free(err);
    }

    /* The JSON format, as for every other role. */
    assert_int_equal(cfg_parse("  {\"server\": \"https://ctl:8620\", \"token\": \"crl_j\",\n"
                               "   \"insecure\": true, \"timeout\": 90}\n",
                               &cfg, &err),
                     0);
    assert_string_equal(cfg.server, "https://ctl:8620");
    assert_string_equal(cfg.token, "crl_j");
    assert_true(cfg.insecure);
    assert_int_equal(cfg.timeout_ns, 90 * CR_NS_PER_SEC);
    cr__cli_config_fini(&cfg);
    free(err);
    static const struct {
        const char *text, *want;
    } jbad[] = {
        {"{\"server\": \"http://x\",\n \"sever\": \"y\"}", "cfg: unknown key 'sever'"},
        {"{\"server\": \"http://x\",\n\n \"token\" \"y\"}", "cfg:3:"},
        {"{\"insecure\": \"yes\"}", "cfg: insecure: 'yes' is not allowed"},
        {"{\"insecure\": 1}", "cfg: field 'insecure': expected a boolean"},
        {"{\"server\": 7}", "cfg: field 'server': expected a string"},
        {"{\"token\": \"\"}", "cfg: field 'token': empty value"},
        {"{\"token\": \"a\", \"token\": \"b\"}", "duplicate"},
    };
    for (size_t i = 0; i < N(jbad); i++) {
        assert_int_equal(cfg_parse(jbad[i].text, &cfg, &err), CR_EPARSE);
        if (!strstr(err, jbad[i].want)) {
            fail_msg("json case %zu: '%s' lacks '%s'", i, err, jbad[i].want);
        }
        cr__cli_config_fini(&cfg);
        free(err);
    }
}

/* --- tables and formatters ------------------------------------------------------ */

static void test_table(void **state)
{
    static const char *const hdr[] = {">ID", "NAME", "STATE"};
    cli_table t;
    cr__cli_table_init(&t, 3, hdr);
    const char *r1[] = {"7", "train-llama", "running"};
    const char *r2[] = {"123", NULL, "pending"};
    const char *r3[] = {"8", "naïve\tname", ""};
    cr__cli_table_row(&t, r1);
    cr__cli_table_row(&t, r2);
    cr__cli_table_row(&t, r3);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr__cli_table_print(&t, f);
    fclose(f);
    assert_string_equal(buf, " ID  NAME         STATE\n"
                             "  7  train-llama  running\n"
                             "123  -            pending\n"
                             "  8  naïve name   -\n");
    free(buf);
    cr__cli_table_fini(&t);
}

static void test_json_text(void **state)
{
    char b[64];
    json_t *v = json_pack("[i,f,f,s,b,n,[i,i],f]", 42, 2.5, 7e9, "x", 1, 1, 2, 0.001);
    assert_string_equal(cr__cli_json_text(json_array_get(v, 0), b, sizeof b), "42");
    assert_string_equal(cr__cli_json_text(json_array_get(v, 1), b, sizeof b), "2.50");
    assert_string_equal(cr__cli_json_text(json_array_get(v, 2), b, sizeof b), "7000000000");
    assert_string_equal(cr__cli_json_text(json_array_get(v, 3), b, sizeof b), "x");
    assert_string_equal(cr__cli_json_text(json_array_get(v, 4), b, sizeof b), "true");
    assert_string_equal(cr__cli_json_text(json_array_get(v, 5), b, sizeof b), "-");
    assert_string_equal(cr__cli_json_text(json_array_get(v, 6), b, sizeof b), "1,2");
    assert_string_equal(cr__cli_json_text(json_array_get(v, 7), b, sizeof b), "0.001");
    assert_string_equal(cr__cli_json_text(NULL, b, sizeof b), "-");
    json_decref(v);
}

static void test_time(void **state)
{
    int64_t t = 0;
    assert_int_equal(cr__cli_parse_rfc3339("2026-11-30T04:35:00Z", &t), 0);
    assert_int_equal(t, INT64_C(1796013300) * CR_NS_PER_SEC);
    assert_int_equal(cr__cli_parse_rfc3339("2026-11-30T05:35:00.5+01:00", &t), 0);
    assert_int_equal(t, INT64_C(1796013300) * CR_NS_PER_SEC + CR_NS_PER_SEC / 2);
    assert_int_equal(cr__cli_parse_rfc3339("2026-11-30", &t), CR_EINVAL);
    assert_int_equal(cr__cli_parse_rfc3339("2026-13-30T04:35:00Z", &t), CR_ERANGE);
    assert_int_equal(cr__cli_parse_rfc3339("2026-11-30T04:35:00Zjunk", &t), CR_EINVAL);
    assert_int_equal(cr__cli_parse_rfc3339("9999-12-31T23:59:59Z", &t), CR_ERANGE);
    assert_int_equal(cr__cli_parse_rfc3339("1960-01-01T00:00:00Z", &t), CR_ERANGE);
    char b[32];
    int64_t now = INT64_C(1796013300) * CR_NS_PER_SEC + 192 * CR_NS_PER_SEC;
    assert_string_equal(cr__cli_age("2026-11-30T04:35:00Z", now, b, sizeof b), "3m12s");
    assert_string_equal(cr__cli_age(NULL, now, b, sizeof b), "-");
}

/* --- whole commands against a loopback server ------------------------------------- */

static fake_server *start(void)
{
    fake_server *s = fake_server_start();
    assert_non_null(s);
    setenv("CORRAL_SERVER", fake_server_url(s), 1);
    setenv("CORRAL_TOKEN", "crl_test", 1);
    setenv("CORRAL_CONFIG", "/dev/null", 1);
    return s;
}

static const json_t *sent_body(const json_t *last)
{
    return json_object_get(last, "body");
}

static void test_cmd_submit(void **state)
{
    fake_server *s = start();
    fake_server_canned(s, 201, "{\"ids\":[42]}");
    run r = cli("submit", "--gpus", "8", "--gpu-type", "H100 SXM", "--kind", "finetune", "--params",
                "7b", "--method", "lora", "--tokens", "1e8", "--tenant", "ml", "--priority", "5",
                "--time", "1h", "--env", "A=1", "--workdir", "/tmp", "--array", "3", "--name", "ft",
                "--preemptible", "--retries", "2", "--export", "NONE", "--", "python", "train.py",
                "--lr", "3e-4", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "Submitted job 42\n");
    json_t *last = fake_server_last(s);
    assert_string_equal(json_string_value(json_object_get(last, "auth")), "Bearer crl_test");
    json_t *want = json_pack(
        "{s:[s,s,s,s],s:s,s:s,s:i,s:s,s:s,s:i,s:s,s:i,s:i,s:i,s:b,s:{s:f,s:s,s:f},s:{s:s}}",
        "command", "python", "train.py", "--lr", "3e-4", "name", "ft", "tenant", "ml", "gpus", 8,
        "gpu_type", "H100 SXM", "kind", "finetune", "priority", 5, "workdir", "/tmp", "array", 3,
        "max_retries", 2, "time_limit_s", 3600, "preemptible", 1, "model", "params", 7e9, "method",
        "lora", "tokens", 1e8, "env", "A", "1");
    char here[4096];
    assert_non_null(getcwd(here, sizeof here));
    json_object_set_new(want, "submit_dir", json_string(here)); /* SLURM_SUBMIT_DIR */
    if (!json_equal((json_t *)sent_body(last), want)) {
        char *got = json_dumps(sent_body(last), JSON_SORT_KEYS);
        fail_msg("sent %s", got);
    }
    json_decref(want);
    json_decref(last);
    run_free(&r);

    /* the plan's knobs (issue 26) go in model */
    r = cli("submit", "--kind", "pretrain", "--params", "8b", "--stack", "megatron",
            "--checkpointing", "selective", "--micro-batch", "2", "--global-batch", "64",
            "--seq-len", "8192", "--", "train", NULL);
    assert_int_equal(r.code, 0);
    last = fake_server_last(s);
    json_t *m = json_object_get(sent_body(last), "model");
    assert_string_equal(json_string_value(json_object_get(m, "stack")), "megatron");
    assert_string_equal(json_string_value(json_object_get(m, "checkpointing")), "selective");
    assert_int_equal(json_integer_value(json_object_get(m, "micro_batch")), 2);
    assert_int_equal(json_integer_value(json_object_get(m, "global_batch")), 64);
    assert_int_equal(json_integer_value(json_object_get(m, "seq_len")), 8192);
    json_decref(last);
    run_free(&r);

    /* --force (issue 26): sent as "force": true; the answer's warning on stderr */
    fake_server_canned(s, 201, "{\"ids\":[44],\"warning\":\"submitted under force: x\"}");
    r = cli("submit", "--gpu-type", "L40S", "--gpus", "4", "--kind", "pretrain", "--model",
            "llama-3.1-405b", "--force", "--", "train", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, "corral submit: warning: submitted under force: x\n"));
    last = fake_server_last(s);
    assert_true(json_is_true(json_object_get(sent_body(last), "force")));
    json_decref(last);
    run_free(&r);
    fake_server_canned(s, 201, "{\"ids\":[42]}");

    /* --model names the architecture the advisor reads for gpu_type auto */
    fake_server_canned(s, 201, "{\"ids\":[43]}");
    r = cli("submit", "--gpu-type", "auto", "--kind", "inference", "--model", "llama-3.1-8b",
            "true", NULL);
    assert_int_equal(r.code, 0);
    last = fake_server_last(s);
    const json_t *mdl = json_object_get(sent_body(last), "model");
    assert_string_equal(json_string_value(json_object_get(mdl, "name")), "llama-3.1-8b");
    json_decref(last);
    run_free(&r);

    /* a fractional GPU: thousandths and bytes on the wire */
    r = cli("submit", "--gpu-type", "L40S", "--gpu-fraction", "0.25", "--gpu-share-mem", "10G",
            "vllm", NULL);
    assert_int_equal(r.code, 0);
    last = fake_server_last(s);
    assert_int_equal(json_integer_value(json_object_get(sent_body(last), "gpu_milli")), 250);
    assert_int_equal(json_integer_value(json_object_get(sent_body(last), "gpu_mem_bytes")),
                     10LL << 30);
    json_decref(last);
    run_free(&r);

    /* -t as in sbatch: a bare number is minutes; Slurm's clock forms too */
    static const struct {
        const char *t;
        long long secs;
    } tl[] = {{"90", 5400}, {"1:00:00", 3600}, {"2-00:00:00", 172800}, {"90s", 90}, {"2h", 7200}};
    for (size_t i = 0; i < N(tl); i++) {
        fake_server_canned(s, 201, "{\"ids\":[42]}");
        r = cli("submit", "--export", "NONE", "-t", tl[i].t, "true", NULL);
        assert_int_equal(r.code, 0);
        run_free(&r);
        last = fake_server_last(s);
        json_t *got = json_object_get(sent_body(last), "time_limit_s");
        if (json_integer_value(got) != tl[i].secs) {
            fail_msg("-t %s: sent %lld, want %lld", tl[i].t, (long long)json_integer_value(got),
                     tl[i].secs);
        }
        json_decref(last);
    }

    /* arrays: a consecutive range */
    fake_server_canned(s, 201, "{\"ids\":[5,6,7]}");
    r = cli("submit", "--array", "3", "true", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "Submitted 3 jobs 5-7\n");
    run_free(&r);

    /* --json prints the server's answer */
    r = cli("submit", "--json", "true", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"ids\""));
    run_free(&r);

    /* the server's message, verbatim, exit 1 */
    fake_server_canned(s, 400,
                       "{\"error\":\"CR_EINVAL\",\"message\":\"field 'gpu_type': unknown GPU "
                       "type 'H900'\",\"field\":\"gpu_type\"}");
    r = cli("submit", "--gpu-type", "H900", "true", NULL);
    assert_int_equal(r.code, 1);
    assert_string_equal(r.err, "corral submit: field 'gpu_type': unknown GPU type 'H900'\n");
    assert_string_equal(r.out, "");
    run_free(&r);

    /* bad usage never reaches the server */
    unsigned before = fake_server_requests(s);
    r = cli("submit", "--gpus", "-1", "true", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--gpus: '-1' is not an integer in 0..4096"));
    run_free(&r);
    /* 0 GPUs is a CPU job on one node, without GPU properties (issue 29) */
    r = cli("submit", "--gpus", "0", "--nodes", "2", "true", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--gpus 0 (a job without GPUs) goes with one node"));
    run_free(&r);
    /* limits the server would refuse never leave the CLI */
    static const char *const bad[][3] = {
        {"--array", "10001", "--array"},
        {"--retries", "101", "--retries"},
        {"--time", "99999d", "--time"},
        {"--time", "1:60", "--time: '1:60' is not a time limit"},
        {"--workdir", "rel", "--workdir: 'rel' is not an absolute path"},
        {"--nodes", "1025", "--nodes"},
        {"--method", "sgd", "--method: 'sgd' is not allowed (allowed: full, lora, qlora)"},
        {"--precision", "fp5", "--precision"},
        {"--stack", "tensorflow", "--stack: 'tensorflow' is not allowed"},
        {"--micro-batch", "0", "--micro-batch"},
        {"--gpu-fraction", "1", "--gpu-fraction: want more than 0 and less than 1"},
        {"--gpu-fraction", "0.0001", "--gpu-fraction"},
        {"--gpu-share-mem", "lots", "--gpu-share-mem: 'lots' is not a size"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        r = cli("submit", bad[i][0], bad[i][1], "true", NULL);
        if (r.code != 2 || !strstr(r.err, bad[i][2])) {
            fail_msg("%s %s: exit %d: %s", bad[i][0], bad[i][1], r.code, r.err);
        }
        run_free(&r);
    }
    r = cli("submit", "--", "", "x", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "command name is empty"));
    run_free(&r);
    r = cli("submit", "--env", "NOEQUALS", "true", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--env: 'NOEQUALS' is not KEY=VALUE"));
    run_free(&r);
    r = cli("submit", "--gpus", "1", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "no command given"));
    run_free(&r);
    assert_int_equal(fake_server_requests(s), before);
    fake_server_stop(s);
}

/* Write a file under the test's temp dir; returns its path (static buffer). */
static const char *write_tmp(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof path, "/tmp/corral-cli-%d-%s", (int)getpid(), name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void test_cmd_submit_script(void **state)
{
    (void)state;
    fake_server *s = start();
    /* A Slurm script, unchanged: its #SBATCH lines become the request; a
     * flag on the command line wins over a directive. */
    const char *script = "#!/bin/bash\n"
                         "# a comment\n"
                         "#SBATCH -J trainer\n"
                         "#SBATCH --time=1:30:00 -N 2\n"
                         "#SBATCH --gres=gpu:h100:4\n"
                         "#SBATCH --ntasks-per-node=4\n"
                         "#SBATCH -o out-%j.txt\n"
                         "#SBATCH --mail-user=me@example.org\n"
                         "#SBATCH -c 8\n"
                         "#CORRAL --priority 7 --retries 1\n"
                         "\n"
                         "srun python train.py\n"
                         "#SBATCH -J ignored-after-the-first-command\n";
    const char *path = write_tmp("job.sh", script);
    fake_server_canned(s, 201, "{\"ids\":[9]}");
    run r = cli("submit", "--export", "NONE", "--priority", "3", path, "arg1", NULL);
    if (r.code != 0) {
        fail_msg("exit %d: %s", r.code, r.err);
    }
    /* options with no Corral equivalent, or not yet, are named with their line */
    assert_non_null(strstr(r.err, ":8: #SBATCH --mail-user=me@example.org: no Corral equivalent"));
    assert_null(strstr(r.err, ":9:")); /* -c maps: cpus per task x tasks per node */
    json_t *last = fake_server_last(s);
    const json_t *b = sent_body(last);
    assert_string_equal(json_string_value(json_object_get(b, "name")), "trainer");
    assert_int_equal(json_integer_value(json_object_get(b, "time_limit_s")), 5400);
    assert_int_equal(json_integer_value(json_object_get(b, "nodes")), 2);
    assert_int_equal(json_integer_value(json_object_get(b, "gpus")), 8);
    assert_string_equal(json_string_value(json_object_get(b, "gpu_type")), "h100");
    assert_int_equal(json_integer_value(json_object_get(b, "tasks_per_node")), 4);
    assert_string_equal(json_string_value(json_object_get(b, "output")), "out-%j.txt");
    assert_int_equal(json_integer_value(json_object_get(b, "priority")), 3); /* the CLI wins */
    assert_int_equal(json_integer_value(json_object_get(b, "max_retries")), 1);
    assert_true(json_number_value(json_object_get(b, "cpus")) == 32.0);
    assert_string_equal(json_string_value(json_object_get(b, "script")), script);
    json_t *cmd = json_object_get(b, "command");
    assert_string_equal(json_string_value(json_array_get(cmd, 0)), strrchr(path, '/') + 1);
    assert_string_equal(json_string_value(json_array_get(cmd, 1)), "arg1");
    assert_true(json_is_true(json_object_get(b, "batch"))); /* sbatch's form: the body once */
    json_decref(last);
    run_free(&r);
    /* after "--" a script is a command: as every task, no "batch" */
    r = cli("submit", "--export", "NONE", "--", path, "arg1", NULL);
    assert_int_equal(r.code, 0);
    last = fake_server_last(s);
    b = sent_body(last);
    assert_non_null(json_object_get(b, "script"));
    assert_null(json_object_get(b, "batch"));
    json_decref(last);
    run_free(&r);

    /* -p is a partition, not a GPU type (issue 29); --parsable prints the id
     * alone, for jid=$(corral submit --parsable a.sh); the server's note is
     * shown on stderr. */
    path = write_tmp("part.sh", "#!/bin/bash\n#SBATCH -p gpu\n#SBATCH --parsable\n"
                                "#SBATCH --open-mode=append\ntrue\n");
    fake_server_canned(s, 201, "{\"ids\":[12,13],\"note\":\"partition 'gpu' taken as X\"}");
    r = cli("submit", path, NULL);
    if (r.code != 0) {
        fail_msg("exit %d: %s", r.code, r.err);
    }
    assert_string_equal(r.out, "12\n");
    assert_non_null(strstr(r.err, "corral submit: note: partition 'gpu' taken as X"));
    last = fake_server_last(s);
    b = sent_body(last);
    assert_string_equal(json_string_value(json_object_get(b, "partition")), "gpu");
    assert_null(json_object_get(b, "gpu_type"));
    assert_string_equal(json_string_value(json_object_get(b, "open_mode")), "append");
    json_decref(last);
    run_free(&r);
    r = cli("submit", "--open-mode", "sometimes", "true", NULL);
    assert_int_not_equal(r.code, 0); /* truncate or append */
    run_free(&r);
    r = cli("submit", "-p", "cpu", "--gpus", "0", "--parsable", "true", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "12\n");
    last = fake_server_last(s);
    assert_string_equal(json_string_value(json_object_get(sent_body(last), "partition")), "cpu");
    assert_true(json_is_integer(json_object_get(sent_body(last), "gpus")));
    assert_int_equal(json_integer_value(json_object_get(sent_body(last), "gpus")), 0);
    json_decref(last);
    run_free(&r);

    /* sbatch's options on the command line (issue 29): translated as an
     * #SBATCH line; corral's own (-n is the name) keep their meaning */
    r = cli("submit", "--export", "NONE", "-J", "cl", "--gres=gpu:2", "--ntasks", "4", "--nice=5",
            "-t", "2-12", path, NULL);
    if (r.code != 0) {
        fail_msg("exit %d: %s", r.code, r.err);
    }
    assert_non_null(strstr(r.err, "corral submit: --nice=5: no Corral equivalent"));
    last = fake_server_last(s);
    b = sent_body(last);
    assert_string_equal(json_string_value(json_object_get(b, "name")), "cl");
    assert_int_equal(json_integer_value(json_object_get(b, "time_limit_s")), 60 * 3600);
    assert_true(json_is_true(json_object_get(b, "batch")));
    json_decref(last);
    run_free(&r);
    /* --wrap=CMD: a /bin/sh script of that command, sbatch's form */
    r = cli("submit", "--export", "NONE", "--wrap=echo hi", NULL);
    assert_int_equal(r.code, 0);
    last = fake_server_last(s);
    b = sent_body(last);
    assert_string_equal(json_string_value(json_object_get(b, "script")), "#!/bin/sh\necho hi\n");
    assert_string_equal(json_string_value(json_array_get(json_object_get(b, "command"), 0)),
                        "wrap");
    assert_true(json_is_true(json_object_get(b, "batch")));
    json_decref(last);
    run_free(&r);

    /* An unknown directive, or a bad value, names the file and line; nothing is sent. */
    unsigned before = fake_server_requests(s);
    r = cli("submit", "--wrap", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--wrap needs a command"));
    run_free(&r);
    r = cli("submit", "--wrap=true", "--", "sleep", "1", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--wrap and a command"));
    run_free(&r);
    r = cli("submit", "--gres=disk:2", "--", "true", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "corral submit: --gres=disk:2: only gpu:[TYPE:]N maps"));
    run_free(&r);
    path = write_tmp("bad.sh", "#!/bin/sh\n#SBATCH --frobnicate=3\ntrue\n");
    r = cli("submit", path, NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "bad.sh:2: #SBATCH --frobnicate=3: unknown"));
    run_free(&r);
    path = write_tmp("bad2.sh", "#!/bin/sh\n\n#SBATCH -t 1:75\ntrue\n");
    r = cli("submit", path, NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "bad2.sh:3: --time: '1:75' is not a time limit"));
    run_free(&r);
    path = write_tmp("bad3.sh", "#!/bin/sh\n#CORRAL --gpus lots\ntrue\n");
    r = cli("submit", path, NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "bad3.sh:2: --gpus: 'lots'"));
    run_free(&r);
    assert_int_equal(fake_server_requests(s), before);

    /* --export (issue 24): by default only the allow-list (LANG, LANGUAGE,
     * LC_*, TZ, TERM); ALL: the environment minus secrets and Corral's own */
    setenv("CORRAL_TEST_KEEP", "1", 1);
    setenv("MY_API_TOKEN", "hush", 1);
    setenv("DB_PASSWORD", "hush", 1);
    setenv("PLAIN_VALUE", "yes", 1);
    setenv("LANG", "de_DE.UTF-8", 1);
    setenv("LC_TIME", "en_GB.UTF-8", 1);
    setenv("TZ", "Europe/Berlin", 1);
    /* credentials by family, by value, and the node's own variables */
    static const char *const hidden[][2] = {
        {"AWS_PROFILE", "prod"},
        {"AZURE_STORAGE_CONNECTION_STRING", "AccountKey=x"},
        {"DATABASE_URL", "postgres://app:hunter2@db:5432/x"},
        {"HTTPS_PROXY", "http://me:pw@proxy:3128"},
        {"SSHPASS", "hush"},
        {"MYSQL_PWD", "hush"},
        {"SENTRY_DSN", "https://abc123@o1.ingest.sentry.io/2"},
        {"NVIDIA_VISIBLE_DEVICES", "all"},
        {"NVIDIA_DRIVER_CAPABILITIES", "all"},
        {"CUDA_MPS_PIPE_DIRECTORY", "/tmp/x"},
        {"LD_PRELOAD", "/opt/login-node/libsandbox.so"},
        {"ROCR_VISIBLE_DEVICES", "0"},
        /* the red team's misses: names that say nothing, values that do */
        {"GH_PAT", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"},
        {"OPENAI", "sk-proj-4f9Qx2LmZk8RtY7wVb3NcH1sJdPa6EuT"},
        {"DB_CONN", "postgres://db:5432/app?sslmode=require&password=hunter2"},
        {"SLACK", "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp"},
        {"CLOUD_ID", "AKIAIOSFODNN7EXAMPLE"},
        {"GITLAB", "glpat-xxxxxxxxxxxxxxxxxxxx"},
        {"ID_JWT_LIKE", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig-nature_x"},
        {"CERTBLOB", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END"},
    };
    for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++) {
        setenv(hidden[i][0], hidden[i][1], 1);
    }
    setenv("PLAIN_URL", "https://example.com/a@b", 1);
    fake_server_canned(s, 201, "{\"ids\":[10]}");
    /* the default: the allow-list only */
    r = cli("submit", "true", NULL);
    assert_int_equal(r.code, 0);
    run_free(&r);
    last = fake_server_last(s);
    json_t *env = json_object_get(sent_body(last), "env");
    assert_string_equal(json_string_value(json_object_get(env, "LANG")), "de_DE.UTF-8");
    assert_string_equal(json_string_value(json_object_get(env, "LC_TIME")), "en_GB.UTF-8");
    assert_string_equal(json_string_value(json_object_get(env, "TZ")), "Europe/Berlin");
    assert_null(json_object_get(env, "PLAIN_VALUE"));
    assert_null(json_object_get(env, "PATH"));
    assert_null(json_object_get(env, "HOME"));
    const char *k;
    json_t *x;
    json_object_foreach(env, k, x)
    {
        if (strcmp(k, "LANG") != 0 && strcmp(k, "LANGUAGE") != 0 && strcmp(k, "TZ") != 0 &&
            strcmp(k, "TERM") != 0 && strncmp(k, "LC_", 3) != 0) {
            fail_msg("the default --export sent %s", k);
        }
    }
    json_decref(last);
    /* ALL: everything but what looks like a credential or is the node's */
    r = cli("submit", "--export", "ALL", "true", NULL);
    assert_int_equal(r.code, 0);
    run_free(&r);
    last = fake_server_last(s);
    env = json_object_get(sent_body(last), "env");
    assert_string_equal(json_string_value(json_object_get(env, "PLAIN_VALUE")), "yes");
    assert_string_equal(json_string_value(json_object_get(env, "PLAIN_URL")),
                        "https://example.com/a@b");
    assert_string_equal(json_string_value(json_object_get(env, "LANG")), "de_DE.UTF-8");
    assert_null(json_object_get(env, "MY_API_TOKEN"));
    assert_null(json_object_get(env, "DB_PASSWORD"));
    assert_null(json_object_get(env, "CORRAL_TOKEN"));
    assert_null(json_object_get(env, "CORRAL_TEST_KEEP"));
    for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++) {
        if (json_object_get(env, hidden[i][0])) {
            fail_msg("--export ALL sent %s", hidden[i][0]);
        }
    }
    json_decref(last);
    /* #SBATCH --export=ALL in a script: the same as the flag */
    path = write_tmp("exp.sh", "#!/bin/sh\n#SBATCH --export=ALL\ntrue\n");
    r = cli("submit", path, NULL);
    assert_int_equal(r.code, 0);
    run_free(&r);
    last = fake_server_last(s);
    env = json_object_get(sent_body(last), "env");
    assert_string_equal(json_string_value(json_object_get(env, "PLAIN_VALUE")), "yes");
    assert_null(json_object_get(env, "GH_PAT"));
    json_decref(last);
    path = write_tmp("exp2.sh", "#!/bin/sh\n#SBATCH --export=NONE,PLAIN_VALUE\ntrue\n");
    r = cli("submit", path, NULL);
    assert_int_equal(r.code, 0);
    run_free(&r);
    last = fake_server_last(s);
    env = json_object_get(sent_body(last), "env");
    assert_int_equal(json_object_size(env), 1);
    assert_string_equal(json_string_value(json_object_get(env, "PLAIN_VALUE")), "yes");
    json_decref(last);
    /* named explicitly: sent, with a word on stderr */
    r = cli("submit", "--export", "NONE,DATABASE_URL,AWS_PROFILE", "true", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, "DATABASE_URL looks like a credential"));
    run_free(&r);
    last = fake_server_last(s);
    env = json_object_get(sent_body(last), "env");
    assert_int_equal(json_object_size(env), 2);
    assert_string_equal(json_string_value(json_object_get(env, "AWS_PROFILE")), "prod");
    assert_non_null(json_object_get(env, "DATABASE_URL"));
    json_decref(last);
    for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++) {
        unsetenv(hidden[i][0]);
    }
    unsetenv("PLAIN_URL");
    /* a list: only what it names (Slurm's --export=NAME,...) */
    r = cli("submit", "--export", "PLAIN_VALUE,X=1", "true", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
    run_free(&r);
    last = fake_server_last(s);
    env = json_object_get(sent_body(last), "env");
    assert_int_equal(json_object_size(env), 2);
    assert_string_equal(json_string_value(json_object_get(env, "X")), "1");
    json_decref(last);
    /* NONE: nothing (no env member at all) */
    r = cli("submit", "--export", "NONE", "true", NULL);
    assert_int_equal(r.code, 0);
    run_free(&r);
    last = fake_server_last(s);
    assert_null(json_object_get(sent_body(last), "env"));
    json_decref(last);
    unsetenv("MY_API_TOKEN");
    unsetenv("DB_PASSWORD");
    unsetenv("PLAIN_VALUE");
    unsetenv("CORRAL_TEST_KEEP");
    unsetenv("LANG");
    unsetenv("LC_TIME");
    unsetenv("TZ");
    assert_true(cr_secret_name("AWS_SECRET_ACCESS_KEY", 21));
    assert_true(cr_secret_name("OPENAI_API_KEY", 14));
    assert_false(cr_secret_name("KEYBOARD", 8));
    assert_false(cr_secret_name("PATH", 4));
    assert_true(cr_secret_name("AWS_ACCESS_KEY_ID", 17));
    assert_true(cr_secret_name("PGPASS", 6));
    assert_false(cr_secret_name("PASSAGE", 7));
    assert_false(cr_secret_name("LD_LIBRARY_PATH", 15));
    assert_true(cr_secret_name("GH_PAT", 6));
    assert_false(cr_secret_name("PATCH_LEVEL", 11));
    assert_true(cr_secret_value("redis://:pw@cache:6379"));
    assert_false(cr_secret_value("http://proxy:3128"));
    assert_false(cr_secret_value("user@example.com"));
    for (size_t i = 12; i < sizeof hidden / sizeof hidden[0]; i++) {
        if (!cr_secret_value(hidden[i][1])) {
            fail_msg("%s's value does not look like a credential", hidden[i][0]);
        }
    }
    assert_true(cr_secret_value("github_pat_11ABCDEFG0123456789_abcdefghijklmnop"));
    assert_true(cr_secret_value("Authorization: Bearer abcdefghijklmnop"));
    assert_true(cr_secret_value("Server=db;User Id=app;Password=hunter2;"));
    assert_false(cr_secret_value("sk-learn"));
    assert_false(cr_secret_value("en_US.UTF-8"));
    assert_false(cr_secret_value("Asia/Tokyo"));
    assert_false(cr_secret_value("/usr/local/bin:/usr/bin"));
    assert_false(cr_secret_value("https://example.com/search?q=password"));
    assert_false(cr_secret_value("desk-1234567890abcdefghijklmn"));
    char p2[256];
    snprintf(p2, sizeof p2, "/tmp/corral-cli-%d-job.sh", (int)getpid());
    unlink(p2);
    snprintf(p2, sizeof p2, "/tmp/corral-cli-%d-bad.sh", (int)getpid());
    unlink(p2);
    snprintf(p2, sizeof p2, "/tmp/corral-cli-%d-bad2.sh", (int)getpid());
    unlink(p2);
    snprintf(p2, sizeof p2, "/tmp/corral-cli-%d-bad3.sh", (int)getpid());
    unlink(p2);
    snprintf(p2, sizeof p2, "/tmp/corral-cli-%d-exp.sh", (int)getpid());
    unlink(p2);
    snprintf(p2, sizeof p2, "/tmp/corral-cli-%d-exp2.sh", (int)getpid());
    unlink(p2);
    fake_server_stop(s);
}

static const char JOBS[] =
    "{\"items\":["
    "{\"id\":1,\"name\":\"pretrain\",\"tenant\":\"ml\",\"state\":\"running\",\"gpus\":8,"
    "\"nodes\":2,\"gpu_type\":\"H100 SXM\",\"start_time\":\"2026-11-30T04:00:00Z\","
    "\"placement\":[{\"node\":\"h100-0\",\"gpus\":[0,1]},{\"node\":\"h100-1\",\"gpus\":[0,1]}]},"
    "{\"id\":2,\"name\":\"ft\",\"tenant\":\"nlp\",\"state\":\"pending\",\"gpus\":1,"
    "\"gpu_type\":\"auto\",\"reason\":\"needs 1 A100: 0 free\"},"
    "{\"id\":3,\"name\":\"old\",\"tenant\":\"ml\",\"state\":\"completed\",\"gpus\":1,"
    "\"gpu_type\":\"L40S\",\"start_time\":\"2026-11-30T03:00:00Z\","
    "\"end_time\":\"2026-11-30T03:10:00Z\"},"
    "{\"id\":4,\"name\":\"mig\",\"tenant\":\"ml\",\"state\":\"held\",\"gpus\":1,"
    "\"mig_profile\":\"1g.10gb\",\"gpu_type\":\"A30\"}],\"count\":4}";

static void test_cmd_jobs(void **state)
{
    fake_server *s = start();
    fake_server_canned(s, 200, JOBS);
    run r = cli("jobs", NULL);
    assert_int_equal(r.code, 0);
    /* finished jobs are hidden by default; columns aligned */
    assert_null(strstr(r.out, "old"));
    if (!strstr(r.out, "ID  NAME      TENANT  STATE       GPUS  TYPE      ")) {
        fail_msg("%s", r.out);
    }
    assert_non_null(strstr(r.out, "h100-0,h100-1"));
    assert_non_null(strstr(r.out, "(needs 1 A100: 0 free)"));
    assert_non_null(strstr(r.out, "2x4")); /* 8 GPUs in total on 2 nodes */
    assert_non_null(strstr(r.out, "1g.10gb"));
    run_free(&r);

    r = cli("jobs", "--all", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "old"));
    assert_non_null(strstr(r.out, "10m"));
    run_free(&r);

    r = cli("jobs", "--state", "running", "--tenant", "ml", "--limit", "10", NULL);
    assert_int_equal(r.code, 0);
    json_t *last = fake_server_last(s);
    const json_t *q = json_object_get(last, "query");
    assert_string_equal(json_string_value(json_object_get(q, "state")), "running");
    assert_string_equal(json_string_value(json_object_get(q, "tenant")), "ml");
    assert_string_equal(json_string_value(json_object_get(q, "limit")), "10");
    json_decref(last);
    run_free(&r);

    r = cli("jobs", "--json", NULL);
    assert_int_equal(r.code, 0);
    json_t *doc = json_loads(r.out, 0, NULL);
    assert_int_equal(json_array_size(json_object_get(doc, "items")), 4);
    json_decref(doc);
    run_free(&r);
    fake_server_stop(s);
}

static void test_cmd_show_and_actions(void **state)
{
    fake_server *s = start();
    fake_server_canned(
        s, 200,
        "{\"id\":2,\"name\":\"ft\",\"tenant\":\"nlp\",\"state\":\"pending\",\"reason\":\"needs "
        "1 A100: 0 free\",\"command\":[\"python\",\"a b.py\"],\"gpus\":1,\"model\":{\"params\":"
        "7e9,\"method\":\"lora\"},\"events\":[{\"time\":\"2026-11-30T04:00:00Z\",\"what\":"
        "\"submitted\",\"why\":\"by alice\"},{\"time\":\"2026-11-30T04:00:01Z\",\"what\":"
        "\"pending\",\"why\":\"needs 1 A100: 0 free\"}]}");
    run r = cli("show", "2", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "Job 2\n"));
    assert_non_null(strstr(r.out, "  Reason:         needs 1 A100: 0 free\n"));
    assert_non_null(strstr(r.out, "  Command:        python 'a b.py'\n"));
    assert_non_null(strstr(r.out, "params=7000000000 method=lora"));
    assert_non_null(strstr(r.out, "Events:\n  TIME                  WHAT       WHY\n"));
    assert_non_null(strstr(r.out, "  2026-11-30T04:00:01Z  pending    needs 1 A100: 0 free\n"));
    run_free(&r);

    /* issue 26: the advisor's plan, as the job's environment has it */
    fake_server_canned(s, 200,
                       "{\"id\":4,\"name\":\"pre\",\"state\":\"running\",\"plan\":{\"tp\":2,"
                       "\"pp\":2,\"dp\":2,\"ep\":1,\"cp\":1,\"text\":\"tp2 x pp2 x dp2\","
                       "\"kind\":\"training\",\"micro_batch\":1,\"global_batch\":1024}}");
    r = cli("show", "4", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "  Plan:           tp2 x pp2 x dp2 (tp 2, pp 2, dp 2, ep 1, "
                                  "micro-batch 1, global batch 1024)\n"));
    run_free(&r);

    /* issue 24: the environment's names only, values with --env */
    fake_server_canned(s, 200,
                       "{\"id\":3,\"name\":\"e\",\"state\":\"running\",\"env_names\":"
                       "[\"HF_HOME\",\"LANG\"]}");
    r = cli("show", "3", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "  Env:            HF_HOME LANG\n"));
    assert_non_null(strstr(r.out, "(names only; values: corral show --env)"));
    run_free(&r);
    json_t *last = fake_server_last(s);
    assert_null(json_object_get(json_object_get(last, "query"), "env"));
    json_decref(last);
    /* an older controller sends the values: still names only */
    fake_server_canned(s, 200,
                       "{\"id\":3,\"name\":\"e\",\"state\":\"running\",\"env\":"
                       "{\"HF_HOME\":\"/data/hf\",\"GH_PAT\":\"ghp_x\"}}");
    r = cli("show", "3", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "Env:"));
    assert_non_null(strstr(r.out, "HF_HOME"));
    assert_null(strstr(r.out, "/data/hf"));
    assert_null(strstr(r.out, "ghp_x"));
    run_free(&r);
    /* --env asks for them (?env=1), one NAME=value a line */
    fake_server_canned(s, 200,
                       "{\"id\":3,\"name\":\"e\",\"state\":\"running\",\"env_names\":"
                       "[\"GH_PAT\",\"HF_HOME\"],\"env\":{\"GH_PAT\":\"(redacted)\","
                       "\"HF_HOME\":\"/data/hf\"}}");
    r = cli("show", "--env", "3", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "  Env:\n    GH_PAT=(redacted)\n    HF_HOME=/data/hf\n"));
    run_free(&r);
    last = fake_server_last(s);
    assert_string_equal(json_string_value(json_object_get(json_object_get(last, "query"), "env")),
                        "1");
    json_decref(last);

    r = cli("show", "two", NULL);
    assert_int_equal(r.code, 2);
    assert_string_equal(r.err, "corral show: 'two' is not a job id (a positive integer)\n");
    run_free(&r);

    fake_server_echo(s);
    r = cli("cancel", "3", "4", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "Cancelled job 3\nCancelled job 4\n");
    last = fake_server_last(s);
    /* a plain id asks for the whole array when it is one's first id */
    assert_string_equal(json_string_value(json_object_get(last, "path")), "/v1/jobs/4/cancel");
    assert_string_equal(json_string_value(json_object_get(json_object_get(last, "query"), "array")),
                        "1");
    json_decref(last);
    run_free(&r);
    r = cli("cancel", "4_2", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "Cancelled job 4_2\n");
    last = fake_server_last(s);
    assert_string_equal(json_string_value(json_object_get(last, "path")), "/v1/jobs/4_2/cancel");
    json_decref(last);
    run_free(&r);

    r = cli("requeue", "9", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "Requeued job 9\n");
    run_free(&r);

    fake_server_canned(s, 404, "{\"error\":\"CR_ENOENT\",\"message\":\"job 77: not found\"}");
    r = cli("hold", "77", NULL);
    assert_int_equal(r.code, 1);
    assert_string_equal(r.err, "corral hold: job 77: not found\n");
    run_free(&r);
    fake_server_stop(s);
}

static void test_cmd_admin(void **state)
{
    fake_server *s = start();
    fake_server_canned(
        s, 200,
        "{\"items\":[{\"name\":\"h100-0\",\"state\":\"up\",\"rack\":\"r1\",\"gpus\":["
        "{\"index\":0,\"model\":\"H100 SXM\",\"health\":\"ok\",\"job\":1},"
        "{\"index\":1,\"model\":\"H100 SXM\",\"health\":\"xid\",\"reason\":\"XID 79\"},"
        "{\"index\":2,\"model\":\"H100 SXM\",\"health\":\"ok\"}]},"
        "{\"name\":\"l40s-0\",\"state\":\"drained\",\"reason\":\"maintenance\",\"gpus\":["
        "{\"index\":0,\"model\":\"L40S\",\"health\":\"ok\"}]}],\"count\":2}");
    run r = cli("nodes", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out,
                        "NAME    STATE    RACK  TYPE      GPUS  ALLOC  FREE  REASON\n"
                        "h100-0  up       r1    H100 SXM     3      1     1  gpu1: xid XID 79\n"
                        "l40s-0  drained  -     L40S         1      0     0  maintenance\n");
    run_free(&r);

    r = cli("top", "--once", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "Nodes: 1 up, 1 drained, 0 lost   GPUs: 1/4 allocated, 1 "
                                  "unhealthy"));
    assert_non_null(strstr(r.out, "[#x.]"));
    assert_non_null(strstr(r.out, "[-]"));
    run_free(&r);

    /* A GPU with MIG instances in use is partly allocated: 'm', and counted. */
    fake_server_canned(s, 200,
                       "{\"items\":[{\"name\":\"a30-0\",\"state\":\"up\",\"gpus\":["
                       "{\"index\":0,\"model\":\"A30\",\"health\":\"ok\",\"job\":0,"
                       "\"mig_busy\":2},{\"index\":1,\"model\":\"A30\",\"health\":\"ok\","
                       "\"job\":0,\"mig_busy\":0}]}],\"count\":1}");
    r = cli("top", "--once", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "GPUs: 1/2 allocated"));
    assert_non_null(strstr(r.out, "[m.]"));
    run_free(&r);
    fake_server_canned(
        s, 200,
        "{\"items\":[{\"name\":\"h100-0\",\"state\":\"up\",\"rack\":\"r1\",\"gpus\":["
        "{\"index\":0,\"model\":\"H100 SXM\",\"health\":\"ok\",\"job\":1},"
        "{\"index\":1,\"model\":\"H100 SXM\",\"health\":\"xid\",\"reason\":\"XID 79\"},"
        "{\"index\":2,\"model\":\"H100 SXM\",\"health\":\"ok\"}]},"
        "{\"name\":\"l40s-0\",\"state\":\"drained\",\"reason\":\"maintenance\",\"gpus\":["
        "{\"index\":0,\"model\":\"L40S\",\"health\":\"ok\"}]}],\"count\":2}");

    fake_server_echo(s);
    r = cli("drain", "h100-0", "--reason", "fan", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "Drained h100-0\n");
    run_free(&r);

    r = cli("tenants", "create", "ml", "--weight", "2", "--quota", "H100 SXM=16", "--quota",
            "A100=8", NULL);
    assert_int_equal(r.code, 0);
    json_t *last = fake_server_last(s);
    json_t *want = json_pack("{s:s,s:f,s:{s:i,s:i}}", "name", "ml", "weight", 2.0, "quotas",
                             "H100 SXM", 16, "A100", 8);
    assert_true(json_equal(json_object_get(last, "body"), want));
    json_decref(want);
    json_decref(last);
    run_free(&r);

    r = cli("tenants", "set", "ml", "--quota", "H100", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--quota: 'H100' is not TYPE=N"));
    run_free(&r);

    r = cli("tenants", "create", "a b", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "name 'a b'"));
    run_free(&r);
    r = cli("tenants", "delete", "ml", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "unknown action 'delete' (allowed: list, tree, create, set)"));
    run_free(&r);
    /* the tree's flags go into the body */
    fake_server_echo(s);
    r = cli("tenants", "create", "team-a1", "--parent", "dept-a", "--quota", "A100=2", "--limit",
            "A100=4", "--lend", "A100=1", NULL);
    assert_int_equal(r.code, 0);
    last = fake_server_last(s);
    want = json_pack("{s:s,s:s,s:{s:i},s:{s:i},s:{s:i}}", "name", "team-a1", "parent", "dept-a",
                     "quotas", "A100", 2, "limits", "A100", 4, "lending_limits", "A100", 1);
    assert_true(json_equal(json_object_get(last, "body"), want));
    json_decref(want);
    json_decref(last);
    run_free(&r);
    r = cli("tenants", "tree", "--lend", "A100=1", NULL);
    assert_int_equal(r.code, 2);
    run_free(&r);

    fake_server_canned(s, 201, "{\"id\":\"7\",\"token\":\"crl_newtoken\"}");
    r = cli("tokens", "create", "--role", "user", "--tenant", "ml", "--name", "alice", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "crl_newtoken\n");
    run_free(&r);
    r = cli("tokens", "create", "--role", "root", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--role: 'root' is not allowed (allowed: admin, user)"));
    run_free(&r);
    /* agents get node tokens at registration; the server refuses this role */
    r = cli("tokens", "create", "--role", "agent", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--role: 'agent' is not allowed"));
    run_free(&r);
    r = cli("tokens", "revoke", "x", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "'x' is not a token id"));
    run_free(&r);
    r = cli("tokens", "create", "--role", "user", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--tenant is required"));
    run_free(&r);

    r = cli("usage", "--by", "tenant,week", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--by: 'week' is not allowed (allowed: tenant, gpu_type, day"));
    run_free(&r);
    fake_server_canned(s, 200,
                       "{\"items\":[{\"tenant\":\"ml\",\"gpu_type\":\"*\",\"day\":\"*\","
                       "\"gpu_hours\":12.5,\"energy_kwh\":8.25,\"cost\":30}]}");
    r = cli("usage", "--by", "tenant", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "TENANT  GPU_HOURS  ENERGY_KWH   COST\n"
                               "ml          12.50        8.25  30.00\n");
    run_free(&r);
    /* elastic pools' node time bought for the tenant (issue 31): two more
     * columns where any was */
    fake_server_canned(s, 200,
                       "{\"items\":[{\"tenant\":\"ml\",\"gpu_type\":\"*\",\"day\":\"*\","
                       "\"gpu_hours\":1,\"energy_kwh\":0,\"cost\":0,\"cloud_gpu_hours\":2,"
                       "\"cloud_cost\":1.6}]}");
    r = cli("usage", "--by", "tenant", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out,
                        "TENANT  GPU_HOURS  ENERGY_KWH  COST  CLOUD_GPU_HOURS  CLOUD_COST\n"
                        "ml           1.00        0.00  0.00             2.00        1.60\n");
    run_free(&r);
    /* the idle share, as a table and as CSV; the tree level and period go
     * into the query */
    fake_server_canned(s, 200,
                       "{\"items\":[{\"tenant\":\"org,x\",\"gpu_type\":\"*\",\"day\":\"2026-12\","
                       "\"gpu_hours\":10,\"idle_gpu_hours\":2.5,\"idle_share\":0.25,"
                       "\"energy_kwh\":1,\"cost\":3}]}");
    r = cli("usage", "--by", "tenant,day", "--level", "1", "--period", "month", "--csv", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out,
                        "tenant,gpu_type,day,gpu_hours,idle_gpu_hours,idle_share,energy_kwh,cost,"
                        "cloud_gpu_hours,cloud_cost\n"
                        "\"org,x\",*,2026-12,10.000000,2.500000,0.250000,1.000000,3.000000,"
                        "0.000000,0.000000\n");
    json_t *q = fake_server_last(s);
    json_t *qq = json_object_get(q, "query");
    assert_string_equal(json_string_value(json_object_get(qq, "level")), "1");
    assert_string_equal(json_string_value(json_object_get(qq, "period")), "month");
    assert_string_equal(json_string_value(json_object_get(qq, "by")), "tenant,day");
    json_decref(q);
    run_free(&r);
    r = cli("usage", "--by", "tenant", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "IDLE_SHARE"));
    assert_non_null(strstr(r.out, "25.0%"));
    run_free(&r);
    fake_server_stop(s);
}

static void test_cmd_services(void **state)
{
    fake_server *s = start();
    run r = cli("services", "create", "chat", "--gpus", "1", "--gpu-type", "auto", "--min", "1",
                "--max", "4", "--concurrency", "4", "--ready-path", "/health", "--", "python",
                "serve.py", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "Created service chat\n");
    json_t *last = fake_server_last(s);
    json_t *want =
        json_pack("{s:s,s:[s,s],s:s,s:s,s:i,s:i,s:i,s:{s:f}}", "name", "chat", "command", "python",
                  "serve.py", "gpu_type", "auto", "ready_path", "/health", "gpus", 1,
                  "min_replicas", 1, "max_replicas", 4, "target", "concurrency", 4.0);
    assert_true(json_equal(json_object_get(last, "body"), want));
    json_decref(want);
    json_decref(last);
    run_free(&r);

    /* --model and --precision: the advisor's hints, as submit sends them */
    r = cli("services", "create", "chat2", "--gpu-type", "auto", "--model", "llama-3.1-8b",
            "--precision", "fp8", "--params", "8b", "--", "serve", NULL);
    assert_int_equal(r.code, 0);
    last = fake_server_last(s);
    want = json_pack("{s:s,s:s,s:f}", "name", "llama-3.1-8b", "precision", "fp8", "params", 8e9);
    assert_true(json_equal(json_object_get(json_object_get(last, "body"), "model"), want));
    json_decref(want);
    json_decref(last);
    run_free(&r);
    r = cli("services", "create", "chat2", "--precision", "fp7", "--", "serve", NULL);
    assert_int_equal(r.code, 2);
    run_free(&r);

    r = cli("services", "scale", "chat", "3", NULL);
    assert_int_equal(r.code, 0);
    last = fake_server_last(s);
    assert_string_equal(json_string_value(json_object_get(last, "path")),
                        "/v1/services/chat/scale");
    json_decref(last);
    run_free(&r);

    r = cli("services", "create", "chat", "--min", "5", "--max", "2", "--", "x", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--min 5 is above --max 2"));
    run_free(&r);
    r = cli("services", "create", "chat", "--gpus", "0", "--", "x", NULL);
    assert_int_equal(r.code, 2); /* the server refuses 0 GPUs per replica too */
    assert_non_null(strstr(r.err, "--gpus"));
    run_free(&r);
    r = cli("services", "scale", "chat", "many", NULL);
    assert_int_equal(r.code, 2);
    run_free(&r);
    r = cli("services", "show", "chat", "--gpus", "2", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--gpus goes with create or update only"));
    run_free(&r);

    fake_server_canned(s, 200,
                       "{\"items\":[{\"name\":\"chat\",\"tenant\":\"ml\",\"gpus\":1,\"gpu_type\":"
                       "\"L40S\",\"min_replicas\":1,\"max_replicas\":4,\"target\":{"
                       "\"concurrency\":4},\"replicas\":[{\"node\":\"l40s-0\",\"ready\":true},"
                       "{\"node\":\"l40s-1\",\"ready\":false}]}]}");
    r = cli("services", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "NAME  TENANT  GPUS  TYPE  READY  MIN  MAX  TARGET\n"
                               "chat  ml         1  L40S    1/2    1    4  concurrency 4\n");
    run_free(&r);
    fake_server_stop(s);
}

static void test_cmd_logs(void **state)
{
    fake_server *s = start();
    fake_server_canned(s, 200, "hello\nworld\n");
    run r = cli("logs", "5", "--stderr", "--offset", "7", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "hello\nworld\n");
    json_t *last = fake_server_last(s);
    const json_t *q = json_object_get(last, "query");
    assert_null(json_object_get(q, "follow"));
    assert_string_equal(json_string_value(json_object_get(q, "stream")), "stderr");
    assert_string_equal(json_string_value(json_object_get(q, "offset")), "7");
    assert_string_equal(json_string_value(json_object_get(last, "path")), "/v1/jobs/5/logs");
    json_decref(last);
    run_free(&r);

    /* follow: after the bytes, the job's state decides whether to go on
     * (this server's job document has no state: it stops) */
    unsigned before = fake_server_requests(s);
    r = cli("logs", "5", "-f", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "hello\nworld\n");
    assert_int_equal(fake_server_requests(s) - before, 2);
    last = fake_server_last(s);
    assert_string_equal(json_string_value(json_object_get(last, "path")), "/v1/jobs/5");
    json_decref(last);
    run_free(&r);

    /* a job that never ran: the server's message, exit 1 */
    fake_server_canned(s, 409,
                       "{\"error\":\"CR_ECONFLICT\",\"message\":\"job 5 has not run yet: no "
                       "logs\"}");
    r = cli("logs", "5", NULL);
    assert_int_equal(r.code, 1);
    assert_string_equal(r.err, "corral logs: job 5 has not run yet: no logs\n");
    run_free(&r);
    fake_server_stop(s);
}

static void test_server_and_token_resolution(void **state)
{
    fake_server *s = start();
    /* flags beat the environment */
    unsetenv("CORRAL_SERVER");
    run r = cli("jobs", "--server", fake_server_url(s), "--token", "crl_flag", NULL);
    assert_int_equal(r.code, 0);
    json_t *last = fake_server_last(s);
    assert_string_equal(json_string_value(json_object_get(last, "auth")), "Bearer crl_flag");
    json_decref(last);
    run_free(&r);

    /* the config file, when neither flag nor environment says */
    char path[] = "/tmp/corral-cli-test-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "# test\nserver = %s\ntoken = crl_cfg\n", fake_server_url(s));
    fclose(f);
    unsetenv("CORRAL_TOKEN");
    setenv("CORRAL_CONFIG", path, 1);
    r = cli("jobs", NULL);
    assert_int_equal(r.code, 0);
    last = fake_server_last(s);
    assert_string_equal(json_string_value(json_object_get(last, "auth")), "Bearer crl_cfg");
    json_decref(last);
    run_free(&r);

    /* token_file: the first line of a file */
    char tpath[] = "/tmp/corral-cli-token-XXXXXX";
    int tfd = mkstemp(tpath);
    assert_true(tfd >= 0);
    FILE *tf = fdopen(tfd, "w");
    fprintf(tf, "  crl_fromfile  \nignored\n");
    fclose(tf);
    f = fopen(path, "w");
    fprintf(f, "server = \"%s\"\ntoken_file = %s\n", fake_server_url(s), tpath);
    fclose(f);
    r = cli("jobs", NULL);
    assert_int_equal(r.code, 0);
    last = fake_server_last(s);
    assert_string_equal(json_string_value(json_object_get(last, "auth")), "Bearer crl_fromfile");
    json_decref(last);
    run_free(&r);
    unlink(tpath);

    /* the default file: $XDG_CONFIG_HOME/corral/config */
    char xdg[] = "/tmp/corral-cli-xdg-XXXXXX";
    assert_non_null(mkdtemp(xdg));
    char dir[128], file[160];
    snprintf(dir, sizeof dir, "%s/corral", xdg);
    snprintf(file, sizeof file, "%s/config", dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    f = fopen(file, "w");
    fprintf(f, "server = %s\ntoken = crl_xdg\n", fake_server_url(s));
    fclose(f);
    unsetenv("CORRAL_CONFIG");
    setenv("XDG_CONFIG_HOME", xdg, 1);
    r = cli("jobs", NULL);
    assert_int_equal(r.code, 0);
    last = fake_server_last(s);
    assert_string_equal(json_string_value(json_object_get(last, "auth")), "Bearer crl_xdg");
    json_decref(last);
    run_free(&r);
    unlink(file);
    rmdir(dir);
    rmdir(xdg);
    unsetenv("XDG_CONFIG_HOME");
    setenv("CORRAL_CONFIG", path, 1);

    /* a broken config file: line-numbered error, exit 2 */
    f = fopen(path, "w");
    fprintf(f, "server = %s\nbogus = 1\n", fake_server_url(s));
    fclose(f);
    r = cli("jobs", NULL);
    assert_int_equal(r.code, 2);
    char want[128];
    snprintf(want, sizeof want, "%s:2: unknown key 'bogus'", path);
    assert_non_null(strstr(r.err, want));
    run_free(&r);
    unlink(path);

    /* an explicit config file that does not exist is an error */
    r = cli("jobs", "--config", "/nonexistent/corral.conf", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "cannot read config file /nonexistent/corral.conf"));
    run_free(&r);

    /* a bad server URL from the environment names its source */
    setenv("CORRAL_CONFIG", "/dev/null", 1);
    setenv("CORRAL_SERVER", "localhost:8620", 1);
    r = cli("jobs", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "CORRAL_SERVER: 'localhost:8620' is not an http://"));
    run_free(&r);

    /* nobody listening: exit 3 */
    char url[64];
    snprintf(url, sizeof url, "%s", fake_server_url(s));
    fake_server_stop(s);
    setenv("CORRAL_SERVER", url, 1);
    r = cli("jobs", NULL);
    assert_int_equal(r.code, 3);
    assert_non_null(strstr(r.err, "corral jobs: cannot reach the server at "));
    run_free(&r);
    r = cli("top", "--once", NULL);
    assert_int_equal(r.code, 3);
    run_free(&r);
}

static void test_unknown_command_and_help(void **state)
{
    run r = cli("frobnicate", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "corral: unknown command 'frobnicate'"));
    assert_non_null(strstr(r.err, "submit"));
    run_free(&r);
    r = cli("submit", "--help", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "usage: corral submit"));
    assert_non_null(strstr(r.out, "--kind KIND"));
    assert_non_null(strstr(r.out, "(allowed: pretrain, finetune, inference, visual, hpc, batch)"));
    run_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_args_ok),
        cmocka_unit_test(test_args_stop_at_positional),
        cmocka_unit_test(test_args_errors),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_json_text),
        cmocka_unit_test(test_time),
        cmocka_unit_test(test_cmd_submit),
        cmocka_unit_test(test_cmd_submit_script),
        cmocka_unit_test(test_cmd_jobs),
        cmocka_unit_test(test_cmd_show_and_actions),
        cmocka_unit_test(test_cmd_admin),
        cmocka_unit_test(test_cmd_services),
        cmocka_unit_test(test_cmd_logs),
        cmocka_unit_test(test_server_and_token_resolution),
        cmocka_unit_test(test_unknown_command_and_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
