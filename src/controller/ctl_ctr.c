/*
 * ctl_ctr.c - jobs that run in a container (docs/containers.md): the job
 * members "image", "image_archive", "mounts", "entrypoint", and the admin's
 * allow-list of host paths a tenant may mount (controller config):
 *
 *   "mounts_allowed": {"team-a": ["/data/team-a", "/models"]}
 *
 * A mount's source (and an image archive) must be one of the tenant's
 * paths or below one. Without an entry, a tenant may mount nothing.
 *
 * "image" is a strict reference (cr_imgref.h: no podman transport such as
 * docker-archive:, which would read any file on the node), and its
 * registry must be localhost or one of the admin's (controller config):
 *
 *   "image_registries": ["registry.example.com", "localhost:5000"]
 *
 * Default none: only localhost/ images (in the node's store, or loaded from
 * an allowed image_archive). The agent checks both again (cr_ctr.h).
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_imgref.h"

#include <stdio.h>
#include <string.h>

#define MAX_MOUNTS     64
#define MAX_ENTRYPOINT 64
#define MAX_ALLOWED    256

/* Absolute, no "." or ".." components, no "//", no ',' or ':' (podman -v). */
static bool path_clean(const char *p)
{
    if (p[0] != '/' || strstr(p, "//") || strpbrk(p, ",:")) {
        return false;
    }
    for (const char *s = p; (s = strchr(s, '/')) != NULL; s++) {
        if ((s[1] == '.' && (s[2] == '/' || s[2] == '\0')) ||
            (s[1] == '.' && s[2] == '.' && (s[3] == '/' || s[3] == '\0'))) {
            return false;
        }
    }
    return ctl_text_clean(p);
}

int ctl_mounts_allowed_check(const json_t *v, cr_json_err *err)
{
    const char *k;
    json_t *a;
    json_object_foreach((json_t *)v, k, a)
    {
        char f[300];
        cr_json_path(f, sizeof f, "mounts_allowed", k);
        if (!json_is_array(a) || json_array_size(a) > MAX_ALLOWED) {
            return cr_json_fail(err, CR_EINVAL, f,
                                "field '%s': must be an array of up to %d host paths", f,
                                MAX_ALLOWED);
        }
        for (size_t i = 0; i < json_array_size(a); i++) {
            const char *p = json_string_value(json_array_get(a, i));
            if (!p || !path_clean(p) || strcmp(p, "/") == 0 || p[strlen(p) - 1] == '/') {
                return cr_json_fail(err, CR_EINVAL, f,
                                    "field '%s[%zu]': must be an absolute, clean path other "
                                    "than / (no trailing '/')",
                                    f, i);
            }
        }
    }
    return 0;
}

static int str_list(const json_t *body, const char *key, size_t max, json_t **out, cr_json_err *err)
{
    int rc = cr_json_arr(body, "", key, false, max, out, err);
    for (size_t i = 0; rc == 0 && *out && i < json_array_size(*out); i++) {
        json_t *e = json_array_get(*out, i);
        char f[64];
        snprintf(f, sizeof f, "%s[%zu]", key, i);
        if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e) ||
            json_string_length(e) > 4096) {
            rc = cr_json_fail(err, CR_EINVAL, f,
                              "field '%s': must be a string without NUL, up to 4096 bytes", f);
        }
    }
    return rc;
}

int ctl_ctr_parse(const json_t *body, json_t *spec, cr_json_err *err)
{
    const char *image = "", *archive = "";
    json_t *mounts = NULL, *entry = NULL;
    int rc;
    if ((rc = cr_json_str(body, "", "image", false, 512, &image, err)) ||
        (rc = cr_json_str(body, "", "image_archive", false, 4096, &archive, err)) ||
        (rc = str_list(body, "mounts", MAX_MOUNTS, &mounts, err)) ||
        (rc = str_list(body, "entrypoint", MAX_ENTRYPOINT, &entry, err))) {
        return rc;
    }
    if (!*image && json_object_get(body, "image")) {
        return cr_json_fail(err, CR_EINVAL, "image",
                            "field 'image': must not be empty (leave it out for a job without a "
                            "container)");
    }
    if (!*image) {
        const char *needs[] = {"image_archive", "mounts", "entrypoint"};
        for (size_t i = 0; i < 3; i++) {
            if (json_object_get(body, needs[i])) {
                return cr_json_fail(err, CR_EINVAL, needs[i],
                                    "field '%s': only for a job with an \"image\"", needs[i]);
            }
        }
        return 0;
    }
    cr_imgref ref;
    char why[300];
    if (cr_imgref_parse(image, &ref, why, sizeof why) != 0) {
        return cr_json_fail(err, CR_EINVAL, "image", "field 'image': %s", why);
    }
    if (*archive && !path_clean(archive)) {
        return cr_json_fail(err, CR_EINVAL, "image_archive",
                            "field 'image_archive': must be an absolute, clean path on the node");
    }
    for (size_t i = 0; i < json_array_size(mounts); i++) {
        const char *m = json_string_value(json_array_get(mounts, i));
        char f[32];
        snprintf(f, sizeof f, "mounts[%zu]", i);
        const char *c1 = strchr(m, ':');
        const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c1 || (c2 && strcmp(c2, ":ro") != 0)) {
            return cr_json_fail(err, CR_EINVAL, f, "field '%s': want SRC:DST or SRC:DST:ro", f);
        }
        char *src = cr_strndup(m, (size_t)(c1 - m));
        char *dst = c2 ? cr_strndup(c1 + 1, (size_t)(c2 - c1 - 1)) : cr_strdup(c1 + 1);
        bool ok = path_clean(src) && path_clean(dst) && strcmp(src, "/") != 0;
        free(src);
        free(dst);
        if (!ok) {
            return cr_json_fail(err, CR_EINVAL, f,
                                "field '%s': SRC and DST must be absolute, clean paths (no "
                                "'..', '//', ',' or ':')",
                                f);
        }
    }
    json_object_set_new(spec, "image", json_string(image));
    if (*archive) {
        json_object_set_new(spec, "image_archive", json_string(archive));
    }
    if (mounts) {
        json_object_set(spec, "mounts", mounts);
    }
    if (entry) {
        json_object_set(spec, "entrypoint", entry);
    }
    return 0;
}

/* Is path one of the tenant's allowed paths or below one? */
bool ctl_mount_allowed(const ctl_config *cfg, const char *tenant, const char *path)
{
    json_t *list = cfg->mounts_allowed ? json_object_get(cfg->mounts_allowed, tenant) : NULL;
    for (size_t i = 0; i < json_array_size(list); i++) {
        const char *a = json_string_value(json_array_get(list, i));
        size_t n = strlen(a);
        if (strncmp(path, a, n) == 0 && (path[n] == '\0' || path[n] == '/')) {
            return true;
        }
    }
    return false;
}

static bool registry_allowed(const ctl_config *cfg, const cr_imgref *ref)
{
    const char *list[MAX_ALLOWED];
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(cfg->image_registries) && n < MAX_ALLOWED; i++) {
        list[n++] = json_string_value(json_array_get(cfg->image_registries, i));
    }
    return cr_imgref_registry_in(ref, list, n);
}

int ctl_image_registries_check(const json_t *v, cr_json_err *err)
{
    if (!json_is_array(v) || json_array_size(v) > MAX_ALLOWED) {
        return cr_json_fail(err, CR_EINVAL, "image_registries",
                            "field 'image_registries': must be an array of up to %d registries",
                            MAX_ALLOWED);
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        const char *r = json_string_value(json_array_get(v, i));
        if (!r || !cr_imgref_registry_ok(r)) {
            return cr_json_fail(err, CR_EINVAL, "image_registries",
                                "field 'image_registries[%zu]': want host or host:port, as in an "
                                "image reference (registry.example.com, localhost:5000)",
                                i);
        }
    }
    return 0;
}

int ctl_ctr_check_tenant(const ctl_config *cfg, const char *tenant, const json_t *spec,
                         cr_json_err *err)
{
    json_t *mounts = json_object_get(spec, "mounts");
    for (size_t i = 0; i < json_array_size(mounts); i++) {
        const char *m = json_string_value(json_array_get(mounts, i));
        char *src = cr_strndup(m, strcspn(m, ":"));
        bool ok = ctl_mount_allowed(cfg, tenant, src);
        char f[32];
        snprintf(f, sizeof f, "mounts[%zu]", i);
        int rc = ok ? 0
                    : cr_json_fail(err, CR_EPERM, f,
                                   "field '%s': %s is not a host path tenant '%s' may mount (an "
                                   "admin lists them in the controller config, mounts_allowed)",
                                   f, src, tenant);
        free(src);
        if (rc) {
            return rc;
        }
    }
    const char *image = json_string_value(json_object_get(spec, "image"));
    cr_imgref ref;
    char why[300];
    if (image && cr_imgref_parse(image, &ref, why, sizeof why) != 0) {
        return cr_json_fail(err, CR_EINVAL, "image", "field 'image': %s", why);
    }
    if (image && !cr_imgref_local(&ref) && !registry_allowed(cfg, &ref)) {
        return cr_json_fail(err, CR_EPERM, "image",
                            "field 'image': registry %s is not one jobs may use images from "
                            "(image_registries in the controller config: %s; a name without a "
                            "registry is docker.io's, localhost/ images need none)",
                            cr_imgref_registry(&ref),
                            json_array_size(cfg->image_registries) ? "not listed" : "none listed");
    }
    const char *ar = json_string_value(json_object_get(spec, "image_archive"));
    if (ar && !ctl_mount_allowed(cfg, tenant, ar)) {
        return cr_json_fail(err, CR_EPERM, "image_archive",
                            "field 'image_archive': %s is not under a host path tenant '%s' may "
                            "use (mounts_allowed in the controller config)",
                            ar, tenant);
    }
    return 0;
}

json_t *ctl_ctr_desired(const ctl *c, const json_t *spec)
{
    const char *image = json_string_value(json_object_get(spec, "image"));
    if (!image) {
        return NULL;
    }
    json_t *o = json_pack("{s:s,s:s}", "image", image, "cluster", c->cluster_id);
    json_t *v;
    if ((v = json_object_get(spec, "image_archive"))) {
        json_object_set(o, "archive", v);
    }
    if ((v = json_object_get(spec, "mounts"))) {
        json_object_set(o, "mounts", v);
    }
    if ((v = json_object_get(spec, "entrypoint"))) {
        json_object_set(o, "entrypoint", v);
    }
    return o;
}
