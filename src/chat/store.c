/* The chat's store (yard/chat_store.h): open, close, and what it holds
 * besides the log and the accounts (the tables, the motd, the hash that
 * unknown accounts are checked against). The requests are requests.c's. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "yard/shm.h"

/* One more thing open repaired, after those before it. */
__attribute__((format(printf, 3, 4))) static void add_warning(char *warn, size_t cap,
                                                              const char *fmt, ...)
{
    size_t len = strlen(warn);
    if (len && len + 2 < cap) {
        memcpy(warn + len, "; ", 3);
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(warn + len, cap - len, fmt, ap);
    va_end(ap);
}

static int open_tables(yard_chat_store_t *st, const char *dir, yard_chat_store_opts_t *o,
                       char *warn, size_t warnlen, char *err, size_t errlen)
{
    if (o->ntables > YARD_CHAT_TABLES_MAX) {
        snprintf(err, errlen, "the chat store holds at most %d tables", YARD_CHAT_TABLES_MAX);
        return -EINVAL;
    }
    for (unsigned i = 0; i < o->ntables; i++) {
        yard_chat_table_t *t = &o->tables[i];
        char path[4096], magic[8] = {0};
        snprintf(path, sizeof path, "%s/%s", dir, t->name);
        memcpy(magic, t->magic, strnlen(t->magic, sizeof magic));
        int rc = yard_table_file_open(&st->tables[i], path, magic, t->slot_size, t->nslots,
                                      &t->restarted);
        if (rc < 0) {
            snprintf(err, errlen, "%s: %s", path, strerror(-rc));
            return rc;
        }
        st->ntables = i + 1;
        t->slots = st->tables[i].slots;
        if (t->restarted)
            add_warning(warn, warnlen, "%.400s is of an older format or size; it starts afresh%s%s%s",
                        path, t->afresh ? " (" : "", t->afresh ? t->afresh : "",
                        t->afresh ? ")" : "");
    }
    return 0;
}

int yard_chat_store_open(const char *dir, yard_chat_store_opts_t *o, yard_chat_store_t **out,
                         char *warn, size_t warnlen, char *err, size_t errlen)
{
    *out = NULL;
    warn[0] = 0;
    yard_chat_store_t *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    snprintf(st->dir, sizeof st->dir, "%s", dir);
    st->sync_tables = o->log.fsync == YARD_CHATLOG_FSYNC_ALWAYS;
    for (unsigned i = 0; i < YARD_CHAT_TABLES_MAX; i++)
        st->tables[i] = (yard_table_file_t){.fd = -1};
    int rc = open_tables(st, dir, o, warn, warnlen, err, errlen);
    if (rc < 0)
        goto fail;
    yard_chatlog_recovery_t rec = {0};
    rc = yard_chatlog_open(dir, &o->log, &st->log, &rec, err, errlen);
    if (rc < 0)
        goto fail;
    if (rec.dropped_bytes)
        add_warning(warn, warnlen, "%s", rec.message);
    /* A hash whose salt checks the passwords of unknown accounts, at the
     * cost of the dearest account (yard_bcrypt_dummy). */
    struct crypt_data *cd = calloc(1, sizeof *cd);
    bool ok = cd && yard_bcrypt_hash("not a password", 4, cd, st->dummy_template);
    free(cd);
    if (!ok) {
        snprintf(err, errlen, "bcrypt is not available");
        rc = -ENOSYS;
        goto fail;
    }
    rc = yard_klines_gen_map(dir, &st->klines_gen, err, errlen);
    if (rc < 0)
        goto fail;
    char hash[YARD_BCRYPT_LEN + 1], why[512];
    if (o->server_password && (rc = yard_server_password_lookup(dir, hash, why, sizeof why)) < 0) {
        snprintf(err, errlen, "--server-password-required: %s (set it with yard-chat "
                              "server-password set --data DIR)", why);
        goto fail;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/motd", dir);
    yard_read_text_file(path, st->motd, sizeof st->motd);
    rc = yard_chatlog_writer_start(st->log, o->appended, o->appended_arg, err, errlen);
    if (rc < 0)
        goto fail;
    *out = st;
    return 0;
fail:
    yard_chat_store_close(st);
    return rc < 0 ? rc : -EIO;
}

void yard_chat_store_close(yard_chat_store_t *st)
{
    if (!st)
        return;
    if (st->log) {
        yard_chatlog_sync(st->log);
        yard_chatlog_close(st->log);
    }
    for (unsigned i = 0; i < st->ntables; i++)
        yard_table_file_close(&st->tables[i]);
    yard_klines_gen_unmap(st->klines_gen);
    free(st);
}

void yard_chat_store_sync_tables(yard_chat_store_t *st)
{
    for (unsigned i = 0; i < st->ntables; i++)
        yard_table_file_sync(&st->tables[i], false);
}

yard_chatlog_t *yard_chat_store_log(yard_chat_store_t *st)
{
    return st->log;
}

const char *yard_chat_store_motd(const yard_chat_store_t *st)
{
    return st->motd;
}

uint64_t yard_chat_store_klines_gen(const yard_chat_store_t *st)
{
    return yard_klines_gen(st->klines_gen);
}
