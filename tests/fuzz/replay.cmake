# The fuzz regression replayer: every input in tests/fuzz/regressions/ (small inputs that once
# crashed the loader or the accessors, or tripped a sanitizer) plus the model zoo, through the
# same exercise function as the libFuzzer target, in the regular test build (ASan/UBSan when
# MB_SANITIZE=ON). No clang or libFuzzer needed. Used by tests/CMakeLists.txt:
#
#   include(${PROJECT_SOURCE_DIR}/tests/fuzz/replay.cmake)
#
# fuzz_replay_slow regenerates the inputs that once took seconds (0.3-0.6 MB each, too big to
# store) with make_slow_inputs.py and replays them for correctness. Neither test times loads
# (timed unit tests are flaky on shared 2-core CI machines); bench/README.md records how long
# these inputs take, and tests/fuzz/run_fuzz.sh keeps its 1 s limit.
set(MB_FUZZ_DIR "${CMAKE_CURRENT_LIST_DIR}")
add_executable(mb_fuzz_replay "${MB_FUZZ_DIR}/replay.c")
target_include_directories(mb_fuzz_replay PRIVATE "${PROJECT_SOURCE_DIR}/include")
target_compile_options(mb_fuzz_replay PRIVATE ${MB_WARNINGS})
target_link_libraries(mb_fuzz_replay PRIVATE membudget_static)
add_test(NAME fuzz_replay
         COMMAND mb_fuzz_replay -q --slow-ms=0 "${MB_FUZZ_DIR}/regressions"
                 "${PROJECT_SOURCE_DIR}/models" "${PROJECT_SOURCE_DIR}/models/edge")
set_tests_properties(fuzz_replay PROPERTIES TIMEOUT 300 LABELS fuzz)

set(_mb_fuzz_python "${MB_PYTHON}")
if(NOT _mb_fuzz_python)
  find_package(Python3 COMPONENTS Interpreter QUIET)
  set(_mb_fuzz_python "${Python3_EXECUTABLE}")
endif()
if(_mb_fuzz_python)
  add_test(NAME fuzz_replay_slow
           COMMAND "${_mb_fuzz_python}" "${MB_FUZZ_DIR}/make_slow_inputs.py"
                   --out "${CMAKE_CURRENT_BINARY_DIR}/fuzz-slow"
                   --replay "$<TARGET_FILE:mb_fuzz_replay>" --slow-ms 0)
  set_tests_properties(fuzz_replay_slow PROPERTIES TIMEOUT 600 LABELS fuzz)
endif()

# The snapshot reader (pickle and JSON) and the allocator replay: the seeds in snapshots/ and the
# allocator fixtures, every prefix and single-byte variations of each (snapshot_replay.c).
add_executable(mb_fuzz_snapshot_replay "${MB_FUZZ_DIR}/snapshot_replay.c")
target_include_directories(mb_fuzz_snapshot_replay PRIVATE "${PROJECT_SOURCE_DIR}/include")
target_compile_options(mb_fuzz_snapshot_replay PRIVATE ${MB_WARNINGS})
target_link_libraries(mb_fuzz_snapshot_replay PRIVATE membudget_static)
add_test(NAME fuzz_snapshot
         COMMAND mb_fuzz_snapshot_replay "${MB_FUZZ_DIR}/snapshots" --step=4 "${PROJECT_SOURCE_DIR}/tests/alloc/snapshot.pickle")
set_tests_properties(fuzz_snapshot PROPERTIES TIMEOUT 600 LABELS fuzz)

# The setup fuzzer's corpus (fuzz_estimate.c: shapes plus estimate on the zoo's models under a
# fuzzed setup) and its regressions (estimate_regressions/, once there is one), replayed through
# the same function.
add_executable(mb_fuzz_estimate_replay "${MB_FUZZ_DIR}/fuzz_estimate.c")
target_include_directories(mb_fuzz_estimate_replay PRIVATE "${PROJECT_SOURCE_DIR}/include")
target_compile_options(mb_fuzz_estimate_replay PRIVATE ${MB_WARNINGS})
target_compile_definitions(mb_fuzz_estimate_replay PRIVATE MB_FUZZ_ESTIMATE_REPLAY _POSIX_C_SOURCE=200809L
                           MB_FUZZ_MODELS_DIR="${PROJECT_SOURCE_DIR}/models")
target_link_libraries(mb_fuzz_estimate_replay PRIVATE membudget_static)
set(_mb_estimate_inputs "${MB_FUZZ_DIR}/corpus/estimate")
if(EXISTS "${MB_FUZZ_DIR}/estimate_regressions")
  list(APPEND _mb_estimate_inputs "${MB_FUZZ_DIR}/estimate_regressions")
endif()
add_test(NAME fuzz_estimate_replay COMMAND mb_fuzz_estimate_replay ${_mb_estimate_inputs})
set_tests_properties(fuzz_estimate_replay PROPERTIES TIMEOUT 300 LABELS fuzz)
