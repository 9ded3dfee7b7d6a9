/* yard-chat log verify|dump --data DIR: check a chat log (CRCs, ids without
 * gaps) or print its records as JSON lines. Both read the files only, so
 * they work beside a running server.
 *
 * The log keeps the bytes that were sent, and the server relays bytes that
 * are not UTF-8 as they are. The dump writes a field that is valid UTF-8 as
 * its characters (a JSON reader gets back the same bytes); a field that is
 * not gets its exact bytes in base64 beside it ("text_b64"), and the text
 * itself then holds a readable copy with U+FFFD for the bad bytes. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "text.h"
#include "yard/chatlog.h"
#include "yard/cli.h"

#define WHO "yard-chat log"

struct dump_arg {
    uint64_t from;
    uint64_t not_utf8; /* records with a field that is not */
    char *buf;         /* for one field's JSON or base64 */
    size_t cap;
    int err;
};

/* Prints ', "name": "..."', and ', "name_b64": "..."' after it when the
 * bytes are not UTF-8. Returns 1 when they are, 0 when not, -1 when out of
 * memory. */
static int json_field(struct dump_arg *d, const char *name, const char *p, size_t n)
{
    size_t need = 6 * n + 3;
    if (need > d->cap) {
        char *b = realloc(d->buf, need);
        if (!b)
            return -1;
        d->buf = b;
        d->cap = need;
    }
    chat_json_string(p, n, d->buf, d->cap);
    printf(", \"%s\": %s", name, d->buf);
    if (chat_utf8_valid(p, n))
        return 1;
    chat_b64_encode(p, n, d->buf, d->cap);
    printf(", \"%s_b64\": \"%s\"", name, d->buf);
    return 0;
}

static int dump_one(const yard_chatlog_rec_t *r, void *arg)
{
    struct dump_arg *d = arg;
    if (r->id < d->from)
        return 0;
    printf("{\"id\": %" PRIu64 ", \"ts_ns\": %" PRId64 ", \"type\": \"%s\"", r->id, r->ts_ns,
           r->type == YARD_LOGREC_NOTICE  ? "notice"
           : r->type == YARD_LOGREC_TOPIC ? "topic"
           : r->type == YARD_LOGREC_JOIN  ? "join"
           : r->type == YARD_LOGREC_PART  ? "part"
           : r->type == YARD_LOGREC_QUIT  ? "quit"
           : r->type == YARD_LOGREC_AWAY  ? "away"
           : r->type == YARD_LOGREC_READ  ? "read"
           : r->type == YARD_LOGREC_MODE  ? "mode"
           : r->type == YARD_LOGREC_KICK  ? "kick"
           : r->type == YARD_LOGREC_INVITE ? "invite"
           : r->type == YARD_LOGREC_TAGMSG ? "tagmsg"
           : r->type == YARD_LOGREC_NICK ? "nick"
           : r->type == YARD_LOGREC_KILL ? "kill"
           : r->type == YARD_LOGREC_WALLOPS ? "wallops"
           : r->type == YARD_LOGREC_SETNAME ? "setname"
           : r->type == YARD_LOGREC_ONLINE ? "online"
           : r->type == YARD_LOGREC_ACCOUNT ? "account"
                                          : "message");
    int s = json_field(d, "sender", r->sender, r->sender_len);
    int t = s < 0 ? s : json_field(d, "target", r->target, r->target_len);
    /* A message's client-only tags come before a NUL in its text
     * (include/yard/proto_logrec.h): a field of their own. */
    const char *text = r->text, *nul = memchr(r->text, 0, r->text_len);
    size_t text_len = r->text_len;
    if (nul && t >= 0 && (r->type == YARD_LOGREC_MESSAGE || r->type == YARD_LOGREC_NOTICE ||
                          r->type == YARD_LOGREC_TAGMSG)) {
        int g = json_field(d, "tags", r->text, (size_t)(nul - r->text));
        t = g < 0 ? g : g == 0 ? 0 : t;
        text_len -= (size_t)(nul - r->text) + 1;
        text = nul + 1;
    }
    int x = t < 0 ? t : json_field(d, "text", text, text_len);
    if (x < 0) {
        d->err = ENOMEM;
        return -1;
    }
    printf("}\n");
    if (!s || !t || !x)
        d->not_utf8++;
    return 0;
}

/* log generate: n messages to target from senders <prefix>0..<prefix>k-1
 * in turn, text "generated message i" padded to text_bytes, appended
 * directly (no server: the log's lock refuses a running one), synced once
 * at the end. */
static int generate(const char *dir, uint64_t n, const char *target, unsigned senders,
                    const char *prefix, unsigned text_bytes)
{
    yard_chatlog_opts_t o;
    yard_chatlog_opts_default(&o);
    o.fsync = YARD_CHATLOG_FSYNC_NEVER;
    yard_chatlog_t *log;
    yard_chatlog_recovery_t rec;
    char err[512];
    if (yard_chatlog_open(dir, &o, &log, &rec, err, sizeof err) < 0) {
        fprintf(stderr, "yard-chat log generate: %s\n", err);
        return 1;
    }
    char text[YARD_LOGREC_TEXT_MAX + 1], sender[YARD_LOGREC_NAME_MAX + 1];
    uint64_t first = 0, next_report = n / 10;
    for (uint64_t i = 0; i < n; i++) {
        int tn = snprintf(text, sizeof text, "generated message %" PRIu64 " ", i);
        for (; (unsigned)tn < text_bytes && tn < YARD_LOGREC_TEXT_MAX; tn++)
            text[tn] = (char)('a' + (i + (uint64_t)tn) % 26);
        int sn = snprintf(sender, sizeof sender, "%s%u", prefix, (unsigned)(i % senders));
        uint64_t id;
        int64_t ts;
        int rc = yard_chatlog_append(log, YARD_LOGREC_MESSAGE, sender, (size_t)sn, target,
                                     strlen(target), text, (size_t)tn, &id, &ts);
        if (rc < 0) {
            fprintf(stderr, "yard-chat log generate: appending message %" PRIu64 ": %s\n", i,
                    strerror(-rc));
            yard_chatlog_close(log);
            return 1;
        }
        if (!first)
            first = id;
        if (n >= 100000 && i + 1 == next_report) {
            fprintf(stderr, "yard-chat log generate: %" PRIu64 "%% (%" PRIu64 " messages)\n",
                    (i + 1) * 100 / n, i + 1);
            next_report += n / 10;
        }
    }
    int rc = yard_chatlog_sync(log);
    yard_chatlog_close(log);
    if (rc < 0) {
        fprintf(stderr, "yard-chat log generate: syncing: %s\n", strerror(-rc));
        return 1;
    }
    printf("generated %" PRIu64 " messages to %s, ids %" PRIu64 "..%" PRIu64 "\n", n, target,
           first, first + n - 1);
    return 0;
}

int chat_log_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"data", required_argument, NULL, 'd'},
        {"from", required_argument, NULL, 'f'},
        {"messages", required_argument, NULL, 'n'},
        {"target", required_argument, NULL, 't'},
        {"senders", required_argument, NULL, 's'},
        {"sender-prefix", required_argument, NULL, 'p'},
        {"text-bytes", required_argument, NULL, 'b'},
        {NULL, 0, NULL, 0},
    };
    if (argc < 2 ||
        (strcmp(argv[1], "verify") && strcmp(argv[1], "dump") && strcmp(argv[1], "generate"))) {
        fprintf(stderr,
                "yard-chat log: expected verify, dump or generate\nTry 'yard-chat --help'.\n");
        return 2;
    }
    const char *verb = argv[1], *dir = NULL, *target = "#bench", *prefix = "u";
    uint64_t messages = 0, senders = 64, text_bytes = 64;
    bool gen = !strcmp(verb, "generate");
    struct dump_arg d = {.from = 0, .buf = NULL};
    optind = 2;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'd') {
            dir = optarg;
        } else if (c == 'f' && !gen) {
            d.from = (uint64_t)yard_int_flag(WHO, "--from", optarg, 0, INT64_MAX);
        } else if (c == 'n' && gen) {
            messages = (uint64_t)yard_int_flag(WHO, "--messages", optarg, 0, 1000000000);
        } else if (c == 's' && gen) {
            senders = (uint64_t)yard_int_flag(WHO, "--senders", optarg, 1, 100000);
        } else if (c == 'b' && gen) {
            text_bytes = (uint64_t)yard_int_flag(WHO, "--text-bytes", optarg, 0,
                                                 YARD_LOGREC_TEXT_MAX);
        } else if (c == 't' && gen) {
            target = optarg;
            if (!*target || strlen(target) > YARD_LOGREC_NAME_MAX || strpbrk(target, " ,\r\n")) {
                fprintf(stderr, "yard-chat log: --target: a channel or account name, got '%s'\n",
                        target);
                return 2;
            }
        } else if (c == 'p' && gen) {
            prefix = optarg;
            if (!*prefix || strlen(prefix) > 20) {
                fprintf(stderr, "yard-chat log: --sender-prefix: 1 to 20 characters\n");
                return 2;
            }
        } else {
            fprintf(stderr, "yard-chat log: unknown option '%s'\nTry 'yard-chat --help'.\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "yard-chat log: --data DIR is required\n");
        return 2;
    }
    if (gen) {
        if (!messages) {
            fprintf(stderr, "yard-chat log generate: --messages N is required\n");
            return 2;
        }
        return generate(dir, messages, target, (unsigned)senders, prefix, (unsigned)text_bytes);
    }
    if (!strcmp(verb, "dump")) {
        int rc = yard_chatlog_walk(dir, dump_one, &d);
        free(d.buf);
        if (fflush(stdout) != 0 && !rc)
            rc = -errno;
        if (d.err)
            rc = -d.err;
        if (rc < 0) {
            fprintf(stderr, "yard-chat log dump: %s/log: %s\n", dir, strerror(-rc));
            return 1;
        }
        if (d.not_utf8)
            fprintf(stderr, "yard-chat log dump: %" PRIu64 " record%s with bytes that are not "
                            "UTF-8: shown with U+FFFD, exact in the *_b64 fields\n",
                    d.not_utf8, d.not_utf8 == 1 ? "" : "s");
        return 0;
    }
    yard_chatlog_verify_t v;
    int rc = yard_chatlog_verify(dir, &v);
    if (rc == 0) {
        printf("ok: %" PRIu64 " records in %" PRIu64 " segments, ids %" PRIu64 "..%" PRIu64 "\n",
               v.records, v.segments, v.first_id, v.last_id);
        return 0;
    }
    if (rc == -EBADMSG)
        printf("damaged: %s (%" PRIu64 " good records before it)\n", v.problem, v.records);
    else
        fprintf(stderr, "yard-chat log verify: %s/log: %s\n", dir, strerror(-rc));
    return 1;
}
