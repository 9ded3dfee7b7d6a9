#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */

#include "yard/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct yard_shm {
    size_t size;
    _Atomic size_t used; /* the header itself is at the start of the mapping */
};

#define SHM_ALIGN 64u

int yard_shm_create(yard_shm_t **out, size_t bytes)
{
    *out = NULL;
    if (bytes < 4096)
        bytes = 4096;
    /* Pages are only touched when used, so a generous size costs nothing. */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -errno;
    yard_shm_t *shm = p;
    shm->size = bytes;
    atomic_init(&shm->used, (sizeof *shm + SHM_ALIGN - 1) & ~(size_t)(SHM_ALIGN - 1));
    *out = shm;
    return 0;
}

void *yard_shm_alloc(yard_shm_t *shm, size_t bytes)
{
    size_t want = (bytes + SHM_ALIGN - 1) & ~(size_t)(SHM_ALIGN - 1);
    size_t off = atomic_load(&shm->used);
    do {
        if (want > shm->size - off)
            return NULL;
    } while (!atomic_compare_exchange_weak(&shm->used, &off, off + want));
    return (uint8_t *)shm + off; /* fresh anonymous pages are already zero */
}


void yard_shm_destroy(yard_shm_t *shm)
{
    if (shm)
        munmap(shm, shm->size);
}

int yard_shm_mutex_init(pthread_mutex_t *mu)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    int e = pthread_mutex_init(mu, &a);
    pthread_mutexattr_destroy(&a);
    return -e;
}

bool yard_shm_mutex_lock(pthread_mutex_t *mu)
{
    if (pthread_mutex_lock(mu) != EOWNERDEAD)
        return false;
    pthread_mutex_consistent(mu);
    return true;
}

struct table_head {
    char magic[8];
    uint32_t version;
    uint32_t slot_size;
    uint64_t nslots;
    uint8_t pad[40];
};

int yard_table_file_open(yard_table_file_t *t, const char *path, const char magic[8],
                         size_t slot_size, size_t nslots, bool *restarted)
{
    *t = (yard_table_file_t){.fd = -1};
    *restarted = false;
    size_t bytes = sizeof(struct table_head) + slot_size * nslots;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    int rc;
    struct stat st;
    if (fstat(fd, &st) < 0)
        goto fail;
    struct table_head want = {.version = 2, .slot_size = (uint32_t)slot_size, .nslots = nslots};
    memcpy(want.magic, magic, sizeof want.magic);
    struct table_head have = {0};
    bool fresh = st.st_size == 0;
    if (!fresh && ((size_t)st.st_size != bytes ||
                   pread(fd, &have, sizeof have, 0) != (ssize_t)sizeof have ||
                   memcmp(&have, &want, sizeof have) != 0)) {
        *restarted = true;
        fresh = true;
    }
    if (fresh && (ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t)bytes) < 0))
        goto fail;
    if (fresh) {
        ssize_t w = pwrite(fd, &want, sizeof want, 0);
        if (w != (ssize_t)sizeof want) {
            if (w >= 0)
                errno = EIO; /* a short write of 64 bytes to a file we just sized */
            goto fail;
        }
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        goto fail;
    *t = (yard_table_file_t){.slots = (uint8_t *)p + sizeof(struct table_head), .bytes = bytes,
                             .fd = fd};
    return 0;
fail:
    rc = -errno;
    close(fd);
    return rc;
}

void yard_table_file_sync(yard_table_file_t *t, bool wait)
{
    if (t->slots)
        msync((uint8_t *)t->slots - sizeof(struct table_head), t->bytes, wait ? MS_SYNC : MS_ASYNC);
}

void yard_table_file_close(yard_table_file_t *t)
{
    if (t->slots) {
        yard_table_file_sync(t, true);
        munmap((uint8_t *)t->slots - sizeof(struct table_head), t->bytes);
    }
    if (t->fd >= 0)
        close(t->fd);
    *t = (yard_table_file_t){.fd = -1};
}

long yard_pread_full(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (uint8_t *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return got ? (long)got : -errno;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (long)got;
}

long yard_read_text_file(const char *path, char *buf, size_t cap)
{
    if (!cap)
        return -EINVAL;
    buf[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    long got = yard_pread_full(fd, buf, cap - 1, 0);
    close(fd);
    buf[got > 0 ? got : 0] = 0;
    return got;
}
