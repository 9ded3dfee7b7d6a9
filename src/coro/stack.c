/* Coroutine stacks: one anonymous mapping each, with a PROT_NONE guard page
 * at the low end (stacks grow down) so that an overflow faults right away.
 * Each guarded stack costs two kernel VMAs, so vm.max_map_count (65530 by
 * default) bounds the number of live guarded stacks to about 32,000; the
 * scheduler can be told to skip the guard for larger populations. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE, MAP_STACK */

#include "yard/coro.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define YARD_CORO_VALGRIND 1
#endif
#endif

int yard_coro_stack_alloc(yard_coro_stack_t *st, size_t size, bool guard)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (size == 0)
        size = YARD_CORO_DEFAULT_STACK;
    size = (size + page - 1) & ~(page - 1);
    size_t guard_size = guard ? page : 0;
    size_t map_size = size + guard_size;
    /* MAP_NORESERVE: a stack is mostly untouched address space; do not
     * charge its full size against overcommit accounting. */
    void *base = mmap(NULL, map_size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (base == MAP_FAILED)
        return -errno;
    if (guard && mprotect(base, guard_size, PROT_NONE) != 0) {
        int err = errno;
        munmap(base, map_size);
        return -err;
    }
    st->base = base;
    st->map_size = map_size;
    st->lo = (char *)base + guard_size;
    st->size = size;
#ifdef YARD_CORO_VALGRIND
    st->valgrind_id = VALGRIND_STACK_REGISTER(st->lo, (char *)st->lo + size);
#else
    st->valgrind_id = 0;
#endif
    return 0;
}

void yard_coro_stack_free(yard_coro_stack_t *st)
{
    if (!st->base)
        return;
#ifdef YARD_CORO_VALGRIND
    VALGRIND_STACK_DEREGISTER(st->valgrind_id);
#endif
    munmap(st->base, st->map_size);
    st->base = NULL;
}
