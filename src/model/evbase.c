/* The bookkeeping every event loop shares (see evbase.h). */
#include "evbase.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "yard/clock.h"
#include "yard/log.h"

void yard_evbase_init(yard_evbase_t *b, yard_server_t *srv)
{
    memset(b, 0, sizeof *b);
    b->srv = srv;
    b->done.efd = -1;
    yard_conn_list_init(&b->lru);
}

void yard_evbase_fini(yard_evbase_t *b)
{
    yard_pool_destroy(b->pool);
    b->pool = NULL;
    if (b->done.efd >= 0)
        yard_completions_fini(&b->done);
    b->done.efd = -1;
    yard_heap_free(&b->timers);
    yard_scratch_free(&b->scratch);
}

void yard_evbase_touch(yard_evbase_t *b, yard_conn_t *c, uint64_t now)
{
    yard_evconn_t *ec = yard_evconn(c);
    ec->last_active = now;
    yard_conn_list_remove(&ec->lru);
    yard_conn_list_append(&b->lru, &ec->lru);
}

static void yard_evbase_add(yard_evbase_t *b, yard_conn_t *c, uint64_t now)
{
    yard_evconn_t *ec = yard_evconn(c);
    ec->lru.conn = c;
    yard_conn_list_init(&ec->lru);
    yard_heap_node_init(&ec->timer);
    yard_evbase_touch(b, c, now);
    b->nconns++;
}

yard_conn_t *yard_evbase_open(yard_evbase_t *b, int fd, const yard_conn_policy_t *policy,
                              const char *peer, uint64_t now)
{
    yard_conn_t *c = yard_conn_open(b->srv, fd, policy);
    if (!c) {
        yard_log_err("%s: out of memory for a connection", peer);
        close(fd);
        yard_server_release(b->srv);
        return NULL;
    }
    yard_evbase_add(b, c, now);
    return c;
}

void yard_evbase_remove(yard_evbase_t *b, yard_conn_t *c)
{
    yard_evconn_t *ec = yard_evconn(c);
    if (yard_heap_contains(&ec->timer))
        yard_heap_remove(&b->timers, &ec->timer);
    yard_conn_list_remove(&ec->lru);
    b->nconns--;
}

yard_conn_t *yard_evbase_oldest(const yard_evbase_t *b)
{
    return b->lru.next != &b->lru ? b->lru.next->conn : NULL;
}

static int yard_evbase_sync_timer(yard_evbase_t *b, yard_conn_t *c, uint64_t deadline)
{
    yard_evconn_t *ec = yard_evconn(c);
    if (yard_heap_contains(&ec->timer)) {
        if (ec->timer.key == deadline)
            return 0;
        yard_heap_remove(&b->timers, &ec->timer);
    }
    return deadline ? yard_heap_push(&b->timers, &ec->timer, deadline) : 0;
}

uint64_t yard_evbase_due(const yard_evbase_t *b)
{
    uint64_t idle = b->srv->cfg->idle_timeout_ns;
    uint64_t due = UINT64_MAX;
    yard_conn_t *oldest = yard_evbase_oldest(b);
    if (idle && oldest)
        due = yard_evconn(oldest)->last_active + idle;
    yard_heap_node_t *t = yard_heap_min(&b->timers);
    if (t && t->key < due)
        due = t->key;
    return due;
}

int yard_evbase_timeout_ms(const yard_evbase_t *b, uint64_t now)
{
    uint64_t due = yard_evbase_due(b);
    if (due == UINT64_MAX)
        return -1;
    if (due <= now)
        return 0;
    uint64_t ms = (due - now + YARD_NS_PER_MS - 1) / YARD_NS_PER_MS;
    return ms > 60000 ? 60000 : (int)ms;
}

static yard_conn_t *yard_evbase_timer_due(yard_evbase_t *b, uint64_t now)
{
    yard_heap_node_t *t = yard_heap_min(&b->timers);
    if (!t || t->key > now)
        return NULL;
    yard_heap_remove(&b->timers, t);
    return ((yard_evconn_t *)((char *)t - offsetof(yard_evconn_t, timer)))->lru.conn;
}

yard_conn_t *yard_evbase_expired(yard_evbase_t *b, uint64_t now)
{
    uint64_t idle = b->srv->cfg->idle_timeout_ns;
    yard_conn_t *c;
    while (idle && (c = yard_evbase_oldest(b)) && yard_evconn(c)->last_active + idle <= now) {
        if (!yard_evconn(c)->in_pool)
            return c;
        /* Waiting for its own job (a slow bcrypt) is not silence: the clock
         * starts again (and the sweep moves past it). */
        yard_evbase_touch(b, c, now);
    }
    return NULL;
}

static bool yard_evbase_pool_start(yard_evbase_t *b, int (*watch)(void *arg, int efd), void *arg)
{
    if (b->pool)
        return true;
    if (b->pool_failed)
        return false;
    if (yard_completions_init(&b->done) < 0) {
        yard_log_err("eventfd: %s", strerror(errno));
        goto err;
    }
    if (watch(arg, b->done.efd) < 0)
        goto err;
    b->pool = yard_pool_create(b->srv->cfg->offload_threads);
    if (b->pool)
        return true;
err:
    yard_log_warn("no offload pool: jobs run inline on the event loop");
    b->pool_failed = true;
    return false;
}

static void yard_evbase_submit(yard_evbase_t *b, yard_conn_t *c)
{
    yard_evconn(c)->in_pool = true;
    yard_conn_job(c)->done = &b->done;
    b->jobs_in_flight++;
    yard_pool_submit(b->pool, yard_conn_job(c));
}

yard_wait_t yard_evbase_next(yard_evbase_t *b, yard_conn_t *c, int (*watch)(void *arg, int efd),
                             void *arg, const char **why)
{
    *why = NULL;
    yard_wait_t w = yard_conn_next(c, &b->scratch);
    while (w.next == YARD_NEXT_JOB || w.next == YARD_NEXT_PERM) {
        if (w.next == YARD_NEXT_JOB && yard_evbase_pool_start(b, watch, arg)) {
            yard_evbase_submit(b, c);
            return w;
        }
        yard_conn_run_job(c, &b->scratch);
        w = yard_conn_next(c, &b->scratch);
    }
    if (w.next == YARD_NEXT_WAIT && yard_evbase_sync_timer(b, c, w.deadline) < 0) {
        *why = "out of memory for a timer";
        w.next = YARD_NEXT_CLOSE;
    }
    return w;
}

static yard_job_t *yard_evbase_take_jobs(yard_evbase_t *b)
{
    yard_job_t *jobs = yard_completions_take(&b->done);
    for (yard_job_t *job = jobs; job; job = job->next) {
        yard_evconn((yard_conn_t *)job->owner)->in_pool = false;
        b->jobs_in_flight--;
    }
    return jobs;
}

void yard_evbase_jobs_done(yard_evbase_t *b, yard_evbase_after_fn after, void *loop, uint64_t now)
{
    yard_job_t *job = yard_evbase_take_jobs(b);
    while (job) {
        yard_job_t *next = job->next; /* the job may be submitted again */
        yard_conn_t *c = job->owner;
        yard_conn_on_job_done(c, &b->scratch);
        after(loop, c, now);
        job = next;
    }
}

void yard_evbase_fire_timers(yard_evbase_t *b, yard_evbase_after_fn after, void *loop,
                             uint64_t now)
{
    yard_conn_t *c;
    while ((c = yard_evbase_timer_due(b, now))) {
        yard_conn_on_timer(c, &b->scratch);
        after(loop, c, now);
    }
}

void yard_evbase_wait_jobs(yard_evbase_t *b)
{
    /* Jobs still in the pool refer to their connections: wait for them. */
    while (b->jobs_in_flight) {
        struct pollfd pfd = {.fd = b->done.efd, .events = POLLIN};
        poll(&pfd, 1, 100);
        yard_evbase_take_jobs(b);
    }
}
