/* --hist-log: the latencies of the measured window as an HdrHistogram
 * interval log, one histogram per second, so that the logs of several
 * load hosts can be added exactly (docs/load.md).
 *
 * yard_hist_t has HdrHistogram's bucket layout for a lowest discernible
 * value of 1 and 2 significant digits (256 exact buckets, then 128 per
 * power of two), so its counts are encoded index for index in the V2
 * format: a big-endian header (cookie, payload length, normalizing offset,
 * digits, lowest, highest, conversion ratio), then the counts as ZigZag
 * LEB128 numbers with runs of zeros written as one negative count. The log
 * line carries that, deflated behind the compressed-encoding cookie, in
 * base64. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "load.h"

#define V2_COOKIE 0x1c849313u            /* V2 encoding, word-size nibble 0x10 */
#define V2_COMPRESSED_COOKIE 0x1c849314u /* the same, deflated */
#define HEADER_BYTES 40
#define NS_PER_S 1000000000ull

/* --- recording ------------------------------------------------------------ */

/* Room for interval i in r's array (grown by doubling; NULL until used). */
static int reserve(load_result_t *r, size_t i)
{
    if (i < r->ivcap)
        return 0;
    size_t n = r->ivcap ? r->ivcap : 8;
    while (n <= i)
        n *= 2;
    yard_hist_t **iv = realloc(r->iv, n * sizeof *iv);
    if (!iv)
        return -1;
    memset(iv + r->ivcap, 0, (n - r->ivcap) * sizeof *iv);
    r->iv = iv;
    r->ivcap = n;
    return 0;
}

int load_interval_record(load_result_t *r, uint64_t since_t0_ns, uint64_t latency_ns)
{
    size_t i = (size_t)(since_t0_ns / NS_PER_S);
    if (reserve(r, i) < 0)
        return -1;
    if (!r->iv[i]) {
        r->iv[i] = malloc(sizeof(yard_hist_t));
        if (!r->iv[i])
            return -1;
        yard_hist_init(r->iv[i]);
    }
    if (i + 1 > r->niv)
        r->niv = i + 1;
    yard_hist_record(r->iv[i], latency_ns);
    return 0;
}

int load_intervals_merge(load_result_t *into, load_result_t *from)
{
    for (size_t i = 0; i < from->niv; i++) {
        if (!from->iv[i])
            continue;
        if (reserve(into, i) < 0)
            return -1;
        if (i + 1 > into->niv)
            into->niv = i + 1;
        if (!into->iv[i]) { /* take it over */
            into->iv[i] = from->iv[i];
            from->iv[i] = NULL;
        } else {
            yard_hist_merge(into->iv[i], from->iv[i]);
        }
    }
    return 0;
}

void load_intervals_free(load_result_t *r)
{
    for (size_t i = 0; i < r->niv; i++)
        free(r->iv[i]);
    free(r->iv);
    r->iv = NULL;
    r->niv = r->ivcap = 0;
}

/* --- encoding ------------------------------------------------------------- */

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (24 - 8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

/* ZigZag, then LEB128 of at most 9 bytes: eight of 7 bits, the ninth whole. */
static size_t put_zigzag(uint8_t *p, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    size_t n = 0;
    while (n < 8 && z >= 0x80) {
        p[n++] = (uint8_t)(z | 0x80);
        z >>= 7;
    }
    p[n++] = (uint8_t)z;
    return n;
}

/* The V2 encoding of h (values above `highest` counted in its bucket);
 * malloc'ed, *len its size. */
static uint8_t *encode_v2(const yard_hist_t *h, uint64_t highest, size_t *len)
{
    size_t top = yard_hist_index(highest);
    uint64_t *counts = calloc(top + 1, sizeof *counts);
    /* at most 9 bytes per count */
    uint8_t *out = malloc(HEADER_BYTES + 9 * (top + 1));
    if (!counts || !out) {
        free(counts);
        free(out);
        return NULL;
    }
    size_t limit = 0; /* one past the last non-zero count */
    for (size_t i = 0; i < YARD_HIST_BUCKETS; i++) {
        if (!h->buckets[i])
            continue;
        size_t k = i < top ? i : top;
        counts[k] += h->buckets[i];
        if (k + 1 > limit)
            limit = k + 1;
    }
    size_t n = HEADER_BYTES;
    for (size_t i = 0; i < limit;) {
        if (counts[i]) {
            n += put_zigzag(out + n, (int64_t)counts[i++]);
            continue;
        }
        size_t zeros = 0;
        while (i < limit && !counts[i]) {
            zeros++;
            i++;
        }
        n += put_zigzag(out + n, zeros > 1 ? -(int64_t)zeros : 0);
    }
    free(counts);
    put32(out, V2_COOKIE);
    put32(out + 4, (uint32_t)(n - HEADER_BYTES));
    put32(out + 8, 0); /* normalizing index offset */
    put32(out + 12, LOAD_HIST_DIGITS);
    put64(out + 16, 1); /* lowest discernible value */
    put64(out + 24, highest);
    double ratio = 1.0;
    uint64_t bits;
    memcpy(&bits, &ratio, sizeof bits);
    put64(out + 32, bits);
    *len = n;
    return out;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int put_base64(FILE *f, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        char q[4] = {b64[v >> 18], b64[(v >> 12) & 63], i + 1 < n ? b64[(v >> 6) & 63] : '=',
                     i + 2 < n ? b64[v & 63] : '='};
        if (fwrite(q, 1, 4, f) != 4)
            return -1;
    }
    return 0;
}

/* One interval's line: relative start, length, max in milliseconds, the
 * compressed histogram. */
static int put_interval(FILE *f, double start_s, double length_s, const yard_hist_t *h,
                        char *err, size_t errlen)
{
    size_t raw_len = 0;
    uint8_t *raw = encode_v2(h, LOAD_HIST_HIGHEST_NS, &raw_len);
    uLongf zlen = compressBound((uLong)raw_len);
    uint8_t *z = raw ? malloc(8 + zlen) : NULL;
    if (!z) {
        free(raw);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int zrc = compress2(z + 8, &zlen, raw, (uLong)raw_len, Z_DEFAULT_COMPRESSION);
    free(raw);
    if (zrc != Z_OK) {
        free(z);
        snprintf(err, errlen, "deflate failed (%d)", zrc);
        return -1;
    }
    put32(z, V2_COMPRESSED_COOKIE);
    put32(z + 4, (uint32_t)zlen);
    fprintf(f, "%.3f,%.3f,%.3f,", start_s, length_s, (double)h->max / 1e6);
    int rc = put_base64(f, z, 8 + zlen);
    free(z);
    if (rc < 0 || fputc('\n', f) == EOF) {
        snprintf(err, errlen, "%s", strerror(errno));
        return -1;
    }
    return 0;
}

/* Every second of the run gets a line, empty or not (a stall shows as
 * empty intervals, not as a gap). */
size_t load_hist_log_intervals(const load_result_t *r)
{
    uint64_t run_ns = r->end_ns > r->start_ns ? r->end_ns - r->start_ns : 0;
    size_t n = (size_t)((run_ns + NS_PER_S - 1) / NS_PER_S);
    return r->niv > n ? r->niv : n;
}

int load_hist_log_write(FILE *f, const load_result_t *r, char *err, size_t errlen)
{
    time_t secs = (time_t)r->t0_real;
    struct tm tm;
    char when[64];
    gmtime_r(&secs, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(f, "#[yard-load interval log: latencies in nanoseconds, Interval_Max in ms]\n");
    fprintf(f, "#[StartTime: %.6f (seconds since epoch), %s]\n", r->t0_real, when);
    fprintf(f, "#[BaseTime: %.6f (seconds since epoch)]\n", r->t0_real);
    fprintf(f, "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\","
               "\"Interval_Compressed_Histogram\"\n");
    double run_s = r->end_ns > r->start_ns ? (double)(r->end_ns - r->start_ns) / 1e9 : 0;
    size_t last = load_hist_log_intervals(r);
    yard_hist_t *empty = malloc(sizeof *empty);
    if (!empty) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    yard_hist_init(empty);
    int rc = 0;
    for (size_t i = 0; i < last && rc == 0; i++) {
        double len = run_s - (double)i;
        len = len > 1.0 || len <= 0 ? 1.0 : len;
        const yard_hist_t *h = i < r->niv && r->iv[i] ? r->iv[i] : empty;
        rc = put_interval(f, (double)i, len, h, err, errlen);
    }
    free(empty);
    return rc;
}

