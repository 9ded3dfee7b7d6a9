/* coro: a coroutine per connection on the yard_coro M:N runtime.
 *
 * The connection code is written like the thread model's (read, run the app,
 * write, repeat), but every call that would block parks the coroutine on the
 * netpoller instead, so --workers threads serve any number of connections.
 * It drives the same connection layer (conn.c) as every other model: the
 * socket is non-blocking, yard_conn_on_readable / on_writable return
 * YARD_IO_AGAIN where a blocking model would have slept, and this is where
 * the coroutine parks until the fd is ready, the app's timer is due or the
 * idle timeout expires. Jobs (bcrypt) run on the runtime's offload pool while
 * the coroutine is parked.
 *
 * The conn functions never park, so the per-thread scratch buffers they use
 * are indexed by the worker the coroutine is running on during the call. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "models.h"
#include "yard/clock.h"
#include "yard/conn.h"
#include "yard/coro.h"
#include "yard/log.h"

#define STOP_GRACE_NS (1500 * YARD_NS_PER_MS)
/* A failed accept other than EAGAIN (descriptors exhausted) may leave
 * connections pending without a new edge: retry after this long. */
#define ACCEPT_RETRY_NS (100 * YARD_NS_PER_MS)

struct coro_model {
    yard_server_t *srv;
    yard_scratch_t *scratch; /* one per worker */
    unsigned nscratch;
    _Atomic int stop;
    yard_conn_set_t live; /* its lock is never held across a park */
    atomic_uint nlive;       /* connection coroutines not yet finished */
    yard_coro_waitq_t drained; /* woken when nlive drops */
    int reserve_fd;
};

static yard_scratch_t *scratch_here(struct coro_model *cm)
{
    int w = yard_coro_worker_id();
    return &cm->scratch[w >= 0 && (unsigned)w < cm->nscratch ? (unsigned)w : 0];
}

struct conn_arg {
    struct coro_model *cm;
    yard_conn_t *c;
};

static void *run_job(void *arg)
{
    yard_job_t *job = arg;
    job->fn(job->arg);
    return NULL;
}

/* The earliest time the coroutine must wake up by itself: the app's timer
 * or the idle timeout. 0: none. */
static uint64_t conn_deadline(const yard_conn_t *c, uint64_t last_active, uint64_t idle_ns)
{
    uint64_t d = c->wake_at;
    if (idle_ns && (!d || last_active + idle_ns < d))
        d = last_active + idle_ns;
    return d;
}

/* A connection with a news watch waits for its socket and the watch's
 * eventfd at once: both go into a small epoll set of its own, and the
 * netpoller waits on that set's descriptor like on any other. */
struct news_wait {
    int epfd;
    unsigned sock_events; /* what the socket is registered for in epfd */
};

static int news_wait(struct news_wait *nw, yard_conn_t *c, unsigned dir, uint64_t deadline)
{
    if (nw->epfd < 0) {
        nw->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (nw->epfd < 0)
            return -errno;
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = yard_conn_news_fd(c)};
        if (epoll_ctl(nw->epfd, EPOLL_CTL_ADD, ev.data.fd, &ev) < 0)
            return -errno;
        ev = (struct epoll_event){.events = 0, .data.fd = c->fd};
        if (epoll_ctl(nw->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
            return -errno;
        nw->sock_events = 0;
    }
    unsigned want = dir == YARD_CORO_OUT ? EPOLLOUT : dir == YARD_CORO_IN ? EPOLLIN : 0;
    if (want != nw->sock_events) {
        struct epoll_event ev = {.events = want, .data.fd = c->fd};
        if (epoll_ctl(nw->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
            return -errno;
        nw->sock_events = want;
    }
    return yard_coro_wait_fd(nw->epfd, YARD_CORO_IN, deadline);
}

static void conn_coro(void *p)
{
    struct conn_arg arg = *(struct conn_arg *)p;
    free(p);
    struct coro_model *cm = arg.cm;
    yard_conn_t *c = arg.c;
    uint64_t idle_ns = cm->srv->cfg->idle_timeout_ns;
    uint64_t last_active = yard_now_ns();
    const char *reason = NULL;
    struct news_wait nw = {.epfd = -1};
    while (!atomic_load_explicit(&cm->stop, memory_order_relaxed) && !yard_conn_finished(c)) {
        if (c->job_pending && c->job_access) {
            /* An Eve-style task holding the permission; this coroutine
             * parks in the finish scope until it has run. */
            yard_coro_finish_t scope;
            yard_coro_finish_init(&scope);
            yard_coro_perm_t perm = {
                .obj = &c->job_access->perm,
                .mode = c->job_access_mode == YARD_ACCESS_FULL ? YARD_PERM_FULL : YARD_PERM_READ};
            if (yard_coro_task(&scope, &perm, 1, c->job.fn, c->job.arg) < 0) {
                reason = "out of memory for a task";
                break;
            }
            yard_coro_finish_wait(&scope);
            yard_conn_on_job_done(c, scratch_here(cm));
            continue;
        }
        if (c->job_pending && !c->jobs_inline) {
            yard_coro_offload(run_job, &c->job); /* parks until a pool thread ran it */
            yard_conn_on_job_done(c, scratch_here(cm));
            continue;
        }
        if (c->wake_at && yard_now_ns() >= c->wake_at) {
            yard_conn_on_timer(c, scratch_here(cm));
            continue;
        }
        if (c->watch && yard_watch_due(c->watch) && !c->closing) {
            yard_conn_on_news(c, scratch_here(cm));
            if (!yard_watch_due(c->watch))
                continue;
            /* the app left the news pending (it could not send): go on
             * with I/O, which is what unblocks it */
        }
        int rc;
        unsigned dir;
        if (c->out.len) {
            /* Output leaves before the next read, as in the blocking models:
             * a peer that does not read stops only its own coroutine. */
            rc = yard_conn_on_writable(c);
            dir = YARD_CORO_OUT;
        } else if (yard_conn_wants_read(c)) {
            rc = yard_conn_on_readable(c, scratch_here(cm));
            dir = YARD_CORO_IN;
        } else if (c->watch) {
            /* Only news (or the app's timer) can move this connection now. */
            int w = news_wait(&nw, c, 0, c->wake_at);
            if (w && w != -ETIMEDOUT) {
                reason = strerror(-w);
                break;
            }
            yard_watch_drain(c->watch);
            continue;
        } else {
            /* Only the app's timer is left to wait for (a long poll whose
             * peer half-closed). */
            yard_coro_sleep_until(c->wake_at);
            continue;
        }
        if (rc == YARD_IO_DONE)
            break;
        uint64_t now = yard_now_ns();
        if (rc == YARD_IO_OK) {
            last_active = now;
            continue;
        }
        int w = c->watch ? news_wait(&nw, c, dir, conn_deadline(c, last_active, idle_ns))
                         : yard_coro_wait_fd(c->fd, dir, conn_deadline(c, last_active, idle_ns));
        if (c->watch)
            yard_watch_drain(c->watch); /* due-ness is checked at the top */
        if (w == -ETIMEDOUT && idle_ns && yard_now_ns() >= last_active + idle_ns &&
            !(c->wake_at && yard_now_ns() >= c->wake_at)) {
            reason = "idle timeout";
            break;
        }
        if (w && w != -ETIMEDOUT) {
            reason = strerror(-w);
            break;
        }
    }
    yard_conn_set_remove(&cm->live, c);
    if (nw.epfd >= 0) {
        yard_coro_forget_fd(nw.epfd);
        close(nw.epfd);
    }
    yard_coro_forget_fd(c->fd); /* yard_conn_close closes it */
    yard_conn_close(c, reason);
    yard_server_release(cm->srv);
    if (atomic_fetch_sub(&cm->nlive, 1) == 1)
        yard_coro_waitq_wake(&cm->drained, 1);
}

static void coro_start_conn(struct coro_model *cm, int fd, const char *peer)
{
    yard_server_t *srv = cm->srv;
    yard_conn_t *c = yard_conn_open(srv, fd, false);
    if (c)
        c->access_by_model = true; /* permission tasks, not a rwlock */
    struct conn_arg *arg = malloc(sizeof *arg);
    if (c && arg && yard_conn_set_add(&cm->live, c) == 0) {
        *arg = (struct conn_arg){cm, c};
        atomic_fetch_add(&cm->nlive, 1);
        if (yard_coro_go(conn_coro, arg) == 0)
            return;
        atomic_fetch_sub(&cm->nlive, 1);
        yard_conn_set_remove(&cm->live, c);
    }
    yard_log_err("%s: out of memory for a connection", peer);
    free(arg);
    if (c)
        yard_conn_close(c, NULL);
    else
        close(fd);
    yard_server_release(srv);
}

static void acceptor(void *p)
{
    struct coro_model *cm = p;
    yard_server_t *srv = cm->srv;
    int listen_fd = srv->listen_fd;
    char peer[YARD_ADDR_STRLEN];
    while (!atomic_load(&cm->stop)) {
        int fd = yard_server_accept_admitted(srv, listen_fd, true, &cm->reserve_fd, peer,
                                             sizeof peer);
        if (fd >= 0) {
            coro_start_conn(cm, fd, peer);
            continue;
        }
        int w = yard_coro_wait_fd(listen_fd, YARD_CORO_IN, yard_now_ns() + ACCEPT_RETRY_NS);
        if (w == -EBADF)
            break; /* the listener was closed: we are stopping */
    }
}

static void coro_main(void *p)
{
    struct coro_model *cm = p;
    yard_server_t *srv = cm->srv;
    yard_coro_t *acc = yard_coro_spawn(acceptor, cm);
    if (!acc) {
        yard_log_err("coro: cannot start the acceptor");
        return;
    }
    for (;;) {
        int sig = yard_signal_take(srv->sig_fd);
        if (sig == SIGTERM || sig == SIGINT || sig < 0)
            break;
        if (sig == 0 && yard_coro_wait_fd(srv->sig_fd, YARD_CORO_IN, 0) == -EBADF)
            break;
    }
    atomic_store(&cm->stop, 1);
    yard_coro_forget_fd(srv->listen_fd); /* wakes the acceptor with -EBADF */
    yard_coro_join(acc);
    close(srv->listen_fd);
    srv->listen_fd = -1;
    /* Wake every connection parked on its socket; each sees the stop flag. */
    yard_conn_set_shutdown_all(&cm->live);
    uint64_t deadline = yard_now_ns() + STOP_GRACE_NS;
    unsigned left;
    while ((left = atomic_load(&cm->nlive)) && yard_now_ns() < deadline)
        yard_coro_waitq_wait(&cm->drained, &cm->nlive, left, deadline);
    if (left)
        yard_log_warn("%u connection coroutines still running at exit", left);
    /* Returning stops the runtime; coroutines still parked are abandoned. */
}

static int coro_serve(yard_server_t *srv)
{
    static struct coro_model cm; /* abandoned coroutines may point at it */
    memset(&cm, 0, sizeof cm);
    cm.live = (yard_conn_set_t)YARD_CONN_SET_INIT;
    cm.srv = srv;
    int workers = srv->cfg->workers > 0 ? srv->cfg->workers : yard_cpus_available();
    cm.nscratch = (unsigned)(workers > 0 ? workers : 1);
    cm.scratch = calloc(cm.nscratch, sizeof *cm.scratch);
    if (!cm.scratch) {
        yard_log_err("coro: out of memory");
        return 1;
    }
    cm.reserve_fd = yard_reserve_fd_open();
    yard_coro_opts_t opts = {
        .workers = cm.nscratch,
        .offload_threads = srv->cfg->offload_threads > 0 ? (unsigned)srv->cfg->offload_threads : 1,
    };
    int rc = yard_coro_run(&opts, coro_main, &cm);
    if (rc < 0)
        yard_log_err("coro: cannot start the runtime: %s", strerror(-rc));
    for (unsigned i = 0; i < cm.nscratch; i++)
        yard_scratch_free(&cm.scratch[i]);
    free(cm.scratch);
    yard_conn_set_free(&cm.live);
    if (cm.reserve_fd >= 0)
        close(cm.reserve_fd);
    if (srv->listen_fd >= 0) {
        close(srv->listen_fd);
        srv->listen_fd = -1;
    }
    return rc < 0 ? 1 : 0;
}

static const yard_opt_t coro_opts[] = {
    {.name = "workers", .form = "N", .type = YARD_OPT_INT, YARD_OPT_FIELD(yard_config_t, workers),
     .min = 1, .max = 1024,
     .help = "number of worker threads (default: the CPUs in the affinity mask)"},
    {.name = "offload-threads", .form = "N", .type = YARD_OPT_INT,
     YARD_OPT_FIELD(yard_config_t, offload_threads), .min = 0, .max = 256, .def = "2",
     .help = "threads of the runtime's pool for CPU-heavy jobs such as bcrypt (the coroutine "
             "parks meanwhile); 0 runs them inline, blocking a worker thread"},
    YARD_OPT_END,
};

const yard_model_t yard_model_coro = {
    .name = "coro",
    .summary = "a coroutine per connection on the yard_coro M:N work-stealing runtime "
               "(--workers threads, epoll netpoller)",
    .traits = {.multi_threaded = true,
               .lightweight_threads = true,
               .shared_state = "process memory with atomics",
               .ipc = "shared memory",
               .error_isolation = "none: a crash ends every connection"},
    .opts = coro_opts,
    .serve = coro_serve,
};
