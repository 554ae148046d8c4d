/*
 * cr_jwt.h - OIDC/JWT bearer tokens verified against an issuer's keys.
 *
 * A company's identity provider signs JWTs (RS256 or ES256; nothing else
 * is accepted, "none" and the HMAC algorithms above all) with keys it
 * publishes as a JWKS, read here from a file or an http(s) URL. A token is
 * valid when its signature verifies with the JWKS key of its "kid" (of the
 * key type its "alg" names: no algorithm confusion), "iss" is the issuer,
 * "aud" is or contains the audience, "exp" is in the future and "nbf" (if
 * present) in the past, both within leeway_s, and "sub" is a non-empty
 * string. Claims then map to a role and tenant by the configured rules, in
 * order, the first that matches: rule {claim, value} matches when the
 * claim is that string or an array holding it (e.g. "groups").
 *
 * Keys are cached. An unknown kid re-reads the JWKS (a file at once, a URL
 * at most once per CR_JWT_REFETCH_MIN_S), so a rotation needs no restart;
 * a file is also re-read when its mtime, size or inode changed. A failed
 * re-read keeps the keys already known.
 *
 * Bounds: a token at most CR_JWT_MAX bytes, a JWKS at most CR_JWT_JWKS_MAX
 * bytes and CR_JWT_KEYS_MAX keys, RSA keys at least 2048 bits, at most
 * CR_JWT_MAP_MAX rules.
 *
 * Threading: cr_jwt_verify may be called from any thread (one mutex
 * guards the key cache); cr_jwt_new and cr_jwt_free from one.
 */
#ifndef CR_JWT_H
#define CR_JWT_H

#include "cr_auth.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CR_JWT_MAX           16384
#define CR_JWT_JWKS_MAX      (1024 * 1024)
#define CR_JWT_KEYS_MAX      64
#define CR_JWT_MAP_MAX       256
#define CR_JWT_REFETCH_MIN_S 5

typedef struct cr_jwt_rule {
    char claim[64];  /* claim name, e.g. "groups" */
    char value[128]; /* the value it must be or hold */
    char tenant[64]; /* the tenant it maps to ("" for an admin) */
    cr_role role;    /* CR_ROLE_USER or CR_ROLE_ADMIN */
} cr_jwt_rule;

typedef struct cr_jwt_config {
    char issuer[256];
    char audience[256];
    char jwks[1024];        /* a file path, or an http:// or https:// URL */
    int64_t leeway_s;       /* clock skew allowed on exp and nbf (0..300) */
    const cr_jwt_rule *map; /* nmap rules, borrowed (copied) */
    size_t nmap;
} cr_jwt_config;

typedef struct cr_jwt cr_jwt;

/* Returned new (free with cr_jwt_free); cfg borrowed (copied). The JWKS is
 * read once now: CR_EINVAL (bad config, or a JWKS without a usable key)
 * or CR_EIO (cannot read it) with why (size bytes) saying which. */
int cr_jwt_new(const cr_jwt_config *cfg, cr_jwt **out, char *why, size_t size);
void cr_jwt_free(cr_jwt *j);

/* Whether a bearer token has the JWT shape (three base64url parts, the
 * header starting "eyJ"): Corral's own tokens never do. */
bool cr_jwt_looks_like(const char *token);

/* Verify token at now_s (Unix seconds). 0 with *out (role, tenant; name
 * the subject; id a negative number derived from the subject, never a
 * Corral token's); CR_EAUTH (not valid: 401) or CR_EPERM (valid, but no rule
 * maps it: 403) with why. sub (sublen bytes) gets the token's claimed
 * subject whenever its payload decodes, "" otherwise, also on failure
 * (for the audit log: unverified then). */
int cr_jwt_verify(cr_jwt *j, const char *token, int64_t now_s, cr_principal *out, char *sub,
                  size_t sublen, char *why, size_t whylen);

#endif
