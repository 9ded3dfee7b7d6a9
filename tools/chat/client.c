/* yard-chat connect HOST:PORT --user NAME: the chat service's terminal
 * client. It logs in with SASL PLAIN (asking for server-time and
 * echo-message), joins the channels given, and then either draws a
 * terminal UI (ncurses: scrollback with PgUp/PgDn, an editable input line,
 * a colour per nick, a status line) or, with --plain, reads lines from stdin
 * and prints what arrives on stdout, for scripts and tests. It waits in
 * poll() on the terminal and the socket: no busy polling. When the
 * connection drops it reconnects with a growing back-off (1 s doubling to
 * 30 s) and joins again; the server replays what was missed. */
#include <ctype.h>
#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "chat.h"
#include "yard/net.h"
#include "yard/proto_ircline.h"

#define MAX_CHANS 32
#define SCROLLBACK 2000

static struct client {
    const char *target_text;
    yard_addr_t addr;
    const char *user;
    char password[512];
    bool plain;
    char chans[MAX_CHANS][64];
    int nchans;
    char current[64]; /* where plain text goes */
    int fd;
    char in[16384];
    size_t in_len;
    bool logged_in;
    int backoff_s;
    /* the UI */
    char *lines[SCROLLBACK];
    int nlines, scroll; /* scroll: lines up from the bottom */
    int unread;
    char input[512];
    size_t input_len, cursor;
    const char *status;
} C = {.fd = -1};

/* ---- output -------------------------------------------------------------- */

static void ui_draw(void);

static int nick_colour(const char *nick, size_t n)
{
    unsigned h = 5381;
    for (size_t i = 0; i < n; i++)
        h = h * 33 + (unsigned char)nick[i];
    return 1 + (int)(h % 6);
}

static void show(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void show(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (C.plain) {
        printf("%s\n", line);
        fflush(stdout);
        return;
    }
    if (C.nlines == SCROLLBACK) {
        free(C.lines[0]);
        memmove(C.lines, C.lines + 1, (SCROLLBACK - 1) * sizeof C.lines[0]);
        C.nlines--;
    }
    C.lines[C.nlines++] = strdup(line);
    if (C.scroll)
        C.unread++;
    ui_draw();
}

/* ---- the connection ------------------------------------------------------ */

static void send_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void send_line(const char *fmt, ...)
{
    if (C.fd < 0)
        return;
    char line[600];
    bool cut;
    va_list ap;
    va_start(ap, fmt);
    size_t n = yard_irc_vline(line, sizeof line, &cut, fmt, ap);
    va_end(ap);
    if (n && yard_write_all(C.fd, line, n) < 0) {
        close(C.fd);
        C.fd = -1;
    }
}

static void b64(const char *in, size_t n, char *out)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned char)in[i] << 16;
        if (i + 1 < n)
            v |= (unsigned char)in[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)in[i + 2];
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        out[o++] = i + 1 < n ? t[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[o] = 0;
}

static bool try_connect(void)
{
    char err[256];
    C.fd = yard_connect(&C.addr, false, err, sizeof err);
    if (C.fd < 0) {
        show("* cannot connect to %s: %s", C.target_text, err);
        return false;
    }
    C.in_len = 0;
    C.logged_in = false;
    send_line("CAP LS 302");
    send_line("NICK %s", C.user);
    send_line("USER %s 0 * :%s", C.user, C.user);
    send_line("CAP REQ :sasl server-time echo-message");
    return C.fd >= 0;
}

static void on_line(char *line)
{
    /* server-time: keep the hour and minute for the display. */
    char stamp[8] = "";
    if (line[0] == '@') {
        char *t = strstr(line, "time=");
        if (t && strlen(t) > 21)
            snprintf(stamp, sizeof stamp, "%.5s ", t + 16);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(stamp, sizeof stamp, "%H:%M ", &tm);
    }
    char *src = NULL;
    char *p = line;
    if (*p == '@') {
        p = strchr(p, ' ');
        if (!p)
            return;
        p++;
    }
    if (*p == ':') {
        src = p + 1;
        p = strchr(p, ' ');
        if (!p)
            return;
        *p++ = 0;
        char *bang = strchr(src, '!');
        if (bang)
            *bang = 0;
    }
    yard_irc_msg_t m;
    if (!yard_irc_parse(p, &m))
        return;
    if (!strcmp(m.cmd, "PING")) {
        send_line("PONG :%s", m.n ? m.params[0] : "");
    } else if (!strcmp(m.cmd, "CAP") && m.n >= 2 && !strcmp(m.params[1], "ACK")) {
        send_line("AUTHENTICATE PLAIN");
    } else if (!strcmp(m.cmd, "CAP") && m.n >= 2 && !strcmp(m.params[1], "NAK")) {
        show("* the server refused SASL");
    } else if (!strcmp(m.cmd, "AUTHENTICATE") && m.n && !strcmp(m.params[0], "+")) {
        char plain[600], enc[820];
        size_t ul = strlen(C.user), pl = strlen(C.password);
        plain[0] = 0;
        memcpy(plain + 1, C.user, ul);
        plain[1 + ul] = 0;
        memcpy(plain + 2 + ul, C.password, pl);
        b64(plain, 2 + ul + pl, enc);
        explicit_bzero(plain, sizeof plain);
        send_line("AUTHENTICATE %s", enc);
        explicit_bzero(enc, sizeof enc);
    } else if (!strcmp(m.cmd, "903")) {
        send_line("CAP END");
    } else if (!strcmp(m.cmd, "904") || !strcmp(m.cmd, "464")) {
        show("* login failed: %s", m.n ? m.params[m.n - 1] : "");
        C.status = "login failed";
    } else if (!strcmp(m.cmd, "001")) {
        C.logged_in = true;
        C.backoff_s = 1;
        C.status = "connected";
        show("* connected to %s as %s", C.target_text, C.user);
        for (int i = 0; i < C.nchans; i++)
            send_line("JOIN %s", C.chans[i]);
    } else if (!strcmp(m.cmd, "PRIVMSG") || !strcmp(m.cmd, "NOTICE")) {
        const char *from = src ? src : "?";
        const char *text = m.n > 1 ? m.params[1] : "";
        const char *where = m.n ? m.params[0] : "?";
        bool notice = m.cmd[0] == 'N';
        if (!strncmp(text, "\001ACTION ", 8)) {
            size_t tl = strlen(text);
            show("%s[%s] * %s %.*s", stamp, where, from, (int)(tl - 8 - (text[tl - 1] == 1)),
                 text + 8);
        } else if (notice) {
            show("%s[%s] -%s- %s", stamp, where, from, text);
        } else {
            show("%s[%s] <%s> %s", stamp, where, from, text);
        }
    } else if (!strcmp(m.cmd, "JOIN") && src && !strcasecmp(src, C.user) && m.n) {
        snprintf(C.current, sizeof C.current, "%s", m.params[0]);
        show("* joined %s", m.params[0]);
    } else if (!strcmp(m.cmd, "PART") && m.n) {
        show("* left %s", m.params[0]);
    } else if (!strcmp(m.cmd, "332") && m.n >= 3) {
        show("* topic of %s: %s", m.params[1], m.params[2]);
    } else if (!strcmp(m.cmd, "353") && m.n >= 4) {
        show("* in %s: %s", m.params[2], m.params[3]);
    } else if (!strcmp(m.cmd, "ERROR")) {
        show("* %s", m.n ? m.params[0] : "error");
    } else if (isdigit((unsigned char)m.cmd[0]) && m.n >= 2 && strcmp(m.cmd, "366") &&
               strcmp(m.cmd, "333") && strcmp(m.cmd, "005") && strcmp(m.cmd, "004") &&
               strcmp(m.cmd, "900")) {
        show("* %s", m.params[m.n - 1]);
    }
}

static int on_line_cb(char *line, void *arg)
{
    (void)arg;
    on_line(line);
    return 0;
}

static bool on_readable(void)
{
    ssize_t n = read(C.fd, C.in + C.in_len, sizeof C.in - C.in_len);
    if (n <= 0) {
        close(C.fd);
        C.fd = -1;
        return false;
    }
    C.in_len += (size_t)n;
    size_t off = (size_t)yard_irc_each_line(C.in, C.in_len, on_line_cb, NULL);
    memmove(C.in, C.in + off, C.in_len - off);
    C.in_len -= off;
    return true;
}

/* ---- what the user types ------------------------------------------------- */

static bool user_line(char *line)
{
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = 0;
    if (!n)
        return true;
    if (line[0] != '/') {
        if (!C.current[0]) {
            show("* join a channel first (/join #name) or /msg someone");
            return true;
        }
        send_line("PRIVMSG %s :%s", C.current, line);
        return true;
    }
    char *arg = strchr(line, ' ');
    if (arg)
        *arg++ = 0;
    if (!strcmp(line, "/quit")) {
        send_line("QUIT :%s", arg ? arg : "bye");
        return false;
    } else if (!strcmp(line, "/join") && arg) {
        if (C.nchans < MAX_CHANS)
            snprintf(C.chans[C.nchans++], sizeof C.chans[0], "%s", arg);
        send_line("JOIN %s", arg);
    } else if (!strcmp(line, "/part")) {
        const char *ch = arg ? arg : C.current;
        for (int i = 0; i < C.nchans; i++)
            if (!strcasecmp(C.chans[i], ch)) {
                memmove(C.chans[i], C.chans[i + 1], (size_t)(C.nchans - i - 1) * sizeof C.chans[0]);
                C.nchans--;
                break;
            }
        send_line("PART %s", ch);
        if (!strcasecmp(ch, C.current))
            C.current[0] = 0;
    } else if (!strcmp(line, "/msg") && arg && strchr(arg, ' ')) {
        char *text = strchr(arg, ' ');
        *text++ = 0;
        send_line("PRIVMSG %s :%s", arg, text);
    } else if (!strcmp(line, "/me") && arg && C.current[0]) {
        send_line("PRIVMSG %s :\001ACTION %s\001", C.current, arg);
    } else {
        show("* commands: /join #chan, /part [#chan], /msg NAME TEXT, /me ACTION, /quit");
    }
    return true;
}

/* ---- the terminal UI ----------------------------------------------------- */

static void ui_draw(void)
{
    if (C.plain)
        return;
    int rows, cols;
    getmaxyx(stdscr, rows, cols);
    int body = rows - 2;
    erase();
    int last = C.nlines - C.scroll;
    int first = last - body < 0 ? 0 : last - body;
    for (int i = first, y = 0; i < last; i++, y++) {
        const char *l = C.lines[i];
        const char *lt = strchr(l, '<'), *gt = lt ? strchr(lt, '>') : NULL;
        if (lt && gt && has_colors()) {
            mvaddnstr(y, 0, l, (int)(lt - l) < cols ? (int)(lt - l) : cols);
            attron(COLOR_PAIR(nick_colour(lt + 1, (size_t)(gt - lt - 1))));
            addnstr(lt, (int)(gt - lt + 1));
            attroff(COLOR_PAIR(nick_colour(lt + 1, (size_t)(gt - lt - 1))));
            addnstr(gt + 1, cols - (int)(gt + 1 - l) > 0 ? cols - (int)(gt + 1 - l) : 0);
        } else {
            mvaddnstr(y, 0, l, cols);
        }
    }
    attron(A_REVERSE);
    char status[256];
    snprintf(status, sizeof status, " %s | %s | %s%s", C.target_text, C.status,
             C.current[0] ? C.current : "(no channel)",
             C.unread ? " | more below (PgDn)" : "");
    mvhline(rows - 2, 0, ' ', cols);
    mvaddnstr(rows - 2, 0, status, cols);
    attroff(A_REVERSE);
    mvaddnstr(rows - 1, 0, C.input, cols);
    move(rows - 1, (int)C.cursor < cols ? (int)C.cursor : cols - 1);
    refresh();
}

static bool ui_key(int ch)
{
    int rows = LINES;
    switch (ch) {
    case KEY_RESIZE: break;
    case KEY_PPAGE:
        C.scroll += rows - 3;
        if (C.scroll > C.nlines - 1)
            C.scroll = C.nlines > 0 ? C.nlines - 1 : 0;
        break;
    case KEY_NPAGE:
        C.scroll -= rows - 3;
        if (C.scroll <= 0) {
            C.scroll = 0;
            C.unread = 0;
        }
        break;
    case KEY_LEFT:
        if (C.cursor)
            C.cursor--;
        break;
    case KEY_RIGHT:
        if (C.cursor < C.input_len)
            C.cursor++;
        break;
    case KEY_HOME:
    case 1:
        C.cursor = 0;
        break;
    case KEY_END:
    case 5:
        C.cursor = C.input_len;
        break;
    case KEY_BACKSPACE:
    case 127:
    case 8:
        if (C.cursor) {
            memmove(C.input + C.cursor - 1, C.input + C.cursor, C.input_len - C.cursor + 1);
            C.cursor--;
            C.input_len--;
        }
        break;
    case KEY_DC:
        if (C.cursor < C.input_len) {
            memmove(C.input + C.cursor, C.input + C.cursor + 1, C.input_len - C.cursor);
            C.input_len--;
        }
        break;
    case '\n':
    case '\r':
    case KEY_ENTER: {
        char line[sizeof C.input];
        memcpy(line, C.input, C.input_len + 1);
        C.input_len = C.cursor = 0;
        C.input[0] = 0;
        if (!user_line(line))
            return false;
        break;
    }
    default:
        if (ch >= 32 && ch < 256 && C.input_len < sizeof C.input - 1) {
            memmove(C.input + C.cursor + 1, C.input + C.cursor, C.input_len - C.cursor + 1);
            C.input[C.cursor++] = (char)ch;
            C.input_len++;
        }
    }
    ui_draw();
    return true;
}

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
        ssize_t n = read(fd, C.password, sizeof C.password - 1);
        close(fd);
        if (n <= 0) {
            fprintf(stderr, "yard-chat connect: --password-file %s is empty\n", file);
            return -1;
        }
        C.password[n] = 0;
        C.password[strcspn(C.password, "\r\n")] = 0;
        return 0;
    }
    if (env && *env) {
        snprintf(C.password, sizeof C.password, "%s", env);
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
    fprintf(tty, "Password for %s: ", C.user);
    fflush(tty);
    tcsetattr(fileno(tty), TCSAFLUSH, &quiet);
    bool ok = fgets(C.password, sizeof C.password, tty) != NULL;
    tcsetattr(fileno(tty), TCSAFLUSH, &old);
    fprintf(tty, "\n");
    fclose(tty);
    C.password[strcspn(C.password, "\r\n")] = 0;
    return ok && C.password[0] ? 0 : -1;
}

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { (void)sig, stop_requested = 1; }

int chat_connect_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"user", required_argument, NULL, 'u'},  {"plain", no_argument, NULL, 'p'},
        {"join", required_argument, NULL, 'j'},  {"password-file", required_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0},
    };
    const char *pwfile = NULL;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'u': C.user = optarg; break;
        case 'p': C.plain = true; break;
        case 'f': pwfile = optarg; break;
        case 'j':
            if (C.nchans < MAX_CHANS)
                snprintf(C.chans[C.nchans++], sizeof C.chans[0], "%s", optarg);
            break;
        case 'h':
            printf("usage: yard-chat connect HOST:PORT --user NAME [--join #chan]... [--plain]\n"
                   "                          [--password-file FILE]\n");
            return 0;
        default:
            fprintf(stderr, "yard-chat connect: unknown option '%s'\nTry 'yard-chat --help'.\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind >= argc || !C.user) {
        fprintf(stderr, "yard-chat connect: expected HOST:PORT and --user NAME\nTry 'yard-chat "
                        "--help'.\n");
        return 2;
    }
    C.target_text = argv[optind];
    char err[256];
    if (yard_addr_parse(C.target_text, &C.addr, err, sizeof err) < 0) {
        fprintf(stderr, "yard-chat connect: %s\n", err);
        return 2;
    }
    if (read_password(pwfile) < 0)
        return 1;
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    C.status = "connecting";
    C.backoff_s = 1;
    if (!C.plain) {
        setlocale(LC_ALL, "");
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
        ui_draw();
    }
    int status = 0;
    bool stdin_open = true;
    time_t retry_at = 0;
    try_connect();
    while (!stop_requested) {
        if (C.fd < 0 && !retry_at) {
            C.status = "reconnecting";
            show("* disconnected; trying again in %d s", C.backoff_s);
            retry_at = time(NULL) + C.backoff_s;
            C.backoff_s = C.backoff_s * 2 > 30 ? 30 : C.backoff_s * 2;
        }
        if (C.fd < 0 && time(NULL) >= retry_at) {
            retry_at = 0;
            if (!try_connect())
                continue;
        }
        struct pollfd pfd[2] = {{.fd = stdin_open ? 0 : -1, .events = POLLIN},
                                {.fd = C.fd, .events = POLLIN}};
        int timeout = C.fd < 0 ? 1000 * (int)(retry_at - time(NULL) > 0 ? retry_at - time(NULL) : 0)
                               : -1;
        if (poll(pfd, 2, timeout) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (C.fd >= 0 && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)))
            on_readable();
        if (pfd[0].revents & (POLLIN | POLLHUP)) {
            if (C.plain) {
                /* read(), not stdio: poll() cannot see lines stdio has buffered. */
                static char buf[4096];
                static size_t have;
                ssize_t n = read(0, buf + have, sizeof buf - 1 - have);
                bool more = true;
                if (n > 0)
                    have += (size_t)n;
                if (n <= 0 || have == sizeof buf - 1) {
                    buf[have++] = '\n'; /* a last line without its newline */
                }
                char *start = buf, *nl;
                while (more && (nl = memchr(start, '\n', (size_t)(buf + have - start)))) {
                    *nl = 0;
                    more = user_line(start);
                    start = nl + 1;
                }
                have = (size_t)(buf + have - start);
                memmove(buf, start, have);
                if (!more)
                    break;
                if (n <= 0) {
                    /* stdin ended: say goodbye and leave. */
                    send_line("QUIT :bye");
                    stdin_open = false;
                    break;
                }
            } else {
                int ch;
                bool go = true;
                while (go && (ch = getch()) != ERR)
                    go = ui_key(ch);
                if (!go)
                    break;
            }
        }
    }
    if (C.fd >= 0) {
        /* Let the QUIT reach the server before closing. */
        shutdown(C.fd, SHUT_WR);
        struct pollfd p = {.fd = C.fd, .events = POLLIN};
        char sink[4096];
        while (poll(&p, 1, 1000) > 0 && read(C.fd, sink, sizeof sink) > 0) {
        }
        close(C.fd);
    }
    if (!C.plain)
        endwin();
    explicit_bzero(C.password, sizeof C.password);
    return status;
}
