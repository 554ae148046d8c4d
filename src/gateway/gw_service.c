/*
 * gw_service.c - services and their replicas on the loop thread: endpoint
 * updates (with draining), the peer choice, messages from the helper
 * threads, and the metrics.
 */
#include "gw_int.h"

#include "cr_alloc.h"
#include "cr_log.h"
#include "cr_time.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Upper bounds of the latency histogram, seconds; the last is +Inf. */
static const double bucket_le[GW_HIST_BUCKETS - 1] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
};

static const char *err_name[GW_ERR_COUNT] = {
    "bad_request", "no_service", "no_replica", "saturated", "connect",
    "upstream",    "timeout",    "auth",       "limited",
};

gw_service *gw_service_find(gw *g, const char *name, size_t len)
{
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        if (s->name_len == len && memcmp(s->name, name, len) == 0) {
            return s;
        }
    }
    return NULL;
}

gw_service *gw_service_add(gw *g, const char *name)
{
    gw_service *s = cr_calloc(1, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->name_len = strlen(s->name);
    snprintf(s->ready_path, sizeof s->ready_path, "/health");
    s->max_inflight = g->conf->max_inflight;
    s->peer_get = gw_peer_p2c;
    s->want_adapter = -1;
    s->report_ns = g->now_ns;
    s->inflight_mark_ns = g->now_ns;
    CR_GROW(g->services, g->service_count, g->service_cap);
    g->services[g->service_count++] = s;
    return s;
}

/* Whether r holds its service's adapter a (a replica whose endpoint names
 * no adapters holds all that its service declares). */
static bool holds(const gw_replica *r, int a)
{
    return a < 0 || !r->ep.adapters_set || (r->ep.adapters >> a & 1);
}

/* Ready for a request; for one asking a LoRA adapter (the service's
 * want_adapter, set around the choice), only where the adapter is. */
static bool eligible(const gw_replica *r)
{
    const gw_service *s = r->svc;
    if (s && s->want_active && s->want_adapter >= 0 &&
        !(r->lora_known && (r->lora_active >> s->want_adapter & 1))) {
        return false;
    }
    return !r->removed && !r->down && r->ep.ready && holds(r, s ? s->want_adapter : -1);
}

bool gw_adapter_available(const gw_service *s, int a, bool *any_ready)
{
    bool any = false, found = false;
    for (size_t i = 0; i < s->replica_count; i++) {
        const gw_replica *r = s->replicas[i];
        if (r->removed || r->down || !r->ep.ready) {
            continue;
        }
        any = true;
        found |= holds(r, a);
    }
    *any_ready = any;
    return found;
}

/* Edge sites (--site): when a replica of the gateway's own site can take
 * the request (eligible, under its in-flight limit), only those of its
 * site are candidates; else every replica is (a site's overflow, or one
 * with none of its own, goes elsewhere). */
/* A replica's in-flight limit for the request being placed: a batch one
 * (want_batch) only up to batch_share of it, at least 1, so interactive
 * requests keep the rest (criticality, as the Gateway API Inference
 * Extension's sheddable requests). */
static int32_t limit_of(const gw *g, const gw_service *s)
{
    if (!s->want_batch) {
        return s->max_inflight;
    }
    int32_t l = (int32_t)((double)s->max_inflight * g->conf->batch_share);
    return l < 1 ? 1 : l;
}

static bool site_local(const gw *g, const gw_service *s, const gw_replica *exclude)
{
    const char *site = g->conf->site;
    if (!site || !*site) {
        return false;
    }
    for (size_t i = 0; i < s->replica_count; i++) {
        const gw_replica *r = s->replicas[i];
        if (eligible(r) && r != exclude && r->outstanding < limit_of(g, s) &&
            strcmp(r->ep.site, site) == 0) {
            return true;
        }
    }
    return false;
}

static bool candidate(const gw *g, const gw_service *s, const gw_replica *r,
                      const gw_replica *exclude, bool local)
{
    return eligible(r) && r != exclude && r->outstanding < limit_of(g, s) &&
           (!local || strcmp(r->ep.site, g->conf->site) == 0);
}

/* The load a replica reports or we see: our requests on it, plus the queue
 * it says it has (vLLM's num_requests_waiting counts requests of other
 * gateways too). */
static double load_of(const gw_replica *r)
{
    return (double)r->outstanding + r->waiting;
}

/*
 * Power of two choices: two distinct replicas at random among those ready
 * and under their in-flight limit, and the less loaded of the two (ties:
 * the lower KV-cache usage). Almost as good as scanning for the least
 * loaded, without herding every gateway onto the same replica.
 */
gw_replica *gw_peer_p2c(gw *g, gw_service *s, const gw_replica *exclude, int *why)
{
    size_t ready = 0, avail = 0;
    bool local = site_local(g, s, exclude);
    for (size_t i = 0; i < s->replica_count; i++) {
        gw_replica *r = s->replicas[i];
        if (!eligible(r) || r == exclude) {
            continue;
        }
        ready++;
        avail += candidate(g, s, r, exclude, local);
    }
    if (avail == 0) {
        *why = ready ? GW_ERR_SATURATED : GW_ERR_NO_REPLICA;
        return NULL;
    }
    size_t a = (size_t)cr_rng_below(&g->rng, avail);
    size_t b = a;
    if (avail > 1) {
        b = (size_t)cr_rng_below(&g->rng, avail - 1);
        if (b >= a) {
            b++;
        }
    }
    gw_replica *ra = NULL, *rb = NULL;
    size_t k = 0;
    for (size_t i = 0; i < s->replica_count && (!ra || !rb); i++) {
        gw_replica *r = s->replicas[i];
        if (!candidate(g, s, r, exclude, local)) {
            continue;
        }
        if (k == a) {
            ra = r;
        }
        if (k == b) {
            rb = r;
        }
        k++;
    }
    double la = load_of(ra), lb = load_of(rb);
    if (lb < la || (lb == la && rb->kv_usage < ra->kv_usage)) {
        return rb;
    }
    return ra;
}

/* Whether r was sent this prefix lately (slot index, or -1). */
static int prefix_slot(const gw_replica *r, uint64_t prefix)
{
    for (int i = 0; i < GW_PREFIX_SLOTS; i++) {
        if (r->pfx[i] == prefix) {
            return i;
        }
    }
    return -1;
}

/*
 * Prefix affinity (the prefix-cache scorer of llm-d, in a simple form):
 * requests whose prompts share their first GW_PREFIX_BYTES go where that
 * prefix went lately, since that replica likely still holds it in its KV
 * cache and skips most of the prefill. Each replica remembers the last
 * GW_PREFIX_SLOTS prefixes sent to it (LRU). Among the eligible replicas
 * under the load bound that were sent the prefix, the least loaded wins;
 * when none was (a new prefix, or its replicas are over the bound), the
 * least loaded replica overall takes it and remembers it, so new prefixes
 * spread by load rather than by a hash's luck, and a hot prefix that
 * overloads its replica spreads onto others, which then hold it too.
 * Bounded load (as consistent hashing with bounded loads, Mirrokni et al.
 * 2018): a replica whose load is at ceil(1.5 x the mean, this request
 * counted) takes no more of its prefixes until the others catch up.
 */
gw_replica *gw_peer_prefix(gw *g, gw_service *s, const gw_replica *exclude, uint64_t prefix,
                           int *why)
{
    size_t ready = 0, avail = 0;
    double total = 1;
    bool local = site_local(g, s, exclude);
    for (size_t i = 0; i < s->replica_count; i++) {
        gw_replica *r = s->replicas[i];
        if (!eligible(r) || r == exclude) {
            continue;
        }
        ready++;
        if (candidate(g, s, r, exclude, local)) {
            avail++;
            total += load_of(r);
        }
    }
    if (avail == 0) {
        *why = ready ? GW_ERR_SATURATED : GW_ERR_NO_REPLICA;
        return NULL;
    }
    double cap = ceil(total * 1.5 / (double)avail);
    gw_replica *hit = NULL, *least = NULL;
    uint64_t hit_used = 0;
    size_t ties = 0;
    for (size_t i = 0; i < s->replica_count; i++) {
        gw_replica *r = s->replicas[i];
        if (!candidate(g, s, r, exclude, local)) {
            continue;
        }
        double l = load_of(r);
        int ps = l < cap ? prefix_slot(r, prefix) : -1;
        if (ps >= 0 && (!hit || r->pfx_used[ps] > hit_used)) {
            hit = r; /* the one sent it last: the likeliest to hold it still */
            hit_used = r->pfx_used[ps];
        }
        /* the least loaded, ties broken at random (reservoir sampling) */
        if (!least || l < load_of(least)) {
            least = r;
            ties = 1;
        } else if (l == load_of(least) && cr_rng_below(&g->rng, ++ties) == 0) {
            least = r;
        }
    }
    gw_replica *r = hit ? hit : least;
    s->affinity[hit ? 0 : 1]++;
    int slot = prefix_slot(r, prefix);
    if (slot < 0) {
        slot = 0;
        for (int i = 1; i < GW_PREFIX_SLOTS; i++) {
            if (r->pfx_used[i] < r->pfx_used[slot]) {
                slot = i;
            }
        }
        r->pfx[slot] = prefix;
    }
    r->pfx_used[slot] = ++s->pfx_clock;
    return r;
}

static void close_idle(gw *g, gw_replica *r)
{
    gw_backend *b;
    while ((b = r->idle) != NULL) {
        r->idle = b->pool_next;
        r->idle_count--;
        b->pool_next = NULL;
        gw_backend_close(g, b);
    }
}

/* Free a drained replica once nothing refers to it. */
void gw_replica_release(gw *g, gw_replica *r)
{
    if (!r->removed || r->outstanding > 0 || r->conns > 0) {
        return;
    }
    gw_service *s = r->svc;
    for (size_t i = 0; i < s->replica_count; i++) {
        if (s->replicas[i] == r) {
            memmove(&s->replicas[i], &s->replicas[i + 1],
                    (s->replica_count - i - 1) * sizeof *s->replicas);
            s->replica_count--;
            break;
        }
    }
    cr_info("gateway: replica drained service=%s replica=%s", s->name, r->key);
    free(r);
    g->probes_dirty = true;
}

void gw_replica_mark_down(gw *g, gw_replica *r, const char *why)
{
    if (r->down) {
        return;
    }
    r->down = true;
    cr_warn("gateway: replica down service=%s replica=%s reason=\"%s\"", r->svc->name, r->key, why);
    close_idle(g, r);
    g->probes_dirty = true;
}

void gw_service_set_endpoints(gw *g, gw_service *s, const gw_endpoint *eps, size_t n)
{
    bool *seen = cr_calloc(s->replica_count + 1, sizeof *seen);
    size_t old_count = s->replica_count;
    for (size_t e = 0; e < n; e++) {
        char key[sizeof s->replicas[0]->key];
        snprintf(key, sizeof key, "%s:%u", eps[e].host, (unsigned)eps[e].port);
        gw_replica *found = NULL;
        for (size_t i = 0; i < s->replica_count; i++) {
            if (strcmp(s->replicas[i]->key, key) == 0) {
                found = s->replicas[i]; /* also a duplicate within eps */
                if (i < old_count) {
                    seen[i] = true;
                }
                break;
            }
        }
        if (found) {
            if (found->removed) {
                cr_info("gateway: replica back service=%s replica=%s", s->name, key);
            }
            found->removed = false;
            found->ep.ready = eps[e].ready;
            found->ep.adapters_set = eps[e].adapters_set;
            found->ep.adapters = eps[e].adapters;
            continue;
        }
        gw_replica *r = cr_calloc(1, sizeof *r);
        r->svc = s;
        r->ep = eps[e];
        snprintf(r->key, sizeof r->key, "%s", key);
        if (gw_resolve(r->ep.host, r->ep.port, &r->addr, &r->addr_len) != 0) {
            cr_warn("gateway: cannot resolve replica service=%s replica=%s", s->name, key);
            free(r);
            continue;
        }
        CR_GROW(s->replicas, s->replica_count, s->replica_cap);
        s->replicas[s->replica_count++] = r;
        cr_info("gateway: replica added service=%s replica=%s ready=%d", s->name, key,
                (int)r->ep.ready);
    }
    /* Drain the ones no longer listed: no new requests, free when idle. */
    gw_replica **drain = cr_calloc(old_count + 1, sizeof *drain);
    size_t nd = 0;
    for (size_t i = 0; i < old_count; i++) {
        gw_replica *r = s->replicas[i];
        if (!seen[i] && !r->removed) {
            r->removed = true;
            cr_info("gateway: replica draining service=%s replica=%s in_flight=%d", s->name, r->key,
                    (int)r->outstanding);
            close_idle(g, r);
            drain[nd++] = r;
        }
    }
    for (size_t i = 0; i < nd; i++) {
        gw_replica_release(g, drain[i]);
    }
    free(drain);
    free(seen);
    g->probes_dirty = true;
    gw_service_kick(g, s);
}

void gw_apply_msg(gw *g, gw_msg *m)
{
    if (m->kind == GW_MSG_KEYS) {
        gw_keys_apply(g, m);
        return;
    }
    gw_service *s = gw_service_find(g, m->service, strlen(m->service));
    if (m->kind == GW_MSG_ENDPOINTS) {
        if (!s) {
            s = gw_service_add(g, m->service);
        }
        if (m->described) {
            gw_service_set_models(g, s, m->tenant, m->models, m->model_count);
            gw_service_set_adapters(g, s, m->adapters, m->adapter_count);
            gw_slo_set_targets(s, m->slo_ms[0], m->slo_ms[1]);
        }
        if (m->ready_path[0]) {
            snprintf(s->ready_path, sizeof s->ready_path, "%s", m->ready_path);
        }
        gw_service_set_endpoints(g, s, m->endpoints, m->endpoint_count);
        return;
    }
    if (!s) {
        return;
    }
    for (size_t i = 0; i < s->replica_count; i++) {
        gw_replica *r = s->replicas[i];
        if (strcmp(r->key, m->key) != 0 || r->removed) {
            continue;
        }
        if (m->scraped) {
            r->waiting = m->waiting;
            r->kv_usage = m->kv_usage;
            r->lora_known = m->lora_seen;
            r->lora_active = 0;
            for (size_t a = 0; m->lora_seen && a < s->adapter_count; a++) {
                size_t al = strlen(s->adapters[a]);
                for (const char *q = m->lora; *q;) {
                    size_t ql = strcspn(q, ",");
                    if (ql == al && memcmp(q, s->adapters[a], al) == 0) {
                        r->lora_active |= (uint64_t)1 << a;
                    }
                    q += ql + (q[ql] == ',');
                }
            }
        }
        if (m->ok && r->down) {
            r->down = false;
            cr_info("gateway: replica up service=%s replica=%s", s->name, r->key);
            g->probes_dirty = true;
            gw_service_kick(g, s);
        }
        return;
    }
}

void gw_publish_targets(gw *g)
{
    size_t n = 0;
    for (size_t i = 0; i < g->service_count; i++) {
        n += g->services[i]->replica_count;
    }
    gw_probe_target *t = cr_calloc(n + 1, sizeof *t);
    size_t k = 0;
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        for (size_t j = 0; j < s->replica_count; j++) {
            gw_replica *r = s->replicas[j];
            if (r->removed || !(r->down || s->scrape)) {
                continue;
            }
            gw_probe_target *p = &t[k++];
            snprintf(p->service, sizeof p->service, "%s", s->name);
            snprintf(p->key, sizeof p->key, "%s", r->key);
            snprintf(p->host, sizeof p->host, "%s", r->ep.host);
            snprintf(p->ready_path, sizeof p->ready_path, "%s", s->ready_path);
            p->addr = r->addr;
            p->addr_len = r->addr_len;
            p->down = r->down;
            p->scrape = s->scrape && !r->down;
        }
    }
    pthread_mutex_lock(&g->mu);
    free(g->targets);
    g->targets = t;
    g->target_count = k;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->mu);
    g->probes_dirty = false;
}

/* Concurrency for the autoscaler is the time average over the report period
 * (as Knative's queue-proxy measures it), not a sample of the gauge. */
void gw_inflight_add(gw_service *s, int64_t now_ns, int delta)
{
    if (now_ns > s->inflight_mark_ns) {
        s->inflight_area += (double)s->in_flight * (double)(now_ns - s->inflight_mark_ns);
        s->inflight_mark_ns = now_ns;
    }
    s->in_flight += delta;
}

void gw_record(gw_service *s, int status, int64_t latency_ns)
{
    if (status >= 100 && status < 600) {
        s->codes[status]++;
    }
    double sec = (double)latency_ns / 1e9;
    size_t b = 0;
    while (b < GW_HIST_BUCKETS - 1 && sec > bucket_le[b]) {
        b++;
    }
    s->hist[b]++;
    s->latency_sum_s += sec;
    s->latency_count++;
}

/* p95 in ms of a non-cumulative histogram delta; -1 when empty. */
static double p95_ms(const uint64_t *delta)
{
    return gw_hist_p95(delta, bucket_le, 1000.0);
}

void gw_publish_stats(gw *g)
{
    gw_stat *st = cr_calloc(g->service_count + 1, sizeof *st);
    bool wake = false;
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        uint64_t delta[GW_HIST_BUCKETS];
        for (size_t b = 0; b < GW_HIST_BUCKETS; b++) {
            delta[b] = s->hist[b] - s->report_hist[b];
            s->report_hist[b] = s->hist[b];
        }
        double dt = (double)(g->now_ns - s->report_ns) / 1e9;
        snprintf(st[i].name, sizeof st[i].name, "%s", s->name);
        gw_inflight_add(s, g->now_ns, 0);
        double avg = dt > 0 ? s->inflight_area / (dt * 1e9) : (double)s->in_flight;
        s->inflight_area = 0;
        st[i].in_flight = (int32_t)lround(avg);
        if (s->held > 0 && st[i].in_flight < s->in_flight) {
            st[i].in_flight = s->in_flight; /* activation: report what waits now */
        }
        st[i].rps = dt > 0 ? (double)(s->latency_count - s->report_count) / dt : 0;
        st[i].p95_ms = p95_ms(delta);
        st[i].ttft_p95_ms = gw_hist_report(&s->ttft, gw_ttft_le);
        st[i].tpot_p95_ms = gw_hist_report(&s->tpot, gw_tpot_le);
        st[i].activation = s->activation || s->held > 0;
        wake |= st[i].activation;
        s->activation = false;
        s->report_count = s->latency_count;
        s->report_ns = g->now_ns;
    }
    gw_keys_publish_usage(g);
    pthread_mutex_lock(&g->mu);
    free(g->stats);
    g->stats = st;
    g->stat_count = g->service_count;
    if (wake) {
        pthread_cond_broadcast(&g->cond);
    }
    pthread_mutex_unlock(&g->mu);
}

/* Label values here are service names and host:port keys, which the config
 * check limits to [A-Za-z0-9._:-], so they need no escaping. */
void gw_metrics_render(gw *g, cr_buf *o)
{
    cr_buf_puts(o, "# HELP corral_gateway_requests_total Responses sent, by service and status "
                   "code.\n# TYPE corral_gateway_requests_total counter\n");
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        for (int c = 100; c < 600; c++) {
            if (s->codes[c]) {
                cr_buf_printf(o, "corral_gateway_requests_total{service=\"%s\",code=\"%d\"} %llu\n",
                              s->name, c, (unsigned long long)s->codes[c]);
            }
        }
    }
    cr_buf_puts(o, "# HELP corral_gateway_errors_total Errors answered by the gateway itself, by "
                   "reason.\n# TYPE corral_gateway_errors_total counter\n");
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        for (int e = 0; e < GW_ERR_COUNT; e++) {
            cr_buf_printf(o, "corral_gateway_errors_total{service=\"%s\",reason=\"%s\"} %llu\n",
                          s->name, err_name[e], (unsigned long long)s->errors[e]);
        }
    }
    cr_buf_puts(o, "# HELP corral_gateway_request_duration_seconds Time from the request head to "
                   "the end of the response.\n"
                   "# TYPE corral_gateway_request_duration_seconds histogram\n");
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        uint64_t cum = 0;
        for (size_t b = 0; b < GW_HIST_BUCKETS; b++) {
            cum += s->hist[b];
            if (b < GW_HIST_BUCKETS - 1) {
                cr_buf_printf(o,
                              "corral_gateway_request_duration_seconds_bucket{service=\"%s\","
                              "le=\"%g\"} %llu\n",
                              s->name, bucket_le[b], (unsigned long long)cum);
            } else {
                cr_buf_printf(o,
                              "corral_gateway_request_duration_seconds_bucket{service=\"%s\","
                              "le=\"+Inf\"} %llu\n",
                              s->name, (unsigned long long)cum);
            }
        }
        cr_buf_printf(o, "corral_gateway_request_duration_seconds_sum{service=\"%s\"} %.6f\n",
                      s->name, s->latency_sum_s);
        cr_buf_printf(o, "corral_gateway_request_duration_seconds_count{service=\"%s\"} %llu\n",
                      s->name, (unsigned long long)s->latency_count);
    }
    cr_buf_puts(o, "# HELP corral_gateway_in_flight Requests being served or held, by service.\n"
                   "# TYPE corral_gateway_in_flight gauge\n");
    for (size_t i = 0; i < g->service_count; i++) {
        cr_buf_printf(o, "corral_gateway_in_flight{service=\"%s\"} %d\n", g->services[i]->name,
                      (int)g->services[i]->in_flight);
    }
    cr_buf_puts(o, "# HELP corral_gateway_held Requests held while no replica is ready.\n"
                   "# TYPE corral_gateway_held gauge\n");
    for (size_t i = 0; i < g->service_count; i++) {
        cr_buf_printf(o, "corral_gateway_held{service=\"%s\"} %d\n", g->services[i]->name,
                      (int)g->services[i]->held);
    }
    cr_buf_puts(o, "# HELP corral_gateway_retries_total Requests retried on another replica after "
                   "a connection failure.\n# TYPE corral_gateway_retries_total counter\n");
    for (size_t i = 0; i < g->service_count; i++) {
        cr_buf_printf(o, "corral_gateway_retries_total{service=\"%s\"} %llu\n",
                      g->services[i]->name, (unsigned long long)g->services[i]->retries);
    }
    cr_buf_puts(o, "# HELP corral_gateway_affinity_total Prefix-affinity choices: a replica sent "
                   "the prefix lately (cached), or the least loaded one (new).\n"
                   "# TYPE corral_gateway_affinity_total counter\n");
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        cr_buf_printf(o,
                      "corral_gateway_affinity_total{service=\"%s\",choice=\"cached\"} %llu\n"
                      "corral_gateway_affinity_total{service=\"%s\",choice=\"new\"} %llu\n",
                      s->name, (unsigned long long)s->affinity[0], s->name,
                      (unsigned long long)s->affinity[1]);
    }
    cr_buf_puts(o, "# HELP corral_gateway_adapter_requests_total Requests routed for a LoRA "
                   "adapter (to replicas holding it).\n"
                   "# TYPE corral_gateway_adapter_requests_total counter\n");
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        for (size_t j = 0; j < s->adapter_count; j++) {
            cr_buf_printf(
                o, "corral_gateway_adapter_requests_total{service=\"%s\",adapter=\"%s\"} %llu\n",
                s->name, s->adapters[j], (unsigned long long)s->adapter_requests[j]);
        }
    }
    cr_buf_puts(o, "# HELP corral_gateway_replica_adapter_active A LoRA adapter running or "
                   "waiting on a replica, as its vllm:lora_requests_info says.\n"
                   "# TYPE corral_gateway_replica_adapter_active gauge\n");
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        for (size_t j = 0; j < s->replica_count; j++) {
            const gw_replica *r = s->replicas[j];
            for (size_t a = 0; r->lora_known && a < s->adapter_count; a++) {
                cr_buf_printf(o,
                              "corral_gateway_replica_adapter_active{service=\"%s\",replica=\"%s\","
                              "adapter=\"%s\"} %d\n",
                              s->name, r->key, s->adapters[a], (int)(r->lora_active >> a & 1));
            }
        }
    }
    cr_buf_puts(o, "# HELP corral_gateway_replica_up Whether a replica takes new requests (ready, "
                   "not down, not draining).\n# TYPE corral_gateway_replica_up gauge\n");
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        for (size_t j = 0; j < s->replica_count; j++) {
            cr_buf_printf(o, "corral_gateway_replica_up{service=\"%s\",replica=\"%s\"} %d\n",
                          s->name, s->replicas[j]->key, eligible(s->replicas[j]) ? 1 : 0);
        }
    }
    cr_buf_puts(o, "# HELP corral_gateway_replica_in_flight Requests on a replica now.\n"
                   "# TYPE corral_gateway_replica_in_flight gauge\n");
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        for (size_t j = 0; j < s->replica_count; j++) {
            cr_buf_printf(o, "corral_gateway_replica_in_flight{service=\"%s\",replica=\"%s\"} %d\n",
                          s->name, s->replicas[j]->key, (int)s->replicas[j]->outstanding);
        }
    }
    cr_buf_puts(o, "# HELP corral_gateway_replica_requests_total Requests sent to a replica.\n"
                   "# TYPE corral_gateway_replica_requests_total counter\n");
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        for (size_t j = 0; j < s->replica_count; j++) {
            cr_buf_printf(o,
                          "corral_gateway_replica_requests_total{service=\"%s\",replica=\"%s\"} "
                          "%llu\n",
                          s->name, s->replicas[j]->key,
                          (unsigned long long)s->replicas[j]->requests);
        }
    }
    cr_buf_puts(o, "# HELP corral_gateway_replica_waiting The replica's own queue "
                   "(vllm:num_requests_waiting), when scraped.\n"
                   "# TYPE corral_gateway_replica_waiting gauge\n");
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        for (size_t j = 0; j < s->replica_count; j++) {
            cr_buf_printf(o, "corral_gateway_replica_waiting{service=\"%s\",replica=\"%s\"} %g\n",
                          s->name, s->replicas[j]->key, s->replicas[j]->waiting);
        }
    }
    cr_buf_puts(o, "# HELP corral_gateway_clients Client connections open.\n"
                   "# TYPE corral_gateway_clients gauge\n");
    cr_buf_printf(o, "corral_gateway_clients %d\n", (int)g->client_count);
    cr_buf_puts(o, "# HELP corral_gateway_connections_refused_total Connections answered 503 "
                   "and closed at the admission bound (descriptor limit or --max-clients).\n"
                   "# TYPE corral_gateway_connections_refused_total counter\n");
    cr_buf_printf(o, "corral_gateway_connections_refused_total %llu\n",
                  (unsigned long long)g->refused);
    gw_slo_metrics(g, o);
    gw_keys_metrics(g, o);
    gw_tls_metrics(g, o);
}

/* A request was held at zero replicas: tell the reporter now, not at the
 * next snapshot, so the controller can start a replica at once. */
void gw_note_activation(gw *g, gw_service *s)
{
    pthread_mutex_lock(&g->mu);
    for (size_t i = 0; i < g->stat_count; i++) {
        if (strcmp(g->stats[i].name, s->name) == 0) {
            g->stats[i].activation = true;
            g->stats[i].in_flight = s->in_flight;
        }
    }
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->mu);
}

void gw_services_free(gw *g)
{
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        for (size_t j = 0; j < s->replica_count; j++) {
            gw_replica *r = s->replicas[j];
            close_idle(g, r);
        }
    }
    gw_free_graveyard(g);
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        for (size_t j = 0; j < s->replica_count; j++) {
            free(s->replicas[j]);
        }
        free(s->replicas);
        gw_strv_free(s->models, s->model_count);
        gw_strv_free(s->adapters, s->adapter_count);
        free(s);
    }
    CR_FREE(g->services);
    g->service_count = 0;
}
