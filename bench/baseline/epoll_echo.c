/* Linux-only: epoll, signalfd. What a port uses instead: docs/portability.md. */
/* The smallest honest epoll echo server: the yardstick for the engine's
 * overhead. The `epoll` model should come within 5% of it (make bench
 * measures both in one run). Level-triggered like the engine, one read per
 * event, reply written straight back; what cannot be sent at once is kept
 * per connection so the comparison stays byte-exact under pressure.
 *
 * With --sink FILE it is the smallest honest sink instead: what it reads is
 * appended to FILE (one write per read, like yard-serve's --flush each) and
 * nothing is sent back; the yardstick for the sink app's CPU.
 *
 * usage: yard-baseline-echo HOST:PORT [--sink FILE]   (prints "listening HOST:PORT") */
#define _GNU_SOURCE /* accept4 */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

struct pending {
    char *data;
    size_t len;
};

static void die(const char *what)
{
    fprintf(stderr, "yard-baseline-echo: %s: %s\n", what, strerror(errno));
    exit(1);
}

int main(int argc, char **argv)
{
    bool sinking = argc == 4 && !strcmp(argv[2], "--sink");
    if ((argc != 2 && !sinking) || !strchr(argv[1], ':')) {
        fprintf(stderr, "usage: yard-baseline-echo IPV4:PORT [--sink FILE]\n");
        return 2;
    }
    int sink = sinking ? open(argv[3], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
    if (sinking && sink < 0)
        die(argv[3]);
    char host[64];
    snprintf(host, sizeof host, "%.*s", (int)(strrchr(argv[1], ':') - argv[1]), argv[1]);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)atoi(strrchr(argv[1], ':') + 1))};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        fprintf(stderr, "yard-baseline-echo: bad IPv4 address '%s'\n", host);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0)
        die("bind");
    if (listen(lfd, 4096) < 0)
        die("listen");
    socklen_t sl = sizeof sa;
    getsockname(lfd, (struct sockaddr *)&sa, &sl);
    printf("listening %s:%d\n", host, ntohs(sa.sin_port));
    fflush(stdout);

    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    ev.data.fd = sfd;
    epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
    size_t npend = 1024;
    struct pending *pend = calloc(npend, sizeof *pend);
    static char buf[65536];
    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(ep, events, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            if (fd == sfd) { /* SIGTERM or SIGINT: give everything back and exit 0 */
                for (size_t k = 0; k < npend; k++)
                    free(pend[k].data);
                free(pend);
                if (sink >= 0)
                    close(sink);
                return 0;
            }
            if (fd == lfd) {
                int c;
                while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    if ((size_t)c >= npend) {
                        size_t old = npend;
                        while ((size_t)c >= npend)
                            npend *= 2;
                        pend = realloc(pend, npend * sizeof *pend);
                        memset(pend + old, 0, (npend - old) * sizeof *pend);
                    }
                    struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
                }
                continue;
            }
            struct pending *p = &pend[fd];
            if (events[i].events & EPOLLOUT) {
                ssize_t w = send(fd, p->data, p->len, MSG_NOSIGNAL);
                if (w > 0) {
                    memmove(p->data, p->data + w, p->len - (size_t)w);
                    p->len -= (size_t)w;
                }
                if (p->len == 0) {
                    struct epoll_event cev = {.events = EPOLLIN, .data.fd = fd};
                    epoll_ctl(ep, EPOLL_CTL_MOD, fd, &cev);
                }
                continue;
            }
            ssize_t r = read(fd, buf, sizeof buf);
            if (r <= 0) {
                if (r < 0 && errno == EAGAIN)
                    continue;
                free(p->data);
                *p = (struct pending){0};
                close(fd);
                continue;
            }
            if (sink >= 0) {
                for (ssize_t off = 0; off < r;) {
                    ssize_t k = write(sink, buf + off, (size_t)(r - off));
                    if (k < 0 && errno == EINTR)
                        continue;
                    if (k <= 0)
                        die("writing the sink file");
                    off += k;
                }
                continue;
            }
            ssize_t w = send(fd, buf, (size_t)r, MSG_NOSIGNAL);
            if (w < 0)
                w = 0;
            if (w < r) {
                p->data = realloc(p->data, p->len + (size_t)(r - w));
                memcpy(p->data + p->len, buf + w, (size_t)(r - w));
                p->len += (size_t)(r - w);
                struct epoll_event cev = {.events = EPOLLOUT, .data.fd = fd};
                epoll_ctl(ep, EPOLL_CTL_MOD, fd, &cev);
            }
        }
    }
}
