/*
 * ctl_nodeobj.c - nodes by name (the index), the jobs placed on a node and
 * the labels an admin gave it (ctl_lifecycle.c stores them).
 *
 * Used by every controller file; calls nothing above it.
 */
#include "ctl_int.h"

#include "cr_alloc.h"

#include <string.h>

/* Nodes by name: open addressing over FNV-1a, slots hold index + 1 (0 =
 * empty). Nodes are never removed, so there are no tombstones. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    }
    return h;
}

void ctl_node_index_put(ctl *c, size_t idx)
{
    size_t mask = c->node_slots_cap - 1;
    size_t i = (size_t)name_hash(c->nodes[idx]->name) & mask;
    while (c->node_slots[i]) {
        i = (i + 1) & mask;
    }
    c->node_slots[i] = (uint32_t)(idx + 1);
}

ctl_node *ctl_node_find(ctl *c, const char *name)
{
    if (!c->node_slots_cap) {
        return NULL;
    }
    size_t mask = c->node_slots_cap - 1;
    for (size_t i = (size_t)name_hash(name) & mask; c->node_slots[i]; i = (i + 1) & mask) {
        ctl_node *n = c->nodes[c->node_slots[i] - 1];
        if (strcmp(n->name, name) == 0) {
            return n;
        }
    }
    return NULL;
}

void ctl_node_add_job(ctl_node *n, int64_t id)
{
    for (size_t i = 0; i < n->njobs; i++) {
        if (n->jobs[i] == id) {
            return;
        }
    }
    CR_GROW(n->jobs, n->njobs, n->capjobs);
    n->jobs[n->njobs++] = id;
}

void ctl_node_del_job(ctl_node *n, int64_t id)
{
    for (size_t i = 0; i < n->njobs; i++) {
        if (n->jobs[i] == id) {
            n->jobs[i] = n->jobs[--n->njobs];
            n->gone[n->ngone++ % (sizeof n->gone / sizeof n->gone[0])] = id;
            return;
        }
    }
}

json_t *ctl_node_labels(ctl *c, const char *name)
{
    json_t *l = c->node_labels ? json_object_get(c->node_labels, name) : NULL;
    return l && json_object_size(l) > 0 ? l : NULL;
}
