/* A binary min-heap of timers, intrusive: the node lives in the caller's
 * object and remembers its place, so removing or re-keying one is
 * O(log n). The event loops keep their connections' timers in one, the
 * coroutine runtime its sleepers. Not thread-safe. */
#ifndef YARD_HEAP_H
#define YARD_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define YARD_HEAP_NONE ((size_t)-1)

typedef struct yard_heap_node {
    uint64_t key; /* smallest first */
    size_t idx;   /* YARD_HEAP_NONE when not in a heap */
} yard_heap_node_t;

typedef struct yard_heap {
    yard_heap_node_t **v;
    size_t n, cap;
} yard_heap_t;

static inline void yard_heap_node_init(yard_heap_node_t *node) { node->idx = YARD_HEAP_NONE; }
static inline bool yard_heap_contains(const yard_heap_node_t *node)
{
    return node->idx != YARD_HEAP_NONE;
}
/* The node with the smallest key, NULL when empty. */
static inline yard_heap_node_t *yard_heap_min(const yard_heap_t *h)
{
    return h->n ? h->v[0] : NULL;
}
/* Insert node with key (it must not be in a heap): 0, or -ENOMEM (the heap
 * is unchanged). */
int yard_heap_push(yard_heap_t *h, yard_heap_node_t *node, uint64_t key);
void yard_heap_remove(yard_heap_t *h, yard_heap_node_t *node);
void yard_heap_free(yard_heap_t *h);

#endif
