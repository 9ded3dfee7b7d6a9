/* The background computation of yard-serve --background-fib (see
 * include/yard/background.h): Program 1 as permission tasks on the
 * coroutine runtime, or its leaves as jobs on an offload pool. */
#include "yard/background.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "yard/clock.h"
#include "yard/coro.h"
#include "yard/log.h"
#include "yard/offload.h"

uint64_t yard_fib_exact(int n)
{
    uint64_t a = 0, b = 1;
    for (int i = 0; i < n; i++) {
        uint64_t t = a + b;
        a = b;
        b = t;
    }
    return a;
}

uint64_t yard_fib_seq(int n)
{
    return n < 2 ? (uint64_t)n : yard_fib_seq(n - 1) + yard_fib_seq(n - 2);
}

void yard_background_log(int n, const char *where, const yard_background_stats_t *st)
{
    /* Always printed: it is what the flag was given for. */
    fprintf(stderr,
            "background fib(%d) %s: %llu computed in %.1f s (%.2f per second), %llu leaves "
            "of fib(<=%d)\n",
            n, where, (unsigned long long)st->rounds, st->seconds,
                  st->seconds > 0 ? (double)st->rounds / st->seconds : 0.0,
            (unsigned long long)st->leaves, YARD_BACKGROUND_CUTOFF);
}

/* ---- on the coroutine runtime: Program 1 ---------------------------------- */

/* One call: reads n (a READ permission on the caller's object), writes its
 * result (a FULL permission on its own). */
struct ctask {
    int n;
    uint64_t result;
    yard_coro_obj_t n_obj, result_obj;
    const atomic_int *stop;
    _Atomic uint64_t *leaves;
};

static void ctask_run(void *arg)
{
    struct ctask *t = arg;
    if (atomic_load_explicit(t->stop, memory_order_relaxed)) {
        t->result = 0; /* the round is abandoned: the server stops */
        return;
    }
    if (t->n <= YARD_BACKGROUND_CUTOFF) {
        t->result = yard_fib_seq(t->n);
        atomic_fetch_add_explicit(t->leaves, 1, memory_order_relaxed);
        return;
    }
    struct ctask a = {.n = t->n - 1, .stop = t->stop, .leaves = t->leaves};
    struct ctask b = {.n = t->n - 2, .stop = t->stop, .leaves = t->leaves};
    yard_coro_finish_t fin;
    yard_coro_finish_init(&fin);
    const yard_coro_perm_t pa[] = {{&a.result_obj, YARD_PERM_FULL}, {&t->n_obj, YARD_PERM_READ}};
    const yard_coro_perm_t pb[] = {{&b.result_obj, YARD_PERM_FULL}, {&t->n_obj, YARD_PERM_READ}};
    if (yard_coro_task(&fin, pa, 2, ctask_run, &a) != 0)
        ctask_run(&a); /* out of memory for a task: compute it here */
    if (yard_coro_task(&fin, pb, 2, ctask_run, &b) != 0)
        ctask_run(&b);
    yard_coro_finish_wait(&fin);
    t->result = a.result + b.result;
}

void yard_background_coro(int n, const atomic_int *stop, yard_background_stats_t *st)
{
    memset(st, 0, sizeof *st);
    _Atomic uint64_t leaves = 0;
    uint64_t t0 = yard_now_ns(), want = yard_fib_exact(n);
    while (!atomic_load(stop)) {
        struct ctask root = {.n = n, .stop = stop, .leaves = &leaves};
        ctask_run(&root);
        if (atomic_load(stop))
            break;
        if (root.result != want)
            yard_fatal("background fib(%d) gave %llu, not %llu", n,
                       (unsigned long long)root.result, (unsigned long long)want);
        st->rounds++;
    }
    st->leaves = atomic_load(&leaves);
    st->seconds = (double)(yard_now_ns() - t0) / 1e9;
}

/* ---- on an offload pool: the same leaves as jobs ------------------------ */

struct leaf {
    yard_job_t job;
    int n;
    uint64_t result;
    yard_background_t *b;
};

struct yard_background {
    int n;
    yard_pool_t *pool;
    pthread_t driver;
    atomic_int stop;
    struct leaf *leaves; /* one round's */
    size_t nleaves;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t pending;
    yard_background_stats_t st;
    uint64_t t0;
};

static size_t count_leaves(int n)
{
    return n <= YARD_BACKGROUND_CUTOFF ? 1 : count_leaves(n - 1) + count_leaves(n - 2);
}

static void fill_leaves(int n, struct leaf **at)
{
    if (n <= YARD_BACKGROUND_CUTOFF) {
        (*at)++->n = n;
        return;
    }
    fill_leaves(n - 1, at);
    fill_leaves(n - 2, at);
}

static void leaf_run(void *arg)
{
    struct leaf *l = arg;
    l->result = atomic_load_explicit(&l->b->stop, memory_order_relaxed) ? 0 : yard_fib_seq(l->n);
}

static void leaf_done(yard_job_t *job)
{
    yard_background_t *b = ((struct leaf *)job->arg)->b;
    pthread_mutex_lock(&b->mu);
    if (--b->pending == 0)
        pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static void *driver(void *arg)
{
    yard_background_t *b = arg;
    uint64_t want = yard_fib_exact(b->n);
    while (!atomic_load(&b->stop)) {
        b->pending = b->nleaves;
        for (size_t i = 0; i < b->nleaves; i++) {
            struct leaf *l = &b->leaves[i];
            l->job = (yard_job_t){.fn = leaf_run, .arg = l, .complete = leaf_done};
            l->b = b;
            yard_pool_submit(b->pool, &l->job);
        }
        pthread_mutex_lock(&b->mu);
        while (b->pending)
            pthread_cond_wait(&b->cv, &b->mu);
        pthread_mutex_unlock(&b->mu);
        if (atomic_load(&b->stop))
            break;
        uint64_t sum = 0;
        for (size_t i = 0; i < b->nleaves; i++)
            sum += b->leaves[i].result;
        if (sum != want)
            yard_fatal("background fib(%d) gave %llu, not %llu", b->n, (unsigned long long)sum,
                       (unsigned long long)want);
        b->st.rounds++;
        b->st.leaves += b->nleaves;
    }
    return NULL;
}

yard_background_t *yard_background_pool_start(int n, int threads, char *err, size_t errlen)
{
    yard_background_t *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, errlen, "background fib: out of memory");
        return NULL;
    }
    b->n = n;
    b->nleaves = count_leaves(n);
    b->leaves = calloc(b->nleaves, sizeof *b->leaves);
    b->pool = b->leaves ? yard_pool_create(threads) : NULL;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    if (!b->pool) {
        snprintf(err, errlen, "background fib: cannot start a pool of %d threads", threads);
        goto fail;
    }
    struct leaf *at = b->leaves;
    fill_leaves(n, &at);
    b->t0 = yard_now_ns();
    int rc = pthread_create(&b->driver, NULL, driver, b);
    if (rc != 0) {
        snprintf(err, errlen, "background fib: pthread_create: %s", strerror(rc));
        yard_pool_destroy(b->pool);
        goto fail;
    }
    return b;
fail:
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    free(b->leaves);
    free(b);
    return NULL;
}

void yard_background_pool_stop(yard_background_t *b, yard_background_stats_t *st)
{
    atomic_store(&b->stop, 1);
    pthread_join(b->driver, NULL);
    yard_pool_destroy(b->pool);
    b->st.seconds = (double)(yard_now_ns() - b->t0) / 1e9;
    *st = b->st;
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    free(b->leaves);
    free(b);
}
