# Host facts: os-release, cgroup v1/v2/hybrid limits from fixture trees, affinity, JSON, and the
# GPU probe against a missing library, a library that is not CUDA, and a fake CUDA runtime and
# NVML (loaded through LC_CUDART_PATH / LC_NVML_PATH, so no GPU is needed).
foreach(fake cudart nvml)
  add_library(lc_fake_${fake} MODULE unit/fake_${fake}.c)
  set_target_properties(lc_fake_${fake} PROPERTIES PREFIX "" OUTPUT_NAME fake_${fake})
endforeach()
lc_unit_test(test_hostinfo unit/test_hostinfo.c)
add_dependencies(test_hostinfo lc_fake_cudart lc_fake_nvml)
target_compile_definitions(test_hostinfo PRIVATE
  LC_FAKE_CUDART="$<TARGET_FILE:lc_fake_cudart>" LC_FAKE_NVML="$<TARGET_FILE:lc_fake_nvml>")
