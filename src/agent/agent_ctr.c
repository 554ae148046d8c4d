/*
 * agent_ctr.c - the agent's side of jobs with an image: prepare (image,
 * mounts, secret env file, podman's argv), remove the container when the
 * job ends, and sweep containers no running job owns. The podman commands
 * are in container.c. See docs/containers.md.
 */
#include "agent_int.h"

#include "cr_alloc.h"
#include "cr_envname.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CTR_SWEEP_NS (5 * CR_NS_PER_SEC)

/* <state>/ctr/<job>-<run>.env: the secrets podman reads (0600). */
static char *env_file_path(const agent *a, const cr_job_spec *s)
{
    return cr_asprintf("%s/ctr/%lld-%lld.env", a->cfg.state_dir, (long long)s->job,
                       (long long)s->run);
}

/* The job's cgroup relative to the v1 hierarchy roots ("/<own>/corral-<node>-<instance>/job-<id>"),
 * when the agent has v1 cgroups: the container nests there. NULL otherwise.
 * job 0: the agent's "/<own>/corral-<node>-<instance>". */
static char *cgroup_parent(const agent *a, int64_t job)
{
    const char *v1 = a->iso.v1[CR_ISO_V1_DEVICES]  ? a->iso.v1[CR_ISO_V1_DEVICES]
                     : a->iso.v1[CR_ISO_V1_MEMORY] ? a->iso.v1[CR_ISO_V1_MEMORY]
                                                   : a->iso.v1[CR_ISO_V1_CPU];
    const char *root = "/sys/fs/cgroup/";
    if (!v1 || strncmp(v1, root, strlen(root)) != 0) {
        return NULL;
    }
    const char *rel = strchr(v1 + strlen(root), '/');
    if (!rel) {
        return NULL;
    }
    if (job == 0) {
        return cr_strdup(rel);
    }
    return cr_asprintf("%s/job-%lld", rel, (long long)job);
}

void cr__agent_ctr_fini(agent *a)
{
    if (!a->ctr.ok) {
        return;
    }
    char *rel = cgroup_parent(a, 0);
    cr_ctr_cgroup_cleanup(rel);
    free(rel);
}

/* Secrets into a 0600 file, one K=V a line (podman's --env-file). A value
 * with a newline cannot be said there: refused. */
static int write_env_file(const char *path, const cr_job_spec *s, char *why, size_t whylen)
{
    for (size_t i = 0; i < s->secretc; i++) {
        if (strchr(s->secret_env[i], '\n')) {
            snprintf(why, whylen,
                     "secret %.*s: a value with a newline cannot be passed to a "
                     "container",
                     (int)(strchr(s->secret_env[i], '=') - s->secret_env[i]), s->secret_env[i]);
            return CR_EINVAL;
        }
    }
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(why, whylen, "cannot create %s: %s", path, strerror(errno));
        return CR_EIO;
    }
    int rc = 0;
    for (size_t i = 0; i < s->secretc && rc == 0; i++) {
        if (cr_env_reserved(s->secret_env[i], strcspn(s->secret_env[i], "="))) {
            continue; /* the node's own (NVIDIA_VISIBLE_DEVICES...): after --env, it would win */
        }
        size_t n = strlen(s->secret_env[i]);
        if (write(fd, s->secret_env[i], n) != (ssize_t)n || write(fd, "\n", 1) != 1) {
            rc = CR_EIO;
        }
    }
    if (close(fd) != 0 || rc) {
        snprintf(why, whylen, "cannot write %s", path);
        unlink(path);
        return CR_EIO;
    }
    return 0;
}

int cr__agent_ctr_prepare(agent *a, const cr_job_spec *s, cr_job_spec **out, char *how,
                          size_t howlen, int64_t *pull_ms, char *why, size_t whylen, int *fatal)
{
    int rc = 0;
    char **env = NULL, **argv = NULL;
    char *envf = NULL, *parent = NULL;
    json_t *j = NULL;
    *out = NULL;
    *fatal = 0;
    if (s->has_gang && s->gang.tasks_per_node > 1) {
        /* One container per job and node: a launcher inside the image
         * (torchrun, mpirun) starts the node's processes. */
        snprintf(why, whylen,
                 "a container job runs one task per node (got %d): start the node's "
                 "processes with a launcher in the image (torchrun, mpirun)",
                 s->gang.tasks_per_node);
        *fatal = 1;
        rc = CR_EINVAL;
        goto out;
    }
    if ((rc = cr_ctr_mounts_ok(s, why, whylen)) < 0) {
        *fatal = 1;
        goto out;
    }
    cr_ctr_image img;
    rc = cr_ctr_image_ready(&a->ctr, s, &img, how, howlen, pull_ms, why, whylen);
    if (rc < 0) {
        /* An image that is not there, an archive that does not load, a
         * registry that refuses: the job fails with that, not a retry loop. */
        *fatal = 1;
        goto out;
    }
    cr__agent_img_used(a, img.name);
    /* A container of this run left by an earlier attempt would block the name. */
    char *name = cr_ctr_name(s);
    cr_ctr_remove(&a->ctr, name);
    free(name);
    parent = cgroup_parent(a, s->job);
    cr_ctr_cgroup_cleanup(parent); /* what an earlier run left below the job's cgroup */
    if (s->secretc > 0) {
        char *dir = cr_asprintf("%s/ctr", a->cfg.state_dir);
        cr_mkdir_p(dir, 0700);
        free(dir);
        envf = env_file_path(a, s);
        if ((rc = write_env_file(envf, s, why, whylen)) < 0) {
            *fatal = rc == CR_EINVAL;
            goto out;
        }
    }
    /* The job's variables without the secrets (those go in the file). */
    cr_job_spec plain = *s;
    plain.secret_env = NULL;
    plain.secretc = 0;
    env = cr_job_env(&plain, NULL, a->cfg.node);
    /* podman runs the image id looked up above: no name is resolved twice. */
    cr_job_spec by_id = *s;
    by_id.ctr.image = img.id;
    argv = cr_ctr_argv(&a->ctr, &a->iso, &by_id, a->cfg.node, env, envf, parent);
    /* podman's own spec: its argv, no env of the job's (the container
     * gets those from -e and the file), run as root by the shim. */
    j = cr_job_spec_to_json(s);
    json_t *cmd = json_array();
    for (char **p = argv; *p; p++) {
        json_array_append_new(cmd, json_string(*p));
    }
    json_object_set_new(j, "command", cmd);
    json_object_set_new(j, "env", json_object());
    json_object_set_new(json_object_get(j, "container"), "podman", json_true());
    cr_job_spec *ps = cr_calloc(1, sizeof *ps);
    char err[256];
    if (cr_job_spec_from_json(j, "", ps, err, sizeof err) < 0) {
        free(ps);
        snprintf(why, whylen, "container spec: %s", err);
        rc = CR_EINVAL;
        goto out;
    }
    *out = ps;
out:
    if (rc < 0 && envf) {
        unlink(envf);
    }
    json_decref(j);
    cr_strv_free(env);
    cr_strv_free(argv);
    free(envf);
    free(parent);
    return rc;
}

void cr__agent_ctr_ended(agent *a, const cr_job_spec *s)
{
    if (!s->ctr.image || !s->ctr.podman || !a->ctr.ok) {
        return;
    }
    char *name = cr_ctr_name(s);
    char *envf = env_file_path(a, s);
    char *parent = cgroup_parent(a, s->job);
    unlink(envf);
    if (cr_ctr_remove(&a->ctr, name) == 0) {
        cr_debug("agent: job=%lld container %s removed", (long long)s->job, name);
    }
    cr_ctr_cgroup_cleanup(parent);
    a->ctr_left = 1; /* the next sweep checks that it is gone */
    cr__agent_img_evict(a);
    free(name);
    free(envf);
    free(parent);
}

void cr__agent_ctr_stop(agent *a, const cr_proc *p, int64_t grace_ns)
{
    if (!p->spec.ctr.image || !p->spec.ctr.podman || !a->ctr.ok || grace_ns <= 0 ||
        p->state != CR_PROC_STOPPING) {
        return; /* no grace: the group's SIGKILL, then rm -f when it is reaped */
    }
    char *name = cr_ctr_name(&p->spec);
    cr_ctr_stop_async(&a->ctr, name, (grace_ns + CR_NS_PER_SEC - 1) / CR_NS_PER_SEC);
    free(name);
}

/* The running proc whose container is called name, or NULL. */
static const cr_proc *owner(const agent *a, const char *name)
{
    for (size_t i = 0; i < a->nprocs; i++) {
        const cr_proc *p = &a->procs[i];
        if (p->state == CR_PROC_EXITED || !p->spec.ctr.image) {
            continue;
        }
        char *n = cr_ctr_name(&p->spec);
        int same = strcmp(n, name) == 0;
        free(n);
        if (same) {
            return p;
        }
    }
    return NULL;
}

void cr__agent_ctr_sweep(agent *a, int64_t mono_ns)
{
    if (!a->ctr.ok || mono_ns < a->next_ctr_ns) {
        return;
    }
    a->next_ctr_ns = mono_ns + CTR_SWEEP_NS;
    int mine = 0;
    for (size_t i = 0; i < a->nprocs; i++) {
        mine |= a->procs[i].spec.ctr.image != NULL && a->procs[i].state != CR_PROC_EXITED;
    }
    /* Once at start, then while containers run or were left. */
    if (!mine && !a->ctr_left && a->ctr_swept) {
        return;
    }
    a->ctr_swept = 1;
    char **names = NULL;
    size_t n = 0;
    if (cr_ctr_list(&a->ctr, a->cfg.node, &names, &n) < 0) {
        return;
    }
    a->ctr_left = 0;
    for (size_t i = 0; i < n; i++) {
        const cr_proc *p = owner(a, names[i]);
        if (!p) {
            cr_warn("agent: container %s belongs to no running job here: removed", names[i]);
            cr_ctr_remove(&a->ctr, names[i]);
            a->ctr_left = 1;
            continue;
        }
        /* Its secrets file, once podman has made the container (and read it). */
        char *envf = env_file_path(a, &p->spec);
        if (access(envf, F_OK) == 0) {
            unlink(envf);
        }
        free(envf);
    }
    cr_strv_free(names);
}
