/* Linux-only: sched_getaffinity. What a port uses instead: docs/portability.md. */
/* Probes around the measurement: CPU pinning, SCHED_FIFO, the kernel's own
 * switch counts (/proc), and hardware counters (perf_event_open). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cswitch.h"

#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int yard_cswitch_pin(int cpu, char *err, size_t errlen)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        snprintf(err, errlen, "sched_setaffinity(cpu %d): %s", cpu, strerror(errno));
        return -1;
    }
    return 0;
}

int yard_cswitch_default_cpu(char *allowed, size_t len)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return -1;
    int first = -1;
    size_t used = 0;
    if (len)
        allowed[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &set))
            continue;
        if (first < 0)
            first = c;
        int end = c;
        while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, &set))
            end++;
        if (used < len) {
            const char *sep = used ? "," : "";
            int w = end > c ? snprintf(allowed + used, len - used, "%s%d-%d", sep, c, end)
                            : snprintf(allowed + used, len - used, "%s%d", sep, c);
            if (w > 0)
                used += (size_t)w;
        }
        c = end;
    }
    return first;
}

bool yard_cswitch_cpu_allowed(int cpu)
{
    cpu_set_t set;
    if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof(set), &set) != 0)
        return false;
    return CPU_ISSET(cpu, &set);
}

int yard_cswitch_sched_fifo(char *err, size_t errlen)
{
    struct sched_param sp = {.sched_priority = sched_get_priority_max(SCHED_FIFO)};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) {
        snprintf(err, errlen, "sched_setscheduler(SCHED_FIFO, %d): %s", sp.sched_priority,
                 strerror(errno));
        return -1;
    }
    return sp.sched_priority;
}

int yard_cswitch_read_ctxsw(pid_t pid, pid_t tid, yard_cswitch_ctxsw_t *out)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int found = 0;
    while (fgets(line, sizeof(line), f)) {
        uint64_t v;
        if (sscanf(line, "voluntary_ctxt_switches: %" SCNu64, &v) == 1) {
            out->voluntary = v;
            found |= 1;
        } else if (sscanf(line, "nonvoluntary_ctxt_switches: %" SCNu64, &v) == 1) {
            out->involuntary = v;
            found |= 2;
        }
    }
    fclose(f);
    return found == 3 ? 0 : -1;
}

/* ------------------------------------------------------------------------ */
/* hardware counters                                                         */

const char *const yard_cswitch_ev_names[YARD_CSWITCH_NEV] = {
    "instructions", "cycles", "l1d_misses", "l1i_misses", "dtlb_misses", "itlb_misses",
};

static uint64_t cache_config(uint64_t cache, uint64_t op, uint64_t result)
{
    return cache | (op << 8) | (result << 16);
}

static void event_attr(int ev, struct perf_event_attr *a)
{
    memset(a, 0, sizeof(*a));
    a->size = sizeof(*a);
    a->type = PERF_TYPE_HW_CACHE;
    switch (ev) {
    case YARD_CSWITCH_EV_INSTRUCTIONS:
        a->type = PERF_TYPE_HARDWARE;
        a->config = PERF_COUNT_HW_INSTRUCTIONS;
        break;
    case YARD_CSWITCH_EV_CYCLES:
        a->type = PERF_TYPE_HARDWARE;
        a->config = PERF_COUNT_HW_CPU_CYCLES;
        break;
    case YARD_CSWITCH_EV_L1D_MISS:
        a->config = cache_config(PERF_COUNT_HW_CACHE_L1D, PERF_COUNT_HW_CACHE_OP_READ,
                                 PERF_COUNT_HW_CACHE_RESULT_MISS);
        break;
    case YARD_CSWITCH_EV_L1I_MISS:
        a->config = cache_config(PERF_COUNT_HW_CACHE_L1I, PERF_COUNT_HW_CACHE_OP_READ,
                                 PERF_COUNT_HW_CACHE_RESULT_MISS);
        break;
    case YARD_CSWITCH_EV_DTLB_MISS:
        a->config = cache_config(PERF_COUNT_HW_CACHE_DTLB, PERF_COUNT_HW_CACHE_OP_READ,
                                 PERF_COUNT_HW_CACHE_RESULT_MISS);
        break;
    case YARD_CSWITCH_EV_ITLB_MISS:
        a->config = cache_config(PERF_COUNT_HW_CACHE_ITLB, PERF_COUNT_HW_CACHE_OP_READ,
                                 PERF_COUNT_HW_CACHE_RESULT_MISS);
        break;
    }
    a->disabled = 1;
    /* Each event is its own counter (not a group): a CPU with few counters
     * then multiplexes them instead of refusing the whole set; the values
     * are scaled by enabled/running time. */
    a->read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
}

static int perf_open_one(struct perf_event_attr *a, pid_t tid)
{
    int fd = (int)syscall(SYS_perf_event_open, a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0 && (errno == EACCES || errno == EPERM) && !a->exclude_kernel) {
        /* perf_event_paranoid forbids kernel counting: count user space only
         * (the switch itself then goes uncounted; documented). */
        a->exclude_kernel = 1;
        a->exclude_hv = 1;
        fd = (int)syscall(SYS_perf_event_open, a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    }
    return fd;
}

int yard_cswitch_perf_open(yard_cswitch_perf_t *p, pid_t tid, char *why, size_t len)
{
    p->nopen = 0;
    for (int i = 0; i < YARD_CSWITCH_NEV; i++)
        p->fd[i] = -1;
    for (int i = 0; i < YARD_CSWITCH_NEV; i++) {
        struct perf_event_attr a;
        event_attr(i, &a);
        p->fd[i] = perf_open_one(&a, tid);
        if (p->fd[i] < 0 && i == YARD_CSWITCH_EV_INSTRUCTIONS) {
            /* Without instructions there is nothing to normalise by. */
            snprintf(why, len, "perf_event_open(instructions): %s", strerror(errno));
            return -1;
        }
        if (p->fd[i] >= 0)
            p->nopen++;
    }
    return 0;
}

void yard_cswitch_perf_close(yard_cswitch_perf_t *p)
{
    for (int i = 0; i < YARD_CSWITCH_NEV; i++) {
        if (p->fd[i] >= 0)
            close(p->fd[i]);
        p->fd[i] = -1;
    }
    p->nopen = 0;
}

void yard_cswitch_perf_start(yard_cswitch_perf_t *p)
{
    for (int i = 0; i < YARD_CSWITCH_NEV; i++) {
        if (p->fd[i] >= 0) {
            ioctl(p->fd[i], PERF_EVENT_IOC_RESET, 0);
            ioctl(p->fd[i], PERF_EVENT_IOC_ENABLE, 0);
        }
    }
}

void yard_cswitch_perf_stop(yard_cswitch_perf_t *p)
{
    for (int i = 0; i < YARD_CSWITCH_NEV; i++)
        if (p->fd[i] >= 0)
            ioctl(p->fd[i], PERF_EVENT_IOC_DISABLE, 0);
}

void yard_cswitch_perf_accumulate(yard_cswitch_perf_t *p, yard_cswitch_counts_t *acc)
{
    for (int i = 0; i < YARD_CSWITCH_NEV; i++) {
        uint64_t buf[3]; /* value, time enabled, time running */
        if (p->fd[i] < 0 || read(p->fd[i], buf, sizeof(buf)) != (ssize_t)sizeof(buf))
            continue;
        if (buf[2] == 0) /* never scheduled on a counter: no estimate */
            continue;
        acc->v[i] += (double)buf[0] * ((double)buf[1] / (double)buf[2]);
        acc->have[i] = true;
    }
}
