/*
 * cr_auth.h - bearer tokens (libsodium): minting, hashing, lookup.
 *
 * A token is "crl_" followed by 43 base64url characters (32 random bytes).
 * Only its BLAKE2b-256 hash is ever stored; the token text is shown once,
 * when minted. Lookup hashes the presented token and compares hashes with
 * sodium_memcmp (constant time), so the cost does not depend on how much
 * of a guess is right.
 *
 * cr_auth_table maps token hashes to principals (role, tenant, node). It
 * is thread-safe (a read-write lock): many API threads look up, the
 * controller adds and revokes. cr_auth_init() must run once first (it
 * calls sodium_init; safe to call again).
 */
#ifndef CR_AUTH_H
#define CR_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CR_TOKEN_HASH_BYTES 32
#define CR_TOKEN_TEXT_MAX   64 /* "crl_" + 43 chars + NUL fits */

typedef enum cr_role {
    CR_ROLE_NONE = 0, /* unauthenticated */
    CR_ROLE_ADMIN,    /* everything */
    CR_ROLE_USER,     /* one tenant's jobs and services */
    CR_ROLE_AGENT,    /* one node's agent routes */
    CR_ROLE_JOIN,     /* may only register a node */
} cr_role;

/* What a token may do within its role (docs/security.md): everything, only
 * read (GET and HEAD), read and submit/cancel jobs, or (a user token) that
 * and manage the tenants below its tenant in the tree. */
typedef enum cr_scope {
    CR_SCOPE_ALL = 0,
    CR_SCOPE_READ,
    CR_SCOPE_SUBMIT,
    CR_SCOPE_TENANT_ADMIN,
    CR_SCOPE_COUNT
} cr_scope;

typedef struct cr_principal {
    int64_t id;         /* token id (0 for the join token; < 0 an OIDC subject) */
    cr_role role;       /* what it may do */
    char tenant[64];    /* CR_ROLE_USER: the tenant */
    char name[64];      /* human label */
    char node[64];      /* CR_ROLE_AGENT: the node */
    int64_t expires_ns; /* wall clock; 0 never. cr_auth_table_check refuses it after */
    cr_scope scope;
} cr_principal;

typedef struct cr_auth_table cr_auth_table;

/* 0, or CR_EIO when libsodium cannot initialise. */
int cr_auth_init(void);
/* Mint a token: text into out (CR_TOKEN_TEXT_MAX bytes) and its hash. */
void cr_auth_mint(char *out, uint8_t hash[CR_TOKEN_HASH_BYTES]);
/* Hash a presented token text. */
void cr_auth_hash(const char *token, uint8_t hash[CR_TOKEN_HASH_BYTES]);
/* Hex forms of a hash (65 bytes with NUL) and back (0 or CR_EINVAL). */
void cr_auth_hash_hex(const uint8_t hash[CR_TOKEN_HASH_BYTES], char *hex);
int cr_auth_hash_unhex(const char *hex, uint8_t hash[CR_TOKEN_HASH_BYTES]);
/* The token of an "Authorization: Bearer X" header, or NULL. Borrowed. */
const char *cr_auth_bearer(const char *header);
/* A secret read from a file (--metrics-token-file of the controller and
 * the agent): its first line, without CR/LF; at least CR_AUTH_SECRET_MIN and
 * at most CR_AUTH_SECRET_MAX bytes. 0 and *out (new; free with
 * cr_auth_secret_free, which wipes it), or CR_EIO (cannot read) /
 * CR_EINVAL (too short or too long) with *why set (static text). */
#define CR_AUTH_SECRET_MIN 16
#define CR_AUTH_SECRET_MAX 510
int cr_auth_secret_file(const char *path, char **out, const char **why);
void cr_auth_secret_free(char *secret);
/* Whether an Authorization header is "Bearer <secret>": the hashes are
 * compared in constant time. False when header or secret is NULL. */
bool cr_auth_bearer_is(const char *header, const char *secret);
const char *cr_role_name(cr_role role);
/* CR_ROLE_NONE when unknown. */
cr_role cr_role_parse(const char *name);

cr_auth_table *cr_auth_table_new(void);
void cr_auth_table_free(cr_auth_table *t);
/* Add (or replace) the principal for a hash; p copied. */
void cr_auth_table_put(cr_auth_table *t, const uint8_t hash[CR_TOKEN_HASH_BYTES],
                       const cr_principal *p);
/* Remove every entry with this token id; returns how many. */
size_t cr_auth_table_revoke_id(cr_auth_table *t, int64_t id);
/* Remove every agent entry for this node; returns how many. */
size_t cr_auth_table_revoke_node(cr_auth_table *t, const char *node);
/* "all", "read", "submit", "tenant-admin" and back (CR_EINVAL for another
 * name). */
const char *cr_scope_name(cr_scope scope);
int cr_scope_parse(const char *name, cr_scope *out);
/* Look up a presented token; true and *out when it is valid (known and,
 * with an expiry, not past it on the wall clock). */
bool cr_auth_table_check(cr_auth_table *t, const char *token, cr_principal *out);

#endif
