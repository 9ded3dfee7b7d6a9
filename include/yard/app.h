/* The application interface. An app is a sans-I/O protocol handler: the
 * engine hands it the bytes that arrived on a connection and it answers with
 * effects recorded in a yard_fx_t. It never calls read, write, accept or
 * sleep; each concurrency model turns the effects into its own mechanism, so
 * the same app code runs unchanged under every model.
 *
 * Effects available today:
 *   yard_fx_send*   bytes to send to the peer, in order
 *   yard_fx_close   close the connection once the queued bytes are sent
 *   yard_fx_store   bytes for the server's output file (--out), written by the
 *                   engine according to --flush
 * The timer, topic and offload effects the chat and REST apps need are added
 * with them (see docs/architecture.md). */
#ifndef YARD_APP_H
#define YARD_APP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "yard/buf.h"
#include "yard/config.h"
#include "yard/shm.h"

typedef struct yard_fx {
    yard_buf_t *out;          /* bytes queued for the peer */
    yard_buf_t *store;        /* bytes queued for the output file */
    const char *close_reason; /* why the app closed the connection (logged) */
    bool close;               /* close after the queued bytes are sent */
    bool nomem;               /* an effect could not be recorded: out of memory */
    bool eof; /* input, not an effect: the peer has closed its side, so these are
               * the last bytes; what the app does not consume is dropped */
} yard_fx_t;

int yard_fx_send(yard_fx_t *fx, const void *p, size_t n);
/* Room for n bytes to send; fill them, then yard_fx_send_commit(fx, n). */
uint8_t *yard_fx_send_reserve(yard_fx_t *fx, size_t n);
void yard_fx_send_commit(yard_fx_t *fx, size_t n);
/* Close after the queued bytes are sent. A non-NULL reason marks an abnormal
 * close (a protocol violation) and is logged with the peer's address. */
void yard_fx_close(yard_fx_t *fx, const char *reason);
int yard_fx_store(yard_fx_t *fx, const void *p, size_t n);

typedef struct yard_app {
    const char *name;
    const char *summary;
    size_t session_size; /* per-connection state the engine allocates, zeroed */
    bool uses_out;       /* the app writes to --out */

    /* Once, before any fork or thread: allocate state that connections share
     * from the shared region so that process models share it too. */
    int (*init)(void **state, const yard_config_t *cfg, yard_shm_t *shm, char *err,
                size_t errlen);
    void (*fini)(void *state);
    /* A connection opened (optional: a greeting goes here). */
    void (*open)(void *state, void *session, yard_fx_t *fx);
    /* Bytes arrived. Returns how many were consumed; the rest (a partial
     * request) is offered again, with more bytes after it, next time. When
     * the peer closes its side with bytes still unconsumed, they are offered
     * once more with fx->eof set. */
    size_t (*data)(void *state, void *session, const uint8_t *in, size_t n, yard_fx_t *fx);
    /* The connection is gone (optional): release what the session holds. */
    void (*close)(void *state, void *session);
} yard_app_t;

extern const yard_app_t *const yard_apps[]; /* NULL-terminated */
const yard_app_t *yard_app_find(const char *name);

#endif
