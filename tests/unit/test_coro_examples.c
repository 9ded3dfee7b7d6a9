/* Eve-style tasks with access permissions on the coroutine runtime: the
 * permission scheduler's guarantees, and the Eve paper's two examples
 * (Fibonacci, broadcast chat) written in C. docs/coro.md quotes these. */
#include "yard/coro.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static void run(unsigned workers, void (*fn)(void *), void *arg)
{
    yard_coro_opts_t o = {.workers = workers};
    ASSERT_EQ(yard_coro_run(&o, fn, arg), 0);
}

/* ------------------------------------------------------------------------ */
/* readers overlap, a FULL holder is alone                                   */

static yard_coro_obj_t shared;
static atomic_int readers_in, writers_in, max_readers, violations;
static atomic_int reads_done, writes_done;

static void reader(void *arg)
{
    (void)arg;
    int r = atomic_fetch_add(&readers_in, 1) + 1;
    if (atomic_load(&writers_in) != 0)
        atomic_fetch_add(&violations, 1);
    int m = atomic_load(&max_readers);
    while (r > m && !atomic_compare_exchange_weak(&max_readers, &m, r))
        ;
    yard_coro_sleep_ns(1000000); /* stay inside so others can join */
    if (atomic_load(&writers_in) != 0)
        atomic_fetch_add(&violations, 1);
    atomic_fetch_sub(&readers_in, 1);
    atomic_fetch_add(&reads_done, 1);
}

static void writer(void *arg)
{
    (void)arg;
    if (atomic_fetch_add(&writers_in, 1) != 0 || atomic_load(&readers_in) != 0)
        atomic_fetch_add(&violations, 1);
    yard_coro_yield();
    yard_coro_sleep_ns(200000);
    if (atomic_load(&writers_in) != 1 || atomic_load(&readers_in) != 0)
        atomic_fetch_add(&violations, 1);
    atomic_fetch_sub(&writers_in, 1);
    atomic_fetch_add(&writes_done, 1);
}

static void perm_main(void *arg)
{
    (void)arg;
    yard_coro_finish_t fin;
    yard_coro_finish_init(&fin);
    yard_coro_perm_t rd = {&shared, YARD_PERM_READ}, wr = {&shared, YARD_PERM_FULL};
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < 8; i++)
            ASSERT_EQ(yard_coro_task(&fin, &rd, 1, reader, NULL), 0);
        for (int i = 0; i < 2; i++)
            ASSERT_EQ(yard_coro_task(&fin, &wr, 1, writer, NULL), 0);
    }
    yard_coro_finish_wait(&fin);
    ASSERT_EQ(atomic_load(&reads_done), 80);
    ASSERT_EQ(atomic_load(&writes_done), 20);
}

static void test_permissions(void)
{
    run(2, perm_main, NULL);
    ASSERT_EQ(atomic_load(&violations), 0);
    ASSERT_GE(atomic_load(&max_readers), 2); /* readers did run together */
    ASSERT_EQ(shared.readers, 0);
    ASSERT_EQ(shared.full, 0);
}

/* Transfers between accounts, each task FULL on both accounts it touches and
 * READ on the bank's rules. Balances are plain longs: only the permission
 * scheduler keeps them race-free (ThreadSanitizer checks that). */
#define ACCOUNTS 8
static struct {
    yard_coro_obj_t obj;
    long balance;
} account[ACCOUNTS];
static yard_coro_obj_t rules;
static long fee = 1;

struct transfer {
    int from, to;
};

static void do_transfer(void *arg)
{
    struct transfer *t = arg;
    long amount = 10 + fee; /* fee is read under a READ permission */
    account[t->from].balance -= amount;
    if (t->from % 3 == 0)
        yard_coro_yield(); /* hold the permissions across a switch */
    account[t->to].balance += amount;
}

static void bank_main(void *arg)
{
    (void)arg;
    static struct transfer tr[400];
    yard_coro_finish_t fin;
    yard_coro_finish_init(&fin);
    for (int i = 0; i < 400; i++) {
        tr[i] = (struct transfer){i % ACCOUNTS, (i * 5 + 3) % ACCOUNTS};
        if (tr[i].to == tr[i].from)
            tr[i].to = (tr[i].to + 1) % ACCOUNTS;
        yard_coro_perm_t p[3] = {{&account[tr[i].from].obj, YARD_PERM_FULL},
                                 {&account[tr[i].to].obj, YARD_PERM_FULL},
                                 {&rules, YARD_PERM_READ}};
        ASSERT_EQ(yard_coro_task(&fin, p, 3, do_transfer, &tr[i]), 0);
    }
    yard_coro_finish_wait(&fin);
    long total = 0;
    for (int i = 0; i < ACCOUNTS; i++)
        total += account[i].balance;
    ASSERT_EQ(total, 0);
    /* Duplicate objects and bad modes are refused. */
    yard_coro_perm_t dup[2] = {{&rules, YARD_PERM_READ}, {&rules, YARD_PERM_FULL}};
    ASSERT_EQ(yard_coro_task(&fin, dup, 2, do_transfer, NULL), -EINVAL);
    yard_coro_perm_t bad = {&rules, (enum yard_coro_perm_mode)7};
    ASSERT_EQ(yard_coro_task(&fin, &bad, 1, do_transfer, NULL), -EINVAL);
}

static void test_transfers(void)
{
    for (int i = 0; i < ACCOUNTS; i++)
        account[i].balance = 0;
    run(2, bank_main, NULL);
}

/* ------------------------------------------------------------------------ */
/* Eve's Fibonacci: each call is a task with a full permission on its result,
 * spawning its two sub-calls inside a finish scope. */

struct fib {
    int n;
    long result;
    yard_coro_obj_t obj;
};

static void fib_task(void *arg)
{
    struct fib *f = arg;
    if (f->n < 2) {
        f->result = f->n;
        return;
    }
    struct fib a = {.n = f->n - 1}, b = {.n = f->n - 2};
    yard_coro_finish_t fin;
    yard_coro_finish_init(&fin);
    yard_coro_task(&fin, &(yard_coro_perm_t){&a.obj, YARD_PERM_FULL}, 1, fib_task, &a);
    yard_coro_task(&fin, &(yard_coro_perm_t){&b.obj, YARD_PERM_FULL}, 1, fib_task, &b);
    yard_coro_finish_wait(&fin);
    f->result = a.result + b.result;
}

static void fib_main(void *arg)
{
    struct fib *top = arg;
    yard_coro_finish_t fin;
    yard_coro_finish_init(&fin);
    ASSERT_EQ(yard_coro_task(&fin, &(yard_coro_perm_t){&top->obj, YARD_PERM_FULL}, 1, fib_task,
                             top),
              0);
    yard_coro_finish_wait(&fin);
}

static long fib_seq(int n)
{
    long a = 0, b = 1;
    for (int i = 0; i < n; i++) {
        long t = a + b;
        a = b;
        b = t;
    }
    return a;
}

static void test_fibonacci(void)
{
    struct fib top = {.n = SANITIZED ? 14 : 20};
    run(2, fib_main, &top);
    ASSERT_EQ(top.result, fib_seq(top.n));
}

/* ------------------------------------------------------------------------ */
/* Eve's broadcast chat: a room (read by broadcasts, written by joins and
 * leaves) and clients (each written by one task at a time, so lines from
 * different senders never interleave on one connection). The clients are
 * the far ends of socketpairs, driven by coroutines of the test. */

#define CHAT_CLIENTS 4
#define MSG_LEN 16

struct client {
    int fd; /* server side */
    yard_coro_obj_t obj;
};

static struct {
    yard_coro_obj_t obj;
    struct client *members[CHAT_CLIENTS];
    int n;
} room;

struct deliver {
    struct client *to;
    char msg[MSG_LEN];
};

static void deliver_task(void *arg) /* [+client] */
{
    struct deliver *d = arg;
    ASSERT_EQ(yard_coro_write(d->to->fd, d->msg, MSG_LEN, 0), MSG_LEN);
}

struct broadcast {
    struct client *from;
    char msg[MSG_LEN];
    struct deliver out[CHAT_CLIENTS];
};

static void broadcast_task(void *arg) /* [room] */
{
    struct broadcast *b = arg;
    yard_coro_finish_t fin;
    yard_coro_finish_init(&fin);
    for (int i = 0; i < room.n; i++) {
        struct client *c = room.members[i];
        if (c == b->from)
            continue;
        b->out[i].to = c;
        memcpy(b->out[i].msg, b->msg, MSG_LEN);
        yard_coro_task(&fin, &(yard_coro_perm_t){&c->obj, YARD_PERM_FULL}, 1, deliver_task,
                       &b->out[i]);
    }
    yard_coro_finish_wait(&fin);
}

static void join_task(void *arg) /* [+room] */
{
    room.members[room.n++] = arg;
}

static void leave_task(void *arg) /* [+room] */
{
    for (int i = 0; i < room.n; i++) {
        if (room.members[i] == arg) {
            room.members[i] = room.members[--room.n];
            break;
        }
    }
}

/* The server side of one connection: one coroutine reading messages. */
static void session(void *arg)
{
    struct client *c = arg;
    for (;;) {
        struct broadcast b = {.from = c};
        size_t have = 0;
        while (have < MSG_LEN) {
            ssize_t n = yard_coro_read(c->fd, b.msg + have, MSG_LEN - have, 0);
            if (n <= 0)
                goto gone;
            have += (size_t)n;
        }
        yard_coro_finish_t fin;
        yard_coro_finish_init(&fin);
        yard_coro_task(&fin, &(yard_coro_perm_t){&room.obj, YARD_PERM_READ}, 1, broadcast_task,
                       &b);
        yard_coro_finish_wait(&fin);
    }
gone:;
    yard_coro_finish_t fin;
    yard_coro_finish_init(&fin);
    yard_coro_task(&fin, &(yard_coro_perm_t){&room.obj, YARD_PERM_FULL}, 1, leave_task, c);
    yard_coro_finish_wait(&fin);
    yard_coro_close(c->fd);
}

static int peer_fd[CHAT_CLIENTS];
static atomic_int chat_received[CHAT_CLIENTS];
static atomic_int chat_joined;

/* A chat user: says one line, then reads the lines of all the others. */
static void user(void *arg)
{
    int i = (int)(intptr_t)arg;
    while (atomic_load(&chat_joined) < CHAT_CLIENTS)
        yard_coro_sleep_ns(100000); /* everyone in the room before anyone speaks */
    char msg[MSG_LEN];
    memset(msg, 0, sizeof(msg));
    snprintf(msg, sizeof(msg), "hello from %d", i);
    ASSERT_EQ(yard_coro_write(peer_fd[i], msg, MSG_LEN, 0), MSG_LEN);
    bool seen[CHAT_CLIENTS] = {false};
    for (int k = 0; k < CHAT_CLIENTS - 1; k++) {
        char got[MSG_LEN];
        size_t have = 0;
        while (have < MSG_LEN) {
            ssize_t n = yard_coro_read(peer_fd[i], got + have, MSG_LEN - have, 0);
            ASSERT_GT(n, 0);
            have += (size_t)n;
        }
        int from = -1;
        ASSERT_EQ(sscanf(got, "hello from %d", &from), 1);
        ASSERT(from >= 0 && from < CHAT_CLIENTS && from != i && !seen[from]);
        seen[from] = true;
        atomic_fetch_add(&chat_received[i], 1);
    }
}

static void chat_main(void *arg)
{
    (void)arg;
    static struct client clients[CHAT_CLIENTS];
    yard_coro_t *sessions[CHAT_CLIENTS], *users[CHAT_CLIENTS];
    for (int i = 0; i < CHAT_CLIENTS; i++) {
        int sv[2];
        ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        clients[i] = (struct client){.fd = sv[0]};
        peer_fd[i] = sv[1];
        yard_coro_finish_t fin;
        yard_coro_finish_init(&fin);
        yard_coro_task(&fin, &(yard_coro_perm_t){&room.obj, YARD_PERM_FULL}, 1, join_task,
                       &clients[i]);
        yard_coro_finish_wait(&fin);
        atomic_fetch_add(&chat_joined, 1);
        sessions[i] = yard_coro_spawn(session, &clients[i]);
    }
    for (int i = 0; i < CHAT_CLIENTS; i++)
        users[i] = yard_coro_spawn(user, (void *)(intptr_t)i);
    for (int i = 0; i < CHAT_CLIENTS; i++)
        yard_coro_join(users[i]);
    for (int i = 0; i < CHAT_CLIENTS; i++)
        yard_coro_close(peer_fd[i]); /* the sessions see EOF and leave */
    for (int i = 0; i < CHAT_CLIENTS; i++)
        yard_coro_join(sessions[i]);
    ASSERT_EQ(room.n, 0);
}

static void test_broadcast_chat(void)
{
    run(2, chat_main, NULL);
    for (int i = 0; i < CHAT_CLIENTS; i++)
        ASSERT_EQ(atomic_load(&chat_received[i]), CHAT_CLIENTS - 1);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"permissions", test_permissions},
        {"transfers", test_transfers},
        {"fibonacci", test_fibonacci},
        {"broadcast_chat", test_broadcast_chat},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
