/* The readiness API behind the event loops (loop.c), one small file per
 * backend: poller_epoll.c (Linux) and poller_poll.c (POSIX poll(2), the
 * portable one); a kqueue backend for the BSDs would be one more file with
 * these functions. Interest is level-triggered, per descriptor, with a
 * pointer handed back beside its events. Every function returns 0 (or a
 * count) or -errno, as libuv's do. */
#ifndef YARD_MODEL_POLLER_H
#define YARD_MODEL_POLLER_H

#include <stdint.h>

enum { YARD_POLL_IN = 1u, YARD_POLL_OUT = 2u, YARD_POLL_ERR = 4u, YARD_POLL_HUP = 8u };

typedef struct yard_poll_event {
    void *ptr;       /* as given to add or mod */
    uint32_t events; /* YARD_POLL_*: ERR and HUP come whether asked for or not */
} yard_poll_event_t;

typedef struct yard_poller yard_poller_t;

typedef struct yard_poller_ops {
    const char *name;
    int (*create)(yard_poller_t **out);
    int (*add)(yard_poller_t *p, int fd, uint32_t events, void *ptr);
    int (*mod)(yard_poller_t *p, int fd, uint32_t events, void *ptr);
    int (*del)(yard_poller_t *p, int fd);
    /* fd is about to be closed: a backend whose kernel set drops closed
     * descriptors by itself (epoll) does nothing, so the tuned loop makes
     * no extra system call; poll forgets the entry. */
    void (*forget)(yard_poller_t *p, int fd);
    /* Up to max events, waiting at most timeout_ms (-1: no limit); the
     * count, or -errno (-EINTR included). */
    int (*wait)(yard_poller_t *p, yard_poll_event_t *out, int max, int timeout_ms);
    void (*destroy)(yard_poller_t *p);
} yard_poller_ops_t;

/* Every poller starts with its ops. */
struct yard_poller {
    const yard_poller_ops_t *ops;
};

extern const yard_poller_ops_t yard_poller_epoll, yard_poller_poll;

/* The backends by yard_config_t.poller's value (YARD_POLLER_*). */
const yard_poller_ops_t *yard_poller_ops(int which);

#endif
