# Symbols (issue 13 items 2 and 3): inline chains against eu-addr2line, and
# sites named by the program's own code.
set(FX ${CMAKE_CURRENT_SOURCE_DIR}/e2e/fixtures)
# A chain inlined three deep, and the C++ fixtures, at -O2 -g: what the
# oracle compares frame by frame.
add_executable(fx_inline_deep ${FX}/fx_inline_deep.c)
target_compile_options(fx_inline_deep PRIVATE -O2 -g -fno-builtin-malloc)
add_executable(fx_cpp_sites ${FX}/fx_cpp_sites.cpp)
target_compile_options(fx_cpp_sites PRIVATE -O0 -g)
add_executable(fx_cpp_sites_o2 ${FX}/fx_cpp_sites.cpp)
target_compile_options(fx_cpp_sites_o2 PRIVATE -O2 -g)
add_executable(fx_cpp_o2 ${FX}/fx_cpp.cpp)
target_compile_options(fx_cpp_o2 PRIVATE -O2 -g)
add_test(NAME symbols_oracle
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_symbols_oracle.py
          $<TARGET_FILE:memlens> $<TARGET_FILE:fx_inline_deep> $<TARGET_FILE:fx_inline>
          $<TARGET_FILE:fx_cpp_sites_o2> $<TARGET_FILE:fx_cpp_o2> $<TARGET_FILE:fx_cpp_sites>
          $<TARGET_FILE:fx_calltree> $<TARGET_FILE:fx_leaks>)
set_tests_properties(symbols_oracle PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
ml_test(test_symbols e2e/test_symbols.c e2e/harness.c)
add_dependencies(test_symbols memlens memlens_preload fx_cpp_sites fx_inline_deep)
# The debug cache (issue 12, item 4): uncompressed copies of compressed debug
# files give the same frames, are checked by build-id, never through links.
add_test(NAME debug_cache COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_debug_cache.sh ${CMAKE_BINARY_DIR})
set_tests_properties(debug_cache PROPERTIES TIMEOUT 300)
# The ELF symbol index against libdw's own answer for every address of real
# programs (stripped python3, perl, sqlite3, libc): ML_SYM_VERIFY=1.
add_test(NAME symbols_index_vs_libdw
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_symbol_index.sh ${CMAKE_BINARY_DIR})
set_tests_properties(symbols_index_vs_libdw PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
