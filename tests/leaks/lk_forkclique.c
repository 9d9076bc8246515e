/* lk_cliqueorder's dropped tree, made in a forked child (whose exit scan
 * works on its own blocks merged with those it inherited, an array of its
 * own: collector/exit_scan.c, merged_blocks): the list's last node gets
 * the chunk of a block the child freed before, so it lies first in
 * glibc's address order, and valgrind, whose addresses follow the order of
 * allocation, takes the root as the first leader. The parent's table,
 * inherited (allocated through lk_inherited), is left out of the child's
 * valgrind numbers (compare_valgrind.py).
 * expect: definite=0/0 indirect=0/0 possible=0/0 reachable=64/1
 * expect-child: definite=96/1 indirect=352/5 possible=0/0 reachable=0/0 */
#include "lk_common.h"
#include <sys/wait.h>
#include <unistd.h>
struct node {
    struct node *next, *prev, *child;
};
void **volatile table;
static __attribute__((noinline)) void *lk_inherited(size_t n) {
    return lk_alloc(n);
}
static __attribute__((noinline)) struct node *mk(size_t n) {
    return lk_alloc(n);
}
static __attribute__((noinline)) struct node *build(void) {
    void *freed = lk_alloc(64); /* the chunk the last node gets */
    struct node *r = mk(96), *x = mk(80), *w = mk(80), *i1 = mk(64), *i2 = mk(64);
    free(freed);
    struct node *i3 = mk(64);
    r->child = x;
    x->next = w;
    w->prev = x;
    x->prev = w; /* the first child's prev is the last child */
    x->child = i1;
    i1->next = i2;
    i2->next = i3;
    i1->prev = i3;
    i2->prev = i1;
    i3->prev = i2;
    return r;
}
struct node *volatile root;
int main(void) {
    table = lk_inherited(64);
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        root = build();
        root = NULL;
        exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    return 0;
}
