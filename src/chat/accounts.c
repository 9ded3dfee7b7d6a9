/* Linux-only: OFD locks. What a port uses instead: docs/portability.md. */
/* The chat service's account file (include/yard/chat_accounts.h). */
#define _GNU_SOURCE /* F_OFD_SETLKW (open file description locks) */

#include "yard/chat_accounts.h"

#include "files.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static bool special(char c) { return c && strchr("[\\]^_`{|}", c) != NULL; }

bool yard_account_name_valid(const char *name, size_t len)
{
    if (len < 1 || len > YARD_ACCOUNT_NAME_MAX)
        return false;
    if (!isalpha((unsigned char)name[0]) && !special(name[0]))
        return false;
    for (size_t i = 1; i < len; i++)
        if (!isalnum((unsigned char)name[i]) && !special(name[i]) && name[i] != '-')
            return false;
    return true;
}

struct entry {
    char name[YARD_ACCOUNT_NAME_MAX + 1];
    char hash[YARD_BCRYPT_LEN + 1];
};

/* Every line of DIR/name, each turned by parse into an element of size
 * bytes appended to *out (*n of them). -ENOENT when there is no file yet
 * (an empty list for the callers that change it). A line parse refuses is
 * an error, -EINVAL with err naming the file, the line and what was
 * expected: the file is ours and should never have one. */
static int load_lines(const char *dir, const char *name, size_t size,
                      bool (*parse)(char *line, void *elem), const char *expected, void **out,
                      size_t *n, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    *out = NULL;
    *n = 0;
    FILE *f = fopen(path, "re");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "open %s: %s", path, strerror(e));
        return -e;
    }
    size_t cap = 0, lineno = 0;
    char line[1024]; /* longer than any line of these files (DIR/klines' are the longest) */
    int rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\n")] = 0;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            void *grown = realloc(*out, cap * size);
            if (!grown) {
                rc = -ENOMEM;
                snprintf(err, errlen, "out of memory reading %s", path);
                break;
            }
            *out = grown;
        }
        if (!parse(line, (char *)*out + *n * size)) {
            snprintf(err, errlen, "%s:%zu: not '%s'", path, lineno, expected);
            rc = -EINVAL;
            break;
        }
        (*n)++;
    }
    if (!rc && ferror(f)) {
        rc = -EIO;
        snprintf(err, errlen, "read %s: %s", path, strerror(errno));
    }
    fclose(f);
    if (rc) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

/* "name:bcrypt-hash" */
static bool account_line(char *line, void *elem)
{
    struct entry *e = elem;
    char *colon = strchr(line, ':');
    if (!colon || !yard_account_name_valid(line, (size_t)(colon - line)) ||
        strlen(colon + 1) != YARD_BCRYPT_LEN)
        return false;
    memcpy(e->name, line, (size_t)(colon - line));
    e->name[colon - line] = 0;
    memcpy(e->hash, colon + 1, YARD_BCRYPT_LEN + 1);
    return true;
}

/* The two files of "name:bcrypt-hash" lines, each read and changed by the
 * same functions: the accounts (DIR/accounts) and the server operators
 * (DIR/opers). what names an entry in messages. */
struct names_file {
    const char *file, *what;
};
static const struct names_file accounts_file = {"accounts", "account"};
static const struct names_file opers_file = {"opers", "operator"};

/* Read every entry of the file. */
static int load(const char *dir, const struct names_file *nf, struct entry **out, size_t *n,
                char *err, size_t errlen)
{
    return load_lines(dir, nf->file, sizeof **out, account_line, "name:bcrypt-hash",
                      (void **)out, n, err, errlen);
}

/* Replace DIR/name whole, mode 0600: write name.tmp with write_lines,
 * fsync it, rename it over name, fsync the directory. A reader sees the old
 * file or the new one, never half of one. 0 or -errno with err. */
static int replace_file(const char *dir, const char *name,
                        void (*write_lines)(FILE *f, const void *items, size_t n),
                        const void *items, size_t n, char *err, size_t errlen)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        int er = errno;
        snprintf(err, errlen, "open %s: %s", tmp, strerror(er));
        return -er;
    }
    fchmod(fd, 0600); /* even if the file was there with other bits */
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        return -ENOMEM;
    }
    write_lines(f, items, n);
    int er = 0;
    if (fflush(f) != 0 || fsync(fileno(f)) != 0)
        er = errno;
    if (fclose(f) != 0 && !er)
        er = errno;
    if (!er && rename(tmp, path) != 0)
        er = errno;
    if (er) {
        snprintf(err, errlen, "write %s: %s", path, strerror(er));
        unlink(tmp);
        return -er;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

static void account_lines(FILE *f, const void *items, size_t n)
{
    const struct entry *e = items;
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s:%s\n", e[i].name, e[i].hash);
}

/* Replace the file with these entries. */
static int store(const char *dir, const struct names_file *nf, const struct entry *e, size_t n,
                 char *err, size_t errlen)
{
    return replace_file(dir, nf->file, account_lines, e, n, err, errlen);
}

/* Changes are serialised by an OFD write lock on DIR/accounts.lock (an
 * open file description of our own: a lock nobody else's fork shares). */
static int lock_dir(const char *dir, char *err, size_t errlen)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        int e = errno;
        snprintf(err, errlen, "mkdir %s: %s", dir, strerror(e));
        return -e;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/accounts.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "open %s: %s", path, strerror(e));
        return -e;
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    while (fcntl(fd, F_OFD_SETLKW, &fl) < 0) {
        if (errno == EINTR)
            continue;
        int e = errno;
        snprintf(err, errlen, "lock %s: %s", path, strerror(e));
        close(fd);
        return -e;
    }
    return fd; /* closing it releases the lock */
}

static ssize_t find(const struct entry *e, size_t n, const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(e[i].name) == len && strncasecmp(e[i].name, name, len) == 0)
            return (ssize_t)i;
    return -1;
}

/* Adds count entries at once (all or none): one lock, one rewrite of the
 * file, whatever the count. */
static int names_add(const char *dir, const struct names_file *nf, const char *const *names,
                     const char *const *passwords, size_t count, int cost, char *err,
                     size_t errlen)
{
    for (size_t k = 0; k < count; k++) {
        size_t len = strlen(names[k]);
        if (!yard_account_name_valid(names[k], len)) {
            snprintf(err, errlen,
                     "'%s' is not a valid %s name (1-%d characters: a letter or one of "
                     "[\\]^_`{|} first, then also digits and '-')",
                     names[k], nf->what, YARD_ACCOUNT_NAME_MAX);
            return -EINVAL;
        }
        for (size_t j = 0; j < k; j++)
            if (strlen(names[j]) == len && strncasecmp(names[j], names[k], len) == 0) {
                snprintf(err, errlen, "%s '%s' is named twice", nf->what, names[k]);
                return -EINVAL;
            }
        if (!yard_chat_password_valid(passwords[k], err, errlen))
            return -EINVAL;
    }
    /* Hash before taking the lock: it is the slow part. */
    struct entry *ne = calloc(count ? count : 1, sizeof *ne);
    struct crypt_data *cd = calloc(1, sizeof *cd);
    bool ok = ne && cd;
    for (size_t k = 0; ok && k < count; k++) {
        memcpy(ne[k].name, names[k], strlen(names[k]));
        ok = yard_bcrypt_hash(passwords[k], cost, cd, ne[k].hash);
    }
    free(cd);
    if (!ok) {
        free(ne);
        snprintf(err, errlen, "bcrypt failed (cost %d: 4..31)", cost);
        return -EINVAL;
    }
    int lk = lock_dir(dir, err, errlen);
    if (lk < 0) {
        free(ne);
        return lk;
    }
    struct entry *e;
    size_t n;
    int rc = load(dir, nf, &e, &n, err, errlen);
    if (rc == -ENOENT)
        rc = 0;
    for (size_t k = 0; !rc && k < count; k++)
        if (find(e, n, names[k], strlen(names[k])) >= 0) {
            snprintf(err, errlen, "%s '%s' exists", nf->what, names[k]);
            rc = -EEXIST;
        }
    if (!rc) {
        struct entry *grown = realloc(e, (n + count) * sizeof *e);
        if (!grown) {
            rc = -ENOMEM;
        } else {
            e = grown;
            memcpy(&e[n], ne, count * sizeof *ne);
            n += count;
            rc = store(dir, nf, e, n, err, errlen);
        }
    }
    free(ne);
    free(e);
    close(lk);
    return rc;
}

int yard_accounts_add(const char *dir, const char *name, const char *password, int cost,
                      char *err, size_t errlen)
{
    return names_add(dir, &accounts_file, &name, &password, 1, cost, err, errlen);
}

int yard_accounts_add_many(const char *dir, const char *const *names,
                           const char *const *passwords, size_t count, int cost, char *err,
                           size_t errlen)
{
    return names_add(dir, &accounts_file, names, passwords, count, cost, err, errlen);
}

int yard_opers_add(const char *dir, const char *name, const char *password, int cost, char *err,
                   size_t errlen)
{
    return names_add(dir, &opers_file, &name, &password, 1, cost, err, errlen);
}

int yard_opers_add_many(const char *dir, const char *const *names, const char *const *passwords,
                        size_t count, int cost, char *err, size_t errlen)
{
    return names_add(dir, &opers_file, names, passwords, count, cost, err, errlen);
}

/* Every entry into *e (free it whatever the outcome), and the index of
 * name's; -ENOENT (no such entry, or no file yet: err says "no account")
 * or another -errno with err. */
static ssize_t load_find(const char *dir, const struct names_file *nf, const char *name,
                         struct entry **e, size_t *n, char *err, size_t errlen)
{
    int rc = load(dir, nf, e, n, err, errlen);
    if (rc && rc != -ENOENT)
        return rc;
    ssize_t i = rc ? -1 : find(*e, *n, name, strlen(name));
    if (i < 0) {
        snprintf(err, errlen, "no %s '%s'", nf->what, name);
        return -ENOENT;
    }
    return i;
}

static int names_remove(const char *dir, const struct names_file *nf, const char *name,
                        char *err, size_t errlen)
{
    int lk = lock_dir(dir, err, errlen);
    if (lk < 0)
        return lk;
    struct entry *e;
    size_t n;
    ssize_t i = load_find(dir, nf, name, &e, &n, err, errlen);
    int rc = i < 0 ? (int)i : 0;
    if (i >= 0) {
        memmove(&e[i], &e[i + 1], (n - (size_t)i - 1) * sizeof *e);
        rc = store(dir, nf, e, n - 1, err, errlen);
    }
    free(e);
    close(lk);
    return rc;
}

int yard_accounts_remove(const char *dir, const char *name, char *err, size_t errlen)
{
    return names_remove(dir, &accounts_file, name, err, errlen);
}

int yard_opers_remove(const char *dir, const char *name, char *err, size_t errlen)
{
    return names_remove(dir, &opers_file, name, err, errlen);
}

static int names_list(const char *dir, const struct names_file *nf,
                      void (*fn)(const char *name, void *arg), void *arg, char *err,
                      size_t errlen)
{
    struct entry *e;
    size_t n;
    int rc = load(dir, nf, &e, &n, err, errlen);
    if (rc == -ENOENT)
        return 0; /* no file: none */
    for (size_t i = 0; !rc && i < n; i++)
        fn(e[i].name, arg);
    free(e);
    return rc;
}

int yard_accounts_list(const char *dir, void (*fn)(const char *name, void *arg), void *arg,
                       char *err, size_t errlen)
{
    return names_list(dir, &accounts_file, fn, arg, err, errlen);
}

int yard_opers_list(const char *dir, void (*fn)(const char *name, void *arg), void *arg,
                    char *err, size_t errlen)
{
    return names_list(dir, &opers_file, fn, arg, err, errlen);
}

static int names_lookup(const char *dir, const struct names_file *nf, const char *name,
                        size_t len, char hash[YARD_BCRYPT_LEN + 1], char *canon, int *max_cost)
{
    char err[256];
    struct entry *e;
    size_t n;
    if (max_cost)
        *max_cost = 0;
    int rc = load(dir, nf, &e, &n, err, sizeof err);
    if (rc)
        return rc;
    ssize_t i = find(e, n, name, len);
    if (i < 0) {
        rc = -ENOENT;
    } else {
        memcpy(hash, e[i].hash, YARD_BCRYPT_LEN + 1);
        if (canon)
            strcpy(canon, e[i].name);
    }
    for (size_t k = 0; max_cost && k < n; k++) {
        int cost = yard_bcrypt_cost(e[k].hash);
        if (cost > *max_cost)
            *max_cost = cost;
    }
    free(e);
    return rc;
}

int yard_accounts_lookup(const char *dir, const char *name, size_t len,
                         char hash[YARD_BCRYPT_LEN + 1], char *canon, int *max_cost)
{
    return names_lookup(dir, &accounts_file, name, len, hash, canon, max_cost);
}

int yard_opers_lookup(const char *dir, const char *name, size_t len,
                      char hash[YARD_BCRYPT_LEN + 1], char *canon, int *max_cost)
{
    return names_lookup(dir, &opers_file, name, len, hash, canon, max_cost);
}

/* ---- client certificates: DIR/certfps --------------------------------- */

struct certfp {
    char fp[YARD_CERTFP_LEN + 1];
    char name[YARD_ACCOUNT_NAME_MAX + 1];
};

int yard_certfp_canon(const char *fp, char out[YARD_CERTFP_LEN + 1])
{
    size_t o = 0;
    for (const char *p = fp; *p; p++) {
        if (*p == ':' && o % 2 == 0 && o > 0 && p[1])
            continue;
        if (!isxdigit((unsigned char)*p) || o == YARD_CERTFP_LEN)
            return -EINVAL;
        out[o++] = (char)tolower((unsigned char)*p);
    }
    out[o] = 0;
    return o == YARD_CERTFP_LEN ? 0 : -EINVAL;
}

/* "sha256 name" */
static bool certfp_line(char *line, void *elem)
{
    struct certfp *c = elem;
    char *sp = strchr(line, ' ');
    if (!sp || (size_t)(sp - line) != YARD_CERTFP_LEN ||
        !yard_account_name_valid(sp + 1, strlen(sp + 1)))
        return false;
    *sp = 0;
    if (yard_certfp_canon(line, c->fp) < 0)
        return false;
    memcpy(c->name, sp + 1, strlen(sp + 1) + 1); /* valid: at most 30 characters */
    return true;
}

/* Every line of DIR/certfps; -ENOENT when there is none yet. */
static int certfp_load(const char *dir, struct certfp **out, size_t *n, char *err, size_t errlen)
{
    return load_lines(dir, "certfps", sizeof **out, certfp_line, "sha256 name", (void **)out, n,
                      err, errlen);
}

static void certfp_lines(FILE *f, const void *items, size_t n)
{
    const struct certfp *c = items;
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s %s\n", c[i].fp, c[i].name);
}

static int certfp_store(const char *dir, const struct certfp *c, size_t n, char *err,
                        size_t errlen)
{
    return replace_file(dir, "certfps", certfp_lines, c, n, err, errlen);
}

/* The account's canonical name, under the lock: 0 or -ENOENT (err says). */
static int account_canon(const char *dir, const char *name, char *canon, char *err, size_t errlen)
{
    struct entry *e;
    size_t n;
    ssize_t i = load_find(dir, &accounts_file, name, &e, &n, err, errlen);
    if (i >= 0)
        strcpy(canon, e[i].name);
    free(e);
    return i < 0 ? (int)i : 0;
}

/* Add or remove one line: the one place DIR/certfps changes. */
static int certfp_change(const char *dir, const char *name, const char *fp, bool add, char *err,
                         size_t errlen)
{
    char want[YARD_CERTFP_LEN + 1], canon[YARD_ACCOUNT_NAME_MAX + 1];
    if (yard_certfp_canon(fp, want) < 0) {
        snprintf(err, errlen, "'%s' is not a SHA-256 fingerprint (64 hex digits, colons between "
                              "pairs allowed)", fp);
        return -EINVAL;
    }
    int lk = lock_dir(dir, err, errlen);
    if (lk < 0)
        return lk;
    int rc = account_canon(dir, name, canon, err, errlen);
    struct certfp *c = NULL;
    size_t n = 0;
    if (!rc) {
        rc = certfp_load(dir, &c, &n, err, errlen);
        if (rc == -ENOENT)
            rc = 0;
    }
    size_t i = 0;
    while (!rc && i < n && strcmp(c[i].fp, want) != 0)
        i++;
    if (rc) {
        /* said already */
    } else if (add && i < n) {
        snprintf(err, errlen, "that certificate is listed for '%s' already", c[i].name);
        rc = -EEXIST;
    } else if (add) {
        struct certfp *g = realloc(c, (n + 1) * sizeof *g);
        if (!g) {
            rc = -ENOMEM;
        } else {
            c = g;
            memcpy(c[n].fp, want, sizeof want);
            snprintf(c[n].name, sizeof c[n].name, "%s", canon);
            rc = certfp_store(dir, c, n + 1, err, errlen);
        }
    } else if (i == n || strcasecmp(c[i].name, canon) != 0) {
        snprintf(err, errlen, "that certificate is not listed for '%s'", canon);
        rc = -ENOENT;
    } else {
        memmove(&c[i], &c[i + 1], (n - i - 1) * sizeof *c);
        rc = certfp_store(dir, c, n - 1, err, errlen);
    }
    free(c);
    close(lk);
    return rc;
}

int yard_accounts_certfp_add(const char *dir, const char *name, const char *fp, char *err,
                             size_t errlen)
{
    return certfp_change(dir, name, fp, true, err, errlen);
}

int yard_accounts_certfp_remove(const char *dir, const char *name, const char *fp, char *err,
                                size_t errlen)
{
    return certfp_change(dir, name, fp, false, err, errlen);
}

int yard_accounts_certfp_list(const char *dir, const char *name,
                              void (*fn)(const char *fp, void *arg), void *arg, char *err,
                              size_t errlen)
{
    struct certfp *c;
    size_t n;
    int rc = certfp_load(dir, &c, &n, err, errlen);
    if (rc == -ENOENT)
        return 0;
    for (size_t i = 0; !rc && i < n; i++)
        if (!strcasecmp(c[i].name, name))
            fn(c[i].fp, arg);
    free(c);
    return rc;
}

int yard_accounts_certfp_lookup(const char *dir, const char *fp, char *canon)
{
    char err[256], want[YARD_CERTFP_LEN + 1];
    if (yard_certfp_canon(fp, want) < 0)
        return -EINVAL;
    struct certfp *c;
    size_t n;
    int rc = certfp_load(dir, &c, &n, err, sizeof err);
    if (rc)
        return rc;
    size_t i = 0;
    while (i < n && strcmp(c[i].fp, want) != 0)
        i++;
    /* Only while the account exists: a removed account's certificates log
     * nobody in. */
    rc = i == n ? -ENOENT : account_canon(dir, c[i].name, canon, err, sizeof err);
    free(c);
    return rc;
}

bool yard_chat_password_valid(const char *password, char *err, size_t errlen)
{
    size_t plen = strlen(password);
    if (plen == 0 || plen > YARD_ACCOUNT_PASSWORD_MAX || strpbrk(password, "\r\n")) {
        snprintf(err, errlen, "the password must be 1-%d bytes on one line",
                 YARD_ACCOUNT_PASSWORD_MAX);
        return false;
    }
    return true;
}

/* The mechanism above, for the store's other files (files.h). */
int yard_chat_file_load(const char *dir, const char *name, size_t size,
                        bool (*parse)(char *line, void *elem), const char *expected, void **out,
                        size_t *n, char *err, size_t errlen)
{
    return load_lines(dir, name, size, parse, expected, out, n, err, errlen);
}

int yard_chat_file_replace(const char *dir, const char *name,
                           void (*write_lines)(FILE *f, const void *items, size_t n),
                           const void *items, size_t n, char *err, size_t errlen)
{
    return replace_file(dir, name, write_lines, items, n, err, errlen);
}

int yard_chat_dir_lock(const char *dir, char *err, size_t errlen)
{
    return lock_dir(dir, err, errlen);
}
