/* Small helpers the generated C uses beside eve_rt.h (issue 23, docs/eve.md
 * "How code is generated"): conversions to and from eve_val_t, the
 * assignment of strings and objects (retain the new value, release the old),
 * and typed forms of the library calls that take bytes. Everything is
 * static inline so that the generated code costs what hand-written C would. */
#ifndef YARD_EVE_GEN_H
#define YARD_EVE_GEN_H

#include <stdlib.h>

#include "eve_rt.h"

#define EVE_OBJ(p) ((eve_obj_t *)(void *)(p))
#define EVE_PERM(p) (&EVE_OBJ(p)->perm)

static inline eve_val_t eve_vi(int64_t x)
{
    eve_val_t v;
    v.i = x;
    return v;
}
static inline eve_val_t eve_vf(double x)
{
    eve_val_t v;
    v.f = x;
    return v;
}
static inline eve_val_t eve_vb(bool x)
{
    eve_val_t v;
    v.i = 0;
    v.b = x;
    return v;
}
static inline eve_val_t eve_vc(uint8_t x)
{
    eve_val_t v;
    v.i = 0;
    v.c = x;
    return v;
}
static inline eve_val_t eve_vp(const void *x)
{
    eve_val_t v;
    v.p = (void *)(uintptr_t)x;
    return v;
}

/* Releases the statement's temporaries, when it made any. */
#define EVE_DRAIN(cx, mark)                                                                        \
    do {                                                                                           \
        if ((cx)->ntmp > (mark))                                                                   \
            eve_tmp_drain((cx), (mark));                                                           \
    } while (0)

/* lv = val for a string or an object: the new value is retained first, so
 * that x = x is safe. */
#define EVE_ASSIGN_REF(lv, val)                                                                    \
    do {                                                                                           \
        void *eve_new_ = (void *)(val);                                                            \
        eve_retain(eve_new_);                                                                      \
        eve_release((void *)(lv));                                                                 \
        (lv) = eve_new_;                                                                           \
    } while (0)

/* A callback's environment (freed by its env_free). */
static inline void *eve_env_alloc(size_t size)
{
    void *p = calloc(1, size);
    if (!p)
        eve_fail("eve", "out of memory");
    return p;
}

static inline eve_str_t *eve_tmp_str(eve_cx_t *cx, eve_str_t *owned)
{
    return (eve_str_t *)eve_tmp(cx, owned);
}

/* bytes: a string, a read_buffer or a write_buffer */
static inline void eve_sock_write_str(eve_cx_t *cx, eve_socket_t *s, const eve_str_t *b)
{
    eve_socket_write(cx, s, b->bytes, b->len);
}
static inline void eve_sock_write_rbuf(eve_cx_t *cx, eve_socket_t *s, const eve_rbuf_t *b)
{
    eve_socket_write(cx, s, b->bytes, b->len);
}
static inline void eve_sock_write_wbuf(eve_cx_t *cx, eve_socket_t *s, const eve_wbuf_t *b)
{
    eve_socket_write(cx, s, b->bytes, b->len);
}
static inline void eve_wbuf_append_str(eve_wbuf_t *w, const eve_str_t *b)
{
    eve_wbuf_append(w, b->bytes, b->len);
}
static inline void eve_wbuf_append_rbuf(eve_wbuf_t *w, const eve_rbuf_t *b)
{
    eve_wbuf_append(w, b->bytes, b->len);
}
static inline void eve_wbuf_append_wbuf(eve_wbuf_t *w, const eve_wbuf_t *b)
{
    eve_wbuf_append(w, b->bytes, b->len);
}
static inline void eve_stream_write_str(eve_stream_t *s, const eve_str_t *b)
{
    eve_stream_write(s, b->bytes, b->len);
}
static inline void eve_stream_write_rbuf(eve_stream_t *s, const eve_rbuf_t *b)
{
    eve_stream_write(s, b->bytes, b->len);
}
static inline void eve_stream_write_wbuf(eve_stream_t *s, const eve_wbuf_t *b)
{
    eve_stream_write(s, b->bytes, b->len);
}

static inline int64_t eve_str_size(const eve_str_t *s)
{
    return (int64_t)s->len;
}

#endif
