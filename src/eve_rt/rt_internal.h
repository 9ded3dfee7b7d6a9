/* Shared between the Eve runtime's files; not part of the interface the
 * generated code calls (that is eve_rt.h). */
#ifndef YARD_EVE_RT_INTERNAL_H
#define YARD_EVE_RT_INTERNAL_H

#include "eve_rt.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* A lock for a few instructions (registering a callback, a timer's state,
 * a socket's descriptor): never held across a park. */
static inline void rt_lock(atomic_int *l)
{
    unsigned spins = 0;
    while (atomic_exchange_explicit(l, 1, memory_order_acquire))
        while (atomic_load_explicit(l, memory_order_relaxed))
            if (++spins > 64)
                sched_yield();
}

static inline void rt_unlock(atomic_int *l)
{
    atomic_store_explicit(l, 0, memory_order_release);
}

/* obj_str.c */
_Noreturn void rt_oom(void);
void *rt_malloc(size_t n);   /* exits with a message when out of memory */
void *rt_calloc(size_t n);   /* zeroed */
void *rt_realloc(void *p, size_t n);
/* The program's name for messages ("echo"); eve_main sets it. */
extern const char *rt_prog_name;
/* Sorts and merges a permission list as eve_acquire promises (NULL objects
 * dropped, FULL winning, address order); returns how many are left.
 * eve_fail at pos when more than YARD_CORO_MAX_PERMS objects remain. */
size_t rt_perms_normalize(yard_coro_perm_t *out, const yard_coro_perm_t *in, size_t n,
                          const char *pos);

/* tcp.c: keeps a freed write_buffer for the next eve_wbuf_new (true), or
 * not (false: the caller frees it). */
bool rt_wbuf_recycle(eve_obj_t *o);
/* io.c: for eve_exit, waits a little for a write in progress to end. */
void rt_streams_quiesce(void);

/* ---- liveness and the callback gate (events.c) -------------------------------- */

/* What keeps the program alive: listeners, open sockets, started timers,
 * detached tasks. eve_main parks until the count is 0. */
void rt_live_inc(void);
void rt_live_dec(void);
void rt_live_wait_zero(void);
/* No callback runs before the top level has finished. */
void rt_gate_open(void);
void rt_gate_wait(void);
/* Where detached tasks are counted by the coro runtime (eve_main waits for
 * it after the live count reached 0, so that no task record is left). */
extern yard_coro_finish_t rt_detached;

/* ---- callback lists (events.c) ------------------------------------------------- */

/* Append-only lists: registration links a node with a release store under
 * the source's lock, dispatch walks them with acquire loads and no lock.
 * Nodes are freed only when the source is gone for good (rt_src_kill), when
 * no dispatch can run on it any more. */
struct rt_cbnode {
    _Atomic(struct rt_cbnode *) next;
    eve_cb_t cb; /* perms normalized at registration */
};

struct rt_cblist {
    _Atomic(struct rt_cbnode *) head;
    struct rt_cbnode *tail;
};

#define RT_SRC_LISTS 3
struct rt_src {
    atomic_int lock;
    bool dead; /* under lock: registrations now release their env at once */
    struct rt_cblist l[RT_SRC_LISTS];
};

/* The kinds of event sources: each is an object whose dtor says its kind. */
void rt_listener_dtor(eve_obj_t *o);
void rt_socket_dtor(eve_obj_t *o);
void rt_timer_dtor(eve_obj_t *o);
void rt_emitter_dtor(eve_obj_t *o);
void rt_signals_marker(eve_obj_t *o); /* never called: the signal set is immortal */

struct rt_src *rt_listener_src(void *l);
struct rt_src *rt_socket_src(void *s);
struct rt_src *rt_timer_src(void *t);
struct rt_src *rt_signals_src(void);

/* Runs the callbacks of list `which` of src in order, each with its
 * permissions, payload borrowed; stops early when *stop becomes true
 * (NULL: never). Waits for the gate first. */
void rt_dispatch(struct rt_src *src, int which, eve_val_t payload, const atomic_bool *stop);
/* One callback invocation: cx, permissions, fn, release, cx done. */
void rt_run_cb(const eve_cb_t *cb, eve_val_t payload, const void *origin);
bool rt_src_empty(struct rt_src *src, int which);
/* The source is gone for good: later registrations free their env at
 * once; every callback's env is freed now. No dispatch may be running. */
void rt_src_kill(struct rt_src *src);

/* ---- listeners started when a context is done (tcp.c) ----------------------------- */

struct eve_deferred {
    struct eve_deferred *next;
    void (*start)(struct eve_deferred *d);
};
void rt_deferred_start_all(struct eve_deferred *list);

/* ---- signals (main.c) ------------------------------------------------------------- */

/* Slots of the signal set's lists. */
enum { RT_SIG_TERMINATE, RT_SIG_HANGUP };

#endif
