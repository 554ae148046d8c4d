/*
 * cr_jwt_int.h - private to cr_jwt.c and cr_crypto_load.c: libcrypto is
 * loaded with dlopen on first use (cr_crypto_load.c says why). Threading:
 * safe from any thread (pthread_once).
 */
#ifndef CR_JWT_INT_H
#define CR_JWT_INT_H

#include <stdbool.h>

/* Whether libcrypto is loaded (loading it on the first call); false with
 * *why (static text) when it cannot be. No other libcrypto function may be
 * called before this returned true. */
bool cr__crypto_ok(const char **why);

#endif
