/* Linux-only: eventfd, io_uring. What a port uses instead: docs/portability.md. */
/* uring: completion-based event loops over io_uring, one ring per thread.
 *
 * Where every other model waits for readiness and then makes a system call
 * per read and per write, a ring is told what to do and reports what was
 * done. Per connection the loop keeps at most one of each operation in
 * flight:
 *
 *   receive   multishot, into buffers the kernel picks from a ring of
 *             provided buffers; each buffer goes back as soon as the driver
 *             has fed its bytes to the app (which copies what it leaves)
 *   send      the output the driver queued (yard_conn_tx_take), one at a
 *             time so bytes leave in order; new output queues behind it
 *   store     the file bytes of --out (yard_conn_store_take)
 *   news      a read of the chat watch's eventfd
 *
 * and the loop one multishot accept on its listener and multishot polls on
 * its stop descriptor and its offload pool's completion queue. Everything
 * prepared during a loop turn is submitted, and the next completions waited
 * for, in one io_uring_enter (io_uring_submit_and_wait_timeout, whose
 * timeout is the next app timer or idle deadline).
 *
 * Backpressure and jobs: while 256 KiB of output waits, or a job is in the
 * pool, or the app is closing, the receive is cancelled, so the bytes stay
 * in the kernel and TCP slows the peer, as with epoll.
 *
 * Closing: a connection that is done first cancels what it has in flight
 * (the kernel may still be reading its buffers) and writes what --flush
 * buffered held back; it is closed and freed when its last operation has
 * completed. The completion queue is sized for multishot traffic; overflow
 * is counted (the kernel keeps overflowed completions and hands them over
 * later: IORING_FEAT_NODROP) and a lost completion is an error in the log. */
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "evbase.h"
#include "models.h"
#include "yard/clock.h"
#include "yard/log.h"
#include "yard/uring.h"

#define RING_ENTRIES 1024
#define CQ_ENTRIES (16u * RING_ENTRIES)
#define BUF_GROUP 0

/* user_data: a connection's address with the operation in its low bits
 * (connections are 16-byte aligned), or one of the loop's own below 16:
 * UD_ACCEPT + i is the accept on listener i. */
enum { OP_RECV = 1, OP_SEND, OP_STORE, OP_NEWS, OP_MASK = 7 };
enum { UD_STOP = 1, UD_DONE, UD_IGNORE, UD_ACCEPT = 8, UD_LOOP_MAX = 16 };
_Static_assert(UD_ACCEPT + YARD_MAX_LISTEN <= UD_LOOP_MAX, "a user_data per listener");

struct uconn {
    yard_evconn_t ev;    /* first: timers, idle order, the pool */
    uint64_t news_val;   /* the news eventfd's count, read by the ring */
    const char *reason;  /* why the loop closes it (NULL: the driver's own) */
    int slot;            /* its index in the ring's registered files, or -1 */
    uint8_t ops;         /* operations in flight that name the connection */
    bool recv_armed;     /* a multishot receive is armed */
    bool recv_cancelled; /* ... and a cancel for it was submitted */
    bool sending, storing, news_armed;
    bool dying;          /* closing: waits for its operations to end */
};

#define UC(c) ((struct uconn *)yard_conn_model(c))

typedef struct uring_stats {
    uint64_t turns, enters, sqes, cqes, overflow_turns, enobufs, recv_arms, cancels, accepted,
        fixed, news_again;
} uring_stats_t;

typedef struct uring_loop {
    yard_evbase_t b;
    int id;
    struct io_uring ring;
    bool ring_ok, defer_taskrun;
    yard_listen_set_t ls;
    int stop_fd, reserve_fd;
    bool stop_is_sigfd;
    yard_conn_policy_t policy;
    yard_bufring_t bufs; /* the receives' provided buffers */
    unsigned accept_armed; /* bit i: listener i's multishot accept is armed */
    bool stop_armed, done_armed, stopping;
    size_t dying; /* connections waiting for their operations */
    int *free_slots; /* registered-file slots not in use (a stack) */
    int nfree;
    uring_stats_t st;
    pthread_t tid;
    bool started;
    int status; /* 0, or 1 when the loop could not run */
    struct uring_startup *startup; /* with several rings; NULL with one */
} uring_loop_t;

/* Several rings start together: none accepts until every one is set up, or
 * the connections the first ones accept could take the descriptors the
 * others' io_uring_setup needs (and one ring refused stops the server). */
struct uring_startup {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int waiting_for; /* rings not yet set up */
    bool failed;
};

/* A ring is set up (ok) or could not be; waits for the others. Returns
 * whether every ring is. */
static bool startup_arrive(struct uring_startup *st, bool ok, int rings)
{
    pthread_mutex_lock(&st->mu);
    if (!ok)
        st->failed = true;
    st->waiting_for -= rings;
    if (st->waiting_for <= 0)
        pthread_cond_broadcast(&st->cv);
    while (st->waiting_for > 0)
        pthread_cond_wait(&st->cv, &st->mu);
    bool all = !st->failed;
    pthread_mutex_unlock(&st->mu);
    return all;
}

/* ---- the ring -------------------------------------------------------- */

/* Why io_uring_setup refused, in words an operator can act on. */
static const char *setup_error(int err, char *buf, size_t len)
{
    if (err == ENOSYS) {
        snprintf(buf, len, "this kernel has no io_uring (io_uring_setup: ENOSYS)");
    } else if (err == EPERM) {
        FILE *f = fopen("/proc/sys/kernel/io_uring_disabled", "r");
        int v = 0;
        if (f) {
            if (fscanf(f, "%d", &v) != 1)
                v = 0;
            fclose(f);
        }
        if (v == 2)
            snprintf(buf, len, "io_uring is disabled by the sysctl kernel.io_uring_disabled=2");
        else if (v == 1)
            snprintf(buf, len, "kernel.io_uring_disabled=1 and this process is not in "
                               "kernel.io_uring_group");
        else
            snprintf(buf, len, "io_uring_setup is refused (EPERM): a seccomp profile (container "
                               "runtimes block io_uring) or a security module");
    } else if (err == ENOMEM) {
        snprintf(buf, len, "io_uring_setup: out of memory: the locked-memory limit "
                           "(ulimit -l, RLIMIT_MEMLOCK) is too small for the ring");
    } else {
        snprintf(buf, len, "io_uring_setup: %s", strerror(err));
    }
    return buf;
}

/* The model needs multishot receive (Linux 6.0) and the ring itself. */
static const char *uring_unavailable(char *buf, size_t len)
{
    struct utsname u;
    int major = 0, minor = 0;
    if (uname(&u) == 0 && sscanf(u.release, "%d.%d", &major, &minor) == 2 &&
        (major < 6)) {
        snprintf(buf, len, "kernel %s is older than 6.0, which multishot receive needs",
                 u.release);
        return buf;
    }
    struct io_uring ring;
    bool defer;
    int rc = yard_ring_init(&ring, 8, 64, &defer);
    if (rc == -EOPNOTSUPP) {
        snprintf(buf, len, "this kernel's io_uring may drop completions (no IORING_FEAT_NODROP)");
        return buf;
    }
    if (rc < 0)
        return setup_error(-rc, buf, len);
    io_uring_queue_exit(&ring);
    return NULL;
}

/* A submission entry; when the queue is full, what is in it goes first. */
static struct io_uring_sqe *sqe_get(uring_loop_t *l)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);
    while (!sqe) {
        io_uring_submit(&l->ring);
        l->st.enters++;
        sqe = io_uring_get_sqe(&l->ring);
    }
    l->st.sqes++;
    return sqe;
}

static void *ud_ptr(uint64_t ud) { return (void *)(uintptr_t)(ud & ~(uint64_t)OP_MASK); }
static uint64_t conn_ud(yard_conn_t *c, int op) { return (uint64_t)(uintptr_t)c | (uint64_t)op; }

static void cancel(uring_loop_t *l, uint64_t ud)
{
    struct io_uring_sqe *sqe = sqe_get(l);
    io_uring_prep_cancel64(sqe, ud, 0);
    io_uring_sqe_set_data64(sqe, UD_IGNORE);
    l->st.cancels++;
}

static int bufs_init(uring_loop_t *l)
{
    const yard_config_t *cfg = l->b.srv->cfg;
    int rc = yard_bufring_init(&l->bufs, &l->ring, (unsigned)cfg->ring_bufs,
                               (unsigned)cfg->ring_buf_size, BUF_GROUP);
    if (rc < 0)
        yard_log_err("ring %d: %u receive buffers of %zu bytes: %s", l->id,
                     (unsigned)cfg->ring_bufs, cfg->ring_buf_size, strerror(-rc));
    return rc;
}

/* ---- connections ------------------------------------------------------ */

static void conn_after(uring_loop_t *l, yard_conn_t *c, uint64_t now);

/* An operation prepared on c->fd names the socket by its registered slot
 * instead, when it has one (no file lookup and reference count per
 * operation). */
static void sock_target(struct io_uring_sqe *sqe, yard_conn_t *c)
{
    if (UC(c)->slot >= 0) {
        sqe->fd = UC(c)->slot;
        sqe->flags |= IOSQE_FIXED_FILE;
    }
}

/* Register the socket in a free slot, if there is one. */
static void conn_register(uring_loop_t *l, yard_conn_t *c)
{
    UC(c)->slot = -1;
    if (!l->nfree)
        return;
    int slot = l->free_slots[l->nfree - 1];
    if (io_uring_register_files_update(&l->ring, (unsigned)slot, &c->fd, 1) == 1) {
        l->nfree--;
        UC(c)->slot = slot;
        l->st.fixed++;
    }
}

/* Before the socket is closed: the ring's reference would keep it open. */
static void conn_unregister(uring_loop_t *l, yard_conn_t *c)
{
    int slot = UC(c)->slot, none = -1;
    if (slot < 0)
        return;
    io_uring_register_files_update(&l->ring, (unsigned)slot, &none, 1);
    l->free_slots[l->nfree++] = slot;
    UC(c)->slot = -1;
}

static void arm_recv(uring_loop_t *l, yard_conn_t *c)
{
    struct io_uring_sqe *sqe = sqe_get(l);
    io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
    sock_target(sqe, c);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = BUF_GROUP;
    io_uring_sqe_set_data64(sqe, conn_ud(c, OP_RECV));
    struct uconn *uc = UC(c);
    uc->recv_armed = true;
    uc->recv_cancelled = false;
    uc->ops++;
    l->st.recv_arms++;
}

static void submit_send(uring_loop_t *l, yard_conn_t *c)
{
    size_t n;
    const uint8_t *p = yard_conn_tx_take(c, &n);
    if (!p)
        return;
    struct io_uring_sqe *sqe = sqe_get(l);
    io_uring_prep_send(sqe, c->fd, p, n, MSG_NOSIGNAL);
    sock_target(sqe, c);
    io_uring_sqe_set_data64(sqe, conn_ud(c, OP_SEND));
    UC(c)->sending = true;
    UC(c)->ops++;
}

static bool submit_store(uring_loop_t *l, yard_conn_t *c, bool final)
{
    size_t n;
    const uint8_t *p = yard_conn_store_take(c, &n, final);
    if (!p)
        return false;
    struct io_uring_sqe *sqe = sqe_get(l);
    /* The file is opened O_APPEND: every write goes to its end. */
    io_uring_prep_write(sqe, c->srv->out_fd, p, (unsigned)n, (uint64_t)-1);
    io_uring_sqe_set_data64(sqe, conn_ud(c, OP_STORE));
    UC(c)->storing = true;
    UC(c)->ops++;
    return true;
}

static void arm_news(uring_loop_t *l, yard_conn_t *c)
{
    struct uconn *uc = UC(c);
    struct io_uring_sqe *sqe = sqe_get(l);
    io_uring_prep_read(sqe, yard_conn_news_fd(c), &uc->news_val, sizeof uc->news_val, 0);
    io_uring_sqe_set_data64(sqe, conn_ud(c, OP_NEWS));
    uc->news_armed = true;
    uc->ops++;
}

static void stop_recv(uring_loop_t *l, yard_conn_t *c)
{
    struct uconn *uc = UC(c);
    if (uc->recv_armed && !uc->recv_cancelled) {
        cancel(l, conn_ud(c, OP_RECV));
        uc->recv_cancelled = true;
    }
}

/* The connection is closed and freed once nothing in flight names it,
 * after the file has what --flush buffered held back. */
static void conn_reap(uring_loop_t *l, yard_conn_t *c)
{
    struct uconn *uc = UC(c);
    if (uc->ops || submit_store(l, c, true))
        return;
    l->dying--;
    conn_unregister(l, c);
    yard_conn_close(c, uc->reason);
    yard_server_release(l->b.srv);
}

static void conn_begin_close(uring_loop_t *l, yard_conn_t *c, const char *reason)
{
    struct uconn *uc = UC(c);
    if (uc->ev.in_pool) {
        /* A pool thread still has its job: close when the job comes back. */
        yard_conn_fail(c, reason, YARD_CLOSE_INFO);
        return;
    }
    if (uc->dying)
        return;
    uc->dying = true;
    uc->reason = reason;
    l->dying++;
    yard_evbase_remove(&l->b, c);
    stop_recv(l, c);
    if (uc->sending)
        cancel(l, conn_ud(c, OP_SEND)); /* nothing will read it: it failed, or we stop */
    if (uc->news_armed)
        cancel(l, conn_ud(c, OP_NEWS));
    conn_reap(l, c);
}

static int watch_done(void *arg, int efd)
{
    uring_loop_t *l = arg;
    struct io_uring_sqe *sqe = sqe_get(l);
    io_uring_prep_poll_multishot(sqe, efd, POLLIN);
    io_uring_sqe_set_data64(sqe, UD_DONE);
    l->done_armed = true;
    return 0;
}

/* After anything happened to a connection: ask the driver what it waits
 * for now and have exactly that in flight. */
static void conn_after(uring_loop_t *l, yard_conn_t *c, uint64_t now)
{
    struct uconn *uc = UC(c);
    if (uc->dying) {
        conn_reap(l, c);
        return;
    }
    if (uc->ev.in_pool)
        return; /* in the pool's hands until the job comes back */
    const char *why;
    yard_wait_t w = yard_evbase_next(&l->b, c, watch_done, l, &why);
    if (w.next == YARD_NEXT_JOB) {
        stop_recv(l, c); /* the peer's next bytes wait in the kernel */
        return;
    }
    if (w.next == YARD_NEXT_CLOSE) {
        conn_begin_close(l, c, why);
        return;
    }
    if (w.read && !uc->recv_armed)
        arm_recv(l, c);
    else if (!w.read)
        stop_recv(l, c);
    if (w.write && !uc->sending)
        submit_send(l, c);
    if (w.store && !uc->storing)
        submit_store(l, c, false);
    if (w.news && !uc->news_armed)
        arm_news(l, c);
    if (l->b.srv->cfg->idle_timeout_ns)
        yard_evbase_touch(&l->b, c, now);
}

static void on_recv(uring_loop_t *l, yard_conn_t *c, int res, unsigned flags)
{
    struct uconn *uc = UC(c);
    yard_scratch_t *s = &l->b.scratch;
    int bid = yard_bufring_bid(flags);
    if (bid >= 0) {
        if (res > 0 && !uc->dying && !c->failed)
            yard_conn_on_bytes(c, s, yard_bufring_buf(&l->bufs, (unsigned)bid), (size_t)res);
        yard_bufring_return(&l->bufs, (unsigned)bid);
    }
    if (flags & IORING_CQE_F_MORE)
        return; /* still armed */
    uc->recv_armed = false;
    uc->ops--;
    if (uc->dying)
        return;
    if (res == 0) {
        yard_conn_on_eof(c, s);
    } else if (res == -ENOBUFS) {
        l->st.enobufs++; /* every buffer in use: armed again below */
    } else if (res < 0 && res != -ECANCELED) {
        yard_conn_fail(c, strerror(-res), YARD_CLOSE_QUIET);
    }
}

static void on_conn_cqe(uring_loop_t *l, yard_conn_t *c, int op, int res, unsigned flags,
                        uint64_t now)
{
    struct uconn *uc = UC(c);
    switch (op) {
    case OP_RECV:
        on_recv(l, c, res, flags);
        break;
    case OP_SEND:
        uc->sending = false;
        uc->ops--;
        if (!uc->dying || res != -ECANCELED)
            yard_conn_tx_done(c, res);
        break;
    case OP_STORE:
        uc->storing = false;
        uc->ops--;
        yard_conn_store_done(c, res);
        break;
    case OP_NEWS:
        uc->news_armed = false;
        uc->ops--;
        if (res == (int)sizeof uc->news_val && !uc->dying)
            yard_conn_on_news_read(c, &l->b.scratch);
        else if (res == -EAGAIN)
            l->st.news_again++; /* the count was taken first: armed again below */
        else if (res < 0 && res != -ECANCELED && !uc->dying)
            yard_conn_fail(c, "reading the news watch failed", YARD_CLOSE_WARN);
        break;
    default:
        yard_fatal("ring %d: a completion for unknown operation %d", l->id, op);
    }
    conn_after(l, c, now);
}

/* ---- the loop ----------------------------------------------------------- */

static void arm_accept(uring_loop_t *l, int i)
{
    struct io_uring_sqe *sqe = sqe_get(l);
    io_uring_prep_multishot_accept(sqe, l->ls.fd[i], NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    io_uring_sqe_set_data64(sqe, UD_ACCEPT + (uint64_t)i);
    l->accept_armed |= 1u << i;
}

static void arm_stop(uring_loop_t *l)
{
    struct io_uring_sqe *sqe = sqe_get(l);
    io_uring_prep_poll_multishot(sqe, l->stop_fd, POLLIN);
    io_uring_sqe_set_data64(sqe, UD_STOP);
    l->stop_armed = true;
}

static void on_accept(uring_loop_t *l, int i, int res, unsigned flags, uint64_t now)
{
    if (!(flags & IORING_CQE_F_MORE))
        l->accept_armed &= ~(1u << i); /* armed again at the end of the turn */
    yard_server_t *srv = l->b.srv;
    if (res < 0) {
        /* Out of descriptors: shed every pending connection now. A
         * multishot accept that stays armed after the error would not look
         * at the backlog again until another connection arrives, and the
         * ones waiting would hang. */
        if (!yard_accept_retry(-res) && res != -EAGAIN && res != -ECANCELED)
            yard_server_accept_failed(srv, l->ls.fd[i], -res, &l->reserve_fd);
        return;
    }
    char peer[YARD_ADDR_STRLEN];
    if (l->stopping || yard_server_admit_fd(srv, res, peer, sizeof peer) < 0) {
        if (l->stopping)
            close(res);
        return;
    }
    yard_conn_t *c = yard_evbase_open(&l->b, res, &l->policy, peer, now);
    if (!c)
        return;
    l->st.accepted++;
    if (srv->cfg->ring_fixed_files)
        conn_register(l, c);
    else
        UC(c)->slot = -1;
    conn_after(l, c, now);
}

static void after_cb(void *l, yard_conn_t *c, uint64_t now) { conn_after(l, c, now); }

static void on_done(uring_loop_t *l, unsigned flags, uint64_t now)
{
    if (!(flags & IORING_CQE_F_MORE))
        l->done_armed = false;
    yard_evbase_jobs_done(&l->b, after_cb, l, now);
}

static void on_cqe(uring_loop_t *l, const struct io_uring_cqe *cqe, uint64_t now)
{
    uint64_t ud = cqe->user_data;
    if (ud >= UD_LOOP_MAX) {
        on_conn_cqe(l, ud_ptr(ud), (int)(ud & OP_MASK), cqe->res, cqe->flags, now);
        return;
    }
    if (ud >= UD_ACCEPT) {
        on_accept(l, (int)(ud - UD_ACCEPT), cqe->res, cqe->flags, now);
        return;
    }
    switch (ud) {
    case UD_STOP:
        if (!(cqe->flags & IORING_CQE_F_MORE))
            l->stop_armed = false;
        if (!l->stop_is_sigfd || yard_signals_stop(l->stop_fd, NULL, NULL) != 0)
            l->stopping = true;
        break;
    case UD_DONE:
        on_done(l, cqe->flags, now);
        break;
    default:
        break; /* cancels */
    }
}

/* Read every completion there is. */
static void reap(uring_loop_t *l, uint64_t now)
{
    struct io_uring_cqe *cqes[256];
    unsigned n;
    while ((n = io_uring_peek_batch_cqe(&l->ring, cqes, 256)) > 0) {
        for (unsigned i = 0; i < n; i++)
            on_cqe(l, cqes[i], now);
        io_uring_cq_advance(&l->ring, n);
        l->st.cqes += n;
    }
}

/* Submit what the turn prepared and wait for a completion or the next
 * deadline, in one system call. */
static int submit_and_wait(uring_loop_t *l, uint64_t now, uint64_t due)
{
    struct io_uring_cqe *cqe;
    struct __kernel_timespec ts, *tsp = NULL;
    if (due != UINT64_MAX) {
        uint64_t wait = due > now ? due - now : 0;
        ts.tv_sec = (long long)(wait / YARD_NS_PER_S);
        ts.tv_nsec = (long long)(wait % YARD_NS_PER_S);
        tsp = &ts;
    }
    l->st.enters++;
    int rc = io_uring_submit_and_wait_timeout(&l->ring, &cqe, 1, tsp, NULL);
    if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EBUSY && rc != -EAGAIN) {
        yard_log_err("ring %d: io_uring_enter: %s", l->id, strerror(-rc));
        return -1;
    }
    return 0;
}

static void check_overflow(uring_loop_t *l)
{
    if (io_uring_cq_has_overflow(&l->ring))
        l->st.overflow_turns++;
}

static void loop_run(uring_loop_t *l)
{
    yard_evbase_t *b = &l->b;
    arm_stop(l);
    uint64_t now = yard_now_ns();
    while (!l->stopping) {
        for (int i = 0; i < l->ls.n; i++)
            if (!(l->accept_armed & (1u << i)))
                arm_accept(l, i);
        if (!l->stop_armed)
            arm_stop(l);
        if (submit_and_wait(l, now, yard_evbase_due(b)) < 0)
            break;
        l->st.turns++;
        check_overflow(l);
        now = yard_now_ns();
        reap(l, now);
        yard_evbase_fire_timers(b, after_cb, l, now);
        yard_conn_t *c;
        while ((c = yard_evbase_expired(b, now)))
            conn_begin_close(l, c, "idle timeout");
    }
    /* Stop: no more connections; every job back; every connection closed
     * once what it has in flight has ended. */
    l->stopping = true;
    for (int i = 0; i < l->ls.n; i++)
        if (l->accept_armed & (1u << i))
            cancel(l, UD_ACCEPT + (uint64_t)i);
    yard_evbase_wait_jobs(b);
    yard_conn_t *c;
    while ((c = yard_evbase_oldest(b)))
        conn_begin_close(l, c, NULL);
    uint64_t deadline = yard_now_ns() + YARD_STOP_GRACE_NS;
    while (l->dying && (now = yard_now_ns()) < deadline) {
        if (submit_and_wait(l, now, deadline) < 0)
            break;
        reap(l, yard_now_ns());
    }
    if (l->dying)
        yard_log_warn("ring %d: %zu connections still had operations in flight at exit", l->id,
                      l->dying);
}

static void print_stats(const uring_loop_t *l)
{
    unsigned lost = l->ring_ok ? *l->ring.cq.koverflow : 0;
    if (lost)
        yard_log_err("ring %d: the kernel dropped %u completions", l->id, lost);
    if (!l->b.srv->cfg->stats)
        return;
    const uring_stats_t *s = &l->st;
    fprintf(stderr,
            "uring ring %d: turns %llu, io_uring_enter %llu, sqes %llu, cqes %llu, accepted %llu, "
            "receives armed %llu, out of buffers %llu, cancels %llu, cq overflow turns %llu, "
            "completions lost %u, registered sockets %llu, news reads again %llu, setup %s\n",
            l->id, (unsigned long long)s->turns, (unsigned long long)s->enters,
            (unsigned long long)s->sqes, (unsigned long long)s->cqes,
            (unsigned long long)s->accepted, (unsigned long long)s->recv_arms,
            (unsigned long long)s->enobufs, (unsigned long long)s->cancels,
            (unsigned long long)s->overflow_turns, lost, (unsigned long long)s->fixed,
            (unsigned long long)s->news_again,
            l->defer_taskrun ? "single_issuer+defer_taskrun" : "plain");
}

/* A sparse table of registered files, as large as the descriptor limit
 * allows (at most 64Ki): sockets beyond it, or a kernel that refuses, use
 * plain descriptors. */
static void files_init(uring_loop_t *l)
{
    struct rlimit rl;
    unsigned n = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < n)
        n = (unsigned)rl.rlim_cur;
    l->free_slots = malloc(n * sizeof *l->free_slots);
    if (!l->free_slots || io_uring_register_files_sparse(&l->ring, n) < 0) {
        yard_log_info("ring %d: no registered files: sockets are named by descriptor", l->id);
        return;
    }
    for (unsigned i = 0; i < n; i++)
        l->free_slots[i] = (int)(n - 1 - i);
    l->nfree = (int)n;
}

/* Everything a loop owns is set up in the thread that runs it: a single
 * issuer ring belongs to the thread that created it. */
static int loop_setup(uring_loop_t *l)
{
    yard_server_t *srv = l->b.srv;
    char why[256];
    int rc = yard_ring_init(&l->ring, RING_ENTRIES, CQ_ENTRIES, &l->defer_taskrun);
    if (rc < 0) {
        yard_log_err("ring %d: %s", l->id, setup_error(-rc, why, sizeof why));
        return -1;
    }
    l->ring_ok = true;
    /* The ring's own descriptor, registered: no file lookup per enter. */
    io_uring_register_ring_fd(&l->ring);
    l->reserve_fd = yard_reserve_fd_open();
    l->policy = (yard_conn_policy_t){.job_pool = srv->cfg->offload_threads > 0,
                                     .completion = true,
                                     .model_size = sizeof(struct uconn)};
    if (srv->cfg->ring_fixed_files)
        files_init(l);
    return bufs_init(l);
}

static void loop_teardown(uring_loop_t *l)
{
    print_stats(l);
    yard_evbase_fini(&l->b);
    if (l->ring_ok)
        io_uring_queue_exit(&l->ring);
    l->ring_ok = false;
    yard_bufring_fini(&l->bufs);
    free(l->free_slots);
    if (l->reserve_fd >= 0)
        close(l->reserve_fd);
}

static void loop_main(uring_loop_t *l)
{
    if (loop_setup(l) < 0)
        l->status = 1;
    if (l->startup && !startup_arrive(l->startup, l->status == 0, 1) && !l->status)
        l->status = 2; /* another ring could not start: this one does not either */
    if (l->status == 0)
        loop_run(l);
    loop_teardown(l);
}

static void *loop_thread(void *arg)
{
    uring_loop_t *l = arg;
    loop_main(l);
    if (l->status == 1)
        kill(getpid(), SIGTERM); /* one loop cannot run: the server stops */
    return NULL;
}

static void loop_prepare(uring_loop_t *l, yard_server_t *srv, int id,
                         const yard_listen_set_t *ls, int stop_fd, bool stop_is_sigfd)
{
    memset(l, 0, sizeof *l);
    yard_evbase_init(&l->b, srv);
    l->id = id;
    l->ls = *ls;
    l->stop_fd = stop_fd;
    l->stop_is_sigfd = stop_is_sigfd;
    l->reserve_fd = -1;
}

static int uring_threads(yard_server_t *srv, uring_loop_t *ls, const yard_listen_set_t *sets,
                         int n)
{
    int stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (stop_fd < 0) {
        yard_log_err("eventfd: %s", strerror(errno));
        return 1;
    }
    struct uring_startup startup = {.mu = PTHREAD_MUTEX_INITIALIZER,
                                    .cv = PTHREAD_COND_INITIALIZER,
                                    .waiting_for = n};
    int status = 0;
    for (int i = 0; i < n; i++) {
        loop_prepare(&ls[i], srv, i, &sets[i], stop_fd, false);
        ls[i].startup = &startup;
        int rc = pthread_create(&ls[i].tid, NULL, loop_thread, &ls[i]);
        if (rc != 0) {
            yard_log_err("ring %d: pthread_create: %s", i, strerror(rc));
            status = 1;
            /* The started rings wait for every ring: let them go (and stop). */
            startup_arrive(&startup, false, n - i);
            break;
        }
        ls[i].started = true;
    }
    if (status == 0 && yard_wait_stop_signal(srv->sig_fd) < 0)
        status = 1;
    /* The eventfd stays readable once written, so every loop sees it. */
    if (eventfd_write(stop_fd, 1) < 0)
        yard_fatal("eventfd_write: %s", strerror(errno));
    for (int i = 0; i < n; i++) {
        if (!ls[i].started)
            continue;
        pthread_join(ls[i].tid, NULL);
        if (ls[i].status)
            status = 1;
    }
    close(stop_fd);
    return status;
}

static int uring_serve(yard_server_t *srv)
{
    int n = srv->cfg->workers > 0 ? srv->cfg->workers : yard_cpus_available();
    uring_loop_t *ls = calloc((size_t)n, sizeof *ls);
    if (!ls) {
        yard_log_err("out of memory");
        return 1;
    }
    int status;
    if (n == 1) {
        loop_prepare(&ls[0], srv, 0, &srv->ls, srv->sig_fd, true);
        loop_main(&ls[0]);
        status = ls[0].status;
    } else {
        yard_listen_set_t sets[n];
        if (yard_listeners_open(srv, sets, n) < 0) {
            free(ls);
            return 1;
        }
        yard_log_info("%d rings, one per thread", n);
        status = uring_threads(srv, ls, sets, n);
        yard_listeners_close(srv, sets, n);
    }
    free(ls);
    return status;
}

static int uring_check(const yard_config_t *cfg, const struct yard_app *app, char *err,
                       size_t errlen)
{
    unsigned n = (unsigned)cfg->ring_bufs;
    if (n & (n - 1)) {
        snprintf(err, errlen, "--ring-bufs must be a power of two (got %u)", n);
        return -1;
    }
    return 0;
}

static const yard_opt_choice_t on_off[] = {
    {.name = "on", .value = 1}, {.name = "off", .value = 0}, {.name = NULL}};

static const yard_opt_t uring_opts[] = {
    {.name = "workers", .form = "N", .type = YARD_OPT_INT, YARD_OPT_FIELD(yard_config_t, workers),
     .min = 1, .max = 1024,
     .help = "number of rings, one per thread, each with its own SO_REUSEPORT listener "
             "(default: the CPUs in the affinity mask)"},
    {.name = "offload-threads", .form = "N", .type = YARD_OPT_INT,
     YARD_OPT_FIELD(yard_config_t, offload_threads), .min = 0, .max = 256, .def = "2",
     .help = "threads per ring that run CPU-heavy jobs such as bcrypt, started on its first "
             "job; 0 runs them inline, blocking the ring"},
    {.name = "ring-bufs", .form = "N", .type = YARD_OPT_INT,
     YARD_OPT_FIELD(yard_config_t, ring_bufs), .min = 1, .max = 32768, .def = "1024",
     .help = "receive buffers each ring provides to the kernel, shared by all its connections "
             "(a power of two)"},
    {.name = "ring-buf-size", .form = "BYTES", .type = YARD_OPT_SIZE,
     YARD_OPT_FIELD(yard_config_t, ring_buf_size), .min = 512, .max = 1024 * 1024, .def = "4K",
     .help = "bytes per receive buffer: the most one receive completion carries"},
    {.name = "fixed-files", .form = "on|off", .type = YARD_OPT_ENUM,
     YARD_OPT_FIELD(yard_config_t, ring_fixed_files), .choices = on_off, .def = "off",
     .help = "register each socket with its ring, so that an operation on it skips the file "
             "lookup, for two more system calls per connection (measured: no gain for echo on "
             "one ring, docs/results.md)"},
    {.name = "stats", .type = YARD_OPT_SWITCH, YARD_OPT_FIELD(yard_config_t, stats),
     .help = "at exit, print each ring's counters to stderr (system calls, submissions, "
             "completions, completion-queue overflows, buffer shortages)"},
    YARD_OPT_END,
};

const yard_model_t yard_model_uring = {
    .name = "uring",
    .summary = "completion-based event loops over io_uring, one ring per thread: multishot "
               "accept and receive into provided buffers, batched sends, one system call per "
               "loop turn",
    .traits = {.multi_threaded = true,
               .event_based = true,
               .completion_based = true,
               .shared_state = "plain memory and atomics (one ring per thread)",
               .ipc = "the kernel spreads connections over the listeners (SO_REUSEPORT)",
               .error_isolation = "none: a crash ends every connection"},
    .reuseport = true,
    .opts = uring_opts,
    .check = uring_check,
    .unavailable = uring_unavailable,
    .serve = uring_serve,
};
