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
 *
 * The document is written as compact JSON text (ctl_jw.c), once per bump
 * however many polls wait, in the order and with the bytes the jansson
 * tree it replaced dumped to (an entry or member jansson would have left
 * out, for text that is not UTF-8, is left out here too): building the
 * tree and dumping it for each poll was a fifth of the controller's
 * instructions in bench_agent_e2e.
 */
#include "ctl_int.h"
#include "ctl_pools.h"

#include "cr_alloc.h"
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
static void desired_fence(ctl *c, const ctl_job *j, const ctl_place *pl, cr_buf *b)
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
        ctl_jw_kint(b, "uid", m.uid);
        ctl_jw_kint(b, "gid", m.gid);
        if (m.allow_root) {
            ctl_jw_ktrue(b, "allow_root");
        }
    }
    json_t *cpus = json_object_get(j->spec, "cpus");
    json_t *mem = json_object_get(j->spec, "mem_bytes");
    json_t *pids = json_object_get(j->spec, "pids");
    double per = pl->ngpus > 0 ? (double)pl->ngpus : 1.0;
    if (pids) {
        ctl_jw_kjson(b, "pids", pids);
    } else if (c->cfg.pids_per_gpu > 0) {
        double x = (double)c->cfg.pids_per_gpu * per;
        ctl_jw_kint(b, "pids", x > 4194304 ? 4194304 : (int64_t)x);
    }
    if (cpus) {
        ctl_jw_kjson(b, "cpus", cpus);
    } else if (c->cfg.cpus_per_gpu > 0) {
        ctl_jw_kreal(b, "cpus", c->cfg.cpus_per_gpu * per);
    }
    if (mem) {
        ctl_jw_kjson(b, "mem_bytes", mem);
    } else if (c->cfg.mem_per_gpu_bytes > 0) {
        ctl_jw_kint(b, "mem_bytes", (int64_t)((double)c->cfg.mem_per_gpu_bytes * per));
    }
}

/*
 * "stop_reasons": why job id stopped on this node, id -> text. Each id is
 * written once, where it first came (a job taken off the node twice is in
 * the ring twice; the text is the same); a text that is not UTF-8 is left
 * out. mu held.
 */
typedef struct gone_set {
    int64_t *ids; /* written so far (new; freed by the caller) */
    size_t n, cap;
} gone_set;

static void gone_add(ctl *c, cr_buf *b, gone_set *seen, int64_t id)
{
    for (size_t i = 0; i < seen->n; i++) {
        if (seen->ids[i] == id) {
            return;
        }
    }
    if (seen->n == seen->cap) {
        seen->cap = seen->cap ? 2 * seen->cap : 16;
        seen->ids = cr_reallocarray(seen->ids, seen->cap, sizeof *seen->ids);
    }
    seen->ids[seen->n++] = id;
    char why[700], key[24];
    ctl_job_gone_why(c, id, why, sizeof why);
    snprintf(key, sizeof key, "%lld", (long long)id);
    ctl_jw_kstr(b, key, why);
}

/*
 * Job j's entry on node n (placement pl, rank of the job's placements)
 * appended to b; false (b as it was) where the entry cannot be written,
 * as the jansson-built document left such an entry out.
 */
static bool desired_entry(ctl *c, const ctl_node *n, const ctl_job *j, const ctl_place *pl,
                          size_t rank, cr_buf *b)
{
    const char *atext = j->state == JS_RUNNING && !pl->exited_ok ? "run" : "stop";
    json_t *command = json_object_get(j->spec, "command");
    const ctl_node *master = ctl_node_find(c, j->place[0].node);
    const char *maddr = master ? master->addr : n->addr;
    char ckpt[1200];
    snprintf(ckpt, sizeof ckpt, "%s/%s/%s/%lld", c->cfg.checkpoint_root, c->cluster_id, j->tenant,
             (long long)j->id);
    const char *wd = json_string_value(json_object_get(j->spec, "workdir"));
    if (!wd && c->cfg.shared_submit_dir && !json_object_get(j->spec, "image")) {
        /* sbatch's default: the directory it was submitted from, where
         * the cluster says that path is the same on its nodes */
        wd = json_string_value(json_object_get(j->spec, "submit_dir"));
    }
    if (!command || !ctl_jw_str_ok(maddr) || !ctl_jw_str_ok(ckpt) || !ctl_jw_str_ok(wd ? wd : "") ||
        !ctl_jw_str_ok(j->tenant) || !ctl_jw_str_ok(pl->mig_profile)) {
        return false;
    }
    /* Opened only here, for the node's own credential, like the
     * secrets below. */
    json_t *env = ctl_job_env_open(c, j->id, j->spec);
    cr_buf_puts(b, "{");
    ctl_jw_kint(b, "job", j->id);
    ctl_jw_kjson(b, "command", command);
    ctl_jw_key(b, "env");
    if (env) {
        ctl_jw_json(b, env);
    } else {
        cr_buf_puts(b, "{}");
    }
    json_decref(env);
    ctl_jw_kstr(b, "workdir", wd ? wd : "");
    ctl_jw_key(b, "gpus");
    cr_buf_putc(b, '[');
    for (size_t g = 0; g < pl->ngpus; g++) {
        if (g) {
            cr_buf_putc(b, ',');
        }
        ctl_jw_int(b, pl->gpus[g]);
    }
    cr_buf_putc(b, ']');
    ctl_jw_key(b, "gpu_uuids");
    cr_buf_putc(b, '[');
    bool any = false;
    for (size_t g = 0; g < pl->ngpus; g++) {
        const char *u = ctl_place_uuid(c, n, j, pl, g);
        if (ctl_jw_str_ok(u)) { /* (jansson dropped an element it refused) */
            if (any) {
                cr_buf_putc(b, ',');
            }
            ctl_jw_str(b, u);
            any = true;
        }
    }
    cr_buf_putc(b, ']');
    ctl_jw_kstr(b, "checkpoint_dir", ckpt);
    ctl_jw_kint(b, "grace_s",
                j->stop_grace_s > 0 && j->stop_grace_s < c->cfg.grace_s ? j->stop_grace_s
                                                                        : c->cfg.grace_s);
    ctl_jw_kstr(b, "action", atext);
    /* Launch mode (ctl_batch.c): tasks per node, each its own rank.
     * The rendezvous port is the one rank 0's agent reserved and
     * reported (0 until then: the other nodes wait for it). A service
     * replica keeps the old fixed port: its agent assigns PORT instead. */
    bool launcher = false;
    int tpn = ctl_batch_tasks_per_node(j, pl->ngpus, &launcher);
    bool service = json_object_get(j->spec, "service") != NULL;
    ctl_jw_key(b, "gang");
    cr_buf_putc(b, '{');
    ctl_jw_kstr(b, "master_addr", maddr);
    ctl_jw_kint(b, "master_port", service ? 29500 + (int)(j->id % 20000) : j->port);
    ctl_jw_kint(b, "world_size", (int)j->nplace * tpn);
    ctl_jw_kint(b, "node_rank", (int)rank);
    ctl_jw_kint(b, "nnodes", (int)j->nplace);
    ctl_jw_kint(b, "local_world_size", tpn);
    ctl_jw_kint(b, "rank_offset", (int)rank * tpn);
    ctl_jw_kint(b, "tasks_per_node", tpn);
    ctl_jw_kint(b, "gpus_per_node", (int)pl->ngpus);
    ctl_jw_kint(b, "launcher", launcher ? 1 : 0);
    cr_buf_putc(b, '}');
    ctl_jw_kstr(b, "tenant", j->tenant);
    ctl_jw_kstr(b, "mig_profile", pl->mig_profile);
    ctl_jw_kint(b, "run", j->runs);
    if (j->plan.tp > 0) {
        /* Corral's own variables: the agent sets them after the job's */
        json_t *pe = json_object();
        ctl_plan_env(&j->plan, pe);
        ctl_jw_kjson(b, "plan_env", pe);
        json_decref(pe);
    }
    if (j->checkpointable) {
        /* the suspend contract: a stop is this signal, then grace_s */
        ctl_jw_kstr(b, "checkpoint_signal", j->ckpt_signal);
        if (j->runs > 1) {
            ctl_jw_ktrue(b, "resume"); /* CORRAL_RESUME=1 */
        }
    }
    if (json_is_true(json_object_get(j->spec, "keep_running_on_partition"))) {
        ctl_jw_ktrue(b, "keep_running_on_partition"); /* node lease */
    }
    if (j->gpu_milli || j->gpu_mem_bytes) {
        ctl_jw_kint(b, "gpu_milli", j->gpu_milli);
        ctl_jw_kint(b, "gpu_mem_bytes", j->gpu_mem_bytes);
    }
    ctl_batch_entry(j, b);
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
        ctl_jw_ktrue(b, "batch");
        ctl_jw_kstr(b, "step_token", tok);
        if (off < sizeof urls) {
            ctl_jw_kstr(b, "step_agents", urls);
        }
        sodium_memzero(tok, sizeof tok);
    }
    /* staged before the job starts (docs/data.md) */
    ctl_jw_kjson(b, "data", json_object_get(j->spec, "data"));
    json_t *ctr = ctl_ctr_desired(c, j->spec);
    ctl_jw_kjson(b, "container", ctr);
    json_decref(ctr);
    desired_fence(c, j, pl, b);
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
            ctl_jw_kjson(b, "secret_env", sv);
            json_decref(sv);
        } else {
            cr_error("job=%lld: its secrets do not open with this controller's key",
                     (long long)j->id);
        }
    }
    if (json_object_get(j->spec, "service")) {
        /* PORT in env is the preferred port; the agent reports the one
         * it gave (another program on the node may hold the preferred). */
        ctl_jw_ktrue(b, "assign_port");
    }
    cr_buf_putc(b, '}');
    return true;
}

char *ctl_desired_text(ctl *c, const ctl_node *n, size_t *len)
{
    char base[1100];
    snprintf(base, sizeof base, "%s/%s", c->cfg.checkpoint_root, c->cluster_id);
    if (!ctl_jw_str_ok(base)) {
        return NULL;
    }
    cr_buf b, gone; /* "stop_reasons": why the jobs not listed stopped */
    cr_buf_init(&b);
    cr_buf_init(&gone);
    gone_set seen = {.ids = NULL, .n = 0, .cap = 0};
    cr_buf_putc(&gone, '{');
    cr_buf_putc(&b, '{');
    ctl_jw_kint(&b, "version", (int64_t)n->version);
    ctl_jw_key(&b, "jobs");
    cr_buf_putc(&b, '[');
    for (size_t i = 0; i < n->njobs; i++) {
        ctl_job *j = ctl_job_get(c, n->jobs[i]);
        if (j && ctl_job_terminal(j)) {
            gone_add(c, &gone, &seen, j->id); /* ended, not yet taken off the node */
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
        size_t at = b.len;
        if (b.data[b.len - 1] != '[') {
            cr_buf_putc(&b, ',');
        }
        if (!desired_entry(c, n, j, pl, rank, &b)) {
            b.len = at;
            b.data[at] = '\0';
        }
    }
    cr_buf_putc(&b, ']');
    ctl_jw_kstr(&b, "checkpoint_base", base);
    ctl_jw_kint(&b, "checkpoint_retention_s", c->cfg.checkpoint_retention_s);
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
            gone_add(c, &gone, &seen, id);
        }
    }
    cr_buf_putc(&gone, '}');
    ctl_jw_key(&b, "stop_reasons");
    cr_buf_append(&b, gone.data, gone.len);
    cr_buf_fini(&gone);
    free(seen.ids);
    int64_t cap = ctl_pools_power_cap_w(c, n); /* its pool's power budget */
    if (cap > 0) {
        ctl_jw_kint(&b, "power_cap_w", cap);
    }
    json_t *layouts = ctl_mig_layouts(n); /* dynamic MIG: before its jobs start */
    ctl_jw_kjson(&b, "mig_layouts", layouts);
    json_decref(layouts);
    cr_buf_putc(&b, '}');
    *len = b.len;
    return cr_buf_take(&b);
}

static char *desired_text(ctl *c, void *n, size_t *len)
{
    return ctl_desired_text(c, n, len);
}

void ctl_desired_answer(ctl *c, ctl_node *n, bool expired_only, int64_t now_mono)
{
    ctl_poll_answer_text(c, &n->polls, expired_only, now_mono, desired_text, n, NULL);
}

void ctl_desired_changed(ctl *c, ctl_node *n)
{
    ctl_desired_answer(c, n, false, 0);
}
