/*
 * cr_ratelimit.c - token buckets in a bounded table: a chained hash over a
 * fixed pool of entries, threaded on an LRU list (cr_ratelimit.h).
 */
#include "cr_ratelimit.h"

#include "cr_alloc.h"
#include "cr_error.h"

#include <math.h>
#include <pthread.h>
#include <sodium.h>
#include <string.h>

#define NIL UINT32_MAX

typedef struct ent {
    uint64_t hash;   /* keyed hash of key */
    double tokens;   /* level at last_ns */
    int64_t last_ns; /* last refill */
    uint32_t chain;  /* next entry in the same hash slot, NIL: none */
    uint32_t prev;   /* LRU neighbours (prev: more recent), NIL: none */
    uint32_t next;   /* ... (next: less recent) */
    uint8_t klen;    /* key bytes */
    uint8_t key[CR_RL_KEY_MAX];
} ent;

struct cr_rl {
    pthread_mutex_t mu;                      /* guards everything below; a leaf lock */
    ent *ents;                               /* the pool: max entries, the first n in use */
    uint32_t max;                            /* pool size */
    uint32_t n;                              /* entries in use */
    uint32_t *slots;                         /* hash slots: first entry of each chain, NIL: none */
    uint64_t mask;                           /* slots - 1 (a power of two >= max) */
    uint32_t head;                           /* most recently used, NIL when empty */
    uint32_t tail;                           /* least recently used */
    uint64_t evicted;                        /* entries dropped for new keys */
    uint8_t seed[crypto_shorthash_KEYBYTES]; /* the hash key: random per table */
};

int cr_rl_new(size_t max_entries, cr_rl **out)
{
    if (max_entries < CR_RL_MIN_ENTRIES || max_entries > CR_RL_MAX_ENTRIES) {
        return CR_ERANGE;
    }
    if (sodium_init() < 0) {
        return CR_EIO;
    }
    cr_rl *t = cr_calloc(1, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
    t->max = (uint32_t)max_entries;
    t->ents = cr_calloc(max_entries, sizeof *t->ents);
    size_t nslots = 1;
    while (nslots < max_entries) {
        nslots <<= 1;
    }
    t->slots = cr_malloc(nslots * sizeof *t->slots);
    memset(t->slots, 0xff, nslots * sizeof *t->slots); /* NIL */
    t->mask = nslots - 1;
    t->head = t->tail = NIL;
    randombytes_buf(t->seed, sizeof t->seed);
    *out = t;
    return 0;
}

void cr_rl_free(cr_rl *t)
{
    if (!t) {
        return;
    }
    pthread_mutex_destroy(&t->mu);
    free(t->ents);
    free(t->slots);
    free(t);
}

static void lru_unlink(cr_rl *t, uint32_t i)
{
    ent *e = &t->ents[i];
    if (e->prev != NIL) {
        t->ents[e->prev].next = e->next;
    } else {
        t->head = e->next;
    }
    if (e->next != NIL) {
        t->ents[e->next].prev = e->prev;
    } else {
        t->tail = e->prev;
    }
    e->prev = e->next = NIL;
}

static void lru_push_front(cr_rl *t, uint32_t i)
{
    ent *e = &t->ents[i];
    e->prev = NIL;
    e->next = t->head;
    if (t->head != NIL) {
        t->ents[t->head].prev = i;
    }
    t->head = i;
    if (t->tail == NIL) {
        t->tail = i;
    }
}

/* Take entry i out of its hash chain. */
static void chain_unlink(cr_rl *t, uint32_t i)
{
    uint32_t *p = &t->slots[t->ents[i].hash & t->mask];
    while (*p != NIL && *p != i) {
        p = &t->ents[*p].chain;
    }
    if (*p == i) {
        *p = t->ents[i].chain;
    }
}

/* The entry for key, made (full) when missing: a fresh slot of the pool,
 * else the least recently used entry. Moved to the front of the LRU. */
static ent *lookup(cr_rl *t, const uint8_t *key, size_t len, double burst, int64_t now_ns)
{
    uint64_t h;
    crypto_shorthash((unsigned char *)&h, key, len, t->seed);
    uint32_t *slot = &t->slots[h & t->mask];
    for (uint32_t i = *slot; i != NIL; i = t->ents[i].chain) {
        ent *e = &t->ents[i];
        if (e->hash == h && e->klen == len && memcmp(e->key, key, len) == 0) {
            if (t->head != i) {
                lru_unlink(t, i);
                lru_push_front(t, i);
            }
            return e;
        }
    }
    uint32_t i;
    if (t->n < t->max) {
        i = t->n++;
    } else {
        i = t->tail;
        lru_unlink(t, i);
        chain_unlink(t, i);
        t->evicted++;
    }
    ent *e = &t->ents[i];
    e->hash = h;
    e->klen = (uint8_t)len;
    memcpy(e->key, key, len);
    e->tokens = burst;
    e->last_ns = now_ns;
    e->chain = *slot;
    *slot = i;
    lru_push_front(t, i);
    return e;
}

bool cr_rl_take(cr_rl *t, const void *key, size_t len, double rate, double burst, int64_t now_ns,
                unsigned *retry_s)
{
    if (len > CR_RL_KEY_MAX) {
        len = CR_RL_KEY_MAX; /* a caller's bug: still bounded */
    }
    bool ok;
    double need = 0;
    pthread_mutex_lock(&t->mu);
    ent *e = lookup(t, key, len, burst, now_ns);
    if (now_ns > e->last_ns) {
        e->tokens += (double)(now_ns - e->last_ns) * 1e-9 * rate;
        e->last_ns = now_ns;
    }
    if (e->tokens > burst) {
        e->tokens = burst; /* also when burst was lowered */
    }
    ok = e->tokens >= 1.0;
    if (ok) {
        e->tokens -= 1.0;
    } else {
        need = 1.0 - e->tokens;
    }
    pthread_mutex_unlock(&t->mu);
    if (!ok && retry_s) {
        double s = ceil(need / rate);
        *retry_s = s < 1 ? 1 : s > CR_RL_RETRY_MAX_S ? CR_RL_RETRY_MAX_S : (unsigned)s;
    }
    return ok;
}

void cr_rl_stats(cr_rl *t, size_t *entries, uint64_t *evicted)
{
    pthread_mutex_lock(&t->mu);
    *entries = t->n;
    *evicted = t->evicted;
    pthread_mutex_unlock(&t->mu);
}
