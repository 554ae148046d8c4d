/*
 * test_dcache.c - the node data cache (src/agent/cr_dcache.h) on its own,
 * with file: objects in a temporary directory: two jobs, one fetch; a
 * damaged entry fetched again; the cap kept by evicting an unpinned entry
 * and waiting while it is pinned; too large, checksum mismatch and a
 * missing file fail the job naming the dataset and leave no partial file;
 * a partial file resumed. Polls cr_dcache_want with a deadline (the worker
 * is a thread), never sleeps for an outcome.
 */
#include "cr_dcache.h"

#include "cr_error.h"

#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

typedef struct obj {
    char path[600];
    char uri[620];
    char sha[65];
    int64_t size;
} obj;

static char tmp[512];

static void make_obj(obj *o, const char *name, int64_t size, unsigned seed)
{
    snprintf(o->path, sizeof o->path, "%s/%s", tmp, name);
    snprintf(o->uri, sizeof o->uri, "file:%s", o->path);
    unsigned char *b = malloc((size_t)size);
    for (int64_t i = 0; i < size; i++) {
        b[i] = (unsigned char)((seed * 2654435761u + (unsigned)i * 40503u) >> 13);
    }
    FILE *f = fopen(o->path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    unsigned char md[32];
    crypto_hash_sha256(md, b, (unsigned long long)size);
    sodium_bin2hex(o->sha, sizeof o->sha, md, sizeof md);
    o->size = size;
    free(b);
}

static cr_dref ref(const obj *o, const char *name)
{
    return (cr_dref){
        .name = name, .version = 1, .uri = o->uri, .size_bytes = o->size, .sha256 = o->sha};
}

/* Ask until ready or failed (10 s): the result, paths[0] and msg filled. */
static int want(cr_dcache *d, int64_t job, const cr_dref *r, char **path, char *msg, size_t len)
{
    for (int i = 0; i < 1000; i++) {
        int rc = cr_dcache_want(d, job, 1, r, 1, path, msg, len);
        if (rc != CR_DCACHE_STAGING) {
            return rc;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return CR_DCACHE_STAGING;
}

static int64_t dir_bytes(const char *dir)
{
    int64_t t = 0;
    DIR *dd = opendir(dir);
    struct dirent *de;
    while (dd && (de = readdir(dd))) {
        char p[1200];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (de->d_name[0] != '.' && stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) {
            t += sb.st_size;
        }
    }
    if (dd) {
        closedir(dd);
    }
    return t;
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "%s/corral-dcache-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(tmp));
    return sodium_init() < 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    return system(cmd) != 0;
}

static void test_cache(void **state)
{
    (void)state;
    obj a, b, big, bad;
    make_obj(&a, "a.bin", 300000, 1);
    make_obj(&b, "b.bin", 300000, 2);
    make_obj(&big, "big.bin", 500000, 3);
    make_obj(&bad, "bad.bin", 1000, 4);
    memset(bad.sha, '0', 64);
    char cdir[600], pdir[620];
    snprintf(cdir, sizeof cdir, "%s/cache", tmp);
    snprintf(pdir, sizeof pdir, "%s/.partial", cdir);
    cr_dcache *d = NULL;
    char why[300], msg[400];
    /* verify 0: hashed at every use (the damage below comes within the
     * file timestamps' granularity of the fetch, which a stat cannot see) */
    assert_int_equal(cr_dcache_new(cdir, 400000, 0, NULL, NULL, NULL, &d, why, sizeof why), 0);

    /* two jobs, one object: one fetch */
    cr_dref ra = ref(&a, "a"), rb = ref(&b, "b");
    char *p1 = NULL, *p2 = NULL;
    assert_int_equal(want(d, 1, &ra, &p1, msg, sizeof msg), CR_DCACHE_READY);
    assert_int_equal(want(d, 2, &ra, &p2, msg, sizeof msg), CR_DCACHE_READY);
    assert_string_equal(p1, p2);
    cr_dcache_stats st;
    cr_dcache_get_stats(d, &st);
    assert_int_equal(st.fetches, 1);
    assert_int_equal(st.fetched_ok, 1);

    /* a damaged entry: fetched again at the next job's use */
    chmod(p1, 0644);
    int fd = open(p1, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "X", 1, 100), 1);
    close(fd);
    free(p1);
    free(p2);
    p1 = p2 = NULL;
    cr_dcache_release(d, 1);
    cr_dcache_release(d, 2);
    assert_int_equal(want(d, 3, &ra, &p1, msg, sizeof msg), CR_DCACHE_READY);
    cr_dcache_get_stats(d, &st);
    assert_int_equal(st.corrupt, 1);
    assert_int_equal(st.fetches, 2);
    free(p1);
    p1 = NULL;

    /* the cap: b waits while job 3 holds a, then a is evicted */
    assert_int_equal(cr_dcache_want(d, 4, 1, &rb, 1, &p2, msg, sizeof msg), CR_DCACHE_STAGING);
    for (int i = 0; i < 100 && !strstr(msg, "waiting for room"); i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        assert_int_equal(cr_dcache_want(d, 4, 1, &rb, 1, &p2, msg, sizeof msg), CR_DCACHE_STAGING);
    }
    assert_non_null(strstr(msg, "staging b@1: waiting for room in the node's data cache"));
    assert_true(dir_bytes(cdir) + dir_bytes(pdir) <= 400000);
    cr_dcache_release(d, 3);
    assert_int_equal(want(d, 4, &rb, &p2, msg, sizeof msg), CR_DCACHE_READY);
    cr_dcache_get_stats(d, &st);
    assert_int_equal(st.evictions, 1);
    assert_true(st.used_bytes <= 400000);
    assert_true(dir_bytes(cdir) + dir_bytes(pdir) <= 400000);
    free(p2);
    p2 = NULL;
    cr_dcache_release(d, 4);

    /* failures name the dataset and leave nothing in .partial */
    cr_dref rbig = ref(&big, "big"), rbad = ref(&bad, "bad");
    char *px = NULL;
    assert_int_equal(want(d, 5, &rbig, &px, msg, sizeof msg), CR_ETOOBIG);
    assert_non_null(strstr(msg, "data big@1: 500000 bytes, larger than this node's data cache"));
    assert_int_equal(want(d, 6, &rbad, &px, msg, sizeof msg), CR_ECORRUPT);
    assert_non_null(strstr(msg, "data bad@1: checksum mismatch"));
    obj gone = a;
    snprintf(gone.uri, sizeof gone.uri, "file:%s/none.bin", tmp);
    memset(gone.sha, 'a', 64);
    cr_dref rgone = ref(&gone, "gone");
    assert_int_equal(want(d, 7, &rgone, &px, msg, sizeof msg), CR_EIO);
    assert_non_null(strstr(msg, "data gone@1: cannot open"));
    assert_int_equal(dir_bytes(pdir), 0);
    cr_dcache_release(d, 5);
    cr_dcache_release(d, 6);
    cr_dcache_release(d, 7);
    cr_dcache_free(d);

    /* a partial file is resumed (a fresh cache over the same directory) */
    obj c;
    make_obj(&c, "c.bin", 200000, 5);
    char part[800];
    snprintf(part, sizeof part, "%s/%s.part", pdir, c.sha);
    FILE *src = fopen(c.path, "rb"), *dst = fopen(part, "wb");
    char buf[100000];
    assert_int_equal(fread(buf, 1, sizeof buf, src), sizeof buf);
    assert_int_equal(fwrite(buf, 1, sizeof buf, dst), sizeof buf);
    fclose(src);
    fclose(dst);
    assert_int_equal(cr_dcache_new(cdir, 400000, 86400, NULL, NULL, NULL, &d, why, sizeof why), 0);
    cr_dref rc = ref(&c, "c");
    assert_int_equal(want(d, 8, &rc, &px, msg, sizeof msg), CR_DCACHE_READY);
    cr_dcache_get_stats(d, &st);
    assert_int_equal(st.resumed, 1);
    free(px);
    cr_dcache_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cache, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
