add_test(NAME test_cli_hosts COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cli_hosts.sh)
set_tests_properties(test_cli_hosts PROPERTIES LABELS integration TIMEOUT 300
  FIXTURES_REQUIRED testhosts RESOURCE_LOCK testhosts
  ENVIRONMENT "LC_TESTHOSTS_DIR=${LC_TESTHOSTS_DIR};LC_TESTHOSTS=${LC_TESTHOSTS};LC_CTL=$<TARGET_FILE:lazyclusterctl>")
# This machine's GPUs when it is the one runtime (start and map with no host configured): a GPU
# each, the user's CUDA_VISIBLE_DEVICES honoured; GPUs from the unit tests' stand-in CUDA runtime.
add_test(NAME test_cli_local_gpus COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cli_local_gpus.sh)
set_tests_properties(test_cli_local_gpus PROPERTIES LABELS integration TIMEOUT 300
  RESOURCE_LOCK testhosts
  ENVIRONMENT "LC_CTL=$<TARGET_FILE:lazyclusterctl>;LC_FAKE_CUDART=$<TARGET_FILE:lc_fake_cudart>")
