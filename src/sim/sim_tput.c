/*
 * sim_tput.c - reader for Gavel's simulation_throughputs.json.
 *
 * The file maps a worker type ("k80") to keys "('MODEL', SCALE)" and each
 * of those to an object whose "null" member is the steps per second of the
 * job running alone on SCALE GPUs of that type (the other members are
 * co-location pairs, which Corral does not simulate). We keep one row per
 * (model, scale) with a column per worker type; a missing or zero entry
 * means the job cannot run there.
 */
#include "sim_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_file.h"

#include <ctype.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Split "('ResNet-18 (batch size 16)', 1)" into model and scale. */
static int parse_key(const char *key, char *model, size_t model_len, int *scale)
{
    size_t n = strlen(key);
    if (n < 7 || key[0] != '(' || (key[1] != '\'' && key[1] != '"') || key[n - 1] != ')') {
        return CR_EPARSE;
    }
    char q = key[1];
    const char *end = strrchr(key, q);
    if (!end || end == key + 1 || end[1] != ',') {
        return CR_EPARSE;
    }
    size_t mlen = (size_t)(end - (key + 2));
    if (mlen == 0 || mlen >= model_len) {
        return CR_EPARSE;
    }
    const char *p = end + 2;
    while (*p == ' ') {
        p++;
    }
    char *num_end;
    long v = strtol(p, &num_end, 10);
    if (num_end == p || *num_end != ')' || num_end[1] != '\0' || v < 1 || v > 4096) {
        return CR_EPARSE;
    }
    memcpy(model, key + 2, mlen);
    model[mlen] = '\0';
    *scale = (int)v;
    return 0;
}

static int row_cmp(const void *a, const void *b)
{
    const cr__sim_tput_row *x = a, *y = b;
    int c = strcmp(x->model, y->model);
    if (c) {
        return c;
    }
    return (x->scale > y->scale) - (x->scale < y->scale);
}

static int type_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int cr__sim_tput_parse(const char *text, size_t len, cr__sim_tput *out, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    cr__sim_tput t = {0};
    size_t rows_cap = 0;
    int rc = CR_EPARSE;
    const char **tnames = NULL;
    if (!root) {
        snprintf(err, errlen, "line %d column %d: %s", jerr.line, jerr.column, jerr.text);
        goto out;
    }
    if (!json_is_object(root) || json_object_size(root) == 0) {
        snprintf(err, errlen, "top level: expected an object of worker types");
        goto out;
    }
    if (json_object_size(root) > CR_SIM_MAX_TYPES) {
        snprintf(err, errlen, "top level: more than %d worker types", CR_SIM_MAX_TYPES);
        goto out;
    }
    /* Columns in sorted name order so the table does not depend on the
     * file's key order. */
    tnames = cr_calloc(json_object_size(root), sizeof(*tnames));
    const char *tkey;
    json_t *tval;
    size_t nt = 0;
    json_object_foreach(root, tkey, tval)
    {
        tnames[nt++] = tkey;
    }
    qsort(tnames, nt, sizeof(*tnames), type_cmp);
    for (size_t ti = 0; ti < nt; ti++) {
        tkey = tnames[ti];
        tval = json_object_get(root, tkey);
        if (strlen(tkey) == 0 || strlen(tkey) >= CR_SIM_NAME_MAX) {
            snprintf(err, errlen, "worker type '%.40s': bad name", tkey);
            goto out;
        }
        for (size_t i = 0; tkey[i]; i++) {
            t.types[t.ntypes][i] = (char)toupper((unsigned char)tkey[i]);
        }
        int col = t.ntypes++;
        if (!json_is_object(tval)) {
            snprintf(err, errlen, "worker type '%s': expected an object", tkey);
            goto out;
        }
        const char *jkey;
        json_t *jval;
        json_object_foreach(tval, jkey, jval)
        {
            char model[CR_SIM_NAME_MAX * 2];
            int scale;
            if (parse_key(jkey, model, sizeof model, &scale) != 0) {
                snprintf(err, errlen, "%s: key '%.80s': expected \"('MODEL', GPUS)\"", tkey, jkey);
                goto out;
            }
            json_t *alone = json_is_object(jval) ? json_object_get(jval, "null") : NULL;
            if (!alone || !json_is_number(alone) || json_number_value(alone) < 0) {
                snprintf(err, errlen, "%s: %.80s: field 'null': expected steps/s >= 0", tkey, jkey);
                goto out;
            }
            cr__sim_tput_row *row = NULL;
            for (size_t r = 0; r < t.nrows; r++) {
                if (t.rows[r].scale == scale && strcmp(t.rows[r].model, model) == 0) {
                    row = &t.rows[r];
                    break;
                }
            }
            if (!row) {
                CR_GROW(t.rows, t.nrows, rows_cap);
                row = &t.rows[t.nrows++];
                memset(row, 0, sizeof *row);
                snprintf(row->model, sizeof row->model, "%s", model);
                row->scale = scale;
            }
            row->steps_per_s[col] = json_number_value(alone);
        }
    }
    if (t.nrows == 0) {
        snprintf(err, errlen, "no (model, gpus) entries");
        goto out;
    }
    qsort(t.rows, t.nrows, sizeof *t.rows, row_cmp);
    *out = t;
    memset(&t, 0, sizeof t);
    rc = 0;
out:
    free(tnames);
    free(t.rows);
    json_decref(root);
    return rc;
}

int cr__sim_tput_load(const char *path, cr__sim_tput *out, char *err, size_t errlen)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = cr_file_read(path, (size_t)256 << 20, &buf, &len);
    if (rc != 0) {
        snprintf(err, errlen, rc == CR_ETOOBIG ? "%s: larger than 256 MiB" : "%s: cannot open",
                 path);
        goto out;
    }
    char sub[400];
    rc = cr__sim_tput_parse(buf, len, out, sub, sizeof sub);
    if (rc != 0) {
        snprintf(err, errlen, "%s: %s", path, sub);
    }
out:
    free(buf);
    return rc;
}

void cr__sim_tput_fini(cr__sim_tput *t)
{
    CR_FREE(t->rows);
    t->nrows = 0;
    t->ntypes = 0;
}

const cr__sim_tput_row *cr__sim_tput_find(const cr__sim_tput *t, const char *model, int scale)
{
    if (!t || !t->nrows) {
        return NULL;
    }
    cr__sim_tput_row key;
    snprintf(key.model, sizeof key.model, "%s", model);
    key.scale = scale;
    return bsearch(&key, t->rows, t->nrows, sizeof *t->rows, row_cmp);
}

int cr__sim_tput_type(const cr__sim_tput *t, const char *type)
{
    for (int i = 0; t && i < t->ntypes; i++) {
        if (strcasecmp(t->types[i], type) == 0) {
            return i;
        }
    }
    return -1;
}
