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
#include <ctype.h>
#define NCURSES_WIDECHAR 1 /* the wide-character API: get_wch, cchar_t, add_wch */
#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <langinfo.h>
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
#include <wchar.h>

#include "chat.h"
#include "text.h"
#include "yard/buf.h"
#include "yard/net.h"
#include "yard/proto_ircline.h"
#include "yard/tls.h"

#define MAX_CHANS 32
#define SCROLLBACK 2000
#define HISTORY_PAGE 50 /* older messages fetched per page up past the buffer */

static struct client {
    const char *target_text;
    yard_addr_t addr;
    const char *user;
    char password[512];
    bool plain;
    bool utf8; /* the terminal takes UTF-8 (else ASCII and '?') */
    char chans[MAX_CHANS][64];
    int nchans;
    char current[64]; /* where plain text goes */
    int fd;
    char in[16384];
    size_t in_len;
    bool logged_in;
    int backoff_s;
    /* IRCv3 history and read markers (when the server took them) */
    bool history;                 /* batch, message-tags, draft/chathistory... granted */
    uint64_t oldest[MAX_CHANS];   /* per joined channel: the oldest msgid seen (0: none) */
    char newest[MAX_CHANS][32];   /* ... and the newest message's time, to mark read */
    bool unmarked[MAX_CHANS];     /* newest not marked read yet */
    time_t marked_at;
    char hist_chan[64];           /* a CHATHISTORY request in flight for it */
    char hist_ref[32];            /* its batch */
    char *hist_lines[HISTORY_PAGE];
    int hist_n;
    uint64_t hist_oldest;
    /* the UI */
    char *lines[SCROLLBACK];
    int nlines, scroll; /* scroll: lines up from the bottom */
    int unread;
    char input[512]; /* UTF-8, NUL-terminated */
    size_t input_len, cursor; /* bytes; the cursor is always between clusters */
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
    int len = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (len >= (int)sizeof line) /* cut: drop the last cluster, it may be partial */
        line[chat_cluster_prev(line, sizeof line - 1, sizeof line - 1)] = 0;
    if (C.plain) {
        /* Escaped like the terminal UI draws it: a line-mode terminal
         * would act on a raw ESC, CR or C1 just the same. */
        char safe[3 * sizeof line + 1];
        chat_sanitize(line, strlen(line), C.utf8, safe, sizeof safe);
        printf("%s\n", safe);
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

static yard_tls_ctx_t *tls_ctx; /* --tls */
static yard_tls_t *tls;         /* the connection's, with --tls */
static char tls_host[256];      /* the name the server's certificate must carry */

static void drop_connection(void)
{
    yard_tls_free(tls);
    tls = NULL;
    if (C.fd >= 0)
        close(C.fd);
    C.fd = -1;
}

/* The records TLS has written, to the socket: 0, or -1. */
static int tls_flush(void)
{
    yard_buf_t b = YARD_BUF_INIT;
    int rc = yard_tls_take(tls, &b) < 0 ? -1 : 0;
    if (rc == 0 && b.len)
        rc = yard_write_all(C.fd, yard_buf_head(&b), b.len) < 0 ? -1 : 0;
    yard_buf_free(&b);
    return rc;
}

/* Bytes for the server, sealed with --tls: 0, or -1. */
static int wire_write(const char *p, size_t n)
{
    if (!tls)
        return yard_write_all(C.fd, p, n) < 0 ? -1 : 0;
    return yard_tls_write(tls, (const uint8_t *)p, n) < 0 ? -1 : tls_flush();
}

/* The handshake, before anything is said: true once the server is who it
 * should be (or --tls-insecure). Bounded by 15 s. */
static bool tls_start(void)
{
    tls = yard_tls_client_new(tls_ctx, tls_host);
    if (!tls) {
        show("* out of memory");
        return false;
    }
    time_t until = time(NULL) + 15;
    for (;;) {
        int r = yard_tls_handshake(tls);
        if (tls_flush() < 0) {
            show("* %s: the connection failed during the TLS handshake", C.target_text);
            return false;
        }
        if (r == 1)
            return true;
        if (r < 0) {
            show("* %s: %s", C.target_text, yard_tls_why(tls));
            return false;
        }
        if (time(NULL) >= until) {
            show("* %s: no TLS handshake within 15 s", C.target_text);
            return false;
        }
        struct pollfd p = {.fd = C.fd, .events = POLLIN};
        if (poll(&p, 1, 1000) <= 0)
            continue;
        char buf[16384];
        ssize_t n = read(C.fd, buf, sizeof buf);
        if (n <= 0 || yard_tls_feed(tls, (const uint8_t *)buf, (size_t)n) < 0) {
            show("* %s closed the connection during the TLS handshake (a plain-text port?)",
                 C.target_text);
            return false;
        }
    }
}

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
    if (n && wire_write(line, n) < 0)
        drop_connection();
}

static bool try_connect(void)
{
    char err[256];
    const char *call = "";
    C.fd = yard_connect(&C.addr, false, &call);
    if (C.fd < 0) {
        yard_net_message(err, sizeof err, &C.addr, call, C.fd);
        C.fd = -1;
        show("* cannot connect to %s: %s", C.target_text, err);
        return false;
    }
    if (tls_ctx && !tls_start()) {
        drop_connection();
        return false;
    }
    C.in_len = 0;
    C.logged_in = false;
    send_line("CAP LS 302");
    send_line("NICK %s", C.user);
    send_line("USER %s 0 * :%s", C.user, C.user);
    send_line("CAP REQ :sasl server-time echo-message");
    /* asked apart: a server without them still logs us in */
    send_line("CAP REQ :batch message-tags draft/chathistory draft/read-marker away-notify");
    C.history = false;
    C.hist_chan[0] = C.hist_ref[0] = 0;
    return C.fd >= 0;
}

static int chan_index(const char *name)
{
    for (int i = 0; i < C.nchans; i++)
        if (!strcasecmp(C.chans[i], name))
            return i;
    return -1;
}

/* The value of tag name in the tags of a line ("" when absent). */
static void tag_value(const char *tags, const char *name, char *out, size_t cap)
{
    out[0] = 0;
    size_t n = strlen(name);
    for (const char *t = tags; t && *t && *t != ' ';) {
        if (!strncmp(t, name, n) && t[n] == '=') {
            size_t k = strcspn(t + n + 1, "; ");
            snprintf(out, cap, "%.*s", (int)k, t + n + 1);
            return;
        }
        t += strcspn(t, "; ");
        if (*t == ';')
            t++;
    }
}

/* Ask for the page of messages of the current channel before the oldest
 * one shown (or its latest, when none is). */
static void fetch_older(void)
{
    int i = chan_index(C.current);
    if (!C.history || i < 0 || C.hist_chan[0]) {
        if (!C.history)
            show("* this server does not keep history for us");
        return;
    }
    snprintf(C.hist_chan, sizeof C.hist_chan, "%s", C.current);
    C.hist_ref[0] = 0;
    C.hist_n = 0;
    C.hist_oldest = 0;
    if (C.oldest[i])
        send_line("CHATHISTORY BEFORE %s msgid=%llu %d", C.current,
                  (unsigned long long)C.oldest[i], HISTORY_PAGE);
    else
        send_line("CHATHISTORY LATEST %s * %d", C.current, HISTORY_PAGE);
}

/* The messages the user has seen are read: the newest of each channel
 * goes to the server as a read marker (at most once a second). */
static void mark_read(bool now)
{
    if (!C.history || C.scroll || (!now && time(NULL) == C.marked_at))
        return;
    for (int i = 0; i < C.nchans; i++)
        if (C.unmarked[i] && C.newest[i][0]) {
            send_line("MARKREAD %s timestamp=%s", C.chans[i], C.newest[i]);
            C.unmarked[i] = false;
        }
    C.marked_at = time(NULL);
}

/* The page of older messages arrived: above everything shown (the
 * terminal UI), or in order under a heading (--plain). */
static void history_done(void)
{
    int i = chan_index(C.hist_chan);
    if (i >= 0 && C.hist_oldest)
        C.oldest[i] = C.hist_oldest;
    if (!C.hist_n) {
        show("* no older messages of %s", C.hist_chan);
    } else if (C.plain) {
        show("* %d older messages of %s:", C.hist_n, C.hist_chan);
        for (int k = 0; k < C.hist_n; k++)
            show("%s", C.hist_lines[k]);
        show("* (end of the older messages of %s)", C.hist_chan);
    } else {
        int room = SCROLLBACK - C.nlines, k0 = C.hist_n > room ? C.hist_n - room : 0;
        int add = C.hist_n - k0;
        memmove(C.lines + add, C.lines, (size_t)C.nlines * sizeof C.lines[0]);
        for (int k = k0; k < C.hist_n; k++)
            C.lines[k - k0] = strdup(C.hist_lines[k]);
        C.nlines += add;
        C.scroll = C.nlines - add; /* the page ends at the bottom of the view */
        ui_draw();
    }
    for (int k = 0; k < C.hist_n; k++)
        free(C.hist_lines[k]);
    C.hist_n = 0;
    C.hist_chan[0] = C.hist_ref[0] = 0;
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
    char msgid[24] = "", batch[32] = "", when[32] = "";
    if (*p == '@') {
        tag_value(p + 1, "msgid", msgid, sizeof msgid);
        tag_value(p + 1, "batch", batch, sizeof batch);
        tag_value(p + 1, "time", when, sizeof when);
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
    } else if (!strcmp(m.cmd, "CAP") && m.n >= 3 && !strcmp(m.params[1], "ACK") &&
               strstr(m.params[2], "draft/chathistory")) {
        C.history = true;
    } else if (!strcmp(m.cmd, "CAP") && m.n >= 2 && !strcmp(m.params[1], "ACK")) {
        send_line("AUTHENTICATE PLAIN");
    } else if (!strcmp(m.cmd, "CAP") && m.n >= 3 && !strcmp(m.params[1], "NAK") &&
               strstr(m.params[2], "draft/chathistory")) {
        C.history = false; /* no history from this server: the rest works */
    } else if (!strcmp(m.cmd, "CAP") && m.n >= 2 && !strcmp(m.params[1], "NAK")) {
        show("* the server refused SASL");
    } else if (!strcmp(m.cmd, "BATCH") && m.n >= 3 && m.params[0][0] == '+' &&
               !strcmp(m.params[1], "chathistory") && C.hist_chan[0] && !C.hist_ref[0] &&
               !strcasecmp(m.params[2], C.hist_chan)) {
        snprintf(C.hist_ref, sizeof C.hist_ref, "%s", m.params[0] + 1); /* our page */
    } else if (!strcmp(m.cmd, "BATCH") && m.n >= 1 && m.params[0][0] == '-' && C.hist_ref[0] &&
               !strcmp(m.params[0] + 1, C.hist_ref)) {
        history_done();
    } else if (!strcmp(m.cmd, "FAIL") && m.n >= 2 && !strcmp(m.params[0], "CHATHISTORY")) {
        show("* history: %s", m.params[m.n - 1]);
        C.hist_chan[0] = C.hist_ref[0] = 0;
    } else if (!strcmp(m.cmd, "MARKREAD")) {
        /* where this account stopped reading (any of its clients): nothing to show */
    } else if (!strcmp(m.cmd, "AWAY") && src) {
        if (m.n && m.params[0][0])
            show("%s* %s is away: %s", stamp, src, m.params[0]);
        else
            show("%s* %s is back", stamp, src);
    } else if (!strcmp(m.cmd, "AUTHENTICATE") && m.n && !strcmp(m.params[0], "+")) {
        char plain[600], enc[820];
        size_t ul = strlen(C.user), pl = strlen(C.password);
        if (2 + ul + pl > sizeof plain) {
            show("* the user name and password are too long for SASL PLAIN");
            C.status = "login failed";
            return;
        }
        plain[0] = 0;
        memcpy(plain + 1, C.user, ul);
        plain[1 + ul] = 0;
        memcpy(plain + 2 + ul, C.password, pl);
        chat_b64_encode(plain, 2 + ul + pl, enc, sizeof enc);
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
        char shown[1024];
        if (!strncmp(text, "\001ACTION ", 8)) {
            size_t tl = strlen(text);
            snprintf(shown, sizeof shown, "%s[%s] * %s %.*s", stamp, where, from,
                     (int)(tl - 8 - (text[tl - 1] == 1)), text + 8);
        } else if (notice) {
            snprintf(shown, sizeof shown, "%s[%s] -%s- %s", stamp, where, from, text);
        } else {
            snprintf(shown, sizeof shown, "%s[%s] <%s> %s", stamp, where, from, text);
        }
        uint64_t id = strtoull(msgid, NULL, 10);
        int ci = chan_index(where);
        bool page = C.hist_ref[0] && !strcmp(batch, C.hist_ref);
        if (ci >= 0 && id && (!C.oldest[ci] || id < C.oldest[ci]) && !page)
            C.oldest[ci] = id;
        if (page) {
            if (C.hist_n < HISTORY_PAGE)
                C.hist_lines[C.hist_n++] = strdup(shown);
            if (id && (!C.hist_oldest || id < C.hist_oldest))
                C.hist_oldest = id;
        } else {
            show("%s", shown);
            if (ci >= 0 && when[0]) { /* shown: read, once the user is at the bottom */
                snprintf(C.newest[ci], sizeof C.newest[ci], "%s", when);
                C.unmarked[ci] = true;
                mark_read(false);
            }
        }
    } else if (!strcmp(m.cmd, "JOIN") && src && !strcasecmp(src, C.user) && m.n) {
        snprintf(C.current, sizeof C.current, "%s", m.params[0]);
        show("* joined %s", m.params[0]);
    } else if (!strcmp(m.cmd, "JOIN") && src && m.n) {
        show("%s[%s] * %s joined", stamp, m.params[0], src);
    } else if (!strcmp(m.cmd, "PART") && m.n && src && strcasecmp(src, C.user)) {
        show("%s[%s] * %s left%s%s%s", stamp, m.params[0], src, m.n > 1 && m.params[1][0] ? " (" : "",
             m.n > 1 ? m.params[1] : "", m.n > 1 && m.params[1][0] ? ")" : "");
    } else if (!strcmp(m.cmd, "PART") && m.n) {
        show("* left %s", m.params[0]);
    } else if (!strcmp(m.cmd, "QUIT") && src) {
        show("%s* %s quit%s%s%s", stamp, src, m.n && m.params[0][0] ? " (" : "",
             m.n ? m.params[0] : "", m.n && m.params[0][0] ? ")" : "");
    } else if (!strcmp(m.cmd, "TOPIC") && src && m.n >= 2) {
        show("%s[%s] * %s set the topic: %s", stamp, m.params[0], src, m.params[1]);
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

/* The complete lines of C.in, handled; the rest kept. */
static void take_lines(void)
{
    size_t off = (size_t)yard_irc_each_line(C.in, C.in_len, on_line_cb, NULL);
    memmove(C.in, C.in + off, C.in_len - off);
    C.in_len -= off;
}

/* With --tls: every plaintext byte the records fed so far hold. */
static bool tls_drain(void)
{
    for (;;) {
        long r = yard_tls_read(tls, (uint8_t *)C.in + C.in_len, sizeof C.in - C.in_len);
        if (r > 0) {
            C.in_len += (size_t)r;
            take_lines();
            if (C.in_len == sizeof C.in)
                return false; /* a line longer than any the server sends */
            continue;
        }
        if (r == -EPROTO)
            show("* %s: %s", C.target_text, yard_tls_why(tls));
        return r == 0 && tls_flush() == 0;
    }
}

static bool on_readable(void)
{
    char buf[sizeof C.in];
    size_t room = tls ? sizeof buf : sizeof C.in - C.in_len;
    ssize_t n = read(C.fd, tls ? buf : C.in + C.in_len, room);
    if (n <= 0 || (tls && yard_tls_feed(tls, (const uint8_t *)buf, (size_t)n) < 0)) {
        drop_connection();
        return false;
    }
    if (tls) {
        if (!tls_drain()) {
            drop_connection();
            return false;
        }
        return true;
    }
    C.in_len += (size_t)n;
    take_lines();
    return true;
}

/* ---- what the user types ------------------------------------------------- */

/* Sends text to target in as many PRIVMSGs as it takes, each cut between
 * clusters (text.h), so that the line the server relays,
 * ":user!user@host PRIVMSG target :text\r\n", fits its 512 bytes: the
 * server would cut a longer one itself, inside a character cluster. The
 * host is the server's name ("yard"); 63 bytes leave room for another's. */
static void send_text(const char *target, const char *text, bool action)
{
    size_t over = 1 + 2 * strlen(C.user) + 2 + 63 + 1 + strlen("PRIVMSG") + 1 + strlen(target) +
                  2 + 2 + (action ? strlen("\001ACTION \001") : 0);
    size_t room = over + 64 < YARD_IRC_MSG_MAX ? YARD_IRC_MSG_MAX - over : 64;
    size_t n = strlen(text);
    while (n) {
        size_t k = chat_cut(text, n, room);
        if (!k)
            break;
        if (action)
            send_line("PRIVMSG %s :\001ACTION %.*s\001", target, (int)k, text);
        else
            send_line("PRIVMSG %s :%.*s", target, (int)k, text);
        text += k;
        n -= k;
    }
}

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
        send_text(C.current, line, false);
        return true;
    }
    char *arg = strchr(line, ' ');
    if (arg)
        *arg++ = 0;
    if (!strcmp(line, "/quit")) {
        mark_read(true);
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
        send_text(arg, text, false);
    } else if (!strcmp(line, "/me") && arg && C.current[0]) {
        send_text(C.current, arg, true);
    } else if (!strcmp(line, "/history") && C.current[0]) {
        fetch_older();
    } else if (!strcmp(line, "/topic") && C.current[0]) {
        if (arg)
            send_line("TOPIC %s :%s", C.current, arg);
        else
            send_line("TOPIC %s", C.current);
    } else {
        show("* commands: /join #chan, /part [#chan], /msg NAME TEXT, /me ACTION, "
             "/topic [TEXT], /history (older messages), /quit [REASON]");
    }
    return true;
}

/* ---- the terminal UI ----------------------------------------------------- */

/* One unit (text.h) at (y, x). A cluster is one ncurses cell, a cchar_t
 * holding its base and what joins it, so ncurses counts it as wide as the
 * terminal draws it (the base's width). setcchar() keeps only the
 * non-spacing characters after the base and would drop the pictographs of
 * an emoji ZWJ sequence, so the cell's characters are filled in directly
 * (cchar_t is a public struct in ncursesw); ncurses writes them all out and
 * advances by the base's width, as the terminal does. A cell holds at most
 * CCHARW_MAX (5) characters: the rest of a longer cluster (a family emoji,
 * a pile of combining marks) is not drawn, and a ZWJ left last is dropped
 * so the terminal cannot join the next cell to it. */
static void put_unit(int y, int x, const char *p, size_t len, const chat_unit_t *u, attr_t attr,
                     short pair)
{
    cchar_t cc;
    if (u->kind != CHAT_UNIT_TEXT) {
        /* '?', U+FFFD or an ASCII escape: one cell per character. */
        if (u->kind == CHAT_UNIT_ESCAPE)
            attr ^= A_REVERSE;
        size_t n = strlen(u->show);
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            i += chat_utf8_decode(u->show + i, n - i, &cp);
            wchar_t one[2] = {(wchar_t)cp, 0};
            setcchar(&cc, one, attr, pair, NULL);
            mvadd_wch(y, x++, &cc);
        }
        return;
    }
    wchar_t wc[CCHARW_MAX];
    int nw = 0;
    if (u->no_base)
        wc[nw++] = L' ';
    for (size_t i = 0; i < len && nw < CCHARW_MAX;) {
        uint32_t cp;
        i += chat_utf8_decode(p + i, len - i, &cp);
        wc[nw++] = (wchar_t)cp;
    }
    while (nw > 1 && wc[nw - 1] == 0x200D)
        nw--;
    setcchar(&cc, L" ", attr, pair, NULL);
    memset(cc.chars, 0, sizeof cc.chars);
    memcpy(cc.chars, wc, (size_t)nw * sizeof wc[0]);
    mvadd_wch(y, x, &cc);
}

/* Draws p[0..n) on row y from column x on, up to column maxx (exclusive),
 * never half a unit; returns the column after it. */
static int put_clipped(int y, int x, const char *p, size_t n, int maxx, attr_t attr)
{
    for (size_t i = 0; i < n;) {
        chat_unit_t u;
        size_t k = chat_unit_next(p + i, n - i, C.utf8, &u);
        if (x + u.width > maxx)
            break;
        put_unit(y, x, p + i, k, &u, attr, 0);
        x += u.width;
        i += k;
    }
    return x;
}

/* Lays a scrollback line out in rows of cols columns by display width, a
 * unit never split (a wide character that does not fit the row's last
 * column starts the next row), and draws its rows skip .. skip + max - 1
 * from screen row y on (max 0: only measures). Returns the rows it takes.
 * The "<nick>" part gets the nick's colour. */
static int put_wrapped(const char *l, int y, int skip, int max, int cols)
{
    size_t n = strlen(l);
    const char *lt = strchr(l, '<'), *gt = lt ? strchr(lt, '>') : NULL;
    short pair = lt && gt && has_colors() ? (short)nick_colour(lt + 1, (size_t)(gt - lt - 1)) : 0;
    int row = 0, x = 0;
    for (size_t i = 0; i < n;) {
        chat_unit_t u;
        size_t k = chat_unit_next(l + i, n - i, C.utf8, &u);
        if (x > 0 && x + u.width > cols) {
            row++;
            x = 0;
        }
        if (row >= skip && row < skip + max && x + u.width <= cols)
            put_unit(y + row - skip, x, l + i, k, &u, A_NORMAL,
                     pair && l + i >= lt && l + i <= gt ? pair : 0);
        x += u.width;
        i += k;
    }
    return row + 1;
}

static void ui_draw(void)
{
    if (C.plain)
        return;
    int rows, cols;
    getmaxyx(stdscr, rows, cols);
    erase();
    if (rows < 3 || cols < 4) {
        refresh();
        return;
    }
    /* The scrollback: from the line C.scroll lines up from the end, as many
     * lines upwards as fill the body; the top one may show only its last
     * rows. */
    int body = rows - 2, last = C.nlines - C.scroll, first = last, used = 0, skip = 0;
    while (first > 0 && used < body) {
        int h = put_wrapped(C.lines[--first], 0, 0, 0, cols);
        skip = used + h > body ? used + h - body : 0;
        used += h - skip;
    }
    for (int i = first, y = 0; i < last && y < body; i++) {
        int s = i == first ? skip : 0;
        y += put_wrapped(C.lines[i], y, s, body - y, cols) - s;
    }
    char status[256];
    snprintf(status, sizeof status, " %s | %s | %s%s", C.target_text, C.status,
             C.current[0] ? C.current : "(no channel)",
             C.unread ? " | more below (PgDn)" : "");
    mvhline(rows - 2, 0, ' ' | A_REVERSE, cols);
    put_clipped(rows - 2, 0, status, strlen(status), cols, A_REVERSE);
    /* The input line scrolls sideways to keep the cursor on the screen. */
    size_t start = 0;
    while (start < C.cursor && chat_text_width(C.input + start, C.cursor - start, C.utf8) >= cols)
        start += chat_cluster_len(C.input + start, C.input_len - start);
    put_clipped(rows - 1, 0, C.input + start, C.input_len - start, cols, A_NORMAL);
    int cx = chat_text_width(C.input + start, C.cursor - start, C.utf8);
    move(rows - 1, cx < cols ? cx : cols - 1);
    refresh();
}

/* After an edit the cursor may sit inside a cluster (a combining mark typed
 * before an orphaned one, a deletion that joined two): move it past. */
static void input_snap(void)
{
    size_t b = chat_cluster_prev(C.input, C.input_len, C.cursor);
    if (C.cursor > b) {
        size_t e = b + chat_cluster_len(C.input + b, C.input_len - b);
        if (e > C.cursor)
            C.cursor = e;
    }
}

static void input_cut(size_t from, size_t to)
{
    memmove(C.input + from, C.input + to, C.input_len - to + 1);
    C.input_len -= to - from;
    C.cursor = from;
    input_snap();
}

/* A character typed or pasted: whole or not at all, so the line never
 * holds (or sends) part of one. Controls are not text. */
static void input_insert(wint_t ch)
{
    char enc[4];
    size_t k;
    if (ch > 0x10FFFF || chat_is_control((uint32_t)ch) || (!C.utf8 && ch >= 0x80) ||
        !(k = chat_utf8_encode((uint32_t)ch, enc)) || C.input_len + k >= sizeof C.input)
        return;
    memmove(C.input + C.cursor + k, C.input + C.cursor, C.input_len - C.cursor + 1);
    memcpy(C.input + C.cursor, enc, k);
    C.input_len += k;
    C.cursor += k;
    input_snap();
}

/* One key from get_wch (fkey: a KEY_ code). Moves and deletions go by
 * cluster: a wide character, a letter with its accents and an emoji ZWJ
 * sequence are each one step. false: the user quit. */
static bool ui_key(bool fkey, wint_t ch)
{
    int rows = LINES;
    if (fkey && ch == KEY_PPAGE) {
        bool at_top = C.scroll >= C.nlines - 1;
        C.scroll += rows - 3;
        if (C.scroll > C.nlines - 1)
            C.scroll = C.nlines > 0 ? C.nlines - 1 : 0;
        if (at_top) /* past the buffer: older messages from the server */
            fetch_older();
    } else if (fkey && ch == KEY_NPAGE) {
        C.scroll -= rows - 3;
        if (C.scroll <= 0) {
            C.scroll = 0;
            C.unread = 0;
            mark_read(true);
        }
    } else if (fkey && ch == KEY_LEFT) {
        C.cursor = chat_cluster_prev(C.input, C.input_len, C.cursor);
    } else if (fkey && ch == KEY_RIGHT) {
        if (C.cursor < C.input_len)
            C.cursor += chat_cluster_len(C.input + C.cursor, C.input_len - C.cursor);
    } else if ((fkey && ch == KEY_HOME) || (!fkey && ch == 1)) {
        C.cursor = 0;
    } else if ((fkey && ch == KEY_END) || (!fkey && ch == 5)) {
        C.cursor = C.input_len;
    } else if ((fkey && ch == KEY_BACKSPACE) || (!fkey && (ch == 127 || ch == 8))) {
        if (C.cursor)
            input_cut(chat_cluster_prev(C.input, C.input_len, C.cursor), C.cursor);
    } else if (fkey && ch == KEY_DC) {
        if (C.cursor < C.input_len)
            input_cut(C.cursor,
                      C.cursor + chat_cluster_len(C.input + C.cursor, C.input_len - C.cursor));
    } else if ((fkey && ch == KEY_ENTER) || (!fkey && (ch == '\n' || ch == '\r'))) {
        char line[sizeof C.input];
        memcpy(line, C.input, C.input_len + 1);
        C.input_len = C.cursor = 0;
        C.input[0] = 0;
        return user_line(line);
    } else if (!fkey) {
        input_insert(ch);
    }
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
        {"tls", no_argument, NULL, 't'},         {"tls-ca", required_argument, NULL, 'a'},
        {"tls-insecure", no_argument, NULL, 'i'}, {"cert", required_argument, NULL, 'c'},
        {"key", required_argument, NULL, 'k'},   {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *pwfile = NULL, *ca = NULL, *cert = NULL, *key = NULL;
    bool use_tls = false, insecure = false;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'u': C.user = optarg; break;
        case 'p': C.plain = true; break;
        case 'f': pwfile = optarg; break;
        case 't': use_tls = true; break;
        case 'a': ca = optarg; break;
        case 'i': insecure = true; break;
        case 'c': cert = optarg; break;
        case 'k': key = optarg; break;
        case 'j':
            if (C.nchans < MAX_CHANS)
                snprintf(C.chans[C.nchans++], sizeof C.chans[0], "%s", optarg);
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
    if (optind >= argc || !C.user) {
        fprintf(stderr, "yard-chat connect: expected HOST:PORT and --user NAME\nTry 'yard-chat "
                        "--help'.\n");
        return 2;
    }
    C.target_text = argv[optind];
    char err[512];
    yard_addr_list_t found;
    if (yard_addr_resolve(C.target_text, &found, err, sizeof err) < 0) {
        fprintf(stderr, "yard-chat connect: %s\n", err);
        return 2;
    }
    C.addr = found.a[0];
    if (!use_tls && (ca || insecure || cert || key)) {
        fprintf(stderr, "yard-chat connect: --tls-ca, --tls-insecure, --cert and --key go with "
                        "--tls\nTry 'yard-chat --help'.\n");
        return 2;
    }
    if (ca && insecure) {
        fprintf(stderr, "yard-chat connect: --tls-ca and --tls-insecure exclude each other\n"
                        "Try 'yard-chat --help'.\n");
        return 2;
    }
    if (use_tls) {
        /* HOST of HOST:PORT, without an IPv6 address's brackets. */
        const char *colon = strrchr(C.target_text, ':');
        size_t hl = colon ? (size_t)(colon - C.target_text) : strlen(C.target_text);
        const char *h = C.target_text;
        if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']')
            h++, hl -= 2;
        snprintf(tls_host, sizeof tls_host, "%.*s", (int)hl, h);
        if (yard_tls_client_ctx_new(&tls_ctx, ca, insecure, cert, key, err, sizeof err) < 0) {
            fprintf(stderr, "yard-chat connect: %s\n", err);
            return 1;
        }
        if (insecure)
            fprintf(stderr, "yard-chat connect: --tls-insecure: the server's certificate is not "
                            "checked; anyone on the path can read and change this session\n");
    }
    if (read_password(pwfile) < 0)
        return 1;
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    C.status = "connecting";
    C.backoff_s = 1;
    /* The terminal's character set comes from the locale. --plain into a
     * pipe or a file is data for a program: UTF-8 whatever the locale. */
    setlocale(LC_ALL, "");
    C.utf8 = !strcmp(nl_langinfo(CODESET), "UTF-8") || (C.plain && !isatty(STDOUT_FILENO));
    static const char no_utf8[] = "the locale (LC_ALL, LC_CTYPE, LANG) is not UTF-8: showing ASCII "
                                  "only, '?' for any other character";
    if (C.plain && !C.utf8)
        fprintf(stderr, "yard-chat connect: %s\n", no_utf8);
    if (!C.plain) {
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
        if (!C.utf8)
            show("* %s", no_utf8);
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
        bool unmarked = false;
        for (int i = 0; i < C.nchans; i++)
            unmarked |= C.unmarked[i];
        int timeout = C.fd < 0 ? 1000 * (int)(retry_at - time(NULL) > 0 ? retry_at - time(NULL) : 0)
                      : unmarked && C.history ? 1000 /* the read marker is due in a second */
                                              : -1;
        if (poll(pfd, 2, timeout) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (C.fd >= 0 && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)))
            on_readable();
        if (C.fd >= 0)
            mark_read(false);
        if (pfd[0].revents & (POLLIN | POLLHUP)) {
            if (C.plain) {
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
                    more = user_line(start);
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
                    more = user_line(line);
                    have -= k;
                    memmove(buf, buf + k, have);
                }
                if (!more)
                    break;
                if (n <= 0) {
                    /* stdin ended: say goodbye and leave. */
                    mark_read(true);
                    send_line("QUIT :bye");
                    stdin_open = false;
                    break;
                }
            } else {
                /* get_wch: whole characters, however many bytes they took. */
                wint_t ch;
                int r;
                bool go = true;
                while (go && (r = get_wch(&ch)) != ERR)
                    go = ui_key(r == KEY_CODE_YES, ch);
                if (!go)
                    break;
                ui_draw();
            }
        }
    }
    if (C.fd >= 0) {
        /* Let the QUIT reach the server before closing. */
        if (tls) {
            yard_tls_close_notify(tls);
            tls_flush();
        }
        shutdown(C.fd, SHUT_WR);
        struct pollfd p = {.fd = C.fd, .events = POLLIN};
        char sink[4096];
        while (poll(&p, 1, 1000) > 0 && read(C.fd, sink, sizeof sink) > 0) {
        }
        drop_connection();
    }
    yard_tls_ctx_free(tls_ctx);
    if (!C.plain)
        endwin();
    explicit_bzero(C.password, sizeof C.password);
    return status;
}
