/* What yard-serve was asked to do, parsed from its command line: the
 * engine's settings and the models' (their flag tables fill these fields).
 * Apps keep their settings in their own structs (yard_app_t.opts). */
#ifndef YARD_CONFIG_H
#define YARD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "yard/net.h"

enum yard_flush_mode { YARD_FLUSH_EACH, YARD_FLUSH_BUFFERED };

/* The readiness API of the event-loop models (--poller). */
enum { YARD_POLLER_EPOLL = 0, YARD_POLLER_POLL = 1 };

typedef struct yard_config {
    const char *app;
    const char *model;
    yard_addr_list_t listen; /* every address --listen names (n 0: none, TLS only) */
    /* Each --tls-listen: the addresses it names, on one port. */
    struct yard_listen_groups {
        int n;
        yard_addr_list_t group[YARD_MAX_LISTEN];
    } tls_listen;
    const char *tls_cert;     /* PEM: the certificate, then its chain */
    const char *tls_key;      /* PEM: its private key */
    uint64_t tls_handshake_timeout_ns;
    int tls_handshake_inline; /* 1: loop models with a pool run handshakes on the loop itself */
    int workers;        /* 0: the model's default */
    long max_conns;     /* 0: unlimited */
    const char *out;    /* output file of apps that persist bytes (sink) */
    int flush;          /* enum yard_flush_mode */
    uint64_t idle_timeout_ns; /* 0: off */
    bool procs;         /* reactors: processes instead of threads */
    bool pair;          /* fork: papayaChat's RECV/SEND process pair per connection */
    int backlog;
    bool ipv6_only;     /* --listen [IPv6]: IPV6_V6ONLY 1 (else 0: [::] takes IPv4 too) */
    size_t max_sendq;   /* bytes queued for a peer before it is disconnected; 0: 8 MiB */
    size_t shm_bytes;   /* size of the shared region mapped before any fork */
    int offload_threads; /* event-loop models: job pool size; 0 runs jobs inline */
    int poller;         /* epoll, reactors: YARD_POLLER_* (src/model/poller.h) */
    bool stats;         /* uring: print each ring's counters at exit */
    int ring_bufs;      /* uring: receive buffers per ring (a power of two) */
    size_t ring_buf_size; /* uring: bytes per receive buffer */
    int ring_fixed_files; /* uring: register sockets with the ring (1) or not (0) */
    int background_fib;  /* --background-fib N: fib(N) computed beside the server; 0: off */
} yard_config_t;

#endif
