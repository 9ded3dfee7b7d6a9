/* --tls, what every mode's connections share (load.h): sending the records
 * TLS wrote, and counting a finished handshake. */
#include <errno.h>
#include <sys/socket.h>

#include "load.h"
#include "yard/clock.h"
#include "yard/tls.h"

int load_tls_flush(struct yard_tls *t, yard_buf_t *wire, int fd)
{
    if (t && yard_tls_take(t, wire) < 0)
        return -ENOMEM;
    while (wire->len) {
        ssize_t w = send(fd, yard_buf_head(wire), wire->len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return errno == EAGAIN ? 0 : -errno;
        yard_buf_consume(wire, (size_t)w);
    }
    return 1;
}

void load_tls_established(load_result_t *r, const struct yard_tls *t, uint64_t began_ns)
{
    yard_hist_record(&r->tls_handshake, yard_now_ns() - began_ns);
    if (yard_tls_resumed(t))
        r->tls_resumed++;
    else
        r->tls_full++;
}
