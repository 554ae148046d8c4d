/*
 * cli_table.c - aligned text tables (like squeue and kubectl get) and the
 * small formatters that turn JSON members into cells.
 */
#include "cli_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_time.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <time.h>

void cr__cli_table_init(cli_table *t, size_t ncols, const char *const *headers)
{
    memset(t, 0, sizeof *t);
    t->ncols = ncols;
    t->right = cr_calloc(ncols, sizeof *t->right);
    const char *h[64];
    for (size_t i = 0; i < ncols && i < 64; i++) {
        t->right[i] = headers[i][0] == '>';
        h[i] = headers[i] + (t->right[i] ? 1 : 0);
    }
    cr__cli_table_row(t, h);
}

void cr__cli_table_fini(cli_table *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++) {
        free(t->cells[i]);
    }
    free(t->cells);
    free(t->right);
    memset(t, 0, sizeof *t);
}

void cr__cli_table_row(cli_table *t, const char *const *cells)
{
    if (t->nrows == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 16;
        t->cells = cr_reallocarray(t->cells, t->cap * t->ncols, sizeof *t->cells);
    }
    for (size_t i = 0; i < t->ncols; i++) {
        const char *c = cells[i] && *cells[i] ? cells[i] : "-";
        /* a cell is one line: control characters from the server become spaces */
        char *copy = cr_strdup(c);
        for (char *p = copy; *p; p++) {
            if ((unsigned char)*p < 0x20 || *p == 0x7f) {
                *p = ' ';
            }
        }
        t->cells[t->nrows * t->ncols + i] = copy;
    }
    t->nrows++;
}

/* Display width: UTF-8 continuation bytes do not count. */
static size_t width(const char *s)
{
    size_t w = 0;
    for (; *s; s++) {
        if (((unsigned char)*s & 0xC0) != 0x80) {
            w++;
        }
    }
    return w;
}

void cr__cli_table_print(const cli_table *t, FILE *f)
{
    size_t *w = cr_calloc(t->ncols ? t->ncols : 1, sizeof *w);
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t c = 0; c < t->ncols; c++) {
            size_t n = width(t->cells[r * t->ncols + c]);
            if (n > w[c]) {
                w[c] = n;
            }
        }
    }
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * t->ncols + c];
            size_t pad = w[c] - width(s);
            bool last = c + 1 == t->ncols;
            if (t->right[c]) {
                fprintf(f, "%*s%s", (int)pad, "", s);
            } else {
                fputs(s, f);
                if (!last) {
                    fprintf(f, "%*s", (int)pad, "");
                }
            }
            if (!last) {
                fputs("  ", f);
            }
        }
        fputc('\n', f);
    }
    free(w);
}

char *cr__cli_escape(const char *s, char *buf, size_t len)
{
    size_t o = 0;
    if (len == 0) {
        return buf;
    }
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p && o + 1 < len; p++) {
        bool c1 = *p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f;
        if (*p < 0x20 || *p == 0x7f || c1) {
            unsigned ch = c1 ? p[1] : *p;
            if (o + 5 >= len) {
                break;
            }
            o += (size_t)snprintf(buf + o, len - o, "\\x%02x", ch);
            p += c1;
        } else {
            buf[o++] = (char)*p;
        }
    }
    buf[o] = '\0';
    return buf;
}

static void scalar_text(const json_t *v, char *buf, size_t len)
{
    if (json_is_string(v)) {
        cr__cli_escape(json_string_value(v), buf, len);
    } else if (json_is_integer(v)) {
        snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == floor(d) && fabs(d) < 1e15) {
            snprintf(buf, len, "%.0f", d);
        } else if (fabs(d) >= 1e6 || (fabs(d) < 0.01 && d != 0)) {
            snprintf(buf, len, "%.3g", d);
        } else {
            snprintf(buf, len, "%.2f", d);
        }
    } else if (json_is_true(v)) {
        snprintf(buf, len, "true");
    } else if (json_is_false(v)) {
        snprintf(buf, len, "false");
    } else {
        snprintf(buf, len, "-");
    }
}

char *cr__cli_json_text(const json_t *v, char *buf, size_t len)
{
    if (len == 0) {
        return buf;
    }
    buf[0] = '\0';
    if (json_is_array(v)) {
        size_t used = 0;
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            char one[256];
            scalar_text(e, one, sizeof one);
            int n = snprintf(buf + used, len - used, "%s%s", i ? "," : "", one);
            if (n < 0 || (size_t)n >= len - used) {
                break;
            }
            used += (size_t)n;
        }
        if (used == 0) {
            snprintf(buf, len, "-");
        }
        return buf;
    }
    if (json_is_object(v)) {
        snprintf(buf, len, "{...}");
        return buf;
    }
    scalar_text(v, buf, len);
    return buf;
}

static int digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i])) {
            return CR_EINVAL;
        }
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

int cr__cli_parse_rfc3339(const char *s, int64_t *out_ns)
{
    int y, mo, d, h, mi, sec;
    if (!s || strlen(s) < 19 || digits(s, 4, &y) || s[4] != '-' || digits(s + 5, 2, &mo) ||
        s[7] != '-' || digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != ' ') ||
        digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &mi) || s[16] != ':' ||
        digits(s + 17, 2, &sec)) {
        return CR_EINVAL;
    }
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) {
        return CR_ERANGE;
    }
    const char *p = s + 19;
    int64_t frac_ns = 0;
    if (*p == '.') {
        p++;
        int64_t scale = CR_NS_PER_SEC / 10;
        if (!isdigit((unsigned char)*p)) {
            return CR_EINVAL;
        }
        while (isdigit((unsigned char)*p)) {
            frac_ns += (*p - '0') * scale;
            scale /= 10;
            p++;
        }
    }
    int64_t off_s = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om;
        if (digits(p + 1, 2, &oh) || p[3] != ':' || digits(p + 4, 2, &om)) {
            return CR_EINVAL;
        }
        off_s = (int64_t)(oh * 3600 + om * 60) * (*p == '+' ? 1 : -1);
        p += 6;
    } else {
        return CR_EINVAL;
    }
    if (*p) {
        return CR_EINVAL;
    }
    struct tm tm = {.tm_year = y - 1900,
                    .tm_mon = mo - 1,
                    .tm_mday = d,
                    .tm_hour = h,
                    .tm_min = mi,
                    .tm_sec = sec};
    int64_t t = (int64_t)timegm(&tm) - off_s;
    /* nanoseconds since 1970 fit int64 until 2262; keeping times in
     * [1970, 2255] also keeps differences of two times in range */
    if (t < 0 || t > INT64_C(9000000000)) {
        return CR_ERANGE;
    }
    *out_ns = t * CR_NS_PER_SEC + frac_ns;
    return 0;
}

char *cr__cli_age(const char *rfc3339, int64_t now_ns, char *buf, size_t len)
{
    int64_t t = 0;
    if (!rfc3339 || cr__cli_parse_rfc3339(rfc3339, &t) < 0) {
        snprintf(buf, len, "-");
        return buf;
    }
    int64_t d = now_ns - t;
    if (d < 0) {
        d = 0;
    }
    if (d < CR_NS_PER_SEC) {
        snprintf(buf, len, "0s");
        return buf;
    }
    return cr_duration_fmt(d, buf, len);
}

/* --- generic tables of items --------------------------------------------------- */

void cr__cli_events_table(const json_t *events, FILE *f)
{
    if (!json_array_size(events)) {
        return;
    }
    fputs("Events:\n", f);
    static const char *const hdr[] = {"  TIME", "WHAT", "WHY"};
    cli_table t;
    cr__cli_table_init(&t, 3, hdr);
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e)
    {
        char tm[64];
        snprintf(tm, sizeof tm, "  %s",
                 json_string_value(json_object_get(e, "time"))
                     ? json_string_value(json_object_get(e, "time"))
                     : "-");
        const char *row[] = {tm, json_string_value(json_object_get(e, "what")),
                             json_string_value(json_object_get(e, "why"))};
        cr__cli_table_row(&t, row);
    }
    cr__cli_table_print(&t, f);
    cr__cli_table_fini(&t);
}

void cr__cli_items_table(const json_t *items, FILE *f)
{
    const json_t *first = json_array_get(items, 0);
    if (!json_is_object(first)) {
        fputs("(none)\n", f);
        return;
    }
    size_t ncols = 0;
    const char *keys[32];
    char *hdrs[32];
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)first, k, v)
    {
        if (ncols == 32) {
            break;
        }
        keys[ncols] = k;
        hdrs[ncols] = cr_asprintf("%s%s", json_is_number(v) ? ">" : "", k);
        for (char *p = hdrs[ncols]; *p; p++) {
            *p = (char)toupper((unsigned char)*p);
        }
        ncols++;
    }
    cli_table t;
    cr__cli_table_init(&t, ncols, (const char *const *)hdrs);
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        char cells[32][128];
        const char *row[32];
        for (size_t c = 0; c < ncols; c++) {
            row[c] = cr__cli_json_text(json_object_get(it, keys[c]), cells[c], sizeof cells[c]);
        }
        cr__cli_table_row(&t, row);
    }
    cr__cli_table_print(&t, f);
    cr__cli_table_fini(&t);
    for (size_t c = 0; c < ncols; c++) {
        free(hdrs[c]);
    }
}
