#ifndef YARD_MODELS_H
#define YARD_MODELS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "yard/clock.h"
#include "yard/conn.h"
#include "yard/model.h"
#include "yard/server.h"

/* How long a stop waits for connections to finish before it gives up on
 * them (threads, coroutines) or kills them (processes). */
#define YARD_STOP_GRACE_NS (1500 * YARD_NS_PER_MS)

/* The blocking models (fork, thread): jobs inline, output in full. */
extern const yard_conn_policy_t yard_blocking_policy;
/* Serve a connection opened with a blocking policy (yard_blocking_policy,
 * or one like it with model state) until it ends or *stop becomes true
 * (blocking.c). */
void yard_blocking_serve(yard_conn_t *c, yard_scratch_t *s, const _Atomic int *stop);

extern const yard_model_t yard_model_fork;
extern const yard_model_t yard_model_thread;
extern const yard_model_t yard_model_epoll;
extern const yard_model_t yard_model_reactors;
extern const yard_model_t yard_model_coro;

/* Shared by the process-based models: the parent only supervises. Sends
 * SIGTERM to every child, waits up to grace_ns, then SIGKILLs and reaps
 * what is left. */
typedef struct yard_children {
    pid_t *pids;
    size_t n, cap;
} yard_children_t;

int yard_children_add(yard_children_t *ch, pid_t pid);
/* Reap every exited child; calls on_exit for each one (may be NULL).
 * Returns the number reaped. */
size_t yard_children_reap(yard_children_t *ch, void (*on_exit)(pid_t, int, void *), void *arg);
void yard_children_stop(yard_children_t *ch, int sig_fd, uint64_t grace_ns);
void yard_children_free(yard_children_t *ch);

#endif
