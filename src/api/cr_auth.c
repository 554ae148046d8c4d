/*
 * cr_auth.c - token minting, hashing and the lookup table; see cr_auth.h.
 *
 * The table is open addressing over the hash (itself uniformly random), so
 * the slot index comes from the first 8 bytes; entries are compared in
 * full with sodium_memcmp.
 */
#include "cr_auth.h"

#include "cr_alloc.h"
#include "cr_error.h"

#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <strings.h>

typedef struct slot {
    bool used;
    uint8_t hash[CR_TOKEN_HASH_BYTES];
    cr_principal p;
} slot;

struct cr_auth_table {
    pthread_rwlock_t lock; /* guards everything below */
    slot *slots;           /* owned; cap entries */
    size_t cap;            /* power of two */
    size_t count;          /* used slots */
};

int cr_auth_init(void)
{
    return sodium_init() < 0 ? CR_EIO : 0;
}

void cr_auth_mint(char *out, uint8_t hash[CR_TOKEN_HASH_BYTES])
{
    uint8_t raw[32];
    randombytes_buf(raw, sizeof raw);
    memcpy(out, "crl_", 4);
    sodium_bin2base64(out + 4, CR_TOKEN_TEXT_MAX - 4, raw, sizeof raw,
                      sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    sodium_memzero(raw, sizeof raw);
    cr_auth_hash(out, hash);
}

void cr_auth_hash(const char *token, uint8_t hash[CR_TOKEN_HASH_BYTES])
{
    crypto_generichash(hash, CR_TOKEN_HASH_BYTES, (const unsigned char *)token, strlen(token), NULL,
                       0);
}

void cr_auth_hash_hex(const uint8_t hash[CR_TOKEN_HASH_BYTES], char *hex)
{
    sodium_bin2hex(hex, 2 * CR_TOKEN_HASH_BYTES + 1, hash, CR_TOKEN_HASH_BYTES);
}

int cr_auth_hash_unhex(const char *hex, uint8_t hash[CR_TOKEN_HASH_BYTES])
{
    size_t n = 0;
    if (strlen(hex) != 2 * CR_TOKEN_HASH_BYTES ||
        sodium_hex2bin(hash, CR_TOKEN_HASH_BYTES, hex, strlen(hex), NULL, &n, NULL) != 0 ||
        n != CR_TOKEN_HASH_BYTES) {
        return CR_EINVAL;
    }
    return 0;
}

const char *cr_auth_bearer(const char *header)
{
    if (!header || strncasecmp(header, "Bearer ", 7) != 0) {
        return NULL;
    }
    header += 7;
    while (*header == ' ') {
        header++;
    }
    return *header ? header : NULL;
}

int cr_auth_secret_file(const char *path, char **out, const char **why)
{
    *out = NULL;
    FILE *f = fopen(path, "re");
    char buf[CR_AUTH_SECRET_MAX + 2] = "";
    if (!f) {
        *why = "cannot read the file";
        return CR_EIO;
    }
    if (!fgets(buf, sizeof buf, f)) {
        buf[0] = '\0';
    }
    fclose(f);
    size_t n = strcspn(buf, "\r\n");
    int rc = 0;
    if (n > CR_AUTH_SECRET_MAX) {
        *why = "want a token of at most 510 characters";
        rc = CR_EINVAL;
    } else if (n < CR_AUTH_SECRET_MIN) {
        *why = "want a token of at least 16 characters";
        rc = CR_EINVAL;
    } else {
        buf[n] = '\0';
        *out = cr_strdup(buf);
    }
    sodium_memzero(buf, sizeof buf);
    return rc;
}

void cr_auth_secret_free(char *secret)
{
    if (secret) {
        sodium_memzero(secret, strlen(secret));
        free(secret);
    }
}

bool cr_auth_bearer_is(const char *header, const char *secret)
{
    const char *got = cr_auth_bearer(header);
    if (!got || !secret) {
        return false;
    }
    uint8_t a[CR_TOKEN_HASH_BYTES], b[CR_TOKEN_HASH_BYTES];
    cr_auth_hash(got, a);
    cr_auth_hash(secret, b);
    return sodium_memcmp(a, b, sizeof a) == 0;
}

const char *cr_role_name(cr_role role)
{
    switch (role) {
    case CR_ROLE_ADMIN:
        return "admin";
    case CR_ROLE_USER:
        return "user";
    case CR_ROLE_AGENT:
        return "agent";
    case CR_ROLE_JOIN:
        return "join";
    default:
        return "none";
    }
}

cr_role cr_role_parse(const char *name)
{
    static const cr_role all[] = {CR_ROLE_ADMIN, CR_ROLE_USER, CR_ROLE_AGENT, CR_ROLE_JOIN};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (name && strcmp(name, cr_role_name(all[i])) == 0) {
            return all[i];
        }
    }
    return CR_ROLE_NONE;
}

cr_auth_table *cr_auth_table_new(void)
{
    cr_auth_table *t = cr_calloc(1, sizeof *t);
    pthread_rwlock_init(&t->lock, NULL);
    t->cap = 64;
    t->slots = cr_calloc(t->cap, sizeof *t->slots);
    return t;
}

void cr_auth_table_free(cr_auth_table *t)
{
    if (!t) {
        return;
    }
    sodium_memzero(t->slots, t->cap * sizeof *t->slots);
    free(t->slots);
    pthread_rwlock_destroy(&t->lock);
    free(t);
}

static size_t slot_of(const uint8_t *hash, size_t cap)
{
    uint64_t h;
    memcpy(&h, hash, sizeof h);
    return (size_t)(h & (cap - 1));
}

static slot *find(slot *slots, size_t cap, const uint8_t *hash, bool *found)
{
    size_t i = slot_of(hash, cap);
    for (;;) {
        slot *s = &slots[i];
        if (!s->used) {
            *found = false;
            return s;
        }
        if (sodium_memcmp(s->hash, hash, CR_TOKEN_HASH_BYTES) == 0) {
            *found = true;
            return s;
        }
        i = (i + 1) & (cap - 1);
    }
}

static void rehash(cr_auth_table *t, size_t cap)
{
    slot *ns = cr_calloc(cap, sizeof *ns);
    for (size_t i = 0; i < t->cap; i++) {
        if (t->slots[i].used) {
            bool found;
            *find(ns, cap, t->slots[i].hash, &found) = t->slots[i];
        }
    }
    free(t->slots);
    t->slots = ns;
    t->cap = cap;
}

void cr_auth_table_put(cr_auth_table *t, const uint8_t hash[CR_TOKEN_HASH_BYTES],
                       const cr_principal *p)
{
    pthread_rwlock_wrlock(&t->lock);
    if ((t->count + 1) * 2 > t->cap) {
        rehash(t, t->cap * 2);
    }
    bool found;
    slot *s = find(t->slots, t->cap, hash, &found);
    if (!found) {
        s->used = true;
        memcpy(s->hash, hash, CR_TOKEN_HASH_BYTES);
        t->count++;
    }
    s->p = *p;
    pthread_rwlock_unlock(&t->lock);
}

/* Remove entries matching a predicate, then rebuild (removals are rare). */
static size_t revoke_where(cr_auth_table *t, int64_t id, const char *node)
{
    pthread_rwlock_wrlock(&t->lock);
    size_t n = 0;
    for (size_t i = 0; i < t->cap; i++) {
        slot *s = &t->slots[i];
        if (!s->used) {
            continue;
        }
        bool hit =
            node ? (s->p.role == CR_ROLE_AGENT && strcmp(s->p.node, node) == 0) : (s->p.id == id);
        if (hit) {
            s->used = false;
            n++;
            t->count--;
        }
    }
    if (n) {
        rehash(t, t->cap);
    }
    pthread_rwlock_unlock(&t->lock);
    return n;
}

size_t cr_auth_table_revoke_id(cr_auth_table *t, int64_t id)
{
    return revoke_where(t, id, NULL);
}

size_t cr_auth_table_revoke_node(cr_auth_table *t, const char *node)
{
    return revoke_where(t, 0, node);
}

bool cr_auth_table_check(cr_auth_table *t, const char *token, cr_principal *out)
{
    if (!token || strncmp(token, "crl_", 4) != 0 || strlen(token) >= CR_TOKEN_TEXT_MAX) {
        return false;
    }
    uint8_t h[CR_TOKEN_HASH_BYTES];
    cr_auth_hash(token, h);
    pthread_rwlock_rdlock(&t->lock);
    bool found;
    slot *s = find(t->slots, t->cap, h, &found);
    cr_principal p;
    if (found) {
        p = s->p;
    }
    pthread_rwlock_unlock(&t->lock);
    if (found && p.expires_ns > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        found = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec < p.expires_ns;
    }
    if (found) {
        *out = p;
    }
    return found;
}

static const char *const scope_names[CR_SCOPE_COUNT] = {"all", "read", "submit", "tenant-admin"};

const char *cr_scope_name(cr_scope scope)
{
    return (unsigned)scope < CR_SCOPE_COUNT ? scope_names[scope] : "?";
}

int cr_scope_parse(const char *name, cr_scope *out)
{
    for (int i = 0; name && i < CR_SCOPE_COUNT; i++) {
        if (strcmp(name, scope_names[i]) == 0) {
            *out = (cr_scope)i;
            return 0;
        }
    }
    return CR_EINVAL;
}
