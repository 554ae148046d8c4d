/*
 * cr_jwt.c - JWT verification (libcrypto) against a cached JWKS.
 */
#include "cr_jwt.h"
#include "cr_jwt_int.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_curl.h"
#include "cr_error.h"

#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <pthread.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef struct jwk {
    char kid[128];
    bool ec;        /* P-256 (ES256), else RSA (RS256) */
    EVP_PKEY *pkey; /* owned */
} jwk;

struct cr_jwt {
    cr_jwt_config cfg;  /* map points at rules */
    cr_jwt_rule *rules; /* owned */
    bool url;
    pthread_mutex_t mu; /* guards what follows */
    jwk keys[CR_JWT_KEYS_MAX];
    size_t nkeys;
    struct stat st;    /* the file as last read */
    int64_t fetched_s; /* URL: last fetch (monotonic seconds) */
};

static void say(char *why, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t size, const char *fmt, ...)
{
    if (!why || size == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
}

static int64_t mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec;
}

/* base64url without padding into a new buffer (free with free); NULL if bad. */
static unsigned char *b64url(const char *s, size_t len, size_t *out_len)
{
    unsigned char *buf = cr_malloc(len + 1);
    size_t n = 0;
    if (sodium_base642bin(buf, len + 1, s, len, NULL, &n, NULL,
                          sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0) {
        free(buf);
        return NULL;
    }
    *out_len = n;
    return buf;
}

static BIGNUM *b64_bn(const json_t *v)
{
    const char *s = json_string_value(v);
    size_t n = 0;
    unsigned char *b = s ? b64url(s, strlen(s), &n) : NULL;
    if (!b) {
        return NULL;
    }
    BIGNUM *bn = n ? BN_bin2bn(b, (int)n, NULL) : NULL;
    free(b);
    return bn;
}

static EVP_PKEY *from_params(const char *type, OSSL_PARAM_BLD *bld)
{
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (!params || !ctx || EVP_PKEY_fromdata_init(ctx) <= 0 ||
        EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) <= 0) {
        pkey = NULL;
    }
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    return pkey;
}

static EVP_PKEY *rsa_key(const json_t *k)
{
    BIGNUM *n = b64_bn(json_object_get(k, "n")), *e = b64_bn(json_object_get(k, "e"));
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    if (n && e && bld && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n) &&
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, e)) {
        pkey = from_params("RSA", bld);
    }
    if (pkey && EVP_PKEY_get_bits(pkey) < 2048) {
        EVP_PKEY_free(pkey); /* too weak to trust */
        pkey = NULL;
    }
    OSSL_PARAM_BLD_free(bld);
    BN_free(n);
    BN_free(e);
    return pkey;
}

static EVP_PKEY *ec_key(const json_t *k)
{
    const char *crv = json_string_value(json_object_get(k, "crv"));
    const char *xs = json_string_value(json_object_get(k, "x"));
    const char *ys = json_string_value(json_object_get(k, "y"));
    if (!crv || strcmp(crv, "P-256") != 0 || !xs || !ys) {
        return NULL;
    }
    size_t nx = 0, ny = 0;
    unsigned char *x = b64url(xs, strlen(xs), &nx), *y = b64url(ys, strlen(ys), &ny);
    EVP_PKEY *pkey = NULL;
    if (x && y && nx == 32 && ny == 32) {
        unsigned char pt[65];
        pt[0] = 0x04; /* uncompressed point */
        memcpy(pt + 1, x, 32);
        memcpy(pt + 33, y, 32);
        OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
        if (bld && OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "P-256", 0) &&
            OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pt, sizeof pt)) {
            pkey = from_params("EC", bld);
        }
        OSSL_PARAM_BLD_free(bld);
    }
    free(x);
    free(y);
    return pkey;
}

static void keys_clear(jwk *keys, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        EVP_PKEY_free(keys[i].pkey);
        keys[i].pkey = NULL;
    }
}

static size_t curl_write(char *p, size_t sz, size_t n, void *arg)
{
    cr_buf *b = arg;
    if (b->len + sz * n > CR_JWT_JWKS_MAX) {
        return 0;
    }
    cr_buf_append(b, p, sz * n);
    return sz * n;
}

/* The JWKS text into b: CR_EIO with why. */
static int jwks_read(cr_jwt *j, cr_buf *b, struct stat *st, char *why, size_t size)
{
    if (j->url) {
        const char *cwhy = NULL;
        const cr_curl_api *api = cr_curl_get(&cwhy);
        if (!api) {
            say(why, size, "jwks: %s", cwhy ? cwhy : "libcurl missing");
            return CR_EIO;
        }
        CURL *h = api->easy_init();
        if (!h) {
            say(why, size, "jwks: curl_easy_init failed");
            return CR_EIO;
        }
        api->easy_setopt(h, CURLOPT_URL, j->cfg.jwks);
        api->easy_setopt(h, CURLOPT_WRITEFUNCTION, curl_write);
        api->easy_setopt(h, CURLOPT_WRITEDATA, b);
        api->easy_setopt(h, CURLOPT_TIMEOUT, 10L);
        api->easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        CURLcode rc = api->easy_perform(h);
        long code = 0;
        api->easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        api->easy_cleanup(h);
        if (rc != CURLE_OK || code != 200) {
            say(why, size, "jwks %s: %s (HTTP %ld)", j->cfg.jwks,
                rc != CURLE_OK ? api->easy_strerror(rc) : "not 200", code);
            return CR_EIO;
        }
        return 0;
    }
    FILE *f = fopen(j->cfg.jwks, "r");
    if (!f) {
        say(why, size, "jwks %s: cannot open", j->cfg.jwks);
        return CR_EIO;
    }
    if (fstat(fileno(f), st) != 0 || st->st_size > CR_JWT_JWKS_MAX) {
        fclose(f);
        say(why, size, "jwks %s: cannot stat, or larger than %d bytes", j->cfg.jwks,
            CR_JWT_JWKS_MAX);
        return CR_EIO;
    }
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        cr_buf_append(b, chunk, n);
    }
    fclose(f);
    return 0;
}

/* (Re-)read the JWKS; the old keys stay when it fails. mu held. */
static int jwks_load(cr_jwt *j, char *why, size_t size)
{
    cr_buf b;
    cr_buf_init(&b);
    struct stat st;
    memset(&st, 0, sizeof st);
    j->fetched_s = mono_s();
    int rc = jwks_read(j, &b, &st, why, size);
    if (rc != 0) {
        cr_buf_fini(&b);
        return rc;
    }
    json_error_t jerr;
    json_t *v = json_loadb(b.data ? b.data : "", b.len, 0, &jerr);
    cr_buf_fini(&b);
    json_t *arr = json_object_get(v, "keys");
    if (!json_is_array(arr)) {
        say(why, size, "jwks %s: not a JWKS (no \"keys\" array)", j->cfg.jwks);
        json_decref(v);
        return CR_EINVAL;
    }
    jwk fresh[CR_JWT_KEYS_MAX];
    size_t n = 0, i;
    json_t *k;
    json_array_foreach(arr, i, k)
    {
        const char *kty = json_string_value(json_object_get(k, "kty"));
        const char *use = json_string_value(json_object_get(k, "use"));
        const char *kid = json_string_value(json_object_get(k, "kid"));
        if (n == CR_JWT_KEYS_MAX || !kty || (use && strcmp(use, "sig") != 0)) {
            continue;
        }
        jwk x = {.ec = strcmp(kty, "EC") == 0};
        snprintf(x.kid, sizeof x.kid, "%s", kid ? kid : "");
        x.pkey = x.ec ? ec_key(k) : strcmp(kty, "RSA") == 0 ? rsa_key(k) : NULL;
        if (x.pkey) {
            fresh[n++] = x;
        }
    }
    json_decref(v);
    if (n == 0) {
        say(why, size, "jwks %s: no usable key (RSA of 2048 bits or more, or EC P-256)",
            j->cfg.jwks);
        return CR_EINVAL;
    }
    keys_clear(j->keys, j->nkeys);
    memcpy(j->keys, fresh, n * sizeof *fresh);
    j->nkeys = n;
    j->st = st;
    return 0;
}

int cr_jwt_new(const cr_jwt_config *cfg, cr_jwt **out, char *why, size_t size)
{
    if (!*cfg->issuer || !*cfg->audience || !*cfg->jwks || cfg->leeway_s < 0 ||
        cfg->leeway_s > 300 || cfg->nmap > CR_JWT_MAP_MAX) {
        say(why, size,
            "oidc: issuer, audience and jwks are required, leeway_s 0..300, at most "
            "%d rules",
            CR_JWT_MAP_MAX);
        return CR_EINVAL;
    }
    const char *cwhy = NULL;
    if (!cr__crypto_ok(&cwhy)) {
        say(why, size, "oidc: %s", cwhy);
        return CR_EIO;
    }
    cr_jwt *j = cr_calloc(1, sizeof *j);
    j->cfg = *cfg;
    j->rules = cr_calloc(cfg->nmap ? cfg->nmap : 1, sizeof *j->rules);
    if (cfg->nmap) {
        memcpy(j->rules, cfg->map, cfg->nmap * sizeof *j->rules);
    }
    j->cfg.map = j->rules;
    j->url = strncmp(cfg->jwks, "http://", 7) == 0 || strncmp(cfg->jwks, "https://", 8) == 0;
    pthread_mutex_init(&j->mu, NULL);
    int rc = jwks_load(j, why, size);
    if (rc != 0) {
        cr_jwt_free(j);
        return rc;
    }
    *out = j;
    return 0;
}

void cr_jwt_free(cr_jwt *j)
{
    if (!j) {
        return;
    }
    keys_clear(j->keys, j->nkeys);
    pthread_mutex_destroy(&j->mu);
    free(j->rules);
    free(j);
}

bool cr_jwt_looks_like(const char *t)
{
    if (!t || strncmp(t, "eyJ", 3) != 0) {
        return false;
    }
    int dots = 0;
    for (const char *p = t; *p; p++) {
        if (*p == '.') {
            dots++;
        } else if (!(*p == '-' || *p == '_' || (*p >= '0' && *p <= '9') ||
                     (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) {
            return false;
        }
    }
    return dots == 2;
}

/* ECDSA's raw r||s (64 bytes) as DER, into a new buffer (OPENSSL_free). */
static unsigned char *ecdsa_der(const unsigned char *sig, size_t n, int *der_len)
{
    if (n != 64) {
        return NULL;
    }
    ECDSA_SIG *es = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(sig, 32, NULL), *s = BN_bin2bn(sig + 32, 32, NULL);
    unsigned char *der = NULL;
    if (es && r && s && ECDSA_SIG_set0(es, r, s)) {
        r = s = NULL; /* owned by es now */
        *der_len = i2d_ECDSA_SIG(es, &der);
        if (*der_len <= 0) {
            der = NULL;
        }
    }
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(es);
    return der;
}

static bool sig_ok(const jwk *k, const char *input, size_t ilen, const unsigned char *sig,
                   size_t slen)
{
    unsigned char *der = NULL;
    int dlen = 0;
    if (k->ec && !(der = ecdsa_der(sig, slen, &dlen))) {
        return false;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = ctx && EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, k->pkey) == 1 &&
              EVP_DigestVerify(ctx, der ? der : sig, der ? (size_t)dlen : slen,
                               (const unsigned char *)input, ilen) == 1;
    EVP_MD_CTX_free(ctx);
    OPENSSL_free(der);
    return ok;
}

/* A key of kid for the algorithm (ec), or NULL. mu held. */
static const jwk *key_find(const cr_jwt *j, const char *kid, bool ec)
{
    for (size_t i = 0; i < j->nkeys; i++) {
        if (j->keys[i].ec == ec && (!kid || strcmp(j->keys[i].kid, kid) == 0)) {
            return &j->keys[i];
        }
    }
    return NULL;
}

static bool file_changed(const cr_jwt *j)
{
    struct stat st;
    return stat(j->cfg.jwks, &st) == 0 &&
           (st.st_mtim.tv_sec != j->st.st_mtim.tv_sec ||
            st.st_mtim.tv_nsec != j->st.st_mtim.tv_nsec || st.st_size != j->st.st_size ||
            st.st_ino != j->st.st_ino);
}

static bool claim_has(const json_t *c, const char *value)
{
    if (json_is_string(c)) {
        return strcmp(json_string_value(c), value) == 0;
    }
    size_t i;
    json_t *x;
    json_array_foreach(c, i, x)
    {
        if (json_is_string(x) && strcmp(json_string_value(x), value) == 0) {
            return true;
        }
    }
    return false;
}

static json_t *part_json(const char *s, size_t len)
{
    size_t n = 0;
    unsigned char *b = b64url(s, len, &n);
    json_t *v = b ? json_loadb((const char *)b, n, 0, NULL) : NULL;
    free(b);
    if (v && !json_is_object(v)) {
        json_decref(v);
        v = NULL;
    }
    return v;
}

int cr_jwt_verify(cr_jwt *j, const char *token, int64_t now_s, cr_principal *out, char *sub,
                  size_t sublen, char *why, size_t whylen)
{
    int rc = CR_EAUTH;
    json_t *hdr = NULL, *pl = NULL;
    unsigned char *sig = NULL;
    if (sub && sublen) {
        *sub = '\0';
    }
    size_t tlen = token ? strlen(token) : 0;
    const char *d1 = token ? strchr(token, '.') : NULL;
    const char *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
    if (tlen > CR_JWT_MAX || !d2 || strchr(d2 + 1, '.')) {
        say(why, whylen, "not a JWT (three parts, at most %d bytes)", CR_JWT_MAX);
        goto out;
    }
    hdr = part_json(token, (size_t)(d1 - token));
    pl = part_json(d1 + 1, (size_t)(d2 - d1 - 1));
    if (!hdr || !pl) {
        say(why, whylen, "malformed JWT header or payload");
        goto out;
    }
    const char *s = json_string_value(json_object_get(pl, "sub"));
    if (s && sub && sublen) {
        snprintf(sub, sublen, "%s", s);
    }
    const char *alg = json_string_value(json_object_get(hdr, "alg"));
    const char *kid = json_string_value(json_object_get(hdr, "kid"));
    bool ec;
    if (alg && strcmp(alg, "RS256") == 0) {
        ec = false;
    } else if (alg && strcmp(alg, "ES256") == 0) {
        ec = true;
    } else {
        say(why, whylen, "alg '%s' refused (RS256 or ES256 only)", alg ? alg : "(none)");
        goto out;
    }
    size_t slen = 0;
    sig = b64url(d2 + 1, strlen(d2 + 1), &slen);
    if (!sig || slen == 0) {
        say(why, whylen, "malformed signature");
        goto out;
    }
    pthread_mutex_lock(&j->mu);
    char lwhy[256] = "";
    if (!j->url && file_changed(j)) {
        jwks_load(j, lwhy, sizeof lwhy);
    }
    const jwk *k = key_find(j, kid, ec);
    if (!k && (!j->url || mono_s() - j->fetched_s >= CR_JWT_REFETCH_MIN_S)) {
        jwks_load(j, lwhy, sizeof lwhy); /* a rotation: the new key may be there */
        k = key_find(j, kid, ec);
    }
    bool good = k && sig_ok(k, token, (size_t)(d2 - token), sig, slen);
    pthread_mutex_unlock(&j->mu);
    if (!k) {
        say(why, whylen, "unknown key: no %s key with kid '%s' in the JWKS%s%s", alg,
            kid ? kid : "", *lwhy ? "; " : "", lwhy);
        goto out;
    }
    if (!good) {
        say(why, whylen, "bad signature (kid '%s')", kid ? kid : "");
        goto out;
    }
    const char *iss = json_string_value(json_object_get(pl, "iss"));
    if (!iss || strcmp(iss, j->cfg.issuer) != 0) {
        say(why, whylen, "wrong issuer '%s'", iss ? iss : "(none)");
        goto out;
    }
    if (!claim_has(json_object_get(pl, "aud"), j->cfg.audience)) {
        say(why, whylen, "wrong audience (not '%s')", j->cfg.audience);
        goto out;
    }
    json_t *exp = json_object_get(pl, "exp"), *nbf = json_object_get(pl, "nbf");
    if (!json_is_number(exp) || (double)now_s >= json_number_value(exp) + (double)j->cfg.leeway_s) {
        say(why, whylen, "expired (exp %.0f, now %lld)", json_number_value(exp), (long long)now_s);
        goto out;
    }
    if (nbf && (!json_is_number(nbf) ||
                (double)now_s + (double)j->cfg.leeway_s < json_number_value(nbf))) {
        say(why, whylen, "not yet valid (nbf %.0f, now %lld)", json_number_value(nbf),
            (long long)now_s);
        goto out;
    }
    if (!s || !*s || strlen(s) >= sizeof out->name) {
        say(why, whylen, "no subject (sub: a string of 1..%zu bytes)", sizeof out->name - 1);
        goto out;
    }
    for (size_t i = 0; i < j->cfg.nmap; i++) {
        const cr_jwt_rule *r = &j->cfg.map[i];
        if (claim_has(json_object_get(pl, r->claim), r->value)) {
            memset(out, 0, sizeof *out);
            /* a negative id per subject: never a token's, and the rate
             * limiter keys each subject apart */
            uint64_t h = 1469598103934665603ULL;
            for (const char *q = s; *q; q++) {
                h = (h ^ (unsigned char)*q) * 1099511628211ULL;
            }
            out->id = -(int64_t)(h >> 1) - 1;
            out->role = r->role;
            snprintf(out->tenant, sizeof out->tenant, "%s", r->tenant);
            snprintf(out->name, sizeof out->name, "%s", s);
            rc = 0;
            goto out;
        }
    }
    rc = CR_EPERM;
    say(why, whylen, "no oidc.map rule matches subject '%s'", s);
out:
    free(sig);
    json_decref(hdr);
    json_decref(pl);
    return rc;
}
