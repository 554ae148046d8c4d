#include "admin_cmd.h"

#include "cr_error.h"
#include "cr_etcd.h"
#include "cr_store_backup.h"
#include "cr_store_migrate.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: corral admin backup FILE [--state-dir DIR]\n"
               "       corral admin restore FILE --state-dir DIR [--force]\n"
               "       corral admin migrate --from SPEC --to SPEC [--cluster NAME] [--etcd-...]\n"
               "\n"
               "backup   copy the controller's database (DIR/corral.db, default\n"
               "         /var/lib/corral) to FILE, consistent while the controller serves;\n"
               "         FILE is mode 0600 (it holds token hashes)\n"
               "restore  check FILE and put it in DIR/corral.db for a controller to start\n"
               "         from; refuses an existing database unless --force (controller\n"
               "         stopped). admin.token and join.token are files of the state\n"
               "         directory, not of the database: copy them too (docs/install.md)\n"
               "migrate  copy a whole store into an empty one, then count both sides:\n"
               "         SPEC is sqlite:DIR (DIR/corral.db) or etcd:URL[,URL...] (keys\n"
               "         under /corral/NAME/, --cluster, default 'default'); refuses a\n"
               "         target that is not empty. Stop the controller first.\n"
               "         For an etcd side with TLS or authentication (as the "
               "controller):\n" CR_ETCD_SEC_USAGE);
}

/* Value of --NAME V or --NAME=V at argv[*i] (advancing *i), or NULL. */
static const char *opt_val(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0) {
        return NULL;
    }
    if (argv[*i][n] == '=') {
        return argv[*i] + n + 1;
    }
    if (argv[*i][n] == '\0' && *i + 1 < argc) {
        return argv[++*i];
    }
    return NULL;
}

static int migrate_main(int argc, char **argv)
{
    const char *from = NULL, *to = NULL, *cluster = NULL;
    static const char *const sec_flags[] = {"etcd-cacert", "etcd-cert", "etcd-key", "etcd-user",
                                            "etcd-password-file"};
    cr_etcd_sec sec;
    memset(&sec, 0, sizeof sec);
    char err[1024] = "";
    int ret = 2;
    for (int i = 2; i < argc; i++) {
        const char *v = NULL;
        size_t k = 0;
        for (; k < sizeof sec_flags / sizeof sec_flags[0]; k++) {
            char name[32];
            snprintf(name, sizeof name, "--%s", sec_flags[k]);
            if ((v = opt_val(argc, argv, &i, name))) {
                break;
            }
        }
        if (v) {
            if (cr_etcd_sec_set(&sec, sec_flags[k], v, err, sizeof err) != 0) {
                fprintf(stderr, "corral admin migrate: %s\n", err);
                goto out;
            }
        } else if ((v = opt_val(argc, argv, &i, "--from"))) {
            from = v;
        } else if ((v = opt_val(argc, argv, &i, "--to"))) {
            to = v;
        } else if ((v = opt_val(argc, argv, &i, "--cluster"))) {
            cluster = v;
        } else if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            ret = 0;
            goto out;
        } else {
            fprintf(stderr, "corral admin migrate: unexpected argument '%s'\n", argv[i]);
            goto out;
        }
    }
    if (!from || !to) {
        fprintf(stderr, "corral admin migrate: --from and --to are required (sqlite:DIR or "
                        "etcd:URL[,URL...])\n");
        goto out;
    }
    if (cr_etcd_sec_any(&sec) && strncmp(from, "etcd:", 5) != 0 && strncmp(to, "etcd:", 5) != 0) {
        fprintf(stderr, "corral admin migrate: --etcd-* options given, but neither side is etcd\n");
        goto out;
    }
    if (cr_etcd_sec_load(&sec, err, sizeof err) != 0) {
        fprintf(stderr, "corral admin migrate: %s\n", err);
        goto out;
    }
    cr_store_counts n = {0};
    int rc = cr_store_migrate(from, to, cluster, cr_etcd_sec_any(&sec) ? &sec : NULL, &n, err,
                              sizeof err);
    if (rc != 0) {
        fprintf(stderr, "corral admin migrate: %s\n", err[0] ? err : cr_strerror(rc));
        ret = 1;
        goto out;
    }
    printf("migrated %s to %s: %lld jobs, %lld events, %lld objects, %lld usage rows "
           "(counts verified)\n",
           from, to, (long long)n.jobs, (long long)n.events, (long long)n.objects,
           (long long)n.usage);
    ret = 0;
out:
    cr_etcd_sec_wipe(&sec);
    return ret;
}

int cr_admin_main(int argc, char **argv)
{
    const char *verb = argc > 1 ? argv[1] : NULL;
    const char *file = NULL, *state_dir = NULL;
    bool force = false;
    if (verb && (strcmp(verb, "--help") == 0 || strcmp(verb, "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (verb && strcmp(verb, "migrate") == 0) {
        return migrate_main(argc, argv);
    }
    if (!verb || (strcmp(verb, "backup") != 0 && strcmp(verb, "restore") != 0)) {
        usage(stderr);
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--state-dir") == 0 && i + 1 < argc) {
            state_dir = argv[++i];
        } else if (strncmp(argv[i], "--state-dir=", 12) == 0) {
            state_dir = argv[i] + 12;
        } else if (strcmp(argv[i], "--force") == 0 && strcmp(verb, "restore") == 0) {
            force = true;
        } else if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] != '-' && !file) {
            file = argv[i];
        } else {
            fprintf(stderr, "corral admin %s: unexpected argument '%s'\n", verb, argv[i]);
            return 2;
        }
    }
    if (!file || !*file) {
        fprintf(stderr, "corral admin %s: FILE is required\n", verb);
        return 2;
    }
    char err[1024] = "";
    if (strcmp(verb, "backup") == 0) {
        char db[4200];
        snprintf(db, sizeof db, "%s/corral.db", state_dir ? state_dir : "/var/lib/corral");
        if (cr_store_backup(db, file, err, sizeof err) != 0) {
            fprintf(stderr, "corral admin backup: %s\n", err);
            return 1;
        }
        printf("backup of %s written to %s\n", db, file);
        return 0;
    }
    if (!state_dir) {
        fprintf(stderr, "corral admin restore: --state-dir is required (a new directory)\n");
        return 2;
    }
    if (cr_store_restore(file, state_dir, force, err, sizeof err) != 0) {
        fprintf(stderr, "corral admin restore: %s\n", err);
        return 1;
    }
    printf("%s restored into %s/corral.db\n", file, state_dir);
    return 0;
}
