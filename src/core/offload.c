#include "yard/offload.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "yard/log.h"

struct yard_pool {
    pthread_mutex_t mu;
    pthread_cond_t work;
    yard_job_t *head, *tail;
    bool stopping;
    int nthreads;
    pthread_t threads[];
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
    yard_pool_t *pool = p;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (!pool->head && !pool->stopping)
            pthread_cond_wait(&pool->work, &pool->mu);
        yard_job_t *job = pool->head;
        if (!job)
            break; /* stopping and nothing left */
        pool->head = job->next;
        if (!pool->head)
            pool->tail = NULL;
        pthread_mutex_unlock(&pool->mu);
        job->fn(job->arg);
        completions_push(job->done, job);
        pthread_mutex_lock(&pool->mu);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

yard_pool_t *yard_pool_create(int threads)
{
    yard_pool_t *pool = calloc(1, sizeof *pool + (size_t)threads * sizeof(pthread_t));
    if (!pool)
        return NULL;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->work, NULL);
    for (; pool->nthreads < threads; pool->nthreads++) {
        int rc = pthread_create(&pool->threads[pool->nthreads], NULL, pool_thread, pool);
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
    job->next = NULL;
    pthread_mutex_lock(&pool->mu);
    if (pool->tail)
        pool->tail->next = job;
    else
        pool->head = job;
    pool->tail = job;
    pthread_cond_signal(&pool->work);
    pthread_mutex_unlock(&pool->mu);
}

void yard_pool_destroy(yard_pool_t *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->mu);
    pool->stopping = true;
    pthread_cond_broadcast(&pool->work);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 0; i < pool->nthreads; i++)
        pthread_join(pool->threads[i], NULL);
    pthread_cond_destroy(&pool->work);
    pthread_mutex_destroy(&pool->mu);
    free(pool);
}
