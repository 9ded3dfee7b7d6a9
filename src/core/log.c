#include "yard/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *log_progname = "yard";
static int log_max_level = YARD_LOG_INFO;
static const char *const level_names[] = {"error", "warning", "info", "debug"};

void yard_log_init(const char *progname, int level)
{
    if (progname)
        log_progname = progname;
    log_max_level = level;
}

int yard_log_level(void) { return log_max_level; }

static void log_vwrite(int level, const char *fmt, va_list ap)
{
    /* Format into one buffer and emit it with a single write so that lines
     * from many processes and threads sharing stderr never interleave. */
    char line[1024];
    int n = snprintf(line, sizeof line, "%s[%ld] %s: ", log_progname, (long)getpid(),
                     level_names[level]);
    if (n < 0)
        return;
    if ((size_t)n < sizeof line) {
        int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
        if (m > 0)
            n += m;
    }
    if ((size_t)n >= sizeof line - 1)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t off = 0;
    while (off < n) {
        ssize_t w = write(STDERR_FILENO, line + off, (size_t)(n - off));
        if (w <= 0)
            break;
        off += w;
    }
}

void yard_log(int level, const char *fmt, ...)
{
    if (level > log_max_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(level, fmt, ap);
    va_end(ap);
}

void yard_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(YARD_LOG_ERROR, fmt, ap);
    va_end(ap);
    abort();
}
