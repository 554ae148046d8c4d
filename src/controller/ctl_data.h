/*
 * ctl_data.h - datasets and models as objects (issue 32, docs/data.md).
 *
 * A data object is a name, a version and where its bytes are: a URI of
 * scheme file: (a path on storage the nodes share), http:// or https://,
 * or s3:// (fetched by the agents with libcurl's AWS SigV4), with its size
 * and sha256 so that a node can tell a good copy from a bad one. Adding a
 * name again makes its next version (1, 2, ...); versions are never
 * renumbered. An object belongs to a tenant: its users see and use it; one
 * marked "visibility": "all" is seen and used by every tenant. Names are
 * unique per tenant; a name is resolved in the job's tenant first, then
 * among the objects visible to all.
 *
 * A job names objects in "data" ("NAME[@VERSION][:/mount/point]"): at
 * submit they are resolved to their version's URI, size and sha256, which
 * the job's stored request then carries, so a job runs what it was
 * submitted with even if a newer version is added or the name removed.
 *
 * Bounds: CTL_DATA_MAX objects (all versions of all tenants), URIs of at
 * most CTL_DATA_URI_MAX bytes, sizes 1 to CTL_DATA_SIZE_MAX bytes, at most
 * CTL_DATA_PER_JOB objects per job.
 *
 * Commit first: a change is stored, then applied to memory, under
 * c->admin_mu (no two changes cross between their commit and apply). The
 * objects in memory have their own lock (a leaf: nothing is taken while it
 * is held; mu may be held when it is taken).
 */
#ifndef CTL_DATA_H
#define CTL_DATA_H

#include "cr_json.h"

#include <jansson.h>

#define CTL_DATA_MAX      10000
#define CTL_DATA_URI_MAX  2048
#define CTL_DATA_SIZE_MAX (INT64_C(1) << 50) /* 1 PiB */
#define CTL_DATA_PER_JOB  16

struct ctl;
struct cr_http_req;
struct cr_principal;

/* The objects' memory (called once at start, before any thread). */
void ctl_data_init(struct ctl *c);
void ctl_data_fini(struct ctl *c);
/* The stored objects into memory (start-up, and a new HA leader). 0 or CR_EIO. */
int ctl_load_data(struct ctl *c);
/* /v1/data, /v1/data/{name}, /v1/data/{name}/{version}. */
void ctl_route_data(struct ctl *c, struct cr_http_req *req, const struct cr_principal *p,
                    char **seg, size_t nseg);
/*
 * A job request's "data" member (borrowed, may be NULL) resolved for
 * tenant into spec's "data" (replaced): an array of {"name", "version",
 * "uri", "size_bytes", "sha256", "mount" (may be absent), "env"}. 0, or
 * CR_EINVAL / CR_ENOENT with err naming the entry ("data[1]").
 */
int ctl_data_resolve(struct ctl *c, const char *tenant, const json_t *req_data, json_t *spec,
                     cr_json_err *err);
/*
 * Checks of one object's members, also for the CLI's messages: a name
 * (letters, digits, '-', '_', '.', starting with a letter or digit), a URI
 * of a known scheme, 64 hex digits. 0 or CR_EINVAL with err naming field
 * and the dataset.
 */
int ctl_data_check_uri(const char *name, const char *uri, cr_json_err *err);
int ctl_data_check_sha256(const char *name, const char *hex, cr_json_err *err);

#endif
