/*
 * ctl_batch.c - batch-job rules the controller applies when it hands a job
 * to its nodes: how many tasks each node runs (the launch mode), and the
 * per-job members of the agent's desired-state entry.
 *
 * Launch mode (docs/cli.md, "Tasks"): the job's tasks_per_node when given;
 * else one task per node when the command is a launcher (torchrun,
 * python -m torch.distributed.run, deepspeed, accelerate, mpirun, mpiexec,
 * srun, horovodrun), which starts its per-GPU workers itself; else one task
 * per GPU for the kinds that train (pretrain, finetune); else one per node.
 */
#include "ctl_int.h"

#include <string.h>

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

bool ctl_batch_is_launcher(const json_t *command)
{
    static const char *const launchers[] = {"torchrun", "deepspeed", "accelerate", "mpirun",
                                            "mpiexec",  "srun",      "horovodrun", NULL};
    const char *a0 = json_string_value(json_array_get(command, 0));
    if (!a0) {
        return false;
    }
    const char *b = base_name(a0);
    for (size_t i = 0; launchers[i]; i++) {
        if (strcmp(b, launchers[i]) == 0) {
            return true;
        }
    }
    const char *a1 = json_string_value(json_array_get(command, 1));
    const char *a2 = json_string_value(json_array_get(command, 2));
    return strncmp(b, "python", 6) == 0 && a1 && a2 && strcmp(a1, "-m") == 0 &&
           (strcmp(a2, "torch.distributed.run") == 0 ||
            strcmp(a2, "torch.distributed.launch") == 0);
}

int ctl_batch_tasks_per_node(const ctl_job *j, size_t node_gpus, bool *launcher)
{
    json_t *cmd = json_object_get(j->spec, "command");
    *launcher = !json_object_get(j->spec, "script") && ctl_batch_is_launcher(cmd);
    json_int_t tpn = json_integer_value(json_object_get(j->spec, "tasks_per_node"));
    if (tpn > 0) {
        return (int)tpn;
    }
    if (*launcher) {
        return 1;
    }
    if ((strcmp(j->kind, "pretrain") == 0 || strcmp(j->kind, "finetune") == 0) && node_gpus > 0) {
        return (int)(node_gpus < CTL_MAX_TASKS_PER_NODE ? node_gpus : CTL_MAX_TASKS_PER_NODE);
    }
    return 1;
}

void ctl_batch_entry(const ctl_job *j, json_t *entry)
{
    static const char *const copy[] = {"script", "output", "error", "name", NULL};
    for (size_t i = 0; copy[i]; i++) {
        json_t *v = json_object_get(j->spec, copy[i]);
        if (json_is_string(v)) {
            json_object_set(entry, copy[i], v);
        }
    }
    if (j->array_first > 0) {
        json_object_set_new(entry, "array_index", json_integer(j->array_index));
        json_object_set_new(entry, "array_job", json_integer(j->array_first));
    }
    char list[4096] = "";
    size_t off = 0;
    for (size_t k = 0; k < j->nplace && off < sizeof list; k++) {
        off +=
            (size_t)snprintf(list + off, sizeof list - off, "%s%s", k ? "," : "", j->place[k].node);
    }
    if (off < sizeof list) {
        json_object_set_new(entry, "nodelist", json_string(list));
    }
}
