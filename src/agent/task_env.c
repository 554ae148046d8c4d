/*
 * task_env.c - per-task variables and output paths. See cr_task_env.h.
 */
#include "cr_task_env.h"

#include "cr_alloc.h"
#include "cr_buf.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TASK_VARS_MAX 48
#define PATH_OUT_MAX  4095

int cr_task_count(const cr_job_spec *s)
{
    if (s->batch) {
        return 1; /* stepd: the script once on rank 0, steps through srun */
    }
    if (s->has_gang && s->gang.tasks_per_node > 0) {
        return s->gang.tasks_per_node;
    }
    return 1;
}

int cr_task_rank(const cr_job_spec *s, int local_rank)
{
    return (s->has_gang ? s->gang.rank_offset : 0) + local_rank;
}

/* Whether kv ("K=V") sets one of the names in vars ("K=V" each, n of them). */
static int set_by(const char *kv, char *const *vars, size_t n)
{
    const char *eq = strchr(kv, '=');
    size_t kl = eq ? (size_t)(eq - kv) : strlen(kv);
    for (size_t i = 0; i < n; i++) {
        if (strncmp(vars[i], kv, kl) == 0 && vars[i][kl] == '=') {
            return 1;
        }
    }
    return 0;
}

char **cr_task_env(char *const *env, const cr_job_spec *s, int local_rank, const char *node)
{
    char *vars[TASK_VARS_MAX];
    size_t nv = 0;
#define ADD(...) vars[nv++] = cr_asprintf(__VA_ARGS__)
    long long job = (long long)s->job;
    ADD("SLURM_JOB_ID=%lld", job);
    ADD("SLURM_JOBID=%lld", job);
    if (node) {
        ADD("SLURMD_NODENAME=%s", node);
    }
    if (s->name) {
        ADD("SLURM_JOB_NAME=%s", s->name);
    }
    if (s->submit_dir) {
        ADD("SLURM_SUBMIT_DIR=%s", s->submit_dir);
    }
    if (s->cpus_per_task > 0) {
        /* sbatch -c: a count (a fraction Corral allows is rounded up) */
        long long c = (long long)s->cpus_per_task;
        ADD("SLURM_CPUS_PER_TASK=%lld", c + ((double)c < s->cpus_per_task ? 1 : 0));
    }
    if (s->array_index >= 0) {
        ADD("CORRAL_ARRAY_TASK_ID=%lld", (long long)s->array_index);
        ADD("SLURM_ARRAY_TASK_ID=%lld", (long long)s->array_index);
        ADD("SLURM_ARRAY_JOB_ID=%lld", (long long)s->array_job);
        if (s->array_count > 0) {
            ADD("SLURM_ARRAY_TASK_COUNT=%lld", (long long)s->array_count);
            ADD("SLURM_ARRAY_TASK_MIN=%lld", (long long)s->array_min);
            ADD("SLURM_ARRAY_TASK_MAX=%lld", (long long)s->array_max);
            ADD("SLURM_ARRAY_TASK_STEP=%lld", (long long)s->array_step);
        }
    }
    if (s->has_gang) {
        const cr_gang *g = &s->gang;
        int tpn = g->tasks_per_node > 0 ? g->tasks_per_node : 1;
        int rank = g->rank_offset + local_rank;
        int world = g->world_size;
        int local_world = g->local_world_size;
        if (g->tasks_per_node > 0) {
            world = g->nnodes * tpn;
            local_world = tpn;
        }
        ADD("RANK=%d", rank);
        ADD("LOCAL_RANK=%d", local_rank);
        ADD("WORLD_SIZE=%d", world);
        ADD("LOCAL_WORLD_SIZE=%d", local_world);
        ADD("GROUP_RANK=%d", g->node_rank);
        ADD("NODE_RANK=%d", g->node_rank);
        ADD("NNODES=%d", g->nnodes);
        ADD("MASTER_ADDR=%s", g->master_addr);
        ADD("MASTER_PORT=%d", g->master_port);
        /* torchrun reads its arguments from PET_*: a launcher task starts
         * one worker per GPU, any other task stands for itself. */
        ADD("PET_NNODES=%d", g->nnodes);
        ADD("PET_NPROC_PER_NODE=%d",
            g->launcher && g->gpus_per_node > 0 ? g->gpus_per_node : local_world);
        ADD("PET_NODE_RANK=%d", g->node_rank);
        ADD("PET_MASTER_ADDR=%s", g->master_addr);
        ADD("PET_MASTER_PORT=%d", g->master_port);
        ADD("SLURM_PROCID=%d", rank);
        ADD("SLURM_LOCALID=%d", local_rank);
        ADD("SLURM_NODEID=%d", g->node_rank);
        if (!s->ntasks_unset) {
            ADD("SLURM_NTASKS=%d", world);
            ADD("SLURM_NPROCS=%d", world);
        }
        ADD("SLURM_NNODES=%d", g->nnodes);
        ADD("SLURM_JOB_NUM_NODES=%d", g->nnodes);
        ADD("SLURM_NTASKS_PER_NODE=%d", local_world);
        ADD("SLURM_STEP_NUM_TASKS=%d", world);
        if (s->nodelist) {
            ADD("SLURM_NODELIST=%s", s->nodelist);
            ADD("SLURM_JOB_NODELIST=%s", s->nodelist);
        }
        /* sbatch's form: "4(x2)" for 4 tasks on each of 2 nodes */
        if (g->nnodes > 1) {
            ADD("SLURM_TASKS_PER_NODE=%d(x%d)", local_world, g->nnodes);
        } else {
            ADD("SLURM_TASKS_PER_NODE=%d", local_world);
        }
        ADD("SLURM_GPUS_ON_NODE=%zu", s->gpu_count);
    }
#undef ADD
    size_t ne = 0;
    while (env && env[ne]) {
        ne++;
    }
    char **v = cr_calloc(ne + nv + 1, sizeof *v);
    size_t n = 0;
    for (size_t i = 0; i < ne; i++) {
        if (!set_by(env[i], vars, nv)) {
            v[n++] = cr_strdup(env[i]);
        }
    }
    for (size_t i = 0; i < nv; i++) {
        v[n++] = vars[i];
    }
    v[n] = NULL;
    return v;
}

char *cr_task_path(const char *pattern, const cr_job_spec *s, int rank, const char *node)
{
    cr_buf b;
    cr_buf_init(&b);
    for (const char *p = pattern; *p; p++) {
        if (*p != '%' || p[1] == '\0') {
            cr_buf_putc(&b, *p);
            continue;
        }
        p++;
        switch (*p) {
        case 'j':
            cr_buf_printf(&b, "%lld", (long long)s->job);
            break;
        case 'A':
            cr_buf_printf(&b, "%lld", (long long)(s->array_job > 0 ? s->array_job : s->job));
            break;
        case 'a':
            cr_buf_printf(&b, "%lld", (long long)(s->array_index >= 0 ? s->array_index : 0));
            break;
        case 't':
            cr_buf_printf(&b, "%d", rank);
            break;
        case 'N':
            cr_buf_puts(&b, node ? node : "");
            break;
        case 'x':
            cr_buf_puts(&b, s->name ? s->name : "job");
            break;
        case '%':
            cr_buf_putc(&b, '%');
            break;
        default:
            cr_buf_putc(&b, '%');
            cr_buf_putc(&b, *p);
            break;
        }
    }
    if (b.len > PATH_OUT_MAX) {
        cr_buf_fini(&b);
        return NULL;
    }
    return cr_buf_take(&b);
}

char *cr_task_log_path(const char *state_dir, int64_t job, int rank, int ntasks, const char *stream)
{
    if (rank < 0 || ntasks <= 1) {
        return cr_asprintf("%s/logs/%lld/%s", state_dir, (long long)job, stream);
    }
    return cr_asprintf("%s/logs/%lld/%d.%s", state_dir, (long long)job, rank, stream);
}

/* Write the shipped script; returned new: its path, or NULL. */
static char *write_script(const char *state_dir, const cr_job_spec *s)
{
    char *dir = cr_asprintf("%s/scripts", state_dir);
    char *path = cr_asprintf("%s/%lld.sh", dir, (long long)s->job);
    char *tmp = cr_asprintf("%s.tmp", path);
    mkdir(dir, 0700); /* the agent's: a job reads its script through an fd */
    free(dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0755);
    size_t len = strlen(s->script);
    int ok = fd >= 0 && write(fd, s->script, len) == (ssize_t)len;
    if (fd >= 0) {
        ok = close(fd) == 0 && ok;
    }
    ok = ok && chmod(tmp, 0755) == 0 && rename(tmp, path) == 0;
    free(tmp);
    if (!ok) {
        free(path);
        return NULL;
    }
    return path;
}

void cr_tasks_prepare(cr_tasks *t, const char *state_dir, const cr_job_spec *spec, char *const *env,
                      const char *node)
{
    memset(t, 0, sizeof *t);
    t->n = cr_task_count(spec);
    size_t n = (size_t)t->n;
    size_t argc = spec->argc, off = 0;
    t->script_path = spec->script ? write_script(state_dir, spec) : NULL;
    int via_sh = t->script_path && strncmp(spec->script, "#!", 2) != 0;
    t->argv = cr_calloc(argc + 5, sizeof *t->argv);
    int rank0 = !spec->has_gang || spec->gang.node_rank == 0;
    if (spec->batch) {
        /* `corral stepd [-- SCRIPT ARGS]`: the agent's own binary */
        char self[4096];
        ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
        self[sl > 0 ? sl : 0] = '\0';
        t->argv[off++] = cr_strdup(sl > 0 ? self : "corral");
        t->argv[off++] = cr_strdup("stepd");
        if (!rank0) {
            argc = 0; /* holds the node for steps */
        } else {
            t->argv[off++] = cr_strdup("--");
        }
    }
    if (via_sh && argc > 0) {
        t->argv[off++] = cr_strdup("/bin/sh");
    }
    for (size_t i = 0; i < argc; i++) {
        /* the script is the task's fd 3 (CR_TASK_SCRIPT_FD): the state dir
         * is the agent's alone, and the job may run as another user */
        t->argv[off++] = cr_strdup(i == 0 && t->script_path ? "/dev/fd/3" : spec->argv[i]);
    }
    if (off == 0) {
        t->argv[off++] = cr_strdup("");
    }
    t->envps = cr_calloc(n, sizeof *t->envps);
    t->out_paths = cr_calloc(n, sizeof *t->out_paths);
    t->err_paths = cr_calloc(n, sizeof *t->err_paths);
    t->user_out = cr_calloc(n, sizeof *t->user_out);
    t->user_err = cr_calloc(n, sizeof *t->user_err);
    for (size_t i = 0; i < n; i++) {
        int rank = cr_task_rank(spec, (int)i);
        t->envps[i] = cr_task_env(env, spec, (int)i, node);
        t->out_paths[i] = cr_task_log_path(state_dir, spec->job, rank, t->n, "out");
        t->err_paths[i] = cr_task_log_path(state_dir, spec->job, rank, t->n, "err");
        if (spec->batch && !rank0) {
            continue; /* -o/-e are the batch step's (rank 0); steps' output goes to srun */
        }
        if (spec->out_pattern) {
            t->user_out[i] = cr_task_path(spec->out_pattern, spec, rank, node);
        }
        if (spec->err_pattern) {
            t->user_err[i] = cr_task_path(spec->err_pattern, spec, rank, node);
        } else if (spec->out_pattern) {
            /* sbatch: without -e, stderr goes where stdout goes */
            t->user_err[i] = t->user_out[i] ? cr_strdup(t->user_out[i]) : NULL;
        }
    }
}

char *cr_task_file_note(const char *state_dir, int64_t job, int rank, const char *stream)
{
    return cr_asprintf("%s/outfiles/%lld.%d.%s", state_dir, (long long)job, rank < 0 ? 0 : rank,
                       stream);
}

/* Write one note: "UID\nPATH" (PATH absolute); failures only lose the
 * fallback. */
static void note_one(const char *note, long long uid, const char *workdir, const char *path)
{
    char *abs = path[0] == '/' ? cr_strdup(path)
                               : cr_asprintf("%s%s%s", workdir,
                                             workdir[strlen(workdir) - 1] == '/' ? "" : "/", path);
    char *tmp = cr_asprintf("%s.tmp", note);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        char *text = cr_asprintf("%lld\n%s", uid, abs);
        size_t len = strlen(text);
        int ok = write(fd, text, len) == (ssize_t)len;
        ok = close(fd) == 0 && ok;
        if (ok) {
            rename(tmp, note);
        } else {
            unlink(tmp);
        }
        free(text);
    }
    free(tmp);
    free(abs);
}

void cr_tasks_note_files(const cr_tasks *t, const char *state_dir, const cr_job_spec *spec,
                         const char *workdir)
{
    if (!spec->out_pattern && !spec->err_pattern) {
        return;
    }
    char *dir = cr_asprintf("%s/outfiles", state_dir);
    mkdir(dir, 0700); /* the agent's: a job cannot point a note elsewhere */
    free(dir);
    long long uid = spec->has_user ? (long long)spec->uid : (long long)geteuid();
    for (int i = 0; i < t->n; i++) {
        int rank = cr_task_rank(spec, i);
        const char *paths[2] = {t->user_out[i], t->user_err[i]};
        const char *streams[2] = {"out", "err"};
        for (int k = 0; k < 2; k++) {
            char *note = cr_task_file_note(state_dir, spec->job, rank, streams[k]);
            if (paths[k] && !(k == 1 && paths[0] && strcmp(paths[0], paths[1]) == 0)) {
                note_one(note, uid, workdir, paths[k]);
            } else {
                unlink(note); /* a retry's files are this run's */
            }
            free(note);
        }
    }
}

void cr_tasks_fini(cr_tasks *t)
{
    for (int i = 0; i < t->n; i++) {
        cr_strv_free(t->envps[i]);
        free(t->out_paths[i]);
        free(t->err_paths[i]);
        free(t->user_out[i]);
        free(t->user_err[i]);
    }
    free(t->envps);
    free(t->out_paths);
    free(t->err_paths);
    free(t->user_out);
    free(t->user_err);
    cr_strv_free(t->argv);
    free(t->script_path);
    memset(t, 0, sizeof *t);
}

int cr_task_signal(const char *name)
{
    static const struct {
        const char *name;
        int sig;
    } sigs[] = {{"USR1", SIGUSR1}, {"USR2", SIGUSR2},  {"TERM", SIGTERM}, {"INT", SIGINT},
                {"HUP", SIGHUP},   {"QUIT", SIGQUIT},  {"ALRM", SIGALRM}, {"CONT", SIGCONT},
                {"KILL", SIGKILL}, {"WINCH", SIGWINCH}};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        if (strcmp(sigs[i].name, name) == 0) {
            return sigs[i].sig;
        }
    }
    return 0;
}
