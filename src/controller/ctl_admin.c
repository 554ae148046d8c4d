/*
 * ctl_admin.c - tokens, tenants, usage accounting, and the first start
 * (bootstrap admin token, join token).
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_parse.h"
#include "cr_time.h"

#include <errno.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Tenants                                                                  */

ctl_tenant *ctl_tenant_find(ctl *c, const char *name)
{
    for (size_t i = 0; i < c->ntenants; i++) {
        if (strcmp(c->tenants[i]->name, name) == 0) {
            return c->tenants[i];
        }
    }
    return NULL;
}

bool ctl_tenant_known(ctl *c, const char *name)
{
    pthread_mutex_lock(&c->mu);
    bool ok = ctl_tenant_find(c, name) != NULL;
    pthread_mutex_unlock(&c->mu);
    return ok;
}

static json_t *tenant_json(const ctl_tenant *t)
{
    json_t *v = json_pack("{s:s,s:s,s:f,s:O,s:O,s:O}", "name", t->name, "parent", t->parent,
                          "weight", t->weight, "quotas", t->quotas, "limits", t->limits,
                          "lending_limits", t->lending);
    json_object_set_new(v, "idle",
                        t->idle_after_s > 0
                            ? json_pack("{s:I,s:I,s:s}", "after_s", (json_int_t)t->idle_after_s,
                                        "grace_s", (json_int_t)t->idle_grace_s, "action",
                                        t->idle_requeue ? "requeue" : "warn")
                            : json_null());
    json_t *hy = NULL;
    if (t->hy_constraint[0] || t->hy_burst_budget >= 0) {
        hy = json_object();
        if (t->hy_constraint[0]) {
            json_object_set_new(hy, "constraint", json_string(t->hy_constraint));
            json_object_set_new(hy, "locked", json_boolean(t->hy_locked));
        }
        if (t->hy_burst_budget >= 0) {
            json_object_set_new(hy, "burst_budget", json_real(t->hy_burst_budget));
        }
    }
    json_object_set_new(v, "hybrid", hy ? hy : json_null());
    return v;
}

bool ctl_tenant_idle_policy(ctl *c, const char *tenant, int64_t *after_s, int64_t *grace_s,
                            bool *requeue)
{
    int n = 0;
    for (ctl_tenant *t = ctl_tenant_find(c, tenant); t && n <= CTL_TENANT_DEPTH_MAX;
         t = *t->parent ? ctl_tenant_find(c, t->parent) : NULL, n++) {
        if (t->idle_after_s > 0) {
            *after_s = t->idle_after_s;
            *grace_s = t->idle_grace_s;
            *requeue = t->idle_requeue;
            return true;
        }
    }
    return false;
}

/* "idle": {"after_s", "grace_s", "action"} (or null: none) into the outs. */
static int idle_parse(const json_t *v, int64_t *after, int64_t *grace, bool *requeue,
                      cr_json_err *err)
{
    static const char *const members[] = {"after_s", "grace_s", "action", NULL};
    static const char *const actions[] = {"warn", "requeue", NULL};
    json_t *o = json_object_get(v, "idle");
    *after = *grace = 0;
    *requeue = false;
    if (!o || json_is_null(o)) {
        return 0;
    }
    const char *action = "warn";
    *grace = 60;
    int rc;
    if (!json_is_object(o)) {
        return cr_json_fail(err, CR_EINVAL, "idle", "field 'idle': must be an object or null");
    }
    if ((rc = cr_json_only(o, "idle", members, err)) ||
        (rc = cr_json_int(o, "idle", "after_s", true, 1, CTL_IDLE_MAX_S, after, err)) ||
        (rc = cr_json_int(o, "idle", "grace_s", false, 0, CTL_IDLE_MAX_S, grace, err)) ||
        (rc = cr_json_str(o, "idle", "action", false, 15, &action, err)) ||
        (rc = cr_json_enum(action, "idle.action", actions, err))) {
        return rc;
    }
    *requeue = strcmp(action, "requeue") == 0;
    return 0;
}

/* "hybrid": {"constraint", "locked", "burst_budget"} (or null: none) into
 * the outs (constraint CTL_HYBRID_CONSTRAINT_MAX bytes; budget -1: none). */
static int hybrid_parse(const json_t *v, char *constraint, bool *locked, double *budget,
                        cr_json_err *err)
{
    static const char *const members[] = {"constraint", "locked", "burst_budget", NULL};
    json_t *o = json_object_get(v, "hybrid");
    constraint[0] = '\0';
    *locked = false;
    *budget = -1;
    if (!o || json_is_null(o)) {
        return 0;
    }
    if (!json_is_object(o)) {
        return cr_json_fail(err, CR_EINVAL, "hybrid", "field 'hybrid': must be an object or null");
    }
    const char *cons = "";
    int rc;
    if ((rc = cr_json_only(o, "hybrid", members, err)) ||
        (rc = cr_json_str(o, "hybrid", "constraint", false, CTL_HYBRID_CONSTRAINT_MAX - 1, &cons,
                          err)) ||
        (rc = cr_json_bool(o, "hybrid", "locked", false, locked, err))) {
        return rc;
    }
    if (json_object_get(o, "burst_budget") &&
        (rc = cr_json_num(o, "hybrid", "burst_budget", false, 0, CTL_BURST_BUDGET_MAX, budget,
                          err))) {
        return rc;
    }
    char why[200];
    if (*cons && ctl_batch_nodes_check("constraint", cons, why, sizeof why) != 0) {
        return cr_json_fail(err, CR_EINVAL, "hybrid.constraint", "field 'hybrid.constraint': %s",
                            why);
    }
    for (const char *p = cons; *p;) {
        size_t len = strcspn(p, "&,");
        if (!memchr(p, '=', len)) {
            return cr_json_fail(err, CR_EINVAL, "hybrid.constraint",
                                "field 'hybrid.constraint': want LABEL=VALUE terms, not '%.*s'",
                                (int)(len < 64 ? len : 64), p);
        }
        p += len + (p[len] != '\0');
    }
    if (*locked && !*cons) {
        return cr_json_fail(err, CR_EINVAL, "hybrid.locked",
                            "field 'hybrid.locked': needs a constraint to lock");
    }
    snprintf(constraint, CTL_HYBRID_CONSTRAINT_MAX, "%s", cons);
    return 0;
}

static void tenant_persist(cr_store_txn *txn, const ctl_tenant *t)
{
    json_t *v = tenant_json(t);
    char *doc = json_dumps(v, JSON_COMPACT);
    cr_store_txn_put(txn, "tenant", t->name, doc);
    free(doc);
    json_decref(v);
}

static json_t *obj_or_new(json_t *o)
{
    return json_is_object(o) ? json_incref(o) : json_object();
}

/* The new tenant's bounds are borrowed (referenced). */
static ctl_tenant *tenant_add(ctl *c, const char *name, double weight, json_t *quotas)
{
    ctl_tenant *t = cr_calloc(1, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->weight = weight;
    t->quotas = obj_or_new(quotas);
    t->limits = json_object();
    t->lending = json_object();
    t->fair_rank = -1;
    t->level_fs = NAN;
    t->hy_burst_budget = -1;
    CR_GROW(c->tenants, c->ntenants, c->captenants);
    c->tenants[c->ntenants++] = t;
    c->tenants_dirty = true;
    return t;
}

static void tenant_set_tree(ctl_tenant *t, const char *parent, json_t *limits, json_t *lending)
{
    snprintf(t->parent, sizeof t->parent, "%s", parent ? parent : "");
    json_decref(t->limits);
    json_decref(t->lending);
    t->limits = obj_or_new(limits);
    t->lending = obj_or_new(lending);
}

ctl_tenant *ctl_tenant_ensure(ctl *c, cr_store_txn *txn, const char *name)
{
    ctl_tenant *t = ctl_tenant_find(c, name);
    if (!t) {
        t = tenant_add(c, name, 1.0, NULL);
        tenant_persist(txn, t);
    }
    return t;
}

/* {"type": gpus} at member key of v, each 0..1000000; *out returned new. */
static int gpu_map(const json_t *v, const char *key, json_t **out, cr_json_err *err)
{
    json_t *q = NULL;
    int rc = cr_json_obj(v, "", key, false, &q, err);
    if (rc) {
        return rc;
    }
    json_t *res = json_object();
    const char *k;
    json_t *x;
    json_object_foreach(q, k, x)
    {
        char f[300];
        cr_json_path(f, sizeof f, key, k);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > 1000000) {
            json_decref(res);
            return cr_json_fail(err, CR_EINVAL, f, "field '%s': must be an integer 0..1000000", f);
        }
        json_object_set(res, k, x);
    }
    *out = res;
    return 0;
}

typedef struct tenant_in {
    const char *name;
    const char *parent; /* NULL: not given */
    double weight;
    int64_t idle_after_s, idle_grace_s;
    bool idle_requeue;
    char hy_constraint[CTL_HYBRID_CONSTRAINT_MAX];
    bool hy_locked;
    double hy_burst_budget;
    json_t *quotas, *limits, *lending; /* owned */
} tenant_in;

static void tenant_in_fini(tenant_in *in)
{
    json_decref(in->quotas);
    json_decref(in->limits);
    json_decref(in->lending);
}

/* Validate {"name"?, "parent", "weight", "quotas", "limits",
 * "lending_limits"} into in (its maps returned new: tenant_in_fini). */
static int tenant_parse(const json_t *v, bool with_name, tenant_in *in, cr_json_err *err)
{
    static const char *const with[] = {"name",           "parent", "weight", "quotas", "limits",
                                       "lending_limits", "idle",   "hybrid", NULL};
    static const char *const without[] = {"parent",         "weight", "quotas", "limits",
                                          "lending_limits", "idle",   "hybrid", NULL};
    int rc;
    if ((rc = cr_json_only(v, "", with_name ? with : without, err)) ||
        (with_name && (rc = cr_json_str(v, "", "name", true, CTL_NAME_MAX - 1, &in->name, err))) ||
        (rc = cr_json_str(v, "", "parent", false, CTL_NAME_MAX - 1, &in->parent, err)) ||
        (rc = cr_json_num(v, "", "weight", false, 1e-6, 1e6, &in->weight, err)) ||
        (rc = gpu_map(v, "quotas", &in->quotas, err)) ||
        (rc = gpu_map(v, "limits", &in->limits, err)) ||
        (rc = gpu_map(v, "lending_limits", &in->lending, err)) ||
        (rc = idle_parse(v, &in->idle_after_s, &in->idle_grace_s, &in->idle_requeue, err)) ||
        (rc = hybrid_parse(v, in->hy_constraint, &in->hy_locked, &in->hy_burst_budget, err))) {
        return rc;
    }
    if (with_name && (rc = ctl_name_check(in->name, "name", err)) != 0) {
        return rc;
    }
    if (in->parent && *in->parent && (rc = ctl_name_check(in->parent, "parent", err)) != 0) {
        return rc;
    }
    const char *k;
    json_t *x;
    json_object_foreach(in->limits, k, x)
    {
        json_t *g = json_object_get(in->quotas, k);
        if (g && json_integer_value(x) < json_integer_value(g)) {
            char f[300];
            cr_json_path(f, sizeof f, "limits", k);
            return cr_json_fail(
                err, CR_EINVAL, f,
                "field '%s': a limit of %lld is below the guarantee (quotas) of %lld", f,
                (long long)json_integer_value(x), (long long)json_integer_value(g));
        }
    }
    return 0;
}

/* The tree's rules for tenant name taking parent and quotas (nothing is
 * changed here): the parent exists, is not name nor below it, the tree
 * stays within CTL_TENANT_DEPTH_MAX levels, and per GPU type the
 * children's guarantees sum to at most their parent's. mu held. */
static ctl_tenant *parent_of(ctl *c, const ctl_tenant *t)
{
    return *t->parent ? ctl_tenant_find(c, t->parent) : NULL;
}

static int depth_of(ctl *c, const char *name)
{
    int d = 0;
    for (ctl_tenant *t = ctl_tenant_find(c, name); t && d <= CTL_TENANT_DEPTH_MAX;
         t = parent_of(c, t)) {
        d++;
    }
    return d;
}

/* Is t (by name) name itself or below it? */
static bool below(ctl *c, const char *t, const char *name)
{
    int n = 0;
    for (ctl_tenant *x = ctl_tenant_find(c, t); x && n <= CTL_TENANT_DEPTH_MAX;
         x = parent_of(c, x), n++) {
        if (strcmp(x->name, name) == 0) {
            return true;
        }
    }
    return false;
}

static int height_of(ctl *c, const char *name)
{
    int h = 1, base = depth_of(c, name);
    for (size_t i = 0; i < c->ntenants; i++) {
        if (strcmp(c->tenants[i]->name, name) != 0 && below(c, c->tenants[i]->name, name)) {
            int d = depth_of(c, c->tenants[i]->name) - base + 1;
            h = d > h ? d : h;
        }
    }
    return h;
}

/* Sum of the guarantees of type k of parent's children, leaving out skip. */
static int64_t children_sum(ctl *c, const char *parent, const char *skip, const char *k)
{
    int64_t sum = 0;
    for (size_t i = 0; i < c->ntenants; i++) {
        const ctl_tenant *x = c->tenants[i];
        if (strcmp(x->parent, parent) == 0 && strcmp(x->name, skip) != 0) {
            sum += json_integer_value(json_object_get(x->quotas, k));
        }
    }
    return sum;
}

static int tree_check(ctl *c, const char *name, const char *parent, const json_t *quotas,
                      cr_json_err *err)
{
    const char *k;
    json_t *x;
    if (*parent) {
        ctl_tenant *p = ctl_tenant_find(c, parent);
        if (!p) {
            return cr_json_fail(err, CR_EINVAL, "parent",
                                "field 'parent': tenant '%s' does not exist (create it first)",
                                parent);
        }
        if (below(c, parent, name)) {
            return cr_json_fail(err, CR_EINVAL, "parent",
                                "field 'parent': '%s' is '%s' or below it: the tree would have a "
                                "cycle",
                                parent, name);
        }
        int d = depth_of(c, parent) + (ctl_tenant_find(c, name) ? height_of(c, name) : 1);
        if (d > CTL_TENANT_DEPTH_MAX) {
            return cr_json_fail(err, CR_EINVAL, "parent",
                                "field 'parent': the tree would be %d levels deep (at most %d)", d,
                                CTL_TENANT_DEPTH_MAX);
        }
        json_object_foreach((json_t *)quotas, k, x)
        {
            json_t *pg = json_object_get(p->quotas, k);
            if (!pg) {
                continue; /* no guarantee above: nothing to exceed */
            }
            int64_t sum = children_sum(c, parent, name, k) + json_integer_value(x);
            if (sum > json_integer_value(pg)) {
                char f[300];
                cr_json_path(f, sizeof f, "quotas", k);
                return cr_json_fail(err, CR_EINVAL, f,
                                    "field '%s': a guarantee of %lld (%lld with its siblings') "
                                    "exceeds parent '%s''s guarantee of %lld",
                                    f, (long long)json_integer_value(x), (long long)sum, parent,
                                    (long long)json_integer_value(pg));
            }
        }
    }
    /* its own children's guarantees still fit under its new ones */
    json_object_foreach((json_t *)quotas, k, x)
    {
        int64_t sum = children_sum(c, name, "", k);
        if (sum > json_integer_value(x)) {
            char f[300];
            cr_json_path(f, sizeof f, "quotas", k);
            return cr_json_fail(err, CR_EINVAL, f,
                                "field '%s': a guarantee of %lld is less than its children's "
                                "%lld",
                                f, (long long)json_integer_value(x), (long long)sum);
        }
    }
    return 0;
}

/* GPUs held now, per tenant: {"tenant": {"type": gpus}} (returned new),
 * in one pass over the nodes' job lists (running work only), each
 * placement counted on its own node so a gang counts once. mu held. */
static json_t *in_use_all(ctl *c)
{
    json_t *all = json_object();
    for (size_t i = 0; i < c->nnodes; i++) {
        const ctl_node *n = c->nodes[i];
        for (size_t k = 0; k < n->njobs; k++) {
            const ctl_job *j = ctl_job_get(c, n->jobs[k]);
            if (!j) {
                continue;
            }
            json_t *in_use = json_object_get(all, j->tenant);
            if (!in_use) {
                in_use = json_object();
                json_object_set_new(all, j->tenant, in_use);
            }
            for (size_t q = 0; q < j->nplace; q++) {
                if (strcmp(j->place[q].node, n->name) != 0) {
                    continue;
                }
                const char *ty = *j->run_type ? j->run_type : j->gpu_type;
                json_t *cur = json_object_get(in_use, ty);
                json_object_set_new(
                    in_use, ty,
                    json_integer(json_integer_value(cur) + (json_int_t)j->place[q].ngpus));
            }
        }
    }
    return all;
}

/* {"type": gpus} of from added into to. */
static void gpus_add(json_t *to, const json_t *from)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)from, k, v)
    {
        json_object_set_new(
            to, k,
            json_integer(json_integer_value(json_object_get(to, k)) + json_integer_value(v)));
    }
}

/* Each tenant's subtree's GPUs in use: {"tenant": {"type": gpus}}
 * (returned new) from in_use_all's all (borrowed), adding each tenant's
 * own to itself and its ancestors. mu held. */
static json_t *in_use_subtrees(ctl *c, const json_t *all)
{
    json_t *subs = json_object();
    for (size_t i = 0; i < c->ntenants; i++) {
        const json_t *mine = json_object_get(all, c->tenants[i]->name);
        int n = 0;
        for (ctl_tenant *a = c->tenants[i]; a && mine && n <= CTL_TENANT_DEPTH_MAX;
             a = parent_of(c, a), n++) {
            json_t *sub = json_object_get(subs, a->name);
            if (!sub) {
                sub = json_object();
                json_object_set_new(subs, a->name, sub);
            }
            gpus_add(sub, mine);
        }
    }
    return subs;
}

/* t's usage; all, subs: in_use_all's and in_use_subtrees' (borrowed). mu held. */
static json_t *tenant_usage(ctl *c, const ctl_tenant *t, const json_t *all, const json_t *subs)
{
    json_t *in_use = json_object(), *sub = json_object();
    gpus_add(in_use, json_object_get(all, t->name));
    gpus_add(sub, json_object_get(subs, t->name));
    double gpu_s = 0, energy = 0, cost = 0, cloud = 0;
    for (size_t i = 0; i < c->nusage; i++) {
        if (strcmp(c->usage[i].tenant, t->name) != 0 ||
            strstr(c->usage[i].gpu_type, CTL_IDLE_SUFFIX)) {
            continue;
        }
        if (strstr(c->usage[i].gpu_type, CTL_CLOUD_SUFFIX)) {
            cloud += c->usage[i].cost;
            continue;
        }
        gpu_s += c->usage[i].gpu_s;
        energy += c->usage[i].energy_j;
        cost += c->usage[i].cost;
    }
    json_t *u = json_pack("{s:o,s:o,s:f,s:f,s:f,s:f}", "gpus_in_use", in_use, "subtree_in_use", sub,
                          "gpu_hours", gpu_s / 3600.0, "energy_kwh", energy / 3.6e6, "cost", cost,
                          "cloud_cost", cloud);
    double budget, spent;
    char owner[CTL_NAME_MAX];
    if (ctl_tenant_burst(c, t->name, &budget, &spent, owner)) {
        json_object_set_new(u, "burst",
                            json_pack("{s:s,s:f,s:f}", "owner", owner, "budget", budget,
                                      "spent_this_month", spent));
    }
    return u;
}

void ctl_route_tenants(ctl *c, cr_http_req *req, const cr_principal *p, char **seg, size_t nseg)
{
    const char *m = cr_http_method(req);
    cr_http_set_route(req, nseg == 2 ? "/v1/tenants" : "/v1/tenants/{name}");
    if (strcmp(m, "GET") == 0) {
        if (p->role != CR_ROLE_ADMIN && p->role != CR_ROLE_USER) {
            ctl_reply_err(req, 403, CR_EPERM, NULL, "role '%s' may not list tenants",
                          cr_role_name(p->role));
            return;
        }
        json_t *items = json_array();
        pthread_mutex_lock(&c->mu);
        json_t *all = in_use_all(c), *subs = in_use_subtrees(c, all);
        for (size_t i = 0; i < c->ntenants; i++) {
            ctl_tenant *t = c->tenants[i];
            /* a user sees its tenant; a tenant-admin token its subtree */
            bool mine = strcmp(t->name, p->tenant) == 0 ||
                        (p->scope == CR_SCOPE_TENANT_ADMIN && below(c, t->name, p->tenant));
            if ((p->role == CR_ROLE_USER && !mine) || (nseg == 3 && strcmp(t->name, seg[2]) != 0)) {
                continue;
            }
            json_t *v = tenant_json(t);
            json_object_set_new(v, "usage", tenant_usage(c, t, all, subs));
            json_object_set_new(v, "fair_rank",
                                t->fair_rank >= 0 ? json_integer(t->fair_rank) : json_null());
            json_object_set_new(v, "level_fs",
                                isfinite(t->level_fs) ? json_real(t->level_fs) : json_null());
            json_array_append_new(items, v);
        }
        pthread_mutex_unlock(&c->mu);
        json_decref(all);
        json_decref(subs);
        if (nseg == 3) {
            json_t *one = json_incref(json_array_get(items, 0));
            json_decref(items);
            if (!one) {
                ctl_reply_err(req, 404, CR_ENOENT, NULL, "tenant '%s' not found", seg[2]);
            } else {
                ctl_reply_json(req, 200, one);
            }
            return;
        }
        size_t n = json_array_size(items);
        ctl_reply_json(req, 200, json_pack("{s:o,s:I}", "items", items, "count", (json_int_t)n));
        return;
    }
    bool tadmin = p->role == CR_ROLE_USER && p->scope == CR_SCOPE_TENANT_ADMIN;
    if (p->role != CR_ROLE_ADMIN && !tadmin) {
        ctl_reply_err(req, 403, CR_EPERM, NULL,
                      "only an admin (or a tenant-admin token, below its tenant) may change "
                      "tenants");
        return;
    }
    bool create = strcmp(m, "POST") == 0 && nseg == 2;
    bool replace = strcmp(m, "PUT") == 0 && nseg == 3;
    if (!create && !replace) {
        ctl_reply_err(req, 405, CR_ENOTSUP, NULL, "method %s not allowed here", m);
        return;
    }
    size_t len;
    const char *body = cr_http_body(req, &len);
    json_t *v = NULL;
    cr_json_err err;
    tenant_in in = {.name = create ? NULL : seg[2], .weight = 1.0};
    if (cr_json_parse_object(body, len, &v, &err) != 0 || tenant_parse(v, create, &in, &err) != 0) {
        tenant_in_fini(&in);
        json_decref(v);
        ctl_reply_jerr(req, &err);
        return;
    }
    const char *name = in.name;
    /* Stored first, applied after (ctl_state.c): admin_mu keeps two
     * changes from crossing between the commit and the apply. */
    pthread_mutex_lock(&c->admin_mu);
    pthread_mutex_lock(&c->mu);
    ctl_tenant *t = ctl_tenant_find(c, name);
    char parent[CTL_NAME_MAX];
    /* PUT without "parent" keeps the tenant where it is in the tree */
    snprintf(parent, sizeof parent, "%s", in.parent ? in.parent : t ? t->parent : "");
    int trc = (create && t) || (replace && !t) ? 0 : tree_check(c, name, parent, in.quotas, &err);
    /* a tenant-admin token manages the tenants strictly below its own:
     * the tenant stays there and its parent is its tenant or below */
    bool sub_ok =
        !tadmin || (*parent && below(c, parent, p->tenant) &&
                    (!t || (strcmp(t->name, p->tenant) != 0 && below(c, t->name, p->tenant))));
    pthread_mutex_unlock(&c->mu);
    if (!sub_ok) {
        ctl_reply_err(req, 403, CR_EPERM, "parent",
                      "field 'parent': a tenant-admin token of '%s' manages only the tenants "
                      "below it",
                      p->tenant);
    } else if (create && t) {
        ctl_reply_err(req, 409, CR_EEXIST, "name", "tenant '%s' already exists", name);
    } else if (replace && !t) {
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "tenant '%s' not found", name);
    } else if (trc != 0) {
        ctl_reply_jerr(req, &err);
    } else {
        ctl_tenant next = {.weight = in.weight,
                           .quotas = in.quotas,
                           .limits = in.limits,
                           .lending = in.lending,
                           .idle_after_s = in.idle_after_s,
                           .idle_grace_s = in.idle_grace_s,
                           .idle_requeue = in.idle_requeue,
                           .hy_locked = in.hy_locked,
                           .hy_burst_budget = in.hy_burst_budget};
        snprintf(next.name, sizeof next.name, "%s", name);
        snprintf(next.hy_constraint, sizeof next.hy_constraint, "%s", in.hy_constraint);
        snprintf(next.parent, sizeof next.parent, "%s", parent);
        cr_store_txn *txn = cr_store_txn_new();
        tenant_persist(txn, &next);
        int rc = cr_store_commit(c->store, txn);
        if (rc != 0) {
            ctl_reply_commit_err(req, rc);
        } else {
            pthread_mutex_lock(&c->mu);
            t = ctl_tenant_find(c, name);
            if (!t) {
                t = tenant_add(c, name, in.weight, in.quotas);
            } else {
                t->weight = in.weight;
                json_decref(t->quotas);
                t->quotas = json_incref(in.quotas);
            }
            tenant_set_tree(t, parent, in.limits, in.lending);
            t->idle_after_s = in.idle_after_s;
            t->idle_grace_s = in.idle_grace_s;
            t->idle_requeue = in.idle_requeue;
            snprintf(t->hy_constraint, sizeof t->hy_constraint, "%s", in.hy_constraint);
            t->hy_locked = in.hy_locked;
            t->hy_burst_budget = in.hy_burst_budget;
            c->tenants_dirty = true;
            ctl_sched_kick(c);
            json_t *ans = tenant_json(t);
            pthread_mutex_unlock(&c->mu);
            ctl_reply_json(req, create ? 201 : 200, ans);
        }
    }
    pthread_mutex_unlock(&c->admin_mu);
    tenant_in_fini(&in);
    json_decref(v);
}

/* ------------------------------------------------------------------------ */
/* Tokens                                                                   */

static json_t *token_doc(int64_t id, const uint8_t *hash, const cr_principal *p)
{
    char hex[2 * CR_TOKEN_HASH_BYTES + 1], t[64], e[64];
    cr_auth_hash_hex(hash, hex);
    return json_pack("{s:I,s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:s}", "id", (json_int_t)id, "hash", hex,
                     "role", cr_role_name(p->role), "tenant", p->tenant, "name", p->name, "created",
                     ctl_time_str(cr_now_ns(), t, sizeof t), "scope", cr_scope_name(p->scope),
                     "expires_ns", (json_int_t)p->expires_ns, "expires",
                     p->expires_ns ? ctl_time_str(p->expires_ns, e, sizeof e) : "");
}

static void token_key(int64_t id, char *buf, size_t len)
{
    snprintf(buf, len, "%012lld", (long long)id);
}

/* Mint a token and queue its row; text into out, hash into hash (the
 * caller registers it once stored). mu held. */
static int64_t token_mint_row(ctl *c, cr_store_txn *txn, const cr_principal *proto, char *out,
                              uint8_t *hash, cr_principal *minted)
{
    cr_auth_mint(out, hash);
    cr_principal p = *proto;
    p.id = c->next_token_id++;
    json_t *doc = token_doc(p.id, hash, &p);
    char *s = json_dumps(doc, JSON_COMPACT);
    char key[32];
    token_key(p.id, key, sizeof key);
    cr_store_txn_put(txn, "token", key, s);
    free(s);
    json_decref(doc);
    *minted = p;
    return p.id;
}

/* Mint, register and queue a token; text into out. mu held. */
static int64_t token_mint(ctl *c, cr_store_txn *txn, const cr_principal *proto, char *out)
{
    uint8_t hash[CR_TOKEN_HASH_BYTES];
    cr_principal p;
    int64_t id = token_mint_row(c, txn, proto, out, hash, &p);
    cr_auth_table_put(c->auth, hash, &p);
    return id;
}

typedef struct token_find {
    const char *key;
    bool found;
} token_find;

static void token_seek(void *arg, const char *key, const char *doc)
{
    (void)doc;
    token_find *f = arg;
    if (strcmp(key, f->key) == 0) {
        f->found = true;
    }
}

static void token_row(void *arg, const char *key, const char *doc)
{
    json_t *items = arg;
    json_t *v = json_loads(doc, 0, NULL);
    if (v) {
        json_object_del(v, "hash");
        json_array_append_new(items, v);
    }
}

void ctl_route_tokens(ctl *c, cr_http_req *req, const cr_principal *p, char **seg, size_t nseg)
{
    const char *m = cr_http_method(req);
    cr_http_set_route(req, nseg == 2 ? "/v1/tokens" : "/v1/tokens/{id}");
    if (p->role != CR_ROLE_ADMIN) {
        ctl_reply_err(req, 403, CR_EPERM, NULL, "only an admin may manage tokens");
        return;
    }
    if (nseg == 2 && strcmp(m, "GET") == 0) {
        json_t *items = json_array();
        cr_store_load_objects(c->store, "token", token_row, items);
        size_t n = json_array_size(items);
        ctl_reply_json(req, 200, json_pack("{s:o,s:I}", "items", items, "count", (json_int_t)n));
        return;
    }
    if (nseg == 2 && strcmp(m, "POST") == 0) {
        size_t len;
        const char *body = cr_http_body(req, &len);
        json_t *v = NULL;
        cr_json_err err;
        static const char *const members[] = {"role",  "tenant",       "name",
                                              "scope", "expires_in_s", NULL};
        static const char *const roles[] = {"admin", "user", NULL};
        static const char *const scopes[] = {"all", "read", "submit", "tenant-admin", NULL};
        const char *role = "user", *tenant = "", *name = "", *scope = "all";
        int64_t expires_in = 0;
        if (cr_json_parse_object(body, len, &v, &err) || cr_json_only(v, "", members, &err) ||
            cr_json_str(v, "", "role", false, 16, &role, &err) ||
            cr_json_enum(role, "role", roles, &err) ||
            cr_json_str(v, "", "tenant", false, CTL_NAME_MAX - 1, &tenant, &err) ||
            cr_json_str(v, "", "name", false, CTL_NAME_MAX - 1, &name, &err) ||
            cr_json_str(v, "", "scope", false, 16, &scope, &err) ||
            cr_json_enum(scope, "scope", scopes, &err) ||
            cr_json_int(v, "", "expires_in_s", false, 0, CTL_TOKEN_EXPIRY_MAX_S, &expires_in,
                        &err)) {
            json_decref(v);
            ctl_reply_jerr(req, &err);
            return;
        }
        if (!ctl_text_clean(name)) {
            json_decref(v);
            ctl_reply_err(req, 400, CR_EINVAL, "name",
                          "field 'name': control characters are not allowed");
            return;
        }
        cr_principal np;
        memset(&np, 0, sizeof np);
        np.role = cr_role_parse(role);
        if (np.role == CR_ROLE_USER && !ctl_name_ok(tenant)) {
            json_decref(v);
            ctl_reply_err(req, 400, CR_EINVAL, "tenant",
                          "field 'tenant': a user token needs a tenant (letters, digits, -_.)");
            return;
        }
        if (np.role == CR_ROLE_USER) {
            snprintf(np.tenant, sizeof np.tenant, "%s", tenant);
        }
        snprintf(np.name, sizeof np.name, "%s", *name ? name : role);
        cr_scope_parse(scope, &np.scope);
        if (np.scope == CR_SCOPE_TENANT_ADMIN && np.role != CR_ROLE_USER) {
            json_decref(v);
            ctl_reply_err(req, 400, CR_EINVAL, "scope",
                          "field 'scope': tenant-admin is for a user token (an admin manages "
                          "every tenant already)");
            return;
        }
        np.expires_ns = expires_in > 0 ? cr_now_ns() + expires_in * CR_NS_PER_SEC : 0;
        json_decref(v);
        char text[CR_TOKEN_TEXT_MAX];
        pthread_mutex_lock(&c->mu);
        cr_store_txn *txn = cr_store_txn_new();
        if (np.role == CR_ROLE_USER && !ctl_tenant_find(c, np.tenant)) {
            cr_store_txn_free(txn);
            pthread_mutex_unlock(&c->mu);
            ctl_reply_err(req, 404, CR_ENOENT, "tenant",
                          "field 'tenant': tenant '%s' does not exist (create it first: POST "
                          "/v1/tenants)",
                          np.tenant);
            return;
        }
        uint8_t hash[CR_TOKEN_HASH_BYTES];
        cr_principal minted;
        int64_t id = token_mint_row(c, txn, &np, text, hash, &minted);
        pthread_mutex_unlock(&c->mu);
        /* Usable only once stored: a refused mint leaves no working token. */
        int rc = cr_store_commit(c->store, txn);
        if (rc != 0) {
            ctl_reply_commit_err(req, rc);
            return;
        }
        cr_auth_table_put(c->auth, hash, &minted);
        char exp[64];
        ctl_reply_json(
            req, 201,
            json_pack("{s:I,s:s,s:s,s:s,s:s,s:s,s:s}", "id", (json_int_t)id, "token", text, "role",
                      cr_role_name(np.role), "tenant", np.tenant, "name", np.name, "scope",
                      cr_scope_name(np.scope), "expires",
                      np.expires_ns ? ctl_time_str(np.expires_ns, exp, sizeof exp) : ""));
        return;
    }
    if (nseg == 3 && strcmp(m, "DELETE") == 0) {
        int64_t id;
        if (cr_parse_i64(seg[2], 1, INT64_MAX / 2, &id) != 0) {
            ctl_reply_err(req, 404, CR_ENOENT, NULL, "token '%s' not found", seg[2]);
            return;
        }
        if (id == p->id) {
            ctl_reply_err(req, 409, CR_ECONFLICT, NULL, "a token cannot revoke itself");
            return;
        }
        char key[32];
        token_key(id, key, sizeof key);
        /* Revoked in memory only once the row is gone from the store: a
         * refused revoke leaves the token working now and after a restart
         * alike. admin_mu: no mint/revoke crosses this one. */
        pthread_mutex_lock(&c->admin_mu);
        token_find fnd = {.key = key, .found = false};
        int rc = cr_store_load_objects(c->store, "token", token_seek, &fnd);
        if (rc == 0 && !fnd.found) {
            pthread_mutex_unlock(&c->admin_mu);
            ctl_reply_err(req, 404, CR_ENOENT, NULL, "token %lld not found", (long long)id);
            return;
        }
        cr_store_txn *txn = cr_store_txn_new();
        cr_store_txn_del(txn, "token", key);
        if (rc == 0) {
            rc = cr_store_commit(c->store, txn);
        } else {
            cr_store_txn_free(txn);
        }
        if (rc == 0) {
            cr_auth_table_revoke_id(c->auth, id);
            ctl_events_revoke(c, id);
        }
        pthread_mutex_unlock(&c->admin_mu);
        if (rc != 0) {
            ctl_reply_commit_err(req, rc);
            return;
        }
        ctl_reply_json(req, 200, json_pack("{s:I,s:b}", "id", (json_int_t)id, "revoked", 1));
        return;
    }
    ctl_reply_err(req, 405, CR_ENOTSUP, NULL, "method %s not allowed here", m);
}

/* ------------------------------------------------------------------------ */
/* Usage                                                                    */

static double price_of(ctl *c, const char *gpu_type)
{
    json_t *v = json_object_get(c->cfg.prices, gpu_type);
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

void ctl_usage_add(ctl *c, cr_store_txn *txn, const char *tenant, const char *gpu_type,
                   int64_t at_ns, double gpu_s, double energy_j)
{
    char day[16];
    time_t t = (time_t)(at_ns / CR_NS_PER_SEC);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(day, sizeof day, "%Y-%m-%d", &tm);
    ctl_usage *u = NULL;
    for (size_t i = c->nusage; i > 0; i--) {
        ctl_usage *x = &c->usage[i - 1];
        if (strcmp(x->day, day) == 0 && strcmp(x->tenant, tenant) == 0 &&
            strcmp(x->gpu_type, gpu_type) == 0) {
            u = x;
            break;
        }
    }
    if (!u) {
        CR_GROW(c->usage, c->nusage, c->capusage);
        u = &c->usage[c->nusage++];
        memset(u, 0, sizeof *u);
        snprintf(u->tenant, sizeof u->tenant, "%s", tenant);
        snprintf(u->gpu_type, sizeof u->gpu_type, "%s", gpu_type);
        snprintf(u->day, sizeof u->day, "%s", day);
    }
    double cost = gpu_s / 3600.0 * price_of(c, gpu_type);
    u->gpu_s += gpu_s;
    u->energy_j += energy_j;
    u->cost += cost;
    cr_store_txn_usage(txn, tenant, gpu_type, day, gpu_s, energy_j, cost);
}

void ctl_usage_add_cloud(ctl *c, cr_store_txn *txn, const char *tenant, const char *gpu_type,
                         int64_t at_ns, double gpu_s, double cost)
{
    char day[16], type[CTL_NAME_MAX + 8];
    time_t t = (time_t)(at_ns / CR_NS_PER_SEC);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(day, sizeof day, "%Y-%m-%d", &tm);
    /* (a type name at most CTL_NAME_MAX - 1 - the suffix: kept whole) */
    snprintf(type, sizeof type, "%.*s%s", (int)(CTL_NAME_MAX - sizeof CTL_CLOUD_SUFFIX), gpu_type,
             CTL_CLOUD_SUFFIX);
    ctl_usage *u = NULL;
    for (size_t i = c->nusage; i > 0; i--) {
        ctl_usage *x = &c->usage[i - 1];
        if (strcmp(x->day, day) == 0 && strcmp(x->tenant, tenant) == 0 &&
            strcmp(x->gpu_type, type) == 0) {
            u = x;
            break;
        }
    }
    if (!u) {
        CR_GROW(c->usage, c->nusage, c->capusage);
        u = &c->usage[c->nusage++];
        memset(u, 0, sizeof *u);
        snprintf(u->tenant, sizeof u->tenant, "%s", tenant);
        snprintf(u->gpu_type, sizeof u->gpu_type, "%.*s", CTL_NAME_MAX - 1, type);
        snprintf(u->day, sizeof u->day, "%s", day);
    }
    u->gpu_s += gpu_s;
    u->cost += cost;
    cr_store_txn_usage(txn, tenant, type, day, gpu_s, 0, cost);
}

bool ctl_tenant_burst(ctl *c, const char *tenant, double *budget, double *spent, char *owner)
{
    int n = 0;
    ctl_tenant *t = ctl_tenant_find(c, tenant);
    for (; t && n <= CTL_TENANT_DEPTH_MAX && t->hy_burst_budget < 0; t = parent_of(c, t), n++) {
    }
    if (!t || t->hy_burst_budget < 0) {
        return false;
    }
    char month[16];
    time_t now = (time_t)(cr_now_ns() / CR_NS_PER_SEC);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(month, sizeof month, "%Y-%m", &tm);
    double sum = 0;
    for (size_t i = 0; i < c->nusage; i++) {
        const ctl_usage *u = &c->usage[i];
        if (strncmp(u->day, month, 7) == 0 && strstr(u->gpu_type, CTL_CLOUD_SUFFIX) &&
            below(c, u->tenant, t->name)) {
            sum += u->cost;
        }
    }
    *budget = t->hy_burst_budget;
    *spent = sum;
    snprintf(owner, CTL_NAME_MAX, "%s", t->name);
    return true;
}

/* The value term LABEL has in constraint text cons, into val (len bytes):
 * false when cons has no term of LABEL. */
static bool cons_term(const char *cons, const char *label, char *val, size_t len)
{
    size_t ll = strlen(label);
    for (const char *p = cons; p && *p;) {
        size_t n = strcspn(p, "&,");
        const char *eq = memchr(p, '=', n);
        size_t kl = eq ? (size_t)(eq - p) : n;
        if (kl == ll && strncmp(p, label, ll) == 0) {
            snprintf(val, len, "%.*s", eq ? (int)(n - kl - 1) : 0, eq ? eq + 1 : "");
            return true;
        }
        p += n + (p[n] != '\0');
    }
    return false;
}

int ctl_tenant_constraint_apply(ctl *c, const char *tenant, json_t *spec, bool *changed,
                                cr_json_err *err)
{
    int n = 0;
    ctl_tenant *t = ctl_tenant_find(c, tenant);
    for (; t && n <= CTL_TENANT_DEPTH_MAX && !t->hy_constraint[0]; t = parent_of(c, t), n++) {
    }
    if (!t || !t->hy_constraint[0]) {
        return 0;
    }
    const char *mine = json_string_value(json_object_get(spec, "constraint"));
    cr_buf b;
    cr_buf_init(&b);
    cr_buf_puts(&b, mine ? mine : "");
    int rc = 0;
    for (const char *p = t->hy_constraint; *p;) {
        size_t len = strcspn(p, "&,");
        char term[CTL_HYBRID_CONSTRAINT_MAX], val[CTL_HYBRID_CONSTRAINT_MAX];
        snprintf(term, sizeof term, "%.*s", (int)len, p);
        p += len + (p[len] != '\0');
        char *eq = strchr(term, '=');
        if (!eq) {
            continue;
        }
        *eq = '\0';
        if (!cons_term(mine, term, val, sizeof val)) {
            cr_buf_printf(&b, "%s%s=%s", b.len ? "," : "", term, eq + 1);
            *changed = true;
        } else if (t->hy_locked && strcmp(val, eq + 1) != 0) {
            rc = cr_json_fail(err, CR_EPERM, "constraint",
                              "field 'constraint': tenant '%s' keeps its work at %s=%s "
                              "(its hybrid policy, locked); '%s=%s' is not allowed",
                              t->name, term, eq + 1, term, val);
            goto out;
        }
    }
    if (*changed) {
        json_object_set_new(spec, "constraint", json_string(cr_buf_str(&b)));
    }
out:
    cr_buf_fini(&b);
    return rc;
}

void ctl_route_usage(ctl *c, cr_http_req *req, const cr_principal *p)
{
    cr_http_set_route(req, "/v1/usage");
    if (p->role != CR_ROLE_ADMIN && p->role != CR_ROLE_USER) {
        ctl_reply_err(req, 403, CR_EPERM, NULL, "role '%s' may not read usage",
                      cr_role_name(p->role));
        return;
    }
    const char *by = cr_http_query(req, "by");
    const char *lv = cr_http_query(req, "level");
    const char *period = cr_http_query(req, "period");
    bool k_tenant = !by, k_type = !by, k_day = !by;
    if (by) {
        char tmp[128];
        snprintf(tmp, sizeof tmp, "%s", by);
        char *save = NULL;
        for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (strcmp(t, "tenant") == 0) {
                k_tenant = true;
            } else if (strcmp(t, "gpu_type") == 0) {
                k_type = true;
            } else if (strcmp(t, "day") == 0) {
                k_day = true;
            } else {
                ctl_reply_err(req, 400, CR_EINVAL, "by",
                              "query 'by': unknown key '%s' (tenant, gpu_type, day)", t);
                return;
            }
        }
    }
    int64_t level = 0;
    if (lv && cr_parse_i64(lv, 1, CTL_TENANT_DEPTH_MAX, &level) != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "level",
                      "query 'level': want 1..%d (1: the roots of the tenant tree)",
                      CTL_TENANT_DEPTH_MAX);
        return;
    }
    /* the day key's length: a day, a month, a year, or all of time */
    size_t dlen = 10;
    if (period) {
        if (strcmp(period, "day") == 0) {
            dlen = 10;
        } else if (strcmp(period, "month") == 0) {
            dlen = 7;
        } else if (strcmp(period, "year") == 0) {
            dlen = 4;
        } else if (strcmp(period, "all") == 0) {
            dlen = 0;
        } else {
            ctl_reply_err(req, 400, CR_EINVAL, "period",
                          "query 'period': want day, month, year or all");
            return;
        }
    }
    json_t *items = json_array();
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->nusage; i++) {
        const ctl_usage *u = &c->usage[i];
        if (p->role == CR_ROLE_USER && strcmp(u->tenant, p->tenant) != 0) {
            continue;
        }
        /* idle GPU-seconds are rows of "<type>#idle" (ctl_nodes.c) */
        char type[CTL_NAME_MAX + 8], day[16];
        snprintf(type, sizeof type, "%s", u->gpu_type);
        char *sfx = strstr(type, CTL_IDLE_SUFFIX);
        bool idle = sfx != NULL;
        if (sfx) {
            *sfx = '\0';
        }
        char *csfx = strstr(type, CTL_CLOUD_SUFFIX);
        bool cloud = csfx != NULL;
        if (csfx) {
            *csfx = '\0';
        }
        snprintf(day, sizeof day, "%.*s", (int)dlen, u->day);
        const char *tn = u->tenant;
        if (level > 0) {
            /* rolled up to its ancestor at that level (itself when above) */
            ctl_tenant *t = ctl_tenant_find(c, u->tenant);
            while (t && *t->parent && depth_of(c, t->name) > level) {
                ctl_tenant *up = ctl_tenant_find(c, t->parent);
                if (!up) {
                    break;
                }
                t = up;
            }
            tn = t ? t->name : u->tenant;
        }
        tn = k_tenant ? tn : "*";
        const char *ty = k_type ? type : "*";
        const char *dy = k_day && dlen ? day : "*";
        json_t *row = NULL;
        for (size_t r = 0; r < json_array_size(items); r++) {
            json_t *x = json_array_get(items, r);
            if (strcmp(json_string_value(json_object_get(x, "tenant")), tn) == 0 &&
                strcmp(json_string_value(json_object_get(x, "gpu_type")), ty) == 0 &&
                strcmp(json_string_value(json_object_get(x, "day")), dy) == 0) {
                row = x;
                break;
            }
        }
        if (!row) {
            row = json_pack("{s:s,s:s,s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "tenant", tn, "gpu_type",
                            ty, "day", dy, "gpu_hours", 0.0, "idle_gpu_hours", 0.0, "idle_share",
                            0.0, "energy_kwh", 0.0, "cost", 0.0, "cloud_gpu_hours", 0.0,
                            "cloud_cost", 0.0);
            json_array_append_new(items, row);
        }
        if (cloud) {
            /* elastic pools' node time bought for the tenant: apart from
             * the GPU-hours its jobs held and their showback cost */
            json_object_set_new(row, "cloud_gpu_hours",
                                json_real(json_real_value(json_object_get(row, "cloud_gpu_hours")) +
                                          u->gpu_s / 3600.0));
            json_object_set_new(
                row, "cloud_cost",
                json_real(json_real_value(json_object_get(row, "cloud_cost")) + u->cost));
            continue;
        }
        const char *hk = idle ? "idle_gpu_hours" : "gpu_hours";
        json_object_set_new(
            row, hk, json_real(json_real_value(json_object_get(row, hk)) + u->gpu_s / 3600.0));
        json_object_set_new(
            row, "energy_kwh",
            json_real(json_real_value(json_object_get(row, "energy_kwh")) + u->energy_j / 3.6e6));
        json_object_set_new(row, "cost",
                            json_real(json_real_value(json_object_get(row, "cost")) + u->cost));
    }
    pthread_mutex_unlock(&c->mu);
    size_t r;
    json_t *x;
    json_array_foreach(items, r, x)
    {
        double h = json_real_value(json_object_get(x, "gpu_hours"));
        double ih = json_real_value(json_object_get(x, "idle_gpu_hours"));
        /* (idle samples and GPU time are booked apart: bounded by 1) */
        json_object_set_new(x, "idle_share", json_real(h > 0 ? (ih < h ? ih / h : 1.0) : 0.0));
    }
    size_t n = json_array_size(items);
    ctl_reply_json(req, 200, json_pack("{s:o,s:I}", "items", items, "count", (json_int_t)n));
}

/* ------------------------------------------------------------------------ */
/* Loading and first start                                                  */

static void load_token(void *arg, const char *key, const char *doc)
{
    ctl *c = arg;
    json_t *v = json_loads(doc, 0, NULL);
    if (!v) {
        return;
    }
    cr_principal p;
    memset(&p, 0, sizeof p);
    uint8_t hash[CR_TOKEN_HASH_BYTES];
    const char *hex = json_string_value(json_object_get(v, "hash"));
    p.id = (int64_t)json_integer_value(json_object_get(v, "id"));
    p.role = cr_role_parse(json_string_value(json_object_get(v, "role")));
    const char *tn = json_string_value(json_object_get(v, "tenant"));
    const char *nm = json_string_value(json_object_get(v, "name"));
    snprintf(p.tenant, sizeof p.tenant, "%s", tn ? tn : "");
    snprintf(p.name, sizeof p.name, "%s", nm ? nm : "");
    /* rows from before scopes and expiry: all, never */
    p.expires_ns = (int64_t)json_integer_value(json_object_get(v, "expires_ns"));
    const char *sc = json_string_value(json_object_get(v, "scope"));
    if (sc && cr_scope_parse(sc, &p.scope) != 0) {
        p.scope = CR_SCOPE_READ; /* an unknown scope: the least */
    }
    if (hex && cr_auth_hash_unhex(hex, hash) == 0 && p.role != CR_ROLE_NONE) {
        cr_auth_table_put(c->auth, hash, &p);
    }
    if (p.id >= c->next_token_id) {
        c->next_token_id = p.id + 1;
    }
    json_decref(v);
}

static void load_node_token(void *arg, const char *key, const char *doc)
{
    ctl *c = arg;
    json_t *v = json_loads(doc, 0, NULL);
    const char *hex = v ? json_string_value(json_object_get(v, "hash")) : NULL;
    uint8_t hash[CR_TOKEN_HASH_BYTES];
    if (hex && cr_auth_hash_unhex(hex, hash) == 0) {
        cr_principal p;
        memset(&p, 0, sizeof p);
        p.role = CR_ROLE_AGENT;
        snprintf(p.node, sizeof p.node, "%s", key);
        snprintf(p.name, sizeof p.name, "node:%s", key);
        cr_auth_table_put(c->auth, hash, &p);
    }
    json_decref(v);
}

static void load_tenant(void *arg, const char *key, const char *doc)
{
    ctl *c = arg;
    json_t *v = json_loads(doc, 0, NULL);
    if (!v) {
        return;
    }
    json_t *w = json_object_get(v, "weight");
    ctl_tenant *t = tenant_add(c, key, json_is_number(w) ? json_number_value(w) : 1.0,
                               json_object_get(v, "quotas"));
    /* rows from before the tree have no parent, limits or lending: a root */
    const char *parent = json_string_value(json_object_get(v, "parent"));
    tenant_set_tree(t, parent, json_object_get(v, "limits"), json_object_get(v, "lending_limits"));
    cr_json_err err;
    if (idle_parse(v, &t->idle_after_s, &t->idle_grace_s, &t->idle_requeue, &err) != 0) {
        t->idle_after_s = 0; /* a row this build cannot read: no policy */
    }
    if (hybrid_parse(v, t->hy_constraint, &t->hy_locked, &t->hy_burst_budget, &err) != 0) {
        /* a row this build cannot read: no default, and no burst at all
         * (the safe side of a budget) */
        t->hy_constraint[0] = '\0';
        t->hy_locked = false;
        t->hy_burst_budget = 0;
        cr_warn("tenant %s: its stored hybrid policy is unreadable (%s): no burst", key,
                err.message);
    }
    json_decref(v);
}

static void load_usage(void *arg, const char *tenant, const char *gpu_type, const char *day,
                       double gpu_s, double energy_j, double cost)
{
    ctl *c = arg;
    CR_GROW(c->usage, c->nusage, c->capusage);
    ctl_usage *u = &c->usage[c->nusage++];
    memset(u, 0, sizeof *u);
    snprintf(u->tenant, sizeof u->tenant, "%s", tenant);
    snprintf(u->gpu_type, sizeof u->gpu_type, "%s", gpu_type);
    snprintf(u->day, sizeof u->day, "%s", day);
    u->gpu_s = gpu_s;
    u->energy_j = energy_j;
    u->cost = cost;
}

int ctl_load_admin(ctl *c)
{
    c->next_token_id = 1;
    int rc = cr_store_load_objects(c->store, "token", load_token, c);
    if (rc == 0) {
        rc = cr_store_load_objects(c->store, "nodetoken", load_node_token, c);
    }
    if (rc == 0) {
        rc = cr_store_load_objects(c->store, "tenant", load_tenant, c);
    }
    if (rc == 0) {
        rc = cr_store_load_usage(c->store, load_usage, c);
    }
    return rc;
}

static int read_token_file(const char *path, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        return errno == ENOENT ? CR_ENOENT : CR_EIO;
    }
    int rc = 0;
    if (!fgets(out, (int)len, f)) {
        rc = CR_EIO;
    }
    fclose(f);
    out[strcspn(out, "\r\n")] = '\0';
    if (rc == 0 && strncmp(out, "crl_", 4) != 0) {
        cr_error("%s: not a Corral token (expected crl_...)", path);
        rc = CR_EINVAL;
    }
    return rc;
}

int ctl_bootstrap(ctl *c)
{
    int rc = 0;
    char path[1200];
    cr_store_txn *txn = cr_store_txn_new();
    pthread_mutex_lock(&c->mu);
    ctl_tenant_ensure(c, txn, "default");
    char admin[CR_TOKEN_TEXT_MAX] = "";
    if (c->next_token_id == 1) {
        /* No token in the store. A fresh cluster, unless there are signs of
         * an existing one: then the database was lost, emptied or replaced,
         * and a new admin token would quietly take the cluster over. */
        struct stat st;
        snprintf(path, sizeof path, "%s/admin.token", c->cfg.state_dir);
        const char *sign = NULL;
        if (c->next_id > 1) {
            sign = "the database holds jobs";
        } else if (c->nnodes > 0) {
            sign = "the database holds nodes";
        } else if (stat(path, &st) == 0) {
            sign = "admin.token exists in the state directory";
        }
        if (sign) {
            pthread_mutex_unlock(&c->mu);
            cr_store_txn_free(txn);
            cr_error("the store has no admin token but %s: refusing to mint a new admin token "
                     "over an existing cluster. Restore the database from a backup, or start a "
                     "new cluster in an empty state directory (docs/operations.md, \"Damaged "
                     "store\")",
                     sign);
            return CR_ECORRUPT;
        }
        cr_principal p;
        memset(&p, 0, sizeof p);
        p.role = CR_ROLE_ADMIN;
        snprintf(p.name, sizeof p.name, "bootstrap-admin");
        token_mint(c, txn, &p, admin);
    }
    pthread_mutex_unlock(&c->mu);
    rc = cr_store_commit(c->store, txn);
    if (rc != 0) {
        return rc;
    }
    if (*admin) {
        snprintf(path, sizeof path, "%s/admin.token", c->cfg.state_dir);
        rc = ctl_write_secret(path, admin);
        if (rc != 0) {
            return rc;
        }
        cr_info("first start: admin token written to %s (mode 0600)", path);
    }
    /* The legacy join token (config "join_token"): a long-lived bootstrap
     * token for one-machine demos, from the file when it exists, else minted
     * into it. It may only register new nodes (ctl_join_admit) and is never
     * sent anywhere. */
    if (!c->cfg.legacy_join) {
        snprintf(path, sizeof path, "%s/join.token", c->cfg.state_dir);
        if (access(path, F_OK) == 0 || *c->cfg.join_token_file) {
            cr_warn("the legacy join token (%s) is NOT accepted: agents register with bootstrap "
                    "tokens (corral admin bootstrap-token create), or start the controller with "
                    "--allow-legacy-join",
                    *c->cfg.join_token_file ? c->cfg.join_token_file : path);
        }
        return 0;
    }
    cr_warn("legacy join token on (--allow-legacy-join): whoever reads it can add nodes to this "
            "cluster at any time; a shared cluster uses single-use bootstrap tokens");
    if (*c->cfg.join_token_file) {
        snprintf(path, sizeof path, "%s", c->cfg.join_token_file);
    } else {
        snprintf(path, sizeof path, "%s/join.token", c->cfg.state_dir);
    }
    char join[CR_TOKEN_TEXT_MAX + 8];
    uint8_t hash[CR_TOKEN_HASH_BYTES];
    rc = read_token_file(path, join, sizeof join);
    if (rc == CR_ENOENT) {
        cr_auth_mint(join, hash);
        rc = ctl_write_secret(path, join);
        if (rc == 0) {
            cr_info("join token for agents written to %s (mode 0600)", path);
        }
    }
    if (rc != 0) {
        cr_error("cannot use the join token file %s: %s", path, cr_strerror(rc));
        return rc;
    }
    cr_auth_hash(join, hash);
    sodium_memzero(join, sizeof join);
    cr_principal jp;
    memset(&jp, 0, sizeof jp);
    jp.role = CR_ROLE_JOIN;
    snprintf(jp.name, sizeof jp.name, "join");
    cr_auth_table_put(c->auth, hash, &jp);
    return 0;
}

/* Mint a node token (agent role) replacing any previous one, and a new
 * secret for the controller's calls to that agent. mu held. */
void ctl_node_token(ctl *c, cr_store_txn *txn, const char *node, char *out, char *secret_out)
{
    uint8_t unused[CR_TOKEN_HASH_BYTES];
    cr_auth_mint(secret_out, unused);
    uint8_t hash[CR_TOKEN_HASH_BYTES];
    char hex[2 * CR_TOKEN_HASH_BYTES + 1];
    cr_auth_table_revoke_node(c->auth, node);
    cr_auth_mint(out, hash);
    cr_principal p;
    memset(&p, 0, sizeof p);
    p.role = CR_ROLE_AGENT;
    snprintf(p.node, sizeof p.node, "%s", node);
    snprintf(p.name, sizeof p.name, "node:%s", node);
    cr_auth_table_put(c->auth, hash, &p);
    cr_auth_hash_hex(hash, hex);
    char *sealed = ctl_seal(c, secret_out);
    json_t *doc = json_pack("{s:s,s:s}", "hash", hex, "agent_secret", sealed);
    free(sealed);
    char *s = json_dumps(doc, JSON_COMPACT);
    cr_store_txn_put(txn, "nodetoken", node, s);
    free(s);
    json_decref(doc);
}
