/* fork: a process per connection, blocking I/O in the child. The parent
 * only accepts, supervises and reaps (the OpenBSD privsep shape): it never
 * runs app code, so a child that crashes costs exactly one connection. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "models.h"
#include "yard/clock.h"
#include "yard/conn.h"
#include "yard/log.h"

#define STOP_GRACE_NS (1500 * YARD_NS_PER_MS)

static _Atomic int child_stop;
static int child_conn_fd = -1;

/* SIGTERM in a child: end the connection. shutdown() is async-signal-safe
 * and wakes a read or write blocked on the socket, so the stop cannot be
 * lost between checking the flag and blocking. */
static void child_on_signal(int sig)
{
    atomic_store(&child_stop, 1);
    if (child_conn_fd >= 0)
        shutdown(child_conn_fd, SHUT_RDWR);
}

static _Noreturn void fork_child(yard_server_t *srv, int fd, pid_t parent)
{
    close(srv->listen_fd);
    close(srv->sig_fd);
    /* No process of the server may outlive it. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(0);
    child_conn_fd = fd;
    struct sigaction sa = {.sa_handler = child_on_signal}; /* no SA_RESTART */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_UNBLOCK, &set, NULL);

    yard_conn_t *c = yard_conn_open(srv, fd, true);
    if (!c) {
        yard_log_err("out of memory for a connection");
        _exit(1);
    }
    yard_scratch_t scratch = {0};
    yard_conn_run_blocking(c, &scratch, &child_stop);
    yard_conn_close(c, NULL);
    yard_scratch_free(&scratch);
    _exit(0);
}

static void fork_on_child_exit(pid_t pid, int status, void *arg)
{
    yard_server_t *srv = arg;
    yard_server_release(srv);
    if (WIFSIGNALED(status) && WTERMSIG(status) != SIGTERM && WTERMSIG(status) != SIGKILL)
        yard_log_err("connection process %ld died of signal %d (%s)", (long)pid, WTERMSIG(status),
                     strsignal(WTERMSIG(status)));
    else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        yard_log_warn("connection process %ld exited with status %d", (long)pid,
                      WEXITSTATUS(status));
}

struct fork_model {
    yard_server_t *srv;
    yard_children_t children;
    pid_t self;
};

static void fork_on_conn(int fd, const char *peer, void *arg)
{
    struct fork_model *fm = arg;
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
        yard_children_reap(&fm->children, fork_on_child_exit, fm->srv);
}

static int fork_serve(yard_server_t *srv)
{
    struct fork_model fm = {.srv = srv, .self = getpid()};
    yard_server_accept_loop(srv, fork_on_conn, fork_on_signal, &fm);
    close(srv->listen_fd);
    srv->listen_fd = -1;
    yard_children_stop(&fm.children, srv->sig_fd, STOP_GRACE_NS);
    yard_children_free(&fm.children);
    return 0;
}

const yard_model_t yard_model_fork = {
    .name = "fork",
    .summary = "a process per connection, blocking I/O; the parent only accepts and reaps",
    .traits = {.multi_process = true,
               .shared_state = "MAP_SHARED memory with atomics",
               .ipc = "shared memory; signals from the supervising parent",
               .error_isolation = "per connection: a crash ends one process"},
    .serve = fork_serve,
};
