# The dask cluster type with a real Dask (python3-distributed): library and CLI paths on the test
# hosts, a client computation through the tunnels, and nothing left after stop or SIGKILL.
lc_integration_test(test_dask 600 integration/test_dask.c)

# examples/dask_cluster against two test hosts: its output and nothing left afterwards.
if(TARGET dask_cluster)
  add_test(NAME test_example_dask_cluster
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_example_dask_cluster.sh)
  set_tests_properties(test_example_dask_cluster PROPERTIES LABELS integration TIMEOUT 300
    FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
    ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS};LC_DASK_CLUSTER=$<TARGET_FILE:dask_cluster>")
endif()

# Issue 13's scenario through lazyclusterctl as a user runs it: a detached Dask cluster of 8
# workers on lab1-lab4, a client, kill -9 of a worker, a host's link down for 45 s, scale to 12
# and 4, logs, stop; nothing left on any host or here.
add_test(NAME test_dask_lives COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_dask_lives.sh)
set_tests_properties(test_dask_lives PROPERTIES LABELS integration TIMEOUT 600
  FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
  ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS};LC_CTL=$<TARGET_FILE:lazyclusterctl>")
