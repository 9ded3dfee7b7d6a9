/* Linux-only: signalfd. The signals are read in a coroutine; a port reads them from a self-pipe. */
/* The Eve runtime: the program (eve_main, exit, args, the clock) and the
 * signal set. */
#include "rt_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "yard/clock.h"

eve_vec_t *eve_args;

int64_t eve_clock_ns(void)
{
    return (int64_t)yard_now_ns();
}

/* ---- signals ------------------------------------------------------------------------------------ */

struct eve_signals {
    eve_obj_t h;
    struct rt_src src; /* RT_SIG_TERMINATE, RT_SIG_HANGUP */
};

void rt_signals_marker(eve_obj_t *o)
{
    (void)o;
}

static eve_signals_t signal_set = {
    .h = {EVE_RC_IMMORTAL, rt_signals_marker, {0}},
};
eve_signals_t *eve_signals = &signal_set;

struct rt_src *rt_signals_src(void)
{
    return &signal_set.src;
}

static int signal_fd = -1;

/* SIGTERM, SIGINT, SIGHUP are blocked in every thread (the workers inherit
 * the mask of the thread that starts them) and read here. */
static void signal_main(void *arg)
{
    (void)arg;
    for (;;) {
        struct signalfd_siginfo si;
        ssize_t n = read(signal_fd, &si, sizeof si);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (yard_coro_wait_fd(signal_fd, YARD_CORO_IN, 0) == -EBADF)
                return;
            continue;
        }
        if (n != (ssize_t)sizeof si)
            return;
        int which = si.ssi_signo == SIGHUP ? RT_SIG_HANGUP : RT_SIG_TERMINATE;
        if (rt_src_empty(&signal_set.src, which)) {
            if (which == RT_SIG_TERMINATE)
                eve_exit(0);
            continue; /* SIGHUP with nobody listening: ignored */
        }
        rt_dispatch(&signal_set.src, which, (eve_val_t){.i = (int64_t)si.ssi_signo}, NULL);
    }
}

static void signals_take_over(void)
{
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0) {
        fprintf(stderr, "%s: cannot block the signals\n", rt_prog_name);
        exit(1);
    }
    if (signal_fd < 0)
        signal_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (signal_fd < 0) {
        fprintf(stderr, "%s: signalfd: %s\n", rt_prog_name, strerror(errno));
        exit(1);
    }
}

/* ---- the program ------------------------------------------------------------------------------------ */

_Noreturn void eve_exit(int64_t status)
{
    /* Streams write through at once; only a write another thread is in
     * the middle of needs waiting for. */
    rt_streams_quiesce();
    _exit((int)(status & 0xff));
}

struct main_arg {
    void (*top)(eve_cx_t *cx);
};

static void main_coro(void *arg)
{
    struct main_arg *m = arg;
    if (yard_coro_go(signal_main, NULL) != 0)
        rt_oom();
    eve_cx_t cx;
    eve_cx_init(&cx);
    m->top(&cx);
    eve_cx_done(&cx); /* starts the listeners the top level made */
    rt_gate_open();
    rt_live_wait_zero();
    /* Every detached task has said it is done; let the last ones finish
     * giving their permissions back before the scheduler stops. */
    yard_coro_finish_wait(&rt_detached);
}

static unsigned workers_from_env(void)
{
    const char *v = getenv("YARD_EVE_WORKERS");
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || end == v || n < 1 || n > 1024) {
        fprintf(stderr, "%s: YARD_EVE_WORKERS='%s': expected a number of workers from 1 to 1024\n",
                rt_prog_name, v);
        exit(2);
    }
    return (unsigned)n;
}

int eve_main(int argc, char **argv, const char *name, void (*top)(eve_cx_t *cx))
{
    if (name && *name)
        rt_prog_name = name;
    yard_coro_opts_t opts = {.workers = workers_from_env()};
    eve_args = eve_vec_new(EVE_K_STR);
    for (int i = 0; i < argc; i++) {
        eve_str_t *s = eve_str_from(argv[i], strlen(argv[i]));
        eve_vec_push(eve_args, (eve_val_t){.p = s});
        eve_release(s);
    }
    signals_take_over();
    yard_coro_finish_init(&rt_detached); /* outside a coroutine: no owner */
    struct main_arg m = {top};
    int rc = yard_coro_run(&opts, main_coro, &m);
    if (rc != 0) {
        fprintf(stderr, "%s: cannot start the coroutine runtime: %s\n", rt_prog_name,
                strerror(-rc));
        return 1;
    }
    eve_release(eve_args);
    eve_args = NULL;
    return 0;
}
