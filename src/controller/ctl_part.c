/*
 * ctl_part.c - partitions (config "partitions", docs/partitions.md) and
 * what a submit's placement members must name: a partition the cluster
 * defines, a GPU type it can know.
 *
 * A partition is a named set of nodes with defaults and limits, as in
 * Slurm: a node is in it when its name matches one of the partition's
 * "nodes" (names or shell globs) or one of its GPUs is of one of its
 * "gpu_types"; a partition with neither holds every node. A job in a
 * partition is placed only on its nodes: the partition is one more node
 * filter (ctl_batch_node_allowed), resolved to the scheduler's node mask.
 * A job without a partition goes to the one marked "default" (none: any
 * node). The partition's default_gpu_type fills a job's gpu_type when the
 * request gave none, and max_time bounds (and, when the request gave
 * none, sets) its time limit.
 *
 * A GPU type is refused at submit unless it is "auto"/"any", a type of the
 * GPU catalog, or the model of a registered node: a job asking for a type
 * no one knows ("#SBATCH -p gpu" read as a type) would pend for ever.
 *
 * The config is validated at start-up and read-only after; ctl_part_submit
 * reads the nodes, so it runs with mu held.
 */
#include "ctl_int.h"
#include "ctl_pools.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_catalog.h"
#include "cr_error.h"
#include "cr_time.h"

#include <fnmatch.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define PART_MAX       256 /* partitions in a config */
#define PART_LIST_MAX  256 /* names or types in one partition's list */
#define TYPES_LIST_MAX 400 /* bytes of the cluster's type list in an error */

static const char *const part_members[] = {"name",     "nodes",   "gpu_types", "default_gpu_type",
                                           "max_time", "default", NULL};

/* A list member: an array of 1..PART_LIST_MAX non-empty strings. */
static int str_list(const json_t *p, const char *path, const char *key, cr_json_err *err)
{
    json_t *a = NULL;
    int rc = cr_json_arr(p, path, key, false, PART_LIST_MAX, &a, err);
    if (rc != 0 || !a) {
        return rc;
    }
    size_t i;
    json_t *x;
    json_array_foreach(a, i, x)
    {
        const char *s = json_string_value(x);
        if (!s || !*s || json_string_length(x) >= CTL_NAME_MAX || !ctl_text_clean(s)) {
            char f[300];
            snprintf(f, sizeof f, "%s.%s[%zu]", path, key, i);
            return cr_json_fail(err, CR_EINVAL, f,
                                "field '%s': a non-empty name of at most %d characters", f,
                                CTL_NAME_MAX - 1);
        }
    }
    return 0;
}

/* The max_time of a partition: seconds, or a Slurm time ("1-00:00:00"). */
static int max_time_of(const json_t *p, const char *path, int64_t *out_s, cr_json_err *err)
{
    json_t *m = json_object_get(p, "max_time");
    char f[300];
    snprintf(f, sizeof f, "%s.max_time", path);
    *out_s = 0;
    if (!m) {
        return 0;
    }
    int64_t ns = 0;
    if (json_is_integer(m) && json_integer_value(m) > 0 && json_integer_value(m) <= 366LL * 86400) {
        *out_s = (int64_t)json_integer_value(m);
        return 0;
    }
    if (json_is_string(m) && cr_time_limit_parse(json_string_value(m), &ns) == 0 &&
        ns >= CR_NS_PER_SEC && ns / CR_NS_PER_SEC <= 366LL * 86400) {
        *out_s = ns / CR_NS_PER_SEC;
        return 0;
    }
    return cr_json_fail(err, CR_EINVAL, f,
                        "field '%s': seconds (1..31622400) or a time as sbatch --time takes "
                        "it (\"4:00:00\", \"1-00:00:00\")",
                        f);
}

int ctl_partitions_check(const json_t *v, cr_json_err *err)
{
    if (!json_is_array(v) || json_array_size(v) > PART_MAX) {
        return cr_json_fail(err, CR_EINVAL, "partitions",
                            "field 'partitions': an array of at most %d partitions", PART_MAX);
    }
    int ndefault = 0;
    size_t i;
    json_t *p;
    json_array_foreach(v, i, p)
    {
        char path[64];
        snprintf(path, sizeof path, "partitions[%zu]", i);
        const char *name = NULL, *dgt = NULL;
        bool dflt = false;
        int64_t mt;
        int rc;
        if (!json_is_object(p)) {
            return cr_json_fail(err, CR_EINVAL, path, "field '%s': must be an object", path);
        }
        char nf[80];
        snprintf(nf, sizeof nf, "%s.name", path);
        if ((rc = cr_json_only(p, path, part_members, err)) ||
            (rc = cr_json_str(p, path, "name", true, CTL_NAME_MAX - 1, &name, err)) ||
            (rc = ctl_name_check(name, nf, err)) || (rc = str_list(p, path, "nodes", err)) ||
            (rc = str_list(p, path, "gpu_types", err)) ||
            (rc = cr_json_str(p, path, "default_gpu_type", false, CTL_NAME_MAX - 1, &dgt, err)) ||
            (rc = cr_json_bool(p, path, "default", false, &dflt, err)) ||
            (rc = max_time_of(p, path, &mt, err))) {
            return rc;
        }
        for (size_t k = 0; k < i; k++) {
            const char *o = json_string_value(json_object_get(json_array_get(v, k), "name"));
            if (o && strcmp(o, name) == 0) {
                return cr_json_fail(err, CR_EEXIST, nf, "field '%s': partition '%s' twice", nf,
                                    name);
            }
        }
        if (dflt && ++ndefault > 1) {
            char df[80];
            snprintf(df, sizeof df, "%s.default", path);
            return cr_json_fail(err, CR_EINVAL, df,
                                "field '%s': only one partition may be the default", df);
        }
    }
    return 0;
}

const json_t *ctl_part_find(const ctl_config *cfg, const char *name)
{
    size_t i;
    json_t *p;
    json_array_foreach(cfg->partitions, i, p)
    {
        const char *n = json_string_value(json_object_get(p, "name"));
        if (n && name && strcmp(n, name) == 0) {
            return p;
        }
    }
    return NULL;
}

static const json_t *part_default(const ctl_config *cfg)
{
    size_t i;
    json_t *p;
    json_array_foreach(cfg->partitions, i, p)
    {
        if (json_is_true(json_object_get(p, "default"))) {
            return p;
        }
    }
    return NULL;
}

/* Same GPU type: the node's model as reported, or as the catalog knows it
 * ("h100" and "H100 SXM"; NVML's "NVIDIA H100 SXM"). */
static bool same_type(const cr_catalog *cat, const char *want, const char *model)
{
    if (strcasecmp(want, model) == 0) {
        return true;
    }
    if (!cat) {
        return false;
    }
    const cr_gpu_type *a = cr_catalog_find(cat, want);
    const cr_gpu_type *b = cr_catalog_find(cat, model);
    if (!b && strncasecmp(model, "NVIDIA ", 7) == 0) {
        b = cr_catalog_find(cat, model + 7);
    }
    return a && a == b;
}

bool ctl_part_holds(const ctl *c, const json_t *part, const ctl_node *n)
{
    json_t *nodes = json_object_get(part, "nodes");
    json_t *types = json_object_get(part, "gpu_types");
    if (!nodes && !types) {
        return true;
    }
    size_t i;
    json_t *x;
    json_array_foreach(nodes, i, x)
    {
        if (fnmatch(json_string_value(x), n->name, 0) == 0) {
            return true;
        }
    }
    json_array_foreach(types, i, x)
    {
        for (size_t g = 0; g < n->ngpus; g++) {
            if (same_type(c->catalog, json_string_value(x), n->gpus[g].model)) {
                return true;
            }
        }
    }
    return false;
}

/* The cluster's GPU types (its nodes' models), comma-separated, into b. */
static void cluster_types(const ctl *c, cr_buf *b)
{
    size_t start = b->len;
    for (size_t i = 0; i < c->nnodes; i++) {
        const ctl_node *n = c->nodes[i];
        for (size_t g = 0; g < n->ngpus; g++) {
            const char *m = n->gpus[g].model;
            bool seen = false;
            /* a short list: the types are few, the nodes many */
            for (size_t k = 0; k < i && !seen; k++) {
                for (size_t q = 0; q < c->nodes[k]->ngpus && !seen; q++) {
                    seen = strcmp(c->nodes[k]->gpus[q].model, m) == 0;
                }
            }
            for (size_t q = 0; q < g && !seen; q++) {
                seen = strcmp(n->gpus[q].model, m) == 0;
            }
            if (!seen && b->len - start < TYPES_LIST_MAX) {
                cr_buf_printf(b, "%s%s", b->len > start ? ", " : "", m);
            }
        }
    }
    if (b->len == start) {
        cr_buf_puts(b, "none registered yet");
    }
}

/* The registered model that type t names (its own spelling, or another
 * the catalog knows: "h100" for "H100 SXM"), or NULL. */
static const char *node_model(const ctl *c, const char *t)
{
    if (strcmp(t, "auto") == 0 || strcmp(t, "any") == 0) {
        return NULL; /* (every submit asks this: no walk over the GPUs) */
    }
    /* t's catalog entry once; a node's GPUs mostly share one model, each
     * model compared once in a row (the catalog lookups were most of a
     * submit's cost on a cluster of 8-GPU nodes) */
    const cr_gpu_type *want = c->catalog ? cr_catalog_find(c->catalog, t) : NULL;
    const char *other = NULL, *last = NULL;
    for (size_t i = 0; i < c->nnodes; i++) {
        for (size_t g = 0; g < c->nodes[i]->ngpus; g++) {
            const char *m = c->nodes[i]->gpus[g].model;
            if (strcmp(t, m) == 0) {
                return m;
            }
            if (other || (last && strcmp(last, m) == 0)) {
                continue;
            }
            last = m;
            if (strcasecmp(t, m) == 0) {
                other = m;
            } else if (want) {
                const cr_gpu_type *b = cr_catalog_find(c->catalog, m);
                if (!b && strncasecmp(m, "NVIDIA ", 7) == 0) {
                    b = cr_catalog_find(c->catalog, m + 7);
                }
                other = b == want ? m : NULL;
            }
        }
    }
    return other;
}

static bool type_known(const ctl *c, const char *t)
{
    return strcmp(t, "auto") == 0 || strcmp(t, "any") == 0 ||
           (c->catalog && cr_catalog_find(c->catalog, t)) || node_model(c, t);
}

/* A job that asks more GPUs of one node than any node of the cluster has
 * (nor any node a pool can start) is refused, as sbatch refuses it
 * ("Requested node configuration is not available"), rather than left
 * pending for ever. Only once some node has registered: a cluster still
 * coming up knows no sizes. mu held. */
static int node_fit_check(const ctl *c, const ctl_job *j, cr_json_err *err)
{
    if (j->gpus <= 0 || j->nodes <= 0 || c->nnodes == 0) {
        return 0;
    }
    int64_t per = (j->gpus + j->nodes - 1) / j->nodes, most = ctl_pools_max_gpus_per_node(c);
    for (size_t i = 0; i < c->nnodes; i++) {
        most = (int64_t)c->nodes[i]->ngpus > most ? (int64_t)c->nodes[i]->ngpus : most;
    }
    if (per <= most) {
        return 0;
    }
    return cr_json_fail(err, CR_EINVAL, "gpus",
                        "field 'gpus': requested node configuration is not available: %lld GPUs "
                        "on each of %lld node%s, and no node of this cluster has more than %lld",
                        (long long)per, (long long)j->nodes, j->nodes > 1 ? "s" : "",
                        (long long)most);
}

int ctl_cpu_job_fail(cr_json_err *err)
{
    return cr_json_fail(err, CR_EINVAL, "gpus",
                        "field 'gpus': 0 (a job without GPUs) goes with nodes 0 or 1 and no "
                        "gpu_type, mig_profile or gpu_mem_gb");
}

int ctl_part_submit(ctl *c, const json_t *body, ctl_job *j, char *note, size_t notelen,
                    bool *changed, cr_json_err *err)
{
    note[0] = '\0';
    /* default_gpus 0: a job that asks for no GPU (nor any GPU property)
     * gets none, as on a Slurm cluster without --gres. */
    static const char *const gpu_members[] = {
        "gpus", "gpu_type", "mig_profile", "gpu_mem_gb", "gpu_milli", "gpu_mem_bytes", NULL};
    bool asks = false;
    for (size_t i = 0; gpu_members[i]; i++) {
        asks = asks || json_object_get(body, gpu_members[i]);
    }
    if (!asks && c->cfg.default_gpus == 0) {
        if (j->nodes > 1) {
            return ctl_cpu_job_fail(err);
        }
        j->gpus = 0;
        *changed = true;
        json_object_set_new(j->spec, "gpus", json_integer(0));
    }
    const char *name = json_string_value(json_object_get(j->spec, "partition"));
    const json_t *part = NULL;
    if (name && !c->cfg.partitions && j->gpus > 0 && type_known(c, name) &&
        strcmp(name, "auto") != 0 && strcmp(name, "any") != 0 && strcmp(j->gpu_type, "auto") == 0) {
        /* Scripts written for clusters whose partitions are GPU types:
         * with no partitions here, such a name is taken as the type. */
        snprintf(j->gpu_type, sizeof j->gpu_type, "%s", name);
        *changed = true;
        json_object_set_new(j->spec, "gpu_type", json_string(name));
        snprintf(note, notelen,
                 "this cluster defines no partitions: partition '%s' taken as the GPU type", name);
        *changed = true;
        json_object_del(j->spec, "partition");
        name = NULL;
    } else if (name) {
        part = ctl_part_find(&c->cfg, name);
        if (!part) {
            cr_buf b;
            cr_buf_init(&b);
            size_t i;
            json_t *p;
            json_array_foreach(c->cfg.partitions, i, p)
            {
                cr_buf_printf(&b, "%s%s", i ? ", " : "",
                              json_string_value(json_object_get(p, "name")));
            }
            int rc = cr_json_fail(err, CR_ENOENT, "partition",
                                  "field 'partition': invalid partition name specified: '%s' "
                                  "(this cluster has %s%s)",
                                  name, b.len ? "partitions " : "no partitions",
                                  b.len ? cr_buf_str(&b) : "");
            cr_buf_fini(&b);
            return rc;
        }
    } else if ((part = part_default(&c->cfg)) != NULL) {
        *changed = true;
        json_object_set(j->spec, "partition", json_object_get(part, "name"));
    }
    if (part) {
        const char *dgt = json_string_value(json_object_get(part, "default_gpu_type"));
        if (dgt && !json_object_get(body, "gpu_type") && j->gpus > 0) {
            snprintf(j->gpu_type, sizeof j->gpu_type, "%s", dgt);
            *changed = true;
            json_object_set_new(j->spec, "gpu_type", json_string(dgt));
        }
        int64_t mt = 0;
        cr_json_err e2;
        max_time_of(part, "partition", &mt, &e2);
        if (mt > 0 && j->time_limit_s > mt) {
            return cr_json_fail(err, CR_ERANGE, "time_limit_s",
                                "field 'time_limit_s': %lld s is past partition '%s' max_time "
                                "(%lld s)",
                                (long long)j->time_limit_s,
                                json_string_value(json_object_get(part, "name")), (long long)mt);
        }
        if (mt > 0 && j->time_limit_s == 0) {
            j->time_limit_s = mt;
            *changed = true;
            json_object_set_new(j->spec, "time_limit_s", json_integer(mt));
        }
    }
    const char *m = node_model(c, j->gpu_type);
    if (m && strcmp(m, j->gpu_type) != 0) {
        /* The scheduler matches types by name: "h100" is the nodes' "H100 SXM". */
        snprintf(j->gpu_type, sizeof j->gpu_type, "%s", m);
        *changed = true;
        json_object_set_new(j->spec, "gpu_type", json_string(m));
    }
    if (!type_known(c, j->gpu_type)) {
        cr_buf b;
        cr_buf_init(&b);
        cluster_types(c, &b);
        int rc = cr_json_fail(err, CR_EINVAL, "gpu_type",
                              "field 'gpu_type': unknown GPU type '%s' (this cluster has: %s; "
                              "or auto, any, or a type of the GPU catalog)%s",
                              j->gpu_type, cr_buf_str(&b),
                              json_object_get(body, "partition") || c->cfg.partitions
                                  ? ""
                                  : "; for a partition use --partition");
        cr_buf_fini(&b);
        return rc;
    }
    return node_fit_check(c, j, err);
}
