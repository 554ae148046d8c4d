/*
 * cr_sim.h - entry point of the 'corral sim' role.
 */
#ifndef CR_SIM_H
#define CR_SIM_H

/* argv[0] is the subcommand name; returns the process exit code. */
int cr_sim_main(int argc, char **argv);

#endif
