/*
 * test_iso_pool.c - a job's cgroups are kept for the next job once it is
 * forgotten (cr_iso_job_release), and the next job gets them as if new:
 * no memory or CPU limit of the last job's, the OOM counters counted from
 * its own start (an earlier job's OOM kill is not its), its own device
 * rules. Real cgroups: needs root and the cgroup v1 memory controller
 * (skipped otherwise).
 */
#include "cr_iso.h"
#include "cr_proc.h"
#include "cr_time.h"
#include "proc_test.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[64];

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/corral-pool-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    return cr_test_rm_rf(dir);
}

static void run_to_end(cr_proc *p)
{
    int st;
    assert_int_equal(waitpid(p->pid, &st, 0), p->pid);
    cr_proc_reaped(p, dir, st);
}

static long long read_num(const char *cg, const char *file)
{
    char path[512], buf[64] = "";
    snprintf(path, sizeof path, "%s/%s", cg, file);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    return strtoll(buf, NULL, 10);
}

/* Run s to its end under iso, then forget it (its cgroups kept). The
 * paths of its memory and CPU cgroups land in mem and cpu. */
static void run_job(cr_iso *iso, cr_job_spec *s, cr_proc *p, char *mem, char *cpu, size_t len)
{
    char err[512];
    assert_int_equal(cr_proc_spawn_iso(dir, "n", s, iso, p, err, sizeof err), 0);
    snprintf(mem, len, "%s", p->iso.v1[CR_ISO_V1_MEMORY]);
    snprintf(cpu, len, "%s", p->iso.v1[CR_ISO_V1_CPU] ? p->iso.v1[CR_ISO_V1_CPU] : "");
    run_to_end(p);
}

static void test_kept_and_reset(void **state)
{
    (void)state;
    cr_iso iso;
    char node[32];
    memset(&iso, 0, sizeof iso);
    snprintf(node, sizeof node, "pool%d", (int)getpid());
    if (geteuid() != 0) {
        skip();
    }
    cr_iso_probe(&iso, "auto", "auto", node, NULL);
    if (!iso.v1[CR_ISO_V1_MEMORY]) {
        cr_iso_fini(&iso);
        skip();
    }
    cr_job_spec s;
    cr_proc p;
    char mem1[256], cpu1[256], mem2[256], cpu2[256];

    /* Job 1: a memory and a CPU limit, and an OOM kill. */
    cr_test_spec_sh(&s, 1, "head -c 200000000 /dev/zero | tail > /dev/null");
    s.mem_bytes = 32 << 20;
    s.cpus = 0.5;
    run_job(&iso, &s, &p, mem1, cpu1, sizeof mem1);
    assert_int_equal(p.oom, 1);
    cr_proc_forget_iso(dir, &iso, &p);
    cr_proc_fini(&p);
    struct stat sb;
    assert_int_equal(stat(mem1, &sb), 0); /* kept */

    /* Job 2 gets them: no limit of job 1's, no OOM kill of its own. */
    cr_test_spec_sh(&s, 2, "cat /proc/self/cgroup > /dev/null; exit 9");
    char err[512];
    assert_int_equal(cr_proc_spawn_iso(dir, "n", &s, &iso, &p, err, sizeof err), 0);
    snprintf(mem2, sizeof mem2, "%s", p.iso.v1[CR_ISO_V1_MEMORY]);
    snprintf(cpu2, sizeof cpu2, "%s", p.iso.v1[CR_ISO_V1_CPU] ? p.iso.v1[CR_ISO_V1_CPU] : "");
    assert_string_equal(mem2, mem1);
    assert_true(read_num(mem2, "memory.limit_in_bytes") > (1LL << 40));
    assert_int_equal(read_num(mem2, "memory.failcnt"), 0);
    if (*cpu2) {
        assert_string_equal(cpu2, cpu1);
        assert_int_equal(read_num(cpu2, "cpu.cfs_quota_us"), -1);
    }
    run_to_end(&p);
    assert_int_equal(p.exit_code, 9);
    assert_int_equal(p.oom, 0);
    /* Killed by SIGKILL, in a cgroup that once hit its limit: still not OOM. */
    cr_proc_forget_iso(dir, &iso, &p);
    cr_proc_fini(&p);
    cr_test_spec_sh(&s, 3, "kill -KILL $$");
    run_job(&iso, &s, &p, mem2, cpu2, sizeof mem2);
    assert_string_equal(mem2, mem1);
    assert_int_equal(p.signal, SIGKILL);
    assert_int_equal(p.oom, 0);
    cr_proc_forget_iso(dir, &iso, &p);
    cr_proc_fini(&p);

    /* A job still running keeps its cgroups out of the pool. */
    cr_test_spec_sh(&s, 4, "sleep 30");
    assert_int_equal(cr_proc_spawn_iso(dir, "n", &s, &iso, &p, err, sizeof err), 0);
    cr_proc q;
    cr_test_spec_sh(&s, 5, "exit 0");
    assert_int_equal(cr_proc_spawn_iso(dir, "n", &s, &iso, &q, err, sizeof err), 0);
    assert_string_not_equal(q.iso.v1[CR_ISO_V1_MEMORY], p.iso.v1[CR_ISO_V1_MEMORY]);
    run_to_end(&q);
    cr_proc_forget_iso(dir, &iso, &q);
    cr_proc_fini(&q);
    cr_proc_stop(&p, 0, 0);
    run_to_end(&p);
    /* The kill is asynchronous: the pool takes it once it is empty. */
    char procs[300];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", p.iso.v1[CR_ISO_V1_MEMORY]);
    int64_t end = cr_mono_ns() + 20 * CR_NS_PER_SEC;
    while (cr_test_slurp(procs) && *cr_test_slurp(procs) && cr_mono_ns() < end) {
        usleep(10000);
    }
    cr_proc_forget_iso(dir, &iso, &p);
    cr_proc_fini(&p);

    /* The end of the cr_iso removes what it kept. */
    cr_iso_fini(&iso);
    assert_int_not_equal(stat(mem1, &sb), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kept_and_reset),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
