/* The only pointer to the block is a pthread_setspecific value whose key is
 * past glibc's first 32 (so it lives in a second-level array that glibc
 * callocs on the first such setspecific; reachable through the thread).
 * expect: definite=0/0 indirect=0/0 possible=0/0 reachable=1849/2 */
#include "lk_common.h"
#include <pthread.h>
int main(void) {
    pthread_key_t k;
    for (int i = 0; i < 40; i++)
        if (pthread_key_create(&k, NULL)) return 1;
    if (pthread_key_create(&k, NULL)) return 1;
    void *p = lk_alloc(1337);
    if (pthread_setspecific(k, p)) return 1;
    p = NULL;
    return 0;
}
