/*
 * gw_int.h - private state of the gateway, shared by its .c files.
 *
 * Threads. One event-loop thread owns every connection, service and
 * replica (no locks on the proxy path). Two kinds of helper threads do the
 * slow work and talk to the loop only through the inbox (gw->mu):
 *   - the prober (gw_probe.c): health checks of replicas marked down (GET
 *     the readiness path) and, where enabled, scrapes of the replicas' own
 *     /metrics for load signals (vLLM's num_requests_waiting and
 *     kv_cache_usage_perc);
 *   - the controller client (gw_ctl.c, only with --controller): one
 *     long-poll thread per service for its endpoints, and a reporter that
 *     posts the services' load for the autoscaler.
 * The loop publishes what they need (probe targets, per-service stats) into
 * the same mutex-guarded area, and they post results back as messages and
 * wake the loop through an eventfd. Lock order: only gw->mu, never held
 * across I/O.
 *
 * Lifetimes. A replica removed from the endpoints is drained: it takes no
 * new requests, its idle connections close, and it is freed when its last
 * request ends. Connections closed during one epoll batch are freed after
 * the batch (the graveyard), so a later event of the same batch never
 * touches freed memory.
 */
#ifndef GW_INT_H
#define GW_INT_H

#include "cr_buf.h"
#include "cr_http_parse.h"
#include "cr_rng.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#define GW_BUF_SIZE     16384
#define GW_NAME_MAX     64
#define GW_HIST_BUCKETS 17   /* including +Inf */
#define GW_MODEL_MAX    128  /* a model name, NUL included */
#define GW_USAGE_WIN    2048 /* the response tail scanned for the OpenAI usage object */
#define GW_PREFIX_BYTES 512  /* prompt bytes hashed for prefix affinity */
#define GW_PREFIX_MIN   64   /* shorter prompts get no affinity */
#define GW_PREFIX_SLOTS 32   /* prefixes a replica remembers being sent */
#define GW_ADAPTER_MAX  64   /* LoRA adapters per service (a replica's set is a bit mask) */

typedef struct gw gw;
typedef struct gw_service gw_service;
typedef struct gw_replica gw_replica;
typedef struct gw_client gw_client;
typedef struct gw_backend gw_backend;
typedef struct gw_key gw_key;

/* A histogram over GW_HIST_BUCKETS - 1 bounds and +Inf (non-cumulative),
 * with its state at the last load report. */
typedef struct gw_hist {
    uint64_t b[GW_HIST_BUCKETS];   /* counts per bucket */
    uint64_t rep[GW_HIST_BUCKETS]; /* b at the last report */
    double sum;                    /* sum of the values */
    uint64_t count;                /* values */
} gw_hist;

/* Gateway-made error answers, by reason, for the metrics. */
enum gw_err {
    GW_ERR_BAD_REQUEST = 0, /* unparseable request */
    GW_ERR_NO_SERVICE,      /* no service matched: 404 */
    GW_ERR_NO_REPLICA,      /* none ready (and not held, or held past the timeout): 503 */
    GW_ERR_SATURATED,       /* every ready replica at max in-flight: 503 */
    GW_ERR_CONNECT,         /* backend connection failed and no retry left: 502 */
    GW_ERR_UPSTREAM,        /* backend broke the response: 502 or cut */
    GW_ERR_TIMEOUT,         /* backend too slow: 504 */
    GW_ERR_AUTH,            /* no, a bad, revoked or expired key: 401; out of scope: 403 */
    GW_ERR_LIMITED,         /* a key over its requests/s or concurrency: 429 */
    GW_ERR_COUNT
};

/* One endpoint of a service, as configured or as the controller lists it. */
typedef struct gw_endpoint {
    char host[GW_NAME_MAX]; /* numeric IPv4/IPv6 address or a host name */
    uint16_t port;          /* TCP port */
    bool ready;             /* serves traffic (the controller's readiness) */
    bool adapters_set;      /* adapters lists what it holds (else: all of its service's) */
    uint64_t adapters;      /* bit i: it holds its service's adapters[i] */
    char site[GW_NAME_MAX]; /* its node's label site ("" unknown): --site prefers its own */
} gw_endpoint;

/* Per-service settings from the command line or the config file. */
typedef struct gw_service_conf {
    char name[GW_NAME_MAX];   /* path prefix and Host name */
    gw_endpoint *endpoints;   /* static endpoints; owned */
    size_t endpoint_count;    /* entries in endpoints */
    char ready_path[256];     /* readiness GET path, default "/health" */
    int32_t max_inflight;     /* per replica; 0 = the gateway default */
    bool scrape;              /* scrape replicas' /metrics for load signals */
    bool static_eps;          /* endpoints are static (config file or flag), even if none */
    char tenant[GW_NAME_MAX]; /* owner, for key scopes ("" any key's tenant) */
    char **models;            /* model names it serves (OpenAI "model"); owned */
    size_t model_count;       /* entries in models */
    char **adapters;          /* LoRA adapters of its base model (models[0]); owned */
    size_t adapter_count;     /* entries in adapters, at most GW_ADAPTER_MAX */
    double ttft_target_ms;    /* serving SLO: time to first token, 0 none */
    double tpot_target_ms;    /* serving SLO: time per output token, 0 none */
} gw_service_conf;

/* The immutable configuration, loaded in main. */
typedef struct gw_conf {
    char listen_host[GW_NAME_MAX]; /* bind address */
    uint16_t listen_port;          /* bind port */
    char *controller;              /* controller base URL or NULL; owned */
    char *token;                   /* bearer token for the controller or NULL; owned */
    char *ca_file;                 /* PEM CA bundle to verify an https:// controller; owned */
    char *site;                    /* --site: replicas of this site first (edge); owned, NULL */
    char *config_path;             /* --config file, reloaded on SIGHUP; owned */
    gw_service_conf *services;     /* owned array */
    size_t service_count;          /* entries in services */
    int32_t max_inflight;          /* default per-replica in-flight bound */
    int32_t max_clients;           /* client connections open at once */
    int32_t hold_max;              /* requests held per service at zero replicas; 0 = none */
    double batch_share;          /* a batch request's share of a replica's max_inflight (0.05..1) */
    int64_t hold_timeout_ns;     /* how long a held request waits */
    int32_t retry_after_s;       /* Retry-After on 503 */
    int64_t connect_timeout_ns;  /* backend connect */
    int64_t upstream_timeout_ns; /* silence from a backend mid-response */
    int64_t client_idle_ns;      /* idle keep-alive client */
    int64_t header_timeout_ns;   /* first byte to the end of a request head */
    int64_t body_timeout_ns;     /* request body silence (frees the replica slot) */
    int64_t shutdown_grace_ns;   /* on SIGTERM, how long in-flight requests may finish */
    int64_t probe_interval_ns;   /* health checks and scrapes */
    int64_t report_interval_ns;  /* stats to the controller */
    int32_t retries;             /* extra attempts after a connection failure */
    uint64_t seed;               /* RNG seed of the peer choice */
    int require_keys;            /* 1 clients need an API key, 0 not, -1 default (controller) */
    bool prefix_affinity;        /* model-routed requests by prompt prefix (else p2c alone) */
    int64_t max_body_bytes;      /* model-routed request bodies are read whole up to this */
    char *tls_cert;              /* PEM certificate (chain) served to clients, or NULL; owned */
    char *tls_key;               /* its PEM private key; owned */
} gw_conf;

/* The io header every epoll-registered object starts with. */
enum gw_io_kind {
    GW_IO_LISTEN = 1,
    GW_IO_CLIENT,
    GW_IO_BACKEND,
    GW_IO_WAKE,
    GW_IO_SIGNAL,
    GW_IO_DEAD
};
typedef struct gw_io {
    int kind;       /* enum gw_io_kind */
    int fd;         /* the socket; -1 when closed */
    bool can_read;  /* edge-triggered readiness, cleared on EAGAIN */
    bool can_write; /* same for writing */
    bool rdhup;     /* the peer closed its side (EPOLLRDHUP seen) */
} gw_io;

struct gw_replica {
    gw_service *svc;              /* owner */
    gw_endpoint ep;               /* address as given */
    char key[GW_NAME_MAX + 8];    /* "host:port" */
    struct sockaddr_storage addr; /* resolved */
    socklen_t addr_len;           /* bytes of addr */
    int32_t outstanding;          /* requests on it now */
    bool down;                    /* a connection failed: no traffic until a probe passes */
    bool removed;                 /* gone from the endpoints: draining */
    double waiting;               /* scraped vllm:num_requests_waiting, 0 if none */
    double kv_usage;              /* scraped vllm:kv_cache_usage_perc (0..1), 0 if none */
    bool lora_known;              /* scraped vllm:lora_requests_info */
    uint64_t lora_active; /* its adapters running or waiting there (bits of svc's adapters) */
    gw_backend *idle;     /* pool of idle keep-alive connections */
    int32_t idle_count;   /* connections in idle */
    int32_t conns;        /* connections open (idle or busy) */
    uint64_t requests;    /* requests sent to it */
    uint64_t failures;    /* connection failures seen */
    uint64_t pfx[GW_PREFIX_SLOTS];      /* prefix hashes sent to it lately (0 free) */
    uint64_t pfx_used[GW_PREFIX_SLOTS]; /* their last use (the service's pfx_clock) */
};

/* The peer choice, behind a function pointer as nginx's peer.get: returns a
 * replica for a new request (exclude: one to avoid, may be NULL) or NULL
 * with *why set to GW_ERR_NO_REPLICA or GW_ERR_SATURATED. */
typedef gw_replica *(*gw_peer_get_fn)(gw *g, gw_service *s, const gw_replica *exclude, int *why);

struct gw_service {
    char name[GW_NAME_MAX];                    /* service name */
    size_t name_len;                           /* strlen(name) */
    char ready_path[256];                      /* readiness path */
    char tenant[GW_NAME_MAX];                  /* owner ("" unknown: static, any key's tenant) */
    char **models;                             /* model names served; owned */
    size_t model_count;                        /* entries in models */
    char **adapters;                           /* LoRA adapter names its replicas may hold; owned */
    size_t adapter_count;                      /* entries, at most GW_ADAPTER_MAX */
    uint64_t adapter_requests[GW_ADAPTER_MAX]; /* requests routed for each adapter */
    int want_adapter;                          /* during a peer choice: the adapter needed, or -1 */
    bool want_active; /* and only where it is active (scraped), the first try */
    bool want_batch;  /* during a peer choice: a batch request (up to batch_share x max_inflight) */
    gw_hist ttft;     /* time to first token, s (gw_slo.c) */
    gw_hist tpot;     /* time per output token, s */
    gw_hist tps;      /* output tokens per second of a request */
    uint64_t output_tokens;   /* of streamed completions */
    double slo_target_s[2];   /* serving SLOs: [0] TTFT, [1] TPOT; 0 none */
    uint64_t slo_met[2];      /* completions within each target */
    int32_t max_inflight;     /* per replica */
    bool scrape;              /* scrape load signals */
    gw_peer_get_fn peer_get;  /* the balancing policy */
    gw_replica **replicas;    /* owned; includes draining ones */
    size_t replica_count;     /* entries used */
    size_t replica_cap;       /* entries allocated */
    gw_client *held_head;     /* requests waiting for a first replica (FIFO) */
    gw_client *held_tail;     /* last held */
    int32_t held;             /* requests held */
    int32_t in_flight;        /* requests being served or held */
    int64_t inflight_mark_ns; /* when in_flight last changed */
    double inflight_area;     /* integral of in_flight over time (request-ns) since the snapshot */
    uint64_t codes[600];      /* responses by status code */
    uint64_t errors[GW_ERR_COUNT];         /* gateway-made errors by reason */
    uint64_t hist[GW_HIST_BUCKETS];        /* latency histogram, non-cumulative */
    double latency_sum_s;                  /* sum of latencies */
    uint64_t latency_count;                /* requests timed */
    uint64_t retries;                      /* retried attempts */
    uint64_t affinity[2];                  /* prefix choices: [0] cached, [1] new (least loaded) */
    uint64_t pfx_clock;                    /* prefix uses, for the replicas' LRU */
    uint64_t report_hist[GW_HIST_BUCKETS]; /* hist at the last stats snapshot */
    uint64_t report_count;                 /* latency_count at the last snapshot */
    int64_t report_ns;                     /* time of the last snapshot */
    bool activation;                       /* a request was held since the last report */
};

enum gw_client_state { C_READ_HEAD = 0, C_HELD, C_PROXY, C_LOCAL, C_BODY };
/* OpenAI routes (routed by the body's "model"). */
enum gw_api { API_NONE = 0, API_CHAT, API_COMPLETIONS, API_EMBEDDINGS, API_MODELS };
enum gw_body { BODY_NONE = 0, BODY_LENGTH, BODY_CHUNKED, BODY_EOF };

struct gw_client {
    gw_io io;                 /* first: epoll data points here */
    gw *g;                    /* the gateway */
    gw_client *prev, *next;   /* all clients, for timeouts */
    gw_client *held_next;     /* service's held queue */
    int state;                /* enum gw_client_state */
    char peer_ip[48];         /* for X-Forwarded-For */
    char *in;                 /* request bytes [0, in_len), in_cap */
    size_t in_len;            /* bytes in in */
    size_t in_cap;            /* GW_BUF_SIZE, more while a model-routed body is read whole */
    size_t head_len;          /* bytes of the current request's head */
    size_t send_pos;          /* next body byte to send to the backend */
    size_t body_end;          /* end of the framed body bytes present */
    int body_mode;            /* enum gw_body (request: NONE, LENGTH, CHUNKED) */
    int64_t body_left;        /* LENGTH: bytes still to arrive */
    cr_http_chunked chunk;    /* CHUNKED scanner */
    bool body_done;           /* the request body has fully arrived */
    bool retriable;           /* the whole request is still in the buffer */
    bool idempotent;          /* GET, HEAD, PUT, DELETE, OPTIONS, TRACE */
    bool is_head;             /* HEAD: the response has no body */
    bool http10;              /* an HTTP/1.0 request (forwarded as 1.0, no reuse) */
    bool keep_alive;          /* the client wants to keep the connection */
    bool close_after;         /* close once out is written */
    gw_service *svc;          /* service of the current request */
    int attempts;             /* backends tried for the current request */
    int64_t start_ns;         /* when the request head was parsed */
    int64_t deadline_ns;      /* timeout of the current state */
    int64_t body_deadline_ns; /* C_PROXY with the body still arriving: give up then */
    int64_t hold_deadline_ns; /* when holding gives up (0: never held) */
    cr_buf fwd;               /* the request head rewritten for the backend */
    cr_buf out;               /* bytes for the client: local answers, response heads */
    size_t out_off;           /* bytes of out written */
    gw_backend *b;            /* the backend serving it, or NULL */
    bool resp_started;        /* bytes of the response went to the client */
    int status;               /* response status, for the metrics */
    bool openai;              /* errors in OpenAI's shape {"error":{message,type,code}} */
    int api;                  /* enum gw_api of the current request */
    gw_key *key;              /* the verified API key, or NULL */
    int adapter;              /* the LoRA adapter asked for (index in svc's), or -1 */
    bool batch;               /* X-Corral-Priority: batch (shed first under load) */
    bool slo;                 /* a streamed completion: TTFT/TPOT measured (gw_slo.c) */
    int sse_at;               /* event scanner: "data:" bytes matched at a line start, -1 */
    uint64_t sse_events;      /* events seen in the response */
    int64_t first_token_ns;   /* when the first arrived */
    struct ssl_st *tls;       /* the TLS session (gw_tls.c), or NULL on a plain listener */
    bool tls_rd_on_wr;        /* a TLS read waits for the socket to be writable */
    bool tls_wr_on_rd;        /* a TLS write waits for it to be readable */
    bool tls_broken;          /* a TLS error: no close_notify */
    uint64_t prefix;          /* hash of the prompt prefix (model routes), 0 none */
    bool key_held;            /* counted in key->active */
    bool scan;                /* scan the response for the usage object */
    char *win;                /* scan: the last GW_USAGE_WIN response body bytes, or NULL */
    size_t win_len;           /* bytes in win */
};

enum gw_backend_state { B_CONNECTING = 0, B_ACTIVE, B_IDLE };

struct gw_backend {
    gw_io io;              /* first */
    gw_replica *rep;       /* the replica; outlives the connection */
    gw_client *c;          /* the client it serves, NULL when idle */
    gw_backend *pool_next; /* replica's idle list */
    int state;             /* enum gw_backend_state */
    bool reused;           /* taken from the pool for this request */
    bool got_bytes;        /* response bytes arrived for this request */
    bool head_done;        /* final response head parsed */
    bool resp_done;        /* the response ended */
    bool reusable;         /* may go back to the pool afterwards */
    size_t fwd_off;        /* bytes of c->fwd sent */
    char *in;              /* response bytes, GW_BUF_SIZE */
    size_t in_len;         /* bytes in in */
    size_t in_off;         /* next byte to forward to the client */
    size_t fwd_end;        /* end of bytes that may be forwarded */
    int body_mode;         /* enum gw_body */
    int64_t body_left;     /* LENGTH: bytes still to come */
    cr_http_chunked chunk; /* CHUNKED scanner */
    int64_t deadline_ns;   /* connect or response timeout */
    gw_backend *gnext;     /* graveyard link */
};

/* A message from a helper thread to the loop. */
enum gw_msg_kind { GW_MSG_ENDPOINTS = 1, GW_MSG_PROBE, GW_MSG_KEYS };
typedef struct gw_msg {
    int kind;                  /* enum gw_msg_kind */
    char service[GW_NAME_MAX]; /* service name */
    char key[GW_NAME_MAX + 8]; /* PROBE: replica "host:port" */
    bool ok;                   /* PROBE: readiness passed (or scrape answered) */
    bool scraped;              /* PROBE: waiting/kv carry values */
    double waiting;            /* PROBE: vllm:num_requests_waiting */
    double kv_usage;           /* PROBE: vllm:kv_cache_usage_perc */
    bool lora_seen;            /* PROBE: vllm:lora_requests_info was there */
    char lora[1024];           /* PROBE: its running and waiting adapters, comma-separated */
    char ready_path[256];      /* ENDPOINTS: readiness path ("" keeps) */
    gw_endpoint *endpoints;    /* ENDPOINTS: owned */
    size_t endpoint_count;     /* ENDPOINTS: entries */
    bool described;            /* ENDPOINTS: tenant and models carry the service's */
    char tenant[GW_NAME_MAX];  /* ENDPOINTS: owner */
    char **models;             /* ENDPOINTS: model names; owned */
    size_t model_count;        /* ENDPOINTS: entries */
    char **adapters;           /* ENDPOINTS: LoRA adapter names; owned */
    size_t adapter_count;      /* ENDPOINTS: entries */
    double slo_ms[2];          /* ENDPOINTS: the service's TTFT, TPOT targets (0 none) */
    gw_key **keys;             /* KEYS: the whole published list; owned */
    size_t key_count;          /* KEYS: entries */
    struct gw_msg *next;       /* inbox link */
} gw_msg;

/* An API key as the controller publishes it, with this gateway's limits
 * and counters. Keys are never freed while the gateway runs (a revoked one
 * is marked and kept: clients in flight point at it, and its usage is still
 * reported), so the table grows with the keys created, not the requests. */
struct gw_key {
    int64_t id;                 /* the controller's key id */
    uint8_t hash[32];           /* BLAKE2b-256 of the key text */
    char tenant[GW_NAME_MAX];   /* owner */
    char **services;            /* scope: service names (empty: all of its tenant's); owned */
    size_t service_count;       /* entries */
    char **models;              /* scope: model names (empty: all); owned */
    size_t model_count;         /* entries */
    double rps;                 /* requests per second on this gateway; 0 none */
    int32_t concurrency;        /* requests at once on this gateway; 0 none */
    int64_t expires_ms;         /* wall clock, ms; 0 never */
    bool revoked;               /* gone from the published list */
    double bucket;              /* rps: tokens in the bucket (burst: max(1, rps)) */
    int64_t bucket_ns;          /* when the bucket was last filled */
    int32_t active;             /* requests under way */
    uint64_t requests;          /* requests admitted */
    uint64_t limited[4];        /* 429s: [0] requests/s, [1] concurrency, [2] tokens/min,
                                 * [3] token budget spent */
    int64_t tpm;                /* tokens per minute on this gateway; 0 none */
    double tbucket;             /* tpm: tokens left in the minute's bucket (may go below 0) */
    int64_t tbucket_ns;         /* when tbucket was last filled */
    int64_t token_budget;       /* tokens in all, every gateway together; 0 none */
    int64_t used_base;          /* the controller's count of the key's tokens, as published */
    uint64_t used_local;        /* tokens this gateway counted since that publication */
    uint64_t prompt_tokens;     /* usage counted from the responses */
    uint64_t completion_tokens; /* ditto */
    uint64_t sent[3];           /* requests, prompt, completion already reported */
};

/* Usage deltas published by the loop for the controller reporter. */
typedef struct gw_key_usage {
    int64_t id;
    uint64_t requests, prompt_tokens, completion_tokens;
} gw_key_usage;

/* A probe target published by the loop for the prober. */
typedef struct gw_probe_target {
    char service[GW_NAME_MAX];
    char key[GW_NAME_MAX + 8];
    struct sockaddr_storage addr;
    socklen_t addr_len;
    char host[GW_NAME_MAX];
    char ready_path[256];
    bool down;   /* health-check it */
    bool scrape; /* scrape its /metrics */
} gw_probe_target;

/* Per-service stats published by the loop for the controller reporter. */
typedef struct gw_stat {
    char name[GW_NAME_MAX];
    int32_t in_flight;  /* serving plus held: time-averaged over the period, rounded */
    double rps;         /* completed per second over the last period */
    double p95_ms;      /* p95 over the last period; -1 if no requests */
    double ttft_p95_ms; /* p95 time to first token over the period; -1 if none */
    double tpot_p95_ms; /* p95 time per output token; -1 if none */
    bool activation;    /* held requests at zero replicas */
} gw_stat;

struct gw {
    const gw_conf *conf;        /* borrowed, immutable */
    int ep;                     /* epoll fd */
    gw_io listen;               /* listening socket */
    gw_io wake;                 /* eventfd for the inbox */
    gw_io sig;                  /* signalfd: TERM, INT, HUP */
    uint16_t bound_port;        /* the port actually bound */
    cr_rng rng;                 /* peer choice */
    int64_t now_ns;             /* monotonic time, cached per loop turn */
    gw_service **services;      /* owned */
    size_t service_count;       /* entries */
    size_t service_cap;         /* allocated */
    gw_client *clients;         /* all clients (list head) */
    int32_t client_count;       /* clients open */
    int32_t client_cap;         /* admission bound: max_clients and the descriptor limit */
    int spare_fd;               /* held open to accept-and-refuse at EMFILE; -1 if none */
    uint64_t refused;           /* connections refused with 503 at the admission bound */
    uint64_t refused_logged;    /* refused at the last log line */
    int64_t refuse_log_ns;      /* when that line was written (rate limit) */
    gw_client *grave_clients;   /* closed this batch, freed after it (via held_next) */
    gw_backend *grave_backends; /* same for backends */
    bool stopping;              /* leave the loop now */
    bool draining;              /* TERM or INT seen: finish what runs, take nothing new */
    int64_t drain_deadline_ns;  /* give up on in-flight requests after this */
    bool probes_dirty;          /* republish probe targets */
    int64_t next_sweep_ns;      /* next timeout sweep */
    int64_t next_report_ns;     /* next stats snapshot */
    gw_key **keys;              /* API keys (loop thread); owned */
    size_t key_count;           /* entries */
    size_t key_cap;             /* allocated */
    bool keys_loaded;           /* a list came from the controller */
    bool require_keys;          /* clients need a key (conf, resolved) */
    bool models_known;          /* some service declares model names */
    struct ssl_ctx_st *tls_ctx; /* the client-side TLS context (gw_tls.c), or NULL: plain */
    char tls_serial[128];       /* the served certificate's serial, hex */
    int64_t tls_not_after;      /* and its expiry, Unix seconds */
    uint64_t tls_reloads[2];    /* SIGHUP reloads: [0] ok, [1] failed (old one kept) */
    uint64_t tls_errors[2];     /* failed handshakes: [0] TLS errors, [1] plain HTTP */
    /* Shared with helper threads, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cond;      /* wakes helpers on stop, activation or new targets */
    gw_msg *inbox;            /* messages for the loop (LIFO; order per kind kept by version) */
    gw_probe_target *targets; /* probe targets; owned */
    size_t target_count;      /* entries */
    gw_stat *stats;           /* per-service stats; owned */
    size_t stat_count;        /* entries */
    gw_key_usage *usage;      /* key usage deltas not yet reported; owned */
    size_t usage_count;       /* entries */
    char **watch;             /* service names the controller client watches */
    size_t watch_count;       /* entries */
    bool stop;                /* helpers: exit */
    pthread_t prober;         /* prober thread */
    bool prober_started;      /* joined at shutdown */
    void *ctl;                /* controller client state (gw_ctl.c) */
};

/* gw_conf.c */
int gw_conf_parse_args(int argc, char **argv, gw_conf *conf);
/* The gateway's table of options (cr_opt.h): flags, config members, --help. */
struct cr_opt;
const struct cr_opt *gw_conf_opts(size_t *n);
int gw_conf_load_file(const char *path, gw_conf *conf);
/* The same from memory (name: for messages); for tests and fuzzing. */
int gw_conf_load_text(const char *text, size_t len, const char *name, gw_conf *conf);
void gw_conf_fini(gw_conf *conf);
void gw_service_conf_fini(gw_service_conf *s);
int gw_endpoint_parse(const char *s, gw_endpoint *ep);
int gw_resolve(const char *host, uint16_t port, struct sockaddr_storage *addr, socklen_t *len);

/* gw_service.c */
gw_service *gw_service_find(gw *g, const char *name, size_t len);
gw_service *gw_service_add(gw *g, const char *name);
void gw_service_set_endpoints(gw *g, gw_service *s, const gw_endpoint *eps, size_t n);
void gw_replica_release(gw *g, gw_replica *r);
void gw_replica_mark_down(gw *g, gw_replica *r, const char *why);
void gw_service_kick(gw *g, gw_service *s);
gw_replica *gw_peer_p2c(gw *g, gw_service *s, const gw_replica *exclude, int *why);
/* Prefix affinity with bounded load: the replica the prefix hashes to
 * (rendezvous) unless its load is over the bound, then the next. */
gw_replica *gw_peer_prefix(gw *g, gw_service *s, const gw_replica *exclude, uint64_t prefix,
                           int *why);
void gw_apply_msg(gw *g, gw_msg *m);
void gw_publish_targets(gw *g);
void gw_record(gw_service *s, int status, int64_t latency_ns);
/* in_flight += delta at now_ns, keeping its time integral for the reports. */
void gw_inflight_add(gw_service *s, int64_t now_ns, int delta);
void gw_metrics_render(gw *g, cr_buf *out);
void gw_publish_stats(gw *g);
void gw_note_activation(gw *g, gw_service *s);
void gw_services_free(gw *g);

/* gw_loop.c */
int gw_run(gw *g);
/* Set g->client_cap from conf->max_clients and RLIMIT_NOFILE, and open the
 * spare descriptor. */
void gw_admission_init(gw *g);

/* gw_proxy.c */
gw_client *gw_client_new(gw *g, int fd, const struct sockaddr_storage *sa);
void gw_client_run(gw_client *c);
void gw_client_close(gw_client *c);
void gw_client_free(gw_client *c);
void gw_held_remove(gw_service *s, gw_client *c);
gw_backend *gw_detach(gw_client *c);
void gw_backend_failed(gw_client *c, bool connect_failure, const char *why);
void gw_local_error(gw_client *c, int status, int err, const char *code, const char *msg);
void gw_idle_event(gw *g, gw_backend *b);
void gw_client_dispatch(gw_client *c, const gw_replica *exclude);
void gw_client_local(gw_client *c, int status, const char *extra_headers, const char *body);
/* Close b and queue it for freeing; the caller then calls
 * gw_replica_release on the replica it served, once done with it. */
void gw_backend_close(gw *g, gw_backend *b);
void gw_free_graveyard(gw *g);

/* gw_probe.c */
int gw_prober_start(gw *g);
void gw_post(gw *g, gw_msg *m);

/* gw_keys.c: API keys, OpenAI routes and errors, token usage. */
/* Verify the request's key (require_keys): true with c->key set, or false
 * with the answer (401/429/503) under way. */
bool gw_key_admit(gw_client *c, const cr_http_msg *m);
/* Whether c->key (if any) may use service s, and model (NULL: any of s). */
bool gw_key_may(const gw_client *c, const gw_service *s, const char *model);
void gw_key_release(gw_client *c);
/* The OpenAI-shaped error answer. */
void gw_openai_error(gw_client *c, int status, int err, const char *type, const char *code,
                     const char *msg);
/* Set s's owner and model names (copied). */
void gw_service_set_models(gw *g, gw_service *s, const char *tenant, char *const *models, size_t n);
/* The service serving a model or LoRA adapter, or NULL; *adapter: the
 * adapter's index in it, or -1 for a model name. */
gw_service *gw_model_service(gw *g, const char *model, int *adapter);
/* Set s's LoRA adapters (copied; at most GW_ADAPTER_MAX). */
void gw_service_set_adapters(gw *g, gw_service *s, char *const *adapters, size_t n);
/* Whether a ready replica of s holds adapter a; with *any_ready whether
 * any replica is ready at all. */
bool gw_adapter_available(const gw_service *s, int a, bool *any_ready);
/* "model" of a JSON request body: 1 and out, 0 none (or not a string),
 * -1 not a JSON object; *prefix: the hash of the prompt's first
 * GW_PREFIX_BYTES (0 none or too short), for prefix affinity. */
int gw_body_model(const char *body, size_t len, char *out, size_t outlen, uint64_t *prefix);
/* The same, and *stream: the body asks "stream": true. */
int gw_body_model_stream(const char *body, size_t len, char *out, size_t outlen, uint64_t *prefix,
                         bool *stream);
void gw_models_answer(gw_client *c);
void gw_usage_feed(gw_client *c, const char *data, size_t len);
void gw_usage_end(gw_client *c);
/* The usage object in a response tail: 0 with the counts, or -1. */
int gw_usage_parse(const char *win, size_t len, uint64_t *prompt, uint64_t *completion);
void gw_keys_apply(gw *g, gw_msg *m);
void gw_keys_publish_usage(gw *g);
void gw_keys_metrics(gw *g, cr_buf *o);
void gw_keys_free(gw *g);
void gw_key_free(gw_key *k);
void gw_strv_free(char **v, size_t n);
/* The controller's published key list: 0 with *version and a new KEYS
 * message (free with gw_msg_free), or CR_EPARSE. */
int gw_ctl_parse_keys(const char *text, int64_t *version, gw_msg **out);
void gw_msg_free(gw_msg *m);

/* gw_ssl_load.c: libssl loaded with dlopen: true, or false with *why. */
bool gw_ssl_load(const char **why);

/* gw_tls.c: TLS on the client side (OpenSSL). */
/* The context from --tls-cert/--tls-key (none without): 0 or CR_EINVAL,
 * the reason on stderr. */
int gw_tls_init(gw *g);
/* SIGHUP: the same files again; the old context stays on any error. */
void gw_tls_reload(gw *g);
void gw_tls_fini(gw *g);
/* A new client's TLS session on a TLS listener: 0 or CR_ENOMEM. */
int gw_tls_accept(gw_client *c);
/* read(2) and writev(2) on the client's socket, through TLS where on;
 * -1 with EAGAIN when it would block. */
ssize_t gw_client_read(gw_client *c, void *buf, size_t len);
ssize_t gw_client_writev(gw_client *c, const struct iovec *iov, int cnt);
/* Before the socket closes: close_notify where due, the session freed. */
void gw_tls_close(gw_client *c);
void gw_tls_metrics(gw *g, cr_buf *o);

/* gw_slo.c: TTFT, TPOT and tokens/s of streamed completions. */
extern const double gw_ttft_le[GW_HIST_BUCKETS - 1];
extern const double gw_tpot_le[GW_HIST_BUCKETS - 1];
extern const double gw_tps_le[GW_HIST_BUCKETS - 1];
void gw_hist_add(gw_hist *h, const double *le, double v);
/* p95 of a non-cumulative histogram (delta) in the bounds' unit x scale;
 * -1 when empty. */
double gw_hist_p95(const uint64_t *delta, const double *le, double scale);
/* The p95 in ms since the last call (-1: none), and the mark moved. */
double gw_hist_report(gw_hist *h, const double *le);
/* A model-routed request begins (stream: its body asks for a stream). */
void gw_slo_begin(gw_client *c, bool stream);
/* Response body bytes as forwarded. */
void gw_slo_feed(gw_client *c, const char *p, size_t len);
/* The response ended whole: record its TTFT, TPOT, tokens/s. */
void gw_slo_end(gw_client *c);
void gw_slo_metrics(gw *g, cr_buf *o);
/* Set s's serving SLO targets (ms; 0: none). */
void gw_slo_set_targets(gw_service *s, double ttft_ms, double tpot_ms);

/* gw_ctl.c */
/* The controller's endpoints document: returns 0 with *version and a new
 * ENDPOINTS message (free m->endpoints and m with free()), or CR_EPARSE. */
int gw_ctl_parse_endpoints(const char *name, const char *text, int64_t *version, gw_msg **out);
int gw_ctl_start(gw *g);
void gw_ctl_stop(gw *g);

#endif
