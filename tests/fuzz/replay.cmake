# The fuzz regression replayer: every input in tests/fuzz/regressions/ (inputs that once
# crashed, leaked or hung the loader) plus the model zoo, through the same exercise function
# as the libFuzzer target, in the regular (ASan/UBSan when MB_SANITIZE=ON) test build.
# No clang or libFuzzer needed. Use from tests/CMakeLists.txt:
#
#   include(${PROJECT_SOURCE_DIR}/tests/fuzz/replay.cmake)
set(MB_FUZZ_DIR "${CMAKE_CURRENT_LIST_DIR}")
add_executable(mb_fuzz_replay "${MB_FUZZ_DIR}/replay.c")
target_include_directories(mb_fuzz_replay PRIVATE "${PROJECT_SOURCE_DIR}/include")
target_compile_options(mb_fuzz_replay PRIVATE ${MB_WARNINGS})
target_link_libraries(mb_fuzz_replay PRIVATE membudget_static)
add_test(NAME fuzz_replay
         COMMAND mb_fuzz_replay -q "${MB_FUZZ_DIR}/regressions"
                 "${PROJECT_SOURCE_DIR}/models" "${PROJECT_SOURCE_DIR}/models/edge")
set_tests_properties(fuzz_replay PROPERTIES TIMEOUT 300 LABELS fuzz)
