#include <math.h>

#include "test.h"
#include "yard/hist.h"

static yard_hist_t h, h2;

static void test_exact_below_256(void)
{
    yard_hist_init(&h);
    for (uint64_t v = 0; v < 256; v++) {
        ASSERT_EQ(yard_hist_index(v), v);
        yard_hist_record(&h, v);
    }
    ASSERT_U64_EQ(yard_hist_percentile(&h, 0), 0);
    ASSERT_U64_EQ(yard_hist_percentile(&h, 50), 127);
    ASSERT_U64_EQ(yard_hist_percentile(&h, 100), 255);
}

static void test_relative_error_bound(void)
{
    /* Every value from 1 us to 100 s (and far beyond) lands in a bucket whose
     * whole range is within 1% of it. */
    for (uint64_t v = 1000; v < (uint64_t)1 << 62; v = v + v / 7 + 1) {
        size_t i = yard_hist_index(v);
        ASSERT_LT(i, YARD_HIST_BUCKETS);
        uint64_t lo, hi;
        yard_hist_bucket_range(i, &lo, &hi);
        if (v < lo || v > hi)
            TEST_FAIL("value %llu outside its bucket [%llu, %llu]", (unsigned long long)v,
                      (unsigned long long)lo, (unsigned long long)hi);
        if ((double)(hi - lo) / (double)v > 0.01)
            TEST_FAIL("bucket of %llu is %llu wide", (unsigned long long)v,
                      (unsigned long long)(hi - lo));
    }
    ASSERT_LT(yard_hist_index(UINT64_MAX), YARD_HIST_BUCKETS);
}

static void test_buckets_are_contiguous(void)
{
    uint64_t prev_hi = 0;
    for (size_t i = 1; i < YARD_HIST_BUCKETS; i++) {
        uint64_t lo, hi;
        yard_hist_bucket_range(i, &lo, &hi);
        ASSERT_U64_EQ(lo, prev_hi + 1);
        ASSERT_EQ(yard_hist_index(lo), i);
        ASSERT_EQ(yard_hist_index(hi), i);
        prev_hi = hi;
    }
    ASSERT_U64_EQ(prev_hi, UINT64_MAX);
}

static void test_uniform_percentiles(void)
{
    /* 1..1,000,000 us uniformly: p50 ~ 500 ms, p99 ~ 990 ms, within 1%. */
    yard_hist_init(&h);
    for (uint64_t us = 1; us <= 1000000; us++)
        yard_hist_record(&h, us * 1000);
    double checks[][2] = {{50, 500000e3}, {90, 900000e3}, {99, 990000e3}, {99.9, 999000e3}};
    for (size_t i = 0; i < 4; i++) {
        double got = (double)yard_hist_percentile(&h, checks[i][0]);
        if (fabs(got - checks[i][1]) / checks[i][1] > 0.01)
            TEST_FAIL("p%g = %.0f, expected %.0f within 1%%", checks[i][0], got, checks[i][1]);
    }
    ASSERT_U64_EQ(yard_hist_percentile(&h, 0), 1000);
    ASSERT_U64_EQ(yard_hist_percentile(&h, 100), 1000000000ull);
    ASSERT(fabs(yard_hist_mean(&h) - 500000.5e3) < 1);
    ASSERT_U64_EQ(h.count, 1000000);
}

static void test_merge_equals_single(void)
{
    yard_hist_init(&h);
    yard_hist_init(&h2);
    yard_hist_t *all = calloc(1, sizeof *all);
    yard_hist_init(all);
    for (uint64_t i = 1; i < 200000; i++) {
        uint64_t v = (i * 2654435761u) % 50000000u + 1;
        yard_hist_record(i % 2 ? &h : &h2, v);
        yard_hist_record(all, v);
    }
    yard_hist_merge(&h, &h2);
    ASSERT_U64_EQ(h.count, all->count);
    ASSERT_U64_EQ(h.min, all->min);
    ASSERT_U64_EQ(h.max, all->max);
    ASSERT_MEM_EQ(h.buckets, all->buckets, sizeof h.buckets);
    for (double p = 0; p <= 100; p += 2.5)
        ASSERT_U64_EQ(yard_hist_percentile(&h, p), yard_hist_percentile(all, p));
    free(all);
}

static void test_percentile_file_format(void)
{
    yard_hist_init(&h);
    yard_hist_record_n(&h, 1000, 3);
    yard_hist_record(&h, 5000000);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    yard_hist_write_percentiles(&h, f, 1000.0);
    fclose(f);
    ASSERT(strstr(buf, "Value") && strstr(buf, "1/(1-Percentile)"));
    ASSERT(strstr(buf, "1.000 0.750000000000          3"));
    ASSERT(strstr(buf, "#[Max     =     5000.000, Total count    =            4]"));
    free(buf);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"exact_below_256", test_exact_below_256},
        {"relative_error_bound", test_relative_error_bound},
        {"buckets_are_contiguous", test_buckets_are_contiguous},
        {"uniform_percentiles", test_uniform_percentiles},
        {"merge_equals_single", test_merge_equals_single},
        {"percentile_file_format", test_percentile_file_format},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
