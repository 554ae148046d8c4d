/*
 * cli_int.h - private contract shared by the files of the 'corral' client
 * commands (src/cli).
 *
 * Flow of one command: cr_cli_main finds the command in its table, parses
 * its flags (cli_args.c: one table of options per command plus the common
 * ones, each with a kind and allowed values, so every bad flag gets a message
 * naming it and exit code 2), resolves the server and token (flags, then
 * CORRAL_SERVER / CORRAL_TOKEN, then the config file, cli_config.c), and runs
 * the command, which talks to the controller through src/client and prints a
 * table (cli_table.c) or, with --json, the server's JSON.
 *
 * Exit codes (docs/cli.md): 0 ok, 1 the server said no (4xx/5xx), 2 bad
 * usage, 3 the server could not be reached. No globals: everything lives in
 * the cli_ctx passed first.
 */
#ifndef CLI_INT_H
#define CLI_INT_H

#include "cr_buf.h"
#include "cr_client.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_SERVER = 1,  /* the server answered 4xx/5xx */
    CLI_EXIT_USAGE = 2,   /* bad command line or config file */
    CLI_EXIT_UNREACH = 3, /* no answer from the server */
};

/* --- Flags ------------------------------------------------------------------ */

enum cli_kind {
    CLI_BOOL,  /* --flag (no value) */
    CLI_STR,   /* --flag VALUE (one of allowed when set: "a|b|c") */
    CLI_INT,   /* integer in [min, max] */
    CLI_F64,   /* finite number in [min, max] */
    CLI_COUNT, /* count with suffix: 7b, 1e8, 500m (cr_parse_count) */
    CLI_DUR,   /* duration: 90s, 1h30m, 2d, or seconds; value in i (ns) */
    CLI_LIST,  /* repeatable --flag VALUE; every value kept in order */
    CLI_TLIM,  /* time limit as Slurm writes it (90 = minutes, 1:00:00, 2-00:00:00)
                  or a suffixed duration (90s, 2h); value in i (ns) */
};

typedef struct cli_opt {
    const char *name;    /* long name without "--" */
    enum cli_kind kind;  /* how the value is parsed */
    const char *arg;     /* value placeholder for help ("N", "TYPE") */
    const char *help;    /* one line */
    const char *allowed; /* CLI_STR: "a|b|c" when the set is closed; NULL: any */
    int64_t min, max;    /* CLI_INT / CLI_F64 bounds */
    char short_name;     /* one-letter alias ('f' for -f), 0: none */
} cli_opt;

typedef struct cli_val {
    bool set;          /* given on the command line */
    const char *str;   /* the (last) text given, borrowed from argv */
    int64_t i;         /* CLI_INT value; CLI_DUR nanoseconds; CLI_BOOL 1 */
    double f;          /* CLI_F64 / CLI_COUNT value */
    const char **list; /* CLI_LIST values (array owned, strings borrowed) */
    size_t count;      /* CLI_LIST count */
} cli_val;

typedef struct cli_args {
    const cli_opt *opts; /* command options then common ones (owned array) */
    size_t nopts;
    cli_val *vals; /* one per opt (owned) */
    char **pos;    /* positional arguments (array owned, strings borrowed) */
    size_t npos;
    char **rest; /* words after "--" (borrowed from argv) */
    size_t nrest;
    bool dashdash; /* "--" was given */
} cli_args;

/* Parse argv[1..argc-1] (argv[0] is the command). stop_at_pos: the first
 * positional word ends option parsing (the rest go to rest, as after "--").
 * Returns 0 or CR_EINVAL after writing "corral CMD: ..." naming the flag
 * (and its allowed values) to err. */
int cr__cli_args_parse(cli_args *a, const char *cmd, const cli_opt *opts, size_t nopts,
                       bool stop_at_pos, int argc, char **argv, FILE *err);
void cr__cli_args_fini(cli_args *a);
/* The value of option name (must exist in the tables). */
const cli_val *cr__cli_arg(const cli_args *a, const char *name);
/* Print "usage: corral CMD SYNOPSIS" and the options to f. */
void cr__cli_usage(FILE *f, const char *cmd, const char *synopsis, const cli_opt *opts,
                   size_t nopts);

/* --- Config file ------------------------------------------------------------ */

typedef struct cli_config {
    char *server;       /* base URL or NULL */
    char *token;        /* bearer token or NULL */
    char *ca_file;      /* PEM bundle or NULL */
    bool insecure;      /* skip TLS verification */
    int64_t timeout_ns; /* request timeout, 0: client default */
} cli_config;

void cr__cli_config_init(cli_config *cfg);
void cr__cli_config_fini(cli_config *cfg);
/* Parse text (name for messages). Returns 0, or CR_EPARSE after writing
 * "NAME:LINE: what" to err. */
int cr__cli_config_parse(cli_config *cfg, const char *name, const char *text, FILE *err);
/* Load path; a missing file is not an error when optional. */
int cr__cli_config_load(cli_config *cfg, const char *path, bool optional, FILE *err);

/* --- Tables ------------------------------------------------------------------ */

typedef struct cli_table {
    size_t ncols; /* columns */
    char **cells; /* row-major, header row first (owned strings) */
    size_t nrows; /* rows including the header */
    size_t cap;   /* allocated rows */
    bool *right;  /* per column: right-align */
} cli_table;

/* headers: ncols strings (borrowed); a header starting with '>' is
 * right-aligned (the '>' is not printed). */
void cr__cli_table_init(cli_table *t, size_t ncols, const char *const *headers);
void cr__cli_table_fini(cli_table *t);
/* Append a row of ncols cells (borrowed, copied; NULL prints as "-"). */
void cr__cli_table_row(cli_table *t, const char *const *cells);
/* Columns separated by two spaces; the last column is not padded; widths
 * count UTF-8 characters. */
void cr__cli_table_print(const cli_table *t, FILE *f);

/* s with control characters (C0, DEL, C1) written as \xNN, into buf (so a
 * name from the server cannot move the cursor or forge lines). Returns buf. */
char *cr__cli_escape(const char *s, char *buf, size_t len);
/* Text of a JSON scalar for a cell, into buf: strings (escaped), integers,
 * reals with up to 2 decimals, true/false, null as "-"; arrays of scalars
 * joined with ','. Returns buf. */
char *cr__cli_json_text(const json_t *v, char *buf, size_t len);
/* Human age "3m12s" of an RFC 3339 time relative to now_ns, "-" if absent. */
char *cr__cli_age(const char *rfc3339, int64_t now_ns, char *buf, size_t len);
/* Parse an RFC 3339 time ("2026-11-30T04:35:00Z", fractions and offsets
 * allowed) between 1970 and 2255 (CR_ERANGE outside). */
int cr__cli_parse_rfc3339(const char *s, int64_t *out_ns);

/* --- Shared views of API objects (cli_jobs.c, cli_admin.c) --------------------- */

typedef struct cli_ctx cli_ctx;

/* Jobs table; only_active hides finished jobs. */
void cr__cli_jobs_table(cli_ctx *ctx, const json_t *items, bool only_active, FILE *f);
/* Nodes table (name, state, rack, GPU types, counts, reasons). */
void cr__cli_nodes_table(const json_t *items, FILE *f);
/* Table of an array of flat objects: one column per member of the first. */
void cr__cli_items_table(const json_t *items, FILE *f);
/* "Events:" and a TIME/WHAT/WHY table of a job's or service's events;
 * prints nothing when there are none. */
void cr__cli_events_table(const json_t *events, FILE *f);
/* A GPU object's model name ("model", else "type"), "?" if none. */
const char *cr__cli_gpu_model(const json_t *g);
/* Whether a GPU object shows an allocation (job/jobs/allocation member, or
 * MIG instances in use). */
bool cr__cli_gpu_allocated(const json_t *g);
/* Whether some of a GPU's MIG instances are in use ("mig_busy" > 0). */
bool cr__cli_gpu_mig_busy(const json_t *g);
/* Whether a GPU object's health is "ok" (or absent). */
bool cr__cli_gpu_healthy(const json_t *g);
/* A node's GPU counts: total, allocated, unhealthy; models appends the
 * distinct model names (comma-separated) when not NULL. */
void cr__cli_node_counts(const json_t *node, size_t *total, size_t *alloc, size_t *bad,
                         cr_buf *models);
/* Why a node or its GPUs are out of the pool: the node's reason, then each
 * unhealthy GPU's "gpuN: health reason". */
void cr__cli_node_reason(const json_t *node, cr_buf *b);

/* --- Batch scripts, exported environment, --wait (cli_batch.c) ---------------- */

/* A batch script given as the command, and its directives. */
typedef struct cli_script {
    char *text;   /* owned: the script; NULL when the command is not a local script */
    char **words; /* owned: the directives as submit flags, words[0] = "submit" */
    size_t nwords;
    cli_args args; /* the directives parsed (valid when parsed) */
    bool parsed;
} cli_script;

/* Load path as a batch script when it is a local file starting with "#!"
 * and parse its #CORRAL / #SBATCH directives with opts. Returns 1 (a
 * script), 0 (not one: s stays empty), or -1 after writing "FILE:LINE:
 * why" to ctx->err. */
int cr__cli_script_load(cli_ctx *ctx, const char *path, const cli_opt *opts, size_t nopts,
                        cli_script *s);
/* The same for a script's text (owned by s from here; path names it in
 * errors): --wrap and a script on stdin. */
int cr__cli_script_text(cli_ctx *ctx, const char *path, char *text, const cli_opt *opts,
                        size_t nopts, cli_script *s);
void cr__cli_script_fini(cli_script *s);
/* A batch script on stdin (sbatch <<EOF ... EOF): its text (new) when it
 * starts with "#!" and is at most the script limit of text, else NULL
 * (after a word on ctx->err when stdin was not empty). */
char *cr__cli_script_stdin(cli_ctx *ctx);
/* sbatch's options on `corral submit`'s command line (docs/slurm.md):
 * the words before the command that are not opts but sbatch options
 * (-J NAME, --gres=gpu:2, --ntasks 4, --mail-user...) translated as an
 * #SBATCH line would be; --wrap=CMD kept apart. */
typedef struct cli_sbatch_argv {
    char **argv; /* owned, NULL-terminated */
    size_t argc_words;
    char *wrap; /* owned: --wrap's command, or NULL */
} cli_sbatch_argv;
int cr__cli_sbatch_argv(cli_ctx *ctx, const cli_opt *opts, size_t nopts, int argc, char **argv,
                        cli_sbatch_argv *out);
void cr__cli_sbatch_argv_fini(cli_sbatch_argv *a);
/* Fill env (an object) per --export (docs/cli.md): spec NULL = the
 * default allow-list (LANG, LANGUAGE, LC_*, TZ, TERM); "ALL" (the whole
 * environment minus credential-looking names and values, cr_secretshape.h,
 * Corral's, Slurm's, GPU-selection, LD_PRELOAD/LD_AUDIT and session
 * variables); "NONE"; and names "NAME,NAME=VALUE,..." (what it names is
 * sent as is, with a warning on stderr when it looks like a credential).
 * A list without ALL sends only what it names. -1 after a message. */
int cr__cli_export_env(cli_ctx *ctx, const char *spec, json_t *env);
/* cli_run.c: after `corral run` submitted job id: stream its stdout and
 * stderr until it ends; its exit code (130 after Ctrl-C, which cancels). */
int cr__cli_run_follow(cli_ctx *ctx, int64_t id);
/* After `corral alloc` submitted job id: wait until it runs, run cmd (ncmd
 * words; none: $SHELL) here with CORRAL_JOB_ID, SLURM_JOB_ID and the node
 * list set, cancel the job when it ends; its exit code. */
int cr__cli_alloc_session(cli_ctx *ctx, int64_t id, char **cmd, size_t ncmd);
/* --begin: "now", "now+DURATION", "HH:MM[:SS]" (local; tomorrow once
 * past) or RFC 3339, against now_ns. CR_EINVAL when none of those. */
int cr__cli_parse_begin(const char *s, int64_t now_ns, int64_t *out_ns);
/* Wait for the jobs (ids: an array) to end; the exit code is the worst of
 * theirs (completed 0, failed: its exit code or 128+signal, cancelled 1+). */
int cr__cli_wait_jobs(cli_ctx *ctx, const json_t *ids);

/* --- Context and commands ---------------------------------------------------- */

struct cli_ctx {
    const char *cmd;      /* command name (argv[0]) */
    FILE *out;            /* results */
    FILE *err;            /* messages */
    bool json;            /* --json */
    cr_client_opts copts; /* resolved connection options (strings owned by ctx) */
    char *server;         /* owned */
    char *token;          /* owned */
    char *ca_file;        /* owned */
    cr_client *client;    /* created by cr__cli_connect */
    int64_t now_ns;       /* wall clock at start, for ages */
};

/* cr_cli_main with its streams given (tests capture them). */
int cr__cli_run(int argc, char **argv, FILE *out, FILE *err);

/* Resolve server/token/TLS from the parsed common flags, the environment and
 * the config file, and create ctx->client. Returns an exit code. */
int cr__cli_connect(cli_ctx *ctx, const cli_args *a);
/* Map a client call's result to an exit code, printing the server's message
 * (or the transport error) to ctx->err. */
int cr__cli_fail(cli_ctx *ctx, int rc, const cr_client_res *res);
/* Print a JSON document to ctx->out (indented, one trailing newline). */
void cr__cli_print_json(cli_ctx *ctx, const json_t *doc);
/* Parse a job id argument; on failure prints a message naming it. */
int cr__cli_job_id(cli_ctx *ctx, const char *s, int64_t *out);

/* The list and revoke verbs that tokens, keys and bootstrap tokens share
 * (cli_common.c). */
typedef void (*cli_items_fn)(const json_t *items, FILE *f);
/* Prints the answer of a list request (rc: what the request returned):
 * its JSON with --json, else its "items" through table (NULL:
 * cr__cli_items_table). Returns the exit code. */
int cr__cli_print_list(cli_ctx *ctx, int rc, const cr_client_res *res, cli_items_fn table);
/* Checks that a->pos[first..] are ids (1..INT64_MAX/2); else says
 * "corral <what>: '<arg>' is not <noun>" and returns CLI_EXIT_USAGE. */
int cr__cli_check_ids(cli_ctx *ctx, const cli_args *a, size_t first, const char *what,
                      const char *noun);
/* One request per id of a->pos[first..]: fn's return is a cr_client_*
 * call's. Each answer printed: its JSON with --json when json is true,
 * else "<done> <id>". Stops at an unreachable server. Returns the worst
 * exit code. */
typedef int (*cli_id_fn)(cli_ctx *ctx, const char *id, cr_client_res *res);
int cr__cli_each_id(cli_ctx *ctx, const cli_args *a, size_t first, cli_id_fn fn, bool json,
                    const char *done, cr_client_res *res);

/* Commands: argv[0] is the command name; each returns an exit code. */
typedef int (*cli_cmd_fn)(cli_ctx *ctx, int argc, char **argv);
int cr__cli_submit(cli_ctx *ctx, int argc, char **argv);
int cr__cli_jobs(cli_ctx *ctx, int argc, char **argv);
int cr__cli_show(cli_ctx *ctx, int argc, char **argv);
int cr__cli_job_action(cli_ctx *ctx, int argc, char **argv); /* cancel hold release requeue */
int cr__cli_logs(cli_ctx *ctx, int argc, char **argv);
int cr__cli_nodes(cli_ctx *ctx, int argc, char **argv);
/* nodes delete|label (cli_nodes.c); argv[1] is the verb. */
int cr__cli_nodes_lifecycle(cli_ctx *ctx, int argc, char **argv);
int cr__cli_drain(cli_ctx *ctx, int argc, char **argv); /* drain undrain */
int cr__cli_usage_cmd(cli_ctx *ctx, int argc, char **argv);
int cr__cli_tenants(cli_ctx *ctx, int argc, char **argv);
int cr__cli_tokens(cli_ctx *ctx, int argc, char **argv);
/* cli_keys.c: corral keys, and the token rows of corral usage (printed, or
 * the document into *out when out is not NULL; CR_ENOENT from an older
 * controller). */
int cr__cli_keys(cli_ctx *ctx, int argc, char **argv);
int cr__cli_usage_tokens(cli_ctx *ctx, json_t **out);
int cr__cli_top(cli_ctx *ctx, int argc, char **argv);
int cr__cli_services(cli_ctx *ctx, int argc, char **argv);
int cr__cli_admin(cli_ctx *ctx, int argc, char **argv); /* bootstrap tokens */
int cr__cli_audit(cli_ctx *ctx, int argc, char **argv);
/* cli_login.c: the token-paste login; the default token file it writes
 * (returned new, NULL without HOME and XDG_CONFIG_HOME). */
#define CLI_LOGIN_TOKEN_MAX 16384
int cr__cli_login(cli_ctx *ctx, int argc, char **argv);
char *cr__cli_default_token_path(void);
int cr__cli_pools(cli_ctx *ctx, int argc, char **argv); /* cli_pools.c */
int cr__cli_data(cli_ctx *ctx, int argc, char **argv);  /* cli_data.c */
/* corral nodes approve NODE (from cr__cli_nodes). */
int cr__cli_node_approve(cli_ctx *ctx, const cli_args *a, const char *node);

/* Common options every command accepts (--server, --token, --json, ...). */
extern const cli_opt cr__cli_common_opts[];
extern const size_t cr__cli_ncommon_opts;

/* Parse argv with the command's options plus the common ones; handles
 * --help (prints usage, *exit_code 0) and errors (*exit_code 2). Returns 0
 * to go on, or 1 when the command must end with *exit_code. */
int cr__cli_begin(cli_ctx *ctx, cli_args *a, const char *synopsis, const cli_opt *opts,
                  size_t nopts, bool stop_at_pos, int argc, char **argv, int *exit_code);

#endif
