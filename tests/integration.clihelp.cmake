# Every default that start, hosts, map and exec state in --help matches the code (no hosts needed).
add_test(NAME test_cli_help COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cli_help.sh)
set_tests_properties(test_cli_help PROPERTIES LABELS unit TIMEOUT 60
  ENVIRONMENT "LC_CTL=$<TARGET_FILE:lazyclusterctl>")
