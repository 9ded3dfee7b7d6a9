/* The connection driver's calls into the app (include/yard/conn.h): the
 * effect record each callback gets, the effects it recorded carried out
 * (close, output file, input held or paused, bounds, timer, news watch,
 * job), jobs run here or handed to the model, and the timer, news and
 * wake-up entry points. */
#include "conn_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "yard/access.h"
#include "yard/clock.h"
#include "yard/log.h"

/* A fresh effect record. Output goes through the scratch buffer (and from
 * there straight to the socket) unless older output is still queued, which
 * must leave first. On a TLS connection c->out holds records, so plaintext
 * waits in the scratch buffer (or c->pout) until conn_flush seals it. */
static yard_buf_t *conn_fx_out(yard_conn_t *c, yard_scratch_t *s)
{
    if (c->secure)
        return s ? &s->out : &c->pout;
    return (c->out.len || !s) ? &c->out : &s->out;
}

yard_fx_t conn_fx(yard_conn_t *c, yard_scratch_t *s)
{
    return (yard_fx_t){.out = conn_fx_out(c, s),
                       .store = &c->store,
                       .now_ns = yard_now_ns(),
                       .wall_ns = yard_wall_ns(),
                       .peer = c->peer_addr.len ? &c->peer_addr : NULL,
                       .tls = c->secure,
                       .tls_port = c->srv->tls_port,
                       .certfp = c->certfp[0] ? c->certfp : NULL,
                       /* c->out is *out or empty; on a TLS connection it holds
                        * records the socket has not taken yet */
                       .queued = c->tx.len + (c->secure ? c->out.len : 0)};
}

/* Carry out the effects an app callback recorded; output is left for
 * conn_flush. */
void conn_apply(yard_conn_t *c, yard_fx_t *fx)
{
    if (fx->nomem)
        yard_conn_fail(c, "out of memory", YARD_CLOSE_WARN);
    if (fx->close && !c->closing) {
        c->closing = true;
        c->close_reason = fx->close_reason;
    }
    if (c->store.len)
        conn_store(c);
    if (fx->hold_input)
        c->in_held = true;
    if (fx->pause_input)
        c->in_paused = true;
    if (fx->bounds_set) {
        c->out_hold = fx->out_hold;
        c->out_max = fx->out_max;
    }
    if (fx->wake_at) {
        c->wake_at = fx->wake_at == UINT64_MAX ? 0 : fx->wake_at;
        c->wake_idle = fx->wake_idle;
    }
    if (c->closing)
        c->wake_at = 0; /* nothing left to wake up for */
    if (fx->watch_set && !c->failed && !c->shared) {
        if (!c->watch && fx->watch_bus) {
            c->watch = malloc(sizeof *c->watch);
            int err = c->watch ? yard_watch_open(c->watch, fx->watch_bus) : -ENOMEM;
            if (err < 0) {
                free(c->watch);
                c->watch = NULL;
                yard_log_err("%s: news watch: %s", c->peer, strerror(-err));
                yard_conn_fail(c, "no descriptor for the news watch", YARD_CLOSE_WARN);
            }
        }
        if (c->watch)
            yard_watch_set(c->watch, fx->watch_topic, fx->watch_bus ? fx->watch_seen : UINT64_MAX);
    }
    if (fx->job) {
        if (c->job_pending)
            yard_fatal("app %s offloaded a second job before the first finished",
                       c->srv->app->name);
        c->job_pending = true;
        c->job = (yard_job_t){.fn = fx->job, .arg = fx->job_arg, .owner = c, .lane = fx->job_lane};
        c->job_access = fx->access_obj;
        c->job_access_mode = fx->access_mode;
    }
}

static void conn_job_done(yard_conn_t *c, yard_scratch_t *s)
{
    if (c->tls_job) {
        conn_tls_job_done(c, s);
        return;
    }
    c->job_pending = false;
    c->job_access = NULL;
    if (c->failed)
        return; /* closed meanwhile: the app hears of it in app->close */
    yard_fx_t fx = conn_fx(c, s);
    APP_LOCK(c);
    c->srv->app->job_done(c->srv->app_state, c->session, c->job.arg, &fx);
    APP_UNLOCK(c);
    conn_apply(c, &fx);
    conn_reoffer(c, s);
    if (c->watch)
        yard_watch_poke(c->watch); /* news that came while the job ran */
}

/* Run job(arg) here, holding its permission under the object's
 * process-shared rwlock if it needs one. */
static void conn_run_job_here(yard_conn_t *c)
{
    if (c->job_access) {
        pthread_rwlock_t *lock = &c->job_access->lock;
        if (c->job_access_mode == YARD_ACCESS_FULL)
            pthread_rwlock_wrlock(lock);
        else
            pthread_rwlock_rdlock(lock);
        c->job.fn(c->job.arg);
        pthread_rwlock_unlock(lock);
    } else {
        c->job.fn(c->job.arg);
    }
}

/* Is the pending job the model's to run (a pool, a permission task)? */
static bool conn_job_for_model(const yard_conn_t *c)
{
    return c->job_access ? c->policy->perm_tasks : c->policy->job_pool;
}

/* Run the jobs that belong on this thread: every job under a blocking
 * model or without a pool, permission jobs unless the model grants
 * permissions itself. */
void conn_settle(yard_conn_t *c, yard_scratch_t *s)
{
    while (c->job_pending && !c->failed && !conn_job_for_model(c)) {
        conn_run_job_here(c);
        conn_job_done(c, s);
    }
}

void yard_conn_run_job(yard_conn_t *c, yard_scratch_t *s)
{
    conn_run_job_here(c);
    yard_conn_on_job_done(c, s);
}

void yard_conn_on_job_done(yard_conn_t *c, yard_scratch_t *s)
{
    conn_job_done(c, s);
    conn_settle(c, s);
    conn_flush(c, s);
}

/* An app callback of the (state, session, fx) kind (open, timer, news) and
 * everything after it: its effects, input that waited, inline jobs, output. */
void conn_call(yard_conn_t *c, yard_scratch_t *s, void (*cb)(void *, void *, yard_fx_t *))
{
    yard_fx_t fx = conn_fx(c, s);
    APP_LOCK(c);
    cb(c->srv->app_state, c->session, &fx);
    APP_UNLOCK(c);
    conn_apply(c, &fx);
    conn_reoffer(c, s);
    conn_settle(c, s);
    conn_flush(c, s);
}

void yard_conn_on_timer(yard_conn_t *c, yard_scratch_t *s)
{
    if (c->tls_deadline) { /* the only deadline before the app is opened */
        conn_tls_overdue(c);
        return;
    }
    c->wake_at = 0;
    c->in_paused = false;
    if (c->failed || !c->srv->app->timer)
        return;
    conn_call(c, s, c->srv->app->timer);
}

void yard_conn_on_news(yard_conn_t *c, yard_scratch_t *s)
{
    if (!c->watch)
        return;
    yard_watch_drain(c->watch);
    yard_conn_on_news_read(c, s);
}

void yard_conn_on_news_read(yard_conn_t *c, yard_scratch_t *s)
{
    if (!c->watch)
        return;
    /* While a job runs the app is not called; the news waits (the watch
     * stays due, the job's completion pokes it, and yard_conn_next looks). */
    if (c->failed || c->closing || c->job_pending || !yard_watch_due(c->watch) ||
        !c->srv->app->news)
        return;
    conn_call(c, s, c->srv->app->news);
}

void yard_conn_on_wakeup(yard_conn_t *c, yard_scratch_t *s)
{
    if (c->failed || c->closing || c->job_pending || !c->srv->app->news)
        return;
    conn_call(c, s, c->srv->app->news);
}
