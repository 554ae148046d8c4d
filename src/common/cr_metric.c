/* The corral-metric line (cr_metric.h). */
#include "cr_metric.h"

#include "cr_error.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void errf(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void errf(char *err, size_t err_len, const char *fmt, ...)
{
    if (!err || !err_len) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

int cr_metric_parse_line(const char *line, size_t len, cr_metric *m, char *err, size_t err_len)
{
    size_t pl = strlen(CR_METRIC_PREFIX);
    if (len < pl || memcmp(line, CR_METRIC_PREFIX, pl) != 0 || (len > pl && !is_space(line[pl]))) {
        return 1;
    }
    double tok = 0, step = 0;
    size_t i = pl;
    int fields = 0;
    while (i < len) {
        while (i < len && is_space(line[i])) {
            i++;
        }
        if (i >= len) {
            break;
        }
        size_t k0 = i;
        while (i < len && line[i] != '=' && !is_space(line[i])) {
            i++;
        }
        size_t klen = i - k0;
        if (i >= len || line[i] != '=') {
            errf(err, err_len, "%.*s: expected key=value", (int)(klen > 32 ? 32 : klen), line + k0);
            return CR_EINVAL;
        }
        i++;
        size_t v0 = i;
        while (i < len && !is_space(line[i])) {
            i++;
        }
        char num[48];
        size_t vlen = i - v0;
        double *dst = NULL;
        const char *name = NULL;
        if (klen == 12 && !memcmp(line + k0, "tokens_per_s", 12)) {
            dst = &tok;
            name = "tokens_per_s";
        } else if (klen == 11 && !memcmp(line + k0, "step_time_s", 11)) {
            dst = &step;
            name = "step_time_s";
        } else {
            errf(err, err_len, "%.*s: unknown field (tokens_per_s, step_time_s)",
                 (int)(klen > 32 ? 32 : klen), line + k0);
            return CR_EINVAL;
        }
        if (*dst != 0) {
            errf(err, err_len, "%s: given twice", name);
            return CR_EINVAL;
        }
        char *end = NULL;
        double v = 0;
        if (vlen > 0 && vlen < sizeof num) {
            memcpy(num, line + v0, vlen);
            num[vlen] = '\0';
            v = strtod(num, &end);
        }
        if (vlen == 0 || vlen >= sizeof num || !end || *end || !isfinite(v) || !(v > 0) ||
            v > 1e15) {
            errf(err, err_len, "%s: expected a number > 0, got \"%.*s\"", name,
                 (int)(vlen > 32 ? 32 : vlen), line + v0);
            return CR_EINVAL;
        }
        *dst = v;
        fields++;
    }
    if (!fields) {
        errf(err, err_len, "no field (tokens_per_s=..., step_time_s=...)");
        return CR_EINVAL;
    }
    if (tok > 0) {
        m->tokens_per_s = tok;
    }
    if (step > 0) {
        m->step_time_s = step;
    }
    return 0;
}

void cr_metric_scan(const char *buf, size_t len, cr_metric *m)
{
    memset(m, 0, sizeof *m);
    size_t i = 0;
    while (i < len) {
        const char *nl = memchr(buf + i, '\n', len - i);
        size_t l = nl ? (size_t)(nl - (buf + i)) : len - i;
        char err[96];
        int rc = cr_metric_parse_line(buf + i, l, m, err, sizeof err);
        if (rc == 0) {
            m->good++;
        } else if (rc < 0) {
            m->bad++;
        }
        i += l + 1;
    }
}
