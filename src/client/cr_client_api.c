/*
 * cr_client_api.c - typed calls of docs/api.md over cr_client_request.
 * Each builds the path (escaping names), sends, and leaves the answer in res.
 */
#include "cr_client.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"
#include "cr_time.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Long-polls get this much beyond their wait before the client gives up. */
#define POLL_MARGIN_NS (10 * CR_NS_PER_SEC)

static int get(cr_client *c, const char *path, cr_client_res *res)
{
    return cr_client_request(c, "GET", path, NULL, 0, res);
}

/* "/v1/<coll>/<escaped name><suffix>", returned new. */
static char *named_path(const char *coll, const char *name, const char *suffix)
{
    char *e = cr_client_escape(name);
    char *p = cr_asprintf("/v1/%s/%s%s", coll, e, suffix ? suffix : "");
    free(e);
    return p;
}

static void query_add(cr_buf *b, const char *key, const char *val)
{
    if (!val || !*val) {
        return;
    }
    char *e = cr_client_escape(val);
    cr_buf_printf(b, "%c%s=%s", b->len && memchr(b->data, '?', b->len) ? '&' : '?', key, e);
    free(e);
}

int cr_client_health(cr_client *c, cr_client_res *res)
{
    return get(c, "/v1/health", res);
}

int cr_client_version(cr_client *c, cr_client_res *res)
{
    return get(c, "/v1/version", res);
}

int cr_client_job_submit(cr_client *c, const json_t *job, cr_client_res *res)
{
    return cr_client_request(c, "POST", "/v1/jobs", job, 0, res);
}

int cr_client_jobs_list(cr_client *c, const char *state, const char *tenant, int64_t limit,
                        cr_client_res *res)
{
    cr_buf b;
    cr_buf_init(&b);
    cr_buf_puts(&b, "/v1/jobs");
    query_add(&b, "state", state);
    query_add(&b, "tenant", tenant);
    if (limit > 0) {
        char n[32];
        snprintf(n, sizeof n, "%" PRId64, limit);
        query_add(&b, "limit", n);
    }
    int rc = get(c, cr_buf_str(&b), res);
    cr_buf_fini(&b);
    return rc;
}

int cr_client_job_get(cr_client *c, int64_t id, cr_client_res *res)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/jobs/%" PRId64, id);
    return get(c, path, res);
}

int cr_client_job_action(cr_client *c, int64_t id, const char *action, cr_client_res *res)
{
    char *e = cr_client_escape(action);
    char *path = cr_asprintf("/v1/jobs/%" PRId64 "/%s", id, e);
    int rc = cr_client_request(c, "POST", path, NULL, 0, res);
    free(path);
    free(e);
    return rc;
}

int cr_client_job_action_ref(cr_client *c, const char *ref, const char *action, bool whole_array,
                             cr_client_res *res)
{
    char *r = cr_client_escape(ref);
    char *e = cr_client_escape(action);
    char *path = cr_asprintf("/v1/jobs/%s/%s%s", r, e, whole_array ? "?array=1" : "");
    int rc = cr_client_request(c, "POST", path, NULL, 0, res);
    free(path);
    free(e);
    free(r);
    return rc;
}

int cr_client_job_signal_ref(cr_client *c, const char *ref, const char *sig, bool whole_array,
                             cr_client_res *res)
{
    char *r = cr_client_escape(ref);
    char *path = cr_asprintf("/v1/jobs/%s/signal%s", r, whole_array ? "?array=1" : "");
    json_t *b = json_pack("{s:s}", "signal", sig);
    int rc = cr_client_request(c, "POST", path, b, 0, res);
    json_decref(b);
    free(path);
    free(r);
    return rc;
}

int cr_client_job_get_ref(cr_client *c, const char *ref, cr_client_res *res)
{
    char *path = named_path("jobs", ref, NULL);
    int rc = get(c, path, res);
    free(path);
    return rc;
}

int cr_client_job_logs(cr_client *c, int64_t id, const char *stream, uint64_t offset, bool follow,
                       cr_client_data_fn fn, void *ud, cr_client_res *res)
{
    return cr_client_job_logs_rank(c, id, stream, offset, -1, follow, fn, ud, res);
}

int cr_client_job_logs_rank(cr_client *c, int64_t id, const char *stream, uint64_t offset,
                            int64_t rank, bool follow, cr_client_data_fn fn, void *ud,
                            cr_client_res *res)
{
    char *e = cr_client_escape(stream ? stream : "stdout");
    char rk[32] = "";
    if (rank >= 0) {
        snprintf(rk, sizeof rk, "&rank=%" PRId64, rank);
    }
    char *path = cr_asprintf("/v1/jobs/%" PRId64 "/logs?stream=%s&offset=%" PRIu64 "%s%s", id, e,
                             offset, rk, follow ? "&follow=1" : "");
    int rc = cr_client_stream(c, path, 0, 0, fn, ud, res);
    free(path);
    free(e);
    return rc;
}

int cr_client_nodes_list(cr_client *c, cr_client_res *res)
{
    return get(c, "/v1/nodes", res);
}

int cr_client_node_get(cr_client *c, const char *name, cr_client_res *res)
{
    char *path = named_path("nodes", name, NULL);
    int rc = get(c, path, res);
    free(path);
    return rc;
}

int cr_client_node_drain(cr_client *c, const char *name, bool drain, const char *reason,
                         cr_client_res *res)
{
    char *path = named_path("nodes", name, drain ? "/drain" : "/undrain");
    json_t *body = json_object();
    if (reason && *reason) {
        json_object_set_new(body, "reason", json_string(reason));
    }
    int rc = cr_client_request(c, "POST", path, body, 0, res);
    json_decref(body);
    free(path);
    return rc;
}

int cr_client_usage(cr_client *c, const char *by, cr_client_res *res)
{
    return cr_client_usage_q(c, by, 0, NULL, res);
}

int cr_client_usage_q(cr_client *c, const char *by, int level, const char *period,
                      cr_client_res *res)
{
    cr_buf b;
    cr_buf_init(&b);
    cr_buf_puts(&b, "/v1/usage");
    char sep = '?';
    if (level > 0) {
        cr_buf_printf(&b, "%clevel=%d", sep, level);
        sep = '&';
    }
    if (period && *period) {
        char *e = cr_client_escape(period);
        cr_buf_printf(&b, "%cperiod=%s", sep, e);
        free(e);
        sep = '&';
    }
    if (by && *by) {
        /* commas stay literal: the server splits the list on them */
        cr_buf_printf(&b, "%cby=", sep);
        for (const char *p = by; *p; p++) {
            char one[2] = {*p, '\0'};
            if (*p == ',') {
                cr_buf_putc(&b, ',');
            } else {
                char *e = cr_client_escape(one);
                cr_buf_puts(&b, e);
                free(e);
            }
        }
    }
    int rc = get(c, cr_buf_str(&b), res);
    cr_buf_fini(&b);
    return rc;
}

int cr_client_tenants_list(cr_client *c, cr_client_res *res)
{
    return get(c, "/v1/tenants", res);
}

int cr_client_tenant_create(cr_client *c, const json_t *tenant, cr_client_res *res)
{
    return cr_client_request(c, "POST", "/v1/tenants", tenant, 0, res);
}

int cr_client_tenant_put(cr_client *c, const char *name, const json_t *tenant, cr_client_res *res)
{
    char *path = named_path("tenants", name, NULL);
    int rc = cr_client_request(c, "PUT", path, tenant, 0, res);
    free(path);
    return rc;
}

int cr_client_token_create(cr_client *c, const json_t *req, cr_client_res *res)
{
    return cr_client_request(c, "POST", "/v1/tokens", req, 0, res);
}

int cr_client_tokens_list(cr_client *c, cr_client_res *res)
{
    return get(c, "/v1/tokens", res);
}

int cr_client_token_revoke(cr_client *c, const char *id, cr_client_res *res)
{
    char *path = named_path("tokens", id, NULL);
    int rc = cr_client_request(c, "DELETE", path, NULL, 0, res);
    free(path);
    return rc;
}

int cr_client_agent_register(cr_client *c, const json_t *inventory, cr_client_res *res)
{
    return cr_client_request(c, "POST", "/v1/agents/register", inventory, 0, res);
}

int cr_client_agent_status(cr_client *c, const char *node, const json_t *status, cr_client_res *res)
{
    char *path = named_path("agents", node, "/status");
    int rc = cr_client_request(c, "POST", path, status, 0, res);
    free(path);
    return rc;
}

int cr_client_agent_desired(cr_client *c, const char *node, int64_t version, int64_t wait_s,
                            cr_client_res *res)
{
    char *e = cr_client_escape(node);
    char *path = cr_asprintf("/v1/agents/%s/desired?version=%" PRId64 "&wait=%" PRId64, e, version,
                             wait_s > 0 ? wait_s : 0);
    int64_t timeout = wait_s > 0 ? wait_s * CR_NS_PER_SEC + POLL_MARGIN_NS : 0;
    int rc = cr_client_request(c, "GET", path, NULL, timeout, res);
    free(path);
    free(e);
    return rc;
}

int cr_client_service_create(cr_client *c, const json_t *svc, cr_client_res *res)
{
    return cr_client_request(c, "POST", "/v1/services", svc, 0, res);
}

int cr_client_services_list(cr_client *c, cr_client_res *res)
{
    return get(c, "/v1/services", res);
}

int cr_client_service_get(cr_client *c, const char *name, cr_client_res *res)
{
    char *path = named_path("services", name, NULL);
    int rc = get(c, path, res);
    free(path);
    return rc;
}

int cr_client_service_scale(cr_client *c, const char *name, int64_t replicas, cr_client_res *res)
{
    char *path = named_path("services", name, "/scale");
    json_t *body = json_pack("{s:I}", "replicas", (json_int_t)replicas);
    int rc = cr_client_request(c, "POST", path, body, 0, res);
    json_decref(body);
    free(path);
    return rc;
}

int cr_client_service_update(cr_client *c, const char *name, const json_t *svc, cr_client_res *res)
{
    char *path = named_path("services", name, "/update");
    int rc = cr_client_request(c, "POST", path, svc, 0, res);
    free(path);
    return rc;
}

int cr_client_service_delete(cr_client *c, const char *name, cr_client_res *res)
{
    char *path = named_path("services", name, NULL);
    int rc = cr_client_request(c, "DELETE", path, NULL, 0, res);
    free(path);
    return rc;
}

int cr_client_service_endpoints(cr_client *c, const char *name, int64_t version, int64_t wait_s,
                                cr_client_res *res)
{
    char *e = cr_client_escape(name);
    char *path;
    int64_t timeout = 0;
    if (version >= 0 && wait_s > 0) {
        path = cr_asprintf("/v1/services/%s/endpoints?version=%" PRId64 "&wait=%" PRId64, e,
                           version, wait_s);
        timeout = wait_s * CR_NS_PER_SEC + POLL_MARGIN_NS;
    } else {
        path = cr_asprintf("/v1/services/%s/endpoints", e);
    }
    int rc = cr_client_request(c, "GET", path, NULL, timeout, res);
    free(path);
    free(e);
    return rc;
}

int cr_client_service_metrics(cr_client *c, const char *name, const json_t *metrics,
                              cr_client_res *res)
{
    char *path = named_path("services", name, "/metrics");
    int rc = cr_client_request(c, "POST", path, metrics, 0, res);
    free(path);
    return rc;
}
