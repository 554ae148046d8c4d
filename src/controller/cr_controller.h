/*
 * cr_controller.h - entry point of the 'corral controller' role.
 */
#ifndef CR_CONTROLLER_H
#define CR_CONTROLLER_H

/* argv[0] is the subcommand name; returns the process exit code. */
int cr_controller_main(int argc, char **argv);

/* Checks a controller config file (JSON): 0, or a CR_E* code after
 * printing FILE:LINE:COLUMN or the bad field to stderr. */
int cr_controller_config_check(const char *path);

#endif
