/*
 * gw_keys.c - the gateway as an inference platform's front door: API keys
 * (verified against the hashed list the controller publishes, docs/api.md
 * "API keys"), their scopes and per-key limits, the OpenAI-compatible
 * routes (/v1/chat/completions, /v1/completions, /v1/embeddings routed by
 * the body's "model"; /v1/models answered here), errors in OpenAI's shape,
 * and the token usage counted from the responses' "usage" objects.
 *
 * Everything here runs on the loop thread, except gw_ctl_parse_keys (the
 * controller client's threads) and the usage hand-off, under gw->mu.
 *
 * A presented key is hashed (BLAKE2b-256, as the controller stores it) and
 * looked up among the published hashes; the key text is never kept. Keys
 * are random 256-bit secrets, so a fast hash is enough.
 */
#include "gw_int.h"

#include "cr_alloc.h"
#include "cr_auth.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void gw_strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i]);
    }
    free(v);
}

void gw_key_free(gw_key *k)
{
    if (k) {
        gw_strv_free(k->services, k->service_count);
        gw_strv_free(k->models, k->model_count);
        free(k);
    }
}

void gw_msg_free(gw_msg *m)
{
    if (!m) {
        return;
    }
    free(m->endpoints);
    gw_strv_free(m->models, m->model_count);
    gw_strv_free(m->adapters, m->adapter_count);
    for (size_t i = 0; i < m->key_count; i++) {
        gw_key_free(m->keys[i]);
    }
    free(m->keys);
    free(m);
}

void gw_keys_free(gw *g)
{
    for (size_t i = 0; i < g->key_count; i++) {
        gw_key_free(g->keys[i]);
    }
    free(g->keys);
    g->keys = NULL;
    g->key_count = g->key_cap = 0;
    free(g->usage);
    g->usage = NULL;
}

/* An array of strings of 1..GW_MODEL_MAX-1 bytes into a new vector; false
 * when it is not one. */
static bool strv_from_json(const json_t *a, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!a) {
        return true;
    }
    if (!json_is_array(a) || json_array_size(a) > 1024) {
        return false;
    }
    char **v = cr_calloc(json_array_size(a) + 1, sizeof *v);
    size_t i;
    json_t *x;
    json_array_foreach(a, i, x)
    {
        const char *s = json_string_value(x);
        if (!s || !s[0] || strlen(s) >= GW_MODEL_MAX) {
            gw_strv_free(v, i);
            return false;
        }
        v[i] = cr_strdup(s);
    }
    *out = v;
    *n = json_array_size(a);
    return true;
}

int gw_ctl_parse_keys(const char *text, int64_t *version, gw_msg **out)
{
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr);
    if (!root) {
        cr_warn("gateway: published keys: %d:%d: %s", jerr.line, jerr.column, jerr.text);
        return CR_EPARSE;
    }
    json_t *v = json_object_get(root, "version");
    json_t *keys = json_object_get(root, "keys");
    if (!json_is_integer(v) || !json_is_array(keys)) {
        cr_warn("gateway: published keys: want {\"version\":N,\"keys\":[...]}");
        json_decref(root);
        return CR_EPARSE;
    }
    gw_msg *m = cr_calloc(1, sizeof *m);
    m->kind = GW_MSG_KEYS;
    m->keys = cr_calloc(json_array_size(keys) + 1, sizeof *m->keys);
    size_t i;
    json_t *e;
    json_array_foreach(keys, i, e)
    {
        gw_key *k = cr_calloc(1, sizeof *k);
        const char *hash = json_string_value(json_object_get(e, "hash"));
        const char *tenant = json_string_value(json_object_get(e, "tenant"));
        json_t *id = json_object_get(e, "id");
        if (!json_is_integer(id) || !hash || cr_auth_hash_unhex(hash, k->hash) != 0 || !tenant ||
            strlen(tenant) >= sizeof k->tenant ||
            !strv_from_json(json_object_get(e, "services"), &k->services, &k->service_count) ||
            !strv_from_json(json_object_get(e, "models"), &k->models, &k->model_count)) {
            cr_warn("gateway: published keys: keys[%zu]: want id, hash, tenant; skipped", i);
            gw_key_free(k);
            continue;
        }
        k->id = json_integer_value(id);
        snprintf(k->tenant, sizeof k->tenant, "%s", tenant);
        double rps = json_number_value(json_object_get(e, "rps"));
        k->rps = rps > 0 && rps < 1e7 ? rps : 0;
        json_int_t conc = json_integer_value(json_object_get(e, "concurrency"));
        k->concurrency = conc > 0 && conc < 1000000000 ? (int32_t)conc : 0;
        k->expires_ms = json_integer_value(json_object_get(e, "expires_at_ms"));
        json_int_t tpm = json_integer_value(json_object_get(e, "tpm"));
        k->tpm = tpm > 0 && tpm <= 1000000000 ? tpm : 0;
        json_int_t budget = json_integer_value(json_object_get(e, "token_budget"));
        k->token_budget = budget > 0 ? budget : 0;
        json_int_t used = json_integer_value(json_object_get(e, "tokens_used"));
        k->used_base = used > 0 ? used : 0;
        m->keys[m->key_count++] = k;
    }
    *version = json_integer_value(v);
    *out = m;
    json_decref(root);
    return 0;
}

static void strv_move(char ***dst, size_t *dn, char ***src, size_t *sn)
{
    gw_strv_free(*dst, *dn);
    *dst = *src;
    *dn = *sn;
    *src = NULL;
    *sn = 0;
}

/* The new list: known keys keep their counters and buckets, new ones are
 * added, missing ones are revoked. */
void gw_keys_apply(gw *g, gw_msg *m)
{
    for (size_t i = 0; i < g->key_count; i++) {
        g->keys[i]->revoked = true;
    }
    for (size_t j = 0; j < m->key_count; j++) {
        gw_key *n = m->keys[j];
        gw_key *k = NULL;
        for (size_t i = 0; i < g->key_count && !k; i++) {
            if (g->keys[i]->id == n->id) {
                k = g->keys[i];
            }
        }
        if (!k) {
            CR_GROW(g->keys, g->key_count, g->key_cap);
            g->keys[g->key_count++] = n;
            m->keys[j] = NULL;
            n->bucket = n->rps > 1 ? n->rps : 1;
            n->bucket_ns = g->now_ns;
            n->tbucket = (double)n->tpm;
            n->tbucket_ns = g->now_ns;
            continue;
        }
        memcpy(k->hash, n->hash, sizeof k->hash);
        snprintf(k->tenant, sizeof k->tenant, "%s", n->tenant);
        strv_move(&k->services, &k->service_count, &n->services, &n->service_count);
        strv_move(&k->models, &k->model_count, &n->models, &n->model_count);
        k->rps = n->rps;
        k->concurrency = n->concurrency;
        k->expires_ms = n->expires_ms;
        if (k->tpm != n->tpm) {
            k->tpm = n->tpm;
            k->tbucket = (double)n->tpm;
            k->tbucket_ns = g->now_ns;
        }
        k->token_budget = n->token_budget;
        if (k->used_base != n->used_base) {
            /* a newer count from the controller (it holds what was
             * reported, this gateway's too): count afresh from it */
            k->used_base = n->used_base;
            k->used_local = 0;
        }
        k->revoked = false;
    }
    if (!g->keys_loaded) {
        cr_info("gateway: %zu API keys from the controller", m->key_count);
    }
    g->keys_loaded = true;
}

static gw_key *key_lookup(gw *g, const char *text)
{
    uint8_t h[CR_TOKEN_HASH_BYTES];
    cr_auth_hash(text, h);
    for (size_t i = 0; i < g->key_count; i++) {
        if (memcmp(g->keys[i]->hash, h, sizeof h) == 0) {
            return g->keys[i];
        }
    }
    return NULL;
}

static const char *type_of(int status)
{
    switch (status) {
    case 401:
        return "authentication_error";
    case 403:
        return "permission_error";
    case 404:
        return "not_found_error";
    case 429:
        return "rate_limit_error";
    default:
        return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

void gw_openai_error(gw_client *c, int status, int err, const char *type, const char *code,
                     const char *msg)
{
    gw *g = c->g;
    if (c->svc && err >= 0) {
        c->svc->errors[err]++;
    }
    char extra[96] = "";
    if (status == 503) {
        snprintf(extra, sizeof extra, "Retry-After: %d\r\n", (int)g->conf->retry_after_s);
    } else if (status == 401) {
        snprintf(extra, sizeof extra, "WWW-Authenticate: Bearer\r\n");
    }
    json_t *v = json_pack("{s:{s:s,s:s,s:s,s:n}}", "error", "message", msg, "type",
                          type ? type : type_of(status), "code", code, "param");
    char *body = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    size_t n = strlen(body);
    char *nl = cr_malloc(n + 2);
    memcpy(nl, body, n);
    nl[n] = '\n';
    nl[n + 1] = '\0';
    free(body);
    gw_client_local(c, status, extra, nl);
    free(nl);
}

/* A 429 with its Retry-After (whole seconds, at least 1; none for a spent
 * budget, which no wait refills: OpenAI's insufficient_quota). */
static void limited(gw_client *c, gw_key *k, int which, double wait_s, const char *msg)
{
    k->limited[which]++;
    int ra = (int)ceil(wait_s);
    if (ra < 1) {
        ra = 1;
    }
    char extra[64] = "";
    if (which != 3) {
        snprintf(extra, sizeof extra, "Retry-After: %d\r\n", ra);
    }
    const char *code = which == 3 ? "insufficient_quota" : "rate_limit_exceeded";
    json_t *v =
        json_pack("{s:{s:s,s:s,s:s,s:n}}", "error", "message", msg, "type",
                  which == 3 ? "insufficient_quota" : "rate_limit_error", "code", code, "param");
    char *body = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    gw_client_local(c, 429, extra, body);
    free(body);
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool gw_key_admit(gw_client *c, const cr_http_msg *m)
{
    gw *g = c->g;
    c->openai = true;
    if (!g->keys_loaded) {
        gw_openai_error(c, 503, -1, NULL, "keys_unavailable",
                        "the gateway has not loaded the API keys from the controller yet");
        return false;
    }
    const cr_http_header *h = cr_http_find(m, "authorization");
    char text[CR_TOKEN_TEXT_MAX + 8];
    bool bearer = h && h->value_len > 7 && cr_http_token_eq(h->value, 7, "bearer ");
    size_t tl = bearer ? h->value_len - 7 : 0;
    if (!h) {
        gw_openai_error(c, 401, GW_ERR_AUTH, NULL, "missing_api_key",
                        "an API key is required: Authorization: Bearer crk_...");
        return false;
    }
    if (!bearer || tl == 0 || tl >= sizeof text) {
        gw_openai_error(c, 401, GW_ERR_AUTH, NULL, "invalid_api_key",
                        "malformed Authorization header: want Bearer crk_...");
        return false;
    }
    memcpy(text, h->value + 7, tl);
    text[tl] = '\0';
    gw_key *k = key_lookup(g, text);
    memset(text, 0, sizeof text);
    if (!k || k->revoked) {
        gw_openai_error(c, 401, GW_ERR_AUTH, NULL, "invalid_api_key", "invalid or revoked API key");
        return false;
    }
    if (k->expires_ms && wall_ms() >= k->expires_ms) {
        gw_openai_error(c, 401, GW_ERR_AUTH, NULL, "expired_api_key", "the API key has expired");
        return false;
    }
    if (k->rps > 0) {
        double burst = k->rps > 1 ? k->rps : 1;
        k->bucket += (double)(g->now_ns - k->bucket_ns) / 1e9 * k->rps;
        if (k->bucket > burst) {
            k->bucket = burst;
        }
        k->bucket_ns = g->now_ns;
        if (k->bucket < 1) {
            limited(c, k, 0, (1 - k->bucket) / k->rps,
                    "the API key is over its limit of requests per second");
            return false;
        }
    }
    if (k->concurrency > 0 && k->active >= k->concurrency) {
        limited(c, k, 1, 1, "the API key is at its limit of concurrent requests");
        return false;
    }
    if (k->token_budget > 0 && k->used_base + (int64_t)k->used_local >= k->token_budget) {
        limited(c, k, 3, 0, "the API key has spent its token budget");
        return false;
    }
    if (k->tpm > 0) {
        /* Tokens are known only once the answer is in: each answer's
         * usage is taken from the bucket afterwards (it may go below
         * zero), and a request is admitted while the bucket holds any. */
        double rate = (double)k->tpm / 60.0;
        k->tbucket += (double)(g->now_ns - k->tbucket_ns) / 1e9 * rate;
        if (k->tbucket > (double)k->tpm) {
            k->tbucket = (double)k->tpm;
        }
        k->tbucket_ns = g->now_ns;
        if (k->tbucket <= 0) {
            limited(c, k, 2, (1 - k->tbucket) / rate,
                    "the API key is over its limit of tokens per minute");
            return false;
        }
    }
    if (k->rps > 0) {
        k->bucket -= 1;
    }
    k->active++;
    k->requests++;
    c->key = k;
    c->key_held = true;
    return true;
}

void gw_key_release(gw_client *c)
{
    if (c->key_held && c->key) {
        c->key->active--;
    }
    c->key_held = false;
    c->key = NULL;
    c->scan = false;
    c->win_len = 0;
}

static bool strv_has(char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(v[i], s) == 0) {
            return true;
        }
    }
    return false;
}

bool gw_key_may(const gw_client *c, const gw_service *s, const char *model)
{
    const gw_key *k = c->key;
    if (!k) {
        return true;
    }
    if (s->tenant[0] && strcmp(s->tenant, k->tenant) != 0) {
        return false;
    }
    if (k->service_count && !strv_has(k->services, k->service_count, s->name)) {
        return false;
    }
    if (k->model_count) {
        if (model) {
            return strv_has(k->models, k->model_count, model);
        }
        for (size_t i = 0; i < s->model_count; i++) {
            if (strv_has(k->models, k->model_count, s->models[i])) {
                return true;
            }
        }
        return false;
    }
    return true;
}

void gw_service_set_models(gw *g, gw_service *s, const char *tenant, char *const *models, size_t n)
{
    g->models_known |= n > 0;
    snprintf(s->tenant, sizeof s->tenant, "%s", tenant ? tenant : "");
    gw_strv_free(s->models, s->model_count);
    s->models = cr_calloc(n + 1, sizeof *s->models);
    for (size_t i = 0; i < n; i++) {
        s->models[i] = cr_strdup(models[i]);
    }
    s->model_count = n;
}

void gw_service_set_adapters(gw *g, gw_service *s, char *const *adapters, size_t n)
{
    if (n > GW_ADAPTER_MAX) {
        n = GW_ADAPTER_MAX; /* the config refuses more; a bound all the same */
    }
    g->models_known |= n > 0;
    bool same = n == s->adapter_count;
    for (size_t i = 0; same && i < n; i++) {
        same = strcmp(s->adapters[i], adapters[i]) == 0;
    }
    if (same) {
        return; /* a reload with the same list keeps the counters */
    }
    gw_strv_free(s->adapters, s->adapter_count);
    s->adapters = cr_calloc(n + 1, sizeof *s->adapters);
    for (size_t i = 0; i < n; i++) {
        s->adapters[i] = cr_strdup(adapters[i]);
    }
    s->adapter_count = n;
    memset(s->adapter_requests, 0, sizeof s->adapter_requests);
}

gw_service *gw_model_service(gw *g, const char *model, int *adapter)
{
    *adapter = -1;
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        if (strv_has(s->models, s->model_count, model)) {
            return s;
        }
    }
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        for (size_t j = 0; j < s->adapter_count; j++) {
            if (strcmp(s->adapters[j], model) == 0) {
                *adapter = (int)j;
                return s;
            }
        }
    }
    return NULL;
}

/* Append s to the prefix text, up to GW_PREFIX_BYTES. */
static void prefix_add(char *buf, size_t *n, const char *s)
{
    if (!s) {
        return;
    }
    size_t l = strlen(s);
    if (l > GW_PREFIX_BYTES - *n) {
        l = GW_PREFIX_BYTES - *n;
    }
    memcpy(buf + *n, s, l);
    *n += l;
}

/* The first string of a string or an array of strings. */
static const char *first_string(const json_t *v)
{
    return json_is_array(v) ? json_string_value(json_array_get(v, 0)) : json_string_value(v);
}

/*
 * The prompt's prefix, for affinity: its first GW_PREFIX_BYTES bytes (chat:
 * the messages' contents in order, text parts of multi-part contents too;
 * completions: prompt; embeddings: input) hashed, or 0 when shorter than
 * GW_PREFIX_MIN (too short for a cached prefix to matter). Requests that
 * share a long system prompt share this hash.
 */
static uint64_t prefix_hash(const json_t *v)
{
    char buf[GW_PREFIX_BYTES];
    size_t n = 0;
    json_t *msgs = json_object_get(v, "messages");
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        json_t *content = json_object_get(m, "content");
        if (json_is_string(content)) {
            prefix_add(buf, &n, json_string_value(content));
        } else if (json_is_array(content)) {
            size_t j;
            json_t *part;
            json_array_foreach(content, j, part)
            {
                prefix_add(buf, &n, json_string_value(json_object_get(part, "text")));
            }
        }
        if (n == GW_PREFIX_BYTES) {
            break;
        }
    }
    if (!msgs) {
        prefix_add(buf, &n, first_string(json_object_get(v, "prompt")));
        prefix_add(buf, &n, first_string(json_object_get(v, "input")));
    }
    if (n < GW_PREFIX_MIN) {
        return 0;
    }
    uint64_t h = 1469598103934665603ULL;
    for (size_t k = 0; k < n; k++) {
        h = (h ^ (uint8_t)buf[k]) * 1099511628211ULL;
    }
    return h ? h : 1;
}

int gw_body_model(const char *body, size_t len, char *out, size_t outlen, uint64_t *prefix)
{
    bool stream;
    return gw_body_model_stream(body, len, out, outlen, prefix, &stream);
}

int gw_body_model_stream(const char *body, size_t len, char *out, size_t outlen, uint64_t *prefix,
                         bool *stream)
{
    *stream = false;
    json_t *v = json_loadb(body, len, 0, NULL);
    if (!json_is_object(v)) {
        json_decref(v);
        return -1;
    }
    const char *mv = json_string_value(json_object_get(v, "model"));
    int rc = 0;
    if (mv && mv[0] && strlen(mv) < outlen) {
        snprintf(out, outlen, "%s", mv);
        rc = 1;
    }
    *prefix = rc == 1 ? prefix_hash(v) : 0;
    *stream = json_is_true(json_object_get(v, "stream"));
    json_decref(v);
    return rc;
}

void gw_models_answer(gw_client *c)
{
    gw *g = c->g;
    json_t *data = json_array();
    for (size_t i = 0; i < g->service_count; i++) {
        gw_service *s = g->services[i];
        for (size_t j = 0; j < s->model_count; j++) {
            if (!gw_key_may(c, s, s->models[j])) {
                continue;
            }
            json_array_append_new(data, json_pack("{s:s,s:s,s:i,s:s}", "id", s->models[j], "object",
                                                  "model", "created", 0, "owned_by",
                                                  s->tenant[0] ? s->tenant : "corral"));
        }
        /* LoRA adapters as vLLM lists them: with their base model as parent. */
        for (size_t j = 0; s->model_count && j < s->adapter_count; j++) {
            if (!gw_key_may(c, s, s->adapters[j])) {
                continue;
            }
            json_array_append_new(data, json_pack("{s:s,s:s,s:i,s:s,s:s,s:s}", "id", s->adapters[j],
                                                  "object", "model", "created", 0, "owned_by",
                                                  s->tenant[0] ? s->tenant : "corral", "parent",
                                                  s->models[0], "root", s->models[0]));
        }
    }
    json_t *v = json_pack("{s:s,s:o}", "object", "list", "data", data);
    char *body = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    gw_client_local(c, 200, NULL, body);
    free(body);
}

/* Keep the last GW_USAGE_WIN bytes of the response body: the usage object
 * comes last in OpenAI's answers and in the last event of a stream. */
void gw_usage_feed(gw_client *c, const char *data, size_t len)
{
    if (!c->scan || len == 0) {
        return;
    }
    if (!c->win) {
        c->win = cr_malloc(GW_USAGE_WIN);
    }
    if (len >= GW_USAGE_WIN) {
        memcpy(c->win, data + len - GW_USAGE_WIN, GW_USAGE_WIN);
        c->win_len = GW_USAGE_WIN;
        return;
    }
    if (c->win_len + len > GW_USAGE_WIN) {
        size_t drop = c->win_len + len - GW_USAGE_WIN;
        memmove(c->win, c->win + drop, c->win_len - drop);
        c->win_len -= drop;
    }
    memcpy(c->win + c->win_len, data, len);
    c->win_len += len;
}

static uint64_t count_of(const json_t *o, const char *k)
{
    json_int_t v = json_integer_value(json_object_get(o, k));
    return v > 0 ? (uint64_t)v : 0;
}

int gw_usage_parse(const char *win, size_t len, uint64_t *prompt, uint64_t *completion)
{
    static const char pat[] = "\"usage\"";
    const size_t pl = sizeof pat - 1;
    /* From the last "usage" back: the first one that is a whole object. */
    for (size_t at = len; at >= pl; at--) {
        size_t p = at - pl;
        if (memcmp(win + p, pat, pl) != 0) {
            continue;
        }
        size_t i = p + pl;
        while (i < len && (win[i] == ' ' || win[i] == '\t' || win[i] == '\r' || win[i] == '\n')) {
            i++;
        }
        if (i >= len || win[i] != ':') {
            continue;
        }
        i++;
        while (i < len && (win[i] == ' ' || win[i] == '\t' || win[i] == '\r' || win[i] == '\n')) {
            i++;
        }
        if (i >= len || win[i] != '{') {
            continue;
        }
        size_t start = i;
        int depth = 0;
        bool str = false, esc = false;
        for (; i < len; i++) {
            char ch = win[i];
            if (str) {
                if (esc) {
                    esc = false;
                } else if (ch == '\\') {
                    esc = true;
                } else if (ch == '"') {
                    str = false;
                }
                continue;
            }
            if (ch == '"') {
                str = true;
            } else if (ch == '{') {
                depth++;
            } else if (ch == '}' && --depth == 0) {
                break;
            }
        }
        if (i >= len) {
            continue;
        }
        json_t *o = json_loadb(win + start, i + 1 - start, 0, NULL);
        if (!json_is_object(o)) {
            json_decref(o);
            continue;
        }
        *prompt = count_of(o, "prompt_tokens");
        *completion = count_of(o, "completion_tokens");
        json_decref(o);
        return 0;
    }
    return -1;
}

void gw_usage_end(gw_client *c)
{
    if (!c->key || !c->win_len) {
        c->scan = false; /* scanned for the SLO signals alone (gw_slo.c) */
        c->win_len = 0;
        return;
    }
    if (!c->scan) {
        return;
    }
    uint64_t p = 0, q = 0;
    if (gw_usage_parse(c->win, c->win_len, &p, &q) == 0) {
        c->key->prompt_tokens += p;
        c->key->completion_tokens += q;
        c->key->used_local += p + q;
        if (c->key->tpm > 0) {
            c->key->tbucket -= (double)(p + q);
        }
    }
    c->scan = false;
    c->win_len = 0;
}

/* Hand the usage counted since the last call to the reporter. */
void gw_keys_publish_usage(gw *g)
{
    size_t n = 0;
    gw_key_usage *u = NULL;
    for (size_t i = 0; i < g->key_count; i++) {
        gw_key *k = g->keys[i];
        uint64_t now[3] = {k->requests, k->prompt_tokens, k->completion_tokens};
        if (now[0] == k->sent[0] && now[1] == k->sent[1] && now[2] == k->sent[2]) {
            continue;
        }
        u = cr_reallocarray(u, n + 1, sizeof *u);
        u[n++] = (gw_key_usage){.id = k->id,
                                .requests = now[0] - k->sent[0],
                                .prompt_tokens = now[1] - k->sent[1],
                                .completion_tokens = now[2] - k->sent[2]};
        memcpy(k->sent, now, sizeof now);
    }
    if (!n) {
        return;
    }
    pthread_mutex_lock(&g->mu);
    /* Merge with what the reporter has not taken yet. */
    for (size_t i = 0; i < n; i++) {
        bool merged = false;
        for (size_t j = 0; j < g->usage_count && !merged; j++) {
            if (g->usage[j].id == u[i].id) {
                g->usage[j].requests += u[i].requests;
                g->usage[j].prompt_tokens += u[i].prompt_tokens;
                g->usage[j].completion_tokens += u[i].completion_tokens;
                merged = true;
            }
        }
        if (!merged) {
            g->usage = cr_reallocarray(g->usage, g->usage_count + 1, sizeof *g->usage);
            g->usage[g->usage_count++] = u[i];
        }
    }
    pthread_mutex_unlock(&g->mu);
    free(u);
}

/* Label values: tenant names are [A-Za-z0-9._-] (the controller checks
 * them) and key ids are numbers, so they need no escaping. */
void gw_keys_metrics(gw *g, cr_buf *o)
{
    if (!g->require_keys && g->key_count == 0) {
        return;
    }
    if (!g->keys_loaded) {
        cr_buf_puts(o, "# HELP corral_gateway_keys_loaded Whether the API key list came from "
                       "the controller.\n# TYPE corral_gateway_keys_loaded gauge\n"
                       "corral_gateway_keys_loaded 0\n");
    }
    cr_buf_puts(o, "# HELP corral_gateway_key_requests_total Requests admitted per API key.\n"
                   "# TYPE corral_gateway_key_requests_total counter\n");
    for (size_t i = 0; i < g->key_count; i++) {
        gw_key *k = g->keys[i];
        cr_buf_printf(o, "corral_gateway_key_requests_total{tenant=\"%s\",key=\"%lld\"} %llu\n",
                      k->tenant, (long long)k->id, (unsigned long long)k->requests);
    }
    cr_buf_puts(o, "# HELP corral_gateway_key_limited_total Requests refused with 429 per API "
                   "key, by limit.\n# TYPE corral_gateway_key_limited_total counter\n");
    for (size_t i = 0; i < g->key_count; i++) {
        gw_key *k = g->keys[i];
        static const char *const names[4] = {"rps", "concurrency", "tpm", "budget"};
        for (int l = 0; l < 4; l++) {
            cr_buf_printf(
                o,
                "corral_gateway_key_limited_total{tenant=\"%s\",key=\"%lld\",limit=\"%s\"}"
                " %llu\n",
                k->tenant, (long long)k->id, names[l], (unsigned long long)k->limited[l]);
        }
    }
    cr_buf_puts(o, "# HELP corral_gateway_key_tokens_total Tokens per API key from the "
                   "responses' usage objects.\n# TYPE corral_gateway_key_tokens_total counter\n");
    for (size_t i = 0; i < g->key_count; i++) {
        gw_key *k = g->keys[i];
        cr_buf_printf(o,
                      "corral_gateway_key_tokens_total{tenant=\"%s\",key=\"%lld\",kind=\"prompt\"} "
                      "%llu\n"
                      "corral_gateway_key_tokens_total{tenant=\"%s\",key=\"%lld\",kind="
                      "\"completion\"} %llu\n",
                      k->tenant, (long long)k->id, (unsigned long long)k->prompt_tokens, k->tenant,
                      (long long)k->id, (unsigned long long)k->completion_tokens);
    }
    cr_buf_puts(o,
                "# HELP corral_gateway_tenant_tokens_total Tokens per tenant from the "
                "responses' usage objects.\n# TYPE corral_gateway_tenant_tokens_total counter\n");
    for (size_t i = 0; i < g->key_count; i++) {
        bool first = true;
        for (size_t j = 0; j < i && first; j++) {
            first = strcmp(g->keys[j]->tenant, g->keys[i]->tenant) != 0;
        }
        if (!first) {
            continue;
        }
        uint64_t p = 0, q = 0;
        for (size_t j = i; j < g->key_count; j++) {
            if (strcmp(g->keys[j]->tenant, g->keys[i]->tenant) == 0) {
                p += g->keys[j]->prompt_tokens;
                q += g->keys[j]->completion_tokens;
            }
        }
        cr_buf_printf(o,
                      "corral_gateway_tenant_tokens_total{tenant=\"%s\",kind=\"prompt\"} %llu\n"
                      "corral_gateway_tenant_tokens_total{tenant=\"%s\",kind=\"completion\"} "
                      "%llu\n",
                      g->keys[i]->tenant, (unsigned long long)p, g->keys[i]->tenant,
                      (unsigned long long)q);
    }
}
