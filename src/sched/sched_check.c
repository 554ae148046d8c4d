/*
 * sched_check.c - cr_sched_check(): every invariant, by recount.
 *
 * Independent of the incremental bookkeeping on purpose: it rebuilds GPU
 * ownership from the running jobs' slots and free counts from the GPUs,
 * then compares. The simulator calls it after every event, the property
 * tests after every step.
 */
#include "cr_sched.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cr_alloc.h"
#include "cr_error.h"
#include "sched_int.h"

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errlen, const char *fmt,
                                                      ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return CR_ECONFLICT;
}

/* CPU and host memory: each running job's ask once on every node it holds
 * GPUs on, plus the host tasks, equals what the node says it holds, and
 * fits where the node models it. */
static int check_host(const cr_sched *s, char *err, size_t errlen)
{
    int rc = 0;
    uint64_t *cpu = cr_calloc((size_t)s->nnodes + 1, sizeof(uint64_t));
    uint64_t *mem = cr_calloc((size_t)s->nnodes + 1, sizeof(uint64_t));
    uint64_t *seen = cr_calloc((size_t)s->nnodes + 1, sizeof(uint64_t));
    for (uint32_t i = 0; i < s->nrunning; i++) {
        const job *j = s->running[i];
        for (uint32_t k = 0; k < j->nslots; k++) {
            uint32_t n = j->slots[k].node;
            if (n < s->nnodes && seen[n] != i + 1) {
                seen[n] = i + 1;
                cpu[n] += j->spec.cpu_milli;
                mem[n] += j->spec.host_mem_bytes;
            }
        }
    }
    for (uint32_t n = 0; n < s->nnodes && rc == 0; n++) {
        const node *nd = &s->nodes[n];
        if (nd->cpu_used != cpu[n] + nd->cpu_host || nd->mem_used != mem[n] + nd->mem_host) {
            rc = fail(err, errlen,
                      "node %s: %" PRIu64 " CPU thousandths and %" PRIu64 " bytes held, %" PRIu64
                      " and %" PRIu64 " by recount",
                      nd->name, nd->cpu_used, nd->mem_used, cpu[n] + nd->cpu_host,
                      mem[n] + nd->mem_host);
        } else if ((nd->cpu_total && nd->cpu_used > nd->cpu_total) ||
                   (nd->mem_total && nd->mem_used > nd->mem_total)) {
            rc = fail(err, errlen,
                      "node %s: %" PRIu64 " of %" PRIu64 " CPU thousandths, %" PRIu64 " of %" PRIu64
                      " memory bytes held",
                      nd->name, nd->cpu_used, nd->cpu_total, nd->mem_used, nd->mem_total);
        }
    }
    free(cpu);
    free(mem);
    free(seen);
    return rc;
}

int cr_sched_check(const cr_sched *s, char *err, size_t errlen)
{
    int rc = 0;
    if (s->order_bad) {
        return fail(err, errlen, "queue order differs from a full sort by key");
    }
    /* per-GPU recount: owner of a whole GPU and MIG masks */
    size_t ngpu = 0;
    uint32_t *base = cr_malloc((s->nnodes + 1) * sizeof(uint32_t));
    for (uint32_t n = 0; n < s->nnodes; n++) {
        base[n] = (uint32_t)ngpu;
        ngpu += s->nodes[n].ngpu;
    }
    uint64_t *owner = cr_calloc(ngpu ? ngpu : 1, sizeof(uint64_t));
    uint8_t *mask = cr_calloc(ngpu ? ngpu : 1, 1);
    uint8_t *comp = cr_calloc(ngpu ? ngpu : 1, 1);
    /* fractional tasks per GPU: thousandths, memory, count */
    uint32_t *shm = cr_calloc(ngpu ? ngpu : 1, sizeof(uint32_t));
    uint64_t *shb = cr_calloc(ngpu ? ngpu : 1, sizeof(uint64_t));
    uint32_t *shn = cr_calloc(ngpu ? ngpu : 1, sizeof(uint32_t));
    uint32_t(*nb)[CR_SCHED_MAX_TYPES] = cr_calloc((size_t)s->ntenants + 1, sizeof(*nb));
    uint32_t(*bb)[CR_SCHED_MAX_TYPES] = cr_calloc((size_t)s->ntenants + 1, sizeof(*bb));
    uint32_t *pernode = cr_calloc((size_t)s->nnodes + 1, sizeof(uint32_t));

    size_t live = 0;
    for (size_t i = 0; i < s->tabcap; i++) {
        live += s->tab[i] != NULL;
    }
    if (live != s->njobs || live != (size_t)s->npending + s->nrunning) {
        rc = fail(err, errlen,
                  "job table holds %zu jobs, counters say %zu (%u pending + %u running)", live,
                  s->njobs, s->npending, s->nrunning);
        goto out;
    }
    for (uint32_t i = 0; i < s->npending; i++) {
        const job *j = s->pending[i];
        if (j->state != CR_JOB_PENDING || j->qidx != i || j->nslots != 0) {
            rc = fail(err, errlen, "job %" PRIu64 ": in the pending list but not pending",
                      j->spec.id);
            goto out;
        }
    }
    for (uint32_t i = 0; i < s->nrunning; i++) {
        const job *j = s->running[i];
        if (j->state != CR_JOB_RUNNING || j->qidx != i) {
            rc = fail(err, errlen, "job %" PRIu64 ": in the running list but not running",
                      j->spec.id);
            goto out;
        }
        if (cr__sched_job_get(s, j->spec.id) != j) {
            rc = fail(err, errlen, "job %" PRIu64 ": running but not in the job table", j->spec.id);
            goto out;
        }
        /* capacity conserved: exactly what it asked for */
        if (j->nslots != j->spec.gpu_count) {
            rc = fail(err, errlen, "job %" PRIu64 ": holds %u GPUs, asked for %u", j->spec.id,
                      j->nslots, j->spec.gpu_count);
            goto out;
        }
        if (j->spec.gpu_type >= 0 && j->run_type != j->spec.gpu_type) {
            rc = fail(err, errlen, "job %" PRIu64 ": runs on type %d, asked for %d", j->spec.id,
                      j->run_type, j->spec.gpu_type);
            goto out;
        }
        uint32_t nodes_used = 0;
        for (uint32_t k = 0; k < j->nslots; k++) {
            const cr_sched_slot *sl = &j->slots[k];
            if (sl->node >= s->nnodes || sl->gpu >= s->nodes[sl->node].ngpu) {
                rc = fail(err, errlen, "job %" PRIu64 ": slot %u names no GPU", j->spec.id, k);
                goto out;
            }
            const node *nd = &s->nodes[sl->node];
            const gpu *g = &nd->gpus[sl->gpu];
            size_t gi = base[sl->node] + sl->gpu;
            if (nd->state == CR_NODE_LOST) {
                rc = fail(err, errlen, "job %" PRIu64 ": runs on lost node %s", j->spec.id,
                          nd->name);
                goto out;
            }
            if (g->bad || g->type != j->run_type) {
                rc = fail(err, errlen, "job %" PRIu64 ": on %s GPU %u that is %s", j->spec.id,
                          nd->name, sl->gpu, g->bad ? "bad" : "of another type");
                goto out;
            }
            bool frac = j->spec.gpu_milli > 0 || j->spec.gpu_mem_bytes > 0;
            if (frac != (sl->milli > 0)) {
                rc = fail(err, errlen, "job %" PRIu64 ": %s but its slot says %u thousandths",
                          j->spec.id, frac ? "fractional" : "whole", sl->milli);
                goto out;
            }
            if (frac) {
                if (!g->share || g->mig || owner[gi] || mask[gi] || sl->mig_start >= 0 ||
                    sl->milli != cr__sched_share_milli(j, g)) {
                    rc = fail(err, errlen, "fractional job %" PRIu64 ": on %s GPU %u that is %s",
                              j->spec.id, nd->name, sl->gpu,
                              !g->share   ? "not shareable"
                              : g->mig    ? "in MIG mode"
                              : owner[gi] ? "held whole"
                                          : "not its share");
                    goto out;
                }
                shm[gi] += sl->milli;
                shb[gi] += j->spec.gpu_mem_bytes;
                shn[gi]++;
                if (shm[gi] > 1000 || shb[gi] > g->mem_bytes) {
                    rc = fail(err, errlen,
                              "%s GPU %u: fractional tasks hold %u thousandths and %" PRIu64
                              " of %" PRIu64 " bytes (job %" PRIu64 ")",
                              nd->name, sl->gpu, shm[gi], shb[gi], g->mem_bytes, j->spec.id);
                    goto out;
                }
            } else if (sl->mig_start < 0) {
                if (g->mig || owner[gi] || mask[gi] || shn[gi]) {
                    rc = fail(err, errlen, "%s GPU %u allocated twice (job %" PRIu64 ")", nd->name,
                              sl->gpu, j->spec.id);
                    goto out;
                }
                owner[gi] = j->spec.id;
            } else {
                uint32_t m = ((1u << sl->mig_mem) - 1) << sl->mig_start;
                if (!g->mig || owner[gi] || (mask[gi] & m) || sl->mig_start + sl->mig_mem > 8) {
                    rc = fail(err, errlen, "%s GPU %u MIG slices allocated twice (job %" PRIu64 ")",
                              nd->name, sl->gpu, j->spec.id);
                    goto out;
                }
                if (g->mig_nfix &&
                    !cr__sched_mig_fixed_has(g, sl->mig_start, sl->mig_mem, sl->mig_compute)) {
                    rc = fail(err, errlen,
                              "job %" PRIu64 ": on %s GPU %u at slice %d, not an "
                              "instance of its MIG layout",
                              j->spec.id, nd->name, sl->gpu, sl->mig_start);
                    goto out;
                }
                mask[gi] |= (uint8_t)m;
                comp[gi] = (uint8_t)(comp[gi] + sl->mig_compute);
            }
            if (pernode[sl->node]++ == 0) {
                nodes_used++;
            }
        }
        /* gang: all or nothing, on exactly its node count, evenly */
        if (j->spec.node_count > 0) {
            uint32_t per = j->spec.gpu_count / j->spec.node_count;
            bool even = nodes_used == j->spec.node_count;
            for (uint32_t k = 0; k < j->nslots && even; k++) {
                even = pernode[j->slots[k].node] == per;
            }
            if (!even) {
                rc = fail(err, errlen, "gang job %" PRIu64 ": %u GPUs over %u nodes, asked %u x %u",
                          j->spec.id, j->nslots, nodes_used, j->spec.node_count, per);
                goto out;
            }
        }
        for (uint32_t k = 0; k < j->nslots; k++) {
            pernode[j->slots[k].node] = 0;
        }
        uint32_t held = j->slots[0].milli ? j->slots[0].milli : j->nslots * 1000u;
        if (held != j->held) {
            rc = fail(err, errlen, "job %" PRIu64 ": holds %u thousandths, slots say %u",
                      j->spec.id, j->held, held);
            goto out;
        }
        if (j->borrowed) {
            bb[j->spec.tenant][j->run_type] += held;
        } else {
            nb[j->spec.tenant][j->run_type] += held;
        }
    }
    /* end-time heaps: every running whole-GPU job with a limit, in order */
    for (int t = 0; t < s->ntypes && rc == 0; t++) {
        for (uint32_t i = 0; i < s->neheap[t]; i++) {
            const job *j = s->eheap[t][i];
            if (j->hpos != i || j->state != CR_JOB_RUNNING || j->run_type != t ||
                (i > 0 && cr__sched_end_less(j, s->eheap[t][(i - 1) / 2]))) {
                rc = fail(err, errlen, "type %s: end-time heap broken at %u (job %" PRIu64 ")",
                          s->types[t].name, i, j->spec.id);
                break;
            }
        }
    }
    for (uint32_t i = 0; i < s->nrunning && rc == 0; i++) {
        const job *j = s->running[i];
        bool want =
            j->slots[0].mig_start < 0 && !j->slots[0].milli && cr__sched_job_end(j) != INT64_MAX;
        if (want != (j->hpos != UINT32_MAX) || s->trun[j->run_type][j->tidx] != j) {
            rc = fail(err, errlen, "job %" PRIu64 ": missing from its type's running lists",
                      j->spec.id);
        }
    }
    if (rc) {
        goto out;
    }
    /* GPUs agree with the recount; counters agree with the GPUs */
    uint32_t tfree[CR_SCHED_MAX_TYPES] = {0}, ttotal[CR_SCHED_MAX_TYPES] = {0};
    uint32_t *rfree = cr_calloc((size_t)s->nracks * CR_SCHED_MAX_TYPES + 1, sizeof(uint32_t));
    for (uint32_t n = 0; n < s->nnodes && rc == 0; n++) {
        const node *nd = &s->nodes[n];
        bool up = nd->state == CR_NODE_UP;
        for (uint32_t k = nd->nt_first; k < nd->nt_first + nd->nnt; k++) {
            const nt *r = &s->nts[k];
            uint32_t f = 0;
            for (uint32_t g = 0; g < nd->ngpu; g++) {
                const gpu *gp = &nd->gpus[g];
                f += gp->type == r->type && !gp->bad && !gp->mig && !gp->job && !gp->sh_n;
            }
            if (f != r->free) {
                rc = fail(err, errlen, "node %s: %u free %s counted, %u by recount", nd->name,
                          r->free, s->types[r->type].name, f);
                break;
            }
            if (r->linked != up) {
                rc = fail(err, errlen, "node %s: bucket link %d for state %s", nd->name, r->linked,
                          cr_sched_node_state_name(nd->state));
                break;
            }
            if (up) {
                tfree[r->type] += f;
                rfree[(size_t)nd->rack * CR_SCHED_MAX_TYPES + (size_t)r->type] += f;
            }
        }
        for (uint32_t g = 0; g < nd->ngpu && rc == 0; g++) {
            const gpu *gp = &nd->gpus[g];
            size_t gi = base[n] + g;
            if (gp->sh_n != shn[gi] || gp->sh_milli != shm[gi] || gp->sh_mem != shb[gi]) {
                rc = fail(err, errlen,
                          "node %s GPU %u: %u fractional tasks holding %u thousandths counted, "
                          "%u holding %u by recount",
                          nd->name, g, gp->sh_n, gp->sh_milli, shn[gi], shm[gi]);
            }
            if (gp->job != owner[gi] || gp->mig_used != mask[gi] ||
                gp->mig_compute_used != comp[gi]) {
                rc = fail(err, errlen,
                          "node %s GPU %u: holder %" PRIu64 "/%02x, jobs say %" PRIu64 "/%02x",
                          nd->name, g, gp->job, gp->mig_used, owner[gi], mask[gi]);
            }
            if (gp->mig && gp->mig_compute_used > s->types[gp->type].mig_compute) {
                rc = fail(err, errlen, "node %s GPU %u: %u compute slices used of %u", nd->name, g,
                          gp->mig_compute_used, s->types[gp->type].mig_compute);
            }
            if (up && !gp->bad) {
                ttotal[gp->type]++;
            }
        }
    }
    for (int t = 0; t < s->ntypes && rc == 0; t++) {
        const gtype *g = &s->types[t];
        if (g->free != tfree[t] || g->total != ttotal[t]) {
            rc = fail(err, errlen, "type %s: free %u total %u counted, %u/%u by recount", g->name,
                      g->free, g->total, tfree[t], ttotal[t]);
            break;
        }
        for (int r = 0; r < s->nracks; r++) {
            if (s->racks[r].free[t] != rfree[(size_t)r * CR_SCHED_MAX_TYPES + (size_t)t]) {
                rc = fail(err, errlen, "rack %s: %u free %s counted, %u by recount",
                          s->racks[r].name, s->racks[r].free[t], g->name,
                          rfree[(size_t)r * CR_SCHED_MAX_TYPES + (size_t)t]);
                break;
            }
        }
        for (uint32_t c = 0; c < g->nbucket && rc == 0; c++) {
            for (uint32_t i = g->bucket[c]; i != NT_NONE; i = s->nts[i].next) {
                if (s->nts[i].free != c || s->nts[i].type != t || !s->nts[i].linked) {
                    rc = fail(err, errlen, "type %s: bucket %u holds a node with %u free", g->name,
                              c, s->nts[i].free);
                    break;
                }
            }
        }
    }
    free(rfree);
    /* tenants: usage recount, quotas hold */
    for (int i = 0; i < s->ntenants && rc == 0; i++) {
        const tenant_rec *t = &s->tenants[i];
        for (int k = 0; k < s->ntypes; k++) {
            if (t->used_nb[k] != nb[i][k] || t->used_b[k] != bb[i][k]) {
                rc = fail(err, errlen,
                          "tenant %s: %u+%u thousandths of %s counted, %u+%u by recount", t->name,
                          t->used_nb[k], t->used_b[k], s->types[k].name, nb[i][k], bb[i][k]);
                break;
            }
            if (t->limit[k] >= 0 && cr__sched_tree_used(s, i, k, true) > t->limit[k] * 1000) {
                rc = fail(err, errlen,
                          "tenant %s: subtree holds %" PRId64
                          " thousandths of %s against a limit of %" PRId64,
                          t->name, cr__sched_tree_used(s, i, k, true), s->types[k].name,
                          t->limit[k]);
                break;
            }
            if (t->quota[k] >= 0 && (int64_t)t->used_nb[k] > t->quota[k] * 1000) {
                rc = fail(err, errlen,
                          "tenant %s: %u thousandths of %s held against a quota of %" PRId64,
                          t->name, t->used_nb[k], s->types[k].name, t->quota[k]);
                break;
            }
        }
    }
    if (rc == 0) {
        rc = check_host(s, err, errlen);
    }
out:
    free(base);
    free(owner);
    free(mask);
    free(comp);
    free(shm);
    free(shb);
    free(shn);
    free(nb);
    free(bb);
    free(pernode);
    return rc;
}
