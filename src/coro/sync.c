/* Wait queues, mutex and channel for coroutines. Each keeps its state and
 * a FIFO of waiters under a spin lock held for a few instructions; a waiter
 * is a node on the parked coroutine's own stack, so parking allocates
 * nothing. A waker unlinks the node and claims the coroutine under the lock,
 * then readies it after unlocking. */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct yard_coro_waiter waiter_t;

static void wl_push(waiter_t **head, waiter_t **tail, waiter_t *n)
{
    n->next = NULL;
    n->prev = *tail;
    if (*tail)
        (*tail)->next = n;
    else
        *head = n;
    *tail = n;
    n->linked = true;
}

static void wl_unlink(waiter_t **head, waiter_t **tail, waiter_t *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        *head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        *tail = n->prev;
    n->linked = false;
}

static waiter_t *wl_pop(waiter_t **head, waiter_t **tail)
{
    waiter_t *n = *head;
    if (n)
        wl_unlink(head, tail, n);
    return n;
}

static yard_coro_t *must_self(const char *fn)
{
    yard_coro_t *self = yard_coro_self();
    if (!self) {
        fprintf(stderr, "yard_coro: %s called outside a coroutine\n", fn);
        abort();
    }
    return self;
}

/* ------------------------------------------------------------------------ */

int yard_coro_waitq_wait(yard_coro_waitq_t *q, atomic_uint *word, unsigned expected,
                         uint64_t deadline_ns)
{
    yard_coro_t *self = must_self(__func__);
    waiter_t node = {.c = self};
    yard_coro__prepare_park(self);
    yard_coro__spin_lock(&q->lock);
    if (atomic_load_explicit(word, memory_order_acquire) != expected) {
        yard_coro__spin_unlock(&q->lock);
        return -EAGAIN;
    }
    wl_push(&q->head, &q->tail, &node);
    yard_coro__spin_unlock(&q->lock);
    if (deadline_ns)
        yard_coro__timer_add(self, deadline_ns);
    yard_coro__park();
    if (deadline_ns)
        yard_coro__timer_cancel(self);
    if (self->wake_result) { /* timed out: the node may still be queued */
        yard_coro__spin_lock(&q->lock);
        if (node.linked)
            wl_unlink(&q->head, &q->tail, &node);
        yard_coro__spin_unlock(&q->lock);
    }
    return self->wake_result;
}

int yard_coro_waitq_wake(yard_coro_waitq_t *q, int n)
{
    waiter_t *woken = NULL;
    int count = 0;
    yard_coro__spin_lock(&q->lock);
    while (count < n && q->head) {
        waiter_t *w = wl_pop(&q->head, &q->tail);
        if (!yard_coro__claim(w->c))
            continue; /* its timer won; it is leaving on its own */
        w->next = woken;
        woken = w;
        count++;
    }
    yard_coro__spin_unlock(&q->lock);
    while (woken) {
        waiter_t *w = woken;
        woken = w->next; /* read before the coroutine can run and drop its node */
        yard_coro__ready(w->c, 0);
    }
    return count;
}

/* ------------------------------------------------------------------------ */

void yard_coro_mutex_lock(yard_coro_mutex_t *m)
{
    yard_coro__spin_lock(&m->lock);
    if (!m->locked) {
        m->locked = 1;
        yard_coro__spin_unlock(&m->lock);
        return;
    }
    yard_coro_t *self = must_self(__func__);
    waiter_t node = {.c = self};
    yard_coro__prepare_park(self);
    wl_push(&m->head, &m->tail, &node);
    yard_coro__spin_unlock(&m->lock);
    yard_coro__park(); /* the unlocker handed the mutex over: m->locked stayed 1 */
}

void yard_coro_mutex_unlock(yard_coro_mutex_t *m)
{
    yard_coro__spin_lock(&m->lock);
    waiter_t *w = wl_pop(&m->head, &m->tail);
    yard_coro_t *c = NULL;
    if (w && yard_coro__claim(w->c))
        c = w->c;
    else
        m->locked = 0;
    yard_coro__spin_unlock(&m->lock);
    if (c)
        yard_coro__ready(c, 0);
}

/* ------------------------------------------------------------------------ */

struct yard_coro_chan {
    atomic_int lock;
    bool closed;
    size_t cap, head, len;
    waiter_t *sendq_head, *sendq_tail, *recvq_head, *recvq_tail;
    void *buf[];
};

yard_coro_chan_t *yard_coro_chan_new(size_t capacity)
{
    if (capacity > (SIZE_MAX - sizeof(yard_coro_chan_t)) / sizeof(void *))
        return NULL;
    yard_coro_chan_t *ch = calloc(1, sizeof(*ch) + capacity * sizeof(void *));
    if (ch)
        ch->cap = capacity;
    return ch;
}

void yard_coro_chan_free(yard_coro_chan_t *ch)
{
    free(ch);
}

static void handoff(waiter_t *w, void *value, int result)
{
    w->value = value;
    w->result = result;
}

int yard_coro_chan_send(yard_coro_chan_t *ch, void *value)
{
    yard_coro__spin_lock(&ch->lock);
    if (ch->closed) {
        yard_coro__spin_unlock(&ch->lock);
        return -EPIPE;
    }
    waiter_t *r = wl_pop(&ch->recvq_head, &ch->recvq_tail);
    if (r) { /* a receiver is waiting: the buffer is empty, give it directly */
        yard_coro_t *c = r->c;
        handoff(r, value, 0);
        yard_coro__claim(c);
        yard_coro__spin_unlock(&ch->lock);
        yard_coro__ready(c, 0);
        return 0;
    }
    if (ch->len < ch->cap) {
        ch->buf[(ch->head + ch->len++) % ch->cap] = value;
        yard_coro__spin_unlock(&ch->lock);
        return 0;
    }
    yard_coro_t *self = must_self(__func__);
    waiter_t node = {.c = self, .value = value};
    yard_coro__prepare_park(self);
    wl_push(&ch->sendq_head, &ch->sendq_tail, &node);
    yard_coro__spin_unlock(&ch->lock);
    yard_coro__park();
    return node.result;
}

int yard_coro_chan_recv(yard_coro_chan_t *ch, void **out)
{
    yard_coro__spin_lock(&ch->lock);
    void *v;
    if (ch->len) {
        v = ch->buf[ch->head];
        ch->head = (ch->head + 1) % ch->cap;
        ch->len--;
        waiter_t *s = wl_pop(&ch->sendq_head, &ch->sendq_tail);
        yard_coro_t *c = NULL;
        if (s) { /* the oldest blocked sender's value takes the freed slot */
            ch->buf[(ch->head + ch->len++) % ch->cap] = s->value;
            c = s->c;
            handoff(s, NULL, 0);
            yard_coro__claim(c);
        }
        yard_coro__spin_unlock(&ch->lock);
        if (c)
            yard_coro__ready(c, 0);
        *out = v;
        return 0;
    }
    waiter_t *s = wl_pop(&ch->sendq_head, &ch->sendq_tail);
    if (s) { /* unbuffered: take the value straight from the sender */
        yard_coro_t *c = s->c;
        v = s->value;
        handoff(s, NULL, 0);
        yard_coro__claim(c);
        yard_coro__spin_unlock(&ch->lock);
        yard_coro__ready(c, 0);
        *out = v;
        return 0;
    }
    if (ch->closed) {
        yard_coro__spin_unlock(&ch->lock);
        return -EPIPE;
    }
    yard_coro_t *self = must_self(__func__);
    waiter_t node = {.c = self};
    yard_coro__prepare_park(self);
    wl_push(&ch->recvq_head, &ch->recvq_tail, &node);
    yard_coro__spin_unlock(&ch->lock);
    yard_coro__park();
    if (node.result == 0)
        *out = node.value;
    return node.result;
}

void yard_coro_chan_close(yard_coro_chan_t *ch)
{
    waiter_t *woken = NULL, *w;
    yard_coro__spin_lock(&ch->lock);
    ch->closed = true;
    while ((w = wl_pop(&ch->recvq_head, &ch->recvq_tail)) ||
           (w = wl_pop(&ch->sendq_head, &ch->sendq_tail))) {
        handoff(w, NULL, -EPIPE);
        yard_coro__claim(w->c);
        w->next = woken;
        woken = w;
    }
    yard_coro__spin_unlock(&ch->lock);
    while (woken) {
        w = woken;
        woken = w->next;
        yard_coro__ready(w->c, 0);
    }
}
