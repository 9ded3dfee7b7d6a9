/* The Eve runtime: what the C that `yard-eve build` generates calls
 * (issue 23, docs/eve.md "How code is generated"). It sits on the coro
 * runtime (yard/coro.h): every Eve task is a coro permission task, every
 * callback runs on a coroutine after acquiring its permissions, sockets use
 * the netpoller.
 *
 * Conventions
 * - Strings and objects are reference counted (atomic). A function that
 *   returns a string or an object returns a reference the caller owns
 *   ("owned"); arguments are borrowed (the callee retains what it keeps).
 *   eve_retain/eve_release accept NULL.
 * - `pos` arguments are "FILE:LINE:COL" of the Eve source, for run-time
 *   errors: eve_fail prints "FILE:LINE:COL: run-time error: MESSAGE" on
 *   stderr and ends the program with status 1.
 * - Every call is made from a coroutine of the runtime (inside eve_main),
 *   with the eve_cx_t of the task or callback running it. */
#ifndef YARD_EVE_RT_H
#define YARD_EVE_RT_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "yard/coro.h"

/* ---- reference-counted heap things ----------------------------------------- */

typedef struct eve_obj eve_obj_t;
typedef void (*eve_dtor_fn)(eve_obj_t *o); /* releases what o holds; not o itself */

/* Every object (and string) starts with this header. `perm` is the object's
 * permission lock: an Eve permission on an object-typed variable is a
 * permission on the object the variable refers to. */
struct eve_obj {
    atomic_long rc;
    eve_dtor_fn dtor; /* NULL: nothing to release */
    yard_coro_obj_t perm;
};

/* Statically allocated objects (string literals) never reach 0 (half the
 * range of a long: 2^62 where long has 64 bits, 2^30 where it has 32). */
#define EVE_RC_IMMORTAL (LONG_MAX / 2 + 1)
#define EVE_OBJ_IMMORTAL_INIT {EVE_RC_IMMORTAL, NULL, {0}}

/* The header of a fresh object of `size` bytes (zeroed past the header),
 * rc 1. Exits with a message when out of memory. */
void *eve_obj_new(size_t size, eve_dtor_fn dtor);
void eve_retain(void *o);
void eve_release(void *o); /* at 0: dtor, then free */

/* ---- strings: immutable values ------------------------------------------------ */

typedef struct eve_str {
    eve_obj_t h;
    size_t len;
    const char *bytes; /* len bytes, then a NUL (not counted) */
} eve_str_t;

/* A literal: static eve_str_t lit = EVE_STR_LIT("abc", 3); the generated
 * code passes &lit (borrowed, immortal). */
#define EVE_STR_LIT(s, n) {EVE_OBJ_IMMORTAL_INIT, (n), (s)}

extern eve_str_t eve_str_empty; /* "" (immortal) */

eve_str_t *eve_str_from(const char *bytes, size_t len);        /* owned copy */
eve_str_t *eve_str_concat(const eve_str_t *a, const eve_str_t *b); /* owned */
/* s[from, to): an error unless 0 <= from <= to <= size. Owned. */
eve_str_t *eve_str_substring(const eve_str_t *s, int64_t from, int64_t to, const char *pos);
uint8_t eve_str_at(const eve_str_t *s, int64_t i, const char *pos); /* error outside [0, size) */
int64_t eve_str_find(const eve_str_t *s, uint8_t c);               /* -1: not there */
eve_str_t *eve_str_trim(const eve_str_t *s);                       /* owned; ASCII white space */
bool eve_str_eq(const eve_str_t *a, const eve_str_t *b);
int eve_str_cmp(const eve_str_t *a, const eve_str_t *b); /* bytewise, <0 0 >0 */
/* to_string */
eve_str_t *eve_str_of_int(int64_t v);
eve_str_t *eve_str_of_float(double v); /* shortest text that reads back as v */
eve_str_t *eve_str_of_bool(bool v);    /* "true" / "false" */
eve_str_t *eve_str_of_char(uint8_t c); /* one byte */
/* to_int: a string's optional '-' and decimal digits (an error otherwise,
 * or when it does not fit); to_float: strtod's syntax, the whole string. */
int64_t eve_str_to_int(const eve_str_t *s, const char *pos);
double eve_str_to_float(const eve_str_t *s, const char *pos);
int64_t eve_float_to_int(double v, const char *pos); /* truncates; error if out of range or NaN */

/* ---- run-time errors and integer arithmetic ---------------------------------- */

_Noreturn void eve_fail(const char *pos, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
int64_t eve_div(int64_t a, int64_t b, const char *pos); /* error on b == 0; INT64_MIN / -1 wraps */
int64_t eve_mod(int64_t a, int64_t b, const char *pos);
int64_t eve_shl(int64_t a, int64_t b); /* shift counts taken mod 64 */
int64_t eve_shr(int64_t a, int64_t b); /* arithmetic */

/* ---- the task context --------------------------------------------------------- */

/* One per running task, callback or top level, on its coroutine's stack.
 * `held`: the permissions it holds (handed over to its children at a
 * finish, reacquired after). `tmp`: the owned temporaries of the statement
 * being run, released at its end (eve_tmp_drain). */
#define EVE_TMP_INLINE 32
typedef struct eve_cx {
    yard_coro_perm_t held[YARD_CORO_MAX_PERMS];
    size_t nheld;
    void **tmp;
    size_t ntmp, captmp;
    void *tmp_inline[EVE_TMP_INLINE];
    struct eve_deferred *deferred; /* listeners made here, started at eve_cx_done */
    unsigned fin_depth;            /* finish scopes open in this context */
    uint64_t handover;             /* bit d-1: scope d got a task asking for an object held here */
    /* A callback's context: the source whose event it runs for and the
     * event's payload (socket.read_buffer() reads the data event's bytes). */
    const void *ev_origin;
    void *ev_data; /* the payload's pointer (a data event's read_buffer) */
} eve_cx_t;

void eve_cx_init(eve_cx_t *cx);
/* Drains the temporaries, starts the deferred listeners, frees the pool. */
void eve_cx_done(eve_cx_t *cx);
/* Registers an owned string or object to be released at the next drain
 * below its mark; returns it. */
void *eve_tmp(eve_cx_t *cx, void *owned);
/* Releases the temporaries registered since `mark` (a value of cx->ntmp). */
void eve_tmp_drain(eve_cx_t *cx, size_t mark);

/* ---- permissions --------------------------------------------------------------- */

/* A permission on a value variable lives in a cell beside the value. Cells
 * of variables a closure may outlive are boxes on the heap (reference
 * counted like objects: eve_box_new, eve_retain, eve_release); the others
 * are on the declaring function's stack. */
typedef union eve_val {
    int64_t i;
    double f;
    bool b;
    uint8_t c;
    void *p; /* eve_str_t * or an object */
} eve_val_t;

typedef struct eve_box {
    eve_obj_t h; /* h.perm is the variable's permission */
    eve_val_t v;
    bool str; /* v.p is a string to release with the box */
} eve_box_t;

eve_box_t *eve_box_new(bool str); /* owned; v zeroed (a string box holds "") */

/* Acquires perms for cx (parks until all are granted together), then
 * cx->held is exactly them. Entries with obj NULL are skipped; two entries
 * on one object become one, FULL winning. At most YARD_CORO_MAX_PERMS
 * distinct objects (more: eve_fail). For a callback's body. */
void eve_acquire(eve_cx_t *cx, const yard_coro_perm_t *perms, size_t n, const char *pos);
/* Releases everything cx holds. */
void eve_release_held(eve_cx_t *cx);

/* ---- tasks and finish ----------------------------------------------------------------- */

/* A generated task body: runs with its own cx, whose held set is the task's
 * permissions; frees what it captured in env (not env itself). */
typedef void (*eve_task_fn)(eve_cx_t *cx, void *env);

/* Allocates a task's environment (env_size bytes, zeroed) with room for the
 * runtime's record in front of it. */
void *eve_task_env(size_t env_size, eve_task_fn fn);
/* Spawns the task whose env eve_task_env made, holding perms (normalized
 * as eve_acquire does), into scope f, or detached when f is NULL (the
 * program then lives until it has finished). The env is freed after fn
 * returns. */
void eve_task_spawn(eve_cx_t *cx, yard_coro_finish_t *f, void *env, const yard_coro_perm_t *perms,
                    size_t n, const char *pos);
/* The end of a task's body, before it releases what it captured: gives its
 * permissions back (an object it captured may go with the capture, and a
 * permission must not outlive its object). */
void eve_task_done(eve_cx_t *cx);
/* finish: */
void eve_finish_begin(eve_cx_t *cx, yard_coro_finish_t *f);
/* Waits for every task of f. If a task spawned into it asked for an object
 * cx holds, releases everything cx holds first (the parent hands its
 * objects to its subtasks) and reacquires it all after. */
void eve_finish_end(eve_cx_t *cx, yard_coro_finish_t *f);

/* ---- containers (objects) -------------------------------------------------------------- */

/* What a container's elements (or keys, or values) are: how they are
 * retained, compared and hashed. Strings compare by content, objects by
 * identity, floats by value (as ==). */
typedef enum { EVE_K_INT, EVE_K_FLOAT, EVE_K_BOOL, EVE_K_CHAR, EVE_K_STR, EVE_K_OBJ } eve_kind_t;

typedef struct eve_vec eve_vec_t;
typedef struct eve_set eve_set_t; /* insertion-ordered */
typedef struct eve_map eve_map_t; /* insertion-ordered by key */

eve_vec_t *eve_vec_new(eve_kind_t k);
int64_t eve_vec_size(const eve_vec_t *v);
eve_val_t eve_vec_get(const eve_vec_t *v, int64_t i, const char *pos);  /* borrowed */
void eve_vec_set(eve_vec_t *v, int64_t i, eve_val_t x, const char *pos); /* retains x */
void eve_vec_push(eve_vec_t *v, eve_val_t x);                              /* retains x */
eve_val_t eve_vec_pop(eve_vec_t *v, const char *pos);                      /* owned; error if empty */
bool eve_vec_contains(const eve_vec_t *v, eve_val_t x);
void eve_vec_remove(eve_vec_t *v, eve_val_t x); /* every element equal to x */
void eve_vec_clear(eve_vec_t *v);

eve_set_t *eve_set_new(eve_kind_t k);
int64_t eve_set_size(const eve_set_t *s);
bool eve_set_contains(const eve_set_t *s, eve_val_t x);
void eve_set_add(eve_set_t *s, eve_val_t x);
void eve_set_remove(eve_set_t *s, eve_val_t x);
void eve_set_clear(eve_set_t *s);
/* Iteration in insertion order: *it starts at 0; false at the end. The
 * element is borrowed. Elements added during the loop may or may not be
 * seen; removed ones are not. */
bool eve_set_next(const eve_set_t *s, size_t *it, eve_val_t *out);

eve_map_t *eve_map_new(eve_kind_t key, eve_kind_t value);
int64_t eve_map_size(const eve_map_t *m);
bool eve_map_contains(const eve_map_t *m, eve_val_t key);
eve_val_t eve_map_get(const eve_map_t *m, eve_val_t key, const char *pos); /* borrowed; error if absent */
void eve_map_put(eve_map_t *m, eve_val_t key, eve_val_t value);            /* retains both */
void eve_map_remove(eve_map_t *m, eve_val_t key);
void eve_map_clear(eve_map_t *m);
bool eve_map_next(const eve_map_t *m, size_t *it, eve_val_t *key_out); /* keys, as eve_set_next */

eve_vec_t *eve_range(int64_t from, int64_t to); /* from, from+1, ..., to-1 */

/* ---- events ---------------------------------------------------------------------------- */

enum eve_event {
    EVE_EV_LISTENING,  /* tcp_listener: payload string "HOST:PORT" */
    EVE_EV_CONNECTION, /* tcp_listener: payload tcp_socket */
    EVE_EV_ERROR,      /* tcp_listener: payload string */
    EVE_EV_DATA,       /* tcp_socket: payload read_buffer */
    EVE_EV_CLOSE,      /* tcp_socket: no payload */
    EVE_EV_TICK,       /* timer */
    EVE_EV_TERMINATE,  /* signals: SIGTERM or SIGINT */
    EVE_EV_HANGUP,     /* signals: SIGHUP */
    EVE_EV_EMIT,       /* a user emitter<T> */
    EVE_EV_COUNT
};

/* A callback: fn(cx, env, payload) runs with cx holding perms (acquired
 * before each call, released after; the payload is borrowed). env_free (may
 * be NULL) releases what env captured and frees env, when the source is
 * gone. */
typedef void (*eve_cb_fn)(eve_cx_t *cx, void *env, eve_val_t payload);
typedef struct eve_cb {
    eve_cb_fn fn;
    void *env;
    void (*env_free)(void *env);
    const char *pos; /* the `on` or handler, for errors */
    size_t nperms;
    yard_coro_perm_t perms[YARD_CORO_MAX_PERMS];
} eve_cb_t;

/* Registers cb (copied) for `event` of source, which must be an object of
 * the kind the event belongs to (a wrong kind: eve_fail). Callbacks of one
 * event run in registration order; one source's events are delivered one
 * at a time, in order. No callback runs before the program's top level has
 * finished. */
void eve_on(eve_cx_t *cx, void *source, enum eve_event event, const eve_cb_t *cb);

/* User events: an emitter<T> field. emit runs every registered callback as
 * a detached task of its own (with the callback's permissions). */
typedef struct eve_emitter eve_emitter_t;
eve_emitter_t *eve_emitter_new(eve_kind_t payload);
void eve_emit(eve_cx_t *cx, eve_emitter_t *e, eve_val_t payload);

/* ---- tcp ------------------------------------------------------------------------------- */

typedef struct eve_listener eve_listener_t;
typedef struct eve_socket eve_socket_t;

/* tcp_socket.listen(address): "HOST:PORT" (HOST a name, an IPv4 address or
 * an IPv6 one in brackets; port 0: any). Returns at once an owned listener
 * that starts when cx is done (eve_cx_done), so that the handlers the
 * program registers right after are there: it then binds and emits
 * `listening` with the real "HOST:PORT", or `error` with the reason (and
 * then ends), and `connection` for each client. While it listens the
 * program lives. */
eve_listener_t *eve_tcp_listen(eve_cx_t *cx, const eve_str_t *address);
void eve_listener_close(eve_cx_t *cx, eve_listener_t *l);

/* A fresh, unconnected socket (a `t : tcp_socket` declaration): writing to
 * it does nothing, it emits nothing. */
eve_socket_t *eve_socket_new(void);
/* Writes all of bytes (parks while the peer is slow); after the socket has
 * closed or failed, nothing. */
void eve_socket_write(eve_cx_t *cx, eve_socket_t *s, const void *bytes, size_t len);
/* The bytes of the data event being handled, as a new vector<char>
 * (owned): socket.read_buffer() (the paper's Program 2). Only in a `data`
 * callback of s itself (any other place is a run-time error at pos). */
eve_vec_t *eve_sock_read_buffer(eve_cx_t *cx, eve_socket_t *s, const char *pos);
/* Writes the chars of v: socket.write_buffer(v). */
void eve_sock_write_vec(eve_cx_t *cx, eve_socket_t *s, const eve_vec_t *v, const char *pos);
/* Closes the connection: the socket emits `close` once (after the callback
 * running now, if it is one of the socket's), and nothing else after. */
void eve_socket_close(eve_cx_t *cx, eve_socket_t *s);

/* read_buffer: the bytes of one `data` event */
typedef struct eve_rbuf {
    eve_obj_t h;
    size_t len, cap;
    unsigned char *bytes;
} eve_rbuf_t;
eve_rbuf_t *eve_rbuf_new(void);
int64_t eve_rbuf_size(const eve_rbuf_t *b);
uint8_t eve_rbuf_at(const eve_rbuf_t *b, int64_t i, const char *pos);
eve_str_t *eve_rbuf_to_string(const eve_rbuf_t *b); /* owned */

/* write_buffer: bytes being put together */
typedef struct eve_wbuf {
    eve_obj_t h;
    size_t len, cap;
    unsigned char *bytes;
} eve_wbuf_t;
eve_wbuf_t *eve_wbuf_new(void);
int64_t eve_wbuf_size(const eve_wbuf_t *b);
void eve_wbuf_append(eve_wbuf_t *b, const void *bytes, size_t len);
void eve_wbuf_append_byte(eve_wbuf_t *b, int64_t byte); /* the low 8 bits */
void eve_wbuf_clear(eve_wbuf_t *b);

/* ---- streams, timers, signals, the program ----------------------------------------------- */

/* stdout and stderr: whole writes, ordered between tasks (a lock). A write
 * that fails (a closed pipe, a full disk) ends the program with status 1
 * and a message on stderr. */
typedef struct eve_stream eve_stream_t;
extern eve_stream_t *eve_stdout, *eve_stderr;
void eve_stream_write(eve_stream_t *s, const void *bytes, size_t len);
void eve_stream_write_line(eve_stream_t *s, const eve_str_t *line); /* line + "\n" */

typedef struct eve_timer eve_timer_t;
eve_timer_t *eve_timer_new(void);
/* start: tick every ms (>= 1, else an error) until stop; once: one tick
 * after ms. Either replaces what the timer was doing. While a timer is
 * started the program lives. */
void eve_timer_start(eve_cx_t *cx, eve_timer_t *t, int64_t ms, const char *pos);
void eve_timer_once(eve_cx_t *cx, eve_timer_t *t, int64_t ms, const char *pos);
void eve_timer_stop(eve_cx_t *cx, eve_timer_t *t);

/* The signal_set behind `signals`. SIGTERM, SIGINT and SIGHUP are taken
 * over for the whole program: with no `terminate` callback registered,
 * SIGTERM and SIGINT end it with status 0; with one, its callbacks run
 * instead. SIGHUP without a callback is ignored. Registering a signal
 * callback does not keep the program alive. SIGPIPE is ignored. */
typedef struct eve_signals eve_signals_t;
extern eve_signals_t *eve_signals;

/* args: vector<string>, args[0] is the program's path. */
extern eve_vec_t *eve_args;

/* Runs the program: argv into args, the signals taken over, the coro
 * scheduler started (workers: the environment's YARD_EVE_WORKERS, or the
 * CPUs the process may use), top(cx) run as the top level, then waits until
 * nothing keeps the program alive (no listener listening, no socket open,
 * no timer started, no detached task running) and returns the exit status
 * (0), or exit is called. `name` is the program's for messages ("echo"). */
int eve_main(int argc, char **argv, const char *name, void (*top)(eve_cx_t *cx));
/* exit(status): ends the program now (everything written so far stays
 * written). */
_Noreturn void eve_exit(int64_t status);
/* A monotonic clock, nanoseconds (the library's clock_ns()). */
int64_t eve_clock_ns(void);

#endif
