# Included from tests/CMakeLists.txt: the simulator's unit tests and the
# advisor's end-to-end test with its fixture programs (docs/strategies.md).
foreach(t test_fit test_classes test_buddy test_slab test_bitmap_arena test_replay)
  ml_test(sim_${t} unit/sim/${t}.c)
  target_include_directories(sim_${t} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit/sim)
  target_link_libraries(sim_${t} PRIVATE ml_sim)
endforeach()
