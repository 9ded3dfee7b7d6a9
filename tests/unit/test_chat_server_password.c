/* The server password, through the chat's sans-socket harness
 * (chat_harness.h): with --server-password-required, PASS is checked
 * against DIR/server-password before registration completes (a wrong or
 * missing one: 464 and ERROR after the failed-login delay, never 001) and
 * accounts log in with SASL only; without the flag PASS stays an
 * account's password. irctest's connection_registration password tests. */
#include <crypt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_cases.h"
#include "yard/bcrypt.h"

#define DELAY_NS 1000000000ull /* --login-fail-delay-ms's default */

/* A chat whose DIR/server-password is the hash of "s3rver", started with
 * the flag (and --guests when guests); alice is an account. */
static chat_harness_t *start_with_password(bool guests)
{
    static struct crypt_data cd;
    char hash[YARD_BCRYPT_LEN + 2];
    ASSERT(yard_bcrypt_hash("s3rver", 4, &cd, hash));
    strcat(hash, "\n");
    const char *files[] = {"server-password", hash, NULL};
    const char *with_guests[] = {"server-password-required", "guests", NULL};
    const char *without[] = {"server-password-required", NULL};
    chat_harness_t *h = ch_start_files(guests ? with_guests : without, files);
    ASSERT(h != NULL);
    ch_account(h, "alice", "pw-alice");
    return h;
}

static void test_right_password(void)
{
    chat_harness_t *h = start_with_password(true);
    /* A guest, with the server's password. */
    int g = ch_connect(h);
    ch_feed(h, g, "PASS s3rver\r\nNICK foo\r\nUSER u * * :Real\r\n");
    CH_SKIP_TO(h, g, S "001 foo ");
    /* An account: the server's password, then SASL. */
    int a = ch_connect(h);
    ch_feed(h, a, "CAP LS 302\r\nPASS s3rver\r\nNICK al\r\nUSER u * * :Al\r\nCAP REQ :sasl\r\n"
                  "AUTHENTICATE PLAIN\r\n");
    CH_SKIP_TO(h, a, "AUTHENTICATE +");
    ch_feed(h, a, "AUTHENTICATE AGFsaWNlAHB3LWFsaWNl\r\n"); /* \0alice\0pw-alice */
    CH_EXPECT(h, a, S "900 al al!al@yard alice :You are now logged in as alice");
    CH_EXPECT(h, a, S "903 al :SASL authentication successful");
    ch_feed(h, a, "CAP END\r\nWHOIS al\r\n");
    CH_SKIP_TO(h, a, S "001 al ");
    CH_SKIP_TO(h, a, S "330 al al alice ");
    /* PASS account:password once registered is no login here: SASL only. */
    ch_discard(h, g);
    ch_feed(h, g, "PASS alice:pw-alice\r\n");
    CH_EXPECT(h, g, S "462 foo :You may not reregister");
    ch_stop(h);
}

/* A wrong password and a missing one: 464 and ERROR once the failed
 * login's delay is over, nothing before, never 001. */
static void test_wrong_or_missing_password(void)
{
    chat_harness_t *h = start_with_password(true);
    int w = ch_connect(h);
    ch_feed(h, w, "PASS s3rvergarbage\r\nNICK foo\r\nUSER u * * :Real\r\n");
    int m = ch_connect(h);
    ch_feed(h, m, "NICK bar\r\nUSER u * * :Real\r\n");
    CH_EXPECT_NONE(h, w);
    CH_EXPECT_NONE(h, m);
    ch_advance(h, DELAY_NS - 1000);
    CH_EXPECT_NONE(h, w);
    CH_EXPECT_NONE(h, m);
    ch_advance(h, 1000);
    CH_EXPECT(h, w, S "464 foo :Password incorrect");
    CH_EXPECT(h, w, "ERROR :Closing Link: password incorrect");
    CH_EXPECT_NONE(h, w);
    ASSERT(ch_closed(h, w));
    CH_EXPECT(h, m, S "464 bar :Password required: this server's password first (PASS)");
    CH_EXPECT(h, m, "ERROR :Closing Link: password required");
    ASSERT(ch_closed(h, m));
    /* PASS after NICK and USER is too late: registration was already refused. */
    int late = ch_connect(h);
    ch_feed(h, late, "NICK baz\r\nUSER u * * :Real\r\nPASS s3rver\r\n");
    ch_advance(h, DELAY_NS);
    CH_EXPECT_PREFIX(h, late, S "464 baz :Password required");
    ch_stop(h);
}

/* Without --guests, the server's password lets in only a SASL login. */
static void test_no_guests_needs_sasl(void)
{
    chat_harness_t *h = start_with_password(false);
    int c = ch_connect(h);
    ch_feed(h, c, "PASS s3rver\r\nNICK alice\r\nUSER u * * :Real\r\n");
    CH_EXPECT(h, c, S "464 alice :Password required: log in with SASL PLAIN (PASS is this "
                      "server's password)");
    CH_EXPECT(h, c, "ERROR :Closing Link: not logged in");
    ASSERT(ch_closed(h, c));
    ch_stop(h);
}

/* Without the flag, PASS is an account's password, as irssi uses it. */
static void test_pass_is_an_accounts_without_the_flag(void)
{
    chat_harness_t *h = ch_start(NULL);
    ch_account(h, "alice", "pw-alice");
    int c = ch_connect(h);
    ch_feed(h, c, "PASS pw-alice\r\nNICK alice\r\nUSER u * * :Real\r\n");
    CH_SKIP_TO(h, c, S "001 alice ");
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"right_password", test_right_password},
        {"wrong_or_missing_password", test_wrong_or_missing_password},
        {"no_guests_needs_sasl", test_no_guests_needs_sasl},
        {"pass_is_an_accounts_without_the_flag", test_pass_is_an_accounts_without_the_flag},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
