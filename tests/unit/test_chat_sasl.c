/* SASL logs in without touching the nick (issue 40), through the
 * sans-socket harness (chat_harness.h): a client that registers as "al"
 * and logs in to the account alice keeps "al" (900, 001, 907 address it),
 * is shown as "al" everywhere (WHOIS with 330 alice, NAMES, messages,
 * presence) while its account travels in account-tag, extended-join and
 * the log; an account's connections share one nick; no one takes an
 * account's name, or a nick in use, as a nick; ranks stay the account's. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_cases.h"

/* SASL PLAIN payloads: base64 of "\0alice\0pw-alice" and "\0bob\0pw-bob". */
#define PLAIN_ALICE "AGFsaWNlAHB3LWFsaWNl"
#define PLAIN_BOB "AGJvYgBwdy1ib2I="

static chat_harness_t *start_with_guests(void)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    ch_account(h, "alice", "pw-alice");
    ch_account(h, "bob", "pw-bob");
    return h;
}

/* A client that registers with nick and logs in with SASL (payload),
 * asking for caps besides sasl; read up to the end of its welcome. Its
 * 900 is checked against want900 (from its "900 " on). */
static int sasl_login(chat_harness_t *h, const char *nick, const char *payload, const char *caps,
                      const char *want900)
{
    int id = ch_connect(h);
    char line[400];
    snprintf(line, sizeof line,
             "CAP LS 302\r\nCAP REQ :sasl%s%s\r\nNICK %s\r\nUSER u%s 0 * :Real %s\r\n"
             "AUTHENTICATE PLAIN\r\n",
             caps ? " " : "", caps ? caps : "", nick, nick, nick);
    ch_feed(h, id, line);
    CH_SKIP_TO(h, id, "AUTHENTICATE +");
    snprintf(line, sizeof line, "AUTHENTICATE %s\r\n", payload);
    ch_feed(h, id, line);
    snprintf(line, sizeof line, S "900 %s", want900);
    CH_EXPECT(h, id, line);
    CH_EXPECT_PREFIX(h, id, S "903 ");
    ch_feed(h, id, "CAP END\r\n");
    return id;
}

/* The nick asked for is kept: 900 and 001 name it, no NICK line, and
 * AUTHENTICATE again is 907 to it. */
static void test_sasl_keeps_the_nick(void)
{
    chat_harness_t *h = start_with_guests();
    int a = sasl_login(h, "al", PLAIN_ALICE, NULL,
                       "al al!al@yard alice :You are now logged in as alice");
    CH_EXPECT(h, a, S "001 al :Welcome to the yard chat, al");
    const char *l;
    while ((l = ch_line(h, a)) && !strstr(l, " 422 "))
        if (strstr(l, " NICK "))
            TEST_FAIL("a NICK line in the welcome: %s", l);
    ASSERT(l != NULL);
    ch_feed(h, a, "AUTHENTICATE PLAIN\r\n");
    CH_EXPECT(h, a, S "907 al :You have already authenticated using SASL");
    ch_feed(h, a, "NICK other\r\n");
    CH_EXPECT(h, a, S "432 al other :An account keeps the nick it logged in with");
    ch_stop(h);
}

/* Others see "al": WHOIS (311, 330 with the account, 318), WHOIS by the
 * account's name, NAMES, messages with account-tag, extended-join, a
 * private message to "al" reaching alice, and its QUIT. */
static void test_others_see_the_nick(void)
{
    chat_harness_t *h = start_with_guests();
    int a = sasl_login(h, "al", PLAIN_ALICE, NULL,
                       "al al!al@yard alice :You are now logged in as alice");
    CH_SKIP_TO(h, a, S "422 al ");
    int b = sasl_login(h, "bob", PLAIN_BOB, "account-tag extended-join",
                       "bob bob!bob@yard bob :You are now logged in as bob");
    CH_SKIP_TO(h, b, S "422 bob ");
    ch_feed(h, b, "WHOIS al\r\n");
    CH_EXPECT(h, b, S "311 bob al ual yard * :Real al");
    CH_SKIP_TO(h, b, S "330 bob al alice :is logged in as");
    CH_EXPECT(h, b, S "318 bob al :End of /WHOIS list.");
    ch_feed(h, b, "WHOIS alice\r\n");
    CH_EXPECT(h, b, S "311 bob al ual yard * :Real al");
    ch_discard(h, b);
    ch_feed(h, b, "JOIN #c\r\n");
    ch_feed(h, a, "JOIN #c\r\n");
    CH_SKIP_TO(h, a, ":al!al@yard JOIN #c");
    CH_SKIP_TO(h, a, S "353 al = #c :al @bob");
    CH_SKIP_TO(h, b, "@account=alice :al!al@yard JOIN #c alice :Real al");
    ch_discard(h, a);
    ch_feed(h, a, "PRIVMSG #c :hello\r\n");
    CH_EXPECT(h, b, "@account=alice :al!al@yard PRIVMSG #c :hello");
    ch_feed(h, b, "PRIVMSG al :psst\r\n");
    CH_EXPECT(h, a, ":bob!bob@yard PRIVMSG al :psst");
    ch_feed(h, b, "ISON al alice\r\nUSERHOST al\r\n");
    CH_EXPECT(h, b, S "303 bob :al al");
    CH_EXPECT(h, b, S "302 bob :al=+al@yard");
    ch_feed(h, a, "QUIT :bye\r\n");
    CH_EXPECT(h, b, "@account=alice :al!al@yard QUIT :Quit: bye");
    ch_feed(h, b, "WHOWAS al\r\n");
    CH_EXPECT(h, b, S "314 bob al ual yard * :Real al");
    ch_stop(h);
}

/* A nick that is another account's name, or that somebody connected has,
 * is not kept: the account's name is, and the client is told (NICK). */
static void test_reserved_and_taken_nicks(void)
{
    chat_harness_t *h = start_with_guests();
    int a = sasl_login(h, "bob", PLAIN_ALICE, NULL,
                       "bob bob!bob@yard alice :You are now logged in as alice");
    CH_EXPECT(h, a, ":bob!bob@yard NICK :alice");
    CH_EXPECT(h, a, S "001 alice :Welcome to the yard chat, alice");
    ch_feed(h, a, "QUIT\r\n");
    int z = guest(h, "zed");
    int b = sasl_login(h, "zed", PLAIN_BOB, NULL,
                       "zed zed!zed@yard bob :You are now logged in as bob");
    CH_EXPECT(h, b, ":zed!zed@yard NICK :bob");
    CH_EXPECT(h, b, S "001 bob :Welcome to the yard chat, bob");
    ch_discard(h, z);
    ch_feed(h, z, "WHOIS zed\r\n");
    CH_EXPECT(h, z, S "311 zed zed uzed yard * :Real zed");
    ch_stop(h);
}

/* Nobody takes an account's name while it is logged in under another
 * nick, nor the nick it has: a guest gets 433 for both, another account's
 * SASL login falls back to its own name. */
static void test_no_impersonation(void)
{
    chat_harness_t *h = start_with_guests();
    int a = sasl_login(h, "al", PLAIN_ALICE, NULL,
                       "al al!al@yard alice :You are now logged in as alice");
    CH_SKIP_TO(h, a, S "422 al ");
    int g = ch_connect(h);
    ch_feed(h, g, "NICK alice\r\nUSER u 0 * :x\r\n");
    CH_EXPECT_PREFIX(h, g, S "433 * alice :Nickname is reserved for an account");
    ch_feed(h, g, "NICK AL\r\n");
    CH_EXPECT(h, g, S "433 * AL :Nickname is already in use");
    ch_feed(h, g, "NICK gus\r\n");
    CH_SKIP_TO(h, g, S "422 gus ");
    ch_feed(h, g, "NICK al\r\n");
    CH_EXPECT(h, g, S "433 gus al :Nickname is already in use");
    ch_feed(h, g, "NICK alice\r\n");
    CH_EXPECT_PREFIX(h, g, S "433 gus alice :Nickname is reserved for an account");
    int b = sasl_login(h, "al", PLAIN_BOB, NULL,
                       "al al!al@yard bob :You are now logged in as bob");
    CH_EXPECT(h, b, ":al!al@yard NICK :bob");
    ch_stop(h);
}

/* An account's connections share one nick: a second device (PASS, nick
 * alice) takes "al", and both hear a private message to it. */
static void test_devices_share_the_nick(void)
{
    chat_harness_t *h = start_with_guests();
    int a = sasl_login(h, "al", PLAIN_ALICE, NULL,
                       "al al!al@yard alice :You are now logged in as alice");
    CH_SKIP_TO(h, a, S "422 al ");
    int d = ch_connect(h);
    ch_feed(h, d, "PASS pw-alice\r\nNICK alice\r\nUSER phone 0 * :Phone\r\n");
    CH_EXPECT(h, d, ":alice!alice@yard NICK :al");
    CH_EXPECT(h, d, S "001 al :Welcome to the yard chat, al");
    CH_SKIP_TO(h, d, S "422 al ");
    int b = guest(h, "zed");
    ch_feed(h, b, "PRIVMSG al :both\r\n");
    CH_EXPECT(h, a, ":zed!zed@yard PRIVMSG al :both");
    CH_EXPECT(h, d, ":zed!zed@yard PRIVMSG al :both");
    ch_stop(h);
}

/* A guest that logs in after registering keeps its nick (no NICK line,
 * nothing told to its channels), and is the account from then on. */
static void test_guest_logs_in_keeping_its_nick(void)
{
    chat_harness_t *h = start_with_guests();
    int g = guest(h, "zed");
    int b = sasl_login(h, "bob", PLAIN_BOB, "account-tag",
                       "bob bob!bob@yard bob :You are now logged in as bob");
    CH_SKIP_TO(h, b, S "422 bob ");
    ch_feed(h, g, "JOIN #c\r\n");
    ch_feed(h, b, "JOIN #c\r\n");
    ch_discard(h, g);
    ch_discard(h, b);
    ch_feed(h, g, "CAP REQ :sasl\r\nAUTHENTICATE PLAIN\r\n");
    CH_SKIP_TO(h, g, "AUTHENTICATE +");
    ch_feed(h, g, "AUTHENTICATE " PLAIN_ALICE "\r\n");
    CH_EXPECT(h, g, S "900 zed zed!zed@yard alice :You are now logged in as alice");
    CH_EXPECT(h, g, S "903 zed :SASL authentication successful");
    CH_EXPECT_NONE(h, g);
    CH_EXPECT_NONE(h, b);
    ch_feed(h, g, "PRIVMSG #c :now alice\r\n");
    CH_EXPECT(h, b, "@account=alice :zed!zed@yard PRIVMSG #c :now alice");
    ch_feed(h, b, "WHOIS zed\r\n");
    CH_SKIP_TO(h, b, S "330 bob zed alice :is logged in as");
    ch_stop(h);
}

/* Ranks are the account's: alice creates #c as "al", leaves, and comes
 * back as "ally": still its operator. A KICK names the nick, and the
 * kicked hears it. */
static void test_ranks_follow_the_account(void)
{
    chat_harness_t *h = start_with_guests();
    int a = sasl_login(h, "al", PLAIN_ALICE, NULL,
                       "al al!al@yard alice :You are now logged in as alice");
    ch_feed(h, a, "JOIN #c\r\n");
    CH_SKIP_TO(h, a, S "353 al = #c :@al");
    ch_feed(h, a, "QUIT\r\n");
    a = sasl_login(h, "ally", PLAIN_ALICE, NULL,
                   "ally ally!ally@yard alice :You are now logged in as alice");
    ch_feed(h, a, "JOIN #c\r\n");
    CH_SKIP_TO(h, a, S "353 ally = #c :@ally");
    int b = sasl_login(h, "bobby", PLAIN_BOB, NULL,
                       "bobby bobby!bobby@yard bob :You are now logged in as bob");
    ch_feed(h, b, "JOIN #c\r\n");
    CH_SKIP_TO(h, b, S "353 bobby = #c :@ally bobby");
    ch_discard(h, a);
    ch_discard(h, b);
    ch_feed(h, a, "MODE #c +v bobby\r\n");
    CH_EXPECT(h, a, ":ally!ally@yard MODE #c +v bobby");
    CH_EXPECT(h, b, ":ally!ally@yard MODE #c +v bobby");
    ch_feed(h, a, "KICK #c bobby :out\r\n");
    CH_EXPECT(h, a, ":ally!ally@yard KICK #c bobby :out");
    CH_EXPECT(h, b, ":ally!ally@yard KICK #c bobby :out");
    ch_stop(h);
}

/* MONITOR watches the nick a SASL login keeps: "al" comes online as
 * al!ual@yard when alice logs in with it, and goes when she leaves. */
static void test_monitor_sees_the_nick(void)
{
    chat_harness_t *h = start_with_guests();
    int f = guest(h, "foo");
    ch_discard(h, f);
    ch_feed(h, f, "MONITOR + al\r\n");
    CH_EXPECT(h, f, S "731 foo :al");
    int a = sasl_login(h, "al", PLAIN_ALICE, NULL,
                       "al al!al@yard alice :You are now logged in as alice");
    CH_EXPECT(h, f, S "730 foo :al!ual@yard");
    ch_feed(h, a, "QUIT :bye\r\n");
    CH_EXPECT(h, f, S "731 foo :al");
    CH_EXPECT_NONE(h, f);
    ch_stop(h);
}

int main(void)
{
    test_sasl_keeps_the_nick();
    test_others_see_the_nick();
    test_reserved_and_taken_nicks();
    test_no_impersonation();
    test_devices_share_the_nick();
    test_guest_logs_in_keeping_its_nick();
    test_ranks_follow_the_account();
    test_monitor_sees_the_nick();
    puts("ok");
    return 0;
}
