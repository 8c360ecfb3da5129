/*
 * fuzz_hostfacts.c - what a host's facts script printed (src/hostfacts/parse.c): the marker
 * lines, and through them the readers of hostinfo.c (os-release, meminfo, cgroup v1/v2 files and
 * mountinfo sent back by the host), the port listing, the CPU lists, and the GPU part (probe JSON
 * or nvidia-smi CSV). The same input also goes to lc__cpulist_count alone.
 */
#include "hostfacts.h"

#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *const exes[] = {"python3", "dask", "nvidia-smi", NULL};
  lc_hostinfo *info = calloc(1, sizeof(*info));
  lc__err err = {0};
  char *text = fuzz_strndup(data, size);
  if (info == NULL)
    abort();
  if (lc__hostfacts_parse(info, (const char *)data, size, exes, &err) == 0) {
    if (info->gpu_count > 0 && info->gpus == NULL)
      abort();
    if (info->executable_count != 3)
      abort();
  }
  lc_hostinfo_free(info);
  if (lc__cpulist_count(text) < 0)
    abort();
  free(text);
  return 0;
}
