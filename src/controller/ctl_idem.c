/*
 * ctl_idem.c - Idempotency-Key on POST /v1/jobs.
 *
 * A client that lost the answer to a submit retries with the same key (and
 * the same token): it gets the first answer back instead of a second set of
 * jobs. The answer is stored in the same transaction as the jobs (objects
 * kind "idem", key "<token id>:<key>"), so it exists exactly when the jobs
 * do, and survives a restart. A key is a token's own: the same key sent
 * with another token is another key (a new job of that token, never the
 * first token's answer).
 *
 * Bounded per token, so that one tenant's keys can never push out
 * another's (issue 24: another tenant's 101 keyed submits evicted a key and
 * the owner's retry made a duplicate job): each token keeps at most
 * cfg.idem_max answers, its own oldest going first, for at most
 * cfg.idem_ttl_s seconds (wall clock: the expiry must survive a restart).
 * At most cfg.idem_tokens tokens have answers kept; past that the token
 * whose last keyed submit is the oldest loses its answers. Tokens are
 * minted by admins only, so a tenant cannot reach that second bound alone.
 * A key reused with a different body answers 409; a key whose first
 * request is still being stored answers 409.
 *
 * All functions run with ctl->mu held.
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IDEM_BUCKETS     4096
#define IDEM_TOK_BUCKETS 1024
#define IDEM_KEY_MAX     128

typedef struct idem_tok idem_tok;

typedef struct idem_ent {
    char key[IDEM_KEY_MAX + 32];  /* "<token id>:<key>" */
    uint64_t hash;                /* of the request body */
    int64_t exp_ns;               /* wall clock */
    char *answer;                 /* owned; NULL while the first request is stored */
    idem_tok *tok;                /* whose */
    struct idem_ent *bnext;       /* bucket chain */
    struct idem_ent *prev, *next; /* the token's own, age order, oldest first */
} idem_ent;

struct idem_tok {
    int64_t id;            /* token id */
    idem_ent *head, *tail; /* its answers, oldest first */
    size_t n;              /* of them */
    idem_tok *bnext;       /* bucket chain */
    idem_tok *prev, *next; /* tokens by last keyed submit, oldest first */
};

struct ctl_idem {
    idem_ent *buckets[IDEM_BUCKETS];
    idem_tok *tbuckets[IDEM_TOK_BUCKETS];
    idem_tok *thead, *ttail;
    size_t n;     /* answers */
    size_t ntoks; /* tokens with answers */
};

uint64_t ctl_idem_hash(const char *data, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)data[i];
        h *= 1099511628211ULL;
    }
    return h;
}

int ctl_idem_key_check(const char *key)
{
    size_t n = strlen(key);
    if (n == 0 || n > IDEM_KEY_MAX) {
        return CR_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (key[i] < 0x21 || key[i] > 0x7e) {
            return CR_EINVAL;
        }
    }
    return 0;
}

static struct ctl_idem *tab(ctl *c)
{
    if (!c->idem) {
        c->idem = cr_calloc(1, sizeof *c->idem);
    }
    return c->idem;
}

static size_t bucket_of(const char *k)
{
    return (size_t)(ctl_idem_hash(k, strlen(k)) % IDEM_BUCKETS);
}

static size_t tbucket_of(int64_t id)
{
    return (size_t)((uint64_t)id * 11400714819323198485ULL >> 54) % IDEM_TOK_BUCKETS;
}

static idem_ent *find(struct ctl_idem *t, const char *k)
{
    for (idem_ent *e = t->buckets[bucket_of(k)]; e; e = e->bnext) {
        if (strcmp(e->key, k) == 0) {
            return e;
        }
    }
    return NULL;
}

static idem_tok *tok_find(struct ctl_idem *t, int64_t id)
{
    for (idem_tok *g = t->tbuckets[tbucket_of(id)]; g; g = g->bnext) {
        if (g->id == id) {
            return g;
        }
    }
    return NULL;
}

static void tok_unlist(struct ctl_idem *t, idem_tok *g)
{
    if (g->prev) {
        g->prev->next = g->next;
    } else {
        t->thead = g->next;
    }
    if (g->next) {
        g->next->prev = g->prev;
    } else {
        t->ttail = g->prev;
    }
    g->prev = g->next = NULL;
}

static void tok_append(struct ctl_idem *t, idem_tok *g)
{
    g->prev = t->ttail;
    g->next = NULL;
    if (t->ttail) {
        t->ttail->next = g;
    } else {
        t->thead = g;
    }
    t->ttail = g;
}

/* The token's group, made when missing, and marked the newest used. */
static idem_tok *tok_touch(struct ctl_idem *t, int64_t id)
{
    idem_tok *g = tok_find(t, id);
    if (!g) {
        g = cr_calloc(1, sizeof *g);
        g->id = id;
        size_t b = tbucket_of(id);
        g->bnext = t->tbuckets[b];
        t->tbuckets[b] = g;
        t->ntoks++;
    } else {
        tok_unlist(t, g);
    }
    tok_append(t, g);
    return g;
}

static void tok_drop(struct ctl_idem *t, idem_tok *g)
{
    idem_tok **pp = &t->tbuckets[tbucket_of(g->id)];
    while (*pp && *pp != g) {
        pp = &(*pp)->bnext;
    }
    if (*pp) {
        *pp = g->bnext;
    }
    tok_unlist(t, g);
    t->ntoks--;
    free(g);
}

static void ent_unlist(idem_ent *e)
{
    idem_tok *g = e->tok;
    if (e->prev) {
        e->prev->next = e->next;
    } else {
        g->head = e->next;
    }
    if (e->next) {
        e->next->prev = e->prev;
    } else {
        g->tail = e->prev;
    }
    e->prev = e->next = NULL;
}

static void ent_append(idem_tok *g, idem_ent *e)
{
    e->tok = g;
    e->prev = g->tail;
    e->next = NULL;
    if (g->tail) {
        g->tail->next = e;
    } else {
        g->head = e;
    }
    g->tail = e;
}

/* Remove e; its token's group goes with its last answer. */
static void unlink_ent(struct ctl_idem *t, idem_ent *e)
{
    idem_ent **pp = &t->buckets[bucket_of(e->key)];
    while (*pp && *pp != e) {
        pp = &(*pp)->bnext;
    }
    if (*pp) {
        *pp = e->bnext;
    }
    idem_tok *g = e->tok;
    ent_unlist(e);
    g->n--;
    t->n--;
    if (g->n == 0) {
        tok_drop(t, g);
    }
    free(e->answer);
    free(e);
}

static idem_ent *add(struct ctl_idem *t, idem_tok *g, const char *k, uint64_t hash, int64_t exp_ns)
{
    idem_ent *e = cr_calloc(1, sizeof *e);
    snprintf(e->key, sizeof e->key, "%s", k);
    e->hash = hash;
    e->exp_ns = exp_ns;
    size_t b = bucket_of(k);
    e->bnext = t->buckets[b];
    t->buckets[b] = e;
    ent_append(g, e);
    g->n++;
    t->n++;
    return e;
}

static void full_key(char *out, size_t len, int64_t token_id, const char *key)
{
    snprintf(out, len, "%lld:%s", (long long)token_id, key);
}

ctl_idem_res ctl_idem_begin(ctl *c, int64_t token_id, const char *key, uint64_t hash, char **answer)
{
    struct ctl_idem *t = tab(c);
    char k[IDEM_KEY_MAX + 32];
    full_key(k, sizeof k, token_id, key);
    idem_ent *e = find(t, k);
    if (e && e->exp_ns <= cr_now_ns() && e->answer) {
        unlink_ent(t, e); /* expired: a new request (its row is replaced) */
        e = NULL;
    }
    idem_tok *g = tok_touch(t, token_id);
    if (!e) {
        add(t, g, k, hash, cr_now_ns() + c->cfg.idem_ttl_s * CR_NS_PER_SEC);
        return CTL_IDEM_NEW;
    }
    if (e->hash != hash) {
        return CTL_IDEM_MISMATCH;
    }
    if (!e->answer) {
        return CTL_IDEM_BUSY;
    }
    *answer = cr_strdup(e->answer);
    return CTL_IDEM_REPLAY;
}

/* Drop g's answered keys, oldest first, while it holds more than keep (and
 * their rows in txn). Keys still being stored stay. Returns whether g
 * itself went (its last answer with it). */
static bool trim_tok(struct ctl_idem *t, cr_store_txn *txn, idem_tok *g, size_t keep)
{
    size_t n = g->n;
    for (idem_ent *o = g->head, *next; o && n > keep; o = next) {
        next = o->next;
        if (o->answer) {
            cr_store_txn_del(txn, "idem", o->key);
            n--;
            if (n == 0) {
                unlink_ent(t, o); /* frees g */
                return true;
            }
            unlink_ent(t, o);
        }
    }
    return false;
}

void ctl_idem_persist(ctl *c, cr_store_txn *txn, int64_t token_id, const char *key,
                      const char *answer)
{
    struct ctl_idem *t = tab(c);
    char k[IDEM_KEY_MAX + 32];
    full_key(k, sizeof k, token_id, key);
    idem_ent *e = find(t, k);
    if (!e) {
        return;
    }
    json_t *doc = json_pack("{s:s,s:I,s:I}", "answer", answer, "hash", (json_int_t)e->hash,
                            "exp_ns", (json_int_t)e->exp_ns);
    char *s = json_dumps(doc, JSON_COMPACT);
    cr_store_txn_put(txn, "idem", k, s);
    free(s);
    json_decref(doc);
    /* The bounds: this token's own oldest answered keys go (and their rows
     * with them), never another token's; then, past idem_tokens tokens, the
     * answers of the token idle longest. */
    idem_tok *g = e->tok;
    trim_tok(t, txn, g, (size_t)c->cfg.idem_max);
    for (idem_tok *o = t->thead, *next; o && t->ntoks > (size_t)c->cfg.idem_tokens; o = next) {
        next = o->next;
        if (o != g) {
            trim_tok(t, txn, o, 0);
        }
    }
}

void ctl_idem_done(ctl *c, int64_t token_id, const char *key, const char *answer)
{
    struct ctl_idem *t = tab(c);
    char k[IDEM_KEY_MAX + 32];
    full_key(k, sizeof k, token_id, key);
    idem_ent *e = find(t, k);
    if (!e || e->answer) {
        return;
    }
    if (!answer) {
        unlink_ent(t, e); /* not stored: the key is free again */
    } else {
        e->answer = cr_strdup(answer);
    }
}

void ctl_idem_expire(ctl *c, cr_store_txn *txn, int64_t now_wall)
{
    if (!c->idem) {
        return;
    }
    struct ctl_idem *t = c->idem;
    for (idem_tok *g = t->thead, *gnext; g; g = gnext) {
        gnext = g->next;
        size_t n = g->n;
        for (idem_ent *e = g->head, *next; e; e = next) {
            next = e->next;
            if (e->answer && e->exp_ns <= now_wall) {
                cr_store_txn_del(txn, "idem", e->key);
                if (--n == 0) {
                    unlink_ent(t, e); /* frees g */
                    break;
                }
                unlink_ent(t, e);
            }
        }
    }
}

static void load_row(void *arg, const char *key, const char *doc)
{
    ctl *c = arg;
    json_t *v = json_loads(doc, 0, NULL);
    const char *answer = json_string_value(json_object_get(v, "answer"));
    json_t *h = json_object_get(v, "hash");
    int64_t exp = (int64_t)json_integer_value(json_object_get(v, "exp_ns"));
    char *end = NULL;
    long long tid = strtoll(key, &end, 10);
    if (answer && json_is_integer(h) && end != key && *end == ':' &&
        strlen(key) < IDEM_KEY_MAX + 32 && !find(tab(c), key)) {
        idem_ent *e =
            add(tab(c), tok_touch(tab(c), (int64_t)tid), key, (uint64_t)json_integer_value(h), exp);
        e->answer = cr_strdup(answer);
    }
    json_decref(v);
}

static int by_exp(const void *a, const void *b)
{
    const idem_ent *x = *(idem_ent *const *)a, *y = *(idem_ent *const *)b;
    if (x->exp_ns != y->exp_ns) {
        return x->exp_ns < y->exp_ns ? -1 : 1;
    }
    return strcmp(x->key, y->key);
}

int ctl_load_idem(ctl *c)
{
    int rc = cr_store_load_objects(c->store, "idem", load_row, c);
    struct ctl_idem *t = tab(c);
    if (rc != 0 || t->n == 0) {
        return rc;
    }
    /* Rows come in key order; the bounds need age order (the expiry is the
     * submit time plus one TTL): each token's answers oldest first, tokens
     * by their newest answer. */
    idem_ent **all = cr_calloc(t->n, sizeof *all);
    size_t n = 0;
    for (idem_tok *g = t->thead; g; g = g->next) {
        for (idem_ent *e = g->head; e; e = e->next) {
            all[n++] = e;
        }
    }
    qsort(all, n, sizeof *all, by_exp);
    for (size_t i = 0; i < n; i++) {
        ent_unlist(all[i]);
    }
    for (size_t i = 0; i < n; i++) {
        idem_tok *g = all[i]->tok;
        ent_append(g, all[i]);
        tok_unlist(t, g);
        tok_append(t, g);
    }
    free(all);
    return 0;
}

void ctl_idem_free(ctl *c)
{
    if (!c->idem) {
        return;
    }
    while (c->idem->thead) {
        unlink_ent(c->idem, c->idem->thead->head);
    }
    free(c->idem);
    c->idem = NULL;
}
