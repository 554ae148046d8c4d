/*
 * test_iso_caps.c - the device numbers of a job's GPUs (iso_caps.c):
 * /proc/driver/nvidia-caps/mig-minors parsed from a fixture in NVIDIA's
 * format (tests/agent/data/mig-minors), a MIG job's device rules hold its
 * own GPU and compute instance capabilities and no other (never config or
 * monitor), whole-GPU jobs get /dev/nvidia<minor> by the minor number, and
 * the NVML backend reads the minor number (nvmlDeviceGetMinorNumber) and
 * the instance ids from a stand-in libnvidia-ml.so.1 (fake_nvml.c).
 */
#include "cr_gpu.h"
#include "cr_iso.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static const char *fixture(void)
{
    static char p[1024];
    const char *src = getenv("CORRAL_SRC");
    snprintf(p, sizeof p, "%s/tests/agent/data/mig-minors", src ? src : ".");
    return p;
}

static void test_parse_fixture(void **state)
{
    (void)state;
    cr_iso_cap *c = NULL;
    size_t n = 0;
    char err[256] = "";
    assert_int_equal(cr_iso_mig_minors_load(fixture(), &c, &n, err, sizeof err), 0);
    assert_int_equal(n, 272); /* config, monitor, 2 GPUs x 15 gi x (1 + 8 ci) */
    assert_int_equal(cr_iso_cap_minor(c, n, CR_ISO_CAP_CONFIG, -1, -1, -1), 1);
    assert_int_equal(cr_iso_cap_minor(c, n, CR_ISO_CAP_MONITOR, -1, -1, -1), 2);
    assert_int_equal(cr_iso_cap_minor(c, n, CR_ISO_CAP_GI, 0, 2, -1), 21);
    assert_int_equal(cr_iso_cap_minor(c, n, CR_ISO_CAP_CI, 0, 2, 0), 22);
    assert_int_equal(cr_iso_cap_minor(c, n, CR_ISO_CAP_GI, 1, 2, -1), 156);
    assert_int_equal(cr_iso_cap_minor(c, n, CR_ISO_CAP_CI, 1, 5, 1), 3 + 135 + 5 * 9 + 2);
    assert_int_equal(cr_iso_cap_minor(c, n, CR_ISO_CAP_GI, 2, 0, -1), -1);
    free(c);
}

static void test_parse_errors(void **state)
{
    (void)state;
    cr_iso_cap *c = NULL;
    size_t n = 0;
    char err[256];
    /* A capability of a newer driver is skipped (never granted), not an error. */
    const char *ok = "config 1\nmonitor 2\nfabric-imex-mgmt 9\ngpu0/gi1/access 12\n\n";
    assert_int_equal(cr_iso_mig_minors_parse(ok, strlen(ok), &c, &n, err, sizeof err), 0);
    assert_int_equal(n, 3);
    free(c);
    const char *bad[] = {"config 1\ngpu0/gi1/access\n", "config one\n",
                         "config 1\nmonitor 2\ngpu0/gi1/access 12 extra\n",
                         "gpu0/gi999/access 5\n"};
    const char *want[] = {"line 2", "line 1", "line 3", "line 1"};
    for (size_t i = 0; i < 4; i++) {
        c = NULL;
        assert_int_not_equal(
            cr_iso_mig_minors_parse(bad[i], strlen(bad[i]), &c, &n, err, sizeof err), 0);
        assert_null(c);
        if (!strstr(err, want[i])) {
            fail_msg("'%s': error '%s' does not name %s", bad[i], err, want[i]);
        }
    }
    assert_int_not_equal(cr_iso_mig_minors_load("/nonexistent/mig-minors", &c, &n, err, sizeof err),
                         0);
    assert_non_null(strstr(err, "/nonexistent/mig-minors"));
}

/* Two GPUs: index 0 is /dev/nvidia1, index 1 /dev/nvidia0 with two MIG
 * instances (gi 2 / ci 0 and gi 5 / ci 1). */
static void two_gpus(cr_gpu_info *g)
{
    memset(g, 0, 2 * sizeof *g);
    g[0].index = 0;
    g[0].minor = 1;
    g[1].index = 1;
    g[1].minor = 0;
    g[1].mig_count = 2;
    snprintf(g[1].mig[0].uuid, sizeof g[1].mig[0].uuid, "MIG-a");
    g[1].mig[0].gi_id = 2;
    g[1].mig[0].ci_id = 0;
    snprintf(g[1].mig[1].uuid, sizeof g[1].mig[1].uuid, "MIG-b");
    g[1].mig[1].gi_id = 5;
    g[1].mig[1].ci_id = 1;
}

static void test_rules(void **state)
{
    (void)state;
    char devs[] = "/tmp/corral-caps-devices-XXXXXX";
    int fd = mkstemp(devs);
    assert_true(fd >= 0);
    const char *text = "Character devices:\n  1 mem\n195 nvidia\n237 nvidia-caps\n511 nvidia-uvm\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    cr_gpu_info g[2];
    two_gpus(g);
    cr_iso iso;
    memset(&iso, 0, sizeof iso);
    cr_iso_set_gpus(&iso, g, 2, fixture(), devs);
    unlink(devs);
    assert_int_equal(iso.caps_major, 237);
    assert_int_equal(iso.nmigs, 2);

    /* A MIG job on GPU 1, instance MIG-b: /dev/nvidia0 and gi5 + gi5/ci1 of gpu0. */
    int gpus[1] = {1};
    char mb[] = "MIG-b", prof[] = "1g.10gb";
    char *uuids[1] = {mb};
    cr_job_spec s;
    memset(&s, 0, sizeof s);
    s.job = 7;
    s.gpus = gpus;
    s.gpu_count = 1;
    s.gpu_uuids = uuids;
    s.uuid_count = 1;
    s.mig_profile = prof;
    int maj[96], min[96];
    size_t n = cr_iso_dev_rules_iso(&iso, &s, maj, min, 96);
    int want_gi = cr_iso_cap_minor(iso.caps, iso.ncaps, CR_ISO_CAP_GI, 0, 5, -1);
    int want_ci = cr_iso_cap_minor(iso.caps, iso.ncaps, CR_ISO_CAP_CI, 0, 5, 1);
    int gpu0 = 0, gpu1 = 0, caps = 0, gi = 0, ci = 0;
    for (size_t i = 0; i < n; i++) {
        if (maj[i] == CR_NVIDIA_MAJOR && min[i] >= 0 && min[i] < 254) {
            gpu0 += min[i] == 0;
            gpu1 += min[i] == 1;
        }
        if (maj[i] == 237) {
            caps++;
            gi += min[i] == want_gi;
            ci += min[i] == want_ci;
            assert_true(min[i] != 1 && min[i] != 2); /* never config or monitor */
        }
    }
    assert_int_equal(gpu0, 1); /* GPU index 1 is /dev/nvidia0 */
    assert_int_equal(gpu1, 0);
    assert_int_equal(caps, 2);
    assert_true(gi == 1 && ci == 1);

    /* A whole-GPU job on index 0: /dev/nvidia1, no capability node. */
    int g0[1] = {0};
    memset(&s, 0, sizeof s);
    s.gpus = g0;
    s.gpu_count = 1;
    n = cr_iso_dev_rules_iso(&iso, &s, maj, min, 96);
    gpu0 = gpu1 = caps = 0;
    for (size_t i = 0; i < n; i++) {
        if (maj[i] == CR_NVIDIA_MAJOR && min[i] >= 0 && min[i] < 254) {
            gpu0 += min[i] == 0;
            gpu1 += min[i] == 1;
        }
        caps += maj[i] == 237;
    }
    assert_true(gpu1 == 1 && gpu0 == 0 && caps == 0);

    /* Without mig-minors a MIG job gets no capability node (fail closed). */
    cr_iso_set_gpus(&iso, g, 2, "/nonexistent/mig-minors", NULL);
    s.gpus = gpus;
    s.gpu_uuids = uuids;
    s.uuid_count = 1;
    s.mig_profile = prof;
    n = cr_iso_gpu_rules(&iso, &s, maj, min, 96);
    assert_int_equal(iso.ncaps, 0);
    assert_int_equal(n, 1); /* /dev/nvidia0 alone */
    assert_true(maj[0] == CR_NVIDIA_MAJOR && min[0] == 0);
    free(iso.caps);
    free(iso.migs);
}

static void test_nvml_minor(void **state)
{
    (void)state;
    cr_gpu_backend *b = NULL;
    char err[256] = "";
    int rc = cr_gpu_nvml_open(&b, err, sizeof err);
    if (rc != 0) {
        fail_msg("the stand-in NVML did not open: %s", err);
    }
    assert_int_equal(b->count, 2);
    assert_int_equal(b->gpus[0].index, 0);
    assert_int_equal(b->gpus[0].minor, 3);
    assert_int_equal(b->gpus[1].minor, 1);
    assert_int_equal(b->gpus[1].mig_count, 2);
    assert_int_equal(b->gpus[1].mig[0].gi_id, 2);
    assert_int_equal(b->gpus[1].mig[0].ci_id, 0);
    assert_int_equal(b->gpus[1].mig[1].gi_id, 5);
    assert_int_equal(b->gpus[1].mig[1].ci_id, 1);
    /* The device rule of a job on index 0 is /dev/nvidia3. */
    cr_iso iso;
    memset(&iso, 0, sizeof iso);
    cr_iso_set_gpus(&iso, b->gpus, b->count, "/nonexistent/mig-minors", NULL);
    int g0[1] = {0}, maj[96], min[96];
    cr_job_spec s;
    memset(&s, 0, sizeof s);
    s.gpus = g0;
    s.gpu_count = 1;
    size_t n = cr_iso_gpu_rules(&iso, &s, maj, min, 96);
    assert_int_equal(n, 1);
    assert_true(maj[0] == CR_NVIDIA_MAJOR && min[0] == 3);
    free(iso.caps);
    free(iso.migs);
    cr_gpu_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_fixture),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_nvml_minor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
