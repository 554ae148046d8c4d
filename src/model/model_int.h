/*
 * model_int.h - helpers shared by the files of the model module (not part
 * of its contract).
 */
#ifndef CR_MODEL_INT_H
#define CR_MODEL_INT_H

#include <stddef.h>

/* Read a whole file; returns 0 and a new NUL-terminated buffer (free with
 * free()) or CR_EIO with "path: reason" in err. Files over max_bytes are
 * refused with CR_ETOOBIG. */
int cr__model_read_file(const char *path, size_t max_bytes, char **out, size_t *out_len, char *err,
                        size_t err_len);

/* printf into err (NULL-safe, always terminated). */
void cr__model_errf(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Lower-case s dropping spaces, '-' and '_' into out (size len). */
void cr__model_norm(const char *s, char *out, size_t len);

/* Default data path: <data dir>/<rel> (cr_datadir.h says where that is);
 * written into buf (static per-caller storage). */
const char *cr__model_data_path(const char *rel, char *buf, size_t len);

#endif
