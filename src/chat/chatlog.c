/* Linux-only: eventfd, OFD locks. What a port uses instead: docs/portability.md. */
/* The chat service's durable message log (include/yard/chatlog.h). */
#define _GNU_SOURCE /* F_OFD_SETLK, MAP_ANONYMOUS, htole64/le64toh */

#include "yard/chatlog.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "yard/hash.h"
#include "yard/log.h"
#include "yard/net.h"
#include "yard/proto_ircline.h"
#include "yard/shm.h"

#define SEG_SUFFIX ".seg"
#define IDX_SUFFIX ".idx"
#define READ_CHUNK (64u * 1024u)

/* What every process of the server shares (an anonymous shared mapping
 * made at open, before any fork). */
struct shared {
    pthread_mutex_t mu;
    uint64_t next_id;
    uint64_t active_first; /* name of the segment appends go to */
    uint64_t active_size;  /* its committed size: readers stop there */
    uint64_t last_sync_ns;
    bool dirty;
    /* The segment before the active one and its final size, so that a
     * cursor at its end moves on without looking at the directory. */
    uint64_t prev_first, prev_size;
    /* The tail: the active segment's bytes [tail_lo, active_size) are also
     * in tail[] (at offset % YARD_CHATLOG_TAIL_BYTES), so readers that keep
     * up never touch the files. */
    uint64_t tail_lo;
    uint8_t tail[YARD_CHATLOG_TAIL_BYTES];
    /* Deferred records, oldest at qhead (guarded by qmu, never held across
     * I/O; taken out only under mu, so that appends keep their order). */
    pthread_mutex_t qmu;
    unsigned qhead, qlen;
    uint64_t qdropped;
    yard_chatlog_entry_t q[YARD_CHATLOG_DEFER_SLOTS];
    pthread_mutex_t scan_mu; /* held by the one long read under way (yard_chatlog_scan_begin) */
};

struct yard_chatlog {
    char dir[4096]; /* DIR/log */
    yard_chatlog_opts_t o;
    struct shared *sh;
    int lock_fd;
    /* The descriptor appends go through (guarded by sh->mu). Inherited over
     * fork: every process writes at an explicit offset under the mutex. */
    int wfd;
    int ifd; /* the active segment's index, beside wfd */
    uint64_t wseg;
    /* The writer thread, in the process that started it. wake_fd (an
     * eventfd made at open, so every process has it) wakes it. */
    int wake_fd;
    pid_t writer_pid; /* 0: no writer thread */
    pthread_t writer_thread;
    atomic_bool writer_stop;
    void (*appended)(void *arg, uint64_t last_id);
    void *appended_arg;
};


void yard_chatlog_opts_default(yard_chatlog_opts_t *o)
{
    *o = (yard_chatlog_opts_t){.segment_bytes = 64u << 20,
                               .fsync = YARD_CHATLOG_FSYNC_INTERVAL,
                               .fsync_interval_ns = 100000000ull};
}

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void seg_path(char *out, size_t cap, const char *dir, uint64_t first)
{
    snprintf(out, cap, "%s/%020" PRIu64 SEG_SUFFIX, dir, first);
}

/* The index of a segment (DIR/log/<first>.idx): one entry per record, in
 * id order, so entry i is record first + i. It is derived from the segment
 * and rebuilt from it whenever it does not match (open checks). On disk an
 * entry is 24 bytes, each field little-endian like the records' (a log
 * moved to a big-endian machine reads as it is): idx_disk() before a
 * write, idx_host() after a read. */
struct idx_entry {
    uint64_t off;  /* the record's offset in the segment */
    int64_t ts_ns; /* its timestamp */
    uint32_t hash; /* yard_chatlog_target_hash of its target */
    uint32_t type;
};
_Static_assert(sizeof(struct idx_entry) == 24, "the index entry is 24 bytes on disk");

static struct idx_entry idx_disk(struct idx_entry e)
{
    return (struct idx_entry){.off = htole64(e.off), .ts_ns = (int64_t)htole64((uint64_t)e.ts_ns),
                              .hash = htole32(e.hash), .type = htole32(e.type)};
}

static struct idx_entry idx_host(struct idx_entry e)
{
    return (struct idx_entry){.off = le64toh(e.off), .ts_ns = (int64_t)le64toh((uint64_t)e.ts_ns),
                              .hash = le32toh(e.hash), .type = le32toh(e.type)};
}

static void idx_path(char *out, size_t cap, const char *dir, uint64_t first)
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
    idx_path(path, sizeof path, dir, first);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    struct idx_entry buf[512];
    size_t n = 0, off = 0;
    int rc = 0;
    yard_logrec_t r;
    while (rc == 0 && off < len &&
           yard_logrec_decode(data + off, len - off, &r) == YARD_LOGREC_COMPLETE) {
        buf[n++] = idx_disk((struct idx_entry){
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
    idx_path(path, sizeof path, dir, first);
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
        e = idx_host(e);
        seg_path(path, sizeof path, dir, first);
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
static int list_segments(const char *dir, uint64_t **ids, size_t *n)
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
static int slurp(const char *path, uint8_t **data, size_t *len)
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
static size_t scan(const uint8_t *p, size_t n, uint64_t first, uint64_t *count, int64_t *last_ts)
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
static int create_segment(yard_chatlog_t *log, uint64_t first, int *ifd)
{
    char path[4200];
    idx_path(path, sizeof path, log->dir, first);
    *ifd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (*ifd < 0)
        return -errno;
    seg_path(path, sizeof path, log->dir, first);
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
static void tail_put(struct shared *sh, uint64_t off, const uint8_t *p, size_t n)
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
static void tail_get(const struct shared *sh, uint64_t off, uint8_t *out, size_t n)
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
    rc = list_segments(log->dir, &segs, &nseg);
    if (rc < 0) {
        snprintf(err, errlen, "opendir %s: %s", log->dir, strerror(-rc));
        goto fail;
    }
    uint64_t first = nseg ? segs[nseg - 1] : 1, count = 0, size = 0;
    if (nseg) {
        /* The last segment: keep its good prefix, cut off the rest. */
        seg_path(path, sizeof path, log->dir, first);
        uint8_t *data;
        size_t len;
        rc = slurp(path, &data, &len);
        if (rc < 0) {
            snprintf(err, errlen, "read %s: %s", path, strerror(-rc));
            goto fail;
        }
        size = scan(data, len, first, &count, NULL);
        rc = idx_whole(log->dir, first, size, count) ? 0 : idx_build(log->dir, first, data, size);
        free(data);
        if (rc < 0) {
            idx_path(path, sizeof path, log->dir, first);
            snprintf(err, errlen, "writing %s: %s", path, strerror(-rc));
            goto fail;
        }
        if (size < len) {
            if (truncate(path, (off_t)size) < 0) {
                rc = -errno;
                snprintf(err, errlen, "truncate %s: %s", path, strerror(errno));
                goto fail;
            }
            rec->dropped_bytes = len - size;
            snprintf(rec->message, sizeof rec->message,
                     "log: cut %" PRIu64 " bytes of a torn or corrupt tail off %.300s at offset %" PRIu64
                     " (last good id %" PRIu64 ")",
                     (uint64_t)(len - size), path, (uint64_t)size, first + count - 1);
        }
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
    log->sh->last_sync_ns = mono_ns();
    log->sh->tail_lo = size; /* what is on disk already is read from there */
    if (!nseg) {
        log->wfd = create_segment(log, first, &log->ifd);
        if (log->wfd < 0) {
            rc = log->wfd;
            seg_path(path, sizeof path, log->dir, first);
            snprintf(err, errlen, "create %s: %s", path, strerror(-rc));
            goto fail;
        }
        log->wseg = first;
    }
    /* The older segments' indexes: checked, and rebuilt when they do not
     * match (a log written before indexes, or an index lost). */
    for (size_t i = 0; i + 1 < nseg; i++) {
        seg_path(path, sizeof path, log->dir, segs[i]);
        struct stat st;
        if (stat(path, &st) < 0 || idx_whole(log->dir, segs[i], (uint64_t)st.st_size, 0))
            continue;
        uint8_t *data;
        size_t len;
        uint64_t n;
        rc = slurp(path, &data, &len);
        if (rc == 0) {
            rc = idx_build(log->dir, segs[i], data, scan(data, len, segs[i], &n, NULL));
            free(data);
        }
        if (rc < 0) {
            snprintf(err, errlen, "indexing %s: %s", path, strerror(-rc));
            goto fail;
        }
    }
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

static void lock(yard_chatlog_t *log)
{
    if (yard_shm_mutex_lock(&log->sh->mu)) {
        /* A process died holding it, maybe mid-write: bytes past the
         * committed size are not part of the log. */
        if (log->wfd >= 0 && log->wseg == log->sh->active_first)
            ftruncate(log->wfd, (off_t)log->sh->active_size);
    }
}

static void unlock(yard_chatlog_t *log) { pthread_mutex_unlock(&log->sh->mu); }

/* Only reads happen under it: a holder that died left nothing half-done. */
void yard_chatlog_scan_begin(yard_chatlog_t *log) { yard_shm_mutex_lock(&log->sh->scan_mu); }

void yard_chatlog_scan_end(yard_chatlog_t *log) { pthread_mutex_unlock(&log->sh->scan_mu); }

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
    idx_path(path, sizeof path, log->dir, log->sh->active_first);
    log->ifd = open(path, O_RDWR | O_CLOEXEC);
    seg_path(path, sizeof path, log->dir, log->sh->active_first);
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
        int ifd, fd = create_segment(log, sh->next_id, &ifd);
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
    struct idx_entry e = idx_disk((struct idx_entry){
        .off = sh->active_size, .ts_ns = r->ts_ns,
        .hash = yard_chatlog_target_hash(r->target, r->target_len), .type = (uint32_t)r->type});
    ssize_t iw = pwrite(log->ifd, &e, sizeof e, (off_t)((r->id - sh->active_first) * sizeof e));
    if (iw != (ssize_t)sizeof e) {
        int rc = iw < 0 ? -errno : -EIO;
        ftruncate(log->wfd, (off_t)sh->active_size); /* no record the index lacks */
        return rc;
    }
    tail_put(sh, sh->active_size, buf, (size_t)len);
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
    uint64_t mono = mono_ns();
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
    lock(log);
    int rc = writer(log);
    if (rc == 0) {
        last = deferred_locked(log, &rotated);
        sync_due_locked(log);
    } else {
        yard_log_limited(YARD_LOG_WARN, "chat log: opening the active segment: %s",
                         strerror(-rc));
    }
    unlock(log);
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
    lock(log);
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
    unlock(log);
    if (rotated && log->o.retain_s)
        yard_chatlog_prune(log, r.ts_ns / 1000000000);
    return rc;
}

int yard_chatlog_sync(yard_chatlog_t *log)
{
    int rc = 0;
    lock(log);
    if (log->sh->dirty && log->o.fsync != YARD_CHATLOG_FSYNC_NEVER && writer(log) == 0) {
        if (fdatasync(log->wfd) < 0)
            rc = -errno;
        log->sh->dirty = false;
        log->sh->last_sync_ns = mono_ns();
    }
    unlock(log);
    return rc;
}

uint64_t yard_chatlog_last_id(yard_chatlog_t *log)
{
    lock(log);
    uint64_t v = log->sh->next_id - 1;
    unlock(log);
    return v;
}

int yard_chatlog_prune(yard_chatlog_t *log, int64_t now_s)
{
    if (!log->o.retain_s)
        return 0;
    uint64_t *segs;
    size_t n;
    if (list_segments(log->dir, &segs, &n) < 0)
        return 0;
    lock(log);
    uint64_t active = log->sh->active_first;
    unlock(log);
    int deleted = 0;
    for (size_t i = 0; i < n; i++) {
        if (segs[i] >= active)
            break;
        char path[4200];
        seg_path(path, sizeof path, log->dir, segs[i]);
        struct stat st;
        /* A segment's last write is its mtime: it is older than the
         * retention when even its newest record is. */
        if (stat(path, &st) == 0 && (int64_t)st.st_mtime < now_s - (int64_t)log->o.retain_s &&
            unlink(path) == 0) {
            deleted++;
            idx_path(path, sizeof path, log->dir, segs[i]);
            unlink(path);
        }
    }
    free(segs);
    return deleted;
}

/* ---- reading ------------------------------------------------------------- */

uint64_t yard_chatlog_cursor_end(yard_chatlog_t *log, yard_chatlog_cursor_t *cur)
{
    lock(log);
    *cur = (yard_chatlog_cursor_t){.seg = log->sh->active_first, .off = log->sh->active_size,
                                   .from = log->sh->next_id};
    unlock(log);
    return cur->from - 1;
}

void yard_chatlog_cursor_at(yard_chatlog_cursor_t *cur, uint64_t from_id)
{
    *cur = (yard_chatlog_cursor_t){.seg = 0, .off = 0, .from = from_id};
}

/* Under the lock: move a cursor at the end of the previous segment, or one
 * not placed yet that asks only for what is to come, to the active one. */
static void cursor_settle(const struct shared *sh, yard_chatlog_cursor_t *cur)
{
    if (cur->seg && cur->seg == sh->prev_first && cur->off >= sh->prev_size) {
        cur->seg = sh->active_first;
        cur->off = 0;
    } else if (!cur->seg && cur->from >= sh->next_id) {
        cur->seg = sh->active_first;
        cur->off = sh->active_size;
    }
}

long yard_chatlog_read_tail(yard_chatlog_t *log, yard_chatlog_cursor_t *cur, uint8_t *buf,
                            size_t cap)
{
    if (cap < YARD_LOGREC_MAX)
        return -EINVAL;
    lock(log);
    struct shared *sh = log->sh;
    cursor_settle(sh, cur);
    long n = -EAGAIN;
    if (cur->seg == sh->active_first && cur->off >= sh->tail_lo && cur->off <= sh->active_size) {
        uint64_t avail = sh->active_size - cur->off;
        n = (long)(avail < cap ? avail : cap);
        tail_get(sh, cur->off, buf, (size_t)n);
    }
    unlock(log);
    return n;
}

/* The first segment after seg (0: none), or the one holding from_id when
 * seg is 0. */
static int segment_after(const char *dir, uint64_t seg, uint64_t from_id, uint64_t *out)
{
    uint64_t *segs;
    size_t n;
    int rc = list_segments(dir, &segs, &n);
    if (rc < 0)
        return rc;
    *out = 0;
    if (seg) {
        for (size_t i = 0; i < n && !*out; i++)
            if (segs[i] > seg)
                *out = segs[i];
    } else if (n) {
        *out = segs[0];
        for (size_t i = 0; i < n; i++)
            if (segs[i] <= from_id)
                *out = segs[i];
    }
    free(segs);
    return 0;
}

/* Where record from_id starts in segment seg, through the segment's index
 * (entry i is record seg + i), so that a read from the middle of a 64 MiB
 * segment does not decode every record before it; 0 (the segment's start,
 * the records below from_id skipped) when the index cannot tell. */
static uint64_t idx_offset(yard_chatlog_t *log, uint64_t seg, uint64_t from_id)
{
    lock(log);
    bool committed = from_id < log->sh->next_id; /* its entry is written */
    unlock(log);
    if (from_id <= seg || !committed)
        return 0;
    char path[4200];
    idx_path(path, sizeof path, log->dir, seg);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct idx_entry e;
    long got = yard_pread_full(fd, &e, sizeof e, (off_t)((from_id - seg) * sizeof e));
    close(fd);
    return got == (long)sizeof e ? idx_host(e).off : 0;
}

long yard_chatlog_read(yard_chatlog_t *log, yard_chatlog_cursor_t *cur, uint8_t *buf, size_t cap)
{
    long n = yard_chatlog_read_tail(log, cur, buf, cap);
    if (n != -EAGAIN)
        return n;
    /* Each turn returns or moves to a later segment. */
    for (;;) {
        if (!cur->seg) {
            int rc = segment_after(log->dir, 0, cur->from, &cur->seg);
            if (rc < 0)
                return rc;
            if (!cur->seg)
                return 0; /* no segment at all */
            cur->off = idx_offset(log, cur->seg, cur->from);
        }
        lock(log);
        uint64_t active = log->sh->active_first, committed = log->sh->active_size;
        unlock(log);
        char path[4200];
        seg_path(path, sizeof path, log->dir, cur->seg);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        uint64_t limit = 0;
        if (fd >= 0 && cur->seg == active)
            limit = committed;
        else if (fd >= 0 && fstat(fd, &st) == 0)
            limit = (uint64_t)st.st_size; /* a complete segment */
        else if (fd < 0 && errno != ENOENT)
            return -errno;
        if (fd >= 0 && cur->off < limit) {
            size_t want = limit - cur->off < cap ? (size_t)(limit - cur->off) : cap;
            long got = yard_pread_full(fd, buf, want, cur->off);
            close(fd);
            return got;
        }
        if (fd >= 0)
            close(fd);
        if (cur->seg >= active)
            return 0; /* nothing more yet */
        /* This segment is complete (or was pruned): on to the next one. */
        uint64_t next;
        int rc = segment_after(log->dir, cur->seg, 0, &next);
        if (rc < 0)
            return rc;
        if (!next)
            return 0;
        cur->seg = next;
        cur->off = 0;
    }
}

int yard_chatlog_take(yard_chatlog_cursor_t *cur, const uint8_t *buf, size_t len, size_t *pos,
                      yard_chatlog_rec_t *r)
{
    while (*pos < len) {
        int v = yard_logrec_decode(buf + *pos, len - *pos, r);
        if (v == YARD_LOGREC_PARTIAL && *pos > 0)
            return 0; /* the rest comes with the next read */
        if (v != YARD_LOGREC_COMPLETE)
            return -EBADMSG; /* committed bytes that do not decode */
        *pos += r->len;
        cur->off += r->len;
        if (r->id >= cur->from)
            return 1;
    }
    return 0;
}

struct yard_chatlog_iter {
    yard_chatlog_t *log;
    yard_chatlog_cursor_t cur;
    uint8_t *buf;
    size_t len, pos;
};

int yard_chatlog_iter_open(yard_chatlog_t *log, uint64_t from_id, yard_chatlog_iter_t **out)
{
    yard_chatlog_iter_t *it = calloc(1, sizeof *it);
    if (!it || !(it->buf = malloc(READ_CHUNK))) {
        free(it);
        return -ENOMEM;
    }
    it->log = log;
    yard_chatlog_cursor_at(&it->cur, from_id);
    *out = it;
    return 0;
}

void yard_chatlog_iter_close(yard_chatlog_iter_t *it)
{
    if (!it)
        return;
    free(it->buf);
    free(it);
}

int yard_chatlog_next(yard_chatlog_iter_t *it, yard_chatlog_rec_t *r)
{
    for (;;) {
        int rc = yard_chatlog_take(&it->cur, it->buf, it->len, &it->pos, r);
        if (rc != 0)
            return rc;
        long n = yard_chatlog_read(it->log, &it->cur, it->buf, READ_CHUNK);
        it->len = it->pos = 0;
        if (n <= 0)
            return (int)n;
        it->len = (size_t)n;
    }
}

/* Read DIR/log's segments in order, read-only, and hand each one's bytes to
 * fn (non-zero stops). A segment pruned meanwhile is skipped. */
static int each_segment(const char *dir,
                        int (*fn)(const char *path, uint64_t first, const uint8_t *data,
                                  size_t len, void *arg),
                        void *arg)
{
    char logdir[4200];
    snprintf(logdir, sizeof logdir, "%s/log", dir);
    uint64_t *segs;
    size_t n;
    int rc = list_segments(logdir, &segs, &n);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        char path[4300];
        seg_path(path, sizeof path, logdir, segs[i]);
        uint8_t *data;
        size_t len;
        if ((rc = slurp(path, &data, &len)) < 0) {
            if (rc == -ENOENT) {
                rc = 0;
                continue;
            }
            break;
        }
        int stop = fn(path, segs[i], data, len, arg);
        free(data);
        if (stop)
            break;
    }
    free(segs);
    return rc;
}

struct verify_state {
    yard_chatlog_verify_t *v;
    uint64_t expect;
};

static int verify_segment(const char *path, uint64_t first, const uint8_t *data, size_t len,
                          void *arg)
{
    struct verify_state *vs = arg;
    yard_chatlog_verify_t *v = vs->v;
    if (vs->expect && first != vs->expect)
        snprintf(v->problem, sizeof v->problem,
                 "%.300s: starts at id %" PRIu64 ", expected %" PRIu64, path, first, vs->expect);
    uint64_t count;
    size_t good = scan(data, len, first, &count, NULL);
    if (!v->problem[0] && good < len)
        snprintf(v->problem, sizeof v->problem,
                 "%.300s: %zu bytes at offset %zu do not decode as record %" PRIu64, path,
                 len - good, good, first + count);
    if (!v->first_id && count)
        v->first_id = first;
    if (count)
        v->last_id = first + count - 1;
    v->records += count;
    v->segments++;
    vs->expect = first + count;
    return v->problem[0] != 0;
}

int yard_chatlog_verify(const char *dir, yard_chatlog_verify_t *v)
{
    memset(v, 0, sizeof *v);
    struct verify_state vs = {.v = v};
    int rc = each_segment(dir, verify_segment, &vs);
    if (rc < 0)
        return rc;
    return v->problem[0] ? -EBADMSG : 0;
}

struct walk_state {
    int (*fn)(const yard_chatlog_rec_t *r, void *arg);
    void *arg;
};

static int walk_segment(const char *path, uint64_t first, const uint8_t *data, size_t len,
                        void *arg)
{
    struct walk_state *ws = arg;
    yard_logrec_t r;
    for (size_t off = 0;
         off < len && yard_logrec_decode(data + off, len - off, &r) == YARD_LOGREC_COMPLETE;
         off += r.len)
        if (ws->fn(&r, ws->arg))
            return 1;
    return 0;
}

int yard_chatlog_walk(const char *dir, int (*fn)(const yard_chatlog_rec_t *r, void *arg),
                      void *arg)
{
    struct walk_state ws = {fn, arg};
    return each_segment(dir, walk_segment, &ws);
}

/* ---- looking things up through the index ---------------------------------- */

/* One segment opened for lookups: its index and its records. */
struct seg_reader {
    uint64_t first, n; /* entries usable: committed records only */
    int ifd, sfd;
};

static int seg_open(yard_chatlog_t *log, uint64_t first, uint64_t next_id, struct seg_reader *sr)
{
    char path[4200];
    sr->first = first;
    idx_path(path, sizeof path, log->dir, first);
    sr->ifd = open(path, O_RDONLY | O_CLOEXEC);
    seg_path(path, sizeof path, log->dir, first);
    sr->sfd = sr->ifd < 0 ? -1 : open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (sr->sfd < 0 || fstat(sr->ifd, &st) < 0) {
        int e = errno;
        if (sr->ifd >= 0)
            close(sr->ifd);
        return -e;
    }
    sr->n = (uint64_t)st.st_size / sizeof(struct idx_entry);
    if (first + sr->n > next_id) /* an append under way: not committed yet */
        sr->n = next_id > first ? next_id - first : 0;
    return 0;
}

static void seg_close(struct seg_reader *sr)
{
    close(sr->ifd);
    close(sr->sfd);
}

static bool hash_wanted(uint32_t h, const uint32_t *hashes, int nhash)
{
    if (!nhash)
        return true;
    for (int i = 0; i < nhash; i++)
        if (hashes[i] == h)
            return true;
    return false;
}

/* A walk through the index: what it looks for, and how far it may go. */
struct seek_walk {
    int dir;
    const uint32_t *hashes;
    int nhash;
    uint64_t *entries_left; /* index entries it may still look at (NULL: any) */
    uint64_t next; /* the id to go on from, once it stopped */
    int (*fn)(const yard_chatlog_rec_t *r, void *arg);
    void *arg;
};

/* Entries [lo, hi) of a segment in the walk's direction, in blocks: 0 when
 * the range is done, YARD_CHATLOG_SEEK_STOPPED when fn stopped,
 * YARD_CHATLOG_SEEK_MORE when the entries allowed ran out (w->next says
 * where in both cases), -errno. */
static int seg_visit(struct seg_reader *sr, uint64_t lo, uint64_t hi, struct seek_walk *w)
{
    struct idx_entry blk[1024];
    uint8_t rec[YARD_LOGREC_MAX];
    int dir = w->dir;
    while (lo < hi) {
        uint64_t k = hi - lo < 1024 ? hi - lo : 1024;
        uint64_t at = dir > 0 ? lo : hi - k; /* the block's first entry */
        long got = yard_pread_full(sr->ifd, blk, k * sizeof blk[0], at * sizeof blk[0]);
        if (got != (long)(k * sizeof blk[0]))
            return got < 0 ? (int)got : -EIO;
        for (uint64_t j = 0; j < k; j++) {
            uint64_t id = sr->first + at + (dir > 0 ? j : k - 1 - j);
            if (w->entries_left && (*w->entries_left)-- == 0) {
                *w->entries_left = 0;
                w->next = id;
                return YARD_CHATLOG_SEEK_MORE;
            }
            const struct idx_entry e = idx_host(blk[dir > 0 ? j : k - 1 - j]);
            if (!hash_wanted(e.hash, w->hashes, w->nhash))
                continue;
            long n = yard_pread_full(sr->sfd, rec, sizeof rec, e.off);
            yard_logrec_t r;
            if (n <= 0 || yard_logrec_decode(rec, (size_t)n, &r) != YARD_LOGREC_COMPLETE ||
                r.id != id)
                return n < 0 ? (int)n : -EBADMSG;
            if (w->fn(&r, w->arg)) {
                w->next = dir > 0 ? id + 1 : id - 1;
                return YARD_CHATLOG_SEEK_STOPPED;
            }
        }
        if (dir > 0)
            lo += k;
        else
            hi -= k;
    }
    return 0;
}

int yard_chatlog_seek_piece(yard_chatlog_t *log, uint64_t from, int dir, const uint32_t *hashes,
                            int nhash, uint64_t *entries_left,
                            int (*fn)(const yard_chatlog_rec_t *r, void *arg), void *arg,
                            uint64_t *next)
{
    struct seek_walk w = {.dir = dir, .hashes = hashes, .nhash = nhash,
                          .entries_left = entries_left, .fn = fn, .arg = arg};
    *next = 0;
    lock(log);
    uint64_t next_id = log->sh->next_id;
    unlock(log);
    uint64_t *segs;
    size_t nseg;
    int rc = list_segments(log->dir, &segs, &nseg);
    if (rc < 0)
        return rc;
    if (dir < 0 && from >= next_id)
        from = next_id - 1;
    for (size_t step = 0; rc == 0 && step < nseg; step++) {
        size_t i = dir > 0 ? step : nseg - 1 - step;
        if (dir > 0 ? (i + 1 < nseg && segs[i + 1] <= from) : segs[i] > from)
            continue; /* wholly before (after) where the walk starts */
        struct seg_reader sr;
        if ((rc = seg_open(log, segs[i], next_id, &sr)) == -ENOENT) {
            rc = 0; /* pruned meanwhile */
            continue;
        }
        if (rc < 0)
            break;
        uint64_t lo = 0, hi = sr.n;
        if (dir > 0 && from > sr.first)
            lo = from - sr.first < sr.n ? from - sr.first : sr.n;
        if (dir < 0 && from + 1 - sr.first < sr.n)
            hi = from + 1 - sr.first;
        rc = seg_visit(&sr, lo, hi, &w);
        seg_close(&sr);
    }
    free(segs);
    if (rc > 0)
        *next = w.next;
    return rc;
}

int yard_chatlog_seek(yard_chatlog_t *log, uint64_t from, int dir, const uint32_t *hashes,
                      int nhash, int (*fn)(const yard_chatlog_rec_t *r, void *arg), void *arg)
{
    uint64_t next;
    int rc = yard_chatlog_seek_piece(log, from, dir, hashes, nhash, NULL, fn, arg, &next);
    return rc < 0 ? rc : 0;
}

uint64_t yard_chatlog_id_at(yard_chatlog_t *log, int64_t ts_ns)
{
    lock(log);
    uint64_t next_id = log->sh->next_id;
    unlock(log);
    uint64_t *segs;
    size_t nseg;
    if (list_segments(log->dir, &segs, &nseg) < 0)
        return next_id;
    uint64_t id = next_id;
    /* From the newest segment back: the first whose first record is not
     * later than ts_ns holds the answer (or its successor's first id). */
    for (size_t step = 0; step < nseg; step++) {
        struct seg_reader sr;
        if (seg_open(log, segs[nseg - 1 - step], next_id, &sr) < 0)
            break;
        struct idx_entry e;
        uint64_t lo = 0, hi = sr.n; /* the first entry with ts >= ts_ns is in [lo, hi] */
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (pread(sr.ifd, &e, sizeof e, (off_t)(mid * sizeof e)) != (ssize_t)sizeof e)
                break;
            if (idx_host(e).ts_ns < ts_ns)
                lo = mid + 1;
            else
                hi = mid;
        }
        seg_close(&sr);
        if (lo < sr.n || sr.n == 0)
            id = sr.first + lo;
        if (lo > 0)
            break; /* the record before it is in this segment: earlier ones are older */
    }
    free(segs);
    return id;
}
