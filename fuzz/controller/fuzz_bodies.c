/*
 * fuzz_bodies.c - the controller's other request bodies: the first byte
 * picks the validator (node registration, service creation), the rest is
 * the body. Any input gets 0 or an error that says why.
 */
#include "ctl_int.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    cr_json_err err;
    memset(&err, 0, sizeof err);
    const char *body = (const char *)data + 1;
    int rc = data[0] % 2 == 0 ? ctl_node_validate(body, size - 1, &err)
                              : ctl_service_validate(body, size - 1, &err);
    if (rc != 0 && err.message[0] == '\0') {
        abort();
    }
    return 0;
}
