/*
 * advise_int.h - output of `corral advise` (table and JSON), shared by the
 * files of src/advise.
 */
#ifndef CR_ADVISE_INT_H
#define CR_ADVISE_INT_H

#include "cr_perf.h"

#include <stdio.h>

/* Human table: the ranked types, then the refused ones. Returns 0. */
int cr__advise_print_table(FILE *f, const cr_workload *w, const cr_advice *a, int gpus);
/* JSON document (jansson): ranked list best first. Returns 0 or 1. */
int cr__advise_print_json(FILE *f, const cr_workload *w, const cr_advice *a, int gpus);

/* Short human forms into buf; return buf. */
char *cr__advise_fmt_time(double seconds, char *buf, size_t len);
char *cr__advise_fmt_money(double usd, char *buf, size_t len);
char *cr__advise_fmt_energy(double joules, char *buf, size_t len);
char *cr__advise_fmt_count(double v, char *buf, size_t len);

#endif
