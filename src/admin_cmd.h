/*
 * admin_cmd.h - `corral admin backup|restore`: the controller's database,
 * copied consistently while it serves (store/cr_store_backup.h), run on
 * the controller's host against its state directory.
 */
#ifndef CR_ADMIN_CMD_H
#define CR_ADMIN_CMD_H

/* argv[0] is "admin"; returns the exit code (0 done, 1 failed, 2 usage). */
int cr_admin_main(int argc, char **argv);

#endif
