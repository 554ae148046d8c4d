/*
 * cr_parse.h - strict parsers for values that come from outside input
 * (flags, config files, traces). Each returns 0 or a negative CR_E* code
 * and leaves its out-parameter untouched on failure; none accepts trailing
 * garbage, NaN or infinity.
 */
#ifndef CR_PARSE_H
#define CR_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* "42", "-3" into a range-checked int64. */
int cr_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
/* "0.5", "2e9" into a finite double in [min, max]. */
int cr_parse_f64(const char *s, double min, double max, double *out);
/* Counts with an SI-style suffix: "7b", "70e9", "1.5t", "500m" (million),
 * "8k", "2e9"; case-insensitive; b/g = 1e9, t = 1e12, m = 1e6, k = 1e3. */
int cr_parse_count(const char *s, double *out);
/* Memory sizes, Slurm-style: "512M", "16G", "1.5g", "2T", "64K", "100B";
 * powers of 1024; a bare number is megabytes (as Slurm's --mem). > 0,
 * at most 2^62 bytes. */
int cr_parse_bytes(const char *s, int64_t *out);

/*
 * A CSV record split in place (RFC 4180 quoting: "a,b" and "" escapes).
 * fields[i] point into the line, which is modified; col[i] is the 1-based
 * column where field i starts, for error messages.
 */
typedef struct cr_csv_rec {
    char **fields; /* field texts, unquoted */
    int *col;      /* 1-based starting column of each field */
    size_t count;  /* number of fields */
    size_t cap;    /* allocated slots */
} cr_csv_rec;

void cr_csv_rec_init(cr_csv_rec *r);
void cr_csv_rec_fini(cr_csv_rec *r);
/* Split one line (no trailing newline; CR stripped) into r. Returns 0,
 * or CR_EPARSE with *err_col set for an unterminated quote. */
int cr_csv_split(char *line, char sep, cr_csv_rec *r, int *err_col);

#endif
