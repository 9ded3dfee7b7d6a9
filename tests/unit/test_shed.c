/* yard_shed_pending: the connections pending at a listener are accepted and
 * closed even when the process is out of descriptors, the listener stays
 * open for the next client, and the budget is kept. */
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test.h"
#include "yard/shed.h"

static int listener(struct sockaddr_in *sa)
{
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT(l >= 0);
    *sa = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof *sa;
    ASSERT_EQ(bind(l, (struct sockaddr *)sa, sizeof *sa), 0);
    ASSERT_EQ(listen(l, 64), 0);
    ASSERT_EQ(getsockname(l, (struct sockaddr *)sa, &len), 0);
    return l;
}

static int dial(const struct sockaddr_in *sa)
{
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT(c >= 0);
    ASSERT_EQ(connect(c, (const struct sockaddr *)sa, sizeof *sa), 0);
    return c;
}

/* The client's side of a shed connection: end of stream (or a reset), within 5 s. */
static void assert_closed_by_server(int c)
{
    struct pollfd p = {.fd = c, .events = POLLIN};
    ASSERT_EQ(poll(&p, 1, 5000), 1);
    char b;
    ssize_t n = recv(c, &b, 1, 0);
    ASSERT(n == 0 || (n < 0 && errno == ECONNRESET));
}

int main(void)
{
    struct sockaddr_in sa;
    int l = listener(&sa);

    /* Nothing pending: nothing shed. */
    ASSERT_EQ(yard_shed_pending(l, 100), 0);

    /* The budget: 5 pending, 3 then 2 shed. */
    int c[5];
    for (int i = 0; i < 5; i++)
        c[i] = dial(&sa);
    ASSERT_EQ(yard_shed_pending(l, 3), 3);
    ASSERT_EQ(yard_shed_pending(l, 100), 2);
    for (int i = 0; i < 5; i++) {
        assert_closed_by_server(c[i]);
        close(c[i]);
    }

    /* Out of descriptors: this process's own accept fails, the shedding
     * does not, and the listener is still ours afterwards. */
    int more[3];
    for (int i = 0; i < 3; i++)
        more[i] = dial(&sa);
    int top = dup(l) + 1; /* the lowest free descriptor, plus one */
    ASSERT(top > 1);
    close(top - 1);
    struct rlimit old, lim;
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
    lim = old;
    lim.rlim_cur = (rlim_t)top - 1; /* every descriptor below is taken */
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);
    ASSERT_EQ(accept4(l, NULL, NULL, SOCK_CLOEXEC), -1);
    ASSERT_EQ(errno, EMFILE);
    ASSERT_EQ(yard_shed_pending(l, 100), 3);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
    for (int i = 0; i < 3; i++) {
        assert_closed_by_server(more[i]);
        close(more[i]);
    }
    int next = dial(&sa);
    struct pollfd p = {.fd = l, .events = POLLIN};
    ASSERT_EQ(poll(&p, 1, 5000), 1);
    int s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    ASSERT(s >= 0);
    ASSERT_EQ(send(next, "hi", 2, 0), 2);
    char buf[2];
    ASSERT_EQ(recv(s, buf, 2, MSG_WAITALL), 2);
    ASSERT(buf[0] == 'h' && buf[1] == 'i');
    close(s);
    close(next);
    close(l);
    printf("test_shed: ok\n");
    return 0;
}
