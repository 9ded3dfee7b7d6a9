/* Linux-only: signalfd, sched_getaffinity. What a port uses instead: docs/portability.md. */
#define _GNU_SOURCE /* accept4, sched_getaffinity, CPU_COUNT */

#include "yard/server.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "yard/clock.h"
#include "yard/log.h"
#include "yard/tls.h"

bool yard_server_admit(yard_server_t *srv, const char *peer)
{
    atomic_fetch_add(&srv->shared->accepted, 1);
    long max = srv->cfg->max_conns;
    long live = atomic_fetch_add(&srv->shared->live_conns, 1);
    if (max > 0 && live >= max) {
        atomic_fetch_sub(&srv->shared->live_conns, 1);
        atomic_fetch_add(&srv->shared->rejected, 1);
        yard_log_warn("%s: connection refused: --max-conns %ld reached", peer, max);
        return false;
    }
    return true;
}

void yard_server_release(yard_server_t *srv) { atomic_fetch_sub(&srv->shared->live_conns, 1); }

int yard_server_accept_failed(yard_server_t *srv, int listen_fd, int err, int *reserve_fd)
{
    static _Atomic uint64_t last_emfile_log;
    if (err != EMFILE && err != ENFILE) {
        yard_log_err("accept: %s", strerror(err));
        return 0;
    }
    /* Out of descriptors: the pending connections would keep the listener
     * readable forever, and their clients waiting. */
    int shed = yard_shed(listen_fd, YARD_SHED_BUDGET, reserve_fd);
    uint64_t now = yard_now_ns(), last = atomic_load(&last_emfile_log);
    if (now - last > YARD_NS_PER_S && atomic_compare_exchange_strong(&last_emfile_log, &last, now))
        yard_log_err("accept: %s: shedding connections", strerror(err));
    atomic_fetch_add(&srv->shared->rejected, shed > 0 ? (unsigned long)shed : 1ul);
    return shed;
}

bool yard_accept_retry(int err)
{
    return err == EINTR || err == ECONNABORTED || err == EPROTO;
}

int yard_server_accept(yard_server_t *srv, int listen_fd, bool nonblock, int *reserve_fd)
{
    for (;;) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0));
        if (fd >= 0)
            return fd;
        if (yard_accept_retry(errno))
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            yard_server_accept_failed(srv, listen_fd, errno, reserve_fd);
        return -1;
    }
}

int yard_server_admit_fd(yard_server_t *srv, int fd, char *peer, size_t peerlen)
{
    yard_addr_t pa;
    if (yard_peer_name(fd, &pa) == 0)
        yard_addr_format(&pa, peer, peerlen);
    else
        snprintf(peer, peerlen, "(unknown peer)");
    if (yard_server_admit(srv, peer))
        return fd;
    close(fd);
    return -1;
}

int yard_server_accept_admitted(yard_server_t *srv, int listen_fd, bool nonblock, int *reserve_fd,
                                char *peer, size_t peerlen)
{
    for (;;) {
        int fd = yard_server_accept(srv, listen_fd, nonblock, reserve_fd);
        if (fd < 0)
            return -1;
        if (yard_server_admit_fd(srv, fd, peer, peerlen) >= 0)
            return fd;
    }
}

/* The blocking models' accept loop. Each fork or thread costs far more
 * than an accept (a fork about 0.3 ms here, an accept a few µs), so under a
 * burst the kernel's accept queue grows, and a client that connects during
 * it waits behind the whole queue: 5,000 connections that connect, send a
 * line and close kept a login waiting over a second (docs/results.md,
 * issue 44). The loop therefore takes the queue into its own hands: it
 * accepts a batch at a time, hands the connections whose peer is still
 * there to on_conn at once, and keeps those whose peer has already hung up
 * (POLLRDHUP: they sent their last bytes and can only be answered) in a
 * queue of its own, served a few per turn. Nothing is dropped: the hung-up
 * connections are served in their order, only after the live ones; when
 * that queue is full they are served as they come. --max-conns applies when
 * a connection is handed over, so a waiting hung-up connection holds no
 * slot. At the stop, the hung-up connections not yet served are closed, as
 * the kernel closes what is left in its queue. */
#define ACCEPT_BATCH 64 /* connections accepted per turn of the loop */
#define HUNG_UP_BATCH 4 /* hung-up connections handed over per turn */

struct hung_up {
    int *fd;
    size_t head, n, cap;
};

static void hung_up_init(struct hung_up *q, const yard_server_t *srv)
{
    /* As many as the listen backlog (the kernel would have held them),
     * within a quarter of the descriptors the process may open. */
    size_t cap = srv->cfg->backlog > 0 ? (size_t)srv->cfg->backlog : 128;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / 4 < cap)
        cap = (size_t)(rl.rlim_cur / 4);
    *q = (struct hung_up){.fd = cap ? malloc(cap * sizeof *q->fd) : NULL};
    q->cap = q->fd ? cap : 0;
}

static bool hung_up_push(struct hung_up *q, int fd)
{
    if (q->n == q->cap)
        return false;
    q->fd[(q->head + q->n++) % q->cap] = fd;
    return true;
}

static int hung_up_pop(struct hung_up *q)
{
    int fd = q->fd[q->head];
    q->head = (q->head + 1) % q->cap;
    q->n--;
    return fd;
}

struct accept_loop {
    yard_server_t *srv;
    void (*on_conn)(int fd, const char *peer, void *arg);
    void *arg;
    struct hung_up hung;
};

static void hand_over(struct accept_loop *al, int fd, bool hung_up)
{
    char peer[YARD_ADDR_STRLEN];
    if (yard_server_admit_fd(al->srv, fd, peer, sizeof peer) < 0)
        return;
    yard_log_debug("%s: connection accepted%s", peer,
                   hung_up ? " (its peer had hung up: served after the live ones)" : "");
    al->on_conn(fd, peer, al->arg);
}

/* Up to ACCEPT_BATCH connections from one listener: the live ones handed
 * over in order, the hung-up ones queued. */
static void accept_batch(struct accept_loop *al, int listen_fd, int *reserve)
{
    struct pollfd got[ACCEPT_BATCH];
    nfds_t n = 0;
    int fd;
    while (n < ACCEPT_BATCH && (fd = yard_server_accept(al->srv, listen_fd, false, reserve)) >= 0)
        got[n++] = (struct pollfd){.fd = fd, .events = POLLRDHUP};
    if (n == 0)
        return;
    if (poll(got, n, 0) < 0) /* not expected; then every one counts as live */
        for (nfds_t i = 0; i < n; i++)
            got[i].revents = 0;
    for (nfds_t i = 0; i < n; i++) {
        bool hung = got[i].revents & (POLLRDHUP | POLLHUP | POLLERR);
        if (!hung || !hung_up_push(&al->hung, got[i].fd))
            hand_over(al, got[i].fd, hung);
    }
}

void yard_server_accept_loop(yard_server_t *srv, void (*on_conn)(int fd, const char *peer, void *arg),
                             void (*on_signal)(int sig, void *arg), void *arg)
{
    struct accept_loop al = {.srv = srv, .on_conn = on_conn, .arg = arg};
    hung_up_init(&al.hung, srv);
    int reserve = yard_reserve_fd_open();
    int n = srv->ls.n;
    struct pollfd pfd[YARD_MAX_LISTEN + 1];
    pfd[0] = (struct pollfd){.fd = srv->sig_fd, .events = POLLIN};
    for (int i = 0; i < n; i++)
        pfd[1 + i] = (struct pollfd){.fd = srv->ls.fd[i], .events = POLLIN};
    for (;;) {
        /* Hung-up connections waiting: look, but do not sleep. */
        if (poll(pfd, (nfds_t)(n + 1), al.hung.n ? 0 : -1) < 0) {
            if (errno == EINTR)
                continue;
            yard_log_err("poll: %s", strerror(errno));
            break;
        }
        /* A batch per listener, then the signals again: under a burst of
         * connections the queue never empties, and a loop that drained it
         * would neither reap the exited children (whose slots count against
         * --max-conns) nor see SIGTERM until the burst ended. */
        if (pfd[0].revents && yard_signals_stop(srv->sig_fd, on_signal, arg))
            break;
        for (int i = 0; i < n; i++)
            if (pfd[1 + i].revents)
                accept_batch(&al, srv->ls.fd[i], &reserve);
        for (int k = 0; k < HUNG_UP_BATCH && al.hung.n; k++)
            hand_over(&al, hung_up_pop(&al.hung), true);
    }
    if (al.hung.n)
        yard_log_warn("closing %zu connections whose peers had hung up, not served before the stop",
                      al.hung.n);
    while (al.hung.n)
        close(hung_up_pop(&al.hung));
    free(al.hung.fd);
    if (reserve >= 0)
        close(reserve);
}

void yard_listen_set_close(yard_listen_set_t *s)
{
    for (int i = 0; i < s->n; i++)
        if (s->fd[i] >= 0)
            close(s->fd[i]);
    s->n = 0;
}

static void set_port(yard_addr_t *a, int port)
{
    if (a->ss.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&a->ss)->sin6_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in *)&a->ss)->sin_port = htons((uint16_t)port);
}

/* One attempt at opening every address of a group on one port: 0, -1 (err
 * set), or -EADDRINUSE when the port the kernel chose for the group's first
 * address was taken on another (the caller tries again). */
static int listen_group(yard_server_t *srv, const yard_addr_list_t *want, bool tls, bool reuseport,
                        char *err, size_t errlen)
{
    const char *flag = tls ? "--tls-listen" : "--listen";
    int port = yard_addr_port(&want->a[0]);
    int first = srv->ls.n, opened = 0;
    for (int i = 0; i < want->n; i++) {
        if (srv->ls.n == YARD_MAX_LISTEN) {
            snprintf(err, errlen, "more than %d listening addresses in all", YARD_MAX_LISTEN);
            return -1;
        }
        yard_addr_t a = want->a[i];
        if (opened > 0)
            set_port(&a, port); /* the first one's, when the kernel chose it */
        const char *call = "";
        int fd = yard_listen(&a, srv->cfg->backlog, reuseport, srv->cfg->ipv6_only, &call);
        if (fd < 0) {
            int e = -fd;
            yard_net_message(err, errlen, &a, call, fd);
            if (want->named && (e == EADDRNOTAVAIL || e == EAFNOSUPPORT)) {
                yard_log_warn("skipping an address of %s: %s", flag, err);
                continue;
            }
            bool chosen = yard_addr_port(&want->a[0]) == 0 && opened > 0;
            return chosen && e == EADDRINUSE ? -EADDRINUSE : -1;
        }
        int k = srv->ls.n++;
        srv->ls.fd[k] = fd;
        srv->bound_tls[k] = tls;
        yard_sock_name(fd, &srv->bound[k]);
        if (opened++ == 0)
            port = yard_addr_port(&srv->bound[first]);
    }
    if (opened == 0) {
        snprintf(err, errlen, "none of the addresses %s names can be used", flag);
        return -1;
    }
    return 0;
}

/* One attempt at every group: --listen's, then each --tls-listen's. */
static int listen_all(yard_server_t *srv, bool reuseport, char *err, size_t errlen)
{
    const yard_config_t *cfg = srv->cfg;
    srv->ls.n = 0;
    int rc = 0;
    if (cfg->listen.n)
        rc = listen_group(srv, &cfg->listen, false, reuseport, err, errlen);
    for (int g = 0; rc == 0 && g < cfg->tls_listen.n; g++)
        rc = listen_group(srv, &cfg->tls_listen.group[g], true, reuseport, err, errlen);
    if (rc < 0)
        yard_listen_set_close(&srv->ls);
    srv->nbound = srv->ls.n;
    srv->tls_port = 0;
    for (int i = srv->nbound - 1; i >= 0; i--)
        if (srv->bound_tls[i])
            srv->tls_port = (uint16_t)yard_addr_port(&srv->bound[i]);
    return rc;
}

int yard_server_listen(yard_server_t *srv, bool reuseport, char *err, size_t errlen)
{
    int rc = -EADDRINUSE;
    for (int attempt = 0; attempt < 16 && rc == -EADDRINUSE; attempt++)
        rc = listen_all(srv, reuseport, err, errlen);
    return rc < 0 ? -1 : 0;
}

void yard_server_format_bound(const yard_server_t *srv, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < srv->ls.n && used < len; i++) {
        char where[YARD_ADDR_STRLEN];
        yard_addr_format(&srv->bound[i], where, sizeof where);
        int w = snprintf(buf + used, len - used, "%s%s%s", i ? " " : "",
                         srv->bound_tls[i] ? "tls:" : "", where);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/* The same address, or a wildcard listener's port and family. */
static bool local_matches(const yard_addr_t *bound, const yard_addr_t *local, bool exact)
{
    if (bound->ss.ss_family != local->ss.ss_family ||
        yard_addr_port(bound) != yard_addr_port(local))
        return false;
    if (!exact)
        return true;
    if (bound->ss.ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)&bound->ss)->sin6_addr,
                      &((const struct sockaddr_in6 *)&local->ss)->sin6_addr,
                      sizeof(struct in6_addr)) == 0;
    return ((const struct sockaddr_in *)&bound->ss)->sin_addr.s_addr ==
           ((const struct sockaddr_in *)&local->ss)->sin_addr.s_addr;
}

bool yard_server_fd_is_tls(const yard_server_t *srv, int fd)
{
    if (!srv->tls)
        return false;
    int ntls = 0;
    for (int i = 0; i < srv->nbound; i++)
        ntls += srv->bound_tls[i];
    if (ntls == srv->nbound)
        return true; /* TLS only (a model's own listener sets copy these) */
    yard_addr_t local;
    if (yard_sock_name(fd, &local) < 0)
        return false;
    /* An exact address first: two groups may share a port on different
     * addresses; then a wildcard listener (the IPv4-mapped [::] included). */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < srv->nbound; i++)
            if (local_matches(&srv->bound[i], &local, pass == 0))
                return srv->bound_tls[i];
    return false;
}

int yard_signals_setup(char *err, size_t errlen)
{
    /* A peer that vanishes must cost its connection, not the server. */
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0) {
        snprintf(err, errlen, "sigprocmask: %s", strerror(errno));
        return -1;
    }
    int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0)
        snprintf(err, errlen, "signalfd: %s", strerror(errno));
    return fd;
}

/* One signal from sig_fd: its number, 0 if none is pending, -1 on error. */
static int signal_take(int sig_fd)
{
    struct signalfd_siginfo si;
    ssize_t n = read(sig_fd, &si, sizeof si);
    if (n == (ssize_t)sizeof si)
        return (int)si.ssi_signo;
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    return -1;
}

static yard_shared_t *stop_shared;
static yard_tls_ctx_t *hup_tls;

void yard_server_reload_on_hup(yard_tls_ctx_t *tls) { hup_tls = tls; }

/* SIGHUP: the certificate and key again, from the same files. */
static void reload_tls(void)
{
    if (!hup_tls) {
        yard_log_info("SIGHUP: nothing to reload (no --tls-listen)");
        return;
    }
    char err[512];
    if (yard_tls_ctx_reload(hup_tls, err, sizeof err) < 0)
        yard_log_err("SIGHUP: keeping the certificate in use: %s", err);
    else
        yard_log_info("SIGHUP: reloaded the TLS certificate and key");
}

void yard_stopping_attach(yard_shared_t *shared) { stop_shared = shared; }

bool yard_stopping(void)
{
    return stop_shared && atomic_load_explicit(&stop_shared->stopping, memory_order_acquire);
}

int yard_signals_stop(int sig_fd, void (*on_other)(int sig, void *arg), void *arg)
{
    int stop = 0, sig;
    while ((sig = signal_take(sig_fd)) > 0) {
        if (sig == SIGTERM || sig == SIGINT)
            stop = 1;
        else if (sig == SIGHUP)
            reload_tls();
        if (sig != SIGTERM && sig != SIGINT && on_other)
            on_other(sig, arg);
    }
    /* Before any connection is ended for it, so apps can tell a stop from
     * a peer that left (yard_stopping). */
    if (stop && stop_shared)
        atomic_store_explicit(&stop_shared->stopping, 1, memory_order_release);
    return sig < 0 ? -1 : stop;
}

int yard_cpus_available(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) < 0)
        return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}
