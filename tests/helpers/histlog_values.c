/* Writes yard-load's interval log of chosen values, to pin its encoding:
 * `yard-test-histlog FILE I:V ...` records V nanoseconds in interval I,
 * over a run of as many seconds as the last interval, starting at 1000 s
 * after the epoch. The tests decode the file with the hdrhistogram package
 * and compare every count. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/load/load.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: yard-test-histlog FILE I:V ...\n");
        return 2;
    }
    load_result_t r;
    memset(&r, 0, sizeof r);
    r.t0_real = 1000.0;
    uint64_t last = 0;
    for (int i = 2; i < argc; i++) {
        char *colon = strchr(argv[i], ':');
        if (!colon) {
            fprintf(stderr, "yard-test-histlog: expected I:V, got '%s'\n", argv[i]);
            return 2;
        }
        uint64_t iv = strtoull(argv[i], NULL, 10), v = strtoull(colon + 1, NULL, 10);
        if (load_interval_record(&r, iv * 1000000000ull, v) < 0)
            return 1;
        if (iv > last)
            last = iv;
    }
    r.start_ns = 1;
    r.end_ns = 1 + (last + 1) * 1000000000ull;
    FILE *f = fopen(argv[1], "w");
    char err[256];
    if (!f || load_hist_log_write(f, &r, err, sizeof err) < 0 || fclose(f) != 0) {
        fprintf(stderr, "yard-test-histlog: cannot write %s\n", argv[1]);
        return 1;
    }
    load_intervals_free(&r);
    return 0;
}
