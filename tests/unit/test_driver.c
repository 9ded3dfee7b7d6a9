/* The connection driver's state machine, driven by hand over a socketpair
 * with no model at all: this test plays the model (it reads, feeds the
 * bytes, runs jobs, fires timers, signals news) and checks what
 * yard_conn_next says after every step, through every state.
 *
 * The app under test answers lines:
 *   "E<x>"  reply "<x>"            "J<n>"  offload a job, reply "job <n*n>"
 *   "P<n>"  a FULL permission job   "T"     arm a timer 200 ms ahead, "tick" on it
 *   "W"     watch topic 0 of the bus from 0, reply "news" on news
 *   "B"     queue 1 MiB of output  "Q"     reply "bye" and close */
#define _DEFAULT_SOURCE /* usleep */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test.h"
#include "yard/clock.h"
#include "yard/conn.h"

struct session {
    long n, result;
    bool waiting;
};

static yard_bus_t *bus;
static yard_access_obj_t *obj;

static void square(void *arg)
{
    struct session *s = arg;
    s->result = s->n * s->n;
}

static void reply(yard_fx_t *fx, const char *text)
{
    yard_fx_send(fx, text, strlen(text));
    yard_fx_send(fx, "\n", 1);
}

static size_t app_data(void *state, void *session, const uint8_t *in, size_t n, yard_fx_t *fx)
{
    struct session *s = session;
    size_t used = 0;
    while (!s->waiting) {
        const uint8_t *nl = memchr(in + used, '\n', n - used);
        if (!nl)
            break;
        char line[64] = "";
        size_t len = (size_t)(nl - (in + used));
        memcpy(line, in + used, len < 63 ? len : 63);
        used += len + 1;
        switch (line[0]) {
        case 'E': reply(fx, line + 1); break;
        case 'J':
        case 'P':
            s->n = atol(line + 1);
            s->waiting = true;
            if (line[0] == 'J')
                yard_fx_offload(fx, square, s);
            else
                yard_fx_access(fx, obj, YARD_ACCESS_FULL, square, s);
            break;
        case 'T':
            /* Far enough ahead that it is not due before the test looks
             * (1 ms was, under qemu on a loaded machine). */
            s->waiting = true;
            yard_fx_wake_at(fx, fx->now_ns + 200 * YARD_NS_PER_MS);
            break;
        case 'W': yard_fx_watch(fx, bus, 0, 0); break;
        case 'B': {
            uint8_t *p = yard_fx_send_reserve(fx, 1 << 20);
            memset(p, 'b', 1 << 20);
            yard_fx_send_commit(fx, 1 << 20);
            break;
        }
        case 'Q':
            reply(fx, "bye");
            yard_fx_close(fx, NULL);
            return n;
        }
    }
    return used;
}

static void app_job_done(void *state, void *session, void *arg, yard_fx_t *fx)
{
    struct session *s = session;
    char text[32];
    snprintf(text, sizeof text, "job %ld", s->result);
    s->waiting = false;
    reply(fx, text);
}

static void app_timer(void *state, void *session, yard_fx_t *fx)
{
    ((struct session *)session)->waiting = false;
    reply(fx, "tick");
}

static void app_news(void *state, void *session, yard_fx_t *fx)
{
    reply(fx, "news");
    yard_fx_watch(fx, bus, 0, yard_bus_seq(bus, 0)); /* seen everything */
}

static const yard_app_t app = {
    .name = "driver-test",
    .session_size = sizeof(struct session),
    .data = app_data,
    .timer = app_timer,
    .job_done = app_job_done,
    .news = app_news,
};

static yard_config_t cfg;
static yard_server_t srv = {.cfg = &cfg, .app = &app, .out_fd = -1};
static yard_scratch_t scratch;

/* The peer's end reads what the server sent, with a short wait. */
static size_t peer_read(int fd, char *buf, size_t cap)
{
    /* Up to a whole line, waiting for it in poll (10 s at most: a loaded
     * machine may take a while, and a missing line fails the caller). */
    size_t got = 0;
    uint64_t deadline = yard_now_ns() + 10 * YARD_NS_PER_S;
    while (got < cap - 1 && !memchr(buf, '\n', got)) {
        uint64_t now = yard_now_ns();
        if (now >= deadline)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ms = (int)((deadline - now) / YARD_NS_PER_MS) + 1;
        if (poll(&p, 1, ms) < 0 && errno != EINTR)
            break;
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        if (r > 0)
            got += (size_t)r;
        else if (r == 0 || (errno != EAGAIN && errno != EINTR))
            break;
    }
    buf[got] = '\0';
    return got;
}

/* The model's half: read what the peer sent and feed it to the driver. */
static void feed(yard_conn_t *c, int peer, const char *line)
{
    ASSERT_EQ(write(peer, line, strlen(line)), (ssize_t)strlen(line));
    uint8_t buf[256];
    ssize_t n = read(c->fd, buf, sizeof buf);
    ASSERT_GT(n, 0);
    yard_conn_on_bytes(c, &scratch, buf, (size_t)n);
}

static void expect(int peer, const char *want)
{
    char got[256];
    peer_read(peer, got, sizeof got);
    if (strcmp(got, want) != 0)
        TEST_FAIL("peer got '%s', want '%s'", got, want);
}

static yard_conn_t *open_pair(const yard_conn_policy_t *policy, int *peer)
{
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    yard_conn_t *c = yard_conn_open(&srv, sv[0], policy);
    ASSERT(c != NULL);
    *peer = sv[1];
    return c;
}

static void test_every_state(void)
{
    static const yard_conn_policy_t policy = {.job_pool = true, .perm_tasks = true};
    int peer;
    yard_conn_t *c = open_pair(&policy, &peer);

    /* Waiting for input. */
    yard_wait_t w = yard_conn_next(c, &scratch);
    ASSERT_EQ(w.next, YARD_NEXT_WAIT);
    ASSERT(w.read && !w.write && !w.news && w.deadline == 0);

    /* Bytes arrived: a reply, straight to the socket; a partial line waits. */
    feed(c, peer, "Ehello\nEpar");
    expect(peer, "hello\n");
    feed(c, peer, "tial\n");
    expect(peer, "partial\n");

    /* A job for the model's pool; input meanwhile is kept, not offered. */
    feed(c, peer, "J7\nEafter\n");
    w = yard_conn_next(c, &scratch);
    ASSERT_EQ(w.next, YARD_NEXT_JOB);
    yard_job_t *job = yard_conn_job(c);
    ASSERT(job->owner == c);
    job->fn(job->arg); /* the "pool" */
    yard_conn_on_job_done(c, &scratch);
    expect(peer, "job 49\nafter\n");

    /* A permission job for the model to grant. */
    feed(c, peer, "P3\n");
    w = yard_conn_next(c, &scratch);
    ASSERT_EQ(w.next, YARD_NEXT_PERM);
    int mode = 0;
    ASSERT(yard_conn_perm(c, &mode) == obj);
    ASSERT_EQ(mode, YARD_ACCESS_FULL);
    yard_conn_run_job(c, &scratch); /* a model without tasks after all: inline */
    expect(peer, "job 9\n");

    /* A timer: a deadline to wait for; next() runs it once it is due. */
    feed(c, peer, "T\n");
    w = yard_conn_next(c, &scratch);
    ASSERT_EQ(w.next, YARD_NEXT_WAIT);
    ASSERT(w.deadline != 0);
    while (yard_now_ns() < w.deadline)
        usleep(200);
    w = yard_conn_next(c, &scratch);
    ASSERT(w.deadline == 0);
    expect(peer, "tick\n");
    /* ...or the model fires it itself. */
    feed(c, peer, "T\n");
    yard_conn_on_timer(c, &scratch);
    expect(peer, "tick\n");

    /* News: a watch makes the eventfd part of the wait. */
    feed(c, peer, "W\n");
    w = yard_conn_next(c, &scratch); /* seq 1 > seen 0: due at once, next() runs it */
    expect(peer, "news\n");
    ASSERT(w.news && yard_conn_news_fd(c) >= 0);
    yard_bus_publish(bus, 0, 2);
    yard_conn_on_news(c, &scratch);
    expect(peer, "news\n");

    /* Backpressure: output the peer does not take stops the reading. */
    feed(c, peer, "B\n");
    w = yard_conn_next(c, &scratch);
    ASSERT(w.write && !w.read);
    size_t drained = 0;
    char buf[65536];
    for (int i = 0; i < 10000 && drained < (1u << 20); i++) {
        ssize_t r = read(peer, buf, sizeof buf);
        if (r > 0)
            drained += (size_t)r;
        int io = yard_conn_on_writable(c);
        ASSERT(io != YARD_IO_DONE);
    }
    while (drained < (1u << 20)) {
        ssize_t r = read(peer, buf, sizeof buf);
        ASSERT_GT(r, 0);
        drained += (size_t)r;
    }
    ASSERT_EQ(drained, 1u << 20);
    w = yard_conn_next(c, &scratch);
    ASSERT(w.read && !w.write);

    /* The app closes: once the reply is out, the connection is done. */
    feed(c, peer, "Q\n");
    expect(peer, "bye\n");
    ASSERT_EQ(yard_conn_next(c, &scratch).next, YARD_NEXT_CLOSE);
    yard_conn_close(c, NULL);
    char tail[8];
    ASSERT_EQ(read(peer, tail, sizeof tail), 0); /* the peer sees the close */
    close(peer);
}

/* Without a pool or tasks every job runs inline: next() never hands one out. */
static void test_inline_jobs_and_eof(void)
{
    static const yard_conn_policy_t policy = {0};
    int peer;
    yard_conn_t *c = open_pair(&policy, &peer);
    feed(c, peer, "J5\nP6\n");
    expect(peer, "job 25\njob 36\n");
    ASSERT_EQ(yard_conn_next(c, &scratch).next, YARD_NEXT_WAIT);
    /* End of input with a timer armed: not finished until it fires. */
    feed(c, peer, "T\n");
    shutdown(peer, SHUT_WR);
    ASSERT_EQ(yard_conn_read(c, &scratch), YARD_IO_OK);
    yard_wait_t w = yard_conn_next(c, &scratch);
    ASSERT_EQ(w.next, YARD_NEXT_WAIT);
    ASSERT(!w.read && w.deadline);
    yard_conn_on_timer(c, &scratch);
    expect(peer, "tick\n");
    ASSERT_EQ(yard_conn_next(c, &scratch).next, YARD_NEXT_CLOSE);
    yard_conn_close(c, NULL);
    close(peer);
}

/* Input behind a job is kept when the peer closes its side meanwhile: each
 * request after the end of input is still answered, in order. */
static void test_eof_behind_jobs(void)
{
    static const yard_conn_policy_t policy = {.job_pool = true};
    int peer;
    yard_conn_t *c = open_pair(&policy, &peer);
    const char *in = "J2\nJ3\nEend\n";
    ASSERT_EQ(write(peer, in, strlen(in)), (ssize_t)strlen(in));
    shutdown(peer, SHUT_WR);
    ASSERT_EQ(yard_conn_read(c, &scratch), YARD_IO_OK); /* the bytes: J2 is a job */
    ASSERT_EQ(yard_conn_read(c, &scratch), YARD_IO_OK); /* the end */
    for (int jobs = 0; jobs < 2; jobs++) {
        ASSERT_EQ(yard_conn_next(c, &scratch).next, YARD_NEXT_JOB);
        yard_job_t *j = yard_conn_job(c);
        j->fn(j->arg);
        yard_conn_on_job_done(c, &scratch);
    }
    expect(peer, "job 4\njob 9\nend\n");
    ASSERT_EQ(yard_conn_next(c, &scratch).next, YARD_NEXT_CLOSE);
    yard_conn_close(c, NULL);
    close(peer);
}

/* An error ends the connection at once, queued output or not. */
static void test_failure(void)
{
    static const yard_conn_policy_t policy = {0};
    int peer;
    yard_conn_t *c = open_pair(&policy, &peer);
    feed(c, peer, "B\n");
    ASSERT(yard_conn_next(c, &scratch).write);
    yard_conn_fail(c, "test", YARD_CLOSE_QUIET);
    ASSERT_EQ(yard_conn_next(c, &scratch).next, YARD_NEXT_CLOSE);
    yard_conn_close(c, NULL);
    close(peer);
}

int main(void)
{
    ASSERT_EQ(yard_shm_create(&srv.shm, 1 << 20), 0);
    ASSERT(srv.shm != NULL);
    bus = yard_bus_create(srv.shm, 1);
    obj = yard_access_obj_create(srv.shm);
    ASSERT(bus && obj);
    yard_bus_publish(bus, 0, 1);
    test_every_state();
    test_inline_jobs_and_eof();
    test_failure();
    test_eof_behind_jobs();
    yard_scratch_free(&scratch);
    yard_bus_stop_wakers();
    yard_shm_destroy(srv.shm);
    printf("driver: every state passed\n");
    return 0;
}
