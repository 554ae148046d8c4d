/*
 * ctl_data.c - datasets and models as objects (ctl_data.h, docs/data.md):
 * their rows, the /v1/data routes and the resolution of a job's "data".
 * Layer 2 (objects): calls only ctl_util.c and the store.
 */
#include "ctl_data.h"

#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dobj {
    char tenant[CTL_NAME_MAX];
    char name[CTL_NAME_MAX];
    int64_t version;       /* 1, 2, ... per (tenant, name) */
    char *uri;             /* owned */
    int64_t size_bytes;    /* > 0 */
    char sha256[65];       /* lowercase hex */
    bool all;              /* visibility "all": every tenant sees and uses it */
    int64_t created_ns;    /* wall clock */
    char by[CTL_NAME_MAX]; /* the token's name that added it */
} dobj;

struct ctl_data {
    pthread_mutex_t mu; /* leaf: guards objs */
    dobj **objs;        /* in (tenant, name, version) order of insertion */
    size_t n, cap;
};

void ctl_data_init(ctl *c)
{
    c->data = cr_calloc(1, sizeof *c->data);
    pthread_mutex_init(&c->data->mu, NULL);
}

static void dobj_free(dobj *o)
{
    if (o) {
        free(o->uri);
        free(o);
    }
}

void ctl_data_fini(ctl *c)
{
    if (!c->data) {
        return;
    }
    for (size_t i = 0; i < c->data->n; i++) {
        dobj_free(c->data->objs[i]);
    }
    free(c->data->objs);
    pthread_mutex_destroy(&c->data->mu);
    CR_FREE(c->data);
}

static json_t *dobj_json(const dobj *o)
{
    char t[64];
    return json_pack("{s:s,s:I,s:s,s:s,s:I,s:s,s:s,s:s,s:s}", "name", o->name, "version",
                     (json_int_t)o->version, "tenant", o->tenant, "uri", o->uri, "size_bytes",
                     (json_int_t)o->size_bytes, "sha256", o->sha256, "visibility",
                     o->all ? "all" : "tenant", "created", ctl_time_str(o->created_ns, t, sizeof t),
                     "created_by", o->by);
}

static void dobj_key(const dobj *o, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s/%08" PRId64, o->tenant, o->name, o->version);
}

/* ------------------------------------------------------------------------ */
/* Checks                                                                   */

static int name_check(const char *name, cr_json_err *err)
{
    if (!ctl_name_ok(name)) {
        return cr_json_fail(err, CR_EINVAL, "name",
                            "field 'name': dataset '%.64s': use letters, digits, '-', '_' or '.' "
                            "(at most %d)",
                            name, CTL_NAME_MAX - 1);
    }
    if (!isalnum((unsigned char)name[0])) {
        return cr_json_fail(err, CR_EINVAL, "name",
                            "field 'name': dataset '%s' must start with a letter or digit", name);
    }
    return 0;
}

static bool has_dotdot(const char *path)
{
    size_t n = strlen(path);
    return strncmp(path, "../", 3) == 0 || strstr(path, "/../") || strcmp(path, "..") == 0 ||
           (n >= 3 && strcmp(path + n - 3, "/..") == 0);
}

int ctl_data_check_uri(const char *name, const char *uri, cr_json_err *err)
{
    if (!ctl_text_clean(uri) || strchr(uri, ' ')) {
        return cr_json_fail(err, CR_EINVAL, "uri",
                            "field 'uri': dataset '%s': spaces or control characters in the URI",
                            name);
    }
    if (strncmp(uri, "file:", 5) == 0) {
        const char *path = uri + 5;
        if (strncmp(path, "//", 2) == 0) {
            path += 2; /* file:///abs: an empty host only */
            if (path[0] != '/') {
                return cr_json_fail(err, CR_EINVAL, "uri",
                                    "field 'uri': dataset '%s': file:// with a host; use "
                                    "file:/path or file:///path",
                                    name);
            }
        }
        if (path[0] != '/' || path[1] == '\0' || has_dotdot(path)) {
            return cr_json_fail(err, CR_EINVAL, "uri",
                                "field 'uri': dataset '%s': file: needs an absolute path without "
                                "'..' (file:/shared/data/x.tar)",
                                name);
        }
        return 0;
    }
    const char *rest = NULL;
    if (strncmp(uri, "http://", 7) == 0) {
        rest = uri + 7;
    } else if (strncmp(uri, "https://", 8) == 0) {
        rest = uri + 8;
    } else if (strncmp(uri, "s3://", 5) == 0) {
        rest = uri + 5;
        const char *slash = strchr(rest, '/');
        if (!slash || slash == rest || slash[1] == '\0') {
            return cr_json_fail(err, CR_EINVAL, "uri",
                                "field 'uri': dataset '%s': s3:// needs a bucket and a key "
                                "(s3://bucket/path/to/object)",
                                name);
        }
        return 0;
    }
    if (rest) {
        if (rest[0] == '\0' || rest[0] == '/') {
            return cr_json_fail(err, CR_EINVAL, "uri", "field 'uri': dataset '%s': no host in '%s'",
                                name, uri);
        }
        return 0;
    }
    const char *colon = strchr(uri, ':');
    int sl = colon ? (int)(colon - uri) : 0;
    return cr_json_fail(err, CR_EINVAL, "uri",
                        "field 'uri': dataset '%s': unknown scheme '%.*s' (use file:, http://, "
                        "https:// or s3://)",
                        name, sl > 16 ? 16 : sl, uri);
}

int ctl_data_check_sha256(const char *name, const char *hex, cr_json_err *err)
{
    size_t n = strlen(hex);
    bool ok = n == 64;
    for (size_t i = 0; ok && i < n; i++) {
        ok = isxdigit((unsigned char)hex[i]) != 0;
    }
    if (!ok) {
        return cr_json_fail(err, CR_EINVAL, "sha256",
                            "field 'sha256': dataset '%s': must be 64 hex digits (sha256sum's "
                            "output), got %zu characters",
                            name, n);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Memory (data->mu held)                                                   */

static int64_t latest_version(const struct ctl_data *d, const char *tenant, const char *name)
{
    int64_t v = 0;
    for (size_t i = 0; i < d->n; i++) {
        const dobj *o = d->objs[i];
        if (strcmp(o->tenant, tenant) == 0 && strcmp(o->name, name) == 0 && o->version > v) {
            v = o->version;
        }
    }
    return v;
}

static bool visible_to(const dobj *o, const cr_principal *p)
{
    return p->role == CR_ROLE_ADMIN || o->all || strcmp(o->tenant, p->tenant) == 0;
}

/* The object name@version (0: latest) as tenant resolves it: its own
 * first, then one visible to all. NULL when none. */
static const dobj *resolve(const struct ctl_data *d, const char *tenant, const char *name,
                           int64_t version)
{
    const dobj *own = NULL, *shared = NULL;
    for (size_t i = 0; i < d->n; i++) {
        const dobj *o = d->objs[i];
        if (strcmp(o->name, name) != 0 || (version > 0 && o->version != version)) {
            continue;
        }
        if (strcmp(o->tenant, tenant) == 0) {
            if (!own || o->version > own->version) {
                own = o;
            }
        } else if (o->all && (!shared || o->version > shared->version)) {
            shared = o;
        }
    }
    if (own) {
        return own;
    }
    /* a tenant's own name hides the shared one even when the version asked
     * is not among its own */
    return latest_version(d, tenant, name) > 0 ? NULL : shared;
}

static void add_mem(struct ctl_data *d, dobj *o /* taken */)
{
    CR_GROW(d->objs, d->n, d->cap);
    d->objs[d->n++] = o;
}

static dobj *dobj_from_doc(const char *doc)
{
    json_t *v = json_loads(doc, 0, NULL);
    const char *tenant = json_string_value(json_object_get(v, "tenant"));
    const char *name = json_string_value(json_object_get(v, "name"));
    const char *uri = json_string_value(json_object_get(v, "uri"));
    const char *sha = json_string_value(json_object_get(v, "sha256"));
    const char *by = json_string_value(json_object_get(v, "created_by"));
    const char *vis = json_string_value(json_object_get(v, "visibility"));
    dobj *o = NULL;
    if (tenant && name && uri && sha && strlen(sha) == 64) {
        o = cr_calloc(1, sizeof *o);
        snprintf(o->tenant, sizeof o->tenant, "%s", tenant);
        snprintf(o->name, sizeof o->name, "%s", name);
        o->version = (int64_t)json_integer_value(json_object_get(v, "version"));
        o->uri = cr_strdup(uri);
        o->size_bytes = (int64_t)json_integer_value(json_object_get(v, "size_bytes"));
        snprintf(o->sha256, sizeof o->sha256, "%s", sha);
        o->all = vis && strcmp(vis, "all") == 0;
        o->created_ns = (int64_t)json_integer_value(json_object_get(v, "created_ns"));
        snprintf(o->by, sizeof o->by, "%s", by ? by : "");
    }
    json_decref(v);
    return o;
}

static char *dobj_doc(const dobj *o)
{
    json_t *v = dobj_json(o);
    json_object_set_new(v, "created_ns", json_integer(o->created_ns));
    char *s = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    return s;
}

static void load_row(void *arg, const char *key, const char *doc)
{
    ctl *c = arg;
    dobj *o = dobj_from_doc(doc);
    if (!o) {
        cr_error("dataset row %s: unreadable, skipped", key);
        return;
    }
    add_mem(c->data, o);
}

int ctl_load_data(ctl *c)
{
    pthread_mutex_lock(&c->data->mu);
    for (size_t i = 0; i < c->data->n; i++) {
        dobj_free(c->data->objs[i]);
    }
    c->data->n = 0;
    pthread_mutex_unlock(&c->data->mu);
    /* the loader runs before any request: no lock needed for the rows, but
     * taken per row all the same (cheap) */
    return cr_store_load_objects(c->store, "dataset", load_row, c);
}

/* ------------------------------------------------------------------------ */
/* Routes                                                                   */

static void data_list(ctl *c, cr_http_req *req, const cr_principal *p, const char *name)
{
    json_t *items = json_array();
    struct ctl_data *d = c->data;
    pthread_mutex_lock(&d->mu);
    for (size_t i = 0; i < d->n; i++) {
        const dobj *o = d->objs[i];
        if (visible_to(o, p) && (!name || strcmp(o->name, name) == 0)) {
            json_array_append_new(items, dobj_json(o));
        }
    }
    pthread_mutex_unlock(&d->mu);
    if (name && json_array_size(items) == 0) {
        json_decref(items);
        ctl_reply_err(req, 404, CR_ENOENT, "name", "dataset '%s' not found", name);
        return;
    }
    size_t n = json_array_size(items);
    if (name) {
        ctl_reply_json(
            req, 200,
            json_pack("{s:s,s:o,s:I}", "name", name, "versions", items, "count", (json_int_t)n));
    } else {
        ctl_reply_json(req, 200, json_pack("{s:o,s:I}", "items", items, "count", (json_int_t)n));
    }
}

static void data_add(ctl *c, cr_http_req *req, const cr_principal *p)
{
    static const char *const members[] = {"name",   "uri",        "size_bytes", "sha256",
                                          "tenant", "visibility", NULL};
    static const char *const vis[] = {"tenant", "all", NULL};
    size_t len;
    const char *body = cr_http_body(req, &len);
    json_t *v = NULL;
    cr_json_err err;
    const char *name = NULL, *uri = NULL, *sha = NULL, *tenant = p->tenant, *visibility = "tenant";
    int64_t size = 0;
    memset(&err, 0, sizeof err);
    if (cr_json_parse_object(body, len, &v, &err) || cr_json_only(v, "", members, &err) ||
        cr_json_str(v, "", "name", true, CTL_NAME_MAX - 1, &name, &err) || name_check(name, &err) ||
        cr_json_str(v, "", "uri", true, CTL_DATA_URI_MAX, &uri, &err) ||
        ctl_data_check_uri(name, uri, &err) ||
        cr_json_str(v, "", "sha256", true, 128, &sha, &err) ||
        ctl_data_check_sha256(name, sha, &err) ||
        cr_json_int(v, "", "size_bytes", true, 1, CTL_DATA_SIZE_MAX, &size, &err) ||
        cr_json_str(v, "", "visibility", false, 16, &visibility, &err) ||
        cr_json_enum(visibility, "visibility", vis, &err) ||
        cr_json_str(v, "", "tenant", false, CTL_NAME_MAX - 1, &tenant, &err)) {
        json_decref(v);
        ctl_reply_jerr(req, &err);
        return;
    }
    if (p->role != CR_ROLE_ADMIN && strcmp(tenant, p->tenant) != 0) {
        json_decref(v);
        ctl_reply_err(req, 403, CR_EPERM, "tenant",
                      "field 'tenant': a user adds datasets to its own tenant ('%s') only",
                      p->tenant);
        return;
    }
    if (p->role == CR_ROLE_ADMIN && !json_object_get(v, "tenant")) {
        tenant = "default";
    }
    if (p->role != CR_ROLE_ADMIN && strncmp(uri, "file:", 5) == 0) {
        /* the agents read it as their own user: a user names only paths the
         * admin opened to its tenant, as for container mounts */
        const char *fp = uri + 5;
        fp += strncmp(fp, "//", 2) == 0 ? 2 : 0;
        if (!ctl_mount_allowed(&c->cfg, tenant, fp)) {
            ctl_reply_err(req, 403, CR_EPERM, "uri",
                          "field 'uri': dataset '%s': a user adds file: paths only under its "
                          "tenant's mounts_allowed (controller config); an admin may add any",
                          name);
            json_decref(v); /* name points into it */
            return;
        }
    }
    pthread_mutex_lock(&c->mu);
    bool known = ctl_tenant_find(c, tenant) != NULL;
    pthread_mutex_unlock(&c->mu);
    if (!known) {
        ctl_reply_err(req, 400, CR_ENOENT, "tenant", "field 'tenant': unknown tenant '%s'", tenant);
        json_decref(v); /* tenant points into it */
        return;
    }
    dobj *o = cr_calloc(1, sizeof *o);
    snprintf(o->tenant, sizeof o->tenant, "%s", tenant);
    snprintf(o->name, sizeof o->name, "%s", name);
    o->uri = cr_strdup(uri);
    o->size_bytes = size;
    for (size_t i = 0; i < 64; i++) {
        o->sha256[i] = (char)tolower((unsigned char)sha[i]);
    }
    o->all = strcmp(visibility, "all") == 0;
    o->created_ns = cr_now_ns();
    snprintf(o->by, sizeof o->by, "%s", p->name);
    json_decref(v);

    struct ctl_data *d = c->data;
    pthread_mutex_lock(&c->admin_mu);
    pthread_mutex_lock(&d->mu);
    size_t count = d->n;
    o->version = latest_version(d, o->tenant, o->name) + 1;
    pthread_mutex_unlock(&d->mu);
    if (count >= CTL_DATA_MAX) {
        pthread_mutex_unlock(&c->admin_mu);
        ctl_reply_err(req, 409, CR_ERANGE, NULL,
                      "the cluster holds %d data objects already (CTL_DATA_MAX); remove some "
                      "with corral data rm",
                      CTL_DATA_MAX);
        dobj_free(o);
        return;
    }
    char key[200];
    dobj_key(o, key, sizeof key);
    char *doc = dobj_doc(o);
    cr_store_txn *txn = cr_store_txn_new();
    cr_store_txn_put(txn, "dataset", key, doc);
    free(doc);
    int rc = cr_store_commit(c->store, txn);
    if (rc != 0) {
        pthread_mutex_unlock(&c->admin_mu);
        ctl_reply_commit_err(req, rc);
        dobj_free(o);
        return;
    }
    json_t *ans = dobj_json(o);
    pthread_mutex_lock(&d->mu);
    add_mem(d, o);
    pthread_mutex_unlock(&d->mu);
    pthread_mutex_unlock(&c->admin_mu);
    cr_info("dataset %s/%s@%lld added: %s (%lld bytes) by '%s'", o->tenant, o->name,
            (long long)o->version, o->uri, (long long)o->size_bytes, p->name);
    ctl_reply_json(req, 201, ans);
}

static void data_rm(ctl *c, cr_http_req *req, const cr_principal *p, const char *name,
                    const char *vtext)
{
    int64_t version = 0;
    if (vtext) {
        char *end = NULL;
        long long x = strtoll(vtext, &end, 10);
        if (!*vtext || *end || x < 1) {
            ctl_reply_err(req, 400, CR_EINVAL, "version",
                          "field 'version': dataset '%s': '%s' is not a version (1, 2, ...)", name,
                          vtext);
            return;
        }
        version = x;
    }
    const char *tenant = p->role == CR_ROLE_ADMIN ? cr_http_query(req, "tenant") : p->tenant;
    struct ctl_data *d = c->data;
    pthread_mutex_lock(&c->admin_mu);
    pthread_mutex_lock(&d->mu);
    cr_store_txn *txn = cr_store_txn_new();
    size_t hit = 0;
    const char *only_tenant = NULL;
    for (size_t i = 0; i < d->n; i++) {
        const dobj *o = d->objs[i];
        if (strcmp(o->name, name) != 0 || (version && o->version != version) ||
            (tenant && strcmp(o->tenant, tenant) != 0) || (!tenant && p->role != CR_ROLE_ADMIN)) {
            continue;
        }
        if (only_tenant && strcmp(only_tenant, o->tenant) != 0) {
            /* an admin without ?tenant= and the name in two tenants */
            pthread_mutex_unlock(&d->mu);
            pthread_mutex_unlock(&c->admin_mu);
            cr_store_txn_free(txn);
            ctl_reply_err(req, 409, CR_ECONFLICT, "tenant",
                          "dataset '%s' is in tenants '%s' and '%s': say which (?tenant=)", name,
                          only_tenant, o->tenant);
            return;
        }
        only_tenant = o->tenant;
        char key[200];
        dobj_key(o, key, sizeof key);
        cr_store_txn_del(txn, "dataset", key);
        hit++;
    }
    char which[CTL_NAME_MAX];
    snprintf(which, sizeof which, "%s", only_tenant ? only_tenant : "");
    pthread_mutex_unlock(&d->mu);
    if (hit == 0) {
        pthread_mutex_unlock(&c->admin_mu);
        cr_store_txn_free(txn);
        if (version) {
            ctl_reply_err(req, 404, CR_ENOENT, "version", "dataset '%s' has no version %lld", name,
                          (long long)version);
        } else {
            ctl_reply_err(req, 404, CR_ENOENT, "name", "dataset '%s' not found", name);
        }
        return;
    }
    int rc = cr_store_commit(c->store, txn);
    if (rc != 0) {
        pthread_mutex_unlock(&c->admin_mu);
        ctl_reply_commit_err(req, rc);
        return;
    }
    pthread_mutex_lock(&d->mu);
    size_t w = 0;
    for (size_t i = 0; i < d->n; i++) {
        dobj *o = d->objs[i];
        if (strcmp(o->name, name) == 0 && (!version || o->version == version) &&
            strcmp(o->tenant, which) == 0) {
            dobj_free(o);
        } else {
            d->objs[w++] = o;
        }
    }
    d->n = w;
    pthread_mutex_unlock(&d->mu);
    pthread_mutex_unlock(&c->admin_mu);
    cr_info("dataset %s/%s%s%s removed (%zu versions) by '%s'", which, name, vtext ? "@" : "",
            vtext ? vtext : "", hit, p->name);
    ctl_reply_json(
        req, 200,
        json_pack("{s:s,s:s,s:I}", "name", name, "tenant", which, "removed", (json_int_t)hit));
}

void ctl_route_data(ctl *c, cr_http_req *req, const cr_principal *p, char **seg, size_t nseg)
{
    const char *m = cr_http_method(req);
    cr_http_set_route(req, nseg == 2   ? "/v1/data"
                           : nseg == 3 ? "/v1/data/{name}"
                                       : "/v1/data/{name}/{version}");
    if (p->role != CR_ROLE_ADMIN && p->role != CR_ROLE_USER) {
        ctl_reply_err(req, 403, CR_EPERM, NULL, "role '%s' may not use datasets",
                      cr_role_name(p->role));
        return;
    }
    if (strcmp(m, "GET") == 0 && nseg <= 3) {
        data_list(c, req, p, nseg == 3 ? seg[2] : NULL);
    } else if (strcmp(m, "POST") == 0 && nseg == 2) {
        data_add(c, req, p);
    } else if (strcmp(m, "DELETE") == 0 && nseg >= 3) {
        data_rm(c, req, p, seg[2], nseg == 4 ? seg[3] : NULL);
    } else {
        ctl_reply_err(req, 405, CR_ENOTSUP, NULL, "method %s not allowed here", m);
    }
}

/* ------------------------------------------------------------------------ */
/* A job's "data"                                                           */

/* "NAME[@VERSION][:/mount]" into its parts; 0 or err naming field. */
static int ref_parse(const char *text, const char *field, char *name, size_t namelen,
                     int64_t *version, char *mount, size_t mountlen, cr_json_err *err)
{
    const char *colon = strchr(text, ':');
    const char *at = strchr(text, '@');
    if (at && colon && at > colon) {
        at = NULL; /* an '@' in the mount point */
    }
    size_t nlen = at ? (size_t)(at - text) : colon ? (size_t)(colon - text) : strlen(text);
    if (nlen == 0 || nlen >= namelen) {
        return cr_json_fail(err, CR_EINVAL, field,
                            "field '%s': '%.100s' is not NAME[@VERSION][:/mount/point]", field,
                            text);
    }
    memcpy(name, text, nlen);
    name[nlen] = '\0';
    if (!ctl_name_ok(name) || !isalnum((unsigned char)name[0])) {
        return cr_json_fail(err, CR_EINVAL, field,
                            "field '%s': dataset '%s': a name is letters, digits, '-', '_' or '.', "
                            "starting with a letter or digit",
                            field, name);
    }
    *version = 0;
    if (at) {
        char *end = NULL;
        long long v = strtoll(at + 1, &end, 10);
        if (end == at + 1 || (*end && *end != ':') || v < 1) {
            return cr_json_fail(err, CR_EINVAL, field,
                                "field '%s': dataset '%s': the version after '@' must be 1, 2, ...",
                                field, name);
        }
        *version = v;
    }
    mount[0] = '\0';
    if (colon) {
        const char *mp = colon + 1;
        if (mp[0] != '/' || strlen(mp) >= mountlen || has_dotdot(mp) || !ctl_text_clean(mp)) {
            return cr_json_fail(err, CR_EINVAL, field,
                                "field '%s': dataset '%s': the mount point must be an absolute "
                                "path without '..' (at most %zu bytes)",
                                field, name, mountlen - 1);
        }
        snprintf(mount, mountlen, "%s", mp);
    }
    return 0;
}

/* CORRAL_DATA_<NAME>: upper case, other than letters and digits '_'. */
static void env_name(const char *name, char *out, size_t len)
{
    size_t o = (size_t)snprintf(out, len, "CORRAL_DATA_");
    for (const char *s = name; *s && o + 1 < len; s++) {
        out[o++] = isalnum((unsigned char)*s) ? (char)toupper((unsigned char)*s) : '_';
    }
    out[o] = '\0';
}

int ctl_data_resolve(ctl *c, const char *tenant, const json_t *req_data, json_t *spec,
                     cr_json_err *err)
{
    if (!req_data) {
        return 0;
    }
    if (!json_is_array(req_data) || json_array_size(req_data) > CTL_DATA_PER_JOB) {
        return cr_json_fail(err, CR_EINVAL, "data",
                            "field 'data': an array of at most %d \"NAME[@VERSION][:/mount]\"",
                            CTL_DATA_PER_JOB);
    }
    json_t *out = json_array();
    struct ctl_data *d = c->data;
    int rc = 0;
    for (size_t i = 0; i < json_array_size(req_data); i++) {
        char field[32], name[CTL_NAME_MAX], mount[256], env[CTL_NAME_MAX + 16];
        int64_t version = 0;
        snprintf(field, sizeof field, "data[%zu]", i);
        const char *text = json_string_value(json_array_get(req_data, i));
        if (!text) {
            rc = cr_json_fail(err, CR_EINVAL, field,
                              "field '%s': must be a string NAME[@VERSION][:/mount/point]", field);
            goto out;
        }
        if ((rc = ref_parse(text, field, name, sizeof name, &version, mount, sizeof mount, err))) {
            goto out;
        }
        env_name(name, env, sizeof env);
        for (size_t k = 0; k < json_array_size(out); k++) {
            if (strcmp(json_string_value(json_object_get(json_array_get(out, k), "env")), env) ==
                0) {
                rc = cr_json_fail(err, CR_EINVAL, field,
                                  "field '%s': dataset '%s' named twice (or a name that gives the "
                                  "same %s)",
                                  field, name, env);
                goto out;
            }
        }
        pthread_mutex_lock(&d->mu);
        const dobj *o = resolve(d, tenant, name, version);
        json_t *e = NULL;
        int64_t latest = o ? 0 : latest_version(d, tenant, name);
        if (o) {
            e = json_pack("{s:s,s:I,s:s,s:I,s:s,s:s,s:s}", "name", o->name, "version",
                          (json_int_t)o->version, "uri", o->uri, "size_bytes",
                          (json_int_t)o->size_bytes, "sha256", o->sha256, "env", env, "tenant",
                          o->tenant);
        }
        pthread_mutex_unlock(&d->mu);
        if (!e) {
            if (version && latest) {
                rc = cr_json_fail(err, CR_ENOENT, field,
                                  "field '%s': dataset '%s' has no version %lld (latest %lld)",
                                  field, name, (long long)version, (long long)latest);
            } else {
                rc = cr_json_fail(err, CR_ENOENT, field,
                                  "field '%s': dataset '%s' not found for tenant '%s' (corral "
                                  "data list)",
                                  field, name, tenant);
            }
            goto out;
        }
        if (mount[0]) {
            json_object_set_new(e, "mount", json_string(mount));
        }
        json_array_append_new(out, e);
    }
    if (json_array_size(out) > 0) {
        json_object_set(spec, "data", out);
    } else {
        json_object_del(spec, "data");
    }
out:
    json_decref(out);
    return rc;
}
