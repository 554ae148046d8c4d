/*
 * gw_probe.c - the prober thread: health checks of replicas marked down
 * (GET the readiness path; 2xx or 3xx brings the replica back) and scrapes
 * of the replicas' own Prometheus /metrics for load signals. Blocking
 * sockets with short timeouts: this thread is off the proxy path.
 */
#include "gw_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define PROBE_TIMEOUT_MS 1000
#define PROBE_MAX_BYTES  (512 * 1024)

void gw_post(gw *g, gw_msg *m)
{
    pthread_mutex_lock(&g->mu);
    m->next = g->inbox;
    g->inbox = m;
    pthread_mutex_unlock(&g->mu);
    uint64_t one = 1;
    ssize_t n = write(g->wake.fd, &one, sizeof one);
    (void)n;
}

static int wait_fd(int fd, short events, int timeout_ms)
{
    struct pollfd p = {fd, events, 0};
    int rc;
    do {
        rc = poll(&p, 1, timeout_ms);
    } while (rc < 0 && errno == EINTR);
    return rc > 0 ? 0 : CR_ETIMEDOUT;
}

/* GET path from a replica; *status and the body (returned new in *body,
 * free with free(); may be NULL) on success. */
static int http_get(const gw_probe_target *t, const char *path, int *status, char **body)
{
    int rc = CR_EIO;
    char *buf = NULL;
    int fd = socket(t->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        goto out;
    }
    if (connect(fd, (const struct sockaddr *)&t->addr, t->addr_len) != 0) {
        if (errno != EINPROGRESS || wait_fd(fd, POLLOUT, PROBE_TIMEOUT_MS) != 0) {
            goto out;
        }
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
            goto out;
        }
    }
    char req[512];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: corral-gateway\r\n"
                     "Connection: close\r\n\r\n",
                     path, t->host);
    if (n < 0 || (size_t)n >= sizeof req) {
        goto out;
    }
    size_t off = 0;
    while (off < (size_t)n) {
        ssize_t w = write(fd, req + off, (size_t)n - off);
        if (w > 0) {
            off += (size_t)w;
        } else if (w < 0 && errno == EAGAIN) {
            if (wait_fd(fd, POLLOUT, PROBE_TIMEOUT_MS) != 0) {
                goto out;
            }
        } else {
            goto out;
        }
    }
    buf = cr_malloc(PROBE_MAX_BYTES + 1);
    size_t len = 0;
    int64_t deadline = cr_mono_ns() + PROBE_TIMEOUT_MS * CR_NS_PER_MS;
    cr_http_msg m;
    int hl = 0;
    for (;;) {
        int64_t left = (deadline - cr_mono_ns()) / CR_NS_PER_MS;
        if (left <= 0 || wait_fd(fd, POLLIN, (int)left) != 0) {
            break;
        }
        ssize_t r = read(fd, buf + len, PROBE_MAX_BYTES - len);
        if (r <= 0) {
            break;
        }
        len += (size_t)r;
        if (hl == 0) {
            hl = cr_http_parse_response(buf, len, &m);
            if (hl < 0) {
                goto out;
            }
            if (hl > 0 && !body) {
                break; /* only the status is wanted */
            }
        }
        if (hl > 0 && m.content_length >= 0 && len >= (size_t)hl + (size_t)m.content_length) {
            break;
        }
        if (len == PROBE_MAX_BYTES) {
            break;
        }
    }
    if (hl <= 0) {
        hl = cr_http_parse_response(buf, len, &m);
        if (hl <= 0) {
            goto out;
        }
    }
    *status = m.status;
    if (body) {
        buf[len] = '\0';
        *body = cr_strdup(buf + hl);
    }
    rc = 0;
out:
    free(buf);
    if (fd >= 0) {
        close(fd);
    }
    return rc;
}

static bool name_is(const char *p, size_t len, const char *lit)
{
    return strlen(lit) == len && memcmp(p, lit, len) == 0;
}

/* The value of label `name` in the sample line [p, p + len), appended to
 * out (comma-separated, bounded by outlen). */
static void label_append(const char *p, size_t len, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i + nl + 2 <= len; i++) {
        if (memcmp(p + i, name, nl) == 0 && p[i + nl] == '=' && p[i + nl + 1] == '"' &&
            (i == 0 || p[i - 1] == '{' || p[i - 1] == ',')) {
            const char *v = p + i + nl + 2, *end = memchr(v, '"', len - (i + nl + 2));
            size_t vl = end ? (size_t)(end - v) : 0, at = strlen(out);
            if (vl > 0 && at + vl + 2 <= outlen) {
                snprintf(out + at, outlen - at, "%s%.*s", at ? "," : "", (int)vl, v);
            }
            return;
        }
    }
}

/* Sum (waiting) or max (KV usage) of a metric over its label sets; and the
 * LoRA adapters vLLM says are running or waiting: its lora_requests_info
 * gauge, whose sample with the latest value (a timestamp) is the current. */
static void scan_metrics(const char *text, double *waiting, double *kv, char *lora, size_t lora_len,
                         bool *lora_seen)
{
    *waiting = 0;
    *kv = 0;
    *lora_seen = false;
    lora[0] = '\0';
    double lora_ts = -1;
    const char *p = text;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (len > 0 && *p != '#') {
            size_t nl = 0;
            while (nl < len && p[nl] != '{' && p[nl] != ' ') {
                nl++;
            }
            bool is_wait = name_is(p, nl, "vllm:num_requests_waiting");
            bool is_kv = name_is(p, nl, "vllm:kv_cache_usage_perc") ||
                         name_is(p, nl, "vllm:gpu_cache_usage_perc");
            bool is_lora = name_is(p, nl, "vllm:lora_requests_info");
            if (is_wait || is_kv || is_lora) {
                const char *v = p + len;
                while (v > p && v[-1] != ' ') {
                    v--;
                }
                char tmp[64];
                size_t vl = (size_t)(p + len - v);
                if (vl > 0 && vl < sizeof tmp) {
                    memcpy(tmp, v, vl);
                    tmp[vl] = '\0';
                    char *end = NULL;
                    double d = strtod(tmp, &end);
                    if (is_lora && end && (*end == '\0' || *end == '\r') && d > lora_ts) {
                        lora_ts = d;
                        *lora_seen = true;
                        lora[0] = '\0';
                        label_append(p, len, "running_lora_adapters", lora, lora_len);
                        label_append(p, len, "waiting_lora_adapters", lora, lora_len);
                    } else if (is_lora) {
                        /* an older sample */
                    } else if (end && (*end == '\0' || *end == '\r') && d >= 0 && d < 1e12) {
                        if (is_wait) {
                            *waiting += d;
                        } else if (d > *kv) {
                            *kv = d;
                        }
                    }
                }
            }
        }
        if (!eol) {
            break;
        }
        p = eol + 1;
    }
}

static void probe_one(gw *g, const gw_probe_target *t)
{
    gw_msg *m = cr_calloc(1, sizeof *m);
    m->kind = GW_MSG_PROBE;
    snprintf(m->service, sizeof m->service, "%s", t->service);
    snprintf(m->key, sizeof m->key, "%s", t->key);
    int status = 0;
    if (t->down) {
        int rc = http_get(t, t->ready_path, &status, NULL);
        m->ok = rc == 0 && status >= 200 && status < 400;
        cr_debug("gateway: probe service=%s replica=%s path=%s rc=%d status=%d", t->service, t->key,
                 t->ready_path, rc, status);
        if (!m->ok) {
            free(m);
            return;
        }
    } else if (t->scrape) {
        char *body = NULL;
        if (http_get(t, "/metrics", &status, &body) != 0 || status != 200) {
            free(body);
            free(m);
            return;
        }
        scan_metrics(body, &m->waiting, &m->kv_usage, m->lora, sizeof m->lora, &m->lora_seen);
        m->scraped = true;
        free(body);
    }
    gw_post(g, m);
}

static void *prober_main(void *arg)
{
    gw *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        size_t n = g->target_count;
        gw_probe_target *t = NULL;
        if (n) {
            t = cr_reallocarray(NULL, n, sizeof *t);
            memcpy(t, g->targets, n * sizeof *t);
        }
        pthread_mutex_unlock(&g->mu);
        for (size_t i = 0; i < n; i++) {
            probe_one(g, &t[i]);
        }
        free(t);
        pthread_mutex_lock(&g->mu);
        if (g->stop) {
            break;
        }
        cr_cond_wait_mono(&g->cond, &g->mu, cr_mono_ns() + g->conf->probe_interval_ns);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

int gw_prober_start(gw *g)
{
    if (pthread_create(&g->prober, NULL, prober_main, g) != 0) {
        return CR_EIO;
    }
    g->prober_started = true;
    return 0;
}
