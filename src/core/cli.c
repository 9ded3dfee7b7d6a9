/* The command line's edge (cli.h). */
#include "yard/cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void vtell(const char *prog, const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry '%.*s --help'.\n", (int)strcspn(prog, " "), prog);
}

int yard_usage_error(const char *prog, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vtell(prog, fmt, ap);
    va_end(ap);
    return YARD_EXIT_USAGE;
}

void yard_usage_exit(const char *prog, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vtell(prog, fmt, ap);
    va_end(ap);
    exit(YARD_EXIT_USAGE);
}

int yard_parse_int(const char *text, long long min, long long max, long long *out)
{
    const char *digits = text && (*text == '-' || *text == '+') ? text + 1 : text;
    if (!digits || *digits < '0' || *digits > '9')
        return -EINVAL;
    errno = 0;
    char *end;
    long long v = strtoll(text, &end, 10);
    if (*end)
        return -EINVAL;
    if (errno == ERANGE || v < min || v > max)
        return -ERANGE;
    *out = v;
    return 0;
}

long long yard_int_flag(const char *prog, const char *flag, const char *text, long long min,
                        long long max)
{
    long long v;
    if (yard_parse_int(text, min, max, &v) < 0)
        yard_usage_exit(prog, "%s: expected a whole number from %lld to %lld, got '%s'", flag, min,
                        max, text ? text : "");
    return v;
}
