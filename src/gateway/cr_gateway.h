/*
 * cr_gateway.h - entry point of the 'corral gateway' role.
 */
#ifndef CR_GATEWAY_H
#define CR_GATEWAY_H

/* argv[0] is the subcommand name; returns the process exit code. */
int cr_gateway_main(int argc, char **argv);

/* Checks a gateway config file (JSON): 0, or a CR_E* code after printing
 * FILE:LINE:COLUMN or the bad field to stderr. */
int cr_gateway_config_check(const char *path);

#endif
