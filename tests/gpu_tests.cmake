# GPU tests (issue 5, docs/gpu.md). The analysis, the JSON and the path from
# memlens_gpu_record() to the report run everywhere; the CUPTI collector's
# tests only where it is built (ML_HAVE_CUPTI_01). Nothing here needs a GPU:
# tests/gpu/run.sh is the check on a machine that has one.

# A program that records synthesized GPU events through libmemlens.so.
add_executable(fx_gpu_events ${FX}/fx_gpu_events.c)
target_include_directories(fx_gpu_events PRIVATE ${CMAKE_SOURCE_DIR}/trace)
target_compile_options(fx_gpu_events PRIVATE -O0 -g -fno-omit-frame-pointer)
target_link_libraries(fx_gpu_events PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)

ml_test(test_gpu unit/analysis/test_gpu.c)
target_link_libraries(test_gpu PRIVATE ml_report)
ml_test(test_gpu_e2e e2e/test_gpu.c e2e/harness.c)
target_link_libraries(test_gpu_e2e PRIVATE ml_report)
add_dependencies(test_gpu_e2e memlens memlens_preload fx_gpu_events fx_counts)
add_dependencies(test_snapshot fx_gpu_events) # GPU traces have snapshots too
add_dependencies(test_report fx_gpu_events) # the GPU part of `memlens diff`
# The HTML page's GPU section on real recordings of it (test_html_browser.sh).
set_property(TEST html_browser APPEND PROPERTY ENVIRONMENT "ML_FX_GPU_EVENTS=$<TARGET_FILE:fx_gpu_events>")
if(ML_HAVE_CUPTI_01) # and the CUPTI collector's, with the fake libcupti below
  target_compile_definitions(test_snapshot PRIVATE ML_HAVE_CUPTI_01)
  add_dependencies(test_snapshot memlens_cupti fake_cupti fx_gpu_inject)
endif()

# tests/gpu/run.sh's parts without a GPU: the scripts parse, the CUDA programs
# compile (when nvcc is here), and check.py reads the real JSON report right.
add_test(NAME gpu_check_selftest
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu/selftest.sh ${CMAKE_BINARY_DIR})
if(CUDAToolkit_NVCC_EXECUTABLE)
  get_filename_component(ML_NVCC_BIN ${CUDAToolkit_NVCC_EXECUTABLE} DIRECTORY)
  get_filename_component(ML_CUDA_HOME ${ML_NVCC_BIN} DIRECTORY)
  set_tests_properties(gpu_check_selftest PROPERTIES
    ENVIRONMENT "NVCC=${CUDAToolkit_NVCC_EXECUTABLE};CUDA_HOME=${ML_CUDA_HOME}")
endif()

if(ML_HAVE_CUPTI_01)
  get_target_property(ML_TEST_CUPTI_INCLUDES CUDA::cupti INTERFACE_INCLUDE_DIRECTORIES)

  # The pure translation and the callback path, with synthesized CUPTI data.
  # libmemlens_cupti.so runs inside the profiled program and is never
  # sanitized, but the unit tests link their own copy of its core, built
  # with the sanitizers when ML_SANITIZE is on.
  if(ML_SANITIZE)
    get_target_property(ML_CUPTI_CORE_SOURCES ml_cupti_core SOURCES)
    list(TRANSFORM ML_CUPTI_CORE_SOURCES PREPEND ${CMAKE_SOURCE_DIR}/cupti/)
    add_library(ml_cupti_core_tested STATIC ${ML_CUPTI_CORE_SOURCES})
    target_compile_options(ml_cupti_core_tested PRIVATE ${ML_WARNINGS} ${ML_SAN_FLAGS})
    target_include_directories(ml_cupti_core_tested PUBLIC ${CMAKE_SOURCE_DIR}/cupti ${CMAKE_SOURCE_DIR}/trace)
    target_include_directories(ml_cupti_core_tested SYSTEM PUBLIC ${ML_TEST_CUPTI_INCLUDES} ${CUDAToolkit_INCLUDE_DIRS})
  else()
    add_library(ml_cupti_core_tested ALIAS ml_cupti_core)
  endif()
  ml_test(test_cupti_translate unit/cupti/test_translate.c)
  target_link_libraries(test_cupti_translate PRIVATE ml_cupti_core_tested)
  ml_test(test_cupti_collector unit/cupti/test_collector.c)
  target_link_libraries(test_cupti_collector PRIVATE ml_cupti_core_tested)
  ml_test(test_cupti_activity unit/cupti/test_activity.c)
  target_link_libraries(test_cupti_activity PRIVATE ml_cupti_core_tested)

  # A fake libcupti.so.12 (as PyTorch brings one along) and a program that
  # plays the CUDA driver for libmemlens_cupti.so.
  add_library(fake_cupti SHARED ${FX}/fake_cupti.c)
  set_target_properties(fake_cupti PROPERTIES OUTPUT_NAME cupti SOVERSION 12
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fakecupti C_VISIBILITY_PRESET hidden)
  target_include_directories(fake_cupti SYSTEM PRIVATE ${ML_TEST_CUPTI_INCLUDES} ${CUDAToolkit_INCLUDE_DIRS})
  # The same fake without the activity API (an old or stripped libcupti).
  add_library(fake_cupti_noact SHARED ${FX}/fake_cupti.c)
  set_target_properties(fake_cupti_noact PROPERTIES OUTPUT_NAME cupti SOVERSION 12
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fakecupti-noact C_VISIBILITY_PRESET hidden)
  target_compile_definitions(fake_cupti_noact PRIVATE FAKE_NO_ACTIVITY)
  target_include_directories(fake_cupti_noact SYSTEM PRIVATE ${ML_TEST_CUPTI_INCLUDES} ${CUDAToolkit_INCLUDE_DIRS})
  add_executable(fx_gpu_inject ${FX}/fx_gpu_inject.c)
  target_include_directories(fx_gpu_inject SYSTEM PRIVATE ${ML_TEST_CUPTI_INCLUDES} ${CUDAToolkit_INCLUDE_DIRS})
  target_compile_options(fx_gpu_inject PRIVATE -O0 -g -fno-omit-frame-pointer)
  target_link_libraries(fx_gpu_inject PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)

  # ... and of a --gpu-pools run with the fake libcupti's pool records.
  set_property(TEST html_browser APPEND PROPERTY ENVIRONMENT
    "ML_FX_GPU_INJECT=$<TARGET_FILE:fx_gpu_inject>" "ML_FAKE_LIBCUPTI=$<TARGET_FILE:fake_cupti>")

  ml_test(test_gpu_inject e2e/test_gpu_inject.c e2e/harness.c)
  target_link_libraries(test_gpu_inject PRIVATE ml_report)
  target_compile_definitions(test_gpu_inject PRIVATE ML_SRC_DIR="${CMAKE_SOURCE_DIR}")
  add_dependencies(test_gpu_inject memlens memlens_preload memlens_cupti fake_cupti fake_cupti_noact
                   fx_gpu_inject fx_counts)

  # STYLE 16: the injection library exports InitializeInjection and nothing
  # else, and links neither libcupti (dlopen'ed, reused) nor libcuda.
  add_test(NAME cupti_exports_only_injection
    COMMAND sh -c "test \"$(nm -D --defined-only $<TARGET_FILE:memlens_cupti> | awk '{print $3}')\" = InitializeInjection && ! readelf -d $<TARGET_FILE:memlens_cupti> | grep -E 'NEEDED.*lib(cupti|cuda)'")
endif()
