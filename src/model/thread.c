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
};

/* The model's per-connection state. */
struct thread_conn {
    yard_conn_link_t live;
};

static const yard_conn_policy_t thread_policy = {.blocking = true,
                                                 .model_size = sizeof(struct thread_conn)};

static void *conn_thread(void *p)
{
    yard_conn_t *c = p;
    struct thread_model *tm = &thread_model_state;
    struct thread_conn *tc = yard_conn_model(c);
    yard_scratch_t scratch = {0};
    yard_blocking_serve(c, &scratch, &tm->stop);
    yard_conn_set_remove(&tm->live, &tc->live); /* before the fd is closed */
    yard_conn_close(c, NULL);
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
    yard_conn_t *c = yard_conn_open(srv, fd, &thread_policy);
    bool ok = c != NULL;
    pthread_mutex_lock(&tm->mu);
    if (ok) {
        struct thread_conn *tc = yard_conn_model(c);
        yard_conn_set_add(&tm->live, &tc->live, c);
        pthread_t tid;
        int rc = pthread_create(&tid, &tm->attr, conn_thread, c);
        if (rc == 0) {
            tm->running++;
        } else {
            yard_log_err("%s: cannot create a thread: %s: connection closed", peer, strerror(rc));
            yard_conn_set_remove(&tm->live, &tc->live);
            ok = false;
        }
    } else {
        yard_log_err("%s: out of memory for a connection", peer);
    }
    pthread_mutex_unlock(&tm->mu);
    if (!ok) {
        if (c)
            yard_conn_close(c, NULL);
        else
            close(fd);
        yard_server_release(srv);
    }
}

/* yard_drain_conns's wait: until a connection thread ends or the deadline. */
static size_t thread_wait_fewer(void *arg, uint64_t deadline_ns)
{
    struct thread_model *tm = arg;
    pthread_mutex_lock(&tm->mu);
    size_t before = tm->running;
    uint64_t now = yard_now_ns();
    if (before && now < deadline_ns) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts); /* the condition variable's clock */
        uint64_t ns = (uint64_t)ts.tv_nsec + (deadline_ns - now);
        ts.tv_sec += (time_t)(ns / YARD_NS_PER_S);
        ts.tv_nsec = (long)(ns % YARD_NS_PER_S);
        while (tm->running == before)
            if (pthread_cond_timedwait(&tm->idle, &tm->mu, &ts) == ETIMEDOUT)
                break;
    }
    size_t left = tm->running;
    pthread_mutex_unlock(&tm->mu);
    return left;
}

static int thread_serve(yard_server_t *srv)
{
    struct thread_model *tm = &thread_model_state;
    tm->srv = srv;
    yard_conn_set_init(&tm->live);
    pthread_attr_init(&tm->attr);
    pthread_attr_setdetachstate(&tm->attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&tm->attr, THREAD_STACK);
    yard_server_accept_loop(srv, thread_on_conn, NULL, tm);
    yard_listen_set_close(&srv->ls);
    yard_drain_conns(&tm->live, &tm->stop, thread_wait_fewer, tm, "connection threads");
    pthread_attr_destroy(&tm->attr);
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
