/* Logging: one line per event on stderr, "yard-serve[pid] level: message". */
#ifndef YARD_LOG_H
#define YARD_LOG_H

enum yard_log_level { YARD_LOG_ERROR = 0, YARD_LOG_WARN, YARD_LOG_INFO, YARD_LOG_DEBUG };

void yard_log_init(const char *progname, int level);
int yard_log_level(void);
void yard_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define yard_log_err(...) yard_log(YARD_LOG_ERROR, __VA_ARGS__)
#define yard_log_warn(...) yard_log(YARD_LOG_WARN, __VA_ARGS__)
#define yard_log_info(...) yard_log(YARD_LOG_INFO, __VA_ARGS__)
#define yard_log_debug(...)                                                                        \
    do {                                                                                           \
        if (yard_log_level() >= YARD_LOG_DEBUG)                                                    \
            yard_log(YARD_LOG_DEBUG, __VA_ARGS__);                                                 \
    } while (0)

/* For impossible states only: logs and aborts. */
_Noreturn void yard_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
