/* Context creation and switching: the native assembly backend
 * (ctx_x86_64.S, ctx_aarch64.S) and the portable ucontext one, both wrapped
 * with the sanitizer fiber annotations.
 *
 * AddressSanitizer must be told before every switch which stack we are going
 * to (__sanitizer_start_switch_fiber) and, once there, that we arrived
 * (__sanitizer_finish_switch_fiber), or it reports false stack-buffer errors
 * and leaks fake stacks. ThreadSanitizer keeps a shadow call stack and
 * vector clock per fiber (__tsan_switch_to_fiber). Without sanitizers the
 * wrappers reduce to a tail call into the assembly. */
#include "yard/coro.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sanitizer.h"

#ifdef YARD_CORO_ASAN
/* The stack bounds of the context we are switching away from are only known
 * to ASan (the thread's own stack was never "made"): the arriving side learns
 * them from __sanitizer_finish_switch_fiber and stores them into the departed
 * context through this thread-local pointer. */
struct asan_bounds {
    void **lo;
    size_t *size;
};
static __thread struct asan_bounds tls_asan_from;

/* Not inlined: the caller may resume on another thread, and a cached address
 * of the thread-local would then point at the old thread's copy. */
__attribute__((noinline)) static struct asan_bounds *asan_from_slot(void)
{
    struct asan_bounds *p = &tls_asan_from;
    __asm__ volatile("" : "+r"(p));
    return p;
}

static void asan_arrived(void *fake_stack)
{
    const void *lo = NULL;
    size_t size = 0;
    __sanitizer_finish_switch_fiber(fake_stack, &lo, &size);
    struct asan_bounds *slot = asan_from_slot();
    if (slot->lo && !*slot->lo) {
        *slot->lo = (void *)lo;
        *slot->size = size;
    }
}
#endif

/* Annotations shared by both context kinds (same field names). */
#define BEFORE_SWITCH(from, to, final)                                                             \
    do {                                                                                           \
        ASAN_BEFORE(from, to, final);                                                              \
        TSAN_BEFORE(from, to);                                                                     \
    } while (0)

#ifdef YARD_CORO_ASAN
#define ASAN_BEFORE(from, to, final)                                                               \
    do {                                                                                           \
        struct asan_bounds *s_ = asan_from_slot();                                                 \
        s_->lo = &(from)->stack_lo;                                                                \
        s_->size = &(from)->stack_size;                                                            \
        __sanitizer_start_switch_fiber((final) ? NULL : &(from)->asan_fake_stack, (to)->stack_lo,  \
                                       (to)->stack_size);                                          \
    } while (0)
#define AFTER_SWITCH(from) asan_arrived((from)->asan_fake_stack)
#else
#define ASAN_BEFORE(from, to, final) ((void)0)
#define AFTER_SWITCH(from) ((void)0)
#endif

#ifdef YARD_CORO_TSAN
#define TSAN_BEFORE(from, to)                                                                      \
    do {                                                                                           \
        if (!(from)->tsan_fiber)                                                                   \
            (from)->tsan_fiber = __tsan_get_current_fiber();                                       \
        __tsan_switch_to_fiber((to)->tsan_fiber, 0);                                               \
    } while (0)
#else
#define TSAN_BEFORE(from, to) ((void)0)
#endif

static void fiber_created(void **tsan_fiber, bool *owned, void *stack, size_t size)
{
#ifdef YARD_CORO_TSAN
    if (*tsan_fiber && *owned)
        __tsan_destroy_fiber(*tsan_fiber);
    *tsan_fiber = __tsan_create_fiber(0);
#endif
    *owned = true;
#ifdef YARD_CORO_ASAN
    /* A reused stack may still carry the poisoned redzones of the frames of
     * the coroutine that ran on it before. */
    ASAN_UNPOISON_MEMORY_REGION(stack, size);
#else
    (void)stack;
    (void)size;
#endif
}

/* Only fibers made by ctx_make are destroyed; a thread's own fiber, picked
 * up on its first switch, belongs to the thread. */
static void fiber_destroyed(void **tsan_fiber, bool *owned)
{
#ifdef YARD_CORO_TSAN
    if (*tsan_fiber && *owned)
        __tsan_destroy_fiber(*tsan_fiber);
#endif
    *tsan_fiber = NULL;
    *owned = false;
}

static _Noreturn void entry_returned(void)
{
    fprintf(stderr, "yard_coro: a context's entry function returned; it must switch away\n");
    abort();
}

/* ------------------------------------------------------------------------ */
/* ucontext backend                                                          */

static void uctx_entry(unsigned lo, unsigned hi)
{
    /* makecontext passes int-sized arguments: the pointer comes in two
     * halves (hi is 0 where pointers are 32 bits wide). */
    yard_coro_uctx_t *ctx = (yard_coro_uctx_t *)(uintptr_t)(((uint64_t)hi << 32) | lo);
#ifdef YARD_CORO_ASAN
    asan_arrived(NULL);
#endif
    ctx->fn(ctx->arg);
    entry_returned();
}

void yard_coro_uctx_make(yard_coro_uctx_t *ctx, void *stack, size_t size, void (*fn)(void *),
                         void *arg)
{
    void *fiber = ctx->tsan_fiber;
    bool owned = ctx->tsan_fiber_owned;
    memset(ctx, 0, sizeof(*ctx));
    ctx->tsan_fiber = fiber;
    ctx->tsan_fiber_owned = owned;
    fiber_created(&ctx->tsan_fiber, &ctx->tsan_fiber_owned, stack, size);
    ctx->stack_lo = stack;
    ctx->stack_size = size;
    ctx->fn = fn;
    ctx->arg = arg;
    if (getcontext(&ctx->uc) != 0) {
        perror("yard_coro: getcontext");
        abort();
    }
    ctx->uc.uc_stack.ss_sp = stack;
    ctx->uc.uc_stack.ss_size = size;
    ctx->uc.uc_link = NULL;
    uintptr_t p = (uintptr_t)ctx;
    makecontext(&ctx->uc, (void (*)(void))uctx_entry, 2, (unsigned)(p & 0xffffffffu),
                (unsigned)((uint64_t)p >> 32));
}

void yard_coro_uctx_switch(yard_coro_uctx_t *from, yard_coro_uctx_t *to)
{
    BEFORE_SWITCH(from, to, 0);
    swapcontext(&from->uc, &to->uc);
    AFTER_SWITCH(from);
}

void yard_coro_uctx_switch_final(yard_coro_uctx_t *from, yard_coro_uctx_t *to)
{
    BEFORE_SWITCH(from, to, 1);
    swapcontext(&from->uc, &to->uc);
    entry_returned(); /* a final context is never resumed */
}

void yard_coro_uctx_destroy(yard_coro_uctx_t *ctx)
{
    fiber_destroyed(&ctx->tsan_fiber, &ctx->tsan_fiber_owned);
}

/* ------------------------------------------------------------------------ */
/* native backend, or the ucontext one under the native names                */

#ifdef YARD_CORO_CTX_IS_UCONTEXT

void yard_coro_ctx_make(yard_coro_ctx_t *ctx, void *stack, size_t size, void (*fn)(void *),
                        void *arg)
{
    yard_coro_uctx_make(ctx, stack, size, fn, arg);
}
void yard_coro_ctx_switch(yard_coro_ctx_t *from, yard_coro_ctx_t *to)
{
    yard_coro_uctx_switch(from, to);
}
void yard_coro_ctx_switch_final(yard_coro_ctx_t *from, yard_coro_ctx_t *to)
{
    yard_coro_uctx_switch_final(from, to);
}
void yard_coro_ctx_destroy(yard_coro_ctx_t *ctx)
{
    yard_coro_uctx_destroy(ctx);
}
const char *yard_coro_ctx_backend(void)
{
    return "ucontext";
}

#else

void yard_coro__swap(void **save_sp, void *new_sp);
void yard_coro__trampoline(void);
void yard_coro__ctx_entry(yard_coro_ctx_t *ctx, void (*fn)(void *), void *arg);

/* Called by the trampoline on the new stack. */
void yard_coro__ctx_entry(yard_coro_ctx_t *ctx, void (*fn)(void *), void *arg)
{
    (void)ctx;
#ifdef YARD_CORO_ASAN
    asan_arrived(NULL);
#endif
    fn(arg);
    entry_returned();
}

void yard_coro_ctx_make(yard_coro_ctx_t *ctx, void *stack, size_t size, void (*fn)(void *),
                        void *arg)
{
    fiber_created(&ctx->tsan_fiber, &ctx->tsan_fiber_owned, stack, size);
    ctx->stack_lo = stack;
    ctx->stack_size = size;
    ctx->asan_fake_stack = NULL;
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
#if defined(__x86_64__)
    /* Frame popped by yard_coro__swap, lowest address first:
     * [mxcsr|fpucw] r15 r14 r13 r12 rbx rbp rip=trampoline, then a zero
     * "return address" so unwinders stop. The trampoline's `call` needs
     * rsp % 16 == 0, i.e. rsp just after `ret` popped rip; so rip sits at
     * top - 24 and the fake return address at top - 16. */
    uint64_t *sp = (uint64_t *)(top - 24);
    sp[1] = 0;                               /* fake return address of the trampoline */
    sp[0] = (uint64_t)yard_coro__trampoline; /* rip */
    *--sp = 0;                               /* rbp */
    *--sp = 0;                               /* rbx */
    *--sp = (uint64_t)fn;                    /* r12 */
    *--sp = (uint64_t)arg;                   /* r13 */
    *--sp = (uint64_t)ctx;                   /* r14 */
    *--sp = 0;                               /* r15 */
#ifdef YARD_CORO_SAVE_FPU
    *--sp = 0x1f80ull | (0x037full << 32); /* default MXCSR, x87 control word */
#endif
    ctx->sp = sp;
#elif defined(__aarch64__)
    uint64_t *sp = (uint64_t *)(top - 176);
    memset(sp, 0, 176);
    sp[0] = (uint64_t)ctx;                   /* x19 */
    sp[1] = (uint64_t)fn;                    /* x20 */
    sp[2] = (uint64_t)arg;                   /* x21 */
    sp[10] = 0;                              /* x29 */
    sp[11] = (uint64_t)yard_coro__trampoline; /* x30 */
#ifdef YARD_CORO_SAVE_FPU
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    sp[20] = fpcr;
#endif
    ctx->sp = sp;
#endif
}

void yard_coro_ctx_switch(yard_coro_ctx_t *from, yard_coro_ctx_t *to)
{
    BEFORE_SWITCH(from, to, 0);
    yard_coro__swap(&from->sp, to->sp);
    AFTER_SWITCH(from);
}

void yard_coro_ctx_switch_final(yard_coro_ctx_t *from, yard_coro_ctx_t *to)
{
    BEFORE_SWITCH(from, to, 1);
    yard_coro__swap(&from->sp, to->sp);
    entry_returned();
}

void yard_coro_ctx_destroy(yard_coro_ctx_t *ctx)
{
    fiber_destroyed(&ctx->tsan_fiber, &ctx->tsan_fiber_owned);
}

const char *yard_coro_ctx_backend(void)
{
#if defined(__x86_64__)
    return "x86_64-asm";
#else
    return "aarch64-asm";
#endif
}

#endif
