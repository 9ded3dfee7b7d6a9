/* yard-chat connect's insides, shared by its files (chat.h names the
 * subcommand): client.c owns the client's state, the password and the main
 * loop; client_net.c the connection and TLS; client_irc.c the lines the
 * server sends and the user types; client_ui.c the output and the terminal
 * UI. Not an interface of the tool's other subcommands. */
#ifndef YARD_CHAT_CLIENT_INT_H
#define YARD_CHAT_CLIENT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <wchar.h>
#define NCURSES_WIDECHAR 1 /* the wide-character API: get_wch, cchar_t, add_wch */
#include <curses.h>

#include "yard/net.h"
#include "yard/tls.h"

#define MAX_CHANS 32
#define SCROLLBACK 2000
#define HISTORY_PAGE 50 /* older messages fetched per page up past the buffer */

/* The client's state: one connection, its channels, the scrollback and the
 * input line (defined in client.c). */
struct client {
    const char *target_text;
    yard_addr_t addr;
    const char *user;
    char password[512];
    bool plain;
    bool utf8; /* the terminal takes UTF-8 (else ASCII and '?') */
    char chans[MAX_CHANS][64];
    int nchans;
    char current[64]; /* where plain text goes */
    int fd;
    char in[16384];
    size_t in_len;
    bool logged_in;
    int backoff_s;
    /* IRCv3 history and read markers (when the server took them) */
    bool history;                 /* batch, message-tags, draft/chathistory... granted */
    uint64_t oldest[MAX_CHANS];   /* per joined channel: the oldest msgid seen (0: none) */
    char newest[MAX_CHANS][32];   /* ... and the newest message's time, to mark read */
    bool unmarked[MAX_CHANS];     /* newest not marked read yet */
    time_t marked_at;
    char hist_chan[64];           /* a CHATHISTORY request in flight for it */
    char hist_ref[32];            /* its batch */
    char *hist_lines[HISTORY_PAGE];
    int hist_n;
    uint64_t hist_oldest;
    /* the UI */
    char *lines[SCROLLBACK];
    int nlines, scroll; /* scroll: lines up from the bottom */
    int unread;
    char input[512]; /* UTF-8, NUL-terminated */
    size_t input_len, cursor; /* bytes; the cursor is always between clusters */
    const char *status;
};
extern struct client client;

/* client_net.c: TLS (with --tls) */
extern yard_tls_ctx_t *client_tls_ctx; /* --tls */
extern yard_tls_t *client_tls;         /* the connection's, with --tls */
extern char client_tls_host[256];      /* the name the server's certificate must carry */

/* client_net.c */
void client_drop_connection(void);
int client_tls_flush(void);
void client_send_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool client_try_connect(void);
bool client_on_readable(void);

/* client_irc.c */
void client_fetch_older(void);
void client_mark_read(bool now);
void client_on_line(char *line);
bool client_user_line(char *line);

/* client_ui.c */
void client_show(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void client_ui_draw(void);
bool client_ui_key(bool fkey, wint_t ch);

#endif
