/*
 * cr_curl.h - the few libcurl entry points Corral uses, loaded with dlopen
 * once per process on first use (https:// in src/client, etcd in src/store).
 * Not linked: a `corral` process that never speaks https or etcd does not
 * pay libcurl's (and its TLS stack's) load time at exec; only libcurl's
 * headers are needed at build time.
 *
 * Threading: cr_curl_get() is safe from any thread (pthread_once); the table
 * it returns is read-only afterwards. curl_global_init runs once, inside.
 */
#ifndef CR_CURL_H
#define CR_CURL_H

#include <curl/curl.h>
#include <stdbool.h>

typedef struct cr_curl_api {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *h);
    void (*easy_reset)(CURL *h);
    CURLcode (*easy_setopt)(CURL *h, CURLoption opt, ...);
    CURLcode (*easy_perform)(CURL *h);
    CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
    const char *(*easy_strerror)(CURLcode c);
    struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
    void (*slist_free_all)(struct curl_slist *l);
} cr_curl_api;

/* The loaded table, or NULL with *why (static text: "libcurl.so.4: cannot
 * open...", "libcurl lacks curl_easy_reset", ...) when libcurl is missing. */
const cr_curl_api *cr_curl_get(const char **why);

#endif
