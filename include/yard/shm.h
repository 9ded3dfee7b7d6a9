/* A shared-memory arena mapped MAP_SHARED before any fork, so state that
 * apps share between connections is the same memory under every model. It
 * only grows (bump allocation): shared state is allocated once at start-up. */
#ifndef YARD_SHM_H
#define YARD_SHM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct yard_shm yard_shm_t;

yard_shm_t *yard_shm_create(size_t bytes, char *err, size_t errlen);
/* Zeroed, 64-byte aligned (one cache line, so unrelated state never shares
 * a line). NULL when the arena is exhausted. */
void *yard_shm_alloc(yard_shm_t *shm, size_t bytes);
void yard_shm_destroy(yard_shm_t *shm);

/* A mutex for memory shared across processes: process-shared and robust,
 * so that a process killed while holding it does not wedge the others.
 * 0 or an errno value. */
int yard_shm_mutex_init(pthread_mutex_t *mu);
/* Lock it, taking it over from a holder that died (the caller's data must
 * stay usable when a holder dies half-way). true when it was taken over. */
bool yard_shm_mutex_lock(pthread_mutex_t *mu);

#endif
