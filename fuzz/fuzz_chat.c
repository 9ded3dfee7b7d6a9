/* The chat app on arbitrary input, through the unit tests' sans-socket
 * harness (tests/unit/chat_harness.h): a fresh server per input with two
 * accounts, alice and bob logged in as clients 0 and 1, client 2 not
 * logged in. The input is cut into lines at each LF; a line's first byte
 * says what happens to the rest of it (with its LF):
 *   '0' '1' '2' (any byte % 8 of 0-2, 5-7: % 3)  fed to that client
 *   '3'  the clock moves on 30 s, firing the timers due (flood control,
 *        keep-alive PINGs, the registration timeout, a failed login's
 *        delayed answer)
 *   '4'  the client named by the next byte (% 3) closes its side
 * Then the clock runs on until no timer is left (a bounded number of
 * steps) and the server stops. Nothing may crash, leak or hang. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat_harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SECOND ((uint64_t)1000000000)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const flags[] = {"fsync=never", "max-channels=16", NULL};
    chat_harness_t *h = ch_start(flags);
    ch_account(h, "alice", "pw-alice");
    ch_account(h, "bob", "pw-bob");
    int ids[3];
    ids[0] = ch_login(h, "alice", "pw-alice", NULL);
    ids[1] = ch_login(h, "bob", "pw-bob", "echo-message batch message-tags server-time");
    ids[2] = ch_connect(h);
    for (size_t off = 0; off < size;) {
        const uint8_t *nl = memchr(data + off, '\n', size - off);
        size_t end = nl ? (size_t)(nl - data) + 1 : size;
        uint8_t sel = data[off] % 8;
        const uint8_t *rest = data + off + 1;
        size_t n = end - off - 1;
        if (sel == 3)
            ch_advance(h, 30 * SECOND);
        else if (sel == 4)
            ch_eof(h, ids[(n ? rest[0] : 0) % 3]);
        else
            ch_feed_n(h, ids[sel % 3], rest, n);
        off = end;
    }
    for (int step = 0; step < 100 && ch_next_wake(h); step++)
        ch_advance(h, ch_next_wake(h) > ch_now(h) ? ch_next_wake(h) - ch_now(h) : 0);
    for (int i = 0; i < 3; i++)
        ch_discard(h, ids[i]);
    ch_stop(h);
    return 0;
}
