/* IRCv3 account-notify through the chat's sans-socket harness
 * (chat_harness.h): a guest that logs in after registering (SASL, or PASS
 * account:password) is announced as `ACCOUNT name` to the clients with the
 * capability that share a channel with it or monitor it (extended-monitor),
 * once each, through one account record in the log; not to those without
 * the capability, not to itself, not to the account's other connections.
 * When the login takes the nick of the account's other connections, the
 * NICK comes first and the ACCOUNT names the new nick; when the log cannot
 * take both records, neither is written and the guest stays a guest. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_cases.h"
#include "yard/chatlog.h"

/* SASL PLAIN payload: base64 of "\0alice\0pw-alice". */
#define PLAIN_ALICE "AGFsaWNlAHB3LWFsaWNl"

/* The log's queue of deferred records, full on demand (the link wraps
 * yard_chatlog_defer, tests/unit/CMakeLists.txt). */
bool __real_yard_chatlog_defer(yard_chatlog_t *log, const yard_chatlog_entry_t *e, unsigned n);
bool __wrap_yard_chatlog_defer(yard_chatlog_t *log, const yard_chatlog_entry_t *e, unsigned n);
static bool queue_full;

bool __wrap_yard_chatlog_defer(yard_chatlog_t *log, const yard_chatlog_entry_t *e, unsigned n)
{
    return queue_full ? false : __real_yard_chatlog_defer(log, e, n);
}

static const char *const guests[] = {"guests", NULL};

static chat_harness_t *start_with_guests(void)
{
    chat_harness_t *h = ch_start(guests);
    ch_account(h, "alice", "pw-alice");
    return h;
}

/* g sends alice's SASL PLAIN exchange (asking for the capability first
 * when cap_req), up to the answer, which is left unread. */
static void plain_alice(chat_harness_t *h, int g, bool cap_req)
{
    ch_feed(h, g, cap_req ? "CAP REQ :sasl\r\nAUTHENTICATE PLAIN\r\n" : "AUTHENTICATE PLAIN\r\n");
    CH_SKIP_TO(h, g, "AUTHENTICATE +");
    ch_feed(h, g, "AUTHENTICATE " PLAIN_ALICE "\r\n");
}

/* The guests zed (no capability) and wat (account-notify), both in #c,
 * with what they were sent so far read. */
static void zed_and_wat_in_c(chat_harness_t *h, int *z, int *w)
{
    *z = guest_caps(h, "zed", NULL);
    *w = guest_caps(h, "wat", "account-notify");
    ch_feed(h, *z, "JOIN #c\r\n");
    ch_feed(h, *w, "JOIN #c\r\n");
    ch_discard(h, *z);
    ch_discard(h, *w);
}

/* The guest in g logs in to alice with SASL PLAIN; what it is sent up to
 * its 903 is read, and checked against want900 (its 900 from the nick on). */
static void sasl_alice(chat_harness_t *h, int g, const char *want900)
{
    plain_alice(h, g, true);
    char line[200];
    snprintf(line, sizeof line, S "900 %s", want900);
    CH_EXPECT(h, g, line);
    CH_EXPECT_PREFIX(h, g, S "903 ");
}

/* In a channel: the members with the capability hear it once (with
 * account-tag, tagged with the new account), the others nothing. */
static void test_channel_members_hear_the_login(void)
{
    chat_harness_t *h = start_with_guests();
    int z = guest_caps(h, "zed", NULL);
    int w = guest_caps(h, "wat", "account-notify");
    int t = guest_caps(h, "tag", "account-notify account-tag");
    int n = guest_caps(h, "nocap", NULL);
    int far = guest_caps(h, "far", "account-notify"); /* shares no channel with zed */
    ch_feed(h, z, "JOIN #c\r\n");
    ch_feed(h, w, "JOIN #c\r\n");
    ch_feed(h, t, "JOIN #c\r\n");
    ch_feed(h, n, "JOIN #c\r\n");
    ch_feed(h, far, "JOIN #other\r\n");
    ch_discard(h, z);
    ch_discard(h, w);
    ch_discard(h, t);
    ch_discard(h, n);
    ch_discard(h, far);
    sasl_alice(h, z, "zed zed!zed@yard alice :You are now logged in as alice");
    CH_EXPECT_NONE(h, z);
    CH_EXPECT(h, w, ":zed!zed@yard ACCOUNT alice");
    CH_EXPECT_NONE(h, w);
    CH_EXPECT(h, t, "@account=alice :zed!zed@yard ACCOUNT alice");
    CH_EXPECT_NONE(h, t);
    CH_EXPECT_NONE(h, n);
    CH_EXPECT_NONE(h, far);
    ch_stop(h);
}

/* PASS account:password once registered is a login too. */
static void test_pass_login_is_told(void)
{
    chat_harness_t *h = start_with_guests();
    int z, w;
    zed_and_wat_in_c(h, &z, &w);
    ch_feed(h, z, "PASS alice:pw-alice\r\n");
    CH_EXPECT(h, z, S "900 zed zed!zed@yard alice :You are now logged in as alice");
    CH_EXPECT(h, w, ":zed!zed@yard ACCOUNT alice");
    CH_EXPECT_NONE(h, w);
    ch_stop(h);
}

/* extended-monitor: a watcher that monitors the nick hears it without
 * sharing a channel, only with both capabilities; one that also shares
 * a channel hears it once. */
static void test_monitor_watchers(void)
{
    chat_harness_t *h = start_with_guests();
    int both = guest_caps(h, "both", "extended-monitor account-notify");
    int mon = guest_caps(h, "mon", "extended-monitor");
    int an = guest_caps(h, "an", "account-notify");
    int twice = guest_caps(h, "twice", "extended-monitor account-notify");
    ch_feed(h, both, "MONITOR + bar\r\n");
    ch_feed(h, mon, "MONITOR + bar\r\n");
    ch_feed(h, an, "MONITOR + bar\r\n");
    ch_feed(h, twice, "MONITOR + bar\r\n");
    int b = guest_caps(h, "bar", NULL);
    ch_feed(h, b, "JOIN #c\r\n");
    ch_feed(h, twice, "JOIN #c\r\n");
    ch_discard(h, b);
    ch_discard(h, both);
    ch_discard(h, mon);
    ch_discard(h, an);
    ch_discard(h, twice);
    sasl_alice(h, b, "bar bar!bar@yard alice :You are now logged in as alice");
    CH_EXPECT(h, both, ":bar!bar@yard ACCOUNT alice");
    CH_EXPECT_NONE(h, both);
    CH_EXPECT_NONE(h, mon);
    CH_EXPECT_NONE(h, an);
    CH_EXPECT(h, twice, ":bar!bar@yard ACCOUNT alice");
    CH_EXPECT_NONE(h, twice);
    ch_stop(h);
}

/* The account is connected elsewhere as "al": the guest takes that nick.
 * The channel hears the NICK, then the ACCOUNT by the new nick; alice's
 * other connection is told neither (its own nick, its own account). */
static void test_login_that_renames(void)
{
    chat_harness_t *h = start_with_guests();
    int a = ch_connect(h);
    ch_feed(h, a, "CAP LS 302\r\nCAP REQ :sasl account-notify\r\nNICK al\r\nUSER ual 0 * :Al\r\n"
                  "AUTHENTICATE PLAIN\r\n");
    CH_SKIP_TO(h, a, "AUTHENTICATE +");
    ch_feed(h, a, "AUTHENTICATE " PLAIN_ALICE "\r\nCAP END\r\n");
    CH_SKIP_TO(h, a, S "422 al ");
    ch_feed(h, a, "JOIN #c\r\n");
    int z, w;
    zed_and_wat_in_c(h, &z, &w);
    ch_discard(h, a);
    plain_alice(h, z, true);
    CH_EXPECT(h, z, ":zed!zed@yard NICK :al");
    CH_EXPECT(h, z, S "900 al al!al@yard alice :You are now logged in as alice");
    CH_EXPECT(h, w, ":zed!zed@yard NICK :al");
    CH_EXPECT(h, w, ":al!al@yard ACCOUNT alice");
    CH_EXPECT_NONE(h, w);
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

/* The log's queue is full: the login is refused (437), nothing is told,
 * and the guest is still one; once there is room, it logs in and is told. */
static void test_full_log_tells_nothing(void)
{
    chat_harness_t *h = start_with_guests();
    int z, w;
    zed_and_wat_in_c(h, &z, &w);
    queue_full = true;
    plain_alice(h, z, true);
    CH_EXPECT_PREFIX(h, z, S "437 ");
    CH_EXPECT_NONE(h, z);
    queue_full = false;
    ch_feed(h, w, "WHOIS zed\r\n");
    char *whois = ch_take_all(h, w);
    ASSERT(strstr(whois, S "318 wat zed ") != NULL);
    ASSERT(strstr(whois, " 330 ") == NULL); /* still a guest */
    ASSERT(strstr(whois, "ACCOUNT") == NULL);
    free(whois);
    plain_alice(h, z, false);
    CH_EXPECT(h, z, S "900 zed zed!zed@yard alice :You are now logged in as alice");
    CH_EXPECT(h, w, ":zed!zed@yard ACCOUNT alice");
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"channel_members_hear_the_login", test_channel_members_hear_the_login},
        {"pass_login_is_told", test_pass_login_is_told},
        {"monitor_watchers", test_monitor_watchers},
        {"login_that_renames", test_login_that_renames},
        {"full_log_tells_nothing", test_full_log_tells_nothing},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
