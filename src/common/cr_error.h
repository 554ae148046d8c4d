/*
 * cr_error.h - the one table of Corral error codes.
 *
 * Functions return int: 0 (or a count) on success, a negative CR_E* code on
 * failure. The API carries the *name* of a code (cr_errname) and a human
 * message, never the bare number. Thread-safe: the tables are constant.
 */
#ifndef CR_ERROR_H
#define CR_ERROR_H

#define CR_ERRNO_MAP(X)                                                                            \
    X(NOMEM, "out of memory")                                                                      \
    X(INVAL, "invalid argument")                                                                   \
    X(NOENT, "not found")                                                                          \
    X(EXIST, "already exists")                                                                     \
    X(IO, "input/output error")                                                                    \
    X(PARSE, "parse error")                                                                        \
    X(RANGE, "value out of range")                                                                 \
    X(PERM, "permission denied")                                                                   \
    X(AUTH, "authentication required")                                                             \
    X(BUSY, "resource busy")                                                                       \
    X(TIMEDOUT, "timed out")                                                                       \
    X(NOSPC, "no capacity")                                                                        \
    X(CONFLICT, "conflicting state")                                                               \
    X(NOTSUP, "not supported")                                                                     \
    X(AGAIN, "try again")                                                                          \
    X(QUOTA, "quota exceeded")                                                                     \
    X(TOOBIG, "too large")                                                                         \
    X(UNAVAIL, "unavailable")                                                                      \
    X(DISKFULL, "disk full")                                                                       \
    X(CORRUPT, "damaged data")                                                                     \
    X(FENCED, "fenced: another holder took over")

enum cr_errno {
    CR_OK = 0,
#define CR__ERR_ENUM(name, msg) CR_E##name,
    CR__ERR_FIRST = -1000,
    CR_ERRNO_MAP(CR__ERR_ENUM) CR__ERR_LAST
#undef CR__ERR_ENUM
};

/* Human text for a code ("not found"); "unknown error" for anything else. */
const char *cr_strerror(int err);
/* Stable name for a code ("CR_ENOENT"), used on the wire. */
const char *cr_errname(int err);

#endif
