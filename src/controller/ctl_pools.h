/*
 * ctl_pools.h - node pools and the elastic capacity they give (issue 31).
 *
 * A pool (config member "pools", docs/pools.md) is a shape of node: a GPU
 * type and count, min/max nodes, cost per hour, boot time, labels and a
 * provider program. A pool with no provider is static: it only names the
 * nodes it holds (its "nodes" patterns, or the agent label pool=NAME). A
 * pool with a provider grows from pending demand that no current node can
 * meet and shrinks back to min_nodes after its idle time, through the exec
 * protocol of docs/pools.md (JSON on stdin/stdout, "version": 1).
 *
 * Threads: one pool thread (ctl_pools_start) decides under c->mu once a
 * second and runs the provider without it. The pools' state is guarded by
 * c->mu. The thread starts after the HTTP server (the providers' agents
 * need its address) and stops before the scheduler.
 */
#ifndef CTL_POOLS_H
#define CTL_POOLS_H

#include "cr_buf.h"
#include "cr_json.h"

#include <jansson.h>

struct ctl;
struct cr_http_req;
struct cr_principal;
struct ctl_node;

/* Validate a "pools" config section (an array of pool objects). 0 or
 * CR_EINVAL with err naming the member (pools[1].max_nodes). */
int ctl_pools_check(const json_t *v, cr_json_err *err);
/* The pools from cfg.pools, and their thread. 0 or a code (reported). */
int ctl_pools_start(struct ctl *c);
/* Stops the thread (a provider call under way is waited for, bounded by
 * its timeout) and frees the pools. NULL-safe, idempotent. */
void ctl_pools_stop(struct ctl *c);
/* GET /v1/pools, GET /v1/pools/{name}: the pools, their nodes and events. */
void ctl_route_pools(struct ctl *c, struct cr_http_req *req, const struct cr_principal *p,
                     char **seg, size_t nseg);
/* The corral_pool_* families into b (none without pools). Takes mu. */
void ctl_pools_metrics(struct ctl *c, cr_buf *b);

/* The power cap (W) for each GPU of node n: its pool's power_budget_w
 * over the GPUs of the pool's nodes in service; 0 none. mu held. */
int64_t ctl_pools_power_cap_w(struct ctl *c, const struct ctl_node *n);

/* The most GPUs a node of any pool has (0: no pools); the pools' config is
 * fixed at start, so any thread may ask. */
int64_t ctl_pools_max_gpus_per_node(const struct ctl *c);

#endif
