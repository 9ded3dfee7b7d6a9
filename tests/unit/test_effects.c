/* The timer and offload effects under every model, through the public model
 * API: a small line-based app served by each model in a child process, and
 * a blocking client here.
 *
 *   "T<ms>\n"  arm a timer; reply "armed\n" now and "tick\n" when it fires
 *   "J<n>\n"   offload a job computing n*n; reply "done <n*n>\n"
 *   "E<x>\n"   reply "<x>\n" at once
 * A line behind a pending timer or job waits until it is over, which
 * exercises the engine re-offering buffered input. */
#include <arpa/inet.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "yard/app.h"
#include "yard/clock.h"
#include "yard/model.h"
#include "yard/net.h"
#include "yard/server.h"

struct job {
    long n, result;
};

struct session {
    bool waiting; /* a timer or job is pending: later lines wait */
    struct job job;
};

static void square(void *arg)
{
    struct job *j = arg;
    /* Some real work, so a job takes measurable time off the loop. */
    volatile long acc = 0;
    for (long i = 0; i < 2000000; i++)
        acc += i & 1;
    j->result = j->n * j->n + (acc - acc);
}

static size_t fx_data(void *state, void *session, const uint8_t *in, size_t n, yard_fx_t *fx)
{
    struct session *s = session;
    size_t used = 0;
    while (!s->waiting) {
        const uint8_t *nl = memchr(in + used, '\n', n - used);
        if (!nl)
            break;
        size_t len = (size_t)(nl - (in + used));
        char line[64] = "";
        memcpy(line, in + used, len < 63 ? len : 63);
        used += len + 1;
        if (line[0] == 'T') {
            yard_fx_send(fx, "armed\n", 6);
            yard_fx_wake_at(fx, fx->now_ns + (uint64_t)atol(line + 1) * YARD_NS_PER_MS);
            s->waiting = true;
        } else if (line[0] == 'J') {
            s->job.n = atol(line + 1);
            yard_fx_offload(fx, square, &s->job);
            s->waiting = true;
        } else {
            yard_fx_send(fx, line + 1, strlen(line + 1));
            yard_fx_send(fx, "\n", 1);
        }
    }
    return used;
}

static void fx_timer(void *state, void *session, yard_fx_t *fx)
{
    ((struct session *)session)->waiting = false;
    yard_fx_send(fx, "tick\n", 5);
}

static void fx_job_done(void *state, void *session, void *arg, yard_fx_t *fx)
{
    struct job *j = arg;
    char msg[64];
    int len = snprintf(msg, sizeof msg, "done %ld\n", j->result);
    ((struct session *)session)->waiting = false;
    yard_fx_send(fx, msg, (size_t)len);
}

static const yard_app_t effects_app = {
    .name = "effects-test",
    .session_size = sizeof(struct session),
    .data = fx_data,
    .timer = fx_timer,
    .job_done = fx_job_done,
};

struct child {
    pid_t pid;
    int port;
};

static struct child serve_in_child(const char *model_name, bool procs, int offload_threads)
{
    int pipefd[2];
    ASSERT_EQ(pipe(pipefd), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        close(pipefd[0]);
        static yard_config_t cfg;
        char err[256];
        cfg.app = effects_app.name;
        cfg.model = model_name;
        cfg.backlog = 128;
        cfg.procs = procs;
        cfg.workers = strcmp(model_name, "reactors") == 0 || strcmp(model_name, "coro") == 0 ? 2 : 0;
        cfg.offload_threads = offload_threads;
        yard_addr_resolve("127.0.0.1:0", &cfg.listen, err, sizeof err);
        yard_server_t srv = {.cfg = &cfg, .app = &effects_app, .out_fd = -1};
        srv.model = yard_model_find(model_name);
        srv.sig_fd = yard_signals_setup(err, sizeof err);
        yard_shm_create(&srv.shm, 1 << 20);
        srv.shared = yard_shm_alloc(srv.shm, sizeof *srv.shared);
        if (!srv.model || srv.sig_fd < 0 || !srv.shm ||
            yard_server_listen(&srv, srv.model->reuseport, err, sizeof err) < 0)
            _exit(3);
        int port = yard_addr_port(&srv.bound[0]);
        if (write(pipefd[1], &port, sizeof port) != sizeof port)
            _exit(4);
        close(pipefd[1]);
        _exit(srv.model->serve(&srv));
    }
    close(pipefd[1]);
    struct child ch = {.pid = pid};
    ASSERT_EQ(read(pipefd[0], &ch.port, sizeof ch.port), (ssize_t)sizeof ch.port);
    close(pipefd[0]);
    return ch;
}

static int client(int port)
{
    char err[256], text[32];
    yard_addr_t a;
    snprintf(text, sizeof text, "127.0.0.1:%d", port);
    ASSERT_EQ(yard_addr_parse(text, &a, err, sizeof err), 0);
    const char *call = "";
    int fd = yard_connect(&a, false, &call);
    if (fd < 0) {
        yard_net_message(err, sizeof err, &a, call, fd);
        TEST_FAIL("%s", err);
    }
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* Read exactly strlen(want) bytes and compare. */
static void expect(int fd, const char *want, const char *what)
{
    size_t n = strlen(want), got = 0;
    char buf[256];
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0)
            TEST_FAIL("%s: connection ended or timed out after %zu of %zu bytes", what, got, n);
        got += (size_t)r;
    }
    buf[got] = '\0';
    if (memcmp(buf, want, n) != 0)
        TEST_FAIL("%s: got \"%s\", expected \"%s\"", what, buf, want);
}

static void stop_child(struct child ch)
{
    int status;
    ASSERT_EQ(kill(ch.pid, SIGTERM), 0);
    ASSERT_EQ(waitpid(ch.pid, &status, 0), ch.pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        TEST_FAIL("server child ended with status 0x%x", status);
}

static void check_model(const char *model, bool procs, int offload_threads)
{
    fprintf(stderr, "  model %s%s, --offload-threads %d\n", model, procs ? " --procs" : "",
            offload_threads);
    struct child ch = serve_in_child(model, procs, offload_threads);

    /* A timer fires, not before it is due. */
    int a = client(ch.port);
    uint64_t t0 = yard_now_ns();
    ASSERT_EQ(write(a, "T150\n", 5), 5);
    expect(a, "armed\n", "timer armed");
    expect(a, "tick\n", "timer fired");
    ASSERT_GE(yard_now_ns() - t0, 150 * YARD_NS_PER_MS);

    /* A job runs and its result comes back. */
    ASSERT_EQ(write(a, "J12\n", 4), 4);
    expect(a, "done 144\n", "job result");

    /* Lines pipelined behind jobs and timers wait their turn, in order. */
    const char *pipelined = "J2\nEx\nT20\nJ3\nEy\n";
    ASSERT_EQ(write(a, pipelined, strlen(pipelined)), (ssize_t)strlen(pipelined));
    expect(a, "done 4\nx\narmed\ntick\ndone 9\ny\n", "pipelined lines");

    /* Twenty connections each waiting on a 300 ms timer all get their tick:
     * the timers are served concurrently, not one after another. */
    enum { N = 20 };
    int fds[N];
    t0 = yard_now_ns();
    for (int i = 0; i < N; i++) {
        fds[i] = client(ch.port);
        ASSERT_EQ(write(fds[i], "T300\n", 5), 5);
    }
    for (int i = 0; i < N; i++) {
        expect(fds[i], "armed\ntick\n", "concurrent timers");
        close(fds[i]);
    }
    uint64_t took = yard_now_ns() - t0;
    if (took > 3 * YARD_NS_PER_S) /* 20 x 300 ms one at a time would be 6 s */
        TEST_FAIL("20 concurrent 300 ms timers took %.2f s", (double)took / 1e9);

    /* A peer that half-closes right after its request still gets the answer. */
    int h = client(ch.port);
    ASSERT_EQ(write(h, "T50\n", 4), 4);
    shutdown(h, SHUT_WR);
    expect(h, "armed\ntick\n", "timer after half-close");
    close(h);

    /* A peer that leaves while its job runs costs nothing else. */
    int gone = client(ch.port);
    ASSERT_EQ(write(gone, "J5\n", 3), 3);
    close(gone);
    ASSERT_EQ(write(a, "Estill\n", 7), 7);
    expect(a, "still\n", "after a peer left mid-job");
    close(a);
    stop_child(ch);
}

static void test_thread_and_fork(void)
{
    check_model("fork", false, 2);
    check_model("thread", false, 2);
}

static void test_event_loops_with_pool(void)
{
    check_model("epoll", false, 2);
    check_model("reactors", false, 2);
    check_model("reactors", true, 2);
}

static void test_coroutines(void)
{
    check_model("coro", false, 2);
}

static void test_event_loops_inline_jobs(void)
{
    check_model("epoll", false, 0);
    check_model("reactors", false, 0);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    static const struct test_case cases[] = {
        {"thread_and_fork", test_thread_and_fork},
        {"event_loops_with_pool", test_event_loops_with_pool},
        {"event_loops_inline_jobs", test_event_loops_inline_jobs},
        {"coroutines", test_coroutines},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
