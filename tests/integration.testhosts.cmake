# The test hosts themselves (tests/support/testhosts): the plain users, one per login shell.
add_test(NAME test_testhosts_users COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_testhosts_users.sh)
set_tests_properties(test_testhosts_users PROPERTIES LABELS integration TIMEOUT 120
  FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
  ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS}")
# The test hosts with a PID namespace each (testhosts up --pid-ns: the scale benchmark's).
add_test(NAME test_testhosts_pidns COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_testhosts_pidns.sh)
set_tests_properties(test_testhosts_pidns PROPERTIES LABELS integration TIMEOUT 120
  FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
  ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS}")
