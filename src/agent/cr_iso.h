/*
 * cr_iso.h - what fences a job on its node: the Unix user it runs as, the
 * device nodes it may open, and its memory and CPU limits (docs/isolation.md).
 *
 * At start the agent probes what this host allows (cr_iso_probe): root (so
 * the shim can switch to the job's uid), the cgroup v1 devices, memory and
 * cpu controllers (a directory corral-<node>-<instance> under the agent's own cgroup in
 * each), and a writable cgroup v2 directory (device filter: an eBPF
 * BPF_PROG_TYPE_CGROUP_DEVICE program, written by hand as systemd does;
 * memory.max and cpu.max where those controllers are delegated). What cannot
 * be enforced is logged at start and reported to the controller
 * (cr_iso_report), never skipped silently.
 *
 * Per job (cr_iso_job_setup) the agent makes job-<id> in each of those,
 * denies every device but the job's own /dev/nvidiaN (major 195, minor = the
 * GPU index), the shared NVIDIA control nodes and the standard character
 * devices, and writes the limits; the shim joins each cgroup before the job
 * exists. The job's tasks are capped by the pids controller (pids.max: the
 * spec's "pids", else CR_ISO_PIDS_PER_GPU per GPU). An OOM kill inside a job's cgroup is read back
 * (cr_iso_oom_kills) so the exit can be reported as "out of memory".
 *
 * Threading: the agent's main thread only.
 */
#ifndef CR_ISO_H
#define CR_ISO_H

#include "cr_desired.h"
#include "cr_gpu.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CR_NVIDIA_MAJOR   195 /* /dev/nvidiaN, nvidiactl (255), nvidia-modeset (254) */
#define CR_ISO_V1_DEVICES 0
#define CR_ISO_V1_MEMORY  1
#define CR_ISO_V1_CPU     2
#define CR_ISO_V1_PIDS    3
#define CR_ISO_V1_N       4

/* Tasks (processes and threads) a job may have when its spec gives no
 * "pids": this many per GPU (at least one GPU's worth), so that a fork bomb
 * in one job cannot exhaust the node's pid space (docs/isolation.md). */
#define CR_ISO_PIDS_PER_GPU 4096
#define CR_ISO_PIDS_MAX     4194304 /* the kernel's pid_max ceiling */

/* One line of /proc/driver/nvidia-caps/mig-minors (iso_caps.c). */
#define CR_ISO_CAPS_MAX 65536 /* entries read; the driver lists about 5,000 */
enum { CR_ISO_CAP_CONFIG, CR_ISO_CAP_MONITOR, CR_ISO_CAP_GI, CR_ISO_CAP_CI };
typedef struct cr_iso_cap {
    int kind;        /* CR_ISO_CAP_* */
    int gpu, gi, ci; /* the GPU's minor number, instance ids; -1 where not part of it */
    int minor;       /* /dev/nvidia-caps/nvidia-cap<minor> */
} cr_iso_cap;

/* A MIG instance of this node: its UUID (what a job is given) and ids. */
typedef struct cr_iso_mig {
    char uuid[96];
    int gpu_minor, gi, ci;
} cr_iso_mig;

typedef struct cr_iso {
    int root;              /* euid 0: jobs can run as their own uid */
    char *v1[CR_ISO_V1_N]; /* owned: <controller mount><own cgroup>/corral-<node>-<instance>, NULL
                              none */
    char *v2;              /* owned: cgroup v2 directory for the jobs, NULL none */
    int v2_bpf;            /* a device program attaches to v2 job cgroups */
    int v2_memory, v2_cpu; /* controllers delegated to the v2 job cgroups */
    int v2_pids;
    char dev_dir[512];   /* where the GPU device nodes are ("/dev"; sim: placeholders) */
    int proc_hidden;     /* /proc has hidepid: a job cannot read other users' command lines */
    int pidns;           /* plain-process jobs get their own PID and mount namespace and /proc */
    char why_pidns[256]; /* "" when pidns; else why not (off, or what the kernel refused) */
    char why_uid[128], why_dev[640], why_mem[640], why_cpu[640], why_pids[640]; /* "": enforced */
    /* The GPUs' device numbers (cr_iso_set_gpus; 0 GPUs: minor = index). */
    int gpu_minor[CR_GPU_MAX];
    size_t ngpu_minor;
    int caps_major;   /* "nvidia-caps" in /proc/devices; -1 none */
    cr_iso_cap *caps; /* owned: mig-minors entries */
    size_t ncaps;
    cr_iso_mig *migs; /* owned: this node's MIG instances */
    size_t nmigs;
} cr_iso;

/* The cgroups of one job (owned strings, NULL none), kept in its record.
 * They may have been another job's before (cr_iso_job_release): the
 * counters that cannot be reset are counted from the base values. */
typedef struct cr_iso_job {
    char *v1[CR_ISO_V1_N];
    char *v2;
    uint64_t oom_base;    /* OOM kills counted before this job (cr_iso_oom_kills) */
    uint64_t v2_oom_base; /* v2 memory.events "oom" before this job */
    int mem_set, cpu_set; /* this job set a memory / CPU limit (reset for the next) */
} cr_iso_job;

/*
 * Probe. v2_arg: --cgroup (auto|off|DIR); v1_arg: --cgroup-v1 (auto|off).
 * dev_dir: the directory of the GPU device nodes (borrowed). Never fails:
 * what is missing is recorded in the why_* strings.
 */
void cr_iso_probe(cr_iso *iso, const char *v2_arg, const char *v1_arg, const char *node,
                  const char *dev_dir);
void cr_iso_fini(cr_iso *iso);
/* Whether the mount table (the text of /proc/mounts) mounts /proc with
 * hidepid=1|2|noaccess|invisible (the last /proc mount counts): without
 * it, every job on the node reads every other process's command line
 * (another tenant's arguments) in /proc. Only warned: the host's choice. */
int cr_iso_proc_hidden(const char *mounts);
/* Log one line per mechanism (enforced or why not). */
void cr_iso_log(const cr_iso *iso);
/* {"uid","devices","memory","cpu","pids": "enforced"|"unavailable", "detail": text}.
 * Returned new. */
json_t *cr_iso_report(const cr_iso *iso);

/*
 * require_isolation (--require-isolation): a comma-separated list of the
 * fences this node must enforce, each one of uid, pidns (or processes),
 * devices, memory, cpu, pids. cr_iso_require_check: 0, or CR_EINVAL with
 * err naming the unknown entry. cr_iso_require: the count of fences of
 * list that iso cannot enforce, with why ("devices: WHY; memory: WHY",
 * cut to len) for the node's reason; 0 and "" when all hold.
 */
int cr_iso_require_check(const char *list, char *err, size_t errlen);
int cr_iso_require(const cr_iso *iso, const char *list, char *why, size_t len);

/*
 * Per-job PID namespace (iso_pidns.c). want 0: off (--job-pid-namespace
 * off). Otherwise try, in a child, what a job's start does: a new PID and
 * mount namespace, / made a slave mount, a fresh /proc that shows the
 * child as pid 1. Sets iso->pidns, or iso->why_pidns with the step and
 * errno the kernel refused (no CAP_SYS_ADMIN, a seccomp filter...).
 */
void cr_iso_probe_pidns(cr_iso *iso, int want);
/* Steps of cr_iso_pidns_fork that can fail in the child. */
#define CR_ISO_PIDNS_SLAVE 1 /* mount / MS_REC|MS_SLAVE */
#define CR_ISO_PIDNS_PROC  2 /* mount proc on /proc */
/*
 * In the shim (async-signal-safe): clone a child that is pid 1 of a new
 * PID namespace, in a new mount namespace whose / is a slave of the
 * node's, with proc mounted on /proc (so it lists only the namespace), its
 * command line "corral-init", killed when its parent dies. ipc: in a new
 * IPC namespace too (System V IPC and POSIX message queues of its own,
 * gone with it; not for a job that talks to the node's MPS daemon). Returns the
 * child's pid in the parent (-1 and errno: the clone failed) and 0 in the
 * child, where *step is 0 when ready, else the CR_ISO_PIDNS_* step that
 * failed (errno says why).
 */
pid_t cr_iso_pidns_fork(int *step, int ipc);
/* What a CR_ISO_PIDNS_* step does, for messages (static text). */
const char *cr_iso_pidns_step_text(int step);

/*
 * Make the job's cgroups with its device rules and limits. cgroups that
 * cannot be made are skipped, with a line for the job's stderr in warn
 * (may stay ""). The device filter failing on a host where it was probed
 * to work is an error (the job must not start unfenced): CR_EIO.
 */
int cr_iso_job_setup(const cr_iso *iso, const cr_job_spec *s, cr_iso_job *out, char *warn,
                     size_t warnlen);
/* eBPF device programs loaded so far (the verifier runs once per distinct
 * set of device rules; later jobs with the same GPUs attach the cached
 * program, at most 64 kept loaded). */
uint64_t cr_iso_dev_prog_loads(void);
/* The "cgroup.procs" files the shim writes its pid to; returned new, NULL-ended. */
char **cr_iso_job_procs(const cr_iso_job *j);
/* OOM kills counted in the job's memory cgroup (v1 or v2); 0 when none or unknown. */
uint64_t cr_iso_oom_kills(const cr_iso_job *j);
/* Whether the job's memory cgroup ever hit its limit (v1 memory.failcnt,
 * v2 memory.events "oom"). The kernel sends an OOM kill's SIGKILL before it
 * counts oom_kill, so a job reaped at once may show the kill before the
 * count: a SIGKILLed job whose cgroup hit its limit is an OOM kill too. */
int cr_iso_mem_hit(const cr_iso_job *j);
/* SIGKILL every process left in the job's cgroups (cgroup.kill on v2). */
void cr_iso_job_kill(const cr_iso_job *j);
/* rmdir the job's cgroups (fails harmlessly while something still runs). */
void cr_iso_job_remove(const cr_iso_job *j);
/*
 * The job is over: its cgroups, when every one of them is empty, are kept
 * (copied; j stays the caller's) for a later job of the same cr_iso, which
 * cr_iso_job_setup gives them with its own limits and device rules and the
 * OOM counters baselined: making and removing five cgroups was a fifth of
 * what a job cost the agent. Else, or past CR_ISO_POOL_MAX kept, removed.
 * A container job's are always removed (podman names them by job id).
 */
void cr_iso_job_release(const cr_iso *iso, const cr_iso_job *j, int container);
#define CR_ISO_POOL_MAX 64
void cr_iso_job_fini(cr_iso_job *j);
/* The pids.max a job gets: its spec's "pids", else the per-GPU default. */
int64_t cr_iso_job_pids(const cr_job_spec *s);
json_t *cr_iso_job_to_json(const cr_iso_job *j);
void cr_iso_job_from_json(json_t *v, cr_iso_job *j);

/*
 * The device rules of a job as (major, minor) pairs, minor -1 = any: the
 * job's GPUs, the NVIDIA control nodes, the standard character devices.
 * Exposed for tests. Returns the count (<= max). cr_iso_dev_rules takes
 * minor = GPU index and no MIG capability; cr_iso_dev_rules_iso uses the
 * node's minor numbers and MIG capabilities (cr_iso_set_gpus).
 */
size_t cr_iso_dev_rules(const cr_job_spec *s, int *major, int *minor, size_t max);
size_t cr_iso_dev_rules_iso(const cr_iso *iso, const cr_job_spec *s, int *major, int *minor,
                            size_t max);

/*
 * The GPUs' device numbers (iso_caps.c): /dev/nvidia<minor> of each GPU
 * index (NVML's minor number) and, on a node with MIG instances, the
 * capability nodes of each instance from mig_minors (NULL:
 * /proc/driver/nvidia-caps/mig-minors) and the nvidia-caps major from
 * proc_devices (NULL: /proc/devices). What cannot be read is logged: MIG
 * jobs then get no capability node (fail closed).
 */
void cr_iso_set_gpus(cr_iso *iso, const cr_gpu_info *gpus, size_t n, const char *mig_minors,
                     const char *proc_devices);
/* The rules for the job's GPUs: /dev/nvidia<minor> each, and for a MIG job
 * its instances' gi and ci access capabilities. iso NULL: minor = index. */
size_t cr_iso_gpu_rules(const cr_iso *iso, const cr_job_spec *s, int *major, int *minor,
                        size_t max);
/* Parse mig-minors text ("NAME MINOR" lines; unknown names skipped, a
 * malformed line is an error naming it). *out owned by the caller. */
int cr_iso_mig_minors_parse(const char *text, size_t len, cr_iso_cap **out, size_t *n, char *err,
                            size_t errlen);
int cr_iso_mig_minors_load(const char *path, cr_iso_cap **out, size_t *n, char *err, size_t errlen);
/* The minor of a capability (ci ignored unless kind is CR_ISO_CAP_CI); -1 none. */
int cr_iso_cap_minor(const cr_iso_cap *caps, size_t n, int kind, int gpu, int gi, int ci);

/* Create placeholder GPU device nodes (mknod c 195 N, mode 0666) for the
 * sim backend in dir (0755): nvidia0..nvidia<count-1>, nvidiactl. */
int cr_iso_sim_devices(const char *dir, size_t count, char *err, size_t errlen);

/*
 * Prepare a directory for a job's user: mkdir (mode), then verify with
 * lstat that it is a directory and not a link, and chown it to uid:gid
 * (when uid >= 0) and chmod it to mode. Refuses a path whose existing
 * directory belongs to somebody else than root or the uid. 0 or CR_E*.
 */
int cr_iso_own_dir(const char *path, int mode, int64_t uid, int64_t gid, char *err, size_t errlen);

#endif
