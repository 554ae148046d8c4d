/*
 * ctl_runas.c - which Unix user a tenant's (or a user's) jobs run as on the
 * nodes, the per-GPU CPU and memory defaults, and the cluster id that
 * keeps checkpoint directories of different clusters apart.
 * docs/isolation.md describes the config.
 *
 *   "run_as": {
 *     "unmapped": "refuse" | "agent",           default "refuse"
 *     "tenants": {"NAME": {"uid": U, "gid": G, "allow_root": false}},
 *     "users":   {"TOKEN-NAME": {"uid": U, "gid": G}}     (override the tenant)
 *   }
 *
 * Without a "run_as" section the controller is in single-user mode: every
 * job runs as the agent's own user (said at start-up, loudly).
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_rng.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

static int map_entry(const json_t *e, const char *path, bool tenant, cr_json_err *err)
{
    static const char *const tm[] = {"uid", "gid", "allow_root", NULL};
    static const char *const um[] = {"uid", "gid", NULL};
    int64_t uid, gid;
    bool root = false;
    int rc;
    if (!json_is_object(e)) {
        return cr_json_fail(err, CR_EINVAL, path, "field '%s': must be an object", path);
    }
    if ((rc = cr_json_only(e, path, tenant ? tm : um, err)) ||
        (rc = cr_json_int(e, path, "uid", true, 0, 4294967294LL, &uid, err)) ||
        (rc = cr_json_int(e, path, "gid", true, 0, 4294967294LL, &gid, err)) ||
        (rc = cr_json_bool(e, path, "allow_root", false, &root, err))) {
        return rc;
    }
    if (uid == 0 && !root) {
        char f[300];
        snprintf(f, sizeof f, "%s.uid", path);
        return cr_json_fail(err, CR_EINVAL, f,
                            "field '%s': uid 0 (root) needs \"allow_root\": true on the tenant", f);
    }
    return 0;
}

int ctl_run_as_check(const json_t *v, cr_json_err *err)
{
    static const char *const members[] = {"unmapped", "tenants", "users", NULL};
    static const char *const modes[] = {"refuse", "agent", NULL};
    const char *unmapped = "refuse";
    json_t *tenants = NULL, *users = NULL;
    int rc;
    if (!json_is_object(v)) {
        return cr_json_fail(err, CR_EINVAL, "run_as", "field 'run_as': must be an object");
    }
    if ((rc = cr_json_only(v, "run_as", members, err)) ||
        (rc = cr_json_str(v, "run_as", "unmapped", false, 15, &unmapped, err)) ||
        (rc = cr_json_enum(unmapped, "run_as.unmapped", modes, err)) ||
        (rc = cr_json_obj(v, "run_as", "tenants", false, &tenants, err)) ||
        (rc = cr_json_obj(v, "run_as", "users", false, &users, err))) {
        return rc;
    }
    const char *k;
    json_t *e;
    json_object_foreach(tenants, k, e)
    {
        char path[300];
        cr_json_path(path, sizeof path, "run_as.tenants", k);
        if ((rc = map_entry(e, path, true, err)) != 0) {
            return rc;
        }
    }
    json_object_foreach(users, k, e)
    {
        char path[300];
        cr_json_path(path, sizeof path, "run_as.users", k);
        if ((rc = map_entry(e, path, false, err)) != 0) {
            return rc;
        }
    }
    return 0;
}

int ctl_run_as_lookup(const ctl_config *cfg, const char *tenant, const char *user, ctl_run_as *out,
                      char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    if (!cfg->run_as) {
        return 0; /* single-user mode */
    }
    json_t *te = json_object_get(json_object_get(cfg->run_as, "tenants"), tenant);
    json_t *ue = user ? json_object_get(json_object_get(cfg->run_as, "users"), user) : NULL;
    json_t *e = ue ? ue : te;
    if (e) {
        out->mapped = true;
        out->uid = (int64_t)json_integer_value(json_object_get(e, "uid"));
        out->gid = (int64_t)json_integer_value(json_object_get(e, "gid"));
        out->allow_root = te && json_is_true(json_object_get(te, "allow_root"));
        if (out->uid == 0 && !out->allow_root) {
            snprintf(why, whylen, "user '%s' maps to uid 0 and tenant '%s' does not allow root",
                     user ? user : "", tenant);
            return CR_EPERM;
        }
        return 0;
    }
    const char *u = json_string_value(json_object_get(cfg->run_as, "unmapped"));
    if (u && strcmp(u, "agent") == 0) {
        return 0;
    }
    snprintf(why, whylen,
             "tenant '%s' has no Unix user on the nodes: an admin must map it in the "
             "controller config (run_as.tenants)",
             tenant);
    return CR_EPERM;
}

int ctl_cluster_id_load(const char *state_dir, char *out, size_t len)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/cluster.id", state_dir);
    FILE *f = fopen(path, "r");
    if (f) {
        char buf[64] = "";
        bool ok = fgets(buf, sizeof buf, f) != NULL;
        fclose(f);
        buf[strcspn(buf, "\r\n")] = '\0';
        size_t n = strlen(buf);
        for (size_t i = 0; i < n; i++) {
            ok = ok && ((buf[i] >= '0' && buf[i] <= '9') || (buf[i] >= 'a' && buf[i] <= 'f'));
        }
        if (!ok || n != 16) {
            cr_error("%s: not a cluster id (16 hex digits)", path);
            return CR_EPARSE;
        }
        snprintf(out, len, "%s", buf);
        return 0;
    }
    unsigned char raw[8];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
        cr_error("getrandom: %s", strerror(errno));
        return CR_EIO;
    }
    char hex[17];
    for (size_t i = 0; i < sizeof raw; i++) {
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    }
    int rc = ctl_write_secret(path, hex);
    if (rc == 0) {
        snprintf(out, len, "%s", hex);
        cr_info("cluster id %s (new, in %s)", hex, path);
    }
    return rc;
}
