/* The Eve runtime library (src/eve_rt, eve_rt.h): whole programs run by
 * eve_main in a forked child, written as the code generator writes them:
 * a TCP echo and a counter, a listener's error, timers, signals,
 * emitters, and eve_main's own errors. */
#define _DEFAULT_SOURCE /* kill, setenv */

#include "eve_rt_test.h"

/* ---- whole programs ------------------------------------------------------------------------------ */

/* What generated code looks like: literals, envs, callbacks, eve_on. */
static eve_str_t lit_listening = EVE_STR_LIT("listening ", 10);
static eve_str_t lit_default_addr = EVE_STR_LIT("127.0.0.1:0", 11);

static void write_line_cb(eve_cx_t *cx, void *env, eve_val_t payload)
{
    (void)env;
    size_t mark = cx->ntmp;
    eve_str_t *line = eve_tmp(cx, eve_str_concat(&lit_listening, payload.p));
    eve_stream_write_line(eve_stdout, line);
    eve_tmp_drain(cx, mark);
}

static void error_cb(eve_cx_t *cx, void *env, eve_val_t payload)
{
    (void)cx;
    (void)env;
    static eve_str_t prefix = EVE_STR_LIT("error: ", 7);
    eve_str_t *line = eve_str_concat(&prefix, payload.p);
    eve_stream_write_line(eve_stderr, line);
    eve_release(line);
    eve_exit(1);
}

struct client_env {
    eve_socket_t *client;
};

static void client_env_free(void *env)
{
    struct client_env *e = env;
    eve_release(e->client);
    free(e);
}

static void *perm_of(void *obj)
{
    return &((eve_obj_t *)obj)->perm;
}

static void echo_data(eve_cx_t *cx, void *env, eve_val_t payload)
{
    struct client_env *e = env;
    eve_rbuf_t *in = payload.p;
    eve_wbuf_t *out = eve_wbuf_new();
    eve_wbuf_append(out, in->bytes, in->len);
    eve_socket_write(cx, e->client, out->bytes, out->len);
    eve_release(out);
}

static void echo_connection(eve_cx_t *cx, void *env, eve_val_t payload)
{
    (void)env;
    eve_socket_t *client = payload.p;
    struct client_env *e = malloc(sizeof *e);
    eve_retain(client);
    e->client = client;
    eve_cb_t cb = {.fn = echo_data, .env = e, .env_free = client_env_free, .pos = "echo.eve:14:9",
                   .nperms = 1};
    cb.perms[0] = (yard_coro_perm_t){perm_of(client), YARD_PERM_FULL};
    eve_on(cx, client, EVE_EV_DATA, &cb);
}

static void listen_with(eve_cx_t *cx, eve_cb_fn on_connection)
{
    eve_str_t *addr = eve_vec_size(eve_args) > 1 ? eve_vec_get(eve_args, 1, NULL).p
                                                 : &lit_default_addr;
    eve_listener_t *l = eve_tcp_listen(cx, addr);
    eve_on(cx, l, EVE_EV_LISTENING, &(eve_cb_t){.fn = write_line_cb, .pos = "l.eve:2:5"});
    eve_on(cx, l, EVE_EV_CONNECTION, &(eve_cb_t){.fn = on_connection, .pos = "l.eve:4:5"});
    eve_on(cx, l, EVE_EV_ERROR, &(eve_cb_t){.fn = error_cb, .pos = "l.eve:6:5"});
    eve_release(l);
}

static void echo_top(eve_cx_t *cx)
{
    listen_with(cx, echo_connection);
}

struct prog {
    void (*top)(eve_cx_t *cx);
    const char *arg1;
    bool plain_exit; /* end with exit() (leak checks run), not _exit */
};

static void run_prog(void *arg)
{
    struct prog *p = arg;
    char *argv[3] = {"prog", (char *)p->arg1, NULL};
    setenv("YARD_EVE_WORKERS", "2", 1);
    int rc = eve_main(p->arg1 ? 2 : 1, argv, "prog", p->top);
    if (p->plain_exit)
        exit(rc);
    _exit(rc);
}

/* "listening 127.0.0.1:PORT" from the child: the port. */
static int listening_port(struct child *c)
{
    char line[256];
    ASSERT(read_line(c->out, line, sizeof line, 10000));
    ASSERT(strncmp(line, "listening 127.0.0.1:", 20) == 0);
    int port = atoi(line + 20);
    ASSERT(port > 0 && port < 65536);
    return port;
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void read_exact(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r <= 0)
            TEST_FAIL("read: %zd after %zu of %zu bytes (%s)", r, got, n, strerror(errno));
        got += (size_t)r;
    }
}

static void write_exact(int fd, const void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, (const char *)buf + done, n - done);
        ASSERT(w > 0);
        done += (size_t)w;
    }
}

static void terminate(struct child *c)
{
    kill(c->pid, SIGTERM);
    int st = child_wait(c, 2000);
    ASSERT(st != -1);
    ASSERT(WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 0);
    ASSERT_STR_EQ(child_err, "");
}

static void test_tcp_echo(void)
{
    struct prog p = {echo_top, NULL, false};
    struct child c;
    child_start(&c, run_prog, &p);
    int port = listening_port(&c);
    int fds[4];
    for (int i = 0; i < 4; i++)
        fds[i] = connect_to(port);
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < 4; i++) {
            char msg[64], back[64];
            int n = snprintf(msg, sizeof msg, "client %d round %d", i, round);
            write_exact(fds[i], msg, (size_t)n);
            read_exact(fds[i], back, (size_t)n);
            ASSERT_MEM_EQ(msg, back, (size_t)n);
        }
    }
    /* Larger than a read buffer: comes back whole, in order. */
    size_t big = 300 * 1024;
    unsigned char *out = malloc(big), *in = malloc(big);
    for (size_t i = 0; i < big; i++)
        out[i] = (unsigned char)(i * 131 + 7);
    write_exact(fds[0], out, big);
    read_exact(fds[0], in, big);
    ASSERT_MEM_EQ(out, in, big);
    free(out);
    free(in);
    /* A client that leaves does not disturb the others. */
    close(fds[1]);
    write_exact(fds[2], "still", 5);
    char back[5];
    read_exact(fds[2], back, 5);
    ASSERT_MEM_EQ(back, "still", 5);
    for (int i = 0; i < 4; i++)
        if (i != 1)
            close(fds[i]);
    terminate(&c);
}

/* counter.eve by hand: count is a shared int (a box), the data callback
 * holds [+client, +count]; each request byte runs a task inside finish
 * holding [+count, +reply] (or [count, +reply]), so the callback hands its
 * permission on count over to the task and takes it back. Byte 2 closes. */
static eve_box_t *count_box;

struct count_task_env {
    eve_wbuf_t *reply;
    bool increment;
};

static void put_be64(eve_wbuf_t *out, int64_t v)
{
    for (int shift = 56; shift >= 0; shift -= 8)
        eve_wbuf_append_byte(out, eve_shr(v, shift) & 0xff);
}

static void count_task(eve_cx_t *cx, void *env)
{
    (void)cx;
    struct count_task_env *e = env;
    if (e->increment)
        count_box->v.i += 1;
    put_be64(e->reply, count_box->v.i);
    eve_release(e->reply);
}

static void counter_data(eve_cx_t *cx, void *env, eve_val_t payload)
{
    struct client_env *ce = env;
    eve_rbuf_t *in = payload.p;
    ASSERT_EQ(cx->nheld, 2);
    for (int64_t i = 0; i < eve_rbuf_size(in); i++) {
        uint8_t b = eve_rbuf_at(in, i, "counter.eve:30:13");
        eve_wbuf_t *reply = eve_wbuf_new();
        if (b == 0 || b == 1) {
            yard_coro_finish_t f;
            eve_finish_begin(cx, &f);
            struct count_task_env *te = eve_task_env(sizeof *te, count_task);
            eve_retain(reply);
            te->reply = reply;
            te->increment = b == 1;
            yard_coro_perm_t p[2] = {{perm_of(count_box), b ? YARD_PERM_FULL : YARD_PERM_READ},
                                     {perm_of(reply), YARD_PERM_FULL}};
            eve_task_spawn(cx, &f, te, p, 2, "counter.eve:34:21");
            eve_finish_end(cx, &f);
        } else {
            eve_socket_close(cx, ce->client);
            eve_release(reply);
            break;
        }
        eve_socket_write(cx, ce->client, reply->bytes, reply->len);
        eve_release(reply);
    }
}

static void counter_connection(eve_cx_t *cx, void *env, eve_val_t payload)
{
    (void)env;
    eve_socket_t *client = payload.p;
    struct client_env *e = malloc(sizeof *e);
    eve_retain(client);
    e->client = client;
    eve_cb_t cb = {.fn = counter_data, .env = e, .env_free = client_env_free,
                   .pos = "counter.eve:29:9", .nperms = 2};
    cb.perms[0] = (yard_coro_perm_t){perm_of(client), YARD_PERM_FULL};
    cb.perms[1] = (yard_coro_perm_t){perm_of(count_box), YARD_PERM_FULL};
    eve_on(cx, client, EVE_EV_DATA, &cb);
}

static void counter_top(eve_cx_t *cx)
{
    count_box = eve_box_new(false);
    listen_with(cx, counter_connection);
}

static int64_t be64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | b[i];
    return (int64_t)v;
}

static void test_tcp_counter(void)
{
    struct prog p = {counter_top, NULL, false};
    struct child c;
    child_start(&c, run_prog, &p);
    int port = listening_port(&c);
    enum { CLIENTS = 4, BATCH = 50 };
    int rounds = 20 / SCALE + 1;
    int fds[CLIENTS];
    for (int i = 0; i < CLIENTS; i++)
        fds[i] = connect_to(port);
    int64_t last[CLIENTS] = {0};
    for (int r = 0; r < rounds; r++) {
        unsigned char req[BATCH];
        memset(req, 1, sizeof req);
        for (int i = 0; i < CLIENTS; i++)
            write_exact(fds[i], req, sizeof req);
        for (int i = 0; i < CLIENTS; i++) {
            unsigned char rep[BATCH * 8];
            read_exact(fds[i], rep, sizeof rep);
            for (int k = 0; k < BATCH; k++) {
                int64_t v = be64(rep + 8 * k);
                ASSERT_GT(v, last[i]); /* each client's replies increase */
                last[i] = v;
            }
        }
    }
    unsigned char zero = 0, rep[8];
    write_exact(fds[0], &zero, 1);
    read_exact(fds[0], rep, 8);
    ASSERT_EQ(be64(rep), (int64_t)CLIENTS * BATCH * rounds);
    /* Byte 2: the server closes this connection. */
    unsigned char two = 2;
    write_exact(fds[1], &two, 1);
    char x;
    ASSERT_EQ(read(fds[1], &x, 1), 0);
    for (int i = 0; i < CLIENTS; i++)
        close(fds[i]);
    terminate(&c);
}

/* A listener that cannot listen: its error callback gets the reason. */
static void test_listen_error(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ASSERT_EQ(listen(fd, 1), 0);
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ntohs(a.sin_port));
    struct prog p = {echo_top, addr, false};
    struct child c;
    child_start(&c, run_prog, &p);
    char err[512], want[600];
    read_all(c.err, err, sizeof err, 10000);
    snprintf(want, sizeof want, "error: cannot listen on %s: Address already in use\n", addr);
    ASSERT_STR_EQ(err, want);
    int st = child_wait(&c, 5000);
    ASSERT(st != -1 && WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 1);
    close(fd);

    p.arg1 = "[zz]:80";
    child_start(&c, run_prog, &p);
    read_all(c.err, err, sizeof err, 10000);
    ASSERT(strncmp(err, "error: cannot listen on [zz]:80: ", 33) == 0);
    st = child_wait(&c, 5000);
    ASSERT(st != -1 && WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 1);
}

/* Timers: a periodic one stopped from its own tick after 5 ticks, a
 * one-shot; then nothing keeps the program alive and it ends with 0. The
 * top level sleeps before it ends: no tick may come before. */
static atomic_int top_done;
static int ticks; /* under the timer's... only its own callbacks touch it */

static void say(const char *s)
{
    eve_stream_write(eve_stdout, s, strlen(s));
}

static void periodic_tick(eve_cx_t *cx, void *env, eve_val_t payload)
{
    (void)payload;
    eve_timer_t *t = env;
    if (!atomic_load(&top_done))
        say("tick before the top level ended\n");
    if (++ticks == 5) {
        eve_timer_stop(cx, t);
        say("periodic done\n");
    }
}

static void once_tick(eve_cx_t *cx, void *env, eve_val_t payload)
{
    (void)cx;
    (void)env;
    (void)payload;
    say("once\n");
}

static void release_env(void *env)
{
    eve_release(env);
}

static void timer_top(eve_cx_t *cx)
{
    eve_timer_t *t = eve_timer_new(), *o = eve_timer_new();
    /* The callback refers to the timer it stops (a weak reference here, so
     * that the timer and its callback do not keep each other). */
    eve_on(cx, t, EVE_EV_TICK, &(eve_cb_t){.fn = periodic_tick, .env = t, .pos = "t.eve:1:1"});
    eve_on(cx, o, EVE_EV_TICK, &(eve_cb_t){.fn = once_tick, .pos = "t.eve:2:1"});
    eve_timer_start(cx, t, 5, "t.eve:3:1");
    eve_timer_once(cx, o, 1, "t.eve:4:1");
    eve_timer_once(cx, o, 30, "t.eve:5:1"); /* replaces the first */
    yard_coro_sleep_ns(40 * 1000000ull);
    atomic_store(&top_done, 1);
    eve_release(t); /* the running timers hold their own references */
    eve_release(o);
    (void)release_env;
}

static void test_timer(void)
{
    struct prog p = {timer_top, NULL, true};
    struct child c;
    child_start(&c, run_prog, &p);
    char out[512];
    read_all(c.out, out, sizeof out, 10000);
    int st = child_wait(&c, 5000);
    ASSERT(st != -1 && WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 0);
    ASSERT_STR_EQ(child_err, "");
    /* The order of the two timers' lines is not fixed. */
    ASSERT(strstr(out, "periodic done\n") != NULL);
    ASSERT(strstr(out, "once\n") != NULL);
    ASSERT_EQ(strlen(out), strlen("periodic done\nonce\n"));
}

static void fail_timer(void *arg)
{
    (void)arg;
    eve_timer_start(NULL, eve_timer_new(), 0, "t.eve:9:9");
}

/* Signals: hangup and terminate callbacks; a timer keeps it alive. */
static void on_hangup(eve_cx_t *cx, void *env, eve_val_t payload)
{
    (void)cx;
    (void)env;
    (void)payload;
    say("hangup\n");
}

static void on_terminate(eve_cx_t *cx, void *env, eve_val_t payload)
{
    (void)cx;
    (void)env;
    (void)payload;
    say("terminating\n");
    eve_exit(3);
}

static void nothing_tick(eve_cx_t *cx, void *env, eve_val_t payload)
{
    (void)cx;
    (void)env;
    (void)payload;
}

static void signal_top(eve_cx_t *cx)
{
    eve_on(cx, eve_signals, EVE_EV_HANGUP, &(eve_cb_t){.fn = on_hangup, .pos = "s.eve:1:1"});
    eve_on(cx, eve_signals, EVE_EV_TERMINATE, &(eve_cb_t){.fn = on_terminate, .pos = "s.eve:2:1"});
    eve_timer_t *t = eve_timer_new();
    eve_on(cx, t, EVE_EV_TICK, &(eve_cb_t){.fn = nothing_tick, .pos = "s.eve:3:1"});
    eve_timer_start(cx, t, 1000, "s.eve:4:1");
    eve_release(t);
    say("ready\n");
}

static void test_signals(void)
{
    struct prog p = {signal_top, NULL, false};
    struct child c;
    child_start(&c, run_prog, &p);
    char line[128];
    ASSERT(read_line(c.out, line, sizeof line, 10000));
    ASSERT_STR_EQ(line, "ready");
    kill(c.pid, SIGHUP);
    ASSERT(read_line(c.out, line, sizeof line, 10000));
    ASSERT_STR_EQ(line, "hangup");
    kill(c.pid, SIGINT);
    ASSERT(read_line(c.out, line, sizeof line, 10000));
    ASSERT_STR_EQ(line, "terminating");
    int st = child_wait(&c, 2000);
    ASSERT(st != -1 && WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 3);
    ASSERT_STR_EQ(child_err, "");

    /* No terminate callback: SIGTERM ends it with 0 (SIGHUP ignored). */
    struct prog q = {echo_top, NULL, false};
    child_start(&c, run_prog, &q);
    listening_port(&c);
    kill(c.pid, SIGHUP);
    terminate(&c);
}

/* Emitters: each callback a detached task holding its permissions; the
 * program lives until they have run. */
static eve_box_t *emit_total;

static void on_emit(eve_cx_t *cx, void *env, eve_val_t payload)
{
    (void)env;
    ASSERT_EQ(cx->nheld, 1);
    eve_str_t *s = payload.p;
    emit_total->v.i += (int64_t)s->len;
}

static void on_emit_last(eve_cx_t *cx, void *env, eve_val_t payload)
{
    (void)env;
    (void)payload;
    (void)cx;
    /* Runs after the top level: by then every emit has happened. */
    yard_coro_sleep_ns(20 * 1000000ull);
}

static void emit_top(eve_cx_t *cx)
{
    emit_total = eve_box_new(false);
    eve_emitter_t *e = eve_emitter_new(EVE_K_STR);
    eve_cb_t cb = {.fn = on_emit, .pos = "e.eve:1:1", .nperms = 1};
    cb.perms[0] = (yard_coro_perm_t){perm_of(emit_total), YARD_PERM_FULL};
    eve_on(cx, e, EVE_EV_EMIT, &cb);
    eve_on(cx, e, EVE_EV_EMIT, &cb);
    eve_on(cx, e, EVE_EV_EMIT, &(eve_cb_t){.fn = on_emit_last, .pos = "e.eve:2:1"});
    for (int i = 0; i < 100; i++) {
        eve_str_t *s = eve_str_of_int(i); /* 10 of 1 digit, 90 of 2 */
        eve_emit(cx, e, (eve_val_t){.p = s});
        eve_release(s);
    }
    eve_release(e);
}

static void emit_main(eve_cx_t *cx)
{
    emit_top(cx);
}

static void emit_prog(void *arg)
{
    (void)arg;
    char *argv[2] = {"emit", NULL};
    int rc = eve_main(1, argv, "emit", emit_main);
    /* Every task ran before eve_main returned. */
    if (emit_total->v.i != 2 * (10 + 180))
        _exit(10);
    eve_release(emit_total);
    exit(rc);
}

static void test_emitter(void)
{
    struct child c;
    child_start(&c, emit_prog, NULL);
    char err[512];
    read_all(c.err, err, sizeof err, 10000);
    int st = child_wait(&c, 10000);
    ASSERT_STR_EQ(err, "");
    ASSERT(st != -1 && WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 0);
}

static void bad_workers(void *arg)
{
    (void)arg;
    setenv("YARD_EVE_WORKERS", "many", 1);
    char *argv[2] = {"w", NULL};
    _exit(eve_main(1, argv, "w", echo_top));
}

static void test_misc_errors(void)
{
    expect_fail(fail_timer, NULL,
                "t.eve:9:9: run-time error: timer.start(0): the interval must be 1 ms or more\n");
    struct child c;
    child_start(&c, bad_workers, NULL);
    char err[512];
    read_all(c.err, err, sizeof err, 10000);
    int st = child_wait(&c, 5000);
    ASSERT(st != -1 && WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 2);
    ASSERT_STR_EQ(err, "w: YARD_EVE_WORKERS='many': expected a number of workers from 1 to 1024\n");
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"tcp_echo", test_tcp_echo},
        {"tcp_counter", test_tcp_counter},
        {"listen_error", test_listen_error},
        {"timer", test_timer},
        {"signals", test_signals},
        {"emitter", test_emitter},
        {"misc_errors", test_misc_errors},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
