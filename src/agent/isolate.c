/*
 * isolate.c - users, device filters and limits for jobs. See cr_iso.h.
 */
#include "cr_iso.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/magic.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static const char *const v1_names[CR_ISO_V1_N] = {"devices", "memory", "cpu", "pids"};

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        return CR_EIO;
    }
    ssize_t n = write(fd, text, strlen(text));
    int e = errno;
    close(fd);
    errno = e;
    return n == (ssize_t)strlen(text) ? 0 : CR_EIO;
}

static int write_at(const char *dir, const char *file, const char *text)
{
    char *p = cr_asprintf("%s/%s", dir, file);
    int rc = write_file(p, text);
    free(p);
    return rc;
}

static int read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return CR_ENOENT;
    }
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0) {
        return CR_EIO;
    }
    buf[n] = '\0';
    return 0;
}

/* The agent's own cgroup in the v1 hierarchy holding controller name. */
static int own_v1_path(const char *name, char *out, size_t len)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[1024];
    int rc = CR_ENOENT;
    while (f && fgets(line, sizeof line, f)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) {
            continue;
        }
        *c2 = '\0';
        line[strcspn(line, "\n")] = '\0';
        char *ctrls = c1 + 1, *save = NULL;
        for (char *t = strtok_r(ctrls, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (strcmp(t, name) == 0) {
                char *p = c2 + 1;
                p[strcspn(p, "\n")] = '\0';
                snprintf(out, len, "%s", strcmp(p, "/") == 0 ? "" : p);
                rc = 0;
            }
        }
    }
    if (f) {
        fclose(f);
    }
    return rc;
}

static char *probe_v1(const char *name, const char *node, char *why, size_t whylen)
{
    char mnt[64], own[512];
    snprintf(mnt, sizeof mnt, "/sys/fs/cgroup/%s", name);
    struct statfs sf;
    if (statfs(mnt, &sf) != 0 || sf.f_type != CGROUP_SUPER_MAGIC) {
        snprintf(why, whylen, "no cgroup v1 %s controller at %s", name, mnt);
        return NULL;
    }
    if (own_v1_path(name, own, sizeof own) != 0) {
        snprintf(why, whylen, "the agent is in no cgroup v1 %s hierarchy", name);
        return NULL;
    }
    char *base = cr_asprintf("%s%s/corral-%s", mnt, own, node);
    if (mkdir(base, 0755) != 0 && errno != EEXIST) {
        snprintf(why, whylen, "cannot create %s: %s", base, strerror(errno));
        free(base);
        return NULL;
    }
    char *procs = cr_asprintf("%s/cgroup.procs", base);
    int ok = access(procs, W_OK) == 0;
    free(procs);
    if (!ok) {
        snprintf(why, whylen, "%s is not writable: %s", base, strerror(errno));
        free(base);
        return NULL;
    }
    return base;
}

/* --- the eBPF device filter ------------------------------------------- */

#define INSN(c, d, s, o, i) ((struct bpf_insn){(uint8_t)(c), (d), (s), (int16_t)(o), (int32_t)(i)})

/*
 * A BPF_PROG_TYPE_CGROUP_DEVICE program allowing read/write/mknod of the
 * character devices in rules (mknod: the OCI runtime of a container job
 * makes its /dev with it; it opens nothing); everything else is denied. The context
 * is struct bpf_cgroup_dev_ctx {access_type = access << 16 | type, major,
 * minor}. Registers: r2 type, r3 access, r4 major, r5 minor. Returns the
 * instruction count.
 */
static size_t build_prog(const int *major, const int *minor, size_t n, struct bpf_insn *p,
                         size_t max)
{
    size_t k = 0;
    if (max < 6 + n * 8 + 2) {
        return 0;
    }
    p[k++] = INSN(BPF_LDX | BPF_MEM | BPF_W, 2, 1, 0, 0); /* r2 = access_type */
    p[k++] = INSN(BPF_ALU64 | BPF_MOV | BPF_X, 3, 2, 0, 0);
    p[k++] = INSN(BPF_ALU | BPF_AND | BPF_K, 2, 0, 0, 0xFFFF); /* r2 = type */
    p[k++] = INSN(BPF_ALU | BPF_RSH | BPF_K, 3, 0, 0, 16);     /* r3 = access */
    p[k++] = INSN(BPF_LDX | BPF_MEM | BPF_W, 4, 1, 4, 0);      /* r4 = major */
    p[k++] = INSN(BPF_LDX | BPF_MEM | BPF_W, 5, 1, 8, 0);      /* r5 = minor */
    for (size_t i = 0; i < n; i++) {
        int any = minor[i] < 0;
        int len = any ? 7 : 8; /* instructions in this rule's block */
        int at = 0;
        p[k++] = INSN(BPF_JMP | BPF_JNE | BPF_K, 2, 0, len - 1 - at++, BPF_DEVCG_DEV_CHAR);
        p[k++] = INSN(BPF_JMP | BPF_JNE | BPF_K, 4, 0, len - 1 - at++, major[i]);
        if (!any) {
            p[k++] = INSN(BPF_JMP | BPF_JNE | BPF_K, 5, 0, len - 1 - at++, minor[i]);
        }
        /* access must be within read|write|mknod */
        p[k++] = INSN(BPF_ALU64 | BPF_MOV | BPF_X, 6, 3, 0, 0);
        at++;
        p[k++] = INSN(BPF_ALU | BPF_AND | BPF_K, 6, 0, 0,
                      ~(int32_t)(BPF_DEVCG_ACC_READ | BPF_DEVCG_ACC_WRITE | BPF_DEVCG_ACC_MKNOD));
        at++;
        p[k++] = INSN(BPF_JMP | BPF_JNE | BPF_K, 6, 0, len - 1 - at++, 0);
        p[k++] = INSN(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 1);
        p[k++] = INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
    }
    p[k++] = INSN(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0);
    p[k++] = INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
    return k;
}

/*
 * Loaded programs, by rule set: the verifier runs once per distinct set of
 * device rules (a GPU set; issue 25 measured it at 9% of the job path when
 * it ran for every job), and each job's cgroup gets an attachment of the
 * cached program. At most DEV_PROG_CACHE programs stay loaded (a few KiB of
 * kernel memory each); past that the least recently used one is closed
 * (cgroups it is attached to keep it). Guarded by dev_prog_mu: jobs start
 * on more than one thread.
 */
#define DEV_PROG_CACHE 64
#define DEV_RULES_MAX  96

typedef struct dev_prog {
    int fd;      /* -1: empty slot */
    uint32_t id; /* the kernel's id of the program: fd must still name it */
    size_t n;
    int major[DEV_RULES_MAX], minor[DEV_RULES_MAX];
    uint64_t used; /* dev_prog_clock at the last use */
} dev_prog;

static pthread_mutex_t dev_prog_mu = PTHREAD_MUTEX_INITIALIZER;
static dev_prog dev_progs[DEV_PROG_CACHE];
static size_t dev_prog_count;
static uint64_t dev_prog_clock;
static uint64_t dev_prog_loads; /* programs loaded (the verifier ran) */

static int load_dev_prog(const int *major, const int *minor, size_t n)
{
    struct bpf_insn prog[6 + 64 * 8 + 2];
    size_t cnt = build_prog(major, minor, n, prog, sizeof prog / sizeof prog[0]);
    if (cnt == 0) {
        errno = E2BIG;
        return -1;
    }
    union bpf_attr la;
    memset(&la, 0, sizeof la);
    la.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
    la.insns = (uint64_t)(uintptr_t)prog;
    la.insn_cnt = (uint32_t)cnt;
    la.license = (uint64_t)(uintptr_t) "GPL";
    return (int)syscall(SYS_bpf, BPF_PROG_LOAD, &la, sizeof la);
}

/* The kernel's id of the BPF program fd names; 0 when fd is not one. */
static uint32_t prog_id(int fd)
{
    struct bpf_prog_info info;
    union bpf_attr a;
    memset(&info, 0, sizeof info);
    memset(&a, 0, sizeof a);
    a.info.bpf_fd = (uint32_t)fd;
    a.info.info_len = sizeof info;
    a.info.info = (uint64_t)(uintptr_t)&info;
    if (syscall(SYS_bpf, BPF_OBJ_GET_INFO_BY_FD, &a, sizeof a) != 0 ||
        info.type != BPF_PROG_TYPE_CGROUP_DEVICE) {
        return 0;
    }
    return info.id;
}

/* The cached program for the rules (loaded on a miss); -1 (errno set). Call
 * with dev_prog_mu held. A cached descriptor that no longer names its
 * program (closed by mistake elsewhere, its number reused) is dropped
 * without a close and the program loaded again: one job's filter must
 * never be another object. */
static int dev_prog_get(const int *major, const int *minor, size_t n, int *cached)
{
    dev_prog *lru = NULL;
    *cached = 1;
    for (size_t i = 0; i < dev_prog_count; i++) {
        dev_prog *d = &dev_progs[i];
        if (d->n == n && memcmp(d->major, major, n * sizeof *major) == 0 &&
            memcmp(d->minor, minor, n * sizeof *minor) == 0) {
            if (prog_id(d->fd) == d->id) {
                d->used = ++dev_prog_clock;
                return d->fd;
            }
            cr_warn("agent: the cached device filter's descriptor %d no longer names it: "
                    "loading it again",
                    d->fd);
            d->fd = -1;
            d->n = 0; /* matches no rule set again; reused as the least recently used */
            d->used = 0;
            lru = d;
            break;
        }
        if (!lru || d->used < lru->used) {
            lru = d;
        }
    }
    int fd = load_dev_prog(major, minor, n);
    dev_prog_loads += fd >= 0;
    uint32_t id = fd >= 0 ? prog_id(fd) : 0;
    if (fd < 0 || n > DEV_RULES_MAX || id == 0) {
        *cached = 0; /* used once and closed (no id to check it by later) */
        return fd;
    }
    dev_prog *d = lru && lru->fd < 0                ? lru
                  : dev_prog_count < DEV_PROG_CACHE ? &dev_progs[dev_prog_count++]
                                                    : lru;
    if (d == lru && lru->fd >= 0) {
        close(lru->fd);
    }
    d->fd = fd;
    d->id = id;
    d->n = n;
    memcpy(d->major, major, n * sizeof *major);
    memcpy(d->minor, minor, n * sizeof *minor);
    d->used = ++dev_prog_clock;
    return fd;
}

/* Attach the filter for the rules to the cgroup directory cg (the cached
 * program, or one loaded now). 0 or CR_EIO (errno set). */
static int attach_dev_prog(const char *cg, const int *major, const int *minor, size_t n)
{
    pthread_mutex_lock(&dev_prog_mu);
    int cached = 0;
    int pfd = dev_prog_get(major, minor, n, &cached);
    int rc = CR_EIO;
    int cfd = pfd >= 0 ? open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (cfd >= 0) {
        union bpf_attr aa;
        memset(&aa, 0, sizeof aa);
        aa.target_fd = (uint32_t)cfd;
        aa.attach_bpf_fd = (uint32_t)pfd;
        aa.attach_type = BPF_CGROUP_DEVICE;
        rc = syscall(SYS_bpf, BPF_PROG_ATTACH, &aa, sizeof aa) == 0 ? 0 : CR_EIO;
    }
    int e = errno;
    if (cfd >= 0) {
        close(cfd);
    }
    if (pfd >= 0 && !cached) {
        close(pfd); /* the attachment holds the program */
    }
    pthread_mutex_unlock(&dev_prog_mu);
    errno = e;
    return rc;
}

uint64_t cr_iso_dev_prog_loads(void)
{
    pthread_mutex_lock(&dev_prog_mu);
    uint64_t n = dev_prog_loads;
    pthread_mutex_unlock(&dev_prog_mu);
    return n;
}

/* --- probe ------------------------------------------------------------ */

static char *probe_v2(const char *arg, const char *node, char *why, size_t whylen)
{
    if (!arg || strcmp(arg, "off") == 0) {
        snprintf(why, whylen, "cgroup v2 off (--cgroup off)");
        return NULL;
    }
    static const char *const cands[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
    size_t n = strcmp(arg, "auto") == 0 ? 2 : 1;
    for (size_t i = 0; i < n; i++) {
        const char *root = n == 2 ? cands[i] : arg;
        struct statfs sf;
        if (statfs(root, &sf) != 0 || sf.f_type != CGROUP2_SUPER_MAGIC) {
            snprintf(why, whylen, "%s is not a cgroup v2 mount", root);
            continue;
        }
        char *base = cr_asprintf("%s/corral-%s", root, node);
        if (mkdir(base, 0755) == 0 || errno == EEXIST) {
            char *procs = cr_asprintf("%s/cgroup.procs", base);
            int ok = access(procs, W_OK) == 0;
            free(procs);
            if (ok) {
                return base;
            }
        }
        snprintf(why, whylen, "cannot create %s: %s", base, strerror(errno));
        free(base);
    }
    return NULL;
}

/* Remove the empty job cgroups an earlier agent left (busy ones stay: rmdir fails). */
static void prune(const char *base)
{
    DIR *d = base ? opendir(base) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "job-", 4) == 0) {
            char *path = cr_asprintf("%s/%s", base, e->d_name);
            rmdir(path);
            free(path);
        }
    }
    if (d) {
        closedir(d);
    }
}

/* One line of /proc/mounts: a proc mount at /proc sets *hidden. */
static void proc_line(const char *line, int *hidden)
{
    char dev[256], dir[256], type[64], opts[512];
    if (sscanf(line, "%255s %255s %63s %511s", dev, dir, type, opts) != 4 ||
        strcmp(dir, "/proc") != 0 || strcmp(type, "proc") != 0) {
        return;
    }
    *hidden = 0; /* the last mount on /proc is the one jobs see */
    for (char *save = NULL, *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
        *hidden |= strcmp(o, "hidepid=1") == 0 || strcmp(o, "hidepid=2") == 0 ||
                   strcmp(o, "hidepid=noaccess") == 0 || strcmp(o, "hidepid=invisible") == 0;
    }
}

int cr_iso_proc_hidden(const char *mounts)
{
    int hidden = 0;
    for (const char *l = mounts; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) : strlen(l);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), l);
        proc_line(line, &hidden);
        l = e ? e + 1 : NULL;
    }
    return hidden;
}

static int probe_proc(void)
{
    FILE *f = fopen("/proc/mounts", "re");
    char line[1024];
    int hidden = 0;
    while (f && fgets(line, sizeof line, f)) {
        proc_line(line, &hidden);
    }
    if (f) {
        fclose(f);
    }
    return hidden;
}

void cr_iso_probe(cr_iso *iso, const char *v2_arg, const char *v1_arg, const char *node,
                  const char *dev_dir)
{
    memset(iso, 0, sizeof *iso);
    iso->caps_major = -1;
    snprintf(iso->dev_dir, sizeof iso->dev_dir, "%s", dev_dir ? dev_dir : "/dev");
    iso->root = geteuid() == 0;
    iso->proc_hidden = probe_proc();
    if (!iso->root) {
        snprintf(iso->why_uid, sizeof iso->why_uid,
                 "the agent is not root: jobs run as the agent's user");
    }
    char w1[CR_ISO_V1_N][256] = {"", "", "", ""}, w2[256] = "";
    for (int i = 0; i < CR_ISO_V1_N; i++) {
        if (v1_arg && strcmp(v1_arg, "off") == 0) {
            snprintf(w1[i], sizeof w1[i], "cgroup v1 off (--cgroup-v1 off)");
        } else {
            iso->v1[i] = probe_v1(v1_names[i], node, w1[i], sizeof w1[i]);
        }
    }
    iso->v2 = probe_v2(v2_arg, node, w2, sizeof w2);
    for (int i = 0; i < CR_ISO_V1_N; i++) {
        prune(iso->v1[i]);
    }
    prune(iso->v2);
    if (iso->v2) {
        /* Does a device program attach here? Try on a scratch child. */
        char *t = cr_asprintf("%s/probe-%d", iso->v2, (int)getpid());
        int maj[1] = {1}, min[1] = {3};
        if (mkdir(t, 0755) == 0 || errno == EEXIST) {
            iso->v2_bpf = attach_dev_prog(t, maj, min, 1) == 0;
            if (!iso->v2_bpf) {
                snprintf(w2, sizeof w2, "eBPF device filter on %s: %s", iso->v2, strerror(errno));
            }
            rmdir(t);
        }
        free(t);
        /* Delegate memory and cpu to the job cgroups where the parent has them. */
        char ctl[256] = "";
        char *cpath = cr_asprintf("%s/cgroup.controllers", iso->v2);
        read_small(cpath, ctl, sizeof ctl);
        free(cpath);
        char word[64];
        for (const char *p = ctl; sscanf(p, "%63s", word) == 1;
             p = strstr(p, word) + strlen(word)) {
            if (strcmp(word, "memory") == 0) {
                iso->v2_memory = write_at(iso->v2, "cgroup.subtree_control", "+memory") == 0;
            } else if (strcmp(word, "cpu") == 0) {
                iso->v2_cpu = write_at(iso->v2, "cgroup.subtree_control", "+cpu") == 0;
            } else if (strcmp(word, "pids") == 0) {
                iso->v2_pids = write_at(iso->v2, "cgroup.subtree_control", "+pids") == 0;
            }
        }
    }
    if (!iso->v1[CR_ISO_V1_DEVICES] && !iso->v2_bpf) {
        snprintf(iso->why_dev, sizeof iso->why_dev, "%s; %s", w1[CR_ISO_V1_DEVICES],
                 *w2 ? w2 : "no cgroup v2");
    }
    if (!iso->v1[CR_ISO_V1_MEMORY] && !iso->v2_memory) {
        snprintf(iso->why_mem, sizeof iso->why_mem, "%s; %s", w1[CR_ISO_V1_MEMORY],
                 iso->v2 ? "memory controller not delegated to cgroup v2" : "no cgroup v2");
    }
    if (!iso->v1[CR_ISO_V1_CPU] && !iso->v2_cpu) {
        snprintf(iso->why_cpu, sizeof iso->why_cpu, "%s; %s", w1[CR_ISO_V1_CPU],
                 iso->v2 ? "cpu controller not delegated to cgroup v2" : "no cgroup v2");
    }
    if (!iso->v1[CR_ISO_V1_PIDS] && !iso->v2_pids) {
        snprintf(iso->why_pids, sizeof iso->why_pids, "%s; %s", w1[CR_ISO_V1_PIDS],
                 iso->v2 ? "pids controller not delegated to cgroup v2" : "no cgroup v2");
    }
}

static void pool_drain(const cr_iso *iso);

void cr_iso_fini(cr_iso *iso)
{
    pool_drain(iso);
    for (int i = 0; i < CR_ISO_V1_N; i++) {
        if (iso->v1[i]) {
            rmdir(iso->v1[i]); /* only when empty */
        }
        CR_FREE(iso->v1[i]);
    }
    if (iso->v2) {
        rmdir(iso->v2);
    }
    CR_FREE(iso->v2);
    CR_FREE(iso->caps);
    CR_FREE(iso->migs);
}

static void mech(const cr_iso *iso, int what, char *out, size_t len)
{
    const char *v1 = iso->v1[what] ? "cgroup v1" : "";
    const char *v2 = what == CR_ISO_V1_DEVICES  ? (iso->v2_bpf ? "cgroup v2 eBPF" : "")
                     : what == CR_ISO_V1_MEMORY ? (iso->v2_memory ? "cgroup v2" : "")
                     : what == CR_ISO_V1_CPU    ? (iso->v2_cpu ? "cgroup v2" : "")
                                                : (iso->v2_pids ? "cgroup v2" : "");
    snprintf(out, len, "%s%s%s", v1, *v1 && *v2 ? " + " : "", v2);
}

void cr_iso_log(const cr_iso *iso)
{
    const char *names[CR_ISO_V1_N] = {"devices", "memory", "cpu", "pids"};
    const char *whys[CR_ISO_V1_N] = {iso->why_dev, iso->why_mem, iso->why_cpu, iso->why_pids};
    if (iso->root) {
        cr_info("agent: isolation uid: enforced (jobs run as their mapped uid)");
    } else {
        cr_warn("agent: isolation uid: UNAVAILABLE: %s", iso->why_uid);
    }
    if (iso->pidns) {
        cr_info("agent: isolation processes: enforced (a PID namespace and /proc per job%s)",
                iso->proc_hidden ? "; /proc hidepid" : "");
    } else if (iso->proc_hidden) {
        cr_info("agent: isolation processes: enforced (/proc hidepid; no PID namespace per job: "
                "%s)",
                iso->why_pidns);
    } else {
        cr_warn("agent: isolation processes: UNAVAILABLE: no PID namespace per job (%s) and /proc "
                "is mounted without hidepid: every job can read the command lines of other "
                "tenants' jobs (mount -o remount,hidepid=invisible /proc; docs/security.md)",
                iso->why_pidns);
    }
    for (int i = 0; i < CR_ISO_V1_N; i++) {
        char m[64];
        mech(iso, i, m, sizeof m);
        if (*whys[i]) {
            cr_warn("agent: isolation %s: UNAVAILABLE: %s", names[i], whys[i]);
        } else {
            cr_info("agent: isolation %s: enforced (%s)", names[i], m);
        }
    }
}

json_t *cr_iso_report(const cr_iso *iso)
{
    char detail[4096], m[CR_ISO_V1_N][64];
    for (int i = 0; i < CR_ISO_V1_N; i++) {
        mech(iso, i, m[i], sizeof m[i]);
    }
    char procs[400];
    if (iso->pidns) {
        snprintf(procs, sizeof procs, "own PID namespace and /proc per job");
    } else {
        snprintf(procs, sizeof procs, "%s, no PID namespace per job (%.200s)",
                 iso->proc_hidden ? "hidden (/proc hidepid)"
                                  : "visible to other jobs (/proc without hidepid)",
                 iso->why_pidns);
    }
    snprintf(detail, sizeof detail,
             "uid: %s; processes: %s; devices: %s; memory: %s; cpu: %s; pids: %s",
             iso->root ? "setuid" : iso->why_uid, procs, *iso->why_dev ? iso->why_dev : m[0],
             *iso->why_mem ? iso->why_mem : m[1], *iso->why_cpu ? iso->why_cpu : m[2],
             *iso->why_pids ? iso->why_pids : m[3]);
    detail[511] = '\0'; /* the controller keeps at most 511 characters */
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "uid", iso->root ? "enforced" : "unavailable",
                     "devices", *iso->why_dev ? "unavailable" : "enforced", "memory",
                     *iso->why_mem ? "unavailable" : "enforced", "cpu",
                     *iso->why_cpu ? "unavailable" : "enforced", "pids",
                     *iso->why_pids ? "unavailable" : "enforced", "detail", detail);
}

static const char *const fences[] = {"uid",    "pidns", "processes", "devices",
                                     "memory", "cpu",   "pids"};
#define NFENCES (sizeof fences / sizeof fences[0])

/* The i-th fence's "why not" ("" when enforced). */
static const char *fence_why(const cr_iso *iso, size_t i)
{
    switch (i) {
    case 0:
        return iso->root ? "" : iso->why_uid;
    case 1:
    case 2:
        return iso->pidns ? "" : *iso->why_pidns ? iso->why_pidns : "no PID namespace per job";
    case 3:
        return iso->why_dev;
    case 4:
        return iso->why_mem;
    case 5:
        return iso->why_cpu;
    default:
        return iso->why_pids;
    }
}

/* Check list's entries (CR_EINVAL with bad at an unknown one); with iso,
 * each fence it cannot enforce is counted in *unmet, its name added to
 * names and its reason to whys ("; " between). */
static int each_fence(const char *list, char *bad, size_t badlen, const cr_iso *iso, cr_buf *names,
                      cr_buf *whys, int *unmet)
{
    for (const char *p = list; p && *p;) {
        size_t n = strcspn(p, ",");
        char name[32];
        size_t k = NFENCES;
        if (n > 0 && n < sizeof name) {
            memcpy(name, p, n);
            name[n] = '\0';
            for (k = 0; k < NFENCES && strcmp(fences[k], name) != 0; k++) {
            }
        }
        if (k == NFENCES && n > 0) {
            snprintf(bad, badlen, "'%.*s': not a fence (uid, pidns, devices, memory, cpu, pids)",
                     (int)(n > 40 ? 40 : n), p);
            return CR_EINVAL;
        }
        const char *w = iso && k < NFENCES ? fence_why(iso, k) : "";
        if (*w) {
            cr_buf_printf(names, "%s%s", *unmet ? ", " : "", fences[k]);
            cr_buf_printf(whys, "%s%s: %s", *unmet ? "; " : "", fences[k], w);
            (*unmet)++;
        }
        p += n;
        p += *p == ',';
    }
    return 0;
}

int cr_iso_require_check(const char *list, char *err, size_t errlen)
{
    int unmet = 0;
    return each_fence(list, err, errlen, NULL, NULL, NULL, &unmet);
}

int cr_iso_require(const cr_iso *iso, const char *list, char *why, size_t len)
{
    char bad[128];
    int unmet = 0;
    cr_buf names, whys;
    cr_buf_init(&names);
    cr_buf_init(&whys);
    if (len) {
        why[0] = '\0';
    }
    if (each_fence(list, bad, sizeof bad, iso, &names, &whys, &unmet) == 0 && unmet > 0 && len) {
        /* the names first: a cut keeps them whole */
        snprintf(why, len, "%s unavailable (%s)", cr_buf_str(&names), cr_buf_str(&whys));
    }
    cr_buf_fini(&names);
    cr_buf_fini(&whys);
    return unmet;
}

/* --- per job ---------------------------------------------------------- */

/*
 * The majors of nvidia-uvm in /proc/devices, read at most once a second
 * (every job needs them; they change only when the module loads). Kept per
 * process, as the program cache, under its own lock.
 */
#define UVM_MAJORS_MAX    4
#define UVM_MAJORS_TTL_NS CR_NS_PER_SEC

static size_t uvm_majors(int *out)
{
    static int cached[UVM_MAJORS_MAX];
    static size_t ncached;
    static int64_t read_at_ns = INT64_MIN;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    int64_t now = cr_mono_ns();
    pthread_mutex_lock(&mu);
    if (read_at_ns == INT64_MIN || now - read_at_ns >= UVM_MAJORS_TTL_NS) {
        ncached = 0;
        FILE *f = fopen("/proc/devices", "r");
        char line[128];
        while (f && fgets(line, sizeof line, f)) {
            int maj;
            char name[64];
            if (sscanf(line, "%d %63s", &maj, name) == 2 && strcmp(name, "nvidia-uvm") == 0 &&
                ncached < UVM_MAJORS_MAX) {
                cached[ncached++] = maj;
            }
        }
        if (f) {
            fclose(f);
        }
        read_at_ns = now;
    }
    size_t n = ncached;
    memcpy(out, cached, n * sizeof *out);
    pthread_mutex_unlock(&mu);
    return n;
}

static size_t dev_rules(const cr_iso *iso, const cr_job_spec *s, int *major, int *minor, size_t max)
{
    /* null, zero, full, random, urandom, tty, ptmx, pts/N, then NVIDIA's
     * control nodes (nvidiactl 255, nvidia-modeset 254) and the job's GPUs. */
    static const int std[][2] = {{1, 3},
                                 {1, 5},
                                 {1, 7},
                                 {1, 8},
                                 {1, 9},
                                 {5, 0},
                                 {5, 2},
                                 {136, -1},
                                 {CR_NVIDIA_MAJOR, 255},
                                 {CR_NVIDIA_MAJOR, 254}};
    size_t n = 0;
    for (size_t i = 0; i < sizeof std / sizeof std[0] && n < max; i++) {
        major[n] = std[i][0];
        minor[n++] = std[i][1];
    }
    /* nvidia-uvm and nvidia-uvm-tools: a major the driver picks at load. */
    int uvm[UVM_MAJORS_MAX];
    size_t nu = uvm_majors(uvm);
    for (size_t i = 0; i < nu && n + 1 < max; i++) {
        major[n] = uvm[i];
        minor[n++] = -1;
    }
    /* The job's GPUs by minor number, and its MIG instances' capabilities. */
    n += cr_iso_gpu_rules(iso, s, major + n, minor + n, max - n);
    /* A container job: podman's default devices also allow /dev/console
     * (5:1) and /dev/net/tun (10:200); runc writes those rules in the
     * container's cgroup below the job's, which must allow them. */
    if (s->ctr.image && n + 2 <= max) {
        major[n] = 5;
        minor[n++] = 1;
        major[n] = 10;
        minor[n++] = 200;
    }
    return n;
}

size_t cr_iso_dev_rules(const cr_job_spec *s, int *major, int *minor, size_t max)
{
    return dev_rules(NULL, s, major, minor, max);
}

size_t cr_iso_dev_rules_iso(const cr_iso *iso, const cr_job_spec *s, int *major, int *minor,
                            size_t max)
{
    return dev_rules(iso, s, major, minor, max);
}

static int v1_devices(const char *cg, const int *major, const int *minor, size_t n)
{
    if (write_at(cg, "devices.deny", "a") != 0) {
        return CR_EIO;
    }
    /* One open for all the rules: the kernel takes each write(2) as one
     * rule. */
    char *path = cr_asprintf("%s/devices.allow", cg);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    free(path);
    if (fd < 0) {
        return CR_EIO;
    }
    int rc = 0;
    /* mknod of any node ("m") lets a container's runtime (runc, in a child
     * cgroup, docs/containers.md) make its /dev; opening is what the rules
     * below fence, and a job without CAP_MKNOD cannot mknod anyway. */
    for (size_t i = 0; i < n + 2 && rc == 0; i++) {
        char rule[64];
        if (i < 2) {
            snprintf(rule, sizeof rule, "%c *:* m", i == 0 ? 'c' : 'b');
        } else if (minor[i - 2] < 0) {
            snprintf(rule, sizeof rule, "c %d:* rwm", major[i - 2]);
        } else {
            snprintf(rule, sizeof rule, "c %d:%d rwm", major[i - 2], minor[i - 2]);
        }
        if (write(fd, rule, strlen(rule)) != (ssize_t)strlen(rule)) {
            rc = CR_EIO;
        }
    }
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

static char *make_cg(const char *base, int64_t job)
{
    char *cg = cr_asprintf("%s/job-%lld", base, (long long)job);
    int rc = mkdir(cg, 0755);
    if (rc != 0 && errno == ENOENT) {
        /* The node's directory went away while empty (another agent of the
         * same node name on this host, at its exit): make it again. */
        rc = mkdir(base, 0755) != 0 && errno != EEXIST ? -1 : mkdir(cg, 0755);
    }
    if (rc != 0 && errno != EEXIST) {
        CR_FREE(cg);
    }
    return cg;
}

/*
 * Kept cgroups (cr_iso_job_release): the sets of job cgroups no job uses,
 * for the next job of the same cr_iso. Per process under their own lock,
 * as the program cache.
 */
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static cr_iso_job pool[CR_ISO_POOL_MAX];
static size_t pool_n;

/* Whether j's cgroups are iso's hierarchies' (one under each, no other). */
static int pool_fits(const cr_iso *iso, const cr_iso_job *j)
{
    for (int i = 0; i <= CR_ISO_V1_N; i++) {
        const char *base = i < CR_ISO_V1_N ? iso->v1[i] : iso->v2;
        const char *cg = i < CR_ISO_V1_N ? j->v1[i] : j->v2;
        size_t bl = base ? strlen(base) : 0;
        if (!base != !cg || (cg && (strncmp(cg, base, bl) != 0 || cg[bl] != '/'))) {
            return 0;
        }
    }
    return 1;
}

/* A kept set for iso, moved to out (1), or 0 when none. */
static int pool_take(const cr_iso *iso, cr_iso_job *out)
{
    int got = 0;
    pthread_mutex_lock(&pool_mu);
    for (size_t i = pool_n; i-- > 0 && !got;) {
        if (pool_fits(iso, &pool[i])) {
            *out = pool[i];
            pool[i] = pool[--pool_n];
            got = 1;
        }
    }
    pthread_mutex_unlock(&pool_mu);
    return got;
}

/* No process in the cgroup (v2: cgroup.events says unpopulated). */
static int cg_empty(const char *cg, int v2)
{
    char buf[256];
    char *p = cr_asprintf("%s/%s", cg, v2 ? "cgroup.events" : "cgroup.procs");
    int rc = read_small(p, buf, sizeof buf);
    free(p);
    if (rc != 0) {
        return 0;
    }
    return v2 ? strstr(buf, "populated 0") != NULL : buf[0] == '\0';
}

void cr_iso_job_release(const cr_iso *iso, const cr_iso_job *j, int container)
{
    int keep = iso && !container && pool_fits(iso, j) && (!j->v2 || cg_empty(j->v2, 1));
    for (int i = 0; i < CR_ISO_V1_N && keep; i++) {
        keep = !j->v1[i] || cg_empty(j->v1[i], 0);
    }
    if (keep) {
        pthread_mutex_lock(&pool_mu);
        if (pool_n < CR_ISO_POOL_MAX) {
            cr_iso_job *k = &pool[pool_n++];
            *k = *j;
            for (int i = 0; i < CR_ISO_V1_N; i++) {
                k->v1[i] = j->v1[i] ? cr_strdup(j->v1[i]) : NULL;
            }
            k->v2 = j->v2 ? cr_strdup(j->v2) : NULL;
        } else {
            keep = 0;
        }
        pthread_mutex_unlock(&pool_mu);
    }
    if (!keep) {
        cr_iso_job_remove(j);
    }
}

/* Remove the kept sets of iso (its end). */
static void pool_drain(const cr_iso *iso)
{
    cr_iso_job j;
    while (pool_take(iso, &j)) {
        cr_iso_job_remove(&j);
        cr_iso_job_fini(&j);
    }
}

static uint64_t key_value(const char *path, const char *key);

/* Undo what the last job set that this one may not (its limits), and count
 * its OOM events from here. 0, or CR_EIO: the set is not to be used. */
static int pool_reset(const cr_iso *iso, cr_iso_job *j)
{
    if (j->mem_set) {
        const char *m = j->v1[CR_ISO_V1_MEMORY];
        if (m) {
            write_at(m, "memory.memsw.limit_in_bytes", "-1"); /* where swap is accounted */
            if (write_at(m, "memory.limit_in_bytes", "-1") != 0 ||
                write_at(m, "memory.failcnt", "0") != 0) {
                return CR_EIO;
            }
        }
        if (j->v2 && iso->v2_memory) {
            if (write_at(j->v2, "memory.max", "max") != 0) {
                return CR_EIO;
            }
            write_at(j->v2, "memory.swap.max", "max");
        }
        j->oom_base = 0;
        j->oom_base = cr_iso_oom_kills(j);
        char *p = j->v2 ? cr_asprintf("%s/memory.events", j->v2) : NULL;
        j->v2_oom_base = p ? key_value(p, "oom") : 0;
        free(p);
    }
    if (j->cpu_set) {
        if (j->v1[CR_ISO_V1_CPU] && write_at(j->v1[CR_ISO_V1_CPU], "cpu.cfs_quota_us", "-1") != 0) {
            return CR_EIO;
        }
        if (j->v2 && iso->v2_cpu && write_at(j->v2, "cpu.max", "max 100000") != 0) {
            return CR_EIO;
        }
    }
    j->mem_set = j->cpu_set = 0;
    return 0;
}

int cr_iso_job_setup(const cr_iso *iso, const cr_job_spec *s, cr_iso_job *out, char *warn,
                     size_t warnlen)
{
    int rc = 0;
    int major[DEV_RULES_MAX], minor[DEV_RULES_MAX];
    size_t nr = cr_iso_dev_rules_iso(iso, s, major, minor, DEV_RULES_MAX);
    size_t wl = 0;
    memset(out, 0, sizeof *out);
    warn[0] = '\0';
    /* A container's cgroup is named for its job (podman's --cgroup-parent). */
    int kept = !s->ctr.image && !s->ctr.podman && pool_take(iso, out);
    if (kept && pool_reset(iso, out) != 0) {
        cr_iso_job_remove(out);
        cr_iso_job_fini(out);
        memset(out, 0, sizeof *out);
        kept = 0;
    }
    for (int i = 0; i < CR_ISO_V1_N && !kept; i++) {
        if (iso->v1[i]) {
            out->v1[i] = make_cg(iso->v1[i], s->job);
        }
    }
    if (iso->v2 && !kept) {
        out->v2 = make_cg(iso->v2, s->job);
    }
    out->mem_set = s->mem_bytes > 0;
    out->cpu_set = s->cpus > 0;
    if (out->v1[CR_ISO_V1_DEVICES] && v1_devices(out->v1[CR_ISO_V1_DEVICES], major, minor, nr)) {
        snprintf(warn, warnlen, "corral: cannot set the device rules of %s: %s",
                 out->v1[CR_ISO_V1_DEVICES], strerror(errno));
        rc = CR_EIO;
        goto out;
    }
    if (out->v2 && iso->v2_bpf && attach_dev_prog(out->v2, major, minor, nr) != 0) {
        snprintf(warn, warnlen, "corral: cannot attach the device filter to %s: %s", out->v2,
                 strerror(errno));
        rc = CR_EIO;
        goto out;
    }
    if (s->mem_bytes > 0) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)s->mem_bytes);
        int done = 0;
        if (out->v1[CR_ISO_V1_MEMORY]) {
            done = write_at(out->v1[CR_ISO_V1_MEMORY], "memory.limit_in_bytes", v) == 0;
            /* No swap beyond the limit, where swap accounting exists. */
            write_at(out->v1[CR_ISO_V1_MEMORY], "memory.memsw.limit_in_bytes", v);
        }
        if (out->v2 && iso->v2_memory) {
            done |= write_at(out->v2, "memory.max", v) == 0;
            write_at(out->v2, "memory.swap.max", "0");
        }
        if (!done) {
            wl += (size_t)snprintf(warn + wl, warnlen - wl,
                                   "corral: the memory limit is NOT enforced on this node (%s)\n",
                                   *iso->why_mem ? iso->why_mem : strerror(errno));
        }
    }
    if (s->cpus > 0) {
        long long quota = (long long)(s->cpus * 100000.0 + 0.5);
        quota = quota < 1000 ? 1000 : quota;
        char v[64];
        int done = 0;
        if (out->v1[CR_ISO_V1_CPU]) {
            snprintf(v, sizeof v, "%lld", quota);
            done = write_at(out->v1[CR_ISO_V1_CPU], "cpu.cfs_period_us", "100000") == 0 &&
                   write_at(out->v1[CR_ISO_V1_CPU], "cpu.cfs_quota_us", v) == 0;
        }
        if (out->v2 && iso->v2_cpu) {
            snprintf(v, sizeof v, "%lld 100000", quota);
            done |= write_at(out->v2, "cpu.max", v) == 0;
        }
        if (!done && wl < warnlen) {
            snprintf(warn + wl, warnlen - wl,
                     "corral: the CPU limit is NOT enforced on this node (%s)\n",
                     *iso->why_cpu ? iso->why_cpu : strerror(errno));
        }
    }
    {
        /* Always capped: a fork bomb must not starve the node. */
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)cr_iso_job_pids(s));
        int done = 0;
        if (out->v1[CR_ISO_V1_PIDS]) {
            done = write_at(out->v1[CR_ISO_V1_PIDS], "pids.max", v) == 0;
        }
        if (out->v2 && iso->v2_pids) {
            done |= write_at(out->v2, "pids.max", v) == 0;
        }
        wl = strlen(warn);
        if (!done && wl < warnlen) {
            snprintf(warn + wl, warnlen - wl,
                     "corral: the task (pids) limit is NOT enforced on this node (%s)\n",
                     *iso->why_pids ? iso->why_pids : strerror(errno));
        }
    }
out:
    if (rc != 0) {
        cr_iso_job_remove(out);
        cr_iso_job_fini(out);
    }
    return rc;
}

int64_t cr_iso_job_pids(const cr_job_spec *s)
{
    if (s->pids > 0) {
        return s->pids;
    }
    int64_t n = (int64_t)(s->gpu_count ? s->gpu_count : 1) * CR_ISO_PIDS_PER_GPU;
    return n > CR_ISO_PIDS_MAX ? CR_ISO_PIDS_MAX : n;
}

char **cr_iso_job_procs(const cr_iso_job *j)
{
    char **v = cr_calloc(CR_ISO_V1_N + 2, sizeof *v);
    size_t n = 0;
    for (int i = 0; i < CR_ISO_V1_N; i++) {
        if (j->v1[i]) {
            v[n++] = cr_asprintf("%s/cgroup.procs", j->v1[i]);
        }
    }
    if (j->v2) {
        v[n++] = cr_asprintf("%s/cgroup.procs", j->v2);
    }
    return v;
}

static uint64_t key_value(const char *path, const char *key)
{
    char buf[2048];
    if (read_small(path, buf, sizeof buf) != 0) {
        return 0;
    }
    size_t kl = strlen(key);
    for (char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, key, kl) == 0 && p[kl] == ' ') {
            return strtoull(p + kl + 1, NULL, 10);
        }
    }
    return 0;
}

uint64_t cr_iso_oom_kills(const cr_iso_job *j)
{
    uint64_t n = 0;
    if (j->v1[CR_ISO_V1_MEMORY]) {
        char *p = cr_asprintf("%s/memory.oom_control", j->v1[CR_ISO_V1_MEMORY]);
        n += key_value(p, "oom_kill");
        free(p);
    }
    if (j->v2) {
        char *p = cr_asprintf("%s/memory.events", j->v2);
        n += key_value(p, "oom_kill");
        free(p);
    }
    return n > j->oom_base ? n - j->oom_base : 0;
}

int cr_iso_mem_hit(const cr_iso_job *j)
{
    int hit = 0;
    if (j->v1[CR_ISO_V1_MEMORY]) {
        char *p = cr_asprintf("%s/memory.failcnt", j->v1[CR_ISO_V1_MEMORY]);
        char buf[64];
        hit |= read_small(p, buf, sizeof buf) == 0 && strtoull(buf, NULL, 10) > 0;
        free(p);
    }
    if (j->v2) {
        char *p = cr_asprintf("%s/memory.events", j->v2);
        hit |= key_value(p, "oom") > j->v2_oom_base;
        free(p);
    }
    return hit;
}

void cr_iso_job_kill(const cr_iso_job *j)
{
    if (j->v2 && write_at(j->v2, "cgroup.kill", "1") == 0) {
        return;
    }
    /* v1 has no cgroup.kill: signal each member (the job is frozen by nothing,
     * so a fork race can leave one behind: a few passes, while any is found;
     * a stopping job's next tick repeats this). */
    const char *cg = j->v1[CR_ISO_V1_MEMORY]    ? j->v1[CR_ISO_V1_MEMORY]
                     : j->v1[CR_ISO_V1_DEVICES] ? j->v1[CR_ISO_V1_DEVICES]
                                                : j->v1[CR_ISO_V1_CPU];
    if (!cg) {
        return;
    }
    char *p = cr_asprintf("%s/cgroup.procs", cg);
    for (int pass = 0, found = 1; found && pass < 8; pass++) {
        FILE *f = fopen(p, "r");
        int pid;
        found = 0;
        while (f && fscanf(f, "%d", &pid) == 1) {
            if (pid > 1 && kill(pid, SIGKILL) == 0) {
                found = 1;
            }
        }
        if (f) {
            fclose(f);
        }
    }
    free(p);
}

void cr_iso_job_remove(const cr_iso_job *j)
{
    for (int i = 0; i < CR_ISO_V1_N; i++) {
        if (j->v1[i]) {
            rmdir(j->v1[i]);
        }
    }
    if (j->v2) {
        rmdir(j->v2);
    }
}

void cr_iso_job_fini(cr_iso_job *j)
{
    for (int i = 0; i < CR_ISO_V1_N; i++) {
        CR_FREE(j->v1[i]);
    }
    CR_FREE(j->v2);
}

json_t *cr_iso_job_to_json(const cr_iso_job *j)
{
    json_t *v = json_object();
    for (int i = 0; i < CR_ISO_V1_N; i++) {
        if (j->v1[i]) {
            json_object_set_new(v, v1_names[i], json_string(j->v1[i]));
        }
    }
    if (j->v2) {
        json_object_set_new(v, "v2", json_string(j->v2));
    }
    json_object_set_new(v, "oom_base", json_integer((json_int_t)j->oom_base));
    json_object_set_new(v, "v2_oom_base", json_integer((json_int_t)j->v2_oom_base));
    json_object_set_new(v, "mem_set", json_boolean(j->mem_set));
    json_object_set_new(v, "cpu_set", json_boolean(j->cpu_set));
    return v;
}

void cr_iso_job_from_json(json_t *v, cr_iso_job *j)
{
    memset(j, 0, sizeof *j);
    for (int i = 0; i < CR_ISO_V1_N; i++) {
        const char *s = json_string_value(json_object_get(v, v1_names[i]));
        j->v1[i] = s ? cr_strdup(s) : NULL;
    }
    const char *s = json_string_value(json_object_get(v, "v2"));
    j->v2 = s ? cr_strdup(s) : NULL;
    j->oom_base = (uint64_t)json_integer_value(json_object_get(v, "oom_base"));
    j->v2_oom_base = (uint64_t)json_integer_value(json_object_get(v, "v2_oom_base"));
    /* A record of an older agent says nothing: its limits may be set. */
    json_t *ms = json_object_get(v, "mem_set"), *cs = json_object_get(v, "cpu_set");
    j->mem_set = ms ? json_is_true(ms) : 1;
    j->cpu_set = cs ? json_is_true(cs) : 1;
}

/* --- files ------------------------------------------------------------ */

int cr_iso_sim_devices(const char *dir, size_t count, char *err, size_t errlen)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return CR_EIO;
    }
    chmod(dir, 0755);
    for (size_t i = 0; i <= count; i++) {
        char *p =
            i < count ? cr_asprintf("%s/nvidia%zu", dir, i) : cr_asprintf("%s/nvidiactl", dir);
        dev_t want = makedev(CR_NVIDIA_MAJOR, i < count ? (unsigned)i : 255u);
        struct stat sb;
        if (lstat(p, &sb) == 0 && (!S_ISCHR(sb.st_mode) || sb.st_rdev != want)) {
            unlink(p);
        }
        if (mknod(p, S_IFCHR | 0666, want) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "mknod %s: %s", p, strerror(errno));
            free(p);
            return CR_EIO;
        }
        chmod(p, 0666);
        free(p);
    }
    return 0;
}

int cr_iso_own_dir(const char *path, int mode, int64_t uid, int64_t gid, char *err, size_t errlen)
{
    if (mkdir(path, (mode_t)mode) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
        return CR_EIO;
    }
    struct stat sb;
    if (lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "%s is not a directory (a link?)", path);
        return CR_EPERM;
    }
    uid_t want = uid >= 0 ? (uid_t)uid : geteuid();
    if (sb.st_uid != 0 && sb.st_uid != want && sb.st_uid != geteuid()) {
        snprintf(err, errlen, "%s belongs to uid %u, not to the job's uid %u: refused", path,
                 (unsigned)sb.st_uid, (unsigned)want);
        return CR_EPERM;
    }
    if (uid >= 0 && (sb.st_uid != (uid_t)uid || sb.st_gid != (gid_t)gid) &&
        lchown(path, (uid_t)uid, (gid_t)gid) != 0) {
        snprintf(err, errlen, "chown %s to %lld:%lld: %s", path, (long long)uid, (long long)gid,
                 strerror(errno));
        return CR_EIO;
    }
    if ((sb.st_mode & 07777) != (mode_t)mode && chmod(path, (mode_t)mode) != 0) {
        snprintf(err, errlen, "chmod %s: %s", path, strerror(errno));
        return CR_EIO;
    }
    return 0;
}
