/* The news bus: "wake this connection when topic T has news", across
 * threads and processes, for every model. It is what chat fan-out runs on.
 *
 * A bus lives in the shared region (made before any fork): per topic a
 * sequence number that only grows, and one 32-bit generation word that
 * every publish bumps and futex-wakes (a shared futex, so it crosses
 * fork()). A subscriber is a watch: an eventfd plus (topic, seen); it is
 * due while the topic's sequence is above seen. Each process that has
 * watches runs one waker thread that sleeps on the generation word and,
 * when it moves, writes the eventfd of every due watch of its process.
 * Models then wait on the eventfd like on any descriptor (poll in the
 * blocking models, the epoll set in the loops, the netpoller under coro),
 * so a publisher never needs to know who listens or where they run, and a
 * wake-up cannot be lost: a watch that is already due when it is set
 * signals itself, and a publish after it moves the generation the waker
 * waits on (papayaChat's SIGUSR1 lost wake-ups cannot happen).
 *
 * A process runs one waker per bus it has watches on (at most 16 buses). */
#ifndef YARD_BUS_H
#define YARD_BUS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "yard/shm.h"

typedef struct yard_bus {
    _Atomic uint32_t gen; /* bumped by every publish; the futex word */
    uint32_t ntopics;
    _Atomic uint64_t seq[]; /* per topic */
} yard_bus_t;

/* A bus with ntopics topics in the shared region; NULL when it is full. */
yard_bus_t *yard_bus_create(yard_shm_t *shm, uint32_t ntopics);
/* Call hook after every publish in this process (and in the children it
 * forks afterwards): a model's own wake-up, such as fork --pair's signal to
 * the process group (papayaChat's). NULL removes it. */
void yard_bus_on_publish(void (*hook)(void));
/* Stop (and join) this process's waker threads, before the shared region
 * their buses live in is unmapped. */
void yard_bus_stop_wakers(void);
/* Raise topic's sequence to at least seq and wake the watchers. */
void yard_bus_publish(yard_bus_t *bus, uint32_t topic, uint64_t seq);
static inline uint64_t yard_bus_seq(const yard_bus_t *bus, uint32_t topic)
{
    return atomic_load_explicit(&((yard_bus_t *)bus)->seq[topic], memory_order_acquire);
}

typedef struct yard_watch {
    int efd; /* readable when the watch is (or was) due */
    yard_bus_t *bus;
    uint32_t topic;
    _Atomic uint64_t seen; /* due while seq > seen; UINT64_MAX: not watching */
    struct yard_watch *prev, *next; /* the process's watches */
} yard_watch_t;

/* An eventfd, registered with this process's waker (started on first use).
 * 0 or -errno. */
int yard_watch_open(yard_watch_t *w, yard_bus_t *bus);
/* Watch topic for sequence numbers above seen (UINT64_MAX: stop watching).
 * Signals the eventfd at once if that is already the case. */
void yard_watch_set(yard_watch_t *w, uint32_t topic, uint64_t seen);
bool yard_watch_due(const yard_watch_t *w);
/* Signal the eventfd again if the watch is due (after a pause in which a
 * wake-up was consumed without acting on it). */
void yard_watch_poke(yard_watch_t *w);
/* Consume the eventfd's wake-ups (then check yard_watch_due). */
void yard_watch_drain(yard_watch_t *w);
void yard_watch_close(yard_watch_t *w);

#endif
