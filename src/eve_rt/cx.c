/* The Eve runtime: task contexts, temporaries, permissions, tasks and
 * finish scopes. */
#include "rt_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- the context and its temporaries ----------------------------------------------------- */

void eve_cx_init(eve_cx_t *cx)
{
    cx->nheld = 0;
    cx->tmp = cx->tmp_inline;
    cx->ntmp = 0;
    cx->captmp = EVE_TMP_INLINE;
    cx->deferred = NULL;
    cx->fin_depth = 0;
    cx->handover = 0;
    cx->ev_origin = NULL;
    cx->ev_data = NULL;
}

void eve_cx_done(eve_cx_t *cx)
{
    eve_tmp_drain(cx, 0);
    if (cx->tmp != cx->tmp_inline) {
        free(cx->tmp);
        cx->tmp = cx->tmp_inline;
        cx->captmp = EVE_TMP_INLINE;
    }
    struct eve_deferred *d = cx->deferred;
    cx->deferred = NULL;
    if (d)
        rt_deferred_start_all(d);
}

void *eve_tmp(eve_cx_t *cx, void *owned)
{
    if (cx->ntmp == cx->captmp) {
        size_t cap = cx->captmp * 2;
        if (cx->tmp == cx->tmp_inline) {
            void **t = rt_malloc(cap * sizeof *t);
            memcpy(t, cx->tmp_inline, cx->ntmp * sizeof *t);
            cx->tmp = t;
        } else {
            cx->tmp = rt_realloc(cx->tmp, cap * sizeof *cx->tmp);
        }
        cx->captmp = cap;
    }
    cx->tmp[cx->ntmp++] = owned;
    return owned;
}

void eve_tmp_drain(eve_cx_t *cx, size_t mark)
{
    while (cx->ntmp > mark)
        eve_release(cx->tmp[--cx->ntmp]);
}

/* ---- permissions --------------------------------------------------------------------------- */

size_t rt_perms_normalize(yard_coro_perm_t *out, const yard_coro_perm_t *in, size_t n,
                          const char *pos)
{
    /* the common lists, one or two objects, without the general loop */
    if (n == 1 && in[0].obj) {
        out[0] = in[0];
        return 1;
    }
    if (n == 2 && in[0].obj && in[1].obj) {
        if (in[0].obj == in[1].obj) {
            out[0] = in[0];
            if (in[1].mode == YARD_PERM_FULL)
                out[0].mode = YARD_PERM_FULL;
            return 1;
        }
        bool swap = (uintptr_t)in[0].obj > (uintptr_t)in[1].obj;
        out[0] = in[swap];
        out[1] = in[!swap];
        return 2;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!in[i].obj)
            continue;
        size_t j = 0;
        while (j < k && out[j].obj != in[i].obj)
            j++;
        if (j < k) {
            if (in[i].mode == YARD_PERM_FULL)
                out[j].mode = YARD_PERM_FULL;
            continue;
        }
        if (k == YARD_CORO_MAX_PERMS)
            eve_fail(pos, "permissions on more than %d objects at once", YARD_CORO_MAX_PERMS);
        /* Insert in address order. */
        j = k++;
        for (; j > 0 && (uintptr_t)out[j - 1].obj > (uintptr_t)in[i].obj; j--)
            out[j] = out[j - 1];
        out[j] = in[i];
    }
    return k;
}

/* perms are normalized already: acquire them into cx. */
static void acquire_normalized(eve_cx_t *cx, const yard_coro_perm_t *perms, size_t n,
                               const char *pos)
{
    int rc = yard_coro_perms_acquire(perms, n);
    if (rc != 0)
        eve_fail(pos, "cannot acquire permissions (error %d)", rc);
    memcpy(cx->held, perms, n * sizeof *perms);
    cx->nheld = n;
}

void eve_acquire(eve_cx_t *cx, const yard_coro_perm_t *perms, size_t n, const char *pos)
{
    eve_release_held(cx); /* never wait for something while holding something else */
    if (n == 0)
        return;
    yard_coro_perm_t norm[YARD_CORO_MAX_PERMS];
    size_t k = rt_perms_normalize(norm, perms, n, pos);
    if (k)
        acquire_normalized(cx, norm, k, pos);
}

void eve_release_held(eve_cx_t *cx)
{
    if (cx->nheld) {
        yard_coro_perms_release(cx->held, cx->nheld);
        cx->nheld = 0;
    }
}

/* ---- tasks ---------------------------------------------------------------------------------- */

/* The runtime's part of a task, in front of its environment. */
struct task_rec {
    eve_task_fn fn;
    bool detached;
    size_t size; /* of the block: record and environment */
    size_t nperms;
    yard_coro_perm_t perms[YARD_CORO_MAX_PERMS];
};

#define ALIGN_UP(n, a) (((n) + (a) - 1) / (a) * (a))
#define REC_SIZE ALIGN_UP(sizeof(struct task_rec), _Alignof(max_align_t))

static struct task_rec *rec_of(void *env)
{
    return (struct task_rec *)((char *)env - REC_SIZE);
}

/* Finished tasks' blocks of up to REC_CACHE_BYTES, kept per thread for the
 * next spawns (a task is freed on whichever worker ran it; the caches only
 * move blocks around). Not under AddressSanitizer, which should see every
 * block's life. */
#define REC_CACHE_BYTES 512
#define REC_CACHE 64
#if defined(__SANITIZE_ADDRESS__)
#define REC_CACHE_ON 0
#else
#define REC_CACHE_ON 1
#endif
static _Thread_local void *rec_cache[REC_CACHE];
static _Thread_local unsigned rec_ncache;

static void *rec_alloc(size_t size)
{
    if (REC_CACHE_ON && size <= REC_CACHE_BYTES) {
        if (rec_ncache)
            return rec_cache[--rec_ncache];
        return rt_malloc(REC_CACHE_BYTES);
    }
    return rt_malloc(size);
}

static void rec_free(void *p, size_t size)
{
    if (REC_CACHE_ON && size <= REC_CACHE_BYTES && rec_ncache < REC_CACHE) {
        rec_cache[rec_ncache++] = p;
        return;
    }
    free(p);
}

void *eve_task_env(size_t env_size, eve_task_fn fn)
{
    if (env_size > SIZE_MAX - REC_SIZE)
        rt_oom();
    char *block = rec_alloc(REC_SIZE + env_size);
    struct task_rec *r = (struct task_rec *)block;
    r->size = REC_SIZE + env_size;
    r->fn = fn;
    r->detached = false;
    r->nperms = 0;
    memset(block + REC_SIZE, 0, env_size);
    return block + REC_SIZE;
}

/* The coroutine of a task: the coro runtime granted its permissions before
 * starting it (they are the cx's held set, not acquired again) and releases
 * them after this returns. */
static void task_trampoline(void *arg)
{
    struct task_rec *r = arg;
    eve_cx_t cx;
    eve_cx_init(&cx);
    memcpy(cx.held, r->perms, r->nperms * sizeof r->perms[0]);
    cx.nheld = r->nperms;
    r->fn(&cx, (char *)r + REC_SIZE);
    eve_cx_done(&cx);
    bool detached = r->detached;
    rec_free(r, r->size);
    if (detached)
        rt_live_dec();
}

/* Do two normalized (address-ordered) lists name a common object? */
static bool overlap(const yard_coro_perm_t *a, size_t na, const yard_coro_perm_t *b, size_t nb)
{
    size_t i = 0, j = 0;
    while (i < na && j < nb) {
        if (a[i].obj == b[j].obj)
            return true;
        if ((uintptr_t)a[i].obj < (uintptr_t)b[j].obj)
            i++;
        else
            j++;
    }
    return false;
}

void eve_task_spawn(eve_cx_t *cx, yard_coro_finish_t *f, void *env, const yard_coro_perm_t *perms,
                    size_t n, const char *pos)
{
    struct task_rec *r = rec_of(env);
    r->nperms = rt_perms_normalize(r->perms, perms, n, pos);
    /* a child of the innermost open finish asking for what we hold: that
     * scope's end hands our objects over (eve_finish_end) */
    if (f && cx->nheld && cx->fin_depth && overlap(r->perms, r->nperms, cx->held, cx->nheld))
        cx->handover |= cx->fin_depth <= 64 ? 1ull << (cx->fin_depth - 1) : 0;
    if (!f) {
        r->detached = true;
        rt_live_inc();
        f = &rt_detached;
    }
    int rc = yard_coro_task(f, r->perms, r->nperms, task_trampoline, r);
    if (rc != 0)
        eve_fail(pos, "cannot start a task: %s", rc == -ENOMEM ? "out of memory" : "bad permissions");
}

void eve_task_done(eve_cx_t *cx)
{
    if (cx->nheld && yard_coro_task_release_perms() == 0)
        cx->nheld = 0;
}

/* ---- finish ----------------------------------------------------------------------------------- */

void eve_finish_begin(eve_cx_t *cx, yard_coro_finish_t *f)
{
    cx->fin_depth++;
    if (cx->fin_depth <= 64)
        cx->handover &= ~(1ull << (cx->fin_depth - 1));
    yard_coro_finish_init(f);
}

/* The parent hands its objects to its subtasks: the checker lets a task
 * inside finish ask only for what its parent holds, so a child asking for
 * an object the parent holds would otherwise wait for the parent, which
 * waits for the child. So when the scope got tasks and the parent holds
 * permissions, it releases them all before waiting (its children, queued on
 * those objects, are granted them then) and takes them all back, with
 * eve_acquire's rules, once every child has finished. In between, another
 * task or callback waiting for one of these objects may run first; what
 * the parent holds is unchanged after the finish, not during it.
 *
 * Only a scope one of whose tasks asked for an object the parent holds
 * (eve_task_spawn compares the lists, by object: aliases the checker cannot
 * see are caught too) hands over; the others just wait. A child can ask
 * only for a subset of what its parent holds, so a grandchild can need the
 * grandparent's object only through a child that asked for it too. fib's
 * tasks, whose objects are their own frame's cells, so never release and
 * take back their permissions at every level. */
void eve_finish_end(eve_cx_t *cx, yard_coro_finish_t *f)
{
    unsigned d = cx->fin_depth;
    if (d)
        cx->fin_depth--;
    /* past 64 nested scopes every one hands over (the safe side) */
    bool hand = d > 64 || (d && (cx->handover >> (d - 1) & 1));
    if (f->local == 0 || cx->nheld == 0 || !hand) {
        yard_coro_finish_wait(f);
        return;
    }
    yard_coro_perm_t saved[YARD_CORO_MAX_PERMS];
    size_t n = cx->nheld;
    memcpy(saved, cx->held, n * sizeof saved[0]);
    eve_release_held(cx);
    yard_coro_finish_wait(f);
    acquire_normalized(cx, saved, n, NULL); /* cx->held was normalized */
}
