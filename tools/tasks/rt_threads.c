/* yard-tasks' naive baseline: a kernel thread (pthread) per task down to
 * the cutoff; the parent joins both of its children. `workers` is recorded
 * but bounds nothing: the kernel runs as many threads as the tree has live.
 *
 * When pthread_create fails (EAGAIN: the thread limit, vm.max_map_count or
 * memory), that subtree is computed inline by the caller and counted as an
 * inline fallback: the program never fails or hangs for lack of threads.
 * Under ThreadSanitizer, whose runtime dies when a few thousand threads are
 * alive at once, live threads are also capped (TSAN_LIVE_CAP), the excess
 * counted the same way. */
#include "tasks.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#if defined(__SANITIZE_THREAD__)
#define TASKS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TASKS_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(TASKS_TSAN)
#define TASKS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TASKS_SANITIZED 1
#endif
#endif

#ifdef TASKS_SANITIZED
#define THREAD_STACK (1024u * 1024u) /* instrumented frames are larger */
#else
#define THREAD_STACK (128u * 1024u) /* the subtree below the cutoff recurses at most 92 deep */
#endif

#ifdef TASKS_TSAN
#include <stdatomic.h>
#define TSAN_LIVE_CAP 2000
static atomic_int g_live;
#endif

struct tjob {
    int n;
    int cutoff;
    int64_t result;
    uint64_t tasks, fallbacks;
};

static pthread_attr_t g_attr;

static void tfib(struct tjob *j);

static void *tfib_thread(void *arg)
{
    tfib(arg);
    return NULL;
}

static bool start(pthread_t *t, struct tjob *j)
{
#ifdef TASKS_TSAN
    if (atomic_fetch_add(&g_live, 1) >= TSAN_LIVE_CAP) {
        atomic_fetch_sub(&g_live, 1);
        return false;
    }
#endif
    if (pthread_create(t, &g_attr, tfib_thread, j) == 0)
        return true;
#ifdef TASKS_TSAN
    atomic_fetch_sub(&g_live, 1);
#endif
    return false;
}

static void join(pthread_t t)
{
    pthread_join(t, NULL);
#ifdef TASKS_TSAN
    atomic_fetch_sub(&g_live, 1);
#endif
}

static void tfib(struct tjob *j)
{
    int n = j->n;
    if (n < 2) {
        j->result = n;
        return;
    }
    if (n <= j->cutoff) {
        j->result = yard_tasks_fib_seq(n);
        return;
    }
    struct tjob a = {.n = n - 1, .cutoff = j->cutoff};
    struct tjob b = {.n = n - 2, .cutoff = j->cutoff};
    pthread_t ta, tb;
    bool ha = start(&ta, &a);
    bool hb = start(&tb, &b);
    /* Both threads are started before either failed one runs inline. */
    if (!ha)
        tfib(&a);
    if (!hb)
        tfib(&b);
    if (ha)
        join(ta);
    if (hb)
        join(tb);
    j->result = a.result + b.result;
    j->tasks = 2 + a.tasks + b.tasks;
    j->fallbacks = (uint64_t)!ha + (uint64_t)!hb + a.fallbacks + b.fallbacks;
}

static int run_threads(const yard_tasks_params_t *p, yard_tasks_rep_t *out, char *err,
                       size_t errlen)
{
    int rc = pthread_attr_init(&g_attr);
    if (rc == 0)
        rc = pthread_attr_setstacksize(&g_attr, THREAD_STACK);
    if (rc != 0) {
        snprintf(err, errlen, "pthread attributes: %s", strerror(rc));
        return -1;
    }
    struct tjob root = {.n = p->n, .cutoff = p->cutoff};
    double t0 = yard_tasks_now();
    tfib(&root); /* the root runs on the calling thread */
    double t1 = yard_tasks_now();
    pthread_attr_destroy(&g_attr);
    out->result = root.result;
    out->tasks = root.tasks;
    out->inline_fallbacks = root.fallbacks;
    out->time_s = out->wall_s = t1 - t0;
    out->steals = -1;
    out->stacks_mapped = -1;
    out->inlined = -1;
    return 0;
}

const yard_tasks_runtime_t yard_tasks_rt_threads = {
    .name = "threads",
    .summary = "a kernel thread (pthread) per task down to the cutoff; --workers does not bound it",
    .run = run_threads,
};
