/*
 * agent_imgcache.c - a size cap on the container images this agent's jobs
 * use (--image-cache-max, docs/containers.md): each use is recorded with its
 * time in <state>/images.json (0600); when the images recorded there take
 * more than the cap, the least recently used that no running job needs are
 * removed (podman rmi). Images the agent's jobs never used (an admin's, or
 * another program's on the node) are neither counted nor removed.
 */
#include "agent_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define IMG_MAX 256 /* images remembered; the oldest are forgotten beyond */

static char *cache_path(const agent *a)
{
    return cr_asprintf("%s/images.json", a->cfg.state_dir);
}

/* The record: {"image": last used (wall clock ns)}. Returned new. */
static json_t *load(const agent *a)
{
    char *p = cache_path(a);
    json_t *j = json_load_file(p, JSON_REJECT_DUPLICATES, NULL);
    free(p);
    if (!json_is_object(j)) {
        json_decref(j);
        j = json_object();
    }
    return j;
}

static void save(const agent *a, json_t *j)
{
    char *p = cache_path(a);
    char *tmp = cr_asprintf("%s.tmp", p);
    if (json_dump_file(j, tmp, JSON_COMPACT) == 0 && rename(tmp, p) == 0) {
        chmod(p, 0600);
    } else {
        unlink(tmp);
        cr_warn("agent: cannot write %s", p);
    }
    free(tmp);
    free(p);
}

/* The least recently used image in j, skipping those in skip; NULL none. */
static const char *oldest(json_t *j, json_t *skip)
{
    const char *k, *best = NULL;
    json_t *v;
    json_int_t t = 0;
    json_object_foreach(j, k, v)
    {
        if (json_object_get(skip, k)) {
            continue;
        }
        if (!best || json_integer_value(v) < t) {
            best = k;
            t = json_integer_value(v);
        }
    }
    return best;
}

void cr__agent_img_used(agent *a, const char *image)
{
    if (a->cfg.image_cache_max <= 0 || !image) {
        return;
    }
    json_t *j = load(a);
    json_object_set_new(j, image, json_integer(cr_now_ns()));
    while (json_object_size(j) > IMG_MAX) {
        json_object_del(j, oldest(j, NULL));
    }
    save(a, j);
    json_decref(j);
}

/* Size in bytes of an image in the store; -1 when it is not there. */
static int64_t image_size(const agent *a, const char *image)
{
    char out[256];
    char *argv[] = {(char *)a->ctr.podman, "image",       "inspect",
                    "--format={{.Size}}",  (char *)image, NULL};
    if (cr_ctr_run(argv, CR_CTR_CMD_MS, out, sizeof out) != 0) {
        return -1;
    }
    return strtoll(out, NULL, 10);
}

void cr__agent_img_evict(agent *a)
{
    if (a->cfg.image_cache_max <= 0 || !a->ctr.ok) {
        return;
    }
    json_t *j = load(a), *busy = json_object(), *sizes = json_object();
    int changed = 0;
    int64_t total = 0;
    const char *k;
    json_t *v;
    void *it;
    /* Sizes of what is still there; images gone from the store are forgotten. */
    json_object_foreach_safe(j, it, k, v)
    {
        int64_t sz = image_size(a, k);
        if (sz < 0) {
            json_object_del(j, k);
            changed = 1;
            continue;
        }
        json_object_set_new(sizes, k, json_integer(sz));
        total += sz;
    }
    for (size_t i = 0; i < a->nprocs; i++) {
        const cr_proc *p = &a->procs[i];
        if (p->state != CR_PROC_EXITED && p->spec.ctr.image) {
            json_object_set_new(busy, p->spec.ctr.image, json_true());
        }
    }
    while (total > a->cfg.image_cache_max) {
        const char *victim = oldest(j, busy);
        if (!victim) {
            break; /* everything left is in use */
        }
        char *name = cr_strdup(victim);
        int64_t sz = json_integer_value(json_object_get(sizes, name));
        char out[512];
        char *argv[] = {(char *)a->ctr.podman, "rmi", name, NULL};
        if (cr_ctr_run(argv, CR_CTR_CMD_MS, out, sizeof out) == 0) {
            cr_info("agent: image cache over %lld bytes: removed %s (%lld bytes, least "
                    "recently used)",
                    (long long)a->cfg.image_cache_max, name, (long long)sz);
            total -= sz;
            json_object_del(j, name);
            changed = 1;
        } else {
            json_object_set_new(busy, name, json_true()); /* in use by something else */
        }
        free(name);
    }
    if (changed) {
        save(a, j);
    }
    json_decref(j);
    json_decref(busy);
    json_decref(sizes);
}
