/* What the coroutine runtime's tests (tests/unit/test_coro*.c) share: the
 * scale of their counts under a sanitizer, the clock, and a plain thread's
 * wait for a coroutine's cue. */
#ifndef YARD_TESTS_CORO_TEST_H
#define YARD_TESTS_CORO_TEST_H

#include "yard/coro.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

/* Sanitized builds are several times slower: scale the counts down. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SCALE 10
#else
#define SCALE 1
#endif

static inline uint64_t now_ns(void)
{
    return yard_coro_now_ns();
}

/* For a plain thread that acts on a coroutine's cue: until *stage is want,
 * or 5 s (the assertion after it then says what went wrong). */
static inline void wait_stage(atomic_int *stage, int want)
{
    uint64_t t0 = now_ns();
    while (atomic_load(stage) != want && now_ns() - t0 < 5000000000ull)
        usleep(1000);
}

#endif
