/* The chat's replies line by line, through the sans-socket harness (chat_harness.h):
 * channels and messages: JOIN/PART, PRIVMSG between members, a NICK change with the
 * log's queue full, flood control's prices, the channel operators' errors, a guest
 * creator's rank, MODE's parameters. The formats are the ones
 * tests/integration/test_chat*.py expect of the real server. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_cases.h"
#include "yard/chatlog.h"

/* The log's queue of deferred records, full on demand: this executable is
 * linked with --wrap=yard_chatlog_defer (tests/unit/CMakeLists.txt), so
 * the app's calls come here. A full queue refuses and counts, as the real
 * one does when the disk stalls. */
bool __real_yard_chatlog_defer(yard_chatlog_t *log, const yard_chatlog_entry_t *e, unsigned n);
bool __wrap_yard_chatlog_defer(yard_chatlog_t *log, const yard_chatlog_entry_t *e, unsigned n);
static bool queue_full;
static unsigned queue_refused;

bool __wrap_yard_chatlog_defer(yard_chatlog_t *log, const yard_chatlog_entry_t *e, unsigned n)
{
    if (queue_full) {
        queue_refused++;
        return false;
    }
    return __real_yard_chatlog_defer(log, e, n);
}

static void test_channels(void)
{
    chat_harness_t *h = start();
    int a = ch_login(h, "alice", "pw-alice", NULL);
    int b = ch_login(h, "bob", "pw-bob", NULL);
    ch_feed(h, a, "JOIN #x\r\n");
    CH_EXPECT(h, a, ":alice!alice@yard JOIN #x");
    CH_EXPECT(h, a, S "353 alice = #x :@alice");
    CH_EXPECT(h, a, S "366 alice #x :End of /NAMES list.");
    CH_EXPECT_NONE(h, b);
    ch_feed(h, a, "TOPIC #x :the topic\r\n");
    CH_EXPECT(h, a, ":alice!alice@yard TOPIC #x :the topic");
    ch_feed(h, b, "JOIN #x\r\n");
    CH_EXPECT(h, b, ":bob!bob@yard JOIN #x");
    CH_EXPECT(h, b, S "332 bob #x :the topic");
    CH_EXPECT_PREFIX(h, b, S "333 bob #x alice!alice@yard ");
    CH_EXPECT(h, b, S "353 bob = #x :@alice bob");
    CH_EXPECT(h, b, S "366 bob #x :End of /NAMES list.");
    CH_EXPECT(h, a, ":bob!bob@yard JOIN #x");
    ch_feed(h, b, "NAMES #x\r\nTOPIC #x\r\nTOPIC #x :mine\r\nJOIN bad\r\n");
    CH_EXPECT(h, b, S "353 bob = #x :@alice bob");
    CH_EXPECT(h, b, S "366 bob #x :End of /NAMES list.");
    CH_EXPECT(h, b, S "332 bob #x :the topic");
    CH_EXPECT_PREFIX(h, b, S "333 bob #x alice!alice@yard ");
    CH_EXPECT(h, b, S "482 bob #x :You're not channel operator (+t)");
    CH_EXPECT(h, b, S "403 bob bad :No such channel");
    ch_feed(h, b, "PART #x :bye now\r\nPART #x\r\n");
    CH_EXPECT(h, b, ":bob!bob@yard PART #x :bye now");
    CH_EXPECT(h, b, S "442 bob #x :You're not on that channel");
    CH_EXPECT(h, a, ":bob!bob@yard PART #x :bye now");
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

/* A guest's nick change is one record however many channels hear it,
 * and with the log's queue full it is refused (437), never made unheard;
 * a guest logging in under another name likewise. */
static void test_nick_change_queue_full(void)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    ch_account(h, "alice", "pw-alice");
    int a = ch_login(h, "alice", "pw-alice", NULL);
    int g = ch_connect(h);
    ch_feed(h, g, "NICK zed\r\nUSER zed 0 * :Zed\r\n");
    CH_SKIP_TO(h, g, S "422 zed ");
    ch_feed(h, a, "JOIN #x,#y,#z\r\n");
    ch_feed(h, g, "JOIN #x,#y,#z\r\n");
    ch_discard(h, a);
    ch_discard(h, g);
    ch_feed(h, g, "NICK zeta\r\n");
    CH_EXPECT(h, g, ":zed!zed@yard NICK :zeta");
    CH_EXPECT(h, a, ":zed!zed@yard NICK :zeta"); /* once, for three channels */
    CH_EXPECT_NONE(h, a);
    queue_full = true;
    ch_feed(h, g, "NICK zorro\r\n");
    CH_EXPECT(h, g, S "437 zeta zorro :Nick/channel is temporarily unavailable (the server's "
                      "log is busy: try again in a moment)");
    CH_EXPECT_NONE(h, g);
    ASSERT(queue_refused == 1);
    ch_feed(h, g, "PASS alice:pw-alice\r\n"); /* logging in renames it: refused too */
    CH_SKIP_TO(h, g, S "437 zeta alice :Nick/channel is temporarily unavailable");
    ch_feed(h, g, "PRIVMSG #x :still zeta\r\n");
    queue_full = false;
    CH_EXPECT(h, a, ":zeta!zeta@yard PRIVMSG #x :still zeta");
    CH_EXPECT_NONE(h, a);
    ch_feed(h, g, "NICK zorro\r\n"); /* the queue has room again */
    CH_EXPECT(h, g, ":zeta!zeta@yard NICK :zorro");
    CH_EXPECT(h, a, ":zeta!zeta@yard NICK :zorro");
    ch_stop(h);
}

/* Flood control with one token at once and ten a second: what a request
 * costs shows as how long the next line (a PING) waits on the fake clock. */
static const char *const priced[] = {"guests", "flood-rate=10", "flood-burst=1", NULL};

/* The client's PING, behind a request that cost N tokens with one in the
 * bucket, is answered after N / 10 s of fake time, not before (within
 * 60 ms). */
static void pong_after(chat_harness_t *h, int id, unsigned wait_ms)
{
    ch_feed(h, id, "PING :priced\r\n");
    for (unsigned t = 0; t + 60 < wait_ms; t += 10) {
        const char *l;
        while ((l = ch_line(h, id)) != NULL)
            if (!strcmp(l, S "PONG yard :priced")) {
                fprintf(stderr, "PONG after %u ms, %u ms expected\n", t, wait_ms);
                exit(1);
            }
        ch_advance(h, 10 * 1000000ull);
    }
    ch_advance(h, 120 * 1000000ull);
    CH_SKIP_TO(h, id, S "PONG yard :priced");
}

/* Time enough for the bucket to be full again (one token). */
static void refill(chat_harness_t *h)
{
    for (int i = 0; i < 100; i++)
        ch_advance(h, 100 * 1000000ull);
}

/* LIST, WHO and NAMES cost a token per ten lines of their answer; a guest's
 * nick change a token per channel it is in; CHATHISTORY a token per ten
 * messages it returns. */
static void test_flood_prices(void)
{
    chat_harness_t *h = ch_start(priced);
    ch_account(h, "alice", "pw-alice");
    ch_account(h, "bob", "pw-bob");
    int a = ch_login(h, "alice", "pw-alice", NULL);
    int b = ch_login(h, "bob", "pw-bob", NULL);
    char join[1024];
    size_t n = (size_t)snprintf(join, sizeof join, "JOIN ");
    for (int i = 0; i < 45; i++)
        n += (size_t)snprintf(join + n, sizeof join - n, "%s#a%02d", i ? "," : "", i);
    snprintf(join + n, sizeof join - n, "\r\n");
    ch_feed(h, a, join);
    for (size_t i = 0; join[i]; i++)
        if (join[i] == 'a' && join[i - 1] == '#')
            join[i] = 'b';
    ch_feed(h, b, join);
    refill(h);
    ch_discard(h, a);
    ch_discard(h, b);
    ch_feed(h, a, "LIST\r\n"); /* 92 lines: 10 tokens */
    CH_SKIP_TO(h, a, S "323 alice :End of /LIST");
    pong_after(h, a, 1000);
    refill(h);
    ch_feed(h, a, "WHO #a00\r\n"); /* 2 lines: 1 token */
    CH_SKIP_TO(h, a, S "315 alice #a00 ");
    pong_after(h, a, 100);
    /* A guest in 12 channels: its NICK is told in 12. */
    int g = ch_connect(h);
    ch_feed(h, g, "NICK zed\r\nUSER zed 0 * :Zed\r\n");
    CH_SKIP_TO(h, g, S "422 zed ");
    ch_feed(h, g, "JOIN #a00,#a01,#a02,#a03,#a04,#a05,#a06,#a07,#a08,#a09,#a10,#a11\r\n");
    refill(h);
    ch_discard(h, g);
    ch_feed(h, g, "NICK zeta\r\n");
    CH_EXPECT(h, g, ":zed!zed@yard NICK :zeta");
    pong_after(h, g, 1200);
    /* 100 messages, then CHATHISTORY of them: 10 tokens. */
    for (int i = 0; i < 100; i++) {
        char line[64];
        snprintf(line, sizeof line, "PRIVMSG #a00 :message %d\r\n", i);
        ch_feed(h, a, line);
        ch_advance(h, 100 * 1000000ull);
    }
    refill(h);
    ch_discard(h, g);
    ch_feed(h, g, "CHATHISTORY LATEST #a00 * 100\r\n");
    CH_SKIP_TO(h, g, ":alice!alice@yard PRIVMSG #a00 :message 99");
    pong_after(h, g, 1000);
    ch_stop(h);
}

static void test_messages(void)
{
    int a, b;
    chat_harness_t *h = both_in_x("echo-message", &a, &b);
    ch_feed(h, b, "PRIVMSG #x :hi there\r\nPRIVMSG alice :psst\r\nPRIVMSG nobody :x\r\n");
    CH_EXPECT(h, a, ":bob!bob@yard PRIVMSG #x :hi there");
    CH_EXPECT(h, a, ":bob!bob@yard PRIVMSG alice :psst");
    CH_EXPECT_NONE(h, a);
    CH_EXPECT(h, b, S "401 bob nobody :No such nick/channel");
    CH_EXPECT_NONE(h, b); /* no echo without echo-message */
    /* With echo-message the sender hears its own, in order. */
    ch_feed(h, a, "PRIVMSG #x :back\r\nNOTICE bob :note\r\n");
    CH_EXPECT(h, a, ":alice!alice@yard PRIVMSG #x :back");
    CH_EXPECT(h, a, ":alice!alice@yard NOTICE bob :note");
    CH_EXPECT(h, b, ":alice!alice@yard PRIVMSG #x :back");
    CH_EXPECT(h, b, ":alice!alice@yard NOTICE bob :note");
    ch_feed(h, a, "PRIVMSG #x\r\nPRIVMSG #x :\r\nPRIVMSG #nowhere :x\r\n");
    CH_EXPECT(h, a, S "412 alice :No text to send");
    CH_EXPECT(h, a, S "412 alice :No text to send");
    CH_EXPECT_PREFIX(h, a, S "403 alice #nowhere ");
    ch_stop(h);
}

static void test_operator_errors(void)
{
    int a, b;
    chat_harness_t *h = both_in_x(NULL, &a, &b);
    ch_feed(h, b, "MODE #x +m\r\nKICK #x alice\r\nINVITE alice #x\r\nMODE #x +o bob\r\n");
    CH_EXPECT(h, b, S "482 bob #x :You're not channel operator");
    CH_EXPECT(h, b, S "482 bob #x :You're not channel operator");
    CH_EXPECT(h, b, S "443 bob alice #x :is already on channel");
    CH_EXPECT(h, b, S "482 bob #x :You're not channel operator");
    ch_feed(h, a, "KICK #x nobody\r\nMODE #x +o nobody\r\nINVITE nobody #x\r\nMODE\r\n"
                  "MODE #nowhere\r\nKICK #x\r\n");
    CH_EXPECT(h, a, S "401 alice nobody :No such nick/channel");
    CH_EXPECT(h, a, S "401 alice nobody :No such nick/channel");
    CH_EXPECT(h, a, S "401 alice nobody :No such nick/channel");
    CH_EXPECT(h, a, S "461 alice MODE :Not enough parameters");
    CH_EXPECT_PREFIX(h, a, S "403 alice #nowhere ");
    CH_EXPECT(h, a, S "461 alice KICK :Not enough parameters");
    CH_EXPECT_NONE(h, a);
    /* An operator's MODE and KICK reach everyone. */
    ch_feed(h, a, "MODE #x +m\r\n");
    CH_EXPECT(h, a, ":alice!alice@yard MODE #x +m");
    CH_EXPECT(h, b, ":alice!alice@yard MODE #x +m");
    ch_feed(h, a, "KICK #x bob :out\r\n");
    CH_EXPECT(h, a, ":alice!alice@yard KICK #x bob :out");
    CH_EXPECT(h, b, ":alice!alice@yard KICK #x bob :out");
    ch_feed(h, b, "PRIVMSG #x :still here?\r\n");
    CH_EXPECT_PREFIX(h, b, S "404 bob #x ");
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

/* Whoever creates a channel is its operator, a guest too (issue 40): NAMES
 * and WHOIS show its '@', it sets modes, the topic under +t, kicks and
 * invites; it gives and takes ranks of other guests; the rank lasts while
 * it is in the channel. */
static void test_guest_creator_is_operator(void)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    int g = guest(h, "zed");
    int y = guest(h, "yan");
    ch_feed(h, g, "JOIN #g\r\n");
    CH_SKIP_TO(h, g, S "353 zed = #g :@zed");
    ch_feed(h, y, "JOIN #g\r\n");
    CH_SKIP_TO(h, y, S "353 yan = #g :yan @zed");
    ch_discard(h, g);
    ch_discard(h, y);
    ch_feed(h, y, "WHOIS zed\r\n");
    CH_SKIP_TO(h, y, S "319 yan zed :@#g");
    ch_discard(h, y);
    ch_feed(h, y, "MODE #g +m\r\nTOPIC #g :no\r\n");
    CH_EXPECT(h, y, S "482 yan #g :You're not channel operator");
    CH_EXPECT(h, y, S "482 yan #g :You're not channel operator (+t)");
    ch_feed(h, g, "MODE #g +m\r\n");
    CH_EXPECT(h, g, ":zed!zed@yard MODE #g +m");
    ch_feed(h, g, "TOPIC #g :mine\r\n");
    CH_EXPECT(h, g, ":zed!zed@yard TOPIC #g :mine");
    ch_feed(h, g, "MODE #g +v yan\r\n");
    CH_EXPECT(h, g, ":zed!zed@yard MODE #g +v yan");
    ch_feed(h, g, "NAMES #g\r\n");
    CH_EXPECT(h, g, S "353 zed = #g :+yan @zed");
    CH_EXPECT(h, g, S "366 zed #g :End of /NAMES list.");
    ch_discard(h, y);
    ch_feed(h, y, "PRIVMSG #g :voiced\r\n");
    CH_EXPECT(h, g, ":yan!yan@yard PRIVMSG #g :voiced");
    ch_feed(h, g, "MODE #g -v+o yan yan\r\n");
    CH_EXPECT(h, g, ":zed!zed@yard MODE #g -v+o yan yan");
    ch_feed(h, y, "KICK #g zed :out\r\n");
    CH_SKIP_TO(h, g, ":yan!yan@yard KICK #g zed :out");
    ch_discard(h, y);
    /* Its rank went with it: back in, it is a member like any other. */
    ch_feed(h, g, "JOIN #g\r\n");
    CH_SKIP_TO(h, g, S "353 zed = #g :@yan zed");
    ch_discard(h, g);
    ch_feed(h, g, "MODE #g -m\r\n");
    CH_EXPECT(h, g, S "482 zed #g :You're not channel operator");
    ch_stop(h);
}

/* A refused mode parameter that is empty or has spaces is '*' in 696, so
 * the reply keeps its shape (issue 40, irctest's chmodes). */
static void test_mode_param_shown(void)
{
    int a, b;
    chat_harness_t *h = both_in_x(NULL, &a, &b);
    ch_feed(h, a, "MODE #x +k :two words\r\nMODE #x +k :\r\nMODE #x +l :\r\n"
                  "MODE #x +k 123456789012345678901234\r\n");
    CH_EXPECT(h, a, S "696 alice #x k * :A key is 1-23 characters, no spaces or commas");
    CH_EXPECT(h, a, S "696 alice #x k * :A key is 1-23 characters, no spaces or commas");
    CH_EXPECT(h, a, S "696 alice #x l * :A limit is a number of members, 1 to 1000000");
    CH_EXPECT(h, a, S "696 alice #x k * :A key is 1-23 characters, no spaces or commas");
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

/* INVITE alone lists the channels one is invited to (336, 337); INVITE
 * with one parameter lacks the channel (461). */
static void test_invite_list(void)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    int f = guest(h, "foo");
    int b = guest(h, "bar");
    ch_feed(h, b, "INVITE\r\n");
    CH_EXPECT(h, b, S "337 bar :End of /INVITE list");
    ch_feed(h, f, "JOIN #chan\r\nINVITE bar #chan\r\n");
    CH_SKIP_TO(h, f, S "341 foo bar #chan");
    ch_discard(h, b);
    ch_feed(h, b, "INVITE\r\nINVITE foo\r\n");
    CH_EXPECT(h, b, S "336 bar #chan");
    CH_EXPECT(h, b, S "337 bar :End of /INVITE list");
    CH_EXPECT(h, b, S "461 bar INVITE :Not enough parameters");
    CH_EXPECT_NONE(h, b);
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"channels", test_channels},
        {"invite_list", test_invite_list},
        {"messages", test_messages},
        {"nick_change_queue_full", test_nick_change_queue_full},
        {"flood_prices", test_flood_prices},
        {"operator_errors", test_operator_errors},
        {"guest_creator_is_operator", test_guest_creator_is_operator},
        {"mode_param_shown", test_mode_param_shown},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
