/* Linux-only: close_range. Elsewhere yard_shed_pending reports ENOSYS; see docs/portability.md. */
/* Shedding pending connections when the process is out of descriptors.
 *
 * Accepting a connection only to close it needs a free descriptor. The
 * classic way keeps a reserve descriptor open and closes it just before the
 * accept; but every thread of the process allocates from the same table, so
 * with several loops another loop's accept (or the kernel's, for an
 * io_uring multishot accept) can take the slot the reserve freed, and the
 * connections pending at this loop's listener are never answered.
 *
 * On Linux a short-lived thread sheds instead, in a descriptor table of its
 * own: close_range(CLOSE_RANGE_UNSHARE) gives it a private copy, of which
 * it keeps only the listener. Its accepts cannot run out of descriptors
 * (unless the whole system is out: ENFILE) and nothing it frees can be
 * taken by anyone else; the pending connections are closed, so their
 * clients see a close, not a hang. The thread ends with the shedding, so
 * the copy never keeps a listener open after the server closed it. Where
 * that is unavailable (another kernel, or ENFILE), yard_shed spends a
 * reserve descriptor instead. */

#define _GNU_SOURCE /* accept4, close_range */

#include "yard/shed.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#if defined(__linux__) && defined(CLOSE_RANGE_UNSHARE)
struct shed_job {
    int listen_fd;
    int budget;
    int shed; /* connections accepted and closed */
    int err;  /* why it stopped early, or 0 */
};

static void *shed_main(void *p)
{
    struct shed_job *j = p;
    unsigned lfd = (unsigned)j->listen_fd;
    /* The first call unshares the table; the second works on the copy. */
    int r = lfd > 0 ? close_range(0, lfd - 1, CLOSE_RANGE_UNSHARE)
                    : close_range(1, ~0U, CLOSE_RANGE_UNSHARE);
    if (r == 0 && lfd > 0)
        r = close_range(lfd + 1, ~0U, 0);
    if (r < 0) {
        j->err = errno;
        return NULL;
    }
    while (j->shed < j->budget) {
        int fd = accept4(j->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) {
            close(fd);
            j->shed++;
        } else if (errno != EINTR && errno != ECONNABORTED && errno != EPROTO) {
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                j->err = errno;
            break;
        }
    }
    return NULL;
}

int yard_shed_pending(int listen_fd, int budget)
{
    struct shed_job j = {.listen_fd = listen_fd, .budget = budget};
    pthread_attr_t attr;
    pthread_t t;
    if (pthread_attr_init(&attr) != 0)
        return -1;
    pthread_attr_setstacksize(&attr, 64 * 1024);
    int e = pthread_create(&t, &attr, shed_main, &j);
    pthread_attr_destroy(&attr);
    if (e != 0) {
        errno = e;
        return -1;
    }
    pthread_join(t, NULL);
    if (j.shed == 0 && j.err) {
        errno = j.err;
        return -1;
    }
    return j.shed;
}
#else
int yard_shed_pending(int listen_fd, int budget)
{
    (void)listen_fd, (void)budget;
    errno = ENOSYS;
    return -1;
}
#endif

int yard_reserve_fd_open(void) { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

int yard_shed(int listen_fd, int budget, int *reserve_fd)
{
    int shed = yard_shed_pending(listen_fd, budget);
    if (shed >= 0 || !reserve_fd)
        return shed < 0 ? 0 : shed;
    shed = 0;
    if (*reserve_fd < 0)
        *reserve_fd = yard_reserve_fd_open(); /* lost earlier: take one again if free */
    while (*reserve_fd >= 0 && shed < budget) {
        close(*reserve_fd);
        int fd = accept(listen_fd, NULL, NULL);
        if (fd >= 0)
            close(fd);
        *reserve_fd = yard_reserve_fd_open();
        if (fd < 0)
            break;
        shed++;
    }
    return shed;
}
