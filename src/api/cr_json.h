/*
 * cr_json.h - strict validation of JSON request bodies (jansson).
 *
 * Every check names the offending member by its JSON path ("model.params",
 * "command[2]", "env.PATH") in a cr_json_err, which the API turns into a
 * 400 body {"error","message","field"}. Parsing rejects malformed JSON,
 * invalid UTF-8 (with line/column), duplicate keys, and a top level that is
 * not an object. Unknown members are rejected by cr_json_only().
 *
 * Getters take the parent object, its path ("" for the top level) and the
 * key; "required" false means a missing or null member leaves *out
 * untouched and returns 0 (the caller's default stays). Thread-safe.
 */
#ifndef CR_JSON_H
#define CR_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cr_json_err {
    int code;          /* CR_E* (CR_EINVAL, CR_EPARSE) */
    char field[256];   /* JSON path of the member, "" when none */
    char message[512]; /* human text naming the field and the rule */
} cr_json_err;

/* Set err (printf-style message) and return its code. */
int cr_json_fail(cr_json_err *err, int code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Parse a request body that must be a JSON object. Returns 0 and *out (new
 * reference, json_decref) or CR_EPARSE with line/column in err. */
int cr_json_parse_object(const char *body, size_t len, json_t **out, cr_json_err *err);

/* Reject members of obj not in the NULL-terminated list allowed. */
int cr_json_only(const json_t *obj, const char *path, const char *const *allowed, cr_json_err *err);

/* Join a path and a key ("a" + "b" = "a.b"; "" + "b" = "b") into buf. */
const char *cr_json_path(char *buf, size_t len, const char *path, const char *key);

int cr_json_str(const json_t *obj, const char *path, const char *key, bool required, size_t max_len,
                const char **out, cr_json_err *err);
int cr_json_int(const json_t *obj, const char *path, const char *key, bool required, int64_t min,
                int64_t max, int64_t *out, cr_json_err *err);
int cr_json_num(const json_t *obj, const char *path, const char *key, bool required, double min,
                double max, double *out, cr_json_err *err);
int cr_json_bool(const json_t *obj, const char *path, const char *key, bool required, bool *out,
                 cr_json_err *err);
/* A member that must be an object / array (borrowed reference), or NULL
 * when absent and not required. */
int cr_json_obj(const json_t *obj, const char *path, const char *key, bool required, json_t **out,
                cr_json_err *err);
int cr_json_arr(const json_t *obj, const char *path, const char *key, bool required,
                size_t max_items, json_t **out, cr_json_err *err);
/* Check that a string is one of a NULL-terminated list of choices. */
int cr_json_enum(const char *value, const char *field, const char *const *choices,
                 cr_json_err *err);

#endif
