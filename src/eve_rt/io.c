/* The Eve runtime: stdout and stderr, and timers. */
#include "rt_internal.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- streams ---------------------------------------------------------------------------------- */

/* Unbuffered: every write is written whole with write(2) under the stream's lock, so
 * lines of different tasks never interleave and nothing is left in a
 * buffer when the program exits. */
struct eve_stream {
    const char *name;
    int fd;
    pthread_mutex_t lock;
};

static eve_stream_t stream_out = {"stdout", 1, PTHREAD_MUTEX_INITIALIZER};
static eve_stream_t stream_err = {"stderr", 2, PTHREAD_MUTEX_INITIALIZER};
eve_stream_t *eve_stdout = &stream_out, *eve_stderr = &stream_err;

_Noreturn static void stream_failed(eve_stream_t *s, int err)
{
    char msg[256];
    int n = snprintf(msg, sizeof msg, "%s: writing %s: %s\n", rt_prog_name, s->name,
                     strerror(err));
    if (n > 0) {
        ssize_t w = write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
        (void)w;
    }
    _exit(1);
}

/* Writes all of iov (changed as it goes); the caller holds the lock. */
static void write_iov(eve_stream_t *s, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t w = writev(s->fd, iov, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                /* Someone made the descriptor non-blocking: wait here. */
                struct pollfd p = {.fd = s->fd, .events = POLLOUT};
                poll(&p, 1, 100);
                continue;
            }
            stream_failed(s, errno);
        }
        size_t done = (size_t)w;
        while (n > 0 && done >= iov->iov_len) {
            done -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + done;
            iov->iov_len -= done;
        }
    }
}

void eve_stream_write(eve_stream_t *s, const void *bytes, size_t len)
{
    if (len == 0)
        return;
    struct iovec iov = {(void *)bytes, len};
    pthread_mutex_lock(&s->lock);
    write_iov(s, &iov, 1);
    pthread_mutex_unlock(&s->lock);
}

void eve_stream_write_line(eve_stream_t *s, const eve_str_t *line)
{
    struct iovec iov[2] = {{(void *)line->bytes, line->len}, {"\n", 1}};
    pthread_mutex_lock(&s->lock);
    write_iov(s, line->len ? iov : iov + 1, line->len ? 2 : 1);
    pthread_mutex_unlock(&s->lock);
}

void rt_streams_quiesce(void)
{
    eve_stream_t *all[2] = {&stream_out, &stream_err};
    for (int i = 0; i < 2; i++) {
        for (int tries = 0; tries < 100; tries++) {
            if (pthread_mutex_trylock(&all[i]->lock) == 0)
                break; /* kept: nothing is written after this */
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
}

/* ---- timers -------------------------------------------------------------------------------------- */

/* A started timer has one coroutine, which holds a reference to it and
 * delivers its ticks in order. start, once and stop change the state under
 * the lock and bump gen, which wakes that coroutine to look again. */
struct eve_timer {
    eve_obj_t h;
    struct rt_src src; /* 0: tick */
    atomic_int lk;
    bool started;
    bool once;
    bool running; /* the coroutine exists */
    uint64_t period_ns;
    uint64_t deadline;
    atomic_uint gen;
    yard_coro_waitq_t q;
};

void rt_timer_dtor(eve_obj_t *o)
{
    rt_src_kill(&((eve_timer_t *)o)->src);
}

struct rt_src *rt_timer_src(void *t)
{
    return &((eve_timer_t *)t)->src;
}

eve_timer_t *eve_timer_new(void)
{
    return eve_obj_new(sizeof(eve_timer_t), rt_timer_dtor);
}

static void timer_main(void *arg)
{
    eve_timer_t *t = arg;
    rt_lock(&t->lk);
    for (;;) {
        if (!t->started) {
            t->running = false;
            break;
        }
        unsigned g = atomic_load_explicit(&t->gen, memory_order_relaxed);
        uint64_t deadline = t->deadline;
        rt_unlock(&t->lk);
        if (yard_coro_now_ns() < deadline)
            yard_coro_waitq_wait(&t->q, &t->gen, g, deadline);
        rt_lock(&t->lk);
        if (atomic_load_explicit(&t->gen, memory_order_relaxed) != g)
            continue; /* restarted or stopped meanwhile */
        uint64_t now = yard_coro_now_ns();
        if (now < deadline)
            continue;
        bool ended = t->once;
        if (ended) {
            t->started = false;
            atomic_fetch_add_explicit(&t->gen, 1, memory_order_relaxed);
        } else {
            t->deadline += t->period_ns;
            if (t->deadline <= now) /* late: skip what was missed */
                t->deadline = now + t->period_ns;
        }
        rt_unlock(&t->lk);
        rt_dispatch(&t->src, 0, (eve_val_t){.i = 0}, NULL);
        if (ended)
            rt_live_dec(); /* after the tick: the program lives while it runs */
        rt_lock(&t->lk);
    }
    rt_unlock(&t->lk);
    eve_release(t);
}

static void timer_set(eve_timer_t *t, int64_t ms, bool once)
{
    uint64_t period = (uint64_t)ms * 1000000u;
    rt_lock(&t->lk);
    bool was = t->started, spawn = !t->running;
    t->started = true;
    t->once = once;
    t->period_ns = period;
    t->deadline = yard_coro_now_ns() + period;
    t->running = true;
    atomic_fetch_add_explicit(&t->gen, 1, memory_order_relaxed);
    rt_unlock(&t->lk);
    if (!was)
        rt_live_inc();
    if (spawn) {
        eve_retain(t);
        if (yard_coro_go(timer_main, t) != 0)
            rt_oom();
    } else {
        yard_coro_waitq_wake(&t->q, INT_MAX);
    }
}

/* An interval the clock can hold (about 292 years). */
#define TIMER_MAX_MS (INT64_MAX / 1000000 / 2)

void eve_timer_start(eve_cx_t *cx, eve_timer_t *t, int64_t ms, const char *pos)
{
    (void)cx;
    if (ms < 1 || ms > TIMER_MAX_MS)
        eve_fail(pos, "timer.start(%lld): the interval must be 1 ms or more", (long long)ms);
    timer_set(t, ms, false);
}

void eve_timer_once(eve_cx_t *cx, eve_timer_t *t, int64_t ms, const char *pos)
{
    (void)cx;
    if (ms < 0 || ms > TIMER_MAX_MS)
        eve_fail(pos, "timer.once(%lld): the delay must be 0 ms or more", (long long)ms);
    timer_set(t, ms, true);
}

void eve_timer_stop(eve_cx_t *cx, eve_timer_t *t)
{
    (void)cx;
    rt_lock(&t->lk);
    bool was = t->started;
    t->started = false;
    atomic_fetch_add_explicit(&t->gen, 1, memory_order_relaxed);
    rt_unlock(&t->lk);
    yard_coro_waitq_wake(&t->q, INT_MAX);
    if (was)
        rt_live_dec();
}
