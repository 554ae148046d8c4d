#include "cr_parse.h"

#include "cr_alloc.h"
#include "cr_error.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int cr_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    if (!s || !*s || isspace((unsigned char)*s)) {
        return CR_EINVAL;
    }
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end != '\0') {
        return CR_EINVAL;
    }
    if (errno == ERANGE || v < min || v > max) {
        return CR_ERANGE;
    }
    *out = (int64_t)v;
    return 0;
}

int cr_parse_f64(const char *s, double min, double max, double *out)
{
    if (!s || !*s || isspace((unsigned char)*s)) {
        return CR_EINVAL;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end != '\0' || !isfinite(v)) {
        return CR_EINVAL;
    }
    if (errno == ERANGE || v < min || v > max) {
        return CR_ERANGE;
    }
    *out = v;
    return 0;
}

int cr_parse_count(const char *s, double *out)
{
    if (!s || !*s || isspace((unsigned char)*s)) {
        return CR_EINVAL;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || !isfinite(v) || v < 0) {
        return CR_EINVAL;
    }
    double mult = 1;
    if (*end) {
        switch (tolower((unsigned char)*end)) {
        case 'k':
            mult = 1e3;
            break;
        case 'm':
            mult = 1e6;
            break;
        case 'b':
        case 'g':
            mult = 1e9;
            break;
        case 't':
            mult = 1e12;
            break;
        default:
            return CR_EINVAL;
        }
        if (end[1] != '\0') {
            return CR_EINVAL;
        }
    }
    v *= mult;
    if (!isfinite(v) || v > 1e18) {
        return CR_ERANGE;
    }
    *out = v;
    return 0;
}

void cr_csv_rec_init(cr_csv_rec *r)
{
    memset(r, 0, sizeof *r);
}

void cr_csv_rec_fini(cr_csv_rec *r)
{
    CR_FREE(r->fields);
    CR_FREE(r->col);
    r->count = r->cap = 0;
}

static void push(cr_csv_rec *r, char *f, int col)
{
    if (r->count == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        r->fields = cr_reallocarray(r->fields, r->cap, sizeof *r->fields);
        r->col = cr_reallocarray(r->col, r->cap, sizeof *r->col);
    }
    r->fields[r->count] = f;
    r->col[r->count] = col;
    r->count++;
}

int cr_csv_split(char *line, char sep, cr_csv_rec *r, int *err_col)
{
    r->count = 0;
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\r' || line[n - 1] == '\n')) {
        line[--n] = '\0';
    }
    char *p = line;
    for (;;) {
        int col = (int)(p - line) + 1;
        if (*p == '"') {
            char *w = p; /* unquote in place */
            char *q = p + 1;
            for (;;) {
                if (*q == '\0') {
                    *err_col = col;
                    return CR_EPARSE;
                }
                if (*q == '"') {
                    if (q[1] == '"') {
                        *w++ = '"';
                        q += 2;
                        continue;
                    }
                    q++;
                    break;
                }
                *w++ = *q++;
            }
            if (*q != sep && *q != '\0') {
                *err_col = (int)(q - line) + 1;
                return CR_EPARSE;
            }
            char next = *q;
            *w = '\0';
            push(r, p, col);
            if (next == '\0') {
                return 0;
            }
            p = q + 1;
        } else {
            char *q = strchr(p, sep);
            push(r, p, col);
            if (!q) {
                return 0;
            }
            *q = '\0';
            p = q + 1;
        }
    }
}

int cr_parse_bytes(const char *s, int64_t *out)
{
    if (!s || !*s || isspace((unsigned char)*s)) {
        return CR_EINVAL;
    }
    char *end;
    double v = strtod(s, &end);
    if (end == s || !isfinite(v) || v <= 0) {
        return CR_EINVAL;
    }
    double mult = 1024.0 * 1024.0;
    if (*end) {
        switch (tolower((unsigned char)*end)) {
        case 'b':
            mult = 1;
            break;
        case 'k':
            mult = 1024.0;
            break;
        case 'm':
            mult = 1024.0 * 1024.0;
            break;
        case 'g':
            mult = 1024.0 * 1024.0 * 1024.0;
            break;
        case 't':
            mult = 1024.0 * 1024.0 * 1024.0 * 1024.0;
            break;
        default:
            return CR_EINVAL;
        }
        if (end[1] != '\0' && !(tolower((unsigned char)end[1]) == 'b' && end[2] == '\0' &&
                                tolower((unsigned char)*end) != 'b')) {
            return CR_EINVAL;
        }
    }
    v *= mult;
    if (v < 1 || v > 4611686018427387904.0) {
        return CR_ERANGE;
    }
    *out = (int64_t)v;
    return 0;
}
