/* yard-tasks on OpenMP tasks: `#pragma omp task` for each child and
 * `#pragma omp taskwait` as the join, inside `parallel` + `single` with
 * omp_set_num_threads(workers) (dynamic adjustment off, so the team has
 * exactly that many threads). GCC's libgomp with gcc, LLVM's libomp with
 * clang. time_s is the root's run inside the single region; wall_s adds
 * the parallel region's start and end (the team's threads are kept by the
 * OpenMP runtime between repetitions, so only the first pays for creating
 * them).
 *
 * Compiled without OpenMP (CMake found none for this compiler, e.g. some
 * cross builds), the runtime is listed as unavailable. */
#include "tasks.h"

#include <stdio.h>

#ifdef _OPENMP
#include <omp.h>

static int64_t ofib(int n, int cutoff, uint64_t *tasks)
{
    if (n < 2)
        return n;
    if (n <= cutoff)
        return yard_tasks_fib_seq(n);
    int64_t a = 0, b = 0;
    uint64_t ta = 0, tb = 0;
#pragma omp task shared(a, ta) firstprivate(n, cutoff)
    a = ofib(n - 1, cutoff, &ta);
#pragma omp task shared(b, tb) firstprivate(n, cutoff)
    b = ofib(n - 2, cutoff, &tb);
#pragma omp taskwait
    *tasks = 2 + ta + tb;
    return a + b;
}

static int run_openmp(const yard_tasks_params_t *p, yard_tasks_rep_t *out, char *err,
                      size_t errlen)
{
    int64_t result = 0;
    uint64_t tasks = 0;
    double t0 = 0, t1 = 0;
    int team = 0;
    double w0 = yard_tasks_now();
    omp_set_dynamic(0);
    omp_set_num_threads((int)p->workers);
#pragma omp parallel shared(result, tasks, t0, t1, team)
    {
#pragma omp single
        {
            team = omp_get_num_threads();
            t0 = yard_tasks_now();
            result = ofib(p->n, p->cutoff, &tasks);
            t1 = yard_tasks_now();
        }
    }
    out->wall_s = yard_tasks_now() - w0;
    if (team != (int)p->workers) {
        snprintf(err, errlen, "OpenMP gave a team of %d threads, not %u", team, p->workers);
        return -1;
    }
    out->result = result;
    out->tasks = tasks;
    out->time_s = t1 - t0;
    out->steals = -1;
    out->inline_fallbacks = 0;
    out->stacks_mapped = -1;
    out->inlined = -1;
    return 0;
}

#define OPENMP_RUN run_openmp
#define OPENMP_UNAVAILABLE NULL
#else
static const char *openmp_missing(void)
{
#ifdef YARD_TASKS_OPENMP_MISSING
    return "not built: " YARD_TASKS_OPENMP_MISSING;
#else
    return "not built: this compiler was not given OpenMP";
#endif
}

static int run_openmp(const yard_tasks_params_t *p, yard_tasks_rep_t *out, char *err,
                      size_t errlen)
{
    (void)p;
    (void)out;
    snprintf(err, errlen, "%s", openmp_missing());
    return -1;
}

#define OPENMP_RUN run_openmp
#define OPENMP_UNAVAILABLE openmp_missing
#endif

const yard_tasks_runtime_t yard_tasks_rt_openmp = {
    .name = "openmp",
    .summary = "OpenMP tasks (#pragma omp task / taskwait in parallel + single)",
    .unavailable = OPENMP_UNAVAILABLE,
    .run = OPENMP_RUN,
};
