/*
 * cr_agent.h - entry point of the 'corral agent' role.
 */
#ifndef CR_AGENT_H
#define CR_AGENT_H

/* argv[0] is the subcommand name; returns the process exit code. */
int cr_agent_main(int argc, char **argv);

/* Checks an agent config file (JSON, agent_conf.c): 0, or CR_EPARSE after
 * printing FILE:LINE:COLUMN or the bad field to stderr. */
int cr_agent_config_check(const char *path);

#endif
