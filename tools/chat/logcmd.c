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
                                          : "message");
    int s = json_field(d, "sender", r->sender, r->sender_len);
    int t = s < 0 ? s : json_field(d, "target", r->target, r->target_len);
    int x = t < 0 ? t : json_field(d, "text", r->text, r->text_len);
    if (x < 0) {
        d->err = ENOMEM;
        return -1;
    }
    printf("}\n");
    if (!s || !t || !x)
        d->not_utf8++;
    return 0;
}

int chat_log_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"data", required_argument, NULL, 'd'},
        {"from", required_argument, NULL, 'f'},
        {NULL, 0, NULL, 0},
    };
    if (argc < 2 || (strcmp(argv[1], "verify") && strcmp(argv[1], "dump"))) {
        fprintf(stderr, "yard-chat log: expected verify or dump\nTry 'yard-chat --help'.\n");
        return 2;
    }
    const char *verb = argv[1], *dir = NULL;
    struct dump_arg d = {.from = 0, .buf = NULL};
    optind = 2;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'd') {
            dir = optarg;
        } else if (c == 'f') {
            char *end;
            d.from = strtoull(optarg, &end, 10);
            if (end == optarg || *end) {
                fprintf(stderr, "yard-chat log: --from: expected a record id, got '%s'\n", optarg);
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
