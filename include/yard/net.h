/* Addresses and sockets, under the error convention (docs/architecture.md,
 * Errors): every call that can fail returns 0 (or an fd) on success and
 * -errno on failure. yard_listen and yard_connect also name the failed call
 * in *call, and yard_net_message turns that into the text the programs show.
 * yard_addr_parse and yard_addr_resolve are edge functions: they explain
 * what is wrong with a user's text in an err buffer, besides the -errno. */
#ifndef YARD_NET_H
#define YARD_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

typedef struct yard_addr {
    struct sockaddr_storage ss;
    socklen_t len;
} yard_addr_t;

/* Longest text yard_addr_format produces, "[v6]:65535" plus NUL. */
#define YARD_ADDR_STRLEN 64

/* Parse "HOST:PORT" where HOST is a numeric IPv4 address, "[IPv6]" or
 * "localhost" (127.0.0.1). PORT is 0..65535; 0 asks the kernel for a free
 * port. Pure: no name lookup, no I/O. 0, or -EINVAL with err saying what is
 * wrong with the text. */
int yard_addr_parse(const char *text, yard_addr_t *out, char *err, size_t errlen);
/* Every address a listening HOST:PORT names, at most YARD_MAX_LISTEN. */
#define YARD_MAX_LISTEN 8
typedef struct yard_addr_list {
    int n;
    bool named; /* HOST was a name (resolved), not a numeric address */
    yard_addr_t a[YARD_MAX_LISTEN];
} yard_addr_list_t;

/* Like yard_addr_parse, except that a HOST that is not numeric is a name
 * resolved with getaddrinfo (the system's resolver: /etc/hosts, DNS), and
 * every address it names is kept: "localhost:P" is 127.0.0.1 and ::1 where
 * the hosts file says both. IPv4 addresses come first, duplicates are
 * dropped. Not pure: a name lookup may block. 0, or with err set: -EINVAL
 * (bad text), -ENOENT (no such name), -EADDRNOTAVAIL (a name with no IPv4 or
 * IPv6 address), or the resolver's failure as the nearest -errno (-EAGAIN,
 * -ENOMEM, the system call's). */
int yard_addr_resolve(const char *text, yard_addr_list_t *out, char *err, size_t errlen);
/* "127.0.0.1:8080" or "[::1]:8080". */
void yard_addr_format(const yard_addr_t *a, char *buf, size_t len);
int yard_addr_port(const yard_addr_t *a);

/* A non-blocking listening TCP socket (SO_REUSEADDR, and SO_REUSEPORT when
 * asked so that several listeners can share a port). */
/* An IPv6 listener gets IPV6_V6ONLY set explicitly, to v6only, never left
 * to the platform's default (FreeBSD's is 1, Linux's 0): [::] with v6only
 * false takes IPv4 clients too (dual-stack). */
/* The fd, or -errno of the failing call, which *call then names ("socket",
 * "setsockopt ...", "bind", "listen"; call may be NULL). */
int yard_listen(const yard_addr_t *a, int backlog, bool reuseport, bool v6only, const char **call);
/* The address a socket is bound to (to learn the port the kernel chose):
 * 0 or -errno. */
int yard_sock_name(int fd, yard_addr_t *out);
int yard_peer_name(int fd, yard_addr_t *out);
/* Connect (blocking or not); a non-blocking connect may still be in
 * progress. The fd, or -errno with *call "socket" or "connect". */
int yard_connect(const yard_addr_t *a, bool nonblock, const char **call);
/* The text for a failed yard_listen or yard_connect, for the edge to show:
 * "cannot listen on 127.0.0.1:80: bind: Permission denied", "connect to
 * 127.0.0.1:9: Connection refused", "socket: ...". */
void yard_net_message(char *buf, size_t len, const yard_addr_t *a, const char *call, int rc);

/* 0 or -errno. */
int yard_set_nodelay(int fd);
/* Write everything, retrying on EINTR and partial writes (blocking fds):
 * 0 or -errno (what was written before the failure is not told). */
int yard_write_all(int fd, const void *p, size_t n);

#endif
