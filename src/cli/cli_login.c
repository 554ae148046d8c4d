/*
 * cli_login.c - `corral login`: the token-paste flow. The token (an OIDC
 * ID token from the company's identity provider, or a Corral token) is
 * read from stdin, checked against the controller (GET /v1/whoami), and
 * only then written to the default token file (0600, by a rename), which
 * every later command reads when no --token, --token-file, CORRAL_TOKEN,
 * CORRAL_TOKEN_FILE or config token is given (cli_main.c).
 */
#include "cli_int.h"
#include "cr_cli.h"

#include "cr_alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NOPTS(o) (sizeof(o) / sizeof((o)[0]))

static const cli_opt login_opts[] = {
    {"to", CLI_STR, "FILE", "where to keep the token (default ~/.config/corral/token)", NULL, 0, 0,
     0},
};

char *cr__cli_default_token_path(void)
{
    const char *xdg = getenv("XDG_CONFIG_HOME");
    if (xdg && *xdg) {
        return cr_asprintf("%s/corral/token", xdg);
    }
    const char *home = getenv("HOME");
    if (home && *home) {
        return cr_asprintf("%s/.config/corral/token", home);
    }
    return NULL;
}

/* mkdir -p of path's directory, 0700 for the parts made. */
static void make_parent(const char *path)
{
    char *d = cr_strdup(path);
    for (char *p = d + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(d, 0700);
            *p = '/';
        }
    }
    free(d);
}

/* text into path (0600) through a temporary file and a rename. */
static int write_secret(const char *path, const char *text)
{
    make_parent(path);
    char *tmp = cr_asprintf("%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = -1;
    if (fd >= 0) {
        size_t n = strlen(text);
        rc = write(fd, text, n) == (ssize_t)n && write(fd, "\n", 1) == 1 && fsync(fd) == 0 ? 0 : -1;
        rc = close(fd) == 0 ? rc : -1;
        rc = rc == 0 && rename(tmp, path) == 0 ? 0 : -1;
    }
    if (rc != 0) {
        unlink(tmp);
    }
    free(tmp);
    return rc;
}

int cr__cli_login(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    char *path = NULL, *line = NULL;
    cr_client *cl = NULL;
    cr_client_res res;
    cr_client_res_init(&res);
    if (cr__cli_begin(ctx, &a, "[--to FILE]  (the token on stdin: paste it, or pipe it)",
                      login_opts, NOPTS(login_opts), false, argc, argv, &code)) {
        goto out;
    }
    if (a.npos) {
        fprintf(ctx->err, "corral login: unexpected argument '%s' (the token goes on stdin)\n",
                a.pos[0]);
        code = CLI_EXIT_USAGE;
        goto out;
    }
    const cli_val *to = cr__cli_arg(&a, "to");
    path = to->set ? cr_strdup(to->str) : cr__cli_default_token_path();
    if (!path) {
        fprintf(ctx->err, "corral login: no HOME or XDG_CONFIG_HOME: give --to FILE\n");
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if (isatty(STDIN_FILENO)) {
        fprintf(ctx->err, "Paste the token from your identity provider, then press Enter:\n");
    }
    size_t cap = CLI_LOGIN_TOKEN_MAX + 2;
    line = cr_malloc(cap);
    if (!fgets(line, (int)cap, stdin)) {
        fprintf(ctx->err, "corral login: no token on stdin\n");
        code = CLI_EXIT_USAGE;
        goto out;
    }
    line[strcspn(line, "\r\n")] = '\0';
    char *t = line;
    while (*t == ' ' || *t == '\t') {
        t++;
    }
    size_t n = strlen(t);
    while (n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\t')) {
        t[--n] = '\0';
    }
    if (n == 0 || n > CLI_LOGIN_TOKEN_MAX) {
        fprintf(ctx->err, "corral login: the token must be 1..%d bytes on one line\n",
                CLI_LOGIN_TOKEN_MAX);
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if ((code = cr__cli_connect(ctx, &a)) != 0) {
        goto out;
    }
    /* checked with this token, not whatever the flags and config name */
    cr_client_opts o = ctx->copts;
    o.token = t;
    if (cr_client_new(&o, &cl) < 0) {
        fprintf(ctx->err, "corral login: cannot set up the HTTP client\n");
        code = CLI_EXIT_USAGE;
        goto out;
    }
    int rc = cr_client_request(cl, "GET", "/v1/whoami", NULL, 0, &res);
    if (rc < 0) {
        code = cr__cli_fail(ctx, rc, &res);
        fprintf(ctx->err, "corral login: the controller refused the token; nothing was saved\n");
        goto out;
    }
    if (write_secret(path, t) != 0) {
        fprintf(ctx->err, "corral login: cannot write %s: %s\n", path, strerror(errno));
        code = 1;
        goto out;
    }
    const char *name = json_string_value(json_object_get(res.body, "name"));
    const char *role = json_string_value(json_object_get(res.body, "role"));
    const char *ten = json_string_value(json_object_get(res.body, "tenant"));
    fprintf(ctx->out, "Logged in to %s as %s (role %s%s%s); the token is in %s\n", ctx->server,
            name ? name : "?", role ? role : "?", ten && *ten ? ", tenant " : "",
            ten && *ten ? ten : "", path);
out:
    cr_client_res_fini(&res);
    cr_client_free(cl);
    free(path);
    free(line);
    cr__cli_args_fini(&a);
    return code;
}
