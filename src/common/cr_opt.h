/*
 * cr_opt.h - options described once: a table of rows (name, type, offset,
 * bounds, config key, help), from which a role parses its flags and its
 * config file alike and prints its --help, in nginx's manner
 * (ngx_command_t). Adding an option is one row plus its use; a test holds
 * every table against the options tables of docs/ (a documented option
 * that does not exist, or the reverse, fails).
 *
 * A row sets a member of the role's own config struct (offset, typed by
 * type) from a flag's text or a config file's value, checking the bounds.
 * A row of type CR_OPT_CUSTOM is parsed by the role's code (the row still
 * gives the name, the help and the docs check); CR_OPT_NOTE rows are only
 * lines of --help (section titles, positional arguments).
 *
 * The config side takes a cr_opt_value, not a JSON node, so that common/
 * stays free of jansson: the role converts its parser's value.
 *
 * Errors: the set functions return 0 or CR_EINVAL with the reason in err
 * (the row's why, else one made from the type and bounds); the caller
 * prints it with the flag or the file and member, as its messages go.
 * Tables are constant; every function is pure and thread-safe.
 */
#ifndef CR_OPT_H
#define CR_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum cr_opt_type {
    CR_OPT_NOTE,   /* no value: a line of --help only */
    CR_OPT_CUSTOM, /* the role parses it */
    CR_OPT_I32,    /* int32_t in lo..hi */
    CR_OPT_I64,    /* int64_t in lo..hi */
    CR_OPT_U32,    /* uint32_t in lo..hi */
    CR_OPT_U64,    /* uint64_t in lo..hi (lo, hi >= 0) */
    CR_OPT_F64,    /* double in lo..hi */
    CR_OPT_DUR,    /* int64_t nanoseconds in lo..hi; text "90s", "500ms"; a value: seconds */
    CR_OPT_BOOL,   /* bool: true for a flag; a value: true or false */
    CR_OPT_SET,    /* int = lo for a flag (a switch such as --no-backfill: 0) */
    CR_OPT_SETB,   /* bool = (lo != 0) for a flag */
    CR_OPT_STR,    /* const char *: borrowed (points into argv) */
    CR_OPT_STRDUP, /* char *: owned copy, the old one freed */
} cr_opt_type;

typedef struct cr_opt {
    const char *flag; /* "--max-inflight"; NULL: config file only */
    const char *key;  /* config member "max_inflight"; NULL: flag only */
    cr_opt_type type;
    size_t offset;     /* of the member set (offsetof the role's struct) */
    int64_t lo, hi;    /* bounds of numbers (durations in ns); the value of SET/SETB */
    double flo, fhi;   /* bounds of CR_OPT_F64 */
    const char *arg;   /* the value's name in --help; NULL: the flag takes no value */
    const char *help;  /* --help text; '\n' starts an indented line */
    const char *why;   /* a bad flag value's reason; NULL: made from type and bounds */
    bool flag_by_role; /* the flag's text is parsed by the role (a config value by type) */
} cr_opt;

/* A config file's value, converted by the role from its parser's. */
typedef struct cr_opt_value {
    enum { CR_OPT_V_INT, CR_OPT_V_REAL, CR_OPT_V_STR, CR_OPT_V_BOOL, CR_OPT_V_OTHER } kind;
    int64_t i;     /* CR_OPT_V_INT */
    double d;      /* CR_OPT_V_INT and CR_OPT_V_REAL */
    const char *s; /* CR_OPT_V_STR, borrowed */
    bool b;        /* CR_OPT_V_BOOL */
} cr_opt_value;

/* The row of a flag ("--name", exactly) or of a config key; NULL if none. */
const cr_opt *cr_opt_by_flag(const cr_opt *t, size_t n, const char *flag);
const cr_opt *cr_opt_by_key(const cr_opt *t, size_t n, const char *key);

/* Whether the row's flag takes a value. */
bool cr_opt_wants_value(const cr_opt *o);

/* Sets o's member of conf from a flag (text: its value, NULL when it
 * takes none). 0, or CR_EINVAL with the reason in err; CR_ENOTSUP for a
 * CUSTOM or NOTE row, or one whose flag_by_role is set (the caller's). */
int cr_opt_set_flag(const cr_opt *o, void *conf, const char *text, char *err, size_t errlen);

/* Sets o's member of conf from a config file's value; as cr_opt_set_flag. */
int cr_opt_set_value(const cr_opt *o, void *conf, const cr_opt_value *v, char *err, size_t errlen);

/* Prints the --help lines of the rows: "  FLAG ARG" padded to width
 * columns, then the help (a NOTE row without a flag: its help alone). */
void cr_opt_help(FILE *f, const cr_opt *t, size_t n, int width);

#endif
