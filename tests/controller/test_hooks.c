/*
 * test_hooks.c - the controller's hook table (ctl_hooks.c): hooks run in
 * the order registered, each time a job changes or a node is bumped; a
 * node bump moves the node's desired-state version before the hooks see
 * it; registration past CTL_HOOKS_MAX is refused with CR_ERANGE and
 * changes nothing.
 */
#include "ctl_int.h"

#include "cr_error.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static char calls[64];
static size_t ncalls;
static uint64_t seen_version;

static void note(char ch)
{
    if (ncalls + 1 < sizeof calls) {
        calls[ncalls++] = ch;
        calls[ncalls] = '\0';
    }
}

static void job_a(ctl *c, ctl_job *j)
{
    (void)c;
    note(j->id == 7 ? 'a' : '?');
}

static void job_b(ctl *c, ctl_job *j)
{
    (void)c;
    note(j->id == 7 ? 'b' : '?');
}

static void node_n(ctl *c, ctl_node *n)
{
    (void)c;
    seen_version = n->version;
    note('n');
}

static void test_order_and_bump(void **state)
{
    (void)state;
    ctl *c = calloc(1, sizeof *c);
    assert_non_null(c);
    ncalls = 0;
    calls[0] = '\0';
    ctl_job j = {.id = 7};
    ctl_node n = {.version = 41};
    ctl_job_changed(c, &j); /* none registered: nothing runs */
    ctl_node_bump(c, &n);
    assert_string_equal(calls, "");
    assert_int_equal(n.version, 42);
    assert_int_equal(ctl_on_job_change(c, job_a), 0);
    assert_int_equal(ctl_on_job_change(c, job_b), 0);
    assert_int_equal(ctl_on_node_change(c, node_n), 0);
    ctl_job_changed(c, &j);
    ctl_node_bump(c, &n);
    assert_string_equal(calls, "abn");
    assert_int_equal(n.version, 43);
    assert_int_equal(seen_version, 43); /* the hook sees the new version */
    free(c);
}

static void test_limit(void **state)
{
    (void)state;
    ctl *c = calloc(1, sizeof *c);
    assert_non_null(c);
    for (int i = 0; i < CTL_HOOKS_MAX; i++) {
        assert_int_equal(ctl_on_job_change(c, job_a), 0);
        assert_int_equal(ctl_on_node_change(c, node_n), 0);
    }
    assert_int_equal(ctl_on_job_change(c, job_b), CR_ERANGE);
    assert_int_equal(ctl_on_node_change(c, node_n), CR_ERANGE);
    ncalls = 0;
    calls[0] = '\0';
    ctl_job j = {.id = 7};
    ctl_job_changed(c, &j);
    assert_int_equal(ncalls, CTL_HOOKS_MAX); /* the refused one never runs */
    assert_null(strchr(calls, 'b'));
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_bump),
        cmocka_unit_test(test_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
