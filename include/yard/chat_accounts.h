/* The chat service's accounts: DIR/accounts, one "name:bcrypt-hash" line
 * per account, mode 0600. Changes (yard-chat account add|remove) take an
 * OFD lock on DIR/accounts.lock, write a new file beside it, fsync it and
 * rename it over the old one, so a server reading the file at a login sees
 * the old or the new version, never half of one. Names are account names
 * and nicks at once: 1-30 characters, a letter or one of [\]^_`{|} first,
 * then also digits and '-'; compared case-insensitively (ASCII). */
#ifndef YARD_CHAT_ACCOUNTS_H
#define YARD_CHAT_ACCOUNTS_H

#include <stdbool.h>
#include <stddef.h>

#include "yard/bcrypt.h"

#define YARD_ACCOUNT_NAME_MAX 30
/* A password's bytes, at most (irctest's longest SASL password is 592).
 * bcrypt reads the first 72 of them, as every $2b$ bcrypt does (bcrypt.h). */
#define YARD_ACCOUNT_PASSWORD_MAX 600

bool yard_account_name_valid(const char *name, size_t len);
/* 0, or -errno with a message naming the file or the problem. -EEXIST: the
 * account exists; -ENOENT (remove): it does not. */
int yard_accounts_add(const char *dir, const char *name, const char *password, int cost,
                      char *err, size_t errlen);
/* count accounts at once, all or none (one lock, one rewrite of the file):
 * -EINVAL also for a name given twice. */
int yard_accounts_add_many(const char *dir, const char *const *names,
                           const char *const *passwords, size_t count, int cost, char *err,
                           size_t errlen);
int yard_accounts_remove(const char *dir, const char *name, char *err, size_t errlen);
/* Calls fn for each account, in file order. 0 or -errno. */
int yard_accounts_list(const char *dir, void (*fn)(const char *name, void *arg), void *arg,
                       char *err, size_t errlen);
/* The account's hash (and its canonical spelling, if canon is not NULL: 31
 * bytes): 0, -ENOENT, or -errno. Reads the file each time (logins are rare
 * and the file is small), so changes apply to the next login at once.
 * *max_cost (if not NULL) gets the highest bcrypt cost in the file (0 when
 * there is none), so that a login for an unknown account can cost as much
 * as one for an existing account. */
int yard_accounts_lookup(const char *dir, const char *name, size_t len,
                         char hash[YARD_BCRYPT_LEN + 1], char *canon, int *max_cost);

/* Server operators (the chat's OPER): DIR/opers, "name:bcrypt-hash" lines
 * like DIR/accounts, written the same way (under the same lock, mode
 * 0600). An operator's name is its own, not an account's; the same
 * functions as the accounts' and the same errors (-EEXIST, -ENOENT). */
int yard_opers_add(const char *dir, const char *name, const char *password, int cost, char *err,
                   size_t errlen);
int yard_opers_add_many(const char *dir, const char *const *names, const char *const *passwords,
                        size_t count, int cost, char *err, size_t errlen);
int yard_opers_remove(const char *dir, const char *name, char *err, size_t errlen);
int yard_opers_list(const char *dir, void (*fn)(const char *name, void *arg), void *arg,
                    char *err, size_t errlen);
int yard_opers_lookup(const char *dir, const char *name, size_t len,
                      char hash[YARD_BCRYPT_LEN + 1], char *canon, int *max_cost);

/* The server password (yard-serve --app chat --server-password-required):
 * DIR/server-password, one bcrypt hash on one line, mode 0600, written
 * under the accounts' lock like DIR/accounts. set replaces it (0, or
 * -errno with err); clear removes it (-ENOENT when there is none); lookup
 * reads the hash: 0, -ENOENT (no file) or -EINVAL (not a bcrypt hash). */
int yard_server_password_set(const char *dir, const char *password, int cost, char *err,
                             size_t errlen);
int yard_server_password_clear(const char *dir, char *err, size_t errlen);
int yard_server_password_lookup(const char *dir, char hash[YARD_BCRYPT_LEN + 1], char *err,
                                size_t errlen);

/* Client certificates (SASL EXTERNAL): DIR/certfps, one "SHA256 name" line
 * per certificate an account logs in with, written like DIR/accounts (under
 * the same lock, mode 0600). A fingerprint is the SHA-256 of the
 * certificate's DER bytes: 64 hex digits, colons between pairs allowed,
 * kept in lower case without them. */
#define YARD_CERTFP_LEN 64
/* fp in canonical form into out (65 bytes): 0, or -EINVAL. */
int yard_certfp_canon(const char *fp, char out[YARD_CERTFP_LEN + 1]);
/* 0, or -errno with err: -ENOENT no such account (add) or not its
 * certificate (remove); -EEXIST the certificate is listed already (for
 * this account or another: one certificate, one account). */
int yard_accounts_certfp_add(const char *dir, const char *name, const char *fp, char *err,
                             size_t errlen);
int yard_accounts_certfp_remove(const char *dir, const char *name, const char *fp, char *err,
                                size_t errlen);
/* Calls fn for each fingerprint of the account. 0 or -errno. */
int yard_accounts_certfp_list(const char *dir, const char *name,
                              void (*fn)(const char *fp, void *arg), void *arg, char *err,
                              size_t errlen);
/* The account that logs in with this certificate (canon: 31 bytes): 0,
 * -ENOENT (none, or its account is gone), or -errno. */
int yard_accounts_certfp_lookup(const char *dir, const char *fp, char *canon);

#endif
