/* The chat's replies about the server and the session itself, line by line through the
 * sans-socket harness (chat_harness.h): CAP LS, LIST and REQ, the welcome's 004 and 005,
 * registration without a password when there are no guests, LIST, LUSERS, VERSION and
 * TIME, a user's own modes, and the commands the table answers 461 or 431. Moved from
 * tests/integration/test_chat_queries.py, test_chat_ircv3.py, test_chat_modes.py,
 * test_chat_history.py and test_chat_guests.py, which ran them against a real server of
 * one model. */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_cases.h"

#define CAPS_BEFORE_SASL                                                                    \
    "account-notify account-tag away-notify batch cap-notify draft/chathistory "            \
    "draft/event-playback draft/read-marker "                                               \
    "echo-message extended-join extended-monitor labeled-response message-tags multi-prefix "
#define CAPS_AFTER_SASL " server-time setname userhost-in-names"
#define ALL_CAPS CAPS_BEFORE_SASL "sasl" CAPS_AFTER_SASL

static chat_harness_t *ana_and_bo(void)
{
    chat_harness_t *h = ch_start(NULL);
    ch_account(h, "ana", "pw-ana");
    ch_account(h, "bo", "pw-bo");
    return h;
}

/* "YYYY-MM-DDTHH:MM:SS.mmmZ" and nothing after it. */
static bool iso_time_ms(const char *t)
{
    const char *shape = "dddd-dd-ddTdd:dd:dd.dddZ";
    for (; *shape; shape++, t++)
        if (*shape == 'd' ? !isdigit((unsigned char)*t) : *t != *shape)
            return false;
    return !*t;
}

/* LIST (every channel, then one by name in another case), LUSERS, VERSION, TIME, and
 * ISON and WHOIS without a parameter. */
static void test_list_lusers_version_time(void)
{
    chat_harness_t *h = ana_and_bo();
    int a = ch_login(h, "ana", "pw-ana", NULL);
    int b = ch_login(h, "bo", "pw-bo", NULL);
    ch_feed(h, a, "JOIN #one,#two\r\nTOPIC #two :the second\r\n");
    CH_SKIP_TO(h, a, ":ana!ana@yard TOPIC #two :the second");
    ch_feed(h, b, "JOIN #two\r\n");
    CH_SKIP_TO(h, b, S "366 bo #two ");
    ch_discard(h, a);
    ch_feed(h, a, "LIST\r\n");
    CH_EXPECT(h, a, S "321 ana Channel :Users  Name");
    CH_EXPECT(h, a, S "322 ana #one 1 :");
    CH_EXPECT(h, a, S "322 ana #two 2 :the second");
    CH_EXPECT(h, a, S "323 ana :End of /LIST");
    ch_feed(h, a, "LIST #TWO\r\n");
    CH_EXPECT(h, a, S "321 ana Channel :Users  Name");
    CH_EXPECT(h, a, S "322 ana #two 2 :the second");
    CH_EXPECT(h, a, S "323 ana :End of /LIST");
    ch_feed(h, a, "LUSERS\r\n");
    CH_SKIP_TO(h, a, S "251 ana :There are 2 users and 0 invisible on 1 servers");
    CH_SKIP_TO(h, a, S "254 ana 2 :channels formed");
    CH_SKIP_TO(h, a, S "255 ana :I have 2 clients and 0 servers");
    ch_discard(h, a);
    ch_feed(h, a, "VERSION\r\nTIME\r\n");
    CH_SKIP_TO(h, a, S "351 ana switchyard-chat yard :");
    const char *t = CH_SKIP_TO(h, a, S "391 ana yard :");
    if (!iso_time_ms(t + strlen(S "391 ana yard :"))) {
        fprintf(stderr, "TIME's answer is not an ISO time with milliseconds: '%s'\n", t);
        exit(1);
    }
    ch_discard(h, a);
    ch_feed(h, a, "ISON\r\nWHOIS\r\n");
    CH_EXPECT(h, a, S "461 ana ISON :Not enough parameters");
    CH_EXPECT(h, a, S "431 ana :No nickname given");
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

/* CAP LS gives values (sasl=PLAIN) only to a client that asked for 302. */
static void test_cap_ls_values_only_for_302(void)
{
    chat_harness_t *h = ana_and_bo();
    int old = ch_connect(h), new = ch_connect(h);
    ch_feed(h, old, "CAP LS\r\n");
    CH_EXPECT(h, old, S "CAP * LS :" ALL_CAPS);
    ch_feed(h, new, "CAP LS 302\r\n");
    CH_EXPECT(h, new, S "CAP * LS :" CAPS_BEFORE_SASL "sasl=PLAIN" CAPS_AFTER_SASL);
    ch_stop(h);
}

/* CAP LS, LIST and REQ after registration: a REQ is all or nothing, and '-' drops one. */
static void test_cap_ls_req_list(void)
{
    chat_harness_t *h = ana_and_bo();
    int c = ch_login(h, "ana", "pw-ana", "sasl message-tags");
    ch_discard(h, c);
    ch_feed(h, c, "CAP LS\r\nCAP LIST\r\n");
    CH_EXPECT(h, c, S "CAP ana LS :" ALL_CAPS);
    CH_EXPECT(h, c, S "CAP ana LIST :message-tags sasl");
    ch_feed(h, c, "CAP REQ :away-notify no-such-cap\r\n");
    CH_EXPECT(h, c, S "CAP ana NAK :away-notify no-such-cap");
    ch_feed(h, c, "CAP REQ :away-notify -message-tags\r\nCAP LIST\r\n");
    CH_EXPECT(h, c, S "CAP ana ACK :away-notify -message-tags");
    CH_EXPECT(h, c, S "CAP ana LIST :away-notify sasl");
    CH_EXPECT_NONE(h, c);
    ch_stop(h);
}

/* The tokens of a 005 line (between the nick and " :are supported..."), each with a
 * blank before and after it, into out. */
static void isupport_tokens(const char *line, char *out, size_t cap)
{
    const char *from = line + strlen(S "005 ana "), *end = strstr(from, " :are supported");
    if (!end) {
        fprintf(stderr, "not a 005 line: '%s'\n", line);
        exit(1);
    }
    snprintf(out, cap, " %.*s ", (int)(end - from), from);
}

/* The welcome's 004 and 005, then MODE on one's own nick (+i and +w kept, an unknown flag
 * 501, another's nick 502), and the list queries a client sends on JOIN. */
static void test_welcome_and_user_modes(void)
{
    chat_harness_t *h = ana_and_bo();
    int a = ch_connect(h);
    ch_feed(h, a, "PASS pw-ana\r\nNICK ana\r\nUSER ana 0 * :ana\r\n");
    const char *l = CH_SKIP_TO(h, a, S "004 ");
    ASSERT_STR_EQ(l, S "004 ana yard 0.1.0 Biow MRbeIiklmnostv beIklov");
    char first[1024], second[1024], tokens[2048];
    isupport_tokens(CH_EXPECT_PREFIX(h, a, S "005 ana "), first, sizeof first);
    isupport_tokens(CH_EXPECT_PREFIX(h, a, S "005 ana "), second, sizeof second);
    snprintf(tokens, sizeof tokens, "%s%s", first, second);
    const char *want[] = {" NETWORK=Switchyard ", " AWAYLEN=200 ",
                          " TARGMAX=PRIVMSG:4,NOTICE:4,WHOIS:4,USERHOST:5,KICK:4 ",
                          " PREFIX=(ov)@+ ", " CHANMODES=beI,k,l,MRimnst ", " MODES=4 ",
                          " WHOX ", " EXCEPTS ", " INVEX ", NULL};
    for (const char **w = want; *w; w++)
        if (!strstr(tokens, *w)) {
            fprintf(stderr, "005 lacks '%s': %s\n", *w, tokens);
            exit(1);
        }
    /* CHATHISTORY and the references it takes are told on one line. */
    const char *with_history = strstr(first, " CHATHISTORY=1000 ") ? first : second;
    ASSERT(strstr(with_history, " CHATHISTORY=1000 ") != NULL);
    ASSERT(strstr(with_history, " MSGREFTYPES=msgid,timestamp ") != NULL);
    CH_SKIP_TO(h, a, S "422 ana ");
    ch_discard(h, a);
    ch_feed(h, a, "MODE ana\r\nMODE ana +iw\r\nMODE ana -w+x\r\n");
    CH_EXPECT(h, a, S "221 ana +");
    CH_EXPECT(h, a, ":ana!ana@yard MODE ana :+iw");
    CH_EXPECT(h, a, S "501 ana :Unknown MODE flag");
    CH_EXPECT(h, a, ":ana!ana@yard MODE ana :-w");
    ch_feed(h, a, "JOIN #m\r\n");
    ch_discard(h, a);
    ch_feed(h, a, "MODE #m b\r\nMODE #m +e\r\nMODE #m I\r\nMODE #m +b x!*@*\r\n");
    CH_EXPECT(h, a, S "368 ana #m :End of channel ban list");
    CH_EXPECT(h, a, S "349 ana #m :End of channel exception list");
    CH_EXPECT(h, a, S "347 ana #m :End of channel invite list");
    CH_EXPECT(h, a, ":ana!ana@yard MODE #m +b x!*@*");
    ch_feed(h, a, "MODE ana\r\nMODE bo +i\r\n");
    CH_EXPECT(h, a, S "221 ana +i");
    CH_EXPECT(h, a, S "502 ana :Cannot change mode for other users");
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

/* Without --guests, a client that registers without a password is refused and closed. */
static void test_no_guests_no_password(void)
{
    chat_harness_t *h = ch_start(NULL);
    int z = ch_connect(h);
    ch_feed(h, z, "NICK zed\r\nUSER zed 0 * :zed\r\n");
    CH_SKIP_TO(h, z, S "464 zed :Password required");
    ASSERT(ch_closed(h, z));
    ch_stop(h);
}

/* MODE with no parameter is answered from the command table (461); before the table the
 * handler read a parameter the line did not have. The connection goes on. */
static void test_mode_without_a_target(void)
{
    chat_harness_t *h = ana_and_bo();
    int a = ch_login(h, "ana", "pw-ana", NULL);
    ch_discard(h, a);
    ch_feed(h, a, "MODE\r\nMODE ana\r\n");
    CH_EXPECT(h, a, S "461 ana MODE :Not enough parameters");
    CH_EXPECT_PREFIX(h, a, S "221 ana +");
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"list_lusers_version_time", test_list_lusers_version_time},
        {"cap_ls_values_only_for_302", test_cap_ls_values_only_for_302},
        {"cap_ls_req_list", test_cap_ls_req_list},
        {"welcome_and_user_modes", test_welcome_and_user_modes},
        {"mode_without_a_target", test_mode_without_a_target},
        {"no_guests_no_password", test_no_guests_no_password},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
