#include "yard/heap.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

static void heap_set(yard_heap_t *h, size_t i, yard_heap_node_t *node)
{
    h->v[i] = node;
    node->idx = i;
}

static void heap_up(yard_heap_t *h, size_t i)
{
    yard_heap_node_t *node = h->v[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h->v[parent]->key <= node->key)
            break;
        heap_set(h, i, h->v[parent]);
        i = parent;
    }
    heap_set(h, i, node);
}

static void heap_down(yard_heap_t *h, size_t i)
{
    yard_heap_node_t *node = h->v[i];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        uint64_t key = node->key;
        if (l < h->n && h->v[l]->key < key) {
            m = l;
            key = h->v[l]->key;
        }
        if (r < h->n && h->v[r]->key < key)
            m = r;
        if (m == i)
            break;
        heap_set(h, i, h->v[m]);
        i = m;
    }
    heap_set(h, i, node);
}

int yard_heap_push(yard_heap_t *h, yard_heap_node_t *node, uint64_t key)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        if (cap <= h->cap || cap > SIZE_MAX / sizeof *h->v)
            return -ENOMEM; /* the doubling would overflow */
        yard_heap_node_t **v = realloc(h->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        h->v = v;
        h->cap = cap;
    }
    node->key = key;
    heap_set(h, h->n++, node);
    heap_up(h, h->n - 1);
    return 0;
}

void yard_heap_remove(yard_heap_t *h, yard_heap_node_t *node)
{
    size_t i = node->idx;
    node->idx = YARD_HEAP_NONE;
    yard_heap_node_t *last = h->v[--h->n];
    if (i == h->n)
        return;
    heap_set(h, i, last);
    heap_down(h, i);
    heap_up(h, last->idx);
}

void yard_heap_free(yard_heap_t *h)
{
    free(h->v);
    h->v = NULL;
    h->n = h->cap = 0;
}
