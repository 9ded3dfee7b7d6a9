/* Logging: one line per event on stderr, "yard-serve[pid] level: message".
 *
 * Logging never stops the process. Every line leaves in one non-blocking
 * write (lines are at most 1 KiB, below PIPE_BUF, so lines of different
 * processes sharing stderr never interleave). A line stderr cannot take now
 * waits in a per-process queue of YARD_LOG_QUEUE_BYTES; when that is full it
 * is dropped and counted, and once output flows again the queued lines are
 * followed by one line "N log lines dropped". At exit the queue is flushed
 * for at most YARD_LOG_EXIT_FLUSH_MS. fd 2's own open file description is
 * never made non-blocking: a pipe or terminal is opened anew for us. */
#ifndef YARD_LOG_H
#define YARD_LOG_H

#include <stdint.h>

enum yard_log_level { YARD_LOG_ERROR = 0, YARD_LOG_WARN, YARD_LOG_INFO, YARD_LOG_DEBUG };

#define YARD_LOG_QUEUE_BYTES (64 * 1024)
#define YARD_LOG_EXIT_FLUSH_MS 150
/* yard_log_limited: lines per second per format string and level. */
#define YARD_LOG_BURST 10

/* Call once in main(), before any thread or fork: besides the name and the
 * level, it sets up the output and the rate limits shared by forked
 * processes. Logging without it works, with per-process rate limits. */
void yard_log_init(const char *progname, int level);
int yard_log_level(void);
void yard_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* For a message that a flood of peers can repeat, one per bad connection:
 * at most YARD_LOG_BURST lines a second for each (format string, level),
 * counted across the processes forked after yard_log_init. What is held back
 * is reported as "suppressed N similar messages" at the next line of that
 * format in a later second, or at the next line of any kind once the second
 * is over, or at exit. Nothing is held back at --log-level debug. Start-up
 * failures and anything that happens once belong in yard_log, never here. */
void yard_log_limited(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Write what is queued (and a pending "dropped" line), waiting at most
 * timeout_ms for the output to take it. Returns 0 when nothing is left, -1
 * otherwise. A process leaving by _exit() should call it first (with a
 * short timeout). exit() does it by itself, and also reports the lines
 * every process held back ("suppressed N similar messages"). */
int yard_log_flush(int timeout_ms);

/* Log to fd instead of stderr, chosen as for stderr (for tests and tools
 * with their own log destination). fd stays open and blocking. */
void yard_log_set_output(int fd);
/* For tests: the monotonic clock (ns) that places yard_log_limited's
 * one-second windows; NULL restores the real one. */
void yard_log_set_clock(uint64_t (*now_ns)(void));

#define yard_log_err(...) yard_log(YARD_LOG_ERROR, __VA_ARGS__)
#define yard_log_warn(...) yard_log(YARD_LOG_WARN, __VA_ARGS__)
#define yard_log_info(...) yard_log(YARD_LOG_INFO, __VA_ARGS__)
#define yard_log_debug(...)                                                                        \
    do {                                                                                           \
        if (yard_log_level() >= YARD_LOG_DEBUG)                                                    \
            yard_log(YARD_LOG_DEBUG, __VA_ARGS__);                                                 \
    } while (0)

/* For impossible states only: logs (trying for a moment even if stderr is
 * stalled) and aborts. */
_Noreturn void yard_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
