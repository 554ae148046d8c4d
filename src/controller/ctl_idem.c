/*
 * ctl_idem.c - Idempotency-Key on POST /v1/jobs.
 *
 * A client that lost the answer to a submit retries with the same key (and
 * the same token): it gets the first answer back instead of a second set of
 * jobs. The answer is stored in the same transaction as the jobs (objects
 * kind "idem", key "<token id>:<key>"), so it exists exactly when the jobs
 * do, and survives a restart. Bounded: at most cfg.idem_max answers (the
 * oldest go first) for at most cfg.idem_ttl_s seconds (wall clock: the
 * expiry must survive a restart). A key reused with a different body
 * answers 409; a key whose first request is still being stored answers 409.
 *
 * All functions run with ctl->mu held.
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <stdio.h>
#include <string.h>

#define IDEM_BUCKETS 4096
#define IDEM_KEY_MAX 128

typedef struct idem_ent {
    char key[IDEM_KEY_MAX + 32];  /* "<token id>:<key>" */
    uint64_t hash;                /* of the request body */
    int64_t exp_ns;               /* wall clock */
    char *answer;                 /* owned; NULL while the first request is stored */
    struct idem_ent *bnext;       /* bucket chain */
    struct idem_ent *prev, *next; /* age order, oldest first */
} idem_ent;

struct ctl_idem {
    idem_ent *buckets[IDEM_BUCKETS];
    idem_ent *head, *tail;
    size_t n;
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

static idem_ent *find(struct ctl_idem *t, const char *k)
{
    for (idem_ent *e = t->buckets[bucket_of(k)]; e; e = e->bnext) {
        if (strcmp(e->key, k) == 0) {
            return e;
        }
    }
    return NULL;
}

static void unlink_ent(struct ctl_idem *t, idem_ent *e)
{
    idem_ent **pp = &t->buckets[bucket_of(e->key)];
    while (*pp && *pp != e) {
        pp = &(*pp)->bnext;
    }
    if (*pp) {
        *pp = e->bnext;
    }
    if (e->prev) {
        e->prev->next = e->next;
    } else {
        t->head = e->next;
    }
    if (e->next) {
        e->next->prev = e->prev;
    } else {
        t->tail = e->prev;
    }
    t->n--;
    free(e->answer);
    free(e);
}

static idem_ent *add(struct ctl_idem *t, const char *k, uint64_t hash, int64_t exp_ns)
{
    idem_ent *e = cr_calloc(1, sizeof *e);
    snprintf(e->key, sizeof e->key, "%s", k);
    e->hash = hash;
    e->exp_ns = exp_ns;
    size_t b = bucket_of(k);
    e->bnext = t->buckets[b];
    t->buckets[b] = e;
    e->prev = t->tail;
    if (t->tail) {
        t->tail->next = e;
    } else {
        t->head = e;
    }
    t->tail = e;
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
    if (!e) {
        add(t, k, hash, cr_now_ns() + c->cfg.idem_ttl_s * CR_NS_PER_SEC);
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
    /* The bound: the oldest answered keys go (and their rows with them). */
    for (idem_ent *o = t->head, *next; o && t->n > (size_t)c->cfg.idem_max; o = next) {
        next = o->next;
        if (o->answer) {
            cr_store_txn_del(txn, "idem", o->key);
            unlink_ent(t, o);
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
    for (idem_ent *e = t->head, *next; e; e = next) {
        next = e->next;
        if (e->answer && e->exp_ns <= now_wall) {
            cr_store_txn_del(txn, "idem", e->key);
            unlink_ent(t, e);
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
    if (answer && json_is_integer(h) && strlen(key) < IDEM_KEY_MAX + 32 && !find(tab(c), key)) {
        idem_ent *e = add(tab(c), key, (uint64_t)json_integer_value(h), exp);
        e->answer = cr_strdup(answer);
    }
    json_decref(v);
}

int ctl_load_idem(ctl *c)
{
    return cr_store_load_objects(c->store, "idem", load_row, c);
}

void ctl_idem_free(ctl *c)
{
    if (!c->idem) {
        return;
    }
    while (c->idem->head) {
        unlink_ent(c->idem, c->idem->head);
    }
    free(c->idem);
    c->idem = NULL;
}
