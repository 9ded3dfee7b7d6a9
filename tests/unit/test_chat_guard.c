/* The chat service's login limits (apps/chat/guard.c), with time as an
 * input: slots per address and in total, reclaimed when stale; token
 * buckets per address and per account; trust after a successful login. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "../../apps/chat/guard.h"
#include "test.h"
#include "yard/clock.h"

#define S YARD_NS_PER_S

static chat_addr_t v4(const char *text)
{
    yard_addr_t a = {0};
    struct sockaddr_in *in = (struct sockaddr_in *)(void *)&a.ss;
    in->sin_family = AF_INET;
    inet_pton(AF_INET, text, &in->sin_addr);
    a.len = sizeof *in;
    chat_addr_t k;
    chat_addr_of(&a, &k);
    return k;
}

static chat_guard_t *guard(yard_shm_t **shm, const chat_guard_opts_t *o)
{
    char err[128];
    ASSERT_EQ(yard_shm_create(shm, 64 << 20), 0);
    ASSERT(*shm);
    chat_guard_t *g = chat_guard_create(*shm, o, err, sizeof err);
    ASSERT(g);
    return g;
}

static void test_addresses(void)
{
    char t[64];
    chat_addr_t a = v4("127.0.0.2");
    chat_addr_text(&a, t, sizeof t);
    ASSERT_STR_EQ(t, "127.0.0.2");
    /* IPv6: one /64 is one source. */
    yard_addr_t x = {0}, y = {0};
    struct sockaddr_in6 *i6 = (struct sockaddr_in6 *)(void *)&x.ss;
    i6->sin6_family = AF_INET6;
    inet_pton(AF_INET6, "2001:db8:1:2::5", &i6->sin6_addr);
    i6 = (struct sockaddr_in6 *)(void *)&y.ss;
    i6->sin6_family = AF_INET6;
    inet_pton(AF_INET6, "2001:db8:1:2:ffff::9", &i6->sin6_addr);
    chat_addr_t kx, ky;
    chat_addr_of(&x, &kx);
    chat_addr_of(&y, &ky);
    ASSERT_MEM_EQ(&kx, &ky, sizeof kx);
    chat_addr_text(&kx, t, sizeof t);
    ASSERT_STR_EQ(t, "2001:db8:1:2::/64");
    chat_addr_of(NULL, &kx);
    chat_addr_t zero = {0};
    ASSERT_MEM_EQ(&kx, &zero, sizeof kx);
}

static void test_rate_parse(void)
{
    chat_rate_t r;
    ASSERT_EQ(yard_parse_rate("10/10m", &r.burst, &r.per_s), 0);
    ASSERT(r.burst == 10 && r.per_s > 0.0166 && r.per_s < 0.0167);
    ASSERT_EQ(yard_parse_rate("5/1s", &r.burst, &r.per_s), 0);
    ASSERT(r.burst == 5 && r.per_s == 5);
    ASSERT_EQ(yard_parse_rate("10", &r.burst, &r.per_s), -1);
    ASSERT_EQ(yard_parse_rate("0/1m", &r.burst, &r.per_s), -1);
    ASSERT_EQ(yard_parse_rate("x/1m", &r.burst, &r.per_s), -1);
    ASSERT_EQ(yard_parse_rate("3/0s", &r.burst, &r.per_s), -1);
    ASSERT_EQ(yard_parse_rate("3/soon", &r.burst, &r.per_s), -1);
}

static void test_unregistered(void)
{
    chat_guard_opts_t o = CHAT_GUARD_DEFAULT_OPTS;
    o.max_unregistered = 5;
    o.unregistered_per_addr = 3;
    o.unregistered_ttl_ns = 10 * S;
    o.open_share = 100;
    yard_shm_t *shm;
    chat_guard_t *g = guard(&shm, &o);
    chat_addr_t a = v4("127.0.0.1"), b = v4("127.0.0.2");
    uint64_t t[7], now = 100 * S;
    int shed;
    for (int i = 0; i < 3; i++)
        ASSERT_EQ(chat_guard_enter(g, &a, now + (uint64_t)i, &t[i], &shed), CHAT_GUARD_OK);
    ASSERT_EQ(chat_guard_enter(g, &a, now, &t[3], &shed), CHAT_GUARD_TOO_MANY);
    ASSERT_U64_EQ(t[3], 0);
    /* Another address is not held back by the first one's cap... */
    ASSERT_EQ(chat_guard_enter(g, &b, now + 10, &t[3], &shed), CHAT_GUARD_OK);
    ASSERT_EQ(shed, -1);
    ASSERT_EQ(chat_guard_enter(g, &b, now + 11, &t[4], &shed), CHAT_GUARD_OK);
    /* ...nor by the total: full, it takes the place of the oldest of the
     * address holding the most (a: 3, b: 2), which no longer holds it. */
    ASSERT_EQ(chat_guard_enter(g, &b, now + 12, &t[5], &shed), CHAT_GUARD_OK);
    ASSERT_EQ(shed, chat_guard_slot(t[0]));
    ASSERT_EQ(chat_guard_slot(t[5]), chat_guard_slot(t[0]));
    ASSERT(!chat_guard_holds(g, t[0]));
    ASSERT(chat_guard_holds(g, t[1]) && chat_guard_holds(g, t[5]));
    /* Now a holds 2, b 3: a newcomer from a, holding fewer than b... */
    ASSERT_EQ(chat_guard_enter(g, &a, now + 13, &t[6], &shed), CHAT_GUARD_OK);
    ASSERT_EQ(shed, chat_guard_slot(t[3])); /* b's oldest */
    /* ...and one from a again: a is at its own cap (3). */
    uint64_t gone = t[0];
    ASSERT_EQ(chat_guard_enter(g, &a, now + 14, &t[0], &shed), CHAT_GUARD_TOO_MANY);
    chat_guard_leave(g, t[1]);
    chat_guard_leave(g, t[1]); /* twice: no effect on whoever holds it next */
    chat_guard_leave(g, gone); /* a shed ticket: likewise */
    ASSERT(chat_guard_holds(g, t[5]));
    ASSERT_EQ(chat_guard_enter(g, &a, now + 15, &t[1], &shed), CHAT_GUARD_OK);
    ASSERT_EQ(shed, -1);
    /* A holder that vanished (a killed process) is forgotten after the ttl. */
    ASSERT_EQ(chat_guard_enter(g, &a, now + 11 * S, &t[0], &shed), CHAT_GUARD_OK);
    ASSERT_EQ(shed, -1);
    yard_shm_destroy(shm);
}

/* Connections without credentials hold at most their share; a login in
 * progress is never shed, and a newcomer from the address holding the most
 * is refused rather than shedding its own kind. */
static void test_unregistered_share(void)
{
    chat_guard_opts_t o = CHAT_GUARD_DEFAULT_OPTS;
    o.max_unregistered = 8;
    o.unregistered_per_addr = 8;
    o.open_share = 50; /* 4 without credentials */
    yard_shm_t *shm;
    chat_guard_t *g = guard(&shm, &o);
    chat_addr_t a = v4("10.0.0.1"), b = v4("10.0.0.2"), c = v4("10.0.0.3"), d = v4("10.0.0.4");
    uint64_t t[12], now = 100 * S;
    int shed;
    ASSERT_EQ(chat_guard_enter(g, &d, now, &t[0], &shed), CHAT_GUARD_OK);
    chat_guard_credentials(g, t[0]); /* d logs in: it does not count */
    for (int i = 1; i <= 4; i++)
        ASSERT_EQ(chat_guard_enter(g, &a, now + (uint64_t)i, &t[i], &shed), CHAT_GUARD_OK);
    /* The share is reached: a fifth from a is refused (a holds the most). */
    ASSERT_EQ(chat_guard_enter(g, &a, now + 5, &t[5], &shed), CHAT_GUARD_FULL);
    /* From b: a's oldest makes room. */
    ASSERT_EQ(chat_guard_enter(g, &b, now + 6, &t[6], &shed), CHAT_GUARD_OK);
    ASSERT_EQ(shed, chat_guard_slot(t[1]));
    ASSERT(!chat_guard_holds(g, t[1]));
    ASSERT_EQ(chat_guard_enter(g, &c, now + 7, &t[7], &shed), CHAT_GUARD_OK);
    ASSERT_EQ(shed, chat_guard_slot(t[2]));
    /* d's login in progress was never a candidate. */
    ASSERT(chat_guard_holds(g, t[0]));
    /* One that offers credentials leaves the share: room for one more. */
    chat_guard_credentials(g, t[6]);
    ASSERT_EQ(chat_guard_enter(g, &c, now + 8, &t[8], &shed), CHAT_GUARD_OK);
    ASSERT_EQ(shed, -1);
    chat_guard_credentials(g, 0); /* a 0 ticket: nothing */
    ASSERT(chat_guard_holds(g, 0));
    yard_shm_destroy(shm);
}

static void test_pending_checks(void)
{
    chat_guard_opts_t o = CHAT_GUARD_DEFAULT_OPTS;
    o.max_pending = 3;
    o.pending_per_addr = 2;
    yard_shm_t *shm;
    chat_guard_t *g = guard(&shm, &o);
    chat_addr_t a = v4("127.0.0.1"), b = v4("127.0.0.2"), c = v4("127.0.0.3");
    uint64_t t1, t2, t3, t4, retry, now = 50 * S;
    ASSERT_EQ(chat_guard_check_begin(g, &a, "x", now, &t1, &retry), CHAT_GUARD_OK);
    ASSERT_EQ(chat_guard_check_begin(g, &a, "y", now, &t2, &retry), CHAT_GUARD_OK);
    /* The address has its share in flight: it waits; another does not. */
    ASSERT_EQ(chat_guard_check_begin(g, &a, "z", now, &t3, &retry), CHAT_GUARD_WAIT);
    ASSERT_EQ(chat_guard_check_begin(g, &b, "z", now, &t3, &retry), CHAT_GUARD_OK);
    /* The server's bound: a temporary failure, nothing held. */
    ASSERT_EQ(chat_guard_check_begin(g, &c, "z", now, &t4, &retry), CHAT_GUARD_BUSY);
    ASSERT_U64_EQ(t4, 0);
    chat_guard_check_end(g, t1, &a, "x", false, now);
    ASSERT_EQ(chat_guard_check_begin(g, &c, "z", now, &t4, &retry), CHAT_GUARD_OK);
    chat_guard_check_end(g, t2, &a, "y", true, now);
    chat_guard_check_end(g, t3, &b, "z", false, now);
    chat_guard_check_end(g, t4, &c, "z", false, now);
    yard_shm_destroy(shm);
}

static void test_address_failures(void)
{
    chat_guard_opts_t o = CHAT_GUARD_DEFAULT_OPTS;
    o.addr_failures = (chat_rate_t){5, 1}; /* 5 at once, then 1 a second */
    o.account_failures = (chat_rate_t){1000, 1000};
    yard_shm_t *shm;
    chat_guard_t *g = guard(&shm, &o);
    chat_addr_t a = v4("10.1.1.1"), b = v4("10.1.1.2");
    uint64_t t, retry, now = 1000 * S;
    for (int i = 0; i < 5; i++) {
        ASSERT_EQ(chat_guard_check_begin(g, &a, "victim", now, &t, &retry), CHAT_GUARD_OK);
        chat_guard_check_end(g, t, &a, "victim", false, now);
    }
    ASSERT_EQ(chat_guard_check_begin(g, &a, "other", now, &t, &retry), CHAT_GUARD_ADDR_LIMIT);
    ASSERT(retry > 0 && retry <= S + 1);
    /* Another address does not feel it. */
    ASSERT_EQ(chat_guard_check_begin(g, &b, "victim", now, &t, &retry), CHAT_GUARD_OK);
    chat_guard_check_end(g, t, &b, "victim", false, now);
    /* A second later one more guess is due, and only one. */
    now += S;
    ASSERT_EQ(chat_guard_check_begin(g, &a, "victim", now, &t, &retry), CHAT_GUARD_OK);
    chat_guard_check_end(g, t, &a, "victim", false, now);
    ASSERT_EQ(chat_guard_check_begin(g, &a, "victim", now, &t, &retry), CHAT_GUARD_ADDR_LIMIT);
    /* A good login gives back the token it took, not more. */
    now += S;
    ASSERT_EQ(chat_guard_check_begin(g, &a, "mine", now, &t, &retry), CHAT_GUARD_OK);
    chat_guard_check_end(g, t, &a, "mine", true, now);
    ASSERT_EQ(chat_guard_check_begin(g, &a, "victim", now, &t, &retry), CHAT_GUARD_OK);
    chat_guard_check_end(g, t, &a, "victim", false, now);
    ASSERT_EQ(chat_guard_check_begin(g, &a, "victim", now, &t, &retry), CHAT_GUARD_ADDR_LIMIT);
    yard_shm_destroy(shm);
}

/* 1,000 guesses at one account from 100 addresses over 100 simulated
 * seconds: no more are checked than the bucket allows (burst + rate x time);
 * the owner, from an address it logged in from before, still gets in. */
static void test_account_failures(void)
{
    chat_guard_opts_t o = CHAT_GUARD_DEFAULT_OPTS;
    o.account_failures = (chat_rate_t){10, 0.5};
    yard_shm_t *shm;
    chat_guard_t *g = guard(&shm, &o);
    chat_addr_t home = v4("192.0.2.1"), cafe = v4("192.0.2.2");
    uint64_t t, retry, t0 = 5000 * S;
    ASSERT_EQ(chat_guard_check_begin(g, &home, "alice", t0, &t, &retry), CHAT_GUARD_OK);
    chat_guard_check_end(g, t, &home, "alice", true, t0);
    int checked = 0, refused = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t now = t0 + (uint64_t)i * S / 10;
        char ip[32];
        snprintf(ip, sizeof ip, "198.51.100.%d", i % 100);
        chat_addr_t a = v4(ip);
        int v = chat_guard_check_begin(g, &a, "alice", now, &t, &retry);
        if (v == CHAT_GUARD_OK) {
            checked++;
            chat_guard_check_end(g, t, &a, "alice", false, now);
        } else {
            ASSERT_EQ(v, CHAT_GUARD_ACCOUNT_LIMIT);
            ASSERT(retry > 0 && retry <= 2 * S + 1);
            refused++;
        }
    }
    /* 99.9 s at 0.5/s after a burst of 10. */
    ASSERT_LE(checked, 10 + 50);
    ASSERT_GE(checked, 10 + 48);
    ASSERT_EQ(checked + refused, 1000);
    uint64_t now = t0 + 999 * S / 10; /* the last guess's time: no token is due */
    ASSERT_EQ(chat_guard_check_begin(g, &cafe, "alice", now, &t, &retry),
              CHAT_GUARD_ACCOUNT_LIMIT);
    ASSERT_EQ(chat_guard_check_begin(g, &home, "alice", now, &t, &retry), CHAT_GUARD_OK);
    chat_guard_check_end(g, t, &home, "alice", true, now);
    /* The owner's login forgave the failures: from anywhere again. */
    ASSERT_EQ(chat_guard_check_begin(g, &cafe, "alice", now, &t, &retry), CHAT_GUARD_OK);
    chat_guard_check_end(g, t, &cafe, "alice", false, now);
    /* Accounts that do not exist are limited the same way. */
    for (int i = 0; i < 10; i++) {
        ASSERT_EQ(chat_guard_check_begin(g, &cafe, "nosuch", now, &t, &retry), CHAT_GUARD_OK);
        chat_guard_check_end(g, t, &cafe, "nosuch", false, now);
    }
    ASSERT_EQ(chat_guard_check_begin(g, &cafe, "nosuch", now, &t, &retry),
              CHAT_GUARD_ACCOUNT_LIMIT);
    yard_shm_destroy(shm);
}

/* Many more keys than the table holds: it keeps working, and a key that is
 * being limited is not the one forgotten. */
static void test_table_churn(void)
{
    chat_guard_opts_t o = CHAT_GUARD_DEFAULT_OPTS;
    o.account_failures = (chat_rate_t){2, 0.001};
    yard_shm_t *shm;
    chat_guard_t *g = guard(&shm, &o);
    chat_addr_t a = v4("203.0.113.1");
    uint64_t t, retry, now = 10 * S;
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ(chat_guard_check_begin(g, &a, "target", now, &t, &retry), CHAT_GUARD_OK);
        chat_guard_check_end(g, t, &a, "target", false, now);
    }
    for (int i = 0; i < 20000; i++) {
        char name[32];
        snprintf(name, sizeof name, "spray%d", i);
        char ip[32];
        snprintf(ip, sizeof ip, "10.%d.%d.1", i / 250, i % 250);
        chat_addr_t b = v4(ip);
        int v = chat_guard_check_begin(g, &b, name, now, &t, &retry);
        ASSERT_EQ(v, CHAT_GUARD_OK);
        chat_guard_check_end(g, t, &b, name, true, now);
    }
    ASSERT_EQ(chat_guard_check_begin(g, &a, "target", now, &t, &retry),
              CHAT_GUARD_ACCOUNT_LIMIT);
    yard_shm_destroy(shm);
}

/* Threads read the clock before they take the lock: a caller may come
 * with a time a little older than the last one. That must neither refill a
 * bucket nor make a live slot look stale. */
static void test_clock_read_earlier(void)
{
    chat_guard_opts_t o = CHAT_GUARD_DEFAULT_OPTS;
    o.addr_failures = (chat_rate_t){2, 0.001};
    o.max_pending = 1;
    yard_shm_t *shm;
    chat_guard_t *g = guard(&shm, &o);
    chat_addr_t a = v4("127.0.0.1"), b = v4("127.0.0.2");
    uint64_t t, retry, now = 1000 * S;
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ(chat_guard_check_begin(g, &a, "x", now, &t, &retry), CHAT_GUARD_OK);
        chat_guard_check_end(g, t, &a, "x", false, now);
    }
    ASSERT_EQ(chat_guard_check_begin(g, &a, "x", now - 1000, &t, &retry), CHAT_GUARD_ADDR_LIMIT);
    ASSERT_EQ(chat_guard_check_begin(g, &b, "y", now, &t, &retry), CHAT_GUARD_OK);
    uint64_t t2;
    ASSERT_EQ(chat_guard_check_begin(g, &a, "y", now - 1000, &t2, &retry),
              CHAT_GUARD_ADDR_LIMIT);
    ASSERT_EQ(chat_guard_check_begin(g, &b, "z", now - 1000, &t2, &retry), CHAT_GUARD_BUSY);
    yard_shm_destroy(shm);
}

int main(void)
{
    test_clock_read_earlier();
    test_addresses();
    test_rate_parse();
    test_unregistered();
    test_unregistered_share();
    test_pending_checks();
    test_address_failures();
    test_account_failures();
    test_table_churn();
    return 0;
}
