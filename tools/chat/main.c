/* yard-chat: the chat service's tool: accounts, operators, the server password, K-lines, the
 * log, the client. */
#include <stdio.h>
#include <string.h>

#include "chat.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: yard-chat account add|remove|list [NAME...] --data DIR [--cost N]\n"
               "       yard-chat account certfp add|list|del NAME [SHA256] --data DIR\n"
               "       yard-chat oper add|del|list [NAME...] --data DIR [--cost N]\n"
               "       yard-chat server-password set|clear --data DIR [--cost N]\n"
               "       yard-chat kline add|del|list [MASK] --data DIR [--duration DUR]\n"
               "                 [--reason TEXT]\n"
               "       yard-chat log verify|dump --data DIR [--from ID]\n"
               "       yard-chat log generate --data DIR --messages N [--target #bench]\n"
               "                 [--senders 64] [--sender-prefix u] [--text-bytes 64]\n"
               "       yard-chat connect HOST:PORT --user NAME [--join #chan]... [--plain]\n"
               "                 [--password-file FILE]\n"
               "                 [--tls [--tls-ca FILE | --tls-insecure] [--cert FILE --key FILE]]\n"
               "\n"
               "  account add NAME...  create accounts; each password is read from the\n"
               "                       terminal (twice, not echoed) or, when stdin is not a\n"
               "                       terminal, from its lines (one per NAME, in order);\n"
               "                       never from argv. All are added, or none\n"
               "  account remove NAME  delete an account\n"
               "  account list         the account names, one per line\n"
               "  account certfp add|list|del NAME [SHA256]\n"
               "                       the client certificates (SHA-256 of the DER bytes)\n"
               "                       NAME logs in with by SASL EXTERNAL over TLS\n"
               "  oper add|del|list [NAME]\n"
               "                       the server operators (OPER NAME PASSWORD), kept like\n"
               "                       the accounts (the password read the same way)\n"
               "  server-password set|clear\n"
               "                       the password every client gives with PASS before it\n"
               "                       registers, on a server started with\n"
               "                       --server-password-required (read like an account's)\n"
               "  kline add|del|list [MASK]\n"
               "                       the server's bans (K-lines): MASK is an account,\n"
               "                       $a:account, nick!user@host or an address; --duration\n"
               "                       in minutes or 30s, 2h, 7d (default: for good); applied\n"
               "                       at each registration\n"
               "  --data DIR           the server's data directory (yard-serve --app chat\n"
               "                       --data DIR)\n"
               "  --cost N             bcrypt cost for add, 4..31 (default 12)\n"
               "  log verify           check the message log: every record's CRC, ids without\n"
               "                       gaps; exit 1 and say where when it is damaged\n"
               "  log dump             print the log's records as JSON lines (id, ts_ns, type,\n"
               "                       sender, target, text), from --from ID on; a field\n"
               "                       that is not UTF-8 has U+FFFD for the bad bytes and\n"
               "                       its exact bytes in base64 beside it (text_b64, ...)\n"
               "  log generate         append N messages to --target (from <prefix>0 ..\n"
               "                       <prefix>K-1 in turn, texts of --text-bytes) straight\n"
               "                       into the log of a server that is not running, for\n"
               "                       history benchmarks; progress on stderr\n"
               "  connect              the chat client: a terminal UI (PgUp/PgDn scroll back,\n"
               "                       /join /part /msg /me /quit), or with --plain lines from\n"
               "                       stdin and received lines on stdout. The password comes\n"
               "                       from YARD_PASSWORD, --password-file (mode 0600) or a\n"
               "                       prompt; never argv. It reconnects with back-off and\n"
               "                       catches up through the server's replay.\n"
               "\n"
               "Exit status: 0 done, 1 failed (the message says why), 2 usage error.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "account"))
        return chat_account_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "oper"))
        return chat_oper_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "server-password"))
        return chat_server_password_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "kline"))
        return chat_kline_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "log"))
        return chat_log_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "connect"))
        return chat_connect_main(argc - 1, argv + 1);
    fprintf(stderr, "yard-chat: unknown command '%s' (try --help)\n", argv[1]);
    return 2;
}
