/* Linux-only: io_uring. What a port uses instead: docs/portability.md. */
/* Ring and provided-buffer set-up shared by the io_uring users (uring.h). */
#include "yard/uring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int yard_ring_init(struct io_uring *ring, unsigned entries, unsigned cq, bool *defer)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    p.cq_entries = cq;
    /* YARD_URING_PLAIN=1 takes the path of kernels before 6.1 here too (the
     * tests of that path; a diagnostic when the flags are suspected). */
    const char *plain = getenv("YARD_URING_PLAIN");
    int rc = plain && *plain && strcmp(plain, "0") ? -EINVAL
                                                   : io_uring_queue_init_params(entries, ring, &p);
    *defer = rc == 0;
    if (rc == -EINVAL) { /* before 6.1: neither flag */
        memset(&p, 0, sizeof p);
        p.flags = IORING_SETUP_CQSIZE;
        p.cq_entries = cq;
        rc = io_uring_queue_init_params(entries, ring, &p);
    }
    if (rc == 0 && !(p.features & IORING_FEAT_NODROP)) {
        io_uring_queue_exit(ring);
        return -EOPNOTSUPP;
    }
    return rc;
}

int yard_bufring_init(yard_bufring_t *b, struct io_uring *ring, unsigned n, unsigned size,
                      int bgid)
{
    memset(b, 0, sizeof *b);
    b->n = n;
    b->size = size;
    b->br_bytes = n * sizeof(struct io_uring_buf);
    void *br = mmap(NULL, b->br_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (br == MAP_FAILED)
        return -errno;
    b->br = br;
    b->mem = malloc((size_t)n * size);
    if (!b->mem) {
        yard_bufring_fini(b);
        return -ENOMEM;
    }
    struct io_uring_buf_reg reg = {.ring_addr = (uint64_t)(uintptr_t)br,
                                   .ring_entries = n,
                                   .bgid = (uint16_t)bgid};
    int rc = io_uring_register_buf_ring(ring, &reg, 0);
    if (rc < 0) {
        yard_bufring_fini(b);
        return rc;
    }
    io_uring_buf_ring_init(b->br);
    for (unsigned i = 0; i < n; i++)
        io_uring_buf_ring_add(b->br, yard_bufring_buf(b, i), size, (unsigned short)i,
                              io_uring_buf_ring_mask(n), (int)i);
    io_uring_buf_ring_advance(b->br, (int)n);
    return 0;
}

void yard_bufring_fini(yard_bufring_t *b)
{
    if (b->br)
        munmap(b->br, b->br_bytes);
    free(b->mem);
    b->br = NULL;
    b->mem = NULL;
}

void yard_bufring_return(yard_bufring_t *b, unsigned bid)
{
    io_uring_buf_ring_add(b->br, yard_bufring_buf(b, bid), b->size, (unsigned short)bid,
                          io_uring_buf_ring_mask(b->n), 0);
    io_uring_buf_ring_advance(b->br, 1);
}
