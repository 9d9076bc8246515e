/* dump.c - `memlens dump FILE`: every record as a line of text. */
#include "ml_cli.h"
#include "ml_trace_io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage_dump(FILE *f) {
    fputs("usage: memlens dump FILE\n"
          "\n"
          "  Prints every record of a trace (.mlt) as one line of text, then the size of\n"
          "  the analysis snapshot the collector saved after them (docs/trace-format.md).\n"
          "  A trace that ends before its end record is said to be truncated.\n",
          f);
}

int ml_cmd_dump(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage_dump(stdout);
        return ML_EXIT_OK;
    }
    if (argc != 2 || argv[1][0] == '-') {
        usage_dump(stderr);
        return ML_EXIT_USAGE;
    }
    char err[512];
    ml_reader_t *r;
    if (ml_reader_open(argv[1], &r, err, sizeof err) < 0) {
        ml_cli_error("%s", err);
        return ML_EXIT_ERROR;
    }
    unsigned major, minor;
    ml_reader_version(r, &major, &minor);
    printf("# memlens trace format %u.%u\n", major, minor);
    ml_record_t rec;
    int rc;
    while ((rc = ml_reader_next(r, &rec)) > 0) ml_record_print(stdout, &rec);
    int code = ML_EXIT_OK;
    if (rc < 0) {
        fflush(stdout);
        ml_cli_error("%s: %s", argv[1], ml_reader_error(r));
        code = ML_EXIT_ERROR;
    } else if (ml_reader_truncated(r)) {
        printf("# truncated: the trace ends before its end record (the collector was stopped?)\n");
    }
    if (rc >= 0) {
        /* The analysis snapshot after the records (docs/trace-format.md). */
        void *snap;
        size_t len;
        uint32_t version;
        int s = ml_reader_snapshot(r, &snap, &len, &version);
        if (s == 0) {
            printf("# analysis snapshot: %zu bytes, version %u\n", len, version);
            free(snap);
        } else if (s != -ENOENT) {
            printf("# analysis snapshot unusable: %s\n", ml_reader_error(r));
        }
        /* The strategy advice an earlier `memlens report` saved after it. */
        uint64_t key;
        s = ml_reader_advice(r, &snap, &len, &key, &version);
        if (s == 0) {
            printf("# saved strategy advice: %zu bytes, version %u, key %016llx\n", len, version,
                   (unsigned long long)key);
            free(snap);
        } else if (s != -ENOENT) {
            printf("# saved strategy advice unusable: %s\n", ml_reader_error(r));
        }
    }
    ml_reader_close(r);
    return code;
}
