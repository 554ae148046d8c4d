/*
 * container.c - podman for jobs that name an image. See cr_ctr.h and
 * docs/containers.md.
 */
#include "cr_ctr.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_imgref.h"
#include "cr_log.h"
#include "cr_time.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CG_ROOT "/sys/fs/cgroup"

int cr_ctr_run(char *const *argv, int timeout_ms, char *out, size_t outlen)
{
    int fds[2];
    if (outlen) {
        out[0] = '\0';
    }
    if (pipe2(fds, O_CLOEXEC) != 0) {
        snprintf(out, outlen, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(out, outlen, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        /* The agent blocks its signals for its signalfd: a blocked mask
         * would survive exec and podman would ignore SIGTERM. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) {
            dup2(nul, 0);
        }
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        syscall(SYS_close_range, 3U, ~0U, 0U);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    size_t got = 0;
    int64_t end = cr_mono_ns() + (int64_t)timeout_ms * CR_NS_PER_MS;
    int timed_out = 0;
    for (;;) {
        int64_t left = (end - cr_mono_ns()) / CR_NS_PER_MS;
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd pf = {fds[0], POLLIN, 0};
        int r = poll(&pf, 1, left > 1000 ? 1000 : (int)left);
        if (r < 0 && errno != EINTR) {
            break;
        }
        if (r <= 0) {
            continue;
        }
        char buf[4096];
        ssize_t n = read(fds[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        size_t keep = outlen > got + 1 ? outlen - got - 1 : 0;
        keep = keep < (size_t)n ? keep : (size_t)n;
        memcpy(out + got, buf, keep);
        got += keep;
        if (outlen) {
            out[got] = '\0';
        }
    }
    close(fds[0]);
    if (timed_out) {
        kill(pid, SIGKILL);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) {
        snprintf(out, outlen, "%s: no answer within %d s", argv[0], timeout_ms / 1000);
        return -1;
    }
    if (WIFSIGNALED(st)) {
        return 128 + WTERMSIG(st);
    }
    return WEXITSTATUS(st);
}

/* The last non-empty line of podman's output (its error), cleaned of
 * control characters, into dst. */
static void last_line(const char *out, char *dst, size_t len)
{
    const char *end = out + strlen(out);
    while (end > out && (end[-1] == '\n' || end[-1] == ' ')) {
        end--;
    }
    const char *b = end;
    while (b > out && b[-1] != '\n') {
        b--;
    }
    size_t n = 0;
    for (const char *p = b; p < end && n + 1 < len; p++) {
        dst[n++] = (*p >= 0x20 && *p != 0x7f) ? *p : ' ';
    }
    if (len) {
        dst[n] = '\0';
    }
}

static int have_program(const char *name)
{
    const char *dirs[] = {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
                          "/usr/bin",        "/sbin",          "/bin"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dirs[i], name);
        if (access(p, X_OK) == 0) {
            return 1;
        }
    }
    return 0;
}

/* A CDI spec for NVIDIA GPUs (nvidia-ctk cdi generate writes one). */
static int cdi_present(void)
{
    const char *dirs[] = {"/etc/cdi", "/var/run/cdi"};
    for (size_t i = 0; i < 2; i++) {
        DIR *d = opendir(dirs[i]);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.') {
                continue;
            }
            char p[600], buf[8192];
            snprintf(p, sizeof p, "%s/%s", dirs[i], e->d_name);
            FILE *f = fopen(p, "r");
            size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
            if (f) {
                fclose(f);
            }
            buf[n] = '\0';
            if (strstr(buf, "nvidia.com/gpu")) {
                closedir(d);
                return 1;
            }
        }
        if (d) {
            closedir(d);
        }
    }
    return 0;
}

/* The agent's own limit (soft, hard), at most cap: podman's defaults are
 * refused on some hosts, so the values are always explicit. */
static void lim(int res, int64_t cap, int64_t out[2])
{
    struct rlimit r;
    if (getrlimit(res, &r) != 0) {
        out[0] = out[1] = 1024;
        return;
    }
    out[0] = r.rlim_cur == RLIM_INFINITY || r.rlim_cur > (rlim_t)cap ? cap : (int64_t)r.rlim_cur;
    out[1] = r.rlim_max == RLIM_INFINITY || r.rlim_max > (rlim_t)cap ? cap : (int64_t)r.rlim_max;
    if (out[0] > out[1]) {
        out[0] = out[1];
    }
}

void cr_ctr_probe(cr_ctr *c, const char *podman, const char *want)
{
    memset(c, 0, sizeof *c);
    snprintf(c->podman, sizeof c->podman, "%s", podman && *podman ? podman : "podman");
    lim(RLIMIT_NOFILE, CR_CTR_NOFILE_MAX, c->nofile);
    lim(RLIMIT_NPROC, CR_CTR_NPROC_MAX, c->nproc);
    c->cdi = cdi_present();
    if (!want || strcmp(want, "auto") == 0) {
        snprintf(c->runtime, sizeof c->runtime, "%s", have_program("runc") ? "runc" : "crun");
    } else {
        snprintf(c->runtime, sizeof c->runtime, "%s", want);
    }
    if (!have_program(c->runtime)) {
        snprintf(c->why, sizeof c->why, "the OCI runtime '%s' is not installed", c->runtime);
        return;
    }
    char out[512];
    char *argv[] = {c->podman, "--version", NULL};
    int rc = cr_ctr_run(argv, CR_CTR_CMD_MS, out, sizeof out);
    if (rc != 0) {
        char l[200];
        last_line(out, l, sizeof l);
        snprintf(c->why, sizeof c->why, "%.100s --version failed (%d): %.100s", c->podman, rc,
                 rc == 127 ? "not installed" : l);
        return;
    }
    last_line(out, c->version, sizeof c->version);
    c->ok = 1;
}

void cr_ctr_log(const cr_ctr *c, const cr_iso *iso)
{
    if (!c->ok) {
        cr_warn("agent: containers: UNAVAILABLE: %s (a job with an image fails)", c->why);
        return;
    }
    cr_info("agent: containers: %s, runtime %s (--runtime %s), GPUs by %s, --ulimit "
            "nofile=%lld:%lld nproc=%lld:%lld, container cgroups %s",
            c->version, c->runtime, c->runtime, c->cdi ? "CDI (nvidia.com/gpu=UUID)" : "--device",
            (long long)c->nofile[0], (long long)c->nofile[1], (long long)c->nproc[0],
            (long long)c->nproc[1],
            iso->v1[CR_ISO_V1_DEVICES] || iso->v1[CR_ISO_V1_MEMORY]
                ? "nested in the job's cgroup v1 (--cgroup-parent)"
                : "podman's own (not nested in the job's cgroup)");
}

char *cr_ctr_name(const cr_job_spec *s)
{
    return cr_asprintf("corral-%s-%lld-%lld", s->ctr.cluster ? s->ctr.cluster : "0",
                       (long long)s->job, (long long)s->run);
}

static int run_podman(const cr_ctr *c, const char *a1, const char *a2, const char *a3,
                      const char *a4, const char *a5, int timeout_ms, char *out, size_t outlen)
{
    char *argv[8] = {(char *)c->podman, (char *)a1, (char *)a2, (char *)a3,
                     (char *)a4,        (char *)a5, NULL};
    return cr_ctr_run(argv, timeout_ms, out, outlen);
}

/* --- images: strict references, allowed registries, tenants' archives -----
 *
 * podman is only ever given a reference cr_imgref_parse accepted, in its
 * fully qualified form, and runs the job from the image id found here (no
 * name is looked up twice). An archive is loaded with podman load, whose
 * names land in the node's one store; so each name the load added or moved
 * is re-tagged into the tenant's namespace
 * (localhost/corral-tenant-<hex of the tenant>/<path>:<tag>), taken off the
 * image, and given back to the image that held it before the load. Image
 * ids new with the load are recorded as the tenant's in
 * <state>/image_owners.json (0600), and an image whose id is recorded for
 * another tenant is refused however it is named (by a name an admin added
 * later, or by digest). */

#define OWNERS_FILE "image_owners.json"

/* "localhost/corral-tenant-<hex>/<path>:<tag>" for tenant and r. */
static void private_name(const char *tenant, const cr_imgref *r, char *buf, size_t len)
{
    char hex[2 * 64 + 1] = "";
    const char *t = *tenant ? tenant : "default";
    for (size_t i = 0; t[i] && i < 64; i++) {
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)t[i]);
    }
    const char *lib = !*r->registry && !strchr(r->path, '/') ? "library/" : "";
    snprintf(buf, len, "localhost/" CR_IMGREF_TENANT_NS "%s/%s%s:%s", hex, lib, r->path,
             *r->tag ? r->tag : "latest");
}

/* The image id (64 hex, no "sha256:") of name into id; 0, or -1 absent. */
static int image_id(const cr_ctr *c, const char *name, char *id, size_t idlen)
{
    char out[512];
    if (run_podman(c, "image", "inspect", "--format={{.Id}}", name, NULL, CR_CTR_CMD_MS, out,
                   sizeof out) != 0) {
        return -1;
    }
    const char *p = strncmp(out, "sha256:", 7) == 0 ? out + 7 : out;
    size_t n = strspn(p, "0123456789abcdef");
    if (n != 64) {
        return -1;
    }
    snprintf(id, idlen, "%.64s", p);
    return 0;
}

/* {"name:tag": "id"} and {"id": true} of the store; NULL when podman fails. */
static json_t *store_names(const cr_ctr *c, json_t **ids, char *out)
{
    if (run_podman(c, "images", "--no-trunc", "--format={{.ID}} {{.Repository}}:{{.Tag}}", NULL,
                   NULL, CR_CTR_CMD_MS, out, CR_CTR_OUT_MAX) != 0) {
        return NULL;
    }
    json_t *names = json_object();
    *ids = json_object();
    for (char *save = NULL, *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char *sp = strchr(l, ' ');
        if (!sp) {
            continue;
        }
        *sp = '\0';
        const char *id = strncmp(l, "sha256:", 7) == 0 ? l + 7 : l;
        json_object_set_new(*ids, id, json_true());
        if (!strstr(sp + 1, "<none>")) {
            json_object_set_new(names, sp + 1, json_string(id));
        }
    }
    return names;
}

static char *owners_path(const cr_ctr *c)
{
    return cr_asprintf("%s/" OWNERS_FILE, c->state_dir[0] ? c->state_dir : ".");
}

static json_t *owners_load(const cr_ctr *c)
{
    char *p = owners_path(c);
    json_t *j = json_load_file(p, JSON_REJECT_DUPLICATES, NULL);
    free(p);
    if (!json_is_object(j)) {
        json_decref(j);
        j = json_object();
    }
    return j;
}

static int owners_save(const cr_ctr *c, json_t *j)
{
    char *p = owners_path(c);
    char *tmp = cr_asprintf("%s.tmp", p);
    int rc = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || json_dumpfd(j, fd, JSON_COMPACT) != 0 || fsync(fd) != 0 || close(fd) != 0 ||
        rename(tmp, p) != 0) {
        cr_warn("agent: cannot write %s: %s", p, strerror(errno));
        unlink(tmp);
        rc = CR_EIO;
    }
    free(tmp);
    free(p);
    return rc;
}

/*
 * podman load the archive for tenant: every name the load gave an image
 * goes to the tenant's namespace (see above), new ids are recorded as the
 * tenant's. 0, or CR_EIO with err.
 */
static int load_archive(const cr_ctr *c, const char *tenant, const char *archive, char *out,
                        char *err, size_t errlen)
{
    json_t *ids0 = NULL, *ids1 = NULL, *before = store_names(c, &ids0, out), *after = NULL;
    json_t *own = NULL;
    char line[300];
    int rc = 0;
    if (!before) {
        last_line(out, line, sizeof line);
        snprintf(err, errlen, "podman images failed: %s", line);
        rc = CR_EIO;
        goto out;
    }
    if (run_podman(c, "load", "-q", "-i", archive, NULL, CR_CTR_LOAD_MS, out, CR_CTR_OUT_MAX) !=
        0) {
        last_line(out, line, sizeof line);
        snprintf(err, errlen, "image archive %.200s: podman load failed: %s", archive, line);
        rc = CR_EIO;
        goto out;
    }
    if (!(after = store_names(c, &ids1, out))) {
        last_line(out, line, sizeof line);
        snprintf(err, errlen, "podman images failed: %s", line);
        rc = CR_EIO;
        goto out;
    }
    own = owners_load(c);
    const char *k;
    json_t *v;
    void *it;
    json_object_foreach_safe(own, it, k, v)
    {
        if (!json_object_get(ids1, k)) {
            json_object_del(own, k); /* gone from the store */
        }
    }
    json_object_foreach(ids1, k, v)
    {
        if (!json_object_get(ids0, k)) {
            json_object_set_new(own, k, json_string(*tenant ? tenant : "default"));
        }
    }
    /* Record first: if the agent dies below, the new image is still the tenant's. */
    if ((rc = owners_save(c, own)) < 0) {
        snprintf(err, errlen, "cannot record the archive's images (state dir)");
        goto out;
    }
    json_object_foreach(after, k, v)
    {
        const char *id = json_string_value(v);
        const char *old = json_string_value(json_object_get(before, k));
        if (old && strcmp(old, id) == 0) {
            continue; /* a name the load did not touch */
        }
        char priv[CR_IMGREF_MAX + 64] = "", why[200], o[512];
        cr_imgref r;
        if (cr_imgref_parse(k, &r, why, sizeof why) == 0) {
            private_name(tenant, &r, priv, sizeof priv);
            if (run_podman(c, "tag", id, priv, NULL, NULL, CR_CTR_CMD_MS, o, sizeof o) != 0) {
                cr_warn("agent: podman tag %s %s failed", id, priv);
            }
        }
        if (run_podman(c, "untag", id, k, NULL, NULL, CR_CTR_CMD_MS, o, sizeof o) != 0) {
            last_line(o, line, sizeof line);
            snprintf(err, errlen, "image archive %.200s: podman untag %.200s failed: %s", archive,
                     k, line);
            rc = CR_EIO;
        }
        if (old && run_podman(c, "tag", old, k, NULL, NULL, CR_CTR_CMD_MS, o, sizeof o) != 0) {
            cr_warn("agent: podman tag %s %s (its name before the load) failed", old, k);
        }
        cr_info("agent: image archive %s: %s is tenant %s's %s", archive, k,
                *tenant ? tenant : "default", priv);
    }
out:
    json_decref(before);
    json_decref(after);
    json_decref(ids0);
    json_decref(ids1);
    json_decref(own);
    return rc;
}

/* The tenant that loaded image id from an archive, or NULL (borrowed from j). */
static const char *owner_of(json_t *j, const char *id)
{
    return json_string_value(json_object_get(j, id));
}

int cr_ctr_image_ready(const cr_ctr *c, const cr_job_spec *s, cr_ctr_image *img, char *how,
                       size_t howlen, int64_t *ms, char *err, size_t errlen)
{
    int64_t t0 = cr_mono_ns();
    char *out = cr_malloc(CR_CTR_OUT_MAX);
    char line[300], why[300], full[CR_IMGREF_MAX + 64], priv[CR_IMGREF_MAX + 64] = "";
    const char *tenant = *s->tenant ? s->tenant : "default";
    json_t *own = NULL;
    cr_imgref r;
    int rc = 0;
    const char *img_ref = s->ctr.image;
    *ms = 0;
    memset(img, 0, sizeof *img);
    if (howlen) {
        how[0] = '\0';
    }
    if (!c->ok) {
        snprintf(err, errlen, "containers are unavailable on this node: %s", c->why);
        rc = CR_EUNAVAIL;
        goto out;
    }
    if (cr_imgref_parse(img_ref, &r, why, sizeof why) < 0 ||
        cr_imgref_full(&r, full, sizeof full) < 0) {
        snprintf(err, errlen, "image '%.200s' refused on this node: %s", img_ref, why);
        rc = CR_EINVAL;
        goto out;
    }
    if (!*r.digest) {
        private_name(s->tenant, &r, priv, sizeof priv);
    }
    own = owners_load(c);
    bool mine = false;
    for (int pass = 0; pass < 2; pass++) {
        /* The tenant's own (loaded from its archive), then the node's. */
        mine = *priv && image_id(c, priv, img->id, sizeof img->id) == 0;
        if (mine) {
            snprintf(img->name, sizeof img->name, "%s", priv);
        } else if (image_id(c, full, img->id, sizeof img->id) == 0) {
            snprintf(img->name, sizeof img->name, "%s", full);
        } else {
            img->id[0] = '\0';
        }
        if (!img->id[0] && pass == 0 && s->ctr.archive) {
            if ((rc = load_archive(c, s->tenant, s->ctr.archive, out, err, errlen)) < 0) {
                goto out;
            }
            json_decref(own);
            own = owners_load(c);
            snprintf(how, howlen, "loaded from %s", s->ctr.archive);
            continue;
        }
        break;
    }
    if (img->id[0]) {
        /* Under its private name it is the tenant's own load (the same
         * bytes another tenant loaded first are no secret to it). */
        const char *o = owner_of(own, img->id);
        if (!mine && o && strcmp(o, tenant) != 0) {
            snprintf(err, errlen,
                     "image %.200s on this node was loaded from another tenant's image archive: "
                     "tenant %.64s may not use it",
                     img_ref, tenant);
            rc = CR_EPERM;
            goto out;
        }
        if (!*how) {
            snprintf(how, howlen, "present");
        }
        goto out;
    }
    if (s->ctr.archive) {
        snprintf(err, errlen, "image archive %.200s does not hold image %.200s", s->ctr.archive,
                 img_ref);
        rc = CR_ENOENT;
        goto out;
    }
    if (cr_imgref_local(&r)) {
        snprintf(err, errlen,
                 "image %.200s is not in this node's image store and no image archive was "
                 "given (a localhost/ image cannot be pulled)",
                 img_ref);
        rc = CR_ENOENT;
        goto out;
    }
    if (!cr_imgref_registry_in(&r, (const char *const *)c->registries, c->nregistries)) {
        /* Never handed to podman: a pull is a connection from the node. */
        snprintf(err, errlen,
                 "image %.200s is not in this node's image store, and registry %.100s is not one "
                 "this node pulls from (image_registries: %s)",
                 img_ref, cr_imgref_registry(&r), c->nregistries ? "others only" : "none");
        rc = CR_EPERM;
        goto out;
    }
    if (run_podman(c, "pull", "-q", full, NULL, NULL, CR_CTR_PULL_MS, out, CR_CTR_OUT_MAX) != 0) {
        last_line(out, line, sizeof line);
        snprintf(err, errlen, "image %.200s: podman pull failed: %s", img_ref, line);
        rc = CR_EIO;
        goto out;
    }
    if (image_id(c, full, img->id, sizeof img->id) != 0) {
        snprintf(err, errlen, "image %.200s: not in the store after podman pull", img_ref);
        rc = CR_EIO;
        goto out;
    }
    snprintf(img->name, sizeof img->name, "%s", full);
    snprintf(how, howlen, "pulled");
out:
    *ms = (cr_mono_ns() - t0) / CR_NS_PER_MS;
    json_decref(own);
    free(out);
    return rc;
}

/* Absolute, no "..", ".", "//" components, no ',' or ':' (podman's -v). */
static int path_clean(const char *p)
{
    if (p[0] != '/' || strstr(p, "//") || strpbrk(p, ",:\n")) {
        return 0;
    }
    for (const char *s = p; (s = strchr(s, '/')) != NULL; s++) {
        if ((s[1] == '.' && (s[2] == '/' || s[2] == '\0')) ||
            (s[1] == '.' && s[2] == '.' && (s[3] == '/' || s[3] == '\0'))) {
            return 0;
        }
    }
    return 1;
}

int cr_ctr_mounts_ok(const cr_job_spec *s, char *err, size_t errlen)
{
    for (size_t i = 0; i < s->ctr.mountc; i++) {
        const char *m = s->ctr.mounts[i];
        const char *c1 = strchr(m, ':');
        const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c1 || (c2 && strcmp(c2, ":ro") != 0)) {
            snprintf(err, errlen, "mounts[%zu]: want SRC:DST or SRC:DST:ro", i);
            return CR_EINVAL;
        }
        char *src = cr_strndup(m, (size_t)(c1 - m));
        char *dst = c2 ? cr_strndup(c1 + 1, (size_t)(c2 - c1 - 1)) : cr_strdup(c1 + 1);
        int rc = 0;
        char real[PATH_MAX];
        if (!path_clean(src) || !path_clean(dst) || strcmp(src, "/") == 0) {
            snprintf(err, errlen, "mounts[%zu]: paths must be absolute and clean", i);
            rc = CR_EINVAL;
        } else if (!realpath(src, real)) {
            snprintf(err, errlen, "mounts[%zu]: %.300s: %s on this node", i, src, strerror(errno));
            rc = CR_ENOENT;
        } else if (strcmp(real, src) != 0) {
            snprintf(err, errlen, "mounts[%zu]: %.300s goes through a symbolic link (to %.300s)", i,
                     src, real);
            rc = CR_EPERM;
        }
        free(src);
        free(dst);
        if (rc) {
            return rc;
        }
    }
    return 0;
}

typedef struct argv_b {
    char **v;
    size_t n, cap;
} argv_b;

static void add(argv_b *b, const char *s)
{
    CR_GROW(b->v, b->n + 1, b->cap);
    b->v[b->n++] = cr_strdup(s);
    b->v[b->n] = NULL;
}

/* "--flag=value" as one word: a value that starts with '-' can never be
 * read as another flag. Takes owned. */
static void addf(argv_b *b, const char *flag, char *owned)
{
    CR_GROW(b->v, b->n + 1, b->cap);
    b->v[b->n++] = cr_asprintf("%s=%s", flag, owned);
    b->v[b->n] = NULL;
    free(owned);
}

/* --device for a node that exists: the path in dev_dir, /dev/NAME inside. */
static void add_dev(argv_b *b, const char *dev_dir, const char *name)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dev_dir, name);
    struct stat st;
    if (stat(p, &st) == 0 && S_ISCHR(st.st_mode)) {
        addf(b, "--device", cr_asprintf("%s:/dev/%s", p, name));
    }
}

char **cr_ctr_argv(const cr_ctr *c, const cr_iso *iso, const cr_job_spec *s, const char *node,
                   char *const *env, const char *env_file, const char *cgroup_parent)
{
    argv_b b = {0};
    char *name = cr_ctr_name(s);
    add(&b, c->podman);
    addf(&b, "--runtime", cr_strdup(c->runtime));
    add(&b, "run");
    add(&b, "--rm=false");
    add(&b, "--pull=never");
    add(&b, "--sig-proxy=true");
    addf(&b, "--name", name);
    addf(&b, "--label", cr_asprintf("corral.job=%lld", (long long)s->job));
    addf(&b, "--label", cr_asprintf("corral.run=%lld", (long long)s->run));
    addf(&b, "--label", cr_asprintf("corral.cluster=%s", s->ctr.cluster ? s->ctr.cluster : "0"));
    addf(&b, "--label", cr_asprintf("corral.node=%s", node));
    if (c->owner[0]) {
        addf(&b, "--label", cr_asprintf("corral.agent=%s", c->owner));
    }
    if (s->has_user) {
        addf(&b, "--user", cr_asprintf("%lld:%lld", (long long)s->uid, (long long)s->gid));
    }
    if (s->has_user && s->uid != 0) {
        /* A setuid program in the image must not make the job root: podman
         * is rootful, and root in the container is root on the node. */
        add(&b, "--security-opt=no-new-privileges");
        add(&b, "--cap-drop=all");
    }
    add(&b, "--network=host");
    const char *dev = iso && iso->dev_dir[0] ? iso->dev_dir : "/dev";
    if (c->cdi && s->uuid_count > 0) {
        for (size_t i = 0; i < s->uuid_count; i++) {
            addf(&b, "--device", cr_asprintf("nvidia.com/gpu=%s", s->gpu_uuids[i]));
        }
    } else {
        for (size_t i = 0; i < s->gpu_count; i++) {
            char n[32];
            snprintf(n, sizeof n, "nvidia%d", s->gpus[i]);
            add_dev(&b, dev, n);
        }
        const char *ctl[] = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"};
        for (size_t i = 0; i < sizeof ctl / sizeof ctl[0]; i++) {
            add_dev(&b, dev, ctl[i]);
        }
    }
    /* NVIDIA's own variable: what its hooks and tools read. */
    char vis[4096] = "";
    size_t off = 0;
    for (size_t i = 0; i < s->uuid_count && off < sizeof vis; i++) {
        off += (size_t)snprintf(vis + off, sizeof vis - off, "%s%s", i ? "," : "", s->gpu_uuids[i]);
    }
    for (size_t i = 0; s->uuid_count == 0 && i < s->gpu_count && off < sizeof vis; i++) {
        off += (size_t)snprintf(vis + off, sizeof vis - off, "%s%d", i ? "," : "", s->gpus[i]);
    }
    addf(&b, "--env", cr_asprintf("NVIDIA_VISIBLE_DEVICES=%s", s->gpu_count ? vis : "void"));
    for (char *const *e = env; e && *e; e++) {
        addf(&b, "--env", cr_strdup(*e));
    }
    if (env_file) {
        addf(&b, "--env-file", cr_strdup(env_file));
    }
    if (s->checkpoint_dir) {
        addf(&b, "--volume", cr_asprintf("%s:%s", s->checkpoint_dir, s->checkpoint_dir));
    }
    for (size_t i = 0; i < s->ctr.mountc; i++) {
        addf(&b, "--volume", cr_strdup(s->ctr.mounts[i]));
    }
    if (s->mem_bytes > 0) {
        addf(&b, "--memory", cr_asprintf("%lld", (long long)s->mem_bytes));
        addf(&b, "--memory-swap", cr_asprintf("%lld", (long long)s->mem_bytes));
    }
    if (s->cpus > 0) {
        addf(&b, "--cpus", cr_asprintf("%.3f", s->cpus));
    }
    addf(&b, "--ulimit",
         cr_asprintf("nofile=%lld:%lld", (long long)c->nofile[0], (long long)c->nofile[1]));
    addf(&b, "--ulimit",
         cr_asprintf("nproc=%lld:%lld", (long long)c->nproc[0], (long long)c->nproc[1]));
    if (cgroup_parent) {
        addf(&b, "--cgroup-parent", cr_strdup(cgroup_parent));
    }
    if (s->workdir) {
        addf(&b, "--workdir", cr_strdup(s->workdir));
    } else if (s->checkpoint_dir) {
        addf(&b, "--workdir", cr_strdup(s->checkpoint_dir));
    }
    if (s->ctr.entrypoint) {
        /* podman takes a JSON array for an entrypoint of several words. */
        json_t *a = json_array();
        for (size_t i = 0; i < s->ctr.entryc; i++) {
            json_array_append_new(a, json_string(s->ctr.entrypoint[i]));
        }
        addf(&b, "--entrypoint", json_dumps(a, JSON_COMPACT));
        json_decref(a);
    }
    add(&b, s->ctr.image);
    for (size_t i = 0; i < s->argc; i++) {
        add(&b, s->argv[i]);
    }
    return b.v;
}

int cr_ctr_remove(const cr_ctr *c, const char *name)
{
    char out[1024];
    int r = run_podman(c, "rm", "-f", "-t", "0", name, CR_CTR_CMD_MS, out, sizeof out);
    if (r != 0 && !strstr(out, "no such container")) {
        char l[200];
        last_line(out, l, sizeof l);
        cr_warn("agent: podman rm -f %s: %s", name, l);
        return CR_EIO;
    }
    return 0;
}

void cr_ctr_stop_async(const cr_ctr *c, const char *name, int64_t grace_s)
{
    /* Double fork: the grandchild belongs to init, the agent reaps only
     * the child at once. */
    pid_t pid = fork();
    if (pid == 0) {
        if (fork() == 0) {
            setsid();
            /* None of the agent's descriptors (its listening socket...). */
            syscall(SYS_close_range, 3U, ~0U, 0U);
            char g[32], out[256];
            snprintf(g, sizeof g, "%lld", (long long)grace_s);
            run_podman(c, "stop", "-t", g, name, NULL, (int)(grace_s + 30) * 1000, out, sizeof out);
        }
        _exit(0);
    }
    if (pid > 0) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
    }
}

int cr_ctr_exists(const cr_ctr *c, const char *name)
{
    char out[512];
    int r = run_podman(c, "container", "exists", name, NULL, NULL, CR_CTR_CMD_MS, out, sizeof out);
    return r == 0 ? 1 : r == 1 ? 0 : -1;
}

int cr_ctr_list(const cr_ctr *c, const char *node, char ***names, size_t *count)
{
    char *out = cr_malloc(CR_CTR_OUT_MAX);
    /* Only this agent's: another agent on the host (another cluster, or a
     * second agent with the same node name) owns its own containers. */
    char *filter = c->owner[0] ? cr_asprintf("label=corral.agent=%s", c->owner)
                               : cr_asprintf("label=corral.node=%s", node);
    int r = run_podman(c, "ps", "-a", "--filter", filter, "--format={{.Names}}", CR_CTR_CMD_MS, out,
                       CR_CTR_OUT_MAX);
    free(filter);
    *names = NULL;
    *count = 0;
    if (r != 0) {
        free(out);
        return CR_EIO;
    }
    argv_b b = {0};
    for (char *save = NULL, *l = strtok_r(out, "\n", &save); l && b.n < CR_CTR_MAX_NAMES;
         l = strtok_r(NULL, "\n", &save)) {
        if (strncmp(l, "corral-", 7) == 0) {
            add(&b, l);
        }
    }
    if (!b.v) {
        b.v = cr_calloc(1, sizeof *b.v);
    }
    *names = b.v;
    *count = b.n;
    free(out);
    return 0;
}

/* rmdir a cgroup directory and its children, depth first (the control
 * files go with each rmdir; a cgroup with processes stays). Bounded depth. */
static void rmdir_tree(const char *path, int depth)
{
    DIR *d = depth < 8 ? opendir(path) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.' || e->d_type != DT_DIR) {
            continue;
        }
        char *sub = cr_asprintf("%s/%s", path, e->d_name);
        rmdir_tree(sub, depth + 1);
        free(sub);
    }
    if (d) {
        closedir(d);
    }
    rmdir(path);
}

void cr_ctr_cgroup_cleanup(const char *parent)
{
    if (!parent || strstr(parent, "..")) {
        return;
    }
    /* conmon may still be exiting: a few tries, 50 ms apart. */
    for (int tries = 0; tries < 10; tries++) {
        int left = 0;
        DIR *d = opendir(CG_ROOT);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.') {
                continue;
            }
            char p[1200];
            snprintf(p, sizeof p, CG_ROOT "/%s%s", e->d_name, parent);
            rmdir_tree(p, 0);
            left |= access(p, F_OK) == 0;
        }
        if (d) {
            closedir(d);
        }
        if (!left) {
            return;
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}
