/* http mode: the REST study's scenarios over keep-alive HTTP/1.1
 * connections, through the engine (open loop at --rate, or closed loop
 * with --users N and --think-time, like Locust).
 *
 * Each connection is one user. Scenarios: `password` (set the user's
 * password, then verify it), `userinfo` (set the user's info, then get it),
 * `longpoll`, `root`, and `mix` (a task drawn per round from --weights).
 * Users and passwords come from --users-csv (`username;password` per line,
 * the study's format) or are generated (user<N>, pw<N>). Every response is
 * parsed (status line, Content-Length or chunked body); 2xx counts as a
 * success, anything else as a failure of that endpoint, and a response that
 * is not HTTP closes the connection as an error. Per endpoint: requests,
 * successes, failures, status codes and a latency histogram. */
#define _GNU_SOURCE /* memmem */

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "load.h"
#include "yard/clock.h"

enum task { T_PASSWORD, T_USERINFO, T_LONGPOLL, T_ROOT, T_COUNT };
static const char *const task_names[T_COUNT] = {"password", "userinfo", "longpoll", "root"};
/* The endpoints, in the order of http_result.ep. */
enum ep { E_PW_SET, E_PW_VERIFY, E_USER_SET, E_USER_GET, E_LONGPOLL, E_ROOT, E_COUNT };
static const char *const ep_names[E_COUNT] = {
    "password_set", "password_verify", "user_set", "user_get", "longpoll", "root"};

/* Its part of a result: per endpoint, counts merged across threads like the rest. */
#define STATUS_SLOTS 8
struct endpoint {
    uint64_t requests, ok, failed;
    int status_code[STATUS_SLOTS];
    uint64_t status_count[STATUS_SLOTS];
    uint64_t status_other; /* codes beyond the slots */
    yard_hist_t latency;
};

struct http_result {
    struct endpoint ep[E_COUNT];
};

#define HEAD_MAX 8192
#define NAME_MAX_LEN 64
#define LOAD_HTTP_REQ_MAX 1024

struct user {
    char name[NAME_MAX_LEN + 1], password[NAME_MAX_LEN + 1];
};

/* Its settings: filled by its flags, completed once by http_prepare,
 * read-only while threads run. */
struct http_settings {
    const char *scenario;  /* --scenario */
    const char *weights;   /* --weights as given, or NULL */
    const char *users_csv; /* --users-csv, or NULL */
    uint64_t think_ns;     /* closed loop: pause between a reply and the next request */
    /* Derived by prepare. */
    struct user *users;    /* from --users-csv (n of them), or none */
    size_t n;
    double weights_cum[T_COUNT]; /* cumulative, normalised to 1 */
    char host[128];
};

struct hconn {
    const struct http_settings *s;
    int id;
    uint64_t rng;
    struct user u;
    enum task task;  /* of the current round; T_COUNT: draw a new one */
    int step;        /* 0: its first request, 1: its second */
    int status;      /* of the reply being read */
    /* response parser */
    int state;       /* 0 head, 1 body by length, 2 chunk size line, 3 chunk data, 4 chunk CRLF,
                      * 5 trailers */
    size_t head_len;
    uint64_t body_left;
    char head[HEAD_MAX];
};

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static struct endpoint *endpoint(load_result_t *r, uint32_t tag)
{
    return &((struct http_result *)r->mode)->ep[tag];
}

static void count_status(struct endpoint *e, int status, uint64_t n)
{
    for (int k = 0; k < STATUS_SLOTS; k++) {
        if (e->status_code[k] == status || !e->status_code[k]) {
            e->status_code[k] = status;
            e->status_count[k] += n;
            return;
        }
    }
    e->status_other += n;
}

static int parse_weights(const char *spec, double w[T_COUNT], char *err, size_t errlen)
{
    char *copy = strdup(spec), *save = NULL;
    if (!copy)
        return -1;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        double v = 1;
        if (eq) {
            *eq = 0;
            char *end;
            v = strtod(eq + 1, &end);
            if (end == eq + 1 || *end || !(v >= 0)) {
                snprintf(err, errlen, "--weights: '%s' needs a number >= 0 after '='", tok);
                free(copy);
                return -1;
            }
        }
        int t = -1;
        for (int i = 0; i < T_COUNT; i++)
            if (!strcmp(tok, task_names[i]))
                t = i;
        if (t < 0) {
            snprintf(err, errlen, "--weights: unknown task '%s' (password, userinfo, longpoll, "
                                  "root)",
                     tok);
            free(copy);
            return -1;
        }
        w[t] = v;
    }
    free(copy);
    return 0;
}

static int read_users(struct http_settings *s, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "--users-csv %s: %s", path, strerror(errno));
        return -1;
    }
    char line[512];
    size_t cap = 0, lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0] || line[0] == '#')
            continue;
        char *semi = strchr(line, ';');
        size_t nl = semi ? (size_t)(semi - line) : 0, pl = semi ? strlen(semi + 1) : 0;
        bool ok = semi && nl >= 1 && nl <= NAME_MAX_LEN && pl >= 1 && pl <= NAME_MAX_LEN;
        for (size_t i = 0; ok && i < nl; i++)
            ok = isalnum((unsigned char)line[i]) || line[i] == '_' || line[i] == '-' ||
                 line[i] == '.';
        for (size_t i = 0; ok && i < pl; i++)
            ok = semi[1 + i] != '"' && semi[1 + i] != '\\' && (unsigned char)semi[1 + i] >= 0x20;
        if (!ok) {
            if (lineno == 1 && !semi)
                continue; /* a header line such as "username;password" has a ';' too: see below */
            snprintf(err, errlen,
                     "--users-csv %s:%zu: expected 'username;password' (name: 1-64 of "
                     "[A-Za-z0-9_.-], password: 1-64 printable bytes without '\"' or '\\')",
                     path, lineno);
            fclose(f);
            return -1;
        }
        if (lineno == 1 && !strcmp(line, "username;password"))
            continue;
        if (s->n == cap) {
            cap = cap ? cap * 2 : 64;
            struct user *u = realloc(s->users, cap * sizeof *u);
            if (!u) {
                fclose(f);
                snprintf(err, errlen, "out of memory reading --users-csv");
                return -1;
            }
            s->users = u;
        }
        struct user *u = &s->users[s->n++];
        memcpy(u->name, line, nl);
        u->name[nl] = 0;
        memcpy(u->password, semi + 1, pl);
        u->password[pl] = 0;
    }
    fclose(f);
    if (!s->n) {
        snprintf(err, errlen, "--users-csv %s: no users in it", path);
        return -1;
    }
    return 0;
}

/* Check the scenario and weights, read --users-csv; once, before the
 * threads start. */
static int http_prepare(load_opts_t *o, char *err, size_t errlen)
{
    struct http_settings *s = o->settings;
    if (s->think_ns && o->rate > 0) {
        snprintf(err, errlen,
                 "--think-time is for the closed loop; --rate sets the open loop's pace");
        return -1;
    }
    const char *sc = s->scenario;
    const char *weights = s->weights;
    double w[T_COUNT] = {0};
    if (!strcmp(sc, "mix")) {
        w[T_PASSWORD] = w[T_USERINFO] = w[T_ROOT] = 1;
        if (weights) {
            memset(w, 0, sizeof w);
            if (parse_weights(weights, w, err, errlen) < 0)
                return -1;
        }
    } else {
        int t = -1;
        for (int i = 0; i < T_COUNT; i++)
            if (!strcmp(sc, task_names[i]))
                t = i;
        if (t < 0) {
            snprintf(err, errlen, "--scenario: expected password, userinfo, longpoll, root or "
                                  "mix, got '%s'",
                     sc);
            return -1;
        }
        if (weights) {
            snprintf(err, errlen, "--weights belongs to --scenario mix");
            return -1;
        }
        w[t] = 1;
    }
    double sum = 0;
    for (int i = 0; i < T_COUNT; i++)
        sum += w[i];
    if (!(sum > 0)) {
        snprintf(err, errlen, "--weights: at least one task needs a weight above 0");
        return -1;
    }
    double acc = 0;
    for (int i = 0; i < T_COUNT; i++) {
        acc += w[i] / sum;
        s->weights_cum[i] = acc;
    }
    s->weights_cum[T_COUNT - 1] = 1.0;
    if (s->users_csv && read_users(s, s->users_csv, err, errlen) < 0)
        return -1;
    snprintf(s->host, sizeof s->host, "%s", o->target_text);
    return 0;
}

static enum task draw(struct hconn *c)
{
    double x = (double)(xorshift(&c->rng) >> 11) / (double)(1ull << 53);
    for (int i = 0; i < T_COUNT; i++)
        if (x < c->s->weights_cum[i])
            return (enum task)i;
    return T_ROOT;
}

static int http_init(void *priv, int id, const load_opts_t *o, load_result_t *r)
{
    const struct http_settings *s = o->settings;
    struct hconn *c = priv;
    c->s = s;
    c->id = id;
    c->rng = 0x9E3779B97F4A7C15ull * (uint64_t)(id + 1);
    c->task = T_COUNT;
    if (s->n) {
        c->u = s->users[(size_t)id % s->n];
    } else {
        snprintf(c->u.name, sizeof c->u.name, "user%d", id);
        snprintf(c->u.password, sizeof c->u.password, "pw%d-secret", id);
    }
    return 0;
}

static size_t post(const struct hconn *c, uint8_t *buf, const char *path, const char *user,
                   const char *body)
{
    int n = snprintf((char *)buf, LOAD_HTTP_REQ_MAX,
                     "POST %s%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     path, user, c->s->host, strlen(body), body);
    return (size_t)n;
}

static size_t get(const struct hconn *c, uint8_t *buf, const char *path, const char *user)
{
    int n = snprintf((char *)buf, LOAD_HTTP_REQ_MAX, "GET %s%s HTTP/1.1\r\nHost: %s\r\n\r\n",
                     path, user, c->s->host);
    return (size_t)n;
}

/* A round is one task: password and userinfo are two requests (set, then
 * verify or get, on the same connection, so in that order at the server),
 * longpoll and root one. Requests may be built ahead of replies
 * (--pipeline): the sequence does not depend on them. */
static size_t http_request(void *priv, uint64_t seq, uint8_t *buf, uint32_t *tag, load_result_t *r)
{
    struct hconn *c = priv;
    char body[256];
    if (c->task == T_COUNT) {
        c->task = draw(c);
        c->step = 0;
    }
    const char *name = c->u.name;
    size_t len = 0;
    switch (c->task) {
    case T_PASSWORD:
        snprintf(body, sizeof body, "{\"password\": \"%s\"}", c->u.password);
        *tag = c->step == 0 ? E_PW_SET : E_PW_VERIFY;
        len = post(c, buf, c->step == 0 ? "/password/set/" : "/password/verify/", name, body);
        break;
    case T_USERINFO:
        if (c->step == 0) {
            snprintf(body, sizeof body,
                     "{\"name\": \"%s\", \"email\": \"%s@example.org\", \"visits\": %llu}", name,
                     name, (unsigned long long)seq);
            *tag = E_USER_SET;
            len = post(c, buf, "/user/set/", name, body);
        } else {
            *tag = E_USER_GET;
            len = get(c, buf, "/user/get/", name);
        }
        break;
    case T_LONGPOLL:
        *tag = E_LONGPOLL;
        len = get(c, buf, "/longPoll", "");
        break;
    default:
        *tag = E_ROOT;
        len = get(c, buf, "/", "");
        break;
    }
    bool two = c->task == T_PASSWORD || c->task == T_USERINFO;
    if (two && c->step == 0)
        c->step = 1;
    else
        c->task = T_COUNT;
    endpoint(r, *tag)->requests++;
    return len;
}

static bool header_is(const char *line, size_t n, const char *name, const char **value)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return false;
    const char *v = line + k + 1;
    while (v < line + n && (*v == ' ' || *v == '\t'))
        v++;
    *value = v;
    return true;
}

/* The head is complete (c->head, c->head_len, ending in CRLF CRLF): status
 * and framing. -1 when it is not an HTTP/1.x response we can frame. */
static int parse_head(struct hconn *c, load_result_t *r)
{
    const char *h = c->head;
    if (c->head_len < 12 || strncmp(h, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)h[9]) ||
        !isdigit((unsigned char)h[10]) || !isdigit((unsigned char)h[11])) {
        load_error(r, "connection %d: not an HTTP/1.x status line: '%.40s'", c->id, h);
        return -1;
    }
    c->status = (h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0');
    bool chunked = false, have_len = false;
    uint64_t len = 0;
    const char *stop = h + c->head_len;
    const char *line = (const char *)memmem(h, c->head_len, "\r\n", 2) + 2;
    while (line < stop - 2) {
        const char *end = memmem(line, (size_t)(stop - line), "\r\n", 2);
        const char *v;
        if (header_is(line, (size_t)(end - line), "content-length", &v)) {
            char *e;
            errno = 0;
            len = strtoull(v, &e, 10);
            if (errno || e == v || (e != end && *e != ' ' && *e != '\t')) {
                load_error(r, "connection %d: bad Content-Length", c->id);
                return -1;
            }
            have_len = true;
        } else if (header_is(line, (size_t)(end - line), "transfer-encoding", &v)) {
            chunked = strncasecmp(v, "chunked", 7) == 0;
        }
        line = end + 2;
    }
    if (c->status / 100 == 1) { /* an interim response: the real one follows */
        c->head_len = 0;
        c->state = 0;
        return 0;
    }
    if (chunked) {
        c->state = 2;
        c->head_len = 0; /* the head buffer now collects chunk-size lines */
    } else if (have_len || c->status == 204 || c->status == 304) {
        c->state = 1;
        c->body_left = have_len ? len : 0;
    } else {
        load_error(r, "connection %d: a response without Content-Length or chunked framing "
                      "(status %d); keep-alive needs one",
                   c->id, c->status);
        return -1;
    }
    return 0;
}

/* Feed bytes of the current response: 1 complete, 0 more, -1 error. */
static int http_reply(void *priv, uint64_t seq, uint32_t tag, const uint8_t *p, size_t n,
                      size_t *used, load_result_t *r)
{
    struct hconn *c = priv;
    size_t i = 0;
    while (i < n) {
        if (c->state == 0 || c->state == 2 || c->state == 4 || c->state == 5) {
            /* Collect a line (or the head) in c->head: the bytes up to and
             * including the next LF at once, since only a line's end is
             * looked at. */
            size_t room = sizeof c->head - 1 - c->head_len;
            if (room == 0) {
                load_error(r, "connection %d: response head or chunk line over %d bytes", c->id,
                           HEAD_MAX);
                return -1;
            }
            const uint8_t *lf = memchr(p + i, '\n', n - i);
            size_t take = lf ? (size_t)(lf - (p + i)) + 1 : n - i;
            if (take > room)
                take = room;
            memcpy(c->head + c->head_len, p + i, take);
            i += take;
            c->head_len += take;
            c->head[c->head_len] = 0;
            size_t L = c->head_len;
            if (L < 2 || c->head[L - 2] != '\r' || c->head[L - 1] != '\n')
                continue;
            if (c->state == 0) {
                if (L < 4 || memcmp(c->head + L - 4, "\r\n\r\n", 4) != 0)
                    continue;
                if (parse_head(c, r) < 0)
                    return -1;
                if (c->state == 1 && c->body_left == 0)
                    goto done;
            } else if (c->state == 2) {
                char *e;
                unsigned long long sz = strtoull(c->head, &e, 16);
                if (e == c->head || (*e != '\r' && *e != ';')) {
                    load_error(r, "connection %d: bad chunk size line", c->id);
                    return -1;
                }
                c->head_len = 0;
                c->body_left = sz;
                c->state = sz ? 3 : 5;
            } else if (c->state == 4) {
                if (L != 2) {
                    load_error(r, "connection %d: chunk data not followed by CRLF", c->id);
                    return -1;
                }
                c->head_len = 0;
                c->state = 2;
            } else { /* trailers end with an empty line */
                bool empty = L == 2;
                c->head_len = 0;
                if (empty)
                    goto done;
            }
        } else { /* body bytes: 1 (by length) or 3 (chunk data) */
            size_t take = n - i < c->body_left ? n - i : (size_t)c->body_left;
            i += take;
            c->body_left -= take;
            if (c->body_left == 0) {
                if (c->state == 1)
                    goto done;
                c->state = 4;
            }
        }
    }
    *used = i;
    return 0;
done:
    *used = i;
    c->state = 0;
    c->head_len = 0;
    struct endpoint *e = endpoint(r, tag);
    if (c->status / 100 == 2) {
        e->ok++;
    } else {
        e->failed++;
        r->errors++;
        if (!r->first_error[0])
            load_error(r, "%s for user %s answered %d", ep_names[tag], c->u.name, c->status);
    }
    count_status(e, c->status, 1);
    return 1;
}

static void http_completed(void *priv, uint32_t tag, uint64_t latency_ns, load_result_t *r)
{
    yard_hist_record(&endpoint(r, tag)->latency, latency_ns);
}

static int http_run(const load_opts_t *o, load_result_t *r)
{
    const struct http_settings *s = o->settings;
    load_proto_t p = {.priv_size = sizeof(struct hconn), .max_request = LOAD_HTTP_REQ_MAX,
                      .think_ns = s->think_ns, .conn_init = http_init,
                      .request = http_request, .reply = http_reply, .completed = http_completed};
    return load_engine_run(o, &p, r);
}

static void http_result_init(void *part)
{
    struct http_result *hr = part;
    for (int i = 0; i < E_COUNT; i++)
        yard_hist_init(&hr->ep[i].latency);
}

static void http_merge(void *into, const void *from, bool first)
{
    for (int i = 0; i < E_COUNT; i++) {
        struct endpoint *a = &((struct http_result *)into)->ep[i];
        const struct endpoint *b = &((const struct http_result *)from)->ep[i];
        a->requests += b->requests;
        a->ok += b->ok;
        a->failed += b->failed;
        a->status_other += b->status_other;
        for (int k = 0; k < STATUS_SLOTS && b->status_code[k]; k++)
            count_status(a, b->status_code[k], b->status_count[k]);
        yard_hist_merge(&a->latency, &b->latency);
    }
}

static double us(uint64_t ns) { return (double)ns / 1000.0; }

/* Per endpoint that was used: its counts, its status codes, its latency. */
static void http_text_tail(const load_report_t *rep)
{
    const struct http_result *hr = rep->r->mode;
    for (int i = 0; i < E_COUNT; i++) {
        const struct endpoint *e = &hr->ep[i];
        if (!e->requests)
            continue;
        printf("  %-15s %llu ok, %llu failed; p50 %.1f us  p99 %.1f us  max %.1f us; status",
               ep_names[i], (unsigned long long)e->ok, (unsigned long long)e->failed,
               us(yard_hist_percentile(&e->latency, 50)),
               us(yard_hist_percentile(&e->latency, 99)),
               us(yard_hist_percentile(&e->latency, 100)));
        for (int k = 0; k < STATUS_SLOTS && e->status_code[k]; k++)
            printf(" %d x%llu", e->status_code[k], (unsigned long long)e->status_count[k]);
        printf("\n");
    }
}

static void json_endpoint(const struct endpoint *e)
{
    printf("{\"requests\": %llu, \"ok\": %llu, \"failed\": %llu, \"status\": {",
           (unsigned long long)e->requests, (unsigned long long)e->ok,
           (unsigned long long)e->failed);
    for (int k = 0; k < STATUS_SLOTS && e->status_code[k]; k++)
        printf("%s\"%d\": %llu", k ? ", " : "", e->status_code[k],
               (unsigned long long)e->status_count[k]);
    if (e->status_other)
        printf("%s\"other\": %llu", e->status_code[0] ? ", " : "",
               (unsigned long long)e->status_other);
    const yard_hist_t *h = &e->latency;
    printf("}, \"latency_us\": {\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, "
           "\"max\": %.3f, \"mean\": %.3f}}",
           us(yard_hist_percentile(h, 50)), us(yard_hist_percentile(h, 90)),
           us(yard_hist_percentile(h, 99)), us(yard_hist_percentile(h, 100)),
           yard_hist_mean(h) / 1000.0);
}

static void http_json(const load_report_t *rep)
{
    const struct http_settings *s = rep->o->settings;
    const struct http_result *hr = rep->r->mode;
    printf("\"scenario\": \"%s\", \"think_time_s\": %.3f, ",
           s->scenario, (double)s->think_ns / 1e9);
    printf("\"endpoints\": {");
    bool first = true;
    for (int i = 0; i < E_COUNT; i++) {
        if (!hr->ep[i].requests)
            continue;
        printf("%s\"%s\": ", first ? "" : ", ", ep_names[i]);
        json_endpoint(&hr->ep[i]);
        first = false;
    }
    printf("}, ");
}

#define HTTP(member) YARD_OPT_FIELD(struct http_settings, member)

/* --scenario and --weights are checked together by http_prepare: a weight
 * list means something only for mix. */
static const yard_opt_t http_opts[] = {
    {.name = "scenario", .form = "S", .type = YARD_OPT_STRING, HTTP(scenario), .def = "root",
     .help = "password, userinfo, longpoll, root or mix"},
    {.name = "weights", .form = "LIST", .type = YARD_OPT_STRING, HTTP(weights),
     .help = "mix: e.g. userinfo=3,password=1 (default: password, userinfo and root equally)"},
    {.name = "users-csv", .form = "FILE", .type = YARD_OPT_STRING, HTTP(users_csv),
     .help = "'username;password' per line (the study's file); default: user<N> with password "
             "pw<N>-secret"},
    {.name = "think-time", .form = "DUR", .type = YARD_OPT_DURATION, HTTP(think_ns),
     .unit_ns = YARD_NS_PER_S, .def = "0", .help = "closed loop: pause after each reply"},
    YARD_OPT_END,
};

/* What common flags mean here. */
static const yard_opt_t http_notes[] = {
    {.name = "users", .form = "N", .help = "one user per connection: the same as --connections"},
    YARD_OPT_END,
};

const load_mode_t load_mode_http = {
    .name = "http",
    .engine = true,
    .summary = "the REST study's scenarios over keep-alive HTTP/1.1 (open or closed loop)",
    .opts = http_opts,
    .settings_size = sizeof(struct http_settings),
    .notes = http_notes,
    .prepare = http_prepare,
    .run = http_run,
    .result_size = sizeof(struct http_result),
    .result_init = http_result_init,
    .merge = http_merge,
    .text_tail = http_text_tail,
    .json = http_json,
};
