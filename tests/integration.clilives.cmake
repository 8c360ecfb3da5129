# lazyclusterctl's clusters that live (issue 13): start --detach, list, status, env, logs, scale,
# stop, run, --ttl, SIGKILL of a supervisor, another user, a foreground start from another shell,
# a fish user; nothing left on the hosts after each.
add_test(NAME test_cli_lives COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cli_lives.sh)
set_tests_properties(test_cli_lives PROPERTIES LABELS integration TIMEOUT 420
  FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
  ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS};LC_CTL=$<TARGET_FILE:lazyclusterctl>")

# lazyclusterctl logs on a cluster entry written by hand (no hosts): merging, filters, -f through
# a rotation, the end of -f.
add_test(NAME test_cli_logs COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cli_logs.sh)
set_tests_properties(test_cli_logs PROPERTIES LABELS integration TIMEOUT 60
  ENVIRONMENT "LC_CTL=$<TARGET_FILE:lazyclusterctl>")
