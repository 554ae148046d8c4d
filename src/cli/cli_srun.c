/*
 * cli_srun.c - srun and scontrol inside a Corral batch job (docs/slurm.md,
 * "Batch jobs and srun"): the corral binary run as `srun` or `scontrol`
 * (stepd's bin/ directory on the batch step's PATH).
 *
 * srun starts one job step: its tasks spread over the job's nodes (block
 * distribution: node 0's share first), each node's share started by that
 * node's agent (POST /v1/jobs/ID/step, the step credential as bearer),
 * which hands it to the job's stepd there. srun then polls each node every
 * 100 ms, copies the tasks' stdout and stderr to its own (with -l each line
 * prefixed "R: "), and exits with the highest exit code of the tasks once
 * all have ended (128 + signal for a task killed). --kill-on-bad-exit (-K)
 * stops the step at the first task that fails; SIGINT/SIGTERM stop it. Step numbers: 0, 1, ... per
 * job (a counter file in stepd's directory, under flock).
 *
 * scontrol answers `show hostnames [LIST]` (default SLURM_JOB_NODELIST),
 * expanding Slurm's host lists (n[0-3,7],gpu1).
 */
#include "cr_cli.h"

#include "cli_int.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_client.h"
#include "cr_parse.h"
#include "cr_time.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#define SRUN_MAX_NODES 1024

static volatile sig_atomic_t srun_sig;

static void on_sig(int sig)
{
    srun_sig = sig;
}

typedef struct srun_opts {
    int64_t ntasks, nodes, tpn, gpt;
    int label, kill_bad;
    int argi; /* argv index of the command */
} srun_opts;

/*
 * srun options a step accepts with no effect here (docs/slurm.md, "srun"):
 * the step's tasks share the job's GPUs, CPUs and memory as its node's
 * share of the job holds them; a step is not placed separately. Long
 * names taking a value ("--gres=gpu:1" or "--gres gpu:1"), then those
 * that take none; short options with a value ("-c4" or "-c 4").
 */
static const char *const srun_ignored_val[] = {"mpi",
                                               "export",
                                               "cpu-bind",
                                               "cpus-per-task",
                                               "job-name",
                                               "gres",
                                               "gpus",
                                               "gpus-per-node",
                                               "gpu-bind",
                                               "mem",
                                               "mem-per-cpu",
                                               "mem-per-gpu",
                                               "time",
                                               "distribution",
                                               "hint",
                                               "threads-per-core",
                                               "ntasks-per-gpu",
                                               "cpus-per-gpu",
                                               "gres-flags",
                                               "wait",
                                               "partition",
                                               "account",
                                               "qos",
                                               "constraint",
                                               "comment",
                                               "nice",
                                               "signal",
                                               "accel-bind"};
static const char *const srun_ignored_flag[] = {
    "exclusive",     "unbuffered", "overlap", "quit-on-interrupt",
    "oversubscribe", "whole",      "exact",   "no-kill"};
#define SRUN_IGNORED_SHORT_VAL "cJtGmpAqC" /* -c 4, -J name, -t time, -G n, -m dist... */
#define SRUN_IGNORED_SHORT     "uQ"        /* -u (unbuffered), -Q (quiet) */

/* 1 when argv[*i] is an ignored option (*i moved past its value), 0 when
 * not, -1 when its value is missing. */
static int ignored_opt(int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    if (a[0] == '-' && a[1] && a[1] != '-') {
        if (strchr(SRUN_IGNORED_SHORT, a[1]) && a[2] == '\0') {
            return 1;
        }
        if (!strchr(SRUN_IGNORED_SHORT_VAL, a[1])) {
            return 0;
        }
        if (a[2]) {
            return 1;
        }
        if (*i + 1 >= argc) {
            return -1;
        }
        (*i)++;
        return 1;
    }
    if (strncmp(a, "--", 2) != 0) {
        return 0;
    }
    const char *name = a + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    for (size_t k = 0; k < sizeof srun_ignored_flag / sizeof *srun_ignored_flag; k++) {
        if (!eq && strlen(srun_ignored_flag[k]) == len &&
            strncmp(name, srun_ignored_flag[k], len) == 0) {
            return 1;
        }
    }
    for (size_t k = 0; k < sizeof srun_ignored_val / sizeof *srun_ignored_val; k++) {
        if (strlen(srun_ignored_val[k]) == len && strncmp(name, srun_ignored_val[k], len) == 0) {
            if (eq) {
                return 1;
            }
            if (*i + 1 >= argc) {
                return -1;
            }
            (*i)++;
            return 1;
        }
    }
    return 0;
}

/* "-n4", "-n 4", "--ntasks=4", "--ntasks 4". Returns 1 when argv[*i] is
 * the option (its value in *val, *i moved past it), 0 when not, -1 when
 * the value is missing. */
static int opt_val(int argc, char **argv, int *i, char s, const char *l, const char **val)
{
    const char *a = argv[*i];
    size_t ll = strlen(l);
    if (s && a[0] == '-' && a[1] == s) {
        if (a[2]) {
            *val = a + 2 + (a[2] == '=');
            return 1;
        }
    } else if (strncmp(a, "--", 2) == 0 && strncmp(a + 2, l, ll) == 0 &&
               (a[2 + ll] == '=' || a[2 + ll] == '\0')) {
        if (a[2 + ll] == '=') {
            *val = a + 3 + ll;
            return 1;
        }
    } else {
        return 0;
    }
    if (*i + 1 >= argc) {
        return -1;
    }
    *val = argv[++*i];
    return 1;
}

static int parse_srun(int argc, char **argv, srun_opts *o)
{
    memset(o, 0, sizeof *o);
    o->ntasks = o->nodes = o->tpn = -1;
    /* the job's --gpus-per-task is srun's default, as in Slurm */
    const char *jg = getenv("SLURM_GPUS_PER_TASK");
    if (jg && cr_parse_i64(jg, 0, 1 << 10, &o->gpt) != 0) {
        o->gpt = 0;
    }
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i], *v = NULL;
        int64_t *num = NULL;
        int r;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if ((r = opt_val(argc, argv, &i, 'n', "ntasks", &v)) != 0) {
            num = &o->ntasks;
        } else if ((r = opt_val(argc, argv, &i, 'N', "nodes", &v)) != 0) {
            num = &o->nodes;
        } else if ((r = opt_val(argc, argv, &i, 0, "ntasks-per-node", &v)) != 0) {
            num = &o->tpn;
        } else if ((r = opt_val(argc, argv, &i, 0, "gpus-per-task", &v)) != 0) {
            num = &o->gpt;
        } else if (strcmp(a, "-l") == 0 || strcmp(a, "--label") == 0) {
            o->label = 1;
            continue;
        } else if (strcmp(a, "-K") == 0 || strcmp(a, "--kill-on-bad-exit") == 0 ||
                   strcmp(a, "--kill-on-bad-exit=1") == 0 || strcmp(a, "-K1") == 0) {
            o->kill_bad = 1;
            continue;
        } else if (strcmp(a, "--kill-on-bad-exit=0") == 0 || strcmp(a, "-K0") == 0) {
            o->kill_bad = 0;
            continue;
        } else if ((r = ignored_opt(argc, argv, &i)) != 0) {
            if (r < 0) {
                fprintf(stderr, "srun: option '%s' needs a value\n", a);
                return -1;
            }
            continue; /* accepted, no effect here (docs/slurm.md) */
        } else {
            fprintf(stderr, "srun: unrecognized option '%s' (docs/slurm.md lists srun's options)\n",
                    a);
            return -1;
        }
        if (r < 0) {
            fprintf(stderr, "srun: option '%s' needs a value\n", a);
            return -1;
        }
        if (cr_parse_i64(v, num == &o->gpt ? 0 : 1, 1 << 20, num) != 0) {
            fprintf(stderr, "srun: option '%s': '%s' is not a count\n", a, v);
            return -1;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "srun: no command given\n");
        return -1;
    }
    o->argi = i;
    return 0;
}

static int64_t env_int(const char *name, int64_t dflt)
{
    int64_t v;
    const char *s = getenv(name);
    return s && cr_parse_i64(s, 0, 1 << 20, &v) == 0 ? v : dflt;
}

/* The next step number of the job (0, 1, ...). */
static int64_t next_step(const char *dir)
{
    char *path = cr_asprintf("%s/steps", dir ? dir : "/nonexistent");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    free(path);
    if (fd < 0) {
        return (int64_t)getpid();
    }
    flock(fd, LOCK_EX);
    char buf[32] = "";
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    int64_t step = 0;
    if (n > 0) {
        buf[n] = '\0';
        cr_parse_i64(buf, 0, INT64_MAX - 1, &step);
    }
    int len = snprintf(buf, sizeof buf, "%lld", (long long)step + 1);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)len, 0) != len) {
        step = (int64_t)getpid();
    }
    flock(fd, LOCK_UN);
    close(fd);
    return step;
}

typedef struct srun_node {
    cr_client *cl;
    char *url;
    int64_t ntasks, rank0;
    int64_t *off; /* 2 per task: stdout, stderr offsets */
    int *done;    /* per task */
    cr_buf *part; /* 2 per task: a line not yet ended (-l) */
} srun_node;

static void emit(FILE *f, cr_buf *part, int label, int64_t rank, const char *s, size_t n)
{
    if (!label) {
        fwrite(s, 1, n, f);
        fflush(f);
        return;
    }
    cr_buf_append(part, s, n);
    size_t start = 0;
    for (size_t i = 0; i < part->len; i++) {
        if (part->data[i] == '\n') {
            fprintf(f, "%lld: %.*s\n", (long long)rank, (int)(i - start), part->data + start);
            start = i + 1;
        }
    }
    if (start > 0) {
        memmove(part->data, part->data + start, part->len - start);
        part->len -= start;
    }
    fflush(f);
}

static int step_call(srun_node *nd, const char *path, json_t *body, cr_client_res *res)
{
    cr_client_res_fini(res);
    cr_client_res_init(res);
    int rc = cr_client_request(nd->cl, "POST", path, body, 30 * CR_NS_PER_SEC, res);
    if (rc == 0 && json_is_false(json_object_get(res->body, "ok"))) {
        rc = -1;
    }
    return rc;
}

/* The step's record at the controller (corral show), best effort: a
 * failure changes nothing for the step. */
static void report_step(int64_t job, int64_t step, int argc, char **argv, int argi, int64_t ntasks,
                        int64_t nn, const char *state, int code)
{
    const char *server = getenv("CORRAL_STEP_SERVER"), *tok = getenv("CORRAL_STEP_TOKEN");
    if (!server || !*server || !tok) {
        return;
    }
    cr_buf name;
    cr_buf_init(&name);
    for (int i = argi; i < argc && name.len < 200; i++) {
        cr_buf_printf(&name, "%s%s", i > argi ? " " : "", argv[i]);
    }
    char *nm = cr_strndup(name.data ? name.data : "", name.len > 200 ? 200 : name.len);
    for (char *q = nm; *q; q++) {
        if ((unsigned char)*q < 0x20 || *q == 0x7f) {
            *q = ' ';
        }
    }
    /* the nodes it used: the first nn of the job's, in rank order */
    char nodes[4096] = "";
    const char *nl = getenv("SLURM_JOB_NODELIST");
    size_t off = 0;
    for (int64_t k = 0; nl && *nl && k < nn && off < sizeof nodes; k++) {
        size_t l = strcspn(nl, ",");
        off +=
            (size_t)snprintf(nodes + off, sizeof nodes - off, "%s%.*s", k ? "," : "", (int)l, nl);
        nl += l + (nl[l] == ',');
    }
    cr_client_opts co = {.server = server, .token = tok, .timeout_ns = 5 * CR_NS_PER_SEC};
    cr_client *cl = NULL;
    if (cr_client_new(&co, &cl) == 0) {
        json_t *b = json_pack("{s:I,s:s,s:I,s:s,s:s}", "step", (json_int_t)step, "name", nm,
                              "ntasks", (json_int_t)ntasks, "nodes", nodes, "state", state);
        if (strcmp(state, "running") != 0) {
            json_object_set_new(b, "exit_code", json_integer(code));
        }
        char path[80];
        snprintf(path, sizeof path, "/v1/jobs/%lld/steps", (long long)job);
        cr_client_res res;
        cr_client_res_init(&res);
        cr_client_request(cl, "POST", path, b, 5 * CR_NS_PER_SEC, &res);
        cr_client_res_fini(&res);
        json_decref(b);
        cr_client_free(cl);
    }
    free(nm);
    cr_buf_fini(&name);
}

static void kill_all(srun_node *nodes, size_t nn, const char *path, int64_t step, int sig)
{
    for (size_t i = 0; i < nn; i++) {
        if (!nodes[i].cl) {
            continue;
        }
        cr_client_res res;
        cr_client_res_init(&res);
        json_t *b =
            json_pack("{s:s,s:I,s:i}", "op", "kill", "step", (json_int_t)step, "signal", sig);
        step_call(&nodes[i], path, b, &res);
        json_decref(b);
        cr_client_res_fini(&res);
    }
}

int cr_srun_main(int argc, char **argv)
{
    srun_opts o;
    if (parse_srun(argc, argv, &o) != 0) {
        return 1;
    }
    const char *agents = getenv("CORRAL_STEP_AGENTS"), *tok = getenv("CORRAL_STEP_TOKEN");
    int64_t job = env_int("SLURM_JOB_ID", 0);
    if (!agents || !*agents || !tok || job <= 0) {
        fprintf(stderr, "srun: not inside a Corral batch job (no CORRAL_STEP_AGENTS): submit the "
                        "script with corral submit, or use corral run\n");
        return 1;
    }
    /* the job's nodes, their agents */
    char *list = cr_strdup(agents), *save = NULL;
    char *urls[SRUN_MAX_NODES];
    size_t nall = 0;
    for (char *p = list; nall < SRUN_MAX_NODES; p = NULL) {
        char *t = strtok_r(p, ",", &save);
        if (!t) {
            break;
        }
        urls[nall++] = t;
    }
    /* As Slurm's srun inside an allocation (checked against Slurm 22.05):
     * the allocation's SLURM_NTASKS and SLURM_NNODES stand for -n and -N
     * when not given; the tasks spread evenly over the nodes, the first
     * ones taking one more; --ntasks-per-node is honoured only when it
     * agrees with them; a node never gets more tasks than the allocation
     * gave it. */
    int64_t alloc_tpn = env_int("SLURM_NTASKS_PER_NODE", 1);
    alloc_tpn = alloc_tpn > 0 ? alloc_tpn : 1;
    int64_t total = o.ntasks > 0 ? o.ntasks : env_int("SLURM_NTASKS", alloc_tpn * (int64_t)nall);
    int64_t nn = o.nodes > 0 ? o.nodes : env_int("SLURM_NNODES", (int64_t)nall);
    int64_t per[SRUN_MAX_NODES] = {0};
    int code = 1;
    if (o.ntasks <= 0 && o.tpn > 0 && o.nodes <= 0 && getenv("SLURM_NTASKS") == NULL) {
        total = o.tpn * nn;
    }
    if (nn > (int64_t)nall || nn < 1) {
        fprintf(stderr, "srun: error: -N %lld: the job has %zu nodes\n", (long long)nn, nall);
        goto out;
    }
    nn = nn > total ? total : nn;
    if (o.tpn > 0 && o.tpn * nn != total) {
        fprintf(stderr,
                "srun: Warning: can't honor --ntasks-per-node set to %lld which doesn't match "
                "the requested tasks %lld with the number of requested nodes %lld. Ignoring "
                "--ntasks-per-node.\n",
                (long long)o.tpn, (long long)total, (long long)nn);
    }
    for (int64_t i = 0; i < nn; i++) {
        per[i] = total / nn + (i < total % nn ? 1 : 0);
        if (per[i] > alloc_tpn) {
            fprintf(stderr,
                    "srun: error: Unable to create step for job %lld: More processors requested "
                    "than permitted (%lld tasks on a node of %lld)\n",
                    (long long)job, (long long)per[i], (long long)alloc_tpn);
            goto out;
        }
    }
    int64_t step = next_step(getenv("CORRAL_STEP_DIR"));
    char path[80];
    snprintf(path, sizeof path, "/v1/jobs/%lld/step", (long long)job);
    srun_node *nodes = cr_calloc((size_t)nn, sizeof *nodes);
    json_t *cmd = json_array(), *env = json_array();
    for (int i = o.argi; i < argc; i++) {
        json_array_append_new(cmd, json_string(argv[i]));
    }
    extern char **environ;
    for (char **e = environ; *e; e++) {
        json_t *s = json_string(*e);
        if (s) {
            json_array_append_new(env, s);
        }
    }
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) {
        snprintf(cwd, sizeof cwd, "/");
    }
    struct sigaction sa = {.sa_handler = on_sig};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    cr_client_res res;
    cr_client_res_init(&res);
    int64_t rank = 0;
    for (int64_t i = 0; i < nn; i++) {
        srun_node *nd = &nodes[i];
        if (per[i] == 0) {
            continue;
        }
        cr_client_opts co = {.server = urls[i], .token = tok};
        if (!*urls[i] || cr_client_new(&co, &nd->cl) != 0) {
            fprintf(stderr, "srun: node %lld of the job has no agent address\n", (long long)i);
            kill_all(nodes, (size_t)nn, path, step, SIGKILL);
            goto fail;
        }
        nd->ntasks = per[i];
        nd->rank0 = rank;
        nd->off = cr_calloc((size_t)(2 * per[i]), sizeof *nd->off);
        nd->done = cr_calloc((size_t)per[i], sizeof *nd->done);
        nd->part = cr_calloc((size_t)(2 * per[i]), sizeof *nd->part);
        json_t *b = json_pack("{s:s,s:I,s:O,s:O,s:s,s:I,s:I,s:I,s:I,s:I,s:I}", "op", "start",
                              "step", (json_int_t)step, "argv", cmd, "env", env, "cwd", cwd,
                              "ntasks", (json_int_t)per[i], "rank0", (json_int_t)rank, "ntasks_all",
                              (json_int_t)total, "nodeid", (json_int_t)i, "nnodes", (json_int_t)nn,
                              "gpus_per_task", (json_int_t)o.gpt);
        int rc = step_call(nd, path, b, &res);
        json_decref(b);
        if (rc != 0) {
            const char *why = json_string_value(json_object_get(res.body, "error"));
            fprintf(stderr, "srun: step %lld.%lld: node %lld did not start its tasks: %s\n",
                    (long long)job, (long long)step, (long long)i,
                    why           ? why
                    : res.message ? res.message
                                  : "no answer");
            kill_all(nodes, (size_t)nn, path, step, SIGKILL);
            goto fail;
        }
        rank += per[i];
    }
    report_step(job, step, argc, argv, o.argi, total, nn, "running", 0);
    int worst = 0, killed = 0;
    int64_t left = total;
    while (left > 0) {
        if (srun_sig && !killed) {
            fprintf(stderr, "srun: interrupted: stopping step %lld.%lld\n", (long long)job,
                    (long long)step);
            kill_all(nodes, (size_t)nn, path, step, SIGTERM);
            killed = 1;
        }
        int got = 0;
        for (int64_t i = 0; i < nn; i++) {
            srun_node *nd = &nodes[i];
            if (!nd->cl) {
                continue;
            }
            json_t *off = json_array();
            for (int64_t k = 0; k < 2 * nd->ntasks; k++) {
                json_array_append_new(off, json_integer(nd->off[k]));
            }
            json_t *b =
                json_pack("{s:s,s:I,s:o}", "op", "poll", "step", (json_int_t)step, "off", off);
            int rc = step_call(nd, path, b, &res);
            json_decref(b);
            if (rc != 0) {
                continue; /* asked again on the next round */
            }
            json_t *tasks = json_object_get(res.body, "tasks");
            for (size_t k = 0; k < json_array_size(tasks) && (int64_t)k < nd->ntasks; k++) {
                json_t *t = json_array_get(tasks, k);
                int64_t r = nd->rank0 + (int64_t)k;
                json_t *so = json_object_get(t, "out"), *se = json_object_get(t, "err");
                if (json_string_length(so) > 0) {
                    emit(stdout, &nd->part[2 * k], o.label, r, json_string_value(so),
                         json_string_length(so));
                    nd->off[2 * k] += (int64_t)json_string_length(so);
                    got = 1;
                }
                if (json_string_length(se) > 0) {
                    emit(stderr, &nd->part[2 * k + 1], o.label, r, json_string_value(se),
                         json_string_length(se));
                    nd->off[2 * k + 1] += (int64_t)json_string_length(se);
                    got = 1;
                }
                json_t *ex = json_object_get(t, "exit");
                if (json_is_integer(ex) && !nd->done[k]) {
                    nd->done[k] = 1;
                    left--;
                    int c = (int)json_integer_value(ex);
                    if (c != 0 && o.kill_bad && !killed) {
                        fprintf(stderr,
                                "srun: task %lld exited with code %d: stopping step %lld.%lld "
                                "(--kill-on-bad-exit)\n",
                                (long long)r, c, (long long)job, (long long)step);
                        kill_all(nodes, (size_t)nn, path, step, SIGTERM);
                        killed = 1;
                    } else if (c != 0 && !killed) {
                        fprintf(stderr, "srun: error: task %lld: exited with exit code %d\n",
                                (long long)r, c);
                    }
                    worst = c > worst ? c : worst;
                }
            }
        }
        if (left > 0 && !got) {
            struct timespec ts = {0, 100 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    /* lines a task left unended (-l) */
    for (int64_t i = 0; i < nn; i++) {
        for (int64_t k = 0; nodes[i].part && k < 2 * nodes[i].ntasks; k++) {
            cr_buf *p = &nodes[i].part[k];
            if (p->len > 0) {
                fprintf(k % 2 ? stderr : stdout, "%lld: %.*s\n",
                        (long long)(nodes[i].rank0 + k / 2), (int)p->len, p->data);
            }
        }
    }
    code = worst; /* as Slurm's: with -K, the stopped tasks' 143 too */
    report_step(job, step, argc, argv, o.argi, total, nn,
                killed && srun_sig ? "cancelled"
                : code             ? "failed"
                                   : "completed",
                code);
fail:
    cr_client_res_fini(&res);
    json_decref(cmd);
    json_decref(env);
    for (int64_t i = 0; i < nn; i++) {
        cr_client_free(nodes[i].cl);
        free(nodes[i].off);
        free(nodes[i].done);
        for (int64_t k = 0; nodes[i].part && k < 2 * nodes[i].ntasks; k++) {
            cr_buf_fini(&nodes[i].part[k]);
        }
        free(nodes[i].part);
    }
    free(nodes);
out:
    free(list);
    return code;
}

/* Print each host of a Slurm host list: "n[0-2,5],gpu1". */
static int expand_hosts(const char *list)
{
    const char *p = list;
    while (*p) {
        const char *br = NULL, *q = p;
        while (*q && *q != ',') {
            if (*q == '[') {
                br = q;
                q = strchr(q, ']');
                if (!q) {
                    fprintf(stderr, "scontrol: bad host list '%s'\n", list);
                    return 1;
                }
            }
            q++;
        }
        if (!br) {
            printf("%.*s\n", (int)(q - p), p);
        } else {
            const char *end = strchr(br, ']');
            char ranges[1024];
            snprintf(ranges, sizeof ranges, "%.*s", (int)(end - br - 1), br + 1);
            char *save = NULL;
            for (char *r = strtok_r(ranges, ",", &save); r; r = strtok_r(NULL, ",", &save)) {
                char *dash = strchr(r, '-');
                int64_t lo, hi;
                int width = (int)(dash ? (size_t)(dash - r) : strlen(r));
                if (dash) {
                    *dash = '\0';
                }
                if (cr_parse_i64(r, 0, INT32_MAX, &lo) != 0 ||
                    cr_parse_i64(dash ? dash + 1 : r, 0, INT32_MAX, &hi) != 0 || hi < lo ||
                    hi - lo > 100000) {
                    fprintf(stderr, "scontrol: bad host list '%s'\n", list);
                    return 1;
                }
                for (int64_t n = lo; n <= hi; n++) {
                    printf("%.*s%0*lld%.*s\n", (int)(br - p), p, width, (long long)n,
                           (int)(q - end - 1), end + 1);
                }
            }
        }
        p = *q ? q + 1 : q;
    }
    return 0;
}

int cr_scontrol_main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "show") == 0 && strcmp(argv[2], "hostnames") == 0) {
        const char *list = argc >= 4 ? argv[3] : getenv("SLURM_JOB_NODELIST");
        if (!list) {
            fprintf(stderr, "scontrol: show hostnames: no host list (SLURM_JOB_NODELIST unset)\n");
            return 1;
        }
        return expand_hosts(list);
    }
    fprintf(stderr, "scontrol: only 'scontrol show hostnames [LIST]' is answered inside a Corral "
                    "job (corral show JOB for the rest)\n");
    return 1;
}
