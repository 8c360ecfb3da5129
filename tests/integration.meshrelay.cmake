# A host's mesh listens through its mesh relay (src/meshrelay.c): carried, refused, in use, ended,
# no perl, a fish login; nothing left on the hosts.
lc_integration_test(test_meshrelay 240 integration/test_meshrelay.c)
# A start with the mesh and the defaults on four hosts, one without perl: every worker answers on
# every host, the relay holds the ports (sshd on the host without perl), a killed relay is made
# again; nothing left.
add_test(NAME test_cli_mesh COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cli_mesh.sh)
set_tests_properties(test_cli_mesh PROPERTIES LABELS integration TIMEOUT 300
  FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
  ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS};LC_CTL=$<TARGET_FILE:lazyclusterctl>")
