/* test_html.c - the HTML report writer: hostile strings stay data, the page
 * is self-contained, bad documents and bad paths fail cleanly. What the page
 * draws is checked in a real browser by tests/e2e/test_html_browser.sh. */
#define _GNU_SOURCE
#include "ml_report_html.h"
#include "ml_outfile.h"
#include "ml_report.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ------------------------------------------------------------------------- */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------- */

static char tmpdir[64];

static void mk_tmpdir(void) {
    strcpy(tmpdir, "/tmp/ml_test_html_XXXXXX");
    cr_assert(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
}

static void rm_tmpdir(void) {
    DIR *d = opendir(tmpdir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        if (unlink(p) != 0) rmdir(p);
    }
    closedir(d);
    rmdir(tmpdir);
}

static const char *tpath(const char *name) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", tmpdir, name);
    return p[k];
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "open %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    cr_assert(b);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = 0;
    fclose(f);
    if (len) *len = (size_t)n;
    return b;
}

static void spit(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
}

static size_t count_ci(const char *hay, const char *needle) {
    size_t n = 0, k = strlen(needle);
    for (const char *p = hay; *p; p++)
        if (!strncasecmp(p, needle, k)) n++;
    return n;
}

/* Entries in tmpdir other than the given one (leftover temporary files). */
static int entries_except(const char *keep) {
    DIR *d = opendir(tmpdir);
    cr_assert(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (keep && !strcmp(e->d_name, keep)) continue;
        n++;
    }
    closedir(d);
    return n;
}

static int write_html(const char *json, const char *out, char *err, size_t errlen) {
    return ml_report_html_write(json, strlen(json), out, err, errlen);
}

/* The embedded data: the text of the ml-data script element. */
static char *data_of(const char *page) {
    const char *open = strstr(page, "id=\"ml-data\">");
    cr_assert(open, "the page has the ml-data element");
    open += strlen("id=\"ml-data\">");
    const char *close = strstr(open, "</script>");
    cr_assert(close);
    return strndup(open, (size_t)(close - open));
}

/* Undoes the writer's escapes: \u003c \u003e \u0026 -> < > & */
static void unescape_lt_gt_amp(char *s) {
    char *w = s;
    for (const char *r = s; *r;) {
        if (!strncmp(r, "\\u003c", 6)) *w++ = '<', r += 6;
        else if (!strncmp(r, "\\u003e", 6)) *w++ = '>', r += 6;
        else if (!strncmp(r, "\\u0026", 6)) *w++ = '&', r += 6;
        else *w++ = *r++;
    }
    *w = 0;
}

static int valid_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!len || i + len > n) return 0;
        for (size_t k = 1; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        i += len;
    }
    return 1;
}

/* A report whose program-derived strings try every way out of the page. */
static const char HOSTILE[] =
    "{\"schema_version\":1,"
    "\"process\":{\"pid\":7,\"command\":[\"./prog\",\"</script><img src=x onerror=alert(1)>\","
    "\"</SCRIPT >\",\"<!-- x\",\"it's \\\"quoted\\\" & <b>bold</b>\",\"caf\xC3\xA9 \xE6\xB8\xAC\xE8\xA9\xA6 "
    "\xF0\x9F\x94\xA5\",\"line\\u2028sep\",\"<\\/script>\"],\"exit_code\":0,\"signal\":null,"
    "\"sampled\":false},"
    "\"sites\":[{\"id\":1,\"frames\":[{\"function\":\"</script><script>alert(2)</script>\","
    "\"file\":\"/src/\\\"we'ird\\\" & <dir>/a.c\",\"line\":3,\"module\":\"javascript:alert(3)\","
    "\"address\":4096}],\"alloc_calls\":1,\"bytes_allocated\":16,\"peak_bytes\":16,"
    "\"leaked_bytes\":16,\"leaked_blocks\":1,\"temporary_allocs\":0}],"
    "\"flame\":{\"name\":\"all\",\"alloc\":16,\"peak\":16,\"leaked\":16,\"calls\":1,\"children\":"
    "[{\"name\":\"<svg onload=alert(4)>\",\"file\":\"x.c\",\"line\":1,\"alloc\":16,\"peak\":16,"
    "\"leaked\":16,\"calls\":1,\"children\":[]}]},"
    "\"suggestions\":[{\"strategy\":\"<i>pool</i>\",\"message\":\"]]></script>\",\"site\":1,"
    "\"estimated_saving_bytes\":1,\"evidence\":\"&lt;not an entity&gt;\"}]}";

void setup(void) {
    mk_tmpdir();
}

void teardown(void) {
    rm_tmpdir();
}

TestSuite(html, .init = setup, .fini = teardown, .timeout = 30);

/* ------------------------------------------------------------------------- */
/* Escaping                                                                  */
/* ------------------------------------------------------------------------- */

Test(html, hostile_strings_cannot_leave_the_data_element) {
    char err[256];
    const char *out = tpath("r.html");
    cr_assert_eq(write_html(HOSTILE, out, err, sizeof err), 0, "write: %s", err);
    size_t len;
    char *page = slurp(out, &len);

    /* Exactly the two </script> of the template: the data element's and the
     * code's. Any more would come from the data. */
    cr_assert_eq(count_ci(page, "</script"), 2, "no </script from data");
    cr_assert_eq(count_ci(page, "<img"), 0);
    cr_assert_eq(count_ci(page, "<svg onload"), 0);
    cr_assert_eq(count_ci(page, "<!-- x"), 0);
    cr_assert_eq(count_ci(page, "<b>bold"), 0);

    char *data = data_of(page);
    cr_assert_null(strchr(data, '<'), "no raw '<' inside the data");
    cr_assert_null(strchr(data, '>'), "no raw '>' inside the data");
    cr_assert_null(strchr(data, '&'), "no raw '&' inside the data");
    cr_assert(strstr(data, "\\u003c/script\\u003e\\u003cimg src=x onerror=alert(1)\\u003e"));

    /* Nothing else changed: undoing the three escapes gives the input. */
    unescape_lt_gt_amp(data);
    cr_assert_str_eq(data, HOSTILE);
    cr_assert(strstr(page, "caf\xC3\xA9 \xE6\xB8\xAC\xE8\xA9\xA6 \xF0\x9F\x94\xA5"), "UTF-8 kept");
    free(data);
    free(page);
}

Test(html, invalid_utf8_in_strings_becomes_replacement_characters) {
    /* a lone continuation byte, an overlong '/', a surrogate, a truncated
     * sequence at the end of the string */
    const char *doc = "{\"process\":{\"command\":[\"a\x80z\",\"\xC0\xAF\",\"\xED\xA0\x80\",\"x\xE6\xB8\"]}}";
    char err[256];
    cr_assert_eq(write_html(doc, tpath("r.html"), err, sizeof err), 0, "%s", err);
    size_t len;
    char *page = slurp(tpath("r.html"), &len);
    cr_assert(valid_utf8((const unsigned char *)page, len), "the page is valid UTF-8");
    cr_assert(strstr(page, "a\xEF\xBF\xBDz"));
    cr_assert(strstr(page, "\"x\xEF\xBF\xBD\xEF\xBF\xBD\""));
    free(page);
}

/* ------------------------------------------------------------------------- */
/* Self-contained                                                            */
/* ------------------------------------------------------------------------- */

Test(html, page_is_self_contained_and_never_parses_data_as_html) {
    char err[256];
    cr_assert_eq(write_html(HOSTILE, tpath("r.html"), err, sizeof err), 0, "%s", err);
    char *page = slurp(tpath("r.html"), NULL);
    /* The data holds the hostile text ("src=x"), inert as shown above; what
     * matters is the markup around it. */
    char *data = data_of(page);
    char *at = strstr(page, data);
    memmove(at, at + strlen(data), strlen(at + strlen(data)) + 1);
    free(data);
    cr_assert_eq(count_ci(page, "http://"), 0, "no http:// reference");
    cr_assert_eq(count_ci(page, "https://"), 0, "no https:// reference");
    cr_assert_eq(count_ci(page, "src="), 0, "no src= to an external file");
    cr_assert_eq(count_ci(page, "<link"), 0);
    cr_assert_eq(count_ci(page, "@import"), 0);
    cr_assert_eq(count_ci(page, "url("), 0);
    cr_assert_eq(count_ci(page, "fetch("), 0);
    cr_assert_eq(count_ci(page, "XMLHttpRequest"), 0);
    /* The script never turns strings into markup. */
    cr_assert_eq(count_ci(page, "innerHTML"), 0);
    cr_assert_eq(count_ci(page, "outerHTML"), 0);
    cr_assert_eq(count_ci(page, "insertAdjacentHTML"), 0);
    cr_assert_eq(count_ci(page, "document.write"), 0);
    cr_assert_eq(count_ci(page, "eval("), 0);
    /* And the browser is told so: only our own script may run, nothing loads. */
    cr_assert(strstr(page, "Content-Security-Policy"));
    cr_assert(strstr(page, "default-src 'none'; script-src 'sha256-"));
    free(page);
}

/* ------------------------------------------------------------------------- */
/* Input checking                                                            */
/* ------------------------------------------------------------------------- */

Test(html, accepts_any_json) {
    static const char *const good[] = {
        "{}", "[]", "0", "-0.5e+3", "\"x\"", "null", "true", " \n{\"a\":[1,{\"b\":null}],\"c\":false}\n",
        "{\"a\":\"\\u00e9\\n\\t\\\\\\/\\\"\"}", "[1E5,2e-3,0.25,-7]",
    };
    char err[256];
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        cr_assert_eq(write_html(good[i], tpath("ok.html"), err, sizeof err), 0, "'%s': %s", good[i],
                     err);

    /* Flame trees of deep recursion nest deeply: no recursion limit here. */
    size_t depth = 200000;
    char *deep = malloc(2 * depth + 1);
    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    deep[2 * depth] = 0;
    cr_assert_eq(write_html(deep, tpath("ok.html"), err, sizeof err), 0, "%s", err);
    free(deep);
}

Test(html, rejects_what_is_not_json) {
    static const char *const bad[] = {
        "", "   ", "{", "}", "[1,]", "{\"a\":}", "{\"a\" 1}", "{a:1}", "{\"a\":1,}", "nul", "\"abc",
        "[\"a\x01\"]", "[1] x", "01", "-", "1.", "1e", ".5", "[\"\\x\"]", "[\"\\u12g4\"]",
        "</script><script>alert(1)</script>", "{\"a\":NaN}", "[Infinity]", "[1 2]", "{\"a\":1}}",
    };
    char err[256];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        int rc = write_html(bad[i], tpath("bad.html"), err, sizeof err);
        cr_assert_eq(rc, -EINVAL, "'%s' is rejected (rc %d)", bad[i], rc);
        cr_assert(strstr(err, "not JSON"), "message for '%s': '%s'", bad[i], err);
        cr_assert_eq(access(tpath("bad.html"), F_OK), -1, "no file for '%s'", bad[i]);
        cr_assert_eq(entries_except(NULL), 0, "no leftovers for '%s'", bad[i]);
    }
    /* A NUL inside the document is not JSON either (len covers it). */
    cr_assert_eq(ml_report_html_write("[\"a\0b\"]", 7, tpath("bad.html"), err, sizeof err), -EINVAL);
    cr_assert_eq(ml_report_html_write(NULL, 0, tpath("bad.html"), err, sizeof err), -EINVAL);
    cr_assert_eq(ml_report_html_write("{}", 2, NULL, err, sizeof err), -EINVAL);
    cr_assert_eq(ml_report_html_write("{}", 2, "", NULL, 0), -EINVAL);
}

/* ------------------------------------------------------------------------- */
/* Output files                                                              */
/* ------------------------------------------------------------------------- */

Test(html, unwritable_paths_fail_with_a_message_and_leave_nothing) {
    char err[256];
    int rc = write_html("{}", "/nonexistent-ml-dir/r.html", err, sizeof err);
    cr_assert_eq(rc, -ENOENT, "rc %d", rc);
    cr_assert(strstr(err, "/nonexistent-ml-dir/r.html"), "message names the path: %s", err);

    spit(tpath("file"), "x");
    rc = write_html("{}", tpath("file/r.html"), err, sizeof err);
    cr_assert_eq(rc, -ENOTDIR, "rc %d", rc);
    cr_assert_eq(entries_except("file"), 0);

    /* An existing directory as the output: the rename fails, and the
     * temporary page beside it is removed. */
    cr_assert_eq(mkdir(tpath("adir"), 0755), 0);
    rc = write_html("{}", tpath("adir"), err, sizeof err);
    cr_assert(rc == -EISDIR || rc == -ENOTEMPTY || rc == -EEXIST, "rc %d", rc);
    cr_assert(strstr(err, "adir"), "%s", err);
    cr_assert_eq(entries_except("adir") - 1, 0, "no temporary file left"); /* "file" */
    rc = write_html("{}", "/tmp/", err, sizeof err);
    cr_assert_eq(rc, -EISDIR);

    if (geteuid() != 0) { /* root writes anywhere */
        cr_assert_eq(mkdir(tpath("ro"), 0555), 0);
        rc = write_html("{}", tpath("ro/r.html"), err, sizeof err);
        cr_assert_eq(rc, -EACCES, "rc %d", rc);
        chmod(tpath("ro"), 0755);
    }
}

/* The disk fills up halfway through the page: no half-written report. */
Test(html, a_failed_write_leaves_no_file_and_keeps_the_old_one) {
    char err[256];
    const char *out = tpath("r.html");
    /* The previous report is a page memlens wrote: only such a file may be
     * replaced without --force (docs/security.md). */
    cr_assert_eq(write_html("[\"previous report\"]", out, err, sizeof err), 0, "%s", err);
    char *prev = slurp(out, NULL);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {.rlim_cur = 20000, .rlim_max = RLIM_INFINITY};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    int rc = write_html(HOSTILE, out, err, sizeof err);
    cr_assert_eq(rc, -EFBIG, "rc %d: %s", rc, err);
    cr_assert(strstr(err, "r.html"), "%s", err);
    char *kept = slurp(out, NULL);
    cr_assert_str_eq(kept, prev);
    free(kept);
    cr_assert_eq(entries_except("r.html"), 0, "no temporary file left");

    /* Invalid input leaves it alone too; a good write replaces it. */
    rl.rlim_cur = RLIM_INFINITY;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    cr_assert_eq(write_html("{", out, err, sizeof err), -EINVAL);
    kept = slurp(out, NULL);
    cr_assert_str_eq(kept, prev);
    free(kept);
    free(prev);
    cr_assert_eq(write_html("{}", out, err, sizeof err), 0, "%s", err);
    kept = slurp(out, NULL);
    cr_assert(strstr(kept, "<!DOCTYPE html>"));
    free(kept);
    cr_assert_eq(entries_except("r.html"), 0);
}

/* A report holds the command line and every function name: private (0600)
 * whatever the umask, 0640 when asked (docs/security.md); never written
 * through a link, and a file memlens did not write is replaced only with
 * ML_OUTFILE_FORCE. */
Test(html, the_page_is_private_and_never_written_through_a_link) {
    char err[512];
    mode_t old = umask(0);
    cr_assert_eq(write_html("{}", tpath("r.html"), err, sizeof err), 0, "%s", err);
    cr_assert_eq(ml_report_html_write_flags("{}", 2, tpath("g.html"), ML_OUTFILE_GROUP, err, sizeof err), 0,
                 "%s", err);
    umask(old);
    struct stat st;
    cr_assert_eq(stat(tpath("r.html"), &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "mode %o", st.st_mode & 0777);
    cr_assert_eq(stat(tpath("g.html"), &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0640, "mode %o", st.st_mode & 0777);

    spit(tpath("notes.txt"), "my notes");
    cr_assert_eq(symlink("notes.txt", tpath("link.html")), 0);
    cr_assert_eq(write_html("{}", tpath("link.html"), err, sizeof err), -ELOOP);
    cr_assert(strstr(err, "symbolic link"), "%s", err);
    cr_assert_eq(write_html("{}", tpath("notes.txt"), err, sizeof err), -EEXIST);
    char *kept = slurp(tpath("notes.txt"), NULL);
    cr_assert_str_eq(kept, "my notes");
    free(kept);
    cr_assert_eq(ml_report_html_write_flags("{}", 2, tpath("notes.txt"), ML_OUTFILE_FORCE, err, sizeof err), 0,
                 "%s", err);
    kept = slurp(tpath("notes.txt"), NULL);
    cr_assert(strstr(kept, "<!DOCTYPE html>"));
    free(kept);
}

/* fsync, counted: this definition in the program takes the calls that the
 * report and trace libraries, linked in statically, make. */
static int fsyncs;
int fsync(int fd) {
    fsyncs++;
    return fdatasync(fd);
}

Test(html, reports_are_renamed_into_place_without_fsync_traces_with_it) {
    char err[512];
    fsyncs = 0;
    cr_assert_eq(write_html("{}", tpath("r.html"), err, sizeof err), 0, "%s", err);
    ml_out_t out;
    cr_assert_eq(ml_out_open(&out, tpath("r.json"), err, sizeof err), 0, "%s", err);
    fputs("{}\n", out.f);
    cr_assert_eq(ml_out_commit(&out, err, sizeof err), 0, "%s", err);
    cr_expect_eq(fsyncs, 0, "a report is made again from its trace: no fsync (%d)", fsyncs);
    /* A trace (ml_outfile without ML_OUTFILE_NOSYNC) is synced before the
     * rename. */
    ml_outfile_t f;
    cr_assert_eq(ml_outfile_open(&f, tpath("t.mlt"), ML_OUTFILE_NEW, err, sizeof err), 0, "%s", err);
    cr_assert_eq(write(f.fd, "x", 1), 1);
    cr_assert_eq(ml_outfile_commit(&f, err, sizeof err), 0, "%s", err);
    cr_expect_eq(fsyncs, 1, "the trace is synced once (%d)", fsyncs);
    char *j = slurp(tpath("r.json"), NULL);
    cr_expect_str_eq(j, "{}\n");
    free(j);
}

/* renameat2, counted by its flags: the same way as fsync above. */
static int exchanges, plain_renames;
int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags) {
    if (flags & RENAME_EXCHANGE) exchanges++;
    return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, flags);
}
int rename(const char *oldpath, const char *newpath) {
    plain_renames++;
    return (int)syscall(SYS_renameat2, AT_FDCWD, oldpath, AT_FDCWD, newpath, 0);
}

static int dir_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.' || (e->d_name[1] && (e->d_name[1] != '.' || e->d_name[2]))) n++;
    if (d) closedir(d);
    return n;
}

Test(html, a_report_replaces_its_old_self_by_exchanging_names_and_leaves_no_temporary) {
    char err[512];
    cr_assert_eq(write_html("{}", tpath("x.html"), err, sizeof err), 0, "%s", err);
    struct stat st0, st1;
    cr_assert_eq(stat(tpath("x.html"), &st0), 0);
    int before = dir_entries(tmpdir);
    exchanges = plain_renames = 0;
    cr_assert_eq(write_html("{\"a\": 1}", tpath("x.html"), err, sizeof err), 0, "%s", err);
    /* ext4 writes the data out before a rename over an existing file; the
     * exchange does not (outfile.c, replace) */
    cr_expect_eq(exchanges, 1, "the new report took the old one's name by RENAME_EXCHANGE (%d)", exchanges);
    cr_expect_eq(plain_renames, 0, "no rename over the old report (%d)", plain_renames);
    cr_assert_eq(stat(tpath("x.html"), &st1), 0);
    cr_expect_neq(st0.st_ino, st1.st_ino, "a new file, not the old one rewritten");
    cr_expect_eq(st1.st_mode & 0777, 0600);
    cr_expect_eq(dir_entries(tmpdir), before, "the old report went with the exchange: nothing left over");
    char *h = slurp(tpath("x.html"), NULL);
    cr_expect(strstr(h, "\"a\": 1") != NULL, "the new data is in place");
    free(h);
}
