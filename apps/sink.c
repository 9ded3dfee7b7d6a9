/* sink: the papayaChat benchmark workload. Everything received goes to the
 * output file (--out); the engine writes it according to --flush.
 *
 * The sink hands over whole lines: a line is never split between two writes,
 * so when many connections append to one file it holds an interleaving of
 * their lines, as a chat log would. Only a line longer than SINK_LINE_MAX
 * (binary data, say) is passed on in pieces. */
#define _GNU_SOURCE /* memrchr */

#include <string.h>

#include "apps.h"

#define SINK_LINE_MAX (64u * 1024u)

static size_t sink_data(void *state, void *session, const uint8_t *in, size_t n, yard_fx_t *fx)
{
    size_t take = n;
    if (!fx->eof) {
        const uint8_t *nl = memrchr(in, '\n', n);
        if (nl)
            take = (size_t)(nl - in) + 1;
        else if (n < SINK_LINE_MAX)
            take = 0; /* wait for the rest of the line */
    }
    if (take)
        yard_fx_store(fx, in, take);
    return take;
}

const yard_app_t yard_app_sink = {
    .name = "sink",
    .summary = "reads everything and writes it, whole lines at a time, to --out (default /dev/null)",
    .uses_out = true,
    .data = sink_data,
};
