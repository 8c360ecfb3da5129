add_test(NAME test_cli_hosts COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cli_hosts.sh)
set_tests_properties(test_cli_hosts PROPERTIES LABELS integration TIMEOUT 300
  FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
  ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS};LC_CTL=$<TARGET_FILE:lazyclusterctl>")
