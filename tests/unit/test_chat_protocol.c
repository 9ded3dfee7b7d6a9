/* The chat's replies line by line, through the sans-socket harness
 * (chat_harness.h): registration and its numerics, CAP, PING, channels,
 * messages between two clients, the operators' errors, CHATHISTORY in a
 * batch, the command table's answers and bad input. The formats are the
 * ones tests/integration/test_chat*.py expect of the real server. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat_harness.h"
#include "test.h"
#include "yard/chat_accounts.h"
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

#define S ":yard "
/* CHATHISTORY's answer to a subcommand's parameters it cannot use. */
#define HIST_INVALID(sub) \
    S "FAIL CHATHISTORY INVALID_PARAMS " sub " :Give a target, a reference and a limit of 1 to 1000"

static chat_harness_t *start(void)
{
    chat_harness_t *h = ch_start(NULL);
    ch_account(h, "alice", "pw-alice");
    ch_account(h, "bob", "pw-bob");
    return h;
}

/* alice (with caps) made #x and is its operator, bob joined it; what they
 * were sent until then is read. */
static chat_harness_t *both_in_x(const char *alice_caps, int *a, int *b)
{
    chat_harness_t *h = start();
    *a = ch_login(h, "alice", "pw-alice", alice_caps);
    *b = ch_login(h, "bob", "pw-bob", NULL);
    ch_feed(h, *a, "JOIN #x\r\n");
    ch_feed(h, *b, "JOIN #x\r\n");
    ch_discard(h, *a);
    ch_discard(h, *b);
    return h;
}

static void test_welcome(void)
{
    chat_harness_t *h = start();
    int a = ch_connect(h);
    CH_EXPECT_NONE(h, a);
    ch_feed(h, a, "PASS pw-alice\r\nNICK alice\r\n");
    CH_EXPECT_NONE(h, a); /* USER is still to come */
    ch_feed(h, a, "USER alice 0 * :Alice A\r\n");
    CH_EXPECT(h, a, S "001 alice :Welcome to the yard chat, alice");
    CH_EXPECT_PREFIX(h, a, S "002 alice :Your host is yard, running Switchyard ");
    CH_EXPECT(h, a, S "003 alice :This server speaks an IRC subset; see docs/chat.md");
    CH_EXPECT_PREFIX(h, a, S "004 alice yard ");
    const char *l = CH_EXPECT_PREFIX(h, a, S "005 alice ");
    ASSERT(strstr(l, " NETWORK=Switchyard "));
    ASSERT(strstr(l, " CASEMAPPING=rfc1459 "));
    ASSERT(strstr(l, " CHANTYPES=#& "));
    ASSERT(strstr(l, " PREFIX=(ov)@+ "));
    ASSERT(strstr(l, " CHANMODES=,k,l,MRimnt "));
    ASSERT(strstr(l, " NICKLEN=30 "));
    ASSERT(strstr(l, " :are supported by this server"));
    l = CH_EXPECT_PREFIX(h, a, S "005 alice ");
    ASSERT(strstr(l, " CHANLIMIT=#&:50 "));
    ASSERT(strstr(l, " CHATHISTORY=1000 "));
    ASSERT(strstr(l, " TARGMAX=PRIVMSG:4,NOTICE:4,"));
    ASSERT(strstr(l, " ELIST=MNU "));
    CH_EXPECT(h, a, S "422 alice :MOTD File is missing");
    CH_EXPECT_NONE(h, a);
    /* Registered: a second USER or PASS is 462. */
    ch_feed(h, a, "USER alice 0 * :again\r\nPASS x\r\n");
    CH_EXPECT(h, a, S "462 alice :You may not reregister");
    CH_EXPECT(h, a, S "462 alice :You may not reregister");
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

/* The data directory's motd: a 372 per line (CR LF or LF, blank lines
 * dropped), in the welcome and for MOTD alike. */
static void test_motd(void)
{
    static const char *const files[] = {"motd", "Welcome, \xc3\xa9t\xc3\xa9 \xf0\x9f\x8d\x8a\r\n"
                                                "rules: be kind\n\nbye\n",
                                        NULL};
    chat_harness_t *h = ch_start_files(NULL, files);
    ch_account(h, "alice", "pw-alice");
    int a = ch_connect(h);
    ch_feed(h, a, "PASS pw-alice\r\nNICK alice\r\nUSER alice 0 * :A\r\n");
    for (int round = 0; round < 2; round++) {
        CH_SKIP_TO(h, a, S "375 alice :- yard Message of the day -");
        CH_EXPECT(h, a, S "372 alice :- Welcome, \xc3\xa9t\xc3\xa9 \xf0\x9f\x8d\x8a");
        CH_EXPECT(h, a, S "372 alice :- rules: be kind");
        CH_EXPECT(h, a, S "372 alice :- bye");
        CH_EXPECT(h, a, S "376 alice :End of /MOTD command.");
        CH_EXPECT_NONE(h, a);
        ch_feed(h, a, "MOTD\r\n");
    }
    ch_stop(h);
}

/* TIME reads the wall clock of the effects context (the harness's fake
 * one), not the system's: a day on the fake clock is a day in the reply. */
static void test_time_is_the_effects_clock(void)
{
    static const char *const no_pings[] = {"ping-interval-ms=0", NULL};
    chat_harness_t *h = ch_start(no_pings);
    ch_account(h, "alice", "pw-alice");
    int a = ch_login(h, "alice", "pw-alice", NULL);
    for (int day = 0; day < 2; day++) {
        time_t secs = (time_t)(ch_wall(h) / 1000000000);
        struct tm tm;
        char want[128];
        gmtime_r(&secs, &tm);
        size_t n = (size_t)snprintf(want, sizeof want, S "391 alice yard :");
        strftime(want + n, sizeof want - n, "%Y-%m-%dT%H:%M:%S", &tm);
        ch_feed(h, a, "TIME\r\n");
        const char *l = CH_EXPECT_PREFIX(h, a, want);
        ASSERT_EQ(strlen(l), strlen(want) + 5); /* ".mmmZ" */
        CH_EXPECT_NONE(h, a);
        ch_advance(h, 86400 * (uint64_t)1000000000);
    }
    ASSERT(!ch_closed(h, a));
    ch_stop(h);
}

static void test_registration_errors(void)
{
    chat_harness_t *h = start();
    int c = ch_connect(h);
    ch_feed(h, c, "JOIN #x\r\nFOO bar\r\nNICK\r\n");
    CH_EXPECT(h, c, S "451 * JOIN :You have not registered");
    CH_EXPECT(h, c, S "451 * FOO :You have not registered");
    CH_EXPECT(h, c, S "431 * :No nickname given");
    ch_feed(h, c, "USER a\r\nNICK 9lives\r\n");
    CH_EXPECT(h, c, S "461 * USER :Not enough parameters");
    CH_EXPECT(h, c, S "432 * 9lives :Erroneous nickname");
    CH_EXPECT_NONE(h, c);
    /* An account's nick in use by a logged-in client is 433 for a guest. */
    ch_stop(h);

    const char *guests[] = {"guests", NULL};
    h = ch_start(guests);
    ch_account(h, "ana", "pw-ana");
    int z = ch_connect(h);
    ch_feed(h, z, "NICK ANA\r\nUSER zed 0 * :Zed\r\n");
    CH_EXPECT_PREFIX(h, z, S "433 * ANA :Nickname is reserved for an account: log in");
    CH_EXPECT_NONE(h, z);
    ch_feed(h, z, "NICK zed\r\n");
    CH_SKIP_TO(h, z, S "001 zed ");
    int y = ch_connect(h);
    ch_feed(h, y, "NICK Zed\r\nUSER y 0 * :Y\r\n");
    CH_EXPECT(h, y, S "433 * Zed :Nickname is already in use");
    CH_EXPECT_NONE(h, y);
    ch_stop(h);
}

static void test_bad_password(void)
{
    chat_harness_t *h = start();
    int c = ch_connect(h);
    ch_feed(h, c, "PASS wrong\r\nNICK alice\r\nUSER alice 0 * :A\r\n");
    CH_EXPECT_NONE(h, c); /* the answer to a failed check is delayed */
    ASSERT(!ch_closed(h, c));
    ASSERT(ch_next_wake(h) > ch_now(h));
    ch_advance(h, ch_next_wake(h) - ch_now(h));
    CH_EXPECT(h, c, S "464 alice :Password incorrect");
    CH_EXPECT(h, c, "ERROR :Closing Link: password incorrect");
    ASSERT(ch_closed(h, c));
    ch_stop(h);
}

static void test_cap(void)
{
    chat_harness_t *h = start();
    int c = ch_connect(h);
    ch_feed(h, c, "CAP LS 302\r\n");
    CH_EXPECT(h, c, S "CAP * LS :account-tag away-notify batch draft/chathistory "
                      "draft/read-marker echo-message extended-join message-tags multi-prefix "
                      "sasl=PLAIN server-time userhost-in-names");
    ch_feed(h, c, "CAP REQ :echo-message server-time\r\nCAP REQ :away-notify no-such-cap\r\n");
    CH_EXPECT(h, c, S "CAP * ACK :echo-message server-time");
    CH_EXPECT(h, c, S "CAP * NAK :away-notify no-such-cap");
    /* Registration waits for CAP END. */
    ch_feed(h, c, "PASS pw-alice\r\nNICK alice\r\nUSER alice 0 * :A\r\n");
    CH_EXPECT_NONE(h, c);
    ch_feed(h, c, "CAP LIST\r\nCAP END\r\n");
    CH_EXPECT(h, c, S "CAP alice LIST :echo-message server-time");
    CH_EXPECT(h, c, S "001 alice :Welcome to the yard chat, alice");
    ch_stop(h);
}

static void test_ping(void)
{
    chat_harness_t *h = start();
    int a = ch_login(h, "alice", "pw-alice", NULL);
    ch_feed(h, a, "PING :still-here\r\nPONG :yard\r\n");
    CH_EXPECT(h, a, S "PONG yard :still-here");
    CH_EXPECT_NONE(h, a); /* a PONG is not answered */
    /* A silent client is PINGed after --ping-interval-ms (120 s). */
    ch_advance(h, 120 * (uint64_t)1000000000);
    CH_EXPECT(h, a, "PING :yard");
    ch_stop(h);
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
    CH_EXPECT(h, a, S "441 alice nobody #x :They aren't on that channel");
    CH_EXPECT(h, a, S "441 alice nobody #x :They aren't on that channel");
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

static void test_chathistory_batch(void)
{
    chat_harness_t *h = start();
    int a = ch_login(h, "alice", "pw-alice", "batch message-tags");
    int b = ch_login(h, "bob", "pw-bob", NULL);
    ch_feed(h, a, "JOIN #h\r\n");
    ch_feed(h, b, "JOIN #h\r\nPRIVMSG #h :one\r\nPRIVMSG #h :two\r\n");
    ch_discard(h, a);
    ch_feed(h, a, "CHATHISTORY LATEST #h * 10\r\n");
    const char *l = CH_EXPECT_PREFIX(h, a, S "BATCH +");
    char ref[32];
    ASSERT_EQ(sscanf(l, ":yard BATCH +%31s chathistory #h", ref), 1);
    char want[128];
    snprintf(want, sizeof want, S "BATCH +%s chathistory #h", ref);
    ASSERT_STR_EQ(l, want);
    snprintf(want, sizeof want, ";batch=%s :bob!bob@yard PRIVMSG #h :one", ref);
    l = CH_EXPECT_PREFIX(h, a, "@msgid=");
    ASSERT(strstr(l, want));
    snprintf(want, sizeof want, ";batch=%s :bob!bob@yard PRIVMSG #h :two", ref);
    l = CH_EXPECT_PREFIX(h, a, "@msgid=");
    ASSERT(strstr(l, want));
    snprintf(want, sizeof want, S "BATCH -%s", ref);
    CH_EXPECT(h, a, want);
    CH_EXPECT_NONE(h, a);
    /* Without batch (bob): the same lines, no batch around them. */
    ch_discard(h, b);
    ch_feed(h, b, "CHATHISTORY LATEST #h * 1\r\nCHATHISTORY LATEST\r\nCHATHISTORY\r\n");
    CH_EXPECT(h, b, ":bob!bob@yard PRIVMSG #h :two");
    CH_EXPECT(h, b, HIST_INVALID("LATEST"));
    CH_EXPECT(h, b, S "FAIL CHATHISTORY UNKNOWN_COMMAND * :Unknown subcommand");
    CH_EXPECT_NONE(h, b);
    ch_stop(h);
}

/* A timestamp past 2262 does not fit the log's nanoseconds: it is refused,
 * not multiplied past INT64_MAX (found by fuzz/fuzz_chat.c). */
static void test_chathistory_far_timestamp(void)
{
    chat_harness_t *h = start();
    int a = ch_login(h, "alice", "pw-alice", NULL);
    ch_feed(h, a, "JOIN #h\r\nPRIVMSG #h :one\r\n");
    ch_discard(h, a);
    ch_feed(h, a, "CHATHISTORY BEFORE #h timestamp=4040-01-01T00:00:00.000Z 5\r\n"
                  "CHATHISTORY AFTER #h timestamp=1000-01-01T00:00:00.000Z 5\r\n"
                  "MARKREAD #h timestamp=9999-12-31T23:59:59.999Z\r\n");
    CH_EXPECT(h, a, HIST_INVALID("BEFORE"));
    CH_EXPECT(h, a, HIST_INVALID("AFTER"));
    CH_EXPECT_PREFIX(h, a, S "FAIL MARKREAD INVALID_PARAMS #h :");
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

static void test_command_table(void)
{
    chat_harness_t *h = start();
    int a = ch_login(h, "alice", "pw-alice", NULL);
    ch_feed(h, a, "FROB\r\nfrob x\r\nJOIN\r\nPRIVMSG\r\nWHOIS\r\nNAMES\r\nKICK #x\r\n");
    CH_EXPECT(h, a, S "421 alice FROB :Unknown command");
    CH_EXPECT(h, a, S "421 alice FROB :Unknown command");
    CH_EXPECT(h, a, S "461 alice JOIN :Not enough parameters");
    CH_EXPECT(h, a, S "411 alice :No recipient given (PRIVMSG)");
    CH_EXPECT(h, a, S "431 alice :No nickname given");
    CH_EXPECT(h, a, S "366 alice * :End of /NAMES list.");
    CH_EXPECT(h, a, S "461 alice KICK :Not enough parameters");
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

static void test_bad_input(void)
{
    chat_harness_t *h = start();
    int a = ch_login(h, "alice", "pw-alice", NULL);
    char big[1200];
    memset(big, 'x', sizeof big);
    memcpy(big, "PRIVMSG #x :", 12);
    ch_feed_n(h, a, big, sizeof big);
    ch_feed(h, a, "still the long line\r\nPING :after-long\r\n");
    CH_EXPECT(h, a, S "417 alice :Input line was too long");
    CH_EXPECT(h, a, S "PONG yard :after-long");
    static const char nul[] = "PING :a\0b\r\nPING :after-nul\r\n";
    ch_feed_n(h, a, nul, sizeof nul - 1);
    CH_EXPECT(h, a, S "421 alice * :Line contains a NUL byte");
    CH_EXPECT(h, a, S "PONG yard :after-nul");
    /* A line in pieces is answered once it is whole. */
    ch_feed(h, a, "PI");
    ch_feed(h, a, "NG :pie");
    CH_EXPECT_NONE(h, a);
    ch_feed(h, a, "ces\n");
    CH_EXPECT(h, a, S "PONG yard :pieces");
    /* QUIT closes with an ERROR line. */
    ch_feed(h, a, "QUIT :done\r\nPING :never\r\n");
    CH_EXPECT_PREFIX(h, a, "ERROR :Closing Link: ");
    CH_EXPECT_NONE(h, a);
    ASSERT(ch_closed(h, a));
    ch_stop(h);
}

/* A guest that registers as nick (user name user, realname "Real Name"),
 * with what it was sent until its welcome's end read. */
static int guest(chat_harness_t *h, const char *nick)
{
    int g = ch_connect(h);
    char line[200];
    snprintf(line, sizeof line, "NICK %s\r\nUSER u%s 0 * :Real %s\r\n", nick, nick, nick);
    ch_feed(h, g, line);
    snprintf(line, sizeof line, S "422 %s ", nick);
    CH_SKIP_TO(h, g, line);
    return g;
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

/* USER's user name and realname are kept and shown by WHOIS (311) and
 * WHOWAS (314); an empty realname is 461 (issue 40). */
static void test_user_fields(void)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    int e = ch_connect(h);
    ch_feed(h, e, "NICK zed\r\nUSER u 0 * :\r\n");
    CH_EXPECT(h, e, S "461 zed USER :Not enough parameters");
    CH_EXPECT_NONE(h, e);
    ch_feed(h, e, "USER zuser 0 * :Zed Real\r\n");
    CH_SKIP_TO(h, e, S "422 zed ");
    int y = guest(h, "yan");
    ch_feed(h, y, "WHOIS zed\r\n");
    CH_EXPECT(h, y, S "311 yan zed zuser yard * :Zed Real");
    ch_discard(h, y);
    ch_feed(h, e, "QUIT\r\n");
    ch_feed(h, y, "WHOWAS zed\r\n");
    CH_EXPECT(h, y, S "314 yan zed zuser yard * :Zed Real");
    ch_stop(h);
}

/* --server-name names the server in 002, 004, PONG, TIME, VERSION and
 * WHOIS's 312 (issue 40); the numerics' source stays "yard". */
static void test_server_name(void)
{
    const char *flags[] = {"server-name=My.Little.Server", NULL};
    chat_harness_t *h = ch_start(flags);
    ch_account(h, "alice", "pw-alice");
    int a = ch_connect(h);
    ch_feed(h, a, "PASS pw-alice\r\nNICK alice\r\nUSER alice 0 * :Alice\r\n");
    CH_SKIP_TO(h, a, S "002 alice :Your host is My.Little.Server, running Switchyard ");
    CH_SKIP_TO(h, a, S "004 alice My.Little.Server ");
    ch_discard(h, a);
    ch_feed(h, a, "PING :tok\r\nTIME\r\nVERSION\r\nWHOIS alice\r\n");
    CH_EXPECT(h, a, S "PONG My.Little.Server :tok");
    CH_EXPECT_PREFIX(h, a, S "391 alice My.Little.Server :");
    CH_EXPECT_PREFIX(h, a, S "351 alice switchyard-chat My.Little.Server :");
    CH_SKIP_TO(h, a, S "312 alice alice My.Little.Server :");
    ch_stop(h);
}

/* WHO for a nick, a mask and '*', with USER's fields, H or G, and the
 * rank's prefix in a channel's WHO; +i hides a user from masks only
 * (issue 40). */
static void test_who(void)
{
    const char *flags[] = {"guests", "server-name=irc.example", NULL};
    chat_harness_t *h = ch_start(flags);
    int z = guest(h, "zed");
    int y = guest(h, "yan");
    ch_feed(h, z, "JOIN #w\r\nAWAY :gone\r\n");
    ch_discard(h, z);
    ch_feed(h, y, "WHO ZED\r\n");
    CH_EXPECT(h, y, S "352 yan * uzed yard irc.example zed G :0 Real zed");
    CH_EXPECT(h, y, S "315 yan ZED :End of /WHO list.");
    ch_feed(h, y, "WHO z*\r\nWHO *\r\nWHO nobody\r\nWHO #w\r\n");
    CH_EXPECT(h, y, S "352 yan * uzed yard irc.example zed G :0 Real zed");
    CH_EXPECT(h, y, S "315 yan z* :End of /WHO list.");
    CH_EXPECT(h, y, S "352 yan * uyan yard irc.example yan H :0 Real yan");
    CH_EXPECT(h, y, S "352 yan * uzed yard irc.example zed G :0 Real zed");
    CH_EXPECT(h, y, S "315 yan * :End of /WHO list.");
    CH_EXPECT(h, y, S "315 yan nobody :End of /WHO list.");
    CH_EXPECT(h, y, S "352 yan #w uzed yard irc.example zed G@ :0 Real zed");
    CH_EXPECT(h, y, S "315 yan #w :End of /WHO list.");
    /* +i: not found by a mask, still by its nick, and by a mask once the
     * two share a channel. */
    ch_feed(h, z, "AWAY\r\nMODE zed +i\r\n");
    ch_feed(h, y, "WHO z*\r\nWHO zed\r\n");
    CH_EXPECT(h, y, S "315 yan z* :End of /WHO list.");
    CH_EXPECT(h, y, S "352 yan * uzed yard irc.example zed H :0 Real zed");
    CH_EXPECT(h, y, S "315 yan zed :End of /WHO list.");
    ch_feed(h, y, "JOIN #w\r\n");
    ch_discard(h, y);
    ch_feed(h, y, "WHO z*\r\n");
    CH_EXPECT(h, y, S "352 yan * uzed yard irc.example zed H :0 Real zed");
    ch_stop(h);
}

/* The smaller deviations irctest found (issue 40): no 331 in a JOIN's
 * burst, NAMES of an unknown channel and bare NAMES, LUSERS's 265/266, a
 * bare PING, KICK with a channel per nick, INVITE to a channel nobody is
 * in, an endless AUTHENTICATE, userhost-in-names. */
static void test_smaller_deviations(void)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    ch_account(h, "alice", "pw-alice");
    int z = guest(h, "zed");
    int y = guest(h, "yan");
    int x = guest(h, "xi");
    ch_feed(h, z, "JOIN #a\r\n");
    CH_EXPECT(h, z, ":zed!zed@yard JOIN #a");
    CH_EXPECT(h, z, S "353 zed = #a :@zed");
    CH_EXPECT(h, z, S "366 zed #a :End of /NAMES list.");
    ch_feed(h, z, "TOPIC #a\r\nNAMES #nope,bad\r\n");
    CH_EXPECT(h, z, S "331 zed #a :No topic is set"); /* asked for: said */
    CH_EXPECT(h, z, S "366 zed #nope :End of /NAMES list.");
    CH_EXPECT(h, z, S "366 zed bad :End of /NAMES list.");
    ch_feed(h, y, "JOIN #b\r\n");
    ch_feed(h, x, "JOIN #a,#b\r\n");
    ch_feed(h, y, "JOIN #a\r\n");
    ch_discard(h, y);
    ch_feed(h, y, "NAMES\r\n");
    CH_EXPECT(h, y, S "353 yan = #a :xi yan @zed");
    CH_EXPECT(h, y, S "353 yan = #b :xi @yan");
    CH_EXPECT(h, y, S "366 yan * :End of /NAMES list.");
    ch_feed(h, y, "LUSERS\r\nPING\r\n");
    CH_SKIP_TO(h, y, S "265 yan 3 3 :Current local users 3, max 3");
    CH_EXPECT(h, y, S "266 yan 3 3 :Current global users 3, max 3");
    CH_EXPECT(h, y, S "461 yan PING :Not enough parameters");
    /* Two nicks, each from the channel in its place, each its own KICK. */
    ch_discard(h, z);
    ch_feed(h, z, "KICK #a,#a yan,xi :bye\r\n");
    CH_EXPECT(h, z, ":zed!zed@yard KICK #a yan :bye");
    CH_EXPECT(h, z, ":zed!zed@yard KICK #a xi :bye");
    CH_EXPECT_NONE(h, z);
    ch_discard(h, y);
    ch_feed(h, z, "INVITE yan #empty\r\n");
    CH_EXPECT(h, z, S "341 zed yan #empty");
    CH_EXPECT(h, y, ":zed!zed@yard INVITE yan #empty");
    ch_discard(h, x);
    ch_feed(h, x, "CAP REQ :multi-prefix userhost-in-names\r\nNAMES #b\r\n");
    CH_EXPECT(h, x, S "CAP xi ACK :multi-prefix userhost-in-names");
    CH_EXPECT(h, x, S "353 xi = #b :xi!uxi@yard @yan!uyan@yard");
    /* SASL past any PLAIN login's length: 904, once. */
    int a = ch_connect(h);
    ch_feed(h, a, "CAP LS 302\r\nCAP REQ :sasl\r\nAUTHENTICATE PLAIN\r\n");
    ch_discard(h, a);
    char piece[420] = "AUTHENTICATE ";
    memset(piece + 13, 'A', 400);
    memcpy(piece + 413, "\r\n", 3);
    for (int i = 0; i < 20; i++)
        ch_feed(h, a, piece);
    CH_EXPECT(h, a, S "904 * :SASL authentication failed: the PLAIN message is too long");
    ch_stop(h);
}

/* LIST's filters, announced as ELIST=MNU: names and masks, "!mask",
 * ">N" and "<N" users (issue 40). */
static void test_list_filters(void)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    int z = guest(h, "zed");
    int y = guest(h, "yan");
    ch_feed(h, z, "JOIN #chan1,#chan2\r\n");
    ch_feed(h, y, "JOIN #chan2\r\n");
    ch_discard(h, y);
    ch_feed(h, y, "LIST *an1\r\nLIST !#c*n2\r\nLIST >1\r\nLIST <1\r\nLIST #CH*,>0\r\n");
    CH_EXPECT(h, y, S "321 yan Channel :Users  Name");
    CH_EXPECT(h, y, S "322 yan #chan1 1 :");
    CH_EXPECT(h, y, S "323 yan :End of /LIST");
    CH_EXPECT(h, y, S "321 yan Channel :Users  Name");
    CH_EXPECT(h, y, S "322 yan #chan1 1 :");
    CH_EXPECT(h, y, S "323 yan :End of /LIST");
    CH_EXPECT(h, y, S "321 yan Channel :Users  Name");
    CH_EXPECT(h, y, S "322 yan #chan2 2 :");
    CH_EXPECT(h, y, S "323 yan :End of /LIST");
    CH_EXPECT(h, y, S "321 yan Channel :Users  Name");
    CH_EXPECT(h, y, S "323 yan :End of /LIST");
    CH_EXPECT(h, y, S "321 yan Channel :Users  Name");
    CH_EXPECT(h, y, S "322 yan #chan1 1 :");
    CH_EXPECT(h, y, S "322 yan #chan2 2 :");
    CH_EXPECT(h, y, S "323 yan :End of /LIST");
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

/* WHOWAS lists a nick's departures newest first, up to its count (issue
 * 40, irctest's whowas). */
static void test_whowas_count(void)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    int y = guest(h, "yan");
    for (int i = 2; i <= 3; i++) {
        int z = ch_connect(h);
        char line[80];
        snprintf(line, sizeof line, "NICK zed\r\nUSER ident%d 0 * :Real\r\n", i);
        ch_feed(h, z, line);
        CH_SKIP_TO(h, z, S "422 zed ");
        ch_feed(h, z, "QUIT\r\n");
    }
    ch_discard(h, y);
    ch_feed(h, y, "WHOWAS zed\r\n");
    CH_EXPECT(h, y, S "314 yan zed ident3 yard * :Real");
    CH_EXPECT_PREFIX(h, y, S "312 yan zed yard :");
    CH_EXPECT(h, y, S "314 yan zed ident2 yard * :Real");
    CH_EXPECT_PREFIX(h, y, S "312 yan zed yard :");
    CH_EXPECT(h, y, S "369 yan zed :End of WHOWAS");
    ch_feed(h, y, "WHOWAS zed 1\r\n");
    CH_EXPECT(h, y, S "314 yan zed ident3 yard * :Real");
    CH_EXPECT_PREFIX(h, y, S "312 yan zed yard :");
    CH_EXPECT(h, y, S "369 yan zed :End of WHOWAS");
    ch_feed(h, y, "WHOWAS zed -1\r\n");
    CH_SKIP_TO(h, y, S "314 yan zed ident2 ");
    ch_stop(h);
}

/* A guest's read markers are its connection's: set, read back, never moved
 * back, told after a JOIN's NAMES (issue 40). */
static void test_guest_read_markers(void)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    int z = ch_connect(h);
    ch_feed(h, z, "CAP LS 302\r\nCAP REQ :draft/read-marker\r\nNICK zed\r\n"
                  "USER z 0 * :Zed\r\nCAP END\r\n");
    CH_SKIP_TO(h, z, S "422 zed ");
    ch_feed(h, z, "MARKREAD #none\r\nJOIN #t\r\n");
    CH_EXPECT(h, z, S "MARKREAD #none *");
    CH_SKIP_TO(h, z, S "366 zed #t ");
    CH_EXPECT(h, z, S "MARKREAD #t *");
    ch_feed(h, z, "MARKREAD #t timestamp=2020-03-15T10:00:00.000Z\r\n"
                  "MARKREAD #T timestamp=2019-01-01T00:00:00.000Z\r\nPART #t\r\nJOIN #t\r\n");
    CH_EXPECT(h, z, S "MARKREAD #t timestamp=2020-03-15T10:00:00.000Z");
    CH_EXPECT(h, z, S "MARKREAD #T timestamp=2020-03-15T10:00:00.000Z");
    CH_SKIP_TO(h, z, S "366 zed #t ");
    CH_EXPECT(h, z, S "MARKREAD #t timestamp=2020-03-15T10:00:00.000Z");
    ch_stop(h);
}

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

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"welcome", test_welcome},
        {"motd", test_motd},
        {"time_is_the_effects_clock", test_time_is_the_effects_clock},
        {"registration_errors", test_registration_errors},
        {"bad_password", test_bad_password},
        {"cap", test_cap},
        {"ping", test_ping},
        {"channels", test_channels},
        {"messages", test_messages},
        {"nick_change_queue_full", test_nick_change_queue_full},
        {"flood_prices", test_flood_prices},
        {"operator_errors", test_operator_errors},
        {"chathistory_batch", test_chathistory_batch},
        {"chathistory_far_timestamp", test_chathistory_far_timestamp},
        {"command_table", test_command_table},
        {"guest_creator_is_operator", test_guest_creator_is_operator},
        {"user_fields", test_user_fields},
        {"server_name", test_server_name},
        {"who", test_who},
        {"smaller_deviations", test_smaller_deviations},
        {"list_filters", test_list_filters},
        {"mode_param_shown", test_mode_param_shown},
        {"whowas_count", test_whowas_count},
        {"guest_read_markers", test_guest_read_markers},
        {"bad_input", test_bad_input},
        {"oper", test_oper},
        {"oper_refused", test_oper_refused},
        {"oper_unknown_costs_the_same", test_oper_unknown_costs_the_same},
        {"kill", test_kill},
        {"wallops", test_wallops},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
