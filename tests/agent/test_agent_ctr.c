/*
 * test_agent_ctr.c - the pure parts of jobs in containers
 * (docs/containers.md): the desired state's "container" member, podman's
 * argv for a job, and the node-side mount checks. No podman is run here;
 * tests/integration/test_containers.sh runs the real thing.
 */
#include "cr_ctr.h"
#include "cr_desired.h"
#include "cr_error.h"

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

static const char *doc =
    "{\"version\": 3, \"jobs\": [{\"job\": 9, \"run\": 2, \"command\": [\"python\", \"t.py\"],"
    " \"env\": {\"LR\": \"0.1\"}, \"secret_env\": {\"HF_TOKEN\": \"hf-secret\"},"
    " \"workdir\": \"/workspace\", \"gpus\": [1, 3], \"gpu_uuids\": [\"GPU-b\", \"GPU-d\"],"
    " \"checkpoint_dir\": \"/ck/9\", \"uid\": 64001, \"gid\": 64002, \"cpus\": 2,"
    " \"mem_bytes\": 1073741824,"
    " \"container\": {\"image\": \"localhost/x:1\", \"archive\": \"/data/x.tar\","
    " \"mounts\": [\"/data/a:/a:ro\"], \"entrypoint\": [\"/bin/sh\", \"-c\"],"
    " \"cluster\": \"00ff\"}}]}";

static int has(char **v, const char *want)
{
    for (; *v; v++) {
        if (strcmp(*v, want) == 0) {
            return 1;
        }
    }
    return 0;
}

static int any_contains(char **v, const char *needle)
{
    for (; *v; v++) {
        if (strstr(*v, needle)) {
            return 1;
        }
    }
    return 0;
}

static void test_parse_and_round_trip(void **state)
{
    cr_desired d;
    char err[256];
    assert_int_equal(cr_desired_parse(doc, strlen(doc), &d, err, sizeof err), 0);
    const cr_job_spec *s = cr_desired_find(&d, 9);
    assert_non_null(s);
    assert_string_equal(s->ctr.image, "localhost/x:1");
    assert_string_equal(s->ctr.archive, "/data/x.tar");
    assert_int_equal(s->ctr.mountc, 1);
    assert_string_equal(s->ctr.mounts[0], "/data/a:/a:ro");
    assert_int_equal(s->ctr.entryc, 2);
    assert_string_equal(s->ctr.cluster, "00ff");
    assert_false(s->ctr.podman);
    char *name = cr_ctr_name(s);
    assert_string_equal(name, "corral-00ff-9-2");
    free(name);
    /* The record in the journal keeps the container, never the secrets. */
    json_t *j = cr_job_spec_to_json(s);
    char *text = json_dumps(j, JSON_COMPACT);
    assert_null(strstr(text, "hf-secret"));
    cr_job_spec t;
    assert_int_equal(cr_job_spec_from_json(j, "", &t, err, sizeof err), 0);
    assert_string_equal(t.ctr.image, "localhost/x:1");
    assert_string_equal(t.ctr.entrypoint[1], "-c");
    cr_job_spec_fini(&t);
    free(text);
    json_decref(j);
    cr_desired_fini(&d);
}

static void test_parse_errors(void **state)
{
    const char *bad[][2] = {
        {"{\"image\": \"-x\"}", "jobs[0].container.image"},
        {"{\"image\": \"\"}", "jobs[0].container.image"},
        {"{\"image\": \"a\", \"archive\": \"rel.tar\"}", "jobs[0].container.archive"},
        {"{\"image\": \"a\", \"mounts\": \"/a:/b\"}", "jobs[0].container.mounts"},
        {"{\"image\": \"a\", \"mounts\": [1]}", "jobs[0].container.mounts[0]"},
        {"{\"image\": \"a\", \"cluster\": \"../x\"}", "jobs[0].container.cluster"},
        {"{\"image\": \"a\", \"podman\": 1}", "jobs[0].container.podman"},
        {"[]", "jobs[0].container"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[512], err[256];
        snprintf(text, sizeof text,
                 "{\"version\": 1, \"jobs\": [{\"job\": 1, \"command\": [\"true\"],"
                 " \"container\": %s}]}",
                 bad[i][0]);
        cr_desired d;
        assert_int_equal(cr_desired_parse(text, strlen(text), &d, err, sizeof err), CR_EINVAL);
        if (strncmp(err, bad[i][1], strlen(bad[i][1])) != 0) {
            fail_msg("case %zu: error '%s' does not name %s", i, err, bad[i][1]);
        }
    }
}

static void test_argv(void **state)
{
    cr_desired d;
    char err[256];
    assert_int_equal(cr_desired_parse(doc, strlen(doc), &d, err, sizeof err), 0);
    const cr_job_spec *s = cr_desired_find(&d, 9);
    cr_ctr c;
    memset(&c, 0, sizeof c);
    c.ok = 1;
    snprintf(c.podman, sizeof c.podman, "podman");
    snprintf(c.runtime, sizeof c.runtime, "runc");
    c.nofile[0] = 1024;
    c.nofile[1] = 4096;
    c.nproc[0] = c.nproc[1] = 512;
    cr_iso iso;
    memset(&iso, 0, sizeof iso);
    snprintf(iso.dev_dir, sizeof iso.dev_dir, "/nonexistent-dev");
    char *env[] = {"LR=0.1", "CUDA_VISIBLE_DEVICES=GPU-b,GPU-d", NULL};
    char **v = cr_ctr_argv(&c, &iso, s, "n1", env, "/st/ctr/9-2.env", "/corral-n1/job-9");
    assert_string_equal(v[0], "podman");
    assert_string_equal(v[1], "--runtime=runc");
    assert_string_equal(v[2], "run");
    const char *want[] = {"--rm=false",
                          "--pull=never",
                          "--name=corral-00ff-9-2",
                          "--label=corral.job=9",
                          "--label=corral.run=2",
                          "--label=corral.cluster=00ff",
                          "--label=corral.node=n1",
                          "--user=64001:64002",
                          "--security-opt=no-new-privileges",
                          "--cap-drop=all",
                          "--network=host",
                          "--env=NVIDIA_VISIBLE_DEVICES=GPU-b,GPU-d",
                          "--env=LR=0.1",
                          "--env=CUDA_VISIBLE_DEVICES=GPU-b,GPU-d",
                          "--env-file=/st/ctr/9-2.env",
                          "--volume=/ck/9:/ck/9",
                          "--volume=/data/a:/a:ro",
                          "--memory=1073741824",
                          "--memory-swap=1073741824",
                          "--cpus=2.000",
                          "--ulimit=nofile=1024:4096",
                          "--ulimit=nproc=512:512",
                          "--cgroup-parent=/corral-n1/job-9",
                          "--workdir=/workspace",
                          "--entrypoint=[\"/bin/sh\",\"-c\"]"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (!has(v, want[i])) {
            fail_msg("argv lacks %s", want[i]);
        }
    }
    /* No device node exists in dev_dir: none is passed, never another GPU's. */
    assert_false(any_contains(v, "--device"));
    /* The secret is in the env file only, never on the argv. */
    assert_false(any_contains(v, "hf-secret"));
    /* The image, then the command, at the end. */
    size_t n = 0;
    while (v[n]) {
        n++;
    }
    assert_string_equal(v[n - 3], "localhost/x:1");
    assert_string_equal(v[n - 2], "python");
    assert_string_equal(v[n - 1], "t.py");
    cr_strv_free(v);

    /* With a CDI spec: the GPUs by UUID. */
    c.cdi = 1;
    v = cr_ctr_argv(&c, &iso, s, "n1", NULL, NULL, NULL);
    assert_true(has(v, "--device=nvidia.com/gpu=GPU-b"));
    assert_true(has(v, "--device=nvidia.com/gpu=GPU-d"));
    assert_false(any_contains(v, "--env-file"));
    assert_false(any_contains(v, "--cgroup-parent"));
    cr_strv_free(v);
    cr_desired_fini(&d);
}

static void test_mounts_on_node(void **state)
{
    char dir[] = "/tmp/corral-ctr-test.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char real[600], link[600], m[1400];
    snprintf(real, sizeof real, "%s/real", dir);
    snprintf(link, sizeof link, "%s/link", dir);
    assert_int_equal(mkdir(real, 0755), 0);
    assert_int_equal(symlink(real, link), 0);
    struct {
        const char *src, *suffix;
        int rc;
    } cases[] = {
        {real, ":/a:ro", 0},     {real, ":/a", 0},
        {link, ":/a", CR_EPERM}, {real, ":/a:rw", CR_EINVAL},
        {real, "", CR_EINVAL},   {"/nonexistent-x", ":/a", CR_ENOENT},
        {"/", ":/a", CR_EINVAL}, {real, ":/a/../b", CR_EINVAL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_job_spec s;
        memset(&s, 0, sizeof s);
        snprintf(m, sizeof m, "%s%s", cases[i].src, cases[i].suffix);
        char *mounts[] = {m, NULL};
        s.ctr.mounts = mounts;
        s.ctr.mountc = 1;
        char err[512] = "";
        int rc = cr_ctr_mounts_ok(&s, err, sizeof err);
        if (rc != cases[i].rc) {
            fail_msg("mount '%s': rc %d, want %d (%s)", m, rc, cases[i].rc, err);
        }
        if (rc) {
            assert_non_null(strstr(err, "mounts[0]"));
        }
    }
    unlink(link);
    rmdir(real);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_and_round_trip),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_argv),
        cmocka_unit_test(test_mounts_on_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
