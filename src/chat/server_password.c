/* The chat's server password, DIR/server-password (include/yard/chat_accounts.h):
 * one bcrypt hash, kept with the mechanism of the store's other files
 * (files.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
#include "yard/chat_accounts.h"

#define SERVER_PASSWORD_FILE "server-password"

struct hash_line {
    char hash[YARD_BCRYPT_LEN + 1];
};

static bool hash_line(char *line, void *elem)
{
    struct hash_line *h = elem;
    if (strlen(line) != YARD_BCRYPT_LEN || !yard_bcrypt_cost(line))
        return false;
    memcpy(h->hash, line, YARD_BCRYPT_LEN + 1);
    return true;
}

static void hash_lines(FILE *f, const void *items, size_t n)
{
    const struct hash_line *h = items;
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\n", h[i].hash);
}

int yard_server_password_set(const char *dir, const char *password, int cost, char *err,
                             size_t errlen)
{
    if (!yard_chat_password_valid(password, err, errlen))
        return -EINVAL;
    struct hash_line h;
    struct crypt_data *cd = calloc(1, sizeof *cd);
    bool ok = cd && yard_bcrypt_hash(password, cost, cd, h.hash);
    free(cd);
    if (!ok) {
        snprintf(err, errlen, "bcrypt failed (cost %d: 4..31)", cost);
        return -EINVAL;
    }
    int lk = yard_chat_dir_lock(dir, err, errlen);
    if (lk < 0)
        return lk;
    int rc = yard_chat_file_replace(dir, SERVER_PASSWORD_FILE, hash_lines, &h, 1, err, errlen);
    close(lk);
    return rc;
}

int yard_server_password_clear(const char *dir, char *err, size_t errlen)
{
    int lk = yard_chat_dir_lock(dir, err, errlen);
    if (lk < 0)
        return lk;
    char path[4200];
    snprintf(path, sizeof path, "%.4000s/" SERVER_PASSWORD_FILE, dir);
    int rc = unlink(path) < 0 ? -errno : 0;
    if (rc == -ENOENT)
        snprintf(err, errlen, "no server password in %.4000s", dir);
    else if (rc)
        snprintf(err, errlen, "unlink %s: %s", path, strerror(-rc));
    close(lk);
    return rc;
}

int yard_server_password_lookup(const char *dir, char hash[YARD_BCRYPT_LEN + 1], char *err,
                                size_t errlen)
{
    void *lines;
    size_t n;
    int rc = yard_chat_file_load(dir, SERVER_PASSWORD_FILE, sizeof(struct hash_line), hash_line,
                                 "a bcrypt hash ($2b$...)", &lines, &n, err, errlen);
    if (!rc && n != 1) {
        snprintf(err, errlen, "%.4000s/" SERVER_PASSWORD_FILE ": expected one bcrypt hash, "
                              "found %zu lines", dir, n);
        rc = -EINVAL;
    }
    if (!rc)
        memcpy(hash, ((struct hash_line *)lines)->hash, YARD_BCRYPT_LEN + 1);
    free(lines);
    return rc;
}
