/*
 * cli_config.c - the client's config file (~/.config/corral/config).
 *
 * Format (docs/cli.md): JSON, as for every role (docs/install.md), an
 * object {"server": "https://ctl:8620", "token_file": "...", "insecure":
 * false, "timeout": "30s"}: syntax errors name FILE:LINE:COLUMN, bad
 * fields name the field. A file that does not start with '{' is the
 * older, deprecated dialect: one "key = value" per line; blank lines and lines
 * starting with '#' are ignored; spaces around key and value are trimmed; a
 * value may be wrapped in double quotes. Keys: server, token, token_file,
 * ca_file, insecure (true|false), timeout (duration). Unknown keys, missing
 * '=' and bad values are errors reported as "FILE:LINE: what".
 */
#include "cli_int.h"
#include "cr_cli.h"

#include "cr_alloc.h"
#include "cr_buf.h"
#include "cr_error.h"
#include "cr_time.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <string.h>

/* Config files are a few lines; anything larger is a mistake. */
#define MAX_CONFIG_BYTES (64 * 1024)

void cr__cli_config_init(cli_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
}

void cr__cli_config_fini(cli_config *cfg)
{
    free(cfg->server);
    free(cfg->token);
    free(cfg->ca_file);
    cr__cli_config_init(cfg);
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) {
        s++;
    }
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) {
        s[--n] = '\0';
    }
    return s;
}

/* Read the first line of a small file into a new string (token files). */
static int read_first_line(const char *path, char **out)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        return CR_EIO;
    }
    char line[4096];
    int rc = CR_EPARSE;
    if (fgets(line, sizeof line, f)) {
        char *t = trim(line);
        if (*t) {
            *out = cr_strdup(t);
            rc = 0;
        }
    }
    fclose(f);
    return rc;
}

static int set_key(cli_config *cfg, const char *key, const char *val, char *why, size_t whylen)
{
    if (strcmp(key, "server") == 0) {
        if (strncmp(val, "http://", 7) != 0 && strncmp(val, "https://", 8) != 0) {
            snprintf(why, whylen, "server: '%s' is not an http:// or https:// URL", val);
            return CR_EINVAL;
        }
        free(cfg->server);
        cfg->server = cr_strdup(val);
    } else if (strcmp(key, "token") == 0) {
        free(cfg->token);
        cfg->token = cr_strdup(val);
    } else if (strcmp(key, "token_file") == 0) {
        char *t = NULL;
        if (read_first_line(val, &t) < 0) {
            snprintf(why, whylen, "token_file: cannot read a token from '%s'", val);
            return CR_EINVAL;
        }
        free(cfg->token);
        cfg->token = t;
    } else if (strcmp(key, "ca_file") == 0) {
        free(cfg->ca_file);
        cfg->ca_file = cr_strdup(val);
    } else if (strcmp(key, "insecure") == 0) {
        if (strcmp(val, "true") == 0) {
            cfg->insecure = true;
        } else if (strcmp(val, "false") == 0) {
            cfg->insecure = false;
        } else {
            snprintf(why, whylen, "insecure: '%s' is not allowed (allowed: true, false)", val);
            return CR_EINVAL;
        }
    } else if (strcmp(key, "timeout") == 0) {
        int64_t ns = 0;
        if (cr_duration_parse(val, &ns) < 0 || ns <= 0) {
            snprintf(why, whylen, "timeout: '%s' is not a positive duration (e.g. 30s, 2m)", val);
            return CR_EINVAL;
        }
        cfg->timeout_ns = ns;
    } else {
        snprintf(why, whylen,
                 "unknown key '%s' (allowed: server, token, token_file, ca_file, insecure, "
                 "timeout)",
                 key);
        return CR_EINVAL;
    }
    return 0;
}

/* True when text's first non-space character is '{': the JSON format. */
static bool is_json(const char *text)
{
    while (isspace((unsigned char)*text)) {
        text++;
    }
    return *text == '{';
}

static int parse_json(cli_config *cfg, const char *name, const char *text, FILE *err)
{
    json_error_t je;
    json_t *v = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    int rc = 0;
    if (!v || !json_is_object(v)) {
        if (v) {
            fprintf(err, "%s: expected a JSON object\n", name);
        } else {
            fprintf(err, "%s:%d:%d: %s\n", name, je.line, je.column, je.text);
        }
        rc = CR_EPARSE;
        goto out;
    }
    const char *key;
    json_t *x;
    json_object_foreach(v, key, x)
    {
        char val[4096];
        if (json_is_string(x)) {
            snprintf(val, sizeof val, "%s", json_string_value(x));
        } else if (json_is_boolean(x) && strcmp(key, "insecure") == 0) {
            snprintf(val, sizeof val, "%s", json_is_true(x) ? "true" : "false");
        } else if (json_is_integer(x) && strcmp(key, "timeout") == 0) {
            snprintf(val, sizeof val, "%llds", (long long)json_integer_value(x));
        } else {
            fprintf(err, "%s: field '%s': expected a %s\n", name, key,
                    strcmp(key, "insecure") == 0  ? "boolean"
                    : strcmp(key, "timeout") == 0 ? "duration string or seconds"
                                                  : "string");
            rc = CR_EPARSE;
            goto out;
        }
        if (!*val) {
            fprintf(err, "%s: field '%s': empty value\n", name, key);
            rc = CR_EPARSE;
            goto out;
        }
        char why[256];
        if (set_key(cfg, key, val, why, sizeof why) < 0) {
            fprintf(err, "%s: %s\n", name, why);
            rc = CR_EPARSE;
            goto out;
        }
    }
out:
    json_decref(v);
    return rc;
}

int cr__cli_config_parse(cli_config *cfg, const char *name, const char *text, FILE *err)
{
    if (is_json(text)) {
        return parse_json(cfg, name, text, err);
    }
    int rc = 0;
    char *copy = cr_strdup(text);
    int lineno = 0;
    char *p = copy;
    while (p && rc == 0) {
        char *nl = strchr(p, '\n');
        if (nl) {
            *nl = '\0';
        }
        char *line = trim(p);
        p = nl ? nl + 1 : NULL;
        lineno++;
        if (*line == '\0' || *line == '#') {
            continue;
        }
        char *eq = strchr(line, '=');
        if (!eq) {
            fprintf(err, "%s:%d: expected 'key = value'\n", name, lineno);
            rc = CR_EPARSE;
            break;
        }
        *eq = '\0';
        char *key = trim(line);
        char *val = trim(eq + 1);
        size_t vn = strlen(val);
        if (vn >= 2 && val[0] == '"' && val[vn - 1] == '"') {
            val[vn - 1] = '\0';
            val++;
        } else if (vn >= 1 && val[0] == '"') {
            fprintf(err, "%s:%d: unterminated quote in the value of '%s'\n", name, lineno, key);
            rc = CR_EPARSE;
            break;
        }
        if (!*key) {
            fprintf(err, "%s:%d: missing key before '='\n", name, lineno);
            rc = CR_EPARSE;
            break;
        }
        if (!*val) {
            fprintf(err, "%s:%d: %s: empty value\n", name, lineno, key);
            rc = CR_EPARSE;
            break;
        }
        char why[256];
        if (set_key(cfg, key, val, why, sizeof why) < 0) {
            fprintf(err, "%s:%d: %s\n", name, lineno, why);
            rc = CR_EPARSE;
        }
    }
    free(copy);
    return rc;
}

int cr__cli_config_load(cli_config *cfg, const char *path, bool optional, FILE *err)
{
    int rc = 0;
    cr_buf b;
    cr_buf_init(&b);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (optional && errno == ENOENT) {
            goto out;
        }
        fprintf(err, "corral: cannot read config file %s: %s\n", path, strerror(errno));
        rc = CR_EIO;
        goto out;
    }
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        cr_buf_append(&b, chunk, n);
        if (b.len > MAX_CONFIG_BYTES) {
            fprintf(err, "%s: larger than %d bytes; not a config file\n", path, MAX_CONFIG_BYTES);
            rc = CR_ETOOBIG;
            goto out;
        }
    }
    if (memchr(cr_buf_str(&b), '\0', b.len)) {
        fprintf(err, "%s: contains a NUL byte; not a config file\n", path);
        rc = CR_EPARSE;
        goto out;
    }
    if (!is_json(cr_buf_str(&b)) && strchr(cr_buf_str(&b), '=')) {
        fprintf(err,
                "corral: warning: %s: the 'key = value' format is deprecated; write JSON "
                "(docs/cli.md)\n",
                path);
    }
    rc = cr__cli_config_parse(cfg, path, cr_buf_str(&b), err);
out:
    if (f) {
        fclose(f);
    }
    cr_buf_fini(&b);
    return rc;
}

int cr_cli_config_check(const char *path)
{
    cli_config cfg;
    cr__cli_config_init(&cfg);
    int rc = cr__cli_config_load(&cfg, path, false, stderr);
    cr__cli_config_fini(&cfg);
    return rc;
}
