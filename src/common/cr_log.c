#include "cr_log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int threshold = CR_LOG_INFO;

int cr_log_init(void)
{
    const char *e = getenv("CORRAL_LOG");
    if (e) {
        static const char *const names[] = {"debug", "info", "warn", "error", "off"};
        for (int i = 0; i <= CR_LOG_OFF; i++) {
            if (strcmp(e, names[i]) == 0) {
                atomic_store(&threshold, i);
            }
        }
    }
    return atomic_load(&threshold);
}

void cr_log_set_level(int level)
{
    atomic_store(&threshold, level);
}

int cr_log_level(void)
{
    return atomic_load(&threshold);
}

void cr_log(int level, const char *fmt, ...)
{
    if (level < atomic_load(&threshold)) {
        return;
    }
    static const char *const tags[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    char line[2048];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n =
        snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                 tags[level < 0   ? 0
                      : level > 3 ? 3
                                  : level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2) {
        len = sizeof line - 2;
    }
    /* One event, one line: control characters in the message (a decoded
     * %0A in a request path, a name from a request) are written as \xNN,
     * so no input can forge a log line or move a terminal's cursor. */
    char out[sizeof line * 4 + 2];
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)line[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
            o += (size_t)snprintf(out + o, sizeof out - o, "\\x%02x", ch);
        } else {
            out[o++] = (char)ch;
        }
    }
    out[o++] = '\n';
    ssize_t w = write(STDERR_FILENO, out, o);
    (void)w;
}
