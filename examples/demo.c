/* demo.c - a small program with the habits memlens is built to find:
 * a leak, a transient peak, allocation churn in a loop, a realloc chain
 * that grows one byte at a time, and short-lived blocks pinning pages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct node {
    struct node *next;
    char payload[48];
} node_t;

static node_t *cache; /* still reachable at exit */

/* Leaks: every tenth record is dropped without free. */
static void parse_records(int n) {
    for (int i = 0; i < n; i++) {
        char *rec = malloc(200);
        snprintf(rec, 200, "record %d", i);
        if (i % 10 != 0) free(rec);
    }
}

/* A transient peak: 32 MiB alive at once, then released. */
static void build_index(void) {
    enum { N = 4096 };
    char **blocks = malloc(N * sizeof *blocks);
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(8192);
        memset(blocks[i], i & 0xff, 8192);
    }
    for (int i = 0; i < N; i++) free(blocks[i]);
    free(blocks);
}

/* Churn: the same fixed-size node allocated and freed in a loop. */
static long churn(int rounds) {
    long sum = 0;
    for (int i = 0; i < rounds; i++) {
        node_t *n = malloc(sizeof *n);
        n->payload[0] = (char)i;
        sum += n->payload[0];
        free(n);
    }
    return sum;
}

/* A string grown one byte at a time. */
static char *grow_string(int len) {
    char *s = NULL;
    for (int i = 0; i < len; i++) {
        s = realloc(s, (size_t)i + 2);
        s[i] = 'a' + (char)(i % 26);
        s[i + 1] = '\0';
    }
    return s;
}

/* Long-lived nodes interleaved with short-lived buffers. */
static void interleave(int n) {
    for (int i = 0; i < n; i++) {
        node_t *keep = malloc(sizeof *keep);
        keep->next = cache;
        cache = keep;
        free(malloc(256));
    }
}

int main(void) {
    parse_records(1000);
    build_index();
    long s = churn(200000);
    char *str = grow_string(5000);
    interleave(2000);
    printf("demo: checksum %ld, string of %zu bytes\n", s, strlen(str));
    free(str);
    return 0;
}
