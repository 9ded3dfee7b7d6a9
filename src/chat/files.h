/* The store's small text files (DIR/accounts, DIR/opers, DIR/certfps,
 * DIR/klines): read line by line, replaced whole and durably, changed under
 * one lock (accounts.c, which owns the mechanism; klines.c uses it too). */
#ifndef YARD_CHAT_FILES_H
#define YARD_CHAT_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Every line of DIR/name (less than 1 KiB each) parsed into an
 * element of size bytes of *out (*n of them; the caller frees it). -ENOENT
 * when there is no file; -EINVAL with err for a line parse refuses. */
int yard_chat_file_load(const char *dir, const char *name, size_t size,
                        bool (*parse)(char *line, void *elem), const char *expected, void **out,
                        size_t *n, char *err, size_t errlen);
/* Replace DIR/name whole, mode 0600 (a new file fsynced, renamed over the
 * old, the directory fsynced): 0 or -errno with err. */
int yard_chat_file_replace(const char *dir, const char *name,
                           void (*write_lines)(FILE *f, const void *items, size_t n),
                           const void *items, size_t n, char *err, size_t errlen);
/* Take the data directory's lock for a change (DIR/accounts.lock; the
 * directory is made if need be): a descriptor whose close releases it, or
 * -errno with err. */
int yard_chat_dir_lock(const char *dir, char *err, size_t errlen);
/* Whether password is one the store takes (1 to YARD_ACCOUNT_PASSWORD_MAX
 * bytes, no CR or LF); false with err saying so. */
bool yard_chat_password_valid(const char *password, char *err, size_t errlen);

#endif
