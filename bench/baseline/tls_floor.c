/* The floor under TLS on an established connection: what the engine's TLS
 * layer (src/core/tls.c, OpenSSL 3 through memory BIOs) costs per small
 * message with no socket, no event loop and no system call in it, and how
 * much of that is the cipher itself.
 *
 * --connections server and client yard_tls_t pairs live in this one
 * thread; their handshakes are pumped through memory, and the rounds go to
 * the pairs in turn (as a server's messages come from many connections,
 * whose TLS state does not all stay in the caches). A round is: the client seals a
 * message; the server takes it in and opens it (yard_tls_feed,
 * yard_tls_read), seals the same bytes back (yard_tls_write, yard_tls_take),
 * which is what the connection driver does for an echo; the client opens
 * the answer, and every byte is checked. Only the server's part is timed
 * (CPU time of this thread), so the figure is what TLS adds to a server's
 * CPU per echoed message at best. The raw AEAD (the TLS 1.3 suite that was
 * negotiated, through EVP) is timed on the same size: one seal and one open
 * per round, the part no TLS library can avoid.
 *
 * --handshakes H measures the floor under a new connection instead (issue
 * 39's target (b)): H full handshakes, each with a new server and client
 * pair pumped through memory, only the server's calls timed (making its
 * object, every handshake step, taking its flights, freeing it); beside
 * them, the public-key work a full TLS 1.3 handshake cannot avoid on the
 * server, timed alone: one signature with the server's key over a
 * CertificateVerify-sized message, and one X25519 key pair made and one
 * shared secret derived (OpenSSL's first key-share group).
 *
 * usage: yard-tls-floor --cert FILE --key FILE [--connections N] [--rounds R]
 *                       [--size S] [--handshakes H] [--json] */
#define _GNU_SOURCE

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "yard/buf.h"
#include "yard/tls.h"

#define MAX_SIZE 4096
#define MAX_CONNS 10000

static void die(const char *what)
{
    fprintf(stderr, "yard-tls-floor: %s\n", what);
    exit(1);
}

static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A handshake through memory; with server_ns, the server's steps (taking
 * the client's flight in, its handshake call, taking its own flight out)
 * are timed into it. */
static void handshake(yard_tls_t *srv, yard_tls_t *cli, yard_buf_t *wire, uint64_t *server_ns)
{
    for (int i = 0; i < 20; i++) {
        int c = yard_tls_handshake(cli);
        wire->len = wire->off = 0;
        if (yard_tls_take(cli, wire) < 0)
            die("out of memory");
        uint64_t t0 = server_ns ? cpu_ns() : 0;
        if (wire->len && yard_tls_feed(srv, yard_buf_head(wire), wire->len) < 0)
            die("out of memory");
        int s = yard_tls_handshake(srv);
        wire->len = wire->off = 0;
        if (yard_tls_take(srv, wire) < 0)
            die("out of memory");
        if (server_ns)
            *server_ns += cpu_ns() - t0;
        if (wire->len && yard_tls_feed(cli, yard_buf_head(wire), wire->len) < 0)
            die("out of memory");
        if (c < 0 || s < 0) {
            fprintf(stderr, "yard-tls-floor: handshake: %s / %s\n", yard_tls_why(cli),
                    yard_tls_why(srv));
            exit(1);
        }
        if (c == 1 && s == 1)
            return;
    }
    die("the handshake did not finish");
}

/* The raw AEAD: one seal and one open of size bytes per round, with a
 * fresh nonce each time as TLS 1.3 makes one per record. ns per round. */
static double aead_ns(const char *name, size_t size, long rounds)
{
    EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, name, NULL);
    EVP_CIPHER_CTX *seal = EVP_CIPHER_CTX_new(), *open = EVP_CIPHER_CTX_new();
    if (!c || !seal || !open)
        die("no AEAD");
    uint8_t key[32] = {1}, iv[12] = {2}, pt[MAX_SIZE + 1] = {3}, ct[MAX_SIZE + 32],
            back[MAX_SIZE + 32], tag[16], aad[5] = {23, 3, 3, 0, 0};
    int n;
    EVP_EncryptInit_ex2(seal, c, key, NULL, NULL);
    EVP_DecryptInit_ex2(open, c, key, NULL, NULL);
    uint64_t t0 = cpu_ns();
    for (long r = 0; r < rounds; r++) {
        memcpy(iv + 4, &r, sizeof r);
        int len = 0;
        if (EVP_EncryptInit_ex2(seal, NULL, NULL, iv, NULL) != 1 ||
            EVP_EncryptUpdate(seal, NULL, &n, aad, sizeof aad) != 1 ||
            EVP_EncryptUpdate(seal, ct, &len, pt, (int)size + 1) != 1 ||
            EVP_EncryptFinal_ex(seal, ct + len, &n) != 1 ||
            EVP_CIPHER_CTX_ctrl(seal, EVP_CTRL_AEAD_GET_TAG, 16, tag) != 1)
            die("seal");
        if (EVP_DecryptInit_ex2(open, NULL, NULL, iv, NULL) != 1 ||
            EVP_DecryptUpdate(open, NULL, &n, aad, sizeof aad) != 1 ||
            EVP_DecryptUpdate(open, back, &len, ct, (int)size + 1) != 1 ||
            EVP_CIPHER_CTX_ctrl(open, EVP_CTRL_AEAD_SET_TAG, 16, tag) != 1 ||
            EVP_DecryptFinal_ex(open, back + len, &n) != 1)
            die("open");
    }
    double ns = (double)(cpu_ns() - t0) / (double)rounds;
    if (memcmp(back, pt, size + 1) != 0)
        die("the AEAD did not give the plaintext back");
    EVP_CIPHER_CTX_free(seal);
    EVP_CIPHER_CTX_free(open);
    EVP_CIPHER_free(c);
    return ns;
}

/* H full handshakes through memory: ns of the server's calls per handshake
 * (its object made and freed, and its steps). */
static double server_handshake_ns(yard_tls_ctx_t *sctx, yard_tls_ctx_t *cctx, long count)
{
    yard_buf_t wire = {0};
    uint64_t server_ns = 0;
    for (long h = 0; h < count; h++) {
        yard_tls_t *cli = yard_tls_client_new(cctx, "localhost");
        uint64_t t0 = cpu_ns();
        yard_tls_t *srv = yard_tls_new(sctx);
        server_ns += cpu_ns() - t0;
        if (!srv || !cli)
            die("out of memory");
        handshake(srv, cli, &wire, &server_ns);
        t0 = cpu_ns();
        yard_tls_free(srv);
        server_ns += cpu_ns() - t0;
        yard_tls_free(cli);
    }
    yard_buf_free(&wire);
    return (double)server_ns / (double)count;
}

/* The server's unavoidable public-key work per full handshake, ns: a
 * signature with its key over 130 bytes (TLS 1.3's CertificateVerify
 * content: 64 spaces, a context string, a SHA-256 transcript hash), and an
 * X25519 key pair plus one derivation. */
static void pkey_ns(const char *key_file, long count, double *sign_ns, double *kex_ns)
{
    FILE *f = fopen(key_file, "r");
    EVP_PKEY *key = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose(f);
    EVP_PKEY *peer = EVP_PKEY_Q_keygen(NULL, NULL, "X25519");
    if (!key || !peer)
        die("cannot load the key or make an X25519 key");
    unsigned char msg[130] = {0}, sig[1024], secret[64];
    uint64_t t0 = cpu_ns();
    for (long i = 0; i < count; i++) {
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        size_t siglen = sizeof sig;
        msg[0] = (unsigned char)i;
        if (!md || EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) != 1 ||
            EVP_DigestSign(md, sig, &siglen, msg, sizeof msg) != 1)
            die("sign");
        EVP_MD_CTX_free(md);
    }
    *sign_ns = (double)(cpu_ns() - t0) / (double)count;
    t0 = cpu_ns();
    for (long i = 0; i < count; i++) {
        EVP_PKEY *mine = EVP_PKEY_Q_keygen(NULL, NULL, "X25519");
        EVP_PKEY_CTX *dc = mine ? EVP_PKEY_CTX_new(mine, NULL) : NULL;
        size_t len = sizeof secret;
        if (!dc || EVP_PKEY_derive_init(dc) != 1 || EVP_PKEY_derive_set_peer(dc, peer) != 1 ||
            EVP_PKEY_derive(dc, secret, &len) != 1)
            die("X25519");
        EVP_PKEY_CTX_free(dc);
        EVP_PKEY_free(mine);
    }
    *kex_ns = (double)(cpu_ns() - t0) / (double)count;
    EVP_PKEY_free(key);
    EVP_PKEY_free(peer);
}

static void handshake_floor(yard_tls_ctx_t *sctx, yard_tls_ctx_t *cctx, const char *key_file,
                            long count, bool json)
{
    double hs = server_handshake_ns(sctx, cctx, count), sign, kex;
    pkey_ns(key_file, count, &sign, &kex);
    if (json)
        printf("{\"handshakes\": %ld, \"server_handshake_ns\": %.0f, \"sign_ns\": %.0f, "
               "\"x25519_keygen_derive_ns\": %.0f}\n",
               count, hs, sign, kex);
    else
        printf("%ld full handshakes, in memory:\n"
               "  the server's part of each: %.0f ns (%.0f a second on one core)\n"
               "  its public-key work alone: sign %.0f ns + X25519 key pair and derivation %.0f ns"
               " = %.0f ns (%.0f a second)\n",
               count, hs, 1e9 / hs, sign, kex, sign + kex, 1e9 / (sign + kex));
}

int main(int argc, char **argv)
{
    const char *cert = NULL, *key = NULL;
    long rounds = 200000, conns = 1, handshakes = 0;
    size_t size = 16;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--cert") && v)
            cert = argv[++i];
        else if (!strcmp(a, "--key") && v)
            key = argv[++i];
        else if (!strcmp(a, "--rounds") && v)
            rounds = atol(argv[++i]);
        else if (!strcmp(a, "--connections") && v)
            conns = atol(argv[++i]);
        else if (!strcmp(a, "--size") && v)
            size = (size_t)atol(argv[++i]);
        else if (!strcmp(a, "--handshakes") && v)
            handshakes = atol(argv[++i]);
        else if (!strcmp(a, "--json"))
            json = true;
        else {
            fprintf(stderr, "usage: yard-tls-floor --cert FILE --key FILE [--connections N] "
                            "[--rounds R] [--size S] [--handshakes H] [--json]\n");
            return 2;
        }
    }
    if (!cert || !key || rounds < 1 || size < 1 || size > MAX_SIZE || conns < 1 ||
        conns > MAX_CONNS || handshakes < 0) {
        fprintf(stderr, "yard-tls-floor: give --cert and --key; --rounds >= 1, --size 1..%d, "
                        "--connections 1..%d, --handshakes >= 0\n",
                MAX_SIZE, MAX_CONNS);
        return 2;
    }
    char err[512];
    yard_tls_ctx_t *sctx, *cctx;
    if (yard_tls_ctx_new(&sctx, cert, key, err, sizeof err) < 0 ||
        yard_tls_client_ctx_new(&cctx, NULL, true, NULL, NULL, err, sizeof err) < 0)
        die(err);
    if (handshakes > 0) {
        handshake_floor(sctx, cctx, key, handshakes, json);
        yard_tls_ctx_free(sctx);
        yard_tls_ctx_free(cctx);
        return 0;
    }
    static yard_tls_t *srvs[MAX_CONNS], *clis[MAX_CONNS];
    yard_buf_t wire = {0}, back = {0};
    for (long i = 0; i < conns; i++) {
        srvs[i] = yard_tls_new(sctx);
        clis[i] = yard_tls_client_new(cctx, "localhost");
        if (!srvs[i] || !clis[i])
            die("out of memory");
        handshake(srvs[i], clis[i], &wire, NULL);
    }
    const char *version = yard_tls_version(srvs[0]);
    uint8_t msg[MAX_SIZE], got[MAX_SIZE];
    uint64_t server_ns = 0;
    for (long r = 0; r < rounds; r++) {
        yard_tls_t *srv = srvs[r % conns], *cli = clis[r % conns];
        for (size_t i = 0; i < size; i++)
            msg[i] = (uint8_t)(r + i);
        if (yard_tls_write(cli, msg, size) < 0)
            die("client write");
        wire.len = wire.off = 0;
        if (yard_tls_take(cli, &wire) < 0)
            die("out of memory");
        /* The server's part: what the driver does for one echo. */
        uint64_t t0 = cpu_ns();
        if (yard_tls_feed(srv, yard_buf_head(&wire), wire.len) < 0)
            die("server feed");
        long n = yard_tls_read(srv, got, sizeof got);
        if (n != (long)size || yard_tls_read(srv, got + n, sizeof got - (size_t)n) != 0)
            die("the server did not read the message whole");
        back.len = back.off = 0;
        if (yard_tls_write(srv, got, (size_t)n) < 0 || yard_tls_take(srv, &back) < 0)
            die("server write");
        server_ns += cpu_ns() - t0;
        if (yard_tls_feed(cli, yard_buf_head(&back), back.len) < 0 ||
            yard_tls_read(cli, got, sizeof got) != (long)size || memcmp(got, msg, size) != 0)
            die("the echo came back wrong");
    }
    /* What reading the clock twice costs, taken off the server's figure. */
    uint64_t t0 = cpu_ns();
    for (long r = 0; r < rounds; r++)
        (void)cpu_ns();
    double clock_ns = (double)(cpu_ns() - t0) / (double)rounds;
    double layer = (double)server_ns / (double)rounds - clock_ns;
    double a128 = aead_ns("AES-128-GCM", size, rounds), a256 = aead_ns("AES-256-GCM", size, rounds);
    if (json)
        printf("{\"version\": \"%s\", \"size\": %zu, \"connections\": %ld, \"rounds\": %ld, "
               "\"server_layer_ns\": %.1f, \"aes128gcm_seal_open_ns\": %.1f, "
               "\"aes256gcm_seal_open_ns\": %.1f}\n",
               version ? version : "?", size, conns, rounds, layer, a128, a256);
    else
        printf("%s, %zu-byte messages, %ld connections, %ld rounds:\n"
               "  the server's TLS layer per echoed message (open + seal, in memory): %.0f ns\n"
               "  the AEAD alone, one seal + one open: AES-128-GCM %.0f ns, AES-256-GCM %.0f ns\n",
               version ? version : "?", size, conns, rounds, layer, a128, a256);
    for (long i = 0; i < conns; i++) {
        yard_tls_free(srvs[i]);
        yard_tls_free(clis[i]);
    }
    yard_tls_ctx_free(sctx);
    yard_tls_ctx_free(cctx);
    yard_buf_free(&wire);
    yard_buf_free(&back);
    return 0;
}
