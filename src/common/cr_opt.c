/*
 * cr_opt.c - options from a table of rows (cr_opt.h).
 */
#include "cr_opt.h"

#include "cr_error.h"
#include "cr_parse.h"
#include "cr_time.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const cr_opt *cr_opt_by_flag(const cr_opt *t, size_t n, const char *flag)
{
    for (size_t i = 0; flag && i < n; i++) {
        if (t[i].flag && t[i].type != CR_OPT_NOTE && strcmp(t[i].flag, flag) == 0) {
            return &t[i];
        }
    }
    return NULL;
}

const cr_opt *cr_opt_by_key(const cr_opt *t, size_t n, const char *key)
{
    for (size_t i = 0; key && i < n; i++) {
        if (t[i].key && strcmp(t[i].key, key) == 0) {
            return &t[i];
        }
    }
    return NULL;
}

bool cr_opt_wants_value(const cr_opt *o)
{
    return o->arg != NULL;
}

static void *member(const cr_opt *o, void *conf)
{
    return (char *)conf + o->offset;
}

/* The reason given for a bad value of o, from the type and the bounds. */
static void why_of(const cr_opt *o, bool flag, char *err, size_t errlen)
{
    if (flag && o->why) {
        snprintf(err, errlen, "%s", o->why);
        return;
    }
    switch (o->type) {
    case CR_OPT_I32:
    case CR_OPT_I64:
    case CR_OPT_U32:
    case CR_OPT_U64:
        snprintf(err, errlen, "must be an integer %" PRId64 "..%" PRId64, o->lo, o->hi);
        break;
    case CR_OPT_F64:
        snprintf(err, errlen, "must be a number %g..%g", o->flo, o->fhi);
        break;
    case CR_OPT_DUR:
        snprintf(err, errlen,
                 flag ? "must be a duration (e.g. 30s, 500ms, 2m)"
                      : "must be a number of seconds >= 0");
        break;
    case CR_OPT_BOOL:
    case CR_OPT_SET:
    case CR_OPT_SETB:
        snprintf(err, errlen, "must be true or false");
        break;
    default:
        snprintf(err, errlen, "must be a string");
        break;
    }
}

/* Stores v (already in o's bounds) in o's member. */
static void store_int(const cr_opt *o, void *conf, int64_t v)
{
    void *m = member(o, conf);
    switch (o->type) {
    case CR_OPT_I32:
        *(int32_t *)m = (int32_t)v;
        break;
    case CR_OPT_U32:
        *(uint32_t *)m = (uint32_t)v;
        break;
    case CR_OPT_U64:
        *(uint64_t *)m = (uint64_t)v;
        break;
    default:
        *(int64_t *)m = v;
        break;
    }
}

static int set_str(const cr_opt *o, void *conf, const char *s)
{
    if (o->type == CR_OPT_STRDUP) {
        char **m = member(o, conf);
        free(*m);
        *m = strdup(s);
        if (!*m) {
            abort(); /* as cr_strdup: allocation failure is not a path */
        }
    } else {
        *(const char **)member(o, conf) = s;
    }
    return 0;
}

int cr_opt_set_flag(const cr_opt *o, void *conf, const char *text, char *err, size_t errlen)
{
    int64_t i = 0;
    double d = 0;
    if (o->flag_by_role) {
        return CR_ENOTSUP;
    }
    switch (o->type) {
    case CR_OPT_NOTE:
    case CR_OPT_CUSTOM:
        return CR_ENOTSUP;
    case CR_OPT_I32:
    case CR_OPT_I64:
    case CR_OPT_U32:
    case CR_OPT_U64:
        if (!text || cr_parse_i64(text, o->lo, o->hi, &i) != 0) {
            break;
        }
        store_int(o, conf, i);
        return 0;
    case CR_OPT_F64:
        if (!text || cr_parse_f64(text, o->flo, o->fhi, &d) != 0) {
            break;
        }
        *(double *)member(o, conf) = d;
        return 0;
    case CR_OPT_DUR:
        if (!text || cr_duration_parse(text, &i) != 0 || i < o->lo || i > o->hi) {
            break;
        }
        *(int64_t *)member(o, conf) = i;
        return 0;
    case CR_OPT_BOOL:
        *(bool *)member(o, conf) = true;
        return 0;
    case CR_OPT_SET:
        *(int *)member(o, conf) = (int)o->lo;
        return 0;
    case CR_OPT_SETB:
        *(bool *)member(o, conf) = o->lo != 0;
        return 0;
    case CR_OPT_STR:
    case CR_OPT_STRDUP:
        if (!text) {
            break;
        }
        return set_str(o, conf, text);
    }
    why_of(o, true, err, errlen);
    return CR_EINVAL;
}

int cr_opt_set_value(const cr_opt *o, void *conf, const cr_opt_value *v, char *err, size_t errlen)
{
    switch (o->type) {
    case CR_OPT_NOTE:
    case CR_OPT_CUSTOM:
        return CR_ENOTSUP;
    case CR_OPT_I32:
    case CR_OPT_I64:
    case CR_OPT_U32:
    case CR_OPT_U64:
        if (v->kind != CR_OPT_V_INT || v->i < o->lo || v->i > o->hi) {
            break;
        }
        store_int(o, conf, v->i);
        return 0;
    case CR_OPT_F64:
        if ((v->kind != CR_OPT_V_INT && v->kind != CR_OPT_V_REAL) || !(v->d >= o->flo) ||
            !(v->d <= o->fhi)) {
            break;
        }
        *(double *)member(o, conf) = v->d;
        return 0;
    case CR_OPT_DUR: {
        /* seconds, bounded before the product so it cannot overflow */
        double s = v->d;
        if ((v->kind != CR_OPT_V_INT && v->kind != CR_OPT_V_REAL) || !isfinite(s) ||
            s < (double)o->lo / 1e9 || s > (double)o->hi / 1e9) {
            break;
        }
        *(int64_t *)member(o, conf) = (int64_t)(s * 1e9);
        return 0;
    }
    case CR_OPT_BOOL:
    case CR_OPT_SETB:
        if (v->kind != CR_OPT_V_BOOL) {
            break;
        }
        *(bool *)member(o, conf) = v->b;
        return 0;
    case CR_OPT_SET:
        if (v->kind != CR_OPT_V_BOOL) {
            break;
        }
        *(int *)member(o, conf) = v->b ? (int)o->lo : (int)!o->lo;
        return 0;
    case CR_OPT_STR:
    case CR_OPT_STRDUP:
        if (v->kind != CR_OPT_V_STR) {
            break;
        }
        return set_str(o, conf, v->s);
    }
    why_of(o, false, err, errlen);
    return CR_EINVAL;
}

void cr_opt_help(FILE *f, const cr_opt *t, size_t n, int width)
{
    for (size_t i = 0; i < n; i++) {
        const cr_opt *o = &t[i];
        if (!o->flag) {
            if (o->type == CR_OPT_NOTE && o->help) {
                fprintf(f, "%s\n", o->help);
            }
            continue;
        }
        char head[128];
        snprintf(head, sizeof head, "%s%s%s", o->flag, o->arg ? " " : "", o->arg ? o->arg : "");
        int pad = width - (int)strlen(head);
        fprintf(f, "  %s", head);
        if (pad < 1) {
            /* too long for the column: the help on a line of its own */
            fprintf(f, "\n%*s", width + 2, "");
        } else {
            fprintf(f, "%*s", pad, "");
        }
        for (const char *p = o->help ? o->help : ""; *p; p++) {
            fputc(*p, f);
            if (*p == '\n') {
                fprintf(f, "%*s", width + 2, "");
            }
        }
        fputc('\n', f);
    }
}
