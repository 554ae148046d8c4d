/*
 * cr_advise.h - entry point of the 'corral advise' role.
 */
#ifndef CR_ADVISE_H
#define CR_ADVISE_H

/* argv[0] is the subcommand name; returns the process exit code. */
int cr_advise_main(int argc, char **argv);

#endif
