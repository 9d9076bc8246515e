/* ml_options.h - every environment variable memlens reads, in one table.
 *
 * Low-level; no heap, no stdio (STYLE 19): linked into libmemlens.so, where
 * it runs during start-up inside the program, before main and often inside
 * its first malloc. Values are read with ml_getenv() (a scan of `environ`)
 * and parsed by hand; nothing here allocates, locks or calls stdio.
 *
 * Each variable has one entry {name, kind, default, readers, doc} and, once
 * read, its value. Three programs read the table, each its own copy (the
 * table is static data of each binary): the memlens command (ML_ENV_CLI),
 * libmemlens.so inside the program (ML_ENV_PRELOAD) and libmemlens_cupti.so
 * (ML_ENV_CUPTI). Each calls ml_options_init() once at start-up with its
 * reader bit; with ML_VERBOSE on, that prints the effective value of every
 * variable it reads, with write(2).
 *
 * Kinds:
 *   - BOOL: 1/0, on/off, yes/no, true/false (any case). Anything else is
 *     invalid: the default is used, and ml_options_init() warns.
 *   - UINT: decimal digits with an optional k, M or G suffix (powers of
 *     1024, an optional "i" and "B" after it, as `--sample 512k`). An
 *     invalid or out-of-range value is the reader's to refuse (`valid`).
 *   - STR: the text as given; set but empty is "set".
 * A BOOL or UINT set to the empty string counts as unset (its default).
 *
 * Thread-safety: ml_options_init() before starting threads. The accessors
 * read a variable on first use if init did not (a test program, a library
 * user), which is safe while one thread does it.
 */
#ifndef ML_OPTIONS_H
#define ML_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

/* Who reads a variable (ml_option_t.readers). */
#define ML_ENV_CLI 0x1     /* the memlens command (and its libraries) */
#define ML_ENV_PRELOAD 0x2 /* libmemlens.so, inside the program */
#define ML_ENV_CUPTI 0x4   /* libmemlens_cupti.so, inside the program */
#define ML_ENV_ALL 0x7

/* Test hooks exist only in test builds of the preload library
 * (libmemlens_test.so, compiled with ML_TEST_HOOKS): the shipped
 * libmemlens.so never reads them. */
#ifdef ML_TEST_HOOKS
#define ML_TEST_OPTIONS(X)                                                                         \
    X(TEST_CLAIM_DELAY_MS, "ML_TEST_CLAIM_DELAY_MS", UINT, "0", ML_ENV_PRELOAD,                    \
      "test builds only: sleep this long between counting a process slot and claiming it")         \
    X(TEST_NESTED_ALLOC, "ML_TEST_NESTED_ALLOC", UINT, "0", ML_ENV_PRELOAD,                        \
      "test builds only: each stack capture also mallocs this many bytes (a nested allocation)")    \
    X(TEST_NESTED_BURST, "ML_TEST_NESTED_BURST", UINT, "0", ML_ENV_PRELOAD,                        \
      "test builds only: with ML_TEST_NESTED_ALLOC, this many nested blocks a capture, each freed") \
    X(TEST_SLOW_SIZE, "ML_TEST_SLOW_SIZE", UINT, "0", ML_ENV_PRELOAD,                              \
      "test builds only: an allocation of this many bytes sleeps 300 ms after the hook's check")   \
    X(TEST_SIGNAL_SIZE, "ML_TEST_SIGNAL_SIZE", UINT, "0", ML_ENV_PRELOAD,                          \
      "test builds only: an allocation of this many bytes sends its process SIGTERM while memlens " \
      "takes its stack")                                                                           \
    X(TEST_EXIT_DELAY_MS, "ML_TEST_EXIT_DELAY_MS", UINT, "0", ML_ENV_PRELOAD,                      \
      "test builds only: the exit handshake sleeps this long before its exit record")              \
    X(TEST_FORK_SIGNAL, "ML_TEST_FORK_SIGNAL", UINT, "0", ML_ENV_PRELOAD,                          \
      "test builds only: the first fork raises this signal while memlens holds its fork locks")
#else
#define ML_TEST_OPTIONS(X)
#endif

/* X(ID, NAME, KIND, DEFAULT, READERS, DOC). DEFAULT is NULL for a STR with no
 * default. README's "Environment" section lists the same variables. */
#define ML_OPTIONS(X)                                                                              \
    X(VERBOSE, "ML_VERBOSE", BOOL, "0", ML_ENV_ALL,                                                \
      "print the effective value of every variable read, at start")                               \
    X(RING_SLOTS, "ML_RING_SLOTS", UINT, "65536", ML_ENV_CLI,                                    \
      "events per process ring, a power of two from 1024 to 2^28 (32 bytes each)")                   \
    X(COLLECTOR_RT, "ML_COLLECTOR_RT", BOOL, "1", ML_ENV_CLI,                                      \
      "memlens run: the collector runs at the lowest real-time priority while the program runs, "  \
      "where it may")                                                                              \
    X(PRELOAD_LIB, "ML_PRELOAD_LIB", STR, NULL, ML_ENV_CLI,                                        \
      "the libmemlens.so to preload, instead of the one beside memlens")                          \
    X(ADVISOR_DEBUG, "ML_ADVISOR_DEBUG", BOOL, "0", ML_ENV_CLI,                                    \
      "the strategy advisor prints its summaries and decisions on stderr")                        \
    X(VIEW_NO_MOUSE, "ML_VIEW_NO_MOUSE", BOOL, "0", ML_ENV_CLI,                                    \
      "the live viewer leaves the mouse to the terminal")                                         \
    X(HUGE_PAGES, "ML_HUGE_PAGES", BOOL, "1", ML_ENV_CLI,                                          \
      "memlens report, view and diff start once more with glibc's malloc in transparent huge "     \
      "pages (GLIBC_TUNABLES)")                                                                    \
    X(SYMBOL_CACHE, "ML_SYMBOL_CACHE", BOOL, "1", ML_ENV_CLI,                                      \
      "reports keep the frames each address resolved to in the debug cache, and reuse them")       \
    X(CTL, "ML_CTL", STR, NULL, ML_ENV_PRELOAD,                                                     \
      "set by memlens run: the session's control segment in /dev/shm")                           \
    X(LD_PRELOAD_ORIG, "ML_LD_PRELOAD_ORIG", STR, NULL, ML_ENV_PRELOAD,                            \
      "set by memlens run: the caller's LD_PRELOAD, restored for the program's children")         \
    X(CUPTI_LIB, "ML_CUPTI_LIB", STR, NULL, ML_ENV_CUPTI,                                          \
      "the libcupti to load first (before the toolkit's soname)")                                 \
    X(GPU_POOLS, "ML_GPU_POOLS", BOOL, "0", ML_ENV_CUPTI,                                          \
      "set by memlens run --gpu-pools: record CUDA memory pools from CUPTI activity records")      \
    X(TEARDOWN_CUPTI, "TEARDOWN_CUPTI", STR, NULL, ML_ENV_CUPTI,                                   \
      "PyTorch's: 1 makes the profiler detach CUPTI, which memlens warns about")                  \
    ML_TEST_OPTIONS(X)

typedef enum {
#define ML__OPT_ENUM(id, name, kind, def, readers, doc) ML_ENV_##id,
    ML_OPTIONS(ML__OPT_ENUM)
#undef ML__OPT_ENUM
        ML_ENV_COUNT_
} ml_env_id_t;

typedef enum { ML_ENV_KIND_BOOL, ML_ENV_KIND_UINT, ML_ENV_KIND_STR } ml_env_kind_t;

typedef struct {
    /* The table */
    const char *name;
    ml_env_kind_t kind;
    const char *def; /* the default, as text; NULL: none */
    unsigned readers;
    const char *doc;
    /* The value, once read */
    bool initialized;
    bool from_env;    /* the variable is set (possibly empty) */
    bool valid;       /* BOOL and UINT: the text parsed; else true */
    const char *text; /* the environment's text (borrowed from environ), or def */
    uint64_t value;   /* BOOL (0/1) and UINT: the parsed value, or the default's */
} ml_option_t;

/** Reads every variable of `readers` (and ML_VERBOSE), warns on stderr
 * about each BOOL that does not parse, and with ML_VERBOSE on prints every
 * one of them as "memlens: [WHO: ]option NAME=VALUE (environment|default)".
 * `who` names the reader ("" for the memlens command, "libmemlens.so
 * (pid N)" in a program). Reading again is a no-op,
 * printing is not: call it once. */
void ml_options_init(unsigned readers, const char *who);

/** The entry of `id`, read on first use. */
const ml_option_t *ml_option(ml_env_id_t id);

/** BOOL: the value (the default when unset or invalid). */
bool ml_option_bool(ml_env_id_t id);
/** UINT: the value (the default when unset; check ml_option(id)->valid). */
uint64_t ml_option_uint(ml_env_id_t id);
/** STR: the text, or NULL when unset and without a default. */
const char *ml_option_str(ml_env_id_t id);

/** Prints every variable of `readers` to fd, as ml_options_init does with
 * ML_VERBOSE. */
void ml_options_print(int fd, unsigned readers, const char *who);

/** The value of environment variable `name`, from `environ`, without
 * allocating or locking: NULL when unset. Borrowed from the environment. */
const char *ml_getenv(const char *name);

/** Parses a BOOL or a UINT as the table does. 0, or -1 when invalid. */
int ml_parse_bool(const char *s, bool *out);
int ml_parse_uint(const char *s, uint64_t *out);

#endif
