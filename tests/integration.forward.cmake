# Port forwards (-L and -R) through real test hosts. tests/support/tcptool is the TCP end point the
# test runs here and on the hosts; it is built optimised and without sanitizers, since it only
# moves and hashes data (1 GiB each way) and the library under test is what must be checked.
add_executable(lc_tcptool support/tcptool.c)
target_compile_definitions(lc_tcptool PRIVATE _GNU_SOURCE)
target_compile_options(lc_tcptool PRIVATE ${LC_WARNINGS} -O2 -fno-sanitize=all)
target_link_options(lc_tcptool PRIVATE -fno-sanitize=all)
target_link_libraries(lc_tcptool PRIVATE Threads::Threads)
set_target_properties(lc_tcptool PROPERTIES OUTPUT_NAME tcptool)
lc_integration_test(test_forward 600 integration/test_forward.c)
add_dependencies(test_forward lc_tcptool)
target_compile_definitions(test_forward PRIVATE LC_TCPTOOL="$<TARGET_FILE:lc_tcptool>")
if(LC_SANITIZE STREQUAL "thread")
  # A gigabyte through a ThreadSanitizer build takes longer than the test's 158 s guard (every
  # copy is instrumented); the normal and address builds carry it, the other cases run here.
  set_property(TEST test_forward APPEND PROPERTY ENVIRONMENT "LC_TEST_SKIP=test_integrity_1gib")
endif()
