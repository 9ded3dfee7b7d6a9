#include "yard/shm.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

struct yard_shm {
    size_t size;
    _Atomic size_t used; /* the header itself is at the start of the mapping */
};

#define SHM_ALIGN 64u

yard_shm_t *yard_shm_create(size_t bytes, char *err, size_t errlen)
{
    if (bytes < 4096)
        bytes = 4096;
    /* Pages are only touched when used, so a generous size costs nothing. */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "mmap shared region of %zu bytes: %s", bytes, strerror(errno));
        return NULL;
    }
    yard_shm_t *shm = p;
    shm->size = bytes;
    atomic_init(&shm->used, (sizeof *shm + SHM_ALIGN - 1) & ~(size_t)(SHM_ALIGN - 1));
    return shm;
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
    return e;
}

bool yard_shm_mutex_lock(pthread_mutex_t *mu)
{
    if (pthread_mutex_lock(mu) != EOWNERDEAD)
        return false;
    pthread_mutex_consistent(mu);
    return true;
}
