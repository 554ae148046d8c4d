/*
 * ctl_keys.c - API keys of the inference gateway (docs/api.md, "API keys").
 *
 * A key belongs to one tenant and may be scoped to some of its services
 * and models, with per-key limits (requests/s, concurrent requests) the
 * gateways enforce, and an expiry. The key text ("crk_" + 43 base64url
 * characters, 32 random bytes) is shown once, at the create; only its
 * BLAKE2b-256 hash is stored (kind "apikey") and published.
 *
 * Gateways long-poll GET /v1/keys/published?version=V&wait=S for the list
 * of hashes they verify keys against (an admin's token sees every tenant's
 * keys, a user's its tenant's). Every create and revoke bumps the version
 * and answers the waiting polls at once, so a revoked key stops working on
 * every gateway within a round trip. The version starts from the wall clock
 * in milliseconds at load, so it never repeats across a restart.
 *
 * Gateways post the token usage they counted (deltas since their last
 * report) to POST /v1/keys/usage; it is added to each key's counters and
 * stored with the key. GET /v1/keys/usage sums them per key and tenant.
 *
 * Locking: everything here is under c->mu; store commits run under
 * c->admin_mu only, memory is changed once the commit succeeded.
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_auth.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_parse.h"
#include "cr_time.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#define KEY_SCOPE_MAX 64 /* services or models one key may name */

typedef struct ctl_key {
    int64_t id;                             /* key id */
    char tenant[CTL_NAME_MAX];              /* owner */
    char name[CTL_NAME_MAX];                /* human label */
    char hash[2 * CR_TOKEN_HASH_BYTES + 1]; /* hex BLAKE2b-256 of the key text */
    json_t *services;                       /* owned array of names; empty: all */
    json_t *models;                         /* owned array of model names; empty: all */
    double rps;                             /* requests per second per gateway; 0 none */
    int64_t concurrency;                    /* concurrent requests per gateway; 0 none */
    int64_t tpm;                            /* tokens per minute per gateway; 0 none */
    int64_t token_budget;                   /* tokens in all; 0 none */
    int64_t created_ns;                     /* wall */
    int64_t expires_ns;                     /* wall; 0 never */
    int64_t revoked_ns;                     /* wall; 0 live */
    uint64_t requests;                      /* counted by gateways */
    uint64_t prompt_tokens;                 /* ditto */
    uint64_t completion_tokens;             /* ditto */
} ctl_key;

typedef struct kpoll {
    cr_http_req *req;          /* deferred long-poll */
    int64_t deadline_ns;       /* monotonic */
    bool admin;                /* sees every tenant's keys */
    char tenant[CTL_NAME_MAX]; /* else this tenant's */
    struct kpoll *next;
} kpoll;

struct ctl_keys {
    ctl_key **keys; /* owned, by id */
    size_t count, cap;
    int64_t next_id;
    int64_t version; /* of the published list */
    kpoll *polls;    /* waiting gateways */
};

static struct ctl_keys *keys_of(ctl *c)
{
    if (!c->keys) {
        c->keys = cr_calloc(1, sizeof *c->keys);
        c->keys->next_id = 1;
        c->keys->version = cr_now_ns() / CR_NS_PER_MS;
    }
    return c->keys;
}

static void key_free(ctl_key *k)
{
    if (k) {
        json_decref(k->services);
        json_decref(k->models);
        free(k);
    }
}

static bool may_manage(const cr_principal *p, const ctl_key *k)
{
    return p->role == CR_ROLE_ADMIN || strcmp(p->tenant, k->tenant) == 0;
}

static json_t *key_json(const ctl_key *k, bool with_hash)
{
    char t1[64], t2[64], t3[64];
    json_t *v =
        json_pack("{s:I,s:s,s:s,s:O,s:O,s:f,s:I,s:s,s:s,s:s,s:b,s:b,s:I,s:I,s:I}", "id",
                  (json_int_t)k->id, "tenant", k->tenant, "name", k->name, "services", k->services,
                  "models", k->models, "rps", k->rps, "concurrency", (json_int_t)k->concurrency,
                  "created", ctl_time_str(k->created_ns, t1, sizeof t1), "expires",
                  ctl_time_str(k->expires_ns, t2, sizeof t2), "revoked",
                  ctl_time_str(k->revoked_ns, t3, sizeof t3), "active",
                  k->revoked_ns == 0 && (k->expires_ns == 0 || k->expires_ns > cr_now_ns()),
                  "expired", k->expires_ns != 0 && k->expires_ns <= cr_now_ns(), "requests",
                  (json_int_t)k->requests, "prompt_tokens", (json_int_t)k->prompt_tokens,
                  "completion_tokens", (json_int_t)k->completion_tokens);
    json_object_set_new(v, "tpm", json_integer(k->tpm));
    json_object_set_new(v, "token_budget", json_integer(k->token_budget));
    if (with_hash) {
        json_object_set_new(v, "hash", json_string(k->hash));
    }
    return v;
}

/* The stored row. */
static char *key_row(const ctl_key *k)
{
    json_t *v = json_pack(
        "{s:I,s:s,s:s,s:s,s:O,s:O,s:f,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "id", (json_int_t)k->id,
        "tenant", k->tenant, "name", k->name, "hash", k->hash, "services", k->services, "models",
        k->models, "rps", k->rps, "concurrency", (json_int_t)k->concurrency, "created_ns",
        (json_int_t)k->created_ns, "expires_ns", (json_int_t)k->expires_ns, "revoked_ns",
        (json_int_t)k->revoked_ns, "requests", (json_int_t)k->requests, "prompt_tokens",
        (json_int_t)k->prompt_tokens, "completion_tokens", (json_int_t)k->completion_tokens);
    json_object_set_new(v, "tpm", json_integer(k->tpm));
    json_object_set_new(v, "token_budget", json_integer(k->token_budget));
    char *s = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    return s;
}

static void key_store_key(int64_t id, char *buf, size_t len)
{
    snprintf(buf, len, "%012lld", (long long)id);
}

static ctl_key *key_find(struct ctl_keys *ks, int64_t id)
{
    for (size_t i = 0; i < ks->count; i++) {
        if (ks->keys[i]->id == id) {
            return ks->keys[i];
        }
    }
    return NULL;
}

/* The published list for one reader: live keys (expired ones too: the
 * gateways check the expiry themselves, so it needs no version bump). */
static json_t *published_doc(struct ctl_keys *ks, bool admin, const char *tenant)
{
    json_t *items = json_array();
    for (size_t i = 0; i < ks->count; i++) {
        const ctl_key *k = ks->keys[i];
        if (k->revoked_ns || (!admin && strcmp(k->tenant, tenant) != 0)) {
            continue;
        }
        json_t *e =
            json_pack("{s:I,s:s,s:s,s:s,s:O,s:O,s:f,s:I,s:I}", "id", (json_int_t)k->id, "tenant",
                      k->tenant, "name", k->name, "hash", k->hash, "services", k->services,
                      "models", k->models, "rps", k->rps, "concurrency", (json_int_t)k->concurrency,
                      "expires_at_ms", (json_int_t)(k->expires_ns / CR_NS_PER_MS));
        if (k->tpm > 0) {
            json_object_set_new(e, "tpm", json_integer(k->tpm));
        }
        if (k->token_budget > 0) {
            /* the count as stored: each gateway adds what it counts since */
            json_object_set_new(e, "token_budget", json_integer(k->token_budget));
            json_object_set_new(
                e, "tokens_used",
                json_integer((json_int_t)(k->prompt_tokens + k->completion_tokens)));
        }
        json_array_append_new(items, e);
    }
    return json_pack("{s:I,s:o}", "version", (json_int_t)ks->version, "keys", items);
}

/* Answer the waiting gateways: all, or those past their deadline. mu held. */
static void answer_polls(ctl *c, bool expired_only, int64_t now_mono)
{
    struct ctl_keys *ks = keys_of(c);
    kpoll **pp = &ks->polls;
    while (*pp) {
        kpoll *q = *pp;
        if (expired_only && q->deadline_ns > now_mono) {
            pp = &q->next;
            continue;
        }
        *pp = q->next;
        ctl_reply_json(q->req, 200, published_doc(ks, q->admin, q->tenant));
        free(q);
    }
}

void ctl_keys_tick(ctl *c, int64_t now_mono)
{
    answer_polls(c, true, now_mono);
}

void ctl_keys_release_polls(ctl *c)
{
    pthread_mutex_lock(&c->mu);
    answer_polls(c, false, 0);
    pthread_mutex_unlock(&c->mu);
}

void ctl_keys_free(ctl *c)
{
    struct ctl_keys *ks = c->keys;
    if (!ks) {
        return;
    }
    for (size_t i = 0; i < ks->count; i++) {
        key_free(ks->keys[i]);
    }
    free(ks->keys);
    while (ks->polls) {
        kpoll *q = ks->polls;
        ks->polls = q->next;
        free(q);
    }
    free(ks);
    c->keys = NULL;
}

/* A list of names (services or models): strings of 1..127 printable bytes
 * without quotes, backslashes or commas, at most KEY_SCOPE_MAX. Returns a
 * new array or NULL with err set. */
static json_t *name_list(const json_t *v, const char *field, cr_json_err *err)
{
    json_t *a = json_object_get(v, field);
    if (!a) {
        return json_array();
    }
    if (!json_is_array(a) || json_array_size(a) > KEY_SCOPE_MAX) {
        cr_json_fail(err, CR_EINVAL, field, "field '%s': an array of at most %d names", field,
                     KEY_SCOPE_MAX);
        return NULL;
    }
    size_t i;
    json_t *x;
    json_array_foreach(a, i, x)
    {
        const char *s = json_string_value(x);
        size_t n = s ? strlen(s) : 0;
        bool ok = n > 0 && n < 128;
        for (size_t j = 0; ok && j < n; j++) {
            ok = s[j] > ' ' && s[j] != 0x7f && s[j] != '"' && s[j] != '\\' && s[j] != ',';
        }
        if (!ok) {
            cr_json_fail(err, CR_EINVAL, field,
                         "field '%s[%zu]': a name of 1..127 printable characters without spaces, "
                         "quotes or commas",
                         field, i);
            return NULL;
        }
    }
    return json_copy(a);
}

static void key_create(ctl *c, cr_http_req *req, const cr_principal *p)
{
    size_t len;
    const char *body = cr_http_body(req, &len);
    json_t *v = NULL;
    cr_json_err err;
    static const char *const members[] = {"tenant",       "name",        "services", "models",
                                          "rps",          "concurrency", "tpm",      "token_budget",
                                          "expires_in_s", NULL};
    const char *tenant = p->role == CR_ROLE_USER ? p->tenant : "", *name = "";
    double rps = 0;
    int64_t conc = 0, expires_in = 0, tpm = 0, budget = 0;
    json_t *services = NULL, *models = NULL;
    if (cr_json_parse_object(body, len, &v, &err) || cr_json_only(v, "", members, &err) ||
        cr_json_str(v, "", "tenant", false, CTL_NAME_MAX - 1, &tenant, &err) ||
        cr_json_str(v, "", "name", false, CTL_NAME_MAX - 1, &name, &err) ||
        cr_json_num(v, "", "rps", false, 0, 1e6, &rps, &err) ||
        cr_json_int(v, "", "concurrency", false, 0, 1000000, &conc, &err) ||
        cr_json_int(v, "", "tpm", false, 0, 1000000000, &tpm, &err) ||
        cr_json_int(v, "", "token_budget", false, 0, 1000000000000000LL, &budget, &err) ||
        cr_json_int(v, "", "expires_in_s", false, 0, 100LL * 365 * 86400, &expires_in, &err) ||
        !(services = name_list(v, "services", &err)) || !(models = name_list(v, "models", &err))) {
        goto bad;
    }
    if (p->role == CR_ROLE_USER && strcmp(tenant, p->tenant) != 0) {
        cr_json_fail(&err, CR_EPERM, "tenant",
                     "field 'tenant': a user token makes keys of its "
                     "own tenant only");
        goto bad;
    }
    if (!ctl_name_ok(tenant)) {
        cr_json_fail(&err, CR_EINVAL, "tenant",
                     "field 'tenant': a key needs a tenant (letters, digits, -_.)");
        goto bad;
    }
    if (!ctl_text_clean(name)) {
        cr_json_fail(&err, CR_EINVAL, "name", "field 'name': control characters are not allowed");
        goto bad;
    }
    ctl_key *k = cr_calloc(1, sizeof *k);
    snprintf(k->tenant, sizeof k->tenant, "%s", tenant);
    snprintf(k->name, sizeof k->name, "%s", *name ? name : "key");
    k->services = services;
    k->models = models;
    k->rps = rps;
    k->concurrency = conc;
    k->tpm = tpm;
    k->token_budget = budget;
    k->created_ns = cr_now_ns();
    k->expires_ns = expires_in ? k->created_ns + expires_in * CR_NS_PER_SEC : 0;
    json_decref(v);
    char text[CR_TOKEN_TEXT_MAX];
    uint8_t hash[CR_TOKEN_HASH_BYTES];
    cr_auth_mint(text, hash);
    text[2] = 'k'; /* "crk_": a gateway key, told apart from API tokens at a glance */
    cr_auth_hash(text, hash);
    cr_auth_hash_hex(hash, k->hash);

    pthread_mutex_lock(&c->admin_mu);
    pthread_mutex_lock(&c->mu);
    struct ctl_keys *ks = keys_of(c);
    if (!ctl_tenant_find(c, k->tenant)) {
        pthread_mutex_unlock(&c->mu);
        pthread_mutex_unlock(&c->admin_mu);
        ctl_reply_err(req, 404, CR_ENOENT, "tenant",
                      "field 'tenant': tenant '%s' does not exist (create it first: POST "
                      "/v1/tenants)",
                      k->tenant);
        key_free(k);
        return;
    }
    k->id = ks->next_id++;
    pthread_mutex_unlock(&c->mu);
    cr_store_txn *txn = cr_store_txn_new();
    char sk[32];
    key_store_key(k->id, sk, sizeof sk);
    char *row = key_row(k);
    cr_store_txn_put(txn, "apikey", sk, row);
    free(row);
    /* Usable only once stored: a refused create leaves no working key. */
    int rc = cr_store_commit(c->store, txn);
    if (rc != 0) {
        pthread_mutex_unlock(&c->admin_mu);
        key_free(k);
        ctl_reply_commit_err(req, rc);
        return;
    }
    pthread_mutex_lock(&c->mu);
    CR_GROW(ks->keys, ks->count, ks->cap);
    ks->keys[ks->count++] = k;
    ks->version++;
    json_t *ans = key_json(k, false);
    answer_polls(c, false, 0);
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_unlock(&c->admin_mu);
    json_object_set_new(ans, "key", json_string(text));
    sodium_memzero(text, sizeof text);
    ctl_reply_json(req, 201, ans);
    return;
bad:
    json_decref(v);
    json_decref(services);
    json_decref(models);
    ctl_reply_jerr(req, &err);
}

static void key_revoke(ctl *c, cr_http_req *req, const cr_principal *p, const char *idtext)
{
    int64_t id;
    pthread_mutex_lock(&c->admin_mu);
    pthread_mutex_lock(&c->mu);
    struct ctl_keys *ks = keys_of(c);
    ctl_key *k = cr_parse_i64(idtext, 1, INT64_MAX / 2, &id) == 0 ? key_find(ks, id) : NULL;
    if (!k || !may_manage(p, k)) {
        pthread_mutex_unlock(&c->mu);
        pthread_mutex_unlock(&c->admin_mu);
        ctl_reply_err(req, 404, CR_ENOENT, NULL, "key '%s' not found", idtext);
        return;
    }
    if (k->revoked_ns) {
        json_t *ans = key_json(k, false);
        pthread_mutex_unlock(&c->mu);
        pthread_mutex_unlock(&c->admin_mu);
        ctl_reply_json(req, 200, ans);
        return;
    }
    ctl_key tmp = *k;
    tmp.revoked_ns = cr_now_ns();
    char *row = key_row(&tmp);
    pthread_mutex_unlock(&c->mu);
    cr_store_txn *txn = cr_store_txn_new();
    char sk[32];
    key_store_key(id, sk, sizeof sk);
    cr_store_txn_put(txn, "apikey", sk, row);
    free(row);
    int rc = cr_store_commit(c->store, txn);
    if (rc != 0) {
        pthread_mutex_unlock(&c->admin_mu);
        ctl_reply_commit_err(req, rc);
        return;
    }
    pthread_mutex_lock(&c->mu);
    k->revoked_ns = tmp.revoked_ns;
    ks->version++;
    json_t *ans = key_json(k, false);
    answer_polls(c, false, 0);
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_unlock(&c->admin_mu);
    cr_info("key %lld of tenant %s revoked by token '%s'", (long long)id, k->tenant, p->name);
    ctl_reply_json(req, 200, ans);
}

/* POST /v1/keys/usage {"items":[{"id","requests","prompt_tokens","completion_tokens"}]}:
 * deltas a gateway counted; keys of other tenants (user token) are skipped. */
static void usage_post(ctl *c, cr_http_req *req, const cr_principal *p)
{
    size_t len;
    const char *body = cr_http_body(req, &len);
    json_t *v = NULL;
    cr_json_err err;
    json_t *items = NULL;
    if (cr_json_parse_object(body, len, &v, &err) ||
        cr_json_arr(v, "", "items", true, 10000, &items, &err)) {
        json_decref(v);
        ctl_reply_jerr(req, &err);
        return;
    }
    static const char *const members[] = {"id", "requests", "prompt_tokens", "completion_tokens",
                                          NULL};
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        char path[32];
        snprintf(path, sizeof path, "items[%zu]", i);
        int64_t id, rq = 0, pt = 0, ct = 0;
        if (cr_json_only(it, path, members, &err) ||
            cr_json_int(it, path, "id", true, 1, INT64_MAX / 2, &id, &err) ||
            cr_json_int(it, path, "requests", false, 0, INT64_MAX / 4, &rq, &err) ||
            cr_json_int(it, path, "prompt_tokens", false, 0, INT64_MAX / 4, &pt, &err) ||
            cr_json_int(it, path, "completion_tokens", false, 0, INT64_MAX / 4, &ct, &err)) {
            json_decref(v);
            ctl_reply_jerr(req, &err);
            return;
        }
    }
    pthread_mutex_lock(&c->admin_mu);
    pthread_mutex_lock(&c->mu);
    struct ctl_keys *ks = keys_of(c);
    cr_store_txn *txn = cr_store_txn_new();
    size_t counted = 0, crossed = 0;
    json_array_foreach(items, i, it)
    {
        ctl_key *k = key_find(ks, json_integer_value(json_object_get(it, "id")));
        if (!k || !may_manage(p, k)) {
            continue;
        }
        uint64_t was = k->prompt_tokens + k->completion_tokens;
        k->requests += (uint64_t)json_integer_value(json_object_get(it, "requests"));
        k->prompt_tokens += (uint64_t)json_integer_value(json_object_get(it, "prompt_tokens"));
        k->completion_tokens +=
            (uint64_t)json_integer_value(json_object_get(it, "completion_tokens"));
        uint64_t now = k->prompt_tokens + k->completion_tokens;
        if (k->token_budget > 0 && was < (uint64_t)k->token_budget &&
            now >= (uint64_t)k->token_budget) {
            crossed++; /* every gateway is told: the key's budget is spent */
        }
        char sk[32];
        key_store_key(k->id, sk, sizeof sk);
        char *row = key_row(k);
        cr_store_txn_put(txn, "apikey", sk, row);
        free(row);
        counted++;
    }
    pthread_mutex_unlock(&c->mu);
    /* Counted in memory first: a failed commit loses at most this report
     * after a restart, and the next one stores the sums again. */
    int rc = counted ? cr_store_commit(c->store, txn) : (cr_store_txn_free(txn), 0);
    if (crossed) {
        /* A budget spent: a new list for every gateway (with the counts as
         * stored), so that none goes on serving the key on its own count. */
        pthread_mutex_lock(&c->mu);
        ks->version++;
        answer_polls(c, false, 0);
        pthread_mutex_unlock(&c->mu);
    }
    pthread_mutex_unlock(&c->admin_mu);
    json_decref(v);
    if (rc != 0) {
        cr_warn("key usage: cannot store: %s", cr_strerror(rc));
    }
    ctl_reply_json(req, 200, json_pack("{s:I}", "counted", (json_int_t)counted));
}

/* GET /v1/keys/usage: per key, then per tenant. */
static void usage_get(ctl *c, cr_http_req *req, const cr_principal *p)
{
    json_t *keys = json_array(), *tenants = json_object();
    pthread_mutex_lock(&c->mu);
    struct ctl_keys *ks = keys_of(c);
    for (size_t i = 0; i < ks->count; i++) {
        const ctl_key *k = ks->keys[i];
        if (!may_manage(p, k)) {
            continue;
        }
        json_array_append_new(
            keys, json_pack("{s:I,s:s,s:s,s:I,s:I,s:I,s:I}", "id", (json_int_t)k->id, "tenant",
                            k->tenant, "name", k->name, "requests", (json_int_t)k->requests,
                            "prompt_tokens", (json_int_t)k->prompt_tokens, "completion_tokens",
                            (json_int_t)k->completion_tokens, "total_tokens",
                            (json_int_t)(k->prompt_tokens + k->completion_tokens)));
        json_t *t = json_object_get(tenants, k->tenant);
        if (!t) {
            t = json_pack("{s:s,s:I,s:I,s:I,s:I}", "tenant", k->tenant, "requests", 0LL,
                          "prompt_tokens", 0LL, "completion_tokens", 0LL, "total_tokens", 0LL);
            json_object_set_new(tenants, k->tenant, t);
        }
        static const char *const f[] = {"requests", "prompt_tokens", "completion_tokens"};
        uint64_t add[] = {k->requests, k->prompt_tokens, k->completion_tokens};
        for (int j = 0; j < 3; j++) {
            json_object_set_new(
                t, f[j],
                json_integer(json_integer_value(json_object_get(t, f[j])) + (json_int_t)add[j]));
        }
        json_object_set_new(
            t, "total_tokens",
            json_integer(json_integer_value(json_object_get(t, "prompt_tokens")) +
                         json_integer_value(json_object_get(t, "completion_tokens"))));
    }
    pthread_mutex_unlock(&c->mu);
    json_t *tl = json_array();
    const char *tk;
    json_t *tv;
    json_object_foreach(tenants, tk, tv)
    {
        json_array_append(tl, tv);
    }
    json_decref(tenants);
    ctl_reply_json(req, 200, json_pack("{s:o,s:o}", "keys", keys, "tenants", tl));
}

static void published(ctl *c, cr_http_req *req, const cr_principal *p)
{
    const char *qv = cr_http_query(req, "version");
    const char *qw = cr_http_query(req, "wait");
    int64_t version = -1, wait = 0;
    if (qv && cr_parse_i64(qv, -1, INT64_MAX, &version) != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "version", "query 'version': an integer >= -1");
        return;
    }
    if (qw && cr_parse_i64(qw, 0, 300, &wait) != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "wait", "query 'wait': an integer 0..300");
        return;
    }
    bool admin = p->role == CR_ROLE_ADMIN;
    pthread_mutex_lock(&c->mu);
    struct ctl_keys *ks = keys_of(c);
    if (version != ks->version || wait == 0 || c->stopping) {
        json_t *doc = published_doc(ks, admin, p->tenant);
        pthread_mutex_unlock(&c->mu);
        ctl_reply_json(req, 200, doc);
        return;
    }
    kpoll *q = cr_calloc(1, sizeof *q);
    q->req = req;
    q->deadline_ns = cr_mono_ns() + wait * CR_NS_PER_SEC;
    q->admin = admin;
    snprintf(q->tenant, sizeof q->tenant, "%s", p->tenant);
    q->next = ks->polls;
    ks->polls = q;
    cr_http_defer(req);
    pthread_mutex_unlock(&c->mu);
}

void ctl_route_keys(ctl *c, cr_http_req *req, const cr_principal *p, char **seg, size_t nseg)
{
    const char *m = cr_http_method(req);
    cr_http_set_route(req, nseg == 2 ? "/v1/keys" : "/v1/keys/{id}");
    if (p->role != CR_ROLE_ADMIN && p->role != CR_ROLE_USER) {
        ctl_reply_err(req, 403, CR_EPERM, NULL, "role '%s' may not use /v1/keys",
                      cr_role_name(p->role));
        return;
    }
    if (nseg == 2 && strcmp(m, "POST") == 0) {
        key_create(c, req, p);
        return;
    }
    if (nseg == 2 && strcmp(m, "GET") == 0) {
        json_t *items = json_array();
        pthread_mutex_lock(&c->mu);
        struct ctl_keys *ks = keys_of(c);
        for (size_t i = 0; i < ks->count; i++) {
            if (may_manage(p, ks->keys[i])) {
                json_array_append_new(items, key_json(ks->keys[i], false));
            }
        }
        pthread_mutex_unlock(&c->mu);
        size_t n = json_array_size(items);
        ctl_reply_json(req, 200, json_pack("{s:o,s:I}", "items", items, "count", (json_int_t)n));
        return;
    }
    if (nseg == 3 && strcmp(seg[2], "published") == 0 && strcmp(m, "GET") == 0) {
        cr_http_set_route(req, "/v1/keys/published");
        published(c, req, p);
        return;
    }
    if (nseg == 3 && strcmp(seg[2], "usage") == 0) {
        cr_http_set_route(req, "/v1/keys/usage");
        if (strcmp(m, "POST") == 0) {
            usage_post(c, req, p);
        } else if (strcmp(m, "GET") == 0) {
            usage_get(c, req, p);
        } else {
            ctl_reply_err(req, 405, CR_ENOTSUP, NULL, "method %s not allowed here", m);
        }
        return;
    }
    if (nseg == 3 && strcmp(m, "GET") == 0) {
        int64_t id;
        pthread_mutex_lock(&c->mu);
        ctl_key *k =
            cr_parse_i64(seg[2], 1, INT64_MAX / 2, &id) == 0 ? key_find(keys_of(c), id) : NULL;
        json_t *ans = k && may_manage(p, k) ? key_json(k, false) : NULL;
        pthread_mutex_unlock(&c->mu);
        if (!ans) {
            ctl_reply_err(req, 404, CR_ENOENT, NULL, "key '%s' not found", seg[2]);
            return;
        }
        ctl_reply_json(req, 200, ans);
        return;
    }
    if (nseg == 3 && strcmp(m, "DELETE") == 0) {
        key_revoke(c, req, p, seg[2]);
        return;
    }
    ctl_reply_err(req, 405, CR_ENOTSUP, NULL, "method %s not allowed here", m);
}

static void load_key(void *arg, const char *key, const char *doc)
{
    (void)key;
    ctl *c = arg;
    struct ctl_keys *ks = keys_of(c);
    json_t *v = json_loads(doc, 0, NULL);
    const char *hash = json_string_value(json_object_get(v, "hash"));
    const char *tenant = json_string_value(json_object_get(v, "tenant"));
    if (!v || !hash || strlen(hash) != 2 * CR_TOKEN_HASH_BYTES || !tenant) {
        cr_warn("key row %s: unreadable; skipped", key);
        json_decref(v);
        return;
    }
    ctl_key *k = cr_calloc(1, sizeof *k);
    k->id = json_integer_value(json_object_get(v, "id"));
    snprintf(k->tenant, sizeof k->tenant, "%s", tenant);
    const char *nm = json_string_value(json_object_get(v, "name"));
    snprintf(k->name, sizeof k->name, "%s", nm ? nm : "key");
    snprintf(k->hash, sizeof k->hash, "%s", hash);
    json_t *sv = json_object_get(v, "services"), *mv = json_object_get(v, "models");
    k->services = json_is_array(sv) ? json_copy(sv) : json_array();
    k->models = json_is_array(mv) ? json_copy(mv) : json_array();
    k->rps = json_number_value(json_object_get(v, "rps"));
    k->concurrency = json_integer_value(json_object_get(v, "concurrency"));
    k->created_ns = json_integer_value(json_object_get(v, "created_ns"));
    k->expires_ns = json_integer_value(json_object_get(v, "expires_ns"));
    k->revoked_ns = json_integer_value(json_object_get(v, "revoked_ns"));
    k->requests = (uint64_t)json_integer_value(json_object_get(v, "requests"));
    k->prompt_tokens = (uint64_t)json_integer_value(json_object_get(v, "prompt_tokens"));
    k->completion_tokens = (uint64_t)json_integer_value(json_object_get(v, "completion_tokens"));
    k->tpm = json_integer_value(json_object_get(v, "tpm"));
    k->token_budget = json_integer_value(json_object_get(v, "token_budget"));
    json_decref(v);
    if (k->id >= ks->next_id) {
        ks->next_id = k->id + 1;
    }
    CR_GROW(ks->keys, ks->count, ks->cap);
    ks->keys[ks->count++] = k;
}

int ctl_load_keys(ctl *c)
{
    keys_of(c);
    return cr_store_load_objects(c->store, "apikey", load_key, c);
}
