/*
 * cr_secretshape.h - whether an environment variable looks like it holds a
 * credential, by its name or by its value. One test for the CLI (such
 * variables are not exported unless named, docs/cli.md) and the controller
 * (their values are shown as "(redacted)" even to those who may read a
 * job's environment, docs/security.md).
 *
 * By name: TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL, APIKEY, API_KEY,
 * PRIVATE, AUTH, COOKIE, SESSION, JWT, BEARER, SIGNING anywhere; a part
 * _KEY, PASS, _PWD, _DSN, _PAT at the end or before '_' (OPENAI_API_KEY,
 * SSHPASS, MYSQL_PWD, SENTRY_DSN, GH_PAT); AWS_* and AZURE_*.
 *
 * By value, the well-known token shapes: GitHub (ghp_, gho_, ghu_, ghs_,
 * ghr_, github_pat_), OpenAI and Anthropic (sk-...), Slack (xoxb-, xoxp-,
 * xoxa-, xoxr-, xoxs-, xapp-), AWS access key ids (AKIA/ASIA + 16), GitLab
 * (glpat-), Hugging Face (hf_), npm (npm_), PyPI (pypi-), a JWT (three
 * base64url parts, the first two "eyJ..."), a PEM block ("-----BEGIN "), a
 * URL with user info (scheme://user:pw@host, scheme://key@host), a
 * password-like parameter (password=, pwd=, token=, secret=, sig=,
 * AccountKey=... after ?, &, ; or at the start) and "Bearer "/"Basic "
 * credentials.
 *
 * Pure functions, no state.
 */
#ifndef CR_SECRETSHAPE_H
#define CR_SECRETSHAPE_H

#include <stdbool.h>
#include <stddef.h>

/* Whether a variable's name (len bytes, need not be NUL-terminated) looks
 * like it names a secret. Names of 256 bytes or more do. */
bool cr_secret_name(const char *name, size_t len);
/* Whether a value (NUL-terminated) has the shape of a credential. */
bool cr_secret_value(const char *value);

#endif
