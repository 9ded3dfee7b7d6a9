/* Operator bans, K-lines (apps/chat/kline.c, src/chat/klines.c, issue 40),
 * through the sans-socket harness (chat_harness.h): only an operator sets
 * them (a wrong or unknown operator is refused), they apply at
 * registration (465 and closed) and to the connections they match when
 * added, by account (every device of it, no other account) or by mask; a
 * K-line that expired no longer applies; UNKLINE and STATS k. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_harness.h"
#include "test.h"
#include "yard/chat_klines.h"
#include "yard/chat_store.h"

#define S ":yard "

static void test_normalize_and_file(void)
{
    char out[YARD_KLINE_MASK_MAX + 1];
    ASSERT(yard_kline_normalize("bob", out));
    ASSERT_STR_EQ(out, "$a:bob");
    ASSERT(yard_kline_normalize("1.2.3.4", out));
    ASSERT_STR_EQ(out, "*!*@1.2.3.4");
    ASSERT(yard_kline_normalize("2001:db8::1", out));
    ASSERT_STR_EQ(out, "*!*@2001:db8::1");
    ASSERT(yard_kline_normalize("u@10.*", out));
    ASSERT_STR_EQ(out, "*!u@10.*");
    ASSERT(yard_kline_normalize("$a:b*", out));
    ASSERT_STR_EQ(out, "$a:b*");
    ASSERT(!yard_kline_normalize("$x:b", out));
    ASSERT(!yard_kline_normalize("a b", out));
    ASSERT(!yard_kline_normalize("", out));
    /* The file: added, replaced by the same mask in another case, removed. */
    chat_harness_t *h = ch_start(NULL);
    const char *dir = ch_data_dir(h);
    char err[256];
    yard_kline_t k = {.mask = "$a:bob", .expires_s = 0, .set_s = 5, .by = "root",
                      .reason = "spam and more"};
    ASSERT_EQ(yard_klines_add(dir, &k), 0);
    strcpy(k.mask, "$a:BOB");
    strcpy(k.reason, "again");
    ASSERT_EQ(yard_klines_add(dir, &k), 0);
    strcpy(k.mask, "*!*@1.2.3.4");
    ASSERT_EQ(yard_klines_add(dir, &k), 0);
    strcpy(k.reason, "two\nlines");
    ASSERT_EQ(yard_klines_add(dir, &k), -EINVAL);
    yard_kline_t *all;
    size_t n;
    ASSERT_EQ(yard_klines_load(dir, &all, &n), 0);
    ASSERT_EQ(n, 2);
    ASSERT_STR_EQ(all[0].mask, "$a:BOB");
    ASSERT_STR_EQ(all[0].reason, "again");
    ASSERT_STR_EQ(all[0].by, "root");
    ASSERT_EQ(all[0].set_s, 5);
    free(all);
    ASSERT_EQ(yard_klines_remove(dir, "$a:bob"), 0);
    ASSERT_EQ(yard_klines_remove(dir, "$a:bob"), -ENOENT);
    ASSERT_EQ(yard_klines_load(dir, &all, &n), 0);
    ASSERT_EQ(n, 1);
    free(all);
    /* The command line's variants say what went wrong; the server's give
     * the same -errno. */
    ASSERT_EQ(yard_klines_remove_msg(dir, "$a:nobody", err, sizeof err), -ENOENT);
    ASSERT_STR_EQ(err, "no K-line for $a:nobody");
    char path[512];
    snprintf(path, sizeof path, "%s/klines", dir);
    FILE *f = fopen(path, "a");
    ASSERT(f != NULL);
    fputs("not a kline\n", f);
    fclose(f);
    ASSERT_EQ(yard_klines_load(dir, &all, &n), -EINVAL);
    ASSERT_EQ(yard_klines_load_msg(dir, &all, &n, err, sizeof err), -EINVAL);
    ASSERT(strstr(err, "/klines:2: not") != NULL);
    ch_stop(h);
}

/* A public server with alice, bob and carol logged in and the operator
 * root (pw-root). */
static chat_harness_t *with_oper(int *a, int *b, int *c)
{
    const char *flags[] = {"guests", NULL};
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

static void become_oper(chat_harness_t *h, int id)
{
    ch_feed(h, id, "OPER root pw-root\r\n");
    CH_SKIP_TO(h, id, S "381 ");
}

/* A failed OPER's answer waits, like a failed login's. */
static void expect_oper_failure(chat_harness_t *h, int id, const char *want)
{
    CH_EXPECT_NONE(h, id);
    ASSERT(ch_next_wake(h) > ch_now(h));
    ch_advance(h, ch_next_wake(h) - ch_now(h));
    CH_EXPECT(h, id, want);
}

#define DENIED "481 bob :Permission Denied- You're not an IRC operator"

static void test_kline_needs_an_operator(void)
{
    int a, b, c;
    chat_harness_t *h = with_oper(&a, &b, &c);
    ch_feed(h, b, "KLINE carol :x\r\nUNKLINE carol\r\nSTATS k\r\n");
    CH_EXPECT(h, b, S DENIED);
    CH_EXPECT(h, b, S DENIED);
    CH_EXPECT(h, b, S DENIED);
    ch_feed(h, b, "OPER root wrong\r\n");
    expect_oper_failure(h, b, S "464 bob :Password incorrect");
    ch_feed(h, b, "KLINE carol :x\r\n");
    CH_EXPECT(h, b, S DENIED);
    ch_feed(h, b, "OPER nobody pw-root\r\n");
    expect_oper_failure(h, b, S "491 bob :No O-lines for your host");
    ch_feed(h, b, "KLINE 10 carol :x\r\n");
    CH_EXPECT(h, b, S DENIED);
    CH_EXPECT_NONE(h, c);
    ASSERT(!ch_closed(h, c));
    /* Nothing was written: carol logs in again. */
    int c2 = ch_login(h, "carol", "pw-carol", NULL);
    ASSERT(!ch_closed(h, c2));
    ch_stop(h);
}

/* Register as bob with PASS: refused with 465, closed. */
static void expect_klined_login(chat_harness_t *h, const char *why)
{
    int id = ch_connect(h);
    ch_feed(h, id, "PASS pw-bob\r\nNICK bob\r\nUSER bob 0 * :Bob\r\n");
    char want[256];
    snprintf(want, sizeof want, S "465 bob :You are banned from this server (K-lined: %s)", why);
    CH_EXPECT(h, id, want);
    snprintf(want, sizeof want, "ERROR :Closing Link: K-lined: %s", why);
    CH_EXPECT(h, id, want);
    ASSERT(ch_closed(h, id));
}

/* By account: every device of the account is closed, no other account's;
 * its next login is refused; STATS k lists it; UNKLINE lets it back. */
static void test_kline_account(void)
{
    int a, b, c;
    chat_harness_t *h = with_oper(&a, &b, &c);
    int b2 = ch_login(h, "bob", "pw-bob", NULL);
    become_oper(h, a);
    ch_feed(h, b, "JOIN #k\r\n");
    ch_feed(h, b2, "JOIN #k\r\n");
    ch_feed(h, c, "JOIN #k\r\n");
    ch_discard(h, b);
    ch_discard(h, b2);
    ch_discard(h, c);
    ch_feed(h, a, "KLINE bob :spam\r\n");
    CH_EXPECT(h, a, S "NOTICE alice :Added a K-line for $a:bob for good (spam); connections "
                      "closed: 2");
    for (int i = 0; i < 2; i++) {
        int id = i ? b2 : b;
        CH_EXPECT(h, id, S "465 bob :You are banned from this server (K-lined: spam)");
        CH_EXPECT(h, id, "ERROR :Closing Link: K-lined: spam");
        ASSERT(ch_closed(h, id));
    }
    ASSERT(!ch_closed(h, c));
    ASSERT(!ch_closed(h, a));
    /* carol stays, and hears bob go with the K-line's reason. */
    CH_EXPECT(h, c, ":bob!bob@yard QUIT :K-lined: spam");
    CH_EXPECT_NONE(h, c);
    expect_klined_login(h, "spam");
    /* A guest that logs in to bob later is checked again, as bob. */
    int g = ch_connect(h);
    ch_feed(h, g, "NICK gus\r\nUSER u 0 * :G\r\n");
    CH_SKIP_TO(h, g, S "422 gus ");
    ch_feed(h, g, "PASS bob:pw-bob\r\n");
    /* (a guest that logs in keeps its nick: the numeric is addressed to gus) */
    CH_SKIP_TO(h, g, S "465 gus :You are banned from this server (K-lined: spam)");
    CH_EXPECT(h, g, "ERROR :Closing Link: K-lined: spam");
    ASSERT(ch_closed(h, g));
    ch_feed(h, a, "STATS k\r\n");
    CH_EXPECT(h, a, S "216 alice K $a:bob 0 alice :spam");
    CH_EXPECT(h, a, S "219 alice k :End of /STATS report");
    ch_feed(h, a, "UNKLINE BOB\r\nUNKLINE bob\r\n");
    CH_EXPECT(h, a, S "NOTICE alice :Removed the K-line for $a:BOB");
    CH_EXPECT(h, a, S "NOTICE alice :No K-line for $a:bob");
    int b3 = ch_login(h, "bob", "pw-bob", NULL);
    ASSERT(!ch_closed(h, b3));
    ch_stop(h);
}

/* By mask, for a while: a guest that matches is closed, another cannot
 * register; once the K-line has expired, it can. */
static void test_kline_mask_expires(void)
{
    int a, b, c;
    chat_harness_t *h = with_oper(&a, &b, &c);
    int g = ch_connect(h);
    ch_feed(h, g, "NICK spamx\r\nUSER u 0 * :S\r\n");
    CH_SKIP_TO(h, g, S "422 spamx ");
    become_oper(h, a);
    ch_feed(h, a, "KLINE 1 spam*!*@* :go\x02" "away\r\n"); /* bold: a space in the file */
    CH_EXPECT_PREFIX(h, a, S "NOTICE alice :Added a K-line for spam*!*@* until ");
    CH_EXPECT(h, g, S "465 spamx :You are banned from this server (K-lined: go away)");
    CH_EXPECT(h, g, "ERROR :Closing Link: K-lined: go away");
    ASSERT(ch_closed(h, g));
    int g2 = ch_connect(h);
    ch_feed(h, g2, "NICK spammer\r\nUSER u 0 * :S\r\n");
    CH_EXPECT(h, g2, S "465 spammer :You are banned from this server (K-lined: go away)");
    ASSERT(ch_closed(h, g2));
    /* A minute later it is over. */
    ch_advance(h, 61ull * 1000000000ull);
    int g3 = ch_connect(h);
    ch_feed(h, g3, "NICK spammer\r\nUSER u 0 * :S\r\n");
    CH_SKIP_TO(h, g3, S "001 spammer ");
    ASSERT(!ch_closed(h, g3));
    ch_discard(h, a);
    ch_feed(h, a, "STATS k\r\n");
    CH_EXPECT(h, a, S "219 alice k :End of /STATS report");
    /* What is refused. */
    ch_feed(h, a, "KLINE 1\r\nKLINE 5q bob\r\nKLINE $x:y\r\n");
    CH_EXPECT(h, a, S "461 alice KLINE :Not enough parameters");
    CH_EXPECT(h, a, S "NOTICE alice :Not a K-line duration: 5q (minutes, or 30s, 2h, 7d)");
    CH_EXPECT_PREFIX(h, a, S "NOTICE alice :Not a K-line mask: $x:y ");
    CH_EXPECT_NONE(h, a);
    ASSERT(!ch_closed(h, b) && !ch_closed(h, c));
    ch_stop(h);
}

#define KLINE_JOBS(h) ch_store_jobs((h), YARD_CHAT_KLINE)

/* Registration checks a copy in memory: a K-line in the file at the start
 * applies with no job; so does an operator's, once its KLINE is done. */
static void test_kline_copy_without_jobs(void)
{
    const char *flags[] = {"guests", NULL};
    const char *files[] = {"klines", "$a:bob 0 5 admin :from the file\n", NULL};
    chat_harness_t *h = ch_start_files(flags, files);
    ch_account(h, "bob", "pw-bob");
    ch_account(h, "carol", "pw-carol");
    ch_oper(h, "root", "pw-root");
    expect_klined_login(h, "from the file");
    int c = ch_login(h, "carol", "pw-carol", NULL);
    int g = ch_connect(h);
    ch_feed(h, g, "NICK gus\r\nUSER u 0 * :G\r\n");
    CH_SKIP_TO(h, g, S "001 gus ");
    ASSERT_EQ(KLINE_JOBS(h), 0);
    become_oper(h, c);
    ch_feed(h, c, "KLINE spam*!*@* :go\r\n");
    CH_EXPECT_PREFIX(h, c, S "NOTICE carol :Added a K-line for spam*!*@* ");
    ASSERT_EQ(KLINE_JOBS(h), 1);
    int g2 = ch_connect(h);
    ch_feed(h, g2, "NICK spammer\r\nUSER u 0 * :S\r\n");
    CH_EXPECT(h, g2, S "465 spammer :You are banned from this server (K-lined: go)");
    ASSERT(ch_closed(h, g2));
    ASSERT_EQ(KLINE_JOBS(h), 1);
    ch_stop(h);
}

/* `yard-chat kline add|del` (the store's functions, which the tool calls)
 * while the server runs: the next registration sees the change, reloading
 * the copy once; the ones after it need no job again. */
static void test_kline_by_the_admin_while_running(void)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    ch_account(h, "bob", "pw-bob");
    int b = ch_login(h, "bob", "pw-bob", NULL);
    ASSERT_EQ(KLINE_JOBS(h), 0);
    char err[256];
    yard_kline_t k = {.mask = "$a:bob", .by = "admin", .reason = "by hand"};
    /* As yard-chat kline changes the file: */
    ASSERT_EQ(yard_klines_add_msg(ch_data_dir(h), &k, err, sizeof err), 0);
    expect_klined_login(h, "by hand");
    ASSERT_EQ(KLINE_JOBS(h), 1);
    expect_klined_login(h, "by hand");
    ASSERT_EQ(KLINE_JOBS(h), 1);
    ASSERT(!ch_closed(h, b)); /* the tool's K-line closes nobody already connected */
    ASSERT_EQ(yard_klines_remove_msg(ch_data_dir(h), "$a:bob", err, sizeof err), 0);
    int b2 = ch_login(h, "bob", "pw-bob", NULL);
    ASSERT(!ch_closed(h, b2));
    ASSERT_EQ(KLINE_JOBS(h), 2);
    int b3 = ch_login(h, "bob", "pw-bob", NULL);
    ASSERT(!ch_closed(h, b3));
    ASSERT_EQ(KLINE_JOBS(h), 2);
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"normalize_and_file", test_normalize_and_file},
        {"kline_needs_an_operator", test_kline_needs_an_operator},
        {"kline_account", test_kline_account},
        {"kline_mask_expires", test_kline_mask_expires},
        {"kline_copy_without_jobs", test_kline_copy_without_jobs},
        {"kline_by_the_admin_while_running", test_kline_by_the_admin_while_running},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
