/* Monotonic time in nanoseconds, and small helpers around it. */
#ifndef YARD_CLOCK_H
#define YARD_CLOCK_H

#include <stdint.h>

uint64_t yard_now_ns(void);
/* Wall-clock time (CLOCK_REALTIME) in nanoseconds since the epoch, for
 * what users read (timestamps, HTTP dates); never for durations. */
int64_t yard_wall_ns(void);
/* Parse a duration such as "250ms", "5s", "2m", "1h", "30d" or a bare number
 * (taken in default_unit_ns). Returns 0 on success, -1 on a malformed value. */
int yard_parse_duration_ns(const char *s, uint64_t default_unit_ns, uint64_t *out);
/* Parse a rate "N/DURATION" ("10/10m": a token bucket that holds N and
 * gains N per DURATION): *burst = N, *per_s = tokens per second. 0, or -1 on
 * a malformed value (N outside 1..1000000, a zero duration). */
int yard_parse_rate(const char *s, double *burst, double *per_s);

#define YARD_NS_PER_US 1000ull
#define YARD_NS_PER_MS 1000000ull
#define YARD_NS_PER_S 1000000000ull

#endif
