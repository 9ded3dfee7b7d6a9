/* What the models share to stop: child-process bookkeeping for the models
 * whose parent only supervises (fork, reactors --procs), and the drain of
 * live connections for the ones that serve in threads or coroutines. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "models.h"
#include "yard/clock.h"
#include "yard/log.h"

int yard_children_add(yard_children_t *ch, pid_t pid)
{
    if (ch->n == ch->cap) {
        size_t cap = ch->cap ? ch->cap * 2 : 64;
        pid_t *p = realloc(ch->pids, cap * sizeof *p);
        if (!p)
            return -1;
        ch->pids = p;
        ch->cap = cap;
    }
    ch->pids[ch->n++] = pid;
    return 0;
}

static void children_forget(yard_children_t *ch, pid_t pid)
{
    for (size_t i = 0; i < ch->n; i++)
        if (ch->pids[i] == pid) {
            ch->pids[i] = ch->pids[--ch->n];
            return;
        }
}

size_t yard_children_reap(yard_children_t *ch, void (*on_exit)(pid_t, int, void *), void *arg)
{
    size_t reaped = 0;
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        children_forget(ch, pid);
        if (on_exit)
            on_exit(pid, status, arg);
        reaped++;
    }
    return reaped;
}

void yard_children_signal(const yard_children_t *ch, int sig)
{
    for (size_t i = 0; i < ch->n; i++)
        kill(ch->pids[i], sig);
}

void yard_children_stop(yard_children_t *ch, int sig_fd, uint64_t grace_ns)
{
    for (size_t i = 0; i < ch->n; i++)
        kill(ch->pids[i], SIGTERM);
    uint64_t deadline = yard_now_ns() + grace_ns;
    yard_children_reap(ch, NULL, NULL);
    while (ch->n) {
        uint64_t now = yard_now_ns();
        if (now >= deadline)
            break;
        /* SIGCHLD arrives on the signalfd; other signals are ignored now. */
        struct pollfd pfd = {.fd = sig_fd, .events = POLLIN};
        poll(&pfd, 1, (int)((deadline - now) / YARD_NS_PER_MS) + 1);
        yard_signals_stop(sig_fd, NULL, NULL); /* consumed: the stop is under way */
        yard_children_reap(ch, NULL, NULL);
    }
    for (size_t i = 0; i < ch->n; i++)
        kill(ch->pids[i], SIGKILL);
    while (ch->n) {
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0 && errno != EINTR)
            break;
        if (pid > 0)
            children_forget(ch, pid);
    }
}

void yard_children_free(yard_children_t *ch)
{
    free(ch->pids);
    ch->pids = NULL;
    ch->n = ch->cap = 0;
}

bool yard_children_report(pid_t pid, int status, const char *what, const int *expected,
                          const char *then)
{
    if (!then)
        then = "";
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        for (const int *e = expected; e && *e; e++)
            if (*e == sig)
                return false;
        yard_log_err("%s %ld died of signal %d (%s)%s", what, (long)pid, sig, strsignal(sig), then);
        return true;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        yard_log_err("%s %ld exited with status %d%s", what, (long)pid, WEXITSTATUS(status), then);
        return true;
    }
    return false;
}

size_t yard_drain_conns(yard_conn_set_t *live, _Atomic int *stop,
                        size_t (*wait_fewer)(void *arg, uint64_t deadline_ns), void *arg,
                        const char *what)
{
    atomic_store(stop, 1);
    uint64_t now = yard_now_ns(), deadline = now + YARD_STOP_GRACE_NS;
    /* TLS connections keep their write side for a moment, to seal their
     * farewell; what is still there then loses it too. */
    uint64_t cut = now + YARD_TLS_FAREWELL_GRACE_NS;
    yard_conn_set_shutdown_all(live);
    size_t left;
    while ((left = wait_fewer(arg, cut)) && yard_now_ns() < cut) {
    }
    if (left)
        yard_conn_set_cut_all(live);
    while (left && (left = wait_fewer(arg, deadline)) && yard_now_ns() < deadline) {
    }
    if (left)
        yard_log_warn("%zu %s still running at exit", left, what);
    return left;
}

int yard_listeners_open(yard_server_t *srv, yard_listen_set_t *sets, int n)
{
    sets[0] = srv->ls;
    for (int i = 1; i < n; i++) {
        sets[i].n = 0;
        for (int j = 0; j < srv->ls.n; j++) {
            const char *call = "";
            int fd = yard_listen(&srv->bound[j], srv->cfg->backlog, true, srv->cfg->ipv6_only,
                                 &call);
            if (fd < 0) {
                char err[256];
                yard_net_message(err, sizeof err, &srv->bound[j], call, fd);
                yard_log_err("listener %d: %s", i, err);
                for (int k = 1; k <= i; k++)
                    yard_listen_set_close(&sets[k]);
                return -1;
            }
            sets[i].fd[sets[i].n++] = fd;
        }
    }
    return 0;
}

void yard_listeners_close(yard_server_t *srv, yard_listen_set_t *sets, int n)
{
    for (int i = 0; i < n; i++)
        yard_listen_set_close(&sets[i]);
    srv->ls.n = 0; /* sets[0] held its descriptors */
}

int yard_wait_stop_signal(int sig_fd)
{
    struct pollfd pfd = {.fd = sig_fd, .events = POLLIN};
    for (;;) {
        if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
            return -1;
        int stop = yard_signals_stop(sig_fd, NULL, NULL);
        if (stop)
            return stop < 0 ? -1 : 0;
    }
}
