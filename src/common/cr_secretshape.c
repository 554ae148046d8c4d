/*
 * cr_secretshape.c - credential-looking variable names and values (see
 * cr_secretshape.h). The value shapes are prefixes issuers put on their
 * tokens so that scanners find them: a prefix counts only at the start of
 * a word and followed by enough token characters, so "sk-learn" or
 * "ghp_x" pass and "sk-proj-3f9..." does not.
 */
#include "cr_secretshape.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

bool cr_secret_name(const char *name, size_t len)
{
    static const char *const words[] = {"TOKEN",   "SECRET",  "PASSWORD", "PASSWD",  "CREDENTIAL",
                                        "APIKEY",  "API_KEY", "PRIVATE",  "AUTH",    "COOKIE",
                                        "SESSION", "JWT",     "BEARER",   "SIGNING", NULL};
    /* whole families of cloud credentials (AWS_ACCESS_KEY_ID, AZURE_...) */
    static const char *const prefixes[] = {"AWS_", "AZURE_", NULL};
    char up[256];
    if (len >= sizeof up) {
        return true; /* a name this long is not worth the risk */
    }
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        up[i] = (char)(c >= 'a' && c <= 'z' ? c - 32 : c);
    }
    up[len] = '\0';
    for (size_t i = 0; words[i]; i++) {
        if (strstr(up, words[i])) {
            return true;
        }
    }
    for (size_t i = 0; prefixes[i]; i++) {
        if (strncmp(up, prefixes[i], strlen(prefixes[i])) == 0) {
            return true;
        }
    }
    /* ..._KEY, ..._KEY_... (AWS_SECRET_ACCESS_KEY, OPENAI_API_KEY, SSH key
     * paths), ..._PASS, ..._PASS_..., SSHPASS, MYSQL_PWD, SENTRY_DSN, GH_PAT
     * (a personal access token; PATH is not one) */
    static const char *const parts[] = {"_KEY", "PASS", "_PWD", "_DSN", "_PAT", NULL};
    for (size_t i = 0; parts[i]; i++) {
        size_t pl = strlen(parts[i]);
        for (const char *k = strstr(up, parts[i]); k; k = strstr(k + 1, parts[i])) {
            if (k[pl] == '\0' || k[pl] == '_') {
                return true;
            }
        }
    }
    return strcmp(up, "KEY") == 0 || strcmp(up, "PAT") == 0;
}

static bool tok_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-';
}

static bool b64url_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '=';
}

static size_t run_of(const char *p, bool (*ok)(char))
{
    size_t n = 0;
    while (p[n] && ok(p[n])) {
        n++;
    }
    return n;
}

/* An issuer's prefix at p, followed by at least min token characters. */
static bool prefixed_token(const char *p)
{
    static const struct {
        const char *prefix;
        size_t min; /* token characters after the prefix */
        bool upper; /* only [A-Z0-9] after it (AWS key ids) */
    } shapes[] = {
        {"ghp_", 20, false},   {"gho_", 20, false},  {"ghu_", 20, false},
        {"ghs_", 20, false},   {"ghr_", 20, false},  {"github_pat_", 20, false},
        {"glpat-", 16, false}, {"sk-", 20, false},   {"xoxb-", 10, false},
        {"xoxp-", 10, false},  {"xoxa-", 10, false}, {"xoxr-", 10, false},
        {"xoxs-", 10, false},  {"xapp-", 10, false}, {"AKIA", 16, true},
        {"ASIA", 16, true},    {"hf_", 20, false},   {"npm_", 20, false},
        {"pypi-", 20, false},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        size_t pl = strlen(shapes[i].prefix);
        if (strncmp(p, shapes[i].prefix, pl) != 0) {
            continue;
        }
        size_t n = 0;
        if (shapes[i].upper) {
            while (isupper((unsigned char)p[pl + n]) || isdigit((unsigned char)p[pl + n])) {
                n++;
            }
        } else {
            n = run_of(p + pl, tok_char);
        }
        if (n >= shapes[i].min) {
            return true;
        }
    }
    return false;
}

/* header.payload.signature, the first two base64url JSON objects. */
static bool jwt_at(const char *p)
{
    if (strncmp(p, "eyJ", 3) != 0) {
        return false;
    }
    size_t h = run_of(p, b64url_char);
    if (h < 10 || p[h] != '.' || strncmp(p + h + 1, "eyJ", 3) != 0) {
        return false;
    }
    const char *q = p + h + 1;
    size_t b = run_of(q, b64url_char);
    return b >= 4 && q[b] == '.';
}

/* name=value where the name is a password-like parameter, at the start or
 * after ?, &, ; or a blank (a URL query, a connection string). */
static bool param_at(const char *s, const char *p)
{
    static const char *const names[] = {
        "password",   "passwd",          "pwd",           "pass",
        "secret",     "token",           "access_token",  "auth",
        "apikey",     "api_key",         "key",           "sig",
        "accountkey", "sharedaccesskey", "client_secret", "private_key",
        NULL};
    if (p != s && !strchr("?&; \t", p[-1])) {
        return false;
    }
    for (size_t i = 0; names[i]; i++) {
        size_t n = strlen(names[i]);
        if (strncasecmp(p, names[i], n) == 0 && p[n] == '=' && p[n + 1] && p[n + 1] != '&' &&
            p[n + 1] != ';') {
            return true;
        }
    }
    return false;
}

bool cr_secret_value(const char *value)
{
    /* scheme://user:password@host or scheme://key@host (DATABASE_URL,
     * HTTPS_PROXY, a DSN): the userinfo part of a URL is a credential */
    for (const char *p = strstr(value, "://"); p; p = strstr(p + 1, "://")) {
        const char *auth = p + 3;
        size_t n = strcspn(auth, "/?#@ ");
        if (auth[n] == '@' && n > 0) {
            return true;
        }
    }
    if (strstr(value, "-----BEGIN ")) {
        return true; /* a PEM block: a key or a certificate with one */
    }
    for (const char *p = value; *p; p++) {
        bool word = p == value || !tok_char(p[-1]);
        if (word && (prefixed_token(p) || jwt_at(p))) {
            return true;
        }
        if (param_at(value, p)) {
            return true;
        }
        if (word && (strncmp(p, "Bearer ", 7) == 0 || strncmp(p, "Basic ", 6) == 0) &&
            run_of(p + (p[1] == 'e' ? 7 : 6), b64url_char) >= 8) {
            return true;
        }
    }
    return false;
}
