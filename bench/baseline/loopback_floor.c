/* The floor under any load generator on this machine: what the kernel
 * itself spends on one small TCP round trip over loopback, with no
 * generator code, no wake-ups and no scheduler in it.
 *
 * Both ends of N connections live in this one thread: a round is, per
 * connection, send at the client end, receive at the server end, send back,
 * receive at the client end. Every byte is checked (each message carries its
 * round and connection). Half the CPU time per round trip is one endpoint's
 * share: its send (on loopback that includes the receive processing into the
 * peer's socket) and its receive, which is exactly what a closed-loop
 * generator must pay per round trip whatever it does in user space. The
 * null system call's cost is measured too, so the share without the system
 * call entries (what batching them through io_uring could save at best) is
 * printed beside it.
 *
 * usage: yard-loopback-floor [--connections N] [--rounds R] [--size S]
 *                            [--congestion ALG] [--json] */
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_SIZE 4096

static void die(const char *what)
{
    fprintf(stderr, "yard-loopback-floor: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void usage(FILE *f, int status)
{
    fprintf(f, "usage: yard-loopback-floor [--connections N] [--rounds R] [--size S]\n"
               "                           [--congestion ALG] [--json]\n"
               "\n"
               "The kernel's own cost of a TCP round trip over loopback: N connections with\n"
               "both ends in this thread, R rounds of S-byte messages each way, every byte\n"
               "checked. Prints the CPU time per round trip, one endpoint's share of it\n"
               "(the least a closed-loop load generator can cost per round trip here), the\n"
               "cost of a null system call, and that share without its two system call\n"
               "entries.\n"
               "\n"
               "  --connections N  connections (default 150)\n"
               "  --rounds R       round trips per connection (default 2000)\n"
               "  --size S         bytes per message, 8..%d (default 16)\n"
               "  --congestion ALG TCP congestion control on every socket (default: the\n"
               "                   system's)\n"
               "  --json           one JSON object instead of the summary\n",
            MAX_SIZE);
    exit(status);
}

static long arg_long(const char *flag, const char *v, long lo, long hi)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < lo || n > hi) {
        fprintf(stderr, "yard-loopback-floor: %s: expected a whole number in %ld..%ld, got '%s'\n",
                flag, lo, hi, v);
        exit(2);
    }
    return n;
}

static double cpu_seconds(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
           (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

static void stamp(unsigned char *m, size_t size, uint32_t round, uint32_t conn, uint32_t dir)
{
    for (size_t i = 0; i < size; i++)
        m[i] = (unsigned char)(round * 131u + conn * 7u + dir * 3u + (uint32_t)i);
}

static void send_all(int fd, const unsigned char *m, size_t size)
{
    size_t off = 0;
    while (off < size) {
        ssize_t n = send(fd, m + off, size - off, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die("send");
        off += (size_t)n;
    }
}

static void recv_check(int fd, const unsigned char *want, size_t size)
{
    unsigned char got[MAX_SIZE];
    size_t off = 0;
    while (off < size) {
        ssize_t n = recv(fd, got + off, size - off, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0) {
            fprintf(stderr, "yard-loopback-floor: a connection closed early\n");
            exit(1);
        }
        if (n < 0)
            die("recv");
        off += (size_t)n;
    }
    if (memcmp(got, want, size) != 0) {
        fprintf(stderr, "yard-loopback-floor: received bytes differ from those sent\n");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    long conns = 150, rounds = 2000, size = 16;
    const char *cc = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            usage(stdout, 0);
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        if (strcmp(a, "--connections") && strcmp(a, "--rounds") && strcmp(a, "--size") &&
            strcmp(a, "--congestion")) {
            fprintf(stderr, "yard-loopback-floor: unknown option '%s'\n", a);
            usage(stderr, 2);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "yard-loopback-floor: %s needs a value\n", a);
            exit(2);
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--connections"))
            conns = arg_long(a, v, 1, 100000);
        else if (!strcmp(a, "--rounds"))
            rounds = arg_long(a, v, 1, 100000000);
        else if (!strcmp(a, "--size"))
            size = arg_long(a, v, 8, MAX_SIZE);
        else
            cc = v;
    }

    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l < 0)
        die("socket");
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t salen = sizeof sa;
    if (bind(l, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(l, 4096) < 0 ||
        getsockname(l, (struct sockaddr *)&sa, &salen) < 0)
        die("listening on 127.0.0.1");
    int *c = calloc((size_t)conns, sizeof *c), *s = calloc((size_t)conns, sizeof *s);
    if (!c || !s)
        die("calloc");
    int one = 1;
    for (long i = 0; i < conns; i++) {
        c[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c[i] < 0)
            die("socket (raise the descriptor limit for this many connections)");
        if (connect(c[i], (struct sockaddr *)&sa, sizeof sa) < 0)
            die("connect");
        s[i] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        if (s[i] < 0)
            die("accept");
        for (int k = 0; k < 2; k++) {
            int fd = k ? s[i] : c[i];
            if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
                die("TCP_NODELAY");
            if (cc && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc)) < 0)
                die("TCP_CONGESTION");
        }
    }
    close(l);

    unsigned char req[MAX_SIZE], rsp[MAX_SIZE];
    double t0 = cpu_seconds();
    for (long r = 0; r < rounds; r++)
        for (long i = 0; i < conns; i++) {
            stamp(req, (size_t)size, (uint32_t)r, (uint32_t)i, 0);
            send_all(c[i], req, (size_t)size);
            recv_check(s[i], req, (size_t)size);
            stamp(rsp, (size_t)size, (uint32_t)r, (uint32_t)i, 1);
            send_all(s[i], rsp, (size_t)size);
            recv_check(c[i], rsp, (size_t)size);
        }
    double spent = cpu_seconds() - t0;

    /* The null system call, measured the same way. */
    long calls = 2000000;
    double t1 = cpu_seconds();
    for (long k = 0; k < calls; k++)
        syscall(SYS_getppid);
    double call_s = (cpu_seconds() - t1) / (double)calls;

    double trips = (double)conns * (double)rounds;
    double both_us = spent / trips * 1e6, end_us = both_us / 2, less_us = end_us - 2 * call_s * 1e6;
    if (json)
        printf("{\"connections\": %ld, \"rounds\": %ld, \"size\": %ld, \"round_trips\": %.0f, "
               "\"cpu_s\": %.6f, \"both_ends_us\": %.4f, \"one_end_us\": %.4f, "
               "\"one_end_cpu_s_per_100k\": %.4f, \"null_syscall_us\": %.4f, "
               "\"one_end_less_syscalls_cpu_s_per_100k\": %.4f}\n",
               conns, rounds, size, trips, spent, both_us, end_us, end_us / 10, call_s * 1e6,
               less_us / 10);
    else
        printf("%.0f round trips of %ld B over %ld loopback connections, every byte checked\n"
               "both ends:             %.3f us of CPU per round trip\n"
               "one end (the floor):   %.3f us = %.4f s per 100k round trips\n"
               "a null system call:    %.3f us\n"
               "one end, less 2 calls: %.3f us = %.4f s per 100k round trips\n",
               trips, size, conns, both_us, end_us, end_us / 10, call_s * 1e6, less_us,
               less_us / 10);
    for (long i = 0; i < conns; i++) {
        close(c[i]);
        close(s[i]);
    }
    free(c);
    free(s);
    return 0;
}
