/*
 * cr_ctr.h - jobs in OCI containers run by podman (docs/containers.md).
 *
 * A job whose spec has a "container" runs as `podman run` in the
 * foreground under the usual shim (cr_proc.h): its stdout/stderr are the
 * job's logs, its exit is the job's, SIGTERM to the shim's group reaches the
 * container through podman's signal proxy. The agent stays the owner: it
 * makes the image present before the job starts (exists, else `podman load`
 * of the job's archive, else `podman pull`), removes the container once the
 * job has ended (`podman rm -f`), and removes every container labelled with
 * its node that no running job owns (a podman client killed on its own, an
 * agent that was down). Podman is rootful: the agent runs it as root and the
 * job's process inside is `--user uid:gid`.
 *
 * Every podman command runs with a timeout (CR_CTR_*_MS) and its output
 * bounded; nothing here blocks forever. Threading: the agent's main thread.
 */
#ifndef CR_CTR_H
#define CR_CTR_H

#include "cr_desired.h"
#include "cr_iso.h"

#include <stddef.h>
#include <stdint.h>

#define CR_CTR_CMD_MS    30000  /* podman image exists, ps, rm, --version */
#define CR_CTR_LOAD_MS   600000 /* podman load of an archive */
#define CR_CTR_PULL_MS   600000 /* podman pull from a registry */
#define CR_CTR_OUT_MAX   65536  /* output kept of one podman command */
#define CR_CTR_MAX_NAMES 4096   /* containers one listing returns */
/* --ulimit nofile/nproc: the agent's own limits, at most these (a host
 * may refuse more: the test machine refuses nproc 50000 in a container). */
#define CR_CTR_NOFILE_MAX 1048576
#define CR_CTR_NPROC_MAX  32768

typedef struct cr_ctr {
    int ok;                      /* podman runs here */
    char podman[256];            /* the podman program ("podman": found in PATH) */
    char runtime[16];            /* "runc" or "crun" */
    char version[64];            /* podman --version */
    int cdi;                     /* a CDI spec naming nvidia.com/gpu exists */
    int64_t nofile[2], nproc[2]; /* --ulimit values (soft, hard): the agent's own */
    char why[256];               /* "" when ok */
    char owner[24];              /* this agent's instance id (label corral.agent):
                                    the sweep lists only its own containers */
    char **registries;           /* --image-registries: where images may be pulled
                                    from ("host[:port]"); borrowed, NULL: nowhere */
    size_t nregistries;
    char state_dir[1024]; /* <state>/image_owners.json: which tenant loaded which image */
} cr_ctr;

/* The image a job runs, once present. */
typedef struct cr_ctr_image {
    char name[600]; /* the name it was found under: the tenant's private name
                       (loaded from its archive) or the fully qualified reference */
    char id[72];    /* the image id podman runs (64 hex) */
} cr_ctr_image;

/*
 * Probe: podman --version, the runtime (want: "auto" = runc when found,
 * else crun; or "runc"/"crun"), a CDI spec in /etc/cdi or /var/run/cdi.
 * Never fails: c->ok 0 and c->why say what is missing.
 */
void cr_ctr_probe(cr_ctr *c, const char *podman, const char *want_runtime);
/* One line at start: runtime, GPUs by --device or CDI, ulimits, cgroups. */
void cr_ctr_log(const cr_ctr *c, const cr_iso *iso);

/* "corral-<cluster>-<job>-<run>" (cluster "0" when unknown). Returned new. */
char *cr_ctr_name(const cr_job_spec *s);

/*
 * Make the image present (docs/containers.md, "Images"): the spec's image
 * must pass cr_imgref_parse (again: the controller checked it at submit).
 * Looked up as the tenant's private name (an image its archive loaded),
 * then as the fully qualified reference; else the spec's archive is loaded
 * (its names moved into the tenant's namespace, its new image ids recorded
 * as the tenant's); else pulled, only from c->registries and never for
 * localhost/. An image recorded as another tenant's is refused (CR_EPERM).
 * img gets the name and the id to run; how "present", "loaded from FILE"
 * or "pulled"; *ms the time taken. On failure err gets the reason for the
 * job's event (CR_EINVAL, CR_EPERM, CR_ENOENT, CR_EIO).
 */
int cr_ctr_image_ready(const cr_ctr *c, const cr_job_spec *s, cr_ctr_image *img, char *how,
                       size_t howlen, int64_t *ms, char *err, size_t errlen);

/*
 * Check the spec's mounts on this node: "SRC:DST" or "SRC:DST:ro", both
 * absolute and clean, SRC an existing path that is not reached through a
 * symbolic link (realpath(SRC) == SRC: a link planted in an allowed
 * directory must not mount something else). 0 or CR_EINVAL/CR_EPERM.
 */
int cr_ctr_mounts_ok(const cr_job_spec *s, char *err, size_t errlen);

/*
 * The podman argv for s (returned new, NULL-ended; cr_strv_free): see
 * docs/containers.md for every flag. node borrowed. env: the job's
 * non-secret environment (cr_job_env with no base); env_file: the 0600
 * file with the secrets, or NULL. cgroup_parent: the job's cgroup relative
 * to the hierarchy roots, or NULL.
 */
char **cr_ctr_argv(const cr_ctr *c, const cr_iso *iso, const cr_job_spec *s, const char *node,
                   char *const *env, const char *env_file, const char *cgroup_parent);

/* podman rm -f -t 0 NAME (a running one is killed). 0 or CR_EIO. */
int cr_ctr_remove(const cr_ctr *c, const char *name);
/* podman stop -t GRACE NAME in the background (not waited for). */
void cr_ctr_stop_async(const cr_ctr *c, const char *name, int64_t grace_s);
/* podman container exists NAME: 1, 0 (gone), -1 (podman failed). */
int cr_ctr_exists(const cr_ctr *c, const char *name);
/* Names of this agent's containers (label corral.agent=c->owner; without an
 * owner, every container labelled corral.node=node); returned new in *names
 * (cr_strv_free). 0 or CR_EIO. */
int cr_ctr_list(const cr_ctr *c, const char *node, char ***names, size_t *count);
/* rmdir the job's cgroup directories in every v1 hierarchy (and what
 * podman made below them: conmon/, libpod-ID/), once nothing runs there. */
void cr_ctr_cgroup_cleanup(const char *cgroup_parent);

/*
 * Run argv (argv[0] found in PATH) with stdin /dev/null and stdout+stderr
 * into out (NUL-terminated, truncated to outlen), killed after timeout_ms.
 * Returns the exit code, 128+signal, or -1 (could not run / timed out,
 * said in out).
 */
int cr_ctr_run(char *const *argv, int timeout_ms, char *out, size_t outlen);

#endif
