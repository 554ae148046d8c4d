/*
 * ctl_batchspec.c - the syntax of a batch job's members, checked at submit
 * (ctl_jobspec.c) before anything is stored: array specs ("0-99:2%4"),
 * dependencies ("afterok:12:13_2", "singleton"), node lists and
 * constraints, and signals ("USR1@120"). Text only: what the texts mean
 * at run time (gates, node filters, signals sent) is ctl_batch.c.
 */
#include "ctl_int.h"

#include "cr_error.h"
#include "cr_parse.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Arrays                                                                   */

int ctl_batch_array_parse(const char *text, int32_t *idx, size_t max, size_t *n, int *throttle,
                          char *why, size_t whylen)
{
    char buf[1024];
    *n = 0;
    *throttle = 0;
    if (strlen(text) >= sizeof buf || !*text) {
        snprintf(why, whylen, "must be 1..1023 characters");
        return CR_EINVAL;
    }
    snprintf(buf, sizeof buf, "%s", text);
    char *pct = strchr(buf, '%');
    if (pct) {
        *pct = '\0';
        int64_t t;
        if (cr_parse_i64(pct + 1, 1, MAX_ARRAY_TASKS, &t) != 0) {
            snprintf(why, whylen, "'%%%s': the throttle must be an integer 1..%d", pct + 1,
                     MAX_ARRAY_TASKS);
            return CR_EINVAL;
        }
        *throttle = (int)t;
    }
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int64_t lo, hi, step = 1;
        char *colon = strchr(t, ':'), *dash = strchr(t, '-');
        if (colon) {
            *colon = '\0';
            if (!dash || cr_parse_i64(colon + 1, 1, MAX_ARRAY_INDEX, &step) != 0) {
                snprintf(why, whylen, "'%s:%s': a step goes after a range (0-99:2)", t, colon + 1);
                return CR_EINVAL;
            }
        }
        if (dash) {
            *dash = '\0';
            if (cr_parse_i64(t, 0, MAX_ARRAY_INDEX, &lo) != 0 ||
                cr_parse_i64(dash + 1, 0, MAX_ARRAY_INDEX, &hi) != 0 || hi < lo) {
                snprintf(why, whylen, "'%s-%s': want LO-HI with 0 <= LO <= HI <= %d", t, dash + 1,
                         MAX_ARRAY_INDEX);
                return CR_EINVAL;
            }
        } else if (cr_parse_i64(t, 0, MAX_ARRAY_INDEX, &lo) == 0) {
            hi = lo;
        } else {
            snprintf(why, whylen, "'%s' is not an index 0..%d", t, MAX_ARRAY_INDEX);
            return CR_EINVAL;
        }
        for (int64_t v = lo; v <= hi; v += step) {
            for (size_t k = 0; k < *n; k++) {
                if (idx[k] == v) {
                    snprintf(why, whylen, "index %lld is listed twice", (long long)v);
                    return CR_EINVAL;
                }
            }
            if (*n >= max) {
                snprintf(why, whylen, "more than %zu tasks", max);
                return CR_ERANGE;
            }
            idx[(*n)++] = (int32_t)v;
        }
    }
    if (*n == 0) {
        snprintf(why, whylen, "no index given");
        return CR_EINVAL;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Dependencies                                                             */

static const char *const dep_kinds[] = {"after", "afterany", "afterok", "afternotok", NULL};

int ctl_batch_dep_check(const char *text, char *why, size_t whylen)
{
    char buf[1024];
    if (!*text || strlen(text) >= sizeof buf) {
        snprintf(why, whylen, "must be 1..1023 characters");
        return CR_EINVAL;
    }
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL;
    size_t terms = 0;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (++terms > MAX_DEP_TERMS) {
            snprintf(why, whylen, "at most %d terms", MAX_DEP_TERMS);
            return CR_ERANGE;
        }
        if (strcmp(t, "singleton") == 0) {
            continue;
        }
        char *colon = strchr(t, ':');
        if (colon) {
            *colon = '\0';
        }
        bool known = false;
        for (size_t k = 0; dep_kinds[k]; k++) {
            known |= strcmp(t, dep_kinds[k]) == 0;
        }
        if (!known || !colon || !colon[1]) {
            snprintf(why, whylen,
                     "'%s': want TYPE:ID[:ID...] with TYPE after, afterany, afterok or "
                     "afternotok, or singleton",
                     t);
            return CR_EINVAL;
        }
        char *s2 = NULL;
        size_t ids = 0;
        for (char *id = strtok_r(colon + 1, ":", &s2); id; id = strtok_r(NULL, ":", &s2)) {
            int64_t a, ix;
            char *us = strchr(id, '_');
            if (us) {
                *us = '\0';
            }
            if (cr_parse_i64(id, 1, INT64_MAX / 2, &a) != 0 ||
                (us && cr_parse_i64(us + 1, 0, MAX_ARRAY_INDEX, &ix) != 0) || ++ids > 64) {
                snprintf(why, whylen, "'%s%s%s' is not a job id (ID or ARRAY_INDEX)", id,
                         us ? "_" : "", us ? us + 1 : "");
                return CR_EINVAL;
            }
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Node selection: --nodelist, --exclude, --constraint                      */

int ctl_batch_nodes_check(const char *field, const char *text, char *why, size_t whylen)
{
    bool cons = strcmp(field, "constraint") == 0;
    const char *seps = cons ? "&," : ",";
    size_t terms = 0;
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, seps);
        if (len == 0 || len >= CTL_NAME_MAX * 2 || ++terms > 256) {
            snprintf(why, whylen, "want %s",
                     cons ? "LABEL[=VALUE][&LABEL[=VALUE]...]"
                          : "NODE[,NODE...] (up to 256 names)");
            return CR_EINVAL;
        }
        for (size_t i = 0; i < len; i++) {
            char ch = p[i];
            if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' ||
                  (cons && ch == '='))) {
                snprintf(why, whylen, "'%.*s': names use letters, digits, '-', '_' or '.'",
                         (int)len, p);
                return CR_EINVAL;
            }
        }
        p += len + (p[len] != '\0');
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Signals: --signal SIG@SECONDS, cancel --signal SIG                       */

/* The signals a user may send: those a job can act on. KILL ends it. */
static const char *const user_signals[] = {"USR1", "USR2", "TERM", "INT",   "HUP", "QUIT",
                                           "ALRM", "CONT", "KILL", "WINCH", NULL};

int ctl_batch_signal_parse(const char *text, char *name, size_t namelen, int64_t *secs)
{
    char buf[32];
    if (!text || strlen(text) >= sizeof buf) {
        return CR_EINVAL;
    }
    snprintf(buf, sizeof buf, "%s", text);
    *secs = 60;
    char *at = strchr(buf, '@');
    if (at) {
        *at = '\0';
        if (cr_parse_i64(at + 1, 0, 65535, secs) != 0) {
            return CR_EINVAL;
        }
    }
    const char *n = strncmp(buf, "SIG", 3) == 0 ? buf + 3 : buf;
    for (size_t i = 0; user_signals[i]; i++) {
        if (strcmp(n, user_signals[i]) == 0) {
            snprintf(name, namelen, "%s", n);
            return 0;
        }
    }
    return CR_EINVAL;
}
