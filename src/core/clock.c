#include "yard/clock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t yard_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * YARD_NS_PER_S + (uint64_t)ts.tv_nsec;
}

int64_t yard_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * (int64_t)YARD_NS_PER_S + ts.tv_nsec;
}

int yard_parse_duration_ns(const char *s, uint64_t default_unit_ns, uint64_t *out)
{
    static const struct {
        const char *suffix;
        uint64_t ns;
    } units[] = {{"ns", 1},
                 {"us", YARD_NS_PER_US},
                 {"ms", YARD_NS_PER_MS},
                 {"s", YARD_NS_PER_S},
                 {"m", 60 * YARD_NS_PER_S},
                 {"h", 3600 * YARD_NS_PER_S},
                 {"d", 86400 * YARD_NS_PER_S}};
    if (!s || !*s)
        return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0 || s[0] == '-' || s[0] == '+')
        return -1;
    uint64_t unit = default_unit_ns;
    if (*end) {
        unit = 0;
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
            if (strcmp(end, units[i].suffix) == 0)
                unit = units[i].ns;
        if (!unit)
            return -1;
    }
    double ns = v * (double)unit;
    if (ns > 1e18)
        return -1;
    *out = (uint64_t)ns;
    return 0;
}

int yard_parse_rate(const char *s, double *burst, double *per_s)
{
    char *slash;
    errno = 0;
    long n = strtol(s, &slash, 10);
    uint64_t ns;
    if (errno || slash == s || *slash != '/' || n < 1 || n > 1000000 ||
        yard_parse_duration_ns(slash + 1, YARD_NS_PER_S, &ns) < 0 || ns == 0)
        return -1;
    *burst = (double)n;
    *per_s = (double)n / ((double)ns / 1e9);
    return 0;
}
