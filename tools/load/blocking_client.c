/* The yardstick for yard-load: the simplest thread-per-connection blocking
 * echo client (the shape of the echo client the Eve study used). Each
 * thread writes S bytes, reads them back, M times.
 *
 * usage: yard-blocking-client HOST:PORT CONNECTIONS MESSAGES SIZE
 * prints: round trips per second and the CPU it used. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "yard/clock.h"
#include "yard/net.h"

static yard_addr_t target;
static long messages, size;
static _Atomic long failures;

static void *client(void *arg)
{
    char err[256] = "", *tx = malloc((size_t)size), *rx = malloc((size_t)size);
    memset(tx, 'y', (size_t)size);
    const char *call = "";
    int fd = yard_connect(&target, false, &call);
    if (fd < 0)
        yard_net_message(err, sizeof err, &target, call, fd);
    if (fd < 0 || !tx || !rx) {
        fprintf(stderr, "yard-blocking-client: %s\n", fd < 0 ? err : "out of memory");
        failures++;
        return NULL;
    }
    yard_set_nodelay(fd);
    for (long m = 0; m < messages; m++) {
        if (yard_write_all(fd, tx, (size_t)size) < 0)
            goto fail;
        for (long got = 0; got < size;) {
            ssize_t n = read(fd, rx + got, (size_t)(size - got));
            if (n <= 0)
                goto fail;
            got += n;
        }
        if (memcmp(tx, rx, (size_t)size) != 0)
            goto fail;
    }
    close(fd);
    free(tx);
    free(rx);
    return NULL;
fail:
    failures++;
    close(fd);
    free(tx);
    free(rx);
    return NULL;
}

int main(int argc, char **argv)
{
    char err[256];
    if (argc != 5 || yard_addr_parse(argv[1], &target, err, sizeof err) < 0) {
        fprintf(stderr, "usage: yard-blocking-client HOST:PORT CONNECTIONS MESSAGES SIZE\n");
        return 2;
    }
    int conns = atoi(argv[2]);
    messages = atol(argv[3]);
    size = atol(argv[4]);
    if (conns < 1 || messages < 1 || size < 1) {
        fprintf(stderr, "yard-blocking-client: CONNECTIONS, MESSAGES and SIZE must be >= 1\n");
        return 2;
    }
    pthread_t *tids = calloc((size_t)conns, sizeof *tids);
    uint64_t t0 = yard_now_ns();
    for (int i = 0; i < conns; i++)
        pthread_create(&tids[i], NULL, client, NULL);
    for (int i = 0; i < conns; i++)
        pthread_join(tids[i], NULL);
    double secs = (double)(yard_now_ns() - t0) / 1e9;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
                 (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    printf("{\"throughput_per_s\": %.1f, \"duration_s\": %.3f, \"generator_cpu_s\": %.3f, "
           "\"failures\": %ld}\n",
           (double)conns * (double)messages / secs, secs, cpu, (long)failures);
    free(tids);
    return failures ? 1 : 0;
}
