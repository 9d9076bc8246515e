# Included from tests/CMakeLists.txt: the simulator's unit tests and the
# advisor's end-to-end test with its fixture programs (docs/strategies.md).
foreach(t test_fit test_classes test_buddy test_slab test_bitmap_arena test_replay test_whatif)
  ml_test(sim_${t} unit/sim/${t}.c)
  target_include_directories(sim_${t} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit/sim)
  target_link_libraries(sim_${t} PRIVATE ml_sim)
endforeach()

# --- the advisor end to end: fixture programs with known behaviour --------------
set(ML_ADV_FIXTURES fx_adv_slab fx_adv_realloc fx_adv_inplace fx_adv_tokens fx_adv_temp fx_adv_lifetimes fx_adv_clean fx_adv_arena)
foreach(fx ${ML_ADV_FIXTURES})
  add_executable(${fx} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/fixtures/${fx}.c)
  target_compile_options(${fx} PRIVATE -O0 -g -fno-builtin)
endforeach()
add_executable(fx_adv_churn ${CMAKE_CURRENT_SOURCE_DIR}/e2e/fixtures/fx_adv_churn.cpp)
target_compile_options(fx_adv_churn PRIVATE -O0 -g -fno-builtin)
list(APPEND ML_ADV_FIXTURES fx_adv_churn)
ml_test(test_advisor e2e/test_advisor.c e2e/harness.c)
target_link_libraries(test_advisor PRIVATE ml_advisor ml_report)
add_dependencies(test_advisor memlens memlens_preload ${ML_ADV_FIXTURES} fx_sample) # fx_sample: a_sampled_trace_is_budgeted_by_its_samples
set_tests_properties(test_advisor PROPERTIES TIMEOUT 900)
add_dependencies(test_snapshot fx_adv_realloc)
