/* The driver's TLS layer (src/core/tls.c) on arbitrary ciphertext: the bytes
 * arrive in two pieces, cut where the first byte says, as records arrive
 * from a socket; every plaintext byte that comes out fits the room given,
 * a failure is -EPROTO or -ESHUTDOWN with a reason, and the records to send
 * are taken each time. The server's certificate is made once, in memory,
 * and written to a private temporary directory. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "yard/tls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static yard_tls_ctx_t *ctx;

static void write_pem(const char *path, EVP_PKEY *key, X509 *cert)
{
    FILE *f = fopen(path, "w");
    if (!f || (key && !PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL)) ||
        (cert && !PEM_write_X509(f, cert)))
        abort();
    fclose(f);
}

static yard_tls_ctx_t *make_ctx(void)
{
    char dir[] = "/tmp/fuzz_tls.XXXXXX", cert_path[64], key_path[64], err[512];
    if (!mkdtemp(dir))
        abort();
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *cert = X509_new();
    if (!key || !cert)
        abort();
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), 0);
    X509_gmtime_adj(X509_getm_notAfter(cert), 86400);
    X509_set_pubkey(cert, key);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_ASC,
                               (const unsigned char *)"localhost", -1, -1, 0);
    X509_set_issuer_name(cert, X509_get_subject_name(cert));
    if (!X509_sign(cert, key, EVP_sha256()))
        abort();
    snprintf(cert_path, sizeof cert_path, "%s/cert.pem", dir);
    snprintf(key_path, sizeof key_path, "%s/key.pem", dir);
    write_pem(cert_path, NULL, cert);
    write_pem(key_path, key, NULL);
    yard_tls_ctx_t *c;
    if (yard_tls_ctx_new(&c, cert_path, key_path, err, sizeof err) < 0) {
        fprintf(stderr, "fuzz_tls: %s\n", err);
        abort();
    }
    unlink(cert_path);
    unlink(key_path);
    rmdir(dir);
    X509_free(cert);
    EVP_PKEY_free(key);
    return c;
}

/* Feed one piece and read what it gives until it asks for more. */
static int step(yard_tls_t *t, const uint8_t *p, size_t n, yard_buf_t *wire)
{
    if (yard_tls_feed(t, p, n) < 0)
        abort();
    for (;;) {
        uint8_t plain[512];
        long r = yard_tls_read(t, plain, sizeof plain);
        if (yard_tls_take(t, wire) < 0)
            abort();
        if (r > (long)sizeof plain)
            abort();
        if (r > 0)
            continue;
        if (r == 0)
            return 0;
        if (r != -EPROTO && r != -ESHUTDOWN)
            abort();
        if (r == -EPROTO && strncmp(yard_tls_why(t), "TLS: ", 5) != 0)
            abort();
        return -1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ctx)
        ctx = make_ctx();
    yard_tls_t *t = yard_tls_new(ctx);
    if (!t)
        abort();
    yard_buf_t wire = YARD_BUF_INIT;
    size_t cut = size ? (size_t)data[0] * size / 256 : 0;
    if (step(t, data, cut, &wire) == 0 && step(t, data + cut, size - cut, &wire) == 0 &&
        yard_tls_established(t)) {
        static const uint8_t hello[] = "reply";
        if (yard_tls_write(t, hello, sizeof hello) < 0 || yard_tls_take(t, &wire) <= 0)
            abort();
    }
    yard_tls_close_notify(t);
    yard_tls_take(t, &wire);
    yard_buf_free(&wire);
    yard_tls_free(t);
    return 0;
}
