#include "cr_log.h"

#include "cr_error.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static atomic_int threshold = CR_LOG_INFO;
static atomic_int format = CR_LOG_TEXT;
static atomic_bool journal = false;

/* JOURNAL_STREAM is "DEV:INODE" of the stream systemd connected; it is
 * inherited by children, so only trust it when stderr is that stream. */
static bool stderr_is_journal(void)
{
    const char *j = getenv("JOURNAL_STREAM");
    unsigned long long dev = 0, ino = 0;
    struct stat st;
    if (!j || sscanf(j, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) != 0) {
        return false;
    }
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

int cr_log_init(void)
{
    atomic_store(&journal, stderr_is_journal());
    const char *e = getenv("CORRAL_LOG");
    if (e) {
        static const char *const names[] = {"debug", "info", "warn", "error", "off"};
        for (int i = 0; i <= CR_LOG_OFF; i++) {
            if (strcmp(e, names[i]) == 0) {
                atomic_store(&threshold, i);
                return i;
            }
        }
        return CR_EINVAL;
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

int cr_log_set_format_name(const char *name)
{
    if (name && strcmp(name, "json") == 0) {
        atomic_store(&format, CR_LOG_JSON);
    } else if (name && strcmp(name, "text") == 0) {
        atomic_store(&format, CR_LOG_TEXT);
    } else {
        return CR_EINVAL;
    }
    return 0;
}

void cr_log_set_format(int f)
{
    atomic_store(&format, f == CR_LOG_JSON ? CR_LOG_JSON : CR_LOG_TEXT);
}

/* Appends s as JSON string contents (no quotes) to out[*n .. cap). */
static void json_esc(char *out, size_t cap, size_t *n, const char *s, size_t len)
{
    for (size_t i = 0; i < len && *n + 7 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            out[(*n)++] = '\\';
            out[(*n)++] = (char)ch;
        } else if (ch < 0x20) {
            *n += (size_t)snprintf(out + *n, cap - *n, "\\u%04x", ch);
        } else {
            out[(*n)++] = (char)ch;
        }
    }
}

/* key=value tokens of msg (key: [a-z_0-9.]+, value up to a space) as
 * extra JSON fields; "msg" and the fixed names are skipped. */
static void json_fields(char *out, size_t cap, size_t *n, const char *msg)
{
    const char *p = msg;
    int fields = 0;
    while (*p && fields < 32) {
        while (*p == ' ') {
            p++;
        }
        const char *k = p;
        while ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.') {
            p++;
        }
        size_t klen = (size_t)(p - k);
        if (*p == '=' && klen > 0 && klen < 32 && strncmp(k, "ts", klen) != 0 &&
            strncmp(k, "level", klen) != 0 && strncmp(k, "msg", klen) != 0) {
            const char *v = ++p;
            while (*p && *p != ' ') {
                p++;
            }
            if (*n + klen + 8 >= cap) {
                return;
            }
            out[(*n)++] = ',';
            out[(*n)++] = '"';
            json_esc(out, cap, n, k, klen);
            memcpy(out + *n, "\":\"", 3);
            *n += 3;
            json_esc(out, cap, n, v, (size_t)(p - v));
            out[(*n)++] = '"';
            fields++;
        }
        while (*p && *p != ' ') {
            p++;
        }
    }
}

void cr_log(int level, const char *fmt, ...)
{
    if (level < atomic_load(&threshold)) {
        return;
    }
    static const char *const tags[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    static const char *const lower[] = {"debug", "info", "warn", "error"};
    static const int prio[] = {7, 6, 4, 3}; /* syslog: debug, info, warning, err */
    int li = level < 0 ? 0 : level > 3 ? 3 : level;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (m < 0) {
        msg[0] = '\0';
    }
    char line[4096 + 64];
    size_t n = 0;
    bool j = atomic_load(&journal);
    if (j) {
        n += (size_t)snprintf(line, sizeof line, "<%d>", prio[li]);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char tsbuf[96];
    snprintf(tsbuf, sizeof tsbuf, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    if (atomic_load(&format) == CR_LOG_JSON) {
        n += (size_t)snprintf(line + n, sizeof line - n,
                              "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"", tsbuf, lower[li]);
        json_esc(line, sizeof line - 16, &n, msg, strlen(msg));
        line[n++] = '"';
        json_fields(line, sizeof line - 16, &n, msg);
        line[n++] = '}';
    } else {
        if (j) {
            n += (size_t)snprintf(line + n, sizeof line - n, "%s %s", tags[li], msg);
        } else {
            n += (size_t)snprintf(line + n, sizeof line - n, "%s %-5s %s", tsbuf, tags[li], msg);
        }
        if (n > sizeof line - 2) {
            n = sizeof line - 2;
        }
    }
    if (atomic_load(&format) == CR_LOG_JSON) {
        line[n++] = '\n';
        ssize_t w = write(STDERR_FILENO, line, n);
        (void)w;
        return;
    }
    /* One event, one line: control characters in the message (a decoded
     * %0A in a request path, a name from a request) are written as \xNN,
     * so no input can forge a log line or move a terminal's cursor. */
    char out[sizeof line * 4 + 2];
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
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
