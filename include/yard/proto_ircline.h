/* IRC lines, pure (no I/O): framing a byte stream into lines with RFC 1459
 * and IRCv3 limits, splitting a line into command and parameters, base64
 * and the SASL PLAIN payload. What the chat app needs, fuzzed
 * (fuzz/fuzz_ircline.c). */
#ifndef YARD_PROTO_IRCLINE_H
#define YARD_PROTO_IRCLINE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#define YARD_IRC_MSG_MAX 512   /* the message part, CRLF included (RFC 1459) */
#define YARD_IRC_TAGS_MAX 8191 /* IRCv3 message tags, '@' and the space included */
/* The tag data a client may send (IRCv3 message-tags), without the '@' and
 * the space: a server answers more with 417. Lines from a server may carry
 * more (YARD_IRC_TAGS_MAX), which is what the framing allows. */
#define YARD_IRC_CLIENT_TAGS_MAX 4094
#define YARD_IRC_PARAMS_MAX 15

enum yard_irc_frame {
    YARD_IRC_LINE = 1,          /* a line at p + *start, *len bytes (no CR/LF) */
    YARD_IRC_NEED = 0,          /* no complete line yet */
    YARD_IRC_TOOLONG = -1,      /* over the limits, newline included in *used */
    YARD_IRC_TOOLONG_OPEN = -2  /* over the limits and not ended yet: skip *used bytes
                                 * and keep discarding up to the next newline */
};

/* Find the next line in p[0..n); *used is what to consume in every case.
 * A line ends at CRLF, or at a bare CR or LF (so no CR or LF is ever inside
 * a line); empty lines are skipped. */
int yard_irc_frame(const char *p, size_t n, size_t *start, size_t *len, size_t *used);

/* Remove, in place, the control characters a terminal would act on: C0
 * controls except IRC's formatting codes (0x02 0x03 0x04 0x0F 0x11 0x16
 * 0x1D 0x1E 0x1F) and CTCP's 0x01, DEL, and C1 controls encoded as UTF-8
 * (U+0080..U+009F); a tab becomes a space. Returns the new length (and
 * NUL-terminates when it shrank). */
size_t yard_irc_strip_controls(char *s, size_t n);
/* Whether s[0..n) holds anything yard_irc_strip_controls would remove. */
bool yard_irc_has_controls(const char *s, size_t n);

/* Frame every complete line of p[0..n) and call fn with it, NUL-terminated
 * in a buffer of fn's own (overlong lines are skipped). Returns the bytes
 * consumed (the rest is a partial line to keep), or -1 when fn returned a
 * negative value (the bytes up to that line are consumed). */
long yard_irc_each_line(const char *p, size_t n, int (*fn)(char *line, void *arg), void *arg);

/* Format one line and end it with CRLF in out[0..cap) (cap >= 3). A line
 * longer than cap - 3 (one byte goes to vsnprintf's NUL) is cut to that,
 * and *cut says so. Returns its length,
 * CRLF included, or 0 when the format fails. */
size_t yard_irc_vline(char *out, size_t cap, bool *cut, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

typedef struct yard_irc_msg {
    char *tags; /* the tags, without '@' (NUL-terminated in place), or NULL */
    char *cmd;  /* upper-cased in place */
    char *params[YARD_IRC_PARAMS_MAX];
    int n;
} yard_irc_msg_t;

/* Split a NUL-terminated line, in place. A source prefix is skipped (the
 * server takes none from a client); the tags are only cut out (m->tags);
 * the 15th parameter takes the rest of the line. false when there is no
 * valid command (letters, or three digits). */
bool yard_irc_parse(char *line, yard_irc_msg_t *m);

/* The client-only tags of a tag section ("a=1;+x=y;+draft/react=z"): those
 * whose key starts with '+' and is well formed ('+', an optional vendor
 * of letters, digits, '-' and '.' ended by '/', then letters, digits and
 * '-'), each key once (its last value, as IRCv3 says), values as sent,
 * joined by ';' into out (NUL-terminated). Returns their length (0: none),
 * or -1 when they do not fit cap - 1 bytes. */
long yard_irc_client_tags(const char *tags, char *out, size_t cap);

/* Base64 with padding; the decoded length or -1. */
long yard_b64decode(const char *in, size_t n, char *out, size_t cap);

/* SASL PLAIN "authzid NUL authcid NUL password": false when malformed, or
 * when an authzid is given and differs from authcid. */
bool yard_sasl_plain_split(const char *p, size_t n, const char **user, size_t *user_len,
                           const char **pass, size_t *pass_len);

/* One character under IRC's rfc1459 casemapping (CASEMAPPING=rfc1459):
 * ASCII lower case, and []\~ as {}|^. The chat app's names and the chat
 * log's index fold with this one rule. */
static inline char yard_irc_fold(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a')
           : c == '['         ? '{'
           : c == ']'         ? '}'
           : c == '\\'        ? '|'
           : c == '~'         ? '^'
                              : c;
}

#endif
