/* The store's insides (yard/chat_store.h is its API): what store.c opens
 * and requests.c uses. */
#ifndef YARD_CHAT_STORE_PRIVATE_H
#define YARD_CHAT_STORE_PRIVATE_H

#include "yard/chat_store.h"
#include "yard/shm.h"

struct yard_chat_store {
    char dir[4096];
    yard_chatlog_t *log;
    yard_table_file_t tables[YARD_CHAT_TABLES_MAX];
    unsigned ntables;
    bool sync_tables; /* --fsync always: the tables are pushed along with each post */
    char dummy_template[YARD_BCRYPT_LEN + 1];
    char motd[2048];
    const uint64_t *klines_gen; /* DIR/klines.gen, mapped (yard_klines_gen_map) */
};

/* Push the tables' changes towards the disk (msync, not waiting). */
void yard_chat_store_sync_tables(yard_chat_store_t *st);

#endif
