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

# The same, run by plain users (lcbash, lcfish) on their own machine: lazyclusterctl inside lab7
# with no host configured and no XDG_RUNTIME_DIR; what runs and the state directory are theirs.
add_test(NAME test_cli_user COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cli_user.sh)
set_tests_properties(test_cli_user PROPERTIES LABELS integration TIMEOUT 180
  FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
  ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS};LC_CTL=$<TARGET_FILE:lazyclusterctl>")

# What others see of a cluster (issue 14): --env values and the secret in no command line on any
# host or here, nor in logs, state or error messages; modes of directories and files on the hosts
# (0700, 0600, umask 077, --umask 022); nothing left after each stop.
add_test(NAME test_cli_secrets COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cli_secrets.sh)
set_tests_properties(test_cli_secrets PROPERTIES LABELS integration TIMEOUT 300
  FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
  ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS};LC_CTL=$<TARGET_FILE:lazyclusterctl>")
