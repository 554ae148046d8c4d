/*
 * cli_data.c - corral data add|list|show|rm: datasets and models as objects
 * (issue 32; docs/data.md). For a file: URI whose --sha256 or --size is not
 * given, the file is read here (it is on storage the nodes share, so the
 * client usually sees it too) and both are worked out.
 */
#include "cli_int.h"

#include "cr_error.h"

#include <errno.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *jstr(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static const cli_opt data_opts[] = {
    {"sha256", CLI_STR, "HEX", "add: the object's sha256 (sha256sum's); file: works it out", NULL,
     0, 0, 0},
    {"size", CLI_INT, "BYTES", "add: the object's size; file: works it out", NULL, 1,
     INT64_C(1) << 50, 0},
    {"tenant", CLI_STR, "TENANT", "add, rm: the tenant (admins; default: 'default')", NULL, 0, 0,
     0},
    {"visibility", CLI_STR, "WHO", "add: 'tenant' (default) or 'all' tenants", "tenant|all", 0, 0,
     0},
};

/* sha256 and size of a local file; 0 or -1 after a message. */
static int hash_file(cli_ctx *ctx, const char *path, char hex[65], int64_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(ctx->err, "corral data add: cannot read %s to work out its sha256: %s\n", path,
                strerror(errno));
        return -1;
    }
    if (sodium_init() < 0) {
        fclose(f);
        fprintf(ctx->err, "corral data add: libsodium did not initialise\n");
        return -1;
    }
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    unsigned char buf[1 << 16];
    size_t n;
    int64_t total = 0;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        crypto_hash_sha256_update(&st, buf, n);
        total += (int64_t)n;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        fprintf(ctx->err, "corral data add: error reading %s\n", path);
        return -1;
    }
    unsigned char out[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&st, out);
    sodium_bin2hex(hex, 65, out, sizeof out);
    *size = total;
    return 0;
}

static void data_table(cli_ctx *ctx, const json_t *items)
{
    static const char *const h[] = {"NAME",   "VERSION", ">SIZE",   "SHA256",
                                    "TENANT", "VISIBLE", "CREATED", "URI"};
    cli_table t;
    cr__cli_table_init(&t, 8, h);
    size_t i;
    json_t *o;
    json_array_foreach(items, i, o)
    {
        char ver[24], size[32], sha[16];
        snprintf(ver, sizeof ver, "%lld",
                 (long long)json_integer_value(json_object_get(o, "version")));
        snprintf(size, sizeof size, "%lld",
                 (long long)json_integer_value(json_object_get(o, "size_bytes")));
        snprintf(sha, sizeof sha, "%.12s", jstr(o, "sha256"));
        const char *row[] = {
            jstr(o, "name"),    ver,           size, sha, jstr(o, "tenant"), jstr(o, "visibility"),
            jstr(o, "created"), jstr(o, "uri")};
        cr__cli_table_row(&t, row);
    }
    cr__cli_table_print(&t, ctx->out);
    cr__cli_table_fini(&t);
}

int cr__cli_data(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    json_t *body = NULL;
    cr_client_res res;
    cr_client_res_init(&res);
    if (cr__cli_begin(
            ctx, &a,
            "list | add NAME URI [--sha256 HEX] [--size BYTES] | show NAME | rm NAME[@VERSION]",
            data_opts, sizeof data_opts / sizeof data_opts[0], false, argc, argv, &code)) {
        goto out;
    }
    const char *verb = a.npos ? a.pos[0] : "list";
    static const char *const verbs[] = {"list", "add", "show", "rm"};
    static const size_t want_pos[] = {1, 3, 2, 2};
    size_t vi = 0;
    for (; vi < 4 && strcmp(verb, verbs[vi]) != 0; vi++) {
    }
    if (vi == 4) {
        fprintf(ctx->err, "corral data: unknown action '%s' (allowed: list, add, show, rm)\n",
                verb);
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if (a.npos != want_pos[vi] && !(vi == 0 && a.npos == 0)) {
        fprintf(ctx->err, "corral data %s: %s\n", verb,
                vi == 1   ? "needs NAME and URI"
                : vi == 0 ? "takes no argument"
                          : "needs one NAME");
        code = CLI_EXIT_USAGE;
        goto out;
    }
    char path[300];
    const char *method = "GET";
    if (vi == 1) {
        const char *name = a.pos[1], *uri = a.pos[2];
        const cli_val *sha = cr__cli_arg(&a, "sha256"), *size = cr__cli_arg(&a, "size");
        body = json_pack("{s:s,s:s}", "name", name, "uri", uri);
        char hex[65] = "";
        int64_t bytes = 0;
        if ((!sha->set || !size->set) && strncmp(uri, "file:", 5) == 0) {
            const char *fp = uri + 5;
            if (strncmp(fp, "//", 2) == 0) {
                fp += 2;
            }
            if (hash_file(ctx, fp, hex, &bytes) != 0) {
                code = CLI_EXIT_USAGE;
                goto out;
            }
        } else if (!sha->set || !size->set) {
            fprintf(ctx->err,
                    "corral data add: dataset '%s': --sha256 and --size are needed for a URI "
                    "other than file: (the nodes check what they fetch against them)\n",
                    name);
            code = CLI_EXIT_USAGE;
            goto out;
        }
        json_object_set_new(body, "sha256", json_string(sha->set ? sha->str : hex));
        json_object_set_new(body, "size_bytes", json_integer(size->set ? size->i : bytes));
        const cli_val *t = cr__cli_arg(&a, "tenant"), *vis = cr__cli_arg(&a, "visibility");
        if (t->set) {
            json_object_set_new(body, "tenant", json_string(t->str));
        }
        if (vis->set) {
            json_object_set_new(body, "visibility", json_string(vis->str));
        }
        snprintf(path, sizeof path, "/v1/data");
        method = "POST";
    } else if (vi == 2) {
        snprintf(path, sizeof path, "/v1/data/%.200s", a.pos[1]);
    } else if (vi == 3) {
        char name[200];
        snprintf(name, sizeof name, "%s", a.pos[1]);
        char *at = strchr(name, '@');
        if (at) {
            *at++ = '\0';
        }
        const cli_val *t = cr__cli_arg(&a, "tenant");
        snprintf(path, sizeof path, "/v1/data/%s%s%s%s%.64s", name, at ? "/" : "", at ? at : "",
                 t->set ? "?tenant=" : "", t->set ? t->str : "");
        method = "DELETE";
    } else {
        snprintf(path, sizeof path, "/v1/data");
    }
    if ((code = cr__cli_connect(ctx, &a)) != 0) {
        goto out;
    }
    int rc = cr_client_request(ctx->client, method, path, body, 0, &res);
    if (rc < 0) {
        code = cr__cli_fail(ctx, rc, &res);
        goto out;
    }
    if (ctx->json) {
        cr__cli_print_json(ctx, res.body);
    } else if (vi == 0) {
        data_table(ctx, json_object_get(res.body, "items"));
    } else if (vi == 1) {
        fprintf(ctx->out, "added %s@%lld (%lld bytes, sha256 %s)\n", jstr(res.body, "name"),
                (long long)json_integer_value(json_object_get(res.body, "version")),
                (long long)json_integer_value(json_object_get(res.body, "size_bytes")),
                jstr(res.body, "sha256"));
    } else if (vi == 2) {
        data_table(ctx, json_object_get(res.body, "versions"));
    } else {
        fprintf(ctx->out, "removed %s (%lld versions)\n", jstr(res.body, "name"),
                (long long)json_integer_value(json_object_get(res.body, "removed")));
    }
out:
    json_decref(body);
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}
