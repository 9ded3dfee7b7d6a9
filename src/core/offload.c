/* Linux-only: eventfd. What a port uses instead: docs/portability.md. */
#include "yard/offload.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "yard/log.h"

/* Three lanes under one lock: CPU jobs for the pool's threads, short
 * blocking file I/O for one thread of its own, so that a queue of long CPU
 * jobs (bcrypt) never delays a disk write, and long reads for another, so
 * that a queue of history lookups never delays an append either. */
struct lane {
    pthread_cond_t work;
    yard_job_t *head, *tail;
};

struct pool_thread {
    yard_pool_t *pool;
    struct lane *lane;
    pthread_t tid;
};

struct yard_pool {
    pthread_mutex_t mu;
    struct lane lanes[YARD_LANES]; /* by enum yard_lane */
    bool stopping;
    int nthreads;
    struct pool_thread threads[]; /* the CPU ones, then the I/O one, then the scan one */
};

int yard_completions_init(yard_completions_t *q)
{
    memset(q, 0, sizeof *q);
    q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (q->efd < 0)
        return -1;
    pthread_mutex_init(&q->mu, NULL);
    return 0;
}

static void completions_push(yard_completions_t *q, yard_job_t *job)
{
    job->next = NULL;
    pthread_mutex_lock(&q->mu);
    bool was_empty = !q->head;
    if (q->tail)
        q->tail->next = job;
    else
        q->head = job;
    q->tail = job;
    pthread_mutex_unlock(&q->mu);
    /* One wake-up per batch is enough: the loop drains the whole queue. */
    if (was_empty) {
        uint64_t one = 1;
        while (write(q->efd, &one, sizeof one) < 0 && errno == EINTR) {
        }
    }
}

yard_job_t *yard_completions_take(yard_completions_t *q)
{
    uint64_t n;
    while (read(q->efd, &n, sizeof n) < 0 && errno == EINTR) {
    }
    pthread_mutex_lock(&q->mu);
    yard_job_t *all = q->head;
    q->head = q->tail = NULL;
    pthread_mutex_unlock(&q->mu);
    return all;
}

void yard_completions_fini(yard_completions_t *q)
{
    if (q->efd >= 0)
        close(q->efd);
    q->efd = -1;
    pthread_mutex_destroy(&q->mu);
}

static void *pool_thread(void *p)
{
    struct pool_thread *self = p;
    yard_pool_t *pool = self->pool;
    struct lane *lane = self->lane;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (!lane->head && !pool->stopping)
            pthread_cond_wait(&lane->work, &pool->mu);
        yard_job_t *job = lane->head;
        if (!job)
            break; /* stopping and nothing left */
        lane->head = job->next;
        if (!lane->head)
            lane->tail = NULL;
        pthread_mutex_unlock(&pool->mu);
        job->fn(job->arg);
        if (job->done)
            completions_push(job->done, job);
        else
            job->complete(job); /* may end the job's life */
        pthread_mutex_lock(&pool->mu);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

yard_pool_t *yard_pool_create(int threads)
{
    int total = threads + YARD_LANES - 1; /* the CPU threads, then one per other lane */
    yard_pool_t *pool = calloc(1, sizeof *pool + (size_t)total * sizeof pool->threads[0]);
    if (!pool)
        return NULL;
    pthread_mutex_init(&pool->mu, NULL);
    for (int l = 0; l < YARD_LANES; l++)
        pthread_cond_init(&pool->lanes[l].work, NULL);
    for (; pool->nthreads < total; pool->nthreads++) {
        struct pool_thread *t = &pool->threads[pool->nthreads];
        t->pool = pool;
        int i = pool->nthreads; /* past the CPU threads: YARD_LANE_IO, then _SCAN */
        t->lane = &pool->lanes[i < threads ? YARD_LANE_CPU : i - threads + YARD_LANE_IO];
        int rc = pthread_create(&t->tid, NULL, pool_thread, t);
        if (rc != 0) {
            yard_log_err("offload pool: pthread_create: %s", strerror(rc));
            yard_pool_destroy(pool);
            return NULL;
        }
    }
    return pool;
}

void yard_pool_submit(yard_pool_t *pool, yard_job_t *job)
{
    /* A lane out of range is the CPU lane (the zero of a job made without one). */
    int l = job->lane > 0 && job->lane < YARD_LANES ? job->lane : YARD_LANE_CPU;
    struct lane *lane = &pool->lanes[l];
    job->next = NULL;
    pthread_mutex_lock(&pool->mu);
    if (lane->tail)
        lane->tail->next = job;
    else
        lane->head = job;
    lane->tail = job;
    pthread_cond_signal(&lane->work);
    pthread_mutex_unlock(&pool->mu);
}

void yard_pool_destroy(yard_pool_t *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->mu);
    pool->stopping = true;
    for (int l = 0; l < YARD_LANES; l++)
        pthread_cond_broadcast(&pool->lanes[l].work);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 0; i < pool->nthreads; i++)
        pthread_join(pool->threads[i].tid, NULL);
    for (int l = 0; l < YARD_LANES; l++)
        pthread_cond_destroy(&pool->lanes[l].work);
    pthread_mutex_destroy(&pool->mu);
    free(pool);
}
