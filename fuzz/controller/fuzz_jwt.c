/*
 * fuzz_jwt.c - OIDC tokens and JWKS documents (cr_jwt.h), both outside
 * input. The first byte picks: 't' (or anything but 'k') verifies the rest
 * as a bearer token against a fixed JWKS (one EC P-256 key, kid "f1");
 * 'k' loads the rest as a JWKS file. Any input gets an answer, never a
 * crash; a token is valid only with a good signature.
 */
#include "cr_jwt.h"

#include "cr_error.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char jwks[] =
    "{\"keys\": [{\"kty\": \"EC\", \"crv\": \"P-256\", \"kid\": \"f1\", \"use\": \"sig\", \"x\": "
    "\"QHM0rxILtbz_-W_qrydULk_sxFQ8MK7bsJ6mEOBAh-Q\", \"y\": "
    "\"T0HuiczpZ0lG5NxVW-8w1Ddvyfmmukg5j-7GbdTvLxw\"}]}";

/* text into a new temporary file; its path into path (free with unlink). */
static int temp_file(const uint8_t *text, size_t n, char *path, size_t len)
{
    snprintf(path, len, "%s/corral-fuzz-jwt-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) {
        return -1;
    }
    int rc = write(fd, text, n) == (ssize_t)n ? 0 : -1;
    close(fd);
    return rc;
}

static cr_jwt *verifier(const char *file, char *why, size_t whylen)
{
    static const cr_jwt_rule rule = {
        .claim = "groups", .value = "g", .tenant = "t", .role = CR_ROLE_USER};
    cr_jwt_config cfg = {.issuer = "https://i", .audience = "corral", .map = &rule, .nmap = 1};
    snprintf(cfg.jwks, sizeof cfg.jwks, "%s", file);
    cr_jwt *j = NULL;
    return cr_jwt_new(&cfg, &j, why, whylen) == 0 ? j : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    char path[512], why[512] = "";
    bool keys = data[0] == 'k';
    const uint8_t *text = keys ? data + 1 : (const uint8_t *)jwks;
    size_t n = keys ? size - 1 : sizeof jwks - 1;
    if (temp_file(text, n, path, sizeof path) != 0) {
        return 0;
    }
    cr_jwt *j = verifier(path, why, sizeof why);
    if (!keys && !j) {
        abort(); /* the fixed JWKS must load */
    }
    if (keys && !j && why[0] == '\0') {
        abort(); /* a refused JWKS says why */
    }
    if (!keys && j) {
        char *tok = malloc(size);
        memcpy(tok, data + 1, size - 1);
        tok[size - 1] = '\0';
        cr_principal p;
        char sub[64];
        int rc = cr_jwt_verify(j, tok, 1700000000, &p, sub, sizeof sub, why, sizeof why);
        if (rc != 0 && why[0] == '\0') {
            abort();
        }
        free(tok);
    }
    cr_jwt_free(j);
    unlink(path);
    return 0;
}
