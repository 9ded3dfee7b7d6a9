/* Linux-only: SO_REUSEPORT. What a port uses instead: docs/portability.md. */
#define _DEFAULT_SOURCE /* SO_REUSEPORT */

#include "yard/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* yard_addr_parse and yard_addr_resolve are edge functions (they explain
 * what is wrong with a user's text): a message in err, and a -errno. */
static int fail(char *err, size_t errlen, int rc, const char *fmt, const char *arg)
{
    if (err && errlen)
        snprintf(err, errlen, fmt, arg);
    return rc;
}

static int parse_port(const char *s, size_t n, int *port)
{
    if (n == 0 || n > 5)
        return -1;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v > 65535)
        return -1;
    *port = v;
    return 0;
}

/* Splits HOST:PORT or [HOST]:PORT; host receives HOST without brackets. */
static int split_host_port(const char *text, char *host, size_t hostcap, bool *bracketed,
                           int *port, char *err, size_t errlen)
{
    const char *colon;
    size_t hostlen;
    if (!text || !*text)
        return fail(err, errlen, -EINVAL, "empty address: expected HOST:PORT%s", "");
    *bracketed = text[0] == '[';
    if (*bracketed) {
        const char *close = strchr(text, ']');
        if (!close || close[1] != ':')
            return fail(err, errlen, -EINVAL, "bad address '%s': expected [IPv6]:PORT", text);
        hostlen = (size_t)(close - text - 1);
        if (hostlen == 0 || hostlen >= hostcap)
            return fail(err, errlen, -EINVAL, "bad address '%s': bad IPv6 host", text);
        memcpy(host, text + 1, hostlen);
        colon = close + 1;
    } else {
        colon = strrchr(text, ':');
        if (!colon)
            return fail(err, errlen, -EINVAL, "bad address '%s': expected HOST:PORT", text);
        hostlen = (size_t)(colon - text);
        if (hostlen == 0 || hostlen >= hostcap)
            return fail(err, errlen, -EINVAL, "bad address '%s': missing or overlong host", text);
        memcpy(host, text, hostlen);
        if (memchr(host, ':', hostlen))
            return fail(err, errlen, -EINVAL,
                        "bad address '%s': write IPv6 hosts as [ADDR]:PORT", text);
    }
    host[hostlen] = '\0';
    if (parse_port(colon + 1, strlen(colon + 1), port) < 0)
        return fail(err, errlen, -EINVAL,
                    "bad address '%s': port must be a number from 0 to 65535", text);
    return 0;
}

static void set_v4(yard_addr_t *out, const struct in_addr *ip, int port)
{
    struct sockaddr_in *v4 = (struct sockaddr_in *)&out->ss;
    memset(out, 0, sizeof *out);
    v4->sin_family = AF_INET;
    v4->sin_addr = *ip;
    v4->sin_port = htons((uint16_t)port);
    out->len = sizeof *v4;
}

static void set_v6(yard_addr_t *out, const struct in6_addr *ip, uint32_t scope, int port)
{
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&out->ss;
    memset(out, 0, sizeof *out);
    v6->sin6_family = AF_INET6;
    v6->sin6_addr = *ip;
    v6->sin6_scope_id = scope;
    v6->sin6_port = htons((uint16_t)port);
    out->len = sizeof *v6;
}

int yard_addr_parse(const char *text, yard_addr_t *out, char *err, size_t errlen)
{
    char host[64];
    bool bracketed;
    int port;
    memset(out, 0, sizeof *out);
    int rc = split_host_port(text, host, sizeof host, &bracketed, &port, err, errlen);
    if (rc < 0)
        return rc;
    if (bracketed) {
        struct in6_addr ip6;
        if (inet_pton(AF_INET6, host, &ip6) != 1)
            return fail(err, errlen, -EINVAL, "bad address '%s': not an IPv6 address", text);
        set_v6(out, &ip6, 0, port);
        return 0;
    }
    if (strcmp(host, "localhost") == 0)
        strcpy(host, "127.0.0.1");
    struct in_addr ip4;
    if (inet_pton(AF_INET, host, &ip4) != 1)
        return fail(err, errlen, -EINVAL,
                    "bad address '%s': host must be a numeric IPv4 address, [IPv6] or localhost",
                    text);
    set_v4(out, &ip4, port);
    return 0;
}

/* getaddrinfo's failures as -errno: the resolver's own codes have no errno,
 * so the nearest one (the message in err says exactly what happened). */
static int gai_errno(int gai)
{
    switch (gai) {
    case EAI_SYSTEM:
        return errno ? -errno : -EIO;
    case EAI_MEMORY:
        return -ENOMEM;
    case EAI_AGAIN:
        return -EAGAIN;
    case EAI_FAMILY:
        return -EAFNOSUPPORT;
    default: /* EAI_NONAME, EAI_NODATA, EAI_FAIL: no such name */
        return -ENOENT;
    }
}

static bool addr_same(const yard_addr_t *a, const yard_addr_t *b)
{
    return a->len == b->len && memcmp(&a->ss, &b->ss, a->len) == 0;
}

int yard_addr_resolve(const char *text, yard_addr_list_t *out, char *err, size_t errlen)
{
    char host[256];
    bool bracketed;
    int port;
    memset(out, 0, sizeof *out);
    int rc = split_host_port(text, host, sizeof host, &bracketed, &port, err, errlen);
    if (rc < 0)
        return rc;
    struct in_addr ip4;
    if (bracketed || inet_pton(AF_INET, host, &ip4) == 1) {
        out->n = 1;
        return yard_addr_parse(text, &out->a[0], err, errlen);
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, NULL, &hints, &res);
    if (gai != 0) {
        rc = gai_errno(gai); /* before snprintf can change errno */
        char msg[320];
        snprintf(msg, sizeof msg, "cannot resolve '%s': %s", host, gai_strerror(gai));
        return fail(err, errlen, rc, "%s", msg);
    }
    out->named = true;
    /* Two passes: IPv4 first, so that the first address printed is the one
     * most clients try first. */
    for (int family = AF_INET, pass = 0; pass < 2; pass++, family = AF_INET6) {
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
            if (ai->ai_family != family || out->n == YARD_MAX_LISTEN)
                continue;
            yard_addr_t a;
            if (family == AF_INET)
                set_v4(&a, &((const struct sockaddr_in *)ai->ai_addr)->sin_addr, port);
            else
                set_v6(&a, &((const struct sockaddr_in6 *)ai->ai_addr)->sin6_addr,
                       ((const struct sockaddr_in6 *)ai->ai_addr)->sin6_scope_id, port);
            bool dup = false;
            for (int i = 0; i < out->n && !dup; i++)
                dup = addr_same(&out->a[i], &a);
            if (!dup)
                out->a[out->n++] = a;
        }
    }
    freeaddrinfo(res);
    if (out->n == 0)
        return fail(err, errlen, -EADDRNOTAVAIL, "'%s' names no IPv4 or IPv6 address", host);
    return 0;
}

void yard_addr_format(const yard_addr_t *a, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (a->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&a->ss;
        inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
        snprintf(buf, len, "[%s]:%d", host, ntohs(v6->sin6_port));
    } else if (a->ss.ss_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)&a->ss;
        inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
        snprintf(buf, len, "%s:%d", host, ntohs(v4->sin_port));
    } else {
        snprintf(buf, len, "(unknown address family %d)", a->ss.ss_family);
    }
}

int yard_addr_port(const yard_addr_t *a)
{
    if (a->ss.ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)&a->ss)->sin6_port);
    return ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
}

/* One failed step of yard_listen or yard_connect: names it, closes fd. */
static int net_fail(int fd, const char **call, const char *what)
{
    int rc = -errno;
    if (fd >= 0)
        close(fd);
    if (call)
        *call = what;
    return rc;
}

int yard_listen(const yard_addr_t *a, int backlog, bool reuseport, bool v6only, const char **call)
{
    int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return net_fail(-1, call, "socket");
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0))
        return net_fail(fd, call, "setsockopt SO_REUSEADDR/SO_REUSEPORT");
    int v6 = v6only ? 1 : 0;
    if (a->ss.ss_family == AF_INET6 &&
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6, sizeof v6) < 0)
        return net_fail(fd, call, "setsockopt IPV6_V6ONLY");
    if (bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0)
        return net_fail(fd, call, "bind");
    if (listen(fd, backlog) < 0)
        return net_fail(fd, call, "listen");
    return fd;
}

void yard_net_message(char *buf, size_t len, const yard_addr_t *a, const char *call, int rc)
{
    char where[YARD_ADDR_STRLEN];
    yard_addr_format(a, where, sizeof where);
    if (strcmp(call, "bind") == 0 || strcmp(call, "listen") == 0)
        snprintf(buf, len, "cannot listen on %s: %s: %s", where, call, strerror(-rc));
    else if (strcmp(call, "connect") == 0)
        snprintf(buf, len, "connect to %s: %s", where, strerror(-rc));
    else
        snprintf(buf, len, "%s: %s", call, strerror(-rc));
}

int yard_sock_name(int fd, yard_addr_t *out)
{
    out->len = sizeof out->ss;
    return getsockname(fd, (struct sockaddr *)&out->ss, &out->len) < 0 ? -errno : 0;
}

int yard_peer_name(int fd, yard_addr_t *out)
{
    out->len = sizeof out->ss;
    return getpeername(fd, (struct sockaddr *)&out->ss, &out->len) < 0 ? -errno : 0;
}

int yard_connect(const yard_addr_t *a, bool nonblock, const char **call)
{
    int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return net_fail(-1, call, "socket");
    int rc;
    do
        rc = connect(fd, (const struct sockaddr *)&a->ss, a->len);
    while (rc < 0 && errno == EINTR && !nonblock);
    if (rc < 0 && !(nonblock && errno == EINPROGRESS))
        return net_fail(fd, call, "connect");
    return fd;
}

int yard_set_nodelay(int fd)
{
    int one = 1;
    return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0 ? -errno : 0;
}

int yard_write_all(int fd, const void *p, size_t n)
{
    const uint8_t *s = p;
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}
