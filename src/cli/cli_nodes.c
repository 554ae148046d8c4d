/*
 * cli_nodes.c - node lifecycle commands (docs/install.md, "Retiring and
 * rejoining a node"):
 *
 *   corral nodes delete NODE [--force]     DELETE /v1/nodes/{name}
 *   corral nodes label NODE k=v [k=...]    POST /v1/nodes/{name}/labels
 *
 * "k=" (empty value) removes the label k.
 */
#include "cli_int.h"

#include "cr_alloc.h"
#include "cr_client.h"

#include <string.h>

static const cli_opt delete_opts[] = {
    {"force", CLI_BOOL, NULL, "delete even with jobs placed there (they are requeued)", NULL, 0, 0,
     'f'},
};

static int node_delete(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    cr_client_res res;
    cr_client_res_init(&res);
    char *esc = NULL, *path = NULL;
    if (cr__cli_begin(ctx, &a, "NODE [--force]", delete_opts,
                      sizeof delete_opts / sizeof delete_opts[0], false, argc, argv, &code)) {
        goto out;
    }
    if (a.npos != 1) {
        fprintf(ctx->err, "corral nodes delete: expected one node name\n");
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if ((code = cr__cli_connect(ctx, &a)) != 0) {
        goto out;
    }
    esc = cr_client_escape(a.pos[0]);
    path = cr_asprintf("/v1/nodes/%s%s", esc, cr__cli_arg(&a, "force")->set ? "?force=true" : "");
    int rc = cr_client_request(ctx->client, "DELETE", path, NULL, 0, &res);
    if (rc < 0) {
        code = cr__cli_fail(ctx, rc, &res);
        goto out;
    }
    if (ctx->json) {
        cr__cli_print_json(ctx, res.body);
    } else {
        json_int_t n = json_integer_value(json_object_get(res.body, "requeued"));
        fprintf(ctx->out, "Deleted node %s", a.pos[0]);
        if (n > 0) {
            fprintf(ctx->out, " (%lld job(s) requeued)", (long long)n);
        }
        fprintf(ctx->out, "\n");
    }
out:
    free(esc);
    free(path);
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}

static int node_label(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    cr_client_res res;
    cr_client_res_init(&res);
    char *esc = NULL, *path = NULL;
    json_t *labels = json_object();
    if (cr__cli_begin(ctx, &a, "NODE KEY=VALUE... (KEY= removes KEY)", NULL, 0, false, argc, argv,
                      &code)) {
        goto out;
    }
    if (a.npos < 2) {
        fprintf(ctx->err, "corral nodes label: expected a node name and KEY=VALUE...\n");
        code = CLI_EXIT_USAGE;
        goto out;
    }
    for (size_t i = 1; i < a.npos; i++) {
        const char *eq = strchr(a.pos[i], '=');
        if (!eq || eq == a.pos[i]) {
            fprintf(ctx->err, "corral nodes label: '%s': expected KEY=VALUE\n", a.pos[i]);
            code = CLI_EXIT_USAGE;
            goto out;
        }
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)(eq - a.pos[i]), a.pos[i]);
        json_object_set_new(labels, key, eq[1] ? json_string(eq + 1) : json_null());
    }
    if ((code = cr__cli_connect(ctx, &a)) != 0) {
        goto out;
    }
    esc = cr_client_escape(a.pos[0]);
    path = cr_asprintf("/v1/nodes/%s/labels", esc);
    json_t *body = json_pack("{s:O}", "labels", labels);
    int rc = cr_client_request(ctx->client, "POST", path, body, 0, &res);
    json_decref(body);
    if (rc < 0) {
        code = cr__cli_fail(ctx, rc, &res);
        goto out;
    }
    if (ctx->json) {
        cr__cli_print_json(ctx, res.body);
    } else {
        fprintf(ctx->out, "%s:", a.pos[0]);
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(res.body, "labels"), k, v)
        {
            fprintf(ctx->out, " %s=%s", k, json_string_value(v));
        }
        fprintf(ctx->out, "\n");
    }
out:
    json_decref(labels);
    free(esc);
    free(path);
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}

int cr__cli_nodes_lifecycle(cli_ctx *ctx, int argc, char **argv)
{
    bool del = strcmp(argv[1], "delete") == 0;
    ctx->cmd = del ? "nodes delete" : "nodes label";
    return del ? node_delete(ctx, argc - 1, argv + 1) : node_label(ctx, argc - 1, argv + 1);
}
