# Fuzzing (issue 3): a libFuzzer harness for the trace reader and the
# analysis it feeds, built with clang (the project's compiler may be gcc)
# when clang and its libFuzzer runtime are there, and a bounded run in ctest.
find_program(ML_CLANG NAMES clang clang-17 clang-16 clang-15 clang-14)
set(ML_FUZZ_OK FALSE)
if(ML_CLANG)
  file(WRITE ${CMAKE_BINARY_DIR}/fuzz_probe.c
       "#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n")
  execute_process(COMMAND ${ML_CLANG} -fsanitize=fuzzer,address ${CMAKE_BINARY_DIR}/fuzz_probe.c
                          -o ${CMAKE_BINARY_DIR}/fuzz_probe
                  RESULT_VARIABLE probe OUTPUT_QUIET ERROR_QUIET)
  if(probe EQUAL 0)
    set(ML_FUZZ_OK TRUE)
  endif()
endif()
if(ML_FUZZ_OK)
  set(S ${CMAKE_SOURCE_DIR})
  # The libraries' own source lists, so that a new file there is fuzzed too.
  set(ML_FUZZ_SRC ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_reader.c)
  # The simulator, the advisor, the report and the viewer's model are there
  # for the saved advice ('A' inputs): decoded, then written as JSON, HTML
  # and the viewer's evidence text.
  foreach(lib ml_trace_rt ml_trace_io ml_util ml_analysis ml_sim ml_advisor ml_report ml_viewer_core)
    get_target_property(srcs ${lib} SOURCES)
    get_target_property(dir ${lib} SOURCE_DIR)
    foreach(src ${srcs})
      if(NOT IS_ABSOLUTE ${src})
        set(src ${dir}/${src})
      endif()
      list(APPEND ML_FUZZ_SRC ${src})
    endforeach()
  endforeach()
  add_custom_command(
    OUTPUT ${CMAKE_BINARY_DIR}/fuzz_reader
    COMMAND ${ML_CLANG} -std=gnu11 -g -O1 -fno-omit-frame-pointer
            -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
            -I${S}/trace -I${S}/analysis -I${S}/analysis/sim -I${S}/report -I${S}/viewer
            -I${CMAKE_BINARY_DIR} ${ML_FUZZ_SRC}
            -o ${CMAKE_BINARY_DIR}/fuzz_reader -lzstd -lz -ldw -lelf -lstdc++ -lm -lpthread
    DEPENDS ${ML_FUZZ_SRC}
    COMMENT "Building the trace-reader fuzzer with clang"
    VERBATIM)
  add_custom_target(fuzz_reader ALL DEPENDS ${CMAKE_BINARY_DIR}/fuzz_reader)
  add_dependencies(fuzz_reader ml_report) # its generated page (report_assets.c)
  add_test(NAME fuzz_reader
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_fuzz.sh ${CMAKE_BINARY_DIR}/fuzz_reader
            $<TARGET_FILE:memlens> ${CMAKE_BINARY_DIR} 30 100000)
  set_tests_properties(fuzz_reader PROPERTIES TIMEOUT 180)
  message(STATUS "memlens: fuzzing with ${ML_CLANG} (ctest -R fuzz_reader)")
else()
  message(STATUS "memlens: no clang with libFuzzer: the fuzz test is not built")
endif()
