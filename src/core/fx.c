/* The effects an app records; the connection driver (src/core/conn_effects.c)
 * carries them out. */
#include <string.h>

#include "yard/access.h"
#include "yard/app.h"
#include "yard/offload.h"

int yard_fx_send(yard_fx_t *fx, const void *p, size_t n)
{
    if (yard_buf_append(fx->out, p, n) < 0) {
        fx->nomem = true;
        return -1;
    }
    return 0;
}

uint8_t *yard_fx_send_reserve(yard_fx_t *fx, size_t n)
{
    uint8_t *p = yard_buf_reserve(fx->out, n);
    if (!p)
        fx->nomem = true;
    return p;
}

void yard_fx_send_commit(yard_fx_t *fx, size_t n) { yard_buf_commit(fx->out, n); }

void yard_fx_close(yard_fx_t *fx, const char *reason)
{
    fx->close = true;
    if (reason && !fx->close_reason)
        fx->close_reason = reason;
}

int yard_fx_store(yard_fx_t *fx, const void *p, size_t n)
{
    if (yard_buf_append(fx->store, p, n) < 0) {
        fx->nomem = true;
        return -1;
    }
    return 0;
}

void yard_fx_wake_at(yard_fx_t *fx, uint64_t deadline_ns)
{
    fx->wake_at = deadline_ns ? deadline_ns : UINT64_MAX;
    fx->wake_idle = false;
}

void yard_fx_wake_idle(yard_fx_t *fx, uint64_t deadline_ns)
{
    yard_fx_wake_at(fx, deadline_ns);
    fx->wake_idle = true;
}

void yard_fx_out_bounds(yard_fx_t *fx, size_t hold, size_t max)
{
    fx->bounds_set = true;
    fx->out_hold = hold;
    fx->out_max = max;
}

void yard_fx_hold_input(yard_fx_t *fx) { fx->hold_input = true; }

void yard_fx_pause_input(yard_fx_t *fx) { fx->pause_input = true; }

void yard_fx_offload(yard_fx_t *fx, void (*job)(void *arg), void *arg)
{
    fx->job = job;
    fx->job_arg = arg;
}

void yard_fx_io(yard_fx_t *fx, void (*job)(void *arg), void *arg)
{
    yard_fx_offload(fx, job, arg);
    fx->job_lane = YARD_LANE_IO;
}

void yard_fx_scan(yard_fx_t *fx, void (*job)(void *arg), void *arg)
{
    yard_fx_offload(fx, job, arg);
    fx->job_lane = YARD_LANE_SCAN;
}

void yard_fx_access(yard_fx_t *fx, yard_access_obj_t *obj, int mode, void (*fn)(void *arg),
                    void *arg)
{
    yard_fx_offload(fx, fn, arg);
    fx->access_obj = obj;
    fx->access_mode = mode;
}

void yard_fx_watch(yard_fx_t *fx, yard_bus_t *bus, uint32_t topic, uint64_t seen)
{
    fx->watch_set = true;
    fx->watch_bus = bus;
    fx->watch_topic = topic;
    fx->watch_seen = seen;
}

yard_access_obj_t *yard_access_obj_create(yard_shm_t *shm)
{
    yard_access_obj_t *obj = yard_shm_alloc(shm, sizeof *obj); /* zeroed */
    pthread_rwlockattr_t attr;
    if (!obj || pthread_rwlockattr_init(&attr) != 0)
        return NULL;
    /* Shared with forked processes (fork, reactors --procs). */
    pthread_rwlockattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    int rc = pthread_rwlock_init(&obj->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    return rc == 0 ? obj : NULL;
}
