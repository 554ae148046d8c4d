/*
 * cli_args.c - table-driven flag parsing for the client commands.
 *
 * Accepts "--name value", "--name=value", boolean "--name", "--" to end the
 * options, and "-h" for "--help". Every error names the flag and, for closed
 * sets and bounded numbers, what it accepts.
 */
#include "cli_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_parse.h"
#include "cr_time.h"

#include <inttypes.h>
#include <string.h>

static const cli_opt *find(const cli_args *a, const char *name, size_t len, size_t *idx)
{
    for (size_t i = 0; i < a->nopts; i++) {
        if (strlen(a->opts[i].name) == len && strncmp(a->opts[i].name, name, len) == 0) {
            *idx = i;
            return &a->opts[i];
        }
    }
    return NULL;
}

/* Is v one of "a|b|c"? */
static bool allowed(const char *set, const char *v)
{
    size_t n = strlen(v);
    for (const char *p = set; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0) {
            return true;
        }
        p += len + (bar ? 1 : 0);
    }
    return false;
}

static void print_allowed(FILE *err, const char *set)
{
    fputs(" (allowed: ", err);
    for (const char *p = set; *p; p++) {
        if (*p == '|') {
            fputs(", ", err);
        } else {
            fputc(*p, err);
        }
    }
    fputs(")", err);
}

static int set_value(const cli_opt *o, cli_val *v, const char *cmd, const char *text, FILE *err)
{
    int rc = 0;
    switch (o->kind) {
    case CLI_BOOL:
        v->i = 1;
        break;
    case CLI_STR:
        if (o->allowed && !allowed(o->allowed, text)) {
            fprintf(err, "corral %s: --%s: '%s' is not allowed", cmd, o->name, text);
            print_allowed(err, o->allowed);
            fputc('\n', err);
            return CR_EINVAL;
        }
        if (!*text) {
            fprintf(err, "corral %s: --%s: empty value\n", cmd, o->name);
            return CR_EINVAL;
        }
        break;
    case CLI_INT:
        rc = cr_parse_i64(text, o->min, o->max, &v->i);
        if (rc < 0) {
            fprintf(err, "corral %s: --%s: '%s' is not an integer in %" PRId64 "..%" PRId64 "\n",
                    cmd, o->name, text, o->min, o->max);
            return CR_EINVAL;
        }
        break;
    case CLI_F64:
        rc = cr_parse_f64(text, (double)o->min, (double)o->max, &v->f);
        if (rc < 0) {
            fprintf(err, "corral %s: --%s: '%s' is not a number in %" PRId64 "..%" PRId64 "\n", cmd,
                    o->name, text, o->min, o->max);
            return CR_EINVAL;
        }
        break;
    case CLI_COUNT:
        rc = cr_parse_count(text, &v->f);
        if (rc < 0) {
            fprintf(err,
                    "corral %s: --%s: '%s' is not a count (examples: 7b, 70e9, 1.5t, 500m, 8k)\n",
                    cmd, o->name, text);
            return CR_EINVAL;
        }
        break;
    case CLI_DUR:
        rc = cr_duration_parse(text, &v->i);
        if (rc < 0 || v->i <= 0) {
            fprintf(err,
                    "corral %s: --%s: '%s' is not a positive duration (examples: 90s, 40m, "
                    "1h30m, 2d, or seconds)\n",
                    cmd, o->name, text);
            return CR_EINVAL;
        }
        break;
    case CLI_TLIM:
        rc = cr_time_limit_parse(text, &v->i);
        if (rc < 0 || v->i <= 0) {
            fprintf(err,
                    "corral %s: --%s: '%s' is not a time limit (a number is minutes, as in "
                    "Slurm; MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS; or 90s, 2h, 1h30m)\n",
                    cmd, o->name, text);
            return CR_EINVAL;
        }
        break;
    case CLI_LIST:
        v->list = cr_reallocarray(v->list, v->count + 1, sizeof *v->list);
        v->list[v->count++] = text;
        break;
    }
    v->set = true;
    v->str = text;
    return 0;
}

int cr__cli_args_parse(cli_args *a, const char *cmd, const cli_opt *opts, size_t nopts,
                       bool stop_at_pos, int argc, char **argv, FILE *err)
{
    memset(a, 0, sizeof *a);
    cli_opt *all = cr_calloc(nopts + cr__cli_ncommon_opts, sizeof *all);
    if (nopts) {
        memcpy(all, opts, nopts * sizeof *all);
    }
    memcpy(all + nopts, cr__cli_common_opts, cr__cli_ncommon_opts * sizeof *all);
    a->opts = all;
    a->nopts = nopts + cr__cli_ncommon_opts;
    a->vals = cr_calloc(a->nopts, sizeof *a->vals);
    a->pos = cr_calloc((size_t)(argc > 0 ? argc : 1), sizeof *a->pos);

    for (int i = 1; i < argc; i++) {
        char *w = argv[i];
        if (strcmp(w, "--") == 0) {
            a->dashdash = true;
            a->rest = argv + i + 1;
            a->nrest = (size_t)(argc - i - 1);
            break;
        }
        if (strcmp(w, "-h") == 0) {
            w = "--help";
        }
        char alias[72];
        if (w[0] == '-' && w[1] != '-' && w[1] != '\0' && w[2] == '\0') {
            for (size_t k = 0; k < a->nopts; k++) {
                if (a->opts[k].short_name == w[1]) {
                    snprintf(alias, sizeof alias, "--%s", a->opts[k].name);
                    w = alias;
                    break;
                }
            }
        }
        if (strncmp(w, "--", 2) != 0 || w[2] == '\0') {
            if (w[0] == '-' && w[1] != '\0') {
                fprintf(err, "corral %s: unknown option '%s' (options start with --; see --help)\n",
                        cmd, w);
                return CR_EINVAL;
            }
            if (stop_at_pos) {
                a->rest = argv + i;
                a->nrest = (size_t)(argc - i);
                break;
            }
            a->pos[a->npos++] = w;
            continue;
        }
        const char *name = w + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        size_t idx = 0;
        const cli_opt *o = find(a, name, len, &idx);
        if (!o) {
            fprintf(err, "corral %s: unknown option '--%.*s' (see corral %s --help)\n", cmd,
                    (int)len, name, cmd);
            return CR_EINVAL;
        }
        const char *val = NULL;
        if (o->kind == CLI_BOOL) {
            if (eq) {
                fprintf(err, "corral %s: --%s takes no value\n", cmd, o->name);
                return CR_EINVAL;
            }
        } else if (eq) {
            val = eq + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            fprintf(err, "corral %s: --%s needs a value (%s)", cmd, o->name,
                    o->arg ? o->arg : "VALUE");
            if (o->allowed) {
                print_allowed(err, o->allowed);
            }
            fputc('\n', err);
            return CR_EINVAL;
        }
        if (set_value(o, &a->vals[idx], cmd, val ? val : "", err) < 0) {
            return CR_EINVAL;
        }
    }
    return 0;
}

void cr__cli_args_fini(cli_args *a)
{
    if (a->vals) {
        for (size_t i = 0; i < a->nopts; i++) {
            free(a->vals[i].list);
        }
    }
    free(a->vals);
    free((void *)a->opts);
    free(a->pos);
    memset(a, 0, sizeof *a);
}

const cli_val *cr__cli_arg(const cli_args *a, const char *name)
{
    size_t idx = 0;
    if (!find(a, name, strlen(name), &idx)) {
        /* a programming error: every name used is in a table */
        fprintf(stderr, "corral: internal: no option '%s'\n", name);
        abort();
    }
    return &a->vals[idx];
}

static void usage_opts(FILE *f, const cli_opt *opts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char left[64];
        char sh[8] = "";
        if (opts[i].short_name) {
            snprintf(sh, sizeof sh, "-%c, ", opts[i].short_name);
        }
        if (opts[i].kind == CLI_BOOL) {
            snprintf(left, sizeof left, "%s--%s", sh, opts[i].name);
        } else {
            snprintf(left, sizeof left, "%s--%s %s", sh, opts[i].name,
                     opts[i].arg ? opts[i].arg : "VALUE");
        }
        fprintf(f, "  %-26s %s", left, opts[i].help ? opts[i].help : "");
        if (opts[i].allowed) {
            print_allowed(f, opts[i].allowed);
        }
        if (opts[i].kind == CLI_LIST) {
            fputs(" (repeatable)", f);
        }
        fputc('\n', f);
    }
}

void cr__cli_usage(FILE *f, const char *cmd, const char *synopsis, const cli_opt *opts,
                   size_t nopts)
{
    fprintf(f, "usage: corral %s %s\n", cmd, synopsis);
    if (nopts) {
        fputs("\nOptions:\n", f);
        usage_opts(f, opts, nopts);
    }
    fputs("\nCommon options:\n", f);
    usage_opts(f, cr__cli_common_opts, cr__cli_ncommon_opts);
}
