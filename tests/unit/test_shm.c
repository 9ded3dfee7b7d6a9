/* The shared-memory helpers (src/core/shm.c) under the error convention: 0
 * or a count on success, -errno on failure (docs/architecture.md, Errors).
 * Each failure is provoked for real (a missing directory, a directory where
 * a file is wanted, a zero capacity) so that the negated errno is the one
 * the failing call set. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "yard/shm.h"

static char dir[] = "/tmp/yard-test-shm-XXXXXX";

static void path_in_dir(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

static void test_create_and_mutex(void)
{
    yard_shm_t *shm = NULL;
    ASSERT_EQ(yard_shm_create(&shm, 1 << 16), 0);
    ASSERT(shm != NULL);
    pthread_mutex_t *mu = yard_shm_alloc(shm, sizeof *mu);
    ASSERT(mu != NULL);
    ASSERT_EQ(yard_shm_mutex_init(mu), 0);
    ASSERT(!yard_shm_mutex_lock(mu)); /* nobody died holding it */
    pthread_mutex_unlock(mu);
    /* Exhausted: NULL, the one meaning yard_shm_alloc's NULL has. */
    ASSERT(yard_shm_alloc(shm, (size_t)1 << 20) == NULL);
    yard_shm_destroy(shm);
}

static void test_create_fails(void)
{
    yard_shm_t *shm = (yard_shm_t *)&shm;
    /* No mapping of SIZE_MAX bytes can exist. */
    ASSERT_EQ(yard_shm_create(&shm, SIZE_MAX), -ENOMEM);
    ASSERT(shm == NULL);
}

static void test_table_file(void)
{
    char path[256];
    path_in_dir(path, sizeof path, "table");
    yard_table_file_t t;
    bool restarted = true;
    ASSERT_EQ(yard_table_file_open(&t, path, "YARDTST", 16, 4, &restarted), 0);
    ASSERT(!restarted); /* a new file is fresh, not restarted */
    memcpy(t.slots, "kept", 5);
    yard_table_file_close(&t);
    ASSERT_EQ(yard_table_file_open(&t, path, "YARDTST", 16, 4, &restarted), 0);
    ASSERT(!restarted);
    ASSERT_STR_EQ((const char *)t.slots, "kept");
    yard_table_file_close(&t);
    /* Another slot count: started afresh, and said so. */
    ASSERT_EQ(yard_table_file_open(&t, path, "YARDTST", 16, 8, &restarted), 0);
    ASSERT(restarted);
    ASSERT_EQ(((const char *)t.slots)[0], 0);
    yard_table_file_close(&t);
    unlink(path);
}

static void test_table_file_fails(void)
{
    char path[256];
    yard_table_file_t t;
    bool restarted;
    path_in_dir(path, sizeof path, "no-such-dir/table");
    ASSERT_EQ(yard_table_file_open(&t, path, "YARDTST", 16, 4, &restarted), -ENOENT);
    ASSERT_EQ(t.fd, -1);
    ASSERT(t.slots == NULL);
    ASSERT_EQ(yard_table_file_open(&t, dir, "YARDTST", 16, 4, &restarted), -EISDIR);
    yard_table_file_close(&t); /* safe on a table that is not open */
}

static void test_read_text_file(void)
{
    char path[256], buf[8];
    path_in_dir(path, sizeof path, "motd");
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fputs("hello, world", f);
    fclose(f);
    ASSERT_EQ(yard_read_text_file(path, buf, sizeof buf), 7); /* cap - 1 */
    ASSERT_STR_EQ(buf, "hello, ");
    ASSERT_EQ(yard_read_text_file(path, buf, 0), -EINVAL);
    unlink(path);
    ASSERT_EQ(yard_read_text_file(path, buf, sizeof buf), -ENOENT);
    ASSERT_STR_EQ(buf, "");
}

int main(int argc, char **argv)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    static const struct test_case cases[] = {
        {"create_and_mutex", test_create_and_mutex},
        {"create_fails", test_create_fails},
        {"table_file", test_table_file},
        {"table_file_fails", test_table_file_fails},
        {"read_text_file", test_read_text_file},
        {NULL, NULL},
    };
    int rc = test_main(argc, argv, cases);
    rmdir(dir);
    return rc;
}
