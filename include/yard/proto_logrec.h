/* The chat log's record format, pure (no I/O): CRC32C and the codec.
 *
 * A record, little-endian:
 *   u16 magic 0x4C59 ("YL")  u8 version (1)  u8 type (1 message, 2 notice, 4 topic,
 *     7 join, 8 part, 11 quit: the sender joined or left the target channel;
 *     13 away: the sender's away message (empty: back), told in that channel;
 *     14 read: the sender's account has read the target up to the time in text;
 *     16 mode: the sender changed the target channel's modes, as text ("+o-t alice");
 *     19 kick: the sender kicked a member out of the target channel (text: "nick reason");
 *     21 invite: the sender invited the target account into the channel in text;
 *     22 tagmsg: IRCv3 TAGMSG, client-only tags and no text;
 *     25 nick: the sender (a guest) is now called text: one record per change, its
 *       target "*SLOT:SERIAL" naming the chat's member (apps/chat/state.h), told to
 *       whoever shares a channel with it; before, one record per channel, the target
 *       a channel)
 *     26 kill: the sender (a server operator) disconnected the chat's member named
 *       by the target "*SLOT:SERIAL", for the reason in text (KILL);
 *     28 wallops: the sender (a server operator) said text to everyone with user
 *       mode +w; the target is "*" (WALLOPS)
 *     38 account: the member named by the target "*SLOT:SERIAL" logged in to the
 *       account in text ("*" for none), the sender being its name from then on
 *   A sender that starts with '~' is a guest (the chat app's --guests): no
 *   account has that name, since '~' is not allowed in account names. A
 *   sender "account/nick" is the account, shown by that nick (its client
 *   logged in with SASL under another nick); '/' is not allowed in names.
 *   A message or notice whose target starts with '@' or '+' before a
 *   channel ("@#chan") is a STATUSMSG, for the channel's operators (and
 *   the voiced, '+') only.
 *   A message, notice or tagmsg whose text holds a NUL byte starts with the
 *   sender's client-only tags ("+typing=active;+draft/react=x"), ended by
 *   that NUL; the message's text follows it (a client's text has no NUL).
 *   u32 total length of the record, header included
 *   u32 CRC32C of every byte after this field
 *   u64 id (1, 2, 3, ... with no gaps)   i64 timestamp (ns since the epoch)
 *   u16 sender length, sender   u16 target length, target   u16 text length, text
 * Limits: sender and target 1..64 bytes, text 0..5120 bytes (a message's
 * text with client-only tags of up to 4098 bytes before it). */
#ifndef YARD_PROTO_LOGREC_H
#define YARD_PROTO_LOGREC_H

#include <stddef.h>
#include <stdint.h>

#define YARD_LOGREC_MAGIC 0x4C59
#define YARD_LOGREC_VERSION 1
#define YARD_LOGREC_HEAD 12 /* magic, version, type, length, crc */
#define YARD_LOGREC_NAME_MAX 64
#define YARD_LOGREC_TEXT_MAX 5120
#define YARD_LOGREC_MIN (YARD_LOGREC_HEAD + 16 + 6 + 2)
#define YARD_LOGREC_MAX (YARD_LOGREC_HEAD + 16 + 6 + 2 * YARD_LOGREC_NAME_MAX + YARD_LOGREC_TEXT_MAX)

/* The type byte is outside the CRC (version 1 records): the valid types
 * differ from each other in at least two bits (each has an odd number of
 * bits set), so one flipped bit never turns a record into another valid
 * type. Join, part and quit records carry a reason (part, quit) as text. */
enum { YARD_LOGREC_MESSAGE = 1, YARD_LOGREC_NOTICE = 2, YARD_LOGREC_TOPIC = 4,
       YARD_LOGREC_JOIN = 7, YARD_LOGREC_PART = 8, YARD_LOGREC_QUIT = 11, YARD_LOGREC_AWAY = 13,
       YARD_LOGREC_READ = 14, YARD_LOGREC_MODE = 16, YARD_LOGREC_KICK = 19,
       YARD_LOGREC_INVITE = 21, YARD_LOGREC_TAGMSG = 22, YARD_LOGREC_NICK = 25,
       YARD_LOGREC_KILL = 26, YARD_LOGREC_WALLOPS = 28, YARD_LOGREC_SETNAME = 31,
       YARD_LOGREC_ONLINE = 37, /* an account or guest came online ("+") or went ("-"): MONITOR */
       /* the member named by the target "*SLOT:SERIAL" (a guest that logged in) is now the
        * account in text ("*": none), shown as its sender says: IRCv3 account-notify */
       YARD_LOGREC_ACCOUNT = 38 };
enum yard_logrec_verdict { YARD_LOGREC_COMPLETE = 1, YARD_LOGREC_PARTIAL = 0, YARD_LOGREC_CORRUPT = -1 };

typedef struct yard_logrec {
    int type;
    uint64_t id;
    int64_t ts_ns;
    const char *sender, *target, *text; /* into the decoded buffer */
    size_t sender_len, target_len, text_len;
    size_t len; /* the whole record */
} yard_logrec_t;

uint32_t yard_crc32c(uint32_t crc, const void *p, size_t n);
/* The record's length, or -EINVAL (limits) / -ENOSPC (cap too small). */
long yard_logrec_encode(const yard_logrec_t *r, uint8_t *out, size_t cap);
/* COMPLETE (r filled, r->len set), PARTIAL (more bytes needed) or CORRUPT. */
int yard_logrec_decode(const uint8_t *p, size_t n, yard_logrec_t *r);

#endif
