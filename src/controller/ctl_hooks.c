/*
 * ctl_hooks.c - who is told when a job or a node changes.
 *
 * The files that change jobs and nodes (ctl_state.c, ctl_batch.c,
 * ctl_jobs.c, ctl_nodes.c, ctl_sched.c...) sit below the parts that react
 * to a change: the agents' long-polls of a node's desired state
 * (ctl_nodes.c) and the inference services that follow their replica jobs
 * (ctl_services.c). Those parts register a hook here once, at start-up
 * (controller_main.c), before any thread runs; a change calls the hooks in
 * the order registered, with mu held, after the change is in memory. So a
 * lower file never names an upper one, and the order of effects is the
 * one of every state change: stored (or queued to the store in memory
 * order), applied to memory, then told.
 *
 * The tables are small and fixed (CTL_HOOKS_MAX each): the controller has
 * one hook of each kind today.
 */
#include "ctl_int.h"

#include "cr_error.h"
#include "cr_log.h"

/* Room for one more hook in a table that holds n: 0 or CR_ERANGE. */
static int room(size_t n, const char *kind)
{
    if (n >= CTL_HOOKS_MAX) {
        cr_error("controller: more than %d %s hooks", CTL_HOOKS_MAX, kind);
        return CR_ERANGE;
    }
    return 0;
}

int ctl_on_job_change(ctl *c, ctl_job_hook fn)
{
    int rc = room(c->hooks.njob, "job");
    if (rc == 0) {
        c->hooks.job[c->hooks.njob++] = fn;
    }
    return rc;
}

int ctl_on_node_change(ctl *c, ctl_node_hook fn)
{
    int rc = room(c->hooks.nnode, "node");
    if (rc == 0) {
        c->hooks.node[c->hooks.nnode++] = fn;
    }
    return rc;
}

void ctl_job_changed(ctl *c, ctl_job *j)
{
    for (size_t i = 0; i < c->hooks.njob; i++) {
        c->hooks.job[i](c, j);
    }
}

void ctl_node_bump(ctl *c, ctl_node *n)
{
    n->version++;
    for (size_t i = 0; i < c->hooks.nnode; i++) {
        c->hooks.node[i](c, n);
    }
}
