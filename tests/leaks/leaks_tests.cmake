# Leak kinds against valgrind memcheck (issue 13): one program per situation,
# each stating its own expected kinds ("expect:" lines). The test runs each
# under valgrind and under memlens and requires equal per-kind bytes and
# blocks, and the program's own numbers. Without valgrind it checks the
# programs' numbers only and reports itself skipped.
set(LK ${CMAKE_CURRENT_SOURCE_DIR}/leaks)
set(LK_PROGRAMS lk_null lk_self lk_deadframe lk_unaligned lk_belowmain lk_fork lk_tsd lk_possible lk_pool lk_exit lk_quickexit lk_rbp
    lk_xor lk_cycle lk_tree lk_tls lk_threads lk_waitframe lk_heuristics lk_shared lk_sbrk lk_regs lk_exec lk_forkref lk_dlopen lk_joined lk_mainexit lk_running lk_unjoined lk_abort lk_abortreg lk_exitreg lk_segvhandler lk_sigterm
    lk_untouched lk_deadtls lk_guard lk_altstack lk_abortjoined lk_redzone lk_coro lk_setenv lk_arena lk_stdio lk_cliqueorder lk_forkclique lk_argreg)
foreach(p ${LK_PROGRAMS})
  add_executable(${p} ${LK}/${p}.c)
  target_compile_options(${p} PRIVATE -O0 -g -fno-builtin)
  target_link_libraries(${p} PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
  set_target_properties(${p} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/leaks)
endforeach()
# lk_coro's coroutines make their first call of free on their own stacks:
# ld.so's lazy binding saves the argument registers there, below the CPU's
# vector state (2.7 KiB deep with AVX-512's), where nothing later writes,
# and the freed pointer it left keeps the next block at that address
# reachable, for any scanner, valgrind included, as deep as that CPU puts
# it. Bound at load time, the program leaves only its own copies.
target_link_options(lk_coro PRIVATE -Wl,-z,now)
# lk_argreg's pointers go to realloc, malloc_usable_size and posix_memalign
# in argument registers: a lazy binding of those calls would save them deep
# in the stack (ld.so's copy, not memlens'), where its never-written frame lies.
target_link_options(lk_argreg PRIVATE -Wl,-z,now)
# lk_dlopen loads this one from its own directory.
add_library(lk_dlopen_lib SHARED ${LK}/lk_dlopen_lib.c)
set_target_properties(lk_dlopen_lib PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/leaks)
add_dependencies(lk_dlopen lk_dlopen_lib)
add_dependencies(lk_deadtls lk_dlopen_lib)
add_custom_target(leak_programs DEPENDS ${LK_PROGRAMS} lk_dlopen_lib scrub_probe memlens memlens_preload)
add_test(NAME leaks_valgrind
  COMMAND /usr/bin/python3 ${LK}/compare_valgrind.py $<TARGET_FILE:memlens> ${CMAKE_BINARY_DIR}/leaks ${LK})
set_tests_properties(leaks_valgrind PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)

# The hooks leave no copy of a returned pointer in dead stack (item 1): the
# probe counts the copies with and without memlens, each unwinder.
add_executable(scrub_probe ${LK}/scrub_probe.cc)
target_compile_options(scrub_probe PRIVATE -O2 -g -fno-builtin)
set_target_properties(scrub_probe PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/leaks)
add_test(NAME hook_scrub
  COMMAND /usr/bin/python3 ${LK}/scrub_check.py $<TARGET_FILE:memlens> $<TARGET_FILE:scrub_probe>)
set_tests_properties(hook_scrub PROPERTIES TIMEOUT 120)
