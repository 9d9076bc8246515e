/* test_options.c - the table of environment variables (ml_options.h):
 * parsing, defaults, what is read from `environ`, and the ML_VERBOSE lines.
 * Criterion runs each test in a process of its own, so every test starts
 * with a table nothing has read yet. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ml_event.h"
#include "ml_options.h"

Test(options, booleans) {
    const char *yes[] = {"1", "on", "yes", "true", "ON", "Yes", "TRUE"};
    const char *no[] = {"0", "off", "no", "false", "OFF", "No", "False"};
    const char *bad[] = {"", "2", "y", "yess", "truee", "on ", " 1", "-1"};
    bool b;
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        b = false;
        cr_expect_eq(ml_parse_bool(yes[i], &b), 0, "%s", yes[i]);
        cr_expect(b, "%s", yes[i]);
    }
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
        b = true;
        cr_expect_eq(ml_parse_bool(no[i], &b), 0, "%s", no[i]);
        cr_expect_not(b, "%s", no[i]);
    }
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_expect_eq(ml_parse_bool(bad[i], &b), -1, "'%s'", bad[i]);
}

Test(options, numbers) {
    static const struct {
        const char *s;
        uint64_t v;
    } good[] = {{"0", 0},          {"64", 64},          {"64k", 65536},
                {"1M", 1 << 20},   {"2GiB", 2ull << 30}, {"10kB", 10240},
                {"3g", 3ull << 30}, {"18446744073709551615", UINT64_MAX}};
    const char *bad[] = {"", "k", "-1", "+1", " 1", "1x", "1kk", "18446744073709551616", "17179869184G"};
    uint64_t v;
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        cr_expect_eq(ml_parse_uint(good[i].s, &v), 0, "%s", good[i].s);
        cr_expect_eq(v, good[i].v, "%s: %llu", good[i].s, (unsigned long long)v);
    }
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_expect_eq(ml_parse_uint(bad[i], &v), -1, "'%s'", bad[i]);
}

Test(options, defaults_when_unset) {
    unsetenv("ML_RING_SLOTS");
    unsetenv("ML_PRELOAD_LIB");
    unsetenv("ML_VERBOSE");
    const ml_option_t *o = ml_option(ML_ENV_RING_SLOTS);
    cr_expect(o->initialized);
    cr_expect_not(o->from_env);
    cr_expect(o->valid);
    cr_expect_eq(o->value, ML_DEFAULT_RING_SLOTS, "the table's default is ML_DEFAULT_RING_SLOTS");
    cr_expect_null(ml_option_str(ML_ENV_PRELOAD_LIB));
    cr_expect_not(ml_option_bool(ML_ENV_VERBOSE));
}

Test(options, read_once_from_the_environment) {
    setenv("ML_RING_SLOTS", "256k", 1);
    setenv("ML_PRELOAD_LIB", "/x/libmemlens.so", 1);
    setenv("ML_VIEW_NO_MOUSE", "yes", 1);
    cr_expect_eq(ml_option_uint(ML_ENV_RING_SLOTS), 262144);
    cr_expect(ml_option(ML_ENV_RING_SLOTS)->from_env);
    cr_expect_str_eq(ml_option_str(ML_ENV_PRELOAD_LIB), "/x/libmemlens.so");
    cr_expect(ml_option_bool(ML_ENV_VIEW_NO_MOUSE));
    /* Read once: a later change of the environment is not seen. */
    setenv("ML_RING_SLOTS", "128", 1);
    cr_expect_eq(ml_option_uint(ML_ENV_RING_SLOTS), 262144);
}

Test(options, invalid_and_empty_values) {
    setenv("ML_GPU_POOLS", "maybe", 1);
    setenv("ML_RING_SLOTS", "lots", 1);
    setenv("ML_VERBOSE", "", 1);
    setenv("ML_CUPTI_LIB", "", 1);
    const ml_option_t *o = ml_option(ML_ENV_GPU_POOLS);
    cr_expect(o->from_env);
    cr_expect_not(o->valid);
    cr_expect_not(ml_option_bool(ML_ENV_GPU_POOLS), "an invalid boolean is its default");
    o = ml_option(ML_ENV_RING_SLOTS);
    cr_expect_not(o->valid, "the reader refuses it (memlens run does)");
    cr_expect_eq(o->value, ML_DEFAULT_RING_SLOTS);
    o = ml_option(ML_ENV_VERBOSE);
    cr_expect(o->valid, "an empty boolean counts as unset");
    cr_expect_not(ml_option_bool(ML_ENV_VERBOSE));
    cr_expect_str_eq(ml_option_str(ML_ENV_CUPTI_LIB), "", "an empty string is set");
    cr_expect(ml_option(ML_ENV_CUPTI_LIB)->from_env);
}

static char *capture_fd(int fd, void (*fn)(void)) {
    int p[2];
    cr_assert_eq(pipe(p), 0);
    int saved = dup(fd);
    dup2(p[1], fd);
    close(p[1]);
    fn();
    dup2(saved, fd);
    close(saved);
    static char buf[8192];
    ssize_t n = read(p[0], buf, sizeof buf - 1);
    close(p[0]);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static void init_preload(void) {
    ml_options_init(ML_ENV_PRELOAD, "libmemlens.so (pid 7)");
}

Test(options, verbose_prints_what_a_reader_reads) {
    setenv("ML_VERBOSE", "on", 1);
    setenv("ML_CTL", "/dev/shm/memlens-1-2", 1);
    unsetenv("ML_LD_PRELOAD_ORIG");
    char *out = capture_fd(2, init_preload);
    cr_expect_str_eq(out,
                     "memlens: libmemlens.so (pid 7): option ML_VERBOSE=on (environment)\n"
                     "memlens: libmemlens.so (pid 7): option ML_CTL=/dev/shm/memlens-1-2 (environment)\n"
                     "memlens: libmemlens.so (pid 7): option ML_LD_PRELOAD_ORIG unset\n");
}

static void init_cli(void) {
    ml_options_init(ML_ENV_CLI, "");
}

Test(options, invalid_booleans_are_warned_about) {
    unsetenv("ML_VERBOSE");
    setenv("ML_ADVISOR_DEBUG", "sometimes", 1);
    char *out = capture_fd(2, init_cli);
    cr_expect_str_eq(out, "memlens: warning: ML_ADVISOR_DEBUG=sometimes is not a boolean (1/0, "
                          "on/off, yes/no, true/false); using 0\n");
}

Test(options, quiet_without_verbose) {
    unsetenv("ML_VERBOSE");
    unsetenv("ML_ADVISOR_DEBUG");
    unsetenv("ML_VIEW_NO_MOUSE");
    char *out = capture_fd(2, init_cli);
    cr_expect_str_eq(out, "");
}

Test(options, test_hooks_are_not_in_this_build) {
    /* Only libmemlens_test.so is compiled with ML_TEST_HOOKS. */
    for (int i = 0; i < ML_ENV_COUNT_; i++)
        cr_expect(strncmp(ml_option((ml_env_id_t)i)->name, "ML_TEST_", 8) != 0);
}
