/* The chat log's record codec and CRC32C (include/yard/proto_logrec.h). */
#include "yard/proto_logrec.h"

#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <string.h>

/* CRC32C (Castagnoli), reflected polynomial 0x82F63B78, table-driven
 * (slice-by-1 is enough: the log writes a few hundred bytes per message). */
static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t yard_crc32c(uint32_t crc, const void *p, size_t n)
{
    pthread_once(&crc_once, crc_init);
    const uint8_t *b = p;
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = crc_table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

static bool type_valid(int type)
{
    return type == YARD_LOGREC_MESSAGE || type == YARD_LOGREC_NOTICE || type == YARD_LOGREC_TOPIC ||
           type == YARD_LOGREC_JOIN || type == YARD_LOGREC_PART || type == YARD_LOGREC_QUIT ||
           type == YARD_LOGREC_AWAY || type == YARD_LOGREC_READ || type == YARD_LOGREC_MODE ||
           type == YARD_LOGREC_KICK || type == YARD_LOGREC_INVITE || type == YARD_LOGREC_TAGMSG ||
           type == YARD_LOGREC_NICK || type == YARD_LOGREC_KILL || type == YARD_LOGREC_WALLOPS ||
           type == YARD_LOGREC_SETNAME || type == YARD_LOGREC_ONLINE || type == YARD_LOGREC_ACCOUNT;
}

long yard_logrec_encode(const yard_logrec_t *r, uint8_t *out, size_t cap)
{
    if (r->sender_len < 1 || r->sender_len > YARD_LOGREC_NAME_MAX || r->target_len < 1 ||
        r->target_len > YARD_LOGREC_NAME_MAX || r->text_len > YARD_LOGREC_TEXT_MAX ||
        !type_valid(r->type))
        return -EINVAL;
    size_t len = YARD_LOGREC_HEAD + 16 + 6 + r->sender_len + r->target_len + r->text_len;
    if (len > cap)
        return -ENOSPC;
    put16(out, YARD_LOGREC_MAGIC);
    out[2] = YARD_LOGREC_VERSION;
    out[3] = (uint8_t)r->type;
    put32(out + 4, (uint32_t)len);
    uint8_t *p = out + YARD_LOGREC_HEAD;
    put64(p, r->id);
    put64(p + 8, (uint64_t)r->ts_ns);
    p += 16;
    put16(p, (uint16_t)r->sender_len);
    memcpy(p + 2, r->sender, r->sender_len);
    p += 2 + r->sender_len;
    put16(p, (uint16_t)r->target_len);
    memcpy(p + 2, r->target, r->target_len);
    p += 2 + r->target_len;
    put16(p, (uint16_t)r->text_len);
    memcpy(p + 2, r->text, r->text_len);
    put32(out + 8, yard_crc32c(0, out + YARD_LOGREC_HEAD, len - YARD_LOGREC_HEAD));
    return (long)len;
}

int yard_logrec_decode(const uint8_t *p, size_t n, yard_logrec_t *r)
{
    /* What is there of the fixed head must already be right. */
    static const uint8_t magic[3] = {YARD_LOGREC_MAGIC & 0xff, YARD_LOGREC_MAGIC >> 8,
                                     YARD_LOGREC_VERSION};
    if (memcmp(p, magic, n < 3 ? n : 3) != 0)
        return YARD_LOGREC_CORRUPT;
    if (n >= 4 && !type_valid(p[3]))
        return YARD_LOGREC_CORRUPT;
    if (n < 8)
        return YARD_LOGREC_PARTIAL;
    size_t len = get32(p + 4);
    if (len < YARD_LOGREC_MIN || len > YARD_LOGREC_MAX)
        return YARD_LOGREC_CORRUPT;
    if (n < len)
        return YARD_LOGREC_PARTIAL;
    if (get32(p + 8) != yard_crc32c(0, p + YARD_LOGREC_HEAD, len - YARD_LOGREC_HEAD))
        return YARD_LOGREC_CORRUPT;
    const uint8_t *q = p + YARD_LOGREC_HEAD, *end = p + len;
    r->type = p[3];
    r->id = get64(q);
    r->ts_ns = (int64_t)get64(q + 8);
    q += 16;
    const char **field[3] = {&r->sender, &r->target, &r->text};
    size_t *flen[3] = {&r->sender_len, &r->target_len, &r->text_len};
    for (int i = 0; i < 3; i++) {
        if (end - q < 2)
            return YARD_LOGREC_CORRUPT;
        size_t fl = get16(q);
        q += 2;
        if ((size_t)(end - q) < fl)
            return YARD_LOGREC_CORRUPT;
        *field[i] = (const char *)q;
        *flen[i] = fl;
        q += fl;
    }
    if (q != end || r->sender_len < 1 || r->sender_len > YARD_LOGREC_NAME_MAX ||
        r->target_len < 1 || r->target_len > YARD_LOGREC_NAME_MAX ||
        r->text_len > YARD_LOGREC_TEXT_MAX || r->id == 0)
        return YARD_LOGREC_CORRUPT;
    r->len = len;
    return YARD_LOGREC_COMPLETE;
}
