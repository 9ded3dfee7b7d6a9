/* Linux-only: io_uring. What a port uses instead: docs/portability.md. */
/* What the io_uring users share (the uring model, yard-load's engine):
 * setting up a ring the best way the kernel allows, and a ring of provided
 * buffers that multishot receives fill. */
#ifndef YARD_URING_H
#define YARD_URING_H

#include <liburing.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A ring of `entries` submissions and `cq` completions, single issuer with
 * deferred task work where the kernel has them (6.1; *defer says whether),
 * plainly where it does not. The kernel must keep completions that overflow
 * the queue (IORING_FEAT_NODROP), else -EOPNOTSUPP. 0, or -errno. */
int yard_ring_init(struct io_uring *ring, unsigned entries, unsigned cq, bool *defer);

/* n buffers of size bytes (n a power of two) registered with a ring as
 * buffer group bgid; a completion names the one it filled. */
typedef struct yard_bufring {
    struct io_uring_buf_ring *br;
    size_t br_bytes;
    uint8_t *mem;
    unsigned n, size;
} yard_bufring_t;

/* 0, or -errno (nothing is left to free). */
int yard_bufring_init(yard_bufring_t *b, struct io_uring *ring, unsigned n, unsigned size,
                      int bgid);
/* After the ring is gone (or unregistered). */
void yard_bufring_fini(yard_bufring_t *b);
static inline uint8_t *yard_bufring_buf(const yard_bufring_t *b, unsigned bid)
{
    return b->mem + (size_t)bid * b->size;
}
/* The buffer is the kernel's again. */
void yard_bufring_return(yard_bufring_t *b, unsigned bid);
/* The buffer a receive completion carries (its flags), or -1. */
static inline int yard_bufring_bid(unsigned cqe_flags)
{
    return (cqe_flags & IORING_CQE_F_BUFFER) ? (int)(cqe_flags >> IORING_CQE_BUFFER_SHIFT) : -1;
}

#endif
