/*
 * cli_services.c - 'corral services': inference services (create, list,
 * show, scale, delete). A service's command comes after "--".
 */
#include "cli_int.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"
#include "cr_parse.h"

#include <inttypes.h>
#include <string.h>

#define NOPTS(o) (sizeof(o) / sizeof((o)[0]))

static const cli_opt svc_opts[] = {
    {"gpus", CLI_INT, "N", "GPUs per replica (at least 1)", NULL, 1, 4096, 0},
    {"gpu-type", CLI_STR, "TYPE", "GPU model, auto (the advisor picks) or any", NULL, 0, 0, 0},
    {"mig", CLI_STR, "PROFILE", "a MIG slice per replica (e.g. 1g.10gb)", NULL, 0, 0, 0},
    {"gpu-fraction", CLI_F64, "F", "part of one shareable GPU per replica (0.3)", NULL, 0, 1, 0},
    {"min", CLI_INT, "N", "minimum replicas (0 allows scale to zero)", NULL, 0, 10000, 0},
    {"max", CLI_INT, "N", "maximum replicas", NULL, 1, 10000, 0},
    {"concurrency", CLI_F64, "N", "target in-flight requests per replica", NULL, 0, 1000000, 0},
    {"p95-ms", CLI_F64, "MS", "target p95 latency in milliseconds", NULL, 0, 3600000, 0},
    {"ttft-ms", CLI_F64, "MS", "serving SLO: target p95 time to first token (ms)", NULL, 0, 3600000,
     0},
    {"tpot-ms", CLI_F64, "MS", "serving SLO: target p95 time per output token (ms)", NULL, 0,
     3600000, 0},
    {"ready-path", CLI_STR, "PATH", "readiness path served on $PORT (default /health)", NULL, 0, 0,
     0},
    {"tenant", CLI_STR, "T", "tenant (admins)", NULL, 0, 0, 0},
    {"env", CLI_LIST, "K=V", "environment variable for each replica", NULL, 0, 0, 'e'},
    {"kind", CLI_STR, "KIND", "workload kind hint", "inference|visual", 0, 0, 0},
    {"params", CLI_COUNT, "N", "model parameters, for the advisor (7b)", NULL, 0, 0, 0},
    {"adapters", CLI_STR, "NAME[,NAME...]",
     "LoRA adapters of the --model its replicas hold (the gateway routes requests naming one to "
     "them)",
     NULL, 0, 0, 0},
    {"model", CLI_STR, "NAME[,ALIAS...]",
     "models the replicas serve (the gateway routes OpenAI requests by them); with --gpu-type "
     "auto, --params or --precision the first is also the advisor's model (data/models)",
     NULL, 0, 0, 0},
    {"pack", CLI_BOOL, NULL, "let replicas share a node (default: spread across nodes)", NULL, 0, 0,
     0},
    {"precision", CLI_STR, "P", "weight precision for the advisor",
     "bf16|fp16|fp8|int8|int4|tf32|fp32|fp64|fp4|fp6" /* = CLI_PRECISIONS, cli_jobs.c */, 0, 0, 0},
    {"model-weights", CLI_STR, "NAME[@VER]",
     "a model (corral data) staged on the node before each replica starts: CORRAL_MODEL_WEIGHTS",
     NULL, 0, 0, 0},
    {"image", CLI_STR, "IMAGE", "run each replica in a container of this OCI image (podman)", NULL,
     0, 0, 0},
    {"image-archive", CLI_STR, "FILE", "with --image: archive on the node to load it from", NULL, 0,
     0, 0},
    {"mount", CLI_LIST, "SRC:DST[:ro]", "with --image: bind-mount an allowed host path", NULL, 0, 0,
     0},
    {"entrypoint", CLI_STR, "PROGRAM", "with --image: replace the image's entrypoint", NULL, 0, 0,
     0},
};

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static json_t *svc_body(cli_ctx *ctx, const cli_args *a, const char *name)
{
    json_t *b = json_object();
    json_object_set_new(b, "name", json_string(name));
    if (a->nrest == 0) {
        fprintf(ctx->err, "corral services create: no command given (corral services create "
                          "NAME [options] -- COMMAND [ARGS...])\n");
        goto bad;
    }
    json_t *cmd = json_array();
    for (size_t i = 0; i < a->nrest; i++) {
        json_array_append_new(cmd, json_string(a->rest[i]));
    }
    json_object_set_new(b, "command", cmd);
    static const struct {
        const char *flag, *key;
    } strs[] = {{"gpu-type", "gpu_type"},
                {"mig", "mig_profile"},
                {"ready-path", "ready_path"},
                {"tenant", "tenant"},
                {"kind", "kind"},
                {"image", "image"},
                {"model-weights", "model_weights"},
                {"image-archive", "image_archive"}};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        const cli_val *v = cr__cli_arg(a, strs[i].flag);
        if (v->set) {
            json_object_set_new(b, strs[i].key, json_string(v->str));
        }
    }
    static const struct {
        const char *flag, *key;
    } ints[] = {{"gpus", "gpus"}, {"min", "min_replicas"}, {"max", "max_replicas"}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        const cli_val *v = cr__cli_arg(a, ints[i].flag);
        if (v->set) {
            json_object_set_new(b, ints[i].key, json_integer(v->i));
        }
    }
    const cli_val *mn = cr__cli_arg(a, "min"), *mx = cr__cli_arg(a, "max");
    if (mn->set && mx->set && mn->i > mx->i) {
        fprintf(ctx->err, "corral services create: --min %" PRId64 " is above --max %" PRId64 "\n",
                mn->i, mx->i);
        goto bad;
    }
    const cli_val *cc = cr__cli_arg(a, "concurrency"), *p95 = cr__cli_arg(a, "p95-ms");
    const cli_val *ttft = cr__cli_arg(a, "ttft-ms"), *tpot = cr__cli_arg(a, "tpot-ms");
    if (cc->set + p95->set + (ttft->set || tpot->set) > 1) {
        fprintf(ctx->err, "corral services create: give one target: --concurrency, --p95-ms, or "
                          "the serving SLOs --ttft-ms and/or --tpot-ms\n");
        goto bad;
    }
    if (cc->set) {
        json_object_set_new(b, "target", json_pack("{s:f}", "concurrency", cc->f));
    } else if (p95->set) {
        json_object_set_new(b, "target", json_pack("{s:f}", "p95_ms", p95->f));
    } else if (ttft->set || tpot->set) {
        json_t *t = json_object();
        if (ttft->set) {
            json_object_set_new(t, "ttft_ms", json_real(ttft->f));
        }
        if (tpot->set) {
            json_object_set_new(t, "tpot_ms", json_real(tpot->f));
        }
        json_object_set_new(b, "target", t);
    }
    const cli_val *fr = cr__cli_arg(a, "gpu-fraction");
    if (fr->set) {
        long milli = (long)(fr->f * 1000 + 0.5);
        if (milli < 1 || milli > 999) {
            fprintf(ctx->err, "corral services create: --gpu-fraction: want more than 0 and less "
                              "than 1 (0.001..0.999)\n");
            goto bad;
        }
        json_object_set_new(b, "gpu_milli", json_integer(milli));
    }
    /* The advisor's hints, as 'corral submit' sends them: the server checks
     * the name against data/models and the precision against its list. */
    json_t *model = json_object();
    const cli_val *pp = cr__cli_arg(a, "params");
    if (pp->set) {
        json_object_set_new(model, "params", json_real(pp->f));
    }
    const cli_val *mv = cr__cli_arg(a, "model"), *pv = cr__cli_arg(a, "precision");
    const cli_val *gt = cr__cli_arg(a, "gpu-type");
    if (mv->set) {
        /* NAME[,ALIAS...]: every name is served; the first is the advisor's */
        json_t *names = json_array();
        char *copy = cr_strdup(mv->str), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            json_array_append_new(names, json_string(t));
        }
        if (json_array_size(names) == 0) {
            fprintf(ctx->err, "corral services create: --model: want NAME[,ALIAS...]\n");
            free(copy);
            json_decref(names);
            json_decref(model);
            goto bad;
        }
        bool advise = pp->set || pv->set || (gt->set && strcmp(gt->str, "auto") == 0);
        if (advise) {
            json_object_set_new(model, "name", json_copy(json_array_get(names, 0)));
        }
        json_object_set_new(b, "models", names);
        free(copy);
    }
    const cli_val *ad = cr__cli_arg(a, "adapters");
    if (ad->set) {
        json_t *names = json_array();
        char *copy = cr_strdup(ad->str), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            json_array_append_new(names, json_string(t));
        }
        free(copy);
        json_object_set_new(b, "adapters", names); /* the controller checks them */
    }
    if (pv->set) {
        json_object_set_new(model, "precision", json_string(pv->str));
    }
    if (cr__cli_arg(a, "pack")->set) {
        json_object_set_new(b, "pack", json_true());
    }
    if (json_object_size(model) > 0) {
        json_object_set_new(b, "model", model);
    } else {
        json_decref(model);
    }
    const cli_val *ep = cr__cli_arg(a, "entrypoint"), *mnt = cr__cli_arg(a, "mount");
    if (ep->set) {
        json_object_set_new(b, "entrypoint", json_pack("[s]", ep->str));
    }
    if (mnt->count) {
        json_t *m = json_array();
        json_object_set_new(b, "mounts", m);
        for (size_t i = 0; i < mnt->count; i++) {
            json_array_append_new(m, json_string(mnt->list[i]));
        }
    }
    const cli_val *env = cr__cli_arg(a, "env");
    if (env->count) {
        json_t *e = json_object();
        json_object_set_new(b, "env", e);
        for (size_t i = 0; i < env->count; i++) {
            const char *eq = strchr(env->list[i], '=');
            if (!eq || eq == env->list[i]) {
                fprintf(ctx->err, "corral services: --env: '%s' is not KEY=VALUE\n", env->list[i]);
                goto bad;
            }
            char *k = cr_strndup(env->list[i], (size_t)(eq - env->list[i]));
            json_object_set_new(e, k, json_string(eq + 1));
            free(k);
        }
    }
    return b;
bad:
    json_decref(b);
    return NULL;
}

static void target_text(const json_t *svc, char *buf, size_t len)
{
    const json_t *t = json_object_get(svc, "target");
    char n[64];
    if (json_object_get(t, "concurrency")) {
        snprintf(buf, len, "concurrency %s",
                 cr__cli_json_text(json_object_get(t, "concurrency"), n, sizeof n));
    } else if (json_object_get(t, "p95_ms")) {
        snprintf(buf, len, "p95 %sms",
                 cr__cli_json_text(json_object_get(t, "p95_ms"), n, sizeof n));
    } else {
        snprintf(buf, len, "-");
    }
}

/* "ready/desired" from the replicas array and the desired count. */
static void replicas_text(const json_t *svc, char *buf, size_t len)
{
    const json_t *reps = json_object_get(svc, "replicas");
    size_t ready = 0, total = 0;
    if (json_is_array(reps)) {
        size_t i;
        json_t *r;
        total = json_array_size(reps);
        json_array_foreach(reps, i, r)
        {
            if (json_is_true(json_object_get(r, "ready"))) {
                ready++;
            }
        }
    } else if (json_is_integer(reps)) {
        total = (size_t)json_integer_value(reps);
        ready = (size_t)json_integer_value(json_object_get(svc, "ready_replicas"));
    }
    const json_t *want = json_object_get(svc, "desired_replicas");
    if (json_is_integer(want)) {
        snprintf(buf, len, "%zu/%" JSON_INTEGER_FORMAT, ready, json_integer_value(want));
    } else {
        snprintf(buf, len, "%zu/%zu", ready, total);
    }
}

static void services_table(const json_t *items, FILE *f)
{
    static const char *const hdr[] = {"NAME",   "TENANT", ">GPUS", "TYPE",
                                      ">READY", ">MIN",   ">MAX",  "TARGET"};
    cli_table t;
    cr__cli_table_init(&t, 8, hdr);
    size_t i;
    json_t *s;
    json_array_foreach(items, i, s)
    {
        char gpus[32], rep[32], mn[32], mx[32], tgt[64];
        const char *mig = jstr(s, "mig_profile");
        if (mig && *mig) {
            snprintf(gpus, sizeof gpus, "%s", mig);
        } else {
            cr__cli_json_text(json_object_get(s, "gpus"), gpus, sizeof gpus);
        }
        replicas_text(s, rep, sizeof rep);
        cr__cli_json_text(json_object_get(s, "min_replicas"), mn, sizeof mn);
        cr__cli_json_text(json_object_get(s, "max_replicas"), mx, sizeof mx);
        target_text(s, tgt, sizeof tgt);
        const char *row[] = {
            jstr(s, "name"), jstr(s, "tenant"), gpus, jstr(s, "gpu_type"), rep, mn, mx, tgt};
        cr__cli_table_row(&t, row);
    }
    cr__cli_table_print(&t, f);
    cr__cli_table_fini(&t);
}

static void service_detail(cli_ctx *ctx, const json_t *s)
{
    char buf[512];
    fprintf(ctx->out, "Service %s\n", jstr(s, "name") ? jstr(s, "name") : "?");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)s, k, v)
    {
        if (strcmp(k, "name") == 0 || json_is_object(v) ||
            (json_is_array(v) && strcmp(k, "command") != 0)) {
            continue;
        }
        char label[64];
        snprintf(label, sizeof label, "%s:", k);
        if (strcmp(k, "command") == 0) {
            fprintf(ctx->out, "  %-18s", label);
            size_t i;
            json_t *w;
            json_array_foreach(v, i, w)
            {
                fprintf(ctx->out, " %s", json_string_value(w) ? json_string_value(w) : "?");
            }
            fputc('\n', ctx->out);
            continue;
        }
        fprintf(ctx->out, "  %-18s %s\n", label, cr__cli_json_text(v, buf, sizeof buf));
    }
    char tgt[64];
    target_text(s, tgt, sizeof tgt);
    fprintf(ctx->out, "  %-18s %s\n", "target:", tgt);
    const json_t *reps = json_object_get(s, "replicas");
    if (json_is_array(reps) && json_array_size(reps)) {
        fputs("Replicas:\n", ctx->out);
        const json_t *first = json_array_get(reps, 0);
        if (json_is_object(first)) {
            cr__cli_items_table(reps, ctx->out);
        }
    }
    cr__cli_events_table(json_object_get(s, "events"), ctx->out);
}

int cr__cli_services(cli_ctx *ctx, int argc, char **argv)
{
    cli_args a;
    int code = 0;
    json_t *body = NULL;
    cr_client_res res;
    cr_client_res_init(&res);
    if (cr__cli_begin(ctx, &a,
                      "[list] | create NAME [options] -- COMMAND [ARGS...] | show NAME | scale "
                      "NAME REPLICAS | delete NAME | update NAME [options] -- COMMAND [ARGS...]",
                      svc_opts, NOPTS(svc_opts), false, argc, argv, &code)) {
        goto out;
    }
    const char *verb = a.npos ? a.pos[0] : "list";
    static const char *const verbs[] = {"list", "create", "show", "scale", "delete", "update"};
    static const size_t want_pos[] = {1, 2, 2, 3, 2, 2};
    size_t vi = 0;
    for (; vi < 6 && strcmp(verb, verbs[vi]) != 0; vi++) {
    }
    if (vi == 6) {
        fprintf(ctx->err,
                "corral services: unknown action '%s' (allowed: list, create, show, scale, "
                "delete, update)\n",
                verb);
        code = CLI_EXIT_USAGE;
        goto out;
    }
    size_t npos = a.npos ? a.npos : 1;
    if (npos != want_pos[vi]) {
        fprintf(ctx->err, "corral services %s: expected %s\n", verb,
                vi == 0   ? "no argument"
                : vi == 3 ? "NAME REPLICAS"
                          : "one service NAME");
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if (vi != 1 && vi != 5) {
        for (size_t i = 0; i < a.nopts; i++) {
            if (a.vals[i].set && &a.opts[i] < a.opts + NOPTS(svc_opts)) {
                fprintf(ctx->err, "corral services %s: --%s goes with create or update only\n",
                        verb, a.opts[i].name);
                code = CLI_EXIT_USAGE;
                goto out;
            }
        }
        if (a.dashdash) {
            fprintf(ctx->err, "corral services %s: a command goes with create or update only\n",
                    verb);
            code = CLI_EXIT_USAGE;
            goto out;
        }
    }
    int64_t replicas = 0;
    if (vi == 3 && cr_parse_i64(a.pos[2], 0, 10000, &replicas) < 0) {
        fprintf(ctx->err, "corral services scale: REPLICAS: '%s' is not an integer in 0..10000\n",
                a.pos[2]);
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if ((vi == 1 || vi == 5) && !(body = svc_body(ctx, &a, a.pos[1]))) {
        code = CLI_EXIT_USAGE;
        goto out;
    }
    if ((code = cr__cli_connect(ctx, &a)) != 0) {
        goto out;
    }
    int rc = 0;
    switch (vi) {
    case 0:
        rc = cr_client_services_list(ctx->client, &res);
        break;
    case 1:
        rc = cr_client_service_create(ctx->client, body, &res);
        break;
    case 2:
        rc = cr_client_service_get(ctx->client, a.pos[1], &res);
        break;
    case 3:
        rc = cr_client_service_scale(ctx->client, a.pos[1], replicas, &res);
        break;
    case 5:
        rc = cr_client_service_update(ctx->client, a.pos[1], body, &res);
        break;
    default:
        rc = cr_client_service_delete(ctx->client, a.pos[1], &res);
        break;
    }
    if (rc < 0) {
        code = cr__cli_fail(ctx, rc, &res);
        goto out;
    }
    if (ctx->json) {
        cr__cli_print_json(ctx, res.body);
    } else if (vi == 0) {
        services_table(json_object_get(res.body, "items"), ctx->out);
    } else if (vi == 2) {
        service_detail(ctx, res.body);
    } else if (vi == 1) {
        fprintf(ctx->out, "Created service %s\n", a.pos[1]);
    } else if (vi == 5) {
        fprintf(ctx->out, "Updating service %s to generation %lld: its replicas roll over\n",
                a.pos[1], (long long)json_integer_value(json_object_get(res.body, "generation")));
    } else if (vi == 3) {
        fprintf(ctx->out, "Scaled service %s to %" PRId64 " replicas\n", a.pos[1], replicas);
    } else {
        fprintf(ctx->out, "Deleted service %s\n", a.pos[1]);
    }
out:
    json_decref(body);
    cr_client_res_fini(&res);
    cr__cli_args_fini(&a);
    return code;
}
