/* A log-linear latency histogram (HdrHistogram-class): values in
 * nanoseconds, recorded losslessly into buckets whose width is at most
 * 1/128 of their value (<= 0.8% relative error) over the whole range of
 * uint64_t, exact below 256 ns. Fixed size, no allocation after init, and
 * histograms from several threads merge by adding counts. */
#ifndef YARD_HIST_H
#define YARD_HIST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define YARD_HIST_SUB_BITS 7
#define YARD_HIST_SUB (1u << YARD_HIST_SUB_BITS) /* 128 sub-buckets per power of two */
/* 256 exact buckets, then 128 per power of two from 2^8 to 2^63. */
#define YARD_HIST_BUCKETS (2 * YARD_HIST_SUB + (63 - YARD_HIST_SUB_BITS) * YARD_HIST_SUB)

typedef struct yard_hist {
    uint64_t count;
    uint64_t min, max;
    long double sum;
    uint64_t buckets[YARD_HIST_BUCKETS];
} yard_hist_t;

void yard_hist_init(yard_hist_t *h);
void yard_hist_record(yard_hist_t *h, uint64_t value);
void yard_hist_record_n(yard_hist_t *h, uint64_t value, uint64_t n);
void yard_hist_merge(yard_hist_t *into, const yard_hist_t *from);
/* The value at percentile p (0..100): the bucket's midpoint, clamped to the
 * recorded min and max (so p0 and p100 are exact). 0 when empty. */
uint64_t yard_hist_percentile(const yard_hist_t *h, double p);
double yard_hist_mean(const yard_hist_t *h);
/* Bucket index of a value, and the range [lo, hi] of values a bucket holds. */
size_t yard_hist_index(uint64_t value);
void yard_hist_bucket_range(size_t index, uint64_t *lo, uint64_t *hi);
/* HdrHistogram's percentile-distribution text format ("Value Percentile
 * TotalCount 1/(1-Percentile)" with the #[Mean ...] footer), values divided
 * by unit_ns (1000: microseconds), which HdrHistogram plotters read. */
void yard_hist_write_percentiles(const yard_hist_t *h, FILE *f, double unit_ns);

#endif
