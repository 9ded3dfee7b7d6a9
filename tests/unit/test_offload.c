/* The offload pool (src/core/offload.c), shared by the event loops and the
 * coroutine runtime: jobs come back through a completion queue or a
 * complete() hook, the I/O lane runs while every CPU thread or the scan
 * lane is busy, a pool
 * without CPU threads still has its I/O lane, and destroy finishes what was
 * submitted. */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "test.h"
#include "yard/offload.h"

#define WAIT_MS 10000

struct counted {
    yard_job_t job;
    atomic_int *runs;
    int id;
};

static void count_run(void *arg)
{
    struct counted *j = arg;
    atomic_fetch_add(j->runs, 1);
}

/* Takes completions until want jobs came back (or WAIT_MS passed). */
static int take_all(yard_completions_t *q, int want, bool *seen, int n)
{
    int got = 0;
    while (got < want) {
        struct pollfd pfd = {.fd = q->efd, .events = POLLIN};
        if (poll(&pfd, 1, WAIT_MS) <= 0)
            break;
        for (yard_job_t *job = yard_completions_take(q); job; job = job->next) {
            struct counted *j = (struct counted *)job;
            ASSERT(j->id >= 0 && j->id < n);
            ASSERT(!seen[j->id]); /* each job comes back once */
            seen[j->id] = true;
            got++;
        }
    }
    return got;
}

/* n counted jobs into the pool, every io_every-th on the I/O lane, each
 * returning through q. */
static void submit_counted(yard_pool_t *pool, struct counted *jobs, int n, int io_every,
                           yard_completions_t *q, atomic_int *runs)
{
    for (int i = 0; i < n; i++) {
        jobs[i] = (struct counted){
            .job = {.fn = count_run, .arg = &jobs[i], .lane = i % io_every == 0 ? YARD_LANE_IO : YARD_LANE_CPU, .done = q},
            .runs = runs,
            .id = i};
        yard_pool_submit(pool, &jobs[i].job);
    }
}

static void test_completion_queue(void)
{
    enum { N = 200 };
    yard_completions_t q;
    ASSERT_EQ(yard_completions_init(&q), 0);
    yard_pool_t *pool = yard_pool_create(3);
    ASSERT(pool);
    atomic_int runs = 0;
    static struct counted jobs[N];
    bool seen[N] = {0};
    submit_counted(pool, jobs, N, 4, &q, &runs);
    ASSERT_EQ(take_all(&q, N, seen, N), N);
    ASSERT_EQ(atomic_load(&runs), N);
    yard_pool_destroy(pool);
    yard_completions_fini(&q);
}

/* A hook instead of a queue: what the coroutine runtime uses. */
struct hooked {
    yard_job_t job;
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    int *completed;
    bool ran;
};

static void hooked_run(void *arg) { ((struct hooked *)arg)->ran = true; }

static void hooked_complete(yard_job_t *job)
{
    struct hooked *h = (struct hooked *)job;
    ASSERT(h->ran); /* fn first, then the hook */
    pthread_mutex_lock(h->mu);
    (*h->completed)++;
    pthread_cond_broadcast(h->cv);
    pthread_mutex_unlock(h->mu);
}

static void wait_count(pthread_mutex_t *mu, pthread_cond_t *cv, int *count, int want)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_MS / 1000;
    pthread_mutex_lock(mu);
    while (*count < want)
        if (pthread_cond_timedwait(cv, mu, &until) != 0)
            break;
    int got = *count;
    pthread_mutex_unlock(mu);
    ASSERT_EQ(got, want);
}

static void test_complete_hook(void)
{
    enum { N = 50 };
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    int completed = 0;
    yard_pool_t *pool = yard_pool_create(2);
    ASSERT(pool);
    static struct hooked jobs[N];
    for (int i = 0; i < N; i++) {
        jobs[i] = (struct hooked){.job = {.fn = hooked_run, .arg = &jobs[i], .lane = i % 2 == 0 ? YARD_LANE_IO : YARD_LANE_CPU,
                                          .complete = hooked_complete},
                                  .mu = &mu,
                                  .cv = &cv,
                                  .completed = &completed};
        yard_pool_submit(pool, &jobs[i].job);
    }
    wait_count(&mu, &cv, &completed, N);
    yard_pool_destroy(pool);
}

/* A CPU job that holds its thread until released. */
struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
    int entered;
};

static void gated_run(void *arg)
{
    struct gate *g = arg;
    pthread_mutex_lock(&g->mu);
    g->entered++;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

/* Two jobs on lane held (one running on its only thread, one queued behind
 * it), then an I/O job: it comes back while both are still held, and they
 * come back once let go. */
static void io_job_passes_held_jobs(int lane)
{
    struct gate g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    yard_completions_t q;
    ASSERT_EQ(yard_completions_init(&q), 0);
    yard_pool_t *pool = yard_pool_create(1);
    ASSERT(pool);
    yard_job_t held[2];
    for (int i = 0; i < 2; i++) {
        held[i] = (yard_job_t){.fn = gated_run, .arg = &g, .lane = lane, .done = &q};
        yard_pool_submit(pool, &held[i]);
    }
    pthread_mutex_lock(&g.mu);
    while (g.entered < 1)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    atomic_int runs = 0;
    struct counted io = {.job = {.fn = count_run, .arg = &io, .lane = YARD_LANE_IO, .done = &q},
                         .runs = &runs,
                         .id = 0};
    yard_pool_submit(pool, &io.job);
    struct pollfd pfd = {.fd = q.efd, .events = POLLIN};
    ASSERT_EQ(poll(&pfd, 1, WAIT_MS), 1);
    yard_job_t *back = yard_completions_take(&q);
    ASSERT(back == &io.job && back->next == NULL);
    ASSERT_EQ(atomic_load(&runs), 1);
    pthread_mutex_lock(&g.mu);
    ASSERT_EQ(g.entered, 1); /* the second held job still waits for the first */
    g.open = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    bool seen[2] = {0};
    int got = 0;
    while (got < 2) {
        ASSERT_EQ(poll(&pfd, 1, WAIT_MS), 1);
        for (yard_job_t *job = yard_completions_take(&q); job; job = job->next) {
            ASSERT(job == &held[0] || job == &held[1]);
            seen[job - held] = true;
            got++;
        }
    }
    ASSERT(seen[0] && seen[1]);
    yard_pool_destroy(pool);
    yard_completions_fini(&q);
}

/* Long CPU jobs (bcrypt) never hold up a disk write. */
static void test_io_lane_not_behind_cpu_jobs(void) { io_job_passes_held_jobs(YARD_LANE_CPU); }

/* A long read on the scan lane (a history lookup) never holds up the I/O
 * lane's short writes. */
static void test_io_lane_not_behind_scan_jobs(void) { io_job_passes_held_jobs(YARD_LANE_SCAN); }

static void test_no_cpu_threads_io_lane_runs(void)
{
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    int completed = 0;
    yard_pool_t *pool = yard_pool_create(0);
    ASSERT(pool);
    struct hooked h = {.job = {.fn = hooked_run, .arg = &h, .lane = YARD_LANE_IO,
                               .complete = hooked_complete},
                       .mu = &mu,
                       .cv = &cv,
                       .completed = &completed};
    yard_pool_submit(pool, &h.job);
    wait_count(&mu, &cv, &completed, 1);
    yard_pool_destroy(pool);
}

static void test_destroy_finishes_submitted(void)
{
    enum { N = 300 };
    yard_completions_t q;
    ASSERT_EQ(yard_completions_init(&q), 0);
    yard_pool_t *pool = yard_pool_create(2);
    ASSERT(pool);
    atomic_int runs = 0;
    static struct counted jobs[N];
    submit_counted(pool, jobs, N, 3, &q, &runs);
    yard_pool_destroy(pool); /* at once: most jobs are still queued */
    ASSERT_EQ(atomic_load(&runs), N);
    int back = 0;
    for (yard_job_t *job = yard_completions_take(&q); job; job = job->next)
        back++;
    ASSERT_EQ(back, N);
    yard_completions_fini(&q);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"completion_queue", test_completion_queue},
        {"complete_hook", test_complete_hook},
        {"io_lane_not_behind_cpu_jobs", test_io_lane_not_behind_cpu_jobs},
        {"io_lane_not_behind_scan_jobs", test_io_lane_not_behind_scan_jobs},
        {"no_cpu_threads_io_lane_runs", test_no_cpu_threads_io_lane_runs},
        {"destroy_finishes_submitted", test_destroy_finishes_submitted},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
