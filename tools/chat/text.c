/* Text for the chat tools: see text.h. Pure: no I/O, no allocation; the
 * only outside state is the LC_CTYPE locale behind wcwidth().
 *
 * Where wcwidth() falls short, and what this file does about it:
 * - It knows the Unicode version of the C library (glibc 2.36 here). Newer
 *   code points (emoji added since) are "unprintable" to it; they are drawn
 *   as U+FFFD, since a terminal using the same table would not know their
 *   width either.
 * - It measures code points, not clusters. A cluster is drawn with the
 *   width of its first code point: right for a base with combining marks;
 *   for an emoji ZWJ sequence (👩‍💻) it gives 2, which is what tmux 3.3 and
 *   most current terminals draw, while a terminal without ZWJ support
 *   draws each pictograph (4 columns) and the rest of that line shifts.
 * - A variation selector 16 (❤️) does not widen: counted as 1 column, as
 *   tmux and xterm draw it; kitty and WezTerm draw 2. */
#ifndef _XOPEN_SOURCE /* ncurses' flags may set it */
#define _XOPEN_SOURCE 700 /* wcwidth (X/Open) */
#endif

#include "text.h"

#include <string.h>
#include <wchar.h>

#define ZWJ 0x200Du

size_t chat_utf8_decode(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *p = (const unsigned char *)s;
    unsigned char b = p[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    /* The ranges of the second byte that keep a sequence valid (Unicode
     * table 3-7): they exclude overlong forms (E0 80, F0 80), surrogates
     * (ED A0) and code points past U+10FFFF (F4 90). */
    size_t need;
    uint32_t v;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
        need = 1;
        v = b & 0x1Fu;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 2;
        v = b & 0x0Fu;
        if (b == 0xE0)
            lo = 0xA0;
        else if (b == 0xED)
            hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3;
        v = b & 0x07u;
        if (b == 0xF0)
            lo = 0x90;
        else if (b == 0xF4)
            hi = 0x8F;
    } else {
        *cp = CHAT_INVALID; /* a continuation byte, C0, C1 or F5..FF */
        return 1;
    }
    for (size_t i = 1; i <= need; i++) {
        if (i >= n || p[i] < lo || p[i] > hi) {
            *cp = CHAT_INVALID; /* the maximal subpart is what was valid so far */
            return i;
        }
        v = v << 6 | (p[i] & 0x3Fu);
        lo = 0x80;
        hi = 0xBF;
    }
    *cp = v;
    return need + 1;
}

bool chat_utf8_valid(const char *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += chat_utf8_decode(p + i, n - i, &cp);
        if (cp == CHAT_INVALID)
            return false;
    }
    return true;
}

size_t chat_utf8_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF)
        return 0;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp > 0x10FFFF)
        return 0;
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

bool chat_is_control(uint32_t cp)
{
    return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F);
}

static bool in(uint32_t cp, uint32_t lo, uint32_t hi)
{
    return cp >= lo && cp <= hi;
}

/* What attaches to the code point before it (Grapheme_Cluster_Break Extend
 * and ZWJ, approximately): the combining blocks, variation selectors and
 * tag characters by name, so the common cases do not depend on the locale,
 * and whatever else the C library gives zero width. Emoji modifiers (skin
 * tones) are left out on purpose: see chat_cluster_len. */
static bool is_extend(uint32_t cp)
{
    if (cp == 0x200C || cp == ZWJ || in(cp, 0x0300, 0x036F) || in(cp, 0x1AB0, 0x1AFF) ||
        in(cp, 0x1DC0, 0x1DFF) || in(cp, 0x20D0, 0x20FF) || in(cp, 0xFE00, 0xFE0F) ||
        in(cp, 0xFE20, 0xFE2F) || in(cp, 0xE0020, 0xE007F) || in(cp, 0xE0100, 0xE01EF))
        return true;
    return cp >= 0xA0 && wcwidth((wchar_t)cp) == 0;
}

/* Extended_Pictographic, by its blocks: what an emoji ZWJ sequence joins.
 * Regional indicators and emoji modifiers are not pictographs. */
static bool is_pict(uint32_t cp)
{
    if (in(cp, 0x1F1E6, 0x1F1FF) || in(cp, 0x1F3FB, 0x1F3FF))
        return false;
    return cp == 0xA9 || cp == 0xAE || cp == 0x203C || cp == 0x2049 || cp == 0x2122 ||
           cp == 0x2139 || in(cp, 0x2194, 0x21AA) || in(cp, 0x2300, 0x23FF) ||
           in(cp, 0x25A0, 0x25FF) || in(cp, 0x2600, 0x27BF) || in(cp, 0x2934, 0x2935) ||
           in(cp, 0x2B00, 0x2BFF) || cp == 0x3030 || cp == 0x303D || cp == 0x3297 ||
           cp == 0x3299 || in(cp, 0x1F000, 0x1FAFF) || in(cp, 0x1FC00, 0x1FFFD);
}

size_t chat_cluster_len(const char *p, size_t n)
{
    uint32_t cp;
    size_t k = chat_utf8_decode(p, n, &cp);
    if (cp == CHAT_INVALID || chat_is_control(cp))
        return k;
    /* UAX #29 GB9 (no break before Extend or ZWJ) and GB11 (no break in
     * pictograph Extend* ZWJ x pictograph). tmux 3.3 joins the same. */
    bool pict = is_pict(cp), after_zwj = false;
    while (k < n) {
        uint32_t c;
        size_t l = chat_utf8_decode(p + k, n - k, &c);
        if (c == CHAT_INVALID || chat_is_control(c))
            break;
        if (is_extend(c))
            after_zwj = c == ZWJ;
        else if (after_zwj && pict && is_pict(c))
            after_zwj = false;
        else
            break;
        k += l;
    }
    return k;
}

size_t chat_cluster_prev(const char *p, size_t n, size_t at)
{
    if (at > n)
        at = n;
    size_t b = 0;
    while (b < at) {
        size_t l = chat_cluster_len(p + b, n - b);
        if (b + l >= at)
            return b;
        b += l;
    }
    return b;
}

size_t chat_cut(const char *p, size_t n, size_t max)
{
    if (n <= max)
        return n;
    /* b + l <= max < n keeps b inside p in both loops. */
    size_t b = 0, l;
    while (b + (l = chat_cluster_len(p + b, n - b)) <= max)
        b += l;
    if (b)
        return b;
    uint32_t cp;
    while (b + (l = chat_utf8_decode(p + b, n - b, &cp)) <= max)
        b += l;
    return b;
}

static void subst(chat_unit_t *u, bool utf8)
{
    u->kind = CHAT_UNIT_SUBST;
    u->width = 1;
    if (utf8)
        memcpy(u->show, "\xEF\xBF\xBD", 4); /* U+FFFD */
    else
        memcpy(u->show, "?", 2);
}

/* Caret notation, as cat -v: ^[ for ESC, ^? for DEL, M-^[ for CSI (0x9B).
 * Plain ASCII, so it is safe on any terminal and in any locale. */
static void escape(chat_unit_t *u, uint32_t cp)
{
    size_t o = 0;
    u->kind = CHAT_UNIT_ESCAPE;
    if (cp >= 0x80) {
        u->show[o++] = 'M';
        u->show[o++] = '-';
        cp -= 0x80;
    }
    u->show[o++] = '^';
    u->show[o++] = cp == 0x7F ? '?' : (char)(cp + 0x40);
    u->show[o] = 0;
    u->width = (int)o;
}

size_t chat_unit_next(const char *p, size_t n, bool utf8, chat_unit_t *u)
{
    memset(u, 0, sizeof *u);
    uint32_t cp;
    size_t k = chat_utf8_decode(p, n, &cp);
    if (cp == CHAT_INVALID) {
        subst(u, utf8);
        return k;
    }
    if (chat_is_control(cp)) {
        escape(u, cp);
        return k;
    }
    k = chat_cluster_len(p, n);
    if (!utf8) {
        if (cp < 0x80 && k == 1) {
            u->kind = CHAT_UNIT_TEXT;
            u->width = 1;
        } else {
            subst(u, false); /* one '?' per cluster: é, 中, 👩‍💻 alike */
        }
        return k;
    }
    if (is_extend(cp)) {
        u->kind = CHAT_UNIT_TEXT;
        u->no_base = true;
        u->width = 1;
        return k;
    }
    int w = wcwidth((wchar_t)cp);
    if (w <= 0) {
        subst(u, true); /* unprintable to the C library: unassigned, U+2028 */
        return k;
    }
    u->kind = CHAT_UNIT_TEXT;
    u->width = w > 2 ? 2 : w;
    return k;
}

size_t chat_sanitize(const char *p, size_t n, bool utf8, char *out, size_t cap)
{
    if (!cap)
        return 0;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        chat_unit_t u;
        size_t k = chat_unit_next(p + i, n - i, utf8, &u);
        const char *s = u.kind == CHAT_UNIT_TEXT ? p + i : u.show;
        size_t sl = u.kind == CHAT_UNIT_TEXT ? k : strlen(u.show);
        if (o + u.no_base + sl >= cap)
            break;
        if (u.no_base)
            out[o++] = ' ';
        memcpy(out + o, s, sl);
        o += sl;
        i += k;
    }
    out[o] = 0;
    return o;
}

int chat_text_width(const char *p, size_t n, bool utf8)
{
    int w = 0;
    for (size_t i = 0; i < n;) {
        chat_unit_t u;
        i += chat_unit_next(p + i, n - i, utf8, &u);
        w += u.width;
    }
    return w;
}

static size_t put_u4(char *out, uint32_t v)
{
    static const char hex[] = "0123456789abcdef";
    out[0] = '\\';
    out[1] = 'u';
    for (int i = 0; i < 4; i++)
        out[2 + i] = hex[v >> (12 - 4 * i) & 15];
    return 6;
}

size_t chat_json_string(const char *p, size_t n, char *out, size_t cap)
{
    if (cap < 3 || n > (cap - 3) / 6)
        return 0;
    size_t o = 0;
    out[o++] = '"';
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = chat_utf8_decode(p + i, n - i, &cp);
        const char *two = NULL;
        switch (cp) {
        case '"': two = "\\\""; break;
        case '\\': two = "\\\\"; break;
        case '\n': two = "\\n"; break;
        case '\r': two = "\\r"; break;
        case '\t': two = "\\t"; break;
        case '\b': two = "\\b"; break;
        case '\f': two = "\\f"; break;
        default: break;
        }
        if (two) {
            memcpy(out + o, two, 2);
            o += 2;
        } else if (cp == CHAT_INVALID) {
            o += put_u4(out + o, CHAT_REPLACEMENT);
        } else if (chat_is_control(cp) || cp == 0x2028 || cp == 0x2029) {
            o += put_u4(out + o, cp);
        } else {
            memcpy(out + o, p + i, k);
            o += k;
        }
        i += k;
    }
    out[o++] = '"';
    out[o] = 0;
    return o;
}

size_t chat_b64_encode(const void *in, size_t n, char *out, size_t cap)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *s = in;
    if (!cap || (n + 2) / 3 > (cap - 1) / 4)
        return 0; /* 4 * ceil(n / 3) + 1 > cap */
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)s[i + 1] << 8;
        if (i + 2 < n)
            v |= s[i + 2];
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        out[o++] = i + 1 < n ? t[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[o] = 0;
    return o;
}
