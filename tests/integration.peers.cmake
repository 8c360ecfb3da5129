# Who may connect to our listeners on this machine (issue 14): nobody (uid 65534) against a
# cluster's -L forwards (master on a test host), forwards on the local runtime, and the peer policy
# of a forward that nobody owns (peers_helper, copied to /var/tmp so that nobody can run it).
lc_test_executable(lc_peers_helper integration/peers_helper.c)
set_target_properties(lc_peers_helper PROPERTIES OUTPUT_NAME peers_helper)
lc_integration_test(test_peers 300 integration/test_peers.c)
add_dependencies(test_peers lc_peers_helper lazyclusterctl)
target_compile_definitions(test_peers PRIVATE LC_PEERS_HELPER="$<TARGET_FILE:lc_peers_helper>")

# lazyclusterctl --peers: forward --local and a detached cluster with its master on lab0, with
# nobody connecting to their listeners here; the refusals on stderr and in the cluster's logs.
add_test(NAME test_cli_peers COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cli_peers.sh)
set_tests_properties(test_cli_peers PROPERTIES LABELS integration TIMEOUT 180
  FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
  ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS};LC_CTL=$<TARGET_FILE:lazyclusterctl>")
