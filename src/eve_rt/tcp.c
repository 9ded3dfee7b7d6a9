/* The Eve runtime: tcp listeners and sockets on the coro netpoller, and the
 * read and write buffers. */
#define _GNU_SOURCE /* accept4 */

#include "rt_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "yard/net.h"
#include "yard/shed.h"

/* A data event's buffer: what one read may take. */
#define RBUF_CAP (16u * 1024u)
/* After an accept error that is not "nothing to accept" (descriptors
 * exhausted, say): wait this long before trying again, instead of spinning. */
#define ACCEPT_RETRY_NS (100u * 1000000u)
/* A listener's wait for a connection also ends after this long: a backstop
 * for a close that raced with the start of the wait. */
#define ACCEPT_WAIT_NS (1000u * 1000000u)

/* ---- read and write buffers ------------------------------------------------------------------ */

static eve_rbuf_t *rbuf_alloc(size_t cap)
{
    eve_rbuf_t *b = rt_malloc(sizeof *b + cap);
    atomic_init(&b->h.rc, 1);
    b->h.dtor = NULL; /* the bytes are part of the block */
    memset(&b->h.perm, 0, sizeof b->h.perm);
    b->len = 0;
    b->cap = cap;
    b->bytes = cap ? (unsigned char *)(b + 1) : NULL;
    return b;
}

eve_rbuf_t *eve_rbuf_new(void)
{
    return rbuf_alloc(0);
}

int64_t eve_rbuf_size(const eve_rbuf_t *b)
{
    return (int64_t)b->len;
}

uint8_t eve_rbuf_at(const eve_rbuf_t *b, int64_t i, const char *pos)
{
    if (i < 0 || (uint64_t)i >= b->len)
        eve_fail(pos, "index %lld out of range for a read_buffer of size %zu", (long long)i,
                 b->len);
    return b->bytes[i];
}

eve_str_t *eve_rbuf_to_string(const eve_rbuf_t *b)
{
    return eve_str_from((const char *)b->bytes, b->len);
}

static void wbuf_dtor(eve_obj_t *o)
{
    free(((eve_wbuf_t *)o)->bytes);
}

/* Freed write buffers kept per thread, with their bytes, for the next
 * eve_wbuf_new: a reply buffer per message costs no malloc. Not under
 * AddressSanitizer, which should see every buffer's life. */
#if defined(__SANITIZE_ADDRESS__)
#define WBUF_CACHE 0
#else
#define WBUF_CACHE 8
#endif
#define WBUF_CACHE_MAX_CAP (64u * 1024u)
#if WBUF_CACHE
static _Thread_local eve_wbuf_t *wbuf_cache[WBUF_CACHE];
static _Thread_local unsigned wbuf_ncache;
#endif

bool rt_wbuf_recycle(eve_obj_t *o)
{
#if WBUF_CACHE
    if (o->dtor != wbuf_dtor || wbuf_ncache == WBUF_CACHE ||
        ((eve_wbuf_t *)o)->cap > WBUF_CACHE_MAX_CAP)
        return false;
    wbuf_cache[wbuf_ncache++] = (eve_wbuf_t *)o;
    return true;
#else
    (void)o;
    return false;
#endif
}

eve_wbuf_t *eve_wbuf_new(void)
{
#if WBUF_CACHE
    if (wbuf_ncache) {
        eve_wbuf_t *b = wbuf_cache[--wbuf_ncache];
        atomic_store_explicit(&b->h.rc, 1, memory_order_relaxed);
        memset(&b->h.perm, 0, sizeof b->h.perm);
        b->len = 0;
        return b;
    }
#endif
    return eve_obj_new(sizeof(eve_wbuf_t), wbuf_dtor);
}

int64_t eve_wbuf_size(const eve_wbuf_t *b)
{
    return (int64_t)b->len;
}

void eve_wbuf_append(eve_wbuf_t *b, const void *bytes, size_t len)
{
    if (len == 0)
        return;
    if (len > SIZE_MAX / 2 - b->len)
        rt_oom();
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->len + len)
            cap *= 2;
        /* bytes may be b's own (b.append(b)). */
        const unsigned char *src = bytes;
        bool own = b->bytes && src >= b->bytes && src < b->bytes + b->len;
        size_t off = own ? (size_t)(src - b->bytes) : 0;
        b->bytes = rt_realloc(b->bytes, cap);
        b->cap = cap;
        if (own)
            bytes = b->bytes + off;
    }
    memmove(b->bytes + b->len, bytes, len);
    b->len += len;
}

void eve_wbuf_append_byte(eve_wbuf_t *b, int64_t byte)
{
    unsigned char c = (unsigned char)(byte & 0xff);
    eve_wbuf_append(b, &c, 1);
}

void eve_wbuf_clear(eve_wbuf_t *b)
{
    b->len = 0;
}

/* ---- sockets ------------------------------------------------------------------------------------ */

struct eve_socket {
    eve_obj_t h;
    struct rt_src src; /* 0: data, 1: close */
    atomic_int lk;     /* guards fd and shut against eve_socket_close */
    int fd;            /* -1: not connected, or closed; changed under lk and wmu */
    bool shut;
    atomic_bool closing; /* close() was called or the connection ended: no more data events */
    atomic_bool dead;    /* closed or failed: writes do nothing */
    yard_coro_mutex_t wmu; /* one writer at a time, whole writes */
    eve_listener_t *from;  /* until its connection callbacks have run */
};

void rt_socket_dtor(eve_obj_t *o)
{
    eve_socket_t *s = (eve_socket_t *)o;
    rt_src_kill(&s->src);
}

struct rt_src *rt_socket_src(void *s)
{
    return &((eve_socket_t *)s)->src;
}

eve_socket_t *eve_socket_new(void)
{
    eve_socket_t *s = eve_obj_new(sizeof *s, rt_socket_dtor);
    s->fd = -1;
    atomic_init(&s->closing, true);
    atomic_init(&s->dead, true);
    return s;
}

/* Shuts the connection down so that its reader wakes (it owns the fd). */
static void socket_shutdown(eve_socket_t *s)
{
    rt_lock(&s->lk);
    if (s->fd >= 0 && !s->shut) {
        shutdown(s->fd, SHUT_RDWR);
        s->shut = true;
    }
    rt_unlock(&s->lk);
}

static int send_all(int fd, const unsigned char *p, size_t len)
{
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int w = yard_coro_wait_fd(fd, YARD_CORO_OUT, 0);
            if (w == -EBADF)
                return -EBADF;
            continue;
        }
        return n < 0 ? -errno : -EIO;
    }
    return 0;
}

void eve_socket_write(eve_cx_t *cx, eve_socket_t *s, const void *bytes, size_t len)
{
    (void)cx;
    if (!s || len == 0 || atomic_load_explicit(&s->dead, memory_order_acquire))
        return;
    bool failed = false;
    yard_coro_mutex_lock(&s->wmu);
    if (s->fd >= 0 && !atomic_load_explicit(&s->dead, memory_order_acquire) &&
        send_all(s->fd, bytes, len) != 0) {
        atomic_store_explicit(&s->dead, true, memory_order_release);
        failed = true;
    }
    yard_coro_mutex_unlock(&s->wmu);
    if (failed) {
        /* A broken connection: its reader ends it (close event) now. */
        atomic_store_explicit(&s->closing, true, memory_order_release);
        socket_shutdown(s);
    }
}

void eve_socket_close(eve_cx_t *cx, eve_socket_t *s)
{
    (void)cx;
    if (!s)
        return;
    atomic_store_explicit(&s->closing, true, memory_order_release);
    atomic_store_explicit(&s->dead, true, memory_order_release);
    socket_shutdown(s);
}

/* ---- listeners ------------------------------------------------------------------------------------ */

struct eve_listener {
    eve_obj_t h;
    struct rt_src src; /* 0: listening, 1: connection, 2: error */
    struct eve_deferred dfr;
    eve_str_t *addr;
    atomic_int lk;   /* guards fd and its shutdown against eve_listener_close */
    int fd;          /* -1 unless listening */
    atomic_bool closed;
    yard_coro_mutex_t conn_mu; /* connection events one at a time; held when the source dies */
};

void rt_listener_dtor(eve_obj_t *o)
{
    eve_listener_t *l = (eve_listener_t *)o;
    rt_src_kill(&l->src);
    eve_release(l->addr);
}

struct rt_src *rt_listener_src(void *l)
{
    return &((eve_listener_t *)l)->src;
}

static void listener_start(struct eve_deferred *d);

eve_listener_t *eve_tcp_listen(eve_cx_t *cx, const eve_str_t *address)
{
    eve_listener_t *l = eve_obj_new(sizeof *l, rt_listener_dtor);
    eve_retain((void *)address);
    l->addr = (eve_str_t *)address;
    l->fd = -1;
    l->dfr.start = listener_start;
    /* The deferred list's own reference, dropped once started. */
    eve_retain(l);
    l->dfr.next = cx->deferred;
    cx->deferred = &l->dfr;
    return l;
}

void eve_listener_close(eve_cx_t *cx, eve_listener_t *l)
{
    (void)cx;
    if (!l)
        return;
    atomic_store_explicit(&l->closed, true, memory_order_seq_cst);
    rt_lock(&l->lk);
    if (l->fd >= 0)
        shutdown(l->fd, SHUT_RDWR); /* a waiting accept wakes and fails */
    rt_unlock(&l->lk);
}

void rt_deferred_start_all(struct eve_deferred *list)
{
    /* Pushed at the front: start them in the order they were made. */
    struct eve_deferred *rev = NULL;
    while (list) {
        struct eve_deferred *next = list->next;
        list->next = rev;
        rev = list;
        list = next;
    }
    while (rev) {
        struct eve_deferred *next = rev->next;
        rev->next = NULL;
        rev->start(rev);
        rev = next;
    }
}

/* Says why a listener stopped: its error callbacks, or stderr when it has
 * none. */
static void listener_error(eve_listener_t *l, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void listener_error(eve_listener_t *l, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (rt_src_empty(&l->src, 2)) {
        fprintf(stderr, "%s: %s\n", rt_prog_name, msg);
        return;
    }
    eve_str_t *s = eve_str_from(msg, strlen(msg));
    rt_dispatch(&l->src, 2, (eve_val_t){.p = s}, NULL);
    eve_release(s);
}

struct resolve_job {
    const char *text;
    yard_addr_list_t list;
    char err[256];
    int rc;
};

static void *resolve_fn(void *arg)
{
    struct resolve_job *j = arg;
    j->rc = yard_addr_resolve(j->text, &j->list, j->err, sizeof j->err);
    return NULL;
}

static void conn_main(void *arg);

static void start_conn(eve_listener_t *l, int fd)
{
    yard_set_nodelay(fd);
    eve_socket_t *s = eve_obj_new(sizeof *s, rt_socket_dtor);
    s->fd = fd;
    eve_retain(l);
    s->from = l;
    yard_coro_register_fd(fd); /* the first wait parks at once */
    rt_live_inc();
    if (yard_coro_go(conn_main, s) != 0) {
        fprintf(stderr, "%s: out of memory for a connection\n", rt_prog_name);
        yard_coro_close(fd);
        s->fd = -1;
        eve_release(l);
        eve_release(s);
        rt_live_dec();
    }
}

/* Prints an accept error at most once a second. */
static void accept_complain(int err)
{
    static _Atomic uint64_t last;
    uint64_t now = yard_coro_now_ns(), was = atomic_load(&last);
    if (now - was >= 1000000000u && atomic_compare_exchange_strong(&last, &was, now))
        fprintf(stderr, "%s: accept: %s%s\n", rt_prog_name, strerror(err),
                err == EMFILE || err == ENFILE ? ": shedding connections" : "");
}

static void accept_loop(eve_listener_t *l, int fd)
{
    /* Out of descriptors, the pending connections would keep the listener
     * readable forever: they are accepted and closed, so their clients see
     * a close, not a hang (yard_shed; this spare descriptor is its
     * fallback). */
    int reserve = yard_reserve_fd_open();
    while (!atomic_load_explicit(&l->closed, memory_order_acquire)) {
        int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c >= 0) {
            start_conn(l, c);
            continue;
        }
        int e = errno;
        if (e == EAGAIN || e == EWOULDBLOCK) {
            if (yard_coro_wait_fd(fd, YARD_CORO_IN, yard_coro_now_ns() + ACCEPT_WAIT_NS) == -EBADF)
                break;
            continue;
        }
        if (e == EINTR || e == ECONNABORTED || e == EPROTO)
            continue;
        if (atomic_load_explicit(&l->closed, memory_order_acquire))
            break; /* shut down by eve_listener_close: EINVAL */
        accept_complain(e);
        /* Shed every pending connection (yard_shed: from a private
         * descriptor table, or with the reserve descriptor). */
        bool shed = (e == EMFILE || e == ENFILE) && yard_shed(fd, YARD_SHED_BUDGET, &reserve) > 0;
        if (shed)
            yard_coro_yield(); /* progress: the next accept may succeed */
        else
            yard_coro_sleep_ns(ACCEPT_RETRY_NS);
    }
    if (reserve >= 0)
        close(reserve);
}

static void listener_main(void *arg)
{
    eve_listener_t *l = arg;
    const char *text = l->addr->bytes;
    char err[256], where[YARD_ADDR_STRLEN];
    yard_addr_t a;
    if (strlen(text) != l->addr->len) {
        listener_error(l, "cannot listen on a string with a NUL byte");
        goto done;
    }
    if (yard_addr_parse(text, &a, err, sizeof err) != 0) {
        /* A name: the resolver may block, so on the offload pool. */
        struct resolve_job j = {.text = text};
        yard_coro_offload(resolve_fn, &j);
        if (j.rc != 0 || j.list.n == 0) {
            listener_error(l, "cannot listen on %s: %s", text, j.rc ? j.err : "no address");
            goto done;
        }
        a = j.list.a[0];
    }
    if (atomic_load_explicit(&l->closed, memory_order_acquire))
        goto done;
    int fd = yard_listen(&a, 4096, false, false, NULL);
    if (fd < 0) {
        listener_error(l, "cannot listen on %s: %s", text, strerror(-fd));
        goto done;
    }
    yard_addr_t bound;
    if (yard_sock_name(fd, &bound) == 0)
        yard_addr_format(&bound, where, sizeof where);
    else
        snprintf(where, sizeof where, "%s", text);
    rt_lock(&l->lk);
    l->fd = fd;
    rt_unlock(&l->lk);
    yard_coro_register_fd(fd);
    if (!atomic_load_explicit(&l->closed, memory_order_seq_cst)) {
        eve_str_t *s = eve_str_from(where, strlen(where));
        rt_dispatch(&l->src, 0, (eve_val_t){.p = s}, NULL);
        eve_release(s);
        accept_loop(l, fd);
    }
done:
    atomic_store_explicit(&l->closed, true, memory_order_release);
    rt_lock(&l->lk);
    int lfd = l->fd;
    l->fd = -1;
    rt_unlock(&l->lk);
    if (lfd >= 0)
        yard_coro_close(lfd);
    /* Gone for good: once no connection callback runs. */
    yard_coro_mutex_lock(&l->conn_mu);
    rt_src_kill(&l->src);
    yard_coro_mutex_unlock(&l->conn_mu);
    rt_live_dec();
    eve_release(l);
}

static void listener_start(struct eve_deferred *d)
{
    eve_listener_t *l = (eve_listener_t *)((char *)d - offsetof(eve_listener_t, dfr));
    rt_live_inc();
    if (yard_coro_go(listener_main, l) != 0) { /* hands over the deferred list's reference */
        fprintf(stderr, "%s: out of memory starting a listener\n", rt_prog_name);
        rt_live_dec();
        eve_release(l);
    }
}

/* ---- a connection's coroutine -------------------------------------------------------------------- */

static void conn_main(void *arg)
{
    eve_socket_t *s = arg;
    eve_listener_t *l = s->from;
    s->from = NULL;
    yard_coro_mutex_lock(&l->conn_mu);
    rt_dispatch(&l->src, 1, (eve_val_t){.p = s}, NULL);
    yard_coro_mutex_unlock(&l->conn_mu);
    eve_release(l);

    int fd = s->fd; /* ours: only this coroutine changes or closes it */
    eve_rbuf_t *rb = rbuf_alloc(RBUF_CAP);
    bool drained = false;
    while (!atomic_load_explicit(&s->closing, memory_order_acquire)) {
        if (drained) {
            /* The last read took everything: wait for an edge first. */
            if (yard_coro_wait_fd(fd, YARD_CORO_IN, 0) == -EBADF)
                break;
            drained = false;
            continue;
        }
        /* An edge from here on is news for the next wait; one before it is
         * data this read takes. After the peer's FIN no edge comes again. */
        bool hup = yard_coro_fd_consume(fd, YARD_CORO_IN);
        ssize_t n = read(fd, rb->bytes, rb->cap);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                drained = true;
                continue;
            }
            break;
        }
        if (n == 0)
            break;
        if ((size_t)n < rb->cap && !hup)
            drained = true;
        rb->len = (size_t)n;
        rt_dispatch(&s->src, 0, (eve_val_t){.p = rb}, &s->closing);
        if (atomic_load_explicit(&rb->h.rc, memory_order_acquire) != 1) {
            eve_release(rb); /* the program kept it */
            rb = rbuf_alloc(RBUF_CAP);
        }
    }
    atomic_store_explicit(&s->closing, true, memory_order_release);
    atomic_store_explicit(&s->dead, true, memory_order_release);
    yard_coro_mutex_lock(&s->wmu); /* a write in progress ends first */
    rt_lock(&s->lk);
    s->fd = -1;
    rt_unlock(&s->lk);
    yard_coro_mutex_unlock(&s->wmu);
    yard_coro_close(fd);
    rt_dispatch(&s->src, 1, (eve_val_t){.p = NULL}, NULL);
    rt_src_kill(&s->src);
    eve_release(rb);
    rt_live_dec();
    eve_release(s);
}

/* ---- the paper's buffers: socket.read_buffer(), socket.write_buffer(v) ---------------------------- */

eve_vec_t *eve_sock_read_buffer(eve_cx_t *cx, eve_socket_t *s, const char *pos)
{
    /* The data event's bytes are the payload of the callback running in
     * cx, which the socket's own coroutine runs: nobody else touches them. */
    if (cx->ev_origin != (const void *)&s->src || !cx->ev_data)
        eve_fail(pos, "read_buffer() outside a data callback of this socket");
    const eve_rbuf_t *b = cx->ev_data;
    eve_vec_t *v = eve_vec_new(EVE_K_CHAR);
    for (size_t i = 0; i < b->len; i++)
        eve_vec_push(v, (eve_val_t){.c = b->bytes[i]});
    return v;
}

void eve_sock_write_vec(eve_cx_t *cx, eve_socket_t *s, const eve_vec_t *v, const char *pos)
{
    size_t n = (size_t)eve_vec_size(v);
    unsigned char small[4096];
    unsigned char *bytes = n <= sizeof small ? small : rt_malloc(n);
    for (size_t i = 0; i < n; i++)
        bytes[i] = eve_vec_get(v, (int64_t)i, pos).c;
    eve_socket_write(cx, s, bytes, n);
    if (bytes != small)
        free(bytes);
}
