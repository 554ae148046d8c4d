/*
 * job_env.c - a job's environment, built only from the job spec, the
 * passwd entry of its user and Corral's own variables: never the agent's
 * environment (which may hold its tokens, proxies, LD_PRELOAD...). See
 * cr_desired.h. New job variables (launcher conventions) belong here.
 */
#include "cr_desired.h"

#include "cr_alloc.h"
#include "cr_envname.h"

#include <pwd.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

char **cr_job_env_base(const cr_job_spec *s, const char *home_fallback)
{
    char **v = cr_calloc(8, sizeof *v);
    size_t n = 0;
    uid_t uid = s->has_user ? (uid_t)s->uid : geteuid();
    struct passwd pw, *res = NULL;
    char buf[4096];
    getpwuid_r(uid, &pw, buf, sizeof buf, &res);
    v[n++] = cr_strdup("PATH=" DEFAULT_PATH);
    v[n++] = cr_strdup("LANG=C.UTF-8");
    v[n++] = cr_strdup("SHELL=/bin/sh");
    if (res && res->pw_dir && *res->pw_dir && strcmp(res->pw_dir, "/nonexistent") != 0 &&
        access(res->pw_dir, F_OK) == 0) {
        v[n++] = cr_asprintf("HOME=%s", res->pw_dir);
    } else if (home_fallback) {
        v[n++] = cr_asprintf("HOME=%s", home_fallback);
    }
    if (res && res->pw_name) {
        v[n++] = cr_asprintf("USER=%s", res->pw_name);
        v[n++] = cr_asprintf("LOGNAME=%s", res->pw_name);
    }
    v[n] = NULL;
    return v;
}

/* Set by the node (cr_envname.h), never by the job spec. CORRAL_SERVICE is
 * the one CORRAL_ variable a spec carries: the controller puts it in a
 * service replica's env (ctl_services.c; users cannot, it refuses them). */
static int corral_owned(const char *kv)
{
    size_t n = strcspn(kv, "=");
    if (n == strlen("CORRAL_SERVICE") && strncmp(kv, "CORRAL_SERVICE", n) == 0) {
        return 0;
    }
    return cr_env_reserved(kv, n);
}

/* The job's own variables override the base, but not Corral's. */
static void overlay(char **v, size_t *n, char *const *add, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (corral_owned(add[i])) {
            continue;
        }
        size_t kl = (size_t)(strchr(add[i], '=') - add[i]) + 1;
        size_t k;
        for (k = 0; k < *n; k++) {
            if (strncmp(v[k], add[i], kl) == 0) {
                break;
            }
        }
        if (k < *n) {
            free(v[k]);
            v[k] = cr_strdup(add[i]);
        } else {
            v[(*n)++] = cr_strdup(add[i]);
        }
    }
}

char **cr_job_env(const cr_job_spec *s, char *const *base, const char *node)
{
    size_t nb = 0;
    while (base && base[nb]) {
        nb++;
    }
    size_t nd = 0;
    while (s->data_env && s->data_env[nd]) {
        nd++;
    }
    size_t cap = nb + s->envc + s->secretc + s->planc + nd + 30; /* Corral's own: at most 24 */
    char **v = cr_calloc(cap + 1, sizeof *v);
    size_t n = 0;
    for (size_t i = 0; i < nb; i++) {
        if (!corral_owned(base[i])) {
            v[n++] = cr_strdup(base[i]);
        }
    }
    overlay(v, &n, s->env, s->envc);
    overlay(v, &n, s->secret_env, s->secretc);
    /* CUDA_VISIBLE_DEVICES: the UUIDs the controller chose (GPU or MIG),
     * else the indexes. */
    char cvd[4096] = "";
    size_t off = 0;
    if (s->uuid_count > 0) {
        for (size_t i = 0; i < s->uuid_count && off < sizeof cvd; i++) {
            off += (size_t)snprintf(cvd + off, sizeof cvd - off, "%s%s", i ? "," : "",
                                    s->gpu_uuids[i]);
        }
    } else {
        for (size_t i = 0; i < s->gpu_count && off < sizeof cvd; i++) {
            off += (size_t)snprintf(cvd + off, sizeof cvd - off, "%s%d", i ? "," : "", s->gpus[i]);
        }
    }
    v[n++] = cr_asprintf("CUDA_VISIBLE_DEVICES=%s", cvd);
    v[n++] = cr_asprintf("CORRAL_JOB_ID=%lld", (long long)s->job);
    v[n++] = cr_asprintf("CORRAL_NODE=%s", node ? node : "");
    if (s->checkpoint_dir) {
        v[n++] = cr_asprintf("CORRAL_CHECKPOINT_DIR=%s", s->checkpoint_dir);
    }
    if (s->resume) {
        v[n++] = cr_strdup("CORRAL_RESUME=1"); /* the suspend contract: resume from it */
    }
    for (size_t i = 0; i < nd; i++) {
        v[n++] = cr_strdup(s->data_env[i]); /* CORRAL_DATA_<NAME>=path (docs/data.md) */
    }
    for (size_t i = 0; i < s->planc; i++) {
        v[n++] = cr_strdup(s->plan_env[i]); /* the advisor's plan (docs/model.md) */
    }
    if (s->planc && s->has_gang) {
        /* torchrun's own arguments for this node, beside the PET_* it reads */
        const cr_gang *g = &s->gang;
        v[n++] = cr_asprintf("CORRAL_TORCHRUN_ARGS=--nnodes=%d --nproc-per-node=%d "
                             "--node-rank=%d --master-addr=%s --master-port=%d",
                             g->nnodes, g->gpus_per_node > 0 ? g->gpus_per_node : 1, g->node_rank,
                             g->master_addr, g->master_port);
    }
    if (s->gpu_milli || s->gpu_mem_bytes) {
        /* A fractional task on a shared GPU. MPS clients of the agent's
         * daemon for the GPU (mps_pipe, agent_mps.c) have these limits
         * enforced by the MPS server; otherwise the GPU is time-sliced
         * and the limits are the job's to keep. */
        int pct = s->gpu_milli ? (int)((s->gpu_milli + 9) / 10) : 100;
        v[n++] = cr_asprintf("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%d", pct < 1 ? 1 : pct);
        if (s->gpu_mem_bytes) {
            v[n++] = cr_asprintf("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=%lldM",
                                 (long long)((s->gpu_mem_bytes + (1 << 20) - 1) >> 20));
        }
        v[n++] = cr_asprintf("CORRAL_GPU_FRACTION=%.3f", (double)s->gpu_milli / 1000.0);
        if (s->mps_pipe) {
            v[n++] = cr_asprintf("CUDA_MPS_PIPE_DIRECTORY=%s", s->mps_pipe);
        }
        v[n++] = cr_asprintf("CORRAL_GPU_SHARING=%s", s->mps_pipe ? "mps" : "time-slicing");
    }
    if (s->batch && s->step_token[0]) {
        /* for stepd and srun (docs/slurm.md) */
        char sock[80];
        cr_step_sock_name(s->step_token, node, sock, sizeof sock);
        v[n++] = cr_asprintf("CORRAL_STEPD_SOCK=%s", sock);
        v[n++] = cr_asprintf("CORRAL_STEP_TOKEN=%s", s->step_token);
        v[n++] = cr_asprintf("CORRAL_STEP_AGENTS=%s", s->step_agents ? s->step_agents : "");
        if (s->step_server) {
            v[n++] = cr_asprintf("CORRAL_STEP_SERVER=%s", s->step_server);
        }
    }
    if (s->has_gang) {
        /* One process per node, as torchrun expects to be started: RANK is
         * the node's first global rank and LOCAL_RANK 0; torchrun (or the
         * job) spreads LOCAL_WORLD_SIZE workers from there. */
        const cr_gang *g = &s->gang;
        v[n++] = cr_asprintf("MASTER_ADDR=%s", g->master_addr);
        v[n++] = cr_asprintf("MASTER_PORT=%d", g->master_port);
        v[n++] = cr_asprintf("WORLD_SIZE=%d", g->world_size);
        v[n++] = cr_asprintf("NODE_RANK=%d", g->node_rank);
        v[n++] = cr_asprintf("GROUP_RANK=%d", g->node_rank);
        v[n++] = cr_asprintf("NNODES=%d", g->nnodes);
        v[n++] = cr_asprintf("LOCAL_WORLD_SIZE=%d", g->local_world_size);
        v[n++] = cr_asprintf("RANK=%d", g->rank_offset);
        v[n++] = cr_asprintf("LOCAL_RANK=0");
    }
    v[n] = NULL;
    return v;
}

void cr_step_sock_name(const char *token, const char *node, char *out, size_t len)
{
    uint8_t h[16];
    char hex[33];
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, sizeof h);
    crypto_generichash_update(&st, (const uint8_t *)token, strlen(token));
    crypto_generichash_update(&st, (const uint8_t *)"/", 1);
    crypto_generichash_update(&st, (const uint8_t *)(node ? node : ""), strlen(node ? node : ""));
    crypto_generichash_final(&st, h, sizeof h);
    sodium_bin2hex(hex, sizeof hex, h, sizeof h);
    snprintf(out, len, "corral-step-%s", hex);
}
