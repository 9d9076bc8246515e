/* The library lk_dlopen loads: nothing of its own to leak. */
int lk_dlopen_lib_value = 1;
int lk_dlopen_lib_get(void);
int lk_dlopen_lib_get(void) {
    return lk_dlopen_lib_value;
}

/* A thread-local variable of a dlopen'd library: each thread's copy is
 * dynamic TLS, a block glibc mallocs when the thread first uses it
 * (lk_deadtls). lk_dlopen does not touch it. */
__thread void *lk_dlopen_lib_tls;
void lk_dlopen_lib_tls_set(void *p);
void lk_dlopen_lib_tls_set(void *p) {
    lk_dlopen_lib_tls = p;
}
