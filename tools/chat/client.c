/* yard-chat connect HOST:PORT --user NAME: the chat service's terminal
 * client. It logs in with SASL PLAIN (asking for server-time and
 * echo-message), joins the channels given, and then either draws a
 * terminal UI (ncurses: scrollback with PgUp/PgDn, an editable input line,
 * a colour per nick, a status line) or, with --plain, reads lines from stdin
 * and prints what arrives on stdout, for scripts and tests. It waits in
 * poll() on the terminal and the socket: no busy polling. When the
 * connection drops it reconnects with a growing back-off (1 s doubling to
 * 30 s) and joins again; the server replays what was missed. With --tls it
 * speaks TLS (include/yard/tls.h), checking the server's certificate and
 * name against the system's CAs or --tls-ca.
 *
 * Text from the server is drawn through text.h's units in both UIs: UTF-8
 * as characters placed by their display width (the wide-character curses
 * library, ncursesw), invalid bytes as U+FFFD, and control characters (an
 * ESC that would start a terminal sequence, a CR, C1) in caret notation,
 * never raw. Without a UTF-8 locale it says so once and draws ASCII. */
#include "client_int.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <langinfo.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>
#include <wchar.h>

#include "chat.h"
#include "text.h"

struct client client = {.fd = -1};

/* ---- the password and the main loop -------------------------------------- */

static int read_password(const char *file)
{
    const char *env = getenv("YARD_PASSWORD");
    if (file) {
        int fd = open(file, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
            fprintf(stderr, "yard-chat connect: --password-file %s: %s\n", file, strerror(errno));
            return -1;
        }
        if (st.st_mode & 077) {
            fprintf(stderr, "yard-chat connect: --password-file %s is readable by others (mode "
                            "%03o); chmod 600 it\n",
                    file, (unsigned)(st.st_mode & 0777));
            close(fd);
            return -1;
        }
        ssize_t n = read(fd, client.password, sizeof client.password - 1);
        close(fd);
        if (n <= 0) {
            fprintf(stderr, "yard-chat connect: --password-file %s is empty\n", file);
            return -1;
        }
        client.password[n] = 0;
        client.password[strcspn(client.password, "\r\n")] = 0;
        return 0;
    }
    if (env && *env) {
        snprintf(client.password, sizeof client.password, "%s", env);
        return 0;
    }
    FILE *tty = fopen("/dev/tty", "r+");
    if (!tty) {
        fprintf(stderr, "yard-chat connect: no password: set YARD_PASSWORD, give "
                        "--password-file, or run it on a terminal\n");
        return -1;
    }
    struct termios old, quiet;
    tcgetattr(fileno(tty), &old);
    quiet = old;
    quiet.c_lflag &= ~(tcflag_t)ECHO;
    fprintf(tty, "Password for %s: ", client.user);
    fflush(tty);
    tcsetattr(fileno(tty), TCSAFLUSH, &quiet);
    bool ok = fgets(client.password, sizeof client.password, tty) != NULL;
    tcsetattr(fileno(tty), TCSAFLUSH, &old);
    fprintf(tty, "\n");
    fclose(tty);
    client.password[strcspn(client.password, "\r\n")] = 0;
    return ok && client.password[0] ? 0 : -1;
}

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { (void)sig, stop_requested = 1; }

/* What chat_connect_main's options asked for besides the client's state. */
struct connect_opts {
    const char *pwfile, *ca, *cert, *key;
    bool use_tls, insecure;
};

/* The options and HOST:PORT into o and the client's state; -1 to go on,
 * else the exit status (0 after --help, 2 on a usage error). */
static int parse_options(int argc, char **argv, struct connect_opts *o)
{
    static const struct option opts[] = {
        {"user", required_argument, NULL, 'u'},  {"plain", no_argument, NULL, 'p'},
        {"join", required_argument, NULL, 'j'},  {"password-file", required_argument, NULL, 'f'},
        {"tls", no_argument, NULL, 't'},         {"tls-ca", required_argument, NULL, 'a'},
        {"tls-insecure", no_argument, NULL, 'i'}, {"cert", required_argument, NULL, 'c'},
        {"key", required_argument, NULL, 'k'},   {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'u': client.user = optarg; break;
        case 'p': client.plain = true; break;
        case 'f': o->pwfile = optarg; break;
        case 't': o->use_tls = true; break;
        case 'a': o->ca = optarg; break;
        case 'i': o->insecure = true; break;
        case 'c': o->cert = optarg; break;
        case 'k': o->key = optarg; break;
        case 'j':
            if (client.nchans < MAX_CHANS)
                snprintf(client.chans[client.nchans++], sizeof client.chans[0], "%s", optarg);
            break;
        case 'h':
            printf("usage: yard-chat connect HOST:PORT --user NAME [--join #chan]... [--plain]\n"
                   "                          [--password-file FILE]\n"
                   "                          [--tls [--tls-ca FILE | --tls-insecure] "
                   "[--cert FILE --key FILE]]\n"
                   "  --tls           speak TLS; the server's certificate must be trusted (the\n"
                   "                  system's CAs, or --tls-ca FILE) and name HOST\n"
                   "  --tls-insecure  do not check the certificate at all (says so once)\n"
                   "  --cert, --key   a client certificate of one's own (PEM)\n");
            return 0;
        default:
            fprintf(stderr, "yard-chat connect: unknown option '%s'\nTry 'yard-chat --help'.\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind >= argc || !client.user) {
        fprintf(stderr, "yard-chat connect: expected HOST:PORT and --user NAME\nTry 'yard-chat "
                        "--help'.\n");
        return 2;
    }
    client.target_text = argv[optind];
    char err[512];
    yard_addr_list_t found;
    if (yard_addr_resolve(client.target_text, &found, err, sizeof err) < 0) {
        fprintf(stderr, "yard-chat connect: %s\n", err);
        return 2;
    }
    client.addr = found.a[0];
    if (!o->use_tls && (o->ca || o->insecure || o->cert || o->key)) {
        fprintf(stderr, "yard-chat connect: --tls-ca, --tls-insecure, --cert and --key go with "
                        "--tls\nTry 'yard-chat --help'.\n");
        return 2;
    }
    if (o->ca && o->insecure) {
        fprintf(stderr, "yard-chat connect: --tls-ca and --tls-insecure exclude each other\n"
                        "Try 'yard-chat --help'.\n");
        return 2;
    }
    return -1;
}

/* With --tls, the name the server's certificate must carry (HOST of
 * HOST:PORT) and the client's TLS context; false: it could not be made. */
static bool tls_setup(const struct connect_opts *o)
{
    char err[512];
    if (o->use_tls) {
        /* HOST of HOST:PORT, without an IPv6 address's brackets. */
        const char *colon = strrchr(client.target_text, ':');
        size_t hl = colon ? (size_t)(colon - client.target_text) : strlen(client.target_text);
        const char *h = client.target_text;
        if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']')
            h++, hl -= 2;
        snprintf(client_tls_host, sizeof client_tls_host, "%.*s", (int)hl, h);
        if (yard_tls_client_ctx_new(&client_tls_ctx, o->ca, o->insecure, o->cert, o->key, err,
                                    sizeof err) < 0) {
            fprintf(stderr, "yard-chat connect: %s\n", err);
            return false;
        }
        if (o->insecure)
            fprintf(stderr, "yard-chat connect: --tls-insecure: the server's certificate is not "
                            "checked; anyone on the path can read and change this session\n");
    }
    return true;
}

/* The terminal's character set, and the terminal UI started (without
 * --plain). */
static void ui_start(void)
{
    /* The terminal's character set comes from the locale. --plain into a
     * pipe or a file is data for a program: UTF-8 whatever the locale. */
    setlocale(LC_ALL, "");
    client.utf8 = !strcmp(nl_langinfo(CODESET), "UTF-8") || (client.plain && !isatty(STDOUT_FILENO));
    static const char no_utf8[] = "the locale (LC_ALL, LC_CTYPE, LANG) is not UTF-8: showing ASCII "
                                  "only, '?' for any other character";
    if (client.plain && !client.utf8)
        fprintf(stderr, "yard-chat connect: %s\n", no_utf8);
    if (!client.plain) {
        initscr();
        cbreak();
        noecho();
        keypad(stdscr, TRUE);
        nodelay(stdscr, TRUE);
        if (has_colors()) {
            start_color();
            use_default_colors();
            for (short i = 1; i <= 6; i++)
                init_pair(i, i, -1);
        }
        if (!client.utf8)
            client_show("* %s", no_utf8);
        client_ui_draw();
    }
}

/* --plain: the lines stdin has for the server. false: leave (the user's
 * /quit, or stdin ended, which says goodbye first and closes stdin_open). */
static bool plain_input(bool *stdin_open)
{
    /* read(), not stdio: poll() cannot see lines stdio has buffered. */
    static char buf[4096];
    static size_t have;
    ssize_t n = read(0, buf + have, sizeof buf - 1 - have);
    bool more = true;
    if (n > 0)
        have += (size_t)n;
    else if (have)
        buf[have++] = '\n'; /* a last line without its newline */
    char *start = buf, *nl;
    while (more && (nl = memchr(start, '\n', (size_t)(buf + have - start)))) {
        *nl = 0;
        more = client_user_line(start);
        start = nl + 1;
    }
    have = (size_t)(buf + have - start);
    memmove(buf, start, have);
    if (more && have == sizeof buf - 1) {
        /* A line longer than the buffer: send what there is, up
         * to its last cluster (which may go on in the next read),
         * never half a character. */
        size_t k = chat_cluster_prev(buf, have, have);
        if (!k)
            k = chat_cut(buf, have, have - 1);
        char line[sizeof buf];
        memcpy(line, buf, k);
        line[k] = 0;
        more = client_user_line(line);
        have -= k;
        memmove(buf, buf + k, have);
    }
    if (!more)
        return false;
    if (n <= 0) {
        /* stdin ended: say goodbye and leave. */
        client_mark_read(true);
        client_send_line("QUIT :bye");
        *stdin_open = false;
        return false;
    }
    return true;
}

/* The terminal UI: the keys typed. false: the user quit. */
static bool terminal_input(void)
{
    /* get_wch: whole characters, however many bytes they took. */
    wint_t ch;
    int r;
    bool go = true;
    while (go && (r = get_wch(&ch)) != ERR)
        go = client_ui_key(r == KEY_CODE_YES, ch);
    if (go)
        client_ui_draw();
    return go;
}

/* The end: QUIT left to reach the server, then the connection closed. */
static void close_connection(void)
{
    /* Let the QUIT reach the server before closing. */
    if (client_tls) {
        yard_tls_close_notify(client_tls);
        client_tls_flush();
    }
    shutdown(client.fd, SHUT_WR);
    struct pollfd p = {.fd = client.fd, .events = POLLIN};
    char sink[4096];
    while (poll(&p, 1, 1000) > 0 && read(client.fd, sink, sizeof sink) > 0) {
    }
    client_drop_connection();
}

int chat_connect_main(int argc, char **argv)
{
    struct connect_opts o = {0};
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (!tls_setup(&o))
        return 1;
    if (read_password(o.pwfile) < 0)
        return 1;
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    client.status = "connecting";
    client.backoff_s = 1;
    ui_start();
    int status = 0;
    bool stdin_open = true;
    time_t retry_at = 0;
    client_try_connect();
    while (!stop_requested) {
        if (client.fd < 0 && !retry_at) {
            client.status = "reconnecting";
            client_show("* disconnected; trying again in %d s", client.backoff_s);
            retry_at = time(NULL) + client.backoff_s;
            client.backoff_s = client.backoff_s * 2 > 30 ? 30 : client.backoff_s * 2;
        }
        if (client.fd < 0 && time(NULL) >= retry_at) {
            retry_at = 0;
            if (!client_try_connect())
                continue;
        }
        struct pollfd pfd[2] = {{.fd = stdin_open ? 0 : -1, .events = POLLIN},
                                {.fd = client.fd, .events = POLLIN}};
        bool unmarked = false;
        for (int i = 0; i < client.nchans; i++)
            unmarked |= client.unmarked[i];
        int timeout = client.fd < 0 ? 1000 * (int)(retry_at - time(NULL) > 0 ? retry_at - time(NULL) : 0)
                      : unmarked && client.history ? 1000 /* the read marker is due in a second */
                                                   : -1;
        if (poll(pfd, 2, timeout) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (client.fd >= 0 && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)))
            client_on_readable();
        if (client.fd >= 0)
            client_mark_read(false);
        if (pfd[0].revents & (POLLIN | POLLHUP)) {
            if (client.plain) {
                if (!plain_input(&stdin_open))
                    break;
            } else if (!terminal_input()) {
                break;
            }
        }
    }
    if (client.fd >= 0)
        close_connection();
    yard_tls_ctx_free(client_tls_ctx);
    if (!client.plain)
        endwin();
    explicit_bzero(client.password, sizeof client.password);
    return status;
}
