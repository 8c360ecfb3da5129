# lazyclusterctl map (issue 15) on the test hosts: 40 jobs over 4 hosts with gpus=2 (as root and
# as lcfish), a host's link cut mid-run, --retries, Ctrl-C then --resume, a pool (a worker killed
# mid-job, --update), --results, --send/--return, no host configured, bad input; nothing left on
# any host after each run.
add_test(NAME test_cli_map COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cli_map.sh)
set_tests_properties(test_cli_map PROPERTIES LABELS integration TIMEOUT 600
  FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
  ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS};LC_CTL=$<TARGET_FILE:lazyclusterctl>")

# examples/sweep against two test hosts: the sweep's results in order, the pool's answers with the
# update applied, nothing left on either host.
if(TARGET sweep)
  add_test(NAME test_example_sweep COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_example_sweep.sh)
  set_tests_properties(test_example_sweep PROPERTIES LABELS integration TIMEOUT 180
    FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
    ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS};LC_SWEEP=$<TARGET_FILE:sweep>")
endif()
