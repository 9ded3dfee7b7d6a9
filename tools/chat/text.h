/* Text for the chat tools, pure (no I/O, no allocation): UTF-8 decoding
 * with replacement, grapheme clusters, display width, control characters
 * escaped for a terminal, JSON strings for `yard-chat log dump`, base64.
 * The client's two UIs (ncurses and --plain) draw every received byte
 * through chat_unit_next, so no control byte and no invalid UTF-8 ever
 * reaches the terminal raw. Fuzzed by fuzz/fuzz_chattext.c.
 *
 * Widths come from the C library's wcwidth(), so from the LC_CTYPE locale
 * the caller set (a UTF-8 one; the callers fall back to ASCII without). */
#ifndef YARD_CHAT_TEXT_H
#define YARD_CHAT_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHAT_INVALID 0xFFFFFFFFu /* what chat_utf8_decode yields for bad bytes */
#define CHAT_REPLACEMENT 0xFFFDu

/* Decode the sequence at p[0..n) (n > 0): returns the bytes it takes, 1 to 4.
 * For bytes that are not UTF-8 (overlong forms, surrogates, past U+10FFFF,
 * a truncated or broken sequence) *cp is CHAT_INVALID and the length is
 * that of the maximal subpart, as Unicode recommends (one U+FFFD per
 * maximal subpart: what Python's and browsers' decoders do too). */
size_t chat_utf8_decode(const char *p, size_t n, uint32_t *cp);

bool chat_utf8_valid(const char *p, size_t n);

/* The UTF-8 of cp in out; 0 for surrogates and past U+10FFFF. */
size_t chat_utf8_encode(uint32_t cp, char out[4]);

/* C0 (U+0000-U+001F), DEL and C1 (U+0080-U+009F). */
bool chat_is_control(uint32_t cp);

/* The bytes of the grapheme cluster at p[0..n) (>= 1 when n > 0): a base
 * with the combining marks, variation selectors and zero-width joiners
 * after it, and pictographs joined by ZWJ (an emoji ZWJ sequence). A
 * control and each maximal invalid subpart are clusters of their own. A
 * simplification of UAX #29 that does what terminals do: emoji modifiers
 * and regional-indicator pairs (flags) are not joined, since terminals
 * that lay out by wcwidth (tmux 3.3, xterm) give each its own cells. */
size_t chat_cluster_len(const char *p, size_t n);

/* The start of the cluster that ends at or spans offset at of p[0..n)
 * (the boundary before at); 0 when at is 0. Scans from p: the clusters of
 * a string are defined from its start. */
size_t chat_cluster_prev(const char *p, size_t n, size_t at);

/* The longest prefix of p[0..n) of at most max bytes that ends between two
 * clusters; when the first cluster alone is longer, between two code
 * points (a maximal invalid subpart counts as one). Never splits a UTF-8
 * sequence. */
size_t chat_cut(const char *p, size_t n, size_t max);

enum chat_unit_kind {
    CHAT_UNIT_TEXT,   /* draw the input bytes (valid UTF-8, no controls) */
    CHAT_UNIT_SUBST,  /* draw show: U+FFFD, or '?' in ASCII mode */
    CHAT_UNIT_ESCAPE, /* draw show, marked (reverse video): a control in caret notation */
};

typedef struct chat_unit {
    enum chat_unit_kind kind;
    int width;    /* display columns, 1 or 2 (an escape: its length) */
    bool no_base; /* TEXT: starts with a combining character, nothing to
                   * attach to: draw a space before it (counted in width) */
    char show[8]; /* SUBST and ESCAPE: NUL-terminated */
} chat_unit_t;

/* What to draw for the cluster at p[0..n) (n > 0); returns its bytes. utf8
 * false: the terminal is ASCII only, every non-ASCII cluster becomes '?'.
 * Controls become ^@ .. ^_, ^? (DEL) and M-^@ .. M-^_ (C1, as cat -v
 * writes them), bytes that are not UTF-8 U+FFFD (or '?'), and code points
 * the C library calls unprintable (unassigned in its Unicode version,
 * U+2028) U+FFFD too: a terminal would not know their width either. */
size_t chat_unit_next(const char *p, size_t n, bool utf8, chat_unit_t *u);

/* p[0..n) as the units draw it, for a line-mode terminal: NUL-terminated
 * in out[0..cap); stops before a unit that does not fit (cap >= 3 * n + 1
 * always fits). Returns the length. */
size_t chat_sanitize(const char *p, size_t n, bool utf8, char *out, size_t cap);

/* Display columns of p[0..n) drawn by units. */
int chat_text_width(const char *p, size_t n, bool utf8);

/* p[0..n) as a JSON string, quotes included, NUL-terminated in out[0..cap):
 * valid UTF-8 as itself; '"', '\\' and every control (C0, DEL, C1) escaped,
 * U+2028/9 too (JavaScript reads them as line ends); each maximal invalid
 * subpart as \ufffd. cap >= 6 * n + 3 always fits; 0 when it does not. */
size_t chat_json_string(const char *p, size_t n, char *out, size_t cap);

/* Base64 with padding, NUL-terminated; cap >= 4 * ((n + 2) / 3) + 1, else 0. */
size_t chat_b64_encode(const void *in, size_t n, char *out, size_t cap);

#endif
