/*
 * ctl_desired.c - a node's desired state: the document its agent reads
 * (GET /v1/agents/{node}/desired, ctl_nodes.c) and the long-polls waiting
 * on it.
 *
 * Desired state, not commands: the document lists every job placed on the
 * node with what its agent needs to run it (GPUs and their UUIDs, the
 * gang's rendezvous, the batch members, the container, the user and
 * limits, the opened secrets) and whether to run or stop it. Its version
 * moves with every change (ctl_node_bump); the node hook registered here
 * (ctl_desired_changed) answers the waiting long-polls with the new
 * document at once.
 */
#include "ctl_int.h"
#include "ctl_pools.h"

#include "cr_log.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The UUID to run a job on: the GPU's, or for a MIG placement the UUID of
 * the registered instance the scheduler chose (the one whose start slice
 * the placement holds). A placement without a known start (stored by an
 * older controller) gets the instances of its profile in job-id order
 * among the jobs on that GPU, so two jobs sharing a GPU differ.
 */
const char *ctl_place_uuid(ctl *c, const ctl_node *n, const ctl_job *j, const ctl_place *pl,
                           size_t q_entry)
{
    int gpu_index = pl->gpus[q_entry];
    const ctl_gpu *g = NULL;
    for (size_t x = 0; x < n->ngpus; x++) {
        if (n->gpus[x].index == gpu_index) {
            g = &n->gpus[x];
        }
    }
    if (!g) {
        return "";
    }
    if (!*pl->mig_profile || !g->mig) {
        return g->uuid;
    }
    if (pl->mig_start[q_entry] >= 0) {
        for (size_t i = 0; i < json_array_size(g->mig) && i < 8; i++) {
            json_t *m = json_array_get(g->mig, i);
            const char *prof = json_string_value(json_object_get(m, "profile"));
            const char *uuid = json_string_value(json_object_get(m, "uuid"));
            if (prof && uuid && g->mig_start[i] == pl->mig_start[q_entry] &&
                strcmp(prof, pl->mig_profile) == 0) {
                return uuid;
            }
        }
        return ""; /* no such instance: the agent refuses rather than guess */
    }
    size_t rank = 0;
    for (size_t i = 0; i < n->njobs; i++) {
        const ctl_job *o = ctl_job_get(c, n->jobs[i]);
        if (!o || o->id >= j->id) {
            continue;
        }
        for (size_t k = 0; k < o->nplace; k++) {
            if (strcmp(o->place[k].node, n->name) != 0 ||
                strcmp(o->place[k].mig_profile, pl->mig_profile) != 0) {
                continue;
            }
            for (size_t q = 0; q < o->place[k].ngpus; q++) {
                rank += o->place[k].gpus[q] == gpu_index;
            }
        }
    }
    size_t seen = 0;
    for (size_t i = 0; i < json_array_size(g->mig); i++) {
        json_t *m = json_array_get(g->mig, i);
        const char *prof = json_string_value(json_object_get(m, "profile"));
        const char *uuid = json_string_value(json_object_get(m, "uuid"));
        if (prof && uuid && strcmp(prof, pl->mig_profile) == 0 && seen++ == rank) {
            return uuid;
        }
    }
    return g->uuid;
}

/*
 * The job's user and limits on this node: the run_as fixed at submit, else
 * the tenant's mapping now (service replicas); limits from the spec, else
 * the per-GPU defaults times the GPUs it has here. A job whose tenant lost
 * its mapping since it was submitted is sent as uid 0 without allow_root,
 * which every agent refuses.
 */
static void desired_fence(ctl *c, const ctl_job *j, const ctl_place *pl, json_t *e)
{
    json_t *ra = json_object_get(j->spec, "run_as");
    ctl_run_as m = {0};
    char why[300];
    if (ra) {
        m.mapped = true;
        m.uid = (int64_t)json_integer_value(json_object_get(ra, "uid"));
        m.gid = (int64_t)json_integer_value(json_object_get(ra, "gid"));
        m.allow_root = json_is_true(json_object_get(ra, "allow_root"));
    } else if (ctl_run_as_lookup(&c->cfg, j->tenant, NULL, &m, why, sizeof why) != 0) {
        m.mapped = true;
        m.uid = m.gid = 0;
        m.allow_root = false;
    }
    if (m.mapped) {
        json_object_set_new(e, "uid", json_integer(m.uid));
        json_object_set_new(e, "gid", json_integer(m.gid));
        if (m.allow_root) {
            json_object_set_new(e, "allow_root", json_true());
        }
    }
    json_t *cpus = json_object_get(j->spec, "cpus");
    json_t *mem = json_object_get(j->spec, "mem_bytes");
    json_t *pids = json_object_get(j->spec, "pids");
    double per = pl->ngpus > 0 ? (double)pl->ngpus : 1.0;
    if (pids) {
        json_object_set(e, "pids", pids);
    } else if (c->cfg.pids_per_gpu > 0) {
        double x = (double)c->cfg.pids_per_gpu * per;
        json_object_set_new(e, "pids", json_integer(x > 4194304 ? 4194304 : (json_int_t)x));
    }
    if (cpus) {
        json_object_set(e, "cpus", cpus);
    } else if (c->cfg.cpus_per_gpu > 0) {
        json_object_set_new(e, "cpus", json_real(c->cfg.cpus_per_gpu * per));
    }
    if (mem) {
        json_object_set(e, "mem_bytes", mem);
    } else if (c->cfg.mem_per_gpu_bytes > 0) {
        json_object_set_new(e, "mem_bytes",
                            json_integer((json_int_t)((double)c->cfg.mem_per_gpu_bytes * per)));
    }
}

/* Why job id stopped on this node, into gone (id -> text). mu held. */
static void gone_add(ctl *c, json_t *gone, int64_t id)
{
    char why[700], key[24];
    ctl_job_gone_why(c, id, why, sizeof why);
    snprintf(key, sizeof key, "%lld", (long long)id);
    json_object_set_new(gone, key, json_string(why));
}

json_t *ctl_desired_doc(ctl *c, const ctl_node *n)
{
    json_t *jobs = json_array();
    json_t *gone = json_object(); /* "stop_reasons": why the jobs not listed stopped */
    for (size_t i = 0; i < n->njobs; i++) {
        ctl_job *j = ctl_job_get(c, n->jobs[i]);
        if (j && ctl_job_terminal(j)) {
            gone_add(c, gone, j->id); /* ended, not yet taken off the node */
        }
        if (!j || (j->state != JS_RUNNING && j->state != JS_COMPLETING) || j->start_unstored) {
            continue; /* (a start is shown once it is durable: ctl_sched.c) */
        }
        size_t rank = 0;
        const ctl_place *pl = NULL;
        for (size_t k = 0; k < j->nplace; k++) {
            if (strcmp(j->place[k].node, n->name) == 0) {
                pl = &j->place[k];
                rank = k;
                break;
            }
        }
        if (!pl) {
            continue;
        }
        json_t *gpus = json_array(), *uuids = json_array();
        for (size_t g = 0; g < pl->ngpus; g++) {
            json_array_append_new(gpus, json_integer(pl->gpus[g]));
            json_array_append_new(uuids, json_string(ctl_place_uuid(c, n, j, pl, g)));
        }
        const ctl_node *master = ctl_node_find(c, j->place[0].node);
        char ckpt[1200];
        snprintf(ckpt, sizeof ckpt, "%s/%s/%s/%lld", c->cfg.checkpoint_root, c->cluster_id,
                 j->tenant, (long long)j->id);
        /* Launch mode (ctl_batch.c): tasks per node, each its own rank.
         * The rendezvous port is the one rank 0's agent reserved and
         * reported (0 until then: the other nodes wait for it). A service
         * replica keeps the old fixed port: its agent assigns PORT instead. */
        bool launcher = false;
        int tpn = ctl_batch_tasks_per_node(j, pl->ngpus, &launcher);
        bool service = json_object_get(j->spec, "service") != NULL;
        json_t *gang =
            json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "master_addr",
                      master ? master->addr : n->addr, "master_port",
                      service ? 29500 + (int)(j->id % 20000) : j->port, "world_size",
                      (int)j->nplace * tpn, "node_rank", (int)rank, "nnodes", (int)j->nplace,
                      "local_world_size", tpn, "rank_offset", (int)rank * tpn, "tasks_per_node",
                      tpn, "gpus_per_node", (int)pl->ngpus, "launcher", launcher ? 1 : 0);
        const char *wd = json_string_value(json_object_get(j->spec, "workdir"));
        if (!wd && c->cfg.shared_submit_dir && !json_object_get(j->spec, "image")) {
            /* sbatch's default: the directory it was submitted from, where
             * the cluster says that path is the same on its nodes */
            wd = json_string_value(json_object_get(j->spec, "submit_dir"));
        }
        /* Opened only here, for the node's own credential, like the
         * secrets below. */
        json_t *env = ctl_job_env_open(c, j->id, j->spec);
        json_t *e = json_pack("{s:I,s:O,s:o,s:s,s:o,s:o,s:s,s:I,s:s,s:o,s:s,s:s}", "job",
                              (json_int_t)j->id, "command", json_object_get(j->spec, "command"),
                              "env", env ? env : json_object(), "workdir", wd ? wd : "", "gpus",
                              gpus, "gpu_uuids", uuids, "checkpoint_dir", ckpt, "grace_s",
                              (json_int_t)(j->stop_grace_s > 0 && j->stop_grace_s < c->cfg.grace_s
                                               ? j->stop_grace_s
                                               : c->cfg.grace_s),
                              "action", j->state == JS_RUNNING && !pl->exited_ok ? "run" : "stop",
                              "gang", gang, "tenant", j->tenant, "mig_profile", pl->mig_profile);
        json_object_set_new(e, "run", json_integer(j->runs));
        if (j->plan.tp > 0) {
            /* Corral's own variables: the agent sets them after the job's */
            json_t *pe = json_object();
            ctl_plan_env(&j->plan, pe);
            json_object_set_new(e, "plan_env", pe);
        }
        if (j->checkpointable) {
            /* the suspend contract: a stop is this signal, then grace_s */
            json_object_set_new(e, "checkpoint_signal", json_string(j->ckpt_signal));
            if (j->runs > 1) {
                json_object_set_new(e, "resume", json_true()); /* CORRAL_RESUME=1 */
            }
        }
        if (json_is_true(json_object_get(j->spec, "keep_running_on_partition"))) {
            json_object_set_new(e, "keep_running_on_partition", json_true()); /* node lease */
        }
        if (j->gpu_milli || j->gpu_mem_bytes) {
            json_object_set_new(e, "gpu_milli", json_integer(j->gpu_milli));
            json_object_set_new(e, "gpu_mem_bytes", json_integer(j->gpu_mem_bytes));
        }
        ctl_batch_entry(j, e);
        if (ctl_batch_is_batch(j)) {
            /* the script once, on rank 0; srun asks these agents (rank
             * order) for steps, with the run's step credential */
            char tok[CTL_STEP_TOKEN_LEN + 1];
            ctl_batch_step_token(c, j, tok);
            char urls[8192] = "";
            size_t off = 0;
            for (size_t k = 0; k < j->nplace && off < sizeof urls; k++) {
                const ctl_node *o = ctl_node_find(c, j->place[k].node);
                off += (size_t)snprintf(urls + off, sizeof urls - off, "%s", k ? "," : "");
                if (o && o->port > 0 && off < sizeof urls) {
                    off += (size_t)snprintf(urls + off, sizeof urls - off, "%s://%s:%d",
                                            o->tls ? "https" : "http", o->addr, o->port);
                }
            }
            json_object_set_new(e, "batch", json_true());
            json_object_set_new(e, "step_token", json_string(tok));
            if (off < sizeof urls) {
                json_object_set_new(e, "step_agents", json_string(urls));
            }
            sodium_memzero(tok, sizeof tok);
        }
        json_t *data = json_object_get(j->spec, "data");
        if (data) {
            json_object_set(e, "data", data); /* staged before the job starts (docs/data.md) */
        }
        json_t *ctr = ctl_ctr_desired(c, j->spec);
        if (ctr) {
            json_object_set_new(e, "container", ctr);
        }
        desired_fence(c, j, pl, e);
        if (j->secrets_enc) {
            /* Opened only here, for the node's own credential (the caller
             * checked it); the agent keeps them out of its journal. */
            char *plain = NULL;
            json_t *sv = NULL;
            if (ctl_unseal(c, j->secrets_enc, &plain) == 0) {
                sv = json_loads(plain, 0, NULL);
            }
            ctl_secret_free(plain);
            if (sv) {
                json_object_set_new(e, "secret_env", sv);
            } else {
                cr_error("job=%lld: its secrets do not open with this controller's key",
                         (long long)j->id);
            }
        }
        if (json_object_get(j->spec, "service")) {
            /* PORT in env is the preferred port; the agent reports the one
             * it gave (another program on the node may hold the preferred). */
            json_object_set_new(e, "assign_port", json_true());
        }
        json_array_append_new(jobs, e);
    }
    char base[1100];
    snprintf(base, sizeof base, "%s/%s", c->cfg.checkpoint_root, c->cluster_id);
    json_t *doc = json_pack("{s:I,s:o,s:s,s:I}", "version", (json_int_t)n->version, "jobs", jobs,
                            "checkpoint_base", base, "checkpoint_retention_s",
                            (json_int_t)c->cfg.checkpoint_retention_s);
    /* ... and the jobs last taken off this node (for its log). */
    size_t ring = sizeof n->gone / sizeof n->gone[0];
    for (unsigned i = n->ngone > ring ? n->ngone - (unsigned)ring : 0; i < n->ngone; i++) {
        int64_t id = n->gone[i % ring];
        ctl_job *gj = ctl_job_get(c, id);
        bool here = false;
        for (size_t k = 0; gj && k < gj->nplace; k++) {
            here |= strcmp(gj->place[k].node, n->name) == 0;
        }
        if (!here) {
            gone_add(c, gone, id);
        }
    }
    json_object_set_new(doc, "stop_reasons", gone);
    int64_t cap = ctl_pools_power_cap_w(c, n); /* its pool's power budget */
    if (cap > 0) {
        json_object_set_new(doc, "power_cap_w", json_integer(cap));
    }
    json_t *layouts = ctl_mig_layouts(n); /* dynamic MIG: before its jobs start */
    if (layouts) {
        json_object_set_new(doc, "mig_layouts", layouts);
    }
    return doc;
}

static json_t *desired_doc(ctl *c, void *n)
{
    return ctl_desired_doc(c, n);
}

void ctl_desired_answer(ctl *c, ctl_node *n, bool expired_only, int64_t now_mono)
{
    ctl_poll_answer(c, &n->polls, expired_only, now_mono, desired_doc, n, NULL);
}

void ctl_desired_changed(ctl *c, ctl_node *n)
{
    ctl_desired_answer(c, n, false, 0);
}
