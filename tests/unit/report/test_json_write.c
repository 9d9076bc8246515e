/* test_json_write.c - the JSON writer (report/json_write.h): separators,
 * line breaks, escaping with UTF-8 validation, the number formats, misuse
 * and write errors, each against literal bytes. */
#define _GNU_SOURCE
#include "json_write.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    FILE *f;
    char *text;
    size_t len;
    ml_json_t *w;
} doc_t;

static void doc_open(doc_t *d) {
    memset(d, 0, sizeof *d);
    d->f = open_memstream(&d->text, &d->len);
    cr_assert(d->f);
    cr_assert_eq(ml_json_new(d->f, &d->w), 0);
}

/* Finishes the document; returns ml_json_finish's result. */
static int doc_close(doc_t *d) {
    int rc = ml_json_finish(d->w);
    ml_json_free(d->w);
    fclose(d->f);
    return rc;
}

static void doc_free(doc_t *d) {
    free(d->text);
}

Test(json_write, separators_are_the_writers_job) {
    doc_t d;
    doc_open(&d);
    ml_json_object(d.w);
    ml_json_kv_u64(d.w, "a", 1);
    ml_json_key(d.w, "list");
    ml_json_array(d.w);
    ml_json_u64(d.w, 1);
    ml_json_str(d.w, "two");
    ml_json_object(d.w);
    ml_json_end(d.w);
    ml_json_array(d.w);
    ml_json_end(d.w);
    ml_json_end(d.w);
    ml_json_kv_bool(d.w, "t", true);
    ml_json_kv_bool(d.w, "f", false);
    ml_json_kv_null(d.w, "n");
    ml_json_kv_str(d.w, "s", NULL);
    ml_json_end(d.w);
    ml_json_newline(d.w);
    cr_assert_eq(doc_close(&d), 0);
    cr_expect_str_eq(d.text, "{\"a\": 1, \"list\": [1, \"two\", {}, []], \"t\": true, \"f\": false, "
                             "\"n\": null, \"s\": null}\n");
    doc_free(&d);
}

Test(json_write, breaks_and_tight_arrays) {
    doc_t d;
    doc_open(&d);
    ml_json_object(d.w);
    ml_json_kv_u64(d.w, "first", 1);
    ml_json_break(d.w, 0);
    ml_json_key(d.w, "rows");
    ml_json_array(d.w);
    for (int i = 0; i < 2; i++) {
        ml_json_break(d.w, 2);
        ml_json_object(d.w);
        ml_json_kv_i64(d.w, "i", -i);
        ml_json_break(d.w, 3);
        ml_json_kv_u64(d.w, "x", 7);
        ml_json_end(d.w);
    }
    ml_json_break(d.w, 0);
    ml_json_end(d.w);
    ml_json_key(d.w, "empty");
    ml_json_array(d.w);
    ml_json_break(d.w, 0); /* an empty container stays [] */
    ml_json_end(d.w);
    ml_json_key(d.w, "cells");
    ml_json_array(d.w);
    ml_json_tight(d.w);
    for (int i = 0; i < 4; i++) ml_json_i64(d.w, i - 1);
    ml_json_end(d.w);
    ml_json_end(d.w);
    cr_assert_eq(doc_close(&d), 0);
    cr_expect_str_eq(d.text, "{\"first\": 1,\n\"rows\": [\n  {\"i\": 0,\n   \"x\": 7},\n  {\"i\": -1,\n   "
                             "\"x\": 7}\n], \"empty\": [], \"cells\": [-1,0,1,2]}");
    doc_free(&d);
}

Test(json_write, strings_are_escaped_and_utf8_is_validated) {
    doc_t d;
    doc_open(&d);
    ml_json_array(d.w);
    ml_json_str(d.w, "q\"b\\s/");
    ml_json_str(d.w, "\n\t\r\x01\x1f\x7f");
    ml_json_str(d.w, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"); /* é € 😀 pass through */
    ml_json_str(d.w, "bad \xff \xc3( \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 end\xe2\x82");
    /* Overlong 3- and 4-byte forms ('/', U+07FF, U+FFFF) against the shortest
     * ones at the boundaries (U+0800, U+10000), as Python's
     * bytes.decode("utf-8", "replace") reads them. */
    ml_json_str(d.w, "\xe0\x80\xaf \xe0\x9f\xbf \xe0\xa0\x80 \xf0\x80\x80\xaf \xf0\x8f\xbf\xbf \xf0\x90\x80\x80");
    ml_json_end(d.w);
    cr_assert_eq(doc_close(&d), 0);
    cr_expect_str_eq(d.text,
                     "[\"q\\\"b\\\\s/\", \"\\n\\t\\r\\u0001\\u001f\\u007f\", "
                     "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\", "
                     /* a lone byte, a cut sequence, an overlong '/', a surrogate, above U+10FFFF, a cut end:
                      * each invalid byte is one U+FFFD and the writer goes on with the next */
                     "\"bad \\ufffd \\ufffd( \\ufffd\\ufffd \\ufffd\\ufffd\\ufffd "
                     "\\ufffd\\ufffd\\ufffd\\ufffd end\\ufffd\\ufffd\", "
                     "\"\\ufffd\\ufffd\\ufffd \\ufffd\\ufffd\\ufffd \xe0\xa0\x80 "
                     "\\ufffd\\ufffd\\ufffd\\ufffd \\ufffd\\ufffd\\ufffd\\ufffd \xf0\x90\x80\x80\"]");
    doc_free(&d);
}

/* The C1 controls (U+0080-009F) are escaped as the C0 ones are: C2 9B is a
 * CSI to a terminal, and `--json -` may be one (they went out as UTF-8). The
 * characters around them (U+00A0, U+007E) pass as they are. */
Test(json_write, c1_controls_are_escaped) {
    doc_t d;
    doc_open(&d);
    ml_json_str(d.w, "\xc2\x80\xc2\x9b" "31m\xc2\x9d" "0;t\xc2\x9c~\xc2\xa0\xc2\xa9");
    cr_assert_eq(doc_close(&d), 0);
    cr_expect_str_eq(d.text, "\"\\u0080\\u009b31m\\u009d0;t\\u009c~\xc2\xa0\xc2\xa9\"");
    doc_free(&d);
}

Test(json_write, numbers_have_one_format) {
    doc_t d;
    doc_open(&d);
    ml_json_array(d.w);
    ml_json_u64(d.w, 0);
    ml_json_u64(d.w, UINT64_MAX);
    ml_json_i64(d.w, INT64_MIN);
    ml_json_double(d.w, 0.5);
    ml_json_double(d.w, 1.0 / 3);
    ml_json_double(d.w, 12345678.9);
    ml_json_double(d.w, 100);
    ml_json_double(d.w, NAN);
    ml_json_double(d.w, INFINITY);
    ml_json_ms_as_s(d.w, 0);
    ml_json_ms_as_s(d.w, 7);
    ml_json_ms_as_s(d.w, 12345);
    ml_json_ms_as_s(d.w, 4294967295u);
    ml_json_end(d.w);
    cr_assert_eq(doc_close(&d), 0);
    cr_expect_str_eq(d.text, "[0, 18446744073709551615, -9223372036854775808, 0.5, 0.333333, 1.23457e+07, "
                             "100, null, null, 0.000, 0.007, 12.345, 4294967.295]");
    doc_free(&d);
}

Test(json_write, long_output_crosses_the_buffer) {
    doc_t d;
    doc_open(&d);
    size_t big = 200 * 1024;
    char *s = malloc(big + 1);
    memset(s, 'x', big);
    s[big] = 0;
    s[big / 2] = '"';
    ml_json_array(d.w);
    for (int i = 0; i < 30000; i++) ml_json_u64(d.w, 1000000 + (uint64_t)i);
    ml_json_str(d.w, s);
    ml_json_end(d.w);
    cr_assert_eq(doc_close(&d), 0);
    /* 30000 numbers of 7 digits, ", " between items, the string with one
     * escaped quote, brackets. */
    cr_expect_eq(d.len, 1 + 30000 * 7 + 30000 * 2 + (big + 1 + 2) + 1);
    cr_expect(!strncmp(d.text, "[1000000, 1000001, ", 19));
    cr_expect(strstr(d.text, "xx\\\"xx"));
    cr_expect_eq(d.text[d.len - 1], ']');
    free(s);
    doc_free(&d);
}

Test(json_write, misuse_is_an_error_not_bad_json) {
    static const int cases = 7;
    for (int c = 0; c < cases; c++) {
        doc_t d;
        doc_open(&d);
        switch (c) {
        case 0: /* a value where a key belongs */
            ml_json_object(d.w);
            ml_json_u64(d.w, 1);
            break;
        case 1: /* a key in an array */
            ml_json_array(d.w);
            ml_json_key(d.w, "k");
            break;
        case 2: /* two keys in a row */
            ml_json_object(d.w);
            ml_json_key(d.w, "a");
            ml_json_key(d.w, "b");
            break;
        case 3: /* an end too many */
            ml_json_array(d.w);
            ml_json_end(d.w);
            ml_json_end(d.w);
            break;
        case 4: /* left open */
            ml_json_object(d.w);
            break;
        case 5: /* two root values */
            ml_json_u64(d.w, 1);
            ml_json_u64(d.w, 2);
            break;
        case 6: /* a key without its value */
            ml_json_object(d.w);
            ml_json_key(d.w, "a");
            ml_json_end(d.w);
            break;
        }
        cr_expect_eq(ml_json_error(d.w), c == 4 ? 0 : -EINVAL, "case %d", c);
        cr_expect_eq(doc_close(&d), -EINVAL, "case %d", c);
        doc_free(&d);
    }
}

Test(json_write, a_full_disk_is_reported) {
    FILE *f = fopen("/dev/full", "w");
    cr_assert(f);
    ml_json_t *w;
    cr_assert_eq(ml_json_new(f, &w), 0);
    ml_json_array(w);
    for (int i = 0; i < 100000; i++) ml_json_u64(w, (uint64_t)i); /* past the buffer */
    ml_json_end(w);
    cr_expect_eq(ml_json_error(w), -ENOSPC);
    cr_expect_eq(ml_json_finish(w), -ENOSPC);
    ml_json_free(w);
    fclose(f);
    /* A small document fails when it is flushed. */
    f = fopen("/dev/full", "w");
    cr_assert_eq(ml_json_new(f, &w), 0);
    ml_json_u64(w, 1);
    cr_expect_eq(ml_json_error(w), 0);
    cr_expect_eq(ml_json_finish(w), -ENOSPC);
    ml_json_free(w);
    fclose(f);
}

Test(json_write, deep_nesting_grows) {
    doc_t d;
    doc_open(&d);
    for (int i = 0; i < 5000; i++) ml_json_array(d.w);
    for (int i = 0; i < 5000; i++) ml_json_end(d.w);
    cr_assert_eq(doc_close(&d), 0);
    cr_expect_eq(d.len, 10000);
    cr_expect_eq(d.text[4999], '[');
    cr_expect_eq(d.text[5000], ']');
    doc_free(&d);
}

/* Writes the object {"f": name, "n": [1, 2]} as the next value. */
static void small_obj(ml_json_t *w, const char *name) {
    ml_json_object(w);
    ml_json_kv_str(w, "f", name);
    ml_json_key(w, "n");
    ml_json_array(w);
    ml_json_u64(w, 1);
    ml_json_u64(w, 2);
    ml_json_end(w);
    ml_json_end(w);
}

Test(json_write, a_text_writer_renders_a_value_once_for_raw_copies) {
    ml_json_t *tw;
    cr_assert_eq(ml_json_new_text(&tw), 0);
    size_t n;
    const char *t = ml_json_text(tw, &n);
    cr_assert(t);
    cr_expect_eq(n, 0);
    small_obj(tw, "a\"b\x01");
    t = ml_json_text(tw, &n);
    cr_assert(t);
    cr_expect_eq(n, strlen("{\"f\": \"a\\\"b\\u0001\", \"n\": [1, 2]}"));
    cr_expect(!memcmp(t, "{\"f\": \"a\\\"b\\u0001\", \"n\": [1, 2]}", n));
    char *first = malloc(n);
    memcpy(first, t, n);
    size_t nfirst = n;
    /* Reset: a new document, the old text gone. */
    ml_json_text_reset(tw);
    small_obj(tw, "c");
    t = ml_json_text(tw, &n);
    cr_assert(t);
    cr_expect_eq(n, strlen("{\"f\": \"c\", \"n\": [1, 2]}"));
    cr_expect(!memcmp(t, "{\"f\": \"c\", \"n\": [1, 2]}", n));

    /* Copied into a document with breaks and separators, the bytes are
     * those of writing the values directly. */
    doc_t raw, direct;
    doc_open(&raw);
    doc_open(&direct);
    for (int k = 0; k < 2; k++) {
        ml_json_t *w = k ? direct.w : raw.w;
        ml_json_object(w);
        ml_json_key(w, "list");
        ml_json_array(w);
        for (int i = 0; i < 3; i++) {
            ml_json_break(w, 2);
            if (k) small_obj(w, i == 1 ? "c" : "a\"b\x01");
            else if (i == 1) ml_json_raw(w, t, n);
            else ml_json_raw(w, first, nfirst);
        }
        ml_json_end(w);
        ml_json_key(w, "one");
        if (k) small_obj(w, "c");
        else ml_json_raw(w, t, n);
        ml_json_end(w);
    }
    cr_assert_eq(doc_close(&raw), 0);
    cr_assert_eq(doc_close(&direct), 0);
    cr_expect_str_eq(raw.text, direct.text);
    cr_expect(strstr(raw.text, "\n  {\"f\": \"c\", \"n\": [1, 2]},\n"));
    doc_free(&raw);
    doc_free(&direct);
    free(first);
    ml_json_free(tw);
}

Test(json_write, a_text_writer_holds_more_than_its_buffer) {
    ml_json_t *tw;
    cr_assert_eq(ml_json_new_text(&tw), 0);
    size_t big = 150 * 1024;
    char *s = malloc(big + 1);
    memset(s, 'y', big);
    s[big] = 0;
    ml_json_array(tw);
    for (int i = 0; i < 20000; i++) ml_json_u64(tw, 1000000 + (uint64_t)i);
    ml_json_str(tw, s);
    ml_json_end(tw);
    size_t n;
    const char *t = ml_json_text(tw, &n);
    cr_assert(t);
    cr_expect_eq(n, 1 + 20000 * 7 + 20000 * 2 + (big + 2) + 1);
    cr_expect(!strncmp(t, "[1000000, 1000001, ", 19));
    cr_expect_eq(t[n - 1], ']');
    cr_expect_eq(t[n - 2], '"');
    cr_expect_eq(t[n - 3], 'y');
    free(s);
    ml_json_free(tw);
}

Test(json_write, a_text_writer_refuses_an_unfinished_value) {
    ml_json_t *tw;
    cr_assert_eq(ml_json_new_text(&tw), 0);
    ml_json_object(tw);
    size_t n = 99;
    cr_expect_null(ml_json_text(tw, &n));
    cr_expect_eq(n, 0);
    cr_expect_eq(ml_json_error(tw), -EINVAL);
    /* A reset clears the error. */
    ml_json_text_reset(tw);
    cr_expect_eq(ml_json_error(tw), 0);
    ml_json_u64(tw, 7);
    const char *t = ml_json_text(tw, &n);
    cr_assert(t);
    cr_expect_eq(n, 1);
    cr_expect_eq(t[0], '7');
    ml_json_free(tw);
    /* A stream writer has no text. */
    doc_t d;
    doc_open(&d);
    ml_json_u64(d.w, 1);
    cr_expect_null(ml_json_text(d.w, &n));
    cr_expect_eq(doc_close(&d), -EINVAL);
    doc_free(&d);
}

/* Whole doubles below a million are written without snprintf: each must
 * read as "%.6g" writes it, at the edges too. */
Test(json_write, whole_doubles_read_as_printf_writes_them) {
    static const double v[] = {0.0, -0.0, 1.0, -1.0, 7.0, 999999.0, -999999.0, 1e6, -1e6, 123456.0,
                               100000.0, 0.5, -0.5, 999999.5, 1e-300, 4503599627370497.0, -1e18};
    doc_t d;
    doc_open(&d);
    ml_json_array(d.w);
    ml_json_tight(d.w);
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) ml_json_double(d.w, v[i]);
    ml_json_end(d.w);
    cr_assert_eq(doc_close(&d), 0);
    char want[1024];
    size_t k = 0;
    want[k++] = '[';
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        k += (size_t)snprintf(want + k, sizeof want - k, "%s%.6g", i ? "," : "", v[i]);
    snprintf(want + k, sizeof want - k, "]");
    cr_expect_str_eq(d.text, want);
    cr_expect_str_eq(d.text, "[0,-0,1,-1,7,999999,-999999,1e+06,-1e+06,123456,100000,0.5,-0.5,1e+06,"
                             "1e-300,4.5036e+15,-1e+18]");
    doc_free(&d);
}
