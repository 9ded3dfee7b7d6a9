/* IRC lines (include/yard/proto_ircline.h). */
#include "yard/proto_ircline.h"

#include <stdio.h>
#include <string.h>

/* The first CR or LF in p[0..n), or NULL. */
static const char *line_end(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] == '\r' || p[i] == '\n')
            return p + i;
    return NULL;
}

int yard_irc_frame(const char *p, size_t n, size_t *start, size_t *len, size_t *used)
{
    size_t skip = 0;
    while (skip < n && (p[skip] == '\n' || p[skip] == '\r'))
        skip++; /* empty lines, and the LF of a CRLF whose CR ended the last line */
    p += skip;
    n -= skip;
    /* A bare CR ends a line as LF does (RFC 1459 allows either alone). Were
     * it kept inside a line, a client that splits on CR would show the rest
     * as a line of its own, with any sender the text claims. */
    const char *nl = line_end(p, n);
    size_t body = nl ? (size_t)(nl - p) : n;
    size_t tags = 0;
    if (body && p[0] == '@') {
        const char *sp = memchr(p, ' ', body);
        tags = sp ? (size_t)(sp - p) + 1 : body;
    }
    bool over = tags > YARD_IRC_TAGS_MAX || body - tags > YARD_IRC_MSG_MAX - 2;
    if (!nl) {
        /* Without its end the line can still be judged too long. */
        if (over && (tags > YARD_IRC_TAGS_MAX || body - tags > YARD_IRC_MSG_MAX - 1)) {
            *used = skip + n;
            return YARD_IRC_TOOLONG_OPEN;
        }
        *used = skip;
        return YARD_IRC_NEED;
    }
    /* A CRLF is consumed whole; a bare CR or LF alone. */
    size_t end = body + 1 + (nl[0] == '\r' && body + 1 < n && nl[1] == '\n');
    *used = skip + end;
    if (over)
        return YARD_IRC_TOOLONG;
    *start = skip;
    *len = body;
    return YARD_IRC_LINE;
}

/* IRC formatting codes (bold, colour, hex colour, reset, monospace,
 * reverse, italic, strikethrough, underline) and CTCP's delimiter. */
static bool allowed_control(unsigned char c)
{
    switch (c) {
    case 0x01: case 0x02: case 0x03: case 0x04: case 0x0F:
    case 0x11: case 0x16: case 0x1D: case 0x1E: case 0x1F:
        return true;
    default:
        return false;
    }
}

size_t yard_irc_strip_controls(char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\t') {
            s[o++] = ' ';
            continue;
        }
        if ((c < 0x20 && !allowed_control(c)) || c == 0x7F)
            continue;
        /* C1 controls as UTF-8 (U+0080..U+009F: C2 80..C2 9F); U+009B is a
         * CSI to some terminals. */
        if (c == 0xC2 && i + 1 < n && (unsigned char)s[i + 1] >= 0x80 &&
            (unsigned char)s[i + 1] <= 0x9F) {
            i++;
            continue;
        }
        s[o++] = (char)c;
    }
    if (o < n)
        s[o] = 0;
    return o;
}

bool yard_irc_has_controls(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && !allowed_control(c)) || c == 0x7F ||
            (c == 0xC2 && i + 1 < n && (unsigned char)s[i + 1] >= 0x80 &&
             (unsigned char)s[i + 1] <= 0x9F))
            return true;
    }
    return false;
}

long yard_irc_each_line(const char *p, size_t n, int (*fn)(char *line, void *arg), void *arg)
{
    size_t off = 0;
    for (;;) {
        size_t start = 0, len = 0, used = 0;
        int f = yard_irc_frame(p + off, n - off, &start, &len, &used);
        if (f == YARD_IRC_NEED)
            return (long)(off + used);
        if (f == YARD_IRC_LINE) {
            char line[YARD_IRC_MSG_MAX + YARD_IRC_TAGS_MAX + 2];
            memcpy(line, p + off + start, len);
            line[len] = 0;
            if (fn(line, arg) < 0)
                return -1;
        }
        off += used;
    }
}

bool yard_irc_parse(char *line, yard_irc_msg_t *m)
{
    char *p = line;
    m->n = 0;
    m->tags = NULL;
    if (*p == '@') {
        p = strchr(p, ' ');
        if (!p)
            return false;
        *p++ = 0;
        m->tags = line + 1;
    }
    while (*p == ' ')
        p++;
    if (*p == ':') {
        p = strchr(p, ' ');
        if (!p)
            return false;
        while (*p == ' ')
            p++;
    }
    if (!*p)
        return false;
    m->cmd = p;
    p = strchr(p, ' ');
    if (p)
        *p++ = 0;
    size_t cl = strlen(m->cmd);
    bool digits = cl == 3, letters = cl > 0;
    for (char *c = m->cmd; *c; c++) {
        if (*c >= 'a' && *c <= 'z')
            *c = (char)(*c - 'a' + 'A');
        digits = digits && *c >= '0' && *c <= '9';
        letters = letters && *c >= 'A' && *c <= 'Z';
    }
    if (!digits && !letters)
        return false;
    while (p && *p) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        if (*p == ':' || m->n == YARD_IRC_PARAMS_MAX - 1) {
            m->params[m->n++] = *p == ':' ? p + 1 : p;
            break;
        }
        m->params[m->n++] = p;
        p = strchr(p, ' ');
        if (p)
            *p++ = 0;
    }
    return true;
}

static bool ascii_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* '+', [vendor '/'], name: see the header. */
static bool client_key_valid(const char *k, size_t n)
{
    if (n < 2 || k[0] != '+')
        return false;
    const char *slash = memchr(k, '/', n);
    size_t name_at = 1;
    if (slash) {
        size_t vn = (size_t)(slash - k) - 1;
        if (!vn)
            return false;
        for (size_t i = 1; i <= vn; i++)
            if (!ascii_alnum(k[i]) && k[i] != '-' && k[i] != '.')
                return false;
        name_at = vn + 2;
    }
    if (name_at >= n)
        return false;
    for (size_t i = name_at; i < n; i++)
        if (!ascii_alnum(k[i]) && k[i] != '-')
            return false;
    return true;
}

long yard_irc_client_tags(const char *tags, char *out, size_t cap)
{
    if (!cap)
        return -1;
    size_t used = 0;
    out[0] = 0;
    for (const char *t = tags; t && *t;) {
        size_t tn = strcspn(t, ";"), kn = strcspn(t, "=;");
        const char *next = t[tn] ? t + tn + 1 : NULL;
        if (!client_key_valid(t, kn)) {
            t = next;
            continue;
        }
        /* A later value of the same key wins: drop an earlier one. */
        for (size_t at = 0; at < used;) {
            size_t en = strcspn(out + at, ";"), ekn = strcspn(out + at, "=;");
            if (ekn == kn && !memcmp(out + at, t, kn)) {
                size_t end = at + en + (out[at + en] == ';');
                memmove(out + at, out + end, used - end + 1);
                used -= end - at;
                if (used && out[used - 1] == ';')
                    out[--used] = 0;
                continue;
            }
            at += en + (out[at + en] == ';');
        }
        if (used + (used > 0) + tn + 1 > cap)
            return -1;
        if (used)
            out[used++] = ';';
        memcpy(out + used, t, tn);
        used += tn;
        out[used] = 0;
        t = next;
    }
    return (long)used;
}

static int b64val(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

long yard_b64decode(const char *in, size_t n, char *out, size_t cap)
{
    if (n % 4)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        bool last = i + 4 == n;
        int pad = last && in[i + 3] == '=' ? (in[i + 2] == '=' ? 2 : 1) : 0;
        int v[4];
        for (int k = 0; k < 4; k++) {
            v[k] = k >= 4 - pad ? 0 : b64val(in[i + k]);
            if (v[k] < 0)
                return -1;
        }
        unsigned w = (unsigned)v[0] << 18 | (unsigned)v[1] << 12 | (unsigned)v[2] << 6 |
                     (unsigned)v[3];
        int bytes = 3 - pad;
        if (o + (size_t)bytes > cap)
            return -1;
        out[o++] = (char)(w >> 16);
        if (bytes > 1)
            out[o++] = (char)(w >> 8);
        if (bytes > 2)
            out[o++] = (char)w;
    }
    return (long)o;
}

bool yard_sasl_plain_split(const char *p, size_t n, const char **user, size_t *user_len,
                           const char **pass, size_t *pass_len)
{
    const char *z1 = memchr(p, 0, n);
    if (!z1)
        return false;
    const char *z2 = memchr(z1 + 1, 0, (size_t)(p + n - z1 - 1));
    if (!z2 || memchr(z2 + 1, 0, (size_t)(p + n - z2 - 1)))
        return false;
    size_t zl = (size_t)(z1 - p), ul = (size_t)(z2 - z1 - 1), pl = (size_t)(p + n - z2 - 1);
    if (!ul || !pl || (zl && (zl != ul || memcmp(p, z1 + 1, ul) != 0)))
        return false;
    *user = z1 + 1;
    *user_len = ul;
    *pass = z2 + 1;
    *pass_len = pl;
    return true;
}

size_t yard_irc_vline(char *out, size_t cap, bool *cut, const char *fmt, va_list ap)
{
    int n = vsnprintf(out, cap - 2, fmt, ap);
    if (n < 0)
        return 0;
    *cut = (size_t)n > cap - 3;
    size_t len = *cut ? cap - 3 : (size_t)n;
    out[len++] = '\r';
    out[len++] = '\n';
    return len;
}
