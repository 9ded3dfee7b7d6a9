/* Linux-only: prctl. What a port uses instead: docs/portability.md. */
/* fork: a process per connection, blocking I/O in the child. The parent
 * only accepts, supervises and reaps (the OpenBSD privsep shape): it never
 * runs app code, so a child that crashes costs exactly one connection. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "models.h"
#include "yard/bus.h"
#include "yard/clock.h"
#include "yard/conn.h"
#include "yard/log.h"

/* --pair: the session both processes of a pair share, and its lock. */
struct pair_page {
    pthread_mutex_t mu;
    max_align_t session[];
};

static _Atomic int child_stop;
static int child_conn_fd = -1;
static const yard_app_t *child_app; /* its farewell, when the server stops */
static bool child_tls;              /* the connection speaks TLS */

/* SIGTERM in a child: end the connection. shutdown() is async-signal-safe
 * and wakes a read or write blocked on the socket, so the stop cannot be
 * lost between checking the flag and blocking. A TLS connection loses its
 * read side only: the child wakes from its read and seals its farewell and
 * close_notify on the way out (yard_conn_close); should it be blocked
 * sending to a peer that does not read, SIGALRM a second later takes the
 * rest (alarm, like shutdown, is async-signal-safe). */
static void child_on_signal(int sig)
{
    atomic_store(&child_stop, 1);
    if (child_conn_fd < 0)
        return;
    if (child_tls && sig != SIGALRM) {
        shutdown(child_conn_fd, SHUT_RD);
        alarm(1);
        return;
    }
    if (child_app && !child_tls)
        yard_conn_farewell_fd(child_app, child_conn_fd);
    shutdown(child_conn_fd, SHUT_RDWR);
}

static _Noreturn void run_child(yard_server_t *srv, int fd, pid_t parent, struct pair_page *pp);

static _Noreturn void fork_child(yard_server_t *srv, int fd, pid_t parent)
{
    run_child(srv, fd, parent, NULL);
}

static _Noreturn void run_child(yard_server_t *srv, int fd, pid_t parent, struct pair_page *pp)
{
    yard_listen_set_close(&srv->ls);
    close(srv->sig_fd);
    /* No process of the server may outlive it. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(0);
    child_conn_fd = fd;
    /* A plain connection's farewell goes from the signal handler; a TLS
     * connection's is sealed by yard_conn_close (clear text would break
     * the session). */
    child_tls = yard_server_fd_is_tls(srv, fd);
    child_app = srv->app;
    struct sigaction sa = {.sa_handler = child_on_signal}; /* no SA_RESTART */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if (child_tls) /* the rest of a stop (child_on_signal); a plain child keeps the default */
        sigaction(SIGALRM, &sa, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_UNBLOCK, &set, NULL);

    yard_conn_t *c = pp ? yard_conn_open_pair(srv, fd, &yard_blocking_policy, pp->session,
                                              &pp->mu, false)
                        : yard_conn_open(srv, fd, &yard_blocking_policy);
    if (!c) {
        yard_log_err("out of memory for a connection");
        _exit(1);
    }
    yard_scratch_t scratch = {0};
    yard_blocking_serve(c, &scratch, &child_stop);
    yard_conn_close(c, NULL);
    yard_scratch_free(&scratch);
    yard_log_flush(50); /* _exit skips atexit: queued log lines go now or are lost */
    _exit(0);
}

/* --pair: papayaChat's design. Each client gets two processes sharing the
 * socket and the app session (a MAP_SHARED page, callbacks under its
 * process-shared mutex): RECV runs the connection as the fork model does,
 * but without news watches; SEND waits for SIGUSR1, which every publish
 * sends to the whole process group, and then feeds the driver a wake-up
 * (app->news runs and what it produced is written). Unlike papayaChat's
 * pause(), SEND keeps SIGUSR1 blocked and takes it with sigtimedwait, so a
 * signal that arrives while it is writing is not lost. */

static void pair_noop(int sig) { (void)sig; }

/* Every publish, in every process of the server (the children inherit it). */
static void pair_publish_hook(void) { kill(0, SIGUSR1); }

/* The app closed the connection from news (the chat's KILL, relayed), in
 * SEND. Only RECV runs app->close, where the chat tells the others that the
 * client left; the client must not see the end before that is done, or it
 * could act on a server that still counts it in (its other devices, say).
 * So SEND ends only the reading side, which wakes RECV's read with the end
 * of input: RECV runs app->close and closes the socket, and its exit brings
 * SEND the parent's SIGTERM. Should RECV not get there within the grace
 * (blocked writing to a client that does not read), SEND ends the socket
 * for both. */
static void pair_hand_over(int fd, const sigset_t *set)
{
    shutdown(fd, SHUT_RD);
    uint64_t deadline = yard_now_ns() + YARD_STOP_GRACE_NS;
    for (uint64_t now; (now = yard_now_ns()) < deadline;) {
        uint64_t left = deadline - now;
        struct timespec ts = {.tv_sec = (time_t)(left / YARD_NS_PER_S),
                              .tv_nsec = (long)(left % YARD_NS_PER_S)};
        int sig = sigtimedwait(set, NULL, &ts);
        if (sig == SIGTERM || sig == SIGINT)
            return;
    }
    shutdown(fd, SHUT_RDWR);
}

static _Noreturn void pair_send(yard_server_t *srv, int fd, pid_t parent, struct pair_page *pp)
{
    yard_listen_set_close(&srv->ls);
    close(srv->sig_fd);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(0);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    /* The parent ignores SIGUSR1, and an ignored signal is discarded even
     * when blocked: give it an action so that it stays pending for us. */
    struct sigaction sa = {.sa_handler = pair_noop};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    yard_conn_t *c = yard_conn_open_pair(srv, fd, &yard_blocking_policy, pp->session, &pp->mu,
                                         true);
    if (!c) {
        yard_log_err("out of memory for a connection");
        _exit(1);
    }
    yard_scratch_t scratch = {0};
    for (;;) {
        struct timespec tick = {.tv_sec = 1};
        int sig = sigtimedwait(&set, NULL, &tick);
        if (sig == SIGTERM || sig == SIGINT)
            break;
        if (sig != SIGUSR1 && !(sig < 0 && errno == EAGAIN))
            continue;
        /* A wake-up (or a second without one: look anyway, cheaply). */
        yard_conn_on_wakeup(c, &scratch);
        if (yard_conn_next(c, &scratch).next == YARD_NEXT_CLOSE) {
            pair_hand_over(fd, &set);
            break;
        }
    }
    yard_conn_close(c, NULL);
    yard_scratch_free(&scratch);
    yard_log_flush(50);
    _exit(0);
}


static void fork_on_child_exit(pid_t pid, int status, void *arg);

static _Noreturn void pair_recv(yard_server_t *srv, int fd, pid_t parent, struct pair_page *pp)
{
    run_child(srv, fd, parent, pp);
}

struct fork_model {
    yard_server_t *srv;
    yard_children_t children;
    pid_t self;
    /* --pair: RECV pid -> SEND pid, so SEND goes when its RECV does. */
    struct {
        pid_t recv, send;
    } *pairs;
    size_t npairs, cap;
};

static void fork_on_child_exit(pid_t pid, int status, void *arg)
{
    struct fork_model *fm = arg;
    /* Stopped by us, or a --pair SEND half woken once too late. */
    static const int expected[] = {SIGTERM, SIGKILL, SIGUSR1, 0};
    yard_children_report(pid, status, "connection process", expected, NULL);
    if (!fm->srv->cfg->pair) {
        yard_server_release(fm->srv);
        return;
    }
    for (size_t i = 0; i < fm->npairs; i++) {
        if (fm->pairs[i].recv == pid) {
            if (fm->pairs[i].send)
                kill(fm->pairs[i].send, SIGTERM); /* its SEND half */
            fm->pairs[i].recv = 0;
            yard_server_release(fm->srv); /* one connection, counted once */
        }
        if (fm->pairs[i].send == pid)
            fm->pairs[i].send = 0;
        if (!fm->pairs[i].recv && !fm->pairs[i].send) {
            fm->pairs[i] = fm->pairs[--fm->npairs];
            i--;
        }
    }
}

static void pair_on_conn(struct fork_model *fm, int fd, const char *peer)
{
    size_t bytes = sizeof(struct pair_page) + fm->srv->app->session_size;
    struct pair_page *pp = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                                -1, 0);
    if (pp != MAP_FAILED && fm->npairs == fm->cap) {
        size_t cap = fm->cap ? fm->cap * 2 : 64;
        void *grown = realloc(fm->pairs, cap * sizeof *fm->pairs);
        if (grown) {
            fm->pairs = grown;
            fm->cap = cap;
        }
    }
    if (pp == MAP_FAILED || fm->npairs == fm->cap) {
        yard_log_err("%s: out of memory for a process pair: connection closed", peer);
        if (pp != MAP_FAILED)
            munmap(pp, bytes);
        close(fd);
        yard_server_release(fm->srv);
        return;
    }
    yard_shm_mutex_init(&pp->mu);
    pid_t recv = fork();
    if (recv == 0)
        pair_recv(fm->srv, fd, fm->self, pp);
    pid_t send = recv > 0 ? fork() : -1;
    if (send == 0)
        pair_send(fm->srv, fd, fm->self, pp);
    close(fd);
    munmap(pp, bytes); /* the children keep their mappings */
    if (recv < 0 || send < 0) {
        yard_log_err("%s: fork: %s: connection closed", peer, strerror(errno));
        if (recv > 0)
            kill(recv, SIGKILL);
        if (recv < 0)
            yard_server_release(fm->srv);
    }
    if (recv > 0 && yard_children_add(&fm->children, recv) < 0)
        kill(recv, SIGKILL);
    if (send > 0 && yard_children_add(&fm->children, send) < 0)
        kill(send, SIGKILL);
    if (recv > 0) {
        fm->pairs[fm->npairs].recv = recv;
        fm->pairs[fm->npairs].send = send > 0 ? send : 0;
        fm->npairs++;
    }
}

static void fork_on_conn(int fd, const char *peer, void *arg)
{
    struct fork_model *fm = arg;
    if (fm->srv->cfg->pair) {
        pair_on_conn(fm, fd, peer);
        return;
    }
    pid_t pid = fork();
    if (pid == 0)
        fork_child(fm->srv, fd, fm->self);
    close(fd);
    if (pid < 0) {
        yard_log_err("%s: fork: %s: connection closed", peer, strerror(errno));
        yard_server_release(fm->srv);
    } else if (yard_children_add(&fm->children, pid) < 0) {
        yard_log_err("%s: out of memory tracking child %ld", peer, (long)pid);
        kill(pid, SIGKILL);
    }
}

static void fork_on_signal(int sig, void *arg)
{
    struct fork_model *fm = arg;
    if (sig == SIGCHLD)
        yard_children_reap(&fm->children, fork_on_child_exit, fm);
}

static int fork_serve(yard_server_t *srv)
{
    struct fork_model fm = {.srv = srv, .self = getpid()};
    if (srv->cfg->pair) {
        /* papayaChat's wake-up: every publish signals the process group.
         * Our own group, so nothing else gets it; RECV and this parent
         * ignore it, SEND takes it with sigtimedwait. */
        setpgid(0, 0);
        signal(SIGUSR1, SIG_IGN);
        yard_bus_on_publish(pair_publish_hook);
    }
    yard_server_accept_loop(srv, fork_on_conn, fork_on_signal, &fm);
    yard_listen_set_close(&srv->ls);
    yard_children_stop(&fm.children, srv->sig_fd, YARD_STOP_GRACE_NS);
    yard_children_free(&fm.children);
    free(fm.pairs);
    return 0;
}

#define PAIR_NEEDS                                                                                 \
    "--pair is papayaChat's process pair: it needs --model fork and an app that relays news "      \
    "(chat)"

static const yard_opt_t fork_opts[] = {
    {.name = "pair", .type = YARD_OPT_SWITCH, YARD_OPT_FIELD(yard_config_t, pair),
     .help = "papayaChat's design, a RECV and a SEND process per client, woken by SIGUSR1 sent "
             "to the process group; needs an app that relays news (chat)",
     .misplaced = PAIR_NEEDS},
    YARD_OPT_END,
};

/* The pair's SEND process only waits for news: an app without any has
 * nothing for it to do. */
static int fork_check(const yard_config_t *cfg, const yard_app_t *app, char *err, size_t errlen)
{
    if (cfg->pair && !app->news) {
        snprintf(err, errlen, PAIR_NEEDS);
        return -1;
    }
    return 0;
}

const yard_model_t yard_model_fork = {
    .name = "fork",
    .summary = "a process per connection, blocking I/O; the parent only accepts and reaps",
    .traits = {.multi_process = true,
               .shared_state = "MAP_SHARED memory with atomics",
               .ipc = "shared memory; signals from the supervising parent",
               .error_isolation = "per connection: a crash ends one process"},
    .opts = fork_opts,
    .check = fork_check,
    .serve = fork_serve,
};
