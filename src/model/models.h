#ifndef YARD_MODELS_H
#define YARD_MODELS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "yard/model.h"
#include "yard/server.h"

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
