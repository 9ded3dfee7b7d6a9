/* yard-chat connect (client.c): the output: a line shown (printed with
 * --plain, else into the scrollback), and the terminal UI (ncursesw): the
 * scrollback drawn cluster by cluster, the status line, the input line and
 * its keys. */
#include "client_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "text.h"

/* ---- output -------------------------------------------------------------- */

static int nick_colour(const char *nick, size_t n)
{
    unsigned h = 5381;
    for (size_t i = 0; i < n; i++)
        h = h * 33 + (unsigned char)nick[i];
    return 1 + (int)(h % 6);
}

void client_show(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (len >= (int)sizeof line) /* cut: drop the last cluster, it may be partial */
        line[chat_cluster_prev(line, sizeof line - 1, sizeof line - 1)] = 0;
    if (client.plain) {
        /* Escaped like the terminal UI draws it: a line-mode terminal
         * would act on a raw ESC, CR or C1 just the same. */
        char safe[3 * sizeof line + 1];
        chat_sanitize(line, strlen(line), client.utf8, safe, sizeof safe);
        printf("%s\n", safe);
        fflush(stdout);
        return;
    }
    if (client.nlines == SCROLLBACK) {
        free(client.lines[0]);
        memmove(client.lines, client.lines + 1, (SCROLLBACK - 1) * sizeof client.lines[0]);
        client.nlines--;
    }
    client.lines[client.nlines++] = strdup(line);
    if (client.scroll)
        client.unread++;
    client_ui_draw();
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
        size_t k = chat_unit_next(p + i, n - i, client.utf8, &u);
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
        size_t k = chat_unit_next(l + i, n - i, client.utf8, &u);
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

void client_ui_draw(void)
{
    if (client.plain)
        return;
    int rows, cols;
    getmaxyx(stdscr, rows, cols);
    erase();
    if (rows < 3 || cols < 4) {
        refresh();
        return;
    }
    /* The scrollback: from the line client.scroll lines up from the end, as many
     * lines upwards as fill the body; the top one may show only its last
     * rows. */
    int body = rows - 2, last = client.nlines - client.scroll, first = last, used = 0, skip = 0;
    while (first > 0 && used < body) {
        int h = put_wrapped(client.lines[--first], 0, 0, 0, cols);
        skip = used + h > body ? used + h - body : 0;
        used += h - skip;
    }
    for (int i = first, y = 0; i < last && y < body; i++) {
        int s = i == first ? skip : 0;
        y += put_wrapped(client.lines[i], y, s, body - y, cols) - s;
    }
    char status[256];
    snprintf(status, sizeof status, " %s | %s | %s%s", client.target_text, client.status,
             client.current[0] ? client.current : "(no channel)",
             client.unread ? " | more below (PgDn)" : "");
    mvhline(rows - 2, 0, ' ' | A_REVERSE, cols);
    put_clipped(rows - 2, 0, status, strlen(status), cols, A_REVERSE);
    /* The input line scrolls sideways to keep the cursor on the screen. */
    size_t start = 0;
    while (start < client.cursor && chat_text_width(client.input + start, client.cursor - start, client.utf8) >= cols)
        start += chat_cluster_len(client.input + start, client.input_len - start);
    put_clipped(rows - 1, 0, client.input + start, client.input_len - start, cols, A_NORMAL);
    int cx = chat_text_width(client.input + start, client.cursor - start, client.utf8);
    move(rows - 1, cx < cols ? cx : cols - 1);
    refresh();
}

/* After an edit the cursor may sit inside a cluster (a combining mark typed
 * before an orphaned one, a deletion that joined two): move it past. */
static void input_snap(void)
{
    size_t b = chat_cluster_prev(client.input, client.input_len, client.cursor);
    if (client.cursor > b) {
        size_t e = b + chat_cluster_len(client.input + b, client.input_len - b);
        if (e > client.cursor)
            client.cursor = e;
    }
}

static void input_cut(size_t from, size_t to)
{
    memmove(client.input + from, client.input + to, client.input_len - to + 1);
    client.input_len -= to - from;
    client.cursor = from;
    input_snap();
}

/* A character typed or pasted: whole or not at all, so the line never
 * holds (or sends) part of one. Controls are not text. */
static void input_insert(wint_t ch)
{
    char enc[4];
    size_t k;
    if (ch > 0x10FFFF || chat_is_control((uint32_t)ch) || (!client.utf8 && ch >= 0x80) ||
        !(k = chat_utf8_encode((uint32_t)ch, enc)) || client.input_len + k >= sizeof client.input)
        return;
    memmove(client.input + client.cursor + k, client.input + client.cursor, client.input_len - client.cursor + 1);
    memcpy(client.input + client.cursor, enc, k);
    client.input_len += k;
    client.cursor += k;
    input_snap();
}

/* One key from get_wch (fkey: a KEY_ code). Moves and deletions go by
 * cluster: a wide character, a letter with its accents and an emoji ZWJ
 * sequence are each one step. false: the user quit. */
bool client_ui_key(bool fkey, wint_t ch)
{
    int rows = LINES;
    if (fkey && ch == KEY_PPAGE) {
        bool at_top = client.scroll >= client.nlines - 1;
        client.scroll += rows - 3;
        if (client.scroll > client.nlines - 1)
            client.scroll = client.nlines > 0 ? client.nlines - 1 : 0;
        if (at_top) /* past the buffer: older messages from the server */
            client_fetch_older();
    } else if (fkey && ch == KEY_NPAGE) {
        client.scroll -= rows - 3;
        if (client.scroll <= 0) {
            client.scroll = 0;
            client.unread = 0;
            client_mark_read(true);
        }
    } else if (fkey && ch == KEY_LEFT) {
        client.cursor = chat_cluster_prev(client.input, client.input_len, client.cursor);
    } else if (fkey && ch == KEY_RIGHT) {
        if (client.cursor < client.input_len)
            client.cursor += chat_cluster_len(client.input + client.cursor, client.input_len - client.cursor);
    } else if ((fkey && ch == KEY_HOME) || (!fkey && ch == 1)) {
        client.cursor = 0;
    } else if ((fkey && ch == KEY_END) || (!fkey && ch == 5)) {
        client.cursor = client.input_len;
    } else if ((fkey && ch == KEY_BACKSPACE) || (!fkey && (ch == 127 || ch == 8))) {
        if (client.cursor)
            input_cut(chat_cluster_prev(client.input, client.input_len, client.cursor), client.cursor);
    } else if (fkey && ch == KEY_DC) {
        if (client.cursor < client.input_len)
            input_cut(client.cursor,
                      client.cursor + chat_cluster_len(client.input + client.cursor, client.input_len - client.cursor));
    } else if ((fkey && ch == KEY_ENTER) || (!fkey && (ch == '\n' || ch == '\r'))) {
        char line[sizeof client.input];
        memcpy(line, client.input, client.input_len + 1);
        client.input_len = client.cursor = 0;
        client.input[0] = 0;
        return client_user_line(line);
    } else if (!fkey) {
        input_insert(ch);
    }
    return true;
}
