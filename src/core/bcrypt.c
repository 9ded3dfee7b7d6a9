/* bcrypt via libcrypt: see include/yard/bcrypt.h. */
#include "yard/bcrypt.h"

#include <stdint.h>
#include <string.h>
#include <sys/random.h>

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
    memset(cd, 0, sizeof *cd);
    const char *h = crypt_r(password, salt, cd);
    if (!h || h[0] == '*' || strlen(h) != YARD_BCRYPT_LEN)
        return false;
    memcpy(out, h, YARD_BCRYPT_LEN + 1);
    return true;
}

bool yard_bcrypt_verify(const char *password, const char *hash, struct crypt_data *cd)
{
    memset(cd, 0, sizeof *cd);
    const char *h = crypt_r(password, hash, cd);
    unsigned diff = h ? 0 : 1;
    for (size_t i = 0; h && i < YARD_BCRYPT_LEN; i++)
        diff |= (unsigned)(uint8_t)h[i] ^ (unsigned)(uint8_t)hash[i];
    if (h && strlen(h) != YARD_BCRYPT_LEN)
        diff = 1;
    return diff == 0;
}
