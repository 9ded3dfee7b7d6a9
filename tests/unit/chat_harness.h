/* A sans-socket harness for the chat app (apps/chat): it starts
 * yard_app_chat with its flags in a fresh temporary data directory and
 * plays the engine for a handful of fake clients, calling the app's
 * callbacks directly and carrying out the effects they record in the order
 * the connection driver does (src/core/conn*.c, with jobs run inline as the
 * blocking models and --offload-threads 0 do):
 *
 *   data      the bytes of ch_feed, or what waited in the client's input
 *             buffer; what the app leaves is kept and offered again with
 *             more bytes, after a job's job_done or after a timer
 *   output    appended to the client's transcript, read back with
 *             ch_line / CH_EXPECT and the other helpers below
 *   jobs      run inline at once, then job_done, then the waiting input
 *   close     recorded; the client takes no more input, and app->close
 *             runs once its job (if any) is over, as the driver does
 *   wake-ups  recorded; ch_advance moves the fake clock (fx->now_ns) and
 *             fires the timers that are due
 *   news      the bus is read directly: a client whose watch is due (the
 *             topic's sequence above what it has seen) gets app->news
 *             unless a job is pending or it is closing
 *
 * What it cannot fake honestly, and so does differently:
 *   - One process, one thread for the connections: the process models'
 *     shared memory across fork() and the pool threads' concurrency are
 *     not exercised (the shared region is still a real yard_shm region).
 *   - The log's writer thread runs as in the server (yard_chatlog_writer_
 *     start), but its timing is not the harness's to choose: after every
 *     step the harness writes the deferred presence records itself
 *     (yard_chatlog_write_deferred) and publishes the log's last id, as the
 *     writer's callback would, so that JOIN/PART/QUIT news arrives at a
 *     fixed point and transcripts are deterministic.
 *   - No eventfd watch: news is found by comparing the bus's sequence with
 *     the client's (topic, seen), which is what yard_watch_due does.
 *   - No send queue, no backpressure, no --max-sendq: output is never late.
 *     Each callback's output counts as waiting (yard_fx_pending) until it
 *     returns, so a callback that sends more than the hold bound holds the
 *     rest of its input back (yard_fx_hold_input), which is offered again
 *     at once, as the driver would once the output drained.
 *   - Both clocks the app sees are fake: fx->now_ns, and fx->wall_ns,
 *     which starts at the real time and moves with ch_advance. The log's
 *     timestamps (server-time tags) are the store's, the real clock.
 *   - A login's password check (bcrypt) is real: make accounts with a low
 *     cost (ch_account does, cost 4).
 *   - The data directory is on /dev/shm where that is a writable tmpfs
 *     (else /tmp): the log's and the accounts' fsyncs cost nothing there. */
#ifndef CHAT_HARNESS_H
#define CHAT_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CH_CLIENTS_MAX 16

typedef struct chat_harness chat_harness_t;

/* The chat with its defaults and the given flags ("name=value", or "name"
 * for a switch; NULL-terminated, or NULL), --data being a fresh temporary
 * directory. NULL with a message on stderr on failure. */
chat_harness_t *ch_start(const char *const *flags);
/* The same with files put in the data directory before the chat starts:
 * files holds name, content, name, content..., then NULL (or is NULL). */
chat_harness_t *ch_start_files(const char *const *flags, const char *const *files);
/* Every client still connected is closed (app->close), then the app's fini;
 * the data directory is removed. */
void ch_stop(chat_harness_t *h);
/* An account, made the way `yard-chat account add` makes one (cost 4). */
void ch_account(chat_harness_t *h, const char *name, const char *password);
/* A server operator, made the way `yard-chat oper add` makes one (cost 4). */
void ch_oper(chat_harness_t *h, const char *name, const char *password);
const char *ch_data_dir(const chat_harness_t *h);
/* How many of the store's requests of this op (enum yard_chat_op) the app
 * has handed the engine as jobs since the start. */
#define CH_STORE_OPS 16
unsigned ch_store_jobs(const chat_harness_t *h, int op);

/* A new client (app->open); its id. */
int ch_connect(chat_harness_t *h);
/* Bytes from a client (app->data and everything after it). */
void ch_feed_n(chat_harness_t *h, int id, const void *bytes, size_t n);
void ch_feed(chat_harness_t *h, int id, const char *text);
/* The client closed its side: what waits is offered once more with eof. */
void ch_eof(chat_harness_t *h, int id);
/* The client vanished (a reset): app->close at once. */
void ch_drop(chat_harness_t *h, int id);
/* Move the fake clock on by ns and fire the timers that are then due. */
void ch_advance(chat_harness_t *h, uint64_t ns);
/* The earliest armed timer (0: none). */
uint64_t ch_next_wake(const chat_harness_t *h);
uint64_t ch_now(const chat_harness_t *h);
/* How many jobs the app has run for the client so far (each store request,
 * each piece of a CHATHISTORY). */
unsigned long ch_jobs(chat_harness_t *h, int id);
/* The fake wall clock (fx->wall_ns), ns since 1970. */
int64_t ch_wall(const chat_harness_t *h);
/* Has the app closed the client (or has it gone)? Why, if it said. */
bool ch_closed(const chat_harness_t *h, int id);

/* The client's next line of output, without its CRLF (NULL: none yet).
 * Valid until the next call on the harness. */
const char *ch_line(chat_harness_t *h, int id);
/* Every line not taken yet, each ending in "\n" (a malloc'd string), and
 * all taken. */
char *ch_take_all(chat_harness_t *h, int id);
/* How many lines are waiting. */
int ch_pending(const chat_harness_t *h, int id);
/* Forget what the client has been sent so far. */
void ch_discard(chat_harness_t *h, int id);

/* Assertions that print the client's transcript and exit(1) on failure:
 *   CH_EXPECT        the next line is exactly want
 *   CH_EXPECT_PREFIX the next line starts with want
 *   CH_SKIP_TO       some line starts with want (those before are skipped);
 *                    returns it
 *   CH_EXPECT_NONE   nothing more has been sent
 * The first three return the line (valid until the next call). */
const char *ch_expect_at(chat_harness_t *h, int id, const char *want, int how, const char *file,
                         int line);
#define CH_EXACT 0
#define CH_PREFIX 1
#define CH_SKIP 2
#define CH_EXPECT(h, id, want) ch_expect_at((h), (id), (want), CH_EXACT, __FILE__, __LINE__)
#define CH_EXPECT_PREFIX(h, id, want) ch_expect_at((h), (id), (want), CH_PREFIX, __FILE__, __LINE__)
#define CH_SKIP_TO(h, id, want) ch_expect_at((h), (id), (want), CH_SKIP, __FILE__, __LINE__)
void ch_expect_none_at(chat_harness_t *h, int id, const char *file, int line);
#define CH_EXPECT_NONE(h, id) ch_expect_none_at((h), (id), __FILE__, __LINE__)

/* A client logged in as account (PASS, NICK, USER), its welcome read up to
 * the end of the MOTD; caps, if not NULL, are requested first (CAP REQ). */
int ch_login(chat_harness_t *h, const char *account, const char *password, const char *caps);

#endif
