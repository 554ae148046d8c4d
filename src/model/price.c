#include "cr_price.h"

#include "cr_alloc.h"
#include "cr_datadir.h"
#include "cr_error.h"
#include "cr_parse.h"
#include "model_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PRICES_MAX_BYTES (1u << 20)

/* Prices keyed by normalised canonical model name: the table must outlive
 * no particular catalog, so it keeps names, not pointers. */
typedef struct price_row {
    char key[CR_GPU_NAME_MAX]; /* cr__model_norm of the canonical name */
    double usd_per_hour;
} price_row;

struct cr_prices {
    price_row *rows;
    size_t count;
    size_t cap;
};

const char *cr_prices_default_path(void)
{
    static _Thread_local char buf[1024];
    return cr_data_path("prices.csv", buf, sizeof buf);
}

cr_prices *cr_prices_new_empty(void)
{
    return cr_calloc(1, sizeof(cr_prices));
}

void cr_prices_free(cr_prices *p)
{
    if (!p) {
        return;
    }
    free(p->rows);
    free(p);
}

static price_row *find_row(const cr_prices *p, const char *key)
{
    for (size_t i = 0; p && i < p->count; i++) {
        if (!strcmp(p->rows[i].key, key)) {
            return &p->rows[i];
        }
    }
    return NULL;
}

void cr_prices_set(cr_prices *p, const cr_gpu_type *g, double usd_per_hour)
{
    char key[CR_GPU_NAME_MAX];
    cr__model_norm(g->name, key, sizeof key);
    price_row *r = find_row(p, key);
    if (!r) {
        CR_GROW(p->rows, p->count, p->cap);
        r = &p->rows[p->count++];
        memcpy(r->key, key, sizeof key);
    }
    r->usd_per_hour = usd_per_hour;
}

double cr_prices_get(const cr_prices *p, const cr_gpu_type *g)
{
    if (!p || !g) {
        return CR_UNKNOWN;
    }
    char key[CR_GPU_NAME_MAX];
    cr__model_norm(g->name, key, sizeof key);
    const price_row *r = find_row(p, key);
    return r ? r->usd_per_hour : CR_UNKNOWN;
}

static int parse_prices(const char *text, size_t len, const char *name, const cr_catalog *cat,
                        int strict, cr_prices **out, char *err, size_t err_len)
{
    int rc = 0;
    cr_prices *p = cr_prices_new_empty();
    char *copy = cr_strndup(text, len);
    cr_csv_rec rec;
    cr_csv_rec_init(&rec);
    int line_no = 0, model_col = -1, price_col = -1;
    name = name ? name : "<prices>";
    if (memchr(text, '\0', len)) {
        cr__model_errf(err, err_len, "%s:1:1: NUL byte in file", name);
        rc = CR_EPARSE;
        goto out;
    }
    char *save = copy;
    while (save) {
        char *line = save;
        char *nl = strchr(line, '\n');
        if (nl) {
            *nl = '\0';
            save = nl + 1;
        } else {
            save = NULL;
        }
        line_no++;
        size_t l = strlen(line);
        if (l && line[l - 1] == '\r') {
            line[--l] = '\0';
        }
        if (l == 0 || line[0] == '#') {
            continue;
        }
        int ecol = 0;
        if (cr_csv_split(line, ',', &rec, &ecol) != 0) {
            cr__model_errf(err, err_len, "%s:%d:%d: bad quoted field", name, line_no, ecol);
            rc = CR_EPARSE;
            goto out;
        }
        if (model_col < 0) {
            for (size_t f = 0; f < rec.count; f++) {
                if (!strcmp(rec.fields[f], "model")) {
                    model_col = (int)f;
                } else if (!strcmp(rec.fields[f], "usd_per_gpu_hour")) {
                    price_col = (int)f;
                }
            }
            if (model_col < 0 || price_col < 0) {
                cr__model_errf(err, err_len,
                               "%s:%d:1: header must name columns \"model\" and "
                               "\"usd_per_gpu_hour\"",
                               name, line_no);
                rc = CR_EPARSE;
                goto out;
            }
            continue;
        }
        if ((size_t)model_col >= rec.count || (size_t)price_col >= rec.count) {
            cr__model_errf(err, err_len, "%s:%d:1: expected at least %d fields, got %zu", name,
                           line_no, (model_col > price_col ? model_col : price_col) + 1, rec.count);
            rc = CR_EPARSE;
            goto out;
        }
        const cr_gpu_type *g = cr_catalog_find(cat, rec.fields[model_col]);
        if (!g && !strict) {
            continue; /* the default table may name types a site's catalog lacks */
        }
        if (!g) {
            cr__model_errf(err, err_len, "%s:%d:%d: model \"%s\" is not in the catalog", name,
                           line_no, rec.col[model_col], rec.fields[model_col]);
            rc = CR_EPARSE;
            goto out;
        }
        double v;
        if (cr_parse_f64(rec.fields[price_col], 0, 1e6, &v) != 0) {
            cr__model_errf(err, err_len,
                           "%s:%d:%d: usd_per_gpu_hour: expected a number in [0, 1e6], got "
                           "\"%s\"",
                           name, line_no, rec.col[price_col], rec.fields[price_col]);
            rc = CR_EPARSE;
            goto out;
        }
        cr_prices_set(p, g, v);
    }
    if (model_col < 0) {
        cr__model_errf(err, err_len, "%s:1:1: no header row", name);
        rc = CR_EPARSE;
        goto out;
    }
    *out = p;
    p = NULL;
out:
    cr_csv_rec_fini(&rec);
    free(copy);
    cr_prices_free(p);
    return rc;
}

int cr_prices_parse(const char *text, size_t len, const char *name, const cr_catalog *cat,
                    cr_prices **out, char *err, size_t err_len)
{
    return parse_prices(text, len, name, cat, 1, out, err, err_len);
}

int cr_prices_load(const char *path, const cr_catalog *cat, cr_prices **out, char *err,
                   size_t err_len)
{
    char buf[1024];
    int strict = path != NULL;
    if (!path) {
        path = cr__model_data_path("prices.csv", buf, sizeof buf);
    }
    char *text = NULL;
    size_t len = 0;
    int rc = cr__model_read_file(path, PRICES_MAX_BYTES, &text, &len, err, err_len);
    if (rc == 0) {
        rc = parse_prices(text, len, path, cat, strict, out, err, err_len);
    }
    free(text);
    return rc;
}
