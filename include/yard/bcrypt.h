/* bcrypt through libcrypt ($2b$): hashing with a fresh salt and a
 * constant-time verify. Shared by the rest app's stores and the chat
 * service's accounts. Both are slow on purpose (cost = log2 of the rounds):
 * call them from a job or a tool, never from an event loop. */
#ifndef YARD_BCRYPT_H
#define YARD_BCRYPT_H

#include <crypt.h>
#include <stdbool.h>

#define YARD_BCRYPT_LEN 60 /* "$2b$" cost "$" 53 characters of salt and hash */
/* The bytes of a password bcrypt reads: hash and verify use the first 72
 * of a longer one, as every $2b$ implementation does (libcrypt itself
 * refuses one of 512 bytes or more), so their hashes and everyone else's
 * agree at any length. A caller that must not ignore the rest (the rest
 * app) refuses longer passwords itself. */
#define YARD_BCRYPT_KEY_MAX 72

/* out gets YARD_BCRYPT_LEN characters and a NUL. false when no randomness
 * or libcrypt refuses (cost outside 4..31). */
bool yard_bcrypt_hash(const char *password, int cost, struct crypt_data *cd,
                      char out[YARD_BCRYPT_LEN + 1]);
/* The cost of a "$2b$NN$..." hash, or 0 when it is not one. */
int yard_bcrypt_cost(const char *hash);
/* A hash of nothing anybody can type, at the given cost (4..31), built
 * from template (a real hash of any cost): checking a password against it
 * costs what checking one against a real hash of that cost does. */
void yard_bcrypt_dummy(const char template_hash[YARD_BCRYPT_LEN + 1], int cost,
                       char out[YARD_BCRYPT_LEN + 1]);
/* Whether password matches hash; every byte is compared whatever differs. */
bool yard_bcrypt_verify(const char *password, const char *hash, struct crypt_data *cd);

#endif
