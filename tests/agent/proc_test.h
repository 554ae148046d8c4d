/*
 * proc_test.h - for the tests of the job supervisor (cr_proc.h) on its
 * own: a "sh -c SCRIPT" job spec, a file's text, and removing the test's
 * temporary directory. Used by test_agent_proc.c and test_agent_pidns.c.
 */
#ifndef CR_TEST_PROC_H
#define CR_TEST_PROC_H

#include "cr_proc.h"
#include "cr_time.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* *s becomes job's spec running "sh -c script" (borrowed: it must outlive
 * s), no environment, 1 s grace. The argv and env arrays are static: one
 * spec at a time. */
static inline void cr_test_spec_sh(cr_job_spec *s, int64_t job, const char *script)
{
    static char *argv[4];
    static char *env[1];
    memset(s, 0, sizeof *s);
    argv[0] = "sh";
    argv[1] = "-c";
    argv[2] = (char *)script;
    argv[3] = NULL;
    env[0] = NULL;
    s->job = job;
    s->argv = argv;
    s->argc = 3;
    s->env = env;
    s->grace_ns = CR_NS_PER_SEC;
}

/* The first 4095 bytes of path's text, in a static buffer (valid until the
 * next call); NULL when it cannot be opened. */
static inline char *cr_test_slurp(const char *path)
{
    static char buf[4096];
    FILE *f = fopen(path, "r");
    if (!f) {
        return NULL;
    }
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* rm -rf dir (a path without a quote): 0, or -1 when that failed. */
static inline int cr_test_rm_rf(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

#endif
