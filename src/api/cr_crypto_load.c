/*
 * cr_crypto_load.c - the libcrypto functions cr_jwt.c uses, loaded with
 * dlopen on first use.
 *
 * Why: linking libcrypto (OpenSSL 3) costs every `corral` process its load
 * and relocation: measured here, `corral version` went from 1.25 to 2.0 ms
 * of CPU (median of 30), and a client command never verifies a JWT. Only a
 * controller configured with "oidc" pays it, once (cr_jwt_new).
 *
 * How: as cr_mhd_load.c does for libmicrohttpd, this file defines the
 * functions (the declarations come from OpenSSL's headers, so the compiler
 * checks each signature) and forwards each to libcrypto.so.3's own,
 * resolved once per process. A program that links libcrypto anyway gets
 * these definitions first and they forward to the same library. When it
 * cannot be loaded, cr__crypto_ok says why and cr_jwt_new refuses to start
 * the verifier, so no other forwarder is ever reached without it.
 */
#include "cr_jwt_int.h"

#include <dlfcn.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/params.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

typedef struct crypto_api {
    bool ok;
    char err[200];
    void (*EVP_PKEY_free)(EVP_PKEY *);
    EVP_PKEY_CTX *(*EVP_PKEY_CTX_new_from_name)(OSSL_LIB_CTX *, const char *, const char *);
    int (*EVP_PKEY_fromdata_init)(EVP_PKEY_CTX *);
    int (*EVP_PKEY_fromdata)(EVP_PKEY_CTX *, EVP_PKEY **, int, OSSL_PARAM[]);
    void (*EVP_PKEY_CTX_free)(EVP_PKEY_CTX *);
    int (*EVP_PKEY_get_bits)(const EVP_PKEY *);
    OSSL_PARAM_BLD *(*OSSL_PARAM_BLD_new)(void);
    int (*OSSL_PARAM_BLD_push_BN)(OSSL_PARAM_BLD *, const char *, const BIGNUM *);
    int (*OSSL_PARAM_BLD_push_utf8_string)(OSSL_PARAM_BLD *, const char *, const char *, size_t);
    int (*OSSL_PARAM_BLD_push_octet_string)(OSSL_PARAM_BLD *, const char *, const void *, size_t);
    OSSL_PARAM *(*OSSL_PARAM_BLD_to_param)(OSSL_PARAM_BLD *);
    void (*OSSL_PARAM_BLD_free)(OSSL_PARAM_BLD *);
    void (*OSSL_PARAM_free)(OSSL_PARAM *);
    BIGNUM *(*BN_bin2bn)(const unsigned char *, int, BIGNUM *);
    void (*BN_free)(BIGNUM *);
    ECDSA_SIG *(*ECDSA_SIG_new)(void);
    int (*ECDSA_SIG_set0)(ECDSA_SIG *, BIGNUM *, BIGNUM *);
    void (*ECDSA_SIG_free)(ECDSA_SIG *);
    int (*i2d_ECDSA_SIG)(const ECDSA_SIG *, unsigned char **);
    EVP_MD_CTX *(*EVP_MD_CTX_new)(void);
    void (*EVP_MD_CTX_free)(EVP_MD_CTX *);
    int (*EVP_DigestVerifyInit)(EVP_MD_CTX *, EVP_PKEY_CTX **, const EVP_MD *, ENGINE *,
                                EVP_PKEY *);
    int (*EVP_DigestVerify)(EVP_MD_CTX *, const unsigned char *, size_t, const unsigned char *,
                            size_t);
    const EVP_MD *(*EVP_sha256)(void);
    void (*CRYPTO_free)(void *, const char *, int);
} crypto_api;

/* Written once under pthread_once, read-only afterwards. */
static crypto_api api;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void api_load(void)
{
    void *lib = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(api.err, sizeof api.err, "cannot load libcrypto (OpenSSL 3): %s", dlerror());
        return;
    }
#define SYM(name)                                                                                  \
    do {                                                                                           \
        *(void **)&api.name = dlsym(lib, #name);                                                   \
        if (!api.name) {                                                                           \
            snprintf(api.err, sizeof api.err, "libcrypto lacks %s", #name);                        \
            return;                                                                                \
        }                                                                                          \
    } while (0)
    SYM(EVP_PKEY_free);
    SYM(EVP_PKEY_CTX_new_from_name);
    SYM(EVP_PKEY_fromdata_init);
    SYM(EVP_PKEY_fromdata);
    SYM(EVP_PKEY_CTX_free);
    SYM(EVP_PKEY_get_bits);
    SYM(OSSL_PARAM_BLD_new);
    SYM(OSSL_PARAM_BLD_push_BN);
    SYM(OSSL_PARAM_BLD_push_utf8_string);
    SYM(OSSL_PARAM_BLD_push_octet_string);
    SYM(OSSL_PARAM_BLD_to_param);
    SYM(OSSL_PARAM_BLD_free);
    SYM(OSSL_PARAM_free);
    SYM(BN_bin2bn);
    SYM(BN_free);
    SYM(ECDSA_SIG_new);
    SYM(ECDSA_SIG_set0);
    SYM(ECDSA_SIG_free);
    SYM(i2d_ECDSA_SIG);
    SYM(EVP_MD_CTX_new);
    SYM(EVP_MD_CTX_free);
    SYM(EVP_DigestVerifyInit);
    SYM(EVP_DigestVerify);
    SYM(EVP_sha256);
    SYM(CRYPTO_free);
#undef SYM
    api.ok = true;
}

bool cr__crypto_ok(const char **why)
{
    pthread_once(&api_once, api_load);
    if (!api.ok && why) {
        *why = api.err;
    }
    return api.ok;
}

/* The forwarders: reached only after cr__crypto_ok (cr_jwt_new). */
void EVP_PKEY_free(EVP_PKEY *k)
{
    api.EVP_PKEY_free(k);
}
EVP_PKEY_CTX *EVP_PKEY_CTX_new_from_name(OSSL_LIB_CTX *l, const char *n, const char *p)
{
    return api.EVP_PKEY_CTX_new_from_name(l, n, p);
}
int EVP_PKEY_fromdata_init(EVP_PKEY_CTX *c)
{
    return api.EVP_PKEY_fromdata_init(c);
}
int EVP_PKEY_fromdata(EVP_PKEY_CTX *c, EVP_PKEY **k, int sel, OSSL_PARAM p[])
{
    return api.EVP_PKEY_fromdata(c, k, sel, p);
}
void EVP_PKEY_CTX_free(EVP_PKEY_CTX *c)
{
    api.EVP_PKEY_CTX_free(c);
}
int EVP_PKEY_get_bits(const EVP_PKEY *k)
{
    return api.EVP_PKEY_get_bits(k);
}
OSSL_PARAM_BLD *OSSL_PARAM_BLD_new(void)
{
    return api.OSSL_PARAM_BLD_new();
}
int OSSL_PARAM_BLD_push_BN(OSSL_PARAM_BLD *b, const char *k, const BIGNUM *bn)
{
    return api.OSSL_PARAM_BLD_push_BN(b, k, bn);
}
int OSSL_PARAM_BLD_push_utf8_string(OSSL_PARAM_BLD *b, const char *k, const char *s, size_t n)
{
    return api.OSSL_PARAM_BLD_push_utf8_string(b, k, s, n);
}
int OSSL_PARAM_BLD_push_octet_string(OSSL_PARAM_BLD *b, const char *k, const void *s, size_t n)
{
    return api.OSSL_PARAM_BLD_push_octet_string(b, k, s, n);
}
OSSL_PARAM *OSSL_PARAM_BLD_to_param(OSSL_PARAM_BLD *b)
{
    return api.OSSL_PARAM_BLD_to_param(b);
}
void OSSL_PARAM_BLD_free(OSSL_PARAM_BLD *b)
{
    api.OSSL_PARAM_BLD_free(b);
}
void OSSL_PARAM_free(OSSL_PARAM *p)
{
    api.OSSL_PARAM_free(p);
}
BIGNUM *BN_bin2bn(const unsigned char *s, int len, BIGNUM *ret)
{
    return api.BN_bin2bn(s, len, ret);
}
void BN_free(BIGNUM *a)
{
    api.BN_free(a);
}
ECDSA_SIG *ECDSA_SIG_new(void)
{
    return api.ECDSA_SIG_new();
}
int ECDSA_SIG_set0(ECDSA_SIG *sig, BIGNUM *r, BIGNUM *s)
{
    return api.ECDSA_SIG_set0(sig, r, s);
}
void ECDSA_SIG_free(ECDSA_SIG *sig)
{
    api.ECDSA_SIG_free(sig);
}
int i2d_ECDSA_SIG(const ECDSA_SIG *a, unsigned char **out)
{
    return api.i2d_ECDSA_SIG(a, out);
}
EVP_MD_CTX *EVP_MD_CTX_new(void)
{
    return api.EVP_MD_CTX_new();
}
void EVP_MD_CTX_free(EVP_MD_CTX *c)
{
    api.EVP_MD_CTX_free(c);
}
int EVP_DigestVerifyInit(EVP_MD_CTX *c, EVP_PKEY_CTX **pc, const EVP_MD *t, ENGINE *e, EVP_PKEY *k)
{
    return api.EVP_DigestVerifyInit(c, pc, t, e, k);
}
int EVP_DigestVerify(EVP_MD_CTX *c, const unsigned char *sig, size_t slen, const unsigned char *tbs,
                     size_t tlen)
{
    return api.EVP_DigestVerify(c, sig, slen, tbs, tlen);
}
const EVP_MD *EVP_sha256(void)
{
    return api.EVP_sha256();
}
void CRYPTO_free(void *p, const char *file, int line)
{
    api.CRYPTO_free(p, file, line);
}
