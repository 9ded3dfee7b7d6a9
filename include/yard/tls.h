/* TLS as a sans-I/O layer (docs/tls.md). Ciphertext goes in as bytes that
 * arrived (yard_tls_feed), plaintext comes out (yard_tls_read); plaintext
 * goes in (yard_tls_write) and the records to send come out (yard_tls_take).
 * No socket is touched here: the connection driver (src/core/conn_tls.c) moves
 * the bytes, so TLS works the same under every model. OpenSSL 3 stays
 * inside src/core/tls.c, behind memory BIOs.
 *
 * Errors follow docs/architecture.md: 0 or a count, or -errno; a
 * protocol failure is -EPROTO, and yard_tls_why says what OpenSSL saw. The
 * context is built at the configuration edge, so it explains a failure in
 * an err buffer. */
#ifndef YARD_TLS_H
#define YARD_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "yard/buf.h"

/* The server's side: its certificate (a chain) and key, which SIGHUP may
 * replace (yard_tls_ctx_reload). Shared by every thread of a process;
 * processes forked after it was made inherit it. */
typedef struct yard_tls_ctx yard_tls_ctx_t;
/* One connection's TLS state. */
typedef struct yard_tls yard_tls_t;

/* Loads cert_file (PEM, the server's certificate first, then its chain)
 * and key_file (PEM) and checks that they belong together. TLS 1.2 and
 * 1.3 only, no renegotiation, no compression, session tickets on. 0, or
 * -1 with err naming the file and the reason. */
int yard_tls_ctx_new(yard_tls_ctx_t **out, const char *cert_file, const char *key_file, char *err,
                     size_t errlen);
/* Loads the same two files again; new handshakes use the new pair, the
 * ones under way keep theirs. On failure the old pair stays: -1 with err. */
int yard_tls_ctx_reload(yard_tls_ctx_t *ctx, char *err, size_t errlen);
void yard_tls_ctx_free(yard_tls_ctx_t *ctx);

/* The client's side (yard-chat connect, yard-load): the server's
 * certificate is checked against ca_file (NULL: the system's CAs) and the
 * host name a connection names, unless insecure; cert_file and key_file
 * (both or neither) are the client's own certificate (SASL EXTERNAL). 0, or
 * -1 with err. */
int yard_tls_client_ctx_new(yard_tls_ctx_t **out, const char *ca_file, bool insecure,
                            const char *cert_file, const char *key_file, char *err,
                            size_t errlen);

/* A server-side connection; NULL when out of memory. */
yard_tls_t *yard_tls_new(yard_tls_ctx_t *ctx);
/* A client-side connection to host (sent as SNI, and the name the server's
 * certificate must carry); the client speaks first: yard_tls_read (or
 * yard_tls_handshake) with nothing fed yet starts the handshake. NULL when
 * out of memory. */
yard_tls_t *yard_tls_client_new(yard_tls_ctx_t *ctx, const char *host);
/* The SHA-256 of the certificate the peer presented (a client's, asked
 * for but not required: anyone may connect without one), as 64 lower-case
 * hex digits into out: 0, or -ENOENT when it presented none. */
int yard_tls_peer_fingerprint(const yard_tls_t *t, char out[65]);
/* A client's session to resume (a ticket the server sent): the
 * connection's, once it has one it may resume (in TLS 1.3 the ticket comes
 * after the handshake, with the first reply), else NULL. Free it with
 * yard_tls_session_free; offer it, before the handshake, to a new
 * connection to the same server. */
typedef struct yard_tls_session yard_tls_session_t;
yard_tls_session_t *yard_tls_session_take(yard_tls_t *t);
void yard_tls_session_offer(yard_tls_t *t, yard_tls_session_t *s);
void yard_tls_session_free(yard_tls_session_t *s);
/* Whether the handshake resumed an earlier session (no certificate, no
 * private-key work). */
bool yard_tls_resumed(const yard_tls_t *t);
/* Moves the handshake on without asking for plaintext: 1 once it is done,
 * 0 while it needs more ciphertext, -EPROTO (yard_tls_why) or -ENOMEM. */
int yard_tls_handshake(yard_tls_t *t);
void yard_tls_free(yard_tls_t *t);

/* n bytes of ciphertext arrived: 0, or -ENOMEM. */
int yard_tls_feed(yard_tls_t *t, const uint8_t *p, size_t n);
/* Plaintext that arrived, up to room bytes: a count > 0; 0 when more
 * ciphertext is needed first (a handshake in progress counts); -ESHUTDOWN
 * when the peer ended the TLS session (close_notify); -EPROTO when the peer
 * broke the protocol (yard_tls_why says how); -ENOMEM. Records to send (the
 * handshake's, an alert) may be waiting afterwards: yard_tls_take. */
long yard_tls_read(yard_tls_t *t, uint8_t *buf, size_t room);
/* Whether the handshake has completed. */
bool yard_tls_established(const yard_tls_t *t);
/* Encrypts n bytes of plaintext (after the handshake): 0, -EPROTO or
 * -ENOMEM. */
int yard_tls_write(yard_tls_t *t, const uint8_t *p, size_t n);
/* Queues the close_notify alert (once; nothing before the handshake). */
void yard_tls_close_notify(yard_tls_t *t);
/* Appends the records waiting to be sent to out: the number of bytes
 * moved, or -ENOMEM. */
long yard_tls_take(yard_tls_t *t, yard_buf_t *out);
/* Why the last call failed, for the log: "TLS: wrong version number". */
const char *yard_tls_why(const yard_tls_t *t);
/* The negotiated protocol ("TLSv1.3") once established, else NULL. */
const char *yard_tls_version(const yard_tls_t *t);

#endif
