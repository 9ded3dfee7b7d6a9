#include "yard/hist.h"

#include <math.h>
#include <string.h>

void yard_hist_init(yard_hist_t *h)
{
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

size_t yard_hist_index(uint64_t v)
{
    if (v < 2 * YARD_HIST_SUB)
        return (size_t)v;
    /* v has its top bit at position m >= 8; keep the 8 bits below and
     * including it: v >> shift lies in [128, 255]. */
    unsigned m = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = m - YARD_HIST_SUB_BITS;
    return 2 * YARD_HIST_SUB + (size_t)(shift - 1) * YARD_HIST_SUB +
           (size_t)((v >> shift) - YARD_HIST_SUB);
}

void yard_hist_bucket_range(size_t index, uint64_t *lo, uint64_t *hi)
{
    if (index < 2 * YARD_HIST_SUB) {
        *lo = *hi = index;
        return;
    }
    size_t k = index - 2 * YARD_HIST_SUB;
    unsigned shift = (unsigned)(k / YARD_HIST_SUB) + 1;
    uint64_t sub = (uint64_t)(k % YARD_HIST_SUB) + YARD_HIST_SUB;
    *lo = sub << shift;
    *hi = *lo + ((uint64_t)1 << shift) - 1;
}

void yard_hist_record_n(yard_hist_t *h, uint64_t v, uint64_t n)
{
    if (!n)
        return;
    h->buckets[yard_hist_index(v)] += n;
    h->count += n;
    h->sum += (long double)v * (long double)n;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
}

void yard_hist_record(yard_hist_t *h, uint64_t v) { yard_hist_record_n(h, v, 1); }

void yard_hist_merge(yard_hist_t *into, const yard_hist_t *from)
{
    if (!from->count)
        return;
    for (size_t i = 0; i < YARD_HIST_BUCKETS; i++)
        into->buckets[i] += from->buckets[i];
    into->count += from->count;
    into->sum += from->sum;
    if (from->min < into->min)
        into->min = from->min;
    if (from->max > into->max)
        into->max = from->max;
}

/* The value a bucket stands for: the recorded min or max when the bucket
 * holds it (so the extremes are exact), else the bucket's midpoint. */
static uint64_t bucket_value(const yard_hist_t *h, size_t i)
{
    if (i == yard_hist_index(h->max))
        return h->max;
    if (i == yard_hist_index(h->min))
        return h->min;
    uint64_t lo, hi;
    yard_hist_bucket_range(i, &lo, &hi);
    return lo + (hi - lo) / 2;
}

uint64_t yard_hist_percentile(const yard_hist_t *h, double p)
{
    if (!h->count)
        return 0;
    if (p <= 0)
        return h->min;
    if (p >= 100)
        return h->max;
    /* The smallest value with at least p% of the samples at or below it. */
    uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)h->count);
    if (rank < 1)
        rank = 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < YARD_HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank)
            return bucket_value(h, i);
    }
    return h->max;
}

double yard_hist_mean(const yard_hist_t *h)
{
    return h->count ? (double)(h->sum / (long double)h->count) : 0.0;
}

void yard_hist_write_percentiles(const yard_hist_t *h, FILE *f, double unit_ns)
{
    fprintf(f, "%12s %14s %10s %14s\n\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)");
    uint64_t seen = 0;
    for (size_t i = 0; i < YARD_HIST_BUCKETS && h->count; i++) {
        if (!h->buckets[i])
            continue;
        seen += h->buckets[i];
        double q = (double)seen / (double)h->count;
        double value = (double)bucket_value(h, i) / unit_ns;
        if (q < 1.0)
            fprintf(f, "%12.3f %2.12f %10llu %14.2f\n", value, q, (unsigned long long)seen,
                    1.0 / (1.0 - q));
        else
            fprintf(f, "%12.3f %2.12f %10llu\n", value, q, (unsigned long long)seen);
    }
    double mean = yard_hist_mean(h) / unit_ns;
    double var = 0;
    for (size_t i = 0; i < YARD_HIST_BUCKETS && h->count; i++)
        if (h->buckets[i]) {
            double d = (double)bucket_value(h, i) / unit_ns - mean;
            var += d * d * (double)h->buckets[i];
        }
    double stddev = h->count ? sqrt(var / (double)h->count) : 0;
    fprintf(f, "#[Mean    = %12.3f, StdDeviation   = %12.3f]\n", mean, stddev);
    fprintf(f, "#[Max     = %12.3f, Total count    = %12llu]\n", (double)h->max / unit_ns,
            (unsigned long long)h->count);
    fprintf(f, "#[Buckets = %12d, SubBuckets     = %12d]\n", YARD_HIST_BUCKETS, YARD_HIST_SUB);
}
