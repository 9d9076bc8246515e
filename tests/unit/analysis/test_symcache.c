/* test_symcache.c - the symbol cache's file (analysis/symcache.c): frames put
 * in one session come back in the next with the same stamp, and never with
 * another; a file cut short anywhere, or with a byte changed, gives nothing
 * (and no crash); the first answer for an address stays; allocation
 * failures lose an entry, never the cache. */
#define _GNU_SOURCE
#include "analysis_internal.h"
#include "ml_util.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const uint8_t id[20] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const char *self = "0123456789abcdef0123";
static char dir[64];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/memlens-symc-XXXXXX");
    cr_assert(mkdtemp(dir));
    setenv("MEMLENS_DEBUG_CACHE", dir, 1);
}

static void teardown(void) {
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char p[400];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
    unsetenv("MEMLENS_DEBUG_CACHE");
    ml_set_alloc_hooks(NULL);
}

static char *file_path(void) {
    static char p[400];
    snprintf(p, sizeof p, "%s/deadbeef0102030405060708090a0b0c0d0e0f10.0123456789abcdef.sym", dir);
    return p;
}

/* Two frames for 0x1000 (an inlined one and its caller), one nameless frame
 * without a file for 0x2000. */
static void put_sample(ml__symc_t *c) {
    ml__symc_frame_t f[2] = {
        {.function = "grab", .file = "/src/prog.c", .line = 4, .inlined = true},
        {.function = "make_name", .file = "/src/prog.c", .line = 7, .inlined = false},
    };
    ml__symc_put(c, 0x1000, f, 2);
    ml__symc_frame_t g = {.function = NULL, .file = NULL, .line = 0, .inlined = false};
    ml__symc_put(c, 0x2000, &g, 1);
}

static void expect_sample(const ml__symc_t *c) {
    ml__symc_frame_t out[ML__SYMC_MAX_FRAMES];
    cr_assert_eq(ml__symc_get(c, 0x1000, out), 2);
    cr_expect_str_eq(out[0].function, "grab");
    cr_expect_str_eq(out[0].file, "/src/prog.c");
    cr_expect_eq(out[0].line, 4);
    cr_expect(out[0].inlined);
    cr_expect_str_eq(out[1].function, "make_name");
    cr_expect_eq(out[1].line, 7);
    cr_expect(!out[1].inlined);
    cr_assert_eq(ml__symc_get(c, 0x2000, out), 1);
    cr_expect_null(out[0].function);
    cr_expect_null(out[0].file);
    cr_expect_eq(ml__symc_get(c, 0x3000, out), 0);
}

static ml__symc_t *open_with(const char *stamp) {
    ml__symc_t *c = ml__symc_open(id, sizeof id, self, stamp, strlen(stamp));
    cr_assert_not_null(c);
    return c;
}

TestSuite(symcache, .init = setup, .fini = teardown);

Test(symcache, frames_come_back_with_the_same_stamp) {
    ml__symc_t *c = open_with("stamp A");
    put_sample(c);
    expect_sample(c); /* before it is saved, too */
    ml__symc_close(c);
    struct stat st;
    cr_assert_eq(stat(file_path(), &st), 0, "no file at %s", file_path());
    cr_expect_eq(st.st_mode & 0777, 0600);
    c = open_with("stamp A");
    expect_sample(c);
    ml__symc_close(c);
}

Test(symcache, another_stamp_gets_nothing_and_replaces_the_file) {
    ml__symc_t *c = open_with("stamp A");
    put_sample(c);
    ml__symc_close(c);
    ml__symc_frame_t out[ML__SYMC_MAX_FRAMES];
    c = open_with("stamp B");
    cr_expect_eq(ml__symc_get(c, 0x1000, out), 0);
    ml__symc_frame_t f = {.function = "other", .file = NULL, .line = 0, .inlined = false};
    ml__symc_put(c, 0x4000, &f, 1);
    ml__symc_close(c);
    c = open_with("stamp A");
    cr_expect_eq(ml__symc_get(c, 0x1000, out), 0, "stamp A's entries were replaced");
    ml__symc_close(c);
    c = open_with("stamp B");
    cr_assert_eq(ml__symc_get(c, 0x4000, out), 1);
    cr_expect_str_eq(out[0].function, "other");
    ml__symc_close(c);
}

Test(symcache, the_first_answer_for_an_address_stays) {
    ml__symc_t *c = open_with("s");
    put_sample(c);
    ml__symc_frame_t f = {.function = "later", .file = NULL, .line = 1, .inlined = false};
    ml__symc_put(c, 0x1000, &f, 1);
    expect_sample(c);
    ml__symc_close(c);
}

static void damage_and_expect_nothing(off_t size, off_t flip) {
    /* A fresh file, then cut to `size` bytes or one byte changed. */
    ml__symc_t *c = open_with("stamp");
    put_sample(c);
    ml__symc_close(c);
    if (size >= 0) cr_assert_eq(truncate(file_path(), size), 0);
    if (flip >= 0) {
        int fd = open(file_path(), O_RDWR);
        unsigned char b;
        cr_assert_eq(pread(fd, &b, 1, flip), 1);
        b ^= 0x5a;
        cr_assert_eq(pwrite(fd, &b, 1, flip), 1);
        close(fd);
    }
    c = open_with("stamp");
    ml__symc_frame_t out[ML__SYMC_MAX_FRAMES];
    cr_expect_eq(ml__symc_get(c, 0x1000, out), 0, "size %lld flip %lld", (long long)size, (long long)flip);
    cr_expect_eq(ml__symc_get(c, 0x2000, out), 0, "size %lld flip %lld", (long long)size, (long long)flip);
    ml__symc_close(c);
    unlink(file_path());
}

/* The size of the sample's file (which is then removed). */
static off_t sample_size(void) {
    ml__symc_t *c = open_with("stamp");
    put_sample(c);
    ml__symc_close(c);
    struct stat st;
    cr_assert_eq(stat(file_path(), &st), 0);
    unlink(file_path());
    return st.st_size;
}

Test(symcache, a_file_cut_anywhere_gives_nothing) {
    off_t size = sample_size();
    for (off_t n = 0; n < size; n++) damage_and_expect_nothing(n, -1);
}

Test(symcache, a_byte_changed_anywhere_gives_nothing) {
    off_t size = sample_size();
    for (off_t i = 0; i < size; i++) damage_and_expect_nothing(-1, i);
}

static int fail_all;
static void *realloc_maybe(void *p, size_t n) {
    return fail_all ? NULL : realloc(p, n);
}

Test(symcache, out_of_memory_loses_an_entry_not_the_cache) {
    ml_set_alloc_hooks(&(ml_alloc_hooks_t){.realloc = realloc_maybe});
    ml__symc_t *c = open_with("stamp");
    fail_all = 1;
    put_sample(c); /* nothing can grow: nothing is added */
    ml__symc_frame_t out[ML__SYMC_MAX_FRAMES];
    cr_expect_eq(ml__symc_get(c, 0x1000, out), 0);
    fail_all = 0;
    put_sample(c);
    expect_sample(c);
    ml__symc_close(c);
    c = open_with("stamp");
    expect_sample(c);
    ml__symc_close(c);
}

Test(symcache, off_when_the_cache_is_off) {
    setenv("MEMLENS_DEBUG_CACHE", "off", 1);
    ml__symc_t *c = open_with("stamp");
    put_sample(c);
    expect_sample(c); /* it still answers within the session */
    ml__symc_close(c);
    struct stat st;
    cr_expect_neq(stat(file_path(), &st), 0, "nothing is written");
}
