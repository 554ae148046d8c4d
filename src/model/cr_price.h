/*
 * cr_price.h - the price table: US dollars per GPU-hour for each GPU type.
 *
 * Defaults live in data/prices.csv (columns: model, usd_per_gpu_hour,
 * source), documented in docs/model.md; a site passes its own file with the
 * same columns (e.g. `corral advise --prices FILE`). Models are matched
 * through the catalog (canonical name or alias). A type without a price has
 * cost "unknown" (CR_UNKNOWN) and ranks after priced types when the
 * objective is cost. Errors as in cr_catalog.h ("file:line:col: message").
 * Immutable once loaded; thread-safe to read.
 */
#ifndef CR_PRICE_H
#define CR_PRICE_H

#include "cr_catalog.h"

#include <stddef.h>

typedef struct cr_prices cr_prices; /* opaque */

/* <data dir>/prices.csv (see cr_datadir.h), in per-thread storage valid
 * until the next call; a NULL path in cr_prices_load reads it. */
const char *cr_prices_default_path(void);

/* path NULL means the default path. cat (borrowed) resolves model names;
 * a row naming a model absent from cat is an error (CR_EPARSE), except in
 * the default table, where such rows are skipped (a site's catalog may be
 * smaller). *out is returned new (free with cr_prices_free). */
int cr_prices_load(const char *path, const cr_catalog *cat, cr_prices **out, char *err,
                   size_t err_len);
int cr_prices_parse(const char *text, size_t len, const char *name, const cr_catalog *cat,
                    cr_prices **out, char *err, size_t err_len);
/* An empty table (every price unknown); returned new. */
cr_prices *cr_prices_new_empty(void);
void cr_prices_free(cr_prices *p);

/* $/GPU-hour for g, or CR_UNKNOWN. p may be NULL (all unknown). */
double cr_prices_get(const cr_prices *p, const cr_gpu_type *g);
/* Set or replace a price (usd_per_hour >= 0). */
void cr_prices_set(cr_prices *p, const cr_gpu_type *g, double usd_per_hour);

#endif
