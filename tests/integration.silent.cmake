# A lazyclusterctl stopped (SIGSTOP) past the heartbeat limit: the lifeline ends the worker and
# says why, and the user reads it; nothing left.
add_test(NAME test_cli_silent COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cli_silent.sh)
set_tests_properties(test_cli_silent PROPERTIES LABELS integration TIMEOUT 240
  FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
  ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS};LC_CTL=$<TARGET_FILE:lazyclusterctl>")
