/* counter: the Eve study's shared atomic counter. The count lives in the
 * shared region, so it is exact under the process models too.
 *
 * Two ways to keep it, chosen with --counter-sync:
 *  atomic  each request is one atomic instruction (the default);
 *  perms   each request is a task holding a permission on the count, as in
 *          Eve: a read holds a read permission ([x]) and sees a plain
 *          variable, an increment holds a full one ([+x]) and updates it
 *          without any atomic. The engine schedules the tasks: Eve-style
 *          permission tasks under --model coro, a process-shared rwlock
 *          under the other models. */
#include <stdatomic.h>
#include <stdio.h>

#include "apps.h"
#include "yard/proto_counter.h"

#define BAD_BYTE_REASON "counter: unknown request byte (expected 0x00 read or 0x01 increment)"

struct counter_state {
    _Atomic uint64_t value;  /* --counter-sync atomic */
    uint64_t plain;          /* --counter-sync perms: guarded by the permission */
    yard_access_obj_t *obj;  /* --counter-sync perms */
    bool perms;
};

enum counter_sync { SYNC_ATOMIC, SYNC_PERMS };

struct counter_settings {
    int sync; /* enum counter_sync */
};

static const yard_opt_choice_t counter_syncs[] = {
    YARD_OPT_CHOICE("atomic", SYNC_ATOMIC), YARD_OPT_CHOICE("perms", SYNC_PERMS),
    YARD_OPT_CHOICES_END};

static const yard_opt_t counter_opts[] = {
    {.name = "counter-sync", .form = "MODE", .type = YARD_OPT_ENUM,
     YARD_OPT_FIELD(struct counter_settings, sync), .choices = counter_syncs, .def = "atomic",
     .help = "'atomic' updates the count with an atomic instruction; 'perms' runs each read as a "
             "task holding a read permission and each increment holding a full one (Eve-style "
             "tasks under --model coro, a process-shared rwlock otherwise)"},
    YARD_OPT_END,
};

struct counter_session {
    struct counter_state *st;
    uint8_t op;
    uint64_t result;
};

static int counter_init(void **state, const yard_config_t *cfg, const void *settings,
                        yard_shm_t *shm, char *err, size_t errlen)
{
    const struct counter_settings *set = settings;
    struct counter_state *st = yard_shm_alloc(shm, sizeof *st);
    if (!st) {
        snprintf(err, errlen, "counter: shared region exhausted");
        return -1;
    }
    st->perms = set->sync == SYNC_PERMS;
    if (st->perms && !(st->obj = yard_access_obj_create(shm))) {
        snprintf(err, errlen, "counter: cannot create the shared object (region exhausted)");
        return -1;
    }
    *state = st;
    return 0;
}

/* Runs holding the permission the request asked for. */
static void counter_task(void *arg)
{
    struct counter_session *s = arg;
    if (s->op == YARD_COUNTER_INCR)
        s->st->plain++;
    s->result = s->st->plain;
}

static size_t counter_data_perms(struct counter_state *st, struct counter_session *s,
                                 const uint8_t *in, size_t n, yard_fx_t *fx)
{
    /* One request at a time: the next waits in the buffer until this one's
     * task has run and job_done has answered it. */
    if (yard_counter_decode(in[0]) == YARD_COUNTER_BAD) {
        yard_fx_close(fx, BAD_BYTE_REASON);
        return n;
    }
    s->st = st;
    s->op = in[0];
    yard_fx_access(fx, st->obj, s->op == YARD_COUNTER_INCR ? YARD_ACCESS_FULL : YARD_ACCESS_READ,
                   counter_task, s);
    return 1;
}

static void counter_job_done(void *state, void *session, void *arg, yard_fx_t *fx)
{
    struct counter_session *s = session;
    uint8_t *out = yard_fx_send_reserve(fx, YARD_COUNTER_REPLY_LEN);
    if (out) {
        yard_counter_encode(s->result, out);
        yard_fx_send_commit(fx, YARD_COUNTER_REPLY_LEN);
    }
}

static size_t counter_data(void *state, void *session, const uint8_t *in, size_t n,
                           yard_fx_t *fx)
{
    struct counter_state *st = state;
    if (n == 0)
        return 0;
    if (st->perms)
        return counter_data_perms(st, session, in, n, fx);
    size_t valid = yard_counter_valid_prefix(in, n);
    uint8_t *out = yard_fx_send_reserve(fx, valid * YARD_COUNTER_REPLY_LEN);
    if (!out)
        return n;
    for (size_t i = 0; i < valid; i++) {
        uint64_t v = in[i] == YARD_COUNTER_INCR
                         ? atomic_fetch_add_explicit(&st->value, 1, memory_order_relaxed) + 1
                         : atomic_load_explicit(&st->value, memory_order_relaxed);
        yard_counter_encode(v, out + i * YARD_COUNTER_REPLY_LEN);
    }
    yard_fx_send_commit(fx, valid * YARD_COUNTER_REPLY_LEN);
    if (valid < n) {
        /* Requests before the bad byte are answered; the rest is dropped. */
        yard_fx_close(fx, BAD_BYTE_REASON);
    }
    return n;
}

const yard_app_t yard_app_counter = {
    .name = "counter",
    .summary = "shared counter: 0x00 reads, 0x01 increments, 8-byte big-endian replies",
    .session_size = sizeof(struct counter_session),
    .opts = counter_opts,
    .settings_size = sizeof(struct counter_settings),
    .init = counter_init,
    .data = counter_data,
    .job_done = counter_job_done,
};
