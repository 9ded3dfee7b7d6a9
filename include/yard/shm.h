/* A shared-memory arena mapped MAP_SHARED before any fork, so state that
 * apps share between connections is the same memory under every model. It
 * only grows (bump allocation): shared state is allocated once at start-up. */
#ifndef YARD_SHM_H
#define YARD_SHM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct yard_shm yard_shm_t;

/* Map an arena of bytes (at least a page) into *out: 0, or -errno from mmap
 * (*out is then NULL). */
int yard_shm_create(yard_shm_t **out, size_t bytes);
/* Zeroed, 64-byte aligned (one cache line, so unrelated state never shares
 * a line). NULL when the arena is exhausted. */
void *yard_shm_alloc(yard_shm_t *shm, size_t bytes);
void yard_shm_destroy(yard_shm_t *shm);

/* A mutex for memory shared across processes: process-shared and robust,
 * so that a process killed while holding it does not wedge the others.
 * 0 or -errno (pthread_mutex_init's error, negated). */
int yard_shm_mutex_init(pthread_mutex_t *mu);
/* Lock it, taking it over from a holder that died (the caller's data must
 * stay usable when a holder dies half-way). A predicate: true when it was
 * taken over. */
bool yard_shm_mutex_lock(pthread_mutex_t *mu);

/* A table of fixed-size slots in a file, mapped MAP_SHARED: every process
 * of the server sees the same bytes, a crash of any of them loses nothing
 * the kernel has (the page cache), and yard_table_file_sync pushes it to
 * the disk. A head names the format (magic, slot size, slot count); a file
 * of another format or size is started afresh, and *restarted says so. */
typedef struct yard_table_file {
    void *slots;  /* nslots x slot_size bytes, zeroed when fresh */
    size_t bytes; /* the whole mapping, head included */
    int fd;
} yard_table_file_t;

/* 0, or -errno from the failed call (open, fstat, ftruncate, pwrite, mmap;
 * t is then not open). */
int yard_table_file_open(yard_table_file_t *t, const char *path, const char magic[8],
                         size_t slot_size, size_t nslots, bool *restarted);
/* Start writing it back (wait false), or write it back and wait. */
void yard_table_file_sync(yard_table_file_t *t, bool wait);
/* Write it back, unmap it and close it (safe on a table that is not open). */
void yard_table_file_close(yard_table_file_t *t);

/* pread until n bytes came or the file ended, retrying on EINTR: the bytes
 * read, or -errno. */
long yard_pread_full(int fd, void *buf, size_t n, uint64_t off);

/* Read a small text file (a message of the day) into buf, at most cap - 1
 * bytes, NUL-terminated: the bytes read, or -errno when it cannot be read
 * (buf is then ""; -EINVAL when cap is 0). For an app's init, never for a
 * connection's callback. */
long yard_read_text_file(const char *path, char *buf, size_t cap);

#endif
