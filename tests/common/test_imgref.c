/*
 * test_imgref.c - the strict image reference parser (cr_imgref.h): the
 * grammar's good shapes with their parts and fully qualified forms, and a
 * table of bad ones, the podman transports and the node-side SSRF shape
 * among them (issue 24: "--image docker-archive:/any/path" read any file).
 */
#include "cr_imgref.h"

#include "cr_error.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void test_good(void **state)
{
    (void)state;
    static const struct {
        const char *in, *registry, *path, *tag, *full;
    } cases[] = {
        {"busybox", "", "busybox", "", "docker.io/library/busybox:latest"},
        {"busybox:1.36", "", "busybox", "1.36", "docker.io/library/busybox:1.36"},
        {"team/model:v1", "", "team/model", "v1", "docker.io/team/model:v1"},
        {"localhost/corral-test:bb", "localhost", "corral-test", "bb", "localhost/corral-test:bb"},
        {"localhost:5000/a/b/c:t", "localhost:5000", "a/b/c", "t", "localhost:5000/a/b/c:t"},
        {"registry.example.com/x", "registry.example.com", "x", "",
         "registry.example.com/x:latest"},
        {"Registry.Example.COM:443/x", "Registry.Example.COM:443", "x", "",
         "Registry.Example.COM:443/x:latest"},
        {"nvcr.io/nvidia/pytorch:24.05-py3", "nvcr.io", "nvidia/pytorch", "24.05-py3",
         "nvcr.io/nvidia/pytorch:24.05-py3"},
        {"team/a.b_c__d---e", "", "team/a.b_c__d---e", "", "docker.io/team/a.b_c__d---e:latest"},
        {"x_y__z.w-v--u", "", "x_y__z.w-v--u", "", "docker.io/library/x_y__z.w-v--u:latest"},
        {"x:_T.a-9", "", "x", "_T.a-9", "docker.io/library/x:_T.a-9"},
        {"x@sha256:" HEX64, "", "x", "", "docker.io/library/x@sha256:" HEX64},
        {"r.io/x:t@sha256:" HEX64, "r.io", "x", "t", "r.io/x:t@sha256:" HEX64},
        {"abcdef012345", "", "abcdef012345", "", "docker.io/library/abcdef012345:latest"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_imgref r;
        char why[300] = "", full[600];
        int rc = cr_imgref_parse(cases[i].in, &r, why, sizeof why);
        if (rc != 0) {
            fail_msg("%s refused: %s", cases[i].in, why);
        }
        assert_string_equal(r.registry, cases[i].registry);
        assert_string_equal(r.path, cases[i].path);
        assert_string_equal(r.tag, cases[i].tag);
        assert_int_equal(cr_imgref_full(&r, full, sizeof full), 0);
        assert_string_equal(full, cases[i].full);
    }
    /* The longest tag is 128 bytes; 129 is refused below. */
    char t[200];
    snprintf(t, sizeof t, "x:%0128d", 0);
    cr_imgref r;
    char why[300];
    assert_int_equal(cr_imgref_parse(t, &r, why, sizeof why), 0);
}

static void test_bad(void **state)
{
    (void)state;
    char longtag[200], longname[300];
    snprintf(longtag, sizeof longtag, "x:%0129d", 0);
    memset(longname, 'a', 256);
    longname[256] = '\0';
    const char *cases[] = {
        /* Podman transports: the file-read primitive of issue 24. */
        "docker-archive:/etc/shadow",
        "docker-archive:/var/tmp/other/secret.tar:x:1",
        "oci-archive:/data/team-b/secret.tar",
        "oci-archive:x.tar",
        "oci:/var/lib/x",
        "oci:/var/lib/x:tag",
        "dir:/root",
        "docker://registry.example.com/x",
        "docker-daemon:busybox:latest",
        "containers-storage:[overlay@/var/lib/containers/storage]busybox",
        "containers-storage:busybox",
        "sif:/x.sif",
        "tarball:/x.tar",
        "ostree:x@/ostree/repo",
        /* Host:port shapes that are not a registry (the SSRF reaches podman
         * only through a pull, refused by the allow-list: these are not
         * even references). */
        "evil-host:1234:5/x",
        "evil-host:/x",
        "evil-host:0/x",
        "evil-host:65536/x",
        "evil-host:99999/x",
        "-evil.host/x",
        "evil-.host/x",
        "evil..host/x",
        "evil_host.io/x",
        "[::1]:5000/x",
        "user@evil.host/x",
        "http://evil.host/x",
        /* Names. */
        "",
        "-x",
        "--rm",
        "X",
        "Busybox",
        "r.io/Team/x",
        "x..y",
        "x___y",
        "x._y",
        "x-",
        "_x",
        "x/",
        "/x",
        "x//y",
        "r.io/",
        "r.io/:t",
        ":t",
        "x y",
        "x\ty",
        "x\n",
        "x\x7f",
        "x\xc3\xa9",
        "x:",
        "x:-t",
        "x:.t",
        "x:t:u",
        "x:t/u",
        longtag,
        longname,
        "x@",
        "x@sha256:",
        "x@sha256:" HEX64 "0",
        "x@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
        "x@sha512:" HEX64 HEX64,
        "x@md5:0123",
        "x@sha256:" HEX64 "@sha256:" HEX64,
        HEX64,
        /* The agent's own namespace for archive-loaded images. */
        "localhost/corral-tenant-team-a/x:1",
        "corral-tenant-team-a/x",
        "library/corral-tenant-team-a",
        "corral-tenant-x",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_imgref r;
        memset(&r, 0x5a, sizeof r);
        char why[300] = "";
        if (cr_imgref_parse(cases[i], &r, why, sizeof why) != CR_EINVAL) {
            fail_msg("%s accepted", cases[i]);
        }
        assert_true(why[0] != '\0');
        assert_int_equal((unsigned char)r.registry[0], 0x5a); /* untouched on failure */
    }
    char why[300];
    cr_imgref r;
    cr_imgref_parse("docker-archive:/etc/shadow", &r, why, sizeof why);
    assert_non_null(strstr(why, "not a registry"));
}

static void test_registries(void **state)
{
    (void)state;
    const char *list[] = {"registry.example.com", "localhost:5000"};
    cr_imgref r;
    char why[300];
    assert_int_equal(cr_imgref_parse("registry.example.com/x:1", &r, why, sizeof why), 0);
    assert_true(cr_imgref_registry_in(&r, list, 2));
    assert_false(cr_imgref_local(&r));
    assert_int_equal(cr_imgref_parse("REGISTRY.example.com/x", &r, why, sizeof why), 0);
    assert_true(cr_imgref_registry_in(&r, list, 2));
    assert_int_equal(cr_imgref_parse("registry.example.com:443/x", &r, why, sizeof why), 0);
    assert_false(cr_imgref_registry_in(&r, list, 2));
    assert_int_equal(cr_imgref_parse("localhost:5000/x", &r, why, sizeof why), 0);
    assert_true(cr_imgref_registry_in(&r, list, 2));
    assert_int_equal(cr_imgref_parse("evil-host:1234/x", &r, why, sizeof why), 0);
    assert_false(cr_imgref_registry_in(&r, list, 2));
    assert_string_equal(cr_imgref_registry(&r), "evil-host:1234");
    assert_int_equal(cr_imgref_parse("busybox", &r, why, sizeof why), 0);
    assert_false(cr_imgref_registry_in(&r, list, 2));
    assert_string_equal(cr_imgref_registry(&r), "docker.io");
    assert_int_equal(cr_imgref_parse("localhost/x", &r, why, sizeof why), 0);
    assert_true(cr_imgref_local(&r));
    assert_false(cr_imgref_registry_in(&r, list, 0));
    assert_true(cr_imgref_registry_ok("registry.example.com"));
    assert_true(cr_imgref_registry_ok("localhost:5000"));
    assert_false(cr_imgref_registry_ok(""));
    assert_false(cr_imgref_registry_ok("http://x"));
    assert_false(cr_imgref_registry_ok("x/y"));
    assert_false(cr_imgref_registry_ok("x:"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_registries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
