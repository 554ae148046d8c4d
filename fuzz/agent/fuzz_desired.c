/*
 * fuzz_desired.c - the desired-state document comes from the network: any
 * input parses or fails with a message; a parsed document round-trips
 * through the record form and yields a well-formed job environment.
 */
#include "cr_desired.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cr_desired d;
    char err[512];
    if (cr_desired_parse((const char *)data, size, &d, err, sizeof err) != 0) {
        if (!err[0]) {
            abort(); /* every failure names its reason */
        }
        return 0;
    }
    char *base[] = {"PATH=/bin", NULL};
    for (size_t i = 0; i < d.count; i++) {
        json_t *j = cr_job_spec_to_json(&d.jobs[i]);
        cr_job_spec back;
        if (cr_job_spec_from_json(j, "", &back, err, sizeof err) != 0 ||
            back.job != d.jobs[i].job) {
            abort();
        }
        cr_job_spec_fini(&back);
        json_decref(j);
        char **env = cr_job_env(&d.jobs[i], base, "n");
        for (char **e = env; *e; e++) {
            if (!strchr(*e, '=')) {
                abort();
            }
        }
        cr_strv_free(env);
    }
    cr_desired_fini(&d);
    return 0;
}
