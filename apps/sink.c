/* sink: the papayaChat benchmark workload. Everything received goes to the
 * output file (--out); the engine writes it according to --flush. */
#include "apps.h"

static size_t sink_data(void *state, void *session, const uint8_t *in, size_t n, yard_fx_t *fx)
{
    yard_fx_store(fx, in, n);
    return n;
}

const yard_app_t yard_app_sink = {
    .name = "sink",
    .summary = "reads everything and writes it to --out (default /dev/null)",
    .uses_out = true,
    .data = sink_data,
};
