/* Linux-only: futex. What a port uses instead: docs/portability.md. */
/* The kinds of switch yard-cswitch measures, all built on one shape: two
 * sides on one CPU pass a token back and forth; whoever receives the token
 * runs one work unit (a pass over its own array) and passes it back.
 *
 *   process-pipe      two processes, one byte over two pipes (the study's method)
 *   thread-pipe       the same between two threads of one process
 *   thread-futex      two threads handing a token through a futex word
 *   ucontext          two contexts on one thread, swapcontext
 *   ucontext-sigmask  the same, with the signal-mask save/restore of a
 *                     preemptive user-level thread library around it
 *
 * The single-side baseline of each kind does the same message passing (a
 * byte through a pipe to itself, a futex wake plus a wait that returns at
 * once) and the same work, so that (t_switch/2 - t_single)/N leaves only the
 * switch. For the user-level kinds the switch *is* the message, so their
 * baseline is the work alone. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cswitch.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define CS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CS_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define CS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CS_TSAN 1
#endif
#endif
#ifdef CS_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef CS_TSAN
#include <sanitizer/tsan_interface.h>
#endif

/* ------------------------------------------------------------------------ */
/* work unit and arrays                                                      */

/* noinline: the ping-pong and the baseline must run the very same code. The
 * empty asm with a memory clobber keeps the stores from being elided. */
__attribute__((noinline)) void yard_cswitch_work(double *a, size_t array_bytes,
                                                 size_t stride_bytes)
{
    if (stride_bytes == 0)
        return;
    for (size_t off = 0; off < array_bytes; off += stride_bytes)
        a[off / sizeof(double)] += 1.0;
    __asm__ volatile("" ::: "memory");
}

double *yard_cswitch_array_new(size_t bytes)
{
    size_t len = bytes ? bytes : sizeof(double);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    /* Touch every page now so that first-touch page faults land in no run. */
    memset(p, 0, len);
    return p;
}

void yard_cswitch_array_free(double *a, size_t bytes)
{
    if (a)
        munmap(a, bytes ? bytes : sizeof(double));
}

pid_t yard_cswitch_gettid(void)
{
    return (pid_t)syscall(SYS_gettid);
}

static void set_err(char *err, size_t len, const char *what)
{
    snprintf(err, len, "%s: %s", what, strerror(errno));
}

/* ------------------------------------------------------------------------ */
/* pipes: process-pipe and thread-pipe                                       */

#define TOKEN 'x'
#define QUIT 'q'

struct pipe_state {
    int to_partner[2];   /* measuring side writes, partner reads */
    int from_partner[2]; /* partner writes, measuring side reads */
    int self_pipe[2];    /* the single baseline's pipe to itself */
    pid_t child;         /* process-pipe */
    pthread_t thread;    /* thread-pipe */
    bool thread_started;
    size_t array_bytes, stride_bytes;
    atomic_int partner_tid; /* published by the partner thread */
};

static int read_byte(int fd, char *c)
{
    for (;;) {
        ssize_t r = read(fd, c, 1);
        if (r == 1)
            return 0;
        if (r == 0) {
            errno = EPIPE; /* the other side is gone */
            return -1;
        }
        if (errno != EINTR)
            return -1;
    }
}

static int write_byte(int fd, char c)
{
    for (;;) {
        ssize_t r = write(fd, &c, 1);
        if (r == 1)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

/* The partner side of both pipe kinds: wait for a token, work, answer.
 * Its array is its own, allocated here (after fork, for the process). */
static int pipe_partner_loop(struct pipe_state *s)
{
    double *arr = yard_cswitch_array_new(s->array_bytes);
    if (!arr)
        return -1;
    char c;
    int rc = 0;
    for (;;) {
        if (read_byte(s->to_partner[0], &c) != 0) {
            rc = -1;
            break;
        }
        if (c == QUIT)
            break;
        yard_cswitch_work(arr, s->array_bytes, s->stride_bytes);
        if (write_byte(s->from_partner[1], c) != 0) {
            rc = -1;
            break;
        }
    }
    yard_cswitch_array_free(arr, s->array_bytes);
    return rc;
}

static void *pipe_partner_thread(void *arg)
{
    struct pipe_state *s = arg;
    atomic_store(&s->partner_tid, (int)yard_cswitch_gettid());
    pipe_partner_loop(s);
    return NULL;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static void pipe_close_all(struct pipe_state *s)
{
    for (int i = 0; i < 2; i++) {
        close_fd(&s->to_partner[i]);
        close_fd(&s->from_partner[i]);
        close_fd(&s->self_pipe[i]);
    }
}

static int pipe_common_start(yard_cswitch_bench_t *b, bool process, char *err, size_t errlen)
{
    struct pipe_state *s = calloc(1, sizeof(*s));
    if (!s) {
        set_err(err, errlen, "calloc");
        return -1;
    }
    for (int i = 0; i < 2; i++)
        s->to_partner[i] = s->from_partner[i] = s->self_pipe[i] = -1;
    s->array_bytes = b->array_bytes;
    s->stride_bytes = b->stride_bytes;
    if (pipe2(s->to_partner, O_CLOEXEC) != 0 || pipe2(s->from_partner, O_CLOEXEC) != 0 ||
        pipe2(s->self_pipe, O_CLOEXEC) != 0) {
        set_err(err, errlen, "pipe2");
        goto err;
    }
    if (process) {
        /* Nothing buffered may be inherited: a child whose exit flushed
         * stdio (TSan's _exit does) would print our output twice. */
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            set_err(err, errlen, "fork");
            goto err;
        }
        if (pid == 0) {
            close(s->to_partner[1]);
            close(s->from_partner[0]);
            _exit(pipe_partner_loop(s) == 0 ? 0 : 1);
        }
        s->child = pid;
        b->partner_tid = pid;
        b->partner_pid = pid;
    } else {
        int e = pthread_create(&s->thread, NULL, pipe_partner_thread, s);
        if (e != 0) {
            errno = e;
            set_err(err, errlen, "pthread_create");
            goto err;
        }
        s->thread_started = true;
        /* Publishing the tid needs the partner to run once; it is pinned to
         * our CPU, so yield until it has. Bounded: a thread that never runs
         * would be a scheduler bug, not a race to paper over. */
        for (int i = 0; i < 1000000 && atomic_load(&s->partner_tid) == 0; i++)
            sched_yield();
        b->partner_tid = atomic_load(&s->partner_tid);
        b->partner_pid = getpid();
    }
    b->state = s;
    return 0;
err:
    pipe_close_all(s);
    free(s);
    return -1;
}

static int process_pipe_start(yard_cswitch_bench_t *b, char *err, size_t errlen)
{
    return pipe_common_start(b, true, err, errlen);
}

static int thread_pipe_start(yard_cswitch_bench_t *b, char *err, size_t errlen)
{
    return pipe_common_start(b, false, err, errlen);
}

static int pipe_pingpong(yard_cswitch_bench_t *b, uint64_t n, char *err, size_t errlen)
{
    struct pipe_state *s = b->state;
    char c;
    for (uint64_t i = 0; i < n; i++) {
        if (write_byte(s->to_partner[1], TOKEN) != 0) {
            set_err(err, errlen, "write to partner");
            return -1;
        }
        if (read_byte(s->from_partner[0], &c) != 0) {
            set_err(err, errlen, "read from partner");
            return -1;
        }
        yard_cswitch_work(b->array, b->array_bytes, b->stride_bytes);
    }
    return 0;
}

static int pipe_single(yard_cswitch_bench_t *b, uint64_t n, char *err, size_t errlen)
{
    struct pipe_state *s = b->state;
    char c;
    for (uint64_t i = 0; i < n; i++) {
        if (write_byte(s->self_pipe[1], TOKEN) != 0 || read_byte(s->self_pipe[0], &c) != 0) {
            set_err(err, errlen, "self pipe");
            return -1;
        }
        yard_cswitch_work(b->array, b->array_bytes, b->stride_bytes);
    }
    return 0;
}

static void pipe_stop(yard_cswitch_bench_t *b)
{
    struct pipe_state *s = b->state;
    if (!s)
        return;
    write_byte(s->to_partner[1], QUIT);
    if (s->child > 0) {
        while (waitpid(s->child, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (s->thread_started)
        pthread_join(s->thread, NULL);
    pipe_close_all(s);
    free(s);
    b->state = NULL;
}

const yard_cswitch_kind_t yard_cswitch_process_pipe = {
    .name = "process-pipe",
    .what = "two processes, one byte over two pipes (the study's method)",
    .kernel = true,
    .start = process_pipe_start,
    .pingpong = pipe_pingpong,
    .single = pipe_single,
    .stop = pipe_stop,
};

const yard_cswitch_kind_t yard_cswitch_thread_pipe = {
    .name = "thread-pipe",
    .what = "two threads of one process, the same pipe ping-pong",
    .kernel = true,
    .start = thread_pipe_start,
    .pingpong = pipe_pingpong,
    .single = pipe_single,
    .stop = pipe_stop,
};

/* ------------------------------------------------------------------------ */
/* thread-futex                                                              */

/* The token word: whose turn it is. */
enum { TURN_MAIN = 0, TURN_PARTNER = 1, TURN_QUIT = 2 };

struct futex_state {
    _Alignas(64) atomic_uint turn;
    _Alignas(64) atomic_uint self_word; /* the single baseline's word */
    pthread_t thread;
    size_t array_bytes, stride_bytes;
    atomic_int partner_tid;
};

static long futex(atomic_uint *word, int op, unsigned val)
{
    return syscall(SYS_futex, word, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
}

/* Sleeps until *word leaves `seen`; a wait that finds the word already
 * changed (EAGAIN) or is interrupted just re-checks. */
static void futex_wait_change(atomic_uint *word, unsigned seen)
{
    while (atomic_load_explicit(word, memory_order_acquire) == seen)
        futex(word, FUTEX_WAIT, seen);
}

static void pass_token(atomic_uint *word, unsigned to)
{
    atomic_store_explicit(word, to, memory_order_release);
    futex(word, FUTEX_WAKE, 1);
}

static void *futex_partner_thread(void *arg)
{
    struct futex_state *s = arg;
    atomic_store(&s->partner_tid, (int)yard_cswitch_gettid());
    double *arr = yard_cswitch_array_new(s->array_bytes);
    for (;;) {
        futex_wait_change(&s->turn, TURN_MAIN);
        if (atomic_load_explicit(&s->turn, memory_order_acquire) == TURN_QUIT)
            break;
        if (arr)
            yard_cswitch_work(arr, s->array_bytes, s->stride_bytes);
        pass_token(&s->turn, TURN_MAIN);
    }
    yard_cswitch_array_free(arr, s->array_bytes);
    return NULL;
}

static int futex_start(yard_cswitch_bench_t *b, char *err, size_t errlen)
{
    struct futex_state *s = aligned_alloc(64, sizeof(struct futex_state));
    if (!s) {
        set_err(err, errlen, "aligned_alloc");
        return -1;
    }
    memset(s, 0, sizeof(*s));
    atomic_init(&s->turn, TURN_MAIN);
    atomic_init(&s->self_word, TURN_MAIN);
    s->array_bytes = b->array_bytes;
    s->stride_bytes = b->stride_bytes;
    int e = pthread_create(&s->thread, NULL, futex_partner_thread, s);
    if (e != 0) {
        errno = e;
        set_err(err, errlen, "pthread_create");
        free(s);
        return -1;
    }
    for (int i = 0; i < 1000000 && atomic_load(&s->partner_tid) == 0; i++)
        sched_yield();
    b->partner_tid = atomic_load(&s->partner_tid);
    b->partner_pid = getpid();
    b->state = s;
    return 0;
}

static int futex_pingpong(yard_cswitch_bench_t *b, uint64_t n, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    struct futex_state *s = b->state;
    for (uint64_t i = 0; i < n; i++) {
        pass_token(&s->turn, TURN_PARTNER);
        futex_wait_change(&s->turn, TURN_PARTNER);
        yard_cswitch_work(b->array, b->array_bytes, b->stride_bytes);
    }
    return 0;
}

/* The same two system calls as one ping-pong step on the measuring side: a
 * wake (nobody waits) and a wait that returns EAGAIN at once because the
 * word no longer holds the value it waits on. */
static int futex_single(yard_cswitch_bench_t *b, uint64_t n, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    struct futex_state *s = b->state;
    for (uint64_t i = 0; i < n; i++) {
        pass_token(&s->self_word, TURN_PARTNER);
        futex(&s->self_word, FUTEX_WAIT, TURN_MAIN); /* EAGAIN: the word is TURN_PARTNER */
        atomic_store_explicit(&s->self_word, TURN_MAIN, memory_order_relaxed);
        yard_cswitch_work(b->array, b->array_bytes, b->stride_bytes);
    }
    return 0;
}

static void futex_stop(yard_cswitch_bench_t *b)
{
    struct futex_state *s = b->state;
    if (!s)
        return;
    pass_token(&s->turn, TURN_QUIT);
    pthread_join(s->thread, NULL);
    free(s);
    b->state = NULL;
}

const yard_cswitch_kind_t yard_cswitch_thread_futex = {
    .name = "thread-futex",
    .what = "two threads, a token through futex wait/wake on one word",
    .kernel = true,
    .start = futex_start,
    .pingpong = futex_pingpong,
    .single = futex_single,
    .stop = futex_stop,
};

/* ------------------------------------------------------------------------ */
/* ucontext and ucontext-sigmask                                             */

/* Two contexts on the measuring thread: its own (main) and one made on a
 * private stack (partner). Sanitizers must hear of every stack switch:
 * ASan through start/finish_switch_fiber, TSan through fibers. */

#define UCTX_STACK (256u * 1024u)

struct uctx {
    ucontext_t uc;
    void *stack_lo;
    size_t stack_size;
    void *asan_fake;
    void *tsan_fiber;
};

struct uctx_state {
    struct uctx main, partner;
    void *stack_map;
    bool sigmask;
    bool quit;
    size_t array_bytes, stride_bytes;
    double *partner_array;
    sigset_t timer_signals;
};

/* Set once per switch; the two contexts run on one thread, so a plain
 * static is enough to hand the stack bounds to the arriving side. */
static struct uctx_state *uctx_current;

static void uctx_arrived(struct uctx *arrived, struct uctx *from)
{
#ifdef CS_ASAN
    const void *lo = NULL;
    size_t size = 0;
    __sanitizer_finish_switch_fiber(arrived->asan_fake, &lo, &size);
    if (from && !from->stack_lo) { /* the thread's own stack: learn its bounds */
        from->stack_lo = (void *)lo;
        from->stack_size = size;
    }
#else
    (void)arrived;
    (void)from;
#endif
}

/* The yield of a preemptive user-level thread library: keep the timer
 * signals that drive preemption out while the scheduler switches stacks
 * (sigprocmask), switch (swapcontext, which itself saves and restores the
 * whole signal mask with one more system call), then restore. */
static void uctx_swap(struct uctx_state *s, struct uctx *from, struct uctx *to, bool final)
{
    sigset_t old;
    if (s->sigmask)
        sigprocmask(SIG_BLOCK, &s->timer_signals, &old);
#ifdef CS_ASAN
    __sanitizer_start_switch_fiber(final ? NULL : &from->asan_fake, to->stack_lo, to->stack_size);
#endif
#ifdef CS_TSAN
    __tsan_switch_to_fiber(to->tsan_fiber, 0);
#endif
    (void)final;
    swapcontext(&from->uc, &to->uc);
    uctx_arrived(from, to);
    if (s->sigmask)
        sigprocmask(SIG_SETMASK, &old, NULL);
}

static void uctx_partner_entry(void)
{
    struct uctx_state *s = uctx_current;
    uctx_arrived(&s->partner, &s->main);
    while (!s->quit) {
        yard_cswitch_work(s->partner_array, s->array_bytes, s->stride_bytes);
        uctx_swap(s, &s->partner, &s->main, false);
    }
    uctx_swap(s, &s->partner, &s->main, true);
    abort(); /* never resumed */
}

static int uctx_common_start(yard_cswitch_bench_t *b, bool sigmask, char *err, size_t errlen)
{
    struct uctx_state *s = calloc(1, sizeof(*s));
    if (!s) {
        set_err(err, errlen, "calloc");
        return -1;
    }
    s->sigmask = sigmask;
    s->array_bytes = b->array_bytes;
    s->stride_bytes = b->stride_bytes;
    sigemptyset(&s->timer_signals);
    sigaddset(&s->timer_signals, SIGALRM);
    sigaddset(&s->timer_signals, SIGVTALRM);
    sigaddset(&s->timer_signals, SIGPROF);
    s->partner_array = yard_cswitch_array_new(b->array_bytes);
    s->stack_map = mmap(NULL, UCTX_STACK, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (!s->partner_array || s->stack_map == MAP_FAILED) {
        set_err(err, errlen, "mmap");
        if (s->stack_map != MAP_FAILED && s->stack_map)
            munmap(s->stack_map, UCTX_STACK);
        yard_cswitch_array_free(s->partner_array, b->array_bytes);
        free(s);
        return -1;
    }
    if (getcontext(&s->partner.uc) != 0) {
        set_err(err, errlen, "getcontext");
        munmap(s->stack_map, UCTX_STACK);
        yard_cswitch_array_free(s->partner_array, b->array_bytes);
        free(s);
        return -1;
    }
    s->partner.uc.uc_stack.ss_sp = s->stack_map;
    s->partner.uc.uc_stack.ss_size = UCTX_STACK;
    s->partner.uc.uc_link = NULL;
    s->partner.stack_lo = s->stack_map;
    s->partner.stack_size = UCTX_STACK;
    makecontext(&s->partner.uc, uctx_partner_entry, 0);
#ifdef CS_TSAN
    s->main.tsan_fiber = __tsan_get_current_fiber();
    s->partner.tsan_fiber = __tsan_create_fiber(0);
#endif
    uctx_current = s;
    b->partner_tid = 0;
    b->partner_pid = 0;
    b->state = s;
    return 0;
}

static int ucontext_start(yard_cswitch_bench_t *b, char *err, size_t errlen)
{
    return uctx_common_start(b, false, err, errlen);
}

static int ucontext_sigmask_start(yard_cswitch_bench_t *b, char *err, size_t errlen)
{
    return uctx_common_start(b, true, err, errlen);
}

static int uctx_pingpong(yard_cswitch_bench_t *b, uint64_t n, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    struct uctx_state *s = b->state;
    for (uint64_t i = 0; i < n; i++) {
        uctx_swap(s, &s->main, &s->partner, false);
        yard_cswitch_work(b->array, b->array_bytes, b->stride_bytes);
    }
    return 0;
}

/* For a user-level switch the switch is the message: the baseline is the
 * work alone. */
static int work_only_single(yard_cswitch_bench_t *b, uint64_t n, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    for (uint64_t i = 0; i < n; i++)
        yard_cswitch_work(b->array, b->array_bytes, b->stride_bytes);
    return 0;
}

static void uctx_stop(yard_cswitch_bench_t *b)
{
    struct uctx_state *s = b->state;
    if (!s)
        return;
    /* Let the partner leave through its final switch, so the sanitizers see
     * its fiber end instead of a stack vanishing under them. */
    s->quit = true;
    uctx_swap(s, &s->main, &s->partner, false);
#ifdef CS_TSAN
    __tsan_destroy_fiber(s->partner.tsan_fiber);
#endif
    munmap(s->stack_map, UCTX_STACK);
    yard_cswitch_array_free(s->partner_array, s->array_bytes);
    uctx_current = NULL;
    free(s);
    b->state = NULL;
}

const yard_cswitch_kind_t yard_cswitch_ucontext = {
    .name = "ucontext",
    .what = "two contexts on one thread, glibc swapcontext (1 syscall)",
    .kernel = false,
    .start = ucontext_start,
    .pingpong = uctx_pingpong,
    .single = work_only_single,
    .stop = uctx_stop,
};

const yard_cswitch_kind_t yard_cswitch_ucontext_sigmask = {
    .name = "ucontext-sigmask",
    .what = "swapcontext inside sigprocmask block/restore (3 syscalls):\n                                         the study's user-level thread library",
    .kernel = false,
    .start = ucontext_sigmask_start,
    .pingpong = uctx_pingpong,
    .single = work_only_single,
    .stop = uctx_stop,
};
