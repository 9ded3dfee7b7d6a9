/* coro: a coroutine per connection on the yard_coro M:N runtime.
 *
 * The connection code is written like the thread model's (read, run the app,
 * write, repeat), but every call that would block parks the coroutine on the
 * netpoller instead, so --workers threads serve any number of connections.
 * It drives the same connection driver (src/core/conn*.c) as every other model: it
 * asks yard_conn_next what the connection waits for, and where a blocking
 * model would sleep (yard_conn_read or on_writable say YARD_IO_AGAIN) the
 * coroutine parks until the fd is ready, the app's timer is due or the idle
 * timeout expires. Jobs (bcrypt) run on the runtime's offload pool while the
 * coroutine is parked; permission jobs run as Eve-style tasks.
 *
 * The conn functions never park, so the per-thread scratch buffers they use
 * are indexed by the worker the coroutine is running on during the call. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "models.h"
#include "yard/access.h"
#include "yard/background.h"
#include "yard/clock.h"
#include "yard/conn.h"
#include "yard/coro.h"
#include "yard/log.h"

/* A failed accept other than EAGAIN (descriptors exhausted) may leave
 * connections pending without a new edge: retry after this long. */
#define ACCEPT_RETRY_NS (100 * YARD_NS_PER_MS)

struct coro_model {
    yard_server_t *srv;
    yard_scratch_t *scratch; /* one per worker */
    unsigned nscratch;
    _Atomic int stop;
    yard_conn_policy_t policy;
    yard_conn_set_t live; /* its lock is never held across a park */
    atomic_uint nlive;       /* connection coroutines not yet finished */
    yard_coro_waitq_t drained; /* woken when nlive drops */
    struct acceptor {
        struct coro_model *cm;
        int listen_fd;
        int reserve_fd; /* each its own: they may run at once on two workers */
        yard_coro_t *co;
    } acc[YARD_MAX_LISTEN];
    /* --background-fib: Program 1's tasks on these same workers */
    atomic_int bg_stop;
    yard_background_stats_t bg_stats;
};

/* The model's own state of a connection (yard_conn_model). */
struct coro_conn {
    yard_conn_link_t live;
    struct coro_model *cm;
    /* The last read took all the socket had: the next one waits for an
     * edge first instead of reading to find EAGAIN. */
    bool drained;
};

_Static_assert(sizeof(yard_coro_obj_t) <= YARD_ACCESS_MODEL_BYTES,
               "a permission object's model state holds a yard_coro_obj_t");

static yard_scratch_t *scratch_here(struct coro_model *cm)
{
    int w = yard_coro_worker_id();
    return &cm->scratch[w >= 0 && (unsigned)w < cm->nscratch ? (unsigned)w : 0];
}

static void *run_job(void *arg)
{
    yard_job_t *job = arg;
    job->fn(job->arg);
    return NULL;
}

/* YARD_NEXT_PERM: an Eve-style task holding the permission; this coroutine
 * parks in the finish scope until it has run. */
static int run_perm_task(yard_conn_t *c)
{
    int mode;
    yard_access_obj_t *obj = yard_conn_perm(c, &mode);
    yard_coro_finish_t scope;
    yard_coro_finish_init(&scope);
    yard_coro_perm_t perm = {.obj = (yard_coro_obj_t *)(void *)obj->model,
                             .mode = mode == YARD_ACCESS_FULL ? YARD_PERM_FULL : YARD_PERM_READ};
    yard_job_t *job = yard_conn_job(c);
    if (yard_coro_task(&scope, &perm, 1, job->fn, job->arg) < 0)
        return -1;
    yard_coro_finish_wait(&scope);
    return 0;
}

/* Park until the socket is ready in direction dir (0: not at all), the news
 * eventfd is readable (with news) or the deadline passes. Both descriptors
 * are the netpoller's: a connection with news waits on the two at once. */
static int conn_wait(yard_conn_t *c, unsigned dir, bool news, uint64_t deadline)
{
    if (!news && dir)
        return yard_coro_wait_fd(c->fd, dir, deadline);
    if (!news) {
        yard_coro_sleep_until(deadline); /* only the app's timer is left to wait for */
        return 0;
    }
    int news_fd = yard_conn_news_fd(c);
    int w = dir ? yard_coro_wait_fd2(c->fd, dir, news_fd, YARD_CORO_IN, deadline)
                : yard_coro_wait_fd(news_fd, YARD_CORO_IN, deadline);
    yard_watch_drain(c->watch); /* whether the watch is due is next()'s question */
    return w;
}

/* The earliest of the app's timer and the idle deadline; 0: none. */
static uint64_t earliest(uint64_t a, uint64_t b) { return !a ? b : !b ? a : a < b ? a : b; }

static void conn_coro(void *p)
{
    yard_conn_t *c = p;
    struct coro_conn *cc = yard_conn_model(c);
    struct coro_model *cm = cc->cm;
    uint64_t idle_ns = cm->srv->cfg->idle_timeout_ns;
    uint64_t last_active = yard_now_ns();
    const char *reason = NULL;
    while (!atomic_load_explicit(&cm->stop, memory_order_relaxed)) {
        yard_wait_t w = yard_conn_next(c, scratch_here(cm));
        if (w.next == YARD_NEXT_CLOSE)
            break;
        if (w.next == YARD_NEXT_PERM) {
            if (run_perm_task(c) < 0) {
                reason = "out of memory for a task";
                break;
            }
            yard_conn_on_job_done(c, scratch_here(cm));
            continue;
        }
        if (w.next == YARD_NEXT_JOB) {
            yard_job_t *job = yard_conn_job(c); /* parks until a pool thread ran it: */
            yard_coro_offload_lane(job->lane, run_job, job);
            yard_conn_on_job_done(c, scratch_here(cm));
            continue;
        }
        /* Output leaves before the next read, as in the blocking models: a
         * peer that does not read stops only its own coroutine. */
        unsigned dir = w.write ? YARD_CORO_OUT : w.read ? YARD_CORO_IN : 0;
        if (dir == YARD_CORO_OUT) {
            int rc = yard_conn_on_writable(c);
            if (rc == YARD_IO_DONE)
                break;
            if (rc == YARD_IO_OK) {
                last_active = yard_now_ns();
                continue;
            }
        } else if (dir == YARD_CORO_IN && !cc->drained) {
            /* An edge that arrives from here on is news to the next wait;
             * one that came before is data this read takes. After the
             * peer's FIN no edge comes again: read until the end shows. */
            bool hup = yard_coro_fd_consume(c->fd, YARD_CORO_IN);
            int rc = yard_conn_read_drained(c, scratch_here(cm), &cc->drained);
            if (hup)
                cc->drained = false;
            if (rc == YARD_IO_OK) {
                last_active = yard_now_ns();
                continue;
            }
            if (rc == YARD_IO_DONE)
                break;
        }
        /* Only waiting on the socket counts towards the idle timeout: a
         * connection that waits for news or its timer alone is not idle. */
        uint64_t deadline = dir ? earliest(w.deadline, idle_ns ? last_active + idle_ns : 0)
                                : w.deadline;
        if (!dir && !w.news && !deadline) {
            reason = "nothing left to wait for"; /* cannot happen: next() would say close */
            break;
        }
        int err = conn_wait(c, dir, w.news, deadline);
        if (err == 0)
            cc->drained = false; /* the socket (or the news) may have more */
        uint64_t now = yard_now_ns();
        if (err == -ETIMEDOUT && dir && idle_ns && now >= last_active + idle_ns &&
            !(w.deadline && now >= w.deadline)) {
            reason = "idle timeout";
            break;
        }
        if (err && err != -ETIMEDOUT) {
            reason = strerror(-err);
            break;
        }
    }
    yard_conn_set_remove(&cm->live, &cc->live);
    if (yard_conn_news_fd(c) >= 0)
        yard_coro_forget_fd(yard_conn_news_fd(c)); /* yard_conn_close closes both */
    yard_coro_forget_fd(c->fd);
    yard_conn_close(c, reason);
    yard_server_release(cm->srv);
    if (atomic_fetch_sub(&cm->nlive, 1) == 1)
        yard_coro_waitq_wake(&cm->drained, 1);
}

static void coro_start_conn(struct coro_model *cm, int fd, const char *peer)
{
    yard_server_t *srv = cm->srv;
    yard_conn_t *c = yard_conn_open(srv, fd, &cm->policy);
    if (c) {
        struct coro_conn *cc = yard_conn_model(c);
        cc->cm = cm;
        yard_coro_register_fd(fd); /* so that the first wait parks at once */
        yard_conn_set_add(&cm->live, &cc->live, c);
        atomic_fetch_add(&cm->nlive, 1);
        if (yard_coro_go(conn_coro, c) == 0)
            return;
        atomic_fetch_sub(&cm->nlive, 1);
        yard_conn_set_remove(&cm->live, &cc->live);
    }
    yard_log_err("%s: out of memory for a connection", peer);
    if (c)
        yard_conn_close(c, NULL);
    else
        close(fd);
    yard_server_release(srv);
}

static void acceptor(void *p)
{
    struct acceptor *a = p;
    struct coro_model *cm = a->cm;
    yard_server_t *srv = cm->srv;
    char peer[YARD_ADDR_STRLEN];
    while (!atomic_load(&cm->stop)) {
        int fd = yard_server_accept_admitted(srv, a->listen_fd, true, &a->reserve_fd, peer,
                                             sizeof peer);
        if (fd >= 0) {
            coro_start_conn(cm, fd, peer);
            continue;
        }
        int w = yard_coro_wait_fd(a->listen_fd, YARD_CORO_IN, yard_now_ns() + ACCEPT_RETRY_NS);
        if (w == -EBADF)
            break; /* the listener was closed: we are stopping */
    }
}

/* yard_drain_conns's wait: parks until the last connection coroutine ends
 * or the deadline (the main coroutine must not block its worker). */
static size_t coro_wait_fewer(void *arg, uint64_t deadline_ns)
{
    struct coro_model *cm = arg;
    unsigned left = atomic_load(&cm->nlive);
    if (left)
        yard_coro_waitq_wait(&cm->drained, &cm->nlive, left, deadline_ns);
    return atomic_load(&cm->nlive);
}

static void background_main(void *p)
{
    struct coro_model *cm = p;
    yard_background_coro(cm->srv->cfg->background_fib, &cm->bg_stop, &cm->bg_stats);
}

static void coro_main(void *p)
{
    struct coro_model *cm = p;
    yard_server_t *srv = cm->srv;
    yard_coro_t *bg = srv->cfg->background_fib ? yard_coro_spawn(background_main, cm) : NULL;
    if (srv->cfg->background_fib && !bg)
        yard_log_err("coro: cannot start the background computation (out of memory)");
    int nacc = 0;
    for (; nacc < srv->ls.n; nacc++) {
        cm->acc[nacc].co = yard_coro_spawn(acceptor, &cm->acc[nacc]);
        if (!cm->acc[nacc].co) {
            yard_log_err("coro: cannot start an acceptor");
            break;
        }
    }
    while (nacc == srv->ls.n && yard_signals_stop(srv->sig_fd, NULL, NULL) == 0 &&
           yard_coro_wait_fd(srv->sig_fd, YARD_CORO_IN, 0) != -EBADF) {
    }
    atomic_store(&cm->stop, 1);
    for (int i = 0; i < nacc; i++) {
        yard_coro_forget_fd(cm->acc[i].listen_fd); /* wakes its acceptor with -EBADF */
        yard_coro_join(cm->acc[i].co);
    }
    yard_listen_set_close(&srv->ls);
    if (bg) {
        atomic_store(&cm->bg_stop, 1);
        yard_coro_join(bg);
        yard_background_log(srv->cfg->background_fib, "as tasks on the coroutine workers",
                            &cm->bg_stats);
    }
    yard_drain_conns(&cm->live, &cm->stop, coro_wait_fewer, cm, "connection coroutines");
    /* Returning stops the runtime; coroutines still parked are abandoned. */
}

static int coro_serve(yard_server_t *srv)
{
    static struct coro_model cm; /* abandoned coroutines may point at it */
    memset(&cm, 0, sizeof cm);
    yard_conn_set_init(&cm.live);
    cm.srv = srv;
    cm.policy = (yard_conn_policy_t){.job_pool = srv->cfg->offload_threads > 0,
                                     .perm_tasks = true,
                                     .model_size = sizeof(struct coro_conn)};
    int workers = srv->cfg->workers > 0 ? srv->cfg->workers : yard_cpus_available();
    cm.nscratch = (unsigned)(workers > 0 ? workers : 1);
    cm.scratch = calloc(cm.nscratch, sizeof *cm.scratch);
    if (!cm.scratch) {
        yard_log_err("coro: out of memory");
        return 1;
    }
    for (int i = 0; i < srv->ls.n; i++)
        cm.acc[i] = (struct acceptor){
            .cm = &cm, .listen_fd = srv->ls.fd[i], .reserve_fd = yard_reserve_fd_open()};
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
    for (int i = 0; i < YARD_MAX_LISTEN; i++)
        if (cm.acc[i].cm && cm.acc[i].reserve_fd >= 0)
            close(cm.acc[i].reserve_fd);
    yard_listen_set_close(&srv->ls);
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
    .own_background = true,
    .serve = coro_serve,
};
