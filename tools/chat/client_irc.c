/* yard-chat connect (client.c): the IRC conversation: each line the server
 * sends (registration, messages, history batches and read markers), and
 * each line the user types (commands, or text cut into PRIVMSGs). */
#include "client_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"
#include "yard/proto_ircline.h"

static int chan_index(const char *name)
{
    for (int i = 0; i < client.nchans; i++)
        if (!strcasecmp(client.chans[i], name))
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
void client_fetch_older(void)
{
    int i = chan_index(client.current);
    if (!client.history || i < 0 || client.hist_chan[0]) {
        if (!client.history)
            client_show("* this server does not keep history for us");
        return;
    }
    snprintf(client.hist_chan, sizeof client.hist_chan, "%s", client.current);
    client.hist_ref[0] = 0;
    client.hist_n = 0;
    client.hist_oldest = 0;
    if (client.oldest[i])
        client_send_line("CHATHISTORY BEFORE %s msgid=%llu %d", client.current,
                  (unsigned long long)client.oldest[i], HISTORY_PAGE);
    else
        client_send_line("CHATHISTORY LATEST %s * %d", client.current, HISTORY_PAGE);
}

/* The messages the user has seen are read: the newest of each channel
 * goes to the server as a read marker (at most once a second). */
void client_mark_read(bool now)
{
    if (!client.history || client.scroll || (!now && time(NULL) == client.marked_at))
        return;
    for (int i = 0; i < client.nchans; i++)
        if (client.unmarked[i] && client.newest[i][0]) {
            client_send_line("MARKREAD %s timestamp=%s", client.chans[i], client.newest[i]);
            client.unmarked[i] = false;
        }
    client.marked_at = time(NULL);
}

/* The page of older messages arrived: above everything shown (the
 * terminal UI), or in order under a heading (--plain). */
static void history_done(void)
{
    int i = chan_index(client.hist_chan);
    if (i >= 0 && client.hist_oldest)
        client.oldest[i] = client.hist_oldest;
    if (!client.hist_n) {
        client_show("* no older messages of %s", client.hist_chan);
    } else if (client.plain) {
        client_show("* %d older messages of %s:", client.hist_n, client.hist_chan);
        for (int k = 0; k < client.hist_n; k++)
            client_show("%s", client.hist_lines[k]);
        client_show("* (end of the older messages of %s)", client.hist_chan);
    } else {
        int room = SCROLLBACK - client.nlines, k0 = client.hist_n > room ? client.hist_n - room : 0;
        int add = client.hist_n - k0;
        memmove(client.lines + add, client.lines, (size_t)client.nlines * sizeof client.lines[0]);
        for (int k = k0; k < client.hist_n; k++)
            client.lines[k - k0] = strdup(client.hist_lines[k]);
        client.nlines += add;
        client.scroll = client.nlines - add; /* the page ends at the bottom of the view */
        client_ui_draw();
    }
    for (int k = 0; k < client.hist_n; k++)
        free(client.hist_lines[k]);
    client.hist_n = 0;
    client.hist_chan[0] = client.hist_ref[0] = 0;
}

/* AUTHENTICATE +: the account's name and password, base64, for SASL PLAIN. */
static void sasl_plain(void)
{
    char plain[600], enc[820];
    size_t ul = strlen(client.user), pl = strlen(client.password);
    if (2 + ul + pl > sizeof plain) {
        client_show("* the user name and password are too long for SASL PLAIN");
        client.status = "login failed";
        return;
    }
    plain[0] = 0;
    memcpy(plain + 1, client.user, ul);
    plain[1 + ul] = 0;
    memcpy(plain + 2 + ul, client.password, pl);
    chat_b64_encode(plain, 2 + ul + pl, enc, sizeof enc);
    explicit_bzero(plain, sizeof plain);
    client_send_line("AUTHENTICATE %s", enc);
    explicit_bzero(enc, sizeof enc);
}

/* A PRIVMSG or NOTICE (an ACTION too): shown, or kept for the page of
 * history being fetched; the channel's oldest message and its newest, to
 * mark read, noted. stamp: the time shown; msgid, batch and when: its tags. */
static void show_message(const yard_irc_msg_t *m, const char *src, const char *stamp, const char *msgid,
                         const char *batch, const char *when)
{
    const char *from = src ? src : "?";
    const char *text = m->n > 1 ? m->params[1] : "";
    const char *where = m->n ? m->params[0] : "?";
    bool notice = m->cmd[0] == 'N';
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
    bool page = client.hist_ref[0] && !strcmp(batch, client.hist_ref);
    if (ci >= 0 && id && (!client.oldest[ci] || id < client.oldest[ci]) && !page)
        client.oldest[ci] = id;
    if (page) {
        if (client.hist_n < HISTORY_PAGE)
            client.hist_lines[client.hist_n++] = strdup(shown);
        if (id && (!client.hist_oldest || id < client.hist_oldest))
            client.hist_oldest = id;
    } else {
        client_show("%s", shown);
        if (ci >= 0 && when[0]) { /* shown: read, once the user is at the bottom */
            snprintf(client.newest[ci], sizeof client.newest[ci], "%s", when);
            client.unmarked[ci] = true;
            client_mark_read(false);
        }
    }
}

void client_on_line(char *line)
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
        client_send_line("PONG :%s", m.n ? m.params[0] : "");
    } else if (!strcmp(m.cmd, "CAP") && m.n >= 3 && !strcmp(m.params[1], "ACK") &&
               strstr(m.params[2], "draft/chathistory")) {
        client.history = true;
    } else if (!strcmp(m.cmd, "CAP") && m.n >= 2 && !strcmp(m.params[1], "ACK")) {
        client_send_line("AUTHENTICATE PLAIN");
    } else if (!strcmp(m.cmd, "CAP") && m.n >= 3 && !strcmp(m.params[1], "NAK") &&
               strstr(m.params[2], "draft/chathistory")) {
        client.history = false; /* no history from this server: the rest works */
    } else if (!strcmp(m.cmd, "CAP") && m.n >= 2 && !strcmp(m.params[1], "NAK")) {
        client_show("* the server refused SASL");
    } else if (!strcmp(m.cmd, "BATCH") && m.n >= 3 && m.params[0][0] == '+' &&
               !strcmp(m.params[1], "chathistory") && client.hist_chan[0] && !client.hist_ref[0] &&
               !strcasecmp(m.params[2], client.hist_chan)) {
        snprintf(client.hist_ref, sizeof client.hist_ref, "%s", m.params[0] + 1); /* our page */
    } else if (!strcmp(m.cmd, "BATCH") && m.n >= 1 && m.params[0][0] == '-' && client.hist_ref[0] &&
               !strcmp(m.params[0] + 1, client.hist_ref)) {
        history_done();
    } else if (!strcmp(m.cmd, "FAIL") && m.n >= 2 && !strcmp(m.params[0], "CHATHISTORY")) {
        client_show("* history: %s", m.params[m.n - 1]);
        client.hist_chan[0] = client.hist_ref[0] = 0;
    } else if (!strcmp(m.cmd, "MARKREAD")) {
        /* where this account stopped reading (any of its clients): nothing to show */
    } else if (!strcmp(m.cmd, "AWAY") && src) {
        if (m.n && m.params[0][0])
            client_show("%s* %s is away: %s", stamp, src, m.params[0]);
        else
            client_show("%s* %s is back", stamp, src);
    } else if (!strcmp(m.cmd, "AUTHENTICATE") && m.n && !strcmp(m.params[0], "+")) {
        sasl_plain();
    } else if (!strcmp(m.cmd, "903")) {
        client_send_line("CAP END");
    } else if (!strcmp(m.cmd, "904") || !strcmp(m.cmd, "464")) {
        client_show("* login failed: %s", m.n ? m.params[m.n - 1] : "");
        client.status = "login failed";
    } else if (!strcmp(m.cmd, "001")) {
        client.logged_in = true;
        client.backoff_s = 1;
        client.status = "connected";
        client_show("* connected to %s as %s", client.target_text, client.user);
        for (int i = 0; i < client.nchans; i++)
            client_send_line("JOIN %s", client.chans[i]);
    } else if (!strcmp(m.cmd, "PRIVMSG") || !strcmp(m.cmd, "NOTICE")) {
        show_message(&m, src, stamp, msgid, batch, when);
    } else if (!strcmp(m.cmd, "JOIN") && src && !strcasecmp(src, client.user) && m.n) {
        snprintf(client.current, sizeof client.current, "%s", m.params[0]);
        client_show("* joined %s", m.params[0]);
    } else if (!strcmp(m.cmd, "JOIN") && src && m.n) {
        client_show("%s[%s] * %s joined", stamp, m.params[0], src);
    } else if (!strcmp(m.cmd, "PART") && m.n && src && strcasecmp(src, client.user)) {
        client_show("%s[%s] * %s left%s%s%s", stamp, m.params[0], src, m.n > 1 && m.params[1][0] ? " (" : "",
                    m.n > 1 ? m.params[1] : "", m.n > 1 && m.params[1][0] ? ")" : "");
    } else if (!strcmp(m.cmd, "PART") && m.n) {
        client_show("* left %s", m.params[0]);
    } else if (!strcmp(m.cmd, "QUIT") && src) {
        client_show("%s* %s quit%s%s%s", stamp, src, m.n && m.params[0][0] ? " (" : "",
                    m.n ? m.params[0] : "", m.n && m.params[0][0] ? ")" : "");
    } else if (!strcmp(m.cmd, "TOPIC") && src && m.n >= 2) {
        client_show("%s[%s] * %s set the topic: %s", stamp, m.params[0], src, m.params[1]);
    } else if (!strcmp(m.cmd, "332") && m.n >= 3) {
        client_show("* topic of %s: %s", m.params[1], m.params[2]);
    } else if (!strcmp(m.cmd, "353") && m.n >= 4) {
        client_show("* in %s: %s", m.params[2], m.params[3]);
    } else if (!strcmp(m.cmd, "ERROR")) {
        client_show("* %s", m.n ? m.params[0] : "error");
    } else if (isdigit((unsigned char)m.cmd[0]) && m.n >= 2 && strcmp(m.cmd, "366") &&
               strcmp(m.cmd, "333") && strcmp(m.cmd, "005") && strcmp(m.cmd, "004") &&
               strcmp(m.cmd, "900")) {
        client_show("* %s", m.params[m.n - 1]);
    }
}

/* ---- what the user types ------------------------------------------------- */

/* Sends text to target in as many PRIVMSGs as it takes, each cut between
 * clusters (text.h), so that the line the server relays,
 * ":user!user@host PRIVMSG target :text\r\n", fits its 512 bytes: the
 * server would cut a longer one itself, inside a character cluster. The
 * host is the server's name ("yard"); 63 bytes leave room for another's. */
static void send_text(const char *target, const char *text, bool action)
{
    size_t over = 1 + 2 * strlen(client.user) + 2 + 63 + 1 + strlen("PRIVMSG") + 1 + strlen(target) +
                  2 + 2 + (action ? strlen("\001ACTION \001") : 0);
    size_t room = over + 64 < YARD_IRC_MSG_MAX ? YARD_IRC_MSG_MAX - over : 64;
    size_t n = strlen(text);
    while (n) {
        size_t k = chat_cut(text, n, room);
        if (!k)
            break;
        if (action)
            client_send_line("PRIVMSG %s :\001ACTION %.*s\001", target, (int)k, text);
        else
            client_send_line("PRIVMSG %s :%.*s", target, (int)k, text);
        text += k;
        n -= k;
    }
}

bool client_user_line(char *line)
{
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = 0;
    if (!n)
        return true;
    if (line[0] != '/') {
        if (!client.current[0]) {
            client_show("* join a channel first (/join #name) or /msg someone");
            return true;
        }
        send_text(client.current, line, false);
        return true;
    }
    char *arg = strchr(line, ' ');
    if (arg)
        *arg++ = 0;
    if (!strcmp(line, "/quit")) {
        client_mark_read(true);
        client_send_line("QUIT :%s", arg ? arg : "bye");
        return false;
    } else if (!strcmp(line, "/join") && arg) {
        if (client.nchans < MAX_CHANS)
            snprintf(client.chans[client.nchans++], sizeof client.chans[0], "%s", arg);
        client_send_line("JOIN %s", arg);
    } else if (!strcmp(line, "/part")) {
        const char *ch = arg ? arg : client.current;
        for (int i = 0; i < client.nchans; i++)
            if (!strcasecmp(client.chans[i], ch)) {
                memmove(client.chans[i], client.chans[i + 1], (size_t)(client.nchans - i - 1) * sizeof client.chans[0]);
                client.nchans--;
                break;
            }
        client_send_line("PART %s", ch);
        if (!strcasecmp(ch, client.current))
            client.current[0] = 0;
    } else if (!strcmp(line, "/msg") && arg && strchr(arg, ' ')) {
        char *text = strchr(arg, ' ');
        *text++ = 0;
        send_text(arg, text, false);
    } else if (!strcmp(line, "/me") && arg && client.current[0]) {
        send_text(client.current, arg, true);
    } else if (!strcmp(line, "/history") && client.current[0]) {
        client_fetch_older();
    } else if (!strcmp(line, "/topic") && client.current[0]) {
        if (arg)
            client_send_line("TOPIC %s :%s", client.current, arg);
        else
            client_send_line("TOPIC %s", client.current);
    } else {
        client_show("* commands: /join #chan, /part [#chan], /msg NAME TEXT, /me ACTION, "
             "/topic [TEXT], /history (older messages), /quit [REASON]");
    }
    return true;
}
