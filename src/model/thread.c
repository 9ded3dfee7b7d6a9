/* thread: a kernel thread per connection, blocking I/O. The main thread
 * accepts; each connection thread reads, runs the app and writes until the
 * peer leaves. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "models.h"
#include "yard/clock.h"
#include "yard/conn.h"
#include "yard/log.h"

/* Connection threads run little more than read/app/write: 256 KiB of stack
 * is plenty and keeps 10,000 threads within reach of default limits. */
#define THREAD_STACK (256u * 1024u)
#define STOP_GRACE_NS (1500 * YARD_NS_PER_MS)

struct thread_model {
    yard_server_t *srv;
    pthread_mutex_t mu;
    pthread_cond_t idle; /* signalled when a connection thread ends */
    yard_conn_set_t live; /* so that stop can shutdown() every socket */
    size_t running;     /* connection threads not yet finished, under mu */
    pthread_attr_t attr;
    _Atomic int stop;
};

/* Process lifetime: threads that outlive the stop grace period may still
 * touch it while the process exits. */
static struct thread_model thread_model_state = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .idle = PTHREAD_COND_INITIALIZER,
    .live = YARD_CONN_SET_INIT,
};

struct thread_arg {
    struct thread_model *tm;
    yard_conn_t *c;
};

static void *conn_thread(void *p)
{
    struct thread_arg arg = *(struct thread_arg *)p;
    free(p);
    struct thread_model *tm = arg.tm;
    yard_scratch_t scratch = {0};
    yard_conn_run_blocking(arg.c, &scratch, &tm->stop);
    yard_conn_set_remove(&tm->live, arg.c); /* before the fd is closed */
    yard_conn_close(arg.c, NULL);
    yard_scratch_free(&scratch);
    yard_server_release(tm->srv);
    pthread_mutex_lock(&tm->mu);
    tm->running--;
    pthread_cond_signal(&tm->idle);
    pthread_mutex_unlock(&tm->mu);
    return NULL;
}

static void thread_on_conn(int fd, const char *peer, void *model)
{
    struct thread_model *tm = model;
    yard_server_t *srv = tm->srv;
    yard_conn_t *c = yard_conn_open(srv, fd, true);
    struct thread_arg *arg = malloc(sizeof *arg);
    bool ok = c && arg && yard_conn_set_add(&tm->live, c) == 0;
    pthread_mutex_lock(&tm->mu);
    if (ok) {
        *arg = (struct thread_arg){tm, c};
        pthread_t tid;
        int rc = pthread_create(&tid, &tm->attr, conn_thread, arg);
        if (rc == 0) {
            tm->running++;
        } else {
            yard_log_err("%s: cannot create a thread: %s: connection closed", peer, strerror(rc));
            yard_conn_set_remove(&tm->live, c);
            ok = false;
        }
    } else {
        yard_log_err("%s: out of memory for a connection", peer);
    }
    pthread_mutex_unlock(&tm->mu);
    if (!ok) {
        free(arg);
        if (c)
            yard_conn_close(c, NULL);
        else
            close(fd);
        yard_server_release(srv);
    }
}

static void thread_stop_all(struct thread_model *tm)
{
    atomic_store(&tm->stop, 1);
    uint64_t deadline = yard_now_ns() + STOP_GRACE_NS;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(STOP_GRACE_NS / YARD_NS_PER_S);
    ts.tv_nsec += (long)(STOP_GRACE_NS % YARD_NS_PER_S);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    /* Wake every thread blocked in read or write on its socket. */
    yard_conn_set_shutdown_all(&tm->live);
    pthread_mutex_lock(&tm->mu);
    while (tm->running > 0 && yard_now_ns() < deadline)
        if (pthread_cond_timedwait(&tm->idle, &tm->mu, &ts) == ETIMEDOUT)
            break;
    size_t left = tm->running;
    pthread_mutex_unlock(&tm->mu);
    if (left)
        yard_log_warn("%zu connection threads still running at exit", left);
}

static int thread_serve(yard_server_t *srv)
{
    struct thread_model *tm = &thread_model_state;
    tm->srv = srv;
    pthread_attr_init(&tm->attr);
    pthread_attr_setdetachstate(&tm->attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&tm->attr, THREAD_STACK);
    yard_server_accept_loop(srv, thread_on_conn, NULL, tm);
    close(srv->listen_fd);
    srv->listen_fd = -1;
    thread_stop_all(tm);
    pthread_attr_destroy(&tm->attr);
    pthread_mutex_lock(&tm->mu);
    bool idle = tm->running == 0;
    pthread_mutex_unlock(&tm->mu);
    if (idle)
        yard_conn_set_free(&tm->live);
    return 0;
}

const yard_model_t yard_model_thread = {
    .name = "thread",
    .summary = "a kernel thread per connection, blocking I/O",
    .traits = {.multi_threaded = true,
               .shared_state = "process memory with atomics",
               .ipc = "shared memory",
               .error_isolation = "none: a crash ends every connection"},
    .serve = thread_serve,
};
