# SIGINT stops `lazyclusterctl start` during discovery, the master's wait and the workers' starts:
# exit 130, nothing left on any host (lc_cluster_cancel under the CLI's signal watcher).
add_test(NAME test_cli_cancel COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cli_cancel.sh)
set_tests_properties(test_cli_cancel PROPERTIES LABELS integration TIMEOUT 400
  FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
  ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS};LC_CTL=$<TARGET_FILE:lazyclusterctl>")
