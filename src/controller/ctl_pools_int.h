/*
 * ctl_pools_int.h - the pools' state, shared by ctl_pools.c (config, the
 * provider protocol, scaling) and ctl_pools_power.c (suspending idle
 * static nodes and GPU power caps). Guarded by c->mu (ctl_pools.h).
 */
#ifndef CTL_POOLS_INT_H
#define CTL_POOLS_INT_H

#include "ctl_int.h"

#include "cr_json.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define EVENTS_MAX     64   /* per pool, newest kept */
#define PASS_MAX       16   /* creates or deletes per pool per pass */
#define DEMAND_MAX     1024 /* pending jobs looked at per pool per pass */
#define OUT_MAX        (1 << 20)
#define IDLE_MULT_MAX  8
#define REASON_MARK    " | pool "
#define BACKOFF_BASE_S 10
#define BACKOFF_MAX_S  900
#define ACC_MAX        64 /* tenants a pool's unbooked cost is kept for */
#define ACC_FLUSH_S    10 /* the cloud cost is booked to usage this often */
#define BURST_CACHE    32 /* tenants' budget states kept per pass */

typedef enum { PN_BOOTING = 0, PN_UP, PN_DRAINING, PN_DELETING } pn_state;

typedef struct pnode {
    char name[CTL_NAME_MAX];
    char id[128]; /* the provider's id of it ("" not said) */
    pn_state state;
    int64_t created_mono;      /* create asked (monotonic) */
    int64_t up_mono;           /* registered; 0 not yet */
    int64_t idle_mono;         /* idle since; 0 busy */
    int64_t retry_mono;        /* deleting: next try after a failed delete */
    bool inflight;             /* a provider call about it is running */
    char why[200];             /* why it was created (or is being deleted) */
    char tenant[CTL_NAME_MAX]; /* whose job it was created for ("" min_nodes, adopted) */
} pnode;

/* Cloud cost not yet booked to a tenant's usage. */
typedef struct pacc {
    char tenant[CTL_NAME_MAX];
    double gpu_s, cost;
} pacc;

typedef struct pevent {
    int64_t wall_ns;
    char node[CTL_NAME_MAX];
    char what[16];
    char why[300];
} pevent;

/* A static pool's member under power saving (ctl_pools_power.c). */
typedef enum { SN_ON = 0, SN_DRAINING, SN_SUSPENDING, SN_SUSPENDED, SN_RESUMING } sn_state;

typedef struct snode {
    char name[CTL_NAME_MAX];
    sn_state state;
    int64_t since_mono; /* ON: idle since (0 busy); else: in this state since */
    bool inflight;      /* a power call about it is running */
} snode;

typedef struct pool {
    char name[CTL_NAME_MAX];
    char gpu_type[CTL_NAME_MAX];
    char provider[1024]; /* "" static */
    int64_t gpus_per_node, min_nodes, max_nodes;
    int64_t boot_s, boot_timeout_s, idle_s, min_lifetime_s, pending_s, provider_timeout_s;
    int64_t refusal_retry_s;
    int64_t backoff_base_s; /* the first backoff; doubles per failure to BACKOFF_MAX_S */
    double cost_per_hour;
    json_t *labels;   /* owned object, may be empty */
    json_t *patterns; /* owned: static members (fnmatch), or NULL */
    json_t *pconfig;  /* owned: provider_config, passed through, or NULL */
    pnode *pn;        /* the provider's nodes */
    size_t npn, cappn;
    int64_t seq;  /* node names: <pool>-<seq> */
    int failures; /* failed boots and creates in a row */
    int64_t backoff_until_mono;
    char last_error[256];
    int refusals; /* refusals in a row */
    int64_t refused_until_mono;
    char refusal[256];
    int64_t last_delete_mono, last_regret_mono;
    int idle_mult;
    int64_t creates, deletes;
    double node_s;       /* node-seconds bought since start: booting to deleted */
    int64_t billed_mono; /* node_s counted up to (monotonic) */
    pacc acc[ACC_MAX];   /* per tenant, booked every ACC_FLUSH_S */
    size_t nacc;
    int64_t booked_mono;
    pevent ev[EVENTS_MAX];
    size_t nev;          /* events recorded in all (ring index nev % EVENTS_MAX) */
    bool listed;         /* the provider's list was read (at start) */
    int64_t list_s;      /* and is read again this often */
    int64_t listed_mono; /* when it was last read */
    /* Power saving of a static pool (ctl_pools_power.c): its members idle
     * suspend_s are suspended through power_provider ("" none) and resumed
     * for demand; power_budget_w caps its GPUs' power (0 none). */
    char power[1024];
    int64_t suspend_s, resume_timeout_s, power_budget_w;
    int64_t cap_w; /* power_budget_w over the GPUs in service (0 none), as last told */
    snode *sn;
    size_t nsn, capsn;
    int64_t suspends, resumes;
    int power_failures;
    int64_t power_backoff_until_mono;
    char power_error[256];
} pool;

struct ctl_pools {
    pool *p;
    size_t n;
    char server[600]; /* the URL agents reach the controller at */
    pthread_t th;
    bool started;
    pthread_mutex_t m; /* guards stop; cv wakes the thread */
    pthread_cond_t cv;
    bool stop;
};

/* ctl_pools.c, for ctl_pools_power.c. mu held unless said. */
typedef struct pcall {
    int rc;        /* 0 ok; CR_ENOSPC refused (capacity); else an error */
    char msg[256]; /* the error or the refusal */
    json_t *nodes; /* owned: the answer's nodes, or NULL */
} pcall;
void ctl__pools_event(pool *p, const char *node, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Run prog with req on stdin (no mu): its answer, checked against version 1. */
void ctl__pools_run(const pool *p, const char *prog, const json_t *req, pcall *out);
size_t ctl__pools_active_jobs(ctl *c, const ctl_node *n);
void ctl__pools_drain(ctl *c, ctl_node *n, bool on, const char *why);
void ctl__pools_reason_note(ctl_job *j, const char *note);
bool ctl__pools_static_member(ctl *c, const pool *p, const ctl_node *n);
/* Pending j may be demand: not held back by quota, a hold or a dependency,
 * whole GPUs, pending at least pending_s. */
bool ctl__pools_job_pending(const pool *p, const ctl_job *j, int64_t now_wall);
int ctl__pools_job_pieces(const ctl_job *j);
int ctl__pools_job_per_node(const ctl_job *j);

/* ctl_pools_power.c */
/* The power member of pool p at config path: "power_provider",
 * "suspend_s", "resume_timeout_s", "power_budget_w" (borrowed o). */
int ctl__pools_power_parse(const json_t *o, const char *path, pool *p, cr_json_err *err);
/* One power-saving pass of static pool p: suspend idle members, resume
 * them for demand (takes and releases mu). */
void ctl__pools_power_pass(ctl *c, pool *p);
/* Whether a suspended (or suspending, resuming) static node could take j:
 * the elastic pools count it as capacity, cheaper than a boot. */
bool ctl__pools_power_could_take(ctl *c, const ctl_job *j);
/* The GPU power cap of pool p from its budget: its nodes told when it
 * changes. mu held. */
void ctl__pools_caps_update(ctl *c, pool *p);
/* The pool that holds node n (a provider's node or a static member), or
 * NULL. mu held. */
pool *ctl__pools_of(ctl *c, const ctl_node *n);
/* The pool's power members into o (GET /v1/pools). */
void ctl__pools_power_json(ctl *c, const pool *p, json_t *o);

#endif
