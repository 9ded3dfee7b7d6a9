/* IRC lines on arbitrary bytes: the framer always consumes something or
 * asks for more, never points outside the input, and every line it returns
 * is within the limits; parsing a line never yields more than 15 params or
 * a param outside the line, nor client tags other than '+' ones or past
 * their buffer; the SASL decoders accept or refuse cleanly. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "yard/proto_ircline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    size_t off = 0;
    for (int guard = 0; off < size && guard < 100000; guard++) {
        size_t start = 0, len = 0, used = 0;
        int f = yard_irc_frame(p + off, size - off, &start, &len, &used);
        if (used > size - off)
            abort();
        if (f == YARD_IRC_NEED)
            break;
        if (used == 0)
            abort(); /* no progress */
        if (f == YARD_IRC_LINE) {
            if (start + len > used || len > YARD_IRC_MSG_MAX + YARD_IRC_TAGS_MAX)
                abort();
            if (memchr(p + off + start, '\r', len) || memchr(p + off + start, '\n', len))
                abort(); /* no CR or LF inside a line, ever */
            char *line = malloc(len + 1);
            if (!line)
                abort();
            memcpy(line, p + off + start, len);
            line[len] = 0;
            yard_irc_msg_t m;
            if (!memchr(line, 0, len) && yard_irc_parse(line, &m)) {
                if (m.n < 0 || m.n > YARD_IRC_PARAMS_MAX || !m.cmd[0])
                    abort();
                for (int i = 0; i < m.n; i++)
                    if (m.params[i] < line || m.params[i] > line + len)
                        abort();
                char kept_tags[600];
                long tn = m.tags ? yard_irc_client_tags(m.tags, kept_tags, sizeof kept_tags) : 0;
                if (tn >= (long)sizeof kept_tags || (tn > 0 && (kept_tags[0] != '+' ||
                                                                strlen(kept_tags) != (size_t)tn)))
                    abort(); /* only client-only tags, within the buffer */
            }
            size_t kept = yard_irc_strip_controls(line, len);
            if (kept > len || yard_irc_has_controls(line, kept))
                abort();
            free(line);
        } else if (f != YARD_IRC_TOOLONG && f != YARD_IRC_TOOLONG_OPEN) {
            abort();
        }
        off += used;
    }
    char out[1024];
    long n = yard_b64decode(p, size, out, sizeof out);
    if (n > (long)sizeof out)
        abort();
    if (n > 0) {
        const char *u, *pw;
        size_t ul, pl;
        if (yard_sasl_plain_split(out, (size_t)n, &u, &ul, &pw, &pl) &&
            (u < out || pw + pl > out + n || !ul || !pl))
            abort();
    }
    return 0;
}
