/*
 * agent_http.c - the agent's own HTTP server (libmicrohttpd):
 *   GET /metrics                    Prometheus text: corral_* series and the
 *                                   DCGM exporter's names and labels
 *   GET /v1/health                  {"ok":true}
 *   GET /v1/jobs/{id}/logs?stream=stdout|stderr&offset=N&follow=1
 *   GET /v1/logs/{id}?...           the same (the controller's proxy form)
 *                                   log bytes from offset (bearer: the agent
 *                                   secret the controller issued at this
 *                                   node's registration, compared in constant
 *                                   time); the answer's X-Corral-Offset
 *                                   header is the next offset
 * With --tls-cert and --tls-key it serves HTTPS (MHD_USE_TLS, GnuTLS).
 * Handlers run on MHD's threads and touch only what a->mu guards, plus
 * files under the state dir.
 */
#include "agent_int.h"

#include "cr_alloc.h"
#include "cr_auth.h"
#include "cr_error.h"
#include "cr_http_strict.h"
#include "cr_log.h"
#include "cr_parse.h"
#include "cr_task_env.h"
#include "cr_time.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <fcntl.h>
#include <sodium.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define LOG_CHUNK_MAX (1u << 20)

/* The server's documented limits (docs/operations.md, "Agent HTTP"): a
 * pool of event threads (epoll, no thread per connection), at most
 * HTTP_MAX_CONNS connections in all and HTTP_MAX_CONNS_PER_IP from one
 * address (the controller's logs proxy and a Prometheus scraper need a
 * few), an idle connection closed after HTTP_IDLE_TIMEOUT_S. A log follower
 * waits on a pool thread, so at most HTTP_MAX_FOLLOWERS wait at once (one
 * thread is always left for /metrics and /v1/health); the next one is
 * answered at once with what the log has, and polls again. */
#define HTTP_THREADS          4
#define HTTP_MAX_CONNS        256
#define HTTP_MAX_CONNS_PER_IP 64
#define HTTP_IDLE_TIMEOUT_S   60
#define HTTP_MAX_FOLLOWERS    (HTTP_THREADS - 1)

static void label_value(cr_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"') {
            cr_buf_putc(b, '\\');
            cr_buf_putc(b, *s);
        } else if (*s == '\n') {
            cr_buf_puts(b, "\\n");
        } else {
            cr_buf_putc(b, *s);
        }
    }
}

static void head(cr_buf *b, const char *name, const char *type, const char *help)
{
    cr_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void corral_labels(cr_buf *b, const agent *a, size_t i)
{
    const cr_gpu_info *g = &a->gpu->gpus[i];
    cr_buf_printf(b, "{node=\"");
    label_value(b, a->cfg.node);
    cr_buf_printf(b, "\",gpu=\"%d\",uuid=\"%s\",model=\"", g->index, g->uuid);
    label_value(b, g->model);
    cr_buf_puts(b, "\"}");
}

static void dcgm_labels(cr_buf *b, const agent *a, size_t i)
{
    const cr_gpu_info *g = &a->gpu->gpus[i];
    cr_buf_printf(b, "{gpu=\"%d\",UUID=\"%s\",device=\"nvidia%d\",pci_bus_id=\"%s\",modelName=\"",
                  g->index, g->uuid, g->index, g->pci_bus_id);
    label_value(b, g->raw_name);
    cr_buf_puts(b, "\",Hostname=\"");
    label_value(b, a->cfg.node);
    cr_buf_puts(b, "\"}");
}

typedef enum {
    V_UTIL,
    V_MEM,
    V_MEMTOT,
    V_FBUSED,
    V_FBFREE,
    V_TEMP,
    V_POWER,
    V_CLOCK,
    V_ECC,
    V_XID,
    V_XIDS,
    V_HEALTHY
} vkind;

static void value(cr_buf *b, const agent *a, size_t i, vkind k)
{
    const cr_gpu_sample *s = &a->samples[i];
    const cr_gpu_info *g = &a->gpu->gpus[i];
    switch (k) {
    case V_UTIL:
        cr_buf_printf(b, " %d\n", s->util_pct);
        break;
    case V_MEM:
        cr_buf_printf(b, " %llu\n", (unsigned long long)s->mem_used_bytes);
        break;
    case V_MEMTOT:
        cr_buf_printf(b, " %llu\n", (unsigned long long)g->mem_bytes);
        break;
    case V_FBUSED:
        cr_buf_printf(b, " %llu\n", (unsigned long long)(s->mem_used_bytes >> 20));
        break;
    case V_FBFREE:
        cr_buf_printf(b, " %llu\n",
                      (unsigned long long)((g->mem_bytes - (s->mem_used_bytes < g->mem_bytes
                                                                ? s->mem_used_bytes
                                                                : g->mem_bytes)) >>
                                           20));
        break;
    case V_TEMP:
        cr_buf_printf(b, " %d\n", s->temp_c);
        break;
    case V_POWER:
        cr_buf_printf(b, " %.3f\n", (double)s->power_mw / 1000.0);
        break;
    case V_CLOCK:
        cr_buf_printf(b, " %d\n", s->sm_clock_mhz);
        break;
    case V_ECC:
        cr_buf_printf(b, " %llu\n", (unsigned long long)s->ecc_uncorrected);
        break;
    case V_XID:
        cr_buf_printf(b, " %d\n", s->xid_last);
        break;
    case V_XIDS:
        cr_buf_printf(b, " %llu\n", (unsigned long long)s->xid_count);
        break;
    case V_HEALTHY:
        cr_buf_printf(b, " %d\n", a->health[i].state == CR_GPU_OK);
        break;
    }
}

void cr__agent_metrics_render(const agent *a, cr_buf *b)
{
    static const struct {
        const char *name, *type, *help;
        vkind k;
        int dcgm;
    } series[] = {
        {"corral_gpu_utilization_percent", "gauge", "GPU utilisation.", V_UTIL, 0},
        {"corral_gpu_memory_used_bytes", "gauge", "GPU memory in use.", V_MEM, 0},
        {"corral_gpu_memory_total_bytes", "gauge", "GPU memory size.", V_MEMTOT, 0},
        {"corral_gpu_temperature_celsius", "gauge", "GPU temperature.", V_TEMP, 0},
        {"corral_gpu_power_watts", "gauge", "GPU board power.", V_POWER, 0},
        {"corral_gpu_sm_clock_mhz", "gauge", "GPU SM clock.", V_CLOCK, 0},
        {"corral_gpu_ecc_uncorrected_errors", "gauge", "Volatile uncorrected ECC errors.", V_ECC,
         0},
        {"corral_gpu_xid_last", "gauge", "Last XID error code (0 none).", V_XID, 0},
        {"corral_gpu_xid_errors_total", "counter", "XID errors seen.", V_XIDS, 0},
        {"corral_gpu_healthy", "gauge", "1 when the GPU is in the pool.", V_HEALTHY, 0},
        {"DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", V_UTIL, 1},
        {"DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", V_FBUSED, 1},
        {"DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", V_FBFREE, 1},
        {"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", V_TEMP, 1},
        {"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", V_POWER, 1},
        {"DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", V_CLOCK, 1},
        {"DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", V_XID, 1},
        {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter",
         "Total number of double-bit volatile ECC errors.", V_ECC, 1},
    };
    cr_buf_reset(b);
    for (size_t s = 0; s < sizeof series / sizeof series[0]; s++) {
        if (series[s].dcgm && a->cfg.no_dcgm) {
            continue; /* the real dcgm-exporter runs beside us */
        }
        head(b, series[s].name, series[s].type, series[s].help);
        for (size_t i = 0; i < a->gpu->count; i++) {
            cr_buf_puts(b, series[s].name);
            if (series[s].dcgm) {
                dcgm_labels(b, a, i);
            } else {
                corral_labels(b, a, i);
            }
            value(b, a, i, series[s].k);
        }
    }
    size_t running = 0, stopping = 0, exited = 0;
    for (size_t i = 0; i < a->nprocs; i++) {
        running += a->procs[i].state == CR_PROC_RUNNING;
        stopping += a->procs[i].state == CR_PROC_STOPPING;
        exited += a->procs[i].state == CR_PROC_EXITED;
    }
    head(b, "corral_agent_jobs", "gauge", "Jobs on this node by state.");
    cr_buf_printf(b, "corral_agent_jobs{state=\"running\"} %zu\n", running);
    cr_buf_printf(b, "corral_agent_jobs{state=\"stopping\"} %zu\n", stopping);
    cr_buf_printf(b, "corral_agent_jobs{state=\"exited\"} %zu\n", exited);
    agent *m = (agent *)a; /* the lock is the only thing written */
    pthread_mutex_lock(&m->mu);
    uint64_t c[] = {a->n_started, a->n_exited,    a->n_status,   a->n_status_fail,
                    a->n_polls,   a->n_poll_fail, a->n_registers};
    int reg = a->registered;
    pthread_mutex_unlock(&m->mu);
    static const char *const names[][2] = {
        {"corral_agent_jobs_started_total", "Jobs started."},
        {"corral_agent_jobs_exited_total", "Jobs that exited."},
        {"corral_agent_status_posts_total", "Status reports sent to the controller."},
        {"corral_agent_status_failures_total", "Status reports that failed."},
        {"corral_agent_desired_polls_total", "Desired-state long-polls."},
        {"corral_agent_desired_poll_failures_total", "Desired-state long-polls that failed."},
        {"corral_agent_registrations_total", "Registrations attempted."},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        head(b, names[i][0], "counter", names[i][1]);
        cr_buf_printf(b, "%s %llu\n", names[i][0], (unsigned long long)c[i]);
    }
    head(b, "corral_agent_registered", "gauge", "1 while registered with the controller.");
    cr_buf_printf(b, "corral_agent_registered %d\n", reg);
    if (a->dcache) {
        /* the node's data cache (docs/data.md) */
        cr_dcache_stats st;
        cr_dcache_get_stats(a->dcache, &st);
        head(b, "corral_data_cache_bytes", "gauge",
             "Bytes the node's data cache holds (entries, partial and running fetches).");
        cr_buf_printf(b, "corral_data_cache_bytes %lld\n", (long long)st.used_bytes);
        head(b, "corral_data_cache_cap_bytes", "gauge", "The data cache's cap (--data-cache-max).");
        cr_buf_printf(b, "corral_data_cache_cap_bytes %lld\n", (long long)st.cap_bytes);
        const struct {
            const char *name, *help;
            uint64_t v;
        } dc[] = {
            {"corral_data_fetches_total", "Data fetches begun.", st.fetches},
            {"corral_data_fetched_total", "Data fetches verified and in place.", st.fetched_ok},
            {"corral_data_resumed_total", "Data fetches that resumed a partial file.", st.resumed},
            {"corral_data_evictions_total", "Cache entries removed to make room.", st.evictions},
            {"corral_data_corrupt_total", "Cache entries found damaged at a job's check.",
             st.corrupt},
        };
        for (size_t i = 0; i < sizeof dc / sizeof dc[0]; i++) {
            head(b, dc[i].name, "counter", dc[i].help);
            cr_buf_printf(b, "%s %llu\n", dc[i].name, (unsigned long long)dc[i].v);
        }
    }
    cr__agent_metrics_work(a, b);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *type,
                             const char *body, size_t len, int64_t next_offset)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", type);
    if (code == 400) {
        /* A refused head (cr_http_strict.h): nothing after it is read. */
        MHD_add_response_header(r, "Connection", "close");
    }
    if (next_offset >= 0) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)next_offset);
        MHD_add_response_header(r, "X-Corral-Offset", v);
    }
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result error(struct MHD_Connection *c, unsigned code, const char *name,
                             const char *msg, const char *field)
{
    json_t *j = json_pack("{s:s,s:s}", "error", name, "message", msg);
    if (field) {
        json_object_set_new(j, "field", json_string(field));
    }
    char *t = json_dumps(j, JSON_COMPACT);
    enum MHD_Result r = reply(c, code, "application/json", t, strlen(t), -1);
    free(t);
    json_decref(j);
    return r;
}

static int authorized(agent *a, struct MHD_Connection *c)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7) != 0) {
        return 0;
    }
    return cr__agent_token_ok(a, h + 7);
}

/* /metrics with --metrics-token-file: the bearer token (cr_auth_bearer_is:
 * hashes compared in constant time). */
static int metrics_ok(agent *a, struct MHD_Connection *c)
{
    if (!a->cfg.metrics_token) {
        return 1;
    }
    return cr_auth_bearer_is(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
                             a->cfg.metrics_token);
}

/* GnuTLS, as libmicrohttpd (loaded with dlopen, api/cr_mhd_load.c) loaded
 * it: the two calls that check a caller's certificate, resolved once. */
static struct {
    const gnutls_datum_t *(*get_peers)(gnutls_session_t, unsigned int *);
    int (*verify_peers2)(gnutls_session_t, unsigned int *);
} tls_api;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static void tls_load(void)
{
    void *lib = dlopen("libgnutls.so.30", RTLD_NOW | RTLD_LOCAL);
    if (lib) {
        *(void **)&tls_api.get_peers = dlsym(lib, "gnutls_certificate_get_peers");
        *(void **)&tls_api.verify_peers2 = dlsym(lib, "gnutls_certificate_verify_peers2");
    }
}

/* --tls-client-ca: the caller showed a certificate that verifies against
 * the CA (libmicrohttpd asks for one; GnuTLS checks it here). Fails closed. */
static int client_cert_ok(agent *a, struct MHD_Connection *c)
{
    if (!a->cfg.tls_client_ca) {
        return 1;
    }
    pthread_once(&tls_once, tls_load);
    if (!tls_api.get_peers || !tls_api.verify_peers2) {
        return 0;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    gnutls_session_t s = ci ? (gnutls_session_t)ci->tls_session : NULL;
    unsigned int status = 0, n = 0;
    if (!s || !tls_api.get_peers(s, &n) || n == 0) {
        return 0;
    }
    return tls_api.verify_peers2(s, &status) == 0 && status == 0;
}

static int job_done(agent *a, int64_t job)
{
    pthread_mutex_lock(&a->mu);
    int live = 0;
    for (size_t i = 0; i < a->nlive && !live; i++) {
        live = a->live[i] == job;
    }
    pthread_mutex_unlock(&a->mu);
    return !live;
}

static enum MHD_Result serve_log_file(agent *a, struct MHD_Connection *c, int64_t job,
                                      int64_t offset, int64_t rank, const char *suffix,
                                      int following);

static enum MHD_Result serve_logs(agent *a, struct MHD_Connection *c, const char *idtext)
{
    int64_t job, offset = 0;
    char id[32];
    size_t l = strcspn(idtext, "/");
    if (l == 0 || l >= sizeof id || strcmp(idtext + l, "/logs") != 0) {
        return error(c, 404, "CR_ENOENT", "no such route", NULL);
    }
    memcpy(id, idtext, l);
    id[l] = '\0';
    if (cr_parse_i64(id, 1, INT64_MAX, &job) < 0) {
        return error(c, 400, "CR_EINVAL", "job id must be a positive integer", "id");
    }
    if (!authorized(a, c)) {
        return error(c, 401, "CR_EAUTH", "bearer token required", NULL);
    }
    const char *stream = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "stream");
    const char *off = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset");
    const char *follow = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "follow");
    const char *suffix = "out";
    if (stream && strcmp(stream, "stderr") == 0) {
        suffix = "err";
    } else if (stream && strcmp(stream, "stdout") != 0) {
        return error(c, 400, "CR_EINVAL", "stream must be stdout or stderr", "stream");
    }
    if (off && cr_parse_i64(off, 0, INT64_MAX, &offset) < 0) {
        return error(c, 400, "CR_EINVAL", "offset must be a byte offset >= 0", "offset");
    }
    const char *rk = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "rank");
    int64_t rank = -1;
    if (rk && cr_parse_i64(rk, 0, 1 << 20, &rank) < 0) {
        return error(c, 400, "CR_EINVAL", "rank must be a task rank >= 0", "rank");
    }
    int following = follow && strcmp(follow, "1") == 0;
    if (following && atomic_fetch_add(&a->http_followers, 1) >= HTTP_MAX_FOLLOWERS) {
        atomic_fetch_sub(&a->http_followers, 1);
        following = 0; /* every waiting slot taken: answer now */
    }
    enum MHD_Result ret = serve_log_file(a, c, job, offset, rank, suffix, following);
    if (following) {
        atomic_fetch_sub(&a->http_followers, 1);
    }
    return ret;
}

/* The job's own -o (or -e) file of task rank, when its start left a note
 * (cr_tasks_note_files): its output went there, not to the captured log.
 * Opened only when it is a regular file of the job's user (O_NOFOLLOW: no
 * link to another's file), so no log read reaches a file the job could not
 * read itself. -1 when there is none. */
static int open_user_file(agent *a, int64_t job, int64_t rank, const char *suffix)
{
    char *note = cr_task_file_note(a->cfg.state_dir, job, (int)rank, suffix);
    int nfd = open(note, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (nfd < 0 && strcmp(suffix, "err") == 0) {
        /* no -e: stderr went into the -o file */
        free(note);
        note = cr_task_file_note(a->cfg.state_dir, job, (int)rank, "out");
        nfd = open(note, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    }
    free(note);
    if (nfd < 0) {
        return -1;
    }
    char text[4200];
    ssize_t n = read(nfd, text, sizeof text - 1);
    close(nfd);
    if (n <= 0) {
        return -1;
    }
    text[n] = '\0';
    char *nl = strchr(text, '\n');
    int64_t uid;
    if (!nl) {
        return -1;
    }
    *nl = '\0';
    if (cr_parse_i64(text, 0, INT32_MAX, &uid) < 0 || nl[1] != '/') {
        return -1;
    }
    int fd = open(nl + 1, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    struct stat sb;
    if (fd >= 0 && (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (int64_t)sb.st_uid != uid)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* The log bytes from offset (following: waiting up to 20 s for some). */
static enum MHD_Result serve_log_file(agent *a, struct MHD_Connection *c, int64_t job,
                                      int64_t offset, int64_t rank, const char *suffix,
                                      int following)
{
    int64_t deadline = cr_mono_ns() + 20 * CR_NS_PER_SEC;
    /* A node running several tasks of the job keeps one log per task
     * (cr_task_log_path); one running a single task, the job's log. */
    char *path = cr_task_log_path(a->cfg.state_dir, job, (int)rank, 2, suffix);
    if (rank >= 0 && access(path, F_OK) != 0) {
        free(path);
        path = cr_proc_log_path(a->cfg.state_dir, job, suffix);
    }
    int fd = open_user_file(a, job, rank, suffix);
    if (fd < 0) {
        fd = open(path, O_RDONLY | O_CLOEXEC);
    }
    /* The shim creates the log as the job starts: a job that is starting has
     * no log yet, which reads as empty (and a follower waits for it). */
    while (fd < 0 && following && cr_mono_ns() < deadline && !atomic_load(&a->stop)) {
        usleep(100000);
        fd = open(path, O_RDONLY | O_CLOEXEC);
    }
    free(path);
    if (fd < 0) {
        /* Not (yet) written here: the controller only asks the job's own
         * node, which may not have started it yet. Nothing to read, so far. */
        return reply(c, 200, "text/plain", "", 0, offset);
    }
    struct stat sb;
    /* follow=1: wait (up to 20 s) for bytes past offset while the job runs. */
    while (fstat(fd, &sb) == 0 && sb.st_size <= offset && following && !job_done(a, job) &&
           cr_mono_ns() < deadline && !atomic_load(&a->stop)) {
        usleep(100000);
    }
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return error(c, 500, "CR_EIO", "cannot read the log", NULL);
    }
    size_t n = 0;
    char *buf = NULL;
    if (sb.st_size > offset) {
        size_t want = (size_t)(sb.st_size - offset);
        if (want > LOG_CHUNK_MAX) {
            want = LOG_CHUNK_MAX;
        }
        buf = cr_malloc(want);
        ssize_t r = pread(fd, buf, want, offset);
        n = r > 0 ? (size_t)r : 0;
    }
    close(fd);
    enum MHD_Result ret = reply(c, 200, "text/plain", buf ? buf : "", n, offset + (int64_t)n);
    free(buf);
    return ret;
}

/* --- The step relay (docs/slurm.md) -----------------------------------------
 *
 * POST /v1/jobs/{id}/step: srun inside a batch job, with the run's step
 * credential as bearer, asks this node's stepd of the job (its one process
 * here, running as the job's user in its cgroups) to start, poll or kill
 * a step's tasks. The agent checks the credential against the desired
 * state's (constant time), connects to stepd's abstract socket (named from
 * the credential's hash: cr_step_sock_name), checks that the peer is the
 * job's uid (SO_PEERCRED: another user's socket of that name is refused),
 * and hands the body over and the answer back, interpreting neither. */
#define STEP_BODY_MAX  (4u << 20)
#define STEP_REPLY_MAX (8u << 20)

typedef struct step_body {
    cr_buf b;
    int over; /* the body passed STEP_BODY_MAX */
} step_body;

static void request_done(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    if (*con_cls && *con_cls != CR_HTTP_BAD_URI) {
        step_body *b = *con_cls;
        cr_buf_fini(&b->b);
        free(b);
        *con_cls = NULL;
    }
}

/* "/v1/jobs/<id>/step" -> id; 0 when not that route. */
static int64_t step_route(const char *url)
{
    char id[32];
    if (strncmp(url, "/v1/jobs/", 9) != 0) {
        return 0;
    }
    size_t l = strcspn(url + 9, "/");
    int64_t job;
    if (l == 0 || l >= sizeof id || strcmp(url + 9 + l, "/step") != 0) {
        return 0;
    }
    memcpy(id, url + 9, l);
    id[l] = '\0';
    return cr_parse_i64(id, 1, INT64_MAX, &job) == 0 ? job : 0;
}

static enum MHD_Result serve_step(agent *a, struct MHD_Connection *c, int64_t job,
                                  const step_body *body)
{
    if (body->over) {
        return error(c, 413, "CR_ETOOBIG", "a step request is at most 4 MiB", NULL);
    }
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    char tok[CR_STEP_TOKEN_MAX] = "";
    int64_t uid = -1;
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < a->nstep_creds; i++) {
        if (a->step_creds[i].job == job) {
            memcpy(tok, a->step_creds[i].token, sizeof tok);
            uid = a->step_creds[i].uid;
        }
    }
    pthread_mutex_unlock(&a->mu);
    size_t tl = strlen(tok);
    int ok = tl > 0 && h && strncmp(h, "Bearer ", 7) == 0 && strlen(h + 7) == tl &&
             sodium_memcmp(h + 7, tok, tl) == 0;
    if (!ok) {
        sodium_memzero(tok, sizeof tok);
        return error(c, 401, "CR_EAUTH",
                     "the step credential of a batch job running here is required", NULL);
    }
    char name[80];
    cr_step_sock_name(tok, a->cfg.node, name, sizeof name);
    sodium_memzero(tok, sizeof tok);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t nl = strlen(name);
    memcpy(sa.sun_path + 1, name, nl);
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + nl);
    struct timeval tv = {30, 0};
    struct ucred cred;
    socklen_t cl = sizeof cred;
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, salen) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        return error(c, 503, "CR_EUNAVAIL",
                     "the job's stepd does not answer on this node (starting, or ended)", NULL);
    }
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 || (int64_t)cred.uid != uid) {
        close(fd);
        cr_warn("agent: job=%lld: the step socket is not the job's user's: refused",
                (long long)job);
        return error(c, 503, "CR_EUNAVAIL", "the job's stepd does not answer on this node", NULL);
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    size_t done = 0;
    while (done < body->b.len) {
        ssize_t w = send(fd, body->b.data + done, body->b.len - done, MSG_NOSIGNAL);
        if (w <= 0) {
            break;
        }
        done += (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    cr_buf ans;
    cr_buf_init(&ans);
    char buf[65536];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0 || ans.len + (size_t)n > STEP_REPLY_MAX) {
            break;
        }
        cr_buf_append(&ans, buf, (size_t)n);
    }
    close(fd);
    enum MHD_Result r = ans.len ? reply(c, 200, "application/json", ans.data, ans.len, -1)
                                : error(c, 502, "CR_EIO", "the job's stepd gave no answer", NULL);
    cr_buf_fini(&ans);
    return r;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **con_cls)
{
    agent *a = cls;
    const char *bad = *con_cls == CR_HTTP_BAD_URI
                          ? "the request target has a control byte (raw or %-encoded)"
                          : cr_http_strict_head(c, method, version);
    if (bad) {
        return error(c, 400, "CR_EINVAL", bad, NULL);
    }
    int64_t step_job = strcmp(method, "POST") == 0 ? step_route(url) : 0;
    if (step_job > 0) {
        /* (no client certificate: the step credential is srun's) */
        step_body *b = *con_cls;
        if (!b) {
            b = cr_calloc(1, sizeof *b);
            cr_buf_init(&b->b);
            *con_cls = b;
            return MHD_YES;
        }
        if (*upload_size) {
            if (b->b.len + *upload_size > STEP_BODY_MAX) {
                b->over = 1;
            } else {
                cr_buf_append(&b->b, upload, *upload_size);
            }
            *upload_size = 0;
            return MHD_YES;
        }
        return serve_step(a, c, step_job, b);
    }
    if (strcmp(method, "GET") != 0) {
        return error(c, 405, "CR_ENOTSUP", "only GET is served here (and a batch job's steps)",
                     NULL);
    }
    if (strcmp(url, "/v1/health") != 0 && !client_cert_ok(a, c)) {
        return error(c, 403, "CR_EPERM",
                     "a client certificate of the agent's --tls-client-ca is "
                     "required",
                     NULL);
    }
    if (strcmp(url, "/metrics") == 0) {
        if (!metrics_ok(a, c)) {
            return error(c, 401, "CR_EAUTH", "/metrics needs the agent's metrics token", NULL);
        }
        pthread_mutex_lock(&a->mu);
        char *t = cr_strdup(a->metrics_text ? a->metrics_text : "");
        pthread_mutex_unlock(&a->mu);
        enum MHD_Result r =
            reply(c, 200, "text/plain; version=0.0.4; charset=utf-8", t, strlen(t), -1);
        free(t);
        return r;
    }
    if (strcmp(url, "/v1/health") == 0) {
        const char *ok = "{\"ok\":true}";
        return reply(c, 200, "application/json", ok, strlen(ok), -1);
    }
    if (strncmp(url, "/v1/jobs/", 9) == 0) {
        return serve_logs(a, c, url + 9);
    }
    if (strncmp(url, "/v1/logs/", 9) == 0) {
        /* The form the controller's logs proxy uses. */
        char path[64];
        snprintf(path, sizeof path, "%.40s/logs", url + 9);
        return serve_logs(a, c, path);
    }
    return error(c, 404, "CR_ENOENT", "no such route", NULL);
}

/* A PEM file's text, returned new; NULL when unreadable or over 1 MiB. */
static char *read_pem(const char *path)
{
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) {
        return NULL;
    }
    char *buf = cr_malloc((1u << 20) + 1);
    size_t n = fread(buf, 1, 1u << 20, f);
    int more = fgetc(f) != EOF;
    fclose(f);
    if (n == 0 || more) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

int cr__agent_http_start(agent *a, char *err, size_t errlen)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)a->cfg.listen_port);
    if (inet_pton(AF_INET, a->cfg.listen_host, &sa.sin_addr) != 1) {
        snprintf(err, errlen, "--listen: '%s' is not an IPv4 address", a->cfg.listen_host);
        return CR_EINVAL;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
    struct MHD_Daemon *d = NULL;
    struct MHD_OptionItem limits[] = {
        {MHD_OPTION_THREAD_POOL_SIZE, HTTP_THREADS, NULL},
        {MHD_OPTION_CONNECTION_LIMIT, HTTP_MAX_CONNS, NULL},
        {MHD_OPTION_PER_IP_CONNECTION_LIMIT, HTTP_MAX_CONNS_PER_IP, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, HTTP_IDLE_TIMEOUT_S, NULL},
        {MHD_OPTION_STRICT_FOR_CLIENT, 1, NULL},
        {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)cr_http_strict_uri, NULL},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)request_done, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    if (a->cfg.tls_cert) {
        char *cert = read_pem(a->cfg.tls_cert), *key = read_pem(a->cfg.tls_key);
        if (!cert || !key) {
            snprintf(err, errlen, "%s: cannot read %s", !cert ? "--tls-cert" : "--tls-key",
                     !cert ? a->cfg.tls_cert : a->cfg.tls_key);
            free(cert);
            free(key);
            return CR_EIO;
        }
        char *trust = NULL;
        if (a->cfg.tls_client_ca && !(trust = read_pem(a->cfg.tls_client_ca))) {
            snprintf(err, errlen, "--tls-client-ca: cannot read %s", a->cfg.tls_client_ca);
            free(cert);
            free(key);
            return CR_EIO;
        }
        if (trust) {
            /* With a trust list libmicrohttpd asks each caller for its certificate. */
            d = MHD_start_daemon(flags | MHD_USE_TLS, 0, NULL, NULL, handler, a,
                                 MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_ARRAY,
                                 limits, MHD_OPTION_HTTPS_MEM_CERT, cert, MHD_OPTION_HTTPS_MEM_KEY,
                                 key, MHD_OPTION_HTTPS_MEM_TRUST, trust, MHD_OPTION_END);
        } else {
            d = MHD_start_daemon(flags | MHD_USE_TLS, 0, NULL, NULL, handler, a,
                                 MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_ARRAY,
                                 limits, MHD_OPTION_HTTPS_MEM_CERT, cert, MHD_OPTION_HTTPS_MEM_KEY,
                                 key, MHD_OPTION_END);
        }
        /* Kept until the daemon stops (libmicrohttpd borrows them). */
        a->tls_pem[0] = cert;
        a->tls_pem[1] = key;
        a->tls_pem[2] = trust;
    } else {
        d = MHD_start_daemon(flags, 0, NULL, NULL, handler, a, MHD_OPTION_SOCK_ADDR,
                             (struct sockaddr *)&sa, MHD_OPTION_ARRAY, limits, MHD_OPTION_END);
    }
    if (!d) {
        snprintf(err, errlen, "--listen: cannot listen on %s:%d", a->cfg.listen_host,
                 a->cfg.listen_port);
        return CR_EIO;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    a->port = info ? info->port : a->cfg.listen_port;
    a->mhd = d;
    return 0;
}

void cr__agent_http_stop(agent *a)
{
    if (a->mhd) {
        MHD_stop_daemon(a->mhd);
        a->mhd = NULL;
    }
    for (size_t i = 0; i < 3; i++) {
        if (a->tls_pem[i]) {
            sodium_memzero(a->tls_pem[i], strlen(a->tls_pem[i]));
            free(a->tls_pem[i]);
            a->tls_pem[i] = NULL;
        }
    }
}
