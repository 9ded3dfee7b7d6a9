/* A small pool of threads that runs CPU-heavy jobs (bcrypt) away from the
 * event loops, plus one thread for blocking file I/O (a lane of its own,
 * so that CPU jobs never delay a disk write) and one for long reads (a
 * lane of its own too, so that a slow lookup in old data never delays a
 * short write that others wait for), and hands each finished job back to
 * the loop that submitted it through a completion queue whose eventfd the
 * loop polls. */
#ifndef YARD_OFFLOAD_H
#define YARD_OFFLOAD_H

#include <pthread.h>
#include <stdbool.h>

typedef struct yard_completions yard_completions_t;

/* Where a job runs. */
enum yard_lane {
    YARD_LANE_CPU,  /* CPU-heavy work: the pool's --offload-threads */
    YARD_LANE_IO,   /* short blocking file I/O (an append, an fsync): one thread */
    YARD_LANE_SCAN, /* long reads of old data (a history lookup): one thread */
    YARD_LANES,     /* how many there are */
};

typedef struct yard_job {
    void (*fn)(void *arg);
    void *arg;
    void *owner;             /* the submitter's context (a connection) */
    int lane;                /* enum yard_lane */
    yard_completions_t *done; /* where the finished job goes */
    /* Without done: called on the pool's thread once fn has run, to hand
     * the job back some other way (the coroutine runtime readies the
     * coroutine parked on it). The pool does not touch the job after it. */
    void (*complete)(struct yard_job *job);
    struct yard_job *next;
} yard_job_t;

struct yard_completions {
    pthread_mutex_t mu;
    yard_job_t *head, *tail;
    int efd; /* readable while finished jobs wait */
};

int yard_completions_init(yard_completions_t *q);
/* Take every finished job (in completion order); NULL when none. */
yard_job_t *yard_completions_take(yard_completions_t *q);
void yard_completions_fini(yard_completions_t *q);

typedef struct yard_pool yard_pool_t;

/* threads for CPU jobs (0: only the I/O and scan lanes run), and one
 * thread for each of the I/O and scan lanes. */
yard_pool_t *yard_pool_create(int threads);
void yard_pool_submit(yard_pool_t *pool, yard_job_t *job);
/* Finish every submitted job, then join the threads. */
void yard_pool_destroy(yard_pool_t *pool);

#endif
