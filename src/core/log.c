/* Logging that never stops the process.
 *
 * A server whose stderr is a pipe that nobody drains used to block in
 * write(2) on the next log line: a single event loop then neither served nor
 * saw SIGTERM. Here every line is offered to the output without blocking;
 * what it does not take waits in a bounded per-process queue, and what does
 * not fit there is counted and reported once output flows again. Repeated
 * per-connection messages are rate-limited (yard_log_limited), so a flood of
 * bad clients costs a few lines a second, not one line per client. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */

#include "yard/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "yard/clock.h"

/* A line is written with one write(2); a pipe takes up to PIPE_BUF bytes
 * atomically, so lines of processes sharing the pipe never interleave. */
#define LINE_BYTES 1024
_Static_assert(LINE_BYTES <= PIPE_BUF, "a log line must be written atomically");
/* yard_fatal waits this long for a stalled output before it aborts anyway. */
#define FATAL_FLUSH_MS 200
#define RL_SLOTS 64

static const char *log_progname = "yard";
static int log_max_level = YARD_LOG_INFO;
static const char *const level_names[] = {"error", "warning", "info", "debug"};

/* How a line reaches the output. */
enum sink_kind {
    SINK_WRITE, /* write(): a regular file (never blocks) or our own non-blocking description */
    SINK_SEND,  /* a socket: send(MSG_DONTWAIT) makes the one call non-blocking */
    SINK_POLL,  /* anything else: write only when poll() says there is room (best effort) */
};

/* The output and the queue of lines it has not taken yet. A queued record
 * is a 2-byte big-endian length and the line; head_done bytes of the first
 * one are already out (only a terminal or a socket takes part of a line). */
static struct {
    pthread_mutex_t mu;
    int fd;
    bool own_fd;
    enum sink_kind kind;
    size_t head, tail, head_done;
    unsigned long long dropped; /* lines lost since the queue was last full */
    unsigned char q[YARD_LOG_QUEUE_BYTES];
} lg = {.mu = PTHREAD_MUTEX_INITIALIZER, .fd = STDERR_FILENO, .kind = SINK_POLL};

/* Rate limits live in a shared mapping made before anything forks, so the
 * fork model's process per connection counts against the same limit as a
 * thread would. A slot's key is the format pointer (the same in every forked
 * process) shifted left by 2, plus the level. */
struct rl_slot {
    _Atomic uint64_t key;    /* 0: free */
    _Atomic uint64_t window; /* second (upper 32 bits), lines let through in it (lower 32) */
    _Atomic uint64_t held;   /* lines suppressed and not yet reported */
};
struct rl_table {
    _Atomic uint64_t held; /* the slots' held counts summed: 0 lets a sweep skip the scan */
    struct rl_slot slot[RL_SLOTS];
};
static struct rl_table *rl;
static uint64_t (*rl_clock)(void);

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;

/* ---- the output ---- */

/* Pick how to write to fd without ever blocking, and without setting
 * O_NONBLOCK on fd's open file description: that is shared with the shell
 * and every other process holding the same terminal or pipe. */
static void sink_choose(int fd)
{
    if (lg.own_fd)
        close(lg.fd);
    lg.fd = fd;
    lg.own_fd = false;
    lg.kind = SINK_POLL;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return;
    if (S_ISREG(st.st_mode)) {
        lg.kind = SINK_WRITE; /* keeps fd: it may be O_APPEND, shared with others */
        return;
    }
    if (S_ISSOCK(st.st_mode)) {
        lg.kind = SINK_SEND;
        return;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && (fl & O_NONBLOCK)) {
        lg.kind = SINK_WRITE;
        return;
    }
    if (!S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode))
        return;
    /* Opening the pipe or terminal again through /proc gives a description
     * of our own, which we may make non-blocking. O_NOCTTY: a process
     * without a controlling terminal must not acquire this one. */
    char path[40];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int nfd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (nfd < 0)
        return;
    struct stat nst;
    if (fstat(nfd, &nst) < 0 || nst.st_dev != st.st_dev || nst.st_ino != st.st_ino) {
        close(nfd);
        return;
    }
    lg.fd = nfd;
    lg.own_fd = true;
    lg.kind = SINK_WRITE;
}

/* Returns the bytes taken (> 0), 0 when the output cannot take any now, or
 * -1 when it never will (a closed pipe, a bad descriptor): the line is lost. */
static ssize_t sink_write(const void *p, size_t n)
{
    for (int tries = 0; tries < 8; tries++) {
        ssize_t w;
        if (lg.kind == SINK_SEND) {
            w = send(lg.fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        } else {
            if (lg.kind == SINK_POLL) {
                struct pollfd pfd = {.fd = lg.fd, .events = POLLOUT};
                if (poll(&pfd, 1, 0) <= 0)
                    return 0;
            }
            w = write(lg.fd, p, n);
        }
        if (w >= 0)
            return w;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    }
    return 0;
}

/* Wait (at most until deadline) for the output to have room. */
static void sink_wait(uint64_t deadline)
{
    uint64_t now = yard_now_ns();
    if (now >= deadline)
        return;
    struct pollfd pfd = {.fd = lg.fd, .events = POLLOUT};
    poll(&pfd, 1, (int)((deadline - now + 999999) / 1000000));
}

/* ---- the queue (all under lg.mu) ---- */

static bool queue_empty(void) { return lg.head == lg.tail; }

static size_t queue_room(void) { return sizeof lg.q - (lg.tail - lg.head); }

static bool queue_push(const char *p, size_t n, size_t done)
{
    if (2 + n > queue_room())
        return false;
    if (queue_empty()) {
        lg.head = lg.tail = 0;
        lg.head_done = done;
    } else if (lg.tail + 2 + n > sizeof lg.q) {
        memmove(lg.q, lg.q + lg.head, lg.tail - lg.head);
        lg.tail -= lg.head;
        lg.head = 0;
    }
    lg.q[lg.tail] = (unsigned char)(n >> 8);
    lg.q[lg.tail + 1] = (unsigned char)n;
    memcpy(lg.q + lg.tail + 2, p, n);
    lg.tail += 2 + n;
    return true;
}

/* Writes queued lines, oldest first, until the output stops taking them.
 * True when the queue is empty. */
static bool queue_drain(void)
{
    while (!queue_empty()) {
        size_t n = (size_t)lg.q[lg.head] << 8 | lg.q[lg.head + 1];
        ssize_t w = sink_write(lg.q + lg.head + 2 + lg.head_done, n - lg.head_done);
        if (w == 0)
            return false;
        if (w > 0 && (size_t)w < n - lg.head_done) {
            lg.head_done += (size_t)w;
            return false;
        }
        lg.head += 2 + n; /* written, or lost with a broken output */
        lg.head_done = 0;
    }
    lg.head = lg.tail = 0;
    return true;
}

/* Writes a line now if nothing is queued before it, else queues it (or
 * what the output did not take of it). False when there is no room. */
static bool offer(const char *p, size_t n)
{
    size_t done = 0;
    if (queue_empty()) {
        ssize_t w = sink_write(p, n);
        if (w < 0 || (size_t)w == n)
            return true;
        done = (size_t)w;
    }
    return queue_push(p, n, done);
}

/* ---- lines ---- */

static size_t format_vline(char *line, size_t cap, int level, const char *fmt, va_list ap)
{
    int n = snprintf(line, cap, "%s[%ld] %s: ", log_progname, (long)getpid(), level_names[level]);
    if (n < 0)
        n = 0;
    if ((size_t)n < cap) {
        int m = vsnprintf(line + n, cap - (size_t)n, fmt, ap);
        if (m > 0)
            n += m;
    }
    if ((size_t)n >= cap - 1)
        n = (int)cap - 2;
    line[n++] = '\n';
    return (size_t)n;
}

static size_t format_line(char *line, size_t cap, int level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t format_line(char *line, size_t cap, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = format_vline(line, cap, level, fmt, ap);
    va_end(ap);
    return n;
}

/* Once the lines queued before the loss are out of the way, say how many
 * were lost, in their place. The note needs room, and so do the `then`
 * bytes that are to follow it: false when there is none. */
static bool note_dropped(size_t then)
{
    if (!lg.dropped)
        return true;
    char note[128];
    size_t m = format_line(note, sizeof note, YARD_LOG_WARN, "%llu log lines dropped", lg.dropped);
    if (queue_room() < 2 + m + then)
        return false;
    offer(note, m);
    lg.dropped = 0;
    return true;
}

static void emit_locked(const char *line, size_t n)
{
    queue_drain();
    if (!note_dropped(2 + n) || !offer(line, n))
        lg.dropped++;
}

static void emit(const char *line, size_t n)
{
    pthread_mutex_lock(&lg.mu);
    emit_locked(line, n);
    pthread_mutex_unlock(&lg.mu);
}

/* Under lg.mu: write everything, waiting for the output until deadline.
 * 0 when nothing is left. */
static int flush_locked(uint64_t deadline)
{
    for (;;) {
        if (queue_drain()) {
            note_dropped(0);
            if (queue_drain())
                return 0;
        }
        if (yard_now_ns() >= deadline)
            return -1;
        sink_wait(deadline);
    }
}

/* ---- rate limits ---- */

static uint64_t rl_now_sec(void)
{
    uint64_t (*clock_fn)(void) = rl_clock;
    return ((clock_fn ? clock_fn() : yard_now_ns()) / 1000000000u) & 0xffffffffu;
}

static struct rl_slot *rl_slot_for(int level, const char *fmt)
{
    uintptr_t p = (uintptr_t)fmt;
    if (!rl || (uint64_t)p >> 62) /* the key would lose the pointer's top bits */
        return NULL;
    uint64_t key = (uint64_t)p << 2 | (uint64_t)level;
    size_t h = (size_t)((key * 0x9e3779b97f4a7c15u) >> 58) % RL_SLOTS;
    for (size_t i = 0; i < RL_SLOTS; i++) {
        struct rl_slot *s = &rl->slot[(h + i) % RL_SLOTS];
        uint64_t k = atomic_load(&s->key);
        if (k == 0 && atomic_compare_exchange_strong(&s->key, &k, key))
            return s;
        if (k == key)
            return s;
    }
    return NULL; /* more formats than slots: not limited */
}

static uint64_t rl_take_held(struct rl_slot *s)
{
    uint64_t n = atomic_exchange(&s->held, 0);
    if (n)
        atomic_fetch_sub(&rl->held, n);
    return n;
}

/* May a line of (level, fmt) go out now? If so, *report is the number of
 * lines held back before it, to be reported first. */
static bool rl_admit(int level, const char *fmt, uint64_t *report)
{
    *report = 0;
    struct rl_slot *s = rl_slot_for(level, fmt);
    if (!s)
        return true;
    uint64_t sec = rl_now_sec();
    uint64_t w = atomic_load(&s->window);
    for (;;) {
        uint64_t next;
        if (w >> 32 != sec)
            next = sec << 32 | 1;
        else if ((w & 0xffffffffu) < YARD_LOG_BURST)
            next = w + 1;
        else {
            /* The table's sum first, so a sweep never subtracts more than it holds. */
            atomic_fetch_add(&rl->held, 1);
            atomic_fetch_add(&s->held, 1);
            return false;
        }
        if (atomic_compare_exchange_weak(&s->window, &w, next))
            break;
    }
    *report = rl_take_held(s);
    return true;
}

static void emit_suppressed(int level, const char *fmt, uint64_t n)
{
    char line[LINE_BYTES];
    size_t len = format_line(line, sizeof line, level,
                             "suppressed %llu similar messages like \"%s\"",
                             (unsigned long long)n, fmt);
    emit(line, len);
}

/* Reports what was held back in windows that are over (all: every window),
 * so a flood that stops is still accounted for. */
static void rl_sweep(bool all)
{
    if (!rl || !atomic_load_explicit(&rl->held, memory_order_relaxed))
        return;
    uint64_t sec = rl_now_sec();
    for (size_t i = 0; i < RL_SLOTS; i++) {
        struct rl_slot *s = &rl->slot[i];
        uint64_t key = atomic_load(&s->key);
        if (!key || !atomic_load(&s->held))
            continue;
        if (!all && atomic_load(&s->window) >> 32 == sec)
            continue;
        uint64_t n = rl_take_held(s);
        if (n)
            emit_suppressed((int)(key & 3), (const char *)(uintptr_t)(key >> 2), n);
    }
}

/* ---- set-up, fork and exit ---- */

/* Fork while no thread holds the lock; the child starts with an empty queue
 * because the parent writes the lines it queued, and only once. */
static void fork_prepare(void) { pthread_mutex_lock(&lg.mu); }

static void fork_parent(void) { pthread_mutex_unlock(&lg.mu); }

static void fork_child(void)
{
    lg.head = lg.tail = lg.head_done = 0;
    lg.dropped = 0;
    pthread_mutex_unlock(&lg.mu);
}

/* The counts of held-back lines are shared by every process: a process that
 * leaves by _exit() (a forked child, after yard_log_flush) leaves them in
 * the table, and the one that exits last, normally, reports them. */
static void log_at_exit(void)
{
    rl_sweep(true);
    yard_log_flush(YARD_LOG_EXIT_FLUSH_MS);
}

static void log_setup(void)
{
    sink_choose(STDERR_FILENO);
    void *m = mmap(NULL, sizeof *rl, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED)
        rl = m; /* zeroed; kept until exit */
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    atexit(log_at_exit);
}

static void ensure_setup(void) { pthread_once(&setup_once, log_setup); }

/* ---- the interface ---- */

void yard_log_init(const char *progname, int level)
{
    ensure_setup();
    if (progname)
        log_progname = progname;
    log_max_level = level;
}

int yard_log_level(void) { return log_max_level; }

void yard_log_set_output(int fd)
{
    ensure_setup();
    pthread_mutex_lock(&lg.mu);
    sink_choose(fd);
    pthread_mutex_unlock(&lg.mu);
}

void yard_log_set_clock(uint64_t (*now_ns)(void)) { rl_clock = now_ns; }

static void log_vemit(int level, const char *fmt, va_list ap)
{
    char line[LINE_BYTES];
    size_t n = format_vline(line, sizeof line, level, fmt, ap);
    rl_sweep(false);
    emit(line, n);
}

void yard_log(int level, const char *fmt, ...)
{
    if (level > log_max_level)
        return;
    ensure_setup();
    va_list ap;
    va_start(ap, fmt);
    log_vemit(level, fmt, ap);
    va_end(ap);
}

void yard_log_limited(int level, const char *fmt, ...)
{
    if (level > log_max_level)
        return;
    ensure_setup();
    uint64_t held = 0;
    /* At debug level the operator asked for every line. */
    if (log_max_level < YARD_LOG_DEBUG && !rl_admit(level, fmt, &held))
        return;
    if (held)
        emit_suppressed(level, fmt, held);
    va_list ap;
    va_start(ap, fmt);
    log_vemit(level, fmt, ap);
    va_end(ap);
}

int yard_log_flush(int timeout_ms)
{
    ensure_setup();
    uint64_t deadline = yard_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u;
    pthread_mutex_lock(&lg.mu);
    int rc = flush_locked(deadline);
    pthread_mutex_unlock(&lg.mu);
    return rc;
}

_Noreturn void yard_fatal(const char *fmt, ...)
{
    ensure_setup();
    char line[LINE_BYTES];
    va_list ap;
    va_start(ap, fmt);
    size_t n = format_vline(line, sizeof line, YARD_LOG_ERROR, fmt, ap);
    va_end(ap);
    uint64_t start = yard_now_ns(), deadline = start + FATAL_FLUSH_MS * 1000000ull;
    /* Another thread holds the lock only for a moment; if it does not come
     * free, write anyway rather than lose the reason for the abort. */
    bool locked = false;
    while (!(locked = pthread_mutex_trylock(&lg.mu) == 0) && yard_now_ns() < start + 20000000u) {
        struct timespec ms = {.tv_nsec = 1000000};
        nanosleep(&ms, NULL);
    }
    /* The lines queued before it first, for half the time at most; then
     * the fatal line, even ahead of lines still queued. */
    if (locked)
        flush_locked(start + FATAL_FLUSH_MS / 2 * 1000000ull);
    size_t off = 0;
    while (off < n) {
        ssize_t w = sink_write(line + off, n - off);
        if (w < 0)
            break;
        off += (size_t)w;
        if (off < n) {
            if (yard_now_ns() >= deadline)
                break;
            sink_wait(deadline);
        }
    }
    abort();
}
