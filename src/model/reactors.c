/* Linux-only: eventfd, prctl. What a port uses instead: docs/portability.md. */
/* reactors: N event loops, each with its own SO_REUSEPORT listener so the
 * kernel spreads connections over them. Threads by default; --procs runs
 * them as processes (the Node cluster / nginx shape), supervised by a
 * parent that shuts everything down if one of them dies. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loop.h"
#include "models.h"
#include "yard/clock.h"
#include "yard/log.h"

struct reactor {
    yard_loop_t loop;
    yard_listen_set_t ls;
    pthread_t tid;
    bool started;
};

static void *reactor_thread(void *p)
{
    struct reactor *r = p;
    yard_loop_run(&r->loop);
    return NULL;
}

static int reactors_threads(yard_server_t *srv, struct reactor *rs, int n)
{
    int status = 1;
    int stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (stop_fd < 0) {
        yard_log_err("eventfd: %s", strerror(errno));
        return 1;
    }
    int inited = 0;
    for (; inited < n; inited++)
        if (yard_loop_init(&rs[inited].loop, srv, &rs[inited].ls, stop_fd, false) < 0)
            goto out;
    for (int i = 0; i < n; i++) {
        int rc = pthread_create(&rs[i].tid, NULL, reactor_thread, &rs[i]);
        if (rc != 0) {
            yard_log_err("reactor %d: pthread_create: %s", i, strerror(rc));
            goto stop;
        }
        rs[i].started = true;
    }
    status = yard_wait_stop_signal(srv->sig_fd) < 0 ? 1 : 0;
stop:
    /* The eventfd stays readable once written, so every loop sees it. */
    if (eventfd_write(stop_fd, 1) < 0)
        yard_fatal("eventfd_write: %s", strerror(errno));
    for (int i = 0; i < n; i++)
        if (rs[i].started)
            pthread_join(rs[i].tid, NULL);
out:
    for (int i = 0; i < inited; i++)
        yard_loop_fini(&rs[i].loop);
    close(stop_fd);
    return status;
}

static _Noreturn void reactor_child(yard_server_t *srv, struct reactor *rs, int n, int me,
                                    pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(0);
    for (int i = 0; i < n; i++)
        if (i != me)
            yard_listen_set_close(&rs[i].ls);
    /* The inherited signalfd reports this process's own signals. */
    if (yard_loop_init(&rs[me].loop, srv, &rs[me].ls, srv->sig_fd, true) < 0)
        _exit(1);
    yard_loop_run(&rs[me].loop);
    yard_loop_fini(&rs[me].loop);
    yard_log_flush(50); /* _exit skips atexit: queued log lines go now or are lost */
    _exit(0);
}

struct procs_state {
    bool died;
    bool crashed;
};

static void on_reactor_exit(pid_t pid, int status, void *arg)
{
    struct procs_state *st = arg;
    static const int expected[] = {SIGTERM, SIGINT, 0};
    st->died = true;
    if (yard_children_report(pid, status, "reactor process", expected, ": shutting down"))
        st->crashed = true;
    else
        yard_log_warn("reactor process %ld stopped: shutting down", (long)pid);
}

/* SIGHUP to the supervisor reaches every reactor process, each of which
 * reloads its own TLS certificate. */
static void forward_hup(int sig, void *arg)
{
    if (sig == SIGHUP)
        yard_children_signal(arg, SIGHUP);
}

static int reactors_procs(yard_server_t *srv, struct reactor *rs, int n)
{
    yard_children_t ch = {0};
    struct procs_state st = {0};
    pid_t self = getpid();
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0)
            reactor_child(srv, rs, n, i, self);
        if (pid < 0 || yard_children_add(&ch, pid) < 0) {
            yard_log_err("reactor %d: fork: %s", i, strerror(errno));
            if (pid > 0)
                kill(pid, SIGKILL);
            st.crashed = true;
            break;
        }
    }
    /* The parent only supervises: the children own the listeners now. */
    for (int i = 0; i < n; i++)
        yard_listen_set_close(&rs[i].ls);
    srv->ls.n = 0; /* rs[0].ls held its descriptors */
    struct pollfd pfd = {.fd = srv->sig_fd, .events = POLLIN};
    while (!st.crashed && !st.died) {
        if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
            break;
        bool stop = yard_signals_stop(srv->sig_fd, forward_hup, &ch) != 0;
        yard_children_reap(&ch, on_reactor_exit, &st);
        if (stop)
            break;
    }
    yard_children_stop(&ch, srv->sig_fd, YARD_STOP_GRACE_NS);
    yard_children_free(&ch);
    return st.crashed ? 1 : 0;
}

static int reactors_serve(yard_server_t *srv)
{
    int n = srv->cfg->workers > 0 ? srv->cfg->workers : yard_cpus_available();
    struct reactor *rs = calloc((size_t)n, sizeof *rs);
    if (!rs) {
        yard_log_err("out of memory");
        return 1;
    }
    yard_listen_set_t sets[n];
    if (yard_listeners_open(srv, sets, n) < 0) {
        free(rs);
        return 1;
    }
    for (int i = 0; i < n; i++)
        rs[i].ls = sets[i];
    yard_log_info("%d reactor %s", n, srv->cfg->procs ? "processes" : "threads");
    int status;
    if (srv->cfg->procs) {
        status = reactors_procs(srv, rs, n); /* closes every listener */
    } else {
        status = reactors_threads(srv, rs, n);
        yard_listeners_close(srv, sets, n);
    }
    free(rs);
    return status;
}

static const yard_opt_t reactors_opts[] = {
    {.name = "workers", .form = "N", .type = YARD_OPT_INT, YARD_OPT_FIELD(yard_config_t, workers),
     .min = 1, .max = 1024,
     .help = "number of event loops (default: the CPUs in the affinity mask)"},
    {.name = "procs", .type = YARD_OPT_SWITCH, YARD_OPT_FIELD(yard_config_t, procs),
     .help = "run the loops as processes, not threads"},
    {.name = "offload-threads", .form = "N", .type = YARD_OPT_INT,
     YARD_OPT_FIELD(yard_config_t, offload_threads), .min = 0, .max = 256, .def = "2",
     .help = "threads per event loop that run CPU-heavy jobs such as bcrypt, started on its "
             "first job; 0 runs them inline, blocking the loop"},
    YARD_POLLER_OPT,
    YARD_OPT_END,
};

const yard_model_t yard_model_reactors = {
    .name = "reactors",
    .summary = "N event loops (one per CPU by default), each with its own SO_REUSEPORT listener; "
               "--procs runs them as processes",
    .traits = {.multi_threaded = true,
               .event_based = true,
               .shared_state = "atomics in shared memory (threads or processes)",
               .ipc = "shared memory; the kernel spreads connections over the listeners",
               .error_isolation = "threads: none; --procs: per event loop"},
    .reuseport = true,
    .opts = reactors_opts,
    .serve = reactors_serve,
};
