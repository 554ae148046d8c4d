/*
 * bench_soak.c - the controller under a long mixed load (issue 10): is its
 * memory flat, and does a page of GET /v1/jobs stay fast with a big store?
 *
 *   bench_soak [--seconds S] [--clients N] [--agents N] [--finished N]
 *              [--sample S] [--think-ms MS] [--open N]
 *   defaults: 1800 s, 64 clients, 5 agents, 100000 finished jobs,
 *             a sample every 30 s, 20 ms between a client's requests,
 *             at most 16 open jobs a client.
 *
 * Set-up: a fresh controller (defaults: synchronous=FULL, retention 10,000
 * finished jobs / 1 h), N finished jobs put in the store through the API
 * (arrays of 10,000 submitted, then each cancelled), then the agents
 * (`corral agent --gpus sim:8xH100 SXM`, real processes running `true`).
 * Load: each client loops over submit (a 1-GPU job running `true`), cancel
 * (its oldest own job not yet cancelled), GET /v1/jobs?limit=100 (timed),
 * GET /v1/jobs/ID and GET /v1/jobs/ID/logs. A client that has --open jobs
 * submitted and not cancelled cancels instead of submitting, so the queue
 * is stationary: submits and cancels alone are a random walk, and the
 * pending queue (live memory, several KiB a job) would grow for hours.
 * Every sample prints the controller's RSS, its live heap (malloc's bytes
 * in use, from /metrics), the pending jobs and the p99 of the page reads in
 * that interval; the end prints the RSS drift after the warm-up (the first
 * sixth of the run, at most 5 minutes) and the overall p99.
 */
#include "cr_buf.h"
#include "cr_time.h"

#include <fcntl.h>
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

static char corral_bin[1024];
static char dir[256], url[128], token[128], join_path[300];
static pid_t ctl_pid, agent_pids[64];
static int nagents = 5;

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

static pid_t spawn(char *const argv[], const char *log)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        setenv("CORRAL_LOG", "warn", 1);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

static long rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kib = strtol(line + 6, NULL, 10);
        }
    }
    if (f) {
        fclose(f);
    }
    return kib;
}

/* ------------------------------------------------------------------------ */
/* HTTP                                                                     */

typedef struct conn {
    CURL *h;
    struct curl_slist *hdrs;
    cr_buf body;
} conn;

static size_t sink(char *p, size_t s, size_t n, void *u)
{
    cr_buf_append(u, p, s * n);
    return s * n;
}

static void conn_init(conn *c)
{
    c->h = curl_easy_init();
    char auth[256];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    c->hdrs = curl_slist_append(NULL, auth);
    c->hdrs = curl_slist_append(c->hdrs, "Content-Type: application/json");
    cr_buf_init(&c->body);
}

static void conn_fini(conn *c)
{
    curl_slist_free_all(c->hdrs);
    curl_easy_cleanup(c->h);
    cr_buf_fini(&c->body);
}

/* One request on the kept-alive connection; the status, the body in c->body. */
static long http(conn *c, const char *method, const char *path, const char *body)
{
    char u[512];
    snprintf(u, sizeof u, "%s%s", url, path);
    cr_buf_reset(&c->body);
    curl_easy_setopt(c->h, CURLOPT_URL, u);
    curl_easy_setopt(c->h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, c->hdrs);
    curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c->h, CURLOPT_WRITEDATA, &c->body);
    curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->h, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, body ? body : "");
    curl_easy_setopt(c->h, CURLOPT_POSTFIELDSIZE, (long)(body ? strlen(body) : 0));
    if (!body) {
        curl_easy_setopt(c->h, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(c->h, CURLOPT_CUSTOMREQUEST, method);
    }
    long code = 0;
    if (curl_easy_perform(c->h) == CURLE_OK) {
        curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &code);
    }
    return code;
}

/* The first id of an {"ids":[...]} answer, or 0. */
static long long first_id(const conn *c)
{
    const char *p = strstr(cr_buf_str((cr_buf *)&c->body), "\"ids\":[");
    return p ? atoll(p + 7) : 0;
}

static long long json_num(const conn *c, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(cr_buf_str((cr_buf *)&c->body), k);
    return p ? atoll(p + strlen(k)) : -1;
}

/* ------------------------------------------------------------------------ */
/* Set-up: finished jobs in the store.                                      */

typedef struct range {
    long long from, to; /* ids to cancel */
    atomic_llong *done;
} range;

static void *cancel_main(void *arg)
{
    range *r = arg;
    conn c;
    conn_init(&c);
    char path[96];
    for (long long id = r->from; id < r->to; id++) {
        snprintf(path, sizeof path, "/v1/jobs/%lld/cancel", id);
        if (http(&c, "POST", path, "{}") == 200) {
            atomic_fetch_add(r->done, 1);
        }
    }
    conn_fini(&c);
    return NULL;
}

static int fill_store(long long n, int threads)
{
    conn c;
    conn_init(&c);
    long long first = 0, left = n;
    while (left > 0) {
        long long k = left > 10000 ? 10000 : left;
        char body[160];
        snprintf(body, sizeof body, "{\"name\":\"old\",\"command\":[\"true\"],\"array\":%lld}", k);
        if (http(&c, "POST", "/v1/jobs", body) != 201) {
            fprintf(stderr, "soak: array submit failed: %s\n", cr_buf_str(&c.body));
            conn_fini(&c);
            return -1;
        }
        if (!first) {
            first = first_id(&c);
        }
        left -= k;
    }
    conn_fini(&c);
    atomic_llong done = 0;
    pthread_t th[64];
    range r[64];
    long long per = (n + threads - 1) / threads;
    for (int i = 0; i < threads; i++) {
        r[i].from = first + i * per;
        r[i].to = first + (i + 1) * per < first + n ? first + (i + 1) * per : first + n;
        r[i].done = &done;
        pthread_create(&th[i], NULL, cancel_main, &r[i]);
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
    }
    return atomic_load(&done) == n ? 0 : -1;
}

/* The controller's CPU time so far (user + system), ns. */
static int64_t cpu_ns(pid_t pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    int64_t ns = -1;
    if (f && fgets(line, sizeof line, f)) {
        const char *p = strrchr(line, ')');
        unsigned long long ut = 0, st = 0;
        /* after ")": state ppid pgrp session tty tpgid flags minflt cminflt
         * majflt cmajflt utime stime */
        if (p && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                        &st) == 2) {
            ns = (int64_t)(ut + st) * (1000000000LL / sysconf(_SC_CLK_TCK));
        }
    }
    if (f) {
        fclose(f);
    }
    return ns;
}

static int cmp_i64(const void *a, const void *b);

/* The controller's own histogram of GET /v1/jobs (answered 200): the
 * cumulative count at each bucket bound, from /metrics. Returns the
 * number of bounds read (at most 32). */
static size_t list_hist(conn *c, double *le, long long *cnt)
{
    size_t n = 0;
    if (http(c, "GET", "/metrics", NULL) != 200) {
        return 0;
    }
    static const char key[] = "corral_api_request_duration_seconds_bucket{route=\"/v1/jobs\","
                              "method=\"GET\",code=\"200\",le=\"";
    for (const char *p = strstr(cr_buf_str(&c->body), key); p && n < 32; p = strstr(p + 1, key)) {
        const char *v = p + strlen(key);
        le[n] = strncmp(v, "+Inf", 4) == 0 ? 1e9 : atof(v);
        const char *sp = strchr(v, ' ');
        cnt[n] = sp ? atoll(sp + 1) : 0;
        n++;
    }
    return n;
}

/* The sum of the series of one family whose labels hold `label` (e.g.
 * state="pending"; "" for all) in the body of the last GET /metrics; -1
 * when there is none. */
static double metric(const conn *c, const char *family, const char *label)
{
    size_t n = strlen(family);
    double sum = -1;
    const char *body = cr_buf_str(&c->body);
    for (const char *p = strstr(body, family); p; p = strstr(p + 1, family)) {
        const char *eol = strchr(p, '\n');
        const char *sp = eol ? memchr(p, ' ', (size_t)(eol - p)) : strchr(p, ' ');
        if ((p != body && p[-1] != '\n') || (p[n] != '{' && p[n] != ' ') || !sp) {
            continue;
        }
        const char *l = strstr(p, label);
        if (!*label || (l && l < sp)) {
            sum = (sum < 0 ? 0 : sum) + atof(sp + 1);
        }
    }
    return sum;
}

/* One client alone: the wall time and the controller's CPU per page, for
 * the same page again and again (warm) and for pages walked down the store
 * by cursor (each one new rows). */
static void page_cost(void)
{
    enum { N = 200 };
    conn c;
    conn_init(&c);
    int64_t lat[N];
    for (int pass = 0; pass < 2; pass++) {
        char path[128] = "/v1/jobs?limit=100";
        int64_t cpu0 = cpu_ns(ctl_pid);
        int n = 0;
        for (int i = 0; i < N; i++) {
            int64_t t0 = cr_mono_ns();
            if (http(&c, "GET", path, NULL) != 200) {
                break;
            }
            lat[n++] = cr_mono_ns() - t0;
            const char *cur = strstr(cr_buf_str(&c.body), "\"next_cursor\":\"");
            if (pass == 1 && cur) {
                snprintf(path, sizeof path, "/v1/jobs?limit=100&cursor=%lld", atoll(cur + 15));
            }
        }
        int64_t cpu = cpu_ns(ctl_pid) - cpu0;
        qsort(lat, (size_t)n, sizeof lat[0], cmp_i64);
        printf("page cost (%s, one client, %d pages): wall p50 %.2f ms, p99 %.2f ms; controller "
               "CPU %.2f ms a page\n",
               pass ? "walked by cursor" : "same page", n, n ? (double)lat[n / 2] / 1e6 : 0,
               n ? (double)lat[(n * 99) / 100] / 1e6 : 0, n ? (double)cpu / 1e6 / n : 0);
    }
    conn_fini(&c);
}

/* ------------------------------------------------------------------------ */
/* The load.                                                                */

typedef struct lat_vec {
    int64_t *v;
    size_t n, cap;
} lat_vec;

static void lat_add(lat_vec *l, int64_t x)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 1024;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        if (!l->v) {
            abort();
        }
    }
    l->v[l->n++] = x;
}

static pthread_mutex_t lat_mu = PTHREAD_MUTEX_INITIALIZER;
static lat_vec interval_lat, all_lat; /* GET /v1/jobs?limit=100, ns */
static atomic_llong ops[5], errors;
static atomic_bool stop_load;
static int think_ms = 20;
static int open_max = 16; /* a client's jobs submitted and not cancelled, at most */

static void *client_main(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u;
    conn c;
    conn_init(&c);
    long long mine[256];
    size_t head = 0, tail = 0; /* own submitted jobs not yet cancelled */
    char path[128];
    static const char job[] =
        "{\"name\":\"soak\",\"command\":[\"true\"],\"gpus\":1,\"max_retries\":0}";
    while (!atomic_load(&stop_load)) {
        int r = (int)(rand_r(&seed) % 100);
        long code;
        if (r < 15 && tail - head >= (size_t)open_max) {
            r = 15; /* at its bound of open jobs: cancel the oldest instead */
        }
        if (r < 15) {
            code = http(&c, "POST", "/v1/jobs", job);
            if (code == 201 && tail - head < 256) {
                mine[tail++ % 256] = first_id(&c);
            }
            atomic_fetch_add(&ops[0], 1);
            if (code != 201) {
                atomic_fetch_add(&errors, 1);
            }
        } else if (r < 30) {
            if (head < tail) {
                snprintf(path, sizeof path, "/v1/jobs/%lld/cancel", mine[head++ % 256]);
                code = http(&c, "POST", path, "{}");
                if (code != 200 && code != 409) {
                    atomic_fetch_add(&errors, 1);
                }
            }
            atomic_fetch_add(&ops[1], 1);
        } else if (r < 70) {
            int64_t t0 = cr_mono_ns();
            code = http(&c, "GET", "/v1/jobs?limit=100", NULL);
            int64_t dt = cr_mono_ns() - t0;
            if (code != 200) {
                atomic_fetch_add(&errors, 1);
            } else {
                pthread_mutex_lock(&lat_mu);
                lat_add(&interval_lat, dt);
                lat_add(&all_lat, dt);
                pthread_mutex_unlock(&lat_mu);
            }
            atomic_fetch_add(&ops[2], 1);
        } else if (r < 85) {
            long long id = tail ? mine[(tail - 1) % 256] : 1;
            snprintf(path, sizeof path, "/v1/jobs/%lld", id);
            code = http(&c, "GET", path, NULL);
            if (code != 200) {
                atomic_fetch_add(&errors, 1);
            }
            atomic_fetch_add(&ops[3], 1);
        } else {
            long long id = tail ? mine[(tail - 1) % 256] : 1;
            snprintf(path, sizeof path, "/v1/jobs/%lld/logs", id);
            code = http(&c, "GET", path, NULL);
            /* 409: not started yet; 503: the fetch cap; all answered */
            if (code == 0 || (code >= 500 && code != 503 && code != 502)) {
                atomic_fetch_add(&errors, 1);
            }
            atomic_fetch_add(&ops[4], 1);
        }
        if (think_ms > 0) {
            usleep((useconds_t)think_ms * 1000);
        }
    }
    conn_fini(&c);
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static double p99_ms(lat_vec *l)
{
    if (l->n == 0) {
        return 0;
    }
    qsort(l->v, l->n, sizeof *l->v, cmp_i64);
    return (double)l->v[(l->n * 99) / 100] / 1e6;
}

static void cleanup(void)
{
    for (int i = 0; i < nagents; i++) {
        if (agent_pids[i] > 0) {
            kill(agent_pids[i], SIGTERM);
            waitpid(agent_pids[i], NULL, 0);
        }
    }
    if (ctl_pid > 0) {
        kill(ctl_pid, SIGTERM);
        waitpid(ctl_pid, NULL, 0);
    }
    if (*dir && !getenv("SOAK_KEEP")) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) {
            fprintf(stderr, "cannot remove %s\n", dir);
        }
    }
}

int main(int argc, char **argv)
{
    double seconds = 1800, sample = 30;
    int clients = 64;
    long long finished = 100000;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "soak: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "--seconds") == 0) {
            seconds = atof(v);
        } else if (strcmp(a, "--clients") == 0) {
            clients = atoi(v);
        } else if (strcmp(a, "--agents") == 0) {
            nagents = atoi(v);
        } else if (strcmp(a, "--finished") == 0) {
            finished = atoll(v);
        } else if (strcmp(a, "--sample") == 0) {
            sample = atof(v);
        } else if (strcmp(a, "--think-ms") == 0) {
            think_ms = atoi(v);
        } else if (strcmp(a, "--open") == 0) {
            open_max = atoi(v);
        } else {
            fprintf(stderr, "usage: bench_soak [--seconds S] [--clients N] [--agents N] "
                            "[--finished N] [--sample S] [--think-ms MS] [--open N]\n");
            return 2;
        }
    }
    if (seconds <= 0 || sample <= 0 || clients < 1 || clients > 1024 || nagents < 1 ||
        nagents > 64 || finished < 0 || open_max < 1 || open_max > 256) {
        fprintf(stderr, "soak: a value is out of range\n");
        return 2;
    }
    find_bin();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    signal(SIGPIPE, SIG_IGN);
    snprintf(dir, sizeof dir, "/tmp/corral-soak-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char log[300], addr[300], p[300], conf[300];
    snprintf(log, sizeof log, "%s/controller.log", dir);
    /* The agents' checkpoint root in dir too (its default is /tmp/corral/ckpt). */
    snprintf(conf, sizeof conf, "%s/ctl.json", dir);
    FILE *cf = fopen(conf, "w");
    if (cf) {
        fprintf(cf, "{\"checkpoint_root\": \"%s/ckpt\"}\n", dir);
        fclose(cf);
    }
    char *cargv[] = {
        corral_bin, "controller", "--allow-legacy-join", "--config", conf, "--state-dir",
        dir,        "--listen",   "127.0.0.1:0",         NULL};
    ctl_pid = spawn(cargv, log);
    snprintf(addr, sizeof addr, "%s/listen.addr", dir);
    int64_t deadline = cr_mono_ns() + 30 * CR_NS_PER_SEC;
    while (!*url && cr_mono_ns() < deadline) {
        read_line(addr, url, sizeof url);
        usleep(20000);
    }
    snprintf(p, sizeof p, "%s/admin.token", dir);
    read_line(p, token, sizeof token);
    snprintf(join_path, sizeof join_path, "%s/join.token", dir);
    int rc = 1;
    if (!*url || !*token) {
        fprintf(stderr, "soak: the controller did not start (see %s)\n", log);
        goto out;
    }
    int64_t t0 = cr_mono_ns();
    if (finished > 0 && fill_store(finished, 16) != 0) {
        fprintf(stderr, "soak: could not put %lld finished jobs in the store\n", finished);
        goto out;
    }
    printf("setup: %lld finished jobs in the store in %.1f s; controller RSS %ld KiB\n", finished,
           (double)(cr_mono_ns() - t0) / 1e9, rss_kib(ctl_pid));
    page_cost();
    for (int i = 0; i < nagents; i++) {
        char node[32], st[300], alog[300];
        snprintf(node, sizeof node, "soak%d", i + 1);
        snprintf(st, sizeof st, "%s/%s", dir, node);
        snprintf(alog, sizeof alog, "%s/agent-%s.log", dir, node);
        char *aargv[] = {corral_bin, "agent",       "--server",    url,      "--join-token",
                         join_path,  "--node",      node,          "--gpus", "sim:8xH100 SXM",
                         "--listen", "127.0.0.1:0", "--state-dir", st,       "--kill-on-exit",
                         NULL};
        agent_pids[i] = spawn(aargv, alog);
    }
    conn c;
    conn_init(&c);
    deadline = cr_mono_ns() + 30 * CR_NS_PER_SEC;
    while (cr_mono_ns() < deadline) {
        if (http(&c, "GET", "/v1/nodes", NULL) == 200 && json_num(&c, "count") >= nagents) {
            break;
        }
        usleep(50000);
    }
    if (json_num(&c, "count") < nagents) {
        fprintf(stderr, "soak: the agents did not register (see %s)\n", dir);
        conn_fini(&c);
        goto out;
    }
    pthread_t th[1024];
    for (int i = 0; i < clients; i++) {
        pthread_create(&th[i], NULL, client_main, (void *)(uintptr_t)(i + 1));
    }
    printf("load: %d clients, %d agents, %.0f s, a sample every %.0f s\n", clients, nagents,
           seconds, sample);
    printf("%8s %10s %10s %8s %12s %8s %8s %8s %8s %8s %7s %10s\n", "t_s", "rss_kib", "heap_kib",
           "pending", "list_p99_ms", "submit", "cancel", "list", "show", "logs", "errors", "jobs");
    int64_t start = cr_mono_ns(), end = start + (int64_t)(seconds * 1e9);
    double warm = seconds / 6 < 300 ? seconds / 6 : 300;
    long rss_min = -1, rss_max = -1, rss_first = -1;
    int64_t load_cpu0 = cpu_ns(ctl_pid);
    double le0[32], le1[32];
    long long cnt0[32], cnt1[32];
    size_t nh0 = list_hist(&c, le0, cnt0);
    while (cr_mono_ns() < end) {
        int64_t next = cr_mono_ns() + (int64_t)(sample * 1e9);
        while (cr_mono_ns() < next && cr_mono_ns() < end) {
            usleep(100000);
        }
        double t = (double)(cr_mono_ns() - start) / 1e9;
        long rss = rss_kib(ctl_pid);
        pthread_mutex_lock(&lat_mu);
        double p99 = p99_ms(&interval_lat);
        interval_lat.n = 0;
        pthread_mutex_unlock(&lat_mu);
        long long total = -1;
        if (http(&c, "GET", "/v1/jobs?limit=1", NULL) == 200) {
            total = json_num(&c, "total");
        }
        double heap = -1, pending = -1;
        if (http(&c, "GET", "/metrics", NULL) == 200) {
            heap = metric(&c, "corral_heap_bytes", "kind=\"in_use\"");
            pending = metric(&c, "corral_jobs", "state=\"pending\"");
        }
        printf("%8.0f %10ld %10.0f %8.0f %12.2f %8lld %8lld %8lld %8lld %8lld %7lld %10lld\n", t,
               rss, heap >= 0 ? heap / 1024 : -1, pending, p99, (long long)atomic_load(&ops[0]),
               (long long)atomic_load(&ops[1]), (long long)atomic_load(&ops[2]),
               (long long)atomic_load(&ops[3]), (long long)atomic_load(&ops[4]),
               (long long)atomic_load(&errors), total);
        fflush(stdout);
        if (t >= warm) {
            if (rss_first < 0) {
                rss_first = rss;
            }
            rss_min = rss_min < 0 || rss < rss_min ? rss : rss_min;
            rss_max = rss > rss_max ? rss : rss_max;
        }
    }
    int64_t load_cpu = cpu_ns(ctl_pid) - load_cpu0;
    size_t nh1 = list_hist(&c, le1, cnt1);
    double load_s = (double)(cr_mono_ns() - start) / 1e9;
    atomic_store(&stop_load, true);
    for (int i = 0; i < clients; i++) {
        pthread_join(th[i], NULL);
    }
    conn_fini(&c);
    pthread_mutex_lock(&lat_mu);
    double p99_all = p99_ms(&all_lat);
    size_t nlist = all_lat.n;
    pthread_mutex_unlock(&lat_mu);
    printf("result: GET /v1/jobs?limit=100 p99 %.2f ms over %zu reads; controller RSS after the "
           "%.0f s warm-up: first %ld KiB, min %ld, max %ld (spread %.1f%% of the first)\n",
           p99_all, nlist, warm, rss_first, rss_min, rss_max,
           rss_first > 0 ? 100.0 * (double)(rss_max - rss_min) / (double)rss_first : 0.0);
    long long nreq = 0;
    for (int k = 0; k < 5; k++) {
        nreq += (long long)atomic_load(&ops[k]);
    }
    printf("load: controller CPU %.2f cores busy on average, %.3f ms a request (all kinds)\n",
           (double)load_cpu / 1e9 / load_s, nreq ? (double)load_cpu / 1e6 / (double)nreq : 0);
    /* The same reads as the controller timed them (from its handler's start
     * to the answer queued): what is left of the client's p99 is the wait
     * for a CPU and for the connection's event thread. */
    if (nh1 > 0 && nh1 == nh0) {
        long long all = cnt1[nh1 - 1] - cnt0[nh1 - 1];
        size_t k = 0;
        while (k + 1 < nh1 && (double)(cnt1[k] - cnt0[k]) < 0.99 * (double)all) {
            k++;
        }
        size_t k50 = 0;
        while (k50 + 1 < nh1 && (double)(cnt1[k50] - cnt0[k50]) < 0.5 * (double)all) {
            k50++;
        }
        printf("load: the controller's own timing of the page reads (its histogram): p50 <= %g "
               "ms, p99 <= %g ms over %lld reads\n",
               le1[k50] * 1e3, le1[k] * 1e3, all);
    }
    rc = 0;
out:
    cleanup();
    free(interval_lat.v);
    free(all_lat.v);
    curl_global_cleanup();
    return rc;
}
