/*
 * agent_net.c - the agent's side of the controller protocol: register,
 * status (heartbeat), and the long-poll of the desired state.
 *
 * Every call retries on the next loop turn rather than blocking: a
 * controller that restarts or a network blip costs a few failed calls and
 * some backoff, never a stuck agent. A 401/403/404 on a node route means
 * the controller no longer knows our node token (say its store was reset):
 * the agent registers again and carries on.
 */
#include "agent_int.h"

#include "cr_alloc.h"
#include "cr_client.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The client's cancel hook: a stop ends a long-poll at once. */
static bool stopping(void *ud)
{
    const agent *a = ud;
    return atomic_load(&a->stop) != 0;
}

/* A client of the controller for one thread (NULL when the server URL is
 * not http:// or https://: every call then fails as unreachable). */
static cr_client *new_client(agent *a)
{
    /* Several controllers: a call tries the others for 3 s at most; the
     * agent's own loops retry after that (a shutdown is never held up
     * long by controllers that are all gone). */
    cr_client_opts o = {.server = a->cfg.server,
                        .connect_timeout_ns = 2 * CR_NS_PER_SEC,
                        .ca_file = a->cfg.ca_file,
                        .failover_ns = strchr(a->cfg.server, ',') ? 3 * CR_NS_PER_SEC : 0};
    cr_client *cl = NULL;
    if (cr_client_new(&o, &cl) < 0) {
        cr_warn("agent: --server %s: not an http:// or https:// URL", a->cfg.server);
        return NULL;
    }
    cr_client_set_cancel(cl, stopping, a);
    return cl;
}

/*
 * One HTTP exchange over cl (kept alive between calls). body NULL: GET.
 * Returns the HTTP status with the answer in resp, or CR_EUNAVAIL when the
 * server could not be reached, did not answer in time, or the agent stops.
 */
static int http_call(cr_client *cl, const char *method, const char *path, const char *token,
                     const json_t *body, cr_buf *resp, int64_t timeout_ms)
{
    cr_buf_reset(resp);
    if (!cl) {
        return CR_EUNAVAIL;
    }
    cr_client_set_token(cl, token);
    cr_client_res res;
    cr_client_res_init(&res);
    int rc = cr_client_request(cl, method, path, body, timeout_ms * CR_NS_PER_MS, &res);
    int st = (int)res.status;
    if (st <= 0 || rc == CR_EIO || rc == CR_ETOOBIG || res.raw_len > (16u << 20)) {
        /* no answer, or a broken one; a desired state over 16 MiB is not
         * one we want */
        cr_debug("agent: %s %s: %s", method, path, cr_client_res_msg(&res, rc));
        st = CR_EUNAVAIL;
    } else if (res.raw) {
        cr_buf_append(resp, res.raw, res.raw_len);
    }
    cr_client_res_fini(&res);
    return st;
}

static void set_registered(agent *a, int yes)
{
    pthread_mutex_lock(&a->mu);
    a->registered = yes;
    a->need_register = !yes;
    pthread_mutex_unlock(&a->mu);
}

int cr__agent_wire_domain(const cr_gpu_info *g)
{
    /* On the wire a domain is a set of GPUs that share NVLink; a GPU without
     * NVLink is a domain of its own, numbered clear of the shared ones. */
    return g->nvlink_domain >= 0 ? g->nvlink_domain : 1000 + g->index;
}

json_t *cr__agent_register_body(const agent *a)
{
    json_t *gpus = json_array();
    for (size_t i = 0; i < a->gpu->count; i++) {
        const cr_gpu_info *g = &a->gpu->gpus[i];
        json_t *mig = json_array();
        for (size_t k = 0; k < g->mig_count; k++) {
            const cr_mig_inst *m = &g->mig[k];
            json_array_append_new(mig,
                                  json_pack("{s:s,s:s,s:i,s:i,s:I}", "uuid", m->uuid, "profile",
                                            m->profile, "slices", m->slices, "mem_slices",
                                            m->mem_slices, "mem_bytes", (json_int_t)m->mem_bytes));
            if (m->start >= 0) { /* the placement, once known (NVML, or made here) */
                json_object_set_new(json_array_get(mig, k), "start", json_integer(m->start));
            }
        }
        json_array_append_new(gpus, json_pack("{s:i,s:s,s:s,s:I,s:i,s:s,s:s,s:o}", "index",
                                              g->index, "uuid", g->uuid, "model", g->model,
                                              "mem_bytes", (json_int_t)g->mem_bytes,
                                              "nvlink_domain", cr__agent_wire_domain(g), "health",
                                              cr_gpu_health_name(a->health[i].state), "reason",
                                              a->health[i].reason, "mig", mig));
        if (g->index >= 0 && g->index < 64 && (a->cfg.share_mask >> g->index & 1) &&
            g->mig_count == 0) {
            json_object_set_new(json_array_get(gpus, json_array_size(gpus) - 1), "shareable",
                                json_true());
        }
        if (g->index >= 0 && g->index < 64 && (a->cfg.mig_dynamic >> g->index & 1) &&
            g->mig_enabled) {
            /* the controller may ask for another layout (agent_mig.c) */
            json_object_set_new(json_array_get(gpus, json_array_size(gpus) - 1), "mig_dynamic",
                                json_true());
        }
    }
    json_t *running = json_array();
    for (size_t i = 0; i < a->nprocs; i++) {
        const cr_proc *p = &a->procs[i];
        if (p->state != CR_PROC_EXITED) {
            json_t *r = json_pack("{s:I,s:i}", "job", (json_int_t)p->job, "pid", (int)p->pid);
            if (p->spec.run > 0) {
                json_object_set_new(r, "run", json_integer(p->spec.run)); /* for fencing */
            }
            json_array_append_new(running, r);
        }
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGE_SIZE);
    json_t *body = json_pack("{s:s,s:s,s:i,s:s,s:o,s:i,s:I,s:o,s:o}", "node", a->cfg.node, "addr",
                             a->cfg.advertise, "port", a->port, "rack", a->cfg.rack, "gpus", gpus,
                             "cpus", (int)cpus, "mem_bytes", (json_int_t)pages * psize, "running",
                             running, "isolation", cr_iso_report(&a->iso));
    if (a->cfg.tls_cert) {
        json_object_set_new(body, "tls", json_true());
    }
    if (a->unfit[0]) {
        /* --require-isolation not met: the controller drains the node */
        json_object_set_new(body, "unfit", json_string(a->unfit));
    }
    if (a->cfg.nlabels > 0) {
        /* --label k=v: what --constraint matches */
        json_t *labels = json_object();
        for (size_t i = 0; i < a->cfg.nlabels; i++) {
            const char *kv = a->cfg.labels[i], *eq = strchr(kv, '=');
            char *k = eq ? cr_strndup(kv, (size_t)(eq - kv)) : cr_strdup(kv);
            json_object_set_new(labels, k, json_string(eq ? eq + 1 : ""));
            free(k);
        }
        json_object_set_new(body, "labels", labels);
    }
    return body;
}

/* The end (at most CR_LOG_SHIP_BYTES) of a job's log stream, base64, and
 * the file's size; NULL when there is no file. */
static json_t *log_tail(const agent *a, int64_t job, const char *stream)
{
    char *path = cr_proc_log_path(a->cfg.state_dir, job, stream);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    free(path);
    if (fd < 0) {
        return NULL;
    }
    struct stat sb;
    json_t *out = NULL;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
        int64_t size = (int64_t)sb.st_size;
        int64_t from = size > CR_LOG_SHIP_BYTES ? size - CR_LOG_SHIP_BYTES : 0;
        size_t want = (size_t)(size - from);
        unsigned char *buf = cr_malloc(want + 1);
        ssize_t got = pread(fd, buf, want, from);
        if (got >= 0) {
            size_t blen = sodium_base64_ENCODED_LEN((size_t)got, sodium_base64_VARIANT_ORIGINAL);
            char *b64 = cr_malloc(blen);
            sodium_bin2base64(b64, blen, buf, (size_t)got, sodium_base64_VARIANT_ORIGINAL);
            out = json_pack("{s:s,s:I,s:I}", "data", b64, "bytes", (json_int_t)size, "from",
                            (json_int_t)from);
            free(b64);
        }
        free(buf);
    }
    close(fd);
    return out;
}

json_t *cr__agent_status_body(const agent *a)
{
    json_t *gpus = json_array();
    for (size_t i = 0; i < a->gpu->count; i++) {
        const cr_gpu_sample *s = &a->samples[i];
        json_array_append_new(gpus,
                              json_pack("{s:i,s:s,s:s,s:i,s:I,s:i,s:I,s:i,s:I,s:i}", "index",
                                        (int)i, "health", cr_gpu_health_name(a->health[i].state),
                                        "reason", a->health[i].reason, "util_pct", s->util_pct,
                                        "mem_used_bytes", (json_int_t)s->mem_used_bytes, "temp_c",
                                        s->temp_c, "power_mw", (json_int_t)s->power_mw,
                                        "sm_clock_mhz", s->sm_clock_mhz, "ecc_uncorrected",
                                        (json_int_t)s->ecc_uncorrected, "xid_last", s->xid_last));
        if (a->power_cap_w[i] > 0) {
            /* only under a cap: a controller that asks for none knows no such member */
            json_object_set_new(json_array_get(gpus, i), "power_cap_w",
                                json_integer(a->power_cap_w[i]));
        }
    }
    json_t *jobs = json_array();
    for (size_t i = 0; i < a->nprocs; i++) {
        const cr_proc *p = &a->procs[i];
        json_t *j =
            json_pack("{s:I,s:s,s:i}", "job", (json_int_t)p->job, "state",
                      p->state == CR_PROC_EXITED ? "exited" : "running", "pid", (int)p->pid);
        if (p->spec.run > 0) {
            /* Echoed so that the controller can tell this run's exit from a
             * later run's (a report sent before a retry reached us). */
            json_object_set_new(j, "run", json_integer(p->spec.run));
        }
        if (p->spec.port > 0 && p->state != CR_PROC_EXITED) {
            json_object_set_new(j, "port", json_integer(p->spec.port));
        }
        if (p->pull[0]) {
            /* How the container's image came to be here (an event). */
            json_object_set_new(j, "image_pull", json_string(p->pull));
            json_object_set_new(j, "image_pull_ms", json_integer(p->pull_ms));
        }
        if (p->sharing[0]) {
            /* How this fractional task shares its GPU (an event). */
            json_object_set_new(j, "sharing", json_string(p->sharing));
        }
        if (p->out_capped > 0) {
            json_object_set_new(j, "output_capped", json_integer(p->out_capped)); /* an event */
        }
        if (p->out_nospace) {
            json_object_set_new(j, "output_lost", json_string("no space left on device"));
        }
        if (p->state == CR_PROC_EXITED) {
            json_object_set_new(j, "exit_code", json_integer(p->exit_code));
            json_object_set_new(j, "signal", json_integer(p->signal));
            if (p->oom) {
                json_object_set_new(j, "oom", json_true());
            }
            if (p->metric_tokens_per_s > 0 || p->metric_step_time_s > 0 || p->metric_bad) {
                /* What the job measured (cr_metric.h): the controller learns from it. */
                json_t *mj = json_object();
                if (p->metric_tokens_per_s > 0) {
                    json_object_set_new(mj, "tokens_per_s", json_real(p->metric_tokens_per_s));
                }
                if (p->metric_step_time_s > 0) {
                    json_object_set_new(mj, "step_time_s", json_real(p->metric_step_time_s));
                }
                if (p->metric_bad) {
                    json_object_set_new(mj, "bad_lines", json_integer(p->metric_bad));
                }
                json_object_set_new(j, "metrics", mj);
            }
            /* its output, for after the node is gone (shipped with each
             * report of the exit until the desired state drops the job) */
            json_t *lo = log_tail(a, p->job, "out"), *le = log_tail(a, p->job, "err");
            if (lo || le) {
                json_t *logs = json_object();
                if (lo) {
                    json_object_set_new(logs, "stdout", lo);
                }
                if (le) {
                    json_object_set_new(logs, "stderr", le);
                }
                json_object_set_new(j, "logs", logs);
            }
            if (p->lease_stop) {
                /* stopped by the node lease: requeued, not failed */
                json_object_set_new(j, "lease", json_true());
            }
            if (p->reason[0]) {
                json_object_set_new(j, "reason", json_string(p->reason));
                if (p->fatal) {
                    json_object_set_new(j, "fatal", json_true());
                }
            }
        }
        json_array_append_new(jobs, j);
    }
    cr__agent_data_status(a, jobs); /* staging: running in the controller, no process yet */
    json_t *body = json_pack("{s:o,s:o}", "gpus", gpus, "jobs", jobs);
    json_t *held = cr__agent_data_held(a);
    if (held) {
        json_object_set_new(body, "data_held", held); /* locality (docs/data.md) */
    }
    if (a->reclaim_in_s > 0 && !a->reclaim_told) {
        json_object_set_new(body, "reclaim_in_s", json_integer(a->reclaim_in_s));
    }
    return body;
}

static void log_http_error(const char *what, int status, const cr_buf *resp)
{
    if (status < 0) {
        cr_warn("agent: %s: controller unreachable", what);
    } else {
        cr_warn("agent: %s: HTTP %d %.300s", what, status, cr_buf_str(resp));
    }
}

/* Fencing: the controller names running jobs that are not this node's any
 * more (ended, requeued, maybe already running elsewhere, while this node
 * was away), and in whys ("fence_reasons", id -> text; an older controller
 * sends none) why. Kill them at once, with no grace period: the job lives
 * on where it was placed again, or has ended. Main thread. */
static void fence(agent *a, const json_t *ids, const json_t *whys)
{
    int64_t now = cr_mono_ns();
    for (size_t i = 0; i < json_array_size(ids); i++) {
        int64_t id = (int64_t)json_integer_value(json_array_get(ids, i));
        char key[24];
        snprintf(key, sizeof key, "%lld", (long long)id);
        const char *why = json_string_value(json_object_get(whys, key));
        for (size_t k = 0; k < a->nprocs; k++) {
            cr_proc *p = &a->procs[k];
            if (p->job != id || p->state == CR_PROC_EXITED) {
                continue;
            }
            cr_warn("agent: job=%lld fenced: %.500s; killing pid %d", (long long)id,
                    why && *why ? why
                                : "the controller placed it elsewhere while this node was away",
                    (int)p->pid);
            p->state = CR_PROC_RUNNING; /* a stop under way becomes a kill now */
            cr_proc_stop(p, 0, now);
        }
    }
}

/* --- The node lease -------------------------------------------------------
 *
 * The controller marks a node lost after lost_after_s without a register
 * or status, and tells the agents that time as "lease_s". An agent that has
 * had no answer for lease_s stops the jobs the controller is about to
 * requeue (SIGTERM, the job's grace, SIGKILL), so that a cut-off node's
 * copy is gone before the copy placed elsewhere starts: the controller
 * requeues them only after lease_s + grace_s + CTL_LEASE_MARGIN_S.
 *
 * The lease is counted from when the answered call was *sent*: the
 * controller heard the node no earlier, so the agent's lease never ends
 * later than the controller's view of it. Monotonic clock, which is one for
 * the whole machine: STATE-DIR/lease keeps it (with the boot id) across a
 * restart of the agent, so an agent restarted while cut off does not start
 * a fresh lease the controller knows nothing of.
 */

static int boot_id(char out[64])
{
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f) {
        return CR_EIO;
    }
    int ok = fgets(out, 64, f) != NULL;
    fclose(f);
    out[strcspn(out, "\n")] = '\0';
    return ok && out[0] ? 0 : CR_EIO;
}

static void lease_save(const agent *a)
{
    char id[64];
    if (boot_id(id) != 0) {
        return;
    }
    char *path = cr_asprintf("%s/lease", a->cfg.state_dir);
    char *tmp = cr_asprintf("%s/lease.tmp", a->cfg.state_dir);
    FILE *f = fopen(tmp, "w");
    if (f) {
        fprintf(f, "%s %lld %lld\n", id, (long long)a->lease_ok_ns, (long long)a->lease_ns);
        if (fclose(f) == 0) {
            rename(tmp, path);
        }
    }
    free(path);
    free(tmp);
}

void cr__agent_lease_load(agent *a)
{
    char id[64], was[64];
    long long ok = 0, lease = 0;
    char *path = cr_asprintf("%s/lease", a->cfg.state_dir);
    FILE *f = fopen(path, "r");
    free(path);
    if (!f) {
        return;
    }
    int n = fscanf(f, "%63s %lld %lld", was, &ok, &lease);
    fclose(f);
    int64_t now = cr_mono_ns();
    if (n != 3 || boot_id(id) != 0 || strcmp(id, was) != 0 || ok <= 0 || ok > now || lease <= 0) {
        return; /* another boot: no job of it is left to stop */
    }
    a->lease_ok_ns = ok;
    a->lease_ns = lease;
    cr_info("agent: node lease %llds, last answer %.1fs ago", (long long)(lease / CR_NS_PER_SEC),
            (double)(now - ok) / 1e9);
}

/* The controller answered a call sent at sent_ns; r (borrowed, may be
 * NULL) may carry "lease_s". */
static void lease_renew(agent *a, int64_t sent_ns, const json_t *r)
{
    json_t *l = json_object_get(r, "lease_s");
    if (json_is_number(l) && json_number_value(l) > 0 && json_number_value(l) <= 86400) {
        a->lease_ns = (int64_t)(json_number_value(l) * 1e9);
    }
    if (sent_ns > a->lease_ok_ns) {
        a->lease_ok_ns = sent_ns;
    }
    if (a->lease_expired) {
        cr_info("agent: a controller answers again: node lease renewed");
        a->lease_expired = 0;
    }
    lease_save(a);
}

int cr__agent_lease_tick(agent *a, int64_t mono_ns, int64_t *next_ns)
{
    if (a->lease_ns <= 0 || a->lease_ok_ns <= 0 || a->lease_expired) {
        return 0;
    }
    int64_t end = a->lease_ok_ns + a->lease_ns;
    size_t covered = 0;
    for (size_t i = 0; i < a->nprocs; i++) {
        covered += a->procs[i].state != CR_PROC_EXITED && !a->procs[i].spec.keep_running;
    }
    if (mono_ns < end) {
        if (covered > 0 && end < *next_ns) {
            *next_ns = end;
        }
        return 0;
    }
    a->lease_expired = 1;
    cr_warn("agent: node lease expired: no controller answered for %.1fs (lease %llds); "
            "stopping %zu job(s) the controller requeues elsewhere",
            (double)(mono_ns - a->lease_ok_ns) / 1e9, (long long)(a->lease_ns / CR_NS_PER_SEC),
            covered);
    for (size_t i = 0; i < a->nprocs; i++) {
        cr_proc *p = &a->procs[i];
        if (p->state == CR_PROC_EXITED || p->spec.keep_running) {
            continue;
        }
        /* The grace is counted from the lease's end, as the controller
         * counts it: a late turn of this loop shortens it, never extends it. */
        int64_t grace = p->spec.grace_ns - (mono_ns - end);
        grace = grace < 0 ? 0 : grace;
        p->lease_stop = 1;
        if (p->state == CR_PROC_STOPPING) {
            if (p->kill_at_ns > mono_ns + grace) {
                p->kill_at_ns = mono_ns + grace; /* a stop under way ends by then too */
            }
            continue;
        }
        cr_warn("agent: job=%lld stop: node lease expired (grace %.1fs)", (long long)p->job,
                (double)grace / 1e9);
        cr_proc_stop(p, grace, mono_ns);
        cr__agent_ctr_stop(a, p, grace);
    }
    return covered > 0;
}

/* How long a register or status may take: 10 s, but no longer than
 * the lease has left (1 s at least), so that the main loop notices the
 * lease's end on time; 1 s while a lease stop waits for its SIGKILL. */
static int64_t call_timeout_ms(const agent *a)
{
    if (a->lease_ns <= 0 || a->lease_ok_ns <= 0) {
        return 10000;
    }
    if (a->lease_expired) {
        for (size_t i = 0; i < a->nprocs; i++) {
            if (a->procs[i].state == CR_PROC_STOPPING) {
                return 1000;
            }
        }
        return 10000;
    }
    int64_t left = (a->lease_ok_ns + a->lease_ns - cr_mono_ns()) / CR_NS_PER_MS;
    return left < 1000 ? 1000 : left > 10000 ? 10000 : left;
}

/*
 * Register: with this node's own credential when it has one (a restart),
 * else with the bootstrap token. A refused credential (the controller's
 * store was reset, an admin re-keyed the node) is forgotten and the
 * bootstrap token, when there is one, is tried at once.
 */
int cr__agent_register(agent *a)
{
    if (!a->status_cl) {
        a->status_cl = new_client(a); /* kept for keep-alive; main thread only */
    }
    cr_buf resp;
    cr_buf_init(&resp);
    json_t *body = cr__agent_register_body(a);
    int rc = 0;
    char tok[256];
    pthread_mutex_lock(&a->mu);
    snprintf(tok, sizeof tok, "%s", a->node_token);
    pthread_mutex_unlock(&a->mu);
    int own = tok[0] != '\0';
    int st = CR_EAUTH;
    int64_t sent = cr_mono_ns();
    if (own) {
        st = http_call(a->status_cl, "POST", "/v1/agents/register", tok, body, &resp,
                       call_timeout_ms(a));
        if (st == 401 || st == 403) {
            log_http_error("register with this node's credential", st, &resp);
            cr__agent_cred_forget(a);
        }
    }
    if ((!own || st == 401 || st == 403) && a->cfg.join_token) {
        sent = cr_mono_ns();
        st = http_call(a->status_cl, "POST", "/v1/agents/register", a->cfg.join_token, body, &resp,
                       call_timeout_ms(a));
    }
    sodium_memzero(tok, sizeof tok);
    pthread_mutex_lock(&a->mu);
    a->n_registers++;
    pthread_mutex_unlock(&a->mu);
    if (st != 200 && st != 201) {
        if (st != CR_EAUTH || a->cfg.join_token) {
            log_http_error("register", st, &resp);
        } else {
            cr_warn("agent: register: no credential left: give a new bootstrap token "
                    "(--join-token FILE or CORRAL_JOIN_TOKEN)");
        }
        rc = st == 401 || st == 403 || st == 409 || st == CR_EAUTH ? CR_EAUTH : CR_EUNAVAIL;
        goto out;
    }
    json_error_t je;
    json_t *r = json_loads(cr_buf_str(&resp), 0, &je);
    const char *ntok = NULL, *sec = "";
    double hb = 5;
    if (!r ||
        json_unpack(r, "{s:s,s?s,s?F}", "node_token", &ntok, "agent_secret", &sec, "heartbeat_s",
                    &hb) != 0 ||
        strlen(ntok) >= sizeof a->node_token || strlen(sec) >= sizeof a->agent_secret || hb <= 0 ||
        hb > 3600) {
        cr_warn("agent: register: answer lacks node_token");
        json_decref(r);
        rc = CR_EPARSE;
        goto out;
    }
    pthread_mutex_lock(&a->mu);
    snprintf(a->node_token, sizeof a->node_token, "%s", ntok);
    snprintf(a->agent_secret, sizeof a->agent_secret, "%s", sec);
    a->heartbeat_ns = (int64_t)(hb * 1e9);
    pthread_mutex_unlock(&a->mu);
    lease_renew(a, sent, r);
    fence(a, json_object_get(r, "fence"), json_object_get(r, "fence_reasons"));
    json_decref(r);
    cr__agent_cred_save(a);
    set_registered(a, 1);
    cr_info("agent: registered node=%s gpus=%zu server=%s", a->cfg.node, a->gpu->count,
            a->cfg.server);
out:
    json_decref(body);
    if (resp.data) {
        sodium_memzero(resp.data, resp.len);
    }
    cr_buf_fini(&resp);
    return rc;
}

int cr__agent_post_status(agent *a, int64_t *acked)
{
    *acked = 0;
    if (!a->status_cl) {
        a->status_cl = new_client(a); /* kept for keep-alive; main thread only */
    }
    cr_buf resp;
    cr_buf_init(&resp);
    json_t *body = cr__agent_status_body(a);
    char *path = cr_asprintf("/v1/agents/%s/status", a->cfg.node);
    char tok[256];
    pthread_mutex_lock(&a->mu);
    snprintf(tok, sizeof tok, "%s", a->node_token);
    pthread_mutex_unlock(&a->mu);
    int64_t sent = cr_mono_ns();
    int st = http_call(a->status_cl, "POST", path, tok, body, &resp, call_timeout_ms(a));
    int rc = 0;
    pthread_mutex_lock(&a->mu);
    a->n_status++;
    if (st != 200 && st != 204) {
        a->n_status_fail++;
    }
    pthread_mutex_unlock(&a->mu);
    if (st == 401 || st == 403 || st == 404) {
        log_http_error("status", st, &resp);
        set_registered(a, 0);
        rc = CR_EAUTH;
    } else if (st != 200 && st != 204) {
        log_http_error("status", st, &resp);
        if (st == 409 || st == 507) {
            /* refused (the node being deleted, the store full), but the
             * controller heard the node: it counts it as seen too */
            lease_renew(a, sent, NULL);
        }
        rc = CR_EUNAVAIL;
    } else if (resp.len == 0) {
        lease_renew(a, sent, NULL);
        a->reclaim_told |= a->reclaim_in_s > 0;
    } else {
        a->reclaim_told |= a->reclaim_in_s > 0;
        json_t *r = json_loads(cr_buf_str(&resp), 0, NULL);
        lease_renew(a, sent, r);
        json_t *v = json_object_get(r, "version");
        if (json_is_integer(v) && json_integer_value(v) > 0) {
            *acked = (int64_t)json_integer_value(v);
        }
        fence(a, json_object_get(r, "fence"), json_object_get(r, "fence_reasons"));
        json_decref(r);
    }
    free(path);
    json_decref(body);
    cr_buf_fini(&resp);
    return rc;
}

void cr__agent_wake(agent *a)
{
    char c = 1;
    ssize_t w = write(a->wake_wr, &c, 1); /* a full pipe already wakes main */
    (void)w;
}

static void backoff_sleep(agent *a, int64_t ns)
{
    /* Sleep in short steps so a stop is noticed quickly. */
    int64_t end = cr_mono_ns() + ns;
    while (!atomic_load(&a->stop) && cr_mono_ns() < end) {
        usleep(20000);
    }
}

static void *poller_main(void *ud)
{
    agent *a = ud;
    cr_client *cl = new_client(a); /* this thread's own */
    cr_buf resp;
    cr_buf_init(&resp);
    int64_t version = 0, backoff = 50 * CR_NS_PER_MS;
    int was_registered = 0;
    while (!atomic_load(&a->stop)) {
        char tok[256];
        pthread_mutex_lock(&a->mu);
        int reg = a->registered;
        snprintf(tok, sizeof tok, "%s", a->node_token);
        pthread_mutex_unlock(&a->mu);
        if (!reg) {
            was_registered = 0;
            backoff_sleep(a, 20 * CR_NS_PER_MS);
            continue;
        }
        if (!was_registered) {
            /* A new registration may come with a new controller whose
             * versions start over (at 1): take its first document whatever
             * it is. */
            version = 0;
            was_registered = 1;
        }
        char *path = cr_asprintf("/v1/agents/%s/desired?version=%lld&wait=%lld", a->cfg.node,
                                 (long long)version, (long long)a->cfg.wait_s);
        int st = http_call(cl, "GET", path, tok, NULL, &resp, (a->cfg.wait_s + 15) * 1000);
        free(path);
        pthread_mutex_lock(&a->mu);
        a->n_polls++;
        if (st != 200) {
            a->n_poll_fail++;
        }
        pthread_mutex_unlock(&a->mu);
        if (atomic_load(&a->stop)) {
            break;
        }
        if (st == 401 || st == 403 || st == 404) {
            log_http_error("desired", st, &resp);
            set_registered(a, 0);
            cr__agent_wake(a);
            continue;
        }
        if (st != 200) {
            if (st >= 0) {
                log_http_error("desired", st, &resp);
            }
            backoff_sleep(a, backoff);
            backoff = backoff * 2 > 5 * CR_NS_PER_SEC ? 5 * CR_NS_PER_SEC : backoff * 2;
            continue;
        }
        backoff = 50 * CR_NS_PER_MS;
        cr_desired *d = cr_calloc(1, sizeof *d);
        char err[512];
        if (cr_desired_parse(resp.data ? resp.data : "", resp.len, d, err, sizeof err) < 0) {
            cr_warn("agent: desired state rejected: %s", err);
            free(d);
            backoff_sleep(a, CR_NS_PER_SEC);
            continue;
        }
        if (d->version == version) {
            cr_desired_fini(d);
            free(d);
            continue;
        }
        version = d->version;
        pthread_mutex_lock(&a->mu);
        if (a->pending) {
            cr_desired_fini(a->pending);
            free(a->pending);
        }
        a->pending = d;
        pthread_mutex_unlock(&a->mu);
        cr__agent_wake(a);
    }
    cr_buf_fini(&resp);
    cr_client_free(cl);
    return NULL;
}

int cr__agent_poller_start(agent *a)
{
    if (pthread_create(&a->poller, NULL, poller_main, a) != 0) {
        return CR_EAGAIN;
    }
    a->poller_started = 1;
    return 0;
}

void cr__agent_poller_join(agent *a)
{
    if (a->poller_started) {
        pthread_join(a->poller, NULL);
        a->poller_started = 0;
    }
}
