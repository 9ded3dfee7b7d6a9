/* The state every model serves from: configuration, the app and its shared
 * state, the listening socket and the signal descriptor. */
#ifndef YARD_SERVER_H
#define YARD_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>

#include "yard/app.h"
#include "yard/config.h"
#include "yard/model.h"
#include "yard/shed.h"
#include "yard/shm.h"

/* Counters that live in shared memory so that every process and thread of
 * the server sees the same numbers. */
typedef struct yard_shared {
    _Atomic long live_conns;
    _Atomic unsigned long accepted;
    _Atomic unsigned long rejected;
    _Atomic int stopping; /* SIGTERM or SIGINT was taken: the server is stopping */
} yard_shared_t;

/* Listening sockets: one per address --listen names (localhost: 127.0.0.1
 * and ::1), all on the same port. */
typedef struct yard_listen_set {
    int n;
    int fd[YARD_MAX_LISTEN];
} yard_listen_set_t;

/* Closes every descriptor of the set (those >= 0) and empties it. */
void yard_listen_set_close(yard_listen_set_t *s);

typedef struct yard_server {
    const yard_config_t *cfg;
    const yard_app_t *app;
    void *app_state;
    const yard_model_t *model;
    yard_shm_t *shm;
    yard_shared_t *shared;
    yard_listen_set_t ls; /* the listeners; a model with several loops adds its own */
    yard_addr_t bound[YARD_MAX_LISTEN]; /* where ls.fd[i] is bound (the real port) */
    bool bound_tls[YARD_MAX_LISTEN];    /* ls.fd[i] is a --tls-listen listener */
    int nbound; /* entries of bound (ls.n, which stays when a model moves ls away) */
    uint16_t tls_port; /* the first TLS listener's port (apps name it); 0: none */
    struct yard_tls_ctx *tls;           /* the certificate and key; NULL without TLS */
    /* signalfd for SIGTERM, SIGINT and SIGCHLD, which stay blocked in every
     * thread; a forked child reading it sees its own signals. */
    int sig_fd;
    int out_fd; /* --out, opened O_APPEND before any fork; -1 if the app has none */
} yard_server_t;

/* Opens srv->ls on every address of cfg->listen, all on one port (the
 * kernel's choice for port 0), and fills srv->bound. An address of a name
 * that this host cannot use (IPv6 disabled: EADDRNOTAVAIL, EAFNOSUPPORT) is
 * skipped with a warning; any other failure fails. 0, or -1 with err. */
int yard_server_listen(yard_server_t *srv, bool reuseport, char *err, size_t errlen);
/* Whether an accepted fd came through a TLS listener (its local address
 * is one of them). */
bool yard_server_fd_is_tls(const yard_server_t *srv, int fd);
/* SIGHUP reloads this context's certificate and key (in yard_signals_stop,
 * in whichever process and thread takes the signal). */
void yard_server_reload_on_hup(struct yard_tls_ctx *tls);
/* "127.0.0.1:7000 tls:[::1]:7001": every bound address, space-separated,
 * a TLS listener's prefixed with "tls:". */
void yard_server_format_bound(const yard_server_t *srv, char *buf, size_t len);

/* Where yard_stopping (yard/app.h) looks: the region every process of the
 * server shares. Set once at start-up, before any fork. */
void yard_stopping_attach(yard_shared_t *shared);

/* Admission control for --max-conns: true if one more connection may live.
 * A caller that got true calls yard_server_release when it ends. */
bool yard_server_admit(yard_server_t *srv, const char *peer);
void yard_server_release(yard_server_t *srv);

/* Accept one connection from a non-blocking listener. Returns the fd, or -1
 * when there is nothing more to accept now (errors other than EAGAIN are
 * logged; running out of descriptors sheds the connection instead of leaving
 * it to spin the loop). The new fd is blocking unless nonblock is set. */
int yard_server_accept(yard_server_t *srv, int listen_fd, bool nonblock, int *reserve_fd);
/* Accept failed with err (also for models that accept elsewhere: a
 * completion). Running out of descriptors sheds the connections pending at
 * the listener, up to YARD_SHED_BUDGET (yard_shed, yard/shed.h); logged at
 * most once a second. Returns how many were shed. Other errors are logged
 * and return 0. The listener must be non-blocking. */
int yard_server_accept_failed(yard_server_t *srv, int listen_fd, int err, int *reserve_fd);
/* True for the accept errors that only mean "try again" (EINTR, a
 * connection that was aborted before it was accepted). */
bool yard_accept_retry(int err);
/* Apply --max-conns to a connection accepted elsewhere: returns fd, which
 * the caller owns (and yard_server_release when it ends), or -1 when it was
 * refused (closed and logged). peer receives the peer's address as text. */
int yard_server_admit_fd(yard_server_t *srv, int fd, char *peer, size_t peerlen);
/* Accept one connection and apply --max-conns: returns an fd the caller now
 * owns (and must yard_server_release when it ends), or -1 when there is
 * nothing more to accept now. Refused connections are closed and logged.
 * peer receives the peer's address as text. */
int yard_server_accept_admitted(yard_server_t *srv, int listen_fd, bool nonblock, int *reserve_fd,
                                char *peer, size_t peerlen);
/* The accept loop of the models whose connections block (fork, thread):
 * wait on the listener and the signalfd, hand every admitted connection
 * (a blocking fd) to on_conn, call on_signal for signals other than SIGTERM
 * and SIGINT, and return when one of those arrives. */
void yard_server_accept_loop(yard_server_t *srv, void (*on_conn)(int fd, const char *peer, void *arg),
                             void (*on_signal)(int sig, void *arg), void *arg);

/* Take every signal pending on sig_fd, handing those other than SIGTERM and
 * SIGINT to on_other (may be NULL). Returns 1 when one of those two came,
 * -1 when the descriptor failed (callers stop then too), 0 otherwise. */
int yard_signals_stop(int sig_fd, void (*on_other)(int sig, void *arg), void *arg);
/* Block SIGTERM, SIGINT and SIGCHLD and return a signalfd for them. */
int yard_signals_setup(char *err, size_t errlen);
/* Number of CPUs in this process's affinity mask. */
int yard_cpus_available(void);

#endif
