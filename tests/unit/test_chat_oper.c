/* The chat's replies line by line, through the sans-socket harness (chat_harness.h):
 * server operators: OPER (refused, unknown, the same cost either way), KILL and WALLOPS.
 * The formats are the ones tests/integration/test_chat*.py expect of the real server. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat_cases.h"
#include "yard/chat_accounts.h"

/* alice, bob and carol logged in (their welcomes read), and the operator
 * root with password pw-root. */
static chat_harness_t *with_oper(int *a, int *b, int *c)
{
    const char *flags[] = {"server-name=irc.example", NULL};
    chat_harness_t *h = ch_start(flags);
    ch_account(h, "alice", "pw-alice");
    ch_account(h, "bob", "pw-bob");
    ch_account(h, "carol", "pw-carol");
    ch_oper(h, "root", "pw-root");
    *a = ch_login(h, "alice", "pw-alice", NULL);
    *b = ch_login(h, "bob", "pw-bob", NULL);
    *c = ch_login(h, "carol", "pw-carol", NULL);
    return h;
}

/* A failed OPER's answer waits, like a failed login's; then the
 * connection stays. */
static void expect_oper_failure(chat_harness_t *h, int id, const char *want)
{
    CH_EXPECT_NONE(h, id);
    ASSERT(ch_next_wake(h) > ch_now(h));
    ch_advance(h, ch_next_wake(h) - ch_now(h));
    CH_EXPECT(h, id, want);
    ASSERT(!ch_closed(h, id));
}

/* OPER (issue 40): 381 and +o, shown by MODE, WHO ('*') and WHOIS (313);
 * -o gives it up, +o by MODE is ignored. */
static void test_oper(void)
{
    int a, b, c;
    chat_harness_t *h = with_oper(&a, &b, &c);
    ch_feed(h, a, "OPER root pw-root\r\n");
    CH_EXPECT(h, a, ":alice!alice@yard MODE alice :+o");
    CH_EXPECT(h, a, S "381 alice :You are now an IRC operator");
    ch_feed(h, a, "MODE alice\r\n");
    CH_EXPECT(h, a, S "221 alice +o");
    ch_feed(h, b, "WHO alice\r\nWHOIS alice\r\n");
    CH_EXPECT(h, b, S "352 bob * alice yard irc.example alice H* :0 alice");
    CH_EXPECT(h, b, S "315 bob alice :End of /WHO list.");
    CH_SKIP_TO(h, b, S "313 bob alice :is an IRC operator");
    ch_discard(h, b);
    ch_feed(h, b, "MODE bob +o\r\nWHOIS bob\r\n"); /* not by MODE */
    CH_EXPECT_PREFIX(h, b, S "311 bob bob ");
    char *rest = ch_take_all(h, b);
    ASSERT(strstr(rest, " 313 ") == NULL);
    free(rest);
    ch_feed(h, a, "MODE alice -o\r\nMODE alice\r\nWHO alice\r\n");
    CH_EXPECT(h, a, ":alice!alice@yard MODE alice :-o");
    CH_EXPECT(h, a, S "221 alice +");
    CH_EXPECT(h, a, S "352 alice * alice yard irc.example alice H :0 alice");
    ch_stop(h);
}

/* A wrong password is 464, an unknown operator 491, both after the delay
 * of a failed login; KILL and WALLOPS of a non-operator are 481. */
static void test_oper_refused(void)
{
    int a, b, c;
    chat_harness_t *h = with_oper(&a, &b, &c);
    ch_feed(h, a, "OPER root wrong\r\n");
    expect_oper_failure(h, a, S "464 alice :Password incorrect");
    ch_feed(h, a, "OPER nobody pw-root\r\n");
    expect_oper_failure(h, a, S "491 alice :No O-lines for your host");
    ch_feed(h, a, "OPER alice pw-alice\r\n"); /* an account is not an operator */
    expect_oper_failure(h, a, S "491 alice :No O-lines for your host");
    ch_feed(h, a, "OPER root\r\nKILL bob :out\r\nWALLOPS :hello\r\nMODE alice\r\n");
    CH_EXPECT(h, a, S "461 alice OPER :Not enough parameters");
    CH_EXPECT(h, a, S "481 alice :Permission Denied- You're not an IRC operator");
    CH_EXPECT(h, a, S "481 alice :Permission Denied- You're not an IRC operator");
    CH_EXPECT(h, a, S "221 alice +");
    CH_EXPECT_NONE(h, b);
    ASSERT(!ch_closed(h, b));
    ch_stop(h);
}

/* The CPU time this thread has used (the harness runs jobs inline, so a
 * password check's bcrypt is counted here). */
static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* No timing oracle: OPER with an unknown name costs a bcrypt as dear as
 * the operators' (measured in this thread's CPU time, which other work on
 * the machine does not inflate as it does wall-clock time). */
static void test_oper_unknown_costs_the_same(void)
{
    int a, b, c;
    chat_harness_t *h = with_oper(&a, &b, &c);
    char err[256];
    ASSERT(yard_opers_add(ch_data_dir(h), "slow", "pw-slow", 10, err, sizeof err) == 0);
    double known = 0, unknown = 0;
    for (int i = 0; i < 3; i++) {
        double t0 = thread_cpu_s();
        ch_feed(h, a, "OPER slow wrong\r\n");
        known += thread_cpu_s() - t0;
        expect_oper_failure(h, a, S "464 alice :Password incorrect");
        t0 = thread_cpu_s();
        ch_feed(h, a, "OPER nosuchoper wrong\r\n");
        unknown += thread_cpu_s() - t0;
        expect_oper_failure(h, a, S "491 alice :No O-lines for your host");
    }
    /* cost 10 against 4: an unknown name checked against the cheapest
     * hash, or not at all, would take a 64th of the time or none */
    ASSERT(unknown > 0.7 * known && known > 0.7 * unknown);
    ch_stop(h);
}

/* KILL closes the nick's newest connection; the account's other device
 * stays, and its channels hear a quit only when its last one goes. */
static void test_kill(void)
{
    int a, b, c;
    chat_harness_t *h = with_oper(&a, &b, &c);
    int b2 = ch_login(h, "bob", "pw-bob", NULL);
    ch_feed(h, a, "OPER root pw-root\r\nJOIN #k\r\n");
    ch_feed(h, b, "JOIN #k\r\n");
    ch_feed(h, b2, "JOIN #k\r\n");
    ch_feed(h, c, "JOIN #k\r\n");
    ch_discard(h, a);
    ch_discard(h, b);
    ch_discard(h, b2);
    ch_discard(h, c);
    ch_feed(h, a, "KILL nobody :x\r\nKILL bob :spam\r\n");
    CH_EXPECT(h, a, S "401 alice nobody :No such nick/channel");
    CH_EXPECT(h, b2, "ERROR :Closing Link: Killed (alice (spam))");
    ASSERT(ch_closed(h, b2));
    ASSERT(!ch_closed(h, b));
    CH_EXPECT_NONE(h, b);
    CH_EXPECT_NONE(h, c); /* bob is still here */
    ch_feed(h, b, "PRIVMSG #k :still here\r\n");
    CH_EXPECT(h, c, ":bob!bob@yard PRIVMSG #k :still here");
    ch_feed(h, a, "KILL BOB :again\r\n");
    CH_EXPECT(h, b, "ERROR :Closing Link: Killed (alice (again))");
    ASSERT(ch_closed(h, b));
    CH_SKIP_TO(h, c, ":bob!bob@yard QUIT :Killed (alice (again))");
    ch_stop(h);
}

/* WALLOPS reaches every connection with +w, and only those. */
static void test_wallops(void)
{
    int a, b, c;
    chat_harness_t *h = with_oper(&a, &b, &c);
    ch_feed(h, a, "OPER root pw-root\r\n");
    ch_feed(h, b, "MODE bob +w\r\n");
    ch_discard(h, a);
    ch_discard(h, b);
    ch_feed(h, a, "WALLOPS :maintenance at noon\r\n");
    CH_EXPECT(h, b, ":alice!alice@yard WALLOPS :maintenance at noon");
    CH_EXPECT_NONE(h, c);
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

/* --login-fail-delay-ms: a failed OPER (as a failed login) waits N ms per
 * failure of its connection so far; 0 answers at once. */
static void test_fail_delay_flag(void)
{
    const char *slow[] = {"login-fail-delay-ms=250", NULL};
    chat_harness_t *h = ch_start(slow);
    ch_account(h, "alice", "pw-alice");
    ch_oper(h, "root", "pw-root");
    int a = ch_login(h, "alice", "pw-alice", NULL);
    for (uint64_t n = 1; n <= 2; n++) {
        ch_feed(h, a, "OPER root wrong\r\n");
        CH_EXPECT_NONE(h, a);
        ASSERT(ch_next_wake(h) - ch_now(h) == n * 250 * 1000000ull);
        ch_advance(h, ch_next_wake(h) - ch_now(h));
        CH_EXPECT(h, a, S "464 alice :Password incorrect");
    }
    ch_stop(h);

    const char *none[] = {"login-fail-delay-ms=0", NULL};
    h = ch_start(none);
    ch_account(h, "alice", "pw-alice");
    ch_oper(h, "root", "pw-root");
    a = ch_login(h, "alice", "pw-alice", NULL);
    ch_feed(h, a, "OPER root wrong\r\n");
    ch_advance(h, 0);
    CH_EXPECT(h, a, S "464 alice :Password incorrect");
    ASSERT(!ch_closed(h, a));
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"oper", test_oper},
        {"oper_refused", test_oper_refused},
        {"oper_unknown_costs_the_same", test_oper_unknown_costs_the_same},
        {"kill", test_kill},
        {"wallops", test_wallops},
        {"fail_delay_flag", test_fail_delay_flag},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
