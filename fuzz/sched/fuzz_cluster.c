/*
 * fuzz_cluster.c - the cluster file parser (cr_sched_load_cluster) on
 * arbitrary bytes. Whatever loads must pass cr_sched_check(), and a cycle
 * with a few jobs on the loaded cluster must keep it passing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cr_sched.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16) {
        return 0;
    }
    cr_sched_config cfg;
    cr_sched_config_default(&cfg, (cr_sched_policy)(size % CR_SCHED_POLICY_COUNT));
    cr_sched *s = NULL;
    if (cr_sched_new(&cfg, &s) < 0) {
        abort();
    }
    char err[256];
    int rc = cr_sched_load_cluster(s, (const char *)data, size, err, sizeof(err));
    if (rc < 0 && strncmp(err, "line ", 5) != 0) {
        abort(); /* every error names its line */
    }
    if (cr_sched_check(s, err, sizeof(err)) < 0) {
        abort();
    }
    int t;
    if (cr_sched_tenant(s, "fuzz", &t) == 0) {
        static const uint32_t sizes[] = {1, 2, 8, 16};
        for (uint64_t id = 1; id <= 8; id++) {
            cr_sched_job_spec j = {.id = id,
                                   .tenant = t,
                                   .gpu_count = sizes[id % 4],
                                   .node_count = id % 3 == 0 ? 2 : 0,
                                   .gpu_type = CR_SCHED_TYPE_ANY,
                                   .mig_profile = id == 5 ? "1g.10gb" : NULL,
                                   .time_limit_ns = 1000000000LL * (int64_t)id};
            cr_sched_job_add(s, &j, 0);
        }
        const cr_sched_decision *d;
        if (cr_sched_cycle(s, 1, NULL, &d) < 0 || cr_sched_check(s, err, sizeof(err)) < 0) {
            abort();
        }
    }
    cr_sched_free(s);
    return 0;
}
