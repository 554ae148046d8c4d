/*
 * ctl_pools.c - node pools: config, the provider exec protocol, scale up
 * and down (issue 31; docs/pools.md).
 *
 * One pass a second on the pool thread, in three steps per pool:
 *   1. under mu: follow the pool's nodes (booting -> up once its agent
 *      registered; a boot past boot_timeout_s is deleted and counted),
 *      measure the demand (pending jobs of the pool's shape that no current
 *      node can take now, pending at least pending_s), decide creates
 *      (bounded by max_nodes, held off by a refusal's retry time or the
 *      failed boots' backoff) and drains (idle past the idle time, older
 *      than min_lifetime_s, above min_nodes, no demand of the shape), and
 *      mint each new node's bootstrap token;
 *   2. without mu: the provider's create, delete and (first pass) list;
 *   3. under mu: the answers applied; a deleted node is forgotten by the
 *      controller (stored first, as an admin's delete).
 *
 * Hysteresis (the KubeRay loop): a node is drained only after idle time
 * with no demand of its shape and never before min_lifetime_s; a create
 * within twice the idle time of the pool's last delete is a regret and
 * doubles the pool's idle time (up to 8x, back to 1x after an hour without
 * one). So a demand that comes back at the idle time's boundary gets at
 * most one extra boot before the node is kept.
 */
#include "ctl_pools.h"

#include "ctl_int.h"
#include "ctl_pools_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <errno.h>
#include <sodium.h>
#include <stdarg.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const char *const pn_names[] = {"booting", "up", "draining", "deleting"};

/* ------------------------------------------------------------------------ */
/* Config                                                                   */

static const char *const pool_members[] = {"name",
                                           "gpu_type",
                                           "gpus_per_node",
                                           "min_nodes",
                                           "max_nodes",
                                           "cost_per_hour",
                                           "boot_s",
                                           "boot_timeout_s",
                                           "idle_s",
                                           "min_lifetime_s",
                                           "pending_s",
                                           "labels",
                                           "provider",
                                           "provider_config",
                                           "provider_timeout_s",
                                           "refusal_retry_s",
                                           "nodes",
                                           "backoff_s",
                                           "list_s",
                                           "power_provider",
                                           "suspend_s",
                                           "resume_timeout_s",
                                           "power_budget_w",
                                           NULL};

static int pool_parse(const json_t *o, const char *path, pool *p, cr_json_err *err)
{
    const char *name = NULL, *type = "", *prov = "";
    json_t *labels = NULL, *pats = NULL, *pconf = NULL;
    int rc;
    memset(p, 0, sizeof *p);
    p->gpus_per_node = 1;
    p->max_nodes = 0;
    p->boot_s = 60;
    p->boot_timeout_s = 600;
    p->idle_s = 300;
    p->min_lifetime_s = 600;
    p->pending_s = 10;
    p->provider_timeout_s = 60;
    p->refusal_retry_s = 60;
    p->backoff_base_s = BACKOFF_BASE_S;
    p->list_s = 300;
    if (!json_is_object(o)) {
        return cr_json_fail(err, CR_EINVAL, path, "field '%s': want an object", path);
    }
    if ((rc = cr_json_only(o, path, pool_members, err)) ||
        (rc = cr_json_str(o, path, "name", true, CTL_NAME_MAX - 1, &name, err)) ||
        (rc = cr_json_str(o, path, "gpu_type", false, CTL_NAME_MAX - 1, &type, err)) ||
        (rc = cr_json_str(o, path, "provider", false, 1000, &prov, err)) ||
        (rc = cr_json_int(o, path, "gpus_per_node", false, 1, 64, &p->gpus_per_node, err)) ||
        (rc = cr_json_int(o, path, "min_nodes", false, 0, 1000, &p->min_nodes, err)) ||
        (rc = cr_json_int(o, path, "max_nodes", false, 0, 1000, &p->max_nodes, err)) ||
        (rc = cr_json_num(o, path, "cost_per_hour", false, 0, 1e6, &p->cost_per_hour, err)) ||
        (rc = cr_json_int(o, path, "boot_s", false, 0, 86400, &p->boot_s, err)) ||
        (rc = cr_json_int(o, path, "boot_timeout_s", false, 1, 86400, &p->boot_timeout_s, err)) ||
        (rc = cr_json_int(o, path, "idle_s", false, 1, 86400 * 30, &p->idle_s, err)) ||
        (rc = cr_json_int(o, path, "min_lifetime_s", false, 0, 86400 * 30, &p->min_lifetime_s,
                          err)) ||
        (rc = cr_json_int(o, path, "pending_s", false, 0, 86400, &p->pending_s, err)) ||
        (rc = cr_json_int(o, path, "provider_timeout_s", false, 1, 3600, &p->provider_timeout_s,
                          err)) ||
        (rc = cr_json_int(o, path, "refusal_retry_s", false, 1, 86400, &p->refusal_retry_s, err)) ||
        (rc =
             cr_json_int(o, path, "backoff_s", false, 1, BACKOFF_MAX_S, &p->backoff_base_s, err)) ||
        (rc = cr_json_int(o, path, "list_s", false, 1, 86400, &p->list_s, err)) ||
        (rc = cr_json_obj(o, path, "labels", false, &labels, err)) ||
        (rc = cr_json_obj(o, path, "provider_config", false, &pconf, err)) ||
        (rc = cr_json_arr(o, path, "nodes", false, 1024, &pats, err))) {
        return rc;
    }
    char f[300];
    if (!ctl_name_ok(name)) {
        snprintf(f, sizeof f, "%s.name", path);
        return cr_json_fail(err, CR_EINVAL, f, "field '%s': use letters, digits, '-', '_' or '.'",
                            f);
    }
    if (*prov && (!*type || !json_object_get(o, "max_nodes"))) {
        snprintf(f, sizeof f, "%s.%s", path, *type ? "max_nodes" : "gpu_type");
        return cr_json_fail(err, CR_EINVAL, f, "field '%s': a pool with a provider needs it", f);
    }
    if (p->min_nodes > p->max_nodes && *prov) {
        snprintf(f, sizeof f, "%s.min_nodes", path);
        return cr_json_fail(err, CR_EINVAL, f, "field '%s': above max_nodes", f);
    }
    const char *k;
    json_t *x;
    json_object_foreach(labels, k, x)
    {
        if (!json_is_string(x) || !ctl_name_ok(k) || !ctl_text_clean(json_string_value(x))) {
            snprintf(f, sizeof f, "%s.labels.%.100s", path, k);
            return cr_json_fail(err, CR_EINVAL, f, "field '%s': want a name and a string", f);
        }
    }
    size_t i;
    json_array_foreach(pats, i, x)
    {
        if (!json_is_string(x)) {
            snprintf(f, sizeof f, "%s.nodes[%zu]", path, i);
            return cr_json_fail(err, CR_EINVAL, f, "field '%s': want a name pattern", f);
        }
    }
    if ((rc = ctl__pools_power_parse(o, path, p, err)) != 0) {
        return rc;
    }
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->gpu_type, sizeof p->gpu_type, "%s", type);
    snprintf(p->provider, sizeof p->provider, "%s", prov);
    p->labels = labels ? json_deep_copy(labels) : json_object();
    p->patterns = pats ? json_deep_copy(pats) : NULL;
    p->pconfig = pconf ? json_deep_copy(pconf) : NULL;
    p->idle_mult = 1;
    return 0;
}

static void pool_fini(pool *p)
{
    json_decref(p->labels);
    json_decref(p->patterns);
    json_decref(p->pconfig);
    free(p->pn);
    free(p->sn);
}

int ctl_pools_check(const json_t *v, cr_json_err *err)
{
    size_t i;
    json_t *o;
    json_array_foreach(v, i, o)
    {
        char path[48];
        snprintf(path, sizeof path, "pools[%zu]", i);
        pool p;
        int rc = pool_parse(o, path, &p, err);
        if (rc) {
            return rc;
        }
        for (size_t k = 0; k < i; k++) {
            const char *other = json_string_value(json_object_get(json_array_get(v, k), "name"));
            if (other && strcmp(other, p.name) == 0) {
                pool_fini(&p);
                snprintf(path, sizeof path, "pools[%zu].name", i);
                return cr_json_fail(err, CR_EINVAL, path, "field '%s': pool '%s' twice", path,
                                    other);
            }
        }
        pool_fini(&p);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Events                                                                   */

static void pool_event(pool *p, const char *node, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void pool_event(pool *p, const char *node, const char *what, const char *fmt, ...)
{
    pevent *e = &p->ev[p->nev++ % EVENTS_MAX];
    e->wall_ns = cr_now_ns();
    snprintf(e->node, sizeof e->node, "%s", node ? node : "");
    snprintf(e->what, sizeof e->what, "%s", what);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->why, sizeof e->why, fmt, ap);
    va_end(ap);
    cr_info("pool=%s node=%s %s: %s", p->name, e->node[0] ? e->node : "-", what, e->why);
}

/* ------------------------------------------------------------------------ */
/* The provider: one call                                                   */

/* Run the provider with req on stdin; its answer, checked against version 1. */
static void provider_run(const pool *p, const char *prog, const json_t *req, pcall *out)
{
    memset(out, 0, sizeof *out);
    int in[2] = {-1, -1}, op[2] = {-1, -1};
    char *text = json_dumps(req, JSON_COMPACT);
    cr_buf b;
    cr_buf_init(&b);
    pid_t pid = -1;
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(op, O_CLOEXEC) != 0) {
        out->rc = CR_EIO;
        snprintf(out->msg, sizeof out->msg, "pipe: %s", strerror(errno));
        goto out;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, op[1], 1);
    posix_spawnattr_init(&at);
    posix_spawnattr_setpgroup(&at, 0);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
    char *argv[] = {(char *)prog, NULL};
    int se = posix_spawn(&pid, prog, &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(in[0]);
    close(op[1]);
    in[0] = op[1] = -1;
    if (se != 0) {
        pid = -1;
        out->rc = CR_EIO;
        snprintf(out->msg, sizeof out->msg, "cannot run %.150s: %s", prog, strerror(se));
        goto out;
    }
    size_t len = strlen(text), sent = 0;
    int64_t deadline = cr_mono_ns() + p->provider_timeout_s * CR_NS_PER_SEC;
    bool timed_out = false;
    fcntl(in[1], F_SETFL, O_NONBLOCK);
    for (;;) {
        struct pollfd pf[2] = {{.fd = op[0], .events = POLLIN}, {.fd = in[1], .events = POLLOUT}};
        int64_t left = (deadline - cr_mono_ns()) / 1000000;
        if (left <= 0) {
            timed_out = true;
            break;
        }
        int n = poll(pf, in[1] >= 0 ? 2 : 1, (int)(left > 1000 ? 1000 : left));
        if (n < 0 && errno != EINTR) {
            break;
        }
        if (in[1] >= 0 && (pf[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t w = write(in[1], text + sent, len - sent);
            if (w > 0) {
                sent += (size_t)w;
            }
            if (w < 0 && errno != EAGAIN) {
                sent = len; /* it closed its stdin: its answer decides */
            }
            if (sent >= len) {
                close(in[1]);
                in[1] = -1;
            }
        }
        if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            char chunk[4096];
            ssize_t r = read(op[0], chunk, sizeof chunk);
            if (r <= 0) {
                break; /* EOF */
            }
            if (b.len + (size_t)r > OUT_MAX) {
                out->rc = CR_ETOOBIG;
                snprintf(out->msg, sizeof out->msg, "answer over %d bytes", OUT_MAX);
                break;
            }
            cr_buf_append(&b, chunk, (size_t)r);
        }
    }
    if (timed_out || out->rc) {
        kill(-pid, SIGKILL);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    pid = -1;
    if (timed_out) {
        out->rc = CR_ETIMEDOUT;
        snprintf(out->msg, sizeof out->msg, "no answer within provider_timeout_s (%llds): killed",
                 (long long)p->provider_timeout_s);
        goto out;
    }
    if (out->rc) {
        goto out;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        out->rc = CR_EIO;
        if (WIFEXITED(st)) {
            snprintf(out->msg, sizeof out->msg, "exited with status %d", WEXITSTATUS(st));
        } else {
            snprintf(out->msg, sizeof out->msg, "killed by signal %d", WTERMSIG(st));
        }
        goto out;
    }
    json_error_t je;
    json_t *ans = json_loadb(b.data ? b.data : "", b.len, 0, &je);
    if (!json_is_object(ans)) {
        json_decref(ans);
        out->rc = CR_EPARSE;
        snprintf(out->msg, sizeof out->msg, "invalid JSON answer: %s", je.text);
        goto out;
    }
    json_t *ver = json_object_get(ans, "version");
    json_t *ok = json_object_get(ans, "ok");
    if (!json_is_integer(ver) || json_integer_value(ver) != 1 || !json_is_boolean(ok)) {
        out->rc = CR_EPARSE;
        snprintf(out->msg, sizeof out->msg, "answer without \"version\": 1 and \"ok\"");
    } else if (!json_is_true(ok)) {
        json_t *e = json_object_get(ans, "error");
        const char *code = json_string_value(json_object_get(e, "code"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        out->rc = code && strcmp(code, "capacity") == 0 ? CR_ENOSPC : CR_EIO;
        snprintf(out->msg, sizeof out->msg, "%s: %.200s", code ? code : "error",
                 msg ? msg : "(no message)");
    } else {
        json_t *nodes = json_object_get(ans, "nodes");
        out->nodes = json_is_array(nodes) ? json_incref(nodes) : json_array();
    }
    json_decref(ans);
out:
    if (pid > 0) {
        kill(-pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0) {
            close(in[i]);
        }
        if (op[i] >= 0) {
            close(op[i]);
        }
    }
    cr_buf_fini(&b);
    free(text);
}

/* ------------------------------------------------------------------------ */
/* One pass                                                                 */

typedef struct pwork {
    bool list;
    size_t ncreate;
    char cname[PASS_MAX][CTL_NAME_MAX];
    char ctoken[PASS_MAX][CR_TOKEN_TEXT_MAX];
    size_t ndelete;
    char dname[PASS_MAX][CTL_NAME_MAX];
    char did[PASS_MAX][128];
    pcall create, del[PASS_MAX], lst;
} pwork;

static const char *jstr(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static pnode *pn_find(pool *p, const char *name)
{
    for (size_t i = 0; i < p->npn; i++) {
        if (strcmp(p->pn[i].name, name) == 0) {
            return &p->pn[i];
        }
    }
    return NULL;
}

static pnode *pn_add(pool *p, const char *name, pn_state st, int64_t now)
{
    CR_GROW(p->pn, p->npn, p->cappn);
    pnode *x = &p->pn[p->npn++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    x->state = st;
    x->created_mono = now;
    return x;
}

static void pn_drop(pool *p, pnode *x)
{
    *x = p->pn[--p->npn];
}

/* Its bootstrap token goes when a node leaves before it registered. mu held. */
static void token_forget(ctl *c, const char *node)
{
    cr_store_txn *txn = cr_store_txn_new();
    ctl_boot_forget(c, txn, node);
    if (cr_store_txn_empty(txn)) {
        cr_store_txn_free(txn);
    } else {
        cr_store_submit(c->store, txn, NULL, NULL);
    }
}

static int64_t backoff_of(int64_t base, int n)
{
    int64_t s = base;
    for (int i = 1; i < n && s < BACKOFF_MAX_S; i++) {
        s *= 2;
    }
    return s < BACKOFF_MAX_S ? s : BACKOFF_MAX_S;
}

static size_t active_jobs(ctl *c, const ctl_node *n)
{
    size_t k = 0;
    for (size_t i = 0; i < n->njobs; i++) {
        const ctl_job *j = ctl_job_get(c, n->jobs[i]);
        k += j && !ctl_job_terminal(j);
    }
    return k;
}

static size_t free_gpus(const ctl_node *n, const char *type)
{
    size_t k = 0;
    for (size_t i = 0; i < n->ngpus; i++) {
        const ctl_gpu *g = &n->gpus[i];
        k += g->alloc_job == 0 && strcmp(g->health, "ok") == 0 &&
             (!*type || strcasecmp(g->model, type) == 0);
    }
    return k;
}

/* The job's reason with the pool's note after the scheduler's own. */
static void reason_note(ctl_job *j, const char *note)
{
    char buf[1024];
    const char *r = j->reason ? j->reason : "";
    const char *m = strstr(r, REASON_MARK);
    int base = m ? (int)(m - r) : (int)strlen(r);
    snprintf(buf, sizeof buf, "%.*s%s%s", base, r, REASON_MARK, note);
    ctl_job_set_reason(j, buf);
}

/* A job's nodes and the GPUs it wants on each: a gang (nodes >= 2) spreads
 * gpus evenly, anything else is one node. */
static int job_pieces(const ctl_job *j)
{
    return j->nodes >= 2 ? j->nodes : 1;
}

static int job_per_node(const ctl_job *j)
{
    return j->gpus / job_pieces(j);
}

/* A pending job that asks for whole GPUs and is held back by nothing but
 * capacity. */
static bool job_may_want(const ctl_job *j)
{
    if (j->state != JS_PENDING || j->gated || j->start_unstored || j->gpus <= 0 ||
        j->gpus % job_pieces(j) != 0 || job_pieces(j) > PASS_MAX || j->mig_profile[0] ||
        j->gpu_milli > 0) {
        return false;
    }
    /* the scheduler's reason, not the pool's note after it */
    char base[512];
    const char *r = j->reason ? j->reason : "";
    const char *m = strstr(r, REASON_MARK);
    snprintf(base, sizeof base, "%.*s", m ? (int)(m - r) : (int)strlen(r), r);
    const char *k = ctl_reason_class(base);
    return strcmp(k, "quota") != 0 && strcmp(k, "held") != 0 && strcmp(k, "dependency") != 0;
}

static bool job_wants(ctl *c, const pool *p, const ctl_job *j, const ctl_node *shape)
{
    return job_may_want(j) && job_per_node(j) <= p->gpus_per_node &&
           strcasecmp(j->gpu_type, p->gpu_type) == 0 && ctl_batch_node_allowed(c, j, shape);
}

/* Whether the nodes in service could take j now (the scheduler will). */
static bool node_can_take(ctl *c, const ctl_job *j)
{
    int have = 0;
    for (size_t i = 0; i < c->nnodes && have < job_pieces(j); i++) {
        const ctl_node *n = c->nodes[i];
        have += n->state == NS_UP && !n->drained && !n->deleting &&
                free_gpus(n, j->gpu_type) >= (size_t)job_per_node(j) &&
                ctl_batch_node_allowed(c, j, n);
    }
    /* a suspended on-prem node that could take it is resumed instead */
    return have >= job_pieces(j) || ctl__pools_power_could_take(c, j);
}

static void drain(ctl *c, ctl_node *n, bool on, const char *why)
{
    n->drained = on;
    if (n->state != NS_LOST) {
        n->state = on ? NS_DRAINED : NS_UP;
    }
    snprintf(n->reason, sizeof n->reason, "%s", on ? why : "");
    n->sched_dirty = true;
    ctl_sched_kick(c);
}

/* The pool's cost not yet booked, into the tenants' usage. mu held. */
static void book(ctl *c, pool *p)
{
    if (p->nacc == 0) {
        return;
    }
    cr_store_txn *txn = cr_store_txn_new();
    int64_t wall = cr_now_ns();
    for (size_t i = 0; i < p->nacc; i++) {
        ctl_usage_add_cloud(c, txn, p->acc[i].tenant, p->gpu_type, wall, p->acc[i].gpu_s,
                            p->acc[i].cost);
    }
    cr_store_submit(c->store, txn, NULL, NULL);
    p->nacc = 0;
}

static void charge(ctl *c, pool *p, const char *tenant, double gpu_s, double cost)
{
    if (!*tenant || (gpu_s <= 0 && cost <= 0)) {
        return; /* min_nodes and adopted nodes' idle time: the pool's own */
    }
    size_t i = 0;
    for (; i < p->nacc && strcmp(p->acc[i].tenant, tenant) != 0; i++) {
    }
    if (i == p->nacc) {
        if (p->nacc == ACC_MAX) {
            book(c, p);
            i = 0;
        }
        memset(&p->acc[i], 0, sizeof p->acc[i]);
        snprintf(p->acc[i].tenant, sizeof p->acc[i].tenant, "%s", tenant);
        p->nacc = i + 1;
    }
    p->acc[i].gpu_s += gpu_s;
    p->acc[i].cost += cost;
}

/* dt_s seconds of the pool's nodes: counted, and charged per tenant. A
 * node's GPUs held by jobs are charged to the jobs' tenants; the rest of
 * it (booting, idle, free GPUs) to the tenant whose job it was created
 * for. mu held. */
static void bill(ctl *c, pool *p, double dt_s, int64_t now)
{
    p->node_s += (double)p->npn * dt_s;
    double g = (double)p->gpus_per_node;
    double per_gpu = p->cost_per_hour / 3600.0 * dt_s / g;
    for (size_t i = 0; i < p->npn; i++) {
        const pnode *x = &p->pn[i];
        const ctl_node *n = x->state == PN_BOOTING ? NULL : ctl_node_find(c, x->name);
        size_t held = 0;
        for (size_t k = 0; n && k < n->ngpus && k < (size_t)p->gpus_per_node; k++) {
            const ctl_job *j = n->gpus[k].alloc_job ? ctl_job_get(c, n->gpus[k].alloc_job) : NULL;
            if (j) {
                charge(c, p, j->tenant, dt_s, per_gpu);
                held++;
            }
        }
        double rest = g - (double)held;
        charge(c, p, x->tenant, rest * dt_s, rest * per_gpu);
    }
    if (now - p->booked_mono >= ACC_FLUSH_S * CR_NS_PER_SEC) {
        book(c, p);
        p->booked_mono = now;
    }
}

/* A tenant's burst budget state, cached for one pass. */
typedef struct burst_st {
    char tenant[CTL_NAME_MAX];
    bool over;
    char note[240];
} burst_st;

/* Whether tenant's jobs may cause boots of elastic pool p; else note
 * says why. mu held. */
static bool burst_ok(ctl *c, const pool *p, const char *tenant, burst_st *cache, size_t *ncache,
                     const char **note)
{
    for (size_t i = 0; i < *ncache; i++) {
        if (strcmp(cache[i].tenant, tenant) == 0) {
            *note = cache[i].note;
            return !cache[i].over;
        }
    }
    burst_st tmp, *e = *ncache < BURST_CACHE ? &cache[(*ncache)++] : &tmp;
    memset(e, 0, sizeof *e);
    snprintf(e->tenant, sizeof e->tenant, "%s", tenant);
    double budget = 0, spent = 0;
    char owner[CTL_NAME_MAX];
    if (ctl_tenant_burst(c, tenant, &budget, &spent, owner) && spent >= budget) {
        e->over = true;
        if (budget <= 0) {
            snprintf(e->note, sizeof e->note,
                     "%s: tenant %s has no burst budget (0, set on %s): no node boots for it",
                     p->name, tenant, owner);
        } else {
            snprintf(e->note, sizeof e->note,
                     "%s: tenant %s is over its burst budget (%.2f of %.2f this month, set on "
                     "%s): no node boots for it",
                     p->name, tenant, spent, budget, owner);
        }
    }
    *note = e->note;
    bool ok = !e->over;
    if (e == &tmp) {
        *note = ""; /* (the cache is full: the reason goes without the figures) */
    }
    return ok;
}

/* Step 1 for pool p. mu held. */
static void plan(ctl *c, pool *p, pwork *w, json_t **creq, json_t **dreqs)
{
    int64_t now = cr_mono_ns(), now_wall = cr_now_ns();
    if (!p->listed || now - p->listed_mono >= p->list_s * CR_NS_PER_SEC) {
        bool busy = false;
        for (size_t i = 0; i < p->npn; i++) {
            busy = busy || p->pn[i].inflight;
        }
        if (!busy) {
            w->list = true;
            return; /* a pass that reconciles does nothing else */
        }
    }
    if (p->idle_mult > 1 && now - p->last_regret_mono > 3600 * CR_NS_PER_SEC) {
        p->idle_mult = 1;
    }
    int64_t idle_ns = p->idle_s * p->idle_mult * CR_NS_PER_SEC;
    if (p->billed_mono > 0) {
        bill(c, p, (double)(now - p->billed_mono) / 1e9, now);
    }
    p->billed_mono = now;
    ctl_node shape;
    memset(&shape, 0, sizeof shape);
    snprintf(shape.name, sizeof shape.name, "%.50s-new", p->name);
    shape.labels = p->labels;
    ctl_gpu g1;
    memset(&g1, 0, sizeof g1);
    snprintf(g1.model, sizeof g1.model, "%s", p->gpu_type);
    snprintf(g1.health, sizeof g1.health, "ok");
    shape.gpus = &g1;
    shape.ngpus = 1;
    burst_st bcache[BURST_CACHE];
    size_t nbc = 0;
    const char *bnote;
    size_t nany = 0; /* pending jobs of the pool's shape, wherever they may go */
    size_t slot = ctl_first_active_slot(c);
    for (ctl_job *j; (j = ctl_job_next(c, &slot));) {
        /* a tenant over its burst budget keeps no node either */
        nany += job_wants(c, p, j, &shape) && burst_ok(c, p, j->tenant, bcache, &nbc, &bnote);
    }
    /* 1a. the nodes */
    for (size_t i = 0; i < p->npn; i++) {
        pnode *x = &p->pn[i];
        if (x->inflight) {
            continue;
        }
        ctl_node *n = ctl_node_find(c, x->name);
        switch (x->state) {
        case PN_BOOTING:
            if (n && n->state != NS_LOST && !n->deleting) {
                x->state = PN_UP;
                x->up_mono = x->idle_mono = now;
                p->failures = 0;
                pool_event(p, x->name, "up", "registered %llds after its create",
                           (long long)((now - x->created_mono) / CR_NS_PER_SEC));
            } else if (now - x->created_mono > p->boot_timeout_s * CR_NS_PER_SEC) {
                x->state = PN_DELETING;
                p->failures++;
                p->backoff_until_mono =
                    now + backoff_of(p->backoff_base_s, p->failures) * CR_NS_PER_SEC;
                snprintf(p->last_error, sizeof p->last_error,
                         "%s did not register within boot_timeout_s (%llds)", x->name,
                         (long long)p->boot_timeout_s);
                snprintf(x->why, sizeof x->why, "boot timeout");
                pool_event(p, x->name, "boot-failed",
                           "did not register within boot_timeout_s (%llds): deleting; %d failed "
                           "in a row, next create in %llds",
                           (long long)p->boot_timeout_s, p->failures,
                           (long long)backoff_of(p->backoff_base_s, p->failures));
            }
            break;
        case PN_UP:
            if (!n) {
                x->state = PN_DELETING;
                snprintf(x->why, sizeof x->why, "deleted from the controller");
                pool_event(p, x->name, "delete", "the node left the controller: deleting it");
            } else if (active_jobs(c, n) > 0) {
                x->idle_mono = 0;
            } else if (x->idle_mono == 0) {
                x->idle_mono = now;
            }
            break;
        case PN_DRAINING:
            if (n && (active_jobs(c, n) > 0 || nany > 0)) {
                drain(c, n, false, "");
                x->state = PN_UP;
                x->idle_mono = active_jobs(c, n) > 0 ? 0 : now;
                pool_event(p, x->name, "kept", "%s while it drained: kept",
                           nany ? "demand came back" : "a job was placed on it");
                p->idle_mult = p->idle_mult * 2 > IDLE_MULT_MAX ? IDLE_MULT_MAX : p->idle_mult * 2;
                p->last_regret_mono = now;
            } else if (!n || !n->sched_dirty) {
                x->state = PN_DELETING;
            }
            break;
        case PN_DELETING:
            break;
        }
    }
    /* 1b. the demand */
    ctl_job *dem[DEMAND_MAX];
    size_t nd = 0;
    slot = ctl_first_active_slot(c);
    for (ctl_job *j; nd < DEMAND_MAX && (j = ctl_job_next(c, &slot));) {
        if (!job_wants(c, p, j, &shape)) {
            continue;
        }
        if (now_wall - j->submit_ns < p->pending_s * CR_NS_PER_SEC || node_can_take(c, j)) {
            continue;
        }
        if (!burst_ok(c, p, j->tenant, bcache, &nbc, &bnote)) {
            if (*bnote) {
                reason_note(j, bnote);
            }
            continue;
        }
        dem[nd++] = j;
    }
    /* first fit: the booting nodes' GPUs, then new nodes */
    int64_t bin_free[PASS_MAX * 4];
    const char *bin_name[PASS_MAX * 4];
    size_t nbins = 0;
    for (size_t i = 0; i < p->npn && nbins < PASS_MAX * 2; i++) {
        if (p->pn[i].state == PN_BOOTING) {
            bin_free[nbins] = p->gpus_per_node;
            bin_name[nbins++] = p->pn[i].name;
        }
    }
    size_t nboot_bins = nbins, live = 0;
    for (size_t i = 0; i < p->npn; i++) {
        live += p->pn[i].state != PN_DELETING;
    }
    ctl_job *first_new = NULL;
    for (size_t d = 0; d < nd; d++) {
        ctl_job *j = dem[d];
        /* each of its nodes in a bin of its own (a gang: distinct nodes) */
        int pieces = job_pieces(j), per = job_per_node(j);
        size_t used[PASS_MAX], nused = 0, nbins0 = nbins;
        for (int k = 0; k < pieces; k++) {
            size_t b = 0;
            for (; b < nbins; b++) {
                bool taken = false;
                for (size_t u = 0; u < nused; u++) {
                    taken = taken || used[u] == b;
                }
                if (!taken && bin_free[b] >= per) {
                    break;
                }
            }
            if (b == nbins && nbins < PASS_MAX * 2 &&
                live + (nbins - nboot_bins) < (size_t)p->max_nodes) {
                bin_free[nbins] = p->gpus_per_node;
                bin_name[nbins++] = NULL;
            }
            if (b == nbins) {
                break;
            }
            bin_free[b] -= per;
            used[nused++] = b;
        }
        if (nused < (size_t)pieces) {
            for (size_t u = 0; u < nused; u++) {
                bin_free[used[u]] += per;
            }
            nbins = nbins0; /* the bins it opened go with it */
            char note[200];
            snprintf(note, sizeof note, "%s at max_nodes (%lld)", p->name, (long long)p->max_nodes);
            reason_note(j, note);
            continue;
        }
        if (nbins > nbins0) {
            first_new = first_new ? first_new : j;
        }
        size_t b = used[0];
        for (size_t u = 0; u < nused; u++) {
            b = used[u] >= nboot_bins ? used[u] : b; /* a new node's note before a booting one's */
        }
        char note[300];
        if (b < nboot_bins) {
            const pnode *x = pn_find(p, bin_name[b]);
            int64_t left = p->boot_s - (now - (x ? x->created_mono : now)) / CR_NS_PER_SEC;
            snprintf(note, sizeof note, "waiting for node %s to boot, ~%lld s", bin_name[b],
                     (long long)(left > 0 ? left : 0));
            reason_note(j, note);
        } else if (now < p->refused_until_mono) {
            snprintf(note, sizeof note, "%s: provider refused (%.150s); retry in %llds", p->name,
                     p->refusal, (long long)((p->refused_until_mono - now) / CR_NS_PER_SEC + 1));
            reason_note(j, note);
        } else if (now < p->backoff_until_mono) {
            snprintf(note, sizeof note,
                     "%s: backing off after %d failed boot(s) (%.120s); retry in %llds", p->name,
                     p->failures, p->last_error,
                     (long long)((p->backoff_until_mono - now) / CR_NS_PER_SEC + 1));
            reason_note(j, note);
        } else {
            snprintf(note, sizeof note, "%s: creating a node (%lld x %s, ~%lld s boot)", p->name,
                     (long long)p->gpus_per_node, p->gpu_type, (long long)p->boot_s);
            reason_note(j, note);
        }
    }
    size_t want = nbins - nboot_bins;
    bool for_min = false;
    if (live + want < (size_t)p->min_nodes) {
        want = (size_t)p->min_nodes - live;
        for_min = true;
    }
    if (now < p->refused_until_mono || now < p->backoff_until_mono) {
        want = 0;
    }
    if (want > PASS_MAX) {
        want = PASS_MAX;
    }
    if (want > 0 && p->last_delete_mono > 0 && now - p->last_delete_mono < 2 * idle_ns &&
        !for_min) {
        p->idle_mult = p->idle_mult * 2 > IDLE_MULT_MAX ? IDLE_MULT_MAX : p->idle_mult * 2;
        p->last_regret_mono = now;
        pool_event(p, NULL, "hysteresis",
                   "demand came back %llds after a delete: idle time now %llds",
                   (long long)((now - p->last_delete_mono) / CR_NS_PER_SEC),
                   (long long)(p->idle_s * p->idle_mult));
    }
    cr_store_txn *txn = want ? cr_store_txn_new() : NULL;
    for (size_t k = 0; k < want; k++) {
        char name[CTL_NAME_MAX];
        do {
            snprintf(name, sizeof name, "%.40s-%lld", p->name, (long long)++p->seq);
        } while (ctl_node_find(c, name) || pn_find(p, name));
        if (ctl_boot_mint(c, txn, name, p->boot_timeout_s + 60, w->ctoken[w->ncreate]) != 0) {
            break;
        }
        snprintf(w->cname[w->ncreate++], CTL_NAME_MAX, "%s", name);
        pnode *x = pn_add(p, name, PN_BOOTING, now);
        x->inflight = true;
        if (first_new) {
            snprintf(x->tenant, sizeof x->tenant, "%s", first_new->tenant);
            snprintf(x->why, sizeof x->why, "job %lld (%d x %s) pending %llds, %zu job(s) waiting",
                     (long long)first_new->id, first_new->gpus, first_new->gpu_type,
                     (long long)((now_wall - first_new->submit_ns) / CR_NS_PER_SEC), nd);
            char ev[300];
            snprintf(ev, sizeof ev, "pool %s creates node %s for it", p->name, name);
            cr_store_txn_event(txn, first_new->id, now_wall, "pool", ev);
        } else {
            snprintf(x->why, sizeof x->why, "min_nodes %lld", (long long)p->min_nodes);
        }
        pool_event(p, name, "create", "%s", x->why);
        p->creates++;
    }
    if (txn) {
        cr_store_submit(c->store, txn, NULL, NULL);
    }
    if (w->ncreate) {
        json_t *nodes = json_array();
        for (size_t k = 0; k < w->ncreate; k++) {
            json_array_append_new(nodes, json_pack("{s:s,s:s}", "name", w->cname[k],
                                                   "bootstrap_token", w->ctoken[k]));
        }
        *creq = json_pack("{s:i,s:s,s:s,s:I,s:o}", "version", 1, "op", "create", "pool", p->name,
                          "count", (json_int_t)w->ncreate, "nodes", nodes);
    }
    /* 1c. scale down: one idle node a pass, only with no demand of the shape */
    live += w->ncreate;
    if (nany == 0 && live > (size_t)p->min_nodes) {
        pnode *old = NULL;
        for (size_t i = 0; i < p->npn; i++) {
            pnode *x = &p->pn[i];
            if (x->state == PN_UP && !x->inflight && x->idle_mono > 0 &&
                now - x->idle_mono >= idle_ns &&
                now - x->created_mono >= p->min_lifetime_s * CR_NS_PER_SEC &&
                (!old || x->idle_mono < old->idle_mono)) {
                old = x;
            }
        }
        ctl_node *n = old ? ctl_node_find(c, old->name) : NULL;
        if (n) {
            char why[200];
            snprintf(why, sizeof why, "pool %s: idle %llds, being deleted", p->name,
                     (long long)((now - old->idle_mono) / CR_NS_PER_SEC));
            drain(c, n, true, why);
            old->state = PN_DRAINING;
            p->last_delete_mono = now; /* the decision: a create after it is a regret */
            snprintf(old->why, sizeof old->why,
                     "idle %llds (idle time %llds), %zu node(s) over min",
                     (long long)((now - old->idle_mono) / CR_NS_PER_SEC),
                     (long long)(idle_ns / CR_NS_PER_SEC), live - (size_t)p->min_nodes);
            pool_event(p, old->name, "drain", "%s", old->why);
        }
    }
    /* 1d. deletes due */
    for (size_t i = 0; i < p->npn && w->ndelete < PASS_MAX; i++) {
        pnode *x = &p->pn[i];
        if (x->state != PN_DELETING || x->inflight || now < x->retry_mono) {
            continue;
        }
        ctl_node *n = ctl_node_find(c, x->name);
        if (n && active_jobs(c, n) > 0) {
            continue; /* (a forced admin delete requeues them first) */
        }
        if (n && !n->drained) {
            drain(c, n, true, "pool: being deleted");
        }
        x->inflight = true;
        snprintf(w->dname[w->ndelete], CTL_NAME_MAX, "%s", x->name);
        snprintf(w->did[w->ndelete], sizeof w->did[0], "%s", x->id);
        dreqs[w->ndelete] = json_pack("{s:i,s:s,s:s,s:[{s:s,s:s}]}", "version", 1, "op", "delete",
                                      "pool", p->name, "nodes", "name", x->name, "id", x->id);
        w->ndelete++;
    }
}

/* The controller forgets node name (stored first). mu held on entry and
 * exit; released while the commit is waited for. */
static void forget_node(ctl *c, const char *name)
{
    ctl_node *n = ctl_node_find(c, name);
    if (!n || n->deleting || active_jobs(c, n) > 0) {
        return;
    }
    n->deleting = true;
    cr_store_txn *txn = cr_store_txn_new();
    cr_store_txn_del(txn, "node", name);
    cr_store_txn_del(txn, "nodetoken", name);
    cr_store_txn_del(txn, "nodelabels", name);
    ctl_wait w;
    ctl_wait_submit(c, &w, txn);
    pthread_mutex_unlock(&c->mu);
    int st = ctl_wait_end(&w);
    pthread_mutex_lock(&c->mu);
    n = ctl_node_find(c, name);
    if (!n) {
        return;
    }
    if (st != 0) {
        n->deleting = false;
        cr_warn("pool: node=%s: its delete was not stored: %s", name, cr_strerror(st));
        return;
    }
    while (n->njobs > 0) {
        ctl_node_del_job(n, n->jobs[0]);
    }
    cr_auth_table_revoke_node(c->auth, name);
    json_object_del(c->node_labels, name);
    ctl_node_bump(c, n);
    ctl_node_remove(c, n);
}

/* Step 3 for pool p. mu held. */
static void apply(ctl *c, pool *p, pwork *w)
{
    int64_t now = cr_mono_ns();
    if (w->list) {
        bool first = !p->listed;
        p->listed = true;
        p->listed_mono = now;
        if (w->lst.rc != 0) {
            pool_event(p, NULL, "list-failed", "provider list: %s", w->lst.msg);
        }
        /* Nodes the provider no longer runs (reclaimed, deleted behind our
         * back): the controller forgets them (their jobs are requeued as on
         * a lost node once it is lost). */
        for (size_t k = 0; !first && w->lst.rc == 0 && k < p->npn; k++) {
            pnode *y = &p->pn[k];
            bool there = false;
            size_t i;
            json_t *x;
            json_array_foreach(w->lst.nodes, i, x)
            {
                there = there || strcmp(jstr(x, "name"), y->name) == 0;
            }
            if (!there && y->state != PN_DELETING && !y->inflight) {
                y->state = PN_DELETING;
                snprintf(y->why, sizeof y->why, "gone from the provider's list");
                pool_event(p, y->name, "vanished",
                           "not in the provider's list any more: deleting it here");
            }
        }
        size_t i;
        json_t *x;
        json_array_foreach(w->lst.nodes, i, x)
        {
            const char *name = json_string_value(json_object_get(x, "name"));
            const char *id = json_string_value(json_object_get(x, "id"));
            if (!name || !ctl_name_ok(name) || pn_find(p, name)) {
                continue;
            }
            ctl_node *n = ctl_node_find(c, name);
            pnode *y = pn_add(p, name, n ? PN_UP : PN_BOOTING, now);
            snprintf(y->id, sizeof y->id, "%s", id ? id : "");
            y->up_mono = y->idle_mono = n ? now : 0;
            snprintf(y->why, sizeof y->why, "adopted from the provider's list");
            pool_event(p, name, "adopted", "listed by the provider at start (%s)",
                       n ? "registered" : "not registered: deleted unless it registers");
        }
    }
    if (w->ncreate) {
        pcall *r = &w->create;
        size_t got = json_array_size(r->nodes);
        for (size_t k = 0; k < w->ncreate; k++) {
            pnode *x = pn_find(p, w->cname[k]);
            if (!x) {
                continue;
            }
            x->inflight = false;
            x->created_mono = now; /* the boot timeout runs from the answer */
            if (r->rc == CR_ENOSPC) {
                token_forget(c, x->name);
                pn_drop(p, x);
                continue;
            }
            if (r->rc != 0) {
                x->state = PN_DELETING; /* it may exist in part: never leaked */
                snprintf(x->why, sizeof x->why, "create failed");
                continue;
            }
            bool listed = false;
            for (size_t i = 0; i < got; i++) {
                json_t *y = json_array_get(r->nodes, i);
                if (strcmp(jstr(y, "name"), x->name) == 0) {
                    listed = true;
                    snprintf(x->id, sizeof x->id, "%s", jstr(y, "id"));
                }
            }
            if (!listed) {
                x->state = PN_DELETING;
                snprintf(x->why, sizeof x->why, "not in the create answer");
            }
        }
        if (r->rc == CR_ENOSPC) {
            p->refusals++;
            int64_t s = p->refusal_retry_s;
            p->refused_until_mono = now + s * CR_NS_PER_SEC;
            snprintf(p->refusal, sizeof p->refusal, "%s", r->msg);
            pool_event(p, NULL, "refused", "provider refused %zu node(s): %s; retry in %llds",
                       w->ncreate, r->msg, (long long)s);
        } else if (r->rc != 0) {
            p->failures++;
            p->backoff_until_mono =
                now + backoff_of(p->backoff_base_s, p->failures) * CR_NS_PER_SEC;
            snprintf(p->last_error, sizeof p->last_error, "create: %.200s", r->msg);
            pool_event(p, NULL, "create-failed",
                       "provider create of %zu node(s): %s; deleting them, next try in %llds",
                       w->ncreate, r->msg, (long long)backoff_of(p->backoff_base_s, p->failures));
        } else {
            p->refusals = 0;
            p->refusal[0] = '\0';
            size_t i;
            json_t *y;
            json_array_foreach(r->nodes, i, y)
            {
                const char *name = json_string_value(json_object_get(y, "name"));
                bool asked = false;
                for (size_t k = 0; name && k < w->ncreate; k++) {
                    asked = asked || strcmp(name, w->cname[k]) == 0;
                }
                if (!asked && name && ctl_name_ok(name) && !pn_find(p, name)) {
                    pnode *z = pn_add(p, name, PN_DELETING, now);
                    snprintf(z->id, sizeof z->id, "%s", jstr(y, "id"));
                    snprintf(z->why, sizeof z->why, "not asked for");
                    pool_event(p, name, "delete",
                               "the provider returned a node it was not asked for: deleting it");
                } else if (!asked) {
                    pool_event(p, NULL, "bad-answer",
                               "the provider returned a node it was not asked for, unnamed");
                }
            }
        }
    }
    for (size_t k = 0; k < w->ndelete; k++) {
        pnode *x = pn_find(p, w->dname[k]);
        pcall *r = &w->del[k];
        if (!x) {
            continue;
        }
        x->inflight = false;
        if (r->rc != 0) {
            x->retry_mono = now + 3 * p->backoff_base_s * CR_NS_PER_SEC;
            pool_event(p, x->name, "delete-failed", "provider delete: %s; retry in %llds", r->msg,
                       (long long)(3 * p->backoff_base_s));
            continue;
        }
        char name[CTL_NAME_MAX], why[200];
        snprintf(name, sizeof name, "%s", x->name);
        snprintf(why, sizeof why, "%s", x->why);
        if (x->up_mono == 0) {
            token_forget(c, name);
        }
        pn_drop(p, x);
        p->deletes++;
        pool_event(p, name, "deleted", "%s", why[0] ? why : "deleted");
        forget_node(c, name); /* releases mu for the commit */
    }
}

static void pass(ctl *c, struct ctl_pools *ps)
{
    for (size_t i = 0; i < ps->n; i++) {
        pool *p = &ps->p[i];
        if (p->power_budget_w > 0) {
            pthread_mutex_lock(&c->mu);
            ctl__pools_caps_update(c, p);
            pthread_mutex_unlock(&c->mu);
        }
        if (!p->provider[0]) {
            ctl__pools_power_pass(c, p);
            continue;
        }
        pwork *w = cr_calloc(1, sizeof *w);
        json_t *creq = NULL, *dreqs[PASS_MAX] = {NULL};
        pthread_mutex_lock(&c->mu);
        plan(c, p, w, &creq, dreqs);
        pthread_mutex_unlock(&c->mu);
        json_t *cfg = p->pconfig ? p->pconfig : NULL;
        if (w->list) {
            json_t *req = json_pack("{s:i,s:s,s:s}", "version", 1, "op", "list", "pool", p->name);
            if (cfg) {
                json_object_set(req, "config", cfg);
            }
            json_object_set_new(req, "server", json_string(ps->server));
            provider_run(p, p->provider, req, &w->lst);
            json_decref(req);
        }
        if (creq) {
            if (cfg) {
                json_object_set(creq, "config", cfg);
            }
            json_object_set_new(creq, "server", json_string(ps->server));
            json_object_set_new(creq, "gpu_type", json_string(p->gpu_type));
            json_object_set_new(creq, "gpus_per_node", json_integer(p->gpus_per_node));
            json_object_set_new(creq, "boot_s", json_integer(p->boot_s));
            json_t *labels = json_deep_copy(p->labels);
            json_object_set_new(labels, "pool", json_string(p->name));
            json_object_set_new(creq, "labels", labels);
            provider_run(p, p->provider, creq, &w->create);
            json_decref(creq);
        }
        for (size_t k = 0; k < w->ndelete; k++) {
            if (cfg) {
                json_object_set(dreqs[k], "config", cfg);
            }
            provider_run(p, p->provider, dreqs[k], &w->del[k]);
            json_decref(dreqs[k]);
        }
        pthread_mutex_lock(&c->mu);
        apply(c, p, w);
        pthread_mutex_unlock(&c->mu);
        json_decref(w->create.nodes);
        json_decref(w->lst.nodes);
        for (size_t k = 0; k < w->ndelete; k++) {
            json_decref(w->del[k].nodes);
        }
        sodium_memzero(w->ctoken, sizeof w->ctoken);
        free(w);
    }
}

int64_t ctl_pools_max_gpus_per_node(const struct ctl *c)
{
    const struct ctl_pools *ps = c->pools;
    int64_t m = 0;
    for (size_t i = 0; ps && i < ps->n; i++) {
        m = ps->p[i].gpus_per_node > m ? ps->p[i].gpus_per_node : m;
    }
    return m;
}

/* ------------------------------------------------------------------------ */
/* Thread, start and stop                                                   */

static void *pools_main(void *arg)
{
    ctl *c = arg;
    struct ctl_pools *ps = c->pools;
    pthread_mutex_lock(&ps->m);
    while (!ps->stop) {
        pthread_mutex_unlock(&ps->m);
        pass(c, ps);
        pthread_mutex_lock(&ps->m);
        if (ps->stop) {
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&ps->cv, &ps->m, &ts);
    }
    pthread_mutex_unlock(&ps->m);
    return NULL;
}

int ctl_pools_start(ctl *c)
{
    size_t n = json_array_size(c->cfg.pools);
    if (n == 0) {
        return 0;
    }
    struct ctl_pools *ps = cr_calloc(1, sizeof *ps);
    ps->p = cr_calloc(n, sizeof *ps->p);
    for (size_t i = 0; i < n; i++) {
        cr_json_err err;
        if (pool_parse(json_array_get(c->cfg.pools, i), "pools", &ps->p[i], &err) != 0) {
            cr_error("pools: %s", err.message);
            for (size_t k = 0; k < i; k++) {
                pool_fini(&ps->p[k]);
            }
            free(ps->p);
            free(ps);
            return CR_EINVAL;
        }
        ps->n++;
    }
    if (c->cfg.advertise_url[0]) {
        snprintf(ps->server, sizeof ps->server, "%s", c->cfg.advertise_url);
    } else {
        bool any =
            strcmp(c->cfg.listen_addr, "0.0.0.0") == 0 || strcmp(c->cfg.listen_addr, "::") == 0;
        bool v6 = !any && strchr(c->cfg.listen_addr, ':') != NULL;
        snprintf(ps->server, sizeof ps->server, "%s://%s%s%s:%u",
                 c->cfg.tls_cert[0] ? "https" : "http", v6 ? "[" : "",
                 any ? "127.0.0.1" : c->cfg.listen_addr, v6 ? "]" : "",
                 c->http ? (unsigned)cr_http_server_port(c->http) : (unsigned)c->cfg.port);
    }
    pthread_mutex_init(&ps->m, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ps->cv, &ca);
    pthread_condattr_destroy(&ca);
    c->pools = ps;
    if (pthread_create(&ps->th, NULL, pools_main, c) != 0) {
        cr_error("pools: cannot start the pool thread");
        ctl_pools_stop(c);
        return CR_EIO;
    }
    ps->started = true;
    cr_info("pools: %zu pool(s), agents join at %s", ps->n, ps->server);
    return 0;
}

void ctl_pools_stop(ctl *c)
{
    struct ctl_pools *ps = c->pools;
    if (!ps) {
        return;
    }
    if (ps->started) {
        pthread_mutex_lock(&ps->m);
        ps->stop = true;
        pthread_cond_broadcast(&ps->cv);
        pthread_mutex_unlock(&ps->m);
        pthread_join(ps->th, NULL);
    }
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < ps->n; i++) {
        book(c, &ps->p[i]); /* the cost not yet booked */
    }
    c->pools = NULL;
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < ps->n; i++) {
        pool_fini(&ps->p[i]);
    }
    free(ps->p);
    pthread_mutex_destroy(&ps->m);
    pthread_cond_destroy(&ps->cv);
    free(ps);
}

/* ------------------------------------------------------------------------ */
/* GET /v1/pools                                                            */

static bool static_member(ctl *c, const pool *p, const ctl_node *n)
{
    const char *lab = json_string_value(json_object_get(n->labels, "pool"));
    const char *adm = json_string_value(json_object_get(ctl_node_labels(c, n->name), "pool"));
    if ((adm && strcmp(adm, p->name) == 0) || (!adm && lab && strcmp(lab, p->name) == 0)) {
        return true;
    }
    size_t i;
    json_t *x;
    json_array_foreach(p->patterns, i, x)
    {
        if (fnmatch(json_string_value(x), n->name, 0) == 0) {
            return true;
        }
    }
    return false;
}

static const char *node_state(const ctl_node *n)
{
    return n->deleting ? "deleting" : ctl_node_state_names[n->state];
}

static json_t *pool_json(ctl *c, const pool *p, bool admin)
{
    int64_t now = cr_mono_ns();
    char t[64];
    json_t *nodes = json_array();
    size_t counts[4] = {0};
    for (size_t i = 0; i < p->npn; i++) {
        const pnode *x = &p->pn[i];
        const ctl_node *n = ctl_node_find(c, x->name);
        counts[x->state]++;
        json_t *o = json_pack("{s:s,s:s,s:I,s:s}", "name", x->name, "state", pn_names[x->state],
                              "age_s", (json_int_t)((now - x->created_mono) / CR_NS_PER_SEC),
                              "node_state", n ? node_state(n) : "absent");
        if (x->state == PN_UP && x->idle_mono > 0) {
            json_object_set_new(o, "idle_s", json_integer((now - x->idle_mono) / CR_NS_PER_SEC));
        }
        if (n) {
            json_object_set_new(o, "jobs", json_integer((json_int_t)active_jobs(c, n)));
        }
        if (admin) {
            json_object_set_new(o, "why", json_string(x->why));
            json_object_set_new(o, "id", json_string(x->id));
        }
        json_array_append_new(nodes, o);
    }
    for (size_t i = 0; i < c->nnodes; i++) {
        const ctl_node *n = c->nodes[i];
        if (!pn_find((pool *)p, n->name) && static_member(c, p, n)) {
            json_array_append_new(nodes, json_pack("{s:s,s:s,s:s,s:I}", "name", n->name, "state",
                                                   node_state(n), "node_state", node_state(n),
                                                   "jobs", (json_int_t)active_jobs(c, n)));
        }
    }
    json_t *o = json_pack(
        "{s:s,s:s,s:I,s:I,s:I,s:f,s:I,s:I,s:I,s:I,s:O,s:b,s:o,s:{s:I,s:I,s:I,s:I},s:I,s:I,s:i}",
        "name", p->name, "gpu_type", p->gpu_type, "gpus_per_node", (json_int_t)p->gpus_per_node,
        "min_nodes", (json_int_t)p->min_nodes, "max_nodes", (json_int_t)p->max_nodes,
        "cost_per_hour", p->cost_per_hour, "boot_s", (json_int_t)p->boot_s, "boot_timeout_s",
        (json_int_t)p->boot_timeout_s, "idle_s", (json_int_t)(p->idle_s * p->idle_mult),
        "min_lifetime_s", (json_int_t)p->min_lifetime_s, "labels", p->labels, "elastic",
        p->provider[0] != 0, "nodes", nodes, "counts", "booting", (json_int_t)counts[PN_BOOTING],
        "up", (json_int_t)counts[PN_UP], "draining", (json_int_t)counts[PN_DRAINING], "deleting",
        (json_int_t)counts[PN_DELETING], "creates", (json_int_t)p->creates, "deletes",
        (json_int_t)p->deletes, "failures", p->failures);
    json_object_set_new(o, "node_hours", json_real(p->node_s / 3600.0));
    json_object_set_new(o, "cost", json_real(p->node_s / 3600.0 * p->cost_per_hour));
    if (now < p->backoff_until_mono) {
        json_object_set_new(o, "backoff_s",
                            json_integer((p->backoff_until_mono - now) / CR_NS_PER_SEC + 1));
        json_object_set_new(o, "last_error", json_string(p->last_error));
    }
    if (now < p->refused_until_mono) {
        json_object_set_new(o, "refused", json_string(p->refusal));
        json_object_set_new(o, "retry_s",
                            json_integer((p->refused_until_mono - now) / CR_NS_PER_SEC + 1));
    }
    ctl__pools_power_json(c, p, o);
    if (admin) {
        json_object_set_new(o, "provider", json_string(p->provider));
        json_t *ev = json_array();
        size_t first = p->nev > EVENTS_MAX ? p->nev - EVENTS_MAX : 0;
        for (size_t i = first; i < p->nev; i++) {
            const pevent *e = &p->ev[i % EVENTS_MAX];
            json_array_append_new(ev, json_pack("{s:s,s:s,s:s,s:s}", "time",
                                                ctl_time_str(e->wall_ns, t, sizeof t), "node",
                                                e->node, "what", e->what, "why", e->why));
        }
        json_object_set_new(o, "events", ev);
    }
    return o;
}

void ctl_route_pools(ctl *c, cr_http_req *req, const cr_principal *p, char **seg, size_t nseg)
{
    cr_http_set_route(req, nseg == 2 ? "/v1/pools" : "/v1/pools/{name}");
    if (strcmp(cr_http_method(req), "GET") != 0) {
        ctl_reply_err(req, 405, CR_ENOTSUP, NULL, "method %s not allowed here",
                      cr_http_method(req));
        return;
    }
    bool admin = p->role == CR_ROLE_ADMIN;
    pthread_mutex_lock(&c->mu);
    struct ctl_pools *ps = c->pools;
    json_t *items = json_array();
    for (size_t i = 0; ps && i < ps->n; i++) {
        if (nseg == 3 && strcmp(seg[2], ps->p[i].name) != 0) {
            continue;
        }
        json_array_append_new(items, pool_json(c, &ps->p[i], admin));
    }
    pthread_mutex_unlock(&c->mu);
    if (nseg == 3) {
        json_t *one = json_incref(json_array_get(items, 0));
        json_decref(items);
        if (!one) {
            ctl_reply_err(req, 404, CR_ENOENT, NULL, "pool '%.64s' not found", seg[2]);
            return;
        }
        ctl_reply_json(req, 200, one);
        return;
    }
    size_t n = json_array_size(items);
    ctl_reply_json(req, 200, json_pack("{s:o,s:I}", "items", items, "count", (json_int_t)n));
}

/* ------------------------------------------------------------------------ */
/* /metrics                                                                 */

static void pool_sample(cr_buf *b, const char *name, const char *pname, const char *state, double v)
{
    cr_buf l;
    cr_buf_init(&l);
    cr_prom_label(&l, "pool", pname);
    if (state) {
        cr_prom_label(&l, "state", state);
    }
    cr_prom_sample(b, name, cr_buf_str(&l), v);
    cr_buf_fini(&l);
}

void ctl_pools_metrics(ctl *c, cr_buf *b)
{
    pthread_mutex_lock(&c->mu);
    struct ctl_pools *ps = c->pools;
    if (!ps) {
        pthread_mutex_unlock(&c->mu);
        return;
    }
    cr_prom_family(b, "corral_pool_nodes", "gauge",
                   "A pool's provider nodes by state (booting, up, draining, deleting).");
    for (size_t i = 0; i < ps->n; i++) {
        size_t cnt[4] = {0};
        for (size_t k = 0; k < ps->p[i].npn; k++) {
            cnt[ps->p[i].pn[k].state]++;
        }
        for (int s = 0; s < 4; s++) {
            pool_sample(b, "corral_pool_nodes", ps->p[i].name, pn_names[s], (double)cnt[s]);
        }
    }
    cr_prom_family(b, "corral_pool_creates_total", "counter",
                   "Nodes a pool asked its provider for.");
    for (size_t i = 0; i < ps->n; i++) {
        pool_sample(b, "corral_pool_creates_total", ps->p[i].name, NULL, (double)ps->p[i].creates);
    }
    cr_prom_family(b, "corral_pool_deletes_total", "counter", "Nodes a pool's provider deleted.");
    for (size_t i = 0; i < ps->n; i++) {
        pool_sample(b, "corral_pool_deletes_total", ps->p[i].name, NULL, (double)ps->p[i].deletes);
    }
    cr_prom_family(b, "corral_pool_failures", "gauge",
                   "Failed boots and creates in a row (backoff doubles with each).");
    for (size_t i = 0; i < ps->n; i++) {
        pool_sample(b, "corral_pool_failures", ps->p[i].name, NULL, (double)ps->p[i].failures);
    }
    cr_prom_family(b, "corral_pool_cost_total", "counter",
                   "Cost of the node-hours a pool bought since the controller started.");
    for (size_t i = 0; i < ps->n; i++) {
        pool_sample(b, "corral_pool_cost_total", ps->p[i].name, NULL,
                    ps->p[i].node_s / 3600.0 * ps->p[i].cost_per_hour);
    }
    pthread_mutex_unlock(&c->mu);
}

/* ------------------------------------------------------------------------ */
/* For ctl_pools_power.c                                                    */

void ctl__pools_event(pool *p, const char *node, const char *what, const char *fmt, ...)
{
    char why[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    pool_event(p, node, what, "%s", why);
}

void ctl__pools_run(const pool *p, const char *prog, const json_t *req, pcall *out)
{
    provider_run(p, prog, req, out);
}

size_t ctl__pools_active_jobs(ctl *c, const ctl_node *n)
{
    return active_jobs(c, n);
}

void ctl__pools_drain(ctl *c, ctl_node *n, bool on, const char *why)
{
    drain(c, n, on, why);
}

void ctl__pools_reason_note(ctl_job *j, const char *note)
{
    reason_note(j, note);
}

bool ctl__pools_static_member(ctl *c, const pool *p, const ctl_node *n)
{
    return static_member(c, p, n);
}

bool ctl__pools_job_pending(const pool *p, const ctl_job *j, int64_t now_wall)
{
    return job_may_want(j) && now_wall - j->submit_ns >= p->pending_s * CR_NS_PER_SEC;
}

int ctl__pools_job_pieces(const ctl_job *j)
{
    return job_pieces(j);
}

int ctl__pools_job_per_node(const ctl_job *j)
{
    return job_per_node(j);
}
