/*
 * cr_controller.h - entry point of the 'corral controller' role.
 */
#ifndef CR_CONTROLLER_H
#define CR_CONTROLLER_H

/* argv[0] is the subcommand name; returns the process exit code. */
int cr_controller_main(int argc, char **argv);

#endif
