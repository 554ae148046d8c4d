/*
 * cli_common.c - what every client command shares: the common options,
 * cr__cli_begin (parse and --help), server and token resolution
 * (cr__cli_connect), the mapping of results to exit codes and messages,
 * JSON printing. The commands call these; nothing here calls a command,
 * so the dispatcher (cli_main.c) and the commands do not form a circle.
 */
#include "cli_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_parse.h"
#include "cr_time.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const cli_opt cr__cli_common_opts[] = {
    {"server", CLI_STR, "URL[,URL...]",
     "controller URL, or the URLs of an HA trio (env CORRAL_SERVER; "
     "default " CR_CLIENT_DEFAULT_SERVER ")",
     NULL, 0, 0, 0},
    {"token", CLI_STR, "TOKEN",
     "bearer token (visible in ps: prefer --token-file or env CORRAL_TOKEN)", NULL, 0, 0, 0},
    {"token-file", CLI_STR, "FILE", "file holding the bearer token (env CORRAL_TOKEN_FILE)", NULL,
     0, 0, 0},
    {"config", CLI_STR, "FILE", "config file (env CORRAL_CONFIG; default ~/.config/corral/config)",
     NULL, 0, 0, 0},
    {"ca-file", CLI_STR, "FILE", "PEM bundle to verify the server's certificate", NULL, 0, 0, 0},
    {"insecure", CLI_BOOL, NULL, "do not verify the server's TLS certificate", NULL, 0, 0, 0},
    {"timeout", CLI_DUR, "DURATION", "request timeout (default 30s)", NULL, 0, 0, 0},
    {"json", CLI_BOOL, NULL, "print the server's JSON instead of a table", NULL, 0, 0, 0},
    {"help", CLI_BOOL, NULL, "show this help", NULL, 0, 0, 0},
};
const size_t cr__cli_ncommon_opts = sizeof cr__cli_common_opts / sizeof cr__cli_common_opts[0];

int cr__cli_begin(cli_ctx *ctx, cli_args *a, const char *synopsis, const cli_opt *opts,
                  size_t nopts, bool stop_at_pos, int argc, char **argv, int *exit_code)
{
    if (cr__cli_args_parse(a, ctx->cmd, opts, nopts, stop_at_pos, argc, argv, ctx->err) < 0) {
        *exit_code = CLI_EXIT_USAGE;
        return 1;
    }
    if (cr__cli_arg(a, "help")->set) {
        cr__cli_usage(ctx->out, ctx->cmd, synopsis, opts, nopts);
        *exit_code = CLI_EXIT_OK;
        return 1;
    }
    ctx->json = cr__cli_arg(a, "json")->set;
    return 0;
}

static char *default_config_path(void)
{
    const char *xdg = getenv("XDG_CONFIG_HOME");
    if (xdg && *xdg) {
        return cr_asprintf("%s/corral/config", xdg);
    }
    const char *home = getenv("HOME");
    if (home && *home) {
        return cr_asprintf("%s/.config/corral/config", home);
    }
    return NULL;
}

/* The first line of a token file, trimmed; returned new, NULL when none. */
static char *read_token_file(const char *path)
{
    FILE *f = fopen(path, "r");
    /* an OIDC ID token is longer than a Corral token: up to 16 KiB */
    char *line = cr_malloc(CLI_LOGIN_TOKEN_MAX + 2);
    char *t = NULL;
    if (f && fgets(line, CLI_LOGIN_TOKEN_MAX + 2, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *s = line;
        while (*s == ' ' || *s == '\t') {
            s++;
        }
        size_t n = strlen(s);
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) {
            s[--n] = '\0';
        }
        t = *s ? cr_strdup(s) : NULL;
    }
    if (f) {
        fclose(f);
    }
    free(line);
    return t;
}

static bool is_url(const char *s)
{
    return strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0;
}

/* The controller's rate limit answered 429: the client waits and repeats
 * (cr_client.h); say so, so that a pause is not taken for a hang. */
static void say_rate_wait(void *ud, unsigned wait_s, const char *message)
{
    cli_ctx *ctx = ud;
    fprintf(ctx->err, "corral %s: %s; waiting %u s, then trying again\n", ctx->cmd, message,
            wait_s);
}

int cr__cli_connect(cli_ctx *ctx, const cli_args *a)
{
    int code = CLI_EXIT_OK;
    cli_config cfg;
    cr__cli_config_init(&cfg);
    char *path = NULL;
    bool optional = false;
    const cli_val *v = cr__cli_arg(a, "config");
    const char *env_cfg = getenv("CORRAL_CONFIG");
    if (v->set) {
        path = cr_strdup(v->str);
    } else if (env_cfg && *env_cfg) {
        path = cr_strdup(env_cfg);
    } else {
        path = default_config_path();
        optional = true;
    }
    if (path && cr__cli_config_load(&cfg, path, optional, ctx->err) < 0) {
        code = CLI_EXIT_USAGE;
        goto out;
    }

    const char *server = cfg.server;
    const char *from = "config file";
    const char *env_server = getenv("CORRAL_SERVER");
    if (cr__cli_arg(a, "server")->set) {
        server = cr__cli_arg(a, "server")->str;
        from = "--server";
    } else if (env_server && *env_server) {
        server = env_server;
        from = "CORRAL_SERVER";
    }
    if (server && !is_url(server)) {
        fprintf(ctx->err, "corral %s: %s: '%s' is not an http:// or https:// URL\n", ctx->cmd, from,
                server);
        code = CLI_EXIT_USAGE;
        goto out;
    }
    /* --token, --token-file, CORRAL_TOKEN, CORRAL_TOKEN_FILE, the config file. */
    const char *token = cfg.token;
    const char *env_token = getenv("CORRAL_TOKEN"), *env_file = getenv("CORRAL_TOKEN_FILE");
    const char *tfile = NULL, *tfrom = NULL;
    char *file_token = NULL;
    if (cr__cli_arg(a, "token")->set) {
        token = cr__cli_arg(a, "token")->str;
    } else if (cr__cli_arg(a, "token-file")->set) {
        tfile = cr__cli_arg(a, "token-file")->str;
        tfrom = "--token-file";
    } else if (env_token && *env_token) {
        token = env_token;
    } else if (env_file && *env_file) {
        tfile = env_file;
        tfrom = "CORRAL_TOKEN_FILE";
    }
    char *login_file = NULL;
    if (!tfile && !token) {
        /* the token `corral login` kept, when nothing else names one */
        login_file = cr__cli_default_token_path();
        if (login_file && access(login_file, R_OK) == 0) {
            tfile = login_file;
            tfrom = "the token of corral login";
        }
    }
    if (tfile) {
        file_token = read_token_file(tfile);
        if (!file_token) {
            fprintf(ctx->err, "corral %s: %s: cannot read a token from '%s'\n", ctx->cmd, tfrom,
                    tfile);
            free(login_file);
            code = CLI_EXIT_USAGE;
            goto out;
        }
        token = file_token;
    }
    free(login_file);
    ctx->server = cr_strdup(server ? server : CR_CLIENT_DEFAULT_SERVER);
    ctx->token = token ? cr_strdup(token) : NULL;
    free(file_token);
    const cli_val *ca = cr__cli_arg(a, "ca-file");
    ctx->ca_file = ca->set ? cr_strdup(ca->str) : (cfg.ca_file ? cr_strdup(cfg.ca_file) : NULL);
    cr_client_opts o = {
        .server = ctx->server,
        .token = ctx->token,
        .ca_file = ctx->ca_file,
        .insecure = cfg.insecure || cr__cli_arg(a, "insecure")->set,
        .timeout_ns =
            cr__cli_arg(a, "timeout")->set ? cr__cli_arg(a, "timeout")->i : cfg.timeout_ns,
    };
    ctx->copts = o;
    if (cr_client_new(&o, &ctx->client) < 0) {
        fprintf(ctx->err, "corral %s: cannot set up the HTTP client\n", ctx->cmd);
        code = CLI_EXIT_USAGE;
    } else {
        cr_client_set_wait_hook(ctx->client, say_rate_wait, ctx);
    }
out:
    free(path);
    cr__cli_config_fini(&cfg);
    return code;
}

int cr__cli_fail(cli_ctx *ctx, int rc, const cr_client_res *res)
{
    if (res->status == 0) {
        fprintf(ctx->err, "corral %s: cannot reach the server at %s: %s\n", ctx->cmd,
                ctx->server ? ctx->server : "?", cr_client_res_msg(res, rc));
        return CLI_EXIT_UNREACH;
    }
    fprintf(ctx->err, "corral %s: %s\n", ctx->cmd, cr_client_res_msg(res, rc));
    return CLI_EXIT_SERVER;
}

void cr__cli_print_json(cli_ctx *ctx, const json_t *doc)
{
    if (!doc) {
        fputs("null\n", ctx->out);
        return;
    }
    char *s = json_dumps(doc, JSON_INDENT(2) | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
    if (s) {
        fputs(s, ctx->out);
        fputc('\n', ctx->out);
        free(s);
    }
}

int cr__cli_job_id(cli_ctx *ctx, const char *s, int64_t *out)
{
    if (cr_parse_i64(s, 1, INT64_MAX, out) < 0) {
        fprintf(ctx->err, "corral %s: '%s' is not a job id (a positive integer)\n", ctx->cmd, s);
        return CR_EINVAL;
    }
    return 0;
}

int cr__cli_print_list(cli_ctx *ctx, int rc, const cr_client_res *res, cli_items_fn table)
{
    if (rc < 0) {
        return cr__cli_fail(ctx, rc, res);
    }
    if (ctx->json) {
        cr__cli_print_json(ctx, res->body);
    } else {
        (table ? table : cr__cli_items_table)(json_object_get(res->body, "items"), ctx->out);
    }
    return 0;
}

int cr__cli_check_ids(cli_ctx *ctx, const cli_args *a, size_t first, const char *what,
                      const char *noun)
{
    for (size_t i = first; i < a->npos; i++) {
        int64_t id;
        if (cr_parse_i64(a->pos[i], 1, INT64_MAX / 2, &id) != 0) {
            fprintf(ctx->err, "corral %s: '%s' is not %s\n", what, a->pos[i], noun);
            return CLI_EXIT_USAGE;
        }
    }
    return 0;
}

int cr__cli_each_id(cli_ctx *ctx, const cli_args *a, size_t first, cli_id_fn fn, bool json,
                    const char *done, cr_client_res *res)
{
    int code = 0;
    for (size_t i = first; i < a->npos; i++) {
        int rc = fn(ctx, a->pos[i], res);
        if (rc < 0) {
            int c = cr__cli_fail(ctx, rc, res);
            code = c > code ? c : code;
            if (c == CLI_EXIT_UNREACH) {
                break;
            }
        } else if (json && ctx->json) {
            cr__cli_print_json(ctx, res->body);
        } else {
            fprintf(ctx->out, "%s %s\n", done, a->pos[i]);
        }
    }
    return code;
}
