/*
 * gw_slo.c - serving SLO signals of model-routed streamed requests: time to
 * first token (TTFT), time per output token (TPOT) and output tokens per
 * second, as histograms in /metrics and as p95s in the load reports the
 * controller's autoscaler follows (target {"ttft_ms", "tpot_ms"}).
 *
 * What is measured, at the gateway (so queueing in the gateway and the
 * replica counts, as the user sees it):
 *   - TTFT: the request head parsed -> the first server-sent event
 *     ("data:" at a line start) of a 200 response to a request with
 *     "stream": true. A non-streamed answer has no first token to see, so
 *     it is not counted (its whole latency is in request_duration).
 *   - output tokens: the usage object's completion_tokens when the stream
 *     carries one (stream_options.include_usage), else the events less the
 *     final "[DONE]" (one token per event, as vLLM and SGLang stream).
 *   - TPOT: (end of the response - first event) / (tokens - 1), for two
 *     tokens or more.
 *   - tokens/s: tokens / (end of the response - request head).
 * The event scanner keeps one small state across reads, so an event split
 * between two reads is counted once.
 */
#include "gw_int.h"

#include "cr_buf.h"

#include <stddef.h>
#include <string.h>

const double gw_ttft_le[GW_HIST_BUCKETS - 1] = {
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2.5, 5, 10, 30,
};
const double gw_tpot_le[GW_HIST_BUCKETS - 1] = {
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03,
    0.04,  0.05,   0.075, 0.1,    0.15, 0.2,   0.5,  1,
};
const double gw_tps_le[GW_HIST_BUCKETS - 1] = {
    1, 2, 5, 10, 20, 30, 50, 75, 100, 150, 200, 300, 500, 1000, 2000, 5000,
};

void gw_hist_add(gw_hist *h, const double *le, double v)
{
    size_t b = 0;
    while (b < GW_HIST_BUCKETS - 1 && v > le[b]) {
        b++;
    }
    h->b[b]++;
    h->sum += v;
    h->count++;
}

double gw_hist_p95(const uint64_t *delta, const double *le, double scale)
{
    uint64_t total = 0;
    for (size_t i = 0; i < GW_HIST_BUCKETS; i++) {
        total += delta[i];
    }
    if (total == 0) {
        return -1;
    }
    double want = 0.95 * (double)total;
    double cum = 0;
    for (size_t i = 0; i < GW_HIST_BUCKETS; i++) {
        double next = cum + (double)delta[i];
        if (next >= want && delta[i] > 0) {
            double lo = i == 0 ? 0 : le[i - 1];
            double hi = i < GW_HIST_BUCKETS - 1 ? le[i] : le[GW_HIST_BUCKETS - 2];
            double frac = (want - cum) / (double)delta[i];
            return (lo + (hi - lo) * frac) * scale;
        }
        cum = next;
    }
    return le[GW_HIST_BUCKETS - 2] * scale;
}

double gw_hist_report(gw_hist *h, const double *le)
{
    uint64_t delta[GW_HIST_BUCKETS];
    for (size_t b = 0; b < GW_HIST_BUCKETS; b++) {
        delta[b] = h->b[b] - h->rep[b];
        h->rep[b] = h->b[b];
    }
    return gw_hist_p95(delta, le, 1000.0);
}

void gw_slo_begin(gw_client *c, bool stream)
{
    c->slo = stream && (c->api == API_CHAT || c->api == API_COMPLETIONS);
    c->first_token_ns = 0;
    c->sse_events = 0;
    c->sse_at = 0;
    if (c->slo) {
        c->scan = true; /* the usage object, and "[DONE]", come last */
    }
}

/* Count "data:" at line starts. sse_at: bytes of "data:" matched since a
 * line start, or -1 inside a line. */
void gw_slo_feed(gw_client *c, const char *p, size_t len)
{
    static const char pat[] = "data:";
    int at = c->sse_at;
    for (size_t i = 0; i < len; i++) {
        char ch = p[i];
        if (ch == '\n') {
            at = 0;
        } else if (at >= 0 && ch == pat[at]) {
            if (++at == 5) {
                if (c->sse_events++ == 0) {
                    c->first_token_ns = c->g->now_ns;
                }
                at = -1;
            }
        } else if (ch != '\r' || at != 0) {
            at = -1;
        }
    }
    c->sse_at = at;
}

void gw_slo_end(gw_client *c)
{
    if (!c->slo || !c->svc || c->sse_events == 0 || c->status != 200) {
        c->slo = false;
        return;
    }
    c->slo = false;
    gw_service *s = c->svc;
    int64_t now = c->g->now_ns;
    uint64_t prompt = 0, tokens = 0;
    if (!c->win_len || gw_usage_parse(c->win, c->win_len, &prompt, &tokens) != 0 || tokens == 0) {
        tokens = c->sse_events;
        if (c->win_len && memmem(c->win, c->win_len, "data: [DONE]", 12) && tokens > 0) {
            tokens--;
        }
    }
    double ttft = (double)(c->first_token_ns - c->start_ns) / 1e9;
    gw_hist_add(&s->ttft, gw_ttft_le, ttft);
    s->slo_met[0] += s->slo_target_s[0] > 0 && ttft <= s->slo_target_s[0];
    if (tokens >= 2) {
        double tpot = (double)(now - c->first_token_ns) / 1e9 / (double)(tokens - 1);
        gw_hist_add(&s->tpot, gw_tpot_le, tpot);
        s->slo_met[1] += s->slo_target_s[1] > 0 && tpot <= s->slo_target_s[1];
    }
    double total_s = (double)(now - c->start_ns) / 1e9;
    if (tokens > 0 && total_s > 0) {
        gw_hist_add(&s->tps, gw_tps_le, (double)tokens / total_s);
    }
    s->output_tokens += tokens;
}

static void render(cr_buf *o, gw *g, const char *name, const char *help, size_t off,
                   const double *le)
{
    cr_buf_printf(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        const gw_hist *h = (const gw_hist *)((const char *)s + off);
        uint64_t cum = 0;
        for (size_t b = 0; b < GW_HIST_BUCKETS; b++) {
            cum += h->b[b];
            if (b < GW_HIST_BUCKETS - 1) {
                cr_buf_printf(o, "%s_bucket{service=\"%s\",le=\"%g\"} %llu\n", name, s->name, le[b],
                              (unsigned long long)cum);
            } else {
                cr_buf_printf(o, "%s_bucket{service=\"%s\",le=\"+Inf\"} %llu\n", name, s->name,
                              (unsigned long long)cum);
            }
        }
        cr_buf_printf(o, "%s_sum{service=\"%s\"} %.6f\n", name, s->name, h->sum);
        cr_buf_printf(o, "%s_count{service=\"%s\"} %llu\n", name, s->name,
                      (unsigned long long)h->count);
    }
}

void gw_slo_set_targets(gw_service *s, double ttft_ms, double tpot_ms)
{
    s->slo_target_s[0] = ttft_ms > 0 ? ttft_ms / 1000 : 0;
    s->slo_target_s[1] = tpot_ms > 0 ? tpot_ms / 1000 : 0;
}

void gw_slo_metrics(gw *g, cr_buf *o)
{
    static const char *const slo_name[2] = {"ttft", "tpot"};
    cr_buf_puts(o, "# HELP corral_gateway_slo_target_seconds A service's serving SLO: p95 "
                   "target of TTFT or TPOT.\n# TYPE corral_gateway_slo_target_seconds gauge\n");
    for (size_t i = 0; i < g->service_count; i++) {
        for (int k = 0; k < 2; k++) {
            if (g->services[i]->slo_target_s[k] > 0) {
                cr_buf_printf(o,
                              "corral_gateway_slo_target_seconds{service=\"%s\",slo=\"%s\"} %g\n",
                              g->services[i]->name, slo_name[k], g->services[i]->slo_target_s[k]);
            }
        }
    }
    cr_buf_puts(o, "# HELP corral_gateway_slo_met_total Streamed completions within the "
                   "service's TTFT or TPOT target (divide by the histogram's count: "
                   "attainment).\n# TYPE corral_gateway_slo_met_total counter\n");
    for (size_t i = 0; i < g->service_count; i++) {
        for (int k = 0; k < 2; k++) {
            if (g->services[i]->slo_target_s[k] > 0) {
                cr_buf_printf(o, "corral_gateway_slo_met_total{service=\"%s\",slo=\"%s\"} %llu\n",
                              g->services[i]->name, slo_name[k],
                              (unsigned long long)g->services[i]->slo_met[k]);
            }
        }
    }
    render(o, g, "corral_gateway_ttft_seconds",
           "Time to first token of streamed completions (request head to the first event).",
           offsetof(gw_service, ttft), gw_ttft_le);
    render(o, g, "corral_gateway_tpot_seconds",
           "Time per output token of streamed completions after the first.",
           offsetof(gw_service, tpot), gw_tpot_le);
    render(o, g, "corral_gateway_output_tokens_per_second",
           "Output tokens per second of each streamed completion, over its whole time.",
           offsetof(gw_service, tps), gw_tps_le);
    cr_buf_puts(o, "# HELP corral_gateway_output_tokens_total Output tokens of streamed "
                   "completions.\n# TYPE corral_gateway_output_tokens_total counter\n");
    for (size_t i = 0; i < g->service_count; i++) {
        cr_buf_printf(o, "corral_gateway_output_tokens_total{service=\"%s\"} %llu\n",
                      g->services[i]->name, (unsigned long long)g->services[i]->output_tokens);
    }
}
