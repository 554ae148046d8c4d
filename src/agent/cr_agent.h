/*
 * cr_agent.h - entry point of the 'corral agent' role.
 */
#ifndef CR_AGENT_H
#define CR_AGENT_H

/* argv[0] is the subcommand name; returns the process exit code. */
int cr_agent_main(int argc, char **argv);

#endif
