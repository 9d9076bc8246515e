# The terminal viewer (issue 4). The unit tests link ml_viewer_core only: the
# model, the panels and the screen manager run without curses or a terminal.
ml_test(test_viewer_model unit/viewer/test_model.c)
target_link_libraries(test_viewer_model PRIVATE ml_viewer_core)
ml_test(test_viewer_keys unit/viewer/test_keys.c)
target_link_libraries(test_viewer_keys PRIVATE ml_viewer_core)

# A program whose heap grows for about two seconds (the live view's test).
add_executable(fx_grow ${FX}/fx_grow.c)
target_compile_options(fx_grow PRIVATE -O0 -g -fno-builtin)

# End to end in a real terminal (tmux); skipped (77) without tmux.
add_test(NAME viewer_tmux
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_viewer_tmux.sh
          $<TARGET_FILE:memlens> $<TARGET_FILE:fx_counts> $<TARGET_FILE:fx_grow>)
set_tests_properties(viewer_tmux PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 240)
