# SSH hosts that share a 127.0.0.1: this very machine reached over SSH (through a ProxyCommand that
# runs sshd -i here) and two names of one test host; a start with the mesh, every port answering
# here and on a host, a Ctrl-C to the whole process group, nothing left.
add_test(NAME test_cli_self COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cli_self.sh)
set_tests_properties(test_cli_self PROPERTIES LABELS integration TIMEOUT 240
  FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
  ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS};LC_CTL=$<TARGET_FILE:lazyclusterctl>")
