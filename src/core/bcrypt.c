/* bcrypt via libcrypt: see include/yard/bcrypt.h. */
#define _DEFAULT_SOURCE /* explicit_bzero */

#include "yard/bcrypt.h"

#include <stdint.h>
#include <string.h>
#include <sys/random.h>

/* The first YARD_BCRYPT_KEY_MAX bytes of password into key. */
static const char *bcrypt_key(const char *password, char key[YARD_BCRYPT_KEY_MAX + 1])
{
    size_t n = strnlen(password, YARD_BCRYPT_KEY_MAX);
    memcpy(key, password, n);
    key[n] = 0;
    return key;
}

bool yard_bcrypt_hash(const char *password, int cost, struct crypt_data *cd,
                      char out[YARD_BCRYPT_LEN + 1])
{
    uint8_t rnd[16];
    char salt[64];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return false;
    if (!crypt_gensalt_rn("$2b$", (unsigned long)cost, (const char *)rnd, sizeof rnd, salt,
                          sizeof salt))
        return false;
    char key[YARD_BCRYPT_KEY_MAX + 1];
    memset(cd, 0, sizeof *cd);
    const char *h = crypt_r(bcrypt_key(password, key), salt, cd);
    explicit_bzero(key, sizeof key);
    if (!h || h[0] == '*' || strlen(h) != YARD_BCRYPT_LEN)
        return false;
    memcpy(out, h, YARD_BCRYPT_LEN + 1);
    return true;
}

bool yard_bcrypt_verify(const char *password, const char *hash, struct crypt_data *cd)
{
    char key[YARD_BCRYPT_KEY_MAX + 1];
    memset(cd, 0, sizeof *cd);
    const char *h = crypt_r(bcrypt_key(password, key), hash, cd);
    explicit_bzero(key, sizeof key);
    unsigned diff = h ? 0 : 1;
    for (size_t i = 0; h && i < YARD_BCRYPT_LEN; i++)
        diff |= (unsigned)(uint8_t)h[i] ^ (unsigned)(uint8_t)hash[i];
    if (h && strlen(h) != YARD_BCRYPT_LEN)
        diff = 1;
    return diff == 0;
}

int yard_bcrypt_cost(const char *hash)
{
    if (strncmp(hash, "$2", 2) != 0 || !hash[2] || hash[3] != '$' || hash[4] < '0' ||
        hash[4] > '9' || hash[5] < '0' || hash[5] > '9' || hash[6] != '$')
        return 0;
    return (hash[4] - '0') * 10 + (hash[5] - '0');
}

void yard_bcrypt_dummy(const char template_hash[YARD_BCRYPT_LEN + 1], int cost,
                       char out[YARD_BCRYPT_LEN + 1])
{
    /* The salt and hash of the template stay valid at any cost: only the
     * number of rounds changes, and with it the time a check takes. */
    memcpy(out, template_hash, YARD_BCRYPT_LEN + 1);
    out[4] = (char)('0' + cost / 10);
    out[5] = (char)('0' + cost % 10);
}
