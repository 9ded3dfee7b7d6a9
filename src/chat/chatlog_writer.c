/* The message log's appends (include/yard/chatlog.h): a record written
 * under the shared mutex with its index entry and its tail copy, rotation
 * to a new segment, the syncs --fsync asks for, the deferred queue and the
 * writer thread that empties it, and the retention that deletes old
 * segments. The format and the mutex: chatlog.c. */
#include "chatlog_int.h"

#include <errno.h>
#include <fcntl.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "yard/log.h"
#include "yard/shm.h"

/* Under the lock: the write descriptor on the active segment. */
static int writer(yard_chatlog_t *log)
{
    if (log->wfd >= 0 && log->ifd >= 0 && log->wseg == log->sh->active_first)
        return 0;
    if (log->wfd >= 0)
        close(log->wfd);
    if (log->ifd >= 0)
        close(log->ifd);
    char path[4200];
    chatlog_idx_path(path, sizeof path, log->dir, log->sh->active_first);
    log->ifd = open(path, O_RDWR | O_CLOEXEC);
    chatlog_seg_path(path, sizeof path, log->dir, log->sh->active_first);
    log->wfd = log->ifd < 0 ? -1 : open(path, O_RDWR | O_CLOEXEC);
    log->wseg = log->sh->active_first;
    return log->wfd < 0 ? -errno : 0;
}

/* Under the lock, with the writer open: append r (its id is set here),
 * rotating first when the active segment is full. No sync. *rotated says
 * whether a new segment was started. */
static int append_locked(yard_chatlog_t *log, yard_logrec_t *r, bool *rotated)
{
    uint8_t buf[YARD_LOGREC_MAX];
    struct shared *sh = log->sh;
    r->id = sh->next_id;
    long len = yard_logrec_encode(r, buf, sizeof buf);
    if (len < 0)
        return (int)len;
    if (sh->active_size > 0 && sh->active_size + (uint64_t)len > log->o.segment_bytes) {
        /* Rotate: the old segment is complete (synced unless --fsync never). */
        if (log->o.fsync != YARD_CHATLOG_FSYNC_NEVER)
            fdatasync(log->wfd);
        int ifd, fd = chatlog_create_segment(log, sh->next_id, &ifd);
        if (fd < 0)
            return fd;
        close(log->wfd);
        close(log->ifd);
        log->wfd = fd;
        log->ifd = ifd;
        sh->prev_first = sh->active_first;
        sh->prev_size = sh->active_size;
        log->wseg = sh->active_first = sh->next_id;
        sh->active_size = sh->tail_lo = 0;
        *rotated = true;
    }
    size_t done = 0;
    while (done < (size_t)len) {
        ssize_t w = pwrite(log->wfd, buf + done, (size_t)len - done,
                           (off_t)(sh->active_size + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int rc = w < 0 ? -errno : -EIO;
            /* Leave no half record behind (a full disk, a size limit). */
            ftruncate(log->wfd, (off_t)sh->active_size);
            return rc;
        }
        done += (size_t)w;
    }
    struct idx_entry e = chatlog_idx_disk((struct idx_entry){
        .off = sh->active_size, .ts_ns = r->ts_ns,
        .hash = yard_chatlog_target_hash(r->target, r->target_len), .type = (uint32_t)r->type});
    ssize_t iw = pwrite(log->ifd, &e, sizeof e, (off_t)((r->id - sh->active_first) * sizeof e));
    if (iw != (ssize_t)sizeof e) {
        int rc = iw < 0 ? -errno : -EIO;
        ftruncate(log->wfd, (off_t)sh->active_size); /* no record the index lacks */
        return rc;
    }
    chatlog_tail_put(sh, sh->active_size, buf, (size_t)len);
    sh->active_size += (uint64_t)len;
    sh->next_id++;
    sh->dirty = true;
    return 0;
}

/* Under the lock: sync per --fsync after appends. -errno when a sync that
 * --fsync always needs failed. */
static int sync_due_locked(yard_chatlog_t *log)
{
    struct shared *sh = log->sh;
    uint64_t mono = chatlog_mono_ns();
    if (!sh->dirty || !(log->o.fsync == YARD_CHATLOG_FSYNC_ALWAYS ||
                        (log->o.fsync == YARD_CHATLOG_FSYNC_INTERVAL &&
                         mono - sh->last_sync_ns >= log->o.fsync_interval_ns)))
        return 0;
    int rc = 0;
    if (fdatasync(log->wfd) < 0 && log->o.fsync == YARD_CHATLOG_FSYNC_ALWAYS)
        rc = -errno; /* written but not known durable: say so */
    sh->last_sync_ns = mono;
    sh->dirty = false;
    return rc;
}

static int64_t wall_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* Under the lock, with the writer open: append every deferred record; the
 * last one's id (0: none). A record that cannot be appended is reported
 * and dropped: it must not block the ones after it. */
static uint64_t deferred_locked(yard_chatlog_t *log, bool *rotated)
{
    struct shared *sh = log->sh;
    uint64_t last = 0;
    yard_chatlog_entry_t e;
    for (;;) {
        yard_shm_mutex_lock(&sh->qmu);
        bool any = sh->qlen > 0;
        if (any) {
            e = sh->q[sh->qhead];
            sh->qhead = (sh->qhead + 1) % YARD_CHATLOG_DEFER_SLOTS;
            sh->qlen--;
        }
        pthread_mutex_unlock(&sh->qmu);
        if (!any)
            return last;
        yard_logrec_t r = {.type = e.type, .ts_ns = wall_ns(), .sender = e.sender,
                           .sender_len = strnlen(e.sender, sizeof e.sender),
                           .target = e.target, .target_len = strnlen(e.target, sizeof e.target),
                           .text = e.text,
                           .text_len = e.text_len < sizeof e.text ? e.text_len : sizeof e.text};
        int rc = append_locked(log, &r, rotated);
        if (rc == 0)
            last = r.id;
        else
            yard_log_limited(YARD_LOG_WARN, "chat log: a deferred record of %s is lost: %s",
                             e.sender, strerror(-rc));
    }
}

bool yard_chatlog_defer(yard_chatlog_t *log, const yard_chatlog_entry_t *e, unsigned n)
{
    struct shared *sh = log->sh;
    yard_shm_mutex_lock(&sh->qmu);
    bool fits = sh->qlen + n <= YARD_CHATLOG_DEFER_SLOTS;
    if (fits)
        for (unsigned i = 0; i < n; i++)
            sh->q[(sh->qhead + sh->qlen++) % YARD_CHATLOG_DEFER_SLOTS] = e[i];
    else
        sh->qdropped += n;
    pthread_mutex_unlock(&sh->qmu);
    uint64_t one = 1;
    if (fits && n && write(log->wake_fd, &one, sizeof one) < 0) {
        /* only at a counter of 2^64 - 2: the next append writes them anyway */
    }
    return fits;
}

uint64_t yard_chatlog_deferred_dropped(yard_chatlog_t *log)
{
    yard_shm_mutex_lock(&log->sh->qmu);
    uint64_t n = log->sh->qdropped;
    pthread_mutex_unlock(&log->sh->qmu);
    return n;
}

uint64_t yard_chatlog_write_deferred(yard_chatlog_t *log)
{
    bool rotated = false;
    uint64_t last = 0;
    chatlog_lock(log);
    int rc = writer(log);
    if (rc == 0) {
        last = deferred_locked(log, &rotated);
        sync_due_locked(log);
    } else {
        yard_log_limited(YARD_LOG_WARN, "chat log: opening the active segment: %s",
                         strerror(-rc));
    }
    chatlog_unlock(log);
    if (rotated && log->o.retain_s)
        yard_chatlog_prune(log, wall_ns() / 1000000000);
    return last;
}

/* The process's servers fork (per connection, per reactor) while the
 * writer thread runs: a child must not inherit a lock that thread held
 * (the allocator's, the log's output), so a fork waits until the thread is
 * idle in read(), and the thread is not started until it is there.
 * One writer thread per process. */
static pthread_mutex_t writer_busy = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t writer_atfork_once = PTHREAD_ONCE_INIT;
static void writer_fork_prepare(void) { pthread_mutex_lock(&writer_busy); }
static void writer_fork_done(void) { pthread_mutex_unlock(&writer_busy); }
static sem_t writer_started;

static void writer_atfork(void)
{
    sem_init(&writer_started, 0, 0);
    pthread_atfork(writer_fork_prepare, writer_fork_done, writer_fork_done);
}

static void *writer_main(void *arg)
{
    yard_chatlog_t *log = arg;
    sem_post(&writer_started); /* running: from here on it holds nothing while idle */
    for (;;) {
        uint64_t v;
        if (read(log->wake_fd, &v, sizeof v) < 0 && errno != EINTR) {
            yard_log_err("chat log: the writer thread cannot wait: %s", strerror(errno));
            return NULL;
        }
        pthread_mutex_lock(&writer_busy);
        uint64_t last = yard_chatlog_write_deferred(log);
        if (last && log->appended)
            log->appended(log->appended_arg, last);
        bool stop = atomic_load(&log->writer_stop);
        pthread_mutex_unlock(&writer_busy);
        if (stop)
            return NULL;
    }
}

int yard_chatlog_writer_start(yard_chatlog_t *log, void (*appended)(void *arg, uint64_t last_id),
                              void *arg, char *err, size_t errlen)
{
    if (log->writer_pid)
        return 0;
    log->appended = appended;
    log->appended_arg = arg;
    pthread_once(&writer_atfork_once, writer_atfork);
    int e = pthread_create(&log->writer_thread, NULL, writer_main, log);
    while (!e && sem_wait(&writer_started) < 0 && errno == EINTR) {
        /* the thread has started when this returns */
    }
    if (e) {
        snprintf(err, errlen, "starting the chat log's writer thread: %s", strerror(e));
        return -e;
    }
    log->writer_pid = getpid();
    return 0;
}

int yard_chatlog_append(yard_chatlog_t *log, int type, const char *sender, size_t sender_len,
                        const char *target, size_t target_len, const char *text,
                        size_t text_len, uint64_t *id, int64_t *ts_ns)
{
    uint8_t buf[YARD_LOGREC_MAX];
    yard_logrec_t r = {.type = type, .ts_ns = wall_ns(), .sender = sender,
                       .sender_len = sender_len, .target = target, .target_len = target_len,
                       .text = text, .text_len = text_len, .id = 1};
    long len = yard_logrec_encode(&r, buf, sizeof buf); /* the limits, before the lock */
    if (len < 0)
        return (int)len;
    bool rotated = false;
    chatlog_lock(log);
    int rc = writer(log);
    if (rc == 0) {
        deferred_locked(log, &rotated); /* what was deferred before this goes first */
        rc = append_locked(log, &r, &rotated);
    }
    if (rc == 0) {
        rc = sync_due_locked(log);
        *id = r.id;
        *ts_ns = r.ts_ns;
    }
    chatlog_unlock(log);
    if (rotated && log->o.retain_s)
        yard_chatlog_prune(log, r.ts_ns / 1000000000);
    return rc;
}

int yard_chatlog_sync(yard_chatlog_t *log)
{
    int rc = 0;
    chatlog_lock(log);
    if (log->sh->dirty && log->o.fsync != YARD_CHATLOG_FSYNC_NEVER && writer(log) == 0) {
        if (fdatasync(log->wfd) < 0)
            rc = -errno;
        log->sh->dirty = false;
        log->sh->last_sync_ns = chatlog_mono_ns();
    }
    chatlog_unlock(log);
    return rc;
}

int yard_chatlog_prune(yard_chatlog_t *log, int64_t now_s)
{
    if (!log->o.retain_s)
        return 0;
    uint64_t *segs;
    size_t n;
    if (chatlog_list_segments(log->dir, &segs, &n) < 0)
        return 0;
    chatlog_lock(log);
    uint64_t active = log->sh->active_first;
    chatlog_unlock(log);
    int deleted = 0;
    for (size_t i = 0; i < n; i++) {
        if (segs[i] >= active)
            break;
        char path[4200];
        chatlog_seg_path(path, sizeof path, log->dir, segs[i]);
        struct stat st;
        /* A segment's last write is its mtime: it is older than the
         * retention when even its newest record is. */
        if (stat(path, &st) == 0 && (int64_t)st.st_mtime < now_s - (int64_t)log->o.retain_s &&
            unlink(path) == 0) {
            deleted++;
            chatlog_idx_path(path, sizeof path, log->dir, segs[i]);
            unlink(path);
        }
    }
    free(segs);
    return deleted;
}
