/*
 * fuzz_nvsmi.c - the output of `nvidia-smi --query-gpu=index,uuid,name,memory.total
 * --format=csv,noheader,nounits` (src/hostfacts/nvsmi.c). The first byte is its exit status.
 */
#include "hostfacts.h"

#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lc_hostinfo *info;
  int status = 0;
  if (size > 0) {
    status = data[0];
    data++;
    size--;
  }
  if ((info = calloc(1, sizeof(*info))) == NULL)
    abort();
  if (lc__nvsmi_parse(info, (const char *)data, size, status) == 0) {
    if (info->gpu_count > 0 && info->gpus == NULL)
      abort();
    if (memchr(info->gpu_reason, '\0', sizeof(info->gpu_reason)) == NULL)
      abort();
  }
  lc_hostinfo_free(info);
  return 0;
}
