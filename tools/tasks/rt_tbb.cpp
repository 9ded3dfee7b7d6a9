// yard-tasks on oneTBB: each child is a tbb::task_group::run of its parent's
// group, the join is task_group::wait. Runs in a tbb::task_arena of
// `workers` slots (the calling thread takes one), under a
// tbb::global_control capping TBB's parallelism at `workers`, both made
// afresh for every repetition: wall_s includes them, time_s is the root's
// run inside arena.execute. TBB keeps its worker threads between
// repetitions. Built only when CMake finds TBB (find_package(TBB)) and a C++
// compiler matching the C one; otherwise main.c lists it as unavailable.
#include "tasks.h"

#include <tbb/global_control.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include <cstdio>

namespace {

int64_t tbb_fib(int n, int cutoff, uint64_t *tasks)
{
    if (n < 2)
        return n;
    if (n <= cutoff)
        return yard_tasks_fib_seq(n);
    int64_t a = 0, b = 0;
    uint64_t ta = 0, tb = 0;
    tbb::task_group g;
    g.run([&a, &ta, n, cutoff] { a = tbb_fib(n - 1, cutoff, &ta); });
    g.run([&b, &tb, n, cutoff] { b = tbb_fib(n - 2, cutoff, &tb); });
    g.wait();
    *tasks = 2 + ta + tb;
    return a + b;
}

int run_tbb(const yard_tasks_params_t *p, yard_tasks_rep_t *out, char *err, size_t errlen)
{
    int64_t result = 0;
    uint64_t tasks = 0;
    double t0 = 0, t1 = 0;
    int concurrency = 0;
    double w0 = yard_tasks_now();
    {
        tbb::global_control limit(tbb::global_control::max_allowed_parallelism, p->workers);
        tbb::task_arena arena(static_cast<int>(p->workers));
        arena.execute([&] {
            concurrency = tbb::this_task_arena::max_concurrency();
            t0 = yard_tasks_now();
            result = tbb_fib(p->n, p->cutoff, &tasks);
            t1 = yard_tasks_now();
        });
    }
    out->wall_s = yard_tasks_now() - w0;
    if (concurrency != static_cast<int>(p->workers)) {
        std::snprintf(err, errlen, "TBB's arena has a concurrency of %d, not %u", concurrency,
                      p->workers);
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

} // namespace

extern "C" const yard_tasks_runtime_t yard_tasks_rt_tbb = {
    "tbb",
    "oneTBB tbb::task_group (run / wait) in a task_arena of W slots",
    nullptr,
    run_tbb,
};
