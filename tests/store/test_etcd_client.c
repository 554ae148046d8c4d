/*
 * test_etcd_client.c - the etcd v3 JSON client against a real etcd: puts
 * and ranges (prefix, limit, count/keys only, descending), deletes, txns
 * with each compare target and both branches, leases, endpoint failover,
 * limits refused locally; and the reply parsers on a corpus of good and
 * broken replies.
 */
#include "cr_etcd.h"
#include "etcd_harness.h"

#include "cr_error.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static etcd_proc etcd;

static int group_setup(void **state)
{
    return etcd_start(&etcd);
}

static int group_teardown(void **state)
{
    etcd_stop(&etcd);
    return 0;
}

static cr_etcd *client(void)
{
    cr_etcd *e = NULL;
    assert_int_equal(cr_etcd_new(etcd.url, NULL, &e), 0);
    return e;
}

static void test_endpoints(void **state)
{
    cr_etcd *e = NULL;
    assert_int_equal(cr_etcd_new("", NULL, &e), CR_EINVAL);
    assert_int_equal(cr_etcd_new("ftp://x:1", NULL, &e), CR_EINVAL);
    assert_non_null(strstr(cr_etcd_last_error(), "https://HOST:PORT"));
    assert_int_equal(cr_etcd_new("https://x:1,http://y:2", NULL, &e), CR_EINVAL);
    assert_non_null(strstr(cr_etcd_last_error(), "mix http:// and https://"));
    assert_int_equal(cr_etcd_new("https://x:1,https://y:2", NULL, &e), 0);
    assert_true(cr_etcd_tls(e));
    cr_etcd_free(e);
    /* TLS options are for https endpoints; a user needs a loaded password */
    cr_etcd_sec sec;
    memset(&sec, 0, sizeof sec);
    char err[600];
    assert_int_equal(cr_etcd_sec_set(&sec, "etcd-cacert", "/x/ca.pem", err, sizeof err), 0);
    cr_etcd_opts o = {.sec = &sec};
    assert_int_equal(cr_etcd_new("http://x:1", &o, &e), CR_EINVAL);
    assert_non_null(strstr(cr_etcd_last_error(), "--etcd-cacert"));
    memset(&sec, 0, sizeof sec);
    assert_int_equal(cr_etcd_sec_set(&sec, "etcd-user", "corral", err, sizeof err), 0);
    assert_int_equal(cr_etcd_new("https://x:1", &o, &e), CR_EINVAL);
    assert_int_equal(cr_etcd_new("http://a:1,,http://b:2", NULL, &e), CR_EINVAL);
    assert_int_equal(cr_etcd_new("http://a b:1", NULL, &e), CR_EINVAL);
    assert_int_equal(cr_etcd_new("http://a:1/,http://b:2", NULL, &e), 0);
    assert_string_equal(cr_etcd_endpoint(e), "http://a:1");
    cr_etcd_free(e);
    char end[16];
    cr_etcd_prefix_end("/a/", end, sizeof end);
    assert_string_equal(end, "/a0");
    cr_etcd_prefix_end("a\xff", end, sizeof end);
    assert_string_equal(end, "b");
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

/* The --etcd-* options: pairs, PEM files, the password file's mode and
 * form; never the password in a message. */
static void test_sec(void **state)
{
    char dir[] = "/tmp/corral-etcdsec-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char ca[64], key[64], pw[64], open_pw[64], long_pw[64], two[64];
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    snprintf(key, sizeof key, "%s/k.pem", dir);
    snprintf(pw, sizeof pw, "%s/pw", dir);
    snprintf(open_pw, sizeof open_pw, "%s/open", dir);
    snprintf(long_pw, sizeof long_pw, "%s/long", dir);
    snprintf(two, sizeof two, "%s/two", dir);
    write_file(ca, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", 0644);
    write_file(key, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", 0600);
    write_file(pw, "s3cret-Pw\n", 0600);
    write_file(open_pw, "s3cret-Pw\n", 0644);
    char big[CR_ETCD_PASSWORD_MAX + 8];
    memset(big, 'p', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    write_file(long_pw, big, 0600);
    write_file(two, "line1\nline2\n", 0600);

    cr_etcd_sec s;
    char err[600];
    memset(&s, 0, sizeof s);
    assert_int_equal(cr_etcd_sec_set(&s, "etcd-nope", "x", err, sizeof err), CR_ENOENT);
    assert_int_equal(cr_etcd_sec_set(&s, "etcd-user", "", err, sizeof err), CR_EINVAL);
    assert_int_equal(cr_etcd_sec_set(&s, "etcd-user", "a b", err, sizeof err), CR_EINVAL);
    assert_false(cr_etcd_sec_any(&s));
    /* --etcd-cert without --etcd-key */
    assert_int_equal(cr_etcd_sec_set(&s, "etcd-cert", ca, err, sizeof err), 0);
    assert_true(cr_etcd_sec_any(&s));
    assert_int_equal(cr_etcd_sec_load(&s, err, sizeof err), CR_EINVAL);
    assert_non_null(strstr(err, "--etcd-key"));
    /* a key file that is a certificate; a certificate that is a key */
    assert_int_equal(cr_etcd_sec_set(&s, "etcd-key", ca, err, sizeof err), 0);
    assert_int_equal(cr_etcd_sec_load(&s, err, sizeof err), CR_EINVAL);
    assert_non_null(strstr(err, "--etcd-key"));
    assert_int_equal(cr_etcd_sec_set(&s, "etcd-key", key, err, sizeof err), 0);
    assert_int_equal(cr_etcd_sec_set(&s, "etcd-cacert", key, err, sizeof err), 0);
    assert_int_equal(cr_etcd_sec_load(&s, err, sizeof err), CR_EINVAL);
    assert_non_null(strstr(err, "--etcd-cacert"));
    assert_int_equal(cr_etcd_sec_set(&s, "etcd-cacert", "/nonexistent/ca.pem", err, sizeof err), 0);
    assert_int_equal(cr_etcd_sec_load(&s, err, sizeof err), CR_EIO);
    assert_non_null(strstr(err, "/nonexistent/ca.pem"));
    assert_int_equal(cr_etcd_sec_set(&s, "etcd-cacert", ca, err, sizeof err), 0);
    /* a user needs a password file and the reverse */
    assert_int_equal(cr_etcd_sec_set(&s, "etcd-user", "corral", err, sizeof err), 0);
    assert_int_equal(cr_etcd_sec_load(&s, err, sizeof err), CR_EINVAL);
    assert_non_null(strstr(err, "--etcd-password-file"));
    /* world-readable, too long, two lines: refused, the file named */
    assert_int_equal(cr_etcd_sec_set(&s, "etcd-password-file", open_pw, err, sizeof err), 0);
    assert_int_equal(cr_etcd_sec_load(&s, err, sizeof err), CR_EPERM);
    assert_non_null(strstr(err, open_pw));
    assert_non_null(strstr(err, "every user"));
    assert_null(strstr(err, "s3cret"));
    assert_int_equal(cr_etcd_sec_set(&s, "etcd-password-file", long_pw, err, sizeof err), 0);
    assert_int_equal(cr_etcd_sec_load(&s, err, sizeof err), CR_EINVAL);
    assert_int_equal(cr_etcd_sec_set(&s, "etcd-password-file", two, err, sizeof err), 0);
    assert_int_equal(cr_etcd_sec_load(&s, err, sizeof err), CR_EINVAL);
    assert_null(strstr(err, "line1"));
    /* good: the first line, without its newline */
    assert_int_equal(cr_etcd_sec_set(&s, "etcd-password-file", pw, err, sizeof err), 0);
    assert_int_equal(cr_etcd_sec_load(&s, err, sizeof err), 0);
    assert_string_equal(s.password, "s3cret-Pw");
    cr_etcd *e = NULL;
    cr_etcd_opts o = {.sec = &s};
    assert_int_equal(cr_etcd_new("http://x:1", &o, &e), CR_EINVAL); /* TLS files, http */
    assert_int_equal(cr_etcd_new("https://x:1", &o, &e), 0);
    cr_etcd_free(e);
    cr_etcd_sec_wipe(&s);
    assert_string_equal(s.password, "");
    /* a user over http (no TLS files) is allowed: the controller warns */
    cr_etcd_sec u;
    memset(&u, 0, sizeof u);
    assert_int_equal(cr_etcd_sec_set(&u, "etcd-user", "corral", err, sizeof err), 0);
    assert_int_equal(cr_etcd_sec_set(&u, "etcd-password-file", pw, err, sizeof err), 0);
    assert_int_equal(cr_etcd_sec_load(&u, err, sizeof err), 0);
    o.sec = &u;
    assert_int_equal(cr_etcd_new("http://x:1", &o, &e), 0);
    cr_etcd_free(e);
    cr_etcd_sec_wipe(&u);
    const char *files[] = {ca, key, pw, open_pw, long_pw, two};
    for (size_t i = 0; i < 6; i++) {
        unlink(files[i]);
    }
    rmdir(dir);
}

/* On an etcd with authentication off, a client given a user goes on
 * without a token (as etcd's own client does). */
static void test_auth_off(void **state)
{
    char dir[] = "/tmp/corral-etcdsec-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char pw[64], err[600];
    snprintf(pw, sizeof pw, "%s/pw", dir);
    write_file(pw, "whatever\n", 0600);
    cr_etcd_sec u;
    memset(&u, 0, sizeof u);
    assert_int_equal(cr_etcd_sec_set(&u, "etcd-user", "corral", err, sizeof err), 0);
    assert_int_equal(cr_etcd_sec_set(&u, "etcd-password-file", pw, err, sizeof err), 0);
    assert_int_equal(cr_etcd_sec_load(&u, err, sizeof err), 0);
    cr_etcd *e = NULL;
    cr_etcd_opts o = {.sec = &u};
    assert_int_equal(cr_etcd_new(etcd.url, &o, &e), 0);
    assert_int_equal(cr_etcd_put(e, "/t/authoff", "v", 1, 0, NULL), 0);
    bool down = true;
    assert_int_equal(cr_etcd_check(etcd.url, &u, "/t/", &down, err, sizeof err), 0);
    assert_false(down);
    cr_etcd_free(e);
    cr_etcd_sec_wipe(&u);
    unlink(pw);
    rmdir(dir);
}

static void test_put_range(void **state)
{
    cr_etcd *e = client();
    int64_t rev1 = 0, rev2 = 0;
    assert_int_equal(cr_etcd_put(e, "/t/r/a", "one", 3, 0, &rev1), 0);
    assert_true(rev1 > 0);
    /* a value with a NUL and high bytes survives */
    assert_int_equal(cr_etcd_put(e, "/t/r/b", "x\0y\xff", 4, 0, &rev2), 0);
    assert_int_equal(rev2, rev1 + 1);
    assert_int_equal(cr_etcd_put(e, "/t/r/c", "", 0, 0, NULL), 0);
    assert_int_equal(cr_etcd_put(e, "/t/rx", "outside", 7, 0, NULL), 0);

    cr_etcd_range_result r;
    int64_t rev = 0;
    cr_etcd_range_req q = {.key = "/t/r/", .prefix = true};
    assert_int_equal(cr_etcd_range(e, &q, &r, &rev), 0);
    assert_int_equal(r.n, 3);
    assert_int_equal(r.count, 3);
    assert_false(r.more);
    assert_true(rev >= rev2 + 2);
    assert_string_equal(r.kvs[0].key, "/t/r/a");
    assert_memory_equal(r.kvs[0].value, "one", 3);
    assert_int_equal(r.kvs[0].create_revision, rev1);
    assert_int_equal(r.kvs[0].mod_revision, rev1);
    assert_int_equal(r.kvs[0].version, 1);
    assert_int_equal(r.kvs[1].value_len, 4);
    assert_memory_equal(r.kvs[1].value, "x\0y\xff", 4);
    assert_int_equal(r.kvs[2].value_len, 0);
    cr_etcd_range_result_fini(&r);

    /* limit + descending order + more */
    q.limit = 2;
    q.sort = CR_ETCD_SORT_DESCEND;
    assert_int_equal(cr_etcd_range(e, &q, &r, NULL), 0);
    assert_int_equal(r.n, 2);
    assert_true(r.more);
    assert_int_equal(r.count, 3);
    assert_string_equal(r.kvs[0].key, "/t/r/c");
    cr_etcd_range_result_fini(&r);

    /* count only, keys only, explicit range end */
    cr_etcd_range_req qc = {.key = "/t/r/", .prefix = true, .count_only = true};
    assert_int_equal(cr_etcd_range(e, &qc, &r, NULL), 0);
    assert_int_equal(r.n, 0);
    assert_int_equal(r.count, 3);
    cr_etcd_range_result_fini(&r);
    cr_etcd_range_req qk = {.key = "/t/r/b", .range_end = "/t/r/z", .keys_only = true};
    assert_int_equal(cr_etcd_range(e, &qk, &r, NULL), 0);
    assert_int_equal(r.n, 2);
    assert_string_equal(r.kvs[0].key, "/t/r/b");
    assert_int_equal(r.kvs[0].value_len, 0);
    cr_etcd_range_result_fini(&r);

    /* an old revision still reads the old value */
    assert_int_equal(cr_etcd_put(e, "/t/r/a", "two", 3, 0, NULL), 0);
    cr_etcd_range_req qr = {.key = "/t/r/a", .revision = rev1};
    assert_int_equal(cr_etcd_range(e, &qr, &r, NULL), 0);
    assert_int_equal(r.n, 1);
    assert_memory_equal(r.kvs[0].value, "one", 3);
    cr_etcd_range_result_fini(&r);

    /* a missing key: no rows, not an error */
    cr_etcd_range_req qm = {.key = "/t/none"};
    assert_int_equal(cr_etcd_range(e, &qm, &r, NULL), 0);
    assert_int_equal(r.n, 0);
    cr_etcd_range_result_fini(&r);

    int64_t deleted = 0;
    assert_int_equal(cr_etcd_delete(e, "/t/r/", true, &deleted, NULL), 0);
    assert_int_equal(deleted, 3);
    assert_int_equal(cr_etcd_delete(e, "/t/rx", false, &deleted, NULL), 0);
    assert_int_equal(deleted, 1);
    cr_etcd_free(e);
}

static void test_txn(void **state)
{
    cr_etcd *e = client();
    cr_etcd_txn_result t;
    /* create-if-absent */
    cr_etcd_cmp absent = {.target = CR_ETCD_CREATE, .key = "/t/x/lock", .number = 0};
    cr_etcd_op put = {.kind = CR_ETCD_OP_PUT, .key = "/t/x/lock", .value = "me", .value_len = 2};
    cr_etcd_op get = {.kind = CR_ETCD_OP_GET, .key = "/t/x/lock"};
    assert_int_equal(cr_etcd_txn(e, &absent, 1, &put, 1, &get, 1, &t), 0);
    assert_true(t.succeeded);
    int64_t created = t.revision;
    cr_etcd_txn_result_fini(&t);
    /* a second time the compare fails and the failure branch reads it */
    assert_int_equal(cr_etcd_txn(e, &absent, 1, &put, 1, &get, 1, &t), 0);
    assert_false(t.succeeded);
    assert_int_equal(t.nranges, 1);
    assert_int_equal(t.ranges[0].n, 1);
    assert_int_equal(t.ranges[0].kvs[0].create_revision, created);
    assert_memory_equal(t.ranges[0].kvs[0].value, "me", 2);
    cr_etcd_txn_result_fini(&t);

    /* the fence: writes carry create_revision(lock) == created */
    cr_etcd_cmp fence = {.target = CR_ETCD_CREATE, .key = "/t/x/lock", .number = created};
    cr_etcd_op w[2] = {{.kind = CR_ETCD_OP_PUT, .key = "/t/x/a", .value = "1", .value_len = 1},
                       {.kind = CR_ETCD_OP_PUT, .key = "/t/x/b", .value = "2", .value_len = 1}};
    assert_int_equal(cr_etcd_txn(e, &fence, 1, w, 2, NULL, 0, &t), 0);
    assert_true(t.succeeded);
    cr_etcd_txn_result_fini(&t);
    /* someone re-creates the lock: the old fence no longer holds */
    assert_int_equal(cr_etcd_delete(e, "/t/x/lock", false, NULL, NULL), 0);
    assert_int_equal(cr_etcd_put(e, "/t/x/lock", "other", 5, 0, NULL), 0);
    assert_int_equal(cr_etcd_txn(e, &fence, 1, w, 2, NULL, 0, &t), 0);
    assert_false(t.succeeded);
    cr_etcd_txn_result_fini(&t);

    /* value, mod and version compares */
    cr_etcd_cmp cv[3] = {
        {.target = CR_ETCD_VALUE, .key = "/t/x/a", .value = "1", .value_len = 1},
        {.target = CR_ETCD_VERSION, .key = "/t/x/a", .number = 1},
        {.target = CR_ETCD_MOD, .key = "/t/x/a", .result = CR_ETCD_GREATER, .number = 0},
    };
    assert_int_equal(cr_etcd_txn(e, cv, 3, NULL, 0, NULL, 0, &t), 0);
    assert_true(t.succeeded);
    cr_etcd_txn_result_fini(&t);
    cv[0].value = "2";
    assert_int_equal(cr_etcd_txn(e, cv, 3, NULL, 0, NULL, 0, &t), 0);
    assert_false(t.succeeded);
    cr_etcd_txn_result_fini(&t);

    /* etcd refuses a duplicate key; over 128 ops is refused before sending */
    cr_etcd_op dup[2] = {w[0], w[0]};
    assert_int_equal(cr_etcd_txn(e, NULL, 0, dup, 2, NULL, 0, &t), CR_EINVAL);
    assert_non_null(strstr(cr_etcd_last_error(), "duplicate"));
    cr_etcd_op many[CR_ETCD_MAX_TXN_OPS + 1];
    for (size_t i = 0; i < CR_ETCD_MAX_TXN_OPS + 1; i++) {
        many[i] = w[0];
    }
    assert_int_equal(cr_etcd_txn(e, NULL, 0, many, CR_ETCD_MAX_TXN_OPS + 1, NULL, 0, &t),
                     CR_ETOOBIG);
    /* a 2 MiB value is over etcd's request limit */
    size_t big = 2u << 20;
    char *v = calloc(1, big);
    cr_etcd_op bigop = {.kind = CR_ETCD_OP_PUT, .key = "/t/x/big", .value = v, .value_len = big};
    assert_int_equal(cr_etcd_txn(e, NULL, 0, &bigop, 1, NULL, 0, &t), CR_ETOOBIG);
    free(v);
    assert_int_equal(cr_etcd_delete(e, "/t/x/", true, NULL, NULL), 0);
    cr_etcd_free(e);
}

static void test_lease(void **state)
{
    cr_etcd *e = client();
    int64_t id = 0, ttl = 0;
    assert_int_equal(cr_etcd_lease_grant(e, 0, &id, &ttl), CR_EINVAL);
    assert_int_equal(cr_etcd_lease_grant(e, 30, &id, &ttl), 0);
    assert_true(id != 0);
    assert_int_equal(ttl, 30);
    assert_int_equal(cr_etcd_lease_keepalive(e, id, &ttl), 0);
    assert_int_equal(ttl, 30);
    assert_int_equal(cr_etcd_lease_ttl(e, id, &ttl), 0);
    assert_true(ttl > 0 && ttl <= 30);
    assert_int_equal(cr_etcd_put(e, "/t/l/leader", "me", 2, id, NULL), 0);
    cr_etcd_range_result r;
    cr_etcd_range_req q = {.key = "/t/l/leader"};
    assert_int_equal(cr_etcd_range(e, &q, &r, NULL), 0);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.kvs[0].lease, id);
    cr_etcd_range_result_fini(&r);
    /* a lease compare */
    cr_etcd_cmp lc = {.target = CR_ETCD_LEASE, .key = "/t/l/leader", .number = id};
    cr_etcd_txn_result t;
    assert_int_equal(cr_etcd_txn(e, &lc, 1, NULL, 0, NULL, 0, &t), 0);
    assert_true(t.succeeded);
    cr_etcd_txn_result_fini(&t);
    /* revoking deletes the attached key; the lease is gone afterwards */
    assert_int_equal(cr_etcd_lease_revoke(e, id), 0);
    assert_int_equal(cr_etcd_range(e, &q, &r, NULL), 0);
    assert_int_equal(r.n, 0);
    cr_etcd_range_result_fini(&r);
    assert_int_equal(cr_etcd_lease_keepalive(e, id, &ttl), CR_ENOENT);
    assert_int_equal(cr_etcd_lease_revoke(e, id), CR_ENOENT);
    assert_non_null(strstr(cr_etcd_last_error(), "lease not found"));
    assert_int_equal(cr_etcd_lease_ttl(e, id, &ttl), CR_ENOENT);
    /* a lease of 1 s that nobody keeps alive expires */
    assert_int_equal(cr_etcd_lease_grant(e, 1, &id, NULL), 0);
    int64_t deadline = cr_mono_ns() + 30 * CR_NS_PER_SEC;
    int rc = 0;
    while ((rc = cr_etcd_lease_ttl(e, id, &ttl)) == 0 && cr_mono_ns() < deadline) {
        usleep(100 * 1000);
    }
    assert_int_equal(rc, CR_ENOENT);
    cr_etcd_free(e);
}

static void test_failover(void **state)
{
    int dead = free_port();
    char eps[200];
    snprintf(eps, sizeof eps, "http://127.0.0.1:%d,%s", dead, etcd.url);
    cr_etcd *e = NULL;
    assert_int_equal(cr_etcd_new(eps, NULL, &e), 0);
    assert_int_equal(cr_etcd_put(e, "/t/f", "v", 1, 0, NULL), 0);
    assert_string_equal(cr_etcd_endpoint(e), etcd.url); /* sticks to the one that answered */
    assert_int_equal(cr_etcd_delete(e, "/t/f", false, NULL, NULL), 0);
    cr_etcd_free(e);
    /* nothing answers: CR_EUNAVAIL, quickly, naming the endpoint */
    snprintf(eps, sizeof eps, "http://127.0.0.1:%d,http://127.0.0.1:%d", dead, dead);
    cr_etcd_opts o = {.connect_timeout_ms = 300, .request_timeout_ms = 1000};
    assert_int_equal(cr_etcd_new(eps, &o, &e), 0);
    int64_t t0 = cr_mono_ns();
    assert_int_equal(cr_etcd_put(e, "/t/f", "v", 1, 0, NULL), CR_EUNAVAIL);
    assert_true(cr_mono_ns() - t0 < 10 * CR_NS_PER_SEC);
    assert_non_null(strstr(cr_etcd_last_error(), "none of 2 endpoints"));
    cr_etcd_free(e);
}

/* Replies as the gateway writes them, and broken ones: each parses to the
 * expected code and never crashes. */
static void test_parse_corpus(void **state)
{
    static const struct {
        const char *body;
        int rc;
        size_t n;
    } ranges[] = {
        {"{\"header\":{\"revision\":\"2\"},\"kvs\":[{\"key\":\"Zm9v\",\"create_revision\":\"2\","
         "\"mod_revision\":\"2\",\"version\":\"1\",\"value\":\"YmFy\"}],\"count\":\"1\"}",
         0, 1},
        {"{\"header\":{\"revision\":\"2\"}}", 0, 0},
        {"{\"header\":{\"revision\":2},\"kvs\":[{\"key\":\"YQ==\"}],\"count\":1}", 0, 1},
        {"{\"header\":{\"revision\":\"x\"}}", CR_EPARSE, 0},
        {"{\"kvs\":[]}", CR_EPARSE, 0},
        {"{\"header\":{},\"kvs\":{}}", CR_EPARSE, 0},
        {"{\"header\":{},\"kvs\":[1]}", CR_EPARSE, 0},
        {"{\"header\":{},\"kvs\":[{\"key\":\"!!!!\"}]}", CR_EPARSE, 0},
        {"{\"header\":{},\"kvs\":[{\"key\":\"YQ\"}]}", CR_EPARSE, 0},
        {"{\"header\":{},\"kvs\":[{\"key\":\"YQBi\"}]}", CR_EPARSE, 0}, /* NUL in a key */
        {"{\"header\":{},\"kvs\":[{\"key\":\"YQ==\",\"value\":7}]}", CR_EPARSE, 0},
        {"{\"header\":{},\"count\":\"99999999999999999999999\"}", CR_EPARSE, 0},
        {"[]", CR_EPARSE, 0},
        {"", CR_EPARSE, 0},
        {"{\"header\":", CR_EPARSE, 0},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        cr_etcd_range_result r;
        int64_t rev = -1;
        int rc = cr__etcd_parse_range(ranges[i].body, strlen(ranges[i].body), &r, &rev);
        if (rc != ranges[i].rc) {
            fail_msg("range corpus %zu: rc %d, want %d", i, rc, ranges[i].rc);
        }
        if (rc == 0) {
            assert_int_equal(r.n, ranges[i].n);
            assert_int_equal(rev, 2);
            cr_etcd_range_result_fini(&r);
        } else {
            assert_true(cr_etcd_last_error()[0] != '\0');
        }
    }
    static const struct {
        const char *body;
        int rc;
        bool ok;
    } txns[] = {
        {"{\"header\":{\"revision\":\"3\"},\"succeeded\":true,\"responses\":[{\"response_put\":"
         "{\"header\":{\"revision\":\"3\"}}},{\"response_range\":{\"kvs\":[{\"key\":\"Zm9v\"}],"
         "\"count\":\"1\"}}]}",
         0, true},
        {"{\"header\":{\"revision\":\"3\"}}", 0, false},
        {"{\"header\":{},\"responses\":{}}", CR_EPARSE, false},
        {"{\"header\":{},\"responses\":[7]}", CR_EPARSE, false},
        {"{\"header\":{},\"responses\":[{\"response_range\":[]}]}", CR_EPARSE, false},
        {"{\"header\":{},\"responses\":[{\"response_range\":{\"kvs\":[{\"key\":5}]}}]}", CR_EPARSE,
         false},
        {"nonsense", CR_EPARSE, false},
    };
    for (size_t i = 0; i < sizeof txns / sizeof txns[0]; i++) {
        cr_etcd_txn_result t;
        int rc = cr__etcd_parse_txn(txns[i].body, strlen(txns[i].body), &t);
        if (rc != txns[i].rc) {
            fail_msg("txn corpus %zu: rc %d, want %d", i, rc, txns[i].rc);
        }
        if (rc == 0) {
            assert_int_equal(t.succeeded, txns[i].ok);
            cr_etcd_txn_result_fini(&t);
        }
    }
    static const struct {
        const char *body;
        int status, rc;
        bool retry;
    } errs[] = {
        {"{\"error\":\"etcdserver: requested lease not found\",\"code\":5}", 400, CR_ENOENT, false},
        {"{\"error\":\"etcdserver: too many operations in txn request\",\"code\":3}", 400,
         CR_ETOOBIG, false},
        {"{\"error\":\"etcdserver: no leader\",\"code\":14}", 503, CR_EUNAVAIL, true},
        {"{\"error\":\"etcdserver: duplicate key given in txn request\",\"code\":3}", 400,
         CR_EINVAL, false},
        {"{\"message\":\"mvcc: required revision has been compacted\",\"code\":11}", 400,
         CR_ECONFLICT, false},
        {"Not Found", 404, CR_EPARSE, false},
        {"", 502, CR_EPARSE, true},
        /* authentication and TLS refusals (never retried elsewhere) */
        {"{\"error\":\"etcdserver: invalid auth token\",\"code\":16}", 401, CR_EAUTH, false},
        {"{\"error\":\"etcdserver: revision of auth store is old\",\"code\":3}", 400, CR_EAUTH,
         false},
        {"{\"error\":\"etcdserver: user name is empty\",\"code\":3}", 400, CR_EAUTH, false},
        {"{\"error\":\"etcdserver: authentication failed, invalid user ID or password\","
         "\"code\":3}",
         400, CR_EAUTH, false},
        {"{\"error\":\"etcdserver: permission denied\",\"code\":7}", 400, CR_EPERM, false},
        {"{\"error\":\"etcdserver: authentication is not enabled\",\"code\":9}", 400, CR_ENOTSUP,
         false},
        {"CommonName of client sending a request against gateway will be ignored and not used as "
         "expected\n",
         400, CR_EAUTH, false},
        {"Client sent an HTTP request to an HTTPS server.\n", 400, CR_EINVAL, false},
    };
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
        bool retry = false;
        int rc = cr__etcd_parse_error(errs[i].body, strlen(errs[i].body), errs[i].status, &retry);
        if (rc != errs[i].rc || retry != errs[i].retry) {
            fail_msg("error corpus %zu: rc %d retry %d", i, rc, retry);
        }
    }
}

int main(void)
{
    const struct CMUnitTest offline[] = {
        cmocka_unit_test(test_endpoints),
        cmocka_unit_test(test_sec),
        cmocka_unit_test(test_parse_corpus),
    };
    const struct CMUnitTest live[] = {
        cmocka_unit_test(test_put_range), cmocka_unit_test(test_txn),
        cmocka_unit_test(test_lease),     cmocka_unit_test(test_failover),
        cmocka_unit_test(test_auth_off),
    };
    int rc = cmocka_run_group_tests_name("etcd-client-offline", offline, NULL, NULL);
    return rc | cmocka_run_group_tests_name("etcd-client", live, group_setup, group_teardown);
}
