/*
 * cli_batch.c - what `corral submit` does for a batch script, the
 * environment it sends, and --wait.
 *
 * Script: when the command's first word names a local regular file that
 * starts with "#!", the file is a batch script. Its text travels with the
 * job (at most CLI_SCRIPT_MAX bytes) and the node runs it from its own
 * copy. The comment block at its top may hold directives: "#CORRAL" lines
 * carry corral submit flags as written; "#SBATCH" lines carry the sbatch
 * options that map (docs/cli.md, "Coming from Slurm"), translated to
 * corral flags. Like sbatch, reading stops at the first line that is not
 * a comment or blank. A flag on the command line wins over a directive.
 * An unknown directive, or a bad value, is an error naming the file and
 * line; an sbatch option Corral has no use for (--mail-user...) is named
 * on stderr and skipped.
 */
#include "cli_int.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"
#include "cr_parse.h"
#include "cr_secretshape.h"
#include "cr_time.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

extern char **environ;

#define CLI_SCRIPT_MAX      65536 /* the controller's limit on a shipped script */
#define CLI_DIRECTIVE_WORDS 64    /* words on one directive line */
#define CLI_EXPORT_VAL_MAX  16384 /* longer variables are not exported */
#define CLI_EXPORT_MAX      1024  /* the controller's limit on a job's env */

void cr__cli_script_fini(cli_script *s)
{
    free(s->text);
    for (size_t i = 0; i < s->nwords; i++) {
        free(s->words[i]);
    }
    free(s->words);
    if (s->parsed) {
        cr__cli_args_fini(&s->args);
    }
    memset(s, 0, sizeof *s);
}

static void add_word(char ***v, size_t *n, const char *w)
{
    *v = cr_reallocarray(*v, *n + 2, sizeof **v);
    (*v)[(*n)++] = cr_strdup(w);
    (*v)[*n] = NULL;
}

/* Split a directive's text into words: blanks separate, '...' and "..."
 * quote, '#' after a blank starts a comment. Returns the count or -1. */
static int split_words(const char *p, char **out, int max)
{
    int n = 0;
    while (*p) {
        while (*p == ' ' || *p == '\t') {
            p++;
        }
        if (!*p || *p == '#' || *p == '\r' || *p == '\n') {
            break;
        }
        if (n == max) {
            return -1;
        }
        cr_buf b;
        cr_buf_init(&b);
        cr_buf_puts(&b, "");
        while (*p && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') {
            if (*p == '"' || *p == '\'') {
                char q = *p++;
                while (*p && *p != q) {
                    cr_buf_putc(&b, *p++);
                }
                if (*p != q) {
                    cr_buf_fini(&b);
                    return -1;
                }
                p++;
            } else {
                cr_buf_putc(&b, *p++);
            }
        }
        out[n++] = cr_buf_take(&b);
    }
    return n;
}

/* sbatch options and what they become. */
enum sb_how {
    SB_FLAG,
    SB_BOOL,
    SB_GPUS,
    SB_GRES,
    SB_NTASKS,
    SB_ARRAY,
    SB_SIGNAL,
    SB_NONE,
    SB_NONE_FLAG, /* skipped, takes no value */
    SB_MEMCPU,
    SB_GPT,
    SB_LATER
};
typedef struct sb_opt {
    char short_name;
    const char *name;
    enum sb_how how;
    const char *corral; /* SB_FLAG/SB_BOOL: the corral flag; SB_LATER: why */
} sb_opt;

static const sb_opt sb_opts[] = {
    {'J', "job-name", SB_FLAG, "name"},
    {'t', "time", SB_FLAG, "time"},
    {'N', "nodes", SB_FLAG, "nodes"},
    {'G', "gpus", SB_GPUS, NULL},
    {0, "gres", SB_GRES, NULL},
    {0, "gpus-per-node", SB_GRES, NULL},
    {0, "gpus-per-task", SB_GPT, NULL},
    {'o', "output", SB_FLAG, "output"},
    {'e', "error", SB_FLAG, "error"},
    {'a', "array", SB_ARRAY, NULL},
    {'p', "partition", SB_FLAG, "partition"},
    {0, "ntasks-per-node", SB_FLAG, "tasks-per-node"},
    {'n', "ntasks", SB_NTASKS, NULL},
    {0, "requeue", SB_BOOL, "requeue"},
    {0, "no-requeue", SB_NONE, NULL},
    {0, "export", SB_FLAG, "export"},
    {'D', "chdir", SB_FLAG, "chdir"},
    {0, "priority", SB_FLAG, "priority"},
    {'d', "dependency", SB_FLAG, "dependency"},
    {0, "exclusive", SB_BOOL, "exclusive"},
    {'c', "cpus-per-task", SB_FLAG, "cpus-per-task"},
    {0, "mem", SB_FLAG, "mem"},
    {0, "mem-per-cpu", SB_MEMCPU, NULL},
    {0, "mem-per-gpu", SB_LATER, "memory per GPU is not supported (use --mem, per node)"},
    {'w', "nodelist", SB_FLAG, "nodelist"},
    {'x', "exclude", SB_FLAG, "exclude"},
    {'C', "constraint", SB_FLAG, "constraint"},
    {'b', "begin", SB_FLAG, "begin"},
    {0, "signal", SB_SIGNAL, NULL},
    {0, "mail-type", SB_NONE, NULL},
    {0, "mail-user", SB_NONE, NULL},
    {'A', "account", SB_NONE, NULL},
    {'q', "qos", SB_NONE, NULL},
    {0, "comment", SB_NONE, NULL},
    {0, "nice", SB_NONE, NULL},
    {0, "reservation", SB_NONE, NULL},
    {'L', "licenses", SB_NONE, NULL},
    {0, "wckey", SB_NONE, NULL},
    {0, "profile", SB_NONE, NULL},
    {0, "hint", SB_NONE, NULL},
    {'m', "distribution", SB_NONE, NULL},
    {0, "threads-per-core", SB_NONE, NULL},
    {0, "ntasks-per-core", SB_NONE, NULL},
    {0, "time-min", SB_NONE, NULL},
    {0, "deadline", SB_NONE, NULL},
    {0, "gres-flags", SB_NONE, NULL},
    {0, "tmp", SB_NONE, NULL},
    {0, "mincpus", SB_NONE, NULL},
    {0, "kill-on-invalid-dep", SB_NONE, NULL},
    {0, "no-kill", SB_NONE_FLAG, NULL},
    {0, "get-user-env", SB_NONE_FLAG, NULL},
    {'O', "overcommit", SB_NONE_FLAG, NULL},
    {'s', "oversubscribe", SB_NONE_FLAG, NULL},
    {'Q', "quiet", SB_NONE_FLAG, NULL},
    {0, "cpus-per-gpu", SB_LATER, "CPUs per GPU are not supported (use --cpus-per-task)"},
    {0, "open-mode", SB_FLAG, "open-mode"},
    {0, "parsable", SB_BOOL, "parsable"},
    {'W', "wait", SB_BOOL, "wait"},
};

/* An #SBATCH line's error, "FILE:LINE: #SBATCH ..."; line 0: an sbatch
 * option on the command line, "corral submit: ...". */
static void sb_err(cli_ctx *ctx, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void sb_err(cli_ctx *ctx, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (line > 0) {
        fprintf(ctx->err, "%s:%d: #SBATCH ", file, line);
    } else {
        fprintf(ctx->err, "corral submit: ");
    }
    vfprintf(ctx->err, fmt, ap);
    va_end(ap);
}

/*
 * Translate one #SBATCH line's words into corral flags (appended to out).
 * Returns 0, or -1 after writing "FILE:LINE: why" to err.
 */
/* What #SBATCH lines leave for the end (sb_finish): they depend on other
 * options given anywhere. */
typedef struct sb_acc {
    int64_t ntasks, mem_per_cpu_mb, gpus_per_task;
} sb_acc;

static int sbatch_line(cli_ctx *ctx, const char *file, int line, char **w, int nw, char ***out,
                       size_t *nout, sb_acc *acc)
{
    for (int i = 0; i < nw; i++) {
        const char *word = w[i], *val = NULL;
        char name[64] = "";
        const sb_opt *o = NULL;
        if (strncmp(word, "--", 2) == 0) {
            const char *eq = strchr(word, '=');
            size_t len = eq ? (size_t)(eq - word - 2) : strlen(word + 2);
            snprintf(name, sizeof name, "%.*s", (int)len, word + 2);
            val = eq ? eq + 1 : NULL;
            for (size_t k = 0; k < sizeof sb_opts / sizeof *sb_opts; k++) {
                if (strcmp(sb_opts[k].name, name) == 0) {
                    o = &sb_opts[k];
                }
            }
        } else if (word[0] == '-' && word[1] && word[1] != '-') {
            snprintf(name, sizeof name, "-%c", word[1]);
            val = word[2] ? word + 2 : NULL;
            for (size_t k = 0; k < sizeof sb_opts / sizeof *sb_opts; k++) {
                if (sb_opts[k].short_name == word[1]) {
                    o = &sb_opts[k];
                }
            }
        }
        if (!o) {
            sb_err(ctx, file, line, "%s: unknown or unsupported option\n", word);
            return -1;
        }
        bool takes = o->how != SB_BOOL && o->how != SB_NONE_FLAG;
        if (strcmp(o->name, "requeue") == 0 || strcmp(o->name, "no-requeue") == 0 ||
            strcmp(o->name, "parsable") == 0 || strcmp(o->name, "wait") == 0 ||
            strcmp(o->name, "exclusive") == 0) {
            takes = false;
        }
        if (takes && !val) {
            if (i + 1 >= nw) {
                sb_err(ctx, file, line, "%s: needs a value\n", word);
                return -1;
            }
            val = w[++i];
        } else if (!takes && val && o->short_name == 0) {
            sb_err(ctx, file, line, "%s: takes no value\n", word);
            return -1;
        }
        char flag[80];
        switch (o->how) {
        case SB_FLAG:
            snprintf(flag, sizeof flag, "--%s", o->corral);
            add_word(out, nout, flag);
            add_word(out, nout, val);
            break;
        case SB_BOOL:
            snprintf(flag, sizeof flag, "--%s", o->corral);
            add_word(out, nout, flag);
            break;
        case SB_GPUS:
        case SB_GRES: {
            /* gpus: [type:]N in all; gres/gpus-per-node: [gpu:][type:]N per node */
            const char *v = val;
            if (o->how == SB_GRES && strncmp(v, "gpu:", 4) == 0) {
                v += 4;
            } else if (strcmp(o->name, "gres") == 0) {
                sb_err(ctx, file, line, "--gres=%s: only gpu:[TYPE:]N maps\n", val);
                return -1;
            }
            const char *colon = strrchr(v, ':');
            if (colon) {
                char *type = cr_strndup(v, (size_t)(colon - v));
                add_word(out, nout, "--gpu-type");
                add_word(out, nout, type);
                free(type);
                v = colon + 1;
            }
            add_word(out, nout, o->how == SB_GPUS ? "--gpus" : "--gpus-per-node");
            add_word(out, nout, v);
            if (strcmp(o->name, "gres") != 0) {
                /* sbatch sets these only for -G and --gpus-per-node */
                char *e = cr_asprintf("%s=%s",
                                      o->how == SB_GPUS ? "SLURM_GPUS" : "SLURM_GPUS_PER_NODE", v);
                add_word(out, nout, "--env");
                add_word(out, nout, e);
                free(e);
            }
            break;
        }
        case SB_ARRAY: {
            /* sbatch -a 4 is the one task 4 (corral --array 4 is four copies) */
            add_word(out, nout, "--array");
            if (*val && strspn(val, "0123456789") == strlen(val)) {
                char *r = cr_asprintf("%s-%s", val, val);
                add_word(out, nout, r);
                free(r);
            } else {
                add_word(out, nout, val);
            }
            break;
        }
        case SB_SIGNAL:
            /* [B:|R:]SIG[@SECONDS]: Corral signals every task either way */
            add_word(out, nout, "--signal");
            add_word(out, nout, (val[0] == 'B' || val[0] == 'R') && val[1] == ':' ? val + 2 : val);
            break;
        case SB_NTASKS:
            if (cr_parse_i64(val, 1, 1 << 20, &acc->ntasks) < 0) {
                sb_err(ctx, file, line, "%s: '%s' is not a task count\n", word, val);
                return -1;
            }
            break;
        case SB_MEMCPU: {
            /* sbatch's size: a number of MB, or with K, M, G or T */
            char *end = NULL;
            errno = 0;
            long long v = strtoll(val, &end, 10);
            int64_t mult = 1;
            if (end && *end && end[1] == '\0') {
                mult = *end == 'K' || *end == 'k'   ? 0
                       : *end == 'M' || *end == 'm' ? 1
                       : *end == 'G' || *end == 'g' ? 1024
                       : *end == 'T' || *end == 't' ? 1024 * 1024
                                                    : -1;
                end++;
            }
            if (errno || end == val || *end || v <= 0 || mult < 0 || v > (1LL << 40) / 1024) {
                sb_err(ctx, file, line, "%s: '%s' is not a size (MB, or with K, M, G, T)\n", word,
                       val);
                return -1;
            }
            acc->mem_per_cpu_mb = mult == 0 ? (v + 1023) / 1024 : v * mult;
            break;
        }
        case SB_GPT:
            if (cr_parse_i64(val, 1, 1 << 10, &acc->gpus_per_task) < 0) {
                sb_err(ctx, file, line, "%s: '%s' is not a GPU count\n", word, val);
                return -1;
            }
            break;
        case SB_NONE:
        case SB_NONE_FLAG:
            sb_err(ctx, file, line, "%s: no Corral equivalent, skipped\n", word);
            break;
        case SB_LATER:
            sb_err(ctx, file, line, "%s: %s; skipped\n", word, o->corral);
            break;
        }
    }
    return 0;
}

/* Parse words (words[0] is the command name) as submit flags; errors go to
 * err prefixed "FILE:LINE: ". */
static int check_line(cli_ctx *ctx, const char *file, int line, const cli_opt *opts, size_t nopts,
                      char **words, size_t n)
{
    char *msg = NULL;
    size_t mlen = 0;
    FILE *m = open_memstream(&msg, &mlen);
    cli_args t;
    int rc = cr__cli_args_parse(&t, "submit", opts, nopts, false, (int)n, words, m);
    if (rc == 0 && (t.npos > 0 || t.nrest > 0)) {
        fprintf(m, "corral submit: unexpected word '%s'\n", t.npos ? t.pos[0] : t.rest[0]);
        rc = -1;
    }
    cr__cli_args_fini(&t);
    fclose(m);
    if (rc < 0) {
        const char *text = msg && strncmp(msg, "corral submit: ", 15) == 0 ? msg + 15 : msg;
        fprintf(ctx->err, "%s:%d: %s", file, line, text ? text : "bad directive\n");
    }
    free(msg);
    return rc < 0 ? -1 : 0;
}

/* The value of the last "--NAME VALUE" pair among the script's words, or NULL. */
static const char *word_value(const cli_script *s, const char *name)
{
    const char *v = NULL;
    for (size_t i = 1; i + 1 < s->nwords; i++) {
        if (strcmp(s->words[i], name) == 0) {
            v = s->words[i + 1];
        }
    }
    return v;
}

/*
 * #SBATCH --mem-per-cpu=M: as sbatch, the node's memory limit is M times
 * the CPUs the job has there (-c, default 1, times its tasks on the node),
 * unless --mem gives it; SLURM_MEM_PER_CPU (MB) is set for the job.
 */
static void mem_per_cpu(cli_script *s, int64_t ntasks, int64_t mb)
{
    const char *cpt = word_value(s, "--cpus-per-task"), *tpn = word_value(s, "--tasks-per-node");
    const char *nodes = word_value(s, "--nodes");
    double cpus = cpt ? strtod(cpt, NULL) : 1;
    int64_t per_node = tpn ? strtoll(tpn, NULL, 10) : 0;
    if (per_node <= 0) {
        int64_t nn = nodes ? strtoll(nodes, NULL, 10) : 1;
        nn = nn > 0 ? nn : 1;
        per_node = ntasks > 0 ? (ntasks + nn - 1) / nn : 1;
    }
    cpus = cpus > 0 ? cpus : 1;
    char v[64];
    if (!word_value(s, "--mem")) {
        snprintf(v, sizeof v, "%lldM", (long long)((double)mb * cpus * (double)per_node + 0.5));
        add_word(&s->words, &s->nwords, "--mem");
        add_word(&s->words, &s->nwords, v);
    }
    snprintf(v, sizeof v, "SLURM_MEM_PER_CPU=%lld", (long long)mb);
    add_word(&s->words, &s->nwords, "--env");
    add_word(&s->words, &s->nwords, v);
}

/*
 * The words the whole request decides: -n N as --ntasks N; --mem-per-cpu;
 * --gpus-per-task=G as G x the job's tasks GPUs in all (tasks: -n, else
 * tasks per node x nodes, else 1) unless --gpus is given, and
 * SLURM_GPUS_PER_TASK for the job (srun's default).
 */
static void sb_finish(cli_script *s, const sb_acc *acc)
{
    char v[64];
    if (acc->ntasks > 0) {
        /* -n N: N tasks over the nodes, as --ntasks-per-node N / nodes */
        snprintf(v, sizeof v, "%lld", (long long)acc->ntasks);
        add_word(&s->words, &s->nwords, "--ntasks");
        add_word(&s->words, &s->nwords, v);
    }
    if (acc->mem_per_cpu_mb > 0) {
        mem_per_cpu(s, acc->ntasks, acc->mem_per_cpu_mb);
    }
    if (acc->gpus_per_task > 0) {
        int64_t tasks = acc->ntasks;
        const char *tpn = word_value(s, "--tasks-per-node"), *nodes = word_value(s, "--nodes");
        if (tasks <= 0 && tpn) {
            tasks = strtoll(tpn, NULL, 10) * (nodes ? strtoll(nodes, NULL, 10) : 1);
        }
        tasks = tasks > 0 ? tasks : 1;
        if (!word_value(s, "--gpus")) {
            snprintf(v, sizeof v, "%lld", (long long)(acc->gpus_per_task * tasks));
            add_word(&s->words, &s->nwords, "--gpus");
            add_word(&s->words, &s->nwords, v);
        }
        snprintf(v, sizeof v, "SLURM_GPUS_PER_TASK=%lld", (long long)acc->gpus_per_task);
        add_word(&s->words, &s->nwords, "--env");
        add_word(&s->words, &s->nwords, v);
    }
}

/* f's text into b (initialised here), stopping past CLI_SCRIPT_MAX bytes. */
static void read_capped(FILE *f, cr_buf *b)
{
    cr_buf_init(b);
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0 && b->len <= CLI_SCRIPT_MAX) {
        cr_buf_append(b, chunk, got);
    }
}

char *cr__cli_script_stdin(cli_ctx *ctx)
{
    cr_buf b;
    read_capped(stdin, &b);
    if (b.len == 0) {
        cr_buf_fini(&b);
        return NULL;
    }
    if (b.len > CLI_SCRIPT_MAX || b.len < 2 || memcmp(b.data, "#!", 2) != 0 ||
        memchr(b.data, '\0', b.len)) {
        fprintf(ctx->err,
                "corral submit: stdin is not a batch script (\"#!\" first, text, at most %d "
                "bytes)\n",
                CLI_SCRIPT_MAX);
        cr_buf_fini(&b);
        return NULL;
    }
    return cr_buf_take(&b);
}

int cr__cli_script_load(cli_ctx *ctx, const char *path, const cli_opt *opts, size_t nopts,
                        cli_script *s)
{
    memset(s, 0, sizeof *s);
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        return 0;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        return 0;
    }
    char head[2] = "";
    if (fread(head, 1, 2, f) != 2 || head[0] != '#' || head[1] != '!') {
        fclose(f);
        return 0; /* a program, not a script */
    }
    if (sb.st_size > CLI_SCRIPT_MAX) {
        fclose(f);
        fprintf(ctx->err,
                "corral submit: %s: the script is %lld bytes; at most %d travel with a job\n", path,
                (long long)sb.st_size, CLI_SCRIPT_MAX);
        return -1;
    }
    rewind(f);
    cr_buf b;
    read_capped(f, &b);
    fclose(f);
    if (b.len > CLI_SCRIPT_MAX || memchr(b.data, '\0', b.len)) {
        fprintf(ctx->err, "corral submit: %s: not a text script of at most %d bytes\n", path,
                CLI_SCRIPT_MAX);
        cr_buf_fini(&b);
        return -1;
    }
    return cr__cli_script_text(ctx, path, cr_buf_take(&b), opts, nopts, s);
}

int cr__cli_script_text(cli_ctx *ctx, const char *path, char *text, const cli_opt *opts,
                        size_t nopts, cli_script *s)
{
    memset(s, 0, sizeof *s);
    s->text = text;
    add_word(&s->words, &s->nwords, "submit");
    sb_acc acc = {0, 0, 0};
    int line = 0, rc = 1;
    for (const char *p = s->text; *p && rc > 0;) {
        line++;
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char *l = cr_strndup(p, len);
        p += len + (eol ? 1 : 0);
        const char *t = l + strspn(l, " \t\r");
        bool sbatch = strncmp(l, "#SBATCH", 7) == 0 && (l[7] == ' ' || l[7] == '\t');
        bool corral = strncmp(l, "#CORRAL", 7) == 0 && (l[7] == ' ' || l[7] == '\t');
        if (!sbatch && !corral) {
            bool comment = *t == '#' || *t == '\0';
            free(l);
            if (!comment) {
                break; /* directives end at the first command, as in sbatch */
            }
            continue;
        }
        char *w[CLI_DIRECTIVE_WORDS];
        int nw = split_words(l + 7, w, CLI_DIRECTIVE_WORDS);
        if (nw < 0) {
            fprintf(ctx->err, "%s:%d: unbalanced quote or over %d words\n", path, line,
                    CLI_DIRECTIVE_WORDS);
            rc = -1;
        }
        char **lw = NULL;
        size_t nlw = 0;
        add_word(&lw, &nlw, "submit");
        if (rc > 0 && sbatch && sbatch_line(ctx, path, line, w, nw, &lw, &nlw, &acc) < 0) {
            rc = -1;
        }
        for (int i = 0; rc > 0 && corral && i < nw; i++) {
            add_word(&lw, &nlw, w[i]);
        }
        if (rc > 0 && check_line(ctx, path, line, opts, nopts, lw, nlw) < 0) {
            rc = -1;
        }
        for (size_t i = 1; i < nlw; i++) {
            if (rc > 0) {
                add_word(&s->words, &s->nwords, lw[i]);
            }
        }
        for (size_t i = 0; i < nlw; i++) {
            free(lw[i]);
        }
        free(lw);
        for (int i = 0; i < nw; i++) {
            free(w[i]);
        }
        free(l);
    }
    if (rc > 0) {
        sb_finish(s, &acc);
    }
    if (rc > 0) {
        if (cr__cli_args_parse(&s->args, "submit", opts, nopts, false, (int)s->nwords, s->words,
                               ctx->err) < 0) {
            rc = -1;
        } else {
            s->parsed = true;
        }
    }
    if (rc < 0) {
        cr__cli_script_fini(s);
    }
    return rc;
}

/* An option of opts: the index, or -1. Short "-X" and long "--NAME[=V]". */
static int corral_opt(const cli_opt *opts, size_t nopts, const char *w)
{
    if (w[0] == '-' && w[1] && w[1] != '-' && w[2] == '\0') {
        for (size_t k = 0; k < nopts; k++) {
            if (opts[k].short_name == w[1]) {
                return (int)k;
            }
        }
        return -1;
    }
    if (strncmp(w, "--", 2) != 0 || !w[2]) {
        return -1;
    }
    const char *eq = strchr(w + 2, '=');
    size_t len = eq ? (size_t)(eq - w - 2) : strlen(w + 2);
    for (size_t k = 0; k < nopts; k++) {
        if (strlen(opts[k].name) == len && strncmp(opts[k].name, w + 2, len) == 0) {
            return (int)k;
        }
    }
    return -1;
}

/* An sbatch option of sb_opts named by w ("-J", "-Jname", "--job-name[=V]"). */
static const sb_opt *sbatch_opt(const char *w)
{
    for (size_t k = 0; k < sizeof sb_opts / sizeof *sb_opts; k++) {
        const sb_opt *o = &sb_opts[k];
        if (w[0] == '-' && w[1] && w[1] != '-' && o->short_name == w[1]) {
            return o;
        }
        size_t len = strlen(o->name);
        if (strncmp(w, "--", 2) == 0 && strncmp(w + 2, o->name, len) == 0 &&
            (w[2 + len] == '\0' || w[2 + len] == '=')) {
            return o;
        }
    }
    return NULL;
}

int cr__cli_sbatch_argv(cli_ctx *ctx, const cli_opt *opts, size_t nopts, int argc, char **argv,
                        cli_sbatch_argv *out)
{
    memset(out, 0, sizeof *out);
    add_word(&out->argv, &out->argc_words, argv[0]);
    sb_acc acc = {0, 0, 0};
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--") != 0 && argv[i][1]; i++) {
        const char *w = argv[i];
        int k = corral_opt(opts, nopts, w);
        if (k >= 0) {
            add_word(&out->argv, &out->argc_words, w);
            if (opts[k].kind != CLI_BOOL && !strchr(w, '=') && i + 1 < argc) {
                add_word(&out->argv, &out->argc_words, argv[++i]);
            }
            continue;
        }
        if (strncmp(w, "--wrap", 6) == 0 && (w[6] == '=' || w[6] == '\0')) {
            /* sbatch --wrap=CMD: the job is "#!/bin/sh\nCMD" */
            const char *cmd = w[6] == '=' ? w + 7 : i + 1 < argc ? argv[++i] : NULL;
            if (!cmd || !*cmd) {
                fprintf(ctx->err, "corral submit: --wrap needs a command\n");
                cr__cli_sbatch_argv_fini(out);
                return -1;
            }
            free(out->wrap);
            out->wrap = cr_strdup(cmd);
            continue;
        }
        const sb_opt *o = sbatch_opt(w);
        if (!o) {
            add_word(&out->argv, &out->argc_words, w); /* the parser names it */
            continue;
        }
        char *words[2] = {(char *)w, NULL};
        int nw = 1;
        bool flag =
            o->how == SB_BOOL || o->how == SB_NONE_FLAG || strcmp(o->name, "no-requeue") == 0;
        bool inline_val = strchr(w, '=') != NULL || (w[1] != '-' && w[2] != '\0');
        if (!flag && !inline_val && i + 1 < argc) {
            words[nw++] = argv[++i];
        }
        if (sbatch_line(ctx, "command line", 0, words, nw, &out->argv, &out->argc_words, &acc) <
            0) {
            cr__cli_sbatch_argv_fini(out);
            return -1;
        }
    }
    cli_script t; /* the words so far, finished as a script's */
    memset(&t, 0, sizeof t);
    t.words = out->argv;
    t.nwords = out->argc_words;
    sb_finish(&t, &acc);
    out->argv = t.words;
    out->argc_words = t.nwords;
    for (; i < argc; i++) {
        add_word(&out->argv, &out->argc_words, argv[i]);
    }
    return 0;
}

void cr__cli_sbatch_argv_fini(cli_sbatch_argv *a)
{
    for (size_t i = 0; i < a->argc_words; i++) {
        free(a->argv[i]);
    }
    free(a->argv);
    free(a->wrap);
    memset(a, 0, sizeof *a);
}

/* --- environment ------------------------------------------------------------ */

/* Names never exported: Corral's and Slurm's own, the per-task launch
 * variables and GPU selection (the node sets them: NVIDIA_*, CUDA_MPS_*, the
 * login node's CUDA_VISIBLE_DEVICES), preloads of the submitter's shell
 * (LD_PRELOAD, LD_AUDIT: a profiler or sandbox of the login node must not
 * follow silently; LD_LIBRARY_PATH is exported, the module-system habit),
 * and what only means something in the submitter's session. */
static bool never_exported(const char *name, size_t len)
{
    static const char *const prefixes[] = {"CORRAL_", "SLURM_",  "PET_",      "SSH_",
                                           "XDG_",    "NVIDIA_", "CUDA_MPS_", NULL};
    static const char *const names[] = {"RANK",
                                        "LOCAL_RANK",
                                        "WORLD_SIZE",
                                        "LOCAL_WORLD_SIZE",
                                        "GROUP_RANK",
                                        "NODE_RANK",
                                        "NNODES",
                                        "MASTER_ADDR",
                                        "MASTER_PORT",
                                        "CUDA_VISIBLE_DEVICES",
                                        "ROCR_VISIBLE_DEVICES",
                                        "HIP_VISIBLE_DEVICES",
                                        "GPU_DEVICE_ORDINAL",
                                        "LD_PRELOAD",
                                        "LD_AUDIT",
                                        "PWD",
                                        "OLDPWD",
                                        "SHLVL",
                                        "_",
                                        "HOSTNAME",
                                        "DISPLAY",
                                        "DBUS_SESSION_BUS_ADDRESS",
                                        "KRB5CCNAME",
                                        "GPG_AGENT_INFO",
                                        "TMUX",
                                        "TMUX_PANE",
                                        "TERM_SESSION_ID",
                                        "LS_COLORS",
                                        NULL};
    for (size_t i = 0; prefixes[i]; i++) {
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0) {
            return true;
        }
    }
    for (size_t i = 0; names[i]; i++) {
        if (strlen(names[i]) == len && strncmp(name, names[i], len) == 0) {
            return true;
        }
    }
    return false;
}

static void put_env(json_t *env, const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv || strlen(eq + 1) > CLI_EXPORT_VAL_MAX) {
        return;
    }
    char *k = cr_strndup(kv, (size_t)(eq - kv));
    json_object_set_new(env, k, json_string(eq + 1));
    free(k);
}

/* The default --export: what a job may want from the submitter's session
 * and that never holds a credential (the node sets PATH, HOME, USER, SHELL
 * and LANG itself, docs/cli.md). */
static bool default_exported(const char *name, size_t len)
{
    static const char *const names[] = {"LANG", "LANGUAGE", "TZ", "TERM", NULL};
    if (len > 3 && strncmp(name, "LC_", 3) == 0) {
        return true;
    }
    for (size_t i = 0; names[i]; i++) {
        if (strlen(names[i]) == len && strncmp(name, names[i], len) == 0) {
            return true;
        }
    }
    return false;
}

/* A named variable is sent as named; one that looks like a credential is
 * said so, once, with the better way. */
static void named_warn(cli_ctx *ctx, const char *name, const char *value)
{
    if (cr_secret_name(name, strlen(name)) || cr_secret_value(value)) {
        fprintf(ctx->err,
                "corral %s: --export: %s looks like a credential; it is sent as named (sealed "
                "at rest, its value redacted by show); --secret %s keeps it from the job's "
                "shown environment altogether\n",
                ctx->cmd ? ctx->cmd : "submit", name, name);
    }
}

int cr__cli_export_env(cli_ctx *ctx, const char *spec, json_t *env)
{
    bool all = false, deflt = !spec;
    if (spec) {
        char *copy = cr_strdup(spec), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (strcmp(t, "ALL") == 0) {
                all = true;
            } else if (strcmp(t, "NONE") == 0) {
                continue;
            } else if (strchr(t, '=')) {
                if (t[0] == '=') {
                    fprintf(ctx->err, "corral submit: --export: '%s' is not NAME or NAME=VALUE\n",
                            t);
                    free(copy);
                    return -1;
                }
                put_env(env, t);
                char *eq = strchr(t, '=');
                *eq = '\0';
                named_warn(ctx, t, eq + 1);
            } else {
                const char *v = getenv(t);
                if (v) {
                    char *kv = cr_asprintf("%s=%s", t, v);
                    put_env(env, kv);
                    free(kv);
                    named_warn(ctx, t, v);
                }
            }
        }
        free(copy);
    }
    for (char **e = environ; (all || deflt) && e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || json_object_size(env) >= CLI_EXPORT_MAX) {
            continue;
        }
        size_t len = (size_t)(eq - *e);
        if (deflt && !default_exported(*e, len)) {
            continue;
        }
        char *k = cr_strndup(*e, len);
        bool skip = never_exported(*e, len) || cr_secret_name(*e, len) || cr_secret_value(eq + 1) ||
                    json_object_get(env, k) != NULL;
        free(k);
        if (!skip) {
            put_env(env, *e);
        }
    }
    return 0;
}

/* --- --wait --------------------------------------------------------------------- */

int cr__cli_wait_jobs(cli_ctx *ctx, const json_t *ids)
{
    int code = 0;
    cr_client_res res;
    cr_client_res_init(&res);
    for (size_t i = 0; i < json_array_size(ids); i++) {
        int64_t id = (int64_t)json_integer_value(json_array_get(ids, i));
        for (;;) {
            int rc = cr_client_job_get(ctx->client, id, &res);
            if (rc < 0) {
                code = cr__cli_fail(ctx, rc, &res);
                goto out;
            }
            const char *st = json_string_value(json_object_get(res.body, "state"));
            int64_t ec = json_integer_value(json_object_get(res.body, "exit_code"));
            int64_t sig = json_integer_value(json_object_get(res.body, "signal"));
            int jc = -1;
            if (st && strcmp(st, "completed") == 0) {
                jc = 0;
            } else if (st && strcmp(st, "failed") == 0) {
                jc = sig > 0 ? (int)(128 + sig) : ec > 0 ? (int)ec : 1;
            } else if (st && strcmp(st, "cancelled") == 0) {
                jc = ec > 0 ? (int)ec : 1;
            }
            if (jc >= 0) {
                code = jc > code ? jc : code;
                break;
            }
            struct timespec ts = {.tv_sec = 0, .tv_nsec = 300 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
out:
    cr_client_res_fini(&res);
    return code;
}

int cr__cli_parse_begin(const char *s, int64_t now_ns, int64_t *out_ns)
{
    int64_t d;
    if (strcmp(s, "now") == 0) {
        *out_ns = now_ns;
        return 0;
    }
    if (strncmp(s, "now+", 4) == 0) {
        /* as sbatch: now+60 is seconds; units as elsewhere (90s, 2h) */
        if (cr_duration_parse(s + 4, &d) < 0) {
            return CR_EINVAL;
        }
        *out_ns = now_ns + d;
        return 0;
    }
    int hh, mm, ss = 0, used = 0;
    if ((sscanf(s, "%2d:%2d:%2d%n", &hh, &mm, &ss, &used) == 3 ||
         sscanf(s, "%2d:%2d%n", &hh, &mm, &used) == 2) &&
        (size_t)used == strlen(s) && hh >= 0 && hh < 24 && mm >= 0 && mm < 60 && ss >= 0 &&
        ss < 60) {
        /* today at that local time, or tomorrow when it has passed */
        time_t now = (time_t)(now_ns / CR_NS_PER_SEC);
        struct tm tm;
        localtime_r(&now, &tm);
        tm.tm_hour = hh;
        tm.tm_min = mm;
        tm.tm_sec = ss;
        tm.tm_isdst = -1;
        time_t at = mktime(&tm);
        if (at <= now) {
            tm.tm_mday++;
            tm.tm_isdst = -1;
            at = mktime(&tm);
        }
        *out_ns = (int64_t)at * CR_NS_PER_SEC;
        return 0;
    }
    return cr__cli_parse_rfc3339(s, out_ns);
}
