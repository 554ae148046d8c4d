#include "cr_gavel.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "model_int.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* The real table is 1.2 MB; allow generous growth, refuse the absurd. */
#define GAVEL_MAX_BYTES (64u << 20)

typedef struct iso_entry {
    int worker, job, sf;
    double tput;
} iso_entry;

typedef struct pair_entry {
    int worker, job, sf, ojob, osf;
    double tput[2];
} pair_entry;

struct cr_gavel {
    char **workers; /* owned strings */
    size_t worker_count, worker_cap;
    char **jobs; /* owned strings, first-seen order */
    size_t job_count, job_cap;
    iso_entry *iso;
    size_t iso_count, iso_cap;
    pair_entry *pairs; /* sorted for bsearch */
    size_t pair_count, pair_cap;
};

void cr_gavel_free(cr_gavel *g)
{
    if (!g) {
        return;
    }
    for (size_t i = 0; i < g->worker_count; i++) {
        free(g->workers[i]);
    }
    for (size_t i = 0; i < g->job_count; i++) {
        free(g->jobs[i]);
    }
    free(g->workers);
    free(g->jobs);
    free(g->iso);
    free(g->pairs);
    free(g);
}

static int job_index(const cr_gavel *g, const char *name)
{
    for (size_t i = 0; i < g->job_count; i++) {
        if (!strcmp(g->jobs[i], name)) {
            return (int)i;
        }
    }
    return -1;
}

static int worker_index(const cr_gavel *g, const char *name)
{
    for (size_t i = 0; i < g->worker_count; i++) {
        if (!strcmp(g->workers[i], name)) {
            return (int)i;
        }
    }
    return -1;
}

static int intern_job(cr_gavel *g, const char *name, size_t len)
{
    for (size_t i = 0; i < g->job_count; i++) {
        if (strlen(g->jobs[i]) == len && !memcmp(g->jobs[i], name, len)) {
            return (int)i;
        }
    }
    CR_GROW(g->jobs, g->job_count, g->job_cap);
    g->jobs[g->job_count] = cr_strndup(name, len);
    return (int)g->job_count++;
}

/* Parse "('<job>', <sf>)" into an interned job index and a scale factor. */
static int parse_key(cr_gavel *g, const char *key, int *job, int *sf)
{
    size_t n = strlen(key);
    if (n < 8 || strncmp(key, "('", 2) != 0 || key[n - 1] != ')') {
        return CR_EPARSE;
    }
    const char *sep = NULL;
    for (const char *p = key + 2; p + 2 < key + n; p++) {
        if (p[0] == '\'' && p[1] == ',' && p[2] == ' ') {
            sep = p; /* the last "', " wins: job names may contain commas */
        }
    }
    if (!sep || sep == key + 2) {
        return CR_EPARSE;
    }
    const char *num = sep + 3;
    int v = 0, digits = 0;
    for (; *num >= '0' && *num <= '9'; num++) {
        if (++digits > 6) {
            return CR_EPARSE;
        }
        v = v * 10 + (*num - '0');
    }
    if (!digits || v <= 0 || *num != ')' || num[1] != '\0') {
        return CR_EPARSE;
    }
    *job = intern_job(g, key + 2, (size_t)(sep - (key + 2)));
    *sf = v;
    return 0;
}

static int pair_cmp(const void *a, const void *b)
{
    const pair_entry *x = a, *y = b;
    int d[5] = {x->worker - y->worker, x->job - y->job, x->sf - y->sf, x->ojob - y->ojob,
                x->osf - y->osf};
    for (int i = 0; i < 5; i++) {
        if (d[i]) {
            return d[i] < 0 ? -1 : 1;
        }
    }
    return 0;
}

static int number(const json_t *v, double *out)
{
    if (!json_is_number(v)) {
        return CR_EPARSE;
    }
    double d = json_number_value(v);
    if (!(d >= 0 && d < 1e12)) {
        return CR_EPARSE;
    }
    *out = d;
    return 0;
}

int cr_gavel_parse(const char *text, size_t len, const char *name, cr_gavel **out, char *err,
                   size_t err_len)
{
    int rc = 0;
    json_error_t jerr;
    cr_gavel *g = cr_calloc(1, sizeof *g);
    name = name ? name : "<throughputs>";
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        cr__model_errf(err, err_len, "%s:%d:%d: %s", name, jerr.line, jerr.column, jerr.text);
        rc = CR_EPARSE;
        goto out;
    }
    if (!json_is_object(root)) {
        cr__model_errf(err, err_len, "%s:1:1: top level must be an object of worker types", name);
        rc = CR_EPARSE;
        goto out;
    }
    const char *wname;
    json_t *wobj;
    json_object_foreach(root, wname, wobj)
    {
        if (!json_is_object(wobj)) {
            cr__model_errf(err, err_len, "%s: worker \"%s\": expected an object of job types", name,
                           wname);
            rc = CR_EPARSE;
            goto out;
        }
        CR_GROW(g->workers, g->worker_count, g->worker_cap);
        g->workers[g->worker_count++] = cr_strdup(wname);
        int w = (int)g->worker_count - 1;
        const char *jkey;
        json_t *jobj;
        json_object_foreach(wobj, jkey, jobj)
        {
            int job, sf;
            if (parse_key(g, jkey, &job, &sf) != 0) {
                cr__model_errf(err, err_len,
                               "%s: worker \"%s\": key \"%s\": expected \"('<job type>', "
                               "<scale factor>)\"",
                               name, wname, jkey);
                rc = CR_EPARSE;
                goto out;
            }
            if (!json_is_object(jobj)) {
                cr__model_errf(err, err_len, "%s: worker \"%s\": \"%s\": expected an object", name,
                               wname, jkey);
                rc = CR_EPARSE;
                goto out;
            }
            const char *okey;
            json_t *val;
            json_object_foreach(jobj, okey, val)
            {
                if (!strcmp(okey, "null")) {
                    double t;
                    if (number(val, &t) != 0) {
                        cr__model_errf(err, err_len,
                                       "%s: worker \"%s\": \"%s\": \"null\": expected a "
                                       "throughput >= 0",
                                       name, wname, jkey);
                        rc = CR_EPARSE;
                        goto out;
                    }
                    CR_GROW(g->iso, g->iso_count, g->iso_cap);
                    g->iso[g->iso_count++] = (iso_entry){w, job, sf, t};
                    continue;
                }
                int ojob, osf;
                double a, b;
                if (parse_key(g, okey, &ojob, &osf) != 0 || !json_is_array(val) ||
                    json_array_size(val) != 2 || number(json_array_get(val, 0), &a) != 0 ||
                    number(json_array_get(val, 1), &b) != 0) {
                    cr__model_errf(err, err_len,
                                   "%s: worker \"%s\": \"%s\": \"%s\": expected a co-located job "
                                   "key with [throughput, throughput]",
                                   name, wname, jkey, okey);
                    rc = CR_EPARSE;
                    goto out;
                }
                CR_GROW(g->pairs, g->pair_count, g->pair_cap);
                g->pairs[g->pair_count++] = (pair_entry){w, job, sf, ojob, osf, {a, b}};
            }
        }
    }
    if (g->pair_count) {
        qsort(g->pairs, g->pair_count, sizeof g->pairs[0], pair_cmp);
    }
    *out = g;
    g = NULL;
out:
    json_decref(root);
    cr_gavel_free(g);
    return rc;
}

int cr_gavel_load(const char *path, cr_gavel **out, char *err, size_t err_len)
{
    char *text = NULL;
    size_t len = 0;
    int rc = cr__model_read_file(path, GAVEL_MAX_BYTES, &text, &len, err, err_len);
    if (rc == 0) {
        rc = cr_gavel_parse(text, len, path, out, err, err_len);
    }
    free(text);
    return rc;
}

size_t cr_gavel_worker_count(const cr_gavel *g)
{
    return g ? g->worker_count : 0;
}

const char *cr_gavel_worker(const cr_gavel *g, size_t i)
{
    return g && i < g->worker_count ? g->workers[i] : NULL;
}

size_t cr_gavel_job_count(const cr_gavel *g)
{
    return g ? g->job_count : 0;
}

const char *cr_gavel_job(const cr_gavel *g, size_t i)
{
    return g && i < g->job_count ? g->jobs[i] : NULL;
}

int cr_gavel_get(const cr_gavel *g, const char *worker, const char *job_type, int scale_factor,
                 double *out)
{
    if (!g || !worker || !job_type) {
        return CR_ENOENT;
    }
    int w = worker_index(g, worker), j = job_index(g, job_type);
    if (w < 0 || j < 0) {
        return CR_ENOENT;
    }
    for (size_t i = 0; i < g->iso_count; i++) {
        const iso_entry *e = &g->iso[i];
        if (e->worker == w && e->job == j && e->sf == scale_factor) {
            *out = e->tput;
            return 0;
        }
    }
    return CR_ENOENT;
}

int cr_gavel_get_pair(const cr_gavel *g, const char *worker, const char *job_a, int sf_a,
                      const char *job_b, int sf_b, double out[2])
{
    if (!g || !worker || !job_a || !job_b) {
        return CR_ENOENT;
    }
    pair_entry key = {
        worker_index(g, worker), job_index(g, job_a), sf_a, job_index(g, job_b), sf_b, {0, 0}};
    if (key.worker < 0 || key.job < 0 || key.ojob < 0 || g->pair_count == 0) {
        return CR_ENOENT;
    }
    const pair_entry *e = bsearch(&key, g->pairs, g->pair_count, sizeof key, pair_cmp);
    if (!e) {
        return CR_ENOENT;
    }
    out[0] = e->tput[0];
    out[1] = e->tput[1];
    return 0;
}

const char *cr_gavel_worker_alias(const char *worker)
{
    static const char *const map[][2] = {
        {"k80", "k80"},
        {"p100", "p100"},
        {"v100", "v100"},
        {"k80_unconsolidated", "k80"},
        {"p100_unconsolidated", "p100"},
        {"v100_unconsolidated", "v100"},
    };
    for (size_t i = 0; worker && i < sizeof map / sizeof map[0]; i++) {
        if (!strcmp(map[i][0], worker)) {
            return map[i][1];
        }
    }
    return NULL;
}
