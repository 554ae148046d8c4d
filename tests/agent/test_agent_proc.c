/*
 * test_agent_proc.c - the job supervisor on its own: a job's exit code and
 * its signal come back through the shim, stop escalates from SIGTERM to
 * SIGKILL, and the journal replays into the right records (adopted,
 * ended, forgotten, re-run, torn last line), and removing a tree a job can
 * write to (a checkpoint) deletes nothing outside it while the job swaps a
 * directory for a link.
 */
#include "cr_error.h"
#include "cr_proc.h"
#include "cr_time.h"
#include "proc_test.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[64];

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/corral-proc-XXXXXX");
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

static void test_exit_code_and_signal(void **state)
{
    cr_job_spec s;
    cr_proc p;
    char err[256];
    cr_test_spec_sh(&s, 1, "echo hi; exit 3");
    assert_int_equal(cr_proc_spawn(dir, "n", &s, &p, err, sizeof err), 0);
    run_to_end(&p);
    assert_int_equal(p.state, CR_PROC_EXITED);
    assert_int_equal(p.exit_code, 3);
    assert_int_equal(p.signal, 0);
    cr_proc_fini(&p);

    cr_test_spec_sh(&s, 2, "kill -SEGV $$");
    assert_int_equal(cr_proc_spawn(dir, "n", &s, &p, err, sizeof err), 0);
    run_to_end(&p);
    assert_int_equal(p.signal, SIGSEGV);
    assert_int_equal(p.exit_code, 128 + SIGSEGV);
    cr_proc_fini(&p);

    char *log = cr_proc_log_path(dir, 1, "out");
    FILE *f = fopen(log, "r");
    char line[32] = "";
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    free(log);
    assert_string_equal(line, "hi\n");
}

/* Several tasks on one node: each its own rank and log; the job ends as
 * its first task to fail, and the others are stopped. */
static void test_tasks(void **state)
{
    cr_job_spec s;
    cr_proc p;
    char err[256];
    cr_gang g = {.master_port = 29555,
                 .nnodes = 2,
                 .node_rank = 1,
                 .tasks_per_node = 3,
                 .rank_offset = 3,
                 .world_size = 6,
                 .local_world_size = 3};
    snprintf(g.master_addr, sizeof g.master_addr, "127.0.0.1");
    cr_test_spec_sh(&s, 20, "echo rank $RANK local $LOCAL_RANK of $WORLD_SIZE");
    s.has_gang = 1;
    s.gang = g;
    s.array_index = -1;
    assert_int_equal(cr_proc_spawn(dir, "n", &s, &p, err, sizeof err), 0);
    run_to_end(&p);
    assert_int_equal(p.exit_code, 0);
    cr_proc_fini(&p);
    for (int t = 0; t < 3; t++) {
        char path[128], want[64];
        snprintf(path, sizeof path, "%s/logs/20/%d.out", dir, 3 + t);
        snprintf(want, sizeof want, "rank %d local %d of 6\n", 3 + t, t);
        const char *got = cr_test_slurp(path);
        assert_non_null(got);
        assert_string_equal(got, want);
    }

    /* rank 4 fails at once: the job ends with its code, the others (which
     * would sleep 30 s) are stopped */
    cr_test_spec_sh(&s, 21, "[ $RANK = 4 ] && exit 5; sleep 30");
    s.has_gang = 1;
    s.gang = g;
    s.array_index = -1;
    int64_t t0 = cr_mono_ns();
    assert_int_equal(cr_proc_spawn(dir, "n", &s, &p, err, sizeof err), 0);
    run_to_end(&p);
    assert_int_equal(p.exit_code, 5);
    assert_true(cr_mono_ns() - t0 < 20 * CR_NS_PER_SEC);
    cr_proc_fini(&p);

    /* -o pattern relative to the working directory, and a shipped script */
    cr_test_spec_sh(&s, 22, "unused");
    char *argv[] = {"job.sh", "x", NULL};
    s.argv = argv;
    s.argc = 2;
    s.script = "echo script $1 $SLURM_PROCID";
    s.out_pattern = "o-%j-%t.txt";
    s.workdir = dir;
    s.array_index = -1;
    assert_int_equal(cr_proc_spawn(dir, "n", &s, &p, err, sizeof err), 0);
    run_to_end(&p);
    assert_int_equal(p.exit_code, 0);
    cr_proc_fini(&p);
    char path[128];
    snprintf(path, sizeof path, "%s/o-22-0.txt", dir);
    const char *got = cr_test_slurp(path);
    assert_non_null(got);
    assert_string_equal(got, "script x\n"); /* no gang: no SLURM_PROCID */
    snprintf(path, sizeof path, "%s/scripts/22.sh", dir);
    assert_int_equal(access(path, X_OK), 0);
}

static void test_stop_escalates(void **state)
{
    cr_job_spec s;
    cr_proc p;
    char err[256];
    cr_test_spec_sh(&s, 3, "trap '' TERM; echo ready; while :; do sleep 0.05; done");
    assert_int_equal(cr_proc_spawn(dir, "n", &s, &p, err, sizeof err), 0);
    /* Wait (with a deadline) until the shell has set its trap. */
    char *log = cr_proc_log_path(dir, 3, "out");
    int ready = 0;
    for (int64_t end = cr_mono_ns() + 20 * CR_NS_PER_SEC; !ready && cr_mono_ns() < end;) {
        FILE *f = fopen(log, "r");
        char line[16] = "";
        ready = f && fgets(line, sizeof line, f) && strcmp(line, "ready\n") == 0;
        if (f) {
            fclose(f);
        }
        usleep(10000);
    }
    free(log);
    assert_true(ready);
    int64_t t = cr_now_ns();
    cr_proc_stop(&p, 100 * CR_NS_PER_MS, t);
    assert_int_equal(p.state, CR_PROC_STOPPING);
    /* Before the grace period, only SIGTERM (ignored); then SIGKILL. */
    cr_proc_tick(&p, dir, t + 10 * CR_NS_PER_MS, cr_mono_ns());
    cr_proc_tick(&p, dir, t + 200 * CR_NS_PER_MS, cr_mono_ns());
    run_to_end(&p);
    assert_int_equal(p.signal, SIGKILL);
    cr_proc_fini(&p);
}

/* A job with a user runs as it (root only); uid 0 needs allow_root. */
static void test_user(void **state)
{
    cr_job_spec s;
    cr_proc p;
    char err[256];
    cr_test_spec_sh(&s, 9, "echo $(id -u):$(id -g):$(id -G)");
    s.has_user = 1;
    s.uid = 0;
    s.gid = 0;
    assert_int_equal(cr_proc_spawn(dir, "n", &s, &p, err, sizeof err), CR_EPERM);
    assert_non_null(strstr(err, "uid 0"));
    if (geteuid() != 0) {
        skip();
    }
    s.uid = 64003;
    s.gid = 64004;
    assert_int_equal(cr_proc_spawn(dir, "n", &s, &p, err, sizeof err), 0);
    run_to_end(&p);
    assert_int_equal(p.exit_code, 0);
    cr_proc_fini(&p);
    char *log = cr_proc_log_path(dir, 9, "out");
    FILE *f = fopen(log, "r");
    char line[64] = "";
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    assert_string_equal(line, "64003:64004:64004\n");
    struct stat sb;
    assert_int_equal(stat(log, &sb), 0);
    assert_true(sb.st_uid == 64003 && (sb.st_mode & 0777) == 0600);
    free(log);
    char path[128];
    snprintf(path, sizeof path, "%s/logs/9", dir);
    assert_int_equal(stat(path, &sb), 0);
    assert_true(sb.st_uid == 64003 && (sb.st_mode & 0777) == 0700);
    snprintf(path, sizeof path, "%s/jobs.journal", dir);
    assert_int_equal(stat(path, &sb), 0);
    assert_true((sb.st_mode & 0777) == 0600);
}

static void write_journal(const char *text)
{
    char path[128];
    snprintf(path, sizeof path, "%s/jobs.journal", dir);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static void test_journal_replay(void **state)
{
    /* A live process to adopt: ourselves (its start time matches). */
    char rec[2048];
    unsigned long long me = (unsigned long long)cr_proc_start_ticks(getpid());
#define SPEC(id) "\"spec\":{\"job\":" #id ",\"command\":[\"x\"],\"action\":\"run\"}"
    const char *s10 = SPEC(10), *s11 = SPEC(11), *s12 = SPEC(12), *s13 = SPEC(13);
#undef SPEC
    snprintf(rec, sizeof rec,
             "R {\"job\":10,\"pid\":%d,\"start_ticks\":%llu,%s}\n"  /* running: adopted */
             "R {\"job\":11,\"pid\":999999,\"start_ticks\":5,%s}\n" /* ended with code 4 */
             "X 11 999999 exit 4\n"
             "R {\"job\":12,\"pid\":999998,\"start_ticks\":5,%s}\n" /* vanished */
             "R {\"job\":13,\"pid\":999997,\"start_ticks\":5,%s}\n" /* forgotten */
             "X 13 999997 signal 15\n"
             "F 13\n"
             "X 10 12345 exit 1\n"     /* an older run's end: another pid, ignored */
             "R {\"job\":14,\"pid\":", /* torn: a crash mid-write */
             (int)getpid(), me, s10, s11, s12, s13);
    write_journal(rec);
    cr_proc *v = NULL;
    size_t n = 0;
    assert_int_equal(cr_proc_load_all(dir, &v, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(v[0].job, 10);
    assert_int_equal(v[0].state, CR_PROC_RUNNING);
    assert_true(v[0].adopted);
    assert_int_equal(v[1].job, 11);
    assert_int_equal(v[1].state, CR_PROC_EXITED);
    assert_int_equal(v[1].exit_code, 4);
    assert_int_equal(v[2].job, 12);
    assert_int_equal(v[2].state, CR_PROC_EXITED);
    assert_int_equal(v[2].signal, SIGKILL);
    for (size_t i = 0; i < n; i++) {
        cr_proc_fini(&v[i]);
    }
    free(v);
    /* The rewrite kept only the live records; replaying it again agrees. */
    assert_int_equal(cr_proc_load_all(dir, &v, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(v[1].exit_code, 4);
    for (size_t i = 0; i < n; i++) {
        cr_proc_fini(&v[i]);
    }
    free(v);
}

/* The job's side of the race: swap its directory d for a link to victim/
 * and back, as fast as it can, while the agent removes the tree. */
typedef struct swapper {
    const char *top;
    const char *victim;
    atomic_int stop;
} swapper;

static void *swap_loop(void *arg)
{
    swapper *w = arg;
    char d[256], d2[256];
    snprintf(d, sizeof d, "%s/d", w->top);
    snprintf(d2, sizeof d2, "%s/d2", w->top);
    while (!atomic_load(&w->stop)) {
        if (rename(d, d2) == 0) {
            int r = symlink(w->victim, d);
            for (volatile int i = 0; i < 2000; i++) {
            }
            r = unlink(d);
            r = rename(d2, d);
            (void)r;
        }
    }
    return NULL;
}

/* The shim makes the job's log directory (off the agent's loop): one that
 * is a link, or another user's, fails the job's start (126), and nothing
 * is written or chowned through the link. */
static void test_job_dir_refused(void **state)
{
    cr_job_spec s;
    cr_proc p;
    char err[256], path[256], victim[128], logs[96];
    snprintf(victim, sizeof victim, "%s/logvictim", dir);
    snprintf(logs, sizeof logs, "%s/logs", dir);
    snprintf(path, sizeof path, "%s/logs/31", dir);
    assert_int_equal(mkdir(victim, 0755), 0);
    assert_true(mkdir(logs, 0700) == 0 || errno == EEXIST);
    assert_int_equal(symlink(victim, path), 0);
    cr_test_spec_sh(&s, 31, "echo ran");
    assert_int_equal(cr_proc_spawn(dir, "n", &s, &p, err, sizeof err), 0);
    run_to_end(&p);
    assert_int_equal(p.exit_code, 126);
    cr_proc_fini(&p);
    struct stat sb;
    assert_int_equal(lstat(path, &sb), 0);
    assert_true(S_ISLNK(sb.st_mode));
    snprintf(path, sizeof path, "%s/out", victim);
    assert_int_not_equal(access(path, F_OK), 0);
    assert_int_equal(stat(victim, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0755);
    snprintf(path, sizeof path, "%s/logs/31", dir);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(victim), 0);
    if (geteuid() != 0) {
        return;
    }
    /* Another user's directory. */
    snprintf(path, sizeof path, "%s/logs/32", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(chown(path, 64005, 64005), 0);
    cr_test_spec_sh(&s, 32, "echo ran");
    s.has_user = 1;
    s.uid = 64006;
    s.gid = 64006;
    assert_int_equal(cr_proc_spawn(dir, "n", &s, &p, err, sizeof err), 0);
    run_to_end(&p);
    assert_int_equal(p.exit_code, 126);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal((int)sb.st_uid, 64005);
    assert_int_equal(rmdir(path), 0);
    cr_proc_fini(&p);
}

static void test_rm_rf_no_escape(void **state)
{
    (void)state;
    char top[128], victim[128], target[160], path[256];
    snprintf(top, sizeof top, "%s/ckpt-job", dir);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    snprintf(target, sizeof target, "%s/victim/target", dir);
    assert_int_equal(mkdir(victim, 0700), 0);
    swapper w = {.top = top, .victim = victim};
    int64_t end = cr_mono_ns() + 3 * CR_NS_PER_SEC;
    int rounds = 0;
    while (cr_mono_ns() < end) {
        FILE *f = fopen(target, "w");
        assert_non_null(f);
        fclose(f);
        /* top/d/{f0..f199,target}: a file named like the victim's, late. */
        assert_int_equal(mkdir(top, 0700), 0);
        snprintf(path, sizeof path, "%s/d", top);
        assert_int_equal(mkdir(path, 0700), 0);
        for (int i = 0; i <= 200; i++) {
            if (i < 200) {
                snprintf(path, sizeof path, "%s/d/f%d", top, i);
            } else {
                snprintf(path, sizeof path, "%s/d/target", top);
            }
            f = fopen(path, "w");
            assert_non_null(f);
            fclose(f);
        }
        atomic_store(&w.stop, 0);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, swap_loop, &w), 0);
        int rc = cr_rm_rf(top);
        atomic_store(&w.stop, 1);
        pthread_join(t, NULL);
        struct stat sb;
        if (stat(target, &sb) != 0) {
            fail_msg("round %d: removing %s deleted %s through a swapped link", rounds, top,
                     target);
        }
        if (rc != 0) {
            /* the swapper left d2 behind: clean up for the next round */
            char cmd[300];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
            assert_int_equal(system(cmd), 0);
        }
        rounds++;
    }
    assert_true(rounds > 0);
    /* Undisturbed, it removes the whole tree (a nested directory too). */
    snprintf(path, sizeof path, "%s/d/e/f", top);
    assert_int_equal(cr_mkdir_p(path, 0700), 0);
    snprintf(path, sizeof path, "%s/d/e/f/x", top);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(cr_rm_rf(top), 0);
    struct stat sb;
    assert_int_not_equal(lstat(top, &sb), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_code_and_signal),
        cmocka_unit_test(test_tasks),
        cmocka_unit_test(test_stop_escalates),
        cmocka_unit_test(test_journal_replay),
        cmocka_unit_test(test_user),
        cmocka_unit_test(test_job_dir_refused),
        cmocka_unit_test(test_rm_rf_no_escape),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
