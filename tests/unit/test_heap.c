/* The timer heap (src/core/heap.c), shared by the event loops and the
 * coroutine runtime: nodes come out smallest first, removal from the middle
 * keeps the order, and a node knows whether it is in the heap. Checked
 * against a sorted reference with pseudo-random keys and removals. */
#include <errno.h>
#include <stdint.h>

#include "test.h"
#include "yard/heap.h"

#define N 2000

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static yard_heap_node_t nodes[N];

/* The heap property and the nodes' own indexes, everywhere. */
static void check_heap(const yard_heap_t *h)
{
    for (size_t i = 0; i < h->n; i++) {
        ASSERT_EQ(h->v[i]->idx, i);
        if (i > 0)
            ASSERT(h->v[(i - 1) / 2]->key <= h->v[i]->key);
    }
}

static void test_order_and_removal(void)
{
    yard_heap_t h = {0};
    for (int i = 0; i < N; i++) {
        yard_heap_node_init(&nodes[i]);
        ASSERT(!yard_heap_contains(&nodes[i]));
        /* Small key range: many equal keys. */
        ASSERT_EQ(yard_heap_push(&h, &nodes[i], next_rand() % 500), 0);
        ASSERT(yard_heap_contains(&nodes[i]));
    }
    check_heap(&h);
    /* Remove every third node from wherever it is. */
    size_t left = N;
    for (int i = 0; i < N; i += 3) {
        yard_heap_remove(&h, &nodes[i]);
        ASSERT(!yard_heap_contains(&nodes[i]));
        left--;
    }
    ASSERT_EQ(h.n, left);
    check_heap(&h);
    /* Re-key some by removing and pushing again, as the loops do. */
    for (int i = 1; i < N; i += 7) {
        if (!yard_heap_contains(&nodes[i]))
            continue;
        yard_heap_remove(&h, &nodes[i]);
        ASSERT_EQ(yard_heap_push(&h, &nodes[i], next_rand() % 500), 0);
    }
    check_heap(&h);
    /* Drain: never decreasing, each remaining node exactly once. */
    uint64_t last = 0;
    size_t popped = 0;
    for (yard_heap_node_t *m = yard_heap_min(&h); m; m = yard_heap_min(&h)) {
        ASSERT(m->key >= last);
        last = m->key;
        ASSERT(m >= nodes && m < nodes + N);
        ASSERT((m - nodes) % 3 != 0); /* a removed node never comes back */
        yard_heap_remove(&h, m);
        popped++;
    }
    ASSERT_EQ(popped, left);
    ASSERT_EQ(h.n, 0);
    ASSERT(yard_heap_min(&h) == NULL);
    yard_heap_free(&h);
}

/* A heap that cannot grow says -ENOMEM and is left as it was. */
static void test_full(void)
{
    yard_heap_node_t a, *one[1];
    yard_heap_node_init(&a);
    size_t huge = SIZE_MAX / sizeof one[0] / 2 + 1; /* doubling it overflows */
    yard_heap_t h = {.v = one, .n = huge, .cap = huge};
    ASSERT_EQ(yard_heap_push(&h, &a, 1), -ENOMEM);
    ASSERT(!yard_heap_contains(&a));
    ASSERT(h.v == one && h.n == huge && h.cap == huge);
}

static void test_remove_last_and_only(void)
{
    yard_heap_t h = {0};
    yard_heap_node_t a, b;
    yard_heap_node_init(&a);
    yard_heap_node_init(&b);
    ASSERT_EQ(yard_heap_push(&h, &a, 5), 0);
    yard_heap_remove(&h, &a); /* the only node */
    ASSERT_EQ(h.n, 0);
    ASSERT(!yard_heap_contains(&a));
    ASSERT_EQ(yard_heap_push(&h, &a, 5), 0);
    ASSERT_EQ(yard_heap_push(&h, &b, 9), 0);
    yard_heap_remove(&h, &b); /* the last slot */
    ASSERT(yard_heap_min(&h) == &a);
    ASSERT_EQ(a.idx, 0);
    yard_heap_free(&h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"order_and_removal", test_order_and_removal},
        {"remove_last_and_only", test_remove_last_and_only},
        {"full", test_full},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
