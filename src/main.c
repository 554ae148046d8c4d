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

#include <stdio.h>
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
               "\n"
               "Client:\n"
               "  submit jobs show cancel hold release requeue logs nodes drain undrain\n"
               "  usage tenants tokens top services\n"
               "\n"
               "  corral <command> --help   for the options of one command\n"
               "  corral version\n");
}

int main(int argc, char **argv)
{
    cr_log_init();
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
        {"gateway", cr_gateway_main},
    };
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++) {
        if (strcmp(cmd, roles[i].name) == 0) {
            return roles[i].fn(argc - 1, argv + 1);
        }
    }
    return cr_cli_main(argc - 1, argv + 1);
}
