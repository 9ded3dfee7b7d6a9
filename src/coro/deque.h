/* A Chase-Lev work-stealing deque (Chase & Lev, SPAA 2005) in C11 atomics,
 * following the weak-memory version of Le, Pop, Cohen and Zappa Nardelli
 * (PPoPP 2013), with its two seq_cst fences expressed as seq_cst accesses
 * to top and bottom (GCC's ThreadSanitizer does not model standalone
 * fences, and the cost on x86 is the same single locked instruction).
 *
 * The owner pushes and pops at the bottom; thieves take from the top. The
 * ring grows by doubling; old rings are kept until the deque is destroyed
 * because a slow thief may still read from one. */
#ifndef YARD_CORO_DEQUE_H
#define YARD_CORO_DEQUE_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

struct deque_ring {
    long long cap; /* power of two */
    struct deque_ring *older;
    _Atomic(void *) slot[];
};

struct deque {
    _Alignas(64) _Atomic(long long) top;
    _Alignas(64) _Atomic(long long) bottom;
    _Atomic(struct deque_ring *) ring;
};

static inline struct deque_ring *deque_ring_new(long long cap)
{
    struct deque_ring *r = malloc(sizeof(*r) + (size_t)cap * sizeof(r->slot[0]));
    if (!r)
        return NULL;
    r->cap = cap;
    r->older = NULL;
    for (long long i = 0; i < cap; i++)
        atomic_init(&r->slot[i], NULL);
    return r;
}

static inline int deque_init(struct deque *d, long long cap)
{
    struct deque_ring *r = deque_ring_new(cap);
    if (!r)
        return -1;
    atomic_init(&d->top, 0);
    atomic_init(&d->bottom, 0);
    atomic_init(&d->ring, r);
    return 0;
}

static inline void deque_destroy(struct deque *d)
{
    struct deque_ring *r = atomic_load_explicit(&d->ring, memory_order_relaxed);
    while (r) {
        struct deque_ring *older = r->older;
        free(r);
        r = older;
    }
}

/* Owner only. Returns -1 when the ring cannot grow (out of memory). */
static inline int deque_push(struct deque *d, void *x)
{
    long long b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
    long long t = atomic_load_explicit(&d->top, memory_order_acquire);
    struct deque_ring *r = atomic_load_explicit(&d->ring, memory_order_relaxed);
    if (b - t > r->cap - 1) {
        struct deque_ring *bigger = deque_ring_new(r->cap * 2);
        if (!bigger)
            return -1;
        for (long long i = t; i < b; i++)
            atomic_store_explicit(&bigger->slot[i & (bigger->cap - 1)],
                                  atomic_load_explicit(&r->slot[i & (r->cap - 1)],
                                                       memory_order_relaxed),
                                  memory_order_relaxed);
        bigger->older = r;
        atomic_store_explicit(&d->ring, bigger, memory_order_release);
        r = bigger;
    }
    atomic_store_explicit(&r->slot[b & (r->cap - 1)], x, memory_order_relaxed);
    /* Release: a thief that sees the new bottom also sees the slot and
     * everything the owner wrote into *x before pushing it. */
    atomic_store_explicit(&d->bottom, b + 1, memory_order_release);
    return 0;
}

/* Owner only. NULL when empty. */
static inline void *deque_pop(struct deque *d)
{
    /* Fast empty check without the fence-like seq_cst store: bottom is only
     * written by the owner, and top only grows, so a top already >= bottom
     * (even a stale one) proves the deque is empty. */
    if (atomic_load_explicit(&d->bottom, memory_order_relaxed) <=
        atomic_load_explicit(&d->top, memory_order_relaxed))
        return NULL;
    long long b = atomic_load_explicit(&d->bottom, memory_order_relaxed) - 1;
    struct deque_ring *r = atomic_load_explicit(&d->ring, memory_order_relaxed);
    /* seq_cst store then seq_cst load: the owner's claim on slot b must be
     * visible before it reads top, or owner and thief could both take it. */
    atomic_store_explicit(&d->bottom, b, memory_order_seq_cst);
#if !(defined(__x86_64__) || defined(__i386__))
    /* C11 orders the two seq_cst accesses, and so does ARMv8 hardware (stlr
     * then ldar), but qemu-user running an AArch64 binary on an x86 host
     * does not: it puts a host barrier before a release store and after an
     * acquire load, none between them, and x86 lets the load pass the
     * store. test_coro's deque stress test then saw an item taken twice, 8
     * times in 20 under qemu-aarch64. An explicit fence (dmb ish, an
     * mfence under qemu) orders them everywhere. */
    atomic_thread_fence(memory_order_seq_cst);
#endif
    long long t = atomic_load_explicit(&d->top, memory_order_seq_cst);
    if (t > b) {
        atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
        return NULL;
    }
    void *x = atomic_load_explicit(&r->slot[b & (r->cap - 1)], memory_order_relaxed);
    if (t == b) {
        /* Last item: race the thieves for it through top. */
        if (!atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1, memory_order_seq_cst,
                                                     memory_order_relaxed))
            x = NULL;
        atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
    }
    return x;
}

/* Any thread. NULL when empty or when another thief won the race. */
static inline void *deque_steal(struct deque *d)
{
    long long t = atomic_load_explicit(&d->top, memory_order_seq_cst);
    long long b = atomic_load_explicit(&d->bottom, memory_order_seq_cst);
    if (t >= b)
        return NULL;
    struct deque_ring *r = atomic_load_explicit(&d->ring, memory_order_acquire);
    void *x = atomic_load_explicit(&r->slot[t & (r->cap - 1)], memory_order_relaxed);
    if (!atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1, memory_order_seq_cst,
                                                 memory_order_relaxed))
        return NULL;
    return x;
}

/* Approximate size, for "is there work anywhere" checks. */
static inline long long deque_size(struct deque *d)
{
    long long b = atomic_load_explicit(&d->bottom, memory_order_seq_cst);
    long long t = atomic_load_explicit(&d->top, memory_order_seq_cst);
    return b > t ? b - t : 0;
}

#endif
