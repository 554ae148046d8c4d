/*
 * cr_cli.h - entry point of the 'corral cli' role.
 */
#ifndef CR_CLI_H
#define CR_CLI_H

/* argv[0] is the subcommand name; returns the process exit code. */
int cr_cli_main(int argc, char **argv);
/* Inside a batch job (docs/slurm.md): `corral stepd`, the job's process
 * on each node (cli_stepd.c), and this binary run as srun or scontrol
 * (argv[0]; cli_srun.c). */
int cr_stepd_main(int argc, char **argv);
int cr_srun_main(int argc, char **argv);
int cr_scontrol_main(int argc, char **argv);

/* Checks a client config file (JSON, or the deprecated key = value): 0,
 * or a CR_E* code after printing the error to stderr. */
int cr_cli_config_check(const char *path);

#endif
