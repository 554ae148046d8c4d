/*
 * cli_run.c - the interactive side of the client: `corral run` (srun-like:
 * submit, stream the job's output while it runs, exit with its exit code;
 * Ctrl-C cancels it) and `corral alloc` (salloc-like: hold an allocation,
 * run a shell or a command here with the job's variables, release the
 * allocation when it ends).
 *
 * Streaming polls the controller's log route for stdout and stderr from the
 * offsets reached (every 200 ms while nothing new comes), so it works
 * whether or not the server streams. stdin is not forwarded to the job.
 *
 * SIGINT/SIGTERM set a flag (the one piece of process-wide state here: a
 * signal handler can reach nothing else); the loop then cancels the job,
 * waits for it to end and exits 130.
 */
#include "cli_int.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_time.h"

#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

typedef struct sink {
    FILE *f;
    uint64_t bytes;
} sink;

static int put(void *ud, const char *data, size_t len)
{
    sink *s = ud;
    if (fwrite(data, 1, len, s->f) != len) {
        return 1;
    }
    fflush(s->f);
    s->bytes += len;
    return 0;
}

/* The exit code --wait would give for a finished job; -1 while active. */
static int job_code(const json_t *job)
{
    const char *st = json_string_value(json_object_get(job, "state"));
    int64_t ec = json_integer_value(json_object_get(job, "exit_code"));
    int64_t sig = json_integer_value(json_object_get(job, "signal"));
    if (!st) {
        return 1;
    }
    if (strcmp(st, "completed") == 0) {
        return 0;
    }
    if (strcmp(st, "failed") == 0) {
        return sig > 0 ? (int)(128 + sig) : ec > 0 ? (int)ec : 1;
    }
    if (strcmp(st, "cancelled") == 0) {
        return ec > 0 ? (int)ec : 1;
    }
    return -1;
}

static void nap(void)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static void catch_signals(struct sigaction *old_int, struct sigaction *old_term)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    interrupted = 0;
    sigaction(SIGINT, &sa, old_int);
    sigaction(SIGTERM, &sa, old_term);
}

static void cancel_once(cli_ctx *ctx, int64_t id, bool *done)
{
    if (*done) {
        return;
    }
    *done = true;
    char ref[32];
    snprintf(ref, sizeof ref, "%" PRId64, id);
    cr_client_res res;
    cr_client_res_init(&res);
    if (cr_client_job_action_ref(ctx->client, ref, "cancel", false, &res) == 0) {
        fprintf(ctx->err, "corral %s: cancelled job %" PRId64 "\n", ctx->cmd, id);
    }
    cr_client_res_fini(&res);
}

int cr__cli_run_follow(cli_ctx *ctx, int64_t id)
{
    struct sigaction old_int, old_term;
    catch_signals(&old_int, &old_term);
    uint64_t off[2] = {0, 0};
    static const char *const streams[2] = {"stdout", "stderr"};
    FILE *to[2] = {ctx->out, ctx->err};
    bool cancelled = false, last = false;
    int code = 1;
    cr_client_res res;
    cr_client_res_init(&res);
    for (;;) {
        if (interrupted) {
            cancel_once(ctx, id, &cancelled);
        }
        uint64_t got = 0;
        for (int k = 0; k < 2; k++) {
            sink s = {.f = to[k]};
            /* a job that has not started has no log yet: not an error here */
            cr_client_job_logs_rank(ctx->client, id, streams[k], off[k], -1, false, put, &s, &res);
            off[k] += s.bytes;
            got += s.bytes;
        }
        if (last && got == 0) {
            break;
        }
        int rc = cr_client_job_get(ctx->client, id, &res);
        if (rc < 0 && res.status == 0) {
            code = cr__cli_fail(ctx, rc, &res); /* the controller is gone */
            break;
        }
        int jc = rc == 0 ? job_code(res.body) : -1;
        if (jc >= 0) {
            code = jc;
            last = true; /* drain what came after the last read */
            continue;
        }
        if (got == 0) {
            nap();
        }
    }
    cr_client_res_fini(&res);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return cancelled ? 130 : code;
}

int cr__cli_alloc_session(cli_ctx *ctx, int64_t id, char **cmd, size_t ncmd)
{
    struct sigaction old_int, old_term;
    catch_signals(&old_int, &old_term);
    bool cancelled = false;
    int code = 1;
    cr_client_res res;
    cr_client_res_init(&res);
    /* wait for the allocation */
    fprintf(ctx->err, "corral alloc: job %" PRId64 " waiting for its allocation\n", id);
    json_t *job = NULL;
    while (!interrupted) {
        int rc = cr_client_job_get(ctx->client, id, &res);
        if (rc < 0 && res.status == 0) {
            code = cr__cli_fail(ctx, rc, &res);
            goto out;
        }
        const char *st = rc == 0 ? json_string_value(json_object_get(res.body, "state")) : NULL;
        if (st && strcmp(st, "running") == 0) {
            job = json_incref(res.body);
            break;
        }
        if (rc == 0 && job_code(res.body) >= 0) {
            fprintf(ctx->err, "corral alloc: job %" PRId64 " ended before it started: %s\n", id,
                    json_string_value(json_object_get(res.body, "reason")));
            goto out;
        }
        nap();
    }
    if (!job) {
        code = 130;
        goto out;
    }
    const char *nodes = json_string_value(json_object_get(job, "run_nodes"));
    fprintf(ctx->err, "corral alloc: job %" PRId64 " holds %s\n", id, nodes ? nodes : "?");
    fflush(ctx->err);
    char idtext[32];
    snprintf(idtext, sizeof idtext, "%" PRId64, id);
    /* the shell (or command) runs here, with what srun-style tools read */
    pid_t pid = fork();
    if (pid == 0) {
        setenv("CORRAL_JOB_ID", idtext, 1);
        setenv("SLURM_JOB_ID", idtext, 1);
        setenv("SLURM_JOBID", idtext, 1);
        if (nodes) {
            setenv("CORRAL_NODELIST", nodes, 1);
            setenv("SLURM_NODELIST", nodes, 1);
            setenv("SLURM_JOB_NODELIST", nodes, 1);
        }
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        if (ncmd > 0) {
            execvp(cmd[0], cmd);
        } else {
            const char *sh = getenv("SHELL");
            sh = sh && *sh ? sh : "/bin/sh";
            execl(sh, sh, (char *)NULL);
        }
        _exit(127);
    }
    int st = 0;
    if (pid > 0) {
        /* Ctrl-C belongs to the shell: the allocation ends with it */
        signal(SIGINT, SIG_IGN);
        while (waitpid(pid, &st, 0) < 0) {
        }
        code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    } else {
        fprintf(ctx->err, "corral alloc: cannot start a shell\n");
    }
out:
    cancel_once(ctx, id, &cancelled);
    json_decref(job);
    cr_client_res_fini(&res);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return code;
}
