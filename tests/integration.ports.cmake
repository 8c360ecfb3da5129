# Listening ports and the common free port on real test hosts. tests/support/listen is the
# listener the test starts on the hosts (they share this machine's file system).
add_executable(lc_listen support/listen.c)
target_compile_definitions(lc_listen PRIVATE _GNU_SOURCE)
target_compile_options(lc_listen PRIVATE ${LC_WARNINGS})
set_target_properties(lc_listen PROPERTIES OUTPUT_NAME listen)
lc_integration_test(test_ports 300 integration/test_ports.c)
add_dependencies(test_ports lc_listen)
target_compile_definitions(test_ports PRIVATE LC_LISTEN="$<TARGET_FILE:lc_listen>")
