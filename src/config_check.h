/*
 * config_check.h - `corral config check ROLE FILE`: validates one role's
 * JSON config file the way that role loads it (errors name FILE:LINE:COLUMN
 * for syntax, the field otherwise). Roles: controller, agent, gateway, cli.
 */
#ifndef CR_CONFIG_CHECK_H
#define CR_CONFIG_CHECK_H

/* argv[0] is "config"; returns the exit code (0 valid, 1 invalid, 2 usage). */
int cr_config_main(int argc, char **argv);

#endif
