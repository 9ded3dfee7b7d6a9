/* yard-chat log verify|dump --data DIR: check a chat log (CRCs, ids without
 * gaps) or print its records as JSON lines. Both read the files only, so
 * they work beside a running server. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "yard/chatlog.h"

static void json_str(const char *p, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            printf("\\u%04x", c); /* bytes, not decoded: the log stores what was sent */
        else
            putchar(c);
    }
    putchar('"');
}

struct dump_arg {
    uint64_t from;
};

static int dump_one(const yard_chatlog_rec_t *r, void *arg)
{
    const struct dump_arg *d = arg;
    if (r->id < d->from)
        return 0;
    printf("{\"id\": %" PRIu64 ", \"ts_ns\": %" PRId64 ", \"type\": \"%s\", \"sender\": ", r->id,
           r->ts_ns, r->type == YARD_LOGREC_NOTICE ? "notice" : "message");
    json_str(r->sender, r->sender_len);
    printf(", \"target\": ");
    json_str(r->target, r->target_len);
    printf(", \"text\": ");
    json_str(r->text, r->text_len);
    printf("}\n");
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
    struct dump_arg d = {.from = 0};
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
        if (rc < 0) {
            fprintf(stderr, "yard-chat log dump: %s/log: %s\n", dir, strerror(-rc));
            return 1;
        }
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
