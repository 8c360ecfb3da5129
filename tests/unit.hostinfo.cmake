# Host facts: os-release, cgroup v1/v2/hybrid limits from fixture trees, affinity, JSON, and the
# GPU probe against a missing library, a library that is not CUDA, and a fake CUDA runtime.
add_library(lc_fake_cudart MODULE unit/fake_cudart.c)
set_target_properties(lc_fake_cudart PROPERTIES PREFIX "" OUTPUT_NAME fake_cudart)
lc_unit_test(test_hostinfo unit/test_hostinfo.c)
add_dependencies(test_hostinfo lc_fake_cudart)
target_compile_definitions(test_hostinfo PRIVATE LC_FAKE_CUDART="$<TARGET_FILE:lc_fake_cudart>")
