/* The Eve runtime: what keeps the program alive, the gate that holds the
 * callbacks back until the top level has finished, callback lists and
 * their dispatch, and user emitters. */
#include "rt_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- liveness ------------------------------------------------------------------------------ */

static atomic_uint live;
static yard_coro_waitq_t live_q;
yard_coro_finish_t rt_detached;

void rt_live_inc(void)
{
    atomic_fetch_add_explicit(&live, 1, memory_order_relaxed);
}

void rt_live_dec(void)
{
    if (atomic_fetch_sub_explicit(&live, 1, memory_order_acq_rel) == 1)
        yard_coro_waitq_wake(&live_q, INT_MAX);
}

void rt_live_wait_zero(void)
{
    unsigned v;
    while ((v = atomic_load_explicit(&live, memory_order_acquire)) != 0)
        yard_coro_waitq_wait(&live_q, &live, v, 0);
}

/* ---- the gate ------------------------------------------------------------------------------ */

static atomic_uint gate;
static yard_coro_waitq_t gate_q;

void rt_gate_open(void)
{
    atomic_store_explicit(&gate, 1, memory_order_release);
    yard_coro_waitq_wake(&gate_q, INT_MAX);
}

void rt_gate_wait(void)
{
    while (!atomic_load_explicit(&gate, memory_order_acquire))
        yard_coro_waitq_wait(&gate_q, &gate, 0, 0);
}

/* ---- callback lists -------------------------------------------------------------------------- */

void rt_run_cb(const eve_cb_t *cb, eve_val_t payload, const void *origin)
{
    eve_cx_t cx;
    eve_cx_init(&cx);
    cx.ev_origin = origin;
    cx.ev_data = payload.p;
    if (cb->nperms) {
        /* Normalized at registration: straight to the coro runtime. */
        if (yard_coro_perms_acquire(cb->perms, cb->nperms) != 0)
            eve_fail(cb->pos, "cannot acquire the callback's permissions");
        memcpy(cx.held, cb->perms, cb->nperms * sizeof cb->perms[0]);
        cx.nheld = cb->nperms;
    }
    cb->fn(&cx, cb->env, payload);
    eve_release_held(&cx);
    eve_cx_done(&cx);
}

void rt_dispatch(struct rt_src *src, int which, eve_val_t payload, const atomic_bool *stop)
{
    struct rt_cbnode *n = atomic_load_explicit(&src->l[which].head, memory_order_acquire);
    if (!n)
        return;
    rt_gate_wait();
    for (; n; n = atomic_load_explicit(&n->next, memory_order_acquire)) {
        if (stop && atomic_load_explicit(stop, memory_order_acquire))
            return;
        rt_run_cb(&n->cb, payload, src);
    }
}

bool rt_src_empty(struct rt_src *src, int which)
{
    return atomic_load_explicit(&src->l[which].head, memory_order_acquire) == NULL;
}

void rt_src_kill(struct rt_src *src)
{
    struct rt_cbnode *lists[RT_SRC_LISTS];
    rt_lock(&src->lock);
    src->dead = true;
    for (int i = 0; i < RT_SRC_LISTS; i++) {
        lists[i] = atomic_load_explicit(&src->l[i].head, memory_order_relaxed);
        atomic_store_explicit(&src->l[i].head, NULL, memory_order_relaxed);
        src->l[i].tail = NULL;
    }
    rt_unlock(&src->lock);
    for (int i = 0; i < RT_SRC_LISTS; i++) {
        for (struct rt_cbnode *n = lists[i], *next; n; n = next) {
            next = atomic_load_explicit(&n->next, memory_order_relaxed);
            if (n->cb.env_free)
                n->cb.env_free(n->cb.env);
            free(n);
        }
    }
}

/* ---- emitters ------------------------------------------------------------------------------------ */

struct eve_emitter {
    eve_obj_t h;
    struct rt_src src;
    eve_kind_t kind;
};

void rt_emitter_dtor(eve_obj_t *o)
{
    rt_src_kill(&((eve_emitter_t *)o)->src);
}

eve_emitter_t *eve_emitter_new(eve_kind_t payload)
{
    eve_emitter_t *e = eve_obj_new(sizeof *e, rt_emitter_dtor);
    e->kind = payload;
    return e;
}

static bool kind_counted(eve_kind_t k)
{
    return k == EVE_K_STR || k == EVE_K_OBJ;
}

/* One emitted event for one callback: a detached task of its own. */
struct emit_rec {
    eve_emitter_t *e; /* a reference: the callback's node lives while e does */
    const eve_cb_t *cb;
    eve_val_t payload; /* a reference when counted */
};

static void emit_task(void *arg)
{
    struct emit_rec *r = arg;
    const eve_cb_t *cb = r->cb;
    rt_gate_wait();
    eve_cx_t cx;
    eve_cx_init(&cx);
    /* The coro runtime granted the callback's permissions to this task. */
    memcpy(cx.held, cb->perms, cb->nperms * sizeof cb->perms[0]);
    cx.nheld = cb->nperms;
    cb->fn(&cx, cb->env, r->payload);
    eve_cx_done(&cx);
    if (kind_counted(r->e->kind))
        eve_release(r->payload.p);
    eve_release(r->e);
    free(r);
    rt_live_dec();
}

void eve_emit(eve_cx_t *cx, eve_emitter_t *e, eve_val_t payload)
{
    (void)cx;
    if (!e)
        eve_fail(NULL, "emit on no emitter");
    for (struct rt_cbnode *n = atomic_load_explicit(&e->src.l[0].head, memory_order_acquire); n;
         n = atomic_load_explicit(&n->next, memory_order_acquire)) {
        struct emit_rec *r = rt_malloc(sizeof *r);
        eve_retain(e);
        r->e = e;
        r->cb = &n->cb;
        r->payload = payload;
        if (kind_counted(e->kind))
            eve_retain(payload.p);
        rt_live_inc();
        if (yard_coro_task(&rt_detached, n->cb.perms, n->cb.nperms, emit_task, r) != 0)
            eve_fail(n->cb.pos, "cannot start a callback task");
    }
}

/* ---- registration -------------------------------------------------------------------------------- */

static const char *const event_names[EVE_EV_COUNT] = {
    "listening", "connection", "error", "data", "close", "tick", "terminate", "hangup", "emit",
};

void eve_on(eve_cx_t *cx, void *source, enum eve_event event, const eve_cb_t *cb)
{
    (void)cx;
    if ((unsigned)event >= EVE_EV_COUNT)
        eve_fail(cb->pos, "no such event (%d)", (int)event);
    if (!source)
        eve_fail(cb->pos, "'%s' callback on no object", event_names[event]);
    eve_obj_t *o = source;
    struct rt_src *src = NULL;
    int which = -1;
    if (o->dtor == rt_listener_dtor) {
        src = rt_listener_src(o);
        which = event == EVE_EV_LISTENING ? 0 : event == EVE_EV_CONNECTION ? 1
                : event == EVE_EV_ERROR ? 2 : -1;
    } else if (o->dtor == rt_socket_dtor) {
        src = rt_socket_src(o);
        which = event == EVE_EV_DATA ? 0 : event == EVE_EV_CLOSE ? 1 : -1;
    } else if (o->dtor == rt_timer_dtor) {
        src = rt_timer_src(o);
        which = event == EVE_EV_TICK ? 0 : -1;
    } else if (o->dtor == rt_signals_marker) {
        src = rt_signals_src();
        which = event == EVE_EV_TERMINATE ? RT_SIG_TERMINATE
                : event == EVE_EV_HANGUP   ? RT_SIG_HANGUP
                                           : -1;
    } else if (o->dtor == rt_emitter_dtor) {
        src = &((eve_emitter_t *)o)->src;
        which = event == EVE_EV_EMIT ? 0 : -1;
    }
    if (!src || which < 0)
        eve_fail(cb->pos, "this object has no event '%s'", event_names[event]);

    struct rt_cbnode *n = rt_malloc(sizeof *n);
    atomic_init(&n->next, NULL);
    n->cb = *cb;
    n->cb.nperms = rt_perms_normalize(n->cb.perms, cb->perms,
                                      cb->nperms > YARD_CORO_MAX_PERMS ? YARD_CORO_MAX_PERMS
                                                                        : cb->nperms,
                                      cb->pos);
    rt_lock(&src->lock);
    if (src->dead) {
        rt_unlock(&src->lock);
        if (n->cb.env_free)
            n->cb.env_free(n->cb.env);
        free(n);
        return;
    }
    struct rt_cblist *l = &src->l[which];
    if (l->tail)
        atomic_store_explicit(&l->tail->next, n, memory_order_release);
    else
        atomic_store_explicit(&l->head, n, memory_order_release);
    l->tail = n;
    rt_unlock(&src->lock);
}
