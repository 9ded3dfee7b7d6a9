/* echo: every byte received is sent back. */
#include "apps.h"

static size_t echo_data(void *state, void *session, const uint8_t *in, size_t n, yard_fx_t *fx)
{
    yard_fx_send(fx, in, n);
    return n;
}

const yard_app_t yard_app_echo = {
    .name = "echo",
    .summary = "every byte received is sent back",
    .data = echo_data,
};
