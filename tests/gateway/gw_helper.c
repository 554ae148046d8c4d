/*
 * gw_helper.c - test and benchmark helper for the gateway: a small real
 * model server, a bounded load generator, an SSE checker, and a fake
 * controller for the endpoints long-poll.
 *
 *   gw_helper serve PORT NAME          model server (thread per connection)
 *       GET /health      200 (503 while the file $PORT.unready exists in cwd)
 *       GET /metrics     vLLM-style gauges (num_requests_waiting = in flight,
 *                        or $GW_WAITING)
 *       GET /stats       "requests N"
 *       GET /sse?n=K     chunked text/event-stream: one event, then waits for
 *                        GET /release (at most 10 s), then the other K-1
 *       GET /slow?ms=M   answers after M ms
 *       anything else    200 "NAME PATH", header X-Replica: NAME
 *       POST with a chunked body: read strictly by CRLF (a bare LF is
 *                        just a byte of a chunk extension), as servers
 *                        that disagree with a lenient proxy do
 *       GET /smuggled    creates the file "smuggled.hit" in cwd
 *   gw_helper load URL REQUESTS CONCURRENCY
 *       prints "status CODE COUNT", "replica NAME COUNT", "failed N",
 *       "retry_after N" (503s that carried Retry-After)
 *   gw_helper sse URL RELEASE_URL
 *       exit 0 when the first event arrived while the server still held the
 *       rest of the stream (so nothing buffered it), and all events came
 *   gw_helper ttft URL N CONCURRENCY PROMPTS
 *       the shared-prefix workload of bench_prefix.sh: N streamed chat
 *       completions, CONCURRENCY at once, each a random one of PROMPTS long
 *       system prompts (2 KiB) and a short user question; prints the mean,
 *       p50 and p99 time to first token (the response head: the stand-in
 *       sends it after its prefill) and the failures; GW_KEY: a bearer key
 *   gw_helper ctl PORT FILE            fake controller: serves FILE (JSON)
 *       as GET /v1/services/NAME/endpoints?version=V&wait=W (long-poll on
 *       the "version" member) and writes POST .../metrics bodies to FILE.metrics
 */
#include "cr_http_parse.h"

#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct server {
    const char *name;         /* replica name */
    int port;                 /* listening port */
    const char *file;         /* ctl: the endpoints file */
    atomic_long requests;     /* requests served */
    atomic_long openai;       /* OpenAI-route requests served (/v1/chat/completions...) */
    atomic_long authz;        /* requests that arrived with an Authorization header */
    atomic_int max_in_flight; /* most requests in progress at once */
    /* The prefix-cache stand-in (GW_PREFIX_CACHE=BLOCKS): the hashes of the
     * 128-byte prompt blocks it holds, least recently used evicted, and one
     * prefill at a time (as a GPU runs them), costing GW_PREFILL_US per
     * uncached prompt byte; GW_TPOT_MS between streamed tokens. */
    pthread_mutex_t cache_mu;   /* guards the cache */
    pthread_mutex_t prefill_mu; /* one prefill at a time */
    uint64_t *cache;            /* block hashes */
    uint64_t *cache_used;       /* last use (a counter) */
    long cache_cap;             /* blocks held at most; 0 no stand-in */
    uint64_t cache_clock;       /* use counter */
    long prefill_us;            /* per uncached byte */
    long tpot_ms;               /* between tokens */
    atomic_long prompt_blocks;  /* blocks seen */
    atomic_long hit_blocks;     /* blocks found cached */
    atomic_int in_flight;       /* requests in progress */
    pthread_mutex_t mu;         /* guards released */
    pthread_cond_t cond;        /* signals released */
    long released;              /* /release calls */
} server;

typedef struct conn {
    server *s;
    int fd;
} conn;

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) {
            if (w < 0 && errno == EINTR) {
                continue;
            }
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int respond(int fd, int status, const char *ctype, const char *extra, const char *body,
                   size_t blen)
{
    char head[512];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n", status,
                     ctype, blen, extra ? extra : "");
    if (write_all(fd, head, (size_t)n) != 0) {
        return -1;
    }
    return write_all(fd, body, blen);
}

static long query_long(const char *target, size_t tl, const char *key, long dflt)
{
    char buf[512];
    if (tl >= sizeof buf) {
        return dflt;
    }
    memcpy(buf, target, tl);
    buf[tl] = '\0';
    char pat[64];
    snprintf(pat, sizeof pat, "%s=", key);
    char *q = strchr(buf, '?');
    if (!q) {
        return dflt;
    }
    char *p = strstr(q, pat);
    if (!p || (p[-1] != '?' && p[-1] != '&')) {
        return dflt;
    }
    return strtol(p + strlen(pat), NULL, 10);
}

static bool path_is(const cr_http_msg *m, const char *path)
{
    size_t n = strlen(path);
    return m->target_len >= n && memcmp(m->target, path, n) == 0 &&
           (m->target_len == n || m->target[n] == '?');
}

static int handle_sse(server *s, int fd, const cr_http_msg *m)
{
    long n = query_long(m->target, m->target_len, "n", 3);
    const char *head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                       "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n";
    if (write_all(fd, head, strlen(head)) != 0) {
        return -1;
    }
    pthread_mutex_lock(&s->mu);
    long before = s->released;
    pthread_mutex_unlock(&s->mu);
    for (long i = 0; i < n; i++) {
        char ev[64], chunk[96];
        int el = snprintf(ev, sizeof ev, "data: event %ld\n\n", i);
        int cl = snprintf(chunk, sizeof chunk, "%x\r\n%s\r\n", el, ev);
        if (write_all(fd, chunk, (size_t)cl) != 0) {
            return -1;
        }
        if (i == 0) {
            /* Hold the rest until someone calls /release (10 s at most). */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 10;
            pthread_mutex_lock(&s->mu);
            while (s->released == before) {
                if (pthread_cond_timedwait(&s->cond, &s->mu, &ts) != 0) {
                    break;
                }
            }
            pthread_mutex_unlock(&s->mu);
        }
    }
    return write_all(fd, "0\r\n\r\n", 5);
}

/* The "model" of a JSON body (a plain scan: the tests send it plainly). */
static void body_model(const char *body, size_t blen, char *out, size_t len)
{
    snprintf(out, len, "unknown");
    const char *p = memmem(body, blen, "\"model\"", 7);
    if (!p) {
        return;
    }
    p = memchr(p + 7, '"', (size_t)(body + blen - (p + 7)));
    if (!p) {
        return;
    }
    const char *e = memchr(p + 1, '"', (size_t)(body + blen - (p + 1)));
    if (e && (size_t)(e - p - 1) < len) {
        snprintf(out, len, "%.*s", (int)(e - p - 1), p + 1);
    }
}

#define BLOCK 128

/* The stand-in's prefill: the leading prompt blocks it holds are free, the
 * rest cost prefill_us per byte, one prefill at a time. */
static void prefill(server *s, const char *body, size_t blen)
{
    if (s->cache_cap <= 0) {
        return;
    }
    const char *p = memmem(body, blen, "\"messages\"", 10);
    if (!p) {
        p = body;
    }
    size_t plen = (size_t)(body + blen - p), nblocks = plen / BLOCK, hit = 0;
    bool missed = false;
    uint64_t h = 1469598103934665603ULL;
    pthread_mutex_lock(&s->cache_mu);
    for (size_t b = 0; b < nblocks; b++) {
        for (size_t i = 0; i < BLOCK; i++) {
            h = (h ^ (uint8_t)p[b * BLOCK + i]) * 1099511628211ULL;
        }
        long slot = -1, lru = 0;
        for (long i = 0; i < s->cache_cap; i++) {
            if (s->cache[i] == h) {
                slot = i;
                break;
            }
            if (s->cache_used[i] < s->cache_used[lru]) {
                lru = i;
            }
        }
        if (slot >= 0 && !missed) {
            hit++;
        }
        if (slot < 0) {
            missed = true;
            slot = lru;
            s->cache[slot] = h;
        }
        s->cache_used[slot] = ++s->cache_clock;
    }
    pthread_mutex_unlock(&s->cache_mu);
    atomic_fetch_add(&s->prompt_blocks, (long)nblocks);
    atomic_fetch_add(&s->hit_blocks, (long)hit);
    long us = 1000 + (long)(plen - hit * BLOCK) * s->prefill_us;
    pthread_mutex_lock(&s->prefill_mu);
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    pthread_mutex_unlock(&s->prefill_mu);
}

/*
 * The OpenAI routes of a model server: chat completions (streamed as
 * server-sent events when the body says "stream": true, with a last chunk
 * carrying usage when it asks for stream_options.include_usage),
 * completions and embeddings. Token counts are deterministic: the prompt
 * is a token per 4 body bytes (at least 1), the completion is the 3 words
 * "hello from NAME" (3 tokens), so a test can check what was counted.
 */
static int handle_openai(server *s, int fd, const cr_http_msg *m, const char *body, size_t blen)
{
    atomic_fetch_add(&s->openai, 1);
    char model[128], out[4096], extra[256];
    body_model(body, blen, model, sizeof model);
    long prompt = (long)blen / 4 > 0 ? (long)blen / 4 : 1, completion = 3;
    snprintf(extra, sizeof extra, "X-Replica: %s\r\n", s->name);
    bool stream =
        memmem(body, blen, "\"stream\":true", 13) || memmem(body, blen, "\"stream\": true", 14);
    bool usage = memmem(body, blen, "include_usage", 13) != NULL;
    if (path_is(m, "/v1/embeddings")) {
        int n =
            snprintf(out, sizeof out,
                     "{\"object\":\"list\",\"model\":\"%s\",\"data\":[{\"object\":\"embedding\","
                     "\"index\":0,\"embedding\":[0.1,0.2,0.3]}],\"usage\":{\"prompt_tokens\":%ld,"
                     "\"total_tokens\":%ld}}",
                     model, prompt, prompt);
        return respond(fd, 200, "application/json", extra, out, (size_t)n);
    }
    bool chat = path_is(m, "/v1/chat/completions");
    prefill(s, body, blen);
    if (!stream) {
        int n;
        if (chat) {
            n = snprintf(
                out, sizeof out,
                "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":1,"
                "\"model\":\"%s\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
                "\"assistant\",\"content\":\"hello from %s\"},\"finish_reason\":\"stop\"}],"
                "\"usage\":{\"prompt_tokens\":%ld,\"completion_tokens\":%ld,"
                "\"total_tokens\":%ld}}",
                model, s->name, prompt, completion, prompt + completion);
        } else {
            n = snprintf(out, sizeof out,
                         "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,"
                         "\"model\":\"%s\",\"choices\":[{\"index\":0,\"text\":\"hello from %s\","
                         "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":%ld,"
                         "\"completion_tokens\":%ld,\"total_tokens\":%ld}}",
                         model, s->name, prompt, completion, prompt + completion);
        }
        return respond(fd, 200, "application/json", extra, out, (size_t)n);
    }
    char head[512];
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n%s"
                      "Transfer-Encoding: chunked\r\n\r\n",
                      extra);
    if (write_all(fd, head, (size_t)hn) != 0) {
        return -1;
    }
    const char *words[3] = {"hello", " from ", s->name};
    for (int i = 0; i < 4; i++) {
        char ev[1024], chunk[1100];
        int el;
        if (i < 3) {
            el = snprintf(ev, sizeof ev,
                          "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\","
                          "\"created\":1,\"model\":\"%s\",\"choices\":[{\"index\":0,\"delta\":"
                          "{\"content\":\"%s\"},\"finish_reason\":null}]}\n\n",
                          model, words[i]);
        } else if (usage) {
            el = snprintf(ev, sizeof ev,
                          "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\","
                          "\"created\":1,\"model\":\"%s\",\"choices\":[],\"usage\":{"
                          "\"prompt_tokens\":%ld,\"completion_tokens\":%ld,\"total_tokens\":%ld}}"
                          "\n\ndata: [DONE]\n\n",
                          model, prompt, completion, prompt + completion);
        } else {
            el = snprintf(ev, sizeof ev, "data: [DONE]\n\n");
        }
        int cl = snprintf(chunk, sizeof chunk, "%x\r\n%s\r\n", el, ev);
        if (write_all(fd, chunk, (size_t)cl) != 0) {
            return -1;
        }
        if (i < 2 && s->tpot_ms > 0) {
            sleep_ms(s->tpot_ms);
        }
    }
    return write_all(fd, "0\r\n\r\n", 5);
}

/* The fake controller's endpoints long-poll. */
static int handle_ctl(server *s, int fd, const cr_http_msg *m)
{
    long want = query_long(m->target, m->target_len, "version", -1);
    long wait = query_long(m->target, m->target_len, "wait", 0);
    for (long waited = 0;; waited += 50) {
        FILE *f = fopen(s->file, "r");
        char buf[8192];
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f) {
            fclose(f);
        }
        buf[n] = '\0';
        char *v = strstr(buf, "\"version\"");
        long ver = v ? strtol(strchr(v, ':') + 1, NULL, 10) : 0;
        if (ver != want || waited >= wait * 1000) {
            return respond(fd, 200, "application/json", NULL, buf, n);
        }
        sleep_ms(50);
    }
}

static int handle(server *s, int fd, const cr_http_msg *m, const char *body, size_t blen)
{
    char out[4096];
    atomic_fetch_add(&s->requests, 1);
    if (s->file) {
        if (m->method_len == 4 && memcmp(m->method, "POST", 4) == 0) {
            char path[512];
            snprintf(path, sizeof path, "%s.metrics", s->file);
            FILE *f = fopen(path, "a");
            if (f) {
                fprintf(f, "%.*s %.*s\n", (int)m->target_len, m->target, (int)blen, body);
                fclose(f);
            }
            return respond(fd, 200, "application/json", NULL, "{}", 2);
        }
        return handle_ctl(s, fd, m);
    }
    if (path_is(m, "/health")) {
        char flag[64];
        snprintf(flag, sizeof flag, "%d.unready", s->port);
        struct stat st;
        if (stat(flag, &st) == 0) {
            return respond(fd, 503, "text/plain", NULL, "starting\n", 9);
        }
        return respond(fd, 200, "text/plain", NULL, "ok\n", 3);
    }
    if (path_is(m, "/metrics")) {
        int n = snprintf(out, sizeof out,
                         "# TYPE vllm:num_requests_waiting gauge\n"
                         "vllm:num_requests_waiting{model_name=\"m\"} %d\n"
                         "# TYPE vllm:kv_cache_usage_perc gauge\n"
                         "vllm:kv_cache_usage_perc{model_name=\"m\"} 0.25\n",
                         getenv("GW_WAITING") ? atoi(getenv("GW_WAITING"))
                                              : atomic_load(&s->in_flight));
        const char *lora = getenv("GW_LORA_RUNNING");
        if (lora && n > 0 && (size_t)n < sizeof out) {
            /* vLLM's gauge: one sample per change, valued by its time; an
             * older one first, which the gateway must not take */
            n += snprintf(out + n, sizeof out - (size_t)n,
                          "# TYPE vllm:lora_requests_info gauge\n"
                          "vllm:lora_requests_info{max_lora=\"4\",running_lora_adapters=\"old\","
                          "waiting_lora_adapters=\"\"} 1600000000.0\n"
                          "vllm:lora_requests_info{max_lora=\"4\",running_lora_adapters=\"%s\","
                          "waiting_lora_adapters=\"\"} 1700000000.5\n",
                          lora);
            if ((size_t)n >= sizeof out) {
                n = (int)sizeof out - 1;
            }
        }
        return respond(fd, 200, "text/plain", NULL, out, (size_t)n);
    }
    if (cr_http_find(m, "authorization")) {
        atomic_fetch_add(&s->authz, 1);
    }
    if (path_is(m, "/v1/chat/completions") || path_is(m, "/v1/completions") ||
        path_is(m, "/v1/embeddings")) {
        return handle_openai(s, fd, m, body, blen);
    }
    if (path_is(m, "/stats")) {
        int n = snprintf(out, sizeof out,
                         "requests %ld\nopenai %ld\nauthorization %ld\nmax_in_flight %d\n"
                         "prompt_blocks %ld\nhit_blocks %ld\n",
                         atomic_load(&s->requests), atomic_load(&s->openai), atomic_load(&s->authz),
                         atomic_load(&s->max_in_flight), atomic_load(&s->prompt_blocks),
                         atomic_load(&s->hit_blocks));
        return respond(fd, 200, "text/plain", NULL, out, (size_t)n);
    }
    if (path_is(m, "/release")) {
        pthread_mutex_lock(&s->mu);
        s->released++;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->mu);
        return respond(fd, 200, "text/plain", NULL, "released\n", 9);
    }
    if (path_is(m, "/sse")) {
        return handle_sse(s, fd, m);
    }
    if (path_is(m, "/hints")) {
        const char *early = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n";
        if (write_all(fd, early, strlen(early)) != 0) {
            return -1;
        }
        return respond(fd, 200, "text/plain", NULL, "after hints\n", 12);
    }
    if (path_is(m, "/eof")) {
        /* No Content-Length, no chunking: the body ends when the connection does. */
        const char *r = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close\n";
        write_all(fd, r, strlen(r));
        return -1;
    }
    if (path_is(m, "/big")) {
        long kb = query_long(m->target, m->target_len, "kb", 64);
        size_t n = (size_t)(kb > 0 && kb < 65536 ? kb : 64) * 1024;
        char *big = malloc(n);
        for (size_t i = 0; i < n; i++) {
            big[i] = (char)('a' + i % 26);
        }
        int rc = respond(fd, 200, "application/octet-stream", NULL, big, n);
        free(big);
        return rc;
    }
    if (path_is(m, "/smuggled")) {
        FILE *f = fopen("smuggled.hit", "a");
        if (f) {
            fclose(f);
        }
    }
    if (path_is(m, "/slow")) {
        sleep_ms(query_long(m->target, m->target_len, "ms", 100));
    }
    char extra[512];
    const cr_http_header *xff = cr_http_find(m, "x-forwarded-for");
    const cr_http_header *xfp = cr_http_find(m, "x-forwarded-prefix");
    const cr_http_header *xpr = cr_http_find(m, "x-forwarded-proto");
    snprintf(extra, sizeof extra,
             "X-Replica: %s\r\nX-Seen-For: %.*s\r\nX-Seen-Prefix: %.*s\r\nX-Seen-Proto: %.*s\r\n",
             s->name, xff ? (int)xff->value_len : 0, xff ? xff->value : "",
             xfp ? (int)xfp->value_len : 0, xfp ? xfp->value : "", xpr ? (int)xpr->value_len : 0,
             xpr ? xpr->value : "");
    int n =
        snprintf(out, sizeof out, "%s %.*s %zu\n", s->name, (int)m->target_len, m->target, blen);
    return respond(fd, 200, "text/plain", extra, out, (size_t)n);
}

/* Bytes up to the next CRLF from buf[*pos], reading more as needed; returns
 * the offset of the CR, or -1. */
static long find_crlf(int fd, char *buf, size_t *len, size_t cap, size_t pos)
{
    for (;;) {
        for (size_t i = pos; i + 1 < *len; i++) {
            if (buf[i] == '\r' && buf[i + 1] == '\n') {
                return (long)i;
            }
        }
        if (*len == cap) {
            return -1;
        }
        ssize_t r = read(fd, buf + *len, cap - *len);
        if (r <= 0) {
            return -1;
        }
        *len += (size_t)r;
    }
}

/* A chunked body from buf[start]: returns its end (after the last CRLF) or -1. */
static long read_chunked(int fd, char *buf, size_t *len, size_t cap, size_t start)
{
    size_t pos = start;
    for (;;) {
        long eol = find_crlf(fd, buf, len, cap, pos);
        if (eol < 0) {
            return -1;
        }
        unsigned long n = strtoul(buf + pos, NULL, 16);
        pos = (size_t)eol + 2;
        if (n == 0) {
            break;
        }
        while (*len < pos + n + 2) {
            if (*len == cap) {
                return -1;
            }
            ssize_t r = read(fd, buf + *len, cap - *len);
            if (r <= 0) {
                return -1;
            }
            *len += (size_t)r;
        }
        pos += n + 2;
    }
    for (;;) { /* trailers, then the empty line */
        long eol = find_crlf(fd, buf, len, cap, pos);
        if (eol < 0) {
            return -1;
        }
        bool empty = (size_t)eol == pos;
        pos = (size_t)eol + 2;
        if (empty) {
            return (long)pos;
        }
    }
}

static void *conn_main(void *arg)
{
    conn *c = arg;
    server *s = c->s;
    size_t cap = 1 << 20;
    char *buf = malloc(cap);
    size_t len = 0;
    for (;;) {
        cr_http_msg m;
        int hl;
        while ((hl = cr_http_parse_request(buf, len, &m)) == 0) {
            if (len == cap) {
                goto out;
            }
            ssize_t r = read(c->fd, buf + len, cap - len);
            if (r <= 0) {
                goto out;
            }
            len += (size_t)r;
        }
        if (hl < 0) {
            goto out;
        }
        size_t blen = m.content_length > 0 ? (size_t)m.content_length : 0;
        if (m.chunked) {
            long end = read_chunked(c->fd, buf, &len, cap, (size_t)hl);
            if (end < 0) {
                goto out;
            }
            blen = (size_t)end - (size_t)hl;
        }
        if (blen > cap - (size_t)hl) {
            goto out;
        }
        while (len < (size_t)hl + blen) {
            ssize_t r = read(c->fd, buf + len, cap - len);
            if (r <= 0) {
                goto out;
            }
            len += (size_t)r;
        }
        bool close_after = !m.keep_alive;
        int now = atomic_fetch_add(&s->in_flight, 1) + 1;
        for (int mx = atomic_load(&s->max_in_flight);
             now > mx && !atomic_compare_exchange_weak(&s->max_in_flight, &mx, now);) {
        }
        int rc = handle(s, c->fd, &m, buf + hl, blen);
        atomic_fetch_sub(&s->in_flight, 1);
        if (rc != 0 || close_after) {
            goto out;
        }
        size_t used = (size_t)hl + blen;
        memmove(buf, buf + used, len - used);
        len -= used;
    }
out:
    free(buf);
    close(c->fd);
    free(c);
    return NULL;
}

static int listen_on(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 512) != 0) {
        perror("bind");
        exit(1);
    }
    return fd;
}

static _Noreturn void serve(int port, const char *name, const char *file)
{
    server s;
    memset(&s, 0, sizeof s);
    s.name = name;
    s.port = port;
    s.file = file;
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cond, NULL);
    pthread_mutex_init(&s.cache_mu, NULL);
    pthread_mutex_init(&s.prefill_mu, NULL);
    const char *pc = getenv("GW_PREFIX_CACHE");
    s.cache_cap = pc ? atol(pc) : 0;
    if (s.cache_cap > 0) {
        s.cache = calloc((size_t)s.cache_cap, sizeof *s.cache);
        s.cache_used = calloc((size_t)s.cache_cap, sizeof *s.cache_used);
    }
    s.prefill_us = getenv("GW_PREFILL_US") ? atol(getenv("GW_PREFILL_US")) : 10;
    s.tpot_ms = getenv("GW_TPOT_MS") ? atol(getenv("GW_TPOT_MS")) : 0;
    int lfd = listen_on(port);
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    getsockname(lfd, (struct sockaddr *)&sa, &sl);
    s.port = ntohs(sa.sin_port);
    printf("gw_helper: %s listening on %d\n", name ? name : "ctl", s.port);
    fflush(stdout);
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) {
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conn *c = malloc(sizeof *c);
        c->s = &s;
        c->fd = fd;
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&at, 256 * 1024);
        if (pthread_create(&th, &at, conn_main, c) != 0) {
            close(fd);
            free(c);
        }
        pthread_attr_destroy(&at);
    }
}

/* ---- load generator ---------------------------------------------------- */

#define MAX_REPLICAS 16

typedef struct load {
    const char *url;
    atomic_long left;                 /* requests still to start */
    pthread_mutex_t mu;               /* guards the counts */
    long status[600];                 /* by status code */
    char replica[MAX_REPLICAS][32];   /* names seen */
    long replica_count[MAX_REPLICAS]; /* requests per name */
    long failed;                      /* transport failures */
    long retry_after;                 /* 503 with Retry-After */
} load;

typedef struct req_info {
    char replica[32];
    bool retry_after;
} req_info;

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    req_info *ri = ud;
    size_t len = size * n;
    if (len > 11 && strncasecmp(p, "X-Replica:", 10) == 0) {
        size_t s = 10;
        while (s < len && p[s] == ' ') {
            s++;
        }
        size_t e = len;
        while (e > s && (p[e - 1] == '\r' || p[e - 1] == '\n')) {
            e--;
        }
        snprintf(ri->replica, sizeof ri->replica, "%.*s", (int)(e - s), p + s);
    }
    if (len > 12 && strncasecmp(p, "Retry-After:", 12) == 0) {
        ri->retry_after = true;
    }
    return len;
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return size * n;
}

static void *load_main(void *arg)
{
    load *l = arg;
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, l->url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    while (atomic_fetch_sub(&l->left, 1) > 0) {
        req_info ri;
        memset(&ri, 0, sizeof ri);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &ri);
        CURLcode rc = curl_easy_perform(h);
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        pthread_mutex_lock(&l->mu);
        if (rc != CURLE_OK) {
            l->failed++;
        } else if (code >= 100 && code < 600) {
            l->status[code]++;
            if (code == 503 && ri.retry_after) {
                l->retry_after++;
            }
        }
        if (ri.replica[0]) {
            for (int i = 0; i < MAX_REPLICAS; i++) {
                if (!l->replica[i][0]) {
                    snprintf(l->replica[i], sizeof l->replica[i], "%s", ri.replica);
                }
                if (strcmp(l->replica[i], ri.replica) == 0) {
                    l->replica_count[i]++;
                    break;
                }
            }
        }
        pthread_mutex_unlock(&l->mu);
    }
    curl_easy_cleanup(h);
    return NULL;
}

static int run_load(const char *url, long requests, int concurrency)
{
    load *l = calloc(1, sizeof *l);
    l->url = url;
    atomic_store(&l->left, requests);
    pthread_mutex_init(&l->mu, NULL);
    pthread_t th[256];
    if (concurrency < 1 || concurrency > 256) {
        fprintf(stderr, "concurrency 1..256\n");
        return 2;
    }
    for (int i = 0; i < concurrency; i++) {
        pthread_create(&th[i], NULL, load_main, l);
    }
    for (int i = 0; i < concurrency; i++) {
        pthread_join(th[i], NULL);
    }
    for (int c = 100; c < 600; c++) {
        if (l->status[c]) {
            printf("status %d %ld\n", c, l->status[c]);
        }
    }
    for (int i = 0; i < MAX_REPLICAS && l->replica[i][0]; i++) {
        printf("replica %s %ld\n", l->replica[i], l->replica_count[i]);
    }
    printf("failed %ld\nretry_after %ld\n", l->failed, l->retry_after);
    free(l);
    return 0;
}

/* ---- time to first token on a shared-prefix workload ------------------- */

typedef struct ttft {
    const char *url;
    int prompts;        /* distinct system prompts */
    atomic_long left;   /* requests still to start */
    pthread_mutex_t mu; /* guards the samples */
    double *ms;         /* time to first token per request */
    long n;             /* samples */
    long failed;        /* transport failures or not 200 */
    atomic_uint seq;    /* thread seeds */
} ttft;

static void *ttft_main(void *arg)
{
    ttft *t = arg;
    unsigned seed = 7919u * (atomic_fetch_add(&t->seq, 1) + 1);
    CURL *h = curl_easy_init();
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    char auth[256];
    if (getenv("GW_KEY")) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", getenv("GW_KEY"));
        hd = curl_slist_append(hd, auth);
    }
    curl_easy_setopt(h, CURLOPT_URL, t->url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    char *body = malloc(8192);
    for (long i; (i = atomic_fetch_sub(&t->left, 1)) > 0;) {
        int sys = (int)(rand_r(&seed) % (unsigned)t->prompts);
        /* a 2 KiB system prompt of its own per index, then the question */
        char sp[2100];
        int n = snprintf(sp, sizeof sp, "You are assistant %d. ", sys);
        for (; n < 2048; n++) {
            sp[n] = (char)('a' + (n * 7 + sys * 13) % 26);
        }
        sp[n] = '\0';
        snprintf(body, 8192,
                 "{\"model\":\"llama\",\"stream\":true,\"messages\":[{\"role\":\"system\","
                 "\"content\":\"%s\"},{\"role\":\"user\",\"content\":\"question %ld of user "
                 "%u\"}]}",
                 sp, i, rand_r(&seed) % 1000);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        CURLcode rc = curl_easy_perform(h);
        long code = 0;
        curl_off_t us = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_getinfo(h, CURLINFO_STARTTRANSFER_TIME_T, &us);
        pthread_mutex_lock(&t->mu);
        if (rc != CURLE_OK || code != 200) {
            t->failed++;
        } else {
            t->ms[t->n++] = (double)us / 1000.0;
        }
        pthread_mutex_unlock(&t->mu);
    }
    free(body);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int run_ttft(const char *url, long requests, int concurrency, int prompts)
{
    if (concurrency < 1 || concurrency > 256 || requests < 1 || prompts < 1) {
        fprintf(stderr, "ttft: N >= 1, concurrency 1..256, prompts >= 1\n");
        return 2;
    }
    ttft *t = calloc(1, sizeof *t);
    t->url = url;
    t->prompts = prompts;
    t->ms = calloc((size_t)requests, sizeof *t->ms);
    atomic_store(&t->left, requests);
    pthread_mutex_init(&t->mu, NULL);
    pthread_t th[256];
    for (int i = 0; i < concurrency; i++) {
        pthread_create(&th[i], NULL, ttft_main, t);
    }
    for (int i = 0; i < concurrency; i++) {
        pthread_join(th[i], NULL);
    }
    double sum = 0;
    for (long i = 0; i < t->n; i++) {
        sum += t->ms[i];
    }
    qsort(t->ms, (size_t)t->n, sizeof *t->ms, cmp_double);
    printf("requests %ld failed %ld ttft_mean_ms %.2f p50_ms %.2f p99_ms %.2f\n", t->n, t->failed,
           t->n ? sum / (double)t->n : 0, t->n ? t->ms[t->n / 2] : 0,
           t->n ? t->ms[(t->n * 99) / 100 < t->n ? (t->n * 99) / 100 : t->n - 1] : 0);
    int rc = t->failed ? 1 : 0;
    free(t->ms);
    free(t);
    return rc;
}

/* ---- SSE check ---------------------------------------------------------- */

typedef struct sse {
    const char *release_url;
    bool released;  /* we released the server after the first event */
    int events;     /* "data:" lines seen */
    int at_release; /* events seen when we released the server */
    char tail[5];   /* last 5 bytes, to find "data:" across chunk borders */
} sse;

static size_t on_sse(char *p, size_t size, size_t n, void *ud)
{
    sse *st = ud;
    size_t len = size * n;
    for (size_t i = 0; i < len; i++) {
        memmove(st->tail, st->tail + 1, sizeof st->tail - 1);
        st->tail[sizeof st->tail - 1] = p[i];
        if (memcmp(st->tail, "data:", 5) == 0) {
            st->events++;
        }
    }
    if (st->events >= 1 && !st->released) {
        st->at_release = st->events;
        /* The server holds the rest of the stream until this call. */
        CURL *r = curl_easy_init();
        curl_easy_setopt(r, CURLOPT_URL, st->release_url);
        curl_easy_setopt(r, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(r, CURLOPT_TIMEOUT, 5L);
        st->released = curl_easy_perform(r) == CURLE_OK;
        curl_easy_cleanup(r);
    }
    return len;
}

static int run_sse(const char *url, const char *release_url)
{
    sse st;
    memset(&st, 0, sizeof st);
    st.release_url = release_url;
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_sse);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &st);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    CURLcode rc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    printf("sse status=%ld events=%d released_after=%d curl=%d\n", code, st.events, st.at_release,
           (int)rc);
    /* Buffered, every event would come at once, after the server's 10 s. */
    return (rc == CURLE_OK && code == 200 && st.released && st.at_release == 1 && st.events >= 3)
               ? 0
               : 1;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (argc == 4 && strcmp(argv[1], "serve") == 0) {
        serve(atoi(argv[2]), argv[3], NULL);
    }
    if (argc == 4 && strcmp(argv[1], "ctl") == 0) {
        serve(atoi(argv[2]), NULL, argv[3]);
    }
    if (argc == 6 && strcmp(argv[1], "ttft") == 0) {
        return run_ttft(argv[2], atol(argv[3]), atoi(argv[4]), atoi(argv[5]));
    }
    if (argc == 5 && strcmp(argv[1], "load") == 0) {
        return run_load(argv[2], atol(argv[3]), atoi(argv[4]));
    }
    if (argc == 4 && strcmp(argv[1], "sse") == 0) {
        return run_sse(argv[2], argv[3]);
    }
    fprintf(stderr, "usage: gw_helper serve PORT NAME | load URL N C | ttft URL N C PROMPTS | sse "
                    "URL RELEASE_URL | "
                    "ctl PORT FILE\n");
    return 2;
}
