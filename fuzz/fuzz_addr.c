/* HOST:PORT parsing: never crashes, and whatever it accepts formats back to
 * text that parses to the same address. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "yard/net.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[256];
    if (size >= sizeof text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    yard_addr_t a, b;
    char err[256];
    if (yard_addr_parse(text, &a, err, sizeof err) < 0) {
        if (!err[0])
            abort(); /* a rejection always says why */
        return 0;
    }
    char round[YARD_ADDR_STRLEN];
    yard_addr_format(&a, round, sizeof round);
    if (yard_addr_parse(round, &b, err, sizeof err) < 0 || a.len != b.len ||
        memcmp(&a.ss, &b.ss, a.len) != 0)
        abort();
    return 0;
}
