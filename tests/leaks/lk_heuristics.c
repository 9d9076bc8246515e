/* Interior pointers that valgrind's leak-check heuristics (its default,
 * --leak-check-heuristics=all) count as start pointers, laid out by hand:
 * - stdstring: 24 bytes into a block of 24 + capacity + 1 bytes whose first
 *   words are a length <= the capacity, and the capacity (65 bytes), and
 *   one whose length equals its capacity (a full string: 33 bytes);
 * - length64: 8 bytes in, after the block's size - 8 (72 bytes);
 * - newarray: 8 bytes in, after an element count that divides the rest
 *   (88 bytes: 5 elements of 16);
 * - multipleinheritance: to a word holding a vtable address in a block whose
 *   first word holds another (48 bytes; the tables are const arrays of
 *   function pointers, in the executable's read-only relocated data);
 * all still reachable. Four interior pointers that no rule explains
 * keep their blocks possibly lost: 8 bytes into a block whose count does
 * not divide the rest (40 bytes), 16 bytes into one with no vtable (56
 * bytes), 16 bytes into one whose words point to a table of pointers
 * to data, not to code (32 bytes), and 16 bytes into one whose words point
 * to a table of one pointer to code and nulls (48 bytes: a vtable holds two).
 * expect: definite=0/0 indirect=0/0 possible=176/4 reachable=306/5 */
#include "lk_common.h"
#include <stdint.h>

static void f1(void) {}
static void f2(void) {}
static void f3(void) {}
static void (*const vt_a[])(void) = {f1, f2, 0};
static void (*const vt_b[])(void) = {f3, f1, f2};
static const int d1 = 1, d2 = 2;
static const int *const not_vt[] = {&d1, &d2};
static void (*const one_fn[20])(void) = {f2};

static char *str, *full_str, *len64, *arr, *mi, *bad_count, *no_vtable, *data_table, *one_fn_table;

static char *block(size_t n) {
    char *p = lk_alloc(n);
    return p;
}

int main(void) {
    char *p = block(24 + 40 + 1);
    ((uint64_t *)p)[0] = 10; /* length */
    ((uint64_t *)p)[1] = 40; /* capacity */
    str = p + 24;
    p = block(24 + 8 + 1);
    ((uint64_t *)p)[0] = 8; /* length == capacity */
    ((uint64_t *)p)[1] = 8;
    full_str = p + 24;
    p = block(72);
    ((uint64_t *)p)[0] = 64;
    len64 = p + 8;
    p = block(8 + 5 * 16);
    ((uint64_t *)p)[0] = 5;
    arr = p + 8;
    p = block(48);
    ((const void **)p)[0] = (const void *)vt_a;
    ((const void **)p)[2] = (const void *)vt_b;
    mi = p + 16;
    p = block(40);
    ((uint64_t *)p)[0] = 3;
    bad_count = p + 8;
    p = block(56);
    no_vtable = p + 16;
    p = block(32);
    ((const void **)p)[0] = (const void *)not_vt;
    ((const void **)p)[2] = (const void *)not_vt;
    data_table = p + 16;
    p = block(48);
    ((const void **)p)[0] = (const void *)one_fn;
    ((const void **)p)[2] = (const void *)one_fn;
    one_fn_table = p + 16;
    p = NULL;
    lk_use(&str);
    lk_use(&full_str);
    lk_use(&len64);
    lk_use(&arr);
    lk_use(&mi);
    lk_use(&bad_count);
    lk_use(&no_vtable);
    lk_use(&data_table);
    lk_use(&one_fn_table);
    LK_CLEAR_REGISTERS();
    return 0;
}
