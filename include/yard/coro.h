/* The Switchyard coroutine runtime: an M:N scheduler of stackful coroutines
 * over a hand-written context switch, with a work-stealing scheduler, an
 * epoll netpoller, timers, an offload pool for calls that must block, parking
 * synchronisation (wait queue, mutex, channel) and Eve-style tasks that
 * declare read/full permissions on shared objects.
 *
 * Conventions: functions returning int give 0 or a negative errno. Deadlines
 * are absolute CLOCK_MONOTONIC times in nanoseconds (yard_coro_now_ns()); a
 * deadline of 0 means "no deadline". Calls that park ("may park") must be made
 * from a coroutine running on the scheduler. See docs/coro.md. */
#ifndef YARD_CORO_H
#define YARD_CORO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <ucontext.h>

/* ---------------------------------------------------------------------------
 * Low-level context switch, usable without the scheduler (yard-cswitch and
 * yard-corobench measure it directly). A context is made on a caller-provided
 * stack; switching saves the callee-saved registers of `from` and resumes `to`.
 * The entry function must never return: it ends by switching away for good
 * (use yard_coro_ctx_switch_final so sanitizers can release the fiber).
 * A context that was never made (the thread's own stack) is a valid `from`.
 * ------------------------------------------------------------------------- */

/* ucontext-based context: always built, so the two can be compared. */
typedef struct yard_coro_uctx {
    ucontext_t uc;
    void *stack_lo; /* stack bounds, for the sanitizer fiber annotations */
    size_t stack_size;
    void *tsan_fiber;
    bool tsan_fiber_owned; /* created by make, not the thread's own */
    void *asan_fake_stack;
    void (*fn)(void *);
    void *arg;
} yard_coro_uctx_t;

void yard_coro_uctx_make(yard_coro_uctx_t *ctx, void *stack, size_t size, void (*fn)(void *),
                         void *arg);
void yard_coro_uctx_switch(yard_coro_uctx_t *from, yard_coro_uctx_t *to);
void yard_coro_uctx_switch_final(yard_coro_uctx_t *from, yard_coro_uctx_t *to);
/* Releases what make allocated for the sanitizers (not the stack). */
void yard_coro_uctx_destroy(yard_coro_uctx_t *ctx);

#if defined(YARD_CORO_UCONTEXT) || !(defined(__x86_64__) || defined(__aarch64__))
#define YARD_CORO_CTX_IS_UCONTEXT 1
typedef yard_coro_uctx_t yard_coro_ctx_t;
#else
/* Native context: the saved stack pointer; every callee-saved register and
 * the return address live on the suspended stack itself. */
typedef struct yard_coro_ctx {
    void *sp;
    void *stack_lo;
    size_t stack_size;
    void *tsan_fiber;
    bool tsan_fiber_owned;
    void *asan_fake_stack;
} yard_coro_ctx_t;
#endif

void yard_coro_ctx_make(yard_coro_ctx_t *ctx, void *stack, size_t size, void (*fn)(void *),
                        void *arg);
void yard_coro_ctx_switch(yard_coro_ctx_t *from, yard_coro_ctx_t *to);
/* The last switch away from a context that will never be resumed. */
void yard_coro_ctx_switch_final(yard_coro_ctx_t *from, yard_coro_ctx_t *to);
void yard_coro_ctx_destroy(yard_coro_ctx_t *ctx);
/* "x86_64-asm", "aarch64-asm" or "ucontext". */
const char *yard_coro_ctx_backend(void);

/* ---------------------------------------------------------------------------
 * Stacks: mmap'd, with a PROT_NONE guard page below the usable area so an
 * overflow faults (SIGSEGV) instead of overwriting a neighbour.
 * ------------------------------------------------------------------------- */

/* Default usable stack size; four times larger under AddressSanitizer,
 * whose frames are bigger. Virtual memory: only touched pages cost RSS. */
#define YARD_CORO_DEFAULT_STACK (64u * 1024u)

typedef struct yard_coro_stack {
    void *base; /* start of the mapping (the guard page when guarded) */
    size_t map_size;
    void *lo; /* usable area [lo, lo + size) */
    size_t size;
    unsigned valgrind_id;
} yard_coro_stack_t;

/* size is rounded up to whole pages; guard adds one inaccessible page. */
int yard_coro_stack_alloc(yard_coro_stack_t *st, size_t size, bool guard);
void yard_coro_stack_free(yard_coro_stack_t *st);

/* ---------------------------------------------------------------------------
 * Scheduler
 * ------------------------------------------------------------------------- */

typedef struct yard_coro yard_coro_t;

typedef struct yard_coro_opts {
    unsigned workers;         /* 0: number of CPUs in the affinity mask */
    size_t stack_size;        /* 0: YARD_CORO_DEFAULT_STACK */
    unsigned offload_threads; /* 0: 2 */
    bool no_stack_guard;      /* true: no guard page (only for huge counts, see docs) */
} yard_coro_opts_t;

/* Starts the scheduler (the calling thread becomes worker 0), runs main_fn(arg)
 * as the first coroutine and returns once it has returned. Coroutines still
 * parked at that point are abandoned and their memory released, as when a Go
 * program's main returns. Only one scheduler runs at a time (-EBUSY). */
int yard_coro_run(const yard_coro_opts_t *opts, void (*main_fn)(void *), void *arg);

/* Spawns a coroutine; its stack is taken when it first runs, so a spawned but
 * not yet started coroutine costs only its small descriptor. From a thread
 * that is not a worker, the coroutine goes to the global queue. spawn returns
 * a handle that must be joined exactly once; go detaches it. NULL/-ENOMEM
 * on allocation failure. */
yard_coro_t *yard_coro_spawn(void (*fn)(void *), void *arg);
int yard_coro_go(void (*fn)(void *), void *arg);
/* Waits for the coroutine to finish and releases the handle. May park. */
void yard_coro_join(yard_coro_t *c);

yard_coro_t *yard_coro_self(void); /* NULL outside a coroutine */
int yard_coro_worker_id(void);     /* -1 outside a worker thread */
void yard_coro_yield(void);
uint64_t yard_coro_now_ns(void);
void yard_coro_sleep_ns(uint64_t ns);
void yard_coro_sleep_until(uint64_t deadline_ns);

/* Counters for benchmarks and tests (monotonic, approximate under races). */
typedef struct yard_coro_stats {
    uint64_t spawned, finished, steals, parks, futex_sleeps, stacks_mapped;
    uint64_t netpoll_blocks; /* sleeps of a worker in the netpoller */
    uint64_t inlined;        /* joined before they started: run on the joiner's stack */
} yard_coro_stats_t;
void yard_coro_get_stats(yard_coro_stats_t *out);

/* ---------------------------------------------------------------------------
 * Netpoller. Any fd used here is made non-blocking and registered with epoll
 * (edge-triggered) on first use; close it with yard_coro_close so a reused fd
 * number does not inherit its registration.
 * ------------------------------------------------------------------------- */

#define YARD_CORO_IN 1u
#define YARD_CORO_OUT 2u

/* Parks until fd is ready for events (YARD_CORO_IN/OUT), or the deadline.
 * Returns 0 (ready, possibly spuriously: retry the call), -ETIMEDOUT, -EBADF
 * (fd closed with yard_coro_close meanwhile). May park. */
int yard_coro_wait_fd(int fd, unsigned events, uint64_t deadline_ns);
/* The same for two fds at once (each with one direction): returns 0 when
 * either may be ready (callers try both), -ETIMEDOUT or -EBADF. */
int yard_coro_wait_fd2(int a, unsigned events_a, int b, unsigned events_b, uint64_t deadline_ns);
/* Registers fd now instead of on its first wait, so that the first wait
 * parks at once rather than returning for a readiness it cannot know. */
int yard_coro_register_fd(int fd);
/* Forgets a readiness edge of fd in the direction of events that no wait
 * has consumed. Call it right before a read (or write) that will drain the
 * fd: the next wait then parks until new data arrives instead of returning
 * at once for data this call takes. A read that returns less than it asked
 * for has drained a stream socket, so the caller can wait without another
 * read (edge-triggered readiness is re-armed by the kernel) -- unless this
 * returns true: the peer has closed (or the socket failed, or fd is not
 * registered), no edge will come again, and only a read says when the end
 * is reached. */
bool yard_coro_fd_consume(int fd, unsigned events);
/* read/write that park on EAGAIN; return like the syscalls but with a
 * negative errno instead of -1/errno (-ETIMEDOUT when the deadline passes).
 * yard_coro_write writes everything unless an error occurs. */
ssize_t yard_coro_read(int fd, void *buf, size_t len, uint64_t deadline_ns);
ssize_t yard_coro_write(int fd, const void *buf, size_t len, uint64_t deadline_ns);
int yard_coro_close(int fd);
/* Unregisters fd (waking its waiters with -EBADF) without closing it: for
 * code that closes the descriptor itself. */
int yard_coro_forget_fd(int fd);

/* Runs fn(arg) on the offload pool and parks until it has run; returns fn's
 * result. For calls that cannot be made non-blocking (file I/O, bcrypt).
 * Outside a coroutine it simply calls fn. */
void *yard_coro_offload(void *(*fn)(void *), void *arg);
/* The same on the I/O lane: a thread of its own for blocking file I/O
 * (writes, fdatasync, reads of old data), so that long CPU jobs on the
 * pool never delay it. */
void *yard_coro_offload_io(void *(*fn)(void *), void *arg);
/* The same on a lane of the pool by its number (enum yard_lane,
 * yard/offload.h: CPU, I/O, or scan for long reads of old data). */
void *yard_coro_offload_lane(int lane, void *(*fn)(void *), void *arg);

/* ---------------------------------------------------------------------------
 * Synchronisation: everything parks the coroutine, never the worker thread.
 * All objects are zero-initialisable ( = {0} ) and need no destroy, except
 * the channel, which owns its buffer.
 * ------------------------------------------------------------------------- */

struct yard_coro_waiter;

typedef struct yard_coro_waitq {
    atomic_int lock;
    struct yard_coro_waiter *head, *tail;
} yard_coro_waitq_t;

/* Futex-like: parks only if *word still equals expected (checked under the
 * queue's lock), until woken or the deadline. Returns 0 when woken,
 * -EAGAIN when *word differed, -ETIMEDOUT. May park. */
int yard_coro_waitq_wait(yard_coro_waitq_t *q, atomic_uint *word, unsigned expected,
                         uint64_t deadline_ns);
/* Wakes up to n waiters (FIFO); returns how many. Callable from any thread. */
int yard_coro_waitq_wake(yard_coro_waitq_t *q, int n);

typedef struct yard_coro_mutex {
    atomic_int lock;
    int locked;
    struct yard_coro_waiter *head, *tail;
} yard_coro_mutex_t;

void yard_coro_mutex_lock(yard_coro_mutex_t *m); /* may park */
/* Hands the mutex directly to the oldest waiter, if any (FIFO, no barging). */
void yard_coro_mutex_unlock(yard_coro_mutex_t *m);

typedef struct yard_coro_chan yard_coro_chan_t;

/* A channel of pointers; capacity 0 makes every send wait for a receiver. */
yard_coro_chan_t *yard_coro_chan_new(size_t capacity);
void yard_coro_chan_free(yard_coro_chan_t *ch);
/* 0, or -EPIPE if the channel is closed. May park. */
int yard_coro_chan_send(yard_coro_chan_t *ch, void *value);
/* 0 with *out set, or -EPIPE once the channel is closed and drained. May park. */
int yard_coro_chan_recv(yard_coro_chan_t *ch, void **out);
/* Wakes every waiter; later sends fail, receives drain what is buffered. */
void yard_coro_chan_close(yard_coro_chan_t *ch);

/* ---------------------------------------------------------------------------
 * Eve-style tasks. A task declares, for each shared object it touches, a READ
 * permission (Eve's [x]) or a FULL one ([+x]). The scheduler never runs two
 * tasks whose permissions conflict at the same time: readers of an object run
 * in parallel, a FULL holder runs alone. A task whose permissions are not
 * available is queued on the object and started when it is released; it is
 * never spun on. A finish scope waits for every task spawned into it
 * (including tasks those tasks spawn into it).
 * ------------------------------------------------------------------------- */

struct yard_coro_task;

typedef struct yard_coro_obj {
    atomic_int lock; /* guards the rest; a task takes its objects' locks in address order */
    int readers;
    int full;
    struct yard_coro_task *wait_head, *wait_tail;
} yard_coro_obj_t; /* zero-initialise */

enum yard_coro_perm_mode { YARD_PERM_READ = 1, YARD_PERM_FULL = 2 };

typedef struct yard_coro_perm {
    yard_coro_obj_t *obj;
    enum yard_coro_perm_mode mode;
} yard_coro_perm_t;

typedef struct yard_coro_finish {
    /* Live tasks, plus a large bias for the scope itself until its wait:
     * the owner's own spawns are counted in `local` without an atomic and
     * added when it waits, in one operation with the bias's removal. */
    atomic_uint pending;
    atomic_uint released; /* set by whoever dropped pending to 0, once done with the scope */
    yard_coro_waitq_t q;
    yard_coro_t *owner; /* the coroutine that initialised it (NULL outside one) */
    unsigned local;     /* tasks the owner spawned into it, not yet in pending */
} yard_coro_finish_t;

/* The calling coroutine owns the scope: its spawns into it must happen
 * before its wait (Eve's finish block: spawn, then wait, in one body). Tasks
 * may spawn into it too, from anywhere, until it is over. */
void yard_coro_finish_init(yard_coro_finish_t *f);
/* Spawns fn(arg) as a task of scope f holding perms (copied; at most
 * YARD_CORO_MAX_PERMS, one entry per object). 0, -EINVAL, -ENOMEM. */
#define YARD_CORO_MAX_PERMS 16
int yard_coro_task(yard_coro_finish_t *f, const yard_coro_perm_t *perms, size_t nperms,
                   void (*fn)(void *), void *arg);
/* Gives the permissions of the task whose body is running back now, as its
 * end would, and starts what waited for them: what the body does after
 * this needs none (it may drop the last reference to an object it held a
 * permission on, which the end of the task could otherwise touch after the
 * object is gone). Once per task; 0, or -EINVAL outside a task's body. */
int yard_coro_task_release_perms(void);
/* Waits until every task of the scope has finished. May park. */
void yard_coro_finish_wait(yard_coro_finish_t *f);

/* Permissions for the calling coroutine itself, without a task (an Eve
 * callback's, or a parent's taken back after a finish). acquire parks until
 * all n are granted together, by the rules of a task's grant: all or
 * nothing under the objects' locks, queued FIFO on a conflicting object,
 * and a fresh request waits behind an object's non-empty queue. perms may
 * be in any order (a sorted copy is made); at most YARD_CORO_MAX_PERMS, one
 * entry per object. 0, or -EINVAL (a bad list, or not called from a
 * coroutine: only a coroutine can wait); it allocates nothing. May park.
 * release gives them back and starts (or wakes) what was queued on them,
 * as a finishing task does; it takes the list acquire was given. */
int yard_coro_perms_acquire(const yard_coro_perm_t *perms, size_t n);
void yard_coro_perms_release(const yard_coro_perm_t *perms, size_t n);

#endif
