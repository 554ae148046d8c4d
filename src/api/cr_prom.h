/*
 * cr_prom.h - Prometheus text exposition (format 0.0.4) helpers.
 *
 * Writers append to a cr_buf: a family header (# HELP, # TYPE), samples
 * with a preformatted label set ('route="/v1/jobs",code="201"'), and
 * histograms. Label values must go through cr_prom_label() (escaping).
 *
 * cr_prom_hist is a fixed-bucket histogram that many threads observe into
 * (a mutex each); cr_prom_hist_vec keeps one histogram per label set
 * (e.g. route and status code), created on first observation.
 */
#ifndef CR_PROM_H
#define CR_PROM_H

#include "cr_buf.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define CR_PROM_MAX_BUCKETS 24

typedef struct cr_prom_hist {
    pthread_mutex_t mu;                       /* guards the counts */
    size_t nbounds;                           /* upper bounds in use */
    double bounds[CR_PROM_MAX_BUCKETS];       /* ascending; +Inf implicit */
    uint64_t counts[CR_PROM_MAX_BUCKETS + 1]; /* per bucket, not cumulative */
    uint64_t count;                           /* observations */
    double sum;                               /* sum of observations */
} cr_prom_hist;

/* Latency buckets in seconds, 100 µs to 10 s. */
extern const double cr_prom_latency_bounds[];
extern const size_t cr_prom_latency_nbounds;

void cr_prom_hist_init(cr_prom_hist *h, const double *bounds, size_t nbounds);
void cr_prom_hist_fini(cr_prom_hist *h);
void cr_prom_hist_observe(cr_prom_hist *h, double v);

typedef struct cr_prom_hist_vec cr_prom_hist_vec;
cr_prom_hist_vec *cr_prom_hist_vec_new(const double *bounds, size_t nbounds);
void cr_prom_hist_vec_free(cr_prom_hist_vec *v);
/* labels: a preformatted, escaped label set (copied on first use). */
void cr_prom_hist_vec_observe(cr_prom_hist_vec *v, const char *labels, double value);

/* "# HELP name help\n# TYPE name type\n". */
void cr_prom_family(cr_buf *b, const char *name, const char *type, const char *help);
/* 'name{labels} value\n' (labels may be NULL or ""). */
void cr_prom_sample(cr_buf *b, const char *name, const char *labels, double value);
/* The _bucket/_sum/_count series of one histogram. */
void cr_prom_hist_write(cr_buf *b, const char *name, const char *labels, cr_prom_hist *h);
/* Every histogram of a vector, under one family (header not included). */
void cr_prom_hist_vec_write(cr_buf *b, const char *name, cr_prom_hist_vec *v);
/* Append 'key="escaped value"' (with a leading comma when b->len > 0). */
void cr_prom_label(cr_buf *b, const char *key, const char *value);

#endif
