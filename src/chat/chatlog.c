/* Linux-only: eventfd, OFD locks. What a port uses instead: docs/portability.md. */
/* The chat service's durable message log (include/yard/chatlog.h): its
 * on-disk format (segments, their indexes, the target hash), open with the
 * recovery of a torn tail, close, and the shared region with its robust
 * mutex. Appends: chatlog_writer.c; reads: chatlog_read.c; lookups through
 * the index: chatlog_seek.c; what they share: chatlog_int.h. */
#define _GNU_SOURCE /* F_OFD_SETLK, MAP_ANONYMOUS, htole64/le64toh */

#include "chatlog_int.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "yard/hash.h"
#include "yard/net.h"
#include "yard/proto_ircline.h"
#include "yard/shm.h"

void yard_chatlog_opts_default(yard_chatlog_opts_t *o)
{
    *o = (yard_chatlog_opts_t){.segment_bytes = 64u << 20,
                               .fsync = YARD_CHATLOG_FSYNC_INTERVAL,
                               .fsync_interval_ns = 100000000ull};
}

uint64_t chatlog_mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

void chatlog_seg_path(char *out, size_t cap, const char *dir, uint64_t first)
{
    snprintf(out, cap, "%s/%020" PRIu64 SEG_SUFFIX, dir, first);
}

struct idx_entry chatlog_idx_disk(struct idx_entry e)
{
    return (struct idx_entry){.off = htole64(e.off), .ts_ns = (int64_t)htole64((uint64_t)e.ts_ns),
                              .hash = htole32(e.hash), .type = htole32(e.type)};
}

struct idx_entry chatlog_idx_host(struct idx_entry e)
{
    return (struct idx_entry){.off = le64toh(e.off), .ts_ns = (int64_t)le64toh((uint64_t)e.ts_ns),
                              .hash = le32toh(e.hash), .type = le32toh(e.type)};
}

void chatlog_idx_path(char *out, size_t cap, const char *dir, uint64_t first)
{
    snprintf(out, cap, "%s/%020" PRIu64 IDX_SUFFIX, dir, first);
}

uint32_t yard_chatlog_target_hash(const char *t, size_t n)
{
    uint64_t h = YARD_FNV1A_INIT;
    for (size_t i = 0; i < n; i++) {
        char c = yard_irc_fold(t[i]); /* as the chat app folds names */
        h = yard_fnv1a(h, &c, 1);
    }
    uint32_t v = (uint32_t)(h ^ (h >> 32));
    return v ? v : 1; /* 0 means "any target" to yard_chatlog_seek */
}

/* Write the index of the segment whose good bytes are data[0..len). */
static int idx_build(const char *dir, uint64_t first, const uint8_t *data, size_t len)
{
    char path[4200];
    chatlog_idx_path(path, sizeof path, dir, first);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    struct idx_entry buf[512];
    size_t n = 0, off = 0;
    int rc = 0;
    yard_logrec_t r;
    while (rc == 0 && off < len &&
           yard_logrec_decode(data + off, len - off, &r) == YARD_LOGREC_COMPLETE) {
        buf[n++] = chatlog_idx_disk((struct idx_entry){
            .off = off, .ts_ns = r.ts_ns, .hash = yard_chatlog_target_hash(r.target, r.target_len),
            .type = (uint32_t)r.type});
        off += r.len;
        if (n == sizeof buf / sizeof buf[0]) {
            rc = yard_write_all(fd, buf, n * sizeof buf[0]);
            n = 0;
        }
    }
    if (rc == 0 && n)
        rc = yard_write_all(fd, buf, n * sizeof buf[0]);
    close(fd);
    return rc;
}

/* Does the index of a segment of size bytes hold count entries (count 0:
 * as many as it has), the last of them its last record? */
static bool idx_whole(const char *dir, uint64_t first, uint64_t size, uint64_t count)
{
    char path[4200];
    chatlog_idx_path(path, sizeof path, dir, first);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st;
    bool ok = fstat(fd, &st) == 0 && st.st_size % (off_t)sizeof(struct idx_entry) == 0;
    uint64_t n = ok ? (uint64_t)st.st_size / sizeof(struct idx_entry) : 0;
    ok = ok && (count ? n == count : true) && (n > 0) == (size > 0);
    if (ok && n) {
        struct idx_entry e;
        ok = pread(fd, &e, sizeof e, (off_t)((n - 1) * sizeof e)) == (ssize_t)sizeof e;
        e = chatlog_idx_host(e);
        chatlog_seg_path(path, sizeof path, dir, first);
        int sfd = ok ? open(path, O_RDONLY | O_CLOEXEC) : -1;
        uint8_t rec[YARD_LOGREC_MAX];
        long got = sfd >= 0 ? yard_pread_full(sfd, rec, sizeof rec, (off_t)e.off) : -1;
        yard_logrec_t r;
        ok = got > 0 && yard_logrec_decode(rec, (size_t)got, &r) == YARD_LOGREC_COMPLETE &&
             r.id == first + n - 1 && e.off + r.len == size;
        if (sfd >= 0)
            close(sfd);
    }
    close(fd);
    return ok;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The segments' first ids, ascending. */
int chatlog_list_segments(const char *dir, uint64_t **ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len != 20 + strlen(SEG_SUFFIX) || strcmp(e->d_name + 20, SEG_SUFFIX) != 0)
            continue;
        char *end;
        uint64_t v = strtoull(e->d_name, &end, 10);
        if (end != e->d_name + 20 || v == 0)
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            uint64_t *g = realloc(*ids, cap * sizeof *g);
            if (!g) {
                closedir(d);
                free(*ids);
                *ids = NULL;
                return -ENOMEM;
            }
            *ids = g;
        }
        (*ids)[(*n)++] = v;
    }
    closedir(d);
    if (*n > 1)
        qsort(*ids, *n, sizeof **ids, cmp_u64);
    return 0;
}

static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Read a whole file (segments are at most segment_bytes). */
int chatlog_slurp(const char *path, uint8_t **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    size_t size = (size_t)st.st_size;
    uint8_t *p = malloc(size ? size : 1);
    if (!p) {
        close(fd);
        return -ENOMEM;
    }
    long got = yard_pread_full(fd, p, size, 0);
    close(fd);
    *data = p;
    *len = got > 0 ? (size_t)got : 0;
    return 0;
}

/* Scan a segment's bytes: how many good records from its first id on, and
 * where the good part ends. */
size_t chatlog_scan(const uint8_t *p, size_t n, uint64_t first, uint64_t *count, int64_t *last_ts)
{
    size_t off = 0;
    *count = 0;
    yard_logrec_t r;
    while (off < n && yard_logrec_decode(p + off, n - off, &r) == YARD_LOGREC_COMPLETE &&
           r.id == first + *count) {
        off += r.len;
        (*count)++;
        if (last_ts)
            *last_ts = r.ts_ns;
    }
    return off;
}

/* A new segment and its index (*ifd); the segment's descriptor. */
int chatlog_create_segment(yard_chatlog_t *log, uint64_t first, int *ifd)
{
    char path[4200];
    chatlog_idx_path(path, sizeof path, log->dir, first);
    *ifd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (*ifd < 0)
        return -errno;
    chatlog_seg_path(path, sizeof path, log->dir, first);
    /* O_TRUNC: a file by this name can only hold bytes never committed. */
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        close(*ifd);
        *ifd = -1;
        return -e;
    }
    fsync_dir(log->dir);
    return fd;
}

/* Under the lock: bytes of the active segment at off into the tail. */
void chatlog_tail_put(struct shared *sh, uint64_t off, const uint8_t *p, size_t n)
{
    while (n) {
        size_t at = (size_t)(off % YARD_CHATLOG_TAIL_BYTES);
        size_t k = YARD_CHATLOG_TAIL_BYTES - at < n ? YARD_CHATLOG_TAIL_BYTES - at : n;
        memcpy(sh->tail + at, p, k);
        off += k;
        p += k;
        n -= k;
    }
    if (off - sh->tail_lo > YARD_CHATLOG_TAIL_BYTES)
        sh->tail_lo = off - YARD_CHATLOG_TAIL_BYTES;
}

/* Under the lock: the tail's bytes at off into out. */
void chatlog_tail_get(const struct shared *sh, uint64_t off, uint8_t *out, size_t n)
{
    while (n) {
        size_t at = (size_t)(off % YARD_CHATLOG_TAIL_BYTES);
        size_t k = YARD_CHATLOG_TAIL_BYTES - at < n ? YARD_CHATLOG_TAIL_BYTES - at : n;
        memcpy(out, sh->tail + at, k);
        off += k;
        out += k;
        n -= k;
    }
}

/* Open: the last segment keeps its good prefix and the rest is cut off
 * (reported in rec); its index is checked, and rebuilt when it does not
 * match. *count and *size: its good records and bytes. */
static int recover_last_segment(const char *logdir, uint64_t first, uint64_t *count,
                                uint64_t *size, yard_chatlog_recovery_t *rec, char *err,
                                size_t errlen)
{
    char path[4200];
    chatlog_seg_path(path, sizeof path, logdir, first);
    uint8_t *data;
    size_t len;
    int rc = chatlog_slurp(path, &data, &len);
    if (rc < 0) {
        snprintf(err, errlen, "read %s: %s", path, strerror(-rc));
        return rc;
    }
    *size = chatlog_scan(data, len, first, count, NULL);
    rc = idx_whole(logdir, first, *size, *count) ? 0 : idx_build(logdir, first, data, *size);
    free(data);
    if (rc < 0) {
        chatlog_idx_path(path, sizeof path, logdir, first);
        snprintf(err, errlen, "writing %s: %s", path, strerror(-rc));
        return rc;
    }
    if (*size < len) {
        if (truncate(path, (off_t)*size) < 0) {
            rc = -errno;
            snprintf(err, errlen, "truncate %s: %s", path, strerror(errno));
            return rc;
        }
        rec->dropped_bytes = len - *size;
        snprintf(rec->message, sizeof rec->message,
                 "log: cut %" PRIu64 " bytes of a torn or corrupt tail off %.300s at offset %" PRIu64
                 " (last good id %" PRIu64 ")",
                 (uint64_t)(len - *size), path, *size, first + *count - 1);
    }
    return 0;
}

/* Open: the older segments' indexes (all but the last of segs) checked, and
 * rebuilt when they do not match (a log written before indexes, or an
 * index lost). */
static int index_older_segments(const char *logdir, const uint64_t *segs, size_t nseg,
                                char *err, size_t errlen)
{
    char path[4200];
    for (size_t i = 0; i + 1 < nseg; i++) {
        chatlog_seg_path(path, sizeof path, logdir, segs[i]);
        struct stat st;
        if (stat(path, &st) < 0 || idx_whole(logdir, segs[i], (uint64_t)st.st_size, 0))
            continue;
        uint8_t *data;
        size_t len;
        uint64_t n;
        int rc = chatlog_slurp(path, &data, &len);
        if (rc == 0) {
            rc = idx_build(logdir, segs[i], data, chatlog_scan(data, len, segs[i], &n, NULL));
            free(data);
        }
        if (rc < 0) {
            snprintf(err, errlen, "indexing %s: %s", path, strerror(-rc));
            return rc;
        }
    }
    return 0;
}

int yard_chatlog_open(const char *dir, const yard_chatlog_opts_t *o, yard_chatlog_t **out,
                      yard_chatlog_recovery_t *rec, char *err, size_t errlen)
{
    yard_chatlog_t *log = calloc(1, sizeof *log);
    uint64_t *segs = NULL;
    size_t nseg = 0;
    int rc = -ENOMEM;
    if (!log) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    log->lock_fd = log->wfd = log->ifd = log->wake_fd = -1;
    log->o = *o;
    if (!log->o.segment_bytes)
        log->o.segment_bytes = 64u << 20;
    memset(rec, 0, sizeof *rec);
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        rc = -errno;
        snprintf(err, errlen, "mkdir %s: %s", dir, strerror(errno));
        goto fail;
    }
    snprintf(log->dir, sizeof log->dir, "%s/log", dir);
    if (mkdir(log->dir, 0700) < 0 && errno != EEXIST) {
        rc = -errno;
        snprintf(err, errlen, "mkdir %s: %s", log->dir, strerror(errno));
        goto fail;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/LOCK", log->dir);
    log->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (log->lock_fd < 0 || fcntl(log->lock_fd, F_OFD_SETLK, &fl) < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", path,
                 errno == EAGAIN || errno == EACCES ? "another server is using this log"
                                                    : strerror(errno));
        goto fail;
    }
    rc = chatlog_list_segments(log->dir, &segs, &nseg);
    if (rc < 0) {
        snprintf(err, errlen, "opendir %s: %s", log->dir, strerror(-rc));
        goto fail;
    }
    uint64_t first = nseg ? segs[nseg - 1] : 1, count = 0, size = 0;
    if (nseg) {
        rc = recover_last_segment(log->dir, first, &count, &size, rec, err, errlen);
        if (rc < 0)
            goto fail;
    }
    log->sh = mmap(NULL, sizeof *log->sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (log->sh == MAP_FAILED) {
        log->sh = NULL;
        rc = -errno;
        snprintf(err, errlen, "mmap: %s", strerror(errno));
        goto fail;
    }
    yard_shm_mutex_init(&log->sh->mu);
    yard_shm_mutex_init(&log->sh->qmu);
    yard_shm_mutex_init(&log->sh->scan_mu);
    log->wake_fd = eventfd(0, EFD_CLOEXEC);
    if (log->wake_fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "eventfd: %s", strerror(errno));
        goto fail;
    }
    log->sh->next_id = first + count;
    log->sh->active_first = first;
    log->sh->active_size = size;
    log->sh->last_sync_ns = chatlog_mono_ns();
    log->sh->tail_lo = size; /* what is on disk already is read from there */
    if (!nseg) {
        log->wfd = chatlog_create_segment(log, first, &log->ifd);
        if (log->wfd < 0) {
            rc = log->wfd;
            chatlog_seg_path(path, sizeof path, log->dir, first);
            snprintf(err, errlen, "create %s: %s", path, strerror(-rc));
            goto fail;
        }
        log->wseg = first;
    }
    if ((rc = index_older_segments(log->dir, segs, nseg, err, errlen)) < 0)
        goto fail;
    free(segs);
    if (log->o.retain_s)
        yard_chatlog_prune(log, (int64_t)time(NULL));
    *out = log;
    return 0;
fail:
    free(segs);
    yard_chatlog_close(log);
    return rc;
}

void yard_chatlog_close(yard_chatlog_t *log)
{
    if (!log)
        return;
    if (log->writer_pid && log->writer_pid == getpid()) {
        atomic_store(&log->writer_stop, true);
        uint64_t one = 1;
        if (write(log->wake_fd, &one, sizeof one) == (ssize_t)sizeof one)
            pthread_join(log->writer_thread, NULL);
        log->writer_pid = 0;
    }
    if (log->sh && log->sh->qlen)
        yard_chatlog_write_deferred(log); /* what the writer thread did not get to */
    if (log->wake_fd >= 0)
        close(log->wake_fd);
    if (log->sh && log->wfd >= 0 && log->o.fsync != YARD_CHATLOG_FSYNC_NEVER)
        fdatasync(log->wfd);
    if (log->wfd >= 0)
        close(log->wfd);
    if (log->ifd >= 0)
        close(log->ifd);
    if (log->lock_fd >= 0)
        close(log->lock_fd);
    if (log->sh)
        munmap(log->sh, sizeof *log->sh);
    free(log);
}

void chatlog_lock(yard_chatlog_t *log)
{
    if (yard_shm_mutex_lock(&log->sh->mu)) {
        /* A process died holding it, maybe mid-write: bytes past the
         * committed size are not part of the log. */
        if (log->wfd >= 0 && log->wseg == log->sh->active_first)
            ftruncate(log->wfd, (off_t)log->sh->active_size);
    }
}

void chatlog_unlock(yard_chatlog_t *log) { pthread_mutex_unlock(&log->sh->mu); }

/* Only reads happen under it: a holder that died left nothing half-done. */
void yard_chatlog_scan_begin(yard_chatlog_t *log) { yard_shm_mutex_lock(&log->sh->scan_mu); }

void yard_chatlog_scan_end(yard_chatlog_t *log) { pthread_mutex_unlock(&log->sh->scan_mu); }
