/*
 * gw_ssl_load.c - the libssl and libcrypto functions gw_tls.c uses, loaded
 * with dlopen when the gateway is given a certificate.
 *
 * Why: the corral binary links neither (src/api/cr_crypto_load.c measures
 * what linking libcrypto costs every process, and every CLI command is one),
 * and it defines forwarders of its own for the libcrypto functions the JWT
 * verifier uses. Linking libssl would put those forwarders in front of
 * libcrypto's own calls, which reach them before anything is loaded.
 *
 * How: as cr_crypto_load.c, each function is defined here with OpenSSL's own
 * declaration (so the compiler checks each signature) and forwards to the
 * library's, resolved once per process by gw_ssl_load. gw_tls_init calls it
 * before anything else of OpenSSL and refuses TLS when it fails, so no
 * forwarder runs unresolved. None of these names is one cr_crypto_load.c
 * defines (BN_free, CRYPTO_free: gw_tls.c uses neither).
 */
#include "gw_int.h"

#include <dlfcn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdio.h>

typedef struct ssl_api {
    bool ok;
    char err[200];
    const SSL_METHOD *(*TLS_server_method)(void);
    SSL_CTX *(*SSL_CTX_new)(const SSL_METHOD *);
    void (*SSL_CTX_free)(SSL_CTX *);
    long (*SSL_CTX_ctrl)(SSL_CTX *, int, long, void *);
    uint64_t (*SSL_CTX_set_options)(SSL_CTX *, uint64_t);
    void (*SSL_CTX_set_alpn_select_cb)(SSL_CTX *, SSL_CTX_alpn_select_cb_func, void *);
    int (*SSL_select_next_proto)(unsigned char **, unsigned char *, const unsigned char *,
                                 unsigned int, const unsigned char *, unsigned int);
    int (*SSL_CTX_set_session_id_context)(SSL_CTX *, const unsigned char *, unsigned int);
    int (*SSL_CTX_use_certificate_chain_file)(SSL_CTX *, const char *);
    int (*SSL_CTX_use_PrivateKey_file)(SSL_CTX *, const char *, int);
    int (*SSL_CTX_check_private_key)(const SSL_CTX *);
    X509 *(*SSL_CTX_get0_certificate)(const SSL_CTX *);
    SSL *(*SSL_new)(SSL_CTX *);
    void (*SSL_free)(SSL *);
    int (*SSL_set_fd)(SSL *, int);
    void (*SSL_set_accept_state)(SSL *);
    int (*SSL_read)(SSL *, void *, int);
    int (*SSL_write)(SSL *, const void *, int);
    int (*SSL_get_error)(const SSL *, int);
    int (*SSL_is_init_finished)(const SSL *);
    int (*SSL_shutdown)(SSL *);
    void (*ERR_clear_error)(void);
    unsigned long (*ERR_peek_error)(void);
    unsigned long (*ERR_peek_last_error)(void);
    const char *(*ERR_reason_error_string)(unsigned long);
    const ASN1_INTEGER *(*X509_get0_serialNumber)(const X509 *);
    const ASN1_TIME *(*X509_get0_notAfter)(const X509 *);
    int (*ASN1_TIME_to_tm)(const ASN1_TIME *, struct tm *);
    const unsigned char *(*ASN1_STRING_get0_data)(const ASN1_STRING *);
    int (*ASN1_STRING_length)(const ASN1_STRING *);
} ssl_api;

/* Written once under pthread_once, read-only afterwards. */
static ssl_api api;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void api_load(void)
{
    void *lib = dlopen("libssl.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(api.err, sizeof api.err, "cannot load libssl (OpenSSL 3): %s", dlerror());
        return;
    }
#define SYM(name)                                                                                  \
    do {                                                                                           \
        *(void **)&api.name = dlsym(lib, #name);                                                   \
        if (!api.name) {                                                                           \
            snprintf(api.err, sizeof api.err, "libssl lacks %s", #name);                           \
            return;                                                                                \
        }                                                                                          \
    } while (0)
    SYM(TLS_server_method);
    SYM(SSL_CTX_new);
    SYM(SSL_CTX_free);
    SYM(SSL_CTX_ctrl);
    SYM(SSL_CTX_set_options);
    SYM(SSL_CTX_set_alpn_select_cb);
    SYM(SSL_select_next_proto);
    SYM(SSL_CTX_set_session_id_context);
    SYM(SSL_CTX_use_certificate_chain_file);
    SYM(SSL_CTX_use_PrivateKey_file);
    SYM(SSL_CTX_check_private_key);
    SYM(SSL_CTX_get0_certificate);
    SYM(SSL_new);
    SYM(SSL_free);
    SYM(SSL_set_fd);
    SYM(SSL_set_accept_state);
    SYM(SSL_read);
    SYM(SSL_write);
    SYM(SSL_get_error);
    SYM(SSL_is_init_finished);
    SYM(SSL_shutdown);
    SYM(ERR_clear_error);
    SYM(ERR_peek_error);
    SYM(ERR_peek_last_error);
    SYM(ERR_reason_error_string);
    SYM(X509_get0_serialNumber);
    SYM(X509_get0_notAfter);
    SYM(ASN1_TIME_to_tm);
    SYM(ASN1_STRING_get0_data);
    SYM(ASN1_STRING_length);
#undef SYM
    api.ok = true;
}

bool gw_ssl_load(const char **why)
{
    pthread_once(&api_once, api_load);
    if (!api.ok && why) {
        *why = api.err;
    }
    return api.ok;
}

/* The forwarders: reached only after gw_ssl_load (gw_tls_init). */
const SSL_METHOD *TLS_server_method(void)
{
    return api.TLS_server_method();
}
SSL_CTX *SSL_CTX_new(const SSL_METHOD *m)
{
    return api.SSL_CTX_new(m);
}
void SSL_CTX_free(SSL_CTX *c)
{
    if (c) {
        api.SSL_CTX_free(c);
    }
}
long SSL_CTX_ctrl(SSL_CTX *c, int cmd, long larg, void *parg)
{
    return api.SSL_CTX_ctrl(c, cmd, larg, parg);
}
uint64_t SSL_CTX_set_options(SSL_CTX *c, uint64_t op)
{
    return api.SSL_CTX_set_options(c, op);
}
void SSL_CTX_set_alpn_select_cb(SSL_CTX *c, SSL_CTX_alpn_select_cb_func cb, void *arg)
{
    api.SSL_CTX_set_alpn_select_cb(c, cb, arg);
}
int SSL_select_next_proto(unsigned char **out, unsigned char *outlen, const unsigned char *server,
                          unsigned int server_len, const unsigned char *client,
                          unsigned int client_len)
{
    return api.SSL_select_next_proto(out, outlen, server, server_len, client, client_len);
}
int SSL_CTX_set_session_id_context(SSL_CTX *c, const unsigned char *sid, unsigned int len)
{
    return api.SSL_CTX_set_session_id_context(c, sid, len);
}
int SSL_CTX_use_certificate_chain_file(SSL_CTX *c, const char *file)
{
    return api.SSL_CTX_use_certificate_chain_file(c, file);
}
int SSL_CTX_use_PrivateKey_file(SSL_CTX *c, const char *file, int type)
{
    return api.SSL_CTX_use_PrivateKey_file(c, file, type);
}
int SSL_CTX_check_private_key(const SSL_CTX *c)
{
    return api.SSL_CTX_check_private_key(c);
}
X509 *SSL_CTX_get0_certificate(const SSL_CTX *c)
{
    return api.SSL_CTX_get0_certificate(c);
}
SSL *SSL_new(SSL_CTX *c)
{
    return api.SSL_new(c);
}
void SSL_free(SSL *s)
{
    if (s) {
        api.SSL_free(s);
    }
}
int SSL_set_fd(SSL *s, int fd)
{
    return api.SSL_set_fd(s, fd);
}
void SSL_set_accept_state(SSL *s)
{
    api.SSL_set_accept_state(s);
}
int SSL_read(SSL *s, void *buf, int num)
{
    return api.SSL_read(s, buf, num);
}
int SSL_write(SSL *s, const void *buf, int num)
{
    return api.SSL_write(s, buf, num);
}
int SSL_get_error(const SSL *s, int ret)
{
    return api.SSL_get_error(s, ret);
}
int SSL_is_init_finished(const SSL *s)
{
    return api.SSL_is_init_finished(s);
}
int SSL_shutdown(SSL *s)
{
    return api.SSL_shutdown(s);
}
void ERR_clear_error(void)
{
    api.ERR_clear_error();
}
unsigned long ERR_peek_error(void)
{
    return api.ERR_peek_error();
}
unsigned long ERR_peek_last_error(void)
{
    return api.ERR_peek_last_error();
}
const char *ERR_reason_error_string(unsigned long e)
{
    return api.ERR_reason_error_string(e);
}
const ASN1_INTEGER *X509_get0_serialNumber(const X509 *x)
{
    return api.X509_get0_serialNumber(x);
}
const ASN1_TIME *X509_get0_notAfter(const X509 *x)
{
    return api.X509_get0_notAfter(x);
}
int ASN1_TIME_to_tm(const ASN1_TIME *t, struct tm *tm)
{
    return api.ASN1_TIME_to_tm(t, tm);
}
const unsigned char *ASN1_STRING_get0_data(const ASN1_STRING *s)
{
    return api.ASN1_STRING_get0_data(s);
}
int ASN1_STRING_length(const ASN1_STRING *s)
{
    return api.ASN1_STRING_length(s);
}
