/*
 * main.c - the one 'corral' binary: dispatch to a role or to the client.
 * Stays thin: every role lives in its own directory under src/.
 */
#include "cr_config.h"

#include "cr_advise.h"
#include "cr_agent.h"
#include "cr_cli.h"
#include "cr_controller.h"
#include "cr_gateway.h"
#include "cr_log.h"
#include "cr_sim.h"
#include "admin_cmd.h"
#include "config_check.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: corral <command> [options]\n"
               "\n"
               "Roles:\n"
               "  controller   control plane: REST API, state store, scheduler loop\n"
               "  agent        node agent: GPU discovery and metrics, runs the work\n"
               "  gateway      inference traffic: routes requests to service replicas\n"
               "  sim          replay a trace through the scheduler, write a report\n"
               "  advise       rank GPU types for a workload, with the reasons\n"
               "  config       config check ROLE FILE: validate a config file\n"
               "  admin        admin backup|restore|migrate: the controller's database;\n"
               "               admin bootstrap-token: tokens for joining nodes\n"
               "\n"
               "Client:\n"
               "  submit jobs show cancel hold release requeue logs nodes drain undrain\n"
               "  usage tenants tokens top services\n"
               "\n"
               "  corral <command> --help   for the options of one command\n"
               "  corral version\n"
               "\n"
               "Global options (before the command; for controller, agent and gateway also\n"
               "among their flags):\n"
               "  --data-dir DIR        GPU catalog, prices, clusters (default: found from\n"
               "                        the install prefix; env CORRAL_DATA)\n"
               "  --log-format FMT      text (default) or json; under systemd, text lines\n"
               "                        carry <N> journal priorities\n"
               "Environment: CORRAL_LOG=debug|info|warn|error|off (anything else is an error)\n");
}

/* The daemons take the global options among their own flags too; other
 * commands only before the command name, so that a job's command line
 * (`corral submit python train.py --data-dir x`) is never touched. */
static bool is_daemon(const char *cmd)
{
    return strcmp(cmd, "controller") == 0 || strcmp(cmd, "agent") == 0 ||
           strcmp(cmd, "gateway") == 0;
}

/*
 * Takes the global options out of argv: before the command name, and for
 * a daemon anywhere before a "--". Returns 0, or 2 after printing the
 * error.
 */
static int global_opts(int *argc, char **argv)
{
    int out = 1;
    const char *cmd = NULL; /* the command name, once seen */
    bool ended = false;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        int which = 0;
        bool scan = !ended && (!cmd || is_daemon(cmd));
        if (scan && strcmp(a, "--") == 0) {
            ended = true;
        } else if (scan && (strcmp(a, "--data-dir") == 0 || strcmp(a, "--log-format") == 0)) {
            which = a[2] == 'd' ? 1 : 2;
            if (i + 1 >= *argc) {
                fprintf(stderr, "corral: %s needs a value\n", a);
                return 2;
            }
            val = argv[++i];
        } else if (scan && strncmp(a, "--data-dir=", 11) == 0) {
            which = 1;
            val = a + 11;
        } else if (scan && strncmp(a, "--log-format=", 13) == 0) {
            which = 2;
            val = a + 13;
        } else if (!cmd) {
            cmd = a;
        }
        if (which == 1) {
            if (!*val) {
                fprintf(stderr, "corral: --data-dir: empty\n");
                return 2;
            }
            setenv("CORRAL_DATA", val, 1);
        } else if (which == 2) {
            if (cr_log_set_format_name(val) != 0) {
                fprintf(stderr, "corral: --log-format: expected json|text, got '%s'\n", val);
                return 2;
            }
        } else {
            argv[out++] = argv[i];
        }
    }
    argv[out] = NULL;
    *argc = out;
    return 0;
}

int main(int argc, char **argv)
{
    /* srun and scontrol inside a batch job: this binary under those names */
    const char *a0 = argc > 0 ? strrchr(argv[0], '/') : NULL;
    a0 = a0 ? a0 + 1 : argc > 0 ? argv[0] : "";
    if (strcmp(a0, "srun") == 0) {
        return cr_srun_main(argc, argv);
    }
    if (strcmp(a0, "scontrol") == 0) {
        return cr_scontrol_main(argc, argv);
    }
    if (cr_log_init() < 0) {
        fprintf(stderr, "corral: CORRAL_LOG: expected debug|info|warn|error|off, got '%s'\n",
                getenv("CORRAL_LOG"));
        return 2;
    }
    if (global_opts(&argc, argv) != 0) {
        return 2;
    }
    if (argc < 2 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("corral %s\n", CR_VERSION);
        return 0;
    }
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } roles[] = {
        {"advise", cr_advise_main},         {"sim", cr_sim_main},
        {"controller", cr_controller_main}, {"agent", cr_agent_main},
        {"gateway", cr_gateway_main},       {"config", cr_config_main},
        {"stepd", cr_stepd_main},
    };
    /* "admin backup|restore" work on the state directory; the other admin
     * commands (bootstrap tokens) talk to the controller. */
    if (strcmp(cmd, "admin") == 0 && argc > 2 &&
        (strcmp(argv[2], "backup") == 0 || strcmp(argv[2], "restore") == 0 ||
         strcmp(argv[2], "migrate") == 0)) {
        return cr_admin_main(argc - 1, argv + 1);
    }
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++) {
        if (strcmp(cmd, roles[i].name) == 0) {
            return roles[i].fn(argc - 1, argv + 1);
        }
    }
    return cr_cli_main(argc - 1, argv + 1);
}
