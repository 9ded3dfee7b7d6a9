/* TLS through OpenSSL 3 and two memory BIOs per connection: what arrives is
 * written into one, what is to be sent is read out of the other. See
 * include/yard/tls.h. */
#include "yard/tls.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

struct yard_tls_ctx {
    pthread_mutex_t mu; /* guards ssl: reload swaps it under new connections */
    SSL_CTX *ssl;
    char *cert_file;
    char *key_file;
};

struct yard_tls {
    SSL *ssl;
    BIO *in;  /* ciphertext that arrived, for OpenSSL to read */
    BIO *out; /* records OpenSSL wrote, to be sent */
    bool notified;
    char why[160];
};

static long failure(yard_tls_t *t, int r);

/* OpenSSL's reason for the error at the end of this thread's queue, then
 * an empty queue (SSL_get_error needs one before each call). */
static void openssl_reason(char *buf, size_t len, const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    if (!r && e) {
        char code[120];
        ERR_error_string_n(e, code, sizeof code);
        snprintf(buf, len, "%s", code);
    } else {
        snprintf(buf, len, "%s", r ? r : fallback);
    }
    ERR_clear_error();
}

/* A file the process cannot open gets the system's reason, which is
 * clearer than what OpenSSL makes of it. */
static int readable(const char *what, const char *file, char *err, size_t errlen)
{
    FILE *f = fopen(file, "r");
    if (!f) {
        snprintf(err, errlen, "%s %s: %s", what, file, strerror(errno));
        return -1;
    }
    fclose(f);
    return 0;
}

/* A client certificate is an identity (its fingerprint, listed for an
 * account), not a chain to check: any certificate is taken, and none. */
static int any_client_cert(int preverify_ok, X509_STORE_CTX *store)
{
    (void)preverify_ok, (void)store;
    return 1;
}

static SSL_CTX *build(const char *cert_file, const char *key_file, char *err, size_t errlen)
{
    char why[200];
    if (readable("--tls-cert", cert_file, err, errlen) < 0 ||
        readable("--tls-key", key_file, err, errlen) < 0)
        return NULL;
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        openssl_reason(why, sizeof why, "out of memory");
        snprintf(err, errlen, "TLS context: %s", why);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE);
    /* An idle connection gives its record buffers back. */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, any_client_cert);
    static const unsigned char sid_ctx[] = "switchyard";
    SSL_CTX_set_session_id_context(ctx, sid_ctx, sizeof sid_ctx - 1);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
        openssl_reason(why, sizeof why, "not a PEM certificate");
        snprintf(err, errlen, "--tls-cert %s: %s", cert_file, why);
    } else if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) {
        bool mismatch = ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
        openssl_reason(why, sizeof why, "not a PEM private key");
        if (mismatch)
            snprintf(err, errlen, "--tls-key %s is not the key of --tls-cert %s: %s", key_file,
                     cert_file, why);
        else
            snprintf(err, errlen, "--tls-key %s: %s", key_file, why);
    } else if (SSL_CTX_check_private_key(ctx) != 1) {
        openssl_reason(why, sizeof why, "it does not match");
        snprintf(err, errlen, "--tls-key %s is not the key of --tls-cert %s: %s", key_file,
                 cert_file, why);
    } else {
        return ctx;
    }
    SSL_CTX_free(ctx);
    return NULL;
}

int yard_tls_ctx_new(yard_tls_ctx_t **out, const char *cert_file, const char *key_file, char *err,
                     size_t errlen)
{
    *out = NULL;
    yard_tls_ctx_t *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "TLS context: out of memory");
        return -1;
    }
    pthread_mutex_init(&c->mu, NULL);
    if (!(c->cert_file = strdup(cert_file)) || !(c->key_file = strdup(key_file))) {
        snprintf(err, errlen, "TLS context: out of memory");
        yard_tls_ctx_free(c);
        return -1;
    }
    c->ssl = build(cert_file, key_file, err, errlen);
    if (!c->ssl) {
        yard_tls_ctx_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

int yard_tls_ctx_reload(yard_tls_ctx_t *c, char *err, size_t errlen)
{
    SSL_CTX *fresh = build(c->cert_file, c->key_file, err, errlen);
    if (!fresh)
        return -1;
    pthread_mutex_lock(&c->mu);
    SSL_CTX *old = c->ssl;
    c->ssl = fresh;
    pthread_mutex_unlock(&c->mu);
    SSL_CTX_free(old); /* connections made from it hold their own references */
    return 0;
}

void yard_tls_ctx_free(yard_tls_ctx_t *c)
{
    if (!c)
        return;
    SSL_CTX_free(c->ssl);
    free(c->cert_file);
    free(c->key_file);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int yard_tls_client_ctx_new(yard_tls_ctx_t **out, const char *ca_file, bool insecure,
                            const char *cert_file, const char *key_file, char *err,
                            size_t errlen)
{
    char why[200];
    *out = NULL;
    if ((cert_file == NULL) != (key_file == NULL)) {
        snprintf(err, errlen, "a client certificate needs both its file and its key's");
        return -1;
    }
    if ((ca_file && readable("the CA file", ca_file, err, errlen) < 0) ||
        (cert_file && (readable("the certificate", cert_file, err, errlen) < 0 ||
                       readable("the key", key_file, err, errlen) < 0)))
        return -1;
    yard_tls_ctx_t *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "TLS context: out of memory");
        return -1;
    }
    pthread_mutex_init(&c->mu, NULL);
    ERR_clear_error();
    c->ssl = SSL_CTX_new(TLS_client_method());
    if (!c->ssl) {
        openssl_reason(why, sizeof why, "out of memory");
        snprintf(err, errlen, "TLS context: %s", why);
        yard_tls_ctx_free(c);
        return -1;
    }
    SSL_CTX_set_min_proto_version(c->ssl, TLS1_2_VERSION);
    SSL_CTX_set_mode(c->ssl, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_verify(c->ssl, insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    int ok = 1;
    if (!insecure)
        ok = ca_file ? SSL_CTX_load_verify_locations(c->ssl, ca_file, NULL)
                     : SSL_CTX_set_default_verify_paths(c->ssl);
    if (ok != 1) {
        openssl_reason(why, sizeof why, "not a PEM certificate");
        snprintf(err, errlen, "CA file %s: %s", ca_file ? ca_file : "(the system's)", why);
    } else if (cert_file && SSL_CTX_use_certificate_chain_file(c->ssl, cert_file) != 1) {
        openssl_reason(why, sizeof why, "not a PEM certificate");
        snprintf(err, errlen, "certificate %s: %s", cert_file, why);
    } else if (key_file && SSL_CTX_use_PrivateKey_file(c->ssl, key_file, SSL_FILETYPE_PEM) != 1) {
        openssl_reason(why, sizeof why, "not a PEM private key");
        snprintf(err, errlen, "key %s: %s", key_file, why);
    } else {
        *out = c;
        return 0;
    }
    yard_tls_ctx_free(c);
    return -1;
}

yard_tls_t *yard_tls_new(yard_tls_ctx_t *ctx)
{
    yard_tls_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    pthread_mutex_lock(&ctx->mu);
    t->ssl = SSL_new(ctx->ssl);
    pthread_mutex_unlock(&ctx->mu);
    t->in = BIO_new(BIO_s_mem());
    t->out = BIO_new(BIO_s_mem());
    if (!t->ssl || !t->in || !t->out) {
        BIO_free(t->in);
        BIO_free(t->out);
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    /* An empty input BIO means "more is to come", not the end. */
    BIO_set_mem_eof_return(t->in, -1);
    SSL_set_bio(t->ssl, t->in, t->out); /* the SSL owns both now */
    SSL_set_accept_state(t->ssl);
    return t;
}

yard_tls_t *yard_tls_client_new(yard_tls_ctx_t *ctx, const char *host)
{
    yard_tls_t *t = yard_tls_new(ctx);
    if (!t)
        return NULL;
    SSL_set_connect_state(t->ssl);
    /* SNI for a name, and the name (or address) the certificate must carry. */
    bool numeric = strspn(host, "0123456789.") == strlen(host) || strchr(host, ':');
    if ((!numeric && SSL_set_tlsext_host_name(t->ssl, host) != 1) || SSL_set1_host(t->ssl, host) != 1) {
        ERR_clear_error();
        yard_tls_free(t);
        return NULL;
    }
    return t;
}

int yard_tls_handshake(yard_tls_t *t)
{
    int r = SSL_do_handshake(t->ssl);
    if (r == 1)
        return 1;
    long f = failure(t, r);
    return f == -ESHUTDOWN ? -EPROTO : (int)f;
}

void yard_tls_free(yard_tls_t *t)
{
    if (!t)
        return;
    SSL_free(t->ssl);
    free(t);
}

int yard_tls_feed(yard_tls_t *t, const uint8_t *p, size_t n)
{
    while (n) {
        int chunk = n > INT_MAX ? INT_MAX : (int)n;
        int w = BIO_write(t->in, p, chunk);
        if (w <= 0) {
            ERR_clear_error();
            return -ENOMEM;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* What a failed SSL call (its result r) means, as -errno; why is filled
 * for -EPROTO. */
static long failure(yard_tls_t *t, int r)
{
    int e = SSL_get_error(t->ssl, r);
    switch (e) {
    case SSL_ERROR_WANT_READ:
        return 0;
    case SSL_ERROR_ZERO_RETURN:
        ERR_clear_error();
        return -ESHUTDOWN;
    case SSL_ERROR_SSL: {
        char r2[120];
        openssl_reason(r2, sizeof r2, "protocol error");
        long v = SSL_get_verify_result(t->ssl);
        if (v != X509_V_OK) /* the peer's certificate: say why it was not trusted */
            snprintf(t->why, sizeof t->why, "TLS: %s (%s)", r2, X509_verify_cert_error_string(v));
        else
            snprintf(t->why, sizeof t->why, "TLS: %s", r2);
        return -EPROTO;
    }
    default:
        ERR_clear_error();
        snprintf(t->why, sizeof t->why, "TLS: unexpected state %d", e);
        return -EPROTO;
    }
}

/* This layer leaves the thread's error queue empty whenever it returns
 * (every failure path clears it), which SSL_get_error needs before each
 * call: so the per-record calls do not clear it first (1.8% of a TLS
 * echo server's time went to that). */
long yard_tls_read(yard_tls_t *t, uint8_t *buf, size_t room)
{
    int r = SSL_read(t->ssl, buf, room > INT_MAX ? INT_MAX : (int)room);
    return r > 0 ? r : failure(t, r);
}

bool yard_tls_established(const yard_tls_t *t) { return SSL_is_init_finished(t->ssl); }

bool yard_tls_resumed(const yard_tls_t *t) { return SSL_session_reused(t->ssl) == 1; }

yard_tls_session_t *yard_tls_session_take(yard_tls_t *t)
{
    SSL_SESSION *s = SSL_get1_session(t->ssl);
    if (s && !SSL_SESSION_is_resumable(s)) {
        SSL_SESSION_free(s);
        s = NULL;
    }
    return (yard_tls_session_t *)s;
}

void yard_tls_session_offer(yard_tls_t *t, yard_tls_session_t *s)
{
    if (s && SSL_set_session(t->ssl, (SSL_SESSION *)s) != 1)
        ERR_clear_error();
}

void yard_tls_session_free(yard_tls_session_t *s) { SSL_SESSION_free((SSL_SESSION *)s); }

int yard_tls_peer_fingerprint(const yard_tls_t *t, char out[65])
{
    X509 *cert = SSL_get0_peer_certificate(t->ssl);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (!cert || X509_digest(cert, EVP_sha256(), md, &len) != 1 || len != 32) {
        ERR_clear_error();
        return -ENOENT;
    }
    static const char hex[] = "0123456789abcdef";
    for (unsigned i = 0; i < len; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[64] = 0;
    return 0;
}

int yard_tls_write(yard_tls_t *t, const uint8_t *p, size_t n)
{
    while (n) {
        int r = SSL_write(t->ssl, p, n > INT_MAX ? INT_MAX : (int)n);
        if (r <= 0) {
            long f = failure(t, r);
            if (f == 0) /* wants to read first: cannot be after the handshake */
                snprintf(t->why, sizeof t->why, "TLS: writing before the handshake ended");
            return f == -ESHUTDOWN || f == 0 ? -EPROTO : (int)f;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

void yard_tls_close_notify(yard_tls_t *t)
{
    if (t->notified || !SSL_is_init_finished(t->ssl))
        return;
    t->notified = true;
    ERR_clear_error();
    SSL_shutdown(t->ssl); /* 0: sent, the peer's not yet seen; enough */
    ERR_clear_error();
}

long yard_tls_take(yard_tls_t *t, yard_buf_t *out)
{
    size_t pending = BIO_ctrl_pending(t->out);
    if (!pending)
        return 0;
    uint8_t *p = yard_buf_reserve(out, pending);
    if (!p)
        return -ENOMEM;
    int r = BIO_read(t->out, p, (int)pending);
    if (r <= 0) {
        ERR_clear_error();
        return 0;
    }
    yard_buf_commit(out, (size_t)r);
    return r;
}

const char *yard_tls_why(const yard_tls_t *t) { return t->why[0] ? t->why : "TLS: failed"; }

const char *yard_tls_version(const yard_tls_t *t)
{
    return SSL_is_init_finished(t->ssl) ? SSL_get_version(t->ssl) : NULL;
}
