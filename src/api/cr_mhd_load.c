/*
 * cr_mhd_load.c - libmicrohttpd, loaded with dlopen on first use.
 *
 * Why: libmicrohttpd brings GnuTLS and its chain (p11-kit, nettle, hogweed,
 * gmp, tasn1, idn2, unistring, ffi) into every process that links it, and
 * all of them are BIND_NOW: measured about 2.5 ms of CPU per exec on this
 * machine, two thirds of a `corral submit`, which never serves HTTP. The
 * server roles (controller, agent) pay the cost once, at MHD_start_daemon.
 *
 * How: this file defines the few MHD_* functions Corral calls (the
 * declarations come from <microhttpd.h>, so the signatures are checked by
 * the compiler) and forwards each to the library's own, resolved once per
 * process. The binary links no libmicrohttpd; a program that does link it
 * (some tests) gets these definitions first, and they forward to the same
 * library. When the library cannot be loaded, MHD_start_daemon returns NULL
 * (callers already report a daemon that did not start) after logging why;
 * the other functions are only reachable through a running daemon.
 */
#include "cr_log.h"

#include <dlfcn.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

/* The entry points used, resolved once per process. */
typedef struct mhd_api {
    bool ok;       /* loaded */
    char err[200]; /* why not, when !ok */
    struct MHD_Daemon *(*start_daemon_va)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
                                          MHD_AccessHandlerCallback, void *, va_list);
    void (*stop_daemon)(struct MHD_Daemon *);
    MHD_socket (*quiesce_daemon)(struct MHD_Daemon *);
    const union MHD_DaemonInfo *(*get_daemon_info)(struct MHD_Daemon *, enum MHD_DaemonInfoType,
                                                   ...);
    const union MHD_ConnectionInfo *(*get_connection_info)(struct MHD_Connection *,
                                                           enum MHD_ConnectionInfoType, ...);
    const char *(*lookup_connection_value)(struct MHD_Connection *, enum MHD_ValueKind,
                                           const char *);
    int (*get_connection_values)(struct MHD_Connection *, enum MHD_ValueKind, MHD_KeyValueIterator,
                                 void *);
    int (*get_connection_values_n)(struct MHD_Connection *, enum MHD_ValueKind,
                                   MHD_KeyValueIteratorN, void *);
    const char *(*get_version)(void);
    struct MHD_Response *(*create_response_from_callback)(uint64_t, size_t,
                                                          MHD_ContentReaderCallback, void *,
                                                          MHD_ContentReaderFreeCallback);
    struct MHD_Response *(*create_response_from_buffer)(size_t, void *,
                                                        enum MHD_ResponseMemoryMode);
    enum MHD_Result (*add_response_header)(struct MHD_Response *, const char *, const char *);
    enum MHD_Result (*queue_response)(struct MHD_Connection *, unsigned int, struct MHD_Response *);
    void (*destroy_response)(struct MHD_Response *);
    void (*suspend_connection)(struct MHD_Connection *);
    void (*resume_connection)(struct MHD_Connection *);
} mhd_api;

/* Written once under pthread_once, read-only afterwards. */
static mhd_api api;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void api_load(void)
{
    void *lib = dlopen("libmicrohttpd.so.12", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(api.err, sizeof api.err, "cannot load libmicrohttpd: %s", dlerror());
        return;
    }
#define SYM(field, name)                                                                           \
    do {                                                                                           \
        *(void **)&api.field = dlsym(lib, name);                                                   \
        if (!api.field) {                                                                          \
            snprintf(api.err, sizeof api.err, "libmicrohttpd lacks %s", name);                     \
            return;                                                                                \
        }                                                                                          \
    } while (0)
    SYM(start_daemon_va, "MHD_start_daemon_va");
    SYM(stop_daemon, "MHD_stop_daemon");
    SYM(quiesce_daemon, "MHD_quiesce_daemon");
    SYM(get_daemon_info, "MHD_get_daemon_info");
    SYM(get_connection_info, "MHD_get_connection_info");
    SYM(lookup_connection_value, "MHD_lookup_connection_value");
    SYM(get_connection_values, "MHD_get_connection_values");
    SYM(get_connection_values_n, "MHD_get_connection_values_n");
    SYM(get_version, "MHD_get_version");
    SYM(create_response_from_buffer, "MHD_create_response_from_buffer");
    SYM(create_response_from_callback, "MHD_create_response_from_callback");
    SYM(add_response_header, "MHD_add_response_header");
    SYM(queue_response, "MHD_queue_response");
    SYM(destroy_response, "MHD_destroy_response");
    SYM(suspend_connection, "MHD_suspend_connection");
    SYM(resume_connection, "MHD_resume_connection");
#undef SYM
    api.ok = true; /* the library stays loaded for the life of the process */
}

static bool loaded(void)
{
    pthread_once(&api_once, api_load);
    return api.ok;
}

struct MHD_Daemon *MHD_start_daemon(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc,
                                    void *apc_cls, MHD_AccessHandlerCallback dh, void *dh_cls, ...)
{
    if (!loaded()) {
        cr_error("http: %s", api.err);
        return NULL;
    }
    va_list ap;
    va_start(ap, dh_cls);
    struct MHD_Daemon *d = api.start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
    va_end(ap);
    return d;
}

void MHD_stop_daemon(struct MHD_Daemon *daemon)
{
    if (loaded()) {
        api.stop_daemon(daemon);
    }
}

MHD_socket MHD_quiesce_daemon(struct MHD_Daemon *daemon)
{
    return loaded() ? api.quiesce_daemon(daemon) : MHD_INVALID_SOCKET;
}

/* The info calls take no further argument for the kinds Corral asks. */
const union MHD_DaemonInfo *MHD_get_daemon_info(struct MHD_Daemon *daemon,
                                                enum MHD_DaemonInfoType info_type, ...)
{
    return loaded() ? api.get_daemon_info(daemon, info_type) : NULL;
}

const union MHD_ConnectionInfo *MHD_get_connection_info(struct MHD_Connection *connection,
                                                        enum MHD_ConnectionInfoType info_type, ...)
{
    return loaded() ? api.get_connection_info(connection, info_type) : NULL;
}

const char *MHD_lookup_connection_value(struct MHD_Connection *connection, enum MHD_ValueKind kind,
                                        const char *key)
{
    return loaded() ? api.lookup_connection_value(connection, kind, key) : NULL;
}

int MHD_get_connection_values(struct MHD_Connection *connection, enum MHD_ValueKind kind,
                              MHD_KeyValueIterator iterator, void *iterator_cls)
{
    return loaded() ? api.get_connection_values(connection, kind, iterator, iterator_cls) : 0;
}

int MHD_get_connection_values_n(struct MHD_Connection *connection, enum MHD_ValueKind kind,
                                MHD_KeyValueIteratorN iterator, void *iterator_cls)
{
    return loaded() ? api.get_connection_values_n(connection, kind, iterator, iterator_cls) : 0;
}

const char *MHD_get_version(void)
{
    return loaded() ? api.get_version() : NULL;
}

struct MHD_Response *MHD_create_response_from_callback(uint64_t size, size_t block_size,
                                                       MHD_ContentReaderCallback crc, void *crc_cls,
                                                       MHD_ContentReaderFreeCallback crfc)
{
    return loaded() ? api.create_response_from_callback(size, block_size, crc, crc_cls, crfc)
                    : NULL;
}

struct MHD_Response *MHD_create_response_from_buffer(size_t size, void *buffer,
                                                     enum MHD_ResponseMemoryMode mode)
{
    return loaded() ? api.create_response_from_buffer(size, buffer, mode) : NULL;
}

enum MHD_Result MHD_add_response_header(struct MHD_Response *response, const char *header,
                                        const char *content)
{
    return loaded() ? api.add_response_header(response, header, content) : MHD_NO;
}

enum MHD_Result MHD_queue_response(struct MHD_Connection *connection, unsigned int status_code,
                                   struct MHD_Response *response)
{
    return loaded() ? api.queue_response(connection, status_code, response) : MHD_NO;
}

void MHD_destroy_response(struct MHD_Response *response)
{
    if (loaded()) {
        api.destroy_response(response);
    }
}

void MHD_suspend_connection(struct MHD_Connection *connection)
{
    if (loaded()) {
        api.suspend_connection(connection);
    }
}

void MHD_resume_connection(struct MHD_Connection *connection)
{
    if (loaded()) {
        api.resume_connection(connection);
    }
}
