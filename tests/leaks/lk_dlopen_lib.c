/* The library lk_dlopen loads: nothing of its own to leak. */
int lk_dlopen_lib_value = 1;
int lk_dlopen_lib_get(void);
int lk_dlopen_lib_get(void) {
    return lk_dlopen_lib_value;
}
