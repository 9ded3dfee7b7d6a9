/* The connection driver's insides, shared by its files (yard/conn.h is its
 * API): conn.c owns a connection's life (opening, what it waits for next,
 * closing, the sets of connections); conn_input.c input and what the app is
 * offered; conn_effects.c the app's callbacks, their effects, jobs, timers
 * and news; conn_output.c the output queue and the output file; conn_tls.c
 * TLS records in and out. Not a public interface. */
#ifndef YARD_CONN_INT_H
#define YARD_CONN_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "yard/conn.h"

#define APP_LOCK(c)                                                                               \
    do {                                                                                           \
        if ((c)->app_lock)                                                                         \
            yard_shm_mutex_lock((c)->app_lock);                                                    \
    } while (0)
#define APP_UNLOCK(c)                                                                             \
    do {                                                                                           \
        if ((c)->app_lock)                                                                         \
            pthread_mutex_unlock((c)->app_lock);                                                   \
    } while (0)

/* conn_effects.c: a fresh effect record for an app callback; the effects it
 * recorded carried out; the jobs that belong on this thread run; an app
 * callback of the (state, session, fx) kind and everything after it. */
yard_fx_t conn_fx(yard_conn_t *c, yard_scratch_t *s);
void conn_apply(yard_conn_t *c, yard_fx_t *fx);
void conn_settle(yard_conn_t *c, yard_scratch_t *s);
void conn_call(yard_conn_t *c, yard_scratch_t *s, void (*cb)(void *, void *, yard_fx_t *));

/* conn_input.c: input that waited offered to the app again; input in ib for
 * the app (or kept while the app may not be called). */
void conn_reoffer(yard_conn_t *c, yard_scratch_t *s);
void conn_input(yard_conn_t *c, yard_buf_t *ib, yard_scratch_t *s);

/* conn_output.c: the output of one entry point sent; the output file's
 * bytes carried to it; completion models: file bytes ready to be taken. */
void conn_flush(yard_conn_t *c, yard_scratch_t *s);
void conn_store(yard_conn_t *c);
bool conn_store_due(const yard_conn_t *c, bool final);

/* conn_tls.c: records arrived; plaintext sealed into records; the pool ran
 * a handshake step; the handshake's time is up. */
void conn_tls_input(yard_conn_t *c, yard_scratch_t *s, const uint8_t *p, size_t n);
void conn_tls_seal(yard_conn_t *c, yard_scratch_t *s);
void conn_tls_job_done(yard_conn_t *c, yard_scratch_t *s);
bool conn_tls_overdue(yard_conn_t *c);

#endif
