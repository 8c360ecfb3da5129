# examples/custom_cluster (a cluster type in C, GPU or CPU workers): on 3 test hosts with 6
# workers; on this machine alone with no CUDA runtime; and on this machine with a stand-in CUDA
# runtime and cuBLAS (integration/fake_cuda_compute.c) so that its GPU code runs without a GPU.
# Only when the examples are built.
if(TARGET custom_cluster)
  add_library(lc_fake_cuda_compute MODULE integration/fake_cuda_compute.c)
  target_compile_options(lc_fake_cuda_compute PRIVATE ${LC_WARNINGS})
  add_dependencies(custom_cluster lc_fake_cuda_compute)

  add_test(NAME test_custom_cluster_hosts
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_custom_cluster.sh hosts)
  set_tests_properties(test_custom_cluster_hosts PROPERTIES LABELS integration TIMEOUT 300
    FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
    ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS};LC_CUSTOM_CLUSTER=$<TARGET_FILE:custom_cluster>")
  # its job server's authentication: intruders of another user on a host, a wrong secret, a
  # squatter on the master's port
  add_test(NAME test_custom_cluster_intruders
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_custom_cluster.sh intruders)
  set_tests_properties(test_custom_cluster_intruders PROPERTIES LABELS integration TIMEOUT 300
    FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
    ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS};LC_CUSTOM_CLUSTER=$<TARGET_FILE:custom_cluster>")
  foreach(mode local fakegpu)
    add_test(NAME test_custom_cluster_${mode}
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_custom_cluster.sh ${mode})
    set_tests_properties(test_custom_cluster_${mode} PROPERTIES LABELS integration TIMEOUT 180
      ENVIRONMENT "LC_CUSTOM_CLUSTER=$<TARGET_FILE:custom_cluster>;LC_FAKE_CUDA=$<TARGET_FILE:lc_fake_cuda_compute>")
  endforeach()
endif()
