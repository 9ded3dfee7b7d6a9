/* bcrypt for the BEAM peers (Erlang and Elixir): a NIF over the system's
 * libcrypt, the library yard-serve's rest app uses (src/core/bcrypt.c),
 * with the same choices: "$2b$" hashes, a 16-byte salt from getrandom,
 * crypt_r with its state on the heap, a constant-time comparison.
 *
 * Both functions take milliseconds to seconds, so they are declared
 * ERL_NIF_DIRTY_JOB_CPU_BOUND: they run on a dirty CPU scheduler and never
 * hold one of the normal schedulers that run the connection processes. */
#include <crypt.h>
#include <erl_nif.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

#define HASH_LEN 60    /* "$2b$" cost "$" 53 characters of salt and hash */
#define MAX_PASSWORD 72 /* bcrypt reads no further */

/* A password as a C string: at most 72 bytes, no NUL inside. */
static int password_arg(ErlNifEnv *env, ERL_NIF_TERM t, char out[MAX_PASSWORD + 1])
{
    ErlNifBinary b;
    if (!enif_inspect_iolist_as_binary(env, t, &b) || b.size > MAX_PASSWORD ||
        memchr(b.data, 0, b.size))
        return 0;
    memcpy(out, b.data, b.size);
    out[b.size] = 0;
    return 1;
}

static ERL_NIF_TERM error(ErlNifEnv *env, const char *why)
{
    return enif_make_tuple2(env, enif_make_atom(env, "error"), enif_make_atom(env, why));
}

/* hash(Password, Cost) -> Hash (60-byte binary) | {error, Why} */
static ERL_NIF_TERM nif_hash(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    char pw[MAX_PASSWORD + 1], salt[64];
    int cost;
    uint8_t rnd[16];
    (void)argc;
    if (!password_arg(env, argv[0], pw) || !enif_get_int(env, argv[1], &cost) || cost < 4 ||
        cost > 31)
        return enif_make_badarg(env);
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return error(env, "getrandom");
    if (!crypt_gensalt_rn("$2b$", (unsigned long)cost, (const char *)rnd, sizeof rnd, salt,
                          sizeof salt))
        return error(env, "gensalt");
    struct crypt_data *cd = enif_alloc(sizeof *cd); /* 32 KiB: not on a scheduler's stack */
    if (!cd)
        return error(env, "enomem");
    memset(cd, 0, sizeof *cd);
    const char *h = crypt_r(pw, salt, cd);
    ERL_NIF_TERM result;
    if (!h || h[0] == '*' || strlen(h) != HASH_LEN) {
        result = error(env, "crypt");
    } else {
        unsigned char *dst = enif_make_new_binary(env, HASH_LEN, &result);
        memcpy(dst, h, HASH_LEN);
    }
    memset(cd, 0, sizeof *cd);
    enif_free(cd);
    memset(pw, 0, sizeof pw);
    return result;
}

/* verify(Password, Hash) -> true | false. Every byte of the hash is
 * compared, whatever differs first. */
static ERL_NIF_TERM nif_verify(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    char pw[MAX_PASSWORD + 1], hash[HASH_LEN + 1];
    ErlNifBinary hb;
    (void)argc;
    if (!password_arg(env, argv[0], pw) || !enif_inspect_binary(env, argv[1], &hb) ||
        hb.size != HASH_LEN || memchr(hb.data, 0, hb.size))
        return enif_make_badarg(env);
    memcpy(hash, hb.data, HASH_LEN);
    hash[HASH_LEN] = 0;
    struct crypt_data *cd = enif_alloc(sizeof *cd);
    if (!cd)
        return error(env, "enomem");
    memset(cd, 0, sizeof *cd);
    const char *h = crypt_r(pw, hash, cd);
    unsigned diff = (h && strlen(h) == HASH_LEN) ? 0 : 1;
    if (!diff)
        for (size_t i = 0; i < HASH_LEN; i++)
            diff |= (unsigned)(uint8_t)h[i] ^ (unsigned)(uint8_t)hash[i];
    memset(cd, 0, sizeof *cd);
    enif_free(cd);
    memset(pw, 0, sizeof pw);
    return enif_make_atom(env, diff == 0 ? "true" : "false");
}

static ErlNifFunc funcs[] = {
    {"hash", 2, nif_hash, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"verify", 2, nif_verify, ERL_NIF_DIRTY_JOB_CPU_BOUND},
};

ERL_NIF_INIT(yard_bcrypt, funcs, NULL, NULL, NULL, NULL)
