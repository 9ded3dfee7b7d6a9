/* What the Eve runtime's tests (tests/unit/test_eve_rt*.c) share: a
 * child process started with a body, its stdout and stderr read within a
 * deadline, its end waited for; a run-time error expected of a child; and
 * the strings and reference counts the value and container tests use. */
#ifndef YARD_TESTS_EVE_RT_TEST_H
#define YARD_TESTS_EVE_RT_TEST_H

#include "eve_rt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SCALE 10
#else
#define SCALE 1
#endif

static inline uint64_t ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- children ----------------------------------------------------------------------------- */

struct child {
    pid_t pid;
    int out, err; /* the child's stdout and stderr */
};

static inline void child_start(struct child *c, void (*body)(void *), void *arg)
{
    int o[2], e[2];
    ASSERT_EQ(pipe(o), 0);
    ASSERT_EQ(pipe(e), 0);
    fflush(NULL);
    c->pid = fork();
    ASSERT(c->pid >= 0);
    if (c->pid == 0) {
        dup2(o[1], 1);
        dup2(e[1], 2);
        close(o[0]);
        close(o[1]);
        close(e[0]);
        close(e[1]);
        body(arg);
        _exit(0);
    }
    close(o[1]);
    close(e[1]);
    c->out = o[0];
    c->err = e[0];
}

/* Reads what fd gives until EOF or the deadline (ms from now); NUL-terminated. */
static inline size_t read_all(int fd, char *buf, size_t cap, int timeout_ms)
{
    size_t n = 0;
    uint64_t end = ms_now() + (uint64_t)timeout_ms;
    while (n + 1 < cap) {
        uint64_t now = ms_now();
        if (now >= end)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(end - now)) <= 0)
            continue;
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = 0;
    return n;
}

/* One line from fd (without its newline), within timeout_ms. */
static inline bool read_line(int fd, char *buf, size_t cap, int timeout_ms)
{
    size_t n = 0;
    uint64_t end = ms_now() + (uint64_t)timeout_ms;
    while (n + 1 < cap) {
        uint64_t now = ms_now();
        if (now >= end)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(end - now)) <= 0)
            continue;
        char ch;
        if (read(fd, &ch, 1) != 1)
            break;
        if (ch == '\n') {
            buf[n] = 0;
            return true;
        }
        buf[n++] = ch;
    }
    buf[n] = 0;
    return false;
}

/* What the last child waited for wrote on stderr after what the test read
 * (a sanitizer's report, say). */
static char child_err[4096];

/* The child's wait status, or -1 if it has not ended within timeout_ms
 * (then it is killed). */
static inline int child_wait(struct child *c, int timeout_ms)
{
    uint64_t end = ms_now() + (uint64_t)timeout_ms;
    int st;
    for (;;) {
        pid_t r = waitpid(c->pid, &st, WNOHANG);
        if (r == c->pid)
            break;
        if (ms_now() >= end) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &st, 0);
            st = -1;
            break;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    read_all(c->err, child_err, sizeof child_err, 1000);
    close(c->out);
    close(c->err);
    return st;
}

/* fn must end the child with a run-time error whose message is want. */
static inline void expect_fail(void (*fn)(void *), void *arg, const char *want)
{
    struct child c;
    child_start(&c, fn, arg);
    char err[2048];
    read_all(c.err, err, sizeof err, 10000);
    int st = child_wait(&c, 10000);
    ASSERT(st != -1 && WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 1);
    ASSERT_STR_EQ(err, want);
}

/* ---- strings and reference counts ------------------------------------------------------------ */

static inline eve_str_t *S(const char *s)
{
    return eve_str_from(s, strlen(s));
}

static inline long rc_of(const void *o)
{
    return atomic_load(&((eve_obj_t *)o)->rc);
}

#endif
