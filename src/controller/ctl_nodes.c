/*
 * ctl_nodes.c - nodes and their agents: register, status (heartbeat),
 * desired state (long-poll), drain/undrain, the lost-node timer.
 *
 * Desired state, not commands: each node has a version that changes
 * whenever the set of jobs placed on it (or their action) changes. A
 * long-poll with the current version waits (suspended, no thread) until
 * the version moves or its wait runs out; either way it gets the whole
 * document, so a lost answer costs nothing. The document and the polls'
 * answers: ctl_desired.c.
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_parse.h"
#include "cr_time.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void idle_sample(ctl *c, cr_store_txn *txn, ctl_job *j, size_t held, double util_max,
                        double dt, int64_t now_mono, int64_t now);

static void node_free(ctl_node *n)
{
    json_decref(n->labels);
    json_decref(n->data_held);
    for (size_t i = 0; i < n->ngpus; i++) {
        json_decref(n->gpus[i].mig);
        json_decref(n->gpus[i].mig_want);
    }
    free(n->gpus);
    free(n->jobs);
    free(n);
}

void ctl_nodes_free(ctl *c)
{
    for (size_t i = 0; i < c->nnodes; i++) {
        node_free(c->nodes[i]);
    }
    free(c->nodes);
    c->nodes = NULL;
    c->nnodes = 0;
    free(c->node_slots);
    c->node_slots = NULL;
    c->node_slots_cap = 0;
}

/* The node's isolation as its agent said it ("unknown": an agent too old to say). */
static json_t *iso_json(const ctl_node *n)
{
    static const char *const keys[] = {"uid", "devices", "memory", "cpu", "pids"};
    json_t *v = json_object();
    for (int i = 0; i < 5; i++) {
        json_object_set_new(v, keys[i], json_string(*n->iso[i] ? n->iso[i] : "unknown"));
    }
    json_object_set_new(v, "detail", json_string(n->iso_detail));
    return v;
}

/* p: the reader (NULL: everything, for admins and agents); a user sees the
 * jobs of other tenants only as "busy" GPUs, without their ids. */
static json_t *node_json(ctl *c, const ctl_node *n, bool detail, const cr_principal *p)
{
    json_t *gpus = json_array();
    uint32_t free_gpus = 0;
    for (size_t i = 0; i < n->ngpus; i++) {
        const ctl_gpu *g = &n->gpus[i];
        bool ok = strcmp(g->health, "ok") == 0;
        if (ok && !g->alloc_job && n->state == NS_UP) {
            free_gpus++;
        }
        bool seen = !g->alloc_job || ctl_job_visible_to(c, g->alloc_job, p);
        json_t *v = json_pack(
            "{s:i,s:s,s:s,s:I,s:i,s:s,s:s,s:I,s:f,s:f,s:f,s:I}", "index", g->index, "uuid", g->uuid,
            "model", g->model, "mem_bytes", (json_int_t)g->mem_bytes, "nvlink_domain", g->nvlink,
            "health", g->health, "reason", g->reason, "job", (json_int_t)(seen ? g->alloc_job : 0),
            "util_pct", g->util_pct, "temp_c", g->temp_c, "power_w", g->power_w, "mem_used_bytes",
            (json_int_t)g->mem_used_bytes);
        if (!seen) {
            json_object_set_new(v, "busy", json_true());
        }
        if (g->power_cap_w > 0) {
            json_object_set_new(v, "power_cap_w", json_integer(g->power_cap_w));
        }
        if (detail && g->mig) {
            json_object_set(v, "mig", g->mig);
        }
        json_object_set_new(v, "shareable", json_boolean(g->shareable));
        ctl_share_json(c, n, g, v); /* its fractional tasks */
        if (ok && !g->alloc_job && n->state == NS_UP && json_object_get(v, "shared_jobs")) {
            free_gpus--; /* not free for a whole job while shared */
        }
        /* MIG instances in use on this GPU (it is then partly allocated) */
        json_int_t mig_busy = 0;
        for (size_t q = 0; g->mig && q < n->njobs; q++) {
            const ctl_job *j = ctl_job_get(c, n->jobs[q]);
            if (j && j->state != JS_RUNNING && j->state != JS_COMPLETING) {
                j = NULL;
            }
            for (size_t k = 0; j && k < j->nplace; k++) {
                if (*j->place[k].mig_profile && strcmp(j->place[k].node, n->name) == 0) {
                    for (size_t e = 0; e < j->place[k].ngpus; e++) {
                        mig_busy += j->place[k].gpus[e] == g->index;
                    }
                }
            }
        }
        json_object_set_new(v, "mig_busy", json_integer(mig_busy));
        json_array_append_new(gpus, v);
    }
    /* A start being stored is not running here yet (the job view shows
     * it pending): listed apart, as "starting". */
    json_t *jobs = json_array(), *starting = NULL;
    size_t hidden = 0;
    for (size_t i = 0; i < n->njobs; i++) {
        if (!ctl_job_visible_to(c, n->jobs[i], p)) {
            hidden++;
            continue;
        }
        const ctl_job *j = ctl_job_get(c, n->jobs[i]);
        if (j && j->start_unstored) {
            if (!starting) {
                starting = json_array();
            }
            json_array_append_new(starting, json_integer(n->jobs[i]));
        } else {
            json_array_append_new(jobs, json_integer(n->jobs[i]));
        }
    }
    int64_t ago = (cr_mono_ns() - n->last_seen_ns) / CR_NS_PER_SEC;
    json_t *nj =
        json_pack("{s:s,s:s,s:s,s:s,s:i,s:s,s:o,s:o,s:i,s:I,s:I,s:I,s:b,s:b,s:b,s:o}", "name",
                  n->name, "state", ctl_node_state_names[n->state], "reason", n->reason, "addr",
                  n->addr, "port", n->port, "rack", n->rack, "gpus", gpus, "jobs", jobs, "cpus",
                  n->cpus, "mem_bytes", (json_int_t)n->mem_bytes, "last_seen_s", (json_int_t)ago,
                  "free_gpus", (json_int_t)free_gpus, "drained", n->drained, "pending_approval",
                  n->pending_approval, "tls", n->tls, "isolation", iso_json(n));
    json_object_set_new(nj, "labels", n->labels ? json_deep_copy(n->labels) : json_object());
    /* objects its data cache holds (docs/data.md; a count: which they are
     * is the tenants' business) */
    json_object_set_new(nj, "data_held", json_integer((json_int_t)json_array_size(n->data_held)));
    if (hidden) {
        json_object_set_new(nj, "other_jobs", json_integer((json_int_t)hidden));
    }
    if (starting) {
        json_object_set_new(nj, "starting_jobs", starting);
    }
    return nj;
}

/* node_json with the node's labels (ctl_lifecycle.c). mu held. */
static json_t *node_json_labelled(ctl *c, const ctl_node *n, bool detail, const cr_principal *p)
{
    json_t *v = node_json(c, n, detail, p); /* labels: the agent's (--label) */
    json_t *admin = ctl_node_labels(c, n->name);
    if (admin) { /* an admin's (corral nodes label) win */
        json_object_update(json_object_get(v, "labels"), admin);
    }
    return v;
}

static void node_persist(cr_store_txn *txn, const ctl_node *n)
{
    json_t *gpus = json_array();
    for (size_t i = 0; i < n->ngpus; i++) {
        const ctl_gpu *g = &n->gpus[i];
        json_t *v = json_pack("{s:i,s:s,s:s,s:I,s:i,s:s,s:s}", "index", g->index, "uuid", g->uuid,
                              "model", g->model, "mem_bytes", (json_int_t)g->mem_bytes,
                              "nvlink_domain", g->nvlink, "health", g->health, "reason", g->reason);
        if (g->mig) {
            json_object_set(v, "mig", g->mig);
        }
        if (g->shareable) {
            json_object_set_new(v, "shareable", json_true());
        }
        if (g->mig_dynamic) {
            json_object_set_new(v, "mig_dynamic", json_true());
        }
        json_array_append_new(gpus, v);
    }
    json_t *doc =
        json_pack("{s:s,s:s,s:i,s:s,s:o,s:i,s:I,s:b,s:s}", "node", n->name, "addr", n->addr, "port",
                  n->port, "rack", n->rack, "gpus", gpus, "cpus", n->cpus, "mem_bytes",
                  (json_int_t)n->mem_bytes, "drained", n->drained, "reason", n->reason);
    if (n->labels) {
        json_object_set(doc, "labels", n->labels);
    }
    json_object_set_new(doc, "isolation", iso_json(n));
    json_object_set_new(doc, "tls", json_boolean(n->tls));
    if (*n->unfit) {
        json_object_set_new(doc, "unfit", json_string(n->unfit));
    }
    /* "lost" survives a restart: a lost node stays out of placement until
     * its agent reports again. */
    json_object_set_new(doc, "lost", json_boolean(n->state == NS_LOST || n->loss_pending));
    json_object_set_new(doc, "pending_approval", json_boolean(n->pending_approval));
    char *s = json_dumps(doc, JSON_COMPACT);
    cr_store_txn_put(txn, "node", n->name, s);
    free(s);
    json_decref(doc);
}

/*
 * An agent's registered address: the controller connects there (logs, a
 * service's endpoints, gang peers' MASTER_ADDR), so it must be one host
 * (a DNS name or an IPv4/IPv6 literal; the port is the field "port"), and
 * not a link-local address (169.254.0.0/16, fe80::/10: where clouds serve
 * their instance metadata) unless the config allows one
 * (agent_addr_link_local). Names are not resolved here.
 */
static int addr_check(const char *addr, bool link_local_ok, cr_json_err *err)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (!*addr) {
        return cr_json_fail(err, CR_EINVAL, "addr", "field 'addr': empty");
    }
    if (inet_pton(AF_INET, addr, &a4) == 1) {
        const unsigned char *b = (const unsigned char *)&a4.s_addr;
        if (!link_local_ok && b[0] == 169 && b[1] == 254) {
            return cr_json_fail(err, CR_EINVAL, "addr",
                                "field 'addr': %s is link-local (169.254.0.0/16: instance "
                                "metadata); set agent_addr_link_local to allow it",
                                addr);
        }
        return 0;
    }
    if (inet_pton(AF_INET6, addr, &a6) == 1) {
        const unsigned char *b = a6.s6_addr;
        bool mapped = memcmp(b, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0;
        if (!link_local_ok &&
            ((b[0] == 0xfe && (b[1] & 0xc0) == 0x80) || (mapped && b[12] == 169 && b[13] == 254))) {
            return cr_json_fail(err, CR_EINVAL, "addr",
                                "field 'addr': %s is link-local (fe80::/10, 169.254.0.0/16: "
                                "instance metadata); set agent_addr_link_local to allow it",
                                addr);
        }
        return 0;
    }
    /* A DNS name: dot-separated labels of letters, digits, '-' and '_',
     * none empty or starting with '-'; not all digits and dots (a bad
     * IPv4 address such as 1.2.3 or 300.1.1.1). */
    bool name_ok = true, numeric = true;
    size_t label = 0;
    for (const char *q = addr; *q && name_ok; q++) {
        unsigned char ch = (unsigned char)*q;
        if (ch == '.') {
            name_ok = label > 0;
            label = 0;
            continue;
        }
        if (!isalnum(ch) && ch != '-' && ch != '_') {
            name_ok = false;
            break;
        }
        if (ch == '-' && label == 0) {
            name_ok = false;
        }
        numeric &= isdigit(ch) != 0;
        label++;
    }
    if (name_ok && label > 0 && !numeric) {
        return 0;
    }
    return cr_json_fail(err, CR_EINVAL, "addr",
                        "field 'addr': '%s' is not a host name or IP address (one host; the "
                        "port is the field 'port')",
                        addr);
}

/* An agent that says it takes no jobs (unfit: its require_isolation is
 * not met) has its node drained with the reason, so nothing is placed
 * there; once it registers fit, a drain of that kind is lifted (an admin's
 * own drain stays). mu held. */
static void node_settle_unfit(ctl_node *n)
{
    size_t pl = strlen(CTL_UNFIT_PREFIX);
    if (*n->unfit) {
        if (!n->drained || strncmp(n->reason, CTL_UNFIT_PREFIX, pl) != 0) {
            cr_warn("node=%s: its agent takes no jobs: %s", n->name, n->unfit);
        }
        n->drained = true;
        if (n->state != NS_LOST) {
            n->state = NS_DRAINED;
        }
        snprintf(n->reason, sizeof n->reason, CTL_UNFIT_PREFIX "%.230s", n->unfit);
    } else if (n->drained && strncmp(n->reason, CTL_UNFIT_PREFIX, pl) == 0) {
        cr_info("node=%s: its agent takes jobs again", n->name);
        n->drained = false;
        if (n->state != NS_LOST) {
            n->state = NS_UP;
        }
        n->reason[0] = '\0';
    }
}

/* Parse the inventory part of a registration (or a stored node doc). */
static int parse_inventory(const json_t *v, bool strict, ctl_node *n, cr_json_err *err)
{
    static const char *const members[] = {"node",   "addr",      "port",    "rack",      "gpus",
                                          "cpus",   "mem_bytes", "running", "isolation", "tls",
                                          "labels", "unfit",     NULL};
    static const char *const gpu_members[] = {"index",         "uuid",        "model",  "mem_bytes",
                                              "nvlink_domain", "health",      "reason", "mig",
                                              "shareable",     "mig_dynamic", NULL};
    static const char *const healths[] = {"ok", "xid", "ecc", "hot", NULL};
    /* Stored documents may also hold a GPU that vanished (see gpus_merge). */
    static const char *const stored_healths[] = {"ok", "xid", "ecc", "hot", "gone", NULL};
    const char *name = "", *addr = "", *rack = "default";
    int64_t port = 0, cpus = 0, mem = 0;
    json_t *gpus = NULL;
    bool tls = false;
    int rc;
    if ((strict && (rc = cr_json_only(v, "", members, err))) ||
        (rc = cr_json_bool(v, "", "tls", false, &tls, err)) ||
        (rc = cr_json_str(v, "", "node", true, CTL_NAME_MAX - 1, &name, err)) ||
        (rc = cr_json_str(v, "", "addr", true, 63, &addr, err)) ||
        (rc = cr_json_int(v, "", "port", false, 0, 65535, &port, err)) ||
        (rc = cr_json_str(v, "", "rack", false, CTL_NAME_MAX - 1, &rack, err)) ||
        (rc = cr_json_arr(v, "", "gpus", false, 64, &gpus, err)) ||
        (rc = cr_json_int(v, "", "cpus", false, 0, 1 << 20, &cpus, err)) ||
        (rc = cr_json_int(v, "", "mem_bytes", false, 0, INT64_MAX, &mem, err))) {
        return rc;
    }
    if ((rc = ctl_name_check(name, "node", err)) != 0) {
        return rc;
    }
    json_t *labels = NULL;
    if ((rc = cr_json_obj(v, "", "labels", false, &labels, err)) != 0) {
        return rc;
    }
    if (json_object_size(labels) > 64) {
        return cr_json_fail(err, CR_EINVAL, "labels", "field 'labels': at most 64");
    }
    const char *lk;
    json_t *lv;
    json_object_foreach(labels, lk, lv)
    {
        char lp[128];
        cr_json_path(lp, sizeof lp, "labels", lk);
        if (!ctl_name_ok(lk) || !json_is_string(lv) || json_string_length(lv) > 63 ||
            (json_string_length(lv) > 0 && !ctl_name_ok(json_string_value(lv)))) {
            return cr_json_fail(err, CR_EINVAL, lp,
                                "field '%s': names and values use letters, digits, '-', '_' or "
                                "'.', up to 63",
                                lp);
        }
    }
    json_decref(n->labels);
    n->labels = labels && json_object_size(labels) ? json_deep_copy(labels) : NULL;
    const char *unfit = "";
    if ((rc = cr_json_str(v, "", "unfit", false, 255, &unfit, err)) != 0) {
        return rc;
    }
    if (!ctl_text_clean(unfit)) {
        return cr_json_fail(err, CR_EINVAL, "unfit", "field 'unfit': control characters");
    }
    snprintf(n->unfit, sizeof n->unfit, "%s", unfit);
    json_t *iso = NULL;
    if ((rc = cr_json_obj(v, "", "isolation", false, &iso, err)) != 0) {
        return rc;
    }
    if (iso) {
        static const char *const im[] = {"uid", "devices", "memory", "cpu", "pids", "detail", NULL};
        static const char *const vals[] = {"enforced", "unavailable", "unknown", NULL};
        const char *detail = "";
        if ((strict && (rc = cr_json_only(iso, "isolation", im, err))) ||
            (rc = cr_json_str(iso, "isolation", "detail", false, 511, &detail, err))) {
            return rc;
        }
        for (int i = 0; i < 5; i++) {
            const char *x = "";
            char f[32];
            snprintf(f, sizeof f, "isolation.%s", im[i]);
            if ((rc = cr_json_str(iso, "isolation", im[i], false, 15, &x, err)) ||
                (*x && (rc = cr_json_enum(x, f, vals, err)))) {
                return rc;
            }
            snprintf(n->iso[i], sizeof n->iso[i], "%s", strcmp(x, "unknown") == 0 ? "" : x);
        }
        for (const char *q = detail; *q; q++) {
            if ((unsigned char)*q < 0x20 || *q == 0x7f) {
                return cr_json_fail(err, CR_EINVAL, "isolation.detail",
                                    "field 'isolation.detail': control characters");
            }
        }
        snprintf(n->iso_detail, sizeof n->iso_detail, "%s", detail);
    }
    if (!ctl_text_clean(addr) || !ctl_text_clean(rack)) {
        const char *f = !ctl_text_clean(addr) ? "addr" : "rack";
        return cr_json_fail(err, CR_EINVAL, f, "field '%s': control characters are not allowed", f);
    }
    n->tls = tls;
    snprintf(n->name, sizeof n->name, "%s", name);
    snprintf(n->addr, sizeof n->addr, "%s", addr);
    snprintf(n->rack, sizeof n->rack, "%s", *rack ? rack : "default");
    n->port = (int)port;
    n->cpus = (int)cpus;
    n->mem_bytes = (uint64_t)mem;
    n->ngpus = json_array_size(gpus);
    n->gpus = n->ngpus ? cr_calloc(n->ngpus, sizeof *n->gpus) : NULL;
    for (size_t i = 0; i < n->ngpus; i++) {
        json_t *g = json_array_get(gpus, i);
        ctl_gpu *x = &n->gpus[i];
        char path[32];
        snprintf(path, sizeof path, "gpus[%zu]", i);
        int64_t index = (int64_t)i, gmem = 0, nvl = 0;
        const char *uuid = "", *model = "", *health = "ok", *reason = "";
        json_t *mig = NULL;
        bool shareable = false, mig_dynamic = false;
        if (!json_is_object(g)) {
            return cr_json_fail(err, CR_EINVAL, path, "field '%s': must be an object", path);
        }
        if ((strict && (rc = cr_json_only(g, path, gpu_members, err))) ||
            (rc = cr_json_int(g, path, "index", false, 0, 63, &index, err)) ||
            (rc = cr_json_str(g, path, "uuid", false, 95, &uuid, err)) ||
            (rc = cr_json_str(g, path, "model", true, CTL_NAME_MAX - 1, &model, err)) ||
            (rc = cr_json_int(g, path, "mem_bytes", false, 0, INT64_MAX, &gmem, err)) ||
            (rc = cr_json_int(g, path, "nvlink_domain", false, 0, 65535, &nvl, err)) ||
            (rc = cr_json_str(g, path, "health", false, 15, &health, err)) ||
            (rc = cr_json_enum(health, "health", strict ? healths : stored_healths, err)) ||
            (rc = cr_json_str(g, path, "reason", false, 127, &reason, err)) ||
            (rc = cr_json_arr(g, path, "mig", false, 8, &mig, err)) ||
            (rc = cr_json_bool(g, path, "shareable", false, &shareable, err)) ||
            (rc = cr_json_bool(g, path, "mig_dynamic", false, &mig_dynamic, err))) {
            return rc;
        }
        /* Placements name GPUs by index and jobs get them by UUID: each
         * must name one GPU only. */
        for (size_t k = 0; strict && k < i; k++) {
            char fp[48];
            if (n->gpus[k].index == (int)index) {
                snprintf(fp, sizeof fp, "%s.index", path);
                return cr_json_fail(err, CR_EINVAL, fp,
                                    "field '%s': duplicate: index %d is gpus[%zu]", fp, (int)index,
                                    k);
            }
            if (*uuid && strcmp(n->gpus[k].uuid, uuid) == 0) {
                snprintf(fp, sizeof fp, "%s.uuid", path);
                return cr_json_fail(err, CR_EINVAL, fp,
                                    "field '%s': duplicate: uuid '%s' is gpus[%zu]", fp, uuid, k);
            }
        }
        x->index = (int)index;
        snprintf(x->uuid, sizeof x->uuid, "%s", uuid);
        snprintf(x->model, sizeof x->model, "%s", model);
        snprintf(x->health, sizeof x->health, "%s", health);
        snprintf(x->reason, sizeof x->reason, "%s", reason);
        x->mem_bytes = (uint64_t)gmem;
        x->nvlink = (int)nvl;
        x->mig = json_array_size(mig) ? json_deep_copy(mig) : NULL;
        x->shareable = shareable && !x->mig; /* by slices or by fractions, not both */
        x->mig_dynamic = mig_dynamic && x->mig;
        memset(x->mig_start, -1, sizeof x->mig_start);
    }
    return 0;
}

static void node_insert(ctl *c, ctl_node *n)
{
    CR_GROW(c->nodes, c->nnodes, c->capnodes);
    c->nodes[c->nnodes++] = n;
    if ((c->nnodes + 1) * 2 > c->node_slots_cap) {
        free(c->node_slots);
        c->node_slots_cap = c->node_slots_cap ? c->node_slots_cap * 2 : 64;
        c->node_slots = cr_calloc(c->node_slots_cap, sizeof *c->node_slots);
        for (size_t i = 0; i < c->nnodes; i++) {
            ctl_node_index_put(c, i);
        }
    } else {
        ctl_node_index_put(c, c->nnodes - 1);
    }
}

/* Reconcile a node's GPU allocation marks with the jobs placed on it. */
static void node_mark_alloc(ctl *c, ctl_node *n)
{
    for (size_t g = 0; g < n->ngpus; g++) {
        n->gpus[g].alloc_job = 0;
    }
    for (size_t i = 0; i < n->njobs; i++) {
        ctl_job *j = ctl_job_get(c, n->jobs[i]);
        for (size_t k = 0; j && k < j->nplace; k++) {
            if (strcmp(j->place[k].node, n->name) != 0 || *j->place[k].mig_profile ||
                j->gpu_milli || j->gpu_mem_bytes) {
                continue; /* slices and shares have no one holder */
            }
            for (size_t q = 0; q < j->place[k].ngpus; q++) {
                for (size_t g = 0; g < n->ngpus; g++) {
                    if (n->gpus[g].index == j->place[k].gpus[q]) {
                        n->gpus[g].alloc_job = j->id;
                    }
                }
            }
        }
    }
}

static void load_node(void *arg, const char *key, const char *doc)
{
    ctl *c = arg;
    json_t *v = json_loads(doc, 0, NULL);
    cr_json_err err;
    ctl_node *n = cr_calloc(1, sizeof *n);
    if (!v || parse_inventory(v, false, n, &err) != 0) {
        cr_error("store: bad node '%s' ignored", key);
        json_decref(v);
        node_free(n);
        return;
    }
    n->drained = json_is_true(json_object_get(v, "drained"));
    n->pending_approval = json_is_true(json_object_get(v, "pending_approval"));
    n->state = json_is_true(json_object_get(v, "lost")) ? NS_LOST : n->drained ? NS_DRAINED : NS_UP;
    n->lost_at_start = n->state == NS_LOST;
    /* Versions are not stored: start this run's past any the agent may
     * hold from the previous one (it keeps its node token across our
     * restart, so it does not re-register and start over at version 0),
     * else a new document could carry the number of an old one and be
     * taken for it. Wall-clock microseconds only grow between runs. */
    n->version = (uint64_t)(cr_now_ns() / 1000);
    const char *reason = json_string_value(json_object_get(v, "reason"));
    snprintf(n->reason, sizeof n->reason, "%s", reason ? reason : "");
    /* Give the agent a full timeout to report after a controller restart. */
    n->last_seen_ns = cr_mono_ns();
    n->sched_dirty = true;
    node_insert(c, n);
    json_decref(v);
}

int ctl_load_nodes(ctl *c)
{
    int rc = cr_store_load_objects(c->store, "node", load_node, c);
    if (rc != 0) {
        return rc;
    }
    /* Jobs placed on nodes (loaded before). */
    size_t slot = 0;
    for (const ctl_job *j; (j = ctl_job_next(c, &slot));) {
        if (j->state != JS_RUNNING && j->state != JS_COMPLETING) {
            continue;
        }
        for (size_t k = 0; k < j->nplace; k++) {
            ctl_node *n = ctl_node_find(c, j->place[k].node);
            if (n) {
                ctl_node_add_job(n, j->id);
            }
        }
    }
    for (size_t i = 0; i < c->nnodes; i++) {
        node_mark_alloc(c, c->nodes[i]);
    }
    return 0;
}

int ctl_node_validate(const char *body, size_t len, cr_json_err *err)
{
    json_t *v = NULL;
    ctl_node *n = cr_calloc(1, sizeof *n);
    int rc = cr_json_parse_object(body, len, &v, err);
    if (rc == 0) {
        rc = parse_inventory(v, true, n, err);
    }
    node_free(n);
    json_decref(v);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Agent routes                                                             */

/*
 * Re-registration with GPUs missing (a GPU fell off the bus, a node booted
 * with fewer): the jobs on a missing GPU end now, with that reason, and are
 * requeued without using a retry; the GPU stays in the list at its old
 * position as "gone" (out of use: positions are how the scheduler names
 * GPUs) until an agent reports it again. fresh->gpus becomes the merged
 * list. mu held.
 */
static void gpus_merge(ctl *c, cr_store_txn *txn, ctl_node *n, ctl_node *fresh)
{
    for (size_t i = 0; i < n->njobs;) {
        ctl_job *j = ctl_job_get(c, n->jobs[i]);
        int gone = -1;
        for (size_t k = 0; j && k < j->nplace && gone < 0; k++) {
            if (strcmp(j->place[k].node, n->name) != 0) {
                continue;
            }
            for (size_t q = 0; q < j->place[k].ngpus && gone < 0; q++) {
                bool found = false;
                for (size_t g = 0; g < fresh->ngpus; g++) {
                    found |= fresh->gpus[g].index == j->place[k].gpus[q];
                }
                if (!found) {
                    gone = j->place[k].gpus[q];
                }
            }
        }
        if (gone < 0 || (j->state != JS_RUNNING && j->state != JS_COMPLETING)) {
            i++;
            continue;
        }
        char why[200];
        snprintf(why, sizeof why, "GPU %d vanished from node %s at re-registration", gone, n->name);
        cr_warn("node=%s job=%lld: %s", n->name, (long long)j->id, why);
        ctl_job_ended(c, txn, j, 0, 0, why, true);
        ctl_node_del_job(n, j->id); /* in case the placement did not name it */
    }
    ctl_gpu *merged = cr_calloc(n->ngpus + fresh->ngpus + 1, sizeof *merged);
    bool *used = cr_calloc(fresh->ngpus + 1, sizeof *used);
    size_t m = 0;
    for (size_t i = 0; i < n->ngpus; i++) {
        size_t f = 0;
        while (f < fresh->ngpus && (used[f] || fresh->gpus[f].index != n->gpus[i].index)) {
            f++;
        }
        if (f < fresh->ngpus) {
            merged[m++] = fresh->gpus[f]; /* takes its mig */
            used[f] = true;
            continue;
        }
        ctl_gpu *g = &merged[m++];
        *g = n->gpus[i];
        g->mig = NULL; /* the old entry's is released with it */
        g->mig_want = NULL;
        g->alloc_job = 0;
        g->util_pct = g->temp_c = g->power_w = 0;
        g->mem_used_bytes = 0;
        if (strcmp(n->gpus[i].health, "gone") != 0) {
            cr_warn("node=%s gpu=%d (%s) vanished at re-registration: out of use", n->name,
                    g->index, g->uuid);
        }
        snprintf(g->health, sizeof g->health, "gone");
        snprintf(g->reason, sizeof g->reason, "vanished at re-registration");
    }
    for (size_t f = 0; f < fresh->ngpus; f++) {
        if (!used[f]) {
            merged[m++] = fresh->gpus[f];
        }
    }
    free(used);
    free(fresh->gpus);
    fresh->gpus = merged;
    fresh->ngpus = m;
}

typedef struct reg_ctx {
    cr_http_req *req;
    json_t *body; /* answer */
} reg_ctx;

static void agent_register(ctl *c, cr_http_req *req, const cr_principal *p)
{
    size_t len;
    const char *body = cr_http_body(req, &len);
    json_t *v = NULL;
    cr_json_err err;
    ctl_node *fresh = cr_calloc(1, sizeof *fresh);
    json_t *running = NULL;
    int rc = cr_json_parse_object(body, len, &v, &err);
    if (rc == 0) {
        rc = parse_inventory(v, true, fresh, &err);
    }
    if (rc == 0) {
        rc = cr_json_arr(v, "", "running", false, 65536, &running, &err);
    }
    for (size_t i = 0; rc == 0 && i < json_array_size(running); i++) {
        static const char *const run_members[] = {"job", "pid", "run", NULL};
        json_t *r = json_array_get(running, i);
        char path[32];
        int64_t x;
        snprintf(path, sizeof path, "running[%zu]", i);
        if (!json_is_object(r)) {
            rc = cr_json_fail(&err, CR_EINVAL, path, "field '%s': must be an object", path);
        } else if ((rc = cr_json_only(r, path, run_members, &err)) == 0 &&
                   (rc = cr_json_int(r, path, "job", true, 1, INT64_MAX, &x, &err)) == 0) {
            if ((rc = cr_json_int(r, path, "pid", false, 0, INT32_MAX, &x, &err)) == 0) {
                rc = cr_json_int(r, path, "run", false, 0, INT32_MAX, &x, &err);
            }
        }
    }
    if (rc == 0) {
        rc = addr_check(fresh->addr, c->cfg.agent_addr_link_local, &err);
    }
    if (rc != 0) {
        ctl_reply_jerr(req, &err);
        node_free(fresh);
        json_decref(v);
        return;
    }
    if (p->role == CR_ROLE_AGENT && strcmp(p->node, fresh->name) != 0) {
        ctl_reply_err(req, 403, CR_EPERM, "node", "this token belongs to node '%s'", p->node);
        node_free(fresh);
        json_decref(v);
        return;
    }
    pthread_mutex_lock(&c->mu);
    ctl_node *n = ctl_node_find(c, fresh->name);
    if (n && n->deleting) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_err(req, 409, CR_ECONFLICT, NULL, "node '%s' is being deleted by an admin",
                      fresh->name);
        node_free(fresh);
        json_decref(v);
        return;
    }
    cr_store_txn *txn = cr_store_txn_new();
    char why[400];
    unsigned refuse = ctl_join_admit(c, txn, p, fresh->name, n != NULL, why, sizeof why);
    if (refuse) {
        /* A bootstrap token that expired is dropped even so. */
        if (cr_store_txn_empty(txn)) {
            cr_store_txn_free(txn);
        } else {
            cr_store_submit(c->store, txn, NULL, NULL);
        }
        pthread_mutex_unlock(&c->mu);
        cr_warn("node=%s: registration refused (%s, peer %s): %s", fresh->name, p->name,
                cr_http_peer(req), why);
        ctl_reply_err(req, refuse, refuse == 409 ? CR_ECONFLICT : CR_EAUTH, NULL, "%s", why);
        node_free(fresh);
        json_decref(v);
        return;
    }
    if (!n) {
        n = fresh;
        n->state = NS_UP;
        n->version = 1;
        n->registered_ns = cr_now_ns();
        if (c->cfg.manual_approval && p->role != CR_ROLE_ADMIN) {
            n->pending_approval = true;
            n->drained = true;
            n->state = NS_DRAINED;
            snprintf(n->reason, sizeof n->reason, "awaiting approval: corral nodes approve %s",
                     n->name);
        }
        node_insert(c, n);
        cr_info("node=%s registered: %zu GPUs, addr %s:%d%s", n->name, n->ngpus, n->addr, n->port,
                n->pending_approval ? " (awaiting approval)" : "");
    } else {
        /* Re-registration (agent restart): new inventory, same jobs. The
         * scheduler keeps the MIG layout it was given: an unchanged one
         * keeps its instance starts. */
        gpus_merge(c, txn, n, fresh);
        for (size_t i = 0; i < n->ngpus; i++) {
            if (i < fresh->ngpus && n->gpus[i].mig && fresh->gpus[i].mig &&
                json_equal(n->gpus[i].mig, fresh->gpus[i].mig)) {
                memcpy(fresh->gpus[i].mig_start, n->gpus[i].mig_start,
                       sizeof fresh->gpus[i].mig_start);
                fresh->gpus[i].mig_unusable = n->gpus[i].mig_unusable;
            } else if (i < fresh->ngpus && fresh->gpus[i].mig) {
                ctl_mig_registered(&fresh->gpus[i]); /* a layout changed on the node */
            }
            if (i < fresh->ngpus && fresh->gpus[i].index == n->gpus[i].index &&
                fresh->gpus[i].mig) {
                fresh->gpus[i].mig_want = n->gpus[i].mig_want; /* asked until registered */
                n->gpus[i].mig_want = NULL;
                ctl_mig_want_settle(&fresh->gpus[i]);
            }
            json_decref(n->gpus[i].mig);
            json_decref(n->gpus[i].mig_want);
        }
        free(n->gpus);
        n->gpus = fresh->gpus;
        n->ngpus = fresh->ngpus;
        fresh->gpus = NULL;
        fresh->ngpus = 0;
        snprintf(n->addr, sizeof n->addr, "%s", fresh->addr);
        snprintf(n->rack, sizeof n->rack, "%s", fresh->rack);
        json_decref(n->labels);
        n->labels = fresh->labels;
        fresh->labels = NULL;
        n->port = fresh->port;
        n->tls = fresh->tls;
        n->cpus = fresh->cpus;
        n->mem_bytes = fresh->mem_bytes;
        memcpy(n->iso, fresh->iso, sizeof n->iso);
        memcpy(n->iso_detail, fresh->iso_detail, sizeof n->iso_detail);
        memcpy(n->unfit, fresh->unfit, sizeof n->unfit);
        node_free(fresh);
        if (n->state == NS_LOST) {
            n->state = n->drained ? NS_DRAINED : NS_UP;
            snprintf(n->reason, sizeof n->reason, "%s", n->drained ? n->reason : "");
            n->requeue_at_ns = 0;
        }
        node_mark_alloc(c, n);
        cr_info("node=%s re-registered: %zu GPUs, %zu jobs placed", n->name, n->ngpus, n->njobs);
        ctl_node_bump(c, n);
    }
    node_settle_unfit(n);
    n->last_seen_ns = cr_mono_ns();
    n->sched_dirty = true;
    ctl_sched_kick(c);
    char token[CR_TOKEN_TEXT_MAX];
    ctl_node_token(c, txn, n->name, token, n->agent_secret);
    node_persist(txn, n);
    /* Fencing: the running jobs the agent listed that are not its own any
     * more (requeued while it was away) are killed before anything else. */
    json_t *whys = NULL;
    json_t *fence = ctl_fence_list(c, n, running, &whys);
    ctl_commit_reply(
        c, txn, req, 200,
        json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:b,s:o,s:o}", "node_token", token, "agent_secret",
                  n->agent_secret, "heartbeat_s", (json_int_t)c->cfg.heartbeat_s, "lost_after_s",
                  (json_int_t)c->cfg.lost_after_s, "lease_s", (json_int_t)c->cfg.lost_after_s,
                  "version", (json_int_t)n->version, "pending_approval", n->pending_approval,
                  "fence", fence, "fence_reasons", whys));
    pthread_mutex_unlock(&c->mu);
    json_decref(v);
}

static void agent_status(ctl *c, cr_http_req *req, ctl_node *n_unused, const char *node)
{
    size_t len;
    const char *body = cr_http_body(req, &len);
    json_t *v = NULL, *gpus = NULL, *jobs = NULL;
    cr_json_err err;
    static const char *const members[] = {"gpus", "jobs", "data_held", "reclaim_in_s", NULL};
    static const char *const gpu_members[] = {
        "index",    "health",       "reason",          "util_pct", "mem_used_bytes", "temp_c",
        "power_mw", "sm_clock_mhz", "ecc_uncorrected", "xid_last", "power_cap_w",    NULL};
    static const char *const job_members[] = {
        "job",         "state",         "pid",     "exit_code", "signal",
        "run",         "port",          "oom",     "reason",    "fatal",
        "image_pull",  "image_pull_ms", "sharing", "lease",     "output_capped",
        "output_lost", "metrics",       "staging", "logs",      NULL};
    static const char *const metric_members[] = {"tokens_per_s", "step_time_s", "bad_lines", NULL};
    static const char *const healths[] = {"ok", "xid", "ecc", "hot", NULL};
    static const char *const states[] = {"running", "exited", NULL};
    int64_t reclaim_s = 0;
    if (cr_json_parse_object(body, len, &v, &err) || cr_json_only(v, "", members, &err) ||
        cr_json_arr(v, "", "gpus", false, 64, &gpus, &err) ||
        cr_json_arr(v, "", "jobs", false, 65536, &jobs, &err) ||
        cr_json_int(v, "", "reclaim_in_s", false, 1, 3600, &reclaim_s, &err)) {
        goto bad;
    }
    /* What the node's data cache holds (docs/data.md, locality). */
    json_t *held = NULL;
    if (cr_json_arr(v, "", "data_held", false, 1024, &held, &err) != 0) {
        goto bad;
    }
    for (size_t i = 0; i < json_array_size(held); i++) {
        const char *h = json_string_value(json_array_get(held, i));
        size_t k = 0;
        while (h && k < 64 && ((h[k] >= '0' && h[k] <= '9') || (h[k] >= 'a' && h[k] <= 'f'))) {
            k++;
        }
        if (!h || k != 64 || h[64]) {
            char path[32];
            snprintf(path, sizeof path, "data_held[%zu]", i);
            cr_json_fail(&err, CR_EINVAL, path, "field '%s': 64 lowercase hex digits", path);
            goto bad;
        }
    }
    for (size_t i = 0; i < json_array_size(gpus); i++) {
        json_t *g = json_array_get(gpus, i);
        char path[32];
        snprintf(path, sizeof path, "gpus[%zu]", i);
        int64_t idx, x;
        double d;
        const char *h = "ok", *r = "";
        if (!json_is_object(g)) {
            cr_json_fail(&err, CR_EINVAL, path, "field '%s': must be an object", path);
            goto bad;
        }
        if (cr_json_only(g, path, gpu_members, &err) ||
            cr_json_int(g, path, "index", true, 0, 63, &idx, &err) ||
            cr_json_str(g, path, "health", false, 15, &h, &err) ||
            cr_json_enum(h, "health", healths, &err) ||
            cr_json_str(g, path, "reason", false, 127, &r, &err) ||
            cr_json_num(g, path, "util_pct", false, 0, 100, &d, &err) ||
            cr_json_int(g, path, "mem_used_bytes", false, 0, INT64_MAX, &x, &err) ||
            cr_json_num(g, path, "temp_c", false, -100, 300, &d, &err) ||
            cr_json_int(g, path, "power_mw", false, 0, 100000000, &x, &err) ||
            cr_json_int(g, path, "sm_clock_mhz", false, 0, 100000, &x, &err) ||
            cr_json_int(g, path, "ecc_uncorrected", false, 0, INT64_MAX, &x, &err) ||
            cr_json_int(g, path, "xid_last", false, 0, INT64_MAX, &x, &err) ||
            cr_json_int(g, path, "power_cap_w", false, 0, CTL_POWER_CAP_MAX_W, &x, &err)) {
            goto bad;
        }
    }
    for (size_t i = 0; i < json_array_size(jobs); i++) {
        json_t *jr = json_array_get(jobs, i);
        char path[32];
        snprintf(path, sizeof path, "jobs[%zu]", i);
        int64_t x;
        bool oom_ignored = false;
        const char *st = "", *text_ignored = "";
        if (!json_is_object(jr)) {
            cr_json_fail(&err, CR_EINVAL, path, "field '%s': must be an object", path);
            goto bad;
        }
        if (cr_json_only(jr, path, job_members, &err) ||
            cr_json_int(jr, path, "job", true, 1, INT64_MAX, &x, &err) ||
            cr_json_str(jr, path, "state", true, 16, &st, &err) ||
            cr_json_enum(st, "state", states, &err) ||
            cr_json_int(jr, path, "pid", false, 0, INT32_MAX, &x, &err) ||
            cr_json_int(jr, path, "exit_code", false, -1000, 1000, &x, &err) ||
            cr_json_int(jr, path, "signal", false, 0, 128, &x, &err) ||
            cr_json_int(jr, path, "run", false, 0, INT32_MAX, &x, &err) ||
            cr_json_int(jr, path, "port", false, 1, 65535, &x, &err) ||
            cr_json_bool(jr, path, "oom", false, &oom_ignored, &err) ||
            cr_json_bool(jr, path, "fatal", false, &oom_ignored, &err) ||
            cr_json_str(jr, path, "reason", false, 400, &text_ignored, &err) ||
            cr_json_str(jr, path, "image_pull", false, 300, &text_ignored, &err) ||
            cr_json_str(jr, path, "sharing", false, 300, &text_ignored, &err) ||
            cr_json_str(jr, path, "staging", false, 400, &text_ignored, &err) ||
            cr_json_int(jr, path, "output_capped", false, 1, INT64_MAX, &x, &err) ||
            cr_json_str(jr, path, "output_lost", false, 200, &text_ignored, &err) ||
            cr_json_int(jr, path, "image_pull_ms", false, 0, INT64_MAX, &x, &err)) {
            goto bad;
        }
        /* A finished job's output, shipped to outlive the node (ctl_logs.c). */
        if (ctl_joblog_check(jr, path, &err) != 0) {
            goto bad;
        }
        /* What the job measured (cr_metric.h): checked, learned from at its end. */
        json_t *mj = NULL;
        double mv;
        char mpath[96];
        snprintf(mpath, sizeof mpath, "%s.metrics", path);
        if (cr_json_obj(jr, path, "metrics", false, &mj, &err) ||
            (mj && (cr_json_only(mj, mpath, metric_members, &err) ||
                    cr_json_num(mj, mpath, "tokens_per_s", false, 0, 1e15, &mv, &err) ||
                    cr_json_num(mj, mpath, "step_time_s", false, 0, 1e9, &mv, &err) ||
                    cr_json_int(mj, mpath, "bad_lines", false, 0, INT64_MAX, &x, &err)))) {
            goto bad;
        }
    }

    pthread_mutex_lock(&c->mu);
    ctl_node *n = ctl_node_find(c, node);
    if (!n) {
        pthread_mutex_unlock(&c->mu);
        json_decref(v);
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "node '%s' is not registered: register again",
                      node);
        return;
    }
    if (n->deleting) {
        /* Heard from, but nothing it says is taken in while its delete is
         * stored: it reports again (then 404, or as before if refused). */
        n->last_seen_ns = cr_mono_ns();
        pthread_mutex_unlock(&c->mu);
        json_decref(v);
        ctl_reply_err(req, 409, CR_ECONFLICT, NULL, "node '%s' is being deleted by an admin", node);
        return;
    }
    ctl_report *rep = NULL;
    int64_t now_mono = cr_mono_ns(), now = cr_now_ns();
    double dt = (double)(now_mono - n->last_seen_ns) / 1e9;
    if (dt > (double)c->cfg.heartbeat_s * 3) {
        dt = (double)c->cfg.heartbeat_s; /* do not charge a long silence as power */
    }
    n->last_seen_ns = now_mono;
    if (held) {
        json_decref(n->data_held);
        n->data_held = json_incref(held);
    }
    if (reclaim_s > 0 && n->reclaim_req_s == 0 && !n->reclaimed) {
        n->reclaim_req_s = reclaim_s; /* done by ctl_nodes_reclaims, outside mu */
        ctl_sched_kick(c);
    }
    cr_store_txn *txn = cr_store_txn_new();
    bool persist = false;
    if (n->state == NS_LOST) {
        n->state = n->drained ? NS_DRAINED : NS_UP;
        n->sched_dirty = true;
        n->requeue_at_ns = 0; /* the jobs still placed here stay (its agent kept them) */
        cr_info("node=%s is back", n->name);
        snprintf(n->reason, sizeof n->reason, "%s", n->drained ? n->reason : "");
        ctl_sched_kick(c);
        persist = true;
    }
    for (size_t i = 0; i < json_array_size(gpus); i++) {
        json_t *g = json_array_get(gpus, i);
        int idx = (int)json_integer_value(json_object_get(g, "index"));
        ctl_gpu *x = NULL;
        for (size_t k = 0; k < n->ngpus; k++) {
            if (n->gpus[k].index == idx) {
                x = &n->gpus[k];
            }
        }
        if (!x) {
            continue;
        }
        const char *h = json_string_value(json_object_get(g, "health"));
        const char *r = json_string_value(json_object_get(g, "reason"));
        if (h && strcmp(h, x->health) != 0) {
            cr_info("node=%s gpu=%d health %s -> %s (%s)", n->name, idx, x->health, h, r ? r : "");
            snprintf(x->health, sizeof x->health, "%s", h);
            snprintf(x->reason, sizeof x->reason, "%s", r ? r : "");
            n->sched_dirty = true;
            persist = true;
            ctl_sched_kick(c);
        }
        json_t *m;
        if ((m = json_object_get(g, "util_pct"))) {
            x->util_pct = json_number_value(m);
        }
        if ((m = json_object_get(g, "temp_c"))) {
            x->temp_c = json_number_value(m);
        }
        if ((m = json_object_get(g, "power_mw"))) {
            x->power_w = (double)json_integer_value(m) / 1000.0;
        }
        m = json_object_get(g, "power_cap_w");
        x->power_cap_w = json_is_integer(m) && json_integer_value(m) > 0 &&
                                 json_integer_value(m) <= CTL_POWER_CAP_MAX_W
                             ? (int)json_integer_value(m)
                             : 0;
        if ((m = json_object_get(g, "mem_used_bytes"))) {
            x->mem_used_bytes = (uint64_t)json_integer_value(m);
        }
    }
    /* Energy and GPU time of the jobs running here. */
    for (size_t i = 0; i < n->njobs; i++) {
        ctl_job *j = ctl_job_get(c, n->jobs[i]);
        if (!j) {
            continue;
        }
        double energy = 0, util_max = 0;
        size_t ngpus_held = 0;
        for (size_t g = 0; g < n->ngpus; g++) {
            if (n->gpus[g].alloc_job == j->id) {
                energy += n->gpus[g].power_w * dt;
                util_max = n->gpus[g].util_pct > util_max ? n->gpus[g].util_pct : util_max;
                ngpus_held++;
            }
        }
        if (energy > 0) {
            ctl_usage_add(c, txn, j->tenant, *j->run_type ? j->run_type : j->gpu_type, now, 0,
                          energy);
        }
        if (ngpus_held > 0 && j->state == JS_RUNNING && !j->start_unstored) {
            idle_sample(c, txn, j, ngpus_held, util_max, dt, now_mono, now);
        }
        ctl_job_account(c, txn, j, now);
    }
    /* Container jobs: how the image came to the node, once per run (an event). */
    for (size_t i = 0; i < json_array_size(jobs); i++) {
        json_t *jr = json_array_get(jobs, i), *run = json_object_get(jr, "run");
        const char *how = json_string_value(json_object_get(jr, "image_pull"));
        ctl_job *j = ctl_job_get(c, (int64_t)json_integer_value(json_object_get(jr, "job")));
        if (!how || !j || j->state != JS_RUNNING || j->pull_event_run == j->runs ||
            (run && json_integer_value(run) != j->runs) || !ctl_text_clean(how)) {
            continue;
        }
        j->pull_event_run = j->runs;
        char ev[600];
        snprintf(ev, sizeof ev, "%s on node %s: %s in %lld ms",
                 json_string_value(json_object_get(j->spec, "image")), n->name, how,
                 (long long)json_integer_value(json_object_get(jr, "image_pull_ms")));
        cr_store_txn_event(txn, j->id, now, "image pull", ev);
    }
    /* Fractional tasks: how the agent shares the GPU (MPS or time-sliced),
     * once per run (an event). */
    for (size_t i = 0; i < json_array_size(jobs); i++) {
        json_t *jr = json_array_get(jobs, i), *run = json_object_get(jr, "run");
        const char *how = json_string_value(json_object_get(jr, "sharing"));
        ctl_job *j = ctl_job_get(c, (int64_t)json_integer_value(json_object_get(jr, "job")));
        if (!how || !j || j->state != JS_RUNNING || j->share_event_run == j->runs ||
            (run && json_integer_value(run) != j->runs) || !ctl_text_clean(how)) {
            continue;
        }
        j->share_event_run = j->runs;
        char ev[400];
        snprintf(ev, sizeof ev, "%s (node %s)", how, n->name);
        cr_store_txn_event(txn, j->id, now, "shared", ev);
    }
    /* Job output the agent capped (--log-max-bytes) or could not write
     * (its disk full), once per run each (events). */
    for (size_t i = 0; i < json_array_size(jobs); i++) {
        json_t *jr = json_array_get(jobs, i), *run = json_object_get(jr, "run");
        json_t *cap = json_object_get(jr, "output_capped");
        const char *lost = json_string_value(json_object_get(jr, "output_lost"));
        ctl_job *j = ctl_job_get(c, (int64_t)json_integer_value(json_object_get(jr, "job")));
        if (!j || j->state != JS_RUNNING || (run && json_integer_value(run) != j->runs)) {
            continue;
        }
        char ev[400];
        if (cap && j->cap_event_run != j->runs) {
            j->cap_event_run = j->runs;
            snprintf(ev, sizeof ev, "output capped at %lld bytes on node %s: the rest was dropped",
                     (long long)json_integer_value(cap), n->name);
            cr_store_txn_event(txn, j->id, now, "output capped", ev);
        }
        if (lost && j->lost_event_run != j->runs && ctl_text_clean(lost)) {
            j->lost_event_run = j->runs;
            snprintf(ev, sizeof ev, "output lost on node %s: %s", n->name, lost);
            cr_store_txn_event(txn, j->id, now, "output lost", ev);
        }
    }
    /* Data being staged before the job's process starts (docs/data.md):
     * its progress is the running job's reason until it starts. */
    for (size_t i = 0; i < json_array_size(jobs); i++) {
        json_t *jr = json_array_get(jobs, i), *run = json_object_get(jr, "run");
        const char *st = json_string_value(json_object_get(jr, "staging"));
        ctl_job *j = ctl_job_get(c, (int64_t)json_integer_value(json_object_get(jr, "job")));
        if (!j || j->state != JS_RUNNING || (run && json_integer_value(run) != j->runs)) {
            continue;
        }
        if (st && ctl_text_clean(st)) {
            char why[500];
            snprintf(why, sizeof why, "%s (node %s)", st, n->name);
            if (!j->reason || strcmp(j->reason, why) != 0) {
                free(j->reason);
                j->reason = cr_strdup(why);
            }
            j->staging = true;
        } else if (j->staging) {
            j->staging = false;
            free(j->reason);
            j->reason = cr_asprintf("data staged on node %s", n->name);
        }
    }
    /* Ports the agent gave replicas (the current run's, on this node). */
    for (size_t i = 0; i < json_array_size(jobs); i++) {
        json_t *jr = json_array_get(jobs, i), *port = json_object_get(jr, "port");
        json_t *run = json_object_get(jr, "run");
        ctl_job *j = ctl_job_get(c, (int64_t)json_integer_value(json_object_get(jr, "job")));
        if (!port || !j || j->state != JS_RUNNING || j->nplace == 0 ||
            strcmp(j->place[0].node, n->name) != 0 || (run && json_integer_value(run) != j->runs) ||
            strcmp(json_string_value(json_object_get(jr, "state")), "running") != 0) {
            continue;
        }
        if (j->port != (int)json_integer_value(port)) {
            j->port = (int)json_integer_value(port);
            ctl_job_changed(c, j);
            /* A gang's rendezvous port, reserved by rank 0's agent: the
             * other nodes wait for it. */
            for (size_t k = 1; k < j->nplace; k++) {
                ctl_node *o = ctl_node_find(c, j->place[k].node);
                if (o) {
                    ctl_node_bump(c, o);
                }
            }
        }
    }
    /* Exits. */
    for (size_t i = 0; i < json_array_size(jobs); i++) {
        json_t *jr = json_array_get(jobs, i);
        if (strcmp(json_string_value(json_object_get(jr, "state")), "exited") != 0) {
            continue;
        }
        int64_t id = (int64_t)json_integer_value(json_object_get(jr, "job"));
        ctl_job *j = ctl_job_get(c, id);
        ctl_place *mine = NULL;
        for (size_t k = 0; j && k < j->nplace; k++) {
            if (strcmp(j->place[k].node, n->name) == 0) {
                mine = &j->place[k];
            }
        }
        bool here = mine != NULL;
        json_t *xrun = json_object_get(jr, "run");
        if (j && !here && j->susp_run > 0 && xrun && json_integer_value(xrun) == j->susp_run) {
            /* the suspended run exited: its checkpoint is written */
            j->susp_run = 0;
            ctl_sched_resumable(c, j->id);
            continue;
        }
        if (!j || !here || (j->state != JS_RUNNING && j->state != JS_COMPLETING) ||
            j->start_unstored) {
            continue; /* already handled: the desired state drops it */
        }
        if (j->committing) {
            /* A user's change or another report of its end is being stored:
             * the agent reports the exit again (it keeps it until the
             * desired state drops the job). */
            continue;
        }
        json_t *run = json_object_get(jr, "run");
        if (run && json_integer_value(run) != j->runs) {
            continue; /* the exit of an earlier run of this job on this node */
        }
        json_t *logs = json_object_get(jr, "logs");
        if (logs) {
            /* stored with the end: shown finished, its output is durable */
            ctl_joblog_put(txn, j->id, n->name, logs);
        }
        int code = (int)json_integer_value(json_object_get(jr, "exit_code"));
        int sig = (int)json_integer_value(json_object_get(jr, "signal"));
        /* A gang job (ranks on several nodes) completes when every rank has
         * exited 0; the first rank to fail ends it at once (its other ranks
         * are then stopped through the desired state). A stop the controller
         * asked for (cancel, time limit, requeue) ends it at the first exit. */
        /* A batch job (ctl_batch_is_batch) ends with its script, on rank
         * 0: its other nodes only hold the allocation for its steps. */
        bool batch_end = ctl_batch_is_batch(j) && mine == &j->place[0];
        if (j->nplace > 1 && code == 0 && sig == 0 && !j->cancel_requested && !j->timed_out &&
            !j->requeue_requested && !batch_end) {
            mine->exited_ok = true;
            bool all = true;
            for (size_t k = 0; k < j->nplace; k++) {
                all = all && j->place[k].exited_ok;
            }
            if (!all) {
                continue;
            }
        }
        char why[600];
        if (json_is_true(json_object_get(jr, "lease"))) {
            /* Its agent stopped it when its node lease ran out (no
             * controller answered): requeued, as the node's loss would. */
            snprintf(why, sizeof why,
                     "stopped on node %s when its node lease ran out (no controller answered "
                     "for %llds)",
                     n->name, (long long)c->cfg.lost_after_s);
            ctl_report_lease_end(&rep, c, txn, j, why);
            continue;
        }
        bool fatal = false;
        const char *reason = json_string_value(json_object_get(jr, "reason"));
        if (reason && *reason && ctl_text_clean(reason)) {
            /* The agent could not start it (a container image missing...). */
            fatal = json_is_true(json_object_get(jr, "fatal"));
            snprintf(why, sizeof why, "%s on node %s%s", reason, n->name,
                     fatal ? " (not retried: retrying cannot help)" : "");
        } else if (json_is_true(json_object_get(jr, "oom"))) {
            snprintf(why, sizeof why,
                     "out of memory: the kernel's OOM killer acted in the job's memory limit on "
                     "node %s (%s %d)",
                     n->name, sig ? "signal" : "exit code", sig ? sig : code);
            if (code == 0 && sig == 0) {
                code = 137; /* an OOM kill is a failure even when the job's own exit was 0 */
            }
        } else if (sig) {
            snprintf(why, sizeof why, "killed by signal %d on node %s", sig, n->name);
        } else {
            snprintf(why, sizeof why, "exited with code %d on node %s", code, n->name);
        }
        json_t *metrics = json_object_get(jr, "metrics");
        json_t *bad_lines = json_object_get(metrics, "bad_lines");
        if (bad_lines) {
            char ev[200];
            snprintf(ev, sizeof ev,
                     "%lld corral-metric line%s on node %s did not parse (ignored; "
                     "'corral-metric tokens_per_s=N step_time_s=S')",
                     (long long)json_integer_value(bad_lines),
                     json_integer_value(bad_lines) > 1 ? "s" : "", n->name);
            cr_store_txn_event(txn, j->id, now, "metrics ignored", ev);
        }
        if (code == 0 && sig == 0 && !fatal && !(reason && *reason)) {
            ctl_learn_record(c, txn, j, metrics); /* the cluster calibrates its advisor */
        }
        /* Commit first: the end is stored, then shown (report_committed). */
        ctl_report_end(&rep, c, txn, j, code, sig, why, fatal);
    }
    if (persist) {
        node_persist(txn, n);
    }
    if (rep) {
        ctl_report_submit(rep, c, txn, req, n->name, jobs);
    } else {
        json_t *whys = NULL;
        json_t *fence = ctl_fence_list(c, n, jobs, &whys);
        ctl_commit_reply(c, txn, req, 200,
                         json_pack("{s:b,s:I,s:o,s:o,s:I}", "ok", 1, "version",
                                   (json_int_t)n->version, "fence", fence, "fence_reasons", whys,
                                   "lease_s", (json_int_t)c->cfg.lost_after_s));
    }
    pthread_mutex_unlock(&c->mu);
    json_decref(v);
    return;
bad:
    json_decref(v);
    ctl_reply_jerr(req, &err);
}

static void agent_desired(ctl *c, cr_http_req *req, const char *node)
{
    const char *qv = cr_http_query(req, "version");
    const char *qw = cr_http_query(req, "wait");
    int64_t version = -1, wait = 0;
    if (qv && cr_parse_i64(qv, 0, INT64_MAX, &version) != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "version", "query 'version': must be an integer >= 0");
        return;
    }
    if (qw && cr_parse_i64(qw, 0, 300, &wait) != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "wait", "query 'wait': must be an integer 0..300");
        return;
    }
    pthread_mutex_lock(&c->mu);
    ctl_node *n = ctl_node_find(c, node);
    if (!n) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "node '%s' is not registered: register again",
                      node);
        return;
    }
    if (version != (int64_t)n->version || wait == 0 || c->stopping) {
        size_t len = 0;
        char *doc = ctl_desired_text(c, n, &len);
        pthread_mutex_unlock(&c->mu);
        if (!doc) {
            doc = cr_strdup("{}"); /* (as a document jansson could not dump was sent) */
            len = 2;
        }
        cr_http_respond(req, 200, "application/json", doc, len);
        return;
    }
    ctl_poll_park(&n->polls, req, wait);
    pthread_mutex_unlock(&c->mu);
}

void ctl_route_agents(ctl *c, cr_http_req *req, const cr_principal *p, char **seg, size_t nseg)
{
    const char *m = cr_http_method(req);
    if (nseg == 3 && strcmp(seg[2], "register") == 0 && strcmp(m, "POST") == 0) {
        cr_http_set_route(req, "/v1/agents/register");
        if (p->role != CR_ROLE_JOIN && p->role != CR_ROLE_AGENT && p->role != CR_ROLE_ADMIN) {
            ctl_reply_err(req, 403, CR_EPERM, NULL, "registering a node needs a bootstrap token");
            return;
        }
        agent_register(c, req, p);
        return;
    }
    if (nseg != 4) {
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "no route %s %s", m, cr_http_path(req));
        return;
    }
    const char *node = seg[2];
    bool status = strcmp(seg[3], "status") == 0 && strcmp(m, "POST") == 0;
    bool desired = strcmp(seg[3], "desired") == 0 && strcmp(m, "GET") == 0;
    if (!status && !desired) {
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "no route %s %s", m, cr_http_path(req));
        return;
    }
    cr_http_set_route(req, status ? "/v1/agents/{node}/status" : "/v1/agents/{node}/desired");
    /* The desired state carries the jobs' secrets: only the node's own
     * credential receives it, not even an admin. */
    if (!(p->role == CR_ROLE_AGENT && strcmp(p->node, node) == 0) &&
        (p->role != CR_ROLE_ADMIN || desired)) {
        ctl_reply_err(req, 403, CR_EPERM, NULL, "only node '%s''s own token may do this", node);
        return;
    }
    if (status) {
        agent_status(c, req, NULL, node);
    } else {
        agent_desired(c, req, node);
    }
}

/* ------------------------------------------------------------------------ */
/* Node routes                                                              */

typedef struct drain_arg {
    char node[CTL_NAME_MAX];
    char reason[256];
    bool drain;
} drain_arg;

static void drain_set(ctl_node *n, const drain_arg *a)
{
    n->drained = a->drain;
    if (n->state != NS_LOST) {
        n->state = a->drain ? NS_DRAINED : NS_UP;
    }
    snprintf(n->reason, sizeof n->reason, "%s", a->drain ? a->reason : "");
}

/* A drain or undrain is durable: apply it. mu held. */
static json_t *drain_committed(ctl *c, void *argp, int status, unsigned *code)
{
    const drain_arg *a = argp;
    ctl_node *n = status == 0 ? ctl_node_find(c, a->node) : NULL;
    (void)code;
    if (!n) {
        return NULL;
    }
    drain_set(n, a);
    n->sched_dirty = true;
    ctl_sched_kick(c);
    cr_info("node=%s %s: %s", n->name, a->drain ? "drained" : "undrained", n->reason);
    /* a heartbeat stored meanwhile wrote the node as it was: store it again */
    cr_store_txn *txn = cr_store_txn_new();
    node_persist(txn, n);
    cr_store_submit(c->store, txn, NULL, NULL);
    return node_json(c, n, false, NULL); /* drain is an admin's: all */
}

void ctl_route_nodes(ctl *c, cr_http_req *req, const cr_principal *p, char **seg, size_t nseg)
{
    const char *m = cr_http_method(req);
    if (p->role != CR_ROLE_ADMIN && p->role != CR_ROLE_USER) {
        ctl_reply_err(req, 403, CR_EPERM, NULL, "role '%s' may not use /v1/nodes",
                      cr_role_name(p->role));
        return;
    }
    if (nseg == 2 && strcmp(m, "GET") == 0) {
        cr_http_set_route(req, "/v1/nodes");
        json_t *items = json_array();
        pthread_mutex_lock(&c->mu);
        for (size_t i = 0; i < c->nnodes; i++) {
            json_array_append_new(items, node_json_labelled(c, c->nodes[i], false, p));
        }
        size_t n = c->nnodes;
        pthread_mutex_unlock(&c->mu);
        ctl_reply_json(req, 200, json_pack("{s:o,s:I}", "items", items, "count", (json_int_t)n));
        return;
    }
    if (nseg == 3 && strcmp(m, "GET") == 0) {
        cr_http_set_route(req, "/v1/nodes/{name}");
        pthread_mutex_lock(&c->mu);
        ctl_node *n = ctl_node_find(c, seg[2]);
        json_t *v = n ? node_json_labelled(c, n, true, p) : NULL;
        pthread_mutex_unlock(&c->mu);
        if (!v) {
            ctl_reply_err(req, 404, CR_ENOENT, NULL, "node '%s' not found", seg[2]);
        } else {
            ctl_reply_json(req, 200, v);
        }
        return;
    }
    if (nseg == 4 && strcmp(m, "POST") == 0 && strcmp(seg[3], "approve") == 0) {
        cr_http_set_route(req, "/v1/nodes/{name}/approve");
        if (p->role != CR_ROLE_ADMIN) {
            ctl_reply_err(req, 403, CR_EPERM, NULL, "only an admin may approve nodes");
            return;
        }
        pthread_mutex_lock(&c->mu);
        ctl_node *n = ctl_node_find(c, seg[2]);
        if (!n) {
            pthread_mutex_unlock(&c->mu);
            ctl_reply_err(req, 404, CR_ENOENT, NULL, "node '%s' not found", seg[2]);
            return;
        }
        if (n->deleting) {
            pthread_mutex_unlock(&c->mu);
            ctl_reply_err(req, 409, CR_ECONFLICT, NULL, "node '%s' is being deleted", seg[2]);
            return;
        }
        if (n->pending_approval) {
            n->pending_approval = false;
            n->drained = false;
            if (n->state != NS_LOST) {
                n->state = NS_UP;
            }
            n->reason[0] = '\0';
            node_settle_unfit(n); /* approved, but its agent takes no jobs */
            n->sched_dirty = true;
            ctl_sched_kick(c);
            cr_info("node=%s approved", n->name);
        }
        cr_store_txn *txn = cr_store_txn_new();
        node_persist(txn, n);
        ctl_commit_reply(c, txn, req, 200, node_json(c, n, false, p));
        pthread_mutex_unlock(&c->mu);
        return;
    }
    if (nseg == 4 && strcmp(m, "POST") == 0 && strcmp(seg[3], "reclaim") == 0) {
        cr_http_set_route(req, "/v1/nodes/{name}/reclaim");
        if (p->role != CR_ROLE_ADMIN) {
            ctl_reply_err(req, 403, CR_EPERM, NULL, "only an admin may reclaim nodes");
            return;
        }
        size_t len;
        const char *body = cr_http_body(req, &len);
        json_t *v = NULL;
        cr_json_err err;
        int64_t in_s = 30;
        static const char *const members[] = {"in_s", NULL};
        if (len > 0 &&
            (cr_json_parse_object(body, len, &v, &err) || cr_json_only(v, "", members, &err) ||
             cr_json_int(v, "", "in_s", false, 1, 3600, &in_s, &err))) {
            json_decref(v);
            ctl_reply_jerr(req, &err);
            return;
        }
        json_decref(v);
        char by[CTL_NAME_MAX + 16];
        snprintf(by, sizeof by, "by token '%s'", p->name);
        size_t njobs = 0;
        int rc = ctl_node_reclaim(c, seg[2], in_s, by, &njobs);
        if (rc == CR_ENOENT) {
            ctl_reply_err(req, 404, CR_ENOENT, NULL, "node '%s' not found", seg[2]);
        } else if (rc == CR_ECONFLICT) {
            ctl_reply_err(req, 409, CR_ECONFLICT, NULL, "node '%s' is being deleted", seg[2]);
        } else if (rc != 0) {
            ctl_reply_commit_err(req, rc);
        } else {
            ctl_reply_json(req, 200,
                           json_pack("{s:s,s:I,s:I}", "node", seg[2], "in_s", (json_int_t)in_s,
                                     "requeued", (json_int_t)njobs));
        }
        return;
    }
    if (nseg == 4 && strcmp(m, "POST") == 0 &&
        (strcmp(seg[3], "drain") == 0 || strcmp(seg[3], "undrain") == 0)) {
        cr_http_set_route(req, "/v1/nodes/{name}/drain");
        if (p->role != CR_ROLE_ADMIN) {
            ctl_reply_err(req, 403, CR_EPERM, NULL, "only an admin may drain nodes");
            return;
        }
        size_t len;
        const char *body = cr_http_body(req, &len);
        json_t *v = NULL;
        cr_json_err err;
        const char *reason = "";
        static const char *const members[] = {"reason", NULL};
        if (len > 0 &&
            (cr_json_parse_object(body, len, &v, &err) || cr_json_only(v, "", members, &err) ||
             cr_json_str(v, "", "reason", false, 200, &reason, &err))) {
            json_decref(v);
            ctl_reply_jerr(req, &err);
            return;
        }
        bool drain = strcmp(seg[3], "drain") == 0;
        pthread_mutex_lock(&c->mu);
        ctl_node *n = ctl_node_find(c, seg[2]);
        if (!n) {
            pthread_mutex_unlock(&c->mu);
            json_decref(v);
            ctl_reply_err(req, 404, CR_ENOENT, NULL, "node '%s' not found", seg[2]);
            return;
        }
        if (n->deleting) {
            pthread_mutex_unlock(&c->mu);
            json_decref(v);
            ctl_reply_err(req, 409, CR_ECONFLICT, NULL, "node '%s' is being deleted", seg[2]);
            return;
        }
        if (!drain && *n->unfit) {
            pthread_mutex_unlock(&c->mu);
            json_decref(v);
            ctl_reply_err(req, 409, CR_ECONFLICT, NULL,
                          "node '%s': its agent takes no jobs (%s); fix the node or its "
                          "require_isolation, then restart the agent",
                          n->name, n->unfit);
            return;
        }
        if (!drain && n->pending_approval) {
            pthread_mutex_unlock(&c->mu);
            json_decref(v);
            ctl_reply_err(req, 409, CR_ECONFLICT, NULL,
                          "node '%s' awaits approval: corral nodes approve %s", n->name, n->name);
            return;
        }
        /* Stored first (the row computed on a copy), applied once durable. */
        drain_arg *a = cr_calloc(1, sizeof *a);
        snprintf(a->node, sizeof a->node, "%s", n->name);
        snprintf(a->reason, sizeof a->reason, "%s", *reason ? reason : "drained by admin");
        a->drain = drain;
        ctl_node tmp = *n;
        drain_set(&tmp, a);
        cr_store_txn *txn = cr_store_txn_new();
        node_persist(txn, &tmp);
        ctl_state_commit_apply(c, txn, req, drain_committed, a);
        pthread_mutex_unlock(&c->mu);
        json_decref(v);
        return;
    }
    ctl_reply_err(req, 404, CR_ENOENT, NULL, "no route %s %s", m, cr_http_path(req));
}

/* ------------------------------------------------------------------------ */
/* Spot reclaim (ctl_int.h)                                                 */

void ctl_nodes_reclaims(ctl *c)
{
    char names[8][CTL_NAME_MAX];
    int64_t secs[8];
    size_t k = 0;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->nnodes && k < 8; i++) {
        ctl_node *n = c->nodes[i];
        if (n->reclaim_req_s > 0) {
            snprintf(names[k], sizeof names[k], "%s", n->name);
            secs[k++] = n->reclaim_req_s;
            n->reclaim_req_s = 0;
            n->reclaimed = true; /* once: its agent keeps telling until answered */
        }
    }
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < k; i++) {
        size_t nj = 0;
        int rc = ctl_node_reclaim(c, names[i], secs[i], "its agent's spot notice", &nj);
        if (rc != 0) {
            cr_warn("node=%s: spot reclaim not stored: %s", names[i], cr_strerror(rc));
        }
    }
}

int ctl_node_reclaim(ctl *c, const char *node, int64_t in_s, const char *by, size_t *njobs)
{
    *njobs = 0;
    pthread_mutex_lock(&c->mu);
    ctl_node *n = ctl_node_find(c, node);
    if (!n || n->deleting) {
        pthread_mutex_unlock(&c->mu);
        return n ? CR_ECONFLICT : CR_ENOENT;
    }
    drain_arg a = {.drain = true};
    snprintf(a.node, sizeof a.node, "%s", n->name);
    snprintf(a.reason, sizeof a.reason, "spot reclaim: its provider takes it back in %llds (%s)",
             (long long)in_s, by);
    char why[400];
    snprintf(why, sizeof why, "node %s is reclaimed by its provider in %llds (%s): requeued",
             n->name, (long long)in_s, by);
    /* Stored first: the node drained and each running job requeue-requested,
     * computed on copies. */
    ctl_node tmp = *n;
    drain_set(&tmp, &a);
    cr_store_txn *txn = cr_store_txn_new();
    node_persist(txn, &tmp);
    size_t cap = n->njobs ? n->njobs : 1, k = 0;
    int64_t *ids = cr_calloc(cap, sizeof *ids);
    uint64_t *vers = cr_calloc(cap, sizeof *vers);
    for (size_t i = 0; i < n->njobs; i++) {
        ctl_job *j = ctl_job_get(c, n->jobs[i]);
        if (!j || j->state != JS_RUNNING || j->committing || j->ending) {
            continue;
        }
        ctl_job *cp = ctl_job_copy(j);
        cp->requeue_requested = true;
        cp->state = JS_COMPLETING;
        ctl_job_set_reason(cp, "requeue requested: node reclaimed by its provider");
        ctl_job_persist(c, txn, cp, "requeue-requested", why);
        ctl_job_free(cp);
        ids[k] = j->id;
        vers[k++] = j->ver;
    }
    pthread_mutex_unlock(&c->mu);
    int rc = cr_store_commit(c->store, txn);
    pthread_mutex_lock(&c->mu);
    n = rc == 0 ? ctl_node_find(c, node) : NULL;
    if (n) {
        drain_set(n, &a);
        n->sched_dirty = true;
        ctl_sched_kick(c);
        cr_warn("node=%s: %s", n->name, a.reason);
        for (size_t i = 0; i < k; i++) {
            ctl_job *j = ctl_job_get(c, ids[i]);
            if (!j || j->ver != vers[i] || j->state != JS_RUNNING) {
                continue; /* moved on meanwhile: its newer row stands */
            }
            j->requeue_requested = true;
            j->state = JS_COMPLETING;
            j->stop_grace_s = in_s > 1 ? in_s - 1 : 1; /* gone before the node is */
            ctl_job_set_reason(j, "requeue requested: node reclaimed by its provider");
            j->ver++;
            for (size_t q = 0; q < j->nplace; q++) {
                ctl_node *m = ctl_node_find(c, j->place[q].node);
                if (m) {
                    ctl_node_bump(c, m);
                }
            }
            (*njobs)++;
        }
        ctl_node_bump(c, n);
    }
    pthread_mutex_unlock(&c->mu);
    free(ids);
    free(vers);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Timers                                                                   */

/* Time limits, commit first: the stop of a job past its limit (timed_out,
 * so its end is a failure, not a retry) is stored before the agents are
 * told; one whose row could not be stored keeps running and is stopped
 * at a later tick. */
typedef struct limit_rec {
    int64_t id;
    uint64_t ver; /* the job's version when its row was computed */
    int run;
    bool idle; /* an idle-GPU requeue, not a time limit's stop */
} limit_rec;

typedef struct limit_set {
    cr_store_txn *txn; /* the stops' rows */
    limit_rec *recs;
    size_t n, cap;
} limit_set;

/* An interactive allocation (corral alloc) is ended, not requeued: its
 * shell went with it. */
static bool idle_cancels(const ctl_job *j)
{
    return json_is_true(json_object_get(j->spec, "interactive"));
}

static void limit_stop(ctl_job *j, bool idle)
{
    j->state = JS_COMPLETING;
    if (idle && idle_cancels(j)) {
        j->cancel_requested = true;
        ctl_job_set_reason(j, "idle GPUs reclaimed: the idle allocation is ended: stopping");
        return;
    }
    if (idle) {
        j->requeue_requested = true;
        ctl_job_set_reason(j, "idle GPUs reclaimed: requeue requested: stopping");
        return;
    }
    j->timed_out = true;
    ctl_job_set_reason(j, "time limit exceeded: stopping");
}

/* Idle-GPU reclaim, part 1 (a status report): a job whose GPUs on this
 * node are all at most CTL_IDLE_UTIL_PCT busy is idle from the first such
 * report of its run on; any busier report ends that. Its idle GPU-seconds
 * are booked as usage of the GPU type with CTL_IDLE_SUFFIX (for the idle
 * share of `corral usage`). A gang's nodes report apart: one busy node
 * resets it each heartbeat, so a busy gang is never idle for long. mu held. */
static void idle_sample(ctl *c, cr_store_txn *txn, ctl_job *j, size_t held, double util_max,
                        double dt, int64_t now_mono, int64_t now)
{
    if (util_max > CTL_IDLE_UTIL_PCT) {
        j->idle_since_mono = 0;
        return;
    }
    if (j->idle_since_mono == 0 || j->idle_run != j->runs) {
        j->idle_since_mono = now_mono;
        j->idle_run = j->runs;
    }
    char ty[CTL_NAME_MAX + 8];
    snprintf(ty, sizeof ty, "%s%s", *j->run_type ? j->run_type : j->gpu_type, CTL_IDLE_SUFFIX);
    ctl_usage_add(c, txn, j->tenant, ty, now, dt * (double)held, 0);
}

/* Idle-GPU reclaim, part 2 (the tick): a running job idle for its
 * tenant's idle after_s is warned (an event, corral_jobs_idle_warned_total),
 * once a run; with action requeue, grace_s later it is requeued as a
 * `corral requeue` would (its checkpoint signal, or SIGTERM, then SIGKILL
 * after grace_s; no retry used), into lim like a time limit's stop.
 * Service replicas are left to the autoscaler. mu held. */
static void idle_check(ctl *c, ctl_job *j, int64_t now_mono, cr_store_txn **txn, limit_set *lim,
                       bool *stop)
{
    int64_t after = 0, grace = 0;
    bool requeue = false;
    *stop = false;
    if (j->idle_since_mono == 0 || j->idle_run != j->runs || json_object_get(j->spec, "service") ||
        !ctl_tenant_idle_policy(c, j->tenant, &after, &grace, &requeue)) {
        return;
    }
    int64_t idle_ns = now_mono - j->idle_since_mono;
    if (idle_ns < after * CR_NS_PER_SEC) {
        return;
    }
    if (j->idle_warned_run != j->runs) {
        j->idle_warned_run = j->runs;
        atomic_fetch_add(&c->idle_warned, 1);
        char ev[300];
        if (requeue) {
            snprintf(ev, sizeof ev,
                     "its GPUs have been idle (at most %d%% busy) for %llds, the tenant's "
                     "idle limit: it is %s in %llds unless they get busy",
                     CTL_IDLE_UTIL_PCT, (long long)(idle_ns / CR_NS_PER_SEC),
                     idle_cancels(j) ? "ended" : "requeued", (long long)grace);
        } else {
            snprintf(ev, sizeof ev,
                     "its GPUs have been idle (at most %d%% busy) for %llds, the tenant's "
                     "idle limit (the policy only warns)",
                     CTL_IDLE_UTIL_PCT, (long long)(idle_ns / CR_NS_PER_SEC));
        }
        if (!*txn) {
            *txn = cr_store_txn_new();
        }
        cr_store_txn_event(*txn, j->id, cr_now_ns(), "idle", ev);
        cr_info("job=%lld idle: %s", (long long)j->id, ev);
        return;
    }
    *stop = requeue && idle_ns >= (after + grace) * CR_NS_PER_SEC;
    (void)lim;
}

/* Jobs past their time limit: their stops (they end as failed) into
 * lim, computed on copies; --signal warnings are due too. mu held. */
static void enforce_time_limits(ctl *c, cr_store_txn **txn, limit_set *lim)
{
    int64_t now = cr_mono_ns(); /* a wall-clock jump must not end a job */
    for (size_t i = 0; i < c->nnodes; i++) {
        ctl_node *n = c->nodes[i];
        for (size_t k = 0; k < n->njobs; k++) {
            ctl_job *j = ctl_job_get(c, n->jobs[k]);
            if (j && j->state == JS_RUNNING && !j->start_unstored) {
                ctl_batch_signal_due(c, j, now, txn); /* --signal SIG@SECONDS (once a run) */
            }
            if (!j || j->state != JS_RUNNING || j->start_unstored || j->committing) {
                continue;
            }
            bool idle = false;
            if (j->time_limit_s <= 0 || j->start_ns <= 0 ||
                now - j->start_mono_ns <= j->time_limit_s * CR_NS_PER_SEC) {
                idle_check(c, j, now, txn, lim, &idle);
                if (!idle) {
                    continue;
                }
            }
            bool seen = false; /* (a gang is on several nodes) */
            for (size_t q = 0; q < lim->n; q++) {
                seen = seen || lim->recs[q].id == j->id;
            }
            if (seen) {
                continue;
            }
            if (!lim->txn) {
                lim->txn = cr_store_txn_new();
                cr_store_txn_splittable(lim->txn); /* per job: independent */
            }
            CR_GROW(lim->recs, lim->n, lim->cap);
            lim->recs[lim->n++] =
                (limit_rec){.id = j->id, .ver = j->ver, .run = j->runs, .idle = idle};
            ctl_job *cp = ctl_job_copy(j);
            limit_stop(cp, idle);
            char why[160];
            if (idle) {
                snprintf(why, sizeof why,
                         "its GPUs were idle (at most %d%% busy) for %llds: %s (the "
                         "tenant's idle policy)",
                         CTL_IDLE_UTIL_PCT, (long long)((now - j->idle_since_mono) / CR_NS_PER_SEC),
                         idle_cancels(j) ? "the interactive allocation is ended" : "requeued");
            } else {
                snprintf(why, sizeof why, "ran past its time limit of %llds",
                         (long long)j->time_limit_s);
            }
            ctl_job_persist(c, lim->txn, cp,
                            !idle             ? "time-limit"
                            : idle_cancels(j) ? "idle-cancel"
                                              : "idle-requeue",
                            why);
            ctl_job_free(cp);
        }
    }
}

/* The stops in lim were stored (rc 0): apply those whose job did not move
 * on meanwhile and tell their nodes. mu held. */
static void limits_apply(ctl *c, const limit_set *lim, int rc)
{
    static _Thread_local int64_t last_warn;
    if (rc != 0) {
        int64_t now = cr_mono_ns();
        if (now - last_warn >= 10 * CR_NS_PER_SEC) {
            last_warn = now;
            cr_warn("%zu jobs past their time limit: the stop was not stored (%s): they keep "
                    "running and are stopped once it is",
                    lim->n, cr_strerror(rc));
        }
        return;
    }
    for (size_t i = 0; i < lim->n; i++) {
        ctl_job *j = ctl_job_get(c, lim->recs[i].id);
        if (!j || j->ver != lim->recs[i].ver || j->state != JS_RUNNING ||
            j->runs != lim->recs[i].run) {
            continue; /* changed meanwhile: its newer row came after this one */
        }
        limit_stop(j, lim->recs[i].idle);
        if (lim->recs[i].idle) {
            atomic_fetch_add(&c->idle_reclaimed, 1);
        }
        j->ver++; /* the row stored is this state */
        for (size_t q = 0; q < j->nplace; q++) {
            ctl_node *m = ctl_node_find(c, j->place[q].node);
            if (m) {
                ctl_node_bump(c, m);
            }
        }
    }
}

int64_t ctl_lease_requeue_ns(const ctl_config *cfg)
{
    return (cfg->lost_after_s + cfg->grace_s + CTL_LEASE_MARGIN_S) * CR_NS_PER_SEC;
}

static bool keeps_running(const ctl_job *j)
{
    return json_is_true(json_object_get(j->spec, "keep_running_on_partition"));
}

/* The jobs placed on lost node n end (requeued without using a retry)
 * into *txn, except those marked keep_running_on_partition: their agent
 * keeps them running while cut off, so they stay placed on the node (back
 * with it, or ended by a cancel or the node's delete). mu held. */
static void node_requeue(ctl *c, ctl_node *n, cr_store_txn **txn)
{
    if (!*txn) {
        *txn = cr_store_txn_new();
        cr_store_txn_splittable(*txn); /* per node and job: independent */
    }
    char why[400];
    snprintf(why, sizeof why, "node %s lost (%s)", n->name, n->reason);
    size_t nids = n->njobs, kept = 0;
    int64_t *ids = cr_calloc(nids ? nids : 1, sizeof *ids);
    memcpy(ids, n->jobs, nids * sizeof *ids);
    for (size_t i = 0; i < nids; i++) {
        ctl_job *j = ctl_job_get(c, ids[i]);
        if (!j) {
            ctl_node_del_job(n, ids[i]);
            continue;
        }
        if (keeps_running(j)) {
            kept++;
            continue;
        }
        ctl_job_ended(c, *txn, j, 0, 0, why, true);
        ctl_node_del_job(n, j->id); /* in case the placement did not name it */
    }
    free(ids);
    if (kept > 0) {
        cr_warn("node=%s lost: %zu job(s) marked keep_running_on_partition stay placed on it",
                n->name, kept);
    }
    ctl_node_bump(c, n);
    ctl_sched_kick(c);
}

/* Marks n lost (its loss is stored, or could not be): out of placement
 * now; its jobs are requeued into a later txn by ctl_nodes_tick once the
 * node lease has stopped their copies there (requeue_at_ns). mu held. */
static void node_lose(ctl *c, ctl_node *n, int64_t now_mono)
{
    n->state = NS_LOST;
    snprintf(n->reason, sizeof n->reason, "no heartbeat for %llds",
             (long long)((now_mono - n->last_seen_ns) / CR_NS_PER_SEC));
    n->requeue_at_ns = n->last_seen_ns + ctl_lease_requeue_ns(&c->cfg);
    cr_warn("node=%s lost: %s; its %zu job(s) are requeued in %.0fs, once the node lease has "
            "stopped them there",
            n->name, n->reason, n->njobs, (double)(n->requeue_at_ns - now_mono) / 1e9);
    n->sched_dirty = true;
    ctl_node_bump(c, n);
    ctl_sched_kick(c);
}

/* A node silent for longer than lost_after_s is lost. Commit first: the
 * loss is stored (mu released meanwhile: the store's other callbacks take
 * mu) before anyone can see it, so a lost node stays lost across a crash
 * of the controller; a node heard from while its loss was being stored is
 * not lost (its "up" is stored again). */
void ctl_nodes_tick(ctl *c, int64_t now_mono)
{
    pthread_mutex_lock(&c->mu);
    cr_store_txn *txn = NULL, *loss = NULL;
    limit_set lim = {0};
    enforce_time_limits(c, &txn, &lim);
    for (size_t i = 0; i < c->nnodes; i++) {
        ctl_node *n = c->nodes[i];
        ctl_desired_answer(c, n, true, now_mono);
        if (n->lost_at_start && c->sched_restored) {
            /* Stored lost with jobs still on it: the controller stopped
             * before their requeue was stored. Their agent has not been
             * answered since before the restart (last_seen_ns is the load
             * time): requeued a whole lease wait from then. Once. */
            n->lost_at_start = false;
            if (n->state == NS_LOST && n->njobs > 0) {
                n->requeue_at_ns = n->last_seen_ns + ctl_lease_requeue_ns(&c->cfg);
                cr_warn("node=%s was lost before the restart: its %zu job(s) are requeued in "
                        "%.0fs",
                        n->name, n->njobs, (double)(n->requeue_at_ns - now_mono) / 1e9);
            }
        }
        if (n->state == NS_LOST && n->requeue_at_ns > 0 && now_mono >= n->requeue_at_ns &&
            !n->deleting) {
            n->requeue_at_ns = 0;
            cr_warn("node=%s: lost for its node lease and grace: requeueing its jobs", n->name);
            node_requeue(c, n, &txn);
        }
        if (n->state == NS_LOST || n->loss_pending || n->deleting ||
            now_mono - n->last_seen_ns <= c->cfg.lost_after_s * CR_NS_PER_SEC) {
            continue;
        }
        n->loss_pending = true;
        n->loss_seen_ns = n->last_seen_ns;
        if (!loss) {
            loss = cr_store_txn_new();
        }
        node_persist(loss, n);
    }
    if (txn) {
        cr_store_submit(c->store, txn, NULL, NULL);
        txn = NULL;
    }
    if (!loss && !lim.txn) {
        pthread_mutex_unlock(&c->mu);
        return;
    }
    ctl_wait wl, wt;
    ctl_wait_submit(c, &wt, lim.txn);
    ctl_wait_submit(c, &wl, loss);
    pthread_mutex_unlock(&c->mu);
    int lrc = ctl_wait_end(&wt);
    int rc = ctl_wait_end(&wl);
    pthread_mutex_lock(&c->mu);
    if (lim.n) {
        limits_apply(c, &lim, lrc);
    }
    free(lim.recs);
    for (size_t i = 0; i < c->nnodes; i++) {
        ctl_node *n = c->nodes[i];
        if (!n->loss_pending) {
            continue;
        }
        n->loss_pending = false;
        if (n->state == NS_LOST || n->last_seen_ns != n->loss_seen_ns) {
            if (n->state != NS_LOST) { /* heard from meanwhile: store it as up again */
                if (!txn) {
                    txn = cr_store_txn_new();
                }
                node_persist(txn, n);
            }
            continue;
        }
        if (rc != 0) {
            /* It is gone all the same: out of placement now, stored by the
             * next change of the node (or lost again after a restart). */
            cr_warn("node=%s: its loss was not stored: %s", n->name, cr_strerror(rc));
        }
        node_lose(c, n, cr_mono_ns());
    }
    if (txn) {
        cr_store_submit(c->store, txn, NULL, NULL);
    }
    pthread_mutex_unlock(&c->mu);
}

void ctl_nodes_release_polls(ctl *c)
{
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->nnodes; i++) {
        ctl_desired_answer(c, c->nodes[i], false, 0);
    }
    pthread_mutex_unlock(&c->mu);
}

void ctl_node_remove(ctl *c, ctl_node *n)
{
    size_t i = 0;
    while (i < c->nnodes && c->nodes[i] != n) {
        i++;
    }
    if (i == c->nnodes) {
        return;
    }
    ctl_desired_answer(c, n, false, 0);
    c->nodes[i] = c->nodes[--c->nnodes];
    memset(c->node_slots, 0, c->node_slots_cap * sizeof *c->node_slots);
    for (size_t k = 0; k < c->nnodes; k++) {
        ctl_node_index_put(c, k);
    }
    node_free(n);
}
