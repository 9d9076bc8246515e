# Symbols (issue 13 items 2 and 3): inline chains against eu-addr2line, and
# sites named by the program's own code.
set(FX ${CMAKE_CURRENT_SOURCE_DIR}/e2e/fixtures)
# A chain inlined three deep, and the C++ fixtures, at -O2 -g: what the
# oracle compares frame by frame.
add_executable(fx_inline_deep ${FX}/fx_inline_deep.c)
target_compile_options(fx_inline_deep PRIVATE -O2 -g -fno-builtin-malloc)
# The same chain built with -gsplit-dwarf: the program has a skeleton of
# the unit, its DIEs are in a .dwo beside the object (test_symbols).
add_executable(fx_inline_deep_split ${FX}/fx_inline_deep.c)
target_compile_options(fx_inline_deep_split PRIVATE -O2 -g -gsplit-dwarf -fno-builtin-malloc)
# The chain again, its debug sections compressed with zstd where objcopy
# can (libdw 0.188 cannot read them: test_symbols wants a warning).
execute_process(COMMAND ${CMAKE_OBJCOPY} --help OUTPUT_VARIABLE ML_OBJCOPY_HELP ERROR_QUIET)
if(CMAKE_OBJCOPY AND ML_OBJCOPY_HELP MATCHES "zstd")
  add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/fx_inline_deep_zstd
    COMMAND ${CMAKE_OBJCOPY} --compress-debug-sections=zstd $<TARGET_FILE:fx_inline_deep>
            ${CMAKE_BINARY_DIR}/fx_inline_deep_zstd
    DEPENDS fx_inline_deep VERBATIM)
  add_custom_target(fx_inline_deep_zstd ALL DEPENDS ${CMAKE_BINARY_DIR}/fx_inline_deep_zstd)
endif()
# The chain with -gsplit-dwarf again, its .dwo named relative to the program
# and its compilation directory remapped to one that does not exist: libdw
# finds the .dwo only beside the program, so that a test can take it away
# from a copy of both (test_symbols split_dwarf_frames_follow_their_dwo_file).
# fx_inline_deep_dwo_gz: the same with its debug sections compressed (-gz),
# which the debug cache reads from an uncompressed copy elsewhere
# (split_dwarf_compressed_program_finds_its_dwo).
include(CheckCCompilerFlag)
check_c_compiler_flag(-gz ML_CC_HAS_GZ)
set(ML_DWO_FX fx_inline_deep_dwo:)
if(ML_CC_HAS_GZ)
  list(APPEND ML_DWO_FX fx_inline_deep_dwo_gz:-gz)
endif()
set(ML_DWO_TARGETS "")
foreach(fx ${ML_DWO_FX})
  string(REPLACE ":" ";" parts "${fx}")
  list(GET parts 0 name)
  list(LENGTH parts nparts)
  set(extra "")
  if(nparts GREATER 1)
    list(GET parts 1 extra)
  endif()
  set(dir ${CMAKE_BINARY_DIR}/${name}.d)
  add_custom_command(OUTPUT ${dir}/${name}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${CMAKE_COMMAND} -E chdir ${dir}
            ${CMAKE_C_COMPILER} -O2 -g -gsplit-dwarf ${extra} -fno-builtin-malloc
            -fdebug-prefix-map=${dir}=/nonexistent-memlens-dwo ${FX}/fx_inline_deep.c -o ${name}
    DEPENDS ${FX}/fx_inline_deep.c VERBATIM)
  list(APPEND ML_DWO_TARGETS ${dir}/${name})
endforeach()
add_custom_target(fx_inline_deep_dwo ALL DEPENDS ${ML_DWO_TARGETS})
add_executable(fx_cpp_sites ${FX}/fx_cpp_sites.cpp)
target_compile_options(fx_cpp_sites PRIVATE -O0 -g)
add_executable(fx_cpp_sites_o2 ${FX}/fx_cpp_sites.cpp)
target_compile_options(fx_cpp_sites_o2 PRIVATE -O2 -g)
add_executable(fx_cpp_sites_static ${FX}/fx_cpp_sites.cpp)
# A thread_local's init and wrapper functions kept (-O0): gcc names them by
# symbol, "TLS init function for tv", with the declaration's line.
add_executable(fx_tlsinit_o0 ${FX}/fx_tlsinit.cpp)
target_compile_options(fx_tlsinit_o0 PRIVATE -O0 -g)
target_link_libraries(fx_tlsinit_o0 PRIVATE Threads::Threads)
target_compile_options(fx_cpp_sites_static PRIVATE -O0 -g)
target_link_options(fx_cpp_sites_static PRIVATE -static-libstdc++)
# libstdc++'s headers under another prefix, where a GCC installed elsewhere
# finds its own (/usr/local for GCC's default prefix and the gcc Docker
# images, /opt/rh/gcc-toolset-*/root/usr, a conda environment): links in
# the build tree to the system's headers, so that the line table names
# <build>/gcc-prefix/include/c++/<version>/bits/stl_vector.h (gcc would
# name the links' targets, /usr/include/..., without
# -fno-canonical-system-headers).
string(REGEX MATCH "^[0-9]+" ML_GXX_MAJOR "${CMAKE_CXX_COMPILER_VERSION}")
set(ML_GXX_ARCH_INC /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/c++/${ML_GXX_MAJOR})
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_LIBRARY_ARCHITECTURE
   AND EXISTS /usr/include/c++/${ML_GXX_MAJOR} AND EXISTS ${ML_GXX_ARCH_INC})
  set(ML_GCC_PREFIX ${CMAKE_BINARY_DIR}/gcc-prefix/include)
  file(MAKE_DIRECTORY ${ML_GCC_PREFIX}/${CMAKE_LIBRARY_ARCHITECTURE})
  file(CREATE_LINK /usr/include/c++ ${ML_GCC_PREFIX}/c++ SYMBOLIC)
  file(CREATE_LINK /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/c++
       ${ML_GCC_PREFIX}/${CMAKE_LIBRARY_ARCHITECTURE}/c++ SYMBOLIC)
  add_executable(fx_cpp_sites_prefix ${FX}/fx_cpp_sites.cpp)
  target_compile_options(fx_cpp_sites_prefix PRIVATE -O0 -g -nostdinc++ -fno-canonical-system-headers
    "SHELL:-isystem ${ML_GCC_PREFIX}/c++/${ML_GXX_MAJOR}"
    "SHELL:-isystem ${ML_GCC_PREFIX}/${CMAKE_LIBRARY_ARCHITECTURE}/c++/${ML_GXX_MAJOR}")
endif()
# Library code without a line table: a release build (-g0, so nothing has
# lines) and libstdc++ linked in (its functions in the program, no lines).
add_executable(fx_cpp_nodebug ${FX}/fx_cpp_nodebug.cpp)
target_compile_options(fx_cpp_nodebug PRIVATE -O2 -g0)
add_executable(fx_cpp_nodebug_static ${FX}/fx_cpp_nodebug.cpp)
target_compile_options(fx_cpp_nodebug_static PRIVATE -O0 -g)
target_link_options(fx_cpp_nodebug_static PRIVATE -static-libstdc++)
add_executable(fx_cpp_o2 ${FX}/fx_cpp.cpp)
target_compile_options(fx_cpp_o2 PRIVATE -O2 -g)
# main's last line row ends right before _start (test_symbols_oracle.py).
add_executable(fx_gapline ${FX}/fx_gapline.cpp)
target_compile_options(fx_gapline PRIVATE -O2 -g)
add_executable(fx_ns_inline ${FX}/fx_ns_inline.cpp)
add_executable(fx_fpnew ${FX}/fx_fpnew.cpp)
target_compile_options(fx_fpnew PRIVATE -O2 -g -fno-omit-frame-pointer)
# Coroutines: the outermost frame returns to __start_context's first byte.
add_executable(fx_coro ${FX}/fx_coro.c)
target_compile_options(fx_coro PRIVATE -O1 -g -fno-builtin-malloc -fno-builtin-free)
target_compile_options(fx_ns_inline PRIVATE -O2 -g)
# The same fixtures built by clang (DWARF 5, no .debug_aranges, functions
# inside DW_TAG_namespace), compared with llvm-symbolizer: "llvm:" below.
# fx_ns_inline_clang_ar has .debug_aranges, so that libdw finds its units
# and only the walk into namespaces is tested there.
find_program(ML_CLANG NAMES clang clang-14)
find_program(ML_CLANGXX NAMES clang++ clang++-14)
set(ML_CLANG_FX "")
if(ML_CLANG AND ML_CLANGXX)
  foreach(fx inline_deep:c: ns_inline:cpp: ns_inline:cpp:-gdwarf-aranges cpp_sites:cpp: cpp:cpp: tlsinit:cpp:)
    string(REPLACE ":" ";" parts "${fx}")
    list(GET parts 0 base)
    list(GET parts 1 ext)
    list(LENGTH parts nparts)
    set(extra "")
    set(out fx_${base}_clang)
    if(nparts GREATER 2)
      list(GET parts 2 extra)
      if(extra)
        set(out fx_${base}_clang_ar)
      endif()
    endif()
    if(ext STREQUAL "c")
      set(cc ${ML_CLANG})
    else()
      set(cc ${ML_CLANGXX})
    endif()
    add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/${out}
      COMMAND ${cc} -O2 -g -fno-builtin-malloc ${extra} ${FX}/fx_${base}.${ext}
              -o ${CMAKE_BINARY_DIR}/${out}
      DEPENDS ${FX}/fx_${base}.${ext} VERBATIM)
    list(APPEND ML_CLANG_FX ${CMAKE_BINARY_DIR}/${out})
  endforeach()
  # clang with -gsplit-dwarf: a DWARF 5 skeleton unit (DW_TAG_skeleton_unit)
  # and no .debug_aranges, its .dwo (named by the source) written in a
  # folder of its own, the unit's compilation directory.
  set(ML_CLANG_SPLIT_DIR ${CMAKE_BINARY_DIR}/fx_inline_deep_clang_split.d)
  add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/fx_inline_deep_clang_split
    COMMAND ${CMAKE_COMMAND} -E make_directory ${ML_CLANG_SPLIT_DIR}
    COMMAND ${CMAKE_COMMAND} -E chdir ${ML_CLANG_SPLIT_DIR}
            ${ML_CLANG} -O2 -g -gsplit-dwarf -fno-builtin-malloc ${FX}/fx_inline_deep.c
            -o ${CMAKE_BINARY_DIR}/fx_inline_deep_clang_split
    DEPENDS ${FX}/fx_inline_deep.c VERBATIM)
  list(APPEND ML_CLANG_FX ${CMAKE_BINARY_DIR}/fx_inline_deep_clang_split)
  # clang at -O0: the wrapper and init functions without a line.
  add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/fx_tlsinit_clang_o0
    COMMAND ${ML_CLANGXX} -O0 -g ${FX}/fx_tlsinit.cpp -o ${CMAKE_BINARY_DIR}/fx_tlsinit_clang_o0
    DEPENDS ${FX}/fx_tlsinit.cpp VERBATIM)
  add_custom_target(fx_clang ALL DEPENDS ${ML_CLANG_FX} ${CMAKE_BINARY_DIR}/fx_tlsinit_clang_o0)
  list(TRANSFORM ML_CLANG_FX PREPEND "llvm:")
endif()
# A language's fixtures (built by a compiler cmake does not drive: the files
# given) and its test, e2e/test_LANG_sites.py MEMLENS FIXTURE...
function(ml_lang_sites lang)
  add_custom_target(fx_${lang} ALL DEPENDS ${ARGN})
  add_test(NAME ${lang}_sites
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_${lang}_sites.py $<TARGET_FILE:memlens> ${ARGN})
  set_tests_properties(${lang}_sites PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endfunction()
# fx_rust.rs by rustc, with its default (legacy) symbol mangling and with v0:
# frames against llvm-symbolizer and c++filt, sites against the source, and
# leak kinds against valgrind (test_rust_sites.py).
find_program(ML_RUSTC NAMES rustc)
set(ML_RUST_FX "")
if(ML_RUSTC)
  foreach(mangling legacy v0)
    set(out ${CMAKE_BINARY_DIR}/fx_rust_${mangling})
    set(flag "")
    if(mangling STREQUAL "v0")
      set(flag -Csymbol-mangling-version=v0)
    endif()
    add_custom_command(OUTPUT ${out}
      COMMAND ${CMAKE_COMMAND} -E env --unset=MAKEFLAGS --unset=MFLAGS
              ${ML_RUSTC} -g -O ${flag} ${FX}/fx_rust.rs -o ${out}
      DEPENDS ${FX}/fx_rust.rs VERBATIM)
    list(APPEND ML_RUST_FX ${out})
  endforeach()
  ml_lang_sites(rust ${ML_RUST_FX})
  set(ML_RUST_ORACLE ${ML_RUST_FX})
  list(TRANSFORM ML_RUST_ORACLE PREPEND "llvm:")
  list(APPEND ML_CLANG_FX ${ML_RUST_ORACLE})
endif()
# fx_fortran.f90 by gfortran at -O0 and -O2: module procedures named as gdb
# names them (M::P), sites and leak kinds against valgrind
# (test_fortran_sites.py), frames against eu-addr2line.
find_program(ML_GFORTRAN NAMES gfortran)
set(ML_FORTRAN_FX "")
if(ML_GFORTRAN)
  foreach(opt O0 O2)
    set(out ${CMAKE_BINARY_DIR}/fx_fortran_${opt})
    # Each build writes the unit's module file (grid.mod) into a folder of
    # its own (-J): in one shared folder, `make -j2` ran the two at once and
    # one failed ("Cannot rename module file 'grid.mod0' to 'grid.mod'").
    set(moddir ${CMAKE_BINARY_DIR}/fx_fortran_${opt}.mod)
    add_custom_command(OUTPUT ${out}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${moddir}
      COMMAND ${ML_GFORTRAN} -g -${opt} -J ${moddir} ${FX}/fx_fortran.f90 -o ${out}
      DEPENDS ${FX}/fx_fortran.f90 VERBATIM)
    list(APPEND ML_FORTRAN_FX ${out})
  endforeach()
  ml_lang_sites(fortran ${ML_FORTRAN_FX})
endif()
# fx_ada.adb by gnatmake at -O0 and -O2: GNAT's allocator (__gnat_malloc)
# left out of the stacks, subprograms named as gdb names them
# (fx_ada.store.make, not fx_ada__store__make.1), sites and leak kinds
# against valgrind (test_ada_sites.py), frames against eu-addr2line.
find_program(ML_GNATMAKE NAMES gnatmake)
set(ML_ADA_FX "")
if(ML_GNATMAKE)
  foreach(opt O0 O2)
    set(out ${CMAKE_BINARY_DIR}/fx_ada_${opt})
    # Each build runs in a folder of its own, where gnatmake leaves its .ali
    # and .o files (-D) and the binder its b~fx_ada.* (the working
    # directory): in one shared folder `make -j2` would run the two binds
    # over the same files, as the Fortran builds did over grid.mod.
    set(objdir ${CMAKE_BINARY_DIR}/fx_ada_${opt}.obj)
    file(MAKE_DIRECTORY ${objdir})
    add_custom_command(OUTPUT ${out}
      COMMAND ${ML_GNATMAKE} -q -f -g -${opt} -D ${objdir} ${FX}/fx_ada.adb -o ${out}
      WORKING_DIRECTORY ${objdir}
      DEPENDS ${FX}/fx_ada.adb VERBATIM)
    list(APPEND ML_ADA_FX ${out})
  endforeach()
  ml_lang_sites(ada ${ML_ADA_FX})
  set(ML_ADA_ORACLE ${ML_ADA_FX})
  list(TRANSFORM ML_ADA_ORACLE PREPEND "ada:")
endif()
# Twice on a cache directory of its own: the second pass takes the frames
# from the symbol cache the first wrote (analysis/symcache.c), and must
# still equal eu-addr2line's.
add_test(NAME symbols_oracle
  COMMAND sh -c "rm -rf \"$0\" && for pass in cold warm; do echo \"pass: $pass symbol cache\"; MEMLENS_DEBUG_CACHE=\"$0\" /usr/bin/python3 \"$@\" || exit $?; done"
          ${CMAKE_BINARY_DIR}/symbols-oracle-cache
          ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_symbols_oracle.py
          $<TARGET_FILE:memlens> $<TARGET_FILE:fx_inline_deep> $<TARGET_FILE:fx_inline>
          $<TARGET_FILE:fx_cpp_sites_o2> $<TARGET_FILE:fx_cpp_o2> $<TARGET_FILE:fx_cpp_sites>
          $<TARGET_FILE:fx_calltree> $<TARGET_FILE:fx_leaks> $<TARGET_FILE:fx_ns_inline>
          $<TARGET_FILE:fx_coro> $<TARGET_FILE:fx_gapline>
          ${ML_FORTRAN_FX} ${ML_ADA_ORACLE} ${ML_CLANG_FX})
set_tests_properties(symbols_oracle PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
ml_test(test_symbols e2e/test_symbols.c e2e/harness.c)
add_dependencies(test_symbols memlens memlens_preload fx_cpp_sites fx_cpp_sites_static fx_cpp_nodebug
                 fx_cpp_nodebug_static fx_inline_deep fx_inline_deep_split fx_inline_deep_dwo fx_fpnew
                 fx_tlsinit_o0)
if(TARGET fx_cpp_sites_prefix)
  add_dependencies(test_symbols fx_cpp_sites_prefix)
endif()
if(TARGET fx_inline_deep_zstd)
  add_dependencies(test_symbols fx_inline_deep_zstd)
endif()
if(ML_CLANG_FX)
  add_dependencies(test_symbols fx_clang) # fx_cpp_sites_clang, fx_tlsinit_clang
endif()
# The debug cache (issue 12, item 4): uncompressed copies of compressed debug
# files give the same frames, are checked by build-id, never through links.
add_test(NAME debug_cache COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_debug_cache.sh ${CMAKE_BINARY_DIR})
set_tests_properties(debug_cache PROPERTIES TIMEOUT 300)
# The symbol cache (issue 12, item 4): frames kept between reports by
# build-id give the same JSON, and are dropped when their files change.
add_test(NAME symbol_cache COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_symbol_cache.sh ${CMAKE_BINARY_DIR})
set_tests_properties(symbol_cache PROPERTIES TIMEOUT 300)
# The ELF symbol index against libdw's own answer for every address of real
# programs (stripped python3, perl, sqlite3, libc): ML_SYM_VERIFY=1.
add_test(NAME symbols_index_vs_libdw
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_symbol_index.sh ${CMAKE_BINARY_DIR})
set_tests_properties(symbols_index_vs_libdw PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
