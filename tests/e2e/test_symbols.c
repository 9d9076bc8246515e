/* test_symbols.c - sites named where the user's code is (issue 13): the
 * real `memlens` on fx_cpp_sites (std::vector, std::string, std::map, new)
 * must name every site by the fixture's own file:line while the libstdc++
 * frames stay in the stack; C++ names shortened for display; a chain
 * inlined three deep (fx_inline_deep, -O2) complete, each level at its
 * line. Every frame against eu-addr2line: symbols_oracle
 * (test_symbols_oracle.py). */
#define _GNU_SOURCE
#include "harness.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void record_unwind(const char *trace, const char *fixture, const char *unwinder) {
    const char *argv[] = {h_bin("memlens"), "run", "-q", "--unwind", unwinder, "-o", trace, "--", h_bin(fixture), NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "memlens run %s: status %d: %s", fixture, r.status, r.err);
    h_run_free(&r);
}

static void record(const char *trace, const char *fixture) {
    record_unwind(trace, fixture, "libunwind");
}

static ml_analysis_t *analyse(const char *trace) {
    ml_analysis_t *a;
    char err[512];
    cr_assert_eq(ml_analysis_new(&a), 0);
    cr_assert_eq(ml_analysis_load(a, trace, err, sizeof err), 0, "%s", err);
    ml_build_opts_t o = {0};
    cr_assert_eq(ml_analysis_build(a, &o, err, sizeof err), 0, "%s", err);
    return a;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = s ? strlen(s) : 0, b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* The one site that allocated exactly `bytes` in one call. */
static const ml_site_t *site_of_bytes(const ml_analysis_t *a, uint64_t bytes) {
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n), *found = NULL;
    for (size_t i = 0; i < n; i++)
        if (s[i].bytes_allocated == bytes && s[i].alloc_calls == 1) {
            cr_assert_null(found, "two sites of %llu bytes", (unsigned long long)bytes);
            found = &s[i];
        }
    cr_assert(found, "no site of %llu bytes", (unsigned long long)bytes);
    return found;
}

/* Every site of fx_cpp_sites built as `fixture` named by main's or
 * Store::fill's line, the library's frames below it. */
static void check_cpp_sites(const char *fixture, bool static_cxx) {
    char name[64];
    snprintf(name, sizeof name, "%s.mlt", fixture);
    const char *trace = h_tmp(name);
    record(trace, fixture);
    ml_analysis_t *a = analyse(trace);
    static const struct {
        uint64_t bytes;
        const char *function;
        uint32_t line;
        bool library_below; /* libstdc++ frames before the headline */
    } want[] = {
        {40000, "main", 25, true},                       /* new std::vector<double>(5000) */
        {24, "main", 25, false},                         /* the vector object itself */
        {3001, "main", 26, true},                        /* std::string(3000, 'x') */
        {32, "main", 26, false},
        {5600, "main", 27, false},                       /* new long[700] */
        {7200, "app::Store<long>::fill(int)", 14, true}, /* items.reserve(900) */
        {48, "main", 30, false},                         /* new std::map */
        {72, "main", 31, true},                          /* the map's node */
        {201, "main", 31, true},                         /* std::string(200, 'y') */
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const ml_site_t *s = site_of_bytes(a, want[i].bytes);
        cr_assert_lt(s->headline, s->nframes);
        const ml_frame_t *f = &s->frames[s->headline];
        cr_expect_str_eq(f->function, want[i].function, "%llu B", (unsigned long long)want[i].bytes);
        cr_expect(ends_with(f->file, "/fx_cpp_sites.cpp"), "%llu B: %s",
                  (unsigned long long)want[i].bytes, f->file);
        cr_expect_eq(f->line, want[i].line, "%llu B: line %u", (unsigned long long)want[i].bytes, f->line);
        cr_expect(f->own);
        if (want[i].library_below) {
            /* The library frames stay in the stack, before the headline. */
            cr_expect_gt(s->headline, 0, "%llu B", (unsigned long long)want[i].bytes);
            if (static_cxx) continue; /* libstdc++'s code is the program's own */
            const ml_frame_t *f0 = &s->frames[0];
            cr_expect((f0->file && strstr(f0->file, "/include/c++/")) ||
                          (f0->module && strstr(f0->module, "/libstdc++.so")),
                      "%llu B: frames[0] in %s (%s)", (unsigned long long)want[i].bytes, f0->file,
                      f0->module);
            cr_expect_not(s->frames[0].own);
        } else {
            cr_expect_eq(s->headline, 0, "%llu B", (unsigned long long)want[i].bytes);
        }
    }
    /* printf's stdout buffer: libc's frames, then main's line 32. */
    const ml_site_t *s = site_of_bytes(a, 4096);
    cr_expect_str_eq(s->frames[s->headline].function, "main");
    cr_expect_eq(s->frames[s->headline].line, 32);
    cr_expect(ends_with(s->frames[0].module, "/libc.so.6"));
    ml_analysis_free(a);
}

Test(symbols, cpp_sites_named_by_the_users_line) {
    check_cpp_sites("fx_cpp_sites", false);
}

/* clang names libstdc++'s headers by the way it found them,
 * "/usr/bin/../lib/gcc/x86_64-linux-gnu/12/../../../../include/c++/12/...":
 * those frames were taken for the program's own, and every site through
 * a container was named by a header's line (stl_vector.h:378,
 * basic_string.h:659, stl_tree.h:561). */
Test(symbols, cpp_sites_of_clang_named_by_the_users_line) {
    if (access(h_bin("fx_cpp_sites_clang"), X_OK) != 0) cr_skip_test("clang is not installed");
    check_cpp_sites("fx_cpp_sites_clang", false);
}

/* libstdc++'s headers found under another prefix than /usr/include, as a
 * GCC installed elsewhere finds its own (/usr/local/include/c++/13 for
 * GCC's default prefix, /opt/rh/gcc-toolset-12/root/usr/include/c++/12):
 * the build before took stl_vector.h there for the program's own code and
 * named every site through a container "std::_Vector_base<…>::_M_allocate
 * stl_vector.h:378" (basic_string.h, stl_tree.h likewise). */
Test(symbols, cpp_sites_with_libstdcxx_headers_elsewhere_named_by_the_users_line) {
    if (access(h_bin("fx_cpp_sites_prefix"), X_OK) != 0)
        cr_skip_test("not built: g++ and its headers under /usr/include/c++ are needed");
    check_cpp_sites("fx_cpp_sites_prefix", false);
}

/* With libstdc++ linked in (-static-libstdc++) its code lies in the
 * program's own module. The sites keep the user's lines, and libstdc++'s
 * exception pool (72,704 B, allocated by a line-less
 * _GLOBAL__sub_I_eh_alloc.cc that the loader calls) is named by that
 * function: the build before named it "_start", crt1.o's entry point,
 * whose frame is the program's too. */
Test(symbols, cpp_sites_with_static_libstdcxx_named_by_the_users_line) {
    check_cpp_sites("fx_cpp_sites_static", true);
    ml_analysis_t *a = analyse(h_tmp("fx_cpp_sites_static.mlt"));
    const ml_site_t *s = site_of_bytes(a, 72704);
    cr_expect_str_eq(s->frames[s->headline].function, "_GLOBAL__sub_I_eh_alloc.cc");
    ml_analysis_free(a);
}

/* Library code with no line table, where only its name says whose it is:
 * fx_cpp_nodebug built without -g (no frame has a file) and with
 * -static-libstdc++ (libstdc++'s functions in the program, line-less).
 * A template function's demangled name starts with its return type: the
 * build before read "void std::vector<int, ...>::_M_realloc_insert<...>"
 * as the program's own and named grow's site by it, read "std::vector<long,
 * ...> make_table<long>(int)" as the library's and named its site "main",
 * and named the exception's site by the static __cxa_allocate_exception. */
static void check_nodebug(const char *fixture, bool lines) {
    char name[64];
    snprintf(name, sizeof name, "%s.mlt", fixture);
    const char *trace = h_tmp(name);
    record(trace, fixture);
    ml_analysis_t *a = analyse(trace);
    static const struct {
        uint64_t bytes;
        uint64_t calls;
        const char *function;
        uint32_t line;
    } want[] = {
        {2568, 1, "std::vector<long, std::allocator<long> > make_table<long>(int)", 18},
        {8188, 11, "grow(std::vector<int, std::allocator<int> >&, int)", 26},
        {628, 1, "thrower(int)", 31},
    };
    size_t n;
    const ml_site_t *sites = ml_analysis_sites(a, &n);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const ml_site_t *s = NULL;
        for (size_t j = 0; j < n; j++)
            if (sites[j].bytes_allocated == want[i].bytes && sites[j].alloc_calls == want[i].calls) {
                cr_assert_null(s, "%s: two sites of %llu B", fixture, (unsigned long long)want[i].bytes);
                s = &sites[j];
            }
        cr_assert(s, "%s: no site of %llu B", fixture, (unsigned long long)want[i].bytes);
        cr_assert_lt(s->headline, s->nframes);
        const ml_frame_t *f = &s->frames[s->headline];
        /* -O2 puts the throw in "thrower(int) [clone .cold]". */
        cr_expect(f->function && !strncmp(f->function, want[i].function, strlen(want[i].function)),
                  "%s: %llu B: %s", fixture, (unsigned long long)want[i].bytes, f->function);
        cr_expect(f->own, "%s: %llu B", fixture, (unsigned long long)want[i].bytes);
        if (lines) {
            cr_expect(ends_with(f->file, "/fx_cpp_nodebug.cpp"), "%s: %llu B: %s", fixture,
                      (unsigned long long)want[i].bytes, f->file);
            cr_expect_eq(f->line, want[i].line, "%s: %llu B: line %u", fixture,
                         (unsigned long long)want[i].bytes, f->line);
        }
        /* The library's frames stay in the stack, before the headline. */
        if (want[i].bytes != 2568 || lines)
            cr_expect_gt(s->headline, 0, "%s: %llu B", fixture, (unsigned long long)want[i].bytes);
    }
    ml_analysis_free(a);
}

Test(symbols, cpp_sites_of_a_release_build_named_by_the_users_function) {
    check_nodebug("fx_cpp_nodebug", false);
}

Test(symbols, cpp_sites_past_static_libstdcxx_without_lines) {
    check_nodebug("fx_cpp_nodebug_static", true);
}

Test(symbols, json_and_text_show_short_names_and_keep_the_full_one) {
    const char *trace = h_tmp("cpp_sites_json.mlt");
    const char *json = h_tmp("cpp_sites.json");
    record(trace, "fx_cpp_sites");
    const char *argv[] = {h_bin("memlens"), "report", trace, "--no-advisor", "--json", json, NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    char *doc = h_read_file(json);
    cr_assert(doc);
    cr_expect(strstr(doc, "\"function\": \"app::Store<\xe2\x80\xa6>::fill\", "
                          "\"function_full\": \"app::Store<long>::fill(int)\""));
    cr_expect(strstr(doc, "\"function\": \"std::_Vector_base<\xe2\x80\xa6>::_M_allocate\", "
                          "\"function_full\": \"std::_Vector_base<double, std::allocator<double> "
                          ">::_M_allocate(unsigned long)\""));
    cr_expect(strstr(doc, "\"headline\": 4"), "the vector's site: 4 library frames, then main");
    free(doc);
    h_run_free(&r);
    /* The text report names the sites by the program's lines. */
    const char *targv[] = {h_bin("memlens"), "report", trace, "--no-advisor", NULL};
    h_run(&r, targv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "app::Store<\xe2\x80\xa6>::fill  fx_cpp_sites.cpp:14\n"
                            "        <- main  fx_cpp_sites.cpp:29\n"), "%s", r.out);
    cr_expect(strstr(r.out, "main  fx_cpp_sites.cpp:25\n"), "%s", r.out);
    cr_expect_null(strstr(r.out, "stl_vector.h"), "%s", r.out);
    h_run_free(&r);
    /* memlens diff names the sites as the report does: its headline frame,
     * short names (it printed std::_Vector_base<double, std::allocator<...
     * in full, from stl_vector.h). Against another program every site of
     * fx_cpp_sites is gone. */
    const char *other = h_tmp("cpp_sites_other.mlt");
    record(other, "fx_inline");
    const char *dargv[] = {h_bin("memlens"), "diff", trace, other, NULL};
    h_run(&r, dargv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "  gone     app::Store<\xe2\x80\xa6>::fill  fx_cpp_sites.cpp:14  <- main\n"), "%s", r.out);
    cr_expect(strstr(r.out, "  gone     main  fx_cpp_sites.cpp:25  <- __libc_start_call_main\n"), "%s", r.out);
    cr_expect_null(strstr(r.out, "stl_vector.h"), "%s", r.out);
    cr_expect_null(strstr(r.out, "std::allocator<double>"), "%s", r.out);
    h_run_free(&r);
}

/* fx_inline_deep's two sites, as gdb and llvm-symbolizer --inlining name
 * them. */
static void expect_inline_chain_three_deep(const ml_analysis_t *a) {
    const ml_site_t *s = site_of_bytes(a, 1003);
    static const struct {
        const char *function;
        uint32_t line;
        bool inlined;
    } want[] = {{"level3", 7, true}, {"level2", 11, true}, {"level1", 15, true},
                {"outer", 19, false}, {"main", 27, false}};
    cr_assert_geq(s->nframes, 5);
    for (size_t i = 0; i < 5; i++) {
        cr_expect_str_eq(s->frames[i].function, want[i].function, "level %zu", i);
        cr_expect_eq(s->frames[i].line, want[i].line, "level %zu: %s", i, s->frames[i].function);
        cr_expect_eq(s->frames[i].inlined, want[i].inlined, "level %zu", i);
    }
    s = site_of_bytes(a, 78); /* level2(77) inlined into main */
    cr_expect_str_eq(s->frames[1].function, "level2");
    cr_expect_eq(s->frames[1].line, 11);
    cr_expect_str_eq(s->frames[2].function, "main");
    cr_expect_eq(s->frames[2].line, 28);
}

static void check_inline_chain_three_deep(const char *fixture) {
    char name[64];
    snprintf(name, sizeof name, "%s.mlt", fixture);
    const char *trace = h_tmp(name);
    record(trace, fixture);
    ml_analysis_t *a = analyse(trace);
    expect_inline_chain_three_deep(a);
    ml_analysis_free(a);
}

Test(symbols, inline_chain_three_deep) {
    check_inline_chain_three_deep("fx_inline_deep");
}

/* Built with -gsplit-dwarf: the functions and their inlined instances are
 * in the .dwo file, the program has the unit's skeleton. Until 2026-12-08
 * the chain was lost and the site read "outer fx_inline_deep.c:7" (level3's
 * line under outer's name); gdb's backtrace and llvm-symbolizer --inlining
 * give the chain above. */
Test(symbols, inline_chain_three_deep_split_dwarf) {
    check_inline_chain_three_deep("fx_inline_deep_split");
}

/* The same built by clang -gsplit-dwarf: a DWARF 5 skeleton unit
 * (DW_TAG_skeleton_unit) and no .debug_aranges, so that libdw finds no unit
 * for an address and memlens' own index of the units' ranges must. Until
 * 2026-12-08 that index skipped skeleton units: every frame of the program
 * had the symbol table's name and no file, line or inlined frame ("outer",
 * "main"), where llvm-symbolizer --inlining gives the chain above. */
Test(symbols, inline_chain_three_deep_split_dwarf_clang) {
    if (!h_file_exists(h_bin("fx_inline_deep_clang_split"))) cr_skip_test("no clang");
    check_inline_chain_three_deep("fx_inline_deep_clang_split");
}

static void copy_file(const char *from, const char *to, mode_t mode) {
    int in = open(from, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(in, 0, "%s: %s", from, strerror(errno));
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    cr_assert_geq(out, 0, "%s: %s", to, strerror(errno));
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        cr_assert_eq(write(out, buf, (size_t)n), n);
    cr_assert_eq(n, 0);
    close(in);
    close(out);
}

/* The symbol cache (analysis/symcache.c) keeps a module's frames while its
 * stamp stands; with split DWARF the frames come from the .dwo files too.
 * A copy of fx_inline_deep_dwo whose .dwo (found only beside it) is gone:
 * libdw names the site by the symbol table ("outer"), without its inlined
 * frames, and the cache keeps that. With the .dwo back, the next session
 * must give the chain, as a session without the cache does. Until
 * 2026-12-08 the stamp left the .dwo out, and the cache gave "outer
 * fx_inline_deep.c:7" for ever. */
typedef struct {
    char prog[4096], dwo[4096], dwo_from[4096 + 256], trace[4096];
} dwo_copy_t;

/* A copy of fixture NAME (built in NAME.d, its .dwo found only beside it)
 * and of its .dwo in the test's folder, recorded; the reports that follow
 * use a symbol cache of their own. */
static void dwo_copy_record(dwo_copy_t *c, const char *name) {
    char dir[4096], dwo_name[256] = "", from[4096 + 256], base[300];
    snprintf(base, sizeof base, "%s.d", name);
    snprintf(dir, sizeof dir, "%s", h_bin(base));
    DIR *d = opendir(dir);
    if (!d) cr_skip_test("%s: %s", dir, strerror(errno));
    for (struct dirent *e; (e = readdir(d));)
        if (ends_with(e->d_name, ".dwo")) snprintf(dwo_name, sizeof dwo_name, "%s", e->d_name);
    closedir(d);
    cr_assert(dwo_name[0], "no .dwo in %s", dir);
    snprintf(c->prog, sizeof c->prog, "%s", h_tmp(name));
    snprintf(c->dwo, sizeof c->dwo, "%s", h_tmp(dwo_name));
    snprintf(from, sizeof from, "%s/%s", dir, name);
    copy_file(from, c->prog, 0755);
    snprintf(c->dwo_from, sizeof c->dwo_from, "%s/%s", dir, dwo_name);
    copy_file(c->dwo_from, c->dwo, 0644);
    snprintf(base, sizeof base, "%s.mlt", name);
    snprintf(c->trace, sizeof c->trace, "%s", h_tmp(base));
    const char *run[] = {h_bin("memlens"), "run", "-q", "-o", c->trace, "--", c->prog, NULL};
    h_run_t r;
    h_run(&r, run);
    cr_assert_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
    cr_assert_eq(setenv("MEMLENS_DEBUG_CACHE", h_tmp("dwo-cache"), 1), 0);
}

Test(symbols, split_dwarf_frames_follow_their_dwo_file) {
    dwo_copy_t c;
    dwo_copy_record(&c, "fx_inline_deep_dwo");
    const char *trace = c.trace, *dwo = c.dwo, *from = c.dwo_from;

    cr_assert_eq(unlink(dwo), 0);
    ml_analysis_t *a = analyse(trace);
    const ml_site_t *s = site_of_bytes(a, 1003);
    cr_expect_str_eq(s->frames[0].function, "outer", "without its .dwo");
    cr_expect(!s->frames[0].inlined);
    ml_analysis_free(a);

    copy_file(from, dwo, 0644);
    a = analyse(trace);
    expect_inline_chain_three_deep(a);
    ml_analysis_free(a);
}

/* The same program built -gz: its debug sections are compressed, and the
 * debug cache has libdw read an uncompressed copy of it, in the cache. libdw
 * looks for a .dwo beside the file it reads: until 2026-12-08 it found none
 * there, and the site was "outer fx_inline_deep.c:7" whenever the cache was
 * on (llvm-symbolizer in the program's folder, and memlens with the cache
 * off, give the chain). Twice: the second report from the symbol cache. */
Test(symbols, split_dwarf_compressed_program_finds_its_dwo) {
    dwo_copy_t c;
    dwo_copy_record(&c, "fx_inline_deep_dwo_gz");
    for (int pass = 0; pass < 2; pass++) {
        ml_analysis_t *a = analyse(c.trace);
        expect_inline_chain_three_deep(a);
        ml_analysis_free(a);
    }
}

/* Debug sections compressed with zstd, which libdw 0.188 cannot read (GNU
 * addr2line reads them): the frames keep the symbol table's names, without
 * file or line, and the report says why. Until 2026-12-08 it said nothing. */
Test(symbols, zstd_debug_sections_are_a_warning) {
    const char *prog = h_bin("fx_inline_deep_zstd");
    if (!h_file_exists(prog)) cr_skip_test("objcopy cannot compress with zstd");
    const char *trace = h_tmp("inline_deep_zstd.mlt");
    const char *run[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", prog, NULL};
    h_run_t r;
    h_run(&r, run);
    cr_assert_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
    const char *rep[] = {h_bin("memlens"), "report", trace, "--no-advisor", "--json", "/dev/null", NULL};
    h_run(&r, rep);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "fx_inline_deep_zstd are compressed with zstd, which this libdw cannot read"),
              "%s", r.err);
    h_run_free(&r);
    ml_analysis_t *a = analyse(trace);
    const ml_site_t *s = site_of_bytes(a, 1003);
    cr_expect_str_eq(s->frames[0].function, "outer");
    cr_expect_null(s->frames[0].file);
    ml_analysis_free(a);
}

Test(symbols, short_names) {
    static const char *const cases[][2] = {
        {"void std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>("
         "__gnu_cxx::__normal_iterator<int*, std::vector<int, std::allocator<int> > >, int const&)",
         "std::vector<\xe2\x80\xa6>::_M_realloc_insert<\xe2\x80\xa6>"},
        {"ns::Factory<int>::make()", "ns::Factory<\xe2\x80\xa6>::make"},
        {"std::ostream& std::operator<< <std::char_traits<char> >(std::ostream&, char const*)",
         "std::operator<< <\xe2\x80\xa6>"},
        {"operator new(unsigned long)", "operator new"},
        {"operator delete[](void*)", "operator delete[]"},
        {"(anonymous namespace)::grow(int) const", "(anonymous namespace)::grow"},
        {"run(int)::{lambda(int)#1}::operator()(int) const", "run::{lambda(int)#1}::operator()"},
        {"A::operator unsigned long() const", "A::operator unsigned long"},
        {"bool std::operator< <int>(std::pair<int, int> const&, std::pair<int, int> const&)",
         "std::operator< <\xe2\x80\xa6>"},
        {"main", "main"},
        {"[libc.so.6+0x1234]", "[libc.so.6+0x1234]"},
        /* Rust: a qualified path keeps its type and trait. */
        {"<fx_rust::Square as fx_rust::Shape>::area_table",
         "<fx_rust::Square as fx_rust::Shape>::area_table"},
        {"<alloc::vec::Vec<u8> as core::ops::drop::Drop>::drop",
         "<alloc::vec::Vec<\xe2\x80\xa6> as core::ops::drop::Drop>::drop"},
        {"<str>::trim_start_matches::<&str>", "<str>::trim_start_matches::<\xe2\x80\xa6>"},
        {"fx_rust::main::{closure#0}", "fx_rust::main::{closure#0}"},
    };
    char buf[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_expect_str_eq(ml_frame_short_name(cases[i][0], buf, sizeof buf), cases[i][1]);
    /* Cut at a character boundary: never half of "…". */
    cr_expect_str_eq(ml_frame_short_name("ns::Factory<int>::make()", buf, 14), "ns::Factory<");
}

Test(symbols, own_code) {
    const char *exe = "/usr/bin/cppcheck";
    cr_expect(ml_frame_is_own_code("/usr/bin/cppcheck", "/build/cppcheck/lib/token.cpp", exe));
    cr_expect_not(ml_frame_is_own_code("/usr/bin/cppcheck", "/usr/include/c++/12/bits/stl_vector.h", exe));
    /* A C++ standard library's headers under any prefix, a version after
     * include/c++/; a project's own include/c++/ directory stays its own. */
    cr_expect_not(ml_frame_is_own_code(exe, "/usr/local/include/c++/13/bits/stl_vector.h", exe));
    cr_expect_not(ml_frame_is_own_code(exe, "/opt/rh/gcc-toolset-12/root/usr/lib/gcc/x86_64-redhat-linux/12/../../../../include/c++/12/bits/basic_string.h", exe));
    cr_expect_not(ml_frame_is_own_code(exe, "/home/u/miniconda3/x86_64-conda-linux-gnu/include/c++/4.8.5/bits/stl_tree.h", exe));
    cr_expect_not(ml_frame_is_own_code(exe, "/home/u/llvm/include/c++/v1/vector", exe));
    cr_expect(ml_frame_is_own_code(exe, "/home/u/proj/include/c++/mylib.h", exe));
    cr_expect_not(ml_frame_is_own_code("/lib/x86_64-linux-gnu/libc.so.6", "../csu/libc-start.c", exe));
    cr_expect_not(ml_frame_is_own_code("/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0", NULL, exe));
    cr_expect(ml_frame_is_own_code("/home/u/proj/libfoo.so", "/home/u/proj/foo.c", exe));
    cr_expect(ml_frame_is_own_code("/usr/local/lib/libmine.so", NULL, exe));
    cr_expect_not(ml_frame_is_own_code("/home/u/build/libmemlens.so", NULL, exe));
    cr_expect_not(ml_frame_is_own_code("linux-vdso.so.1", NULL, exe));
    cr_expect_not(ml_frame_is_own_code(NULL, NULL, exe));
    /* Rust's standard library and Cargo's crates, compiled into the program. */
    const char *rs = "/home/u/proj/target/release/tool";
    cr_expect(ml_frame_is_own_code(rs, "/home/u/proj/src/main.rs", rs));
    cr_expect_not(ml_frame_is_own_code(rs, "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/alloc/src/raw_vec/mod.rs", rs));
    cr_expect_not(ml_frame_is_own_code(rs, "/usr/src/rustc-1.63.0/library/alloc/src/vec/mod.rs", rs));
    cr_expect_not(ml_frame_is_own_code(rs, "/usr/src/rustc-1.63.0/vendor/hashbrown/src/map.rs", rs));
    cr_expect_not(ml_frame_is_own_code(rs, "library/std/src/rt.rs", rs));
    cr_expect_not(ml_frame_is_own_code(rs, "/home/u/.cargo/registry/src/index.crates.io-6f17d22bba15001f/serde_json-1.0.1/src/de.rs", rs));
    cr_expect(ml_frame_is_own_code(rs, "/home/u/proj/library/alloc.rs", rs));
    cr_expect_not(ml_frame_is_own_code(rs, "vendor/gimli-0.25.0/src/read/abbrev.rs", rs));
}

char *ml_rust_demangle(const char *sym); /* analysis/rust_demangle.c */
bool ml__frame_is_allocator(const ml_frame_t *f); /* analysis/symbols.c */

Test(symbols, allocator_frames) {
    static const char *const yes[] = {
        "malloc", "operator new(unsigned long)", "operator new[](unsigned long)",
        "std::__new_allocator<int>::allocate(unsigned long, void const*)",
        "std::allocator_traits<std::allocator<int> >::allocate(std::allocator<int>&, unsigned long)",
        /* libc++ */
        "void* std::__1::__libcpp_operator_new<unsigned long>(unsigned long)",
        "std::__1::__libcpp_allocate(unsigned long, unsigned long)",
        "std::__1::allocator<double>::allocate(unsigned long)",
        "std::__1::allocator_traits<std::__1::allocator<double> >::allocate(std::__1::allocator<double>&, unsigned long)",
        /* Rust */
        "__rust_alloc", "__rust_realloc", "__rdl_alloc", "alloc::alloc::alloc", "alloc::alloc::exchange_malloc",
        "<alloc::alloc::Global as core::alloc::Allocator>::allocate", "<alloc::alloc::Global>::alloc_impl",
        "alloc::alloc::Global::grow_impl", "<std::alloc::System as core::alloc::global::GlobalAlloc>::alloc",
        "std::sys::pal::unix::alloc::realloc_fallback",
        /* GNAT */
        "__gnat_malloc", "__gnat_realloc", "system__pool_global__allocate",
        "system.storage_pools.subpools.allocate_any_controlled"};
    static const char *const no[] = {
        "main", "strdup", "std::vector<int, std::allocator<int> >::_M_realloc_insert(int const&)",
        "std::__1::vector<double, std::__1::allocator<double> >::__vallocate(unsigned long)",
        "std::__1::allocator<double>::deallocate(double*, unsigned long)",
        "<alloc::raw_vec::RawVec<u8>>::reserve", "alloc::raw_vec::finish_grow::<alloc::alloc::Global>",
        "fx_rust::main", "allocate", "fx_ada.store.make", "ada__strings__unbounded__allocate",
        "__gnat_free"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        ml_frame_t f = {.function = yes[i], .module = "/usr/bin/prog"};
        cr_expect(ml__frame_is_allocator(&f), "%s", yes[i]);
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        ml_frame_t f = {.function = no[i], .module = "/usr/bin/prog"};
        cr_expect_not(ml__frame_is_allocator(&f), "%s", no[i]);
    }
}

Test(symbols, rust_names) {
    static const char *const cases[][2] = {
        /* legacy: the hash goes, the escapes are read */
        {"_ZN4leak4main17h68d97aefc12db3cbE", "leak::main"},
        {"_ZN3std2rt10lang_start28_$u7b$$u7b$closure$u7d$$u7d$17h71acb6ed29efb28bE",
         "std::rt::lang_start::{{closure}}"},
        {"_ZN63_$LT$alloc..alloc..Global$u20$as$u20$core..alloc..Allocator$GT$8allocate17h9d999105ada8a6a4E",
         "<alloc::alloc::Global as core::alloc::Allocator>::allocate"},
        {"_ZN4leak4main17h68d97aefc12db3cbE.llvm.123", "leak::main"},
        /* v0: paths, impls, generic arguments, back-references, closures */
        {"_RNvMNtCslNYArtu3iFV_5alloc5allocNtB2_6Global18alloc_impl_runtime",
         "<alloc::alloc::Global>::alloc_impl_runtime"},
        {"_RINvMNtCsgEmfK2I1SDS_4core3stre18trim_start_matchesReECsgY6Mt91CT9J_14rustc_demangle",
         "<str>::trim_start_matches::<&str>"},
        {"_RNCNvCs1234_7fx_rust4main0B3_", "fx_rust::main::{closure#0}"},
        {"_RNvXCs1234_7fx_rustNtB2_6SquareNtB2_5Shape10area_table",
         "<fx_rust::Square as fx_rust::Shape>::area_table"},
        {"_RINvCs1234_7fx_rust5tableKj10_EB2_", "fx_rust::table::<16>"},
        {"_RINvCs1234_7fx_rust5tableTmhEEB2_", "fx_rust::table::<(u32, u8)>"},
        {"_RINvCs1234_7fx_rust5tableFUKCRmEuEB2_", "fx_rust::table::<unsafe extern \"C\" fn(&u32)>"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *d = ml_rust_demangle(cases[i][0]);
        cr_expect_str_eq(d ? d : "(null)", cases[i][1], "%s", cases[i][0]);
        free(d);
    }
    /* Not Rust, or not whole: no name (the caller keeps the symbol). */
    static const char *const no[] = {"_ZN3app4makeEm", "_ZN3foo3barE", "main", "_R", "_RNvC",
                                     "_RNvCs1234_7fx_rust4ma", "_RB_", "_RNvB0_1x"};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        char *d = ml_rust_demangle(no[i]);
        cr_expect_null(d, "%s gave %s", no[i], d ? d : "");
        free(d);
    }
}

/* A thread_local's first use registers its destructor (glibc's
 * __cxa_thread_atexit allocates) from the thread_local's init function,
 * called by its wrapper (gcc's _ZTH/_ZTW symbols at -O0, with the
 * declaration's line; clang's __tls_init and __cxx_global_var_init without
 * a line): both sites, one a thread's and one main's, are named by work's
 * line 12, where the thread_local is first used. The builds before named
 * clang -O2's "__cxx_global_var_init" with no line, and showed the init
 * and wrapper functions as "tv" (the demangled "TLS init function for tv"
 * shortened to its last word), naming gcc -O0's sites "tv" at line 9 and
 * clang -O0's "tv" with no line. */
static void check_tlsinit(const char *fixture, bool keeps_wrappers) {
    char name[64];
    snprintf(name, sizeof name, "%s.mlt", fixture);
    const char *trace = h_tmp(name);
    record(trace, fixture);
    ml_analysis_t *a = analyse(trace);
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    int found = 0, wrappers = 0;
    for (size_t i = 0; i < n; i++) {
        bool reg = false;
        for (uint32_t k = 0; k < s[i].nframes; k++) {
            const char *fn = s[i].frames[k].function;
            char shown[256];
            ml_frame_short_name(fn, shown, sizeof shown);
            cr_expect_str_neq(shown, "tv", "%s: frame %u of site %zu is shown as the variable (%s)", fixture, k, i,
                              fn ? fn : "");
            reg |= fn && !strcmp(fn, "__cxa_thread_atexit");
            wrappers += fn && !strcmp(shown, "TLS wrapper function for tv");
        }
        if (!reg) continue;
        found++;
        const ml_frame_t *f = &s[i].frames[s[i].headline];
        cr_expect_str_eq(f->function, "work(int)", "%s", fixture);
        cr_expect(ends_with(f->file, "/fx_tlsinit.cpp"), "%s: %s", fixture, f->file);
        cr_expect_eq(f->line, 12, "%s: line %u", fixture, f->line);
    }
    cr_expect_eq(found, 2, "%s", fixture);
    if (keeps_wrappers) cr_expect_geq(wrappers, 2, "%s: the wrapper is named", fixture);
    ml_analysis_free(a);
}

Test(symbols, thread_local_init_named_by_the_users_line) {
    check_tlsinit("fx_tlsinit_o0", true);
    if (access(h_bin("fx_tlsinit_clang"), X_OK) != 0) cr_skip_test("clang is not installed");
    check_tlsinit("fx_tlsinit_clang", false);
    check_tlsinit("fx_tlsinit_clang_o0", true);
}

/* Calls per headline (function:line) of fx_fpnew's own sites. */
static void fpnew_counts(const char *unwinder, uint64_t *build18, uint64_t *main34, uint64_t *other) {
    char name[64];
    snprintf(name, sizeof name, "fpnew_%s.mlt", unwinder);
    const char *trace = h_tmp(name);
    record_unwind(trace, "fx_fpnew", unwinder);
    ml_analysis_t *a = analyse(trace);
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    *build18 = *main34 = *other = 0;
    for (size_t i = 0; i < n; i++) {
        const ml_frame_t *f = &s[i].frames[s[i].headline];
        if (!ends_with(f->file, "/fx_fpnew.cpp")) continue;
        if (!strcmp(f->function, "build(int)") && f->line == 18) *build18 += s[i].alloc_calls;
        else if (!strcmp(f->function, "main") && f->line == 34) *main34 += s[i].alloc_calls;
        else *other += s[i].alloc_calls;
    }
    ml_analysis_free(a);
}

/* --unwind fp through allocation wrappers without a frame pointer
 * (libstdc++'s operator new, libc's strdup) in a program built with them:
 * each `new T` at its own line, as the default walker says. The frame-
 * pointer walk alone skipped build() itself: its 12 calls were counted at
 * main:33 and build:20/21 (the recursive calls), and strdup's at no line
 * of the program. */
Test(symbols, unwind_fp_names_the_caller_of_a_wrapper_without_frame_pointer) {
    uint64_t b, m, o, fb, fm, fo;
    fpnew_counts("libunwind", &b, &m, &o);
    cr_expect(b == 12 && m == 1 && o == 0, "default walker: build:18 %llu, main:34 %llu, other %llu",
              (unsigned long long)b, (unsigned long long)m, (unsigned long long)o);
    fpnew_counts("fp", &fb, &fm, &fo);
    cr_expect(fb == 12 && fm == 1 && fo == 0, "--unwind fp: build:18 %llu, main:34 %llu, other %llu",
              (unsigned long long)fb, (unsigned long long)fm, (unsigned long long)fo);
}
