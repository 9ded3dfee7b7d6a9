/* The chat tools' text module (tools/chat/text.c) on arbitrary bytes: the
 * decoder always moves on by 1 to 4 bytes and round-trips what it accepts;
 * what the UIs draw is valid UTF-8 with no control character, in both the
 * UTF-8 and the ASCII mode; clusters tile the input and chat_cluster_prev
 * finds their starts; chat_cut never splits a code point; the JSON string
 * reads back as the input; base64 decodes back to it. */
#include <locale.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"
#include "yard/proto_ircline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_IN 4096 /* the quadratic checks stay fast */

/* Every output the terminal gets: valid UTF-8 and no C0, DEL or C1. */
static void check_safe(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += chat_utf8_decode(s + i, n - i, &cp);
        if (cp == CHAT_INVALID || chat_is_control(cp))
            abort();
    }
}

static bool is_cp_boundary(const char *p, size_t n, size_t at)
{
    size_t i = 0;
    while (i < at) {
        uint32_t cp;
        i += chat_utf8_decode(p + i, n - i, &cp);
    }
    return i == at;
}

static unsigned hexval(char c)
{
    if (c >= '0' && c <= '9')
        return (unsigned)(c - '0');
    if (c >= 'a' && c <= 'f')
        return (unsigned)(c - 'a' + 10);
    abort(); /* chat_json_string writes lower-case hex only */
}

/* Reads a JSON string (as chat_json_string writes them) back to bytes. */
static size_t json_read(const char *j, size_t n, char *out)
{
    size_t o = 0;
    if (n < 2 || j[0] != '"' || j[n - 1] != '"')
        abort();
    for (size_t i = 1; i < n - 1; i++) {
        unsigned char c = (unsigned char)j[i];
        if (c == '"' || c < 0x20)
            abort(); /* unescaped quote or control */
        if (c != '\\') {
            out[o++] = (char)c;
            continue;
        }
        if (++i >= n - 1)
            abort();
        switch (j[i]) {
        case '"': out[o++] = '"'; break;
        case '\\': out[o++] = '\\'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'u': {
            if (i + 4 >= n - 1)
                abort();
            uint32_t v = 0;
            for (int k = 1; k <= 4; k++)
                v = v << 4 | hexval(j[i + (size_t)k]);
            i += 4;
            size_t l = chat_utf8_encode(v, out + o);
            if (!l)
                abort();
            o += l;
            break;
        }
        default: abort();
        }
    }
    return o;
}

static void check_units(const char *p, size_t n, bool utf8, char *buf, size_t cap)
{
    size_t total = 0;
    int width = 0;
    for (size_t i = 0; i < n;) {
        chat_unit_t u;
        size_t k = chat_unit_next(p + i, n - i, utf8, &u);
        if (k < 1 || k > n - i || u.width < 1 || u.width > 4)
            abort();
        if (u.kind == CHAT_UNIT_TEXT) {
            check_safe(p + i, k);
            if (!utf8 && (k != 1 || (unsigned char)p[i] >= 0x80))
                abort();
        } else {
            check_safe(u.show, strlen(u.show));
            if ((int)strlen(u.show) < u.width || !u.show[0])
                abort();
        }
        width += u.width;
        total += k;
        i += k;
    }
    if (total != n || width != chat_text_width(p, n, utf8))
        abort();
    size_t o = chat_sanitize(p, n, utf8, buf, cap);
    if (o > 3 * n || buf[o] || strlen(buf) != o)
        abort();
    check_safe(buf, o);
    if (!utf8)
        for (size_t i = 0; i < o; i++)
            if ((unsigned char)buf[i] >= 0x80)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool locale_set;
    if (!locale_set) {
        setlocale(LC_ALL, "C.UTF-8"); /* without it widths fall back, still safe */
        locale_set = true;
    }
    if (size > MAX_IN)
        size = MAX_IN;
    const char *p = (const char *)data;
    char *buf = malloc(6 * size + 16), *back = malloc(6 * size + 16);
    if (!buf || !back)
        abort();
    size_t cap = 6 * size + 16;

    /* Decoding: progress, and what is accepted encodes back the same. */
    bool valid = true;
    for (size_t i = 0; i < size;) {
        uint32_t cp;
        size_t k = chat_utf8_decode(p + i, size - i, &cp);
        if (k < 1 || k > 4 || k > size - i)
            abort();
        if (cp == CHAT_INVALID) {
            valid = false;
        } else {
            char enc[4];
            if (chat_utf8_encode(cp, enc) != k || memcmp(enc, p + i, k))
                abort();
        }
        i += k;
    }
    if (valid != chat_utf8_valid(p, size))
        abort();

    check_units(p, size, true, buf, cap);
    check_units(p, size, false, buf, cap);

    /* Clusters tile the input; prev finds each start from anywhere inside. */
    for (size_t b = 0; b < size;) {
        size_t l = chat_cluster_len(p + b, size - b);
        if (l < 1 || l > size - b || !is_cp_boundary(p, size, b + l))
            abort();
        if (chat_cluster_prev(p, size, b + l) != b || chat_cluster_prev(p, size, b + 1) != b)
            abort();
        b += l;
    }

    /* Cutting: within max, between code points, and as long as it can be
     * when the first cluster fits. */
    static const size_t maxes[] = {0, 1, 3, 4, 7, 64, 300, 510};
    for (size_t m = 0; m < sizeof maxes / sizeof maxes[0]; m++) {
        size_t k = chat_cut(p, size, maxes[m]);
        if (k > size || (size > maxes[m] && k > maxes[m]) || (size <= maxes[m] && k != size))
            abort();
        if (!is_cp_boundary(p, size, k))
            abort();
        if (size && size > maxes[m] && chat_cluster_len(p, size) <= maxes[m] && !k)
            abort();
    }

    /* JSON: the right size, and valid UTF-8 reads back as itself. */
    size_t j = chat_json_string(p, size, buf, cap);
    if (!j || j > 6 * size + 2 || buf[j])
        abort();
    check_safe(buf, j);
    size_t r = json_read(buf, j, back);
    if (valid && (r != size || memcmp(back, p, size)))
        abort();
    if (!chat_utf8_valid(back, r))
        abort();

    /* Base64 reads back with the IRC code's decoder. */
    size_t b = chat_b64_encode(p, size, buf, cap);
    if (b != 4 * ((size + 2) / 3) || strlen(buf) != b)
        abort();
    long d = yard_b64decode(buf, b, back, cap);
    if (d != (long)size || memcmp(back, p, size))
        abort();

    free(buf);
    free(back);
    return 0;
}
