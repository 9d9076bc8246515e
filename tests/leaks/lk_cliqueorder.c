/* A dropped structure in the shape of a cJSON tree (root R, an object x
 * with a sibling w that point to each other, and under x a list of three
 * nodes whose first one's prev points to the last), where the list's last
 * node was given the chunk of a block freed before: glibc hands it out
 * again, valgrind's allocator never does. valgrind makes clique leaders in
 * address order, and its own addresses follow the order of allocation, so
 * it takes R first and R's clique takes in everything: one definite block.
 * In glibc's address order the last node comes first; its clique takes the
 * other two nodes, and R's then reaches them but not it: two definite
 * blocks. memlens takes leaders in the order of allocation, as valgrind's
 * addresses have them.
 * expect: definite=96/1 indirect=352/5 possible=0/0 reachable=0/0 */
#include "lk_common.h"
struct node {
    struct node *next, *prev, *child;
};
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
    root = build();
    root = NULL;
    return 0;
}
