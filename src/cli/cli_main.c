/*
 * cli_main.c - the 'corral' client's dispatcher: the table of commands,
 * the top-level usage, and what a run frees. What the commands share is
 * in cli_common.c.
 */
#include "cr_cli.h"

#include "cli_int.h"
#include "cr_time.h"

#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    cli_cmd_fn fn;
    const char *what;
} commands[] = {
    {"submit", cr__cli_submit, "submit a job (or an array of N jobs)"},
    {"run", cr__cli_submit, "run a job and stream its output; exit with its exit code"},
    {"alloc", cr__cli_submit, "hold an allocation and open a shell with its variables"},
    {"jobs", cr__cli_jobs, "list jobs"},
    {"show", cr__cli_show, "show one job with its events and pending reason"},
    {"cancel", cr__cli_job_action, "cancel jobs"},
    {"hold", cr__cli_job_action, "hold pending jobs"},
    {"release", cr__cli_job_action, "release held jobs"},
    {"requeue", cr__cli_job_action, "requeue jobs"},
    {"logs", cr__cli_logs, "print (or follow) a job's output"},
    {"nodes", cr__cli_nodes, "list nodes and their GPUs; nodes delete|label NODE"},
    {"data", cr__cli_data, "datasets and models: add, list, show, rm (staged with --data)"},
    {"pools", cr__cli_pools, "node pools: their nodes, state and events (elastic capacity)"},
    {"drain", cr__cli_drain, "drain a node (no new work)"},
    {"undrain", cr__cli_drain, "return a drained node to service"},
    {"usage", cr__cli_usage_cmd, "GPU-hours, energy and cost per tenant, GPU type, day"},
    {"tenants", cr__cli_tenants, "list, create or set tenants and quotas"},
    {"tokens", cr__cli_tokens, "create, list or revoke API tokens"},
    {"keys", cr__cli_keys, "create, list or revoke the inference gateway's API keys"},
    {"top", cr__cli_top, "live view of nodes, GPUs and jobs"},
    {"services", cr__cli_services, "create, list, show, scale or delete inference services"},
    {"admin", cr__cli_admin, "bootstrap tokens for joining nodes (admin)"},
    {"audit", cr__cli_audit, "read the audit log of admin and mutating actions (admin)"},
    {"login", cr__cli_login, "keep a token (e.g. your identity provider's) for later commands"},
};

static void main_usage(FILE *f, const char *bad)
{
    if (bad) {
        fprintf(f, "corral: unknown command '%s'\n\n", bad);
    }
    fputs("usage: corral <command> [options]\n\nClient commands:\n", f);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].what);
    }
    fputs("\nRoles: controller agent gateway sim advise (corral <role> --help)\n"
          "corral <command> --help shows the options of one command.\n"
          "Exit codes: 0 ok, 1 the server said no, 2 bad usage, 3 cannot reach the server.\n",
          f);
}

int cr_cli_main(int argc, char **argv)
{
    return cr__cli_run(argc, argv, stdout, stderr);
}

int cr__cli_run(int argc, char **argv, FILE *out, FILE *err)
{
    if (argc < 1 || !argv[0]) {
        main_usage(err, NULL);
        return CLI_EXIT_USAGE;
    }
    cli_ctx ctx = {.cmd = argv[0], .out = out, .err = err, .now_ns = cr_now_ns()};
    int code = CLI_EXIT_USAGE;
    bool found = false;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[0], commands[i].name) == 0) {
            found = true;
            code = commands[i].fn(&ctx, argc, argv);
            break;
        }
    }
    if (!found) {
        main_usage(err, argv[0]);
    }
    fflush(ctx.out);
    cr_client_free(ctx.client);
    free(ctx.server);
    free(ctx.token);
    free(ctx.ca_file);
    return code;
}
