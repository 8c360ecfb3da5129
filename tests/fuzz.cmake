# libFuzzer targets, one per parser family of outside input (-DLC_FUZZ=ON, clang): tests/fuzz/.
# Each test runs its target for a fixed number of inputs, from its seed corpus in
# tests/fuzz/corpus/NAME/ (and its dictionary, tests/fuzz/NAME.dict, where there is one); what
# the run finds new goes to the build directory, never into the source tree. A crash, a leak, a
# sanitizer report or a timeout fails the test, with the input in fuzz-artifacts/.
# The ten-minute runs and what they found: docs/security.md, "Fuzzing".
if(LC_FUZZ)
  set(LC_FUZZ_TARGETS sshconfig inventory ports listing template hostfacts nvsmi json control
    jobcmd joblog pool)
  set(LC_FUZZ_RUNS 10000 CACHE STRING "Inputs each fuzz test runs (ctest -L fuzz)")
  add_custom_target(lc_fuzz_all)
  foreach(t ${LC_FUZZ_TARGETS})
    add_executable(fuzz_${t} fuzz/fuzz_${t}.c)
    target_include_directories(fuzz_${t} PRIVATE ${PROJECT_SOURCE_DIR}/src)
    target_compile_definitions(fuzz_${t} PRIVATE _GNU_SOURCE)
    target_compile_options(fuzz_${t} PRIVATE ${LC_WARNINGS})
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
    target_link_libraries(fuzz_${t} PRIVATE lc_objects PkgConfig::LIBSSH PkgConfig::LIBUV
      Threads::Threads ${CMAKE_DL_LIBS})
    add_dependencies(lc_fuzz_all fuzz_${t})
    add_test(NAME fuzz_${t}
      COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run.sh $<TARGET_FILE:fuzz_${t}>
              ${CMAKE_CURRENT_SOURCE_DIR}/fuzz ${CMAKE_CURRENT_BINARY_DIR}/fuzz-work ${t}
              -runs=${LC_FUZZ_RUNS})
    set_tests_properties(fuzz_${t} PROPERTIES LABELS fuzz TIMEOUT 120)
  endforeach()
endif()
