/*
 * sim_heap.c - the simulator's event queue: a binary min-heap keyed by
 * (time, push sequence). The sequence makes the order of simultaneous
 * events the order in which they were pushed, so a run never depends on
 * the heap's internal shape.
 */
#include "sim_int.h"

#include "cr_alloc.h"

static bool ev_less(const cr__sim_ev *x, const cr__sim_ev *y)
{
    if (x->t_ns != y->t_ns) {
        return x->t_ns < y->t_ns;
    }
    return x->seq < y->seq;
}

void cr__sim_heap_init(cr__sim_heap *h)
{
    h->ev = NULL;
    h->len = 0;
    h->cap = 0;
    h->next_seq = 0;
}

void cr__sim_heap_fini(cr__sim_heap *h)
{
    CR_FREE(h->ev);
    h->len = h->cap = 0;
}

void cr__sim_heap_push(cr__sim_heap *h, int64_t t_ns, int kind, int64_t a, int64_t b)
{
    CR_GROW(h->ev, h->len, h->cap);
    cr__sim_ev e = {.t_ns = t_ns, .seq = h->next_seq++, .kind = kind, .a = a, .b = b};
    size_t i = h->len++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!ev_less(&e, &h->ev[parent])) {
            break;
        }
        h->ev[i] = h->ev[parent];
        i = parent;
    }
    h->ev[i] = e;
}

bool cr__sim_heap_pop(cr__sim_heap *h, cr__sim_ev *out)
{
    if (h->len == 0) {
        return false;
    }
    *out = h->ev[0];
    cr__sim_ev last = h->ev[--h->len];
    size_t i = 0;
    size_t n = h->len;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= n) {
            break;
        }
        size_t c = l;
        if (l + 1 < n && ev_less(&h->ev[l + 1], &h->ev[l])) {
            c = l + 1;
        }
        if (!ev_less(&h->ev[c], &last)) {
            break;
        }
        h->ev[i] = h->ev[c];
        i = c;
    }
    if (n > 0) {
        h->ev[i] = last;
    }
    return true;
}

const cr__sim_ev *cr__sim_heap_peek(const cr__sim_heap *h)
{
    return h->len ? &h->ev[0] : NULL;
}
