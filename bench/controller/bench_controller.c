/*
 * bench_controller.c - durable submissions per second through the API with
 * concurrent clients, API latency (p50/p99) at 64 concurrent clients, and
 * submissions per second through the CLI; beside the Slurm peer's sbatch
 * rate measured in the same run on the same machine.
 *
 *   bench_controller [--seconds S] [--clients 1,8,64] [--no-slurm] [--etcd URL]
 *                    [--user RPS]
 *                    [--etcd-cacert FILE] [--etcd-cert FILE] [--etcd-key FILE]
 *                    [--etcd-user NAME] [--etcd-password-file FILE]
 *
 * With --etcd URL, a second controller on that etcd (--store etcd:URL, its
 * own key prefix) takes the same API load after the SQLite one, and its
 * lines ("corral etcd") follow: durable there means committed by the etcd
 * cluster (its own fsync of the raft log). bench/controller/etcd_vs_sqlite.sh
 * starts a local etcd and runs both. The --etcd-* flags are handed to that
 * controller unchanged (docs/operations.md, "etcd over TLS"): an https://
 * etcd with client certificates and authentication; the controller checks
 * them, and its refusal is printed.
 *
 * With --user RPS the load comes from one user token (tenant "bench")
 * instead of the admin token, and the controller runs with
 * --rate-limit-rps RPS (docs/operations.md, "Request rate limits"; 0: no
 * limit): admin tokens are never rate limited, user tokens are (100 a
 * second by default), so thousands of submits a second from one user token
 * need a setting like this one. --user 0 against --user 1000000 measures
 * the limiter's own cost on the hot path (off, against on but never
 * refusing).
 *
 * The controller runs with its defaults: synchronous=FULL, so every 201 is
 * on disk (fsync) before it is sent; group commit batches the concurrent
 * submissions into shared commits. Clients keep their connections alive,
 * as a real client library does. The Slurm peer is started with
 * ../shared/peers/slurm/start.sh (or $SLURM_PEER) when it is there, or a
 * running one named by $SLURM_CONF is used; else its line says why it was
 * skipped.
 */
#include "cr_config.h"
#include "cr_buf.h"
#include "cr_time.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

/* The controller's etcd security flags, passed through as they are. */
static const char *const etcd_sec_flags[] = {"--etcd-cacert", "--etcd-cert", "--etcd-key",
                                             "--etcd-user", "--etcd-password-file"};
#define ETCD_SEC_N (sizeof etcd_sec_flags / sizeof etcd_sec_flags[0])

typedef struct ctl_proc {
    const char *etcd;            /* NULL: SQLite; else the etcd URL list */
    const char *const *etcd_sec; /* ETCD_SEC_N values (NULL: not given), with etcd */
    const char *rps;             /* --rate-limit-rps for the controller, NULL: its default */
    pid_t pid;
    char dir[256];
    char url[128];
    char token[128];
} ctl_proc;

static char corral_bin[1024];

static void find_bin(void)
{
    const char *env = getenv("CORRAL_BIN");
    if (env) {
        snprintf(corral_bin, sizeof corral_bin, "%s", env);
        return;
    }
    char self[1000];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) {
        *slash = '\0';
    }
    snprintf(corral_bin, sizeof corral_bin, "%s/../../corral", self);
}

static void read_line(const char *path, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    out[0] = '\0';
    if (f) {
        if (!fgets(out, (int)len, f)) {
            out[0] = '\0';
        }
        fclose(f);
    }
    out[strcspn(out, "\r\n")] = '\0';
}

static int start_controller(ctl_proc *c)
{
    snprintf(c->dir, sizeof c->dir, "/tmp/corral-bench-XXXXXX");
    if (!mkdtemp(c->dir)) {
        return -1;
    }
    c->pid = fork();
    if (c->pid == 0) {
        char log[300];
        snprintf(log, sizeof log, "%s/controller.log", c->dir);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        setenv("CORRAL_LOG", "warn", 1);
        char spec[600], cluster[64];
        const char *av[16 + 2 * ETCD_SEC_N] = {corral_bin, "controller",  "--state-dir", c->dir,
                                               "--listen", "127.0.0.1:0", "--threads",   "2"};
        int ac = 8;
        if (c->etcd) {
            snprintf(spec, sizeof spec, "etcd:%s", c->etcd);
            snprintf(cluster, sizeof cluster, "bench-%d", (int)getpid());
            av[ac++] = "--store";
            av[ac++] = spec;
            av[ac++] = "--store-cluster";
            av[ac++] = cluster;
            for (size_t i = 0; i < ETCD_SEC_N; i++) {
                if (c->etcd_sec && c->etcd_sec[i]) {
                    av[ac++] = etcd_sec_flags[i];
                    av[ac++] = c->etcd_sec[i];
                }
            }
        }
        if (c->rps) {
            av[ac++] = "--rate-limit-rps";
            av[ac++] = c->rps;
        }
        av[ac] = NULL;
        execv(corral_bin, (char *const *)av);
        _exit(127);
    }
    char path[300];
    snprintf(path, sizeof path, "%s/listen.addr", c->dir);
    int64_t deadline = cr_mono_ns() + 20 * CR_NS_PER_SEC;
    while (cr_mono_ns() < deadline) {
        read_line(path, c->url, sizeof c->url);
        if (c->url[0]) {
            break;
        }
        if (waitpid(c->pid, NULL, WNOHANG) == c->pid) {
            c->pid = 0; /* refused to start: its log says why */
            break;
        }
        usleep(20000);
    }
    snprintf(path, sizeof path, "%s/admin.token", c->dir);
    read_line(path, c->token, sizeof c->token);
    return c->url[0] && c->token[0] ? 0 : -1;
}

static size_t collect(char *p, size_t s, size_t n, void *u)
{
    cr_buf_append(u, p, s * n);
    return s * n;
}

/* POST path body with the admin token: the answer (new, free()) or NULL. */
static char *admin_post(const ctl_proc *c, const char *path, const char *body)
{
    char url[256], auth[256];
    snprintf(url, sizeof url, "%s%s", c->url, path);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->token);
    cr_buf out;
    cr_buf_init(&out);
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = curl_slist_append(NULL, auth);
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &out);
    long code = 0;
    if (curl_easy_perform(h) == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    if (code != 201 && code != 200) {
        cr_buf_fini(&out);
        return NULL;
    }
    return cr_buf_take(&out);
}

/* --user: the load from a user token of tenant "bench" (into c->token). */
static int use_user_token(ctl_proc *c)
{
    free(admin_post(c, "/v1/tenants", "{\"name\":\"bench\"}"));
    char *ans =
        admin_post(c, "/v1/tokens", "{\"role\":\"user\",\"tenant\":\"bench\",\"name\":\"b\"}");
    const char *t = ans ? strstr(ans, "crl_") : NULL;
    size_t n = t ? strcspn(t, "\"") : 0;
    if (!t || n >= sizeof c->token) {
        free(ans);
        return -1;
    }
    memcpy(c->token, t, n);
    c->token[n] = '\0';
    free(ans);
    return 0;
}

/* The controller's log (its refusal names the flag at fault), to stderr. */
static void print_log(const ctl_proc *c)
{
    char path[300];
    snprintf(path, sizeof path, "%s/controller.log", c->dir);
    FILE *f = fopen(path, "r");
    char line[1024];
    int n = 0;
    while (f && n++ < 40 && fgets(line, sizeof line, f)) {
        fprintf(stderr, "  %s", line);
    }
    if (f) {
        fclose(f);
    }
}

static void stop_controller(ctl_proc *c)
{
    if (c->pid > 0) {
        kill(c->pid, SIGTERM);
        waitpid(c->pid, NULL, 0);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", c->dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot remove %s\n", c->dir);
    }
}

static size_t discard(char *p, size_t s, size_t n, void *u)
{
    return s * n;
}

typedef struct client {
    const ctl_proc *c;
    int64_t until_ns;
    int64_t *lat; /* per request, ns */
    size_t nlat, cap;
    size_t errors;
} client;

static void *client_main(void *arg)
{
    client *cl = arg;
    CURL *h = curl_easy_init();
    char url[256], auth[256];
    snprintf(url, sizeof url, "%s/v1/jobs", cl->c->url);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", cl->c->token);
    struct curl_slist *hdrs = curl_slist_append(NULL, auth);
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    static const char body[] =
        "{\"name\":\"bench\",\"command\":[\"true\"],\"gpus\":1,\"gpu_type\":\"H100 SXM\"}";
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)(sizeof body - 1));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    while (cr_mono_ns() < cl->until_ns) {
        int64_t t0 = cr_mono_ns();
        long code = 0;
        if (curl_easy_perform(h) == CURLE_OK) {
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        }
        int64_t t1 = cr_mono_ns();
        if (code != 201) {
            cl->errors++;
            continue;
        }
        if (cl->nlat == cl->cap) {
            cl->cap = cl->cap ? cl->cap * 2 : 4096;
            cl->lat = realloc(cl->lat, cl->cap * sizeof *cl->lat);
            if (!cl->lat) {
                abort();
            }
        }
        cl->lat[cl->nlat++] = t1 - t0;
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* CPU seconds (user + system) the process has used so far. */
static double proc_cpu_s(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) {
        return 0;
    }
    char buf[2048];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* skip "pid (comm)" */
    unsigned long long ut = 0, st = 0;
    if (!p ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) {
        return 0;
    }
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void run_api(const ctl_proc *c, int nclients, double seconds)
{
    double cpu0 = proc_cpu_s(c->pid);
    pthread_t *th = calloc((size_t)nclients, sizeof *th);
    client *cl = calloc((size_t)nclients, sizeof *cl);
    int64_t start = cr_mono_ns();
    int64_t until = start + (int64_t)(seconds * 1e9);
    for (int i = 0; i < nclients; i++) {
        cl[i].c = c;
        cl[i].until_ns = until;
        pthread_create(&th[i], NULL, client_main, &cl[i]);
    }
    size_t total = 0, errors = 0;
    for (int i = 0; i < nclients; i++) {
        pthread_join(th[i], NULL);
        total += cl[i].nlat;
        errors += cl[i].errors;
    }
    double elapsed = (double)(cr_mono_ns() - start) / 1e9;
    int64_t *all = malloc((total ? total : 1) * sizeof *all);
    size_t k = 0;
    for (int i = 0; i < nclients; i++) {
        memcpy(all + k, cl[i].lat, cl[i].nlat * sizeof *all);
        k += cl[i].nlat;
        free(cl[i].lat);
    }
    qsort(all, total, sizeof *all, cmp_i64);
    double p50 = total ? (double)all[total / 2] / 1e6 : 0;
    double p99 = total ? (double)all[(size_t)((double)total * 0.99)] / 1e6 : 0;
    double cpu = proc_cpu_s(c->pid) - cpu0;
    printf("corral %s clients=%-3d submits=%-7zu errors=%-3zu rate=%8.0f/s  p50=%6.2fms  "
           "p99=%6.2fms  server_cpu=%.0fus/submit\n",
           c->etcd ? "etcd " : "api  ", nclients, total, errors, (double)total / elapsed, p50, p99,
           total ? cpu * 1e6 / (double)total : 0.0);
    fflush(stdout);
    free(all);
    free(cl);
    free(th);
}

/* N `corral submit` processes, P at a time (xargs -P), as users would run them. */
static void run_cli(const ctl_proc *c, int n, int par)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "CORRAL_SERVER='%s' CORRAL_TOKEN='%s' '%s' submit -- true >/dev/null 2>&1", c->url,
             c->token, corral_bin);
    if (system(cmd) != 0) {
        printf("corral cli   skipped: 'corral submit' is not available in this build\n");
        return;
    }
    snprintf(cmd, sizeof cmd,
             "seq %d | CORRAL_SERVER='%s' CORRAL_TOKEN='%s' xargs -P %d -I{} '%s' submit --name "
             "cli-{} -- true >/dev/null 2>&1",
             n, c->url, c->token, par, corral_bin);
    int64_t t0 = cr_mono_ns();
    int rc = system(cmd);
    double s = (double)(cr_mono_ns() - t0) / 1e9;
    printf("corral cli   processes=%d parallel=%d rate=%8.0f/s%s\n", n, par, n / s,
           rc ? "  (some submits failed)" : "");
    fflush(stdout);
}

static const char *slurm_dir(void)
{
    static char dir[1024];
    const char *env = getenv("SLURM_PEER");
    if (env) {
        return env;
    }
    /* The team's shared folder sits beside the repository: ../shared. */
    const char *src = getenv("CORRAL_SRC");
    snprintf(dir, sizeof dir, "%s/../shared/peers/slurm", src ? src : CR_SOURCE_DIR);
    return dir;
}

static void sbatch_rate(const char *conf, int n, int par)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "export SLURM_CONF='%s'; seq %d | xargs -P %d -I{} sbatch -Q --gpus=1 -o /dev/null "
             "--wrap=true >/dev/null 2>&1",
             conf, n, par);
    int64_t t0 = cr_mono_ns();
    int rc = system(cmd);
    double s = (double)(cr_mono_ns() - t0) / 1e9;
    printf("slurm sbatch submits=%d parallel=%d rate=%8.0f/s%s\n", n, par, n / s,
           rc ? "  (some sbatch failed)" : "");
    fflush(stdout);
}

/*
 * The Slurm peer: a running one named by $SLURM_CONF is used as it is;
 * otherwise start.sh starts one for this run and stop.sh stops it.
 */
static void run_slurm(int n, int par)
{
    char cmd[4096];
    const char *conf = getenv("SLURM_CONF");
    if (conf && *conf) {
        snprintf(cmd, sizeof cmd, "SLURM_CONF='%s' sinfo >/dev/null 2>&1", conf);
        if (system(cmd) == 0) {
            printf("# slurm peer: the running one at SLURM_CONF=%s\n", conf);
            sbatch_rate(conf, n, 1);
            sbatch_rate(conf, n, par);
            return;
        }
    }
    const char *dir = slurm_dir();
    snprintf(cmd, sizeof cmd, "%s/start.sh", dir);
    if (access(cmd, R_OK) != 0) {
        printf("slurm sbatch skipped: no Slurm peer at %s (set SLURM_PEER or SLURM_CONF)\n", dir);
        return;
    }
    /* A directory and ports of this run's own: another bench's peer (or
     * another engineer's) may be running beside it. */
    char sd[128], sconf[160];
    snprintf(sd, sizeof sd, "%s/corral-bench-slurm-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (strlen(sd) > 100 || !mkdtemp(sd)) {
        printf("slurm sbatch skipped: no directory for the peer\n");
        return;
    }
    int port_base = 21000 + (int)(getpid() % 200) * 200; /* slurmd ports go to base+184+nodes */
    snprintf(cmd, sizeof cmd, "PORT_BASE=%d bash '%s/start.sh' '%s/peer' >'%s/start.log' 2>&1",
             port_base, dir, sd, sd);
    if (system(cmd) != 0) {
        printf("slurm sbatch skipped: %s/start.sh failed (see %s/start.log; "
               "another peer on ports %d..? then set SLURM_CONF)\n",
               dir, sd, port_base);
        return;
    }
    snprintf(sconf, sizeof sconf, "%s/peer/slurm.conf", sd);
    sbatch_rate(sconf, n, 1);
    sbatch_rate(sconf, n, par);
    snprintf(cmd, sizeof cmd, "SLURM_CONF='%s' scancel -u root >/dev/null 2>&1", sconf);
    if (system(cmd) != 0) {
        /* nothing left to cancel */
    }
    /* The daemons this run started, by their pid files, before stop.sh
     * removes them: any still alive 10 s after stop.sh gets SIGKILL. */
    pid_t pids[64];
    size_t npids = 0;
    snprintf(cmd, sizeof cmd, "cat '%s'/peer/*.pid 2>/dev/null", sd);
    FILE *pf = popen(cmd, "r");
    if (pf) {
        int x;
        while (npids < 64 && fscanf(pf, "%d", &x) == 1) {
            pids[npids++] = (pid_t)x;
        }
        pclose(pf);
    }
    snprintf(cmd, sizeof cmd, "bash '%s/stop.sh' '%s/peer' >/dev/null 2>&1; rm -rf '%s'", dir, sd,
             sd);
    if (system(cmd) != 0) {
        fprintf(stderr, "slurm stop.sh failed\n");
    }
    int64_t deadline = cr_mono_ns() + 10 * CR_NS_PER_SEC;
    for (size_t i = 0; i < npids; i++) {
        while (kill(pids[i], 0) == 0 && cr_mono_ns() < deadline) {
            usleep(100000);
        }
        if (kill(pids[i], 0) == 0) {
            kill(pids[i], SIGKILL);
        }
    }
}

int main(int argc, char **argv)
{
    double seconds = 3;
    bool slurm = true;
    const char *etcd = NULL, *user_rps = NULL;
    const char *etcd_sec[ETCD_SEC_N] = {NULL};
    bool any_sec = false;
    char clients[128] = "1,8,64";
    for (int i = 1; i < argc; i++) {
        size_t k = 0;
        while (k < ETCD_SEC_N && strcmp(argv[i], etcd_sec_flags[k]) != 0) {
            k++;
        }
        if (k < ETCD_SEC_N && i + 1 < argc) {
            etcd_sec[k] = argv[++i];
            any_sec = true;
            continue;
        }
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = atof(argv[++i]);
        } else if (strcmp(argv[i], "--clients") == 0 && i + 1 < argc) {
            snprintf(clients, sizeof clients, "%s", argv[++i]);
        } else if (strcmp(argv[i], "--no-slurm") == 0) {
            slurm = false;
        } else if (strcmp(argv[i], "--etcd") == 0 && i + 1 < argc) {
            etcd = argv[++i];
        } else if (strcmp(argv[i], "--user") == 0 && i + 1 < argc) {
            user_rps = argv[++i];
        } else {
            fprintf(stderr, "usage: bench_controller [--seconds S] [--clients 1,8,64] "
                            "[--no-slurm] [--etcd URL] [--user RPS] [--etcd-cacert FILE] "
                            "[--etcd-cert FILE] [--etcd-key FILE] [--etcd-user NAME] "
                            "[--etcd-password-file FILE]\n");
            return 2;
        }
    }
    if (any_sec && !etcd) {
        fprintf(stderr, "bench_controller: --etcd-cacert, --etcd-cert, --etcd-key, --etcd-user "
                        "and --etcd-password-file go with --etcd URL\n");
        return 2;
    }
    if (seconds <= 0 || seconds > 600) {
        fprintf(stderr, "bench_controller: --seconds: expected 0..600\n");
        return 2;
    }
    find_bin();
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("# controller durable submissions (SQLite WAL, synchronous=FULL, group commit); "
           "%ld CPUs; clients and server on the same machine\n",
           ncpu);
    ctl_proc c;
    memset(&c, 0, sizeof c);
    c.rps = user_rps;
    if (start_controller(&c) != 0) {
        fprintf(stderr, "bench_controller: cannot start %s controller\n", corral_bin);
        stop_controller(&c);
        return 1;
    }
    if (user_rps && use_user_token(&c) != 0) {
        fprintf(stderr, "bench_controller: cannot make a user token (see %s)\n", c.dir);
        stop_controller(&c);
        return 1;
    }
    if (user_rps) {
        printf("# load from one user token; controller --rate-limit-rps %s\n", user_rps);
    }
    char list[128];
    snprintf(list, sizeof list, "%s", clients);
    char *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int n = atoi(t);
        if (n > 0 && n <= 1024) {
            run_api(&c, n, seconds);
        }
    }
    run_cli(&c, 400, 8);
    stop_controller(&c);
    int rc = 0;
    if (etcd) {
        ctl_proc e;
        memset(&e, 0, sizeof e);
        e.etcd = etcd;
        e.etcd_sec = etcd_sec;
        printf("# the same on etcd (%s): every 201 committed by the etcd cluster\n", etcd);
        if (start_controller(&e) != 0) {
            fprintf(stderr, "bench_controller: cannot start a controller on etcd %s:\n", etcd);
            print_log(&e);
            rc = 1;
        } else {
            snprintf(list, sizeof list, "%s", clients);
            save = NULL;
            for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                int n = atoi(t);
                if (n > 0 && n <= 1024) {
                    run_api(&e, n, seconds);
                }
            }
        }
        stop_controller(&e);
    }
    if (slurm) {
        run_slurm(200, 8);
    } else {
        printf("slurm sbatch skipped: --no-slurm\n");
    }
    printf("# targets: >= 10,000 durable submissions/s over the API; >= 10x Slurm's sbatch rate\n");
    curl_global_cleanup();
    return rc;
}
