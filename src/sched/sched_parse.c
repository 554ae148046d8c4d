/*
 * sched_parse.c - the cluster file (see docs/scheduler.md).
 *
 * Line-based. '#' starts a comment (outside quotes). Each record is a
 * keyword, positional arguments, then key=value fields; values with spaces
 * are "double quoted". Records:
 *
 *   gpu-type <alias> [name="H100 SXM"] [mem=80g] [mig=7/8]
 *   mig-profile <alias> <name> compute=<c> mem=<m> starts=<i,j,...>
 *   rack <name> [spine=<name>]
 *   node <name> gpus=<n>x<alias>[+<n>x<alias>...] [rack=<r>] [nvlink=<k>]
 *        [mem=<bytes>] [state=up|drained|lost] [mig=all|<i,j,...>]
 *        [share=all|<i,j,...>]   (shareable GPUs: fractional tasks pack there)
 *   gpu <node> <index> [health=ok|bad] [reason="..."] [mig=on|off]
 *       [layout=<profile>,<profile>...]   (fixed MIG instances; implies mig=on)
 *       [dynamic=on|off]   (idle instances may be repartitioned for a MIG job)
 *   tenant <name> [weight=<w>] [quota=<alias>:<n>[,<alias>:<n>...]]
 *          [parent=<tenant>] [limit=<alias>:<n>,...] [lend=<alias>:<n>,...]
 *
 * A node name may hold one range, "gpu[0-127]" or "n[00-15]" (zero padded
 * to the width of the first bound), to declare many identical nodes.
 * nvlink=k groups GPUs 0..k-1, k..2k-1, ... into NVLink domains (default:
 * all GPUs of a node in one domain). Type aliases name a type inside one
 * file; elsewhere a type is its full name, which is also accepted here.
 *
 * Errors: the first bad line stops the load with CR_EPARSE (or the code
 * of the call that refused it) and "line N: field F: what" in err.
 */
#include "cr_sched.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_parse.h"
#include "sched_int.h"

#define MAX_TOK   64
#define MAX_RANGE 100000

typedef struct alias {
    char name[CR_SCHED_NAME_MAX];
    int type;
    int line; /* where it was declared */
} alias;

/* A rack or tenant declared in this file, to refuse a second declaration
 * and a node naming a rack never declared. */
typedef struct decl {
    char name[CR_SCHED_NAME_MAX];
    int line;
} decl;

typedef struct pctx {
    cr_sched *s;
    alias *al;
    int nal, cal;
    decl *racks, *tenants;
    int nracks, cracks, ntenants, ctenants;
    int line;
    char *err;
    size_t errlen;
} pctx;

typedef struct tok {
    char *key; /* NULL for positional */
    char *val;
} tok;

__attribute__((format(printf, 4, 5))) static int perr(pctx *p, int rc, const char *field,
                                                      const char *fmt, ...)
{
    if (p->err && p->errlen) {
        int n = snprintf(p->err, p->errlen, "line %d: field %s: ", p->line, field);
        if (n >= 0 && (size_t)n < p->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return rc;
}

/* Split a line in place into tokens. Returns count, or -1 on an
 * unterminated quote, -2 on too many tokens. */
static int tokenize(char *line, tok *t)
{
    int n = 0;
    char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t') {
            p++;
        }
        if (!*p || *p == '#') {
            return n;
        }
        if (n >= MAX_TOK) {
            return -2;
        }
        char *start = p, *w = p;
        char *eq = NULL;
        bool quoted = false;
        while (*p && (quoted || (*p != ' ' && *p != '\t' && *p != '#'))) {
            if (*p == '"') {
                quoted = !quoted;
                p++;
                continue;
            }
            if (*p == '=' && !quoted && !eq) {
                eq = w;
            }
            *w++ = *p++;
        }
        if (quoted) {
            return -1;
        }
        char end = *p;
        *w = '\0';
        if (eq) {
            *eq = '\0';
            t[n].key = start;
            t[n].val = eq + 1;
        } else {
            t[n].key = NULL;
            t[n].val = start;
        }
        n++;
        if (end == '#' || !end) {
            return n;
        }
        p++;
    }
}

static const decl *decl_find(const decl *d, int n, const char *name)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(d[i].name, name) == 0) {
            return &d[i];
        }
    }
    return NULL;
}

/* Names are at most CR_SCHED_NAME_MAX - 1 bytes: longer is an error, never
 * a silent truncation. */
static int name_too_long(pctx *p, const char *field, const char *v)
{
    return perr(p, CR_EPARSE, field, "name '%.20s...' is longer than %d characters", v,
                CR_SCHED_NAME_MAX - 1);
}

static int type_of(pctx *p, const char *name, int *out)
{
    for (int i = 0; i < p->nal; i++) {
        if (strcmp(p->al[i].name, name) == 0) {
            *out = p->al[i].type;
            return 0;
        }
    }
    return cr_sched_gpu_type_find(p->s, name, out);
}

static int parse_u64(const char *v, uint64_t max, uint64_t *out)
{
    int64_t x;
    if (cr_parse_i64(v, 0, (int64_t)max, &x) < 0) {
        return CR_EPARSE;
    }
    *out = (uint64_t)x;
    return 0;
}

static int parse_bytes(const char *v, uint64_t *out)
{
    double d;
    if (cr_parse_count(v, &d) < 0 || d > 1e15) {
        return CR_EPARSE;
    }
    *out = (uint64_t)d;
    return 0;
}

/* "1,3,5" into a bitmask of values < lim. */
static int parse_list(const char *v, int lim, uint64_t *mask)
{
    uint64_t m = 0;
    char buf[256];
    if (strlen(v) >= sizeof(buf) || !*v) {
        return CR_EPARSE;
    }
    snprintf(buf, sizeof(buf), "%s", v);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int64_t x;
        if (cr_parse_i64(t, 0, lim - 1, &x) < 0) {
            return CR_EPARSE;
        }
        m |= UINT64_C(1) << x;
    }
    *mask = m;
    return 0;
}

static int rec_gpu_type(pctx *p, tok *t, int n)
{
    if (n < 2 || t[1].key) {
        return perr(p, CR_EPARSE, "alias", "gpu-type needs an alias");
    }
    const char *al = t[1].val, *name = al;
    uint64_t mem = 0;
    int mc = 0, mm = 0;
    for (int i = 2; i < n; i++) {
        if (!t[i].key) {
            return perr(p, CR_EPARSE, t[i].val, "expected key=value");
        } else if (strcmp(t[i].key, "name") == 0) {
            name = t[i].val;
        } else if (strcmp(t[i].key, "mem") == 0) {
            if (parse_bytes(t[i].val, &mem) < 0) {
                return perr(p, CR_EPARSE, "mem", "bad size '%s' (e.g. 80g)", t[i].val);
            }
        } else if (strcmp(t[i].key, "mig") == 0) {
            char tail;
            if (sscanf(t[i].val, "%d/%d%c", &mc, &mm, &tail) != 2 || mc < 1 || mc > 8 || mm < 1 ||
                mm > 8) {
                return perr(p, CR_EPARSE, "mig", "bad geometry '%s' (e.g. 7/8 or 4/4)", t[i].val);
            }
        } else {
            return perr(p, CR_EPARSE, t[i].key, "unknown field for gpu-type");
        }
    }
    if (strlen(al) >= CR_SCHED_NAME_MAX) {
        return name_too_long(p, "alias", al);
    }
    if (strlen(name) >= CR_SCHED_NAME_MAX) {
        return name_too_long(p, "name", name);
    }
    for (int i = 0; i < p->nal; i++) {
        if (strcmp(p->al[i].name, al) == 0) {
            return perr(p, CR_EPARSE, "alias", "gpu-type '%s' is already declared on line %d", al,
                        p->al[i].line);
        }
    }
    int type;
    int rc = cr_sched_gpu_type(p->s, name, &type);
    if (rc < 0) {
        return perr(p, rc, "name", "cannot register type '%s': %s", name, cr_strerror(rc));
    }
    for (int i = 0; i < p->nal; i++) {
        if (p->al[i].type == type) {
            return perr(p, CR_EPARSE, "name", "type '%s' is already declared on line %d (as '%s')",
                        name, p->al[i].line, p->al[i].name);
        }
    }
    if (mem) {
        cr_sched_gpu_type_set_mem(p->s, type, mem);
    }
    if (mc) {
        cr_sched_gpu_type_set_mig(p->s, type, mc, mm);
    }
    CR_GROW(p->al, p->nal, p->cal);
    snprintf(p->al[p->nal].name, CR_SCHED_NAME_MAX, "%s", al);
    p->al[p->nal].line = p->line;
    p->al[p->nal++].type = type;
    return 0;
}

static int rec_mig_profile(pctx *p, tok *t, int n)
{
    if (n < 3 || t[1].key || t[2].key) {
        return perr(p, CR_EPARSE, "name", "mig-profile needs a type and a profile name");
    }
    int type;
    if (type_of(p, t[1].val, &type) < 0) {
        return perr(p, CR_ENOENT, "type", "unknown GPU type '%s'", t[1].val);
    }
    uint64_t c = 0, m = 0, starts = 0;
    for (int i = 3; i < n; i++) {
        if (!t[i].key) {
            return perr(p, CR_EPARSE, t[i].val, "expected key=value");
        } else if (strcmp(t[i].key, "compute") == 0) {
            if (parse_u64(t[i].val, 8, &c) < 0) {
                return perr(p, CR_EPARSE, "compute", "expected 1..8");
            }
        } else if (strcmp(t[i].key, "mem") == 0) {
            if (parse_u64(t[i].val, 8, &m) < 0) {
                return perr(p, CR_EPARSE, "mem", "expected 1..8 memory slices");
            }
        } else if (strcmp(t[i].key, "starts") == 0) {
            if (parse_list(t[i].val, 8, &starts) < 0) {
                return perr(p, CR_EPARSE, "starts", "expected slice indices 0..7, e.g. 0,4");
            }
        } else {
            return perr(p, CR_EPARSE, t[i].key, "unknown field for mig-profile");
        }
    }
    int rc = cr_sched_mig_profile_add(p->s, type, t[2].val, (int)c, (int)m, (uint32_t)starts);
    if (rc < 0) {
        return perr(p, rc, "name",
                    "profile '%s' refused (%s): needs a MIG geometry on the type "
                    "and compute/mem/starts inside it",
                    t[2].val, cr_strerror(rc));
    }
    return 0;
}

static int rec_rack(pctx *p, tok *t, int n)
{
    if (n < 2 || t[1].key || !t[1].val[0]) {
        return perr(p, CR_EPARSE, "name", "rack needs a name");
    }
    if (strlen(t[1].val) >= CR_SCHED_NAME_MAX) {
        return name_too_long(p, "name", t[1].val);
    }
    const decl *d = decl_find(p->racks, p->nracks, t[1].val);
    if (d) {
        return perr(p, CR_EPARSE, "name", "rack '%s' is already declared on line %d", t[1].val,
                    d->line);
    }
    const char *spine = NULL;
    for (int i = 2; i < n; i++) {
        if (t[i].key && strcmp(t[i].key, "spine") == 0 && t[i].val[0]) {
            if (strlen(t[i].val) >= CR_SCHED_NAME_MAX) {
                return name_too_long(p, "spine", t[i].val);
            }
            spine = t[i].val;
        } else {
            return perr(p, CR_EPARSE, t[i].key ? t[i].key : t[i].val, "unknown field for rack");
        }
    }
    cr__sched_rack_get(p->s, t[1].val, spine);
    CR_GROW(p->racks, p->nracks, p->cracks);
    snprintf(p->racks[p->nracks].name, CR_SCHED_NAME_MAX, "%s", t[1].val);
    p->racks[p->nracks++].line = p->line;
    return 0;
}

/* "pre[a-b]post" -> pieces; no bracket: lo = hi = -1. */
static int name_range(const char *v, char *pre, char *post, int64_t *lo, int64_t *hi, int *width)
{
    const char *lb = strchr(v, '['), *rb = lb ? strchr(lb, ']') : NULL;
    *lo = *hi = -1;
    *width = 0;
    if (!lb) {
        if (strchr(v, ']')) {
            return CR_EPARSE;
        }
        snprintf(pre, CR_SCHED_NAME_MAX, "%s", v);
        post[0] = '\0';
        return 0;
    }
    const char *dash = rb ? memchr(lb, '-', (size_t)(rb - lb)) : NULL;
    if (!rb || !dash || strchr(rb + 1, '[') || strchr(rb + 1, ']') ||
        (size_t)(lb - v) >= CR_SCHED_NAME_MAX || strlen(rb + 1) >= CR_SCHED_NAME_MAX) {
        return CR_EPARSE;
    }
    char a[24], b[24];
    size_t la = (size_t)(dash - lb - 1), lbn = (size_t)(rb - dash - 1);
    if (la == 0 || lbn == 0 || la >= sizeof(a) || lbn >= sizeof(b)) {
        return CR_EPARSE;
    }
    memcpy(a, lb + 1, la);
    a[la] = '\0';
    memcpy(b, dash + 1, lbn);
    b[lbn] = '\0';
    if (!isdigit((unsigned char)a[0]) || !isdigit((unsigned char)b[0]) ||
        cr_parse_i64(a, 0, 999999999, lo) < 0 || cr_parse_i64(b, 0, 999999999, hi) < 0 ||
        *hi < *lo || *hi - *lo >= MAX_RANGE) {
        return CR_EPARSE;
    }
    *width = a[0] == '0' && la > 1 ? (int)la : 0;
    memcpy(pre, v, (size_t)(lb - v));
    pre[lb - v] = '\0';
    snprintf(post, CR_SCHED_NAME_MAX, "%s", rb + 1);
    return 0;
}

static int rec_node(pctx *p, tok *t, int n)
{
    if (n < 2 || t[1].key) {
        return perr(p, CR_EPARSE, "name", "node needs a name");
    }
    char pre[CR_SCHED_NAME_MAX], post[CR_SCHED_NAME_MAX];
    int64_t lo, hi;
    int width;
    if (name_range(t[1].val, pre, post, &lo, &hi, &width) < 0) {
        return perr(p, CR_EPARSE, "name", "bad node name or range '%s' (e.g. gpu[0-15])", t[1].val);
    }
    cr_sched_gpu_spec gs[CR_SCHED_MAX_NODE_GPUS];
    size_t ng = 0;
    uint64_t nvlink = 0, mem = 0, migmask = 0, shmask = 0;
    bool migall = false, shall = false;
    const char *rackname = NULL;
    cr_sched_node_state st = CR_NODE_UP;
    bool have_gpus = false;
    for (int i = 2; i < n; i++) {
        const char *k = t[i].key, *v = t[i].val;
        if (!k) {
            return perr(p, CR_EPARSE, v, "expected key=value");
        } else if (strcmp(k, "gpus") == 0) {
            have_gpus = true;
            char buf[256];
            if (strlen(v) >= sizeof(buf)) {
                return perr(p, CR_EPARSE, "gpus", "too long");
            }
            snprintf(buf, sizeof(buf), "%s", v);
            char *save = NULL;
            for (char *g = strtok_r(buf, "+", &save); g; g = strtok_r(NULL, "+", &save)) {
                char *x = strchr(g, 'x');
                int64_t cnt;
                int type;
                if (!x) {
                    return perr(p, CR_EPARSE, "gpus", "expected <count>x<type>, got '%s'", g);
                }
                *x = '\0';
                if (cr_parse_i64(g, 0, CR_SCHED_MAX_NODE_GPUS, &cnt) < 0) {
                    return perr(p, CR_EPARSE, "gpus", "bad GPU count '%s' (0..%d)", g,
                                CR_SCHED_MAX_NODE_GPUS);
                }
                if (type_of(p, x + 1, &type) < 0) {
                    return perr(p, CR_ENOENT, "gpus",
                                "unknown GPU type '%s' (declare it with "
                                "gpu-type first)",
                                x + 1);
                }
                if (ng + (size_t)cnt > CR_SCHED_MAX_NODE_GPUS) {
                    return perr(p, CR_EPARSE, "gpus", "more than %d GPUs on one node",
                                CR_SCHED_MAX_NODE_GPUS);
                }
                for (int64_t c = 0; c < cnt; c++) {
                    gs[ng++] = (cr_sched_gpu_spec){.type = type};
                }
            }
        } else if (strcmp(k, "rack") == 0) {
            if (!v[0]) {
                return perr(p, CR_EPARSE, "rack", "bad rack name");
            }
            if (strlen(v) >= CR_SCHED_NAME_MAX) {
                return name_too_long(p, "rack", v);
            }
            if (!decl_find(p->racks, p->nracks, v)) {
                return perr(p, CR_ENOENT, "rack",
                            "unknown rack '%s' (declare it with a rack line first)", v);
            }
            rackname = v;
        } else if (strcmp(k, "nvlink") == 0) {
            if (parse_u64(v, CR_SCHED_MAX_NODE_GPUS, &nvlink) < 0 || nvlink == 0) {
                return perr(p, CR_EPARSE, "nvlink", "expected a domain size 1..%d",
                            CR_SCHED_MAX_NODE_GPUS);
            }
        } else if (strcmp(k, "mem") == 0) {
            if (parse_bytes(v, &mem) < 0) {
                return perr(p, CR_EPARSE, "mem", "bad size '%s' (e.g. 80g)", v);
            }
        } else if (strcmp(k, "state") == 0) {
            if (strcmp(v, "up") == 0) {
                st = CR_NODE_UP;
            } else if (strcmp(v, "drained") == 0) {
                st = CR_NODE_DRAINED;
            } else if (strcmp(v, "lost") == 0) {
                st = CR_NODE_LOST;
            } else {
                return perr(p, CR_EPARSE, "state", "expected up, drained or lost, got '%s'", v);
            }
        } else if (strcmp(k, "mig") == 0) {
            if (strcmp(v, "all") == 0) {
                migall = true;
            } else if (parse_list(v, CR_SCHED_MAX_NODE_GPUS, &migmask) < 0) {
                return perr(p, CR_EPARSE, "mig", "expected all or GPU indices, e.g. 0,1");
            }
        } else if (strcmp(k, "share") == 0) {
            if (strcmp(v, "all") == 0) {
                shall = true;
            } else if (parse_list(v, CR_SCHED_MAX_NODE_GPUS, &shmask) < 0) {
                return perr(p, CR_EPARSE, "share", "expected all or GPU indices, e.g. 0,1");
            }
        } else {
            return perr(p, CR_EPARSE, k, "unknown field for node");
        }
    }
    if (!have_gpus) {
        return perr(p, CR_EPARSE, "gpus", "missing (e.g. gpus=8xh100)");
    }
    if (nvlink && ng % nvlink != 0) {
        return perr(p, CR_EPARSE, "nvlink",
                    "domain size %" PRIu64 " does not divide the node's %zu GPUs", nvlink, ng);
    }
    for (size_t g = 0; g < ng && g < CR_SCHED_MAX_NODE_GPUS; g++) {
        gs[g].mem_bytes = mem;
        gs[g].nvlink = (uint16_t)(nvlink ? g / nvlink : 0);
        gs[g].mig = migall || (migmask >> g & 1);
        if (gs[g].mig && !p->s->types[gs[g].type].mig_mem) {
            return perr(p, CR_ENOTSUP, "mig", "GPU %zu: type %s has no MIG geometry", g,
                        p->s->types[gs[g].type].name);
        }
        gs[g].share = shall || (shmask >> g & 1);
        if (gs[g].share && gs[g].mig) {
            return perr(p, CR_EPARSE, "share",
                        "GPU %zu is in MIG mode: share by slices or by "
                        "fractions, not both",
                        g);
        }
    }
    if (ng < 64 && (migmask >> ng)) {
        return perr(p, CR_EPARSE, "mig", "GPU index beyond the node's %zu GPUs", ng);
    }
    if (ng < 64 && (shmask >> ng)) {
        return perr(p, CR_EPARSE, "share", "GPU index beyond the node's %zu GPUs", ng);
    }
    for (int64_t i = lo; i <= hi; i++) {
        char name[CR_SCHED_NAME_MAX * 2 + 24];
        if (lo < 0) {
            snprintf(name, sizeof(name), "%s", pre);
        } else {
            snprintf(name, sizeof(name), "%s%0*" PRId64 "%s", pre, width, i, post);
        }
        if (strlen(name) >= CR_SCHED_NAME_MAX) {
            return perr(p, CR_EPARSE, "name", "node name '%s' too long", name);
        }
        cr_sched_node_spec ns = {
            .name = name, .rack = rackname, .state = st, .gpu_count = ng, .gpus = gs};
        int rc = cr_sched_node_add(p->s, &ns, NULL);
        if (rc < 0) {
            return perr(p, rc, "name", "cannot add node '%s': %s", name,
                        rc == CR_EEXIST ? "duplicate name" : cr_strerror(rc));
        }
        if (lo < 0) {
            break;
        }
    }
    return 0;
}

static int rec_gpu(pctx *p, tok *t, int n)
{
    if (n < 3 || t[1].key || t[2].key) {
        return perr(p, CR_EPARSE, "node", "gpu needs a node name and a GPU index");
    }
    uint32_t nidx;
    if (cr_sched_node_find(p->s, t[1].val, &nidx) < 0) {
        return perr(p, CR_ENOENT, "node", "unknown node '%s'", t[1].val);
    }
    uint64_t gi;
    if (parse_u64(t[2].val, p->s->nodes[nidx].ngpu ? p->s->nodes[nidx].ngpu - 1 : 0, &gi) < 0 ||
        p->s->nodes[nidx].ngpu == 0) {
        return perr(p, CR_EPARSE, "index", "'%s' is not a GPU index of %s", t[2].val, t[1].val);
    }
    const char *reason = NULL, *layout = NULL;
    int health = -1, mig = -1, dynamic = -1;
    for (int i = 3; i < n; i++) {
        const char *k = t[i].key, *v = t[i].val;
        if (!k) {
            return perr(p, CR_EPARSE, v, "expected key=value");
        } else if (strcmp(k, "health") == 0) {
            if (strcmp(v, "ok") && strcmp(v, "bad")) {
                return perr(p, CR_EPARSE, "health", "expected ok or bad");
            }
            health = strcmp(v, "ok") == 0;
        } else if (strcmp(k, "reason") == 0) {
            reason = v;
        } else if (strcmp(k, "mig") == 0) {
            if (strcmp(v, "on") && strcmp(v, "off")) {
                return perr(p, CR_EPARSE, "mig", "expected on or off");
            }
            mig = strcmp(v, "on") == 0;
        } else if (strcmp(k, "layout") == 0) {
            layout = v;
        } else if (strcmp(k, "dynamic") == 0) {
            if (strcmp(v, "on") && strcmp(v, "off")) {
                return perr(p, CR_EPARSE, "dynamic", "expected on or off");
            }
            dynamic = strcmp(v, "on") == 0;
        } else {
            return perr(p, CR_EPARSE, k, "unknown field for gpu");
        }
    }
    if (mig >= 0) {
        int rc = cr_sched_gpu_set_mig(p->s, nidx, (uint32_t)gi, mig == 1);
        if (rc < 0) {
            return perr(p, rc, "mig", "cannot switch MIG mode: %s", cr_strerror(rc));
        }
    }
    if (layout) {
        /* "2g.12gb,1g.6gb,1g.6gb": the instances that exist on the GPU */
        char buf[256];
        const char *prof[9];
        size_t np = 0;
        snprintf(buf, sizeof buf, "%s", layout);
        for (char *sv = NULL, *tk = strtok_r(buf, ",", &sv); tk; tk = strtok_r(NULL, ",", &sv)) {
            if (np == 8) {
                return perr(p, CR_ERANGE, "layout", "more than 8 MIG instances");
            }
            prof[np++] = tk;
        }
        int rc = cr_sched_gpu_set_mig_layout(p->s, nidx, (uint32_t)gi, prof, np, NULL);
        if (rc < 0) {
            return perr(p, rc, "layout", "cannot set MIG layout '%s': %s", layout,
                        rc == CR_ENOENT   ? "unknown profile"
                        : rc == CR_ERANGE ? "instances do not fit the GPU"
                                          : cr_strerror(rc));
        }
    }
    if (dynamic >= 0) {
        int rc = cr_sched_gpu_set_mig_dynamic(p->s, nidx, (uint32_t)gi, dynamic == 1);
        if (rc < 0) {
            return perr(p, rc, "dynamic", "type %s has no MIG geometry",
                        p->s->types[p->s->nodes[nidx].gpus[gi].type].name);
        }
    }
    if (health >= 0) {
        cr_sched_gpu_set_health(p->s, nidx, (uint32_t)gi, health == 1, reason, p->s->now_ns, NULL,
                                NULL);
    }
    return 0;
}

static int rec_tenant(pctx *p, tok *t, int n)
{
    if (n < 2 || t[1].key) {
        return perr(p, CR_EPARSE, "name", "tenant needs a name");
    }
    if (strlen(t[1].val) >= CR_SCHED_NAME_MAX) {
        return name_too_long(p, "name", t[1].val);
    }
    const decl *d = decl_find(p->tenants, p->ntenants, t[1].val);
    if (d) {
        return perr(p, CR_EPARSE, "name", "tenant '%s' is already declared on line %d", t[1].val,
                    d->line);
    }
    CR_GROW(p->tenants, p->ntenants, p->ctenants);
    snprintf(p->tenants[p->ntenants].name, CR_SCHED_NAME_MAX, "%s", t[1].val);
    p->tenants[p->ntenants++].line = p->line;
    int id;
    int rc = cr_sched_tenant(p->s, t[1].val, &id);
    if (rc < 0) {
        return perr(p, rc, "name", "bad tenant name");
    }
    for (int i = 2; i < n; i++) {
        const char *k = t[i].key, *v = t[i].val;
        if (!k) {
            return perr(p, CR_EPARSE, v, "expected key=value");
        } else if (strcmp(k, "weight") == 0) {
            double w;
            if (cr_parse_f64(v, 1e-6, 1e6, &w) < 0) {
                return perr(p, CR_EPARSE, "weight", "expected a number in (0, 1e6]");
            }
            cr_sched_tenant_set_weight(p->s, id, w);
        } else if (strcmp(k, "parent") == 0) {
            /* declared on an earlier line: the file cannot make a cycle */
            int par;
            if (!decl_find(p->tenants, p->ntenants - 1, v) ||
                cr_sched_tenant_find(p->s, v, &par) != 0) {
                return perr(p, CR_ENOENT, "parent",
                            "tenant '%s' is not declared on an earlier line", v);
            }
            if (cr_sched_tenant_set_parent(p->s, id, par) != 0) {
                return perr(p, CR_EINVAL, "parent",
                            "the tenant tree would be deeper than %d levels",
                            CR_SCHED_TENANT_DEPTH_MAX);
            }
        } else if (strcmp(k, "quota") == 0 || strcmp(k, "limit") == 0 || strcmp(k, "lend") == 0) {
            char buf[512];
            if (strlen(v) >= sizeof(buf) || !v[0]) {
                return perr(p, CR_EPARSE, k, "expected <type>:<gpus>,...");
            }
            snprintf(buf, sizeof(buf), "%s", v);
            char *save = NULL;
            for (char *q = strtok_r(buf, ",", &save); q; q = strtok_r(NULL, ",", &save)) {
                char *colon = strrchr(q, ':');
                int type;
                int64_t g;
                if (!colon) {
                    return perr(p, CR_EPARSE, k, "expected <type>:<gpus>, got '%s'", q);
                }
                *colon = '\0';
                if (type_of(p, q, &type) < 0) {
                    return perr(p, CR_ENOENT, k, "unknown GPU type '%s'", q);
                }
                if (cr_parse_i64(colon + 1, 0, INT32_MAX, &g) < 0) {
                    return perr(p, CR_EPARSE, k, "bad GPU count '%s'", colon + 1);
                }
                if (k[0] == 'q') {
                    cr_sched_tenant_set_quota(p->s, id, type, g);
                } else if (k[0] == 'l' && k[1] == 'i') {
                    cr_sched_tenant_set_limit(p->s, id, type, g);
                } else {
                    cr_sched_tenant_set_lending(p->s, id, type, g);
                }
            }
        } else {
            return perr(p, CR_EPARSE, k, "unknown field for tenant");
        }
    }
    return 0;
}

int cr_sched_load_cluster(cr_sched *s, const char *text, size_t len, char *err, size_t errlen)
{
    pctx p = {.s = s, .err = err, .errlen = errlen};
    int rc = 0;
    char *line = NULL;
    size_t cap = 0;
    if (err && errlen) {
        err[0] = '\0';
    }
    if (!text && len) {
        return CR_EINVAL;
    }
    size_t pos = 0;
    while (pos < len && rc == 0) {
        size_t e = pos;
        while (e < len && text[e] != '\n') {
            e++;
        }
        p.line++;
        size_t l = e - pos;
        if (memchr(text + pos, '\0', l) != NULL) {
            rc = perr(&p, CR_EPARSE, "line", "NUL byte");
            break;
        }
        if (l + 1 > cap) {
            cap = l + 1;
            line = cr_realloc(line, cap);
        }
        memcpy(line, text + pos, l);
        line[l] = '\0';
        if (l && line[l - 1] == '\r') {
            line[l - 1] = '\0';
        }
        pos = e + 1;
        tok t[MAX_TOK];
        int n = tokenize(line, t);
        if (n == -1) {
            rc = perr(&p, CR_EPARSE, "line", "unterminated quote");
        } else if (n == -2) {
            rc = perr(&p, CR_EPARSE, "line", "more than %d fields", MAX_TOK);
        } else if (n == 0) {
            continue;
        } else if (t[0].key) {
            rc =
                perr(&p, CR_EPARSE, "keyword", "a line starts with a keyword, not '%s='", t[0].key);
        } else if (strcmp(t[0].val, "gpu-type") == 0) {
            rc = rec_gpu_type(&p, t, n);
        } else if (strcmp(t[0].val, "mig-profile") == 0) {
            rc = rec_mig_profile(&p, t, n);
        } else if (strcmp(t[0].val, "rack") == 0) {
            rc = rec_rack(&p, t, n);
        } else if (strcmp(t[0].val, "node") == 0) {
            rc = rec_node(&p, t, n);
        } else if (strcmp(t[0].val, "gpu") == 0) {
            rc = rec_gpu(&p, t, n);
        } else if (strcmp(t[0].val, "tenant") == 0) {
            rc = rec_tenant(&p, t, n);
        } else {
            rc = perr(&p, CR_EPARSE, "keyword",
                      "unknown keyword '%s' (gpu-type, mig-profile, rack, node, gpu, tenant)",
                      t[0].val);
        }
    }
    free(line);
    free(p.al);
    free(p.racks);
    free(p.tenants);
    return rc;
}
