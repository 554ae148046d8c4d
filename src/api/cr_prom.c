/*
 * cr_prom.c - Prometheus text exposition; see cr_prom.h.
 */
#include "cr_prom.h"

#include "cr_alloc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const double cr_prom_latency_bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                         0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
const size_t cr_prom_latency_nbounds = sizeof cr_prom_latency_bounds / sizeof(double);

void cr_prom_hist_init(cr_prom_hist *h, const double *bounds, size_t nbounds)
{
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->mu, NULL);
    if (nbounds > CR_PROM_MAX_BUCKETS) {
        nbounds = CR_PROM_MAX_BUCKETS;
    }
    h->nbounds = nbounds;
    memcpy(h->bounds, bounds, nbounds * sizeof(double));
}

void cr_prom_hist_fini(cr_prom_hist *h)
{
    pthread_mutex_destroy(&h->mu);
}

void cr_prom_hist_observe(cr_prom_hist *h, double v)
{
    size_t i = 0;
    while (i < h->nbounds && v > h->bounds[i]) {
        i++;
    }
    pthread_mutex_lock(&h->mu);
    h->counts[i]++;
    h->count++;
    h->sum += v;
    pthread_mutex_unlock(&h->mu);
}

typedef struct vec_entry {
    char *labels;      /* owned */
    cr_prom_hist hist; /* its histogram */
} vec_entry;

struct cr_prom_hist_vec {
    pthread_mutex_t mu; /* guards the entry list (not the histograms) */
    vec_entry **items;  /* owned */
    size_t len, cap;    /* counts */
    double bounds[CR_PROM_MAX_BUCKETS];
    size_t nbounds;
};

cr_prom_hist_vec *cr_prom_hist_vec_new(const double *bounds, size_t nbounds)
{
    cr_prom_hist_vec *v = cr_calloc(1, sizeof *v);
    pthread_mutex_init(&v->mu, NULL);
    v->nbounds = nbounds > CR_PROM_MAX_BUCKETS ? CR_PROM_MAX_BUCKETS : nbounds;
    memcpy(v->bounds, bounds, v->nbounds * sizeof(double));
    return v;
}

void cr_prom_hist_vec_free(cr_prom_hist_vec *v)
{
    if (!v) {
        return;
    }
    for (size_t i = 0; i < v->len; i++) {
        free(v->items[i]->labels);
        cr_prom_hist_fini(&v->items[i]->hist);
        free(v->items[i]);
    }
    free(v->items);
    pthread_mutex_destroy(&v->mu);
    free(v);
}

void cr_prom_hist_vec_observe(cr_prom_hist_vec *v, const char *labels, double value)
{
    vec_entry *e = NULL;
    pthread_mutex_lock(&v->mu);
    for (size_t i = 0; i < v->len; i++) {
        if (strcmp(v->items[i]->labels, labels) == 0) {
            e = v->items[i];
            break;
        }
    }
    if (!e) {
        e = cr_calloc(1, sizeof *e);
        e->labels = cr_strdup(labels);
        cr_prom_hist_init(&e->hist, v->bounds, v->nbounds);
        CR_GROW(v->items, v->len, v->cap);
        v->items[v->len++] = e;
    }
    pthread_mutex_unlock(&v->mu);
    cr_prom_hist_observe(&e->hist, value);
}

void cr_prom_family(cr_buf *b, const char *name, const char *type, const char *help)
{
    cr_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void put_value(cr_buf *b, double v)
{
    if (isinf(v)) {
        cr_buf_puts(b, v > 0 ? "+Inf" : "-Inf");
    } else if (isnan(v)) {
        cr_buf_puts(b, "NaN");
    } else if (v == floor(v) && fabs(v) < 1e15) {
        cr_buf_printf(b, "%.0f", v);
    } else {
        cr_buf_printf(b, "%.17g", v);
    }
}

void cr_prom_sample(cr_buf *b, const char *name, const char *labels, double value)
{
    if (labels && *labels) {
        cr_buf_printf(b, "%s{%s} ", name, labels);
    } else {
        cr_buf_printf(b, "%s ", name);
    }
    put_value(b, value);
    cr_buf_putc(b, '\n');
}

void cr_prom_hist_write(cr_buf *b, const char *name, const char *labels, cr_prom_hist *h)
{
    uint64_t counts[CR_PROM_MAX_BUCKETS + 1];
    pthread_mutex_lock(&h->mu);
    memcpy(counts, h->counts, sizeof counts);
    uint64_t count = h->count;
    double sum = h->sum;
    pthread_mutex_unlock(&h->mu);
    const char *sep = labels && *labels ? "," : "";
    const char *lab = labels ? labels : "";
    uint64_t cum = 0;
    for (size_t i = 0; i <= h->nbounds; i++) {
        cum += counts[i];
        if (i < h->nbounds) {
            cr_buf_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, lab, sep, h->bounds[i],
                          (unsigned long long)cum);
        } else {
            cr_buf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, lab, sep,
                          (unsigned long long)cum);
        }
    }
    char sname[256];
    snprintf(sname, sizeof sname, "%s_sum", name);
    cr_prom_sample(b, sname, labels, sum);
    snprintf(sname, sizeof sname, "%s_count", name);
    cr_prom_sample(b, sname, labels, (double)count);
}

void cr_prom_hist_vec_write(cr_buf *b, const char *name, cr_prom_hist_vec *v)
{
    pthread_mutex_lock(&v->mu);
    size_t n = v->len;
    pthread_mutex_unlock(&v->mu);
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&v->mu);
        vec_entry *e = v->items[i];
        pthread_mutex_unlock(&v->mu);
        cr_prom_hist_write(b, name, e->labels, &e->hist);
    }
}

void cr_prom_label(cr_buf *b, const char *key, const char *value)
{
    if (b->len > 0) {
        cr_buf_putc(b, ',');
    }
    cr_buf_printf(b, "%s=\"", key);
    for (const char *p = value ? value : ""; *p; p++) {
        if (*p == '\\') {
            cr_buf_puts(b, "\\\\");
        } else if (*p == '"') {
            cr_buf_puts(b, "\\\"");
        } else if (*p == '\n') {
            cr_buf_puts(b, "\\n");
        } else {
            cr_buf_putc(b, *p);
        }
    }
    cr_buf_putc(b, '"');
}
