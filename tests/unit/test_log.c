/* The logger never blocks: a stalled output fills a bounded queue, then
 * lines are dropped and counted, and the count is reported once output
 * flows again; repeated messages are rate-limited, also across fork; a
 * forked child neither deadlocks on the logger's lock nor repeats its
 * parent's queued lines; yard_fatal gives up on a stalled output. */
#define _GNU_SOURCE /* pipe2, F_SETPIPE_SZ */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "yard/log.h"

static char out[512 * 1024];
static size_t out_len;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A pipe whose read end never blocks; small (one page) if asked. */
static void make_pipe(int p[2], bool small)
{
    ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
    ASSERT_EQ(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
    if (small)
        ASSERT_GT(fcntl(p[1], F_SETPIPE_SZ, 4096), 0);
}

/* Fill a pipe through a non-blocking description of our own. */
static void fill_pipe(int wfd)
{
    char path[40];
    snprintf(path, sizeof path, "/proc/self/fd/%d", wfd);
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT(fd >= 0);
    char junk[256];
    memset(junk, 'j', sizeof junk - 1);
    junk[sizeof junk - 1] = '\n';
    for (int i = 0; i < 100000 && write(fd, junk, sizeof junk) > 0; i++) {
    }
    ASSERT_EQ(errno, EAGAIN);
    close(fd);
}

/* Appends what the pipe holds now to out. */
static void drain(int rfd)
{
    for (;;) {
        ASSERT(out_len < sizeof out);
        ssize_t n = read(rfd, out + out_len, sizeof out - out_len);
        if (n <= 0) {
            ASSERT(n == 0 || errno == EAGAIN);
            return;
        }
        out_len += (size_t)n;
    }
}

/* Reads while the logger flushes, until it has nothing left. */
static void read_until_flushed(int rfd)
{
    int rc = -1;
    for (int i = 0; i < 100000 && rc != 0; i++) {
        drain(rfd);
        rc = yard_log_flush(0);
    }
    ASSERT_EQ(rc, 0);
    drain(rfd);
}

/* The lines in out, each without its "test_log[pid] level: " prefix. */
static int split_lines(char **lines, int max)
{
    int n = 0;
    char *save = NULL;
    ASSERT(out_len < sizeof out);
    out[out_len] = 0;
    for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (strncmp(l, "jjjj", 4) == 0)
            continue; /* fill_pipe's junk */
        ASSERT(strncmp(l, "test_log[", 9) == 0);
        char *msg = strstr(l, ": ");
        ASSERT(msg != NULL);
        ASSERT(n < max);
        lines[n++] = msg + 2;
    }
    return n;
}

static void finish(int p[2])
{
    yard_log_set_output(STDERR_FILENO);
    close(p[0]);
    close(p[1]);
    out_len = 0;
}

/* 2000 lines of about 100 bytes against a one-page pipe nobody reads:
 * the pipe and the 64 KiB queue take what they can, the rest is dropped,
 * and once the pipe is read the queued lines come out in order, then the
 * count of the dropped ones, then new lines. */
static void test_stalled_output_drops_and_counts(void)
{
    int p[2];
    make_pipe(p, true);
    yard_log_set_output(p[1]);
    ASSERT_EQ(fcntl(p[1], F_GETFL) & O_NONBLOCK, 0); /* the shared description is untouched */
    enum { N = 2000 };
    uint64_t t0 = now_ns();
    for (int i = 0; i < N; i++)
        yard_log_err("line %04d %s", i, "................................................"
                                        "..................................");
    ASSERT_LT(now_ns() - t0, 2000000000u); /* nothing waited for the reader */
    read_until_flushed(p[0]);
    yard_log_err("after");
    drain(p[0]);

    static char *lines[N + 8];
    int n = split_lines(lines, N + 8);
    int kept = 0;
    while (kept < n && strncmp(lines[kept], "line ", 5) == 0) {
        ASSERT_EQ(atoi(lines[kept] + 5), kept);
        kept++;
    }
    /* The queue alone holds 64 KiB of ~120-byte lines. */
    ASSERT_GT(kept, YARD_LOG_QUEUE_BYTES / 128);
    ASSERT_LT(kept, N);
    ASSERT_EQ(n, kept + 2);
    char want[64];
    snprintf(want, sizeof want, "%d log lines dropped", N - kept);
    ASSERT_STR_EQ(lines[kept], want);
    ASSERT_STR_EQ(lines[kept + 1], "after");
    finish(p);
}

static uint64_t fake_ns = 1000 * 1000000000ull;
static uint64_t fake_clock(void) { return fake_ns; }

static void flood(int i) { yard_log_limited(YARD_LOG_WARN, "flood %d", i); }

/* YARD_LOG_BURST lines a second per format; the rest is reported as one
 * line, at the next line of that format in a later second, at the next
 * line of any format after the second, or at a flush. */
static void test_rate_limit(void)
{
    int p[2];
    make_pipe(p, false);
    yard_log_set_output(p[1]);
    yard_log_set_clock(fake_clock);
    int i = 0;
    for (; i < 25; i++)
        flood(i); /* 0-9 out, 15 held */
    fake_ns += 1000000000u;
    for (; i < 38; i++)
        flood(i); /* report, 25-34 out, 3 held */
    fake_ns += 1000000000u;
    yard_log_err("other"); /* the second is over: report the 3 */
    for (; i < 50; i++)
        flood(i); /* 38-47 out, 2 held */
    fake_ns += 1000000000u;
    yard_log_err("later"); /* the second is over: report the 2 (a flush does not: */
    ASSERT_EQ(yard_log_flush(1000), 0); /* the counts are every process's, for exit) */
    yard_log_init(NULL, YARD_LOG_DEBUG);
    for (; i < 75; i++)
        flood(i); /* debug: all out */
    yard_log_init(NULL, YARD_LOG_INFO);
    ASSERT_EQ(yard_log_flush(1000), 0);
    drain(p[0]);
    yard_log_set_clock(NULL);

    const char *held = "similar messages like \"flood %d\"";
    char *lines[128];
    int n = split_lines(lines, 128), k = 0;
    char want[128];
    for (int j = 0; j < 10; j++) {
        snprintf(want, sizeof want, "flood %d", j);
        ASSERT_STR_EQ(lines[k++], want);
    }
    snprintf(want, sizeof want, "suppressed 15 %s", held);
    ASSERT_STR_EQ(lines[k++], want);
    for (int j = 25; j < 35; j++) {
        snprintf(want, sizeof want, "flood %d", j);
        ASSERT_STR_EQ(lines[k++], want);
    }
    snprintf(want, sizeof want, "suppressed 3 %s", held);
    ASSERT_STR_EQ(lines[k++], want);
    ASSERT_STR_EQ(lines[k++], "other");
    for (int j = 38; j < 48; j++) {
        snprintf(want, sizeof want, "flood %d", j);
        ASSERT_STR_EQ(lines[k++], want);
    }
    snprintf(want, sizeof want, "suppressed 2 %s", held);
    ASSERT_STR_EQ(lines[k++], want);
    ASSERT_STR_EQ(lines[k++], "later");
    for (int j = 50; j < 75; j++) {
        snprintf(want, sizeof want, "flood %d", j);
        ASSERT_STR_EQ(lines[k++], want);
    }
    ASSERT_EQ(n, k);
    finish(p);
}

static int wait_child(pid_t pid, int timeout_ms)
{
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;
    int status;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        ASSERT(r >= 0);
        if (r == pid)
            return status;
        if (now_ns() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            TEST_FAIL("child %ld did not finish within %d ms", (long)pid, timeout_ms);
        }
        struct timespec ms = {.tv_nsec = 1000000};
        nanosleep(&ms, NULL);
    }
}

/* Processes forked after yard_log_init share one limit. */
static void test_rate_limit_across_fork(void)
{
    int p[2];
    make_pipe(p, false);
    yard_log_set_output(p[1]);
    yard_log_set_clock(fake_clock);
    fake_ns += 10 * 1000000000ull;
    for (int c = 0; c < 3; c++) {
        pid_t pid = fork();
        ASSERT(pid >= 0);
        if (pid == 0) {
            for (int i = 0; i < 5; i++)
                yard_log_limited(YARD_LOG_WARN, "forked %d", c * 5 + i);
            _exit(yard_log_flush(1000) == 0 ? 0 : 3);
        }
        int status = wait_child(pid, 10000);
        ASSERT(WIFEXITED(status));
        ASSERT_EQ(WEXITSTATUS(status), 0);
    }
    /* The children left the counts in the shared table; the next line of
     * any process after the second reports them. */
    fake_ns += 1000000000u;
    yard_log_err("parent");
    ASSERT_EQ(yard_log_flush(1000), 0);
    yard_log_set_clock(NULL);
    drain(p[0]);
    char *lines[64];
    int n = split_lines(lines, 64);
    ASSERT_EQ(n, 12);
    char want[64];
    for (int i = 0; i < 10; i++) {
        snprintf(want, sizeof want, "forked %d", i);
        ASSERT_STR_EQ(lines[i], want);
    }
    ASSERT_STR_EQ(lines[10], "suppressed 5 similar messages like \"forked %d\"");
    ASSERT_STR_EQ(lines[11], "parent");
    finish(p);
}

/* A child starts with an empty queue: the parent's queued lines are
 * written once, by the parent. */
static void test_fork_child_does_not_repeat_parent_lines(void)
{
    int p[2];
    make_pipe(p, true);
    yard_log_set_output(p[1]);
    fill_pipe(p[1]);
    enum { N = 30 };
    for (int i = 0; i < N; i++)
        yard_log_err("parent %d", i); /* all queued: the pipe is full */
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        yard_log_err("child");
        _exit(yard_log_flush(10000) == 0 ? 0 : 3);
    }
    int status = 0;
    uint64_t deadline = now_ns() + 10000000000u;
    for (;;) {
        drain(p[0]);
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        ASSERT(now_ns() < deadline);
        struct pollfd pfd = {.fd = p[0], .events = POLLIN};
        poll(&pfd, 1, 1);
    }
    ASSERT(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
    read_until_flushed(p[0]);
    char *lines[128];
    int n = split_lines(lines, 128);
    ASSERT_EQ(n, N + 1);
    int seen[N] = {0}, child = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(lines[i], "child") == 0) {
            child++;
            continue;
        }
        ASSERT(strncmp(lines[i], "parent ", 7) == 0);
        int k = atoi(lines[i] + 7);
        ASSERT(k >= 0 && k < N);
        seen[k]++;
    }
    ASSERT_EQ(child, 1);
    for (int i = 0; i < N; i++)
        ASSERT_EQ(seen[i], 1);
    finish(p);
}

static atomic_bool spam_stop;

static void *spam(void *arg)
{
    (void)arg;
    for (long i = 0; !atomic_load(&spam_stop); i++)
        yard_log_err("spam %ld", i);
    return NULL;
}

/* fork() while another thread logs: the child must find the lock free. */
static void test_fork_while_another_thread_logs(void)
{
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    ASSERT(devnull >= 0);
    yard_log_set_output(devnull);
    atomic_store(&spam_stop, false);
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, NULL, spam, NULL), 0);
    for (int i = 0; i < 30; i++) {
        pid_t pid = fork();
        ASSERT(pid >= 0);
        if (pid == 0) {
            yard_log_err("child %d", i);
            _exit(yard_log_flush(1000) == 0 ? 0 : 3);
        }
        int status = wait_child(pid, 10000);
        ASSERT(WIFEXITED(status));
        ASSERT_EQ(WEXITSTATUS(status), 0);
    }
    atomic_store(&spam_stop, true);
    pthread_join(t, NULL);
    yard_log_set_output(STDERR_FILENO);
    close(devnull);
}

/* yard_fatal writes its line, and gives up on an output that never
 * drains instead of hanging before the abort. */
static void test_fatal(void)
{
    for (int stalled = 0; stalled < 2; stalled++) {
        int p[2];
        make_pipe(p, true);
        yard_log_set_output(p[1]);
        if (stalled)
            fill_pipe(p[1]);
        uint64_t t0 = now_ns();
        pid_t pid = fork();
        ASSERT(pid >= 0);
        if (pid == 0) {
            signal(SIGABRT, SIG_DFL);
            yard_fatal("doomed %d", stalled);
        }
        int status = wait_child(pid, 5000);
        ASSERT(WIFSIGNALED(status));
        ASSERT_EQ(WTERMSIG(status), SIGABRT);
        ASSERT_LT(now_ns() - t0, 3000000000u);
        drain(p[0]);
        out[out_len] = 0;
        char want[32];
        snprintf(want, sizeof want, "error: doomed %d\n", stalled);
        ASSERT_EQ(strstr(out, want) != NULL, !stalled);
        finish(p);
    }
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    alarm(100); /* a logger that blocks fails the test instead of hanging it */
    yard_log_init("test_log", YARD_LOG_INFO);
    static const struct test_case cases[] = {
        {"stalled_output_drops_and_counts", test_stalled_output_drops_and_counts},
        {"rate_limit", test_rate_limit},
        {"rate_limit_across_fork", test_rate_limit_across_fork},
        {"fork_child_does_not_repeat_parent_lines", test_fork_child_does_not_repeat_parent_lines},
        {"fork_while_another_thread_logs", test_fork_while_another_thread_logs},
        {"fatal", test_fatal},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
