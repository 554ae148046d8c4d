/*
 * cr_curl.c - libcurl loaded with dlopen once per process (cr_curl.h).
 */
#include "cr_curl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

/* Written once under pthread_once, read-only afterwards. */
static cr_curl_api api;
static bool api_ok;
static char api_err[200];
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void api_load(void)
{
    void *lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(api_err, sizeof api_err, "%s", dlerror());
        return;
    }
#define SYM(field, name)                                                                           \
    do {                                                                                           \
        *(void **)&api.field = dlsym(lib, name);                                                   \
        if (!api.field) {                                                                          \
            snprintf(api_err, sizeof api_err, "libcurl lacks %s", name);                           \
            return;                                                                                \
        }                                                                                          \
    } while (0)
    SYM(global_init, "curl_global_init");
    SYM(easy_init, "curl_easy_init");
    SYM(easy_cleanup, "curl_easy_cleanup");
    SYM(easy_reset, "curl_easy_reset");
    SYM(easy_setopt, "curl_easy_setopt");
    SYM(easy_perform, "curl_easy_perform");
    SYM(easy_getinfo, "curl_easy_getinfo");
    SYM(easy_strerror, "curl_easy_strerror");
    SYM(slist_append, "curl_slist_append");
    SYM(slist_free_all, "curl_slist_free_all");
#undef SYM
    if (api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(api_err, sizeof api_err, "curl_global_init failed");
        return;
    }
    api_ok = true; /* the library stays loaded for the life of the process */
}

const cr_curl_api *cr_curl_get(const char **why)
{
    pthread_once(&api_once, api_load);
    if (!api_ok) {
        *why = api_err;
        return NULL;
    }
    return &api;
}
