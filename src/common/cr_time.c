#include "cr_time.h"

#include "cr_error.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t cr_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * CR_NS_PER_SEC + ts.tv_nsec;
}

int64_t cr_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * CR_NS_PER_SEC + ts.tv_nsec;
}

int cr_cond_wait_mono(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / CR_NS_PER_SEC),
                          .tv_nsec = (long)(deadline_ns % CR_NS_PER_SEC)};
    return pthread_cond_clockwait(cv, mu, CLOCK_MONOTONIC, &ts);
}

int cr_duration_parse(const char *s, int64_t *out_ns)
{
    if (!s || !*s) {
        return CR_EINVAL;
    }
    double total = 0;
    const char *p = s;
    int parts = 0;
    while (*p) {
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno || !isfinite(v) || v < 0) {
            return CR_EINVAL;
        }
        p = end;
        double unit = 1e9;
        if (p[0] == 'm' && p[1] == 's') {
            unit = 1e6;
            p += 2;
        } else if (p[0] == 'u' && p[1] == 's') {
            unit = 1e3;
            p += 2;
        } else if (p[0] == 'n' && p[1] == 's') {
            unit = 1;
            p += 2;
        } else if (*p == 's') {
            p++;
        } else if (*p == 'm') {
            unit = 60e9;
            p++;
        } else if (*p == 'h') {
            unit = 3600e9;
            p++;
        } else if (*p == 'd') {
            unit = 86400e9;
            p++;
        } else if (*p != '\0') {
            return CR_EINVAL;
        } else if (parts > 0) {
            return CR_EINVAL; /* "1h30" is ambiguous */
        }
        total += v * unit;
        parts++;
    }
    if (total > 9.2e18) {
        return CR_ERANGE;
    }
    *out_ns = (int64_t)llround(total);
    return 0;
}

/* Digits only, at most 9 of them, into *v. */
static int tl_field(const char *s, size_t n, int64_t *v)
{
    if (n == 0 || n > 9) {
        return CR_EINVAL;
    }
    int64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return CR_EINVAL;
        }
        x = x * 10 + (s[i] - '0');
    }
    *v = x;
    return 0;
}

int cr_time_limit_parse(const char *s, int64_t *out_ns)
{
    if (!s || !*s) {
        return CR_EINVAL;
    }
    const int64_t max_s = 3660LL * 86400;
    int64_t days = 0, f[3] = {0, 0, 0}, secs;
    size_t nf = 0;
    const char *p = s, *dash = strchr(s, '-');
    bool all_digits = strspn(s, "0123456789") == strlen(s);
    if (!dash && !strchr(s, ':') && !all_digits) {
        int64_t ns;
        int rc = cr_duration_parse(s, &ns);
        if (rc < 0) {
            return rc;
        }
        if (ns / CR_NS_PER_SEC > max_s) {
            return CR_ERANGE;
        }
        *out_ns = ns;
        return 0;
    }
    if (dash) {
        if (tl_field(s, (size_t)(dash - s), &days) < 0) {
            return CR_EINVAL;
        }
        p = dash + 1;
    }
    while (nf < 3) {
        size_t n = strcspn(p, ":");
        if (tl_field(p, n, &f[nf]) < 0) {
            return CR_EINVAL;
        }
        nf++;
        p += n;
        if (*p == '\0') {
            break;
        }
        p++; /* ':' */
    }
    if (*p != '\0') {
        return CR_EINVAL; /* a fourth field */
    }
    if (dash) {
        /* D-HH, D-HH:MM, D-HH:MM:SS */
        if (f[0] > 23 || (nf > 1 && f[1] > 59) || (nf > 2 && f[2] > 59)) {
            return CR_EINVAL;
        }
        secs = days * 86400 + f[0] * 3600 + (nf > 1 ? f[1] * 60 : 0) + (nf > 2 ? f[2] : 0);
    } else if (nf == 1) {
        secs = f[0] * 60; /* MM */
    } else if (nf == 2) {
        if (f[1] > 59) {
            return CR_EINVAL;
        }
        secs = f[0] * 60 + f[1]; /* MM:SS */
    } else {
        if (f[1] > 59 || f[2] > 59) {
            return CR_EINVAL;
        }
        secs = f[0] * 3600 + f[1] * 60 + f[2]; /* HH:MM:SS */
    }
    if (secs > max_s) {
        return CR_ERANGE;
    }
    *out_ns = secs * CR_NS_PER_SEC;
    return 0;
}

char *cr_duration_fmt(int64_t ns, char *buf, size_t len)
{
    if (ns < 0) {
        snprintf(buf, len, "-");
        return buf;
    }
    if (ns < CR_NS_PER_SEC) {
        snprintf(buf, len, "%lldms", (long long)(ns / CR_NS_PER_MS));
    } else if (ns < CR_NS_PER_MIN) {
        snprintf(buf, len, "%llds", (long long)(ns / CR_NS_PER_SEC));
    } else if (ns < CR_NS_PER_H) {
        long long m = (long long)(ns / CR_NS_PER_MIN);
        long long sec = (long long)((ns % CR_NS_PER_MIN) / CR_NS_PER_SEC);
        if (sec) {
            snprintf(buf, len, "%lldm%llds", m, sec);
        } else {
            snprintf(buf, len, "%lldm", m);
        }
    } else if (ns < 48 * CR_NS_PER_H) {
        long long h = (long long)(ns / CR_NS_PER_H);
        long long m = (long long)((ns % CR_NS_PER_H) / CR_NS_PER_MIN);
        if (m) {
            snprintf(buf, len, "%lldh%lldm", h, m);
        } else {
            snprintf(buf, len, "%lldh", h);
        }
    } else {
        double d = (double)ns / (86400.0 * 1e9);
        snprintf(buf, len, "%.1fd", d);
    }
    return buf;
}

char *cr_time_fmt(int64_t epoch_ns, char *buf, size_t len)
{
    time_t t = (time_t)(epoch_ns / CR_NS_PER_SEC);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}
