/*
 * cr_imgref.c - strict image references. See cr_imgref.h.
 */
#include "cr_imgref.h"

#include "cr_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static bool lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool alnum(char c)
{
    return lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

static bool word(char c)
{
    return alnum(c) || c == '_';
}

/* host labels joined by '.', then an optional ":port"; s is len bytes. */
static bool domain_ok(const char *s, size_t len)
{
    size_t i = 0;
    for (;;) {
        size_t b = i;
        while (i < len && (alnum(s[i]) || s[i] == '-')) {
            i++;
        }
        if (i == b || s[b] == '-' || s[i - 1] == '-') {
            return false;
        }
        if (i < len && s[i] == '.') {
            i++;
            continue;
        }
        break;
    }
    if (i == len) {
        return true;
    }
    if (s[i] != ':' || i + 1 == len || len - i - 1 > 5) {
        return false;
    }
    unsigned port = 0;
    for (size_t k = i + 1; k < len; k++) {
        if (s[k] < '0' || s[k] > '9') {
            return false;
        }
        port = port * 10 + (unsigned)(s[k] - '0');
    }
    return s[i + 1] != '0' && port >= 1 && port <= 65535;
}

/* One path component: [a-z0-9]+ ((. | _ | __ | -+) [a-z0-9]+)* */
static bool component_ok(const char *s, size_t len)
{
    size_t i = 0;
    if (len == 0 || !lower_alnum(s[0])) {
        return false;
    }
    while (i < len) {
        while (i < len && lower_alnum(s[i])) {
            i++;
        }
        if (i == len) {
            return true;
        }
        size_t b = i;
        if (s[i] == '.') {
            i++;
        } else if (s[i] == '_') {
            i += i + 1 < len && s[i + 1] == '_' ? 2 : 1;
        } else if (s[i] == '-') {
            while (i < len && s[i] == '-') {
                i++;
            }
        } else {
            return false;
        }
        if (i == b || i == len || !lower_alnum(s[i])) {
            return false;
        }
    }
    return true;
}

__attribute__((format(printf, 3, 4))) static int fail(char *why, size_t whylen, const char *fmt,
                                                      ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    return CR_EINVAL;
}

#define GRAMMAR "want [registry[:port]/]name[:tag][@sha256:digest]"

int cr_imgref_parse(const char *s, cr_imgref *out, char *why, size_t whylen)
{
    cr_imgref r;
    memset(&r, 0, sizeof r);
    size_t n = strlen(s);
    if (n == 0) {
        return fail(why, whylen, "%sthe image reference is empty", "");
    }
    if (n > CR_IMGREF_MAX) {
        return fail(why, whylen, "%sthe image reference is longer than 512 bytes", "");
    }
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f) {
            return fail(why, whylen, "%sno spaces, control or non-ASCII characters", "");
        }
    }
    /* The digest: after the last '@'. */
    size_t name_end = n;
    const char *at = strchr(s, '@');
    if (at) {
        if (strchr(at + 1, '@') || strncmp(at + 1, "sha256:", 7) != 0 || strlen(at + 8) != 64 ||
            strspn(at + 8, "0123456789abcdef") != 64) {
            return fail(why, whylen, "a digest must be @sha256: and 64 lowercase hex digits (%s)",
                        GRAMMAR);
        }
        snprintf(r.digest, sizeof r.digest, "%s", at + 1);
        name_end = (size_t)(at - s);
    }
    /* The registry: the first component, when it looks like a host. */
    size_t p0 = 0;
    const char *slash = memchr(s, '/', name_end);
    if (slash) {
        size_t dl = (size_t)(slash - s);
        bool host = memchr(s, '.', dl) || memchr(s, ':', dl) ||
                    (dl == 9 && strncmp(s, "localhost", 9) == 0);
        for (size_t i = 0; i < dl && !host; i++) {
            host = s[i] >= 'A' && s[i] <= 'Z';
        }
        if (host) {
            if (!domain_ok(s, dl)) {
                snprintf(why, whylen,
                         "'%.*s' is not a registry (host labels and an optional :port; no "
                         "transport such as docker-archive: or oci:; %s)",
                         (int)(dl > 100 ? 100 : dl), s, GRAMMAR);
                return CR_EINVAL;
            }
            memcpy(r.registry, s, dl);
            p0 = dl + 1;
        }
    }
    /* The tag: after a ':' in the last path component. */
    size_t path_end = name_end;
    const char *last = s + p0;
    for (const char *q = s + p0; q < s + name_end; q++) {
        if (*q == '/') {
            last = q + 1;
        }
    }
    const char *colon = memchr(last, ':', (size_t)(s + name_end - last));
    if (colon) {
        size_t tl = (size_t)(s + name_end - colon - 1);
        bool ok = tl >= 1 && tl <= CR_IMGREF_TAG_MAX && word(colon[1]);
        for (size_t i = 1; ok && i < tl; i++) {
            char c = colon[1 + i];
            ok = word(c) || c == '.' || c == '-';
        }
        if (!ok) {
            return fail(why, whylen, "a tag is [A-Za-z0-9_][A-Za-z0-9_.-]{0,127} (%s)", GRAMMAR);
        }
        memcpy(r.tag, colon + 1, tl);
        path_end = (size_t)(colon - s);
    }
    if (path_end <= p0) {
        return fail(why, whylen, "the image name is empty (%s)", GRAMMAR);
    }
    if (path_end > CR_IMGREF_NAME_MAX) {
        return fail(why, whylen, "%sthe registry and name are longer than 255 bytes", "");
    }
    for (size_t b = p0; b <= path_end;) {
        const char *e = memchr(s + b, '/', path_end - b);
        size_t ce = e ? (size_t)(e - s) : path_end;
        if (!component_ok(s + b, ce - b)) {
            return fail(why, whylen,
                        "each part of the name is lowercase letters and digits joined by '.', "
                        "'_', '__' or '-' (%s)",
                        GRAMMAR);
        }
        b = ce + 1;
    }
    memcpy(r.path, s + p0, path_end - p0);
    /* What podman is given must be a name too (docker.io/library/ added). */
    size_t qual = strlen(cr_imgref_registry(&r)) + 1 + strlen(r.path) +
                  (!*r.registry && !strchr(r.path, '/') ? 8 : 0);
    if (qual > CR_IMGREF_NAME_MAX) {
        return fail(why, whylen, "the fully qualified name (%.40s/...) is longer than %d bytes",
                    cr_imgref_registry(&r), CR_IMGREF_NAME_MAX);
    }
    if (!*r.registry && strlen(r.path) == 64 && strspn(r.path, "0123456789abcdef") == 64) {
        return fail(why, whylen, "%sa 64-digit hex image id is not a reference (name the image)",
                    "");
    }
    /* "oci-archive:x.tar" is a name and a tag in the grammar; what podman
     * would read as a transport is refused as well, in case a raw string
     * ever reaches it. */
    static const char *const transports[] = {
        "docker-archive",     "oci-archive", "oci",     "dir",    "docker", "docker-daemon",
        "containers-storage", "sif",         "tarball", "ostree", NULL};
    for (size_t i = 0; !*r.registry && *r.tag && transports[i]; i++) {
        if (strcmp(r.path, transports[i]) == 0) {
            return fail(why, whylen, "'%s:' is a podman transport, not an image name", r.path);
        }
    }
    const char *first = r.path;
    if (strncmp(first, CR_IMGREF_TENANT_NS, strlen(CR_IMGREF_TENANT_NS)) == 0 ||
        (strncmp(first, "library/", 8) == 0 &&
         strncmp(first + 8, CR_IMGREF_TENANT_NS, strlen(CR_IMGREF_TENANT_NS)) == 0)) {
        return fail(why, whylen,
                    "names under %s... are the node agent's own (images a tenant loaded from its "
                    "archive)",
                    CR_IMGREF_TENANT_NS);
    }
    *out = r;
    return 0;
}

const char *cr_imgref_registry(const cr_imgref *r)
{
    return *r->registry ? r->registry : "docker.io";
}

bool cr_imgref_local(const cr_imgref *r)
{
    return strcmp(r->registry, "localhost") == 0;
}

int cr_imgref_full(const cr_imgref *r, char *buf, size_t len)
{
    const char *lib = !*r->registry && !strchr(r->path, '/') ? "library/" : "";
    int n = snprintf(buf, len, "%s/%s%s%s%s%s%s", cr_imgref_registry(r), lib, r->path,
                     *r->tag ? ":" : "", r->tag, *r->digest ? "@" : "", r->digest);
    if (!*r->tag && !*r->digest && n >= 0 && (size_t)n + 7 < len) {
        n += snprintf(buf + n, len - (size_t)n, ":latest");
    }
    return n < 0 || (size_t)n >= len ? CR_ERANGE : 0;
}

bool cr_imgref_registry_in(const cr_imgref *r, const char *const *list, size_t n)
{
    const char *reg = cr_imgref_registry(r);
    for (size_t i = 0; i < n; i++) {
        if (list[i] && strcasecmp(list[i], reg) == 0) {
            return true;
        }
    }
    return false;
}

bool cr_imgref_registry_ok(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n <= CR_IMGREF_NAME_MAX && domain_ok(s, n);
}
