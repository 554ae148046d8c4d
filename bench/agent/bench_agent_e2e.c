/*
 * bench_agent_e2e.c - end to end, beside Slurm: a controller and 4 agents
 * of 8 simulated H100s on this machine; 500 one-GPU jobs that exit at once
 * ("true"), submitted one POST each over one connection (as a script
 * would), then again as one array submission; time to submit and until
 * all 500 have completed. The jobs are real processes started by the
 * agents. Then, when ../shared/peers/slurm (beside the repository) is there (and
 * CORRAL_BENCH_SLURM is not 0), the same workload through a real Slurm
 * (4 nodes x 8 GPUs) in the same run, and the ratio.
 *
 *   CORRAL_BIN (default ./build/corral), BENCH_JOBS (default 500),
 *   BENCH_PIDNS (the agents' --job-pid-namespace: auto, the default, or off)
 */
#include "cr_config.h"

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NODES 4

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t collect(char *p, size_t s, size_t n, void *ud)
{
    FILE *f = ud;
    return fwrite(p, s, n, f);
}

typedef struct client {
    CURL *h;
    char base[64];
    char auth[300];
} client;

/* One request; returns the parsed JSON answer (or NULL), status in *code. */
static json_t *call(client *c, const char *method, const char *path, const char *body, long *code)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", c->base, path);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct curl_slist *hdr = curl_slist_append(NULL, c->auth);
    hdr = curl_slist_append(hdr, "Content-Type: application/json");
    curl_easy_setopt(c->h, CURLOPT_URL, url);
    curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c->h, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(c->h, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(c->h, CURLOPT_TCP_NODELAY, 1L);
    if (body) {
        curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c->h, CURLOPT_CUSTOMREQUEST, method);
    } else {
        curl_easy_setopt(c->h, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(c->h, CURLOPT_CUSTOMREQUEST, NULL);
    }
    *code = 0;
    if (curl_easy_perform(c->h) == CURLE_OK) {
        curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, code);
    }
    curl_slist_free_all(hdr);
    fclose(f);
    json_t *j = buf ? json_loads(buf, 0, NULL) : NULL;
    free(buf);
    return j;
}

static long count_of(client *c, const char *path)
{
    long code;
    json_t *j = call(c, "GET", path, NULL, &code);
    json_t *total = json_object_get(j, "total"); /* paged lists (jobs): all that match */
    long n =
        code == 200 ? (long)json_integer_value(total ? total : json_object_get(j, "count")) : -1;
    json_decref(j);
    return n;
}

static char *read_line(const char *path, double wait_s)
{
    double end = now_s() + wait_s;
    while (now_s() < end) {
        FILE *f = fopen(path, "r");
        if (f) {
            char buf[512] = "";
            char *ok = fgets(buf, sizeof buf, f);
            fclose(f);
            if (ok && *buf) {
                buf[strcspn(buf, "\r\n")] = '\0';
                return strdup(buf);
            }
        }
        usleep(20000);
    }
    return NULL;
}

/* utime+stime of pid in seconds (0 when gone). */
static double cpu_of(pid_t pid)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    double s = 0;
    if (f && fgets(buf, sizeof buf, f)) {
        char *p = strrchr(buf, ')');
        unsigned long long ut = 0, st = 0;
        if (p &&
            sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2) {
            s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
        }
    }
    if (f) {
        fclose(f);
    }
    return s;
}

static pid_t spawn(char *const argv[], const char *log)
{
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen(log, "w", stdout);
        (void)f;
        dup2(1, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

/* Submit n jobs (one POST each, or one array POST) and wait until none is active. */
static int run_round(client *c, int n, int array, double *sub_s, double *all_s)
{
    long code;
    double t0 = now_s();
    if (array) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"name\":\"bench\",\"command\":[\"true\"],\"gpus\":1,\"array\":%d}", n);
        json_decref(call(c, "POST", "/v1/jobs", body, &code));
        if (code != 201) {
            fprintf(stderr, "bench: array submit: HTTP %ld\n", code);
            return -1;
        }
    } else {
        for (int i = 0; i < n; i++) {
            json_decref(call(c, "POST", "/v1/jobs",
                             "{\"name\":\"bench\",\"command\":[\"true\"],\"gpus\":1}", &code));
            if (code != 201) {
                fprintf(stderr, "bench: submit %d: HTTP %ld\n", i, code);
                return -1;
            }
        }
    }
    double t1 = now_s();
    while (count_of(c, "/v1/jobs?state=active&limit=1") != 0) {
        if (now_s() - t0 > 600) {
            fprintf(stderr, "bench: jobs still active after 600 s\n");
            return -1;
        }
        usleep(5000);
    }
    double t2 = now_s();
    *sub_s = t1 - t0;
    *all_s = t2 - t0;
    return 0;
}

static const char usage_text[] =
    "usage: bench_agent_e2e\n"
    "End to end, beside Slurm: a controller and 4 agents of 8 simulated H100s on\n"
    "this machine; BENCH_JOBS one-GPU jobs that exit at once, one POST each, then\n"
    "one array POST; jobs/s, and the controller's and agents' CPU per job; then\n"
    "the same workload through the Slurm peer (../shared/peers/slurm) when it is\n"
    "there, in a directory (under BENCH_DIR) and ports (PORT_BASE) of its own.\n"
    "environment:\n"
    "  CORRAL_BIN          the corral binary (default ./build/corral)\n"
    "  BENCH_JOBS          jobs per round (default 500)\n"
    "  BENCH_DIR           where state goes (default /tmp)\n"
    "  BENCH_SYNC          the controller's --sync (default full)\n"
    "  BENCH_PIDNS         the agents' --job-pid-namespace: auto (default) or off\n"
    "  CORRAL_BENCH_SLURM  0: no Slurm peer\n";

int main(int argc, char **argv)
{
    double corral_rate = 0; /* set before any jump to out that reads it */
    if (argc > 1) {
        int help = strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0;
        fputs(usage_text, help ? stdout : stderr);
        if (!help) {
            fprintf(stderr,
                    "bench_agent_e2e: unexpected argument '%s' (settings are environment "
                    "variables)\n",
                    argv[1]);
        }
        return help ? 0 : 2;
    }
    const char *bin = getenv("CORRAL_BIN") ? getenv("CORRAL_BIN") : "./build/corral";
    int n = getenv("BENCH_JOBS") ? atoi(getenv("BENCH_JOBS")) : 500;
    /* BENCH_DIR: where the controller's and agents' state go (default /tmp). */
    char dir[96];
    snprintf(dir, sizeof dir, "%.60s/corral-bench-e2e-XXXXXX",
             getenv("BENCH_DIR") ? getenv("BENCH_DIR") : "/tmp");
    if (!mkdtemp(dir) || access(bin, X_OK) != 0) {
        fprintf(stderr, "bench: need %s (set CORRAL_BIN)\n", bin);
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int port = 20000 + (int)(getpid() % 20000);
    char listen[64], server[64], ctl_state[128], log[160], tokpath[160], jtok[160];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    snprintf(server, sizeof server, "http://127.0.0.1:%d", port);
    snprintf(ctl_state, sizeof ctl_state, "%s/ctl", dir);
    snprintf(log, sizeof log, "%s/controller.log", dir);
    const char *sync = getenv("BENCH_SYNC") ? getenv("BENCH_SYNC") : "full";
    /* The checkpoint root in dir too (its default is /tmp/corral/ckpt). */
    char conf[160];
    snprintf(conf, sizeof conf, "%s/ctl.json", dir);
    FILE *cf = fopen(conf, "w");
    if (cf) {
        fprintf(cf, "{\"checkpoint_root\": \"%s/ckpt\"}\n", dir);
        fclose(cf);
    }
    /* each job in its own PID namespace (auto, the agent's default) or not */
    const char *pidns = getenv("BENCH_PIDNS") ? getenv("BENCH_PIDNS") : "auto";
    /* the agents join with the controller's join token (legacy join) */
    char *cargv[] = {(char *)bin, "controller", "--allow-legacy-join",
                     "--listen",  listen,       "--state-dir",
                     ctl_state,   "--config",   conf,
                     "--sync",    (char *)sync, NULL};
    pid_t pids[NODES + 1];
    pids[0] = spawn(cargv, log);
    snprintf(tokpath, sizeof tokpath, "%s/admin.token", ctl_state);
    snprintf(jtok, sizeof jtok, "%s/join.token", ctl_state);
    /* generous: the controller may run under valgrind (CORRAL_BIN a wrapper) */
    char *admin = read_line(tokpath, 120);
    char *join = read_line(jtok, 120);
    int rc = 1;
    client c = {curl_easy_init(), "", ""};
    snprintf(c.base, sizeof c.base, "%s", server);
    if (!admin || !join) {
        fprintf(stderr, "bench: controller did not start (see %s)\n", log);
        goto out;
    }
    snprintf(c.auth, sizeof c.auth, "Authorization: Bearer %s", admin);
    for (int i = 0; i < NODES; i++) {
        char node[16], state[160], alog[160];
        snprintf(node, sizeof node, "n%d", i + 1);
        snprintf(state, sizeof state, "%s/%s", dir, node);
        snprintf(alog, sizeof alog, "%s/agent-%s.log", dir, node);
        char *aargv[] = {(char *)bin,      "agent",
                         "--server",       server,
                         "--join-token",   jtok,
                         "--node",         node,
                         "--gpus",         "sim:8xH100 SXM",
                         "--listen",       "127.0.0.1:0",
                         "--state-dir",    state,
                         "--kill-on-exit", "--job-pid-namespace",
                         (char *)pidns,    NULL};
        pids[i + 1] = spawn(aargv, alog);
    }
    double end = now_s() + 120;
    while (count_of(&c, "/v1/nodes") < NODES && now_s() < end) {
        usleep(20000);
    }
    if (count_of(&c, "/v1/nodes") < NODES) {
        fprintf(stderr, "bench: agents did not register (see %s)\n", dir);
        goto out;
    }
    double sub, all;
    if (run_round(&c, n, 0, &sub, &all) < 0) {
        goto out;
    }
    long done = count_of(&c, "/v1/jobs?state=completed&limit=1");
    printf("corral jobs=%d submit_s=%.2f drain_s=%.2f jobs_per_s=%.1f (one POST per job; %ld "
           "completed)\n",
           n, sub, all, n / all, done);
    corral_rate = n / all;
    if (run_round(&c, n, 1, &sub, &all) < 0) {
        goto out;
    }
    done = count_of(&c, "/v1/jobs?state=completed&limit=1");
    printf("corral jobs=%d submit_s=%.2f drain_s=%.2f jobs_per_s=%.1f (one array POST; %ld "
           "completed in all)\n",
           n, sub, all, n / all, done);
    double agents_cpu = 0;
    for (int i = 1; i <= NODES; i++) {
        agents_cpu += cpu_of(pids[i]);
    }
    printf("state under %s\n", dir);
    printf("cpu for %d jobs: controller %.2f s, 4 agents %.2f s (%.2f ms per job per agent "
           "process, children not counted)\n",
           2 * n, cpu_of(pids[0]), agents_cpu, agents_cpu * 1000 / (2 * n));
    rc = 0;
out:
    for (int i = NODES; i >= 0; i--) {
        if (pids[i] > 0) {
            kill(pids[i], SIGTERM);
            int st;
            waitpid(pids[i], &st, 0);
        }
    }
    curl_easy_cleanup(c.h);
    free(admin);
    free(join);
    char peer[1200]; /* the team's shared folder beside the repository */
    const char *src = getenv("CORRAL_SRC");
    snprintf(peer, sizeof peer, "%s/../shared/peers/slurm", src ? src : CR_SOURCE_DIR);
    const char *want = getenv("CORRAL_BENCH_SLURM");
    if (rc == 0 && (!want || strcmp(want, "0") != 0) && access(peer, R_OK) == 0) {
        /* its own directory (under dir) and ports: another peer may run
         * beside this one; stop.sh waits for its daemons to exit */
        char cmd[8192];
        int port_base = 21000 + (int)(getpid() % 200) * 200;
        snprintf(cmd, sizeof cmd,
                 "export PORT_BASE=%d; %s/start.sh %s/slurm >/dev/null 2>&1 && %s/drain.sh %d "
                 "%s/slurm; %s/stop.sh %s/slurm >/dev/null 2>&1",
                 port_base, peer, dir, peer, n, dir, peer, dir);
        FILE *p = popen(cmd, "r");
        char line[256] = "";
        double slurm_rate = 0;
        while (p && fgets(line, sizeof line, p)) {
            fputs(line, stdout);
            char *r = strstr(line, "jobs_per_s=");
            if (r) {
                slurm_rate = atof(r + 11);
            }
        }
        if (p) {
            pclose(p);
        }
        if (slurm_rate > 0) {
            printf("ratio corral/slurm (one POST per job) = %.1fx (target >= 10x)\n",
                   corral_rate / slurm_rate);
        } else {
            printf("slurm peer did not report a figure\n");
        }
    } else if (rc == 0) {
        printf("slurm peer not run (no %s or CORRAL_BENCH_SLURM=0)\n", peer);
    }
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (getenv("BENCH_KEEP")) {
        printf("logs kept in %s\n", dir);
    } else if (system(cmd) != 0) {
        fprintf(stderr, "bench: could not remove all of %s\n", dir);
    }
    curl_global_cleanup();
    return rc;
}
