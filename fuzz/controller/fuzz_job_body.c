/*
 * fuzz_job_body.c - the controller's validation of POST /v1/jobs bodies:
 * any input either gets an error naming the problem, or is a job that
 * serialises for the store and reloads identically (checked inside
 * ctl_job_validate, which aborts otherwise).
 */
#include "ctl_int.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cr_json_err err;
    memset(&err, 0, sizeof err);
    int rc = ctl_job_validate((const char *)data, size, &err);
    if (rc != 0 && err.message[0] == '\0') {
        abort(); /* every refusal says why */
    }
    return 0;
}
