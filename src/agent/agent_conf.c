/*
 * agent_conf.c - the agent's JSON config file (--config FILE, packaged as
 * /etc/corral/agent.json), the same format as the controller's and the
 * gateway's (docs/install.md).
 *
 * Each member is one command-line flag spelt with '_' for '-'
 * ("state_dir": "/var/lib/corral/agent" is --state-dir). The file's flags
 * go first and the command line's after them, so a flag on the command
 * line wins. Unknown members, wrong types and bad syntax are errors that
 * name FILE:LINE:COLUMN (syntax) or the member. A switch member takes
 * true/false as well as its flag's words ("job_pid_namespace": false is
 * --job-pid-namespace off, true is auto). A list member is an array of
 * strings, given as one flag with the entries joined by ','
 * ("image_registries": ["r.example.com", "localhost:5000"]).
 */
#include "cr_agent.h"

#include "agent_int.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* Config files are small; anything larger is a mistake. */
#define AGENT_CONF_MAX_BYTES (64 * 1024)

enum kind { K_STR, K_INT, K_BOOL, K_SWITCH, K_SIZE, K_LIST };

static const struct {
    const char *key;
    enum kind kind;
} members[] = {
    {"server", K_STR},
    {"join_token", K_STR},
    {"join_token_file", K_STR},
    {"node", K_STR},
    {"rack", K_STR},
    {"gpus", K_STR},
    {"listen", K_STR},
    {"advertise", K_STR},
    {"state_dir", K_STR},
    {"faults", K_STR},
    {"xid_hold", K_STR},
    {"hot_c", K_INT},
    {"wait", K_STR},
    {"cgroup", K_STR},
    {"kill_on_exit", K_BOOL},
    {"run_for", K_STR},
    {"ca_file", K_STR},
    {"tls_cert", K_STR},
    {"tls_key", K_STR},
    {"tls_client_ca", K_STR},
    {"metrics_token_file", K_STR},
    {"cgroup_v1", K_STR},
    {"dev_dir", K_STR},
    {"no_dcgm", K_BOOL},
    {"dcgm_job_map", K_STR},
    {"rdzv_ports", K_STR},
    {"container_runtime", K_STR},
    {"podman", K_STR},
    {"share_gpus", K_STR},
    {"mps_control", K_STR},
    {"mps_dir", K_STR},
    {"mig_dynamic", K_STR},
    {"image_cache_max", K_STR},
    {"image_registries", K_LIST},
    {"log_max_bytes", K_SIZE},
    {"require_isolation", K_LIST},
    {"spot_notice_file", K_STR},
    {"job_pid_namespace", K_SWITCH},
};
#define NMEMBERS (sizeof members / sizeof members[0])

/* A list member: an array of up to 256 names (1-255 bytes) without commas. */
static bool list_ok(const json_t *x)
{
    if (!json_is_array(x) || json_array_size(x) > 256) {
        return false;
    }
    for (size_t i = 0; i < json_array_size(x); i++) {
        const json_t *e = json_array_get(x, i);
        if (!json_is_string(e) || json_string_length(e) == 0 || json_string_length(e) > 255 ||
            strchr(json_string_value(e), ',')) {
            return false;
        }
    }
    return true;
}

/* Loads and checks path; on success *out holds the object (free with
 * json_decref). Errors go to stderr, prefixed "corral agent: ". */
static int load(const char *path, json_t **out)
{
    json_error_t je;
    json_t *v = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    int rc = 0;
    if (!v) {
        fprintf(stderr, "corral agent: %s:%d:%d: %s\n", path, je.line, je.column, je.text);
        return CR_EPARSE;
    }
    if (!json_is_object(v)) {
        fprintf(stderr, "corral agent: %s: expected a JSON object\n", path);
        rc = CR_EPARSE;
        goto out;
    }
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x)
    {
        size_t i = 0;
        while (i < NMEMBERS && strcmp(members[i].key, k) != 0) {
            i++;
        }
        if (i == NMEMBERS) {
            char allowed[512] = "";
            size_t off = 0;
            for (size_t m = 0; m < NMEMBERS && off < sizeof allowed; m++) {
                off += (size_t)snprintf(allowed + off, sizeof allowed - off, "%s%s", m ? ", " : "",
                                        members[m].key);
            }
            fprintf(stderr, "corral agent: %s: field '%s': unknown member (allowed: %s)\n", path, k,
                    allowed);
            rc = CR_EPARSE;
            goto out;
        }
        bool ok = members[i].kind == K_STR ? json_is_string(x) && json_string_length(x) > 0 &&
                                                 json_string_length(x) < 4096
                  : members[i].kind == K_INT  ? json_is_integer(x)
                  : members[i].kind == K_SIZE ? json_is_integer(x) || json_is_string(x)
                  : members[i].kind == K_LIST ? list_ok(x)
                  : members[i].kind == K_BOOL
                      ? json_is_boolean(x)
                      : json_is_boolean(x) ||
                            (json_is_string(x) && (strcmp(json_string_value(x), "auto") == 0 ||
                                                   strcmp(json_string_value(x), "off") == 0));
        if (!ok) {
            fprintf(stderr, "corral agent: %s: field '%s': expected %s\n", path, k,
                    members[i].kind == K_LIST   ? "an array of up to 256 strings without ','"
                    : members[i].kind == K_STR  ? "a non-empty string"
                    : members[i].kind == K_INT  ? "an integer"
                    : members[i].kind == K_SIZE ? "bytes or a size such as \"64M\""
                    : members[i].kind == K_BOOL ? "true or false"
                                                : "true, false, \"auto\" or \"off\"");
            rc = CR_EPARSE;
            goto out;
        }
    }
    if (json_object_get(v, "join_token") && json_object_get(v, "join_token_file")) {
        fprintf(stderr, "corral agent: %s: fields 'join_token' and 'join_token_file': give one\n",
                path);
        rc = CR_EPARSE;
        goto out;
    }
    *out = v;
    v = NULL;
out:
    json_decref(v);
    return rc;
}

int cr_agent_config_check(const char *path)
{
    json_t *v = NULL;
    int rc = load(path, &v);
    json_decref(v);
    return rc;
}

void cr__agent_argv_free(agent_argv *a)
{
    for (int i = 0; i < a->argc; i++) {
        free(a->owned[i]);
    }
    free(a->owned);
    free(a->argv);
    memset(a, 0, sizeof *a);
}

static void push(agent_argv *a, char *s, bool owned, size_t cap)
{
    if ((size_t)a->argc + 1 < cap) {
        a->argv[a->argc] = s;
        a->owned[a->argc] = owned ? s : NULL;
        a->argc++;
    } else if (owned) {
        free(s);
    }
}

int cr__agent_argv_build(int argc, char **argv, agent_argv *out)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            path = argv[i + 1];
        } else if (strncmp(argv[i], "--config=", 9) == 0) {
            path = argv[i] + 9;
        }
    }
    json_t *v = NULL;
    if (path && load(path, &v) != 0) {
        return CR_EPARSE;
    }
    size_t cap = (size_t)argc + 2 * NMEMBERS + 2;
    out->argv = cr_calloc(cap, sizeof *out->argv);
    out->owned = cr_calloc(cap, sizeof *out->owned);
    out->argc = 0;
    push(out, argv[0], false, cap);
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x)
    {
        if (strcmp(k, "job_pid_namespace") == 0 && json_is_boolean(x)) {
            push(out, cr_strdup("--job-pid-namespace"), true, cap);
            push(out, cr_strdup(json_is_true(x) ? "auto" : "off"), true, cap);
            continue;
        }
        if (json_is_false(x) || (json_is_array(x) && json_array_size(x) == 0)) {
            continue;
        }
        char flag[64] = "--";
        const char *name = strcmp(k, "join_token_file") == 0 ? "join_token" : k;
        for (size_t i = 0; name[i] && i + 3 < sizeof flag; i++) {
            flag[i + 2] = name[i] == '_' ? '-' : name[i];
            flag[i + 3] = '\0';
        }
        push(out, cr_strdup(flag), true, cap);
        if (json_is_string(x)) {
            push(out, cr_strdup(json_string_value(x)), true, cap);
        } else if (json_is_integer(x)) {
            push(out, cr_asprintf("%lld", (long long)json_integer_value(x)), true, cap);
        } else if (json_is_array(x)) {
            cr_buf b;
            cr_buf_init(&b);
            for (size_t e = 0; e < json_array_size(x); e++) {
                cr_buf_printf(&b, "%s%s", e ? "," : "", json_string_value(json_array_get(x, e)));
            }
            push(out, cr_buf_take(&b), true, cap);
            cr_buf_fini(&b);
        }
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            i++;
        } else if (strncmp(argv[i], "--config=", 9) != 0) {
            push(out, argv[i], false, cap);
        }
    }
    out->argv[out->argc] = NULL;
    json_decref(v);
    return 0;
}
