# The terminal viewer (issue 4). The unit tests link ml_viewer_core only: the
# model, the panels and the screen manager run without curses or a terminal.
ml_test(test_viewer_model unit/viewer/test_model.c)
target_link_libraries(test_viewer_model PRIVATE ml_viewer_core)
ml_test(test_viewer_keys unit/viewer/test_keys.c)
target_link_libraries(test_viewer_keys PRIVATE ml_viewer_core)

# A program whose heap grows for about two seconds (the live view's test).
add_executable(fx_grow ${FX}/fx_grow.c)
target_compile_options(fx_grow PRIVATE -O0 -g -fno-builtin)

# End to end in a real terminal (tmux); skipped (77) without tmux. The
# advisor's fixture fx_adv_arena (unit/sim/sim_tests.cmake) gives a known
# suggestion.
set(ML_VIEW_ADV_FIXTURE "")
if(TARGET fx_adv_arena)
  set(ML_VIEW_ADV_FIXTURE $<TARGET_FILE:fx_adv_arena>)
endif()
add_test(NAME viewer_tmux
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_viewer_tmux.sh
          $<TARGET_FILE:memlens> $<TARGET_FILE:fx_counts> $<TARGET_FILE:fx_grow> ${ML_VIEW_ADV_FIXTURE})
set_tests_properties(viewer_tmux PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 240)

# The model and key tests again with AddressSanitizer on the viewer's own code, so that
# a view reading results the analysis has freed is caught even where the
# memory was handed out again at once (views_stay_valid_while_loading).
# Not in a sanitizer build: ASan is there already, or TSan, which it cannot join.
if(NOT ML_SANITIZE AND NOT ML_SANITIZE_THREAD)
  get_target_property(ML_VIEWER_CORE_SRC ml_viewer_core SOURCES)
  list(TRANSFORM ML_VIEWER_CORE_SRC PREPEND ${PROJECT_SOURCE_DIR}/viewer/)
  add_executable(test_viewer_asan unit/viewer/test_keys.c unit/viewer/test_model.c ${ML_VIEWER_CORE_SRC})
  target_include_directories(test_viewer_asan PRIVATE ${CRITERION_INCLUDE} ${PROJECT_SOURCE_DIR}/viewer)
  target_compile_options(test_viewer_asan PRIVATE -fsanitize=address -fno-omit-frame-pointer)
  target_link_options(test_viewer_asan PRIVATE -fsanitize=address)
  target_link_libraries(test_viewer_asan PRIVATE ${CRITERION_LIB} ml_analysis ml_advisor ml_report Threads::Threads)
  add_test(NAME test_viewer_asan COMMAND test_viewer_asan --jobs 2)
  # Leak checking off: Criterion's parallel runner leaks a few bytes of its own.
  set_tests_properties(test_viewer_asan PROPERTIES ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
endif()

# The GPU view (issue 5) in a real terminal, on fx_gpu_events (gpu_tests.cmake).
add_test(NAME viewer_gpu_tmux
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_viewer_gpu_tmux.sh
          $<TARGET_FILE:memlens> $<TARGET_FILE:fx_gpu_events> $<TARGET_FILE:fx_counts>)
set_tests_properties(viewer_gpu_tmux PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 240)

# The viewer at 80x24 (issue 15): a long C++ name and 1,000,000 live blocks
# (fx_longname), the advisor's pool evidence in words (fx_adv_churn).
# fx_widename: a file name of wide (CJK) characters.
add_executable(fx_longname ${FX}/fx_longname.cpp)
target_compile_options(fx_longname PRIVATE -O0 -g -fno-builtin)
add_executable(fx_widename ${FX}/fx_widename.c)
target_compile_options(fx_widename PRIVATE -O0 -g -fno-builtin)
if(TARGET fx_adv_churn)
  add_test(NAME viewer_80x24_tmux
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_viewer_80x24_tmux.sh
            $<TARGET_FILE:memlens> $<TARGET_FILE:fx_longname> $<TARGET_FILE:fx_adv_churn>
            $<TARGET_FILE:fx_widename>)
  set_tests_properties(viewer_80x24_tmux PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 240)
endif()
