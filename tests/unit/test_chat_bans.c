/* Channel bans (apps/chat/bans.c, issue 40): the masks' matching and
 * normalizing, and +b through the sans-socket harness (chat_harness.h):
 * who may set them, JOIN refused with 474, speaking with 404, the list
 * (367/368), the account extban $a:, the bound (478) and bad masks (696);
 * and +s, the secret channel. */
#include <stdio.h>
#include <string.h>

#include "../../apps/chat/bans.h"
#include "chat_cases.h"


static void test_mask_match(void)
{
    ASSERT(chat_mask_match("bar!*@*", "bar!ubar@yard"));
    ASSERT(chat_mask_match("BAR!*@*", "bar!ubar@yard"));     /* case-insensitive */
    ASSERT(chat_mask_match("b[r!*@*", "B{R!u@yard"));        /* rfc1459: [ is { */
    ASSERT(chat_mask_match("b?r!*@*", "bxr!u@yard"));
    ASSERT(!chat_mask_match("b?r!*@*", "br!u@yard"));
    ASSERT(chat_mask_match("*!*@*", "x!y@z"));
    ASSERT(chat_mask_match("*a*b*c", "xxaybbzc"));
    ASSERT(!chat_mask_match("*a*b*c", "xxaybbzcd"));
    ASSERT(!chat_mask_match("bar!*@*", "barbara!u@yard"));
    ASSERT(chat_mask_match("*!*@127.0.0.*", "zed!uzed@127.0.0.1"));
    ASSERT(!chat_mask_match("", "x"));
    ASSERT(chat_mask_match("", ""));
}

static void test_normalize(void)
{
    char out[CHAT_BANMASK_MAX + 1];
    ASSERT(chat_ban_normalize("bar", out));
    ASSERT_STR_EQ(out, "bar!*@*");
    ASSERT(chat_ban_normalize("bar!u", out));
    ASSERT_STR_EQ(out, "bar!u@*");
    ASSERT(chat_ban_normalize("u@host", out));
    ASSERT_STR_EQ(out, "*!u@host");
    ASSERT(chat_ban_normalize("n!u@h", out));
    ASSERT_STR_EQ(out, "n!u@h");
    ASSERT(chat_ban_normalize("$a:bob", out));
    ASSERT_STR_EQ(out, "$a:bob");
    strcpy(out, "untouched");
    ASSERT(!chat_ban_normalize("", out));
    ASSERT(!chat_ban_normalize("$a:", out));
    ASSERT(!chat_ban_normalize("$x:bob", out));
    ASSERT(!chat_ban_normalize("a b", out));
    ASSERT(!chat_ban_normalize("a,b", out));
    ASSERT(!chat_ban_normalize(":a", out));
    ASSERT(!chat_ban_normalize("u@h!n", out));
    ASSERT(!chat_ban_normalize("a\x01", out));
    char longer[CHAT_BANMASK_MAX + 2];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = 0;
    ASSERT(!chat_ban_normalize(longer, out));
    longer[CHAT_BANMASK_MAX - 4] = 0; /* with its "!*@*" it fits exactly */
    ASSERT(chat_ban_normalize(longer, out));
    ASSERT_EQ(strlen(out), CHAT_BANMASK_MAX);
    ASSERT_STR_EQ(out + CHAT_BANMASK_MAX - 4, "!*@*");
}

static void test_ban_set(void)
{
    struct chat_banrec r;
    memset(&r, 0, sizeof r);
    ASSERT_EQ(chat_ban_set(&r, CHAT_LIST_BAN, "BAR!*@*", true, "zed", 5), 1);
    ASSERT_EQ(chat_ban_set(&r, CHAT_LIST_BAN, "bar!*@*", true, "zed", 6), 0); /* the same, folded */
    ASSERT_EQ(chat_ban_set(&r, CHAT_LIST_BAN, "x!*@*", true, "zed", 7), 1);
    ASSERT_EQ(r.n, 2);
    ASSERT_EQ(chat_ban_set(&r, CHAT_LIST_BAN, "bar!*@*", false, "zed", 8), 1);
    ASSERT_EQ(r.n, 1);
    ASSERT_STR_EQ(r.bans[0].mask, "x!*@*");
    ASSERT_EQ(chat_ban_set(&r, CHAT_LIST_BAN, "bar!*@*", false, "zed", 9), 0);
    for (int i = 1; i < CHAT_BANS_MAX; i++) {
        char m[32];
        snprintf(m, sizeof m, "n%d!*@*", i);
        ASSERT_EQ(chat_ban_set(&r, CHAT_LIST_BAN, m, true, "zed", i), 1);
    }
    ASSERT_EQ(r.n, CHAT_BANS_MAX);
    ASSERT_EQ(chat_ban_set(&r, CHAT_LIST_BAN, "one!*@*", true, "zed", 10), -1);
}

static const char *const guests[] = {"guests", NULL};

/* A mask set by the channel's operator keeps a matching nick out (474)
 * until it is removed, whatever the case of either; the list answers
 * members and others; a member who is not an operator is 482. */
static void test_ban_join(void)
{
    chat_harness_t *h = ch_start(guests);
    int z = guest(h, "zed");
    int b = guest(h, "Bar");
    int y = guest(h, "yan");
    ch_feed(h, z, "JOIN #c\r\n");
    ch_feed(h, y, "JOIN #c\r\n");
    ch_discard(h, z);
    ch_discard(h, y);
    ch_feed(h, z, "MODE #c +b BAR!*@*\r\n");
    CH_EXPECT(h, z, ":zed!zed@yard MODE #c +b BAR!*@*");
    CH_EXPECT(h, y, ":zed!zed@yard MODE #c +b BAR!*@*");
    ch_feed(h, b, "JOIN #c\r\n");
    CH_EXPECT(h, b, S "474 Bar #c :Cannot join channel (+b)");
    CH_EXPECT_NONE(h, b);
    ch_feed(h, y, "MODE #c +b other\r\nMODE #c -b bar!*@*\r\n");
    CH_EXPECT(h, y, S "482 yan #c :You're not channel operator");
    CH_EXPECT(h, y, S "482 yan #c :You're not channel operator");
    /* The list, to anyone (the banned one too): mask, setter, time. */
    char want[200];
    snprintf(want, sizeof want, S "367 Bar #c BAR!*@* zed %lld",
             (long long)(ch_wall(h) / 1000000000));
    ch_feed(h, b, "MODE #c b\r\n");
    CH_EXPECT(h, b, want);
    CH_EXPECT(h, b, S "368 Bar #c :End of channel ban list");
    ch_feed(h, z, "MODE #c +b\r\n");
    CH_EXPECT_PREFIX(h, z, S "367 zed #c BAR!*@* zed ");
    CH_EXPECT(h, z, S "368 zed #c :End of channel ban list");
    /* Removed by another spelling of the same mask. */
    ch_feed(h, z, "MODE #c -b bar!*@*\r\n");
    CH_EXPECT(h, z, ":zed!zed@yard MODE #c -b bar!*@*");
    ch_feed(h, z, "MODE #c b\r\n");
    CH_EXPECT(h, z, S "368 zed #c :End of channel ban list");
    ch_feed(h, b, "JOIN #c\r\n");
    CH_EXPECT(h, b, ":Bar!Bar@yard JOIN #c");
    ch_stop(h);
}

/* A banned member stays but cannot speak (404) unless voiced; a mask on
 * the user name or the source address matches too; the ban outlives the
 * channel's emptying (it is in DIR/bans). */
static void test_ban_speak_and_masks(void)
{
    chat_harness_t *h = ch_start(guests);
    int z = guest(h, "zed");
    int y = guest(h, "yan");
    ch_feed(h, z, "JOIN #c\r\n");
    ch_feed(h, y, "JOIN #c\r\n");
    ch_feed(h, z, "MODE #c +b *!uyan@*\r\n");
    ch_discard(h, z);
    ch_discard(h, y);
    ch_feed(h, y, "PRIVMSG #c :hi\r\nNOTICE #c :quiet\r\n");
    CH_EXPECT(h, y, S "404 yan #c :Cannot send to channel (+b: you are banned)");
    CH_EXPECT_NONE(h, y);
    CH_EXPECT_NONE(h, z);
    ch_feed(h, z, "MODE #c +v yan\r\n");
    ch_discard(h, z);
    ch_feed(h, y, "PRIVMSG #c :voiced\r\n");
    CH_EXPECT(h, z, ":yan!yan@yard PRIVMSG #c :voiced");
    /* By address: the harness's clients come from 127.0.0.1. */
    int x = guest(h, "xi");
    ch_feed(h, z, "MODE #c +b *!*@127.0.0.*\r\n");
    ch_feed(h, x, "JOIN #c\r\n");
    CH_EXPECT(h, x, S "474 xi #c :Cannot join channel (+b)");
    /* Everyone leaves; the channel's slot is freed, its bans stay. */
    ch_feed(h, z, "PART #c\r\n");
    ch_feed(h, y, "PART #c\r\n");
    ch_discard(h, x);
    ch_feed(h, x, "JOIN #c\r\n");
    CH_EXPECT(h, x, S "474 xi #c :Cannot join channel (+b)");
    ch_stop(h);
}

/* $a:NAME matches the account, never a guest named so; an account that is
 * the channel's operator joins past a ban, as past +i and +k. */
static void test_account_extban(void)
{
    chat_harness_t *h = ch_start(guests);
    ch_account(h, "alice", "pw-alice");
    ch_account(h, "bob", "pw-bob");
    int a = ch_login(h, "alice", "pw-alice", NULL);
    ch_feed(h, a, "JOIN #a\r\n");
    ch_discard(h, a);
    ch_feed(h, a, "MODE #a +bb $a:BOB $a:carl\r\n");
    CH_EXPECT(h, a, ":alice!alice@yard MODE #a +bb $a:BOB $a:carl");
    int b = ch_login(h, "bob", "pw-bob", NULL);
    ch_feed(h, b, "JOIN #a\r\n");
    CH_EXPECT(h, b, S "474 bob #a :Cannot join channel (+b)");
    int c = guest(h, "carl");
    ch_feed(h, c, "JOIN #a\r\n");
    CH_EXPECT(h, c, ":carl!carl@yard JOIN #a");
    /* The operator bans everyone and still comes back in. */
    ch_feed(h, a, "MODE #a +b *!*@*\r\nPART #a\r\nJOIN #a\r\n");
    CH_SKIP_TO(h, a, ":alice!alice@yard JOIN #a");
    ch_stop(h);
}

/* Bad masks are 696, unknown extbans too; the list holds CHAT_BANS_MAX
 * (MAXLIST in 005), one more is 478. */
static void test_ban_errors_and_bound(void)
{
    chat_harness_t *h = ch_start(guests);
    int z = ch_connect(h);
    ch_feed(h, z, "NICK zed\r\nUSER u 0 * :Z\r\n");
    const char *l = CH_SKIP_TO(h, z, S "005 zed CHANLIMIT");
    ASSERT(strstr(l, " EXTBAN=$,a ACCOUNTEXTBAN=a MAXLIST=beI:32 "));
    ch_feed(h, z, "JOIN #c\r\n");
    ch_discard(h, z);
    ch_feed(h, z, "MODE #c +b $x:bob\r\nMODE #c +b a,b\r\n");
    CH_EXPECT(h, z, S "696 zed #c b $x:bob :A mask is nick!user@host (with * and ?, at most 100 "
                      "characters) or $a:account");
    CH_EXPECT_PREFIX(h, z, S "696 zed #c b a,b :A mask is");
    CH_EXPECT_NONE(h, z);
    for (int i = 0; i < CHAT_BANS_MAX; i += 4) {
        char line[128];
        snprintf(line, sizeof line, "MODE #c +bbbb n%d n%d n%d n%d\r\n", i, i + 1, i + 2, i + 3);
        ch_feed(h, z, line);
    }
    ch_discard(h, z);
    ch_feed(h, z, "MODE #c +b one-more\r\n");
    CH_EXPECT(h, z, S "478 zed #c one-more!*@* :Channel ban list is full (32 with +e and +I)");
    CH_EXPECT_NONE(h, z);
    ch_feed(h, z, "MODE #c b\r\n");
    for (int i = 0; i < CHAT_BANS_MAX; i++)
        CH_EXPECT_PREFIX(h, z, S "367 zed #c n");
    CH_EXPECT(h, z, S "368 zed #c :End of channel ban list");
    ch_stop(h);
}

/* +s: a secret channel is left out of LIST, NAMES and WHOIS for those not
 * in it; its members see it, with '@' in 353. */
static void test_secret(void)
{
    chat_harness_t *h = ch_start(guests);
    int z = guest(h, "zed");
    int y = guest(h, "yan");
    ch_feed(h, z, "JOIN #s\r\nJOIN #open\r\nMODE #s +s\r\n");
    ch_discard(h, z);
    ch_feed(h, z, "MODE #s\r\nNAMES #s\r\n");
    CH_EXPECT(h, z, S "324 zed #s +nst");
    CH_SKIP_TO(h, z, S "353 zed @ #s :@zed");
    CH_EXPECT(h, z, S "366 zed #s :End of /NAMES list.");
    ch_feed(h, y, "LIST\r\n");
    CH_EXPECT(h, y, S "321 yan Channel :Users  Name");
    CH_EXPECT(h, y, S "322 yan #open 1 :");
    CH_EXPECT(h, y, S "323 yan :End of /LIST");
    ch_feed(h, y, "NAMES #s\r\nNAMES\r\nWHOIS zed\r\n");
    CH_EXPECT(h, y, S "366 yan #s :End of /NAMES list.");
    CH_EXPECT(h, y, S "353 yan = #open :@zed");
    CH_EXPECT(h, y, S "366 yan * :End of /NAMES list.");
    CH_EXPECT_PREFIX(h, y, S "311 yan zed ");
    CH_EXPECT(h, y, S "319 yan zed :@#open");
    ch_feed(h, y, "JOIN #s\r\n");
    CH_SKIP_TO(h, y, S "353 yan @ #s :");
    ch_discard(h, y);
    ch_feed(h, y, "LIST #s\r\n");
    CH_SKIP_TO(h, y, S "322 yan #s 2 :");
    ch_stop(h);
}

/* Ban exceptions (+e) let in whom a ban would keep out; invite
 * exceptions (+I) let into a +i channel without an INVITE; each list is
 * asked for alone (348/349, 346/347) and shares the record's bound. */
static void test_exceptions(void)
{
    chat_harness_t *h = ch_start(guests);
    int z = guest(h, "zed");
    int b = guest(h, "Bar");
    int q = guest(h, "qux");
    ch_feed(h, z, "JOIN #c\r\nMODE #c +b ba*!*@*\r\n");
    ch_discard(h, z);
    ch_feed(h, b, "JOIN #c\r\n");
    CH_EXPECT(h, b, S "474 Bar #c :Cannot join channel (+b)");
    ch_feed(h, z, "MODE #c +e *ar!*@*\r\n");
    CH_EXPECT(h, z, ":zed!zed@yard MODE #c +e *ar!*@*");
    ch_feed(h, b, "JOIN #c\r\nPART #c\r\n");
    CH_EXPECT(h, b, ":Bar!Bar@yard JOIN #c");
    ch_discard(h, b);
    /* +i: an invite exception for Bar, none for qux. */
    ch_feed(h, z, "MODE #c +iI bar\r\n");
    CH_SKIP_TO(h, z, ":zed!zed@yard MODE #c +iI bar!*@*");
    ch_feed(h, b, "JOIN #c\r\n");
    CH_EXPECT(h, b, ":Bar!Bar@yard JOIN #c");
    ch_feed(h, q, "JOIN #c\r\n");
    CH_EXPECT(h, q, S "473 qux #c :Cannot join channel (+i)");
    /* The lists, each alone. */
    ch_discard(h, z);
    ch_feed(h, z, "MODE #c b\r\nMODE #c e\r\nMODE #c +I\r\n");
    CH_EXPECT_PREFIX(h, z, S "367 zed #c ba*!*@* zed ");
    CH_EXPECT(h, z, S "368 zed #c :End of channel ban list");
    CH_EXPECT_PREFIX(h, z, S "348 zed #c *ar!*@* zed ");
    CH_EXPECT(h, z, S "349 zed #c :End of channel exception list");
    CH_EXPECT_PREFIX(h, z, S "346 zed #c bar!*@* zed ");
    CH_EXPECT(h, z, S "347 zed #c :End of channel invite list");
    CH_EXPECT_NONE(h, z);
    /* -I: Bar needs an INVITE again; -e: banned again. */
    ch_feed(h, b, "PART #c\r\n");
    ch_feed(h, z, "MODE #c -I BAR!*@*\r\n");
    ch_discard(h, b);
    ch_feed(h, b, "JOIN #c\r\n");
    CH_EXPECT(h, b, S "473 Bar #c :Cannot join channel (+i)");
    ch_feed(h, z, "MODE #c -ie *ar!*@*\r\n");
    ch_feed(h, b, "JOIN #c\r\n");
    CH_EXPECT(h, b, S "474 Bar #c :Cannot join channel (+b)");
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"mask_match", test_mask_match},
        {"normalize", test_normalize},
        {"ban_set", test_ban_set},
        {"ban_join", test_ban_join},
        {"ban_speak_and_masks", test_ban_speak_and_masks},
        {"account_extban", test_account_extban},
        {"ban_errors_and_bound", test_ban_errors_and_bound},
        {"secret", test_secret},
        {"exceptions", test_exceptions},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
