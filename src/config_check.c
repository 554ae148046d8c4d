#include "config_check.h"

#include "cr_agent.h"
#include "cr_cli.h"
#include "cr_controller.h"
#include "cr_gateway.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: corral config check ROLE FILE\n"
               "\n"
               "Checks a config file (JSON) as ROLE would load it; ROLE is controller,\n"
               "agent, gateway or cli. Prints 'FILE: ok' and exits 0, or prints the\n"
               "error (FILE:LINE:COLUMN, or the field) and exits 1.\n");
}

int cr_config_main(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc != 4 || strcmp(argv[1], "check") != 0) {
        usage(stderr);
        return 2;
    }
    const char *role = argv[2], *path = argv[3];
    int rc;
    if (strcmp(role, "controller") == 0) {
        rc = cr_controller_config_check(path);
    } else if (strcmp(role, "agent") == 0) {
        rc = cr_agent_config_check(path);
    } else if (strcmp(role, "gateway") == 0) {
        rc = cr_gateway_config_check(path);
    } else if (strcmp(role, "cli") == 0) {
        rc = cr_cli_config_check(path);
    } else {
        fprintf(stderr, "corral config: unknown role '%s' (controller, agent, gateway, cli)\n",
                role);
        return 2;
    }
    if (rc != 0) {
        return 1;
    }
    printf("%s: ok\n", path);
    return 0;
}
