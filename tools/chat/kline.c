/* yard-chat kline add|del|list: the server's operator bans (DIR/klines,
 * include/yard/chat_klines.h), for the host's admin; the server's
 * operators have KLINE and UNKLINE for the same file. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat.h"
#include "yard/chat_klines.h"
#include "yard/cli.h"
#include "yard/clock.h"

#define WHO "yard-chat kline"

static void print_time(int64_t s, char *out, size_t cap)
{
    time_t t = (time_t)s;
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(out, cap, "%" PRId64, s);
}

/* One line per K-line: MASK UNTIL BY REASON (UNTIL: a UTC time, "never",
 * or "expired"). */
static int kline_list(const char *dir)
{
    yard_kline_t *all;
    size_t n;
    char err[512];
    if (yard_klines_load_msg(dir, &all, &n, err, sizeof err) < 0) {
        fprintf(stderr, WHO " list: %s\n", err);
        return 1;
    }
    int64_t now = yard_wall_ns() / (int64_t)YARD_NS_PER_S;
    for (size_t i = 0; i < n; i++) {
        char until[40] = "never";
        if (all[i].expires_s && all[i].expires_s <= now)
            snprintf(until, sizeof until, "expired");
        else if (all[i].expires_s)
            print_time(all[i].expires_s, until, sizeof until);
        printf("%s %s %s %s\n", all[i].mask, until, all[i].by, all[i].reason);
    }
    free(all);
    return 0;
}

int chat_kline_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"data", required_argument, NULL, 'd'},
        {"duration", required_argument, NULL, 't'},
        {"reason", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    if (argc < 2)
        return yard_usage_error(WHO, "expected add, del or list");
    const char *verb = argv[1], *dir = NULL, *reason = "No reason given";
    uint64_t dur_ns = 0;
    optind = 2;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': dir = optarg; break;
        case 'r': reason = optarg; break;
        case 't':
            if (yard_parse_duration_ns(optarg, 60 * YARD_NS_PER_S, &dur_ns) < 0 ||
                dur_ns < YARD_NS_PER_S)
                return yard_usage_error(WHO, "--duration: expected minutes or 30s, 2h, 7d, got "
                                             "'%s'",
                                        optarg);
            break;
        case 'h':
            printf("usage: " WHO " add MASK [--duration DUR] [--reason TEXT] --data DIR\n"
                   "       " WHO " del MASK --data DIR\n"
                   "       " WHO " list --data DIR\n"
                   "MASK: an account, $a:account, nick!user@host or an address\n");
            return 0;
        case ':': return yard_usage_error(WHO, "%s needs a value", argv[optind - 1]);
        default: return yard_usage_error(WHO, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (!dir)
        return yard_usage_error(WHO, "--data DIR is required%s", "");
    bool list = !strcmp(verb, "list");
    if (!list && strcmp(verb, "add") && strcmp(verb, "del"))
        return yard_usage_error(WHO, "unknown action '%s' (add, del or list)", verb);
    int want = list ? 0 : 1;
    if (argc - optind != want)
        return yard_usage_error(WHO, "%s takes %s", verb, list ? "no MASK" : "one MASK");
    if (list)
        return kline_list(dir);
    yard_kline_t k;
    memset(&k, 0, sizeof k);
    if (!yard_kline_normalize(argv[optind], k.mask))
        return yard_usage_error(WHO, "'%s' is not a K-line mask (an account, $a:account, "
                                     "nick!user@host or an address, at most %d characters)",
                                argv[optind], YARD_KLINE_MASK_MAX);
    if (strlen(reason) > YARD_KLINE_REASON_MAX)
        return yard_usage_error(WHO, "--reason: at most %d bytes", YARD_KLINE_REASON_MAX);
    char err[512];
    int rc;
    if (!strcmp(verb, "del")) {
        rc = yard_klines_remove_msg(dir, k.mask, err, sizeof err);
    } else {
        snprintf(k.reason, sizeof k.reason, "%s", reason);
        snprintf(k.by, sizeof k.by, "-"); /* the host's admin, not an operator */
        k.set_s = yard_wall_ns() / (int64_t)YARD_NS_PER_S;
        k.expires_s = dur_ns ? k.set_s + (int64_t)(dur_ns / YARD_NS_PER_S) : 0;
        rc = yard_klines_add_msg(dir, &k, err, sizeof err);
    }
    if (rc < 0) {
        fprintf(stderr, WHO " %s: %s\n", verb, err);
        return rc == -EINVAL ? 2 : 1;
    }
    return 0;
}
