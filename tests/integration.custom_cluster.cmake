# examples/custom_cluster (a cluster type in C, GPU or CPU workers): on 3 test hosts with 6
# workers, and on this machine alone with no CUDA runtime. Only when the examples are built.
if(TARGET custom_cluster)
  add_test(NAME test_custom_cluster_hosts
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_custom_cluster.sh hosts)
  set_tests_properties(test_custom_cluster_hosts PROPERTIES LABELS integration TIMEOUT 300
    FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
    ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS};LC_CUSTOM_CLUSTER=$<TARGET_FILE:custom_cluster>")
  add_test(NAME test_custom_cluster_local
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_custom_cluster.sh local)
  set_tests_properties(test_custom_cluster_local PROPERTIES LABELS integration TIMEOUT 180
    ENVIRONMENT "LC_CUSTOM_CLUSTER=$<TARGET_FILE:custom_cluster>")
endif()
