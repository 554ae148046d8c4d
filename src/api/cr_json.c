/*
 * cr_json.c - strict JSON request validation; see cr_json.h.
 */
#include "cr_json.h"

#include "cr_error.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int cr_json_fail(cr_json_err *err, int code, const char *field, const char *fmt, ...)
{
    if (err) {
        err->code = code;
        snprintf(err->field, sizeof err->field, "%s", field ? field : "");
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

int cr_json_parse_object(const char *body, size_t len, json_t **out, cr_json_err *err)
{
    json_error_t je;
    if (len == 0) {
        return cr_json_fail(err, CR_EPARSE, "", "empty body: a JSON object is required");
    }
    json_t *v = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!v) {
        return cr_json_fail(err, CR_EPARSE, "", "malformed JSON at line %d, column %d: %s", je.line,
                            je.column, je.text);
    }
    if (!json_is_object(v)) {
        json_decref(v);
        return cr_json_fail(err, CR_EPARSE, "", "the body must be a JSON object");
    }
    *out = v;
    return 0;
}

const char *cr_json_path(char *buf, size_t len, const char *path, const char *key)
{
    if (!path || !*path) {
        snprintf(buf, len, "%s", key);
    } else {
        snprintf(buf, len, "%s.%s", path, key);
    }
    return buf;
}

int cr_json_only(const json_t *obj, const char *path, const char *const *allowed, cr_json_err *err)
{
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)obj, key, val)
    {
        bool ok = false;
        for (size_t i = 0; allowed[i]; i++) {
            if (strcmp(key, allowed[i]) == 0) {
                ok = true;
                break;
            }
        }
        if (!ok) {
            char p[256];
            cr_json_path(p, sizeof p, path, key);
            return cr_json_fail(err, CR_EINVAL, p, "unknown member '%s'", p);
        }
    }
    return 0;
}

static json_t *member(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

int cr_json_str(const json_t *obj, const char *path, const char *key, bool required, size_t max_len,
                const char **out, cr_json_err *err)
{
    char p[256];
    json_t *v = member(obj, key);
    if (!v) {
        return required ? cr_json_fail(err, CR_EINVAL, cr_json_path(p, sizeof p, path, key),
                                       "field '%s': required", p)
                        : 0;
    }
    if (!json_is_string(v)) {
        cr_json_path(p, sizeof p, path, key);
        return cr_json_fail(err, CR_EINVAL, p, "field '%s': must be a string", p);
    }
    size_t n = json_string_length(v);
    if (n > max_len || strlen(json_string_value(v)) != n) {
        cr_json_path(p, sizeof p, path, key);
        return cr_json_fail(err, CR_EINVAL, p,
                            "field '%s': must be a string of at most %zu bytes without NUL", p,
                            max_len);
    }
    *out = json_string_value(v);
    return 0;
}

int cr_json_int(const json_t *obj, const char *path, const char *key, bool required, int64_t min,
                int64_t max, int64_t *out, cr_json_err *err)
{
    char p[256];
    json_t *v = member(obj, key);
    if (!v) {
        return required ? cr_json_fail(err, CR_EINVAL, cr_json_path(p, sizeof p, path, key),
                                       "field '%s': required", p)
                        : 0;
    }
    int64_t x;
    if (json_is_integer(v)) {
        x = (int64_t)json_integer_value(v);
    } else if (json_is_real(v) && floor(json_real_value(v)) == json_real_value(v) &&
               fabs(json_real_value(v)) < 9e15) {
        x = (int64_t)json_real_value(v);
    } else {
        cr_json_path(p, sizeof p, path, key);
        return cr_json_fail(err, CR_EINVAL, p, "field '%s': must be an integer %lld..%lld", p,
                            (long long)min, (long long)max);
    }
    if (x < min || x > max) {
        cr_json_path(p, sizeof p, path, key);
        return cr_json_fail(err, CR_EINVAL, p, "field '%s': must be an integer %lld..%lld", p,
                            (long long)min, (long long)max);
    }
    *out = x;
    return 0;
}

int cr_json_num(const json_t *obj, const char *path, const char *key, bool required, double min,
                double max, double *out, cr_json_err *err)
{
    char p[256];
    json_t *v = member(obj, key);
    if (!v) {
        return required ? cr_json_fail(err, CR_EINVAL, cr_json_path(p, sizeof p, path, key),
                                       "field '%s': required", p)
                        : 0;
    }
    if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < min ||
        json_number_value(v) > max) {
        cr_json_path(p, sizeof p, path, key);
        return cr_json_fail(err, CR_EINVAL, p, "field '%s': must be a number %g..%g", p, min, max);
    }
    *out = json_number_value(v);
    return 0;
}

int cr_json_bool(const json_t *obj, const char *path, const char *key, bool required, bool *out,
                 cr_json_err *err)
{
    char p[256];
    json_t *v = member(obj, key);
    if (!v) {
        return required ? cr_json_fail(err, CR_EINVAL, cr_json_path(p, sizeof p, path, key),
                                       "field '%s': required", p)
                        : 0;
    }
    if (!json_is_boolean(v)) {
        cr_json_path(p, sizeof p, path, key);
        return cr_json_fail(err, CR_EINVAL, p, "field '%s': must be true or false", p);
    }
    *out = json_is_true(v);
    return 0;
}

int cr_json_obj(const json_t *obj, const char *path, const char *key, bool required, json_t **out,
                cr_json_err *err)
{
    char p[256];
    json_t *v = member(obj, key);
    if (!v) {
        return required ? cr_json_fail(err, CR_EINVAL, cr_json_path(p, sizeof p, path, key),
                                       "field '%s': required", p)
                        : 0;
    }
    if (!json_is_object(v)) {
        cr_json_path(p, sizeof p, path, key);
        return cr_json_fail(err, CR_EINVAL, p, "field '%s': must be an object", p);
    }
    *out = v;
    return 0;
}

int cr_json_arr(const json_t *obj, const char *path, const char *key, bool required,
                size_t max_items, json_t **out, cr_json_err *err)
{
    char p[256];
    json_t *v = member(obj, key);
    if (!v) {
        return required ? cr_json_fail(err, CR_EINVAL, cr_json_path(p, sizeof p, path, key),
                                       "field '%s': required", p)
                        : 0;
    }
    if (!json_is_array(v) || json_array_size(v) > max_items) {
        cr_json_path(p, sizeof p, path, key);
        return cr_json_fail(err, CR_EINVAL, p, "field '%s': must be an array of at most %zu items",
                            p, max_items);
    }
    *out = v;
    return 0;
}

int cr_json_enum(const char *value, const char *field, const char *const *choices, cr_json_err *err)
{
    for (size_t i = 0; choices[i]; i++) {
        if (strcmp(value, choices[i]) == 0) {
            return 0;
        }
    }
    char list[256] = "";
    size_t used = 0;
    for (size_t i = 0; choices[i]; i++) {
        int n = snprintf(list + used, sizeof list - used, "%s%s", i ? "|" : "", choices[i]);
        if (n > 0 && used + (size_t)n < sizeof list) {
            used += (size_t)n;
        }
    }
    return cr_json_fail(err, CR_EINVAL, field, "field '%s': must be one of %s", field, list);
}
