/*
 * advise_int.h - output of `corral advise` (table and JSON), shared by the
 * files of src/advise.
 */
#ifndef CR_ADVISE_INT_H
#define CR_ADVISE_INT_H

#include "cr_perf.h"

#include <stdio.h>

/* Human table: the winner, the ranked types (the best top, 0 = all), then
 * the refused ones grouped by reason. Returns 0. */
int cr__advise_print_table(FILE *f, const cr_workload *w, const cr_advice *a, int gpus, size_t top);
/* JSON document (jansson): ranked list best first (the best top, 0 = all),
 * then every refused type. Returns 0 or 1. */
int cr__advise_print_json(FILE *f, const cr_workload *w, const cr_advice *a, int gpus, size_t top);

/* Short human forms into buf; return buf. */
char *cr__advise_fmt_time(double seconds, char *buf, size_t len);
char *cr__advise_fmt_money(double usd, char *buf, size_t len);
char *cr__advise_fmt_energy(double joules, char *buf, size_t len);
char *cr__advise_fmt_count(double v, char *buf, size_t len);

#endif
