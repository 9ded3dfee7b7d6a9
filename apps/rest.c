/* rest: the REST study's service (password set/verify with bcrypt, user info
 * get/set, a long poll) over our own HTTP/1.1 parser. Sans-I/O like every
 * app: bcrypt runs through yard_fx_offload, the long poll and the request
 * read timeout through yard_fx_wake_at, so each model decides what waiting
 * and hashing cost it (a timer in the loops, a sleeping handler in the
 * blocking models). The stores live in the shared region, guarded by
 * process-shared rwlocks, so fork and reactors --procs share them. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <crypt.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps.h"
#include "yard/bcrypt.h"
#include "yard/clock.h"
#include "yard/hash.h"
#include "yard/proto_http.h"

#define KEY_MAX 64
#define HASH_LEN YARD_BCRYPT_LEN
#define USER_VALUE_MAX 4096
/* bcrypt reads at most 72 bytes of a password: two longer passwords with the
 * same first 72 bytes would verify as each other, so longer ones are refused
 * rather than silently cut. */
#define PASSWORD_MAX 72
#define PASSWORD_TOO_LONG "Password longer than 72 bytes (bcrypt uses only the first 72)"
/* HTTP clients vanish without closing (a laptop sleeps, a NAT forgets), and
 * every silent keep-alive connection costs a process under fork and a thread
 * under thread: 300 of them once held 483 MB. A minute is longer than any
 * pause between a well-behaved client's requests and than the 5 s long poll. */
#define DEFAULT_IDLE_TIMEOUT_S 60

struct rest_slot_hdr {
    uint32_t used;
    uint32_t klen;
    uint32_t vlen;
    char key[KEY_MAX];
};

/* A fixed-capacity open-addressing table in the shared region; keys are
 * never deleted, so linear probing needs no tombstones. */
struct rest_store {
    pthread_rwlock_t lock;
    size_t slots;
    size_t count;
    size_t value_max;
    size_t slot_size;
    uint8_t *data;
};

struct rest_state {
    struct rest_store passwords;
    struct rest_store users;
    uint64_t longpoll_ns;
    uint64_t request_timeout_ns;
    int bcrypt_cost;
    char dummy_hash[HASH_LEN + 1]; /* verified against for unknown users */
};

enum rest_job_op { JOB_SET, JOB_VERIFY };

/* Everything an offloaded bcrypt job touches: nothing else. */
struct rest_job {
    int op;
    int cost;
    bool known;  /* verify: the user has a hash */
    bool ok;     /* result */
    bool keep_alive;
    int minor; /* the request's HTTP/1.<minor>, for the answer's Connection header */
    char user[KEY_MAX];
    size_t user_len;
    char hash[HASH_LEN + 1]; /* verify: stored hash in; set: new hash out */
    char password[PASSWORD_MAX + 1];
    struct crypt_data cd;
};

struct rest_session {
    uint64_t req_deadline; /* the armed timer is the request read timeout */
    uint64_t poll_due;     /* the armed timer is a long poll's answer */
    bool poll_keep_alive;
    int poll_minor;
    bool continue_sent;
    struct rest_job *job;
};

/* ---- shared stores ---------------------------------------------------- */

static int store_init(struct rest_store *s, yard_shm_t *shm, size_t slots, size_t value_max)
{
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    int r = pthread_rwlock_init(&s->lock, &a);
    pthread_rwlockattr_destroy(&a);
    if (r)
        return -1;
    s->slots = slots;
    s->value_max = value_max;
    s->slot_size = (sizeof(struct rest_slot_hdr) + value_max + 7) & ~(size_t)7;
    s->data = yard_shm_alloc(shm, s->slots * s->slot_size);
    return s->data ? 0 : -1;
}

static uint64_t hash_key(const char *k, size_t n) { return yard_fnv1a(YARD_FNV1A_INIT, k, n); }

/* The slot holding key, or the free slot where it would go; NULL when the
 * key is absent and the table is full. Caller holds the lock. */
static struct rest_slot_hdr *store_find(struct rest_store *s, const char *k, size_t n)
{
    size_t i = hash_key(k, n) % s->slots;
    for (size_t probes = 0; probes < s->slots; probes++, i = (i + 1) % s->slots) {
        struct rest_slot_hdr *h = (void *)(s->data + i * s->slot_size);
        if (!h->used || (h->klen == n && memcmp(h->key, k, n) == 0))
            return h;
    }
    return NULL;
}

/* 0 stored, -1 full. */
static int store_put(struct rest_store *s, const char *k, size_t kn, const void *v, size_t vn)
{
    pthread_rwlock_wrlock(&s->lock);
    struct rest_slot_hdr *h = store_find(s, k, kn);
    if (!h || (!h->used && s->count >= s->slots)) {
        pthread_rwlock_unlock(&s->lock);
        return -1;
    }
    if (!h->used) {
        h->used = 1;
        h->klen = (uint32_t)kn;
        memcpy(h->key, k, kn);
        s->count++;
    }
    memcpy(h + 1, v, vn);
    h->vlen = (uint32_t)vn;
    pthread_rwlock_unlock(&s->lock);
    return 0;
}

/* Copies the value into out (room for value_max); returns its length or -1. */
static long store_get(struct rest_store *s, const char *k, size_t kn, void *out)
{
    long r = -1;
    pthread_rwlock_rdlock(&s->lock);
    struct rest_slot_hdr *h = store_find(s, k, kn);
    if (h && h->used) {
        memcpy(out, h + 1, h->vlen);
        r = h->vlen;
    }
    pthread_rwlock_unlock(&s->lock);
    return r;
}

/* ---- bcrypt ----------------------------------------------------------- */

/* The offloaded job: only touches its argument. */
static void rest_bcrypt_job(void *arg)
{
    struct rest_job *j = arg;
    if (j->op == JOB_SET) {
        j->ok = yard_bcrypt_hash(j->password, j->cost, &j->cd, j->hash);
        return;
    }
    /* Constant-time compare; an unknown user was hashed against the dummy. */
    j->ok = yard_bcrypt_verify(j->password, j->hash, &j->cd) && j->known;
    explicit_bzero(j->password, sizeof j->password);
}

/* ---- responses -------------------------------------------------------- */

static void respond(yard_fx_t *fx, int status, const char *ctype, const void *body, size_t len,
                    bool keep_alive, int minor, const char *allow)
{
    char date[64], head[512];
    time_t now = (time_t)(fx->wall_ns / (int64_t)YARD_NS_PER_S);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nDate: %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "%s%s%s%s\r\n",
                     status, yard_http_reason(status), date, ctype, len,
                     keep_alive ? (minor == 0 ? "Connection: keep-alive\r\n" : "")
                                : "Connection: close\r\n",
                     allow ? "Allow: " : "", allow ? allow : "", allow ? "\r\n" : "");
    yard_fx_send(fx, head, (size_t)n);
    if (len)
        yard_fx_send(fx, body, len);
    if (!keep_alive)
        yard_fx_close(fx, NULL);
}

static void text(yard_fx_t *fx, int status, const char *msg, bool keep_alive, int minor)
{
    respond(fx, status, "text/plain", msg, strlen(msg), keep_alive, minor, NULL);
}

/* An error the connection does not survive (its framing is lost). */
static void fatal_response(yard_fx_t *fx, int status, const char *why)
{
    char msg[64];
    snprintf(msg, sizeof msg, "%s", yard_http_reason(status));
    respond(fx, status, "text/plain", msg, strlen(msg), false, 1, NULL);
    fx->close_reason = why;
}

/* ---- routing ---------------------------------------------------------- */

enum route { R_NONE, R_ROOT, R_LONGPOLL, R_PW_SET, R_PW_VERIFY, R_USER_SET, R_USER_GET };

static bool prefix(const char *p, size_t n, const char *lit, size_t *rest)
{
    size_t m = strlen(lit);
    if (n < m || memcmp(p, lit, m) != 0)
        return false;
    *rest = m;
    return true;
}

/* The route for a path (query stripped); *user points at the {user} segment. */
static int route_of(const char *p, size_t n, const char **user, size_t *user_len)
{
    static const struct {
        const char *prefix;
        int route;
    } with_user[] = {{"/password/set/", R_PW_SET},
                     {"/password/verify/", R_PW_VERIFY},
                     {"/user/set/", R_USER_SET},
                     {"/user/get/", R_USER_GET}};
    if (n == 1 && p[0] == '/')
        return R_ROOT;
    if (n == 9 && memcmp(p, "/longPoll", 9) == 0)
        return R_LONGPOLL;
    for (size_t i = 0; i < sizeof with_user / sizeof with_user[0]; i++) {
        size_t off;
        if (prefix(p, n, with_user[i].prefix, &off) && off < n && !memchr(p + off, '/', n - off)) {
            *user = p + off;
            *user_len = n - off;
            return with_user[i].route;
        }
    }
    return R_NONE;
}

static const char *route_method(int r)
{
    return (r == R_ROOT || r == R_LONGPOLL || r == R_USER_GET) ? "GET" : "POST";
}

enum body_pw { PW_OK, PW_BAD, PW_TOO_LONG };

/* Copy the "password" string of a {"password": "..."} body into out (room
 * for PASSWORD_MAX bytes and a NUL). Its length is counted in bytes of UTF-8,
 * as bcrypt counts it, after JSON escapes are decoded. */
static int body_password(const uint8_t *body, size_t len, char *out)
{
    json_error_t e;
    json_t *j = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &e);
    int r = PW_BAD;
    if (j && json_is_object(j)) {
        json_t *p = json_object_get(j, "password");
        /* A string, and no NUL inside it that C would cut it at. */
        if (json_is_string(p) && strlen(json_string_value(p)) == json_string_length(p)) {
            size_t n = json_string_length(p);
            if (n > PASSWORD_MAX) {
                r = PW_TOO_LONG;
            } else {
                memcpy(out, json_string_value(p), n + 1);
                r = PW_OK;
            }
        }
    }
    json_decref(j);
    return r;
}

/* Handle one complete request. Returns false when the connection must stop
 * taking requests for now (a job or a long poll is pending, or it closes). */
static bool handle(struct rest_state *st, struct rest_session *s, const yard_http_req_t *req,
                   const uint8_t *body, yard_fx_t *fx)
{
    bool ka = req->keep_alive;
    int minor = req->minor;
    size_t plen = req->target_len;
    const char *q = memchr(req->target, '?', plen);
    if (q)
        plen = (size_t)(q - req->target);
    const char *user = NULL;
    size_t ulen = 0;
    int r = route_of(req->target, plen, &user, &ulen);
    if (r == R_NONE) {
        text(fx, 404, "Not Found", ka, minor);
        return ka;
    }
    const char *want = route_method(r);
    if (req->method_len != strlen(want) || memcmp(req->method, want, req->method_len) != 0) {
        respond(fx, 405, "text/plain", "Method Not Allowed", 18, ka, minor, want);
        return ka;
    }
    if (user && ulen > KEY_MAX) {
        text(fx, 400, "User name too long", ka, minor);
        return ka;
    }
    switch (r) {
    case R_ROOT:
        text(fx, 200, "OK", ka, minor);
        return ka;
    case R_LONGPOLL:
        s->poll_due = fx->now_ns + st->longpoll_ns;
        s->poll_keep_alive = ka;
        s->poll_minor = minor;
        s->req_deadline = 0;
        yard_fx_wake_at(fx, s->poll_due);
        return false;
    case R_USER_GET: {
        char *v = malloc(USER_VALUE_MAX);
        long n = v ? store_get(&st->users, user, ulen, v) : -1;
        if (!v)
            text(fx, 500, "Out of memory", ka, minor);
        else if (n < 0)
            text(fx, 400, "User not found.", ka, minor);
        else
            respond(fx, 200, "application/json", v, (size_t)n, ka, minor, NULL);
        free(v);
        return ka;
    }
    case R_USER_SET: {
        json_error_t e;
        json_t *j = json_loadb((const char *)body, req->body_len, JSON_REJECT_DUPLICATES, &e);
        bool obj = j && json_is_object(j);
        json_decref(j);
        if (!obj)
            text(fx, 400, "Body must be a JSON object", ka, minor);
        else if (req->body_len > USER_VALUE_MAX)
            text(fx, 413, "User info larger than 4096 bytes", ka, minor);
        else if (store_put(&st->users, user, ulen, body, req->body_len) < 0)
            text(fx, 507, "User store full", ka, minor);
        else
            text(fx, 200, "OK", ka, minor);
        return ka;
    }
    default: /* R_PW_SET, R_PW_VERIFY */
        break;
    }
    struct rest_job *j = calloc(1, sizeof *j);
    if (!j) {
        text(fx, 500, "Out of memory", ka, minor);
        return ka;
    }
    int pw = body_password(body, req->body_len, j->password);
    if (pw != PW_OK) {
        free(j);
        /* Refused the same way for known and unknown users, before any
         * hashing: a verify of a password that no set could have stored
         * tells nothing about who exists. */
        text(fx, 400, pw == PW_TOO_LONG ? PASSWORD_TOO_LONG : "Body must be {\"password\": string}",
             ka, minor);
        return ka;
    }
    j->op = r == R_PW_SET ? JOB_SET : JOB_VERIFY;
    j->cost = st->bcrypt_cost;
    j->keep_alive = ka;
    j->minor = minor;
    memcpy(j->user, user, ulen);
    j->user_len = ulen;
    if (j->op == JOB_VERIFY) {
        char h[HASH_LEN + 1] = {0};
        j->known = store_get(&st->passwords, user, ulen, h) == HASH_LEN + 1;
        /* An unknown user is hashed against a dummy of the same cost, so
         * timing does not tell which users exist. */
        memcpy(j->hash, j->known ? h : st->dummy_hash, HASH_LEN);
    }
    s->job = j;
    s->req_deadline = 0;
    yard_fx_wake_at(fx, 0); /* the read timeout is over: the request is complete */
    yard_fx_offload(fx, rest_bcrypt_job, j);
    return false;
}

/* ---- app callbacks ---------------------------------------------------- */

struct rest_settings {
    uint64_t longpoll_ns;        /* GET /longPoll answers after this long */
    uint64_t request_timeout_ns; /* a request must be complete this long after its first byte */
    int bcrypt_cost;             /* log2 of the rounds */
    size_t store_entries;        /* capacity of each shared store */
};

static const yard_opt_t rest_opts[] = {
    {.name = "longpoll-ms", .form = "N", .type = YARD_OPT_MS,
     YARD_OPT_FIELD(struct rest_settings, longpoll_ns), .min = 0, .max = 86400000, .def = "5000",
     .help = "GET /longPoll answers after N ms"},
    {.name = "request-timeout-ms", .form = "N", .type = YARD_OPT_MS,
     YARD_OPT_FIELD(struct rest_settings, request_timeout_ns), .min = 1, .max = 3600000,
     .def = "10000", .help = "a request must be complete N ms after its first byte, else 408"},
    {.name = "bcrypt-cost", .form = "N", .type = YARD_OPT_INT,
     YARD_OPT_FIELD(struct rest_settings, bcrypt_cost), .min = 4, .max = 31, .def = "10",
     .help = "bcrypt cost, log2 of the rounds"},
    {.name = "store-entries", .form = "N", .type = YARD_OPT_INT,
     YARD_OPT_FIELD(struct rest_settings, store_entries), .min = 16, .max = 1 << 24,
     .def = "65536", .help = "capacity of each shared store (passwords, user info)"},
    YARD_OPT_END,
};

static int rest_init(void **state, const yard_config_t *cfg, const void *settings,
                     yard_shm_t *shm, char *err, size_t errlen)
{
    const struct rest_settings *set = settings;
    struct rest_state *st = yard_shm_alloc(shm, sizeof *st);
    if (!st) {
        snprintf(err, errlen, "rest: shared region exhausted");
        return -1;
    }
    size_t slots = set->store_entries;
    if (store_init(&st->passwords, shm, slots, HASH_LEN + 1) < 0 ||
        store_init(&st->users, shm, slots, USER_VALUE_MAX) < 0) {
        snprintf(err, errlen,
                 "rest: cannot allocate two stores of %zu entries in the shared region "
                 "(lower --store-entries)",
                 slots);
        return -1;
    }
    st->longpoll_ns = set->longpoll_ns;
    st->bcrypt_cost = set->bcrypt_cost;
    st->request_timeout_ns = set->request_timeout_ns;
    struct crypt_data *cd = calloc(1, sizeof *cd);
    /* The dummy's password may be known: a check against it counts only
     * for a user that exists (j->known), and its salt is fresh. Hashed at
     * cost 4 and given the configured cost after (yard_bcrypt_dummy): a check
     * against it takes the configured cost's time, and a server with a high
     * --bcrypt-cost does not spend that time once more at its start (4 s of
     * CPU at cost 16). */
    char cheap[YARD_BCRYPT_LEN + 1];
    bool ok = cd && yard_bcrypt_hash("not a password", 4, cd, cheap);
    free(cd);
    if (ok)
        yard_bcrypt_dummy(cheap, st->bcrypt_cost, st->dummy_hash);
    if (!ok) {
        snprintf(err, errlen, "rest: bcrypt ($2b$, cost %d) is not available from libcrypt",
                 st->bcrypt_cost);
        return -1;
    }
    *state = st;
    return 0;
}

static size_t rest_data(void *state, void *session, const uint8_t *in, size_t n, yard_fx_t *fx)
{
    struct rest_state *st = state;
    struct rest_session *s = session;
    size_t used = 0;
    if (s->poll_due || s->job)
        return 0; /* pipelined input waits until the pending answer is sent */
    while (used < n) {
        yard_http_req_t req;
        int r = yard_http_parse(in + used, n - used, &req);
        if (r == YARD_HTTP_ERROR) {
            fatal_response(fx, req.status, "rest: malformed or oversized request");
            return n;
        }
        if (r == YARD_HTTP_PARTIAL) {
            if (fx->eof) {
                yard_fx_close(fx, NULL); /* the peer left mid-request */
                return n;
            }
            if (req.head_len && req.expect_continue && !s->continue_sent) {
                yard_fx_send(fx, "HTTP/1.1 100 Continue\r\n\r\n", 25);
                s->continue_sent = true;
            }
            if (!s->req_deadline) {
                s->req_deadline = fx->now_ns + st->request_timeout_ns;
                yard_fx_wake_at(fx, s->req_deadline);
            }
            return used;
        }
        s->continue_sent = false;
        const uint8_t *body = req.body;
        uint8_t *copy = NULL;
        if (req.chunked) {
            copy = malloc(req.body_len + 1);
            if (!copy) {
                fatal_response(fx, 500, "rest: out of memory");
                return n;
            }
            yard_http_dechunk(in + used, &req, copy);
            body = copy;
        }
        s->req_deadline = 0;
        bool more = handle(st, s, &req, body, fx);
        free(copy);
        used += req.total_len;
        if (!req.keep_alive)
            return n; /* nothing after a closing request is read */
        if (!more)
            return used;
    }
    yard_fx_wake_at(fx, 0); /* no request in progress: no read timeout */
    return used;
}

static void rest_timer(void *state, void *session, yard_fx_t *fx)
{
    struct rest_state *st = state;
    struct rest_session *s = session;
    (void)st;
    if (s->poll_due) {
        if (fx->now_ns < s->poll_due) {
            yard_fx_wake_at(fx, s->poll_due);
            return;
        }
        s->poll_due = 0;
        text(fx, 200, "OK", s->poll_keep_alive, s->poll_minor);
        return;
    }
    if (s->req_deadline) {
        if (fx->now_ns < s->req_deadline) {
            yard_fx_wake_at(fx, s->req_deadline);
            return;
        }
        s->req_deadline = 0;
        fatal_response(fx, 408, "rest: request not complete within the read timeout");
    }
}

static void rest_job_done(void *state, void *session, void *arg, yard_fx_t *fx)
{
    struct rest_state *st = state;
    struct rest_session *s = session;
    struct rest_job *j = arg;
    bool ka = j->keep_alive;
    int minor = j->minor;
    if (j->op == JOB_SET) {
        if (!j->ok)
            text(fx, 500, "bcrypt failed", ka, minor);
        else if (store_put(&st->passwords, j->user, j->user_len, j->hash, HASH_LEN + 1) < 0)
            text(fx, 507, "Password store full", ka, minor);
        else
            text(fx, 200, "OK", ka, minor);
    } else if (!j->known) {
        text(fx, 400, "Password not found", ka, minor);
    } else {
        text(fx, j->ok ? 200 : 403, j->ok ? "OK" : "Forbidden", ka, minor);
    }
    explicit_bzero(j, sizeof *j);
    free(j);
    s->job = NULL;
}

static void rest_close(void *state, void *session, const yard_fx_t *fx)
{
    struct rest_session *s = session;
    (void)state;
    (void)fx;
    free(s->job);
    s->job = NULL;
}

const yard_app_t yard_app_rest = {
    .name = "rest",
    .summary = "REST study service over HTTP/1.1: bcrypt passwords, user info, long poll",
    .session_size = sizeof(struct rest_session),
    .default_idle_timeout_ns = DEFAULT_IDLE_TIMEOUT_S * YARD_NS_PER_S,
    .opts = rest_opts,
    .settings_size = sizeof(struct rest_settings),
    .init = rest_init,
    .data = rest_data,
    .timer = rest_timer,
    .job_done = rest_job_done,
    .close = rest_close,
};
