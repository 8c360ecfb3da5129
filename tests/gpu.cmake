# GPUs on the real machine (label gpu). Meaningful on machines with and without a GPU: it checks
# the probe against what the NVIDIA kernel driver has bound, so it passes without one too.
lc_test_executable(test_gpu gpu/test_gpu.c)
add_dependencies(test_gpu lazyclusterctl)
add_test(NAME test_gpu COMMAND test_gpu)
set_tests_properties(test_gpu PROPERTIES LABELS gpu TIMEOUT 120
  ENVIRONMENT "LC_CTL=$<TARGET_FILE:lazyclusterctl>")
