/*
 * store_txn.c - building a transaction (cr_store_txn_*): the list of
 * operations both backends apply. A leaf of the store: the backends'
 * writers free what they applied here, and nothing here calls a backend.
 */
#include "store_int.h"

#include "cr_alloc.h"

#include <stdlib.h>
#include <string.h>

static void op_free(op *o)
{
    free(o->s1);
    free(o->s2);
    free(o->s3);
    free(o->s4);
}

cr_store_txn *cr_store_txn_new(void)
{
    return cr_calloc(1, sizeof(cr_store_txn));
}

void cr_store_txn_free(cr_store_txn *t)
{
    if (!t) {
        return;
    }
    for (size_t i = 0; i < t->len; i++) {
        op_free(&t->ops[i]);
    }
    free(t->ops);
    free(t);
}

bool cr_store_txn_empty(const cr_store_txn *t)
{
    return t->len == 0;
}

void cr_store_txn_splittable(cr_store_txn *t)
{
    t->splittable = true;
}

static op *add_op(cr_store_txn *t, enum op_kind kind)
{
    CR_GROW(t->ops, t->len, t->cap);
    op *o = &t->ops[t->len++];
    memset(o, 0, sizeof *o);
    o->kind = kind;
    return o;
}

void cr_store_txn_put_job(cr_store_txn *t, int64_t id, const char *tenant, const char *state,
                          const char *doc)
{
    op *o = add_op(t, OP_PUT_JOB);
    o->i1 = id;
    o->s1 = cr_strdup(tenant);
    o->s2 = cr_strdup(state);
    o->s3 = cr_strdup(doc);
}

void cr_store_txn_event(cr_store_txn *t, int64_t job, int64_t time_ns, const char *what,
                        const char *why)
{
    op *o = add_op(t, OP_EVENT);
    o->i1 = job;
    o->i2 = time_ns;
    o->s1 = cr_strdup(what);
    o->s2 = cr_strdup(why ? why : "");
}

void cr_store_txn_put(cr_store_txn *t, const char *kind, const char *key, const char *doc)
{
    op *o = add_op(t, OP_PUT);
    o->s1 = cr_strdup(kind);
    o->s2 = cr_strdup(key);
    o->s3 = cr_strdup(doc);
}

void cr_store_txn_del(cr_store_txn *t, const char *kind, const char *key)
{
    op *o = add_op(t, OP_DEL);
    o->s1 = cr_strdup(kind);
    o->s2 = cr_strdup(key);
}

void cr_store_txn_usage(cr_store_txn *t, const char *tenant, const char *gpu_type, const char *day,
                        double gpu_s, double energy_j, double cost)
{
    op *o = add_op(t, OP_USAGE);
    o->s1 = cr_strdup(tenant);
    o->s2 = cr_strdup(gpu_type);
    o->s4 = cr_strdup(day);
    o->d1 = gpu_s;
    o->d2 = energy_j;
    o->d3 = cost;
}

void cr__store_txn_append(cr_store_txn **head, cr_store_txn **tail, cr_store_txn *t)
{
    if (*tail) {
        (*tail)->next = t;
    } else {
        *head = t;
    }
    *tail = t;
}
