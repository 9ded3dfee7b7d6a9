#ifndef YARD_MODELS_H
#define YARD_MODELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "yard/clock.h"
#include "yard/conn.h"
#include "yard/model.h"
#include "yard/server.h"

/* How long a stop waits for connections to finish before it gives up on
 * them (threads, coroutines) or kills them (processes). */
#define YARD_STOP_GRACE_NS (1500 * YARD_NS_PER_MS)
/* ... of which a TLS connection has this long to seal its farewell before
 * its socket loses its write side too. */
#define YARD_TLS_FAREWELL_GRACE_NS (300 * YARD_NS_PER_MS)

/* The blocking models (fork, thread): jobs inline, output in full. */
extern const yard_conn_policy_t yard_blocking_policy;
/* Serve a connection opened with a blocking policy (yard_blocking_policy,
 * or one like it with model state) until it ends or *stop becomes true
 * (blocking.c). */
void yard_blocking_serve(yard_conn_t *c, yard_scratch_t *s, const _Atomic int *stop);

/* --poller's choices and its option, for the event-loop models (poller.h). */
extern const yard_opt_choice_t yard_poller_choices[];
#define YARD_POLLER_OPT                                                                          \
    {.name = "poller", .form = "epoll|poll", .type = YARD_OPT_ENUM,                               \
     YARD_OPT_FIELD(yard_config_t, poller), .choices = yard_poller_choices, .def = "epoll",      \
     .help = "the readiness system call behind the loop: epoll, or POSIX poll (the same "        \
             "paradigm; poll hands the kernel the whole set on every wait)"}

extern const yard_model_t yard_model_fork;
extern const yard_model_t yard_model_thread;
extern const yard_model_t yard_model_epoll;
extern const yard_model_t yard_model_reactors;
extern const yard_model_t yard_model_coro;
extern const yard_model_t yard_model_uring;

/* The listeners of a model that runs n loops on one port (SO_REUSEPORT):
 * sets[0] is srv->ls, each other set joins its addresses and port. -1
 * (logged, none left open but srv->ls) when one cannot be opened. */
int yard_listeners_open(yard_server_t *srv, yard_listen_set_t *sets, int n);
/* Closes every set, srv->ls included (which is left empty). */
void yard_listeners_close(yard_server_t *srv, yard_listen_set_t *sets, int n);
/* Block until SIGTERM or SIGINT arrives on sig_fd: 0, or -1 when the
 * descriptor fails. */
int yard_wait_stop_signal(int sig_fd);

/* Shared by the process-based models: the parent only supervises. Sends
 * SIGTERM to every child, waits up to grace_ns, then SIGKILLs and reaps
 * what is left. */
typedef struct yard_children {
    pid_t *pids;
    size_t n, cap;
} yard_children_t;

int yard_children_add(yard_children_t *ch, pid_t pid);
/* Reap every exited child; calls on_exit for each one (may be NULL).
 * Returns the number reaped. */
size_t yard_children_reap(yard_children_t *ch, void (*on_exit)(pid_t, int, void *), void *arg);
void yard_children_stop(yard_children_t *ch, int sig_fd, uint64_t grace_ns);
/* Passes sig on to every child (a supervisor's SIGHUP: each reloads). */
void yard_children_signal(const yard_children_t *ch, int sig);
void yard_children_free(yard_children_t *ch);
/* How a child ended, in one error line, unless it ended as its parent
 * expects: exit status 0, or one of the signals in expected (ended by 0).
 * what names the child ("reactor process"); then, if not NULL, ends the
 * line (": shutting down"). Returns true when it logged a failure. */
bool yard_children_report(pid_t pid, int status, const char *what, const int *expected,
                          const char *then);

/* Stops a model's connections: sets *stop, shuts down every socket of live
 * so that a connection blocked on it wakes and sees the flag (a TLS one's
 * read side first, yard_conn_set_shutdown_all, then after
 * YARD_TLS_FAREWELL_GRACE_NS the rest), then waits up to
 * YARD_STOP_GRACE_NS for them to end. wait_fewer(arg, deadline) blocks
 * until a connection ended or the deadline passed and returns how many are
 * still running: each model waits its own way (a condition variable, a
 * coroutine wait queue). Logs how many were left behind ("N <what> still
 * running at exit") and returns that number. */
size_t yard_drain_conns(yard_conn_set_t *live, _Atomic int *stop,
                        size_t (*wait_fewer)(void *arg, uint64_t deadline_ns), void *arg,
                        const char *what);

#endif
