/*
 * cr_imgref.h - container image references, parsed strictly (the docker
 * reference grammar, docs/containers.md "Image references"):
 *
 *   [registry[:port]/]name[:tag][@digest]
 *
 *   registry   dot-separated host labels ([A-Za-z0-9], '-' inside), then an
 *              optional :port (1..65535). The first component is a registry
 *              only when it has a '.' or a ':' or is "localhost".
 *   name       '/'-separated components of [a-z0-9] runs joined by one '.',
 *              one '_', "__" or a run of '-'
 *   tag        [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
 *   digest     "sha256:" and 64 lowercase hex digits
 *
 * Nothing else passes: no transport prefix ("docker-archive:/etc/shadow",
 * "oci:", "dir:", "containers-storage:", "docker://"), no spaces or control
 * characters, no uppercase name, no bare 64-hex image id. One parser for the
 * controller (at submit and services create, the error names the field
 * "image") and the agent (again, before podman is called). Names under
 * "corral-tenant-..." are the agent's own (images a tenant loaded from its
 * archive, agent_imgown.c) and refused here.
 *
 * The agent gives podman only cr_imgref_full()'s fully qualified form, so a
 * short name is never resolved through podman's search registries or
 * matched against another image by suffix. No I/O, no allocation.
 */
#ifndef CR_IMGREF_H
#define CR_IMGREF_H

#include <stdbool.h>
#include <stddef.h>

#define CR_IMGREF_MAX      512 /* bytes of a whole reference */
#define CR_IMGREF_NAME_MAX 255 /* registry/name (docker's NameTotalLengthMax) */
#define CR_IMGREF_TAG_MAX  128
/* The agent's namespace for archive-loaded images (refused from tenants). */
#define CR_IMGREF_TENANT_NS "corral-tenant-"

typedef struct cr_imgref {
    char registry[CR_IMGREF_NAME_MAX + 1]; /* as written; "" none (docker.io implied) */
    char path[CR_IMGREF_NAME_MAX + 1];     /* "team/model" */
    char tag[CR_IMGREF_TAG_MAX + 1];       /* "" none */
    char digest[72];                       /* "sha256:<64 hex>", "" none */
} cr_imgref;

/*
 * Parse s (borrowed) into *out. 0, or CR_EINVAL with the reason in why
 * ("registry 'docker-archive:' ... "); *out untouched on failure.
 */
int cr_imgref_parse(const char *s, cr_imgref *out, char *why, size_t whylen);

/* The registry images of r come from: r->registry, or "docker.io". */
const char *cr_imgref_registry(const cr_imgref *r);

/* Whether r's registry is "localhost" (images only ever local). */
bool cr_imgref_local(const cr_imgref *r);

/*
 * The fully qualified reference into buf: REGISTRY/PATH[:TAG][@DIGEST],
 * "docker.io/library/x" for a one-component name without a registry, and
 * ":latest" when there is neither tag nor digest. 0, or CR_ERANGE.
 */
int cr_imgref_full(const cr_imgref *r, char *buf, size_t len);

/*
 * Whether r's registry is one of list[0..n) ("host" or "host:port",
 * compared without case; borrowed). A registry without a port matches only
 * an entry without one.
 */
bool cr_imgref_registry_in(const cr_imgref *r, const char *const *list, size_t n);

/* Whether s is a well-formed registry entry for an allow-list ("host" or
 * "host:port", as in a reference). */
bool cr_imgref_registry_ok(const char *s);

#endif
